/*
 * Finite-difference checks of every layer's backward on the CPU backend.
 *
 * Each case is a small net written as prototxt text: Input layers feed the layer(s)
 * under test, built for stage "train" with force_backward so that every bottom gets a
 * gradient. The objective is a random linear functional of the checked tops,
 *   L = sum_t sum_i r_t[i] * top_t[i]   (+ the net's loss when it has a loss layer),
 * so the analytic gradient is one backward pass with top diff = r (cd_net_backward
 * runs the layers in reverse and Splits sum what several readers send back). Every
 * element of every input and every learnable parameter (a random sample for large
 * tensors) is compared with the central difference (L(x+h) - L(x-h)) / 2h, where the
 * forward passes run in float and L is summed in double from the downloaded tops.
 *
 * The train stage needs a loss layer; nets without one get an unconnected
 * SoftmaxWithLoss over a one-class input (its loss and gradient are exactly 0).
 *
 * Kinks (ReLU at 0, MAX pooling and Eltwise MAX ties) are kept out of reach of the
 * step by how the inputs are drawn, and every case also proves it: a signature of
 * the piecewise-linear choices (ReLU sign pattern, MAX pooling and Eltwise MAX
 * winners) is taken at x, x+h and x-h, and a sample whose signature changes counts
 * as a failure in the per-layer cases. The whole-LeNet check cannot place its
 * 46,000 pooling windows away from ties; there each sample takes the largest of a
 * few steps that straddles no kink (see test_lenet).
 *
 * Usage: test_grad [group...] runs only the named groups (conv, pool, ip, act, norm,
 * shape, loss, dropout, graph, lenet, regress, detect, spatial); CD_TEST_VERBOSE=1 prints every sample.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"

/*
 * Tolerance. Caffe's GradientChecker uses step 1e-2 and accepts
 * |analytic - numeric| <= 1e-3 * max(|analytic|, |numeric|, 1), with the objective
 * itself accumulated in float. We take the same step and threshold, and they hold
 * here with room to spare:
 *  - truncation: the central difference is off by h^2/6 * L''' ~ 1.7e-5 * L''' (0
 *    for the linear and quadratic layers; L''' is O(1..10) for the saturating and
 *    normalizing ones at these input scales);
 *  - rounding: L is summed in double, and only the tops that the perturbed element
 *    reaches change between the two passes (the others are bit-identical and
 *    cancel), so the noise is about sqrt(#affected tops) * |top| * 6e-8 / 2h, a few
 *    1e-5 for these sizes.
 * Both stay one to two orders of magnitude below 1e-3 (the worst error seen over
 * many seeds is about 5% of the tolerance), so a wrong scale, a missing term or a
 * misrouted gradient (errors of order the gradient itself) fail loudly. The worst
 * error relative to the tolerance is printed for every case.
 */
#define GC_STEP 1e-2
#define GC_TOL 1e-3
#define GC_MAX_CHECK 400 /* elements checked per tensor; larger tensors are sampled */

static cd_backend_t *g_be;

/* ---- a net under test --------------------------------------------------------- */

typedef struct gc_input {
    cd_blob *blob;
    float *host; /* uploaded before every forward (in-place layers may overwrite it) */
    int check;   /* compare its gradient (not for labels and the unconnected loss) */
} gc_input;

typedef struct gc_net {
    const char *name;
    cd_pt_node *tree;
    cd_net *net;
    int ninputs;
    gc_input in[CD_LAYER_MAX_BLOBS];
    float *params;     /* host copy of every parameter, restored before every forward */
    int ntops;
    cd_blob *tops[CD_LAYER_MAX_BLOBS];
    float *r[CD_LAYER_MAX_BLOBS];
    uint64_t counter;  /* rng_counter used by every forward (Dropout's mask) */
    double steps[4];   /* tried in order until one straddles no kink */
    int nsteps;
    double tol;
    double noise;      /* rounding noise of a difference of two L (0: negligible) */
    int allow_kinks;   /* redraw samples that straddle a kink at every step */
    int max_check;
    /* optional objective computed on the host from the net's blobs instead of the
     * net's float loss (LeNet: the loss in double from ip2) */
    double (*host_loss)(struct gc_net *g);
    uint64_t sig0;     /* signature at the unperturbed point */
    double worst;      /* largest |a - n| / tolerance seen */
    long checked, redrawn;
} gc_net;

static const char dummy_loss_text[] =
    "layer { name: \"dummy_in\" type: \"Input\" top: \"dummy_x\" top: \"dummy_label\"\n"
    "  input_param { shape { dim: 1 dim: 1 } shape { dim: 1 } } }\n"
    "layer { name: \"dummy_loss\" type: \"SoftmaxWithLoss\" bottom: \"dummy_x\"\n"
    "  bottom: \"dummy_label\" top: \"dummy_loss\" }\n";

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static float *host_alloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void download(cd_blob *b, float *host)
{
    g_be->iface->download(g_be, host, b->data, b->count * sizeof(float));
}

/* Uniform in [lo, hi] but at least `margin` away from `kink`. */
static float uniform_away(double lo, double hi, double kink, double margin)
{
    for (;;) {
        double v = cd_test_uniform(lo, hi);
        if (fabs(v - kink) >= margin)
            return (float)v;
    }
}

static void gc_fill_uniform(gc_net *g, const char *name, double lo, double hi);

/*
 * Build the net from `text` (plus the unconnected loss when `dummy_loss`), allocate
 * it on the CPU backend, fill inputs uniformly in [-1, 1] (tops named label* and
 * dummy* stay 0 until a case fills them) and learnable parameters uniformly in
 * [-1, 1]. NULL (and a failed check) when the text does not build.
 */
static gc_net *gc_open_opts(const char *name, const char *text, int dummy_loss, cd_net_opts *opts)
{
    char err[1024];
    size_t len = strlen(text) + sizeof dummy_loss_text + 1;
    char *full = malloc(len);
    snprintf(full, len, "%s%s", text, dummy_loss ? dummy_loss_text : "");
    gc_net *g = calloc(1, sizeof *g);
    g->name = name;
    g->steps[0] = GC_STEP;
    g->nsteps = 1;
    g->tol = GC_TOL;
    g->counter = 1000 + cd_test_rand_u64() % 1000;
    g->max_check = GC_MAX_CHECK;
    g->tree = cd_pt_parse(full, strlen(full), name, err, sizeof err);
    free(full);
    int ok = g->tree && cd_pt_validate(g->tree, &cd_pt_net_parameter, name, err, sizeof err) == CD_OK;
    if (ok) {
        opts->seed = cd_test_rand_u64();
        g->net = cd_net_build(g->tree, name, opts, err, sizeof err);
        ok = g->net && cd_net_alloc(g->net, g_be, NULL, err, sizeof err) == CD_OK;
    }
    CHECK(ok, "%s: the net does not build: %s", name, err);
    if (!ok) {
        if (g->net)
            cd_net_free(g->net);
        cd_pt_free(g->tree);
        free(g);
        return NULL;
    }
    cd_net *net = g->net;
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (!(l->type->flags & CD_LAYER_DATA))
            continue;
        for (int t = 0; t < l->ntop && g->ninputs < CD_LAYER_MAX_BLOBS; t++) {
            gc_input *in = &g->in[g->ninputs++];
            in->blob = l->top[t];
            in->host = host_alloc(in->blob->count);
            in->check = !starts_with(in->blob->name, "label") && !starts_with(in->blob->name, "dummy");
            if (in->check)
                gc_fill_uniform(g, in->blob->name, -1.0, 1.0);
        }
    }
    g->params = host_alloc(net->param_count);
    for (int i = 0; i < net->nparams; i++) {
        cd_param *p = net->params[i];
        if (p->learnable)
            cd_test_fill_uniform(g->params + p->offset, p->count, -1.0, 1.0);
    }
    return g;
}

static gc_net *gc_open(const char *name, const char *text, int dummy_loss)
{
    cd_net_opts opts = {.stage = "train", .force_backward = 1};
    return gc_open_opts(name, text, dummy_loss, &opts);
}

static void gc_close(gc_net *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->ninputs; i++)
        free(g->in[i].host);
    for (int i = 0; i < g->ntops; i++)
        free(g->r[i]);
    free(g->params);
    cd_net_free(g->net);
    cd_pt_free(g->tree);
    free(g);
}

static gc_input *gc_in(gc_net *g, const char *name)
{
    for (int i = 0; i < g->ninputs; i++)
        if (!strcmp(g->in[i].blob->name, name))
            return &g->in[i];
    fprintf(stderr, "%s: no input %s\n", g->name, name);
    exit(2);
}

static cd_param *gc_param(gc_net *g, const char *name)
{
    for (int i = 0; i < g->net->nparams; i++)
        if (!strcmp(g->net->params[i]->name, name))
            return g->net->params[i];
    fprintf(stderr, "%s: no parameter %s\n", g->name, name);
    exit(2);
}

static void gc_fill_uniform(gc_net *g, const char *name, double lo, double hi)
{
    gc_input *in = gc_in(g, name);
    cd_test_fill_uniform(in->host, in->blob->count, lo, hi);
}

/* Values at least `margin` from `kink` (ReLU: the kink at 0). */
static void gc_fill_away(gc_net *g, const char *name, double lo, double hi, double kink, double margin)
{
    gc_input *in = gc_in(g, name);
    for (size_t i = 0; i < in->blob->count; i++)
        in->host[i] = uniform_away(lo, hi, kink, margin);
}

/* Distinct values on a shuffled grid of spacing `spacing` (jittered by a quarter of
 * it), so any two differ by at least spacing/2: MAX pooling never sees a near tie. */
static void gc_fill_distinct(gc_net *g, const char *name, double spacing)
{
    gc_input *in = gc_in(g, name);
    size_t n = in->blob->count;
    for (size_t i = 0; i < n; i++)
        in->host[i] = (float)(((double)i - n / 2.0 + cd_test_uniform(-0.25, 0.25)) * spacing);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = cd_test_rand_u64() % (i + 1);
        float t = in->host[i];
        in->host[i] = in->host[j];
        in->host[j] = t;
    }
}

static void gc_fill_labels(gc_net *g, const char *name, int nclasses)
{
    gc_input *in = gc_in(g, name);
    for (size_t i = 0; i < in->blob->count; i++)
        in->host[i] = (float)(cd_test_rand_u64() % (uint64_t)nclasses);
}

static void gc_param_uniform(gc_net *g, const char *name, double lo, double hi)
{
    cd_param *p = gc_param(g, name);
    cd_test_fill_uniform(g->params + p->offset, p->count, lo, hi);
}

/* ---- the signature of the piecewise-linear choices --------------------------------- */

static uint64_t sig_mix(uint64_t h, uint64_t v)
{
    return cd_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* A spatial pair from `field` (1 or 2 values) or its fh_h / fh_w form. */
static void pt_pair(const cd_pt_node *p, const char *field, const char *fh, int def, int *h, int *w)
{
    int n = cd_pt_count(p, field);
    if (n > 0) {
        *h = (int)strtol(cd_pt_nth(p, field, 0)->text, NULL, 10);
        *w = n > 1 ? (int)strtol(cd_pt_nth(p, field, 1)->text, NULL, 10) : *h;
    } else {
        char hn[32], wn[32];
        snprintf(hn, sizeof hn, "%s_h", fh);
        snprintf(wn, sizeof wn, "%s_w", fh);
        *h = (int)cd_pt_int(p, hn, def);
        *w = (int)cd_pt_int(p, wn, def);
    }
}

/* Winners of a MAX pooling layer, found on the host from its bottom with Caffe's
 * window rule (first maximum of the part of the window inside the image). */
static uint64_t sig_pool(const cd_layer *l, uint64_t h)
{
    const cd_pt_node *p = l->param;
    if (strcmp(cd_pt_str(p, "pool", "MAX"), "MAX") != 0)
        return h;
    const cd_blob *x = l->bottom[0], *y = l->top[0];
    int H = x->dims[2], W = x->dims[3], kh, kw, sh, sw, ph, pw;
    if (cd_pt_bool(p, "global_pooling", 0)) {
        kh = H, kw = W, sh = sw = 1, ph = pw = 0;
    } else {
        pt_pair(p, "kernel_size", "kernel", 0, &kh, &kw);
        pt_pair(p, "stride", "stride", 1, &sh, &sw);
        pt_pair(p, "pad", "pad", 0, &ph, &pw);
    }
    float *xs = host_alloc(x->count);
    g_be->iface->download(g_be, xs, x->data, x->count * sizeof(float));
    int planes = x->dims[0] * x->dims[1], oh = y->dims[2], ow = y->dims[3];
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = xs + (size_t)pl * H * W;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int hs = oy * sh - ph, ws = ox * sw - pw;
                int he = hs + kh < H ? hs + kh : H, we = ws + kw < W ? ws + kw : W;
                hs = hs < 0 ? 0 : hs;
                ws = ws < 0 ? 0 : ws;
                int best = -1;
                for (int yy = hs; yy < he; yy++)
                    for (int xx = ws; xx < we; xx++)
                        if (best < 0 || xp[yy * W + xx] > xp[best])
                            best = yy * W + xx;
                h = sig_mix(h, (uint64_t)(best + 1));
            }
    }
    free(xs);
    return h;
}

/* Winners of an Eltwise MAX (first strict maximum over the bottoms). */
static uint64_t sig_eltwise_max(const cd_layer *l, uint64_t h)
{
    if (strcmp(cd_pt_str(l->param, "operation", "SUM"), "MAX") != 0)
        return h;
    size_t n = l->bottom[0]->count;
    float *xs = host_alloc(n * (size_t)l->nbottom);
    for (int b = 0; b < l->nbottom; b++)
        download(l->bottom[b], xs + n * (size_t)b);
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int b = 1; b < l->nbottom; b++)
            if (xs[n * (size_t)b + i] > xs[n * (size_t)best + i])
                best = b;
        h = sig_mix(h, (uint64_t)best);
    }
    free(xs);
    return h;
}

/* ReLU sign pattern, read from its top (in place or not, y > 0 exactly where x > 0
 * for a non-negative slope, and y < 0 where x < 0 for a positive one). */
static uint64_t sig_relu(const cd_layer *l, uint64_t h)
{
    const cd_blob *y = l->top[0];
    float *ys = host_alloc(y->count);
    g_be->iface->download(g_be, ys, y->data, y->count * sizeof(float));
    for (size_t i = 0; i < y->count; i++)
        h = sig_mix(h, (uint64_t)(ys[i] > 0) | (uint64_t)(ys[i] < 0) << 1);
    free(ys);
    return h;
}

/* Taken right after a forward. Pooling bottoms are read after the pass, so a MAX
 * pooling whose bottom is later changed in place would be misread; no case here
 * has one. */
static uint64_t gc_signature(gc_net *g)
{
    uint64_t h = 1;
    for (int i = 0; i < g->net->nlayers; i++) {
        const cd_layer *l = g->net->layers[i];
        const char *t = l->type->name;
        if (!strcmp(t, "ReLU"))
            h = sig_relu(l, h);
        else if (!strcmp(t, "Pooling"))
            h = sig_pool(l, h);
        else if (!strcmp(t, "Eltwise"))
            h = sig_eltwise_max(l, h);
    }
    return h;
}

/* ---- objective and check ---------------------------------------------------------- */

/* Restore inputs and parameters, run one forward with the fixed rng counter and
 * return L in double. */
static double gc_objective(gc_net *g)
{
    cd_net *net = g->net;
    for (int i = 0; i < g->ninputs; i++)
        g_be->iface->upload(g_be, g->in[i].blob->data, g->in[i].host,
                            g->in[i].blob->count * sizeof(float));
    if (net->param_count)
        g_be->iface->upload(g_be, net->arena_data, g->params, net->param_count * sizeof(float));
    net->rng_counter = g->counter;
    double L = cd_net_forward(net);
    if (g->host_loss)
        L = g->host_loss(g);
    for (int t = 0; t < g->ntops; t++) {
        cd_blob *b = g->tops[t];
        float *y = host_alloc(b->count);
        download(b, y);
        for (size_t i = 0; i < b->count; i++)
            L += (double)g->r[t][i] * y[i];
        free(y);
    }
    return L;
}

/* Set the checked tops from a space-separated list and draw their weights r. */
static void gc_set_tops(gc_net *g, const char *tops)
{
    for (int i = 0; i < g->ntops; i++)
        free(g->r[i]);
    g->ntops = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", tops ? tops : "");
    for (char *s = strtok(buf, " "); s; s = strtok(NULL, " ")) {
        cd_blob *b = cd_net_blob(g->net, s);
        if (!b) {
            fprintf(stderr, "%s: no blob %s\n", g->name, s);
            exit(2);
        }
        g->tops[g->ntops] = b;
        g->r[g->ntops] = host_alloc(b->count);
        cd_test_fill_uniform(g->r[g->ntops], b->count, -1.0, 1.0);
        g->ntops++;
    }
}

/* Analytic gradients: zero, forward, top diff = r, backward. */
static void gc_backward(gc_net *g)
{
    cd_net_zero_grad(g->net);
    gc_objective(g);
    for (int t = 0; t < g->ntops; t++)
        g_be->iface->upload(g_be, g->tops[t]->diff, g->r[t], g->tops[t]->count * sizeof(float));
    cd_net_backward(g->net);
}

typedef struct fd_result {
    int ok;          /* within tolerance */
    int kink;        /* every step straddled a kink */
    double numeric, step;
} fd_result;

/* Central difference of L in element i of the host array v (an input or a
 * parameter), with the first step whose two evaluations keep every kink choice of the
 * unperturbed point; compared with the analytic value a. */
static fd_result fd_at(gc_net *g, float *v, size_t i, double a)
{
    fd_result r = {.kink = 1};
    float saved = v[i];
    for (int s = 0; s < g->nsteps && r.kink; s++) {
        v[i] = (float)(saved + g->steps[s]);
        double up = (double)v[i] - saved;
        double lp = gc_objective(g);
        uint64_t sp = gc_signature(g);
        v[i] = (float)(saved - g->steps[s]);
        double dn = saved - (double)v[i];
        double lm = gc_objective(g);
        uint64_t sm = gc_signature(g);
        r.numeric = (lp - lm) / (up + dn); /* the float steps actually taken */
        r.step = g->steps[s];
        r.kink = sp != g->sig0 || sm != g->sig0;
    }
    v[i] = saved;
    double allowed = g->tol * fmax(1.0, fmax(fabs(a), fabs(r.numeric))) + g->noise / (2 * r.step);
    double e = fabs(a - r.numeric) / allowed;
    r.ok = e <= 1.0;
    if (!r.kink && e > g->worst)
        g->worst = e;
    return r;
}

/* Compare one tensor's gradient (host copies: v values, grad analytic) element by
 * element, all of it or a random sample. */
static void gc_check_tensor(gc_net *g, const char *what, float *v, const float *grad, size_t n)
{
    int nbad = 0, nkink = 0, shown = 0;
    int all = n <= (size_t)g->max_check;
    size_t wanted = all ? n : (size_t)g->max_check, ntried = 0, cap = 21 * wanted;
    size_t *tried = calloc(cap, sizeof *tried);
    for (size_t k = 0; k < wanted; k++) {
        size_t i = k;
        if (!all) { /* a random element not drawn before */
            for (int dup = 1; dup;) {
                i = (size_t)(cd_test_rand_u64() % n);
                dup = 0;
                for (size_t j = 0; j < ntried; j++)
                    dup |= tried[j] == i;
            }
            tried[ntried++] = i;
        }
        fd_result r = fd_at(g, v, i, grad[i]);
        if (getenv("CD_TEST_VERBOSE"))
            printf("  %s[%zu]: analytic %.7g numeric %.7g step %g%s\n", what, i, (double)grad[i],
                   r.numeric, r.step, r.kink ? " (kink)" : "");
        if (r.kink) {
            if (g->allow_kinks && !all && ntried < cap) {
                g->redrawn++;
                k--; /* draw another element */
                continue;
            }
            nkink++;
            if (shown++ < 5)
                fprintf(stderr, "  %s: %s[%zu]: the step of %g straddles a kink\n", g->name, what,
                        i, r.step);
            continue;
        }
        g->checked++;
        if (!r.ok) {
            nbad++;
            if (shown++ < 5)
                fprintf(stderr, "  %s: %s[%zu]: analytic %.7g numeric %.7g (step %g)\n", g->name,
                        what, i, (double)grad[i], r.numeric, r.step);
        }
    }
    free(tried);
    CHECK(nbad == 0, "%s: %s: %d of %zu elements differ from the finite difference", g->name, what,
          nbad, wanted);
    CHECK(nkink == 0, "%s: %s: %d samples straddle a kink at every step", g->name, what, nkink);
}

/*
 * Check d L / d (every checked input and every learnable parameter), L being the
 * net's loss (when it has a loss layer) plus the random functional of `tops`.
 */
static void gc_check(gc_net *g, const char *tops)
{
    if (!g)
        return;
    cd_net *net = g->net;
    gc_set_tops(g, tops);
    gc_backward(g);
    g->sig0 = gc_signature(g);
    /* download every gradient before any finite-difference pass overwrites them */
    float *grads[CD_LAYER_MAX_BLOBS] = {0};
    for (int i = 0; i < g->ninputs; i++) {
        if (!g->in[i].check)
            continue;
        grads[i] = host_alloc(g->in[i].blob->count);
        g_be->iface->download(g_be, grads[i], g->in[i].blob->diff, g->in[i].blob->count * sizeof(float));
    }
    float *pgrad = host_alloc(net->param_count);
    if (net->param_count)
        g_be->iface->download(g_be, pgrad, net->arena_diff, net->param_count * sizeof(float));

    for (int i = 0; i < g->ninputs; i++) {
        if (!g->in[i].check)
            continue;
        char what[128];
        snprintf(what, sizeof what, "d/d %s", g->in[i].blob->name);
        gc_check_tensor(g, what, g->in[i].host, grads[i], g->in[i].blob->count);
        free(grads[i]);
    }
    for (int i = 0; i < net->nparams; i++) {
        cd_param *p = net->params[i];
        if (!p->learnable)
            continue;
        char what[128];
        snprintf(what, sizeof what, "d/d %s", p->name);
        gc_check_tensor(g, what, g->params + p->offset, pgrad + p->offset, p->count);
    }
    free(pgrad);
    printf("%-28s %6ld elements, worst error %.3f of the tolerance", g->name, g->checked, g->worst);
    if (g->redrawn)
        printf(" (%ld samples redrawn off kinks)", g->redrawn);
    printf("\n");
}

/* ---- prototxt shorthands ---------------------------------------------------------- */

#define Q(s) "\"" s "\""
#define INPUT4(top, n, c, h, w)                                                             \
    "layer { name: " Q("in_" top) " type: \"Input\" top: " Q(top)                           \
    " input_param { shape { dim: " #n " dim: " #c " dim: " #h " dim: " #w " } } }\n"
#define INPUT3(top, n, c, h)                                                                \
    "layer { name: " Q("in_" top) " type: \"Input\" top: " Q(top)                           \
    " input_param { shape { dim: " #n " dim: " #c " dim: " #h " } } }\n"
#define LAYER1(name, type, bottom, top, params)                                             \
    "layer { name: " Q(name) " type: " Q(type) " bottom: " Q(bottom) " top: " Q(top) " "     \
    params " }\n"
/* three 2x3x2x3 inputs a, b, c into an Eltwise with `params`, top y */
#define ELTWISE3(params)                                                                    \
    INPUT4("a", 2, 3, 2, 3) INPUT4("b", 2, 3, 2, 3) INPUT4("c", 2, 3, 2, 3)                 \
    "layer { name: \"e\" type: \"Eltwise\" bottom: \"a\" bottom: \"b\" bottom: \"c\" "      \
    "top: \"y\" eltwise_param { " params " } }\n"

/* ---- one layer on an input x, checked on its top y ------------------------------------ */

/* How a case draws its checked inputs. */
typedef enum {
    DRAW_UNIFORM,  /* uniform in [lo, hi] */
    DRAW_OFF_KINK, /* uniform in [lo, hi] but more than the step away from ReLU's kink at 0 */
    DRAW_DISTINCT, /* distinct values 4 steps apart: a perturbed element never changes
                    * which element of a MAX pooling window is the largest */
} gc_draw;

/* A case that needs nothing but its net, the draw of its input and the check of its
 * top y: one layer of `type` with `params` on an input x of shape `dims`. */
typedef struct gc_case {
    const char *group; /* the command-line group that runs it */
    const char *name;
    int dims[4];       /* x's shape; trailing 0s are absent (a 2-D x is {n, c}) */
    const char *type, *params;
    gc_draw draw;
    double lo, hi;
} gc_case;

/* Convolution and Deconvolution cases: the fields of convolution_param, x uniform in [-1, 1] */
#define GC_CONV_TYPE(type, group, name, dims, conv_param) /* dims: (n, c, h, w) */ \
    {group, name, GC_DIMS dims, type, "convolution_param { " conv_param " }", DRAW_UNIFORM, -1, 1}
#define GC_DIMS(...) {__VA_ARGS__}
#define GC_CONV(...) GC_CONV_TYPE("Convolution", __VA_ARGS__)
#define GC_DECONV(...) GC_CONV_TYPE("Deconvolution", __VA_ARGS__)

static const gc_case gc_cases[] = {
    /* pad, stride, dilation and group together: 7x7 -> (7 + 2 - 5) / 2 + 1 = 3 */
    GC_CONV("conv", "conv pad/stride/dil/group", (2, 4, 7, 7),
        "num_output: 6 kernel_size: 3 pad: 1 stride: 2 dilation: 2 group: 2"),
    /* rectangular kernel and unequal strides and pads, no bias */
    GC_CONV("conv", "conv rect, no bias", (2, 3, 6, 5),
        "num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 "
        "pad_h: 0 pad_w: 1 bias_term: false"),
    /* one group per input channel (depthwise with a multiplier of 2) */
    GC_CONV("conv", "conv depthwise", (2, 3, 5, 5),
        "num_output: 6 kernel_size: 2 group: 3"),

    /* 7x7, k3 s2 p1: ceil((7 + 2 - 3) / 2) + 1 = 4; windows overlap and reach the pad */
    {"pool", "pool MAX pad/ceil", {2, 3, 7, 7}, "Pooling",
     "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", DRAW_DISTINCT, 0, 0},
    /* 5x5, k2 s2 p1: ceil(5/2) + 1 = 4, clipped to 3 (the last window would start in
     * the padding) */
    /* eight planes of at most 256 cells: the CPU backend's lanes, with the training
     * net's mask (the backward reads the forward's choices instead of x) */
    {"pool", "pool MAX pad/ceil, eight planes", {2, 4, 7, 7}, "Pooling",
     "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", DRAW_DISTINCT, 0, 0},
    {"pool", "pool MAX clipped", {2, 2, 5, 5}, "Pooling",
     "pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 }", DRAW_DISTINCT, 0, 0},
    {"pool", "pool MAX global", {2, 3, 4, 5}, "Pooling",
     "pooling_param { pool: MAX global_pooling: true }", DRAW_DISTINCT, 0, 0},
    /* 6x6, k3 s2 p1: 4 windows per side; the last is cut by the padded border, so
     * the divisors differ (Caffe's rule) */
    {"pool", "pool AVE pad/ceil", {2, 3, 6, 6}, "Pooling",
     "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }", DRAW_UNIFORM, -1, 1},
    /* 6x6, k3 s2, no pad: ceil(3/2) + 1 = 3; the last window hangs over the edge and
     * divides by its part inside */
    {"pool", "pool AVE k3 s2 ceil", {2, 2, 6, 6}, "Pooling",
     "pooling_param { pool: AVE kernel_size: 3 stride: 2 }", DRAW_UNIFORM, -1, 1},
    {"pool", "pool AVE global", {2, 3, 3, 4}, "Pooling",
     "pooling_param { pool: AVE global_pooling: true }", DRAW_UNIFORM, -1, 1},

    {"ip", "ip 4-D axis 1", {2, 3, 4, 4}, "InnerProduct", "inner_product_param { num_output: 5 }",
     DRAW_UNIFORM, -1, 1},
    {"ip", "ip axis 2, no bias", {2, 3, 2, 3}, "InnerProduct",
     "inner_product_param { num_output: 4 axis: 2 bias_term: false }", DRAW_UNIFORM, -1, 1},

    {"act", "relu", {2, 3, 4, 4}, "ReLU", "", DRAW_OFF_KINK, -2, 2},
    {"act", "relu slope 0.2", {2, 3, 4, 4}, "ReLU", "relu_param { negative_slope: 0.2 }",
     DRAW_OFF_KINK, -2, 2},
    {"act", "sigmoid", {2, 3, 4, 4}, "Sigmoid", "", DRAW_UNIFORM, -3, 3},
    {"act", "tanh", {2, 3, 4, 4}, "TanH", "", DRAW_UNIFORM, -2, 2},
    {"act", "power 2", {2, 3, 3, 3}, "Power", "power_param { power: 2 scale: 0.7 shift: 0.3 }",
     DRAW_UNIFORM, -2, 2},
    /* a fractional power with the base kept positive (shift + scale*x >= 1.15) */
    {"act", "power 0.5", {2, 3, 3, 3}, "Power", "power_param { power: 0.5 scale: 1.5 shift: 1 }",
     DRAW_UNIFORM, 0.1, 2},

    {"norm", "scale + bias_term", {2, 3, 3, 4}, "Scale", "scale_param { bias_term: true }",
     DRAW_UNIFORM, -1, 1},
    {"norm", "scale on 2-D", {3, 5}, "Scale", "", DRAW_UNIFORM, -1, 1},
    {"norm", "bias", {2, 3, 3, 4}, "Bias", "", DRAW_UNIFORM, -1, 1},
    {"norm", "LRN across", {2, 7, 3, 3}, "LRN",
     "lrn_param { local_size: 5 alpha: 1.5 beta: 0.75 k: 1.5 }", DRAW_UNIFORM, -1.5, 1.5},
    {"norm", "LRN within", {2, 2, 5, 5}, "LRN",
     "lrn_param { local_size: 3 alpha: 1.2 beta: 0.75 norm_region: WITHIN_CHANNEL }",
     DRAW_UNIFORM, -1.5, 1.5},
    /* batch statistics (train stage): every output depends on every input of its
     * channel through the mean and variance */
    {"norm", "batchnorm batch stats", {4, 3, 3, 3}, "BatchNorm", "", DRAW_UNIFORM, -2, 2},
    {"norm", "batchnorm on 2-D", {6, 4}, "BatchNorm", "", DRAW_UNIFORM, -2, 2},

    {"loss", "softmax", {2, 4, 2, 3}, "Softmax", "", DRAW_UNIFORM, -2, 2},

    /* 3x3, k4 s2 p1: 2*(3-1) + 4 - 2 = 6 (FCN's x2 upsampling), two groups */
    GC_DECONV("spatial", "deconv stride 2/pad/group 2", (2, 4, 3, 3),
        "num_output: 6 kernel_size: 4 stride: 2 pad: 1 group: 2"),
    /* rectangular kernel, unequal strides and pads, no bias: 3x4 -> 2*2+3-2 = 5 by 3+2-0 = 5 */
    GC_DECONV("spatial", "deconv rect, no bias", (2, 3, 3, 4),
        "num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 "
        "pad_h: 1 pad_w: 0 bias_term: false"),
    /* dilation 2 with groups: 3x3 -> 2*2 + 2*2 + 1 - 2 = 7 */
    GC_DECONV("spatial", "deconv dilation/group 2, no bias", (2, 2, 3, 3),
        "num_output: 4 kernel_size: 3 stride: 2 pad: 1 dilation: 2 group: 2 "
        "bias_term: false"),
};

/* Several inputs, every one but labels drawn uniformly in [lo, hi]; checked on y. */
typedef struct gc_net_case {
    const char *group, *name;
    double lo, hi;
    const char *text;
} gc_net_case;

static const gc_net_case gc_net_cases[] = {
    /* Crop: the reference r gets a zero gradient, which the check compares too */
    {"spatial", "crop axis 2, offsets per axis", -1, 1,
     INPUT4("x", 2, 3, 6, 7) INPUT4("r", 2, 3, 4, 4)
     "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" "
     "crop_param { axis: 2 offset: 1 offset: 2 } }\n"},
    {"spatial", "crop axis 1, one offset", -1, 1,
     INPUT4("x", 2, 5, 6, 6) INPUT4("r", 2, 3, 4, 3)
     "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" "
     "crop_param { axis: 1 offset: 1 } }\n"},
    {"spatial", "crop defaults (axis 2, offset 0)", -1, 1,
     INPUT4("x", 2, 2, 5, 4) INPUT4("r", 2, 2, 3, 3)
     "layer { name: \"crop\" type: \"Crop\" bottom: \"x\" bottom: \"r\" top: \"y\" }\n"},
    {"shape", "concat axis 1", -1, 1,
     INPUT4("a", 2, 2, 3, 3) INPUT4("b", 2, 3, 3, 3)
     "layer { name: \"cat\" type: \"Concat\" bottom: \"a\" bottom: \"b\" top: \"y\" }\n"},
    {"shape", "concat axis 0", -1, 1,
     INPUT4("a", 2, 3, 2, 2) INPUT4("b", 1, 3, 2, 2) INPUT4("c", 2, 3, 2, 2)
     "layer { name: \"cat\" type: \"Concat\" bottom: \"a\" bottom: \"b\" bottom: \"c\" "
     "top: \"y\" concat_param { axis: 0 } }\n"},
    {"shape", "eltwise SUM coeff", -1, 1,
     ELTWISE3("operation: SUM coeff: 0.5 coeff: -2 coeff: 1.5")},
    {"shape", "eltwise PROD", -2, 2,
     ELTWISE3("operation: PROD")},

    /* a split feeding layers that meet again (a diamond), with a conv on one branch */
    {"graph", "split diamond", -1, 1,
     INPUT4("x", 2, 2, 4, 4)
     LAYER1("conv", "Convolution", "x", "c", "convolution_param { num_output: 2 kernel_size: 3 pad: 1 }")
     LAYER1("t", "TanH", "x", "t", "")
     "layer { name: \"e\" type: \"Eltwise\" bottom: \"c\" bottom: \"t\" top: \"y\" "
     "eltwise_param { operation: PROD } }\n"},

    {"siamese", "slice points axis 1", -1, 1,
     INPUT4("x", 2, 6, 2, 2)
     "layer { name: \"s\" type: \"Slice\" bottom: \"x\" top: \"p\" top: \"q\" top: \"r\" "
     "slice_param { slice_point: 1 slice_point: 4 } }\n"
     "layer { name: \"e\" type: \"Concat\" bottom: \"r\" bottom: \"p\" bottom: \"q\" top: \"y\" }\n"},
    {"siamese", "slice equal axis 2", -1, 1,
     INPUT4("x", 2, 2, 6, 3)
     "layer { name: \"s\" type: \"Slice\" bottom: \"x\" top: \"p\" top: \"q\" "
     "slice_param { axis: 2 } }\n"
     "layer { name: \"e\" type: \"Eltwise\" bottom: \"p\" bottom: \"q\" top: \"y\" "
     "eltwise_param { operation: PROD } }\n"},
    /* two InnerProducts sharing weight and bias: one parameter each, whose gradient is
     * the sum of both layers' */
    {"siamese", "shared InnerProduct", -1, 1,
     INPUT4("a", 2, 3, 2, 2) INPUT4("b", 2, 3, 2, 2)
     "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\" "
     "param { name: \"w\" } param { name: \"bias\" } inner_product_param { num_output: 4 } }\n"
     "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"b\" top: \"fb\" "
     "param { name: \"w\" } param { name: \"bias\" } inner_product_param { num_output: 4 } }\n"
     "layer { name: \"e\" type: \"Eltwise\" bottom: \"fa\" bottom: \"fb\" top: \"y\" "
     "eltwise_param { operation: PROD } }\n"},
};

static void check_text(const char *name, const char *text, gc_draw draw, double lo, double hi)
{
    gc_net *g = gc_open(name, text, 1);
    if (!g)
        return;
    for (int i = 0; i < g->ninputs; i++) {
        const char *x = g->in[i].blob->name;
        if (!g->in[i].check)
            continue;
        if (draw == DRAW_DISTINCT)
            gc_fill_distinct(g, x, 4 * GC_STEP);
        else if (draw == DRAW_OFF_KINK)
            gc_fill_away(g, x, lo, hi, 0.0, 2 * GC_STEP);
        else
            gc_fill_uniform(g, x, lo, hi);
    }
    gc_check(g, "y");
    gc_close(g);
}

static void check_case(const gc_case *c)
{
    char dims[128] = "", text[1024];
    for (int d = 0; d < 4 && c->dims[d] > 0; d++) {
        size_t len = strlen(dims);
        snprintf(dims + len, sizeof dims - len, " dim: %d", c->dims[d]);
    }
    snprintf(text, sizeof text,
             "layer { name: \"in_x\" type: \"Input\" top: \"x\" input_param { shape {%s } } }\n"
             "layer { name: \"under_test\" type: \"%s\" bottom: \"x\" top: \"y\" %s }\n",
             dims, c->type, c->params);
    check_text(c->name, text, c->draw, c->lo, c->hi);
}

static void check_cases(const char *group)
{
    for (size_t i = 0; i < sizeof gc_cases / sizeof gc_cases[0]; i++)
        if (!strcmp(gc_cases[i].group, group))
            check_case(&gc_cases[i]);
    for (size_t i = 0; i < sizeof gc_net_cases / sizeof gc_net_cases[0]; i++) {
        const gc_net_case *c = &gc_net_cases[i];
        if (!strcmp(c->group, group))
            check_text(c->name, c->text, DRAW_UNIFORM, c->lo, c->hi);
    }
}

/* ---- BatchNorm with stored statistics ---------------------------------------------------- */

static void test_norm(void)
{
    /* stored statistics: Caffe keeps sums and their weight (blob 2); set them */
    gc_net *g = gc_open("batchnorm global stats",
                        INPUT4("x", 2, 3, 3, 3)
                        LAYER1("bn", "BatchNorm", "x", "y", "batch_norm_param { use_global_stats: true }"),
                        1);
    if (g) {
        cd_param *mean = gc_param(g, "bn/0"), *var = gc_param(g, "bn/1"), *w = gc_param(g, "bn/2");
        float factor = (float)cd_test_uniform(0.5, 4);
        for (int c = 0; c < 3; c++) {
            g->params[mean->offset + c] = factor * (float)cd_test_uniform(-0.5, 0.5);
            g->params[var->offset + c] = factor * (float)cd_test_uniform(0.3, 2.0);
        }
        g->params[w->offset] = factor;
        gc_fill_uniform(g, "x", -2, 2);
        gc_check(g, "y");
        /* the forward itself: y = (x - mean) / sqrt(var + eps) with the stored values */
        cd_blob *yb = cd_net_blob(g->net, "y");
        float *x = gc_in(g, "x")->host, *y = host_alloc(yb->count);
        gc_objective(g);
        download(yb, y);
        double worst = 0;
        for (size_t i = 0; i < yb->count; i++) {
            int c = (i / 9) % 3;
            double m = g->params[mean->offset + c] / factor, v = g->params[var->offset + c] / factor;
            double ref = (x[i] - m) / sqrt(v + 1e-5);
            worst = fmax(worst, fabs(y[i] - ref) / fmax(1.0, fabs(ref)));
        }
        CHECK(worst < 1e-5, "batchnorm global stats: forward off by %g (relative)", worst);
        free(y);
        gc_close(g);
    }
}

/* ---- Concat, Flatten, Eltwise ------------------------------------------------------------ */

static void test_shape(void)
{
    /* Flatten is a view: the InnerProduct after it must send its gradient back
     * through the shared memory */
    gc_net *g = gc_open("flatten",
                        INPUT4("x", 2, 3, 2, 2)
                        LAYER1("flat", "Flatten", "x", "f", "")
                        LAYER1("ip", "InnerProduct", "f", "y", "inner_product_param { num_output: 4 }"),
                        1);
    if (g) {
        cd_blob *f = cd_net_blob(g->net, "f");
        CHECK(f->ndim == 2 && f->dims[0] == 2 && f->dims[1] == 12, "flatten: top is %dx%d, not 2x12",
              f->dims[0], f->dims[1]);
        gc_check(g, "y");
        gc_close(g);
    }

    g = gc_open("eltwise MAX", ELTWISE3("operation: MAX"), 1);
    if (g) {
        /* per element, three values at least 4 steps apart, in a random order */
        float *v[3] = {gc_in(g, "a")->host, gc_in(g, "b")->host, gc_in(g, "c")->host};
        for (size_t i = 0; i < gc_in(g, "a")->blob->count; i++) {
            double s[3];
            s[0] = cd_test_uniform(-1, 1);
            s[1] = s[0] + cd_test_uniform(4 * GC_STEP, 1);
            s[2] = s[1] + cd_test_uniform(4 * GC_STEP, 1);
            int perm[3] = {0, 1, 2};
            for (int k = 2; k > 0; k--) {
                int j = (int)(cd_test_rand_u64() % (uint64_t)(k + 1)), t = perm[k];
                perm[k] = perm[j];
                perm[j] = t;
            }
            for (int k = 0; k < 3; k++)
                v[k][i] = (float)s[perm[k]];
        }
        gc_check(g, "y");
        gc_close(g);
    }
}

/* ---- Softmax and SoftmaxWithLoss ------------------------------------------------------- */

/* The loss on the host, in double: mean over the used positions of -log softmax. */
static double host_xent(const float *x, const float *label, int n, int c, int inner, int ignore,
                        int *count)
{
    double sum = 0;
    *count = 0;
    for (int o = 0; o < n; o++)
        for (int i = 0; i < inner; i++) {
            int lab = (int)label[o * inner + i];
            if (lab == ignore)
                continue;
            double m = -INFINITY, z = 0;
            for (int k = 0; k < c; k++)
                m = fmax(m, x[(o * c + k) * inner + i]);
            for (int k = 0; k < c; k++)
                z += exp(x[(o * c + k) * inner + i] - m);
            sum += -(x[(o * c + lab) * inner + i] - m - log(z));
            (*count)++;
        }
    return sum;
}

static void test_loss(void)
{
    /* loss_weight 2: the objective is the net's loss, 2 * mean cross entropy */
    static const char swl[] = INPUT4("x", 3, 5, 2, 2) INPUT3("label", 3, 2, 2)
        "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"label\" "
        "top: \"loss\" loss_weight: 2 }\n";
    static const char swl_ignore[] = INPUT4("x", 3, 5, 2, 2) INPUT3("label", 3, 2, 2)
        "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"x\" bottom: \"label\" "
        "top: \"loss\" loss_param { ignore_label: 1 } }\n";
    const char *texts[] = {swl, swl_ignore};
    const char *names[] = {"softmaxwithloss weight 2", "softmaxwithloss ignore"};
    double weights[] = {2, 1};
    int ignores[] = {-1, 1};
    for (int k = 0; k < 2; k++) {
        gc_net *g = gc_open(names[k], texts[k], 0);
        if (!g)
            continue;
        gc_fill_uniform(g, "x", -3, 3);
        gc_fill_labels(g, "label", 5);
        float *lab = gc_in(g, "label")->host;
        lab[0] = 1; /* at least one ignored and one used position */
        lab[1] = 3;
        int count;
        double ref = host_xent(gc_in(g, "x")->host, lab, 3, 5, 4, ignores[k], &count);
        double total = gc_objective(g);
        double value = cd_net_layer(g->net, "loss")->value;
        CHECK_NEAR(value, ref / count, 1e-5 * fmax(1, ref / count), "softmaxwithloss value");
        CHECK_NEAR(total, weights[k] * value, 1e-6 * fabs(total), "net loss = loss_weight * value");
        gc_check(g, NULL);
        gc_close(g);
    }
}

/* ---- Dropout ---------------------------------------------------------------------- */

static void test_dropout(void)
{
    const double ratio = 0.3;
    gc_net *g = gc_open("dropout",
                        INPUT4("x", 4, 8, 10, 10)
                        LAYER1("drop", "Dropout", "x", "y", "dropout_param { dropout_ratio: 0.3 }"),
                        1);
    if (!g)
        return;
    gc_fill_away(g, "x", -1, 1, 0.0, 1e-3); /* nonzero, so a kept value is never 0 */
    size_t n = gc_in(g, "x")->blob->count;
    const float *x = gc_in(g, "x")->host;
    float *y = host_alloc(n), *dx = host_alloc(n), *y2 = host_alloc(n);
    gc_set_tops(g, "y");
    gc_backward(g);
    cd_blob *yb = cd_net_blob(g->net, "y");
    download(yb, y);
    g_be->iface->download(g_be, dx, gc_in(g, "x")->blob->diff, n * sizeof(float));
    const float keep = (float)(1.0 / (1.0 - ratio));
    size_t kept = 0, bad_y = 0, bad_dx = 0;
    for (size_t i = 0; i < n; i++) {
        int k = y[i] != 0;
        kept += k;
        /* y is x * mask with mask 0 or 1/(1-ratio); dx is mask * dy */
        if (k ? fabsf(y[i] - x[i] * keep) > 1e-6f * fabsf(y[i]) : 0)
            bad_y++;
        float want = k ? g->r[0][i] * keep : 0.0f;
        if (fabsf(dx[i] - want) > 1e-6f * fabsf(want))
            bad_dx++;
    }
    CHECK(bad_y == 0, "dropout: %zu outputs are neither 0 nor x/(1-ratio)", bad_y);
    CHECK(bad_dx == 0, "dropout: %zu gradients differ from mask * dy", bad_dx);
    /* kept ~ Binomial(n, 1 - ratio): within 5 standard deviations */
    double mean = n * (1 - ratio), sd = sqrt(n * ratio * (1 - ratio));
    CHECK(fabs((double)kept - mean) < 5 * sd, "dropout: kept %zu of %zu with ratio %g (expected %.0f +- %.0f)",
          kept, n, ratio, mean, 5 * sd);
    /* the mask follows the counter: the same counter repeats it, another one does not */
    gc_objective(g);
    download(yb, y2);
    CHECK(memcmp(y, y2, n * sizeof(float)) == 0, "dropout: the same rng counter gave another mask");
    g->counter++;
    gc_objective(g);
    download(yb, y2);
    g->counter--;
    CHECK(memcmp(y, y2, n * sizeof(float)) != 0, "dropout: another rng counter gave the same mask");
    free(y);
    free(y2);
    free(dx);
    /* finite differences with the mask held fixed through the counter */
    g->max_check = 200;
    gc_check(g, "y");
    gc_close(g);
}

/* ---- graph: in place, splits ----------------------------------------------------------- */

/* ReLU in place on a convolution's top. The kink is kept away by construction:
 * weights in [-0.1, 0.1] and inputs in [-1, 1] bound each 2x2x2 sum by 0.8, and
 * the biases of the two channels are +-[2, 3], so channel 0 is always on and
 * channel 1 always off, each by a margin of 1.2 that no step can cross. */
static void check_conv_inplace_relu(const char *name, const char *relu_params)
{
    char text[1024];
    snprintf(text, sizeof text,
             INPUT4("x", 2, 2, 4, 4)
             LAYER1("conv", "Convolution", "x", "c", "convolution_param { num_output: 4 kernel_size: 2 }")
             LAYER1("relu", "ReLU", "c", "c", "%s"),
             relu_params);
    gc_net *g = gc_open(name, text, 1);
    if (!g)
        return;
    CHECK(g->net->layers[2]->top[0] == g->net->layers[1]->top[0], "%s: relu is not in place", name);
    gc_param_uniform(g, "conv/0", -0.1, 0.1);
    cd_param *b = gc_param(g, "conv/1");
    for (int k = 0; k < 4; k++)
        g->params[b->offset + k] = (float)((k % 2 ? -1 : 1) * cd_test_uniform(2, 3));
    gc_check(g, "c");
    gc_close(g);
}

static void test_graph(void)
{
    check_conv_inplace_relu("conv + in-place relu", "");
    /* the same with a leaky slope in place: channel 1 now passes 0.1 of its gradient */
    check_conv_inplace_relu("conv + in-place leaky relu", "relu_param { negative_slope: 0.1 }");

    /* x read by three layers: the engine inserts a Split whose backward sums them */
    gc_net *g = gc_open("split (blob read three times)",
                        INPUT4("x", 2, 3, 3, 3)
                        LAYER1("p", "Power", "x", "a", "power_param { power: 2 scale: 0.5 shift: 0.2 }")
                        LAYER1("s", "Sigmoid", "x", "b", "")
                        LAYER1("ip", "InnerProduct", "x", "c", "inner_product_param { num_output: 3 }"),
                        1);
    if (g) {
        int has_split = 0;
        for (int i = 0; i < g->net->nlayers; i++)
            has_split |= !strcmp(g->net->layers[i]->type->name, "Split");
        CHECK(has_split, "no Split was inserted for a blob read by three layers");
        gc_check(g, "a b c");
        gc_close(g);
    }
}

/* ---- LeNet ------------------------------------------------------------------------ */

/* The loss in double from ip2 and the labels (mean cross entropy over the batch):
 * the float loss of the net would add rounding of its own. */
static double lenet_loss(gc_net *g)
{
    cd_blob *ip2 = cd_net_blob(g->net, "ip2");
    float *s = host_alloc(ip2->count);
    download(ip2, s);
    int n = ip2->dims[0], c = ip2->dims[1], count;
    double sum = host_xent(s, gc_in(g, "label")->host, n, c, 1, -1, &count);
    free(s);
    return sum / count;
}

/* How close the current point is to the kinks that every conv1 and conv2 weight
 * moves: the smallest |ReLU input| of ip1 (recomputed in double on the host, since
 * relu1 overwrites ip1 in place) and the smallest gap between the two largest
 * candidates of a pool2 window. */
static double lenet_margin(gc_net *g)
{
    gc_objective(g);
    cd_blob *c2 = cd_net_blob(g->net, "conv2"), *p2 = cd_net_blob(g->net, "pool2");
    float *c = host_alloc(c2->count), *x = host_alloc(p2->count);
    download(c2, c);
    download(p2, x);
    double margin = INFINITY;
    int planes = c2->dims[0] * c2->dims[1], H = c2->dims[2], W = c2->dims[3];
    for (int pl = 0; pl < planes; pl++)
        for (int oy = 0; oy + 1 < H; oy += 2)
            for (int ox = 0; ox + 1 < W; ox += 2) {
                const float *q = c + (size_t)pl * H * W + oy * W + ox;
                float v[4] = {q[0], q[1], q[W], q[W + 1]};
                float a = -INFINITY, b = -INFINITY; /* the largest two */
                for (int k = 0; k < 4; k++) {
                    if (v[k] > a) {
                        b = a;
                        a = v[k];
                    } else if (v[k] > b) {
                        b = v[k];
                    }
                }
                margin = fmin(margin, (double)a - b);
            }
    cd_param *w = gc_param(g, "ip1/0"), *bias = gc_param(g, "ip1/1");
    int n = p2->dims[0], k = (int)(p2->count / (size_t)n), m = (int)bias->count;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double pre = g->params[bias->offset + j];
            for (int t = 0; t < k; t++)
                pre += (double)g->params[w->offset + (size_t)j * k + t] * x[(size_t)i * k + t];
            margin = fmin(margin, fabs(pre));
        }
    free(c);
    free(x);
    return margin;
}

#define LENET_MARGIN 2e-4

static void test_lenet(void)
{
    cd_net_opts opts = {.stage = "train", .batch = 4, .input_c = 1, .input_h = 28, .input_w = 28,
                        .num_classes = 10, .force_backward = 1};
    const char *path = cd_test_source_path("models/lenet.prototxt");
    char *text = cd_read_file(path, NULL);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    gc_net *g = gc_open_opts("lenet", text, 0, &opts);
    free(text);
    if (!g)
        return;
    /* parameters: the file's fillers (xavier weights), and random biases so they are
     * not all zero */
    g_be->iface->download(g_be, g->params, g->net->arena_data, g->net->param_count * sizeof(float));
    /*
     * The Data layer's tops are filled by hand: pixels 0..255 and integer labels.
     * A point where one ReLU input of ip1 or one pool2 pair sits within ~1e-5 of its
     * kink makes nearly every conv1 and conv2 step straddle it (about 1 draw in 25),
     * so the point is drawn again until both keep LENET_MARGIN away (typical draws
     * have 1e-4 to 1e-3; about half pass).
     */
    int draws = 0;
    double margin = 0;
    while (draws++ < 50 && margin < LENET_MARGIN) {
        gc_fill_uniform(g, "data", 0, 255);
        gc_fill_labels(g, "label", 10);
        for (int i = 0; i < g->net->nparams; i++) {
            cd_param *p = g->net->params[i];
            if (p->ndim == 1)
                cd_test_fill_uniform(g->params + p->offset, p->count, -0.1, 0.1);
        }
        margin = lenet_margin(g);
    }
    CHECK(margin >= LENET_MARGIN, "lenet: no draw keeps %g from the ReLU and pool2 kinks (%g)",
          LENET_MARGIN, margin);
    double host = gc_objective(g);
    double net_loss = cd_net_layer(g->net, "loss")->value;
    CHECK_NEAR(net_loss, host, 1e-5 * fmax(1, host), "lenet: the net's loss vs the loss from ip2");
    g->host_loss = lenet_loss;
    /*
     * A step that moves one conv1 weight moves a whole channel of conv1 outputs and,
     * through them, every later value: at 1e-2 it nearly always reorders some of the
     * 46,000 MAX pooling candidates or flips some of the 2,000 ReLU signs, and the
     * difference quotient then averages two slopes (errors of several percent). So
     * each sample takes the first of 1e-2, 3e-3, 1e-3, 3e-4 whose two evaluations
     * keep every choice of the unperturbed point, and an element for which none does
     * is replaced by another. Smaller steps let the rounding of the float forward
     * through: the difference of two losses carries up to about 8e-7 of it (measured
     * at L ~ 2.5 over several seeds with steps of 1e-4), so the tolerance adds
     * noise / 2h with noise = 2^-20 * L, three times that.
     */
    g->steps[0] = 1e-2;
    g->steps[1] = 3e-3;
    g->steps[2] = 1e-3;
    g->steps[3] = 3e-4;
    g->nsteps = 4;
    g->noise = ldexp(fmax(1.0, host), -20);
    g->allow_kinks = 1;
    g->max_check = 10;
    gc_check(g, NULL);
    long expect = 0;
    for (int i = 0; i < g->net->nparams; i++)
        expect += g->net->params[i]->count < 10 ? (long)g->net->params[i]->count : 10;
    CHECK(g->checked == expect + 10, "lenet: %ld of %ld samples were checked", g->checked, expect + 10);
    gc_close(g);
}

/* ---- EuclideanLoss ------------------------------------------------------------------ */

/* loss = 1/(2N) sum (a - b)^2 by hand in double; b has another shape with the same
 * count per item (Caffe checks count(1) only), and both bottoms get gradients */
static void test_regress(void)
{
    static const char text[] = INPUT4("a", 3, 4, 2, 2) INPUT3("b", 3, 8, 2)
        "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"a\" bottom: \"b\" "
        "top: \"loss\" loss_weight: 3 }\n";
    gc_net *g = gc_open("euclidean weight 3", text, 0);
    if (!g)
        return;
    gc_fill_uniform(g, "a", -2, 2);
    gc_fill_uniform(g, "b", -2, 2);
    const float *a = gc_in(g, "a")->host, *b = gc_in(g, "b")->host;
    double ref = 0;
    for (size_t i = 0; i < gc_in(g, "a")->blob->count; i++)
        ref += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    ref /= 2.0 * 3;
    double total = gc_objective(g);
    double value = cd_net_layer(g->net, "loss")->value;
    CHECK_NEAR(value, ref, 1e-5 * fmax(1, ref), "euclideanloss value");
    CHECK_NEAR(total, 3 * value, 1e-6 * fabs(total), "net loss = loss_weight * value");
    gc_check(g, NULL);
    gc_close(g);

    /* bottoms whose counts per item differ are refused at build */
    static const char bad[] = INPUT4("a", 3, 4, 2, 2) INPUT3("b", 3, 7, 2)
        "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"a\" bottom: \"b\" "
        "top: \"loss\" }\n";
    char err[512] = "";
    cd_pt_node *tree = cd_pt_parse(bad, strlen(bad), "euclidean mismatch", err, sizeof err);
    CHECK(tree != NULL, "euclidean mismatch: %s", err);
    if (!tree)
        return;
    cd_net_opts opts = {.stage = "train"};
    cd_net *net = cd_net_build(tree, "euclidean mismatch", &opts, err, sizeof err);
    CHECK(net == NULL && strstr(err, "same number of values per item"),
          "euclidean mismatch: want a refusal naming the counts, got: %s", net ? "a net" : err);
    if (net)
        cd_net_free(net);
    cd_pt_free(tree);
}

/* ---- DetectNet's L1Loss and its masked bbox loss -------------------------------------- */

/* b[i] = a[i] - d with |d| in [0.05, 1]: no |a - b| within the step of L1's kink at 0 */
static void fill_off_kink(gc_net *g, const char *a, const char *b)
{
    gc_fill_uniform(g, a, -2, 2);
    gc_input *ia = gc_in(g, a), *ib = gc_in(g, b);
    for (size_t i = 0; i < ia->blob->count; i++)
        ib->host[i] = ia->host[i] - uniform_away(-1, 1, 0, 0.05);
}

static void test_detect(void)
{
    static const char l1[] = INPUT4("a", 3, 4, 2, 2) INPUT3("b", 3, 8, 2)
        "layer { name: \"loss\" type: \"L1Loss\" bottom: \"a\" bottom: \"b\" "
        "top: \"loss\" loss_weight: 2 }\n";
    gc_net *g = gc_open("l1loss weight 2", l1, 0);
    if (g) {
        fill_off_kink(g, "a", "b");
        gc_check(g, NULL);
        gc_close(g);
    }
    /* DetectNet's bbox loss: predictions masked by the coverage block, normalized by the
     * size and obj blocks (Eltwise PROD), against the label normalized the same way */
    static const char head[] = INPUT4("bbox", 2, 4, 3, 3) INPUT4("cvgblock", 2, 4, 3, 3)
        INPUT4("sizeblock", 2, 4, 3, 3) INPUT4("label", 2, 4, 3, 3)
        "layer { name: \"mask\" type: \"Eltwise\" bottom: \"bbox\" bottom: \"cvgblock\" top: \"m\" "
        "eltwise_param { operation: PROD } }\n"
        "layer { name: \"norm\" type: \"Eltwise\" bottom: \"m\" bottom: \"sizeblock\" top: \"mn\" "
        "eltwise_param { operation: PROD } }\n"
        "layer { name: \"lnorm\" type: \"Eltwise\" bottom: \"label\" bottom: \"sizeblock\" top: \"ln\" "
        "eltwise_param { operation: PROD } }\n"
        "layer { name: \"loss\" type: \"L1Loss\" bottom: \"mn\" bottom: \"ln\" top: \"loss\" }\n";
    g = gc_open("detectnet bbox loss", head, 0);
    if (g) {
        gc_fill_uniform(g, "cvgblock", 0.5, 1.5);
        gc_fill_uniform(g, "sizeblock", 0.5, 1.5);
        gc_fill_uniform(g, "bbox", -2, 2);
        /* label = bbox * cvg - d / size: mn - ln = -d keeps |d| >= 0.05 away from the kink */
        gc_input *b = gc_in(g, "bbox"), *c = gc_in(g, "cvgblock"), *sz = gc_in(g, "sizeblock"), *l = gc_in(g, "label");
        for (size_t i = 0; i < l->blob->count; i++)
            l->host[i] = b->host[i] * c->host[i] + uniform_away(-1, 1, 0, 0.2) / sz->host[i];
        l->check = 0;
        gc_check(g, NULL);
        gc_close(g);
    }
}

/* ---- Siamese: ContrastiveLoss and shared weights ------------------------------------ */

/* loss by hand in double for pairs b = a + r_i u_i at distances r_i on both sides of the
 * margin (1), labels alternating similar / dissimilar */
static void check_contrastive(const char *name, int legacy)
{
    enum { N = 6, C = 5 };
    static const double dist[N] = {0.3, 1.6, 0.5, 0.45, 2.1, 0.7};
    char text[1024];
    snprintf(text, sizeof text,
             INPUT3("a", 6, 5, 1) INPUT3("b", 6, 5, 1)
             "layer { name: \"in_label\" type: \"Input\" top: \"label\" "
             "input_param { shape { dim: 6 } } }\n"
             "layer { name: \"loss\" type: \"ContrastiveLoss\" bottom: \"a\" bottom: \"b\" "
             "bottom: \"label\" top: \"loss\" loss_weight: 2 "
             "contrastive_loss_param { margin: 1 legacy_version: %s } }\n",
             legacy ? "true" : "false");
    gc_net *g = gc_open(name, text, 0);
    if (!g)
        return;
    gc_fill_uniform(g, "a", -1, 1);
    gc_fill_uniform(g, "b", -1, 1);
    float *a = gc_in(g, "a")->host, *b = gc_in(g, "b")->host, *y = gc_in(g, "label")->host;
    double ref = 0;
    for (int i = 0; i < N; i++) {
        double norm = 0;
        for (int k = 0; k < C; k++)
            norm += (double)b[i * C + k] * b[i * C + k];
        for (int k = 0; k < C; k++)
            b[i * C + k] = (float)(a[i * C + k] + dist[i] * b[i * C + k] / sqrt(norm));
        double d2 = 0;
        for (int k = 0; k < C; k++)
            d2 += ((double)a[i * C + k] - b[i * C + k]) * ((double)a[i * C + k] - b[i * C + k]);
        y[i] = (float)(i % 2 == 0);
        double h = legacy ? fmax(1.0 - d2, 0) : fmax(1.0 - sqrt(d2), 0) * fmax(1.0 - sqrt(d2), 0);
        ref += y[i] ? d2 : h;
    }
    ref /= 2.0 * N;
    double total = gc_objective(g);
    double value = cd_net_layer(g->net, "loss")->value;
    CHECK_NEAR(value, ref, 1e-5 * fmax(1, ref), name);
    CHECK_NEAR(total, 2 * value, 1e-6 * fmax(1, fabs(total)), "contrastive: net loss = loss_weight * value");
    gc_check(g, NULL);
    gc_close(g);
}

static void test_siamese(void)
{
    check_contrastive("contrastive", 0);
    check_contrastive("contrastive legacy", 1);

    /* the sharing layers hold the same two parameters, and only those are in the net */
    static const char shared[] = INPUT4("a", 2, 3, 2, 2) INPUT4("b", 2, 3, 2, 2)
        "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\" "
        "param { name: \"w\" lr_mult: 2 } inner_product_param { num_output: 4 } }\n"
        "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"b\" top: \"fb\" "
        "param { name: \"w\" } inner_product_param { num_output: 4 } }\n";
    gc_net *g = gc_open("shared params", shared, 1);
    if (g) {
        cd_layer *la = cd_net_layer(g->net, "ip_a"), *lb = cd_net_layer(g->net, "ip_b");
        CHECK(la->params[0] == lb->params[0] && la->params[1] != lb->params[1],
              "shared weight is one parameter, the biases are two");
        CHECK(g->net->nparams == 3, "%d parameters, want 3", g->net->nparams);
        CHECK(lb->params[0]->lr_mult == 2.0f, "the shared weight has its owner's lr_mult (%g)",
              (double)lb->params[0]->lr_mult);
        gc_close(g);
    }
    /* other shapes, or another lr_mult, are refused naming both layers */
    static const char *bad[] = {
        INPUT4("a", 2, 3, 2, 2)
        "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\" "
        "param { name: \"w\" } inner_product_param { num_output: 4 } }\n"
        "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"a\" top: \"fb\" "
        "param { name: \"w\" } inner_product_param { num_output: 5 } }\n",
        INPUT4("a", 2, 3, 2, 2)
        "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\" "
        "param { name: \"w\" } inner_product_param { num_output: 4 } }\n"
        "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"a\" top: \"fb\" "
        "param { name: \"w\" lr_mult: 3 } inner_product_param { num_output: 4 } }\n",
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(bad); i++) {
        char err[1024] = "";
        cd_pt_node *tree = cd_pt_parse(bad[i], strlen(bad[i]), "shared mismatch", err, sizeof err);
        CHECK(tree != NULL, "shared mismatch: %s", err);
        if (!tree)
            continue;
        cd_net_opts opts = {.stage = "train"};
        cd_net *net = cd_net_build(tree, "shared.prototxt", &opts, err, sizeof err);
        CHECK(!net && strstr(err, "ip_a") && strstr(err, "ip_b") && strstr(err, "\"w\""),
              "mismatched sharing %zu refused naming both layers: %s", i, err);
        cd_net_free(net);
        cd_pt_free(tree);
    }
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void); /* the group's own cases after its gc_cases; may be NULL */
    } groups[] = {
        {"conv", NULL}, {"pool", NULL}, {"ip", NULL}, {"act", NULL},
        {"norm", test_norm}, {"shape", test_shape}, {"loss", test_loss}, {"dropout", test_dropout},
        {"graph", test_graph}, {"lenet", test_lenet},
        {"regress", test_regress},
        {"detect", test_detect},
        {"siamese", test_siamese},
        {"spatial", NULL},
    };
    cd_test_init("test_grad");
    g_be = cd_backend_cpu_new(0);
    CHECK(g_be != NULL, "no CPU backend");
    if (!g_be)
        return cd_test_finish();
    /* optional arguments: run only the named groups */
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int run = argc < 2;
        for (int a = 1; a < argc; a++)
            run |= !strcmp(argv[a], groups[i].name);
        if (!run)
            continue;
        check_cases(groups[i].name);
        if (groups[i].fn)
            groups[i].fn();
    }
    cd_backend_free(g_be);
    return cd_test_finish();
}
