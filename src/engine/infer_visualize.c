/* Pictures of each layer for one image (see cd_infer_visualize in infer.h): data
 * statistics, activations and weights as grids of tiles written to PNG, and DIGITS's
 * per-layer JSON. */
#include "cdigits/infer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

#define MAX_TILES 256 /* tiles per visualization image */
#define HIST_BINS 20

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
json_t *cd_infer_visualize(const cd_infer_layer *layers, int n, const char *dir, char *err, size_t errlen)
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
