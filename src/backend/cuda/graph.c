/*
 * One captured training step per backend, replayed as a CUDA graph: the ops of a step
 * are queued once into a record (stream capture in relaxed mode, so the backend may
 * still allocate its own buffers while capturing), instantiated, and launched with one
 * call per step instead of one per kernel. What a captured region may not do is in
 * include/cdigits/backend.h (graph_begin); the ops that would break it abort through
 * cuda_not_capturing with the op's name.
 *
 * Buffers the backend grows while a record may use the old ones are retired rather
 * than freed (memory.c); graph_end frees those no record can use any more.
 *
 * Dropout: the first node of every record adds one to a device counter (replays),
 * which graph_end sets to -1, so replay k (0, 1, ...) runs with replays = k, and a
 * dropout captured with counter c draws with counter c + k. The training loop advances
 * its counter by one per forward pass, so a replayed step drops the same elements as
 * the same step run without capture.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

int cuda_graph_begin(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (ctx->capturing) {
        snprintf(be->err, sizeof be->err, "graph_begin: a step is already being captured; "
                 "call graph_end first");
        return CD_ERR;
    }
    if (!ctx->replays && CD_CUDA_TRY(be, cudaMalloc((void **)&ctx->replays, sizeof *ctx->replays)))
        return CD_ERR;
    if (CD_CUDA_TRY(be, cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeRelaxed)))
        return CD_ERR;
    ctx->gen++;
    ctx->capturing = 1;
    CD_LAUNCH(be, cdk_replay_tick(ctx->stream, ctx->replays));
    return CD_OK;
}

/* Drops the record, if any; the caller has waited for the stream. */
static void drop_record(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->graph && CD_CUDA_TRY(be, cudaGraphExecDestroy(ctx->graph)) == 0)
        ctx->graph = NULL;
}

int cuda_graph_end(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (!ctx->capturing) {
        snprintf(be->err, sizeof be->err, "graph_end: no capture is running; call graph_begin first");
        return CD_ERR;
    }
    ctx->capturing = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    int failed = CD_CUDA_TRY(be, cudaStreamEndCapture(ctx->stream, &g)) != 0;
    if (!failed)
        failed = CD_CUDA_TRY(be, cudaGraphInstantiate(&exec, g, 0)) != 0;
    if (g)
        CD_CUDA_TRY(be, cudaGraphDestroy(g));
    /* the old record may still be running: wait before it and what it used go */
    if (CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->stream)))
        failed = 1;
    drop_record(be);
    if (failed) {
        char why[160];
        memcpy(why, be->err, sizeof why - 1); /* the cause, cut to fit the message */
        why[sizeof why - 1] = 0;
        snprintf(be->err, sizeof be->err, "the captured step cannot be replayed (%s); run it "
                 "without capturing", why);
        if (exec)
            CD_CUDA_TRY(be, cudaGraphExecDestroy(exec));
        cudaGetLastError();
        cuda_retired_release(be, UINT_MAX);
        return CD_ERR;
    }
    ctx->graph = exec;
    /* buffers retired before this capture began were used by the record just dropped */
    cuda_retired_release(be, ctx->gen);
    /* all bytes 0xff: -1, so the first replay counts 0 */
    CD_CUDA_CHECK(be, cudaMemsetAsync(ctx->replays, 0xff, sizeof *ctx->replays, ctx->stream));
    return CD_OK;
}

int cuda_graph_replay(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    cuda_use_device(be);
    if (!ctx->graph || ctx->capturing) {
        snprintf(be->err, sizeof be->err, "graph_replay: %s",
                 ctx->capturing ? "a step is being captured; call graph_end first"
                                : "no step has been captured; call graph_begin and graph_end first");
        return CD_ERR;
    }
    CD_CUDA_CHECK(be, cudaGraphLaunch(ctx->graph, ctx->stream));
    if (ctx->debug_sync)
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
    return CD_OK;
}

/* Backend teardown: a capture left open is ended and thrown away, and the record is
 * dropped once the stream is idle. Errors are recorded, not fatal. */
void cuda_graph_release(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx->capturing) {
        cudaGraph_t g = NULL;
        if (CD_CUDA_TRY(be, cudaStreamEndCapture(ctx->stream, &g)) == 0 && g)
            CD_CUDA_TRY(be, cudaGraphDestroy(g));
        cudaGetLastError();
        ctx->capturing = 0;
    }
    if (ctx->graph) {
        CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->stream));
        drop_record(be);
    }
    if (ctx->replays && CD_CUDA_TRY(be, cudaFree(ctx->replays)) == 0)
        ctx->replays = NULL;
}
