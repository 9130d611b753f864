/* Data preparation on the device: crop, flips, mean subtraction and scaling of a batch
 * of uint8 images, as Caffe's DataTransformer does it: the mean is taken at the source
 * pixel (the crop of the mean at the same offset), a flip flips the source column or row.
 *   src (n, c, sh, sw) uint8; oy, ox, mirror (n); mean (c, sh, sw); mirror and mean
 *   may be NULL; mirror[i] holds flip bits: 1 left-right, 2 upside down (enum cd_flip);
 *   dst (n, c, oh, ow) = (src[i, ch, sy, sx] - mean[ch, sy, sx]) * scale
 *   with sx = mirror[i] & 1 ? ox + ow-1-x : ox + x, sy = mirror[i] & 2 ? oy + oh-1-y : oy + y. */
#include "cdk_common.cuh"

__global__ void __launch_bounds__(CDK_THREADS)
k_prepare_batch(size_t total, int c, int sh, int sw, int oh, int ow,
                const uint8_t *src, const int *oy, const int *ox,
                const uint8_t *mirror, const float *mean, float scale, float *dst)
{
    CDK_LOOP(idx, total)
    {
        int x = (int)(idx % ow);
        int y = (int)((idx / ow) % oh);
        int ch = (int)((idx / ((size_t)ow * oh)) % c);
        size_t img = idx / ((size_t)ow * oh * c);
        int flip = mirror ? mirror[img] : 0;
        int sy = flip & 2 ? oy[img] + oh - 1 - y : oy[img] + y;
        int sx = flip & 1 ? ox[img] + ow - 1 - x : ox[img] + x;
        size_t mi = ((size_t)ch * sh + sy) * sw + sx;
        float v = (float)src[img * (size_t)c * sh * sw + mi];
        if (mean)
            v -= mean[mi];
        dst[idx] = v * scale;
    }
}

extern "C" cudaError_t cdk_prepare_batch(cudaStream_t s, int n, int c, int sh, int sw, int oh,
                                         int ow, const uint8_t *src, const int *oy, const int *ox,
                                         const uint8_t *mirror, const float *mean, float scale,
                                         float *dst)
{
    if (n <= 0 || c <= 0 || oh <= 0 || ow <= 0)
        return cudaSuccess;
    if (oh > sh || ow > sw)
        return cudaErrorInvalidValue;
    size_t total = (size_t)n * c * oh * ow;
    k_prepare_batch<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(total, c, sh, sw, oh, ow, src, oy, ox,
                                                              mirror, mean, scale, dst);
    return cudaGetLastError();
}
