/* Batch preparation on the device (kernels/prepare.cu) and DIGITS's augmentations
 * (kernels/augment.cu). Every pointer argument is a device pointer of this backend: the
 * uint8 batch, the per-image offsets and mirror flags, the mean image, the per-image
 * augmentation parameters. */
#include "cuda_internal.h"

void cuda_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                        const uint8_t *src, const int *oy, const int *ox, const uint8_t *mirror,
                        const float *mean, float scale, float *dst)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_prepare_batch(cuda_ctx_of(be)->stream, n, c, sh, sw, oh, ow, src, oy, ox,
                                    mirror, mean, scale, dst));
}

void cuda_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                        int kind, uint8_t fill, const uint8_t *src, uint8_t *dst)
{
    cuda_use_device(be);
    float *mean = NULL;
    if (kind == CD_AUG_IMAGE && !(mean = cuda_scratch(be, (size_t)n * c * sizeof(float))))
        return; /* only while capturing: the failure is kept for graph_end */
    CD_LAUNCH(be, cdk_augment(cuda_ctx_of(be)->stream, n, c, h, w, params, kind, fill, src, dst, mean));
}

void cuda_whiten_batch(cd_backend_t *be, int n, size_t size, float *x)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_whiten(cuda_ctx_of(be)->stream, n, size, x));
}
