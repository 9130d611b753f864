/*
 * Caffe's weights (docs/formats.md): a .caffemodel is a NetParameter (proto/caffe.proto)
 * whose layers, current (layer, field 100) or legacy (layers, field 2), carry their
 * parameter blobs. Matched as Caffe's Net::CopyTrainedLayersFrom matches them: by layer
 * name, blob by blob in order; a layer the net lacks is skipped, one the file lacks
 * keeps its values. Every match is checked before the first value is uploaded, so a
 * refused file leaves the net as it was.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "cdigits/caffemodel.h"
#include "cdigits/util.h"

/* One layer of the file, whichever format it came in. */
typedef struct file_layer {
    const char *name;
    size_t nblobs;
    Caffe__BlobProto **blobs;
} file_layer;

/* A blob's shape as Caffe reads it: shape when present, else the legacy four when any
 * is set, else none (a scalar). legacy says which. */
typedef struct blob_shape {
    int ndim, legacy;
    int64_t dims[32];
} blob_shape;

static int shape_of(const Caffe__BlobProto *b, blob_shape *s)
{
    s->legacy = 0;
    s->ndim = 0;
    if (b->shape) {
        if (b->shape->n_dim > CD_ARRAY_LEN(s->dims))
            return CD_ERR;
        for (size_t i = 0; i < b->shape->n_dim; i++)
            s->dims[s->ndim++] = b->shape->dim[i];
    } else if (b->has_num || b->has_channels || b->has_height || b->has_width) {
        s->legacy = 1;
        s->ndim = 4;
        s->dims[0] = b->num;
        s->dims[1] = b->channels;
        s->dims[2] = b->height;
        s->dims[3] = b->width;
    }
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] < 0 || s->dims[i] > INT32_MAX)
            return CD_ERR;
    return CD_OK;
}

/* "(a, b, c)" of n dims into buf. */
static const char *dims_text(const int64_t *d, int n, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (used < len)
        snprintf(buf + used, len - used, ")");
    return buf;
}

/* Caffe's Blob::ShapeEquals: a current shape equals exactly; the legacy four equal the
 * parameter's dims padded with leading 1s to four, i.e. both with leading 1s dropped. */
static int same_shape(const blob_shape *s, const cd_param *p)
{
    const int64_t *a = s->dims;
    int na = s->ndim, nb = p->ndim, skip = 0;
    if (s->legacy) {
        if (p->ndim > 4)
            return 0;
        while (na > 0 && a[0] == 1)
            a++, na--;
        while (skip < nb && p->dims[skip] == 1)
            skip++;
        nb -= skip;
    }
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != p->dims[skip + i])
            return 0;
    return 1;
}

static size_t file_layers(const Caffe__NetParameter *np, file_layer **out)
{
    size_t n = np->n_layer + np->n_layers, k = 0;
    file_layer *fl = cd_xcalloc(n + 1, sizeof *fl);
    for (size_t i = 0; i < np->n_layer; i++)
        fl[k++] = (file_layer){np->layer[i]->name, np->layer[i]->n_blobs, np->layer[i]->blobs};
    for (size_t i = 0; i < np->n_layers; i++)
        fl[k++] = (file_layer){np->layers[i]->name, np->layers[i]->n_blobs, np->layers[i]->blobs};
    *out = fl;
    return n;
}

/* The index of the net's layer named name, or -1. */
static int layer_index(const cd_net *net, const char *name)
{
    for (int i = 0; name && i < net->nlayers; i++)
        if (!strcmp(net->layers[i]->name, name))
            return i;
    return -1;
}

/* Checks blob b of file layer fl against parameter p; CD_ERR with the message. */
static int check_blob(const char *path, const file_layer *fl, size_t b, const cd_param *p, char *err, size_t errlen)
{
    const Caffe__BlobProto *bp = fl->blobs[b];
    blob_shape s;
    char fs[256], ns[256];
    int64_t pd[CD_MAX_DIMS];
    for (int d = 0; d < p->ndim && d < CD_MAX_DIMS; d++)
        pd[d] = p->dims[d];
    dims_text(pd, p->ndim, ns, sizeof ns);
    if (shape_of(bp, &s) != CD_OK) {
        snprintf(err, errlen, "%s: layer %s, blob %zu has an impossible shape; the file is damaged", path, fl->name, b);
        return CD_ERR;
    }
    dims_text(s.dims, s.ndim, fs, sizeof fs);
    if (!same_shape(&s, p)) {
        snprintf(err, errlen, "%s: layer %s, blob %zu has shape %s%s in the file but %s in the network; the weights "
                 "belong to another network (give the layer another name to start it from its fillers)",
                 path, fl->name, b, fs, s.legacy ? " (num, channels, height, width)" : "", ns);
        return CD_ERR;
    }
    size_t values = bp->n_data ? bp->n_data : bp->n_double_data;
    if (values != p->count) {
        snprintf(err, errlen, "%s: layer %s, blob %zu has %zu values for its shape %s of %zu; the file is damaged",
                 path, fl->name, b, values, fs, p->count);
        return CD_ERR;
    }
    return CD_OK;
}

static void upload_blob(cd_net *net, const Caffe__BlobProto *bp, cd_param *p)
{
    if (bp->n_data) {
        net->be->iface->upload(net->be, p->data, bp->data, p->count * sizeof(float));
        return;
    }
    float *f = cd_xmalloc(p->count * sizeof *f);
    for (size_t i = 0; i < p->count; i++)
        f[i] = (float)bp->double_data[i];
    net->be->iface->upload(net->be, p->data, f, p->count * sizeof *f);
    free(f);
}

static void note_missing(cd_caffemodel_report *rep, const char *name)
{
    char *s = rep->missing_names;
    size_t room = sizeof rep->missing_names, used = strlen(s);
    int n = snprintf(s + used, room - used, "%s%s", rep->missing++ ? ", " : "", name);
    if (n < 0 || used + (size_t)n >= room)
        memcpy(s + room - 4, "...", 4);
}

int cd_caffemodel_load(cd_net *net, const void *data, size_t len, const char *path, cd_caffemodel_report *rep,
                       char *err, size_t errlen)
{
    cd_caffemodel_report local;
    if (!rep)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    Caffe__NetParameter *np = caffe__net_parameter__unpack(NULL, len, data);
    if (!np) {
        snprintf(err, errlen, "%s is not a Caffe .caffemodel that can be read (a NetParameter in protobuf): it is "
                 "truncated or damaged; export the weights from Caffe again", path);
        return CD_ERR;
    }
    file_layer *fl = NULL;
    size_t n = file_layers(np, &fl);
    /* match[i]: the file layer net layer i takes its blobs from, or -1 */
    long *match = cd_xmalloc(((size_t)net->nlayers + 1) * sizeof *match);
    for (int i = 0; i < net->nlayers; i++)
        match[i] = -1;
    int rc = CD_ERR;
    for (size_t k = 0; k < n; k++) {
        int i = layer_index(net, fl[k].name);
        if (i < 0) {
            rep->ignored++;
            continue;
        }
        const cd_layer *l = net->layers[i];
        if (match[i] >= 0 || (l->nparam == 0 && fl[k].nblobs == 0))
            continue; /* a second layer of the name (Caffe's TRAIN and TEST data layers), or nothing to take */
        if ((size_t)l->nparam != fl[k].nblobs) {
            snprintf(err, errlen, "%s: layer %s has %zu parameter blobs in the file but %d in the network (%s); the "
                     "weights belong to another network", path, fl[k].name, fl[k].nblobs, l->nparam, l->type->name);
            goto out;
        }
        for (size_t b = 0; b < fl[k].nblobs; b++)
            if (check_blob(path, &fl[k], b, l->params[b], err, errlen) != CD_OK)
                goto out;
        match[i] = (long)k;
    }
    int matched = 0;
    for (int i = 0; i < net->nlayers; i++) {
        if (match[i] >= 0)
            matched++;
        else if (net->layers[i]->nparam > 0)
            note_missing(rep, net->layers[i]->name);
    }
    if (!matched && rep->missing) {
        snprintf(err, errlen, "%s holds Caffe weights for none of the layers of the network with parameters (%s); "
                 "the weights belong to another network", path, rep->missing_names);
        goto out;
    }
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (match[i] < 0)
            continue;
        for (int b = 0; b < l->nparam; b++)
            upload_blob(net, fl[match[i]].blobs[b], l->params[b]);
        rep->loaded += l->nparam;
    }
    rc = CD_OK;
out:
    free(match);
    free(fl);
    caffe__net_parameter__free_unpacked(np, NULL);
    return rc;
}
