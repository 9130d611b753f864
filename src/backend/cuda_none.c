/* The CUDA entry points when the CUDA backend is not compiled in. */
#include <stdio.h>
#include "cdigits/backend.h"

cd_backend_t *cd_backend_cuda_new(int device, char *why, size_t why_len)
{
    (void)device;
    if (why && why_len)
        snprintf(why, why_len, "this build has no CUDA backend (configure with -DCDIGITS_CUDA=ON "
                               "on a machine with CUDA, cuDNN and NCCL)");
    return NULL;
}

int cd_backend_cuda_device_count(void) { return 0; }
int cd_backend_cuda_compiled(void) { return 0; }
