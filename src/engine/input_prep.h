/*
 * Input preparation: how stored images become a network's input, for training and
 * inference alike. The dataset's mean image is loaded once, checked against the
 * images, made per-pixel when asked and uploaded; each batch is cropped, flipped,
 * mean-subtracted and scaled (Caffe's data transformer), on the device with the
 * backend's prepare_batch, or on the host and uploaded for a backend without it. The
 * host path computes what the CPU backend's prepare_batch does, the reference.
 *
 * A batch goes through a stage: cd_input_stage_upload queues its pixels, crops and
 * flips for the device (beside compute where the backend can), cd_input_prepare waits
 * for them and writes the input. Two stages let the next batch upload while this one
 * trains.
 */
#ifndef CDIGITS_INPUT_PREP_H
#define CDIGITS_INPUT_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/augment.h"
#include "cdigits/backend.h"

typedef struct cd_input_prep {
    cd_backend_t *be;
    int c, h, w;       /* the stored images (c, h, w) */
    float scale;       /* transform_param's scale */
    float *mean;       /* device (c, h, w), or NULL: no mean */
    float *mean_host;  /* the same on the host, or NULL */
    int mean_pixel;    /* the dataset's mean is one pixel (images of varying size): mean
                        * holds it spread over mean_h x mean_w, redone for other sizes */
    int mean_h, mean_w;
    int on_device;     /* the backend prepares batches (prepare_batch) */
    int augment;       /* stages hold augmented copies: batches may carry cd_aug_params */
    int whiten;        /* every prepared image is standardized (aug_whitening): training,
                        * validation and inference alike */
    float *host_out;   /* the host path's output, grown to the largest batch */
    size_t host_out_floats;
} cd_input_prep;

/* One batch of n stored images on the host, as the loader or the classifier holds it:
 * back to back in pixels (n, c, h, w), or one (c, h, w) image per pointer in images
 * (pixels NULL). oy, ox (n) are each image's crop, inside the image (0 <= oy <= h - oh,
 * 0 <= ox <= w - ow); mirror (n) its enum cd_flip bits, or NULL: no flips. */
typedef struct cd_input_batch {
    int n;
    int h, w;          /* the images' size, at most the preparation's (0: its own) */
    const uint8_t *pixels;
    const uint8_t *const *images;
    const int *oy, *ox;
    const uint8_t *mirror;
    const cd_aug_params *aug; /* (n) the augmentation of each image, or NULL: none */
} cd_input_batch;

/* A batch staged for preparation: copies of its pixels (n, c, h, w), crops and flips,
 * up to cap images, in the backend's memory where it prepares batches, else on the
 * host. */
typedef struct cd_input_stage {
    uint8_t *pixels;
    int *oy, *ox;
    uint8_t *mirror;
    cd_aug_params *aug;  /* (cap) with prep->augment: the images' augmentations */
    uint8_t *augmented;  /* (cap, c, h, w) with prep->augment: the augmented images */
    int cap;
    int n;
    int h, w;  /* the staged images' size */
    int flips; /* the batch had flips (else prepare reads none) */
    int has_aug; /* the batch carries augmentations (else prepare reads pixels as they are) */
} cd_input_stage;

/* Preparation of (c, h, w) images for be, multiplied by scale after the mean. */
void cd_input_prep_init(cd_input_prep *p, cd_backend_t *be, int c, int h, int w, float scale);
/* Augmentations on top (before cd_input_stage_alloc): stages get room for augmented
 * copies when cfg changes pixels (cd_aug_changes_pixels), and every image is whitened
 * after the mean and scale when cfg->whitening. cfg NULL: neither. */
void cd_input_prep_augment(cd_input_prep *p, const cd_aug_config *cfg);
/* Frees the mean and the host buffer (p may be zeroed, never initialized). */
void cd_input_prep_free(cd_input_prep *p);

/*
 * Loads dataset_dir's mean image for use_mean (enum: CD_MEAN_NONE does nothing,
 * CD_MEAN_PIXEL averages each channel, CD_MEAN_IMAGE keeps the image). CD_ERR with a
 * message naming the file and the fix when it cannot be read, is not the images' size,
 * or does not fit in the backend's memory.
 */
int cd_input_mean_load(cd_input_prep *p, const char *dataset_dir, int use_mean, char *err,
                       size_t errlen);

/* Device room in s for batches of up to cap images (nothing on the host path).
 * CD_ERR naming the memory when it does not fit; s is then freed. */
int cd_input_stage_alloc(cd_input_prep *p, cd_input_stage *s, int cap, char *err, size_t errlen);
void cd_input_stage_free(cd_input_prep *p, cd_input_stage *s); /* zeroes s */

/* Queues b's copy into s (b->n <= s->cap). b's buffers must stay as they are until
 * the copy is waited for: by cd_input_prepare, or cd_input_stage_wait. */
void cd_input_stage_upload(cd_input_prep *p, cd_input_stage *s, const cd_input_batch *b);
/* Waits for every upload queued on the backend, the stages' and any the caller queued
 * beside them (labels): their host buffers may go. */
void cd_input_stage_wait(cd_input_prep *p);

/* The staged batch into dst (n, c, oh, ow), a buffer of the backend: waits first as
 * cd_input_stage_wait does. Each image is augmented first when the batch carries
 * augmentations (augment_batch on the device, cd_aug_apply_u8 on the host), then
 * cropped, flipped, mean-subtracted and scaled, then whitened when p->whiten. CD_ERR
 * when oh x ow is larger than the images. */
int cd_input_prepare(cd_input_prep *p, const cd_input_stage *s, int oh, int ow, float *dst,
                     char *err, size_t errlen);

#endif
