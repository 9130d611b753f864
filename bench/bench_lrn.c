/*
 * One LRN shape on the CPU backend, its forward and its backward each repeated on their
 * own, the median of 15 rounds: the op's own speed, apart from the network around it.
 * To compare two builds, run their bench_lrn in turn, several times (the host's speed
 * moves from minute to minute).
 *
 *   build/bench/bench_lrn [--shape NxCxHxW] [--size S] [--beta B] [--within 1]
 *                         [--reps R] [--threads T]
 * Defaults: AlexNet's norm2 (32x256x27x27, ACROSS, size 5, alpha 1e-4, beta 0.75, k 1),
 * 20 calls a round, 2 threads; norm1 is --shape 32x96x55x55.
 * Prints the forward's and backward's ms a call, the GB/s of the bytes each moves (x
 * read and y written; x and dy read and dx written) and a checksum of y and dx, the
 * same for builds that compute the same bits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/util.h"

#include "bench_util.h"

#define ROUNDS 15

typedef struct lrn_run {
    cd_backend_t *be;
    cd_lrn_desc d;
    float *x, *y, *dy, *dx;
} lrn_run;

static void lrn_fwd(void *ctx)
{
    lrn_run *p = ctx;
    p->be->iface->lrn_forward(p->be, &p->d, p->x, p->y);
}

static void lrn_bwd(void *ctx)
{
    lrn_run *p = ctx;
    p->be->iface->lrn_backward(p->be, &p->d, p->x, p->y, p->dy, p->dx);
}

int main(int argc, char **argv)
{
    cd_lrn_desc d = {.mode = CD_LRN_ACROSS, .n = 32, .c = 256, .h = 27, .w = 27, .size = 5, .alpha = 1e-4f,
                     .beta = 0.75f, .k = 1.0f};
    int reps = 20, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--shape") && sscanf(v, "%dx%dx%dx%d", &d.n, &d.c, &d.h, &d.w) == 4)
            continue;
        if (!strcmp(a, "--size"))
            d.size = atoi(v);
        else if (!strcmp(a, "--beta"))
            d.beta = (float)atof(v);
        else if (!strcmp(a, "--within"))
            d.mode = atoi(v) ? CD_LRN_WITHIN : CD_LRN_ACROSS;
        else if (!strcmp(a, "--reps"))
            reps = atoi(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else {
            fprintf(stderr, "bench_lrn: unknown option or value: %s %s (see the top of bench/bench_lrn.c)\n", a, v);
            return 2;
        }
    }
    if (d.n <= 0 || d.c <= 0 || d.h <= 0 || d.w <= 0 || d.size <= 0 || d.size % 2 == 0 || reps <= 0 ||
        threads <= 0) {
        fprintf(stderr, "bench_lrn: the shape, size (odd), reps or threads is out of range\n");
        return 2;
    }
    cd_backend_t *be = cd_backend_cpu_new(threads);
    size_t nx = (size_t)d.n * d.c * d.h * d.w;
    float *x = cd_xmalloc(nx * sizeof(float)), *y = cd_xmalloc(nx * sizeof(float));
    float *dy = cd_xmalloc(nx * sizeof(float)), *dx = cd_xmalloc(nx * sizeof(float));
    uint64_t r = 88172645463325252ull; /* xorshift: activations after ReLU, a fifth of them 0 */
    for (size_t i = 0; i < nx; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = r % 5 ? (float)(r >> 40 & 1023) / 16.0f : 0.0f;
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        dy[i] = (float)(int)(r % 201 - 100) / 1024.0f;
    }
    double tf[ROUNDS], tb[ROUNDS];
    lrn_run run = {be, d, x, y, dy, dx};
    bench_fwd_bwd(ROUNDS, reps, lrn_fwd, lrn_bwd, &run, tf, tb);
    double sum = 0;
    for (size_t i = 0; i < nx; i++)
        sum += dx[i] * (double)(i % 7 + 1) + y[i] * (double)(i % 5 + 1);
    double bytes = (double)nx * sizeof(float);
    printf("lrn %s %dx%dx%dx%d size %d beta %g, %d threads: forward %.4f ms (%.1f GB/s, %.4f-%.4f), backward "
           "%.4f ms (%.1f GB/s, %.4f-%.4f), sum %.4f ms; checksum %.9g\n",
           d.mode == CD_LRN_ACROSS ? "across" : "within", d.n, d.c, d.h, d.w, d.size, d.beta, threads,
           tf[ROUNDS / 2], 2 * bytes / tf[ROUNDS / 2] / 1e6, tf[0], tf[ROUNDS - 1], tb[ROUNDS / 2],
           3 * bytes / tb[ROUNDS / 2] / 1e6, tb[0], tb[ROUNDS - 1], tf[ROUNDS / 2] + tb[ROUNDS / 2], sum);
    free(x);
    free(y);
    free(dy);
    free(dx);
    cd_backend_free(be);
    return 0;
}
