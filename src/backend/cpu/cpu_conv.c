/*
 * gemm and convolution by im2col + gemm (OpenBLAS).
 *
 * Several images share one gemm: the columns of a chunk of `nb` images are laid side
 * by side, col is (c*kh*kw, nb*P) with P = oh*ow, so a small layer (LeNet's 28x28)
 * still makes one large gemm that all BLAS threads can share. nb is chosen so that the
 * columns and a gathered (k, nb*P) output fit CPU_CONV_WORKSPACE_BYTES. With groups,
 * group g owns rows [g*Kg, (g+1)*Kg) of col and filters [g*kg, (g+1)*kg), one gemm each.
 *
 *   forward:          out_g (kg, nb*P)  = W_g (kg, Kg) * col_g (Kg, nb*P), then + bias
 *   backward data:    col_g (Kg, nb*P)  = W_g^T * dy_g (kg, nb*P), then col2im into dx
 *   backward filter:  dW_g (kg, Kg)    += dy_g * col_g^T;  db[k] += row sums of dy
 *
 * with Kg = (c/group)*kh*kw and kg = k/group. A chunk of one image reads and writes
 * the tensors in place, with no gather; a 1x1, stride 1, unpadded convolution of one
 * image needs no im2col either (x itself is the column matrix).
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

#include "cpu_internal.h"

/* cblas_sgemm, row-major, with beta 0 done here: OpenBLAS applies beta in a pass of its
 * own before the product (sgemm_beta), which for beta 0 runs at a fraction of memset's
 * speed (a 500x64 gradient column of LeNet's conv2: 57 us against 46 us with memset and
 * beta 1). C is zeroed row by row (ldc may exceed n), then accumulated into; the result
 * is the same as beta 0's, bit for bit. */
static void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float *a,
                  int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (beta == 0.0f) {
        if (ldc == n)
            memset(c, 0, (size_t)m * n * sizeof(float));
        else
            for (int i = 0; i < m; i++)
                memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The product of one image's operands (the per-image convolution below): by a kernel
 * for its shape where libxsmm has one (cpu_small_gemm), else BLAS. alpha is 1. */
static void image_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!cpu_small_gemm(ta == CblasTrans, tb == CblasTrans, m, n, k, a, lda, b, ldb, beta, c, ldc))
        sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* Products smaller than this many multiply-adds run as one BLAS call on one thread. */
#define GEMM_SPLIT_MIN (1 << 18)
/* Blocks of C are multiples of 16 floats (a cache line) and at least this wide. */
#define GEMM_BLOCK_MIN 64

/* C += alpha*op(A)*op(B) over k in parallel, for a small C and a long k (the filter
 * gradient of a small layer: C is (20, 25), k is 64 images x 576 positions). Each
 * thread takes a range of k; thread 0 writes C, the others a private partial C that
 * is added at the end. */
static void gemm_split_k(int nt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                         float alpha, const float *a, int lda, const float *b, int ldb,
                         float beta, float *c)
{
    size_t mn = (size_t)m * n;
    float *part = cd_xmalloc(mn * (size_t)(nt - 1) * sizeof(float));
    int used = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int lo = (int)((long)k * t / T), hi = (int)((long)k * (t + 1) / T);
        const float *ak = ta == CblasNoTrans ? a + lo : a + (size_t)lo * lda;
        const float *bk = tb == CblasNoTrans ? b + (size_t)lo * ldb : b + lo;
        if (t == 0)
            sgemm(ta, tb, m, n, hi - lo, alpha, ak, lda, bk, ldb, beta, c, n);
        else
            sgemm(ta, tb, m, n, hi - lo, alpha, ak, lda, bk, ldb, 0.0f,
                        part + (t - 1) * mn, n);
#pragma omp single
        used = T;
    }
    for (int t = 1; t < used; t++)
        for (size_t i = 0; i < mn; i++)
            c[i] += part[(t - 1) * mn + i];
    free(part);
}

/* C = alpha * A * op(B) with few rows of C against a large B (an InnerProduct's forward,
 * C = A * B^T: a batch of 32 against fc6's 4096x9216 weights; its data gradient, C = A * B:
 * 32 rows of dy against the same weights). With libxsmm (alpha 1), its kernels on panels
 * of B that they read in place, without BLAS's packing (cpu_skinny_gemm): the forward
 * multiplies B by A^T, each of B's rows a stream of k, two threads 11.9-12.5 -> 7.0-7.6 ms
 * at fc6 and 7.5-8.0 -> 3.3 at fc7; the data gradient on panels of 64 rows by 512
 * columns of B, 11.7-12.0 -> 9.5-10.3 ms at fc6. Otherwise as its transpose
 * T = op(B)^T * A^T by BLAS, transposed into C: OpenBLAS packs the weights faster as the
 * left operand (fc6's forward, one thread: 24.7 -> 19.2 ms; its data gradient, two
 * threads: 30 -> 19 ms, where cutting B's 9216-float rows into column blocks makes
 * OpenBLAS read them at a stride that is a multiple of 4 KB). Each thread takes a range of
 * op(B)'s columns, T's rows and C's columns. With B not transposed the flip is kept to
 * long products: at fc7's 4096x4096 it gains nothing from BLAS. */
#define GEMM_FLIP_M_MAX 64
#define GEMM_FLIP_B_MIN ((size_t)1 << 22)
#define GEMM_FLIP_NN_K_MIN 1024

static int gemm_flips(int trans_a, int trans_b, int m, int n, int k, float beta)
{
    return !trans_a && beta == 0.0f && m <= GEMM_FLIP_M_MAX && (size_t)n * k >= GEMM_FLIP_B_MIN &&
           (trans_b || k >= GEMM_FLIP_NN_K_MIN);
}

// a is A (m,k); b is op(B) (k,n) stored as (n,k) (trans_b) or (k,n); c is (m,n)
static void gemm_flipped(int threads, int trans_b, int m, int n, int k, float alpha, const float *a, const float *b,
                         float *c)
{
    if (alpha == 1.0f && cpu_skinny_gemm(threads, trans_b, m, n, k, a, b, c))
        return;
    float *t = cd_xmalloc((size_t)n * m * sizeof(float));
    int nt = n / GEMM_BLOCK_MIN < threads ? n / GEMM_BLOCK_MIN : threads;
#pragma omp parallel num_threads(nt > 1 ? nt : 1)
    {
        int id = omp_get_thread_num(), T = omp_get_num_threads();
        int lo = (int)((long)n * id / T) / 16 * 16, hi = id == T - 1 ? n : (int)((long)n * (id + 1) / T) / 16 * 16;
        if (hi > lo) {
            if (trans_b)
                sgemm(CblasNoTrans, CblasTrans, hi - lo, m, k, alpha, b + (size_t)lo * k, k, a, k, 0.0f,
                      t + (size_t)lo * m, m);
            else
                sgemm(CblasTrans, CblasTrans, hi - lo, m, k, alpha, b + lo, n, a, k, 0.0f, t + (size_t)lo * m, m);
            for (int i = 0; i < m; i++)
                for (int j = lo; j < hi; j++)
                    c[(size_t)i * n + j] = t[(size_t)j * m + i];
        }
    }
    free(t);
}

/*
 * C = alpha*op(A)*op(B) + beta*C, row-major; op(A) is (m,k), op(B) is (k,n), C is (m,n).
 *
 * One thread pool: OpenBLAS runs single-threaded (set in cd_backend_cpu_new) and a large
 * product is cut into blocks of C columns (or rows, when C is tall), one per OpenMP
 * thread, or into ranges of k when C is too small to cut. Letting OpenBLAS use its own
 * threads next to OpenMP's was about 2x slower on LeNet-sized layers: after each parallel
 * loop the OpenMP threads spin-wait on the very cores the BLAS threads need.
 */
// a is op(A) (m,k) stored as (m,k) or (k,m); b is op(B) (k,n) stored as (k,n) or (n,k); c is (m,n)
void cpu_gemm(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, const float *b, float beta, float *c)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { /* op(A)*op(B) is zero; BLAS would reject the leading dimensions */
        size_t mn = (size_t)m * n;
        if (beta == 0.0f)
            memset(c, 0, mn * sizeof(float));
        else
            cpu_scale(be, mn, beta, c, c);
        return;
    }
    const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    const int split_n = n >= m;
    const int len = split_n ? n : m;
    const int threads = cpu_threads(be);
    int nt = len / GEMM_BLOCK_MIN < threads ? len / GEMM_BLOCK_MIN : threads;
    if (gemm_flips(trans_a, trans_b, m, n, k, beta)) {
        gemm_flipped(threads, trans_b, m, n, k, alpha, a, b, c);
        return;
    }
    if (threads <= 1 || (double)m * n * k < GEMM_SPLIT_MIN) {
        sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
        return;
    }
    if (nt <= 1) {
        if (k >= threads * 4 * GEMM_BLOCK_MIN)
            gemm_split_k(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c);
        else
            sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int lo = (int)((long)len * t / T) / 16 * 16;
        int hi = t == T - 1 ? len : (int)((long)len * (t + 1) / T) / 16 * 16;
        if (hi > lo && split_n)
            sgemm(ta, tb, m, hi - lo, k, alpha, a, lda,
                        trans_b ? b + (size_t)lo * ldb : b + lo, ldb, beta, c + lo, n);
        else if (hi > lo)
            sgemm(ta, tb, hi - lo, n, k, alpha,
                        trans_a ? a + lo : a + (size_t)lo * lda, lda, b, ldb, beta,
                        c + (size_t)lo * n, n);
    }
}

/* The geometry every conv op derives from a descriptor. */
typedef struct conv_geom {
    int kg;     /* filters per group */
    int cg;     /* input channels per group */
    int Kg;     /* rows of col per group: cg*kh*kw */
    size_t P;   /* output positions per image: oh*ow */
    size_t chw; /* input floats per image */
    size_t kP;  /* output floats per image */
    int nb;     /* images per gemm */
    int direct; /* 1x1, stride 1, no padding: x is already the column matrix */
} conv_geom;

static conv_geom conv_geom_of(const cd_conv_desc *d)
{
    conv_geom g;
    g.kg = d->k / d->group;
    g.cg = d->c / d->group;
    g.Kg = g.cg * d->kh * d->kw;
    g.P = (size_t)d->oh * d->ow;
    g.chw = (size_t)d->c * d->h * d->w;
    g.kP = (size_t)d->k * g.P;
    size_t per_image = ((size_t)d->c * d->kh * d->kw + d->k) * g.P;
    size_t fit = per_image ? CPU_CONV_WORKSPACE_BYTES / sizeof(float) / per_image : 1;
    g.nb = fit < 1 ? 1 : fit > (size_t)d->n ? d->n : (int)fit;
    if (g.nb < 1)
        g.nb = 1;
    g.direct = d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 &&
               d->pw == 0 && d->oh == d->h && d->ow == d->w;
    return g;
}

/* ---- strided widths ---------------------------------------------------------------
 * With a horizontal stride sw > 1, a tap reads every sw-th pixel of a row, x[y][ox*sw +
 * xoff]. Split into its sw decimated planes, dec_r[y][i] = x[y][i*sw + r], the plane
 * gives every tap a contiguous row: x[y][ox*sw + xoff] = dec_r[y][ox + base] with
 * r = xoff mod sw and base = floor(xoff / sw). AlexNet's conv1 (11x11, stride 4) reads
 * each pixel for up to 9 taps; decimated, each pixel is gathered once and the taps'
 * rows are copies (conv1's forward plus filter gradient: 77-98 ms a batch of 32 before,
 * 65-77 after). im2col and col2im move the taps' rows of the plane itself, of row length
 * w, or of its decimated copy, of row length dec_width. */

/* The decimated width: dec_r's rows are this long for every r. */
static size_t dec_width(const cd_conv_desc *d)
{
    return ((size_t)d->w + d->sw - 1) / d->sw;
}

/* Floats of one plane's decimated copy, 0 where the stride is 1. */
static size_t dec_floats(const cd_conv_desc *d)
{
    return d->sw > 1 ? (size_t)d->sw * d->h * dec_width(d) : 0;
}

/* The row length of the rows taps read: the plane's, or its decimated copy's. */
static size_t tap_row_len(const cd_conv_desc *d)
{
    return d->sw > 1 ? dec_width(d) : (size_t)d->w;
}

/* Where kernel tap q = ki*kw + kj reads: input pixel (oy*sh + yoff, ox*sw + xoff) for
 * output (oy, ox), inside the image for oy in [ylo, yhi) and ox in [xlo, xhi). Its row
 * for output row ylo starts at src in the rows it reads (tap_row_len), indexed by output
 * column. */
typedef struct conv_tap {
    int yoff, ylo, yhi, xoff, xlo, xhi;
    ptrdiff_t src;
} conv_tap;

static conv_tap conv_tap_of(const cd_conv_desc *d, int q)
{
    conv_tap t;
    t.yoff = q / d->kw * d->dh - d->ph;
    t.xoff = q % d->kw * d->dw - d->pw;
    cpu_valid_range(d->oh, d->sh, t.yoff, d->h, &t.ylo, &t.yhi);
    cpu_valid_range(d->ow, d->sw, t.xoff, d->w, &t.xlo, &t.xhi);
    ptrdiff_t col = t.xoff;
    if (d->sw > 1) { /* dec_r's column ox + base */
        int r = ((t.xoff % d->sw) + d->sw) % d->sw;
        col = (ptrdiff_t)r * d->h * (ptrdiff_t)dec_width(d) + (t.xoff - r) / d->sw;
    }
    t.src = col + (ptrdiff_t)(t.ylo * d->sh + t.yoff) * (ptrdiff_t)tap_row_len(d);
    return t;
}

/* The taps of a kernel of at most CONV_TAPS_MAX taps into buf, computed once per op;
 * NULL for a larger kernel, whose taps are computed where they are used. */
#define CONV_TAPS_MAX 256
static const conv_tap *conv_taps(const cd_conv_desc *d, conv_tap *buf)
{
    int taps = d->kh * d->kw;
    if (taps > CONV_TAPS_MAX)
        return NULL;
    for (int q = 0; q < taps; q++)
        buf[q] = conv_tap_of(d, q);
    return buf;
}

/* ---- rows of a tap ----------------------------------------------------------------
 * im2col and col2im move a tap's rows of n floats: output row i at dst + i * dstep and
 * input row i at src + i * sstep. LeNet's conv2 moves 4000 rows of 8 floats an image,
 * where a loop of unknown trip count spends more on its checks than on the copy; for
 * n up to ROW_FIXED_MAX the switch below calls the loop with n a constant, which GCC
 * turns into straight moves (CMakeLists.txt keeps GCC from making the loops memcpy
 * calls, which cost more than these copies). The switch is CPU_INLINE, compiled
 * in each version of its callers, im2col_plane and col2im_plane. */
#define ROW_FIXED_MAX 32
#define ROW_WIDTHS(X)                                                                                          \
    X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) \
    X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31) X(32)

/* row i of dst = row i of src (add 0), or += it (add 1) */
CPU_INLINE void rows_n(float *restrict dst, size_t dstep, const float *restrict src, size_t sstep, int rows, int n,
                       int add)
{
    for (int i = 0; i < rows; i++, dst += dstep, src += sstep)
        for (int j = 0; j < n; j++)
            dst[j] = add ? dst[j] + src[j] : src[j];
}

CPU_INLINE void rows_move(float *restrict dst, size_t dstep, const float *restrict src, size_t sstep, int rows,
                          int n, int add)
{
    switch (n) {
#define ROW_CASE(N)                                                                                            \
    case N: rows_n(dst, dstep, src, sstep, rows, N, add); return;
        ROW_WIDTHS(ROW_CASE)
#undef ROW_CASE
    default: rows_n(dst, dstep, src, sstep, rows, n, add);
    }
}

/* `rows` rows of ow floats of one tap at r, for a stride-1 width: row i copies
 * src[xlo, xhi) (src advancing by step) and is 0 outside it. */
CPU_INLINE void tap_rows_unit(float *restrict r, const float *restrict src, int rows, int ow, size_t step, int xlo,
                              int xhi)
{
    if (xlo > 0 || xhi < ow)
        for (int i = 0; i < rows; i++) {
            float *ri = r + (size_t)i * ow;
            for (int ox = 0; ox < xlo; ox++)
                ri[ox] = 0.0f;
            for (int ox = xhi; ox < ow; ox++)
                ri[ox] = 0.0f;
        }
    if (xhi > xlo)
        rows_move(r + xlo, (size_t)ow, src + xlo, step, rows, xhi - xlo, 0);
}

/* A plane and its decimated copy (dec is (sw, h, dec_width): dec[(r*h + y)*wd + i] =
 * xi[y*w + i*sw + r] for i*sw + r < w), one into the other: gather, from = xi and to = dec;
 * else the reverse. */
CPU_INLINE void decimated_rows(const float *restrict from, float *restrict to, int h, int w, int sw, size_t wd,
                               int gather)
{
    const size_t fs = gather ? (size_t)sw : 1, ts = gather ? 1 : (size_t)sw;
    for (int r = 0; r < sw; r++) {
        size_t len = ((size_t)w - r + sw - 1) / sw;
        for (int y = 0; y < h; y++) {
            size_t at_x = (size_t)y * w + r, at_dec = ((size_t)r * h + y) * wd;
            const float *f = from + (gather ? at_x : at_dec);
            float *t = to + (gather ? at_dec : at_x);
            for (size_t i = 0; i < len; i++)
                t[i * ts] = f[i * fs];
        }
    }
}

/* Strides 2 and 4 (the common ones) with the stride a constant, which GCC vectorizes. */
CPU_INLINE void conv_decimated(const cd_conv_desc *d, const float *restrict from, float *restrict to, int gather)
{
    size_t wd = dec_width(d);
    switch (d->sw) {
    case 2: decimated_rows(from, to, d->h, d->w, 2, wd, gather); return;
    case 4: decimated_rows(from, to, d->h, d->w, 4, wd, gather); return;
    default: decimated_rows(from, to, d->h, d->w, d->sw, wd, gather);
    }
}

/* Unfolds one (image, channel) plane xi into its taps' rows of col, row q at
 * col + q * ld (ld: the column matrix's row length); padding reads 0. tv: the taps
 * (conv_taps) or NULL; dec: dec_floats(d) floats of workspace. */
CD_CLONES
static void im2col_plane(const cd_conv_desc *d, const conv_tap *tv, const float *xi, float *col, size_t ld,
                         float *dec)
{
    const int oh = d->oh, ow = d->ow, taps = d->kh * d->kw;
    const size_t step = (size_t)d->sh * tap_row_len(d);
    const float *rows = xi; /* the rows taps read */
    if (d->sw > 1) {
        conv_decimated(d, xi, dec, 1);
        rows = dec;
    }
    for (int q = 0; q < taps; q++) {
        conv_tap t = tv ? tv[q] : conv_tap_of(d, q);
        float *row = col + (size_t)q * ld;
        if (t.ylo > 0)
            memset(row, 0, (size_t)t.ylo * ow * sizeof(float));
        tap_rows_unit(row + (size_t)t.ylo * ow, rows + t.src, t.yhi - t.ylo, ow, step, t.xlo, t.xhi);
        if (t.yhi < oh)
            memset(row + (size_t)t.yhi * ow, 0, (size_t)(oh - t.yhi) * ow * sizeof(float));
    }
}

/* The adjoint of im2col_plane: the taps' rows of col added back into the plane xi,
 * which is overwritten; with a stride, into the decimated plane dec, then interleaved.
 * Either way each pixel sums its taps in tap order. */
CD_CLONES
static void col2im_plane(const cd_conv_desc *d, const conv_tap *tv, const float *col, size_t ld, float *xi,
                         float *dec)
{
    const int ow = d->ow, taps = d->kh * d->kw;
    const size_t step = (size_t)d->sh * tap_row_len(d);
    float *rows = d->sw > 1 ? dec : xi; /* where the taps add up */
    memset(rows, 0, (d->sw > 1 ? dec_floats(d) : (size_t)d->h * d->w) * sizeof(float));
    for (int q = 0; q < taps; q++) {
        conv_tap t = tv ? tv[q] : conv_tap_of(d, q);
        const float *row = col + (size_t)q * ld;
        if (t.yhi <= t.ylo || t.xhi <= t.xlo)
            continue;
        rows_move(rows + t.src + t.xlo, step, row + (size_t)t.ylo * ow + t.xlo, (size_t)ow, t.yhi - t.ylo,
                  t.xhi - t.xlo, 1);
    }
    if (d->sw > 1)
        conv_decimated(d, dec, xi, 0);
}

/* Unfolds nb images into columns: row (ch,ki,kj), column (b,oy,ox). */
// x is (nb, c, h, w); col is (c*kh*kw, nb*oh*ow); dec is nt * dec_floats(d) floats of workspace
static void im2col(int nt, const cd_conv_desc *d, int nb, const float *x, float *col, float *dec)
{
    const size_t decf = dec_floats(d);
    const int c = d->c, taps = d->kh * d->kw;
    const size_t P = (size_t)d->oh * d->ow, ld = (size_t)nb * P, hw = (size_t)d->h * d->w;
    conv_tap buf[CONV_TAPS_MAX];
    const conv_tap *tv = conv_taps(d, buf);
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
    for (int b = 0; b < nb; b++)
        for (int ch = 0; ch < c; ch++)
            im2col_plane(d, tv, x + ((size_t)b * c + ch) * hw, col + (size_t)ch * taps * ld + (size_t)b * P, ld,
                         dec + decf * (size_t)omp_get_thread_num());
}

/* The adjoint of im2col: dx is overwritten; one thread owns each (image, channel)
 * plane, so no races. */
// col is (c*kh*kw, nb*oh*ow); dx is (nb, c, h, w); dec is nt * dec_floats(d) floats of workspace
static void col2im(int nt, const cd_conv_desc *d, int nb, const float *col, float *dx, float *dec)
{
    const size_t decf = dec_floats(d);
    const int c = d->c, taps = d->kh * d->kw;
    const size_t P = (size_t)d->oh * d->ow, ld = (size_t)nb * P, hw = (size_t)d->h * d->w;
    conv_tap buf[CONV_TAPS_MAX];
    const conv_tap *tv = conv_taps(d, buf);
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
    for (int b = 0; b < nb; b++)
        for (int ch = 0; ch < c; ch++)
            col2im_plane(d, tv, col + (size_t)ch * taps * ld + (size_t)b * P, ld, dx + ((size_t)b * c + ch) * hw,
                         dec + decf * (size_t)omp_get_thread_num());
}

/* Moves nb images between the batch layout (nb, k, P) and the gemm layout (k, nb*P). */
// t is (nb, k, P); m is (k, nb*P)
CD_CLONES
static void batch_to_gemm(int nt, int nb, int k, size_t P, const float *t, float *m)
{
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
    for (int b = 0; b < nb; b++)
        for (int kk = 0; kk < k; kk++)
            memcpy(m + ((size_t)kk * nb + b) * P, t + ((size_t)b * k + kk) * P, P * sizeof(float));
}

/* The reverse of batch_to_gemm, adding bias[kk] (when not NULL) on the way. */
// m is (k, nb*P); t is (nb, k, P); bias is (k)
CD_CLONES
static void gemm_to_batch(int nt, int nb, int k, size_t P, const float *m, const float *bias,
                          float *t)
{
#pragma omp parallel for num_threads(nt) collapse(2) schedule(static)
    for (int b = 0; b < nb; b++) {
        for (int kk = 0; kk < k; kk++) {
            const float *s = m + ((size_t)kk * nb + b) * P;
            float *dst = t + ((size_t)b * k + kk) * P;
            float bv = bias ? bias[kk] : 0.0f;
            for (size_t p = 0; p < P; p++)
                dst[p] = s[p] + bv;
        }
    }
}

/* The workspace of one conv op: a chunk's columns, then a gathered (k, nb*P) matrix
 * (the forward's output, the backward's dy), then each thread's decimated plane. Held
 * from conv_work_begin to cpu_scratch_release. */
typedef struct conv_work {
    int nt;
    conv_geom g;
    float *col;    /* (c*kh*kw, nb*P) */
    float *gather; /* (k, nb*P) */
    float *dec;    /* nt * dec_floats */
} conv_work;

static conv_work conv_work_begin(cd_backend_t *be, const cd_conv_desc *d)
{
    conv_work wk;
    wk.nt = cpu_threads(be);
    wk.g = conv_geom_of(d);
    size_t col_floats = (size_t)d->c * d->kh * d->kw * wk.g.nb * wk.g.P;
    wk.col = cpu_scratch_acquire(be, col_floats + wk.g.kP * wk.g.nb + dec_floats(d) * (size_t)wk.nt);
    wk.gather = wk.col + col_floats;
    wk.dec = wk.gather + wk.g.kP * wk.g.nb;
    return wk;
}

/* How many images the chunk that starts at image i0 holds. */
static int conv_chunk_images(const cd_conv_desc *d, const conv_work *wk, int i0)
{
    return d->n - i0 < wk->g.nb ? d->n - i0 : wk->g.nb;
}

/* The column matrix of a chunk of nb images at xb: x itself where it already is one. */
// xb is (nb, c, h, w); the result is (c*kh*kw, nb*P)
static const float *conv_columns(const conv_work *wk, const cd_conv_desc *d, int nb,
                                 const float *xb)
{
    if (wk->g.direct && nb == 1)
        return xb;
    im2col(wk->nt, d, nb, xb, wk->col, wk->dec);
    return wk->col;
}

/* dy of a chunk of nb images in the gemm layout: dyb itself for one image. */
// dyb is (nb, k, P); the result is (k, nb*P)
static const float *conv_dy_gemm(const conv_work *wk, const cd_conv_desc *d, int nb,
                                 const float *dyb)
{
    if (nb == 1)
        return dyb;
    batch_to_gemm(wk->nt, nb, d->k, wk->g.P, dyb, wk->gather);
    return wk->gather;
}

/* One gemm per group: C_g = op(A_g) * op(B_g) + beta * C_g for g < groups, where
 * A_g = a + g * sa, B_g = b + g * sb and C_g = c + g * sc. */
static void group_gemm(cd_backend_t *be, int groups, int ta, int tb, int m, int n, int k,
                       const float *a, size_t sa, const float *b, size_t sb, float beta, float *c,
                       size_t sc)
{
    for (int gr = 0; gr < groups; gr++)
        cpu_gemm(be, ta, tb, m, n, k, 1.0f, a + gr * sa, b + gr * sb, beta, c + gr * sc);
}

// y is (k, P) of one image; bias is (k)
CD_CLONES
static void add_bias(int nt, int k, size_t P, const float *bias, float *y)
{
#pragma omp parallel for num_threads(nt) if ((size_t)k * P > CPU_PAR_MIN) schedule(static)
    for (int kk = 0; kk < k; kk++) {
        float *r = y + (size_t)kk * P;
        for (size_t p = 0; p < P; p++)
            r[p] += bias[kk];
    }
}

// y is (k, P) of one image, overwritten with bias[kk] in row kk
CD_CLONES
static void fill_bias(int k, size_t P, const float *bias, float *y)
{
    for (int kk = 0; kk < k; kk++) {
        float *r = y + (size_t)kk * P;
        for (size_t p = 0; p < P; p++)
            r[p] = bias[kk];
    }
}

/* ---- batches: one image at a time per thread -------------------------------------------
 * A batch of at least as many images as threads runs one image per step of a single
 * parallel loop: each thread unfolds its image into its own columns and multiplies them
 * on its own (OpenBLAS is single-threaded here), with no batch-wide column matrix to
 * stream through memory and no parallel region per gemm. An image's columns are unfolded
 * a chunk of a group's channels at a time, the chunk sized to CONV_CHUNK_BYTES so that it
 * is still in the core's cache when the gemm packs it: AlexNet's conv2 (a group's columns
 * are 3.5 MB) runs its three products 1.4-2x faster in chunks of 10 channels (730 KB)
 * than whole, and LeNet's layers are one chunk. The filter gradient sums into
 * CONV_FILTER_SLOTS partial gradients, each over a fixed range of images, added in order
 * at the end, so the result does not depend on the thread count (from 1 to the batch,
 * at most CONV_FILTER_SLOTS: the threads this path runs on). */

#define CONV_CHUNK_BYTES ((size_t)768 << 10)   /* columns unfolded per gemm */
#define CONV_CHANNEL_MAX ((size_t)4 << 20)     /* bytes of one channel's columns */
#define CONV_IMAGE_DW_MAX ((size_t)1 << 22)    /* floats of the filter gradient */
#define CONV_FILTER_SLOTS 8

/* The channel chunks of a group: cc channels each (the last may hold fewer). */
static int conv_chunk_channels(const cd_conv_desc *d, const conv_geom *g)
{
    size_t per = (size_t)d->kh * d->kw * g->P * sizeof(float);
    size_t fit = per ? CONV_CHUNK_BYTES / per : (size_t)g->cg;
    int cc = fit < 1 ? 1 : fit > (size_t)g->cg ? g->cg : (int)fit;
    int chunks = (g->cg + cc - 1) / cc;
    return (g->cg + chunks - 1) / chunks; /* the same count of chunks, evened out */
}

static int conv_per_image(cd_backend_t *be, const cd_conv_desc *d, const conv_geom *g)
{
    int nt = cpu_threads(be);
    return d->n >= 2 && d->n >= nt && nt <= CONV_FILTER_SLOTS && !g->direct &&
           (size_t)d->kh * d->kw * g->P * sizeof(float) <= CONV_CHANNEL_MAX &&
           (size_t)d->k * g->Kg <= CONV_IMAGE_DW_MAX;
}

/* One chunk of one image: group gr's channels [c0, c0 + cc) (c0 within the group). */
typedef struct conv_chunk {
    int gr, c0, cc;
} conv_chunk;

/* The q-th of an image's group * ceil(cg / cc) chunks, group by group. */
static conv_chunk conv_chunk_at(const conv_geom *g, int cc, int q)
{
    int per_group = (g->cg + cc - 1) / cc;
    conv_chunk ch = {q / per_group, q % per_group * cc, 0};
    ch.cc = g->cg - ch.c0 < cc ? g->cg - ch.c0 : cc;
    return ch;
}

static int conv_chunk_count(const cd_conv_desc *d, const conv_geom *g, int cc)
{
    return d->group * ((g->cg + cc - 1) / cc);
}

/* image b's columns of one chunk, (cc*kh*kw, P), into col; dec: dec_floats(d) floats of workspace */
static void chunk_columns(const cd_conv_desc *d, const conv_tap *tv, const conv_geom *g, const float *x, int b,
                          conv_chunk ch, float *col, float *dec)
{
    const size_t hw = (size_t)d->h * d->w, taps = (size_t)d->kh * d->kw;
    const float *xb = x + (size_t)b * g->chw + (size_t)(ch.gr * g->cg + ch.c0) * hw;
    for (int c = 0; c < ch.cc; c++)
        im2col_plane(d, tv, xb + c * hw, col + c * taps * g->P, g->P, dec);
}

/* Where a chunk's rows start in W or dW (k, cg*kh*kw): its group's filters, its channels' columns. */
static size_t chunk_filter_offset(const cd_conv_desc *d, const conv_geom *g, conv_chunk ch)
{
    return (size_t)ch.gr * g->kg * g->Kg + (size_t)ch.c0 * d->kh * d->kw;
}

static void forward_per_image(cd_backend_t *be, const cd_conv_desc *d, const conv_geom *g, const float *x,
                              const float *w, const float *bias, float *y)
{
    conv_tap buf[CONV_TAPS_MAX];
    const conv_tap *tv = conv_taps(d, buf);
    int nt = cpu_threads(be), cc = conv_chunk_channels(d, g), taps = d->kh * d->kw;
    int chunks = conv_chunk_count(d, g, cc);
    size_t colf = (size_t)cc * taps * g->P, per = colf + dec_floats(d); /* a thread's columns, then its dec */
    float *scratch = cpu_scratch_acquire(be, per * (size_t)nt);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < d->n; b++) {
        float *col = scratch + per * (size_t)omp_get_thread_num();
        float *yb = y + (size_t)b * g->kP;
        if (bias) /* the bias is where the product accumulates: no zeroing pass, no bias pass */
            fill_bias(d->k, g->P, bias, yb);
        for (int q = 0; q < chunks; q++) {
            conv_chunk ch = conv_chunk_at(g, cc, q);
            chunk_columns(d, tv, g, x, b, ch, col, col + colf);
            image_gemm(CblasNoTrans, CblasNoTrans, g->kg, (int)g->P, ch.cc * taps, w + chunk_filter_offset(d, g, ch),
                       g->Kg, col, (int)g->P, bias || ch.c0 > 0 ? 1.0f : 0.0f, yb + (size_t)ch.gr * g->kg * g->P,
                       (int)g->P);
        }
    }
    cpu_scratch_release(be);
}

static void backward_data_per_image(cd_backend_t *be, const cd_conv_desc *d, const conv_geom *g, const float *w,
                                    const float *dy, float *dx)
{
    conv_tap buf[CONV_TAPS_MAX];
    const conv_tap *tv = conv_taps(d, buf);
    int nt = cpu_threads(be), cc = conv_chunk_channels(d, g), taps = d->kh * d->kw;
    int chunks = conv_chunk_count(d, g, cc);
    size_t colf = (size_t)cc * taps * g->P, per = colf + dec_floats(d), hw = (size_t)d->h * d->w;
    float *scratch = cpu_scratch_acquire(be, per * (size_t)nt);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < d->n; b++) {
        float *col = scratch + per * (size_t)omp_get_thread_num();
        for (int q = 0; q < chunks; q++) {
            conv_chunk ch = conv_chunk_at(g, cc, q);
            image_gemm(CblasTrans, CblasNoTrans, ch.cc * taps, (int)g->P, g->kg, w + chunk_filter_offset(d, g, ch),
                       g->Kg, dy + (size_t)b * g->kP + (size_t)ch.gr * g->kg * g->P, (int)g->P, 0.0f, col, (int)g->P);
            float *dxc = dx + (size_t)b * g->chw + (size_t)(ch.gr * g->cg + ch.c0) * hw;
            for (int c = 0; c < ch.cc; c++)
                col2im_plane(d, tv, col + (size_t)c * taps * g->P, g->P, dxc + c * hw, col + colf);
        }
    }
    cpu_scratch_release(be);
}

/* dy of one image, (k, P), into dyt as (P, k) */
CD_CLONES
static void transpose_dy(int k, size_t P, const float *dy, float *dyt)
{
    for (int kk = 0; kk < k; kk++)
        for (size_t p = 0; p < P; p++)
            dyt[p * k + kk] = dy[(size_t)kk * P + p];
}

/* row[r] += the slots' partial sums part[sl * stride + at + r * step], sl in order: one row of dw,
 * contiguous in each slot (step 1) or, in a transposed slot, a column (step k). */
CD_CLONES
static void add_slots(float *restrict row, int n, const float *restrict part, size_t stride, int slots, size_t at,
                      size_t step)
{
    for (int sl = 0; sl < slots; sl++) {
        const float *restrict ps = part + stride * (size_t)sl + at;
        if (step == 1)
            for (int r = 0; r < n; r++)
                row[r] += ps[r];
        else
            for (int r = 0; r < n; r++)
                row[r] += ps[(size_t)r * step];
    }
}

/* With one group, at least CONV_FLIP_ROWS_MIN rows of columns and a product libxsmm
 * takes, each slot's gradient is summed transposed, (Kg, k): a chunk's rows of it are its columns times dy
 * transposed, a product with no operand transposed (which libxsmm takes, where dy times
 * the columns transposed it does not; LeNet's conv2, one image's product in cache: 160
 * to 180 GFLOP/s, its whole filter gradient 1.22-1.24 to 1.06-1.15 ms), and the slots
 * are added into dw transposed back. With few rows the transposition of dy (k*P floats
 * against the product's 2*Kg*k*P operations) costs more than it saves: LeNet's conv1
 * (Kg 25) went from 0.25 to 0.45 ms. */
#define CONV_FLIP_ROWS_MIN 128
static void backward_filter_per_image(cd_backend_t *be, const cd_conv_desc *d, const conv_geom *g, const float *x,
                                      const float *dy, float *dw)
{
    conv_tap buf[CONV_TAPS_MAX];
    const conv_tap *tv = conv_taps(d, buf);
    int nt = cpu_threads(be), slots = d->n < CONV_FILTER_SLOTS ? d->n : CONV_FILTER_SLOTS;
    int cc = conv_chunk_channels(d, g), taps = d->kh * d->kw, chunks = conv_chunk_count(d, g, cc);
    const int flip = d->group == 1 && g->Kg >= CONV_FLIP_ROWS_MIN &&
                     cpu_small_gemm_takes(0, 0, cc * taps, d->k, (int)g->P);
    size_t colf = (size_t)cc * taps * g->P, decf = dec_floats(d), dyf = flip ? g->kP : 0;
    size_t per = colf + decf + dyf, dwf = (size_t)d->k * g->Kg;
    float *scratch = cpu_scratch_acquire(be, per * (size_t)nt + dwf * (size_t)slots);
    float *part = scratch + per * (size_t)nt;
#pragma omp parallel num_threads(nt)
    {
        float *col = scratch + per * (size_t)omp_get_thread_num(), *dec = col + colf, *dyt = dec + decf;
#pragma omp for schedule(static)
        for (int sl = 0; sl < slots; sl++) {
            int lo = (int)((long)d->n * sl / slots), hi = (int)((long)d->n * (sl + 1) / slots);
            float *ps = part + dwf * (size_t)sl;
            for (int b = lo; b < hi; b++) {
                const float *dyb = dy + (size_t)b * g->kP;
                if (flip)
                    transpose_dy(d->k, g->P, dyb, dyt);
                for (int q = 0; q < chunks; q++) {
                    conv_chunk ch = conv_chunk_at(g, cc, q);
                    chunk_columns(d, tv, g, x, b, ch, col, dec);
                    float beta = b == lo ? 0.0f : 1.0f;
                    if (flip)
                        image_gemm(CblasNoTrans, CblasNoTrans, ch.cc * taps, d->k, (int)g->P, col, (int)g->P, dyt,
                                   d->k, beta, ps + (size_t)ch.c0 * taps * d->k, d->k);
                    else
                        sgemm(CblasNoTrans, CblasTrans, g->kg, ch.cc * taps, (int)g->P, 1.0f,
                              dyb + (size_t)ch.gr * g->kg * g->P, (int)g->P, col, (int)g->P, beta,
                              ps + chunk_filter_offset(d, g, ch), g->Kg);
                }
            }
        }
        /* dw[f][r] += the slots' sums, in slot order (each thread a range of filters f, a slot at a time along
         * the row: the same sums as one element at a time, in cache); transposed, slot sl's is at r * k + f */
#pragma omp for schedule(static)
        for (int f = 0; f < d->k; f++)
            add_slots(dw + (size_t)f * g->Kg, g->Kg, part, dwf, slots, flip ? (size_t)f : (size_t)f * g->Kg,
                      flip ? (size_t)d->k : 1);
    }
    cpu_scratch_release(be);
}

/* y = conv(x, w) + bias, overwritten. */
// x is (n,c,h,w); w is (k, c/group, kh, kw); bias is (k) or NULL; y is (n,k,oh,ow)
void cpu_conv_forward(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *w,
                      const float *bias, float *y)
{
    conv_geom pg = conv_geom_of(d);
    if (conv_per_image(be, d, &pg)) {
        forward_per_image(be, d, &pg, x, w, bias, y);
        return;
    }
    conv_work wk = conv_work_begin(be, d);
    const conv_geom g = wk.g;
    for (int i0 = 0; i0 < d->n; i0 += g.nb) {
        int nb = conv_chunk_images(d, &wk, i0);
        float *yb = y + (size_t)i0 * g.kP;
        const float *col = conv_columns(&wk, d, nb, x + (size_t)i0 * g.chw);
        size_t N = (size_t)nb * g.P;
        float *out = nb == 1 ? yb : wk.gather;
        group_gemm(be, d->group, 0, 0, g.kg, (int)N, g.Kg, w, (size_t)g.kg * g.Kg, col,
                   g.Kg * N, 0.0f, out, g.kg * N);
        if (nb == 1) {
            if (bias)
                add_bias(wk.nt, d->k, g.P, bias, yb);
        } else {
            gemm_to_batch(wk.nt, nb, d->k, g.P, out, bias, yb);
        }
    }
    cpu_scratch_release(be);
}

/* dx = conv^T(dy, w), overwritten. */
// w is (k, c/group, kh, kw); dy is (n,k,oh,ow); dx is (n,c,h,w)
void cpu_conv_backward_data(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                            const float *dy, float *dx)
{
    conv_geom pg = conv_geom_of(d);
    if (conv_per_image(be, d, &pg)) {
        backward_data_per_image(be, d, &pg, w, dy, dx);
        return;
    }
    conv_work wk = conv_work_begin(be, d);
    const conv_geom g = wk.g;
    for (int i0 = 0; i0 < d->n; i0 += g.nb) {
        int nb = conv_chunk_images(d, &wk, i0);
        float *dxb = dx + (size_t)i0 * g.chw;
        size_t N = (size_t)nb * g.P;
        const float *dym = conv_dy_gemm(&wk, d, nb, dy + (size_t)i0 * g.kP);
        int direct = g.direct && nb == 1;
        float *col = direct ? dxb : wk.col;
        group_gemm(be, d->group, 1, 0, g.Kg, (int)N, g.kg, w, (size_t)g.kg * g.Kg, dym,
                   g.kg * N, 0.0f, col, g.Kg * N);
        if (!direct)
            col2im(wk.nt, d, nb, col, dxb, wk.dec);
    }
    cpu_scratch_release(be);
}

/* dw += dy (x) columns of x, in chunks of images unfolded batch-wide. */
static void backward_filter_batched(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *dy,
                                    float *dw)
{
    conv_work wk = conv_work_begin(be, d);
    const conv_geom g = wk.g;
    for (int i0 = 0; i0 < d->n; i0 += g.nb) {
        int nb = conv_chunk_images(d, &wk, i0);
        size_t N = (size_t)nb * g.P;
        const float *col = conv_columns(&wk, d, nb, x + (size_t)i0 * g.chw);
        const float *dym = conv_dy_gemm(&wk, d, nb, dy + (size_t)i0 * g.kP);
        group_gemm(be, d->group, 0, 1, g.kg, g.Kg, (int)N, dym, g.kg * N, col, g.Kg * N, 1.0f, dw,
                   (size_t)g.kg * g.Kg);
    }
    cpu_scratch_release(be);
}

/* The sum of r[0..n) in BIAS_LANES interleaved partial sums, added pairwise at the end:
 * a fixed order that vectorizes (a single running sum cannot be reordered). */
#define BIAS_LANES 8
CPU_INLINE float sum_floats(const float *r, size_t n)
{
    float acc[BIAS_LANES] = {0};
    size_t p = 0;
    for (; p + BIAS_LANES <= n; p += BIAS_LANES)
        for (int l = 0; l < BIAS_LANES; l++)
            acc[l] += r[p + l];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; p < n; p++)
        s += r[p];
    return s;
}

/* db += sum of dy over images and positions. */
CD_CLONES
static void bias_grad(int nt, const cd_conv_desc *d, const conv_geom *g, const float *dy, float *db)
{
    size_t total = (size_t)d->n * g->kP;
#pragma omp parallel for num_threads(nt) if (total > CPU_PAR_MIN) schedule(static)
    for (int kk = 0; kk < d->k; kk++) {
        double s = 0.0;
        for (int i = 0; i < d->n; i++) {
            s += sum_floats(dy + (size_t)i * g->kP + (size_t)kk * g->P, g->P);
        }
        db[kk] += (float)s;
    }
}

/* dw += dy (x) columns of x; db += sum of dy over images and positions. */
// x is (n,c,h,w); dy is (n,k,oh,ow); dw is (k, c/group, kh, kw); db is (k) or NULL
void cpu_conv_backward_filter(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                              const float *dy, float *dw, float *db)
{
    conv_geom g = conv_geom_of(d);
    if (conv_per_image(be, d, &g))
        backward_filter_per_image(be, d, &g, x, dy, dw);
    else
        backward_filter_batched(be, d, x, dy, dw);
    if (db)
        bias_grad(cpu_threads(be), d, &g, dy, db);
}
