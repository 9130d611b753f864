/* Per-channel ops on (outer, channels, inner) data: Scale's affine and its gradient,
 * and batch norm's statistics, normalization and backward (kernels/channel.cu). The
 * interface splits batch norm into three steps with Caffe's biased variance, which
 * cuDNN's fused batch norm does not expose, so all of it runs on the kernels. */
#include "cuda_internal.h"

#define STREAM(be) (cuda_ctx_of(be)->stream)

void cuda_channel_affine(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                         const float *gamma, const float *beta, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_channel_affine(STREAM(be), outer, channels, inner, x, gamma, beta, y));
}

/* dgamma[c] += sum dy*x, dbeta[c] += sum dy */
void cuda_channel_affine_grad(cd_backend_t *be, int outer, int channels, int inner,
                              const float *x, const float *dy, float *dgamma, float *dbeta)
{
    if (!dgamma && !dbeta)
        return;
    cuda_use_device(be);
    void *partial = cuda_scratch(be, cdk_channel_sums_scratch(outer, channels, inner));
    if (!partial)
        return;
    CD_LAUNCH(be, cdk_channel_sums(STREAM(be), CDK_SUM_AB_A, outer, channels, inner, dy,
                                   dgamma ? x : NULL, NULL, partial, dgamma, 1.0f, 1.0f, dbeta,
                                   1.0f, 1.0f));
}

/* mean = sum x / m, then var = sum (x - mean)^2 / m (two passes, for accuracy) */
void cuda_bn_stats(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                   float *mean, float *var)
{
    cuda_use_device(be);
    double m = (double)outer * inner;
    float inv = m > 0 ? (float)(1.0 / m) : 0.0f;
    void *partial = cuda_scratch(be, cdk_channel_sums_scratch(outer, channels, inner));
    if (!partial)
        return;
    CD_LAUNCH(be, cdk_channel_sums(STREAM(be), CDK_SUM_AB_A, outer, channels, inner, x, NULL,
                                   NULL, partial, mean, 0.0f, inv, NULL, 0.0f, 0.0f));
    CD_LAUNCH(be, cdk_channel_sums(STREAM(be), CDK_SUM_SQDEV, outer, channels, inner, x, NULL,
                                   mean, partial, var, 0.0f, inv, NULL, 0.0f, 0.0f));
}

void cuda_bn_normalize(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                       const float *mean, const float *var, float eps, float *y)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_bn_normalize(STREAM(be), outer, channels, inner, x, mean, var, eps, y));
}

/* With batch statistics: mean(dy) and mean(dy*xhat) per channel first, then
 * dx = (dy - mean(dy) - xhat*mean(dy*xhat)) / sqrt(var + eps). */
void cuda_bn_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                      const float *var, float eps, int global_stats, const float *dy, float *dx)
{
    cuda_use_device(be);
    if (global_stats) {
        CD_LAUNCH(be, cdk_bn_backward(STREAM(be), outer, channels, inner, y, var, eps, 1, NULL,
                                      NULL, dy, dx));
        return;
    }
    double m = (double)outer * inner;
    float inv = m > 0 ? (float)(1.0 / m) : 0.0f;
    /* scratch: the partial sums, then mean(dy) and mean(dy*y), each `channels` floats,
     * placed after the partial sums (kept 256-byte aligned) */
    size_t part = cdk_channel_sums_scratch(outer, channels, inner);
    part = (part + 255) & ~(size_t)255;
    char *scratch = cuda_scratch(be, part + 2 * (size_t)channels * sizeof(float));
    if (!scratch)
        return;
    float *mdyy = (float *)(scratch + part);
    float *mdy = mdyy + channels;
    CD_LAUNCH(be, cdk_channel_sums(STREAM(be), CDK_SUM_AB_A, outer, channels, inner, dy, y, NULL,
                                   scratch, mdyy, 0.0f, inv, mdy, 0.0f, inv));
    CD_LAUNCH(be, cdk_bn_backward(STREAM(be), outer, channels, inner, y, var, eps, 0, mdy, mdyy,
                                  dy, dx));
}
