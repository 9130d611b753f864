/*
 * ONNX export of a model job's deploy stage (see onnx_export.h). The classifier opens
 * the job as classify does (the same snapshot, net and shapes); the graph then gets
 * the input preparation classify runs before the network (input_prep.c: mean, centre
 * crop, scale, whitening) and one row of the layer table per layer, each writing the
 * nodes for one Caffe layer from the built layer's own geometry, so the shapes are the
 * engine's. Every proto message and buffer is allocated through the exporter and freed
 * together once the model is packed.
 *
 * Values are SSA in ONNX but Caffe writes blobs in place (ReLU), so each blob maps to
 * the value that holds it now: the last write of a blob takes the blob's own name (the
 * output is "prob" as in the deploy file), earlier writes "blob/layer".
 */
#define _GNU_SOURCE
#include "cdigits/onnx_export.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/dataset.h"
#include "cdigits/image.h"
#include "cdigits/infer.h"
#include "cdigits/jobdir.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "engine_internal.h"
#include "layer_conv.h"
#include "onnx.pb-c.h"

#define OX_OPSET 13
#define OX_IR_VERSION 7

typedef struct ox_value {
    const cd_blob *blob;
    const char *name;
} ox_value;

typedef struct ox {
    cd_backend_t *be;
    const cd_net *net;
    void **allocs; /* everything the messages point to */
    size_t nallocs, cap_allocs;
    Onnx__NodeProto **nodes;
    size_t nnodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t ninits, cap_inits;
    ox_value *vals; /* blob -> its value now */
    size_t nvals, cap_vals;
    const char **used; /* value and initializer names taken */
    size_t nused, cap_used;
} ox_t;

/* One layer being exported: its value names in and out (out[i] is what top i maps to
 * once the row succeeds; a row that passes a value through sets out[i] = in[0]). */
typedef struct ox_ctx {
    const cd_layer *l;
    const char *in[CD_LAYER_MAX_BLOBS];
    const char *out[CD_LAYER_MAX_BLOBS];
} ox_ctx;

#define OX_GROW(arr, n, cap)                                                        \
    do {                                                                            \
        if ((n) == (cap)) {                                                         \
            (cap) = (cap) ? 2 * (cap) : 16;                                         \
            (arr) = cd_xrealloc((arr), sizeof *(arr) * (cap));                      \
        }                                                                           \
    } while (0)

static void *ox_new(ox_t *x, size_t bytes)
{
    void *p = cd_xcalloc(1, bytes ? bytes : 1);
    OX_GROW(x->allocs, x->nallocs, x->cap_allocs);
    x->allocs[x->nallocs++] = p;
    return p;
}

static char *ox_str(ox_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *ox_str(ox_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ox_new(x, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static int ox_taken(const ox_t *x, const char *name)
{
    for (size_t i = 0; i < x->nused; i++)
        if (!strcmp(x->used[i], name))
            return 1;
    return 0;
}

static void ox_reserve(ox_t *x, const char *name)
{
    OX_GROW(x->used, x->nused, x->cap_used);
    x->used[x->nused++] = name;
}

/* A name no value or initializer has: base, else base_1, base_2, ... */
static const char *ox_fresh(ox_t *x, const char *base)
{
    const char *name = ox_str(x, "%s", base);
    for (int i = 1; ox_taken(x, name); i++)
        name = ox_str(x, "%s_%d", base, i);
    ox_reserve(x, name);
    return name;
}

static const char *ox_get(const ox_t *x, const cd_blob *b)
{
    for (size_t i = 0; i < x->nvals; i++)
        if (x->vals[i].blob == b)
            return x->vals[i].name;
    return NULL;
}

static void ox_set(ox_t *x, const cd_blob *b, const char *name)
{
    for (size_t i = 0; i < x->nvals; i++)
        if (x->vals[i].blob == b) {
            x->vals[i].name = name;
            return;
        }
    OX_GROW(x->vals, x->nvals, x->cap_vals);
    x->vals[x->nvals++] = (ox_value){b, name};
}

/* ---- messages ---------------------------------------------------------------------- */

static Onnx__NodeProto *ox_node(ox_t *x, const char *op, const char *name, int nin, const char *const *in, int nout,
                                const char *const *out)
{
    Onnx__NodeProto *n = ox_new(x, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ox_str(x, "%s", op);
    /* node names are unique too (the checker and runtimes insist): the input
     * preparation's "crop" beside a layer named crop becomes crop_1 */
    n->name = ox_str(x, "%s", name);
    for (int k = 1, clash = 1; clash; k++) {
        clash = 0;
        for (size_t i = 0; i < x->nnodes && !clash; i++)
            clash = !strcmp(x->nodes[i]->name, n->name);
        if (clash)
            n->name = ox_str(x, "%s_%d", name, k);
    }
    n->n_input = (size_t)nin;
    n->input = ox_new(x, sizeof(char *) * (size_t)nin);
    for (int i = 0; i < nin; i++)
        n->input[i] = ox_str(x, "%s", in[i] ? in[i] : "");
    n->n_output = (size_t)nout;
    n->output = ox_new(x, sizeof(char *) * (size_t)nout);
    for (int i = 0; i < nout; i++)
        n->output[i] = ox_str(x, "%s", out[i]);
    OX_GROW(x->nodes, x->nnodes, x->cap_nodes);
    x->nodes[x->nnodes++] = n;
    return n;
}

/* A node of one or two inputs and one output. */
static Onnx__NodeProto *ox_node1(ox_t *x, const char *op, const char *name, const char *a, const char *b,
                                 const char *out)
{
    const char *in[2] = {a, b};
    return ox_node(x, op, name, b ? 2 : 1, in, 1, &out);
}

static Onnx__AttributeProto *ox_attr(ox_t *x, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = ox_new(x, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ox_str(x, "%s", name);
    a->has_type = 1;
    a->type = type;
    Onnx__AttributeProto **grown = ox_new(x, sizeof *grown * (n->n_attribute + 1));
    if (n->n_attribute)
        memcpy(grown, n->attribute, sizeof *grown * n->n_attribute);
    grown[n->n_attribute++] = a;
    n->attribute = grown;
    return a;
}

static void ox_attr_i(ox_t *x, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ox_attr(x, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void ox_attr_f(ox_t *x, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ox_attr(x, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void ox_attr_ints(ox_t *x, Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    Onnx__AttributeProto *a = ox_attr(x, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = ox_new(x, sizeof(int64_t) * (size_t)count);
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)count);
}

static Onnx__TensorProto *ox_tensor(ox_t *x, const char *base, int ndim, const int64_t *dims, int type)
{
    Onnx__TensorProto *t = ox_new(x, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = (char *)ox_fresh(x, base);
    t->n_dims = (size_t)ndim;
    t->dims = ox_new(x, sizeof(int64_t) * (size_t)(ndim > 0 ? ndim : 1));
    if (ndim > 0)
        memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
    t->has_data_type = 1;
    t->data_type = type;
    OX_GROW(x->inits, x->ninits, x->cap_inits);
    x->inits[x->ninits++] = t;
    return t;
}

/* A float initializer (ndim 0: a scalar) holding a copy of data; its name. */
static const char *ox_init_f(ox_t *x, const char *base, int ndim, const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = ox_tensor(x, base, ndim, dims, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (size_t)dims[i];
    t->n_float_data = count;
    t->float_data = ox_new(x, sizeof(float) * count);
    memcpy(t->float_data, data, sizeof(float) * count);
    return t->name;
}

static const char *ox_scalar(ox_t *x, const char *base, float v) { return ox_init_f(x, base, 0, NULL, &v); }

/* A 1-D int64 initializer of n values; its name. */
static const char *ox_init_i64(ox_t *x, const char *base, int n, const int64_t *v)
{
    int64_t dims[1] = {n};
    Onnx__TensorProto *t = ox_tensor(x, base, 1, dims, ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    t->n_int64_data = (size_t)n;
    t->int64_data = ox_new(x, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    memcpy(t->int64_data, v, sizeof(int64_t) * (size_t)n);
    return t->name;
}

/* The layer's i-th parameter read back from the backend, on the host (owned by x). */
static float *ox_param_host(ox_t *x, const cd_layer *l, int i)
{
    const cd_param *p = l->params[i];
    float *host = ox_new(x, sizeof(float) * p->count);
    x->be->iface->download(x->be, host, p->data, sizeof(float) * p->count);
    return host;
}

/* The layer's i-th parameter as an initializer of the given shape (ndim 0: its own). */
static const char *ox_param(ox_t *x, const cd_layer *l, int i, int ndim, const int64_t *dims)
{
    const cd_param *p = l->params[i];
    int64_t own[CD_MAX_DIMS];
    if (ndim == 0) {
        ndim = p->ndim;
        for (int d = 0; d < ndim; d++)
            own[d] = p->dims[d];
        dims = own;
    }
    return ox_init_f(x, p->name, ndim, dims, ox_param_host(x, l, i));
}

/* Per-channel shape of a parameter applied to a (N, C, ...) blob: (C, 1, ..., 1). */
static int ox_channel_shape(const cd_blob *b, int64_t *dims)
{
    int nd = b->ndim >= 2 ? b->ndim - 1 : 1;
    dims[0] = b->ndim >= 2 ? b->dims[1] : 1;
    for (int i = 1; i < nd; i++)
        dims[i] = 1;
    return nd;
}

static int ox_axis(const cd_layer *l, const char *field, int def, int ndim)
{
    int axis = l->param ? (int)cd_pt_int(l->param, field, def) : def;
    return axis < 0 ? axis + ndim : axis;
}

/* ---- the layer table ------------------------------------------------------------- */

static int ox_conv_common(ox_t *x, ox_ctx *c, const char *op)
{
    const cd_layer *l = c->l;
    const cd_conv_priv *p = l->priv;
    const cd_conv_desc *d = &p->d;
    const char *in[3] = {c->in[0], ox_param(x, l, 0, 0, NULL), p->bias ? ox_param(x, l, 1, 0, NULL) : NULL};
    Onnx__NodeProto *n = ox_node(x, op, l->name, p->bias ? 3 : 2, in, 1, c->out);
    int64_t k[2] = {d->kh, d->kw}, s[2] = {d->sh, d->sw}, dil[2] = {d->dh, d->dw};
    int64_t pads[4] = {d->ph, d->pw, d->ph, d->pw};
    ox_attr_ints(x, n, "kernel_shape", 2, k);
    ox_attr_ints(x, n, "strides", 2, s);
    ox_attr_ints(x, n, "pads", 4, pads);
    ox_attr_ints(x, n, "dilations", 2, dil);
    ox_attr_i(x, n, "group", d->group);
    return CD_OK;
}

static int ox_conv(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return ox_conv_common(x, c, "Conv");
}

/* ConvTranspose's output, s*(in-1) + d*(k-1) + 1 - 2p, is Deconvolution's, and its
 * weights (C_in, C_out/group, kh, kw) are Caffe's layout. */
static int ox_deconv(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return ox_conv_common(x, c, "ConvTranspose");
}

/*
 * Pooling. Caffe's output size (ceil, the last window starting inside the image or its
 * top/left padding) is written as explicit end padding e = (oh-1)*sh + kh - h - ph in
 * floor mode, which gives the engine's oh x ow exactly whatever the ONNX runtime's
 * ceil_mode rules are. MAX ignores padded cells in both. AVE divides by the window
 * clipped to the padded image [-ph, h+ph): the image is zero-padded by (ph, pw) with
 * a Pad node, and AveragePool with count_include_pad 0 then divides by the window
 * clipped to that padded image; the windows that run past it are clipped likewise.
 */
static int ox_pool(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    const cd_pool_desc *d = &((const cd_pool_priv *)l->priv)->d;
    int ave = d->mode == CD_POOL_AVE;
    if (l->param && cd_pt_bool(l->param, "global_pooling", 0)) {
        ox_node1(x, ave ? "GlobalAveragePool" : "GlobalMaxPool", l->name, c->in[0], NULL, c->out[0]);
        return CD_OK;
    }
    int eh = (d->oh - 1) * d->sh + d->kh - d->h - d->ph, ew = (d->ow - 1) * d->sw + d->kw - d->w - d->pw;
    eh = eh > 0 ? eh : 0;
    ew = ew > 0 ? ew : 0;
    const char *in = c->in[0];
    int64_t pads[4] = {d->ph, d->pw, eh, ew};
    if (ave) {
        if (d->ph || d->pw) {
            int64_t zp[8] = {0, 0, d->ph, d->pw, 0, 0, d->ph, d->pw};
            const char *padded = ox_fresh(x, ox_str(x, "%s/padded", l->name));
            ox_node1(x, "Pad", ox_str(x, "%s/pad", l->name), in, ox_init_i64(x, ox_str(x, "%s/pads", l->name), 8, zp),
                     padded);
            in = padded;
        }
        pads[0] = pads[1] = 0;
        pads[2] = eh > d->ph ? eh - d->ph : 0;
        pads[3] = ew > d->pw ? ew - d->pw : 0;
    }
    Onnx__NodeProto *n = ox_node1(x, ave ? "AveragePool" : "MaxPool", l->name, in, NULL, c->out[0]);
    int64_t k[2] = {d->kh, d->kw}, s[2] = {d->sh, d->sw};
    ox_attr_ints(x, n, "kernel_shape", 2, k);
    ox_attr_ints(x, n, "strides", 2, s);
    ox_attr_ints(x, n, "pads", 4, pads);
    if (ave)
        ox_attr_i(x, n, "count_include_pad", 0);
    return CD_OK;
}

/* InnerProduct: y = x W^T + b with W (num_output, K): Gemm transB 1, after a Flatten
 * when the bottom is not (N, K). */
static int ox_ip(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    const cd_layer *l = c->l;
    const cd_blob *b = l->bottom[0];
    int axis = ox_axis(l, "axis", 1, b->ndim);
    if (axis != 1)
        return cd_layer_error(l, err, errlen, "ONNX export maps InnerProduct over axis 1 only, not axis %d; "
                              "flatten the bottom first and use axis 1", axis);
    const char *in = c->in[0];
    if (b->ndim != 2) {
        const char *flat = ox_fresh(x, ox_str(x, "%s/flatten", l->name));
        Onnx__NodeProto *n = ox_node1(x, "Flatten", ox_str(x, "%s/flatten", l->name), in, NULL, flat);
        ox_attr_i(x, n, "axis", 1);
        in = flat;
    }
    const char *ins[3] = {in, ox_param(x, l, 0, 0, NULL), l->nparam > 1 ? ox_param(x, l, 1, 0, NULL) : NULL};
    Onnx__NodeProto *n = ox_node(x, "Gemm", l->name, l->nparam > 1 ? 3 : 2, ins, 1, c->out);
    ox_attr_i(x, n, "transB", 1);
    return CD_OK;
}

static int ox_relu(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    float slope = l->param ? (float)cd_pt_float(l->param, "negative_slope", 0.0) : 0.0f;
    Onnx__NodeProto *n = ox_node1(x, slope != 0.0f ? "LeakyRelu" : "Relu", l->name, c->in[0], NULL, c->out[0]);
    if (slope != 0.0f)
        ox_attr_f(x, n, "alpha", slope);
    return CD_OK;
}

static int ox_sigmoid(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    ox_node1(x, "Sigmoid", c->l->name, c->in[0], NULL, c->out[0]);
    return CD_OK;
}

static int ox_tanh(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    ox_node1(x, "Tanh", c->l->name, c->in[0], NULL, c->out[0]);
    return CD_OK;
}

/* Power: y = (shift + scale*x)^power as Mul, Add and Pow, each left out when it is the
 * identity (all three: an Identity). */
static int ox_power(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    const cd_pt_node *p = l->param;
    struct {
        const char *op, *field;
        float def;
    } steps[] = {{"Mul", "scale", 1.0f}, {"Add", "shift", 0.0f}, {"Pow", "power", 1.0f}};
    int last = -1;
    float v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = p ? (float)cd_pt_float(p, steps[i].field, steps[i].def) : steps[i].def;
        if (v[i] != steps[i].def)
            last = i;
    }
    if (last < 0) {
        ox_node1(x, "Identity", l->name, c->in[0], NULL, c->out[0]);
        return CD_OK;
    }
    const char *cur = c->in[0];
    for (int i = 0; i <= last; i++) {
        if (v[i] == steps[i].def)
            continue;
        const char *out = i == last ? c->out[0] : ox_fresh(x, ox_str(x, "%s/%s", l->name, steps[i].field));
        ox_node1(x, steps[i].op, ox_str(x, "%s/%s", l->name, steps[i].field), cur,
                 ox_scalar(x, ox_str(x, "%s/%s", l->name, steps[i].field), v[i]), out);
        cur = out;
    }
    return CD_OK;
}

/* Dropout at inference and Split are the identity: the tops are the bottom's value. */
static int ox_pass(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)x, (void)err, (void)errlen;
    for (int i = 0; i < c->l->ntop; i++)
        c->out[i] = c->in[0];
    return CD_OK;
}

static int ox_silence(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)x, (void)c, (void)err, (void)errlen;
    return CD_OK;
}

/* LRN ACROSS_CHANNELS: ONNX's LRN is Caffe's (the window of size channels centred on
 * the channel, alpha divided by size, bias = k). */
static int ox_lrn(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    const cd_layer *l = c->l;
    const cd_lrn_desc *d = l->priv;
    if (d->mode != CD_LRN_ACROSS)
        return cd_layer_error(l, err, errlen, "ONNX export does not map norm_region WITHIN_CHANNEL (ONNX's LRN "
                              "normalizes across channels only); use ACROSS_CHANNELS, or use the Caffe files of "
                              "the download");
    Onnx__NodeProto *n = ox_node1(x, "LRN", l->name, c->in[0], NULL, c->out[0]);
    ox_attr_i(x, n, "size", d->size);
    ox_attr_f(x, n, "alpha", d->alpha);
    ox_attr_f(x, n, "beta", d->beta);
    ox_attr_f(x, n, "bias", d->k);
    return CD_OK;
}

/* BatchNorm with its stored statistics (layer_norm.c): mean = sum / factor and var =
 * sum / factor, computed as the engine does (times 1/(FLT_MIN + factor): 0 when the
 * factor is 0), into BatchNormalization with scale 1 and bias 0. */
static int ox_bn(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    const cd_layer *l = c->l;
    const cd_pt_node *p = l->param;
    if (p && cd_pt_get(p, "use_global_stats") && !cd_pt_bool(p, "use_global_stats", 0))
        return cd_layer_error(l, err, errlen, "use_global_stats: false normalizes each batch by its own "
                              "statistics, which an exported graph cannot do as the engine does; remove "
                              "use_global_stats from the deploy stage");
    size_t ch = l->params[0]->count;
    float *mean = ox_param_host(x, l, 0), *var = ox_param_host(x, l, 1), *factor = ox_param_host(x, l, 2);
    float inv = 1.0f / (FLT_MIN + factor[0]);
    float *ones = ox_new(x, sizeof(float) * ch), *zeros = ox_new(x, sizeof(float) * ch);
    for (size_t i = 0; i < ch; i++) {
        mean[i] *= inv;
        var[i] *= inv;
        ones[i] = 1.0f;
    }
    int64_t dims[1] = {(int64_t)ch};
    const char *in[5] = {c->in[0], ox_init_f(x, ox_str(x, "%s/scale", l->name), 1, dims, ones),
                         ox_init_f(x, ox_str(x, "%s/bias", l->name), 1, dims, zeros),
                         ox_init_f(x, ox_str(x, "%s/mean", l->name), 1, dims, mean),
                         ox_init_f(x, ox_str(x, "%s/var", l->name), 1, dims, var)};
    Onnx__NodeProto *n = ox_node(x, "BatchNormalization", l->name, 5, in, 1, c->out);
    ox_attr_f(x, n, "epsilon", p ? (float)cd_pt_float(p, "eps", 1e-5) : 1e-5f);
    return CD_OK;
}

/* Scale (and its bias_term) and Bias: one value per channel, broadcast as (C, 1, 1). */
static int ox_affine(ox_t *x, ox_ctx *c, int has_scale, int has_bias)
{
    const cd_layer *l = c->l;
    int64_t dims[CD_MAX_DIMS];
    int nd = ox_channel_shape(l->bottom[0], dims);
    const char *cur = c->in[0];
    if (has_scale) {
        const char *out = has_bias ? ox_fresh(x, ox_str(x, "%s/scaled", l->name)) : c->out[0];
        ox_node1(x, "Mul", has_bias ? ox_str(x, "%s/scale", l->name) : l->name, cur, ox_param(x, l, 0, nd, dims),
                 out);
        cur = out;
    }
    if (has_bias)
        ox_node1(x, "Add", l->name, cur, ox_param(x, l, has_scale, nd, dims), c->out[0]);
    return CD_OK;
}

static int ox_scale(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return ox_affine(x, c, 1, c->l->nparam > 1);
}

static int ox_bias(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return ox_affine(x, c, 0, 1);
}

static int ox_concat(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    int def = l->param ? (int)cd_pt_int(l->param, "concat_dim", 1) : 1;
    Onnx__NodeProto *n = ox_node(x, "Concat", l->name, l->nbottom, c->in, 1, c->out);
    ox_attr_i(x, n, "axis", ox_axis(l, "axis", def, l->bottom[0]->ndim));
    return CD_OK;
}

/* Slice: ONNX's Split with the tops' sizes along the axis. */
static int ox_slice(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    int axis = l->param && cd_pt_get(l->param, "slice_dim") ? ox_axis(l, "slice_dim", 1, l->bottom[0]->ndim)
                                                            : ox_axis(l, "axis", 1, l->bottom[0]->ndim);
    int64_t sizes[CD_LAYER_MAX_BLOBS];
    for (int i = 0; i < l->ntop; i++)
        sizes[i] = l->top[i]->dims[axis];
    const char *in[2] = {c->in[0], ox_init_i64(x, ox_str(x, "%s/split", l->name), l->ntop, sizes)};
    Onnx__NodeProto *n = ox_node(x, "Split", l->name, 2, in, l->ntop, c->out);
    ox_attr_i(x, n, "axis", axis);
    return CD_OK;
}

/* Flatten: Reshape to the top's shape, the batch axis kept (0) or merged (-1). */
static int ox_flatten(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    const cd_blob *t = l->top[0];
    int64_t shape[CD_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        shape[i] = t->dims[i];
    shape[0] = ox_axis(l, "axis", 1, l->bottom[0]->ndim) == 0 ? -1 : 0;
    ox_node1(x, "Reshape", l->name, c->in[0], ox_init_i64(x, ox_str(x, "%s/shape", l->name), t->ndim, shape),
             c->out[0]);
    return CD_OK;
}

/* Eltwise: SUM (each bottom times its coeff first when it is not 1) as Sum, PROD as a
 * chain of Mul, MAX as Max. */
static int ox_eltwise(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    const cd_layer *l = c->l;
    const cd_pt_node *p = l->param;
    const char *op = p ? cd_pt_str(p, "operation", "SUM") : "SUM";
    int ncoeff = p ? cd_pt_count(p, "coeff") : 0;
    if (!strcmp(op, "MAX")) {
        ox_node(x, "Max", l->name, l->nbottom, c->in, 1, c->out);
    } else if (!strcmp(op, "PROD")) {
        const char *cur = c->in[0];
        for (int i = 1; i < l->nbottom; i++) {
            const char *out = i == l->nbottom - 1 ? c->out[0] : ox_fresh(x, ox_str(x, "%s/prod%d", l->name, i));
            ox_node1(x, "Mul", i == l->nbottom - 1 ? l->name : ox_str(x, "%s/prod%d", l->name, i), cur, c->in[i],
                     out);
            cur = out;
        }
    } else if (!strcmp(op, "SUM")) {
        const char *terms[CD_LAYER_MAX_BLOBS];
        for (int i = 0; i < l->nbottom; i++) {
            float k = i < ncoeff ? (float)strtod(cd_pt_nth(p, "coeff", i)->text, NULL) : 1.0f;
            terms[i] = c->in[i];
            if (k != 1.0f) {
                terms[i] = ox_fresh(x, ox_str(x, "%s/term%d", l->name, i));
                ox_node1(x, "Mul", ox_str(x, "%s/coeff%d", l->name, i), c->in[i],
                         ox_scalar(x, ox_str(x, "%s/coeff%d", l->name, i), k), terms[i]);
            }
        }
        ox_node(x, "Sum", l->name, l->nbottom, terms, 1, c->out);
    } else {
        return cd_layer_error(l, err, errlen, "ONNX export does not map Eltwise operation %s; use SUM, PROD or MAX",
                              op);
    }
    return CD_OK;
}

static int ox_softmax(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const cd_layer *l = c->l;
    Onnx__NodeProto *n = ox_node1(x, "Softmax", l->name, c->in[0], NULL, c->out[0]);
    ox_attr_i(x, n, "axis", ox_axis(l, "axis", 1, l->bottom[0]->ndim));
    return CD_OK;
}

/* Crop: Slice of bottom 0 from the offsets to the reference's size on the axes from
 * `axis` on (the reference gives only its shape). */
static int ox_crop(ox_t *x, ox_ctx *c, char *err, size_t errlen)
{
    const cd_layer *l = c->l;
    const cd_blob *b = l->bottom[0], *ref = l->bottom[1];
    int axis = ox_axis(l, "axis", 2, b->ndim);
    if (axis == 0)
        return cd_layer_error(l, err, errlen, "crops the batch axis (axis 0), which an exported graph of any "
                              "batch size cannot; crop from axis 1 on");
    int noff = l->param ? cd_pt_count(l->param, "offset") : 0, n = 0;
    int64_t starts[CD_MAX_DIMS], ends[CD_MAX_DIMS], axes[CD_MAX_DIMS];
    for (int i = axis; i < b->ndim; i++, n++) {
        int off = noff ? (int)strtol(cd_pt_nth(l->param, "offset", noff > 1 ? i - axis : 0)->text, NULL, 10) : 0;
        starts[n] = off;
        ends[n] = off + ref->dims[i];
        axes[n] = i;
    }
    const char *in[4] = {c->in[0], ox_init_i64(x, ox_str(x, "%s/starts", l->name), n, starts),
                         ox_init_i64(x, ox_str(x, "%s/ends", l->name), n, ends),
                         ox_init_i64(x, ox_str(x, "%s/axes", l->name), n, axes)};
    ox_node(x, "Slice", l->name, 4, in, 1, c->out);
    return CD_OK;
}

typedef int (*ox_layer_fn)(ox_t *x, ox_ctx *c, char *err, size_t errlen);

static const struct {
    const char *type;
    ox_layer_fn fn;
} ox_layers[] = {
    {"Convolution", ox_conv},   {"Deconvolution", ox_deconv}, {"Pooling", ox_pool},   {"InnerProduct", ox_ip},
    {"ReLU", ox_relu},          {"Sigmoid", ox_sigmoid},      {"TanH", ox_tanh},      {"Power", ox_power},
    {"Dropout", ox_pass},       {"Split", ox_pass},           {"Silence", ox_silence}, {"LRN", ox_lrn},
    {"BatchNorm", ox_bn},       {"Scale", ox_scale},          {"Bias", ox_bias},      {"Concat", ox_concat},
    {"Slice", ox_slice},        {"Flatten", ox_flatten},      {"Eltwise", ox_eltwise}, {"Softmax", ox_softmax},
    {"Crop", ox_crop},
};

const char *cd_onnx_export_types(void)
{
    static char buf[512];
    if (buf[0])
        return buf;
    size_t off = 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(ox_layers) && off < sizeof buf; i++)
        if (strcmp(ox_layers[i].type, "Split") != 0)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", off ? ", " : "", ox_layers[i].type);
    return buf;
}

static ox_layer_fn ox_layer_find(const char *type)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(ox_layers); i++)
        if (!strcmp(ox_layers[i].type, type))
            return ox_layers[i].fn;
    return NULL;
}

/* ---- the input preparation --------------------------------------------------------- */

typedef struct ox_prep {
    int c, h, w;       /* the dataset's images */
    int ih, iw;        /* the network's input (the crop) */
    int use_mean;      /* CD_MEAN_* */
    float *mean;       /* (c, h, w), per pixel already for CD_MEAN_PIXEL; or NULL */
    float scale;
    int whiten;
} ox_prep;

/* The nodes from the graph input "data" to the value the network's data blob holds:
 * what input_prep.c does to a stored image, (x - mean) * scale on the centre crop,
 * then whitened per image when the model trained whitened. Returns that value. */
static const char *ox_prepare(ox_t *x, const ox_prep *p)
{
    const char *cur = "data";
    if (p->mean) {
        int pixel = p->use_mean == CD_MEAN_PIXEL;
        int64_t dims[4] = {1, p->c, pixel ? 1 : p->h, pixel ? 1 : p->w};
        float *m = p->mean;
        if (pixel) {
            m = ox_new(x, sizeof(float) * (size_t)p->c);
            for (int ch = 0; ch < p->c; ch++)
                m[ch] = p->mean[(size_t)ch * p->h * p->w];
        }
        const char *out = ox_fresh(x, "data/mean_subtracted");
        ox_node1(x, "Sub", "mean", cur, ox_init_f(x, "mean", 4, dims, m), out);
        cur = out;
    }
    if (p->ih != p->h || p->iw != p->w) {
        int oy = (p->h - p->ih) / 2, ox0 = (p->w - p->iw) / 2;
        int64_t starts[2] = {oy, ox0}, ends[2] = {oy + p->ih, ox0 + p->iw}, axes[2] = {2, 3};
        const char *in[4] = {cur, ox_init_i64(x, "crop/starts", 2, starts), ox_init_i64(x, "crop/ends", 2, ends),
                             ox_init_i64(x, "crop/axes", 2, axes)};
        const char *out = ox_fresh(x, "data/cropped");
        ox_node(x, "Slice", "crop", 4, in, 1, &out);
        cur = out;
    }
    if (p->scale != 1.0f) {
        const char *out = ox_fresh(x, "data/scaled");
        ox_node1(x, "Mul", "scale", cur, ox_scalar(x, "scale", p->scale), out);
        cur = out;
    }
    if (p->whiten) {
        /* cd_aug_whiten_f32: (x - mean) / max(sd, 1/sqrt(n)) over each image's C*H*W */
        int64_t axes[3] = {1, 2, 3};
        const char *names[] = {"whiten/mean", "whiten/centred", "whiten/squared", "whiten/variance", "whiten/sd",
                               "whiten/sd_floor", "data/whitened"};
        const char *v[7];
        for (int i = 0; i < 7; i++)
            v[i] = ox_fresh(x, names[i]);
        Onnx__NodeProto *m = ox_node1(x, "ReduceMean", names[0], cur, NULL, v[0]);
        ox_attr_ints(x, m, "axes", 3, axes);
        ox_node1(x, "Sub", names[1], cur, v[0], v[1]);
        ox_node1(x, "Mul", names[2], v[1], v[1], v[2]);
        m = ox_node1(x, "ReduceMean", names[3], v[2], NULL, v[3]);
        ox_attr_ints(x, m, "axes", 3, axes);
        ox_node1(x, "Sqrt", names[4], v[3], NULL, v[4]);
        double n = (double)p->c * p->ih * p->iw;
        ox_node1(x, "Max", names[5], v[4], ox_scalar(x, "whiten/floor", (float)(1.0 / sqrt(n))), v[5]);
        ox_node1(x, "Div", "whiten", v[1], v[5], v[6]);
        cur = v[6];
    }
    return cur;
}

/* ---- the model --------------------------------------------------------------------- */

static Onnx__ValueInfoProto *ox_value_info(ox_t *x, const char *name, int ndim, const int *dims)
{
    Onnx__TensorShapeProto *shape = ox_new(x, sizeof *shape);
    onnx__tensor_shape_proto__init(shape);
    shape->n_dim = (size_t)ndim;
    shape->dim = ox_new(x, sizeof *shape->dim * (size_t)ndim);
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = ox_new(x, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (i == 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = ox_str(x, "N");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        shape->dim[i] = d;
    }
    Onnx__TypeProto__Tensor *tt = ox_new(x, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = shape;
    Onnx__TypeProto *type = ox_new(x, sizeof *type);
    onnx__type_proto__init(type);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    Onnx__ValueInfoProto *vi = ox_new(x, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ox_str(x, "%s", name);
    vi->type = type;
    return vi;
}

/* The index of the last layer (not a data layer) that writes the blob named name, or
 * -1 (a top written in place may be its own cd_blob of the bottom's name). */
static int ox_last_writer(const cd_net *net, const char *name)
{
    int last = -1;
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        for (int t = 0; t < l->ntop && !(l->type->flags & CD_LAYER_DATA); t++)
            if (!strcmp(l->top[t]->name, name))
                last = i;
    }
    return last;
}

/* The graph of net after the preparation p: CD_OK, or CD_ERR naming the layer. */
static int ox_graph(ox_t *x, Onnx__GraphProto *g, const ox_prep *p, char *err, size_t errlen)
{
    const cd_net *net = x->net;
    const cd_blob *input = cd_net_blob(net, "data");
    ox_reserve(x, "data");
    for (int i = 0; i < net->nblobs; i++)
        if (!ox_taken(x, net->blobs[i]->name))
            ox_reserve(x, net->blobs[i]->name);
    ox_set(x, input, ox_prepare(x, p));
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        if (l->type->flags & CD_LAYER_DATA)
            continue;
        ox_layer_fn fn = ox_layer_find(l->type->name);
        if (!fn)
            return cd_layer_error(l, err, errlen, "ONNX export has no mapping for %s layers (it maps %s); remove "
                                  "the layer from the deploy stage, or use the Caffe files of the download",
                                  l->type->name, cd_onnx_export_types());
        ox_ctx c = {.l = l};
        for (int b = 0; b < l->nbottom; b++)
            if (!(c.in[b] = ox_get(x, l->bottom[b])))
                return cd_layer_error(l, err, errlen, "its bottom %s is not computed from the input \"data\" in "
                                      "the deploy stage, so the exported graph cannot have it; feed the layer "
                                      "from data", l->bottom[b]->name);
        for (int t = 0; t < l->ntop; t++) {
            const cd_blob *b = l->top[t];
            c.out[t] = ox_last_writer(net, b->name) == i && strcmp(b->name, "data") != 0 ? b->name
                                                                  : ox_fresh(x, ox_str(x, "%s/%s", b->name, l->name));
        }
        if (fn(x, &c, err, errlen) != CD_OK)
            return CD_ERR;
        for (int t = 0; t < l->ntop; t++)
            ox_set(x, l->top[t], c.out[t]);
    }
    /* the output: the deploy stage's last top, as classify reads it (infer.c) */
    const cd_blob *out = net->layers[net->nlayers - 1]->top[0];
    const char *name = ox_get(x, out);
    if (!name)
        return cd_layer_error(net->layers[net->nlayers - 1], err, errlen,
                              "its top %s is not computed from the input \"data\"; end the deploy stage in a "
                              "layer computed from data", out->name);
    if (strcmp(name, out->name) != 0 && strcmp(out->name, "data") != 0) {
        ox_node1(x, "Identity", "output", name, NULL, out->name);
        name = out->name;
    }
    int in_dims[4] = {0, p->c, p->h, p->w};
    g->name = ox_str(x, "%s", net->name ? net->name : "cdigits");
    g->n_input = 1;
    g->input = ox_new(x, sizeof *g->input);
    g->input[0] = ox_value_info(x, "data", 4, in_dims);
    g->n_output = 1;
    g->output = ox_new(x, sizeof *g->output);
    g->output[0] = ox_value_info(x, name, out->ndim, out->dims);
    g->n_node = x->nnodes;
    g->node = x->nodes;
    g->n_initializer = x->ninits;
    g->initializer = x->inits;
    return CD_OK;
}

static void ox_meta(ox_t *x, Onnx__ModelProto *m, const char *key, const char *value)
{
    Onnx__StringStringEntryProto *e = ox_new(x, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = ox_str(x, "%s", key);
    e->value = ox_str(x, "%s", value);
    Onnx__StringStringEntryProto **grown = ox_new(x, sizeof *grown * (m->n_metadata_props + 1));
    if (m->n_metadata_props)
        memcpy(grown, m->metadata_props, sizeof *grown * m->n_metadata_props);
    grown[m->n_metadata_props++] = e;
    m->metadata_props = grown;
}

static void ox_free(ox_t *x)
{
    for (size_t i = 0; i < x->nallocs; i++)
        free(x->allocs[i]);
    free(x->allocs);
    free(x->nodes);
    free(x->inits);
    free(x->vals);
    free(x->used);
    memset(x, 0, sizeof *x);
}

/* The dataset's resize mode (dataset.json), "squash" when it names none. */
static void ox_resize_mode(const char *dataset_dir, char *out, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/dataset.json", dataset_dir);
    json_t *o = json_load_file(path, 0, NULL);
    const char *mode = json_string_value(json_object_get(o, "resize_mode"));
    snprintf(out, len, "%s", mode ? mode : cd_resize_mode_name(CD_RESIZE_SQUASH));
    json_decref(o);
}

/* Packs m into path via path.tmp. */
static int ox_write(const Onnx__ModelProto *m, const char *path, char *err, size_t errlen)
{
    size_t len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = cd_xmalloc(len ? len : 1);
    onnx__model_proto__pack(m, buf);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    free(buf);
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s; check that its folder exists and can be written", path,
                 strerror(errno));
        unlink(tmp);
        return CD_ERR;
    }
    return CD_OK;
}

static const char *mean_word(int use_mean)
{
    static const char *const words[] = {[CD_MEAN_NONE] = "none", [CD_MEAN_IMAGE] = "image",
                                        [CD_MEAN_PIXEL] = "pixel"};
    return use_mean >= 0 && use_mean < (int)CD_ARRAY_LEN(words) ? words[use_mean] : "none";
}

int cd_onnx_export(const char *job_dir, long iteration, const char *out_path, char *err, size_t errlen)
{
    int rc = CD_ERR;
    ox_t x = {0};
    ox_prep p = {0};
    cd_train_config tc;
    cd_train_config_init(&tc);
    cd_classifier_t *c = NULL;
    char *labels = NULL;
    x.be = cd_backend_select(&(cd_backend_request){.kind = CD_BACKEND_CPU}, err, errlen);
    if (!x.be)
        goto out;
    if (!(c = cd_classifier_open(job_dir, iteration, x.be, err, errlen)) ||
        cd_train_config_load(&tc, job_dir, err, errlen) != CD_OK)
        goto out;
    x.net = cd_classifier_net(c);
    const cd_blob *input = cd_net_blob(x.net, "data");
    cd_classifier_image_shape(c, &p.c, &p.h, &p.w);
    p.ih = input->dims[2];
    p.iw = input->dims[3];
    p.scale = x.net->input_scale;
    p.whiten = tc.aug.whitening;
    p.use_mean = tc.use_mean;
    const char *dataset_dir = cd_classifier_dataset_dir(c);
    if (p.use_mean != CD_MEAN_NONE) {
        char path[4200];
        int mc, mh, mw;
        jobdir_path(dataset_dir, JOBDIR_MEAN_BIN, path, sizeof path);
        if (cd_mean_load(path, &mc, &mh, &mw, &p.mean) != CD_OK) {
            snprintf(err, errlen, "%s; recreate the dataset, or train with use_mean none", cd_dataset_strerror());
            goto out;
        }
        if (mc != p.c || mh != p.h || mw != p.w) {
            snprintf(err, errlen, "%s is %dx%dx%d but the images are %dx%dx%d; recreate the dataset", path, mc, mh,
                     mw, p.c, p.h, p.w);
            goto out;
        }
        if (p.use_mean == CD_MEAN_PIXEL)
            cd_mean_to_pixel(p.mean, mc, mh, mw);
    }

    Onnx__GraphProto *g = ox_new(&x, sizeof *g);
    onnx__graph_proto__init(g);
    if (ox_graph(&x, g, &p, err, errlen) != CD_OK)
        goto out;
    Onnx__OperatorSetIdProto *opset = ox_new(&x, sizeof *opset);
    onnx__operator_set_id_proto__init(opset);
    opset->domain = ox_str(&x, "%s", "");
    opset->has_version = 1;
    opset->version = OX_OPSET;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = OX_IR_VERSION;
    m.n_opset_import = 1;
    m.opset_import = ox_new(&x, sizeof *m.opset_import);
    m.opset_import[0] = opset;
    m.producer_name = ox_str(&x, "cdigits");
    m.producer_version = ox_str(&x, "%s", CDIGITS_VERSION);
    m.graph = g;
    m.doc_string = ox_str(&x, "deploy stage of %s at iteration %ld: input data is float32 NxCxHxW, pixel values "
                              "0-255 in the dataset's channel order at the dataset's size",
                          job_dir, cd_classifier_iteration(c));

    size_t used = 0, cap = 1;
    labels = cd_xmalloc(cap);
    labels[0] = 0;
    for (int i = 0; i < cd_classifier_classes(c); i++) {
        const char *lab = cd_classifier_label(c, i);
        size_t need = used + strlen(lab) + 2;
        if (need > cap) {
            cap = need * 2;
            labels = cd_xrealloc(labels, cap);
        }
        used += (size_t)snprintf(labels + used, cap - used, "%s%s", i ? "\n" : "", lab);
    }
    char mode[64];
    ox_resize_mode(dataset_dir, mode, sizeof mode);
    ox_meta(&x, &m, "labels", labels);
    ox_meta(&x, &m, "input", ox_str(&x, "float32 Nx%dx%dx%d, pixel values 0-255, channels %s, resized with %s",
                                    p.c, p.h, p.w, p.c == 3 ? "RGB" : "gray", mode));
    ox_meta(&x, &m, "channels", p.c == 3 ? "RGB" : "gray");
    ox_meta(&x, &m, "resize_mode", mode);
    ox_meta(&x, &m, "image_size", ox_str(&x, "%dx%dx%d", p.c, p.h, p.w));
    ox_meta(&x, &m, "mean", mean_word(p.use_mean));
    ox_meta(&x, &m, "scale", ox_str(&x, "%.9g", p.scale));
    ox_meta(&x, &m, "crop", p.ih != p.h || p.iw != p.w ? ox_str(&x, "%dx%d centre", p.ih, p.iw) : "none");
    ox_meta(&x, &m, "whitening", p.whiten ? "per image" : "none");
    ox_meta(&x, &m, "snapshot_iteration", ox_str(&x, "%ld", cd_classifier_iteration(c)));
    ox_meta(&x, &m, "output", m.graph->output[0]->name);
    rc = ox_write(&m, out_path, err, errlen);
out:
    free(labels);
    free(p.mean);
    cd_classifier_close(c);
    cd_backend_free(x.be);
    ox_free(&x);
    return rc;
}
