/* Convolution, Pooling and InnerProduct: the layers with spatial geometry or gemm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"
#include "layer_conv.h"

/* Read a spatial pair from Caffe's repeated field (1 or 2 values) or its _h/_w
 * variants. Returns CD_OK, or CD_ERR with a message. */
static int read_pair(const cd_layer *l, const cd_pt_node *p, const char *field, int def,
                     int *h, int *w, char *err, size_t errlen)
{
    char hn[64], wn[64];
    snprintf(hn, sizeof hn, "%s_h", field);
    snprintf(wn, sizeof wn, "%s_w", field);
    if (!strcmp(field, "kernel_size")) {
        snprintf(hn, sizeof hn, "kernel_h");
        snprintf(wn, sizeof wn, "kernel_w");
    }
    int n = p ? cd_pt_count(p, field) : 0;
    int has_hw = p && (cd_pt_get(p, hn) || cd_pt_get(p, wn));
    if (n > 0 && has_hw)
        return cd_layer_error(l, err, errlen, "give either %s or %s/%s, not both", field, hn, wn);
    if (n > 2)
        return cd_layer_error(l, err, errlen, "%s has %d values; give 1 or 2", field, n);
    if (n > 0) {
        *h = (int)strtol(cd_pt_nth(p, field, 0)->text, NULL, 10);
        *w = n > 1 ? (int)strtol(cd_pt_nth(p, field, 1)->text, NULL, 10) : *h;
    } else if (has_hw) {
        if (!cd_pt_get(p, hn) || !cd_pt_get(p, wn))
            return cd_layer_error(l, err, errlen, "give both %s and %s", hn, wn);
        *h = (int)cd_pt_int(p, hn, def);
        *w = (int)cd_pt_int(p, wn, def);
    } else {
        *h = *w = def;
    }
    return CD_OK;
}

static int need_4d(const cd_layer *l, const cd_blob *b, char *err, size_t errlen)
{
    char s[64];
    if (b->ndim != 4)
        return cd_layer_error(l, err, errlen, "needs a 4-D (NxCxHxW) bottom, got %s from %s",
                              cd_blob_shape_str(b, s, sizeof s), b->name);
    return CD_OK;
}

/* ---- Convolution ---------------------------------------------------------------- */

/* Read convolution_param into d's k (num_output), kh/kw, sh/sw, ph/pw, dh/dw and group,
 * and *bias: the geometry Convolution and Deconvolution share. Checks what needs no
 * bottom shape beyond its being 4-D. CD_OK, or CD_ERR with a message. */
int cd_conv_param_read(const cd_layer *l, cd_conv_desc *d, int *bias, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    if (!p || !cd_pt_get(p, "num_output"))
        return cd_layer_error(l, err, errlen, "convolution_param { num_output } is required");
    if (need_4d(l, l->bottom[0], err, errlen) != CD_OK)
        return CD_ERR;
    if (cd_pt_int(p, "axis", 1) != 1)
        return cd_layer_error(l, err, errlen, "only axis 1 (channels) is supported");
    d->k = (int)cd_pt_int(p, "num_output", 0);
    d->group = (int)cd_pt_int(p, "group", 1);
    *bias = cd_pt_bool(p, "bias_term", 1);
    if (read_pair(l, p, "kernel_size", 0, &d->kh, &d->kw, err, errlen) ||
        read_pair(l, p, "stride", 1, &d->sh, &d->sw, err, errlen) ||
        read_pair(l, p, "pad", 0, &d->ph, &d->pw, err, errlen) ||
        read_pair(l, p, "dilation", 1, &d->dh, &d->dw, err, errlen))
        return CD_ERR;
    if (d->k <= 0)
        return cd_layer_error(l, err, errlen, "num_output is %d; it must be positive", d->k);
    if (d->kh <= 0 || d->kw <= 0)
        return cd_layer_error(l, err, errlen, "kernel_size is required and must be positive");
    if (d->sh <= 0 || d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->ph < 0 || d->pw < 0)
        return cd_layer_error(l, err, errlen, "stride and dilation must be positive and pad not negative");
    if (d->group <= 0)
        return cd_layer_error(l, err, errlen, "group is %d; it must be positive", d->group);
    return CD_OK;
}

cd_conv_priv *cd_conv_priv_read(cd_layer *l, int transposed, char *err, size_t errlen)
{
    const cd_blob *x = l->bottom[0];
    cd_conv_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    cd_conv_desc *d = &c->d;
    if (cd_conv_param_read(l, d, &c->bias, err, errlen) != CD_OK)
        return NULL;
    int in = x->dims[1], out = d->k;
    d->n = x->dims[0];
    if (transposed) {
        d->k = in;
        d->c = out;
        d->oh = x->dims[2];
        d->ow = x->dims[3];
    } else {
        d->c = in;
        d->h = x->dims[2];
        d->w = x->dims[3];
    }
    if (in % d->group || out % d->group) {
        cd_layer_error(l, err, errlen, "group %d must divide both the %d input channels and "
                       "num_output %d", d->group, in, out);
        return NULL;
    }
    return c;
}

int cd_conv_top_params(cd_net *net, cd_layer *l, const cd_conv_priv *c, const int ydims[4],
                       char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    const cd_conv_desc *d = &c->d;
    cd_blob_set_shape(l->top[0], 4, ydims);
    int wdims[4] = {d->k, d->c / d->group, d->kh, d->kw};
    if (!cd_layer_add_param(net, l, 4, wdims, cd_pt_get(p, "weight_filler"), 0.0f, 1, err, errlen))
        return CD_ERR;
    if (c->bias && !cd_layer_add_param(net, l, 1, &ydims[1], cd_pt_get(p, "bias_filler"), 0.0f, 1, err, errlen))
        return CD_ERR;
    return CD_OK;
}

static int conv_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    cd_conv_priv *c = cd_conv_priv_read(l, 0, err, errlen);
    if (!c)
        return CD_ERR;
    cd_conv_desc *d = &c->d;
    int ekh = d->dh * (d->kh - 1) + 1, ekw = d->dw * (d->kw - 1) + 1;
    if (ekh > d->h + 2 * d->ph || ekw > d->w + 2 * d->pw)
        return cd_layer_error(l, err, errlen, "kernel_size %dx%d%s is larger than its %dx%d input "
                              "(padded to %dx%d); lower kernel_size or raise pad",
                              d->kh, d->kw, d->dh > 1 || d->dw > 1 ? " (dilated)" : "", d->h, d->w,
                              d->h + 2 * d->ph, d->w + 2 * d->pw);
    d->oh = (d->h + 2 * d->ph - ekh) / d->sh + 1;
    d->ow = (d->w + 2 * d->pw - ekw) / d->sw + 1;
    int ydims[4] = {d->n, d->k, d->oh, d->ow};
    return cd_conv_top_params(net, l, c, ydims, err, errlen);
}

static void conv_forward(cd_net *net, cd_layer *l)
{
    cd_conv_priv *c = l->priv;
    OPS(net)->conv_forward(BE(net), &c->d, l->bottom[0]->data, l->params[0]->data,
                           c->bias ? l->params[1]->data : NULL, l->top[0]->data);
}

static void conv_backward(cd_net *net, cd_layer *l)
{
    cd_conv_priv *c = l->priv;
    cd_param *w = l->params[0], *b = c->bias ? l->params[1] : NULL;
    if (w->lr_mult != 0 || (b && b->lr_mult != 0) || net->opts.force_backward)
        OPS(net)->conv_backward_filter(BE(net), &c->d, l->bottom[0]->data, l->top[0]->diff, w->diff,
                                       b ? b->diff : NULL);
    if (l->bottom[0]->need_backward)
        OPS(net)->conv_backward_data(BE(net), &c->d, w->data, l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- Pooling --------------------------------------------------------------------- */

static int pool_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0];
    if (need_4d(l, x, err, errlen) != CD_OK)
        return CD_ERR;
    cd_pool_priv *pp = cd_xcalloc(1, sizeof *pp);
    l->priv = pp;
    cd_pool_desc *d = &pp->d;
    static const struct { const char *name; int mode; } modes[] = {{"MAX", CD_POOL_MAX}, {"AVE", CD_POOL_AVE}};
    const char *pool = p ? cd_pt_str(p, "pool", "MAX") : "MAX";
    d->mode = -1;
    for (size_t i = 0; i < CD_ARRAY_LEN(modes); i++)
        if (!strcmp(pool, modes[i].name))
            d->mode = modes[i].mode;
    if (d->mode < 0)
        return cd_layer_error(l, err, errlen, "pool %s is not supported; use MAX or AVE", pool);
    d->n = x->dims[0];
    d->c = x->dims[1];
    d->h = x->dims[2];
    d->w = x->dims[3];
    int global = p && cd_pt_bool(p, "global_pooling", 0);
    if (global) {
        if (p && (cd_pt_get(p, "kernel_size") || cd_pt_get(p, "kernel_h")))
            return cd_layer_error(l, err, errlen, "global_pooling takes no kernel_size; remove it");
        d->kh = d->h;
        d->kw = d->w;
        d->sh = d->sw = 1;
        d->ph = d->pw = 0;
    } else if (read_pair(l, p, "kernel_size", 0, &d->kh, &d->kw, err, errlen) ||
               read_pair(l, p, "stride", 1, &d->sh, &d->sw, err, errlen) ||
               read_pair(l, p, "pad", 0, &d->ph, &d->pw, err, errlen)) {
        return CD_ERR;
    }
    if (d->kh <= 0 || d->kw <= 0)
        return cd_layer_error(l, err, errlen, "kernel_size is required (or global_pooling: true)");
    if (d->sh <= 0 || d->sw <= 0 || d->ph < 0 || d->pw < 0)
        return cd_layer_error(l, err, errlen, "stride must be positive and pad not negative");
    if (d->ph >= d->kh || d->pw >= d->kw)
        return cd_layer_error(l, err, errlen, "pad %dx%d must be smaller than kernel_size %dx%d",
                              d->ph, d->pw, d->kh, d->kw);
    if (d->kh > d->h + 2 * d->ph || d->kw > d->w + 2 * d->pw)
        return cd_layer_error(l, err, errlen, "kernel_size %dx%d is larger than its %dx%d input; "
                              "lower kernel_size or use global_pooling", d->kh, d->kw, d->h, d->w);
    int floor_mode = p && !strcmp(cd_pt_str(p, "round_mode", "CEIL"), "FLOOR");
    d->oh = cd_pool_out(d->h, d->kh, d->sh, d->ph, floor_mode);
    d->ow = cd_pool_out(d->w, d->kw, d->sw, d->pw, floor_mode);
    int ydims[4] = {d->n, d->c, d->oh, d->ow};
    cd_blob_set_shape(l->top[0], 4, ydims);
    return CD_OK;
}

int cd_pool_out(int in, int kernel, int stride, int pad, int floor_mode)
{
    if (floor_mode)
        return (in + 2 * pad - kernel) / stride + 1;
    /* Caffe: ceil, then make sure the last window starts inside the padded image */
    int out = (int)ceil((double)(in + 2 * pad - kernel) / stride) + 1;
    if (pad && (out - 1) * stride >= in + pad)
        out--;
    return out;
}

static int pool_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    cd_pool_priv *pp = l->priv;
    size_t n = net->phase_train ? cd_be_pool_mask_size(BE(net), &pp->d) : 0;
    pp->mask = n ? cd_layer_buffer(net, l, n) : NULL;
    if (n && !pp->mask)
        return cd_layer_error(l, err, errlen, "out of memory for the pooling mask");
    return CD_OK;
}

static void pool_forward(cd_net *net, cd_layer *l)
{
    cd_pool_priv *pp = l->priv;
    OPS(net)->pool_forward(BE(net), &pp->d, l->bottom[0]->data, l->top[0]->data, pp->mask);
}

static void pool_backward(cd_net *net, cd_layer *l)
{
    cd_pool_priv *pp = l->priv;
    if (l->bottom[0]->need_backward)
        OPS(net)->pool_backward(BE(net), &pp->d, l->bottom[0]->data, l->top[0]->data, pp->mask,
                                l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- InnerProduct ------------------------------------------------------------------ */

typedef struct ip_priv {
    int m, n, k; /* x (m,k) . W^T (k,n) = y (m,n) */
    int bias;
} ip_priv;

static int ip_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0];
    int axis = p ? (int)cd_pt_int(p, "axis", 1) : 1;
    if (axis < 0)
        axis += x->ndim;
    if (axis < 1 || axis > x->ndim)
        return cd_layer_error(l, err, errlen, "axis %d is outside the %d-D bottom", axis, x->ndim);
    if (p && cd_pt_bool(p, "transpose", 0))
        return cd_layer_error(l, err, errlen, "transpose: true is not supported; remove it");
    int n = p ? (int)cd_pt_int(p, "num_output", 0) : 0;
    if (!p || !cd_pt_get(p, "num_output")) {
        if (net->opts.num_classes <= 0)
            return cd_layer_error(l, err, errlen, "has no num_output and the number of classes is "
                                  "unknown; set num_output or give the class count (--classes N)");
        n = net->opts.num_classes; /* DIGITS: the last InnerProduct gets the class count */
    }
    if (n <= 0)
        return cd_layer_error(l, err, errlen, "num_output is %d; it must be positive", n);
    ip_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    c->m = (int)cd_dims_count(x->dims, 0, axis);
    c->k = (int)cd_dims_count(x->dims, axis, x->ndim);
    c->n = n;
    c->bias = p ? cd_pt_bool(p, "bias_term", 1) : 1;
    int ydims[CD_MAX_DIMS];
    for (int i = 0; i < axis; i++)
        ydims[i] = x->dims[i];
    ydims[axis] = n;
    cd_blob_set_shape(l->top[0], axis + 1, ydims);
    int wdims[2] = {n, c->k};
    if (!cd_layer_add_param(net, l, 2, wdims, p ? cd_pt_get(p, "weight_filler") : NULL, 0.0f, 1, err, errlen))
        return CD_ERR;
    if (c->bias && !cd_layer_add_param(net, l, 1, &n, p ? cd_pt_get(p, "bias_filler") : NULL, 0.0f, 1,
                                       err, errlen))
        return CD_ERR;
    return CD_OK;
}

static void ip_forward(cd_net *net, cd_layer *l)
{
    ip_priv *c = l->priv;
    float *y = l->top[0]->data;
    /* y (m,n) = x (m,k) . W^T ; W is (n,k) */
    OPS(net)->gemm(BE(net), 0, 1, c->m, c->n, c->k, 1.0f, l->bottom[0]->data, l->params[0]->data, 0.0f, y);
    if (c->bias)
        OPS(net)->channel_affine(BE(net), c->m, c->n, 1, y, NULL, l->params[1]->data, y);
}

static void ip_backward(cd_net *net, cd_layer *l)
{
    ip_priv *c = l->priv;
    const float *dy = l->top[0]->diff;
    /* dW (n,k) += dy^T (n,m) . x (m,k) */
    OPS(net)->gemm(BE(net), 1, 0, c->n, c->k, c->m, 1.0f, dy, l->bottom[0]->data, 1.0f, l->params[0]->diff);
    if (c->bias)
        OPS(net)->channel_affine_grad(BE(net), c->m, c->n, 1, NULL, dy, NULL, l->params[1]->diff);
    /* dx (m,k) = dy (m,n) . W (n,k) */
    if (l->bottom[0]->need_backward)
        OPS(net)->gemm(BE(net), 0, 0, c->m, c->k, c->n, 1.0f, dy, l->params[0]->data, 0.0f,
                       l->bottom[0]->diff);
}

const cd_layer_type cd_layers_conv[] = {
    {.name = "Convolution", .param_field = "convolution_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = conv_setup, .forward = conv_forward,
     .backward = conv_backward},
    {.name = "Pooling", .param_field = "pooling_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = pool_setup, .init = pool_init, .forward = pool_forward,
     .backward = pool_backward},
    {.name = "InnerProduct", .param_field = "inner_product_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = ip_setup, .forward = ip_forward, .backward = ip_backward},
    {.name = NULL},
};
