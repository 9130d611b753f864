/* Elementwise ops, Eltwise MAX, Power, Concat copies and dropout: thin wrappers that
 * launch the kernels of kernels/elementwise.cu and kernels/dropout.cu on the
 * backend's stream. */
#include "cuda_internal.h"

#define STREAM(be) (cuda_ctx_of(be)->stream)

void cuda_set(cd_backend_t *be, size_t n, float v, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_set(STREAM(be), n, v, y));
}

void cuda_scale(cd_backend_t *be, size_t n, float a, const float *x, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_scale(STREAM(be), n, a, x, y));
}

void cuda_axpy(cd_backend_t *be, size_t n, float a, const float *x, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_axpy(STREAM(be), n, a, x, y));
}

void cuda_axpby(cd_backend_t *be, size_t n, float a, const float *x, float b, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_axpby(STREAM(be), n, a, x, b, y));
}

void cuda_mul(cd_backend_t *be, size_t n, const float *a, const float *b, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_mul(STREAM(be), n, a, b, y));
}

void cuda_mul_add(cd_backend_t *be, size_t n, const float *a, const float *b, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_mul_add(STREAM(be), n, a, b, y));
}

void cuda_max_index(cd_backend_t *be, size_t n, const float *x, float *y, int idx, float *mask)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_max_index(STREAM(be), n, x, y, idx, mask));
}

void cuda_mask_select(cd_backend_t *be, size_t n, const float *dy, const float *mask, int idx,
                      float *dx)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_mask_select(STREAM(be), n, dy, mask, idx, dx));
}

void cuda_power_forward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                        const float *x, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_power_forward(STREAM(be), n, power, scale, shift, x, y));
}

void cuda_power_backward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                         const float *x, const float *dy, float *dx)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_power_backward(STREAM(be), n, power, scale, shift, x, dy, dx));
}

void cuda_copy_strided(cd_backend_t *be, int outer, size_t count, const float *src,
                       size_t src_stride, float *dst, size_t dst_stride, int accumulate)
{
    cuda_use_device(be);
    if (!accumulate && outer > 0 && count > 0 &&
        (outer == 1 || (src_stride == count && dst_stride == count))) {
        /* one contiguous block */
        CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, (size_t)outer * count * sizeof(float),
                                          cudaMemcpyDeviceToDevice, STREAM(be)));
        return;
    }
    CD_LAUNCH(be, cdk_copy_strided(STREAM(be), outer, count, src, src_stride, dst, dst_stride,
                                   accumulate));
}

/* The scale of kept values is computed once here, in float, as the CPU backend does. */
void cuda_dropout_forward(cd_backend_t *be, size_t n, float ratio, uint64_t seed,
                          uint64_t counter, const float *x, float *mask, float *y)
{
    cuda_use_device(be);
    float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
    /* captured: the counter advances by one per replay (graph.c) */
    const long long *delta = cuda_ctx_of(be)->capturing ? cuda_ctx_of(be)->replays : NULL;
    CD_LAUNCH(be, cdk_dropout_forward(STREAM(be), n, ratio, scale, seed, counter, delta, x, mask,
                                      y));
}
