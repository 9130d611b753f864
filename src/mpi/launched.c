/* Whether the launcher started this process as one of several ranks: the environment
 * each launcher sets, read before anything calls MPI. */
#include <stdlib.h>
#include <string.h>

#include "cdigits/mpi_group.h"
#include "cdigits/util.h"

/* The variables that give the number of ranks, with the one that must come with it
 * (SLURM_STEP_NUM_TASKS is set in every srun step; only PMIx's says MPI can start). */
static const struct {
    const char *size, *with;
} g_launchers[] = {
    {"OMPI_COMM_WORLD_SIZE", NULL},     /* mpirun (Open MPI) */
    {"PMI_SIZE", NULL},                 /* srun --mpi=pmi2, MPICH's launchers */
    {"SLURM_STEP_NUM_TASKS", "PMIX_RANK"}, /* srun --mpi=pmix */
};

int cd_mpi_launched_ranks(void)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_launchers); i++) {
        const char *v = getenv(g_launchers[i].size);
        if (!v || (g_launchers[i].with && !getenv(g_launchers[i].with)))
            continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (end != v && *end == 0 && n > 1 && n < 1L << 30)
            return (int)n;
    }
    return 1;
}
