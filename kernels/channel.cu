/* Per-channel kernels on (outer, channels, inner) data: Scale's affine, its gradient
 * sums, and batch norm. Sums are deterministic: each channel's elements are split into
 * a fixed number of slices reduced by one block each (in double), then summed in order. */
#include "cdk_common.cuh"

/* y[o,c,i] = x[o,c,i]*gamma[c] + beta[c] (gamma NULL: 1, beta NULL: 0) */
__global__ void __launch_bounds__(CDK_THREADS)
k_channel_affine(size_t total, int channels, int inner, const float *x,
                 const float *gamma, const float *beta, float *y)
{
    CDK_LOOP(i, total)
    {
        int c = (int)((i / (size_t)inner) % (size_t)channels);
        float v = gamma ? x[i] * gamma[c] : x[i];
        y[i] = beta ? v + beta[c] : v;
    }
}

/* Slices per channel: enough blocks to fill the GPU, none smaller than 4096 items. */
static int sum_splits(int outer, int channels, int inner)
{
    size_t per_channel = (size_t)outer * inner;
    size_t want = (512 + (size_t)channels - 1) / (size_t)channels;
    size_t most = (per_channel + 4095) / 4096;
    size_t s = want < most ? want : most;
    if (s < 1)
        s = 1;
    if (s > 1024)
        s = 1024;
    return (int)s;
}

/* grid (channels, splits): channels on x, which has no 65,535 limit (splits is at most
 * 1024); block reduces its slice of channel blockIdx.x into
 * partial[(c*splits + s)*2 + {0,1}] */
__global__ void __launch_bounds__(CDK_THREADS)
k_channel_partial(int mode, int outer, int channels, int inner, const float *a,
                  const float *b, const float *m, double *partial)
{
    int c = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
    size_t per_channel = (size_t)outer * inner;
    size_t chunk = (per_channel + splits - 1) / splits;
    size_t begin = (size_t)split * chunk;
    size_t end = begin + chunk < per_channel ? begin + chunk : per_channel;
    double s1 = 0.0, s2 = 0.0;
    float mc = mode == CDK_SUM_SQDEV ? m[c] : 0.0f;
    for (size_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        size_t o = j / (size_t)inner, in = j - o * (size_t)inner;
        size_t idx = (o * (size_t)channels + (size_t)c) * (size_t)inner + in;
        float av = a[idx];
        if (mode == CDK_SUM_SQDEV) {
            double d = (double)av - (double)mc;
            s1 += d * d;
        } else {
            s1 += b ? (double)av * (double)b[idx] : (double)av;
            s2 += (double)av;
        }
    }
    s1 = cdk_block_sum(s1);
    __syncthreads();
    s2 = cdk_block_sum(s2);
    if (threadIdx.x == 0) {
        partial[((size_t)c * splits + split) * 2 + 0] = s1;
        partial[((size_t)c * splits + split) * 2 + 1] = s2;
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_channel_finish(int channels, int splits, const double *partial, float *out1,
                 float keep1, float scale1, float *out2, float keep2, float scale2)
{
    CDK_LOOP(c, (size_t)channels)
    {
        double s1 = 0.0, s2 = 0.0;
        for (int s = 0; s < splits; s++) {
            s1 += partial[(c * splits + s) * 2 + 0];
            s2 += partial[(c * splits + s) * 2 + 1];
        }
        if (out1)
            out1[c] = (float)((keep1 != 0.0f ? (double)keep1 * out1[c] : 0.0) + (double)scale1 * s1);
        if (out2)
            out2[c] = (float)((keep2 != 0.0f ? (double)keep2 * out2[c] : 0.0) + (double)scale2 * s2);
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_bn_normalize(size_t total, int channels, int inner, const float *x,
               const float *mean, const float *var, float eps, float *y)
{
    CDK_LOOP(i, total)
    {
        int c = (int)((i / (size_t)inner) % (size_t)channels);
        y[i] = (x[i] - mean[c]) / sqrtf(var[c] + eps);
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_bn_backward(size_t total, int channels, int inner, const float *y,
              const float *var, float eps, int global_stats, const float *mdy,
              const float *mdyy, const float *dy, float *dx)
{
    CDK_LOOP(i, total)
    {
        int c = (int)((i / (size_t)inner) % (size_t)channels);
        float inv = 1.0f / sqrtf(var[c] + eps);
        dx[i] = global_stats ? dy[i] * inv : (dy[i] - mdy[c] - y[i] * mdyy[c]) * inv;
    }
}

static size_t total_of(int outer, int channels, int inner)
{
    if (outer <= 0 || channels <= 0 || inner <= 0)
        return 0;
    return (size_t)outer * (size_t)channels * (size_t)inner;
}

extern "C" {

cudaError_t cdk_channel_affine(cudaStream_t s, int outer, int channels, int inner, const float *x,
                               const float *gamma, const float *beta, float *y)
{
    size_t total = total_of(outer, channels, inner);
    if (total == 0)
        return cudaSuccess;
    k_channel_affine<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(total, channels, inner, x, gamma,
                                                               beta, y);
    return cudaGetLastError();
}

size_t cdk_channel_sums_scratch(int outer, int channels, int inner)
{
    if (total_of(outer, channels, inner) == 0)
        return 0;
    return (size_t)channels * (size_t)sum_splits(outer, channels, inner) * 2 * sizeof(double);
}

cudaError_t cdk_channel_sums(cudaStream_t s, int mode, int outer, int channels, int inner,
                             const float *a, const float *b, const float *m, void *partial,
                             float *out1, float keep1, float scale1,
                             float *out2, float keep2, float scale2)
{
    if (channels <= 0)
        return cudaSuccess;
    if (total_of(outer, channels, inner) == 0) {
        /* nothing to sum: the sums are zero */
        k_channel_finish<<<1, 1, 0, s>>>(channels, 0, (const double *)partial, out1, keep1, 0.0f,
                                         out2, keep2, 0.0f);
        return cudaGetLastError();
    }
    int splits = sum_splits(outer, channels, inner);
    dim3 grid((unsigned)channels, (unsigned)splits);
    k_channel_partial<<<grid, CDK_THREADS, 0, s>>>(mode, outer, channels, inner, a, b, m,
                                                   (double *)partial);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    k_channel_finish<<<cdk_blocks((size_t)channels), CDK_THREADS, 0, s>>>(
        channels, splits, (const double *)partial, out1, keep1, scale1, out2, keep2, scale2);
    return cudaGetLastError();
}

cudaError_t cdk_bn_normalize(cudaStream_t s, int outer, int channels, int inner, const float *x,
                             const float *mean, const float *var, float eps, float *y)
{
    size_t total = total_of(outer, channels, inner);
    if (total == 0)
        return cudaSuccess;
    k_bn_normalize<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(total, channels, inner, x, mean, var,
                                                             eps, y);
    return cudaGetLastError();
}

cudaError_t cdk_bn_backward(cudaStream_t s, int outer, int channels, int inner, const float *y,
                            const float *var, float eps, int global_stats, const float *mdy,
                            const float *mdyy, const float *dy, float *dx)
{
    size_t total = total_of(outer, channels, inner);
    if (total == 0)
        return cudaSuccess;
    k_bn_backward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(total, channels, inner, y, var, eps,
                                                            global_stats, mdy, mdyy, dy, dx);
    return cudaGetLastError();
}

} /* extern "C" */
