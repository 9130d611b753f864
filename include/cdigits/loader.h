/*
 * The training data loader: threads that read (and decode) records of a .db split
 * into a ring of batch buffers ahead of the step that needs them. The order is a
 * pure function of (seed, position in the stream), so a resumed run reads exactly the
 * batches the uninterrupted run would have read.
 */
#ifndef CDIGITS_LOADER_H
#define CDIGITS_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/augment.h"
#include "cdigits/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_loader_opts {
    const cd_db_t *db;
    /* optional: the label db of a generic dataset, record i the label of db's record i
     * (NULL: each record's int label). A label db of the images' height and width is
     * spatial: each label is cropped and flipped with its image. */
    const cd_db_t *label_db;
    int batch;          /* images per batch */
    int crop;           /* > 0: crop size (offsets chosen here, applied by prepare_batch) */
    int random_crop;    /* 1: random crop offsets (training); 0: center */
    int flip;           /* enum cd_flip bits: each flip is drawn for half the images */
    /* optional: augmentations drawn per image (cd_aug_draw at its stream position) for
     * prepare to apply; a spatial label gets the same geometry here (NULL: none) */
    const cd_aug_config *aug;
    int shuffle;        /* 1: a new pseudo-random order on every pass */
    int wrap;           /* 1: endless stream over passes; 0: one pass, last batch partial */
    uint64_t seed;
    long start_batch;   /* first batch of the stream to deliver (resume) */
    long stride;        /* batch k starts at stream position k*stride + offset (stride 0: */
    long offset;        /* batch); replicas read interleaved slices of one stream */
    int threads;        /* loader threads (>= 1) */
    int ring;           /* batches prepared ahead (>= 2) */
    /* optional allocator for the pixel buffers (page-locked memory for fast uploads);
     * NULL: malloc */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *ptr);
    void *host_ctx;
} cd_loader_opts;

typedef struct cd_batch {
    long index;         /* batch number in the stream */
    int n;              /* images in this batch */
    int h, w;           /* their stored size: the db's, or in a db of records of varying
                         * size (cd_db_mixed, one per batch) this record's */
    uint8_t *pixels;    /* n x (c, h, w) uint8 at the stored size */
    float *labels;      /* n x label_floats */
    size_t label_floats; /* floats of one image's label: cd_label_size of the label shape, or
                         * a spatial label of a record of varying size at its delivered size
                         * (crop, or h x w) */
    int *oy, *ox;       /* crop offsets */
    uint8_t *mirror;    /* n: the enum cd_flip bits drawn for each image */
    cd_aug_params *aug; /* n: each image's augmentation, or NULL when opts.aug changes no
                         * pixels (cd_aug_changes_pixels) */
} cd_batch;

typedef struct cd_loader cd_loader_t;

cd_loader_t *cd_loader_start(const cd_loader_opts *o, char *err, size_t errlen);

/* The shape of one image's label as a batch delivers it: (1, 1, 1) for int labels;
 * the label db's (c, h, w), at the crop size for a spatial one. */
typedef struct cd_label_shape {
    int c, h, w;
    int spatial;
} cd_label_shape;
/* The label shape for images db (cropped to crop when > 0) with label_db (NULL: int
 * labels). CD_ERR when label_db does not pair with db (record counts). */
int cd_label_shape_of(const cd_db_t *db, const cd_db_t *label_db, int crop, cd_label_shape *out,
                      char *err, size_t errlen);
/* The same rule from the shapes alone: labels of (c, h, w) for images of ih x iw. */
void cd_label_shape_for(int ih, int iw, int c, int h, int w, int crop, cd_label_shape *out);
static inline size_t cd_label_size(const cd_label_shape *s) { return (size_t)s->c * s->h * s->w; }
/* The next batch in order, waiting for it if needed (the wait is added to *waited when
 * not NULL). NULL at the end of a pass (wrap 0) or on a read error (cd_loader_error). */
const cd_batch *cd_loader_next(cd_loader_t *l, double *waited);
/* Give the batch's buffer back for refilling. */
void cd_loader_release(cd_loader_t *l, const cd_batch *b);
const char *cd_loader_error(const cd_loader_t *l);
/* Number of the batch cd_loader_next delivers next (to restart a loader there). */
long cd_loader_next_index(const cd_loader_t *l);
void cd_loader_stop(cd_loader_t *l);

/* Record of stream position k (pass k / n, with a pseudo-random order per pass when
 * shuffling); exposed for tests. */
size_t cd_loader_record(uint64_t seed, int shuffle, size_t n, uint64_t k);

#ifdef __cplusplus
}
#endif
#endif
