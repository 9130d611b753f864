/*
 * The pairs task (DIGITS's examples/siamese/create_db.py): from a classification
 * source, pairs_train pairs of train images and pairs_val pairs of val images (of the
 * train images when the source has no val part). Pair i takes two images at random
 * (with replacement, as DIGITS's two randint calls) from a generator seeded with
 * (seed, split, i), so a pair does not depend on the thread that made it.
 *
 * A pair record is 3 x H x W: channel 0 the first image in gray, channel 1 the second,
 * channel 2 zeros, each image read and resized as classification's (ds_prepare_record);
 * its label record is one f32, 1 when both images have the same class, else 0.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

static const char *const g_pair_labels[2] = {"different", "same"};

/* What the workers share while making one split's pairs. */
typedef struct pair_src {
    const cd_dataset_config_t *gray; /* the dataset's settings read as 1 channel, encoding none */
    int encoding;                    /* of the pair records */
    const ds_items *images;          /* the images pairs are drawn from */
    int split;
    uint64_t *sum;                   /* 3*h*w sums of the pairs made, or NULL */
    size_t summed;                   /* the pairs in sum */
} pair_src;

/* The two images of pair i: indices into src->images. */
static void pair_pick(const pair_src *src, size_t i, size_t *a, size_t *b)
{
    uint64_t rng = ds_seed_mix(src->gray->seed, DS_STREAM_PAIRS + (uint64_t)src->split, i);
    *a = (size_t)ds_rand_below(&rng, src->images->n);
    *b = (size_t)ds_rand_below(&rng, src->images->n);
}

/* Pair i's record (a worker thread): both images, then the 3-channel record. */
static void prepare_pair(void *ctx, size_t i, uint64_t *sum, ds_record *r)
{
    pair_src *src = ctx;
    size_t idx[2];
    pair_pick(src, i, &idx[0], &idx[1]);
    memset(r, 0, sizeof *r);
    cd_image_t img;
    if (cd_image_alloc(&img, 3, src->gray->height, src->gray->width, r->msg, sizeof r->msg) != CD_OK)
        return;
    size_t plane = (size_t)img.h * img.w;
    memset(img.data + 2 * plane, 0, plane);
    for (int k = 0; k < 2; k++) {
        ds_record one;
        const char *path = src->images->v[idx[k]].path;
        /* the image's place in the list seeds its fill noise: the same image, the same
         * record, in every pair */
        ds_prepare_record(src->gray, path, src->split, idx[k], NULL, &one);
        if (!one.ok) {
            snprintf(r->msg, sizeof r->msg, "%.200s: %.170s", path, one.msg);
            free(one.rec);
            cd_image_free(&img);
            return;
        }
        memcpy(img.data + k * plane, one.rec, plane);
        free(one.rec);
    }
    if (src->encoding == CD_ENC_NONE) {
        r->rec = img.data;
        r->len = 3 * plane;
        img.data = NULL;
        r->ok = 1;
    } else {
        r->ok = cd_db_encode_record(&img, src->encoding, &r->rec, &r->len, r->msg, sizeof r->msg) == CD_OK;
    }
    if (r->ok && sum) { /* the worker's own sums: channel 2 stays zero */
        const uint8_t *px = r->rec && src->encoding == CD_ENC_NONE ? r->rec : img.data;
        for (size_t k = 0; k < 2 * plane; k++)
            sum[k] += px[k];
    }
    cd_image_free(&img);
}

typedef struct pair_split {
    ds_split_dbs dbs;
    pair_src *src;
    size_t n;
    size_t same;
    ds_skips *skips;
} pair_split;

static int consume_pair(void *arg, size_t i, ds_record *r, char *err, size_t errlen)
{
    pair_split *c = arg;
    if (!r->ok) {
        char where[64];
        snprintf(where, sizeof where, "%s pair %zu", cd_split_name(c->src->split), i);
        ds_skip(c->skips, where, r->msg);
    } else {
        size_t a, b;
        pair_pick(c->src, i, &a, &b);
        int same = c->src->images->v[a].label == c->src->images->v[b].label;
        uint8_t label[4];
        ds_put_f32(label, &(float){same ? 1.0f : 0.0f}, 1);
        if (ds_split_dbs_add(&c->dbs, r->rec, r->len, label, sizeof label, err, errlen) != CD_OK)
            return CD_ERR;
        c->same += (size_t)same;
    }
    ds_split_dbs_progress(&c->dbs, i + 1, c->n);
    return CD_OK;
}

/* One split's pairs; *written and *same get what was made. */
static int create_split(const cd_dataset_config_t *cfg, pair_src *src, size_t npairs, const char *outdir,
                        ds_skips *skips, FILE *out, size_t *written, size_t *same, char *err, size_t errlen)
{
    *written = *same = 0;
    ds_db_shape fs = {3, cfg->height, cfg->width, cfg->encoding, 0, 0}, ls = {1, 1, 1, CD_ENC_F32, 0, 0};
    pair_split c = {.src = src, .n = npairs, .skips = skips};
    if (ds_split_dbs_open(&c.dbs, outdir, src->split, &fs, &ls, out, err, errlen) != CD_OK)
        return CD_ERR;
    ds_pipe_job job = {.cfg = cfg, .n = npairs, .split = src->split, .threads = ds_thread_count(cfg),
                       .sum = src->sum, .sum_values = 3 * (size_t)cfg->height * cfg->width,
                       .prepare = prepare_pair, .prepare_ctx = src};
    int rc = ds_split_dbs_end(&c.dbs, ds_pipeline_run(&job, consume_pair, &c, err, errlen), err, errlen);
    src->summed = job.sum_count;
    if (rc == CD_OK && c.dbs.written == 0)
        return ds_err(err, errlen, "none of the %zu %s pairs could be made (%zu skipped; the log names the "
                      "first); check the image files", npairs, cd_split_name(src->split), skips->count);
    if (rc == CD_OK) {
        *written = c.dbs.written;
        *same = c.same;
    }
    return rc;
}

/* The `dataset` line: pairs per split, and per target ("different", "same") per split. */
static json_t *summary(const cd_dataset_result_t *res, const size_t same[CD_SPLIT_COUNT])
{
    json_t *classes = json_array();
    for (int t = 0; t < 2; t++) {
        json_int_t n[CD_SPLIT_COUNT];
        for (int s = 0; s < CD_SPLIT_COUNT; s++)
            n[s] = (json_int_t)(t ? same[s] : res->count[s] - same[s]);
        json_array_append_new(classes, json_pack("{s:s, s:I, s:I, s:I}", "label", g_pair_labels[t], "train",
                                                 n[0], "val", n[1], "test", n[2]));
    }
    return ds_dataset_line(res, classes, 1);
}

/* stats.json's pairs fields: the label shape, and per split the pairs, how many are
 * of the same class and which images they were drawn from. */
static json_t *stats_fields(const cd_dataset_config_t *cfg, const cd_dataset_result_t *res,
                            const size_t same[CD_SPLIT_COUNT], const int from[CD_SPLIT_COUNT],
                            const ds_plan *plan)
{
    ds_db_shape images = {3, cfg->height, cfg->width, cfg->encoding, 2, 0}, labels = {1, 1, 1, CD_ENC_F32, 0, 0};
    json_t *f = ds_stats_fields(&images, cfg->resize_mode, cfg->seed, CD_TASK_PAIRS, &labels, res);
    json_t *pairs = json_object();
    for (int s = 0; s < CD_SPLIT_COUNT; s++) {
        if (!res->count[s])
            continue;
        json_object_set_new(pairs, cd_split_name(s),
                            json_pack("{s:I, s:I, s:s, s:I}", "pairs", (json_int_t)res->count[s], "same",
                                      (json_int_t)same[s], "images_from", cd_split_name(from[s]), "images",
                                      (json_int_t)plan->split[from[s]].n));
    }
    json_object_set_new(f, "pairs", pairs);
    return f;
}

int ds_create_pairs(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                    cd_dataset_result_t *result, char *err, size_t errlen)
{
    cd_dataset_result_t res = {0};
    ds_plan plan = {0};
    ds_skips skips = {0, progress};
    size_t same[CD_SPLIT_COUNT] = {0}, plane = (size_t)cfg->height * cfg->width;
    int from[CD_SPLIT_COUNT] = {CD_SPLIT_TRAIN, CD_SPLIT_VAL, CD_SPLIT_TEST};
    uint64_t *sum = NULL;
    size_t sum_count = 0;
    double t0 = cd_now();
    cd_dataset_config_t gray = *cfg; /* shares cfg's strings; only read */
    gray.channels = 1;
    gray.encoding = CD_ENC_NONE;
    int rc = ds_check_image_cfg(cfg, err, errlen);
    if (rc == CD_OK)
        rc = ds_prepare_outdir(outdir, err, errlen);
    if (rc == CD_OK)
        rc = cfg->folder_train[0] ? ds_plan_folders(cfg, &plan, &skips, progress, err, errlen)
                                  : ds_plan_textfiles(cfg, &plan, &skips, progress, err, errlen);
    if (rc != CD_OK)
        goto out;
    if (plan.split[CD_SPLIT_VAL].n == 0)
        from[CD_SPLIT_VAL] = CD_SPLIT_TRAIN;
    ds_emit_log(progress, "info", "%d classes; images: train %zu, val %zu; %d train pairs from the train "
                "images, %d val pairs from the %s images", plan.nclasses, plan.split[0].n, plan.split[1].n,
                cfg->pairs_train, cfg->pairs_val, cd_split_name(from[CD_SPLIT_VAL]));
    if (plan.split[CD_SPLIT_TEST].n)
        ds_emit_log(progress, "warning", "a pairs dataset has no test split; the %zu test images are not "
                    "used (set pct_test to 0)", plan.split[CD_SPLIT_TEST].n);
    if (plan.split[CD_SPLIT_TRAIN].n == 0) {
        rc = ds_err(err, errlen, "no images are left for training; lower pct_val or add images");
        goto out;
    }
    sum = cd_xcalloc(3 * plane, sizeof(uint64_t));
    const int counts[CD_SPLIT_COUNT] = {cfg->pairs_train, cfg->pairs_val, 0};
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        if (counts[s] <= 0)
            continue;
        pair_src src = {&gray, cfg->encoding, &plan.split[from[s]], s, s == CD_SPLIT_TRAIN ? sum : NULL, 0};
        rc = create_split(cfg, &src, (size_t)counts[s], outdir, &skips, progress, &res.count[s], &same[s], err,
                          errlen);
        if (s == CD_SPLIT_TRAIN)
            sum_count = src.summed;
    }
    if (rc != CD_OK)
        goto out;
    res.skipped = skips.count;
    res.num_classes = 2;
    if (skips.count)
        ds_emit_log(progress, "warning", "%zu files or pairs were skipped in all", skips.count);
    rc = ds_write_labels(outdir, (char *const *)g_pair_labels, 2, err, errlen);
    if (rc == CD_OK)
        rc = ds_write_mean(outdir, 3, cfg->height, cfg->width, sum, sum_count, err, errlen);
    if (rc == CD_OK)
        rc = ds_finish_job(outdir, progress, summary(&res, same), stats_fields(cfg, &res, same, from, &plan),
                           cd_now() - t0, err, errlen);
out:
    if (result)
        *result = res;
    free(sum);
    ds_plan_free(&plan);
    return rc;
}
