/* serve-model: a warm classifier. It opens one model job at one snapshot, prints a
 * `ready` line, then answers JSON requests read line by line from stdin with one JSON
 * line each on stdout, until stdin closes, a `quit` request, an idle time without
 * requests, or the removal of the job folder (the model was deleted). The server keeps
 * one per (model, snapshot) so that repeated calls skip loading (docs/inference.md).
 *
 *   {"id": 1, "op": "classify", "image": PATH | "image_b64": BASE64, "top": 5,
 *    "visualize": DIR}             -> {"id": 1, "ok": true, "predictions": [...],
 *                                      "visualizations": [...], "ms": 0.8}
 *   {"id": 2, "op": "classify_list", "list": PATH, "out": PATH, "top": 5, "top_n": 0,
 *    "batch": 64, "limit": 0}      -> {"id": 2, "ok": true, "summary": {...}}
 *   {"id": 3, "op": "export", "dir": DIR, "name": NAME} -> {"id": 3, "ok": true, "files": [...]}
 *   {"id": 4, "op": "info"}        -> {"id": 4, "ok": true, ...the ready line's fields}
 *   {"op": "quit"}
 * A request that fails answers {"id", "ok": false, "error": "why", "kind": "input" |
 * "internal"}: "input" when the request's image or list is at fault. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/infer.h"
#include "cdigits/util.h"
#include "commands.h"

#define MAX_LINE ((size_t)512 << 20) /* a request line: a base64 image of up to ~380 MB */
#define MAX_TILES 256                /* tiles per visualization image */
#define HIST_BINS 20
#define SMALL_NET_MACS 2e7            /* below this per image, one CPU thread (LeNet: 2.3e6) */

static void usage(void)
{
    fprintf(stderr, "usage: cdigits-worker serve-model --model JOBDIR [--iteration N] [--gpu N] [--threads N]\n"
                    "                                  [--idle-exit SECONDS]\n"
                    "  reads JSON requests on stdin, answers JSON lines on stdout (docs/inference.md)\n"
                    "  --threads 0 (default): every core, one for a small network\n");
}

static void reply(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!s) {
        s = strdup("{\"ok\":false,\"error\":\"the answer could not be encoded\",\"kind\":\"internal\"}");
        if (!s)
            return;
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

static json_t *fail(json_t *id, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *fail(json_t *id, const char *kind, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_pack("{s:O, s:b, s:s, s:s}", "id", id ? id : json_null(), "ok", 0, "error", msg, "kind", kind);
}

/* ---- base64 ------------------------------------------------------------------------ */

static int b64_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

/* Decodes standard or URL-safe base64 (padding optional, whitespace ignored). */
static unsigned char *b64_decode(const char *s, size_t len, size_t *out_len)
{
    unsigned char *out = malloc(len / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '=' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        int v = b64_value(ch);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    *out_len = n;
    return out;
}

/* ---- visualizations ------------------------------------------------------------------ */

/* mean, standard deviation and a 20-bin histogram as DIGITS gives them:
 * {"shape", "mean", "stddev", "histogram": [counts, bin centres, [min, middle, max]]} */
static json_t *data_stats(const cd_infer_tensor *t)
{
    double sum = 0, sq = 0;
    float lo = INFINITY, hi = -INFINITY;
    size_t finite = 0;
    for (size_t i = 0; i < t->count; i++) {
        float v = t->data[i];
        if (!isfinite(v))
            continue;
        finite++;
        sum += v;
        sq += (double)v * v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    double mean = finite ? sum / (double)finite : 0;
    double var = finite ? sq / (double)finite - mean * mean : 0;
    if (!finite)
        lo = hi = 0;
    long counts[HIST_BINS] = {0};
    double width = (double)(hi - lo) / HIST_BINS;
    for (size_t i = 0; i < t->count; i++) {
        float v = t->data[i];
        if (!isfinite(v))
            continue;
        int b = width > 0 ? (int)((v - lo) / width) : 0;
        counts[b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b]++;
    }
    json_t *y = json_array(), *x = json_array(), *shape = json_array();
    for (int b = 0; b < HIST_BINS; b++) {
        json_array_append_new(y, json_integer(counts[b]));
        json_array_append_new(x, json_real(lo + width * (b + 0.5)));
    }
    for (int d = 0; d < t->ndim; d++)
        json_array_append_new(shape, json_integer(t->dims[d]));
    return json_pack("{s:o, s:f, s:f, s:[o, o, [f, f, f]]}", "shape", shape, "mean", mean, "stddev",
                     sqrt(var > 0 ? var : 0), "histogram", y, x, (double)lo, (lo + hi) / 2.0, (double)hi);
}

/* A grid of `ntiles` tiles of th x tw pixels (c channels) with one pixel of padding;
 * value(i, ch, y, x) in 0..255. */
typedef float (*tile_fn)(const void *ctx, int tile, int ch, int y, int x);

static int render_grid(const char *path, int ntiles, int c, int th, int tw, int zoom, tile_fn value,
                       const void *ctx, char *err, size_t errlen)
{
    int cols = (int)ceil(sqrt((double)ntiles));
    int rows = (ntiles + cols - 1) / cols;
    int H = rows * (th * zoom + 1) + 1, W = cols * (tw * zoom + 1) + 1;
    cd_image_t img = {0};
    if (cd_image_alloc(&img, c, H, W, err, errlen) != CD_OK)
        return CD_ERR;
    memset(img.data, 96, (size_t)c * H * W); /* gray padding */
    for (int t = 0; t < ntiles; t++) {
        int oy = (t / cols) * (th * zoom + 1) + 1, ox = (t % cols) * (tw * zoom + 1) + 1;
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < th * zoom; y++)
                for (int x = 0; x < tw * zoom; x++) {
                    float v = value(ctx, t, ch, y / zoom, x / zoom);
                    img.data[((size_t)ch * H + (size_t)(oy + y)) * W + (size_t)(ox + x)] =
                        (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
                }
    }
    int rc = cd_image_write_png(path, &img, err, errlen);
    cd_image_free(&img);
    return rc;
}

/* How a tensor is cut into tiles. */
typedef struct tiling {
    const float *data;
    int channels;     /* 3: RGB tiles of weights */
    int th, tw;       /* tile size */
    size_t tile_stride, chan_stride;
    int per_tile_norm;
    float lo, hi;     /* the whole tensor's range (when not per tile) */
    float *tlo, *thi; /* per tile */
} tiling;

static float tile_value(const void *ctx, int tile, int ch, int y, int x)
{
    const tiling *t = ctx;
    float v = t->data[(size_t)tile * t->tile_stride + (size_t)ch * t->chan_stride + (size_t)y * t->tw + x];
    float lo = t->per_tile_norm ? t->tlo[tile] : t->lo, hi = t->per_tile_norm ? t->thi[tile] : t->hi;
    if (!isfinite(v))
        return 0;
    return hi > lo ? (v - lo) / (hi - lo) * 255.0f : 128.0f;
}

static void range(const float *p, size_t n, float *lo, float *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(p[i])) {
            *lo = p[i] < *lo ? p[i] : *lo;
            *hi = p[i] > *hi ? p[i] : *hi;
        }
    if (*lo > *hi)
        *lo = *hi = 0;
}

/* Zoom so that small tiles (5x5 filters, 1x1 values) stay visible. */
static int zoom_for(int th, int tw)
{
    int side = th > tw ? th : tw, z = 1;
    while (side * z < 24 && z < 16)
        z++;
    return z;
}

/* Activations (1, C, H, W): one tile per channel, each normalized on its own;
 * vectors (1, N): one square tile of N values. */
static int render_activation(const char *path, const cd_infer_tensor *t, char *err, size_t errlen)
{
    tiling tl = {.data = t->data, .channels = 1, .per_tile_norm = 1};
    int ntiles;
    if (t->ndim == 4) {
        ntiles = t->dims[1] < MAX_TILES ? t->dims[1] : MAX_TILES;
        tl.th = t->dims[2];
        tl.tw = t->dims[3];
    } else {
        /* a vector as a near-square tile, padded with its minimum */
        ntiles = 1;
        int side = (int)ceil(sqrt((double)t->count));
        tl.th = (int)((t->count + (size_t)side - 1) / (size_t)side);
        tl.tw = side;
    }
    tl.tile_stride = (size_t)tl.th * tl.tw;
    float *pad = NULL;
    if (t->ndim != 4 && tl.tile_stride != t->count) {
        float lo, hi;
        range(t->data, t->count, &lo, &hi);
        pad = cd_xmalloc(sizeof(float) * tl.tile_stride);
        for (size_t i = 0; i < tl.tile_stride; i++)
            pad[i] = i < t->count ? t->data[i] : lo;
        tl.data = pad;
    }
    tl.tlo = cd_xmalloc(sizeof(float) * (size_t)ntiles);
    tl.thi = cd_xmalloc(sizeof(float) * (size_t)ntiles);
    for (int i = 0; i < ntiles; i++)
        range(tl.data + (size_t)i * tl.tile_stride, tl.tile_stride, &tl.tlo[i], &tl.thi[i]);
    int rc = render_grid(path, ntiles, 1, tl.th, tl.tw, zoom_for(tl.th, tl.tw), tile_value, &tl, err, errlen);
    free(tl.tlo);
    free(tl.thi);
    free(pad);
    return rc;
}

/* Weights: convolution filters (O, I, KH, KW) as RGB tiles when I is 3 (a first
 * layer on color images), as gray tiles when I is 1, and as one gray tile per
 * (filter, input channel) deeper; inner products (N, M) as one N x M image. All are
 * normalized over the whole tensor so that tiles compare. */
static int render_weights(const char *path, const cd_infer_tensor *t, char *err, size_t errlen)
{
    tiling tl = {.data = t->data, .channels = 1};
    range(t->data, t->count, &tl.lo, &tl.hi);
    int ntiles;
    if (t->ndim == 4) {
        tl.th = t->dims[2];
        tl.tw = t->dims[3];
        tl.chan_stride = (size_t)tl.th * tl.tw;
        if (t->dims[1] == 3) {
            tl.channels = 3;
            tl.tile_stride = 3 * tl.chan_stride;
            ntiles = t->dims[0];
        } else {
            tl.tile_stride = tl.chan_stride;
            ntiles = t->dims[0] * t->dims[1];
        }
        if (ntiles > MAX_TILES)
            ntiles = MAX_TILES;
    } else if (t->ndim == 2) {
        /* at most 1024 rows and columns: sample the others */
        int rows = t->dims[0], cols = t->dims[1];
        int sr = (rows + 1023) / 1024, sc = (cols + 1023) / 1024;
        int h = (rows + sr - 1) / sr;
        /* a few rows (a last layer of 3 classes) are repeated to stay visible */
        int rep = h < 24 ? (24 + h - 1) / h : 1;
        tl.th = h * rep;
        tl.tw = (cols + sc - 1) / sc;
        float *s = cd_xmalloc(sizeof(float) * (size_t)tl.th * tl.tw);
        for (int y = 0; y < tl.th; y++)
            for (int x = 0; x < tl.tw; x++)
                s[(size_t)y * tl.tw + x] = t->data[(size_t)(y / rep) * sr * cols + (size_t)x * sc];
        tl.data = s;
        tl.tile_stride = (size_t)tl.th * tl.tw;
        int rc = render_grid(path, 1, 1, tl.th, tl.tw, zoom_for(tl.th, tl.tw), tile_value, &tl, err, errlen);
        free(s);
        return rc;
    } else {
        tl.th = 1;
        tl.tw = (int)t->count;
        tl.tile_stride = t->count;
        ntiles = 1;
    }
    return render_grid(path, ntiles, tl.channels, tl.th, tl.tw, zoom_for(tl.th, tl.tw), tile_value, &tl, err,
                       errlen);
}

/* "03-conv1-activation.png": the layer's index keeps names unique, odd characters go. */
static void vis_name(char *out, size_t len, int index, const char *layer, const char *what)
{
    char clean[96];
    size_t n = 0;
    for (const char *p = layer; *p && n + 1 < sizeof clean; p++)
        clean[n++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                                    *p == '-' || *p == '_'
                                ? *p
                                : '_');
    clean[n] = 0;
    snprintf(out, len, "%02d-%s-%s.png", index, clean, what);
}

/* Renders every layer's activations and weights into dir; DIGITS's list of
 * {name, type, vis_type, image, data_stats[, param_count]}. */
static json_t *visualize(const cd_infer_layer *layers, int n, const char *dir, char *err, size_t errlen)
{
    if (cd_mkdirs(dir, 0755) != CD_OK) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return NULL;
    }
    json_t *out = json_array();
    char name[160], path[4400];
    for (int i = 0; i < n; i++) {
        const cd_infer_layer *l = &layers[i];
        if (l->nparams > 0) {
            vis_name(name, sizeof name, i, l->name, "weights");
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (render_weights(path, &l->params[0], err, errlen) != CD_OK)
                goto fail;
            json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:o, s:I}", "name", l->name, "type", l->type,
                                                 "vis_type", "Weights", "image", name, "data_stats",
                                                 data_stats(&l->params[0]), "param_count",
                                                 (json_int_t)l->param_count));
        }
        vis_name(name, sizeof name, i, l->name, "activation");
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (render_activation(path, &l->top, err, errlen) != CD_OK)
            goto fail;
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "name", l->name, "type", l->type,
                                             "vis_type", "Activation", "blob", l->top.name, "image", name,
                                             "data_stats", data_stats(&l->top)));
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct server {
    cd_classifier_t *c;
    const char *model;
    char job_name[256];
    json_t *ready;
    float *probs;
} server;

static double ms_since(double t0) { return (cd_now() - t0) * 1000.0; }

static json_t *op_classify(server *s, json_t *req, json_t *id)
{
    double t0 = cd_now();
    const char *path = json_string_value(json_object_get(req, "image"));
    const char *b64 = json_string_value(json_object_get(req, "image_b64"));
    const char *vdir = json_string_value(json_object_get(req, "visualize"));
    json_t *topj = json_object_get(req, "top");
    int top = json_is_integer(topj) ? (int)json_integer_value(topj) : 5;
    int ch, h, w;
    cd_classifier_image_shape(s->c, &ch, &h, &w);
    char err[1024];
    cd_image_t img = {0};
    if (path) {
        if (cd_image_load(path, ch, &img, err, sizeof err) != CD_OK)
            return fail(id, "input", "%s", err);
    } else if (b64) {
        size_t len = 0;
        unsigned char *bytes = b64_decode(b64, strlen(b64), &len);
        if (!bytes)
            return fail(id, "input", "image_b64 is not base64");
        int rc = cd_image_decode(bytes, len, ch, &img, err, sizeof err);
        free(bytes);
        if (rc != CD_OK)
            return fail(id, "input", "cannot read the uploaded image: %s", err);
    } else {
        return fail(id, "input", "a classify request needs image or image_b64");
    }
    json_t *vis = NULL;
    int rc;
    if (vdir) {
        cd_infer_layer *layers = NULL;
        int n = 0;
        rc = cd_classifier_run_layers(s->c, &img, s->probs, &layers, &n, err, sizeof err);
        if (rc == CD_OK && !(vis = visualize(layers, n, vdir, err, sizeof err)))
            rc = CD_ERR;
        cd_infer_layers_free(layers, n);
    } else {
        rc = cd_classifier_run(s->c, &img, s->probs, err, sizeof err);
    }
    json_t *size = json_pack("[i, i, i]", img.h, img.w, img.c);
    cd_image_free(&img);
    if (rc != CD_OK) {
        json_decref(size);
        return fail(id, "internal", "%s", err);
    }
    json_t *out = json_pack("{s:O, s:b, s:o, s:I, s:o}", "id", id, "ok", 1, "predictions",
                            cd_predictions_json(s->c, s->probs, top), "iteration",
                            (json_int_t)cd_classifier_iteration(s->c), "image_size", size);
    if (vis)
        json_object_set_new(out, "visualizations", vis);
    json_object_set_new(out, "ms", json_real(ms_since(t0)));
    return out;
}

static json_t *op_list(server *s, json_t *req, json_t *id)
{
    double t0 = cd_now();
    const char *list = json_string_value(json_object_get(req, "list"));
    const char *outp = json_string_value(json_object_get(req, "out"));
    if (!list || !outp)
        return fail(id, "input", "classify_list needs list and out");
    cd_list_opts o = {.top = 5, .batch = 64};
    json_t *v;
    if (json_is_integer(v = json_object_get(req, "top")))
        o.top = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "top_n")))
        o.top_n = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "batch")))
        o.batch = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "limit")))
        o.limit = (long)json_integer_value(v);
    if (o.top < 1 || o.top_n < 0 || o.top_n > 10000 || o.batch < 1 || o.batch > 4096)
        return fail(id, "input", "top, top_n (0 to 10000) or batch (1 to 4096) is out of range");
    FILE *in = fopen(list, "r");
    if (!in)
        return fail(id, "internal", "cannot read %s: %s", list, strerror(errno));
    FILE *out = fopen(outp, "w");
    if (!out) {
        fclose(in);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    char err[1024];
    json_t *sum = cd_classify_list(s->c, in, out, &o, err, sizeof err);
    fclose(in);
    if (fclose(out) != 0 && sum) {
        json_decref(sum);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    if (!sum)
        return fail(id, "internal", "%s", err);
    return json_pack("{s:O, s:b, s:o, s:I, s:f}", "id", id, "ok", 1, "summary", sum, "iteration",
                     (json_int_t)cd_classifier_iteration(s->c), "ms", ms_since(t0));
}

static json_t *op_export(server *s, json_t *req, json_t *id)
{
    const char *dir = json_string_value(json_object_get(req, "dir"));
    const char *name = json_string_value(json_object_get(req, "name"));
    if (!dir)
        return fail(id, "input", "export needs dir");
    char names[16][64], err[1024];
    int n = cd_classifier_export(s->c, dir, name ? name : s->job_name, names, 16, err, sizeof err);
    if (n < 0)
        return fail(id, "internal", "%s", err);
    json_t *files = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(files, json_string(names[i]));
    return json_pack("{s:O, s:b, s:o}", "id", id, "ok", 1, "files", files);
}

static json_t *handle(server *s, const char *line, int *quit)
{
    json_error_t jerr;
    json_t *req = json_loads(line, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return fail(NULL, "input", "a request must be one JSON object per line: %s", jerr.text);
    }
    json_t *id = json_object_get(req, "id");
    if (!id)
        id = json_null();
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *out;
    if (!op)
        out = fail(id, "input", "the request has no op");
    else if (!strcmp(op, "classify"))
        out = op_classify(s, req, id);
    else if (!strcmp(op, "classify_list"))
        out = op_list(s, req, id);
    else if (!strcmp(op, "export"))
        out = op_export(s, req, id);
    else if (!strcmp(op, "info")) {
        out = json_deep_copy(s->ready);
        json_object_set(out, "id", id ? id : json_null());
        json_object_set_new(out, "ok", json_true());
        json_object_del(out, "type");
    } else if (!strcmp(op, "quit")) {
        *quit = 1;
        out = json_pack("{s:O, s:b}", "id", id ? id : json_null(), "ok", 1);
    } else
        out = fail(id, "input", "unknown op \"%s\": use classify, classify_list, export, info or quit", op);
    json_decref(req);
    return out;
}

/* The ready line: what the server shows about the worker. */
static json_t *ready_line(const server *s, const char *device)
{
    int n = cd_classifier_classes(s->c), ch, h, w;
    cd_classifier_image_shape(s->c, &ch, &h, &w);
    json_t *labels = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(labels, json_string(cd_classifier_label(s->c, i)));
    cd_snapshot_info snaps[4096];
    int ns = cd_snapshot_epochs(s->model, snaps, 4096);
    double epoch = -1;
    for (int i = 0; i < ns; i++)
        if (snaps[i].iteration == cd_classifier_iteration(s->c))
            epoch = snaps[i].epoch;
    const cd_backend_t *be = cd_classifier_backend(s->c);
    return json_pack("{s:s, s:I, s:o, s:o, s:s, s:s, s:[i, i, i], s:i}", "type", "ready", "iteration",
                     (json_int_t)cd_classifier_iteration(s->c), "epoch", epoch >= 0 ? json_real(epoch) : json_null(),
                     "labels", labels, "backend", be->iface->name, "device", device, "image", h, w, ch, "pid",
                     (int)getpid());
}

/* Whether the model's folder is still there (deleting the model removes it). */
static int model_present(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/train.json", dir);
    return access(path, F_OK) == 0;
}

int cd_cmd_serve_model(int argc, char **argv)
{
    const char *model = NULL;
    long iteration = 0;
    int gpu = -1, threads = 0;
    double idle_exit = 0;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--model") && more)
            model = argv[++i];
        else if (!strcmp(argv[i], "--iteration") && more)
            iteration = atol(argv[++i]);
        else if (!strcmp(argv[i], "--gpu") && more)
            gpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && more)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--idle-exit") && more)
            idle_exit = atof(argv[++i]);
        else if (!strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (!model) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char err[1024], device[128];
    cd_backend_t *be = NULL;
    if (gpu >= 0) {
        char why[256] = "";
        be = cd_backend_cuda_device_count() > 0 ? cd_backend_cuda_new(gpu, why, sizeof why) : NULL;
        if (!be)
            fprintf(stderr, "serve-model: GPU %d is not usable (%s); classifying on the CPU\n", gpu,
                    why[0] ? why : "no usable GPU on this machine");
    }
    if (be)
        snprintf(device, sizeof device, "%s:%d", be->iface->name, be->device);
    else if (!(be = cd_backend_cpu_new(threads))) {
        reply(json_pack("{s:s, s:s}", "type", "error", "message", "cannot start the CPU backend"));
        return 1;
    }
    server s = {.model = model};
    s.c = cd_classifier_open(model, iteration, be, err, sizeof err);
    if (s.c && threads <= 0 && !strcmp(be->iface->name, "cpu") && cd_classifier_macs(s.c) < SMALL_NET_MACS &&
        sysconf(_SC_NPROCESSORS_ONLN) > 1) {
        /* a small network: one thread answers sooner than a team that waits for its
         * slowest member on a busy machine */
        cd_classifier_close(s.c);
        cd_backend_free(be);
        threads = 1;
        if (!(be = cd_backend_cpu_new(1))) {
            reply(json_pack("{s:s, s:s}", "type", "error", "message", "cannot start the CPU backend"));
            return 1;
        }
        s.c = cd_classifier_open(model, iteration, be, err, sizeof err);
    }
    if (!s.c) {
        reply(json_pack("{s:s, s:s}", "type", "error", "message", err));
        cd_backend_free(be);
        return 1;
    }
    if (strcmp(be->iface->name, "cpu") == 0)
        snprintf(device, sizeof device, "cpu (%d thread%s)", threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN),
                 threads == 1 ? "" : "s");
    s.probs = cd_xcalloc((size_t)cd_classifier_classes(s.c), sizeof(float));
    s.ready = ready_line(&s, device);
    reply(json_incref(s.ready));

    /* lines from stdin by hand: poll() must see what stdio would have buffered */
    size_t cap = 1 << 16, len = 0;
    char *buf = cd_xmalloc(cap);
    double last = cd_now();
    int quit = 0, rc = 0;
    while (!quit) {
        char *nl = memchr(buf, '\n', len);
        if (nl) {
            *nl = 0;
            reply(handle(&s, buf, &quit));
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, len - used);
            len -= used;
            last = cd_now();
            continue;
        }
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        int pr = poll(&pf, 1, 1000);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0) {
            if ((idle_exit > 0 && cd_now() - last > idle_exit) || !model_present(model))
                break;
            continue;
        }
        if (len + 65536 > cap) {
            if (cap >= MAX_LINE) {
                reply(fail(NULL, "input", "a request line is longer than %zu MB", MAX_LINE >> 20));
                rc = 1;
                break;
            }
            cap *= 2;
            buf = cd_xrealloc(buf, cap);
        }
        ssize_t r = read(0, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* the server went away */
        len += (size_t)r;
    }
    free(buf);
    free(s.probs);
    json_decref(s.ready);
    cd_classifier_close(s.c);
    cd_backend_free(be);
    return rc;
}
