/*
 * Generic inference (infer.h, infer_generic.c) on model jobs made here by hand with
 * set weights, against references computed in double from the same numbers:
 *   - a fully convolutional net (a 1x1 Convolution, an in-place ReLU, a Softmax, and a
 *     Power side branch): its outputs by name and shape (the side branch and the
 *     probabilities, not the score the Softmax reads), the mask of each pixel's largest
 *     score, the class counts, the mask PNG in the dataset's palette (a short
 *     palette.txt: the missing class takes the default colour);
 *   - the IoU arithmetic on a hand count, and label images read by colour and by gray
 *     level, scaled by the nearest pixel;
 *   - a list (batch 2, a missing image, label images) and a db with its label db
 *     against one image at a time and the reference confusion;
 *   - a regression net (an InnerProduct with set weights, no labels.txt): its vector.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/backend.h"
#include "cdigits/base64.h"
#include "cdigits/dataset.h"
#include "cdigits/infer.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

#define C 3
#define H 6
#define W 7
#define K 3 /* segmentation classes */
#define R 2 /* regression targets */

static const char seg_net[] =
    "name: \"fcn-test\"\n"
    "layer { name: \"score\" type: \"Convolution\" bottom: \"data\" top: \"score\"\n"
    "  convolution_param { num_output: 3 kernel_size: 1 } }\n"
    "layer { name: \"relu\" type: \"ReLU\" bottom: \"score\" top: \"score\" }\n"
    "layer { name: \"side\" type: \"Power\" bottom: \"data\" top: \"side\" power_param { scale: 0.5 } }\n"
    "layer { name: \"prob\" type: \"Softmax\" bottom: \"score\" top: \"prob\" }\n";

static const char reg_net[] =
    "name: \"regression-test\"\n"
    "layer { name: \"fc\" type: \"InnerProduct\" bottom: \"data\" top: \"fc\"\n"
    "  inner_product_param { num_output: 2 } }\n";

/* A model job in dir (its own dataset folder) with net_text, whose first layer's weights
 * and bias are set to w and b, saved as snapshot_iter_5. */
static void make_job(const char *dir, const char *net_text, const char *task, const float *w, size_t nw,
                     const float *b, size_t nb)
{
    char text[8192];
    mkdir(dir, 0755);
    cd_test_write_at(dir, "network.prototxt", net_text);
    snprintf(text, sizeof text,
             "{\"dataset_dir\": \"%s\", \"network\": \"network.prototxt\", \"epochs\": 1, \"learning_rate\": 0.1,"
             " \"use_mean\": \"none\"}", dir);
    cd_test_write_at(dir, "train.json", text);
    snprintf(text, sizeof text, "{\"channels\": %d, \"width\": %d, \"height\": %d, \"resize_mode\": \"squash\"}", C, W,
             H);
    cd_test_write_at(dir, "dataset.json", text);
    snprintf(text, sizeof text, "{\"task\": \"%s\"}", task);
    cd_test_write_at(dir, "stats.json", text);
    cd_net_opts o = {.stage = "deploy", .batch = 1, .input_c = C, .input_h = H, .input_w = W};
    cd_backend_t *be = cd_backend_cpu_new(1);
    cd_net *net = be ? cd_test_job_net(be, dir, &o) : NULL;
    cd_layer *l = NULL;
    for (int i = 0; net && i < net->nlayers && !l; i++)
        if (net->layers[i]->nparam)
            l = net->layers[i];
    CHECK(l && l->nparam == 2 && l->params[0]->count == nw && l->params[1]->count == nb,
          "the first layer has %zu weights and %zu biases", nw, nb);
    if (l && l->nparam == 2 && l->params[0]->count == nw && l->params[1]->count == nb) {
        be->iface->upload(be, l->params[0]->data, w, nw * sizeof(float));
        be->iface->upload(be, l->params[1]->data, b, nb * sizeof(float));
    }
    cd_test_save_snapshot(net, dir, 5);
    cd_net_free(net);
    cd_backend_free(be);
}

static float g_w[K * C], g_b[K];

/* The reference class of pixel p of img (double arithmetic); *gap: its lead over the
 * runner-up (pixels of a near tie are not compared). */
static int ref_class(const cd_image_t *img, size_t p, double *gap, double *scores)
{
    size_t plane = (size_t)H * W;
    int best = 0;
    for (int k = 0; k < K; k++) {
        double s = g_b[k];
        for (int c = 0; c < C; c++)
            s += (double)g_w[k * C + c] * img->data[(size_t)c * plane + p];
        scores[k] = s > 0 ? s : 0; /* the ReLU */
        if (scores[k] > scores[best])
            best = k;
    }
    double second = -1;
    for (int k = 0; k < K; k++)
        if (k != best && scores[k] > second)
            second = scores[k];
    *gap = scores[best] - second;
    return best;
}

static const uint8_t g_palette[2][3] = {{10, 20, 30}, {200, 100, 50}};

static void test_segmentation_one(const char *job)
{
    char err[1024];
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(c != NULL, "open the segmentation model: %s", err);
    if (!c)
        return;
    CHECK(cd_classifier_task(c) == CD_TASK_SEGMENTATION, "the task comes from stats.json (%d)", cd_classifier_task(c));
    cd_image_t img = {0};
    cd_test_random_image(&img, C, H, W);
    cd_infer_tensor *outs = NULL;
    int n = 0;
    CHECK(cd_infer_image(c, &img, &outs, &n, err, sizeof err) == CD_OK, "infer: %s", err);
    CHECK(n == 2 && !strcmp(outs[0].name, "side") && !strcmp(outs[1].name, "prob"),
          "the outputs are side and prob (score is read by prob): %d, %s", n, n ? outs[0].name : "");
    if (n != 2) {
        cd_infer_tensors_free(outs, n);
        cd_image_free(&img);
        cd_classifier_close(c);
        return;
    }
    for (int i = 0; i < 2; i++)
        CHECK(outs[i].ndim == 4 && outs[i].dims[0] == 1 && outs[i].dims[1] == 3 && outs[i].dims[2] == H &&
                  outs[i].dims[3] == W && outs[i].count == (size_t)3 * H * W,
              "%s is (1, 3, %d, %d)", outs[i].name, H, W);
    size_t plane = (size_t)H * W;
    double maxerr = 0;
    for (size_t i = 0; i < (size_t)C * plane; i++)
        maxerr = fmax(maxerr, fabs(outs[0].data[i] - 0.5 * img.data[i]));
    CHECK(maxerr < 1e-4, "side is half the pixels (max error %g)", maxerr);
    CHECK(cd_infer_seg_output(outs, n) == 1, "the score map read is the last 4-D output");
    uint8_t mask[H * W];
    CHECK(cd_seg_argmax(outs[1].data, K, H, W, mask, err, sizeof err) == CD_OK, "argmax: %s", err);
    long counts[K], ref_counts[K] = {0};
    cd_seg_count(mask, plane, K, counts);
    int compared = 0, wrong = 0;
    double perr = 0;
    for (size_t p = 0; p < plane; p++) {
        double gap, s[K];
        int k = ref_class(&img, p, &gap, s);
        ref_counts[mask[p]]++;
        /* the probabilities against a double softmax of the reference scores */
        double m = fmax(s[0], fmax(s[1], s[2])), z = 0;
        for (int j = 0; j < K; j++)
            z += exp(s[j] - m);
        for (int j = 0; j < K; j++)
            perr = fmax(perr, fabs(outs[1].data[(size_t)j * plane + p] - exp(s[j] - m) / z));
        if (gap < 1e-2)
            continue;
        compared++;
        wrong += mask[p] != k;
    }
    CHECK(compared > (int)plane / 2 && wrong == 0, "the mask is the reference argmax: %d of %d pixels differ", wrong,
          compared);
    CHECK(perr < 1e-5, "prob is the softmax of the reference scores (max error %g)", perr);
    CHECK(!memcmp(counts, ref_counts, sizeof counts), "class counts %ld %ld %ld", counts[0], counts[1], counts[2]);
    /* the PNG: each pixel in its class's colour, class 2 in the default palette */
    uint8_t rgb[CD_PALETTE_MAX][3], def[K][3];
    CHECK(cd_seg_palette(c, K, rgb, err, sizeof err) == CD_OK, "palette: %s", err);
    cd_palette_default(def, K);
    CHECK(!memcmp(rgb[0], g_palette[0], 3) && !memcmp(rgb[1], g_palette[1], 3) && !memcmp(rgb[2], def[2], 3),
          "palette.txt's colours, the default one for the class it lacks");
    uint8_t *png = NULL;
    size_t len = 0;
    CHECK(cd_seg_mask_png(mask, H, W, (const uint8_t(*)[3])rgb, K, &png, &len, err, sizeof err) == CD_OK, "png: %s",
          err);
    cd_image_t dec = {0};
    CHECK(png && cd_image_decode(png, len, 3, &dec, err, sizeof err) == CD_OK && dec.h == H && dec.w == W,
          "the mask PNG decodes to %dx%d: %s", H, W, err);
    int bad = 0;
    for (size_t p = 0; dec.data && p < plane; p++)
        for (int ch = 0; ch < 3; ch++)
            bad += dec.data[(size_t)ch * plane + p] != rgb[mask[p]][ch];
    CHECK(dec.data && bad == 0, "%d mask PNG values are not their class's colour", bad);
    /* the answer: outputs by name with the batch, the mask as a data URL, the counts */
    json_t *res = cd_infer_result_json(c, outs, n, 0, 1, (const uint8_t(*)[3])rgb, NULL, NULL, err, sizeof err);
    CHECK(res != NULL, "result json: %s", err);
    json_t *prob = json_object_get(json_object_get(res, "outputs"), "prob");
    json_t *px = json_array_get(json_array_get(json_array_get(json_array_get(prob, 0), 2), 3), 4);
    CHECK(json_is_number(px) && fabs(json_number_value(px) - outs[1].data[2 * plane + 3 * W + 4]) < 1e-6,
          "outputs.prob[0][2][3][4] is that value");
    const char *url = json_string_value(json_object_get(res, "mask"));
    const char *pre = "data:image/png;base64,";
    size_t blen = 0;
    unsigned char *bytes = url && !strncmp(url, pre, strlen(pre))
                               ? cd_base64_decode(url + strlen(pre), strlen(url) - strlen(pre), &blen)
                               : NULL;
    CHECK(bytes && blen == len && !memcmp(bytes, png, len), "mask is the PNG as a data URL");
    json_t *cc = json_object_get(res, "class_counts");
    CHECK(json_array_size(cc) == K, "class_counts has every class");
    for (int k = 0; k < K && json_array_size(cc) == K; k++) {
        json_t *e = json_array_get(cc, (size_t)k);
        char col[8];
        snprintf(col, sizeof col, "#%02x%02x%02x", rgb[k][0], rgb[k][1], rgb[k][2]);
        CHECK(json_integer_value(json_object_get(e, "pixels")) == counts[k] &&
                  !strcmp(json_string_value(json_object_get(e, "color")), col) &&
                  !strcmp(json_string_value(json_object_get(e, "label")), k == 0 ? "sky" : k == 1 ? "road" : "car"),
              "class %d: its pixels, colour and name", k);
    }
    free(bytes);
    json_decref(res);
    cd_image_free(&dec);
    free(png);
    cd_infer_tensors_free(outs, n);
    cd_image_free(&img);
    cd_classifier_close(c);
}

static void test_iou_by_hand(void)
{
    /* k = 4: class 3 in neither; one label 255 and one past the classes */
    const uint8_t label[] = {0, 0, 1, 1, 2, 255, 1, 0, 7};
    const uint8_t pred[] = {0, 1, 1, 1, 0, 2, 0, 0, 1};
    cd_seg_confusion s;
    cd_seg_confusion_init(&s, 4);
    cd_seg_confusion_add(&s, label, pred, sizeof label);
    /* rows label: 0 -> {0:2, 1:1}; 1 -> {0:1, 1:2}; 2 -> {0:1} */
    CHECK(s.ignored == 2, "two pixels ignored (%llu)", (unsigned long long)s.ignored);
    CHECK_NEAR(cd_seg_pixel_accuracy(&s), 4.0 / 7, 1e-12, "pixel accuracy 4/7");
    CHECK_NEAR(cd_seg_iou(&s, 0), 2.0 / 5, 1e-12, "IoU 0: 2 / (3 + 4 - 2)");
    CHECK_NEAR(cd_seg_iou(&s, 1), 2.0 / 4, 1e-12, "IoU 1: 2 / (3 + 3 - 2)");
    CHECK_NEAR(cd_seg_iou(&s, 2), 0.0, 1e-12, "IoU 2: 0 / 1");
    CHECK(cd_seg_iou(&s, 3) == -1, "class 3 is absent");
    CHECK_NEAR(cd_seg_mean_iou(&s), 0.3, 1e-12, "mean IoU over the three present classes");
    cd_seg_confusion_free(&s);
    cd_seg_confusion empty;
    cd_seg_confusion_init(&empty, 2);
    CHECK(cd_seg_mean_iou(&empty) == -1 && cd_seg_pixel_accuracy(&empty) == 0, "no pixels: no IoU");
    cd_seg_confusion_free(&empty);
}

/* A label image of classes cls (H x W) at scale x (nearest upscaling), in the palette's
 * colours for even rows and as gray levels for odd ones; an unknown colour at (0, 0). */
static void write_label(const char *path, const uint8_t *cls, const uint8_t (*rgb)[3], int scale)
{
    cd_image_t img = {0};
    char err[256];
    int h = H * scale, w = W * scale;
    cd_image_alloc(&img, 3, h, w, err, sizeof err);
    size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int k = cls[(y / scale) * W + x / scale], gray = (y / scale) % 2;
            for (int ch = 0; ch < 3; ch++)
                img.data[ch * plane + (size_t)y * w + x] = gray ? (uint8_t)k : rgb[k][ch];
        }
    for (int ch = 0; ch < 3; ch++)
        img.data[ch * plane] = (uint8_t)(ch == 0 ? 250 : 3); /* no class: ignored */
    CHECK(cd_image_write_png(path, &img, err, sizeof err) == CD_OK, "write %s: %s", path, err);
    cd_image_free(&img);
}

/* Image i's mask with the classifier, one at a time. */
static void one_mask(cd_classifier_t *c, const cd_image_t *img, uint8_t *mask)
{
    char err[1024];
    cd_infer_tensor *outs = NULL;
    int n = 0;
    memset(mask, 0, H * W);
    CHECK(cd_infer_image(c, img, &outs, &n, err, sizeof err) == CD_OK && n == 2 &&
              cd_seg_argmax(outs[1].data, K, H, W, mask, err, sizeof err) == CD_OK,
          "one image: %s", err);
    cd_infer_tensors_free(outs, n);
}

static void test_segmentation_lists(const char *job, const char *dir)
{
    char err[1024], path[4200], lpath[4200];
    mkdir(dir, 0755);
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(c != NULL, "open: %s", err);
    if (!c)
        return;
    uint8_t rgb[CD_PALETTE_MAX][3];
    cd_seg_palette(c, K, rgb, err, sizeof err);
    enum { N = 3 };
    cd_image_t img[N];
    uint8_t mask[N][H * W], label[N][H * W];
    cd_seg_confusion ref;
    cd_seg_confusion_init(&ref, K);
    snprintf(path, sizeof path, "%s/list.txt", dir);
    FILE *list = fopen(path, "w");
    CHECK(list != NULL, "cannot write %s", path);
    if (!list) {
        cd_seg_confusion_free(&ref);
        cd_classifier_close(c);
        return;
    }
    for (int i = 0; i < N; i++) {
        memset(&img[i], 0, sizeof img[i]);
        cd_test_random_image(&img[i], C, H, W);
        one_mask(c, &img[i], mask[i]);
        for (int p = 0; p < H * W; p++) /* mostly the prediction, some pixels another class */
            label[i][p] = cd_test_rand_u64() % 4 ? mask[i][p] : (uint8_t)(cd_test_rand_u64() % K);
        snprintf(path, sizeof path, "%s/img%d.png", dir, i);
        cd_image_write_png(path, &img[i], err, sizeof err);
        snprintf(lpath, sizeof lpath, "%s/label%d.png", dir, i);
        write_label(lpath, label[i], (const uint8_t(*)[3])rgb, i + 1);
        /* the label as read back: colours, gray levels, the unknown pixel ignored */
        uint8_t back[H * W];
        CHECK(cd_seg_label_load(lpath, H, W, (const uint8_t(*)[3])rgb, K, back, err, sizeof err) == CD_OK,
              "label %d: %s", i, err);
        CHECK(back[0] == CD_SEG_IGNORE && !memcmp(back + 1, label[i] + 1, H * W - 1),
              "label %d (at %dx scale) reads back as written", i, i + 1);
        label[i][0] = CD_SEG_IGNORE;
        cd_seg_confusion_add(&ref, label[i], mask[i], H * W);
        fprintf(list, "%s\t%s\timage %d\n", path, lpath, i);
        if (i == 0)
            fprintf(list, "\n# a comment\n%s/missing.png\n", dir);
    }
    fclose(list);
    snprintf(path, sizeof path, "%s/list.txt", dir);
    snprintf(lpath, sizeof lpath, "%s/out.jsonl", dir);
    FILE *in = fopen(path, "r"), *out = fopen(lpath, "w+");
    cd_infer_list_opts o = {.batch = 2};
    json_t *sum = in && out ? cd_infer_list(c, in, out, &o, err, sizeof err) : NULL;
    CHECK(sum != NULL, "infer list: %s", err);
    CHECK(json_integer_value(json_object_get(sum, "images")) == N + 1 &&
              json_integer_value(json_object_get(sum, "inferred")) == N &&
              json_integer_value(json_object_get(sum, "failed")) == 1 &&
              json_integer_value(json_object_get(sum, "labelled")) == N,
          "the summary counts");
    json_t *iou = json_object_get(sum, "iou");
    CHECK_NEAR(json_number_value(json_object_get(iou, "mean_iou")), round(cd_seg_mean_iou(&ref) * 10000) / 100, 1e-9,
               "the list's mean IoU is the reference's");
    CHECK_NEAR(json_number_value(json_object_get(iou, "pixel_accuracy")),
               round(cd_seg_pixel_accuracy(&ref) * 10000) / 100, 1e-9, "and its pixel accuracy");
    CHECK(json_integer_value(json_object_get(iou, "ignored_pixels")) == N, "one ignored pixel per label");
    rewind(out);
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, errors = 0, same = 0;
    while (out && getline(&line, &cap, out) > 0) {
        json_t *o1 = json_loads(line, 0, NULL);
        lines++;
        const char *key = json_string_value(json_object_get(o1, "path"));
        if (json_object_get(o1, "error")) {
            errors += key && strstr(key, "missing.png") != NULL;
        } else {
            int i = -1;
            if (key && sscanf(key, "image %d", &i) != 1)
                i = -1;
            json_t *cc = json_object_get(o1, "class_counts");
            long counts[K];
            if (i >= 0 && i < N) {
                cd_seg_count(mask[i], H * W, K, counts);
                int ok = json_array_size(cc) == K;
                for (int k = 0; ok && k < K; k++)
                    ok = json_integer_value(json_object_get(json_array_get(cc, (size_t)k), "pixels")) == counts[k];
                same += ok && json_object_get(o1, "iou") && json_object_get(json_object_get(o1, "outputs"), "prob");
            }
        }
        json_decref(o1);
    }
    free(line);
    CHECK(lines == N + 1 && errors == 1 && same == N,
          "one line per image: %d lines, %d errors, %d as one at a time", lines, errors, same);
    json_decref(sum);
    if (in)
        fclose(in);
    if (out)
        fclose(out);

    /* the same images as a db with its label db (PNG records of class indices) */
    char db[4200], ldb[4200];
    snprintf(db, sizeof db, "%s/val.db", dir);
    snprintf(ldb, sizeof ldb, "%s/val_labels.db", dir);
    cd_db_writer_t *wf = cd_db_writer_open(db, C, H, W, CD_ENC_NONE, 0, err, sizeof err);
    cd_db_writer_t *wl = cd_db_writer_open(ldb, 1, H, W, CD_ENC_PNG, K, err, sizeof err);
    CHECK(wf && wl, "db writers: %s", err);
    for (int i = 0; wf && wl && i < N; i++) {
        cd_image_t li = {.c = 1, .h = H, .w = W, .data = label[i]};
        uint8_t *rec = NULL;
        size_t rl = 0;
        CHECK(cd_db_writer_add(wf, img[i].data, (size_t)C * H * W, 0, err, sizeof err) == CD_OK &&
                  cd_db_encode_record(&li, CD_ENC_PNG, &rec, &rl, err, sizeof err) == CD_OK &&
                  cd_db_writer_add(wl, rec, rl, 0, err, sizeof err) == CD_OK,
              "db record %d: %s", i, err);
        free(rec);
    }
    CHECK(wf && wl && cd_db_writer_finish(wf, err, sizeof err) == CD_OK &&
              cd_db_writer_finish(wl, err, sizeof err) == CD_OK,
          "finish the dbs: %s", err);
    snprintf(lpath, sizeof lpath, "%s/db.jsonl", dir);
    out = fopen(lpath, "w+");
    o.batch = 2;
    sum = out ? cd_infer_db(c, db, ldb, out, &o, err, sizeof err) : NULL;
    CHECK(sum && json_integer_value(json_object_get(sum, "inferred")) == N &&
              json_integer_value(json_object_get(sum, "labelled")) == N,
          "infer the db: %s", sum ? "" : err);
    iou = json_object_get(sum, "iou");
    CHECK_NEAR(json_number_value(json_object_get(iou, "mean_iou")), round(cd_seg_mean_iou(&ref) * 10000) / 100, 1e-9,
               "the db's mean IoU is the list's");
    json_decref(sum);
    if (out)
        fclose(out);
    /* a db of another shape is refused by name */
    sum = cd_infer_db(c, ldb, NULL, stdout, &o, err, sizeof err);
    CHECK(!sum && strstr(err, "val_labels.db holds 1x6x7"), "a db of another shape: %s", err);
    json_decref(sum);
    cd_seg_confusion_free(&ref);
    for (int i = 0; i < N; i++)
        cd_image_free(&img[i]);
    cd_classifier_close(c);
}

static void test_regression(const char *job)
{
    char err[1024];
    float w[R * C * H * W], b[R];
    cd_test_fill_uniform(w, R * C * H * W, -0.01, 0.01);
    cd_test_fill_uniform(b, R, -1, 1);
    make_job(job, reg_net, "regression", w, R * C * H * W, b, R);
    cd_classifier_t *c = cd_classifier_open(job, 0, NULL, err, sizeof err);
    CHECK(c != NULL, "a regression model opens without labels.txt: %s", err);
    if (!c)
        return;
    CHECK(cd_classifier_task(c) == CD_TASK_REGRESSION && cd_classifier_classes(c) == 0, "regression, no classes");
    for (int t = 0; t < 3; t++) {
        cd_image_t img = {0};
        cd_test_random_image(&img, C, H, W);
        cd_infer_tensor *outs = NULL;
        int n = 0;
        CHECK(cd_infer_image(c, &img, &outs, &n, err, sizeof err) == CD_OK, "infer: %s", err);
        CHECK(n == 1 && !strcmp(outs[0].name, "fc") && outs[0].ndim == 2 && outs[0].dims[1] == R,
              "one output fc of (1, %d)", R);
        for (int k = 0; n == 1 && k < R; k++) {
            double ref = b[k];
            for (int i = 0; i < C * H * W; i++)
                ref += (double)w[k * C * H * W + i] * img.data[i];
            CHECK_NEAR(outs[0].data[k], ref, 1e-3 * fmax(1, fabs(ref)), "target k of the InnerProduct");
        }
        json_t *res = n == 1 ? cd_infer_result_json(c, outs, n, 0, 0, NULL, NULL, NULL, err, sizeof err) : NULL;
        json_t *v = json_object_get(json_object_get(res, "outputs"), "fc");
        CHECK(json_array_size(v) == R && fabs(json_number_value(json_array_get(v, 1)) - outs[0].data[1]) < 1e-6 &&
                  !json_object_get(res, "mask"),
              "the vector, no mask");
        json_decref(res);
        cd_infer_tensors_free(outs, n);
        cd_image_free(&img);
    }
    cd_classifier_close(c);
}

int main(void)
{
    cd_test_init("test_infer_generic");
    char job[4200], lists[4200], reg[4200];
    snprintf(job, sizeof job, "%s/seg", cd_test_tmpdir());
    snprintf(lists, sizeof lists, "%s/lists", cd_test_tmpdir());
    snprintf(reg, sizeof reg, "%s/reg", cd_test_tmpdir());
    cd_test_fill_uniform(g_w, K * C, -0.05f, 0.05f);
    /* biases above what the weights can take away (3 x 255 x 0.05): no score is clipped
     * by the ReLU, so no two classes tie at 0 and the pixels compared are never too few */
    cd_test_fill_uniform(g_b, K, 40, 44);
    make_job(job, seg_net, "segmentation", g_w, K * C, g_b, K);
    cd_test_write_at(job, "labels.txt", "sky\nroad\ncar\n");
    cd_test_write_at(job, "palette.txt", "10 20 30\n200 100 50\n");
    test_segmentation_one(job);
    test_iou_by_hand();
    test_segmentation_lists(job, lists);
    test_regression(reg);
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
