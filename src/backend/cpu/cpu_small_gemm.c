/*
 * Small products by libxsmm: kernels it generates at run time for one shape (m, n, k,
 * leading dimensions, beta) and the processor's instruction set, looked up again by
 * shape on each call (its registry: a hash of the shape). A convolution that runs an
 * image at a time multiplies one image's columns: LeNet's conv2 is (50 x 500) by
 * (500 x 64), where OpenBLAS, made for large products, spends much of each call packing
 * and on its edges. One thread, the operands in cache, GFLOP/s, OpenBLAS against
 * libxsmm 1.17's AVX-512 kernels: LeNet's conv2 forward 155 to 232, its backward data
 * (500 x 50 by 50 x 64) 187 to 230. LeNet's forward + backward (bench_net) went from
 * 5.23-5.36 to 4.51-4.54 ms.
 *
 * libxsmm is column-major, so a row-major C = op(A) op(B) is asked for as the
 * column-major C^T = op(B)^T op(A)^T: libxsmm's A is our B and its B our A. Its kernels
 * take alpha 1 and beta 0 or 1, and of the transposes only its B (our A) may be one:
 * anything else, a processor libxsmm generates nothing for, or a build without it, gets
 * 0 and the caller runs BLAS. A kernel sums each element in one fixed order: the same
 * bits from run to run and for any thread count (not the same bits as OpenBLAS).
 */
#include <cblas.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>

#include "cdigits/util.h"

#include "cpu_internal.h"

#ifdef CD_HAVE_LIBXSMM
#include <libxsmm.h>

/* Products up to this many bytes of A, B and C: LeNet's (240 KB). A kernel reads its
 * operands where they lie, without packing them into blocks that stay in L1 as BLAS
 * does: AlexNet's conv2 forward, a chunk of 10 channels of columns (730 KB), went from
 * 46-48 to 52-55 ms. */
#define SMALL_GEMM_BYTES ((size_t)512 << 10)

void cpu_small_gemm_init(void)
{
    libxsmm_init();
}

/* libxsmm's kernel for row-major C = op(A) B + beta C of any size, or NULL */
static libxsmm_smmfunction kernel_for(int trans_a, int m, int n, int k, int lda, int ldb, float beta, int ldc)
{
    if ((beta != 0.0f && beta != 1.0f) || m <= 0 || n <= 0 || k <= 0)
        return NULL;
    const float alpha = 1.0f;
    const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
    const libxsmm_blasint xm = n, xn = m, xk = k, xlda = ldb, xldb = lda, xldc = ldc;
    return libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, NULL);
}

/* libxsmm's kernel for a small row-major C = op(A) op(B) + beta C, or NULL */
static libxsmm_smmfunction small_kernel(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, float beta,
                                        int ldc)
{
    size_t bytes = ((size_t)m * k + (size_t)k * n + (size_t)m * n) * sizeof(float);
    if (trans_b || bytes > SMALL_GEMM_BYTES)
        return NULL;
    return kernel_for(trans_a, m, n, k, lda, ldb, beta, ldc);
}

int cpu_small_gemm_takes(int trans_a, int trans_b, int m, int n, int k)
{
    return small_kernel(trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, 0.0f, n) != NULL;
}

int cpu_small_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                   float beta, float *c, int ldc)
{
    libxsmm_smmfunction kernel = small_kernel(trans_a, trans_b, m, n, k, lda, ldb, beta, ldc);
    if (!kernel)
        return 0;
    kernel(b, a, c);
    return 1;
}

/* The panels of a skinny product (cpu_skinny_gemm): the forward's blocks of B's rows by
 * blocks of k, the data gradient's blocks of C's columns by blocks of k. */
#define SKINNY_ROWS 64
#define SKINNY_K 1024
#define SKINNY_COLS 512
#define SKINNY_K_DX 64

/* Row-major C = A B + beta C on one panel: libxsmm's kernel, or BLAS where it has none. */
static void panel(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc)
{
    libxsmm_smmfunction f = kernel_for(0, m, n, k, lda, ldb, beta, ldc);
    if (f)
        f(b, a, c);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* [lo, hi) of thread t of T over n, cut at multiples of 16 floats (a cache line) */
static void thread_range(int n, int t, int T, int *lo, int *hi)
{
    *lo = (int)((long)n * t / T) / 16 * 16;
    *hi = t == T - 1 ? n : (int)((long)n * (t + 1) / T) / 16 * 16;
}

int cpu_skinny_gemm(int threads, int trans_b, int m, int n, int k, const float *a, const float *b, float *c)
{
    if (!(trans_b ? kernel_for(0, SKINNY_ROWS, m, SKINNY_K, k, m, 0.0f, m)
                  : kernel_for(0, m, SKINNY_COLS, SKINNY_K_DX, k, n, 0.0f, n)))
        return 0;
    int nt = n / 64 < threads ? n / 64 : threads;
    nt = nt > 1 ? nt : 1;
    if (!trans_b) {
#pragma omp parallel num_threads(nt)
        {
            int lo, hi;
            thread_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
            for (int j = lo; j < hi; j += SKINNY_COLS) {
                int jb = hi - j < SKINNY_COLS ? hi - j : SKINNY_COLS;
                for (int r = 0; r < k; r += SKINNY_K_DX)
                    panel(m, jb, k - r < SKINNY_K_DX ? k - r : SKINNY_K_DX, a + r, k, b + (size_t)r * n + j, n,
                          r ? 1.0f : 0.0f, c + j, n);
            }
        }
        return 1;
    }
    /* C^T = B A^T: A^T (k, m) and C^T (n, m) in one buffer */
    float *at = cd_xmalloc(((size_t)k + n) * m * sizeof(float)), *ct = at + (size_t)k * m;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads(), lo, hi;
        for (int i = 0; i < m; i++)
            for (int r = (int)((long)k * t / T); r < (int)((long)k * (t + 1) / T); r++)
                at[(size_t)r * m + i] = a[(size_t)i * k + r];
#pragma omp barrier
        thread_range(n, t, T, &lo, &hi);
        for (int j = lo; j < hi; j += SKINNY_ROWS) {
            int jb = hi - j < SKINNY_ROWS ? hi - j : SKINNY_ROWS;
            for (int r = 0; r < k; r += SKINNY_K)
                panel(jb, m, k - r < SKINNY_K ? k - r : SKINNY_K, b + (size_t)j * k + r, k, at + (size_t)r * m, m,
                      r ? 1.0f : 0.0f, ct + (size_t)j * m, m);
        }
        for (int i = 0; i < m; i++)
            for (int j = lo; j < hi; j++)
                c[(size_t)i * n + j] = ct[(size_t)j * m + i];
    }
    free(at);
    return 1;
}

#else

void cpu_small_gemm_init(void)
{
}

int cpu_small_gemm_takes(int trans_a, int trans_b, int m, int n, int k)
{
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k;
    return 0;
}

int cpu_small_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                   float beta, float *c, int ldc)
{
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)beta;
    (void)c, (void)ldc;
    return 0;
}

int cpu_skinny_gemm(int threads, int trans_b, int m, int n, int k, const float *a, const float *b, float *c)
{
    (void)threads, (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)b, (void)c;
    return 0;
}

#endif
