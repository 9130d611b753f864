/* Dropout with the counter-based generator of backend.h, so the CPU and the GPU drop
 * the same elements for the same (seed, counter): cd_rand_key and cd_rand_keyed are the host's own
 * inline function (cdigits/util.h), integer arithmetic and an exact power-of-two scaling. */
#include "cdk_common.cuh"

#include "cdigits/util.h"

/* In a replayed step (see cdk_replay_tick) counter is the captured one plus the
 * replay number *delta; delta is NULL outside replays. */
__global__ void __launch_bounds__(CDK_THREADS)
k_dropout_forward(size_t n, float ratio, float scale, uint64_t seed,
                  uint64_t counter, const long long *delta, const float *x,
                  float *mask, float *y)
{
    if (delta)
        counter += (uint64_t)*delta;
    uint64_t key = cd_rand_key(seed, counter);
    CDK_LOOP(i, n)
    {
        float m = cd_rand_keyed(key, (uint64_t)i) >= ratio ? scale : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

extern "C" cudaError_t cdk_dropout_forward(cudaStream_t s, size_t n, float ratio, float scale,
                                           uint64_t seed, uint64_t counter, const long long *delta,
                                           const float *x, float *mask, float *y)
{
    if (n == 0)
        return cudaSuccess;
    k_dropout_forward<<<cdk_blocks(n), CDK_THREADS, 0, s>>>(n, ratio, scale, seed, counter, delta,
                                                            x, mask, y);
    return cudaGetLastError();
}

__global__ void k_replay_tick(long long *replays) { *replays += 1; }

extern "C" cudaError_t cdk_replay_tick(cudaStream_t s, long long *replays)
{
    k_replay_tick<<<1, 1, 0, s>>>(replays);
    return cudaGetLastError();
}
