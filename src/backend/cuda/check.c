/* Failure reports of device calls (see include/cdigits/cuda_check.h): recorded, then
 * fatal, or kept by the capture when the backend is capturing a step (graph.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "cuda_internal.h"

static _Thread_local char last_error[1024];
static cd_cuda_fail_hook fail_hook;

const char *cd_cuda_status_string(int lib, int status, char *buf, size_t len)
{
    switch (lib) {
    case CD_LIB_CUDA:
        snprintf(buf, len, "%s (%s, %d)", cudaGetErrorString((cudaError_t)status),
                 cudaGetErrorName((cudaError_t)status), status);
        break;
    case CD_LIB_CUDNN: {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        snprintf(buf, len, "%s (%d)%s%s", cudnnGetErrorString((cudnnStatus_t)status), status,
                 detail[0] ? ": " : "", detail);
        break;
    }
    case CD_LIB_CUBLAS:
        snprintf(buf, len, "%s (%s, %d)", cublasGetStatusString((cublasStatus_t)status),
                 cublasGetStatusName((cublasStatus_t)status), status);
        break;
    case CD_LIB_NCCL: {
        const char *detail = ncclGetLastError(NULL);
        snprintf(buf, len, "%s (%d)%s%s", ncclGetErrorString((ncclResult_t)status), status,
                 detail && detail[0] ? ": " : "", detail ? detail : "");
        break;
    }
    default:
        snprintf(buf, len, "status %d", status);
        break;
    }
    return buf;
}

/* Formats the failure into the thread's buffer and be->err; with brief (not NULL) also
 * a short form for a capture to keep: the call's name without its arguments, so the
 * cause still fits in be->err once graph_end has wrapped it. The library's status text
 * is read once (cuDNN and NCCL keep a detail string per thread). */
static void format_failure(cd_backend_t *be, int lib, int status, const char *call,
                           const char *func, const char *file, int line, char *brief,
                           size_t brief_len)
{
    char what[512];
    cd_cuda_status_string(lib, status, what, sizeof what);
    if (lib == CD_LIB_CUDA)
        cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    const char *base = strstr(file, "src/");
    if (!base)
        base = strstr(file, "kernels/");
    if (!base)
        base = file;
    snprintf(last_error, sizeof last_error, "%s failed: %s in %s at %s:%d", call, what, func,
             base, line);
    if (be)
        snprintf(be->err, sizeof be->err, "%.*s", (int)sizeof be->err - 1, last_error);
    if (brief) {
        const char *paren = strchr(call, '(');
        int name_len = paren ? (int)(paren - call) : (int)strlen(call);
        snprintf(brief, brief_len, "%.*s failed: %s in %s at %s:%d", name_len, call, what, func,
                 base, line);
    }
}

int cd_cuda_record(cd_backend_t *be, int lib, int status, const char *call, const char *func,
                   const char *file, int line)
{
    format_failure(be, lib, status, call, func, file, line, NULL, 0);
    return status;
}

static void die(cd_backend_t *be) __attribute__((noreturn));

int cd_cuda_fail(cd_backend_t *be, int lib, int status, const char *call, const char *func,
                 const char *file, int line)
{
    char brief[512];
    format_failure(be, lib, status, call, func, file, line, brief, sizeof brief);
    if (cuda_capture_keep(be, brief))
        return status;
    die(be);
}

void cd_cuda_fail_msg(cd_backend_t *be, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (be)
        snprintf(be->err, sizeof be->err, "%.*s", (int)sizeof be->err - 1, last_error);
    if (cuda_capture_keep(be, last_error))
        return;
    die(be);
}

static void die(cd_backend_t *be)
{
    if (fail_hook)
        fail_hook(be, last_error);
    if (be)
        fprintf(stderr, "cdigits-worker: GPU %d: %s\n", be->device, last_error);
    else
        fprintf(stderr, "cdigits-worker: CUDA: %s\n", last_error);
    fflush(stderr);
    abort();
}

const char *cd_cuda_last_error(void) { return last_error; }

cd_cuda_fail_hook cd_cuda_set_fail_hook(cd_cuda_fail_hook hook)
{
    cd_cuda_fail_hook old = fail_hook;
    fail_hook = hook;
    return old;
}
