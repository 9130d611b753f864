/*
 * Convolution on cuDNN. Each distinct geometry (cd_conv_desc) gets a plan: its tensor,
 * filter and convolution descriptors, and for each of forward, backward data and
 * backward filter the algorithm chosen the first time that direction runs. Choosing
 * measures every algorithm on the real buffers (cudnnFind*AlgorithmEx, the default) or
 * takes cuDNN's heuristic order (cudnnGet*Algorithm_v7, with CDIGITS_CUDNN_FIND=0);
 * either way the fastest one whose workspace fits the limit wins, and the choice is
 * kept for the life of the backend.
 *
 * Math: with TF32 allowed (the default) convolutions run under CUDNN_DEFAULT_MATH,
 * which lets Ampere and newer use TF32 tensor cores; CDIGITS_TF32=0 asks for
 * CUDNN_FMA_MATH, plain FP32.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

enum { DIR_FWD = 0, DIR_BWD_DATA, DIR_BWD_FILTER, DIR_COUNT };
static const char *dir_name[DIR_COUNT] = {"forward", "backward data", "backward filter"};

typedef struct conv_algo {
    int chosen;
    int algo; /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math;
    size_t ws; /* workspace bytes */
} conv_algo;

typedef struct conv_plan {
    cd_conv_desc key;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    conv_algo dir[DIR_COUNT];
} conv_plan;

struct cuda_conv_cache {
    conv_plan **plans;
    int n, cap;
};

static int same_geometry(const cd_conv_desc *a, const cd_conv_desc *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->kh == b->kh && a->kw == b->kw && a->sh == b->sh && a->sw == b->sw &&
           a->ph == b->ph && a->pw == b->pw && a->dh == b->dh && a->dw == b->dw &&
           a->group == b->group && a->oh == b->oh && a->ow == b->ow;
}

static void shape_text(const cd_conv_desc *d, char *buf, size_t len)
{
    snprintf(buf, len,
             "x %dx%dx%dx%d, %d filters %dx%d, stride %dx%d, pad %dx%d, dilation %dx%d, "
             "group %d, y %dx%d",
             d->n, d->c, d->h, d->w, d->k, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->dh,
             d->dw, d->group, d->oh, d->ow);
}

static conv_plan *plan_new(cd_backend_t *be, const cd_conv_desc *d)
{
    char shape[256];
    shape_text(d, shape, sizeof shape);
    int group = d->group > 0 ? d->group : 1;
    if (d->c % group || d->k % group)
        cd_cuda_fail_msg(be, "convolution %s: channels and filters must divide by the group",
                         shape);
    conv_plan *p = calloc(1, sizeof *p);
    if (!p)
        cd_cuda_fail_msg(be, "out of host memory for a convolution plan");
    p->key = *d;
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->x));
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->y));
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->bias));
    CD_CUDNN_CHECK(be, cudnnCreateFilterDescriptor(&p->w));
    CD_CUDNN_CHECK(be, cudnnCreateConvolutionDescriptor(&p->conv));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                                  d->c, d->h, d->w));
    CD_CUDNN_CHECK(be, cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->k,
                                                  d->c / group, d->kh, d->kw));
    CD_CUDNN_CHECK(be, cudnnSetConvolution2dDescriptor(p->conv, d->ph, d->pw, d->sh, d->sw,
                                                       d->dh > 0 ? d->dh : 1, d->dw > 0 ? d->dw : 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CD_CUDNN_CHECK(be, cudnnSetConvolutionGroupCount(p->conv, group));
    int on, oc, oh, ow;
    CD_CUDNN_CHECK(be, cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh,
                                                             &ow));
    if (on != d->n || oc != d->k || oh != d->oh || ow != d->ow)
        cd_cuda_fail_msg(be, "convolution %s: cuDNN computes a %dx%dx%dx%d output", shape, on, oc,
                         oh, ow);
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                                  d->k, d->oh, d->ow));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                  d->k, 1, 1));
    return p;
}

/* errors are recorded, not fatal: this runs while a backend is being destroyed */
static void plan_free(cd_backend_t *be, conv_plan *p)
{
    if (!p)
        return;
    CD_CUDNN_TRY(be, cudnnDestroyConvolutionDescriptor(p->conv));
    CD_CUDNN_TRY(be, cudnnDestroyFilterDescriptor(p->w));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->bias));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->y));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->x));
    free(p);
}

static conv_plan *plan_get(cd_backend_t *be, const cd_conv_desc *d)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->conv) {
        ctx->conv = calloc(1, sizeof *ctx->conv);
        if (!ctx->conv)
            cd_cuda_fail_msg(be, "out of host memory for the convolution plans");
    }
    struct cuda_conv_cache *cache = ctx->conv;
    for (int i = 0; i < cache->n; i++)
        if (same_geometry(&cache->plans[i]->key, d))
            return cache->plans[i];
    if (cache->n == cache->cap) {
        int cap = cache->cap ? cache->cap * 2 : 16;
        conv_plan **plans = realloc(cache->plans, (size_t)cap * sizeof *plans);
        if (!plans)
            cd_cuda_fail_msg(be, "out of host memory for the convolution plans");
        cache->plans = plans;
        cache->cap = cap;
    }
    conv_plan *p = plan_new(be, d);
    cache->plans[cache->n++] = p;
    return p;
}

void cuda_conv_release(cd_backend_t *be)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->conv)
        return;
    for (int i = 0; i < ctx->conv->n; i++)
        plan_free(be, ctx->conv->plans[i]);
    free(ctx->conv->plans);
    free(ctx->conv);
    ctx->conv = NULL;
}

/* The fields of cuDNN's three perf structs that matter, in one shape. */
typedef struct perf {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnMathType_t math;
    float time;
} perf;

/* Allocates up to `limit` bytes for measuring, halving on failure; *got = what it got.
 * A failed cudaMalloc here is an answer, not an error, so it is not recorded. */
static void *find_workspace(cd_backend_t *be, size_t limit, size_t *got)
{
    void *p = NULL;
    size_t bytes = limit;
    while (bytes >= ((size_t)1 << 20)) {
        if (cudaMalloc(&p, bytes) == cudaSuccess) {
            *got = bytes;
            return p;
        }
        cudaGetLastError();
        bytes /= 2;
    }
    *got = 0;
    return NULL;
}

/*
 * Chooses the algorithm of plan p for direction dir, running cuDNN's measurement on the
 * buffers of this call (x, w, y are the direction's input, filter and output; the
 * backward filter measures into a temporary so the accumulated gradient is untouched).
 */
static void choose(cd_backend_t *be, conv_plan *p, int dir, const float *x, const float *w,
                   const float *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    const int find = ctx->find;
    cudnnMathType_t base = ctx->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    CD_CUDNN_CHECK(be, cudnnSetConvolutionMathType(p->conv, base));

    enum { MAX_ALGOS = 16 };
    perf res[MAX_ALGOS];
    int got = 0, want = 0;
    if (dir == DIR_FWD)
        CD_CUDNN_CHECK(be, cudnnGetConvolutionForwardAlgorithmMaxCount(ctx->dnn, &want));
    else if (dir == DIR_BWD_DATA)
        CD_CUDNN_CHECK(be, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx->dnn, &want));
    else
        CD_CUDNN_CHECK(be, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx->dnn, &want));
    if (want < 1 || want > MAX_ALGOS)
        want = MAX_ALGOS;
    size_t limit = ctx->ws_limit;
    void *ws = NULL;
    void *tmp = NULL;
    if (find) {
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
        ws = find_workspace(be, limit, &limit);
    }

    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t r[MAX_ALGOS];
        if (find)
            CD_CUDNN_CHECK(be, cudnnFindConvolutionForwardAlgorithmEx(
                                   ctx->dnn, p->x, x, p->w, w, p->conv, p->y, (void *)y, want,
                                   &got, r, ws, limit));
        else
            CD_CUDNN_CHECK(be, cudnnGetConvolutionForwardAlgorithm_v7(ctx->dnn, p->x, p->w, p->conv,
                                                                      p->y, want, &got, r));
        for (int i = 0; i < got; i++)
            res[i] = (perf){(int)r[i].algo, r[i].status, r[i].memory, r[i].mathType, r[i].time};
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t r[MAX_ALGOS];
        if (find)
            CD_CUDNN_CHECK(be, cudnnFindConvolutionBackwardDataAlgorithmEx(
                                   ctx->dnn, p->w, w, p->y, y, p->conv, p->x, (void *)x, want,
                                   &got, r, ws, limit));
        else
            CD_CUDNN_CHECK(be, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                   ctx->dnn, p->w, p->y, p->conv, p->x, want, &got, r));
        for (int i = 0; i < got; i++)
            res[i] = (perf){(int)r[i].algo, r[i].status, r[i].memory, r[i].mathType, r[i].time};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[MAX_ALGOS];
        if (find) {
            const cd_conv_desc *d = &p->key;
            size_t wbytes = (size_t)d->k * (d->c / (d->group > 0 ? d->group : 1)) * d->kh * d->kw *
                            sizeof(float);
            CD_CUDA_CHECK(be, cudaMalloc(&tmp, wbytes));
            CD_CUDNN_CHECK(be, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                   ctx->dnn, p->x, x, p->y, y, p->conv, p->w, tmp, want, &got,
                                   r, ws, limit));
        } else {
            CD_CUDNN_CHECK(be, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                   ctx->dnn, p->x, p->y, p->conv, p->w, want, &got, r));
        }
        for (int i = 0; i < got; i++)
            res[i] = (perf){(int)r[i].algo, r[i].status, r[i].memory, r[i].mathType, r[i].time};
    }

    if (find) {
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
        if (ws)
            CD_CUDA_CHECK(be, cudaFree(ws));
        if (tmp)
            CD_CUDA_CHECK(be, cudaFree(tmp));
    }

    /* results come fastest (or most promising) first */
    conv_algo *a = &p->dir[dir];
    for (int i = 0; i < got; i++) {
        if (res[i].status != CUDNN_STATUS_SUCCESS || res[i].memory > limit)
            continue;
        a->algo = res[i].algo;
        a->math = ctx->tf32 ? res[i].math : CUDNN_FMA_MATH;
        a->ws = res[i].memory;
        a->chosen = 1;
        return;
    }
    char shape[256];
    shape_text(&p->key, shape, sizeof shape);
    cd_cuda_fail_msg(be,
                     "convolution %s (%s): no cuDNN algorithm fits in %zu MiB of workspace; raise "
                     "CDIGITS_CUDNN_WORKSPACE_MB or lower batch_size",
                     dir_name[dir], shape, limit >> 20);
}

/* The plan for d with direction dir chosen, its math set, and its workspace. */
static conv_plan *prepare(cd_backend_t *be, const cd_conv_desc *d, int dir, const float *x,
                          const float *w, const float *y, void **ws)
{
    cuda_use_device(be);
    conv_plan *p = plan_get(be, d);
    if (!p->dir[dir].chosen)
        choose(be, p, dir, x, w, y);
    CD_CUDNN_CHECK(be, cudnnSetConvolutionMathType(p->conv, p->dir[dir].math));
    *ws = cuda_workspace(be, p->dir[dir].ws);
    return p;
}

/* y = conv(x, w) (+ bias per filter) */
void cuda_conv_forward(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *w,
                       const float *bias, float *y)
{
    void *ws;
    conv_plan *p = prepare(be, d, DIR_FWD, x, w, y, &ws);
    cuda_ctx *ctx = cuda_ctx_of(be);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnConvolutionForward(ctx->dnn, &one, p->x, x, p->w, w, p->conv,
                                               (cudnnConvolutionFwdAlgo_t)p->dir[DIR_FWD].algo, ws,
                                               p->dir[DIR_FWD].ws, &zero, p->y, y));
    if (bias)
        CD_CUDNN_CHECK(be, cudnnAddTensor(ctx->dnn, &one, p->bias, bias, &one, p->y, y));
}

/* dx = conv_transpose(dy, w), overwritten */
void cuda_conv_backward_data(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                             const float *dy, float *dx)
{
    void *ws;
    conv_plan *p = prepare(be, d, DIR_BWD_DATA, dx, w, dy, &ws);
    cuda_ctx *ctx = cuda_ctx_of(be);
    const float one = 1.0f, zero = 0.0f;
    CD_CUDNN_CHECK(be, cudnnConvolutionBackwardData(
                           ctx->dnn, &one, p->w, w, p->y, dy, p->conv,
                           (cudnnConvolutionBwdDataAlgo_t)p->dir[DIR_BWD_DATA].algo, ws,
                           p->dir[DIR_BWD_DATA].ws, &zero, p->x, dx));
}

/* dw += dL/dw, db += sum of dy per filter (db may be NULL) */
void cuda_conv_backward_filter(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                               const float *dy, float *dw, float *db)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    const float one = 1.0f;
    if (dw) {
        void *ws;
        conv_plan *p = prepare(be, d, DIR_BWD_FILTER, x, NULL, dy, &ws);
        CD_CUDNN_CHECK(be, cudnnConvolutionBackwardFilter(
                               ctx->dnn, &one, p->x, x, p->y, dy, p->conv,
                               (cudnnConvolutionBwdFilterAlgo_t)p->dir[DIR_BWD_FILTER].algo, ws,
                               p->dir[DIR_BWD_FILTER].ws, &one, p->w, dw));
    }
    if (db) {
        cuda_use_device(be);
        conv_plan *p = plan_get(be, d);
        CD_CUDNN_CHECK(be, cudnnConvolutionBackwardBias(ctx->dnn, &one, p->y, dy, &one, p->bias,
                                                        db));
    }
}
