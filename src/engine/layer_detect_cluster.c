/*
 * The Python layers DetectNet names, run natively: a Python layer whose python_param
 * (module, layer) is a row of py_impls runs that row's code, and any other Python layer
 * is refused at build, naming it. All four compute on the host from downloaded bottoms
 * (net->host_reads) and have no backward:
 *
 *   caffe.layers.detectnet.clustering ClusterDetections: coverage (N, K, gh, gw) and
 *     bboxes (N, 4, gh, gw) -> K tops (N, max_boxes, 5), rows [x1, y1, x2, y2,
 *     confidence] in input pixels, sorted by confidence, zero rows after the last box:
 *     the cells whose coverage reaches the threshold propose their box, the proposals
 *     are grouped as OpenCV's groupRectangles groups them (eps, min group size), and a
 *     group's confidence is log(its size). param_str "image_size_x, image_size_y,
 *     stride, gridbox_cvg_threshold, gridbox_rect_thresh, gridbox_rect_eps, min_height
 *     [, num_classes [, max_boxes]]".
 *   caffe.layers.detectnet.clustering ClusterGroundtruth: coverage-label and
 *     bbox-label -> K tops of the true boxes (duplicates of one box, one per cell it
 *     covers, removed), confidence 0. param_str "image_size_x, image_size_y, stride
 *     [, num_classes [, max_boxes]]".
 *   caffe.layers.detectnet.mean_ap ScoreDetections: true boxes and detections of one
 *     class (or K of each: the K true lists, then the K detection lists), and optionally
 *     last the DontCare boxes (DetectNetTransformation's fourth top) -> the marked
 *     list (N, R, 5), column 4 being 1 (a true positive), 2 (a false positive) or 3 (a
 *     missed true box); a detection matches the first unmatched true box with IoU >=
 *     param_str (default 0.7, as mean_ap.py), and an unmatched one in a DontCare box is
 *     left out (cd_det_in_dontcare, inference's rule).
 *   caffe.layers.detectnet.mean_ap mAP: the marked list -> tops mAP, precision and
 *     recall of the batch in percent, as mean_ap.py's calcmAP: precision = TP / (TP +
 *     FP), recall = TP / (TP + missed), mAP = precision * recall / 100.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/detect.h"
#include "cdigits/util.h"
#include "engine_internal.h"

#define PY_MAX_ARGS 16

typedef struct py_priv py_priv;

typedef struct py_impl {
    const char *module, *layer;
    int min_bottoms, max_bottoms, min_tops, max_tops;
    int (*setup)(cd_net *net, cd_layer *l, py_priv *p, char *err, size_t errlen);
    void (*forward)(cd_net *net, cd_layer *l);
} py_impl;

struct py_priv {
    const py_impl *impl;
    double args[PY_MAX_ARGS];
    int nargs;
    /* clustering */
    int gt, img_x, img_y, stride, rect_thresh, min_height, nclass, max_boxes;
    double cvg_thresh, eps;
    /* scoring */
    double iou;
    int pairs, dontcare; /* dontcare: the last bottom lists DontCare boxes */
    float *host;    /* the bottoms, downloaded one after the other */
    float *out;     /* the tops' values */
    size_t host_cap, out_cap;
};

static float *grow(float **buf, size_t *cap, size_t n)
{
    if (n > *cap) {
        *buf = cd_xrealloc(*buf, n * sizeof(float));
        *cap = n;
    }
    return *buf;
}

/* the bottoms from..to-1 into p->host, one after the other; returns p->host */
static float *download_bottoms(cd_net *net, cd_layer *l, py_priv *p, int from, int to)
{
    size_t n = 0;
    for (int i = from; i < to; i++)
        n += l->bottom[i]->count;
    float *h = grow(&p->host, &p->host_cap, n ? n : 1);
    for (int i = from; i < to; i++) {
        OPS(net)->download(BE(net), h, l->bottom[i]->data, l->bottom[i]->count * sizeof(float));
        h += l->bottom[i]->count;
    }
    return p->host;
}

/* ---- ClusterDetections, ClusterGroundtruth ------------------------------------------ */

typedef struct irect {
    int x, y, w, h;
} irect;

/* OpenCV's SimilarRects */
static int similar(irect a, irect b, double eps)
{
    double delta = eps * (fmin(a.w, b.w) + fmin(a.h, b.h)) * 0.5;
    return fabs((double)a.x - b.x) <= delta && fabs((double)a.y - b.y) <= delta &&
           fabs((double)a.x + a.w - b.x - b.w) <= delta && fabs((double)a.y + a.h - b.y - b.h) <= delta;
}

static int find_root(int *parent, int i)
{
    while (parent[i] != i)
        i = parent[i] = parent[parent[i]];
    return i;
}

typedef struct det {
    float box[4];
    float conf;
    int order;
} det;

static int det_cmp(const void *a, const void *b)
{
    const det *x = a, *y = b;
    if (x->conf != y->conf)
        return x->conf > y->conf ? -1 : 1;
    return x->order - y->order;
}

/*
 * OpenCV's groupRectangles(rects, thresh, eps) with weights, on n rects (which are
 * DetectNet's [x1, y1, x2, y2] passed as [x, y, width, height], as clustering.py passes
 * them): rects are partitioned into classes of similar ones (transitively), each class
 * averaged; classes of at most thresh members are dropped, and so is a class lying
 * inside a larger one. With thresh <= 0 every rect is its own group of weight 1.
 * Writes the groups to out (at most n) and returns their count.
 */
static int group_rectangles(const irect *r, int n, int thresh, double eps, irect *out, int *weight)
{
    if (thresh <= 0) {
        for (int i = 0; i < n; i++) {
            out[i] = r[i];
            weight[i] = 1;
        }
        return n;
    }
    int *parent = cd_xmalloc((size_t)n * 3 * sizeof(int)), *label = parent + n, *cnt = parent + 2 * n;
    for (int i = 0; i < n; i++)
        parent[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (similar(r[i], r[j], eps)) {
                int a = find_root(parent, i), b = find_root(parent, j);
                if (a != b)
                    parent[b] = a;
            }
    int nclass = 0;
    for (int i = 0; i < n; i++) {
        int root = find_root(parent, i);
        if (root == i)
            label[i] = nclass++;
    }
    long *sum = cd_xcalloc((size_t)nclass * 4, sizeof(long));
    memset(cnt, 0, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) {
        int c = label[find_root(parent, i)];
        sum[c * 4 + 0] += r[i].x;
        sum[c * 4 + 1] += r[i].y;
        sum[c * 4 + 2] += r[i].w;
        sum[c * 4 + 3] += r[i].h;
        cnt[c]++;
    }
    irect *avg = cd_xmalloc((size_t)nclass * sizeof *avg);
    for (int c = 0; c < nclass; c++) {
        float s = 1.0f / (float)cnt[c];
        avg[c] = (irect){(int)lrintf((float)sum[c * 4] * s), (int)lrintf((float)sum[c * 4 + 1] * s),
                         (int)lrintf((float)sum[c * 4 + 2] * s), (int)lrintf((float)sum[c * 4 + 3] * s)};
    }
    int nout = 0;
    for (int i = 0; i < nclass; i++) {
        irect r1 = avg[i];
        int n1 = cnt[i], j;
        if (n1 <= thresh)
            continue;
        for (j = 0; j < nclass; j++) {
            int n2 = cnt[j];
            if (j == i || n2 <= thresh)
                continue;
            irect r2 = avg[j];
            int dx = (int)lrint(r2.w * eps), dy = (int)lrint(r2.h * eps);
            if (r1.x >= r2.x - dx && r1.y >= r2.y - dy && r1.x + r1.w <= r2.x + r2.w + dx &&
                r1.y + r1.h <= r2.y + r2.h + dy && (n2 > (n1 > 3 ? n1 : 3) || n1 < 3))
                break;
        }
        if (j == nclass) {
            out[nout] = r1;
            weight[nout++] = n1;
        }
    }
    free(avg);
    free(sum);
    free(parent);
    return nout;
}

static int cluster_setup(cd_net *net, cd_layer *l, py_priv *p, char *err, size_t errlen)
{
    const cd_blob *cvg = l->bottom[0], *box = l->bottom[1];
    char s1[64], s2[64];
    int need = p->gt ? 3 : 7;
    if (p->nargs < need)
        return cd_layer_error(l, err, errlen, "param_str has %d values; %s needs %s", p->nargs, p->impl->layer,
                              p->gt ? "\"image_size_x, image_size_y, stride[, num_classes[, max_boxes]]\""
                                    : "\"image_size_x, image_size_y, stride, gridbox_cvg_threshold, "
                                      "gridbox_rect_thresh, gridbox_rect_eps, min_height[, num_classes[, max_boxes]]\"");
    p->img_x = (int)p->args[0];
    p->img_y = (int)p->args[1];
    p->stride = (int)p->args[2];
    if (!p->gt) {
        p->cvg_thresh = p->args[3];
        p->rect_thresh = (int)p->args[4];
        p->eps = p->args[5];
        p->min_height = (int)p->args[6];
    }
    int at = p->gt ? 3 : 7;
    p->nclass = p->nargs > at ? (int)p->args[at] : 1;
    p->max_boxes = p->nargs > at + 1 ? (int)p->args[at + 1] : 50;
    if (p->img_x < 1 || p->stride < 1 || p->img_x < p->stride || p->max_boxes < 1)
        return cd_layer_error(l, err, errlen, "param_str gives image_size_x %d, stride %d and max_boxes %d; the "
                              "image must be at least one stride wide and max_boxes at least 1",
                              p->img_x, p->stride, p->max_boxes);
    if (cvg->ndim != 4 || box->ndim != 4 || box->dims[1] != 4 || cvg->dims[0] != box->dims[0] ||
        cvg->dims[2] != box->dims[2] || cvg->dims[3] != box->dims[3])
        return cd_layer_error(l, err, errlen, "bottoms %s (%s) and %s (%s) must be a coverage (N, classes, H, W) "
                              "and its boxes (N, 4, H, W)", cvg->name, cd_blob_shape_str(cvg, s1, sizeof s1),
                              box->name, cd_blob_shape_str(box, s2, sizeof s2));
    if (cvg->dims[1] != p->nclass || l->ntop != p->nclass)
        return cd_layer_error(l, err, errlen, "%s has %d coverage planes, param_str says %d classes and the layer "
                              "has %d tops; they must agree (one top per class)", cvg->name, cvg->dims[1],
                              p->nclass, l->ntop);
    int dims[3] = {cvg->dims[0], p->max_boxes, 5};
    for (int t = 0; t < l->ntop; t++)
        cd_blob_set_shape(l->top[t], 3, dims);
    net->host_reads = 1;
    return CD_OK;
}

static int clustering_gt_setup(cd_net *net, cd_layer *l, py_priv *p, char *err, size_t errlen)
{
    p->gt = 1;
    return cluster_setup(net, l, p, err, errlen);
}

/* One image's class plane: its proposals, then its rows (out is max_boxes x 5). */
static void cluster_image(const py_priv *p, const float *cvg, const float *box, int gh, int gw, float *out,
                          irect *rects, float (*props)[4], irect *groups, int *weight, det *dets)
{
    int grid_x = p->img_x / p->stride, grid_y = p->img_y / p->stride;
    int cell_w = grid_x > 0 ? p->img_x / grid_x : p->stride, cell_h = grid_y > 0 ? p->img_y / grid_y : p->stride;
    size_t plane = (size_t)gh * gw;
    int n = 0;
    for (int y = 0; y < gh; y++)
        for (int x = 0; x < gw; x++) {
            size_t at = (size_t)y * gw + x;
            float c = cvg[at];
            if (p->gt ? !(c > 0) : !(c >= p->cvg_thresh))
                continue;
            float mx = (float)(x * cell_w), my = (float)(y * cell_h);
            float b[4] = {box[at] + mx, box[plane + at] + my, box[2 * plane + at] + mx, box[3 * plane + at] + my};
            if (p->gt) { /* one true box is written in every cell it covers: keep it once */
                int dup = 0;
                for (int k = 0; k < n && !dup; k++)
                    dup = fabsf(props[k][0] - b[0]) < 1e-3f && fabsf(props[k][1] - b[1]) < 1e-3f &&
                          fabsf(props[k][2] - b[2]) < 1e-3f && fabsf(props[k][3] - b[3]) < 1e-3f;
                if (dup)
                    continue;
            }
            memcpy(props[n], b, sizeof b);
            n++;
        }
    memset(out, 0, (size_t)p->max_boxes * 5 * sizeof(float));
    int ndet = 0;
    if (p->gt) {
        for (int k = 0; k < n; k++)
            dets[ndet++] = (det){{props[k][0], props[k][1], props[k][2], props[k][3]}, 0.0f, k};
    } else if (n > 0) {
        for (int k = 0; k < n; k++) /* as the Python binding converts them: truncated */
            rects[k] = (irect){(int)props[k][0], (int)props[k][1], (int)props[k][2], (int)props[k][3]};
        int ng = group_rectangles(rects, n, p->rect_thresh, p->eps, groups, weight);
        for (int k = 0; k < ng; k++)
            if (groups[k].h - groups[k].y >= p->min_height)
                dets[ndet++] = (det){{(float)groups[k].x, (float)groups[k].y, (float)groups[k].w, (float)groups[k].h},
                                     logf((float)weight[k]), k};
        qsort(dets, (size_t)ndet, sizeof *dets, det_cmp);
    }
    for (int k = 0; k < ndet && k < p->max_boxes; k++) {
        memcpy(out + (size_t)k * 5, dets[k].box, 4 * sizeof(float));
        out[(size_t)k * 5 + 4] = dets[k].conf;
    }
}

static void cluster_forward(cd_net *net, cd_layer *l)
{
    py_priv *p = l->priv;
    const cd_blob *cb = l->bottom[0];
    int n = cb->dims[0], k = cb->dims[1], gh = cb->dims[2], gw = cb->dims[3];
    size_t plane = (size_t)gh * gw;
    float *h = download_bottoms(net, l, p, 0, 2), *cvg = h, *box = h + cb->count;
    size_t per_top = (size_t)n * p->max_boxes * 5;
    float *out = grow(&p->out, &p->out_cap, per_top * (size_t)k);
    irect *rects = cd_xmalloc(plane * (2 * sizeof(irect) + sizeof(int) + sizeof(det) + 4 * sizeof(float)));
    irect *groups = rects + plane;
    int *weight = (int *)(groups + plane);
    det *dets = (det *)(weight + plane);
    float (*props)[4] = (float (*)[4])(dets + plane);
    for (int c = 0; c < k; c++)
        for (int i = 0; i < n; i++)
            cluster_image(p, cvg + ((size_t)i * k + c) * plane, box + (size_t)i * 4 * plane, gh, gw,
                          out + c * per_top + (size_t)i * p->max_boxes * 5, rects, props, groups, weight, dets);
    free(rects);
    for (int c = 0; c < k; c++)
        OPS(net)->upload(BE(net), l->top[c]->data, out + c * per_top, per_top * sizeof(float));
}

/* ---- ScoreDetections, mAP ------------------------------------------------------------ */

static int score_setup(cd_net *net, cd_layer *l, py_priv *p, char *err, size_t errlen)
{
    char s[64];
    p->iou = p->nargs > 0 ? p->args[0] : 0.7;
    /* at least 2 (py_impls); an odd count: the last bottom is the DontCare box list
     * (DetectNetTransformation's fourth top) */
    p->pairs = l->nbottom / 2;
    p->dontcare = l->nbottom % 2;
    int n = l->bottom[0]->dims[0], rows = 0;
    for (int i = 0; i < l->nbottom; i++) {
        const cd_blob *b = l->bottom[i];
        if (b->ndim != 3 || b->dims[2] != 5 || b->dims[0] != n)
            return cd_layer_error(l, err, errlen, "bottom %s (%s) must be a box list (N, boxes, 5) of the same N "
                                  "images as the others", b->name, cd_blob_shape_str(b, s, sizeof s));
        rows += b->dims[1];
    }
    int dims[3] = {n, rows, 5};
    cd_blob_set_shape(l->top[0], 3, dims);
    net->host_reads = 1;
    return CD_OK;
}

/* The boxes of a list (N's image rows of [x1, y1, x2, y2, conf]) that are not all zeros,
 * and which row each is. */
static int list_boxes(const float *rows, int n, cd_det_box *out, int *row)
{
    int k = 0;
    for (int j = 0; j < n; j++) {
        const float *b = rows + (size_t)j * 5;
        if (!b[0] && !b[1] && !b[2] && !b[3])
            continue;
        out[k] = (cd_det_box){b[0], b[1], b[2], b[3], b[4], 1};
        row[k++] = j;
    }
    return k;
}

/* mean_ap.py's score_det for one image of one class (cd_det_match): the matched
 * detections (marked 1), the others (2) but those in a DontCare box of dc (ndc boxes,
 * class 0: cd_det_in_dontcare), then the true boxes no detection matched (3), appended
 * at out; returns the rows. scratch has room for ng + nd boxes, rows and marks. */
static int score_image(const float *gt, int ng, const float *dt, int nd, const cd_det_box *dc, int ndc, double thr,
                       float *out, cd_det_box *boxes, int *rows, char *marks)
{
    cd_det_box *g = boxes, *d = boxes + ng;
    int *grow_ = rows, *drow = rows + ng;
    int kg = list_boxes(gt, ng, g, grow_), kd = list_boxes(dt, nd, d, drow);
    char *gmatch = marks, *dmatch = marks + ng;
    cd_det_match(g, kg, d, kd, thr, gmatch, dmatch);
    int r = 0;
    for (int pass = 1; pass <= 3; pass++) {
        int cnt = pass == 3 ? kg : kd;
        for (int j = 0; j < cnt; j++) {
            int matched = pass == 3 ? gmatch[j] : dmatch[j];
            if ((pass == 1 && !matched) || (pass != 1 && matched))
                continue;
            if (pass == 2 && cd_det_in_dontcare(&d[j], dc, ndc))
                continue;
            const float *b = (pass == 3 ? gt + (size_t)grow_[j] * 5 : dt + (size_t)drow[j] * 5);
            memcpy(out + (size_t)r * 5, b, 4 * sizeof(float));
            out[(size_t)r * 5 + 4] = (float)pass;
            r++;
        }
    }
    return r;
}

static void score_forward(cd_net *net, cd_layer *l)
{
    py_priv *p = l->priv;
    float *h = download_bottoms(net, l, p, 0, l->nbottom);
    const cd_blob *top = l->top[0];
    int n = top->dims[0], rows = top->dims[1];
    float *out = grow(&p->out, &p->out_cap, top->count);
    memset(out, 0, top->count * sizeof(float));
    size_t off[2 * CD_LAYER_MAX_BLOBS];
    int maxr = 1;
    for (int i = 0, o = 0; i < l->nbottom; i++) {
        off[i] = (size_t)o;
        o += (int)l->bottom[i]->count;
        maxr = l->bottom[i]->dims[1] > maxr ? l->bottom[i]->dims[1] : maxr;
    }
    cd_det_box *boxes = cd_xmalloc(3 * (size_t)maxr * sizeof *boxes), *dc = boxes + 2 * maxr;
    int *rowidx = cd_xmalloc(3 * (size_t)maxr * sizeof *rowidx);
    char *marks = cd_xmalloc(2 * (size_t)maxr);
    for (int i = 0; i < n; i++) {
        int r = 0, ndc = 0;
        if (p->dontcare) {
            const cd_blob *b = l->bottom[2 * p->pairs];
            ndc = list_boxes(h + off[2 * p->pairs] + (size_t)i * b->dims[1] * 5, b->dims[1], dc,
                             rowidx + 2 * maxr);
            for (int k = 0; k < ndc; k++)
                dc[k].cls = 0;
        }
        for (int c = 0; c < p->pairs; c++) {
            const cd_blob *g = l->bottom[c], *d = l->bottom[p->pairs + c];
            r += score_image(h + off[c] + (size_t)i * g->dims[1] * 5, g->dims[1],
                             h + off[p->pairs + c] + (size_t)i * d->dims[1] * 5, d->dims[1], dc, ndc, p->iou,
                             out + ((size_t)i * rows + r) * 5, boxes, rowidx, marks);
        }
    }
    free(marks);
    free(rowidx);
    free(boxes);
    OPS(net)->upload(BE(net), top->data, out, top->count * sizeof(float));
}

void cd_detect_count_scored(const float *scored, size_t rows, double counts[3])
{
    for (size_t r = 0; r < rows; r++) {
        float c = scored[r * 5 + 4];
        if (c == 1 || c == 2 || c == 3)
            counts[(int)c - 1] += 1;
    }
}

void cd_detect_map(const double counts[3], double out[3])
{
    cd_det_counts c = {(long)counts[0], (long)counts[1], (long)counts[2]};
    cd_det_measures(&c, &out[1], &out[2], &out[0]);
}

static int map_setup(cd_net *net, cd_layer *l, py_priv *p, char *err, size_t errlen)
{
    const cd_blob *b = l->bottom[0];
    char s[64];
    (void)p;
    if (b->ndim != 3 || b->dims[2] != 5)
        return cd_layer_error(l, err, errlen, "bottom %s (%s) must be a marked box list (N, boxes, 5), "
                              "ScoreDetections' top", b->name, cd_blob_shape_str(b, s, sizeof s));
    for (int t = 0; t < l->ntop; t++)
        cd_blob_set_shape(l->top[t], 0, NULL);
    net->host_reads = 1;
    return CD_OK;
}

static void map_forward(cd_net *net, cd_layer *l)
{
    py_priv *p = l->priv;
    const cd_blob *b = l->bottom[0];
    float *h = download_bottoms(net, l, p, 0, 1);
    double counts[3] = {0, 0, 0}, v[3];
    cd_detect_count_scored(h, b->count / 5, counts);
    cd_detect_map(counts, v);
    for (int t = 0; t < l->ntop; t++) {
        float f = (float)v[t];
        OPS(net)->upload(BE(net), l->top[t]->data, &f, sizeof f);
    }
}

/* ---- the Python layer ------------------------------------------------------------------ */

static const py_impl py_impls[] = {
    {"caffe.layers.detectnet.clustering", "ClusterDetections", 2, 2, 1, CD_LAYER_MAX_BLOBS, cluster_setup,
     cluster_forward},
    {"caffe.layers.detectnet.clustering", "ClusterGroundtruth", 2, 2, 1, CD_LAYER_MAX_BLOBS, clustering_gt_setup,
     cluster_forward},
    {"caffe.layers.detectnet.mean_ap", "ScoreDetections", 2, CD_LAYER_MAX_BLOBS, 1, 1, score_setup, score_forward},
    {"caffe.layers.detectnet.mean_ap", "mAP", 1, 1, 1, 3, map_setup, map_forward},
};

int cd_detect_is_map_layer(const cd_layer *l)
{
    if (strcmp(l->type->name, "Python") != 0 || !l->priv)
        return 0;
    const py_priv *p = l->priv;
    return p->impl == &py_impls[3];
}

/* param_str "a, b, c": numbers separated by commas (an empty string gives none) */
static int parse_args(cd_layer *l, const char *s, py_priv *p, char *err, size_t errlen)
{
    p->nargs = 0;
    while (*s) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        if (p->nargs == PY_MAX_ARGS)
            return cd_layer_error(l, err, errlen, "param_str has more than %d values", PY_MAX_ARGS);
        char *end;
        p->args[p->nargs] = strtod(s, &end);
        if (end == s)
            return cd_layer_error(l, err, errlen, "param_str \"%s\": \"%s\" is not a number; give numbers "
                                  "separated by commas", cd_pt_str(l->param, "param_str", ""), s);
        p->nargs++;
        s = end;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ',')
            s++;
        else if (*s)
            return cd_layer_error(l, err, errlen, "param_str \"%s\": expected a comma before \"%s\"",
                                  cd_pt_str(l->param, "param_str", ""), s);
    }
    return CD_OK;
}

static int python_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const char *module = l->param ? cd_pt_str(l->param, "module", "") : "";
    const char *name = l->param ? cd_pt_str(l->param, "layer", "") : "";
    const py_impl *impl = NULL;
    for (size_t i = 0; i < CD_ARRAY_LEN(py_impls); i++)
        if (!strcmp(py_impls[i].module, module) && !strcmp(py_impls[i].layer, name))
            impl = &py_impls[i];
    if (!impl) {
        char known[512];
        size_t off = 0;
        for (size_t i = 0; i < CD_ARRAY_LEN(py_impls) && off < sizeof known; i++)
            off += (size_t)snprintf(known + off, sizeof known - off, "%s%s %s", i ? ", " : "",
                                    py_impls[i].module, py_impls[i].layer);
        return cd_layer_error(l, err, errlen, "python_param module \"%s\" layer \"%s\" is not a Python layer "
                              "cdigits runs (it runs no Python; it runs natively: %s); replace the layer",
                              module, name, known);
    }
    if (l->nbottom < impl->min_bottoms || l->nbottom > impl->max_bottoms || l->ntop < impl->min_tops ||
        l->ntop > impl->max_tops)
        return cd_layer_error(l, err, errlen, "%s has %d bottoms and %d tops; it takes %d to %d bottoms and %d to "
                              "%d tops", impl->layer, l->nbottom, l->ntop, impl->min_bottoms, impl->max_bottoms,
                              impl->min_tops, impl->max_tops);
    py_priv *p = cd_xcalloc(1, sizeof *p);
    l->priv = p;
    p->impl = impl;
    if (parse_args(l, l->param ? cd_pt_str(l->param, "param_str", "") : "", p, err, errlen) != CD_OK)
        return CD_ERR;
    return impl->setup(net, l, p, err, errlen);
}

static void python_forward(cd_net *net, cd_layer *l)
{
    const py_priv *p = l->priv;
    p->impl->forward(net, l);
}

static void python_destroy(cd_net *net, cd_layer *l)
{
    py_priv *p = l->priv;
    (void)net;
    if (!p)
        return;
    free(p->host);
    free(p->out);
}

const cd_layer_type cd_layers_detect_cluster[] = {
    {.name = "Python", .param_field = "python_param", .min_bottoms = 1, .max_bottoms = CD_LAYER_MAX_BLOBS,
     .min_tops = 1, .max_tops = CD_LAYER_MAX_BLOBS, .setup = python_setup, .forward = python_forward,
     .destroy = python_destroy},
    {.name = NULL},
};
