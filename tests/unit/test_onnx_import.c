/* ONNX import (src/engine/onnx_import.c) against ONNX's own backend tests: every node
 * test of libonnx-testdata whose name starts with a supported operator's test name is
 * imported (the weights, which node tests give as graph inputs, made initializers first),
 * built on the CPU backend with its weights loaded through cd_snapshot_load_weights,
 * run on input_0.. and compared with output_0.. (ONNX's backend tolerance: rtol 1e-3,
 * atol 1e-5). A test cdigits cannot run exactly must be refused naming the node's
 * operator; an accepted import with other numbers is a failure, and so is a supported
 * operator none of whose tests is accepted. Prints matched and refused per operator. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/onnx_import.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

#define NODE_TESTS "/usr/share/libonnx-testdata/data/node"

static cd_backend_t *g_be;

/* The operators' test names; data: the operator's inputs are all computed tensors (the
 * test feeds every input), else inputs 1.. are weights and become initializers. */
static struct family {
    const char *prefix, *op;
    int data;
    int matched, refused;
} g_families[] = {
    {"test_add", "Add", 1, 0, 0},
    {"test_averagepool", "AveragePool", 0, 0, 0},
    {"test_batchnorm", "BatchNormalization", 0, 0, 0},
    {"test_concat", "Concat", 1, 0, 0},
    {"test_conv", "Conv", 0, 0, 0},
    {"test_convtranspose", "ConvTranspose", 0, 0, 0},
    {"test_dropout", "Dropout", 0, 0, 0},
    {"test_flatten", "Flatten", 0, 0, 0},
    {"test_gemm", "Gemm", 0, 0, 0},
    {"test_globalaveragepool", "GlobalAveragePool", 0, 0, 0},
    {"test_globalmaxpool", "GlobalMaxPool", 0, 0, 0},
    {"test_identity", "Identity", 0, 0, 0},
    {"test_leakyrelu", "LeakyRelu", 0, 0, 0},
    {"test_lrn", "LRN", 0, 0, 0},
    {"test_matmul", "MatMul", 0, 0, 0},
    {"test_max", "Max", 1, 0, 0},
    {"test_maxpool", "MaxPool", 0, 0, 0},
    {"test_mul", "Mul", 1, 0, 0},
    {"test_relu", "Relu", 0, 0, 0},
    {"test_reshape", "Reshape", 0, 0, 0},
    {"test_sigmoid", "Sigmoid", 0, 0, 0},
    {"test_softmax", "Softmax", 0, 0, 0},
    {"test_tanh", "Tanh", 0, 0, 0},
};

/* The family a test belongs to: the longest prefix it starts with (test_maxpool before
 * test_max), or NULL. */
static struct family *family_of(const char *name)
{
    struct family *best = NULL;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_families); i++) {
        size_t n = strlen(g_families[i].prefix);
        if (!strncmp(name, g_families[i].prefix, n) && (!best || n > strlen(best->prefix)))
            best = &g_families[i];
    }
    return best;
}

static Onnx__TensorProto *read_tensor(const char *path)
{
    size_t len = 0;
    char *data = cd_read_file(path, &len);
    if (!data)
        return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)data);
    free(data);
    return t;
}

/* A float tensor's values (n of them) into a new array; NULL when it is not float. */
static float *tensor_floats(const Onnx__TensorProto *t, size_t *n)
{
    size_t count = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        count *= (size_t)t->dims[i];
    *n = count;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return NULL;
    float *f = cd_xcalloc(count + 1, sizeof *f);
    if (t->has_raw_data && t->raw_data.len == count * 4)
        memcpy(f, t->raw_data.data, count * 4);
    else if (t->n_float_data == count)
        memcpy(f, t->float_data, count * 4);
    else {
        free(f);
        return NULL;
    }
    return f;
}

/* The model of test dir with the graph inputs 1.. that are weights made initializers
 * (their values from test_data_set_0/input_K.pb), serialized into *out. */
static int model_bytes(const char *dir, const struct family *fam, uint8_t **out, size_t *outlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t len = 0;
    char *data = cd_read_file(path, &len);
    if (!data)
        return CD_ERR;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, (const uint8_t *)data);
    free(data);
    if (!mp || !mp->graph) {
        if (mp)
            onnx__model_proto__free_unpacked(mp, NULL);
        return CD_ERR;
    }
    Onnx__GraphProto g = *mp->graph;
    Onnx__ModelProto m = *mp;
    m.graph = &g;
    size_t nin = mp->graph->n_input;
    Onnx__ValueInfoProto **inputs = cd_xcalloc(nin + 1, sizeof *inputs);
    Onnx__TensorProto **inits = cd_xcalloc(mp->graph->n_initializer + nin + 1, sizeof *inits);
    Onnx__TensorProto *owned[32] = {0};
    char *owned_name[32] = {0};
    size_t ni = 0, nk = mp->graph->n_initializer, nowned = 0;
    if (nk)
        memcpy(inits, mp->graph->initializer, nk * sizeof *inits);
    for (size_t i = 0; i < nin; i++) {
        Onnx__TensorProto *t = NULL;
        if (i > 0 && !fam->data && nowned < CD_ARRAY_LEN(owned)) {
            snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
            t = read_tensor(path);
        }
        if (t) {
            owned_name[nowned] = t->name; /* the file's own name may differ from the graph's */
            t->name = mp->graph->input[i]->name;
            owned[nowned++] = t;
            inits[nk++] = t;
        } else {
            inputs[ni++] = mp->graph->input[i];
        }
    }
    g.input = inputs;
    g.n_input = ni;
    g.initializer = inits;
    g.n_initializer = nk;
    *outlen = onnx__model_proto__get_packed_size(&m);
    *out = cd_xmalloc(*outlen + 1);
    onnx__model_proto__pack(&m, *out);
    for (size_t i = 0; i < nowned; i++) {
        owned[i]->name = owned_name[i];
        onnx__tensor_proto__free_unpacked(owned[i], NULL);
    }
    free(inputs);
    free(inits);
    onnx__model_proto__free_unpacked(mp, NULL);
    return CD_OK;
}

/* Index of the graph input called name in the test's original model (its input_K.pb). */
static int input_index(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t len = 0;
    char *data = cd_read_file(path, &len);
    Onnx__ModelProto *mp = data ? onnx__model_proto__unpack(NULL, len, (const uint8_t *)data) : NULL;
    free(data);
    int k = -1;
    for (size_t i = 0; mp && mp->graph && i < mp->graph->n_input; i++)
        if (!strcmp(mp->graph->input[i]->name, name))
            k = (int)i;
    if (mp)
        onnx__model_proto__free_unpacked(mp, NULL);
    return k;
}

/* Builds the import on the CPU, feeds the inputs and compares every output; 1 when all
 * match, 0 with a failed check saying what differs. */
static int run_import(const char *name, const char *dir, const cd_onnx_model *m)
{
    char err[2048] = "", path[4200];
    cd_net_opts opts = {.stage = "deploy", .seed = 1};
    cd_pt_node *tree = NULL;
    cd_net *net = cd_test_build_net(g_be, m->deploy, name, &opts, &tree);
    if (!net) {
        fprintf(stderr, "%s: the accepted import does not build; its network:\n%s", name, m->deploy);
        return 0;
    }
    int ok = 1;
    const char *wpath = cd_test_tmp_path("onnx_weights.cdw");
    int loaded = 0;
    if (cd_onnx_write_weights(m, wpath, err, sizeof err) != CD_OK ||
        cd_snapshot_load_weights(net, wpath, 0, &loaded, err, sizeof err) != CD_OK) {
        CHECK(0, "%s: the weights do not load: %s", name, err);
        ok = 0;
        goto out;
    }
    for (int i = 0; i < m->ninputs && ok; i++) {
        int k = input_index(dir, m->inputs[i].onnx_name);
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
        Onnx__TensorProto *t = read_tensor(path);
        size_t n = 0;
        float *x = t ? tensor_floats(t, &n) : NULL;
        cd_blob *b = cd_net_blob(net, m->inputs[i].blob);
        ok = x && b && b->count == n;
        CHECK(ok, "%s: input %s (%s) cannot be fed: %zu values for blob of %zu", name, m->inputs[i].onnx_name, path,
              n, b ? b->count : 0);
        if (ok)
            g_be->iface->upload(g_be, b->data, x, n * sizeof *x);
        free(x);
        if (t)
            onnx__tensor_proto__free_unpacked(t, NULL);
    }
    if (!ok)
        goto out;
    cd_net_forward(net);
    for (int i = 0; i < m->noutputs && ok; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", dir, i);
        Onnx__TensorProto *t = read_tensor(path);
        size_t n = 0;
        float *want = t ? tensor_floats(t, &n) : NULL;
        cd_blob *b = cd_net_blob(net, m->outputs[i].blob);
        ok = want && b && b->count == n;
        CHECK(ok, "%s: output %s has %zu values where ONNX's has %zu", name, m->outputs[i].onnx_name,
              b ? b->count : 0, n);
        if (ok) {
            float *got = cd_xmalloc(n * sizeof *got + 1);
            const float *src = b->alias ? b->alias->data : b->data;
            g_be->iface->download(g_be, got, src, n * sizeof *got);
            size_t bad = n, nbad = 0;
            for (size_t j = 0; j < n; j++)
                if (!(fabsf(got[j] - want[j]) <= 1e-5f + 1e-3f * fabsf(want[j])) && nbad++ == 0)
                    bad = j;
            ok = nbad == 0;
            CHECK(ok, "%s: output %s differs from ONNX's at %zu of %zu values (first at %zu: %.9g vs %.9g)", name,
                  m->outputs[i].onnx_name, nbad, n, bad, bad < n ? got[bad] : 0.0, bad < n ? want[bad] : 0.0);
            free(got);
        }
        free(want);
        if (t)
            onnx__tensor_proto__free_unpacked(t, NULL);
    }
out:
    if (!ok)
        fprintf(stderr, "%s: its network:\n%s", name, m->deploy);
    cd_net_free(net);
    cd_pt_free(tree);
    return ok;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_node_tests(void)
{
    DIR *d = opendir(NODE_TESTS);
    if (!d) {
        CHECK(0, "%s is missing: the ONNX node tests come with Debian's libonnx-testdata; run scripts/setup.sh "
              "--test", NODE_TESTS);
        return;
    }
    char *names[2048];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < (int)CD_ARRAY_LEN(names);)
        if (family_of(e->d_name))
            names[n++] = cd_xstrdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        struct family *fam = family_of(names[i]);
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", NODE_TESTS, names[i]);
        uint8_t *bytes = NULL;
        size_t len = 0;
        if (model_bytes(dir, fam, &bytes, &len) != CD_OK) {
            CHECK(0, "%s: its model.onnx cannot be read", names[i]);
            free(names[i]);
            continue;
        }
        cd_onnx_model m;
        char err[2048] = "";
        if (cd_onnx_import(bytes, len, names[i], &m, err, sizeof err) != CD_OK) {
            fam->refused++;
            printf("refused %s: %s\n", names[i], err);
            CHECK(strstr(err, "(op ") != NULL, "%s is refused without naming the operator: %s", names[i], err);
        } else if (run_import(names[i], dir, &m)) {
            fam->matched++;
            printf("matched %s\n", names[i]);
        }
        cd_onnx_model_free(&m);
        free(bytes);
        free(names[i]);
    }
    for (size_t i = 0; i < CD_ARRAY_LEN(g_families); i++) {
        printf("%-20s %2d matched, %2d refused\n", g_families[i].op, g_families[i].matched, g_families[i].refused);
        CHECK(g_families[i].matched > 0, "no node test of %s (%s*) is imported and matches", g_families[i].op,
              g_families[i].prefix);
    }
}

/* An operator outside the table is refused naming it, the node and what is supported;
 * a file that is not ONNX is refused saying so. */
static void test_refusals(void)
{
    char dir[4200], err[2048] = "";
    snprintf(dir, sizeof dir, "%s/test_upsample_nearest", NODE_TESTS);
    uint8_t *bytes = NULL;
    size_t len = 0;
    static struct family fam = {"test_upsample", "Upsample", 0, 0, 0};
    cd_onnx_model m;
    if (model_bytes(dir, &fam, &bytes, &len) == CD_OK) {
        CHECK(cd_onnx_import(bytes, len, "up.onnx", &m, err, sizeof err) == CD_ERR, "Upsample is imported");
        CHECK(strstr(err, "node 'Upsample_0' (op Upsample): cdigits cannot import this operator; supported: Add, ") &&
                  strstr(err, cd_onnx_supported_ops()),
              "the refusal of Upsample: %s", err);
        cd_onnx_model_free(&m);
        free(bytes);
    }
    static const char junk[] = "not an onnx file at all";
    CHECK(cd_onnx_import(junk, sizeof junk, "junk.onnx", &m, err, sizeof err) == CD_ERR &&
              strstr(err, "junk.onnx is not an ONNX model"),
          "a file that is not ONNX: %s", err);
    cd_onnx_model_free(&m);
}

/* Damaged files: an initializer whose shape claims more values than it holds (dims whose
 * product is the largest size, with a few raw bytes), and a graph input without a name,
 * are refused, neither crashing nor allocating by the shape. */
static void test_damaged(void)
{
    static int64_t dims[] = {3, 5, 17, 257, 641, 65537, 6700417}; /* product: 2^64 - 1 */
    uint8_t raw[64] = {0};
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = "w";
    t.n_dims = CD_ARRAY_LEN(dims);
    t.dims = dims;
    t.has_data_type = 1;
    t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t.has_raw_data = 1;
    t.raw_data = (ProtobufCBinaryData){sizeof raw, raw};
    Onnx__TensorProto *inits[] = {&t};
    Onnx__ValueInfoProto in = ONNX__VALUE_INFO_PROTO__INIT; /* no name */
    Onnx__ValueInfoProto *ins[] = {&in};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = "damaged";
    Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    op.has_version = 1;
    op.version = 13;
    Onnx__OperatorSetIdProto *ops[] = {&op};
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = 1;
    mp.ir_version = 7;
    mp.graph = &g;
    mp.n_opset_import = 1;
    mp.opset_import = ops;
    static const struct {
        int with_init, with_input;
        const char *why;
    } cases[] = {{1, 0, "initializer 'w' holds 16 values for its shape of 18446744073709551615"},
                 {0, 1, "graph input 0 has no name"}};
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        g.n_initializer = cases[i].with_init ? 1 : 0;
        g.initializer = inits;
        g.n_input = cases[i].with_input ? 1 : 0;
        g.input = ins;
        size_t len = onnx__model_proto__get_packed_size(&mp);
        uint8_t *buf = malloc(len);
        onnx__model_proto__pack(&mp, buf);
        char err[1024] = "";
        cd_onnx_model m;
        CHECK(cd_onnx_import(buf, len, "damaged.onnx", &m, err, sizeof err) == CD_ERR && strstr(err, cases[i].why),
              "damaged case %zu refused saying \"%s\": %s", i, cases[i].why, err);
        cd_onnx_model_free(&m);
        free(buf);
    }
}

int main(void)
{
    void (*const tests[])(void) = {test_node_tests, test_refusals, test_damaged};
    return cd_test_main_cpu("onnx_import", 2, &g_be, tests, CD_ARRAY_LEN(tests));
}
