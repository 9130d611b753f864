/* Softmax cross entropy and accuracy (kernels/loss.cu). The results stay on the device
 * (one float each) until the engine downloads them, so a step needs no host wait. */
#include "cuda_internal.h"

void cuda_xent_forward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                       const float *label, int has_ignore, int ignore_label, float *loss_out,
                       float *count_out)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_xent_forward(cuda_ctx_of(be)->stream, outer, channels, inner, prob, label,
                                   has_ignore, ignore_label, loss_out, count_out));
}

void cuda_xent_backward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                        const float *label, int has_ignore, int ignore_label, float scale,
                        float *dx)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_xent_backward(cuda_ctx_of(be)->stream, outer, channels, inner, prob, label,
                                    has_ignore, ignore_label, scale, dx));
}

void cuda_accuracy(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                   const float *label, int top_k, int has_ignore, int ignore_label,
                   float *correct_out, float *count_out)
{
    cuda_use_device(be);
    CD_LAUNCH(be, cdk_accuracy(cuda_ctx_of(be)->stream, outer, channels, inner, x, label, top_k,
                               has_ignore, ignore_label, correct_out, count_out));
}
