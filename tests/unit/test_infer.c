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
 *   - snapshot epochs come from the .epoch files beside the snapshots, a snapshot
 *     without one takes the others' iterations per epoch, a folder without any has
 *     unknown epochs, and a missing epoch names the ones there are;
 *   - weights taken by name and shape: a last layer of another number of classes keeps
 *     its fillers while the others are taken (what starting from a pretrained model
 *     relies on);
 *   - cd_topk against a full sort, ties included;
 *   - list lines (spaces in paths, no label, a BOM, CRLF, tab-separated, comments) from a
 *     table and from fresh random lines; the best-images heap against a sort;
 *   - a list through cd_classify_list against one image at a time: the confusion
 *     matrix, the accuracies, top_n and the per-image lines;
 *   - the visualizations: a file per activation and weights, data_stats against a
 *     double reference, an activation grid's layout and per-tile scale;
 *   - base64 on RFC 4648's vectors and random bytes; the backend selection.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdigits/backend_select.h"
#include "cdigits/base64.h"
#include "cdigits/dataset.h"
#include "cdigits/infer.h"
#include "cdigits/jobdir.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

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

/* The job's dataset.json: 10x10 color images. */
static const char dataset_json[] = "{\"channels\": 3, \"width\": 10, \"height\": 10, \"resize_mode\": \"squash\"}";

/* A model job in dir with the network `net` and random weights saved as
 * snapshot_iter_12 (epoch 2). */
static void make_job_with(const char *dir, const char *net_def)
{
    char err[1024], path[4200], text[8192];
    mkdir(dir, 0755);
    cd_test_write_at(dir, "network.prototxt", net_def);
    snprintf(text, sizeof text,
             "{\"dataset_dir\": \"%s\", \"network\": \"network.prototxt\", \"epochs\": 2, \"learning_rate\": 0.1,"
             " \"lr_policy\": {\"policy\": \"step\", \"stepsize\": 33, \"gamma\": 0.5}, \"use_mean\": \"image\"}",
             dir);
    cd_test_write_at(dir, "train.json", text);
    cd_test_write_at(dir, "dataset.json", dataset_json);
    cd_test_write_at(dir, "labels.txt", "red\ngreen\nblue\n");
    float mean[C * H * W];
    cd_test_fill_uniform(mean, C * H * W, 60, 200);
    snprintf(path, sizeof path, "%s/mean.bin", dir);
    CHECK(cd_mean_save(path, C, H, W, 100, mean, err, sizeof err) == CD_OK, "mean.bin: %s", err);
    CHECK(jobdir_snapshot_epoch_write(dir, 6, 1.0) == CD_OK && jobdir_snapshot_epoch_write(dir, 12, 2.0) == CD_OK,
          "the snapshots' .epoch files");
    cd_net_opts o = {.stage = "train", .batch = 4, .input_c = C, .input_h = H, .input_w = W,
                     .num_classes = CLASSES, .seed = cd_test_rand_u64()};
    cd_backend_t *be = cd_backend_cpu_new(1);
    cd_net *net = be ? cd_test_job_net(be, dir, &o) : NULL;
    cd_test_save_snapshot(net, dir, 12);
    cd_test_save_snapshot(net, dir, 6);
    cd_net_free(net);
    cd_backend_free(be);
}

static void make_job(const char *dir) { make_job_with(dir, net_text); }

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
          "deploy.prototxt: the Input of the crop's shape, num_output, no loss, no stage rules:\n%s",
          deploy ? deploy : "(unreadable)");
    cd_test_write_at(copy, "network.prototxt", deploy ? deploy : "");
    free(deploy);
    snprintf(text, sizeof text, "{\"dataset_dir\": \"%s\", \"network\": \"network.prototxt\", \"use_mean\": \"image\"}",
             copy);
    cd_test_write_at(copy, "train.json", text);
    cd_test_write_at(copy, "dataset.json", dataset_json);
    cd_classifier_t *d = cd_classifier_open(copy, 0, NULL, err, sizeof err);
    CHECK(d != NULL, "the exported model opens: %s", err);
    for (int t = 0; d && t < 4; t++) {
        cd_image_t img = {0};
        cd_test_random_image(&img, t % 2 ? 1 : 3, 7 + t * 5, 12 + t); /* other sizes and channel counts */
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

/* The network of net_text with its scale in the Data layers' transform_param instead of
 * a Power layer: inference must scale the pixels as training did. */
static char *scaled_by_transform(void)
{
    static const char power[] =
        "layer { name: \"scale\" type: \"Power\" bottom: \"data\" top: \"scaled\" power_param { scale: 0.02 } }\n";
    const char *at = strstr(net_text, power);
    CHECK(at != NULL, "net_text has its Power layer");
    char *out = cd_xcalloc(1, sizeof net_text + 256), *o = out;
    for (const char *s = net_text; at && s < at; s++) {
        if (!strncmp(s, "crop_size: 8 }", 14)) {
            o += sprintf(o, "crop_size: 8 scale: 0.02 }");
            s += 13;
        } else {
            *o++ = *s;
        }
    }
    const char *rest = at ? at + strlen(power) : "";
    const char *conv = strstr(rest, "bottom: \"scaled\"");
    if (conv) {
        o += sprintf(o, "%.*sbottom: \"data\"%s", (int)(conv - rest), rest, conv + strlen("bottom: \"scaled\""));
    }
    return out;
}

static void test_transform_scale(const char *job, const char *job2)
{
    char err[1024], src[4200], dst[4200];
    char *net = scaled_by_transform();
    CHECK(strstr(net, "scale: 0.02 }") && !strstr(net, "Power"), "the network scales in transform_param:\n%s", net);
    make_job_with(job2, net);
    free(net);
    /* the first job's weights: conv1 and ip are the same layers in both */
    size_t len = 0;
    snprintf(src, sizeof src, "%s/snapshot_iter_12.cdw", job);
    snprintf(dst, sizeof dst, "%s/snapshot_iter_12.cdw", job2);
    char *w = cd_read_file(src, &len);
    CHECK(w && cd_write_file_atomic(dst, w, len) == CD_OK, "copy the weights");
    free(w);
    snprintf(src, sizeof src, "%s/mean.bin", job);
    snprintf(dst, sizeof dst, "%s/mean.bin", job2);
    w = cd_read_file(src, &len);
    CHECK(w && cd_write_file_atomic(dst, w, len) == CD_OK, "copy the mean");
    free(w);
    cd_classifier_t *a = cd_classifier_open(job, 12, NULL, err, sizeof err);
    CHECK(a != NULL, "open the Power-layer job: %s", err);
    cd_classifier_t *b = cd_classifier_open(job2, 12, NULL, err, sizeof err);
    CHECK(b != NULL, "open the transform_param job: %s", err);
    if (a && b) {
        cd_image_t img;
        cd_test_random_image(&img, 3, 10, 10);
        float pa[CLASSES], pb[CLASSES];
        CHECK(cd_classifier_run(a, &img, pa, err, sizeof err) == CD_OK && cd_classifier_run(b, &img, pb, err, sizeof err) == CD_OK,
              "classify: %s", err);
        for (int k = 0; k < CLASSES; k++)
            CHECK_NEAR(pb[k], pa[k], 1e-5, "transform_param's scale is applied at inference as in training");
        cd_image_free(&img);
    }
    cd_classifier_close(a);
    cd_classifier_close(b);
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
        cd_test_random_image(&raw[i], 3, 10 + i, 9);
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
    CHECK(cd_snapshot_for_epoch(job, "1", err, sizeof err) == 6, "epoch 1 is iteration 6");
    CHECK(cd_snapshot_for_epoch(job, "2.0001", err, sizeof err) == 12, "epoch 2 is iteration 12");
    CHECK(cd_snapshot_for_epoch(job, "3", err, sizeof err) == -1 && strstr(err, "epochs 1, 2"), "epoch 3: %s", err);
    /* a snapshot without a line gets its epoch from the others' iterations per epoch */
    char path[4200];
    snprintf(path, sizeof path, "%s/snapshot_iter_9.cdw", job);
    cd_test_write_at(job, "snapshot_iter_9.cdw", "x");
    cd_snapshot_info s[8];
    int n = cd_snapshot_epochs(job, s, 8);
    CHECK(n == 3 && s[1].iteration == 9 && fabs(s[1].epoch - 1.5) < 1e-9, "iteration 9 is epoch 1.5 (%g)", n == 3 ? s[1].epoch : -1);
    unlink(path);
    /* a folder from before .epoch files: the epochs are unknown, and the message says
     * which iterations those are */
    for (long it = 6; it <= 12; it += 6) {
        jobdir_snapshot_path(job, it, JOBDIR_EPOCH, path, sizeof path);
        CHECK(unlink(path) == 0, "remove %s", path);
    }
    n = cd_snapshot_epochs(job, s, 8);
    CHECK(n == 2 && s[0].epoch == -1 && s[1].epoch == -1, "no .epoch files: unknown epochs (%g, %g)",
          n == 2 ? s[0].epoch : 0, n == 2 ? s[1].epoch : 0);
    CHECK(cd_snapshot_for_epoch(job, "1", err, sizeof err) == -1 && strstr(err, "unknown (iteration 6)") &&
              strstr(err, "unknown (iteration 12)") && strstr(err, "by its iteration"),
          "unknown epochs: %s", err);
    CHECK(jobdir_snapshot_epoch_write(job, 6, 1.0) == CD_OK && jobdir_snapshot_epoch_write(job, 12, 2.0) == CD_OK,
          "the .epoch files again");
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

/* ---- list lines ----------------------------------------------------------------------- */

typedef struct line_case {
    const char *line, *root;
    int taken;                    /* what cd_list_line_parse returns */
    const char *path, *key;       /* key NULL: the path */
    int label;
    const char *error;            /* a substring of item.error, or NULL for none */
} line_case;

static void test_list_lines(void)
{
    static const line_case cases[] = {
        {"a b/c d.png 2\n", "/data", 1, "/data/a b/c d.png", NULL, 2, NULL},            /* spaces in a path */
        {"  spaced name.png  \r\n", "/data", 1, "/data/spaced name.png", NULL, -1, NULL}, /* no label, CRLF */
        {"\xEF\xBB\xBF" "first.png 1\r\n", "/data", 1, "/data/first.png", NULL, 1, NULL}, /* a BOM */
        {"\xEF\xBB\xBF" "\r\n", "/data", 0, NULL, NULL, -1, NULL},                        /* a BOM alone */
        {"/abs/x.png 0", "/data", 1, "/abs/x.png", NULL, 0, NULL},                        /* absolute */
        {"rel.png 4", NULL, 1, "rel.png", NULL, 4, NULL},                                 /* no root */
        {"rel.png 4", "", 1, "rel.png", NULL, 4, NULL},
        {"file 007", "r", 1, "r/file", NULL, 7, NULL},
        {"img 3x", "r", 1, "r/img 3x", NULL, -1, NULL},                                   /* not an integer */
        {"12", "r", 1, "r/12", NULL, -1, NULL},                                           /* one word is the path */
        {"x.png -3", "r", 1, "r/x.png", NULL, -1, "label \"-3\" is not a class number"},
        {"x.png 99999999", "r", 1, "r/x.png", NULL, -1, "label \"99999999\""},
        {"x.png\t\t", "r", 1, "r/x.png", NULL, -1, NULL},
        {"p q.png\t4\tkey one\r\n", "r", 1, "r/p q.png", "key one", 4, NULL},            /* tab-separated */
        {"p.png\t\tk\n", "r", 1, "r/p.png", "k", -1, NULL},
        {"p.png\tx\n", "r", 1, "r/p.png", NULL, -1, "label \"x\""},
        {"  tab lead.png\t1", "", 1, "  tab lead.png", NULL, 1, NULL},                    /* tab lines as they are */
        {"\t3\n", "r", 0, NULL, NULL, -1, NULL},
        {"", "r", 0, NULL, NULL, -1, NULL},
        {"   \r\n", "r", 0, NULL, NULL, -1, NULL},
        {"\n", "r", 0, NULL, NULL, -1, NULL},
        {"# a comment 3\n", "r", 0, NULL, NULL, -1, NULL},
        {"   #indented comment", "r", 0, NULL, NULL, -1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const line_case *t = &cases[i];
        char buf[256];
        snprintf(buf, sizeof buf, "%s", t->line);
        cd_list_item it = {.label = 12345}; /* untouched when the line is skipped */
        int got = cd_list_line_parse(buf, t->root, &it);
        CHECK(got == t->taken, "line %zu \"%s\": returns %d, want %d", i, t->line, got, t->taken);
        if (got != t->taken) {
            cd_list_item_free(&it);
            continue;
        }
        if (!got) {
            CHECK(it.label == 12345 && !it.path, "line %zu: a skipped line leaves the item alone", i);
            continue;
        }
        const char *key = t->key ? t->key : t->path;
        CHECK(it.path && !strcmp(it.path, t->path), "line %zu \"%s\": path \"%s\", want \"%s\"", i, t->line, it.path,
              t->path);
        CHECK(it.key && !strcmp(it.key, key), "line %zu: key \"%s\", want \"%s\"", i, it.key, key);
        CHECK(it.label == t->label, "line %zu \"%s\": label %d, want %d", i, t->line, it.label, t->label);
        CHECK(t->error ? it.error && strstr(it.error, t->error) != NULL : it.error == NULL,
              "line %zu \"%s\": error \"%s\", want \"%s\"", i, t->line, it.error ? it.error : "(none)",
              t->error ? t->error : "(none)");
        cd_list_item_free(&it);
        CHECK(!it.path && !it.key && !it.error, "line %zu: free zeroes the item", i);
    }
    cd_list_item_free(NULL);

    /* fresh random lines: paths with spaces and dots, an optional label, white space
     * around, LF, CRLF or no ending, sometimes a BOM */
    static const char chars[] = "abcxyz019 ._-/";
    for (int t = 0; t < 300; t++) {
        char path[64], line[160];
        int len = 1 + (int)(cd_test_rand_u64() % 30);
        path[0] = 'a' + (char)(cd_test_rand_u64() % 26);
        for (int i = 1; i < len; i++)
            path[i] = chars[cd_test_rand_u64() % (sizeof chars - 1)];
        snprintf(path + len, sizeof path - (size_t)len, ".png"); /* the last word is never an integer */
        int label = cd_test_rand_u64() % 3 ? (int)(cd_test_rand_u64() % 1000) : -1;
        const char *ends[] = {"", "\n", "\r\n"};
        int n = snprintf(line, sizeof line, "%s%*s%s", cd_test_rand_u64() % 4 ? "" : "\xEF\xBB\xBF",
                         (int)(cd_test_rand_u64() % 3), "", path);
        if (label >= 0)
            n += snprintf(line + n, sizeof line - (size_t)n, "%*s%d", 1 + (int)(cd_test_rand_u64() % 3), "", label);
        snprintf(line + n, sizeof line - (size_t)n, "%*s%s", (int)(cd_test_rand_u64() % 3), "",
                 ends[cd_test_rand_u64() % 3]);
        char copy[160], want[128];
        snprintf(copy, sizeof copy, "%s", line);
        snprintf(want, sizeof want, "/root/%s", path);
        cd_list_item it = {0};
        int got = cd_list_line_parse(line, "/root", &it);
        CHECK(got == 1 && it.path && !strcmp(it.path, want) && it.label == label && !it.error,
              "random line \"%s\": path \"%s\" label %d, want \"%s\" %d", copy, it.path, it.label, want, label);
        cd_list_item_free(&it);
    }
}

/* ---- the best images of a class ------------------------------------------------------------- */

typedef struct scored {
    float p;
    int i;
} scored;

static int cmp_scored_desc(const void *x, const void *y)
{
    const scored *a = x, *b = y;
    if (a->p != b->p)
        return a->p < b->p ? 1 : -1;
    return a->i - b->i;
}

static int cmp_float_desc(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

static double pct(float p) { return floor((double)p * 10000.0 + 0.5) / 100.0; }

static void test_topn(void)
{
    for (int t = 0; t < 300; t++) {
        int cap = (int)(cd_test_rand_u64() % 13), m = (int)(cd_test_rand_u64() % 80);
        int ties = t % 3 == 0; /* a third of the runs draw from 5 values */
        scored s[80];
        cd_topn h;
        cd_topn_init(&h, cap);
        for (int round = 0; round < 2; round++) { /* json empties the heap: it takes a second list */
            char name[32];
            for (int i = 0; i < m; i++) {
                s[i].p = ties ? (float)(cd_test_rand_u64() % 5) / 5.0f : (float)cd_test_uniform(0, 1);
                s[i].i = i;
                snprintf(name, sizeof name, "img-%d", i);
                cd_topn_offer(&h, s[i].p, name);
            }
            qsort(s, (size_t)m, sizeof *s, cmp_scored_desc);
            int want = m < cap ? m : cap;
            json_t *j = cd_topn_json(&h);
            CHECK((int)json_array_size(j) == want && h.n == 0, "cap %d, %d offered: %zu kept (want %d), heap emptied",
                  cap, m, json_array_size(j), want);
            for (int k = 0; k < want && k < (int)json_array_size(j); k++) {
                json_t *e = json_array_get(j, (size_t)k);
                double got = json_real_value(json_array_get(e, 1));
                CHECK(got == pct(s[k].p), "cap %d: place %d is %.2f, the sort says %.2f", cap, k, got, pct(s[k].p));
                /* distinct scores name one image per place; with ties any of the tied */
                int i = -1;
                sscanf(json_string_value(json_array_get(e, 0)), "img-%d", &i);
                int found = 0;
                for (int q = 0; q < m; q++)
                    found |= s[q].i == i && s[q].p == s[k].p;
                CHECK(ties ? found : i == s[k].i, "cap %d: place %d names img-%d, the sort says img-%d", cap, k, i,
                      s[k].i);
            }
            json_decref(j);
        }
        cd_topn_free(&h);
        CHECK(h.p == NULL && h.name == NULL && h.n == 0, "free zeroes the heap");
    }
    cd_topn_free(NULL);
}

/* ---- classifying a list ----------------------------------------------------------------- */

/* The list of images with spaces in their names, a BOM, CRLF, a comment, a blank line,
 * a missing file, a bad label and a label past the classes, against cd_classifier_run
 * one image at a time (a classifier of its own) as the reference. */
static void test_classify_list(const char *job, const char *dir)
{
    enum { N = 11, TOPN = 3 };
    char err[1024], path[4400], listp[4400], outp[4400];
    mkdir(dir, 0755);
    cd_classifier_t *ref = cd_classifier_open(job, 0, NULL, err, sizeof err);
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(ref && c, "open: %s", err);
    if (!ref || !c) {
        cd_classifier_close(ref);
        cd_classifier_close(c);
        return;
    }
    float probs[N][CLASSES];
    int labels[N];
    snprintf(listp, sizeof listp, "%s/list.txt", dir);
    FILE *lf = fopen(listp, "w");
    CHECK(lf != NULL, "cannot write %s", listp);
    if (!lf)
        return;
    fputs("\xEF\xBB\xBF# images for the test\r\n\r\n", lf);
    for (int i = 0; i < N; i++) {
        cd_image_t img = {0};
        cd_test_random_image(&img, i % 3 ? 3 : 1, 6 + (int)(cd_test_rand_u64() % 9), 6 + (int)(cd_test_rand_u64() % 9));
        snprintf(path, sizeof path, "%s/image %02d.png", dir, i);
        CHECK(cd_image_write_png(path, &img, err, sizeof err) == CD_OK, "png: %s", err);
        cd_image_free(&img);
        cd_image_t back = {0};
        CHECK(cd_image_load(path, 3, &back, err, sizeof err) == CD_OK &&
                  cd_classifier_run(ref, &back, probs[i], err, sizeof err) == CD_OK,
              "reference run: %s", err);
        cd_image_free(&back);
        labels[i] = (int)(cd_test_rand_u64() % CLASSES);
        fprintf(lf, "image %02d.png %d\r\n", i, labels[i]);
    }
    fputs("missing file.png 1\r\nimage 00.png -3\r\nimage 01.png 7\r\n", lf);
    fclose(lf);

    cd_list_opts o = {.top = 5, .top_n = TOPN, .batch = 4, .root = dir};
    snprintf(outp, sizeof outp, "%s/out.jsonl", dir);
    FILE *in = fopen(listp, "r"), *out = fopen(outp, "w");
    json_t *sum = in && out ? cd_classify_list(c, in, out, &o, err, sizeof err) : NULL;
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    CHECK(sum != NULL, "classify_list: %s", err);

    /* the reference summary */
    long confusion[CLASSES][CLASSES] = {{0}};
    int top1 = 0;
    for (int i = 0; i < N; i++) {
        int idx[1];
        cd_topk(probs[i], CLASSES, 1, idx);
        confusion[labels[i]][idx[0]]++;
        top1 += idx[0] == labels[i];
    }
    CHECK(json_integer_value(json_object_get(sum, "images")) == N + 3 &&
              json_integer_value(json_object_get(sum, "classified")) == N + 1 &&
              json_integer_value(json_object_get(sum, "failed")) == 2 &&
              json_integer_value(json_object_get(sum, "labelled")) == N,
          "counts: images, classified (the label past the classes too), failed, labelled");
    json_t *matrix = json_object_get(sum, "confusion_matrix");
    for (int i = 0; i < CLASSES; i++)
        for (int k = 0; k < CLASSES; k++)
            CHECK(json_integer_value(json_array_get(json_array_get(matrix, (size_t)i), (size_t)k)) == confusion[i][k],
                  "confusion[%d][%d] is %lld, the reference %ld", i, k,
                  (long long)json_integer_value(json_array_get(json_array_get(matrix, (size_t)i), (size_t)k)),
                  confusion[i][k]);
    CHECK_NEAR(json_real_value(json_object_get(sum, "top1_accuracy")), floor(10000.0 * top1 / N + 0.5) / 100.0, 1e-9,
               "top-1 accuracy");
    CHECK_NEAR(json_real_value(json_object_get(sum, "top5_accuracy")), 100.0, 1e-9, "top-5 of 3 classes is all");
    json_t *per = json_object_get(sum, "per_class");
    for (int i = 0; i < CLASSES; i++) {
        long count = confusion[i][0] + confusion[i][1] + confusion[i][2];
        json_t *e = json_array_get(per, (size_t)i);
        CHECK(json_integer_value(json_object_get(e, "count")) == count &&
                  json_integer_value(json_object_get(e, "correct")) == confusion[i][i],
              "per_class %d: count and correct", i);
    }
    /* top_n: for each class the best TOPN images by the reference, highest first */
    json_t *topn = json_object_get(sum, "top_n");
    CHECK(json_array_size(topn) == CLASSES, "top_n has a row per class");
    for (int k = 0; k < CLASSES && k < (int)json_array_size(topn); k++) {
        json_t *row = json_array_get(json_array_get(topn, (size_t)k), 1);
        float sorted[N + 1];
        for (int i = 0; i < N; i++)
            sorted[i] = probs[i][k];
        sorted[N] = probs[1][k]; /* "image 01.png 7" is classified too */
        qsort(sorted, N + 1, sizeof *sorted, cmp_float_desc);
        CHECK(json_array_size(row) == TOPN, "class %d: %d images", k, TOPN);
        float last = 2;
        for (int j = 0; j < (int)json_array_size(row); j++) {
            int i = -1;
            sscanf(strrchr(json_string_value(json_array_get(json_array_get(row, (size_t)j), 0)), '/'), "/image %d", &i);
            float p = i >= 0 && i < N ? probs[i][k] : -1;
            CHECK(p >= sorted[TOPN - 1] - 1e-5f && p <= last + 1e-5f,
                  "class %d place %d: image %d (%g) is among the best %d (from %g) in order", k, j, i, p, TOPN,
                  sorted[TOPN - 1]);
            last = p;
        }
    }
    json_decref(sum);

    /* the per-image lines: list line numbers, predictions, errors */
    FILE *f = fopen(outp, "r");
    char *line = NULL;
    size_t cap = 0;
    int seen = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        long ln = (long)json_integer_value(json_object_get(o, "line"));
        const char *err_text = json_string_value(json_object_get(o, "error"));
        if (ln >= 3 && ln < 3 + N) {
            int i = (int)ln - 3, idx[CLASSES];
            cd_topk(probs[i], CLASSES, CLASSES, idx);
            json_t *pred = json_object_get(o, "predictions");
            CHECK(json_array_size(pred) == CLASSES && json_integer_value(json_object_get(o, "label")) == labels[i],
                  "line %ld: 3 predictions and label %d", ln, labels[i]);
            for (int j = 0; j < CLASSES && j < (int)json_array_size(pred); j++)
                CHECK_NEAR(json_real_value(json_array_get(json_array_get(pred, (size_t)j), 1)), pct(probs[i][idx[j]]),
                           0.011, "a prediction's percent");
        } else if (ln == 3 + N) {
            CHECK(err_text && strstr(err_text, "missing file.png"), "the missing file's line names it: %s", line);
        } else if (ln == 4 + N) {
            CHECK(err_text && strstr(err_text, "label \"-3\""), "the bad label's line says so: %s", line);
        } else {
            const char *label_error = json_string_value(json_object_get(o, "label_error"));
            CHECK(ln == 5 + N && label_error && strstr(label_error, "0 to 2"), "the label past the classes: %s", line);
        }
        seen++;
        json_decref(o);
    }
    free(line);
    if (f)
        fclose(f);
    CHECK(seen == N + 3, "one line per image (%d)", seen);
    cd_classifier_close(c);
    cd_classifier_close(ref);
}

/* ---- visualizations ------------------------------------------------------------------------ */

/* Mean, standard deviation and the histogram's total against a double reference. */
static void check_stats(json_t *stats, const cd_infer_tensor *t, const char *what)
{
    double sum = 0, sq = 0;
    for (size_t i = 0; i < t->count; i++)
        sum += t->data[i];
    double mean = sum / (double)t->count;
    for (size_t i = 0; i < t->count; i++)
        sq += (t->data[i] - mean) * (t->data[i] - mean);
    CHECK_NEAR(json_real_value(json_object_get(stats, "mean")), mean, 1e-5, what);
    CHECK_NEAR(json_real_value(json_object_get(stats, "stddev")), sqrt(sq / (double)t->count), 1e-4, what);
    json_t *counts = json_array_get(json_object_get(stats, "histogram"), 0), *shape = json_object_get(stats, "shape");
    long total = 0;
    for (size_t b = 0; b < json_array_size(counts); b++)
        total += (long)json_integer_value(json_array_get(counts, b));
    CHECK(json_array_size(counts) == 20 && total == (long)t->count, "%s: 20 bins holding every value", what);
    int dims_ok = (int)json_array_size(shape) == t->ndim;
    for (int d = 0; d < t->ndim && dims_ok; d++)
        dims_ok = json_integer_value(json_array_get(shape, (size_t)d)) == t->dims[d];
    CHECK(dims_ok, "%s: the shape is the tensor's", what);
}

static void test_visualize(const char *job, const char *dir)
{
    char err[1024], path[4400];
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(c != NULL, "open: %s", err);
    if (!c)
        return;
    cd_image_t img = {0};
    cd_test_random_image(&img, 3, 13, 11);
    cd_infer_layer *layers = NULL;
    int n = 0;
    float probs[CLASSES];
    CHECK(cd_classifier_run_layers(c, &img, probs, &layers, &n, err, sizeof err) == CD_OK && n == 7, "layers: %s", err);
    json_t *vis = n == 7 ? cd_infer_visualize(layers, n, dir, err, sizeof err) : NULL;
    CHECK(vis && json_array_size(vis) == 9, "7 activations and the weights of conv1 and ip: %s",
          vis ? "" : err);
    size_t i;
    json_t *v;
    json_array_foreach(vis, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        int weights = !strcmp(json_string_value(json_object_get(v, "vis_type")), "Weights");
        int li = 0;
        while (li < n && strcmp(layers[li].name, name))
            li++;
        CHECK(li < n, "entry %zu names a layer (%s)", i, name);
        if (li >= n)
            continue;
        const cd_infer_tensor *t = weights ? &layers[li].params[0] : &layers[li].top;
        char file[128];
        snprintf(file, sizeof file, "%02d-%s-%s.png", li, layers[li].name, weights ? "weights" : "activation");
        CHECK(!strcmp(json_string_value(json_object_get(v, "image")), file), "entry %zu: file %s",
              i, json_string_value(json_object_get(v, "image")));
        check_stats(json_object_get(v, "data_stats"), t, file);
        if (weights)
            CHECK(json_integer_value(json_object_get(v, "param_count")) == (json_int_t)layers[li].param_count,
                  "%s: param_count", file);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        cd_image_t png = {0};
        int rgb = weights && t->ndim == 4 && t->dims[1] == 3;
        CHECK(cd_image_load(path, rgb ? 3 : 1, &png, err, sizeof err) == CD_OK, "%s: %s", file, err);
        CHECK(png.data && png.data[0] == 96, "%s: the grid's padding is gray", file);
        if (!strcmp(name, "conv1") && !weights) {
            /* (1, 4, 6, 6): a 2x2 grid of 6x6 tiles zoomed 4 times, each scaled on its own */
            CHECK(png.c == 1 && png.h == 51 && png.w == 51, "conv1 activation is 51x51 (%dx%d)", png.h, png.w);
            for (int tile = 0; tile < 4 && png.h == 51 && png.w == 51; tile++) {
                const float *d = t->data + (size_t)tile * 36;
                float lo = d[0], hi = d[0];
                for (int k = 1; k < 36; k++) {
                    lo = fminf(lo, d[k]);
                    hi = fmaxf(hi, d[k]);
                }
                int oy = (tile / 2) * 25 + 1, ox = (tile % 2) * 25 + 1, bad = 0;
                for (int y = 0; y < 24; y++)
                    for (int x = 0; x < 24; x++) {
                        double want = (d[(y / 4) * 6 + x / 4] - lo) / (hi - lo) * 255.0;
                        bad += fabs(png.data[(size_t)(oy + y) * 51 + (size_t)(ox + x)] - want) > 1.0;
                    }
                CHECK(bad == 0, "conv1 tile %d: %d pixels off its own 0..255 scale", tile, bad);
            }
        }
        if (!strcmp(name, "conv1") && weights)
            CHECK(png.c == 3 && png.h == 51 && png.w == 51, "conv1 weights: 4 RGB 3x3 filters zoomed 8 times (%dx%dx%d)",
                  png.c, png.h, png.w);
        if (!strcmp(name, "ip") && weights) /* (3, 36): rows repeated 8 times to be seen */
            CHECK(png.h == 26 && png.w == 38, "ip weights: 24x36 and the padding (%dx%d)", png.h, png.w);
        cd_image_free(&png);
    }
    json_decref(vis);
    /* a folder that cannot be made is an error that names it */
    snprintf(path, sizeof path, "%s/00-data_input-activation.png/sub", dir);
    CHECK(cd_infer_visualize(layers, n, path, err, sizeof err) == NULL && strstr(err, "cannot create"),
          "a folder under a file: %s", err);
    cd_infer_layers_free(layers, n);
    cd_image_free(&img);
    cd_classifier_close(c);
}

/* ---- base64 --------------------------------------------------------------------------------- */

static void test_base64(void)
{
    /* RFC 4648's vectors */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = cd_base64_encode(plain[i], strlen(plain[i]));
        CHECK(e && !strcmp(e, coded[i]), "encode \"%s\": %s, want %s", plain[i], e, coded[i]);
        free(e);
        size_t n = 99;
        unsigned char *d = cd_base64_decode(coded[i], strlen(coded[i]), &n);
        CHECK(d && n == strlen(plain[i]) && !memcmp(d, plain[i], n), "decode %s", coded[i]);
        free(d);
    }
    size_t n = 0;
    unsigned char *d = cd_base64_decode("-_8", 3, &n); /* URL-safe, unpadded */
    CHECK(d && n == 2 && d[0] == 0xfb && d[1] == 0xff, "URL-safe -_8 is fb ff");
    free(d);
    d = cd_base64_decode("+/8=", 4, &n);
    CHECK(d && n == 2 && d[0] == 0xfb && d[1] == 0xff, "standard +/8= is fb ff");
    free(d);
    CHECK(cd_base64_decode("Zm9v!", 5, &n) == NULL, "a character outside both alphabets is refused");

    /* fresh random bytes through both, with line breaks and spaces in the text */
    for (int t = 0; t < 200; t++) {
        size_t len = (size_t)(cd_test_rand_u64() % 300);
        unsigned char bytes[300];
        for (size_t i = 0; i < len; i++)
            bytes[i] = (unsigned char)cd_test_rand_u64();
        char *e = cd_base64_encode(bytes, len);
        CHECK(e && strlen(e) == (len + 2) / 3 * 4, "%zu bytes encode to %zu characters", len, (len + 2) / 3 * 4);
        if (!e)
            continue;
        char *spaced = malloc(strlen(e) * 2 + 1), *o = spaced;
        for (const char *p = e; *p; p++) {
            *o++ = *p;
            if (cd_test_rand_u64() % 8 == 0)
                *o++ = " \n\r\t"[cd_test_rand_u64() % 4];
        }
        *o = 0;
        d = cd_base64_decode(spaced, strlen(spaced), &n);
        CHECK(d && n == len && !memcmp(d, bytes, len), "%zu random bytes come back", len);
        free(d);
        free(spaced);
        free(e);
    }
}

/* ---- backend selection ---------------------------------------------------------------------- */

static char g_note[512];
static int g_notes;

static void note(const char *line)
{
    snprintf(g_note, sizeof g_note, "%s", line);
    g_notes++;
}

static void test_backend_select(void)
{
    char err[512];
    size_t cap = (size_t)(1 + cd_test_rand_u64() % 64) << 20, free_bytes = 0, total = 0;
    cd_backend_request cpu = {.kind = CD_BACKEND_CPU, .threads = 1, .cpu_memory = cap, .note = note};
    cd_backend_t *be = cd_backend_select(&cpu, err, sizeof err);
    CHECK(be && !strcmp(be->iface->name, "cpu") && g_notes == 0, "cpu: the CPU backend, no log line");
    CHECK(be && be->iface->mem_info(be, &free_bytes, &total) == CD_OK && total == cap,
          "the memory cap reaches the backend (%zu of %zu)", total, cap);
    cd_backend_free(be);

    int gpus = cd_backend_cuda_device_count();
    cd_backend_request want = {.kind = CD_BACKEND_AUTO, .gpu = gpus > 0 ? 1 << 20 : 0, .threads = 1,
                               .task = "testing", .note = note};
    be = cd_backend_select(&want, err, sizeof err);
    const char *expect = gpus > 0 ? "is not usable" : "no usable GPU on this machine; testing on the CPU";
    CHECK(be && !strcmp(be->iface->name, "cpu") && g_notes == 1 && strstr(g_note, expect) &&
              strstr(g_note, "; testing on the CPU"),
          "auto without its GPU: the CPU and one line (%d: %s)", g_notes, g_note);
    cd_backend_free(be);
    want.kind = CD_BACKEND_CUDA;
    be = cd_backend_select(&want, err, sizeof err);
    CHECK(!be && g_notes == 1 && strstr(err, gpus > 0 ? "is not usable" : "no usable GPU on this machine"),
          "cuda without its GPU: NULL and the reason (%s), no line", err);
    cd_backend_free(be);
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
    char job2[4200];
    snprintf(job2, sizeof job2, "%s/job-transform-scale", cd_test_tmpdir());
    test_transform_scale(job, job2);
    test_epochs(job);
    test_prototxt_writer();
    test_partial_weights(job);
    test_topk();
    test_list_lines();
    test_topn();
    char lists[4200], vis[4200];
    snprintf(lists, sizeof lists, "%s/lists", cd_test_tmpdir());
    snprintf(vis, sizeof vis, "%s/vis", cd_test_tmpdir());
    test_classify_list(job, lists);
    test_visualize(job, vis);
    test_base64();
    test_backend_select();
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
