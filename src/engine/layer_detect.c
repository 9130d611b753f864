/*
 * DetectNet's training layers with NV-Caffe's semantics: DetectNetTransformation (the
 * augmentation of an image with its boxes, and the ground truth on the stride grid) and
 * L1Loss. The clustering and mAP layers are in layer_detect_cluster.c.
 *
 * DetectNetTransformation computes on the host: it downloads its bottoms in every
 * forward (net->host_reads, as SoftmaxWithLoss with a dynamic normalizer does), so a
 * net with it is never captured as a device graph. Its random draws are
 * cd_rand_uniform(seed, net->rng_counter, image * DNT_DRAWS + k): the trainer sets the
 * counter from the iteration, so a resumed run augments exactly as the first did.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

/* ---- L1Loss --------------------------------------------------------------------------
 * loss = sum |a - b| / N over two bottoms of N items with the same count per item, as
 * NV-Caffe's L1LossLayer; backward da = sign(a - b) / N, db = -da, times the loss
 * weight. Composed of backend ops: sign(d) = [d > 0] - [-d > 0] by the ReLU derivative,
 * and the sum is the 1x1 product sign . d, so the loss stays on the device. */

typedef struct l1_priv {
    float *diff, *sign, *tmp, *ones; /* (count) each */
    int num;
} l1_priv;

static int l1_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    (void)net;
    l1_priv *p = cd_xcalloc(1, sizeof *p);
    l->priv = p;
    return cd_loss_pair_setup(l, &p->num, err, errlen);
}

static int l1_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    l1_priv *p = l->priv;
    size_t n = l->bottom[0]->count;
    float *buf;
    if (cd_layer_buffer_init(net, l, 4 * n, &buf, err, errlen) != CD_OK)
        return CD_ERR;
    p->diff = buf;
    p->sign = buf + n;
    p->tmp = buf + 2 * n;
    p->ones = buf + 3 * n;
    OPS(net)->set(BE(net), n, 1.0f, p->ones);
    return CD_OK;
}

static void l1_forward(cd_net *net, cd_layer *l)
{
    l1_priv *p = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t n = l->bottom[0]->count;
    o->copy(be, p->diff, l->bottom[0]->data, n * sizeof(float));
    o->axpy(be, n, -1.0f, l->bottom[1]->data, p->diff);
    o->act_backward(be, CD_ACT_RELU, 0.0f, n, p->diff, p->diff, p->ones, p->sign);
    o->scale(be, n, -1.0f, p->diff, p->tmp);
    o->act_backward(be, CD_ACT_RELU, 0.0f, n, p->tmp, p->tmp, p->ones, p->tmp);
    o->axpy(be, n, -1.0f, p->tmp, p->sign);
    o->gemm(be, 0, 1, 1, 1, (int)n, 1.0f / (float)p->num, p->sign, p->diff, 0.0f, l->top[0]->data);
}

static void l1_backward(cd_net *net, cd_layer *l)
{
    l1_priv *p = l->priv;
    float alpha = l->loss_weight * net->loss_scale / (float)p->num;
    size_t n = l->bottom[0]->count;
    for (int i = 0; i < 2; i++)
        if (l->bottom[i]->need_backward)
            OPS(net)->scale(BE(net), n, i == 0 ? alpha : -alpha, p->sign, l->bottom[i]->diff);
}

/* ---- DetectNetTransformation ------------------------------------------------------------
 * bottoms: data (N, 3, H, W) pixels 0..255; label (N, ...) B rows of 16 floats per image
 *          (the detection label db: x, y, w, h, alpha, class, 0, rotation_y, truncated,
 *          occlusion, dimensions, location; rows of class -1 are padding).
 * tops:    transformed data (N, 3, image_size_y, image_size_x), pixels minus the mean,
 *          0..255 scale; transformed label (N, 8 + K, image_size_y / stride,
 *          image_size_x / stride): foreground, bbox x1 y1 x2 y2 relative to the cell's top
 *          left, 1/w and 1/h, obj_norm, then one coverage plane per mapped class (K =
 *          the largest object_class dst + 1), NV-Caffe's CoverageGenerator.
 *          Optionally (cdigits's, for DontCare masking) a third top, the care plane (N, 1,
 *          grid): 0 in a cell at least half covered by a DontCare box (class 0) that no
 *          object covers, else 1, to multiply the coverage loss by; and a fourth, the
 *          DontCare boxes (N, label rows, 5) as [x1, y1, x2, y2, 0] in the transformed
 *          image's pixels, zero rows after, for ScoreDetections to leave detections in
 *          them out.
 * TRAIN: hue rotation, desaturation, mean, scale, rotation, flip and a random crop (or a
 * centred one) to the image size, as NV-Caffe in that order; other stages scale the
 * image to the size. Images are handled as 0..1 floats, as NV-Caffe's OpenCV code, and
 * resampled bilinearly (NV-Caffe resizes with INTER_CUBIC). */

#define DNT_ROW 16   /* floats per label row */
#define DNT_DRAWS 16 /* random draws reserved per image */
#define DNT_MAX_MAP 64

typedef struct dnt_box {
    float x, y, w, h, cls;
} dnt_box;

typedef struct dnt_img {
    int w, h;
    float *px; /* (3, h, w) */
    size_t cap;
} dnt_img;

typedef struct dnt_priv {
    /* detectnet_groundtruth_param */
    int stride, gridbox_min, max_cvg_len, min_cvg_len, obj_norm, crop_bboxes;
    float scale_cvg;
    int ox, oy, gx, gy;
    int nmap, map_src[DNT_MAX_MAP], map_dst[DNT_MAX_MAP];
    int nclass;
    /* detectnet_augmentation_param */
    float crop_prob, scale_prob, scale_min, scale_max, flip_prob, rotation_prob, max_rotate;
    float hue_prob, hue_max, desat_prob, desat_max;
    int shift_x, shift_y;
    float mean[3];
    int n, ih, iw, rows;
    uint64_t seed;
    float *in, *lab, *out, *tl; /* host copies: bottoms and tops */
    float *extra[2];            /* the care plane and DontCare list tops' host copies */
    dnt_img a, b;
    dnt_box *boxes;
} dnt_priv;

static void img_size(dnt_img *im, int w, int h)
{
    size_t need = (size_t)3 * w * h;
    if (need > im->cap) {
        im->px = cd_xrealloc(im->px, need * sizeof(float));
        im->cap = need;
    }
    im->w = w;
    im->h = h;
}

static void img_swap(dnt_img *a, dnt_img *b)
{
    dnt_img t = *a;
    *a = *b;
    *b = t;
}

/* OpenCV's float RGB <-> HSV (H in degrees, S and V in 0..1). */
static void rgb_to_hsv(float r, float g, float b, float *h, float *s, float *v)
{
    float mx = fmaxf(r, fmaxf(g, b)), mn = fminf(r, fminf(g, b)), d = mx - mn;
    *v = mx;
    *s = mx > FLT_EPSILON ? d / mx : 0.0f;
    if (d <= FLT_EPSILON) {
        *h = 0;
        return;
    }
    float hh = mx == r ? (g - b) / d : mx == g ? 2.0f + (b - r) / d : 4.0f + (r - g) / d;
    hh *= 60.0f;
    *h = hh < 0 ? hh + 360.0f : hh;
}

static void hsv_to_rgb(float h, float s, float v, float *r, float *g, float *b)
{
    h = fmodf(h / 60.0f, 6.0f);
    if (h < 0)
        h += 6.0f;
    int sector = (int)floorf(h);
    float f = h - (float)sector;
    float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    const float tab[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
    sector = sector > 5 ? 5 : sector;
    *r = tab[sector][0];
    *g = tab[sector][1];
    *b = tab[sector][2];
}

/* hue += rotation (degrees), saturation *= sat, per pixel of a (3, h, w) image */
static void img_hsv(dnt_img *im, float rotation, float sat)
{
    size_t plane = (size_t)im->w * im->h;
    float *r = im->px, *g = r + plane, *b = g + plane;
    for (size_t i = 0; i < plane; i++) {
        float h, s, v;
        rgb_to_hsv(r[i], g[i], b[i], &h, &s, &v);
        hsv_to_rgb(h + rotation, s * sat, v, &r[i], &g[i], &b[i]);
    }
}

/* Bilinear sample of channel plane p (w x h) at (x, y), edges repeated. */
static float sample(const float *p, int w, int h, float x, float y)
{
    x = fminf(fmaxf(x, 0.0f), (float)(w - 1));
    y = fminf(fmaxf(y, 0.0f), (float)(h - 1));
    int x0 = (int)x, y0 = (int)y;
    int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    float fx = x - (float)x0, fy = y - (float)y0;
    const float *r0 = p + (size_t)y0 * w, *r1 = p + (size_t)y1 * w;
    return (1 - fy) * ((1 - fx) * r0[x0] + fx * r0[x1]) + fy * ((1 - fx) * r1[x0] + fx * r1[x1]);
}

/* dst = src resized to w x h (pixel centres aligned, OpenCV's rule); the boxes scale
 * with it. Nothing moves when the size is the same. */
static void img_resize(const dnt_img *src, dnt_img *dst, int w, int h, dnt_box *boxes, int nbox)
{
    img_size(dst, w, h);
    float sx = (float)src->w / (float)w, sy = (float)src->h / (float)h;
    for (int c = 0; c < 3; c++) {
        const float *sp = src->px + (size_t)c * src->w * src->h;
        float *dp = dst->px + (size_t)c * w * h;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                dp[(size_t)y * w + x] = sample(sp, src->w, src->h, ((float)x + 0.5f) * sx - 0.5f,
                                               ((float)y + 0.5f) * sy - 0.5f);
    }
    for (int i = 0; i < nbox; i++) {
        boxes[i].x /= sx;
        boxes[i].w /= sx;
        boxes[i].y /= sy;
        boxes[i].h /= sy;
    }
}

/* Rotation by deg degrees about the image centre into the bounding rectangle of the
 * rotated image (NV-Caffe's augmentation_rotate): uncovered pixels are -0.5 (black
 * after the mean), and each box keeps its size with its centre moved. */
static void img_rotate(const dnt_img *src, dnt_img *dst, float deg, dnt_box *boxes, int nbox)
{
    double a = deg * M_PI / 180.0, cs = cos(a), sn = sin(a);
    double w = src->w, h = src->h;
    double bw = fabs(w * cs) + fabs(h * sn), bh = fabs(w * sn) + fabs(h * cs);
    int ow = (int)ceil(bw - 1e-6), oh = (int)ceil(bh - 1e-6);
    img_size(dst, ow, oh);
    /* forward map: p' = R (p - c) + c', c = (w/2, h/2), c' = (ow/2, oh/2) */
    double cx = w / 2, cy = h / 2, ocx = ow / 2.0, ocy = oh / 2.0;
    for (int c = 0; c < 3; c++) {
        const float *sp = src->px + (size_t)c * src->w * src->h;
        float *dp = dst->px + (size_t)c * ow * oh;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                double dx = x - ocx, dy = y - ocy;
                double xs = cs * dx + sn * dy + cx, ys = -sn * dx + cs * dy + cy;
                dp[(size_t)y * ow + x] = xs < -0.5 || ys < -0.5 || xs > w - 0.5 || ys > h - 0.5
                                             ? -0.5f
                                             : sample(sp, src->w, src->h, (float)xs, (float)ys);
            }
    }
    for (int i = 0; i < nbox; i++) {
        double mx = boxes[i].x + boxes[i].w / 2 - cx, my = boxes[i].y + boxes[i].h / 2 - cy;
        boxes[i].x = (float)(cs * mx - sn * my + ocx - boxes[i].w / 2);
        boxes[i].y = (float)(sn * mx + cs * my + ocy - boxes[i].h / 2);
    }
}

/* Left-right flip; box x becomes w - x - 1 - width, as NV-Caffe's augmentation_flip. */
static void img_flip(dnt_img *im, dnt_box *boxes, int nbox)
{
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < im->h; y++) {
            float *row = im->px + ((size_t)c * im->h + y) * im->w;
            for (int x = 0; x < im->w / 2; x++) {
                float t = row[x];
                row[x] = row[im->w - 1 - x];
                row[im->w - 1 - x] = t;
            }
        }
    for (int i = 0; i < nbox; i++)
        boxes[i].x = (float)im->w - boxes[i].x - 1.0f - boxes[i].w;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* NV-Caffe's transform_crop: the window of size (cw, ch) whose top left is at offset
 * (ox, oy) of src, the part outside src -0.5; boxes move by the offset. */
static void img_crop(const dnt_img *src, dnt_img *dst, int ox, int oy, int cw, int ch, dnt_box *boxes, int nbox)
{
    int ix = imax(0, ox), iy = imax(0, oy), dx = imax(0, -ox), dy = imax(0, -oy);
    /* src_rect = (ix, iy, cw, ch) & src; dst_rect = (dx, dy, its size) & (0, 0, cw, ch) */
    int sw = imax(0, imin(ix + cw, src->w) - imin(ix, src->w)), sh = imax(0, imin(iy + ch, src->h) - imin(iy, src->h));
    int w = imax(0, imin(dx + sw, cw) - dx), h = imax(0, imin(dy + sh, ch) - dy);
    img_size(dst, cw, ch);
    for (size_t i = 0; i < (size_t)3 * cw * ch; i++)
        dst->px[i] = -0.5f;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < h; y++)
            memcpy(dst->px + ((size_t)c * ch + dy + y) * cw + dx,
                   src->px + ((size_t)c * src->h + iy + y) * src->w + ix, (size_t)w * sizeof(float));
    for (int i = 0; i < nbox; i++) {
        boxes[i].x += (float)(dx - ix);
        boxes[i].y += (float)(dy - iy);
    }
}

/* ---- the ground truth (NV-Caffe's RectangularCoverageGenerator) ---- */

typedef struct rectf {
    float x, y, w, h;
} rectf;

static rectf rect_and(rectf a, rectf b)
{
    float x1 = fmaxf(a.x, b.x), y1 = fmaxf(a.y, b.y);
    float x2 = fminf(a.x + a.w, b.x + b.w), y2 = fminf(a.y + a.h, b.y + b.h);
    if (x2 <= x1 || y2 <= y1)
        return (rectf){0, 0, 0, 0};
    return (rectf){x1, y1, x2 - x1, y2 - y1};
}

static int class_dst(const dnt_priv *p, float cls)
{
    if (cls < 0)
        return -1;
    for (int i = 0; i < p->nmap; i++)
        if ((size_t)cls == (size_t)p->map_src[i])
            return p->map_dst[i];
    return -1;
}

/* The grid cells [x0, x1) x [y0, y1) that rectangle r touches, clipped to the grid. */
static void cells_of(const dnt_priv *p, rectf r, int *x0, int *y0, int *x1, int *y1)
{
    float stride = (float)p->stride;
    *x0 = imax(0, (int)floorf(r.x / stride));
    *y0 = imax(0, (int)floorf(r.y / stride));
    *x1 = imin(p->gx, (int)ceilf((r.x + r.w) / stride));
    *y1 = imin(p->gy, (int)ceilf((r.y + r.h) / stride));
}

/* out is (8 + nclass, gy, gx) */
static void coverage(const dnt_priv *p, const dnt_box *boxes, int nbox, float *out)
{
    size_t area = (size_t)p->gx * p->gy;
    memset(out, 0, (8 + (size_t)p->nclass) * area * sizeof(float));
    rectf image = {0, 0, (float)p->ox, (float)p->oy};
    float stride = (float)p->stride, cell_area = stride * stride;
    for (int i = 0; i < nbox; i++) {
        rectf bb = {boxes[i].x, boxes[i].y, boxes[i].w, boxes[i].h};
        if (p->crop_bboxes)
            bb = rect_and(bb, image);
        int dst = class_dst(p, boxes[i].cls);
        if (dst < 0 || bb.w * bb.h < FLT_EPSILON)
            continue;
        float cx = bb.x + bb.w * 0.5f, cy = bb.y + bb.h * 0.5f;
        float sw = bb.w * p->scale_cvg, sh = bb.h * p->scale_cvg;
        if (p->gridbox_min) {
            sw = fminf(bb.w, fmaxf((float)p->min_cvg_len, sw));
            sh = fminf(bb.h, fmaxf((float)p->min_cvg_len, sh));
        } else {
            sw = fminf((float)p->max_cvg_len, sw);
            sh = fminf((float)p->max_cvg_len, sh);
        }
        rectf cov = {cx - sw * 0.5f, cy - sh * 0.5f, sw, sh};
        float norm = cov.w * cov.h > 0 ? cell_area / (cov.w * cov.h) : 0.0f;
        float obj = fmaxf(p->obj_norm ? 0.0f : 1.0f, norm);
        int x0, y0, x1, y1;
        cells_of(p, cov, &x0, &y0, &x1, &y1);
        for (int gy = y0; gy < y1; gy++)
            for (int gx = x0; gx < x1; gx++) {
                rectf cell = {gx * stride, gy * stride, stride, stride};
                rectf in = rect_and(cov, cell);
                if (in.w * in.h / cell_area <= FLT_EPSILON)
                    continue;
                size_t at = (size_t)gy * p->gx + gx;
                for (int k = 0; k < p->nclass; k++)
                    out[(8 + (size_t)k) * area + at] = 0.0f;
                out[(8 + (size_t)dst) * area + at] = 1.0f;
                out[1 * area + at] = bb.x - cell.x;
                out[2 * area + at] = bb.y - cell.y;
                out[3 * area + at] = bb.x + bb.w - cell.x;
                out[4 * area + at] = bb.y + bb.h - cell.y;
                out[5 * area + at] = 1.0f / bb.w;
                out[6 * area + at] = 1.0f / bb.h;
                out[7 * area + at] = obj;
                out[0 * area + at] = 1.0f;
            }
    }
}

/* The care plane (gy, gx) of one image: out is its coverage label (foreground first). */
static void care_plane(const dnt_priv *p, const dnt_box *boxes, int nbox, const float *label, float *care)
{
    size_t area = (size_t)p->gx * p->gy;
    float stride = (float)p->stride, cell_area = stride * stride;
    for (size_t k = 0; k < area; k++)
        care[k] = 1.0f;
    for (int i = 0; i < nbox; i++) {
        if (boxes[i].cls != 0)
            continue;
        rectf bb = {boxes[i].x, boxes[i].y, boxes[i].w, boxes[i].h};
        int x0, y0, x1, y1;
        cells_of(p, bb, &x0, &y0, &x1, &y1);
        for (int gy = y0; gy < y1; gy++)
            for (int gx = x0; gx < x1; gx++) {
                rectf in = rect_and(bb, (rectf){gx * stride, gy * stride, stride, stride});
                size_t at = (size_t)gy * p->gx + gx;
                if (in.w * in.h >= 0.5f * cell_area && label[at] == 0.0f)
                    care[at] = 0.0f;
            }
    }
}

/* The DontCare boxes of one image as list rows [x1, y1, x2, y2, 0] (rows of them),
 * cropped to the transformed image; zero rows after. */
static void dontcare_list(const dnt_priv *p, const dnt_box *boxes, int nbox, float *out, int rows)
{
    memset(out, 0, (size_t)rows * 5 * sizeof(float));
    rectf image = {0, 0, (float)p->ox, (float)p->oy};
    for (int i = 0, r = 0; i < nbox && r < rows; i++) {
        rectf bb = rect_and((rectf){boxes[i].x, boxes[i].y, boxes[i].w, boxes[i].h}, image);
        if (boxes[i].cls != 0 || bb.w * bb.h < FLT_EPSILON)
            continue;
        float *o = out + (size_t)r++ * 5;
        o[0] = bb.x;
        o[1] = bb.y;
        o[2] = bb.x + bb.w;
        o[3] = bb.y + bb.h;
    }
}

/* ---- setup, forward ---- */

static float fparam(const cd_pt_node *m, const char *name, double dflt)
{
    return m ? (float)cd_pt_float(m, name, dflt) : (float)dflt;
}

static int iparam(const cd_pt_node *m, const char *name, long dflt)
{
    return m ? (int)cd_pt_int(m, name, dflt) : (int)dflt;
}

static int dnt_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_blob *data = l->bottom[0], *label = l->bottom[1];
    char s[64];
    if (data->ndim != 4 || data->dims[1] != 3)
        return cd_layer_error(l, err, errlen, "bottom %s (%s) must be colour images (N, 3, H, W); create the "
                              "dataset in colour", data->name, cd_blob_shape_str(data, s, sizeof s));
    size_t per = label->ndim >= 1 && label->dims[0] > 0 ? label->count / (size_t)label->dims[0] : 0;
    if (label->ndim < 1 || label->dims[0] != data->dims[0] || per < DNT_ROW || per % DNT_ROW)
        return cd_layer_error(l, err, errlen, "bottom %s (%s) must be the detection labels of the %d images: "
                              "rows of %d floats each (a detection dataset's label db)", label->name,
                              cd_blob_shape_str(label, s, sizeof s), data->dims[0], DNT_ROW);
    const cd_pt_node *g = cd_pt_get(l->def, "detectnet_groundtruth_param");
    const cd_pt_node *a = cd_pt_get(l->def, "detectnet_augmentation_param");
    const cd_pt_node *tp = cd_pt_get(l->def, "transform_param");
    dnt_priv *p = cd_xcalloc(1, sizeof *p);
    l->priv = p;
    p->stride = iparam(g, "stride", 4);
    p->scale_cvg = fparam(g, "scale_cvg", 0.5);
    p->gridbox_min = g && !strcmp(cd_pt_str(g, "gridbox_type", "GRIDBOX_MAX"), "GRIDBOX_MIN");
    p->max_cvg_len = iparam(g, "max_cvg_len", 50);
    p->min_cvg_len = iparam(g, "min_cvg_len", 50);
    p->obj_norm = g ? cd_pt_bool(g, "obj_norm", 0) : 0;
    p->crop_bboxes = g ? cd_pt_bool(g, "crop_bboxes", 1) : 1;
    /* image_size_x/y (NV-Caffe 0.15), crop_size_x/y its older name */
    p->ox = iparam(g, "image_size_x", iparam(g, "crop_size_x", 1248));
    p->oy = iparam(g, "image_size_y", iparam(g, "crop_size_y", 384));
    if (p->stride < 1 || p->ox < p->stride || p->oy < p->stride)
        return cd_layer_error(l, err, errlen, "stride %d with image_size_x %d and image_size_y %d gives no grid; "
                              "make the image size at least one stride", p->stride, p->ox, p->oy);
    p->gx = p->ox / p->stride;
    p->gy = p->oy / p->stride;
    int nmap = g ? cd_pt_count(g, "object_class") : 0;
    if (nmap > DNT_MAX_MAP)
        return cd_layer_error(l, err, errlen, "%d object_class mappings; at most %d are supported", nmap, DNT_MAX_MAP);
    for (int i = 0; i < nmap; i++) {
        const cd_pt_node *m = cd_pt_nth(g, "object_class", i);
        if (!cd_pt_get(m, "src") || !cd_pt_get(m, "dst"))
            return cd_layer_error(l, err, errlen, "object_class %d needs both src and dst (a class number of the "
                                  "labels and its coverage plane)", i + 1);
        p->map_src[i] = (int)cd_pt_int(m, "src", 0);
        p->map_dst[i] = (int)cd_pt_int(m, "dst", 0);
        if (p->map_dst[i] >= DNT_MAX_MAP)
            return cd_layer_error(l, err, errlen, "object_class dst %d is too large; number the coverage planes "
                                  "from 0", p->map_dst[i]);
    }
    p->nmap = nmap;
    if (!nmap) { /* NV-Caffe's default: class 1 (KITTI's car) is plane 0 */
        p->nmap = 1;
        p->map_src[0] = 1;
        p->map_dst[0] = 0;
    }
    for (int i = 0; i < p->nmap; i++)
        p->nclass = imax(p->nclass, p->map_dst[i] + 1);
    p->crop_prob = fparam(a, "crop_prob", 1.0);
    p->shift_x = iparam(a, "shift_x", 0);
    p->shift_y = iparam(a, "shift_y", 0);
    p->scale_prob = fparam(a, "scale_prob", 0.33);
    p->scale_min = fparam(a, "scale_min", 0.7);
    p->scale_max = fparam(a, "scale_max", 1.0);
    p->flip_prob = fparam(a, "flip_prob", 0.33);
    p->rotation_prob = fparam(a, "rotation_prob", 0.33);
    p->max_rotate = fparam(a, "max_rotate_degree", 1.0);
    p->hue_prob = fparam(a, "hue_rotation_prob", 0.33);
    p->hue_max = fparam(a, "hue_rotation", 15);
    p->desat_prob = fparam(a, "desaturation_prob", 0.33);
    p->desat_max = fparam(a, "desaturation_max", 0.5);
    if (tp && cd_pt_get(tp, "mean_file"))
        return cd_layer_error(l, err, errlen, "transform_param mean_file is not supported here; give mean_value "
                              "(one, or one per channel)");
    int nmean = tp ? cd_pt_count(tp, "mean_value") : 0;
    if (nmean != 0 && nmean != 1 && nmean != 3)
        return cd_layer_error(l, err, errlen, "transform_param has %d mean_value; give one, or one per channel", nmean);
    for (int c = 0; c < 3; c++) {
        const cd_pt_node *m = nmean ? cd_pt_nth(tp, "mean_value", nmean == 3 ? c : 0) : NULL;
        p->mean[c] = m ? (float)atof(m->text) / 255.0f : 0.0f;
    }
    p->n = data->dims[0];
    p->ih = data->dims[2];
    p->iw = data->dims[3];
    p->rows = (int)(per / DNT_ROW);
    p->seed = cd_mix64(net->opts.seed ^ 0x64657465637431ull);
    int dims[4] = {p->n, 3, p->oy, p->ox};
    cd_blob_set_shape(l->top[0], 4, dims);
    int ldims[4] = {p->n, 8 + p->nclass, p->gy, p->gx};
    cd_blob_set_shape(l->top[1], 4, ldims);
    if (l->ntop > 2) {
        int cdims[4] = {p->n, 1, p->gy, p->gx};
        cd_blob_set_shape(l->top[2], 4, cdims);
    }
    if (l->ntop > 3) {
        int bdims[3] = {p->n, p->rows, 5};
        cd_blob_set_shape(l->top[3], 3, bdims);
    }
    net->host_reads = 1;
    return CD_OK;
}

static int dnt_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    dnt_priv *p = l->priv;
    (void)net, (void)err, (void)errlen;
    p->in = cd_xrealloc(p->in, l->bottom[0]->count * sizeof(float));
    p->lab = cd_xrealloc(p->lab, l->bottom[1]->count * sizeof(float));
    p->out = cd_xrealloc(p->out, l->top[0]->count * sizeof(float));
    p->tl = cd_xrealloc(p->tl, l->top[1]->count * sizeof(float));
    for (int t = 2; t < l->ntop; t++)
        p->extra[t - 2] = cd_xrealloc(p->extra[t - 2], l->top[t]->count * sizeof(float));
    p->boxes = cd_xrealloc(p->boxes, (size_t)p->rows * sizeof *p->boxes);
    return CD_OK;
}

static float draw(const dnt_priv *p, const cd_net *net, int image, int k)
{
    return cd_rand_uniform(p->seed, net->rng_counter, (uint64_t)image * DNT_DRAWS + (uint64_t)k);
}

/* The training augmentations of image i in p->a with its boxes, in NV-Caffe's order,
 * leaving the network-sized result in p->a. */
static void augment(dnt_priv *p, const cd_net *net, int i, int nbox)
{
    float rot = draw(p, net, i, 1) * 2 * p->hue_max - p->hue_max;
    rot = fmaxf(fminf(rot, 180.0f), -180.0f);
    int do_hue = draw(p, net, i, 0) < p->hue_prob && fabsf(rot) > FLT_EPSILON;
    float sat = 1.0f - draw(p, net, i, 3) * p->desat_max;
    int do_sat = draw(p, net, i, 2) < p->desat_prob && sat < 1.0f - 1.0f / 255;
    if (do_hue || do_sat)
        img_hsv(&p->a, do_hue ? rot : 0.0f, do_sat ? sat : 1.0f);
    size_t plane = (size_t)p->a.w * p->a.h;
    for (int c = 0; c < 3; c++)
        for (size_t k = 0; k < plane; k++)
            p->a.px[(size_t)c * plane + k] -= p->mean[c];
    float scale = p->scale_min + (p->scale_max - p->scale_min) * draw(p, net, i, 5);
    if (draw(p, net, i, 4) < p->scale_prob) {
        int w = (int)lroundf((float)p->a.w * scale), h = (int)lroundf((float)p->a.h * scale);
        if (w >= 1 && h >= 1 && (w != p->a.w || h != p->a.h)) {
            img_resize(&p->a, &p->b, w, h, p->boxes, nbox);
            img_swap(&p->a, &p->b);
        }
    }
    float deg = (draw(p, net, i, 7) - 0.5f) * 2 * p->max_rotate;
    if (draw(p, net, i, 6) < p->rotation_prob && fabsf(deg) > FLT_EPSILON) {
        img_rotate(&p->a, &p->b, deg, p->boxes, nbox);
        img_swap(&p->a, &p->b);
    }
    if (draw(p, net, i, 8) < p->flip_prob)
        img_flip(&p->a, p->boxes, nbox);
    int ox, oy;
    if (draw(p, net, i, 9) < p->crop_prob) {
        ox = (int)lroundf(draw(p, net, i, 10) * (float)(p->a.w - p->ox + p->shift_x)) - p->shift_x / 2;
        oy = (int)lroundf(draw(p, net, i, 11) * (float)(p->a.h - p->oy + p->shift_y)) - p->shift_y / 2;
    } else {
        ox = (p->a.w - p->ox) / 2;
        oy = (p->a.h - p->oy) / 2;
    }
    if (ox != 0 || oy != 0 || p->a.w != p->ox || p->a.h != p->oy) {
        img_crop(&p->a, &p->b, ox, oy, p->ox, p->oy, p->boxes, nbox);
        img_swap(&p->a, &p->b);
    }
}

static void dnt_forward(cd_net *net, cd_layer *l)
{
    dnt_priv *p = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    o->download(be, p->in, l->bottom[0]->data, l->bottom[0]->count * sizeof(float));
    o->download(be, p->lab, l->bottom[1]->data, l->bottom[1]->count * sizeof(float));
    size_t in_plane = (size_t)p->ih * p->iw, out_img = (size_t)3 * p->ox * p->oy;
    size_t label_img = l->top[1]->count / (size_t)p->n;
    for (int i = 0; i < p->n; i++) {
        const float *rows = p->lab + (size_t)i * p->rows * DNT_ROW;
        int nbox = 0;
        for (int r = 0; r < p->rows; r++) {
            const float *row = rows + (size_t)r * DNT_ROW;
            if (row[5] < 0) /* padding */
                continue;
            p->boxes[nbox++] = (dnt_box){row[0], row[1], row[2], row[3], row[5]};
        }
        img_size(&p->a, p->iw, p->ih);
        const float *src = p->in + (size_t)i * 3 * in_plane;
        for (size_t k = 0; k < 3 * in_plane; k++)
            p->a.px[k] = src[k] / 255.0f;
        if (net->phase_train) {
            augment(p, net, i, nbox);
        } else {
            for (int c = 0; c < 3; c++)
                for (size_t k = 0; k < in_plane; k++)
                    p->a.px[(size_t)c * in_plane + k] -= p->mean[c];
            if (p->a.w != p->ox || p->a.h != p->oy) {
                img_resize(&p->a, &p->b, p->ox, p->oy, p->boxes, nbox);
                img_swap(&p->a, &p->b);
            }
        }
        float *dst = p->out + (size_t)i * out_img;
        for (size_t k = 0; k < out_img; k++)
            dst[k] = p->a.px[k] * 255.0f;
        coverage(p, p->boxes, nbox, p->tl + (size_t)i * label_img);
        if (l->ntop > 2)
            care_plane(p, p->boxes, nbox, p->tl + (size_t)i * label_img, p->extra[0] + (size_t)i * p->gx * p->gy);
        if (l->ntop > 3)
            dontcare_list(p, p->boxes, nbox, p->extra[1] + (size_t)i * p->rows * 5, p->rows);
    }
    o->upload(be, l->top[0]->data, p->out, l->top[0]->count * sizeof(float));
    o->upload(be, l->top[1]->data, p->tl, l->top[1]->count * sizeof(float));
    for (int t = 2; t < l->ntop; t++)
        o->upload(be, l->top[t]->data, p->extra[t - 2], l->top[t]->count * sizeof(float));
}

static void dnt_destroy(cd_net *net, cd_layer *l)
{
    dnt_priv *p = l->priv;
    (void)net;
    if (!p)
        return;
    free(p->in);
    free(p->lab);
    free(p->out);
    free(p->tl);
    free(p->extra[0]);
    free(p->extra[1]);
    free(p->a.px);
    free(p->b.px);
    free(p->boxes);
}

const cd_layer_type cd_layers_detect[] = {
    {.name = "L1Loss", .param_field = NULL, .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
     .flags = CD_LAYER_LOSS | CD_LAYER_SCALAR, .setup = l1_setup, .init = l1_init, .forward = l1_forward,
     .backward = l1_backward},
    {.name = "DetectNetTransformation", .param_field = "detectnet_groundtruth_param",
     .param_field2 = "detectnet_augmentation_param", .min_bottoms = 2,
     .max_bottoms = 2, .min_tops = 2, .max_tops = 4, .setup = dnt_setup, .init = dnt_init,
     .forward = dnt_forward, .destroy = dnt_destroy},
    {.name = NULL},
};
