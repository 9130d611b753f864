/*
 * Checking device calls: every CUDA runtime, cuDNN, cuBLAS and NCCL call of the CUDA
 * backend goes through one of these macros, which record the call's text, the
 * function, file and line when it fails.
 *
 *   CD_CUDA_CHECK(be, cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
 *
 * A failed CHECK is fatal: the message ("cudaMemcpyAsync(dst, src, n, ...) failed:
 * an illegal memory access was encountered (cudaErrorIllegalAddress, 700) in
 * cuda_copy at src/backend/cuda/memory.c:61") goes to be->err and to the thread's
 * last-error buffer, the fail hook (if one is set) is called so the engine can add
 * the layer it was running, then the message is printed to stderr and the process
 * aborts. Only the worker runs device code, and it is allowed to abort after saying
 * why.
 *
 * A TRY records the same message but returns the status instead (nonzero on failure),
 * for paths that report errors to their caller: creating a backend, allocating
 * memory, joining a data-parallel group.
 *
 * Every library's success status is 0, so the macros need none of the CUDA headers;
 * check.c turns a status into its name and text.
 */
#ifndef CDIGITS_CUDA_CHECK_H
#define CDIGITS_CUDA_CHECK_H

#include "cdigits/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

enum cd_cuda_lib { CD_LIB_CUDA = 0, CD_LIB_CUDNN, CD_LIB_CUBLAS, CD_LIB_NCCL };

/* Formats the failure of `call` into be->err (be may be NULL) and the thread's
 * last-error buffer; returns status. */
int cd_cuda_record(cd_backend_t *be, int lib, int status, const char *call, const char *func,
                   const char *file, int line);
/* cd_cuda_record, then the fail hook, a line on stderr and abort(). */
void cd_cuda_fail(cd_backend_t *be, int lib, int status, const char *call, const char *func,
                  const char *file, int line)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((noreturn))
#endif
    ;

/* A fatal failure that is not a library status (a shape the device cannot take, no
 * algorithm that fits): formatted like printf, then as cd_cuda_fail. */
void cd_cuda_fail_msg(cd_backend_t *be, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((noreturn, format(printf, 2, 3)))
#endif
    ;

/* The thread's last recorded device error ("" when none). */
const char *cd_cuda_last_error(void);

/* "cudaErrorMemoryAllocation: out of memory" and the like, for any library's status. */
const char *cd_cuda_status_string(int lib, int status, char *buf, size_t len);

/* Called with the message before a fatal failure aborts (the engine adds the layer it
 * was running, writes its error line and may exit instead of returning). NULL
 * restores the default (print and abort). Returns the previous hook. */
typedef void (*cd_cuda_fail_hook)(cd_backend_t *be, const char *message);
cd_cuda_fail_hook cd_cuda_set_fail_hook(cd_cuda_fail_hook hook);

#define CD_DEVICE_CHECK_(be, lib, call)                                                    \
    do {                                                                                   \
        int cd_status_ = (int)(call);                                                      \
        if (cd_status_ != 0)                                                               \
            cd_cuda_fail((be), (lib), cd_status_, #call, __func__, __FILE__, __LINE__);    \
    } while (0)

#define CD_CUDA_CHECK(be, call) CD_DEVICE_CHECK_(be, CD_LIB_CUDA, call)
#define CD_CUDNN_CHECK(be, call) CD_DEVICE_CHECK_(be, CD_LIB_CUDNN, call)
#define CD_CUBLAS_CHECK(be, call) CD_DEVICE_CHECK_(be, CD_LIB_CUBLAS, call)
#define CD_NCCL_CHECK(be, call) CD_DEVICE_CHECK_(be, CD_LIB_NCCL, call)

/* Nonzero (the status) on failure, with the message recorded. */
#define CD_DEVICE_TRY_(be, lib, call) \
    cd_cuda_try_((be), (lib), (int)(call), #call, __func__, __FILE__, __LINE__)
#define CD_CUDA_TRY(be, call) CD_DEVICE_TRY_(be, CD_LIB_CUDA, call)
#define CD_CUDNN_TRY(be, call) CD_DEVICE_TRY_(be, CD_LIB_CUDNN, call)
#define CD_CUBLAS_TRY(be, call) CD_DEVICE_TRY_(be, CD_LIB_CUBLAS, call)
#define CD_NCCL_TRY(be, call) CD_DEVICE_TRY_(be, CD_LIB_NCCL, call)

static inline int cd_cuda_try_(cd_backend_t *be, int lib, int status, const char *call,
                               const char *func, const char *file, int line)
{
    return status == 0 ? 0 : cd_cuda_record(be, lib, status, call, func, file, line);
}

/*
 * Data-parallel groups over NCCL (one process per GPU rank). Rank 0 makes an id with
 * cd_cuda_group_id and hands it to every rank (the scheduler passes it in each rank's
 * config); each rank then calls cd_cuda_group_join with its backend. After that the
 * backend's allreduce_mean averages across the group; before it, allreduce_mean is the
 * identity (a group of one). Both return CD_OK (0) or -1 with a reason in why.
 */
#define CD_CUDA_GROUP_ID_HEX 257 /* 128 bytes as hex, and the terminator */
int cd_cuda_group_id(char *hex, size_t hex_len, char *why, size_t why_len);
int cd_cuda_group_join(cd_backend_t *be, const char *hex, int nranks, int rank, char *why,
                       size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
