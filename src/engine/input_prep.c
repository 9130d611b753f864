/* Input preparation for training and inference (see input_prep.h). */
#include "input_prep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

void cd_input_prep_init(cd_input_prep *p, cd_backend_t *be, int c, int h, int w, float scale)
{
    *p = (cd_input_prep){.be = be, .c = c, .h = h, .w = w, .scale = scale, .mean_h = h, .mean_w = w,
                         .on_device = cd_be_supports(be, CD_BE_PREPARE_BATCH)};
}

void cd_input_prep_augment(cd_input_prep *p, const cd_aug_config *cfg)
{
    p->augment = cfg && cd_aug_changes_pixels(cfg);
    p->whiten = cfg && cfg->whitening;
}

void cd_input_prep_free(cd_input_prep *p)
{
    if (p->be && p->mean)
        p->be->iface->free(p->be, p->mean);
    free(p->mean_host);
    free(p->host_out);
    p->mean = p->mean_host = p->host_out = NULL;
    p->host_out_floats = 0;
}

static size_t image_bytes(const cd_input_prep *p) { return (size_t)p->c * p->h * p->w; }

int cd_input_mean_load(cd_input_prep *p, const char *dataset_dir, int use_mean, char *err,
                       size_t errlen)
{
    if (use_mean == CD_MEAN_NONE)
        return CD_OK;
    char path[4200];
    int mc, mh, mw;
    float *mean = NULL;
    jobdir_path(dataset_dir, JOBDIR_MEAN_BIN, path, sizeof path);
    if (cd_mean_load(path, &mc, &mh, &mw, &mean) != CD_OK) {
        snprintf(err, errlen, "%s; recreate the dataset, or train with use_mean none", cd_dataset_strerror());
        return CD_ERR;
    }
    /* a mean pixel (a dataset of images of varying size): spread over the largest size */
    p->mean_pixel = mc == p->c && mh == 1 && mw == 1 && (p->h != 1 || p->w != 1);
    if (p->mean_pixel) {
        float *spread = cd_xmalloc(image_bytes(p) * sizeof(float));
        for (size_t i = 0; i < image_bytes(p); i++)
            spread[i] = mean[i / ((size_t)p->h * p->w)];
        free(mean);
        mean = spread;
        mh = p->h;
        mw = p->w;
    }
    p->mean_h = p->h;
    p->mean_w = p->w;
    if (mc != p->c || mh != p->h || mw != p->w) {
        snprintf(err, errlen, "%s is %dx%dx%d but the images are %dx%dx%d: the mean belongs to another "
                 "dataset; recreate the dataset, or train with use_mean none",
                 path, mc, mh, mw, p->c, p->h, p->w);
        free(mean);
        return CD_ERR;
    }
    if (use_mean == CD_MEAN_PIXEL)
        cd_mean_to_pixel(mean, mc, mh, mw);
    size_t bytes = image_bytes(p) * sizeof(float);
    p->mean = p->be->iface->alloc(p->be, bytes);
    if (!p->mean) {
        free(mean);
        snprintf(err, errlen, "out of %s memory for the mean image (%zu KiB); lower the batch size",
                 p->be->iface->name, bytes >> 10);
        return CD_ERR;
    }
    p->be->iface->upload(p->be, p->mean, mean, bytes);
    p->mean_host = mean;
    return CD_OK;
}

/* A stage's buffer in the memory the preparation reads: the backend's, or the host's. */
static void *stage_alloc(cd_input_prep *p, size_t bytes)
{
    return p->on_device ? p->be->iface->alloc(p->be, bytes) : calloc(1, bytes ? bytes : 1);
}

static void stage_release(cd_input_prep *p, void *ptr)
{
    if (p->on_device)
        p->be->iface->free(p->be, ptr);
    else
        free(ptr);
}

void cd_input_stage_free(cd_input_prep *p, cd_input_stage *s)
{
    void *bufs[] = {s->pixels, s->oy, s->ox, s->mirror, s->aug, s->augmented};
    for (size_t i = 0; i < CD_ARRAY_LEN(bufs); i++)
        if (bufs[i])
            stage_release(p, bufs[i]);
    memset(s, 0, sizeof *s);
}

int cd_input_stage_alloc(cd_input_prep *p, cd_input_stage *s, int cap, char *err, size_t errlen)
{
    cd_input_stage_free(p, s);
    size_t n = (size_t)(cap > 0 ? cap : 1);
    s->pixels = stage_alloc(p, n * image_bytes(p));
    s->oy = stage_alloc(p, n * sizeof(int));
    s->ox = stage_alloc(p, n * sizeof(int));
    s->mirror = stage_alloc(p, n);
    if (p->augment) {
        s->aug = stage_alloc(p, n * sizeof(cd_aug_params));
        s->augmented = stage_alloc(p, n * image_bytes(p));
    }
    if (!s->pixels || !s->oy || !s->ox || !s->mirror || (p->augment && (!s->aug || !s->augmented))) {
        cd_input_stage_free(p, s);
        snprintf(err, errlen, "out of %s memory for a batch of %d input images; lower the batch size",
                 p->on_device ? p->be->iface->name : "host", cap);
        return CD_ERR;
    }
    s->cap = cap;
    return CD_OK;
}

/* Copies into the stage: queued on the backend, or done at once on the host. */
static void stage_copy(cd_input_prep *p, void *dst, const void *src, size_t bytes)
{
    if (p->on_device)
        cd_be_upload_async(p->be, dst, src, bytes);
    else if (bytes)
        memcpy(dst, src, bytes);
}

void cd_input_stage_upload(cd_input_prep *p, cd_input_stage *s, const cd_input_batch *b)
{
    if (b->n < 1 || b->n > s->cap)
        cd_die("internal error: a batch of %d images staged into room for %d", b->n, s->cap);
    s->h = b->h > 0 ? b->h : p->h;
    s->w = b->w > 0 ? b->w : p->w;
    if (s->h > p->h || s->w > p->w)
        cd_die("internal error: %dx%d images staged into room for %dx%d", s->w, s->h, p->w, p->h);
    size_t image = (size_t)p->c * s->h * s->w, n = (size_t)b->n;
    if (b->pixels)
        stage_copy(p, s->pixels, b->pixels, n * image);
    else
        for (size_t i = 0; i < n; i++)
            stage_copy(p, s->pixels + i * image, b->images[i], image);
    stage_copy(p, s->oy, b->oy, n * sizeof(int));
    stage_copy(p, s->ox, b->ox, n * sizeof(int));
    if (b->mirror)
        stage_copy(p, s->mirror, b->mirror, n);
    if (b->aug && !p->augment)
        cd_die("internal error: an augmented batch staged without room for augmentations");
    if (b->aug)
        stage_copy(p, s->aug, b->aug, n * sizeof(cd_aug_params));
    s->n = b->n;
    s->flips = b->mirror != NULL;
    s->has_aug = b->aug != NULL;
}

void cd_input_stage_wait(cd_input_prep *p) { cd_be_upload_wait(p->be); }

/*
 * The host path, the arithmetic of the CPU backend's prepare_batch:
 * dst[i,ch,y,x] = (src[i,ch,sy,sx] - mean[ch,sy,sx]) * scale, with
 * sx = ox[i] + (flip & CD_FLIP_LR ? ow-1-x : x), sy = oy[i] + (flip & CD_FLIP_UD ? oh-1-y : y).
 */
// src is (n, c, h, w) uint8; oy, ox, mirror are (n); mean is (c, h, w) or NULL; dst is (n, c, oh, ow)
static void prepare_host(const cd_input_prep *p, const cd_input_stage *s, const uint8_t *pixels, int oh, int ow,
                         float *dst)
{
    int c = p->c, h = s->h, w = s->w;
    for (int i = 0; i < s->n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < oh; y++) {
                int flip = s->flips ? s->mirror[i] : 0;
                int sy = s->oy[i] + (flip & CD_FLIP_UD ? oh - 1 - y : y);
                const uint8_t *src = pixels + (((size_t)i * c + ch) * h + sy) * w + s->ox[i];
                const float *m = p->mean_host ? p->mean_host + ((size_t)ch * h + sy) * w + s->ox[i] : NULL;
                float *d = dst + (((size_t)i * c + ch) * oh + y) * ow;
                for (int x = 0; x < ow; x++) {
                    int sx = flip & CD_FLIP_LR ? ow - 1 - x : x;
                    d[x] = ((float)src[sx] - (m ? m[sx] : 0.0f)) * p->scale;
                }
            }
}

/* The mean pixel spread over h x w, when the mean image holds another size: after the
 * work queued on the old one. */
static void mean_fit(cd_input_prep *p, int h, int w)
{
    if (!p->mean || (h == p->mean_h && w == p->mean_w))
        return;
    if (!p->mean_pixel) {
        /* a mean image does not fit images of another size: its mean pixel does */
        cd_mean_to_pixel(p->mean_host, p->c, p->mean_h, p->mean_w);
        p->mean_pixel = 1;
    }
    size_t plane_old = (size_t)p->mean_h * p->mean_w, plane = (size_t)h * w;
    float *pixel = cd_xmalloc((size_t)p->c * sizeof *pixel);
    for (int c = 0; c < p->c; c++)
        pixel[c] = p->mean_host[(size_t)c * plane_old];
    for (size_t i = 0; i < (size_t)p->c * plane; i++)
        p->mean_host[i] = pixel[i / plane];
    free(pixel);
    p->be->iface->sync(p->be);
    p->be->iface->upload(p->be, p->mean, p->mean_host, (size_t)p->c * plane * sizeof(float));
    p->mean_h = h;
    p->mean_w = w;
}

int cd_input_prepare(cd_input_prep *p, const cd_input_stage *s, int oh, int ow, float *dst,
                     char *err, size_t errlen)
{
    if (oh < 1 || ow < 1 || oh > s->h || ow > s->w) {
        snprintf(err, errlen, "the input is %dx%d but the images are %dx%d; crop_size must not be larger "
                 "than the images", oh, ow, s->h, s->w);
        return CD_ERR;
    }
    cd_be_upload_wait(p->be);
    mean_fit(p, s->h, s->w);
    size_t image = (size_t)p->c * oh * ow, stored = (size_t)p->c * s->h * s->w;
    if (p->on_device) {
        const uint8_t *pixels = s->pixels;
        if (s->has_aug) {
            if (cd_be_augment_batch(p->be, s->n, p->c, s->h, s->w, s->aug, CD_AUG_IMAGE, 0, s->pixels,
                                    s->augmented) != CD_OK) {
                snprintf(err, errlen, "augmenting a batch: %s", p->be->err);
                return CD_ERR;
            }
            pixels = s->augmented;
        }
        if (cd_be_prepare_batch(p->be, s->n, p->c, s->h, s->w, oh, ow, pixels, s->oy, s->ox,
                                s->flips ? s->mirror : NULL, p->mean, p->scale, dst) != CD_OK) {
            snprintf(err, errlen, "%s", p->be->err);
            return CD_ERR;
        }
        if (p->whiten && cd_be_whiten_batch(p->be, s->n, image, dst) != CD_OK) {
            snprintf(err, errlen, "whitening a batch: %s", p->be->err);
            return CD_ERR;
        }
        return CD_OK;
    }
    size_t floats = (size_t)s->n * image;
    if (floats > p->host_out_floats) {
        free(p->host_out);
        p->host_out = cd_xmalloc(floats * sizeof(float));
        p->host_out_floats = floats;
    }
    const uint8_t *pixels = s->pixels;
    if (s->has_aug) {
        for (int i = 0; i < s->n; i++)
            if (cd_aug_apply_u8(&s->aug[i], p->c, s->h, s->w, s->pixels + (size_t)i * stored,
                                s->augmented + (size_t)i * stored) != CD_OK) {
                snprintf(err, errlen, "cannot augment images of %d channels (at most %d)", p->c, CD_AUG_MAX_CHANNELS);
                return CD_ERR;
            }
        pixels = s->augmented;
    }
    prepare_host(p, s, pixels, oh, ow, p->host_out);
    for (int i = 0; p->whiten && i < s->n; i++)
        cd_aug_whiten_f32(image, p->host_out + (size_t)i * image);
    p->be->iface->upload(p->be, dst, p->host_out, floats * sizeof(float));
    return CD_OK;
}
