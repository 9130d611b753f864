/*
 * The first steps of every solver type through cd_solver_step against Caffe's update
 * rules, computed here in double from the formulas of cd_update_desc (backend.h):
 *
 *   g  = g_accumulated / iter_size + decay * w          (L2; decay * sign(w) for L1)
 *   SGD:      h1 = m*h1 + lr*g;                          w -= h1
 *   NESTEROV: hp = h1; h1 = m*h1 + lr*g;                 w -= (1+m)*h1 - m*hp
 *   ADAGRAD:  h1 += g*g;                                 w -= lr*g / (sqrt(h1) + delta)
 *   RMSPROP:  h1 = r*h1 + (1-r)*g*g;                     w -= lr*g / (sqrt(h1) + delta)
 *   ADADELTA: h1 = m*h1 + (1-m)*g*g; u = g*sqrt(h2+delta)/sqrt(h1+delta);
 *             h2 = m*h2 + (1-m)*u*u;                     w -= lr*u
 *   ADAM:     h1 = b1*h1 + (1-b1)*g; h2 = b2*h2 + (1-b2)*g*g;
 *             w -= lr * sqrt(1-b2^t)/(1-b1^t) * h1/(sqrt(h2)+delta),  t = iter+1
 *
 * with lr = rate(iter) * lr_mult and decay = weight_decay * decay_mult per tensor.
 *
 * The net is an Input, an InnerProduct "ip" whose bias has param { lr_mult: 2
 * decay_mult: 0 } (DIGITS's convention), and a frozen InnerProduct "frozen" (lr_mult
 * 0), built on the CPU backend. Weights start random; every step gets fresh random
 * gradients uploaded into param->diff by hand (the sum of iter_size passes). The
 * solver's hyperparameters are drawn at random too, with a large delta so that where
 * delta enters each formula is visible in the result. The learning rate follows a
 * step policy that changes within the three steps, to show each step's rate is the
 * policy's at that iteration.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

#define STEPS 3

/*
 * Tolerance. The backend works in float32: every operation rounds at 6e-8 relative,
 * and the hyperparameters themselves are rounded to float (momentum 0.9 becomes
 * 0.899999976, a 3e-8 change). Over three steps of a few operations each the weights
 * (of order 1) can drift from the double reference by a few 1e-7, and the history
 * terms by a few ulp of their own size. We accept 1e-5 * (1 + |w|), thirty times that
 * drift, while each step moves the weights by 1e-3..1e-1: a wrong term, a misplaced
 * delta (0.002..0.3 here), a missing normalization or a wrong rate moves them by a
 * large fraction of that and fails by orders of magnitude.
 */
#define W_TOL 1e-5

static const char net_text[] =
    "name: \"solver-test\"\n"
    "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\"\n"
    "  input_param { shape { dim: 2 dim: 6 } shape { dim: 2 } } }\n"
    "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
    "  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
    "  inner_product_param { num_output: 5 weight_filler { type: \"gaussian\" std: 0.5 }\n"
    "    bias_filler { type: \"constant\" value: 0.1 } } }\n"
    "layer { name: \"frozen\" type: \"InnerProduct\" bottom: \"ip\" top: \"out\"\n"
    "  param { lr_mult: 0 } param { lr_mult: 0 }\n"
    "  inner_product_param { num_output: 3 weight_filler { type: \"gaussian\" std: 0.5 }\n"
    "    bias_filler { type: \"constant\" value: 0.2 } } }\n"
    "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"out\" bottom: \"label\" top: \"loss\" }\n";

static cd_backend_t *g_be;

/* The double reference of one parameter tensor. */
typedef struct ref_param {
    cd_param *p;
    double lr_mult, decay_mult;
    double *w, *h1, *h2;
    float *w0; /* the weights before the first step */
} ref_param;

static float *download(const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    g_be->iface->download(g_be, h, dev, n * sizeof *h);
    return h;
}

/* Caffe's step policy, from DIGITS's percent: rate * gamma^floor(iter / stepsize). */
static double policy_rate(const cd_lr_policy *lr, long iter)
{
    long stepsize = (long)ceil(lr->step_pct * ((double)lr->max_iter / 100.0));
    return lr->base_lr * pow(lr->gamma, floor((double)iter / (double)stepsize));
}

/* One reference update of element i; g is the accumulated gradient. */
static void ref_update(const cd_solver_opts *o, ref_param *r, size_t i, double g, long iter)
{
    double w = r->w[i], m = (float)o->momentum, delta = (float)o->delta;
    double lr = (double)(float)(policy_rate(&o->lr, iter) * r->lr_mult);
    double decay = (double)(float)(o->weight_decay * r->decay_mult);
    g = g / o->iter_size;
    if (o->reg == CD_REG_L1)
        g += decay * (double)((w > 0) - (w < 0));
    else
        g += decay * w;
    double *h1 = &r->h1[i], *h2 = &r->h2[i];
    switch (o->type) {
    case CD_SOLVER_SGD:
        *h1 = m * *h1 + lr * g;
        w -= *h1;
        break;
    case CD_SOLVER_NESTEROV: {
        double hp = *h1;
        *h1 = m * *h1 + lr * g;
        w -= (1 + m) * *h1 - m * hp;
        break;
    }
    case CD_SOLVER_ADAGRAD:
        *h1 += g * g;
        w -= lr * g / (sqrt(*h1) + delta);
        break;
    case CD_SOLVER_RMSPROP: {
        double rd = (float)o->rms_decay;
        *h1 = rd * *h1 + (1 - rd) * g * g;
        w -= lr * g / (sqrt(*h1) + delta);
        break;
    }
    case CD_SOLVER_ADADELTA: {
        *h1 = m * *h1 + (1 - m) * g * g;
        double u = g * sqrt(*h2 + delta) / sqrt(*h1 + delta);
        *h2 = m * *h2 + (1 - m) * u * u;
        w -= lr * u;
        break;
    }
    case CD_SOLVER_ADAM: {
        double b2 = (float)o->momentum2, t = (double)iter + 1;
        *h1 = m * *h1 + (1 - m) * g;
        *h2 = b2 * *h2 + (1 - b2) * g * g;
        w -= lr * sqrt(1 - pow(b2, t)) / (1 - pow(m, t)) * *h1 / (sqrt(*h2) + delta);
        break;
    }
    }
    r->w[i] = w;
}

static cd_net *build_net(cd_pt_node **tree)
{
    cd_net_opts opts = {.stage = "train", .seed = cd_test_rand_u64()};
    return cd_test_build_net(g_be, net_text, "solver-test", &opts, tree);
}

/* The net's tensors as the test expects them: ip/0, ip/1, frozen/0, frozen/1. */
static int check_layout(cd_net *net)
{
    static const char *const names[] = {"ip/0", "ip/1", "frozen/0", "frozen/1"};
    static const float lr[] = {1, 2, 0, 0}, decay[] = {1, 0, 1, 1};
    static const size_t counts[] = {30, 5, 15, 3};
    int ok = net->nparams == 4;
    CHECK(ok, "the test net has %d parameter tensors, want 4", net->nparams);
    for (int i = 0; ok && i < 4; i++) {
        cd_param *p = net->params[i];
        int good = !strcmp(p->name, names[i]) && p->count == counts[i] && p->lr_mult == lr[i] &&
                   p->decay_mult == decay[i] && p->learnable;
        CHECK(good, "parameter %d: %s (%zu values, lr_mult %g, decay_mult %g, learnable %d), want %s "
              "(%zu, %g, %g, 1)", i, p->name, p->count, p->lr_mult, p->decay_mult, p->learnable,
              names[i], counts[i], lr[i], decay[i]);
        ok &= good;
    }
    return ok;
}

static void random_opts(cd_solver_opts *o, int type, int iter_size, int reg)
{
    memset(o, 0, sizeof *o);
    o->type = type;
    o->momentum = cd_test_uniform(0.5, 0.95);
    o->momentum2 = cd_test_uniform(0.9, 0.999);
    o->rms_decay = cd_test_uniform(0.5, 0.99);
    /* ADAM's sqrt(h2) is about sqrt(1-beta2) |g| ~ 0.03..0.3: a delta near it keeps the
     * step large while sqrt(h2) + delta and sqrt(h2 + delta) still differ clearly */
    o->delta = type == CD_SOLVER_ADAM ? cd_test_uniform(0.002, 0.02) : cd_test_uniform(0.05, 0.3);
    o->weight_decay = cd_test_uniform(0.01, 0.1);
    o->reg = reg;
    o->iter_size = iter_size;
    o->lr.type = CD_LR_STEP;
    o->lr.base_lr = cd_test_uniform(0.02, 0.1);
    o->lr.gamma = cd_test_uniform(0.2, 0.6);
    o->lr.max_iter = STEPS;
    o->lr.step_pct = 50; /* stepsize ceil(1.5) = 2: iterations 0 and 1 at base, 2 at base*gamma */
}

static void run_case(int type, int iter_size, int reg)
{
    char what[96];
    snprintf(what, sizeof what, "%s iter_size %d %s", cd_solver_type_name(type), iter_size,
             reg == CD_REG_L1 ? "L1" : "L2");
    cd_pt_node *tree;
    cd_net *net = build_net(&tree);
    if (!net)
        return;
    if (!check_layout(net)) {
        cd_net_free(net);
        cd_pt_free(tree);
        return;
    }
    cd_solver_opts o;
    random_opts(&o, type, iter_size, reg);

    ref_param refs[4];
    for (int k = 0; k < 4; k++) {
        ref_param *r = &refs[k];
        r->p = net->params[k];
        r->lr_mult = r->p->lr_mult;
        r->decay_mult = r->p->decay_mult;
        size_t n = r->p->count;
        r->w0 = malloc(n * sizeof(float));
        r->w = calloc(n, sizeof(double));
        r->h1 = calloc(n, sizeof(double));
        r->h2 = calloc(n, sizeof(double));
        /* weights of order 1, away from 0 so that sign(w) is unambiguous */
        for (size_t i = 0; i < n; i++) {
            double v = cd_test_uniform(0.1, 1.5);
            r->w0[i] = (float)(cd_test_rand_u64() % 2 ? v : -v);
            r->w[i] = r->w0[i];
        }
        g_be->iface->upload(g_be, r->p->data, r->w0, n * sizeof(float));
    }

    double worst = 0;
    for (long iter = 0; iter < STEPS; iter++) {
        for (int k = 0; k < 4; k++) {
            ref_param *r = &refs[k];
            size_t n = r->p->count;
            float *g = malloc(n * sizeof *g);
            /* the sum of iter_size passes of gradients in [-1, 1] */
            for (size_t i = 0; i < n; i++) {
                double s = 0;
                for (int a = 0; a < iter_size; a++)
                    s += (float)cd_test_uniform(-1.0, 1.0);
                g[i] = (float)s;
                if (r->lr_mult != 0)
                    ref_update(&o, r, i, g[i], iter);
            }
            g_be->iface->upload(g_be, r->p->diff, g, n * sizeof *g);
            free(g);
        }
        double rate = cd_solver_step(net, &o, iter);
        double want_rate = policy_rate(&o.lr, iter);
        CHECK(fabs(rate - want_rate) <= 1e-12 * want_rate, "%s: step %ld used rate %.9g, want %.9g",
              what, iter, rate, want_rate);

        for (int k = 0; k < 4; k++) {
            ref_param *r = &refs[k];
            size_t n = r->p->count;
            float *w = download(r->p->data, n), *g = download(r->p->diff, n);
            int bad = 0, nonzero = 0;
            for (size_t i = 0; i < n; i++) {
                double want = r->lr_mult != 0 ? r->w[i] : (double)r->w0[i];
                double err = fabs(w[i] - want), tol = W_TOL * (1 + fabs(want));
                if (r->lr_mult == 0)
                    tol = 0; /* frozen: not a single bit may change */
                else if (err / tol > worst)
                    worst = err / tol;
                if (!(err <= tol) && bad++ < 3)
                    CHECK(0, "%s: step %ld %s[%zu] = %.9g, want %.9g (started at %.9g)", what, iter,
                          r->p->name, i, w[i], want, r->w0[i]);
                nonzero += g[i] != 0.0f;
            }
            if (!bad)
                CHECK(1, "%s", what);
            CHECK(nonzero == 0, "%s: step %ld left %d of %zu gradients of %s non-zero", what, iter,
                  nonzero, n, r->p->name);
            free(w);
            free(g);
        }
    }
    /* the update must have moved the weights far beyond the tolerance, or the
     * comparison above proves nothing */
    double moved = 0;
    float *w = download(refs[0].p->data, refs[0].p->count);
    for (size_t i = 0; i < refs[0].p->count; i++)
        moved = fmax(moved, fabs(w[i] - refs[0].w0[i]));
    free(w);
    CHECK(moved > 1e-3, "%s: the weights moved only %g in %d steps", what, moved, STEPS);
    /* the frozen tensors' history stays untouched */
    for (int k = 2; k < 4; k++) {
        float *h = download(refs[k].p->h1, refs[k].p->count);
        int nz = 0;
        for (size_t i = 0; i < refs[k].p->count; i++)
            nz += h[i] != 0.0f;
        CHECK(nz == 0, "%s: the frozen %s has %d non-zero history values", what, refs[k].p->name, nz);
        free(h);
    }
    printf("%-28s worst error %.3f of the tolerance, weights moved up to %.3g\n", what, worst, moved);
    for (int k = 0; k < 4; k++) {
        free(refs[k].w0);
        free(refs[k].w);
        free(refs[k].h1);
        free(refs[k].h2);
    }
    cd_net_free(net);
    cd_pt_free(tree);
}

/*
 * Weight sharing: "ip_a" and "ip_b" share their weight (param { name: "w" }), so the
 * net holds it once and one SGD step moves it once, by the sum of both layers'
 * gradients:  h = m*h0 + lr*(g_a + g_b + decay*w);  w -= h.  The reference gradients
 * g_a and g_b come from a twin net without the sharing (two weights given the same
 * values), so the sum is computed here and not read from the net under test.
 */
#define SHARED_NET(share)                                                                    \
    "name: \"shared-solver\"\n"                                                              \
    "layer { name: \"in\" type: \"Input\" top: \"a\" top: \"b\" top: \"label\"\n"            \
    "  input_param { shape { dim: 3 dim: 6 } shape { dim: 3 dim: 6 } shape { dim: 3 } } }\n" \
    "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\"\n"              \
    "  param { " share " } inner_product_param { num_output: 5 } }\n"                      \
    "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"b\" top: \"fb\"\n"              \
    "  param { " share " } inner_product_param { num_output: 5 } }\n"                      \
    "layer { name: \"s\" type: \"Eltwise\" bottom: \"fa\" bottom: \"fb\" top: \"s\" }\n"    \
    "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"s\" bottom: \"label\" top: \"loss\" }\n"

static cd_net *build_text(const char *text, cd_pt_node **tree)
{
    cd_net_opts opts = {.stage = "train", .seed = cd_test_rand_u64()};
    return cd_test_build_net(g_be, text, "shared-solver", &opts, tree);
}

static void upload_param(cd_param *p, const float *v) { g_be->iface->upload(g_be, p->data, v, p->count * sizeof *v); }

static void upload_blob(cd_net *net, const char *name, const float *v)
{
    cd_blob *b = cd_net_blob(net, name);
    g_be->iface->upload(g_be, b->data, v, b->count * sizeof *v);
}

static void test_shared_step(void)
{
    static const char shared_text[] = SHARED_NET("name: \"w\""), twin_text[] = SHARED_NET("lr_mult: 1");
    cd_pt_node *ts, *tt;
    cd_net *net = build_text(shared_text, &ts), *twin = build_text(twin_text, &tt);
    if (!net || !twin) {
        cd_net_free(net);
        cd_net_free(twin);
        cd_pt_free(ts);
        cd_pt_free(tt);
        return;
    }
    cd_layer *la = cd_net_layer(net, "ip_a"), *lb = cd_net_layer(net, "ip_b");
    CHECK(la->params[0] == lb->params[0] && net->nparams == 3 && twin->nparams == 4,
          "ip_a and ip_b hold one weight (%d tensors in the net, want 3; the twin has %d, want 4)",
          net->nparams, twin->nparams);
    cd_param *w = la->params[0];
    cd_layer *ta = cd_net_layer(twin, "ip_a"), *tb = cd_net_layer(twin, "ip_b");
    enum { WN = 30, BN = 5, XN = 18 };
    float w0[WN], h0[WN], ba[BN], bb[BN], xa[XN], xb[XN], label[3];
    for (int i = 0; i < WN; i++) {
        w0[i] = (float)cd_test_uniform(-1, 1);
        h0[i] = (float)cd_test_uniform(-0.1, 0.1);
    }
    for (int i = 0; i < BN; i++) {
        ba[i] = (float)cd_test_uniform(-0.5, 0.5);
        bb[i] = (float)cd_test_uniform(-0.5, 0.5);
    }
    for (int i = 0; i < XN; i++) {
        xa[i] = (float)cd_test_uniform(-2, 2);
        xb[i] = (float)cd_test_uniform(-2, 2);
    }
    for (int i = 0; i < 3; i++)
        label[i] = (float)(cd_test_rand_u64() % 5);
    cd_net *nets[] = {net, twin};
    for (int k = 0; k < 2; k++) {
        cd_layer *a = cd_net_layer(nets[k], "ip_a"), *b = cd_net_layer(nets[k], "ip_b");
        upload_param(a->params[0], w0);
        upload_param(b->params[0], w0);
        upload_param(a->params[1], ba);
        upload_param(b->params[1], bb);
        upload_blob(nets[k], "a", xa);
        upload_blob(nets[k], "b", xb);
        upload_blob(nets[k], "label", label);
        cd_net_zero_grad(nets[k]);
        cd_net_forward(nets[k]);
        cd_net_backward(nets[k]);
    }
    float *ga = download(ta->params[0]->diff, WN), *gb = download(tb->params[0]->diff, WN);
    float *g = download(w->diff, WN);
    int bad = 0;
    double gmax = 0;
    for (int i = 0; i < WN; i++) {
        double want = (double)ga[i] + gb[i];
        gmax = fmax(gmax, fmin(fabs(ga[i]), fabs(gb[i])));
        if (!(fabs(g[i] - want) <= 1e-5 * (1 + fabs(want))) && bad++ < 3)
            CHECK(0, "shared weight: gradient[%d] = %.9g, want ip_a's %.9g + ip_b's %.9g", i, g[i], ga[i], gb[i]);
    }
    CHECK(!bad, "the shared weight's gradient is the sum of both layers'");
    /* both layers' gradients matter, or the sum proves nothing */
    CHECK(gmax > 1e-3, "both layers' gradients are near zero (%g)", gmax);

    cd_solver_opts o;
    memset(&o, 0, sizeof o);
    cd_solver_opts_defaults(&o, CD_SOLVER_SGD, cd_test_uniform(0.05, 0.2));
    o.momentum = cd_test_uniform(0.5, 0.95);
    o.weight_decay = cd_test_uniform(0.01, 0.1);
    o.lr.type = CD_LR_FIXED;
    g_be->iface->upload(g_be, w->h1, h0, sizeof h0);
    double rate = cd_solver_step(net, &o, 0);
    float *w1 = download(w->data, WN), *h1 = download(w->h1, WN);
    double lr = (float)rate, m = (float)o.momentum, decay = (float)o.weight_decay, moved = 0;
    bad = 0;
    for (int i = 0; i < WN; i++) {
        double h = m * h0[i] + lr * ((double)ga[i] + gb[i] + decay * w0[i]), want = w0[i] - h;
        moved = fmax(moved, fabs(want - w0[i]));
        int ok = fabs(w1[i] - want) <= W_TOL * (1 + fabs(want)) && fabs(h1[i] - h) <= W_TOL * (1 + fabs(h));
        if (!ok && bad++ < 3)
            CHECK(0, "shared weight after one SGD step: w[%d] = %.9g (history %.9g), want %.9g (%.9g); "
                  "started at %.9g", i, w1[i], h1[i], want, h, w0[i]);
    }
    CHECK(!bad, "one SGD step moves the shared weight once by the sum of both gradients");
    CHECK(moved > 100 * W_TOL, "the step moved the shared weight only %g", moved);
    printf("shared weight: SGD step moved it up to %.3g\n", moved);
    free(ga);
    free(gb);
    free(g);
    free(w1);
    free(h1);
    cd_net_free(net);
    cd_net_free(twin);
    cd_pt_free(ts);
    cd_pt_free(tt);
}

/* Names and DIGITS's defaults per solver type. */
static void test_names_defaults(void)
{
    static const char *const names[CD_SOLVER_COUNT] = {"SGD", "NESTEROV", "ADAGRAD", "RMSPROP",
                                                       "ADADELTA", "ADAM"};
    for (int t = 0; t < CD_SOLVER_COUNT; t++) {
        CHECK(!strcmp(cd_solver_type_name(t), names[t]), "name of %d: %s", t, cd_solver_type_name(t));
        CHECK(cd_solver_type_parse(names[t]) == t, "parse %s", names[t]);
        CHECK(strstr(cd_solver_type_list(), names[t]) != NULL, "list lacks %s", names[t]);
        cd_solver_opts o;
        memset(&o, 0, sizeof o);
        double base = cd_test_uniform(1e-4, 0.5);
        cd_solver_opts_defaults(&o, t, base);
        double want_m = t == CD_SOLVER_ADAGRAD || t == CD_SOLVER_RMSPROP ? 0.0 : 0.9;
        CHECK(o.type == t && o.momentum == want_m && o.momentum2 == 0.999 && o.rms_decay == 0.99 &&
              o.delta == 1e-8 && o.iter_size == 1 && o.reg == CD_REG_L2 &&
              fabs(o.weight_decay - base / 100) <= 1e-15 && o.lr.base_lr == base,
              "%s defaults: momentum %g momentum2 %g rms_decay %g delta %g weight_decay %g "
              "(base %g) iter_size %d", names[t], o.momentum, o.momentum2, o.rms_decay, o.delta,
              o.weight_decay, base, o.iter_size);
    }
    CHECK(cd_solver_type_parse("FOO") == -1, "FOO parsed as a solver");
}

int main(void)
{
    cd_test_init("test_solver");
    g_be = cd_backend_cpu_new(1);
    if (!g_be) {
        CHECK(0, "no CPU backend");
        return cd_test_finish();
    }
    test_names_defaults();
    test_shared_step();
    for (int type = 0; type < CD_SOLVER_COUNT; type++) {
        run_case(type, 1, CD_REG_L2);
        run_case(type, 4, CD_REG_L2);
        run_case(type, 3, CD_REG_L1);
    }
    cd_backend_free(g_be);
    return cd_test_finish();
}
