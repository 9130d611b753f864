/* The fused solver update: one kernel per parameter tensor does Caffe's whole step
 * (normalize, regularize, the solver's history update, and w -= update), reading and
 * writing each of w, g, h1, h2 once (g left zero where zero_grad is set). See cd_update_desc in backend.h for the formulas. */
#include "cdk_common.cuh"

__global__ void __launch_bounds__(CDK_THREADS)
k_update(cd_update_desc d, float adam_rate, size_t n, float *w, float *g,
         float *h1, float *h2)
{
    CDK_LOOP(i, n)
    {
        float wi = w[i];
        float gi = g[i] * d.grad_scale;
        if (d.decay != 0.0f) {
            if (d.reg == CD_REG_L1)
                gi += d.decay * (float)((wi > 0.0f) - (wi < 0.0f));
            else
                gi += d.decay * wi;
        }
        g[i] = d.zero_grad ? 0.0f : gi;
        float step;
        switch (d.type) {
        case CD_SOLVER_SGD: {
            float h = d.momentum * h1[i] + d.lr * gi;
            h1[i] = h;
            step = h;
            break;
        }
        case CD_SOLVER_NESTEROV: {
            float hp = h1[i];
            float h = d.momentum * hp + d.lr * gi;
            h1[i] = h;
            step = (1.0f + d.momentum) * h - d.momentum * hp;
            break;
        }
        case CD_SOLVER_ADAGRAD: {
            float h = h1[i] + gi * gi;
            h1[i] = h;
            step = d.lr * gi / (sqrtf(h) + d.delta);
            break;
        }
        case CD_SOLVER_RMSPROP: {
            float h = d.rms_decay * h1[i] + (1.0f - d.rms_decay) * gi * gi;
            h1[i] = h;
            step = d.lr * gi / (sqrtf(h) + d.delta);
            break;
        }
        case CD_SOLVER_ADADELTA: {
            float a = d.momentum * h1[i] + (1.0f - d.momentum) * gi * gi;
            h1[i] = a;
            float u = gi * sqrtf((h2[i] + d.delta) / (a + d.delta)); /* Caffe: one sqrt */
            h2[i] = d.momentum * h2[i] + (1.0f - d.momentum) * u * u;
            step = d.lr * u;
            break;
        }
        case CD_SOLVER_ADAM: {
            float m = d.momentum * h1[i] + (1.0f - d.momentum) * gi;
            float v = d.momentum2 * h2[i] + (1.0f - d.momentum2) * gi * gi;
            h1[i] = m;
            h2[i] = v;
            step = adam_rate * m / (sqrtf(v) + d.delta);
            break;
        }
        default:
            step = 0.0f;
            break;
        }
        w[i] = wi - step;
    }
}

extern "C" cudaError_t cdk_update(cudaStream_t s, cd_update_desc d, float adam_rate, size_t n,
                                  float *w, float *g, float *h1, float *h2)
{
    if (n == 0)
        return cudaSuccess;
    if (d.type < 0 || d.type >= CD_SOLVER_COUNT)
        return cudaErrorInvalidValue;
    k_update<<<cdk_blocks(n), CDK_THREADS, 0, s>>>(d, adam_rate, n, w, g, h1, h2);
    return cudaGetLastError();
}
