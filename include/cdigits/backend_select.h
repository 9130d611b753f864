/* Which backend a worker task runs on: the one choice of GPU or CPU that training,
 * classify and serve-model make, with the one log line when a GPU was wanted but the
 * task runs on the CPU. It calls only the backends' public constructors (backend.h). */
#ifndef CDIGITS_BACKEND_SELECT_H
#define CDIGITS_BACKEND_SELECT_H

#include <stddef.h>

#include "cdigits/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of train.json's "backend" (cd_train_config.backend). */
enum cd_backend_kind {
    CD_BACKEND_AUTO = 0, /* GPU `gpu` when it is usable, else the CPU (and the log line) */
    CD_BACKEND_CPU = 1,
    CD_BACKEND_CUDA = 2, /* GPU `gpu` or nothing */
};

typedef struct cd_backend_request {
    int kind;          /* enum cd_backend_kind */
    int gpu;           /* the CUDA device of AUTO and CUDA */
    int threads;       /* CPU backend threads; <= 0: every core */
    size_t cpu_memory; /* > 0: the CPU backend allocates at most this many bytes
                        * (cd_backend_cpu_limit_memory) */
    const char *task;  /* what runs, for the log line: "training", "classifying" */
    /* where the log line goes (its text without a newline); NULL: cd_info */
    void (*note)(const char *line);
} cd_backend_request;

/*
 * The backend a request asks for, owned by the caller (cd_backend_free). When AUTO
 * cannot have its GPU (none on this machine, or the device fails to start) the CPU
 * backend is returned and one line goes to note: "GPU 1 is not usable (why); training
 * on the CPU", or "no usable GPU on this machine; training on the CPU". NULL when CUDA
 * cannot have its GPU or the CPU backend does not start; err then holds the reason
 * alone, a clause a caller can put after "but": "no usable GPU on this machine",
 * "GPU 1 is not usable (why)", "cannot start the CPU backend".
 */
cd_backend_t *cd_backend_select(const cd_backend_request *req, char *err, size_t errlen);

/* How many GPUs a CUDA request could have on this machine (0 where CUDA is not built or
 * no device answers): how many replicas on GPUs a job can run. */
int cd_backend_gpu_count(void);

#ifdef __cplusplus
}
#endif
#endif
