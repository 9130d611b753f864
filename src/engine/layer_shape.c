/* Layers that move or combine blobs: Concat, Slice, Flatten, Split (inserted by the
 * engine for blobs read by several layers) and Eltwise. */
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

/* ---- Concat ------------------------------------------------------------------------- */

/* Concat and Slice: pieces stacked along one axis of a whole blob. */
typedef struct axis_priv {
    int axis;
    int outer;
    size_t inner; /* elements after the axis */
} axis_priv;

/* Copy between the whole's windows along c->axis and its npieces pieces, in order: into
 * the whole (to_whole) or out to the pieces, the values or (diff) the gradients; a
 * piece's gradient is written only where it needs one. */
static void axis_move(cd_net *net, const axis_priv *c, cd_blob *whole, cd_blob *const *pieces,
                      int npieces, int diff, int to_whole)
{
    size_t whole_block = (size_t)whole->dims[c->axis] * c->inner, off = 0;
    float *w = diff ? whole->diff : whole->data;
    for (int i = 0; i < npieces; i++) {
        size_t block = (size_t)pieces[i]->dims[c->axis] * c->inner;
        float *pc = diff ? pieces[i]->diff : pieces[i]->data;
        if (to_whole)
            OPS(net)->copy_strided(BE(net), c->outer, block, pc, block, w + off, whole_block, 0);
        else if (!diff || pieces[i]->need_backward)
            OPS(net)->copy_strided(BE(net), c->outer, block, w + off, whole_block, pc, block, 0);
        off += block;
    }
}

static int concat_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *b0 = l->bottom[0];
    int axis = p ? (int)cd_pt_int(p, "axis", cd_pt_int(p, "concat_dim", 1)) : 1;
    if (axis < 0)
        axis += b0->ndim;
    if (axis < 0 || axis >= b0->ndim)
        return cd_layer_error(l, err, errlen, "axis %d is outside the %d-D bottoms", axis, b0->ndim);
    int dims[CD_MAX_DIMS];
    memcpy(dims, b0->dims, sizeof dims);
    for (int i = 1; i < l->nbottom; i++) {
        cd_blob *b = l->bottom[i];
        char s0[64], s1[64];
        int ok = b->ndim == b0->ndim;
        for (int d = 0; ok && d < b0->ndim; d++)
            ok = d == axis || b->dims[d] == b0->dims[d];
        if (!ok)
            return cd_layer_error(l, err, errlen, "bottom %s is %s but %s is %s; they must match "
                                  "except along axis %d", b->name, cd_blob_shape_str(b, s1, sizeof s1),
                                  b0->name, cd_blob_shape_str(b0, s0, sizeof s0), axis);
        dims[axis] += b->dims[axis];
    }
    axis_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    c->axis = axis;
    c->outer = (int)cd_dims_count(b0->dims, 0, axis);
    c->inner = cd_dims_count(b0->dims, axis + 1, b0->ndim);
    cd_blob_set_shape(l->top[0], b0->ndim, dims);
    return CD_OK;
}

static void concat_forward(cd_net *net, cd_layer *l)
{
    axis_move(net, l->priv, l->top[0], l->bottom, l->nbottom, 0, 1);
}

static void concat_backward(cd_net *net, cd_layer *l)
{
    axis_move(net, l->priv, l->top[0], l->bottom, l->nbottom, 1, 0);
}

/* ---- Slice: Concat's inverse ------------------------------------------------------ */

/* Top sizes along the axis: from slice_point (one fewer than the tops, increasing,
 * inside the axis), or an equal split of the axis into the tops. */
static int slice_sizes(const cd_layer *l, int dim, int *sizes, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    int npoints = p ? cd_pt_count(p, "slice_point") : 0;
    if (npoints == 0) {
        if (dim % l->ntop != 0)
            return cd_layer_error(l, err, errlen, "axis of size %d does not split evenly into %d "
                                  "tops; give slice_point values", dim, l->ntop);
        for (int i = 0; i < l->ntop; i++)
            sizes[i] = dim / l->ntop;
        return CD_OK;
    }
    if (npoints != l->ntop - 1)
        return cd_layer_error(l, err, errlen, "%d slice_point values for %d tops; give one fewer "
                              "than the tops", npoints, l->ntop);
    int prev = 0;
    for (int i = 0; i < npoints; i++) {
        int pt = atoi(cd_pt_nth(p, "slice_point", i)->text);
        if (pt <= prev || pt >= dim)
            return cd_layer_error(l, err, errlen, "slice_point %d must be larger than %d and smaller "
                                  "than the axis size %d", pt, prev, dim);
        sizes[i] = pt - prev;
        prev = pt;
    }
    sizes[npoints] = dim - prev;
    return CD_OK;
}

static int slice_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0];
    int axis = 1;
    if (p)
        axis = (int)(cd_pt_get(p, "slice_dim") ? cd_pt_int(p, "slice_dim", 1) : cd_pt_int(p, "axis", 1));
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis >= x->ndim)
        return cd_layer_error(l, err, errlen, "axis %d is outside the %d-D bottom %s", axis, x->ndim,
                              x->name);
    int sizes[CD_LAYER_MAX_BLOBS];
    if (slice_sizes(l, x->dims[axis], sizes, err, errlen) != CD_OK)
        return CD_ERR;
    for (int i = 0; i < l->ntop; i++) {
        if (l->top[i] == x)
            return cd_layer_error(l, err, errlen, "Slice cannot work in place; give top %s another "
                                  "name", x->name);
        int dims[CD_MAX_DIMS];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        cd_blob_set_shape(l->top[i], x->ndim, dims);
    }
    axis_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    c->axis = axis;
    c->outer = (int)cd_dims_count(x->dims, 0, axis);
    c->inner = cd_dims_count(x->dims, axis + 1, x->ndim);
    return CD_OK;
}

/* top i is (outer, size_i, inner) taken from the bottom's (outer, sum of sizes, inner) */
static void slice_forward(cd_net *net, cd_layer *l)
{
    axis_move(net, l->priv, l->bottom[0], l->top, l->ntop, 0, 0);
}

static void slice_backward(cd_net *net, cd_layer *l)
{
    if (l->bottom[0]->need_backward)
        axis_move(net, l->priv, l->bottom[0], l->top, l->ntop, 1, 1);
}

/* ---- Flatten: a view of the bottom, sharing its memory ----------------------------------- */

static int flatten_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0];
    int axis = p ? (int)cd_pt_int(p, "axis", 1) : 1;
    int end = p ? (int)cd_pt_int(p, "end_axis", -1) : -1;
    if (axis < 0)
        axis += x->ndim;
    if (end < 0)
        end += x->ndim;
    if (axis < 0 || end >= x->ndim || axis > end)
        return cd_layer_error(l, err, errlen, "axis %d to end_axis %d do not fit the %d-D bottom",
                              axis, end, x->ndim);
    if (l->top[0] == x)
        return cd_layer_error(l, err, errlen, "Flatten cannot work in place; give the top another name");
    int dims[CD_MAX_DIMS], nd = 0;
    for (int i = 0; i < axis; i++)
        dims[nd++] = x->dims[i];
    dims[nd++] = (int)cd_dims_count(x->dims, axis, end + 1);
    for (int i = end + 1; i < x->ndim; i++)
        dims[nd++] = x->dims[i];
    cd_blob_set_shape(l->top[0], nd, dims);
    l->top[0]->alias = x;
    return CD_OK;
}

/* ---- Split -------------------------------------------------------------------------- */

static int split_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    for (int i = 0; i < l->ntop; i++)
        cd_blob_set_shape(l->top[i], l->bottom[0]->ndim, l->bottom[0]->dims);
    return CD_OK;
}

static void split_forward(cd_net *net, cd_layer *l)
{
    size_t bytes = l->bottom[0]->count * sizeof(float);
    for (int i = 0; i < l->ntop; i++)
        OPS(net)->copy(BE(net), l->top[i]->data, l->bottom[0]->data, bytes);
}

static void split_backward(cd_net *net, cd_layer *l)
{
    cd_blob *x = l->bottom[0];
    if (!x->need_backward)
        return;
    OPS(net)->copy(BE(net), x->diff, l->top[0]->diff, x->count * sizeof(float));
    for (int i = 1; i < l->ntop; i++)
        OPS(net)->axpy(BE(net), x->count, 1.0f, l->top[i]->diff, x->diff);
}

/* ---- Eltwise ------------------------------------------------------------------------ */

enum { ELT_PROD, ELT_SUM, ELT_MAX };

typedef struct eltwise_priv {
    int op;
    float coeff[CD_LAYER_MAX_BLOBS];
    float *buf; /* PROD: product of the other inputs; MAX: index of the winner */
} eltwise_priv;

static int eltwise_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    static const struct { const char *name; int op; } ops[] = {
        {"PROD", ELT_PROD}, {"SUM", ELT_SUM}, {"MAX", ELT_MAX}};
    const cd_pt_node *p = l->param;
    eltwise_priv *e = cd_xcalloc(1, sizeof *e);
    l->priv = e;
    const char *opname = p ? cd_pt_str(p, "operation", "SUM") : "SUM";
    for (size_t i = 0; i < CD_ARRAY_LEN(ops); i++)
        if (!strcmp(opname, ops[i].name))
            e->op = ops[i].op;
    int ncoeff = p ? cd_pt_count(p, "coeff") : 0;
    if (ncoeff && (e->op != ELT_SUM || ncoeff != l->nbottom))
        return cd_layer_error(l, err, errlen, "coeff needs operation SUM and one value per bottom "
                              "(%d bottoms, %d coeff)", l->nbottom, ncoeff);
    for (int i = 0; i < l->nbottom; i++)
        e->coeff[i] = ncoeff ? (float)strtod(cd_pt_nth(p, "coeff", i)->text, NULL) : 1.0f;
    cd_blob *b0 = l->bottom[0];
    for (int i = 1; i < l->nbottom; i++) {
        char s0[64], s1[64];
        if (l->bottom[i]->count != b0->count || l->bottom[i]->ndim != b0->ndim ||
            memcmp(l->bottom[i]->dims, b0->dims, sizeof b0->dims) != 0)
            return cd_layer_error(l, err, errlen, "bottom %s is %s but %s is %s; Eltwise needs equal "
                                  "shapes", l->bottom[i]->name,
                                  cd_blob_shape_str(l->bottom[i], s1, sizeof s1), b0->name,
                                  cd_blob_shape_str(b0, s0, sizeof s0));
    }
    cd_blob_set_shape(l->top[0], b0->ndim, b0->dims);
    return CD_OK;
}

static int eltwise_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    eltwise_priv *e = l->priv;
    if (e->op == ELT_SUM)
        return CD_OK;
    return cd_layer_buffer_init(net, l, l->bottom[0]->count, &e->buf, err, errlen);
}

static void eltwise_forward(cd_net *net, cd_layer *l)
{
    eltwise_priv *e = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t n = l->top[0]->count;
    float *y = l->top[0]->data;
    switch (e->op) {
    case ELT_SUM:
        o->scale(be, n, e->coeff[0], l->bottom[0]->data, y);
        for (int i = 1; i < l->nbottom; i++)
            o->axpy(be, n, e->coeff[i], l->bottom[i]->data, y);
        break;
    case ELT_PROD:
        o->mul(be, n, l->bottom[0]->data, l->bottom[1]->data, y);
        for (int i = 2; i < l->nbottom; i++)
            o->mul(be, n, y, l->bottom[i]->data, y);
        break;
    case ELT_MAX:
        for (int i = 0; i < l->nbottom; i++)
            o->max_index(be, n, l->bottom[i]->data, y, i, e->buf);
        break;
    }
}

static void eltwise_backward(cd_net *net, cd_layer *l)
{
    eltwise_priv *e = l->priv;
    const cd_backend_iface *o = OPS(net);
    cd_backend_t *be = BE(net);
    size_t n = l->top[0]->count;
    const float *dy = l->top[0]->diff;
    for (int i = 0; i < l->nbottom; i++) {
        cd_blob *x = l->bottom[i];
        if (!x->need_backward)
            continue;
        switch (e->op) {
        case ELT_SUM:
            o->scale(be, n, e->coeff[i], dy, x->diff);
            break;
        case ELT_PROD: {
            /* dx_i = dy * prod of the other inputs (no division, so zeros are safe) */
            int first = 1;
            for (int j = 0; j < l->nbottom; j++) {
                if (j == i)
                    continue;
                if (first)
                    o->mul(be, n, dy, l->bottom[j]->data, x->diff);
                else
                    o->mul(be, n, x->diff, l->bottom[j]->data, x->diff);
                first = 0;
            }
            break;
        }
        case ELT_MAX:
            o->mask_select(be, n, dy, e->buf, i, x->diff);
            break;
        }
    }
}

/* Silence: takes its bottoms and gives nothing (Caffe's, for a Slice's unused part). */
static int silence_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    (void)net, (void)l, (void)err, (void)errlen;
    return CD_OK;
}

static void silence_backward(cd_net *net, cd_layer *l)
{
    for (int i = 0; i < l->nbottom; i++)
        if (l->bottom[i]->need_backward)
            OPS(net)->set(BE(net), l->bottom[i]->count, 0.0f, l->bottom[i]->diff);
}

const cd_layer_type cd_layers_shape[] = {
    {.name = "Concat", .param_field = "concat_param", .min_bottoms = 1,
     .max_bottoms = CD_LAYER_MAX_BLOBS, .min_tops = 1, .max_tops = 1, .setup = concat_setup,
     .forward = concat_forward, .backward = concat_backward},
    {.name = "Slice", .param_field = "slice_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = CD_LAYER_MAX_BLOBS, .setup = slice_setup,
     .forward = slice_forward, .backward = slice_backward},
    {.name = "Flatten", .param_field = "flatten_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = flatten_setup},
    {.name = "Split", .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1,
     .max_tops = CD_LAYER_MAX_BLOBS, .setup = split_setup, .forward = split_forward,
     .backward = split_backward},
    {.name = "Eltwise", .param_field = "eltwise_param", .min_bottoms = 2,
     .max_bottoms = CD_LAYER_MAX_BLOBS, .min_tops = 1, .max_tops = 1, .setup = eltwise_setup,
     .init = eltwise_init, .forward = eltwise_forward, .backward = eltwise_backward},
    {.name = "Silence", .min_bottoms = 1, .max_bottoms = CD_LAYER_MAX_BLOBS, .min_tops = 0,
     .max_tops = 0, .setup = silence_setup, .backward = silence_backward},
    {.name = NULL},
};
