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
 * replicas agree on a batch that fits every device). And a weight shared by two layers:
 * averaged in one bucket, after its owner, so two replicas on half batches take one
 * replica's step on the whole batch. */
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
#include "cdigits/train.h"
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

/*
 * Weight sharing under data parallelism: ip_a and ip_b share their weight, owned by
 * ip_a. Two CPU replicas in a group, each taking half of a batch, average their
 * gradients through the bucket plan and take one SGD step; one replica alone takes the
 * same step on the whole batch. The loss is the batch mean, so the mean of the halves'
 * gradients is the whole batch's, and the weights must agree. Averaging the shared
 * weight twice (or not at all) would halve (or double) its step.
 */
enum { SH_BATCH = 4, SH_IN = 6, SH_OUT = 5, SH_RANKS = 2 };

static cd_net *shared_net(cd_backend_t *be, int batch)
{
    char text[2048], err[1024] = "";
    snprintf(text, sizeof text,
             "name: \"shared-dp\"\n"
             "layer { name: \"in\" type: \"Input\" top: \"a\" top: \"b\" top: \"label\"\n"
             "  input_param { shape { dim: %d dim: %d } shape { dim: %d dim: %d } shape { dim: %d } } }\n"
             "layer { name: \"ip_a\" type: \"InnerProduct\" bottom: \"a\" top: \"fa\"\n"
             "  param { name: \"w\" } inner_product_param { num_output: %d } }\n"
             "layer { name: \"ip_b\" type: \"InnerProduct\" bottom: \"b\" top: \"fb\"\n"
             "  param { name: \"w\" } inner_product_param { num_output: %d } }\n"
             "layer { name: \"s\" type: \"Eltwise\" bottom: \"fa\" bottom: \"fb\" top: \"s\" }\n"
             "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"s\" bottom: \"label\" top: \"loss\" }\n",
             batch, SH_IN, batch, SH_IN, batch, SH_OUT, SH_OUT);
    cd_net_opts opts = {.stage = "train", .seed = 1};
    cd_net *net = NULL;
    cd_pt_node *tree = cd_pt_parse(text, strlen(text), "shared-dp", err, sizeof err);
    int ok = tree && cd_pt_validate(tree, &cd_pt_net_parameter, "shared-dp", err, sizeof err) == CD_OK;
    if (ok) {
        net = cd_net_build(tree, "shared-dp", &opts, err, sizeof err);
        ok = net && (!be || cd_net_alloc(net, be, NULL, err, sizeof err) == CD_OK);
    }
    CHECK(ok, "the shared-weights net (batch %d) does not build: %s", batch, err);
    if (!ok) {
        cd_net_free(net);
        cd_pt_free(tree);
        return NULL;
    }
    net->owned_tree = tree; /* the net refers to its definition: freed with it */
    return net;
}

typedef struct sh_inputs {
    float w[SH_OUT * SH_IN], ba[SH_OUT], bb[SH_OUT];
    float a[SH_BATCH * SH_IN], b[SH_BATCH * SH_IN], label[SH_BATCH];
} sh_inputs;

typedef struct sh_replica {
    const sh_inputs *in;
    cd_group_t *g; /* NULL: one replica alone with the whole batch */
    int rank;
    float w[SH_OUT * SH_IN]; /* the shared weight after the step */
    int ok;
    char err[1024];
} sh_replica;

static void upload_blob(cd_net *net, const char *name, const float *v)
{
    cd_blob *b = cd_net_blob(net, name);
    net->be->iface->upload(net->be, b->data, v, b->count * sizeof *v);
}

static void *sh_run(void *arg)
{
    sh_replica *r = arg;
    int batch = r->g ? SH_BATCH / SH_RANKS : SH_BATCH, first = r->g ? r->rank * batch : 0;
    cd_backend_t *be = cd_backend_cpu_new(1);
    if (!be || (r->g && cd_be_join_local_group(be, r->g, r->rank) != CD_OK)) {
        snprintf(r->err, sizeof r->err, "replica %d: no CPU backend in the group", r->rank);
        cd_backend_free(be);
        return NULL;
    }
    cd_net *net = shared_net(be, batch);
    if (!net) {
        snprintf(r->err, sizeof r->err, "replica %d: the net does not build", r->rank);
        cd_backend_free(be);
        return NULL;
    }
    cd_layer *la = cd_net_layer(net, "ip_a"), *lb = cd_net_layer(net, "ip_b");
    be->iface->upload(be, la->params[0]->data, r->in->w, sizeof r->in->w);
    be->iface->upload(be, la->params[1]->data, r->in->ba, sizeof r->in->ba);
    be->iface->upload(be, lb->params[1]->data, r->in->bb, sizeof r->in->bb);
    upload_blob(net, "a", r->in->a + first * SH_IN);
    upload_blob(net, "b", r->in->b + first * SH_IN);
    upload_blob(net, "label", r->in->label + first);
    cd_grad_reduce reduce;
    cd_grad_reduce_init(&reduce, net, 1e-9); /* a bucket per layer with parameters */
    cd_net_zero_grad(net);
    cd_grad_reduce_arm(&reduce);
    cd_net_forward(net);
    cd_net_backward(net);
    r->ok = cd_grad_reduce_finish(&reduce, r->err, sizeof r->err) == CD_OK;
    cd_grad_reduce_free(&reduce);
    cd_solver_opts o;
    memset(&o, 0, sizeof o);
    cd_solver_opts_defaults(&o, CD_SOLVER_SGD, 0.5);
    cd_solver_step(net, &o, 0);
    be->iface->download(be, r->w, la->params[0]->data, sizeof r->w);
    cd_net_free(net);
    cd_backend_free(be);
    return NULL;
}

static void test_shared(void)
{
    /* the plan: the shared weight lies in exactly one bucket, started after its owner
     * ip_a (the last of its users in the backward pass) */
    cd_net *plan_only = shared_net(NULL, SH_BATCH);
    if (plan_only) {
        cd_layer *la = cd_net_layer(plan_only, "ip_a"), *lb = cd_net_layer(plan_only, "ip_b");
        int owner = -1;
        for (int i = 0; i < plan_only->nlayers; i++)
            if (plan_only->layers[i] == la)
                owner = i;
        const cd_param *w = la->params[0];
        CHECK(lb->params[0] == w && plan_only->nparams == 3, "ip_b uses ip_a's weight (%d tensors, want 3)",
              plan_only->nparams);
        static const double sizes[] = {1e-9, 0.0001, 0.01, 0};
        for (size_t s = 0; s < CD_ARRAY_LEN(sizes); s++) {
            cd_grad_reduce r;
            cd_grad_reduce_init(&r, plan_only, sizes[s]);
            /* the buckets tile the arena top down (check_plan's rule that a bucket starts at
             * its layer's lowest parameter holds only without sharing: ip_b's lowest is
             * ip_a's weight) */
            size_t top = plan_only->param_count;
            for (int k = 0; k < r.n; k++) {
                CHECK(r.buckets[k].hi == top && r.buckets[k].lo < top, "shared %g MiB: bucket %d is [%zu, %zu), "
                      "expected to end at %zu", sizes[s], k, r.buckets[k].lo, r.buckets[k].hi, top);
                top = r.buckets[k].lo;
            }
            CHECK(top == 0, "shared %g MiB: the buckets stop at float %zu, not 0", sizes[s], top);
            int holding = 0, after = -1;
            size_t covered = 0;
            for (int b = 0; b < r.n; b++) {
                size_t lo = r.buckets[b].lo > w->offset ? r.buckets[b].lo : w->offset;
                size_t hi = r.buckets[b].hi < w->offset + w->count ? r.buckets[b].hi : w->offset + w->count;
                if (lo < hi) {
                    holding++;
                    covered += hi - lo;
                    after = r.buckets[b].after_layer;
                }
            }
            CHECK(holding == 1 && covered == w->count && after >= 0 && after <= owner,
                  "shared %g MiB: the shared weight is in %d buckets (%zu of %zu floats), want one, started "
                  "after layer %d, not after its owner %d", sizes[s], holding, covered, w->count, after, owner);
            if (sizes[s] == 1e-9)
                CHECK(r.n == 2 && after == owner, "shared: a bucket per layer with parameters (%d, want 2), "
                      "the shared weight's after ip_a (%d)", r.n, after);
            cd_grad_reduce_free(&r);
        }
        cd_net_free(plan_only);
    }

    static sh_inputs in;
    for (size_t i = 0; i < CD_ARRAY_LEN(in.w); i++)
        in.w[i] = (float)cd_test_uniform(-1, 1);
    for (int i = 0; i < SH_OUT; i++) {
        in.ba[i] = (float)cd_test_uniform(-0.5, 0.5);
        in.bb[i] = (float)cd_test_uniform(-0.5, 0.5);
    }
    for (size_t i = 0; i < CD_ARRAY_LEN(in.a); i++) {
        in.a[i] = (float)cd_test_uniform(-2, 2);
        in.b[i] = (float)cd_test_uniform(-2, 2);
    }
    for (int i = 0; i < SH_BATCH; i++)
        in.label[i] = (float)(cd_test_rand_u64() % SH_OUT);

    static sh_replica alone, rep[SH_RANKS];
    alone = (sh_replica){.in = &in};
    sh_run(&alone);
    CHECK(alone.ok, "shared: one replica: %s", alone.err);
    cd_group_t *g = cd_group_new(SH_RANKS);
    CHECK(g != NULL, "a group of %d", SH_RANKS);
    if (!g)
        return;
    pthread_t th[SH_RANKS];
    for (int r = 0; r < SH_RANKS; r++) {
        rep[r] = (sh_replica){.in = &in, .g = g, .rank = r};
        CHECK(pthread_create(&th[r], NULL, sh_run, &rep[r]) == 0, "thread %d", r);
    }
    for (int r = 0; r < SH_RANKS; r++)
        pthread_join(th[r], NULL);
    cd_group_free(g);
    double worst = 0, moved = 0;
    int bad = 0;
    for (int r = 0; r < SH_RANKS; r++) {
        CHECK(rep[r].ok, "shared: replica %d: %s", r, rep[r].err);
        for (size_t i = 0; i < CD_ARRAY_LEN(in.w); i++) {
            double want = alone.w[i], err = fabs(rep[r].w[i] - want);
            worst = fmax(worst, err);
            moved = fmax(moved, fabs(want - in.w[i]));
            if (!(err <= 1e-5 * (1 + fabs(want))) && bad++ < 3)
                CHECK(0, "shared: replica %d's weight[%zu] = %.9g after the step, one replica's %.9g "
                      "(started at %.9g)", r, i, rep[r].w[i], want, in.w[i]);
        }
    }
    CHECK(!bad, "shared: two replicas on half batches take one replica's step on the whole batch");
    CHECK(moved > 1e-3, "shared: the step moved the weight only %g", moved);
    printf("shared weight, %d replicas: worst difference %.3g, step up to %.3g\n", SH_RANKS, worst, moved);
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
    test_shared();
    return cd_test_finish();
}
