/*
 * A plain C sgemm for the GPU test build (tests/gpu/run.sh), where OpenBLAS is not
 * installed: correct for every order and transpose, blocked so the CPU reference
 * stays quick on the test's sizes. Single-threaded: the CPU backend splits large
 * products across its OpenMP threads itself.
 */
#include <stdlib.h>
#include <string.h>

#include "cblas.h"

#define BLOCK_K 256
#define BLOCK_N 512

void openblas_set_num_threads(int n) { (void)n; }
int openblas_get_num_threads(void) { return 1; }

/* Row-major C (m,n) = alpha*op(A)*op(B) + beta*C; ta, tb: transpose flags. */
static void sgemm_rowmajor(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                           int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        if (beta == 0.0f)
            memset(ci, 0, (size_t)n * sizeof(float));
        else if (beta != 1.0f)
            for (int j = 0; j < n; j++)
                ci[j] *= beta;
    }
    if (k <= 0 || alpha == 0.0f)
        return;
    /* op(B) rows of one k block, packed contiguous: bp[p][j] */
    float *bp = malloc((size_t)BLOCK_K * BLOCK_N * sizeof(float));
    if (!bp)
        abort();
    for (int j0 = 0; j0 < n; j0 += BLOCK_N) {
        int nj = n - j0 < BLOCK_N ? n - j0 : BLOCK_N;
        for (int p0 = 0; p0 < k; p0 += BLOCK_K) {
            int np = k - p0 < BLOCK_K ? k - p0 : BLOCK_K;
            for (int p = 0; p < np; p++)
                for (int j = 0; j < nj; j++)
                    bp[(size_t)p * nj + j] = tb ? b[(size_t)(j0 + j) * ldb + p0 + p]
                                                : b[(size_t)(p0 + p) * ldb + j0 + j];
            for (int i = 0; i < m; i++) {
                float *ci = c + (size_t)i * ldc + j0;
                for (int p = 0; p < np; p++) {
                    float av = alpha * (ta ? a[(size_t)(p0 + p) * lda + i]
                                           : a[(size_t)i * lda + p0 + p]);
                    const float *bpp = bp + (size_t)p * nj;
                    for (int j = 0; j < nj; j++)
                        ci[j] += av * bpp[j];
                }
            }
        }
    }
    free(bp);
}

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n,
                 blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                 float beta, float *c, blasint ldc)
{
    int tra = ta == CblasTrans || ta == CblasConjTrans;
    int trb = tb == CblasTrans || tb == CblasConjTrans;
    if (m <= 0 || n <= 0)
        return;
    if (order == CblasRowMajor)
        sgemm_rowmajor(tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else /* column-major C is row-major C^T = op(B)^T op(A)^T */
        sgemm_rowmajor(trb, tra, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
