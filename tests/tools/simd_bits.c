/*
 * Prints a hash of the outputs of the CPU backend's ops, one line per op, on fixed
 * inputs. tests/CMakeLists.txt builds it twice: against the backend as shipped, whose
 * memory-bound loops have AVX2 versions the loader picks on a processor with AVX2
 * (CD_CLONES, cdigits/util.h), and against the same sources built without them
 * (CD_NO_CLONES: baseline x86-64 only). test_simd_bits runs both and compares the
 * lines: every op must give the same bits from both, which is what lets a model train
 * to the same weights on any x86-64 machine.
 *
 * The shapes have odd sizes (the vector loops' tails) and some exceed the backend's
 * threshold for parallel loops; ReLU, pooling and LRN see both signs and ties.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/util.h"

static cd_backend_t *be;
static const cd_backend_iface *f;

static uint64_t fnv(const void *p, size_t bytes)
{
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < bytes; i++) {
        h ^= c[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* one line: the output's name (name_part, or name where part is NULL) and its hash */
static void out(const char *name, const char *part, const float *x, size_t n)
{
    char what[64];
    snprintf(what, sizeof what, part ? "%s_%s" : "%s", name, part);
    printf("%-28s %016llx\n", what, (unsigned long long)fnv(x, n * sizeof(float)));
}

/* n floats in [lo, hi) from stream s, a few of them repeated so that ties occur */
static float *fill(size_t n, float lo, float hi, uint64_t s)
{
    float *x = cd_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * cd_rand_uniform(s, 0, i);
    for (size_t i = 7; i < n; i += 13)
        x[i] = x[i - 1];
    return x;
}

static float *zeros(size_t n) { return cd_xcalloc(n, sizeof(float)); }

static void elementwise(void)
{
    const size_t n = 70001; /* over the parallel threshold, odd */
    float *x = fill(n, -2, 2, 1), *x2 = fill(n, -2, 2, 2), *dy = fill(n, -1, 1, 3), *y = zeros(n);
    float *dx = zeros(n), *mask = zeros(n);
    f->scale(be, n, 0.37f, x, y);
    out("scale", NULL, y, n);
    memcpy(y, x2, n * sizeof(float));
    f->axpy(be, n, -0.61f, x, y);
    out("axpy", NULL, y, n);
    memcpy(y, x2, n * sizeof(float));
    f->axpby(be, n, 0.3f, x, 1.7f, y);
    out("axpby", NULL, y, n);
    f->mul(be, n, x, x2, y);
    out("mul", NULL, y, n);
    f->mul_add(be, n, x, x2, y);
    out("mul_add", NULL, y, n);
    f->power_forward(be, n, 2.0f, 0.5f, 0.1f, x, y);
    out("power_forward", NULL, y, n);
    f->power_backward(be, n, 2.0f, 0.5f, 0.1f, x, dy, dx);
    out("power_backward", NULL, dx, n);
    static const struct {
        const char *name;
        int act;
        float slope;
    } acts[] = {{"relu", CD_ACT_RELU, 0.0f}, {"leaky_relu", CD_ACT_RELU, 0.1f},
                {"sigmoid", CD_ACT_SIGMOID, 0.0f}, {"tanh", CD_ACT_TANH, 0.0f}};
    for (size_t a = 0; a < CD_ARRAY_LEN(acts); a++) {
        f->act_forward(be, acts[a].act, acts[a].slope, n, x, y);
        out(acts[a].name, "forward", y, n);
        f->act_backward(be, acts[a].act, acts[a].slope, n, x, y, dy, dx);
        out(acts[a].name, "backward", dx, n);
    }
    f->dropout_forward(be, n, 0.35f, 42, 7, x, mask, y);
    out("dropout_forward", NULL, y, n);
    out("dropout_mask", NULL, mask, n);
    free(x), free(x2), free(dy), free(y), free(dx), free(mask);
}

static void channels(void)
{
    const int outer = 5, ch = 7, inner = 1003;
    const size_t n = (size_t)outer * ch * inner;
    float *x = fill(n, -2, 2, 4), *dy = fill(n, -1, 1, 5), *y = zeros(n), *dx = zeros(n);
    float *gamma = fill(ch, 0.5f, 1.5f, 6), *beta = fill(ch, -1, 1, 7), *dg = zeros(ch), *db = zeros(ch);
    float *mean = zeros(ch), *var = zeros(ch);
    f->channel_affine(be, outer, ch, inner, x, gamma, beta, y);
    out("channel_affine", NULL, y, n);
    f->channel_affine_grad(be, outer, ch, inner, x, dy, dg, db);
    out("channel_affine_grad_gamma", NULL, dg, ch);
    out("channel_affine_grad_beta", NULL, db, ch);
    f->bn_stats(be, outer, ch, inner, x, mean, var);
    out("bn_stats_mean", NULL, mean, ch);
    out("bn_stats_var", NULL, var, ch);
    f->bn_normalize(be, outer, ch, inner, x, mean, var, 1e-5f, y);
    out("bn_normalize", NULL, y, n);
    f->bn_backward(be, outer, ch, inner, y, var, 1e-5f, 0, dy, dx);
    out("bn_backward", NULL, dx, n);
    f->copy_strided(be, outer, (size_t)inner * 3, x, (size_t)ch * inner, y, (size_t)ch * inner, 1);
    out("copy_strided_accumulate", NULL, y, n);
    free(x), free(dy), free(y), free(dx), free(gamma), free(beta), free(dg), free(db), free(mean), free(var);
}

static void pooling(void)
{
    static const struct {
        const char *name;
        cd_pool_desc d;
    } cases[] = {
        {"pool_max_2x2", {CD_POOL_MAX, 3, 5, 25, 23, 2, 2, 2, 2, 0, 0, 13, 12}},
        {"pool_max_3x3_s2", {CD_POOL_MAX, 3, 5, 27, 27, 3, 3, 2, 2, 0, 0, 13, 13}},
        {"pool_max_3x3_s2_rows_of_6", {CD_POOL_MAX, 3, 5, 13, 13, 3, 3, 2, 2, 0, 0, 6, 6}},
        {"pool_max_3x3_s2_sixteen_planes", {CD_POOL_MAX, 5, 7, 13, 13, 3, 3, 2, 2, 0, 0, 6, 6}},
        {"pool_max_3x3_s2_rows_of_16", {CD_POOL_MAX, 3, 5, 11, 33, 3, 3, 2, 2, 0, 0, 5, 16}},
        {"pool_max_2x2_small", {CD_POOL_MAX, 3, 50, 8, 8, 2, 2, 2, 2, 0, 0, 4, 4}},
        {"pool_max_2x2_rows_of_16", {CD_POOL_MAX, 3, 5, 6, 32, 2, 2, 2, 2, 0, 0, 3, 16}},
        {"pool_ave_3x3_pad", {CD_POOL_AVE, 3, 5, 17, 19, 3, 3, 1, 1, 1, 1, 17, 19}},
        {"pool_ave_2x2", {CD_POOL_AVE, 3, 5, 24, 38, 2, 2, 2, 2, 0, 0, 12, 19}},
        {"pool_ave_global", {CD_POOL_AVE, 3, 5, 13, 13, 13, 13, 1, 1, 0, 0, 1, 1}},
        {"pool_max_3x3_s1_pad", {CD_POOL_MAX, 3, 5, 17, 19, 3, 3, 1, 1, 1, 1, 17, 19}},
        {"pool_max_3x3_s1_pad_small_planes", {CD_POOL_MAX, 3, 5, 9, 9, 3, 3, 1, 1, 1, 1, 9, 9}},
    };
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        const cd_pool_desc *d = &cases[c].d;
        size_t in = (size_t)d->n * d->c * d->h * d->w, on = (size_t)d->n * d->c * d->oh * d->ow;
        float *x = fill(in, -1, 1, 8), *y = zeros(on), *dy = fill(on, -1, 1, 9), *dx = zeros(in);
        f->pool_forward(be, d, x, y, NULL);
        out(cases[c].name, "forward", y, on);
        f->pool_backward(be, d, x, y, NULL, dy, dx);
        out(cases[c].name, "backward", dx, in);
        size_t nm = f->pool_mask_size(be, d); /* the CPU backend has the slot */
        if (nm) { /* the backward from the forward's record */
            float *mask = zeros(nm);
            f->pool_forward(be, d, x, y, mask);
            f->pool_backward(be, d, x, y, mask, dy, dx);
            out(cases[c].name, "backward_mask", dx, in);
            free(mask);
        }
        free(x), free(y), free(dy), free(dx);
    }
}

static void lrn(void)
{
    static const struct {
        const char *name;
        cd_lrn_desc d;
    } cases[] = {
        {"lrn_across", {CD_LRN_ACROSS, 2, 13, 31, 37, 5, 1e-2f, 0.75f, 1.0f}},
        {"lrn_across_beta", {CD_LRN_ACROSS, 2, 6, 9, 11, 3, 1e-1f, 0.6f, 2.0f}},
        {"lrn_within", {CD_LRN_WITHIN, 2, 4, 15, 17, 3, 1e-1f, 0.75f, 1.0f}},
    };
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        const cd_lrn_desc *d = &cases[c].d;
        size_t n = (size_t)d->n * d->c * d->h * d->w;
        float *x = fill(n, -3, 3, 10), *y = zeros(n), *dy = fill(n, -1, 1, 11), *dx = zeros(n);
        f->lrn_forward(be, d, x, y);
        out(cases[c].name, "forward", y, n);
        f->lrn_backward(be, d, x, y, dy, dx);
        out(cases[c].name, "backward", dx, n);
        free(x), free(y), free(dy), free(dx);
    }
}

static void conv(void)
{
    static const struct {
        const char *name;
        cd_conv_desc d;
    } cases[] = {
        {"conv_lenet2", {9, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1, 8, 8}},
        {"conv_3x3_pad_groups", {4, 6, 13, 15, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, 13, 15}},
        {"conv_stride4", {3, 3, 37, 35, 5, 11, 11, 4, 4, 0, 0, 1, 1, 1, 7, 7}},
    };
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        const cd_conv_desc *d = &cases[c].d;
        size_t xn = (size_t)d->n * d->c * d->h * d->w, yn = (size_t)d->n * d->k * d->oh * d->ow;
        size_t wn = (size_t)d->k * (d->c / d->group) * d->kh * d->kw;
        float *x = fill(xn, -1, 1, 12), *w = fill(wn, -0.2f, 0.2f, 13), *b = fill((size_t)d->k, -1, 1, 14);
        float *y = zeros(yn), *dy = fill(yn, -1, 1, 15), *dx = zeros(xn), *dw = zeros(wn), *db = zeros((size_t)d->k);
        f->conv_forward(be, d, x, w, b, y);
        out(cases[c].name, "forward", y, yn);
        f->conv_backward_data(be, d, w, dy, dx);
        out(cases[c].name, "backward_data", dx, xn);
        f->conv_backward_filter(be, d, x, dy, dw, db);
        out(cases[c].name, "backward_filter", dw, wn);
        out(cases[c].name, "backward_bias", db, (size_t)d->k);
        free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
    }
}

static void solvers(void)
{
    const size_t n = 40009;
    for (int type = 0; type < CD_SOLVER_COUNT; type++)
        for (int reg = CD_REG_L2; reg <= CD_REG_L1; reg++) {
            float *w = fill(n, -1, 1, 16), *h1 = fill(n, 0, 0.1f, 17), *h2 = fill(n, 0, 0.1f, 18);
            cd_update_desc d = {.type = type, .reg = reg, .lr = 0.01f, .momentum = 0.9f, .momentum2 = 0.999f,
                                .rms_decay = 0.98f, .delta = 1e-8f, .decay = 5e-4f, .grad_scale = 0.5f,
                                .iteration = 3};
            for (int step = 0; step < 3; step++) {
                float *g = fill(n, -1, 1, 19 + (uint64_t)step);
                f->update(be, &d, n, w, g, h1, h2);
                free(g);
            }
            char name[32];
            snprintf(name, sizeof name, "update_%d_%s", type, reg == CD_REG_L1 ? "l1" : "l2");
            out(name, "w", w, n);
            out(name, "history", h1, n);
            free(w), free(h1), free(h2);
        }
}

static void batch(void)
{
    const int n = 3, c = 3, sh = 31, sw = 29, oh = 27, ow = 25;
    size_t src_n = (size_t)n * c * sh * sw, dn = (size_t)n * c * oh * ow;
    uint8_t *src = cd_xmalloc(src_n);
    for (size_t i = 0; i < src_n; i++)
        src[i] = (uint8_t)(cd_mix64(i) >> 56);
    const int oy[] = {0, 2, 4}, ox[] = {4, 1, 0};
    const uint8_t mirror[] = {0, 1, 3};
    float *mean = fill((size_t)c * sh * sw, 100, 150, 20), *dst = zeros(dn);
    f->prepare_batch(be, n, c, sh, sw, oh, ow, src, oy, ox, mirror, mean, 0.0125f, dst);
    out("prepare_batch", NULL, dst, dn);
    free(src), free(mean), free(dst);
}

int main(void)
{
    be = cd_backend_cpu_new(2);
    f = be->iface;
    elementwise();
    channels();
    pooling();
    lrn();
    conv();
    solvers();
    batch();
    return 0;
}
