/* Object detection's boxes and their scoring (see cdigits/detect.h). */
#define _GNU_SOURCE
#include "cdigits/detect.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdigits/util.h"

static double area(const cd_det_box *b)
{
    double w = (double)b->x2 - b->x1, h = (double)b->y2 - b->y1;
    return w > 0 && h > 0 ? w * h : 0;
}

static double overlap(const cd_det_box *a, const cd_det_box *b)
{
    double w = fmin(a->x2, b->x2) - fmax(a->x1, b->x1), h = fmin(a->y2, b->y2) - fmax(a->y1, b->y1);
    return w > 0 && h > 0 ? w * h : 0;
}

double cd_det_iou(const cd_det_box *a, const cd_det_box *b)
{
    double in = overlap(a, b), u = area(a) + area(b) - in;
    return in > 0 && u > 0 ? in / u : 0;
}

int cd_det_from_rows(const float *rows, int nrows, int cols, int class_col, int cls, cd_det_box *out, int max)
{
    int n = 0;
    for (int i = 0; i < nrows && n < max; i++) {
        const float *r = rows + (size_t)i * (size_t)cols;
        cd_det_box b = {r[0], r[1], r[2], r[3], r[4], cls};
        if (class_col >= 0 && class_col < cols)
            b.cls = isfinite(r[class_col]) ? (int)lrintf(r[class_col]) : -1;
        if (!(b.confidence > 0) || !(area(&b) > 0) || b.cls < 0)
            continue;
        out[n++] = b;
    }
    return n;
}

int cd_det_from_label_rows(const float *rows, int nrows, cd_det_box *out, int max)
{
    int n = 0;
    for (int i = 0; i < nrows && n < max; i++) {
        const float *r = rows + (size_t)i * CD_DET_LABEL_WIDTH;
        float k = r[CD_DET_LABEL_CLASS];
        if (!isfinite(k) || k < 0)
            continue;
        out[n++] = (cd_det_box){r[0], r[1], r[0] + r[2], r[1] + r[3], 0, (int)lrintf(k)};
    }
    return n;
}

cd_det_frame cd_det_frame_make(int orig_w, int orig_h, int pad_w, int pad_h, int net_w, int net_h)
{
    cd_det_frame f = {orig_w, orig_h, pad_w, pad_h, net_w, net_h};
    if (pad_w <= 0 || pad_h <= 0 || orig_w > pad_w || orig_h > pad_h) {
        f.pad_w = orig_w;
        f.pad_h = orig_h;
    }
    return f;
}

static float clampf(float v, float hi) { return v < 0 ? 0 : v > hi ? hi : v; }

void cd_det_to_image(const cd_det_frame *f, cd_det_box *b, int n)
{
    float sx = f->net_w > 0 ? (float)f->pad_w / (float)f->net_w : 1;
    float sy = f->net_h > 0 ? (float)f->pad_h / (float)f->net_h : 1;
    for (int i = 0; i < n; i++) {
        b[i].x1 = clampf(b[i].x1 * sx, (float)f->orig_w);
        b[i].x2 = clampf(b[i].x2 * sx, (float)f->orig_w);
        b[i].y1 = clampf(b[i].y1 * sy, (float)f->orig_h);
        b[i].y2 = clampf(b[i].y2 * sy, (float)f->orig_h);
    }
}

int cd_det_kitti_load(const char *path, const char *const *names, int nnames, cd_det_box *out, int max, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read the label file %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0, lineno = 0, rc = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char type[256];
        float v[7];
        line[strcspn(line, "\r\n")] = 0;
        if (line[strspn(line, " \t")] == 0)
            continue;
        /* type truncated occluded alpha x1 y1 x2 y2, then dimensions, location, rotation */
        int got = sscanf(line, "%255s %f %f %f %f %f %f %f", type, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
        int cols = 0;
        for (char *p = line; *p;) {
            p += strspn(p, " \t");
            if (!*p)
                break;
            cols++;
            p += strcspn(p, " \t");
        }
        if (got != 8 || (cols != 15 && cols != 16)) {
            snprintf(err, errlen, "%s line %d has %d columns; a KITTI label line has 15 (type truncated occluded "
                     "alpha x1 y1 x2 y2 h w l x y z rotation_y, and an optional score)", path, lineno, cols);
            rc = -1;
            break;
        }
        int cls = 0;
        for (int k = 1; k < nnames; k++)
            if (!strcasecmp(type, names[k]))
                cls = k;
        if (n < max)
            out[n++] = (cd_det_box){v[3], v[4], v[5], v[6], 0, cls};
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot read the label file %s: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc == 0 ? n : -1;
}

/* Detections by descending confidence (ties: the earlier first). */
static int by_confidence(const void *a, const void *b)
{
    const cd_det_box *const *x = a, *const *y = b;
    if ((*x)->confidence != (*y)->confidence)
        return (*x)->confidence > (*y)->confidence ? -1 : 1;
    return *x < *y ? -1 : *x > *y;
}

void cd_det_match(const cd_det_box *labels, int nlabels, const cd_det_box *dets, int ndets, double iou, char *gmatch,
                  char *dmatch)
{
    memset(gmatch, 0, (size_t)(nlabels > 0 ? nlabels : 0));
    memset(dmatch, 0, (size_t)(ndets > 0 ? ndets : 0));
    for (int i = 0; i < nlabels; i++)
        for (int j = 0; j < ndets && !gmatch[i]; j++)
            if (!dmatch[j] && dets[j].cls == labels[i].cls && cd_det_iou(&dets[j], &labels[i]) >= iou)
                gmatch[i] = dmatch[j] = 1;
}

int cd_det_in_dontcare(const cd_det_box *det, const cd_det_box *boxes, int n)
{
    double a = area(det);
    for (int i = 0; i < n; i++)
        if (boxes[i].cls == 0 && a > 0 && overlap(det, &boxes[i]) >= 0.5 * a)
            return 1;
    return 0;
}

void cd_det_score(const cd_det_box *labels, int nlabels, const cd_det_box *dets, int ndets, double iou, int cls,
                  cd_det_counts *c)
{
    size_t nd = (size_t)(ndets > 0 ? ndets : 1), ng = (size_t)(nlabels > 0 ? nlabels : 1);
    const cd_det_box **order = cd_xmalloc(sizeof *order * nd);
    cd_det_box *d = cd_xmalloc(sizeof *d * nd), *g = cd_xmalloc(sizeof *g * ng);
    char *dmatch = cd_xmalloc(nd), *gmatch = cd_xmalloc(ng);
    int m = 0, k = 0;
    for (int j = 0; j < ndets; j++)
        if (dets[j].cls > 0 && (cls == 0 || dets[j].cls == cls))
            order[m++] = &dets[j];
    qsort(order, (size_t)m, sizeof *order, by_confidence);
    for (int j = 0; j < m; j++)
        d[j] = *order[j];
    for (int i = 0; i < nlabels; i++)
        if (labels[i].cls > 0 && (cls == 0 || labels[i].cls == cls))
            g[k++] = labels[i];
    cd_det_match(g, k, d, m, iou, gmatch, dmatch);
    for (int i = 0; i < k; i++) {
        c->tp += gmatch[i];
        c->fn += !gmatch[i];
    }
    for (int j = 0; j < m; j++) {
        if (dmatch[j])
            continue;
        c->fp += !cd_det_in_dontcare(&d[j], labels, nlabels);
    }
    free(gmatch);
    free(dmatch);
    free(g);
    free(d);
    free(order);
}

void cd_det_measures(const cd_det_counts *c, double *precision, double *recall, double *map)
{
    *precision = c->tp + c->fp > 0 ? 100.0 * (double)c->tp / (double)(c->tp + c->fp) : 0;
    *recall = c->tp + c->fn > 0 ? 100.0 * (double)c->tp / (double)(c->tp + c->fn) : 0;
    *map = *precision * *recall / 100.0;
}
