/*
 * The `dataset` task: parse (which image goes where), create (one .db per split,
 * written in order while a thread pool prepares the records), then labels.txt,
 * mean.bin, mean.png and, last, stats.json. A run that fails or is killed leaves no
 * stats.json, so it never looks complete.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

static const char *const g_split_names[CD_SPLIT_COUNT] = {"train", "val", "test"};

const char *cd_split_name(int split)
{
    return split >= 0 && split < CD_SPLIT_COUNT ? g_split_names[split] : "?";
}

typedef struct split_ctx {
    cd_db_writer_t *w;
    size_t written;
    size_t *per_class; /* records written per label */
} split_ctx;

static int write_record(void *arg, const ds_item *it, ds_record *r, char *err, size_t errlen)
{
    split_ctx *c = arg;
    if (cd_db_writer_add(c->w, r->rec, r->len, it->label, err, errlen) != CD_OK)
        return CD_ERR;
    c->written++;
    c->per_class[it->label]++;
    return CD_OK;
}

/* Write one split's .db; *written gets the record count (0: no file was made). */
static int create_split(const cd_dataset_config_t *cfg, const ds_plan *plan, int split,
                        const char *outdir, ds_skips *skips, FILE *out, size_t *per_class,
                        uint64_t *sum, size_t *sum_count, size_t *written, char *err,
                        size_t errlen)
{
    const ds_items *items = &plan->split[split];
    *written = 0;
    const char *name = jobdir_name(JOBDIR_TRAIN_DB + split);
    char path[4096];
    if (ds_job_file_path(outdir, JOBDIR_TRAIN_DB + split, path, sizeof path, err, errlen) != CD_OK)
        return CD_ERR;
    double t0 = cd_now();
    cd_db_writer_t *w = cd_db_writer_open(path, cfg->channels, cfg->height, cfg->width,
                                          cfg->encoding, plan->nclasses, err, errlen);
    if (!w)
        return CD_ERR;
    split_ctx ctx = {.w = w, .per_class = per_class};
    ds_progress progress;
    ds_progress_init(&progress, out, split);
    int rc = ds_pipeline_items(cfg, items, split, sum, sum_count, skips, &progress, write_record, &ctx, err,
                               errlen);
    if (rc == CD_OK && ctx.written == 0) {
        cd_db_writer_abort(w);
        ds_emit_log(out, "warning", "none of the %zu %s images could be read; %s is not made",
                    items->n, g_split_names[split], name);
    } else if (rc == CD_OK) {
        rc = cd_db_writer_finish(w, err, errlen);
        if (rc == CD_OK) {
            double dt = cd_now() - t0;
            ds_emit_log(out, "info", "%s: %zu images in %.2f s (%.0f images/s)", name,
                        ctx.written, dt, dt > 0 ? ctx.written / dt : 0.0);
            *written = ctx.written;
        }
    } else {
        cd_db_writer_abort(w);
    }
    return rc;
}

/* DIGITS's name of a folder's parse task: the splits it gives images to, "Parse Folder
 * (train/val)" for the training folder with the default 25 % for validation. */
static void parse_name(const cd_dataset_config_t *cfg, int split, char *buf, size_t len)
{
    double pv = split == CD_SPLIT_VAL ? 100 : 0, pt = split == CD_SPLIT_TEST ? 100 : 0;
    if (split == CD_SPLIT_TRAIN) {
        pv = cfg->folder_val[0] ? 0 : cfg->pct_val;
        pt = cfg->folder_test[0] ? 0 : cfg->pct_test;
    }
    const char *sets[CD_SPLIT_COUNT];
    int n = 0;
    if (pv + pt < 100)
        sets[n++] = g_split_names[CD_SPLIT_TRAIN];
    if (pv > 0)
        sets[n++] = g_split_names[CD_SPLIT_VAL];
    if (pt > 0)
        sets[n++] = g_split_names[CD_SPLIT_TEST];
    size_t k = (size_t)snprintf(buf, len, "Parse Folder (");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? "/" : "", sets[i]);
    if (k < len)
        snprintf(buf + k, len - k, ")");
}

/* One entry per folder parsed, in DIGITS's ParseFolderTasks shape plus the folder. */
static json_t *parse_tasks(const cd_dataset_config_t *cfg, const cd_dataset_result_t *res)
{
    const char *folders[CD_SPLIT_COUNT] = {cfg->folder_train, cfg->folder_val, cfg->folder_test};
    json_t *out = json_array();
    for (int i = 0; i < res->nparsed; i++) {
        const struct cd_dataset_parse *p = &res->parsed[i];
        char name[64], *folder = cd_xstrdup(folders[p->split]);
        parse_name(cfg, p->split, name, sizeof name);
        ds_utf8_sanitize(folder);
        json_array_append_new(out, json_pack("{s:s, s:s, s:i, s:I, s:I, s:I}", "name", name, "folder",
                                             folder, "label_count", p->label_count, "train_count",
                                             (json_int_t)p->count[CD_SPLIT_TRAIN], "val_count",
                                             (json_int_t)p->count[CD_SPLIT_VAL], "test_count",
                                             (json_int_t)p->count[CD_SPLIT_TEST]));
        free(folder);
    }
    return out;
}

/* The `dataset` line's fields (docs/worker-protocol.md); stats.json adds more. */
static json_t *summary(const cd_dataset_config_t *cfg, const ds_plan *plan,
                       const cd_dataset_result_t *res, size_t *const per_class[CD_SPLIT_COUNT])
{
    json_t *classes = json_array();
    for (int c = 0; c < plan->nclasses; c++) {
        char *name = cd_xstrdup(plan->classes[c]);
        ds_utf8_sanitize(name);
        json_array_append_new(classes,
                              json_pack("{s:s, s:I, s:I, s:I}", "label", name, "train",
                                        (json_int_t)per_class[0][c], "val",
                                        (json_int_t)per_class[1][c], "test",
                                        (json_int_t)per_class[2][c]));
        free(name);
    }
    json_t *line = ds_dataset_line(res, classes, 1);
    if (line && res->nparsed)
        json_object_set_new(line, "parse_tasks", parse_tasks(cfg, res));
    return line;
}

/* stats.json's classification fields: the images' shape, resize mode and encoding. */
static json_t *stats_fields(const cd_dataset_config_t *cfg, const ds_plan *plan, const cd_dataset_result_t *res)
{
    ds_db_shape images = {cfg->channels, cfg->height, cfg->width, cfg->encoding, plan->nclasses, 0};
    return ds_stats_fields(&images, cfg->resize_mode, cfg->seed, CD_TASK_CLASSIFICATION, NULL, res);
}

/* What to check when a list's images are missing: the folder its relative paths start
 * from. */
static const char *root_advice(const cd_dataset_config_t *cfg, int split)
{
    static const char *const advice[CD_SPLIT_COUNT] = {
        " and textfile_root, the folder the train list's relative paths start from",
        " and textfile_val_root (else textfile_root), the folder the val list's relative paths start from",
        " and textfile_test_root (else textfile_root), the folder the test list's relative paths start from",
    };
    return cfg->textfile_train[0] ? advice[split] : "";
}

static int create_classification(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                                 cd_dataset_result_t *result, char *err, size_t errlen)
{
    cd_dataset_result_t res = {0};
    ds_plan plan = {0};
    ds_skips skips = {0, progress};
    size_t *per_class[CD_SPLIT_COUNT] = {0};
    uint64_t *sum = NULL;
    size_t sum_count = 0;
    double t0 = cd_now();
    int rc = ds_check_image_cfg(cfg, err, errlen);
    if (rc == CD_OK)
        rc = ds_prepare_outdir(outdir, err, errlen);
    if (rc == CD_OK)
        rc = cfg->folder_train && cfg->folder_train[0]
                 ? ds_plan_folders(cfg, &plan, &skips, progress, err, errlen)
                 : ds_plan_textfiles(cfg, &plan, &skips, progress, err, errlen);
    if (rc != CD_OK)
        goto out;

    for (int s = 0; s < CD_SPLIT_COUNT; s++) {
        ds_shuffle_split(cfg->seed, s, plan.split[s].v, plan.split[s].n, sizeof(ds_item));
        per_class[s] = cd_xcalloc((size_t)plan.nclasses, sizeof(size_t));
    }
    ds_emit_log(progress, "info", "%d classes; images found: train %zu, val %zu, test %zu; "
                "%zu files skipped so far", plan.nclasses, plan.split[0].n, plan.split[1].n,
                plan.split[2].n, skips.count);
    if (plan.split[CD_SPLIT_TRAIN].n == 0) {
        rc = ds_err(err, errlen, "no images are left for training; lower pct_val and pct_test "
                    "or add images");
        goto out;
    }
    sum = cd_xcalloc((size_t)cfg->channels * cfg->height * cfg->width, sizeof(uint64_t));
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        if (plan.split[s].n == 0)
            continue;
        size_t counted = 0;
        rc = create_split(cfg, &plan, s, outdir, &skips, progress, per_class[s],
                          s == CD_SPLIT_TRAIN ? sum : NULL, &counted, &res.count[s], err,
                          errlen);
        if (s == CD_SPLIT_TRAIN)
            sum_count = counted;
        if (rc == CD_OK && res.count[s] == 0)
            rc = ds_err(err, errlen, "none of the %zu %s images could be read (%zu files skipped; "
                        "the log names the first); check the image files%s",
                        plan.split[s].n, g_split_names[s], skips.count, root_advice(cfg, s));
    }
    if (rc != CD_OK)
        goto out;

    res.skipped = skips.count;
    res.num_classes = plan.nclasses;
    res.nparsed = plan.nparsed;
    memcpy(res.parsed, plan.parsed, sizeof res.parsed);
    if (skips.count)
        ds_emit_log(progress, "warning", "%zu files were skipped in all", skips.count);
    rc = ds_write_labels(outdir, plan.classes, plan.nclasses, err, errlen);
    if (rc == CD_OK)
        rc = ds_write_mean(outdir, cfg->channels, cfg->height, cfg->width, sum, sum_count, err, errlen);
    if (rc == CD_OK)
        rc = ds_finish_job(outdir, progress, summary(cfg, &plan, &res, per_class), stats_fields(cfg, &plan, &res),
                           cd_now() - t0, err, errlen);
out:
    if (result)
        *result = res;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        free(per_class[s]);
    free(sum);
    ds_plan_free(&plan);
    return rc;
}

static const char *const g_task_names[CD_TASK_COUNT] = {
    [CD_TASK_CLASSIFICATION] = "classification", [CD_TASK_SEGMENTATION] = "segmentation",
    [CD_TASK_REGRESSION] = "regression", [CD_TASK_PAIRS] = "pairs", [CD_TASK_DETECTION] = "detection",
};

const char *cd_dataset_task_name(int task)
{
    return task >= 0 && task < CD_TASK_COUNT ? g_task_names[task] : "?";
}

int cd_dataset_task_parse(const char *name)
{
    for (int i = 0; i < CD_TASK_COUNT; i++)
        if (name && !strcmp(name, g_task_names[i]))
            return i;
    return -1;
}

/* One way of making a dataset per task. */
typedef int (*ds_creator)(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                          cd_dataset_result_t *result, char *err, size_t errlen);

static const ds_creator g_creators[CD_TASK_COUNT] = {
    [CD_TASK_CLASSIFICATION] = create_classification,
    [CD_TASK_SEGMENTATION] = ds_create_segmentation,
    [CD_TASK_REGRESSION] = ds_create_regression,
    [CD_TASK_PAIRS] = ds_create_pairs,
    [CD_TASK_DETECTION] = ds_create_detection,
};

int cd_dataset_create(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                      cd_dataset_result_t *result, char *err, size_t errlen)
{
    if (cfg->task < 0 || cfg->task >= CD_TASK_COUNT || !g_creators[cfg->task])
        return ds_err(err, errlen, "dataset task %s is not supported by this worker", cd_dataset_task_name(cfg->task));
    return g_creators[cfg->task](cfg, outdir, progress, result, err, errlen);
}
