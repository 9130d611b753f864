/* Helpers shared by the kernels: grid sizing for grid-stride loops and reductions. */
#ifndef CDIGITS_CDK_COMMON_CUH
#define CDIGITS_CDK_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#include "cd_kernels.h"

/* Threads per block of the grid-stride kernels. Every kernel names the block size it
 * is launched with in __launch_bounds__, so ptxas keeps its registers within what one
 * such block may hold (65536 per multiprocessor: 64 per thread at 1024 threads);
 * without it a kernel past that limit compiles and then fails to launch.
 * tests/gpu/kernel_regs.sh checks the counts in a build log (-Xptxas -v). */
#define CDK_THREADS 256

/* Blocks for n items with CDK_THREADS threads each; capped because the loops stride
 * over the grid, so any grid covers any n. */
static inline unsigned cdk_blocks(size_t n)
{
    size_t b = (n + CDK_THREADS - 1) / CDK_THREADS;
    const size_t cap = 65536;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

/* for (i = this thread's first item; i < n; i += all threads) */
#define CDK_LOOP(i, n)                                                                  \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);     \
         i += (size_t)blockDim.x * gridDim.x)

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024); the result is
 * valid in thread 0. Uses a 32-entry shared buffer; callers that reduce twice in a
 * row must __syncthreads() between the calls. */
template <typename T>
__device__ inline T cdk_block_sum(T v)
{
    __shared__ T warp_sums[32];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    T r = 0;
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        r = lane < nwarps ? warp_sums[lane] : (T)0;
        for (int off = 16; off > 0; off >>= 1)
            r += __shfl_down_sync(0xffffffffu, r, off);
    }
    return r;
}

#endif
