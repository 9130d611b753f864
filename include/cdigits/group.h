/*
 * Data-parallel groups of replicas inside one process (threads), behind the backend's
 * allreduce_mean slot: the CPU equivalent of an NCCL communicator, so the data-parallel
 * training path runs and is tested on machines without GPUs.
 */
#ifndef CDIGITS_GROUP_H
#define CDIGITS_GROUP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_group cd_group_t;

cd_group_t *cd_group_new(int ranks);
void cd_group_free(cd_group_t *g);
int cd_group_size(const cd_group_t *g);

/* Every rank calls this with its own x of n floats (host memory); on return every x
 * holds the element-wise mean over the ranks, bit-identical on all of them (the sum
 * runs in rank order). A barrier for all ranks. */
void cd_group_allreduce_mean(cd_group_t *g, int rank, float *x, size_t n);
/* Rank 0's value of v, on every rank (a barrier). */
long cd_group_broadcast(cd_group_t *g, int rank, long v);

/* The smallest v of all ranks, on every rank (a barrier). */
long cd_group_min(cd_group_t *g, int rank, long v);

/* Rank 0's len bytes of buf, copied into every rank's buf (a barrier). */
void cd_group_broadcast_bytes(cd_group_t *g, int rank, void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
