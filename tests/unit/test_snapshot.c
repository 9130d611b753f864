/* Weights snapshots between networks: a round trip is exact; a tensor of another shape
 * but the same number of values (an InnerProduct of 6 -> 5 against one of 5 -> 6) is
 * not taken: skipped when loading what matches (fine-tuning), an error naming the
 * parameter otherwise; and a snapshot of a network is refused for another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

static cd_backend_t *g_be;

/* Input of `in` values -> InnerProduct "ip" of `out` -> InnerProduct "top" of 3 */
static cd_net *make_net(int in, int out, uint64_t seed, cd_pt_node **tree)
{
    char text[1024], err[1024] = "";
    snprintf(text, sizeof text,
             "name: \"snap\"\n"
             "layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: %d } } }\n"
             "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
             "  inner_product_param { num_output: %d weight_filler { type: \"gaussian\" std: 1 } } }\n"
             "layer { name: \"top\" type: \"InnerProduct\" bottom: \"ip\" top: \"top\"\n"
             "  inner_product_param { num_output: 3 weight_filler { type: \"gaussian\" std: 1 } } }\n",
             in, out);
    cd_net_opts opts = {.stage = "deploy", .seed = seed};
    cd_net *net = NULL;
    *tree = cd_pt_parse(text, strlen(text), "snap", err, sizeof err);
    int ok = *tree && cd_pt_validate(*tree, &cd_pt_net_parameter, "snap", err, sizeof err) == CD_OK;
    if (ok) {
        net = cd_net_build(*tree, "snap", &opts, err, sizeof err);
        ok = net && cd_net_alloc(net, g_be, NULL, err, sizeof err) == CD_OK;
    }
    CHECK(ok, "the test net (%d -> %d) does not build: %s", in, out, err);
    return ok ? net : NULL;
}

static void free_net(cd_net *net, cd_pt_node *tree)
{
    cd_net_free(net);
    cd_pt_free(tree);
}

int main(void)
{
    cd_test_init("test_snapshot");
    g_be = cd_backend_cpu_new(1);
    char dir[] = "/tmp/cdigits-test-snapshot-XXXXXX", path[128], err[1024];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/a.cdw", dir);
    cd_pt_node *ta, *tb, *tc;
    cd_net *a = make_net(6, 5, 1, &ta), *b = make_net(6, 5, 2, &tb), *c = make_net(5, 6, 3, &tc);
    if (!a || !b || !c)
        return cd_test_finish();
    CHECK(cd_snapshot_save_weights(a, path, err, sizeof err) == CD_OK, "save: %s", err);

    /* the same network: every tensor, exactly */
    int loaded = -1;
    CHECK(cd_snapshot_load_weights(b, path, 0, &loaded, err, sizeof err) == CD_OK && loaded == a->nparams,
          "round trip: %d of %d tensors (%s)", loaded, a->nparams, err);
    CHECK(memcmp(a->arena_data, b->arena_data, a->param_count * sizeof(float)) == 0,
          "round trip: the weights are the same bit for bit");

    /* ip is 5x6 in the file and 6x5 in c: the same 30 values in another shape */
    float before = c->params[0]->data[0];
    loaded = -1;
    err[0] = 0;
    CHECK(cd_snapshot_load_weights(c, path, 1, &loaded, err, sizeof err) == CD_OK, "partial: %s", err);
    /* of ip/0 (5x6 vs 6x5), ip/1 (5 vs 6), top/0 (3x5 vs 3x6), top/1 (3 and 3): top/1 */
    CHECK(loaded == 1 && c->params[0]->data[0] == before && c->params[3]->data[0] == a->params[3]->data[0],
          "partial: only top/1 is taken, no tensor of another shape (%d taken)", loaded);
    err[0] = 0;
    CHECK(cd_snapshot_load_weights(c, path, 0, NULL, err, sizeof err) == CD_ERR &&
              strstr(err, "ip/0") && strstr(err, "another shape"),
          "whole: a tensor of another shape is an error naming it: %s", err);

    free_net(a, ta);
    free_net(b, tb);
    free_net(c, tc);
    unlink(path);
    rmdir(dir);
    cd_backend_free(g_be);
    return cd_test_finish();
}
