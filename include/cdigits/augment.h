/*
 * DIGITS's data augmentations (the model form's "Data Augmentations": aug_quad_rot,
 * aug_rot, aug_scale, aug_noise, aug_contrast, aug_whitening, aug_hsv_*), backend-free
 * (library cd_core): the reference the CPU backend runs, the CUDA kernels
 * (kernels/augment.cu) are compared with, and the server's preview draws with.
 *
 * Per training image, in this order (DIGITS: the Torch loader's warp, TensorFlow's
 * photometric ops):
 *   1. geometry, one inverse mapping from each output pixel to the source:
 *      quarter turns (aug_quad_rot), then a rotation by `angle` and a zoom by `scale`
 *      about the center, shifted by (move_x, move_y) (aug_rot, aug_scale: DIGITS's
 *      warp). Images are sampled bilinearly with the edge pixels repeated outside
 *      (Torch's image.warp, clamp mode); labels nearest, with `fill` outside.
 *      A quarter turn keeps the frame: a turned non-square image is centered in it.
 *   2. contrast: x = (x - mean_c) * contrast + mean_c per channel c (TF's adjust_contrast)
 *   3. HSV (3 channels, RGB): hue += hue (turns, wrapping), saturation += sat and
 *      value += val (each clamped to [0, 1]); other channel counts get the value shift
 *      only, as a brightness shift
 *   4. noise: x += noise * N(0, 1), one draw per sample from noise_seed
 *   5. clamp to [0, 255] and round half up to uint8
 * Whitening (TF's per_image_standardization) works on the float image after the
 * mean subtraction and scale: cd_aug_whiten_f32.
 *
 * cd_aug_draw makes an image's parameters from the seed and the image's position k in
 * the training stream only, so the same (seed, k) gives the same augmentation on every
 * backend, in every loader thread, and after a resume.
 */
#ifndef CDIGITS_AUGMENT_H
#define CDIGITS_AUGMENT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cdigits/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* aug_quad_rot: which quarter turns are drawn (each equally likely) */
enum cd_aug_quad {
    CD_AUG_QUAD_NONE = 0, /* none */
    CD_AUG_QUAD_ROT90,    /* 0, 90 or 270 degrees */
    CD_AUG_QUAD_ROT180,   /* 0 or 180 degrees */
    CD_AUG_QUAD_ROTALL,   /* 0, 90, 180 or 270 degrees */
    CD_AUG_QUAD_COUNT
};

/* The settings (train.json's keys, train_keys.c; DIGITS's ranges). Zero: no augmentation. */
typedef struct cd_aug_config {
    int quad_rot;    /* enum cd_aug_quad */
    double rot;      /* degrees: the angle is uniform in [-rot, rot]; 0..180 */
    double scale;    /* stddev of the zoom: scale = 1 + N(0, scale), the window moved
                      * by up to as much; 0..1 */
    double noise;    /* stddev of the added noise on the [0, 1] pixel range; 0..1 */
    double contrast; /* the factor is uniform in [1 - contrast, 1 + contrast]; 0..5 */
    int whitening;   /* per-image standardization after the mean subtraction */
    int hsv_use;     /* the three HSV shifts below are drawn only with it */
    double hsv_h, hsv_s, hsv_v; /* stddevs of the shifts, [0, 1] units; 0..0.5 each */
} cd_aug_config;

/* One image's augmentation, as cd_aug_draw makes it. Plain data of a fixed layout: the
 * CUDA backend copies arrays of it to the device. cd_aug_identity is the one that
 * changes nothing. */
typedef struct cd_aug_params {
    uint64_t noise_seed; /* the noise's generator seed (cd_rand_uniform) */
    float angle;         /* degrees, counterclockwise on the screen (y down) */
    float scale;         /* source extent / output extent: > 1 zooms out; > 0 */
    float move_x, move_y;/* window shift in half-extents ((w-1)/2, (h-1)/2 pixels) */
    float contrast;      /* factor; 1: none */
    float hue;           /* hue shift in turns */
    float sat, val;      /* saturation and value shifts, [0, 1] units */
    float noise;         /* stddev in pixel units (0..255); 0: none */
    int32_t quarter;     /* counterclockwise quarter turns, 0..3 */
    int32_t whiten;      /* 1: cd_aug_whiten_f32 after the mean and scale */
} cd_aug_params;

/* 1 when cfg changes anything at all (the loader draws nothing otherwise). */
int cd_aug_active(const cd_aug_config *cfg);
/* 1 when cfg changes the uint8 pixels (anything but whitening). */
int cd_aug_changes_pixels(const cd_aug_config *cfg);
/* The parameters that change nothing. */
void cd_aug_identity(cd_aug_params *p);
/* Image k of the training stream: a pure function of (cfg, seed, k). */
void cd_aug_draw(const cd_aug_config *cfg, uint64_t seed, uint64_t k, cd_aug_params *p);
/* "rot 12.5, scale 1.03, ..." for logs and tests. Returns buf. */
const char *cd_aug_describe(const cd_aug_params *p, char *buf, size_t len);

/* The most channels an augmented uint8 image has (the datasets' are 1 or 3). */
#define CD_AUG_MAX_CHANNELS 16

/* One image (c, h, w) uint8, src -> dst (they must not overlap): the geometry bilinear
 * with the edges repeated, then the photometric steps (above). CD_OK, or CD_ERR (dst
 * untouched) when c is not 1..CD_AUG_MAX_CHANNELS or the image is empty. */
int cd_aug_apply_u8(const cd_aug_params *p, int c, int h, int w, const uint8_t *src, uint8_t *dst);
/* The same geometry on a label image (c, h, w) with nearest sampling, `fill` where the
 * source lies outside (255: Caffe's ignore label); no photometric step. */
void cd_aug_apply_label(const cd_aug_params *p, int c, int h, int w, const uint8_t *src, uint8_t *dst,
                        uint8_t fill);
/* Per-image standardization of n floats in place: x = (x - mean) / max(stddev, 1/sqrt(n))
 * (TF's per_image_standardization; statistics in double). */
void cd_aug_whiten_f32(size_t n, float *x);

/* ---- the per-pixel arithmetic, shared by cd_aug_apply_* and kernels/augment.cu ---- */

/* An image's inverse mapping: source (sx, sy) = (ax*x + bx*y + tx, ay*x + by*y + ty)
 * for output pixel (x, y). identity: the mapping is exactly (x, y). */
typedef struct cd_aug_geom {
    float ax, bx, tx, ay, by, ty;
    int identity;
} cd_aug_geom;

static inline CD_HD void cd_aug_geom_init(const cd_aug_params *p, int h, int w, cd_aug_geom *g)
{
    /* p = Q^-1(scale * R^-1(u, v) + m) around the centers, u = x - cx, v = y - cy; the
     * inverse of a counterclockwise turn by t (y down) is (u cos t - v sin t, u sin t + v cos t) */
    const float qc[4] = {1, 0, -1, 0}, qs[4] = {0, 1, 0, -1};
    int q = p->quarter & 3;
    float c = 1.0f, s = 0.0f;
    if (p->angle != 0.0f) {
        float rad = p->angle * 0.017453292519943295f;
        c = cosf(rad);
        s = sinf(rad);
    }
    float cx = 0.5f * (float)(w - 1), cy = 0.5f * (float)(h - 1);
    float mx = p->move_x * cx, my = p->move_y * cy;
    /* M = scale * R^-1 */
    float m00 = p->scale * c, m01 = -p->scale * s, m10 = p->scale * s, m11 = p->scale * c;
    /* A = Q^-1 M, t = Q^-1 m */
    float a00 = qc[q] * m00 - qs[q] * m10, a01 = qc[q] * m01 - qs[q] * m11;
    float a10 = qs[q] * m00 + qc[q] * m10, a11 = qs[q] * m01 + qc[q] * m11;
    float t0 = qc[q] * mx - qs[q] * my, t1 = qs[q] * mx + qc[q] * my;
    g->ax = a00;
    g->bx = a01;
    g->tx = cx + t0 - a00 * cx - a01 * cy;
    g->ay = a10;
    g->by = a11;
    g->ty = cy + t1 - a10 * cx - a11 * cy;
    g->identity = q == 0 && p->angle == 0.0f && p->scale == 1.0f && p->move_x == 0.0f && p->move_y == 0.0f;
}

/* Bilinear sample of plane (h, w) at (sx, sy), coordinates clamped to the image. */
static inline CD_HD float cd_aug_bilinear(const uint8_t *plane, int h, int w, float sx, float sy)
{
    sx = fminf(fmaxf(sx, 0.0f), (float)(w - 1));
    sy = fminf(fmaxf(sy, 0.0f), (float)(h - 1));
    int x0 = (int)sx, y0 = (int)sy;
    int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    float fx = sx - (float)x0, fy = sy - (float)y0;
    float top = (float)plane[y0 * w + x0] * (1.0f - fx) + (float)plane[y0 * w + x1] * fx;
    float bot = (float)plane[y1 * w + x0] * (1.0f - fx) + (float)plane[y1 * w + x1] * fx;
    return top * (1.0f - fy) + bot * fy;
}

/* The geometric value of channel plane at output (x, y). */
static inline CD_HD float cd_aug_sample(const cd_aug_geom *g, const uint8_t *plane, int h, int w, int x, int y)
{
    if (g->identity)
        return (float)plane[y * w + x];
    float fx = (float)x, fy = (float)y;
    return cd_aug_bilinear(plane, h, w, g->ax * fx + g->bx * fy + g->tx, g->ay * fx + g->by * fy + g->ty);
}

/* Nearest label at output (x, y); fill outside the source. */
static inline CD_HD uint8_t cd_aug_nearest(const cd_aug_geom *g, const uint8_t *plane, int h, int w, int x, int y,
                                           uint8_t fill)
{
    if (g->identity)
        return plane[y * w + x];
    float fx = (float)x, fy = (float)y;
    float sx = floorf(g->ax * fx + g->bx * fy + g->tx + 0.5f), sy = floorf(g->ay * fx + g->by * fy + g->ty + 0.5f);
    if (sx < 0.0f || sy < 0.0f || sx > (float)(w - 1) || sy > (float)(h - 1))
        return fill;
    return plane[(int)sy * w + (int)sx];
}

/* A standard normal draw for sample i (Box-Muller on two uniforms of counter i). */
static inline CD_HD float cd_aug_normal(uint64_t seed, uint64_t i)
{
    float u1 = 1.0f - cd_rand_uniform(seed, i, 0), u2 = cd_rand_uniform(seed, i, 1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

/* RGB in [0, 1] shifted in HSV: hue by dh turns (wrapping), saturation by ds and value
 * by dv (clamped to [0, 1]). */
static inline CD_HD void cd_aug_hsv_shift(float *r, float *g, float *b, float dh, float ds, float dv)
{
    float mx = fmaxf(*r, fmaxf(*g, *b)), mn = fminf(*r, fminf(*g, *b)), d = mx - mn;
    float hue = 0.0f;
    if (d > 0.0f) {
        if (mx == *r)
            hue = (*g - *b) / d;
        else if (mx == *g)
            hue = 2.0f + (*b - *r) / d;
        else
            hue = 4.0f + (*r - *g) / d;
        hue /= 6.0f;
    }
    float sat = mx > 0.0f ? d / mx : 0.0f, val = mx;
    hue += dh;
    hue -= floorf(hue);
    sat = fminf(fmaxf(sat + ds, 0.0f), 1.0f);
    val = fminf(fmaxf(val + dv, 0.0f), 1.0f);
    float h6 = hue * 6.0f;
    int sector = (int)h6;
    float f = h6 - (float)sector;
    float pv = val * (1.0f - sat), qv = val * (1.0f - sat * f), tv = val * (1.0f - sat * (1.0f - f));
    switch (sector % 6) {
    case 0: *r = val; *g = tv; *b = pv; break;
    case 1: *r = qv; *g = val; *b = pv; break;
    case 2: *r = pv; *g = val; *b = tv; break;
    case 3: *r = pv; *g = qv; *b = val; break;
    case 4: *r = tv; *g = pv; *b = val; break;
    default: *r = val; *g = pv; *b = qv; break;
    }
}

/* [0, 255] float to uint8, clamped and rounded half up. */
static inline CD_HD uint8_t cd_aug_to_u8(float v)
{
    v = fminf(fmaxf(v, 0.0f), 255.0f);
    return (uint8_t)floorf(v + 0.5f);
}

/* Every step of output pixel (x, y) of one image: src and dst are (c, h, w); mean[c] the
 * channel means of the geometric image (read only when p->contrast != 1). */
static inline CD_HD void cd_aug_pixel(const cd_aug_params *p, const cd_aug_geom *g, int c, int h, int w,
                                      const uint8_t *src, const float *mean, int x, int y, uint8_t *dst)
{
    size_t plane = (size_t)h * w, at = (size_t)y * w + x;
    int hsv = c == 3 && (p->hue != 0.0f || p->sat != 0.0f || p->val != 0.0f);
    float v3[3];
    for (int ch = 0; ch < c; ch++) {
        float v = cd_aug_sample(g, src + ch * plane, h, w, x, y);
        if (p->contrast != 1.0f)
            v = (v - mean[ch]) * p->contrast + mean[ch];
        if (hsv) {
            v3[ch] = v;
            continue;
        }
        if (p->val != 0.0f)
            v = fminf(fmaxf(v + p->val * 255.0f, 0.0f), 255.0f);
        if (p->noise != 0.0f)
            v += p->noise * cd_aug_normal(p->noise_seed, ch * plane + at);
        dst[ch * plane + at] = cd_aug_to_u8(v);
    }
    if (!hsv)
        return;
    const float k = 1.0f / 255.0f;
    float r = fminf(fmaxf(v3[0] * k, 0.0f), 1.0f), gg = fminf(fmaxf(v3[1] * k, 0.0f), 1.0f),
          b = fminf(fmaxf(v3[2] * k, 0.0f), 1.0f);
    cd_aug_hsv_shift(&r, &gg, &b, p->hue, p->sat, p->val);
    v3[0] = r * 255.0f;
    v3[1] = gg * 255.0f;
    v3[2] = b * 255.0f;
    for (int ch = 0; ch < 3; ch++) {
        float v = v3[ch];
        if (p->noise != 0.0f)
            v += p->noise * cd_aug_normal(p->noise_seed, ch * plane + at);
        dst[ch * plane + at] = cd_aug_to_u8(v);
    }
}

#ifdef __cplusplus
}
#endif
#endif
