/*
 * Inference (infer.h) on a model job made here on the CPU with random weights:
 *   - the export gives a deploy.prototxt that, with the exported weights, labels and
 *     mean as a model of its own, classifies fresh random images exactly as the
 *     original job (so the deploy writer keeps every layer, shape and num_output);
 *   - the batch net agrees with one image at a time, a short last batch included;
 *   - run_layers reports every layer's output (the last is the probabilities), the
 *     parameters and their count, and a convolution's output before its in-place ReLU;
 *   - the prototxt writer round-trips LeNet and escaped strings; the solver writer's
 *     text validates as Caffe's SolverParameter with the policy in iterations;
 *   - snapshot epochs come from the worker's snapshot lines, and a missing epoch names
 *     the ones there are;
 *   - weights taken by name and shape: a last layer of another number of classes keeps
 *     its fillers while the others are taken (what starting from a pretrained model
 *     relies on);
 *   - cd_topk against a full sort, ties included.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/infer.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"

#define CLASSES 3
#define C 3
#define H 10
#define W 10
#define CROP 8

/* A one-file network in DIGITS's form: Data layers for train and val (their tops are the
 * deploy stage's input), a convolution with an in-place ReLU, pooling, an InnerProduct
 * without num_output (the dataset's classes), the loss excluded from deploy. */
static const char net_text[] =
    "name: \"infer-test\"\n"
    "layer { name: \"train-data\" type: \"Data\" top: \"data\" top: \"label\" include { stage: \"train\" }\n"
    "  data_param { batch_size: 4 } transform_param { crop_size: 8 } }\n"
    "layer { name: \"val-data\" type: \"Data\" top: \"data\" top: \"label\" include { stage: \"val\" }\n"
    "  data_param { batch_size: 4 } transform_param { crop_size: 8 } }\n"
    "layer { name: \"scale\" type: \"Power\" bottom: \"data\" top: \"scaled\" power_param { scale: 0.02 } }\n"
    "layer { name: \"conv1\" type: \"Convolution\" bottom: \"scaled\" top: \"conv1\"\n"
    "  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: \"gaussian\" std: 0.3 }\n"
    "    bias_filler { type: \"gaussian\" std: 0.2 } } }\n"
    "layer { name: \"relu1\" type: \"ReLU\" bottom: \"conv1\" top: \"conv1\" }\n"
    "layer { name: \"pool1\" type: \"Pooling\" bottom: \"conv1\" top: \"pool1\"\n"
    "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
    "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"pool1\" top: \"ip\"\n"
    "  inner_product_param { weight_filler { type: \"gaussian\" std: 0.3 } bias_filler { type: \"gaussian\" std: 0.1 } } }\n"
    "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\"\n"
    "  exclude { stage: \"deploy\" } }\n"
    "layer { name: \"prob\" type: \"Softmax\" bottom: \"ip\" top: \"prob\" include { stage: \"deploy\" } }\n";

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (cd_write_file_atomic(path, text, strlen(text)) != CD_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* A model job in dir with random weights saved as snapshot_iter_12 (epoch 2). */
static void make_job(const char *dir)
{
    char err[1024], path[4200], text[8192];
    mkdir(dir, 0755);
    write_text(dir, "network.prototxt", net_text);
    snprintf(text, sizeof text,
             "{\"dataset_dir\": \"%s\", \"network\": \"network.prototxt\", \"epochs\": 2, \"learning_rate\": 0.1,"
             " \"lr_policy\": {\"policy\": \"step\", \"stepsize\": 33, \"gamma\": 0.5}, \"use_mean\": \"image\"}",
             dir);
    write_text(dir, "train.json", text);
    write_text(dir, "dataset.json", "{\"channels\": 3, \"width\": 10, \"height\": 10, \"resize_mode\": \"squash\"}");
    write_text(dir, "labels.txt", "red\ngreen\nblue\n");
    float mean[C * H * W];
    cd_test_fill_uniform(mean, C * H * W, 60, 200);
    snprintf(path, sizeof path, "%s/mean.bin", dir);
    CHECK(cd_mean_save(path, C, H, W, 100, mean, err, sizeof err) == CD_OK, "mean.bin: %s", err);
    write_text(dir, "worker.out.jsonl",
               "{\"type\":\"snapshot\",\"epoch\":1.0,\"iteration\":6,\"file\":\"snapshot_iter_6.cdw\"}\n"
               "{\"type\":\"metric\",\"phase\":\"train\",\"name\":\"loss\",\"value\":1}\n"
               "{\"type\":\"snapshot\",\"epoch\":2.0,\"iteration\":12,\"file\":\"snapshot_iter_12.cdw\"}\n");
    cd_net_opts o = {.stage = "train", .batch = 4, .input_c = C, .input_h = H, .input_w = W,
                     .num_classes = CLASSES, .seed = cd_test_rand_u64()};
    snprintf(path, sizeof path, "%s/network.prototxt", dir);
    cd_net *net = cd_net_load(path, &o, err, sizeof err);
    CHECK(net != NULL, "train net: %s", err);
    cd_backend_t *be = cd_backend_cpu_new(1);
    CHECK(net && cd_net_alloc(net, be, NULL, err, sizeof err) == CD_OK, "alloc: %s", err);
    snprintf(path, sizeof path, "%s/snapshot_iter_12.cdw", dir);
    CHECK(net && cd_snapshot_save_weights(net, path, err, sizeof err) == CD_OK, "save: %s", err);
    snprintf(path, sizeof path, "%s/snapshot_iter_6.cdw", dir);
    CHECK(net && cd_snapshot_save_weights(net, path, err, sizeof err) == CD_OK, "save: %s", err);
    cd_net_free(net);
    cd_backend_free(be);
}

static void random_image(cd_image_t *img, int c, int h, int w)
{
    char err[256];
    cd_image_alloc(img, c, h, w, err, sizeof err);
    for (size_t i = 0; i < (size_t)c * h * w; i++)
        img->data[i] = (uint8_t)(cd_test_rand_u64() & 255);
}

static void test_export_roundtrip(const char *job, const char *out, const char *copy)
{
    char err[1024], names[16][64];
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(c != NULL, "open: %s", err);
    if (!c)
        return;
    CHECK(cd_classifier_iteration(c) == 12, "the newest snapshot is opened (%ld)", cd_classifier_iteration(c));
    mkdir(out, 0755);
    int n = cd_classifier_export(c, out, "exported", names, 16, err, sizeof err);
    CHECK(n == 7, "export wrote %d files (no mean.png here): %s", n, n < 0 ? err : "");
    /* the exported files as a model of their own: deploy.prototxt as its network */
    mkdir(copy, 0755);
    static const char *const files[] = {"labels.txt", "mean.bin", "snapshot_iter_12.cdw"};
    char src[4200], dst[4200], text[8192];
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", out, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", copy, files[i]);
        size_t len;
        char *data = cd_read_file(src, &len);
        CHECK(data && cd_write_file_atomic(dst, data, len) == CD_OK, "copy %s", files[i]);
        free(data);
    }
    snprintf(src, sizeof src, "%s/deploy.prototxt", out);
    char *deploy = cd_read_file(src, NULL);
    CHECK(deploy && strstr(deploy, "num_output: 3") && strstr(deploy, "dim: 1 dim: 3 dim: 8 dim: 8") &&
              !strstr(deploy, "SoftmaxWithLoss") && !strstr(deploy, "stage"),
          "deploy.prototxt: the Input of the crop's shape, num_output, no loss, no stage rules:\n%s", deploy);
    write_text(copy, "network.prototxt", deploy ? deploy : "");
    free(deploy);
    snprintf(text, sizeof text, "{\"dataset_dir\": \"%s\", \"network\": \"network.prototxt\", \"use_mean\": \"image\"}",
             copy);
    write_text(copy, "train.json", text);
    write_text(copy, "dataset.json", "{\"channels\": 3, \"width\": 10, \"height\": 10, \"resize_mode\": \"squash\"}");
    cd_classifier_t *d = cd_classifier_open(copy, 0, NULL, err, sizeof err);
    CHECK(d != NULL, "the exported model opens: %s", err);
    for (int t = 0; d && t < 4; t++) {
        cd_image_t img = {0};
        random_image(&img, t % 2 ? 1 : 3, 7 + t * 5, 12 + t); /* other sizes and channel counts */
        float p1[CLASSES], p2[CLASSES];
        int ok = cd_classifier_run(c, &img, p1, err, sizeof err) == CD_OK && cd_classifier_run(d, &img, p2, err, sizeof err) == CD_OK;
        CHECK(ok, "run: %s", err);
        CHECK(ok && !memcmp(p1, p2, sizeof p1), "image %d: the exported model gives %g %g %g, the job %g %g %g", t,
              p2[0], p2[1], p2[2], p1[0], p1[1], p1[2]);
        CHECK_NEAR(p1[0] + p1[1] + p1[2], 1.0, 1e-5, "probabilities add up to 1");
        cd_image_free(&img);
    }
    /* info.json */
    snprintf(src, sizeof src, "%s/info.json", out);
    char *info = cd_read_file(src, NULL);
    CHECK(info && strstr(info, "\"snapshot file\": \"snapshot_iter_12.cdw\"") && strstr(info, "\"snapshot epoch\": 2.0") &&
              strstr(info, "\"crop size\": 8") && strstr(info, "\"framework\": \"cdigits\""),
          "info.json: %s", info);
    free(info);
    /* solver.prototxt: Caffe's message, the policy in iterations (6 per epoch, 2 epochs) */
    snprintf(src, sizeof src, "%s/solver.prototxt", out);
    cd_pt_node *solver = cd_pt_parse_file(src, err, sizeof err);
    CHECK(solver && cd_pt_validate(solver, &cd_pt_solver_parameter, src, err, sizeof err) == CD_OK,
          "solver.prototxt validates: %s", err);
    CHECK(cd_pt_int(solver, "max_iter", 0) == 12 && cd_pt_int(solver, "stepsize", 0) == 4 &&
              fabs(cd_pt_float(solver, "gamma", 0) - 0.5) < 1e-9 && !strcmp(cd_pt_str(solver, "lr_policy", ""), "step"),
          "solver: max_iter %ld stepsize %ld (ceil(33%% of 12) = 4)", cd_pt_int(solver, "max_iter", 0),
          cd_pt_int(solver, "stepsize", 0));
    cd_pt_free(solver);
    cd_classifier_close(d);
    cd_classifier_close(c);
}

static void test_batch_and_layers(const char *job)
{
    char err[1024];
    cd_classifier_t *c = cd_classifier_open(job, 6, NULL, err, sizeof err);
    CHECK(c != NULL, "open at iteration 6: %s", err);
    if (!c)
        return;
    enum { N = 7, B = 4 };
    cd_image_t raw[N], prep[N];
    float single[N][CLASSES], batch[N][CLASSES];
    for (int i = 0; i < N; i++) {
        random_image(&raw[i], 3, 10 + i, 9);
        CHECK(cd_classifier_prepare(c, &raw[i], &prep[i], err, sizeof err) == CD_OK, "prepare: %s", err);
        CHECK(cd_classifier_run(c, &raw[i], single[i], err, sizeof err) == CD_OK, "run: %s", err);
    }
    CHECK(cd_classifier_set_batch(c, B, err, sizeof err) == CD_OK && cd_classifier_batch(c) == B, "batch: %s", err);
    for (int i = 0; i < N; i += B) {
        const cd_image_t *ptr[B];
        int n = N - i < B ? N - i : B;
        for (int k = 0; k < n; k++)
            ptr[k] = &prep[i + k];
        CHECK(cd_classifier_run_prepared(c, ptr, n, batch[i], err, sizeof err) == CD_OK, "batch run: %s", err);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < CLASSES; k++)
            CHECK_NEAR(batch[i][k], single[i][k], 1e-6, "a batch of 4 (and the last of 3) agrees with one at a time");
    const cd_image_t *too_many[B + 1] = {&prep[0], &prep[1], &prep[2], &prep[3], &prep[4]};
    CHECK(cd_classifier_run_prepared(c, too_many, B + 1, batch[0], err, sizeof err) == CD_ERR, "more than the batch is refused");

    /* layer by layer */
    cd_infer_layer *layers = NULL;
    int n = 0;
    float probs[CLASSES];
    CHECK(cd_classifier_run_layers(c, &raw[0], probs, &layers, &n, err, sizeof err) == CD_OK, "layers: %s", err);
    CHECK(!memcmp(probs, single[0], sizeof probs), "run_layers gives run's probabilities");
    const char *want[] = {"data_input", "scale", "conv1", "relu1", "pool1", "ip", "prob"};
    CHECK(n == 7, "7 layers, got %d", n);
    for (int i = 0; i < n && i < 7; i++)
        CHECK(!strcmp(layers[i].name, want[i]), "layer %d is %s, want %s", i, layers[i].name, want[i]);
    if (n == 7) {
        CHECK(!memcmp(layers[6].top.data, probs, sizeof probs), "the last layer's output is the probabilities");
        CHECK(layers[2].nparams == 2 && layers[2].param_count == 4 * 3 * 3 * 3 + 4 && layers[2].params[0].dims[0] == 4 &&
                  layers[2].params[0].dims[1] == 3,
              "conv1: weights (4, 3, 3, 3) and bias, %zu values", layers[2].param_count);
        CHECK(layers[2].top.dims[1] == 4 && layers[2].top.dims[2] == 6 && layers[2].top.dims[3] == 6, "conv1 is 4x6x6");
        /* before its ReLU the convolution has negative values, after it none */
        int neg = 0, neg_after = 0;
        for (size_t i = 0; i < layers[2].top.count; i++) {
            neg += layers[2].top.data[i] < 0;
            neg_after += layers[3].top.data[i] < 0;
            CHECK(layers[3].top.data[i] == fmaxf(layers[2].top.data[i], 0), "relu1 is max(conv1, 0)");
        }
        CHECK(neg > 0 && neg_after == 0, "conv1 is copied before the in-place ReLU (%d negative values)", neg);
    }
    cd_infer_layers_free(layers, n);
    for (int i = 0; i < N; i++) {
        cd_image_free(&raw[i]);
        cd_image_free(&prep[i]);
    }
    cd_classifier_close(c);
    CHECK(cd_classifier_open(job, 7, NULL, err, sizeof err) == NULL && strstr(err, "it has 6 12"),
          "a missing iteration names the ones there are: %s", err);
}

static void test_epochs(const char *job)
{
    char err[512];
    CHECK(cd_snapshot_for_epoch(job, 1, err, sizeof err) == 6, "epoch 1 is iteration 6");
    CHECK(cd_snapshot_for_epoch(job, 2.0001, err, sizeof err) == 12, "epoch 2 is iteration 12");
    CHECK(cd_snapshot_for_epoch(job, 3, err, sizeof err) == -1 && strstr(err, "epochs 1, 2"), "epoch 3: %s", err);
    /* a snapshot without a line gets its epoch from the others' iterations per epoch */
    char path[4200];
    snprintf(path, sizeof path, "%s/snapshot_iter_9.cdw", job);
    write_text(job, "snapshot_iter_9.cdw", "x");
    cd_snapshot_info s[8];
    int n = cd_snapshot_epochs(job, s, 8);
    CHECK(n == 3 && s[1].iteration == 9 && fabs(s[1].epoch - 1.5) < 1e-9, "iteration 9 is epoch 1.5 (%g)", n == 3 ? s[1].epoch : -1);
    unlink(path);
}

static void test_prototxt_writer(void)
{
    char err[1024];
    cd_pt_node *a = cd_pt_parse_file(cd_test_source_path("models/lenet.prototxt"), err, sizeof err);
    CHECK(a != NULL, "lenet: %s", err);
    char *t1 = cd_pt_write(a);
    cd_pt_node *b = cd_pt_parse(t1, strlen(t1), "written", err, sizeof err);
    CHECK(b && cd_pt_validate(b, &cd_pt_net_parameter, "written", err, sizeof err) == CD_OK, "written text: %s", err);
    char *t2 = b ? cd_pt_write(b) : NULL;
    CHECK(t2 && !strcmp(t1, t2), "writing the parsed text again gives the same text");
    free(t1);
    free(t2);
    cd_pt_free(a);
    cd_pt_free(b);
    static const char tricky[] = "name: 'a \"quoted\" \\\\ back\\nline\\ttab\\001'\nlayer { name: \"x\" type: \"ReLU\" }\n";
    a = cd_pt_parse(tricky, strlen(tricky), "tricky", err, sizeof err);
    t1 = a ? cd_pt_write(a) : NULL;
    b = t1 ? cd_pt_parse(t1, strlen(t1), "tricky2", err, sizeof err) : NULL;
    CHECK(a && b && !strcmp(cd_pt_str(a, "name", "?"), cd_pt_str(b, "name", "!")), "escaped strings survive: %s", t1);
    free(t1);
    cd_pt_free(a);
    cd_pt_free(b);
}

/* Starting from weights of another number of classes: the last layer keeps its fillers. */
static void test_partial_weights(const char *dir)
{
    char err[1024], path[4200];
    snprintf(path, sizeof path, "%s/network.prototxt", dir);
    cd_backend_t *be = cd_backend_cpu_new(1);
    cd_net_opts o3 = {.stage = "train", .batch = 2, .input_c = C, .input_h = H, .input_w = W, .num_classes = 3,
                      .seed = cd_test_rand_u64()};
    cd_net_opts o5 = o3;
    o5.num_classes = 5;
    o5.seed = cd_test_rand_u64();
    cd_net *a = cd_net_load(path, &o3, err, sizeof err), *b = cd_net_load(path, &o5, err, sizeof err);
    CHECK(a && b && cd_net_alloc(a, be, NULL, err, sizeof err) == CD_OK && cd_net_alloc(b, be, NULL, err, sizeof err) == CD_OK,
          "nets: %s", err);
    if (!a || !b) {
        cd_net_free(a);
        cd_net_free(b);
        cd_backend_free(be);
        return;
    }
    snprintf(path, sizeof path, "%s/three.cdw", dir);
    cd_snapshot_save_weights(a, path, err, sizeof err);
    float ipb_before[5];
    cd_param *bip = NULL, *bconv = NULL, *aconv = NULL;
    for (int i = 0; i < b->nparams; i++) {
        if (!strcmp(b->params[i]->name, "ip/1"))
            bip = b->params[i];
        if (!strcmp(b->params[i]->name, "conv1/0"))
            bconv = b->params[i];
    }
    for (int i = 0; i < a->nparams; i++)
        if (!strcmp(a->params[i]->name, "conv1/0"))
            aconv = a->params[i];
    be->iface->download(be, ipb_before, bip->data, sizeof ipb_before);
    int loaded = -1;
    CHECK(cd_snapshot_load_weights(b, path, 0, NULL, err, sizeof err) == CD_ERR, "without allow_partial it is an error");
    CHECK(cd_snapshot_load_weights(b, path, 1, &loaded, err, sizeof err) == CD_OK && loaded == 2,
          "conv1's 2 tensors are taken, ip's 2 do not fit (loaded %d)", loaded);
    float wa[108], wb[108], ipb_after[5];
    be->iface->download(be, wa, aconv->data, sizeof wa);
    be->iface->download(be, wb, bconv->data, sizeof wb);
    be->iface->download(be, ipb_after, bip->data, sizeof ipb_after);
    CHECK(!memcmp(wa, wb, sizeof wa), "conv1 is taken");
    CHECK(!memcmp(ipb_before, ipb_after, sizeof ipb_after), "the 5-class layer keeps its fillers");
    cd_net_free(a);
    cd_net_free(b);
    cd_backend_free(be);
}

static int cmp_desc(const void *x, const void *y)
{
    const float *a = *(const float *const *)x, *b = *(const float *const *)y;
    if (*a != *b)
        return *a < *b ? 1 : -1;
    return a < b ? -1 : 1; /* ties: the lower index first */
}

static void test_topk(void)
{
    for (int t = 0; t < 200; t++) {
        int n = 1 + (int)(cd_test_rand_u64() % 40), k = 1 + (int)(cd_test_rand_u64() % 8), idx[8];
        float p[40];
        const float *ptr[40];
        for (int i = 0; i < n; i++) {
            p[i] = (float)(cd_test_rand_u64() % 7) / 7.0f; /* many ties */
            ptr[i] = &p[i];
        }
        qsort(ptr, (size_t)n, sizeof *ptr, cmp_desc);
        int got = cd_topk(p, n, k, idx);
        CHECK(got == (k < n ? k : n), "topk returns min(k, n)");
        for (int j = 0; j < got; j++)
            CHECK(idx[j] == (int)(ptr[j] - p), "topk %d of %d: position %d is %d, the sort says %d", k, n, j, idx[j],
                  (int)(ptr[j] - p));
    }
}

int main(void)
{
    cd_test_init("test_infer");
    char job[4200], out[4200], copy[4200];
    snprintf(job, sizeof job, "%s/job", cd_test_tmpdir());
    snprintf(out, sizeof out, "%s/export", cd_test_tmpdir());
    snprintf(copy, sizeof copy, "%s/copy", cd_test_tmpdir());
    make_job(job);
    test_export_roundtrip(job, out, copy);
    test_batch_and_layers(job);
    test_epochs(job);
    test_prototxt_writer();
    test_partial_weights(job);
    test_topk();
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cd_test_tmpdir());
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cd_test_tmpdir());
    return cd_test_finish();
}
