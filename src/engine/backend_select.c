/* The choice of backend for a worker task (see backend_select.h). */
#include "cdigits/backend_select.h"

#include <stdio.h>

#include "cdigits/util.h"

/* The CUDA backend on req->gpu, or NULL with why it is not usable in why. */
static cd_backend_t *gpu_backend(const cd_backend_request *req, char *why, size_t whylen)
{
    if (cd_backend_cuda_device_count() <= 0) {
        snprintf(why, whylen, "no usable GPU on this machine");
        return NULL;
    }
    char reason[256] = "";
    cd_backend_t *be = cd_backend_cuda_new(req->gpu, reason, sizeof reason);
    if (!be)
        snprintf(why, whylen, "GPU %d is not usable (%s)", req->gpu, reason[0] ? reason : "no reason given");
    return be;
}

int cd_backend_gpu_count(void)
{
    return cd_backend_cuda_device_count();
}

cd_backend_t *cd_backend_select(const cd_backend_request *req, char *err, size_t errlen)
{
    if (req->kind != CD_BACKEND_CPU) {
        char why[512];
        cd_backend_t *be = gpu_backend(req, why, sizeof why);
        if (be)
            return be;
        if (req->kind == CD_BACKEND_CUDA) {
            snprintf(err, errlen, "%s", why);
            return NULL;
        }
        char line[640];
        snprintf(line, sizeof line, "%s; %s on the CPU", why, req->task ? req->task : "running");
        if (req->note)
            req->note(line);
        else
            cd_info("%s", line);
    }
    cd_backend_t *be = cd_backend_cpu_new(req->threads);
    if (!be) {
        snprintf(err, errlen, "cannot start the CPU backend");
        return NULL;
    }
    if (req->cpu_memory > 0)
        cd_backend_cpu_limit_memory(be, req->cpu_memory);
    return be;
}
