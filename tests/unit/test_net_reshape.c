/*
 * cd_net_reshape: a net allocated for one input size and re-planned for another gives
 * the same loss, outputs and parameter gradients as a net built for that size with the
 * same parameters; shrinking keeps every blob where it was, growing works; a network
 * whose parameters depend on the input size (LeNet's InnerProduct) is refused naming
 * the layer. On the CPU backend, whose memory is the host's.
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

static char *read_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "models/%s", name);
    size_t len = 0;
    char *text = cd_read_file(cd_test_source_path(rel), &len);
    CHECK(text != NULL, "cannot read %s", rel);
    return text;
}

/* The train stage of text for batch 1 and images (and labels) of h x w. */
static cd_net *train_net(const char *text, int h, int w, int label, cd_pt_node **tree)
{
    cd_net_opts o = {.stage = "train", .batch = 1, .input_c = 3, .input_h = h, .input_w = w,
                     .num_classes = 10, .seed = 7};
    if (label) {
        o.label_c = 1;
        o.label_h = h;
        o.label_w = w;
    }
    return cd_test_build_net(g_be, text, "net", &o, tree);
}

/* Same parameter values in b as in a (CPU memory is the host's). */
static void copy_params(const cd_net *a, cd_net *b)
{
    CHECK(a->nparams == b->nparams, "%d vs %d parameters", a->nparams, b->nparams);
    for (int i = 0; i < a->nparams && i < b->nparams; i++)
        memcpy(b->params[i]->data, a->params[i]->data, a->params[i]->count * sizeof(float));
}

/* Random images and labels (classes 0..2 with some 255s) of h x w in both nets. */
static void feed_both(cd_net *a, cd_net *b, int h, int w)
{
    size_t n = (size_t)3 * h * w, m = (size_t)h * w;
    float *img = malloc(n * sizeof *img), *lab = malloc(m * sizeof *lab);
    cd_test_fill_uniform(img, n, 0, 255);
    for (size_t i = 0; i < m; i++)
        lab[i] = (cd_test_rand_u64() % 8) == 0 ? 255.0f : (float)(cd_test_rand_u64() % 3);
    cd_net *nets[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        cd_blob *d = cd_net_blob(nets[k], "data"), *l = cd_net_blob(nets[k], "label");
        CHECK(d->count == n && l->count == m, "inputs %zu/%zu for %dx%d", d->count, l->count, h, w);
        if (d->count == n && l->count == m) {
            memcpy(d->data, img, n * sizeof *img);
            memcpy(l->data, lab, m * sizeof *lab);
        }
    }
    free(img);
    free(lab);
}

/* Loss, the crop output and every gradient of a (re-planned) equal b's (built so). */
static void compare_passes(cd_net *a, cd_net *b, const char *what)
{
    cd_net_zero_grad(a);
    cd_net_zero_grad(b);
    float la = cd_net_forward(a), lb = cd_net_forward(b);
    cd_net_backward(a);
    cd_net_backward(b);
    CHECK(isfinite(la) && la > 0, "%s: loss %g", what, (double)la);
    CHECK_NEAR(la, lb, 1e-5 * fabs(lb), what);
    const cd_blob *ya = cd_net_blob(a, "crop"), *yb = cd_net_blob(b, "crop");
    CHECK(ya->count == yb->count, "%s: output %zu vs %zu", what, ya->count, yb->count);
    double worst = 0;
    for (size_t i = 0; i < ya->count && ya->count == yb->count; i++)
        worst = fmax(worst, fabs(ya->data[i] - yb->data[i]));
    for (int p = 0; p < a->nparams; p++)
        for (size_t i = 0; i < a->params[p]->count; i++)
            worst = fmax(worst, fabs(a->params[p]->diff[i] - b->params[p]->diff[i]) /
                                    (1e-3 + fabs(b->params[p]->diff[i])));
    CHECK(worst < 1e-4, "%s: outputs or gradients differ by %g", what, worst);
}

static void test_same_as_built(void)
{
    char *text = read_model("fcn_small.prototxt");
    if (!text)
        return;
    cd_pt_node *ta = NULL, *tb = NULL, *tc = NULL;
    cd_net *a = train_net(text, 48, 56, 1, &ta);
    if (!a)
        goto out;
    void *before[64];
    int nb = a->nblobs < 64 ? a->nblobs : 64;
    for (int i = 0; i < nb; i++)
        before[i] = a->blobs[i]->data;

    char err[1024] = "";
    int rc = cd_net_reshape(a, 33, 40, 33, 40, err, sizeof err);
    CHECK(rc == CD_OK, "reshape to 33x40: %s", err);
    int moved = 0;
    for (int i = 0; i < nb; i++)
        moved += a->blobs[i]->data != before[i];
    CHECK(moved == 0, "%d blobs moved when the input shrank", moved);
    const cd_blob *crop = cd_net_blob(a, "crop");
    CHECK(crop->ndim == 4 && crop->dims[2] == 33 && crop->dims[3] == 40, "crop is %dx%d", crop->dims[2],
          crop->dims[3]);
    cd_net *b = train_net(text, 33, 40, 1, &tb);
    if (b && rc == CD_OK) {
        copy_params(a, b);
        feed_both(a, b, 33, 40);
        compare_passes(a, b, "33x40 after 48x56");
    }

    /* larger than allocated: the blobs grow */
    rc = cd_net_reshape(a, 64, 64, 64, 64, err, sizeof err);
    CHECK(rc == CD_OK, "reshape to 64x64: %s", err);
    cd_net *c = train_net(text, 64, 64, 1, &tc);
    if (c && rc == CD_OK) {
        copy_params(a, c);
        feed_both(a, c, 64, 64);
        compare_passes(a, c, "64x64 after 33x40");
    }
    cd_net_free(b);
    cd_net_free(c);
out:
    cd_net_free(a);
    cd_pt_free(ta);
    cd_pt_free(tb);
    cd_pt_free(tc);
    free(text);
}

/* The deploy stage (an input made from the excluded Data layer) re-planned too. */
static void test_deploy_input(void)
{
    char *text = read_model("fcn_small.prototxt");
    if (!text)
        return;
    cd_net_opts o = {.stage = "deploy", .batch = 1, .input_c = 3, .input_h = 40, .input_w = 40, .seed = 3};
    cd_pt_node *t = NULL;
    cd_net *n = cd_test_build_net(g_be, text, "fcn_small deploy", &o, &t);
    if (n) {
        char err[1024] = "";
        CHECK(cd_net_reshape(n, 21, 35, 0, 0, err, sizeof err) == CD_OK, "deploy reshape: %s", err);
        const cd_blob *d = cd_net_blob(n, "data"), *y = cd_net_blob(n, "crop");
        CHECK(d->dims[2] == 21 && d->dims[3] == 35, "data is %dx%d", d->dims[2], d->dims[3]);
        CHECK(y->dims[1] == 3 && y->dims[2] == 21 && y->dims[3] == 35, "crop is %dx%dx%d", y->dims[1],
              y->dims[2], y->dims[3]);
        cd_test_fill_uniform(d->data, d->count, 0, 255);
        cd_net_forward(n);
        int finite = 1;
        for (size_t i = 0; i < y->count; i++)
            finite &= isfinite(y->data[i]) != 0;
        CHECK(finite, "deploy output after reshape is not finite");
    }
    cd_net_free(n);
    cd_pt_free(t);
    free(text);
}

/* LeNet's ip1 takes conv features of one size only: refused, naming the layer. */
static void test_refused(void)
{
    char *text = read_model("lenet.prototxt");
    if (!text)
        return;
    cd_net_opts o = {.stage = "train", .batch = 1, .input_c = 1, .input_h = 28, .input_w = 28,
                     .num_classes = 10, .seed = 1};
    cd_pt_node *t = NULL;
    cd_net *n = cd_test_build_net(g_be, text, "lenet", &o, &t);
    if (n) {
        char err[1024] = "";
        CHECK(cd_net_reshape(n, 28, 28, 0, 0, err, sizeof err) == CD_OK, "same size: %s", err);
        int rc = cd_net_reshape(n, 36, 36, 0, 0, err, sizeof err);
        CHECK(rc == CD_ERR && strstr(err, "ip1") && strstr(err, "varying size"), "lenet at 36x36: %s", err);
    }
    cd_net_free(n);
    cd_pt_free(t);
    free(text);
}

int main(void)
{
    void (*const tests[])(void) = {test_same_as_built, test_deploy_input, test_refused};
    return cd_test_main_cpu("test_net_reshape", 2, &g_be, tests, CD_ARRAY_LEN(tests));
}
