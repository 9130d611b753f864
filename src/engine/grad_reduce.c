/*
 * Data parallelism's gradient averaging, in buckets overlapped with the backward pass.
 *
 * A net's parameters lie in its gradient arena in the order of its layers, and the
 * backward pass runs the layers in reverse, so the gradients that are final after layer
 * i are one range at the top of the arena. The plan cuts that order into buckets of
 * about bucket_mb MiB (the first at most 1 MiB, so the first average starts early) and
 * starts each bucket's average (allreduce_start) right after the layer that completes
 * it; the backend runs it beside the rest of the backward. cd_grad_reduce_finish joins
 * them before the solver reads the gradients. Every replica makes the same plan from
 * the same net, so the ranks issue the same averages in the same order. A bucket size of
 * 0 asks for one average after the backward pass (no overlap).
 *
 * A parameter shared by several layers is averaged once, in the bucket of the first
 * layer using it (its owner), which the backward pass reaches after the others.
 *
 * Backends without allreduce_start average each bucket in place with allreduce_mean at
 * the same points (the CPU replicas): the same plan, the same result.
 */
#include "grad_reduce.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cdigits/util.h"

#define FIRST_BUCKET_BYTES ((size_t)1 << 20)

/* floats a parameter takes in the arena (tensors are padded to 16 floats) */
static size_t arena_span(const cd_param *p) { return (p->count + 15) & ~(size_t)15; }

/* Does layer i own p, i.e. is it the first layer using it? A parameter shared by several
 * layers (param { name }) lies in its owner's range, and the owner comes first in the
 * net, so its backward is the last to add to the gradient: only then is it final. */
static int owns(const cd_net *net, int i, const cd_param *p)
{
    for (int j = 0; j < i; j++)
        for (int k = 0; k < net->layers[j]->nparam; k++)
            if (net->layers[j]->params[k] == p)
                return 0;
    return 1;
}

/* The arena range [lo, hi) of the parameters layer i owns; *any 0 when it owns none;
 * 0 when they are not one range. */
static int layer_range(const cd_net *net, int i, size_t *lo, size_t *hi, int *any)
{
    const cd_layer *l = net->layers[i];
    *lo = SIZE_MAX;
    *hi = 0;
    *any = 0;
    size_t floats = 0;
    for (int k = 0; k < l->nparam; k++) {
        const cd_param *p = l->params[k];
        if (!owns(net, i, p))
            continue;
        *any = 1;
        if (p->offset < *lo)
            *lo = p->offset;
        if (p->offset + arena_span(p) > *hi)
            *hi = p->offset + arena_span(p);
        floats += arena_span(p);
    }
    return !*any || *hi - *lo == floats;
}

/* Buckets from the layers' ranges; 0 when the arena is not laid out in layer order. */
static int plan(cd_grad_reduce *r, const cd_net *net, double bucket_mb)
{
    size_t cap = (size_t)(bucket_mb * (double)(1 << 20) / sizeof(float));
    size_t first = FIRST_BUCKET_BYTES / sizeof(float);
    size_t limit = first < cap ? first : cap;
    if (limit < 1)
        limit = 1;
    size_t done = net->param_count, pending = net->param_count;
    for (int i = net->nlayers - 1; i >= 0 && done > 0; i--) {
        size_t lo, hi;
        int any;
        if (!layer_range(net, i, &lo, &hi, &any))
            return 0;
        if (!any)
            continue;
        if (hi != done)
            return 0;
        done = lo;
        if (pending - done >= limit || done == 0) {
            r->buckets[r->n++] = (cd_grad_bucket){.after_layer = i, .lo = done, .hi = pending};
            pending = done;
            limit = cap > 0 ? cap : 1;
        }
    }
    return done == 0;
}

void cd_grad_reduce_init(cd_grad_reduce *r, cd_net *net, double bucket_mb)
{
    *r = (cd_grad_reduce){.net = net};
    r->buckets = cd_xcalloc((size_t)net->nlayers + 1, sizeof *r->buckets);
    if (net->param_count > 0 && (bucket_mb <= 0 || !plan(r, net, bucket_mb))) {
        /* asked for, or not in layer order: one average of the whole arena after the
         * backward pass */
        r->n = 0;
        r->buckets[r->n++] = (cd_grad_bucket){.after_layer = 0, .lo = 0, .hi = net->param_count};
    }
    /* no backend: the net is not allocated yet */
    r->overlapped = net->be && cd_be_supports(net->be, CD_BE_OVERLAPPED_ALLREDUCE);
}

void cd_grad_reduce_free(cd_grad_reduce *r)
{
    free(r->buckets);
    r->buckets = NULL;
    r->n = 0;
}

static void after_backward(cd_net *net, int layer, void *ctx)
{
    cd_grad_reduce *r = ctx;
    cd_backend_t *be = net->be;
    while (r->next < r->n && r->buckets[r->next].after_layer == layer) {
        const cd_grad_bucket *b = &r->buckets[r->next++];
        float *x = net->arena_diff + b->lo;
        int rc = r->overlapped ? cd_be_allreduce_start(be, x, b->hi - b->lo)
                               : cd_be_allreduce_mean(be, x, b->hi - b->lo);
        if (rc != CD_OK)
            r->failed = 1;
    }
}

void cd_grad_reduce_arm(cd_grad_reduce *r)
{
    r->next = 0;
    r->failed = 0;
    r->net->after_backward = after_backward;
    r->net->after_backward_ctx = r;
}

int cd_grad_reduce_finish(cd_grad_reduce *r, char *err, size_t errlen)
{
    cd_backend_t *be = r->net->be;
    r->net->after_backward = NULL;
    r->net->after_backward_ctx = NULL;
    if (!r->failed && r->next != r->n) {
        snprintf(err, errlen, "only %d of %d gradient buckets were averaged", r->next, r->n);
        return CD_ERR;
    }
    if (r->failed || (r->overlapped && cd_be_allreduce_wait(be) != CD_OK)) {
        snprintf(err, errlen, "averaging the gradients across the replicas failed: %s", be->err);
        return CD_ERR;
    }
    return CD_OK;
}
