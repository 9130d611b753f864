/*
 * Network graph: stage filtering, name resolution (in-place layers, automatic splits
 * of blobs read by several layers), shapes, parameter arenas, forward and backward.
 */
#include "cdigits/net.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

/* ---- small helpers ------------------------------------------------------------- */

size_t cd_dims_count(const int *dims, int from, int to)
{
    size_t n = 1;
    for (int i = from; i < to; i++)
        n *= (size_t)dims[i];
    return n;
}

void cd_blob_set_shape(cd_blob *b, int ndim, const int *dims)
{
    b->ndim = ndim;
    for (int i = 0; i < CD_MAX_DIMS; i++)
        b->dims[i] = i < ndim ? dims[i] : 1;
    b->count = cd_dims_count(dims, 0, ndim);
}

char *cd_blob_shape_str(const cd_blob *b, char *buf, size_t len)
{
    if (b->ndim == 0) {
        snprintf(buf, len, "1");
        return buf;
    }
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < b->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "x" : "", b->dims[i]);
    return buf;
}

int cd_layer_error(const cd_layer *l, char *err, size_t errlen, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (l->def && l->def->line > 0)
        snprintf(err, errlen, "line %d: layer %s (%s): %s", l->def->line, l->name,
                 l->type ? l->type->name : "?", msg);
    else
        snprintf(err, errlen, "layer %s: %s", l->name, msg);
    return CD_ERR;
}

static cd_blob *blob_new(cd_net *net, const char *name)
{
    cd_blob *b = cd_xcalloc(1, sizeof *b);
    b->name = cd_xstrdup(name);
    if (net->nblobs == net->cap_blobs) {
        net->cap_blobs = net->cap_blobs ? net->cap_blobs * 2 : 32;
        net->blobs = cd_xrealloc(net->blobs, (size_t)net->cap_blobs * sizeof *net->blobs);
    }
    net->blobs[net->nblobs++] = b;
    return b;
}

static cd_layer *layer_new(cd_net *net, const char *name, const cd_layer_type *type,
                           const cd_pt_node *def)
{
    cd_layer *l = cd_xcalloc(1, sizeof *l);
    l->name = cd_xstrdup(name);
    l->type = type;
    l->def = def;
    if (net->nlayers == net->cap_layers) {
        net->cap_layers = net->cap_layers ? net->cap_layers * 2 : 32;
        net->layers = cd_xrealloc(net->layers, (size_t)net->cap_layers * sizeof *net->layers);
    }
    net->layers[net->nlayers++] = l;
    return l;
}

/*
 * Caffe's weight sharing: a param { name: "w" } already named by an earlier layer of the
 * net is that layer's parameter (its owner's). *out is then the owner's cd_param, one
 * entry of net->params used by both layers: the solver updates it once and the layers'
 * backward passes add up their gradients in it. The shapes must be equal (Caffe's
 * STRICT sharing) and the learning rates are the owner's; a sharing layer may repeat
 * them but not give others. *out stays NULL when nothing is shared.
 */
static int shared_param(cd_net *net, cd_layer *l, const cd_pt_node *spec, int ndim,
                        const int *dims, int learnable, cd_param **out, char *err, size_t errlen)
{
    const char *share = spec && cd_pt_get(spec, "name") ? cd_pt_str(spec, "name", NULL) : NULL;
    if (!share || !*share)
        return CD_OK;
    for (int i = 0; i < net->nlayers && !*out; i++) {
        cd_layer *o = net->layers[i];
        for (int j = 0; o != l && o->def && j < o->nparam && !*out; j++) {
            const char *n = cd_pt_str(cd_pt_nth(o->def, "param", j), "name", NULL);
            if (n && !strcmp(n, share))
                *out = o->params[j];
        }
        if (!*out)
            continue;
        cd_param *q = *out;
        cd_blob want = {0};
        cd_blob_set_shape(&want, ndim, dims);
        int same = q->ndim == ndim && q->learnable == learnable;
        for (int d = 0; same && d < ndim; d++)
            same = q->dims[d] == dims[d];
        if (!same) {
            cd_blob have = {0};
            cd_blob_set_shape(&have, q->ndim, q->dims);
            char s0[64], s1[64];
            return cd_layer_error(l, err, errlen, "shares parameter \"%s\" with layer %s, but it is "
                                  "%s%s here and %s%s in %s; layers sharing a parameter need the same "
                                  "shape (num_output, kernel and inputs)", share, o->name,
                                  cd_blob_shape_str(&want, s0, sizeof s0), learnable ? "" : " (stored)",
                                  cd_blob_shape_str(&have, s1, sizeof s1), q->learnable ? "" : " (stored)",
                                  o->name);
        }
        static const char *mults[] = {"lr_mult", "decay_mult"};
        for (size_t m = 0; m < CD_ARRAY_LEN(mults); m++) {
            float owner = m == 0 ? q->lr_mult : q->decay_mult;
            if (learnable && cd_pt_get(spec, mults[m]) &&
                (float)cd_pt_float(spec, mults[m], 1.0) != owner)
                return cd_layer_error(l, err, errlen, "shares parameter \"%s\" with layer %s but "
                                      "gives %s %g where %s has %g; a shared parameter has the first "
                                      "layer's %s: drop it here or make them equal", share, o->name,
                                      mults[m], cd_pt_float(spec, mults[m], 1.0), o->name,
                                      (double)owner, mults[m]);
        }
    }
    return CD_OK;
}

/* cd_net_reshape: the layer's parameter of this index again, which must keep its shape. */
static cd_param *replanned_param(cd_layer *l, int ndim, const int *dims, char *err, size_t errlen)
{
    cd_param *p = l->nparam < CD_LAYER_MAX_PARAMS ? l->params[l->nparam] : NULL;
    if (!p) {
        cd_layer_error(l, err, errlen, "declares more parameters for the new input size than it had");
        return NULL;
    }
    int same = p->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = p->dims[d] == dims[d];
    if (!same) {
        cd_blob was = {0}, now = {0};
        cd_blob_set_shape(&was, p->ndim, p->dims);
        cd_blob_set_shape(&now, ndim, dims);
        char s0[64], s1[64];
        cd_layer_error(l, err, errlen, "its parameter %s would be %s for this input size where it is %s: "
                       "its parameters depend on the image size, so the network cannot take images "
                       "of varying size; make it fully convolutional (no InnerProduct after the "
                       "convolutions) or make the dataset's images one size", p->name,
                       cd_blob_shape_str(&now, s1, sizeof s1), cd_blob_shape_str(&was, s0, sizeof s0));
        return NULL;
    }
    l->nparam++;
    return p;
}

cd_param *cd_layer_add_param(cd_net *net, cd_layer *l, int ndim, const int *dims,
                             const cd_pt_node *filler, float filler_default, int learnable,
                             char *err, size_t errlen)
{
    if (net->reshaping)
        return replanned_param(l, ndim, dims, err, errlen);
    if (l->nparam >= CD_LAYER_MAX_PARAMS) {
        cd_layer_error(l, err, errlen, "too many parameter tensors");
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        if (dims[i] <= 0) {
            cd_layer_error(l, err, errlen, "parameter %d has an empty dimension", l->nparam);
            return NULL;
        }
    }
    if (cd_filler_check(filler, err, errlen) != CD_OK) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        cd_layer_error(l, err, errlen, "%s", inner);
        return NULL;
    }
    const cd_pt_node *spec = l->def ? cd_pt_nth(l->def, "param", l->nparam) : NULL;
    cd_param *owned = NULL;
    if (shared_param(net, l, spec, ndim, dims, learnable, &owned, err, errlen) != CD_OK)
        return NULL;
    if (owned) {
        l->params[l->nparam++] = owned;
        return owned;
    }
    cd_param *p = cd_xcalloc(1, sizeof *p);
    char name[512];
    snprintf(name, sizeof name, "%s/%d", l->name, l->nparam);
    p->name = cd_xstrdup(name);
    p->ndim = ndim;
    for (int i = 0; i < CD_MAX_DIMS; i++)
        p->dims[i] = i < ndim ? dims[i] : 1;
    p->count = cd_dims_count(dims, 0, ndim);
    p->filler = filler;
    p->filler_default = filler_default;
    p->learnable = learnable;
    p->lr_mult = learnable ? 1.0f : 0.0f;
    p->decay_mult = learnable ? 1.0f : 0.0f;
    if (spec && learnable) {
        p->lr_mult = (float)cd_pt_float(spec, "lr_mult", 1.0);
        p->decay_mult = (float)cd_pt_float(spec, "decay_mult", 1.0);
    }
    p->offset = net->param_count;
    net->param_count += (p->count + 15) & ~(size_t)15; /* 64-byte aligned tensors */
    l->params[l->nparam++] = p;
    if (net->nparams == net->cap_params) {
        net->cap_params = net->cap_params ? net->cap_params * 2 : 32;
        net->params = cd_xrealloc(net->params, (size_t)net->cap_params * sizeof *net->params);
    }
    net->params[net->nparams++] = p;
    return p;
}

float *cd_layer_buffer(cd_net *net, cd_layer *l, size_t n)
{
    n = n ? n : 1;
    if (net->reshaping && l->nreused < l->nbufs) {
        /* cd_net_reshape: the buffer of this index again, zeroed, grown if too small */
        int k = l->nreused++;
        if (l->bufcap[k] >= n) {
            net->be->iface->set(net->be, n, 0.0f, l->bufs[k]);
            return l->bufs[k];
        }
        net->be->iface->free(net->be, l->bufs[k]);
        l->bufs[k] = net->be->iface->alloc(net->be, n * sizeof(float));
        l->bufcap[k] = l->bufs[k] ? n : 0;
        if (!l->bufs[k])
            net->out_of_memory = 1;
        return l->bufs[k];
    }
    if (l->nbufs >= (int)CD_ARRAY_LEN(l->bufs))
        return NULL;
    float *p = net->be->iface->alloc(net->be, n * sizeof(float));
    if (p) {
        l->bufcap[l->nbufs] = n;
        l->bufs[l->nbufs++] = p;
        l->nreused = l->nbufs;
    } else {
        net->out_of_memory = 1;
    }
    return p;
}

int cd_layer_buffer_init(cd_net *net, cd_layer *l, size_t n, float **out, char *err, size_t errlen)
{
    *out = cd_layer_buffer(net, l, n);
    return *out ? CD_OK : cd_layer_error(l, err, errlen, "out of memory");
}

/* ---- stage rules (Caffe's NetStateRule) -------------------------------------------- */

/* Does a NetStateRule match (phase, stage)? Levels are 0 as in Caffe's default state. */
static int rule_matches(const cd_pt_node *rule, int phase_train, const char *stage)
{
    const char *phase = cd_pt_str(rule, "phase", NULL);
    if (phase && strcmp(phase, phase_train ? "TRAIN" : "TEST") != 0)
        return 0;
    if (cd_pt_get(rule, "min_level") && cd_pt_int(rule, "min_level", 0) > 0)
        return 0;
    if (cd_pt_get(rule, "max_level") && cd_pt_int(rule, "max_level", 0) < 0)
        return 0;
    for (const cd_pt_node *c = rule->child; c; c = c->next) {
        if (!strcmp(c->name, "stage") && strcmp(c->text, stage) != 0)
            return 0;
        if (!strcmp(c->name, "not_stage") && !strcmp(c->text, stage))
            return 0;
    }
    return 1;
}

static int layer_in_stage(const cd_pt_node *layer, int phase_train, const char *stage)
{
    int n_inc = cd_pt_count(layer, "include");
    if (n_inc > 0) {
        for (int i = 0; i < n_inc; i++)
            if (rule_matches(cd_pt_nth(layer, "include", i), phase_train, stage))
                return 1;
        return 0;
    }
    int n_exc = cd_pt_count(layer, "exclude");
    for (int i = 0; i < n_exc; i++)
        if (rule_matches(cd_pt_nth(layer, "exclude", i), phase_train, stage))
            return 0;
    return 1;
}

/* ---- name resolution ---------------------------------------------------------- */

/* The current producer of each blob name, and the split tops handed to readers when
 * the current version of the blob is read by several layers. */
typedef struct name_entry {
    char *name;
    cd_blob *blob;
    int version;
    int nsplit, next_split;
    cd_blob **splits;
} name_entry;

typedef struct name_map {
    name_entry *e;
    int n, cap;
} name_map;

static name_entry *map_find(name_map *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].name, name))
            return &m->e[i];
    return NULL;
}

static name_entry *map_set(name_map *m, const char *name, cd_blob *b)
{
    name_entry *e = map_find(m, name);
    if (e) {
        free(e->splits);
        e->splits = NULL;
        e->nsplit = e->next_split = 0;
        e->blob = b;
        e->version++;
        return e;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 32;
        m->e = cd_xrealloc(m->e, (size_t)m->cap * sizeof *m->e);
    }
    e = &m->e[m->n++];
    memset(e, 0, sizeof *e);
    e->name = cd_xstrdup(name);
    e->blob = b;
    return e;
}

static void map_free(name_map *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].splits);
    }
    free(m->e);
}

/* Readers of each (name, version), counted before building, so that a blob read by
 * several layers gets a Split right after its producer. */
typedef struct reader_count {
    char *name;
    int version;
    int readers;
} reader_count;

typedef struct reader_table {
    reader_count *r;
    int n, cap;
} reader_table;

static reader_count *readers_get(reader_table *t, const char *name, int version, int create)
{
    for (int i = 0; i < t->n; i++)
        if (t->r[i].version == version && !strcmp(t->r[i].name, name))
            return &t->r[i];
    if (!create)
        return NULL;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 32;
        t->r = cd_xrealloc(t->r, (size_t)t->cap * sizeof *t->r);
    }
    reader_count *r = &t->r[t->n++];
    r->name = cd_xstrdup(name);
    r->version = version;
    r->readers = 0;
    return r;
}

static void readers_free(reader_table *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->r[i].name);
    free(t->r);
}

/* version of each name while scanning */
typedef struct version_map {
    char **names;
    int *versions;
    int n, cap;
} version_map;

static int *version_of(version_map *v, const char *name)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->names[i], name))
            return &v->versions[i];
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 32;
        v->names = cd_xrealloc(v->names, (size_t)v->cap * sizeof *v->names);
        v->versions = cd_xrealloc(v->versions, (size_t)v->cap * sizeof *v->versions);
    }
    v->names[v->n] = cd_xstrdup(name);
    v->versions[v->n] = -1;
    return &v->versions[v->n++];
}

static void version_map_free(version_map *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->names[i]);
    free(v->names);
    free(v->versions);
}

/* ---- building -------------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, const char *file, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", file ? file : "network", msg);
    return CD_ERR;
}

/* Fields of a layer that are *_param messages must belong to its type. */
static int check_param_fields(const cd_layer *l, char *err, size_t errlen)
{
    static const char *always[] = {"transform_param", "loss_param"};
    for (const cd_pt_node *c = l->def->child; c; c = c->next) {
        size_t n = strlen(c->name);
        if (n < 6 || strcmp(c->name + n - 6, "_param") != 0)
            continue;
        int ok = l->type->param_field && !strcmp(c->name, l->type->param_field);
        ok |= l->type->param_field2 && !strcmp(c->name, l->type->param_field2);
        for (size_t i = 0; i < CD_ARRAY_LEN(always); i++)
            ok |= !strcmp(c->name, always[i]);
        if (l->type->flags & CD_LAYER_DATA)
            ok |= !strcmp(c->name, "data_param");
        if (!ok)
            return cd_layer_error(l, err, errlen, "%s does not apply to %s layers (line %d); %s",
                                  c->name, l->type->name, c->line,
                                  l->type->param_field ? l->type->param_field : "remove it");
    }
    if (l->type->param_field)
        ((cd_layer *)l)->param = cd_pt_get(l->def, l->type->param_field);
    return CD_OK;
}

/* Insert a Split layer after the producer of `e`'s current blob when it has several
 * readers: each reader gets its own copy and the split sums their gradients. */
static int add_split(cd_net *net, name_entry *e, int readers, char *err, size_t errlen)
{
    char name[512];
    snprintf(name, sizeof name, "%s_split", e->name);
    cd_layer *l = layer_new(net, name, cd_layer_type_find("Split"), NULL);
    l->nbottom = 1;
    l->bottom[0] = e->blob;
    if (readers > CD_LAYER_MAX_BLOBS)
        return fail(err, errlen, net->filename, "blob %s is read by %d layers; at most %d are supported",
                    e->name, readers, CD_LAYER_MAX_BLOBS);
    e->splits = cd_xcalloc((size_t)readers, sizeof *e->splits);
    e->nsplit = readers;
    e->next_split = 0;
    for (int i = 0; i < readers; i++) {
        snprintf(name, sizeof name, "%s_split_%d", e->name, i);
        cd_blob *b = blob_new(net, name);
        l->top[l->ntop++] = b;
        e->splits[i] = b;
    }
    return l->type->setup(net, l, err, errlen);
}

/* Tops of Data layers excluded from this stage become inputs here (DIGITS's deploy
 * network: the data layer is replaced by an input of the dataset's shape). */
static cd_blob *auto_input(cd_net *net, name_map *map, const cd_pt_node *def, const char *name,
                           char *err, size_t errlen)
{
    for (const cd_pt_node *ld = def->child; ld; ld = ld->next) {
        if (strcmp(ld->name, "layer") != 0 || strcmp(cd_pt_str(ld, "type", ""), "Data") != 0)
            continue;
        const cd_pt_node *top0 = cd_pt_nth(ld, "top", 0);
        if (!top0 || strcmp(top0->text, name) != 0)
            continue;
        char lname[512];
        snprintf(lname, sizeof lname, "%s_input", name);
        cd_layer *l = layer_new(net, lname, cd_layer_type_find("Input"), NULL);
        cd_blob *b = blob_new(net, name);
        l->top[l->ntop++] = b;
        const cd_pt_node *tp = cd_pt_get(ld, "transform_param");
        int crop = net->opts.crop > 0 ? net->opts.crop : (tp ? (int)cd_pt_int(tp, "crop_size", 0) : 0);
        if (tp)
            net->input_scale = (float)cd_pt_float(tp, "scale", 1.0);
        if (net->opts.input_c <= 0) {
            fail(err, errlen, net->filename, "the input shape of %s is unknown; give the image shape "
                 "(--input CxHxW)", name);
            return NULL;
        }
        int dims[4] = {net->opts.batch > 0 ? net->opts.batch : 1, net->opts.input_c,
                       crop > 0 ? crop : net->opts.input_h, crop > 0 ? crop : net->opts.input_w};
        cd_blob_set_shape(b, 4, dims);
        map_set(map, name, b);
        return b;
    }
    return NULL;
}

static int resolve_bottom(cd_net *net, name_map *map, const cd_pt_node *def, cd_layer *l,
                          const cd_pt_node *bn, char *err, size_t errlen)
{
    name_entry *e = map_find(map, bn->text);
    cd_blob *b = NULL;
    if (!e) {
        b = auto_input(net, map, def, bn->text, err, errlen);
        if (!b && err[0])
            return CD_ERR;
        if (!b)
            return fail(err, errlen, net->filename,
                        "line %d: layer %s: bottom \"%s\" is not produced by any earlier layer in "
                        "stage %s; check the name, the layer order and the include/exclude rules",
                        bn->line, l->name, bn->text, net->opts.stage);
        e = map_find(map, bn->text);
    }
    if (e->nsplit > 0)
        b = e->splits[e->next_split < e->nsplit ? e->next_split++ : e->nsplit - 1];
    else
        b = e->blob;
    l->bottom[l->nbottom++] = b;
    return CD_OK;
}

/* Legacy top-level input / input_shape / input_dim. */
static int legacy_inputs(cd_net *net, const cd_pt_node *def, name_map *map, char *err, size_t errlen)
{
    int ninputs = cd_pt_count(def, "input");
    int nshape = cd_pt_count(def, "input_shape");
    int ndim = cd_pt_count(def, "input_dim");
    for (int i = 0; i < ninputs; i++) {
        const cd_pt_node *in = cd_pt_nth(def, "input", i);
        int dims[CD_MAX_DIMS], nd = 0;
        if (i < nshape) {
            const cd_pt_node *s = cd_pt_nth(def, "input_shape", i);
            nd = cd_pt_count(s, "dim");
            if (nd < 1 || nd > CD_MAX_DIMS)
                return fail(err, errlen, net->filename, "line %d: input_shape of %s needs 1 to 4 dim values",
                            s->line, in->text);
            for (int d = 0; d < nd; d++)
                dims[d] = (int)strtol(cd_pt_nth(s, "dim", d)->text, NULL, 10);
        } else if (ndim >= 4 * (i + 1)) {
            nd = 4;
            for (int d = 0; d < 4; d++)
                dims[d] = (int)strtol(cd_pt_nth(def, "input_dim", 4 * i + d)->text, NULL, 10);
        } else {
            return fail(err, errlen, net->filename, "line %d: input \"%s\" has no input_shape or input_dim",
                        in->line, in->text);
        }
        for (int d = 0; d < nd; d++)
            if (dims[d] <= 0)
                return fail(err, errlen, net->filename, "input \"%s\": dimension %d is %d; dimensions "
                            "must be positive", in->text, d, dims[d]);
        if (net->opts.batch > 0)
            dims[0] = net->opts.batch;
        char lname[512];
        snprintf(lname, sizeof lname, "%s_input", in->text);
        cd_layer *l = layer_new(net, lname, cd_layer_type_find("Input"), NULL);
        cd_blob *b = blob_new(net, in->text);
        cd_blob_set_shape(b, nd, dims);
        l->top[l->ntop++] = b;
        map_set(map, in->text, b);
    }
    return CD_OK;
}

/* Count the readers of each (name, version): version 0 is the first producer (an
 * input, or the first top of that name), each in-place top makes the next version. */
static void count_readers(const cd_pt_node **defs, int n, reader_table *rt)
{
    version_map vm = {0};
    for (int i = 0; i < n; i++) {
        const cd_pt_node *d = defs[i];
        for (const cd_pt_node *c = d->child; c; c = c->next) {
            if (!strcmp(c->name, "bottom")) {
                int v = *version_of(&vm, c->text);
                readers_get(rt, c->text, v < 0 ? 0 : v, 1)->readers++;
            }
        }
        for (const cd_pt_node *c = d->child; c; c = c->next)
            if (!strcmp(c->name, "top"))
                (*version_of(&vm, c->text))++;
    }
    version_map_free(&vm);
}

/* Create inputs for names read before any layer of the stage produces them (legacy
 * inputs are already in the map; the rest may be tops of excluded Data layers). */
static int create_inputs(cd_net *net, const cd_pt_node *def, const cd_pt_node **defs, int n,
                         name_map *map, char *err, size_t errlen)
{
    version_map produced = {0};
    int rc = CD_OK;
    for (int i = 0; i < n && rc == CD_OK; i++) {
        for (const cd_pt_node *c = defs[i]->child; c; c = c->next) {
            if (strcmp(c->name, "bottom") != 0)
                continue;
            if (*version_of(&produced, c->text) >= 0 || map_find(map, c->text))
                continue;
            if (!auto_input(net, map, def, c->text, err, errlen) && err[0]) {
                rc = CD_ERR;
                break;
            }
        }
        for (const cd_pt_node *c = defs[i]->child; c; c = c->next)
            if (!strcmp(c->name, "top"))
                (*version_of(&produced, c->text))++;
    }
    version_map_free(&produced);
    return rc;
}

static int build_layers(cd_net *net, const cd_pt_node *def, char *err, size_t errlen)
{
    int rc = CD_ERR;
    name_map map = {0};
    reader_table rt = {0};
    version_map vm = {0};
    const cd_pt_node **defs = NULL;
    int ndefs = 0;

    if (legacy_inputs(net, def, &map, err, errlen) != CD_OK)
        goto out;

    int total = cd_pt_count(def, "layer") + cd_pt_count(def, "layers");
    defs = cd_xcalloc((size_t)total + 1, sizeof *defs);
    for (const cd_pt_node *c = def->child; c; c = c->next) {
        if (!strcmp(c->name, "layers")) {
            fail(err, errlen, net->filename, "line %d: V1 \"layers\" definitions are not supported; "
                 "use \"layer\" (Caffe's upgrade_net_proto_text converts old files)", c->line);
            goto out;
        }
        if (!strcmp(c->name, "layer") && layer_in_stage(c, net->phase_train, net->opts.stage))
            defs[ndefs++] = c;
    }
    count_readers(defs, ndefs, &rt);
    if (create_inputs(net, def, defs, ndefs, &map, err, errlen) != CD_OK)
        goto out;
    for (int i = 0; i < map.n; i++) {
        *version_of(&vm, map.e[i].name) = 0;
        reader_count *r = readers_get(&rt, map.e[i].name, 0, 0);
        if (r && r->readers > 1 && add_split(net, &map.e[i], r->readers, err, errlen) != CD_OK)
            goto out;
    }

    for (int i = 0; i < ndefs; i++) {
        const cd_pt_node *d = defs[i];
        const char *type_name = cd_pt_str(d, "type", NULL);
        const char *lname = cd_pt_str(d, "name", NULL);
        char fallback[64];
        if (!lname) {
            snprintf(fallback, sizeof fallback, "layer%d", i + 1);
            lname = fallback;
        }
        if (!type_name) {
            fail(err, errlen, net->filename, "%d:%d: layer %s has no type; add type: \"...\"",
                 d->line, d->col, lname);
            goto out;
        }
        const cd_layer_type *type = cd_layer_type_find(type_name);
        if (!type || !strcmp(type_name, "Split")) {
            const cd_pt_node *tn = cd_pt_get(d, "type");
            fail(err, errlen, net->filename, "%d:%d: unknown layer type \"%s\" in layer %s; expected "
                 "one of: %s", tn->line, tn->col, type_name, lname, cd_layer_type_names());
            goto out;
        }
        for (int j = 0; j < net->nlayers; j++) {
            if (!strcmp(net->layers[j]->name, lname)) {
                fail(err, errlen, net->filename, "line %d: two layers are named %s in stage %s; "
                     "layer names must be unique", d->line, lname, net->opts.stage);
                goto out;
            }
        }
        cd_layer *l = layer_new(net, lname, type, d);
        if (check_param_fields(l, err, errlen) != CD_OK)
            goto out;
        int nb = cd_pt_count(d, "bottom"), nt = cd_pt_count(d, "top");
        if (nb < type->min_bottoms || nb > type->max_bottoms) {
            cd_layer_error(l, err, errlen, "has %d bottoms; %s layers take %d to %d", nb, type->name,
                           type->min_bottoms, type->max_bottoms);
            goto out;
        }
        if (nt < type->min_tops || nt > type->max_tops) {
            cd_layer_error(l, err, errlen, "has %d tops; %s layers take %d to %d", nt, type->name,
                           type->min_tops, type->max_tops);
            goto out;
        }
        for (int j = 0; j < nb; j++) {
            const cd_pt_node *bn = cd_pt_nth(d, "bottom", j);
            if (resolve_bottom(net, &map, def, l, bn, err, errlen) != CD_OK)
                goto out;
        }
        for (int j = 0; j < nt; j++) {
            const cd_pt_node *tn = cd_pt_nth(d, "top", j);
            int in_place = -1;
            for (int k = 0; k < nb; k++)
                if (!strcmp(cd_pt_nth(d, "bottom", k)->text, tn->text))
                    in_place = k;
            if (in_place < 0 && map_find(&map, tn->text)) {
                fail(err, errlen, net->filename, "line %d: layer %s: top \"%s\" is already produced "
                     "by an earlier layer; give it another name (only in-place layers, with bottom "
                     "== top, may reuse a name)", tn->line, l->name, tn->text);
                goto out;
            }
            cd_blob *b;
            if (in_place >= 0 && (type->flags & CD_LAYER_IN_PLACE))
                b = l->bottom[in_place];
            else
                b = blob_new(net, tn->text);
            l->top[l->ntop++] = b;
        }
        /* loss weights */
        int nlw = cd_pt_count(d, "loss_weight");
        if (nlw > 0) {
            double lw = cd_pt_float(d, "loss_weight", 0);
            for (int j = 1; j < nlw; j++)
                if (strtod(cd_pt_nth(d, "loss_weight", j)->text, NULL) != 0) {
                    cd_layer_error(l, err, errlen, "loss_weight is supported on the first top only");
                    goto out;
                }
            if (lw != 0 && !(type->flags & CD_LAYER_LOSS)) {
                cd_layer_error(l, err, errlen, "loss_weight %g on a layer that computes no loss; "
                               "remove it", lw);
                goto out;
            }
            l->loss_weight = (float)lw;
        } else if (type->flags & CD_LAYER_LOSS) {
            l->loss_weight = 1.0f;
        }
        if (type->setup(net, l, err, errlen) != CD_OK)
            goto out;
        /* register tops and add splits for tops read by several later layers */
        for (int j = 0; j < nt; j++) {
            const char *tname = cd_pt_nth(d, "top", j)->text;
            int *ver = version_of(&vm, tname);
            (*ver)++;
            name_entry *e = map_set(&map, tname, l->top[j]);
            reader_count *r = readers_get(&rt, tname, *ver, 0);
            if (r && r->readers > 1 && add_split(net, e, r->readers, err, errlen) != CD_OK)
                goto out;
        }
    }
    rc = CD_OK;
out:
    free(defs);
    map_free(&map);
    readers_free(&rt);
    version_map_free(&vm);
    return rc;
}

static void mark_backward(cd_net *net)
{
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        int need = 0;
        for (int j = 0; j < l->nbottom; j++)
            need |= l->bottom[j]->need_backward;
        for (int j = 0; j < l->nparam; j++)
            need |= l->params[j]->learnable && l->params[j]->lr_mult != 0;
        if (net->opts.force_backward)
            need = 1; /* gradient checks: every blob, inputs included */
        l->need_backward = need && l->type->backward;
        for (int j = 0; j < l->ntop; j++)
            l->top[j]->need_backward |= need;
    }
}

cd_net *cd_net_build(const cd_pt_node *def, const char *filename, const cd_net_opts *opts,
                     char *err, size_t errlen)
{
    err[0] = 0;
    cd_net *net = cd_xcalloc(1, sizeof *net);
    net->opts = *opts;
    if (!net->opts.stage)
        net->opts.stage = "train";
    net->opts.stage = cd_xstrdup(net->opts.stage);
    net->phase_train = !strcmp(net->opts.stage, "train");
    net->loss_scale = 1.0f;
    net->input_scale = 1.0f;
    net->filename = cd_xstrdup(filename ? filename : "network");
    net->name = cd_xstrdup(cd_pt_str(def, "name", "net"));
    if (build_layers(net, def, err, errlen) != CD_OK) {
        /* every message names the file */
        size_t fl = strlen(net->filename);
        if (strncmp(err, net->filename, fl) != 0) {
            char inner[1024];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, errlen, "%s: %s", net->filename, inner);
        }
        goto err;
    }
    if (net->nlayers == 0) {
        fail(err, errlen, net->filename, "stage %s has no layers; check the include/exclude rules",
             net->opts.stage);
        goto err;
    }
    if (net->phase_train) {
        int has_loss = 0;
        for (int i = 0; i < net->nlayers; i++)
            has_loss |= net->layers[i]->loss_weight != 0;
        if (!has_loss) {
            fail(err, errlen, net->filename, "the train stage has no loss layer; add one (for "
                 "example SoftmaxWithLoss) so that training has something to minimize");
            goto err;
        }
    }
    mark_backward(net);
    return net;
err:
    cd_net_free(net);
    return NULL;
}

/* ---- DIGITS's data layers ---------------------------------------------------------- */

/* What DIGITS adds to a network that does not say where its images come from: a train
 * and a val Data layer with tops "data" and "label" (its default batch of 16, which the
 * job's batch size overrides). They are excluded from the deploy stage, whose "data"
 * therefore becomes an input of the dataset's shape, cropped (auto_input). */
static const char g_digits_data_layers[] =
    "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\" include { stage: \"train\" }\n"
    "        data_param { batch_size: 16 } }\n"
    "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\" include { stage: \"val\" }\n"
    "        data_param { batch_size: 16 } }\n";

/* Does the network name a source of data: a Data or Input layer, or a top-level input? */
static int names_data_source(const cd_pt_node *tree)
{
    if (cd_pt_get(tree, "input"))
        return 1;
    for (const cd_pt_node *c = tree->child; c; c = c->next) {
        const char *type = cd_pt_str(c, "type", "");
        if (!strcmp(c->name, "layer") && (!strcmp(type, "Data") || !strcmp(type, "Input")))
            return 1;
    }
    return 0;
}

/* Positions 0: an added field is nowhere in the user's file, and messages say so. */
static void unplace(cd_pt_node *n)
{
    for (; n; n = n->next) {
        n->line = n->col = 0;
        unplace(n->child);
    }
}

/* DIGITS's data layers added to tree when it names no source of data: 1 when added, 0
 * when the network has its own, -1 with err set when they cannot be made. cd_net_load
 * applies it, so training, check-net and inference build the same stages. */
static int add_data_layers(cd_pt_node *tree, char *err, size_t errlen)
{
    if (names_data_source(tree))
        return 0;
    cd_pt_node *add = cd_pt_parse(g_digits_data_layers, sizeof g_digits_data_layers - 1, "DIGITS's data layers",
                                  err, errlen);
    if (!add)
        return -1;
    cd_pt_node *last = add->child;
    while (last && last->next)
        last = last->next;
    if (last) {
        unplace(add->child);
        last->next = tree->child;
        tree->child = add->child;
        add->child = NULL;
    }
    cd_pt_free(add);
    return 1;
}

cd_net *cd_net_load(const char *path, const cd_net_opts *opts, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = cd_read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read the network file (%m); check the path", path);
        return NULL;
    }
    cd_pt_node *tree = cd_pt_parse(text, len, path, err, errlen);
    free(text);
    if (!tree)
        return NULL;
    if (add_data_layers(tree, err, errlen) < 0) {
        cd_pt_free(tree);
        return NULL;
    }
    if (cd_pt_validate(tree, &cd_pt_net_parameter, path, err, errlen) != CD_OK) {
        cd_pt_free(tree);
        return NULL;
    }
    cd_net *net = cd_net_build(tree, path, opts, err, errlen);
    if (!net) {
        cd_pt_free(tree);
        return NULL;
    }
    net->owned_tree = tree;
    return net;
}

/* ---- memory ---------------------------------------------------------------------- */

static int alloc_blob(cd_net *net, cd_blob *b, char *err, size_t errlen)
{
    if (b->data)
        return CD_OK;
    if (b->alias) {
        if (alloc_blob(net, b->alias, err, errlen) != CD_OK)
            return CD_ERR;
        b->data = b->alias->data;
        b->diff = b->alias->diff;
        return CD_OK;
    }
    b->cap = b->count ? b->count : 1;
    size_t bytes = b->cap * sizeof(float);
    b->data = net->be->iface->alloc(net->be, bytes);
    b->diff = net->be->iface->alloc(net->be, bytes);
    if (!b->data || !b->diff) {
        net->out_of_memory = 1;
        return fail(err, errlen, net->filename, "out of %s memory for blob %s (%zu floats); lower "
                    "the batch size", net->be->iface->name, b->name, b->count);
    }
    return CD_OK;
}

int cd_net_alloc(cd_net *net, cd_backend_t *be, const cd_net *shared_from, char *err,
                 size_t errlen)
{
    net->be = be;
    for (int i = 0; i < net->nblobs; i++)
        if (alloc_blob(net, net->blobs[i], err, errlen) != CD_OK)
            return CD_ERR;
    if (shared_from) {
        net->shared = shared_from;
        for (int i = 0; i < net->nparams; i++) {
            cd_param *p = net->params[i], *q = NULL;
            for (int j = 0; j < shared_from->nparams && !q; j++)
                if (!strcmp(shared_from->params[j]->name, p->name))
                    q = shared_from->params[j];
            if (!q || q->count != p->count)
                return fail(err, errlen, net->filename, "parameter %s of stage %s does not match "
                            "stage %s; layers with parameters must have the same shapes in every stage",
                            p->name, net->opts.stage, shared_from->opts.stage);
            p->data = q->data;
            p->diff = q->diff;
            p->h1 = q->h1;
            p->h2 = q->h2;
        }
    } else if (net->param_count > 0) {
        size_t bytes = net->param_count * sizeof(float);
        net->arena_data = be->iface->alloc(be, bytes);
        net->arena_diff = be->iface->alloc(be, bytes);
        net->arena_h1 = be->iface->alloc(be, bytes);
        net->arena_h2 = be->iface->alloc(be, bytes);
        if (!net->arena_data || !net->arena_diff || !net->arena_h1 || !net->arena_h2) {
            net->out_of_memory = 1;
            return fail(err, errlen, net->filename, "out of %s memory for %zu parameters",
                        be->iface->name, net->param_count);
        }
        for (int i = 0; i < net->nparams; i++) {
            cd_param *p = net->params[i];
            p->data = net->arena_data + p->offset;
            p->diff = net->arena_diff + p->offset;
            p->h1 = net->arena_h1 + p->offset;
            p->h2 = net->arena_h2 + p->offset;
        }
        if (cd_fill_params(net, err, errlen) != CD_OK)
            return CD_ERR;
    }
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (l->type->init && l->type->init(net, l, err, errlen) != CD_OK)
            return CD_ERR;
    }
    net->allocated = 1;
    return CD_OK;
}

/* cd_net_reshape: b keeps its memory when it holds the new count, else grows. */
static int refit_blob(cd_net *net, cd_blob *b, char *err, size_t errlen)
{
    if (b->alias) {
        b->data = b->alias->data;
        b->diff = b->alias->diff;
        return CD_OK;
    }
    if (b->count <= b->cap)
        return CD_OK;
    net->be->iface->free(net->be, b->data);
    net->be->iface->free(net->be, b->diff);
    b->data = b->diff = NULL;
    return alloc_blob(net, b, err, errlen);
}

int cd_net_reshape(cd_net *net, int h, int w, int label_h, int label_w, char *err, size_t errlen)
{
    err[0] = 0;
    if (!net->allocated)
        return fail(err, errlen, net->filename, "the network is not allocated yet; reshape it after "
                    "cd_net_alloc");
    if (h <= 0 || w <= 0)
        return fail(err, errlen, net->filename, "cannot take inputs of %dx%d", h, w);
    net->reshape_h = h;
    net->reshape_w = w;
    net->out_of_memory = 0;
    if (label_h > 0) {
        net->opts.label_h = label_h;
        net->opts.label_w = label_w;
    }
    net->reshaping = 1;
    int rc = CD_OK;
    for (int i = 0; i < net->nlayers && rc == CD_OK; i++) {
        cd_layer *l = net->layers[i];
        if (l->type->destroy)
            l->type->destroy(net, l);
        free(l->priv);
        l->priv = NULL;
        int had = l->nparam;
        l->nparam = 0;
        rc = l->type->setup(net, l, err, errlen);
        if (rc == CD_OK && l->nparam != had)
            rc = cd_layer_error(l, err, errlen, "declares %d parameters for the new input size where it "
                                "had %d", l->nparam, had);
        for (int t = 0; t < l->ntop && rc == CD_OK; t++)
            rc = refit_blob(net, l->top[t], err, errlen);
        l->nreused = 0;
        if (rc == CD_OK && l->type->init)
            rc = l->type->init(net, l, err, errlen);
        if (rc == CD_OK && net->out_of_memory)
            rc = cd_layer_error(l, err, errlen, "out of %s memory for the buffers of a %dx%d input",
                                net->be->iface->name, h, w);
    }
    net->reshaping = 0;
    if (rc != CD_OK)
        net->allocated = 0; /* half re-planned: not to be run (cd_net_reshape says: free it) */
    if (rc != CD_OK && strncmp(err, net->filename, strlen(net->filename)) != 0) {
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "%s: %s", net->filename, inner);
    }
    return rc;
}

void cd_net_free(cd_net *net)
{
    if (!net)
        return;
    cd_backend_t *be = net->be;
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (l->type && l->type->destroy)
            l->type->destroy(net, l);
        free(l->priv); /* one host block per layer, whatever its type */
        for (int j = 0; j < l->nbufs; j++)
            if (be)
                be->iface->free(be, l->bufs[j]);
        free(l->name);
        free(l);
    }
    free(net->layers);
    for (int i = 0; i < net->nblobs; i++) {
        cd_blob *b = net->blobs[i];
        if (be && !b->alias) {
            be->iface->free(be, b->data);
            be->iface->free(be, b->diff);
        }
        free(b->name);
        free(b);
    }
    free(net->blobs);
    for (int i = 0; i < net->nparams; i++) {
        free(net->params[i]->name);
        free(net->params[i]);
    }
    free(net->params);
    if (be) {
        be->iface->free(be, net->arena_data);
        be->iface->free(be, net->arena_diff);
        be->iface->free(be, net->arena_h1);
        be->iface->free(be, net->arena_h2);
    }
    cd_pt_free(net->owned_tree);
    free((char *)net->opts.stage);
    free(net->filename);
    free(net->name);
    free(net);
}

/* ---- passes -------------------------------------------------------------------- */

/* The layer whose op runs now, for device failure messages (see cd_net_running). */
static _Thread_local const cd_layer *g_running;
static _Thread_local int g_running_backward;

const char *cd_net_running(int *backward)
{
    if (backward)
        *backward = g_running_backward;
    return g_running ? g_running->name : NULL;
}

void cd_net_forward_device(cd_net *net)
{
    net->rng_counter++;
    g_running_backward = 0;
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        g_running = l;
        if (l->type->forward)
            l->type->forward(net, l);
    }
    g_running = NULL;
}

float cd_net_read_values(cd_net *net)
{
    float loss = 0;
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (!(l->type->flags & CD_LAYER_SCALAR))
            continue;
        net->be->iface->download(net->be, &l->value, l->top[0]->data, sizeof(float));
        if (l->loss_weight != 0)
            loss += l->loss_weight * l->value;
    }
    return loss;
}

float cd_net_forward(cd_net *net)
{
    cd_net_forward_device(net);
    return cd_net_read_values(net);
}

void cd_net_backward(cd_net *net)
{
    g_running_backward = 1;
    for (int i = net->nlayers - 1; i >= 0; i--) {
        cd_layer *l = net->layers[i];
        g_running = l;
        if (l->need_backward)
            l->type->backward(net, l);
        if (net->after_backward)
            net->after_backward(net, i, net->after_backward_ctx);
    }
    g_running = NULL;
}

void cd_net_zero_grad(cd_net *net)
{
    if (net->arena_diff)
        net->be->iface->set(net->be, net->param_count, 0.0f, net->arena_diff);
}

cd_blob *cd_net_blob(const cd_net *net, const char *name)
{
    /* the last blob of that name is the newest version (after in-place layers) */
    for (int i = net->nblobs - 1; i >= 0; i--)
        if (!strcmp(net->blobs[i]->name, name))
            return net->blobs[i];
    return NULL;
}

cd_layer *cd_net_layer(const cd_net *net, const char *name)
{
    for (int i = 0; i < net->nlayers; i++)
        if (!strcmp(net->layers[i]->name, name))
            return net->layers[i];
    return NULL;
}

size_t cd_net_learnable_count(const cd_net *net)
{
    size_t n = 0;
    for (int i = 0; i < net->nparams; i++)
        if (net->params[i]->learnable)
            n += net->params[i]->count;
    return n;
}
