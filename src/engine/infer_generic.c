/* Generic models (see infer.h): every output of the deploy net by name, and what a
 * task reads from them: a segmentation's class mask, its colours, pixel counts and
 * IoU against label images; a regression's vector is its output as it is. The
 * classifier of infer.c opens the model, prepares and batches the images. */
#define _GNU_SOURCE
#include "cdigits/infer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/base64.h"
#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "engine_internal.h"

/* ---- outputs by name ----------------------------------------------------------------- */

/* Whether b is an output of net: some layer wrote it and none read it after the last
 * write (an in-place layer reads and writes it: still an output). Data tops that no
 * layer reads (a label) are inputs, not outputs. */
static int is_output(const cd_net *net, const cd_blob *b)
{
    int last_read = -1, last_write = -1, from_data = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        for (int k = 0; k < l->nbottom; k++)
            if (l->bottom[k] == b)
                last_read = i;
        for (int k = 0; k < l->ntop; k++)
            if (l->top[k] == b) {
                last_write = i;
                from_data = (l->type->flags & CD_LAYER_DATA) != 0;
            }
    }
    return last_write >= 0 && last_write >= last_read && !from_data;
}

void cd_infer_tensors_free(cd_infer_tensor *t, int n)
{
    if (!t)
        return;
    for (int i = 0; i < n; i++) {
        free(t[i].name);
        free(t[i].data);
    }
    free(t);
}

int cd_infer_outputs(cd_classifier_t *c, const cd_image_t *const *prepared, int n, cd_infer_tensor **outs,
                     int *nouts, char *err, size_t errlen)
{
    *outs = NULL;
    *nouts = 0;
    const cd_net *net = cd_classifier_forward(c, prepared, n, err, errlen);
    if (!net)
        return CD_ERR;
    cd_infer_tensor *t = cd_xcalloc((size_t)net->nblobs, sizeof *t);
    int m = 0;
    /* in network order: the layer that wrote each output last */
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        for (int k = 0; k < l->ntop; k++) {
            const cd_blob *b = l->top[k];
            int seen = 0;
            for (int j = 0; j < m && !seen; j++)
                seen = !strcmp(t[j].name, b->name);
            if (seen || !is_output(net, b) || b->ndim < 1 || b->dims[0] < n || b->count % (size_t)b->dims[0])
                continue;
            size_t per = b->count / (size_t)b->dims[0];
            cd_infer_tensor *o = &t[m++];
            o->name = cd_xstrdup(b->name);
            o->ndim = b->ndim;
            for (int d = 0; d < CD_MAX_DIMS; d++)
                o->dims[d] = d < b->ndim ? b->dims[d] : 1;
            o->dims[0] = n;
            o->count = per * (size_t)n;
            o->data = cd_xmalloc(o->count ? o->count * sizeof(float) : 1);
            if (o->count)
                net->be->iface->download(net->be, o->data, b->data, o->count * sizeof(float));
        }
    }
    if (m == 0) {
        free(t);
        snprintf(err, errlen, "%s: the deploy stage has no output (every top is read by a later layer)",
                 net->filename ? net->filename : "the network");
        return CD_ERR;
    }
    *outs = t;
    *nouts = m;
    return CD_OK;
}

int cd_infer_image(cd_classifier_t *c, const cd_image_t *img, cd_infer_tensor **outs, int *nouts, char *err,
                   size_t errlen)
{
    cd_image_t sized = {0};
    *outs = NULL;
    *nouts = 0;
    if (cd_classifier_prepare(c, img, &sized, err, errlen) != CD_OK)
        return CD_ERR;
    const cd_image_t *one[1] = {&sized};
    int rc = cd_infer_outputs(c, one, 1, outs, nouts, err, errlen);
    cd_image_free(&sized);
    return rc;
}

/* Nested arrays of dims[from..ndim) over data. */
static json_t *nested(const float *data, const int *dims, int ndim, int from)
{
    json_t *a = json_array();
    if (from == ndim - 1) {
        for (int i = 0; i < dims[from]; i++)
            json_array_append_new(a, isfinite(data[i]) ? json_real(data[i]) : json_null());
        return a;
    }
    size_t stride = cd_dims_count(dims, from + 1, ndim);
    for (int i = 0; i < dims[from]; i++)
        json_array_append_new(a, nested(data + (size_t)i * stride, dims, ndim, from + 1));
    return a;
}

json_t *cd_infer_tensor_json(const cd_infer_tensor *t, int i)
{
    if (i < 0)
        return nested(t->data, t->dims, t->ndim, 0);
    size_t per = t->count / (size_t)(t->dims[0] > 0 ? t->dims[0] : 1);
    if (t->ndim == 1)
        return isfinite(t->data[i]) ? json_real(t->data[i]) : json_null();
    return nested(t->data + (size_t)i * per, t->dims, t->ndim, 1);
}

int cd_infer_seg_output(const cd_infer_tensor *outs, int n)
{
    for (int i = n - 1; i >= 0; i--)
        if (outs[i].ndim == 4)
            return i;
    return -1;
}

/* ---- segmentation ------------------------------------------------------------------- */

int cd_seg_argmax(const float *scores, int classes, int h, int w, uint8_t *mask, char *err, size_t errlen)
{
    if (classes < 1 || classes > CD_SEG_MAX_CLASSES) {
        snprintf(err, errlen, "a segmentation output has %d channels; it needs 1 to %d, one per class", classes,
                 CD_SEG_MAX_CLASSES);
        return CD_ERR;
    }
    size_t plane = (size_t)h * (size_t)w;
    for (size_t p = 0; p < plane; p++) {
        int best = 0;
        for (int k = 1; k < classes; k++) {
            float v = scores[(size_t)k * plane + p], b = scores[(size_t)best * plane + p];
            if (v > b || (isnan(b) && !isnan(v)))
                best = k;
        }
        mask[p] = (uint8_t)best;
    }
    return CD_OK;
}

void cd_seg_count(const uint8_t *mask, size_t n, int classes, long *counts)
{
    memset(counts, 0, sizeof *counts * (size_t)classes);
    for (size_t i = 0; i < n; i++)
        if (mask[i] < classes)
            counts[mask[i]]++;
}

int cd_seg_palette(const cd_classifier_t *c, int classes, uint8_t (*rgb)[3], char *err, size_t errlen)
{
    char path[4200];
    int have = 0;
    cd_palette_default(rgb, classes);
    jobdir_path(cd_classifier_dataset_dir(c), JOBDIR_PALETTE, path, sizeof path);
    if (access(path, F_OK) != 0)
        return CD_OK;
    uint8_t file[CD_PALETTE_MAX][3];
    if (cd_palette_load(path, file, CD_PALETTE_MAX, &have) != CD_OK) {
        snprintf(err, errlen, "%s", cd_dataset_strerror());
        return CD_ERR;
    }
    memcpy(rgb, file, sizeof *rgb * (size_t)(have < classes ? have : classes));
    return CD_OK;
}

int cd_seg_mask_png(const uint8_t *mask, int h, int w, const uint8_t (*rgb)[3], int ncolors, uint8_t **png,
                    size_t *len, char *err, size_t errlen)
{
    cd_image_t img = {0};
    if (cd_image_alloc(&img, 3, h, w, err, errlen) != CD_OK)
        return CD_ERR;
    size_t plane = (size_t)h * (size_t)w;
    for (size_t p = 0; p < plane; p++)
        for (int ch = 0; ch < 3; ch++)
            img.data[(size_t)ch * plane + p] = mask[p] < ncolors ? rgb[mask[p]][ch] : 0;
    int rc = cd_image_encode_png(&img, 6, png, len, err, errlen);
    cd_image_free(&img);
    return rc;
}

void cd_seg_label_scale(const uint8_t *label, int lh, int lw, int h, int w, uint8_t *out)
{
    for (int y = 0; y < h; y++) {
        int sy = (int)(((long)y * lh) / h);
        for (int x = 0; x < w; x++)
            out[(size_t)y * w + x] = label[(size_t)sy * lw + (size_t)(((long)x * lw) / w)];
    }
}

int cd_seg_label_load(const char *path, int h, int w, const uint8_t (*rgb)[3], int classes, uint8_t *out,
                      char *err, size_t errlen)
{
    cd_image_t img = {0};
    if (cd_image_load(path, 3, &img, err, errlen) != CD_OK)
        return CD_ERR;
    size_t plane = (size_t)img.h * (size_t)img.w;
    uint8_t *cls = cd_xmalloc(plane);
    for (size_t p = 0; p < plane; p++) {
        uint8_t r = img.data[p], g = img.data[plane + p], b = img.data[2 * plane + p];
        int k = 0;
        while (k < classes && (rgb[k][0] != r || rgb[k][1] != g || rgb[k][2] != b))
            k++;
        if (k == classes)
            k = r == g && g == b && r < classes ? r : CD_SEG_IGNORE;
        cls[p] = (uint8_t)k;
    }
    cd_seg_label_scale(cls, img.h, img.w, h, w, out);
    free(cls);
    cd_image_free(&img);
    return CD_OK;
}

void cd_seg_confusion_init(cd_seg_confusion *s, int k)
{
    s->k = k;
    s->m = cd_xcalloc((size_t)k * (size_t)k, sizeof *s->m);
    s->ignored = 0;
}

void cd_seg_confusion_free(cd_seg_confusion *s)
{
    free(s->m);
    s->m = NULL;
    s->k = 0;
}

void cd_seg_confusion_add(cd_seg_confusion *s, const uint8_t *label, const uint8_t *pred, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (label[i] >= s->k || pred[i] >= s->k)
            s->ignored++;
        else
            s->m[(size_t)label[i] * (size_t)s->k + pred[i]]++;
    }
}

double cd_seg_pixel_accuracy(const cd_seg_confusion *s)
{
    uint64_t all = 0, right = 0;
    for (int i = 0; i < s->k; i++)
        for (int j = 0; j < s->k; j++) {
            all += s->m[(size_t)i * s->k + j];
            right += i == j ? s->m[(size_t)i * s->k + j] : 0;
        }
    return all ? (double)right / (double)all : 0;
}

/* Pixels labelled k (row), predicted k (column), both (diagonal). */
static void class_counts(const cd_seg_confusion *s, int k, uint64_t *label, uint64_t *pred, uint64_t *tp)
{
    *label = *pred = 0;
    for (int j = 0; j < s->k; j++) {
        *label += s->m[(size_t)k * s->k + j];
        *pred += s->m[(size_t)j * s->k + k];
    }
    *tp = s->m[(size_t)k * s->k + k];
}

double cd_seg_iou(const cd_seg_confusion *s, int k)
{
    uint64_t label, pred, tp;
    class_counts(s, k, &label, &pred, &tp);
    uint64_t uni = label + pred - tp;
    return uni ? (double)tp / (double)uni : -1;
}

double cd_seg_mean_iou(const cd_seg_confusion *s)
{
    double sum = 0;
    int present = 0;
    for (int k = 0; k < s->k; k++) {
        double v = cd_seg_iou(s, k);
        if (v >= 0) {
            sum += v;
            present++;
        }
    }
    return present ? sum / present : -1;
}

static json_t *percent(double ratio) { return ratio < 0 ? json_null() : json_real(round(ratio * 10000) / 100); }

/* A segmentation class's name: its label, or "class<k>" past the labels. */
static json_t *class_name(const cd_classifier_t *c, int k)
{
    return k < cd_classifier_classes(c) ? json_string(cd_classifier_label(c, k)) : json_sprintf("class%d", k);
}

json_t *cd_seg_confusion_json(const cd_seg_confusion *s, const cd_classifier_t *c)
{
    uint64_t all = 0;
    json_t *per = json_array();
    for (int k = 0; k < s->k; k++) {
        uint64_t label, pred, tp;
        class_counts(s, k, &label, &pred, &tp);
        all += label;
        json_array_append_new(per, json_pack("{s:i, s:o, s:o, s:I, s:I, s:I}", "class", k, "label", class_name(c, k),
                                             "iou", percent(cd_seg_iou(s, k)), "label_pixels", (json_int_t)label,
                                             "predicted_pixels", (json_int_t)pred, "correct_pixels", (json_int_t)tp));
    }
    return json_pack("{s:I, s:I, s:o, s:o, s:o}", "pixels", (json_int_t)all, "ignored_pixels", (json_int_t)s->ignored,
                     "pixel_accuracy", percent(all ? cd_seg_pixel_accuracy(s) : -1), "mean_iou",
                     percent(cd_seg_mean_iou(s)), "per_class", per);
}

/* ---- one image's answer ----------------------------------------------------------------- */

/* "mask", "mask_size", "class_counts" (and "iou" with a label) of image i into out. */
static int seg_fields(const cd_classifier_t *c, const cd_infer_tensor *t, int i, const uint8_t (*rgb)[3],
                      const uint8_t *label, cd_seg_confusion *conf, json_t *out, char *err, size_t errlen)
{
    int classes = t->dims[1], h = t->dims[2], w = t->dims[3];
    size_t plane = (size_t)h * (size_t)w;
    uint8_t *mask = cd_xmalloc(plane ? plane : 1), *png = NULL;
    long *counts = cd_xcalloc((size_t)classes, sizeof *counts);
    size_t len = 0;
    int rc = cd_seg_argmax(t->data + (size_t)i * classes * plane, classes, h, w, mask, err, errlen);
    if (rc == CD_OK)
        rc = cd_seg_mask_png(mask, h, w, rgb, classes, &png, &len, err, errlen);
    char *b64 = rc == CD_OK ? cd_base64_encode(png, len) : NULL;
    if (rc == CD_OK && !b64) {
        snprintf(err, errlen, "out of memory encoding the mask");
        rc = CD_ERR;
    }
    if (rc == CD_OK) {
        json_object_set_new(out, "mask", json_sprintf("data:image/png;base64,%s", b64));
        json_object_set_new(out, "mask_size", json_pack("[i, i]", h, w));
        cd_seg_count(mask, plane, classes, counts);
        json_t *list = json_array();
        for (int k = 0; k < classes; k++)
            json_array_append_new(list, json_pack("{s:i, s:o, s:o, s:I}", "class", k, "label", class_name(c, k),
                                                  "color", json_sprintf("#%02x%02x%02x", rgb[k][0], rgb[k][1],
                                                                        rgb[k][2]),
                                                  "pixels", (json_int_t)counts[k]));
        json_object_set_new(out, "class_counts", list);
        if (label) {
            cd_seg_confusion one;
            cd_seg_confusion_init(&one, classes);
            cd_seg_confusion_add(&one, label, mask, plane);
            json_object_set_new(out, "iou", cd_seg_confusion_json(&one, c));
            cd_seg_confusion_free(&one);
            if (conf)
                cd_seg_confusion_add(conf, label, mask, plane);
        }
    }
    free(b64);
    free(png);
    free(counts);
    free(mask);
    return rc;
}

json_t *cd_infer_result_json(const cd_classifier_t *c, const cd_infer_tensor *outs, int nouts, int i, int whole,
                             const uint8_t (*rgb)[3], const uint8_t *label, cd_seg_confusion *conf, char *err,
                             size_t errlen)
{
    json_t *named = json_object(), *out = json_object();
    for (int k = 0; k < nouts; k++)
        json_object_set_new(named, outs[k].name, cd_infer_tensor_json(&outs[k], whole ? -1 : i));
    json_object_set_new(out, "outputs", named);
    int s = cd_classifier_task(c) == CD_TASK_SEGMENTATION ? cd_infer_seg_output(outs, nouts) : -1;
    if (s >= 0 && seg_fields(c, &outs[s], i, rgb, label, conf, out, err, errlen) != CD_OK) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- detection ------------------------------------------------------------------------ */

/* Whether outs[k] is a clustering output: (n, boxes, 5 or 6) rows of [x1, y1, x2, y2,
 * confidence(, class)] (docs/layers.md, ClusterDetections). */
static int is_cluster(const cd_infer_tensor *t)
{
    return t->ndim == 3 && (t->dims[2] == 5 || t->dims[2] == 6) && t->dims[1] > 0;
}

/* The class of a 5-column clustering output: DetectNet's "-class<K>" names K + 1 (its
 * coverage channels are the classes after dontcare), otherwise the nth such output n. */
static int cluster_class(const cd_infer_tensor *t, int nth)
{
    const char *p = strstr(t->name, "class");
    char *end;
    long k = p ? strtol(p + 5, &end, 10) : -1;
    return p && end != p + 5 && !*end && k >= 0 && k < 4096 ? (int)k + 1 : nth;
}

int cd_det_output_boxes(const cd_infer_tensor *outs, int nouts, int i, cd_det_box *out, int max)
{
    int n = 0, nth = 0;
    for (int k = 0; k < nouts && n < max; k++) {
        const cd_infer_tensor *t = &outs[k];
        if (!is_cluster(t) || i < 0 || i >= t->dims[0])
            continue;
        nth++;
        int rows = t->dims[1], cols = t->dims[2];
        n += cd_det_from_rows(t->data + (size_t)i * (size_t)rows * (size_t)cols, rows, cols,
                              cols == 6 ? CD_DET_CLASS_COL : -1, cluster_class(t, nth), out + n, max - n);
    }
    return n;
}

void cd_det_color(int cls, char hex[8])
{
    /* DIGITS's bounding-box view: hue 0 for the first class, then halves, quarters, ... */
    int i = cls > 0 ? cls - 1 : 0;
    double h = 0;
    if (i > 0) {
        double d = pow(2, floor(log((double)i) / log(2.0)) + 1);
        h = (2.0 * i - d + 1) / d;
    }
    double hp = h * 6, c = 1, x = c * (1 - fabs(fmod(hp, 2) - 1));
    double rgb[6][3] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
    const double *v = rgb[(int)floor(fmod(hp, 6))];
    snprintf(hex, 8, "#%02x%02x%02x", (int)lround(v[0] * 255), (int)lround(v[1] * 255), (int)lround(v[2] * 255));
}

/* A class's name: its label, or "class<k>" past the labels. */
static json_t *det_class_name(const cd_classifier_t *c, int k)
{
    return k < cd_classifier_classes(c) ? json_string(cd_classifier_label(c, k)) : json_sprintf("class%d", k);
}

static json_t *px(float v) { return json_real(round((double)v * 100) / 100); }

int cd_det_fields(const cd_classifier_t *c, const cd_infer_tensor *outs, int nouts, int i, const cd_det_frame *frame,
                  const cd_det_box *labels, int nlabels, cd_det_counts *per_class, int nclasses, json_t *out)
{
    cd_det_box *b = cd_xmalloc(sizeof *b * CD_DET_MAX_BOXES);
    int n = cd_det_output_boxes(outs, nouts, i, b, CD_DET_MAX_BOXES);
    /* DIGITS's bounding-box view: {blob: [x1, y1, x2, y2, confidence]} per box, in the
     * network input's pixels */
    json_t *bboxes = json_array(), *boxes = json_array(), *counts = json_array();
    int nth = 0;
    for (int k = 0; k < nouts; k++) {
        const cd_infer_tensor *t = &outs[k];
        if (!is_cluster(t))
            continue;
        cd_det_box one[CD_DET_MAX_BOXES];
        int rows = t->dims[1], cols = t->dims[2];
        int m = cd_det_from_rows(t->data + (size_t)i * (size_t)rows * (size_t)cols, rows, cols,
                                 cols == 6 ? CD_DET_CLASS_COL : -1, cluster_class(t, ++nth), one, CD_DET_MAX_BOXES);
        for (int j = 0; j < m; j++)
            json_array_append_new(bboxes, json_pack("{s:[f, f, f, f, f]}", t->name, one[j].x1, one[j].y1, one[j].x2,
                                                    one[j].y2, one[j].confidence));
    }
    cd_det_to_image(frame, b, n);
    int hi = cd_classifier_classes(c) - 1;
    for (int j = 0; j < n; j++)
        hi = b[j].cls > hi ? b[j].cls : hi;
    long *per = cd_xcalloc((size_t)(hi > 0 ? hi + 1 : 1), sizeof *per);
    for (int j = 0; j < n; j++) {
        per[b[j].cls]++;
        json_array_append_new(boxes, json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "class", b[j].cls, "label",
                                               det_class_name(c, b[j].cls), "x1", px(b[j].x1), "y1", px(b[j].y1),
                                               "x2", px(b[j].x2), "y2", px(b[j].y2), "confidence",
                                               json_real(round((double)b[j].confidence * 1000) / 1000)));
    }
    for (int k = 1; k <= hi; k++) {
        char hex[8];
        cd_det_color(k, hex);
        json_array_append_new(counts, json_pack("{s:i, s:o, s:s, s:I}", "class", k, "label", det_class_name(c, k),
                                                "color", hex, "boxes", (json_int_t)per[k]));
    }
    json_object_set_new(out, "bboxes", bboxes);
    json_object_set_new(out, "boxes", boxes);
    json_object_set_new(out, "box_counts", counts);
    json_object_set_new(out, "image_frame", json_pack("{s:[i, i], s:[i, i], s:[i, i]}", "image", frame->orig_w,
                                                      frame->orig_h, "padded", frame->pad_w, frame->pad_h, "input",
                                                      frame->net_w, frame->net_h));
    if (labels) {
        cd_det_counts one = {0};
        for (int k = 1; k < nclasses; k++) {
            cd_det_counts ck = {0};
            cd_det_score(labels, nlabels, b, n, CD_DET_IOU, k, &ck);
            one.tp += ck.tp, one.fp += ck.fp, one.fn += ck.fn;
            if (per_class) {
                per_class[k].tp += ck.tp, per_class[k].fp += ck.fp, per_class[k].fn += ck.fn;
            }
        }
        json_object_set_new(out, "score", json_pack("{s:I, s:I, s:I}", "true_positives", (json_int_t)one.tp,
                                                    "false_positives", (json_int_t)one.fp, "false_negatives",
                                                    (json_int_t)one.fn));
    }
    free(per);
    free(b);
    return n;
}

json_t *cd_det_summary_json(const cd_classifier_t *c, const cd_det_counts *per_class, int nclasses)
{
    cd_det_counts all = {0};
    json_t *list = json_array();
    for (int k = 1; k < nclasses; k++) {
        double p, r, m;
        all.tp += per_class[k].tp, all.fp += per_class[k].fp, all.fn += per_class[k].fn;
        cd_det_measures(&per_class[k], &p, &r, &m);
        json_array_append_new(list, json_pack("{s:i, s:o, s:o, s:o, s:o, s:I, s:I, s:I}", "class", k, "label",
                                              det_class_name(c, k), "mAP", percent(m / 100), "precision",
                                              percent(p / 100), "recall", percent(r / 100), "true_positives",
                                              (json_int_t)per_class[k].tp, "false_positives",
                                              (json_int_t)per_class[k].fp, "false_negatives",
                                              (json_int_t)per_class[k].fn));
    }
    double p, r, m;
    cd_det_measures(&all, &p, &r, &m);
    return json_pack("{s:f, s:o, s:o, s:o, s:I, s:I, s:I, s:o}", "iou_threshold", CD_DET_IOU, "mAP", percent(m / 100),
                     "precision", percent(p / 100), "recall", percent(r / 100), "true_positives", (json_int_t)all.tp,
                     "false_positives", (json_int_t)all.fp, "false_negatives", (json_int_t)all.fn, "per_class", list);
}

/* ---- lists and dbs -------------------------------------------------------------------- */

/* One image of a list or db. */
typedef struct g_entry {
    long line;          /* list line (1-based), or the record index */
    char *key;          /* what the answer calls it */
    char *path, *label_path;
    char *error;        /* why it was not inferred, or NULL */
    cd_image_t img;     /* prepared */
    uint8_t *label_raw; /* a db's label record (1, lh, lw) */
    int lh, lw;
    float *det_rows;    /* a detection label db's record (lh, CD_DET_LABEL_WIDTH) */
    int orig_w, orig_h; /* the image as read, before cd_classifier_prepare */
} g_entry;

static void g_entry_free(g_entry *e)
{
    free(e->key);
    free(e->path);
    free(e->label_path);
    free(e->error);
    free(e->label_raw);
    free(e->det_rows);
    cd_image_free(&e->img);
    memset(e, 0, sizeof *e);
}

typedef struct g_run {
    cd_classifier_t *c;
    FILE *out;
    long images, inferred, failed, labelled;
    int classes;                   /* of the segmentation output, once known (0 before) */
    uint8_t rgb[CD_PALETTE_MAX][3];
    cd_seg_confusion conf;
    cd_det_counts *det;            /* a detection model's counts per class (det_classes) */
    int det_classes;               /* labels.txt's lines: dontcare and the classes */
    const char **names;            /* the class names a KITTI file's types are looked up in */
} g_run;

/* A run over a model's images: a detection model's counts and class names ready. */
static void g_run_init(g_run *g, cd_classifier_t *c, FILE *out)
{
    *g = (g_run){.c = c, .out = out};
    if (cd_classifier_task(c) != CD_TASK_DETECTION)
        return;
    g->det_classes = cd_classifier_classes(c);
    g->det = cd_xcalloc((size_t)(g->det_classes > 0 ? g->det_classes : 1), sizeof *g->det);
    g->names = cd_xcalloc((size_t)(g->det_classes > 0 ? g->det_classes : 1), sizeof *g->names);
    for (int k = 0; k < g->det_classes; k++)
        g->names[k] = cd_classifier_label(c, k);
}

static void g_run_free(g_run *g)
{
    cd_seg_confusion_free(&g->conf);
    free(g->det);
    free(g->names);
    g->det = NULL;
    g->names = NULL;
}

/* A detection entry's label boxes (KITTI file in the image's pixels, or a label db's rows
 * in the stored image's) into *labels (malloc'd): how many, 0 without labels, or -1 with
 * e->error set. */
static int entry_boxes(g_run *g, g_entry *e, cd_det_box **labels)
{
    *labels = NULL;
    if (!e->det_rows && !e->label_path)
        return 0;
    cd_det_box *b = cd_xmalloc(sizeof *b * CD_DET_MAX_BOXES);
    char msg[1024];
    int n = e->det_rows ? cd_det_from_label_rows(e->det_rows, e->lh, b, CD_DET_MAX_BOXES)
                        : cd_det_kitti_load(e->label_path, g->names, g->det_classes, b, CD_DET_MAX_BOXES, msg,
                                            sizeof msg);
    if (n < 0) {
        e->error = cd_xstrdup(msg);
        free(b);
        return -1;
    }
    *labels = b;
    return n;
}

/* The label of entry e as classes (h, w) into label, or CD_ERR with e->error set. */
static int entry_label(g_run *g, g_entry *e, int h, int w, uint8_t *label)
{
    char msg[1024];
    if (e->label_raw) {
        cd_seg_label_scale(e->label_raw, e->lh, e->lw, h, w, label);
        return CD_OK;
    }
    if (cd_seg_label_load(e->label_path, h, w, (const uint8_t(*)[3])g->rgb, g->classes, label, msg, sizeof msg) ==
        CD_OK)
        return CD_OK;
    e->error = cd_xstrdup(msg);
    return CD_ERR;
}

/* Runs the usable entries of b in one pass and writes every entry's line. */
static int run_batch(g_run *g, g_entry *b, int n, char *err, size_t errlen)
{
    const cd_image_t **ready = cd_xmalloc(sizeof *ready * (size_t)n);
    int *slot = cd_xmalloc(sizeof *slot * (size_t)n), m = 0;
    for (int i = 0; i < n; i++) {
        slot[i] = b[i].error ? -1 : m;
        if (!b[i].error)
            ready[m++] = &b[i].img;
    }
    cd_infer_tensor *outs = NULL;
    int nouts = 0, rc = m ? cd_infer_outputs(g->c, ready, m, &outs, &nouts, err, errlen) : CD_OK;
    free(ready);
    int seg = rc == CD_OK && m && cd_classifier_task(g->c) == CD_TASK_SEGMENTATION ? cd_infer_seg_output(outs, nouts)
                                                                                  : -1;
    if (seg >= 0 && !g->classes) {
        g->classes = outs[seg].dims[1];
        if (g->classes > CD_SEG_MAX_CLASSES || cd_seg_palette(g->c, g->classes, g->rgb, err, errlen) != CD_OK) {
            if (g->classes > CD_SEG_MAX_CLASSES)
                snprintf(err, errlen, "the segmentation output %s has %d channels; at most %d classes can be read",
                         outs[seg].name, g->classes, CD_SEG_MAX_CLASSES);
            rc = CD_ERR;
        } else {
            cd_seg_confusion_init(&g->conf, g->classes);
        }
    }
    size_t plane = seg >= 0 ? (size_t)outs[seg].dims[2] * (size_t)outs[seg].dims[3] : 0;
    uint8_t *label = cd_xmalloc(plane ? plane : 1);
    for (int i = 0; rc == CD_OK && i < n; i++) {
        g_entry *e = &b[i];
        g->images++;
        int labelled = seg >= 0 && !e->error && (e->label_raw || e->label_path);
        if (labelled && entry_label(g, e, outs[seg].dims[2], outs[seg].dims[3], label) != CD_OK)
            labelled = 0;
        cd_det_box *boxes = NULL;
        int nboxes = g->det && !e->error ? entry_boxes(g, e, &boxes) : 0;
        if (g->det && !e->error && (e->det_rows || e->label_path))
            labelled = 1;
        json_t *res = NULL;
        if (!e->error) {
            char msg[1024];
            res = cd_infer_result_json(g->c, outs, nouts, slot[i], 0, (const uint8_t(*)[3])g->rgb,
                                       labelled ? label : NULL, &g->conf, msg, sizeof msg);
            if (!res)
                e->error = cd_xstrdup(msg);
        }
        if (res && g->det) {
            /* a db's records are the stored images: their boxes stay in its pixels */
            cd_det_frame f = e->orig_w > 0 ? cd_classifier_det_frame(g->c, e->orig_w, e->orig_h)
                                           : cd_det_frame_make(e->img.w, e->img.h, 0, 0, e->img.w, e->img.h);
            cd_det_fields(g->c, outs, nouts, slot[i], &f, labelled ? boxes : NULL, nboxes, g->det, g->det_classes, res);
        }
        free(boxes);
        if (!res) {
            g->failed++;
            cd_infer_result_line(g->out, json_pack("{s:I, s:s, s:s}", "line", (json_int_t)e->line, "path", e->key,
                                                   "error", e->error));
            continue;
        }
        g->inferred++;
        g->labelled += labelled;
        json_object_set_new(res, "line", json_integer(e->line));
        json_object_set_new(res, "path", json_string(e->key));
        cd_infer_result_line(g->out, res);
    }
    free(label);
    free(slot);
    cd_infer_tensors_free(outs, nouts);
    fflush(g->out);
    return rc;
}

static json_t *run_summary(g_run *g)
{
    json_t *s = json_pack("{s:I, s:I, s:I, s:I, s:s}", "images", (json_int_t)g->images, "inferred",
                          (json_int_t)g->inferred, "failed", (json_int_t)g->failed, "labelled",
                          (json_int_t)g->labelled, "task", cd_dataset_task_name(cd_classifier_task(g->c)));
    if (g->labelled && g->conf.m)
        json_object_set_new(s, "iou", cd_seg_confusion_json(&g->conf, g->c));
    if (g->labelled && g->det) {
        json_t *d = cd_det_summary_json(g->c, g->det, g->det_classes);
        static const char *const top[] = {"mAP", "precision", "recall"};
        for (size_t k = 0; k < CD_ARRAY_LEN(top); k++)
            json_object_set(s, top[k], json_object_get(d, top[k]));
        json_object_set_new(s, "detection", d);
    }
    return s;
}

/* Splits a list line `path[\tlabel image[\tkey]]` into e; 0 for a line to skip. */
static int list_entry(char *line, g_entry *e)
{
    line[strcspn(line, "\r\n")] = 0;
    if (!strncmp(line, "\xEF\xBB\xBF", 3))
        memmove(line, line + 3, strlen(line + 3) + 1);
    char *p = line;
    while (*p == ' ')
        p++;
    if (!*p || *p == '#')
        return 0;
    char *label = strchr(p, '\t'), *key = NULL;
    if (label) {
        *label++ = 0;
        if ((key = strchr(label, '\t')))
            *key++ = 0;
    }
    e->path = cd_xstrdup(p);
    e->label_path = label && *label ? cd_xstrdup(label) : NULL;
    e->key = cd_xstrdup(key && *key ? key : p);
    return 1;
}

json_t *cd_infer_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_infer_list_opts *o, char *err,
                      size_t errlen)
{
    int batch = o->batch > 0 ? o->batch : 64, ch, h, w;
    if (cd_classifier_set_batch(c, batch, err, errlen) != CD_OK)
        return NULL;
    batch = cd_classifier_batch(c);
    cd_classifier_image_shape(c, &ch, &h, &w);
    g_run g;
    g_run_init(&g, c, out);
    g_entry *b = cd_xcalloc((size_t)batch, sizeof *b);
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, taken = 0;
    int n = 0, rc = CD_OK;
    for (;;) {
        int more = rc == CD_OK && (o->limit <= 0 || taken < o->limit) && getline(&line, &cap, in) > 0;
        if (more) {
            lineno++;
            if (!list_entry(line, &b[n]))
                continue;
            b[n++].line = lineno;
            taken++;
        }
        if (n == batch || (!more && n)) {
#pragma omp parallel for schedule(dynamic, 1)
            for (int i = 0; i < n; i++) {
                char msg[1024];
                cd_image_t raw = {0};
                if (cd_image_load(b[i].path, ch, &raw, msg, sizeof msg) != CD_OK ||
                    cd_classifier_prepare(c, &raw, &b[i].img, msg, sizeof msg) != CD_OK)
                    b[i].error = cd_xstrdup(msg);
                b[i].orig_w = raw.w;
                b[i].orig_h = raw.h;
                cd_image_free(&raw);
            }
            if (rc == CD_OK)
                rc = run_batch(&g, b, n, err, errlen);
            for (int i = 0; i < n; i++)
                g_entry_free(&b[i]);
            n = 0;
        }
        if (!more)
            break;
    }
    if (rc == CD_OK && ferror(in)) {
        snprintf(err, errlen, "cannot read the list: %s", strerror(errno));
        rc = CD_ERR;
    }
    json_t *s = rc == CD_OK ? run_summary(&g) : NULL;
    g_run_free(&g);
    free(line);
    free(b);
    return s;
}

json_t *cd_infer_db(cd_classifier_t *c, const char *db_path, const char *labels_db, FILE *out,
                    const cd_infer_list_opts *o, char *err, size_t errlen)
{
    int batch = o->batch > 0 ? o->batch : 64, ch, h, w;
    cd_classifier_image_shape(c, &ch, &h, &w);
    cd_db_t *db = cd_db_open(db_path, err, errlen), *ldb = NULL;
    if (!db)
        return NULL;
    json_t *s = NULL;
    /* records of varying size are checked one by one against what the model takes */
    if (cd_db_channels(db) != ch || (!cd_db_mixed(db) && (cd_db_height(db) != h || cd_db_width(db) != w))) {
        snprintf(err, errlen, "%s holds %dx%dx%d records, not the model's %dx%dx%d images; infer the db of the "
                 "model's dataset", db_path, cd_db_channels(db), cd_db_height(db), cd_db_width(db), ch, h, w);
        goto out;
    }
    if (labels_db && !(ldb = cd_db_open(labels_db, err, errlen)))
        goto out;
    int det = cd_classifier_task(c) == CD_TASK_DETECTION;
    if (ldb && det &&
        (cd_db_count(ldb) != cd_db_count(db) || cd_db_channels(ldb) != 1 || cd_db_encoding(ldb) != CD_ENC_F32 ||
         cd_db_width(ldb) != CD_DET_LABEL_WIDTH || cd_db_mixed(ldb))) {
        snprintf(err, errlen, "%s is not a detection label db of %s: it needs %zu f32 records of 1 x boxes x %d",
                 labels_db, db_path, cd_db_count(db), CD_DET_LABEL_WIDTH);
        goto out;
    }
    if (ldb && !det && (cd_db_count(ldb) != cd_db_count(db) || cd_db_channels(ldb) != 1 ||
                        cd_db_encoding(ldb) == CD_ENC_F32)) {
        snprintf(err, errlen, "%s is not a label db of %s: it needs %zu records of 1 x H x W class indices", labels_db,
                 db_path, cd_db_count(db));
        goto out;
    }
    if (cd_classifier_set_batch(c, batch, err, errlen) != CD_OK)
        goto out;
    batch = cd_classifier_batch(c);
    g_run g;
    g_run_init(&g, c, out);
    g_entry *b = cd_xcalloc((size_t)batch, sizeof *b);
    size_t count = cd_db_count(db);
    if (o->limit > 0 && (size_t)o->limit < count)
        count = (size_t)o->limit;
    int rc = CD_OK;
    for (size_t start = 0; rc == CD_OK && start < count; start += (size_t)batch) {
        int n = count - start < (size_t)batch ? (int)(count - start) : batch;
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            g_entry *e = &b[i];
            char msg[1024];
            size_t rec = start + (size_t)i;
            e->line = (long)rec;
            char key[32];
            snprintf(key, sizeof key, "%zu", rec);
            e->key = cd_xstrdup(key);
            int rh = h, rw = w; /* a record's own size in a db of varying sizes */
            if (cd_db_record_shape(db, rec, &rh, &rw, msg, sizeof msg) != CD_OK ||
                cd_image_alloc(&e->img, ch, rh, rw, msg, sizeof msg) != CD_OK ||
                cd_db_read(db, rec, e->img.data, msg, sizeof msg) != CD_OK) {
                e->error = cd_xstrdup(msg);
                continue;
            }
            if (ldb && det) {
                e->lh = cd_db_height(ldb);
                e->det_rows = cd_xmalloc(sizeof(float) * (size_t)e->lh * CD_DET_LABEL_WIDTH);
                if (cd_db_read_f32(ldb, rec, e->det_rows, msg, sizeof msg) != CD_OK)
                    e->error = cd_xstrdup(msg);
            } else if (ldb) {
                if (cd_db_record_shape(ldb, rec, &e->lh, &e->lw, msg, sizeof msg) != CD_OK) {
                    e->error = cd_xstrdup(msg);
                    continue;
                }
                e->label_raw = cd_xmalloc((size_t)e->lh * (size_t)e->lw);
                if (cd_db_read(ldb, rec, e->label_raw, msg, sizeof msg) != CD_OK)
                    e->error = cd_xstrdup(msg);
            }
        }
        rc = run_batch(&g, b, n, err, errlen);
        for (int i = 0; i < n; i++)
            g_entry_free(&b[i]);
    }
    if (rc == CD_OK)
        s = run_summary(&g);
    g_run_free(&g);
    free(b);
out:
    cd_db_close(ldb);
    cd_db_close(db);
    return s;
}
