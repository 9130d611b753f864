/* Weights snapshots between networks: a round trip is exact; a tensor of another shape
 * but the same number of values (an InnerProduct of 6 -> 5 against one of 5 -> 6) is
 * not taken: skipped when loading what matches (fine-tuning), an error naming the
 * parameter otherwise; a snapshot of a network is refused for another; and a shared weight
 * is stored once under its owner's name and loads back into both layers. */
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
    char text[1024];
    snprintf(text, sizeof text,
             "name: \"snap\"\n"
             "layer { name: \"in\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: %d } } }\n"
             "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
             "  inner_product_param { num_output: %d weight_filler { type: \"gaussian\" std: 1 } } }\n"
             "layer { name: \"top\" type: \"InnerProduct\" bottom: \"ip\" top: \"top\"\n"
             "  inner_product_param { num_output: 3 weight_filler { type: \"gaussian\" std: 1 } } }\n",
             in, out);
    cd_net_opts opts = {.stage = "deploy", .seed = seed};
    char name[64];
    snprintf(name, sizeof name, "snap (%d -> %d)", in, out);
    return cd_test_build_net(g_be, text, name, &opts, tree);
}

static void free_net(cd_net *net, cd_pt_node *tree)
{
    cd_net_free(net);
    cd_pt_free(tree);
}

/* Two InnerProducts sharing their weight (param { name: "w" }): ip_a owns it. */
static cd_net *make_shared_net(uint64_t seed, cd_pt_node **tree)
{
    static const char text[] =
        "name: \"snap-shared\"\n"
        "layer { name: \"in\" type: \"Input\" top: \"a\" top: \"b\"\n"
        "  input_param { shape { dim: 2 dim: 6 } shape { dim: 2 dim: 6 } } }\n"
        "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\" param { name: \"w\" }\n"
        "  inner_product_param { num_output: 5 weight_filler { type: \"gaussian\" std: 1 } } }\n"
        "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"b\" top: \"fb\" param { name: \"w\" }\n"
        "  inner_product_param { num_output: 5 weight_filler { type: \"gaussian\" std: 1 } } }\n";
    cd_net_opts opts = {.stage = "deploy", .seed = seed};
    return cd_test_build_net(g_be, text, "snap-shared", &opts, tree);
}

/* occurrences of the string s in the file's n bytes */
static int count_in(const char *data, size_t n, const char *s)
{
    int found = 0;
    size_t len = strlen(s);
    for (size_t i = 0; i + len <= n; i++)
        found += !memcmp(data + i, s, len);
    return found;
}

static float *download_param(const cd_net *net, const cd_param *p)
{
    float *h = malloc(p->count * sizeof *h);
    net->be->iface->download(net->be, h, p->data, p->count * sizeof *h);
    return h;
}

/* The shared weight is stored once, under its owner's name (ip_a/0), with its solver
 * state once too, and loads back into both layers of a fresh net. */
static void test_shared(const char *dir)
{
    char path[160], spath[160], err[1024] = "";
    snprintf(path, sizeof path, "%s/shared.cdw", dir);
    snprintf(spath, sizeof spath, "%s/shared.cds", dir);
    cd_pt_node *ta, *tb;
    cd_net *a = make_shared_net(cd_test_rand_u64(), &ta), *b = make_shared_net(cd_test_rand_u64(), &tb);
    if (!a || !b) {
        free_net(a, ta);
        free_net(b, tb);
        return;
    }
    cd_param *w = cd_net_layer(a, "ip_a")->params[0];
    CHECK(a->nparams == 3 && cd_net_layer(a, "ip_b")->params[0] == w && !strcmp(w->name, "ip_a/0"),
          "the net holds the shared weight once as ip_a/0 (%d tensors, want 3; weight %s)", a->nparams,
          w->name);
    /* fresh values, different from anything the fillers of b drew */
    float *v = malloc(w->count * sizeof *v);
    for (size_t i = 0; i < w->count; i++)
        v[i] = (float)cd_test_uniform(-3, 3);
    g_be->iface->upload(g_be, w->data, v, w->count * sizeof *v);
    g_be->iface->upload(g_be, w->h1, v, w->count * sizeof *v);
    CHECK(cd_snapshot_save_weights(a, path, err, sizeof err) == CD_OK, "shared: save: %s", err);
    CHECK(cd_snapshot_save_state(a, 7, spath, err, sizeof err) == CD_OK, "shared: save state: %s", err);

    size_t len = 0;
    char *file = cd_read_file(path, &len);
    uint32_t stored = 0;
    if (file && len >= 12)
        memcpy(&stored, file + 8, 4);
    CHECK(file && stored == 3 && count_in(file, len, "ip_a/0") == 1 && count_in(file, len, "ip_b/0") == 0,
          "shared: the weights file holds 3 tensors (%u), ip_a/0 once (%d), ip_b/0 never (%d)", stored,
          file ? count_in(file, len, "ip_a/0") : -1, file ? count_in(file, len, "ip_b/0") : -1);
    free(file);
    file = cd_read_file(spath, &len);
    CHECK(file && count_in(file, len, "ip_a/0") == 1 && count_in(file, len, "ip_b/0") == 0,
          "shared: the solver state holds ip_a/0 once and no ip_b/0");
    free(file);

    int loaded = -1;
    err[0] = 0;
    CHECK(cd_snapshot_load_weights(b, path, 0, &loaded, err, sizeof err) == CD_OK && loaded == 3,
          "shared: load into a fresh net: %d of 3 tensors (%s)", loaded, err);
    long iter = -1;
    err[0] = 0;
    CHECK(cd_snapshot_load_state(b, &iter, spath, err, sizeof err) == CD_OK && iter == 7,
          "shared: load the solver state: iteration %ld (%s)", iter, err);
    cd_layer *la = cd_net_layer(b, "ip_a"), *lb = cd_net_layer(b, "ip_b");
    float *wa = download_param(b, la->params[0]), *wb = download_param(b, lb->params[0]);
    float *h = malloc(w->count * sizeof *h);
    g_be->iface->download(g_be, h, lb->params[0]->h1, w->count * sizeof *h);
    CHECK(la->params[0] == lb->params[0], "shared: the fresh net's layers share one weight");
    CHECK(memcmp(wa, v, w->count * sizeof *v) == 0 && memcmp(wb, v, w->count * sizeof *v) == 0,
          "shared: both layers see the saved weight, bit for bit");
    CHECK(memcmp(h, v, w->count * sizeof *v) == 0, "shared: ip_b sees the saved solver history");
    /* and the rest of the net came back too */
    CHECK(memcmp(a->arena_data, b->arena_data, a->param_count * sizeof(float)) == 0,
          "shared: the whole arena round-trips bit for bit");
    free(v);
    free(wa);
    free(wb);
    free(h);
    free_net(a, ta);
    free_net(b, tb);
    unlink(path);
    unlink(spath);
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
    test_shared(dir);
    rmdir(dir);
    cd_backend_free(g_be);
    return cd_test_finish();
}
