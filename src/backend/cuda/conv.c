/*
 * Convolution on cuDNN. Each distinct geometry (cd_conv_desc) and precision gets a
 * plan: its tensor, filter and convolution descriptors, and for each of forward,
 * backward data and backward filter the algorithm chosen the first time that direction
 * runs. Choosing measures every algorithm on the real buffers (cudnnFind*AlgorithmEx,
 * the default) or takes cuDNN's heuristic order (cudnnGet*Algorithm_v7, with
 * CDIGITS_CUDNN_FIND=0, and always while a step is being captured, since measuring
 * waits on the host); either way the fastest one whose workspace fits the limit wins,
 * and the choice is kept for the life of the backend.
 *
 * Math, by be->precision:
 *   FP32  fp32 tensors, CUDNN_FMA_MATH: plain fp32, no TF32
 *   TF32  fp32 tensors, CUDNN_DEFAULT_MATH: Ampere and newer may round the inputs to
 *         TF32 on the tensor cores
 *   FP16, BF16  the operands are rounded into the 2-byte operand buffer (x, w and y at
 *         256-byte boundaries), cuDNN runs on 2-byte tensors with fp32 compute
 *         (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations, tensor-op math), and
 *         the result is widened back: y and dx overwritten, dw accumulated in fp32. The
 *         bias and its gradient stay fp32 on the fp32 tensors.
 *
 * Layout: NCHW throughout. cuDNN's tensor-core kernels prefer NHWC (channels-last) for
 * 2-byte types; transposing in the casts is a possible next step, not done here.
 */
#include <limits.h>
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
    int prec;        /* enum cd_precision the plan was made for */
    int kind;        /* CDK_LOWP_HALF / CDK_LOWP_BF16 for 2-byte operands, -1 for fp32 */
    cudnnTensorDescriptor_t x, y; /* in the operand type */
    cudnnTensorDescriptor_t yf, bias; /* fp32: y for the bias add and its gradient */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    size_t nx, nw, ny;          /* elements of x, w, y */
    size_t off_w, off_y, lowp;  /* 2-byte operand buffer: w and y offsets, total bytes */
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

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* errors are recorded, not fatal: this runs while a backend is being destroyed, and on
 * a plan made in a failed capture (descriptors not yet made are NULL) */
static void plan_free(cd_backend_t *be, conv_plan *p)
{
    if (!p)
        return;
    CD_CUDNN_TRY(be, cudnnDestroyConvolutionDescriptor(p->conv));
    CD_CUDNN_TRY(be, cudnnDestroyFilterDescriptor(p->w));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->bias));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->yf));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->y));
    CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(p->x));
    free(p);
}

static conv_plan *plan_new(cd_backend_t *be, const cd_conv_desc *d)
{
    char shape[256];
    shape_text(d, shape, sizeof shape);
    int group = d->group > 0 ? d->group : 1;
    if (d->c % group || d->k % group) {
        cd_cuda_fail_msg(be, "convolution %s: channels and filters must divide by the group",
                         shape);
        return NULL;
    }
    conv_plan *p = calloc(1, sizeof *p);
    if (!p) {
        cd_cuda_fail_msg(be, "out of host memory for a convolution plan");
        return NULL;
    }
    p->key = *d;
    p->prec = be->precision;
    p->kind = cuda_lowp_kind(be);
    cudnnDataType_t io = p->kind == CDK_LOWP_HALF   ? CUDNN_DATA_HALF
                         : p->kind == CDK_LOWP_BF16 ? CUDNN_DATA_BFLOAT16
                                                    : CUDNN_DATA_FLOAT;
    p->nx = (size_t)d->n * d->c * d->h * d->w;
    p->nw = (size_t)d->k * (d->c / group) * d->kh * d->kw;
    p->ny = (size_t)d->n * d->k * d->oh * d->ow;
    if (p->nx > INT_MAX || p->ny > INT_MAX) {
        /* cuDNN's tensor descriptors count elements in an int */
        cd_cuda_fail_msg(be, "convolution %s: a tensor of more than 2^31 elements, past cuDNN's "
                         "limit; lower batch_size", shape);
        free(p);
        return NULL;
    }
    p->off_w = align256(p->nx * 2);
    p->off_y = p->off_w + align256(p->nw * 2);
    p->lowp = p->off_y + p->ny * 2;
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->x));
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->y));
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->yf));
    CD_CUDNN_CHECK(be, cudnnCreateTensorDescriptor(&p->bias));
    CD_CUDNN_CHECK(be, cudnnCreateFilterDescriptor(&p->w));
    CD_CUDNN_CHECK(be, cudnnCreateConvolutionDescriptor(&p->conv));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, io, d->n, d->c, d->h,
                                                  d->w));
    CD_CUDNN_CHECK(be, cudnnSetFilter4dDescriptor(p->w, io, CUDNN_TENSOR_NCHW, d->k, d->c / group,
                                                  d->kh, d->kw));
    CD_CUDNN_CHECK(be, cudnnSetConvolution2dDescriptor(p->conv, d->ph, d->pw, d->sh, d->sw,
                                                       d->dh > 0 ? d->dh : 1, d->dw > 0 ? d->dw : 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CD_CUDNN_CHECK(be, cudnnSetConvolutionGroupCount(p->conv, group));
    int on = 0, oc = 0, oh = 0, ow = 0;
    CD_CUDNN_CHECK(be, cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh,
                                                             &ow));
    if (on != d->n || oc != d->k || oh != d->oh || ow != d->ow)
        cd_cuda_fail_msg(be, "convolution %s: cuDNN computes a %dx%dx%dx%d output", shape, on, oc,
                         oh, ow);
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, io, d->n, d->k, d->oh,
                                                  d->ow));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->yf, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                                  d->k, d->oh, d->ow));
    CD_CUDNN_CHECK(be, cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                  d->k, 1, 1));
    if (cuda_capture_failed(be)) { /* made in a failed capture: maybe on failed calls */
        plan_free(be, p);
        return NULL;
    }
    return p;
}

static conv_plan *plan_get(cd_backend_t *be, const cd_conv_desc *d)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (!ctx->conv) {
        ctx->conv = calloc(1, sizeof *ctx->conv);
        if (!ctx->conv) {
            cd_cuda_fail_msg(be, "out of host memory for the convolution plans");
            return NULL;
        }
    }
    struct cuda_conv_cache *cache = ctx->conv;
    for (int i = 0; i < cache->n; i++)
        if (cache->plans[i]->prec == be->precision && same_geometry(&cache->plans[i]->key, d))
            return cache->plans[i];
    if (cache->n == cache->cap) {
        int cap = cache->cap ? cache->cap * 2 : 16;
        conv_plan **plans = realloc(cache->plans, (size_t)cap * sizeof *plans);
        if (!plans) {
            cd_cuda_fail_msg(be, "out of host memory for the convolution plans");
            return NULL;
        }
        cache->plans = plans;
        cache->cap = cap;
    }
    conv_plan *p = plan_new(be, d);
    if (p)
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

/* Whether cuDNN takes a heuristic's entry r for plan p's descriptors: its workspace
 * query succeeds with r's math type set, and asks for at most limit bytes (r->memory
 * becomes that answer). Only host-side queries: legal while capturing. The caller sets
 * the math type again before each call (prepare). */
static int guess_holds(cd_backend_t *be, conv_plan *p, int dir, perf *r, size_t limit)
{
    cudnnHandle_t dnn = cuda_ctx_of(be)->dnn;
    cudnnMathType_t math = p->prec == CD_PREC_FP32 ? CUDNN_FMA_MATH : r->math;
    size_t bytes = 0;
    cudnnStatus_t s = cudnnSetConvolutionMathType(p->conv, math);
    if (s == CUDNN_STATUS_SUCCESS && dir == DIR_FWD)
        s = cudnnGetConvolutionForwardWorkspaceSize(dnn, p->x, p->w, p->conv, p->y,
                                                    (cudnnConvolutionFwdAlgo_t)r->algo, &bytes);
    else if (s == CUDNN_STATUS_SUCCESS && dir == DIR_BWD_DATA)
        s = cudnnGetConvolutionBackwardDataWorkspaceSize(
            dnn, p->w, p->y, p->conv, p->x, (cudnnConvolutionBwdDataAlgo_t)r->algo, &bytes);
    else if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            dnn, p->x, p->y, p->conv, p->w, (cudnnConvolutionBwdFilterAlgo_t)r->algo, &bytes);
    if (s != CUDNN_STATUS_SUCCESS || bytes > limit)
        return 0;
    r->memory = bytes;
    return 1;
}

/*
 * Chooses the algorithm of plan p for direction dir, running cuDNN's measurement on the
 * buffers of this call (x, w, y are the direction's input, filter and output; the
 * backward filter measures into a temporary so the accumulated gradient is untouched).
 */
static void choose(cd_backend_t *be, conv_plan *p, int dir, const void *x, const void *w,
                   const void *y)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    const int find = ctx->find && !ctx->capturing;
    cudnnMathType_t base = p->kind >= 0                ? CUDNN_TENSOR_OP_MATH
                           : p->prec == CD_PREC_TF32 ? CUDNN_DEFAULT_MATH
                                                     : CUDNN_FMA_MATH;
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
        cuda_quiesce(be);
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
        for (int i = 0; i < got && i < want; i++)
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
        for (int i = 0; i < got && i < want; i++)
            res[i] = (perf){(int)r[i].algo, r[i].status, r[i].memory, r[i].mathType, r[i].time};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[MAX_ALGOS];
        if (find) {
            CD_CUDA_CHECK(be, cudaMalloc(&tmp, p->nw * (p->kind >= 0 ? 2 : sizeof(float))));
            CD_CUDNN_CHECK(be, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                   ctx->dnn, p->x, x, p->y, y, p->conv, p->w, tmp, want, &got,
                                   r, ws, limit));
        } else {
            CD_CUDNN_CHECK(be, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                   ctx->dnn, p->x, p->y, p->conv, p->w, want, &got, r));
        }
        for (int i = 0; i < got && i < want; i++)
            res[i] = (perf){(int)r[i].algo, r[i].status, r[i].memory, r[i].mathType, r[i].time};
    }

    if (find) {
        CD_CUDA_CHECK(be, cudaStreamSynchronize(ctx->stream));
        if (ws)
            CD_CUDA_CHECK(be, cudaFree(ws));
        if (tmp)
            CD_CUDA_CHECK(be, cudaFree(tmp));
    }

    /* a choice made on failed calls of a failed capture is not kept: the direction is
     * chosen again, measured, when it next runs outside a capture */
    if (cuda_capture_failed(be))
        return;
    if (got > want) /* never from cuDNN; res holds want */
        got = want;
    /* results come fastest (or most promising) first */
    conv_algo *a = &p->dir[dir];
    for (int i = 0; i < got; i++) {
        if (res[i].status != CUDNN_STATUS_SUCCESS || res[i].memory > limit)
            continue;
        /* a heuristic's entry is a guess: kept only when cuDNN takes the algorithm for
         * these descriptors, with the workspace it then asks for */
        if (!find && !guess_holds(be, p, dir, &res[i], limit))
            continue;
        a->algo = res[i].algo;
        a->math = p->prec == CD_PREC_FP32 ? CUDNN_FMA_MATH : res[i].math;
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

/* The plan for d with direction dir chosen (measured on x, w, y: the operands as cuDNN
 * will see them), its math set, and its workspace. 0, or -1 while capturing when
 * that failed (the failure is kept): the caller returns. */
static int prepare(cd_backend_t *be, conv_plan *p, int dir, const void *x, const void *w,
                   const void *y, void **ws)
{
    if (!p->dir[dir].chosen)
        choose(be, p, dir, x, w, y);
    if (!p->dir[dir].chosen ||
        CD_CUDNN_CHECK(be, cudnnSetConvolutionMathType(p->conv, p->dir[dir].math)))
        return -1;
    *ws = cuda_workspace(be, p->dir[dir].ws);
    return p->dir[dir].ws && !*ws ? -1 : 0;
}

/*
 * The operands of one call of direction dir as cuDNN sees them, and the chosen
 * algorithm's workspace. x, w and y are the call's fp32 tensors (the backward ones
 * pass dx as x, dw as w and dy as y). With 2-byte operands (p->kind >= 0) they are the
 * plan's 2-byte buffer instead, with the two tensors the direction reads converted into
 * it; conv_result widens what it wrote back. 0, or -1 while capturing after a failure
 * was kept (cuda_check.h): the caller returns.
 */
typedef struct conv_ops {
    const void *x, *w, *y;
    void *ws;
    int algo;        /* the chosen algorithm of the direction */
    size_t ws_bytes; /* and its workspace size */
} conv_ops;

static const float k_one = 1.0f, k_zero = 0.0f;

static int conv_operands(cd_backend_t *be, conv_plan *p, int dir, const float *x, const float *w,
                         const float *y, conv_ops *o)
{
    /* which of x, w, y each direction reads */
    static const int reads[DIR_COUNT][3] = {
        [DIR_FWD] = {1, 1, 0}, [DIR_BWD_DATA] = {0, 1, 1}, [DIR_BWD_FILTER] = {1, 0, 1}};
    *o = (conv_ops){x, w, y, NULL, 0, 0};
    if (p->kind >= 0) {
        cudaStream_t st = cuda_ctx_of(be)->stream;
        char *buf = cuda_lowp(be, p->lowp);
        if (!buf)
            return -1;
        *o = (conv_ops){buf, buf + p->off_w, buf + p->off_y, NULL, 0, 0};
        if (reads[dir][0])
            CD_LAUNCH(be, cdk_to_lowp(st, p->kind, p->nx, x, (void *)o->x));
        if (reads[dir][1])
            CD_LAUNCH(be, cdk_to_lowp(st, p->kind, p->nw, w, (void *)o->w));
        if (reads[dir][2])
            CD_LAUNCH(be, cdk_to_lowp(st, p->kind, p->ny, y, (void *)o->y));
    }
    if (prepare(be, p, dir, o->x, o->w, o->y, &o->ws))
        return -1;
    o->algo = p->dir[dir].algo;
    o->ws_bytes = p->dir[dir].ws;
    return 0;
}

/* The plan of d on the current device with the operands of direction dir
 * (conv_operands); NULL when the op must return. */
static conv_plan *conv_begin(cd_backend_t *be, const cd_conv_desc *d, int dir, const float *x,
                             const float *w, const float *y, conv_ops *o)
{
    cuda_use_device(be);
    conv_plan *p = plan_get(be, d);
    return p && conv_operands(be, p, dir, x, w, y, o) == 0 ? p : NULL;
}

/* With 2-byte operands, the tensor direction dir wrote (y, dx or dw) widened into the
 * fp32 out, or added to it when accumulate. Nothing to do in fp32. */
static void conv_result(cd_backend_t *be, const conv_plan *p, int dir, const conv_ops *o,
                        float *out, int accumulate)
{
    if (p->kind < 0)
        return;
    size_t n = dir == DIR_FWD ? p->ny : dir == DIR_BWD_DATA ? p->nx : p->nw;
    const void *src = dir == DIR_FWD ? o->y : dir == DIR_BWD_DATA ? o->x : o->w;
    CD_LAUNCH(be, cdk_from_lowp(cuda_ctx_of(be)->stream, p->kind, n, src, out, accumulate));
}

/* y = conv(x, w) (+ bias per filter). The ops below return early only while
 * capturing, after a failure was kept (cuda_check.h). */
void cuda_conv_forward(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *w,
                       const float *bias, float *y)
{
    conv_ops o;
    conv_plan *p = conv_begin(be, d, DIR_FWD, x, w, y, &o);
    if (!p)
        return;
    cudnnHandle_t dnn = cuda_ctx_of(be)->dnn;
    CD_CUDNN_CHECK(be, cudnnConvolutionForward(dnn, &k_one, p->x, o.x, p->w, o.w, p->conv,
                                               (cudnnConvolutionFwdAlgo_t)o.algo, o.ws, o.ws_bytes,
                                               &k_zero, p->y, (void *)o.y));
    conv_result(be, p, DIR_FWD, &o, y, 0);
    if (bias)
        CD_CUDNN_CHECK(be, cudnnAddTensor(dnn, &k_one, p->bias, bias, &k_one, p->yf, y));
}

/* dx = conv_transpose(dy, w), overwritten */
void cuda_conv_backward_data(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                             const float *dy, float *dx)
{
    conv_ops o;
    conv_plan *p = conv_begin(be, d, DIR_BWD_DATA, dx, w, dy, &o);
    if (!p)
        return;
    CD_CUDNN_CHECK(be, cudnnConvolutionBackwardData(
                           cuda_ctx_of(be)->dnn, &k_one, p->w, o.w, p->y, o.y, p->conv,
                           (cudnnConvolutionBwdDataAlgo_t)o.algo, o.ws, o.ws_bytes, &k_zero, p->x,
                           (void *)o.x));
    conv_result(be, p, DIR_BWD_DATA, &o, dx, 0);
}

/* dw += dL/dw, db += sum of dy per filter (db may be NULL). With 2-byte operands the
 * filter gradient of this call is computed alone (beta 0) into the operand buffer and
 * added to dw in fp32. */
void cuda_conv_backward_filter(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                               const float *dy, float *dw, float *db)
{
    cuda_use_device(be);
    cudnnHandle_t dnn = cuda_ctx_of(be)->dnn;
    conv_plan *p = plan_get(be, d);
    if (!p)
        return;
    if (dw) {
        conv_ops o;
        if (conv_operands(be, p, DIR_BWD_FILTER, x, dw, dy, &o))
            return;
        CD_CUDNN_CHECK(be, cudnnConvolutionBackwardFilter(
                               dnn, &k_one, p->x, o.x, p->y, o.y, p->conv,
                               (cudnnConvolutionBwdFilterAlgo_t)o.algo, o.ws, o.ws_bytes,
                               p->kind < 0 ? &k_one : &k_zero, p->w, (void *)o.w));
        conv_result(be, p, DIR_BWD_FILTER, &o, dw, 1);
    }
    if (db)
        CD_CUDNN_CHECK(be, cudnnConvolutionBackwardBias(dnn, &k_one, p->yf, dy, &k_one, p->bias,
                                                        db));
}
