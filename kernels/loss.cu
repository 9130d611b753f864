/* Softmax cross entropy (forward and backward) and top-k accuracy. The sums are
 * reduced by one block in a fixed order, so the results are deterministic; they are
 * batch-sized (outer*inner positions), far from worth a grid-wide reduction.
 * A label outside [0, channels) is used with probability 0, as on the CPU: the loss
 * shows it (-log(FLT_MIN) ~ 87.3 per position), accuracy counts it as wrong, and
 * nothing is read out of bounds. */
#include <float.h>

#include "cdk_common.cuh"

#include "cdigits/util.h" /* cd_label_at: the label rule the CPU backend shares */

/* one block of this many threads reduces a whole batch (kernels launched with it
 * declare it in __launch_bounds__: at 1024 threads, 64 registers each at most) */
#define CDK_REDUCE_THREADS 1024

/* The block's sums of a and of b, written by thread 0 to *a_out and *b_out. */
__device__ inline void block_sums_out(double a, double b, float *a_out, float *b_out)
{
    a = cdk_block_sum(a);
    __syncthreads();
    b = cdk_block_sum(b);
    if (threadIdx.x == 0) {
        *a_out = (float)a;
        *b_out = (float)b;
    }
}

__global__ void __launch_bounds__(CDK_REDUCE_THREADS)
k_xent_forward(int outer, int channels, int inner, const float *prob,
               const float *label, int has_ignore, int ignore_label,
               float *loss_out, float *count_out)
{
    size_t positions = (size_t)outer * inner;
    double loss = 0.0;
    double count = 0.0;
    for (size_t pos = threadIdx.x; pos < positions; pos += blockDim.x) {
        int l = cd_label_at(label, pos, has_ignore, ignore_label);
        if (l == CD_LABEL_IGNORED)
            continue;
        size_t o = pos / (size_t)inner, i = pos - o * (size_t)inner;
        float p = l >= 0 && l < channels ? prob[(o * channels + (size_t)l) * inner + i] : 0.0f;
        loss -= log((double)(!(p < FLT_MIN) ? p : FLT_MIN)); /* a NaN stays NaN */
        count += 1.0;
    }
    block_sums_out(loss, count, loss_out, count_out);
}

__global__ void __launch_bounds__(CDK_THREADS)
k_xent_backward(size_t total, int channels, int inner, const float *prob,
                const float *label, int has_ignore, int ignore_label, float scale,
                float *dx)
{
    CDK_LOOP(idx, total)
    {
        size_t i = idx % (size_t)inner;
        size_t oc = idx / (size_t)inner;
        int c = (int)(oc % (size_t)channels);
        size_t o = oc / (size_t)channels;
        int l = cd_label_at(label, o * inner + i, has_ignore, ignore_label);
        dx[idx] = l != CD_LABEL_IGNORED ? (prob[idx] - (c == l ? 1.0f : 0.0f)) * scale : 0.0f;
    }
}

/* Caffe's rule: correct when fewer than top_k other scores are >= the label's (a tie
 * counts against the label, so constant scores are never "correct") */
__global__ void __launch_bounds__(CDK_REDUCE_THREADS)
k_accuracy(int outer, int channels, int inner, const float *x, const float *label,
           int top_k, int has_ignore, int ignore_label, float *correct_out,
           float *count_out)
{
    size_t positions = (size_t)outer * inner;
    double correct = 0.0, count = 0.0;
    for (size_t pos = threadIdx.x; pos < positions; pos += blockDim.x) {
        int l = cd_label_at(label, pos, has_ignore, ignore_label);
        if (l == CD_LABEL_IGNORED)
            continue;
        count += 1.0;
        if (l < 0 || l >= channels)
            continue;
        size_t o = pos / (size_t)inner, i = pos - o * (size_t)inner;
        const float *xp = x + o * (size_t)channels * inner + i;
        float truth = xp[(size_t)l * inner];
        int better = 0;
        for (int c = 0; c < channels && better < top_k; c++)
            if (c != l && xp[(size_t)c * inner] >= truth)
                better++;
        if (better < top_k)
            correct += 1.0;
    }
    block_sums_out(correct, count, correct_out, count_out);
}

extern "C" {

cudaError_t cdk_xent_forward(cudaStream_t s, int outer, int channels, int inner,
                             const float *prob, const float *label, int has_ignore,
                             int ignore_label, float *loss_out, float *count_out)
{
    if (outer < 0 || inner < 0)
        return cudaErrorInvalidValue;
    k_xent_forward<<<1, CDK_REDUCE_THREADS, 0, s>>>(outer, channels, inner, prob, label,
                                                    has_ignore, ignore_label, loss_out, count_out);
    return cudaGetLastError();
}

cudaError_t cdk_xent_backward(cudaStream_t s, int outer, int channels, int inner,
                              const float *prob, const float *label, int has_ignore,
                              int ignore_label, float scale, float *dx)
{
    if (outer <= 0 || channels <= 0 || inner <= 0)
        return cudaSuccess;
    size_t total = (size_t)outer * channels * inner;
    k_xent_backward<<<cdk_blocks(total), CDK_THREADS, 0, s>>>(total, channels, inner, prob, label,
                                                              has_ignore, ignore_label, scale, dx);
    return cudaGetLastError();
}

cudaError_t cdk_accuracy(cudaStream_t s, int outer, int channels, int inner, const float *x,
                         const float *label, int top_k, int has_ignore, int ignore_label,
                         float *correct_out, float *count_out)
{
    if (outer < 0 || inner < 0)
        return cudaErrorInvalidValue;
    k_accuracy<<<1, CDK_REDUCE_THREADS, 0, s>>>(outer, channels, inner, x, label, top_k,
                                                has_ignore, ignore_label, correct_out, count_out);
    return cudaGetLastError();
}

} /* extern "C" */
