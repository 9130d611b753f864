/* Dense linear algebra on cuBLAS: gemm (InnerProduct), dot and asum. */
#include "cuda_internal.h"

/* The cuBLAS math mode of an fp32 gemm: FP32 plain (CUBLAS_DEFAULT_MATH never
 * rounds to TF32), TF32 on the tensor cores. Set only when it changes. */
static void set_math(cd_backend_t *be, int tf32)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    int want = tf32 ? (int)CUBLAS_TF32_TENSOR_OP_MATH : (int)CUBLAS_DEFAULT_MATH;
    if (ctx->blas_math == want)
        return;
    if (CD_CUBLAS_CHECK(be, cublasSetMathMode(ctx->blas, (cublasMath_t)want)))
        return; /* capturing: not noted as set, so the next gemm sets it again */
    ctx->blas_math = want;
}

/*
 * Row-major C = alpha*op(A)*op(B) + beta*C, op(A) (m,k), op(B) (k,n), C (m,n).
 * cuBLAS is column-major, and a row-major matrix read column-major is its transpose,
 * so this computes C^T = op(B)^T * op(A)^T: the operands swap places and sizes.
 *
 * FP16 and BF16: A and B are rounded into the 2-byte operand buffer (A first, then B
 * at a 256-byte boundary) and cublasGemmEx multiplies them on the tensor cores with
 * fp32 accumulation into the fp32 C (alpha and beta in fp32 too).
 */
void cuda_gemm(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *a, const float *b, float beta, float *c)
{
    if (m <= 0 || n <= 0)
        return;
    cuda_use_device(be);
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (k <= 0) { /* an empty product: C = beta*C, as cuBLAS (which wants lda >= 1) */
        if (beta == 0.0f)
            CD_CUDA_CHECK(be, cudaMemsetAsync(c, 0, (size_t)m * n * sizeof(float), ctx->stream));
        else
            CD_LAUNCH(be, cdk_scale(ctx->stream, (size_t)m * n, beta, c, c));
        return;
    }
    int lda = trans_a ? m : k; /* row length of A as stored */
    int ldb = trans_b ? k : n;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    int kind = cuda_lowp_kind(be);
    if (kind < 0) {
        set_math(be, be->precision == CD_PREC_TF32);
        CD_CUBLAS_CHECK(be, cublasSgemm(ctx->blas, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda,
                                        &beta, c, n));
        return;
    }
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    size_t off_b = (na * 2 + 255) & ~(size_t)255;
    char *buf = cuda_lowp(be, off_b + nb * 2);
    if (!buf)
        return;
    void *ah = buf, *bh = buf + off_b;
    CD_LAUNCH(be, cdk_to_lowp(ctx->stream, kind, na, a, ah));
    CD_LAUNCH(be, cdk_to_lowp(ctx->stream, kind, nb, b, bh));
    cudaDataType_t t = kind == CDK_LOWP_HALF ? CUDA_R_16F : CUDA_R_16BF;
    set_math(be, 0);
    CD_CUBLAS_CHECK(be, cublasGemmEx(ctx->blas, op_b, op_a, n, m, k, &alpha, bh, t, ldb, ah, t,
                                     lda, &beta, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
}

/* cuBLAS's dot(a, b), or asum(a) when b is NULL, summed in double over chunks of
 * CUDA_CHUNK. The host waits for the result (cuBLAS's host pointer mode), so while
 * capturing the call (`what`) is refused and returns 0, which the caller must not use. */
static float blas_sum(cd_backend_t *be, const char *what, size_t n, const float *a,
                      const float *b)
{
    if (cuda_capture_refuses(be, what))
        return 0.0f;
    cuda_use_device(be);
    cublasHandle_t h = cuda_ctx_of(be)->blas;
    double sum = 0.0;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        int len = (int)(n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK);
        float part = 0.0f;
        if (b)
            CD_CUBLAS_CHECK(be, cublasSdot(h, len, a + at, 1, b + at, 1, &part));
        else
            CD_CUBLAS_CHECK(be, cublasSasum(h, len, a + at, 1, &part));
        sum += part;
    }
    return (float)sum;
}

float cuda_dot(cd_backend_t *be, size_t n, const float *a, const float *b)
{
    return blas_sum(be, "dot", n, a, b);
}

float cuda_asum(cd_backend_t *be, size_t n, const float *x)
{
    return blas_sum(be, "asum", n, x, NULL);
}
