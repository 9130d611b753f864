/*
 * The CPU backend: its function table, creation, memory and the scratch buffer.
 * The ops live in one file per topic (cpu_elementwise.c, cpu_conv.c, cpu_pool.c,
 * cpu_lrn.c, cpu_norm.c, cpu_solver.c, cpu_data.c). This backend is the reference
 * every other backend is tested against.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "cdigits/group.h"
#include "cpu_internal.h"

/* Declared here as well: some cblas.h variants leave it out. */
void openblas_set_num_threads(int);

#define CPU_ALIGN 64

/* Returns zeroed memory aligned to 64 bytes, or NULL when there is none (or the cap
 * would be passed). Zero bytes still give a valid (non-NULL) block so that NULL always
 * means failure. The block's size sits in the 64 bytes before it, for free and the
 * count of what is in use. */
static void *cpu_alloc(cd_backend_t *be, size_t bytes)
{
    cpu_ctx *ctx = be->ctx;
    size_t size = bytes ? (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN : CPU_ALIGN;
    if (size < bytes || size > SIZE_MAX - CPU_ALIGN)
        return NULL;
    size_t was = atomic_fetch_add(&ctx->used, size);
    if (ctx->limit && (size > ctx->limit || was > ctx->limit - size)) {
        atomic_fetch_sub(&ctx->used, size);
        return NULL;
    }
    char *p = NULL;
    if (posix_memalign((void **)&p, CPU_ALIGN, size + CPU_ALIGN) != 0) {
        atomic_fetch_sub(&ctx->used, size);
        return NULL;
    }
    memcpy(p, &size, sizeof size);
    memset(p + CPU_ALIGN, 0, size);
    return p + CPU_ALIGN;
}

static void cpu_free(cd_backend_t *be, void *ptr)
{
    if (!ptr)
        return;
    cpu_ctx *ctx = be->ctx;
    char *p = (char *)ptr - CPU_ALIGN;
    size_t size;
    memcpy(&size, p, sizeof size);
    atomic_fetch_sub(&ctx->used, size);
    free(p);
}

static int cpu_mem_info(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes)
{
    cpu_ctx *ctx = be->ctx;
    if (!ctx->limit)
        return CD_ERR; /* no cap: the machine's memory is not this backend's to report */
    size_t used = atomic_load(&ctx->used);
    *free_bytes = used < ctx->limit ? ctx->limit - used : 0;
    *total_bytes = ctx->limit;
    return CD_OK;
}

void cd_backend_cpu_limit_memory(cd_backend_t *be, size_t bytes)
{
    ((cpu_ctx *)be->ctx)->limit = bytes;
}

static void cpu_upload(cd_backend_t *be, void *dst_dev, const void *src_host, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst_dev, src_host, bytes);
}

/* Uploads are copies done at once, so there is nothing to wait for; having the pair
 * makes the training loop stage batch i+1 while batch i trains, as on a GPU, so the
 * CPU runs (and CI) go through the same double buffering. */
static void cpu_upload_wait(cd_backend_t *be) { (void)be; }

static void cpu_download(cd_backend_t *be, void *dst_host, const void *src_dev, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst_host, src_dev, bytes);
}

/* Overlapping ranges are allowed (memmove). */
static void cpu_copy(cd_backend_t *be, void *dst_dev, const void *src_dev, size_t bytes)
{
    (void)be;
    if (bytes && dst_dev != src_dev)
        memmove(dst_dev, src_dev, bytes);
}

/* Every CPU op has finished when it returns. */
static void cpu_sync(cd_backend_t *be) { (void)be; }

float *cpu_scratch_acquire(cd_backend_t *be, size_t nfloats)
{
    cpu_ctx *ctx = be->ctx;
    pthread_mutex_lock(&ctx->scratch_lock);
    if (nfloats > ctx->scratch_floats) {
        if (nfloats > SIZE_MAX / sizeof(float))
            cd_die("cpu backend: a workspace of %zu floats does not fit in memory; "
                   "lower the batch size",
                   nfloats);
        free(ctx->scratch);
        ctx->scratch = NULL;
        ctx->scratch_floats = 0;
        void *p = NULL;
        if (posix_memalign(&p, CPU_ALIGN, nfloats * sizeof(float)) != 0)
            cd_die("cpu backend: out of memory for a %zu MiB workspace; lower the batch size",
                   nfloats * sizeof(float) >> 20);
        ctx->scratch = p;
        ctx->scratch_floats = nfloats;
    }
    return ctx->scratch;
}

void cpu_scratch_release(cd_backend_t *be)
{
    cpu_ctx *ctx = be->ctx;
    pthread_mutex_unlock(&ctx->scratch_lock);
}

static void cpu_destroy(cd_backend_t *be)
{
    cpu_ctx *ctx = be->ctx;
    if (ctx) {
        pthread_mutex_destroy(&ctx->scratch_lock);
        free(ctx->scratch);
        free(ctx);
    }
    free(be);
}

/* Average over the replicas of the group this backend joined (cd_group_allreduce_mean);
 * a backend in no group is a group of one. */
static int cpu_allreduce_mean(cd_backend_t *be, float *x, size_t n)
{
    cpu_ctx *ctx = be->ctx;
    if (ctx->group)
        cd_group_allreduce_mean(ctx->group, ctx->rank, x, n);
    return CD_OK;
}

static int cpu_broadcast(cd_backend_t *be, float *x, size_t n)
{
    cpu_ctx *ctx = be->ctx;
    if (ctx->group)
        cd_group_broadcast_bytes(ctx->group, ctx->rank, x, n * sizeof *x);
    return CD_OK;
}

static int cpu_join_local_group(cd_backend_t *be, cd_group_t *g, int rank)
{
    if (rank < 0 || rank >= cd_group_size(g))
        return CD_ERR;
    cpu_ctx *ctx = be->ctx;
    ctx->group = g;
    ctx->rank = rank;
    return CD_OK;
}

/* Host memory, fp32 only (caps 0); replicas in one process (join_local_group), no
 * device graphs, no groups across devices and no fail hook: its failures are the
 * process's own (cd_die). */
static const cd_backend_iface cpu_iface = {
    .name = "cpu",
    .caps = 0,

    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .upload_async = cpu_upload,
    .upload_wait = cpu_upload_wait,
    .mem_info = cpu_mem_info,
    .download = cpu_download,
    .copy = cpu_copy,
    .sync = cpu_sync,

    .set = cpu_set,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .axpby = cpu_axpby,
    .mul = cpu_mul,
    .mul_add = cpu_mul_add,
    .max_index = cpu_max_index,
    .mask_select = cpu_mask_select,
    .dot = cpu_dot,
    .asum = cpu_asum,

    .power_forward = cpu_power_forward,
    .power_backward = cpu_power_backward,
    .channel_affine = cpu_channel_affine,
    .channel_affine_grad = cpu_channel_affine_grad,

    .gemm = cpu_gemm,
    .conv_forward = cpu_conv_forward,
    .conv_backward_data = cpu_conv_backward_data,
    .conv_backward_filter = cpu_conv_backward_filter,

    .pool_forward = cpu_pool_forward,
    .pool_backward = cpu_pool_backward,
    .pool_mask_size = cpu_pool_mask_size,
    .lrn_forward = cpu_lrn_forward,
    .lrn_backward = cpu_lrn_backward,

    .act_forward = cpu_act_forward,
    .act_backward = cpu_act_backward,

    .softmax_forward = cpu_softmax_forward,
    .softmax_backward = cpu_softmax_backward,
    .xent_forward = cpu_xent_forward,
    .xent_backward = cpu_xent_backward,
    .accuracy = cpu_accuracy,

    .bn_stats = cpu_bn_stats,
    .bn_normalize = cpu_bn_normalize,
    .bn_backward = cpu_bn_backward,

    .dropout_forward = cpu_dropout_forward,
    .copy_strided = cpu_copy_strided,
    .update = cpu_update,
    .prepare_batch = cpu_prepare_batch,
    .augment_batch = cpu_augment_batch,
    .whiten_batch = cpu_whiten_batch,

    .allreduce_mean = cpu_allreduce_mean, /* the identity until the backend joins a group */
    .broadcast = cpu_broadcast,
    .join_local_group = cpu_join_local_group,
    .destroy = cpu_destroy,
};

/*
 * Creates the CPU backend with `threads` OpenMP threads (threads <= 0: every core),
 * which run both the loops and the blocks of every gemm. Never returns NULL (aborts on
 * out of memory). OpenBLAS is set to one thread for the whole process: OpenBLAS's
 * thread count is a process-wide setting, and this backend splits gemms itself.
 */
cd_backend_t *cd_backend_cpu_new(int threads)
{
    if (threads <= 0)
        threads = omp_get_num_procs();
    if (threads < 1)
        threads = 1;
    cd_backend_t *be = cd_xcalloc(1, sizeof *be);
    cpu_ctx *ctx = cd_xcalloc(1, sizeof *ctx);
    ctx->threads = threads;
    pthread_mutex_init(&ctx->scratch_lock, NULL);
    be->iface = &cpu_iface;
    be->device = 0;
    be->ctx = ctx;
    omp_set_num_threads(threads);
    /* one pool: OpenMP's; OpenBLAS runs single-threaded inside it (see cpu_gemm) */
    openblas_set_num_threads(1);
    cpu_small_gemm_init();
    /* the pool's threads start here and are named for what they are, not after the
     * thread that made them (a data-parallel replica's name is its own) */
#pragma omp parallel num_threads(threads)
    if (omp_get_thread_num() != 0)
        pthread_setname_np(pthread_self(), "cd-cpu");
    return be;
}

/* Frees any backend (NULL is fine). */
void cd_backend_free(cd_backend_t *be)
{
    if (be && be->iface && be->iface->destroy)
        be->iface->destroy(be);
}
