/*
 * Memory of the CUDA backend: device buffers, copies, page-locked host buffers, the
 * uploads that overlap compute, and the backend's own scratch, cuDNN workspace and
 * 2-byte operand buffer. Copies are queued on the compute stream; the host waits only
 * where it must (download, upload from pinned memory, whose copy is asynchronous, and
 * upload_wait).
 *
 * upload_async and upload_wait, the contract the training loop relies on:
 *  - an upload_async starts on the device after every op queued before it (a fence
 *    on the compute stream), so it may overwrite a staging buffer that an earlier
 *    step still reads; it overlaps the ops queued after it;
 *  - upload_wait makes the compute stream wait for every upload_async so far (on the
 *    device) and returns once they are done (on the host): after it the caller may
 *    reuse or release its host buffers, and ops queued next see the data.
 *
 * While a step is being captured, the ops that need the host (alloc, free, upload,
 * download, sync, upload_async, upload_wait) are refused: the capture fails, naming
 * the op (graph.c), and the op does nothing, except that download zero-fills its
 * host buffer and free keeps the buffer until the failed capture ends.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* Keeps ptr until no captured step can use it (see cuda_retired_release). Out of host
 * memory while capturing (the failure is kept), ptr is left allocated. */
static void retire(cd_backend_t *be, void *ptr)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->nretired == ctx->cap_retired) {
        int cap = ctx->cap_retired ? ctx->cap_retired * 2 : 8;
        cuda_retired *r = realloc(ctx->retired, (size_t)cap * sizeof *r);
        if (!r) {
            cd_cuda_fail_msg(be, "out of host memory keeping a replaced device buffer");
            return;
        }
        ctx->retired = r;
        ctx->cap_retired = cap;
    }
    ctx->retired[ctx->nretired++] = (cuda_retired){ptr, ctx->gen};
}

void *cuda_alloc(cd_backend_t *be, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (cuda_capture_refuses(be, "alloc"))
        return NULL;
    cuda_use_device(be);
    void *p = NULL;
    if (bytes == 0)
        bytes = 1;
    cuda_quiesce(be);
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
    if (cuda_capture_refuses(be, "free")) {
        retire(be, ptr); /* freed when the failed capture ends (graph_end) */
        return;
    }
    cuda_use_device(be);
    /* queued work may still use the buffer */
    cuda_quiesce(be);
    CD_CUDA_CHECK(be, cudaStreamSynchronize(cuda_ctx_of(be)->stream));
    CD_CUDA_CHECK(be, cudaFree(ptr));
}

/* Whether a copy of `bytes` between host and device (the op `what`) goes ahead: not
 * for 0 bytes, nor while capturing (cuda_capture_refuses keeps the refusal as the
 * capture's failure); when it does, the device is the current one. */
static int host_copy_begins(cd_backend_t *be, size_t bytes, const char *what)
{
    if (bytes == 0 || cuda_capture_refuses(be, what))
        return 0;
    cuda_use_device(be);
    return 1;
}

void cuda_upload(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!host_copy_begins(be, bytes, "upload"))
        return;
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
    if (!host_copy_begins(be, bytes, "download")) {
        if (bytes)
            memset(dst, 0, bytes); /* refused: defined, not data; the caller must not use it */
        return;
    }
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
    if (cuda_capture_refuses(be, "sync"))
        return;
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaStreamSynchronize(cuda_ctx_of(be)->stream));
}

int cuda_mem_info(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes)
{
    cuda_use_device(be);
    *free_bytes = *total_bytes = 0;
    return CD_CUDA_TRY(be, cudaMemGetInfo(free_bytes, total_bytes)) ? CD_ERR : CD_OK;
}

/* Page-locked and portable (usable with every device), so copies from it are DMA
 * transfers that need no staging; NULL (reason in be->err) on failure, and the caller
 * falls back to malloc. */
void *cuda_host_alloc(cd_backend_t *be, size_t bytes)
{
    cuda_use_device(be);
    void *p = NULL;
    if (CD_CUDA_TRY(be, cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable)))
        return NULL;
    return p;
}

void cuda_host_free(cd_backend_t *be, void *ptr)
{
    if (!ptr)
        return;
    cuda_use_device(be);
    CD_CUDA_TRY(be, cudaFreeHost(ptr));
}

void cuda_upload_async(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!host_copy_begins(be, bytes, "upload_async"))
        return;
    /* after the ops queued so far: dst may be a buffer they still read */
    CD_CUDA_CHECK(be, cudaEventRecord(ctx->fence, ctx->stream));
    CD_CUDA_CHECK(be, cudaStreamWaitEvent(ctx->copy, ctx->fence, 0));
    CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->copy));
    CD_CUDA_CHECK(be, cudaEventRecord(ctx->copied, ctx->copy));
}

/* The copies were queued a whole step earlier, so the host wait is short; it is what
 * lets the caller hand the host buffers back to the loader right away. */
void cuda_upload_wait(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (cuda_capture_refuses(be, "upload_wait"))
        return;
    cuda_use_device(be);
    CD_CUDA_CHECK(be, cudaStreamWaitEvent(ctx->stream, ctx->copied, 0));
    CD_CUDA_CHECK(be, cudaEventSynchronize(ctx->copied));
}

/* A buffer retired while capture g ran, or after it while record g lived, has gen g;
 * once record g is gone (replaced by capture g+1, or dropped) nothing uses it. The
 * caller has waited for the stream. Errors are recorded, not fatal (teardown). */
void cuda_retired_release(cd_backend_t *be, unsigned before)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    int keep = 0;
    for (int i = 0; i < ctx->nretired; i++) {
        if (ctx->retired[i].gen < before)
            CD_CUDA_TRY(be, cudaFree(ctx->retired[i].ptr));
        else
            ctx->retired[keep++] = ctx->retired[i];
    }
    ctx->nretired = keep;
}

/* Grows *buf to at least want bytes (with a quarter of headroom, whole MiB). The old
 * contents are not kept. The old buffer is freed after queued work is done, or kept
 * aside while a captured step may use it (cudaMalloc itself is allowed in a relaxed
 * capture). */
static void *grow(cd_backend_t *be, void **buf, size_t *have, size_t want)
{
    if (want == 0)
        want = 1;
    if (want <= *have && *buf)
        return *buf;
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_quiesce(be);
    if (*buf) {
        if (ctx->capturing || ctx->graph) {
            retire(be, *buf);
        } else {
            CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
            CD_CUDA_CHECK(be, cudaFree(*buf));
        }
    }
    *buf = NULL;
    *have = 0;
    size_t bytes = want + want / 4;
    bytes = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    if (CD_CUDA_CHECK(be, cudaMalloc(buf, bytes))) {
        *buf = NULL; /* capturing: the failure is kept, the caller returns */
        return NULL;
    }
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

void *cuda_lowp(cd_backend_t *be, size_t bytes)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    return grow(be, &ctx->lowp, &ctx->lowp_bytes, bytes);
}

void cuda_memory_release(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->scratch && CD_CUDA_TRY(be, cudaFree(ctx->scratch)) == 0)
        ctx->scratch = NULL;
    if (ctx->ws && CD_CUDA_TRY(be, cudaFree(ctx->ws)) == 0)
        ctx->ws = NULL;
    if (ctx->lowp && CD_CUDA_TRY(be, cudaFree(ctx->lowp)) == 0)
        ctx->lowp = NULL;
    ctx->scratch_bytes = ctx->ws_bytes = ctx->lowp_bytes = 0;
    cuda_retired_release(be, UINT_MAX);
    free(ctx->retired);
    ctx->retired = NULL;
    ctx->nretired = ctx->cap_retired = 0;
}
