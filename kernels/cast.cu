/* Rounding fp32 tensors to fp16 or bf16 and back, for the mixed-precision convolutions
 * and gemm (src/backend/cuda/conv.c, blas.c): their inputs are rounded into a
 * workspace, cuDNN and cuBLAS accumulate in fp32, and the results come back as fp32.
 *   to_lowp:   y[i] = round_to_nearest_even(x[i])   (overflow gives inf, as the loss
 *                                                     scaler expects)
 *   from_lowp: y[i] = x[i]  or  y[i] += x[i]  (accumulate, for gradients)
 * Memory-bound: 16-byte float loads and 8-byte half stores where both pointers allow
 * it, a plain loop otherwise. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cdk_common.cuh"

template <typename T> __device__ inline T cdk_round(float v);
template <> __device__ inline __half cdk_round<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 cdk_round<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
__device__ inline float cdk_widen(__half v) { return __half2float(v); }
__device__ inline float cdk_widen(__nv_bfloat16 v) { return __bfloat162float(v); }

/* four values of 2 bytes, stored or loaded as one 8-byte word */
template <typename T> struct alignas(8) cdk_quad { T v[4]; };

template <typename T>
__global__ void __launch_bounds__(CDK_THREADS) k_to_lowp(size_t n, const float *x, T *y)
{
    CDK_LOOP(i, n) y[i] = cdk_round<T>(x[i]);
}

template <typename T>
__global__ void __launch_bounds__(CDK_THREADS)
k_to_lowp4(size_t n4, const float4 *x, cdk_quad<T> *y)
{
    CDK_LOOP(i, n4)
    {
        float4 v = x[i];
        cdk_quad<T> q;
        q.v[0] = cdk_round<T>(v.x);
        q.v[1] = cdk_round<T>(v.y);
        q.v[2] = cdk_round<T>(v.z);
        q.v[3] = cdk_round<T>(v.w);
        y[i] = q;
    }
}

template <typename T>
__global__ void __launch_bounds__(CDK_THREADS)
k_from_lowp(size_t n, const T *x, float *y, int accumulate)
{
    CDK_LOOP(i, n) y[i] = accumulate ? y[i] + cdk_widen(x[i]) : cdk_widen(x[i]);
}

template <typename T>
__global__ void __launch_bounds__(CDK_THREADS)
k_from_lowp4(size_t n4, const cdk_quad<T> *x, float4 *y, int accumulate)
{
    CDK_LOOP(i, n4)
    {
        cdk_quad<T> q = x[i];
        float4 v = make_float4(cdk_widen(q.v[0]), cdk_widen(q.v[1]), cdk_widen(q.v[2]),
                               cdk_widen(q.v[3]));
        if (accumulate) {
            float4 o = y[i];
            v.x += o.x;
            v.y += o.y;
            v.z += o.z;
            v.w += o.w;
        }
        y[i] = v;
    }
}

static int cdk_aligned(const void *a, const void *b)
{
    return (((uintptr_t)a | (uintptr_t)b) & 15) == 0;
}

template <typename T>
static cudaError_t to_lowp(cudaStream_t s, size_t n, const float *x, T *y)
{
    size_t head = 0;
    if (cdk_aligned(x, y) && n >= 4) {
        size_t n4 = n / 4;
        k_to_lowp4<T><<<cdk_blocks(n4), CDK_THREADS, 0, s>>>(n4, (const float4 *)x,
                                                             (cdk_quad<T> *)y);
        head = n4 * 4;
    }
    if (head < n)
        k_to_lowp<T><<<cdk_blocks(n - head), CDK_THREADS, 0, s>>>(n - head, x + head, y + head);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t from_lowp(cudaStream_t s, size_t n, const T *x, float *y, int accumulate)
{
    size_t head = 0;
    if (cdk_aligned(x, y) && n >= 4) {
        size_t n4 = n / 4;
        k_from_lowp4<T><<<cdk_blocks(n4), CDK_THREADS, 0, s>>>(n4, (const cdk_quad<T> *)x,
                                                               (float4 *)y, accumulate);
        head = n4 * 4;
    }
    if (head < n)
        k_from_lowp<T><<<cdk_blocks(n - head), CDK_THREADS, 0, s>>>(n - head, x + head, y + head,
                                                                    accumulate);
    return cudaGetLastError();
}

extern "C" cudaError_t cdk_to_lowp(cudaStream_t s, int kind, size_t n, const float *x, void *y)
{
    if (n == 0)
        return cudaSuccess;
    if (kind == CDK_LOWP_HALF)
        return to_lowp(s, n, x, (__half *)y);
    if (kind == CDK_LOWP_BF16)
        return to_lowp(s, n, x, (__nv_bfloat16 *)y);
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t cdk_from_lowp(cudaStream_t s, int kind, size_t n, const void *x, float *y,
                                     int accumulate)
{
    if (n == 0)
        return cudaSuccess;
    if (kind == CDK_LOWP_HALF)
        return from_lowp(s, n, (const __half *)x, y, accumulate);
    if (kind == CDK_LOWP_BF16)
        return from_lowp(s, n, (const __nv_bfloat16 *)x, y, accumulate);
    return cudaErrorInvalidValue;
}
