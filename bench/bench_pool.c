/*
 * One pooling shape on the CPU backend, its forward (with the mask the backend keeps in
 * training) and its backward each repeated on their own, the median of 15 rounds: the
 * op's own speed, apart from the network around it. To compare two builds, run their
 * bench_pool in turn, several times (the host's speed moves from minute to minute).
 *
 *   build/bench/bench_pool [--shape NxCxHxW] [--kernel K] [--stride S] [--pad P]
 *                          [--mode MAX|AVE] [--reps R] [--threads T]
 * Defaults: AlexNet's pool5 (32x256x13x13, 3x3 stride 2), 200 calls a round, 2 threads.
 * Prints the forward's and backward's ms a call, the GB/s of the bytes each moves (x
 * read and y written; dy read and dx written; the mask's bytes both ways) and a checksum
 * of y and dx, the same for builds that compute the same bits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/util.h"

#include "bench_util.h"

#define ROUNDS 15

typedef struct pool_run {
    cd_backend_t *be;
    cd_pool_desc d;
    float *x, *y, *mask, *dy, *dx;
} pool_run;

static void pool_fwd(void *ctx)
{
    pool_run *p = ctx;
    p->be->iface->pool_forward(p->be, &p->d, p->x, p->y, p->mask);
}

static void pool_bwd(void *ctx)
{
    pool_run *p = ctx;
    p->be->iface->pool_backward(p->be, &p->d, p->x, p->y, p->mask, p->dy, p->dx);
}

int main(int argc, char **argv)
{
    cd_pool_desc d = {.mode = CD_POOL_MAX, .n = 32, .c = 256, .h = 13, .w = 13, .kh = 3, .kw = 3, .sh = 2, .sw = 2};
    int reps = 200, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--shape") && sscanf(v, "%dx%dx%dx%d", &d.n, &d.c, &d.h, &d.w) == 4)
            continue;
        if (!strcmp(a, "--kernel"))
            d.kh = d.kw = atoi(v);
        else if (!strcmp(a, "--stride"))
            d.sh = d.sw = atoi(v);
        else if (!strcmp(a, "--pad"))
            d.ph = d.pw = atoi(v);
        else if (!strcmp(a, "--mode") && (!strcmp(v, "MAX") || !strcmp(v, "AVE")))
            d.mode = !strcmp(v, "MAX") ? CD_POOL_MAX : CD_POOL_AVE;
        else if (!strcmp(a, "--reps"))
            reps = atoi(v);
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else {
            fprintf(stderr, "bench_pool: unknown option or value: %s %s (see the top of bench/bench_pool.c)\n", a, v);
            return 2;
        }
    }
    if (d.n <= 0 || d.c <= 0 || d.kh <= 0 || d.sh <= 0 || d.ph < 0 || d.ph >= d.kh || d.kh > d.h + 2 * d.ph ||
        reps <= 0) {
        fprintf(stderr, "bench_pool: the shape, kernel, stride, pad or reps is out of range\n");
        return 2;
    }
    d.oh = cd_pool_out(d.h, d.kh, d.sh, d.ph, 0);
    d.ow = cd_pool_out(d.w, d.kw, d.sw, d.pw, 0);
    cd_backend_t *be = cd_backend_cpu_new(threads);
    const cd_backend_iface *f = be->iface;
    size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
    size_t nm = f->pool_mask_size ? f->pool_mask_size(be, &d) : 0;
    float *x = cd_xmalloc(nx * sizeof(float)), *dx = cd_xmalloc(nx * sizeof(float));
    float *y = cd_xmalloc(ny * sizeof(float)), *dy = cd_xmalloc(ny * sizeof(float));
    float *mask = nm ? cd_xmalloc(nm * sizeof(float)) : NULL;
    uint64_t r = 88172645463325252ull; /* xorshift: values with ties, as activations after ReLU have */
    for (size_t i = 0; i < nx; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (float)(r % 1000);
    }
    for (size_t i = 0; i < ny; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        dy[i] = (float)(r % 100) / 7.0f;
    }
    double tf[ROUNDS], tb[ROUNDS];
    pool_run run = {be, d, x, y, mask, dy, dx};
    bench_fwd_bwd(ROUNDS, reps, pool_fwd, pool_bwd, &run, tf, tb);
    double sum = 0;
    for (size_t i = 0; i < nx; i++)
        sum += dx[i] * (double)(i % 7 + 1);
    for (size_t i = 0; i < ny; i++)
        sum += y[i] * (double)(i % 5 + 1);
    double mb = (double)nm * sizeof(float), fb = (double)(nx + ny) * sizeof(float) + mb;
    printf("pool %dx%dx%dx%d k%d s%d p%d, %d threads: forward %.4f ms (%.1f GB/s, %.4f-%.4f), backward %.4f ms "
           "(%.1f GB/s, %.4f-%.4f), sum %.4f ms; mask %.2f MB; checksum %.9g\n",
           d.n, d.c, d.h, d.w, d.kh, d.sh, d.ph, threads, tf[ROUNDS / 2], fb / tf[ROUNDS / 2] / 1e6, tf[0],
           tf[ROUNDS - 1], tb[ROUNDS / 2], fb / tb[ROUNDS / 2] / 1e6, tb[0], tb[ROUNDS - 1],
           tf[ROUNDS / 2] + tb[ROUNDS / 2], mb / 1e6, sum);
    free(x);
    free(dx);
    free(y);
    free(dy);
    free(mask);
    cd_backend_free(be);
    return 0;
}
