/*
 * Prototxt parser, schema validation and lookups: a realistic net parsed and read back,
 * random values written and read back, every error kind with its position and words,
 * and hostile input (deep nesting, huge input, random bytes) that must fail cleanly.
 * Inputs are copied into buffers of their exact length with no terminator, so that
 * AddressSanitizer catches any read past the end.
 */
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_err[2048];

/* Parse text of len bytes from an exact-size copy. */
static cd_pt_node *parse_n(const char *text, size_t len, const char *file)
{
    char *copy = cd_xmalloc(len);
    memcpy(copy, text, len);
    cd_pt_node *root = cd_pt_parse(copy, len, file, g_err, sizeof g_err);
    free(copy);
    return root;
}

static cd_pt_node *parse(const char *text) { return parse_n(text, strlen(text), "t.prototxt"); }

/* parse, with a failed check naming `what` when the text does not parse. */
static cd_pt_node *parse_ok(const char *what, const char *text)
{
    cd_pt_node *root = parse(text);
    CHECK(root != NULL, "%s: %s", what, g_err);
    return root;
}

static const char lenet[] =
    "# LeNet, DIGITS style: one file for train, val and deploy\n"          /* 1 */
    "name: \"LeNet\"\n"                                                      /* 2 */
    "input_shape { dim: 1 dim: 1 dim: 28 dim: 28 }\n"                        /* 3 */
    "layer {\n"                                                              /* 4 */
    "  name: \"train-data\"  type: \"Data\"\n"                               /* 5 */
    "  top: \"data\" top: \"label\"\n"                                       /* 6 */
    "  include { stage: \"train\" }\n"                                       /* 7 */
    "  data_param { batch_size: 64 backend: LMDB }\n"                        /* 8 */
    "}\n"                                                                    /* 9 */
    "layer {\n"                                                              /* 10 */
    "  name: \"conv1\"; type: \"Convolution\",\n"                            /* 11 */
    "  bottom: \"data\" top: \"conv1\"\n"                                    /* 12 */
    "  param { lr_mult: 1 } param { lr_mult: 2e0 decay_mult: 0 }\n"         /* 13 */
    "  convolution_param: {\n"                                               /* 14 */
    "    num_output: 20 # twenty filters\n"                                  /* 15 */
    "    kernel_size: 5 stride: 1\n"                                         /* 16 */
    "    weight_filler < type: 'xavier' >\n"                                 /* 17 */
    "    bias_filler { type: \"constant\" value: -0.5 }\n"                   /* 18 */
    "  }\n"                                                                  /* 19 */
    "}\n"                                                                    /* 20 */
    "layer {\n"                                                              /* 21 */
    "  name: \"pool1\" type: \"Pooling\" bottom: \"conv1\" top: \"pool1\"\n" /* 22 */
    "  pooling_param { pool: MAX kernel_size: 2 stride: 2 }\n"               /* 23 */
    "}\n"                                                                    /* 24 */
    "layer {\n"                                                              /* 25 */
    "  name: \"ip1\" type: \"InnerProduct\" bottom: \"pool1\" top: \"ip1\"\n"/* 26 */
    "  inner_product_param { num_output: 500 bias_term: false\n"             /* 27 */
    "    weight_filler { type: \"gaussian\" std: 1.0e-2f } }\n"              /* 28 */
    "}\n"                                                                    /* 29 */
    "layer {\n"                                                              /* 30 */
    "  name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip1\" bottom: \"label\"\n" /* 31 */
    "  top: \"loss\" loss_weight: 1 propagate_down: true propagate_down: 0\n" /* 32 */
    "  exclude { stage: \"deploy\" }\n"                                      /* 33 */
    "  loss_param { ignore_label: -1 normalization: VALID }\n"               /* 34 */
    "}\n";                                                                   /* 35 */

static void test_lenet(void)
{
    cd_pt_node *root = parse_ok("parse failed", lenet);
    if (!root)
        return;
    int rc = cd_pt_validate(root, &cd_pt_net_parameter, "lenet.prototxt", g_err, sizeof g_err);
    CHECK(rc == CD_OK, "validate: %s", g_err);

    CHECK(strcmp(root->name, "") == 0 && root->kind == CD_PT_MESSAGE, "root is an unnamed message");
    CHECK(strcmp(cd_pt_str(root, "name", ""), "LeNet") == 0, "name %s", cd_pt_str(root, "name", ""));
    CHECK(cd_pt_count(root, "layer") == 5, "layers %d", cd_pt_count(root, "layer"));

    const cd_pt_node *shape = cd_pt_get(root, "input_shape");
    CHECK(cd_pt_count(shape, "dim") == 4, "dims");
    CHECK(strcmp(cd_pt_nth(shape, "dim", 2)->text, "28") == 0, "dim 2");
    CHECK(shape->line == 3 && shape->col == 1, "input_shape at %d:%d", shape->line, shape->col);

    const cd_pt_node *data = cd_pt_nth(root, "layer", 0);
    CHECK(data->line == 4 && data->col == 1, "layer 0 at %d:%d", data->line, data->col);
    CHECK(cd_pt_count(data, "top") == 2, "two tops");
    CHECK(strcmp(cd_pt_nth(data, "top", 1)->text, "label") == 0, "second top");
    CHECK(strcmp(cd_pt_str(cd_pt_get(data, "include"), "stage", ""), "train") == 0, "include stage");
    const cd_pt_node *dp = cd_pt_get(data, "data_param");
    CHECK(cd_pt_int(dp, "batch_size", 0) == 64, "batch_size");
    CHECK(strcmp(cd_pt_str(dp, "backend", ""), "LMDB") == 0, "backend enum");
    CHECK(cd_pt_get(dp, "backend")->kind == CD_PT_IDENT, "enum is an identifier");
    CHECK(cd_pt_int(dp, "rand_skip", 7) == 7, "absent int gives the default");

    const cd_pt_node *conv = cd_pt_nth(root, "layer", 1);
    const cd_pt_node *name = cd_pt_get(conv, "name");
    CHECK(name->line == 11 && name->col == 3, "conv1 name at %d:%d", name->line, name->col);
    CHECK(cd_pt_count(conv, "param") == 2, "two param specs");
    CHECK_NEAR(cd_pt_float(cd_pt_nth(conv, "param", 1), "lr_mult", 0), 2.0, 0, "lr_mult 2e0");
    CHECK_NEAR(cd_pt_float(cd_pt_nth(conv, "param", 1), "decay_mult", 9), 0.0, 0, "decay_mult");
    CHECK(cd_pt_nth(conv, "param", 2) == NULL, "no third param");
    const cd_pt_node *cp = cd_pt_get(conv, "convolution_param");
    CHECK(cp->line == 14 && cp->col == 3, "convolution_param at %d:%d", cp->line, cp->col);
    CHECK(cd_pt_int(cp, "num_output", 0) == 20, "num_output");
    CHECK(cd_pt_int(cp, "kernel_size", 0) == 5, "kernel_size");
    const cd_pt_node *ks = cd_pt_get(cp, "kernel_size");
    CHECK(ks->line == 16 && ks->col == 5, "kernel_size at %d:%d", ks->line, ks->col);
    const cd_pt_node *stride = cd_pt_get(cp, "stride");
    CHECK(stride->line == 16 && stride->col == 20, "stride at %d:%d", stride->line, stride->col);
    CHECK(strcmp(cd_pt_str(cd_pt_get(cp, "weight_filler"), "type", ""), "xavier") == 0, "<> message");
    CHECK_NEAR(cd_pt_float(cd_pt_get(cp, "bias_filler"), "value", 0), -0.5, 0, "negative float");

    const cd_pt_node *pool = cd_pt_get(cd_pt_nth(root, "layer", 2), "pooling_param");
    CHECK(strcmp(cd_pt_str(pool, "pool", ""), "MAX") == 0, "pool MAX");

    const cd_pt_node *ip = cd_pt_get(cd_pt_nth(root, "layer", 3), "inner_product_param");
    CHECK(cd_pt_int(ip, "num_output", 0) == 500, "ip num_output");
    CHECK(cd_pt_bool(ip, "bias_term", 1) == 0, "bias_term false");
    CHECK_NEAR(cd_pt_float(cd_pt_get(ip, "weight_filler"), "std", 0), 0.01, 1e-15, "1.0e-2f");

    const cd_pt_node *loss = cd_pt_nth(root, "layer", 4);
    CHECK(cd_pt_count(loss, "bottom") == 2, "two bottoms");
    CHECK_NEAR(cd_pt_float(loss, "loss_weight", 0), 1.0, 0, "loss_weight");
    CHECK(cd_pt_bool(loss, "propagate_down", 0) == 1, "propagate_down true");
    CHECK(strcmp(cd_pt_nth(loss, "propagate_down", 1)->text, "0") == 0, "propagate_down 0");
    CHECK(cd_pt_int(cd_pt_get(loss, "loss_param"), "ignore_label", 0) == -1, "negative int");
    cd_pt_free(root);
}

static void test_numbers(void)
{
    const char *t = "a: inf b: -inf c: nan d: 0x1F e: -0x10 f: .5 g: 1. h: 2.5f i: 1e-3\n"
                    "j: Infinity k: 1E+2 l: 7f m: - 3 n: -0 o: 9223372036854775807\n";
    cd_pt_node *root = parse_ok("numbers", t);
    if (!root)
        return;
    double inf_a = cd_pt_float(root, "a", 0), inf_b = cd_pt_float(root, "b", 0);
    CHECK(isinf(inf_a) && inf_a > 0, "inf %g", inf_a);
    CHECK(isinf(inf_b) && inf_b < 0, "-inf %g", inf_b);
    CHECK(isnan(cd_pt_float(root, "c", 0)), "nan");
    CHECK(cd_pt_get(root, "a")->kind == CD_PT_NUMBER, "inf is a number");
    CHECK(cd_pt_int(root, "d", 0) == 31 && cd_pt_int(root, "e", 0) == -16, "hex ints");
    static const struct {
        const char *key, *text;
        double want;
    } floats[] = {{"d", "hex as float", 31}, {"f", ".5", 0.5},   {"g", "1.", 1},
                  {"h", "2.5f", 2.5},        {"i", "1e-3", 1e-3}, {"k", "1E+2", 100},
                  {"l", "7f", 7}};
    for (size_t i = 0; i < CD_ARRAY_LEN(floats); i++)
        CHECK_NEAR(cd_pt_float(root, floats[i].key, 0), floats[i].want, 0, floats[i].text);
    CHECK(isinf(cd_pt_float(root, "j", 0)), "Infinity");
    CHECK(cd_pt_int(root, "l", -9) == -9, "7f is not an integer");
    CHECK(cd_pt_int(root, "f", -9) == -9, ".5 is not an integer");
    CHECK(cd_pt_int(root, "m", 0) == -3, "\"- 3\" is -3");
    CHECK(cd_pt_int(root, "n", 5) == 0, "-0");
    CHECK(cd_pt_int(root, "o", 0) == 9223372036854775807L, "int64 max");
    CHECK(cd_pt_int(root, "zz", 42) == 42 && cd_pt_float(root, "zz", 1.5) == 1.5, "defaults");
    CHECK(cd_pt_int(NULL, "a", 3) == 3 && cd_pt_get(NULL, "a") == NULL && cd_pt_count(NULL, "a") == 0,
          "NULL message");
    cd_pt_free(root);
}

static void test_strings(void)
{
    const char *t = "a: \"x\\ty\\n\" 'z\\'q' \"\\x41\\101\\\\\\\"\\?\"\n"
                    "b: 'it''s' c: \"\\x4g\" d: \"\" e: \"caf\xc3\xa9\" f: \"#not a comment\" # a comment\n";
    cd_pt_node *root = parse_ok("strings", t);
    if (!root)
        return;
    static const struct {
        const char *key, *want, *what;
    } strs[] = {{"a", "x\ty\nz'qAA\\\"?", "escapes and joining"},
                {"b", "its", "adjacent single-quoted strings"},
                {"c", "\x04g", "one hex digit"},
                {"d", "", "empty string"},
                {"e", "caf\xc3\xa9", "UTF-8 kept"},
                {"f", "#not a comment", "# inside a string"}};
    for (size_t i = 0; i < CD_ARRAY_LEN(strs); i++) {
        const char *got = cd_pt_str(root, strs[i].key, "(absent)");
        CHECK(strcmp(got, strs[i].want) == 0, "%s: [%s]", strs[i].what, got);
    }
    CHECK(cd_pt_get(root, "a")->kind == CD_PT_STRING, "string kind");
    CHECK(cd_pt_count(root, "a") == 1, "joined strings make one field");
    cd_pt_free(root);
}

static void test_bools_and_lists(void)
{
    const char *t = "a: true b: false c: True d: False e: 1 f: 0 g: 2 h: \"true\" m { }\n"
                    "dim: [1, 2, 3] layer [ { name: \"x\" }, < name: \"y\" > ] empty: []\n";
    cd_pt_node *root = parse_ok("bools", t);
    if (!root)
        return;
    static const struct { const char *name; int want; } cases[] = {
        {"a", 1}, {"b", 0}, {"c", 1}, {"d", 0}, {"e", 1}, {"f", 0}, {"g", -1}, {"h", -1},
        {"m", -1}, {"absent", -1}};
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++)
        CHECK(cd_pt_bool(root, cases[i].name, -1) == cases[i].want, "bool %s", cases[i].name);
    CHECK(strcmp(cd_pt_str(root, "m", "def"), "def") == 0, "a message has no string value");
    CHECK(strcmp(cd_pt_str(root, "g", "def"), "2") == 0, "a number's text");
    CHECK(cd_pt_count(root, "dim") == 3 && cd_pt_int(root, "dim", 0) == 1,
          "list of values");
    CHECK(strcmp(cd_pt_nth(root, "dim", 2)->text, "3") == 0, "third list element");
    CHECK(cd_pt_nth(root, "dim", 1)->line == 2 && cd_pt_nth(root, "dim", 1)->col == 1,
          "list elements carry the field's position");
    CHECK(cd_pt_count(root, "layer") == 2, "list of messages");
    CHECK(strcmp(cd_pt_str(cd_pt_nth(root, "layer", 1), "name", ""), "y") == 0, "<> in a list");
    CHECK(cd_pt_count(root, "empty") == 0, "empty list");
    cd_pt_free(root);

    root = parse("input_shape { dim: [1, 3, 227, 227] } layer: [{ name: \"a\" type: \"Input\" }]");
    CHECK(root && cd_pt_validate(root, &cd_pt_net_parameter, "n", g_err, sizeof g_err) == CD_OK,
          "lists validate: %s", g_err);
    cd_pt_free(root);
}

/* Fresh random values written as text and read back: ints (decimal and hex), floats
 * printed with 17 digits, strings with every kind of escape and raw high bytes. */
static void test_round_trip(void)
{
    enum { N = 64 };
    long long ints[N];
    double floats[N];
    char strs[N][24];
    char *text = cd_xmalloc(N * 200);
    size_t o = 0;
    for (int i = 0; i < N; i++) {
        ints[i] = (long long)(cd_test_rand_u64() >> (1 + cd_test_rand_u64() % 63));
        if (cd_test_rand_u64() & 1)
            ints[i] = -ints[i];
        floats[i] = cd_test_gauss() * pow(10.0, cd_test_uniform(-30, 30));
        int hex = ints[i] >= 0 && (i & 1);
        o += (size_t)sprintf(text + o, hex ? "i%d: 0x%llx " : "i%d: %lld ", i, ints[i]);
        o += (size_t)sprintf(text + o, "f%d: %.17g s%d: \"", i, floats[i], i);
        size_t n = 1 + cd_test_rand_u64() % (sizeof strs[i] - 1);
        for (size_t k = 0; k < n; k++) {
            unsigned char c = (unsigned char)(1 + cd_test_rand_u64() % 255);
            strs[i][k] = (char)c;
            int how = (int)(cd_test_rand_u64() % 3);
            if (c == '\n' || c == '"' || c == '\\' || how == 0)
                o += (size_t)sprintf(text + o, "\\x%02x", c);
            else if (how == 1)
                o += (size_t)sprintf(text + o, "\\%03o", c);
            else
                text[o++] = (char)c;
        }
        strs[i][n] = 0;
        o += (size_t)sprintf(text + o, "\"\n");
    }
    cd_pt_node *root = parse_n(text, o, "rt.prototxt");
    free(text);
    CHECK(root != NULL, "round trip parse: %s", g_err);
    if (!root)
        return;
    int bad_i = 0, bad_f = 0, bad_s = 0;
    for (int i = 0; i < N; i++) {
        char name[16];
        cd_fmt(name, sizeof name, "i%d", i);
        bad_i += cd_pt_int(root, name, 0) != ints[i];
        cd_fmt(name, sizeof name, "f%d", i);
        bad_f += cd_pt_float(root, name, 0) != floats[i];
        cd_fmt(name, sizeof name, "s%d", i);
        bad_s += strcmp(cd_pt_str(root, name, ""), strs[i]) != 0;
    }
    CHECK(bad_i == 0 && bad_f == 0 && bad_s == 0, "round trip mismatches: %d ints, %d floats, %d strings",
          bad_i, bad_f, bad_s);
    cd_pt_free(root);
}

/* Every message and enum of the schema once, as Caffe files write them: a typo in a
 * table shows up here as an unknown field or enum value. */
static const char every_field[] =
    "name: \"all\" input: \"data\" input_dim: 1 input_dim: 3 force_backward: false debug_info: 0\n"
    "input_shape { dim: 1 dim: 3 }\n"
    "state { phase: TEST level: 2 stage: \"deploy\" stage: \"x\" }\n"
    "layer { name: \"d\" type: \"Data\" top: \"data\" phase: TRAIN loss_weight: 0.5 loss_weight: 1\n"
    "  param { name: \"w\" share_mode: PERMISSIVE lr_mult: 1 decay_mult: 0 } propagate_down: false\n"
    "  include { phase: TRAIN min_level: 0 max_level: 3 stage: \"train\" not_stage: \"deploy\" }\n"
    "  exclude { phase: TEST }\n"
    "  transform_param { scale: 0.00390625 mirror: true crop_size: 227 mean_file: \"mean.binaryproto\"\n"
    "    mean_value: 104 mean_value: 117 mean_value: 123 force_color: false force_gray: false }\n"
    "  loss_param { ignore_label: 255 normalization: BATCH_SIZE normalize: true }\n"
    "  data_param { source: \"train_db\" batch_size: 32 rand_skip: 0 backend: LEVELDB scale: 1 mean_file: \"m\"\n"
    "    crop_size: 0 mirror: false force_encoded_color: false prefetch: 4 } }\n"
    "layer { accuracy_param { top_k: 5 axis: 1 ignore_label: -1 } }\n"
    "layer { batch_norm_param { use_global_stats: false moving_average_fraction: 0.999 eps: 1e-5 } }\n"
    "layer { bias_param { axis: 1 num_axes: 1 filler { type: \"constant\" value: 0 } } }\n"
    "layer { concat_param { axis: 1 concat_dim: 1 } }\n"
    "layer { convolution_param { num_output: 96 bias_term: true pad: 1 kernel_size: 3 kernel_size: 3\n"
    "  stride: 1 dilation: 1 pad_h: 0 pad_w: 0 kernel_h: 3 kernel_w: 3 stride_h: 1 stride_w: 1 group: 2\n"
    "  weight_filler { type: \"msra\" variance_norm: FAN_OUT } bias_filler { type: \"uniform\" min: -1 max: 1 }\n"
    "  engine: CUDNN axis: 1 force_nd_im2col: false } }\n"
    "layer { dropout_param { dropout_ratio: 0.5 } }\n"
    "layer { eltwise_param { operation: MAX coeff: 1 stable_prod_grad: true } }\n"
    "layer { flatten_param { axis: 1 end_axis: -1 } }\n"
    "layer { inner_product_param { num_output: 10 bias_term: true axis: 1 transpose: false\n"
    "  weight_filler { type: \"gaussian\" mean: 0 std: 0.01 sparse: 5 variance_norm: AVERAGE }\n"
    "  bias_filler { type: \"constant\" value: 0.1 } } }\n"
    "layer { input_param { shape { dim: 10 dim: 3 dim: 224 dim: 224 } } }\n"
    "layer { lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 norm_region: WITHIN_CHANNEL k: 1 engine: CAFFE } }\n"
    "layer { pooling_param { pool: STOCHASTIC pad: 0 pad_h: 0 pad_w: 0 kernel_size: 3 kernel_h: 3 kernel_w: 3\n"
    "  stride: 2 stride_h: 2 stride_w: 2 engine: DEFAULT global_pooling: false round_mode: FLOOR } }\n"
    "layer { power_param { power: 1 scale: 0.0125 shift: 0 } }\n"
    "layer { relu_param { negative_slope: 0.1 engine: CAFFE } }\n"
    "layer { scale_param { axis: 1 num_axes: 1 filler { value: 1 } bias_term: true bias_filler { value: 0 } } }\n"
    "layer { sigmoid_param { engine: CUDNN } }\n"
    "layer { softmax_param { axis: 1 engine: CAFFE } }\n"
    "layer { tanh_param { engine: DEFAULT } }\n";

static const char every_solver_field[] =
    "net: \"n\" net_param { name: \"inline\" } train_net: \"t\" test_net: \"v\" train_state { phase: TRAIN }\n"
    "test_state { stage: \"val\" } test_iter: 10 test_interval: 100 test_compute_loss: false\n"
    "test_initialization: true base_lr: 0.01 display: 20 average_loss: 10 max_iter: 1000 iter_size: 1\n"
    "lr_policy: \"multistep\" gamma: 0.1 power: 0.75 momentum: 0.9 weight_decay: 5e-4\n"
    "regularization_type: \"L2\" stepsize: 100 stepvalue: 300 stepvalue: 600 clip_gradients: -1\n"
    "snapshot: 500 snapshot_prefix: \"s\" snapshot_diff: false snapshot_format: BINARYPROTO\n"
    "snapshot_after_train: true solver_mode: CPU device_id: 0 random_seed: -1 type: \"SGD\" delta: 1e-8\n"
    "momentum2: 0.999 rms_decay: 0.99 debug_info: false solver_type: NESTEROV weights: \"w.caffemodel\"\n";

static void test_every_field(void)
{
    cd_pt_node *root = parse(every_field);
    CHECK(root && cd_pt_validate(root, &cd_pt_net_parameter, "all", g_err, sizeof g_err) == CD_OK,
          "every NetParameter field: %s", g_err);
    cd_pt_free(root);
    root = parse(every_solver_field);
    CHECK(root && cd_pt_validate(root, &cd_pt_solver_parameter, "solver", g_err, sizeof g_err) == CD_OK,
          "every SolverParameter field: %s", g_err);
    cd_pt_free(root);
}

enum { NONE, NET, SOLVER };

/* One bad input: where the error must point and words it must contain. */
typedef struct {
    const char *text;
    int schema;
    const char *where; /* "LINE:COL" */
    const char *words[3];
} error_case;

static const error_case error_cases[] = {
    /* structure */
    {"layer {\n  name: \"a\"\n", NONE, "3:1",
     {"unexpected end of file inside \"layer\" opened at 1:1; expected \"}\""}},
    {"a { b { c: 1 }", NONE, "1:15", {"end of file inside \"a\" opened at 1:1", "expected \"}\""}},
    {"a { b: 1 >", NONE, "1:10", {"unexpected \">\" inside \"a\" opened at 1:1", "expected a field name or \"}\""}},
    {"}", NONE, "1:1", {"unexpected \"}\" at the top level", "expected a field name"}},
    {"-", NONE, "1:1", {"unexpected \"-\" at the top level"}},
    {"name \"x\"", NONE, "1:6", {"string \"x\" after field name \"name\"", "expected \":\" or \"{\""}},
    {"a: 5 b", NONE, "1:7", {"end of file after field name \"b\"", "expected \":\""}},
    {"a: ", NONE, "1:4", {"end of file after \"a:\"", "expected a value"}},
    {"a: 1 @", NONE, "1:6", {"unexpected character \"@\"", "expected"}},
    {"a: 1\n\xff", NONE, "2:1", {"unexpected character \"\\xFF\""}},
    {"a: - b", NONE, "1:6", {"identifier b after \"-\"", "expected a number"}},
    {"a: [1, 2", NONE, "1:9", {"end of file in the list opened at 1:4", "expected \",\" or \"]\""}},
    {"a [1]", NONE, "1:4", {"number 1 in a list without \":\"", "expected \"{\""}},
    /* strings */
    {"name: \"abc\nlayer {}", NONE, "1:7", {"unterminated string", "end of the line", "expected a closing \""}},
    {"name: 'abc", NONE, "1:7", {"unterminated string", "end of file", "expected a closing '"}},
    {"a: \"\\q\"", NONE, "1:5", {"unknown escape \"\\q\"", "expected one of \\n"}},
    {"a: \"x\\0y\"", NONE, "1:6", {"NUL byte", "expected no NUL"}},
    {"a: \"\\777\"", NONE, "1:5", {"octal escape \\777 is larger than a byte", "expected \\000 to \\377"}},
    {"a: \"\\xZ\"", NONE, "1:5", {"without hex digits", "expected \\xHH"}},
    /* numbers */
    {"a: 1.2.3", NONE, "1:4", {"malformed number \"1.2.3\"", "expected a number"}},
    {"a: 1e", NONE, "1:4", {"malformed number \"1e\""}},
    {"a: 1e+x", NONE, "1:4", {"malformed number \"1e+x\""}},
    {"a: 0x", NONE, "1:4", {"malformed number \"0x\""}},
    {"a: 12abc", NONE, "1:4", {"malformed number \"12abc\""}},
    /* schema */
    {"layer { convolution_param { kernal_size: 3 } }", NET, "1:29",
     {"unknown field \"kernal_size\" in ConvolutionParameter; expected one of: num_output, bias_term, pad,",
      "(closest: \"kernel_size\")"}},
    {"layer { name: \"x\" }\nlayers { }", NET, "2:1", {"unknown field \"layers\" in NetParameter", "layer"}},
    {"layer { convolution_param: 5 }", NET, "1:9",
     {"field \"convolution_param\" in LayerParameter given number 5", "expected a ConvolutionParameter message"}},
    {"layer { convolution_param { num_output { } } }", NET, "1:29",
     {"field \"num_output\" in ConvolutionParameter given a message", "expected a non-negative integer"}},
    {"layer { bottom { } }", NET, "1:9", {"\"bottom\" in LayerParameter given a message", "quoted string"}},
    {"layer { inner_product_param { num_output: 1.5 } }", NET, "1:31",
     {"given number 1.5, which is not an integer", "expected a non-negative integer (uint32)"}},
    {"layer { convolution_param { num_output: inf } }", NET, "1:29", {"number inf, which is not an integer"}},
    {"layer { convolution_param { group: -2 } }", NET, "1:29",
     {"given number -2, which is out of range", "from 0 to 4294967295"}},
    {"layer { loss_param { ignore_label: 3000000000 } }", NET, "1:22",
     {"out of range", "from -2147483648 to 2147483647"}},
    {"input_shape { dim: 99999999999999999999 }", NET, "1:15", {"out of range", "int64"}},
    {"layer { pooling_param { pool: MAXX } }", NET, "1:25",
     {"field \"pool\" in PoolingParameter given identifier MAXX", "expected one of: MAX, AVE, STOCHASTIC"}},
    {"layer { pooling_param { pool: 0 } }", NET, "1:25", {"given number 0", "expected one of: MAX, AVE"}},
    {"layer { pooling_param { pool: \"MAX\" } }", NET, "1:25", {"given string \"MAX\"", "expected one of"}},
    {"layer {\n name: \"a\"\n name: \"b\"\n}", NET, "3:2",
     {"field \"name\" given again in LayerParameter (first at 2:2)", "expected it at most once"}},
    {"layer { type: Convolution }", NET, "1:9",
     {"given identifier Convolution", "expected a quoted string: type: \"Convolution\""}},
    {"force_backward: 2", NET, "1:1", {"given number 2", "expected true or false"}},
    {"force_backward: yes", NET, "1:1", {"given identifier yes", "expected true or false"}},
    {"layer { include { phase: VAL } }", NET, "1:19", {"identifier VAL", "expected one of: TRAIN, TEST"}},
    {"solver_mode: TPU", SOLVER, "1:1", {"in SolverParameter given identifier TPU", "expected one of: CPU, GPU"}},
    {"base_lr: \"0.01\"", SOLVER, "1:1", {"given string \"0.01\"", "expected a number"}},
};

static int has_position(const char *err, const char *file, const char *where)
{
    char prefix[128];
    cd_fmt(prefix, sizeof prefix, "%s:%s: ", file, where);
    return strncmp(err, prefix, strlen(prefix)) == 0;
}

static void test_errors(void)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(error_cases); i++) {
        const error_case *c = &error_cases[i];
        const char *file = c->schema ? "lenet.prototxt" : "t.prototxt";
        g_err[0] = 0;
        cd_pt_node *root = parse_n(c->text, strlen(c->text), file);
        int failed = root == NULL;
        if (root && c->schema) {
            const cd_pt_message *m = c->schema == NET ? &cd_pt_net_parameter : &cd_pt_solver_parameter;
            failed = cd_pt_validate(root, m, file, g_err, sizeof g_err) != CD_OK;
        }
        CHECK(failed, "case %zu [%s] should fail", i, c->text);
        CHECK(has_position(g_err, file, c->where), "case %zu: want %s:%s, got: %s", i, file, c->where, g_err);
        CHECK(strstr(g_err, "; ") != NULL, "case %zu: found; expected: %s", i, g_err);
        for (int w = 0; w < 3 && c->words[w]; w++)
            CHECK(strstr(g_err, c->words[w]) != NULL, "case %zu: want [%s] in: %s", i, c->words[w], g_err);
        cd_pt_free(root);
    }
    /* err may be NULL: still an error, no crash */
    CHECK(cd_pt_parse("}", 1, "x", NULL, 0) == NULL, "NULL err buffer");
    CHECK(cd_pt_validate(NULL, &cd_pt_net_parameter, "x", g_err, sizeof g_err) == CD_ERR, "NULL tree");
    /* a tiny buffer gets a truncated, terminated message */
    char tiny[8];
    CHECK(cd_pt_parse("}", 1, "file.prototxt", tiny, sizeof tiny) == NULL && strlen(tiny) == 7, "tiny err");
}

static char *nested(int depth, size_t *len)
{
    char *t = cd_xmalloc((size_t)depth * 3 + 8);
    size_t o = 0;
    for (int i = 0; i < depth; i++) {
        t[o++] = 'a';
        t[o++] = '{';
    }
    memcpy(t + o, "b:1", 3);
    o += 3;
    for (int i = 0; i < depth; i++)
        t[o++] = '}';
    *len = o;
    return t;
}

static void test_limits(void)
{
    size_t len;
    char *t = nested(CD_PT_MAX_DEPTH, &len);
    cd_pt_node *root = parse_n(t, len, "deep");
    free(t);
    CHECK(root != NULL, "%d levels parse: %s", CD_PT_MAX_DEPTH, g_err);
    cd_pt_free(root);

    t = nested(CD_PT_MAX_DEPTH + 1, &len);
    root = parse_n(t, len, "deep");
    free(t);
    CHECK(root == NULL && has_position(g_err, "deep", "1:129") && strstr(g_err, "nested 65 levels deep") &&
          strstr(g_err, "expected at most 64"), "65 levels: %s", g_err);

    t = nested(1000000, &len); /* would overflow the stack of a naive recursive parser */
    root = parse_n(t, len, "deep");
    free(t);
    CHECK(root == NULL && strstr(g_err, "expected at most 64"), "a million levels: %s", g_err);

    len = CD_PT_MAX_BYTES + 1;
    t = cd_xmalloc(len);
    memset(t, ' ', len);
    root = cd_pt_parse(t, len, "big", g_err, sizeof g_err);
    CHECK(root == NULL && has_position(g_err, "big", "1:1") && strstr(g_err, "expected at most"), "big: %s", g_err);
    root = cd_pt_parse(t, CD_PT_MAX_BYTES, "big", g_err, sizeof g_err);
    CHECK(root != NULL && root->child == NULL, "16 MiB of spaces is an empty file: %s", g_err);
    cd_pt_free(root);
    free(t);

    root = cd_pt_parse(NULL, 0, "empty", g_err, sizeof g_err);
    CHECK(root != NULL && root->child == NULL, "empty input");
    CHECK(root && cd_pt_validate(root, &cd_pt_net_parameter, "empty", g_err, sizeof g_err) == CD_OK, "empty valid");
    cd_pt_free(root);
}

/* Random token soup and raw bytes: every outcome is a tree or a positioned error. */
static void test_garbage(void)
{
    static const char *const pieces[] = {
        "layer", "{", "}", "<", ">", "[", "]", ":", ",", ";", "\"", "'", "\\", "#", "\n", " ",
        "-", "1", ".", "e", "0x", "inf", "name", "convolution_param", "num_output", "pool",
        "MAX", "true", "\"s\"", "\\x", "\\0", "\\777", "1e+", "5f", "layer {", "type: \"Data\""};
    int ok = 0, failed = 0, bad_msg = 0;
    char text[512];
    for (int iter = 0; iter < 4000; iter++) {
        size_t n = 0, want = cd_test_rand_u64() % 300;
        while (n < want) {
            if (cd_test_rand_u64() % 8 == 0) {
                text[n++] = (char)(cd_test_rand_u64() & 0xff);
                continue;
            }
            const char *p = pieces[cd_test_rand_u64() % CD_ARRAY_LEN(pieces)];
            size_t k = strlen(p);
            if (n + k > sizeof text)
                break;
            memcpy(text + n, p, k);
            n += k;
        }
        cd_pt_node *root = parse_n(text, n, "g.prototxt");
        if (root && cd_pt_validate(root, &cd_pt_net_parameter, "g.prototxt", g_err, sizeof g_err) == CD_OK)
            ok++;
        else {
            failed++;
            bad_msg += strncmp(g_err, "g.prototxt:", 11) != 0 || !strstr(g_err, "; expected");
        }
        cd_pt_free(root);
    }
    CHECK(failed > 0 && bad_msg == 0, "garbage: %d ok, %d failed, %d without FILE:LINE:COL and expected",
          ok, failed, bad_msg);
}

static void test_solver_and_files(void)
{
    const char *solver = "net: \"train_val.prototxt\"\ntest_iter: 100 test_interval: 500\n"
                         "base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005\n"
                         "lr_policy: \"step\" gamma: 0.1 stepsize: 10000 max_iter: 30000\n"
                         "display: 100 snapshot: 5000 snapshot_prefix: \"snapshot\"\n"
                         "solver_mode: GPU random_seed: 12345678901 type: \"Adam\" solver_type: ADAM\n";
    cd_pt_node *root = parse(solver);
    CHECK(root && cd_pt_validate(root, &cd_pt_solver_parameter, "solver.prototxt", g_err, sizeof g_err) == CD_OK,
          "solver: %s", g_err);
    CHECK(cd_pt_int(root, "random_seed", 0) == 12345678901L, "int64 seed");
    CHECK(strcmp(cd_pt_str(root, "solver_mode", ""), "GPU") == 0, "solver_mode");
    CHECK_NEAR(cd_pt_float(root, "weight_decay", 0), 0.0005, 1e-18, "weight_decay");
    cd_pt_free(root);

    CHECK(cd_pt_find_field(&cd_pt_net_parameter, "layer") &&
          cd_pt_find_field(&cd_pt_net_parameter, "layer")->repeated &&
          !cd_pt_find_field(&cd_pt_net_parameter, "layers"), "find_field");

    char path[1024];
    cd_fmt(path, sizeof path, "%s/lenet.prototxt", cd_test_tmpdir());
    CHECK(cd_write_file_atomic(path, lenet, strlen(lenet)) == CD_OK, "write %s", path);
    root = cd_pt_parse_file(path, g_err, sizeof g_err);
    CHECK(root && cd_pt_count(root, "layer") == 5, "parse_file: %s", g_err);
    if (root) {
        const cd_pt_node *cp = cd_pt_get(cd_pt_nth(root, "layer", 1), "convolution_param");
        cd_pt_error_at(cp, path, g_err, sizeof g_err, "kernel_size %d is larger than its %dx%d input; %s",
                       7, 4, 4, "lower kernel_size or pad");
        char want[1100];
        cd_fmt(want, sizeof want, "%s:14:3: kernel_size 7 is larger", path);
        CHECK(strncmp(g_err, want, strlen(want)) == 0, "error_at: %s", g_err);
    }
    cd_pt_free(root);
    unlink(path);
    cd_fmt(path, sizeof path, "%s/missing.prototxt", cd_test_tmpdir());
    root = cd_pt_parse_file(path, g_err, sizeof g_err);
    CHECK(root == NULL && strstr(g_err, "missing.prototxt: cannot read") && strstr(g_err, "; expected"),
          "missing file: %s", g_err);
    root = cd_pt_parse_file(cd_test_tmpdir(), g_err, sizeof g_err);
    CHECK(root == NULL && strstr(g_err, "is a directory; expected"), "directory: %s", g_err);
    rmdir(cd_test_tmpdir());
}

/* The standard networks shipped in models/ must validate as they are. */
static void test_models(void)
{
    const char *dir = cd_test_source_path("models");
    DIR *d = opendir(dir);
    int n = 0;
    CHECK(d != NULL, "cannot open %s", dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 10 || strcmp(e->d_name + len - 9, ".prototxt") != 0)
            continue;
        char path[4200];
        cd_fmt(path, sizeof path, "%s/%s", dir, e->d_name);
        cd_pt_node *root = cd_pt_parse_file(path, g_err, sizeof g_err);
        const cd_pt_message *m = strstr(e->d_name, "solver") ? &cd_pt_solver_parameter : &cd_pt_net_parameter;
        CHECK(root && cd_pt_validate(root, m, path, g_err, sizeof g_err) == CD_OK, "%s", g_err);
        cd_pt_free(root);
        n++;
    }
    if (d)
        closedir(d);
    printf("test_prototxt: validated %d files in models/\n", n);
    CHECK(n > 0, "no .prototxt files in %s", dir);
}

/* The count of layers of type in net. */
static int count_type(const cd_net *net, const char *type)
{
    int n = 0;
    for (int i = 0; i < net->nlayers; i++)
        n += !strcmp(net->layers[i]->type->name, type);
    return n;
}

/* DIGITS's data layers: a network that names no source of data gets a Data layer with
 * tops data and label in train and val, and an input "data" of the image shape in
 * deploy; one with its own Data layers keeps them. Shapes, batch and crop are drawn. */
static void test_digits_data_layers(void)
{
    static const char body[] =
        "name: \"nodata\"\n"
        "layer { name: \"ip1\" type: \"InnerProduct\" bottom: \"data\" top: \"ip1\" }\n"
        "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip1\" bottom: \"label\" top: \"loss\"\n"
        "        exclude { stage: \"deploy\" } }\n"
        "layer { name: \"prob\" type: \"Softmax\" bottom: \"ip1\" top: \"prob\" include { stage: \"deploy\" } }\n";
    static const char own[] =
        "layer { name: \"train-data\" type: \"Data\" top: \"data\" top: \"label\" include { stage: \"train\" }\n"
        "        data_param { batch_size: 4 } }\n";
    char path[4200], own_path[4200], text[2048];
    /* test_solver_and_files removes the folder; this test writes its files there again */
    CHECK(mkdir(cd_test_tmpdir(), 0700) == 0 || errno == EEXIST, "cannot make %s", cd_test_tmpdir());
    cd_fmt(path, sizeof path, "%s/nodata.prototxt", cd_test_tmpdir());
    cd_fmt(own_path, sizeof own_path, "%s/own.prototxt", cd_test_tmpdir());
    CHECK(cd_test_write("nodata.prototxt", body) == CD_OK, "write %s", path);
    cd_fmt(text, sizeof text, "%s%s", own, body);
    CHECK(cd_test_write("own.prototxt", text) == CD_OK, "write %s", own_path);
    for (int trial = 0; trial < 8; trial++) {
        int c = cd_test_rand_u64() & 1 ? 3 : 1, h = 6 + (int)(cd_test_rand_u64() % 20);
        int w = 6 + (int)(cd_test_rand_u64() % 20), classes = 2 + (int)(cd_test_rand_u64() % 8);
        int batch = cd_test_rand_u64() & 1 ? 1 + (int)(cd_test_rand_u64() % 64) : 0;
        int crop = cd_test_rand_u64() & 1 ? 1 + (int)(cd_test_rand_u64() % (unsigned)(h < w ? h : w)) : 0;
        static const char *const stages[] = {"train", "val", "deploy"};
        for (int s = 0; s < 3; s++) {
            cd_net_opts o = {.stage = stages[s], .batch = batch, .input_c = c, .input_h = h, .input_w = w,
                             .crop = crop, .num_classes = classes, .seed = cd_test_rand_u64()};
            cd_net *net = cd_net_load(path, &o, g_err, sizeof g_err);
            CHECK(net != NULL, "stage %s of a network without Data layers: %s", stages[s], g_err);
            if (!net)
                continue;
            int ih = crop ? crop : h, iw = crop ? crop : w;
            const cd_layer *first = net->layers[0];
            if (s < 2) {
                int n = batch ? batch : 16; /* DIGITS's default batch */
                CHECK(!strcmp(first->type->name, "Data") && !strcmp(first->name, "data") && first->ntop == 2,
                      "stage %s starts with %s (%s), %d tops; want the Data layer data", stages[s], first->name,
                      first->type->name, first->ntop);
                CHECK(count_type(net, "Data") == 1, "stage %s has %d Data layers", stages[s], count_type(net, "Data"));
                if (first->ntop == 2) {
                    const cd_blob *d = first->top[0], *l = first->top[1];
                    CHECK(!strcmp(d->name, "data") && !strcmp(l->name, "label"), "tops %s, %s", d->name, l->name);
                    CHECK(d->ndim == 4 && d->dims[0] == n && d->dims[1] == c && d->dims[2] == ih && d->dims[3] == iw,
                          "stage %s: data is %dx%dx%dx%d, want %dx%dx%dx%d", stages[s], d->dims[0], d->dims[1],
                          d->dims[2], d->dims[3], n, c, ih, iw);
                    CHECK(l->dims[0] == n, "stage %s: label has %d values, want %d", stages[s], l->dims[0], n);
                }
            } else {
                int n = batch ? batch : 1;
                CHECK(count_type(net, "Data") == 0 && !strcmp(first->type->name, "Input") && first->ntop == 1 &&
                          !strcmp(first->top[0]->name, "data"),
                      "deploy starts with %s (%s); want the input data", first->name, first->type->name);
                const cd_blob *d = first->top[0];
                CHECK(d->ndim == 4 && d->dims[0] == n && d->dims[1] == c && d->dims[2] == ih && d->dims[3] == iw,
                      "deploy: data is %dx%dx%dx%d, want %dx%dx%dx%d", d->dims[0], d->dims[1], d->dims[2],
                      d->dims[3], n, c, ih, iw);
            }
            cd_net_free(net);
        }
        /* a network with its own Data layer keeps it, and gets no other */
        cd_net_opts o = {.stage = "train", .input_c = c, .input_h = h, .input_w = w, .num_classes = classes};
        cd_net *net = cd_net_load(own_path, &o, g_err, sizeof g_err);
        CHECK(net != NULL, "a network with its Data layer: %s", g_err);
        if (net) {
            CHECK(count_type(net, "Data") == 1 && !strcmp(net->layers[0]->name, "train-data") &&
                      net->layers[0]->top[0]->dims[0] == 4,
                  "the network's own Data layer was not kept alone: first %s, %d Data layers", net->layers[0]->name,
                  count_type(net, "Data"));
            cd_net_free(net);
        }
    }
}

int main(void)
{
    cd_test_init("test_prototxt");
    test_lenet();
    test_numbers();
    test_strings();
    test_bools_and_lists();
    test_round_trip();
    test_every_field();
    test_errors();
    test_limits();
    test_garbage();
    test_solver_and_files();
    test_models();
    test_digits_data_layers();
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
