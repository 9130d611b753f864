/*
 * The `dataset` task for image segmentation, as DIGITS 6.1's image-segmentation data
 * extension made it: a folder of feature images and a folder of label images paired by
 * base name. Each pair becomes record i of train.db (the image, not resized, in
 * cfg->encoding) and record i of train_labels.db (1 x H x W class indices as a PNG; 255
 * is a pixel of no class); the same for val. Then labels.txt, palette.txt, the mean of
 * the train images and, last, stats.json. The rules are in docs/formats.md
 * ("Segmentation datasets").
 *
 * Stages: pair (scan both folders, match base names), split (the validation folders,
 * else pct_val of the shuffled pairs), then per split the pipeline of pipeline.c, whose
 * workers decode both images of a pair into one block (seg_rec) and whose calling
 * thread checks the shape against the first image's and writes both records.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

#define SEG_IGNORE 255 /* the label of a pixel of no class */
#define SEG_MAX_CLASSES 255

typedef struct seg_pair {
    char *feature, *label; /* owned */
} seg_pair;

typedef struct seg_pairs {
    seg_pair *v;
    size_t n, cap;
} seg_pairs;

static void pairs_push(seg_pairs *l, char *feature, char *label)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = cd_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n].feature = feature;
    l->v[l->n].label = label;
    l->n++;
}

static void pairs_free(seg_pairs *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].feature);
        free(l->v[i].label);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* How label pixels become classes; fixed before any record is made, then read by every
 * worker. */
typedef struct seg_colormap {
    int method;   /* enum cd_colormap */
    int nclasses; /* 0 while unknown: colormap label without class_labels_file, where it is
                   * the largest index seen + 1 */
    /* label: the palette of the first label image; npalette 0 for grayscale labels */
    uint8_t palette[256][3];
    int npalette;
    const char *first; /* the label image that set them */
    /* textfile: colours 0xRRGGBB sorted, with their classes */
    uint32_t colours[SEG_MAX_CLASSES];
    uint8_t classes[SEG_MAX_CLASSES];
    int ncolours;
} seg_colormap;

/*
 * One prepared pair, in one malloc'ed block (ds_record.rec) so the pipeline frees it
 * whole: this header, then the feature image planar (c, h, w) for the mean, then the
 * feature record (at feat_off, feat_len bytes; the planar bytes themselves for encoding
 * none), then the label record (1 x h x w PNG).
 */
typedef struct seg_rec {
    int c, h, w;
    size_t feat_off, feat_len, label_off, label_len;
    uint64_t pixels[256];   /* label pixels per class, [SEG_IGNORE]: no class */
    uint64_t unmapped;      /* pixels made SEG_IGNORE: a colour or index of no class */
    uint32_t first_unmapped; /* the first of those: 0xRRGGBB (textfile) or the index */
    int max_index;          /* the largest class index in the label (-1: none) */
} seg_rec;

typedef struct seg_prep {
    const cd_dataset_config_t *cfg;
    const seg_colormap *cm;
    const seg_pair *pairs;
} seg_prep;

/* ---- decoding ------------------------------------------------------------------ */


/* A label image's class indices as stored (colormap label): palette indices or gray
 * levels, with its palette (*npalette 0: grayscale). */
static int decode_indices(const uint8_t *buf, size_t len, uint8_t **idx, int *h, int *w,
                          uint8_t (*palette)[3], int *npalette, char *err, size_t errlen)
{
    if (cd_image_sniff(buf, len) == CD_IMAGE_PNG)
        return ds_png_decode_indexed(buf, len, idx, h, w, palette, npalette, err, errlen);
    int c = 0;
    *npalette = 0;
    if (ds_image_decode_hwc(buf, len, 0, idx, &c, h, w, err, errlen) != CD_OK)
        return CD_ERR;
    if (c != 1) {
        free(*idx);
        *idx = NULL;
        return ds_err(err, errlen, "a colour image is not a label image of classes; save it as a "
                      "paletted or grayscale PNG, or use colormap_method textfile");
    }
    return CD_OK;
}

/* The class of colour key (0xRRGGBB) in the sorted colormap; -1 if none. */
static int colour_class(const seg_colormap *cm, uint32_t key)
{
    int lo = 0, hi = cm->ncolours - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cm->colours[mid] == key)
            return cm->classes[mid];
        if (cm->colours[mid] < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* The label image as classes (h, w) into *cls, counted into s. */
static int load_label(const seg_colormap *cm, const uint8_t *buf, size_t len, uint8_t **cls, int *h,
                      int *w, seg_rec *s, char *err, size_t errlen)
{
    size_t n;
    s->max_index = -1;
    if (cm->method == CD_COLORMAP_TEXTFILE) {
        cd_image_t rgb;
        if (cd_image_decode(buf, len, 3, &rgb, err, errlen) != CD_OK)
            return CD_ERR;
        *h = rgb.h, *w = rgb.w;
        n = (size_t)rgb.h * rgb.w;
        *cls = cd_xmalloc(n);
        const uint8_t *r = rgb.data, *g = r + n, *b = g + n;
        uint32_t last_key = 0xFFFFFFFFu;
        int last = -1;
        for (size_t i = 0; i < n; i++) {
            uint32_t key = (uint32_t)r[i] << 16 | (uint32_t)g[i] << 8 | b[i];
            if (key != last_key)
                last = colour_class(cm, key), last_key = key;
            if (last < 0 && s->unmapped++ == 0)
                s->first_unmapped = key;
            (*cls)[i] = last < 0 ? SEG_IGNORE : (uint8_t)last;
        }
        cd_image_free(&rgb);
    } else {
        uint8_t pal[256][3];
        int npal = 0;
        if (decode_indices(buf, len, cls, h, w, pal, &npal, err, errlen) != CD_OK)
            return CD_ERR;
        int common = npal < cm->npalette ? npal : cm->npalette;
        if (!npal != !cm->npalette || memcmp(pal, cm->palette, (size_t)common * 3) != 0) {
            free(*cls);
            *cls = NULL;
            return ds_err(err, errlen, "its %s is not the one of %s, the first label image; every "
                          "label image must use the same palette (or all be grayscale)",
                          npal ? "palette" : "lack of a palette", cm->first);
        }
        n = (size_t)*h * *w;
        for (size_t i = 0; i < n; i++) {
            uint8_t k = (*cls)[i];
            if (k != SEG_IGNORE && cm->nclasses && k >= cm->nclasses) {
                if (s->unmapped++ == 0)
                    s->first_unmapped = k;
                (*cls)[i] = SEG_IGNORE;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        s->pixels[(*cls)[i]]++;
    for (int k = SEG_IGNORE - 1; k >= 0 && s->max_index < 0; k--)
        if (s->pixels[k])
            s->max_index = k;
    return CD_OK;
}

/* Read both files of pair i and prepare its records (a worker of the pipeline). */
static void prepare_pair(void *arg, size_t i, uint64_t *sum, ds_record *r)
{
    (void)sum; /* the mean is summed by the writer, which alone knows which records are kept */
    const seg_prep *p = arg;
    const seg_pair *pair = &p->pairs[i];
    memset(r, 0, sizeof *r);
    seg_rec s = {0};
    cd_image_t img = {0};
    uint8_t *cls = NULL, *feat = NULL, *lab = NULL, *lbuf = NULL;
    size_t flen = 0, llen = 0, len = 0;
    int lh = 0, lw = 0;
    char why[256];
    char *fbuf = cd_read_file(pair->feature, &len);
    if (!fbuf) {
        snprintf(r->msg, sizeof r->msg, "cannot read: %s", strerror(errno));
        return;
    }
    int rc = ds_load_converted(p->cfg, (const uint8_t *)fbuf, len, &img, r->msg, sizeof r->msg);
    free(fbuf);
    if (rc != CD_OK)
        return;
    lbuf = (uint8_t *)cd_read_file(pair->label, &len);
    if (!lbuf) {
        snprintf(r->msg, sizeof r->msg, "its label %s cannot be read: %s", pair->label, strerror(errno));
        goto out;
    }
    if (load_label(p->cm, lbuf, len, &cls, &lh, &lw, &s, why, sizeof why) != CD_OK) {
        snprintf(r->msg, sizeof r->msg, "its label %s: %s", pair->label, why);
        goto out;
    }
    if (lh != img.h || lw != img.w) {
        snprintf(r->msg, sizeof r->msg, "its label %s is %dx%d but the image is %dx%d; labels are not "
                 "resized, make the label the image's size", pair->label, lw, lh, img.w, img.h);
        goto out;
    }
    cd_image_t label = {.c = 1, .h = lh, .w = lw, .data = cls};
    if (cd_db_encode_record(&label, CD_ENC_PNG, &lab, &llen, r->msg, sizeof r->msg) != CD_OK)
        goto out;
    size_t plane = (size_t)img.c * img.h * img.w;
    if (p->cfg->encoding == CD_ENC_NONE)
        flen = plane;
    else if (cd_db_encode_record(&img, p->cfg->encoding, &feat, &flen, r->msg, sizeof r->msg) != CD_OK)
        goto out;
    s.c = img.c, s.h = img.h, s.w = img.w;
    s.feat_off = sizeof s + plane;
    s.feat_len = flen;
    if (p->cfg->encoding == CD_ENC_NONE)
        s.feat_off = sizeof s;
    s.label_off = sizeof s + plane + (feat ? flen : 0);
    s.label_len = llen;
    r->len = s.label_off + llen;
    r->rec = cd_xmalloc(r->len);
    memcpy(r->rec, &s, sizeof s);
    memcpy(r->rec + sizeof s, img.data, plane);
    if (feat)
        memcpy(r->rec + sizeof s + plane, feat, flen);
    memcpy(r->rec + s.label_off, lab, llen);
    r->ok = 1;
out:
    free(lbuf);
    free(cls);
    free(feat);
    free(lab);
    cd_image_free(&img);
}

/* ---- pairing the two folders ------------------------------------------------------ */

typedef struct seg_key {
    const char *key; /* the path below the folder, without its extension (points into path) */
    size_t keylen;
    size_t index;    /* in the folder's list */
} seg_key;

/* Byte order of the base names. */
static int name_cmp(const seg_key *x, const seg_key *y)
{
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    return c ? c : x->keylen < y->keylen ? -1 : x->keylen > y->keylen;
}

/* Base names, then the files' order: the first file of a name comes first. */
static int key_cmp(const void *a, const void *b)
{
    const seg_key *x = a, *y = b;
    int c = name_cmp(x, y);
    return c ? c : x->index < y->index ? -1 : x->index > y->index;
}

/* The images of dir by base name (sorted); a second file of one base name is skipped. */
static seg_key *folder_keys(const char *dir, const ds_items *files, size_t *n, ds_skips *skips)
{
    size_t skip = strlen(dir);
    if (skip && dir[skip - 1] != '/')
        skip++;
    seg_key *k = cd_xcalloc(files->n ? files->n : 1, sizeof *k);
    for (size_t i = 0; i < files->n; i++) {
        const char *rel = files->v[i].path + skip;
        const char *slash = strrchr(rel, '/'), *dot = strrchr(rel, '.');
        k[i].key = rel;
        k[i].keylen = dot && (!slash || dot > slash) ? (size_t)(dot - rel) : strlen(rel);
        k[i].index = i;
    }
    qsort(k, files->n, sizeof *k, key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < files->n; i++) {
        if (m && name_cmp(&k[m - 1], &k[i]) == 0) {
            char why[512];
            snprintf(why, sizeof why, "%s has the same base name; rename one of them",
                     files->v[k[m - 1].index].path);
            ds_skip(skips, files->v[k[i].index].path, why);
            continue;
        }
        k[m++] = k[i];
    }
    *n = m;
    return k;
}

/* Pairs of features/labels with the same base names (path below the folder, extension
 * left out), in base-name order. An image without a label, a label without an image and
 * a second file of one name are skipped and named. */
static int pair_folders(const char *features, const char *labels, seg_pairs *out, ds_skips *skips,
                        char *err, size_t errlen)
{
    ds_items f = {0}, l = {0};
    int rc = ds_scan_images(features, 0, &f, skips, err, errlen);
    if (rc == CD_OK)
        rc = ds_scan_images(labels, 0, &l, skips, err, errlen);
    if (rc == CD_OK && (f.n == 0 || l.n == 0))
        rc = ds_err(err, errlen, "no images in %s; put the %s images there (%s)", f.n ? labels : features,
                    f.n ? "label" : "feature", cd_image_kinds());
    if (rc != CD_OK) {
        ds_items_free(&f);
        ds_items_free(&l);
        return rc;
    }
    size_t nf, nl, i = 0, j = 0;
    seg_key *kf = folder_keys(features, &f, &nf, skips), *kl = folder_keys(labels, &l, &nl, skips);
    char why[512];
    while (i < nf || j < nl) {
        int c = i == nf ? 1 : j == nl ? -1 : name_cmp(&kf[i], &kl[j]);
        if (c < 0) {
            snprintf(why, sizeof why, "no label image named %.*s.* in %s", (int)kf[i].keylen, kf[i].key, labels);
            ds_skip(skips, f.v[kf[i++].index].path, why);
        } else if (c > 0) {
            snprintf(why, sizeof why, "a label image without a feature image %.*s.* in %s", (int)kl[j].keylen,
                     kl[j].key, features);
            ds_skip(skips, l.v[kl[j++].index].path, why);
        } else {
            seg_pair p = {f.v[kf[i++].index].path, l.v[kl[j++].index].path};
            pairs_push(out, cd_xstrdup(p.feature), cd_xstrdup(p.label));
        }
    }
    if (out->n == 0)
        rc = ds_err(err, errlen, "no image in %s has a label image of the same base name in %s; name "
                    "each label after its image (a.jpg and a.png)", features, labels);
    free(kf);
    free(kl);
    ds_items_free(&f);
    ds_items_free(&l);
    return rc;
}

/* ---- classes, names and colours ---------------------------------------------------- */

static int colour_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a >> 8, y = *(const uint32_t *)b >> 8;
    return x < y ? -1 : x > y;
}

/* colormap_text_file: line n is class n's colour; into cm (sorted for the lookup) and
 * rgb (in class order). */
static int load_colormap(const char *path, seg_colormap *cm, uint8_t (*rgb)[3], char *err, size_t errlen)
{
    if (access(path, R_OK) != 0)
        return ds_err(err, errlen, "cannot read colormap_text_file %s: %s; give a file of `r g b` lines, "
                      "line n the colour of class n", path, strerror(errno));
    int n = 0;
    if (cd_palette_load(path, rgb, CD_PALETTE_MAX, &n) != CD_OK)
        return ds_err(err, errlen, "colormap_text_file: %s; write one `r g b` line per class",
                      cd_dataset_strerror());
    if (n == 0 || n > SEG_MAX_CLASSES)
        return ds_err(err, errlen, "colormap_text_file %s has %d colours; it needs 1 to %d (255 is the "
                      "label of pixels of no class)", path, n, SEG_MAX_CLASSES);
    /* sort (colour << 8 | class) so a colour's class rides along */
    uint32_t v[SEG_MAX_CLASSES];
    for (int k = 0; k < n; k++)
        v[k] = ((uint32_t)rgb[k][0] << 16 | (uint32_t)rgb[k][1] << 8 | rgb[k][2]) << 8 | (uint32_t)k;
    qsort(v, (size_t)n, sizeof v[0], colour_cmp);
    for (int k = 0; k < n; k++) {
        if (k && v[k] >> 8 == v[k - 1] >> 8)
            return ds_err(err, errlen, "colormap_text_file %s gives classes %u and %u the same colour "
                          "%u %u %u; give each class its own colour", path, v[k - 1] & 0xFF, v[k] & 0xFF,
                          v[k] >> 24, (v[k] >> 16) & 0xFF, (v[k] >> 8) & 0xFF);
        cm->colours[k] = v[k] >> 8;
        cm->classes[k] = (uint8_t)(v[k] & 0xFF);
    }
    cm->ncolours = n;
    cm->nclasses = n;
    return CD_OK;
}

/* The first pair in base-name order whose image and label decode, of one size, sets
 * the dataset's shape (c, h, w) and, for colormap label, the palette (or its lack)
 * every other label image must share (DIGITS's rule). */
static int reference_pair(const cd_dataset_config_t *cfg, const seg_pairs *train, seg_colormap *cm, int *c,
                          int *h, int *w, char *err, size_t errlen)
{
    char first[600] = "";
    for (size_t i = 0; i < train->n; i++) {
        const seg_pair *p = &train->v[i];
        char why[256] = "";
        size_t flen = 0, llen = 0;
        uint8_t *fbuf = (uint8_t *)cd_read_file(p->feature, &flen), *lbuf = NULL, *idx = NULL;
        const char *bad = p->feature;
        cd_image_t img = {0}, rgb = {0};
        int lh = 0, lw = 0;
        int rc = fbuf ? ds_load_converted(cfg, fbuf, flen, &img, why, sizeof why)
                      : ds_err(why, sizeof why, "cannot read: %s", strerror(errno));
        if (rc == CD_OK) {
            bad = p->label;
            lbuf = (uint8_t *)cd_read_file(p->label, &llen);
            if (!lbuf)
                rc = ds_err(why, sizeof why, "cannot read: %s", strerror(errno));
            else if (cm->method == CD_COLORMAP_LABEL)
                rc = decode_indices(lbuf, llen, &idx, &lh, &lw, cm->palette, &cm->npalette, why, sizeof why);
            else if ((rc = cd_image_decode(lbuf, llen, 3, &rgb, why, sizeof why)) == CD_OK)
                lh = rgb.h, lw = rgb.w;
        }
        if (rc == CD_OK && (lh != img.h || lw != img.w))
            rc = ds_err(why, sizeof why, "%dx%d, its image %dx%d", lw, lh, img.w, img.h);
        if (rc == CD_OK) {
            *c = img.c, *h = img.h, *w = img.w;
            cm->first = p->label;
        } else if (!first[0]) {
            snprintf(first, sizeof first, "%s: %s", bad, why);
        }
        free(fbuf);
        free(lbuf);
        free(idx);
        cd_image_free(&img);
        cd_image_free(&rgb);
        if (rc == CD_OK)
            return CD_OK;
    }
    return ds_err(err, errlen, "none of the %zu image/label pairs can be read (the first: %s); check the "
                  "images, and save the labels as %s", train->n, first,
                  cm->method == CD_COLORMAP_LABEL ? "8-bit paletted or grayscale PNGs of the images' sizes "
                  "(colormap_method textfile reads colour labels)" : "colour images of the images' sizes");
}

/* class_labels_file's names (*names NULL, *count 0 when none is given). */
static int load_names(const cd_dataset_config_t *cfg, const seg_colormap *cm, char ***names, int *count,
                      char *err, size_t errlen)
{
    *names = NULL;
    *count = 0;
    if (!cfg->class_labels_file[0])
        return CD_OK;
    if (cd_labels_load(cfg->class_labels_file, names, count) != CD_OK)
        return ds_err(err, errlen, "class_labels_file: %s", cd_dataset_strerror());
    if (*count > SEG_MAX_CLASSES)
        return ds_err(err, errlen, "class_labels_file %s names %d classes; at most %d fit (255 is the label "
                      "of pixels of no class)", cfg->class_labels_file, *count, SEG_MAX_CLASSES);
    if (cm->method == CD_COLORMAP_TEXTFILE && *count != cm->ncolours)
        return ds_err(err, errlen, "class_labels_file %s names %d classes but colormap_text_file %s has %d "
                      "colours; give one name per colour", cfg->class_labels_file, *count,
                      cfg->colormap_text_file, cm->ncolours);
    return CD_OK;
}

/* ---- writing the splits ------------------------------------------------------------ */

typedef struct seg_split {
    const seg_pairs *pairs;
    ds_split_dbs dbs;
    int open;                 /* dbs holds writers */
    uint64_t pixels[256];     /* label pixels per class ([SEG_IGNORE]: no class) */
    size_t images[256];       /* records whose label has the class */
    uint64_t unmapped;        /* pixels made SEG_IGNORE */
    size_t unmapped_records;
} seg_split;

typedef struct seg_run {
    const cd_dataset_config_t *cfg;
    const char *outdir;
    FILE *out;
    ds_skips *skips;
    seg_split split[CD_SPLIT_COUNT];
    int cur;                  /* the split being written */
    int c, h, w;              /* the images' shape, set by reference_pair (mixed: the largest) */
    int mixed;                /* force_same_shape 0: every pair keeps its own size */
    uint64_t *sum;            /* c*h*w sums of the train images; mixed: c sums of their pixels */
    size_t sum_count;         /* images summed; mixed: pixels of each channel */
    int max_index;            /* the largest class index of every label (-1: none) */
    size_t unmapped_named;
} seg_run;

/* A label's pixels that became 255: counted, and the first few labels named. */
static void note_unmapped(seg_run *run, seg_split *sp, const seg_pair *pair, const seg_rec *s)
{
    sp->unmapped += s->unmapped;
    sp->unmapped_records++;
    if (run->unmapped_named++ >= DS_SKIPS_NAMED)
        return;
    if (run->cfg->colormap_method == CD_COLORMAP_TEXTFILE)
        ds_emit_log(run->out, "warning", "%s: %llu pixels of colours not in colormap_text_file (the first "
                    "%u %u %u) are labelled 255, no class", pair->label, (unsigned long long)s->unmapped,
                    s->first_unmapped >> 16, (s->first_unmapped >> 8) & 0xFF, s->first_unmapped & 0xFF);
    else
        ds_emit_log(run->out, "warning", "%s: %llu pixels of indices past the classes of class_labels_file "
                    "(the first %u) are labelled 255, no class", pair->label,
                    (unsigned long long)s->unmapped, s->first_unmapped);
}

static int consume_pair(void *arg, size_t i, ds_record *r, char *err, size_t errlen)
{
    seg_run *run = arg;
    seg_split *sp = &run->split[run->cur];
    const seg_pair *pair = &sp->pairs->v[i];
    if (!r->ok) {
        ds_skip(run->skips, pair->feature, r->msg);
        goto progress;
    }
    seg_rec s;
    memcpy(&s, r->rec, sizeof s);
    if (run->mixed && s.c != run->c) {
        char why[256];
        snprintf(why, sizeof why, "it has %d channel%s, the dataset's images %d; set channel_conversion RGB "
                 "or L", s.c, s.c == 1 ? "" : "s", run->c);
        ds_skip(run->skips, pair->feature, why);
        goto progress;
    }
    if (!run->mixed && (s.c != run->c || s.h != run->h || s.w != run->w)) {
        char why[256];
        snprintf(why, sizeof why, "it is %dx%d with %d channel%s, the dataset's images are %dx%d with %d "
                 "(force_same_shape: the first pair by name sets it); resize it%s", s.w, s.h, s.c,
                 s.c == 1 ? "" : "s", run->w, run->h, run->c,
                 s.c != run->c ? ", or set channel_conversion RGB or L" : "");
        ds_skip(run->skips, pair->feature, why);
        goto progress;
    }
    if (!sp->open) {
        ds_db_shape f = {run->c, run->h, run->w, run->cfg->encoding, 0, run->mixed};
        ds_db_shape l = {1, run->h, run->w, CD_ENC_PNG, 0, run->mixed};
        if (ds_split_dbs_open(&sp->dbs, run->outdir, run->cur, &f, &l, run->out, err, errlen) != CD_OK)
            return CD_ERR;
        sp->open = 1;
    }
    if (ds_split_dbs_add_sized(&sp->dbs, r->rec + s.feat_off, s.feat_len, r->rec + s.label_off, s.label_len, s.h,
                               s.w, err, errlen) != CD_OK)
        return CD_ERR;
    if (run->mixed && (s.h > run->h || s.w > run->w)) {
        run->h = s.h > run->h ? s.h : run->h;
        run->w = s.w > run->w ? s.w : run->w;
    }
    if (run->cur == CD_SPLIT_TRAIN) {
        const uint8_t *px = r->rec + sizeof s;
        size_t plane = (size_t)s.h * s.w;
        for (size_t k = 0; k < (size_t)s.c * plane; k++)
            run->sum[run->mixed ? k / plane : k] += px[k];
        run->sum_count += run->mixed ? plane : 1;
    }
    for (int k = 0; k < 256; k++) {
        sp->pixels[k] += s.pixels[k];
        sp->images[k] += s.pixels[k] != 0;
    }
    if (s.max_index > run->max_index)
        run->max_index = s.max_index;
    if (s.unmapped)
        note_unmapped(run, sp, pair, &s);
progress:
    if (sp->open)
        ds_split_dbs_progress(&sp->dbs, i + 1, sp->pairs->n);
    else
        ds_emit_progress(run->out, "create", cd_split_name(run->cur), i + 1, sp->pairs->n);
    return CD_OK;
}

static int write_split(seg_run *run, int split, const seg_prep *prep, char *err, size_t errlen)
{
    seg_split *sp = &run->split[split];
    run->cur = split;
    seg_prep p = *prep;
    p.pairs = sp->pairs->v;
    ds_pipe_job job = {.cfg = run->cfg, .n = sp->pairs->n, .split = split, .threads = ds_thread_count(run->cfg),
                       .prepare = prepare_pair, .prepare_ctx = &p};
    if (ds_pipeline_run(&job, consume_pair, run, err, errlen) != CD_OK)
        return CD_ERR;
    if (!sp->open)
        return ds_err(err, errlen, "none of the %zu %s pairs could be used (%zu files skipped; the log names "
                      "the first); check the images and their labels", sp->pairs->n, cd_split_name(split),
                      run->skips->count);
    return CD_OK;
}

/* ---- the summary ------------------------------------------------------------------ */

/* {label, train, val, test} of class k: its pixels, or the records that hold it. */
static json_t *per_split(const seg_run *run, const char *label, int k, int pixels)
{
    char *name = cd_xstrdup(label);
    ds_utf8_sanitize(name);
    json_t *o = json_pack("{s:s}", "label", name);
    free(name);
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        json_object_set_new(o, cd_split_name(s), json_integer(pixels ? (json_int_t)run->split[s].pixels[k]
                                                                      : (json_int_t)run->split[s].images[k]));
    return o;
}

/* The `dataset` line: classes count the records whose label has the class. */
static json_t *summary(const seg_run *run, char *const *names, int nclasses, const cd_dataset_result_t *res)
{
    json_t *classes = json_array();
    for (int k = 0; k < nclasses; k++)
        json_array_append_new(classes, per_split(run, names[k], k, 0));
    json_t *line = ds_dataset_line(res, classes, 1);
    json_object_set_new(line, "task", json_string(cd_dataset_task_name(CD_TASK_SEGMENTATION)));
    return line;
}

/* stats.json's own fields of a segmentation dataset. */
static json_t *stats_fields(const seg_run *run, char *const *names, int nclasses, const cd_dataset_result_t *res)
{
    const cd_dataset_config_t *cfg = run->cfg;
    /* the images are stored as they are: no resize_mode */
    ds_db_shape images = {run->c, run->h, run->w, cfg->encoding, nclasses, run->mixed};
    ds_db_shape labels = {1, run->h, run->w, CD_ENC_PNG, 0, run->mixed};
    json_t *f = ds_stats_fields(&images, -1, cfg->seed, CD_TASK_SEGMENTATION, &labels, res);
    /* force_same_shape 0: width and height are the largest image's */
    json_object_set_new(f, "force_same_shape", json_integer(!run->mixed));
    json_t *pixels = json_array(), *ignored = json_object(), *unmapped = json_object();
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (res->count[s]) {
            json_object_set_new(ignored, cd_split_name(s),
                                json_integer((json_int_t)run->split[s].pixels[SEG_IGNORE]));
            json_object_set_new(unmapped, cd_split_name(s), json_integer((json_int_t)run->split[s].unmapped));
        }
    for (int k = 0; k < nclasses; k++)
        json_array_append_new(pixels, per_split(run, names[k], k, 1));
    json_object_set_new(f, "palette_file", json_string(jobdir_name(JOBDIR_PALETTE)));
    json_object_set_new(f, "colormap_method", json_string(cfg->colormap_method == CD_COLORMAP_TEXTFILE
                                                              ? "textfile" : "label"));
    json_object_set_new(f, "class_pixels", pixels);
    json_object_set_new(f, "ignored_pixels", ignored);
    json_object_set_new(f, "unmapped_pixels", unmapped);
    return f;
}

/* labels.txt, palette.txt and the mean; names[0..nclasses) and colours are final. */
static int write_files(const seg_run *run, char *const *names, int nclasses, const uint8_t (*rgb)[3],
                       char *err, size_t errlen)
{
    char path[4096];
    if (ds_write_labels(run->outdir, names, nclasses, err, errlen) != CD_OK ||
        ds_job_file_path(run->outdir, JOBDIR_PALETTE, path, sizeof path, err, errlen) != CD_OK ||
        cd_palette_save(path, rgb, nclasses, err, errlen) != CD_OK)
        return CD_ERR;
    /* images of varying size have a mean pixel, not a mean image */
    return ds_write_mean(run->outdir, run->c, run->mixed ? 1 : run->h, run->mixed ? 1 : run->w, run->sum,
                         run->sum_count, err, errlen);
}

/* The final classes: the names given (or class0, class1 ...) and their colours. */
static int final_classes(const seg_colormap *cm, const uint8_t (*cmap_rgb)[3], int max_index, char **given,
                         int ngiven, char ***names, uint8_t (*rgb)[3])
{
    int n = cm->nclasses ? cm->nclasses : max_index + 1 > 0 ? max_index + 1 : 1;
    *names = cd_xcalloc((size_t)n, sizeof **names);
    for (int k = 0; k < n; k++) {
        char dflt[32];
        snprintf(dflt, sizeof dflt, "class%d", k);
        (*names)[k] = cd_xstrdup(k < ngiven ? given[k] : dflt);
    }
    cd_palette_default(rgb, n);
    if (cm->method == CD_COLORMAP_TEXTFILE)
        memcpy(rgb, cmap_rgb, (size_t)n * 3);
    else
        memcpy(rgb, cm->palette, (size_t)(cm->npalette < n ? cm->npalette : n) * 3);
    return n;
}

int ds_create_segmentation(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                           cd_dataset_result_t *result, char *err, size_t errlen)
{
    cd_dataset_result_t res = {0};
    ds_skips skips = {0, progress};
    seg_pairs pairs[CD_SPLIT_COUNT] = {{0}};
    seg_colormap *cm = cd_xcalloc(1, sizeof *cm);
    uint8_t cmap_rgb[CD_PALETTE_MAX][3], rgb[CD_PALETTE_MAX][3];
    char **given = NULL, **names = NULL;
    int ngiven = 0, nclasses = 0;
    seg_run run = {cfg, outdir, progress, &skips, .max_index = -1};
    double t0 = cd_now();
    int rc = CD_OK;

    run.mixed = !cfg->force_same_shape;
    /* encoding none holds records of one size: images of varying size are stored as PNG,
     * which keeps their pixels */
    cd_dataset_config_t *own = NULL;
    if (run.mixed && cfg->encoding == CD_ENC_NONE) {
        own = cd_xmalloc(sizeof *own);
        *own = *cfg;
        own->encoding = CD_ENC_PNG;
        cfg = run.cfg = own;
        ds_emit_log(progress, "info", "images of varying size (force_same_shape 0) are stored as PNG");
    }
    if (cfg->encoding < 0 || cfg->encoding >= CD_ENC_IMAGE_COUNT)
        rc = ds_err(err, errlen, "encoding %d is not an image encoding; use one of %s", cfg->encoding,
                    cd_encoding_list());
    if (rc == CD_OK)
        rc = ds_prepare_outdir(outdir, err, errlen);
    cm->method = cfg->colormap_method;
    if (rc == CD_OK && cm->method == CD_COLORMAP_TEXTFILE)
        rc = load_colormap(cfg->colormap_text_file, cm, cmap_rgb, err, errlen);
    if (rc == CD_OK)
        rc = load_names(cfg, cm, &given, &ngiven, err, errlen);
    if (rc == CD_OK && cm->method == CD_COLORMAP_LABEL)
        cm->nclasses = ngiven;
    if (rc == CD_OK)
        rc = pair_folders(cfg->feature_folder, cfg->label_folder, &pairs[CD_SPLIT_TRAIN], &skips, err, errlen);
    if (rc == CD_OK)
        rc = reference_pair(cfg, &pairs[CD_SPLIT_TRAIN], cm, &run.c, &run.h, &run.w, err, errlen);
    if (rc == CD_OK && cfg->validation_feature_folder[0]) {
        rc = pair_folders(cfg->validation_feature_folder, cfg->validation_label_folder, &pairs[CD_SPLIT_VAL],
                          &skips, err, errlen);
    } else if (rc == CD_OK) {
        /* DIGITS's split_image_list: the shuffled pairs, the first floor(n * pct_val / 100)
         * validate */
        seg_pairs *t = &pairs[CD_SPLIT_TRAIN];
        uint64_t rng = ds_seed_mix(cfg->seed, DS_STREAM_SEG_SPLIT, 0);
        ds_shuffle(t->v, t->n, sizeof *t->v, &rng);
        size_t nval = (size_t)floor((double)t->n * cfg->pct_val / 100.0);
        for (size_t i = 0; i < nval; i++)
            pairs_push(&pairs[CD_SPLIT_VAL], t->v[i].feature, t->v[i].label);
        memmove(t->v, t->v + nval, (t->n - nval) * sizeof *t->v);
        t->n -= nval;
    }
    if (rc != CD_OK)
        goto out;
    run.sum = cd_xcalloc(run.mixed ? (size_t)run.c : (size_t)run.c * run.h * run.w, sizeof *run.sum);
    ds_emit_log(progress, "info", "image/label pairs: train %zu, val %zu; %zu files skipped so far",
                pairs[CD_SPLIT_TRAIN].n, pairs[CD_SPLIT_VAL].n, skips.count);

    seg_prep prep = {cfg, cm, NULL};
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        ds_shuffle_split(cfg->seed, s, pairs[s].v, pairs[s].n, sizeof *pairs[s].v);
        run.split[s].pairs = &pairs[s];
        if (pairs[s].n)
            rc = write_split(&run, s, &prep, err, errlen);
    }
    if (rc != CD_OK)
        goto out;

    nclasses = final_classes(cm, (const uint8_t(*)[3])cmap_rgb, run.max_index, given, ngiven, &names, rgb);
    if (!cm->nclasses && run.max_index >= 0)
        ds_emit_log(progress, "info", "%d classes: the label images' largest class index is %d", nclasses,
                    run.max_index);
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        if (!run.split[s].open)
            continue;
        ds_db_writer_set_classes(run.split[s].dbs.features, nclasses);
        ds_db_writer_set_classes(run.split[s].dbs.labels, nclasses);
        res.count[s] = run.split[s].dbs.written;
        run.split[s].open = 0;
        rc = ds_split_dbs_finish(&run.split[s].dbs, err, errlen);
    }
    if (rc != CD_OK)
        goto out;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (run.split[s].unmapped)
            ds_emit_log(progress, "warning", "%s: %llu label pixels in %zu images have no class and are "
                        "labelled 255", cd_split_name(s), (unsigned long long)run.split[s].unmapped,
                        run.split[s].unmapped_records);
    res.skipped = skips.count;
    res.num_classes = nclasses;
    if (skips.count)
        ds_emit_log(progress, "warning", "%zu files were skipped in all", skips.count);
    rc = write_files(&run, names, nclasses, (const uint8_t(*)[3])rgb, err, errlen);
    if (rc == CD_OK)
        rc = ds_finish_job(outdir, progress, summary(&run, names, nclasses, &res),
                           stats_fields(&run, names, nclasses, &res), cd_now() - t0, err, errlen);
out:
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (run.split[s].open)
            ds_split_dbs_abort(&run.split[s].dbs);
    if (result)
        *result = res;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        pairs_free(&pairs[s]);
    cd_labels_free(given, ngiven);
    cd_labels_free(names, nclasses);
    free(run.sum);
    free(cm);
    free(own);
    return rc;
}
