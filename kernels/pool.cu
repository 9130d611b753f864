/* Pooling with Caffe's rules, which cuDNN does not reproduce: output sizes rounded up
 * (d.oh, d.ow come from the engine), AVE divided by the window clipped to the padded
 * image, and MAX passing the gradient to the first maximum of a window (strict >,
 * row-major scan), so ties (zeros after a ReLU) go where the CPU sends them.
 * A window with no cell inside the image (stride > kernel) outputs 0 and passes no
 * gradient. The backward gathers (one thread per input): no atomics and no mask. */
#include <float.h>

#include "cdk_common.cuh"

/* The window of output (ph, pw), clipped to the image; AVE's divisor in *pool_size. */
__device__ inline void window(const cd_pool_desc &d, int ph, int pw, int *hs, int *he, int *ws,
                              int *we, int *pool_size)
{
    int hstart = ph * d.sh - d.ph, wstart = pw * d.sw - d.pw;
    int hend = min(hstart + d.kh, d.h + d.ph), wend = min(wstart + d.kw, d.w + d.pw);
    *pool_size = (hend - hstart) * (wend - wstart);
    *hs = max(hstart, 0);
    *ws = max(wstart, 0);
    *he = min(hend, d.h);
    *we = min(wend, d.w);
}

/* Index (h*d.w + w) of the first maximum of window (ph, pw) of plane x in a row-major
 * scan (later equal values do not replace it), its value in *maxval; -1 and 0 for a
 * window with no cell inside the image (only when stride > kernel). */
__device__ inline int argmax(const cd_pool_desc &d, const float *x, int ph, int pw, float *maxval)
{
    int hs, he, ws, we, ps;
    window(d, ph, pw, &hs, &he, &ws, &we, &ps);
    if (hs >= he || ws >= we) {
        *maxval = 0.0f;
        return -1;
    }
    int at = hs * d.w + ws;
    float best = x[at];
    for (int h = hs; h < he; h++)
        for (int w = ws; w < we; w++) {
            float v = x[h * d.w + w];
            if (v > best) {
                best = v;
                at = h * d.w + w;
            }
        }
    *maxval = best;
    return at;
}

__global__ void __launch_bounds__(CDK_THREADS)
k_pool_forward(cd_pool_desc d, size_t total, const float *x, float *y)
{
    CDK_LOOP(i, total)
    {
        int pw = (int)(i % d.ow);
        int ph = (int)((i / d.ow) % d.oh);
        size_t plane = i / ((size_t)d.ow * d.oh);
        const float *xp = x + plane * d.h * d.w;
        int hs, he, ws, we, ps;
        window(d, ph, pw, &hs, &he, &ws, &we, &ps);
        if (d.mode == CD_POOL_MAX) {
            float best;
            argmax(d, xp, ph, pw, &best);
            y[i] = best;
        } else {
            float sum = 0.0f;
            for (int h = hs; h < he; h++)
                for (int w = ws; w < we; w++)
                    sum += xp[h * d.w + w];
            y[i] = hs >= he || ws >= we ? 0.0f : sum / ps;
        }
    }
}

__global__ void __launch_bounds__(CDK_THREADS)
k_pool_backward(cd_pool_desc d, size_t total, const float *x, const float *dy,
                float *dx)
{
    CDK_LOOP(i, total)
    {
        int w = (int)(i % d.w);
        int h = (int)((i / d.w) % d.h);
        size_t plane = i / ((size_t)d.w * d.h);
        const float *xp = x + plane * d.h * d.w;
        const float *dyp = dy + plane * d.oh * d.ow;
        /* outputs whose window holds (h, w) */
        int hp = h + d.ph, wp = w + d.pw;
        int phs = hp < d.kh ? 0 : (hp - d.kh) / d.sh + 1;
        int phe = min(hp / d.sh + 1, d.oh);
        int pws = wp < d.kw ? 0 : (wp - d.kw) / d.sw + 1;
        int pwe = min(wp / d.sw + 1, d.ow);
        float g = 0.0f;
        for (int ph = phs; ph < phe; ph++)
            for (int pw = pws; pw < pwe; pw++) {
                if (d.mode == CD_POOL_MAX) {
                    float best;
                    if (argmax(d, xp, ph, pw, &best) == h * d.w + w)
                        g += dyp[ph * d.ow + pw];
                } else {
                    int hs, he, ws, we, ps;
                    window(d, ph, pw, &hs, &he, &ws, &we, &ps);
                    g += dyp[ph * d.ow + pw] / ps;
                }
            }
        dx[i] = g;
    }
}

extern "C" {

cudaError_t cdk_pool_forward(cudaStream_t s, cd_pool_desc d, const float *x, float *y)
{
    size_t total = (size_t)d.n * d.c * d.oh * d.ow;
    if (total == 0 || d.n <= 0 || d.c <= 0)
        return cudaSuccess;
    k_pool_forward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, y);
    return cudaGetLastError();
}

cudaError_t cdk_pool_backward(cudaStream_t s, cd_pool_desc d, const float *x, const float *dy,
                              float *dx)
{
    size_t total = (size_t)d.n * d.c * d.h * d.w;
    if (total == 0 || d.n <= 0 || d.c <= 0)
        return cudaSuccess;
    k_pool_backward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(d, total, x, dy, dx);
    return cudaGetLastError();
}

} /* extern "C" */
