/* The JSON shapes DIGITS 6.1 answers with, built from store rows:
 *   brief   - Job.json_dict():               {id, name, status} (+ dataset_id for models)
 *   table   - views.json_dict(job, fields):   the home tables of /completed_jobs/json
 *   detail  - Job.json_dict(verbose=True):    /datasets/<id>/json and /models/<id>/json
 * Fields DIGITS does not have are added, never renamed. */
#include "internal.h"

#include "api_generic.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cdigits/jobdir.h"
#include "cdigits/util.h"

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static int job_state(json_t *job) { return (int)json_integer_value(json_object_get(job, "state")); }

static int is_model(json_t *job) { return strcmp(jstr(job, "type"), "model") == 0; }

const char *view_job_type(json_t *job)
{
    /* DIGITS's GenericImageModelJob and GenericDatasetJob */
    if (generic_job_extension(job))
        return is_model(job) ? "Generic Image Model" : "Generic Dataset";
    return is_model(job) ? "Image Classification Model" : "Image Classification Dataset";
}

json_t *view_job_brief(json_t *job)
{
    json_t *d = json_pack("{s:O, s:O, s:s}", "id", json_object_get(job, "id"), "name", json_object_get(job, "name"),
                          "status", cd_state_name(job_state(job)));
    if (is_model(job))
        json_object_set(d, "dataset_id", json_object_get(job, "dataset_id"));
    return d;
}

double view_job_elapsed(server_t *srv, json_t *job)
{
    (void)srv;
    json_t *started = json_object_get(job, "started"), *finished = json_object_get(job, "finished");
    if (!json_is_number(started))
        return 0;
    double end = json_is_number(finished) && !cd_state_is_running(job_state(job)) ? json_number_value(finished)
                                                                                    : cd_wall_time();
    double e = end - json_number_value(started);
    return e > 0 ? e : 0;
}

static int progress_percent(json_t *job)
{
    double p = json_number_value(json_object_get(job, "progress"));
    if (job_state(job) == CD_ST_DONE)
        p = 1;
    return (int)lround(100 * (p < 0 ? 0 : p > 1 ? 1 : p));
}

/* "loss (train) last" etc. from the metric summary */
static void add_outputs(server_t *srv, json_t *job, json_t *d, json_t *fields)
{
    json_t *summary = store_metric_summary(srv->store, jstr(job, "id"));
    size_t i;
    json_t *m;
    json_array_foreach(summary, i, m)
    {
        char key[160];
        static const char *const which[] = {"last", "min", "max"};
        for (int k = 0; k < 3; k++) {
            snprintf(key, sizeof key, "%s (%s) %s", jstr(m, "name"), jstr(m, "phase"), which[k]);
            json_object_set(d, key, json_object_get(m, which[k]));
            if (fields)
                json_object_set_new(fields, key, json_true());
        }
    }
    json_decref(summary);
}

int view_job_is_pretrained(json_t *job)
{
    const char *type = json_string_value(json_object_get(job, "type"));
    const char *dataset = json_string_value(json_object_get(job, "dataset_id"));
    return type && !strcmp(type, "model") && !(dataset && dataset[0]);
}

json_t *view_job_table(server_t *srv, json_t *job, json_t *fields)
{
    int st = job_state(job);
    json_t *d = json_pack("{s:O, s:O, s:O, s:s, s:s, s:O, s:f, s:i, s:s, s:O}", "id", json_object_get(job, "id"),
                          "name", json_object_get(job, "name"), "group", json_object_get(job, "group"), "status",
                          cd_state_name(st), "status_css", cd_state_css(st), "submitted",
                          json_object_get(job, "created"), "elapsed", view_job_elapsed(srv, job), "progress",
                          progress_percent(job), "type", is_model(job) ? "model" : "dataset", "username",
                          json_object_get(job, "username"));
    if (is_model(job)) {
        json_object_set_new(d, "framework", json_string("cdigits"));
        json_object_set(d, "dataset_id", json_object_get(job, "dataset_id"));
        add_outputs(srv, job, d, fields);
    } else {
        json_object_set_new(d, "backend", json_string("cddb"));
    }
    if (generic_job_extension(job)) /* the model form lists the datasets of its kind */
        json_object_set_new(d, "extension_id", json_string(generic_job_extension(job)));
    const char *why = jstr(job, "wait_reason");
    if (st == CD_ST_WAIT && why[0])
        json_object_set_new(d, "wait_reason", json_string(why));
    if (json_is_true(json_object_get(job, "interrupted")))
        json_object_set_new(d, "interrupted", json_true());
    return d;
}

/* [[status name, time, message], ...] */
static json_t *history_view(json_t *hist)
{
    json_t *out = json_array();
    size_t i;
    json_t *h;
    json_array_foreach(hist, i, h)
    {
        int st = cd_state_from_code(json_string_value(json_array_get(h, 0)));
        json_array_append_new(out, json_pack("[sOO]", cd_state_name(st), json_array_get(h, 1), json_array_get(h, 2)));
    }
    return out;
}

static json_t *tasks_view(server_t *srv, json_t *job)
{
    json_t *tasks = store_task_list(srv->store, jstr(job, "id")), *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t)
    {
        int st = (int)json_integer_value(json_object_get(t, "state"));
        double p = json_number_value(json_object_get(t, "progress"));
        json_t *v = json_pack("{s:O, s:O, s:s, s:i, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "id",
                              json_object_get(t, "id"), "name", json_object_get(t, "name"), "status",
                              cd_state_name(st), "progress", (int)lround(100 * p), "stage",
                              json_object_get(t, "stage"), "attempt", json_object_get(t, "attempt"), "pid",
                              json_object_get(t, "pid"), "gpus", json_object_get(t, "gpus"), "device",
                              json_object_get(t, "device"), "started", json_object_get(t, "started"), "finished",
                              json_object_get(t, "finished"), "exit_status", json_object_get(t, "exit_status"));
        json_object_set(v, "error", json_object_get(t, "error"));
        json_object_set(v, "runtime", json_object_get(t, "runtime"));
        json_object_set(v, "slurm_job_id", json_object_get(t, "slurm_job_id"));
        json_object_set(v, "nodes", json_object_get(t, "nodes"));
        json_t *hist = store_task_history(srv->store, json_integer_value(json_object_get(t, "id")));
        json_object_set_new(v, "status_history", history_view(hist));
        json_decref(hist);
        json_array_append_new(out, v);
    }
    json_decref(tasks);
    return out;
}

/* ParseFolderTasks and CreateDbTasks as DIGITS shapes them, from the dataset line. */
static void dataset_tasks(json_t *job, json_t *d)
{
    json_t *cfg = json_object_get(job, "config"), *res = json_object_get(job, "result");
    json_t *splits = json_object_get(res, "splits"), *classes = json_object_get(res, "classes");
    json_int_t train = json_integer_value(json_object_get(splits, "train"));
    json_int_t val = json_integer_value(json_object_get(splits, "val"));
    json_int_t test = json_integer_value(json_object_get(splits, "test"));
    json_t *pf = json_array(), *cd = json_array();
    if (strcmp(jstr(cfg, "method"), "folder") == 0 || !json_object_get(cfg, "method"))
        json_array_append_new(pf, json_pack("{s:s, s:o, s:o, s:o, s:o}", "name", "Parse Folder (train/val)",
                                            "label_count", res ? json_integer((json_int_t)json_array_size(classes)) : json_null(),
                                            "train_count", res ? json_integer(train) : json_null(), "val_count",
                                            res ? json_integer(val) : json_null(), "test_count",
                                            res ? json_integer(test) : json_null()));
    /* the worker's parses, one per folder (train, folder_val, folder_test), in DIGITS's shape */
    json_t *parsed = json_object_get(res, "parse_tasks"), *t;
    size_t k;
    if (json_is_array(parsed)) {
        json_array_clear(pf);
        json_array_foreach(parsed, k, t)
        {
            json_t *c = json_deep_copy(t);
            json_object_del(c, "folder");
            json_array_append_new(pf, c);
        }
    }
    json_t *dims = json_object_get(cfg, "image_dims"); /* [height, width, channels] */
    static const char *const names[] = {"train", "val", "test"};
    json_int_t counts[] = {train, val, test};
    int planned[] = {1, json_is_true(json_object_get(cfg, "has_val")), json_is_true(json_object_get(cfg, "has_test"))};
    for (int i = 0; i < 3; i++) {
        if (res ? counts[i] <= 0 : !planned[i])
            continue;
        char name[32];
        snprintf(name, sizeof name, "Create DB (%s)", names[i]);
        json_array_append_new(cd, json_pack("{s:s, s:o, s:O, s:O, s:O, s:s, s:O, s:s}", "name", name, "entries",
                                            res ? json_integer(counts[i]) : json_null(), "image_width",
                                            json_array_get(dims, 1), "image_height", json_array_get(dims, 0),
                                            "image_channels", json_array_get(dims, 2), "backend", "cddb",
                                            "encoding", json_object_get(cfg, "encoding"), "compression", "none"));
    }
    json_object_set_new(d, "ParseFolderTasks", pf);
    json_object_set_new(d, "CreateDbTasks", cd);
    json_object_set(d, "image_dims", dims);
    json_object_set(d, "resize_mode", json_object_get(cfg, "resize_mode"));
    json_object_set(d, "encoding", json_object_get(cfg, "encoding"));
    if (res) {
        json_t *labels = json_array();
        size_t i;
        json_t *c;
        json_array_foreach(classes, i, c) json_array_append(labels, json_object_get(c, "label"));
        json_object_set_new(d, "labels", labels);
        json_object_set(d, "classes", classes);
        json_object_set(d, "splits", splits);
        json_object_set(d, "skipped", json_object_get(res, "skipped"));
        json_object_set(d, "mean_file", json_object_get(res, "mean_file"));
        json_object_set(d, "labels_file", json_object_get(res, "labels_file"));
    }
}

/* Python's str(datetime) of a Unix time, as DIGITS writes "creation time":
 * "2024-05-01 12:30:05.123456" (local time). */
static json_t *digits_time(json_t *t)
{
    if (!json_is_number(t))
        return json_null();
    double x = json_number_value(t);
    time_t sec = (time_t)floor(x);
    struct tm tm;
    char buf[64], out[96];
    if (!localtime_r(&sec, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm))
        return json_null();
    long us = lround((x - floor(x)) * 1e6);
    snprintf(out, sizeof out, "%s.%06ld", buf, us > 999999 ? 999999 : us);
    return json_string(out);
}

/* The keys of DIGITS's ImageModelJob.json_dict and its train task's stats, for scripts
 * written for DIGITS (and info.json): the image shape and resize mode of the dataset (of
 * info.json for a pretrained model), the names of the model's files, and the newest
 * snapshot ("no snapshots" before the first). As in DIGITS, the labels and mean files
 * are the dataset's, the others the job folder's: "model file" is the network as given
 * (network.prototxt, DIGITS's original.prototxt) and "solver file" the solver.prototxt
 * the trainer writes there; the deploy and train_val files are a download's. */
static void digits_model_keys(server_t *srv, json_t *job, json_t *snaps, json_t *d)
{
    json_object_set(d, "job id", json_object_get(job, "id"));
    json_object_set_new(d, "creation time", digits_time(json_object_get(job, "created")));
    json_t *dims = NULL, *mode = NULL, *ds = NULL, *info = NULL;
    const char *dsid = jstr(job, "dataset_id");
    if (dsid[0] && (ds = store_job_get(srv->store, dsid))) {
        json_t *cfg = json_object_get(ds, "config");
        dims = json_object_get(cfg, "image_dims");
        mode = json_object_get(cfg, "resize_mode");
    } else {
        char path[PATH_MAX];
        if (jobdir_path(jstr(job, "dir"), JOBDIR_INFO_JSON, path, sizeof path) == CD_OK)
            info = json_load_file(path, 0, NULL);
        dims = json_object_get(info, "image dimensions");
        mode = json_object_get(info, "image resize mode");
    }
    json_object_set(d, "image dimensions", dims ? dims : json_null()); /* [height, width, channels] */
    json_object_set(d, "image resize mode", mode ? mode : json_null());
    static const struct {
        const char *key;
        int file;
    } files[] = {
        {"labels file", JOBDIR_LABELS},   {"mean file", JOBDIR_MEAN_BIN},   {"network file", JOBDIR_NETWORK},
        {"deploy file", JOBDIR_DEPLOY},   {"solver file", JOBDIR_SOLVER},   {"train_val file", JOBDIR_TRAIN_VAL},
        {"model file", JOBDIR_NETWORK},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(files); i++)
        json_object_set_new(d, files[i].key, json_string(jobdir_name(files[i].file)));
    json_t *last = json_array_get(snaps, json_array_size(snaps) - 1);
    json_object_set_new(d, "snapshot file", last ? json_string(jstr(last, "file")) : json_string("no snapshots"));
    json_object_set_new(d, "digits version", json_string(CDIGITS_VERSION));
    /* the engine that trained it stands where DIGITS names its Caffe */
    json_object_set_new(d, "caffe flavor", json_string("cdigits"));
    json_object_set_new(d, "caffe version", json_string(CDIGITS_VERSION));
    json_decref(ds);
    json_decref(info);
}

static void model_details(server_t *srv, json_t *job, json_t *d)
{
    const char *id = jstr(job, "id");
    json_t *snaps = store_snapshot_list(srv->store, id), *epochs = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(snaps, i, s)
    {
        /* DIGITS lists epochs as numbers: 2 for a whole epoch, 2.5 for a snapshot taken mid-epoch */
        double e = json_number_value(json_object_get(s, "epoch"));
        double r = round(e * 1000) / 1000;
        json_array_append_new(epochs, fabs(r - round(r)) < 1e-9 ? json_integer((json_int_t)round(r)) : json_real(r));
    }
    json_object_set_new(d, "snapshots", epochs);
    digits_model_keys(srv, job, snaps, d);
    json_object_set_new(d, "snapshot_files", snaps);
    json_object_set(d, "dataset_id", json_object_get(job, "dataset_id"));
    json_object_set_new(d, "framework", json_string("cdigits"));
    json_t *cfg = json_object_get(job, "config");
    json_object_set(d, "network", json_object_get(cfg, "network"));
    json_object_set(d, "train", json_object_get(cfg, "train"));
    json_object_set(d, "resources", json_object_get(cfg, "resources"));
    json_t *outputs = json_object();
    json_t *summary = store_metric_summary(srv->store, id);
    json_array_foreach(summary, i, s)
    {
        char key[160];
        snprintf(key, sizeof key, "%s (%s)", jstr(s, "name"), jstr(s, "phase"));
        json_object_set_new(outputs, key,
                            json_pack("{s:O, s:O, s:O, s:O}", "last", json_object_get(s, "last"), "min",
                                      json_object_get(s, "min"), "max", json_object_get(s, "max"), "count",
                                      json_object_get(s, "count")));
    }
    json_decref(summary);
    json_object_set_new(d, "outputs", outputs);
    add_outputs(srv, job, d, NULL);
    json_object_set_new(d, "metrics_count", json_integer(store_metric_count(srv->store, id, 0)));
    /* what the worker last said limits its speed, and the batch it settled on */
    json_t *tasks = json_object_get(d, "tasks");
    json_t *runtime = json_object_get(json_array_get(tasks, 0), "runtime");
    json_object_set(d, "advice", json_object_get(runtime, "advice") ? json_object_get(runtime, "advice") : json_null());
    json_object_set(d, "batch", json_object_get(runtime, "batch") ? json_object_get(runtime, "batch") : json_null());
}

json_t *view_job_detail(server_t *srv, json_t *job)
{
    int st = job_state(job);
    json_t *d = view_job_brief(job);
    json_object_set(d, "directory", json_object_get(job, "dir"));
    json_object_set_new(d, "job_type", json_string(view_job_type(job)));
    json_object_set_new(d, "type", json_string(is_model(job) ? "model" : "dataset"));
    json_object_set_new(d, "status_css", json_string(cd_state_css(st)));
    json_object_set_new(d, "running", json_boolean(cd_state_is_running(st)));
    json_object_set(d, "username", json_object_get(job, "username"));
    json_object_set(d, "group", json_object_get(job, "group"));
    json_object_set(d, "notes", json_object_get(job, "notes"));
    json_object_set(d, "submitted", json_object_get(job, "created"));
    json_object_set_new(d, "elapsed", json_real(view_job_elapsed(srv, job)));
    json_object_set_new(d, "progress", json_integer(progress_percent(job)));
    json_object_set(d, "error", json_object_get(job, "error"));
    json_object_set(d, "wait_reason", json_object_get(job, "wait_reason"));
    json_object_set(d, "interrupted", json_object_get(job, "interrupted"));
    json_t *hist = store_job_history(srv->store, jstr(job, "id"));
    json_object_set_new(d, "status_history", history_view(hist));
    json_decref(hist);
    json_object_set_new(d, "tasks", tasks_view(srv, job));
    /* where its task runs under --executor slurm (docs/cluster.md): null otherwise */
    json_t *task0 = json_array_get(json_object_get(d, "tasks"), 0);
    json_object_set(d, "slurm_job_id", task0 ? json_object_get(task0, "slurm_job_id") : json_null());
    json_object_set(d, "nodes", task0 ? json_object_get(task0, "nodes") : json_null());
    if (is_model(job))
        model_details(srv, job, d);
    else
        dataset_tasks(job, d);
    if (generic_job_extension(job)) /* a generic model or dataset: its kind, as the home rows say */
        json_object_set_new(d, "extension_id", json_string(generic_job_extension(job)));
    if (!is_model(job) && generic_job_extension(job))
        generic_dataset_detail(srv, job, d);
    return d;
}
