/*
 * The CUDA backend under ctest. Everywhere: the entry points answer without a GPU or a
 * driver (no device is 0 devices, creating a backend fails with a reason), and the
 * checking macros record the call, function, file and line of a failed call. Where a
 * GPU is present it also runs every op against the CPU backend (tests/gpu/test_gpu_ops.c);
 * where none is, it says SKIP for that part and runs the same harness with a second
 * CPU backend in the GPU's place, so the harness itself is kept working.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "testutil.h"

#ifdef CDIGITS_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cdigits/cuda_check.h"
#define CD_GPU_OPS_NO_MAIN
#include "../gpu/test_gpu_ops.c"

static int hook_calls;
static void hook(cd_backend_t *be, const char *msg)
{
    (void)be;
    (void)msg;
    hook_calls++;
}
#endif

int main(void)
{
    cd_test_init("test_cuda_ops");
    char why[256] = "";
    int count = cd_backend_cuda_device_count();
    CHECK(count >= 0, "device count %d", count);

    if (!cd_backend_cuda_compiled()) {
        CHECK(count == 0, "a build without CUDA reports %d devices", count);
        cd_backend_t *be = cd_backend_cuda_new(0, why, sizeof why);
        CHECK(be == NULL, "a build without CUDA made a CUDA backend");
        CHECK(strstr(why, "CUDA") != NULL, "reason: '%s'", why);
        printf("SKIP: this build has no CUDA backend\n");
        return cd_test_finish();
    }

#ifdef CDIGITS_HAVE_CUDA
    /* a device that does not exist: NULL and a reason, never a crash */
    cd_backend_t *be = cd_backend_cuda_new(count + 3, why, sizeof why);
    CHECK(be == NULL, "made a backend on GPU %d of %d", count + 3, count);
    CHECK(why[0] != 0, "no reason given for GPU %d", count + 3);
    printf("test_cuda_ops: GPU %d: %s\n", count + 3, why);
    if (count == 0) {
        be = cd_backend_cuda_new(0, why, sizeof why);
        CHECK(be == NULL, "made a backend with no GPU");
        CHECK(strstr(why, "GPU") != NULL, "reason: '%s'", why);
        be = cd_backend_cuda_new(0, NULL, 0);
        CHECK(be == NULL, "made a backend with no GPU (no reason buffer)");
    }

    /* the TRY macro records the call text, function, file and line */
    int rc = CD_CUDA_TRY(NULL, cudaSetDevice(-5));
    const char *msg = cd_cuda_last_error();
    CHECK(rc != 0, "cudaSetDevice(-5) succeeded");
    CHECK(strstr(msg, "cudaSetDevice(-5) failed") != NULL, "message: '%s'", msg);
    CHECK(strstr(msg, "in main at ") != NULL, "message: '%s'", msg);
    CHECK(strstr(msg, "test_cuda_ops.c:") != NULL, "message: '%s'", msg);
    CHECK(strstr(msg, "cudaError") != NULL, "message names no error: '%s'", msg);
    /* after a recorded failure the runtime starts clean for the next call */
    CHECK(cd_backend_cuda_device_count() == count, "count changed after a failure");

    char buf[256];
    cd_cuda_status_string(CD_LIB_CUBLAS, 1, buf, sizeof buf);
    CHECK(strstr(buf, "CUBLAS_STATUS_NOT_INITIALIZED") != NULL, "cuBLAS status 1: '%s'", buf);
    cd_cuda_status_string(CD_LIB_CUDA, 2, buf, sizeof buf);
    CHECK(strstr(buf, "cudaErrorMemoryAllocation") != NULL, "CUDA status 2: '%s'", buf);
    CHECK(cd_cuda_set_fail_hook(hook) == NULL, "a fail hook was set before");
    CHECK(cd_cuda_set_fail_hook(NULL) == hook, "the fail hook did not stick");
    CHECK(hook_calls == 0, "the hook ran without a failure");

    if (count > 0) {
        int failed = go_run_all();
        CHECK(failed == 0, "%d op comparisons failed (table above)", failed);
    } else {
        /* the comparison harness still runs, a CPU backend standing in for the GPU, so
         * it works the day a GPU machine runs it */
        setenv("CD_GPU_OPS_SELF", "1", 1);
        int failed = go_run_all();
        CHECK(failed == 0, "%d harness rows failed with CPU against CPU (table above)", failed);
        /* a device error inside one test is one failed row naming it, and the run goes
         * on to the last test */
        int rows = go_nrows;
        char last[sizeof go_rows[0].op];
        snprintf(last, sizeof last, "%s", rows ? go_rows[rows - 1].op : "");
        setenv("CD_GPU_OPS_FAIL_IN", "go_test_softmax(4, 1000, 1)", 1);
        failed = go_run_all();
        unsetenv("CD_GPU_OPS_FAIL_IN");
        CHECK(failed == 1, "an injected device error gave %d failed rows, not 1", failed);
        int named = 0;
        for (int i = 0; i < go_nrows; i++)
            named += strcmp(go_rows[i].op, "device error in") == 0 &&
                     strstr(go_rows[i].shape, "go_test_softmax(4, 1000, 1)") != NULL;
        CHECK(named == 1, "no row names the test with the injected error");
        /* (the error row stands for softmax's forward and backward rows) */
        CHECK(go_nrows == rows - 1 && strcmp(go_rows[go_nrows - 1].op, last) == 0,
              "after the injected error the run did not go on to the end (%d rows, then %d)",
              rows, go_nrows);
        printf("SKIP: no GPU: the CUDA comparisons need one (tests/gpu/run.sh on a GPU "
               "machine); the harness ran CPU against CPU\n");
    }
#endif
    return cd_test_finish();
}
