/* The model form's preview of its data augmentations (api_augment.c). */
#ifndef CDIGITS_SERVER_API_AUGMENT_H
#define CDIGITS_SERVER_API_AUGMENT_H

#include "internal.h"

/* The most images one preview shows. */
#define AUGMENT_PREVIEW_MAX 16

/* POST /models/augment-preview/json: dataset (a dataset job's id), the form's aug_*
 * fields, count (1..AUGMENT_PREVIEW_MAX, 6) and random_seed (the draw; 1). Answers
 * {dataset, seed, images: [{index, label, original, augmented, params}]}: `count`
 * training records spread over the split, each as a base64 PNG before and after the
 * worker's own augmentation (src/core/augment.c) of image k = its place in the list. */
void h_augment_preview(req_t *r);

#endif
