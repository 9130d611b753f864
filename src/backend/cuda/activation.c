/* Activations and softmax. Sigmoid and tanh run on cuDNN; ReLU runs on a kernel
 * because Caffe's negative_slope (leaky ReLU) has no cuDNN mode and the backward must
 * decide on y > 0 for in-place callers. Softmax over the channel axis is cuDNN's
 * CHANNEL mode on the (outer, channels, inner, 1) view. */
#include "cuda_internal.h"

/* cuDNN's mode for act into *mode: 0, or -1 for an activation it does not run (fatal;
 * while capturing the failure is kept and the caller returns) */
static int cudnn_mode(cd_backend_t *be, int act, cudnnActivationMode_t *mode)
{
    switch (act) {
    case CD_ACT_SIGMOID:
        *mode = CUDNN_ACTIVATION_SIGMOID;
        return 0;
    case CD_ACT_TANH:
        *mode = CUDNN_ACTIVATION_TANH;
        return 0;
    default:
        cd_cuda_fail_msg(be, "activation %d is not one of relu, sigmoid, tanh", act);
        return -1;
    }
}

/* a (len, 1, 1, 1) view of `len` floats */
static void set_flat(cd_backend_t *be, cudnnTensorDescriptor_t t, size_t len)
{
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)len,
                                                  1, 1, 1));
}

void cuda_act_forward(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (act == CD_ACT_RELU) {
        CD_LAUNCH(be, cdk_relu_forward(ctx->stream, n, slope, x, y));
        return;
    }
    cudnnActivationMode_t mode;
    if (cudnn_mode(be, act, &mode) != 0)
        return;
    CD_CUDNN_CHECK(be, cudnnSetActivationDescriptor(ctx->act, mode, CUDNN_PROPAGATE_NAN, 0.0));
    const float one = 1.0f, zero = 0.0f;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        size_t len = n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK;
        set_flat(be, ctx->t_a, len);
        CD_CUDNN_CHECK(be, cudnnActivationForward(ctx->dnn, ctx->act, &one, ctx->t_a, x + at, &zero,
                                                  ctx->t_a, y + at));
    }
}

void cuda_act_backward(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                       const float *y, const float *dy, float *dx)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (act == CD_ACT_RELU) {
        /* y > 0 equals x > 0 for slope >= 0; either may be the one passed */
        CD_LAUNCH(be, cdk_relu_backward(ctx->stream, n, slope, y ? y : x, dy, dx));
        return;
    }
    cudnnActivationMode_t mode;
    if (cudnn_mode(be, act, &mode) != 0)
        return;
    CD_CUDNN_CHECK(be, cudnnSetActivationDescriptor(ctx->act, mode, CUDNN_PROPAGATE_NAN, 0.0));
    const float one = 1.0f, zero = 0.0f;
    if (!x)
        x = y;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        size_t len = n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK;
        set_flat(be, ctx->t_a, len);
        /* sigmoid and tanh derive from y; x is passed for the API (in place: x == y) */
        CD_CUDNN_CHECK(be, cudnnActivationBackward(ctx->dnn, ctx->act, &one, ctx->t_a, y + at,
                                                   ctx->t_a, dy + at, ctx->t_a, x + at, &zero,
                                                   ctx->t_a, dx + at));
    }
}

static void set_softmax_view(cd_backend_t *be, int outer, int channels, int inner)
{
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(cuda_ctx_of(be)->t_a, CUDNN_TENSOR_NCHW,
                                                  CUDNN_DATA_FLOAT, outer, channels, inner, 1));
}

void cuda_softmax_forward(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                          float *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (outer <= 0 || channels <= 0 || inner <= 0)
        return;
    cuda_use_device(be);
    set_softmax_view(be, outer, channels, inner);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnSoftmaxForward(ctx->dnn, CUDNN_SOFTMAX_ACCURATE,
                                           CUDNN_SOFTMAX_MODE_CHANNEL, &one, ctx->t_a, x, &zero,
                                           ctx->t_a, y));
}

void cuda_softmax_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                           const float *dy, float *dx)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (outer <= 0 || channels <= 0 || inner <= 0)
        return;
    cuda_use_device(be);
    set_softmax_view(be, outer, channels, inner);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnSoftmaxBackward(ctx->dnn, CUDNN_SOFTMAX_ACCURATE,
                                            CUDNN_SOFTMAX_MODE_CHANNEL, &one, ctx->t_a, y,
                                            ctx->t_a, dy, &zero, ctx->t_a, dx));
}
