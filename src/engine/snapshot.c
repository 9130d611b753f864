/*
 * Snapshot files (docs/formats.md):
 *   weights  "CDW1" (JOBDIR_WEIGHTS_MAGIC): u32 version, u32 count, then per tensor: u32 name length, name,
 *            u32 ndim, u32 dims[4], u64 floats, float32 data; then u64 FNV-1a of all
 *            bytes before it. Caffe's .caffemodel is read as weights too (caffemodel.c).
 *   state    "CDS1": u32 version, i64 iteration, u32 count, then per learnable tensor:
 *            u32 name length, name, u64 floats, float32 h1, float32 h2; then the FNV-1a.
 * Both are written to a temporary file, synced and renamed, so a file that exists is
 * complete; loading checks the checksum before touching the network.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/caffemodel.h"
#include "cdigits/jobdir.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

static void put_u32(cd_buf *b, uint32_t v) { cd_buf_put(b, &v, 4); }
static void put_u64(cd_buf *b, uint64_t v) { cd_buf_put(b, &v, 8); }

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Download a device tensor and append it. */
static void put_tensor(cd_buf *b, const cd_net *net, const float *dev, size_t count)
{
    size_t bytes = count * sizeof(float);
    net->be->iface->download(net->be, cd_buf_extend(b, bytes), dev, bytes);
}

static int finish(cd_buf *b, const char *path, char *err, size_t errlen)
{
    put_u64(b, fnv1a((const uint8_t *)b->p, b->n));
    int rc = cd_write_file_atomic(path, b->p, b->n);
    if (rc != CD_OK)
        snprintf(err, errlen, "cannot write snapshot %s: %s%s", path, strerror(errno),
                 errno == ENOSPC ? "; free disk space or raise the snapshot interval" : "");
    cd_buf_free(b);
    return rc;
}

/* The weights file's header (magic, version, tensor count). */
static void put_header(cd_buf *b, int n)
{
    cd_buf_put(b, JOBDIR_WEIGHTS_MAGIC, 4);
    put_u32(b, 1);
    put_u32(b, (uint32_t)n);
}

/* A tensor's name, shape (dimensions past ndim are 1) and count; its values follow. */
static void put_entry(cd_buf *b, const char *name, int ndim, const int *dims, size_t count)
{
    uint32_t len = (uint32_t)strlen(name);
    put_u32(b, len);
    cd_buf_put(b, name, len);
    put_u32(b, (uint32_t)ndim);
    for (int d = 0; d < CD_MAX_DIMS; d++)
        put_u32(b, d < ndim ? (uint32_t)dims[d] : 1);
    put_u64(b, count);
}

int cd_snapshot_save_weights(const cd_net *net, const char *path, char *err, size_t errlen)
{
    cd_buf b = {0};
    put_header(&b, net->nparams);
    for (int i = 0; i < net->nparams; i++) {
        const cd_param *p = net->params[i];
        put_entry(&b, p->name, p->ndim, p->dims, p->count);
        put_tensor(&b, net, p->data, p->count);
    }
    return finish(&b, path, err, errlen);
}

int cd_weights_save(const cd_weights_tensor *t, int n, const char *path, char *err, size_t errlen)
{
    cd_buf b = {0};
    put_header(&b, n);
    for (int i = 0; i < n; i++) {
        put_entry(&b, t[i].name, t[i].ndim, t[i].dims, t[i].count);
        cd_buf_put(&b, t[i].data, t[i].count * sizeof(float));
    }
    return finish(&b, path, err, errlen);
}

int cd_snapshot_save_state(const cd_net *net, long iter, const char *path, char *err, size_t errlen)
{
    cd_buf b = {0};
    cd_buf_put(&b, "CDS1", 4);
    put_u32(&b, 1);
    put_u64(&b, (uint64_t)iter);
    uint32_t n = 0;
    for (int i = 0; i < net->nparams; i++)
        n += net->params[i]->learnable;
    put_u32(&b, n);
    for (int i = 0; i < net->nparams; i++) {
        const cd_param *p = net->params[i];
        if (!p->learnable)
            continue;
        uint32_t len = (uint32_t)strlen(p->name);
        put_u32(&b, len);
        cd_buf_put(&b, p->name, len);
        put_u64(&b, p->count);
        put_tensor(&b, net, p->h1, p->count);
        put_tensor(&b, net, p->h2, p->count);
    }
    return finish(&b, path, err, errlen);
}

/* ---- reading ------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t n, off;
    int bad;
} reader;

static const void *take(reader *r, size_t n)
{
    if (r->bad || r->n - r->off < n) {
        r->bad = 1;
        return NULL;
    }
    const void *q = r->p + r->off;
    r->off += n;
    return q;
}

/* n bytes into out; zeros past the end (the reader is then bad). */
static void get(reader *r, void *out, size_t n)
{
    const void *q = take(r, n);
    if (q)
        memcpy(out, q, n);
    else
        memset(out, 0, n);
}

static uint32_t get_u32(reader *r)
{
    uint32_t v;
    get(r, &v, 4);
    return v;
}

static uint64_t get_u64(reader *r)
{
    uint64_t v;
    get(r, &v, 8);
    return v;
}

/* Check the len bytes of path at data: magic and checksum; the reader excludes the
 * trailer. CD_OK, or CD_ERR with the message. */
static int check_file(const char *path, const char *magic, const char *data, size_t len, reader *r, char *err,
                      size_t errlen)
{
    uint64_t want = 0;
    if (len < 16 || memcmp(data, magic, 4) != 0) {
        snprintf(err, errlen, "%s is not a cdigits %s file%s", path, magic[2] == 'W' ? "weights" : "solver state",
                 magic[2] == 'W' ? " nor Caffe weights (a .caffemodel)" : "");
        return CD_ERR;
    }
    memcpy(&want, data + len - 8, 8);
    if (fnv1a((const uint8_t *)data, len - 8) != want) {
        snprintf(err, errlen, "%s is damaged (checksum mismatch); use another snapshot", path);
        return CD_ERR;
    }
    r->p = (const uint8_t *)data;
    r->n = len - 8;
    r->off = 4;
    r->bad = 0;
    if (get_u32(r) != 1) {
        snprintf(err, errlen, "%s has an unknown version; it was written by a newer cdigits", path);
        return CD_ERR;
    }
    return CD_OK;
}

static char *read_whole(const char *path, size_t *len, char *err, size_t errlen)
{
    char *data = cd_read_file(path, len);
    if (!data)
        snprintf(err, errlen, "cannot read snapshot %s: %s", path, strerror(errno));
    return data;
}

/* Read the whole file and check it (check_file). */
static char *open_checked(const char *path, const char *magic, reader *r, char *err, size_t errlen)
{
    size_t len = 0;
    char *data = read_whole(path, &len, err, errlen);
    if (data && check_file(path, magic, data, len, r, err, errlen) != CD_OK) {
        free(data);
        return NULL;
    }
    return data;
}

/* Caffe's weights (caffemodel.c), by Caffe's rules whatever allow_partial says: a blob
 * of another shape is an error, a layer the file lacks keeps its values (said on
 * stderr, as are the file's layers the net lacks). */
static int load_caffe(cd_net *net, const char *path, const char *data, size_t len, int *loaded, char *err,
                      size_t errlen)
{
    cd_caffemodel_report rep;
    if (cd_caffemodel_load(net, data, len, path, &rep, err, errlen) != CD_OK)
        return CD_ERR;
    if (rep.missing)
        fprintf(stderr, "%s: Caffe weights for %d parameter tensors; %d layers of the network are not in the file "
                "and keep their initial values (%s)\n", path, rep.loaded, rep.missing, rep.missing_names);
    if (rep.ignored)
        fprintf(stderr, "%s: %d layers of the file are not in the network and were ignored\n", path, rep.ignored);
    if (loaded)
        *loaded = rep.loaded;
    return CD_OK;
}

static cd_param *find_param(cd_net *net, const char *name, size_t len)
{
    for (int i = 0; i < net->nparams; i++)
        if (strlen(net->params[i]->name) == len && !memcmp(net->params[i]->name, name, len))
            return net->params[i];
    return NULL;
}

static int param_index(const cd_net *net, const cd_param *p)
{
    for (int i = 0; i < net->nparams; i++)
        if (net->params[i] == p)
            return i;
    return net->nparams; /* not reached: p comes from find_param */
}

int cd_snapshot_load_weights(cd_net *net, const char *path, int allow_partial, int *loaded,
                             char *err, size_t errlen)
{
    reader r;
    size_t len = 0;
    char *data = read_whole(path, &len, err, errlen);
    if (!data)
        return CD_ERR;
    if (jobdir_weights_kind_of(data, len) == JOBDIR_WEIGHTS_CAFFE) {
        int caffe = load_caffe(net, path, data, len, loaded, err, errlen);
        free(data);
        return caffe;
    }
    if (check_file(path, JOBDIR_WEIGHTS_MAGIC, data, len, &r, err, errlen) != CD_OK) {
        free(data);
        return CD_ERR;
    }
    int rc = CD_ERR, taken = 0;
    uint32_t n = get_u32(&r);
    char *seen = cd_xcalloc((size_t)net->nparams + 1, 1);
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint32_t len = get_u32(&r);
        const char *name = take(&r, len);
        uint32_t ndim = get_u32(&r), dims[4];
        for (int d = 0; d < 4; d++)
            dims[d] = get_u32(&r);
        uint64_t count = get_u64(&r);
        if (r.bad || count > r.n / 4) {
            r.bad = 1;
            break;
        }
        const float *values = take(&r, count * 4);
        if (!values)
            break;
        cd_param *p = find_param(net, name, len);
        int same_shape = p && p->count == count && (uint32_t)p->ndim == ndim;
        for (int d = 0; same_shape && d < p->ndim && d < 4; d++)
            same_shape = (uint32_t)p->dims[d] == dims[d];
        if (!same_shape) {
            if (!allow_partial && p) {
                snprintf(err, errlen, "%s: parameter %.*s has another shape in the snapshot (%llu "
                         "values) than in the network (%zu); the snapshot belongs to another network",
                         path, (int)len, name, (unsigned long long)count, p->count);
                goto out;
            }
            continue;
        }
        int j = param_index(net, p);
        if (seen[j]) {
            snprintf(err, errlen, "%s holds parameter %s twice; the file is damaged", path, p->name);
            goto out;
        }
        net->be->iface->upload(net->be, p->data, values, count * 4);
        seen[j] = 1;
        taken++;
    }
    if (r.bad) {
        snprintf(err, errlen, "%s is truncated or malformed", path);
        goto out;
    }
    if (!allow_partial) {
        for (int j = 0; j < net->nparams; j++) {
            if (!seen[j]) {
                snprintf(err, errlen, "%s has no values for parameter %s; the snapshot belongs to "
                         "another network", path, net->params[j]->name);
                goto out;
            }
        }
    }
    if (loaded)
        *loaded = taken;
    rc = CD_OK;
out:
    free(seen);
    free(data);
    return rc;
}

int cd_snapshot_load_state(cd_net *net, long *iter, const char *path, char *err, size_t errlen)
{
    reader r;
    char *data = open_checked(path, "CDS1", &r, err, errlen);
    if (!data)
        return CD_ERR;
    int rc = CD_ERR;
    *iter = (long)get_u64(&r);
    if (*iter < 0) {
        snprintf(err, errlen, "%s is malformed: its iteration is negative; use another snapshot", path);
        goto out;
    }
    uint32_t n = get_u32(&r);
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint32_t len = get_u32(&r);
        const char *name = take(&r, len);
        uint64_t count = get_u64(&r);
        if (r.bad || count > r.n / 8) {
            r.bad = 1;
            break;
        }
        const float *h1 = take(&r, count * 4), *h2 = take(&r, count * 4);
        if (!h1 || !h2)
            break;
        cd_param *p = find_param(net, name, len);
        if (!p || p->count != count) {
            snprintf(err, errlen, "%s: solver state for %.*s does not fit the network", path,
                     (int)len, name);
            goto out;
        }
        net->be->iface->upload(net->be, p->h1, h1, count * 4);
        net->be->iface->upload(net->be, p->h2, h2, count * 4);
    }
    if (r.bad) {
        snprintf(err, errlen, "%s is truncated or malformed", path);
        goto out;
    }
    rc = CD_OK;
out:
    free(data);
    return rc;
}
