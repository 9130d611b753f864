/*
 * The CPU backend against naive references: every op is compared with plain loops
 * written here in double precision (the obviously correct version of the op), on fresh
 * random inputs and awkward shapes. Backward ops are checked against the naive
 * adjoint loops (or finite differences of a double-precision naive forward), and the
 * gradient conventions are checked by calling twice: data gradients are overwritten,
 * parameter gradients accumulate.
 *
 * Tolerances. A float result is compared with its double reference element by element:
 *     |got - ref| <= rtol * (|ref| + rms(ref))
 * The rms term stands for the size of the terms that were summed, so entries that
 * cancel to near zero are judged against the precision of their terms, not against
 * themselves. A float sum of K random-signed terms carries a rounding error of about
 * sqrt(K)*6e-8 of the term size (K*6e-8 is the never-reached worst case; BLAS sums in
 * blocks). Most sums here have K <= ~1500 (worst case 9e-5); the longest (a gemm with
 * k = 20011, a filter gradient over 50000 positions) typically err by 1e-5. So
 * rtol = 1e-4 (RTOL_SUM) holds with margin, while an indexing mistake (an error the
 * size of a whole term) fails by orders of magnitude. Ops with a few roundings per
 * element use 1e-6 (RTOL_ELEM) or, through expf/powf/sqrtf, 1e-5. Finite differences
 * in double with central steps of 1e-5 are accurate to ~1e-9 and are held to the
 * 1e-4 of the float backward they check.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/util.h"
#include "testutil.h"

#define RTOL_SUM 1e-4
#define RTOL_ELEM 1e-6

static cd_backend_t *be;

/* ---- helpers -------------------------------------------------------------------- */

/* Every array a test works on comes from scratch() (zeroed) and is freed, all of them
 * together, by scratch_free() at the end of the test or of one of its cases. */
#define SCRATCH_MAX 64
static void *g_scratch[SCRATCH_MAX];
static int g_nscratch;

static void *scratch(size_t bytes)
{
    void *p = g_nscratch < SCRATCH_MAX ? calloc(1, bytes ? bytes : 1) : NULL;
    if (!p) {
        fprintf(stderr, "test_cpu_ops: cannot allocate scratch array %d (%zu bytes); raise "
                        "SCRATCH_MAX or free memory\n", g_nscratch + 1, bytes);
        exit(2);
    }
    g_scratch[g_nscratch++] = p;
    return p;
}

static void scratch_free(void)
{
    while (g_nscratch > 0)
        free(g_scratch[--g_nscratch]);
}

static float *falloc(size_t n) { return scratch(n * sizeof(float)); }

static double *dzeros(size_t n) { return scratch(n * sizeof(double)); }

static float *frand(size_t n, double lo, double hi)
{
    float *p = falloc(n);
    cd_test_fill_uniform(p, n, lo, hi);
    return p;
}

static float *fcopy(const float *x, size_t n)
{
    float *p = falloc(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

/* One CHECK per array: passes when every element is within rtol*(|ref| + rms(ref)). */
static void check_arr(const char *what, const float *got, const double *ref, size_t n, double rtol)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += ref[i] * ref[i];
    double rms = n ? sqrt(ss / n) : 0.0;
    size_t worst = 0;
    double worst_ratio = -1.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = rtol * (fabs(ref[i]) + rms) + 1e-30;
        double err = fabs((double)got[i] - ref[i]);
        if (!(err <= tol))
            bad = 1;
        double r = isnan(err) ? INFINITY : err / tol;
        if (r > worst_ratio) {
            worst_ratio = r;
            worst = i;
        }
    }
    CHECK(!bad, "%s: element %zu of %zu is %.9g, expected %.9g (rtol %g, rms %g)", what, worst, n,
          n ? (double)got[worst] : 0.0, n ? ref[worst] : 0.0, rtol, rms);
}

/* Exact equality of two float arrays. */
static void check_same(const char *what, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    while (i < n && (a[i] == b[i] || (isnan(a[i]) && isnan(b[i]))))
        i++;
    CHECK(i == n, "%s: element %zu differs: %.9g vs %.9g", what, i, i < n ? a[i] : 0.0,
          i < n ? b[i] : 0.0);
}

static double *to_double(const float *x, size_t n)
{
    double *d = dzeros(n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* ---- memory --------------------------------------------------------------------- */

static void test_memory(void)
{
    cd_backend_free(NULL); /* free accepts NULL */
    const cd_backend_iface *f = be->iface;
    CHECK(strcmp(f->name, "cpu") == 0, "name %s", f->name);
    size_t sizes[] = {0, 1, 3, 64, 1000, 1 << 20};
    for (size_t s = 0; s < CD_ARRAY_LEN(sizes); s++) {
        unsigned char *p = f->alloc(be, sizes[s]);
        CHECK(p != NULL, "alloc %zu", sizes[s]);
        if (!p)
            continue;
        CHECK(((uintptr_t)p & 63) == 0, "alloc %zu: %p not 64-byte aligned", sizes[s], (void *)p);
        size_t nz = 0;
        for (size_t i = 0; i < sizes[s]; i++)
            nz += p[i] != 0;
        CHECK(nz == 0, "alloc %zu: %zu nonzero bytes", sizes[s], nz);
        f->free(be, p);
    }
    f->free(be, NULL);

    size_t n = 1001;
    float *h = frand(n, -1, 1), *back = falloc(n);
    float *d1 = f->alloc(be, n * sizeof(float)), *d2 = f->alloc(be, n * sizeof(float));
    f->upload(be, d1, h, n * sizeof(float));
    f->copy(be, d2, d1, n * sizeof(float));
    f->sync(be);
    f->download(be, back, d2, n * sizeof(float));
    check_same("upload/copy/download", back, h, n);
    f->free(be, d1);
    f->free(be, d2);
    scratch_free();
}

/* ---- elementwise ---------------------------------------------------------------- */

static void test_elementwise(void)
{
    const cd_backend_iface *f = be->iface;
    size_t sizes[] = {1, 37, 100003}; /* the last runs the parallel loops */
    char what[128];
    for (size_t s = 0; s < CD_ARRAY_LEN(sizes); s++) {
        size_t n = sizes[s];
        float *a = frand(n, -2, 2), *b = frand(n, -2, 2), *y = frand(n, -2, 2);
        float *y0 = fcopy(y, n);
        double *ref = dzeros(n);
        float alpha = (float)cd_test_uniform(-2, 2), beta = (float)cd_test_uniform(-2, 2);
        float v = (float)cd_test_uniform(-5, 5);

        f->set(be, n, v, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = v;
        snprintf(what, sizeof what, "set n=%zu", n);
        check_arr(what, y, ref, n, 0);

        f->scale(be, n, alpha, a, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = (double)alpha * a[i];
        snprintf(what, sizeof what, "scale n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        memcpy(y, y0, n * sizeof(float));
        f->axpy(be, n, alpha, a, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = y0[i] + (double)alpha * a[i];
        snprintf(what, sizeof what, "axpy n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        memcpy(y, y0, n * sizeof(float));
        f->axpby(be, n, alpha, a, beta, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = (double)alpha * a[i] + (double)beta * y0[i];
        snprintf(what, sizeof what, "axpby n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        /* beta = 0 must not read y (it may hold NaN) */
        for (size_t i = 0; i < n; i++)
            y[i] = NAN;
        f->axpby(be, n, alpha, a, 0.0f, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = (double)alpha * a[i];
        snprintf(what, sizeof what, "axpby beta=0 over NaN n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        f->mul(be, n, a, b, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = (double)a[i] * b[i];
        snprintf(what, sizeof what, "mul n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        memcpy(y, y0, n * sizeof(float));
        f->mul_add(be, n, a, b, y);
        for (size_t i = 0; i < n; i++)
            ref[i] = y0[i] + (double)a[i] * b[i];
        snprintf(what, sizeof what, "mul_add n=%zu", n);
        check_arr(what, y, ref, n, RTOL_ELEM);

        double dot = 0.0, asum = 0.0, dabs = 0.0;
        for (size_t i = 0; i < n; i++) {
            dot += (double)a[i] * b[i];
            dabs += fabs((double)a[i] * b[i]);
            asum += fabs((double)a[i]);
        }
        snprintf(what, sizeof what, "dot n=%zu", n);
        CHECK_NEAR(f->dot(be, n, a, b), dot, 1e-6 * dabs + 1e-6, what);
        snprintf(what, sizeof what, "asum n=%zu", n);
        CHECK_NEAR(f->asum(be, n, a), asum, 1e-6 * asum, what);

        scratch_free();
    }
}

/* Eltwise MAX over 3 inputs with many ties (values from {0,1,2}): the earliest
 * input wins a tie. */
static void test_max_index(void)
{
    const cd_backend_iface *f = be->iface;
    size_t sizes[] = {5, 70001};
    for (size_t s = 0; s < CD_ARRAY_LEN(sizes); s++) {
        size_t n = sizes[s];
        float *in[3], *y = frand(n, -1, 1), *mask = frand(n, -1, 1), *dy = frand(n, -1, 1);
        float *dx = frand(n, -1, 1);
        for (int k = 0; k < 3; k++) {
            in[k] = falloc(n);
            for (size_t i = 0; i < n; i++)
                in[k][i] = (float)floor(cd_test_uniform(0, 3));
        }
        for (int k = 0; k < 3; k++)
            f->max_index(be, n, in[k], y, k, mask);
        double *ry = dzeros(n), *rm = dzeros(n), *rdx = dzeros(n);
        for (size_t i = 0; i < n; i++) {
            int best = 0;
            for (int k = 1; k < 3; k++)
                if (in[k][i] > in[best][i])
                    best = k;
            ry[i] = in[best][i];
            rm[i] = best;
        }
        check_arr("max_index y", y, ry, n, 0);
        check_arr("max_index mask (first max wins)", mask, rm, n, 0);
        for (int k = 0; k < 3; k++) {
            f->mask_select(be, n, dy, mask, k, dx);
            for (size_t i = 0; i < n; i++)
                rdx[i] = (int)rm[i] == k ? dy[i] : 0.0;
            check_arr("mask_select", dx, rdx, n, 0);
        }
        scratch_free();
    }
}

static void test_power(void)
{
    const cd_backend_iface *f = be->iface;
    const float powers[] = {0.0f, 1.0f, 2.0f, 0.5f, -0.75f, 3.0f};
    size_t n = 40001;
    float *x = frand(n, -1, 1), *y = falloc(n), *dy = frand(n, -1, 1);
    float *dx = frand(n, -1, 1);
    double *ry = dzeros(n), *rdx = dzeros(n);
    char what[96];
    for (size_t p = 0; p < CD_ARRAY_LEN(powers); p++) {
        double pw = powers[p], scale = 0.7, shift = 1.5; /* base in [0.8, 2.2] */
        f->power_forward(be, n, (float)pw, (float)scale, (float)shift, x, y);
        f->power_backward(be, n, (float)pw, (float)scale, (float)shift, x, dy, dx);
        for (size_t i = 0; i < n; i++) {
            double base = shift + scale * x[i];
            ry[i] = pow(base, pw);
            rdx[i] = dy[i] * pw * scale * pow(base, pw - 1.0);
        }
        snprintf(what, sizeof what, "power_forward p=%g", pw);
        check_arr(what, y, ry, n, 1e-5);
        snprintf(what, sizeof what, "power_backward p=%g", pw);
        check_arr(what, dx, rdx, n, 1e-5);
    }
    scratch_free();
}

static void test_channel_affine(void)
{
    const cd_backend_iface *f = be->iface;
    const int shapes[][3] = {{5, 3, 7}, {1, 4, 1}, {2, 64, 300}};
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes); s++) {
        int outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2];
        size_t n = (size_t)outer * ch * inner;
        float *x = frand(n, -1, 1), *y = frand(n, -1, 1), *dy = frand(n, -1, 1);
        float *gamma = frand(ch, -2, 2), *beta = frand(ch, -2, 2);
        float *dg = frand(ch, -1, 1), *db = frand(ch, -1, 1);
        float *dg0 = fcopy(dg, ch), *db0 = fcopy(db, ch);
        double *ref = dzeros(n), *rdg = dzeros(ch), *rdb = dzeros(ch);
        for (int mode = 0; mode < 4; mode++) {
            const float *g = mode & 1 ? gamma : NULL, *b = mode & 2 ? beta : NULL;
            f->channel_affine(be, outer, ch, inner, x, g, b, y);
            for (int o = 0; o < outer; o++)
                for (int c = 0; c < ch; c++)
                    for (int i = 0; i < inner; i++) {
                        size_t k = ((size_t)o * ch + c) * inner + i;
                        ref[k] = (double)x[k] * (g ? g[c] : 1.0) + (b ? b[c] : 0.0);
                    }
            check_arr(mode == 3 ? "channel_affine" : "channel_affine with NULL gamma/beta", y,
                      ref, n, RTOL_ELEM);
        }
        /* two calls accumulate twice onto the initial values */
        f->channel_affine_grad(be, outer, ch, inner, x, dy, dg, db);
        f->channel_affine_grad(be, outer, ch, inner, x, dy, dg, db);
        for (int c = 0; c < ch; c++) {
            double sg = 0, sb = 0;
            for (int o = 0; o < outer; o++)
                for (int i = 0; i < inner; i++) {
                    size_t k = ((size_t)o * ch + c) * inner + i;
                    sg += (double)dy[k] * x[k];
                    sb += dy[k];
                }
            rdg[c] = dg0[c] + 2 * sg;
            rdb[c] = db0[c] + 2 * sb;
        }
        check_arr("channel_affine_grad dgamma (accumulated twice)", dg, rdg, ch, RTOL_SUM);
        check_arr("channel_affine_grad dbeta (accumulated twice)", db, rdb, ch, RTOL_SUM);
        /* either output may be NULL; without dgamma, x is not read (NULL here) */
        memcpy(dg, dg0, ch * sizeof(float));
        f->channel_affine_grad(be, outer, ch, inner, NULL, dy, NULL, dg);
        for (int c = 0; c < ch; c++)
            rdb[c] = dg0[c] + (rdb[c] - db0[c]) / 2;
        check_arr("channel_affine_grad dbeta only", dg, rdb, ch, RTOL_SUM);
        scratch_free();
    }
}

static void test_activations(void)
{
    const cd_backend_iface *f = be->iface;
    size_t n = 50001;
    float *x = frand(n, -4, 4), *y = falloc(n), *dy = frand(n, -1, 1);
    float *dx = frand(n, -1, 1);
    double *ry = dzeros(n), *rdx = dzeros(n);
    x[0] = 0.0f; /* Caffe: relu'(0) is the negative slope */
    const float slopes[] = {0.0f, 0.1f};
    for (size_t s = 0; s < CD_ARRAY_LEN(slopes); s++) {
        double sl = slopes[s];
        f->act_forward(be, CD_ACT_RELU, slopes[s], n, x, y);
        f->act_backward(be, CD_ACT_RELU, slopes[s], n, x, y, dy, dx);
        for (size_t i = 0; i < n; i++) {
            ry[i] = x[i] > 0 ? x[i] : sl * x[i];
            rdx[i] = x[i] > 0 ? dy[i] : sl * dy[i];
        }
        check_arr("relu forward", y, ry, n, RTOL_ELEM);
        check_arr("relu backward", dx, rdx, n, RTOL_ELEM);
        /* in place: x == y holds the output */
        float *io = fcopy(x, n);
        f->act_forward(be, CD_ACT_RELU, slopes[s], n, io, io);
        f->act_backward(be, CD_ACT_RELU, slopes[s], n, io, io, dy, dx);
        check_arr("relu forward in place", io, ry, n, RTOL_ELEM);
        check_arr("relu backward in place", dx, rdx, n, RTOL_ELEM);
    }
    f->act_forward(be, CD_ACT_SIGMOID, 0, n, x, y);
    f->act_backward(be, CD_ACT_SIGMOID, 0, n, x, y, dy, dx);
    for (size_t i = 0; i < n; i++) {
        double s = 1.0 / (1.0 + exp(-(double)x[i]));
        ry[i] = s;
        rdx[i] = dy[i] * s * (1 - s);
    }
    check_arr("sigmoid forward", y, ry, n, 1e-5);
    check_arr("sigmoid backward", dx, rdx, n, 1e-5);
    f->act_forward(be, CD_ACT_TANH, 0, n, x, y);
    f->act_backward(be, CD_ACT_TANH, 0, n, x, y, dy, dx);
    for (size_t i = 0; i < n; i++) {
        double t = tanh((double)x[i]);
        ry[i] = t;
        rdx[i] = dy[i] * (1 - t * t);
    }
    check_arr("tanh forward", y, ry, n, 1e-5);
    check_arr("tanh backward", dx, rdx, n, 1e-4); /* 1-t^2 cancels near |t| = 1 */
    scratch_free();
}

/* Dropout: the mask follows cd_rand_keyed exactly, the same (seed, counter) gives the
 * same mask, another counter a different one, and the kept fraction is within 6
 * standard deviations of 1-ratio (a false alarm has probability ~1e-9). */
static void test_dropout(void)
{
    const cd_backend_iface *f = be->iface;
    size_t n = 1000003;
    float ratio = 0.3f;
    uint64_t seed = cd_test_rand_u64(), counter = cd_test_rand_u64() & 0xffff;
    float *x = frand(n, -1, 1), *mask = falloc(n), *y = falloc(n);
    float *mask2 = falloc(n), *y2 = falloc(n);
    f->dropout_forward(be, n, ratio, seed, counter, x, mask, y);
    f->dropout_forward(be, n, ratio, seed, counter, x, mask2, y2);
    check_same("dropout is deterministic (mask)", mask, mask2, n);
    check_same("dropout is deterministic (y)", y, y2, n);
    float keep = 1.0f / (1.0f - ratio);
    size_t kept = 0, bad_mask = 0, bad_y = 0;
    uint64_t key = cd_rand_key(seed, counter);
    for (size_t i = 0; i < n; i++) {
        float m = cd_rand_keyed(key, i) >= ratio ? keep : 0.0f;
        bad_mask += mask[i] != m;
        bad_y += y[i] != x[i] * m;
        kept += mask[i] != 0.0f;
    }
    CHECK(bad_mask == 0, "dropout mask disagrees with cd_rand_keyed at %zu places", bad_mask);
    CHECK(bad_y == 0, "dropout y != x*mask at %zu places", bad_y);
    double p = 1.0 - ratio, sd = sqrt(n * p * (1 - p));
    CHECK(fabs((double)kept - n * p) < 6 * sd, "dropout kept %zu of %zu, expected %.0f +- %.0f",
          kept, n, n * p, 6 * sd);
    f->dropout_forward(be, n, ratio, seed, counter + 1, x, mask2, y2);
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += mask[i] == mask2[i];
    /* independent masks agree with probability p^2 + (1-p)^2 = 0.58 */
    CHECK(same < n * 0.62, "dropout masks of counters c and c+1 agree at %zu of %zu", same, n);
    /* the rule at ratios on the generator's grid of 2^-24 and off it, and at the ends */
    const float ratios[] = {0.0f, 0.5f, 0.1f, 1.0f / 16777216.0f, 1.0f - 1.0f / 16777216.0f, 1.0f, 1.5f, -0.25f};
    for (size_t r = 0; r < CD_ARRAY_LEN(ratios); r++) {
        size_t small = 40009, wrong = 0;
        float k = ratios[r] < 1.0f ? 1.0f / (1.0f - ratios[r]) : 0.0f;
        f->dropout_forward(be, small, ratios[r], seed, counter, x, mask2, y2);
        for (size_t i = 0; i < small; i++)
            wrong += mask2[i] != (cd_rand_keyed(key, i) >= ratios[r] ? k : 0.0f);
        CHECK(wrong == 0, "dropout at ratio %.9g: the mask disagrees with cd_rand_keyed at %zu places",
              (double)ratios[r], wrong);
    }
    /* the draws themselves: 64 equal bins, and the pairs of neighbours in 8x8 bins, each
     * a chi-square of 63 degrees of freedom (150 is passed with probability ~1e-9); the
     * indices of a second block of 2^32 likewise */
    for (uint64_t start = 0; start <= ((uint64_t)1 << 32); start += (uint64_t)1 << 32) {
        double bins[64] = {0}, pairs[64] = {0};
        float prev = cd_rand_keyed(key, start);
        for (size_t i = 1; i <= n; i++) {
            float u = cd_rand_keyed(key, start + i);
            bins[(int)(u * 64)]++;
            pairs[(int)(prev * 8) * 8 + (int)(u * 8)]++;
            prev = u;
        }
        double chi_bins = 0, chi_pairs = 0, e = n / 64.0;
        for (int b = 0; b < 64; b++) {
            chi_bins += (bins[b] - e) * (bins[b] - e) / e;
            chi_pairs += (pairs[b] - e) * (pairs[b] - e) / e;
        }
        CHECK(chi_bins < 150 && chi_pairs < 150, "cd_rand_keyed from %llu: chi-square %.1f (bins), %.1f (pairs)",
              (unsigned long long)start, chi_bins, chi_pairs);
    }
    scratch_free();
}

static void test_copy_strided(void)
{
    const cd_backend_iface *f = be->iface;
    int outer = 7;
    size_t count = 13, ss = 29, ds = 17;
    float *src = frand(outer * ss, -1, 1), *dst = frand(outer * ds, -1, 1);
    float *dst0 = fcopy(dst, outer * ds);
    double *ref = dzeros(outer * ds);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(dst, dst0, outer * ds * sizeof(float));
        f->copy_strided(be, outer, count, src + 3, ss, dst + 2, ds, acc);
        for (size_t i = 0; i < outer * ds; i++)
            ref[i] = dst0[i];
        for (int o = 0; o < outer; o++)
            for (size_t j = 0; j < count; j++)
                ref[o * ds + 2 + j] = (acc ? dst0[o * ds + 2 + j] : 0.0) + src[o * ss + 3 + j];
        check_arr(acc ? "copy_strided accumulate" : "copy_strided", dst, ref, outer * ds,
                  RTOL_ELEM);
    }
    scratch_free();
}

/* ---- gemm and convolution --------------------------------------------------------- */

static void test_gemm(void)
{
    const cd_backend_iface *f = be->iface;
    /* the next four are large enough to be split across threads: by columns, by rows,
     * and (small C, long k) by ranges of k; the last two are a few rows of C against a
     * large B, which with beta 0 is computed as its transpose (gemm_flipped), B transposed
     * or not, and with alpha 1 on libxsmm's panels (cpu_skinny_gemm): tails of every block */
    const int shapes[][3] = {{1, 1, 1},     {3, 5, 7},      {65, 77, 129},  {17, 1, 33},
                             {33, 301, 41}, {301, 70, 53},  {20, 25, 1001}, {7, 3, 20011},
                             {5, 2101, 2003}, {33, 1030, 4097}};
    const size_t skinny = CD_ARRAY_LEN(shapes) - 2;
    char what[96];
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes) * 2; s++) {
        int m = shapes[s / 2][0], n = shapes[s / 2][1], k = shapes[s / 2][2];
        if (s % 2 && s / 2 < skinny)
            continue; /* alpha 1 only where it takes another path */
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                float *a = frand((size_t)m * k, -1, 1), *b = frand((size_t)k * n, -1, 1);
                float *c = frand((size_t)m * n, -1, 1);
                double *ref = dzeros((size_t)m * n);
                float alpha = s % 2 ? 1.0f : 0.7f, beta = ta || s / 2 >= skinny ? 0.0f : -1.3f;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double sum = 0;
                        for (int l = 0; l < k; l++)
                            sum += (double)(ta ? a[l * m + i] : a[i * k + l]) *
                                   (tb ? b[j * k + l] : b[l * n + j]);
                        ref[i * n + j] = alpha * sum + (beta ? beta * (double)c[i * n + j] : 0.0);
                    }
                f->gemm(be, ta, tb, m, n, k, alpha, a, b, beta, c);
                snprintf(what, sizeof what, "gemm %dx%dx%d ta=%d tb=%d alpha=%g", m, n, k, ta, tb, alpha);
                check_arr(what, c, ref, (size_t)m * n, RTOL_SUM);
                scratch_free();
            }
    }
}

static int conv_out(int h, int k, int s, int p, int dil)
{
    return (h + 2 * p - (dil * (k - 1) + 1)) / s + 1;
}

static size_t x_at(const cd_conv_desc *d, int i, int c, int y, int x)
{
    return (((size_t)i * d->c + c) * d->h + y) * d->w + x;
}
static size_t y_at(const cd_conv_desc *d, int i, int k, int y, int x)
{
    return (((size_t)i * d->k + k) * d->oh + y) * d->ow + x;
}
static size_t w_at(const cd_conv_desc *d, int k, int ci, int y, int x)
{
    return (((size_t)k * (d->c / d->group) + ci) * d->kh + y) * d->kw + x;
}

/* Calls fn(d, i, kk, ci, c, oy, ox, ky, kx, iy, ix) for every term of the convolution
 * sum that reads an input pixel inside the image: the definition of convolution, used
 * by the naive forward and both naive adjoints. */
#define CONV_TERMS(d, BODY)                                                                \
    do {                                                                                   \
        int kg_ = (d)->k / (d)->group, cg_ = (d)->c / (d)->group;                          \
        for (int i = 0; i < (d)->n; i++)                                                   \
            for (int kk = 0; kk < (d)->k; kk++)                                            \
                for (int oy = 0; oy < (d)->oh; oy++)                                       \
                    for (int ox = 0; ox < (d)->ow; ox++)                                   \
                        for (int ci = 0; ci < cg_; ci++)                                   \
                            for (int ky = 0; ky < (d)->kh; ky++)                           \
                                for (int kx = 0; kx < (d)->kw; kx++) {                     \
                                    int c = kk / kg_ * cg_ + ci;                           \
                                    int iy = oy * (d)->sh - (d)->ph + ky * (d)->dh;        \
                                    int ix = ox * (d)->sw - (d)->pw + kx * (d)->dw;        \
                                    if (iy < 0 || iy >= (d)->h || ix < 0 || ix >= (d)->w)  \
                                        continue;                                          \
                                    BODY;                                                  \
                                }                                                          \
    } while (0)

static void test_conv_case(cd_conv_desc d)
{
    const cd_backend_iface *f = be->iface;
    d.oh = conv_out(d.h, d.kh, d.sh, d.ph, d.dh);
    d.ow = conv_out(d.w, d.kw, d.sw, d.pw, d.dw);
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.k * d.oh * d.ow;
    size_t nw = (size_t)d.k * (d.c / d.group) * d.kh * d.kw;
    char what[200], name[120];
    snprintf(name, sizeof name, "conv n%d c%d %dx%d k%d %dx%d s%d,%d p%d,%d d%d,%d g%d", d.n, d.c,
             d.h, d.w, d.k, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.group);
    float *x = frand(nx, -1, 1), *w = frand(nw, -1, 1), *bias = frand(d.k, -1, 1);
    float *y = frand(ny, -1, 1), *dy = frand(ny, -1, 1), *dx = frand(nx, -1, 1);
    float *dw = frand(nw, -1, 1), *db = frand(d.k, -1, 1);
    float *dw0 = fcopy(dw, nw), *db0 = fcopy(db, d.k);
    double *ry = dzeros(ny), *rdx = dzeros(nx), *rdw = dzeros(nw), *rdb = dzeros(d.k);

    /* forward, with and without bias */
    CONV_TERMS(&d, ry[y_at(&d, i, kk, oy, ox)] += (double)w[w_at(&d, kk, ci, ky, kx)] *
                                                   x[x_at(&d, i, c, iy, ix)]);
    f->conv_forward(be, &d, x, w, NULL, y);
    snprintf(what, sizeof what, "%s forward, no bias", name);
    check_arr(what, y, ry, ny, RTOL_SUM);
    for (size_t j = 0; j < ny; j++)
        ry[j] += bias[j / ((size_t)d.oh * d.ow) % d.k];
    f->conv_forward(be, &d, x, w, bias, y);
    snprintf(what, sizeof what, "%s forward", name);
    check_arr(what, y, ry, ny, RTOL_SUM);

    /* backward data: the transposed loops; called twice to see it overwrites */
    CONV_TERMS(&d, rdx[x_at(&d, i, c, iy, ix)] += (double)w[w_at(&d, kk, ci, ky, kx)] *
                                                   dy[y_at(&d, i, kk, oy, ox)]);
    for (int rep = 0; rep < 2; rep++) {
        f->conv_backward_data(be, &d, w, dy, dx);
        snprintf(what, sizeof what, "%s backward data (call %d)", name, rep + 1);
        check_arr(what, dx, rdx, nx, RTOL_SUM);
    }
    /* and the adjoint identity <conv(x), dy> = <x, conv^T(dy)> between the two ops */
    double lhs = 0, rhs = 0, mag = 0;
    f->conv_forward(be, &d, x, w, NULL, y);
    for (size_t j = 0; j < ny; j++) {
        lhs += (double)y[j] * dy[j];
        mag += fabs((double)y[j] * dy[j]);
    }
    for (size_t j = 0; j < nx; j++)
        rhs += (double)x[j] * dx[j];
    snprintf(what, sizeof what, "%s <conv x, dy> = <x, conv^T dy>", name);
    CHECK_NEAR(lhs, rhs, RTOL_SUM * mag, what);

    /* backward filter: accumulates, so two calls add twice */
    CONV_TERMS(&d, rdw[w_at(&d, kk, ci, ky, kx)] += (double)dy[y_at(&d, i, kk, oy, ox)] *
                                                   x[x_at(&d, i, c, iy, ix)]);
    for (int i = 0; i < d.n; i++)
        for (int kk = 0; kk < d.k; kk++)
            for (int p = 0; p < d.oh * d.ow; p++)
                rdb[kk] += dy[y_at(&d, i, kk, 0, 0) + p];
    for (size_t j = 0; j < nw; j++)
        rdw[j] = dw0[j] + 2 * rdw[j];
    for (int j = 0; j < d.k; j++)
        rdb[j] = db0[j] + 2 * rdb[j];
    f->conv_backward_filter(be, &d, x, dy, dw, db);
    f->conv_backward_filter(be, &d, x, dy, dw, db);
    snprintf(what, sizeof what, "%s backward filter dw (accumulated twice)", name);
    check_arr(what, dw, rdw, nw, RTOL_SUM);
    snprintf(what, sizeof what, "%s backward filter db (accumulated twice)", name);
    check_arr(what, db, rdb, d.k, RTOL_SUM);
    /* db may be NULL */
    memcpy(dw, dw0, nw * sizeof(float));
    f->conv_backward_filter(be, &d, x, dy, dw, NULL);
    for (size_t j = 0; j < nw; j++)
        rdw[j] = dw0[j] + (rdw[j] - dw0[j]) / 2;
    snprintf(what, sizeof what, "%s backward filter without bias", name);
    check_arr(what, dw, rdw, nw, RTOL_SUM);

    scratch_free();
}

static void test_conv(void)
{
    /* n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, group */
    const cd_conv_desc cases[] = {
        {5, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1, 0, 0},   /* LeNet conv1 (one image per thread) */
        /* LeNet conv2, 19 images: the filter gradient's 8 partial sums over 2 or 3 each */
        {19, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1, 0, 0},
        {1, 3, 7, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0},      /* odd sizes, stride 2, pad */
        {2, 2, 11, 10, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0, 0},    /* dilation 2 */
        {5, 4, 6, 7, 6, 3, 2, 1, 1, 1, 0, 1, 1, 2, 0, 0},      /* groups 2, 3x2 kernel */
        {3, 8, 5, 5, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0, 0},      /* groups 4, stride 2 */
        {5, 6, 4, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0},      /* 1x1, batched */
        {1, 6, 4, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0},      /* 1x1, one image (no im2col) */
        {1, 8, 4, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, 0, 0},      /* 1x1, one image, groups 2 */
        {2, 5, 9, 8, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0},      /* 1x1 stride 2 */
        {2, 3, 37, 35, 5, 11, 11, 4, 4, 0, 0, 1, 1, 1, 0, 0},  /* AlexNet conv1-like */
        /* AlexNet conv2-like: a group's 23 channels unfold 73 KB each, in chunks of 8, 8 and 7 */
        {3, 46, 27, 27, 6, 5, 5, 1, 1, 2, 2, 1, 1, 2, 0, 0},
        {1, 2, 5, 5, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0, 0},      /* kernel as large as the image */
        {5, 2, 3, 4, 3, 3, 3, 3, 2, 2, 1, 2, 1, 1, 0, 0},      /* stride 3, dilation 2 x 1 */
        /* horizontal stride 3 with padding 4 and dilation 2: taps start up to 2 decimated
         * columns left of the image; 1 image (batched im2col) then 4 (per image) */
        {1, 2, 7, 23, 3, 3, 5, 1, 3, 1, 4, 1, 2, 1, 0, 0},
        {4, 2, 7, 23, 3, 3, 5, 2, 3, 1, 4, 1, 2, 1, 0, 0},
        /* a small detector's last 3x3 layers (8x8 and 16x16, 64 filters, padded) */
        {4, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        {4, 48, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        /* one image's columns are 3.6M floats: 4 images per gemm, then a chunk of 1 */
        {5, 3, 100, 100, 4, 11, 11, 1, 1, 5, 5, 1, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++)
        test_conv_case(cases[i]);
}

/* ---- pooling -------------------------------------------------------------------- */

/* Caffe's pooled size: ceil, then the last window must start before h + ph. */
static int pool_out(int h, int k, int s, int p)
{
    int o = (int)ceil((double)(h + 2 * p - k) / s) + 1;
    if (p > 0 && (o - 1) * s >= h + p)
        o--;
    return o;
}

/* The naive pooling of Caffe's layer: y and, for MAX, the flat input index chosen. */
static void naive_pool(const cd_pool_desc *d, const float *x, double *y, long *arg)
{
    for (int pl = 0; pl < d->n * d->c; pl++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++) {
                int hs = oy * d->sh - d->ph, ws = ox * d->sw - d->pw;
                int he = hs + d->kh < d->h + d->ph ? hs + d->kh : d->h + d->ph;
                int we = ws + d->kw < d->w + d->pw ? ws + d->kw : d->w + d->pw;
                int size = (he - hs) * (we - ws);
                hs = hs > 0 ? hs : 0;
                ws = ws > 0 ? ws : 0;
                he = he < d->h ? he : d->h;
                we = we < d->w ? we : d->w;
                double best = -INFINITY, sum = 0;
                long bi = -1;
                for (int yy = hs; yy < he; yy++)
                    for (int xx = ws; xx < we; xx++) {
                        long idx = ((long)pl * d->h + yy) * d->w + xx;
                        sum += x[idx];
                        if (x[idx] > best) {
                            best = x[idx];
                            bi = idx;
                        }
                    }
                long o = ((long)pl * d->oh + oy) * d->ow + ox;
                y[o] = d->mode == CD_POOL_MAX ? best : sum / size;
                arg[o] = bi;
            }
}

/* Where the backend keeps a mask for d: the forward with it gives the same y, and the
 * backward from it the same bits as dx from finding the maxima again (which the
 * caller checked against the naive loops), twice over so a stale mask would show. */
static void pool_mask_same(const cd_pool_desc *d, const char *name, const float *x, const float *dy,
                           const float *dx)
{
    const cd_backend_iface *f = be->iface;
    size_t nm = cd_be_pool_mask_size(be, d);
    if (!nm)
        return;
    size_t nx = (size_t)d->n * d->c * d->h * d->w, ny = (size_t)d->n * d->c * d->oh * d->ow;
    float *mask = frand(nm, -1, 1), *y = falloc(ny), *ym = falloc(ny), *dxm = frand(nx, -1, 1);
    f->pool_forward(be, d, x, y, NULL);
    for (int rep = 0; rep < 2; rep++) {
        f->pool_forward(be, d, x, ym, mask);
        f->pool_backward(be, d, x, ym, mask, dy, dxm);
        CHECK(!memcmp(y, ym, ny * sizeof(float)) && !memcmp(dx, dxm, nx * sizeof(float)),
              "%s: the forward and backward with the mask (call %d) give other bits than without", name,
              rep + 1);
    }
}

static void test_pool_case(cd_pool_desc d, int ties)
{
    const cd_backend_iface *f = be->iface;
    d.oh = pool_out(d.h, d.kh, d.sh, d.ph);
    d.ow = pool_out(d.w, d.kw, d.sw, d.pw);
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
    char what[200], name[140];
    snprintf(name, sizeof name, "%s pool n%d c%d %dx%d k%dx%d s%d,%d p%d,%d -> %dx%d%s",
             d.mode == CD_POOL_MAX ? "max" : "ave", d.n, d.c, d.h, d.w, d.kh, d.kw, d.sh, d.sw,
             d.ph, d.pw, d.oh, d.ow, ties ? " (ties)" : "");
    float *x = frand(nx, -1, 1), *y = frand(ny, -1, 1), *dy = frand(ny, -1, 1);
    float *dx = frand(nx, -1, 1);
    if (ties) { /* values from {0,..,3}: windows hold equal maxima; and gradients of -0,
                 * which a cell's sum from +0 turns into +0 on every path */
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)floor(cd_test_uniform(0, 4));
        for (size_t i = 0; i < ny; i += 3)
            dy[i] = -0.0f;
    }
    double *ry = dzeros(ny), *rdx = dzeros(nx);
    long *arg = scratch(ny * sizeof(long));
    naive_pool(&d, x, ry, arg);
    f->pool_forward(be, &d, x, y, NULL);
    snprintf(what, sizeof what, "%s forward", name);
    check_arr(what, y, ry, ny, RTOL_ELEM);
    /* backward: the adjoint of the forward (the route to the first maximum for MAX) */
    for (int pl = 0; pl < d.n * d.c; pl++)
        for (int oy = 0; oy < d.oh; oy++)
            for (int ox = 0; ox < d.ow; ox++) {
                long o = ((long)pl * d.oh + oy) * d.ow + ox;
                if (d.mode == CD_POOL_MAX) {
                    rdx[arg[o]] += dy[o];
                    continue;
                }
                int hs = oy * d.sh - d.ph, ws = ox * d.sw - d.pw;
                int he = hs + d.kh < d.h + d.ph ? hs + d.kh : d.h + d.ph;
                int we = ws + d.kw < d.w + d.pw ? ws + d.kw : d.w + d.pw;
                int size = (he - hs) * (we - ws);
                for (int yy = hs; yy < he; yy++)
                    for (int xx = ws; xx < we; xx++)
                        if (yy >= 0 && yy < d.h && xx >= 0 && xx < d.w)
                            rdx[((long)pl * d.h + yy) * d.w + xx] += dy[o] / size;
            }
    for (int rep = 0; rep < 2; rep++) {
        f->pool_backward(be, &d, x, y, NULL, dy, dx);
        snprintf(what, sizeof what, "%s backward (call %d)", name, rep + 1);
        check_arr(what, dx, rdx, nx, RTOL_ELEM * 10);
    }
    pool_mask_same(&d, name, x, dy, dx);
    scratch_free();
}

static void test_pool(void)
{
    /* mode, n, c, h, w, kh, kw, sh, sw, ph, pw */
    const cd_pool_desc cases[] = {
        {0, 5, 3, 7, 7, 3, 3, 2, 2, 1, 1, 0, 0},     /* ceil and pad */
        {0, 1, 2, 6, 6, 3, 3, 2, 2, 0, 0, 0, 0},     /* ceil: last window clipped */
        {0, 2, 3, 5, 8, 2, 2, 2, 2, 1, 1, 0, 0},     /* the pad clip removes a row */
        {0, 5, 4, 6, 5, 6, 5, 1, 1, 0, 0, 0, 0},     /* global pooling */
        {0, 2, 3, 9, 9, 3, 3, 1, 1, 1, 1, 0, 0},     /* GoogLeNet's 3x3 s1 p1 */
        {0, 2, 16, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0},  /* AlexNet pool5 */
        {0, 3, 9, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0},   /* pool5's planes: sixteen, eight, three alone */
        {0, 2, 3, 55, 55, 3, 3, 2, 2, 0, 0, 0, 0},   /* AlexNet pool1: inner windows only */
        {0, 2, 3, 9, 33, 3, 3, 2, 2, 0, 0, 0, 0},    /* 3x3 s2, 16 a row: no tail after the groups */
        {0, 3, 4, 27, 25, 3, 3, 2, 2, 0, 0, 0, 0},   /* AlexNet pool2's tiling, 12 a row (gathered) */
        {0, 2, 2, 12, 11, 3, 3, 2, 2, 1, 2, 0, 0},   /* inner windows with a border on each side */
        {0, 1, 2, 7, 5, 3, 2, 2, 1, 1, 0, 0, 0},     /* unequal kernel, stride, pad */
        {0, 3, 2, 11, 10, 5, 5, 3, 3, 2, 2, 0, 0},   /* AVE divisor clipped at h+ph */
        {0, 2, 3, 24, 24, 2, 2, 2, 2, 0, 0, 0, 0},   /* LeNet's 2x2 s2 (MAX's own path) */
        {0, 2, 3, 7, 9, 2, 2, 2, 2, 0, 0, 0, 0},     /* 2x2 s2 on odd sides: the last windows clipped */
        {0, 1, 2, 1, 5, 2, 2, 2, 2, 0, 0, 0, 0},     /* 2x2 s2 on a single row */
        {0, 3, 5, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0},     /* LeNet's pool2: small planes */
        {0, 3, 343, 2, 8, 2, 2, 2, 2, 0, 0, 0, 0},   /* 4 a row, two threads, an odd number of row pairs */
        {0, 2, 3, 6, 32, 2, 2, 2, 2, 0, 0, 0, 0},    /* 2x2 s2, 16 a row: the batch in eights */
        {0, 3, 3, 6, 9, 2, 2, 2, 2, 0, 0, 0, 0},     /* ... with each row's last window clipped */
        {0, 2, 3, 7, 7, 3, 3, 1, 1, 0, 0, 0, 0},     /* 3x3 s1, 5 inner windows a row (copied rows) */
        {0, 2, 3, 9, 10, 3, 3, 2, 2, 1, 0, 0, 0},    /* 3x3 s2, 4 a row, a padded border row */
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++)
        for (int mode = 0; mode < 2; mode++)
            for (int ties = 0; ties < 2; ties++) {
                cd_pool_desc d = cases[i];
                d.mode = mode;
                test_pool_case(d, ties);
            }
    /* Caffe's sizes, as the helper computes them, for the cases above */
    CHECK(pool_out(7, 3, 2, 1) == 4 && pool_out(6, 3, 2, 0) == 3 && pool_out(5, 2, 2, 1) == 3 &&
              pool_out(13, 3, 2, 0) == 6,
          "pooled sizes %d %d %d %d", pool_out(7, 3, 2, 1), pool_out(6, 3, 2, 0),
          pool_out(5, 2, 2, 1), pool_out(13, 3, 2, 0));
}

/* MAX with NaN in the input: the forward's scan starts from the window's first cell
 * inside the image and keeps a value only when a later one is greater, so a NaN there is
 * the output and any other NaN is passed over; the backward routes to the same cell.
 * Every path of the backend (2x2 stride 2, the 3x3 windows taken row by row, the
 * gathered backward of 3x3 stride-2 windows that tile the plane, eight small planes a
 * lane each, the clipped border) must agree with that scan exactly. */
static void test_pool_nan(void)
{
    const cd_backend_iface *f = be->iface;
    /* n, c, h, w, kh, kw, sh, sw, ph, pw */
    const cd_pool_desc cases[] = {
        {0, 2, 3, 23, 23, 3, 3, 2, 2, 0, 0, 0, 0}, {0, 2, 3, 20, 19, 3, 3, 1, 1, 1, 1, 0, 0},
        {0, 2, 3, 18, 24, 2, 2, 2, 2, 0, 0, 0, 0}, {0, 1, 2, 21, 22, 3, 3, 2, 2, 1, 1, 0, 0},
        {0, 3, 9, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0}, {0, 2, 3, 9, 9, 3, 3, 1, 1, 1, 1, 0, 0},
        {0, 3, 5, 8, 9, 2, 2, 2, 2, 0, 0, 0, 0}, {0, 3, 5, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0},
        {0, 2, 3, 25, 27, 3, 3, 2, 2, 0, 0, 0, 0}, {0, 3, 4, 9, 9, 3, 3, 1, 1, 1, 1, 0, 0},
        {0, 1, 3, 4, 16, 2, 2, 2, 2, 0, 0, 0, 0},  {0, 3, 4, 7, 9, 2, 2, 2, 2, 0, 0, 0, 0},
    };
    for (size_t ci = 0; ci < CD_ARRAY_LEN(cases); ci++) {
        cd_pool_desc d = cases[ci];
        d.mode = CD_POOL_MAX;
        d.oh = pool_out(d.h, d.kh, d.sh, d.ph);
        d.ow = pool_out(d.w, d.kw, d.sw, d.pw);
        size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
        float *x = frand(nx, 0, 4), *y = falloc(ny), *dy = frand(ny, -1, 1), *dx = falloc(nx);
        for (size_t i = 0; i < nx; i++) {
            double u = cd_test_uniform(0, 1);
            x[i] = u < 0.15 ? NAN : (float)floor(x[i]); /* NaN and ties */
        }
        double *rdx = dzeros(nx);
        f->pool_forward(be, &d, x, y, NULL);
        f->pool_backward(be, &d, x, y, NULL, dy, dx);
        int bad = 0;
        for (int pl = 0; pl < d.n * d.c; pl++)
            for (int oy = 0; oy < d.oh; oy++)
                for (int ox = 0; ox < d.ow; ox++) {
                    int hs = oy * d.sh - d.ph, ws = ox * d.sw - d.pw;
                    int he = hs + d.kh < d.h ? hs + d.kh : d.h, we = ws + d.kw < d.w ? ws + d.kw : d.w;
                    hs = hs > 0 ? hs : 0;
                    ws = ws > 0 ? ws : 0;
                    long best = ((long)pl * d.h + hs) * d.w + ws;
                    for (int yy = hs; yy < he; yy++)
                        for (int xx = ws; xx < we; xx++) {
                            long i = ((long)pl * d.h + yy) * d.w + xx;
                            if (x[i] > x[best])
                                best = i;
                        }
                    long o = ((long)pl * d.oh + oy) * d.ow + ox;
                    rdx[best] += dy[o];
                    if (!(isnan(x[best]) ? isnan(y[o]) : y[o] == x[best]))
                        bad++;
                }
        CHECK(bad == 0, "max pool k%dx%d s%d p%d with NaN: %d outputs not the scan's", d.kh, d.kw, d.sh, d.ph, bad);
        check_arr("max pool with NaN: backward", dx, rdx, nx, RTOL_ELEM * 10);
        pool_mask_same(&d, "max pool with NaN", x, dy, dx);
        scratch_free();
    }
}

/* ---- LRN ------------------------------------------------------------------------ */

static void naive_lrn(const cd_lrn_desc *d, const double *x, double *y)
{
    int pre = (d->size - 1) / 2;
    for (int i = 0; i < d->n; i++)
        for (int c = 0; c < d->c; c++)
            for (int yy = 0; yy < d->h; yy++)
                for (int xx = 0; xx < d->w; xx++) {
                    double s = 0, scale;
#define X(cc, a, b) x[(((size_t)i * d->c + (cc)) * d->h + (a)) * d->w + (b)]
                    if (d->mode == CD_LRN_ACROSS) {
                        for (int cc = c - pre; cc < c - pre + d->size; cc++)
                            if (cc >= 0 && cc < d->c)
                                s += X(cc, yy, xx) * X(cc, yy, xx);
                        scale = d->k + d->alpha / d->size * s;
                    } else {
                        for (int a = yy - pre; a < yy - pre + d->size; a++)
                            for (int b = xx - pre; b < xx - pre + d->size; b++)
                                if (a >= 0 && a < d->h && b >= 0 && b < d->w)
                                    s += X(c, a, b) * X(c, a, b);
                        scale = 1.0 + d->alpha / ((double)d->size * d->size) * s;
                    }
                    y[(((size_t)i * d->c + c) * d->h + yy) * d->w + xx] =
                        X(c, yy, xx) * pow(scale, -d->beta);
#undef X
                }
}

/* Finite differences in double: ref[j] = d/dx_j sum_q dy[q] * naive(x)[q]. Its own
 * arrays are scratch, freed with the caller's. */
static void fd_grad(void (*fwd)(const void *ctx, const double *x, double *y), const void *ctx,
                    const float *x, size_t nx, const float *dy, size_t ny, double *ref)
{
    double *xd = to_double(x, nx), *yp = dzeros(ny), *ym = dzeros(ny);
    for (size_t j = 0; j < nx; j++) {
        double h = 1e-5, keep = xd[j];
        xd[j] = keep + h;
        fwd(ctx, xd, yp);
        xd[j] = keep - h;
        fwd(ctx, xd, ym);
        xd[j] = keep;
        double s = 0;
        for (size_t q = 0; q < ny; q++)
            s += dy[q] * (yp[q] - ym[q]);
        ref[j] = s / (2 * h);
    }
}

static void lrn_fwd_cb(const void *ctx, const double *x, double *y) { naive_lrn(ctx, x, y); }

static void test_lrn(void)
{
    const cd_backend_iface *f = be->iface;
    /* mode, n, c, h, w, size, alpha, beta, k */
    const cd_lrn_desc cases[] = {
        {CD_LRN_ACROSS, 2, 7, 5, 4, 5, 1e-1f, 0.75f, 2.0f},
        {CD_LRN_ACROSS, 1, 3, 3, 3, 5, 0.5f, 0.6f, 1.0f},   /* fewer channels than size */
        {CD_LRN_ACROSS, 5, 6, 2, 3, 3, 0.9f, 0.75f, 1.0f},
        /* AlexNet's norm1-like: planes of 3 blocks (256 + 256 + 63 positions), 12 channels */
        {CD_LRN_ACROSS, 2, 12, 23, 25, 5, 0.8f, 0.75f, 1.0f},
        {CD_LRN_WITHIN, 2, 3, 6, 5, 3, 0.5f, 0.75f, 1.0f},
        {CD_LRN_WITHIN, 1, 2, 7, 4, 5, 2.0f, 0.6f, 1.0f},   /* window larger than w */
        /* even sizes (Caffe rejects them; the windows are then asymmetric, which
         * checks that the backward sums over the mirrored window) */
        {CD_LRN_ACROSS, 2, 6, 3, 2, 4, 0.7f, 0.75f, 1.5f},
        {CD_LRN_WITHIN, 1, 2, 5, 6, 2, 1.5f, 0.75f, 1.0f},
    };
    char what[160];
    for (size_t t = 0; t < CD_ARRAY_LEN(cases); t++) {
        cd_lrn_desc d = cases[t];
        size_t n = (size_t)d.n * d.c * d.h * d.w;
        snprintf(what, sizeof what, "lrn %s n%d c%d %dx%d size %d beta %g",
                 d.mode == CD_LRN_ACROSS ? "across" : "within", d.n, d.c, d.h, d.w, d.size,
                 d.beta);
        float *x = frand(n, -2, 2), *y = frand(n, -1, 1), *dy = frand(n, -1, 1);
        float *dx = frand(n, -1, 1);
        double *xd = to_double(x, n), *ry = dzeros(n), *rdx = dzeros(n);
        naive_lrn(&d, xd, ry);
        f->lrn_forward(be, &d, x, y);
        char w2[320];
        snprintf(w2, sizeof w2, "%s forward", what);
        check_arr(w2, y, ry, n, 1e-5);
        fd_grad(lrn_fwd_cb, &d, x, n, dy, n, rdx);
        for (int rep = 0; rep < 2; rep++) {
            f->lrn_backward(be, &d, x, y, dy, dx);
            snprintf(w2, sizeof w2, "%s backward vs finite differences (call %d)", what, rep + 1);
            check_arr(w2, dx, rdx, n, RTOL_SUM);
        }
        scratch_free();
    }
}

/* ---- softmax, loss, accuracy ------------------------------------------------------- */

static void test_softmax(void)
{
    const cd_backend_iface *f = be->iface;
    const int shapes[][3] = {{5, 10, 1}, {3, 4, 7}, {1, 1000, 1}, {64, 21, 33}};
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes); s++) {
        int outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2];
        size_t n = (size_t)outer * ch * inner;
        float *x = frand(n, -5, 5), *y = falloc(n), *dy = frand(n, -1, 1);
        float *dx = frand(n, -1, 1);
        x[0] = 1000.0f; /* exp(1000) overflows unless the max is subtracted */
        double *ry = dzeros(n), *rdx = dzeros(n);
        for (int o = 0; o < outer; o++)
            for (int i = 0; i < inner; i++) {
                double m = -INFINITY, z = 0, dot = 0;
#define AT(c) (((size_t)o * ch + (c)) * inner + i)
                for (int c = 0; c < ch; c++)
                    m = fmax(m, x[AT(c)]);
                for (int c = 0; c < ch; c++)
                    z += exp(x[AT(c)] - m);
                for (int c = 0; c < ch; c++)
                    ry[AT(c)] = exp(x[AT(c)] - m) / z;
                for (int c = 0; c < ch; c++)
                    dot += dy[AT(c)] * ry[AT(c)];
                for (int c = 0; c < ch; c++)
                    rdx[AT(c)] = ry[AT(c)] * (dy[AT(c)] - dot);
#undef AT
            }
        f->softmax_forward(be, outer, ch, inner, x, y);
        check_arr("softmax forward", y, ry, n, 1e-5);
        f->softmax_backward(be, outer, ch, inner, y, dy, dx);
        check_arr("softmax backward", dx, rdx, n, RTOL_SUM);
        scratch_free();
    }
}

static void test_xent(void)
{
    const cd_backend_iface *f = be->iface;
    const int shapes[][3] = {{7, 5, 1}, {3, 4, 6}};
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes); s++) {
        int outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2];
        size_t n = (size_t)outer * ch * inner, nl = (size_t)outer * inner;
        float *prob = frand(n, 0.01, 1), *label = falloc(nl);
        float *dx = frand(n, -1, 1);
        int ignore = 2;
        for (size_t j = 0; j < nl; j++)
            label[j] = (float)floor(cd_test_uniform(0, ch));
        label[0] = (float)ignore;
        label[1] = 1.0f;
        /* the label of position 1 has probability 0: the loss clamps it to FLT_MIN */
        size_t o1 = 1 / inner, i1 = 1 % inner;
        prob[(o1 * ch + 1) * inner + i1] = 0.0f;
        float scale = 0.37f;
        for (int has_ignore = 0; has_ignore < 2; has_ignore++) {
            double loss = 0, count = 0;
            double *rdx = dzeros(n);
            for (int o = 0; o < outer; o++)
                for (int i = 0; i < inner; i++) {
                    int l = (int)label[(size_t)o * inner + i];
                    if (has_ignore && l == ignore)
                        continue;
                    double p = prob[((size_t)o * ch + l) * inner + i];
                    loss -= log(fmax(p, FLT_MIN));
                    count++;
                    for (int c = 0; c < ch; c++) {
                        size_t k = ((size_t)o * ch + c) * inner + i;
                        rdx[k] = (prob[k] - (c == l)) * (double)scale;
                    }
                }
            float lo = -1, co = -1;
            f->xent_forward(be, outer, ch, inner, prob, label, has_ignore, ignore, &lo, &co);
            CHECK_NEAR(lo, loss, 1e-5 * loss, has_ignore ? "xent loss, ignoring" : "xent loss");
            CHECK_NEAR(co, count, 0, has_ignore ? "xent count, ignoring" : "xent count");
            f->xent_backward(be, outer, ch, inner, prob, label, has_ignore, ignore, scale, dx);
            check_arr(has_ignore ? "xent backward, ignoring" : "xent backward", dx, rdx, n,
                      RTOL_ELEM);
        }
        scratch_free();
    }
}

static void test_accuracy(void)
{
    const cd_backend_iface *f = be->iface;
    float out_c, out_n;
    /* by hand, with ties: scores (1, 2, 2, 0); a tie counts against the label (Caffe) */
    const float sc[4] = {1, 2, 2, 0};
    const struct {
        float label;
        int k;
        float correct;
    } hand[] = {{1, 1, 0}, {2, 1, 0}, {1, 2, 1}, {0, 1, 0}, {0, 2, 0}, {0, 3, 1}, {3, 3, 0}, {3, 4, 1}};
    for (size_t t = 0; t < CD_ARRAY_LEN(hand); t++) {
        f->accuracy(be, 1, 4, 1, sc, &hand[t].label, hand[t].k, 0, 0, &out_c, &out_n);
        CHECK(out_c == hand[t].correct && out_n == 1,
              "accuracy by hand: label %g top %d: %g of %g, expected %g of 1", hand[t].label,
              hand[t].k, out_c, out_n, hand[t].correct);
    }
    /* random, with ties (scores from {0..4}), against the naive count */
    const int shapes[][3] = {{50, 6, 1}, {4, 5, 9}};
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes); s++) {
        int outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2];
        size_t n = (size_t)outer * ch * inner, nl = (size_t)outer * inner;
        float *x = falloc(n), *label = falloc(nl);
        for (size_t j = 0; j < n; j++)
            x[j] = (float)floor(cd_test_uniform(0, 5));
        for (size_t j = 0; j < nl; j++)
            label[j] = (float)floor(cd_test_uniform(0, ch));
        for (int k = 1; k <= 3; k++)
            for (int has_ignore = 0; has_ignore < 2; has_ignore++) {
                long correct = 0, count = 0;
                for (int o = 0; o < outer; o++)
                    for (int i = 0; i < inner; i++) {
                        int l = (int)label[(size_t)o * inner + i];
                        if (has_ignore && l == 0)
                            continue;
                        count++;
                        int greater = 0;
                        for (int c = 0; c < ch; c++)
                            greater += c != l && x[((size_t)o * ch + c) * inner + i] >=
                                                     x[((size_t)o * ch + l) * inner + i];
                        correct += greater < k;
                    }
                f->accuracy(be, outer, ch, inner, x, label, k, has_ignore, 0, &out_c, &out_n);
                CHECK(out_c == correct && out_n == count,
                      "accuracy %dx%dx%d top %d ignore %d: %g of %g, expected %ld of %ld", outer,
                      ch, inner, k, has_ignore, out_c, out_n, correct, count);
            }
        scratch_free();
    }
}

/* ---- batch norm ----------------------------------------------------------------- */

typedef struct bn_case {
    int outer, ch, inner;
    float eps;
    const float *gmean, *gvar; /* NULL: statistics from the batch */
} bn_case;

/* xhat of x with batch statistics (biased variance) or the given global ones. */
static void naive_bn(const void *ctx, const double *x, double *y)
{
    const bn_case *b = ctx;
    for (int c = 0; c < b->ch; c++) {
        double m = 0, v = 0, cnt = (double)b->outer * b->inner;
#define AT(o, i) (((size_t)(o) * b->ch + c) * b->inner + (i))
        if (b->gmean) {
            m = b->gmean[c];
            v = b->gvar[c];
        } else {
            for (int o = 0; o < b->outer; o++)
                for (int i = 0; i < b->inner; i++)
                    m += x[AT(o, i)];
            m /= cnt;
            for (int o = 0; o < b->outer; o++)
                for (int i = 0; i < b->inner; i++)
                    v += (x[AT(o, i)] - m) * (x[AT(o, i)] - m);
            v /= cnt;
        }
        for (int o = 0; o < b->outer; o++)
            for (int i = 0; i < b->inner; i++)
                y[AT(o, i)] = (x[AT(o, i)] - m) / sqrt(v + b->eps);
#undef AT
    }
}

/* bn_normalize of x with (mean, var) against naive_bn of b (batch statistics, or
 * b's global ones), and bn_backward of dy against finite differences of it. */
static void check_bn_pass(const char *what, const bn_case *b, const float *x, const float *mean,
                          const float *var, const float *dy)
{
    const cd_backend_iface *f = be->iface;
    size_t n = (size_t)b->outer * b->ch * b->inner;
    float *y = falloc(n), *dx = frand(n, -1, 1);
    double *ry = dzeros(n), *rdx = dzeros(n);
    const char *stats = b->gmean ? "global statistics" : "batch statistics";
    char w2[320];
    f->bn_normalize(be, b->outer, b->ch, b->inner, x, mean, var, b->eps, y);
    naive_bn(b, to_double(x, n), ry);
    snprintf(w2, sizeof w2, "%s normalize, %s", what, stats);
    check_arr(w2, y, ry, n, 1e-5);
    fd_grad(naive_bn, b, x, n, dy, n, rdx);
    f->bn_backward(be, b->outer, b->ch, b->inner, y, var, b->eps, b->gmean != NULL, dy, dx);
    snprintf(w2, sizeof w2, "%s backward, %s, vs finite differences", what, stats);
    check_arr(w2, dx, rdx, n, RTOL_SUM);
}

static void test_batchnorm(void)
{
    const cd_backend_iface *f = be->iface;
    /* outer, channels, inner, and an offset of x: rows long enough to be summed in memory
     * order, with more runs than a float lane sums before double takes it and a tail
     * (300), short rows of runs and a tail summed a channel at a time, the lanes carried
     * across more rows than a fold takes (40 rows of 33),
     * and a mean 70 deviations from 0, where a one-pass variance without a shift would
     * cancel away four digits */
    const int shapes[][4] = {{5, 3, 4, 0}, {1, 2, 7, 0}, {6, 4, 1, 0}, {3, 5, 300, 0}, {40, 3, 33, 100}};
    char what[160];
    for (size_t s = 0; s < CD_ARRAY_LEN(shapes); s++) {
        int outer = shapes[s][0], ch = shapes[s][1], inner = shapes[s][2], off = shapes[s][3];
        size_t n = (size_t)outer * ch * inner;
        float *x = frand(n, off - 2, off + 3), *dy = frand(n, -1, 1), *mean = falloc(ch), *var = falloc(ch);
        double *rm = dzeros(ch), *rv = dzeros(ch);
        bn_case bc = {outer, ch, inner, 1e-5f, NULL, NULL};

        f->bn_stats(be, outer, ch, inner, x, mean, var);
        for (int c = 0; c < ch; c++) {
            double m = 0, v = 0, cnt = (double)outer * inner;
            for (int o = 0; o < outer; o++)
                for (int i = 0; i < inner; i++)
                    m += x[((size_t)o * ch + c) * inner + i];
            m /= cnt;
            for (int o = 0; o < outer; o++)
                for (int i = 0; i < inner; i++) {
                    double dd = x[((size_t)o * ch + c) * inner + i] - m;
                    v += dd * dd;
                }
            rm[c] = m;
            rv[c] = v / cnt;
        }
        snprintf(what, sizeof what, "bn %dx%dx%d, x in [%d, %d]", outer, ch, inner, off - 2, off + 3);
        char w2[320];
        snprintf(w2, sizeof w2, "%s mean", what);
        check_arr(w2, mean, rm, ch, 1e-5);
        snprintf(w2, sizeof w2, "%s biased variance", what);
        check_arr(w2, var, rv, ch, 1e-5);

        check_bn_pass(what, &bc, x, mean, var, dy);
        /* global statistics: other mean and variance, held fixed */
        float *gm = frand(ch, -1, 1), *gv = frand(ch, 0.5, 2);
        bn_case gc = {outer, ch, inner, 1e-3f, gm, gv};
        check_bn_pass(what, &gc, x, gm, gv, dy);

        scratch_free();
    }
}

/* ---- solvers -------------------------------------------------------------------- */

/* One step of the update for one element, written out per type in double. */
static void naive_step(const cd_update_desc *d, double *w, double *g, double *h1, double *h2)
{
    double gi = *g * d->grad_scale;
    gi += d->reg == CD_REG_L1 ? d->decay * ((*w > 0) - (*w < 0)) : d->decay * *w;
    *g = gi;
    double lr = d->lr, mom = d->momentum, hp, u, t, corr;
    switch (d->type) {
    case CD_SOLVER_SGD:
        *h1 = mom * *h1 + lr * gi;
        *w -= *h1;
        break;
    case CD_SOLVER_NESTEROV:
        hp = *h1;
        *h1 = mom * *h1 + lr * gi;
        *w -= (1 + mom) * *h1 - mom * hp;
        break;
    case CD_SOLVER_ADAGRAD:
        *h1 += gi * gi;
        *w -= lr * gi / (sqrt(*h1) + d->delta);
        break;
    case CD_SOLVER_RMSPROP:
        *h1 = d->rms_decay * *h1 + (1 - d->rms_decay) * gi * gi;
        *w -= lr * gi / (sqrt(*h1) + d->delta);
        break;
    case CD_SOLVER_ADADELTA:
        *h1 = mom * *h1 + (1 - mom) * gi * gi;
        u = gi * sqrt(*h2 + d->delta) / sqrt(*h1 + d->delta);
        *h2 = mom * *h2 + (1 - mom) * u * u;
        *w -= lr * u;
        break;
    case CD_SOLVER_ADAM:
        *h1 = mom * *h1 + (1 - mom) * gi;
        *h2 = d->momentum2 * *h2 + (1 - d->momentum2) * gi * gi;
        t = d->iteration + 1.0;
        corr = sqrt(1 - pow(d->momentum2, t)) / (1 - pow(mom, t));
        *w -= lr * corr * *h1 / (sqrt(*h2) + d->delta);
        break;
    }
}

static void test_solvers(void)
{
    const cd_backend_iface *f = be->iface;
    static const char *names[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};
    size_t n = 40007;
    char what[160];
    for (int type = 0; type < CD_SOLVER_COUNT; type++)
        for (int reg = 0; reg < 2; reg++) {
            cd_update_desc d = {
                .type = type,
                .reg = reg,
                .lr = type == CD_SOLVER_ADADELTA ? 1.0f : 0.05f,
                .momentum = type == CD_SOLVER_ADAM       ? 0.9f
                            : type == CD_SOLVER_ADADELTA ? 0.95f
                                                         : 0.8f,
                .momentum2 = 0.999f,
                .rms_decay = 0.9f,
                .delta = type == CD_SOLVER_ADADELTA ? 1e-6f : 1e-8f,
                .decay = 5e-3f,
                .grad_scale = 0.5f,
            };
            float *w = frand(n, -1, 1), *h1 = falloc(n);
            float *h2 = falloc(n);
            double *rw = dzeros(n), *rg = dzeros(n), *rh1 = dzeros(n), *rh2 = dzeros(n);
            for (int step = 0; step < 3; step++) {
                d.iteration = step;
                float *g = frand(n, -1, 1);
                /* keep the regularized gradient away from 0: AdaGrad and RMSProp divide
                 * it by its own size, so a float-rounded 1e-8 against its double value
                 * would test rounding, not the update */
                for (size_t i = 0; i < n; i++) {
                    double r = g[i] * (double)d.grad_scale +
                               d.decay * (reg ? (w[i] > 0) - (w[i] < 0) : (double)w[i]);
                    if (fabs(r) < 1e-3)
                        g[i] += 0.01f;
                }
                /* each step starts the reference from the backend's float state, so a
                 * weight near 0 has the same sign for L1 in both (the 3 steps still check
                 * that the history and Adam's step count carry over) */
                for (size_t i = 0; i < n; i++) {
                    rw[i] = w[i];
                    rh1[i] = h1[i];
                    rh2[i] = h2[i];
                    rg[i] = g[i];
                    naive_step(&d, &rw[i], &rg[i], &rh1[i], &rh2[i]);
                }
                /* the same step with zero_grad on copies: the same bits, g left zero */
                float *zw = fcopy(w, n), *zg = fcopy(g, n), *zh1 = fcopy(h1, n), *zh2 = fcopy(h2, n);
                cd_update_desc zd = d;
                zd.zero_grad = 1;
                f->update(be, &zd, n, zw, zg, zh1, zh2);
                f->update(be, &d, n, w, g, h1, h2);
                size_t nonzero = 0;
                for (size_t i = 0; i < n; i++)
                    nonzero += zg[i] != 0.0f || signbit(zg[i]);
                CHECK(nonzero == 0 && !memcmp(zw, w, n * sizeof *w) && !memcmp(zh1, h1, n * sizeof *h1) &&
                          !memcmp(zh2, h2, n * sizeof *h2),
                      "%s %s step %d with zero_grad: %zu gradients left nonzero, w %s, history %s",
                      names[type], reg ? "L1" : "L2", step + 1, nonzero,
                      memcmp(zw, w, n * sizeof *w) ? "differs" : "the same",
                      memcmp(zh1, h1, n * sizeof *h1) || memcmp(zh2, h2, n * sizeof *h2) ? "differs" : "the same");
                snprintf(what, sizeof what, "%s %s step %d: w", names[type], reg ? "L1" : "L2",
                         step + 1);
                check_arr(what, w, rw, n, 1e-5);
                snprintf(what, sizeof what, "%s %s step %d: g (regularized)", names[type],
                         reg ? "L1" : "L2", step + 1);
                check_arr(what, g, rg, n, 1e-5);
                snprintf(what, sizeof what, "%s %s step %d: history", names[type],
                         reg ? "L1" : "L2", step + 1);
                check_arr(what, h1, rh1, n, 1e-4);
                if (type == CD_SOLVER_ADADELTA || type == CD_SOLVER_ADAM) {
                    snprintf(what, sizeof what, "%s %s step %d: second history", names[type],
                             reg ? "L1" : "L2", step + 1);
                    check_arr(what, h2, rh2, n, 1e-4);
                }
            }
            scratch_free();
        }
}

/* ---- data preparation ----------------------------------------------------------- */

static void test_prepare_batch(void)
{
    const cd_backend_iface *f = be->iface;
    int n = 4, c = 3, sh = 7, sw = 9, oh = 5, ow = 6;
    size_t ns = (size_t)n * c * sh * sw, nd = (size_t)n * c * oh * ow;
    uint8_t *src = scratch(ns), mirror[4] = {0, CD_FLIP_LR, CD_FLIP_UD, CD_FLIP_LR | CD_FLIP_UD};
    for (size_t i = 0; i < ns; i++)
        src[i] = (uint8_t)(cd_test_rand_u64() & 255);
    int oy[4], ox[4];
    for (int i = 0; i < n; i++) {
        oy[i] = (int)floor(cd_test_uniform(0, sh - oh + 1));
        ox[i] = (int)floor(cd_test_uniform(0, sw - ow + 1));
    }
    oy[0] = 0;
    ox[0] = 0;
    oy[1] = sh - oh;
    ox[1] = sw - ow;
    float *mean = frand((size_t)c * sh * sw, 0, 255), *dst = frand(nd, -1, 1);
    double *ref = dzeros(nd);
    float scale = 0.0125f;
    for (int with_mean = 0; with_mean < 2; with_mean++)
        for (int with_mirror = 0; with_mirror < 2; with_mirror++) {
            for (int i = 0; i < n; i++)
                for (int ch = 0; ch < c; ch++)
                    for (int y = 0; y < oh; y++)
                        for (int x = 0; x < ow; x++) {
                            int flip = with_mirror ? mirror[i] : 0;
                            int sy = flip & CD_FLIP_UD ? oy[i] + oh - 1 - y : oy[i] + y;
                            int sx = flip & CD_FLIP_LR ? ox[i] + ow - 1 - x : ox[i] + x;
                            double v = src[(((size_t)i * c + ch) * sh + sy) * sw + sx];
                            double m = with_mean ? mean[((size_t)ch * sh + sy) * sw + sx] : 0;
                            ref[(((size_t)i * c + ch) * oh + y) * ow + x] = (v - m) * scale;
                        }
            f->prepare_batch(be, n, c, sh, sw, oh, ow, src, oy, ox, with_mirror ? mirror : NULL,
                             with_mean ? mean : NULL, scale, dst);
            check_arr(with_mean ? (with_mirror ? "prepare_batch mean+flips" : "prepare_batch mean")
                                : (with_mirror ? "prepare_batch flips" : "prepare_batch"),
                      dst, ref, nd, RTOL_ELEM);
        }
    scratch_free();
}

int main(void)
{
    static void (*const tests[])(void) = {
        test_memory, test_elementwise, test_max_index, test_power, test_channel_affine,
        test_activations, test_dropout, test_copy_strided, test_gemm, test_conv, test_pool, test_pool_nan,
        test_lrn, test_softmax, test_xent, test_accuracy, test_batchnorm, test_solvers,
        test_prepare_batch,
    };
    return cd_test_main_cpu("test_cpu_ops", 2, &be, tests, CD_ARRAY_LEN(tests));
}
