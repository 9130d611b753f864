/* Losses for regression targets: EuclideanLoss. Like the classification losses its
 * scalar stays on the device; cd_net_forward reads it after the pass. */
#include <stdlib.h>

#include "cdigits/util.h"
#include "engine_internal.h"

/* ---- EuclideanLoss ------------------------------------------------------------------ */

/* loss = 1/(2N) sum (a - b)^2 over two bottoms of N items each with the same count per
 * item (Caffe checks count(1) only, so the shapes past the first axis may differ). */
typedef struct euclid_priv {
    float *diff; /* a - b, kept from forward for backward */
    int num;     /* N, the first axis */
} euclid_priv;

int cd_loss_pair_setup(cd_layer *l, int *num, char *err, size_t errlen)
{
    const cd_blob *a = l->bottom[0], *b = l->bottom[1];
    char sa[64], sb[64];
    if (a->ndim < 1 || b->ndim < 1 || a->dims[0] != b->dims[0])
        return cd_layer_error(l, err, errlen,
                              "%s (%s) and %s (%s) must have the same first dimension (the batch)",
                              a->name, cd_blob_shape_str(a, sa, sizeof sa), b->name,
                              cd_blob_shape_str(b, sb, sizeof sb));
    if (a->count != b->count)
        return cd_layer_error(l, err, errlen,
                              "%s (%s) and %s (%s) must have the same number of values per item; "
                              "reshape one of them",
                              a->name, cd_blob_shape_str(a, sa, sizeof sa), b->name,
                              cd_blob_shape_str(b, sb, sizeof sb));
    *num = a->dims[0] > 0 ? a->dims[0] : 1;
    cd_blob_set_shape(l->top[0], 0, NULL);
    return CD_OK;
}

static int euclid_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    (void)net;
    euclid_priv *e = cd_xcalloc(1, sizeof *e);
    l->priv = e;
    return cd_loss_pair_setup(l, &e->num, err, errlen);
}

static int euclid_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    euclid_priv *e = l->priv;
    return cd_layer_buffer_init(net, l, l->bottom[0]->count, &e->diff, err, errlen);
}

static void euclid_forward(cd_net *net, cd_layer *l)
{
    euclid_priv *e = l->priv;
    size_t n = l->bottom[0]->count;
    /* diff = a - b; top = diff . diff / (2N) as a 1x1 product, so it stays on the device */
    OPS(net)->copy(BE(net), e->diff, l->bottom[0]->data, n * sizeof(float));
    OPS(net)->axpy(BE(net), n, -1.0f, l->bottom[1]->data, e->diff);
    OPS(net)->gemm(BE(net), 0, 1, 1, 1, (int)n, 0.5f / (float)e->num, e->diff, e->diff, 0.0f,
                   l->top[0]->data);
}

static void euclid_backward(cd_net *net, cd_layer *l)
{
    euclid_priv *e = l->priv;
    float alpha = l->loss_weight * net->loss_scale / (float)e->num;
    size_t n = l->bottom[0]->count;
    /* d/da = diff / N, d/db = -diff / N, each times the loss weight */
    for (int i = 0; i < 2; i++)
        if (l->bottom[i]->need_backward)
            OPS(net)->scale(BE(net), n, i == 0 ? alpha : -alpha, e->diff, l->bottom[i]->diff);
}

const cd_layer_type cd_layers_regress[] = {
    {.name = "EuclideanLoss", .param_field = NULL, .min_bottoms = 2, .max_bottoms = 2,
     .min_tops = 1, .max_tops = 1, .flags = CD_LAYER_LOSS | CD_LAYER_SCALAR,
     .setup = euclid_setup, .init = euclid_init, .forward = euclid_forward,
     .backward = euclid_backward},
    {.name = NULL},
};
