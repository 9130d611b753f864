/* Elementwise kernels: arithmetic on n floats, Eltwise MAX, Power, ReLU, Concat copies. */
#include "cdk_common.cuh"

__global__ void __launch_bounds__(CDK_THREADS) k_set(size_t n, float v, float *y)
{
    CDK_LOOP(i, n) y[i] = v;
}

__global__ void __launch_bounds__(CDK_THREADS) k_scale(size_t n, float a, const float *x, float *y)
{
    CDK_LOOP(i, n) y[i] = a * x[i];
}

__global__ void __launch_bounds__(CDK_THREADS) k_axpy(size_t n, float a, const float *x, float *y)
{
    CDK_LOOP(i, n) y[i] += a * x[i];
}

__global__ void __launch_bounds__(CDK_THREADS)
k_axpby(size_t n, float a, const float *x, float b, float *y)
{
    CDK_LOOP(i, n) y[i] = a * x[i] + b * y[i];
}

__global__ void __launch_bounds__(CDK_THREADS)
k_mul(size_t n, const float *a, const float *b, float *y)
{
    CDK_LOOP(i, n) y[i] = a[i] * b[i];
}

__global__ void __launch_bounds__(CDK_THREADS)
k_mul_add(size_t n, const float *a, const float *b, float *y)
{
    CDK_LOOP(i, n) y[i] += a[i] * b[i];
}

__global__ void __launch_bounds__(CDK_THREADS)
k_max_index(size_t n, const float *x, float *y, int idx, float *mask)
{
    CDK_LOOP(i, n)
    {
        if (idx == 0) {
            y[i] = x[i];
            mask[i] = 0.0f;
        } else if (x[i] > y[i]) {
            y[i] = x[i];
            mask[i] = (float)idx;
        }
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_mask_select(size_t n, const float *dy, const float *mask, int idx, float *dx)
{
    CDK_LOOP(i, n) dx[i] = mask[i] == (float)idx ? dy[i] : 0.0f;
}

/* y = (shift + scale*x)^power, with Caffe's special cases */
__global__ void __launch_bounds__(CDK_THREADS)
k_power_forward(size_t n, float power, float scale, float shift, const float *x,
                float *y)
{
    CDK_LOOP(i, n)
    {
        float b = shift + scale * x[i];
        y[i] = power == 1.0f ? b : power == 2.0f ? b * b : power == 0.0f ? 1.0f : powf(b, power);
    }
}

/* dx = dy * power*scale*(shift+scale*x)^(power-1) */
__global__ void __launch_bounds__(CDK_THREADS)
k_power_backward(size_t n, float power, float scale, float shift, const float *x,
                 const float *dy, float *dx)
{
    float diff_scale = power * scale;
    CDK_LOOP(i, n)
    {
        float b = shift + scale * x[i];
        float d = diff_scale == 0.0f ? 0.0f
                  : power == 1.0f    ? diff_scale
                  : power == 2.0f    ? diff_scale * b
                                     : diff_scale * powf(b, power - 1.0f);
        dx[i] = dy[i] * d;
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_relu_forward(size_t n, float slope, const float *x, float *y)
{
    CDK_LOOP(i, n)
    {
        float v = x[i];
        y[i] = v > 0.0f ? v : v * slope;
    }
}

/* y > 0 equals x > 0 for slope >= 0, and y is what in-place callers still have */
__global__ void __launch_bounds__(CDK_THREADS)
k_relu_backward(size_t n, float slope, const float *y, const float *dy, float *dx)
{
    CDK_LOOP(i, n) dx[i] = y[i] > 0.0f ? dy[i] : dy[i] * slope;
}

/* item i of outer*count: block o = i / count, offset j = i % count */
__global__ void __launch_bounds__(CDK_THREADS)
k_copy_strided(size_t total, size_t count, const float *src, size_t src_stride,
               float *dst, size_t dst_stride, int accumulate)
{
    CDK_LOOP(i, total)
    {
        size_t o = i / count, j = i - o * count;
        float v = src[o * src_stride + j];
        float *d = dst + o * dst_stride + j;
        *d = accumulate ? *d + v : v;
    }
}

#define CDK_LAUNCH_N(n, kernel, ...)                                           \
    do {                                                                       \
        if ((n) == 0)                                                          \
            return cudaSuccess;                                                \
        kernel<<<cdk_blocks(n), CDK_THREADS, 0, s>>>(__VA_ARGS__);             \
        return cudaGetLastError();                                             \
    } while (0)

extern "C" {

cudaError_t cdk_check_image(void)
{
    struct cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, k_set);
}

cudaError_t cdk_set(cudaStream_t s, size_t n, float v, float *y)
{
    CDK_LAUNCH_N(n, k_set, n, v, y);
}

cudaError_t cdk_scale(cudaStream_t s, size_t n, float a, const float *x, float *y)
{
    CDK_LAUNCH_N(n, k_scale, n, a, x, y);
}

cudaError_t cdk_axpy(cudaStream_t s, size_t n, float a, const float *x, float *y)
{
    CDK_LAUNCH_N(n, k_axpy, n, a, x, y);
}

cudaError_t cdk_axpby(cudaStream_t s, size_t n, float a, const float *x, float b, float *y)
{
    CDK_LAUNCH_N(n, k_axpby, n, a, x, b, y);
}

cudaError_t cdk_mul(cudaStream_t s, size_t n, const float *a, const float *b, float *y)
{
    CDK_LAUNCH_N(n, k_mul, n, a, b, y);
}

cudaError_t cdk_mul_add(cudaStream_t s, size_t n, const float *a, const float *b, float *y)
{
    CDK_LAUNCH_N(n, k_mul_add, n, a, b, y);
}

cudaError_t cdk_max_index(cudaStream_t s, size_t n, const float *x, float *y, int idx, float *mask)
{
    CDK_LAUNCH_N(n, k_max_index, n, x, y, idx, mask);
}

cudaError_t cdk_mask_select(cudaStream_t s, size_t n, const float *dy, const float *mask, int idx,
                            float *dx)
{
    CDK_LAUNCH_N(n, k_mask_select, n, dy, mask, idx, dx);
}

cudaError_t cdk_power_forward(cudaStream_t s, size_t n, float power, float scale, float shift,
                              const float *x, float *y)
{
    CDK_LAUNCH_N(n, k_power_forward, n, power, scale, shift, x, y);
}

cudaError_t cdk_power_backward(cudaStream_t s, size_t n, float power, float scale, float shift,
                               const float *x, const float *dy, float *dx)
{
    CDK_LAUNCH_N(n, k_power_backward, n, power, scale, shift, x, dy, dx);
}

cudaError_t cdk_relu_forward(cudaStream_t s, size_t n, float slope, const float *x, float *y)
{
    CDK_LAUNCH_N(n, k_relu_forward, n, slope, x, y);
}

cudaError_t cdk_relu_backward(cudaStream_t s, size_t n, float slope, const float *y,
                              const float *dy, float *dx)
{
    CDK_LAUNCH_N(n, k_relu_backward, n, slope, y, dy, dx);
}

cudaError_t cdk_copy_strided(cudaStream_t s, int outer, size_t count, const float *src,
                             size_t src_stride, float *dst, size_t dst_stride, int accumulate)
{
    size_t total = outer > 0 ? (size_t)outer * count : 0;
    CDK_LAUNCH_N(total, k_copy_strided, total, count, src, src_stride, dst, dst_stride, accumulate);
}

} /* extern "C" */
