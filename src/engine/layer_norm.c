/* Normalization and affine layers: LRN, BatchNorm (Caffe's, with its stored moving
 * averages), Scale and Bias (per channel). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

/* (outer, channels, inner) view of a blob around axis 1 */
static void split_axis1(const cd_blob *b, int *outer, int *channels, int *inner)
{
    *outer = b->ndim > 0 ? b->dims[0] : 1;
    *channels = b->ndim > 1 ? b->dims[1] : 1;
    *inner = (int)(b->ndim > 2 ? cd_dims_count(b->dims, 2, b->ndim) : 1);
}

/* ---- LRN ----------------------------------------------------------------------------- */

static int lrn_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0];
    char s[64];
    if (x->ndim != 4)
        return cd_layer_error(l, err, errlen, "needs a 4-D bottom, got %s", cd_blob_shape_str(x, s, sizeof s));
    cd_lrn_desc *d = cd_xcalloc(1, sizeof *d);
    l->priv = d;
    d->mode = p && !strcmp(cd_pt_str(p, "norm_region", "ACROSS_CHANNELS"), "WITHIN_CHANNEL")
                  ? CD_LRN_WITHIN : CD_LRN_ACROSS;
    d->size = p ? (int)cd_pt_int(p, "local_size", 5) : 5;
    d->alpha = p ? (float)cd_pt_float(p, "alpha", 1.0) : 1.0f;
    d->beta = p ? (float)cd_pt_float(p, "beta", 0.75) : 0.75f;
    d->k = p ? (float)cd_pt_float(p, "k", 1.0) : 1.0f;
    if (d->size <= 0 || d->size % 2 == 0)
        return cd_layer_error(l, err, errlen, "local_size %d must be odd and positive", d->size);
    d->n = x->dims[0];
    d->c = x->dims[1];
    d->h = x->dims[2];
    d->w = x->dims[3];
    cd_blob_set_shape(l->top[0], 4, x->dims);
    return CD_OK;
}

static void lrn_forward(cd_net *net, cd_layer *l)
{
    OPS(net)->lrn_forward(BE(net), l->priv, l->bottom[0]->data, l->top[0]->data);
}

static void lrn_backward(cd_net *net, cd_layer *l)
{
    if (l->bottom[0]->need_backward)
        OPS(net)->lrn_backward(BE(net), l->priv, l->bottom[0]->data, l->top[0]->data,
                               l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- BatchNorm ---------------------------------------------------------------------- */

typedef struct bn_priv {
    int outer, channels, inner;
    int global;          /* use stored statistics */
    float maf, eps;
    float *mean, *var;   /* (channels) statistics used by the last forward */
    float *inv;          /* (1) 1 / stored factor */
} bn_priv;

static int bn_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    bn_priv *b = cd_xcalloc(1, sizeof *b);
    l->priv = b;
    split_axis1(l->bottom[0], &b->outer, &b->channels, &b->inner);
    b->global = p && cd_pt_get(p, "use_global_stats") ? cd_pt_bool(p, "use_global_stats", 0)
                                                       : !net->phase_train;
    b->maf = p ? (float)cd_pt_float(p, "moving_average_fraction", 0.999) : 0.999f;
    b->eps = p ? (float)cd_pt_float(p, "eps", 1e-5) : 1e-5f;
    if (b->outer * b->inner < 2 && !b->global)
        return cd_layer_error(l, err, errlen, "batch statistics need more than one value per "
                              "channel; raise the batch size or set use_global_stats");
    cd_blob_set_shape(l->top[0], l->bottom[0]->ndim, l->bottom[0]->dims);
    /* Caffe's three stored blobs: mean sum, variance sum, and their weight */
    int c = b->channels, one = 1;
    if (!cd_layer_add_param(net, l, 1, &c, NULL, 0.0f, 0, err, errlen) ||
        !cd_layer_add_param(net, l, 1, &c, NULL, 0.0f, 0, err, errlen) ||
        !cd_layer_add_param(net, l, 1, &one, NULL, 0.0f, 0, err, errlen))
        return CD_ERR;
    return CD_OK;
}

static int bn_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    bn_priv *b = l->priv;
    b->mean = cd_layer_buffer(net, l, (size_t)b->channels);
    b->var = cd_layer_buffer(net, l, (size_t)b->channels);
    b->inv = cd_layer_buffer(net, l, 1);
    if (!b->mean || !b->var || !b->inv)
        return cd_layer_error(l, err, errlen, "out of memory for statistics");
    return CD_OK;
}

static void bn_forward(cd_net *net, cd_layer *l)
{
    bn_priv *b = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t c = (size_t)b->channels;
    if (b->global) {
        /* mean = sums / factor on the device (no host read, so the step can be
         * captured): inv = (FLT_MIN + factor)^-1 is huge when factor is 0, where the
         * sums are 0 too, giving Caffe's 0 */
        o->power_forward(be, 1, -1.0f, 1.0f, FLT_MIN, l->params[2]->data, b->inv);
        o->channel_affine(be, b->channels, 1, 1, l->params[0]->data, b->inv, NULL, b->mean);
        o->channel_affine(be, b->channels, 1, 1, l->params[1]->data, b->inv, NULL, b->var);
    } else {
        o->bn_stats(be, b->outer, b->channels, b->inner, l->bottom[0]->data, b->mean, b->var);
        if (net->phase_train) {
            /* Caffe: factor = maf*factor + 1; sums = stat + maf*sums; the variance
             * sum takes the unbiased estimate */
            double m = (double)b->outer * b->inner;
            o->power_forward(be, 1, 1.0f, b->maf, 1.0f, l->params[2]->data, l->params[2]->data);
            o->axpby(be, c, 1.0f, b->mean, b->maf, l->params[0]->data);
            o->axpby(be, c, (float)(m > 1 ? m / (m - 1) : 1.0), b->var, b->maf, l->params[1]->data);
        }
    }
    o->bn_normalize(be, b->outer, b->channels, b->inner, l->bottom[0]->data, b->mean, b->var, b->eps,
                    l->top[0]->data);
}

static void bn_backward(cd_net *net, cd_layer *l)
{
    bn_priv *b = l->priv;
    if (l->bottom[0]->need_backward)
        OPS(net)->bn_backward(BE(net), b->outer, b->channels, b->inner, l->top[0]->data, b->var,
                              b->eps, b->global, l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- Scale and Bias (per channel, axis 1) -------------------------------------------- */

typedef struct affine_priv {
    int outer, channels, inner;
    int has_scale, has_bias;
} affine_priv;

static int affine_common(cd_net *net, cd_layer *l, int has_scale, int has_bias,
                         const cd_pt_node *scale_filler, const cd_pt_node *bias_filler,
                         char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    if (p && (cd_pt_int(p, "axis", 1) != 1 || cd_pt_int(p, "num_axes", 1) != 1))
        return cd_layer_error(l, err, errlen, "only axis 1 with num_axes 1 (one value per channel) "
                              "is supported");
    affine_priv *a = cd_xcalloc(1, sizeof *a);
    l->priv = a;
    split_axis1(l->bottom[0], &a->outer, &a->channels, &a->inner);
    a->has_scale = has_scale;
    a->has_bias = has_bias;
    cd_blob_set_shape(l->top[0], l->bottom[0]->ndim, l->bottom[0]->dims);
    int c = a->channels;
    if (has_scale && !cd_layer_add_param(net, l, 1, &c, scale_filler, 1.0f, 1, err, errlen))
        return CD_ERR;
    if (has_bias && !cd_layer_add_param(net, l, 1, &c, bias_filler, 0.0f, 1, err, errlen))
        return CD_ERR;
    return CD_OK;
}

static int scale_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    if (l->nbottom != 1)
        return cd_layer_error(l, err, errlen, "scaling by a second bottom is not supported");
    return affine_common(net, l, 1, p ? cd_pt_bool(p, "bias_term", 0) : 0,
                         p ? cd_pt_get(p, "filler") : NULL, p ? cd_pt_get(p, "bias_filler") : NULL,
                         err, errlen);
}

static int bias_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    return affine_common(net, l, 0, 1, NULL, p ? cd_pt_get(p, "filler") : NULL, err, errlen);
}

static void affine_forward(cd_net *net, cd_layer *l)
{
    affine_priv *a = l->priv;
    const float *gamma = a->has_scale ? l->params[0]->data : NULL;
    const float *beta = a->has_bias ? l->params[a->has_scale]->data : NULL;
    OPS(net)->channel_affine(BE(net), a->outer, a->channels, a->inner, l->bottom[0]->data, gamma,
                             beta, l->top[0]->data);
}

static void affine_backward(cd_net *net, cd_layer *l)
{
    affine_priv *a = l->priv;
    cd_blob *x = l->bottom[0], *y = l->top[0];
    float *dgamma = a->has_scale ? l->params[0]->diff : NULL;
    float *dbeta = a->has_bias ? l->params[a->has_scale]->diff : NULL;
    OPS(net)->channel_affine_grad(BE(net), a->outer, a->channels, a->inner, x->data, y->diff, dgamma,
                                  dbeta);
    if (!x->need_backward)
        return;
    if (a->has_scale)
        OPS(net)->channel_affine(BE(net), a->outer, a->channels, a->inner, y->diff,
                                 l->params[0]->data, NULL, x->diff);
    else
        OPS(net)->copy(BE(net), x->diff, y->diff, x->count * sizeof(float));
}

const cd_layer_type cd_layers_norm[] = {
    {.name = "LRN", .param_field = "lrn_param", .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1,
     .max_tops = 1, .setup = lrn_setup, .forward = lrn_forward, .backward = lrn_backward},
    {.name = "BatchNorm", .param_field = "batch_norm_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = bn_setup, .init = bn_init, .forward = bn_forward,
     .backward = bn_backward},
    {.name = "Scale", .param_field = "scale_param", .min_bottoms = 1, .max_bottoms = 2, .min_tops = 1,
     .max_tops = 1, .setup = scale_setup, .forward = affine_forward, .backward = affine_backward},
    {.name = "Bias", .param_field = "bias_param", .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1,
     .max_tops = 1, .setup = bias_setup, .forward = affine_forward, .backward = affine_backward},
    {.name = NULL},
};
