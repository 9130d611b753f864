/* Local response normalization, both of Caffe's modes (see cd_lrn_desc). cuDNN covers
 * ACROSS_CHANNELS for sizes 1..16 (src/backend/cuda/lrn.c); these kernels do the rest:
 * WITHIN_CHANNEL, and ACROSS with parameters cuDNN refuses. One thread per element;
 * the scale is recomputed where it is needed instead of being stored. */
#include "cdk_common.cuh"

/* ACROSS: k + alpha/size * sum of x^2 over channels [c-pre, c+post] of pixel p */
__device__ inline float across_scale(const cd_lrn_desc &d, const float *xp, size_t plane, int c)
{
    int pre = (d.size - 1) / 2;
    int lo = max(c - pre, 0), hi = min(c - pre + d.size - 1, d.c - 1);
    float sum = 0.0f;
    for (int j = lo; j <= hi; j++) {
        float v = xp[(size_t)j * plane];
        sum += v * v;
    }
    return d.k + d.alpha / d.size * sum;
}

/* WITHIN: 1 + alpha/(size*size) * sum of x^2 over the size x size window around (h, w) */
__device__ inline float within_scale(const cd_lrn_desc &d, const float *xc, int h, int w)
{
    int pre = (d.size - 1) / 2;
    int h0 = max(h - pre, 0), h1 = min(h - pre + d.size, d.h);
    int w0 = max(w - pre, 0), w1 = min(w - pre + d.size, d.w);
    float sum = 0.0f;
    for (int y = h0; y < h1; y++)
        for (int x = w0; x < w1; x++) {
            float v = xc[y * d.w + x];
            sum += v * v;
        }
    return 1.0f + d.alpha / (float)(d.size * d.size) * sum;
}

__global__ void __launch_bounds__(CDK_THREADS)
k_lrn_forward(cd_lrn_desc d, size_t total, const float *x, float *y)
{
    size_t plane = (size_t)d.h * d.w;
    CDK_LOOP(i, total)
    {
        size_t p = i % plane;
        int c = (int)((i / plane) % d.c);
        float s;
        if (d.mode == CD_LRN_ACROSS) {
            s = across_scale(d, x + (i - (size_t)c * plane), plane, c);
        } else {
            int h = (int)(p / d.w), w = (int)(p % d.w);
            s = within_scale(d, x + (i - p), h, w);
        }
        y[i] = x[i] * powf(s, -d.beta);
    }
}

/* ACROSS: dx[c] = dy[c]*s[c]^-beta - 2*alpha*beta/size * x[c] * sum_{c' in [c-post, c+pre]}
 * dy[c']*y[c']/s[c'] */
__global__ void __launch_bounds__(CDK_THREADS)
k_lrn_across_backward(cd_lrn_desc d, size_t total, const float *x, const float *y,
                      const float *dy, float *dx)
{
    size_t plane = (size_t)d.h * d.w;
    int pre = (d.size - 1) / 2, post = d.size - 1 - pre;
    float coef = 2.0f * d.alpha * d.beta / d.size;
    CDK_LOOP(i, total)
    {
        int c = (int)((i / plane) % d.c);
        size_t base = i - (size_t)c * plane; /* channel 0 of this pixel */
        const float *xp = x + base;
        float acc = 0.0f;
        int lo = max(c - post, 0), hi = min(c + pre, d.c - 1);
        for (int j = lo; j <= hi; j++) {
            size_t k = base + (size_t)j * plane;
            acc += dy[k] * y[k] / across_scale(d, xp, plane, j);
        }
        dx[i] = dy[i] * powf(across_scale(d, xp, plane, c), -d.beta) - coef * x[i] * acc;
    }
}

/* WITHIN, first pass: t = dy*y/s */
__global__ void __launch_bounds__(CDK_THREADS)
k_lrn_within_ratio(cd_lrn_desc d, size_t total, const float *x, const float *y,
                   const float *dy, float *t)
{
    size_t plane = (size_t)d.h * d.w;
    CDK_LOOP(i, total)
    {
        size_t p = i % plane;
        int h = (int)(p / d.w), w = (int)(p % d.w);
        t[i] = dy[i] * y[i] / within_scale(d, x + (i - p), h, w);
    }
}

/* WITHIN, second pass: dx = dy*s^-beta - 2*alpha*beta/size^2 * x * sum of t over the
 * outputs whose window holds this pixel */
__global__ void __launch_bounds__(CDK_THREADS)
k_lrn_within_backward(cd_lrn_desc d, size_t total, const float *x, const float *t,
                      const float *dy, float *dx)
{
    size_t plane = (size_t)d.h * d.w;
    int pre = (d.size - 1) / 2, post = d.size - 1 - pre;
    float coef = 2.0f * d.alpha * d.beta / (float)(d.size * d.size);
    CDK_LOOP(i, total)
    {
        size_t p = i % plane;
        int h = (int)(p / d.w), w = (int)(p % d.w);
        const float *tc = t + (i - p);
        float acc = 0.0f;
        for (int y = max(h - post, 0); y <= min(h + pre, d.h - 1); y++)
            for (int xx = max(w - post, 0); xx <= min(w + pre, d.w - 1); xx++)
                acc += tc[y * d.w + xx];
        float s = within_scale(d, x + (i - p), h, w);
        dx[i] = dy[i] * powf(s, -d.beta) - coef * x[i] * acc;
    }
}

extern "C" {

cudaError_t cdk_lrn_forward(cudaStream_t s, cd_lrn_desc d, const float *x, float *y)
{
    size_t total = (size_t)d.n * d.c * d.h * d.w;
    if (d.n <= 0 || d.c <= 0 || total == 0)
        return cudaSuccess;
    k_lrn_forward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, y);
    return cudaGetLastError();
}

cudaError_t cdk_lrn_backward(cudaStream_t s, cd_lrn_desc d, const float *x, const float *y,
                             const float *dy, float *dx, float *scratch)
{
    size_t total = (size_t)d.n * d.c * d.h * d.w;
    if (d.n <= 0 || d.c <= 0 || total == 0)
        return cudaSuccess;
    if (d.mode == CD_LRN_ACROSS) {
        k_lrn_across_backward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, y, dy, dx);
        return cudaGetLastError();
    }
    k_lrn_within_ratio<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, y, dy, scratch);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    k_lrn_within_backward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, scratch, dy, dx);
    return cudaGetLastError();
}

} /* extern "C" */
