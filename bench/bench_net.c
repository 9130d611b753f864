/*
 * Forward+backward time of a network on the CPU backend, per layer and in total, and
 * the share of the machine's measured sgemm rate it reaches.
 *
 *   build/bench/bench_net [--net models/lenet.prototxt --input 1x28x28 --batch 64]
 *                         [--iters N] [--threads N]
 * Without --net it measures LeNet (batch 64) and AlexNet (batch 32) one after another.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/net.h"
#include "cdigits/util.h"

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

/* Multiply-adds of the gemm-shaped layers of one forward pass. */
static double forward_flops(const cd_net *net)
{
    double f = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        if (!strcmp(l->type->name, "Convolution")) {
            const cd_blob *y = l->top[0];
            const cd_param *w = l->params[0];
            f += 2.0 * y->count * (double)(w->count / (size_t)w->dims[0]);
        } else if (!strcmp(l->type->name, "InnerProduct")) {
            f += 2.0 * (double)l->top[0]->dims[0] * l->params[0]->count;
        }
    }
    return f;
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
    double total = 0;
    for (int it = -2; it < iters; it++) { /* two warm-up passes */
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
        if (it >= 0)
            total += cd_now() - t0;
    }
    double per = total / iters, flops = 3.0 * forward_flops(net);
    printf("\n%s, batch %d, %dx%dx%d: forward+backward %.2f ms (%.0f images/s), %.2f GFLOP per "
           "pass, %.1f GFLOP/s = %.0f%% of sgemm\n", net->name, batch, c, h, w, per * 1e3, batch / per,
           flops / 1e9, flops / per / 1e9, 100.0 * flops / per / 1e9 / gflops);
    printf("  %-22s %-14s %10s %10s\n", "layer", "type", "fwd ms", "bwd ms");
    for (int i = 0; i < net->nlayers; i++)
        if (fwd[i] + bwd[i] > 0.02 * total)
            printf("  %-22s %-14s %10.2f %10.2f\n", net->layers[i]->name, net->layers[i]->type->name,
                   fwd[i] / iters * 1e3, bwd[i] / iters * 1e3);
    free(fwd);
    free(bwd);
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
