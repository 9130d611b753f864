/*
 * Elementwise ops on flat arrays: BLAS-1 style arithmetic, eltwise MAX, reductions,
 * power, per-channel affine, activations, dropout and strided copies.
 * Loops over n floats split across threads when n is large (CPU_PAR_MIN).
 */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

// y is (n)
CD_CLONES
void cpu_set(cd_backend_t *be, size_t n, float v, float *y)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = v;
}

// x, y are (n); y may equal x
CD_CLONES
void cpu_scale(cd_backend_t *be, size_t n, float a, const float *x, float *y)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = a * x[i];
}

// x, y are (n)
CD_CLONES
void cpu_axpy(cd_backend_t *be, size_t n, float a, const float *x, float *y)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* y = a*x + b*y; with b == 0, y is not read (it may hold NaN from an earlier use). */
// x, y are (n)
CD_CLONES
void cpu_axpby(cd_backend_t *be, size_t n, float a, const float *x, float b, float *y)
{
    int nt = cpu_threads(be);
    if (b == 0.0f) {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = a * x[i];
        return;
    }
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = a * x[i] + b * y[i];
}

// a, b, y are (n)
CD_CLONES
void cpu_mul(cd_backend_t *be, size_t n, const float *a, const float *b, float *y)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

// a, b, y are (n)
CD_CLONES
void cpu_mul_add(cd_backend_t *be, size_t n, const float *a, const float *b, float *y)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] += a[i] * b[i];
}

/* Eltwise MAX, one input at a time: idx 0 copies, later inputs win only when strictly
 * larger, so ties go to the earliest input (Caffe's rule). */
// x, y, mask are (n)
CD_CLONES
void cpu_max_index(cd_backend_t *be, size_t n, const float *x, float *y, int idx, float *mask)
{
    int nt = cpu_threads(be);
    if (idx == 0) {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++) {
            y[i] = x[i];
            mask[i] = 0.0f;
        }
        return;
    }
    float fidx = (float)idx;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        if (x[i] > y[i]) {
            y[i] = x[i];
            mask[i] = fidx;
        }
    }
}

// dy, mask, dx are (n)
CD_CLONES
void cpu_mask_select(cd_backend_t *be, size_t n, const float *dy, const float *mask, int idx,
                     float *dx)
{
    int nt = cpu_threads(be);
    float fidx = (float)idx;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = mask[i] == fidx ? dy[i] : 0.0f;
}

/* Reductions accumulate in double: the reference should not lose digits on long sums. */
// a, b are (n)
float cpu_dot(cd_backend_t *be, size_t n, const float *a, const float *b)
{
    int nt = cpu_threads(be);
    double s = 0.0;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return (float)s;
}

// x is (n)
float cpu_asum(cd_backend_t *be, size_t n, const float *x)
{
    int nt = cpu_threads(be);
    double s = 0.0;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += fabs((double)x[i]);
    return (float)s;
}

/* y = (shift + scale*x)^power. power 1 and 2 avoid powf; power 0 gives 1 (Caffe). */
// x, y are (n)
CD_CLONES
void cpu_power_forward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                       const float *x, float *y)
{
    int nt = cpu_threads(be);
    if (power == 0.0f) {
        cpu_set(be, n, 1.0f, y);
    } else if (power == 1.0f) {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = shift + scale * x[i];
    } else if (power == 2.0f) {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++) {
            float b = shift + scale * x[i];
            y[i] = b * b;
        }
    } else {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = powf(shift + scale * x[i], power);
    }
}

/* dx = dy * power*scale*(shift+scale*x)^(power-1); exactly 0 when power or scale is 0
 * (the output is constant), never 0*inf. */
// x, dy, dx are (n)
CD_CLONES
void cpu_power_backward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                        const float *x, const float *dy, float *dx)
{
    int nt = cpu_threads(be);
    float ps = power * scale;
    if (ps == 0.0f) {
        cpu_set(be, n, 0.0f, dx);
    } else if (power == 1.0f) {
        cpu_scale(be, n, ps, dy, dx);
    } else if (power == 2.0f) {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            dx[i] = dy[i] * ps * (shift + scale * x[i]);
    } else {
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            dx[i] = dy[i] * ps * powf(shift + scale * x[i], power - 1.0f);
    }
}

/* y[o,c,i] = x[o,c,i]*gamma[c] + beta[c]; gamma NULL means 1, beta NULL means 0. */
// x, y are (outer, channels, inner); gamma, beta are (channels)
CD_CLONES
void cpu_channel_affine(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                        const float *gamma, const float *beta, float *y)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int c = 0; c < channels; c++) {
            size_t base = ((size_t)o * channels + c) * inner;
            float g = gamma ? gamma[c] : 1.0f;
            float b = beta ? beta[c] : 0.0f;
            for (int i = 0; i < inner; i++)
                y[base + i] = x[base + i] * g + b;
        }
    }
}

/* Per-channel sums over (outer, inner): of (a - shift) and of (a - shift) * (b - shift).
 * Runs of CHANNEL_LANES elements go to sixteen float lanes (lane j the run's element j),
 * folded into the double sums by a fixed tree every CHANNEL_FLUSH runs and at the end;
 * a row's tail goes to the double sums in order. So every build gives the same bits (a
 * lane's terms come in one order whatever the vector width), the loads and adds run as
 * float vectors where a double accumulator per channel waited on each add and
 * conversion (BatchNorm's statistics and gradient at 1-2 GB/s), and no float sum has
 * more than CHANNEL_FLUSH terms. */
#define CHANNEL_LANES 16
#define CHANNEL_FLUSH 16
/* rows at least this long are summed in memory order (see cpu_channel_sums) */
#define CHANNEL_ROW_MIN 64
typedef float lanes_f __attribute__((vector_size(8 * sizeof(float))));
typedef float lanes_fu __attribute__((vector_size(8 * sizeof(float)), aligned(4), may_alias));
#pragma GCC diagnostic ignored "-Wpsabi" /* vectors cross only always-inlined calls */

typedef struct lanes_acc {
    lanes_f fa[2], fab[2];
    int runs;
    double s0, s1;
} lanes_acc;

/* the sixteen float lanes' sum in double, in a fixed tree: the same in every build */
CPU_INLINE double lanes_fold(const lanes_f f[2])
{
    float v[CHANNEL_LANES];
    memcpy(v, f, sizeof v);
    double h[CHANNEL_LANES / 2];
    for (int j = 0; j < CHANNEL_LANES / 2; j++)
        h[j] = (double)v[j] + (double)v[j + CHANNEL_LANES / 2];
    return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

CPU_INLINE void lanes_flush(lanes_acc *s)
{
    s->s0 += lanes_fold(s->fa);
    s->s1 += lanes_fold(s->fab);
    s->fa[0] = s->fa[1] = s->fab[0] = s->fab[1] = (lanes_f){0};
    s->runs = 0;
}

/* one row of n elements into the sums; the runs since the last fold carry over to the
 * next row */
CPU_INLINE void lanes_row(lanes_acc *s, const float *ap, const float *bp, int n, float shift)
{
    int i = 0;
    for (; i + CHANNEL_LANES <= n; i += CHANNEL_LANES) {
        for (int k = 0; k < 2; k++) {
            lanes_f u = *(const lanes_fu *)(ap + i + 8 * k) - shift;
            lanes_f v = *(const lanes_fu *)(bp + i + 8 * k) - shift;
            s->fa[k] += u;
            s->fab[k] += u * v;
        }
        if (++s->runs == CHANNEL_FLUSH)
            lanes_flush(s);
    }
    for (; i < n; i++) {
        double u = (double)ap[i] - shift, v = (double)bp[i] - shift;
        s->s0 += u;
        s->s1 += u * v;
    }
}

CPU_INLINE void lanes_total(lanes_acc *s, double out[2])
{
    if (s->runs)
        lanes_flush(s);
    out[0] = s->s0;
    out[1] = s->s1;
}

size_t cpu_channel_sums_space(int outer, int channels, int inner)
{
    size_t rows = inner >= CHANNEL_ROW_MIN ? (size_t)outer * channels : 0;
    return 2 * (rows + (size_t)channels) * (sizeof(double) / sizeof(float));
}

/* sums[2c], sums[2c + 1]: channel c's two sums, shift[c] its shift (shift NULL: 0), b
 * NULL: a. Rows of CHANNEL_ROW_MIN elements or more are summed a row at a time in memory
 * order, each thread a contiguous part of the data as the elementwise ops split it, into
 * part, then each channel's rows added in row order (a channel at a time, each thread
 * read every image's rows, which the other core had just written: 2x slower between
 * the ops of a network than alone). Shorter rows, where a fold per row would cost more
 * than the row, go a channel at a time with the lanes carried from row to row. The bits
 * depend on the shape alone, not on the threads. */
CD_CLONES_V4
void cpu_channel_sums(cd_backend_t *be, int outer, int channels, int inner, const float *a, const float *b,
                      const float *shift, double *work)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
    double *sums = work, *part = work + 2 * (size_t)channels;
    int by_rows = inner >= CHANNEL_ROW_MIN;
    if (!b)
        b = a;
#pragma omp parallel num_threads(nt) if (total > CPU_PAR_MIN)
    {
        if (by_rows) {
#pragma omp for schedule(static)
            for (size_t r = 0; r < (size_t)outer * channels; r++) {
                lanes_acc s = {0};
                size_t at = r * (size_t)inner;
                lanes_row(&s, a + at, b + at, inner, shift ? shift[r % (size_t)channels] : 0.0f);
                lanes_total(&s, part + 2 * r);
            }
        }
#pragma omp for schedule(static)
        for (int c = 0; c < channels; c++) {
            lanes_acc s = {0};
            for (int o = 0; o < outer; o++) {
                size_t row = (size_t)o * channels + c;
                if (by_rows) {
                    s.s0 += part[2 * row];
                    s.s1 += part[2 * row + 1];
                } else {
                    lanes_row(&s, a + row * inner, b + row * inner, inner, shift ? shift[c] : 0.0f);
                }
            }
            lanes_total(&s, sums + 2 * (size_t)c);
        }
    }
}

/* dgamma[c] += sum_{o,i} dy*x; dbeta[c] += sum_{o,i} dy. Either output may be NULL;
 * x is not read (and may be NULL) when dgamma is NULL. */
// x, dy are (outer, channels, inner); dgamma, dbeta are (channels)
void cpu_channel_affine_grad(cd_backend_t *be, int outer, int channels, int inner,
                             const float *x, const float *dy, float *dgamma, float *dbeta)
{
    double *s = (double *)cpu_scratch_acquire(be, cpu_channel_sums_space(outer, channels, inner));
    cpu_channel_sums(be, outer, channels, inner, dy, dgamma ? x : NULL, NULL, s);
    for (int c = 0; c < channels; c++) {
        if (dgamma)
            dgamma[c] += (float)s[2 * c + 1];
        if (dbeta)
            dbeta[c] += (float)s[2 * c];
    }
    cpu_scratch_release(be);
}

/* ---- activations: one forward and one backward per type, in a table ---------- */

typedef void (*act_fwd_fn)(int nt, float slope, size_t n, const float *x, float *y);
typedef void (*act_bwd_fn)(int nt, float slope, size_t n, const float *x, const float *y,
                           const float *dy, float *dx);

CD_CLONES
static void relu_fwd(int nt, float slope, size_t n, const float *x, float *y)
{
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

/* Caffe decides on x > 0. In-place callers pass x == y, where x then holds the
 * output, which is what Caffe reads in place too. */
CD_CLONES
static void relu_bwd(int nt, float slope, size_t n, const float *x, const float *y,
                     const float *dy, float *dx)
{
    const float *ref = x ? x : y;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = ref[i] > 0.0f ? dy[i] : slope * dy[i];
}

CD_CLONES
static void sigmoid_fwd(int nt, float slope, size_t n, const float *x, float *y)
{
    (void)slope;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN / 8) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
}

CD_CLONES
static void sigmoid_bwd(int nt, float slope, size_t n, const float *x, const float *y,
                        const float *dy, float *dx)
{
    (void)slope;
    (void)x;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

CD_CLONES
static void tanh_fwd(int nt, float slope, size_t n, const float *x, float *y)
{
    (void)slope;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN / 8) schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

CD_CLONES
static void tanh_bwd(int nt, float slope, size_t n, const float *x, const float *y,
                     const float *dy, float *dx)
{
    (void)slope;
    (void)x;
#pragma omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

static const struct {
    act_fwd_fn fwd;
    act_bwd_fn bwd;
} act_table[] = {
    [CD_ACT_RELU] = {relu_fwd, relu_bwd},
    [CD_ACT_SIGMOID] = {sigmoid_fwd, sigmoid_bwd},
    [CD_ACT_TANH] = {tanh_fwd, tanh_bwd},
};

#define ACT_COUNT ((int)(sizeof act_table / sizeof act_table[0]))

// x, y are (n); y may equal x
void cpu_act_forward(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y)
{
    if (act < 0 || act >= ACT_COUNT)
        return;
    act_table[act].fwd(cpu_threads(be), slope, n, x, y);
}

// x, y, dy, dx are (n); dx may equal dy
void cpu_act_backward(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                      const float *y, const float *dy, float *dx)
{
    if (act < 0 || act >= ACT_COUNT)
        return;
    act_table[act].bwd(cpu_threads(be), slope, n, x, y, dy, dx);
}

/* Element i is kept when cd_rand_keyed(cd_rand_key(seed, counter), i) >= ratio; mask
 * holds the multiplier 1/(1-ratio) or 0, so the backward is a plain mul(dy, mask).
 * ratio >= 1 drops everything. The generator is the loop's cost, kept small: a 32-bit
 * mix per element (the keyed form, 16 to an AVX-512 vector) and an integer compare of
 * its bits against the ratio. The indices go by blocks of 2^32, each with its key, so
 * the loop's counter is 32 bits wide. */
// x, mask, y are (n)
CD_CLONES_V4
void cpu_dropout_forward(cd_backend_t *be, size_t n, float ratio, uint64_t seed,
                         uint64_t counter, const float *x, float *mask, float *y)
{
    int nt = cpu_threads(be);
    float keep_scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
    uint64_t key = cd_rand_key(seed, counter);
    /* u = bits * 2^-24 exactly, so u >= ratio is bits >= ceil(ratio * 2^24) (exact in
     * double): one integer compare where a conversion and a multiply were */
    double need = ratio <= 0.0f ? 0.0 : ratio <= 1.0f ? ceil((double)ratio * 16777216.0) : 16777216.0;
    uint32_t least = isnan(ratio) ? 16777216u : (uint32_t)need;
    for (size_t base = 0; base < n; base += (size_t)1 << 32) {
        uint64_t bk = cd_rand_block_key(key, base >> 32);
        size_t span = n - base < ((size_t)1 << 32) ? n - base : (size_t)1 << 32;
        uint32_t len = span > UINT32_MAX ? UINT32_MAX : (uint32_t)span;
        const float *xb = x + base;
        float *mb = mask + base, *yb = y + base;
#pragma omp parallel for num_threads(nt) if (len > CPU_PAR_MIN / 8) schedule(static)
        for (uint32_t i = 0; i < len; i++) {
            float m = cd_rand_bits24(bk, i) >= least ? keep_scale : 0.0f;
            mb[i] = m;
            yb[i] = xb[i] * m;
        }
        if (span > len) { /* a whole block's last index, 2^32 - 1 */
            float m = cd_rand_bits24(bk, UINT32_MAX) >= least ? keep_scale : 0.0f;
            mb[UINT32_MAX] = m;
            yb[UINT32_MAX] = xb[UINT32_MAX] * m;
        }
    }
}

/* For o in [0,outer): dst[o*dst_stride + j] (+)= src[o*src_stride + j], j < count. */
// src is (outer, src_stride) viewed, dst is (outer, dst_stride) viewed
CD_CLONES
void cpu_copy_strided(cd_backend_t *be, int outer, size_t count, const float *src,
                      size_t src_stride, float *dst, size_t dst_stride, int accumulate)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * count;
    if (accumulate) {
#pragma omp parallel for num_threads(nt) if (total > CPU_PAR_MIN) schedule(static)
        for (int o = 0; o < outer; o++) {
            const float *s = src + (size_t)o * src_stride;
            float *d = dst + (size_t)o * dst_stride;
            for (size_t j = 0; j < count; j++)
                d[j] += s[j];
        }
        return;
    }
#pragma omp parallel for num_threads(nt) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++)
        memmove(dst + (size_t)o * dst_stride, src + (size_t)o * src_stride, count * sizeof(float));
}
