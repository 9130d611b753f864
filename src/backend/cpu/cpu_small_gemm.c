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
#include <stddef.h>

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

/* libxsmm's kernel for row-major C = op(A) op(B) + beta C, or NULL */
static libxsmm_smmfunction small_kernel(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, float beta,
                                        int ldc)
{
    size_t bytes = ((size_t)m * k + (size_t)k * n + (size_t)m * n) * sizeof(float);
    if (trans_b || (beta != 0.0f && beta != 1.0f) || m <= 0 || n <= 0 || k <= 0 || bytes > SMALL_GEMM_BYTES)
        return NULL;
    const float alpha = 1.0f;
    const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
    const libxsmm_blasint xm = n, xn = m, xk = k, xlda = ldb, xldb = lda, xldc = ldc;
    return libxsmm_smmdispatch(xm, xn, xk, &xlda, &xldb, &xldc, &alpha, &beta, &flags, NULL);
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

#endif
