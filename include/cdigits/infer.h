/*
 * Inference with a trained model job: the deploy stage of its network with the
 * weights of one snapshot, the dataset's labels, mean image and resize settings, so
 * that any PNG or JPEG is prepared exactly as the training images were.
 */
#ifndef CDIGITS_INFER_H
#define CDIGITS_INFER_H

#include <stddef.h>

#include "cdigits/backend.h"
#include "cdigits/image.h"
#include "cdigits/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_classifier cd_classifier_t;

/* Open the model in job_dir at snapshot `iteration` (0: the newest). backend NULL
 * means the CPU. Messages name what is missing and what to do. */
cd_classifier_t *cd_classifier_open(const char *job_dir, long iteration, cd_backend_t *be,
                                    char *err, size_t errlen);
void cd_classifier_close(cd_classifier_t *c);

int cd_classifier_classes(const cd_classifier_t *c);
const char *cd_classifier_label(const cd_classifier_t *c, int i);
long cd_classifier_iteration(const cd_classifier_t *c);

/* Probabilities of every class for one decoded image of any size and channel count
 * (resized with the dataset's mode, converted to its channels). probs has
 * cd_classifier_classes() floats. */
int cd_classifier_run(cd_classifier_t *c, const cd_image_t *img, float *probs, char *err,
                      size_t errlen);

/* Snapshot iterations present in job_dir, ascending; returns the count (<= max). */
int cd_snapshot_list(const char *job_dir, long *iters, int max);

#ifdef __cplusplus
}
#endif
#endif
