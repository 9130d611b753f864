/* DIGITS's data augmentations on the device (cdigits/augment.h): the per-pixel
 * arithmetic is the header's own inline functions, the ones the CPU reference
 * (src/core/augment.c) runs, so the two differ only where the compilers round
 * differently (FMA contraction, the device's cosf, sinf and logf: docs/cuda.md).
 *   augment: src, dst (n, c, h, w) uint8; params (n) cd_aug_params; mean (n, c) scratch
 *   whiten:  x (n, size) floats, standardized per image in place */
#include "cdk_common.cuh"

#include "cdigits/augment.h"

/* one block per (image, channel): the mean of its geometric samples, which contrast
 * needs (0 for an image without contrast) */
__global__ void __launch_bounds__(CDK_THREADS)
k_aug_means(int c, int h, int w, const cd_aug_params *params, const uint8_t *src, float *mean)
{
    int img = blockIdx.x / c, ch = blockIdx.x % c;
    const cd_aug_params p = params[img];
    if (p.contrast == 1.0f) { /* the same for the whole block: no thread waits below */
        if (threadIdx.x == 0)
            mean[blockIdx.x] = 0.0f;
        return;
    }
    cd_aug_geom g;
    cd_aug_geom_init(&p, h, w, &g);
    size_t plane = (size_t)h * w;
    const uint8_t *s = src + ((size_t)img * c + ch) * plane;
    double sum = 0.0;
    for (size_t i = threadIdx.x; i < plane; i += blockDim.x)
        sum += cd_aug_sample(&g, s, h, w, (int)(i % w), (int)(i / w));
    sum = cdk_block_sum(sum);
    if (threadIdx.x == 0)
        mean[blockIdx.x] = (float)(sum / (double)plane);
}

/* one thread per output pixel, all channels (HSV needs the three together) */
__global__ void __launch_bounds__(CDK_THREADS)
k_aug_image(int n, int c, int h, int w, const cd_aug_params *params, const float *mean, const uint8_t *src,
            uint8_t *dst)
{
    size_t plane = (size_t)h * w, img_len = plane * c;
    CDK_LOOP(idx, (size_t)n * plane)
    {
        size_t img = idx / plane, at = idx % plane;
        const cd_aug_params p = params[img];
        cd_aug_geom g;
        cd_aug_geom_init(&p, h, w, &g);
        cd_aug_pixel(&p, &g, c, h, w, src + img * img_len, mean + img * c, (int)(at % w), (int)(at / w),
                     dst + img * img_len);
    }
}

/* one thread per output label */
__global__ void __launch_bounds__(CDK_THREADS)
k_aug_label(int n, int c, int h, int w, const cd_aug_params *params, uint8_t fill, const uint8_t *src,
            uint8_t *dst)
{
    size_t plane = (size_t)h * w;
    CDK_LOOP(idx, (size_t)n * c * plane)
    {
        size_t pl = idx / plane, at = idx % plane, img = pl / c;
        const cd_aug_params p = params[img];
        cd_aug_geom g;
        cd_aug_geom_init(&p, h, w, &g);
        dst[idx] = cd_aug_nearest(&g, src + pl * plane, h, w, (int)(at % w), (int)(at / w), fill);
    }
}

/* one block per image: mean and standard deviation in double, then x = (x - m) / sd */
__global__ void __launch_bounds__(CDK_THREADS) k_aug_whiten(size_t size, float *x)
{
    __shared__ double stat[2];
    float *v = x + (size_t)blockIdx.x * size;
    double s = 0.0;
    for (size_t i = threadIdx.x; i < size; i += blockDim.x)
        s += v[i];
    s = cdk_block_sum(s);
    if (threadIdx.x == 0)
        stat[0] = s / (double)size;
    __syncthreads();
    double m = stat[0], q = 0.0;
    for (size_t i = threadIdx.x; i < size; i += blockDim.x)
        q += ((double)v[i] - m) * ((double)v[i] - m);
    q = cdk_block_sum(q);
    if (threadIdx.x == 0) {
        double sd = sqrt(q / (double)size), lo = 1.0 / sqrt((double)size);
        stat[1] = 1.0 / (sd > lo ? sd : lo);
    }
    __syncthreads();
    double inv = stat[1];
    for (size_t i = threadIdx.x; i < size; i += blockDim.x)
        v[i] = (float)(((double)v[i] - m) * inv);
}

extern "C" cudaError_t cdk_augment(cudaStream_t s, int n, int c, int h, int w, const cd_aug_params *params,
                                   int kind, uint8_t fill, const uint8_t *src, uint8_t *dst, float *mean)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
        return cudaSuccess;
    if (c > CD_AUG_MAX_CHANNELS)
        return cudaErrorInvalidValue;
    size_t plane = (size_t)h * w;
    if (kind == CD_AUG_LABEL) {
        size_t total = (size_t)n * c * plane;
        k_aug_label<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(n, c, h, w, params, fill, src, dst);
        return cudaGetLastError();
    }
    k_aug_means<<<(unsigned)n * (unsigned)c, CDK_THREADS, 0, s>>>(c, h, w, params, src, mean);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    k_aug_image<<<cdk_blocks((size_t)n * plane), CDK_THREADS, 0, s>>>(n, c, h, w, params, mean, src, dst);
    return cudaGetLastError();
}

extern "C" cudaError_t cdk_whiten(cudaStream_t s, int n, size_t size, float *x)
{
    if (n <= 0 || size == 0)
        return cudaSuccess;
    k_aug_whiten<<<(unsigned)n, CDK_THREADS, 0, s>>>(size, x);
    return cudaGetLastError();
}
