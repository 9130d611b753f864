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
 *
 * ACROSS runs the way Caffe's CPU layer does: a block of positions of one image walks
 * its channels in order, and each channel's window sum is the previous one's plus the
 * channel entering the window minus the one leaving it (2 planes read per channel
 * instead of size). The block's planes of scale^-beta and ratio stay in the core's
 * cache between the backward's two walks. Where the processor runs AVX-512 and the
 * layer is AlexNet's (size 5, beta 0.75), a column of 16 positions walks the channels
 * with its sums and window in vector registers instead (ACROSS in registers, below),
 * the same bits. WITHIN computes each plane on its own.
 */
#include <math.h>
#include <omp.h>

#include "cpu_internal.h"
#if CD_TARGETS
#include <immintrin.h>
#endif

/* s^-beta; AlexNet's beta = 0.75 (pw075) is worth avoiding powf for, and its form (two
 * square roots and a division) vectorizes. The divider bounds these loops, and AVX-512
 * runs it on 16 floats where AVX2 runs 8: the walks are compiled for it too
 * (CD_CLONES_V4; the same bits, test_simd_bits). 32 images, ms, forward + backward:
 * norm1 (96x55x55) 2.20-2.31 + 4.24-4.38 to 1.70-1.76 + 4.12-4.24, norm2 (256x27x27)
 * 1.44-1.55 + 2.74-2.86 to 0.97-1.00 + 2.42-2.76. A Newton iteration from a bit-level
 * guess (three steps for 2.7 ulp) took 0.40-0.45 ns an element against the divider's
 * 0.22 with AVX-512. */
CPU_INLINE float lrn_pow(float s, float beta, int pw075)
{
    return pw075 ? 1.0f / sqrtf(s * sqrtf(s)) : powf(s, -beta);
}

/* out[p] = s[p]^-beta for p < n. s and out may be the same. */
static void pow_neg_beta(const float *s, float beta, float *out, size_t n)
{
    if (beta == 0.75f) {
        for (size_t p = 0; p < n; p++)
            out[p] = lrn_pow(s[p], beta, 1);
        return;
    }
    for (size_t p = 0; p < n; p++)
        out[p] = lrn_pow(s[p], beta, 0);
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

/* ---- ACROSS ---------------------------------------------------------------------- */

/* Positions per block of the forward: whole planes up to 64x64, where the running
 * sums (16 KB) stay in cache: AlexNet's norm1 (55x55)
 * forward went from 3.9-4.0 to 3.2-3.3 ms with whole planes against blocks of 1024.
 * The forward walks each channel in runs of LRN_SUB positions, asking for the same run
 * of the plane entering the window some channels on before each (2.9-3.0 ms). The
 * backward kept every channel of blocks of 256 positions and asked for the next
 * channel's block of x and dy ahead at once; it now keeps a ring of planes
 * (across_backward), takes whole planes in order and asks for the next channel's runs
 * as the forward does: norm1's backward (32 images) went from 7.6-8.3 to 6.7-7.9 ms
 * and norm2's from 5.7-6.7 to 4.3-4.5 in runs taken in turn (asking for none: 6.9-7.6
 * and 4.6-5.5). Results are the same bits either way. The backward's blocks are now
 * smaller again (bwd_block), with its rings in the first cache. */
#define LRN_FWD_BLOCK 4096
#define LRN_SUB 256

/* Both walks ask for the planes they will read LRN_AHEAD channels on, and for those
 * they will write (y, dx) LRN_AHEAD and LRN_AHEAD_DX channels on, for writing: the
 * host's own prefetchers left each core at about half of the triad's rate. norm2
 * (32x256x27x27, bench_lrn, medians of the per-round ratios of 9 rounds taken in turn):
 * the forward, which asked for x one channel ahead and for no y, 0.85-0.87x; the
 * backward, which asked for x and dy one channel ahead and for no dx, 0.96-0.98x (0.86x
 * in a slow hour). norm1's planes, in runs, asked for these already. A backward that
 * runs step 2 of channel ch - pre in step 1's loop of channel ch (one pass, the same
 * bits) took 17% less time on data in the first cache and more here: 1.02-1.06x. */
#define LRN_AHEAD 2
#define LRN_AHEAD_DX 4

/* acc[j] += sign * v[j]^2 (squares) or sign * v[j], for j < n */
static inline void add_plane(float *restrict acc, const float *restrict v, size_t n, float sign, int squares)
{
    if (squares)
        for (size_t j = 0; j < n; j++)
            acc[j] += sign * (v[j] * v[j]);
    else
        for (size_t j = 0; j < n; j++)
            acc[j] += sign * v[j];
}

/* acc = the window [lo, lo+size) of v's channels (channel ch at v + ch * stride, bn
 * positions), clipped to [0, c) */
static void start_window(const cd_lrn_desc *d, const float *v, size_t stride, int lo, size_t bn, float *acc,
                         int squares)
{
    for (size_t j = 0; j < bn; j++)
        acc[j] = 0.0f;
    for (int ch = lo < 0 ? 0 : lo; ch < lo + d->size && ch < d->c; ch++)
        add_plane(acc, v + (size_t)ch * stride, bn, 1.0f, squares);
}

/* ---- one channel of a walk, in one pass ---------------------------------------------
 * A channel's window sum is the previous channel's with the channel leaving the window
 * taken out and the one entering it added (acc - out^2 + in^2; of ratio, acc - out + in),
 * started whole at channel 0 (start_window). The forward and the backward's first walk
 * slide the window and use it in the same pass (below), where separate passes over the
 * block (window, scale, power, product) each reloaded and stored it: on a batch of 32
 * at 96x55x55 (AlexNet's norm1) the forward went from 8.0 to 4.4 ms and the backward from
 * 11.8 to 10.7. The backward's second step is one pass too (dx_step), now that its
 * channel's planes are in cache from the first (folded into one over blocks of every
 * channel, it took 14 ms). The scale is k + alpha/size * sum, a sum below 0 (the running sum rounding)
 * taken as 0, NaN kept. has_out, has_in and pw075 (lrn_pow) are constants in each
 * call, so the loop has no branch. */

/* the window sum s slid by one channel: less out[j]^2 (has_out), plus in[j]^2 (has_in) */
CPU_INLINE float slide_squares(float s, const float *out, const float *in, size_t j, int has_out, int has_in)
{
    if (has_out)
        s += -1.0f * (out[j] * out[j]);
    if (has_in)
        s += 1.0f * (in[j] * in[j]);
    return s;
}

CPU_INLINE float scale_at(float sum, float k, float a)
{
    return k + a * (sum < 0.0f ? 0.0f : sum);
}

/* y = x * scale^-beta of one channel, acc its window's sum of squares, slid first */
CPU_INLINE void fwd_step(float *restrict acc, const float *restrict out, const float *restrict in,
                         const float *restrict xc, float *restrict yc, size_t bn, float k, float a, float beta,
                         int has_out, int has_in, int pw075)
{
    for (size_t j = 0; j < bn; j++) {
        float s = acc[j] = slide_squares(acc[j], out, in, j, has_out, has_in);
        yc[j] = xc[j] * lrn_pow(scale_at(s, k, a), beta, pw075);
    }
}

/* dysb = dy * scale^-beta and ratio = dy * x * scale^-beta / scale of one channel (step 1
 * of the backward; step 2 needs dy only in dysb, so it reads one plane fewer). With
 * beta = 0.75 both come from t = 1/scale: sb = sqrt(t * sqrt(t)) and
 * ratio = dy * x * sb * t, three operations of the divider where lrn_pow and a division
 * by scale took four (norm1's backward on data in cache, 2 images, AVX2: 0.27-0.29 to
 * 0.23 ms). */
CPU_INLINE void ratio_step(float *restrict acc, const float *restrict out, const float *restrict in,
                           const float *restrict xc, const float *restrict dyc, float *restrict dysb,
                           float *restrict ratio, size_t bn, float k, float a, float beta, int has_out, int has_in,
                           int pw075)
{
    for (size_t j = 0; j < bn; j++) {
        float s = acc[j] = slide_squares(acc[j], out, in, j, has_out, has_in);
        float scale = scale_at(s, k, a);
        if (pw075) {
            float t = 1.0f / scale, b = sqrtf(t * sqrtf(t));
            dysb[j] = dyc[j] * b;
            ratio[j] = dyc[j] * xc[j] * b * t;
        } else {
            float b = lrn_pow(scale, beta, 0);
            dysb[j] = dyc[j] * b;
            ratio[j] = dyc[j] * xc[j] * b / scale;
        }
    }
}

/* dx = dysb - coef * x * sum of one channel (step 2 of the backward), acc the sum of
 * ratio over the mirrored window, slid first: less out[j] (has_out), plus in[j] (has_in).
 * In one pass where sliding and the product took three (norm1's backward 6.4 to 6.0-6.2
 * ms); the sums add in the same order, the same bits. */
CPU_INLINE void dx_step(float *restrict acc, const float *restrict out, const float *restrict in,
                        const float *restrict xc, const float *restrict dysb, float *restrict dxc, size_t bn,
                        float coef, int has_out, int has_in)
{
    for (size_t j = 0; j < bn; j++) {
        float s = acc[j];
        if (has_out)
            s += -1.0f * out[j];
        if (has_in)
            s += 1.0f * in[j];
        acc[j] = s;
        dxc[j] = dysb[j] - coef * xc[j] * s;
    }
}

/* The planes leaving and entering channel ch's window (window starts at lo0 + ch) in v,
 * NULL where outside [0, c) or, for ch = 0, where the window is summed whole instead. */
static void window_ends(const cd_lrn_desc *d, const float *v, size_t stride, int lo0, int ch, const float **out,
                        const float **in)
{
    int o = lo0 + ch - 1, i = o + d->size;
    *out = ch > 0 && o >= 0 && o < d->c ? v + (size_t)o * stride : NULL;
    *in = ch > 0 && i >= 0 && i < d->c ? v + (size_t)i * stride : NULL;
}

/* A call of STEP with has_out, has_in (and pw075, where PW is given) as constants. */
#define LRN_ENDS(out, in, STEP, ...)                                                                            \
    do {                                                                                                       \
        if (out && in)                                                                                         \
            STEP(__VA_ARGS__, 1, 1);                                                                           \
        else if (out)                                                                                          \
            STEP(__VA_ARGS__, 1, 0);                                                                           \
        else if (in)                                                                                           \
            STEP(__VA_ARGS__, 0, 1);                                                                           \
        else                                                                                                   \
            STEP(__VA_ARGS__, 0, 0);                                                                           \
    } while (0)
#define FWD_075(...) fwd_step(__VA_ARGS__, 1)
#define FWD_POW(...) fwd_step(__VA_ARGS__, 0)
#define RATIO_075(...) ratio_step(__VA_ARGS__, 1)
#define RATIO_POW(...) ratio_step(__VA_ARGS__, 0)

/* Asks for the cache lines of v[0, n) ahead of their use (for writing where write). */
CPU_INLINE void prefetch_run(const float *v, size_t n, int write)
{
    const char *p = (const char *)v;
    for (size_t q = 0; q < n * sizeof(float); q += 64) {
        if (write)
            __builtin_prefetch(p + q, 1, 3);
        else
            __builtin_prefetch(p + q, 0, 3);
    }
}

/* ---- ACROSS in registers (AVX-512, size 5, beta 0.75) ----------------------------------
 * The walks above keep their sums and rings in memory: eleven loads and five stores per
 * 16 floats, which bound the backward (with its powers replaced by products it took the
 * same time). Here a column of 16 positions of one image walks every channel with both
 * sums, the six planes of x the two steps read (channels s-3 to s+2 at step s), the six
 * of ratio (s-5 to s) and the three of dysb (s-2 to s) in vector registers: a channel
 * loads x and dy once and stores dx once. Each sum takes the same terms in the same
 * order as the walks, a plane outside [0, c) reading as +0 where the walks skip the term
 * (the sums are never -0, so adding +0 or -0 leaves them as they are): the same bits,
 * which test_simd_bits checks against the walks of the build without target versions.
 * A column alone reads one line of each plane at a time, which memory serves slowly
 * (norm2's backward 2.4 to 5.3 ms); so the columns go in blocks of LRN_REG_BLOCK
 * positions, and while a block walks, each step asks for the next block's lines of its
 * channel, of x and dy, and of dx for writing. Blocks of 32 (two columns) against 16,
 * 48, 64, 128, 256: norm2 (32x256x27x27) 0.52-0.80x of the walks' backward, 16 1.06x,
 * 64 0.90x, 128 1.23x; norm1 (32x96x55x55) 0.60-0.70x. */
#if CD_TARGETS
#define LRN_REG_BLOCK 32

static int lrn_in_registers(const cd_lrn_desc *d)
{
    return d->size == 5 && d->beta == 0.75f && cd_cpu_v4();
}

/* the column of plane q of v under mask m (q in [0, c)), or +0 */
CD_TARGET_V4
static inline __m512 reg_load(const float *v, size_t hw, int q, int c, __mmask16 m)
{
    return q < c ? _mm512_maskz_loadu_ps(m, v + (size_t)q * hw) : _mm512_setzero_ps();
}

/* The scale of step s's window, k + a * its sum of squares, the sum slid in acc by the
 * plane leaving (xm3, channel s-3) and the one entering (xp2, s+2), or started at s = 0
 * (channels 0 to 2), as the walks slide and start it */
CD_TARGET_V4
static inline __m512 reg_scale(int s, __m512 *acc, __m512 xm3, __m512 x0, __m512 xp1, __m512 xp2, __m512 k,
                               __m512 a)
{
    const __m512 zero = _mm512_setzero_ps();
    __m512 in = _mm512_mul_ps(xp2, xp2);
    if (s == 0)
        *acc = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(zero, _mm512_mul_ps(x0, x0)), _mm512_mul_ps(xp1, xp1)), in);
    else
        *acc = _mm512_add_ps(_mm512_sub_ps(*acc, _mm512_mul_ps(xm3, xm3)), in);
    __m512 sum = _mm512_mask_mov_ps(*acc, _mm512_cmp_ps_mask(*acc, zero, _CMP_LT_OQ), zero);
    return _mm512_add_ps(k, _mm512_mul_ps(a, sum));
}

/* One column (the positions of mask m) of x, dy and dx at xb, dyb, dxb through every
 * channel; the next block's line at offset `ask` from x, dy and dx asked for on the way
 * (none where ask is SIZE_MAX). */
CD_TARGET_V4
static inline void reg_column(const cd_lrn_desc *d, size_t hw, const float *x, const float *dy, float *dx,
                              size_t col, __mmask16 m, size_t ask)
{
    const int c = d->c;
    const float *xb = x + col, *dyb = dy + col;
    float *dxb = dx + col;
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f), k = _mm512_set1_ps(d->k);
    const __m512 a = _mm512_set1_ps(d->alpha / (float)d->size);
    const __m512 coef = _mm512_set1_ps(2.0f * d->alpha * d->beta / (float)d->size);
    /* x of channels s-3 .. s+2, ratio of s-5 .. s, dysb of s-2 .. s at step s */
    __m512 xm3 = zero, xm2 = zero, xm1 = zero, x0 = zero, xp1 = reg_load(xb, hw, 0, c, m),
           xp2 = reg_load(xb, hw, 1, c, m);
    __m512 rm5 = zero, rm4 = zero, rm3 = zero, rm2 = zero, rm1 = zero, r0 = zero;
    __m512 sbm2 = zero, sbm1 = zero, sb0 = zero, acc = zero, acc2 = zero;
    for (int s = 0; s < c + 2; s++) {
        if (ask != SIZE_MAX && s < c) {
            size_t q = ask + (size_t)s * hw;
            _mm_prefetch((const char *)(x + q), _MM_HINT_T0);
            _mm_prefetch((const char *)(dy + q), _MM_HINT_T0);
            _mm_prefetch((const char *)(dx + q), _MM_HINT_ET0);
        }
        xm3 = xm2, xm2 = xm1, xm1 = x0, x0 = xp1, xp1 = xp2, xp2 = reg_load(xb, hw, s + 2, c, m);
        rm5 = rm4, rm4 = rm3, rm3 = rm2, rm2 = rm1, rm1 = r0, r0 = zero;
        sbm2 = sbm1, sbm1 = sb0, sb0 = zero;
        if (s < c) { /* step 1 of channel s: the window's scale, its powers */
            __m512 t = _mm512_div_ps(one, reg_scale(s, &acc, xm3, x0, xp1, xp2, k, a));
            __m512 b = _mm512_sqrt_ps(_mm512_mul_ps(t, _mm512_sqrt_ps(t)));
            __m512 dyv = _mm512_maskz_loadu_ps(m, dyb + (size_t)s * hw);
            sb0 = _mm512_mul_ps(dyv, b);
            r0 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dyv, x0), b), t);
        }
        if (s >= 2) { /* step 2 of channel s - 2, whose windows' ratios are all known */
            if (s == 2)
                acc2 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(zero, rm2), rm1), r0);
            else
                acc2 = _mm512_add_ps(_mm512_sub_ps(acc2, rm5), r0);
            __m512 g = _mm512_sub_ps(sbm2, _mm512_mul_ps(_mm512_mul_ps(coef, xm2), acc2));
            _mm512_mask_storeu_ps(dxb + (size_t)(s - 2) * hw, m, g);
        }
    }
}

/* The forward's column: y = x * scale^-0.75 through every channel, as reg_column */
CD_TARGET_V4
static inline void reg_column_fwd(const cd_lrn_desc *d, size_t hw, const float *x, float *y, size_t col,
                                  __mmask16 m, size_t ask)
{
    const int c = d->c;
    const float *xb = x + col;
    float *yb = y + col;
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f), k = _mm512_set1_ps(d->k);
    const __m512 a = _mm512_set1_ps(d->alpha / (float)d->size);
    __m512 xm3 = zero, xm2 = zero, xm1 = zero, x0 = zero, xp1 = reg_load(xb, hw, 0, c, m),
           xp2 = reg_load(xb, hw, 1, c, m), acc = zero;
    for (int s = 0; s < c; s++) {
        if (ask != SIZE_MAX) {
            size_t q = ask + (size_t)s * hw;
            _mm_prefetch((const char *)(x + q), _MM_HINT_T0);
            _mm_prefetch((const char *)(y + q), _MM_HINT_ET0);
        }
        xm3 = xm2, xm2 = xm1, xm1 = x0, x0 = xp1, xp1 = xp2, xp2 = reg_load(xb, hw, s + 2, c, m);
        __m512 scale = reg_scale(s, &acc, xm3, x0, xp1, xp2, k, a);
        __m512 b = _mm512_div_ps(one, _mm512_sqrt_ps(_mm512_mul_ps(scale, _mm512_sqrt_ps(scale))));
        _mm512_mask_storeu_ps(yb + (size_t)s * hw, m, _mm512_mul_ps(x0, b));
    }
}

/* The columns of x in blocks of LRN_REG_BLOCK positions, one task each: the backward's
 * (reg_column) where dy is given, out dx, else the forward's (reg_column_fwd), out y. */
// x, dy, out are (n,c,h,w)
CD_TARGET_V4
static void across_regs(int nt, const cd_lrn_desc *d, const float *x, const float *dy, float *out)
{
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw, blocks = (hw + LRN_REG_BLOCK - 1) / LRN_REG_BLOCK;
    size_t tasks = (size_t)d->n * blocks;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t t = 0; t < tasks; t++) {
        size_t p0 = t % blocks * LRN_REG_BLOCK, p1 = hw - p0 < LRN_REG_BLOCK ? hw : p0 + LRN_REG_BLOCK;
        /* the next task's block: its first position's offset and its length */
        size_t np0 = (t + 1) % blocks * LRN_REG_BLOCK, next = (t + 1) / blocks * chw + np0;
        size_t nlen = t + 1 < tasks ? (hw - np0 < LRN_REG_BLOCK ? hw - np0 : LRN_REG_BLOCK) : 0;
        for (size_t j = p0; j < p1; j += 16) {
            __mmask16 m = hw - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hw - j)) - 1);
            size_t col = t / blocks * chw + j, line = j - p0; /* the next block's line this column asks for */
            size_t ask = line < nlen ? next + line : SIZE_MAX;
            if (dy)
                reg_column(d, hw, x, dy, out, col, m, ask);
            else
                reg_column_fwd(d, hw, x, out, col, m, ask);
        }
    }
}
#endif

/* Each task is a block of positions [p0, p0 + bn) of one image, walking its channels. */
CD_CLONES_V4
static void across_forward(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, float *y)
{
    (void)be;
#if CD_TARGETS
    if (lrn_in_registers(d)) {
        across_regs(nt, d, x, NULL, y);
        return;
    }
#endif
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw, blocks = (hw + LRN_FWD_BLOCK - 1) / LRN_FWD_BLOCK;
    int pre = (d->size - 1) / 2, pw075 = d->beta == 0.75f;
    float a = d->alpha / (float)d->size;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t t = 0; t < (size_t)d->n * blocks; t++) {
        float sum[LRN_FWD_BLOCK];
        size_t p0 = t % blocks * LRN_FWD_BLOCK, bn = hw - p0 < LRN_FWD_BLOCK ? hw - p0 : LRN_FWD_BLOCK;
        const float *xb = x + t / blocks * chw + p0;
        float *yb = y + t / blocks * chw + p0;
        for (int ch = 0; ch < d->c; ch++) {
            const float *out, *in, *xc = xb + (size_t)ch * hw;
            float *yc = yb + (size_t)ch * hw;
            if (ch == 0)
                start_window(d, xb, hw, -pre, bn, sum, 1);
            window_ends(d, xb, hw, -pre, ch, &out, &in);
            /* the plane of x entering the window LRN_AHEAD channels on, and y's plane there */
            int nx = ch + d->size - pre + LRN_AHEAD - 1;
            const float *next = nx < d->c ? xb + (size_t)nx * hw : NULL;
            float *wnext = ch + LRN_AHEAD < d->c ? yb + (size_t)(ch + LRN_AHEAD) * hw : NULL;
            for (size_t j0 = 0; j0 < bn; j0 += LRN_SUB) {
                size_t sn = bn - j0 < LRN_SUB ? bn - j0 : LRN_SUB;
                if (next)
                    prefetch_run(next + j0, sn, 0);
                if (wnext)
                    prefetch_run(wnext + j0, sn, 1);
                const float *o = out ? out + j0 : NULL, *i = in ? in + j0 : NULL;
                if (pw075)
                    LRN_ENDS(o, i, FWD_075, sum + j0, o, i, xc + j0, yc + j0, sn, d->k, a, d->beta);
                else
                    LRN_ENDS(o, i, FWD_POW, sum + j0, o, i, xc + j0, yc + j0, sn, d->k, a, d->beta);
            }
        }
    }
}

/* The backward walks each block's channels once, two steps to a channel: step 1 of
 * channel ch gives dysb = dy * scale^-beta and ratio = dy * x * scale^(-beta-1); step 2
 * of channel ch - pre follows it, as soon as the ratio of every channel whose window
 * holds it is known, and slides the mirrored window over ratio:
 *   dx = dysb - coef * x * (sum of ratio over [ch+pre-size+1, ch+pre]).
 * So dysb and ratio are kept for size + 1 channels only (a ring), and step 2 finds its
 * channel's x still in cache from step 1.
 * The sums add in the order of a walk of step 1 then a walk of step 2: the same bits. */
#define LRN_RING(d) ((d)->size + 1)

/* Positions per block of the backward: whole planes up to LRN_BWD_WHOLE, runs of
 * LRN_BWD_RUN of larger ones, so that a block's rings and sums stay in the core's first
 * cache. norm1 (55x55), whole planes to runs: 2 images in cache, one thread,
 * 0.31 to 0.27 ms (medians of 8 runs taken in turn); AlexNet's bench_net (32 images,
 * two threads), 5.39 to 4.59 ms (medians of 9, 0.90x the median of the runs' ratios).
 * norm2's 27x27 planes stay whole: in runs of 256 they were no faster. */
#define LRN_BWD_WHOLE 1024
#define LRN_BWD_RUN 256

static size_t bwd_block(size_t hw)
{
    return hw <= LRN_BWD_WHOLE ? hw : LRN_BWD_RUN;
}

/* floats per plane of a ring of planes of bs positions: whole cache lines, so that
 * every plane starts on one (norm2's 729 positions unrounded: its backward on 2 images
 * in cache 0.165 to 0.22 ms) */
static size_t ring_stride(size_t bs)
{
    return (bs + 15) / 16 * 16;
}

/* channel q's plane of a ring of planes of `stride` floats */
CPU_INLINE float *ring_plane(float *ring, size_t stride, int slots, int q)
{
    return ring + (size_t)(q % slots) * stride;
}

CD_CLONES_V4
static void across_backward(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, const float *dy,
                            float *dx)
{
#if CD_TARGETS
    if (lrn_in_registers(d)) {
        across_regs(nt, d, x, dy, dx);
        return;
    }
#endif
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw;
    size_t bs = bwd_block(hw), blocks = (hw + bs - 1) / bs;
    const int slots = LRN_RING(d);
    size_t rs = ring_stride(bs), per = (size_t)2 * slots * rs;
    int pre = (d->size - 1) / 2, pw075 = d->beta == 0.75f;
    float a = d->alpha / (float)d->size, coef = 2.0f * d->alpha * d->beta / (float)d->size;
    float *ws = cpu_scratch_acquire(be, per * (size_t)nt);
#pragma omp parallel num_threads(nt)
    {
        float *dysb_ring = ws + per * (size_t)omp_get_thread_num(), *ratio_ring = dysb_ring + per / 2;
#pragma omp for schedule(static)
        for (size_t t = 0; t < (size_t)d->n * blocks; t++) {
            float acc[LRN_BWD_WHOLE], acc2[LRN_BWD_WHOLE];
            size_t p0 = t % blocks * bs, bn = hw - p0 < bs ? hw - p0 : bs;
            size_t off = t / blocks * chw + p0;
            const float *xb = x + off, *dyb = dy + off;
            /* the windows holding ch start at ch + pre - size + 1 */
            const int lo2 = pre - d->size + 1;
            for (int step = 0; step < d->c + pre; step++) {
                int ch = step;
                if (ch < d->c) { /* step 1 of channel ch */
                    float *dysb = ring_plane(dysb_ring, rs, slots, ch);
                    float *ratio = ring_plane(ratio_ring, rs, slots, ch);
                    const float *out, *in, *xc = xb + (size_t)ch * hw, *dyc = dyb + (size_t)ch * hw;
                    if (ch == 0)
                        start_window(d, xb, hw, -pre, bn, acc, 1);
                    window_ends(d, xb, hw, -pre, ch, &out, &in);
                    /* x entering the window LRN_AHEAD channels on, dy there, and dx LRN_AHEAD_DX
                     * channels past the one step 2 writes */
                    int nx = ch + d->size - pre + LRN_AHEAD - 1, wx = ch - pre + LRN_AHEAD_DX;
                    const float *next = nx < d->c ? xb + (size_t)nx * hw : NULL;
                    const float *dnext = ch + LRN_AHEAD < d->c ? dyb + (size_t)(ch + LRN_AHEAD) * hw : NULL;
                    float *wnext = wx >= 0 && wx < d->c ? dx + off + (size_t)wx * hw : NULL;
                    for (size_t j0 = 0; j0 < bn; j0 += LRN_SUB) {
                        size_t sn = bn - j0 < LRN_SUB ? bn - j0 : LRN_SUB;
                        if (next)
                            prefetch_run(next + j0, sn, 0);
                        if (dnext)
                            prefetch_run(dnext + j0, sn, 0);
                        if (wnext)
                            prefetch_run(wnext + j0, sn, 1);
                        const float *o = out ? out + j0 : NULL, *i = in ? in + j0 : NULL;
                        if (pw075)
                            LRN_ENDS(o, i, RATIO_075, acc + j0, o, i, xc + j0, dyc + j0, dysb + j0, ratio + j0,
                                     sn, d->k, a, d->beta);
                        else
                            LRN_ENDS(o, i, RATIO_POW, acc + j0, o, i, xc + j0, dyc + j0, dysb + j0, ratio + j0,
                                     sn, d->k, a, d->beta);
                    }
                }
                ch = step - pre;
                if (ch < 0)
                    continue;
                /* step 2 of channel ch: ratio is known up to channel ch + pre */
                const float *dysb = ring_plane(dysb_ring, rs, slots, ch), *xc = xb + (size_t)ch * hw;
                float *dxc = dx + off + (size_t)ch * hw;
                const float *ro = NULL, *ri = NULL; /* leaving and entering the window */
                if (ch == 0) {
                    for (size_t j = 0; j < bn; j++)
                        acc2[j] = 0.0f;
                    for (int q = lo2 < 0 ? 0 : lo2; q < lo2 + d->size && q < d->c; q++)
                        add_plane(acc2, ring_plane(ratio_ring, rs, slots, q), bn, 1.0f, 0);
                } else {
                    int o = lo2 + ch - 1, i = o + d->size;
                    ro = o >= 0 && o < d->c ? ring_plane(ratio_ring, rs, slots, o) : NULL;
                    ri = i >= 0 && i < d->c ? ring_plane(ratio_ring, rs, slots, i) : NULL;
                }
                LRN_ENDS(ro, ri, dx_step, acc2, ro, ri, xc, dysb, dxc, bn, coef);
            }
        }
    }
    cpu_scratch_release(be);
}

/* ---- WITHIN ---------------------------------------------------------------------- */

/* each plane needs hw floats for its scale: one slice of the scratch per thread */
CD_CLONES_V4
static void within_forward(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, float *y)
{
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw;
    float *ws = cpu_scratch_acquire(be, (size_t)nt * hw);
#pragma omp parallel num_threads(nt)
    {
        float *scale = ws + (size_t)omp_get_thread_num() * hw;
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < d->n; i++) {
            for (int ch = 0; ch < d->c; ch++) {
                size_t off = (size_t)i * chw + (size_t)ch * hw;
                within_scale(d, x + (size_t)i * chw, ch, scale);
                pow_neg_beta(scale, d->beta, scale, hw);
                for (size_t p = 0; p < hw; p++)
                    y[off + p] = x[off + p] * scale[p];
            }
        }
    }
    cpu_scratch_release(be);
}

/* Images go in chunks whose scale^-beta and ratio planes fit the conv workspace bound. */
CD_CLONES_V4
static void within_backward(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, const float *dy,
                            float *dx)
{
    size_t hw = (size_t)d->h * d->w, chw = (size_t)d->c * hw;
    size_t fit = CPU_CONV_WORKSPACE_BYTES / sizeof(float) / (2 * chw);
    int nb = fit < 1 ? 1 : fit > (size_t)d->n ? d->n : (int)fit;
    float *ws = cpu_scratch_acquire(be, 2 * chw * nb);
    float *sb_all = ws, *ratio_all = ws + chw * nb;
    float coef = 2.0f * d->alpha * d->beta / (float)(d->size * d->size);
    for (int i0 = 0; i0 < d->n; i0 += nb) {
        int cnt = d->n - i0 < nb ? d->n - i0 : nb;
        /* pass 1: sb = scale^-beta and ratio = dy * x * scale^(-beta-1) of every plane */
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
        for (int b = 0; b < cnt; b++) {
            for (int ch = 0; ch < d->c; ch++) {
                size_t off = (size_t)b * chw + (size_t)ch * hw;
                size_t goff = (size_t)i0 * chw + off;
                float *sb = sb_all + off, *ratio = ratio_all + off;
                within_scale(d, x + (size_t)(i0 + b) * chw, ch, ratio);
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
                within_window_sum(d, ratio_all + (size_t)b * chw, ch, g);
                for (size_t p = 0; p < hw; p++)
                    g[p] = dy[goff + p] * sb[p] - coef * x[goff + p] * g[p];
            }
        }
    }
    cpu_scratch_release(be);
}

static const struct {
    void (*forward)(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, float *y);
    void (*backward)(cd_backend_t *be, int nt, const cd_lrn_desc *d, const float *x, const float *dy, float *dx);
} lrn_table[] = {
    [CD_LRN_ACROSS] = {across_forward, across_backward},
    [CD_LRN_WITHIN] = {within_forward, within_backward},
};

#define LRN_MODES ((int)(sizeof lrn_table / sizeof lrn_table[0]))

static int lrn_runs(const cd_lrn_desc *d)
{
    return d->mode >= 0 && d->mode < LRN_MODES && d->n > 0 && d->c > 0 && d->h > 0 && d->w > 0;
}

/* y = x * scale^-beta. x and y must not overlap (the window reads other channels). */
// x, y are (n,c,h,w)
void cpu_lrn_forward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y)
{
    if (lrn_runs(d))
        lrn_table[d->mode].forward(be, cpu_threads(be), d, x, y);
}

/* dx is overwritten and must not overlap x or dy. y is not read: the scale is
 * recomputed from x, so the gradient is exact for the forward computed here. */
// x, y, dy, dx are (n,c,h,w)
void cpu_lrn_backward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, const float *y,
                      const float *dy, float *dx)
{
    (void)y;
    if (lrn_runs(d))
        lrn_table[d->mode].backward(be, cpu_threads(be), d, x, dy, dx);
}
