/* In-process data-parallel groups: a barrier and a rank-ordered reduction. */
#include "cdigits/group.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

struct cd_group {
    int ranks;
    pthread_barrier_t barrier;
    float **bufs;   /* each rank's buffer for the reduction under way */
    long value;     /* broadcast slot */
    long *values;   /* each rank's value (cd_group_min) */
    const void *bytes;
};

cd_group_t *cd_group_new(int ranks)
{
    cd_group_t *g = cd_xcalloc(1, sizeof *g);
    g->ranks = ranks;
    g->bufs = cd_xcalloc((size_t)ranks, sizeof *g->bufs);
    g->values = cd_xcalloc((size_t)ranks, sizeof *g->values);
    if (pthread_barrier_init(&g->barrier, NULL, (unsigned)ranks) != 0) {
        free(g->values);
        free(g->bufs);
        free(g);
        return NULL;
    }
    return g;
}

void cd_group_free(cd_group_t *g)
{
    if (!g)
        return;
    pthread_barrier_destroy(&g->barrier);
    free(g->values);
    free(g->bufs);
    free(g);
}

int cd_group_size(const cd_group_t *g) { return g->ranks; }

void cd_group_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n)
{
    g->bufs[rank] = x;
    pthread_barrier_wait(&g->barrier);
    /* rank r reduces its slice of every buffer and writes the mean to all of them */
    size_t lo = n * (size_t)rank / (size_t)g->ranks, hi = n * (size_t)(rank + 1) / (size_t)g->ranks;
    float inv = 1.0f / (float)g->ranks;
    for (size_t i = lo; i < hi; i++) {
        float s = 0;
        for (int r = 0; r < g->ranks; r++)
            s += g->bufs[r][i];
        s *= inv;
        for (int r = 0; r < g->ranks; r++)
            g->bufs[r][i] = s;
    }
    pthread_barrier_wait(&g->barrier);
}

long cd_group_broadcast(cd_group_t *g, int rank, long v)
{
    if (rank == 0)
        g->value = v;
    pthread_barrier_wait(&g->barrier);
    long out = g->value;
    pthread_barrier_wait(&g->barrier);
    return out;
}

long cd_group_min(cd_group_t *g, int rank, long v)
{
    g->values[rank] = v;
    pthread_barrier_wait(&g->barrier);
    long out = g->values[0];
    for (int r = 1; r < g->ranks; r++)
        out = g->values[r] < out ? g->values[r] : out;
    pthread_barrier_wait(&g->barrier);
    return out;
}

void cd_group_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len)
{
    if (rank == 0)
        g->bytes = buf;
    pthread_barrier_wait(&g->barrier);
    if (rank != 0)
        memcpy(buf, g->bytes, len);
    pthread_barrier_wait(&g->barrier);
}
