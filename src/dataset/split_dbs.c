/* The two .db files of one split of a generic dataset (docs/formats.md): the features
 * (train.db ...) and, record for record, their labels (train_labels.db ...). Both are
 * written through cd_db_writer, so each exists only when complete. */
#include "internal.h"

#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

static int open_one(cd_db_writer_t **w, const char *outdir, jobdir_file f, const ds_db_shape *s,
                    char *err, size_t errlen)
{
    char path[4096];
    if (ds_job_file_path(outdir, f, path, sizeof path, err, errlen) != CD_OK)
        return CD_ERR;
    *w = cd_db_writer_open(path, s->c, s->h, s->w, s->encoding, s->num_classes, err, errlen);
    if (*w && s->mixed && cd_db_writer_set_mixed(*w, err, errlen) != CD_OK) {
        cd_db_writer_abort(*w);
        *w = NULL;
    }
    return *w ? CD_OK : CD_ERR;
}

int ds_split_dbs_open(ds_split_dbs *d, const char *outdir, int split, const ds_db_shape *features,
                      const ds_db_shape *labels, FILE *out, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->split = split;
    d->out = out;
    ds_progress_init(&d->progress, out, split);
    if (open_one(&d->features, outdir, JOBDIR_TRAIN_DB + split, features, err, errlen) != CD_OK)
        return CD_ERR;
    if (open_one(&d->labels, outdir, JOBDIR_TRAIN_LABELS_DB + split, labels, err, errlen) != CD_OK) {
        ds_split_dbs_abort(d);
        return CD_ERR;
    }
    d->sized_labels = labels->mixed;
    d->h = features->h;
    d->w = features->w;
    d->t0 = cd_now();
    return CD_OK;
}

int ds_split_dbs_add(ds_split_dbs *d, const void *feature, size_t feature_len, const void *label,
                     size_t label_len, char *err, size_t errlen)
{
    return ds_split_dbs_add_sized(d, feature, feature_len, label, label_len, d->h, d->w, err, errlen);
}

int ds_split_dbs_add_sized(ds_split_dbs *d, const void *feature, size_t feature_len, const void *label,
                           size_t label_len, int height, int width, char *err, size_t errlen)
{
    if (cd_db_writer_add_sized(d->features, feature, feature_len, 0, height, width, err, errlen) != CD_OK ||
        (d->sized_labels ? cd_db_writer_add_sized(d->labels, label, label_len, 0, height, width, err, errlen)
                    : cd_db_writer_add(d->labels, label, label_len, 0, err, errlen)) != CD_OK)
        return CD_ERR;
    d->written++;
    return CD_OK;
}

void ds_progress_init(ds_progress *p, FILE *out, int split)
{
    *p = (ds_progress){.out = out, .split = split, .last_pct = -1};
}

void ds_progress_step(ds_progress *p, size_t done, size_t total)
{
    int pct = (int)(done * 100 / (total ? total : 1));
    double now = cd_now();
    if (done == total || pct != p->last_pct || now - p->last_emit > 2.0) {
        ds_emit_progress(p->out, "create", cd_split_name(p->split), done, total);
        p->last_pct = pct;
        p->last_emit = now;
    }
}

void ds_split_dbs_progress(ds_split_dbs *d, size_t done, size_t total)
{
    ds_progress_step(&d->progress, done, total);
}

int ds_split_dbs_finish(ds_split_dbs *d, char *err, size_t errlen)
{
    int rc = cd_db_writer_finish(d->features, err, errlen);
    d->features = NULL;
    if (rc == CD_OK)
        rc = cd_db_writer_finish(d->labels, err, errlen);
    else
        cd_db_writer_abort(d->labels);
    d->labels = NULL;
    if (rc == CD_OK) {
        double dt = cd_now() - d->t0;
        ds_emit_log(d->out, "info", "%s and %s: %zu records in %.2f s (%.0f records/s)",
                    jobdir_name(JOBDIR_TRAIN_DB + d->split), jobdir_name(JOBDIR_TRAIN_LABELS_DB + d->split),
                    d->written, dt, dt > 0 ? d->written / dt : 0.0);
    }
    return rc;
}

void ds_split_dbs_abort(ds_split_dbs *d)
{
    if (!d)
        return;
    cd_db_writer_abort(d->features);
    cd_db_writer_abort(d->labels);
    d->features = d->labels = NULL;
}

int ds_split_dbs_end(ds_split_dbs *d, int rc, char *err, size_t errlen)
{
    if (rc == CD_OK && d->written)
        return ds_split_dbs_finish(d, err, errlen);
    ds_split_dbs_abort(d);
    return rc;
}

void ds_put_f32(uint8_t *out, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        ds_put_u32(out + 4 * i, bits);
    }
}

const jobdir_file ds_generic_outputs[] = {
    JOBDIR_STATS_JSON,      JOBDIR_TRAIN_DB,      JOBDIR_VAL_DB,         JOBDIR_TEST_DB,
    JOBDIR_TRAIN_LABELS_DB, JOBDIR_VAL_LABELS_DB, JOBDIR_TEST_LABELS_DB, JOBDIR_LABELS,
    JOBDIR_PALETTE,         JOBDIR_MEAN_BIN,      JOBDIR_MEAN_PNG,       JOBDIR_MEAN_JPG,
};
const size_t ds_generic_outputs_count = CD_ARRAY_LEN(ds_generic_outputs);
