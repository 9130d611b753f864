/* Activations and softmax. Sigmoid and tanh run on cuDNN; ReLU runs on a kernel
 * because Caffe's negative_slope (leaky ReLU) has no cuDNN mode and the backward must
 * decide on y > 0 for in-place callers. Softmax over the channel axis is cuDNN's
 * CHANNEL mode on the (outer, channels, inner, 1) view. */
#include "cuda_internal.h"

/* Sets ctx->act to cuDNN's mode for act: 0, or -1 for an activation it does not run
 * (fatal; while capturing the failure is kept and the caller returns) */
static int set_cudnn_act(cd_backend_t *be, int act)
{
    cudnnActivationMode_t mode;
    switch (act) {
    case CD_ACT_SIGMOID:
        mode = CUDNN_ACTIVATION_SIGMOID;
        break;
    case CD_ACT_TANH:
        mode = CUDNN_ACTIVATION_TANH;
        break;
    default:
        cd_cuda_fail_msg(be, "activation %d is not one of relu, sigmoid, tanh", act);
        return -1;
    }
    CD_CUDNN_CHECK(be, cudnnSetActivationDescriptor(cuda_ctx_of(be)->act, mode, CUDNN_PROPAGATE_NAN,
                                                    0.0));
    return 0;
}

/* Sigmoid or tanh on cuDNN, in (len, 1, 1, 1) views of at most CUDA_CHUNK floats:
 * out = act(x) when dy is NULL, else out = dx of dy through the activation, which cuDNN
 * derives from y (x is passed for the API; in place, x == y). */
static void cudnn_act(cd_backend_t *be, int act, size_t n, const float *x, const float *y,
                      const float *dy, float *out)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (set_cudnn_act(be, act) != 0)
        return;
    const float one = 1.0f, zero = 0.0f;
    for (size_t at = 0; at < n; at += CUDA_CHUNK) {
        size_t len = n - at < CUDA_CHUNK ? n - at : CUDA_CHUNK;
        CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(ctx->t_a, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                      (int)len, 1, 1, 1));
        if (!dy)
            CD_CUDNN_CHECK(be, cudnnActivationForward(ctx->dnn, ctx->act, &one, ctx->t_a, x + at,
                                                      &zero, ctx->t_a, out + at));
        else
            CD_CUDNN_CHECK(be, cudnnActivationBackward(ctx->dnn, ctx->act, &one, ctx->t_a, y + at,
                                                       ctx->t_a, dy + at, ctx->t_a, x + at, &zero,
                                                       ctx->t_a, out + at));
    }
}

void cuda_act_forward(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y)
{
    cuda_use_device(be);
    if (act == CD_ACT_RELU)
        CD_LAUNCH(be, cdk_relu_forward(cuda_ctx_of(be)->stream, n, slope, x, y));
    else
        cudnn_act(be, act, n, x, NULL, NULL, y);
}

void cuda_act_backward(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                       const float *y, const float *dy, float *dx)
{
    cuda_use_device(be);
    /* ReLU decides on x > 0, as the CPU does (y > 0 differs for a negative slope); y
     * only when x is not kept (in place, slope >= 0, where the two agree) */
    if (act == CD_ACT_RELU)
        CD_LAUNCH(be, cdk_relu_backward(cuda_ctx_of(be)->stream, n, slope, x ? x : y, dy, dx));
    else
        cudnn_act(be, act, n, x ? x : y, y, dy, dx);
}

/* The (outer, channels, inner, 1) view of a softmax on the current device: 0, or -1
 * for an empty one (nothing to do). */
static int softmax_view(cd_backend_t *be, int outer, int channels, int inner)
{
    if (outer <= 0 || channels <= 0 || inner <= 0)
        return -1;
    cuda_use_device(be);
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(cuda_ctx_of(be)->t_a, CUDNN_TENSOR_NCHW,
                                                  CUDNN_DATA_FLOAT, outer, channels, inner, 1));
    return 0;
}

void cuda_softmax_forward(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                          float *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    const float one = 1.0f, zero = 0.0f;
    if (softmax_view(be, outer, channels, inner) == 0)
        CD_CUDNN_CHECK(be, cudnnSoftmaxForward(ctx->dnn, CUDNN_SOFTMAX_ACCURATE,
                                               CUDNN_SOFTMAX_MODE_CHANNEL, &one, ctx->t_a, x, &zero,
                                               ctx->t_a, y));
}

void cuda_softmax_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                           const float *dy, float *dx)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    const float one = 1.0f, zero = 0.0f;
    if (softmax_view(be, outer, channels, inner) == 0)
        CD_CUDNN_CHECK(be, cudnnSoftmaxBackward(ctx->dnn, CUDNN_SOFTMAX_ACCURATE,
                                                CUDNN_SOFTMAX_MODE_CHANNEL, &one, ctx->t_a, y,
                                                ctx->t_a, dy, &zero, ctx->t_a, dx));
}
