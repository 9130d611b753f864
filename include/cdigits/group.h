/*
 * Data-parallel groups of ranks: the collectives the training loop and the CPU backend's
 * allreduce_mean slot use between replicas, behind one table of functions with two
 * implementations:
 *
 *   threads  the replicas of one process (cd_group_new, src/common/group.c): a barrier
 *            and a rank-ordered reduction in shared memory, the CPU equivalent of an
 *            NCCL communicator, so the data-parallel path runs on machines without GPUs;
 *   mpi      one rank per process, started by mpirun or srun (cd_mpi_group_new,
 *            src/mpi/, linked into cdigits-worker alone).
 *
 * Every call is collective: each rank of the group makes it, in the same order. The
 * `rank` argument is the caller's rank: a thread says which replica it is; in a group
 * of processes it must be the process's own (cd_group_rank).
 */
#ifndef CDIGITS_GROUP_H
#define CDIGITS_GROUP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_group cd_group_t;

/* One implementation's slots; all are required. */
typedef struct cd_group_iface {
    const char *name; /* "threads", "mpi" */
    void (*allreduce_mean)(cd_group_t *g, int rank, float *x, size_t n);
    long (*broadcast)(cd_group_t *g, int rank, long v);
    long (*min)(cd_group_t *g, int rank, long v);
    void (*broadcast_bytes)(cd_group_t *g, int rank, void *buf, size_t len);
    /* Ends every rank of the group with exit status code, at once (no exit handlers,
     * no collective waited for). Never returns. */
    void (*abort)(cd_group_t *g, int code);
    void (*free)(cd_group_t *g);
} cd_group_iface;

struct cd_group {
    const cd_group_iface *iface;
    int size;       /* ranks in the group */
    int rank;       /* this process's rank in a group of processes; -1: threads (each
                     * call names its replica) */
    int local_rank; /* among the ranks on this host (threads: -1, as rank) */
    int local_size; /* ranks on this host (threads: size) */
    char host[64];  /* this host's name */
    void *ctx;      /* the implementation's */
};

/* A group of `ranks` threads of this process, or NULL when it cannot be made. */
cd_group_t *cd_group_new(int ranks);
/* Frees any group (a group of processes finalizes MPI); accepts NULL. */
void cd_group_free(cd_group_t *g);
int cd_group_size(const cd_group_t *g);
/* This process's rank in a group of processes; -1 in a group of threads. */
int cd_group_rank(const cd_group_t *g);

/* Every rank calls this with its own x of n floats (host memory); on return every x
 * holds the element-wise mean over the ranks, bit-identical on all of them and in
 * every implementation: each element is summed in rank order, from 0.0f, then
 * multiplied by 1.0f / size. A barrier for all ranks. */
void cd_group_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n);
/* Rank 0's value of v, on every rank (a barrier). */
long cd_group_broadcast(cd_group_t *g, int rank, long v);

/* The smallest v of all ranks, on every rank (a barrier). */
long cd_group_min(cd_group_t *g, int rank, long v);

/* Rank 0's len bytes of buf, copied into every rank's buf (a barrier). */
void cd_group_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len);

/* Flushes stdout and stderr, then ends every rank with status code (see the slot). */
_Noreturn void cd_group_abort(cd_group_t *g, int code);

#ifdef __cplusplus
}
#endif
#endif
