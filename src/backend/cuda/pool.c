/* Pooling on the kernels of kernels/pool.cu rather than cuDNN: Caffe rounds output
 * sizes up, divides AVE by the window clipped to the padded image, and sends a MAX
 * gradient to the first maximum of its window; cuDNN rounds down and leaves ties to
 * its implementation, so it cannot match the CPU reference where those rules apply. */
#include "cuda_internal.h"

/* This backend keeps no mask (it has no pool_mask_size), so mask is always NULL here. */
void cuda_pool_forward(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y, float *mask)
{
    (void)mask;
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_pool_forward(cuda_ctx_of(be)->stream, *d, x, y));
}

/* y is not needed: the backward finds each window's maximum again from x */
void cuda_pool_backward(cd_backend_t *be, const cd_pool_desc *d, const float *x, const float *y,
                        const float *mask, const float *dy, float *dx)
{
    (void)y, (void)mask;
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_pool_backward(cuda_ctx_of(be)->stream, *d, x, dy, dx));
}
