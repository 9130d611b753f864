/*
 * Local response normalization as Caffe defines it. With pre = (size-1)/2, the window
 * of a position starts `pre` before it and holds `size` cells, clipped to the tensor:
 *   ACROSS: channels [c-pre, c-pre+size);  scale = k + alpha/size * sum x^2
 *   WITHIN: a size x size square of the same plane; scale = 1 + alpha/size^2 * sum x^2
 *           (Caffe's AVE pooling with pad pre and stride 1: for the odd sizes Caffe
 *           accepts, the clipped window always spans size^2 padded cells)
 *   y = x * scale^-beta
 * Backward, with ratio = dy * x * scale^(-beta-1) (= dy*y/scale):
 *   dx[p] = dy[p] * scale[p]^-beta - 2*alpha*beta/N * x[p] * sum_{q: p in window(q)} ratio[q]
 * with N = size (ACROSS) or size^2 (WITHIN). The sum runs over the windows that
 * contain p, which is the window of p mirrored: [p+pre-size+1, p+pre]. This is the exact
 * gradient and equals Caffe's (which shifts its accumulation window the same way).
 */
#include <math.h>
#include <omp.h>

#include "cpu_internal.h"

/* out[p] = s[p]^-beta for p < n; AlexNet's beta = 0.75 is worth avoiding powf for, and
 * its loop (two square roots and a division) vectorizes. s and out may be the same. */
static void pow_neg_beta(const float *s, float beta, float *out, size_t n)
{
    if (beta == 0.75f) {
        for (size_t p = 0; p < n; p++)
            out[p] = 1.0f / sqrtf(s[p] * sqrtf(s[p]));
        return;
    }
    for (size_t p = 0; p < n; p++)
        out[p] = powf(s[p], -beta);
}

/* ACROSS: scale of every position of channel ch: k + alpha/size * sum over channels. */
// xi is (c,h,w) of one image; scale is (h,w)
static void across_scale(const cd_lrn_desc *d, const float *xi, int ch, float *scale)
{
    size_t hw = (size_t)d->h * d->w;
    int pre = (d->size - 1) / 2;
    int c0 = ch - pre < 0 ? 0 : ch - pre;
    int c1 = ch - pre + d->size > d->c ? d->c : ch - pre + d->size;
    for (size_t p = 0; p < hw; p++)
        scale[p] = 0.0f;
    for (int cc = c0; cc < c1; cc++) {
        const float *xc = xi + (size_t)cc * hw;
        for (size_t p = 0; p < hw; p++)
            scale[p] += xc[p] * xc[p];
    }
    float a = d->alpha / (float)d->size;
    for (size_t p = 0; p < hw; p++)
        scale[p] = d->k + a * scale[p];
}

/* ACROSS adjoint: g = sum of ratio over the channels whose window holds ch,
 * [ch+pre-size+1, ch+pre] clipped. */
// ratio is (c,h,w) of one image; g is (h,w)
static void across_window_sum(const cd_lrn_desc *d, const float *ratio, int ch, float *g)
{
    size_t hw = (size_t)d->h * d->w;
    int pre = (d->size - 1) / 2;
    int c0 = ch + pre - d->size + 1 < 0 ? 0 : ch + pre - d->size + 1;
    int c1 = ch + pre + 1 > d->c ? d->c : ch + pre + 1;
    for (size_t p = 0; p < hw; p++)
        g[p] = 0.0f;
    for (int cc = c0; cc < c1; cc++) {
        const float *r = ratio + (size_t)cc * hw;
        for (size_t p = 0; p < hw; p++)
            g[p] += r[p];
    }
}

/* Sum of a square window of one plane: rows [y0,y1) x columns [x0,x1), clipped. */
// v is (h,w)
static inline float plane_window_sum(const cd_lrn_desc *d, const float *v, int y0, int x0,
                                     int squares)
{
    int y1 = y0 + d->size > d->h ? d->h : y0 + d->size;
    int x1 = x0 + d->size > d->w ? d->w : x0 + d->size;
    y0 = y0 < 0 ? 0 : y0;
    x0 = x0 < 0 ? 0 : x0;
    float s = 0.0f;
    for (int a = y0; a < y1; a++)
        for (int b = x0; b < x1; b++)
            s += squares ? v[a * d->w + b] * v[a * d->w + b] : v[a * d->w + b];
    return s;
}

/* WITHIN: scale of every position of plane ch: 1 + alpha/size^2 * sum over the square. */
// xi is (c,h,w) of one image; scale is (h,w)
static void within_scale(const cd_lrn_desc *d, const float *xi, int ch, float *scale)
{
    const float *plane = xi + (size_t)ch * d->h * d->w;
    int pre = (d->size - 1) / 2;
    float a = d->alpha / (float)(d->size * d->size);
    for (int yy = 0; yy < d->h; yy++)
        for (int xx = 0; xx < d->w; xx++)
            scale[yy * d->w + xx] = 1.0f + a * plane_window_sum(d, plane, yy - pre, xx - pre, 1);
}

/* WITHIN adjoint: the squares holding (yy,xx) start at [yy+pre-size+1, yy+pre]. */
// ratio is (c,h,w) of one image; g is (h,w)
static void within_window_sum(const cd_lrn_desc *d, const float *ratio, int ch, float *g)
{
    const float *r = ratio + (size_t)ch * d->h * d->w;
    int back = d->size - 1 - (d->size - 1) / 2;
    for (int yy = 0; yy < d->h; yy++)
        for (int xx = 0; xx < d->w; xx++)
            g[yy * d->w + xx] = plane_window_sum(d, r, yy - back, xx - back, 0);
}

static const struct {
    void (*scale)(const cd_lrn_desc *d, const float *xi, int ch, float *scale);
    void (*window_sum)(const cd_lrn_desc *d, const float *ratio, int ch, float *g);
    int square; /* the divisor N is size^2 rather than size */
} lrn_table[] = {
    [CD_LRN_ACROSS] = {across_scale, across_window_sum, 0},
    [CD_LRN_WITHIN] = {within_scale, within_window_sum, 1},
};

#define LRN_MODES ((int)(sizeof lrn_table / sizeof lrn_table[0]))

/* y = x * scale^-beta. x and y must not overlap (the window reads other channels). */
// x, y are (n,c,h,w)
void cpu_lrn_forward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y)
{
    if (d->mode < 0 || d->mode >= LRN_MODES)
        return;
    int nt = cpu_threads(be);
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw;
    /* each plane needs hw floats for its scale: one slice of the scratch per thread */
    float *ws = cpu_scratch_acquire(be, (size_t)nt * hw);
#pragma omp parallel num_threads(nt)
    {
        float *scale = ws + (size_t)omp_get_thread_num() * hw;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < d->n; i++) {
            for (int ch = 0; ch < d->c; ch++) {
                size_t off = (size_t)i * chw + (size_t)ch * hw;
                lrn_table[d->mode].scale(d, x + (size_t)i * chw, ch, scale);
                pow_neg_beta(scale, d->beta, scale, hw);
                for (size_t p = 0; p < hw; p++)
                    y[off + p] = x[off + p] * scale[p];
            }
        }
    }
    cpu_scratch_release(be);
}

/* dx is overwritten and must not overlap x or dy. y is not read: the scale is
 * recomputed from x, so the gradient is exact for the forward computed here. Images go
 * in chunks whose scale^-beta and ratio planes fit the conv workspace bound. */
// x, y, dy, dx are (n,c,h,w)
void cpu_lrn_backward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, const float *y,
                      const float *dy, float *dx)
{
    (void)y;
    if (d->mode < 0 || d->mode >= LRN_MODES)
        return;
    int nt = cpu_threads(be);
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw;
    if (!chw || d->n <= 0)
        return;
    size_t fit = CPU_CONV_WORKSPACE_BYTES / sizeof(float) / (2 * chw);
    int nb = fit < 1 ? 1 : fit > (size_t)d->n ? d->n : (int)fit;
    float *ws = cpu_scratch_acquire(be, 2 * chw * nb);
    float *sb_all = ws, *ratio_all = ws + chw * nb;
    float coef = 2.0f * d->alpha * d->beta /
                 (float)(lrn_table[d->mode].square ? d->size * d->size : d->size);
    for (int i0 = 0; i0 < d->n; i0 += nb) {
        int cnt = d->n - i0 < nb ? d->n - i0 : nb;
        /* pass 1: sb = scale^-beta and ratio = dy * x * scale^(-beta-1) of every plane */
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
        for (int b = 0; b < cnt; b++) {
            for (int ch = 0; ch < d->c; ch++) {
                size_t off = (size_t)b * chw + (size_t)ch * hw;
                size_t goff = (size_t)i0 * chw + off;
                float *sb = sb_all + off, *ratio = ratio_all + off;
                lrn_table[d->mode].scale(d, x + (size_t)(i0 + b) * chw, ch, ratio);
                pow_neg_beta(ratio, d->beta, sb, hw);
                for (size_t p = 0; p < hw; p++)
                    ratio[p] = dy[goff + p] * x[goff + p] * sb[p] / ratio[p];
            }
        }
        /* pass 2: dx = dy * sb - coef * x * (sum of ratio over the windows holding p) */
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
        for (int b = 0; b < cnt; b++) {
            for (int ch = 0; ch < d->c; ch++) {
                size_t off = (size_t)b * chw + (size_t)ch * hw;
                size_t goff = (size_t)i0 * chw + off;
                const float *sb = sb_all + off;
                float *g = dx + goff;
                lrn_table[d->mode].window_sum(d, ratio_all + (size_t)b * chw, ch, g);
                for (size_t p = 0; p < hw; p++)
                    g[p] = dy[goff + p] * sb[p] - coef * x[goff + p] * g[p];
            }
        }
    }
    cpu_scratch_release(be);
}
