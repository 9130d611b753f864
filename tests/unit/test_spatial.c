/*
 * Forward values of Deconvolution and Crop on the CPU backend against independent
 * references (a hand-computed case and a direct scatter loop), the bilinear filler's
 * weights against Caffe's formula written out by hand, spatial SoftmaxWithLoss (every
 * normalization mode) and Accuracy with an ignore label against a count done by hand,
 * and the errors for shapes these layers refuse. The gradients are checked by finite differences in test_grad.
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

typedef struct built {
    cd_pt_node *tree;
    cd_net *net;
} built;

/* Parse, validate, build (deploy stage) and allocate; err holds the reason on failure. */
static int build(built *b, const char *name, const char *text, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    cd_net_opts opts = {.stage = "deploy", .seed = cd_test_rand_u64()};
    b->tree = cd_pt_parse(text, strlen(text), name, err, errlen);
    if (!b->tree || cd_pt_validate(b->tree, &cd_pt_net_parameter, name, err, errlen) != CD_OK)
        return CD_ERR;
    b->net = cd_net_build(b->tree, name, &opts, err, errlen);
    if (!b->net)
        return CD_ERR;
    return cd_net_alloc(b->net, g_be, NULL, err, errlen);
}

/* build(), with a failure counted as a failed check that names the case and the reason;
 * 1 when the net is ready. */
static int build_checked(built *b, const char *name, const char *text)
{
    char err[512] = "";
    int ok = build(b, name, text, err, sizeof err) == CD_OK;
    CHECK(ok, "%s: %s", name, err);
    return ok;
}

static void unbuild(built *b)
{
    if (b->net)
        cd_net_free(b->net);
    cd_pt_free(b->tree);
}

static float *param_data(built *b, const char *layer, int i)
{
    return cd_net_layer(b->net, layer)->params[i]->data; /* host memory on the CPU backend */
}

/* ---- Deconvolution --------------------------------------------------------------------- */

/* 1x1x2x2 input, 2x2 kernel, stride 2: every input pixel stamps the kernel times its
 * value into its own 2x2 block of the 4x4 output; plus the bias. */
static void test_deconv_hand(void)
{
    static const char text[] =
        "layer { name: \"in\" type: \"Input\" top: \"x\" input_param { shape { dim: 1 dim: 1 dim: 2 dim: 2 } } }\n"
        "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" "
        "convolution_param { num_output: 1 kernel_size: 2 stride: 2 } }\n";
    built b;
    int ok = build_checked(&b, "deconv hand", text);
    if (ok) {
        static const float x[4] = {1, 2, 3, 4}, w[4] = {1, 10, 100, 1000};
        memcpy(cd_net_blob(b.net, "x")->data, x, sizeof x);
        memcpy(param_data(&b, "up", 0), w, sizeof w);
        param_data(&b, "up", 1)[0] = 0.5f;
        cd_net_forward(b.net);
        cd_blob *y = cd_net_blob(b.net, "y");
        CHECK(y->ndim == 4 && y->dims[2] == 4 && y->dims[3] == 4, "deconv hand: top is not 1x1x4x4");
        static const float want[16] = {
            1,   10,   2,   20,   100, 1000, 200, 2000,
            3,   30,   4,   40,   300, 3000, 400, 4000,
        };
        for (int i = 0; i < 16 && y->count == 16; i++)
            CHECK_NEAR(y->data[i], want[i] + 0.5f, 1e-4, "deconv hand");
    }
    unbuild(&b);
}

/* Random input, weights and bias, stride 2, pad 1, two groups, against the definition:
 * y[n][g*cog+o][i*s-p+a][j*s-p+b] += x[n][g*cig+ci][i][j] * w[g*cig+ci][o][a][b]. */
static void test_deconv_reference(void)
{
    enum { N = 2, CI = 4, H = 3, W = 4, CO = 6, G = 2, K = 3, S = 2, P = 1 };
    enum { OH = S * (H - 1) + K - 2 * P, OW = S * (W - 1) + K - 2 * P };
    static const char text[] =
        "layer { name: \"in\" type: \"Input\" top: \"x\" input_param { shape { dim: 2 dim: 4 dim: 3 dim: 4 } } }\n"
        "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" "
        "convolution_param { num_output: 6 kernel_size: 3 stride: 2 pad: 1 group: 2 "
        "weight_filler { type: \"gaussian\" } bias_filler { type: \"uniform\" min: -1 max: 1 } } }\n";
    built b;
    int ok = build_checked(&b, "deconv reference", text);
    cd_blob *y = ok ? cd_net_blob(b.net, "y") : NULL;
    ok = ok && y->dims[0] == N && y->dims[1] == CO && y->dims[2] == OH && y->dims[3] == OW;
    CHECK(ok, "deconv reference: top is not %dx%dx%dx%d", N, CO, OH, OW);
    if (ok) {
        float *x = cd_net_blob(b.net, "x")->data, *w = param_data(&b, "up", 0), *bias = param_data(&b, "up", 1);
        cd_test_fill_uniform(x, N * CI * H * W, -1, 1);
        double *ref = calloc(N * CO * OH * OW, sizeof *ref);
        int cig = CI / G, cog = CO / G;
        for (int n = 0; n < N; n++)
            for (int c = 0; c < CO; c++)
                for (int i = 0; i < OH * OW; i++)
                    ref[(n * CO + c) * OH * OW + i] = bias[c];
        for (int n = 0; n < N; n++)
            for (int ci = 0; ci < CI; ci++)
                for (int o = 0; o < cog; o++)
                    for (int i = 0; i < H; i++)
                        for (int j = 0; j < W; j++)
                            for (int a = 0; a < K; a++)
                                for (int bb = 0; bb < K; bb++) {
                                    int oy = i * S - P + a, ox = j * S - P + bb, co = ci / cig * cog + o;
                                    if (oy < 0 || oy >= OH || ox < 0 || ox >= OW)
                                        continue;
                                    ref[((n * CO + co) * OH + oy) * OW + ox] +=
                                        (double)x[((n * CI + ci) * H + i) * W + j] *
                                        w[((ci * cog + o) * K + a) * K + bb];
                                }
        cd_net_forward(b.net);
        double worst = 0;
        for (int i = 0; i < N * CO * OH * OW; i++)
            worst = fmax(worst, fabs(y->data[i] - ref[i]));
        CHECK(worst < 1e-4, "deconv reference: largest difference %g", worst);
        free(ref);
    }
    unbuild(&b);
}

/* ---- the bilinear filler ------------------------------------------------------------------ */

/* Caffe: f = ceil(k/2), c = (2f-1-f%2)/(2f), w(x,y) = (1-|x/f-c|)(1-|y/f-c|). Worked
 * out: k = 4: f = 2, c = 0.75, per axis 0.25 0.75 0.75 0.25; k = 3: f = 2, c = 0.75 too
 * (Caffe's centre, not (k-1)/(2f)), per axis 0.25 0.75 0.75; k = 5: f = 3, c = 4/6, per
 * axis 1/3 2/3 1 2/3 1/3. Every (channel, channel) slice holds the same kernel. */
static void check_bilinear(int k, const float *axis_w)
{
    char text[1024], name[64];
    snprintf(name, sizeof name, "bilinear k%d", k);
    snprintf(text, sizeof text,
             "layer { name: \"in\" type: \"Input\" top: \"x\" input_param { shape { dim: 1 dim: 2 dim: 4 dim: 4 } } }\n"
             "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" param { lr_mult: 0 } "
             "convolution_param { num_output: 4 kernel_size: %d stride: 2 group: 2 bias_term: false "
             "weight_filler { type: \"bilinear\" } } }\n", k);
    built b;
    int ok = build_checked(&b, name, text);
    if (ok) {
        const float *w = param_data(&b, "up", 0);
        size_t count = cd_net_layer(b.net, "up")->params[0]->count;
        CHECK(count == (size_t)(2 * 2 * k * k), "%s: %zu weights", name, count);
        for (size_t i = 0; i < count; i++) {
            int x = (int)(i % (size_t)k), y = (int)(i / (size_t)k % (size_t)k);
            CHECK_NEAR(w[i], axis_w[y] * axis_w[x], 1e-6, name);
        }
    }
    unbuild(&b);
}

static void test_bilinear(void)
{
    static const float k4[4] = {0.25f, 0.75f, 0.75f, 0.25f}, k3[3] = {0.25f, 0.75f, 0.75f};
    static const float k5[5] = {1.0f / 3, 2.0f / 3, 1.0f, 2.0f / 3, 1.0f / 3};
    check_bilinear(4, k4);
    check_bilinear(3, k3);
    check_bilinear(5, k5);

    /* a non-square kernel is refused with the parameter's name */
    static const char text[] =
        "layer { name: \"in\" type: \"Input\" top: \"x\" input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }\n"
        "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" "
        "convolution_param { num_output: 1 kernel_h: 4 kernel_w: 2 stride: 2 "
        "weight_filler { type: \"bilinear\" } } }\n";
    char err[512] = "";
    built b;
    CHECK(build(&b, "bilinear rect", text, err, sizeof err) != CD_OK, "a 4x2 bilinear kernel was filled");
    CHECK(strstr(err, "bilinear") && strstr(err, "square"), "bilinear rect: message: %s", err);
    unbuild(&b);
}

/* ---- Crop ---------------------------------------------------------------------------------- */

/* x (1,2,4,5) holds its own flat index; crop to r's (1,2,2,3) at offsets (1, 2):
 * y[c][i][j] = x[c][i+1][j+2] = c*20 + (i+1)*5 + j+2. */
static void test_crop_hand(void)
{
    static const char text[] =
        "layer { name: \"in\" type: \"Input\" top: \"x\" top: \"r\" input_param { "
        "shape { dim: 1 dim: 2 dim: 4 dim: 5 } shape { dim: 1 dim: 2 dim: 2 dim: 3 } } }\n"
        "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" "
        "crop_param { axis: 2 offset: 1 offset: 2 } }\n";
    built b;
    int ok = build_checked(&b, "crop hand", text);
    if (ok) {
        float *x = cd_net_blob(b.net, "x")->data;
        for (int i = 0; i < 40; i++)
            x[i] = (float)i;
        cd_net_forward(b.net);
        cd_blob *y = cd_net_blob(b.net, "y");
        CHECK(y->count == 12 && y->dims[1] == 2 && y->dims[2] == 2 && y->dims[3] == 3, "crop hand: shape");
        for (int c = 0; c < 2 && y->count == 12; c++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++)
                    CHECK(y->data[(c * 2 + i) * 3 + j] == (float)(c * 20 + (i + 1) * 5 + j + 2),
                          "crop hand: y[%d][%d][%d] = %g", c, i, j, y->data[(c * 2 + i) * 3 + j]);
    }
    unbuild(&b);
}

/* ---- spatial SoftmaxWithLoss and Accuracy ------------------------------------------------ */

/* Scores (2, 3, 2, 3) against labels (2, 1, 2, 3) with ignored pixels (255): the loss of
 * every normalization mode and the accuracy against a count done here in double. */
static void test_spatial_loss(void)
{
    enum { N = 2, C = 3, H = 2, W = 3, P = H * W };
    static const float labels[N * P] = {0, 2, 255, 1, 1, 0, 255, 255, 2, 0, 1, 2};
    float scores[N * C * P];
    for (int i = 0; i < N * C * P; i++)
        scores[i] = (float)(cd_test_rand_u64() % 2001) / 500.0f - 2.0f;
    double nll = 0, correct = 0;
    int valid = 0;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++) {
            float lab = labels[n * P + p];
            if (lab == 255)
                continue;
            double mx = -1e30, sum = 0;
            int best = 0;
            for (int c = 0; c < C; c++) {
                double v = scores[(n * C + c) * P + p];
                if (v > mx)
                    mx = v, best = c;
            }
            for (int c = 0; c < C; c++)
                sum += exp(scores[(n * C + c) * P + p] - mx);
            nll += -(scores[(n * C + (int)lab) * P + p] - mx - log(sum));
            correct += best == (int)lab;
            valid++;
        }
    static const struct {
        const char *mode;
        double normalizer;
    } modes[] = {{"VALID", 0}, {"FULL", N * P}, {"BATCH_SIZE", N}, {"NONE", 1}};
    for (size_t m = 0; m < CD_ARRAY_LEN(modes); m++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "layer { name: \"in\" type: \"Input\" top: \"x\" top: \"label\" input_param { "
                 "shape { dim: %d dim: %d dim: %d dim: %d } shape { dim: %d dim: 1 dim: %d dim: %d } } }\n"
                 "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"label\" top: \"loss\" "
                 "loss_param { ignore_label: 255 normalization: %s } }\n"
                 "layer { name: \"acc\" type: \"Accuracy\" bottom: \"x\" bottom: \"label\" top: \"acc\" "
                 "accuracy_param { ignore_label: 255 } }\n",
                 N, C, H, W, N, H, W, modes[m].mode);
        built b;
        if (!build_checked(&b, modes[m].mode, text)) {
            unbuild(&b);
            continue;
        }
        memcpy(cd_net_blob(b.net, "x")->data, scores, sizeof scores);
        memcpy(cd_net_blob(b.net, "label")->data, labels, sizeof labels);
        cd_net_forward(b.net);
        double want = nll / (modes[m].normalizer > 0 ? modes[m].normalizer : valid);
        float got = cd_net_blob(b.net, "loss")->data[0], acc = cd_net_blob(b.net, "acc")->data[0];
        CHECK(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "spatial loss, %s: %.7f, by hand %.7f", modes[m].mode,
              got, want);
        CHECK(fabs(acc - correct / valid) <= 1e-6, "spatial accuracy with ignore_label: %.6f, by hand %.6f", acc,
              correct / valid);
        unbuild(&b);
    }
}

/* shapes Crop and Deconvolution refuse, each with a message saying what is wrong */
static void test_refused(void)
{
    static const struct {
        const char *name, *layer, *want;
    } cases[] = {
        {"crop past the edge",
         "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" "
         "crop_param { offset: 2 } }\n", "runs past axis 3"},
        {"crop offsets count",
         "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" "
         "crop_param { axis: 1 offset: 0 offset: 1 } }\n", "2 offsets for 3 cropped axes"},
        {"deconv group",
         "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" "
         "convolution_param { num_output: 3 kernel_size: 2 group: 2 } }\n", "group 2 must divide"},
        {"deconv pad",
         "layer { name: \"up\" type: \"Deconvolution\" bottom: \"x\" top: \"y\" "
         "convolution_param { num_output: 2 kernel_size: 1 pad: 3 } }\n", "leaves no output"},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        char text[1024], err[512] = "";
        snprintf(text, sizeof text,
                 "layer { name: \"in\" type: \"Input\" top: \"x\" top: \"r\" input_param { "
                 "shape { dim: 1 dim: 2 dim: 4 dim: 4 } shape { dim: 1 dim: 2 dim: 3 dim: 3 } } }\n%s",
                 cases[i].layer);
        built b;
        CHECK(build(&b, cases[i].name, text, err, sizeof err) != CD_OK, "%s: was accepted", cases[i].name);
        CHECK(strstr(err, cases[i].want) != NULL, "%s: no \"%s\" in: %s", cases[i].name, cases[i].want, err);
        unbuild(&b);
    }
}

int main(void)
{
    static void (*const tests[])(void) = {
        test_deconv_hand, test_deconv_reference, test_bilinear, test_crop_hand, test_spatial_loss, test_refused,
    };
    return cd_test_main_cpu("test_spatial", 0, &g_be, tests, CD_ARRAY_LEN(tests));
}
