/* Data-parallel groups on NCCL: one rank per GPU, joined through an id that rank 0
 * makes and hands to every rank (see cuda_check.h). allreduce_mean averages on the
 * backend's stream, in order with the ops before and after it; allreduce_start averages
 * a bucket of gradients on a stream of its own as soon as the backward has written
 * them, while the backward goes on, and allreduce_wait joins the streams again before
 * the solver update. No call waits on the host. */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

int cd_cuda_group_id(char *hex, size_t hex_len, char *why, size_t why_len)
{
    ncclUniqueId id;
    if (!hex || hex_len < CD_CUDA_GROUP_ID_HEX) {
        snprintf(why, why_len, "group id buffer too small: %d bytes needed", CD_CUDA_GROUP_ID_HEX);
        return -1;
    }
    if (CD_NCCL_TRY(NULL, ncclGetUniqueId(&id))) {
        snprintf(why, why_len, "%s", cd_cuda_last_error());
        return -1;
    }
    const unsigned char *b = (const unsigned char *)id.internal;
    for (size_t i = 0; i < sizeof id.internal; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int cd_cuda_group_join(cd_backend_t *be, const char *hex, int nranks, int rank, char *why,
                       size_t why_len)
{
    if (!be || !be->iface || strcmp(be->iface->name, "cuda") != 0) {
        snprintf(why, why_len, "only a CUDA backend can join an NCCL group");
        return -1;
    }
    cuda_ctx *ctx = cuda_ctx_of(be);
    ncclUniqueId id;
    if (!hex || strlen(hex) != 2 * sizeof id.internal) {
        snprintf(why, why_len, "group id must be %zu hex digits", 2 * sizeof id.internal);
        return -1;
    }
    for (size_t i = 0; i < sizeof id.internal; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(why, why_len, "group id has a character that is not a hex digit");
            return -1;
        }
        id.internal[i] = (char)(hi << 4 | lo);
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        snprintf(why, why_len, "rank %d of %d: ranks run from 0 to nranks-1", rank, nranks);
        return -1;
    }
    if (ctx->comm) {
        snprintf(why, why_len, "this backend already belongs to a group of %d", ctx->nranks);
        return -1;
    }
    cuda_use_device(be);
    if (CD_NCCL_TRY(be, ncclCommInitRank(&ctx->comm, nranks, id, rank))) {
        ctx->comm = NULL;
        snprintf(why, why_len, "%s", be->err);
        return -1;
    }
    ctx->nranks = nranks;
    int least = 0, greatest = 0;
    if (CD_CUDA_TRY(be, cudaDeviceGetStreamPriorityRange(&least, &greatest)) ||
        CD_CUDA_TRY(be, cudaStreamCreateWithPriority(&ctx->reduce, cudaStreamNonBlocking, greatest)) ||
        CD_CUDA_TRY(be, cudaEventCreateWithFlags(&ctx->grads, cudaEventDisableTiming)) ||
        CD_CUDA_TRY(be, cudaEventCreateWithFlags(&ctx->reduced, cudaEventDisableTiming))) {
        snprintf(why, why_len, "%s", be->err);
        /* ncclCommDestroy is collective and the other ranks won't call it now: abort */
        CD_NCCL_TRY(be, ncclCommAbort(ctx->comm));
        ctx->comm = NULL;
        cuda_group_release(be);
        return -1;
    }
    return 0;
}

/* The interface's group slots (backend.h): a group id needs no backend, and the
 * answers are CD_OK or CD_ERR as the engine expects. */
int cuda_group_id(cd_backend_t *be, char *id, size_t id_len, char *why, size_t why_len)
{
    (void)be;
    return cd_cuda_group_id(id, id_len, why, why_len) == 0 ? CD_OK : CD_ERR;
}

int cuda_group_join(cd_backend_t *be, const char *id, int nranks, int rank, char *why,
                    size_t why_len)
{
    return cd_cuda_group_join(be, id, nranks, rank, why, why_len) == 0 ? CD_OK : CD_ERR;
}

/* Waits on the host for the averages in flight on the reduce stream. cudaMalloc and
 * cudaFree may wait for the whole device while holding a lock of the runtime, and an
 * NCCL kernel in flight waits for the other ranks, which may need that lock to launch
 * their half: so a rank never allocates or frees while its own averages are in flight.
 * It costs overlap only where memory changes hands (the first step: the convolution
 * algorithm search, workspaces growing). */
void cuda_quiesce(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->reducing && ctx->reduce)
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->reduce));
}

/* x = mean of x over the group's ranks; the identity outside a group */
int cuda_allreduce_mean(cd_backend_t *be, float *x, size_t n)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->comm || n == 0)
        return 0;
    cuda_use_device(be);
    if (CD_NCCL_TRY(be, ncclAllReduce(x, x, n, ncclFloat, ncclAvg, ctx->comm, ctx->stream)))
        return -1;
    return 0;
}

int cuda_allreduce_start(cd_backend_t *be, float *x, size_t n)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->comm || n == 0)
        return 0;
    cuda_use_device(be);
    if (CD_CUDA_TRY(be, cudaEventRecord(ctx->grads, ctx->stream)) ||
        CD_CUDA_TRY(be, cudaStreamWaitEvent(ctx->reduce, ctx->grads, 0)) ||
        CD_NCCL_TRY(be, ncclAllReduce(x, x, n, ncclFloat, ncclAvg, ctx->comm, ctx->reduce)))
        return -1;
    ctx->reducing = 1;
    return 0;
}

int cuda_allreduce_wait(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->reducing)
        return 0;
    cuda_use_device(be);
    ctx->reducing = 0;
    if (CD_CUDA_TRY(be, cudaEventRecord(ctx->reduced, ctx->reduce)) ||
        CD_CUDA_TRY(be, cudaStreamWaitEvent(ctx->stream, ctx->reduced, 0)))
        return -1;
    return 0;
}

int cuda_broadcast(cd_backend_t *be, float *x, size_t n)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->comm || n == 0)
        return 0;
    cuda_use_device(be);
    if (CD_NCCL_TRY(be, ncclBroadcast(x, x, n, ncclFloat, 0, ctx->comm, ctx->stream)))
        return -1;
    return 0;
}

void cuda_group_release(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->reduce) {
        CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->reduce));
        CD_CUDA_TRY(be, cudaStreamDestroy(ctx->reduce));
        ctx->reduce = NULL;
    }
    if (ctx->grads)
        CD_CUDA_TRY(be, cudaEventDestroy(ctx->grads));
    if (ctx->reduced)
        CD_CUDA_TRY(be, cudaEventDestroy(ctx->reduced));
    ctx->grads = ctx->reduced = NULL;
    ctx->reducing = 0;
    if (!ctx->comm)
        return;
    CD_NCCL_TRY(be, ncclCommDestroy(ctx->comm));
    ctx->comm = NULL;
    ctx->nranks = 0;
}
