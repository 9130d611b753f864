/*
 * One captured training step per backend, replayed as a CUDA graph: the ops of a step
 * are queued once into a record (stream capture in relaxed mode, so the backend may
 * still allocate its own buffers while capturing), instantiated, and launched with one
 * call per step instead of one per kernel. What a captured region may not do is in
 * include/cdigits/backend.h (graph_begin).
 *
 * A capture fails instead of aborting. Nothing runs on the device while capturing, so
 * a device call that fails (CD_*_CHECK, CD_LAUNCH) or an op that needs the host
 * (download, sync, alloc, ...: cuda_capture_refuses) only spoils the record: the first
 * such failure is kept in capture_err (cuda_capture_keep) and the ops go on, doing
 * nothing harmful (a refused download fills its host buffer with zeros, which the
 * caller must not use). graph_end then ends the capture, keeps no record and fails
 * with "the captured step cannot be replayed (<the first failure>); run it without
 * capturing" in be->err, and the caller runs the step op by op. Buffers freed inside
 * the failed capture are freed at that graph_end.
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
    ctx->capture_err[0] = 0;
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

int cuda_capture_keep(cd_backend_t *be, const char *message)
{
    cuda_ctx *ctx = be ? cuda_ctx_of(be) : NULL;
    if (!ctx || !ctx->capturing)
        return 0;
    if (!ctx->capture_err[0])
        snprintf(ctx->capture_err, sizeof ctx->capture_err, "%s", message);
    return 1;
}

int cuda_capture_refuses(cd_backend_t *be, const char *op)
{
    if (!cuda_ctx_of(be)->capturing)
        return 0;
    cd_cuda_fail_msg(be, "%s cannot be part of a captured step: it waits for, reads, copies from "
                     "or allocates on the host; call it before graph_begin or after graph_end", op);
    return 1;
}

/* be->err = the captured step cannot be replayed (why); ... with why cut to fit */
static void capture_failed(cd_backend_t *be, const char *why)
{
    static const char head[] = "the captured step cannot be replayed (";
    static const char tail[] = "); run it without capturing";
    int room = (int)(sizeof be->err - sizeof head - sizeof tail + 1);
    snprintf(be->err, sizeof be->err, "%s%.*s%s", head, room, why, tail);
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
    /* a failure inside the capture is the cause; what ending it says then is an echo */
    char why[sizeof ctx->capture_err];
    snprintf(why, sizeof why, "%s", ctx->capture_err);
    ctx->capture_err[0] = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    /* ended even when it failed: that takes the stream out of capture mode */
    int failed = CD_CUDA_TRY(be, cudaStreamEndCapture(ctx->stream, &g)) != 0;
    if (!failed && !why[0])
        failed = CD_CUDA_TRY(be, cudaGraphInstantiate(&exec, g, 0)) != 0;
    if (g)
        CD_CUDA_TRY(be, cudaGraphDestroy(g));
    /* the old record may still be running: wait before it and what it used go */
    if (CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->stream)))
        failed = 1;
    if (!why[0] && failed)
        snprintf(why, sizeof why, "%s", be->err);
    drop_record(be);
    if (why[0]) {
        if (exec)
            CD_CUDA_TRY(be, cudaGraphExecDestroy(exec));
        cudaGetLastError();
        cuda_retired_release(be, UINT_MAX);
        capture_failed(be, why); /* last: the calls above may record errors of their own */
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
        ctx->capture_err[0] = 0;
    }
    if (ctx->graph) {
        CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->stream));
        drop_record(be);
    }
    if (ctx->replays && CD_CUDA_TRY(be, cudaFree(ctx->replays)) == 0)
        ctx->replays = NULL;
}
