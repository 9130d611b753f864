/*
 * Every op of the backend interface on the CUDA backend against the CPU backend (the
 * reference), on fresh random inputs, compared by normalized mean squared error
 *   nmse = sum (gpu - cpu)^2 / sum cpu^2
 * with a tolerance per kind of op (as ggml's test-backend-ops does). Prints one table
 * last: op | shape | nmse | tolerance | ok, then "N passed, N failed".
 *
 * Exit status: 0 when every row passes, or when there is no GPU (a SKIP line says so);
 * 1 when a row fails. A device error inside one test is recorded as a failed row naming
 * the test and the failing call, and the run goes on with the next test when a small op
 * still works on the device afterwards (a refused call, an unsupported configuration);
 * when it does not (an error that poisons the context, such as an illegal address), the
 * table so far is printed and the test aborts with the failing call named.
 *
 * Built by tests/gpu/run.sh (standalone, with the CPU backend) and included by
 * tests/unit/test_cuda_ops.c (with CD_GPU_OPS_NO_MAIN) so ctest runs it where a GPU is.
 * CD_TEST_SEED replays a run. With CD_GPU_OPS_SELF=1 the "device" is a second CPU
 * backend: the harness itself (shapes, references, tolerances) runs where no GPU is.
 * Besides the ops it checks mem_info, host_alloc, upload_async/upload_wait and a
 * captured, replayed step (graph_begin/end/replay) wherever the device backend has them,
 * and convolution and gemm in TF32, FP16 and BF16 against the fp32 reference. The
 * captured steps run last (a capture gone wrong cannot cost the other rows), ending
 * with one that breaks the capture rules and must fail cleanly, the backend working
 * eagerly after it.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/augment.h"
#include "cdigits/backend.h"
#include "cdigits/cuda_check.h"

/* Tolerances (nmse) by kind of op */
#define TOL_EXACT 1e-12 /* the same float arithmetic (FMA contraction aside) */
#define TOL_MATH 1e-10  /* powf, expf, tanhf, log: a few ulp */
#define TOL_SUM 1e-9    /* reductions in another order */
#define TOL_NORM 1e-8   /* batch norm backward, LRN: sums inside cancellations */
#define TOL_CONV 1e-7   /* FP32 convolution and gemm: other algorithms (Winograd, FFT) */
#define TOL_TF32 1e-4   /* TF32 tensor cores: 10-bit mantissa inputs */
#define TOL_FP16 1e-4   /* fp16 inputs and outputs, fp32 accumulation (about 3e-7 seen
                         * in theory: 2^-11 rounding of inputs and output) */
#define TOL_BF16 1e-3   /* bf16: 8-bit mantissa, about 2e-5 in theory */
#define TOL_COUNT 0.0   /* integer counts, and masks */

enum { REF = 0, DEV = 1 };
static cd_backend_t *go_be[2];
static cd_backend_t *go_swapped; /* the device backend a variant test put aside */

/* ---- random numbers (xorshift64*, seeded from CD_TEST_SEED or the clock) ---- */

static uint64_t go_rng = 88172645463325252ULL;

static uint64_t go_u64(void)
{
    go_rng ^= go_rng >> 12;
    go_rng ^= go_rng << 25;
    go_rng ^= go_rng >> 27;
    return go_rng * 0x2545F4914F6CDD1DULL;
}

static float go_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(go_u64() >> 11) / 9007199254740992.0);
}

static int go_int(int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(go_u64() % (uint64_t)(hi - lo + 1));
}

/* ---- the result table ---- */

typedef struct go_row {
    char op[40];
    char shape[64];
    double nmse, tol;
    int ok;
} go_row;

static go_row go_rows[1024];
static int go_nrows, go_failed;

static void go_record(const char *op, const char *shape, double nmse, double tol)
{
    int ok = !isnan(nmse) && nmse <= tol;
    if (!ok)
        go_failed++;
    if (go_nrows < (int)(sizeof go_rows / sizeof go_rows[0])) {
        go_row *r = &go_rows[go_nrows++];
        snprintf(r->op, sizeof r->op, "%s", op);
        snprintf(r->shape, sizeof r->shape, "%s", shape);
        r->nmse = nmse;
        r->tol = tol;
        r->ok = ok;
    }
    if (!ok)
        fprintf(stderr, "FAIL %s [%s]: nmse %.3g > %.3g\n", op, shape, nmse, tol);
}

static const char *go_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *go_fmt(const char *fmt, ...)
{
    static char buf[8][128];
    static int k;
    char *b = buf[k++ & 7];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, 128, fmt, ap);
    va_end(ap);
    return b;
}

static double go_nmse(const float *ref, const float *got, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    if (num == 0.0)
        return 0.0;
    return num / (den > 1e-30 ? den : 1e-30);
}

/* ---- tensors on both backends ---- */

typedef struct go_t {
    size_t n;
    float *d[2]; /* the tensor on the reference and on the device */
} go_t;

static void *go_alloc(int b, size_t bytes)
{
    void *p = go_be[b]->iface->alloc(go_be[b], bytes);
    if (!p) {
        fprintf(stderr, "FAIL: alloc of %zu bytes on %s: %s\n", bytes, go_be[b]->iface->name,
                go_be[b]->err);
        exit(1);
    }
    return p;
}

/* Every tensor go_from makes is listed here until go_free_all frees them all, at the end
 * of each test, on the backends it was made on (no test swaps a backend midway). */
#define GO_LIVE_MAX 64
static float *go_live[GO_LIVE_MAX][2];
static int go_nlive;

/* The same host data on both backends. */
static go_t go_from(const float *host, size_t n)
{
    if (go_nlive == GO_LIVE_MAX) {
        fprintf(stderr, "FAIL: more than %d tensors in one test; raise GO_LIVE_MAX\n", GO_LIVE_MAX);
        exit(1);
    }
    go_t t = {n, {NULL, NULL}};
    for (int b = 0; b < 2; b++) {
        t.d[b] = go_alloc(b, n * sizeof(float));
        go_be[b]->iface->upload(go_be[b], t.d[b], host, n * sizeof(float));
        go_live[go_nlive][b] = t.d[b];
    }
    go_nlive++;
    return t;
}

static go_t go_rand(size_t n, float lo, float hi)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = go_uniform(lo, hi);
    go_t t = go_from(h, n);
    free(h);
    return t;
}

static void *go_bytes(int b, const void *host, size_t bytes)
{
    void *p = go_alloc(b, bytes);
    go_be[b]->iface->upload(go_be[b], p, host, bytes);
    return p;
}

static void go_free_all(void)
{
    while (go_nlive > 0) {
        go_nlive--;
        for (int b = 0; b < 2; b++)
            go_be[b]->iface->free(go_be[b], go_live[go_nlive][b]);
    }
}

/* The reference's values of t on the device too, so that what follows starts from the
 * same numbers on both. */
static void go_share(const go_t *t)
{
    float *h = malloc(t->n * sizeof(float) + 1);
    go_be[REF]->iface->download(go_be[REF], h, t->d[REF], t->n * sizeof(float));
    go_be[DEV]->iface->upload(go_be[DEV], t->d[DEV], h, t->n * sizeof(float));
    free(h);
}

/* Downloads both copies of t; the caller frees *ref and *got. */
static void go_fetch(const go_t *t, float **ref, float **got)
{
    *ref = malloc(t->n * sizeof(float) + 1);
    *got = malloc(t->n * sizeof(float) + 1);
    go_be[REF]->iface->download(go_be[REF], *ref, t->d[REF], t->n * sizeof(float));
    go_be[DEV]->iface->download(go_be[DEV], *got, t->d[DEV], t->n * sizeof(float));
}

/* The nmse of t's device copy against its reference copy. */
static double go_nmse_of(const go_t *t)
{
    float *ref, *got;
    go_fetch(t, &ref, &got);
    double e = go_nmse(ref, got, t->n);
    free(ref);
    free(got);
    return e;
}

static void go_check(const char *op, const char *shape, const go_t *t, double tol)
{
    go_record(op, shape, go_nmse_of(t), tol);
}

static void go_check_scalar(const char *op, const char *shape, double ref, double got, double tol)
{
    double d = got - ref;
    double nmse = d == 0.0 ? 0.0 : d * d / (ref * ref > 1e-30 ? ref * ref : 1e-30);
    go_record(op, shape, nmse, tol);
}

/* Both values of a 2-float result t (a loss and its count, a correct count and the
 * count), each checked as a scalar: op0 within tol0, op1 within tol1. */
static void go_check_pair(const go_t *t, const char *shape, const char *op0, double tol0,
                          const char *op1, double tol1)
{
    float *ref, *got;
    go_fetch(t, &ref, &got);
    go_check_scalar(op0, shape, ref[0], got[0], tol0);
    go_check_scalar(op1, shape, ref[1], got[1], tol1);
    free(ref);
    free(got);
}

/* Runs slot on both backends; D(t) is t's pointer on the backend being called. */
#define BOTH(slot, ...)                                                                   \
    do {                                                                                  \
        for (int b_ = 0; b_ < 2; b_++) {                                                  \
            cd_backend_t *be_ = go_be[b_];                                                \
            be_->iface->slot(be_, __VA_ARGS__);                                           \
        }                                                                                 \
    } while (0)
#define D(t) ((t).d[b_])

/* ---- elementwise ---- */

static void go_test_elementwise(size_t n)
{
    const char *sh = go_fmt("n=%zu", n);
    go_t x = go_rand(n, -2, 2), y = go_rand(n, -2, 2), z = go_rand(n, -2, 2);

    BOTH(set, n, 0.37f, D(y));
    go_check("set", sh, &y, TOL_EXACT);
    BOTH(scale, n, -1.7f, D(x), D(y));
    go_check("scale", sh, &y, TOL_EXACT);
    BOTH(axpy, n, 0.3f, D(x), D(y));
    go_check("axpy", sh, &y, TOL_EXACT);
    BOTH(axpby, n, 0.6f, D(x), -1.1f, D(y));
    go_check("axpby", sh, &y, TOL_EXACT);
    BOTH(mul, n, D(x), D(z), D(y));
    go_check("mul", sh, &y, TOL_EXACT);
    BOTH(mul_add, n, D(x), D(z), D(y));
    go_check("mul_add", sh, &y, TOL_EXACT);
    BOTH(copy, D(z), D(x), n * sizeof(float));
    go_check("copy", sh, &z, TOL_EXACT);

    float dot[2], asum[2];
    for (int b = 0; b < 2; b++) {
        dot[b] = go_be[b]->iface->dot(go_be[b], n, x.d[b], y.d[b]);
        asum[b] = go_be[b]->iface->asum(go_be[b], n, y.d[b]);
    }
    go_check_scalar("dot", sh, dot[REF], dot[DEV], TOL_SUM);
    go_check_scalar("asum", sh, asum[REF], asum[DEV], TOL_SUM);
    go_free_all();
}

/* more items than the grid has threads: the grid-stride loops wrap */
static void go_test_axpy(size_t n)
{
    go_t x = go_rand(n, -1, 1), y = go_rand(n, -1, 1);
    BOTH(axpy, n, 0.5f, D(x), D(y));
    go_check("axpy", go_fmt("n=%zu", n), &y, TOL_EXACT);
    go_free_all();
}

/* Eltwise MAX over three inputs, with ties between inputs 0 and 1 (strict > keeps 0) */
static void go_test_max_index(size_t n)
{
    const char *sh = go_fmt("n=%zu k=3", n);
    float *h0 = malloc(n * sizeof(float)), *h1 = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        h0[i] = go_uniform(-1, 1);
        h1[i] = i % 5 == 0 ? h0[i] : go_uniform(-1, 1);
    }
    go_t x0 = go_from(h0, n), x1 = go_from(h1, n), x2 = go_rand(n, -1, 1);
    go_t y = go_rand(n, -1, 1), mask = go_rand(n, -1, 1), dx = go_rand(n, -1, 1);
    go_t dy = go_rand(n, -1, 1);
    BOTH(max_index, n, D(x0), D(y), 0, D(mask));
    BOTH(max_index, n, D(x1), D(y), 1, D(mask));
    BOTH(max_index, n, D(x2), D(y), 2, D(mask));
    go_check("max_index y", sh, &y, TOL_EXACT);
    go_check("max_index mask", sh, &mask, TOL_COUNT);
    BOTH(mask_select, n, D(dy), D(mask), 1, D(dx));
    go_check("mask_select", sh, &dx, TOL_EXACT);
    free(h0);
    free(h1);
    go_free_all();
}

static void go_test_power(size_t n, float power, float scale, float shift, float lo, float hi)
{
    const char *sh = go_fmt("n=%zu p=%g s=%g t=%g", n, power, scale, shift);
    go_t x = go_rand(n, lo, hi), y = go_rand(n, -1, 1), dy = go_rand(n, -1, 1);
    go_t dx = go_rand(n, -1, 1);
    BOTH(power_forward, n, power, scale, shift, D(x), D(y));
    go_check("power_forward", sh, &y, TOL_MATH);
    BOTH(power_backward, n, power, scale, shift, D(x), D(dy), D(dx));
    go_check("power_backward", sh, &dx, TOL_MATH);
    go_free_all();
}

static void go_test_channel_affine(int outer, int channels, int inner, int with_gamma,
                                   int with_beta)
{
    const char *sh = go_fmt("%dx%dx%d%s%s", outer, channels, inner, with_gamma ? " g" : "",
                            with_beta ? " b" : "");
    size_t n = (size_t)outer * channels * inner;
    go_t x = go_rand(n, -1, 1), y = go_rand(n, -1, 1), dy = go_rand(n, -1, 1);
    go_t g = go_rand(channels, 0.5f, 1.5f), bt = go_rand(channels, -1, 1);
    go_t dg = go_rand(channels, -1, 1), db = go_rand(channels, -1, 1);
    BOTH(channel_affine, outer, channels, inner, D(x), with_gamma ? D(g) : NULL,
         with_beta ? D(bt) : NULL, D(y));
    go_check("channel_affine", sh, &y, TOL_EXACT);
    BOTH(channel_affine_grad, outer, channels, inner, D(x), D(dy), with_gamma ? D(dg) : NULL,
         with_beta ? D(db) : NULL);
    if (with_gamma)
        go_check("channel_affine_grad dg", sh, &dg, TOL_SUM);
    if (with_beta)
        go_check("channel_affine_grad db", sh, &db, TOL_SUM);
    go_free_all();
}

/* ---- activations, softmax, loss ---- */

static void go_test_act(int act, float slope, size_t n, int in_place)
{
    static const char *names[] = {"relu", "sigmoid", "tanh"};
    const char *sh = go_fmt("n=%zu slope=%g%s", n, slope, in_place ? " in-place" : "");
    go_t x = go_rand(n, -3, 3), y = go_rand(n, -1, 1), dy = go_rand(n, -1, 1);
    go_t dx = go_rand(n, -1, 1);
    BOTH(act_forward, act, slope, n, D(x), D(y));
    go_check(go_fmt("%s_forward", names[act]), sh, &y, TOL_MATH);
    if (in_place)
        BOTH(act_backward, act, slope, n, D(y), D(y), D(dy), D(dx));
    else
        BOTH(act_backward, act, slope, n, D(x), D(y), D(dy), D(dx));
    go_check(go_fmt("%s_backward", names[act]), sh, &dx, TOL_MATH);
    go_free_all();
}

static void go_test_softmax(int outer, int channels, int inner)
{
    const char *sh = go_fmt("%dx%dx%d", outer, channels, inner);
    size_t n = (size_t)outer * channels * inner;
    go_t x = go_rand(n, -5, 5), y = go_rand(n, -1, 1), dy = go_rand(n, -1, 1);
    go_t dx = go_rand(n, -1, 1);
    BOTH(softmax_forward, outer, channels, inner, D(x), D(y));
    go_check("softmax_forward", sh, &y, TOL_MATH);
    BOTH(softmax_backward, outer, channels, inner, D(y), D(dy), D(dx));
    go_check("softmax_backward", sh, &dx, TOL_SUM);
    go_free_all();
}

/* labels: mostly valid, some ignored (ignore_label), one out of range */
static float *go_labels(size_t positions, int channels, int ignore_label)
{
    float *h = malloc(positions * sizeof(float));
    for (size_t i = 0; i < positions; i++)
        h[i] = (float)(i % 7 == 3 ? ignore_label : go_int(0, channels - 1));
    if (positions > 2)
        h[1] = (float)(channels + 2);
    return h;
}

static void go_test_xent(int outer, int channels, int inner)
{
    const char *sh = go_fmt("%dx%dx%d", outer, channels, inner);
    size_t n = (size_t)outer * channels * inner, positions = (size_t)outer * inner;
    int ignore = channels > 3 ? 3 : 0;
    go_t x = go_rand(n, -4, 4), prob = go_rand(n, -1, 1), dx = go_rand(n, -1, 1);
    float *lh = go_labels(positions, channels, ignore);
    go_t label = go_from(lh, positions);
    go_t loss = go_rand(2, 0, 1);
    /* the same probabilities on both sides: the reference's softmax, copied */
    BOTH(softmax_forward, outer, channels, inner, D(x), D(prob));
    go_share(&prob);
    for (int has_ignore = 0; has_ignore < 2; has_ignore++) {
        const char *s2 = go_fmt("%s%s", sh, has_ignore ? " ignore" : "");
        BOTH(xent_forward, outer, channels, inner, D(prob), D(label), has_ignore, ignore,
             D(loss), D(loss) + 1);
        go_check_pair(&loss, s2, "xent_forward loss", TOL_SUM, "xent_forward count", TOL_COUNT);
        BOTH(xent_backward, outer, channels, inner, D(prob), D(label), has_ignore, ignore, 0.125f,
             D(dx));
        go_check("xent_backward", s2, &dx, TOL_EXACT);
    }
    free(lh);
    go_free_all();
}

/* scores on a coarse grid, so ties with the label's score happen */
static void go_test_accuracy(int outer, int channels, int inner, int top_k)
{
    const char *sh = go_fmt("%dx%dx%d top%d", outer, channels, inner, top_k);
    size_t n = (size_t)outer * channels * inner, positions = (size_t)outer * inner;
    float *xh = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        xh[i] = (float)go_int(0, 8) * 0.25f;
    go_t x = go_from(xh, n);
    float *lh = go_labels(positions, channels, 0);
    go_t label = go_from(lh, positions), out = go_rand(2, 0, 1);
    BOTH(accuracy, outer, channels, inner, D(x), D(label), top_k, 1, 0, D(out), D(out) + 1);
    go_check_pair(&out, sh, "accuracy correct", TOL_COUNT, "accuracy count", TOL_COUNT);
    free(xh);
    free(lh);
    go_free_all();
}

/* ---- batch norm ---- */

static void go_test_bn(int outer, int channels, int inner)
{
    const char *sh = go_fmt("%dx%dx%d", outer, channels, inner);
    size_t n = (size_t)outer * channels * inner;
    go_t x = go_rand(n, 1, 3), y = go_rand(n, -1, 1), dy = go_rand(n, -1, 1);
    go_t dx = go_rand(n, -1, 1);
    go_t mean = go_rand(channels, -1, 1), var = go_rand(channels, 0, 1);
    BOTH(bn_stats, outer, channels, inner, D(x), D(mean), D(var));
    go_check("bn_stats mean", sh, &mean, TOL_SUM);
    go_check("bn_stats var", sh, &var, TOL_SUM);
    /* the same statistics on both sides from here on */
    go_share(&mean);
    go_share(&var);
    BOTH(bn_normalize, outer, channels, inner, D(x), D(mean), D(var), 1e-5f, D(y));
    go_check("bn_normalize", sh, &y, TOL_MATH);
    for (int global = 0; global < 2; global++) {
        BOTH(bn_backward, outer, channels, inner, D(y), D(var), 1e-5f, global, D(dy), D(dx));
        go_check(global ? "bn_backward global" : "bn_backward", sh, &dx, TOL_NORM);
    }
    go_free_all();
}

/* ---- dropout, copies, solver, data ---- */

static void go_test_dropout(size_t n, float ratio)
{
    const char *sh = go_fmt("n=%zu ratio=%g", n, ratio);
    uint64_t seed = go_u64(), counter = go_u64() % 1000;
    go_t x = go_rand(n, -1, 1), mask = go_rand(n, -1, 1), y = go_rand(n, -1, 1);
    BOTH(dropout_forward, n, ratio, seed, counter, D(x), D(mask), D(y));
    go_check("dropout_forward y", sh, &y, TOL_EXACT);
    go_check("dropout_forward mask", sh, &mask, TOL_COUNT);
    /* and the kept elements are exactly those the shared generator keeps */
    float *got = malloc(n * sizeof(float));
    go_be[DEV]->iface->download(go_be[DEV], got, mask.d[DEV], n * sizeof(float));
    size_t wrong = 0;
    uint64_t key = cd_rand_key(seed, counter);
    for (size_t i = 0; i < n; i++)
        wrong += (got[i] != 0.0f) != (cd_rand_keyed(key, i) >= ratio);
    go_record("dropout vs cd_rand_keyed", sh, (double)wrong, TOL_COUNT);
    free(got);
    go_free_all();
}

static void go_test_copy_strided(int outer, size_t count, size_t ss, size_t ds, int accumulate)
{
    const char *sh = go_fmt("%dx%zu s%zu d%zu%s", outer, count, ss, ds, accumulate ? " acc" : "");
    go_t src = go_rand((size_t)outer * ss, -1, 1), dst = go_rand((size_t)outer * ds, -1, 1);
    BOTH(copy_strided, outer, count, D(src), ss, D(dst), ds, accumulate);
    go_check("copy_strided", sh, &dst, TOL_EXACT);
    go_free_all();
}

static void go_test_update(int type, int reg, size_t n)
{
    static const char *names[] = {"sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam"};
    const char *sh = go_fmt("n=%zu %s", n, reg == CD_REG_L1 ? "L1" : "L2");
    cd_update_desc d = {
        .type = type,
        .reg = reg,
        .lr = 0.01f,
        .momentum = type == CD_SOLVER_ADAM ? 0.9f : 0.9f,
        .momentum2 = 0.999f,
        .rms_decay = 0.98f,
        .delta = type == CD_SOLVER_ADAM ? 1e-8f : 1e-6f,
        .decay = 5e-4f,
        .grad_scale = 0.5f,
        .iteration = 3,
    };
    go_t w = go_rand(n, -1, 1), g = go_rand(n, -1, 1), h1 = go_rand(n, 0, 1), h2 = go_rand(n, 0, 1);
    for (int step = 0; step < 3; step++, d.iteration++)
        BOTH(update, &d, n, D(w), D(g), D(h1), D(h2));
    /* one row: the worst of w, g, h1, h2 */
    double worst = 0.0;
    go_t *all[] = {&w, &g, &h1, &h2};
    for (int i = 0; i < 4; i++) {
        double e = go_nmse_of(all[i]);
        worst = isnan(e) || e > worst ? e : worst;
    }
    go_record(go_fmt("update %s", names[type]), go_fmt("%s w,g,h1,h2", sh), worst, TOL_MATH);
    go_free_all();
}

static void go_test_prepare(int n, int c, int sh_, int sw, int oh, int ow, int with_mean,
                            int with_mirror)
{
    const char *sh = go_fmt("%dx%dx%dx%d->%dx%d%s%s", n, c, sh_, sw, oh, ow,
                            with_mean ? " mean" : "", with_mirror ? " flips" : "");
    size_t in = (size_t)n * c * sh_ * sw;
    uint8_t *img = malloc(in), *mir = malloc(n);
    int *oy = malloc(n * sizeof(int)), *ox = malloc(n * sizeof(int));
    for (size_t i = 0; i < in; i++)
        img[i] = (uint8_t)go_int(0, 255);
    for (int i = 0; i < n; i++) {
        oy[i] = go_int(0, sh_ - oh);
        ox[i] = go_int(0, sw - ow);
        mir[i] = (uint8_t)(i % 4); /* no flip, left-right, upside down, both */
    }
    go_t mean = go_rand((size_t)c * sh_ * sw, 0, 255), dst = go_rand((size_t)n * c * oh * ow, -1, 1);
    void *p_img[2], *p_oy[2], *p_ox[2], *p_mir[2];
    for (int b = 0; b < 2; b++) {
        p_img[b] = go_bytes(b, img, in);
        p_oy[b] = go_bytes(b, oy, n * sizeof(int));
        p_ox[b] = go_bytes(b, ox, n * sizeof(int));
        p_mir[b] = go_bytes(b, mir, n);
    }
    for (int b = 0; b < 2; b++)
        go_be[b]->iface->prepare_batch(go_be[b], n, c, sh_, sw, oh, ow, p_img[b], p_oy[b], p_ox[b],
                                       with_mirror ? p_mir[b] : NULL,
                                       with_mean ? mean.d[b] : NULL, 1.0f / 255, dst.d[b]);
    go_check("prepare_batch", sh, &dst, TOL_EXACT);
    for (int b = 0; b < 2; b++) {
        go_be[b]->iface->free(go_be[b], p_img[b]);
        go_be[b]->iface->free(go_be[b], p_oy[b]);
        go_be[b]->iface->free(go_be[b], p_ox[b]);
        go_be[b]->iface->free(go_be[b], p_mir[b]);
    }
    free(img);
    free(mir);
    free(oy);
    free(ox);
    go_free_all();
}

/*
 * augment_batch against the reference (the CPU backend runs cd_aug_apply_u8 and
 * cd_aug_apply_label) on random images with parameters drawn from a config that turns
 * everything on. The device rounds cosf, sinf and logf and contracts FMAs where the
 * host does not, so a sample can land on the other side of a rounding: images may
 * differ by 1 in at most 1% of their values (docs/cuda.md) and never by more; labels
 * (nearest sampling, a tie can go either way) in at most 0.5% of their values.
 */
static void go_test_augment(int n, int c, int h, int w, int kind, int all)
{
    const char *sh = go_fmt("%dx%dx%dx%d %s%s", n, c, h, w, kind == CD_AUG_LABEL ? "labels" : "image",
                            all ? " all" : " geometry");
    size_t len = (size_t)n * c * h * w;
    uint8_t *img = malloc(len), *out[2] = {malloc(len), malloc(len)};
    for (size_t i = 0; i < len; i++)
        img[i] = (uint8_t)(kind == CD_AUG_LABEL ? go_int(0, 20) : go_int(0, 255));
    cd_aug_config cfg = {.quad_rot = CD_AUG_QUAD_ROTALL, .rot = 30, .scale = 0.2};
    if (all) {
        cfg.noise = 0.03;
        cfg.contrast = 0.8;
        cfg.hsv_use = 1;
        cfg.hsv_h = 0.05;
        cfg.hsv_s = 0.1;
        cfg.hsv_v = 0.1;
    }
    cd_aug_params *p = malloc((size_t)n * sizeof *p);
    uint64_t seed = go_u64();
    for (int i = 0; i < n; i++)
        cd_aug_draw(&cfg, seed, (uint64_t)i, &p[i]);
    for (int b = 0; b < 2; b++) {
        void *d_img = go_bytes(b, img, len), *d_out = go_alloc(b, len), *d_p = go_bytes(b, p, (size_t)n * sizeof *p);
        go_be[b]->iface->augment_batch(go_be[b], n, c, h, w, d_p, kind, 255, d_img, d_out);
        go_be[b]->iface->download(go_be[b], out[b], d_out, len);
        go_be[b]->iface->free(go_be[b], d_img);
        go_be[b]->iface->free(go_be[b], d_out);
        go_be[b]->iface->free(go_be[b], d_p);
    }
    size_t off = 0, far = 0;
    for (size_t i = 0; i < len; i++) {
        int d = abs((int)out[REF][i] - (int)out[DEV][i]);
        off += d != 0;
        far += d > 1;
    }
    if (kind == CD_AUG_LABEL) {
        go_record("augment_batch labels", sh, (double)off / (double)len, 5e-3);
    } else {
        go_record("augment_batch off by 1", sh, (double)off / (double)len, 1e-2);
        go_record("augment_batch off by >1", sh, (double)far, TOL_COUNT);
    }
    free(img);
    free(out[0]);
    free(out[1]);
    free(p);
}

/* whiten_batch: per-image statistics in double on both, summed in another order */
static void go_test_whiten(int n, size_t size)
{
    go_t x = go_rand((size_t)n * size, -50, 200);
    BOTH(whiten_batch, n, size, D(x));
    go_check("whiten_batch", go_fmt("%dx%zu", n, size), &x, TOL_SUM);
    go_free_all();
}

/* ---- gemm, convolution, pooling, LRN ---- */

static void go_test_gemm(const char *tag, double tol, int ta, int tb, int m, int n, int k)
{
    const char *sh = go_fmt("%s%s %dx%dx%d", ta ? "T" : "N", tb ? "T" : "N", m, n, k);
    go_t a = go_rand((size_t)m * k, -1, 1), b = go_rand((size_t)k * n, -1, 1);
    go_t c = go_rand((size_t)m * n, -1, 1);
    BOTH(gemm, ta, tb, m, n, k, 0.7f, D(a), D(b), 0.3f, D(c));
    go_check(go_fmt("gemm%s", tag), sh, &c, tol);
    go_free_all();
}

static cd_conv_desc go_conv(int n, int c, int h, int w, int k, int kh, int kw, int s, int p,
                            int dil, int group)
{
    cd_conv_desc d = {.n = n, .c = c, .h = h, .w = w, .k = k, .kh = kh, .kw = kw, .sh = s,
                      .sw = s, .ph = p, .pw = p, .dh = dil, .dw = dil, .group = group};
    d.oh = (h + 2 * p - (dil * (kh - 1) + 1)) / s + 1;
    d.ow = (w + 2 * p - (dil * (kw - 1) + 1)) / s + 1;
    return d;
}

static void go_test_conv(const char *tag, double tol, cd_conv_desc d, int with_bias)
{
    const char *sh = go_fmt("%dx%dx%dx%d k%d %dx%d s%d p%d d%d g%d%s", d.n, d.c, d.h, d.w, d.k,
                            d.kh, d.kw, d.sh, d.ph, d.dh, d.group, with_bias ? " bias" : "");
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.k * d.oh * d.ow;
    size_t nw = (size_t)d.k * (d.c / d.group) * d.kh * d.kw;
    go_t x = go_rand(nx, -1, 1), w = go_rand(nw, -1, 1), bias = go_rand(d.k, -1, 1);
    go_t y = go_rand(ny, -1, 1), dy = go_rand(ny, -1, 1), dx = go_rand(nx, -1, 1);
    go_t dw = go_rand(nw, -1, 1), db = go_rand(d.k, -1, 1);
    BOTH(conv_forward, &d, D(x), D(w), with_bias ? D(bias) : NULL, D(y));
    go_check(go_fmt("conv_forward%s", tag), sh, &y, tol);
    BOTH(conv_backward_data, &d, D(w), D(dy), D(dx));
    go_check(go_fmt("conv_backward_data%s", tag), sh, &dx, tol);
    BOTH(conv_backward_filter, &d, D(x), D(dy), D(dw), with_bias ? D(db) : NULL);
    go_check(go_fmt("conv_backward_filter%s", tag), sh, &dw, tol);
    if (with_bias)
        go_check(go_fmt("conv_backward_bias%s", tag), sh, &db, TOL_SUM);
    /* a second step on the same shape runs the cached algorithms */
    BOTH(conv_forward, &d, D(x), D(w), with_bias ? D(bias) : NULL, D(y));
    go_check(go_fmt("conv_forward%s again", tag), sh, &y, tol);
    go_free_all();
}

/* Caffe's pooled size: rounded up, and the last window must start inside the image */
static cd_pool_desc go_pool(int mode, int n, int c, int h, int w, int k, int s, int p)
{
    cd_pool_desc d = {.mode = mode, .n = n, .c = c, .h = h, .w = w, .kh = k, .kw = k, .sh = s,
                      .sw = s, .ph = p, .pw = p};
    d.oh = (int)ceil((double)(h + 2 * p - k) / s) + 1;
    d.ow = (int)ceil((double)(w + 2 * p - k) / s) + 1;
    if (p) {
        if ((d.oh - 1) * s >= h + p)
            d.oh--;
        if ((d.ow - 1) * s >= w + p)
            d.ow--;
    }
    return d;
}

static void go_test_pool(cd_pool_desc d, int relu_input)
{
    const char *sh = go_fmt("%s %dx%dx%dx%d k%d s%d p%d -> %dx%d%s",
                            d.mode == CD_POOL_MAX ? "max" : "ave", d.n, d.c, d.h, d.w, d.kh, d.sh,
                            d.ph, d.oh, d.ow, relu_input ? " ties" : "");
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
    float *xh = malloc(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) {
        float v = go_uniform(-1, 1);
        xh[i] = relu_input && v < 0 ? 0.0f : v;
    }
    go_t x = go_from(xh, nx), y = go_rand(ny, -1, 1), dy = go_rand(ny, -1, 1);
    go_t dx = go_rand(nx, -1, 1);
    BOTH(pool_forward, &d, D(x), D(y), NULL);
    go_check("pool_forward", sh, &y, TOL_EXACT);
    BOTH(pool_backward, &d, D(x), D(y), NULL, D(dy), D(dx));
    go_check("pool_backward", sh, &dx, TOL_EXACT);
    free(xh);
    go_free_all();
}

static void go_test_lrn(int mode, int n, int c, int h, int w, int size, float alpha, float beta,
                        float k)
{
    cd_lrn_desc d = {.mode = mode, .n = n, .c = c, .h = h, .w = w, .size = size, .alpha = alpha,
                     .beta = beta, .k = k};
    const char *sh = go_fmt("%s %dx%dx%dx%d size%d a%g b%g k%g",
                            mode == CD_LRN_ACROSS ? "across" : "within", n, c, h, w, size, alpha,
                            beta, k);
    size_t nx = (size_t)n * c * h * w;
    go_t x = go_rand(nx, -2, 2), y = go_rand(nx, -1, 1), dy = go_rand(nx, -1, 1);
    go_t dx = go_rand(nx, -1, 1);
    BOTH(lrn_forward, &d, D(x), D(y));
    go_check("lrn_forward", sh, &y, TOL_NORM);
    BOTH(lrn_backward, &d, D(x), D(y), D(dy), D(dx));
    go_check("lrn_backward", sh, &dx, TOL_NORM);
    go_free_all();
}

static void go_print_table(void);

/* NCCL's first group can wait on the network setup of a sandbox; a stuck one must not
 * cost the table. (printf from a handler: acceptable in a test that exits right away.) */
static void go_nccl_timeout(int sig)
{
    (void)sig;
    go_record("allreduce_mean (NCCL)", "did not finish in 60 s", NAN, TOL_EXACT);
    go_print_table();
    printf("test_gpu_ops: %d passed, %d failed\n", go_nrows - go_failed, go_failed);
    fflush(stdout);
    _exit(1);
}

static void go_test_allreduce(size_t n)
{
    const char *sh = go_fmt("n=%zu ranks=1", n);
    char id[CD_CUDA_GROUP_ID_HEX], why[256];
    if (strcmp(go_be[DEV]->iface->name, "cuda") != 0) {
        printf("SKIP allreduce_mean (NCCL): the compared backend is not CUDA\n");
        return;
    }
    signal(SIGALRM, go_nccl_timeout);
    alarm(60);
    if (cd_cuda_group_id(id, sizeof id, why, sizeof why) != 0 ||
        cd_cuda_group_join(go_be[DEV], id, 1, 0, why, sizeof why) != 0) {
        alarm(0);
        fprintf(stderr, "FAIL allreduce_mean: %s\n", why);
        go_record("allreduce_mean (NCCL)", sh, NAN, TOL_EXACT);
        return;
    }
    float *h = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = go_uniform(-1, 1);
    float *x = go_alloc(DEV, n * sizeof(float));
    go_be[DEV]->iface->upload(go_be[DEV], x, h, n * sizeof(float));
    int rc = go_be[DEV]->iface->allreduce_mean(go_be[DEV], x, n);
    go_be[DEV]->iface->download(go_be[DEV], got, x, n * sizeof(float));
    alarm(0);
    go_record("allreduce_mean (NCCL)", sh, rc ? NAN : go_nmse(h, got, n), TOL_EXACT);
    go_be[DEV]->iface->free(go_be[DEV], x);
    free(h);
    free(got);
}

/* ---- the slots beside the ops: memory, overlapped uploads, captured steps ---- */

static void go_test_mem_info(void)
{
    cd_backend_t *be = go_be[DEV];
    if (!be->iface->mem_info)
        return;
    size_t free_b = 0, total_b = 0;
    int rc = be->iface->mem_info(be, &free_b, &total_b);
    int ok = rc == 0 && total_b > 0 && free_b <= total_b;
    go_record("mem_info", go_fmt("%.0f of %.0f MiB free", free_b / 1048576.0, total_b / 1048576.0),
              ok ? 0.0 : NAN, TOL_COUNT);
}

/*
 * upload_async and upload_wait: (1) an upload lands after the ops queued before it (a
 * set, then a copy that reads the buffer the upload overwrites), (2) after
 * upload_wait the host buffer may be overwritten at once, (3) from page-locked memory
 * (host_alloc) and from malloc. n is large, so a missing fence would show.
 */
static void go_test_upload_async(size_t n, int pinned)
{
    cd_backend_t *be = go_be[DEV];
    const cd_backend_iface *o = be->iface;
    if (!o->upload_async || !o->upload_wait || (pinned && !(o->host_alloc && o->host_free)))
        return;
    const char *sh = go_fmt("n=%zu %s", n, pinned ? "host_alloc" : "malloc");
    size_t bytes = n * sizeof(float);
    float *h = pinned ? o->host_alloc(be, bytes) : malloc(bytes);
    float *first = malloc(bytes), *old = malloc(bytes), *got = malloc(bytes);
    if (!h) {
        go_record("host_alloc", sh, NAN, TOL_COUNT);
        free(first);
        free(old);
        free(got);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        h[i] = first[i] = go_uniform(-1, 1);
        old[i] = go_uniform(-1, 1);
    }
    float *d = go_alloc(DEV, bytes), *e = go_alloc(DEV, bytes);
    o->upload(be, d, old, bytes);
    o->copy(be, e, d, bytes);      /* reads d: must see old */
    o->upload_async(be, d, h, bytes);
    o->upload_wait(be);
    for (size_t i = 0; i < n; i++)  /* the host buffer is free again */
        h[i] = 7.0f;
    o->download(be, got, d, bytes);
    go_record("upload_async data", sh, go_nmse(first, got, n), TOL_EXACT);
    o->download(be, got, e, bytes);
    go_record("upload_async after a reader", sh, go_nmse(old, got, n), TOL_EXACT);
    /* a set queued before the upload does not overwrite it */
    o->set(be, n, 3.0f, d);
    o->upload_async(be, d, first, bytes);
    o->upload_wait(be);
    o->download(be, got, d, bytes);
    go_record("upload_async after a writer", sh, go_nmse(first, got, n), TOL_EXACT);
    o->free(be, d);
    o->free(be, e);
    if (pinned)
        o->host_free(be, h);
    else
        free(h);
    free(first);
    free(old);
    free(got);
}

/*
 * A small training step (convolution with bias, its filter and bias gradients, an SGD
 * update of the filter) three times: on the reference eagerly; on the device once
 * eagerly (which chooses the algorithms), then captured and replayed twice. The
 * filters must agree after the three steps.
 */
static void go_test_graph(const char *tag, double tol)
{
    cd_backend_t *be = go_be[DEV];
    if (!be->iface->graph_begin || !be->iface->graph_end || !be->iface->graph_replay)
        return;
    cd_conv_desc d = go_conv(8, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1);
    const char *sh = go_fmt("conv+grad+sgd x3 %dx%dx%dx%d k%d", d.n, d.c, d.h, d.w, d.k);
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.k * d.oh * d.ow;
    size_t nw = (size_t)d.k * d.c * d.kh * d.kw;
    go_t x = go_rand(nx, -1, 1), w = go_rand(nw, -0.3f, 0.3f), bias = go_rand(d.k, -1, 1);
    go_t y = go_rand(ny, -1, 1), dw = go_rand(nw, -1, 1), db = go_rand(d.k, -1, 1);
    go_t h1 = go_rand(nw, 0, 0), h1b = go_rand(d.k, 0, 0);
    cd_update_desc u = {.type = CD_SOLVER_SGD, .reg = CD_REG_L2, .lr = 1e-4f, .momentum = 0.9f,
                        .decay = 5e-4f, .grad_scale = 1.0f};
    /* the gradient of 0.5*|y|^2 is y itself */
#define GO_STEP()                                                                 \
    do {                                                                          \
        be_->iface->set(be_, nw, 0.0f, D(dw));                                    \
        be_->iface->set(be_, (size_t)d.k, 0.0f, D(db));                           \
        be_->iface->conv_forward(be_, &d, D(x), D(w), D(bias), D(y));             \
        be_->iface->conv_backward_filter(be_, &d, D(x), D(y), D(dw), D(db));      \
        be_->iface->update(be_, &u, nw, D(w), D(dw), D(h1), NULL);                \
        be_->iface->update(be_, &u, (size_t)d.k, D(bias), D(db), D(h1b), NULL);   \
    } while (0)
    for (int b_ = 0; b_ < 2; b_++) {
        cd_backend_t *be_ = go_be[b_];
        if (b_ == REF) {
            for (int step = 0; step < 3; step++)
                GO_STEP();
            continue;
        }
        GO_STEP();
        int rc = be_->iface->graph_begin(be_);
        if (rc == 0) {
            GO_STEP();
            rc = be_->iface->graph_end(be_);
        }
        for (int step = 0; step < 2 && rc == 0; step++)
            rc = be_->iface->graph_replay(be_);
        if (rc != 0) {
            fprintf(stderr, "FAIL graph%s: %s\n", tag, be_->err);
            go_record(go_fmt("graph%s", tag), sh, NAN, tol);
        }
    }
#undef GO_STEP
    go_check(go_fmt("graph%s replayed w", tag), sh, &w, tol);
    go_check(go_fmt("graph%s replayed bias", tag), sh, &bias, tol);
    go_free_all();
}

/* CPU against CPU: the memory slots the CPU backend lacks, filled with their plain
 * equivalents, so the tests of those slots run too (graphs have none). */
static cd_backend_iface go_self_iface;
static void *go_self_host_alloc(cd_backend_t *be, size_t bytes)
{
    (void)be;
    return malloc(bytes);
}
static void go_self_host_free(cd_backend_t *be, void *p)
{
    (void)be;
    free(p);
}
static void go_self_wait(cd_backend_t *be) { be->iface->sync(be); }
static int go_self_mem_info(cd_backend_t *be, size_t *free_b, size_t *total_b)
{
    (void)be;
    *free_b = (size_t)1 << 30;
    *total_b = (size_t)2 << 30;
    return 0;
}
static void go_self_slots(cd_backend_t *be)
{
    go_self_iface = *be->iface;
    if (!go_self_iface.upload_async) {
        go_self_iface.upload_async = go_self_iface.upload;
        go_self_iface.upload_wait = go_self_wait;
    }
    if (!go_self_iface.host_alloc) {
        go_self_iface.host_alloc = go_self_host_alloc;
        go_self_iface.host_free = go_self_host_free;
    }
    if (!go_self_iface.mem_info)
        go_self_iface.mem_info = go_self_mem_info;
    be->iface = &go_self_iface;
}

/* A captured dropout draws with the captured counter plus the replay number: replay k
 * must drop what an uncaptured call with counter c + k drops. */
static void go_test_graph_dropout(size_t n)
{
    cd_backend_t *be = go_be[DEV];
    if (!be->iface->graph_begin || !be->iface->graph_end || !be->iface->graph_replay)
        return;
    const char *sh = go_fmt("n=%zu, replays 0..2", n);
    uint64_t seed = go_u64(), c0 = go_u64() % 100000;
    go_t x = go_rand(n, -1, 1), mask = go_rand(n, -1, 1), y = go_rand(n, -1, 1);
    int rc = be->iface->graph_begin(be);
    if (rc == 0) {
        be->iface->dropout_forward(be, n, 0.3f, seed, c0, x.d[DEV], mask.d[DEV], y.d[DEV]);
        rc = be->iface->graph_end(be);
    }
    double worst = 0.0;
    for (int k = 0; k < 3 && rc == 0; k++) {
        rc = be->iface->graph_replay(be);
        go_be[REF]->iface->dropout_forward(go_be[REF], n, 0.3f, seed, c0 + (uint64_t)k, x.d[REF],
                                           mask.d[REF], y.d[REF]);
        double e = go_nmse_of(&y);
        worst = isnan(e) || e > worst ? e : worst;
    }
    if (rc != 0)
        fprintf(stderr, "FAIL graph dropout: %s\n", be->err);
    go_record("graph dropout counter", sh, rc ? NAN : worst, TOL_EXACT);
    go_free_all();
}

/* Puts a new CUDA backend computing in precision in the device's place; returns the one
 * it replaced, for go_restore_device, or NULL (a failed row recorded) when none could be
 * made. */
static cd_backend_t *go_swap_device(const char *tag, int precision, double tol)
{
    char why[256];
    cd_backend_t *be = cd_backend_cuda_new(0, why, sizeof why);
    if (!be) {
        fprintf(stderr, "FAIL: CUDA backend%s: %s\n", tag, why);
        go_record(go_fmt("backend%s", tag), "", NAN, tol);
        return NULL;
    }
    be->precision = precision;
    cd_backend_t *keep = go_be[DEV];
    go_be[DEV] = be;
    go_swapped = keep;
    return keep;
}

static void go_restore_device(cd_backend_t *keep)
{
    go_be[DEV]->iface->destroy(go_be[DEV]);
    go_be[DEV] = keep;
    go_swapped = NULL;
}

/* Convolution and gemm on a device backend made with other settings: an environment
 * variable (var, val) or a precision. */
static void go_test_variant(const char *tag, const char *var, const char *val, int precision,
                            double tol)
{
    if (var)
        setenv(var, val, 1);
    cd_backend_t *keep = go_swap_device(tag, precision, tol);
    if (!keep)
        return;
    go_test_gemm(tag, tol, 0, 0, 64, 500, 800);
    go_test_gemm(tag, tol, 1, 1, 37, 53, 71);
    go_test_gemm(tag, tol, 0, 1, 33, 10, 501); /* odd sizes: the casts' unaligned tails */
    go_test_conv(tag, tol, go_conv(4, 1, 28, 28, 20, 5, 5, 1, 0, 1, 1), 1);
    go_test_conv(tag, tol, go_conv(2, 16, 13, 13, 32, 3, 3, 1, 1, 1, 2), 1);
    if (precision == CD_PREC_FP16 || precision == CD_PREC_BF16) {
        go_test_conv(tag, tol, go_conv(2, 3, 67, 67, 16, 11, 11, 4, 0, 1, 1), 1);
        go_test_conv(tag, tol, go_conv(3, 5, 9, 7, 6, 3, 3, 1, 1, 1, 1), 0); /* odd counts */
    }
    go_restore_device(keep);
}

/* The captured step of go_test_graph on a new device backend computing in precision. */
static void go_test_graph_precision(const char *tag, int precision, double tol)
{
    cd_backend_t *keep = go_swap_device(tag, precision, tol);
    if (!keep)
        return;
    go_test_graph(tag, tol);
    go_restore_device(keep);
}

/*
 * A capture that breaks the rules fails instead of aborting, and the backend goes on
 * eagerly: between graph_begin and graph_end a convolution (recorded), then a
 * download and a sync (refused). graph_end must fail naming the first refused op, the
 * refused download must leave zeros (not stale data) in its host buffer, no record may
 * be left to replay (the one before included), and the same convolution run eagerly
 * afterwards must match the CPU. Only on CUDA: elsewhere the graph slots are NULL.
 */
static void go_test_graph_fallback(void)
{
    cd_backend_t *be = go_be[DEV];
    const cd_backend_iface *o = be->iface;
    if (!o->graph_begin || !o->graph_end || !o->graph_replay || strcmp(o->name, "cuda") != 0)
        return;
    cd_conv_desc d = go_conv(2, 3, 12, 12, 5, 3, 3, 1, 1, 1, 1);
    const char *sh = go_fmt("conv %dx%dx%dx%d k%d, download and sync inside", d.n, d.c, d.h,
                            d.w, d.k);
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.k * d.oh * d.ow;
    size_t nw = (size_t)d.k * d.c * d.kh * d.kw;
    go_t x = go_rand(nx, -1, 1), w = go_rand(nw, -1, 1), bias = go_rand(d.k, -1, 1);
    go_t y = go_rand(ny, -1, 1);
    float host[4] = {7.0f, 7.0f, 7.0f, 7.0f};
    int rc = o->graph_begin(be);
    if (rc != 0) {
        fprintf(stderr, "FAIL graph fallback: graph_begin: %s\n", be->err);
    } else {
        o->conv_forward(be, &d, x.d[DEV], w.d[DEV], bias.d[DEV], y.d[DEV]);
        o->download(be, host, y.d[DEV], sizeof host);
        o->sync(be);
        rc = o->graph_end(be);
    }
    int named = rc != 0 && strstr(be->err, "download") && strstr(be->err, "cannot be replayed");
    if (rc == 0)
        fprintf(stderr, "FAIL graph fallback: graph_end accepted a step with a download\n");
    else if (!named)
        fprintf(stderr, "FAIL graph fallback: graph_end's error does not name the download: %s\n",
                be->err);
    go_record("graph fallback: graph_end fails", sh, named ? 0.0 : NAN, TOL_COUNT);
    int zeros = host[0] == 0.0f && host[1] == 0.0f && host[2] == 0.0f && host[3] == 0.0f;
    go_record("graph fallback: refused download", "host buffer zero-filled", zeros ? 0.0 : NAN,
              TOL_COUNT);
    int none = o->graph_replay(be) != 0;
    go_record("graph fallback: no record left", "graph_replay refuses", none ? 0.0 : NAN,
              TOL_COUNT);
    BOTH(conv_forward, &d, D(x), D(w), D(bias), D(y));
    go_check("graph fallback: eager conv after", sh, &y, TOL_CONV);
    go_free_all();
}

/*
 * A device error inside a test run by GO_TRY is a failed row naming the test, and the
 * run goes back to GO_TRY (no backend call is left half done on the host's side: the
 * backend reports a failure right after the call that returned it). GO_TRY then checks
 * that the device still works (go_probe); an error outside GO_TRY, or during the check,
 * aborts (the backend's contract) with the rows so far printed first.
 */
static jmp_buf go_jmp;
static volatile int go_armed;
static const char *volatile go_current = "";

static void go_on_device_error(cd_backend_t *be, const char *message)
{
    (void)be;
    if (go_armed) {
        go_armed = 0;
        char what[64];
        snprintf(what, sizeof what, "%s", go_current);
        go_record("device error in", what, NAN, 0.0);
        printf("test_gpu_ops: device error in %s: %s\n", go_current, message);
        fflush(stdout);
        longjmp(go_jmp, 1);
    }
    go_record("device error (aborting)", "see the message below", NAN, 0.0);
    go_print_table();
    printf("test_gpu_ops: %d passed, %d failed; aborting on: %s\n", go_nrows - go_failed,
           go_failed, message);
    fflush(stdout);
}

/* After a device error: the failed test's tensors freed, the device backend a variant
 * test swapped in put back, and one small op run and checked on both backends. A
 * failure here is not caught: the context is gone and the run aborts (table printed). */
static void go_probe(void)
{
    go_current = "the check after a device error";
    go_free_all();
    if (go_swapped)
        go_restore_device(go_swapped);
    go_t x = go_rand(4099, -1, 1), y = go_rand(4099, -1, 1);
    BOTH(axpy, x.n, 0.25f, D(x), D(y));
    double e = go_nmse_of(&y);
    go_free_all();
    printf("test_gpu_ops: the device still works after that error (axpy nmse %.2g); going on\n",
           e);
    fflush(stdout);
}

/* CD_GPU_OPS_FAIL_IN=TEXT: a device error is raised before the test call whose text
 * holds TEXT, so the recovery above is itself tested where no device fails
 * (tests/unit/test_cuda_ops.c). */
static void go_inject(const char *call)
{
    const char *in = getenv("CD_GPU_OPS_FAIL_IN");
    if (in && in[0] && strstr(call, in))
        cd_cuda_fail_msg(NULL, "a device error injected by CD_GPU_OPS_FAIL_IN=%s", in);
}

/* Runs one test call; a device error in it becomes a failed row (go_on_device_error). */
#define GO_TRY(call)                                                                      \
    do {                                                                                  \
        go_current = #call;                                                               \
        if (setjmp(go_jmp) == 0) {                                                        \
            go_armed = 1;                                                                 \
            go_inject(#call);                                                             \
            call;                                                                         \
            go_armed = 0;                                                                 \
        } else {                                                                          \
            go_probe();                                                                   \
        }                                                                                 \
    } while (0)

static void go_print_table(void)
{
    printf("\n%-32s | %-44s | %-9s | %-9s | %s\n", "op", "shape", "nmse", "tolerance", "ok");
    printf("---------------------------------+----------------------------------------------+"
           "-----------+-----------+----\n");
    for (int i = 0; i < go_nrows; i++) {
        const go_row *r = &go_rows[i];
        printf("%-32s | %-44s | %9.2e | %9.2e | %s\n", r->op, r->shape, r->nmse, r->tol,
               r->ok ? "ok" : "FAIL");
    }
}

/*
 * Runs every comparison on GPU 0; returns the number of failed rows, or -1 (with a
 * SKIP line printed) when there is no GPU.
 */
static int go_run_all(void)
{
    char why[256] = "";
    const char *self_env = getenv("CD_GPU_OPS_SELF");
    int self = self_env && atoi(self_env) != 0;
    int ngpu = cd_backend_cuda_device_count();
    if (ngpu == 0 && !self) {
        cd_backend_t *be = cd_backend_cuda_new(0, why, sizeof why);
        if (be)
            be->iface->destroy(be);
        printf("SKIP: no GPU (%s)\n", why[0] ? why : "cd_backend_cuda_device_count() is 0");
        return -1;
    }
    go_nrows = go_failed = 0;
    const char *s = getenv("CD_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    go_rng = seed ? seed : 1;
    printf("test_gpu_ops: seed %llu (set CD_TEST_SEED to replay), %d GPU(s)%s\n",
           (unsigned long long)seed, ngpu, self ? "; CD_GPU_OPS_SELF: CPU against CPU" : "");

    cd_cuda_set_fail_hook(go_on_device_error);
    /* a new backend computes in plain FP32 (precision 0), as the strict rows need */
    go_be[REF] = cd_backend_cpu_new(0);
    go_be[DEV] = self ? cd_backend_cpu_new(1) : cd_backend_cuda_new(0, why, sizeof why);
    if (!go_be[REF] || !go_be[DEV]) {
        printf("FAIL: cannot create the backends: %s\n", why);
        return 1;
    }
    if (self) {
        go_self_slots(go_be[DEV]);
        /* a capped CPU backend reports its cap as a device reports its memory */
        cd_backend_cpu_limit_memory(go_be[DEV], (size_t)4 << 30);
    }

    GO_TRY(go_test_elementwise(1000003));
    GO_TRY(go_test_elementwise(17));
    GO_TRY(go_test_axpy((size_t)17 << 20));
    GO_TRY(go_test_max_index(100003));
    GO_TRY(go_test_power(100003, 2.0f, 0.5f, -0.2f, -2, 2)); /* negative bases */
    GO_TRY(go_test_power(100003, 0.5f, 1.0f, 3.0f, -1, 1));
    GO_TRY(go_test_power(100003, 1.0f, -2.0f, 0.5f, -1, 1));
    GO_TRY(go_test_power(100003, -0.75f, 0.3f, 2.0f, -1, 1));
    GO_TRY(go_test_power(1000, 0.0f, 1.0f, 1.0f, -1, 1));
    GO_TRY(go_test_channel_affine(4, 16, 49, 1, 1));
    GO_TRY(go_test_channel_affine(2, 3, 50000, 1, 0));
    GO_TRY(go_test_channel_affine(8, 5, 1, 0, 1));

    GO_TRY(go_test_act(CD_ACT_RELU, 0.0f, 100003, 0));
    GO_TRY(go_test_act(CD_ACT_RELU, 0.0f, 100003, 1));
    GO_TRY(go_test_act(CD_ACT_RELU, 0.1f, 100003, 0));
    GO_TRY(go_test_act(CD_ACT_RELU, -0.5f, 100003, 0)); /* y > 0 where x < 0 */
    GO_TRY(go_test_act(CD_ACT_SIGMOID, 0.0f, 100003, 0));
    GO_TRY(go_test_act(CD_ACT_SIGMOID, 0.0f, 100003, 1));
    GO_TRY(go_test_act(CD_ACT_TANH, 0.0f, 100003, 0));
    GO_TRY(go_test_softmax(8, 10, 1));
    GO_TRY(go_test_softmax(2, 5, 49));
    GO_TRY(go_test_softmax(4, 1000, 1));
    GO_TRY(go_test_xent(64, 10, 1));
    GO_TRY(go_test_xent(2, 5, 49));
    GO_TRY(go_test_accuracy(64, 10, 1, 1));
    GO_TRY(go_test_accuracy(64, 10, 1, 5));
    GO_TRY(go_test_accuracy(2, 21, 30, 1));

    GO_TRY(go_test_bn(8, 16, 36));
    GO_TRY(go_test_bn(2, 3, 50000));
    GO_TRY(go_test_bn(64, 100, 1));
    GO_TRY(go_test_bn(2, 70000, 1)); /* more channels than a grid's y or z allows */

    GO_TRY(go_test_dropout(100003, 0.5f));
    GO_TRY(go_test_dropout(1000, 0.2f));
    GO_TRY(go_test_copy_strided(6, 50, 80, 120, 0));
    GO_TRY(go_test_copy_strided(6, 50, 80, 120, 1));
    GO_TRY(go_test_copy_strided(4, 100, 100, 100, 0));
    GO_TRY(go_test_copy_strided(1, 300, 300, 500, 0));
    for (volatile int type = 0; type < CD_SOLVER_COUNT; type++) { /* (kept across longjmp) */
        GO_TRY(go_test_update(type, CD_REG_L2, 10007));
        GO_TRY(go_test_update(type, CD_REG_L1, 10007));
    }
    if (go_be[REF]->iface->prepare_batch && go_be[DEV]->iface->prepare_batch) {
        GO_TRY(go_test_prepare(3, 3, 32, 30, 28, 24, 1, 1));
        GO_TRY(go_test_prepare(4, 1, 28, 28, 28, 28, 0, 0));
        GO_TRY(go_test_prepare(5, 3, 40, 40, 32, 32, 1, 0));
    }
    if (go_be[REF]->iface->augment_batch && go_be[DEV]->iface->augment_batch) {
        GO_TRY(go_test_augment(8, 3, 32, 32, CD_AUG_IMAGE, 1));
        GO_TRY(go_test_augment(6, 1, 28, 36, CD_AUG_IMAGE, 1));
        GO_TRY(go_test_augment(4, 3, 65, 47, CD_AUG_IMAGE, 0));
        GO_TRY(go_test_augment(5, 1, 40, 40, CD_AUG_LABEL, 0));
    }
    if (go_be[REF]->iface->whiten_batch && go_be[DEV]->iface->whiten_batch) {
        GO_TRY(go_test_whiten(8, 3 * 28 * 28));
        GO_TRY(go_test_whiten(3, 100003));
    }

    for (volatile int ta = 0; ta < 2; ta++) /* (kept across longjmp) */
        for (volatile int tb = 0; tb < 2; tb++)
            GO_TRY(go_test_gemm("", TOL_CONV, ta, tb, 37, 53, 71));
    GO_TRY(go_test_gemm("", TOL_CONV, 0, 1, 64, 500, 800));
    GO_TRY(go_test_gemm("", TOL_CONV, 1, 0, 800, 500, 64));

    GO_TRY(go_test_conv("", TOL_CONV, go_conv(4, 1, 28, 28, 20, 5, 5, 1, 0, 1, 1), 1));  /* LeNet */
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(4, 20, 12, 12, 50, 5, 5, 1, 0, 1, 1), 0));
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 3, 15, 15, 8, 3, 3, 2, 1, 1, 1), 1));
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 4, 9, 9, 6, 3, 3, 1, 1, 1, 2), 1));    /* groups */
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 3, 12, 12, 4, 3, 3, 1, 2, 2, 1), 1));   /* dilation */
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 16, 7, 7, 32, 1, 1, 1, 0, 1, 1), 1));   /* 1x1 */
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 3, 67, 67, 16, 11, 11, 4, 0, 1, 1), 1)); /* AlexNet */
    GO_TRY(go_test_conv("", TOL_CONV, go_conv(2, 32, 13, 13, 64, 3, 3, 1, 1, 1, 1), 1));

    GO_TRY(go_test_pool(go_pool(CD_POOL_MAX, 4, 20, 24, 24, 2, 2, 0), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_MAX, 2, 8, 13, 13, 3, 2, 0), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_MAX, 2, 8, 14, 14, 3, 2, 1), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_MAX, 2, 8, 14, 14, 3, 2, 1), 1));
    GO_TRY(go_test_pool(go_pool(CD_POOL_MAX, 2, 8, 10, 10, 2, 3, 0), 1));
    GO_TRY(go_test_pool(go_pool(CD_POOL_AVE, 2, 8, 14, 14, 3, 2, 1), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_AVE, 2, 8, 7, 7, 2, 2, 0), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_AVE, 2, 8, 7, 7, 7, 1, 0), 0));
    GO_TRY(go_test_pool(go_pool(CD_POOL_AVE, 2, 8, 15, 15, 3, 3, 1), 0));

    GO_TRY(go_test_lrn(CD_LRN_ACROSS, 2, 16, 7, 7, 5, 1e-4f, 0.75f, 1.0f)); /* AlexNet, cuDNN */
    GO_TRY(go_test_lrn(CD_LRN_ACROSS, 2, 16, 7, 7, 3, 0.5f, 0.75f, 2.0f));  /* cuDNN */
    GO_TRY(go_test_lrn(CD_LRN_ACROSS, 2, 20, 5, 5, 17, 0.5f, 0.75f, 1.0f)); /* kernel: size > 16 */
    GO_TRY(go_test_lrn(CD_LRN_ACROSS, 2, 8, 5, 5, 5, 0.5f, 0.005f, 1.0f));  /* kernel: beta < 0.01 */
    GO_TRY(go_test_lrn(CD_LRN_WITHIN, 2, 4, 9, 9, 3, 1.0f, 0.75f, 1.0f));
    GO_TRY(go_test_lrn(CD_LRN_WITHIN, 2, 4, 12, 10, 5, 0.5f, 0.75f, 1.0f));

    GO_TRY(go_test_mem_info());
    GO_TRY(go_test_upload_async((size_t)16 << 20, 1));
    GO_TRY(go_test_upload_async(100003, 0));

    /* the same convolutions through cuDNN's heuristics instead of measurement, and in
     * each reduced precision (the training option `precision`) */
    if (!self) {
        GO_TRY(go_test_variant(" heuristic", "CDIGITS_CUDNN_FIND", "0", CD_PREC_FP32, TOL_CONV));
        setenv("CDIGITS_CUDNN_FIND", "1", 1);
        GO_TRY(go_test_variant(" tf32", NULL, NULL, CD_PREC_TF32, TOL_TF32));
        GO_TRY(go_test_variant(" fp16", NULL, NULL, CD_PREC_FP16, TOL_FP16));
        GO_TRY(go_test_variant(" bf16", NULL, NULL, CD_PREC_BF16, TOL_BF16));
    }
    if (go_be[DEV]->iface->allreduce_mean)
        GO_TRY(go_test_allreduce(100003)); /* NCCL's setup is the slowest and least sure */

    /* captured steps last, so a capture that goes wrong cannot cost the rows above */
    GO_TRY(go_test_graph("", TOL_CONV * 10));
    GO_TRY(go_test_graph_dropout(100003));
    if (!self) {
        GO_TRY(go_test_graph_precision(" fp16", CD_PREC_FP16, TOL_FP16));
        GO_TRY(go_test_graph_precision(" bf16", CD_PREC_BF16, TOL_BF16));
    }
    GO_TRY(go_test_graph_fallback());

    cd_backend_free(go_be[DEV]);
    cd_backend_free(go_be[REF]);
    cd_cuda_set_fail_hook(NULL);
    go_print_table();
    printf("test_gpu_ops: %d passed, %d failed\n", go_nrows - go_failed, go_failed);
    return go_failed;
}

#ifndef CD_GPU_OPS_NO_MAIN
int main(void)
{
    int failed = go_run_all();
    return failed > 0 ? 1 : 0;
}
#endif
