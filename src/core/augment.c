/* DIGITS's data augmentations (include/cdigits/augment.h): the per-image draw and the
 * reference that applies it, on the host. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cdigits/augment.h"

int cd_aug_changes_pixels(const cd_aug_config *cfg)
{
    int hsv = cfg->hsv_use && (cfg->hsv_h > 0 || cfg->hsv_s > 0 || cfg->hsv_v > 0);
    return cfg->quad_rot != CD_AUG_QUAD_NONE || cfg->rot > 0 || cfg->scale > 0 || cfg->noise > 0 ||
           cfg->contrast > 0 || hsv;
}

int cd_aug_active(const cd_aug_config *cfg) { return cd_aug_changes_pixels(cfg) || cfg->whitening; }

void cd_aug_identity(cd_aug_params *p)
{
    memset(p, 0, sizeof *p);
    p->scale = 1.0f;
    p->contrast = 1.0f;
}

/* The draws of one image: stream `k` of the seed, one index per draw, so adding a draw
 * never moves the others. */
enum { D_QUARTER, D_ANGLE, D_SCALE_A, D_SCALE_B, D_MOVE_X, D_MOVE_Y, D_CONTRAST, D_HUE_A, D_HUE_B,
       D_SAT_A, D_SAT_B, D_VAL_A, D_VAL_B, D_NOISE_SEED };
#define AUG_SALT 0xa11c0ffee5eedULL

static float uni(uint64_t seed, uint64_t k, int d) { return cd_rand_uniform(seed ^ AUG_SALT, k, (uint64_t)d); }

/* N(0, sd) from the draws a, b of image k (Box-Muller), cut at 3 sd so that one rare
 * draw cannot turn an image inside out. */
static float normal(uint64_t seed, uint64_t k, int a, int b, double sd)
{
    float u1 = 1.0f - uni(seed, k, a), u2 = uni(seed, k, b);
    float z = sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
    z = fminf(fmaxf(z, -3.0f), 3.0f);
    return (float)(z * sd);
}

void cd_aug_draw(const cd_aug_config *cfg, uint64_t seed, uint64_t k, cd_aug_params *p)
{
    /* the quarter turns each choice of aug_quad_rot draws from (DIGITS's rot90 helper) */
    static const struct {
        int n;
        int32_t turns[4];
    } quads[CD_AUG_QUAD_COUNT] = {
        [CD_AUG_QUAD_NONE] = {1, {0}},
        [CD_AUG_QUAD_ROT90] = {3, {0, 1, 3}},
        [CD_AUG_QUAD_ROT180] = {2, {0, 2}},
        [CD_AUG_QUAD_ROTALL] = {4, {0, 1, 2, 3}},
    };
    cd_aug_identity(p);
    int q = cfg->quad_rot >= 0 && cfg->quad_rot < CD_AUG_QUAD_COUNT ? cfg->quad_rot : CD_AUG_QUAD_NONE;
    if (quads[q].n > 1) {
        int i = (int)(uni(seed, k, D_QUARTER) * (float)quads[q].n);
        p->quarter = quads[q].turns[i < quads[q].n ? i : quads[q].n - 1];
    }
    if (cfg->rot > 0)
        p->angle = (float)((2.0 * uni(seed, k, D_ANGLE) - 1.0) * cfg->rot);
    if (cfg->scale > 0) {
        /* DIGITS's warp: the sampled extent grows by s ~ N(0, scale) (zoom out for s > 0)
         * and the window moves by up to |s| half-extents */
        float s = normal(seed, k, D_SCALE_A, D_SCALE_B, cfg->scale);
        p->scale = fmaxf(1.0f + s, 0.1f);
        p->move_x = (2.0f * uni(seed, k, D_MOVE_X) - 1.0f) * fabsf(s);
        p->move_y = (2.0f * uni(seed, k, D_MOVE_Y) - 1.0f) * fabsf(s);
    }
    if (cfg->contrast > 0)
        p->contrast = (float)(1.0 + (2.0 * uni(seed, k, D_CONTRAST) - 1.0) * cfg->contrast);
    if (cfg->hsv_use) {
        if (cfg->hsv_h > 0)
            p->hue = normal(seed, k, D_HUE_A, D_HUE_B, cfg->hsv_h);
        if (cfg->hsv_s > 0)
            p->sat = normal(seed, k, D_SAT_A, D_SAT_B, cfg->hsv_s);
        if (cfg->hsv_v > 0)
            p->val = normal(seed, k, D_VAL_A, D_VAL_B, cfg->hsv_v);
    }
    if (cfg->noise > 0) {
        p->noise = (float)(cfg->noise * 255.0);
        p->noise_seed = cd_mix64(seed ^ cd_mix64(k ^ AUG_SALT)) + D_NOISE_SEED;
    }
    p->whiten = cfg->whitening != 0;
}

const char *cd_aug_describe(const cd_aug_params *p, char *buf, size_t len)
{
    snprintf(buf, len, "quarter %d, angle %.2f, scale %.3f, move %.3f,%.3f, contrast %.3f, hsv %.3f,%.3f,%.3f, "
             "noise %.2f, whiten %d", p->quarter, p->angle, p->scale, p->move_x, p->move_y, p->contrast, p->hue,
             p->sat, p->val, p->noise, p->whiten);
    return buf;
}

/* The mean of each channel of the geometric image (before the photometric steps), in
 * double; contrast needs them. */
static void channel_means(const cd_aug_geom *g, int c, int h, int w, const uint8_t *src, float *mean)
{
    size_t plane = (size_t)h * w;
    for (int ch = 0; ch < c; ch++) {
        double sum = 0.0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                sum += cd_aug_sample(g, src + ch * plane, h, w, x, y);
        mean[ch] = (float)(sum / (double)plane);
    }
}

// src, dst are (c, h, w) uint8
int cd_aug_apply_u8(const cd_aug_params *p, int c, int h, int w, const uint8_t *src, uint8_t *dst)
{
    if (c < 1 || c > CD_AUG_MAX_CHANNELS || h < 1 || w < 1)
        return CD_ERR;
    cd_aug_geom g;
    cd_aug_geom_init(p, h, w, &g);
    float mean[CD_AUG_MAX_CHANNELS];
    if (p->contrast != 1.0f)
        channel_means(&g, c, h, w, src, mean);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            cd_aug_pixel(p, &g, c, h, w, src, mean, x, y, dst);
    return CD_OK;
}

void cd_aug_apply_label(const cd_aug_params *p, int c, int h, int w, const uint8_t *src, uint8_t *dst,
                        uint8_t fill)
{
    cd_aug_geom g;
    cd_aug_geom_init(p, h, w, &g);
    size_t plane = (size_t)h * w;
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                dst[ch * plane + (size_t)y * w + x] = cd_aug_nearest(&g, src + ch * plane, h, w, x, y, fill);
}

void cd_aug_whiten_f32(size_t n, float *x)
{
    if (n == 0)
        return;
    double sum = 0.0, sq = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++)
        sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    double sd = sqrt(sq / (double)n), lo = 1.0 / sqrt((double)n);
    double inv = 1.0 / (sd > lo ? sd : lo);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(((double)x[i] - mean) * inv);
}
