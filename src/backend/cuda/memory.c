/* Device memory of the CUDA backend: buffers, copies, and the backend's own scratch
 * and cuDNN workspace. Copies are queued on the backend's stream; the host waits only
 * where it must (download, and upload from pinned memory, whose copy is asynchronous). */
#include <stdio.h>

#include "cuda_internal.h"

void *cuda_alloc(cd_backend_t *be, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (CD_CUDA_TRY(be, cudaMalloc(&p, bytes))) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
            cudaGetLastError();
        snprintf(be->err, sizeof be->err,
                 "out of GPU memory: %.1f MiB asked on GPU %d (%.64s) with %.1f MiB of %.1f MiB free; "
                 "lower batch_size or use a smaller network",
                 bytes / 1048576.0, be->device, ctx->name, free_b / 1048576.0, total_b / 1048576.0);
        return NULL;
    }
    CD_CUDA_CHECK(be, cudaMemsetAsync(p, 0, bytes, ctx->stream));
    return p;
}

void cuda_free(cd_backend_t *be, void *ptr)
{
    if (!ptr)
        return;
    cuda_use_device(be);
    /* queued work may still use the buffer */
    CD_CUDA_CHECK(be, cudaStreamSynchronize(cuda_ctx_of(be)->stream));
    CD_CUDA_CHECK(be, cudaFree(ptr));
}

void cuda_upload(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (bytes == 0)
        return;
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    /* From pageable memory the call returns once src has been staged; from pinned
     * memory it returns at once, and the caller may reuse src only after the copy. */
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, src) != cudaSuccess)
        cudaGetLastError();
    else if (attr.type == cudaMemoryTypeHost)
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
}

void cuda_download(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (bytes == 0)
        return;
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
}

void cuda_copy(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || dst == src)
        return;
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                      cuda_ctx_of(be)->stream));
}

void cuda_sync(cd_backend_t *be)
{
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaStreamSynchronize(cuda_ctx_of(be)->stream));
}

/* Grows *buf to at least want bytes (with a quarter of headroom, whole MiB). The old
 * contents are not kept. */
static void *grow(cd_backend_t *be, void **buf, size_t *have, size_t want)
{
    if (want == 0)
        want = 1;
    if (want <= *have && *buf)
        return *buf;
    cuda_ctx *ctx = cuda_ctx_of(be);
    CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
    if (*buf)
        CD_CUDA_CHECK(be, cudaFree(*buf));
    *buf = NULL;
    *have = 0;
    size_t bytes = want + want / 4;
    bytes = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    CD_CUDA_CHECK(be, cudaMalloc(buf, bytes));
    *have = bytes;
    return *buf;
}

void *cuda_scratch(cd_backend_t *be, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    return grow(be, &ctx->scratch, &ctx->scratch_bytes, bytes);
}

void *cuda_workspace(cd_backend_t *be, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (bytes == 0)
        return ctx->ws;
    return grow(be, &ctx->ws, &ctx->ws_bytes, bytes);
}

void cuda_memory_release(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->scratch && CD_CUDA_TRY(be, cudaFree(ctx->scratch)) == 0)
        ctx->scratch = NULL;
    if (ctx->ws && CD_CUDA_TRY(be, cudaFree(ctx->ws)) == 0)
        ctx->ws = NULL;
    ctx->scratch_bytes = ctx->ws_bytes = 0;
}
