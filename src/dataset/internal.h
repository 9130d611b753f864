/* Helpers shared by the files of src/dataset only (not part of the public API). */
#ifndef CDIGITS_DATASET_INTERNAL_H
#define CDIGITS_DATASET_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdigits/dataset.h"
#include "cdigits/image.h"
#include "cdigits/jobdir.h"

/* snprintf into err when err is not NULL; always returns CD_ERR so callers can
 * `return ds_err(err, errlen, ...)`. */
int ds_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CRC-32 (IEEE 802.3, the one zlib.crc32 and PNG use). Start with crc = 0. */
uint32_t ds_crc32(uint32_t crc, const void *buf, size_t len);

/* splitmix64: a small, good generator whose whole state is one integer. */
static inline uint64_t ds_rand_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform integer in [0, n) (n > 0) without modulo bias worth caring about (n is
 * small next to 2^64: Lemire's multiply-shift). */
static inline uint64_t ds_rand_below(uint64_t *state, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)ds_rand_next(state) * n) >> 64);
}

/* A seed for item `index` of stream `stream`, derived from the dataset seed, so that
 * per-image randomness does not depend on which thread ran it. */
static inline uint64_t ds_seed_mix(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    ds_rand_next(&s);
    s ^= index * 0x9E3779B97F4A7C15ULL;
    return ds_rand_next(&s);
}

/* Fisher-Yates shuffle of n elements of `size` bytes with the generator state. */
void ds_shuffle(void *base, size_t n, size_t size, uint64_t *state);

/* Interleaved (h, w, c) <-> planar (c, h, w). */
void ds_hwc_to_chw(const uint8_t *hwc, uint8_t *chw, int c, int h, int w);
void ds_chw_to_hwc(const uint8_t *chw, uint8_t *hwc, int c, int h, int w);

/* Decoders/encoders of one format. The decoders return interleaved pixels (h, w, c)
 * with c the image's own channel count after normalisation (1 or 3 for PNG after
 * stripping alpha; 1 or 3 for JPEG), or the requested count when the codec converts
 * for free. *pixels is malloc'ed. */
int ds_png_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                  int *w, char *err, size_t errlen);
int ds_jpeg_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                   int *w, char *err, size_t errlen);
/* BMP (stb_image) and PGM/PPM (P2, P3, P5, P6): the image's own channel count. */
int ds_bmp_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                  int *w, char *err, size_t errlen);
int ds_pnm_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                  int *w, char *err, size_t errlen);
/* A label PNG's samples as they are stored, one byte per pixel, (h, w): the palette
 * indices of a paletted PNG (its PLTE colours into palette[0..*npalette)) or the gray
 * levels of a grayscale one (*npalette 0; 1, 2 and 4-bit levels unscaled, alpha
 * dropped). Colour and 16-bit PNGs are refused. *index is malloc'ed. */
int ds_png_decode_indexed(const uint8_t *buf, size_t len, uint8_t **index, int *h, int *w,
                          uint8_t (*palette)[3], int *npalette, char *err, size_t errlen);
/* Any image this project reads, through the decoder its first bytes name: interleaved
 * (h, w, c) as the decoders above return them (want_c 0: the image's own channels,
 * except JPEG, which gives 3). */
int ds_image_decode_hwc(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c,
                        int *h, int *w, char *err, size_t errlen);
/* An image file's bytes decoded planar with channel_conversion's channel count (cfg's:
 * 1 or 3), or its own count when none is asked (the generic datasets' features). */
int ds_load_converted(const struct cd_dataset_config *cfg, const uint8_t *buf, size_t len, cd_image_t *img,
                      char *err, size_t errlen);
int ds_png_encode(const uint8_t *hwc, int c, int h, int w, int level, uint8_t **buf, size_t *len,
                  char *err, size_t errlen);
int ds_jpeg_encode(const uint8_t *hwc, int c, int h, int w, int quality, uint8_t **buf,
                   size_t *len, char *err, size_t errlen);

/* JSON lines on a stream (docs/worker-protocol.md); out may be NULL (silent). Each
 * line is written whole under a lock and flushed. */
void ds_emit_log(FILE *out, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ds_emit_progress(FILE *out, const char *stage, const char *split, size_t done, size_t total);
/* Replace bytes that are not valid UTF-8 with '?', in place (JSON needs UTF-8). */
void ds_utf8_sanitize(char *s);
/* Emit a JSON object and release it (takes the reference). */
struct json_t;
void ds_emit_json(FILE *out, struct json_t *obj);

/* Record the reason of a failed cd_labels_load / cd_mean_load for cd_dataset_strerror
 * (thread-local); returns CD_ERR. */
int ds_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cd_write_file_atomic, with "cannot write PATH: why; what to do" in err when it fails. */
int ds_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* "No space left on device; free disk space and run again" style advice for errno. */
const char *ds_errno_advice(int e);
/* text past a UTF-8 byte order mark (what Windows editors put first), or text itself */
char *ds_skip_bom(char *text);
/* fsync the directory holding path, so a rename in it is durable. */
int ds_fsync_dir(const char *path);
struct cd_dataset_config;
/* The threads of the create stage: cfg->threads, else one per CPU (at most 64). */
int ds_thread_count(const struct cd_dataset_config *cfg);
/* The image settings every task needs (channels 1 or 3, sides, resize mode, an image
 * encoding); CD_ERR names the values. */
int ds_check_image_cfg(const struct cd_dataset_config *cfg, char *err, size_t errlen);
/* path when it is absolute or root is "", else root/path; malloc'ed. */
char *ds_resolve_path(const char *root, const char *path);

/* ---- the files of every dataset job (job_files.c) ------------------------------ */

/* Remove these files of a previous run from dir (a missing one is fine); put
 * JOBDIR_STATS_JSON first, so the folder turns incomplete before anything else changes. */
int ds_remove_outputs(const char *dir, const jobdir_file *files, size_t n, char *err, size_t errlen);
/* mean.bin, mean.png and mean.jpg from per-value sums (c, h, w) of count images. */
int ds_write_mean(const char *outdir, int c, int h, int w, const uint64_t *sum, size_t count,
                  char *err, size_t errlen);
/* Make the job folder and remove every output a dataset job of any task leaves there
 * (ds_generic_outputs), so a folder that held another task's dataset keeps none of it. */
int ds_prepare_outdir(const char *outdir, char *err, size_t errlen);
/* outdir/NAME of f into path[size]; CD_ERR says the job folder's path is too long. */
int ds_job_file_path(const char *outdir, jobdir_file f, char *path, size_t size, char *err, size_t errlen);
/* labels.txt: names[0..n), one a line. */
int ds_write_labels(const char *outdir, char *const *names, int n, char *err, size_t errlen);
/* The `dataset` line (docs/worker-protocol.md): splits (the records of every split res
 * counts), classes (taken), skipped, mean_file and, when labels_file, labels_file. */
struct json_t *ds_dataset_line(const cd_dataset_result_t *res, struct json_t *classes, int labels_file);
struct ds_db_shape;
/* stats.json's fields of a task: with labels (a generic task) task, label_shape [c, h, w],
 * label_encoding and label_db_files (the label db of every split res counts); then the
 * images' channels, width, height, resize_mode (resize_mode < 0: none, they are kept as
 * they are), encoding, num_classes (images->num_classes) and seed. New reference. */
struct json_t *ds_stats_fields(const struct ds_db_shape *images, int resize_mode, uint64_t seed, int task,
                               const struct ds_db_shape *labels, const cd_dataset_result_t *res);
/* The run's end: stats.json, the `dataset` line (copied, less its type) with
 * format_version, db_files, mean_png and mean_jpg, then the task's fields, then seconds
 * and created; once it is written, line and a `done` line on progress. Takes line and
 * fields (NULL: none). */
int ds_finish_job(const char *outdir, FILE *progress, struct json_t *line, struct json_t *fields, double seconds,
                  char *err, size_t errlen);

/* The creators of the generic tasks (create.c's g_creators), one file each. */
int ds_create_segmentation(const struct cd_dataset_config *cfg, const char *outdir, FILE *progress,
                           cd_dataset_result_t *result, char *err, size_t errlen);
int ds_create_regression(const struct cd_dataset_config *cfg, const char *outdir, FILE *progress,
                         cd_dataset_result_t *result, char *err, size_t errlen);
int ds_create_pairs(const struct cd_dataset_config *cfg, const char *outdir, FILE *progress,
                    cd_dataset_result_t *result, char *err, size_t errlen);
int ds_create_detection(const struct cd_dataset_config *cfg, const char *outdir, FILE *progress,
                        cd_dataset_result_t *result, char *err, size_t errlen);

/* ---- object detection (detection.c) -------------------------------------------------- */

/* A KITTI label line's values: 16 floats in DIGITS's gt_to_lmdb_format order (x, y, w, h,
 * alpha, class, 0, rotation_y, truncated, occlusion, length, width, height, loc_x, loc_y,
 * loc_z), in the source image's pixels. */
#define DS_DET_ROW 16
#define DS_DET_MAX_CLASSES 256
/* The class names of custom_classes ("" : KITTI's default mapping); CD_ERR names what is
 * wrong (dontcare not first, an empty or repeated name, too many). */
int ds_detection_check_classes(const char *custom_classes, char *err, size_t errlen);

/* How label lines go wrong; each is counted, and the first few named in the log. */
enum ds_det_bad {
    DS_DET_BAD_COLUMNS = 0, /* not 15 values (16 with a score) */
    DS_DET_BAD_NUMBER,      /* a value that is not a finite number */
    DS_DET_BAD_EMPTY,       /* right <= left or bottom <= top */
    DS_DET_BAD_OUTSIDE,     /* no part of the box in the image */
    DS_DET_BAD_CLASS,       /* a name of no class: kept as dontcare (class 0), as DIGITS does */
    DS_DET_BAD_COUNT
};
const char *ds_det_bad_name(int bad); /* "columns", "number", "empty", "outside", "unknown_class" */

/* The class mapping: names[0..n) (names[0] "dontcare"), each label name's class. */
typedef struct ds_det_classes {
    char **names;
    int n;
    int custom; /* from custom_classes, else KITTI's */
} ds_det_classes;
int ds_det_classes_init(ds_det_classes *c, const char *custom_classes, char *err, size_t errlen);
void ds_det_classes_free(ds_det_classes *c);
/* The class of a label's type (any case); -1 for a name of no class. */
int ds_det_class_of(const ds_det_classes *c, const char *type);

/* One label line into row (DS_DET_ROW floats): CD_OK, or CD_ERR with *bad (enum
 * ds_det_bad) and why. An unknown type gives class 0 and *bad DS_DET_BAD_CLASS with
 * CD_OK. line is changed (split into words). */
int ds_det_parse_line(const ds_det_classes *c, char *line, float *row, int *bad, char *why, size_t whylen);
/* A box of row (x, y, w, h in the source image of src_w x src_h) into the stored image:
 * clipped to the source image (*clipped 1 when it was), then scaled by sx, sy (stored
 * size / padded size). CD_ERR when no part of it is in the image. */
int ds_det_place_box(float *row, int src_w, int src_h, double sx, double sy, int *clipped);

/* ---- the two .db files of a split of a generic dataset (split_dbs.c) ------------ */

/* A .db's record shape, encoding and header class count. */
typedef struct ds_db_shape {
    int c, h, w, encoding, num_classes;
    int mixed; /* records of varying height and width (cd_db_writer_set_mixed) */
} ds_db_shape;

/* The `progress` lines of a split's create stage: one when the percentage moved or 2 s
 * passed, and always the last. */
typedef struct ds_progress {
    FILE *out;
    int split;
    int last_pct;
    double last_emit;
} ds_progress;

void ds_progress_init(ds_progress *p, FILE *out, int split);
void ds_progress_step(ds_progress *p, size_t done, size_t total);

/* train.db + train_labels.db (val, test: JOBDIR_TRAIN_DB + split), record i of one
 * for record i of the other; int labels are 0. */
typedef struct ds_split_dbs {
    cd_db_writer_t *features, *labels;
    int split;
    int sized_labels; /* the labels are records of their feature's size (a mixed label db) */
    int h, w;         /* the features' shape (mixed: the first bounds) */
    size_t written;
    FILE *out; /* log lines */
    ds_progress progress;
    double t0;
} ds_split_dbs;

int ds_split_dbs_open(ds_split_dbs *d, const char *outdir, int split, const ds_db_shape *features,
                      const ds_db_shape *labels, FILE *out, char *err, size_t errlen);
/* Append one feature record and its label record (each in its db's encoding). */
int ds_split_dbs_add(ds_split_dbs *d, const void *feature, size_t feature_len, const void *label,
                     size_t label_len, char *err, size_t errlen);
/* The same for a feature record of height x width in mixed dbs (ds_db_shape.mixed), its
 * label record (of a mixed label db) of that size too. */
int ds_split_dbs_add_sized(ds_split_dbs *d, const void *feature, size_t feature_len, const void *label,
                           size_t label_len, int height, int width, char *err, size_t errlen);
/* A `progress` line of the create stage when the percentage moved or 2 s passed. */
void ds_split_dbs_progress(ds_split_dbs *d, size_t done, size_t total);
/* Complete both files (freeing the writers whatever the result) / remove both. */
int ds_split_dbs_finish(ds_split_dbs *d, char *err, size_t errlen);
void ds_split_dbs_abort(ds_split_dbs *d); /* NULL is fine */
/* The end of a split's pipeline run that returned rc: both files completed when rc is
 * CD_OK and a record was written, else both removed (d->written 0 tells the caller that
 * nothing was made). Returns rc, or the failure of completing them. */
int ds_split_dbs_end(ds_split_dbs *d, int rc, char *err, size_t errlen);
/* Every file a dataset job of any task writes, for ds_remove_outputs (stats.json first). */
extern const jobdir_file ds_generic_outputs[];
extern const size_t ds_generic_outputs_count;
/* n floats as little-endian f32 (an f32 record). */
void ds_put_f32(uint8_t *out, const float *v, size_t n);

/* ---- planning a dataset: which file goes to which split with which label ---- */

typedef struct ds_item {
    char *path; /* owned */
    int label;
} ds_item;

typedef struct ds_items {
    ds_item *v;
    size_t n, cap;
} ds_items;

void ds_items_push(ds_items *l, char *path_owned, int label);
void ds_items_free(ds_items *l);

/* Files that are not usable images: counted, and the first few named in the log. */
typedef struct ds_skips {
    size_t count;
    FILE *out;
} ds_skips;
#define DS_SKIPS_NAMED 10
void ds_skip(ds_skips *s, const char *path, const char *why);

struct cd_dataset_config;
typedef struct ds_plan {
    char **classes; /* label -> name */
    int nclasses;
    ds_items split[3]; /* CD_SPLIT_TRAIN, VAL, TEST */
    struct cd_dataset_parse parsed[CD_SPLIT_COUNT]; /* one per folder parsed */
    int nparsed;
} ds_plan;

void ds_plan_free(ds_plan *p);
/* Plans from folders of class folders / from text lists (the parse stage). */
int ds_plan_folders(const struct cd_dataset_config *cfg, ds_plan *plan, ds_skips *skips,
                    FILE *out, char *err, size_t errlen);
int ds_plan_textfiles(const struct cd_dataset_config *cfg, ds_plan *plan, ds_skips *skips,
                      FILE *out, char *err, size_t errlen);
/* The class-size rule of every folder: a class with fewer than min images once max
 * (0: no limit) is applied is left out, with a warning naming it. 1 when it is kept. */
int ds_class_kept(const char *name, const char *root, size_t n, int min, int max, FILE *out);
/* Deal the images of one class (in a fixed order) to the splits: shuffle with a
 * generator seeded with rng_seed, keep at most max (0: all), then the first
 * round(n * pct_val / 100) go to val, the next round(n * pct_test / 100) to test and
 * the rest to train, which keeps at least one when pct_val + pct_test < 100. Takes the
 * paths from cls (left empty). */
void ds_deal_class(ds_items *cls, uint64_t rng_seed, int max, double pct_val, double pct_test,
                   ds_plan *plan);

/* Generator streams (ds_seed_mix's `stream`), one per use, so that changing one use
 * changes no other. */
enum {
    DS_STREAM_CLASS = 1,  /* dealing a class of the train folder or list, index = label */
    DS_STREAM_VAL_FOLDER, /* dealing a class of folder_val, index = label */
    DS_STREAM_TEST_FOLDER,
    DS_STREAM_ORDER,      /* the order of records in a split, index = split */
    DS_STREAM_NOISE_TRAIN, /* + split: fill noise of record i */
    DS_STREAM_SEG_SPLIT = DS_STREAM_NOISE_TRAIN + CD_SPLIT_COUNT /* segmentation pairs -> val */,
    DS_STREAM_PAIRS = DS_STREAM_SEG_SPLIT + 1 /* + split: the images of pair i, index = i */
};

/* Put a split's n records (each size bytes) in their order in its db: shuffled with the
 * generator of (seed, DS_STREAM_ORDER, split), as every task does. */
void ds_shuffle_split(uint64_t seed, int split, void *base, size_t n, size_t size);

/* Sub-folders (first level, not hidden) of dir, sorted; *names malloc'ed. Files
 * directly in dir are counted as skipped. */
int ds_scan_classes(const char *dir, char ***names, int *count, ds_skips *skips, char *err,
                    size_t errlen);
/* Image files (.png, .jpg, .jpeg in any case) under dir, recursively, in sorted order,
 * appended to out with `label`; other files are counted as skipped. */
int ds_scan_images(const char *dir, int label, ds_items *out, ds_skips *skips, char *err,
                   size_t errlen);

/* ---- the create stage: decode, resize and encode on a pool of threads ---------- */

/* One prepared record, handed to the consumer in item order. */
typedef struct ds_record {
    int ok;        /* 0: the file was skipped, msg says why */
    uint8_t *rec;  /* the stored bytes (consumer may take them and set NULL) */
    size_t len;
    char msg[384];
} ds_record;

/* Called on the calling thread for items 0, 1, 2 ... in order. CD_ERR stops the run. */
typedef int (*ds_consume_fn)(void *ctx, size_t index, ds_record *r, char *err, size_t errlen);

typedef struct ds_pipe_job {
    const struct cd_dataset_config *cfg;
    const ds_item *items;
    size_t n;
    int split;
    int threads;
    uint64_t *sum;     /* c*h*w per-pixel sums of the images that worked, or NULL */
    size_t sum_count;  /* how many images went into sum */
    size_t sum_values; /* values in sum (0: cfg's channels*height*width) */
    /* Records other than one image of items[i].path (a label image with its feature
     * image, a pair): prepare(prepare_ctx, i, sum, r) fills r on a worker thread and,
     * when sum is not NULL (job->sum is set), adds a record that worked into sum, that
     * worker's own sums (no lock). NULL: ds_prepare_record. */
    void (*prepare)(void *prepare_ctx, size_t index, uint64_t *sum, ds_record *r);
    void *prepare_ctx;
} ds_pipe_job;

/* Prepare job->n records on job->threads threads while the calling thread consumes
 * them in order. Stops early (CD_ERR) when consume fails or ds_stop_requested(). */
int ds_pipeline_run(ds_pipe_job *job, ds_consume_fn consume, void *ctx, char *err,
                    size_t errlen);
int ds_stop_requested(void);
/* Called in item order for each record of items that was made (r->rec may be taken). */
typedef int (*ds_item_write_fn)(void *ctx, const ds_item *it, ds_record *r, char *err, size_t errlen);
/* One split's planned images through the pipeline (ds_prepare_record, sums of the images
 * that worked into sum unless NULL, their count in *sum_count): write(ctx, ...) takes each
 * record made, each image that failed is a skip named by its path, and progress reports
 * the create stage. CD_ERR when write fails or a stop is requested. */
int ds_pipeline_items(const struct cd_dataset_config *cfg, const ds_items *items, int split, uint64_t *sum,
                      size_t *sum_count, ds_skips *skips, ds_progress *progress, ds_item_write_fn write,
                      void *ctx, char *err, size_t errlen);
/* Read, decode, resize and encode one image (used by the pipeline, and by tests). */
void ds_prepare_record(const struct cd_dataset_config *cfg, const char *path, int split,
                       size_t index, uint64_t *sum, ds_record *r);

/* Set the class count a writer puts in the header (known only once every split is
 * read, as for label images); before cd_db_writer_finish. */
void ds_db_writer_set_classes(cd_db_writer_t *w, int num_classes);

/* ---- the .db layout (docs/formats.md) ------------------------------------- */

#define DS_DB_MAGIC "CDDB"
#define DS_DB_VERSION 1u
#define DS_DB_HEADER_SIZE 128u
#define DS_DB_INDEX_ENTRY 16u /* u64 offset, u64 size */
#define DS_DB_INDEX_ENTRY_MIXED 24u /* the same, then u32 height, u32 width */
#define DS_DB_FLAG_MIXED 1u   /* records of varying height and width (CD_DB_MIXED) */
static inline unsigned ds_db_index_entry(uint32_t flags)
{
    return flags & DS_DB_FLAG_MIXED ? DS_DB_INDEX_ENTRY_MIXED : DS_DB_INDEX_ENTRY;
}
#define DS_DB_META_CRC_AT 124u

/* The header's fields; stored little-endian at the offsets in docs/formats.md. */
typedef struct ds_db_header {
    uint32_t version, header_size, channels, height, width, encoding, flags;
    uint64_t count, data_offset, data_size, index_offset, labels_offset, crc_offset, file_size;
    uint32_t num_classes, meta_crc;
} ds_db_header;

void ds_db_header_pack(const ds_db_header *h, uint8_t out[DS_DB_HEADER_SIZE]);
/* CD_ERR if the magic is wrong (the other fields are checked by the reader). */
int ds_db_header_unpack(const uint8_t in[DS_DB_HEADER_SIZE], ds_db_header *h);

static inline void ds_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ds_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t ds_get_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static inline uint32_t ds_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ds_get_u64(const uint8_t *p)
{
    return (uint64_t)ds_get_u32(p) | (uint64_t)ds_get_u32(p + 4) << 32;
}

#endif
