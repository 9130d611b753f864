/*
 * Launchers of the CUDA kernels (the .cu files of kernels/), callable from C. Each
 * enqueues its kernel(s) on stream s and returns cudaGetLastError() (cudaSuccess for empty work),
 * so the caller checks it with CD_CUDA_CHECK and the message names the launch.
 * Pointers are device pointers. Semantics are those of the backend slot of the same
 * name in include/cdigits/backend.h; the CPU backend is the reference.
 */
#ifndef CDIGITS_KERNELS_H
#define CDIGITS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cdigits/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* elementwise.cu. cudaSuccess when this build has code the current device can run
 * (cudaErrorNoKernelImageForDevice or similar when it was built for other chips). */
cudaError_t cdk_check_image(void);

/* elementwise.cu: on n floats */
cudaError_t cdk_set(cudaStream_t s, size_t n, float v, float *y);
cudaError_t cdk_scale(cudaStream_t s, size_t n, float a, const float *x, float *y);
cudaError_t cdk_axpy(cudaStream_t s, size_t n, float a, const float *x, float *y);
cudaError_t cdk_axpby(cudaStream_t s, size_t n, float a, const float *x, float b, float *y);
cudaError_t cdk_mul(cudaStream_t s, size_t n, const float *a, const float *b, float *y);
cudaError_t cdk_mul_add(cudaStream_t s, size_t n, const float *a, const float *b, float *y);
cudaError_t cdk_max_index(cudaStream_t s, size_t n, const float *x, float *y, int idx, float *mask);
cudaError_t cdk_mask_select(cudaStream_t s, size_t n, const float *dy, const float *mask, int idx,
                            float *dx);
cudaError_t cdk_power_forward(cudaStream_t s, size_t n, float power, float scale, float shift,
                              const float *x, float *y);
cudaError_t cdk_power_backward(cudaStream_t s, size_t n, float power, float scale, float shift,
                               const float *x, const float *dy, float *dx);
/* ReLU with Caffe's negative_slope; backward decides on y > 0 (in-place safe). */
cudaError_t cdk_relu_forward(cudaStream_t s, size_t n, float slope, const float *x, float *y);
cudaError_t cdk_relu_backward(cudaStream_t s, size_t n, float slope, const float *y,
                              const float *dy, float *dx);
cudaError_t cdk_copy_strided(cudaStream_t s, int outer, size_t count, const float *src,
                             size_t src_stride, float *dst, size_t dst_stride, int accumulate);

/* channel.cu: (outer, channels, inner) data */
cudaError_t cdk_channel_affine(cudaStream_t s, int outer, int channels, int inner, const float *x,
                               const float *gamma, const float *beta, float *y);

/* Per-channel sums, in double, deterministic (fixed split and order):
 *   CDK_SUM_AB_A:  s1[c] = sum a*b (b NULL: sum a), s2[c] = sum a
 *   CDK_SUM_SQDEV: s1[c] = sum (a - m[c])^2,        s2[c] = 0
 * then out1[c] = keep1*out1[c] + scale1*s1[c] (skipped when out1 is NULL), same for out2.
 * partial is scratch of cdk_channel_sums_scratch() bytes. */
enum { CDK_SUM_AB_A = 0, CDK_SUM_SQDEV = 1 };
size_t cdk_channel_sums_scratch(int outer, int channels, int inner);
cudaError_t cdk_channel_sums(cudaStream_t s, int mode, int outer, int channels, int inner,
                             const float *a, const float *b, const float *m, void *partial,
                             float *out1, float keep1, float scale1,
                             float *out2, float keep2, float scale2);
cudaError_t cdk_bn_normalize(cudaStream_t s, int outer, int channels, int inner, const float *x,
                             const float *mean, const float *var, float eps, float *y);
/* dx = (dy - mdy[c] - y*mdyy[c]) / sqrt(var[c]+eps); with global_stats dx = dy/sqrt(var+eps)
 * (mdy, mdyy unused, may be NULL). */
cudaError_t cdk_bn_backward(cudaStream_t s, int outer, int channels, int inner, const float *y,
                            const float *var, float eps, int global_stats, const float *mdy,
                            const float *mdyy, const float *dy, float *dx);

/* pool.cu: Caffe's pooling (ceil rounding, clipped AVE divisor, first max wins) */
cudaError_t cdk_pool_forward(cudaStream_t s, cd_pool_desc d, const float *x, float *y);
cudaError_t cdk_pool_backward(cudaStream_t s, cd_pool_desc d, const float *x, const float *dy,
                              float *dx);

/* lrn.cu: both LRN modes; backward needs scratch of n floats for WITHIN */
cudaError_t cdk_lrn_forward(cudaStream_t s, cd_lrn_desc d, const float *x, float *y);
cudaError_t cdk_lrn_backward(cudaStream_t s, cd_lrn_desc d, const float *x, const float *y,
                             const float *dy, float *dx, float *scratch);

/* loss.cu */
cudaError_t cdk_xent_forward(cudaStream_t s, int outer, int channels, int inner,
                             const float *prob, const float *label, int has_ignore,
                             int ignore_label, float *loss_out, float *count_out);
cudaError_t cdk_xent_backward(cudaStream_t s, int outer, int channels, int inner,
                              const float *prob, const float *label, int has_ignore,
                              int ignore_label, float scale, float *dx);
cudaError_t cdk_accuracy(cudaStream_t s, int outer, int channels, int inner, const float *x,
                         const float *label, int top_k, int has_ignore, int ignore_label,
                         float *correct_out, float *count_out);

/* dropout.cu: keep when cd_rand_uniform(seed, counter + (delta ? *delta : 0), i) >= ratio;
 * kept get `scale`. delta is a device counter: the replay number of a captured step. */
cudaError_t cdk_dropout_forward(cudaStream_t s, size_t n, float ratio, float scale, uint64_t seed,
                                uint64_t counter, const long long *delta, const float *x,
                                float *mask, float *y);
/* *replays += 1, on the device: the first node of a captured step (graph.c) */
cudaError_t cdk_replay_tick(cudaStream_t s, long long *replays);

/* update.cu: one fused kernel per parameter tensor; adam_rate is ADAM's lr times its
 * bias correction (computed in double on the host) */
cudaError_t cdk_update(cudaStream_t s, cd_update_desc d, float adam_rate, size_t n, float *w,
                       float *g, float *h1, float *h2);

/* prepare.cu: crop, mirror, mean subtraction and scaling of a uint8 batch */
cudaError_t cdk_prepare_batch(cudaStream_t s, int n, int c, int sh, int sw, int oh, int ow,
                              const uint8_t *src, const int *oy, const int *ox,
                              const uint8_t *mirror, const float *mean, float scale, float *dst);

/* augment.cu: DIGITS's augmentations of a uint8 batch (backend.h's augment_batch; kind
 * enum cd_aug_kind). params is n struct cd_aug_params (cdigits/augment.h) on the device;
 * mean is scratch of n*c floats (the channel means contrast needs). cdk_whiten: n images
 * of size floats standardized in place (whiten_batch). */
cudaError_t cdk_augment(cudaStream_t s, int n, int c, int h, int w, const struct cd_aug_params *params, int kind,
                        uint8_t fill, const uint8_t *src, uint8_t *dst, float *mean);
cudaError_t cdk_whiten(cudaStream_t s, int n, size_t size, float *x);

/* cast.cu: fp32 <-> 2-byte floats for the mixed-precision convolution and gemm.
 * to_lowp rounds n floats to nearest even (kind CDK_LOWP_HALF: fp16, CDK_LOWP_BF16:
 * bf16) into y (n 2-byte values); from_lowp widens them back, y = x or, with
 * accumulate, y += x. */
enum { CDK_LOWP_HALF = 0, CDK_LOWP_BF16 = 1 };
cudaError_t cdk_to_lowp(cudaStream_t s, int kind, size_t n, const float *x, void *y);
cudaError_t cdk_from_lowp(cudaStream_t s, int kind, size_t n, const void *x, float *y,
                          int accumulate);

#ifdef __cplusplus
}
#endif
#endif
