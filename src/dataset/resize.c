/*
 * Resizing with DIGITS's resize modes (digits/utils/image.py resize_image).
 *
 * Every mode is one geometry function: from the source size and the target W x H it
 * picks the size the image is scaled to (rw x rh) and where its top-left corner lands
 * in the output (ox, oy; negative means that much is cropped away, positive that the
 * gap before it is filled with noise). The common code then scales, fills the output
 * with noise if the scaled image does not cover it, and copies the overlap. The exact
 * arithmetic is in docs/formats.md.
 *
 * Scaling is separable: a horizontal pass into a float buffer (c, src_h, rw), then a
 * vertical pass rounded to uint8. Each output pixel is a normalised triangle-filter sum
 * over the source pixels near its centre; when shrinking by s > 1 the triangle is s
 * times wider, so no source pixel is skipped (Pillow's BILINEAR, which DIGITS's
 * scipy.misc.imresize calls).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

/* ---- geometry of the modes ------------------------------------------------ */

typedef struct geom {
    int rw, rh; /* scaled size */
    int ox, oy; /* position of the scaled image's origin in the output */
} geom;

/* Python's int(round(x)) as DIGITS ran it (Python 2: halves away from zero). */
static int iround(double x) { return (int)round(x); }
/* Python's a % 2 for possibly negative a: 0 or 1. */
static int odd(int a) { return ((a % 2) + 2) % 2; }
static int at_least_1(int v) { return v < 1 ? 1 : v; }

static void geom_squash(int sw, int sh, int W, int H, geom *g)
{
    (void)sw, (void)sh;
    *g = (geom){W, H, 0, 0};
}

/* The axis of source length s scaled by 1/r into a target of T pixels: its scaled
 * length and where it starts. crop_axis centres it, cropping what sticks out (DIGITS's
 * int(round((len - T) / 2.0))); fill_axis makes the gap to T even, then centres it
 * (the gap is filled with noise). */
static void crop_axis(int s, double r, int T, int *len, int *off)
{
    *len = at_least_1(iround(s / r));
    *off = -iround((*len - T) / 2.0);
}

static void fill_axis(int s, double r, int T, int *len, int *off)
{
    *len = at_least_1(iround(s / r));
    if (odd(T - *len))
        (*len)++;
    *off = (T - *len) / 2;
}

typedef void (*axis_fn)(int s, double r, int T, int *len, int *off);

/* Scaled to fit one axis exactly (the width when by_width), the other axis through
 * other (cropped or filled). */
static void geom_fit(int sw, int sh, int W, int H, int by_width, axis_fn other, geom *g)
{
    if (by_width) {
        g->rw = W;
        g->ox = 0;
        other(sh, (double)sw / W, H, &g->rh, &g->oy);
    } else {
        g->rh = H;
        g->oy = 0;
        other(sw, (double)sh / H, W, &g->rw, &g->ox);
    }
}

/* crop: the image covers the output, the longer side cropped */
static void geom_crop(int sw, int sh, int W, int H, geom *g)
{
    geom_fit(sw, sh, W, H, (double)sw / W <= (double)sh / H, crop_axis, g);
}

/* fill: the whole image in the output, the gap along the shorter side filled */
static void geom_fill(int sw, int sh, int W, int H, geom *g)
{
    geom_fit(sw, sh, W, H, (double)sw / W > (double)sh / H, fill_axis, g);
}

/* Both axes scaled by the mean of the two ratios: the longer one cropped, the shorter
 * one filled. With equal ratios both come out at W x H exactly. */
static void geom_half_crop(int sw, int sh, int W, int H, geom *g)
{
    double wr = (double)sw / W, hr = (double)sh / H;
    double nr = (wr + hr) / 2.0;
    if (wr > hr) {
        crop_axis(sw, nr, W, &g->rw, &g->ox);
        fill_axis(sh, nr, H, &g->rh, &g->oy);
    } else {
        fill_axis(sw, nr, W, &g->rw, &g->ox);
        crop_axis(sh, nr, H, &g->rh, &g->oy);
    }
}

typedef struct resize_mode_def {
    const char *name;
    void (*geometry)(int sw, int sh, int W, int H, geom *g);
} resize_mode_def;

static const resize_mode_def g_modes[CD_RESIZE_COUNT] = {
    [CD_RESIZE_SQUASH] = {"squash", geom_squash},
    [CD_RESIZE_CROP] = {"crop", geom_crop},
    [CD_RESIZE_FILL] = {"fill", geom_fill},
    [CD_RESIZE_HALF_CROP] = {"half_crop", geom_half_crop},
};

int cd_resize_mode_parse(const char *name)
{
    for (int i = 0; i < CD_RESIZE_COUNT; i++)
        if (name && strcmp(name, g_modes[i].name) == 0)
            return i;
    return -1;
}

const char *cd_resize_mode_name(int mode)
{
    return mode >= 0 && mode < CD_RESIZE_COUNT ? g_modes[mode].name : "?";
}

const char *cd_resize_mode_list(void) { return "squash, crop, fill, half_crop"; }

/* ---- separable triangle-filter scaling -------------------------------------- */

/* The taps of one axis: output i reads n[i] source pixels from lo[i] with weights
 * k[i * ksize ...], normalised to sum 1. */
typedef struct taps {
    int *lo, *n;
    float *k;
    int ksize;
} taps;

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static int taps_make(int in, int out, taps *t)
{
    double scale = (double)in / out;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = fscale; /* the triangle's radius is 1 source pixel, widened */
    t->ksize = (int)ceil(support) * 2 + 1;
    t->lo = malloc(sizeof(int) * out);
    t->n = malloc(sizeof(int) * out);
    t->k = calloc((size_t)out * t->ksize, sizeof(float));
    double *w = malloc(sizeof(double) * t->ksize);
    if (!t->lo || !t->n || !t->k || !w) {
        free(w);
        return CD_ERR;
    }
    for (int i = 0; i < out; i++) {
        double center = (i + 0.5) * scale;
        int lo = (int)(center - support + 0.5);
        int hi = (int)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > in)
            hi = in;
        if (hi - lo > t->ksize)
            hi = lo + t->ksize;
        double sum = 0;
        for (int j = 0; j < hi - lo; j++) {
            w[j] = triangle((j + lo - center + 0.5) / fscale);
            sum += w[j];
        }
        for (int j = 0; j < hi - lo; j++)
            t->k[(size_t)i * t->ksize + j] = (float)(sum > 0 ? w[j] / sum : 0);
        t->lo[i] = lo;
        t->n[i] = hi - lo;
    }
    free(w);
    return CD_OK;
}

static void taps_free(taps *t)
{
    free(t->lo);
    free(t->n);
    free(t->k);
}

static uint8_t to_u8(float v)
{
    v = floorf(v + 0.5f);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int cd_image_scale(const cd_image_t *src, int width, int height, cd_image_t *out, char *err,
                   size_t errlen)
{
    if (cd_image_alloc(out, src->c, height, width, err, errlen) != CD_OK)
        return CD_ERR;
    if (width == src->w && height == src->h) {
        memcpy(out->data, src->data, (size_t)src->c * height * width);
        return CD_OK;
    }
    int c = src->c, sh = src->h, sw = src->w;
    taps tx = {0}, ty = {0};
    /* tmp is (sh, width): the horizontal pass; row is one source row as floats; acc
     * one output row of the vertical pass */
    int ok = taps_make(sw, width, &tx) == CD_OK && taps_make(sh, height, &ty) == CD_OK;
    float *tmp = malloc(sizeof(float) * (size_t)sh * width);
    float *row = ok ? calloc((size_t)sw + (size_t)tx.ksize, sizeof(float)) : NULL;
    float *acc = malloc(sizeof(float) * (size_t)width);
    if (!ok || !tmp || !row || !acc) {
        free(tmp);
        free(row);
        free(acc);
        taps_free(&tx);
        taps_free(&ty);
        cd_image_free(out);
        return ds_err(err, errlen, "out of memory resizing %dx%d to %dx%d", sw, sh, width,
                      height);
    }
    for (int ch = 0; ch < c; ch++) {
        const uint8_t *plane = src->data + (size_t)ch * sh * sw;
        for (int y = 0; y < sh; y++) {
            const uint8_t *in = plane + (size_t)y * sw;
#pragma omp simd
            for (int x = 0; x < sw; x++)
                row[x] = in[x];
            /* every output reads ksize taps: the weights past n[x] are zero and row
             * has ksize zeros past its end, so the loop has a fixed length */
            float *t = tmp + (size_t)y * width;
            const int ks = tx.ksize;
            for (int x = 0; x < width; x++) {
                const float *k = tx.k + (size_t)x * ks, *p = row + tx.lo[x];
                float sum = 0;
                for (int j = 0; j < ks; j++)
                    sum += k[j] * p[j];
                t[x] = sum;
            }
        }
        /* vertical: rows of tmp weighted and summed, contiguous in x so it vectorises */
        uint8_t *dst = out->data + (size_t)ch * height * width;
        for (int y = 0; y < height; y++) {
            const float *k = ty.k + (size_t)y * ty.ksize;
            memset(acc, 0, sizeof(float) * (size_t)width);
            for (int j = 0; j < ty.n[y]; j++) {
                const float *t = tmp + (size_t)(ty.lo[y] + j) * width;
                float kj = k[j];
#pragma omp simd
                for (int x = 0; x < width; x++)
                    acc[x] += kj * t[x];
            }
            for (int x = 0; x < width; x++)
                dst[(size_t)y * width + x] = to_u8(acc[x]);
        }
    }
    free(row);
    free(acc);
    free(tmp);
    taps_free(&tx);
    taps_free(&ty);
    return CD_OK;
}

/* ---- resize with a mode ------------------------------------------------------ */

int cd_image_resize(const cd_image_t *src, int width, int height, int mode, uint64_t noise_seed,
                    cd_image_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (mode < 0 || mode >= CD_RESIZE_COUNT)
        return ds_err(err, errlen, "resize mode %d is not one of %s", mode, cd_resize_mode_list());
    if (!src || !src->data || src->h <= 0 || src->w <= 0)
        return ds_err(err, errlen, "cannot resize an empty image");
    if (src->w == width && src->h == height)
        return cd_image_convert(src, src->c, out, err, errlen);
    geom g;
    if ((double)src->w / width == (double)src->h / height)
        geom_squash(src->w, src->h, width, height, &g);
    else
        g_modes[mode].geometry(src->w, src->h, width, height, &g);

    /* crop scales the whole image before cutting: an extreme aspect ratio makes that
     * intermediate image too large */
    if (g.rw > CD_IMAGE_MAX_SIDE || g.rh > CD_IMAGE_MAX_SIDE || (uint64_t)g.rw * (uint64_t)g.rh > CD_IMAGE_MAX_PIXELS)
        return ds_err(err, errlen, "a %dx%d image is too elongated to %s to %dx%d (it would first be scaled to "
                      "%dx%d); use resize mode fill or squash, or trim the image", src->w, src->h,
                      cd_resize_mode_name(mode), width, height, g.rw, g.rh);
    cd_image_t scaled;
    if (cd_image_scale(src, g.rw, g.rh, &scaled, err, errlen) != CD_OK)
        return CD_ERR;
    if (g.rw == width && g.rh == height && g.ox == 0 && g.oy == 0) {
        *out = scaled;
        return CD_OK;
    }
    if (cd_image_alloc(out, src->c, height, width, err, errlen) != CD_OK) {
        cd_image_free(&scaled);
        return CD_ERR;
    }
    /* the part of the output covered by the scaled image: [x0, x1) x [y0, y1) */
    int x0 = g.ox > 0 ? g.ox : 0, y0 = g.oy > 0 ? g.oy : 0;
    int x1 = g.ox + g.rw < width ? g.ox + g.rw : width;
    int y1 = g.oy + g.rh < height ? g.oy + g.rh : height;
    size_t n = (size_t)out->c * height * width;
    if (x0 > 0 || y0 > 0 || x1 < width || y1 < height) {
        uint64_t rng = noise_seed;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t r = ds_rand_next(&rng);
            for (size_t j = i; j < i + 8 && j < n; j++, r >>= 8)
                out->data[j] = (uint8_t)r;
        }
    }
    for (int ch = 0; ch < out->c; ch++)
        for (int y = y0; y < y1; y++)
            memcpy(out->data + ((size_t)ch * height + y) * width + x0,
                   scaled.data + ((size_t)ch * g.rh + (y - g.oy)) * g.rw + (x0 - g.ox),
                   (size_t)(x1 - x0));
    cd_image_free(&scaled);
    return CD_OK;
}
