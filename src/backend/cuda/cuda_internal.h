/*
 * The CUDA backend's private state and the ops each file of src/backend/cuda provides
 * to the function table in backend.c. One cuda_ctx per backend (per device): its own
 * compute stream, and cuBLAS and cuDNN handles bound to that stream, so every op of a
 * backend is ordered on one queue and the host waits only in download, dot, asum and
 * sync. A second stream carries upload_async's copies, so the next batch crosses the
 * bus while this one trains. Memory ops and prepare_batch only enqueue work and are
 * safe beside other threads; ops that use the handles, the scratch or the convolution
 * plans take one caller at a time.
 */
#ifndef CDIGITS_CUDA_INTERNAL_H
#define CDIGITS_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "cdigits/backend.h"
#include "cdigits/cuda_check.h"
#include "cdigits/util.h"
#include "cd_kernels.h"

struct cuda_conv_cache;

/* A device buffer replaced while a captured step may still use it (memory.c). */
typedef struct cuda_retired {
    void *ptr;
    unsigned gen; /* the capture generation current when it was replaced */
} cuda_retired;

typedef struct cuda_ctx {
    cudaStream_t stream; /* every op */
    cudaStream_t copy;   /* upload_async's copies (non-blocking, beside stream) */
    cudaEvent_t copied;  /* recorded on copy after each upload_async */
    cudaEvent_t fence;   /* recorded on stream before each upload_async; copy waits for it */
    cublasHandle_t blas;
    void *blas_ws;       /* cuBLAS's workspace, owned here so a capture never allocates */
    int blas_math;       /* the cublasMath_t set on blas; -1 before the first gemm */
    cudnnHandle_t dnn;
    int debug_sync; /* wait after every kernel so a fault names its launch (CDIGITS_CUDA_SYNC) */
    int find;       /* measure convolution algorithms (1) or take cuDNN's heuristics (0) */

    /* cuDNN workspace, grown up to ws_limit (CDIGITS_CUDNN_WORKSPACE_MB) */
    void *ws;
    size_t ws_bytes, ws_limit;
    /* temporaries of kernels (per-channel partial sums, LRN ratios), grown as needed */
    void *scratch;
    size_t scratch_bytes;
    /* fp16/bf16 copies of the operands of mixed-precision convolution and gemm */
    void *lowp;
    size_t lowp_bytes;

    /* CUDA graphs (graph.c): capturing is set between graph_begin and graph_end, gen
     * counts captures, graph is the replayable step, replays counts its replays on the
     * device (dropout adds it to its counter). Buffers that grow while a record may use
     * the old one are retired, and freed once no record can use them. capture_err is
     * the first failure of the capture running now ("" while none), which graph_end
     * reports instead of instantiating the record. */
    int capturing;
    char capture_err[512];
    unsigned gen;
    cudaGraphExec_t graph;
    long long *replays; /* device: the replay number of the record (0 at the first) */
    cuda_retired *retired;
    int nretired, cap_retired;

    /* descriptors reused by the cuDNN calls that are not convolutions */
    cudnnTensorDescriptor_t t_a, t_b;
    cudnnActivationDescriptor_t act;
    cudnnLRNDescriptor_t lrn;

    struct cuda_conv_cache *conv; /* conv.c: descriptors and measured algorithms per shape */

    ncclComm_t comm; /* data-parallel group; NULL until cd_cuda_group_join */
    int nranks;
    /* allreduce_start's averages run on `reduce` (the highest priority, so they are not
     * queued behind the backward's kernels); `grads` is recorded on stream before each,
     * `reduced` on reduce when the compute stream has to wait for them */
    cudaStream_t reduce;
    cudaEvent_t grads, reduced;
    int reducing; /* averages started since the last allreduce_wait */

    char name[256]; /* the device's name */
} cuda_ctx;

static inline cuda_ctx *cuda_ctx_of(cd_backend_t *be) { return (cuda_ctx *)be->ctx; }

/* Makes be's device current in the calling thread (cheap when it already is). Every
 * entry point calls it first, so ops may come from any thread. */
void cuda_use_device(cd_backend_t *be);

/* Device temporaries that stay valid until the next call of the same function; they
 * wait for queued work before they grow (or, while a captured step may use the old
 * buffer, keep it aside). cuda_lowp holds 2-byte operands, 256-byte aligned. NULL only
 * while capturing, when growing failed (the failure is kept): the caller returns. */
void *cuda_scratch(cd_backend_t *be, size_t bytes);
void *cuda_workspace(cd_backend_t *be, size_t bytes);
void *cuda_lowp(cd_backend_t *be, size_t bytes);

/* The cast kind of be->precision for the gemm-shaped ops: CDK_LOWP_HALF or
 * CDK_LOWP_BF16, or -1 when they compute on fp32 inputs (FP32, TF32). */
static inline int cuda_lowp_kind(const cd_backend_t *be)
{
    return be->precision == CD_PREC_FP16 ? CDK_LOWP_HALF
           : be->precision == CD_PREC_BF16 ? CDK_LOWP_BF16
                                           : -1;
}

/* 0 when be is not capturing. While it captures, op needs the host (a wait, a read, an
 * allocation), which a captured step cannot replay: the refusal, naming op, becomes
 * the capture's failure (graph_end reports it) and 1 is returned, and the caller
 * returns without doing op. */
int cuda_capture_refuses(cd_backend_t *be, const char *op);

/* graph.c, for check.c: when be (may be NULL) is capturing, keeps message as the
 * capture's failure unless one is kept already, and returns 1 (the failed check then
 * returns instead of aborting); 0 otherwise. */
int cuda_capture_keep(cd_backend_t *be, const char *message);

/* 1 while be captures a step that has already failed: results of this capture (a
 * convolution's algorithm choice, a plan) must not be kept for later use. */
static inline int cuda_capture_failed(cd_backend_t *be)
{
    const cuda_ctx *ctx = cuda_ctx_of(be);
    return ctx->capturing && ctx->capture_err[0];
}

/* Checks a kernel launcher's result; with debug_sync also waits (not while capturing,
 * when nothing runs), so an error inside the kernel is reported at its launch rather
 * than at a later call. A launch that fails while capturing is kept as the capture's
 * failure, like any CHECK (cuda_check.h), and the op goes on. */
#define CD_LAUNCH(be, call)                                                                  \
    do {                                                                                     \
        CD_CUDA_CHECK(be, call);                                                             \
        if (cuda_ctx_of(be)->debug_sync && !cuda_ctx_of(be)->capturing) {                   \
            int cd_sync_ = (int)cudaStreamSynchronize(cuda_ctx_of(be)->stream);              \
            if (cd_sync_ != 0)                                                               \
                cd_cuda_fail((be), CD_LIB_CUDA, cd_sync_, #call " (while running)", __func__, \
                             __FILE__, __LINE__);                                            \
        }                                                                                    \
    } while (0)

/* Splits n into cuDNN- and cuBLAS-sized (int) chunks. */
#define CUDA_CHUNK ((size_t)1 << 30)

/* memory.c */
void *cuda_alloc(cd_backend_t *be, size_t bytes);
void cuda_free(cd_backend_t *be, void *ptr);
void cuda_upload(cd_backend_t *be, void *dst, const void *src, size_t bytes);
void cuda_download(cd_backend_t *be, void *dst, const void *src, size_t bytes);
void cuda_copy(cd_backend_t *be, void *dst, const void *src, size_t bytes);
void cuda_sync(cd_backend_t *be);
int cuda_mem_info(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes);
void *cuda_host_alloc(cd_backend_t *be, size_t bytes);
void cuda_host_free(cd_backend_t *be, void *ptr);
void cuda_upload_async(cd_backend_t *be, void *dst, const void *src, size_t bytes);
void cuda_upload_wait(cd_backend_t *be);
/* frees the retired buffers of captures before generation `before` (all: UINT_MAX) */
void cuda_retired_release(cd_backend_t *be, unsigned before);
void cuda_memory_release(cd_backend_t *be);

/* graph.c */
int cuda_graph_begin(cd_backend_t *be);
int cuda_graph_end(cd_backend_t *be);
int cuda_graph_replay(cd_backend_t *be);
void cuda_graph_release(cd_backend_t *be);

/* elementwise.c */
void cuda_set(cd_backend_t *be, size_t n, float v, float *y);
void cuda_scale(cd_backend_t *be, size_t n, float a, const float *x, float *y);
void cuda_axpy(cd_backend_t *be, size_t n, float a, const float *x, float *y);
void cuda_axpby(cd_backend_t *be, size_t n, float a, const float *x, float b, float *y);
void cuda_mul(cd_backend_t *be, size_t n, const float *a, const float *b, float *y);
void cuda_mul_add(cd_backend_t *be, size_t n, const float *a, const float *b, float *y);
void cuda_max_index(cd_backend_t *be, size_t n, const float *x, float *y, int idx, float *mask);
void cuda_mask_select(cd_backend_t *be, size_t n, const float *dy, const float *mask, int idx,
                      float *dx);
void cuda_power_forward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                        const float *x, float *y);
void cuda_power_backward(cd_backend_t *be, size_t n, float power, float scale, float shift,
                         const float *x, const float *dy, float *dx);
void cuda_copy_strided(cd_backend_t *be, int outer, size_t count, const float *src,
                       size_t src_stride, float *dst, size_t dst_stride, int accumulate);
void cuda_dropout_forward(cd_backend_t *be, size_t n, float ratio, uint64_t seed,
                          uint64_t counter, const float *x, float *mask, float *y);

/* blas.c */
float cuda_dot(cd_backend_t *be, size_t n, const float *a, const float *b);
float cuda_asum(cd_backend_t *be, size_t n, const float *x);
void cuda_gemm(cd_backend_t *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *a, const float *b, float beta, float *c);

/* channel.c */
void cuda_channel_affine(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                         const float *gamma, const float *beta, float *y);
void cuda_channel_affine_grad(cd_backend_t *be, int outer, int channels, int inner,
                              const float *x, const float *dy, float *dgamma, float *dbeta);
void cuda_bn_stats(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                   float *mean, float *var);
void cuda_bn_normalize(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                       const float *mean, const float *var, float eps, float *y);
void cuda_bn_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                      const float *var, float eps, int global_stats, const float *dy, float *dx);

/* conv.c */
void cuda_conv_forward(cd_backend_t *be, const cd_conv_desc *d, const float *x, const float *w,
                       const float *bias, float *y);
void cuda_conv_backward_data(cd_backend_t *be, const cd_conv_desc *d, const float *w,
                             const float *dy, float *dx);
void cuda_conv_backward_filter(cd_backend_t *be, const cd_conv_desc *d, const float *x,
                               const float *dy, float *dw, float *db);
void cuda_conv_release(cd_backend_t *be);

/* pool.c */
void cuda_pool_forward(cd_backend_t *be, const cd_pool_desc *d, const float *x, float *y, float *mask);
void cuda_pool_backward(cd_backend_t *be, const cd_pool_desc *d, const float *x, const float *y,
                        const float *mask, const float *dy, float *dx);

/* lrn.c */
void cuda_lrn_forward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, float *y);
void cuda_lrn_backward(cd_backend_t *be, const cd_lrn_desc *d, const float *x, const float *y,
                       const float *dy, float *dx);

/* activation.c: activations and softmax */
void cuda_act_forward(cd_backend_t *be, int act, float slope, size_t n, const float *x, float *y);
void cuda_act_backward(cd_backend_t *be, int act, float slope, size_t n, const float *x,
                       const float *y, const float *dy, float *dx);
void cuda_softmax_forward(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                          float *y);
void cuda_softmax_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                           const float *dy, float *dx);

/* loss.c */
void cuda_xent_forward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                       const float *label, int has_ignore, int ignore_label, float *loss_out,
                       float *count_out);
void cuda_xent_backward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                        const float *label, int has_ignore, int ignore_label, float scale,
                        float *dx);
void cuda_accuracy(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                   const float *label, int top_k, int has_ignore, int ignore_label,
                   float *correct_out, float *count_out);

/* solver.c */
void cuda_update(cd_backend_t *be, const cd_update_desc *d, size_t n, float *w, float *g,
                 float *h1, float *h2);

/* data.c */
void cuda_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                        const uint8_t *src, const int *oy, const int *ox, const uint8_t *mirror,
                        const float *mean, float scale, float *dst);
/* kernels/augment.cu; augment_batch uses the scratch (one caller at a time) */
void cuda_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                        int kind, uint8_t fill, const uint8_t *src, uint8_t *dst);
void cuda_whiten_batch(cd_backend_t *be, int n, size_t size, float *x);

/* nccl.c; the group slots are cd_cuda_group_id and cd_cuda_group_join (cuda_check.h)
 * behind the interface's signatures */
int cuda_group_id(cd_backend_t *be, char *id, size_t id_len, char *why, size_t why_len);
int cuda_group_join(cd_backend_t *be, const char *id, int nranks, int rank, char *why,
                    size_t why_len);
int cuda_allreduce_mean(cd_backend_t *be, float *x, size_t n);
int cuda_allreduce_start(cd_backend_t *be, float *x, size_t n);
int cuda_allreduce_wait(cd_backend_t *be);
int cuda_broadcast(cd_backend_t *be, float *x, size_t n);
void cuda_group_release(cd_backend_t *be);
/* before any cudaMalloc or cudaFree: lets the averages in flight finish first */
void cuda_quiesce(cd_backend_t *be);

#endif
