/* The files every kind of dataset job writes in its folder, whatever its task: making
 * the folder and removing the previous run's outputs, labels.txt, the mean image of the
 * train features, and stats.json with the `dataset` and `done` lines (written last: a
 * folder without it is incomplete). */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

int ds_remove_outputs(const char *dir, const jobdir_file *files, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        if (ds_job_file_path(dir, files[i], p, sizeof p, err, errlen) != CD_OK)
            return CD_ERR;
        if (unlink(p) != 0 && errno != ENOENT) {
            int e = errno;
            return ds_err(err, errlen, "cannot remove the old %s: %s; %s", p, strerror(e), ds_errno_advice(e));
        }
    }
    return CD_OK;
}

int ds_write_mean(const char *outdir, int c, int h, int w, const uint64_t *sum, size_t count,
                  char *err, size_t errlen)
{
    size_t n = (size_t)c * h * w;
    float *mean = cd_xmalloc(n * sizeof(float));
    for (size_t k = 0; k < n; k++)
        mean[k] = (float)((double)sum[k] / (double)(count ? count : 1));
    char bin[4096], png[4096], jpg[4096];
    int rc = ds_job_file_path(outdir, JOBDIR_MEAN_BIN, bin, sizeof bin, err, errlen);
    if (rc == CD_OK)
        rc = ds_job_file_path(outdir, JOBDIR_MEAN_PNG, png, sizeof png, err, errlen);
    if (rc == CD_OK)
        rc = ds_job_file_path(outdir, JOBDIR_MEAN_JPG, jpg, sizeof jpg, err, errlen);
    if (rc == CD_OK)
        rc = cd_mean_save(bin, c, h, w, count, mean, err, errlen);
    if (rc == CD_OK)
        rc = cd_mean_save_png(png, c, h, w, mean, err, errlen);
    if (rc == CD_OK)
        rc = cd_mean_save_jpg(jpg, c, h, w, mean, err, errlen);
    free(mean);
    return rc;
}

/* stats.json (ds_finish_job's contract); takes fields. */
static int write_stats(const char *outdir, const json_t *line, json_t *fields, double seconds, char *err,
                       size_t errlen)
{
    json_t *st = json_deep_copy(line);
    json_object_del(st, "type");
    json_t *dbs = json_object();
    json_t *splits = json_object_get(st, "splits");
    const char *key;
    json_t *val;
    json_object_foreach(splits, key, val)
    {
        for (int split = 0; split < CD_SPLIT_COUNT; split++)
            if (!strcmp(key, cd_split_name(split)))
                json_object_set_new(dbs, key, json_string(jobdir_name(JOBDIR_TRAIN_DB + split)));
    }
    json_object_set_new(st, "format_version", json_integer(DS_DB_VERSION));
    json_object_set_new(st, "db_files", dbs);
    json_object_set_new(st, "mean_png", json_string(jobdir_name(JOBDIR_MEAN_PNG)));
    json_object_set_new(st, "mean_jpg", json_string(jobdir_name(JOBDIR_MEAN_JPG)));
    if (fields)
        json_object_update(st, fields);
    json_decref(fields);
    json_object_set_new(st, "seconds", json_real(seconds));
    json_object_set_new(st, "created", json_real(cd_wall_time()));
    char *text = json_dumps(st, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(st);
    char path[4096];
    int rc = ds_job_file_path(outdir, JOBDIR_STATS_JSON, path, sizeof path, err, errlen);
    if (rc == CD_OK)
        rc = text ? ds_write_file(path, text, strlen(text), err, errlen)
                  : ds_err(err, errlen, "cannot write %s: out of memory encoding it", path);
    free(text);
    return rc;
}

int ds_prepare_outdir(const char *outdir, char *err, size_t errlen)
{
    if (cd_mkdirs(outdir, 0755) != CD_OK) {
        int e = errno;
        return ds_err(err, errlen, "cannot create the job folder %s: %s; %s", outdir, strerror(e),
                      ds_errno_advice(e));
    }
    return ds_remove_outputs(outdir, ds_generic_outputs, ds_generic_outputs_count, err, errlen);
}

int ds_job_file_path(const char *outdir, jobdir_file f, char *path, size_t size, char *err, size_t errlen)
{
    if (jobdir_path(outdir, f, path, size) != CD_OK)
        return ds_err(err, errlen, "the job folder path %.200s... is too long; choose a shorter one", outdir);
    return CD_OK;
}

int ds_write_labels(const char *outdir, char *const *names, int n, char *err, size_t errlen)
{
    char path[4096];
    if (ds_job_file_path(outdir, JOBDIR_LABELS, path, sizeof path, err, errlen) != CD_OK)
        return CD_ERR;
    return cd_labels_save(path, names, n, err, errlen);
}

json_t *ds_dataset_line(const cd_dataset_result_t *res, json_t *classes, int labels_file)
{
    json_t *splits = json_object();
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (res->count[s])
            json_object_set_new(splits, cd_split_name(s), json_integer((json_int_t)res->count[s]));
    json_t *line = json_pack("{s:s, s:o, s:o, s:I, s:s}", "type", "dataset", "splits", splits, "classes", classes,
                             "skipped", (json_int_t)res->skipped, "mean_file", jobdir_name(JOBDIR_MEAN_BIN));
    if (line && labels_file)
        json_object_set_new(line, "labels_file", json_string(jobdir_name(JOBDIR_LABELS)));
    return line;
}

json_t *ds_stats_fields(const ds_db_shape *images, int resize_mode, uint64_t seed, int task,
                        const ds_db_shape *labels, const cd_dataset_result_t *res)
{
    json_t *f = json_object();
    if (labels) {
        json_t *dbs = json_object();
        for (int s = 0; s < CD_SPLIT_COUNT; s++)
            if (res->count[s])
                json_object_set_new(dbs, cd_split_name(s), json_string(jobdir_name(JOBDIR_TRAIN_LABELS_DB + s)));
        json_object_set_new(f, "task", json_string(cd_dataset_task_name(task)));
        json_object_set_new(f, "label_shape", json_pack("[i, i, i]", labels->c, labels->h, labels->w));
        json_object_set_new(f, "label_encoding", json_string(cd_encoding_name(labels->encoding)));
        json_object_set_new(f, "label_db_files", dbs);
    }
    json_object_set_new(f, "channels", json_integer(images->c));
    json_object_set_new(f, "width", json_integer(images->w));
    json_object_set_new(f, "height", json_integer(images->h));
    if (resize_mode >= 0)
        json_object_set_new(f, "resize_mode", json_string(cd_resize_mode_name(resize_mode)));
    json_object_set_new(f, "encoding", json_string(cd_encoding_name(images->encoding)));
    json_object_set_new(f, "num_classes", json_integer(images->num_classes));
    json_object_set_new(f, "seed", json_integer((json_int_t)seed));
    return f;
}

int ds_finish_job(const char *outdir, FILE *progress, json_t *line, json_t *fields, double seconds, char *err,
                  size_t errlen)
{
    if (write_stats(outdir, line, fields, seconds, err, errlen) != CD_OK) {
        json_decref(line);
        return CD_ERR;
    }
    ds_emit_json(progress, line);
    ds_emit_json(progress, json_pack("{s:s}", "type", "done"));
    return CD_OK;
}
