/* Caffe's weights (src/engine/caffemodel.c): .caffemodel files built here with the
 * protobuf-c code of proto/caffe.proto, in both of Caffe's layer formats, with fresh
 * random values. Checked: every parameter takes its blob bit for bit, through the loader
 * of weights files (cd_snapshot_load_weights), from float or double values; a forward pass
 * with the imported weights gives exactly what the same weights give when saved and
 * loaded as cdigits weights; a blob of another shape or a layer of another blob count is
 * an error naming the layer and both, and leaves the net as it was; legacy shapes are
 * compared with leading 1s dropped, as Caffe does, and only so; layers the file lacks
 * keep their values and layers the net lacks are ignored, both counted; a truncated
 * file is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "cdigits/backend.h"
#include "cdigits/caffemodel.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

static cd_backend_t *g_be;

/* (2,1,8,8) -> conv1 3x3 of 3 -> relu -> ip1 of 4 -> ip2 of 2 -> prob */
static const char g_text[] =
    "name: \"lenet-like\"\n"
    "layer { name: \"data\" type: \"Input\" top: \"data\" input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } } }\n"
    "layer { name: \"conv1\" type: \"Convolution\" bottom: \"data\" top: \"conv1\"\n"
    "  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: \"gaussian\" std: 1 } } }\n"
    "layer { name: \"relu1\" type: \"ReLU\" bottom: \"conv1\" top: \"conv1\" }\n"
    "layer { name: \"ip1\" type: \"InnerProduct\" bottom: \"conv1\" top: \"ip1\"\n"
    "  inner_product_param { num_output: 4 weight_filler { type: \"gaussian\" std: 1 } } }\n"
    "layer { name: \"ip2\" type: \"InnerProduct\" bottom: \"ip1\" top: \"ip2\"\n"
    "  inner_product_param { num_output: 2 weight_filler { type: \"gaussian\" std: 1 } } }\n"
    "layer { name: \"prob\" type: \"Softmax\" bottom: \"ip2\" top: \"prob\" }\n";

/* the layers with parameters and their blob shapes, as Caffe has them */
#define NLAYERS 3
static const struct {
    const char *name;
    int nblobs;
    int ndim[2];
    int64_t dims[2][4];
} g_layers[NLAYERS] = {
    {"conv1", 2, {4, 1}, {{3, 1, 3, 3}, {3}}},
    {"ip1", 2, {2, 1}, {{4, 108}, {4}}},
    {"ip2", 2, {2, 1}, {{2, 4}, {2}}},
};

static float g_values[NLAYERS][2][512];

static size_t blob_count(int l, int b)
{
    size_t n = 1;
    for (int d = 0; d < g_layers[l].ndim[b]; d++)
        n *= (size_t)g_layers[l].dims[b][d];
    return n;
}

static cd_net *make_net(uint64_t seed, cd_pt_node **tree)
{
    cd_net_opts opts = {.stage = "deploy", .seed = seed};
    return cd_test_build_net(g_be, g_text, "lenet-like", &opts, tree);
}

/* How to write a file: the format and what to change. */
typedef struct spec {
    int legacy;          /* V1 layers with num, channels, height, width */
    int doubles;         /* values as double_data */
    const char *drop;    /* a layer left out */
    const char *extra;   /* a layer the net does not have (with one blob) */
    const char *bad;     /* this layer's first blob gets the shape bad_dims */
    int bad_ndim;
    int64_t bad_dims[4];
    const char *one_blob; /* this layer gets only its first blob */
} spec;

/* The packed NetParameter of spec (free it), *len its size. */
static uint8_t *write_net(const spec *s, size_t *len)
{
    Caffe__NetParameter net = CAFFE__NET_PARAMETER__INIT;
    Caffe__LayerParameter cur[NLAYERS + 1];
    Caffe__V1LayerParameter v1[NLAYERS + 1];
    Caffe__LayerParameter *curp[NLAYERS + 1];
    Caffe__V1LayerParameter *v1p[NLAYERS + 1];
    Caffe__BlobProto blobs[NLAYERS + 1][2], *blobp[NLAYERS + 1][2];
    Caffe__BlobShape shapes[NLAYERS + 1][2];
    static double doubles[NLAYERS][2][512];
    static float extra_values[6];
    int64_t extra_dims[1] = {6};
    int n = 0;
    net.name = "lenet-like";
    for (int l = 0; l <= NLAYERS; l++) {
        const char *name = l < NLAYERS ? g_layers[l].name : s->extra;
        if (!name || (s->drop && !strcmp(name, s->drop)))
            continue;
        int nb = l < NLAYERS ? g_layers[l].nblobs : 1;
        if (s->one_blob && !strcmp(name, s->one_blob))
            nb = 1;
        for (int b = 0; b < nb; b++) {
            Caffe__BlobProto *bp = &blobs[n][b];
            *bp = (Caffe__BlobProto)CAFFE__BLOB_PROTO__INIT;
            blobp[n][b] = bp;
            int ndim = l < NLAYERS ? g_layers[l].ndim[b] : 1;
            int64_t *dims = l < NLAYERS ? (int64_t *)g_layers[l].dims[b] : extra_dims;
            if (s->bad && !strcmp(name, s->bad) && b == 0) {
                ndim = s->bad_ndim;
                dims = (int64_t *)s->bad_dims;
            }
            size_t count = l < NLAYERS ? blob_count(l, b) : 6;
            if (s->legacy) {
                int64_t four[4] = {1, 1, 1, 1};
                for (int d = 0; d < ndim; d++)
                    four[4 - ndim + d] = dims[d];
                bp->has_num = bp->has_channels = bp->has_height = bp->has_width = 1;
                bp->num = four[0], bp->channels = four[1], bp->height = four[2], bp->width = four[3];
            } else {
                shapes[n][b] = (Caffe__BlobShape)CAFFE__BLOB_SHAPE__INIT;
                shapes[n][b].n_dim = (size_t)ndim;
                shapes[n][b].dim = dims;
                bp->shape = &shapes[n][b];
            }
            const float *v = l < NLAYERS ? g_values[l][b] : extra_values;
            if (s->doubles && l < NLAYERS) {
                for (size_t i = 0; i < count; i++)
                    doubles[l][b][i] = v[i];
                bp->n_double_data = count;
                bp->double_data = doubles[l][b];
            } else {
                bp->n_data = count;
                bp->data = (float *)v;
            }
        }
        if (s->legacy) {
            v1[n] = (Caffe__V1LayerParameter)CAFFE__V1_LAYER_PARAMETER__INIT;
            v1[n].name = (char *)name;
            v1[n].n_blobs = (size_t)nb;
            v1[n].blobs = blobp[n];
            v1p[n] = &v1[n];
        } else {
            cur[n] = (Caffe__LayerParameter)CAFFE__LAYER_PARAMETER__INIT;
            cur[n].name = (char *)name;
            cur[n].type = "InnerProduct";
            cur[n].n_blobs = (size_t)nb;
            cur[n].blobs = blobp[n];
            curp[n] = &cur[n];
        }
        n++;
    }
    if (s->legacy) {
        net.n_layers = (size_t)n;
        net.layers = v1p;
    } else {
        net.n_layer = (size_t)n;
        net.layer = curp;
    }
    *len = caffe__net_parameter__get_packed_size(&net);
    uint8_t *out = cd_xmalloc(*len + 1);
    caffe__net_parameter__pack(&net, out);
    return out;
}

static const char *write_file(const spec *s, const char *name)
{
    size_t len = 0;
    uint8_t *data = write_net(s, &len);
    const char *path = cd_test_tmp_path(name);
    CHECK(cd_write_file_atomic(path, data, len) == CD_OK, "write %s", path);
    free(data);
    return path;
}

static float *download(const cd_net *net, const float *dev, size_t n)
{
    float *h = cd_xmalloc(n * sizeof *h + 1);
    net->be->iface->download(net->be, h, dev, n * sizeof *h);
    return h;
}

/* Whether every parameter of net holds g_values bit for bit (skip: a layer not to look at). */
static int holds_values(const cd_net *net, const char *skip)
{
    int same = 1;
    for (int l = 0; l < NLAYERS; l++) {
        if (skip && !strcmp(g_layers[l].name, skip))
            continue;
        const cd_layer *layer = cd_net_layer(net, g_layers[l].name);
        for (int b = 0; b < g_layers[l].nblobs; b++) {
            float *h = download(net, layer->params[b]->data, layer->params[b]->count);
            same &= layer->params[b]->count == blob_count(l, b) && !memcmp(h, g_values[l][b], blob_count(l, b) * 4);
            free(h);
        }
    }
    return same;
}

static void fresh_values(void)
{
    for (int l = 0; l < NLAYERS; l++)
        for (int b = 0; b < 2; b++)
            cd_test_fill_uniform(g_values[l][b], 512, -1, 1);
}

/* Both formats, floats and doubles: bit for bit, and the forward pass of cdigits weights. */
static void test_formats(void)
{
    static const struct {
        const char *file;
        int legacy, doubles;
    } cases[] = {{"current.caffemodel", 0, 0}, {"legacy.caffemodel", 1, 0}, {"doubles.caffemodel", 0, 1}};
    float input[2 * 64];
    cd_test_fill_uniform(input, 2 * 64, 0, 1);
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        fresh_values();
        spec s = {.legacy = cases[c].legacy, .doubles = cases[c].doubles, .extra = "unused"};
        const char *path = write_file(&s, cases[c].file);
        char cdw[512], err[1024] = "";
        snprintf(cdw, sizeof cdw, "%s", cd_test_tmp_path("same.cdw"));
        cd_pt_node *ta = NULL, *tb = NULL;
        cd_net *a = make_net(cd_test_rand_u64(), &ta), *b = make_net(cd_test_rand_u64(), &tb);
        if (!a || !b)
            goto next;
        int loaded = -1;
        CHECK(cd_snapshot_load_weights(a, path, 0, &loaded, err, sizeof err) == CD_OK && loaded == 6,
              "%s: loads 6 tensors (%d): %s", cases[c].file, loaded, err);
        CHECK(holds_values(a, NULL), "%s: every parameter holds its blob bit for bit", cases[c].file);
        CHECK(cd_snapshot_save_weights(a, cdw, err, sizeof err) == CD_OK &&
                  cd_snapshot_load_weights(b, cdw, 0, NULL, err, sizeof err) == CD_OK,
              "%s: the same weights as cdigits weights: %s", cases[c].file, err);
        cd_blob *ia = cd_net_blob(a, "data"), *ib = cd_net_blob(b, "data");
        g_be->iface->upload(g_be, ia->data, input, sizeof input);
        g_be->iface->upload(g_be, ib->data, input, sizeof input);
        cd_net_forward(a);
        cd_net_forward(b);
        cd_blob *oa = cd_net_blob(a, "prob"), *ob = cd_net_blob(b, "prob");
        float *pa = download(a, oa->data, oa->count), *pb = download(b, ob->data, ob->count);
        CHECK(oa->count == 4 && !memcmp(pa, pb, oa->count * 4) && pa[0] != pa[1],
              "%s: the output is that of the same weights as cdigits weights (%g %g vs %g %g)", cases[c].file,
              pa[0], pa[1], pb[0], pb[1]);
        free(pa);
        free(pb);
    next:
        cd_net_free(a);
        cd_pt_free(ta);
        cd_net_free(b);
        cd_pt_free(tb);
    }
}

/* Mismatches: the message, and the net untouched. */
static void test_mismatch(void)
{
    static const struct {
        spec s;
        const char *want;
    } cases[] = {
        {{.bad = "ip1", .bad_ndim = 2, .bad_dims = {4, 107}},
         "layer ip1, blob 0 has shape (4, 107) in the file but (4, 108) in the network"},
        {{.legacy = 1, .bad = "conv1", .bad_ndim = 4, .bad_dims = {3, 1, 5, 5}},
         "layer conv1, blob 0 has shape (3, 1, 5, 5) (num, channels, height, width) in the file but (3, 1, 3, 3)"},
        /* legacy (4, 108, 1, 1) is not (4, 108): only leading 1s are dropped, as in Caffe */
        {{.legacy = 1, .bad = "ip1", .bad_ndim = 4, .bad_dims = {4, 108, 1, 1}},
         "layer ip1, blob 0 has shape (4, 108, 1, 1) (num, channels, height, width) in the file but (4, 108)"},
        {{.bad = "conv1", .bad_ndim = 4, .bad_dims = {1, 3, 3, 3}},
         "layer conv1, blob 0 has shape (1, 3, 3, 3) in the file but (3, 1, 3, 3)"},
        {{.one_blob = "ip2"}, "layer ip2 has 1 parameter blobs in the file but 2 in the network (InnerProduct)"},
    };
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        fresh_values();
        const char *path = write_file(&cases[c].s, "bad.caffemodel");
        cd_pt_node *t = NULL;
        cd_net *net = make_net(cd_test_rand_u64(), &t);
        if (!net)
            continue;
        float *before = download(net, net->arena_data, net->param_count);
        char err[1024] = "";
        CHECK(cd_snapshot_load_weights(net, path, 1, NULL, err, sizeof err) == CD_ERR && strstr(err, cases[c].want),
              "case %zu: the error names the layer and both shapes (%s)", c, err);
        float *after = download(net, net->arena_data, net->param_count);
        CHECK(!memcmp(before, after, net->param_count * 4), "case %zu: the net is left as it was", c);
        free(before);
        free(after);
        cd_net_free(net);
        cd_pt_free(t);
    }
    /* legacy shapes with leading 1s of their own: conv1's bias as (1, 1, 1, 3) is the (3) it is */
    fresh_values();
    spec s = {.legacy = 1};
    const char *path = write_file(&s, "ones.caffemodel");
    cd_pt_node *t = NULL;
    cd_net *net = make_net(cd_test_rand_u64(), &t);
    char err[1024] = "";
    CHECK(net && cd_snapshot_load_weights(net, path, 0, NULL, err, sizeof err) == CD_OK && holds_values(net, NULL),
          "legacy shapes padded with leading 1s load: %s", err);
    cd_net_free(net);
    cd_pt_free(t);
}

/* A layer the file lacks keeps its values; one the net lacks is ignored; both counted. */
static void test_missing_and_ignored(void)
{
    fresh_values();
    spec s = {.drop = "ip2", .extra = "not_here"};
    size_t len = 0;
    uint8_t *data = write_net(&s, &len);
    cd_pt_node *t = NULL;
    cd_net *net = make_net(cd_test_rand_u64(), &t);
    if (!net) {
        free(data);
        return;
    }
    cd_param *w = cd_net_layer(net, "ip2")->params[0];
    float *before = download(net, w->data, w->count);
    cd_caffemodel_report rep;
    char err[1024] = "";
    CHECK(cd_caffemodel_load(net, data, len, "m.caffemodel", &rep, err, sizeof err) == CD_OK, "load: %s", err);
    CHECK(rep.loaded == 4 && rep.missing == 1 && !strcmp(rep.missing_names, "ip2") && rep.ignored == 1,
          "4 tensors loaded (%d), ip2 missing (%d: %s), 1 layer ignored (%d)", rep.loaded, rep.missing,
          rep.missing_names, rep.ignored);
    float *after = download(net, w->data, w->count);
    CHECK(!memcmp(before, after, w->count * 4) && holds_values(net, "ip2"),
          "ip2 keeps its fillers' values, the others hold the file's");
    free(before);
    free(after);
    err[0] = 0;
    CHECK(cd_caffemodel_load(net, data, len - 5, "cut.caffemodel", NULL, err, sizeof err) == CD_ERR &&
              strstr(err, "cut.caffemodel is not a Caffe .caffemodel that can be read") && strstr(err, "truncated"),
          "a truncated file is refused: %s", err);
    free(data);
    /* a file of another network altogether: one layer fc8, none of the net's */
    Caffe__NetParameter np = CAFFE__NET_PARAMETER__INIT;
    Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT, *lpp = &lp;
    lp.name = "fc8";
    np.n_layer = 1;
    np.layer = &lpp;
    len = caffe__net_parameter__get_packed_size(&np);
    data = cd_xmalloc(len + 1);
    caffe__net_parameter__pack(&np, data);
    err[0] = 0;
    CHECK(cd_caffemodel_load(net, data, len, "other.caffemodel", NULL, err, sizeof err) == CD_ERR &&
              strstr(err, "other.caffemodel holds Caffe weights for none of the layers of the network with "
                          "parameters (conv1, ip1, ip2)"),
          "a file for none of the net's layers is refused, naming them: %s", err);
    free(data);
    cd_net_free(net);
    cd_pt_free(t);
}

int main(void)
{
    static void (*const tests[])(void) = {test_formats, test_mismatch, test_missing_and_ignored};
    int rc = cd_test_main_cpu("test_caffemodel", 1, &g_be, tests, CD_ARRAY_LEN(tests));
    cd_test_tmpdir_remove();
    return rc;
}
