/*
 * ONNX import (docs/formats.md, "ONNX import"). The graph's nodes, in their order (ONNX
 * keeps them topologically sorted), go through one table of operators; each row checks
 * its node's attributes and input shapes, works out the output shapes and writes Caffe
 * layers and their parameter tensors. Values are tracked by name: a computed value is a
 * blob (at most 4-D, float), a constant (an initializer, a Constant node, or what an
 * Identity passes on) is a tensor the operators fold into parameters. What cdigits
 * cannot compute exactly as ONNX defines it is refused naming the node, the operator and
 * the reason.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "cdigits/jobdir.h"
#include "cdigits/onnx_import.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

#define MAX_RANK 4       /* a cdigits blob's dimensions (CD_MAX_DIMS) */
#define MAX_BOTTOMS 16   /* CD_LAYER_MAX_BLOBS */
#define MAX_PARAMS 4

enum { DT_FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

/* A value of the graph: a blob (blob set) or a constant (k set). */
typedef struct value {
    char *name;         /* ONNX name */
    char *blob;         /* prototxt blob; NULL for a constant */
    int dtype;          /* ONNX TensorProto.DataType; 0 unknown */
    int rank;           /* real rank (may exceed MAX_RANK); -1 unknown shape */
    int dims[MAX_RANK];
    double *k;          /* constant values, row-major */
    size_t kcount;
    int kdims[8], krank;
    int producer;       /* index of the layer whose top this is, or -1 */
} value;

typedef struct layer {
    char *name;
    const char *type;
    char *bottom[MAX_BOTTOMS];
    int nbottom;
    char *top;
    cd_buf param;       /* the *_param message lines, indented */
    int nparam;
    cd_onnx_param params[MAX_PARAMS];
    int ip_outputs;     /* InnerProduct: num_output, written with the bias flag below */
    int ip_bias;
    const char *stage;  /* "deploy": include { stage: "deploy" } in the one-file form */
} layer;

typedef struct imp {
    const char *path;
    long opset;
    const Onnx__GraphProto *g;
    value *vals;
    int nvals, capvals;
    layer *layers;
    int nlayers, caplayers;
    char **used;        /* layer and blob names given out */
    int nused, capused;
    const Onnx__NodeProto *node;
    char node_name[256];
    char *err;
    size_t errlen;
} imp;

/* ---- names --------------------------------------------------------------------------- */

static int name_used(const imp *m, const char *s)
{
    for (int i = 0; i < m->nused; i++)
        if (!strcmp(m->used[i], s))
            return 1;
    return 0;
}

/* A prototxt-safe name from an ONNX one (letters, digits, _ . - kept, the rest _; a
 * leading separator dropped), fallback when nothing is left, made unique with _2, _3... */
static void safe_name(const char *onnx, const char *fallback, char *base, size_t len)
{
    size_t n = 0;
    for (const char *p = onnx ? onnx : ""; *p && n < len - 1; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                 *p == '.' || *p == '-';
        char c = ok ? *p : '_';
        if (n == 0 && (c == '_' || c == '.' || c == '-'))
            continue;
        base[n++] = c;
    }
    base[n] = 0;
    if (!n)
        snprintf(base, len, "%s", fallback);
}

static char *unique_name(imp *m, const char *onnx, const char *fallback)
{
    char base[200];
    safe_name(onnx, fallback, base, sizeof base);
    char name[240];
    snprintf(name, sizeof name, "%s", base);
    for (int i = 2; name_used(m, name); i++)
        snprintf(name, sizeof name, "%s_%d", base, i);
    if (m->nused == m->capused) {
        m->capused = m->capused ? 2 * m->capused : 64;
        m->used = cd_xrealloc(m->used, (size_t)m->capused * sizeof *m->used);
    }
    m->used[m->nused++] = cd_xstrdup(name);
    return cd_xstrdup(name);
}

/* ---- errors -------------------------------------------------------------------------- */

/* "node 'NAME' (op TYPE): <text>" into m->err; returns CD_ERR. */
static int node_fail(imp *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int node_fail(imp *m, const char *fmt, ...)
{
    int n = snprintf(m->err, m->errlen, "%s: node '%s' (op %s): ", m->path, m->node_name,
                     m->node && m->node->op_type ? m->node->op_type : "?");
    if (n < 0 || (size_t)n >= m->errlen)
        return CD_ERR;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err + n, m->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return CD_ERR;
}

static const char *dims_text(const int *d, int n, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", d[i]);
    if (used < len)
        snprintf(buf + used, len - used, ")");
    return buf;
}

static const char *dtype_name(int t)
{
    static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32",
                                        "int64", "string", "bool", "float16", "double", "uint32", "uint64",
                                        "complex64", "complex128", "bfloat16"};
    if (t == 0)
        return "not a plain tensor (an optional, a sequence or an untyped value)";
    return t > 0 && (size_t)t < CD_ARRAY_LEN(names) ? names[t] : "of an unknown type";
}

/* ---- values -------------------------------------------------------------------------- */

static value *find_value(imp *m, const char *name)
{
    for (int i = m->nvals - 1; i >= 0; i--)
        if (!strcmp(m->vals[i].name, name))
            return &m->vals[i];
    return NULL;
}

static value *new_value(imp *m, const char *name)
{
    if (m->nvals == m->capvals) {
        m->capvals = m->capvals ? 2 * m->capvals : 64;
        m->vals = cd_xrealloc(m->vals, (size_t)m->capvals * sizeof *m->vals);
    }
    value *v = &m->vals[m->nvals++];
    memset(v, 0, sizeof *v);
    v->name = cd_xstrdup(name);
    v->producer = -1;
    v->rank = -1;
    return v;
}

/* Reads a TensorProto's values as doubles. CD_OK, or CD_ERR with why (a phrase). */
static int tensor_values(const Onnx__TensorProto *t, value *v, char *why, size_t wlen)
{
    if (t->n_dims > CD_ARRAY_LEN(v->kdims)) {
        snprintf(why, wlen, "has %zu dimensions", t->n_dims);
        return CD_ERR;
    }
    size_t count = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > INT32_MAX || (t->dims[i] && count > SIZE_MAX / (size_t)t->dims[i])) {
            snprintf(why, wlen, "has an impossible shape");
            return CD_ERR;
        }
        v->kdims[i] = (int)t->dims[i];
        count *= (size_t)t->dims[i];
    }
    v->krank = (int)t->n_dims;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        snprintf(why, wlen, "is stored outside the file; save the model with its weights inside "
                 "(onnx.save_model(model, path, save_as_external_data=False))");
        return CD_ERR;
    }
    int dt = t->has_data_type ? t->data_type : 0;
    /* bytes per value in raw_data, and whether the typed field is int32_data */
    static const struct {
        int type, size, in_int32, is_signed, is_float;
    } kinds[] = {
        {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, 0, 1, 1},  {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 8, 0, 1, 1},
        {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 8, 0, 1, 0},  {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 4, 1, 1, 0},
        {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, 2, 1, 1, 0},  {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 1, 1, 1, 0},
        {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, 2, 1, 0, 0}, {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 1, 1, 0, 0},
        {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, 1, 0, 0},
    };
    int k = -1;
    for (size_t i = 0; i < CD_ARRAY_LEN(kinds); i++)
        if (kinds[i].type == dt)
            k = (int)i;
    if (k < 0) {
        snprintf(why, wlen, "is of type %s, which cdigits does not read", dtype_name(dt));
        return CD_ERR;
    }
    v->dtype = dt;
    /* the values the file holds, checked against the shape before any room is made for
     * them: a shape alone (a few bytes) must not size an allocation */
    int raw = t->has_raw_data && t->raw_data.len;
    size_t have = raw ? t->raw_data.len / (size_t)kinds[k].size
                : dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT  ? t->n_float_data
                : dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? t->n_double_data
                : dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64  ? t->n_int64_data
                                                              : t->n_int32_data;
    if (have != count) {
        snprintf(why, wlen, "holds %zu values for its shape of %zu; the file is damaged", have, count);
        return CD_ERR;
    }
    v->k = cd_xcalloc(count ? count : 1, sizeof *v->k);
    v->kcount = count;
    if (raw) {
        const uint8_t *p = t->raw_data.data;
        for (size_t i = 0; i < count; i++, p += kinds[k].size) {
            switch (dt) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: { float f; memcpy(&f, p, 4); v->k[i] = f; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: { double d; memcpy(&d, p, 8); v->k[i] = d; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: { int64_t x; memcpy(&x, p, 8); v->k[i] = (double)x; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t x; memcpy(&x, p, 4); v->k[i] = x; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t x; memcpy(&x, p, 2); v->k[i] = x; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t x; memcpy(&x, p, 2); v->k[i] = x; break; }
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: v->k[i] = (int8_t)*p; break;
            default: v->k[i] = *p; break;
            }
        }
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        for (size_t i = 0; i < count; i++)
            v->k[i] = t->float_data[i];
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
        for (size_t i = 0; i < count; i++)
            v->k[i] = t->double_data[i];
    } else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        for (size_t i = 0; i < count; i++)
            v->k[i] = (double)t->int64_data[i];
    } else {
        for (size_t i = 0; i < count; i++)
            v->k[i] = kinds[k].is_signed ? (double)t->int32_data[i] : (double)(uint32_t)t->int32_data[i];
    }
    return CD_OK;
}

/* The shape a graph input's type gives; rank -1 when it has none. */
static void input_shape(const Onnx__ValueInfoProto *vi, value *v)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    v->dtype = tt->has_elem_type ? tt->elem_type : 0;
    if (!tt->shape)
        return;
    v->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < v->rank && i < MAX_RANK; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        int known = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0 &&
                    d->dim_value <= INT32_MAX;
        v->dims[i] = known ? (int)d->dim_value : 1; /* a symbolic (batch) size: one at a time */
    }
}

/* ---- a node's inputs and outputs --------------------------------------------------- */

static int n_inputs(const Onnx__NodeProto *n)
{
    int k = (int)n->n_input;
    while (k > 0 && !n->input[k - 1][0])
        k--;
    return k;
}

/* Input i of the node, or NULL when absent (an optional input left out). */
static value *input_value(imp *m, int i, int *rc)
{
    *rc = CD_OK;
    if (i >= (int)m->node->n_input || !m->node->input[i][0])
        return NULL;
    value *v = find_value(m, m->node->input[i]);
    if (!v)
        *rc = node_fail(m, "input '%s' is not a graph input, an initializer or an earlier node's output; "
                        "the graph is not in order or is incomplete", m->node->input[i]);
    return v;
}

/* Input i as a blob: computed, float, of known shape of at most 4 dimensions. */
static value *data_in(imp *m, int i)
{
    int rc;
    value *v = input_value(m, i, &rc);
    if (rc != CD_OK)
        return NULL;
    if (!v) {
        node_fail(m, "input %d is missing", i);
        return NULL;
    }
    if (!v->blob) {
        node_fail(m, "input '%s' is a constant; cdigits computes this operator on a computed tensor only "
                  "(fold the constant into the model before exporting it)", v->name);
        return NULL;
    }
    if (v->dtype != DT_FLOAT) {
        node_fail(m, "input '%s' is %s; cdigits imports float (32-bit) tensors only", v->name, dtype_name(v->dtype));
        return NULL;
    }
    if (v->rank < 0) {
        node_fail(m, "input '%s' has no shape in the graph; give the graph input a fixed shape when exporting",
                  v->name);
        return NULL;
    }
    if (v->rank > MAX_RANK || v->rank == 0) {
        node_fail(m, "input '%s' has %d dimensions; cdigits tensors have 1 to %d", v->name, v->rank, MAX_RANK);
        return NULL;
    }
    return v;
}

/* Input i as a constant (an initializer or a Constant node's output); optional: NULL
 * without an error when absent. */
static value *const_in(imp *m, int i, const char *what, int optional, int *rc)
{
    value *v = input_value(m, i, rc);
    if (*rc != CD_OK)
        return NULL;
    if (!v) {
        if (!optional)
            *rc = node_fail(m, "the %s (input %d) is missing", what, i);
        return NULL;
    }
    if (!v->k) {
        *rc = node_fail(m, "the %s '%s' is computed in the graph; cdigits imports it only as a constant "
                        "(an initializer)", what, v->name);
        return NULL;
    }
    return v;
}

/* Output i of the node as a new blob of the given shape; its name. */
static char *data_out(imp *m, int i, int rank, const int *dims)
{
    const char *onnx = m->node->output[i];
    value *v = new_value(m, onnx);
    v->blob = unique_name(m, onnx, m->node_name);
    v->dtype = DT_FLOAT;
    v->rank = rank;
    memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
    v->producer = m->nlayers - 1;
    return v->blob;
}

/* Output i of the node is the value src itself (Identity, an operator cdigits need not run). */
static void alias_out(imp *m, int i, const value *src)
{
    value s = *src;
    value *v = new_value(m, m->node->output[i]);
    char *name = v->name;
    *v = s;
    v->name = name;
    if (s.k) {
        v->k = cd_xmalloc((s.kcount + 1) * sizeof *v->k);
        memcpy(v->k, s.k, s.kcount * sizeof *v->k);
    }
    if (s.blob)
        v->blob = cd_xstrdup(s.blob);
}

/* The node has only its first output, or fails naming what else it would give. */
static int single_output(imp *m)
{
    for (size_t i = 1; i < m->node->n_output; i++)
        if (m->node->output[i][0])
            return node_fail(m, "output %zu ('%s') is asked for; cdigits computes this operator's first output only",
                             i, m->node->output[i]);
    return CD_OK;
}

/* ---- attributes ---------------------------------------------------------------------- */

static const Onnx__AttributeProto *attr(const imp *m, const char *name)
{
    for (size_t i = 0; i < m->node->n_attribute; i++)
        if (m->node->attribute[i]->name && !strcmp(m->node->attribute[i]->name, name))
            return m->node->attribute[i];
    return NULL;
}

static long attr_int(const imp *m, const char *name, long def)
{
    const Onnx__AttributeProto *a = attr(m, name);
    return a && a->has_i ? (long)a->i : def;
}

static double attr_float(const imp *m, const char *name, double def)
{
    const Onnx__AttributeProto *a = attr(m, name);
    return a && a->has_f ? a->f : def;
}

static const char *attr_str(const imp *m, const char *name, const char *def, char *buf, size_t len)
{
    const Onnx__AttributeProto *a = attr(m, name);
    if (!a || !a->has_s)
        return def;
    snprintf(buf, len, "%.*s", (int)a->s.len, (const char *)a->s.data);
    return buf;
}

/* A list of n ints into out (def when absent); CD_ERR when it has another length. */
static int attr_ints(imp *m, const char *name, int n, const long *def, long *out)
{
    const Onnx__AttributeProto *a = attr(m, name);
    if (!a || !a->n_ints) {
        memcpy(out, def, (size_t)n * sizeof *out);
        return CD_OK;
    }
    if ((int)a->n_ints != n)
        return node_fail(m, "%s has %zu values; a 2-D operator needs %d", name, a->n_ints, n);
    for (int i = 0; i < n; i++)
        out[i] = (long)a->ints[i];
    return CD_OK;
}

/* ---- layers -------------------------------------------------------------------------- */

static layer *emit(imp *m, const char *type, const char *suffix)
{
    if (m->nlayers == m->caplayers) {
        m->caplayers = m->caplayers ? 2 * m->caplayers : 32;
        m->layers = cd_xrealloc(m->layers, (size_t)m->caplayers * sizeof *m->layers);
    }
    layer *l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof *l);
    char want[300];
    snprintf(want, sizeof want, "%s%s", m->node_name, suffix ? suffix : "");
    l->name = unique_name(m, want, type);
    l->type = type;
    return l;
}

static void add_bottom(layer *l, const value *v)
{
    l->bottom[l->nbottom++] = cd_xstrdup(v->blob);
}

/* Parameter index of l, shaped dims, with count values to fill (returned). */
static float *add_param(layer *l, int ndim, const int *dims)
{
    cd_onnx_param *p = &l->params[l->nparam];
    char name[300];
    snprintf(name, sizeof name, "%s/%d", l->name, l->nparam);
    l->nparam++;
    p->name = cd_xstrdup(name);
    p->ndim = ndim;
    p->count = 1;
    for (int i = 0; i < ndim; i++) {
        p->dims[i] = dims[i];
        p->count *= (size_t)dims[i];
    }
    p->data = cd_xcalloc(p->count + 1, sizeof *p->data);
    return p->data;
}

static float *param_from(layer *l, const value *k, int ndim, const int *dims, double scale)
{
    float *d = add_param(l, ndim, dims);
    for (size_t i = 0; i < l->params[l->nparam - 1].count; i++)
        d[i] = (float)(scale * k->k[i]);
    return d;
}

/* ---- shapes shared by the spatial operators ------------------------------------------ */

typedef struct window {
    long k[2], s[2], d[2], p[2]; /* kernel, stride, dilation, (symmetric) pad: h, w */
} window;

/* Reads strides, dilations and pads (or auto_pad) for input size in[2] and kernel k[2]
 * into w. transposed: auto_pad SAME means an output of in * stride (ConvTranspose). */
static int read_window(imp *m, const int *in, const long *k, int transposed, window *w)
{
    static const long one[2] = {1, 1}, zero[4] = {0, 0, 0, 0};
    long pads[4];
    char buf[64];
    if (attr_ints(m, "strides", 2, one, w->s) || attr_ints(m, "dilations", 2, one, w->d) ||
        attr_ints(m, "pads", 4, zero, pads))
        return CD_ERR;
    const char *ap = attr_str(m, "auto_pad", "NOTSET", buf, sizeof buf);
    for (int i = 0; i < 2; i++) {
        w->k[i] = k[i];
        if (w->s[i] < 1 || w->d[i] < 1 || k[i] < 1)
            return node_fail(m, "kernel, strides and dilations must be positive");
        long eff = (k[i] - 1) * w->d[i] + 1, total;
        if (!strcmp(ap, "NOTSET")) {
            if (pads[i] != pads[i + 2]) {
                char t[64];
                long pl[4] = {pads[0], pads[1], pads[2], pads[3]};
                snprintf(t, sizeof t, "[%ld, %ld, %ld, %ld]", pl[0], pl[1], pl[2], pl[3]);
                return node_fail(m, "pads %s pad the %s side unevenly; cdigits (as Caffe) pads both sides of "
                                 "an axis alike", t, i ? "width" : "height");
            }
            if (pads[i] < 0)
                return node_fail(m, "pads must not be negative");
            w->p[i] = pads[i];
            continue;
        }
        if (!strcmp(ap, "VALID")) {
            w->p[i] = 0;
            continue;
        }
        if (strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER"))
            return node_fail(m, "auto_pad \"%s\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ap);
        if (transposed)
            total = w->s[i] * (in[i] - 1) + eff - (long)in[i] * w->s[i];
        else
            total = ((in[i] + w->s[i] - 1) / w->s[i] - 1) * w->s[i] + eff - in[i];
        if (total < 0)
            total = 0;
        if (total % 2)
            return node_fail(m, "auto_pad %s pads the %s by %ld in all, more on one side than the other; cdigits "
                             "(as Caffe) pads both sides alike", ap, i ? "width" : "height", total);
        w->p[i] = total / 2;
    }
    return CD_OK;
}

/* "kernel_h: 3\n kernel_w: 3 ..." lines of a convolution or pooling parameter. */
static void window_text(cd_buf *b, const window *w, int dilation)
{
    static const char *const names[4][2] = {{"kernel_h", "kernel_w"}, {"stride_h", "stride_w"},
                                            {"pad_h", "pad_w"}, {"dilation", "dilation"}};
    const long *v[4] = {w->k, w->s, w->p, w->d};
    static const char *const one[4] = {"kernel_size", "stride", "pad", "dilation"};
    static const long def[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        if (i == 3 && !dilation)
            continue;
        if (v[i][0] == v[i][1]) {
            if (v[i][0] != def[i])
                cd_buf_printf(b, "    %s: %ld\n", one[i], v[i][0]);
        } else if (i == 3) {
            cd_buf_printf(b, "    dilation: %ld\n    dilation: %ld\n", v[i][0], v[i][1]);
        } else {
            cd_buf_printf(b, "    %s: %ld\n    %s: %ld\n", names[i][0], v[i][0], names[i][1], v[i][1]);
        }
    }
}

static value *image_in(imp *m)
{
    value *x = data_in(m, 0);
    if (x && x->rank != 4) {
        char s[96];
        node_fail(m, "input '%s' is %s, %d-D; cdigits runs this operator on 4-D (N, C, H, W) images only", x->name,
                  dims_text(x->dims, x->rank, s, sizeof s), x->rank);
        return NULL;
    }
    return x;
}

/* ---- operators ----------------------------------------------------------------------- */

/* Conv and ConvTranspose -> Convolution and Deconvolution; weights (M, C/group, kh, kw)
 * for both in ONNX and Caffe (ConvTranspose's are (C, M/group, kh, kw) in both). */
static int conv_common(imp *m, int transposed)
{
    int rc;
    value *x = image_in(m);
    if (!x)
        return CD_ERR;
    value *w = const_in(m, 1, "weight", 0, &rc);
    if (!w)
        return CD_ERR;
    value *b = const_in(m, 2, "bias", 1, &rc);
    if (rc != CD_OK || single_output(m))
        return CD_ERR;
    char s[96];
    if (w->krank != 4)
        return node_fail(m, "weight '%s' is %s; a 2-D convolution's is 4-D", w->name,
                         dims_text(w->kdims, w->krank, s, sizeof s));
    long group = attr_int(m, "group", 1);
    int cin = x->dims[1];
    if (group < 1 || cin % group)
        return node_fail(m, "group %ld does not divide the %d input channels", group, cin);
    int outc = transposed ? w->kdims[1] * (int)group : w->kdims[0];
    if ((transposed && w->kdims[0] != cin) || (!transposed && w->kdims[1] * group != cin))
        return node_fail(m, "weight '%s' of shape %s does not fit %d input channels in %ld groups", w->name,
                         dims_text(w->kdims, 4, s, sizeof s), cin, group);
    if (b && (int)b->kcount != outc)
        return node_fail(m, "bias '%s' has %zu values for %d output channels", b->name, b->kcount, outc);
    long k[2] = {w->kdims[2], w->kdims[3]}, ks[2];
    if (attr_ints(m, "kernel_shape", 2, k, ks))
        return CD_ERR;
    if (ks[0] != k[0] || ks[1] != k[1])
        return node_fail(m, "kernel_shape [%ld, %ld] differs from the weight's %ldx%ld", ks[0], ks[1], k[0], k[1]);
    window win;
    if (read_window(m, x->dims + 2, k, transposed, &win))
        return CD_ERR;
    int out[4] = {x->dims[0], outc, 0, 0};
    if (transposed) {
        static const long zero[2] = {0, 0};
        long op[2], os[2];
        if (attr_ints(m, "output_padding", 2, zero, op))
            return CD_ERR;
        const Onnx__AttributeProto *shape = attr(m, "output_shape");
        for (int i = 0; i < 2; i++) {
            long full = win.s[i] * (x->dims[2 + i] - 1) + (k[i] - 1) * win.d[i] + 1;
            if (shape && shape->n_ints >= 2) {
                /* ONNX pads total = full + output_padding - output_shape, the odd one at the end for
                 * SAME_UPPER, at the start otherwise; exact when what is left is full with pad each side */
                char buf[64];
                os[i] = (long)shape->ints[shape->n_ints - 2 + i];
                long total = full + op[i] - os[i];
                long begin = !strcmp(attr_str(m, "auto_pad", "NOTSET", buf, sizeof buf), "SAME_UPPER")
                                 ? total / 2 : total - total / 2;
                if (begin < 0 || os[i] != full - 2 * begin)
                    return node_fail(m, "output_shape %ld on the %s is not the full %ld with the same padding on "
                                     "both sides, which is all cdigits's Deconvolution (as Caffe's) gives", os[i],
                                     i ? "width" : "height", full);
                win.p[i] = begin;
                op[i] = 0;
            }
            if (op[i])
                return node_fail(m, "output_padding %ld adds a row or column on one side only; cdigits's "
                                 "Deconvolution (as Caffe's) cannot", op[i]);
            out[2 + i] = (int)(full - 2 * win.p[i]);
        }
    } else {
        for (int i = 0; i < 2; i++)
            out[2 + i] = (int)((x->dims[2 + i] + 2 * win.p[i] - ((k[i] - 1) * win.d[i] + 1)) / win.s[i] + 1);
    }
    if (out[2] < 1 || out[3] < 1)
        return node_fail(m, "the output would be %dx%d: the kernel does not fit the %dx%d input", out[2], out[3],
                         x->dims[2], x->dims[3]);
    layer *l = emit(m, transposed ? "Deconvolution" : "Convolution", NULL);
    add_bottom(l, x);
    cd_buf_printf(&l->param, "  convolution_param {\n    num_output: %d\n", outc);
    if (!b)
        cd_buf_printf(&l->param, "    bias_term: false\n");
    window_text(&l->param, &win, 1);
    if (group != 1)
        cd_buf_printf(&l->param, "    group: %ld\n", group);
    cd_buf_printf(&l->param, "  }\n");
    param_from(l, w, 4, w->kdims, 1.0);
    if (b)
        param_from(l, b, 1, &outc, 1.0);
    l->top = cd_xstrdup(data_out(m, 0, 4, out));
    return CD_OK;
}

static int op_conv(imp *m) { return conv_common(m, 0); }
static int op_conv_transpose(imp *m) { return conv_common(m, 1); }

/* MaxPool and AveragePool -> Pooling. ONNX rounds the output size down unless
 * ceil_mode; cdigits's round_mode FLOOR is exactly that, its CEIL (Caffe's) rounds up
 * and drops a last window that would start in the padding. An average is over the
 * window clipped to the padded image (Caffe), which is ONNX's count_include_pad 1 when no
 * window reaches past the padding, and its count_include_pad 0 when there is no padding. */
static int pool_common(imp *m, int ave)
{
    value *x = image_in(m);
    if (!x || single_output(m))
        return CD_ERR;
    const Onnx__AttributeProto *ka = attr(m, "kernel_shape");
    if (!ka || ka->n_ints != 2)
        return node_fail(m, "kernel_shape must have 2 values (a 2-D pooling)");
    long k[2] = {(long)ka->ints[0], (long)ka->ints[1]};
    window win;
    if (read_window(m, x->dims + 2, k, 0, &win))
        return CD_ERR;
    if (win.d[0] != 1 || win.d[1] != 1)
        return node_fail(m, "dilations [%ld, %ld]: cdigits's Pooling has no dilation", win.d[0], win.d[1]);
    long ceil_mode = attr_int(m, "ceil_mode", 0), include_pad = attr_int(m, "count_include_pad", 0);
    int out[4] = {x->dims[0], x->dims[1], 0, 0};
    for (int i = 0; i < 2; i++) {
        long in = x->dims[2 + i], span = in + 2 * win.p[i] - k[i];
        if (span < 0)
            return node_fail(m, "kernel %ld is larger than the padded input %ld", k[i], in + 2 * win.p[i]);
        if (win.p[i] >= k[i])
            return node_fail(m, "pad %ld is not smaller than kernel %ld, which cdigits's Pooling requires", win.p[i],
                             k[i]);
        long o = span / win.s[i] + 1;
        if (ceil_mode) {
            long onnx = (span + win.s[i] - 1) / win.s[i] + 1, caffe = onnx;
            if (win.p[i] && (caffe - 1) * win.s[i] >= in + win.p[i])
                caffe--;
            if (onnx != caffe)
                return node_fail(m, "ceil_mode 1 gives %ld outputs on the %s where cdigits's rounding up (Caffe's) "
                                 "gives %ld: its last window would start in the padding", onnx,
                                 i ? "width" : "height", caffe);
            o = onnx;
        }
        int past = (o - 1) * win.s[i] + k[i] > in + 2 * win.p[i];
        if (ave && !include_pad && win.p[i])
            return node_fail(m, "count_include_pad 0 with pads %ld: ONNX averages the pixels inside the image, "
                             "cdigits (as Caffe) counts the padding too; export with count_include_pad=1 or no "
                             "padding", win.p[i]);
        if (ave && include_pad && past)
            return node_fail(m, "count_include_pad 1 with a last window reaching past the padding (ceil_mode): "
                             "ONNX and cdigits divide it by different counts");
        out[2 + i] = (int)o;
    }
    layer *l = emit(m, "Pooling", NULL);
    add_bottom(l, x);
    cd_buf_printf(&l->param, "  pooling_param {\n    pool: %s\n", ave ? "AVE" : "MAX");
    window_text(&l->param, &win, 0);
    if (!ceil_mode)
        cd_buf_printf(&l->param, "    round_mode: FLOOR\n");
    cd_buf_printf(&l->param, "  }\n");
    l->top = cd_xstrdup(data_out(m, 0, 4, out));
    return CD_OK;
}

static int op_maxpool(imp *m)
{
    long order = attr_int(m, "storage_order", 0);
    (void)order; /* it orders the indices output only, which single_output refuses */
    return pool_common(m, 0);
}
static int op_avgpool(imp *m) { return pool_common(m, 1); }

static int global_pool(imp *m, const char *pool)
{
    value *x = image_in(m);
    if (!x || single_output(m))
        return CD_ERR;
    layer *l = emit(m, "Pooling", NULL);
    add_bottom(l, x);
    cd_buf_printf(&l->param, "  pooling_param {\n    pool: %s\n    global_pooling: true\n  }\n", pool);
    int out[4] = {x->dims[0], x->dims[1], 1, 1};
    l->top = cd_xstrdup(data_out(m, 0, 4, out));
    return CD_OK;
}

static int op_global_avg(imp *m) { return global_pool(m, "AVE"); }
static int op_global_max(imp *m) { return global_pool(m, "MAX"); }

/* An InnerProduct of x (M, K) with weights w (N, K); bias NULL for none. */
static layer *inner_product(imp *m, const value *x, int n)
{
    layer *l = emit(m, "InnerProduct", NULL);
    add_bottom(l, x);
    l->ip_outputs = n;
    int out[2] = {x->dims[0], n};
    l->top = cd_xstrdup(data_out(m, 0, 2, out));
    return l;
}

static value *matrix_in(imp *m)
{
    value *a = data_in(m, 0);
    if (a && a->rank != 2) {
        char s[96];
        node_fail(m, "input '%s' is %s; cdigits imports this operator on a 2-D (N, K) input only (a Flatten "
                  "before it makes one)", a->name, dims_text(a->dims, a->rank, s, sizeof s));
        return NULL;
    }
    return a;
}

/* Gemm: Y = alpha * A' B' + beta * C -> InnerProduct with weights alpha * B' (as (N, K))
 * and bias beta * C (one value per output). */
static int op_gemm(imp *m)
{
    int rc;
    value *a = matrix_in(m);
    if (!a)
        return CD_ERR;
    value *b = const_in(m, 1, "weight (B)", 0, &rc);
    if (!b)
        return CD_ERR;
    value *c = const_in(m, 2, "bias (C)", 1, &rc);
    if (rc != CD_OK || single_output(m))
        return CD_ERR;
    if (attr_int(m, "transA", 0))
        return node_fail(m, "transA 1 transposes the computed input, which cdigits's InnerProduct cannot");
    int tb = (int)attr_int(m, "transB", 0);
    double alpha = attr_float(m, "alpha", 1.0), beta = attr_float(m, "beta", 1.0);
    char s[96];
    if (b->krank != 2)
        return node_fail(m, "B '%s' is %s; Gemm's B is 2-D", b->name, dims_text(b->kdims, b->krank, s, sizeof s));
    int kk = tb ? b->kdims[1] : b->kdims[0], n = tb ? b->kdims[0] : b->kdims[1];
    if (kk != a->dims[1])
        return node_fail(m, "B of shape %s does not fit the %d inputs of '%s'", dims_text(b->kdims, 2, s, sizeof s),
                         a->dims[1], a->name);
    int use_c = c && beta != 0.0;
    if (use_c && !(c->kcount == 1 || ((int)c->kcount == n && c->kdims[c->krank ? c->krank - 1 : 0] == n)))
        return node_fail(m, "C '%s' of shape %s is not one bias per output (%d): cdigits's InnerProduct adds a "
                         "vector bias only", c->name, dims_text(c->kdims, c->krank, s, sizeof s), n);
    layer *l = inner_product(m, a, n);
    int wd[2] = {n, kk};
    float *w = add_param(l, 2, wd);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < kk; j++)
            w[(size_t)i * kk + j] = (float)(alpha * b->k[tb ? (size_t)i * kk + j : (size_t)j * n + i]);
    if (use_c) {
        float *bias = add_param(l, 1, &n);
        for (int i = 0; i < n; i++)
            bias[i] = (float)(beta * c->k[c->kcount == 1 ? 0 : i]);
        l->ip_bias = 1;
    }
    return CD_OK;
}

/* MatMul of a computed (M, K) and a constant (K, N) -> InnerProduct without bias (an Add
 * of a bias right after it becomes its bias: op_add). */
static int op_matmul(imp *m)
{
    int rc;
    value *a = matrix_in(m);
    if (!a)
        return CD_ERR;
    value *b = input_value(m, 1, &rc);
    if (rc != CD_OK || single_output(m))
        return CD_ERR;
    if (!b || !b->k)
        return node_fail(m, "cdigits imports MatMul by a constant 2-D weight (an initializer) only");
    char s[96];
    if (b->krank != 2 || b->kdims[0] != a->dims[1])
        return node_fail(m, "weight '%s' of shape %s does not fit the %d inputs of '%s' (it must be (K, N))",
                         b->name, dims_text(b->kdims, b->krank, s, sizeof s), a->dims[1], a->name);
    int kk = b->kdims[0], n = b->kdims[1];
    layer *l = inner_product(m, a, n);
    int wd[2] = {n, kk};
    float *w = add_param(l, 2, wd);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < kk; j++)
            w[(size_t)i * kk + j] = (float)b->k[(size_t)j * n + i];
    return CD_OK;
}

static int same_dims(const value *a, const value *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

/* How many nodes read the value called name, and graph outputs that are it. */
static int readers(const imp *m, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < m->g->n_node; i++)
        for (size_t j = 0; j < m->g->node[i]->n_input; j++)
            n += !strcmp(m->g->node[i]->input[j], name);
    for (size_t i = 0; i < m->g->n_output; i++)
        n += !strcmp(m->g->output[i]->name, name);
    return n;
}

/* Add of a constant: the bias of the InnerProduct (MatMul, or Gemm without C) it
 * follows, or a single number (Power's shift); Mul by a single number: Power's scale. */
static int fold_constant(imp *m, value *x, const value *k, int add)
{
    char s[96], t[96];
    layer *ip = x->producer >= 0 ? &m->layers[x->producer] : NULL;
    if (add && ip && !strcmp(ip->type, "InnerProduct") && !ip->ip_bias && readers(m, x->name) == 1 &&
        (int)k->kcount == ip->ip_outputs && k->krank >= 1 && k->kdims[k->krank - 1] == ip->ip_outputs &&
        k->krank <= 2) {
        int n = ip->ip_outputs;
        param_from(ip, k, 1, &n, 1.0);
        ip->ip_bias = 1;
        alias_out(m, 0, x);
        return CD_OK;
    }
    if (k->kcount == 1 && k->krank <= x->rank) {
        layer *l = emit(m, "Power", NULL);
        add_bottom(l, x);
        cd_buf_printf(&l->param, "  power_param {\n    %s: %.9g\n  }\n", add ? "shift" : "scale", k->k[0]);
        l->top = cd_xstrdup(data_out(m, 0, x->rank, x->dims));
        return CD_OK;
    }
    return node_fail(m, "input '%s' is a constant of shape %s added to '%s' of shape %s: cdigits's Eltwise "
                     "combines computed tensors of one shape; it folds only a bias right after MatMul or "
                     "Gemm and a single number", k->name, dims_text(k->kdims, k->krank, s, sizeof s), x->name,
                     dims_text(x->dims, x->rank, t, sizeof t));
}

/* Add, Mul and Max of computed tensors of one shape -> Eltwise. */
static int eltwise(imp *m, const char *operation, int fold)
{
    int n = n_inputs(m->node), rc;
    if (single_output(m))
        return CD_ERR;
    if (n < 1 || n > MAX_BOTTOMS)
        return node_fail(m, "%d inputs; cdigits's Eltwise takes 1 to %d", n, MAX_BOTTOMS);
    value *in[MAX_BOTTOMS];
    int nconst = 0;
    for (int i = 0; i < n; i++) {
        in[i] = input_value(m, i, &rc);
        if (rc != CD_OK)
            return CD_ERR;
        if (!in[i])
            return node_fail(m, "input %d is missing", i);
        nconst += in[i]->k != NULL;
    }
    if (nconst && fold && n == 2 && nconst == 1) {
        value *x = data_in(m, in[0]->k ? 1 : 0);
        return x ? fold_constant(m, x, in[0]->k ? in[0] : in[1], !strcmp(operation, "SUM")) : CD_ERR;
    }
    for (int i = 0; i < n; i++)
        if (!data_in(m, i))
            return CD_ERR;
    for (int i = 1; i < n; i++) {
        if (!same_dims(in[0], in[i])) {
            char s[96], t[96];
            return node_fail(m, "inputs '%s' %s and '%s' %s differ in shape; ONNX broadcasts them, cdigits's "
                             "Eltwise combines tensors of one shape only", in[0]->name,
                             dims_text(in[0]->dims, in[0]->rank, s, sizeof s), in[i]->name,
                             dims_text(in[i]->dims, in[i]->rank, t, sizeof t));
        }
    }
    if (n == 1) {
        alias_out(m, 0, in[0]);
        return CD_OK;
    }
    layer *l = emit(m, "Eltwise", NULL);
    for (int i = 0; i < n; i++)
        add_bottom(l, in[i]);
    cd_buf_printf(&l->param, "  eltwise_param {\n    operation: %s\n  }\n", operation);
    l->top = cd_xstrdup(data_out(m, 0, in[0]->rank, in[0]->dims));
    return CD_OK;
}

static int op_add(imp *m) { return eltwise(m, "SUM", 1); }
static int op_mul(imp *m) { return eltwise(m, "PROD", 1); }
static int op_max(imp *m) { return eltwise(m, "MAX", 0); }

/* A layer of one bottom and a top of its shape; param text may be NULL. */
static int unary(imp *m, const char *type, const char *param)
{
    value *x = data_in(m, 0);
    if (!x || single_output(m))
        return CD_ERR;
    layer *l = emit(m, type, NULL);
    add_bottom(l, x);
    if (param)
        cd_buf_printf(&l->param, "%s", param);
    l->top = cd_xstrdup(data_out(m, 0, x->rank, x->dims));
    return CD_OK;
}

static int op_relu(imp *m) { return unary(m, "ReLU", NULL); }
static int op_sigmoid(imp *m) { return unary(m, "Sigmoid", NULL); }
static int op_tanh(imp *m) { return unary(m, "TanH", NULL); }

static int op_leaky_relu(imp *m)
{
    char p[128];
    snprintf(p, sizeof p, "  relu_param {\n    negative_slope: %.9g\n  }\n", attr_float(m, "alpha", 0.01));
    return unary(m, "ReLU", p);
}

/* LRN: x / (bias + alpha/size * sum x^2)^beta over size channels; Caffe's k is bias. */
static int op_lrn(imp *m)
{
    if (!image_in(m))
        return CD_ERR;
    long size = attr_int(m, "size", 0);
    if (size < 1 || size % 2 == 0)
        return node_fail(m, "size %ld: cdigits's LRN (as Caffe's) needs an odd size, centred on the channel", size);
    char p[256];
    snprintf(p, sizeof p, "  lrn_param {\n    local_size: %ld\n    alpha: %.9g\n    beta: %.9g\n    k: %.9g\n  }\n",
             size, attr_float(m, "alpha", 1e-4), attr_float(m, "beta", 0.75), attr_float(m, "bias", 1.0));
    return unary(m, "LRN", p);
}

/* BatchNormalization (inference) -> BatchNorm with the stored mean and variance (scale
 * factor 1) and a Scale with gamma and beta. */
static int op_batchnorm(imp *m)
{
    int rc;
    value *x = data_in(m, 0);
    if (!x || single_output(m))
        return CD_ERR;
    if (x->rank < 2)
        return node_fail(m, "input '%s' is 1-D; BatchNormalization needs (N, C, ...)", x->name);
    if (attr_int(m, "training_mode", 0))
        return node_fail(m, "training_mode 1 normalizes by the batch's own statistics; cdigits imports the "
                         "inference form (training_mode 0)");
    if (!attr_int(m, "spatial", 1))
        return node_fail(m, "spatial 0 keeps statistics per pixel; cdigits's BatchNorm keeps one per channel");
    static const char *const what[4] = {"scale", "bias (B)", "mean", "variance"};
    value *k[4];
    int c = x->dims[1];
    for (int i = 0; i < 4; i++) {
        k[i] = const_in(m, i + 1, what[i], 0, &rc);
        if (!k[i])
            return CD_ERR;
        if ((int)k[i]->kcount != c)
            return node_fail(m, "the %s '%s' has %zu values for %d channels", what[i], k[i]->name, k[i]->kcount, c);
    }
    layer *bn = emit(m, "BatchNorm", NULL);
    add_bottom(bn, x);
    cd_buf_printf(&bn->param, "  batch_norm_param {\n    eps: %.9g\n  }\n", attr_float(m, "epsilon", 1e-5));
    param_from(bn, k[2], 1, &c, 1.0);
    param_from(bn, k[3], 1, &c, 1.0);
    int one = 1;
    add_param(bn, 1, &one)[0] = 1.0f;
    char want[300];
    snprintf(want, sizeof want, "%s_normalized", m->node->output[0]);
    bn->top = unique_name(m, want, "normalized");
    layer *sc = emit(m, "Scale", "_scale");
    sc->bottom[sc->nbottom++] = cd_xstrdup(bn->top);
    cd_buf_printf(&sc->param, "  scale_param {\n    bias_term: true\n  }\n");
    param_from(sc, k[0], 1, &c, 1.0);
    param_from(sc, k[1], 1, &c, 1.0);
    sc->top = cd_xstrdup(data_out(m, 0, x->rank, x->dims));
    return CD_OK;
}

static int op_concat(imp *m)
{
    int n = n_inputs(m->node);
    if (single_output(m))
        return CD_ERR;
    if (n < 1 || n > MAX_BOTTOMS)
        return node_fail(m, "%d inputs; cdigits's Concat takes 1 to %d", n, MAX_BOTTOMS);
    value *in[MAX_BOTTOMS];
    for (int i = 0; i < n; i++)
        if (!(in[i] = data_in(m, i)))
            return CD_ERR;
    int rank = in[0]->rank;
    long axis = attr_int(m, "axis", 1);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank)
        return node_fail(m, "axis %ld is outside the %d-D inputs", attr_int(m, "axis", 1), rank);
    int out[MAX_RANK];
    memcpy(out, in[0]->dims, sizeof out);
    for (int i = 1; i < n; i++) {
        int ok = in[i]->rank == rank;
        for (int d = 0; ok && d < rank; d++)
            ok = d == axis || in[i]->dims[d] == in[0]->dims[d];
        if (!ok) {
            char s[96], t[96];
            return node_fail(m, "inputs '%s' %s and '%s' %s differ in shape off axis %ld", in[0]->name,
                             dims_text(in[0]->dims, rank, s, sizeof s), in[i]->name,
                             dims_text(in[i]->dims, in[i]->rank, t, sizeof t), axis);
        }
        out[axis] += in[i]->dims[axis];
    }
    layer *l = emit(m, "Concat", NULL);
    for (int i = 0; i < n; i++)
        add_bottom(l, in[i]);
    cd_buf_printf(&l->param, "  concat_param {\n    axis: %ld\n  }\n", axis);
    l->top = cd_xstrdup(data_out(m, 0, rank, out));
    return CD_OK;
}

/* Dropout: the identity at inference; a Dropout layer of its ratio for training. */
static int op_dropout(imp *m)
{
    int rc;
    value *x = data_in(m, 0);
    if (!x || single_output(m))
        return CD_ERR;
    double ratio = attr_float(m, "ratio", 0.5);
    value *r = const_in(m, 1, "ratio", 1, &rc);
    if (rc != CD_OK)
        return CD_ERR;
    value *mode = const_in(m, 2, "training_mode", 1, &rc);
    if (rc != CD_OK)
        return CD_ERR;
    if (mode && mode->kcount && mode->k[0] != 0)
        return node_fail(m, "training_mode true drops values at random; cdigits imports the inference form");
    if (r && r->kcount)
        ratio = r->k[0];
    if (ratio < 0 || ratio >= 1)
        return node_fail(m, "ratio %g is outside [0, 1)", ratio);
    char p[96];
    snprintf(p, sizeof p, "  dropout_param {\n    dropout_ratio: %.9g\n  }\n", ratio);
    return unary(m, "Dropout", p);
}

/* Softmax: opset 13 normalizes along axis (default -1); before, along the flattened
 * axes from axis on (default 1), which is one axis when those after it are all 1. */
static int op_softmax(imp *m)
{
    value *x = data_in(m, 0);
    if (!x)
        return CD_ERR;
    long axis = attr_int(m, "axis", m->opset >= 13 ? -1 : 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return node_fail(m, "axis %ld is outside the %d-D input", attr_int(m, "axis", 1), x->rank);
    if (m->opset < 13)
        for (int d = (int)axis + 1; d < x->rank; d++)
            if (x->dims[d] != 1) {
                char s[96];
                return node_fail(m, "opset %ld normalizes over all axes from %ld on of %s together; cdigits's "
                                 "Softmax normalizes along one axis (add a Flatten before it, or export with "
                                 "opset 13)", m->opset, axis, dims_text(x->dims, x->rank, s, sizeof s));
            }
    char p[64];
    snprintf(p, sizeof p, "  softmax_param {\n    axis: %ld\n  }\n", axis);
    return unary(m, "Softmax", axis == 1 ? NULL : p);
}

static int flatten_to(imp *m, value *x, const char *why)
{
    if (x->rank < 2)
        return node_fail(m, "input '%s' is 1-D; %s", x->name, why);
    layer *l = emit(m, "Flatten", NULL);
    add_bottom(l, x);
    int out[2] = {x->dims[0], 1};
    for (int d = 1; d < x->rank; d++)
        out[1] *= x->dims[d];
    l->top = cd_xstrdup(data_out(m, 0, 2, out));
    return CD_OK;
}

static int op_flatten(imp *m)
{
    value *x = data_in(m, 0);
    if (!x || single_output(m))
        return CD_ERR;
    long axis = attr_int(m, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis != 1)
        return node_fail(m, "axis %ld: cdigits imports the Flatten to (N, everything else), axis 1, only",
                         attr_int(m, "axis", 1));
    return flatten_to(m, x, "Flatten needs (N, ...)");
}

/* Reshape where it is a flatten: a constant shape ([N, -1], [0, -1], [-1, K]) giving
 * (N, everything else); a shape the input already has passes it on. */
static int op_reshape(imp *m)
{
    int rc;
    value *x = data_in(m, 0);
    if (!x || single_output(m))
        return CD_ERR;
    value *sh = const_in(m, 1, "shape", 0, &rc);
    if (!sh)
        return CD_ERR;
    if (sh->kcount < 1 || sh->kcount > MAX_RANK)
        return node_fail(m, "shape '%s' has %zu values; cdigits tensors have 1 to %d dimensions", sh->name,
                         sh->kcount, MAX_RANK);
    long allowzero = attr_int(m, "allowzero", 0);
    int out[MAX_RANK], n = (int)sh->kcount, infer = -1;
    size_t total = 1, known = 1;
    for (int d = 0; d < x->rank; d++)
        total *= (size_t)x->dims[d];
    for (int i = 0; i < n; i++) {
        double v = sh->k[i];
        if (v == 0 && !allowzero && i < x->rank)
            out[i] = x->dims[i];
        else if (v == -1 && infer < 0)
            infer = i, out[i] = 1;
        else if (v >= 1 && v <= INT32_MAX)
            out[i] = (int)v;
        else
            return node_fail(m, "shape value %g at %d is not one cdigits can reshape to", v, i);
        known *= (size_t)out[i];
    }
    if (infer >= 0 && known && total % known == 0)
        out[infer] = (int)(total / known);
    size_t got = 1;
    for (int i = 0; i < n; i++)
        got *= (size_t)out[i];
    char s[96], t[96];
    if (got != total)
        return node_fail(m, "shape %s does not hold the %zu values of '%s'", dims_text(out, n, s, sizeof s), total,
                         x->name);
    int same = n == x->rank;
    for (int i = 0; same && i < n; i++)
        same = out[i] == x->dims[i];
    if (same) {
        alias_out(m, 0, x);
        return CD_OK;
    }
    if (n == 2 && x->rank >= 2 && out[0] == x->dims[0])
        return flatten_to(m, x, "");
    return node_fail(m, "reshaping %s to %s: cdigits imports a Reshape only where it flattens (N, ...) to "
                     "(N, -1)", dims_text(x->dims, x->rank, s, sizeof s), dims_text(out, n, t, sizeof t));
}

static int op_identity(imp *m)
{
    int rc;
    value *x = input_value(m, 0, &rc);
    if (rc != CD_OK)
        return CD_ERR;
    if (!x)
        return node_fail(m, "input 0 is missing");
    if (x->blob && !data_in(m, 0))
        return CD_ERR;
    alias_out(m, 0, x);
    return CD_OK;
}

/* Constant: a tensor (value) or a number or list (value_float(s), value_int(s)). */
static int op_constant(imp *m)
{
    value *v = new_value(m, m->node->output[0]);
    const Onnx__AttributeProto *a = attr(m, "value");
    char why[256];
    if (a && a->t)
        return tensor_values(a->t, v, why, sizeof why) == CD_OK ? CD_OK : node_fail(m, "its value %s", why);
    static const char *const lists[] = {"value_float", "value_floats", "value_int", "value_ints"};
    for (size_t i = 0; i < CD_ARRAY_LEN(lists); i++) {
        if (!(a = attr(m, lists[i])))
            continue;
        size_t n = i == 0 || i == 2 ? 1 : i == 1 ? a->n_floats : a->n_ints;
        v->k = cd_xcalloc(n + 1, sizeof *v->k);
        v->kcount = n;
        v->krank = i == 0 || i == 2 ? 0 : 1;
        v->kdims[0] = (int)n;
        v->dtype = i < 2 ? DT_FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        for (size_t j = 0; j < n; j++)
            v->k[j] = i == 0 ? a->f : i == 1 ? a->floats[j] : i == 2 ? (double)a->i : (double)a->ints[j];
        return CD_OK;
    }
    return node_fail(m, "cdigits reads a Constant's value, value_float(s) or value_int(s) only");
}

typedef struct op_row {
    const char *op;
    int (*run)(imp *m);
    int since;          /* the opset whose definition the row implements (unchanged since) */
} op_row;

/* The operators, by name (sorted: the list in messages reads in this order). */
static const op_row g_ops[] = {
    {"Add", op_add, 7},
    {"AveragePool", op_avgpool, 1},
    {"BatchNormalization", op_batchnorm, 7},
    {"Concat", op_concat, 4},
    {"Constant", op_constant, 1},
    {"Conv", op_conv, 1},
    {"ConvTranspose", op_conv_transpose, 1},
    {"Dropout", op_dropout, 7},
    {"Flatten", op_flatten, 1},
    {"Gemm", op_gemm, 7},
    {"GlobalAveragePool", op_global_avg, 1},
    {"GlobalMaxPool", op_global_max, 1},
    {"Identity", op_identity, 1},
    {"LRN", op_lrn, 1},
    {"LeakyRelu", op_leaky_relu, 6},
    {"MatMul", op_matmul, 1},
    {"Max", op_max, 6},
    {"MaxPool", op_maxpool, 1},
    {"Mul", op_mul, 7},
    {"Relu", op_relu, 6},
    {"Reshape", op_reshape, 5},
    {"Sigmoid", op_sigmoid, 6},
    {"Softmax", op_softmax, 1},
    {"Tanh", op_tanh, 6},
};

const char *cd_onnx_supported_ops(void)
{
    static char list[512];
    if (!list[0]) {
        size_t used = 0;
        for (size_t i = 0; i < CD_ARRAY_LEN(g_ops) && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", g_ops[i].op);
    }
    return list;
}

/* ---- writing the prototxt ------------------------------------------------------------ */

static void write_layer(cd_buf *b, const layer *l, int one_file)
{
    cd_buf_printf(b, "layer {\n  name: \"%s\"\n  type: \"%s\"\n", l->name, l->type);
    for (int i = 0; i < l->nbottom; i++)
        cd_buf_printf(b, "  bottom: \"%s\"\n", l->bottom[i]);
    cd_buf_printf(b, "  top: \"%s\"\n", l->top);
    if (one_file && l->stage)
        cd_buf_printf(b, "  include { stage: \"%s\" }\n", l->stage);
    if (!strcmp(l->type, "InnerProduct"))
        cd_buf_printf(b, "  inner_product_param {\n    num_output: %d\n%s  }\n", l->ip_outputs,
                      l->ip_bias ? "" : "    bias_term: false\n");
    if (l->param.p)
        cd_buf_put(b, l->param.p, l->param.n);
    cd_buf_printf(b, "}\n");
}

static void write_header(cd_buf *b, imp *m, const Onnx__GraphProto *g, const cd_onnx_model *out)
{
    const char *base = strrchr(m->path, '/');
    cd_buf_printf(b, "# Imported from the ONNX model %s (opset %ld): %d layers.\n", base ? base + 1 : m->path,
                  m->opset, out->nlayers);
    if (out->ninputs == 1 && out->inputs[0].ndim == 4)
        cd_buf_printf(b, "# cdigits-input: %dx%dx%d\n", out->inputs[0].dims[1], out->inputs[0].dims[2],
                      out->inputs[0].dims[3]);
    char name[200];
    safe_name(g->name, "onnx", name, sizeof name);
    cd_buf_printf(b, "name: \"%s\"\n", name);
}

static char *write_deploy(imp *m, const Onnx__GraphProto *g, const cd_onnx_model *out)
{
    cd_buf b = {0};
    write_header(&b, m, g, out);
    for (int i = 0; i < out->ninputs; i++) {
        const cd_onnx_io *io = &out->inputs[i];
        cd_buf_printf(&b, "layer {\n  name: \"%s\"\n  type: \"Input\"\n  top: \"%s\"\n  input_param {\n    shape {",
                      io->blob, io->blob);
        for (int d = 0; d < io->ndim; d++)
            cd_buf_printf(&b, " dim: %d", io->dims[d]);
        cd_buf_printf(&b, " }\n  }\n}\n");
    }
    for (int i = 0; i < m->nlayers; i++)
        write_layer(&b, &m->layers[i], 0);
    return b.p;
}

/* DIGITS's one-file form of a classifier: Data layers for train and val in place of the
 * input, the network, a SoftmaxWithLoss (and val's Accuracy) on the scores, and the
 * final Softmax, when there is one, in deploy only (the loss has its own). */
static char *write_network(imp *m, const Onnx__GraphProto *g, cd_onnx_model *out)
{
    if (out->ninputs != 1 || out->inputs[0].ndim != 4 || out->noutputs != 1 || out->outputs[0].ndim != 2) {
        char s[96], t[96];
        snprintf(out->why_no_network, sizeof out->why_no_network,
                 "a classifier has one 4-D (N, C, H, W) input and one (N, classes) output; this graph has %d "
                 "input%s%s and %d output%s%s", out->ninputs, out->ninputs == 1 ? " " : "s",
                 out->ninputs == 1 ? dims_text(out->inputs[0].dims, out->inputs[0].ndim, s, sizeof s) : "",
                 out->noutputs, out->noutputs == 1 ? " " : "s",
                 out->noutputs == 1 ? dims_text(out->outputs[0].dims, out->outputs[0].ndim, t, sizeof t) : "");
        return NULL;
    }
    value *o = find_value(m, g->output[0]->name);
    const char *scores = out->outputs[0].blob;
    if (o->producer >= 0) {
        layer *last = &m->layers[o->producer];
        if (!strcmp(last->type, "Softmax") && !last->param.n && last->nbottom == 1) {
            last->stage = "deploy";
            scores = last->bottom[0];
        }
    }
    char *label = unique_name(m, "label", "label"), *loss = unique_name(m, "loss", "loss"),
         *acc = unique_name(m, "accuracy", "accuracy");
    cd_buf b = {0};
    write_header(&b, m, g, out);
    static const char *const stages[2] = {"train", "val"};
    for (int s = 0; s < 2; s++)
        cd_buf_printf(&b, "layer {\n  name: \"%s-data\"\n  type: \"Data\"\n  top: \"%s\"\n  top: \"%s\"\n"
                      "  include { stage: \"%s\" }\n  data_param { batch_size: %d }\n}\n",
                      stages[s], out->inputs[0].blob, label, stages[s], s ? 32 : 64);
    for (int i = 0; i < m->nlayers; i++)
        write_layer(&b, &m->layers[i], 1);
    cd_buf_printf(&b, "layer {\n  name: \"%s\"\n  type: \"Accuracy\"\n  bottom: \"%s\"\n  bottom: \"%s\"\n"
                  "  top: \"%s\"\n  include { stage: \"val\" }\n}\n", acc, scores, label, acc);
    cd_buf_printf(&b, "layer {\n  name: \"%s\"\n  type: \"SoftmaxWithLoss\"\n  bottom: \"%s\"\n  bottom: \"%s\"\n"
                  "  top: \"%s\"\n  exclude { stage: \"deploy\" }\n}\n", loss, scores, label, loss);
    free(label);
    free(loss);
    free(acc);
    return b.p;
}

/* ---- the import ---------------------------------------------------------------------- */

static void imp_free(imp *m)
{
    for (int i = 0; i < m->nvals; i++) {
        free(m->vals[i].name);
        free(m->vals[i].blob);
        free(m->vals[i].k);
    }
    free(m->vals);
    for (int i = 0; i < m->nlayers; i++) {
        layer *l = &m->layers[i];
        free(l->name);
        free(l->top);
        for (int b = 0; b < l->nbottom; b++)
            free(l->bottom[b]);
        for (int p = 0; p < l->nparam; p++) {
            free(l->params[p].name);
            free(l->params[p].data);
        }
        cd_buf_free(&l->param);
    }
    free(m->layers);
    for (int i = 0; i < m->nused; i++)
        free(m->used[i]);
    free(m->used);
}

static long default_opset(const Onnx__ModelProto *mp)
{
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx"))
            return o->has_version ? (long)o->version : 1;
    }
    return 1;
}

static int find_op(const char *op)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_ops); i++)
        if (!strcmp(g_ops[i].op, op))
            return (int)i;
    return -1;
}

static int run_graph(imp *m, const Onnx__GraphProto *g)
{
    char why[256];
    /* names are optional in the schema; the graph's values are found by them */
    for (size_t i = 0; i < g->n_input + g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = i < g->n_input ? g->input[i] : g->output[i - g->n_input];
        if (!vi->name || !vi->name[0]) {
            snprintf(m->err, m->errlen, "%s: graph %s %zu has no name; the file is damaged or not a model",
                     m->path, i < g->n_input ? "input" : "output", i < g->n_input ? i : i - g->n_input);
            return CD_ERR;
        }
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        value *v = new_value(m, g->initializer[i]->name ? g->initializer[i]->name : "");
        if (tensor_values(g->initializer[i], v, why, sizeof why) != CD_OK) {
            snprintf(m->err, m->errlen, "%s: initializer '%s' %s", m->path, v->name, why);
            return CD_ERR;
        }
    }
    int real = 0;
    for (size_t i = 0; i < g->n_input; i++)
        real += !find_value(m, g->input[i]->name); /* else an initializer listed as an input too (IR 3) */
    for (size_t i = 0; i < g->n_input; i++) {
        if (find_value(m, g->input[i]->name))
            continue;
        value *v = new_value(m, g->input[i]->name);
        input_shape(g->input[i], v);
        /* a classifier's image is "data", the input cdigits's inference feeds */
        v->blob = unique_name(m, real == 1 && v->rank == 4 ? "data" : v->name, "data");
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        m->node = n;
        if (n->name && n->name[0])
            snprintf(m->node_name, sizeof m->node_name, "%s", n->name);
        else
            snprintf(m->node_name, sizeof m->node_name, "%s_%zu", n->op_type ? n->op_type : "node", i);
        if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
            return node_fail(m, "the operator is of domain \"%s\"; cdigits imports the default ONNX domain only",
                             n->domain);
        int k = find_op(n->op_type ? n->op_type : "");
        if (k < 0)
            return node_fail(m, "cdigits cannot import this operator; supported: %s", cd_onnx_supported_ops());
        if (m->opset < g_ops[k].since)
            return node_fail(m, "opset %ld defines this operator otherwise than opset %d on, which cdigits imports "
                             "(from opset 7 on for every operator); convert the model with "
                             "onnx.version_converter.convert_version(model, 13)", m->opset, g_ops[k].since);
        if (!n->n_output || !n->output[0][0])
            return node_fail(m, "the node has no output");
        if (g_ops[k].run(m) != CD_OK)
            return CD_ERR;
    }
    return CD_OK;
}

/* Fills out's inputs, outputs and parameters from m's values and layers. */
static int collect(imp *m, const Onnx__GraphProto *g, cd_onnx_model *out)
{
    out->inputs = cd_xcalloc(g->n_input + 1, sizeof *out->inputs);
    for (size_t i = 0; i < g->n_input; i++) {
        value *v = find_value(m, g->input[i]->name);
        if (!v || !v->blob)
            continue;
        int used = 0;
        for (int j = 0; j < m->nlayers && !used; j++)
            for (int b = 0; b < m->layers[j].nbottom && !used; b++)
                used = !strcmp(m->layers[j].bottom[b], v->blob);
        for (size_t o = 0; o < g->n_output && !used; o++) {
            value *ov = find_value(m, g->output[o]->name);
            used = ov && ov->blob && !strcmp(ov->blob, v->blob);
        }
        if (!used)
            continue; /* an input no node reads (a weight left as an input) */
        if (v->rank < 1 || v->rank > MAX_RANK || v->dtype != DT_FLOAT) {
            snprintf(m->err, m->errlen, "%s: graph input '%s' must be a float tensor of 1 to 4 known dimensions",
                     m->path, v->name);
            return CD_ERR;
        }
        cd_onnx_io *io = &out->inputs[out->ninputs++];
        io->onnx_name = cd_xstrdup(v->name);
        io->blob = cd_xstrdup(v->blob);
        io->ndim = v->rank;
        memcpy(io->dims, v->dims, sizeof io->dims);
    }
    out->outputs = cd_xcalloc(g->n_output + 1, sizeof *out->outputs);
    for (size_t i = 0; i < g->n_output; i++) {
        value *v = find_value(m, g->output[i]->name);
        if (!v || !v->blob) {
            snprintf(m->err, m->errlen, "%s: graph output '%s' is %s; a network's outputs are computed tensors",
                     m->path, g->output[i]->name, v ? "a constant" : "not produced by any node");
            return CD_ERR;
        }
        cd_onnx_io *io = &out->outputs[out->noutputs++];
        io->onnx_name = cd_xstrdup(v->name);
        io->blob = cd_xstrdup(v->blob);
        io->ndim = v->rank;
        memcpy(io->dims, v->dims, sizeof io->dims);
    }
    int n = 0;
    for (int i = 0; i < m->nlayers; i++)
        n += m->layers[i].nparam;
    out->params = cd_xcalloc((size_t)n + 1, sizeof *out->params);
    for (int i = 0; i < m->nlayers; i++) {
        layer *l = &m->layers[i];
        for (int p = 0; p < l->nparam; p++) {
            out->params[out->nparams++] = l->params[p];
            memset(&l->params[p], 0, sizeof l->params[p]);
        }
    }
    out->nlayers = m->nlayers;
    return CD_OK;
}

int cd_onnx_import(const void *data, size_t len, const char *path, cd_onnx_model *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, data);
    if (!mp || !mp->graph) {
        snprintf(err, errlen, "%s is not an ONNX model that can be read (a ModelProto in protobuf): it is "
                 "truncated, damaged or another kind of file; export it again (torch.onnx.export)", path);
        if (mp)
            onnx__model_proto__free_unpacked(mp, NULL);
        return CD_ERR;
    }
    imp m = {.path = path, .err = err, .errlen = errlen};
    int rc = CD_ERR;
    m.opset = default_opset(mp);
    out->opset = m.opset;
    if (m.opset < 1 || m.opset > 17) {
        snprintf(err, errlen, "%s uses ONNX opset %ld; cdigits imports opsets 7 to 17 (convert the model with "
                 "onnx.version_converter or export it with opset_version=13)", path, m.opset);
        goto out;
    }
    const Onnx__GraphProto *g = mp->graph;
    m.g = g;
    if (run_graph(&m, g) != CD_OK)
        goto out;
    if (collect(&m, g, out) != CD_OK)
        goto out;
    out->deploy = write_deploy(&m, g, out);
    out->network = write_network(&m, g, out);
    rc = CD_OK;
out:
    if (rc != CD_OK)
        cd_onnx_model_free(out);
    imp_free(&m);
    onnx__model_proto__free_unpacked(mp, NULL);
    return rc;
}

/* ---- the weights file ------------------------------------------------------------------ */

int cd_onnx_write_weights(const cd_onnx_model *m, const char *path, char *err, size_t errlen)
{
    cd_weights_tensor *t = cd_xcalloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *t);
    for (int i = 0; i < m->nparams; i++) {
        const cd_onnx_param *p = &m->params[i];
        t[i] = (cd_weights_tensor){p->name, p->ndim, p->dims, p->count, p->data};
    }
    int rc = cd_weights_save(t, m->nparams, path, err, errlen);
    free(t);
    return rc;
}

void cd_onnx_model_free(cd_onnx_model *m)
{
    if (!m)
        return;
    free(m->deploy);
    free(m->network);
    for (int i = 0; i < m->nparams; i++) {
        free(m->params[i].name);
        free(m->params[i].data);
    }
    free(m->params);
    for (int i = 0; i < m->ninputs; i++) {
        free(m->inputs[i].onnx_name);
        free(m->inputs[i].blob);
    }
    for (int i = 0; i < m->noutputs; i++) {
        free(m->outputs[i].onnx_name);
        free(m->outputs[i].blob);
    }
    free(m->inputs);
    free(m->outputs);
    memset(m, 0, sizeof *m);
}
