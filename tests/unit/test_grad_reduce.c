/* The bucket plan of data parallelism's gradient averaging (src/engine/grad_reduce.c):
 * on LeNet and AlexNet, for bucket sizes from tiny to larger than the net, the buckets
 * tile the gradient arena exactly, top down in the order the backward pass finishes
 * them; each starts after a layer that has parameters and whose parameters are its
 * lowest; none but a single layer's exceeds the size asked for (the first is at most
 * 1 MiB); smaller sizes give at least as many buckets; 0 MiB is one bucket after the
 * backward pass; and one backward pass with the
 * plan armed starts every bucket exactly once and leaves the gradients as they are
 * outside a group. Also the in-process group's collectives on 3 threads: the mean is
 * the same on every rank, broadcast gives rank 0's value and min the smallest (how
 * replicas agree on a batch that fits every device). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/engine/grad_reduce.h"
#include "cdigits/backend.h"
#include "cdigits/group.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "testutil.h"

static size_t span(const cd_param *p) { return (p->count + 15) & ~(size_t)15; }

/* the largest arena span of one layer's parameters */
static size_t largest_layer(const cd_net *net)
{
    size_t m = 0;
    for (int i = 0; i < net->nlayers; i++) {
        size_t s = 0;
        for (int k = 0; k < net->layers[i]->nparam; k++)
            s += span(net->layers[i]->params[k]);
        if (s > m)
            m = s;
    }
    return m;
}

static int check_plan(const char *what, const cd_net *net, const cd_grad_reduce *r, double mb)
{
    size_t top = net->param_count, cap = (size_t)(mb * (1 << 20) / sizeof(float));
    size_t first = ((size_t)1 << 20) / sizeof(float), big = largest_layer(net);
    int last_layer = net->nlayers;
    for (int b = 0; b < r->n; b++) {
        const cd_grad_bucket *k = &r->buckets[b];
        CHECK(k->hi == top && k->lo < k->hi, "%s %g MiB: bucket %d is [%zu, %zu), expected to end at %zu",
              what, mb, b, k->lo, k->hi, top);
        CHECK(k->after_layer < last_layer, "%s %g MiB: bucket %d after layer %d, not before %d", what, mb, b,
              k->after_layer, last_layer);
        const cd_layer *l = net->layers[k->after_layer];
        size_t lo = (size_t)-1;
        for (int p = 0; p < l->nparam; p++)
            if (l->params[p]->offset < lo)
                lo = l->params[p]->offset;
        CHECK(l->nparam > 0 && lo == k->lo, "%s %g MiB: bucket %d starts at %zu, layer %s's parameters at %zu",
              what, mb, b, k->lo, l->name, lo);
        size_t limit = b == 0 && first < cap ? first : cap;
        size_t floats = k->hi - k->lo;
        /* a bucket closes at the first layer that takes it to the limit, so it holds
         * at most the limit plus one layer */
        CHECK(floats < limit + big, "%s %g MiB: bucket %d holds %zu floats, over %zu + one layer (%zu)", what,
              mb, b, floats, limit, big);
        top = k->lo;
        last_layer = k->after_layer;
    }
    CHECK(top == 0, "%s %g MiB: the buckets stop at float %zu, not 0", what, mb, top);
    return r->n;
}

/* be NULL: the plan only, on the built net (no memory for its parameters) */
static void plan_net(const char *file, const char *what, int c, int h, int w, cd_backend_t *be)
{
    char err[1024] = "";
    cd_net_opts opts = {.stage = "train", .batch = 2, .input_c = c, .input_h = h, .input_w = w,
                        .num_classes = 10, .seed = 1};
    cd_net *net = cd_net_load(cd_test_source_path(file), &opts, err, sizeof err);
    CHECK(net && (!be || cd_net_alloc(net, be, NULL, err, sizeof err) == CD_OK), "%s does not build: %s",
          file, err);
    if (!net || (be && !net->allocated)) {
        cd_net_free(net);
        return;
    }
    static const double sizes[] = {0.0001, 0.01, 0.5, 1, 4, 25, 4096};
    int prev = 1 << 30;
    for (size_t i = 0; i < CD_ARRAY_LEN(sizes); i++) {
        cd_grad_reduce r;
        cd_grad_reduce_init(&r, net, sizes[i]);
        int n = check_plan(what, net, &r, sizes[i]);
        CHECK(n <= prev, "%s: %g MiB gives %d buckets, more than the %d of a smaller size", what, sizes[i], n,
              prev);
        printf("%s (%zu floats): %g MiB -> %d buckets\n", what, net->param_count, sizes[i], n);
        prev = n;
        cd_grad_reduce_free(&r);
    }

    cd_grad_reduce one;
    cd_grad_reduce_init(&one, net, 0);
    CHECK(one.n == 1 && one.buckets[0].lo == 0 && one.buckets[0].hi == net->param_count &&
              one.buckets[0].after_layer == 0,
          "%s: 0 MiB is one bucket of the whole arena after the backward pass (%d buckets)", what, one.n);
    cd_grad_reduce_free(&one);
    if (!be) {
        cd_net_free(net);
        return;
    }
    /* one armed backward pass: every bucket started once, outside a group the
     * identity */
    cd_grad_reduce r;
    cd_grad_reduce_init(&r, net, 0.01);
    cd_net_zero_grad(net);
    cd_net_forward(net);
    cd_net_backward(net);
    float *before = malloc(net->param_count * sizeof(float));
    memcpy(before, net->arena_diff, net->param_count * sizeof(float));
    cd_net_zero_grad(net);
    cd_grad_reduce_arm(&r);
    cd_net_forward(net);
    cd_net_backward(net);
    CHECK(r.next == r.n, "%s: %d of %d buckets started in the backward pass", what, r.next, r.n);
    CHECK(cd_grad_reduce_finish(&r, err, sizeof err) == CD_OK, "%s: finish: %s", what, err);
    CHECK(net->after_backward == NULL, "%s: finish disarms the hook", what);
    CHECK(memcmp(before, net->arena_diff, net->param_count * sizeof(float)) == 0,
          "%s: the gradients changed outside a group", what);
    free(before);
    cd_grad_reduce_free(&r);
    cd_net_free(net);
}

enum { RANKS = 3, VALUES = 1000 };

typedef struct rank_out {
    cd_group_t *g;
    int rank;
    float x[VALUES];
    long bcast, min, min2;
} rank_out;

static void *group_rank(void *p)
{
    rank_out *o = p;
    for (int i = 0; i < VALUES; i++)
        o->x[i] = (float)(o->rank * 1000 + i) * 0.001f;
    cd_group_allreduce_mean(o->g, o->rank, o->x, VALUES);
    o->bcast = cd_group_broadcast(o->g, o->rank, 100 + o->rank);
    /* the batch each device fits: rank 1 fits the least */
    o->min = cd_group_min(o->g, o->rank, o->rank == 1 ? 16 : 64 - o->rank);
    o->min2 = cd_group_min(o->g, o->rank, 7);
    return NULL;
}

static void test_group(void)
{
    cd_group_t *g = cd_group_new(RANKS);
    CHECK(g && cd_group_size(g) == RANKS, "a group of %d", RANKS);
    if (!g)
        return;
    static rank_out out[RANKS];
    pthread_t th[RANKS];
    for (int r = 0; r < RANKS; r++) {
        out[r] = (rank_out){.g = g, .rank = r};
        CHECK(pthread_create(&th[r], NULL, group_rank, &out[r]) == 0, "thread %d", r);
    }
    for (int r = 0; r < RANKS; r++)
        pthread_join(th[r], NULL);
    int same = 1, near = 1;
    for (int i = 0; i < VALUES; i++) {
        float want = (float)(1000 + i) * 0.001f; /* the mean of rank*1000 + i over 0, 1, 2 */
        near &= fabsf(out[0].x[i] - want) <= 1e-5f * fabsf(want) + 1e-6f;
        for (int r = 1; r < RANKS; r++)
            same &= memcmp(&out[r].x[i], &out[0].x[i], sizeof(float)) == 0;
    }
    CHECK(near, "allreduce_mean gives the mean");
    CHECK(same, "allreduce_mean is bit-identical on every rank");
    for (int r = 0; r < RANKS; r++) {
        CHECK(out[r].bcast == 100, "rank %d: broadcast gave %ld, rank 0's is 100", r, out[r].bcast);
        CHECK(out[r].min == 16 && out[r].min2 == 7, "rank %d: min gave %ld and %ld, want 16 and 7", r,
              out[r].min, out[r].min2);
    }
    cd_group_free(g);
}

int main(void)
{
    cd_test_init("test_grad_reduce");
    cd_backend_t *be = cd_backend_cpu_new(2);
    plan_net("models/lenet.prototxt", "LeNet", 1, 28, 28, be);
    plan_net("models/alexnet.prototxt", "AlexNet", 3, 256, 256, NULL);
    plan_net("models/googlenet.prototxt", "GoogLeNet", 3, 256, 256, NULL);
    cd_backend_free(be);
    test_group();
    return cd_test_finish();
}
