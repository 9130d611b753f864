/* The helpers of testutil.h that need the engine: the main shared by tests that run on
 * the CPU backend, networks built from text or from a job folder, snapshots. Their own
 * object in cd_testutil, so that only the tests that call them link the engine. */
#include "testutil.h"

#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

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

cd_net *cd_test_build_net(cd_backend_t *be, const char *text, const char *name, const cd_net_opts *opts,
                          cd_pt_node **tree)
{
    char err[1024] = "";
    cd_net *net = NULL;
    *tree = cd_pt_parse(text, strlen(text), name, err, sizeof err);
    int ok = *tree && cd_pt_validate(*tree, &cd_pt_net_parameter, name, err, sizeof err) == CD_OK;
    if (ok) {
        net = cd_net_build(*tree, name, opts, err, sizeof err);
        ok = net && cd_net_alloc(net, be, NULL, err, sizeof err) == CD_OK;
    }
    CHECK(ok, "the test net %s does not build: %s", name, err);
    if (ok)
        return net;
    cd_net_free(net);
    cd_pt_free(*tree);
    *tree = NULL;
    return NULL;
}

cd_net *cd_test_job_net(cd_backend_t *be, const char *dir, const cd_net_opts *opts)
{
    char err[1024] = "", path[4200];
    snprintf(path, sizeof path, "%s/network.prototxt", dir);
    cd_net *net = cd_net_load(path, opts, err, sizeof err);
    int ok = net && cd_net_alloc(net, be, NULL, err, sizeof err) == CD_OK;
    CHECK(ok, "the network of job %s does not build: %s", dir, err);
    if (ok)
        return net;
    cd_net_free(net);
    return NULL;
}

void cd_test_save_snapshot(const cd_net *net, const char *dir, long iter)
{
    char err[1024] = "", path[4200];
    snprintf(path, sizeof path, "%s/snapshot_iter_%ld.cdw", dir, iter);
    CHECK(net && cd_snapshot_save_weights(net, path, err, sizeof err) == CD_OK, "save %s: %s", path,
          net ? err : "no network");
}
