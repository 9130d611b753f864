/*
 * The group of processes under MPI (group.h): one rank per process, MPI_COMM_WORLD.
 *
 * allreduce_mean gives the bits the group of threads gives: each rank gathers its slice
 * of every rank's buffer (MPI_Alltoallv), sums each element in rank order from 0.0f and
 * multiplies by 1.0f / size, as src/common/group.c does, and every rank collects the
 * slices (MPI_Allgatherv). MPI_Allreduce would be one call, but its sum order is the
 * library's (it may differ with the rank count, the message size or the network), and
 * a job under mpirun would then not repeat the same job trained with thread replicas.
 * The traffic is the same as a reduce-scatter and an all-gather.
 *
 * Every MPI call is checked (MPI_CHECK): errors return (MPI_ERRORS_RETURN) so that the
 * failing rank names the call, itself and its host before MPI_Abort ends every rank. A
 * peer that dies ends the job the same way: Open MPI's launcher aborts every rank when
 * one exits without MPI_Finalize, so no rank waits in a collective for it.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/jsonl.h"
#include "cdigits/mpi_group.h"
#include "cdigits/util.h"

/* Open MPI keeps what MPI_Init allocates past MPI_Finalize, and its progress threads
 * lose a few bytes in finalizing, by design. Under the leak checker (the sanitizer
 * build) MPI_Init's allocations do not count, and the check runs just before
 * MPI_Finalize, when everything of ours is freed and everything of Open MPI's is still
 * held: a rank's exit status stays the worker's and every leak of ours is found. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAKS_IGNORED_BEGIN() __lsan_disable()
#define LEAKS_IGNORED_END() __lsan_enable()
#define LEAKS_CHECK_NOW() __lsan_do_leak_check()
/* PMIx loses a key's copy on each lookup its progress thread answers (pmix_hash_fetch) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libpmix.so\n"; }
#else
#define LEAKS_IGNORED_BEGIN() ((void)0)
#define LEAKS_IGNORED_END() ((void)0)
#define LEAKS_CHECK_NOW() ((void)0)
#endif

/* The most floats one reduction exchanges at a time (the counts MPI takes are ints). */
#define REDUCE_CHUNK ((size_t)1 << 24)
/* The most bytes one broadcast sends at a time. */
#define BCAST_CHUNK ((size_t)1 << 30)

typedef struct mpi_ctx {
    float *tmp;     /* this rank's slice of every rank's buffer, rank after rank */
    size_t tmp_len; /* floats */
    int *scount, *sdispl, *rcount, *rdispl; /* per rank */
} mpi_ctx;

static cd_group_t *g_group; /* for the messages of the checking macro */

static void mpi_failed(int rc, const char *call, const char *func, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    if (g_group)
        cd_jsonl_error("rank %d of %d (host %s): %s failed in %s (%s:%d): %s; every rank is stopped",
                       g_group->rank, g_group->size, g_group->host, call, func, file, line, text);
    else
        cd_jsonl_error("%s failed in %s (%s:%d): %s", call, func, file, line, text);
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define MPI_CHECK(call)                                                      \
    do {                                                                     \
        int mpi_rc_ = (call);                                                \
        if (mpi_rc_ != MPI_SUCCESS)                                          \
            mpi_failed(mpi_rc_, #call, __func__, __FILE__, __LINE__);        \
    } while (0)

/* A call for another rank than this process's is the caller's bug: say so, end all. */
static void own_rank(const cd_group_t *g, int rank, const char *func)
{
    if (rank == g->rank)
        return;
    cd_jsonl_error("rank %d of %d (host %s): %s was called for rank %d", g->rank, g->size, g->host,
                   func, rank);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* The first element of rank r's slice of n (the group of threads' split). */
static size_t slice_lo(size_t n, int r, int size) { return n * (size_t)r / (size_t)size; }

/* x is (n) with n <= REDUCE_CHUNK */
static void reduce_chunk(cd_group_t *g, mpi_ctx *m, float *x, size_t n)
{
    int size = g->size, me = g->rank;
    size_t lo = slice_lo(n, me, size), mine = slice_lo(n, me + 1, size) - lo;
    for (int r = 0; r < size; r++) {
        size_t rlo = slice_lo(n, r, size);
        m->scount[r] = (int)(slice_lo(n, r + 1, size) - rlo);
        m->sdispl[r] = (int)rlo;
        m->rcount[r] = (int)mine;
        m->rdispl[r] = (int)(mine * (size_t)r);
    }
    size_t need = mine * (size_t)size;
    if (need > m->tmp_len) {
        free(m->tmp);
        m->tmp = cd_xmalloc(need * sizeof *m->tmp);
        m->tmp_len = need;
    }
    MPI_CHECK(MPI_Alltoallv(x, m->scount, m->sdispl, MPI_FLOAT, m->tmp, m->rcount, m->rdispl, MPI_FLOAT,
                            MPI_COMM_WORLD));
    float inv = 1.0f / (float)size;
    for (size_t i = 0; i < mine; i++) {
        float s = 0;
        for (int r = 0; r < size; r++)
            s += m->tmp[(size_t)r * mine + i];
        x[lo + i] = s * inv;
    }
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, m->scount, m->sdispl, MPI_FLOAT,
                             MPI_COMM_WORLD));
}

static void mpi_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n)
{
    own_rank(g, rank, "allreduce_mean");
    for (size_t at = 0; at < n; at += REDUCE_CHUNK)
        reduce_chunk(g, g->ctx, x + at, n - at < REDUCE_CHUNK ? n - at : REDUCE_CHUNK);
}

static long mpi_broadcast(cd_group_t *g, int rank, long v)
{
    own_rank(g, rank, "broadcast");
    MPI_CHECK(MPI_Bcast(&v, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    return v;
}

static long mpi_min(cd_group_t *g, int rank, long v)
{
    own_rank(g, rank, "min");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
    return v;
}

static void mpi_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len)
{
    own_rank(g, rank, "broadcast_bytes");
    for (size_t at = 0; at < len; at += BCAST_CHUNK)
        MPI_CHECK(MPI_Bcast((char *)buf + at, (int)(len - at < BCAST_CHUNK ? len - at : BCAST_CHUNK), MPI_BYTE,
                            0, MPI_COMM_WORLD));
}

static void mpi_abort(cd_group_t *g, int code)
{
    (void)g;
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_free(cd_group_t *g)
{
    mpi_ctx *m = g->ctx;
    free(m->tmp);
    free(m->scount);
    free(m->sdispl);
    free(m->rcount);
    free(m->rdispl);
    free(m);
    g_group = NULL;
    free(g);
    LEAKS_CHECK_NOW();
    MPI_CHECK(MPI_Finalize());
}

static const cd_group_iface mpi_iface = {
    .name = "mpi",
    .allreduce_mean = mpi_allreduce_mean,
    .broadcast = mpi_broadcast,
    .min = mpi_min,
    .broadcast_bytes = mpi_broadcast_bytes,
    .abort = mpi_abort,
    .free = mpi_free,
};

cd_group_t *cd_mpi_group_new(char *err, size_t errlen)
{
    int provided = 0;
    /* only the training thread calls MPI (the loader's threads and OpenMP's never do) */
    LEAKS_IGNORED_BEGIN();
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    LEAKS_IGNORED_END();
    if (rc != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed; check that the worker was started by mpirun or "
                 "srun with an MPI plugin this Open MPI supports (srun --mpi=list)");
        return NULL;
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    cd_group_t *g = cd_xcalloc(1, sizeof *g);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g->size));
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    snprintf(g->host, sizeof g->host, "%s", name);
    g_group = g;
    if (provided < MPI_THREAD_FUNNELED) {
        snprintf(err, errlen, "rank %d of %d (host %s): this MPI offers thread level %d, and training "
                 "needs MPI_THREAD_FUNNELED (%d): its loader and OpenMP threads run beside the calls; "
                 "use an MPI built with thread support", g->rank, g->size, g->host, provided,
                 MPI_THREAD_FUNNELED);
        free(g);
        g_group = NULL;
        LEAKS_IGNORED_BEGIN();
        (void)MPI_Finalize(); /* the error above is the one to report */
        LEAKS_IGNORED_END();
        return NULL;
    }
    /* the ranks sharing this host's memory: which GPU, how many cores */
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    MPI_CHECK(MPI_Comm_rank(local, &g->local_rank));
    MPI_CHECK(MPI_Comm_size(local, &g->local_size));
    MPI_CHECK(MPI_Comm_free(&local));
    mpi_ctx *m = cd_xcalloc(1, sizeof *m);
    m->scount = cd_xcalloc((size_t)g->size, sizeof *m->scount);
    m->sdispl = cd_xcalloc((size_t)g->size, sizeof *m->sdispl);
    m->rcount = cd_xcalloc((size_t)g->size, sizeof *m->rcount);
    m->rdispl = cd_xcalloc((size_t)g->size, sizeof *m->rdispl);
    g->iface = &mpi_iface;
    g->ctx = m;
    return g;
}
