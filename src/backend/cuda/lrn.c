/* Local response normalization: cuDNN's cross-channel LRN computes Caffe's
 * ACROSS_CHANNELS exactly (alpha divided by the window size) within its parameter
 * limits; WITHIN_CHANNEL, and ACROSS outside those limits, run on kernels/lrn.cu. */
#include "cuda_internal.h"

static int cudnn_takes(const cd_lrn_desc *d)
{
    return d->mode == CD_LRN_ACROSS && d->size >= CUDNN_LRN_MIN_N && d->size <= CUDNN_LRN_MAX_N &&
           d->k >= CUDNN_LRN_MIN_K && d->beta >= CUDNN_LRN_MIN_BETA;
}

static void set_descriptors(cd_backend_t *be, const cd_lrn_desc *d)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    CD_CUDNN_CHECK(be, cudnnSetLRNDescriptor(ctx->lrn, (unsigned)d->size, d->alpha, d->beta, d->k));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(ctx->t_a, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                  d->n, d->c, d->h, d->w));
}

void cuda_lrn_forward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (!cudnn_takes(d)) {
        CD_LAUNCH(be, cdk_lrn_forward(ctx->stream, *d, x, y));
        return;
    }
    set_descriptors(be, d);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnLRNCrossChannelForward(ctx->dnn, ctx->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                   &one, ctx->t_a, x, &zero, ctx->t_a, y));
}

void cuda_lrn_backward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, const float *y,
                       const float *dy, float *dx)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (!cudnn_takes(d)) {
        float *scratch = NULL;
        if (d->mode == CD_LRN_WITHIN &&
            !(scratch = cuda_scratch(be, (size_t)d->n * d->c * d->h * d->w * sizeof(float))))
            return;
        CD_LAUNCH(be, cdk_lrn_backward(ctx->stream, *d, x, y, dy, dx, scratch));
        return;
    }
    set_descriptors(be, d);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnLRNCrossChannelBackward(ctx->dnn, ctx->lrn,
                                                    CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, ctx->t_a,
                                                    y, ctx->t_a, dy, ctx->t_a, x, &zero, ctx->t_a,
                                                    dx));
}
