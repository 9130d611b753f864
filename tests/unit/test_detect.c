/*
 * DetectNet's layers on the CPU backend against independent references:
 * DetectNetTransformation's ground truth (coverage, boxes, sizes, obj_norm) against
 * NV-Caffe's rules written out here box by box, its mean and its flip; its augmentation
 * being a pure function of the stream position (the same counter draws the same, another
 * counter another); L1Loss's value; ClusterDetections (a box proposed by several cells,
 * grouped into one with confidence log(cells)), ClusterGroundtruth (one box per object),
 * ScoreDetections and mAP against counts done by hand; DontCare masking (the care
 * plane, the DontCare list, ScoreDetections leaving detections in them out); and the refusals (a Python layer
 * cdigits does not run, wrong bottoms). L1Loss's gradient is checked in test_grad.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"

static cd_backend_t *g_be;

static cd_net *build(const char *text, const char *name, const char *stage, cd_pt_node **tree)
{
    cd_net_opts opts = {.stage = stage, .seed = 7};
    return cd_test_build_net(g_be, text, name, &opts, tree);
}

/* A label row: x, y, w, h, class in DIGITS's 16-float layout. */
static void label_row(float *row, float x, float y, float w, float h, float cls)
{
    memset(row, 0, 16 * sizeof(float));
    row[0] = x, row[1] = y, row[2] = w, row[3] = h, row[5] = cls;
}

/* NV-Caffe's coverage for one box (x, y, w, h) of plane `plane`, written into ref
 * (8 + K, gy, gx): GRIDBOX_MIN with scale_cvg s and min_cvg_len m, obj_norm on. */
static void ref_box(float *ref, int k, int gx, int gy, int stride, float s, float m, float x, float y, float w,
                    float h, int plane)
{
    float cw = fminf(w, fmaxf(m, w * s)), ch = fminf(h, fmaxf(m, h * s));
    float cx0 = x + w / 2 - cw / 2, cy0 = y + h / 2 - ch / 2;
    size_t area = (size_t)gx * gy;
    for (int j = 0; j < gy; j++)
        for (int i = 0; i < gx; i++) {
            float ox = fminf(cx0 + cw, (float)(i + 1) * stride) - fmaxf(cx0, (float)i * stride);
            float oy = fminf(cy0 + ch, (float)(j + 1) * stride) - fmaxf(cy0, (float)j * stride);
            if (ox <= 0 || oy <= 0)
                continue;
            size_t at = (size_t)j * gx + i;
            for (int c = 0; c < k; c++)
                ref[(8 + c) * area + at] = c == plane;
            ref[at] = 1;
            ref[1 * area + at] = x - (float)(i * stride);
            ref[2 * area + at] = y - (float)(j * stride);
            ref[3 * area + at] = x + w - (float)(i * stride);
            ref[4 * area + at] = y + h - (float)(j * stride);
            ref[5 * area + at] = 1 / w;
            ref[6 * area + at] = 1 / h;
            ref[7 * area + at] = fmaxf(0.0f, (float)(stride * stride) / (cw * ch));
        }
}

#define GT_PARAM(extra)                                                                           \
    "  detectnet_groundtruth_param { stride: 8 scale_cvg: 0.4 gridbox_type: GRIDBOX_MIN min_cvg_len: 6 " \
    "    obj_norm: true image_size_x: 48 image_size_y: 32 crop_bboxes: true "                        \
    "    object_class { src: 1 dst: 0 } object_class { src: 2 dst: 1 } }\n"                          \
    "  transform_param { mean_value: 127 }\n" extra

#define INPUTS                                                                                    \
    "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\" input_param { "             \
    "shape { dim: 2 dim: 3 dim: 32 dim: 48 } shape { dim: 2 dim: 1 dim: 3 dim: 16 } } }\n"

/* Two images, boxes of both classes, a dontcare one (class 0, not mapped: no coverage)
 * and padding; the val stage (no augmentation). */
static void test_groundtruth(void)
{
    static const char text[] = INPUTS
        "layer { name: \"t\" type: \"DetectNetTransformation\" bottom: \"data\" bottom: \"label\" "
        "top: \"tdata\" top: \"tlabel\"\n" GT_PARAM("") "}\n";
    cd_pt_node *tree;
    cd_net *net = build(text, "groundtruth", "val", &tree);
    if (!net)
        return;
    cd_blob *data = cd_net_blob(net, "data"), *label = cd_net_blob(net, "label");
    cd_blob *td = cd_net_blob(net, "tdata"), *tl = cd_net_blob(net, "tlabel");
    CHECK(tl->ndim == 4 && tl->dims[1] == 10 && tl->dims[2] == 4 && tl->dims[3] == 6,
          "tlabel is (2, 8 + 2 classes, 32/8, 48/8)");
    cd_test_fill_uniform(data->data, data->count, 0, 255);
    float *l = label->data;
    label_row(l + 0, 3.5f, 2, 20, 14, 1);
    label_row(l + 16, 30, 10, 9.5f, 30, 2); /* past the bottom edge: cropped to 22 */
    label_row(l + 32, 0, 0, 40, 30, 0);     /* dontcare */
    label_row(l + 48, 10, 5, 30, 20, 2);
    label_row(l + 64, 0, 0, 0, 0, -1);
    label_row(l + 80, 0, 0, 0, 0, -1);
    cd_net_forward(net);
    for (size_t i = 0; i < data->count; i++)
        if (fabsf(td->data[i] - (data->data[i] - 127.0f)) > 1e-3f) {
            CHECK(0, "tdata[%zu] = %g, want %g - 127", i, td->data[i], data->data[i]);
            break;
        }
    size_t per = (size_t)10 * 4 * 6;
    float *ref = calloc(2 * per, sizeof(float));
    ref_box(ref, 2, 6, 4, 8, 0.4f, 6, 3.5f, 2, 20, 14, 0);
    ref_box(ref, 2, 6, 4, 8, 0.4f, 6, 30, 10, 9.5f, 22, 1);
    ref_box(ref + per, 2, 6, 4, 8, 0.4f, 6, 10, 5, 30, 20, 1);
    int bad = 0;
    for (size_t i = 0; i < 2 * per && bad < 5; i++)
        if (fabsf(tl->data[i] - ref[i]) > 1e-5f) {
            CHECK(0, "tlabel[%zu] (image %zu plane %zu) = %g, want %g", i, i / per, i % per / 24, tl->data[i],
                  ref[i]);
            bad++;
        }
    CHECK(!bad, "ground truth matches NV-Caffe's");
    free(ref);
    cd_net_free(net);
    cd_pt_free(tree);
}

/* The train stage with only a flip (probability 1) and no crop: the image is mirrored
 * and the box's x becomes w - x - 1 - width, as NV-Caffe's. */
static void test_flip(void)
{
    static const char text[] = INPUTS
        "layer { name: \"t\" type: \"DetectNetTransformation\" bottom: \"data\" bottom: \"label\" "
        "top: \"tdata\" top: \"tlabel\"\n" GT_PARAM(
            "  detectnet_augmentation_param { crop_prob: 0 scale_prob: 0 flip_prob: 1 rotation_prob: 0 "
            "hue_rotation_prob: 0 desaturation_prob: 0 }\n")
        "}\n"
        "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"tdata\" bottom: \"tdata\" top: \"loss\" }\n";
    cd_pt_node *tree;
    cd_net *net = build(text, "flip", "train", &tree);
    if (!net)
        return;
    cd_blob *data = cd_net_blob(net, "data"), *label = cd_net_blob(net, "label");
    cd_blob *td = cd_net_blob(net, "tdata"), *tl = cd_net_blob(net, "tlabel");
    cd_test_fill_uniform(data->data, data->count, 0, 255);
    for (int i = 0; i < 6; i++)
        label_row(label->data + 16 * i, 0, 0, 0, 0, -1);
    label_row(label->data, 4, 6, 16, 12, 2);
    cd_net_forward(net);
    int bad = 0;
    for (int c = 0; c < 3 && !bad; c++)
        for (int y = 0; y < 32 && !bad; y++)
            for (int x = 0; x < 48 && !bad; x++) {
                float want = data->data[(c * 32 + y) * 48 + 47 - x] - 127.0f;
                float got = td->data[(c * 32 + y) * 48 + x];
                bad = fabsf(got - want) > 1e-3f;
                CHECK(!bad, "flipped pixel (%d, %d, %d) = %g, want %g", c, y, x, got, want);
            }
    size_t per = (size_t)10 * 24;
    float *ref = calloc(per, sizeof(float));
    ref_box(ref, 2, 6, 4, 8, 0.4f, 6, 48 - 4 - 1 - 16, 6, 16, 12, 1);
    for (size_t i = 0; i < per && !bad; i++) {
        bad = fabsf(tl->data[i] - ref[i]) > 1e-5f;
        CHECK(!bad, "flipped ground truth [%zu] = %g, want %g", i, tl->data[i], ref[i]);
    }
    free(ref);
    cd_net_free(net);
    cd_pt_free(tree);
}

/* Every augmentation on: the result is a function of the counter alone. */
static void test_augment_stream(void)
{
    static const char text[] = INPUTS
        "layer { name: \"t\" type: \"DetectNetTransformation\" bottom: \"data\" bottom: \"label\" "
        "top: \"tdata\" top: \"tlabel\"\n" GT_PARAM(
            "  detectnet_augmentation_param { crop_prob: 1 shift_x: 8 shift_y: 8 scale_prob: 1 scale_min: 0.8 "
            "scale_max: 1.3 flip_prob: 0.5 rotation_prob: 1 max_rotate_degree: 10 hue_rotation_prob: 1 "
            "hue_rotation: 30 desaturation_prob: 1 desaturation_max: 0.5 }\n")
        "}\n"
        "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"tdata\" bottom: \"tdata\" top: \"loss\" }\n";
    cd_pt_node *tree;
    cd_net *net = build(text, "augment", "train", &tree);
    if (!net)
        return;
    cd_blob *data = cd_net_blob(net, "data"), *label = cd_net_blob(net, "label");
    cd_blob *td = cd_net_blob(net, "tdata"), *tl = cd_net_blob(net, "tlabel");
    cd_test_fill_uniform(data->data, data->count, 0, 255);
    for (int i = 0; i < 6; i++)
        label_row(label->data + 16 * i, 0, 0, 0, 0, -1);
    label_row(label->data, 10, 6, 20, 16, 1);
    label_row(label->data + 48, 20, 10, 18, 14, 2);
    size_t nd = td->count, nl = tl->count;
    float *a = malloc((nd + nl) * sizeof(float)), *b = malloc((nd + nl) * sizeof(float));
    net->rng_counter = 41;
    cd_net_forward(net);
    memcpy(a, td->data, nd * sizeof(float));
    memcpy(a + nd, tl->data, nl * sizeof(float));
    net->rng_counter = 99;
    cd_net_forward(net);
    int differs = memcmp(td->data, a, nd * sizeof(float)) != 0;
    net->rng_counter = 41;
    cd_net_forward(net);
    memcpy(b, td->data, nd * sizeof(float));
    memcpy(b + nd, tl->data, nl * sizeof(float));
    CHECK(differs, "another stream position augments differently");
    CHECK(!memcmp(a, b, (nd + nl) * sizeof(float)), "the same stream position augments the same");
    double cover = 0;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < 24; k++)
            cover += tl->data[(size_t)i * 240 + k];
    CHECK(cover > 0, "the augmented boxes still cover cells");
    free(a);
    free(b);
    cd_net_free(net);
    cd_pt_free(tree);
}

/* ---- L1Loss ---- */
static void test_l1(void)
{
    static const char text[] =
        "layer { name: \"in\" type: \"Input\" top: \"a\" top: \"b\" input_param { "
        "shape { dim: 3 dim: 4 dim: 2 } shape { dim: 3 dim: 8 } } }\n"
        "layer { name: \"loss\" type: \"L1Loss\" bottom: \"a\" bottom: \"b\" top: \"loss\" loss_weight: 2 }\n";
    cd_pt_node *tree;
    cd_net *net = build(text, "l1", "train", &tree);
    if (!net)
        return;
    cd_blob *a = cd_net_blob(net, "a"), *b = cd_net_blob(net, "b");
    cd_test_fill_uniform(a->data, a->count, -2, 2);
    cd_test_fill_uniform(b->data, b->count, -2, 2);
    double ref = 0;
    for (size_t i = 0; i < a->count; i++)
        ref += fabs((double)a->data[i] - b->data[i]);
    ref /= 3;
    float total = cd_net_forward(net);
    CHECK_NEAR(cd_net_layer(net, "loss")->value, ref, 1e-5 * fmax(1, ref), "L1Loss value");
    CHECK_NEAR(total, 2 * ref, 1e-5 * fmax(1, ref), "loss_weight 2");
    cd_net_free(net);
    cd_pt_free(tree);
}

/* ---- clustering and mAP ---- */

#define CLUSTER_NET(cluster_args)                                                                  \
    "layer { name: \"in\" type: \"Input\" top: \"cvg\" top: \"box\" top: \"gcvg\" top: \"gbox\" "   \
    "input_param { shape { dim: 1 dim: 1 dim: 4 dim: 6 } shape { dim: 1 dim: 4 dim: 4 dim: 6 } "     \
    "shape { dim: 1 dim: 1 dim: 4 dim: 6 } shape { dim: 1 dim: 4 dim: 4 dim: 6 } } }\n"             \
    "layer { name: \"cluster\" type: \"Python\" bottom: \"cvg\" bottom: \"box\" top: \"det\" "      \
    "python_param { module: 'caffe.layers.detectnet.clustering' layer: 'ClusterDetections' "        \
    "param_str: '" cluster_args "' } }\n"                                                           \
    "layer { name: \"cluster_gt\" type: \"Python\" bottom: \"gcvg\" bottom: \"gbox\" top: \"gt\" "  \
    "python_param { module: 'caffe.layers.detectnet.clustering' layer: 'ClusterGroundtruth' "       \
    "param_str: '96, 64, 16' } }\n"                                                                 \
    "layer { name: \"score\" type: \"Python\" bottom: \"gt\" bottom: \"det\" top: \"scored\" "      \
    "python_param { module: 'caffe.layers.detectnet.mean_ap' layer: 'ScoreDetections' param_str: '0.5' } }\n" \
    "layer { name: \"mAP\" type: \"Python\" bottom: \"scored\" top: \"mAP\" top: \"precision\" top: \"recall\" " \
    "python_param { module: 'caffe.layers.detectnet.mean_ap' layer: 'mAP' } }\n"

/* set cell (x, y) of a 6x4 grid of stride 16 to propose the box (x1, y1, x2, y2) */
static void propose(cd_blob *cvg, cd_blob *box, int x, int y, float c, float x1, float y1, float x2, float y2)
{
    size_t at = (size_t)y * 6 + x;
    cvg->data[at] = c;
    float v[4] = {x1 - 16.0f * x, y1 - 16.0f * y, x2 - 16.0f * x, y2 - 16.0f * y};
    for (int k = 0; k < 4; k++)
        box->data[k * 24 + at] = v[k];
}

static void test_cluster_map(void)
{
    static const char text[] = CLUSTER_NET("96, 64, 16, 0.5, 1, 0.2, 4");
    cd_pt_node *tree;
    cd_net *net = build(text, "cluster", "val", &tree);
    if (!net)
        return;
    cd_blob *cvg = cd_net_blob(net, "cvg"), *box = cd_net_blob(net, "box");
    cd_blob *gcvg = cd_net_blob(net, "gcvg"), *gbox = cd_net_blob(net, "gbox");
    /* object A proposed by 3 cells (one of them slightly off), object B by 2, a lone
     * cell C (a group of 1: dropped, as groupRectangles with thresh 1 drops it), and a
     * cell under the threshold */
    propose(cvg, box, 1, 1, 0.9f, 20, 18, 60, 50);
    propose(cvg, box, 2, 1, 0.8f, 21, 18, 61, 51);
    propose(cvg, box, 1, 2, 0.7f, 20, 19, 60, 50);
    propose(cvg, box, 4, 2, 0.9f, 70, 30, 90, 60);
    propose(cvg, box, 5, 2, 0.9f, 70, 30, 90, 60);
    propose(cvg, box, 5, 0, 0.6f, 80, 2, 95, 12);
    propose(cvg, box, 0, 3, 0.4f, 0, 50, 10, 63);
    /* truth: A (in two cells), B' (which no detection matches at IoU 0.5) */
    propose(gcvg, gbox, 1, 1, 1, 20, 18, 60, 50);
    propose(gcvg, gbox, 2, 1, 1, 20, 18, 60, 50);
    propose(gcvg, gbox, 3, 3, 1, 40, 50, 60, 64);
    cd_net_forward(net);
    const float *det = cd_net_blob(net, "det")->data, *gt = cd_net_blob(net, "gt")->data;
    CHECK(cd_net_blob(net, "det")->dims[1] == 50, "50 rows by default");
    /* A: mean of (20,18,60,50), (21,18,61,51), (20,19,60,50) rounded: 20, 18, 60, 50, log 3 */
    CHECK(fabsf(det[0] - 20) < 1e-6f && fabsf(det[1] - 18) < 1e-6f && fabsf(det[2] - 60) < 1e-6f &&
              fabsf(det[3] - 50) < 1e-6f && fabsf(det[4] - logf(3)) < 1e-6f,
          "first detection %g %g %g %g %g, want 20 18 60 50 log(3)", det[0], det[1], det[2], det[3], det[4]);
    CHECK(fabsf(det[5] - 70) < 1e-6f && fabsf(det[8] - 60) < 1e-6f && fabsf(det[9] - logf(2)) < 1e-6f,
          "second detection %g %g %g %g %g, want 70 30 90 60 log(2)", det[5], det[6], det[7], det[8], det[9]);
    int zeros = 1;
    for (int i = 10; i < 250; i++)
        zeros &= det[i] == 0;
    CHECK(zeros, "zero rows after the two detections");
    CHECK(gt[0] == 20 && gt[1] == 18 && gt[2] == 60 && gt[3] == 50 && gt[5] == 40 && gt[8] == 64 && gt[10] == 0,
          "ground truth: A once, then B', then zeros (got %g %g %g %g / %g %g %g %g / %g)", gt[0], gt[1], gt[2],
          gt[3], gt[5], gt[6], gt[7], gt[8], gt[10]);
    /* scored: A matched (1), B a false positive (2), B' missed (3) */
    const float *sc = cd_net_blob(net, "scored")->data;
    CHECK(sc[4] == 1 && sc[9] == 2 && sc[14] == 3 && sc[19] == 0, "marks %g %g %g %g, want 1 2 3 0", sc[4],
          sc[9], sc[14], sc[19]);
    float m = cd_net_blob(net, "mAP")->data[0], p = cd_net_blob(net, "precision")->data[0],
          r = cd_net_blob(net, "recall")->data[0];
    CHECK_NEAR(p, 50, 1e-4, "precision 1 of 2 detections, percent");
    CHECK_NEAR(r, 50, 1e-4, "recall 1 of 2 true boxes, percent");
    CHECK_NEAR(m, 25, 1e-4, "mAP = precision * recall / 100");
    cd_net_free(net);
    cd_pt_free(tree);
}

/* DontCare masking: the transformation's care plane is 0 in cells at least half under a
 * DontCare box that no object covers, and its DontCare list holds those boxes cropped to
 * the image; ScoreDetections given that list leaves an unmatched detection lying in one
 * out, and still counts one elsewhere as a false positive. */
static void test_dontcare(void)
{
    static const char text[] = INPUTS
        "layer { name: \"t\" type: \"DetectNetTransformation\" bottom: \"data\" bottom: \"label\" "
        "top: \"tdata\" top: \"tlabel\" top: \"care\" top: \"dc\"\n" GT_PARAM("") "}\n"
        "layer { name: \"in2\" type: \"Input\" top: \"gt\" top: \"det\" "
        "input_param { shape { dim: 2 dim: 1 dim: 5 } shape { dim: 2 dim: 3 dim: 5 } } }\n"
        "layer { name: \"score\" type: \"Python\" bottom: \"gt\" bottom: \"det\" bottom: \"dc\" top: \"scored\" "
        "python_param { module: 'caffe.layers.detectnet.mean_ap' layer: 'ScoreDetections' param_str: '0.5' } }\n"
        "layer { name: \"mAP\" type: \"Python\" bottom: \"scored\" top: \"mAP\" top: \"precision\" "
        "top: \"recall\" python_param { module: 'caffe.layers.detectnet.mean_ap' layer: 'mAP' } }\n";
    cd_pt_node *tree;
    cd_net *net = build(text, "dontcare", "val", &tree);
    if (!net)
        return;
    cd_blob *care = cd_net_blob(net, "care"), *dc = cd_net_blob(net, "dc");
    CHECK(care->ndim == 4 && care->dims[0] == 2 && care->dims[1] == 1 && care->dims[2] == 4 && care->dims[3] == 6,
          "care is (2, 1, 32/8, 48/8)");
    CHECK(dc->ndim == 3 && dc->dims[0] == 2 && dc->dims[1] == 3 && dc->dims[2] == 5, "dc is (2, label rows, 5)");
    float *l = cd_net_blob(net, "label")->data;
    label_row(l + 0, 3.5f, 2, 20, 14, 1); /* covers cells x 1..2, y 0..1 */
    label_row(l + 16, 0, 0, 16, 16, 0);   /* cells x 0..1, y 0..1; (1, y) is the object's */
    label_row(l + 32, 29, 8, 19, 16, 0);  /* x 3 only 3/8 under it; x 4..5, y 1..2 */
    label_row(l + 48, 40, 20, 20, 20, 0); /* past the corner: cropped to 40, 20, 48, 32 */
    label_row(l + 64, 0, 0, 0, 0, -1);
    label_row(l + 80, 0, 0, 0, 0, -1);
    /* image 0: the truth A; detections: A, B inside the second DontCare box, C elsewhere */
    float *gt = cd_net_blob(net, "gt")->data, *det = cd_net_blob(net, "det")->data;
    const float a[5] = {4, 2, 24, 16, 0}, da[5] = {4, 2, 24, 17, 2}, db[5] = {32, 10, 44, 20, 1},
                dcc[5] = {2, 20, 14, 30, 1};
    memcpy(gt, a, sizeof a);
    memcpy(det, da, sizeof da);
    memcpy(det + 5, db, sizeof db);
    memcpy(det + 10, dcc, sizeof dcc);
    cd_net_forward(net);
    static const float want[2][24] = {
        {0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0},
    };
    int bad = 0;
    for (int i = 0; i < 48 && bad < 4; i++)
        if (care->data[i] != want[i / 24][i % 24]) {
            CHECK(0, "care image %d cell (%d, %d) = %g, want %g", i / 24, i % 24 % 6, i % 24 / 6, care->data[i],
                  want[i / 24][i % 24]);
            bad++;
        }
    CHECK(!bad, "care plane: 0 under DontCare, 1 where an object is or under half a cell is covered");
    const float *d = dc->data;
    CHECK(d[0] == 0 && d[1] == 0 && d[2] == 16 && d[3] == 16 && d[4] == 0 && d[5] == 29 && d[6] == 8 &&
              d[7] == 48 && d[8] == 24 && d[10] == 0 && d[14] == 0,
          "image 0's DontCare list: (0 0 16 16), (29 8 48 24), a zero row; got %g %g %g %g, %g %g %g %g", d[0],
          d[1], d[2], d[3], d[5], d[6], d[7], d[8]);
    CHECK(d[15] == 40 && d[16] == 20 && d[17] == 48 && d[18] == 32 && d[20] == 0,
          "image 1's DontCare box is cropped to the image: got %g %g %g %g", d[15], d[16], d[17], d[18]);
    const float *sc = cd_net_blob(net, "scored")->data;
    CHECK(sc[4] == 1 && sc[9] == 2 && sc[5] == 2 && sc[14] == 0, "marks %g %g %g, want A matched, C false, B left out",
          sc[4], sc[9], sc[14]);
    CHECK_NEAR(cd_net_blob(net, "precision")->data[0], 50, 1e-4, "precision: A of A and C, B not counted");
    CHECK_NEAR(cd_net_blob(net, "recall")->data[0], 100, 1e-4, "recall: A found");
    cd_net_free(net);
    cd_pt_free(tree);
}

static void expect_refusal(const char *text, const char *name, const char *stage, const char *want)
{
    char err[1024] = "";
    cd_pt_node *tree = cd_pt_parse(text, strlen(text), name, err, sizeof err);
    CHECK(tree != NULL, "%s: %s", name, err);
    if (!tree)
        return;
    cd_net *net = NULL;
    if (cd_pt_validate(tree, &cd_pt_net_parameter, name, err, sizeof err) == CD_OK) {
        cd_net_opts opts = {.stage = stage};
        net = cd_net_build(tree, name, &opts, err, sizeof err);
    }
    CHECK(!net && strstr(err, want), "%s: want a refusal with \"%s\", got: %s", name, want, net ? "a net" : err);
    if (net)
        cd_net_free(net);
    cd_pt_free(tree);
}

static void test_refusals(void)
{
    expect_refusal("layer { name: \"in\" type: \"Input\" top: \"x\" input_param { shape { dim: 1 dim: 2 } } }\n"
                   "layer { name: \"py\" type: \"Python\" bottom: \"x\" top: \"y\" "
                   "python_param { module: 'mymodule' layer: 'MyLayer' } }\n",
                   "unknown python", "deploy", "module \"mymodule\" layer \"MyLayer\" is not a Python layer");
    expect_refusal(INPUTS "layer { name: \"t\" type: \"DetectNetTransformation\" bottom: \"label\" "
                   "bottom: \"label\" top: \"a\" top: \"b\"\n" GT_PARAM("") "}\n",
                   "transform on labels", "deploy", "must be colour images");
    expect_refusal(CLUSTER_NET("96, 64, 16, 0.5, 1"), "short param_str", "deploy", "param_str has 5 values");
    expect_refusal(CLUSTER_NET("96, 64, 16, 0.5, 1, 0.2, 4, 3"), "class count", "deploy",
                   "param_str says 3 classes");
}

int main(void)
{
    void (*const tests[])(void) = {test_groundtruth, test_flip, test_augment_stream, test_l1, test_cluster_map,
                                   test_dontcare, test_refusals};
    return cd_test_main_cpu("test_detect", 1, &g_be, tests, CD_ARRAY_LEN(tests));
}
