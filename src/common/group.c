/* Data-parallel groups: the public calls, dispatched through the group's table, and the
 * group of threads (a barrier and a rank-ordered reduction in shared memory). */
#include "cdigits/group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

/* ---- the public calls ------------------------------------------------------------ */

void cd_group_free(cd_group_t *g)
{
    if (g)
        g->iface->free(g);
}

int cd_group_size(const cd_group_t *g) { return g->size; }

int cd_group_rank(const cd_group_t *g) { return g->rank; }

void cd_group_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n)
{
    g->iface->allreduce_mean(g, rank, x, n);
}

long cd_group_broadcast(cd_group_t *g, int rank, long v) { return g->iface->broadcast(g, rank, v); }

long cd_group_min(cd_group_t *g, int rank, long v) { return g->iface->min(g, rank, v); }

void cd_group_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len)
{
    g->iface->broadcast_bytes(g, rank, buf, len);
}

void cd_group_abort(cd_group_t *g, int code)
{
    fflush(stdout);
    fflush(stderr);
    g->iface->abort(g, code);
    _exit(code); /* an implementation's abort that came back */
}

/* ---- a group of threads ------------------------------------------------------------ */

typedef struct threads {
    pthread_barrier_t barrier;
    float **bufs;   /* each rank's buffer for the reduction under way */
    long value;     /* broadcast slot */
    long *values;   /* each rank's value (cd_group_min) */
    const void *bytes;
} threads;

static void threads_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n)
{
    threads *t = g->ctx;
    t->bufs[rank] = x;
    pthread_barrier_wait(&t->barrier);
    /* rank r reduces its slice of every buffer and writes the mean to all of them */
    size_t lo = n * (size_t)rank / (size_t)g->size, hi = n * (size_t)(rank + 1) / (size_t)g->size;
    float inv = 1.0f / (float)g->size;
    for (size_t i = lo; i < hi; i++) {
        float s = 0;
        for (int r = 0; r < g->size; r++)
            s += t->bufs[r][i];
        s *= inv;
        for (int r = 0; r < g->size; r++)
            t->bufs[r][i] = s;
    }
    pthread_barrier_wait(&t->barrier);
}

static long threads_broadcast(cd_group_t *g, int rank, long v)
{
    threads *t = g->ctx;
    if (rank == 0)
        t->value = v;
    pthread_barrier_wait(&t->barrier);
    long out = t->value;
    pthread_barrier_wait(&t->barrier);
    return out;
}

static long threads_min(cd_group_t *g, int rank, long v)
{
    threads *t = g->ctx;
    t->values[rank] = v;
    pthread_barrier_wait(&t->barrier);
    long out = t->values[0];
    for (int r = 1; r < g->size; r++)
        out = t->values[r] < out ? t->values[r] : out;
    pthread_barrier_wait(&t->barrier);
    return out;
}

static void threads_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len)
{
    threads *t = g->ctx;
    if (rank == 0)
        t->bytes = buf;
    pthread_barrier_wait(&t->barrier);
    if (rank != 0)
        memcpy(buf, t->bytes, len);
    pthread_barrier_wait(&t->barrier);
}

/* The process is every rank: it ends at once, without the exit handlers that would tear
 * the runtime down under the other replicas' threads (perhaps inside an NCCL kernel
 * that will never finish). */
static void threads_abort(cd_group_t *g, int code)
{
    (void)g;
    _exit(code);
}

static void threads_free(cd_group_t *g)
{
    threads *t = g->ctx;
    pthread_barrier_destroy(&t->barrier);
    free(t->values);
    free(t->bufs);
    free(t);
    free(g);
}

static const cd_group_iface threads_iface = {
    .name = "threads",
    .allreduce_mean = threads_allreduce_mean,
    .broadcast = threads_broadcast,
    .min = threads_min,
    .broadcast_bytes = threads_broadcast_bytes,
    .abort = threads_abort,
    .free = threads_free,
};

cd_group_t *cd_group_new(int ranks)
{
    if (ranks < 1)
        return NULL;
    threads *t = cd_xcalloc(1, sizeof *t);
    t->bufs = cd_xcalloc((size_t)ranks, sizeof *t->bufs);
    t->values = cd_xcalloc((size_t)ranks, sizeof *t->values);
    if (pthread_barrier_init(&t->barrier, NULL, (unsigned)ranks) != 0) {
        free(t->values);
        free(t->bufs);
        free(t);
        return NULL;
    }
    cd_group_t *g = cd_xcalloc(1, sizeof *g);
    *g = (cd_group_t){.iface = &threads_iface, .size = ranks, .rank = -1, .local_rank = -1,
                      .local_size = ranks, .ctx = t};
    if (gethostname(g->host, sizeof g->host) != 0)
        snprintf(g->host, sizeof g->host, "localhost");
    g->host[sizeof g->host - 1] = 0;
    return g;
}
