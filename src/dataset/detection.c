/*
 * The `dataset` task for object detection, as DIGITS 6.1's image-object-detection data
 * extension made it: a folder of images and a folder of KITTI label files, image
 * IDENTIFIER.png (any image kind) with IDENTIFIER.txt. Each image is padded (black, the
 * image at the top left) to padding_image_width x padding_image_height, then resized
 * (squash) to resize_image_width x resize_image_height, and becomes record i of train.db;
 * its boxes, scaled with the image, record i of train_labels.db: 1 x B x 16 floats, B the
 * largest box count of any image of the dataset, a row per box in DIGITS's
 * gt_to_lmdb_format order (DS_DET_ROW), rows past the image's boxes zero but for class
 * -1. The same for the val folders. Then labels.txt (line 0 dontcare), the mean of the
 * train images and, last, stats.json with the boxes' statistics. The rules are in
 * docs/formats.md ("Object detection datasets").
 *
 * Stages: parse (pair each image with its label file, read every label line: a bad one
 * is counted, named and left out), create (per split, the pipeline of pipeline.c: its
 * workers read, pad, resize and encode the images; its calling thread checks each
 * image's shape, places the boxes in the stored image and writes the feature record),
 * then the label dbs, once B is known.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

/* ---- classes ---------------------------------------------------------------------- */

/* DIGITS's default mapping (objectDetection/utils.py's ObjectType): class n is name n. */
static const char *const g_kitti[] = {
    "dontcare", "car", "van", "truck", "bus", "pickup", "vehicle-with-trailer", "special-vehicle",
    "person", "person-fa", "person?", "people", "cyclist", "tram", "person_sitting", "misc",
};
/* label types of that mapping that are not the name of their class */
static const struct {
    const char *type;
    int cls;
} g_kitti_alias[] = {{"pedestrian", 8}};

void ds_det_classes_free(ds_det_classes *c)
{
    if (!c)
        return;
    cd_labels_free(c->names, c->n);
    c->names = NULL;
    c->n = 0;
}

int ds_det_classes_init(ds_det_classes *c, const char *custom_classes, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    if (!custom_classes || !custom_classes[0]) {
        c->n = (int)CD_ARRAY_LEN(g_kitti);
        c->names = cd_xcalloc((size_t)c->n, sizeof *c->names);
        for (int k = 0; k < c->n; k++)
            c->names[k] = cd_xstrdup(g_kitti[k]);
        return CD_OK;
    }
    c->custom = 1;
    c->names = cd_xcalloc(DS_DET_MAX_CLASSES, sizeof *c->names);
    char *copy = cd_xstrdup(custom_classes);
    int rc = CD_OK;
    for (char *p = copy, *next; p && rc == CD_OK; p = next) {
        next = strchr(p, ',');
        if (next)
            *next++ = 0;
        while (isspace((unsigned char)*p))
            p++;
        size_t len = strlen(p);
        while (len && isspace((unsigned char)p[len - 1]))
            p[--len] = 0;
        for (char *q = p; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        if (c->n == DS_DET_MAX_CLASSES)
            rc = ds_err(err, errlen, "dataset.json: custom_classes names more than %d classes; name fewer",
                        DS_DET_MAX_CLASSES);
        else if (!len)
            rc = ds_err(err, errlen, "dataset.json: custom_classes: name %d is empty; write the names separated "
                        "by commas (dontcare,car,pedestrian)", c->n + 1);
        else if (c->n == 0 && strcmp(p, "dontcare") != 0)
            rc = ds_err(err, errlen, "dataset.json: custom_classes starts with \"%.60s\"; class 0 is dontcare "
                        "(DetectNet's don't-care regions), so write dontcare first: dontcare,%.60s", p, p);
        for (int k = 0; k < c->n && rc == CD_OK; k++)
            if (!strcmp(c->names[k], p))
                rc = ds_err(err, errlen, "dataset.json: custom_classes names \"%.60s\" twice (classes %d and "
                            "%d); name each class once", p, k, c->n);
        if (rc == CD_OK)
            c->names[c->n++] = cd_xstrdup(p);
    }
    free(copy);
    if (rc != CD_OK)
        ds_det_classes_free(c);
    return rc;
}

int ds_detection_check_classes(const char *custom_classes, char *err, size_t errlen)
{
    ds_det_classes c;
    if (ds_det_classes_init(&c, custom_classes, err, errlen) != CD_OK)
        return CD_ERR;
    ds_det_classes_free(&c);
    return CD_OK;
}

int ds_det_class_of(const ds_det_classes *c, const char *type)
{
    for (int k = 0; k < c->n; k++)
        if (!strcasecmp(c->names[k], type))
            return k;
    if (!strcasecmp(type, "dontcare")) /* KITTI's DontCare is class 0 under any mapping */
        return 0;
    for (size_t i = 0; !c->custom && i < CD_ARRAY_LEN(g_kitti_alias); i++)
        if (!strcasecmp(g_kitti_alias[i].type, type))
            return g_kitti_alias[i].cls;
    return -1;
}

/* ---- label lines --------------------------------------------------------------------- */

static const char *const g_bad_names[DS_DET_BAD_COUNT] = {
    [DS_DET_BAD_COLUMNS] = "columns", [DS_DET_BAD_NUMBER] = "number", [DS_DET_BAD_EMPTY] = "empty",
    [DS_DET_BAD_OUTSIDE] = "outside", [DS_DET_BAD_CLASS] = "unknown_class",
};

const char *ds_det_bad_name(int bad)
{
    return bad >= 0 && bad < DS_DET_BAD_COUNT ? g_bad_names[bad] : "?";
}

/* KITTI's columns, for messages */
static const char *const g_columns[DS_DET_ROW] = {
    "type", "truncated", "occluded", "alpha", "left", "top", "right", "bottom",
    "height", "width", "length", "x", "y", "z", "rotation_y", "score",
};

/* Row index of each KITTI column (DIGITS's gt_to_lmdb_format), -1: not stored; the box's
 * left, top, right, bottom become x, y, w, h. */
static const int g_row_of[DS_DET_ROW] = {-1, 8, 9, 4, 0, 1, -1, -1, 12, 11, 10, 13, 14, 15, 7, -1};

int ds_det_parse_line(const ds_det_classes *c, char *line, float *row, int *bad, char *why, size_t whylen)
{
    char *w[DS_DET_ROW];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n < DS_DET_ROW)
            w[n] = t;
        n++;
    }
    *bad = -1;
    if (n != 15 && n != 16) {
        *bad = DS_DET_BAD_COLUMNS;
        snprintf(why, whylen, "%d values; a KITTI label line has 15 (type truncated occluded alpha left top right "
                 "bottom height width length x y z rotation_y), 16 with a score", n);
        return CD_ERR;
    }
    double v[DS_DET_ROW] = {0};
    for (int i = 1; i < n; i++) {
        char *end;
        errno = 0;
        v[i] = strtod(w[i], &end);
        if (end == w[i] || *end || errno == ERANGE || !isfinite(v[i]) || fabs(v[i]) > 1e30) {
            *bad = DS_DET_BAD_NUMBER;
            snprintf(why, whylen, "%s (value %d) is \"%.40s\", not a number", g_columns[i], i + 1, w[i]);
            return CD_ERR;
        }
    }
    if (!(v[6] > v[4]) || !(v[7] > v[5])) {
        *bad = DS_DET_BAD_EMPTY;
        snprintf(why, whylen, "the box left %g top %g right %g bottom %g is empty; right must exceed left and "
                 "bottom top", v[4], v[5], v[6], v[7]);
        return CD_ERR;
    }
    memset(row, 0, DS_DET_ROW * sizeof *row);
    for (int i = 1; i < DS_DET_ROW; i++)
        if (g_row_of[i] >= 0)
            row[g_row_of[i]] = (float)v[i];
    row[2] = (float)(v[6] - v[4]);
    row[3] = (float)(v[7] - v[5]);
    int cls = ds_det_class_of(c, w[0]);
    row[5] = (float)(cls < 0 ? 0 : cls);
    if (cls < 0) {
        *bad = DS_DET_BAD_CLASS;
        snprintf(why, whylen, "type \"%.40s\" is no class: kept as dontcare (class 0), as DIGITS does; list it in "
                 "custom_classes to learn it", w[0]);
    }
    return CD_OK;
}

int ds_det_place_box(float *row, int src_w, int src_h, double sx, double sy, int *clipped)
{
    double x1 = row[0], y1 = row[1], x2 = x1 + row[2], y2 = y1 + row[3];
    double cx1 = fmax(x1, 0), cy1 = fmax(y1, 0), cx2 = fmin(x2, src_w), cy2 = fmin(y2, src_h);
    *clipped = cx1 != x1 || cy1 != y1 || cx2 != x2 || cy2 != y2;
    if (!(cx2 > cx1) || !(cy2 > cy1))
        return CD_ERR;
    row[0] = (float)(cx1 * sx);
    row[1] = (float)(cy1 * sy);
    row[2] = (float)((cx2 - cx1) * sx);
    row[3] = (float)((cy2 - cy1) * sy);
    return CD_OK;
}

/* ---- the parse stage ------------------------------------------------------------------- */

typedef struct det_item {
    char *image, *label; /* owned */
    size_t first, n;     /* its boxes: rows [first, first + n) of its split */
} det_item;

/* Box size classes of the statistics: [edge k, edge k+1) pixels, the last open. */
static const int g_edges[] = {0, 8, 16, 32, 64, 128, 256, 512};
#define NBINS ((int)CD_ARRAY_LEN(g_edges))

/* One class's boxes in one split, as stored (after padding and resizing). */
typedef struct det_cstat {
    size_t boxes, images;
    double wmin, wmax, wsum, hmin, hmax, hsum;
    size_t wbins[NBINS], hbins[NBINS];
} det_cstat;

typedef struct det_split {
    det_item *items;
    size_t n, cap;
    float *rows;    /* parsed rows, DS_DET_ROW floats each, in the source image's pixels */
    int *row_line;  /* each row's line in its label file */
    size_t nrows, caprows;
    /* the create stage */
    cd_db_writer_t *features;
    ds_progress progress;
    size_t written;
    float *kept;    /* the stored rows of the records written, in record order */
    size_t nkept, capkept;
    size_t *rec_first, *rec_n; /* record r's rows: kept [rec_first[r], + rec_n[r]) */
    det_cstat *stats;          /* one per class */
} det_split;

typedef struct det_run {
    const cd_dataset_config_t *cfg;
    const char *outdir;
    FILE *out;
    ds_skips *skips;
    const ds_det_classes *classes;
    det_split split[CD_SPLIT_COUNT];
    int cur;
    int c, h, w;         /* the stored images' shape (reference_shape) */
    uint64_t *sum;       /* c*h*w sums of the train images */
    size_t sum_count;
    size_t bad[DS_DET_BAD_COUNT];
    size_t bad_named;
    size_t clipped;
} det_run;

static void note_bad(det_run *run, int bad, const char *file, int line, const char *why)
{
    run->bad[bad]++;
    if (run->bad_named++ < DS_SKIPS_NAMED)
        ds_emit_log(run->out, "warning", "%s:%d: %s", file, line, why);
    else if (run->bad_named == DS_SKIPS_NAMED + 1)
        ds_emit_log(run->out, "warning", "more label lines are bad; stats.json's bad_labels counts them");
}

static void push_row(det_split *sp, const float *row, int line)
{
    if (sp->nrows == sp->caprows) {
        sp->caprows = sp->caprows ? sp->caprows * 2 : 256;
        sp->rows = cd_xrealloc(sp->rows, sp->caprows * DS_DET_ROW * sizeof *sp->rows);
        sp->row_line = cd_xrealloc(sp->row_line, sp->caprows * sizeof *sp->row_line);
    }
    memcpy(sp->rows + sp->nrows * DS_DET_ROW, row, DS_DET_ROW * sizeof *row);
    sp->row_line[sp->nrows++] = line;
}

/* Every line of it->label into the split's rows; a bad line is counted and named. Val
 * boxes under val_min_box_size either way become dontcare (DIGITS's GroundTruth). */
static int read_labels(det_run *run, det_split *sp, det_item *it, int min_box, char *err, size_t errlen)
{
    char *text = cd_read_file(it->label, NULL);
    if (!text)
        return ds_err(err, errlen, "cannot read the label file %s: %s; check that it is readable", it->label,
                      strerror(errno));
    it->first = sp->nrows;
    int lineno = 0;
    float row[DS_DET_ROW];
    char why[256];
    for (char *line = ds_skip_bom(text), *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        if (line[strspn(line, " \t\r")] == 0)
            continue;
        int bad;
        int rc = ds_det_parse_line(run->classes, line, row, &bad, why, sizeof why);
        if (bad >= 0)
            note_bad(run, bad, it->label, lineno, why);
        if (rc != CD_OK)
            continue;
        if (min_box > 0 && (row[2] < min_box || row[3] < min_box))
            row[5] = 0;
        push_row(sp, row, lineno);
    }
    it->n = sp->nrows - it->first;
    free(text);
    return CD_OK;
}

/* The images of image_dir, each with label_dir/IDENTIFIER.txt (an image without one is
 * skipped and named), their label lines read. */
static int parse_split(det_run *run, int split, const char *image_dir, const char *label_dir, char *err,
                       size_t errlen)
{
    det_split *sp = &run->split[split];
    ds_items found = {0};
    if (ds_scan_images(image_dir, 0, &found, run->skips, err, errlen) != CD_OK) {
        ds_items_free(&found);
        return CD_ERR;
    }
    if (found.n == 0) {
        ds_items_free(&found);
        return ds_err(err, errlen, "no images in %s; put the %s images there (%s)", image_dir, cd_split_name(split),
                      cd_image_kinds());
    }
    int rc = CD_OK;
    int min_box = split == CD_SPLIT_VAL ? run->cfg->val_min_box_size : 0;
    for (size_t k = 0; k < found.n; k++) {
        char *image = found.v[k].path;
        found.v[k].path = NULL;
        if (rc != CD_OK) {
            free(image);
            continue;
        }
        const char *base = strrchr(image, '/');
        base = base ? base + 1 : image;
        const char *dot = strrchr(base, '.');
        size_t keylen = dot ? (size_t)(dot - base) : strlen(base);
        char *label = cd_xmalloc(strlen(label_dir) + keylen + 6);
        sprintf(label, "%s/%.*s.txt", label_dir, (int)keylen, base);
        if (access(label, R_OK) != 0) {
            char why[512];
            snprintf(why, sizeof why, "no label file %.400s (an empty one for an image without objects)", label);
            ds_skip(run->skips, image, why);
            free(image);
            free(label);
            continue;
        }
        if (sp->n == sp->cap) {
            sp->cap = sp->cap ? sp->cap * 2 : 64;
            sp->items = cd_xrealloc(sp->items, sp->cap * sizeof *sp->items);
        }
        det_item *it = &sp->items[sp->n++];
        *it = (det_item){.image = image, .label = label};
        rc = read_labels(run, sp, it, min_box, err, errlen);
    }
    free(found.v);
    if (rc == CD_OK && sp->n == 0)
        rc = ds_err(err, errlen, "no image in %s has a label file in %s; name each label after its image "
                    "(000001.png and 000001.txt)", image_dir, label_dir);
    return rc;
}

/* ---- the create stage ----------------------------------------------------------------- */

/*
 * One prepared image, in one malloc'ed block (ds_record.rec): this header, then the
 * stored image planar (c, h, w) for the mean, then the feature record (at feat_off,
 * feat_len bytes; the planar bytes themselves for encoding none).
 */
typedef struct det_rec {
    int c, h, w;        /* the stored image */
    int src_w, src_h;   /* the image as read */
    int pad_w, pad_h;   /* after padding (the image's own size when not padded) */
    size_t feat_off, feat_len;
} det_rec;

typedef struct det_prep {
    const cd_dataset_config_t *cfg;
    const det_item *items;
} det_prep;


/* src padded to pad_w x pad_h (cd_image_pad), or why not in the dataset's words. */
static int pad_image(const cd_image_t *src, int pad_w, int pad_h, cd_image_t *out, char *err, size_t errlen)
{
    if (src->w > pad_w || src->h > pad_h)
        return ds_err(err, errlen, "it is %dx%d, larger than the padding size %dx%d (padding_image_width x "
                      "padding_image_height); raise those, or shrink the image", src->w, src->h, pad_w, pad_h);
    return cd_image_pad(src, pad_w, pad_h, out, err, errlen);
}

/* Read, pad, resize and encode image i (a worker of the pipeline). */
static void prepare_image(void *arg, size_t i, uint64_t *sum, ds_record *r)
{
    (void)sum; /* summed by the consumer, which alone knows which records are kept */
    const det_prep *p = arg;
    const cd_dataset_config_t *cfg = p->cfg;
    memset(r, 0, sizeof *r);
    cd_image_t img = {0}, padded = {0}, sized = {0};
    uint8_t *feat = NULL;
    size_t len = 0, flen = 0;
    char *buf = cd_read_file(p->items[i].image, &len);
    if (!buf) {
        snprintf(r->msg, sizeof r->msg, "cannot read: %s", strerror(errno));
        return;
    }
    int rc = ds_load_converted(cfg, (const uint8_t *)buf, len, &img, r->msg, sizeof r->msg);
    free(buf);
    if (rc != CD_OK)
        return;
    det_rec d = {.src_w = img.w, .src_h = img.h};
    const cd_image_t *cur = &img;
    if (cfg->padding_image_width) {
        if (pad_image(cur, cfg->padding_image_width, cfg->padding_image_height, &padded, r->msg, sizeof r->msg) !=
            CD_OK)
            goto out;
        cur = &padded;
    }
    d.pad_w = cur->w, d.pad_h = cur->h;
    if (cfg->resize_image_width) {
        if (cd_image_resize(cur, cfg->resize_image_width, cfg->resize_image_height, CD_RESIZE_SQUASH, 0, &sized,
                            r->msg, sizeof r->msg) != CD_OK)
            goto out;
        cur = &sized;
    }
    d.c = cur->c, d.h = cur->h, d.w = cur->w;
    size_t plane = (size_t)cur->c * cur->h * cur->w;
    if (cfg->encoding == CD_ENC_NONE)
        flen = plane;
    else if (cd_db_encode_record(cur, cfg->encoding, &feat, &flen, r->msg, sizeof r->msg) != CD_OK)
        goto out;
    d.feat_off = feat ? sizeof d + plane : sizeof d;
    d.feat_len = flen;
    r->len = sizeof d + plane + (feat ? flen : 0);
    r->rec = cd_xmalloc(r->len);
    memcpy(r->rec, &d, sizeof d);
    memcpy(r->rec + sizeof d, cur->data, plane);
    if (feat)
        memcpy(r->rec + sizeof d + plane, feat, flen);
    r->ok = 1;
out:
    free(feat);
    cd_image_free(&img);
    cd_image_free(&padded);
    cd_image_free(&sized);
}

/* DIGITS's order of an image's boxes: sorted by loc_z (the row's last value), then
 * reversed: the farthest first, boxes of one depth in the reverse of their lines. */
static void sort_rows(float *rows, size_t n)
{
    float t[DS_DET_ROW];
    for (size_t i = 1; i < n; i++) {
        memcpy(t, rows + i * DS_DET_ROW, sizeof t);
        size_t j = i;
        for (; j > 0 && rows[(j - 1) * DS_DET_ROW + 15] > t[15]; j--)
            memcpy(rows + j * DS_DET_ROW, rows + (j - 1) * DS_DET_ROW, sizeof t);
        memcpy(rows + j * DS_DET_ROW, t, sizeof t);
    }
    for (size_t i = 0; i < n / 2; i++) {
        memcpy(t, rows + i * DS_DET_ROW, sizeof t);
        memcpy(rows + i * DS_DET_ROW, rows + (n - 1 - i) * DS_DET_ROW, sizeof t);
        memcpy(rows + (n - 1 - i) * DS_DET_ROW, t, sizeof t);
    }
}

static int bin_of(double v)
{
    int k = NBINS - 1;
    while (k > 0 && v < g_edges[k])
        k--;
    return k;
}

/* The stored boxes rows[0..n) of one record into the split's statistics. */
static void count_boxes(det_split *sp, int nclasses, const float *rows, size_t n)
{
    uint8_t seen[DS_DET_MAX_CLASSES] = {0};
    for (size_t b = 0; b < n; b++) {
        const float *row = rows + b * DS_DET_ROW;
        int k = (int)row[5];
        if (k < 0 || k >= nclasses)
            continue;
        det_cstat *s = &sp->stats[k];
        double w = row[2], h = row[3];
        s->wmin = s->boxes ? fmin(s->wmin, w) : w;
        s->wmax = s->boxes ? fmax(s->wmax, w) : w;
        s->hmin = s->boxes ? fmin(s->hmin, h) : h;
        s->hmax = s->boxes ? fmax(s->hmax, h) : h;
        s->wsum += w;
        s->hsum += h;
        s->wbins[bin_of(w)]++;
        s->hbins[bin_of(h)]++;
        s->boxes++;
        s->images += !seen[k];
        seen[k] = 1;
    }
}

static void push_kept(det_split *sp, const float *row)
{
    if (sp->nkept == sp->capkept) {
        sp->capkept = sp->capkept ? sp->capkept * 2 : 256;
        sp->kept = cd_xrealloc(sp->kept, sp->capkept * DS_DET_ROW * sizeof *sp->kept);
    }
    memcpy(sp->kept + sp->nkept++ * DS_DET_ROW, row, DS_DET_ROW * sizeof *row);
}

static int consume_image(void *arg, size_t i, ds_record *r, char *err, size_t errlen)
{
    det_run *run = arg;
    det_split *sp = &run->split[run->cur];
    const det_item *it = &sp->items[i];
    const cd_dataset_config_t *cfg = run->cfg;
    if (!r->ok) {
        ds_skip(run->skips, it->image, r->msg);
        goto progress;
    }
    det_rec d;
    memcpy(&d, r->rec, sizeof d);
    if (!run->c) {
        run->c = d.c, run->h = d.h, run->w = d.w;
        run->sum = cd_xcalloc((size_t)d.c * d.h * d.w, sizeof *run->sum);
    } else if (d.c != run->c || d.h != run->h || d.w != run->w) {
        char why[512];
        snprintf(why, sizeof why, "it is %dx%d with %d channel%s, the dataset's images are %dx%d with %d (without "
                 "padding and resizing the first image by name sets them); set padding_image_width and "
                 "padding_image_height to pad every image to one size, or resize_image_width and "
                 "resize_image_height%s", d.w, d.h, d.c, d.c == 1 ? "" : "s", run->w, run->h, run->c,
                 d.c != run->c ? ", or channel_conversion RGB or L" : "");
        ds_skip(run->skips, it->image, why);
        goto progress;
    }
    if (!sp->features) {
        char path[4096];
        if (ds_job_file_path(run->outdir, JOBDIR_TRAIN_DB + run->cur, path, sizeof path, err, errlen) != CD_OK)
            return CD_ERR;
        sp->features = cd_db_writer_open(path, run->c, run->h, run->w, cfg->encoding, run->classes->n, err, errlen);
        if (!sp->features)
            return CD_ERR;
    }
    if (cd_db_writer_add(sp->features, r->rec + d.feat_off, d.feat_len, 0, err, errlen) != CD_OK)
        return CD_ERR;
    /* the boxes in the stored image: padding keeps them, resizing scales them */
    double sx = (double)d.w / d.pad_w, sy = (double)d.h / d.pad_h;
    size_t first = sp->nkept;
    for (size_t b = 0; b < it->n; b++) {
        float row[DS_DET_ROW];
        memcpy(row, sp->rows + (it->first + b) * DS_DET_ROW, sizeof row);
        float x = row[0], y = row[1], w = row[2], h = row[3];
        int clipped = 0;
        if (ds_det_place_box(row, d.src_w, d.src_h, sx, sy, &clipped) != CD_OK) {
            char why[256];
            snprintf(why, sizeof why, "the box left %g top %g right %g bottom %g is outside the %dx%d image %.80s; "
                     "it is left out", x, y, x + w, y + h, d.src_w, d.src_h, it->image);
            note_bad(run, DS_DET_BAD_OUTSIDE, it->label, sp->row_line[it->first + b], why);
            continue;
        }
        run->clipped += clipped;
        push_kept(sp, row);
    }
    sort_rows(sp->kept + first * DS_DET_ROW, sp->nkept - first);
    count_boxes(sp, run->classes->n, sp->kept + first * DS_DET_ROW, sp->nkept - first);
    sp->rec_first[sp->written] = first;
    sp->rec_n[sp->written] = sp->nkept - first;
    sp->written++;
    if (run->cur == CD_SPLIT_TRAIN) {
        const uint8_t *px = r->rec + sizeof d;
        for (size_t k = 0; k < (size_t)d.c * d.h * d.w; k++)
            run->sum[k] += px[k];
        run->sum_count++;
    }
progress:
    ds_progress_step(&sp->progress, i + 1, sp->n);
    return CD_OK;
}

/* The stored shape, from the first train image by name (before the records are
 * shuffled), so that which images fit does not depend on the seed; unset when that image
 * cannot be used (then the first record written sets it). */
static void reference_shape(det_run *run)
{
    ds_record r;
    det_prep p = {run->cfg, run->split[CD_SPLIT_TRAIN].items};
    prepare_image(&p, 0, NULL, &r);
    if (r.ok) {
        det_rec d;
        memcpy(&d, r.rec, sizeof d);
        run->c = d.c, run->h = d.h, run->w = d.w;
        run->sum = cd_xcalloc((size_t)d.c * d.h * d.w, sizeof *run->sum);
    }
    free(r.rec);
}

static int write_features(det_run *run, int split, char *err, size_t errlen)
{
    det_split *sp = &run->split[split];
    run->cur = split;
    det_prep p = {run->cfg, sp->items};
    sp->rec_first = cd_xcalloc(sp->n, sizeof *sp->rec_first);
    sp->rec_n = cd_xcalloc(sp->n, sizeof *sp->rec_n);
    sp->stats = cd_xcalloc((size_t)run->classes->n, sizeof *sp->stats);
    ds_progress_init(&sp->progress, run->out, split);
    ds_pipe_job job = {.cfg = run->cfg, .n = sp->n, .split = split, .threads = ds_thread_count(run->cfg),
                       .prepare = prepare_image, .prepare_ctx = &p};
    double t0 = cd_now();
    if (ds_pipeline_run(&job, consume_image, run, err, errlen) != CD_OK)
        return CD_ERR;
    if (!sp->features)
        return ds_err(err, errlen, "none of the %zu %s images could be used (%zu files skipped; the log names the "
                      "first); check the images", sp->n, cd_split_name(split), run->skips->count);
    int rc = cd_db_writer_finish(sp->features, err, errlen);
    sp->features = NULL;
    if (rc == CD_OK)
        ds_emit_log(run->out, "info", "%s: %zu images in %.2f s", jobdir_name(JOBDIR_TRAIN_DB + split), sp->written,
                    cd_now() - t0);
    return rc;
}

/* The label db of a split: record r holds its rec_n[r] rows, then rows of class -1, up
 * to max_boxes. */
static int write_labels_db(det_run *run, int split, int max_boxes, char *err, size_t errlen)
{
    det_split *sp = &run->split[split];
    char path[4096];
    if (ds_job_file_path(run->outdir, JOBDIR_TRAIN_LABELS_DB + split, path, sizeof path, err, errlen) != CD_OK)
        return CD_ERR;
    cd_db_writer_t *w = cd_db_writer_open(path, 1, max_boxes, DS_DET_ROW, CD_ENC_F32, run->classes->n, err, errlen);
    if (!w)
        return CD_ERR;
    size_t nval = (size_t)max_boxes * DS_DET_ROW;
    float *rec = cd_xmalloc(nval * sizeof *rec);
    uint8_t *bytes = cd_xmalloc(nval * 4);
    int rc = CD_OK;
    for (size_t r = 0; r < sp->written && rc == CD_OK; r++) {
        memset(rec, 0, nval * sizeof *rec);
        memcpy(rec, sp->kept + sp->rec_first[r] * DS_DET_ROW, sp->rec_n[r] * DS_DET_ROW * sizeof *rec);
        for (size_t b = sp->rec_n[r]; b < (size_t)max_boxes; b++)
            rec[b * DS_DET_ROW + 5] = -1;
        ds_put_f32(bytes, rec, nval);
        rc = cd_db_writer_add(w, bytes, nval * 4, 0, err, errlen);
    }
    free(rec);
    free(bytes);
    if (rc != CD_OK) {
        cd_db_writer_abort(w);
        return rc;
    }
    return cd_db_writer_finish(w, err, errlen);
}

/* ---- the summary ------------------------------------------------------------------------ */

/* The `dataset` line: classes count the boxes of each split. */
static json_t *summary(const det_run *run, const cd_dataset_result_t *res)
{
    json_t *classes = json_array();
    for (int k = 0; k < run->classes->n; k++) {
        json_t *o = json_pack("{s:s}", "label", run->classes->names[k]);
        for (int s = 0; s < CD_SPLIT_COUNT; s++)
            json_object_set_new(o, cd_split_name(s),
                                json_integer(run->split[s].stats ? (json_int_t)run->split[s].stats[k].boxes : 0));
        json_array_append_new(classes, o);
    }
    json_t *line = ds_dataset_line(res, classes, 1);
    json_object_set_new(line, "task", json_string(cd_dataset_task_name(CD_TASK_DETECTION)));
    return line;
}

static json_t *bins_json(const size_t *bins)
{
    json_t *a = json_array();
    for (int k = 0; k < NBINS; k++)
        json_array_append_new(a, json_integer((json_int_t)bins[k]));
    return a;
}

/* box_stats: per split, per class with boxes: counts, width and height ranges and
 * histograms over g_edges. */
static json_t *box_stats(const det_run *run)
{
    json_t *edges = json_array();
    for (int k = 0; k < NBINS; k++)
        json_array_append_new(edges, json_integer(g_edges[k]));
    json_t *o = json_pack("{s:o}", "histogram_edges", edges);
    for (int s = 0; s < CD_SPLIT_COUNT; s++) {
        const det_split *sp = &run->split[s];
        if (!sp->written)
            continue;
        json_t *list = json_array();
        for (int k = 0; k < run->classes->n; k++) {
            const det_cstat *c = &sp->stats[k];
            if (!c->boxes)
                continue;
            json_array_append_new(
                list, json_pack("{s:i, s:s, s:I, s:I, s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:o, s:o}", "class", k,
                                "label", run->classes->names[k], "boxes", (json_int_t)c->boxes, "images",
                                (json_int_t)c->images, "width", "min", c->wmin, "mean", c->wsum / (double)c->boxes,
                                "max", c->wmax, "height", "min", c->hmin, "mean", c->hsum / (double)c->boxes, "max",
                                c->hmax, "width_histogram", bins_json(c->wbins), "height_histogram",
                                bins_json(c->hbins)));
        }
        json_object_set_new(o, cd_split_name(s), list);
    }
    return o;
}

static json_t *size_or_null(int w, int h)
{
    return w ? json_pack("[i, i]", w, h) : json_null();
}

/* stats.json's own fields of a detection dataset. */
static json_t *stats_fields(const det_run *run, int max_boxes, const cd_dataset_result_t *res)
{
    const cd_dataset_config_t *cfg = run->cfg;
    ds_db_shape images = {run->c, run->h, run->w, cfg->encoding, run->classes->n, 0};
    ds_db_shape labels = {1, max_boxes, DS_DET_ROW, CD_ENC_F32, 0, 0};
    json_t *f = ds_stats_fields(&images, cfg->resize_image_width ? CD_RESIZE_SQUASH : -1, cfg->seed,
                                CD_TASK_DETECTION, &labels, res);
    json_t *bad = json_object();
    for (int b = 0; b < DS_DET_BAD_COUNT; b++)
        json_object_set_new(bad, ds_det_bad_name(b), json_integer((json_int_t)run->bad[b]));
    json_object_set_new(f, "max_boxes", json_integer(max_boxes));
    json_object_set_new(f, "padding", size_or_null(cfg->padding_image_width, cfg->padding_image_height));
    json_object_set_new(f, "resize", size_or_null(cfg->resize_image_width, cfg->resize_image_height));
    json_object_set_new(f, "val_min_box_size", json_integer(cfg->val_min_box_size));
    json_object_set_new(f, "class_mapping", json_string(run->classes->custom ? "custom_classes" : "kitti"));
    json_object_set_new(f, "bad_labels", bad);
    json_object_set_new(f, "clipped_boxes", json_integer((json_int_t)run->clipped));
    json_object_set_new(f, "box_stats", box_stats(run));
    return f;
}

/* The statistics DIGITS users read off the log: boxes per class, their sizes. */
static void log_stats(const det_run *run, int max_boxes)
{
    for (int s = 0; s < CD_SPLIT_COUNT; s++) {
        const det_split *sp = &run->split[s];
        for (int k = 0; sp->written && k < run->classes->n; k++) {
            const det_cstat *c = &sp->stats[k];
            if (c->boxes)
                ds_emit_log(run->out, "info", "%s: class %d %s: %zu boxes in %zu images; width %.1f to %.1f "
                            "(mean %.1f), height %.1f to %.1f (mean %.1f) pixels", cd_split_name(s), k,
                            run->classes->names[k], c->boxes, c->images, c->wmin, c->wmax,
                            c->wsum / (double)c->boxes, c->hmin, c->hmax, c->hsum / (double)c->boxes);
        }
    }
    ds_emit_log(run->out, "info", "at most %d boxes in an image: the label records are 1x%dx%d", max_boxes, max_boxes,
                DS_DET_ROW);
    size_t nbad = 0;
    for (int b = 0; b < DS_DET_BAD_COUNT; b++)
        nbad += run->bad[b];
    if (nbad)
        ds_emit_log(run->out, "warning", "bad label lines: %zu of a wrong column count, %zu with a value not a "
                    "number, %zu empty boxes, %zu boxes outside their image (all left out), %zu of no class (kept as "
                    "dontcare)", run->bad[DS_DET_BAD_COLUMNS], run->bad[DS_DET_BAD_NUMBER],
                    run->bad[DS_DET_BAD_EMPTY], run->bad[DS_DET_BAD_OUTSIDE], run->bad[DS_DET_BAD_CLASS]);
    if (run->clipped)
        ds_emit_log(run->out, "info", "%zu boxes reached past their image and were clipped to it", run->clipped);
}

static void split_free(det_split *sp)
{
    for (size_t i = 0; i < sp->n; i++) {
        free(sp->items[i].image);
        free(sp->items[i].label);
    }
    free(sp->items);
    free(sp->rows);
    free(sp->row_line);
    free(sp->kept);
    free(sp->rec_first);
    free(sp->rec_n);
    free(sp->stats);
    cd_db_writer_abort(sp->features);
    memset(sp, 0, sizeof *sp);
}

int ds_create_detection(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                        cd_dataset_result_t *result, char *err, size_t errlen)
{
    cd_dataset_result_t res = {0};
    ds_skips skips = {0, progress};
    ds_det_classes classes = {0};
    det_run run = {.cfg = cfg, .outdir = outdir, .out = progress, .skips = &skips, .classes = &classes};
    double t0 = cd_now();
    int rc = CD_OK, max_boxes = 1;
    if (cfg->encoding < 0 || cfg->encoding >= CD_ENC_IMAGE_COUNT)
        rc = ds_err(err, errlen, "encoding %d is not an image encoding; use one of %s", cfg->encoding,
                    cd_encoding_list());
    if (rc == CD_OK)
        rc = ds_det_classes_init(&classes, cfg->custom_classes, err, errlen);
    if (rc == CD_OK)
        rc = ds_prepare_outdir(outdir, err, errlen);
    if (rc == CD_OK)
        rc = parse_split(&run, CD_SPLIT_TRAIN, cfg->train_image_folder, cfg->train_label_folder, err, errlen);
    ds_emit_progress(progress, "parse", NULL, 1, 2);
    if (rc == CD_OK && cfg->val_image_folder[0])
        rc = parse_split(&run, CD_SPLIT_VAL, cfg->val_image_folder, cfg->val_label_folder, err, errlen);
    ds_emit_progress(progress, "parse", NULL, 2, 2);
    if (rc != CD_OK)
        goto out;
    ds_emit_log(progress, "info", "%d classes (%s); images with labels: train %zu (%zu boxes), val %zu (%zu boxes); "
                "%zu files skipped so far", classes.n, classes.custom ? "custom_classes" : "KITTI's mapping",
                run.split[CD_SPLIT_TRAIN].n, run.split[CD_SPLIT_TRAIN].nrows, run.split[CD_SPLIT_VAL].n,
                run.split[CD_SPLIT_VAL].nrows, skips.count);
    reference_shape(&run);
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        det_split *sp = &run.split[s];
        ds_shuffle_split(cfg->seed, s, sp->items, sp->n, sizeof *sp->items);
        if (sp->n)
            rc = write_features(&run, s, err, errlen);
    }
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        for (size_t r = 0; r < run.split[s].written; r++)
            if (run.split[s].rec_n[r] > (size_t)max_boxes)
                max_boxes = (int)run.split[s].rec_n[r];
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        res.count[s] = run.split[s].written;
        if (run.split[s].written)
            rc = write_labels_db(&run, s, max_boxes, err, errlen);
    }
    if (rc != CD_OK)
        goto out;
    res.skipped = skips.count;
    res.num_classes = classes.n;
    log_stats(&run, max_boxes);
    if (skips.count)
        ds_emit_log(progress, "warning", "%zu files were skipped in all", skips.count);
    rc = ds_write_labels(outdir, classes.names, classes.n, err, errlen);
    if (rc == CD_OK)
        rc = ds_write_mean(outdir, run.c, run.h, run.w, run.sum, run.sum_count, err, errlen);
    if (rc == CD_OK)
        rc = ds_finish_job(outdir, progress, summary(&run, &res), stats_fields(&run, max_boxes, &res),
                           cd_now() - t0, err, errlen);
out:
    if (result)
        *result = res;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        split_free(&run.split[s]);
    ds_det_classes_free(&classes);
    free(run.sum);
    return rc;
}
