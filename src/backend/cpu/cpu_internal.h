/*
 * Private to the CPU backend: its context, the scratch buffer, OpenMP helpers and the
 * op functions each topic file provides to the table in cpu_backend.c.
 *
 * Threads: one OpenMP pool runs the loops here (over batch and channels) and the blocks
 * of each gemm, where every thread calls single-threaded OpenBLAS on its own block
 * (cpu_gemm says why). Every parallel region names its thread count (num_threads), so
 * the count chosen at creation holds whichever thread calls the op.
 */
#ifndef CDIGITS_CPU_INTERNAL_H
#define CDIGITS_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cdigits/backend.h"

/* A helper of CD_CLONES functions (cdigits/util.h), forced inline so that it is compiled
 * in each of their versions rather than once for the baseline. */
#define CPU_INLINE static inline __attribute__((always_inline))

/* The bound on the convolution workspace (im2col columns plus a gathered output): the
 * number of images per gemm is chosen to fit it, one image always fits. */
#define CPU_CONV_WORKSPACE_BYTES ((size_t)64 << 20)

/* Loops over fewer elements than this run on one thread: a parallel region costs a
 * few microseconds, more than the loop itself. */
#define CPU_PAR_MIN 32768

typedef struct cpu_ctx {
    int threads;
    /* One growing scratch buffer for ops that need a workspace (conv, LRN backward).
     * The lock makes concurrent calls on one backend safe; ops hold it for the whole
     * time they use the buffer. */
    pthread_mutex_t scratch_lock;
    float *scratch;
    size_t scratch_floats;
    struct cd_group *group; /* data-parallel replicas in this process, or NULL */
    int rank;
    size_t limit;           /* cap on what alloc hands out (0: none) */
    _Atomic size_t used;    /* bytes handed out by alloc and not freed */
} cpu_ctx;

static inline int cpu_threads(const cd_backend_t *be)
{
    return ((const cpu_ctx *)be->ctx)->threads;
}

/* Lock the scratch buffer and make it hold at least nfloats; returns it (aborts on
 * out of memory, as worker allocations do). Pair with cpu_scratch_release. */
float *cpu_scratch_acquire(cd_backend_t *be, size_t nfloats);
void cpu_scratch_release(cd_backend_t *be);

/* C = op(A) op(B) + beta C, row-major, alpha 1, by a kernel libxsmm generates for the
 * shape (cpu_small_gemm.c says which it takes); 0 where there is none, and the caller
 * runs BLAS. cpu_small_gemm_init: once, before the first (the backend's creation). */
void cpu_small_gemm_init(void);
/* whether cpu_small_gemm has a kernel for the shape (leading dimensions m, k or n) */
int cpu_small_gemm_takes(int trans_a, int trans_b, int m, int n, int k);
int cpu_small_gemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                   float beta, float *c, int ldc);
/* C = A op(B), row-major, A (m,k) with few rows against a large B stored (n,k) (trans_b)
 * or (k,n), on up to `threads` threads, by libxsmm's kernels on panels of B that it
 * reads where they lie; 0 where libxsmm has no kernel, and the caller runs BLAS. */
int cpu_skinny_gemm(int threads, int trans_b, int m, int n, int k, const float *a, const float *b, float *c);

/* [lo, hi): the outputs o in [0, n_out) whose input o*stride + off lies in [0, size). */
static inline void cpu_valid_range(int n_out, int stride, int off, int size, int *lo, int *hi)
{
    int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int h = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
    if (h > n_out)
        h = n_out;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* memory and elementwise (cpu_backend.c, cpu_elementwise.c) */
void cpu_set(cd_backend_t *be, size_t n, float v, float *y);
void cpu_scale(cd_backend_t *be, size_t n, float a, const float *x, float *y);
void cpu_axpy(cd_backend_t *be, size_t n, float a, const float *x, float *y);
void cpu_axpby(cd_backend_t *be, size_t n, float a, const float *x, float b, float *y);
void cpu_mul(cd_backend_t *be, size_t n, const float *a, const float *b, float *y);
void cpu_mul_add(cd_backend_t *be, size_t n, const float *a, const float *b, float *y);
void cpu_max_index(cd_backend_t *be, size_t n, const float *x, float *y, int idx, float *mask);
void cpu_mask_select(cd_backend_t *be, size_t n, const float *dy, const float *mask, int idx,
                     float *dx);
float cpu_dot(cd_backend_t *be, size_t n, const float *a, const float *b);
float cpu_asum(cd_backend_t *be, size_t n, const float *x);
void cpu_power_forward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                       const float *x, float *y);
void cpu_power_backward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                        const float *x, const float *dy, float *dx);
void cpu_channel_affine(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                        const float *gamma, const float *beta, float *y);
void cpu_channel_affine_grad(cd_backend_t *be, int outer, int channels, int inner,
                             const float *x, const float *dy, float *dgamma, float *dbeta);
/* per-channel sums of (a - shift[c]) and (a - shift[c]) * (b - shift[c]) into work[2c],
 * work[2c + 1]; work holds cpu_channel_sums_space floats (cpu_elementwise.c) */
size_t cpu_channel_sums_space(int outer, int channels, int inner);
void cpu_channel_sums(cd_backend_t *be, int outer, int channels, int inner, const float *a, const float *b,
                      const float *shift, double *work);
void cpu_act_forward(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y);
void cpu_act_backward(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                      const float *y, const float *dy, float *dx);
void cpu_dropout_forward(cd_backend_t *be, size_t n, float ratio, uint64_t seed,
                         uint64_t counter, const float *x, float *mask, float *y);
void cpu_copy_strided(cd_backend_t *be, int outer, size_t count, const float *src,
                      size_t src_stride, float *dst, size_t dst_stride, int accumulate);

/* gemm and convolution (cpu_conv.c) */
void cpu_gemm(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, const float *b, float beta, float *c);
void cpu_conv_forward(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *w,
                      const float *bias, float *y);
void cpu_conv_backward_data(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                            const float *dy, float *dx);
void cpu_conv_backward_filter(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                              const float *dy, float *dw, float *db);

/* pooling (cpu_pool.c) */
void cpu_pool_forward(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y, float *mask);
void cpu_pool_backward(cd_backend_t *be, const cd_pool_desc *d, const float *x, const float *y,
                       const float *mask, const float *dy, float *dx);
size_t cpu_pool_mask_size(cd_backend_t *be, const cd_pool_desc *d);

/* local response normalization (cpu_lrn.c) */
void cpu_lrn_forward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y);
void cpu_lrn_backward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, const float *y,
                      const float *dy, float *dx);

/* softmax, loss, accuracy, batch norm (cpu_norm.c) */
void cpu_softmax_forward(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                         float *y);
void cpu_softmax_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                          const float *dy, float *dx);
void cpu_xent_forward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                      const float *label, int has_ignore, int ignore_label, float *loss_out,
                      float *count_out);
void cpu_xent_backward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                       const float *label, int has_ignore, int ignore_label, float scale,
                       float *dx);
void cpu_accuracy(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                  const float *label, int top_k, int has_ignore, int ignore_label,
                  float *correct_out, float *count_out);
void cpu_bn_stats(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                  float *mean, float *var);
void cpu_bn_normalize(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                      const float *mean, const float *var, float eps, float *y);
void cpu_bn_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                     const float *var, float eps, int global_stats, const float *dy, float *dx);

/* solver updates (cpu_solver.c) */
void cpu_update(cd_backend_t *be, const cd_update_desc *d, size_t n, float *w, float *g,
                float *h1, float *h2);

/* data preparation (cpu_data.c) */
void cpu_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                       const uint8_t *src, const int *oy, const int *ox, const uint8_t *mirror,
                       const float *mean, float scale, float *dst);
/* data augmentation with the reference of cdigits/augment.h, one image per thread */
void cpu_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                       int kind, uint8_t fill, const uint8_t *src, uint8_t *dst);
void cpu_whiten_batch(cd_backend_t *be, int n, size_t size, float *x);

#endif
