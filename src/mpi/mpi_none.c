/* cd_mpi of a build without MPI: a worker started as one of several ranks says what to
 * install instead of training alone N times. */
#include <stdio.h>

#include "cdigits/mpi_group.h"

cd_group_t *cd_mpi_group_new(char *err, size_t errlen)
{
    snprintf(err, errlen, "this cdigits-worker was built without MPI, so it cannot train as one of "
             "several ranks; install an MPI (Debian: libopenmpi-dev), configure and build again, or "
             "start one worker without mpirun/srun");
    return NULL;
}
