/* Loader threads filling a ring of batches in stream order (see loader.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "cdigits/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/util.h"

/* A pseudo-random permutation of [0, n) without storage: a 4-round Feistel network on
 * the smallest even number of bits that covers n, with cycle walking. */
static uint64_t feistel(uint64_t x, int half, uint64_t key)
{
    uint64_t mask = (1ULL << half) - 1, l = x >> half, r = x & mask;
    for (int round = 0; round < 4; round++) {
        uint64_t f = cd_mix64(r ^ key ^ ((uint64_t)round << 56)) & mask;
        uint64_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return (l << half) | r;
}

size_t cd_loader_record(uint64_t seed, int shuffle, size_t n, uint64_t k)
{
    uint64_t pass = k / n, i = k % n;
    if (!shuffle || n < 2)
        return (size_t)i;
    int bits = 2;
    while ((1ULL << bits) < n)
        bits += 2;
    uint64_t key = cd_mix64(seed ^ cd_mix64(pass + 0x5851f42d4c957f2dULL));
    do
        i = feistel(i, bits / 2, key);
    while (i >= n);
    return (size_t)i;
}

typedef struct slot {
    cd_batch b;
    int state; /* 0 free, 1 filling, 2 ready */
    int pinned; /* pixels came from host_alloc */
    int side_pinned; /* labels, offsets and flags too */
    float *label_f;  /* with a label db: one stored label as floats */
    uint8_t *label_px; /* with label augmentations: two stored labels as pixels */
} slot;

struct cd_loader {
    cd_loader_opts o;
    size_t n, image_bytes;
    int c, h, w;
    cd_label_shape label;   /* one image's label in a batch */
    size_t label_size;      /* floats of it */
    size_t label_record;    /* floats of a stored label record */
    int aug_pixels;         /* opts.aug changes pixels (labels get its geometry) */
    int label_u8;           /* the label db holds images (read as uint8, augmentable) */
    long total_batches; /* wrap 0: batches in one pass; else -1 */
    slot *ring;
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    long next_fill;     /* next batch number a thread will claim */
    long next_out;      /* next batch number delivered */
    int stop;
    int failed;
    char err[512];
};

int cd_label_shape_of(const cd_db_t *db, const cd_db_t *label_db, int crop, cd_label_shape *out,
                      char *err, size_t errlen)
{
    *out = (cd_label_shape){1, 1, 1, 0};
    if (!label_db)
        return CD_OK;
    if (cd_db_count(label_db) != cd_db_count(db)) {
        snprintf(err, errlen, "the label db has %zu records but the images %zu; recreate the dataset",
                 cd_db_count(label_db), cd_db_count(db));
        return CD_ERR;
    }
    cd_label_shape_for(cd_db_height(db), cd_db_width(db), cd_db_channels(label_db), cd_db_height(label_db),
                       cd_db_width(label_db), crop, out);
    return CD_OK;
}

void cd_label_shape_for(int ih, int iw, int c, int h, int w, int crop, cd_label_shape *out)
{
    *out = (cd_label_shape){c, h, w, h == ih && w == iw};
    if (out->spatial && crop > 0)
        out->h = out->w = crop;
}

static void fail(cd_loader_t *l, const char *what, size_t rec, const char *e)
{
    pthread_mutex_lock(&l->lock);
    if (!l->failed)
        snprintf(l->err, sizeof l->err, "reading %s %zu: %s", what, rec, e);
    l->failed = 1;
    pthread_mutex_unlock(&l->lock);
}

/* A spatial label image with its image's augmentation: read as uint8, moved with the
 * image's geometry (nearest, 255 outside: the ignore label), as floats into scratch. */
static int read_label_augmented(cd_loader_t *l, size_t rec, int h, int w, const cd_aug_params *aug, uint8_t *u8,
                                float *scratch, char *e, size_t elen)
{
    size_t n = (size_t)cd_db_channels(l->o.label_db) * h * w;
    if (cd_db_read(l->o.label_db, rec, u8, e, elen) != CD_OK)
        return CD_ERR;
    cd_aug_apply_label(aug, cd_db_channels(l->o.label_db), h, w, u8, u8 + n, 255);
    for (size_t i = 0; i < n; i++)
        scratch[i] = (float)u8[n + i];
    return CD_OK;
}

/* Record rec's label into dst (label_size floats): a spatial label (of its image's h x w)
 * augmented, cropped at (oy, ox) and flipped as its image is, back to back at its
 * delivered size. u8 has room for two label records. */
static void fill_label(cd_loader_t *l, size_t rec, int h, int w, int oy, int ox, int flip, const cd_aug_params *aug,
                       uint8_t *u8, float *scratch, float *dst)
{
    char e[256];
    int rc = aug && l->label.spatial && l->label_u8
                 ? read_label_augmented(l, rec, h, w, aug, u8, scratch, e, sizeof e)
                 : cd_db_read_f32(l->o.label_db, rec, scratch, e, sizeof e);
    if (rc != CD_OK) {
        fail(l, "label record", rec, e);
        memset(dst, 0, l->label_size * sizeof(float));
        return;
    }
    if (!l->label.spatial) {
        memcpy(dst, scratch, l->label_size * sizeof(float));
        return;
    }
    int oh = l->o.crop > 0 ? l->o.crop : h, ow = l->o.crop > 0 ? l->o.crop : w;
    for (int ch = 0; ch < l->label.c; ch++)
        for (int y = 0; y < oh; y++) {
            int sy = oy + (flip & CD_FLIP_UD ? oh - 1 - y : y);
            const float *src = scratch + ((size_t)ch * h + sy) * w + ox;
            float *d = dst + ((size_t)ch * oh + y) * ow;
            for (int x = 0; x < ow; x++)
                d[x] = src[flip & CD_FLIP_LR ? ow - 1 - x : x];
        }
}

static void fill(cd_loader_t *l, slot *sl, long index)
{
    cd_batch *b = &sl->b;
    const cd_loader_opts *o = &l->o;
    uint64_t stride = o->stride > 0 ? (uint64_t)o->stride : (uint64_t)o->batch;
    uint64_t first = (uint64_t)index * stride + (uint64_t)o->offset;
    int n = o->batch;
    if (!o->wrap && first + (uint64_t)n > l->n)
        n = (int)(l->n - first);
    b->index = index;
    b->n = n;
    b->h = l->h;
    b->w = l->w;
    b->label_floats = l->label_size;
    for (int j = 0; j < n; j++) {
        uint64_t k = first + (uint64_t)j;
        size_t rec = cd_loader_record(o->seed, o->shuffle, l->n, k);
        uint8_t *dst = b->pixels + (size_t)j * l->image_bytes;
        int h = l->h, w = l->w;
        if (cd_db_mixed(o->db)) {
            /* records of varying size come one per batch (cd_loader_start) */
            char e[256];
            if (cd_db_record_shape(o->db, rec, &h, &w, e, sizeof e) != CD_OK)
                fail(l, "record", rec, e);
            if (o->crop > h || o->crop > w) {
                snprintf(e, sizeof e, "it is %dx%d, smaller than the crop size %d; crop less or drop the "
                         "smaller images", w, h, o->crop);
                fail(l, "record", rec, e);
                h = w = o->crop;
            }
            b->h = h;
            b->w = w;
            if (l->label.spatial) /* this record's label at its delivered size */
                b->label_floats = (size_t)l->label.c * (o->crop > 0 ? (size_t)o->crop * o->crop : (size_t)h * w);
            int lh = h, lw = w;
            if (o->label_db && l->label.spatial &&
                (cd_db_record_shape(o->label_db, rec, &lh, &lw, e, sizeof e) != CD_OK || lh != h || lw != w)) {
                snprintf(e, sizeof e, "its label is %dx%d but the image %dx%d; recreate the dataset", lw, lh, w, h);
                fail(l, "record", rec, e);
            }
        }
        const uint8_t *raw = cd_db_raw(o->db, rec);
        if (raw) {
            memcpy(dst, raw, l->image_bytes);
        } else {
            char e[256];
            if (cd_db_read(o->db, rec, dst, e, sizeof e) != CD_OK) {
                fail(l, "record", rec, e);
                memset(dst, 0, l->image_bytes);
            }
        }
        int range_y = o->crop > 0 ? h - o->crop : 0, range_x = o->crop > 0 ? w - o->crop : 0;
        if (o->random_crop) {
            b->oy[j] = (int)(cd_rand_uniform(o->seed ^ 0x0c0ffee1ULL, k, 0) * (float)(range_y + 1));
            b->ox[j] = (int)(cd_rand_uniform(o->seed ^ 0x0c0ffee1ULL, k, 1) * (float)(range_x + 1));
            if (b->oy[j] > range_y)
                b->oy[j] = range_y;
            if (b->ox[j] > range_x)
                b->ox[j] = range_x;
        } else {
            b->oy[j] = range_y / 2;
            b->ox[j] = range_x / 2;
        }
        int lr = (o->flip & CD_FLIP_LR) && cd_rand_uniform(o->seed ^ 0x31415926ULL, k, 2) < 0.5f;
        int ud = (o->flip & CD_FLIP_UD) && cd_rand_uniform(o->seed ^ 0x31415926ULL, k, 3) < 0.5f;
        b->mirror[j] = (uint8_t)((lr ? CD_FLIP_LR : 0) | (ud ? CD_FLIP_UD : 0));
        if (b->aug)
            cd_aug_draw(o->aug, o->seed, k, &b->aug[j]);
        if (o->label_db)
            fill_label(l, rec, h, w, b->oy[j], b->ox[j], b->mirror[j], l->aug_pixels ? &b->aug[j] : NULL, sl->label_px,
                       sl->label_f, b->labels + (size_t)j * l->label_size);
        else
            b->labels[j] = (float)cd_db_label(o->db, rec);
    }
}

static void *worker(void *arg)
{
    cd_loader_t *l = arg;
    pthread_setname_np(pthread_self(), "cd-loader");
    int ring = l->o.ring;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        long index = l->next_fill;
        /* wait until the slot of this batch is free (its previous user was delivered
         * and released) or we are told to stop */
        while (!l->stop && (l->ring[index % ring].state != 0 || index - l->next_out >= ring ||
                            index != l->next_fill))
        {
            pthread_cond_wait(&l->changed, &l->lock);
            index = l->next_fill;
        }
        if (l->stop || (l->total_batches >= 0 && index >= l->total_batches))
            break;
        l->next_fill++;
        slot *s = &l->ring[index % ring];
        s->state = 1;
        pthread_mutex_unlock(&l->lock);
        fill(l, s, index);
        pthread_mutex_lock(&l->lock);
        s->state = 2;
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

cd_loader_t *cd_loader_start(const cd_loader_opts *o, char *err, size_t errlen)
{
    cd_loader_t *l = cd_xcalloc(1, sizeof *l);
    l->o = *o;
    if (l->o.threads < 1)
        l->o.threads = 1;
    if (l->o.ring < 2)
        l->o.ring = 2;
    l->n = cd_db_count(o->db);
    l->c = cd_db_channels(o->db);
    l->h = cd_db_height(o->db);
    l->w = cd_db_width(o->db);
    l->image_bytes = (size_t)l->c * l->h * l->w;
    if (l->n == 0 || o->batch <= 0) {
        snprintf(err, errlen, "the split has no images");
        free(l);
        return NULL;
    }
    if (cd_db_mixed(o->db) && o->batch != 1) {
        snprintf(err, errlen, "the images are of varying size (force_same_shape 0), which load one per batch, "
                 "not %d; train at batch size 1 (with batch_accumulation for more images per step)", o->batch);
        free(l);
        return NULL;
    }
    if (o->crop > 0 && (o->crop > l->h || o->crop > l->w)) {
        snprintf(err, errlen, "crop size %d is larger than the %dx%d images", o->crop, l->h, l->w);
        free(l);
        return NULL;
    }
    if (cd_label_shape_of(o->db, o->label_db, o->crop, &l->label, err, errlen) != CD_OK) {
        free(l);
        return NULL;
    }
    l->label_size = cd_label_size(&l->label);
    l->label_record = o->label_db ? (size_t)cd_db_channels(o->label_db) * cd_db_height(o->label_db) *
                                        cd_db_width(o->label_db) : 1;
    l->aug_pixels = o->aug && cd_aug_changes_pixels(o->aug);
    l->label_u8 = o->label_db && cd_db_encoding(o->label_db) != CD_ENC_F32;
    if (l->aug_pixels && l->label.spatial && !l->label_u8 &&
        (o->aug->quad_rot != CD_AUG_QUAD_NONE || o->aug->rot > 0 || o->aug->scale > 0)) {
        snprintf(err, errlen, "the labels are float maps of the images' size, which quarter turns, rotation and "
                 "zoom cannot move with their images; train without those augmentations");
        free(l);
        return NULL;
    }
    l->total_batches = o->wrap ? -1 : (long)((l->n + (size_t)o->batch - 1) / (size_t)o->batch);
    l->next_fill = l->next_out = o->start_batch;
    l->ring = cd_xcalloc((size_t)l->o.ring, sizeof *l->ring);
    for (int i = 0; i < l->o.ring; i++) {
        cd_batch *b = &l->ring[i].b;
        size_t bytes = (size_t)o->batch * l->image_bytes;
        b->pixels = o->host_alloc && o->host_free ? o->host_alloc(o->host_ctx, bytes) : NULL;
        l->ring[i].pinned = b->pixels != NULL;
        if (!b->pixels)
            b->pixels = cd_xmalloc(bytes);
        /* the small per-batch arrays share one block after the pixels' */
        size_t n = (size_t)o->batch, side = n * (l->label_size * sizeof(float) + 2 * sizeof(int) + 1);
        uint8_t *block = NULL;
        if (l->ring[i].pinned)
            block = o->host_alloc(o->host_ctx, side);
        l->ring[i].side_pinned = block != NULL;
        if (!block)
            block = cd_xcalloc(1, side);
        b->labels = (float *)block;
        b->oy = (int *)(block + n * l->label_size * sizeof(float));
        b->ox = b->oy + n;
        b->mirror = (uint8_t *)(b->ox + n);
        b->aug = l->aug_pixels ? cd_xcalloc(n, sizeof(cd_aug_params)) : NULL;
        if (o->label_db) /* the stored label of the record being filled, read per slot */
            l->ring[i].label_f = cd_xmalloc(l->label_record * sizeof(float));
        if (o->label_db && l->aug_pixels && l->label_u8)
            l->ring[i].label_px = cd_xmalloc(2 * l->label_record);
    }
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->changed, NULL);
    l->threads = cd_xcalloc((size_t)l->o.threads, sizeof *l->threads);
    for (int i = 0; i < l->o.threads; i++) {
        if (pthread_create(&l->threads[i], NULL, worker, l) != 0) {
            snprintf(err, errlen, "cannot start loader threads");
            l->nthreads = i;
            cd_loader_stop(l);
            return NULL;
        }
        l->nthreads++;
    }
    return l;
}

const cd_batch *cd_loader_next(cd_loader_t *l, double *waited)
{
    if (l->total_batches >= 0 && l->next_out >= l->total_batches)
        return NULL;
    double t0 = cd_now();
    pthread_mutex_lock(&l->lock);
    slot *s = &l->ring[l->next_out % l->o.ring];
    while (s->state != 2 && !l->failed)
        pthread_cond_wait(&l->changed, &l->lock);
    int failed = l->failed;
    pthread_mutex_unlock(&l->lock);
    if (waited)
        *waited += cd_now() - t0;
    return failed ? NULL : &s->b;
}

void cd_loader_release(cd_loader_t *l, const cd_batch *b)
{
    pthread_mutex_lock(&l->lock);
    l->ring[b->index % l->o.ring].state = 0;
    l->next_out = b->index + 1;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

const char *cd_loader_error(const cd_loader_t *l) { return l->failed ? l->err : NULL; }

long cd_loader_next_index(const cd_loader_t *l) { return l->next_out; }

void cd_loader_stop(cd_loader_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
    for (int i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    for (int i = 0; i < l->o.ring; i++) {
        cd_batch *b = &l->ring[i].b;
        if (l->ring[i].pinned)
            l->o.host_free(l->o.host_ctx, b->pixels);
        else
            free(b->pixels);
        if (l->ring[i].side_pinned)
            l->o.host_free(l->o.host_ctx, b->labels);
        else
            free(b->labels);
        free(b->aug);
        free(l->ring[i].label_f);
        free(l->ring[i].label_px);
    }
    free(l->ring);
    free(l->threads);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->changed);
    free(l);
}
