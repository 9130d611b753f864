/* Batch preparation on the device (kernels/prepare.cu). Every pointer argument is a
 * device pointer of this backend: the uint8 batch, the per-image offsets and mirror
 * flags, and the mean image. */
#include "cuda_internal.h"

void cuda_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                        const uint8_t *src, const int *oy, const int *ox, const uint8_t *mirror,
                        const float *mean, float scale, float *dst)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_prepare_batch(cuda_ctx_of(be)->stream, n, c, sh, sw, oh, ow, src, oy, ox,
                                    mirror, mean, scale, dst));
}
