/* Dropout with the counter-based generator of backend.h, so the CPU and the GPU drop
 * the same elements for the same (seed, counter): the functions below are device
 * copies of cd_mix64 and cd_rand_uniform, bit for bit (integer arithmetic and an exact
 * power-of-two scaling). */
#include "cdk_common.cuh"

__device__ inline uint64_t cdk_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ inline float cdk_rand_uniform(uint64_t seed, uint64_t counter, uint64_t index)
{
    uint64_t z = cdk_mix64(seed ^ cdk_mix64(counter ^ cdk_mix64(index)));
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* In a replayed step (see cdk_replay_tick) counter is the captured one plus the
 * replay number *delta; delta is NULL outside replays. */
__global__ void __launch_bounds__(CDK_THREADS)
k_dropout_forward(size_t n, float ratio, float scale, uint64_t seed,
                  uint64_t counter, const long long *delta, const float *x,
                  float *mask, float *y)
{
    if (delta)
        counter += (uint64_t)*delta;
    CDK_LOOP(i, n)
    {
        float m = cdk_rand_uniform(seed, counter, (uint64_t)i) >= ratio ? scale : 0.0f;
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
