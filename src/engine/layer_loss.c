/* Softmax, SoftmaxWithLoss, Accuracy and ContrastiveLoss. The scalar results (loss, accuracy) are
 * read back to the host once per forward: they are what training reports. */
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

typedef struct axis_view {
    int outer, channels, inner;
} axis_view;

static int view_axis(const cd_layer *l, const cd_blob *b, int axis, axis_view *v, char *err,
                     size_t errlen)
{
    if (axis < 0)
        axis += b->ndim;
    if (axis < 0 || axis >= b->ndim)
        return cd_layer_error(l, err, errlen, "axis %d is outside the %d-D bottom %s", axis, b->ndim,
                              b->name);
    v->outer = (int)cd_dims_count(b->dims, 0, axis);
    v->channels = b->dims[axis];
    v->inner = (int)cd_dims_count(b->dims, axis + 1, b->ndim);
    return CD_OK;
}

static int check_labels(const cd_layer *l, const axis_view *v, char *err, size_t errlen)
{
    const cd_blob *label = l->bottom[1];
    char s[64];
    if (label->count != (size_t)v->outer * v->inner)
        return cd_layer_error(l, err, errlen, "label %s has %zu values (%s) but %s needs %d",
                              label->name, label->count, cd_blob_shape_str(label, s, sizeof s),
                              l->bottom[0]->name, v->outer * v->inner);
    return CD_OK;
}

/* ---- Softmax ------------------------------------------------------------------------ */

static int softmax_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    axis_view *v = cd_xcalloc(1, sizeof *v);
    l->priv = v;
    int axis = l->param ? (int)cd_pt_int(l->param, "axis", 1) : 1;
    if (view_axis(l, l->bottom[0], axis, v, err, errlen) != CD_OK)
        return CD_ERR;
    cd_blob_set_shape(l->top[0], l->bottom[0]->ndim, l->bottom[0]->dims);
    return CD_OK;
}

static void softmax_forward(cd_net *net, cd_layer *l)
{
    axis_view *v = l->priv;
    OPS(net)->softmax_forward(BE(net), v->outer, v->channels, v->inner, l->bottom[0]->data,
                              l->top[0]->data);
}

static void softmax_backward(cd_net *net, cd_layer *l)
{
    axis_view *v = l->priv;
    if (l->bottom[0]->need_backward)
        OPS(net)->softmax_backward(BE(net), v->outer, v->channels, v->inner, l->top[0]->data,
                                   l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- SoftmaxWithLoss --------------------------------------------------------------- */

enum { NORM_FULL, NORM_VALID, NORM_BATCH_SIZE, NORM_NONE };

typedef struct swl_priv {
    axis_view v;
    int has_ignore, ignore_label;
    int norm;
    float *prob;    /* the second top, or a buffer */
    float *scalars; /* device: loss sum, count */
    float normalizer;
    int dynamic;    /* the normalizer is the count of used labels (VALID with ignore_label) */
} swl_priv;

static int swl_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    static const struct { const char *name; int norm; } norms[] = {
        {"FULL", NORM_FULL}, {"VALID", NORM_VALID}, {"BATCH_SIZE", NORM_BATCH_SIZE}, {"NONE", NORM_NONE}};
    swl_priv *s = cd_xcalloc(1, sizeof *s);
    l->priv = s;
    int axis = l->param ? (int)cd_pt_int(l->param, "axis", 1) : 1;
    if (view_axis(l, l->bottom[0], axis, &s->v, err, errlen) != CD_OK ||
        check_labels(l, &s->v, err, errlen) != CD_OK)
        return CD_ERR;
    const cd_pt_node *lp = l->def ? cd_pt_get(l->def, "loss_param") : NULL;
    s->norm = NORM_VALID;
    if (lp) {
        s->has_ignore = cd_pt_get(lp, "ignore_label") != NULL;
        s->ignore_label = (int)cd_pt_int(lp, "ignore_label", 0);
        if (cd_pt_get(lp, "normalization")) {
            const char *n = cd_pt_str(lp, "normalization", "VALID");
            for (size_t i = 0; i < CD_ARRAY_LEN(norms); i++)
                if (!strcmp(n, norms[i].name))
                    s->norm = norms[i].norm;
        } else if (cd_pt_get(lp, "normalize")) {
            s->norm = cd_pt_bool(lp, "normalize", 1) ? NORM_VALID : NORM_BATCH_SIZE;
        }
    }
    cd_blob_set_shape(l->top[0], 0, NULL);
    if (l->ntop > 1)
        cd_blob_set_shape(l->top[1], l->bottom[0]->ndim, l->bottom[0]->dims);
    /* without ignore_label every position counts, so VALID is FULL and the
     * normalizer is known now; otherwise it is read back each forward */
    switch (s->norm) {
    case NORM_FULL: s->normalizer = (float)s->v.outer * s->v.inner; break;
    case NORM_VALID:
        s->normalizer = (float)s->v.outer * s->v.inner;
        s->dynamic = s->has_ignore;
        break;
    case NORM_BATCH_SIZE: s->normalizer = (float)s->v.outer; break;
    default: s->normalizer = 1.0f; break;
    }
    if (s->normalizer < 1.0f)
        s->normalizer = 1.0f;
    if (s->dynamic)
        net->host_reads = 1;
    return CD_OK;
}

static int swl_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    swl_priv *s = l->priv;
    s->prob = l->ntop > 1 ? l->top[1]->data : cd_layer_buffer(net, l, l->bottom[0]->count);
    s->scalars = cd_layer_buffer(net, l, 2);
    if (!s->prob || !s->scalars)
        return cd_layer_error(l, err, errlen, "out of memory");
    return CD_OK;
}

static void swl_forward(cd_net *net, cd_layer *l)
{
    swl_priv *s = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    o->softmax_forward(be, s->v.outer, s->v.channels, s->v.inner, l->bottom[0]->data, s->prob);
    o->xent_forward(be, s->v.outer, s->v.channels, s->v.inner, s->prob, l->bottom[1]->data,
                    s->has_ignore, s->ignore_label, s->scalars, s->scalars + 1);
    if (s->dynamic) {
        float host[2];
        o->download(be, host, s->scalars, sizeof host);
        s->normalizer = host[1] < 1.0f ? 1.0f : host[1];
    }
    /* the loss stays on the device; cd_net_forward reads it after the pass */
    o->scale(be, 1, 1.0f / s->normalizer, s->scalars, l->top[0]->data);
}

static void swl_backward(cd_net *net, cd_layer *l)
{
    swl_priv *s = l->priv;
    if (!l->bottom[0]->need_backward)
        return;
    OPS(net)->xent_backward(BE(net), s->v.outer, s->v.channels, s->v.inner, s->prob,
                            l->bottom[1]->data, s->has_ignore, s->ignore_label,
                            l->loss_weight * net->loss_scale / s->normalizer, l->bottom[0]->diff);
}

/* ---- Accuracy ----------------------------------------------------------------------- */

typedef struct acc_priv {
    axis_view v;
    int top_k, has_ignore, ignore_label;
    float *scalars;
} acc_priv;

static int acc_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    acc_priv *a = cd_xcalloc(1, sizeof *a);
    l->priv = a;
    int axis = p ? (int)cd_pt_int(p, "axis", 1) : 1;
    if (view_axis(l, l->bottom[0], axis, &a->v, err, errlen) != CD_OK ||
        check_labels(l, &a->v, err, errlen) != CD_OK)
        return CD_ERR;
    a->top_k = p ? (int)cd_pt_int(p, "top_k", 1) : 1;
    if (a->top_k < 1 || a->top_k > a->v.channels)
        return cd_layer_error(l, err, errlen, "top_k %d must be between 1 and the %d classes",
                              a->top_k, a->v.channels);
    a->has_ignore = p && cd_pt_get(p, "ignore_label");
    a->ignore_label = p ? (int)cd_pt_int(p, "ignore_label", 0) : 0;
    if (a->has_ignore)
        net->host_reads = 1;
    cd_blob_set_shape(l->top[0], 0, NULL);
    return CD_OK;
}

static int acc_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    acc_priv *a = l->priv;
    a->scalars = cd_layer_buffer(net, l, 2);
    return a->scalars ? CD_OK : cd_layer_error(l, err, errlen, "out of memory");
}

static void acc_forward(cd_net *net, cd_layer *l)
{
    acc_priv *a = l->priv;
    const cd_backend_iface *o = OPS(net);
    o->accuracy(BE(net), a->v.outer, a->v.channels, a->v.inner, l->bottom[0]->data,
                l->bottom[1]->data, a->top_k, a->has_ignore, a->ignore_label, a->scalars,
                a->scalars + 1);
    float count = (float)a->v.outer * a->v.inner;
    if (a->has_ignore) {
        float host[2];
        o->download(BE(net), host, a->scalars, sizeof host);
        count = host[1];
    }
    o->scale(BE(net), 1, count > 0 ? 1.0f / count : 0.0f, a->scalars, l->top[0]->data);
}

/* ---- ContrastiveLoss (Caffe's, for Siamese nets) --------------------------------------
 * Bottoms a and b are (N, C) (any shape with N rows), y holds N labels; a label whose
 * integer part is not 0 marks a similar pair. With d the Euclidean distance of a row pair:
 *   loss = 1/(2N) sum( sim d^2 + dis max(margin - d, 0)^2 )   (legacy: max(margin - d^2, 0))
 * Composed of backend ops: per-row values are (N) vectors, the sums gemm products. */

typedef struct contrastive_priv {
    int n, c;
    float margin;
    int legacy;
    float *diff;   /* (N, C) a - b */
    float *sq;     /* (N, C) diff^2 */
    float *ones;   /* max(N, C) ones */
    float *dist_sq, *dist, *mdist, *hinge, *hinge_sq, *sim, *dis, *coef; /* (N) each */
} contrastive_priv;

static int contrastive_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    cd_blob *a = l->bottom[0], *b = l->bottom[1], *y = l->bottom[2];
    char sa[64], sb[64], sy[64];
    if (a->ndim < 1 || a->count != b->count || a->dims[0] != b->dims[0] || y->count != (size_t)a->dims[0])
        return cd_layer_error(l, err, errlen, "bottoms %s (%s), %s (%s) and %s (%s) must be two equal "
                              "(N, C) features and N labels", a->name, cd_blob_shape_str(a, sa, sizeof sa),
                              b->name, cd_blob_shape_str(b, sb, sizeof sb), y->name,
                              cd_blob_shape_str(y, sy, sizeof sy));
    contrastive_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    c->n = a->dims[0];
    c->c = (int)(a->count / (size_t)c->n);
    c->margin = l->param ? (float)cd_pt_float(l->param, "margin", 1.0) : 1.0f;
    c->legacy = l->param ? cd_pt_bool(l->param, "legacy_version", 0) : 0;
    cd_blob_set_shape(l->top[0], 0, NULL);
    return CD_OK;
}

static int contrastive_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    contrastive_priv *c = l->priv;
    size_t nc = (size_t)c->n * c->c, n = (size_t)c->n, wide = n > (size_t)c->c ? n : (size_t)c->c;
    float *buf = cd_layer_buffer(net, l, 2 * nc + wide + 8 * n);
    if (!buf)
        return cd_layer_error(l, err, errlen, "out of memory");
    c->diff = buf;
    c->sq = c->diff + nc;
    c->ones = c->sq + nc;
    float **rows[] = {&c->dist_sq, &c->dist, &c->mdist, &c->hinge, &c->hinge_sq, &c->sim, &c->dis,
                      &c->coef};
    for (size_t i = 0; i < CD_ARRAY_LEN(rows); i++)
        *rows[i] = c->ones + wide + i * n;
    OPS(net)->set(BE(net), wide, 1.0f, c->ones);
    return CD_OK;
}

static void contrastive_forward(cd_net *net, cd_layer *l)
{
    contrastive_priv *c = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t nc = (size_t)c->n * c->c, n = (size_t)c->n;
    o->scale(be, nc, 1.0f, l->bottom[0]->data, c->diff);
    o->axpy(be, nc, -1.0f, l->bottom[1]->data, c->diff);
    o->mul(be, nc, c->diff, c->diff, c->sq);
    o->gemm(be, 0, 0, c->n, 1, c->c, 1.0f, c->sq, c->ones, 0.0f, c->dist_sq);
    /* dis = [1 - y^2 > 0] = [(int)y == 0], sim = 1 - dis */
    o->power_forward(be, n, 2.0f, 1.0f, 0.0f, l->bottom[2]->data, c->coef);
    o->power_forward(be, n, 1.0f, -1.0f, 1.0f, c->coef, c->coef);
    o->act_backward(be, CD_ACT_RELU, 0.0f, n, c->coef, c->coef, c->ones, c->dis);
    o->power_forward(be, n, 1.0f, -1.0f, 1.0f, c->dis, c->sim);
    if (c->legacy) {
        o->power_forward(be, n, 1.0f, -1.0f, c->margin, c->dist_sq, c->mdist);
        o->act_forward(be, CD_ACT_RELU, 0.0f, n, c->mdist, c->hinge_sq);
    } else {
        o->power_forward(be, n, 0.5f, 1.0f, 0.0f, c->dist_sq, c->dist);
        o->power_forward(be, n, 1.0f, -1.0f, c->margin, c->dist, c->mdist);
        o->act_forward(be, CD_ACT_RELU, 0.0f, n, c->mdist, c->hinge);
        o->mul(be, n, c->hinge, c->hinge, c->hinge_sq);
    }
    float half_mean = 0.5f / (float)c->n;
    o->gemm(be, 0, 0, 1, 1, c->n, half_mean, c->sim, c->dist_sq, 0.0f, l->top[0]->data);
    o->gemm(be, 0, 0, 1, 1, c->n, half_mean, c->dis, c->hinge_sq, 1.0f, l->top[0]->data);
}

/* da = coef * diff per row, db = -da, with coef = s (similar) or -s g (dissimilar),
 * s = loss_weight / N and g = max(margin - d, 0) / (d + 1e-4) (legacy: [margin > d^2]),
 * as Caffe's backward. */
static void contrastive_backward(cd_net *net, cd_layer *l)
{
    contrastive_priv *c = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t nc = (size_t)c->n * c->c, n = (size_t)c->n;
    float s = l->loss_weight * net->loss_scale / (float)c->n;
    if (c->legacy) {
        o->act_backward(be, CD_ACT_RELU, 0.0f, n, c->mdist, c->mdist, c->ones, c->coef);
    } else {
        o->power_forward(be, n, -1.0f, 1.0f, 1e-4f, c->dist, c->coef);
        o->mul(be, n, c->hinge, c->coef, c->coef);
    }
    o->mul(be, n, c->dis, c->coef, c->coef);
    o->axpby(be, n, s, c->sim, -s, c->coef);
    for (int i = 0; i < 2; i++) {
        cd_blob *x = l->bottom[i];
        if (!x->need_backward)
            continue;
        o->channel_affine(be, 1, c->n, c->c, c->diff, c->coef, NULL, x->diff);
        if (i == 1)
            o->scale(be, nc, -1.0f, x->diff, x->diff);
    }
}

const cd_layer_type cd_layers_loss[] = {
    {.name = "Softmax", .param_field = "softmax_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = softmax_setup, .forward = softmax_forward,
     .backward = softmax_backward},
    {.name = "SoftmaxWithLoss", .param_field = "softmax_param", .min_bottoms = 2, .max_bottoms = 2,
     .min_tops = 1, .max_tops = 2, .flags = CD_LAYER_LOSS | CD_LAYER_SCALAR, .setup = swl_setup, .init = swl_init,
     .forward = swl_forward, .backward = swl_backward},
    {.name = "Accuracy", .param_field = "accuracy_param", .min_bottoms = 2, .max_bottoms = 2,
     .min_tops = 1, .max_tops = 1, .flags = CD_LAYER_SCALAR, .setup = acc_setup, .init = acc_init, .forward = acc_forward},
    {.name = "ContrastiveLoss", .param_field = "contrastive_loss_param", .min_bottoms = 3,
     .max_bottoms = 3, .min_tops = 1, .max_tops = 1, .flags = CD_LAYER_LOSS | CD_LAYER_SCALAR,
     .setup = contrastive_setup, .init = contrastive_init, .forward = contrastive_forward,
     .backward = contrastive_backward},
    {.name = NULL},
};
