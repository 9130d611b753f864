/*
 * The CUDA backend: its function table, creation and destruction. The ops live in the
 * other files of this folder (one subject each) and in the .cu files of kernels/.
 *
 * The arithmetic of convolution and gemm follows be->precision, which the engine sets
 * before it builds a network (conv.c, blas.c): FP32 is plain fp32 (no TF32), TF32
 * lets the tensor cores round inputs to TF32, FP16 and BF16 round the inputs to 2-byte
 * floats and accumulate in fp32.
 *
 * Settings read from the environment when a backend is created:
 *   CDIGITS_CUDNN_WORKSPACE_MB=N     largest cuDNN workspace (default 1024)
 *   CDIGITS_CUDNN_FIND=0             take cuDNN's heuristic convolution algorithms instead
 *                                    of measuring them (default 1: measure once per shape)
 *   CDIGITS_CUDA_SYNC=1              wait after every kernel, so a fault names its launch
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

static void cuda_destroy(cd_backend_t *be);

/* The fail hook is the process's (check.c): every backend's fatal failures go there. */
static void cuda_set_fail_hook(cd_backend_t *be, cd_backend_fail_hook hook)
{
    (void)be;
    cd_cuda_set_fail_hook(hook);
}

static const cd_backend_iface cuda_iface = {
    .name = "cuda",
    .caps = CD_BE_CAP_DEVICE | CD_BE_CAP_REDUCED_PRECISION,

    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .sync = cuda_sync,

    .set = cuda_set,
    .scale = cuda_scale,
    .axpy = cuda_axpy,
    .axpby = cuda_axpby,
    .mul = cuda_mul,
    .mul_add = cuda_mul_add,
    .max_index = cuda_max_index,
    .mask_select = cuda_mask_select,
    .dot = cuda_dot,
    .asum = cuda_asum,

    .power_forward = cuda_power_forward,
    .power_backward = cuda_power_backward,
    .channel_affine = cuda_channel_affine,
    .channel_affine_grad = cuda_channel_affine_grad,

    .gemm = cuda_gemm,

    .conv_forward = cuda_conv_forward,
    .conv_backward_data = cuda_conv_backward_data,
    .conv_backward_filter = cuda_conv_backward_filter,

    .pool_forward = cuda_pool_forward,
    .pool_backward = cuda_pool_backward,

    .lrn_forward = cuda_lrn_forward,
    .lrn_backward = cuda_lrn_backward,

    .act_forward = cuda_act_forward,
    .act_backward = cuda_act_backward,

    .softmax_forward = cuda_softmax_forward,
    .softmax_backward = cuda_softmax_backward,

    .xent_forward = cuda_xent_forward,
    .xent_backward = cuda_xent_backward,
    .accuracy = cuda_accuracy,

    .bn_stats = cuda_bn_stats,
    .bn_normalize = cuda_bn_normalize,
    .bn_backward = cuda_bn_backward,

    .dropout_forward = cuda_dropout_forward,
    .copy_strided = cuda_copy_strided,
    .update = cuda_update,
    .prepare_batch = cuda_prepare_batch,
    .augment_batch = cuda_augment_batch,
    .whiten_batch = cuda_whiten_batch,
    .allreduce_mean = cuda_allreduce_mean,
    .allreduce_start = cuda_allreduce_start,
    .allreduce_wait = cuda_allreduce_wait,
    .broadcast = cuda_broadcast,

    .mem_info = cuda_mem_info,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .upload_async = cuda_upload_async,
    .upload_wait = cuda_upload_wait,

    .destroy = cuda_destroy,

    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_replay = cuda_graph_replay,

    .group_id = cuda_group_id,
    .group_join = cuda_group_join,
    .set_fail_hook = cuda_set_fail_hook,
};

/* cuBLAS's workspace, given to it so that a captured gemm never allocates (Hopper
 * wants 32 MiB for its largest kernels) */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

/* the device current in this thread, as far as this backend knows */
static _Thread_local int thread_device = -1;

void cuda_use_device(cd_backend_t *be)
{
    if (thread_device == be->device)
        return;
    if (CD_CUDA_CHECK(be, cudaSetDevice(be->device)))
        return; /* capturing: the capture has failed; try again next call */
    thread_device = be->device;
}

int cd_backend_cuda_compiled(void) { return 1; }

/* No driver, no device or a broken installation all count as "no GPU". */
int cd_backend_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n > 0 ? n : 0;
}

/* "13.0" from a CUDA version number (1000 x major + 10 x minor), "unknown" when the
 * query failed */
static const char *cuda_version_text(int failed, int v, char *buf, size_t len)
{
    if (failed)
        snprintf(buf, len, "unknown");
    else
        snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
    return buf;
}

/* "9.10.2" from a library's version code: 10000 x major + 100 x minor + patch (cuDNN 9,
 * cuBLAS, NCCL 2.9 and later), or 1000 x major + 100 x minor + patch before that */
static const char *lib_version_text(int failed, long v, char *buf, size_t len)
{
    long unit = v >= 10000 ? 10000 : 1000;
    if (failed || v <= 0)
        snprintf(buf, len, "unknown");
    else
        snprintf(buf, len, "%ld.%ld.%ld", v / unit, v % unit / 100, v % 100);
    return buf;
}

/* One line on stderr naming the device and the versions this backend runs with, so a
 * worker's log says which libraries a result came from. A version that cannot be read
 * is "unknown"; none of it is an error. */
static void log_versions(cd_backend_t *be, const struct cudaDeviceProp *prop)
{
    cuda_ctx *ctx = cuda_ctx_of(be);
    int runtime = 0, driver = 0, blas = 0, nccl = 0;
    int runtime_failed = CD_CUDA_TRY(be, cudaRuntimeGetVersion(&runtime)) != 0;
    int driver_failed = CD_CUDA_TRY(be, cudaDriverGetVersion(&driver)) != 0;
    int blas_failed = CD_CUBLAS_TRY(be, cublasGetVersion(ctx->blas, &blas)) != 0;
    int nccl_failed = CD_NCCL_TRY(be, ncclGetVersion(&nccl)) != 0;
    size_t dnn = cudnnGetVersion(); /* no status: 0 would mean none loaded */
    char rt[32], dr[32], dn[32], bl[32], nc[32];
    cd_info("GPU %d: %s (sm_%d%d, %.0f GiB); CUDA runtime %s, driver %s, cuDNN %s, cuBLAS %s, "
            "NCCL %s",
            be->device, prop->name, prop->major, prop->minor, prop->totalGlobalMem / 1073741824.0,
            cuda_version_text(runtime_failed, runtime, rt, sizeof rt),
            cuda_version_text(driver_failed, driver, dr, sizeof dr),
            lib_version_text(0, (long)dnn, dn, sizeof dn),
            lib_version_text(blas_failed, blas, bl, sizeof bl),
            lib_version_text(nccl_failed, nccl, nc, sizeof nc));
    be->err[0] = 0; /* a failed query above is not the backend's error */
}

static long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end;
    long r = strtol(v, &end, 10);
    return *end ? fallback : r;
}

cd_backend_t *cd_backend_cuda_new(int device, char *why, size_t why_len)
{
    char ignored[8];
    if (!why || why_len == 0) {
        why = ignored;
        why_len = sizeof ignored;
    }
    why[0] = 0;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "no usable GPU: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        cudaGetLastError();
        return NULL;
    }
    if (count <= 0 || device < 0 || device >= count) {
        snprintf(why, why_len, "GPU %d is not available: %d visible (CUDA_VISIBLE_DEVICES=%s)",
                 device, count, visible ? visible : "unset");
        return NULL;
    }

    cd_backend_t *be = calloc(1, sizeof *be);
    cuda_ctx *ctx = calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        snprintf(why, why_len, "out of host memory creating the CUDA backend");
        return NULL;
    }
    be->iface = &cuda_iface;
    be->device = device;
    be->ctx = ctx;
    ctx->blas_math = -1;
    ctx->debug_sync = env_long("CDIGITS_CUDA_SYNC", 0) != 0;
    ctx->find = env_long("CDIGITS_CUDNN_FIND", 1) != 0;
    long ws_mb = env_long("CDIGITS_CUDNN_WORKSPACE_MB", 1024);
    ctx->ws_limit = (size_t)(ws_mb > 0 ? ws_mb : 0) << 20;

    thread_device = -1;
    if (CD_CUDA_TRY(be, cudaSetDevice(device)))
        goto err;
    thread_device = device;
    struct cudaDeviceProp prop;
    if (CD_CUDA_TRY(be, cudaGetDeviceProperties(&prop, device)))
        goto err;
    snprintf(ctx->name, sizeof ctx->name, "%s", prop.name);
    if (CD_CUDA_TRY(be, cdk_check_image())) {
        snprintf(be->err, sizeof be->err,
                 "GPU %d (%.64s, compute capability %d.%d) cannot run this build's kernels; rebuild "
                 "with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
                 device, prop.name, prop.major, prop.minor, prop.major, prop.minor);
        goto err;
    }
    if (CD_CUDA_TRY(be, cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) ||
        CD_CUDA_TRY(be, cudaStreamCreateWithFlags(&ctx->copy, cudaStreamNonBlocking)) ||
        CD_CUDA_TRY(be, cudaEventCreateWithFlags(&ctx->copied, cudaEventDisableTiming)) ||
        CD_CUDA_TRY(be, cudaEventCreateWithFlags(&ctx->fence, cudaEventDisableTiming)))
        goto err;
    /* the workspace after the stream: cublasSetStream resets it to cuBLAS's own */
    if (CD_CUBLAS_TRY(be, cublasCreate(&ctx->blas)) ||
        CD_CUBLAS_TRY(be, cublasSetStream(ctx->blas, ctx->stream)) ||
        CD_CUDA_TRY(be, cudaMalloc(&ctx->blas_ws, CUBLAS_WORKSPACE_BYTES)) ||
        CD_CUBLAS_TRY(be, cublasSetWorkspace(ctx->blas, ctx->blas_ws, CUBLAS_WORKSPACE_BYTES)))
        goto err;
    if (CD_CUDNN_TRY(be, cudnnCreate(&ctx->dnn)) ||
        CD_CUDNN_TRY(be, cudnnSetStream(ctx->dnn, ctx->stream)) ||
        CD_CUDNN_TRY(be, cudnnCreateTensorDescriptor(&ctx->t_a)) ||
        CD_CUDNN_TRY(be, cudnnCreateTensorDescriptor(&ctx->t_b)) ||
        CD_CUDNN_TRY(be, cudnnCreateActivationDescriptor(&ctx->act)) ||
        CD_CUDNN_TRY(be, cudnnCreateLRNDescriptor(&ctx->lrn)))
        goto err;
    log_versions(be, &prop);
    return be;

err:
    snprintf(why, why_len, "%s", be->err);
    cuda_destroy(be);
    return NULL;
}

/* Tolerates a half-made backend (from a failed create) and a broken device: errors
 * here are recorded, not fatal. */
static void cuda_destroy(cd_backend_t *be)
{
    if (!be)
        return;
    cuda_ctx *ctx = cuda_ctx_of(be);
    if (ctx) {
        if (CD_CUDA_TRY(be, cudaSetDevice(be->device)) == 0)
            thread_device = be->device;
        cuda_graph_release(be);
        if (ctx->copy)
            CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->copy));
        if (ctx->stream)
            CD_CUDA_TRY(be, cudaStreamSynchronize(ctx->stream));
        cuda_conv_release(be);
        cuda_group_release(be);
        cuda_memory_release(be);
        if (ctx->lrn)
            CD_CUDNN_TRY(be, cudnnDestroyLRNDescriptor(ctx->lrn));
        if (ctx->act)
            CD_CUDNN_TRY(be, cudnnDestroyActivationDescriptor(ctx->act));
        if (ctx->t_b)
            CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(ctx->t_b));
        if (ctx->t_a)
            CD_CUDNN_TRY(be, cudnnDestroyTensorDescriptor(ctx->t_a));
        if (ctx->dnn)
            CD_CUDNN_TRY(be, cudnnDestroy(ctx->dnn));
        if (ctx->blas)
            CD_CUBLAS_TRY(be, cublasDestroy(ctx->blas));
        if (ctx->blas_ws)
            CD_CUDA_TRY(be, cudaFree(ctx->blas_ws));
        if (ctx->fence)
            CD_CUDA_TRY(be, cudaEventDestroy(ctx->fence));
        if (ctx->copied)
            CD_CUDA_TRY(be, cudaEventDestroy(ctx->copied));
        if (ctx->copy)
            CD_CUDA_TRY(be, cudaStreamDestroy(ctx->copy));
        if (ctx->stream)
            CD_CUDA_TRY(be, cudaStreamDestroy(ctx->stream));
        free(ctx);
    }
    be->ctx = NULL;
    free(be);
}
