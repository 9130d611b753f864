/*
 * The part of the CBLAS interface the CPU backend uses, for the GPU test build
 * (tests/gpu/run.sh) on machines without OpenBLAS. Implemented by
 * tests/gpu/cblas_fallback.c; the enum values are the standard CBLAS ones.
 */
#ifndef CDIGITS_CBLAS_FALLBACK_H
#define CDIGITS_CBLAS_FALLBACK_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE {
    CblasNoTrans = 111,
    CblasTrans = 112,
    CblasConjTrans = 113,
    CblasConjNoTrans = 114
} CBLAS_TRANSPOSE;
typedef CBLAS_ORDER CBLAS_LAYOUT;
typedef int blasint;

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n,
                 blasint k, float alpha, const float *a, blasint lda, const float *b, blasint ldb,
                 float beta, float *c, blasint ldc);
void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
