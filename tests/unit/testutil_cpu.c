/* The main shared by tests that run on the CPU backend (declared in testutil.h). Its own
 * object in cd_testutil, so that only the tests that call it link the engine. */
#include "testutil.h"

#include "cdigits/backend.h"

int cd_test_main_cpu(const char *name, int threads, cd_backend_t **be, void (*const tests[])(void),
                     size_t n)
{
    cd_test_init(name);
    *be = cd_backend_cpu_new(threads);
    CHECK(*be != NULL, "%s: cd_backend_cpu_new(%d) made no CPU backend", name, threads);
    if (!*be)
        return cd_test_finish();
    for (size_t i = 0; i < n; i++)
        tests[i]();
    cd_backend_free(*be);
    *be = NULL;
    return cd_test_finish();
}
