/* Data parallelism's gradient averaging in buckets overlapped with the backward pass
 * (grad_reduce.c). */
#ifndef CDIGITS_GRAD_REDUCE_H
#define CDIGITS_GRAD_REDUCE_H

#include <stddef.h>

#include "cdigits/net.h"

typedef struct cd_grad_bucket {
    int after_layer; /* started once this layer's backward is done */
    size_t lo, hi;   /* its floats of the gradient arena */
} cd_grad_bucket;

typedef struct cd_grad_reduce {
    cd_net *net;
    cd_grad_bucket *buckets; /* in the order they are started */
    int n;
    int next;       /* the next bucket to start in this backward pass */
    int overlapped; /* the backend runs averages beside the backward */
    int failed;
} cd_grad_reduce;

/* Plans the buckets of net's gradients (to run, net must be allocated on a backend in a
 * group; the plan itself needs only the built net). */
void cd_grad_reduce_init(cd_grad_reduce *r, cd_net *net, double bucket_mb);
void cd_grad_reduce_free(cd_grad_reduce *r);
/* The next cd_net_backward starts the buckets' averages as it goes. */
void cd_grad_reduce_arm(cd_grad_reduce *r);
/* After that backward: every bucket started and joined (CD_OK), or the reason. */
int cd_grad_reduce_finish(cd_grad_reduce *r, char *err, size_t errlen);

#endif
