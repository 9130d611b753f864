/* Dense linear algebra on cuBLAS: gemm (InnerProduct), dot and asum. */
#include "cuda_internal.h"

/*
 * Row-major C = alpha*op(A)*op(B) + beta*C, op(A) (m,k), op(B) (k,n), C (m,n).
 * cuBLAS is column-major, and a row-major matrix read column-major is its transpose,
 * so this computes C^T = op(B)^T * op(A)^T: the operands swap places and sizes.
 */
void cuda_gemm(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *a, const float *b, float beta, float *c)
{
    if (m <= 0 || n <= 0)
        return;
    cuda_use_device(be);
    int lda = trans_a ? m : k; /* row length of A as stored */
    int ldb = trans_b ? k : n;
    CD_CUBLAS_CHECK(be, cublasSgemm(cuda_ctx_of(be)->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                    a, lda, &beta, c, n));
}

/* The host waits for the result (cuBLAS's host pointer mode). */
float cuda_dot(cd_backend_t *be, size_t n, const float *a, const float *b)
{
    cuda_use_device(be);
    double sum = 0.0;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        int len = (int)(n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK);
        float part = 0.0f;
        CD_CUBLAS_CHECK(be, cublasSdot(cuda_ctx_of(be)->blas, len, a + at, 1, b + at, 1, &part));
        sum += part;
    }
    return (float)sum;
}

float cuda_asum(cd_backend_t *be, size_t n, const float *x)
{
    cuda_use_device(be);
    double sum = 0.0;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        int len = (int)(n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK);
        float part = 0.0f;
        CD_CUBLAS_CHECK(be, cublasSasum(cuda_ctx_of(be)->blas, len, x + at, 1, &part));
        sum += part;
    }
    return (float)sum;
}
