/*
 * Image datasets: the .db record files (reader for the training data pipeline and
 * writer for dataset creation), labels.txt, the mean image, creating a dataset job
 * from class folders or text lists, and importing IDX (MNIST-style) files.
 *
 * File formats are described byte by byte in docs/formats.md. Functions return CD_OK
 * or CD_ERR and, where they take err/errlen, write a message that names the file and
 * says what to do (err may be NULL).
 */
#ifndef CDIGITS_DATASET_H
#define CDIGITS_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cdigits/image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- record encodings ----------------------------------------------------- */

enum cd_db_encoding {
    CD_ENC_NONE = 0, /* raw planar uint8 pixels, c*h*w bytes per record */
    CD_ENC_PNG = 1,  /* one PNG file per record */
    CD_ENC_JPG = 2,  /* one JPEG file per record (quality 90) */
    CD_ENC_IMAGE_COUNT, /* the encodings above hold uint8 images (1 or 3 channels) */
    CD_ENC_F32 = CD_ENC_IMAGE_COUNT, /* raw float32 values, c*h*w per record: the targets
                                      * of a label db (regression, pairs) */
    CD_ENC_COUNT
};

/* Image encoding by name ("none", "png", "jpg"); -1 if unknown (f32 is not an image
 * encoding a dataset can be asked for). */
int cd_encoding_parse(const char *name);
const char *cd_encoding_name(int encoding); /* every encoding, "f32" included */
const char *cd_encoding_list(void); /* "none, png, jpg" */
/* Records of the encoding have a fixed size and no index (none, f32). */
int cd_encoding_fixed(int encoding);
/* The shape rule of a db of this encoding: images (none, png, jpg) have 1 or 3
 * channels and sides up to CD_IMAGE_MAX_SIDE; f32 records up to CD_DB_MAX_VALUES
 * values. */
#define CD_DB_MAX_VALUES (1 << 24)
int cd_db_shape_ok(int encoding, int channels, int height, int width);

/* Encode a planar image (img->c, h, w must be the db's shape) as one record of the
 * encoding: *buf is malloc'ed (caller frees), *len its size. */
int cd_db_encode_record(const cd_image_t *img, int encoding, uint8_t **buf, size_t *len,
                        char *err, size_t errlen);

/* ---- reading a .db file --------------------------------------------------- */

/*
 * A .db file opened read-only through mmap. Every function below only reads, so one
 * cd_db_t can serve any number of loader threads at once. cd_db_open checks the
 * header, the table bounds and the checksum of the header and tables (fast); the
 * per-record checksums are checked by cd_db_verify (reads everything).
 */
typedef struct cd_db cd_db_t;

cd_db_t *cd_db_open(const char *path, char *err, size_t errlen);
void cd_db_close(cd_db_t *db); /* NULL is fine */

size_t cd_db_count(const cd_db_t *db);
int cd_db_channels(const cd_db_t *db);
int cd_db_height(const cd_db_t *db);
int cd_db_width(const cd_db_t *db);
int cd_db_encoding(const cd_db_t *db);
/* Number of classes the dataset was made with (labels are 0..n-1); 0 if unknown. */
int cd_db_num_classes(const cd_db_t *db);
/* Label of record i (i < count; -1 when out of range). */
int cd_db_label(const cd_db_t *db, size_t i);

/* A db of records of varying height and width (force_same_shape 0): its height and
 * width are then the largest of any record (bounds), cd_db_record_shape gives each
 * record's, and cd_db_read and cd_db_read_f32 write that many values. */
int cd_db_mixed(const cd_db_t *db);
/* The height and width of record i: the db's, or the record's own in a mixed db. */
int cd_db_record_shape(const cd_db_t *db, size_t i, int *height, int *width, char *err, size_t errlen);

/* Record i as planar (c, h, w) uint8 RGB into chw_out (c*h*w bytes; in a mixed db the
 * record's h and w, cd_db_record_shape), decoding PNG or JPEG records. CD_ERR if i is
 * out of range or the record does not decode to its shape. */
int cd_db_read(const cd_db_t *db, size_t i, uint8_t *chw_out, char *err, size_t errlen);
/* Record i as c*h*w floats, whatever the encoding (uint8 pixels become 0..255). */
int cd_db_read_f32(const cd_db_t *db, size_t i, float *out, char *err, size_t errlen);
/* Pointer to record i inside the mapping for encoding none (c*h*w bytes, valid until
 * cd_db_close); NULL for encoded records or i out of range. */
const uint8_t *cd_db_raw(const cd_db_t *db, size_t i);
/* The stored bytes of record i (encoded or not) and their size; NULL if out of range. */
const uint8_t *cd_db_record(const cd_db_t *db, size_t i, size_t *size);
/* Check the CRC-32 of every record. CD_ERR names the first damaged record. */
int cd_db_verify(const cd_db_t *db, char *err, size_t errlen);

/* ---- writing a .db file ------------------------------------------------------ */

/*
 * Records are appended in order to PATH.tmp; cd_db_writer_finish writes the tables
 * and the header, fsyncs and renames to PATH, so PATH exists only when complete.
 * Every write is checked; a full disk is reported as such. cd_db_writer_abort (also
 * after a failed add or finish) removes the temp file and frees the writer.
 */
typedef struct cd_db_writer cd_db_writer_t;

cd_db_writer_t *cd_db_writer_open(const char *path, int channels, int height, int width,
                                  int encoding, int num_classes, char *err, size_t errlen);
/* Append one record: `record` holds `size` bytes already in the db's encoding (for
 * encoding none exactly c*h*w planar bytes, for f32 c*h*w little-endian floats). */
int cd_db_writer_add(cd_db_writer_t *w, const void *record, size_t size, int label, char *err,
                     size_t errlen);
/* Records of varying height and width from now on (before the first add; png and jpg
 * only): each is added with its own size by cd_db_writer_add_sized, and the header gets
 * the largest height and width. */
int cd_db_writer_set_mixed(cd_db_writer_t *w, char *err, size_t errlen);
/* cd_db_writer_add for a record of height x width: a mixed db's record, or one of the
 * db's shape. */
int cd_db_writer_add_sized(cd_db_writer_t *w, const void *record, size_t size, int label, int height,
                           int width, char *err, size_t errlen);
size_t cd_db_writer_count(const cd_db_writer_t *w);
/* Complete the file; frees the writer whatever the result. */
int cd_db_writer_finish(cd_db_writer_t *w, char *err, size_t errlen);
void cd_db_writer_abort(cd_db_writer_t *w); /* NULL is fine */

/* ---- labels.txt and the mean image ------------------------------------------- */

/* The message of the last failed cd_labels_load or cd_mean_load on this thread. */
const char *cd_dataset_strerror(void);

/* Read labels.txt: one class name per line, line n (0-based, blank lines skipped) is
 * label n. *names is an array of *count malloc'ed strings; free with cd_labels_free. */
int cd_labels_load(const char *path, char ***names, int *count);
void cd_labels_free(char **names, int count);
/* Write names (one per line), atomically. */
int cd_labels_save(const char *path, char *const *names, int count, char *err, size_t errlen);

/* mean.bin: float32 (c, h, w) in 0..255, averaged over the train split. *data is
 * malloc'ed (caller frees). */
int cd_mean_load(const char *path, int *c, int *h, int *w, float **data);
int cd_mean_save(const char *path, int c, int h, int w, uint64_t images, const float *data,
                 char *err, size_t errlen);
/* Replace each channel of a (c, h, w) mean image by its average: DIGITS's "pixel" mean. */
void cd_mean_to_pixel(float *mean, int c, int h, int w);
/* mean.png: the mean rounded to uint8, for people to look at. */
int cd_mean_save_png(const char *path, int c, int h, int w, const float *data, char *err,
                     size_t errlen);
/* mean.jpg: the same picture as a JPEG (quality 90), DIGITS's name for it. */
int cd_mean_save_jpg(const char *path, int c, int h, int w, const float *data, char *err,
                     size_t errlen);

/* palette.txt (segmentation): class n's colour on line n as "r g b" (0..255). Reads up
 * to max colours; CD_ERR (cd_dataset_strerror) names the file and line of a bad one. */
#define CD_PALETTE_MAX 256
int cd_palette_load(const char *path, uint8_t (*rgb)[3], int max, int *count);
int cd_palette_save(const char *path, const uint8_t (*rgb)[3], int count, char *err, size_t errlen);
/* The colours of classes 0..count-1 when the labels bring none (Pascal VOC's palette:
 * 0 black, 1 dark red, 2 dark green, ...). */
void cd_palette_default(uint8_t (*rgb)[3], int count);

/* ---- creating a dataset (the `dataset` task) ---------------------------------- */

enum cd_split { CD_SPLIT_TRAIN = 0, CD_SPLIT_VAL, CD_SPLIT_TEST, CD_SPLIT_COUNT };
const char *cd_split_name(int split); /* "train", "val", "test" */

/* What a dataset holds: class folders or lists (classification), or a generic dataset
 * with a label db per split (docs/formats.md): label images (segmentation), float
 * targets (regression), image pairs with a same/different target (pairs), or the
 * boxes of KITTI labels (detection). */
enum cd_dataset_task {
    CD_TASK_CLASSIFICATION = 0,
    CD_TASK_SEGMENTATION,
    CD_TASK_REGRESSION,
    CD_TASK_PAIRS,
    CD_TASK_DETECTION,
    CD_TASK_COUNT
};
const char *cd_dataset_task_name(int task); /* "classification", "segmentation", ... */
int cd_dataset_task_parse(const char *name); /* -1 if unknown */

/* JOBDIR/dataset.json (docs/worker-protocol.md). Strings are malloc'ed ("" if unset). */
typedef struct cd_dataset_config {
    int task;                 /* enum cd_dataset_task */
    char *folder_train, *folder_val, *folder_test;
    char *textfile_train, *textfile_val, *textfile_test;
    char *textfile_labels, *textfile_root;
    char *textfile_val_root, *textfile_test_root; /* roots of the val and test lists */
    double pct_val, pct_test; /* percent of each class, used when no folder/list is given */
    int min_per_class;        /* classes with fewer images are dropped (folders) */
    int max_per_class;        /* 0: no limit */
    int val_min_per_class, val_max_per_class;   /* the same for folder_val */
    int test_min_per_class, test_max_per_class; /* and for folder_test */
    int channels;             /* 1 or 3 */
    int width, height;
    int resize_mode;          /* enum cd_resize_mode */
    int encoding;             /* enum cd_db_encoding */
    uint64_t seed;
    int threads;              /* 0: one per CPU */
    /* segmentation (DIGITS's image-segmentation extension, its field names) */
    char *feature_folder, *label_folder;                       /* same base names */
    char *validation_feature_folder, *validation_label_folder; /* "": pct_val of the train */
    int channel_conversion;   /* 3 RGB, 1 L, 0 none: as the images are */
    char *class_labels_file;  /* class names, line n is class n ("": class0, class1, ...) */
    int colormap_method;      /* enum cd_colormap */
    char *colormap_text_file; /* textfile: "r g b" per line, line n is class n */
    int force_same_shape;     /* 1: every image one shape (else refused) */
    /* regression: textfile_* lines are `path v1 ... vK`; or folder_train with */
    char *targets_csv;        /* a CSV of `file,v1,...,vK` (a header line is allowed) */
    /* pairs: made from a classification source (folder_train or textfile_train) */
    int pairs_train, pairs_val; /* pairs to make per split */
    /* detection (DIGITS's image-object-detection extension, its field names): images
     * paired with IDENTIFIER.txt KITTI labels; no val folders: no val split */
    char *train_image_folder, *train_label_folder;
    char *val_image_folder, *val_label_folder;
    int padding_image_width, padding_image_height; /* 0: not padded; else padded (top left) */
    int resize_image_width, resize_image_height;   /* 0: not resized; else resized after padding */
    int val_min_box_size;     /* val boxes narrower or lower than this become dontcare (0: none) */
    char *custom_classes;     /* "dontcare,car,...": class n is name n ("": KITTI's mapping) */
} cd_dataset_config_t;

/* How label images give classes: their palette indices (or gray levels), or RGB
 * colours looked up in colormap_text_file. */
enum cd_colormap { CD_COLORMAP_LABEL = 0, CD_COLORMAP_TEXTFILE, CD_COLORMAP_COUNT };

void cd_dataset_config_init(cd_dataset_config_t *cfg); /* the defaults */
/* Parse JSON text over the defaults; unknown keys are ignored; a bad value is an error
 * naming the key and the allowed values. */
int cd_dataset_config_parse(const char *json, cd_dataset_config_t *cfg, char *err,
                            size_t errlen);
int cd_dataset_config_load(const char *path, cd_dataset_config_t *cfg, char *err,
                           size_t errlen);
void cd_dataset_config_free(cd_dataset_config_t *cfg);

typedef struct cd_dataset_result {
    size_t count[CD_SPLIT_COUNT]; /* records written per split */
    size_t skipped;               /* files that were not usable images */
    int num_classes;
    /* One parse per folder (folders only: train, then folder_val, then folder_test):
     * the classes it kept and the images it gave each split, before decoding. */
    int nparsed;
    struct cd_dataset_parse {
        int split;  /* the folder's own split: CD_SPLIT_TRAIN for folder_train */
        int label_count;
        size_t count[CD_SPLIT_COUNT];
    } parsed[CD_SPLIT_COUNT];
} cd_dataset_result_t;

/*
 * Make the dataset described by cfg in outdir: train.db / val.db / test.db (splits
 * with images), labels.txt, mean.bin, mean.png, mean.jpg, then stats.json last. A split
 * that was given images (a folder, a list or a percentage) of which none can be read
 * fails the run, naming how many were skipped. Progress, log,
 * dataset and done lines go to `progress` (NULL: silent). On failure no stats.json
 * exists in outdir and err says why.
 */
int cd_dataset_create(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                      cd_dataset_result_t *result, char *err, size_t errlen);
/* Ask a running cd_dataset_create to stop (async-signal-safe); it then fails with
 * "stopped". */
void cd_dataset_request_stop(void);

/* ---- IDX files (MNIST, Fashion-MNIST) ------------------------------------------- */

/* An IDX file of unsigned bytes: magic 0x00000800 | ndim, big-endian dims, data.
 * Gzipped files (.gz, detected by content) are read too. */
typedef struct cd_idx {
    int ndim;
    uint32_t dims[4];
    uint8_t *data; /* dims[0] * ... * dims[ndim-1] bytes; malloc'ed */
    size_t size;
} cd_idx_t;

int cd_idx_load(const char *path, cd_idx_t *idx, char *err, size_t errlen);
void cd_idx_free(cd_idx_t *idx);

typedef struct cd_idx_import_opts {
    const char *images, *labels; /* IDX files (images: 3 dims, labels: 1 dim) */
    const char *out_dir;         /* gets out_dir/<class name>/<index>.png */
    const char *label_names;     /* "a,b,c" or NULL: names "0", "1", ... */
    size_t limit;                /* first N images only; 0: all */
    int threads;                 /* 0: one per CPU */
    FILE *progress;              /* JSON lines, or NULL */
} cd_idx_import_opts;

/* Write every image as out_dir/<class name>/<index zero-padded>.png; *written gets
 * the count. */
int cd_idx_import(const cd_idx_import_opts *opts, size_t *written, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
