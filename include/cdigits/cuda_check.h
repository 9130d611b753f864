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
 * One exception: while be is capturing a step (between graph_begin and graph_end,
 * see backend.h), nothing runs on the device and the capture can simply be thrown
 * away, so a failed CHECK does not abort. The first failure of the capture is kept
 * (later ones, often "capture invalidated" echoes of it, are not), no hook is called
 * and nothing is printed; the CHECK evaluates to the nonzero status and the op goes
 * on or returns, doing nothing harmful. graph_end then fails with be->err "the
 * captured step cannot be replayed (<that first failure>); run it without
 * capturing", and the caller runs the step eagerly. An op the rules forbid while
 * capturing (download, sync, alloc, ...) is refused the same way, with its name as
 * the failure. So every caller must be correct when a CHECK returns nonzero during a
 * capture: it may not use what the failed call was to produce (a count, a pointer,
 * a setting it caches), and it returns where going on would need it. Outside a
 * capture a CHECK evaluates to 0 or does not return.
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
/* cd_cuda_record, then the fail hook, a line on stderr and abort(). While be (a CUDA
 * backend or NULL) is capturing, it keeps the failure for graph_end instead and
 * returns status (nonzero); it never returns otherwise. */
int cd_cuda_fail(cd_backend_t *be, int lib, int status, const char *call, const char *func,
                 const char *file, int line);

/* A fatal failure that is not a library status (a shape the device cannot take, no
 * algorithm that fits): formatted like printf, then as cd_cuda_fail (so it returns
 * only while be is capturing, and the caller must then return without the result). */
void cd_cuda_fail_msg(cd_backend_t *be, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
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

/* 0 on success; on failure fatal, or (while capturing) the status, recorded. */
#define CD_DEVICE_CHECK_(be, lib, call) \
    cd_cuda_check_((be), (lib), (int)(call), #call, __func__, __FILE__, __LINE__)

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

static inline int cd_cuda_check_(cd_backend_t *be, int lib, int status, const char *call,
                                 const char *func, const char *file, int line)
{
    return status == 0 ? 0 : cd_cuda_fail(be, lib, status, call, func, file, line);
}

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
