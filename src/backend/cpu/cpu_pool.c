/*
 * MAX and AVE pooling with Caffe's window rules. Output (oy, ox) covers rows
 * [oy*sh - ph, oy*sh - ph + kh) and columns likewise:
 *  - MAX looks at the part inside the image and takes the first maximum in a
 *    row-major scan (later equal values do not replace it); the backward finds that
 *    position again from x and routes dy there.
 *  - AVE sums the part inside the image and divides by the window clipped to the
 *    padded image [-ph, h+ph) (padded cells count as zeros).
 * A window with no cell inside the image (possible only when stride > kernel, which
 * Caffe never guards) outputs 0 and passes no gradient.
 * One thread owns each (image, channel) plane in both directions.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "cpu_internal.h"

#if CD_TARGETS
#include <immintrin.h>
#endif

typedef struct pool_window {
    int hs, he, ws, we; /* the part inside the image: [hs,he) x [ws,we) */
    int size;           /* AVE divisor: the window clipped to the padded image */
} pool_window;

static inline pool_window pool_window_at(const cd_pool_desc *d, int oy, int ox)
{
    pool_window pw;
    int hs = oy * d->sh - d->ph, ws = ox * d->sw - d->pw;
    int he = hs + d->kh, we = ws + d->kw;
    if (he > d->h + d->ph)
        he = d->h + d->ph;
    if (we > d->w + d->pw)
        we = d->w + d->pw;
    pw.size = (he - hs) * (we - ws);
    pw.hs = hs < 0 ? 0 : hs;
    pw.ws = ws < 0 ? 0 : ws;
    pw.he = he > d->h ? d->h : he;
    pw.we = we > d->w ? d->w : we;
    return pw;
}

static inline int pool_window_empty(const pool_window *pw)
{
    return pw->hs >= pw->he || pw->ws >= pw->we;
}

/* The index (within the plane) of the first maximum of the window. */
static inline int pool_argmax(const float *x, int w, const pool_window *pw)
{
    int best = pw->hs * w + pw->ws;
    float m = x[best];
    for (int yy = pw->hs; yy < pw->he; yy++)
        for (int xx = pw->ws; xx < pw->we; xx++)
            if (x[yy * w + xx] > m) {
                m = x[yy * w + xx];
                best = yy * w + xx;
            }
    return best;
}

/* MAX at output (oy, ox) of one plane by the clipped scan: its value, and its backward
 * (dy routed to the first maximum). */
static inline float max_at(const cd_pool_desc *d, const float *x, int oy, int ox)
{
    pool_window pw = pool_window_at(d, oy, ox);
    return pool_window_empty(&pw) ? 0.0f : x[pool_argmax(x, d->w, &pw)];
}

static inline void max_route_at(const cd_pool_desc *d, const float *x, const float *dy, float *dx, int oy, int ox)
{
    pool_window pw = pool_window_at(d, oy, ox);
    if (!pool_window_empty(&pw))
        dx[pool_argmax(x, d->w, &pw)] += dy[oy * d->ow + ox];
}

// x is (h,w) of one plane; y is (oh,ow)
CD_CLONES
static void ave_plane_fwd(const cd_pool_desc *d, const float *x, float *y)
{
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            pool_window pw = pool_window_at(d, oy, ox);
            float s = 0.0f;
            for (int yy = pw.hs; yy < pw.he; yy++)
                for (int xx = pw.ws; xx < pw.we; xx++)
                    s += x[yy * d->w + xx];
            y[oy * d->ow + ox] = pool_window_empty(&pw) ? 0.0f : s / (float)pw.size;
        }
}

// dx is (h,w) of one plane, overwritten; dy is (oh,ow)
CD_CLONES
static void ave_plane_bwd(const cd_pool_desc *d, const float *x, const float *dy, float *dx)
{
    (void)x;
    memset(dx, 0, (size_t)d->h * d->w * sizeof(float));
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            pool_window pw = pool_window_at(d, oy, ox);
            if (pool_window_empty(&pw))
                continue;
            float g = dy[oy * d->ow + ox] / (float)pw.size;
            for (int yy = pw.hs; yy < pw.he; yy++)
                for (int xx = pw.ws; xx < pw.we; xx++)
                    dx[yy * d->w + xx] += g;
        }
}

/* AVE 2x2 stride 2 without padding on a plane of even height and width: each window is
 * 4 cells no other window shares, so the forward is the general loop's sum in its order
 * divided by 4, and the backward writes each cell once, 0 + dy / 4, with no zeroing
 * pass: the same bits as ave_plane_fwd and ave_plane_bwd (0 + first term keeps the sign
 * of a zero as theirs does), where their window loops ran at 8% of the triad. */
static int ave_2x2(const cd_pool_desc *d)
{
    return d->mode == CD_POOL_AVE && d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 &&
           d->pw == 0 && d->h % 2 == 0 && d->w % 2 == 0;
}

// x is (h,w) of one plane; y is (h/2,w/2)
CD_CLONES
static void ave2_plane_fwd(const cd_pool_desc *d, const float *restrict x, float *restrict y)
{
    int w = d->w, ow = d->ow;
    for (int oy = 0; oy < d->oh; oy++) {
        const float *r0 = x + (size_t)2 * oy * w, *r1 = r0 + w;
        float *yr = y + (size_t)oy * ow;
        for (int ox = 0; ox < ow; ox++)
            yr[ox] = (0.0f + r0[2 * ox] + r0[2 * ox + 1] + r1[2 * ox] + r1[2 * ox + 1]) / 4.0f;
    }
}

// dx is (h,w) of one plane, overwritten; dy is (h/2,w/2)
CD_CLONES
static void ave2_plane_bwd(const cd_pool_desc *d, const float *x, const float *restrict dy, float *restrict dx)
{
    (void)x;
    int w = d->w, ow = d->ow;
    for (int oy = 0; oy < d->oh; oy++) {
        float *r0 = dx + (size_t)2 * oy * w, *r1 = r0 + w;
        const float *dyr = dy + (size_t)oy * ow;
        for (int ox = 0; ox < ow; ox++) {
            float g = 0.0f + dyr[ox] / 4.0f;
            r0[2 * ox] = r0[2 * ox + 1] = r1[2 * ox] = r1[2 * ox + 1] = g;
        }
    }
}

/* GCC's vector types, compiled for each target of CD_CLONES: 8 floats or ints. */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));
typedef uint8_t v32u8 __attribute__((vector_size(32)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));
typedef uint64_t v2u64 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
#define SEP_LANES 8
/* the helpers below return vectors but are always inlined: no call crosses the ABI GCC
 * warns about for the baseline clone */
#pragma GCC diagnostic ignored "-Wpsabi"

CPU_INLINE v8f load8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

CPU_INLINE v8f select8(v8i take, v8f a, v8f b)
{
    return (v8f)(((v8i)a & take) | ((v8i)b & ~take));
}

/* AVE pooling over the whole plane (global pooling, no pad): the plane's sum in sixteen
 * float lanes (lane j the cells 16m + j, in order) added in a fixed tree, then the
 * cells past the last sixteen in order, over the plane's size; the backward writes
 * 0 + dy / size to every cell. The sum's order is this path's own (the general loop
 * adds the cells one at a time, 30% of the triad on 16x16 planes): the same in every
 * build, and every global AVE pooling takes it. */
static int ave_global(const cd_pool_desc *d)
{
    return d->mode == CD_POOL_AVE && d->kh == d->h && d->kw == d->w && d->ph == 0 && d->pw == 0;
}

// x is (h,w) of one plane; y is (1,1)
CD_CLONES
static void ave_global_fwd(const cd_pool_desc *d, const float *x, float *y)
{
    int n = d->h * d->w, i = 0;
    v8f s[2] = {{0}};
    for (; i + 16 <= n; i += 16) {
        s[0] += load8(x + i);
        s[1] += load8(x + i + 8);
    }
    float v[16];
    memcpy(v, s, sizeof v);
    float t = ((v[0] + v[8]) + (v[4] + v[12])) + ((v[2] + v[10]) + (v[6] + v[14])) +
              (((v[1] + v[9]) + (v[5] + v[13])) + ((v[3] + v[11]) + (v[7] + v[15])));
    for (; i < n; i++)
        t += x[i];
    y[0] = t / (float)n;
}

// dx is (h,w) of one plane, overwritten; dy is (1,1)
CD_CLONES
static void ave_global_bwd(const cd_pool_desc *d, const float *x, const float *dy, float *dx)
{
    (void)x;
    int n = d->h * d->w;
    float g = 0.0f + dy[0] / (float)n;
    for (int i = 0; i < n; i++)
        dx[i] = g;
}

/*
 * MAX 2x2 stride 2 without padding (LeNet's, VGG's): every window that lies inside the
 * image is 4 cells no other window shares, so the forward is a branch-free max of 4
 * and the backward writes each cell once (dy at the first maximum, 0 elsewhere) with
 * no zeroing pass. The last row and column of an odd-sized plane (Caffe's rounded-up
 * windows) go through the general code.
 */
static int max_2x2(const cd_pool_desc *d)
{
    return d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0;
}

/* the window a b over c e (p0 = a b, p1 = c e): its first maximum in row-major order,
 * as pool_argmax finds it, and (at) which of the four it is */
CPU_INLINE float max4_first(const float *p0, const float *p1, int *at)
{
    float a = p0[0], b = p0[1], c = p1[0], e = p1[1];
    int k = b > a ? 1 : 0;
    float m = b > a ? b : a;
    k = c > m ? 2 : k;
    m = c > m ? c : m;
    *at = e > m ? 3 : k;
    return e > m ? e : m;
}

CD_CLONES
static void max2_plane_fwd(const cd_pool_desc *d, const float *x, float *y)
{
    int fh = d->h / 2, fw = d->w / 2, w = d->w;
    for (int oy = 0; oy < fh; oy++) {
        const float *r0 = x + (size_t)2 * oy * w, *r1 = r0 + w;
        float *out = y + (size_t)oy * d->ow;
#pragma omp simd
        for (int ox = 0; ox < fw; ox++) {
            float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], e = r1[2 * ox + 1];
            float m = b > a ? b : a;
            m = c > m ? c : m;
            out[ox] = e > m ? e : m;
        }
    }
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = oy < fh ? fw : 0; ox < d->ow; ox++)
            y[oy * d->ow + ox] = max_at(d, x, oy, ox);
}

#ifdef __SSE2__
/* Four windows of a row pair at a time (x86-64's baseline SSE2): the cells are split
 * into the windows' a b / c e planes, the first maximum chosen by masks, and the
 * gradient rows written back interleaved with contiguous stores. Returns the windows
 * done (a multiple of 4). */
static int max2_row_bwd_sse(const float *r0, const float *r1, const float *g, float *d0, float *d1, int fw)
{
    int ox = 0;
    for (; ox + 4 <= fw; ox += 4) {
        __m128 t0 = _mm_loadu_ps(r0 + 2 * ox), t1 = _mm_loadu_ps(r0 + 2 * ox + 4);
        __m128 u0 = _mm_loadu_ps(r1 + 2 * ox), u1 = _mm_loadu_ps(r1 + 2 * ox + 4);
        __m128 a = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 c = _mm_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)), e = _mm_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 mb = _mm_cmpgt_ps(b, a);
        __m128 m = _mm_or_ps(_mm_and_ps(mb, b), _mm_andnot_ps(mb, a));
        __m128 mc = _mm_cmpgt_ps(c, m);
        m = _mm_or_ps(_mm_and_ps(mc, c), _mm_andnot_ps(mc, m));
        __m128 me = _mm_cmpgt_ps(e, m);
        __m128 gv = _mm_loadu_ps(g + ox);
        __m128 ve = _mm_and_ps(me, gv);
        __m128 rest = _mm_andnot_ps(me, gv);       /* g where e is not the maximum */
        __m128 vc = _mm_and_ps(mc, rest);
        rest = _mm_andnot_ps(mc, rest);            /* ... nor c */
        __m128 vb = _mm_and_ps(mb, rest);
        __m128 va = _mm_andnot_ps(mb, rest);
        _mm_storeu_ps(d0 + 2 * ox, _mm_unpacklo_ps(va, vb));
        _mm_storeu_ps(d0 + 2 * ox + 4, _mm_unpackhi_ps(va, vb));
        _mm_storeu_ps(d1 + 2 * ox, _mm_unpacklo_ps(vc, ve));
        _mm_storeu_ps(d1 + 2 * ox + 4, _mm_unpackhi_ps(vc, ve));
    }
    return ox;
}
#endif

CD_CLONES
static void max2_plane_bwd(const cd_pool_desc *d, const float *x, const float *dy, float *dx)
{
    int fh = d->h / 2, fw = d->w / 2, w = d->w;
    for (int oy = 0; oy < fh; oy++) {
        const float *r0 = x + (size_t)2 * oy * w, *r1 = r0 + w;
        float *d0 = dx + (size_t)2 * oy * w, *d1 = d0 + w;
        const float *g = dy + (size_t)oy * d->ow;
        int done = 0;
#ifdef __SSE2__
        done = max2_row_bwd_sse(r0, r1, g, d0, d1, fw);
#endif
        for (int ox = done; ox < fw; ox++) {
            int k;
            max4_first(r0 + 2 * ox, r1 + 2 * ox, &k);
            d0[2 * ox] = k == 0 ? g[ox] : 0.0f;
            d0[2 * ox + 1] = k == 1 ? g[ox] : 0.0f;
            d1[2 * ox] = k == 2 ? g[ox] : 0.0f;
            d1[2 * ox + 1] = k == 3 ? g[ox] : 0.0f;
        }
    }
    /* the cells no full window covers: the last column and row of odd sides */
    for (int yy = 0; yy < 2 * fh; yy++)
        for (int xx = 2 * fw; xx < d->w; xx++)
            dx[yy * w + xx] = 0.0f;
    for (int yy = 2 * fh; yy < d->h; yy++)
        memset(dx + (size_t)yy * w, 0, (size_t)w * sizeof(float));
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = oy < fh ? fw : 0; ox < d->ow; ox++)
            max_route_at(d, x, dy, dx, oy, ox);
}

/*
 * 2x2 stride 2 on planes of even sides, the batch taken whole: with no row or column
 * left over, the planes stacked are one image of n*c*h rows whose row pairs each give
 * one output row, and the outputs of consecutive row pairs follow each other. Eight
 * windows at a time, from a top row of 16 cells (two runs of 8, p0 and p1) and the bottom
 * row under them (q0, q1): one row pair's 16 columns where its outputs come in eights,
 * or two row pairs' 8 columns each where they come in fours (LeNet's pool2, 8x8 planes),
 * so that no plane is too narrow for the vectors. The first maximum is taken as
 * max2_plane_* take it: b, then c, then e replace the running maximum only when
 * greater. Other shapes go plane by plane.
 */
static int max2_tall(const cd_pool_desc *d)
{
    return max_2x2(d) && d->h % 2 == 0 && d->w % 2 == 0 && (d->ow % SEP_LANES == 0 || d->ow == SEP_LANES / 2);
}

/* the cells of 8 windows: a b over c e */
typedef struct quad8 {
    v8f a, b, c, e;
} quad8;

CPU_INLINE quad8 quad8_load(const float *p0, const float *p1, const float *q0, const float *q1)
{
    v8f t0 = load8(p0), t1 = load8(p1), u0 = load8(q0), u1 = load8(q1);
    return (quad8){__builtin_shufflevector(t0, t1, 0, 2, 4, 6, 8, 10, 12, 14),
                   __builtin_shufflevector(t0, t1, 1, 3, 5, 7, 9, 11, 13, 15),
                   __builtin_shufflevector(u0, u1, 0, 2, 4, 6, 8, 10, 12, 14),
                   __builtin_shufflevector(u0, u1, 1, 3, 5, 7, 9, 11, 13, 15)};
}

CPU_INLINE void max2x8_fwd(const float *p0, const float *p1, const float *q0, const float *q1, float *y)
{
    quad8 v = quad8_load(p0, p1, q0, q1);
    v8f m = select8(v.b > v.a, v.b, v.a);
    m = select8(v.c > m, v.c, m);
    m = select8(v.e > m, v.e, m);
    memcpy(y, &m, sizeof m);
}

/* g routed to each window's first maximum, the other cells 0; dx at the cells' offsets
 * from x (dx - x) */
CPU_INLINE void max2x8_bwd(const float *p0, const float *p1, const float *q0, const float *q1, const float *g,
                           ptrdiff_t dx)
{
    quad8 v = quad8_load(p0, p1, q0, q1);
    v8i mb = v.b > v.a;
    v8f m = select8(mb, v.b, v.a);
    v8i mc = v.c > m;
    m = select8(mc, v.c, m);
    v8i me = v.e > m;
    v8i gv, rest;
    memcpy(&gv, g, sizeof gv);
    v8i ve = me & gv;
    rest = ~me & gv; /* g where e is not the maximum */
    v8i vc = mc & rest;
    rest = ~mc & rest; /* ... nor c */
    v8i vb = mb & rest, va = ~mb & rest;
    v8i r[4] = {__builtin_shufflevector(va, vb, 0, 8, 1, 9, 2, 10, 3, 11),
                __builtin_shufflevector(va, vb, 4, 12, 5, 13, 6, 14, 7, 15),
                __builtin_shufflevector(vc, ve, 0, 8, 1, 9, 2, 10, 3, 11),
                __builtin_shufflevector(vc, ve, 4, 12, 5, 13, 6, 14, 7, 15)};
    memcpy((float *)p0 + dx, &r[0], sizeof r[0]);
    memcpy((float *)p1 + dx, &r[1], sizeof r[1]);
    memcpy((float *)q0 + dx, &r[2], sizeof r[2]);
    memcpy((float *)q1 + dx, &r[3], sizeof r[3]);
}

/* The windows of row pairs [k0, k1) of the stacked planes: forward (dx 0, y written)
 * or backward (dy routed, dx - x given). Where the outputs come in fours, an odd last
 * row pair goes through the scalar code (one plane's last, of the planes' own). */
CD_CLONES
static void max2_tall_rows(const cd_pool_desc *d, const float *x, float *y, const float *dy, ptrdiff_t dx,
                           size_t k0, size_t k1)
{
    const size_t w = (size_t)d->w, ow = (size_t)d->ow;
    if (ow % SEP_LANES == 0) {
        for (size_t k = k0; k < k1; k++) {
            const float *r0 = x + 2 * k * w, *r1 = r0 + w;
            for (size_t j = 0; j < ow; j += SEP_LANES) {
                const float *p0 = r0 + 2 * j, *q0 = r1 + 2 * j;
                if (dy)
                    max2x8_bwd(p0, p0 + SEP_LANES, q0, q0 + SEP_LANES, dy + k * ow + j, dx);
                else
                    max2x8_fwd(p0, p0 + SEP_LANES, q0, q0 + SEP_LANES, y + k * ow + j);
            }
        }
        return;
    }
    size_t k = k0;
    for (; k + 2 <= k1; k += 2) { /* w == 8: rows 2k .. 2k+3 */
        const float *r = x + 2 * k * w;
        if (dy)
            max2x8_bwd(r, r + 2 * w, r + w, r + 3 * w, dy + k * ow, dx);
        else
            max2x8_fwd(r, r + 2 * w, r + w, r + 3 * w, y + k * ow);
    }
    for (; k < k1; k++) {
        const float *r0 = x + 2 * k * w, *r1 = r0 + w;
        for (size_t j = 0; j < ow; j++) {
            int at;
            float m = max4_first(r0 + 2 * j, r1 + 2 * j, &at);
            if (!dy) {
                y[k * ow + j] = m;
                continue;
            }
            float *d0 = (float *)r0 + dx + 2 * j, *d1 = (float *)r1 + dx + 2 * j;
            float g = dy[k * ow + j];
            d0[0] = at == 0 ? g : 0.0f;
            d0[1] = at == 1 ? g : 0.0f;
            d1[0] = at == 2 ? g : 0.0f;
            d1[1] = at == 3 ? g : 0.0f;
        }
    }
}

/* all the planes' row pairs, split evenly (in pairs where outputs come in fours) over
 * the threads */
static void max2_tall_batch(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y, const float *dy,
                      float *dx)
{
    size_t pairs = (size_t)d->n * d->c * (size_t)(d->h / 2), unit = d->ow % SEP_LANES == 0 ? 1 : 2;
    size_t units = (pairs + unit - 1) / unit;
    ptrdiff_t off = dx ? dx - x : 0;
    int nt = cpu_threads(be);
    if ((size_t)d->n * d->c * d->h * d->w <= CPU_PAR_MIN / 4)
        nt = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        size_t u0 = units * (size_t)t / (size_t)n, u1 = units * (size_t)(t + 1) / (size_t)n;
        size_t k1 = u1 * unit < pairs ? u1 * unit : pairs;
        max2_tall_rows(d, x, y, dy, off, u0 * unit, k1);
    }
}

/*
 * MAX of any shape (pool_table's entry; 2x2 stride 2 takes max2_plane_* above instead):
 * the windows that lie wholly inside the image, outputs [ylo, yhi) x [xlo, xhi), go
 * through loops with no clipping and a branch-free scan (the first maximum kept by a
 * strict >, as pool_argmax keeps it); the border windows through max_at and
 * max_route_at.
 */
typedef struct pool_inner {
    int ylo, yhi, xlo, xhi;
} pool_inner;

/* the outputs o in [lo, hi) along one axis whose window [o*s - p, o*s - p + k) is in [0, n) */
static void inner_range(int n, int k, int s, int p, int on, int *lo, int *hi)
{
    int a = (p + s - 1) / s, b = n + p - k < 0 ? 0 : (n + p - k) / s + 1;
    *lo = a < on ? a : on;
    *hi = b < *lo ? *lo : b > on ? on : b;
}

static pool_inner pool_inner_of(const cd_pool_desc *d)
{
    pool_inner in;
    inner_range(d->h, d->kh, d->sh, d->ph, d->oh, &in.ylo, &in.yhi);
    inner_range(d->w, d->kw, d->sw, d->pw, d->ow, &in.xlo, &in.xhi);
    return in;
}

/* The first output column after ox (-1: before the row) of row oy that is not inner;
 * d->ow when there is none. */
static inline int border_next(const cd_pool_desc *d, const pool_inner *in, int oy, int ox)
{
    ox++;
    if (oy >= in->ylo && oy < in->yhi && ox >= in->xlo && ox < in->xhi)
        ox = in->xhi;
    return ox < d->ow ? ox : d->ow;
}

/* the first maximum of the k x k window at x + base (plane index), branch-free */
static inline int inner_argmax(const float *x, int w, int kh, int kw, int base)
{
    int best = base;
    float m = x[base];
    for (int ki = 0; ki < kh; ki++)
        for (int kj = 0; kj < kw; kj++) {
            int i = base + ki * w + kj;
            float v = x[i];
            best = v > m ? i : best;
            m = v > m ? v : m;
        }
    return best;
}

/*
 * The inner windows of a 3x3 pooling with stride 2 or 1 (AlexNet's, GoogLeNet's), eight
 * windows side by side at a time in GCC's vector types (compiled for each target of
 * CD_CLONES): each row of the windows is reduced first, then the rows. A strict > keeps
 * the first maximum of each row and then the first row holding the window's maximum,
 * which is the first maximum in row-major order, the scan's choice. The scan starts
 * from the window's first cell, so a NaN there is kept and any other NaN skipped: the
 * first row is reduced from its first cell, the others from -inf (a row of NaN then
 * gives -inf, which no later row passes). A row of fewer than 8 windows is one max8 of
 * its own (band_max_inner).
 */

/* l[j] = {q[j], q[j+s], ..., q[j+7s]} for j < 3: the cells of column j of 8 windows */
CPU_INLINE void columns8(const float *q, int s, v8f l[3])
{
    if (s == 1) {
        l[0] = load8(q);
        l[1] = load8(q + 1);
        l[2] = load8(q + 2);
        return;
    }
    v8f a = load8(q), b = load8(q + 8), last = (v8f){0} + q[16];
    l[0] = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
    l[1] = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
    l[2] = __builtin_shufflevector(l[0], last, 1, 2, 3, 4, 5, 6, 7, 8);
}

/* The maximum of 8 windows starting at p (window o at p + o*s, rows w apart) and its
 * offset from the window's first cell, counting wi per row (the plane's width where p
 * points into a copy of its rows). */
CPU_INLINE void max8(const float *p, int w, int wi, int s, v8f *m, v8i *at)
{
    v8f l[3];
    columns8(p, s, l);
    v8f best = l[0];
    v8i k = (v8i){0};
    for (int ki = 0; ki < 3; ki++) {
        if (ki > 0)
            columns8(p + (size_t)ki * w, s, l);
        v8f rm = ki == 0 ? l[0] : select8(l[0] == l[0], l[0], (v8f){0} - INFINITY);
        v8i rk = (v8i){0} + ki * wi;
        for (int j = 1; j < 3; j++) {
            v8i gt = l[j] > rm;
            rk = (gt & (ki * wi + j)) | (~gt & rk);
            rm = select8(gt, l[j], rm);
        }
        if (ki == 0) {
            best = rm;
            k = rk;
            continue;
        }
        v8i gt = rm > best;
        k = (gt & rk) | (~gt & k);
        best = select8(gt, rm, best);
    }
    *m = best;
    *at = k;
}

/* the inner windows of one plane, forward (dx NULL: y gets the maxima) or backward (dy
 * routed into dx, which holds zeros or the border's routes) */
CPU_INLINE void sep_max_inner(const cd_pool_desc *d, const pool_inner *in, const float *x, float *y,
                              const float *dy, float *dx, int s)
{
    const int w = d->w, n = in->xhi - in->xlo;
    for (int oy = in->ylo; oy < in->yhi; oy++) {
        size_t first = (size_t)(oy * s - d->ph) * w - d->pw + (size_t)in->xlo * s;
        size_t out = (size_t)oy * d->ow + in->xlo;
        int at[SEP_LANES];
        for (int o = 0; o < n; o += SEP_LANES) {
            /* the last 8 of the row overlap the previous ones: they are written twice
             * alike in the forward and routed once below */
            int o8 = o + SEP_LANES <= n ? o : n - SEP_LANES;
            v8f m;
            v8i k;
            max8(x + first + (size_t)o8 * s, w, w, s, &m, &k);
            if (!dx) {
                memcpy(y + out + o8, &m, sizeof m);
                continue;
            }
            memcpy(at, &k, sizeof k);
            for (int j = o - o8; j < SEP_LANES; j++)
                dx[first + (size_t)(o8 + j) * s + at[j]] += dy[out + o8 + j];
        }
    }
}

/*
 * The inner windows of a plane whose rows hold fewer than 8 of them (AlexNet's pool5,
 * 6 a row; GoogLeNet's 7x7 planes): each row of windows is one max8, whose lanes past
 * the row's windows read on into the cells after them. Where those reads would pass the
 * plane's end (its last rows), max8 reads a copy of the three rows instead, BAND_W
 * floats apart, its spare cells zero. The extra lanes are neither stored nor routed.
 */
#define BAND_W (SEP_LANES * 2 + 1)

/* max8 of the n < 8 windows of a row starting at x + first, from a copy where the
 * reads would pass the plane's end */
CPU_INLINE void max8_short(const cd_pool_desc *d, const float *x, size_t first, int n, int s, int wi, v8f *m,
                           v8i *k)
{
    const int w = d->w, span = (n - 1) * s + 3;
    const size_t plane = (size_t)d->h * w, reach = (size_t)2 * w + (SEP_LANES - 1) * s + 3;
    if (first + reach <= plane) {
        max8(x + first, w, wi, s, m, k);
        return;
    }
    /* (an element loop, not memcpy: a call or a rep movs costs more than the 17 floats) */
    float band[3 * BAND_W];
    for (int ki = 0; ki < 3; ki++)
        for (int j = 0; j < BAND_W; j++)
            band[ki * BAND_W + j] = j < span ? x[first + (size_t)ki * w + j] : 0.0f;
    max8(band, BAND_W, wi, s, m, k);
}

CPU_INLINE void band_max_inner(const cd_pool_desc *d, const pool_inner *in, const float *x, float *y,
                               const float *dy, float *dx, int s)
{
    const int w = d->w, n = in->xhi - in->xlo;
    for (int oy = in->ylo; oy < in->yhi; oy++) {
        size_t first = (size_t)(oy * s - d->ph) * w - d->pw + (size_t)in->xlo * s;
        size_t out = (size_t)oy * d->ow + in->xlo;
        v8f m;
        v8i k;
        max8_short(d, x, first, n, s, w, &m, &k);
        if (!dx && out + SEP_LANES <= (size_t)d->oh * d->ow) {
            /* the lanes past the row land on outputs written after these */
            memcpy(y + out, &m, sizeof m);
            continue;
        }
        float mv[SEP_LANES];
        int at[SEP_LANES];
        memcpy(mv, &m, sizeof m);
        memcpy(at, &k, sizeof k);
        for (int j = 0; j < n; j++) {
            if (!dx)
                y[out + j] = mv[j];
            else
                dx[first + (size_t)j * s + at[j]] += dy[out + j];
        }
    }
}

/* the shapes sep_max_inner and band_max_inner are compiled for: 3x3, stride 2 or 1 */
static int sep_stride(const cd_pool_desc *d, const pool_inner *in)
{
    int shape = d->kh == 3 && d->kw == 3 && d->sh == d->sw && in->xhi > in->xlo && in->yhi > in->ylo;
    return shape && (d->sh == 1 || d->sh == 2) ? d->sh : 0;
}

/* the inner windows of one plane by 3x3 windows of stride s, forward (dx NULL) or
 * backward: 8 at a time along the rows, or a row at a time when it holds fewer */
CPU_INLINE void max3_inner(const cd_pool_desc *d, const pool_inner *in, const float *x, float *y,
                           const float *dy, float *dx, int s)
{
    if (in->xhi - in->xlo >= SEP_LANES)
        sep_max_inner(d, in, x, y, dy, dx, s);
    else
        band_max_inner(d, in, x, y, dy, dx, s);
}

/*
 * The backward of 3x3 stride-2 windows that tile the plane exactly (h = 2*oh + 1 and
 * w = 2*ow + 1, no padding: AlexNet's pool1 and pool2) without the forward's codes
 * (with them, max3s2_tiles_mask_bwd routes), gathered instead of routed.
 * Each row of windows first gets its windows' choices (3*ki + kj, from max8) and their
 * dy in rows padded with a -1 choice on each side; then each input row is written
 * once: its even columns (the first cell of window t and the last of window t-1) and
 * its odd ones (the middle of window t) summed from the one or two rows of windows over
 * it, eight of each at a time, and interleaved. The sums add in the order the routes
 * would (window rows, then windows, in order), so the result is the routed one's bit
 * for bit. No zeroing pass and no read-modify-write of dx. Rows of fewer than
 * TILE_MIN_OW windows (pool5's 6) are routed: the gather's fixed cost per input row is
 * more than their few routes.
 */
#define TILE_MIN_OW 12
#define TILE_MAX_OW 512
#define TILE_ROW (TILE_MAX_OW + 3 * SEP_LANES)

typedef struct win_row {
    int code[TILE_ROW]; /* code[t + 1]: window t's choice; -1 before and after the row */
    float g[TILE_ROW];  /* g[t + 1]: its dy; 0 before and after */
} win_row;

static int max3s2_tiles(const cd_pool_desc *d)
{
    return d->kh == 3 && d->kw == 3 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0 &&
           d->h == 2 * d->oh + 1 && d->w == 2 * d->ow + 1 && d->ow >= TILE_MIN_OW && d->ow <= TILE_MAX_OW;
}

CPU_INLINE v8i load8i(const int *p)
{
    v8i v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* the choices and dy of window row oy: from the forward's codes where given (code, the
 * plane's), else found again in x */
CPU_INLINE void tile_row_fill(const cd_pool_desc *d, const float *x, const uint8_t *code, const float *dy, int oy,
                              win_row *r)
{
    const int w = d->w, ow = d->ow;
    size_t first = (size_t)2 * oy * w;
    if (code)
        for (int t = 0; t < ow; t++)
            r->code[1 + t] = code[(size_t)oy * ow + t];
    else
        for (int o = 0; o < ow; o += SEP_LANES) {
            int o8 = o + SEP_LANES <= ow ? o : ow - SEP_LANES;
            v8f m;
            v8i k;
            max8(x + first + (size_t)2 * o8, w, 3, 2, &m, &k);
            memcpy(r->code + 1 + o8, &k, sizeof k);
        }
    memcpy(r->g + 1, dy + (size_t)oy * ow, (size_t)ow * sizeof(float));
    r->code[0] = -1;
    r->g[0] = 0.0f;
    v8i none = (v8i){0} - 1;
    v8f zero = (v8f){0};
    for (int t = ow + 1; t < ow + 1 + 2 * SEP_LANES; t += SEP_LANES) {
        memcpy(r->code + t, &none, sizeof none);
        memcpy(r->g + t, &zero, sizeof zero);
    }
}

/* input row i of the plane from the window rows over it: src[0] (its row ki[0]) and,
 * where nsrc is 2, src[1] after it. Sixteen cells are stored at a time, the last store
 * of a row running on into the next one, which is written after it; the plane's last
 * row (last) stops at its end. */
CPU_INLINE void tile_row_emit(const cd_pool_desc *d, const win_row *const *src, const int *ki, int nsrc,
                              float *dxrow, int last)
{
    const int ow = d->ow, w = d->w;
    for (int t0 = 0; t0 <= ow; t0 += SEP_LANES) {
        v8f e = (v8f){0}, o = (v8f){0};
        for (int si = 0; si < nsrc; si++) {
            const win_row *r = src[si];
            v8i c = load8i(r->code + t0 + 1), cp = load8i(r->code + t0);
            v8f g = load8(r->g + t0 + 1), gp = load8(r->g + t0);
            e += select8(cp == 3 * ki[si] + 2, gp, (v8f){0}); /* window t-1 first */
            e += select8(c == 3 * ki[si], g, (v8f){0});
            o += select8(c == 3 * ki[si] + 1, g, (v8f){0});
        }
        v8f cells[2] = {__builtin_shufflevector(e, o, 0, 8, 1, 9, 2, 10, 3, 11),
                        __builtin_shufflevector(e, o, 4, 12, 5, 13, 6, 14, 7, 15)};
        int left = w - 2 * t0;
        if (!last || left >= 2 * SEP_LANES)
            memcpy(dxrow + 2 * t0, cells, sizeof cells);
        else
            for (int j = 0; j < left; j++)
                dxrow[2 * t0 + j] = ((const float *)cells)[j];
    }
}

CPU_INLINE void max3s2_tiles_bwd(const cd_pool_desc *d, const float *x, const uint8_t *code, const float *dy,
                                 float *dx)
{
    const size_t w = (size_t)d->w;
    win_row rows[2];
    win_row *prev = &rows[0], *cur = &rows[1];
    for (int oy = 0; oy < d->oh; oy++) {
        tile_row_fill(d, x, code, dy, oy, cur);
        const win_row *both[2] = {prev, cur}, *one[1] = {cur};
        /* row 2*oy: the last row of window row oy-1, then the first of oy */
        if (oy > 0)
            tile_row_emit(d, both, (const int[]){2, 0}, 2, dx + 2 * (size_t)oy * w, 0);
        else
            tile_row_emit(d, one, (const int[]){0}, 1, dx, 0);
        tile_row_emit(d, one, (const int[]){1}, 1, dx + (2 * (size_t)oy + 1) * w, 0);
        win_row *t = prev;
        prev = cur;
        cur = t;
    }
    const win_row *last[1] = {prev};
    tile_row_emit(d, last, (const int[]){2}, 1, dx + 2 * (size_t)d->oh * w, 1);
}

/* The codes (3*ki + kj) of eight windows' choices as bytes: each lane's low byte in one
 * shuffle, and back, each byte into the low byte of a lane of zeros, four lanes at a
 * time (a conversion went lane by lane, and wider shuffles through the stack) */
CPU_INLINE v8u8 codes8(v8i k)
{
    v32u8 b = (v32u8)k;
    return __builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28);
}

CPU_INLINE v8i uncodes8(const uint8_t *p)
{
    uint64_t q;
    memcpy(&q, p, sizeof q);
    v2u64 t = {q, 0};
    v16u8 b = (v16u8)t, z = {0};
    v4i lo = (v4i)__builtin_shufflevector(b, z, 0, 16, 16, 16, 1, 16, 16, 16, 2, 16, 16, 16, 3, 16, 16, 16);
    v4i hi = (v4i)__builtin_shufflevector(b, z, 4, 16, 16, 16, 5, 16, 16, 16, 6, 16, 16, 16, 7, 16, 16, 16);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}

/* The tiling's forward when training: y, and each window's choice as its code
 * (3*ki + kj) in a byte per output, from which the backward routes each dy instead of
 * finding the maxima in x again: it then reads a byte and dy per window where it read the
 * plane. AlexNet's pool1 (32 images, ms): forward 1.06-1.16 to 1.22-1.25, backward
 * 2.57-2.64 to 1.63-1.97; pool2 0.73-0.78 to 0.77-0.82 and 2.00-2.04 to 1.42-1.48. The
 * codes went lane by lane through a conversion to bytes (forward 1.44 ms); codes8 takes
 * each lane's low byte in one shuffle. */
// x is (h,w) of one plane; y and code are (oh,ow)
CD_CLONES_V4
static void max3s2_tiles_fwd(const cd_pool_desc *d, const float *x, float *y, uint8_t *code)
{
    const int w = d->w, ow = d->ow;
    for (int oy = 0; oy < d->oh; oy++) {
        size_t first = (size_t)2 * oy * w, out = (size_t)oy * ow;
        for (int o = 0; o < ow; o += SEP_LANES) {
            /* the last 8 of the row overlap the previous ones, written twice alike */
            int o8 = o + SEP_LANES <= ow ? o : ow - SEP_LANES;
            v8f m;
            v8i k;
            max8(x + first + (size_t)2 * o8, w, 3, 2, &m, &k);
            memcpy(y + out + o8, &m, sizeof m);
            v8u8 c = codes8(k);
            memcpy(code + out + o8, &c, sizeof c);
        }
    }
}

/* Its backward: the plane zeroed, then each window's dy added to the cell its code names,
 * in window order (max_route_at's adds, the same bits as the gather's). With the codes
 * known the gather's selects over every cell cost more than these adds into a plane in
 * L1: 32 images, ms, pool1 2.75-2.76 to 2.38-2.40, pool2 2.13-2.20 to 1.06-1.07; on 2
 * images in cache 0.162-0.164 to 0.102-0.106 and 0.130 to 0.064-0.066. */
// code and dy are (oh,ow) of one plane; dx is (h,w), overwritten
CD_CLONES
static void max3s2_tiles_mask_bwd(const cd_pool_desc *d, const uint8_t *code, const float *dy, float *dx)
{
    const int w = d->w, ow = d->ow;
    const int off[9] = {0, 1, 2, w, w + 1, w + 2, 2 * w, 2 * w + 1, 2 * w + 2};
    memset(dx, 0, (size_t)d->h * w * sizeof(float));
    for (int oy = 0; oy < d->oh; oy++) {
        float *base = dx + (size_t)2 * oy * w;
        const uint8_t *c = code + (size_t)oy * ow;
        const float *g = dy + (size_t)oy * ow;
        for (int ox = 0; ox < ow; ox++)
            base[2 * ox + off[c[ox]]] += g[ox];
    }
}

/* The inner windows' forward of other shapes, kh x kw given as arguments: the scan. */
CPU_INLINE void max_inner_fwd(const cd_pool_desc *d, const pool_inner *in, const float *x, float *y)
{
    const int w = d->w, kh = d->kh, kw = d->kw;
    for (int oy = in->ylo; oy < in->yhi; oy++) {
        const float *r = x + (size_t)(oy * d->sh - d->ph) * w - d->pw;
        float *out = y + (size_t)oy * d->ow;
        for (int ox = in->xlo; ox < in->xhi; ox++) {
            const float *p = r + ox * d->sw;
            float m = p[0];
            for (int ki = 0; ki < kh; ki++)
                for (int kj = 0; kj < kw; kj++)
                    m = p[ki * w + kj] > m ? p[ki * w + kj] : m;
            out[ox] = m;
        }
    }
}

// x is (h,w) of one plane; y is (oh,ow)
CD_CLONES_V4
static void max_plane_fwd(const cd_pool_desc *d, const float *x, float *y)
{
    pool_inner in = pool_inner_of(d);
    int s = sep_stride(d, &in);
    if (s == 2)
        max3_inner(d, &in, x, y, NULL, NULL, 2);
    else if (s == 1)
        max3_inner(d, &in, x, y, NULL, NULL, 1);
    else
        max_inner_fwd(d, &in, x, y);
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = border_next(d, &in, oy, -1); ox < d->ow; ox = border_next(d, &in, oy, ox))
            y[oy * d->ow + ox] = max_at(d, x, oy, ox);
}

// x, dx are (h,w) of one plane; dy is (oh,ow); dx is overwritten
CD_CLONES
static void max_plane_bwd(const cd_pool_desc *d, const float *x, const float *dy, float *dx)
{
    if (max3s2_tiles(d)) {
        max3s2_tiles_bwd(d, x, NULL, dy, dx);
        return;
    }
    pool_inner in = pool_inner_of(d);
    const int w = d->w;
    int s = sep_stride(d, &in);
    memset(dx, 0, (size_t)d->h * w * sizeof(float));
    if (s == 2)
        max3_inner(d, &in, x, NULL, dy, dx, 2);
    else if (s == 1)
        max3_inner(d, &in, x, NULL, dy, dx, 1);
    else
        for (int oy = in.ylo; oy < in.yhi; oy++) {
            int row = (oy * d->sh - d->ph) * w - d->pw;
            const float *g = dy + (size_t)oy * d->ow;
            for (int ox = in.xlo; ox < in.xhi; ox++)
                dx[inner_argmax(x, w, d->kh, d->kw, row + ox * d->sw)] += g[ox];
        }
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = border_next(d, &in, oy, -1); ox < d->ow; ox = border_next(d, &in, oy, ox))
            max_route_at(d, x, dy, dx, oy, ox);
}

/*
 * MAX on small planes (h*w <= LANE_CELLS: AlexNet's pool5, 13x13), eight planes at a
 * time, a plane to a lane: the eight planes are transposed into one vector per cell and
 * each window is scanned as max_at scans it (its first cell inside the image, then a
 * strict > over the others in row-major order) in every lane at once; the backward
 * routes each window's dy to its choice in window order (max_route_at's adds) by
 * selects over the window's cells. Where rows hold few windows the row-wise vectors
 * leave lanes idle and reduce each window with shuffles, and windows clipped at a border
 * go one by one through max_at; here every lane works on every window alike. Measured
 * on 32x256 planes, forward: 13x13 3x3/2 (pool5) 0.30-0.31 to 0.21-0.22 ms, 14x14
 * 3x3/2 (clipped last windows) 1.41-1.45 to 0.27, 7x7 3x3/1 pad 1: 1.89-1.91 to 0.20-0.23;
 * backward: 14x14 1.55 to 0.68-0.69, 7x7 pad 1 1.97 to 0.37, 9x9 3x3/2 pad 1 1.52-1.55 to
 * 0.27-0.28 (the forward compiled for AVX-512 too, CD_CLONES_V4: its 32 vector
 * registers hold a transpose without spilling; pool5's 0.20 to 0.165 ms, and the plane
 * code's forwards pool1 1.21-1.29 to 1.16-1.22, pool2 0.77-0.81 to 0.66-0.70). With
 * every window inner (pool5) the plane code's backward is as fast
 * (0.47-0.49 against 0.48-0.55 ms) and keeps it. The planes past the last eight go one
 * by one through the plane code.
 * Given a mask (training: cpu_pool_mask_size), the forward also records each window's
 * choice, and the backward only adds each dy to its recorded cell (forward + backward,
 * ms, whole 3x3 windows by lanes_max3): pool5 0.21+0.46 to 0.23+0.14, 14x14 3x3/2
 * 0.27+0.71 to 0.30+0.18, 7x7 3x3/1 pad 1 0.21+0.37 to 0.25+0.16, 9x9 3x3/2 pad 1
 * 0.14+0.28 to 0.15+0.09. Where every window is whole (pool5) that backward runs in the
 * lanes as the forward does (lanes_route: eight or sixteen planes at once, dy transposed
 * in and dx out): 512 planes in cache, one thread, forward + backward 83 to 59 ns a
 * plane; 32 images, two threads, the backward 0.19-0.20 to 0.17 ms. As selects, GCC
 * made them masked stores, which the next window's loads of the cells it shares wait
 * on: no gain; as adds of dy masked to zero (the same bits: a cell's sum starts at +0
 * and never becomes -0) the stores are whole.
 */
#define LANE_CELLS 256
#define LANES SEP_LANES

static int max_lanes(const cd_pool_desc *d)
{
    return d->mode == CD_POOL_MAX && (size_t)d->h * d->w <= LANE_CELLS && d->n * d->c >= LANES;
}

/* in-register transpose of 8 vectors: r[q][c] becomes r[c][q] */
CPU_INLINE void transpose8(v8f r[8])
{
    v8f t[8], u[8];
    for (int q = 0; q < 8; q += 2) {
        t[q] = __builtin_shufflevector(r[q], r[q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[q + 1] = __builtin_shufflevector(r[q], r[q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int q = 0; q < 8; q += 4) {
        u[q] = __builtin_shufflevector(t[q], t[q + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[q + 1] = __builtin_shufflevector(t[q], t[q + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[q + 2] = __builtin_shufflevector(t[q + 1], t[q + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[q + 3] = __builtin_shufflevector(t[q + 1], t[q + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int q = 0; q < 4; q++) {
        r[q] = __builtin_shufflevector(u[q], u[q + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[q + 4] = __builtin_shufflevector(u[q], u[q + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* t[c] = cell c of the W planes of n cells at v (plane q at v + q*n), as IN, and the
 * inverse, as OUT: eight cells of each plane at a time, rows ROW_IN(v, n, c, q) for q <
 * 8 transposed by TRANSPOSE in registers and stored by ROW_OUT(r, v, n, c, q). A tail
 * of two to seven cells goes as one more eight ending at the last cell, the cells before
 * it written again alike (pool5's 36 outputs: four cells of sixteen planes went one
 * float at a time); a single cell, or planes of fewer than eight, one by one. */
static inline size_t lanes_io_next(size_t c, size_t n)
{
    return c + LANES <= n ? c : n >= LANES && n - c > 1 ? n - LANES : n;
}

#define DEFINE_LANES_IO(IN, OUT, VF, W, ROW_IN, ROW_OUT, TRANSPOSE)                                             \
    CPU_INLINE void IN(const float *v, size_t n, VF *t)                                                        \
    {                                                                                                          \
        size_t c = 0, at;                                                                                      \
        for (; (at = lanes_io_next(c, n)) < n; c = at + LANES) {                                               \
            VF r[8];                                                                                           \
            for (int q = 0; q < 8; q++)                                                                        \
                r[q] = ROW_IN(v, n, at, q);                                                                    \
            TRANSPOSE(r);                                                                                      \
            memcpy(t + at, r, sizeof r);                                                                       \
        }                                                                                                      \
        for (; c < n; c++)                                                                                     \
            for (int q = 0; q < (W); q++)                                                                      \
                t[c][q] = v[q * n + c];                                                                        \
    }                                                                                                          \
    CPU_INLINE void OUT(const VF *t, size_t n, float *v)                                                       \
    {                                                                                                          \
        size_t c = 0, at;                                                                                      \
        for (; (at = lanes_io_next(c, n)) < n; c = at + LANES) {                                               \
            VF r[8];                                                                                           \
            memcpy(r, t + at, sizeof r);                                                                       \
            TRANSPOSE(r);                                                                                      \
            for (int q = 0; q < 8; q++)                                                                        \
                ROW_OUT(r[q], v, n, at, q);                                                                    \
        }                                                                                                      \
        for (; c < n; c++)                                                                                     \
            for (int q = 0; q < (W); q++)                                                                      \
                v[q * n + c] = t[c][q];                                                                        \
    }

/* eight planes: lanes_in and lanes_out */
#define ROW8_IN(v, n, c, q) load8((v) + (q) * (n) + (c))
#define ROW8_OUT(r, v, n, c, q) memcpy((v) + (q) * (n) + (c), &(r), sizeof(r))
DEFINE_LANES_IO(lanes_in, lanes_out, v8f, 8, ROW8_IN, ROW8_OUT, transpose8)

/* the first maximum of window pw in every lane, and (at, where not NULL) its cell */
CPU_INLINE v8f lanes_max(const v8f *t, int w, const pool_window *pw, v8i *at)
{
    int first = pw->hs * w + pw->ws;
    v8f m = t[first];
    v8i k = (v8i){0} + first;
    for (int yy = pw->hs; yy < pw->he; yy++)
        for (int xx = pw->ws; xx < pw->we; xx++) {
            int c = yy * w + xx;
            v8i gt = t[c] > m;
            m = select8(gt, t[c], m);
            if (at)
                k = (gt & c) | (~gt & k);
        }
    if (at)
        *at = k;
    return m;
}

/* lanes_max on a whole 3x3 window at cell `first`: the nine cells at fixed offsets
 * (off), the choice (where at is not NULL) blended from the tags kept in registers (tag:
 * the cells' offsets, or their codes 3*ki + kj): the general loop's per-cell index and
 * bounds cost about what its compares do (pool5's forward with the mask 0.26 to 0.23 ms,
 * without 0.21 to 0.20) */
#define DEFINE_LANES_MAX3(name, VF, VI)                                                                        \
    CPU_INLINE VF name(const VF *t, int first, const int off[9], const VI tag[9], VI *at)                    \
    {                                                                                                          \
        VF m = t[first];                                                                                       \
        VI k = tag[0];                                                                                         \
        for (int j = 1; j < 9; j++) {                                                                          \
            VF v = t[first + off[j]];                                                                          \
            VI gt = v > m;                                                                                     \
            m = (VF)(((VI)v & gt) | ((VI)m & ~gt));                                                            \
            if (at)                                                                                            \
                k = (gt & tag[j]) | (~gt & k);                                                                 \
        }                                                                                                      \
        if (at)                                                                                                \
            *at = k;                                                                                           \
        return m;                                                                                              \
    }
DEFINE_LANES_MAX3(lanes_max3, v8f, v8i)

/* whether every window is a whole 3x3 one inside the plane (pool5): none to place or clip */
static int lanes_whole3(const cd_pool_desc *d)
{
    pool_inner in = pool_inner_of(d);
    return d->kh == 3 && d->kw == 3 && in.ylo == 0 && in.xlo == 0 && in.yhi == d->oh && in.xhi == d->ow;
}

/* Every window's maximum into o and, where m is not NULL, its choice as its code (3*ki +
 * kj), the windows all whole 3x3 ones (lanes_whole3), by lanes_max3 (MAX3) on vectors of
 * type VF; code holds the nine codes as vectors. A call with
 * m and one without are two loops, so that the choices stay in registers (through
 * memory, each window's chain of compares waited on a store and a load: sixteen planes
 * at a time, 20,000 calls on 512 planes, one thread, 0.31 to 0.27-0.28 s; eight at a
 * time, no change). */
#define DEFINE_LANES_SCAN(name, VF, VI, MAX3)                                                                  \
    CPU_INLINE void name(const cd_pool_desc *d, const VF *t, const int off[9], const VI code[9], VF *o, VI *m) \
    {                                                                                                          \
        for (int oy = 0; oy < d->oh; oy++) {                                                                   \
            int row = (oy * d->sh - d->ph) * d->w - d->pw;                                                     \
            for (int ox = 0; ox < d->ow; ox++) {                                                               \
                size_t i = (size_t)oy * d->ow + ox;                                                            \
                if (m)                                                                                         \
                    o[i] = MAX3(t, row + ox * d->sw, off, code, &m[i]);                                        \
                else                                                                                           \
                    o[i] = MAX3(t, row + ox * d->sw, off, code, NULL);                                         \
            }                                                                                                  \
        }                                                                                                      \
    }
DEFINE_LANES_SCAN(lanes_scan, v8f, v8i, lanes_max3)

/* whether the whole 3x3 windows (lanes_whole3) tile the plane at stride 2, every cell
 * under one (pool5's 13x13) */
static int lanes_tile2(const cd_pool_desc *d)
{
    return d->sh == 2 && d->sw == 2 && 2 * d->oh + 1 == d->h && 2 * d->ow + 1 == d->w;
}

/* The backward of windows all whole 3x3 ones (lanes_whole3) in the lanes: acc gets each
 * window's dy (g) at its choice (k, its code 3*ki + kj), window by window in order,
 * max_route_at's adds from +0: a select over the window's nine cells by the codes kept
 * in registers (code). Where the windows tile the plane at stride 2 (lanes_tile2) a
 * cell's first window stores +0 plus its term (WIN's R0 and C0: whether the window's
 * first row and column are its own, in the first row or column of windows; its other
 * rows and columns always are), the later ones add theirs, and nothing is zeroed first;
 * elsewhere acc is zeroed and every window adds. */
#define DEFINE_LANES_ROUTE(name, VF, VI)                                                                       \
    CPU_INLINE void name##_win(VF *acc, VF gv, VI k, const int off[9], const VI code[9], int r0, int c0)       \
    {                                                                                                          \
        for (int j = 0; j < 9; j++) {                                                                          \
            VF v = (VF)((VI)gv & (k == code[j]));                                                              \
            if ((j / 3 > 0 || r0) && (j % 3 > 0 || c0))                                                        \
                acc[off[j]] = (VF){0} + v;                                                                     \
            else                                                                                               \
                acc[off[j]] += v;                                                                              \
        }                                                                                                      \
    }                                                                                                          \
    CPU_INLINE void name(const cd_pool_desc *d, const VI *k, const VF *g, const int off[9], const VI code[9], \
                         VF *acc)                                                                              \
    {                                                                                                          \
        if (lanes_tile2(d)) {                                                                                  \
            for (int oy = 0; oy < d->oh; oy++) {                                                               \
                VF *row = acc + (size_t)2 * oy * d->w;                                                         \
                const VF *gr = g + (size_t)oy * d->ow;                                                         \
                const VI *kr = k + (size_t)oy * d->ow;                                                         \
                if (oy == 0) {                                                                                 \
                    name##_win(row, gr[0], kr[0], off, code, 1, 1);                                            \
                    for (int ox = 1; ox < d->ow; ox++)                                                         \
                        name##_win(row + 2 * ox, gr[ox], kr[ox], off, code, 1, 0);                             \
                } else {                                                                                       \
                    name##_win(row, gr[0], kr[0], off, code, 0, 1);                                            \
                    for (int ox = 1; ox < d->ow; ox++)                                                         \
                        name##_win(row + 2 * ox, gr[ox], kr[ox], off, code, 0, 0);                             \
                }                                                                                              \
            }                                                                                                  \
            return;                                                                                            \
        }                                                                                                      \
        for (size_t c = 0; c < (size_t)d->h * d->w; c++)                                                       \
            acc[c] = (VF){0};                                                                                  \
        for (int oy = 0; oy < d->oh; oy++) {                                                                   \
            int row = (oy * d->sh - d->ph) * d->w - d->pw;                                                     \
            for (int ox = 0; ox < d->ow; ox++) {                                                               \
                size_t i = (size_t)oy * d->ow + ox;                                                            \
                int first = row + ox * d->sw;                                                                  \
                VF gv = g[i];                                                                                  \
                for (int j = 0; j < 9; j++)                                                                    \
                    acc[first + off[j]] += (VF)((VI)gv & (k[i] == code[j]));                                   \
            }                                                                                                  \
        }                                                                                                      \
    }
DEFINE_LANES_ROUTE(lanes_route, v8f, v8i)

/* the offsets of a 3x3 window's cells from its first, in a plane w wide (off), and as
 * vectors the tags a choice is told by (tag): the offsets, or where CODES the cells'
 * codes (3*ki + kj, the order of off) */
#define LANES_OFFSETS(w, off, tag, VI, CODES)                                                                 \
    for (int j = 0; j < 9; j++) {                                                                              \
        off[j] = j / 3 * (w) + j % 3;                                                                          \
        tag[j] = (VI){0} + ((CODES) ? j : off[j]);                                                             \
    }

/* mask, where not NULL, gets each window's choice as its cell's index in the plane (-1
 * for a window with no cell inside the image), a float per output, kept as the lanes
 * hold it (output o of plane q at o*8 + q): transposing it back cost as much as the
 * windows' choices themselves (0.045 ms on pool5). Where every window is whole
 * (lanes_whole3) code gets each choice's code (3*ki + kj) in a byte instead, likewise
 * kept (pool5: 0.3 MB where the floats were 1.2, and no index to add or subtract). */
// x is 8 planes of (h,w); y 8 of (oh,ow); mask (oh*ow, 8) floats or code (oh*ow, 8) bytes
CD_CLONES_V4
static void max_lanes_fwd(const cd_pool_desc *d, const float *x, float *y, float *mask, uint8_t *code)
{
    v8f t[LANE_CELLS], o[LANE_CELLS], m[LANE_CELLS];
    size_t out = (size_t)d->oh * d->ow;
    int off[9];
    v8i offv[9];
    lanes_in(x, (size_t)d->h * d->w, t);
    if (lanes_whole3(d)) {
        /* every window whole (pool5): none to place or clip (0.228 to 0.200 ms) */
        v8i k[LANE_CELLS];
        LANES_OFFSETS(d->w, off, offv, v8i, 1)
        lanes_scan(d, t, off, offv, o, code ? k : NULL);
        lanes_out(o, out, y);
        for (size_t i = 0; code && i < out; i++) {
            v8u8 c = codes8(k[i]);
            memcpy(code + i * LANES, &c, sizeof c);
        }
        return;
    }
    LANES_OFFSETS(d->w, off, offv, v8i, 0)
    int three = d->kh == 3 && d->kw == 3;
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            pool_window pw = pool_window_at(d, oy, ox);
            size_t c = (size_t)oy * d->ow + ox;
            v8i k = (v8i){0} - 1;
            if (pool_window_empty(&pw))
                o[c] = (v8f){0};
            else if (three && pw.he - pw.hs == 3 && pw.we - pw.ws == 3) {
                int first = pw.hs * d->w + pw.ws;
                o[c] = lanes_max3(t, first, off, offv, mask ? &k : NULL);
                k += first;
            } else {
                o[c] = lanes_max(t, d->w, &pw, mask ? &k : NULL);
            }
            m[c] = __builtin_convertvector(k, v8f);
        }
    lanes_out(o, out, y);
    if (mask)
        memcpy(mask, m, out * sizeof m[0]);
}

/*
 * Sixteen planes at a time where the processor runs AVX-512 (CD_TARGET_V4), every window
 * whole (pool5): two units of eight, one in each half of 16-float vectors, transposed
 * in place as eight are (each shuffle of transpose8 done in both halves at once) and
 * scanned by the same lanes_max3, so the outputs and the choices are max_lanes_fwd's bit
 * for bit, in half the vector operations. pool5's forward with the mask: 32 images, two
 * threads, 0.145-0.18 to 0.122-0.13 ms; 512 planes in cache, one thread, 36-37 to 27-28
 * ns a plane. A plane to each of the sixteen lanes in one transpose would need a 16x16
 * transpose. The codes go as the lanes hold them, sixteen bytes a window, each taken to
 * and from the lanes in one instruction (vpmovdb, vpmovzxbd): GCC's vector conversions
 * went lane by lane, and its shuffles of bytes through the stack (the backward 0.14 to
 * 0.21-0.30 ms).
 */
typedef float v16f __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));
DEFINE_LANES_MAX3(lanes16_max3, v16f, v16i)

/* transpose8 in each half: r[q] holds row q of two 8x8 blocks */
CPU_INLINE void transpose8x2(v16f r[8])
{
    v16f t[8], u[8];
    for (int q = 0; q < 8; q += 2) {
        t[q] = __builtin_shufflevector(r[q], r[q + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
        t[q + 1] =
            __builtin_shufflevector(r[q], r[q + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
    }
    for (int q = 0; q < 8; q += 4) {
        u[q] = __builtin_shufflevector(t[q], t[q + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
        u[q + 1] =
            __builtin_shufflevector(t[q], t[q + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
        u[q + 2] =
            __builtin_shufflevector(t[q + 1], t[q + 3], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
        u[q + 3] =
            __builtin_shufflevector(t[q + 1], t[q + 3], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
    for (int q = 0; q < 4; q++) {
        r[q] = __builtin_shufflevector(u[q], u[q + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
        r[q + 4] =
            __builtin_shufflevector(u[q], u[q + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
}

CPU_INLINE v16f join8(v8f a, v8f b)
{
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* the halves of v: lanes 0-7 to a, 8-15 to b */
CPU_INLINE void split16(v16f v, float *a, float *b)
{
    v8f lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
    v8f hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    memcpy(a, &lo, sizeof lo);
    memcpy(b, &hi, sizeof hi);
}

DEFINE_LANES_SCAN(lanes16_scan, v16f, v16i, lanes16_max3)
DEFINE_LANES_ROUTE(lanes16_route, v16f, v16i)

/* sixteen planes, two units of eight, the second in the upper halves: lanes16_in and
 * lanes16_out */
#define ROW16_IN(v, n, c, q) join8(load8((v) + (q) * (n) + (c)), load8((v) + ((q) + 8) * (n) + (c)))
#define ROW16_OUT(r, v, n, c, q) split16((r), (v) + (q) * (n) + (c), (v) + ((q) + 8) * (n) + (c))
DEFINE_LANES_IO(lanes16_in, lanes16_out, v16f, 16, ROW16_IN, ROW16_OUT, transpose8x2)

// x is 16 planes of (h,w); y 16 of (oh,ow); code (oh*ow, 16) bytes
CD_TARGET_V4
static void max_lanes16_fwd(const cd_pool_desc *d, const float *x, float *y, uint8_t *code)
{
    v16f t[LANE_CELLS], o[LANE_CELLS];
    v16i k[LANE_CELLS];
    size_t out = (size_t)d->oh * d->ow;
    int off[9];
    v16i codev[9];
    LANES_OFFSETS(d->w, off, codev, v16i, 1)
    lanes16_in(x, (size_t)d->h * d->w, t);
    if (code) {
        lanes16_scan(d, t, off, codev, o, k);
        for (size_t i = 0; i < out; i++) {
            uint8_t *p = code + i * 2 * LANES;
#if CD_TARGETS
            _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8((__m512i)k[i]));
#else
            v16u8 c = __builtin_convertvector(k[i], v16u8);
            memcpy(p, &c, sizeof c);
#endif
        }
    } else {
        lanes16_scan(d, t, off, codev, o, NULL);
    }
    lanes16_out(o, out, y);
}

/* The backward from the codes of a unit of planes whose windows are all whole
 * (lanes_whole3), as NAME with attributes ATTR: dy transposed into the lanes (IN), each
 * window's dy routed to its choice (ROUTE; CODES(code, i): window i's codes) and
 * dx transposed back (OUT). */
#define DEFINE_LANES_MASK_BWD(NAME, ATTR, VF, VI, IN, OUT, ROUTE, CODES)                                        \
    ATTR static void NAME(const cd_pool_desc *d, const uint8_t *code, const float *dy, float *dx)              \
    {                                                                                                          \
        VF g[LANE_CELLS], acc[LANE_CELLS];                                                                     \
        VI k[LANE_CELLS];                                                                                      \
        size_t out = (size_t)d->oh * d->ow;                                                                    \
        int off[9];                                                                                            \
        VI codev[9];                                                                                           \
        LANES_OFFSETS(d->w, off, codev, VI, 1)                                                                 \
        IN(dy, out, g);                                                                                        \
        for (size_t i = 0; i < out; i++)                                                                       \
            k[i] = CODES(code, i);                                                                             \
        ROUTE(d, k, g, off, codev, acc);                                                                       \
        OUT(acc, (size_t)d->h * d->w, dx);                                                                     \
    }

/* sixteen planes (two units, max_lanes16): code (oh*ow, 16) bytes, as the forward of the
 * same sixteen wrote them; dy 16 planes of (oh,ow); dx 16 of (h,w), overwritten */
CD_TARGET_V4 CPU_INLINE v16i uncodes16(const uint8_t *code, size_t i)
{
    const uint8_t *p = code + i * 2 * LANES;
#if CD_TARGETS
    return (v16i)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
#else
    v16u8 b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, v16i);
#endif
}
DEFINE_LANES_MASK_BWD(max_lanes16_mask_bwd, CD_TARGET_V4, v16f, v16i, lanes16_in, lanes16_out, lanes16_route,
                      uncodes16)

/* whether the forward takes sixteen planes at a time (above) */
static int max_lanes16(const cd_pool_desc *d)
{
    return cd_cpu_v4() && max_lanes(d) && lanes_whole3(d);
}

/* The backward of eight planes from their mask: each window's dy added to its choice in
 * window order, max_route_at's adds, without reading x again. */
// mask is (oh*ow, 8); dy 8 planes of (oh,ow); dx 8 of (h,w), overwritten
CD_CLONES
static void max_mask_bwd(const cd_pool_desc *d, const float *mask, const float *dy, float *dx)
{
    size_t in = (size_t)d->h * d->w, out = (size_t)d->oh * d->ow;
    memset(dx, 0, LANES * in * sizeof(float));
    for (size_t o = 0; o < out; o++) {
        v8i k = __builtin_convertvector(load8(mask + o * LANES), v8i);
        for (int q = 0; q < LANES; q++)
            if (k[q] >= 0)
                dx[q * in + k[q]] += dy[q * out + o];
    }
}

/* the same where every window is whole (lanes_whole3), by lanes_route: eight planes a
 * select where the adds above went a cell at a time */
#define UNCODES8(code, i) uncodes8((code) + (i) * LANES)
DEFINE_LANES_MASK_BWD(max_lanes_mask_bwd, CD_CLONES_V4, v8f, v8i, lanes_in, lanes_out, lanes_route, UNCODES8)

/* the backward likewise: each window's choice gets its dy, in window order (max_route_at's
 * adds), by selects over the window's cells */
// x, dx are 8 planes of (h,w), dx overwritten; dy 8 of (oh,ow)
CD_CLONES
static void max_lanes_bwd(const cd_pool_desc *d, const float *x, const float *dy, float *dx)
{
    v8f t[LANE_CELLS], g[LANE_CELLS], acc[LANE_CELLS];
    size_t cells = (size_t)d->h * d->w;
    lanes_in(x, cells, t);
    lanes_in(dy, (size_t)d->oh * d->ow, g);
    for (size_t c = 0; c < cells; c++)
        acc[c] = (v8f){0};
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            pool_window pw = pool_window_at(d, oy, ox);
            if (pool_window_empty(&pw))
                continue;
            v8i k;
            lanes_max(t, d->w, &pw, &k);
            v8f gv = g[oy * d->ow + ox];
            for (int yy = pw.hs; yy < pw.he; yy++)
                for (int xx = pw.ws; xx < pw.we; xx++) {
                    int c = yy * d->w + xx;
                    acc[c] = select8(k == c, acc[c] + gv, acc[c]);
                }
        }
    lanes_out(acc, cells, dx);
}

/* the backward goes by lanes where the plane code would clip windows at a border, its
 * slow part on small planes */
static int max_lanes_bwd_wins(const cd_pool_desc *d)
{
    pool_inner in = pool_inner_of(d);
    return max_lanes(d) && (in.ylo > 0 || in.yhi < d->oh || in.xlo > 0 || in.xhi < d->ow);
}

/* A pass over the planes goes in units: the first `eights` take eight planes a lane
 * each, the rest one plane each. Unit u's first plane; the units' count. */
static size_t unit_plane(int u, int eights)
{
    return u < eights ? (size_t)u * LANES : (size_t)eights * LANES + (size_t)(u - eights);
}

static int unit_count(int planes, int eights)
{
    return eights + planes - eights * LANES;
}

typedef struct pool_fns {
    void (*fwd)(const cd_pool_desc *d, const float *x, float *y);
    void (*bwd)(const cd_pool_desc *d, const float *x, const float *dy, float *dx);
} pool_fns;

static const pool_fns pool_table[] = {
    [CD_POOL_MAX] = {max_plane_fwd, max_plane_bwd},
    [CD_POOL_AVE] = {ave_plane_fwd, ave_plane_bwd},
};

#define POOL_MODES ((int)(sizeof pool_table / sizeof pool_table[0]))

/* The plane functions a pass uses where no lane or tile path takes the planes: the 2x2
 * stride-2 ones and global AVE pooling's where they apply, else the mode's general ones. */
static const pool_fns *plane_fns(const cd_pool_desc *d)
{
    static const pool_fns max2 = {max2_plane_fwd, max2_plane_bwd}, ave2 = {ave2_plane_fwd, ave2_plane_bwd},
                          ave_all = {ave_global_fwd, ave_global_bwd};
    if (d->mode == CD_POOL_MAX && max_2x2(d))
        return &max2;
    if (ave_global(d))
        return &ave_all;
    return ave_2x2(d) ? &ave2 : &pool_table[d->mode];
}

/* The mask is kept where the planes go eight to a lane (and the 2x2 tall path, which
 * comes first, does not take them): one float per output, written for the planes of
 * the lanes' units, each unit's at its first plane's outputs (the planes past the last
 * eight find their maxima again), or a byte per output where every window is whole
 * (lanes_codes), each unit's at byte p * oh * ow of its first plane p. And where 3x3
 * stride-2 windows tile the plane (planes too large for the lanes): a byte per output,
 * plane p's at byte p * oh * ow. */
static int tiles_mask(const cd_pool_desc *d)
{
    return d->mode == CD_POOL_MAX && max3s2_tiles(d);
}

static int lanes_codes(const cd_pool_desc *d)
{
    return max_lanes(d) && lanes_whole3(d);
}

size_t cpu_pool_mask_size(cd_backend_t *be, const cd_pool_desc *d)
{
    (void)be;
    size_t outs = (size_t)d->n * d->c * d->oh * d->ow, bytes = (outs + sizeof(float) - 1) / sizeof(float);
    if (max_lanes(d) && !max2_tall(d))
        return lanes_codes(d) ? bytes : outs;
    return tiles_mask(d) ? bytes : 0;
}

// x is (n,c,h,w); y is (n,c,oh,ow); mask as cpu_pool_mask_size says
void cpu_pool_forward(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y, float *mask)
{
    if (d->mode < 0 || d->mode >= POOL_MODES)
        return;
    int nt = cpu_threads(be);
    int planes = d->n * d->c;
    size_t in = (size_t)d->h * d->w, out = (size_t)d->oh * d->ow;
    if (d->mode == CD_POOL_MAX && max2_tall(d)) {
        max2_tall_batch(be, d, x, y, NULL, NULL);
        return;
    }
    void (*fwd)(const cd_pool_desc *, const float *, float *) = plane_fns(d)->fwd;
    /* eights of planes a lane each where they are small (pairs of them at once where
     * max_lanes16 says), then planes one by one */
    int eights = max_lanes(d) ? planes / LANES : 0, units = unit_count(planes, eights);
    int pairs = max_lanes16(d) ? eights / 2 : 0, tasks = units - pairs;
#pragma omp parallel for num_threads(nt) if ((size_t)planes * in > CPU_PAR_MIN / 4) schedule(static)
    for (int t = 0; t < tasks; t++) {
        int u = t < pairs ? 2 * t : t + pairs;
        size_t p = unit_plane(u, eights);
        uint8_t *code = mask ? (uint8_t *)mask + p * out : NULL;
        if (t < pairs)
            max_lanes16_fwd(d, x + p * in, y + p * out, code);
        else if (u < eights)
            max_lanes_fwd(d, x + p * in, y + p * out, mask ? mask + p * out : NULL, code);
        else if (mask && tiles_mask(d))
            max3s2_tiles_fwd(d, x + p * in, y + p * out, (uint8_t *)mask + p * out);
        else
            fwd(d, x + p * in, y + p * out);
    }
}

/* dx is overwritten; y is not needed (the max is found again from x, or read from mask). */
// x, dx are (n,c,h,w); y, dy are (n,c,oh,ow); mask as cpu_pool_mask_size says
void cpu_pool_backward(cd_backend_t *be, const cd_pool_desc *d, const float *x, const float *y,
                       const float *mask, const float *dy, float *dx)
{
    (void)y;
    if (d->mode < 0 || d->mode >= POOL_MODES)
        return;
    int nt = cpu_threads(be);
    int planes = d->n * d->c;
    size_t in = (size_t)d->h * d->w, out = (size_t)d->oh * d->ow;
    if (d->mode == CD_POOL_MAX && max2_tall(d)) {
        max2_tall_batch(be, d, x, NULL, dy, dx);
        return;
    }
    void (*bwd)(const cd_pool_desc *, const float *, const float *, float *) = plane_fns(d)->bwd;
    int lanes = max_lanes(d) && (mask || max_lanes_bwd_wins(d));
    int eights = lanes ? planes / LANES : 0, units = unit_count(planes, eights);
    /* from the mask, pairs of eights and eights by lanes where every window is whole */
    int whole = mask && lanes && lanes_whole3(d), pairs = whole && max_lanes16(d) ? eights / 2 : 0;
    int tasks = units - pairs;
#pragma omp parallel for num_threads(nt) if ((size_t)planes * in > CPU_PAR_MIN / 4) schedule(static)
    for (int t = 0; t < tasks; t++) {
        int u = t < pairs ? 2 * t : t + pairs;
        size_t p = unit_plane(u, eights);
        const uint8_t *code = mask ? (const uint8_t *)mask + p * out : NULL;
        if (t < pairs)
            max_lanes16_mask_bwd(d, code, dy + p * out, dx + p * in);
        else if (u < eights && whole)
            max_lanes_mask_bwd(d, code, dy + p * out, dx + p * in);
        else if (u < eights && mask)
            max_mask_bwd(d, mask + p * out, dy + p * out, dx + p * in);
        else if (mask && tiles_mask(d))
            max3s2_tiles_mask_bwd(d, code, dy + p * out, dx + p * in);
        else
            (u < eights ? max_lanes_bwd : bwd)(d, x + p * in, dy + p * out, dx + p * in);
    }
}
