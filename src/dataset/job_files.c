/* The files every kind of dataset job writes in its folder, whatever its task: removing
 * the previous run's outputs, the mean image of the train features, and stats.json
 * (written last: a folder without it is incomplete). */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

/* dir/NAME of f, malloc'ed. */
static char *job_path(const char *dir, jobdir_file f)
{
    const char *name = jobdir_name(f);
    char *p = cd_xmalloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

int ds_remove_outputs(const char *dir, const jobdir_file *files, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char *p = job_path(dir, files[i]);
        int rc = unlink(p);
        int e = errno;
        if (rc != 0 && e != ENOENT) {
            ds_err(err, errlen, "cannot remove the old %s: %s; %s", p, strerror(e), ds_errno_advice(e));
            free(p);
            return CD_ERR;
        }
        free(p);
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
    char *bin = job_path(outdir, JOBDIR_MEAN_BIN), *png = job_path(outdir, JOBDIR_MEAN_PNG);
    char *jpg = job_path(outdir, JOBDIR_MEAN_JPG);
    int rc = cd_mean_save(bin, c, h, w, count, mean, err, errlen);
    if (rc == CD_OK)
        rc = cd_mean_save_png(png, c, h, w, mean, err, errlen);
    if (rc == CD_OK)
        rc = cd_mean_save_jpg(jpg, c, h, w, mean, err, errlen);
    free(bin);
    free(png);
    free(jpg);
    free(mean);
    return rc;
}

int ds_write_stats(const char *outdir, const json_t *line, json_t *fields, double seconds, char *err,
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
    char *path = job_path(outdir, JOBDIR_STATS_JSON);
    int rc = text ? ds_write_file(path, text, strlen(text), err, errlen)
                  : ds_err(err, errlen, "cannot write %s: out of memory encoding it", path);
    free(text);
    free(path);
    return rc;
}
