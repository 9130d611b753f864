/*
 * The group of processes (group.h) under MPI: one rank per process, started by mpirun
 * or srun. Built as cd_mpi and linked into cdigits-worker alone; a build without MPI
 * has the same calls, which say so (src/mpi/mpi_none.c).
 */
#ifndef CDIGITS_MPI_GROUP_H
#define CDIGITS_MPI_GROUP_H

#include <stddef.h>

#include "cdigits/group.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many ranks the launcher started, read from the environment alone (no MPI call):
 * OMPI_COMM_WORLD_SIZE (mpirun), PMI_SIZE (srun --mpi=pmi2), SLURM_STEP_NUM_TASKS with
 * PMIX_RANK (srun --mpi=pmix); 1 when this process was not started as one of several
 * ranks. */
int cd_mpi_launched_ranks(void);

/* MPI_Init and the group of every rank (MPI_COMM_WORLD), or NULL with the reason in
 * err. cd_group_free finalizes MPI. Once per process. */
cd_group_t *cd_mpi_group_new(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
