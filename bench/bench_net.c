/*
 * Forward+backward time of a network on the CPU backend, per layer and in total, beside
 * the ceilings this machine measures here: the sgemm rate (OpenBLAS, both cores) for the
 * convolutions and inner products, and a two-thread triad (a = b + s*c) at each
 * memory-bound layer's own working-set size for ReLU, pooling, LRN, BatchNorm, Eltwise,
 * Dropout and the like, each layer's share of its ceiling printed beside its time. Then
 * a whole training step (forward, backward and the SGD update with DIGITS's momentum and
 * weight decay) against forward+backward alone, and the update's own share of the triad.
 *
 *   build/bench/bench_net [--net models/lenet.prototxt --input 1x28x28 --batch 64]
 *                         [--iters N]
 * Without --net it measures LeNet (batch 64) and AlexNet (batch 32) one after another.
 * The pass's share of sgemm is given twice: against the best of five sgemm runs at the
 * start, and as the median (lowest-highest) of the passes' shares of an sgemm run just
 * before each of them, a ratio that holds when the host's speed moves.
 * A memory-bound layer's bytes: forward, its bottoms read and its tops written; backward,
 * its tops' gradients and its bottoms read and its bottoms' gradients written (in-place
 * blobs counted once). The update's: each parameter, its gradient and its momentum read,
 * the parameter and the momentum written.
 * The triad's rate for a layer is the median of five rounds taken in turn with the layer
 * repeated on its own (its data as hot as the triad's, where in the network its inputs
 * may come from memory); the line gives the layer's rate in the network against that
 * median, and its share alone: the median (lowest-highest) of the rounds' own shares.
 * The update's line likewise, the update repeated on its own.
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/net.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

#include "bench_util.h"

/* Best of a few runs of a large square sgemm, in GFLOP/s. */
static double sgemm_rate(void)
{
    const int n = 1536;
    float *a = cd_xmalloc((size_t)n * n * sizeof(float)), *b = cd_xmalloc((size_t)n * n * sizeof(float));
    float *c = cd_xcalloc((size_t)n * n, sizeof(float));
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = cd_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = cd_now() - t0;
        double rate = 2.0 * n * n * n / dt / 1e9;
        if (rate > best)
            best = rate;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* The square sgemm of sgemm_rate through the backend's gemm (OpenBLAS on each of its
 * threads, C's columns split between them: on this host 327-343 GFLOP/s where
 * OpenBLAS's own two threads give 330-358 at their best of five), taken once before each
 * pass of the network, so that a pass's share of sgemm is a ratio of the same minute:
 * the host's speed moves by up to 2x between minutes. */
typedef struct sgemm_in_turn {
    cd_backend_t *be;
    int n;
    float *a, *b, *c;
} sgemm_in_turn;

static sgemm_in_turn sgemm_in_turn_new(cd_backend_t *be)
{
    sgemm_in_turn s = {.be = be, .n = 1536};
    size_t nn = (size_t)s.n * s.n;
    s.a = cd_xmalloc(nn * sizeof(float));
    s.b = cd_xmalloc(nn * sizeof(float));
    s.c = cd_xcalloc(nn, sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        s.a[i] = (float)(i % 13) * 0.01f;
        s.b[i] = (float)(i % 7) * 0.02f;
    }
    return s;
}

/* GFLOP/s of one run */
static double sgemm_in_turn_rate(const sgemm_in_turn *s)
{
    double t0 = cd_now();
    s->be->iface->gemm(s->be, 0, 0, s->n, s->n, s->n, 1.0f, s->a, s->b, 0.0f, s->c);
    return 2.0 * s->n * s->n * (double)s->n / (cd_now() - t0) / 1e9;
}

static void sgemm_in_turn_free(sgemm_in_turn *s)
{
    free(s->a);
    free(s->b);
    free(s->c);
}

/* One two-thread pass a = b + 0.5*c, compiled as the CPU backend's memory-bound loops
 * are (CD_CLONES: AVX2 where the processor has it), so that their ceiling is the
 * machine's. */
CD_CLONES
static void triad_pass(size_t n, float *a, const float *b, const float *c)
{
#pragma omp parallel for num_threads(2) schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + 0.5f * c[i];
}

/* A two-thread triad a = b + s*c over arrays of a working set of `bytes` (the three
 * arrays together), and the passes of it that take about 20 ms. */
typedef struct triad {
    size_t n;
    float *a, *b, *c;
    int reps;
} triad;

static triad triad_new(double bytes)
{
    triad t = {.n = (size_t)(bytes / 12.0)};
    if (t.n < 1024)
        t.n = 1024;
    t.a = cd_xcalloc(t.n, sizeof(float));
    t.b = cd_xcalloc(t.n, sizeof(float));
    t.c = cd_xcalloc(t.n, sizeof(float));
    for (size_t i = 0; i < t.n; i++)
        t.b[i] = (float)(i % 7), t.c[i] = (float)(i % 5);
    t.reps = (int)(2e8 / (double)(12 * t.n)) + 1;
    triad_pass(t.n, t.a, t.b, t.c); /* the pages touched */
    return t;
}

/* GB/s of one round of the triad's passes */
static double triad_round(const triad *t)
{
    double t0 = cd_now();
    for (int r = 0; r < t->reps; r++)
        triad_pass(t->n, t->a, t->b, t->c);
    return 12.0 * (double)t->n * t->reps / (cd_now() - t0) / 1e9;
}

static void triad_free(triad *t)
{
    free(t->a);
    free(t->b);
    free(t->c);
}

/* What one measured piece of work is: a layer's forward and backward on its own, or
 * the solver's update. Returns seconds per pass over `reps` passes. */
typedef double (*work_fn)(void *ctx, int reps);

#define CEIL_ROUNDS 5

/* The work's rate on `bytes` against the triad at a working set of `ws` bytes, taken in
 * turn (triad, work, triad, work, ...) for CEIL_ROUNDS rounds: the host's memory
 * bandwidth moves by 2x from minute to minute, so a ceiling measured at another moment
 * than the work says little. Gives the median triad rate, and the median, lowest and
 * highest of the per-round shares (work rate / triad rate of the same round). */
static void ceiling_in_turn(work_fn work, void *ctx, double est, double bytes, double ws, double *triad_med,
                            double share[3])
{
    triad t = triad_new(ws);
    int reps = est > 0 ? (int)(0.02 / est) : 100;
    reps = reps < 3 ? 3 : reps > 2000 ? 2000 : reps;
    work(ctx, 1); /* warm-up */
    double tr[CEIL_ROUNDS], sh[CEIL_ROUNDS];
    for (int r = 0; r < CEIL_ROUNDS; r++) {
        tr[r] = triad_round(&t);
        sh[r] = bytes / work(ctx, reps) / 1e9 / tr[r];
    }
    triad_free(&t);
    bench_sort(tr, CEIL_ROUNDS);
    bench_sort(sh, CEIL_ROUNDS);
    *triad_med = tr[CEIL_ROUNDS / 2];
    share[0] = sh[CEIL_ROUNDS / 2];
    share[1] = sh[0];
    share[2] = sh[CEIL_ROUNDS - 1];
}

typedef struct layer_work {
    cd_net *net;
    cd_layer *l;
} layer_work;

/* A layer's forward plus backward on its own, repeated over the same blobs, so that its
 * data is as hot as the triad's: the layer's own speed, apart from where the network
 * left its inputs. In-place layers run on their own output again, which changes the
 * values and not the work. */
static double layer_alone(void *ctx, int reps)
{
    layer_work *w = ctx;
    double t0 = cd_now();
    for (int r = 0; r < reps; r++) {
        w->l->type->forward(w->net, w->l);
        if (w->l->need_backward)
            w->l->type->backward(w->net, w->l);
    }
    return (cd_now() - t0) / reps;
}

typedef struct update_work {
    cd_net *net;
    cd_solver_opts *so;
} update_work;

static double update_alone(void *ctx, int reps)
{
    update_work *w = ctx;
    double t0 = cd_now();
    for (int r = 0; r < reps; r++)
        cd_solver_step(w->net, w->so, 100);
    return (cd_now() - t0) / reps;
}

static const char *const memory_bound[] = {"ReLU", "Pooling", "LRN", "BatchNorm", "Scale", "Eltwise",
                                           "Dropout", "Sigmoid", "TanH", "Power", "Concat", "Softmax"};

static int is_memory_bound(const cd_layer *l)
{
    for (size_t i = 0; i < sizeof memory_bound / sizeof memory_bound[0]; i++)
        if (!strcmp(l->type->name, memory_bound[i]))
            return 1;
    return 0;
}

/* Bytes a memory-bound layer moves forward (bwd 0) or backward (bwd 1): see the top. */
static double layer_bytes(const cd_layer *l, int bwd)
{
    double n = 0;
    for (int b = 0; b < l->nbottom; b++)
        n += (double)l->bottom[b]->count * (bwd ? 2 : 1); /* data, and its gradient written */
    for (int t = 0; t < l->ntop; t++) {
        int inplace = 0;
        for (int b = 0; b < l->nbottom; b++)
            inplace |= l->top[t] == l->bottom[b];
        if (!inplace || bwd)
            n += (double)l->top[t]->count; /* data written, or its gradient read */
    }
    return n * sizeof(float);
}

/* Floating-point operations of one forward pass of a gemm-shaped layer (0 for others). */
static double layer_flops(const cd_layer *l)
{
    if (!strcmp(l->type->name, "Convolution"))
        return 2.0 * l->top[0]->count * (double)(l->params[0]->count / (size_t)l->params[0]->dims[0]);
    if (!strcmp(l->type->name, "InnerProduct"))
        return 2.0 * (double)l->top[0]->dims[0] * l->params[0]->count;
    return 0;
}

/* How many gemm-sized passes a training step makes through a gemm-shaped layer: the
 * forward, the weight gradient, and the data gradient where its bottom needs one (not
 * for the first convolution, whose bottom is the data). */
static double layer_passes(const cd_layer *l)
{
    return 2.0 + (l->nbottom > 0 && l->bottom[0]->need_backward ? 1.0 : 0.0);
}

/* Floating-point operations of one forward plus backward pass. */
static double step_flops(const cd_net *net)
{
    double f = 0;
    for (int i = 0; i < net->nlayers; i++)
        f += layer_passes(net->layers[i]) * layer_flops(net->layers[i]);
    return f;
}

static double param_floats(const cd_net *net)
{
    double n = 0;
    for (int i = 0; i < net->nlayers; i++)
        for (int p = 0; p < net->layers[i]->nparam; p++)
            n += (double)net->layers[i]->params[p]->count;
    return n;
}

static int bench(const char *file, int c, int h, int w, int batch, int iters, double gflops)
{
    cd_net_opts opts = {.stage = "train", .batch = batch, .input_c = c, .input_h = h, .input_w = w,
                        .num_classes = 10, .seed = 1};
    char err[1024];
    cd_net *net = cd_net_load(file, &opts, err, sizeof err);
    if (!net) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    cd_backend_t *be = cd_backend_cpu_new(0);
    if (cd_net_alloc(net, be, NULL, err, sizeof err) != CD_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* random pixels and labels in the data layer's tops */
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (!(l->type->flags & CD_LAYER_DATA))
            continue;
        for (int t = 0; t < l->ntop; t++) {
            cd_blob *b = l->top[t];
            float *host = cd_xmalloc(b->count * sizeof(float));
            for (size_t k = 0; k < b->count; k++)
                host[k] = t == 0 ? (float)(rand() % 256) - 128.0f : (float)(rand() % 10);
            be->iface->upload(be, b->data, host, b->count * sizeof(float));
            free(host);
        }
    }
    double *fwd = cd_xcalloc((size_t)net->nlayers, sizeof(double));
    double *bwd = cd_xcalloc((size_t)net->nlayers, sizeof(double));
    double total = 0, flops = step_flops(net);
    double *turn_rate = cd_xcalloc((size_t)iters, sizeof(double)), *turn_share = cd_xcalloc((size_t)iters, sizeof(double));
    sgemm_in_turn sg = sgemm_in_turn_new(be);
    for (int it = -2; it < iters; it++) { /* two warm-up passes */
        double rate = sgemm_in_turn_rate(&sg);
        double t0 = cd_now();
        for (int i = 0; i < net->nlayers; i++) {
            cd_layer *l = net->layers[i];
            double s = cd_now();
            if (l->type->forward)
                l->type->forward(net, l);
            if (it >= 0)
                fwd[i] += cd_now() - s;
        }
        for (int i = net->nlayers - 1; i >= 0; i--) {
            cd_layer *l = net->layers[i];
            double s = cd_now();
            if (l->need_backward)
                l->type->backward(net, l);
            if (it >= 0)
                bwd[i] += cd_now() - s;
        }
        cd_net_zero_grad(net);
        if (it >= 0) {
            double t = cd_now() - t0;
            total += t;
            turn_rate[it] = rate;
            turn_share[it] = flops / t / 1e9 / rate;
        }
    }
    sgemm_in_turn_free(&sg);
    bench_sort(turn_rate, iters);
    bench_sort(turn_share, iters);
    double per = total / iters;
    /* whole training steps: forward, backward, the update (which zeroes the gradients) */
    cd_solver_opts so = {0};
    cd_solver_opts_defaults(&so, CD_SOLVER_SGD, 0.01);
    so.iter_size = 1;
    double step = 0, update = 0;
    for (int it = -2; it < iters; it++) {
        double t0 = cd_now();
        cd_net_forward(net);
        cd_net_backward(net);
        double t1 = cd_now();
        cd_solver_step(net, &so, it + 2);
        if (it >= 0) {
            step += cd_now() - t0;
            update += cd_now() - t1;
        }
    }
    step /= iters;
    update /= iters;
    printf("\n%s, batch %d, %dx%dx%d: forward+backward %.2f ms (%.0f images/s), %.2f GFLOP per "
           "pass, %.1f GFLOP/s = %.0f%% of sgemm\n", net->name, batch, c, h, w, per * 1e3, batch / per,
           flops / 1e9, flops / per / 1e9, 100.0 * flops / per / 1e9 / gflops);
    printf("  in turn with sgemm (one run before each pass, %.1f GFLOP/s median, %.1f-%.1f): each pass's share "
           "of its own round's sgemm, median %.0f%% (%.0f-%.0f)\n", turn_rate[iters / 2], turn_rate[0],
           turn_rate[iters - 1], 100 * turn_share[iters / 2], 100 * turn_share[0], 100 * turn_share[iters - 1]);
    printf("  %-22s %-14s %9s %9s  %s\n", "layer", "type", "fwd ms", "bwd ms",
           "rate (share of its ceiling: sgemm, or the triad at the layer's bytes); alone: its median "
           "share (lowest-highest) repeated on its own, in turn with the triad");
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        double tf = fwd[i] / iters, tb = bwd[i] / iters;
        if (tf + tb < 1e-6)
            continue;
        char rate[224] = "";
        double fl = layer_flops(l);
        if (fl > 0) {
            double r = layer_passes(l) * fl / (tf + tb) / 1e9;
            snprintf(rate, sizeof rate, "%6.1f GFLOP/s (%3.0f%% of sgemm)", r, 100.0 * r / gflops);
        } else if (is_memory_bound(l)) {
            double bf = layer_bytes(l, 0), bb = l->need_backward ? layer_bytes(l, 1) : 0;
            double r = (bf + bb) / (tf + tb) / 1e9, ceil, sh[3];
            layer_work lw = {net, (cd_layer *)l};
            ceiling_in_turn(layer_alone, &lw, tf + tb, bf + bb, bf > bb ? bf : bb, &ceil, sh);
            snprintf(rate, sizeof rate, "%6.1f GB/s    (%3.0f%% of the triad's %.0f GB/s at %.1f MB); alone %3.0f%% (%.0f-%.0f)",
                     r, 100.0 * r / ceil, ceil, (bf > bb ? bf : bb) / 1e6, 100 * sh[0], 100 * sh[1], 100 * sh[2]);
        }
        printf("  %-22s %-14s %9.3f %9.3f  %s\n", l->name, l->type->name, tf * 1e3, tb * 1e3, rate);
    }
    double ub = 5.0 * param_floats(net) * sizeof(float), uceil, ush[3];
    update_work uw = {net, &so};
    ceiling_in_turn(update_alone, &uw, update, ub, ub, &uceil, ush);
    printf("  %-22s %-14s %9.3f %9s  %6.1f GB/s    (%3.0f%% of the triad's %.0f GB/s at %.1f MB); alone %3.0f%% "
           "(%.0f-%.0f)\n", "update", "SGD", update * 1e3, "", ub / update / 1e9, 100.0 * ub / update / 1e9 / uceil,
           uceil, ub / 1e6, 100 * ush[0], 100 * ush[1], 100 * ush[2]);
    printf("  training step %.2f ms (%.0f images/s) = %.2fx forward+backward\n", step * 1e3, batch / step,
           step / per);
    free(fwd);
    free(bwd);
    free(turn_rate);
    free(turn_share);
    cd_net_free(net);
    cd_backend_free(be);
    return 0;
}

int main(int argc, char **argv)
{
    const char *net = NULL;
    int c = 1, h = 28, w = 28, batch = 64, iters = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--net") && i + 1 < argc)
            net = argv[++i];
        else if (!strcmp(argv[i], "--input") && i + 1 < argc)
            sscanf(argv[++i], "%dx%dx%d", &c, &h, &w);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_net [--net FILE --input CxHxW --batch N] [--iters N]\n");
            return 2;
        }
    }
    double g = sgemm_rate();
    printf("sgemm (1536x1536x1536, OpenBLAS): %.1f GFLOP/s\n", g);
    if (net)
        return bench(net, c, h, w, batch, iters ? iters : 10, g);
    char lenet[4096], alexnet[4096];
    snprintf(lenet, sizeof lenet, "%s/models/lenet.prototxt", CDIGITS_SOURCE_DIR);
    snprintf(alexnet, sizeof alexnet, "%s/models/alexnet.prototxt", CDIGITS_SOURCE_DIR);
    return bench(lenet, 1, 28, 28, 64, iters ? iters : 50, g) ||
           bench(alexnet, 3, 256, 256, 32, iters ? iters : 3, g);
}
