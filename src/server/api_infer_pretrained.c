/* Pretrained models: POST /pretrained_models/upload_archive makes a model job (Done,
 * without a dataset) from an archive such as /models/<id>/download gives, and POST
 * /pretrained_models/new from DIGITS's form of separate files (or an ONNX model as the
 * weights, without a network: the worker's import-onnx makes the network and weights and
 * they are kept in the job folder), so it can classify and be the start of new models;
 * GET /pretrained_models/json lists them;
 * and model creation accepts DIGITS's method=pretrained with pretrained_networks (a
 * previous network whose weights are the pretrained model's snapshot). */
#define _GNU_SOURCE
#include "api_infer.h"
#include "security.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "archive.h"
#include "cdigits/jobdir.h"
#include "cdigits/model_server.h"
#include "cdigits/util.h"

#define MAX_FILES 32
#define RUN_CHECK 120.0

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int has(char names[][ARCHIVE_NAME_MAX], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/* The file info.json names under key when the archive has it, else the first of the
 * fallbacks it has; NULL when none. */
static const char *pick(json_t *info, const char *key, char names[][ARCHIVE_NAME_MAX], int n,
                        const char *const *fallbacks)
{
    const char *v = json_string_value(json_object_get(info, key));
    if (v && has(names, n, v))
        return v;
    for (; fallbacks && *fallbacks; fallbacks++)
        if (has(names, n, *fallbacks))
            return *fallbacks;
    return NULL;
}

/* Makes dir/want the file dir/have (a hard link: both names stay). */
static int same_file(const char *dir, const char *have, const char *want, char *err, size_t errlen)
{
    if (!strcmp(have, want))
        return CD_OK;
    char a[PATH_MAX + 200], b[PATH_MAX + 200];
    snprintf(a, sizeof a, "%s/%s", dir, have);
    snprintf(b, sizeof b, "%s/%s", dir, want);
    unlink(b);
    if (link(a, b) != 0) {
        snprintf(err, errlen, "cannot name %s %s: %s", have, want, strerror(errno));
        return CD_ERR;
    }
    return CD_OK;
}

/* An integer of a field or an info.json key (a number or a numeric string); def. */
static long num(json_t *info, const char *key, const fields_t *f, const char *field, long def)
{
    const char *v = field ? fields_get(f, field) : NULL;
    if (v && *v)
        return atol(v);
    json_t *x = json_object_get(info, key);
    if (json_is_number(x))
        return (long)json_number_value(x);
    if (json_is_string(x))
        return atol(json_string_value(x));
    return def;
}

/* The iteration a weights file's name gives (snapshot_iter_N.cdw, as the trainer names
 * them), by the job folder's own rule; 1 for any other name. */
static long snapshot_iteration(const char *dir, const char *weights)
{
    jobdir_snapshot snaps[MAX_FILES];
    int n = jobdir_snapshots(dir, JOBDIR_ITER_ONLY, snaps, MAX_FILES);
    for (int i = 0; i < n; i++)
        if (!strcmp(snaps[i].file, weights))
            return (long)snaps[i].number;
    return 1;
}

/* Everything a model job needs, from the unpacked files: dataset.json, train.json,
 * network.prototxt, snapshot_iter_N.cdw, labels.txt, info.json. CD_ERR with a message
 * for the user. */
static int make_model_files(req_t *r, const char *dir, char names[][ARCHIVE_NAME_MAX], int n, json_t *info,
                            long *iteration, double *epoch, json_t **train_out, char *err, size_t errlen)
{
    static const char *const cdw[] = {NULL};
    const char *weights = pick(info, "snapshot file", names, n, cdw);
    for (int i = 0; i < n && !weights; i++) {
        if (jobdir_is_weights(names[i])) {
            if (weights) {
                snprintf(err, errlen, "the archive has several .cdw weights files; name one as \"snapshot file\" in %s",
                         jobdir_name(JOBDIR_INFO_JSON));
                return CD_ERR;
            }
            weights = names[i];
        }
    }
    /* else Caffe's weights (the first .caffemodel), which the worker reads by their bytes */
    for (int i = 0; i < n && !weights; i++) {
        size_t l = strlen(names[i]), e = strlen(".caffemodel");
        if (l > e && !strcmp(names[i] + l - e, ".caffemodel"))
            weights = names[i];
    }
    if (!weights) {
        snprintf(err, errlen, "the archive has no weights (a .cdw file, or Caffe's .caffemodel)");
        return CD_ERR;
    }
    /* the download's network files (infer.h: cd_model_export), a job folder's, DIGITS's */
    const char *const nets[] = {jobdir_name(JOBDIR_ORIGINAL), jobdir_name(JOBDIR_NETWORK),
                                jobdir_name(JOBDIR_TRAIN_VAL), jobdir_name(JOBDIR_DEPLOY), NULL};
    const char *network = pick(info, "network file", names, n, NULL);
    if (!network)
        network = pick(info, "model file", names, n, nets);
    const char *const lab[] = {jobdir_name(JOBDIR_LABELS), NULL};
    const char *labels = pick(info, "labels file", names, n, lab);
    if (!network || !labels) {
        snprintf(err, errlen, "the archive has no %s; it needs a network (original.prototxt or deploy.prototxt), "
                              "%s and the weights", network ? lab[0] : "network .prototxt file", lab[0]);
        return CD_ERR;
    }
    const char *const means[] = {jobdir_name(JOBDIR_MEAN_BIN), NULL};
    const char *mean = pick(info, "mean file", names, n, means);
    if (mean && strcmp(mean, means[0]) != 0 && strstr(mean, ".binaryproto")) {
        snprintf(err, errlen, "%s is Caffe's mean format, which cdigits does not read; include %s", mean, means[0]);
        return CD_ERR;
    }
    /* the image shape: info.json's [height, width, channels] or the form's fields */
    json_t *dims = json_object_get(info, "image dimensions");
    long h = num(NULL, NULL, r->fields, "image_height", json_is_array(dims) ? (long)json_number_value(json_array_get(dims, 0)) : 0);
    long w = num(NULL, NULL, r->fields, "image_width", json_is_array(dims) ? (long)json_number_value(json_array_get(dims, 1)) : 0);
    long c = json_is_array(dims) ? (long)json_number_value(json_array_get(dims, 2)) : 0;
    const char *type = fields_get(r->fields, "image_type");
    if (type && *type)
        c = !strcmp(type, "gray") || !strcmp(type, "grayscale") || !strcmp(type, "1") ? 1 : 3;
    if (h < 1 || w < 1 || h > 4096 || w > 4096 || (c != 1 && c != 3)) {
        snprintf(err, errlen, "the image size is unknown or wrong (%ldx%ldx%ld): give \"image dimensions\" "
                              "[height, width, channels] in info.json, or image_width, image_height and image_type",
                 h, w, c);
        return CD_ERR;
    }
    const char *mode = fields_get(r->fields, "resize_mode");
    if (!mode || !*mode)
        mode = json_object_get(info, "image resize mode") ? sval(info, "image resize mode") : "squash";
    if (strcmp(mode, "squash") && strcmp(mode, "crop") && strcmp(mode, "fill") && strcmp(mode, "half_crop")) {
        snprintf(err, errlen, "resize mode \"%s\" is not one of squash, crop, fill, half_crop", mode);
        return CD_ERR;
    }
    const char *use_mean = json_object_get(info, "use mean") ? sval(info, "use mean") : mean ? "image" : "none";
    if (strcmp(use_mean, "none") && !mean) {
        snprintf(err, errlen, "the model subtracts the mean (use mean: %s) but the archive has no %s", use_mean,
                 means[0]);
        return CD_ERR;
    }
    long it = num(info, "snapshot iteration", NULL, NULL, 0);
    if (it <= 0)
        it = snapshot_iteration(dir, weights);
    json_t *ep = json_object_get(info, "snapshot epoch");
    *epoch = json_is_number(ep) && json_number_value(ep) > 0 ? json_number_value(ep) : (double)it;
    *iteration = it;
    char wname[64];
    jobdir_snapshot_name(it, JOBDIR_WEIGHTS, wname, sizeof wname);
    if (same_file(dir, weights, wname, err, errlen) != CD_OK ||
        same_file(dir, network, jobdir_name(JOBDIR_NETWORK), err, errlen) != CD_OK ||
        same_file(dir, labels, lab[0], err, errlen) != CD_OK ||
        (mean && same_file(dir, mean, means[0], err, errlen) != CD_OK))
        return CD_ERR;
    cd_err_t e;
    json_t *ds = json_pack("{s:i, s:i, s:i, s:s}", "channels", (int)c, "width", (int)w, "height", (int)h,
                           "resize_mode", mode);
    json_t *train = json_pack("{s:s, s:s, s:s, s:i}", "dataset_dir", dir, "network", jobdir_name(JOBDIR_NETWORK),
                              "use_mean", use_mean, "epochs", 1);
    long crop = num(info, "crop size", NULL, NULL, 0);
    if (crop > 0)
        json_object_set_new(train, "crop_size", json_integer(crop));
    /* info.json says which snapshot this is (classify reads its epoch from there) */
    json_object_set_new(info, "snapshot file", json_string(wname));
    json_object_set_new(info, "snapshot iteration", json_integer(it));
    json_object_set_new(info, "snapshot epoch", json_real(*epoch));
    json_object_set_new(info, "image dimensions", json_pack("[i, i, i]", (int)h, (int)w, (int)c));
    json_object_set_new(info, "image resize mode", json_string(mode));
    int rc = api_write_json(dir, jobdir_name(JOBDIR_DATASET_JSON), ds, &e) == CD_OK &&
                     api_write_json(dir, jobdir_name(JOBDIR_TRAIN_JSON), train, &e) == CD_OK &&
                     api_write_json(dir, jobdir_name(JOBDIR_INFO_JSON), info, &e) == CD_OK
                 ? CD_OK
                 : CD_ERR;
    if (rc != CD_OK)
        snprintf(err, errlen, "%s", e.msg);
    json_decref(ds);
    *train_out = train;
    if (rc != CD_OK) {
        json_decref(train);
        *train_out = NULL;
    }
    return rc;
}

/* Makes the model job id in dir from its files (names) and info: the model's files,
 * a check that it loads (its worker says, and stays warm for the first classify), and
 * the job's rows (Done, one snapshot). network is the config's "network" (stolen),
 * source what the status message names. CD_OK with *created, the reply's body; CD_ERR
 * after a reply, the job's rows gone (the caller removes dir). */
static int pretrained_make(req_t *r, const char *id, const char *dir, char names[][ARCHIVE_NAME_MAX], int n,
                           json_t *info, json_t *network, const char *source, json_t **created)
{
    server_t *srv = r->srv;
    char err[1024];
    int stored = 0, rc = CD_ERR;
    json_t *train = NULL, *ans = NULL, *req = NULL, *conf = NULL, *form = NULL;
    cd_err_t e;
    long iteration;
    double epoch;
    *created = NULL;
    if (make_model_files(r, dir, names, n, info, &iteration, &epoch, &train, err, sizeof err) != CD_OK) {
        reply_error(r, 400, "%s", err);
        goto out;
    }
    req = json_pack("{s:s}", "op", "info");
    cd_err_t ce = {0};
    int call = model_server_call(model_server_get(srv->sched), id, dir, iteration, req, 300, RUN_CHECK, &ans, &ce);
    if (call != CD_OK || !json_is_true(json_object_get(ans, "ok"))) {
        reply_error(r, call == CD_OK || ce.kind == CD_E_INVALID ? 400 : err_http_status(ce.kind),
                    "the model does not load: %s", call == CD_OK ? sval(ans, "error") : ce.msg);
        goto out;
    }
    const char *jn = fields_get(r->fields, "job_name");
    const char *name = jn && *jn ? jn : json_object_get(info, "name") && sval(info, "name")[0] ? sval(info, "name")
                                                                                            : "pretrained model";
    form = fields_to_json(r->fields);
    json_object_del(form, "archive");
    conf = json_pack("{s:O, s:O, s:{s:O, s:s, s:I, s:f, s:O, s:O}}", "network", network, "train", train,
                     "pretrained", "labels", json_object_get(ans, "labels"), "framework", "cdigits",
                     "snapshot_iteration", (json_int_t)iteration, "snapshot_epoch", epoch, "image_dimensions",
                     json_object_get(info, "image dimensions"), "resize_mode",
                     json_object_get(info, "image resize mode"));
    const char *group = fields_get(r->fields, "group_name");
    store_job_new_t job = {.id = id, .type = "model", .name = name, .group = group ? group : "",
                           .username = r->username[0] ? r->username : NULL, .dir = dir, .form = form, .config = conf};
    if (store_job_insert(srv->store, &job, &e) != CD_OK) {
        reply_err(r, &e);
        goto out;
    }
    stored = 1;
    char msg[512];
    snprintf(msg, sizeof msg, "Imported from %s", source);
    char wname[64];
    jobdir_snapshot_name(iteration, JOBDIR_WEIGHTS, wname, sizeof wname);
    if (store_snapshot_add(srv->store, id, epoch, iteration, wname, &e) != CD_OK ||
        store_job_set_progress(srv->store, id, 1.0, &e) != CD_OK ||
        store_job_set_state(srv->store, id, CD_ST_DONE, msg, &e) != CD_OK) {
        reply_err(r, &e);
        goto out;
    }
    json_decref(api_job_announce(srv, id));
    *created = json_pack("{s:s, s:s, s:s, s:s, s:I, s:f}", "status", "success", "id", id, "job_id", id, "name", name,
                         "snapshot_iteration", (json_int_t)iteration, "snapshot_epoch", epoch);
    rc = CD_OK;
out:
    if (rc != CD_OK) {
        if (stored)
            store_job_delete(srv->store, id, NULL);
        model_server_forget(model_server_get(srv->sched), id);
    }
    json_decref(network);
    json_decref(train);
    json_decref(ans);
    json_decref(req);
    json_decref(conf);
    json_decref(form);
    return rc;
}

void h_pretrained_upload(req_t *r)
{
    server_t *srv = r->srv;
    const field_t *f = fields_find(r->fields, "archive");
    if (!f || !f->len) {
        reply_field_error(r, "archive", "Archive is required: upload a .tar, .tar.gz, .tar.bz2 or .zip of a model");
        return;
    }
    char id[64], dir[PATH_MAX], err[1024];
    char names[MAX_FILES][ARCHIVE_NAME_MAX];
    int n = 0;
    json_t *info = NULL, *created = NULL;
    cd_err_t e;
    if (api_new_job_dir(srv, id, sizeof id, dir, sizeof dir, &e) != CD_OK) {
        reply_err(r, &e);
        return;
    }
    uint64_t total = (uint64_t)f->len * 16 + (16u << 20);
    archive_limits lim = {.max_entries = MAX_FILES, .max_file = total, .max_total = total};
    if (archive_extract(f->value, f->len, dir, &lim, names, MAX_FILES, &n, err, sizeof err) != CD_OK) {
        reply_error(r, 400, "%s", err);
        goto fail;
    }
    const char *info_name = jobdir_name(JOBDIR_INFO_JSON);
    if (has(names, n, info_name)) {
        char path[PATH_MAX + 32];
        json_error_t jerr = {.text = "the path is too long"};
        info = jobdir_path(dir, JOBDIR_INFO_JSON, path, sizeof path) == CD_OK ? json_load_file(path, 0, &jerr) : NULL;
        if (!json_is_object(info)) {
            reply_error(r, 400, "%s in the archive is not a JSON object: %s", info_name, jerr.text);
            goto fail;
        }
        const char *fw = json_string_value(json_object_get(info, "framework"));
        if (fw && strcmp(fw, "cdigits") != 0) {
            reply_error(r, 400, "the archive is a %s model; cdigits reads the models it exports (framework cdigits)", fw);
            goto fail;
        }
    } else {
        info = json_object();
    }
    const char *source = f->filename ? f->filename : "an archive";
    if (pretrained_make(r, id, dir, names, n, info,
                        json_pack("{s:s, s:s}", "method", "pretrained", "archive", f->filename ? f->filename : ""),
                        source, &created) != CD_OK)
        goto fail;
    /* DIGITS answers this route with JSON whatever the request asks */
    infer_reply_json(r, 200, created);
    goto out;
fail:
    sched_remove_dir(dir, id);
out:
    json_decref(info);
}

/* ---- DIGITS's manual upload: POST /pretrained_models/new ------------------------------- */

/* One upload of the manual form, as DIGITS checks it: present (unless optional), with
 * the extension the format needs; saved as dir/save_as. 0: absent and optional, 1:
 * saved, -1 after a reply. */
static int save_manual_file(req_t *r, const char *dir, const char *field, const char *what, const char *ext,
                            const char *save_as, int optional)
{
    const field_t *f = fields_find(r->fields, field);
    if (!f || (!f->len && (!f->filename || !*f->filename))) {
        if (optional)
            return 0;
        char msg[256];
        snprintf(msg, sizeof msg, "Missing %s: upload it as %s", what, field);
        reply_field_error(r, field, msg);
        return -1;
    }
    size_t fl = f->filename ? strlen(f->filename) : 0, el = ext ? strlen(ext) : 0;
    if (ext && (fl < el || strcmp(f->filename + fl - el, ext) != 0)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s must be a %s file; %s is not", what, ext, f->filename ? f->filename : "the upload");
        reply_field_error(r, field, msg);
        return -1;
    }
    if (!f->len) {
        char msg[256];
        snprintf(msg, sizeof msg, "The %s (%s) is empty", what, field);
        reply_field_error(r, field, msg);
        return -1;
    }
    char path[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s", dir, save_as);
    if (cd_write_file_atomic(path, f->value, f->len) != CD_OK) {
        reply_error(r, 500, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 1;
}

/* The weights of the manual form, told by their bytes (jobdir_weights_kind_of), not
 * their name: cdigits weights or Caffe's (a .caffemodel) whatever the upload is called.
 * Whether they fit the network is the worker's check when the model loads
 * (pretrained_make): a mismatch names the layer and both shapes. 0 when they are
 * weights cdigits reads (or absent: the save says so), -1 after a reply. */
static int check_weights_upload(req_t *r, const char *field)
{
    const field_t *f = fields_find(r->fields, field);
    if (!f || !f->len)
        return 0;
    jobdir_weights_kind kind = jobdir_weights_kind_of(f->value, f->len);
    if (kind == JOBDIR_WEIGHTS_CDW || kind == JOBDIR_WEIGHTS_CAFFE)
        return 0;
    char msg[768];
    snprintf(msg, sizeof msg,
             "%s is not a weights file cdigits reads: cdigits weights begin with \"%s\" (docs/formats.md) and Caffe's "
             ".caffemodel is a NetParameter in protobuf; upload the snapshot_iter_N.cdw of a model cdigits trained or "
             "a .caffemodel Caffe wrote",
             f->filename && *f->filename ? f->filename : "the upload", JOBDIR_WEIGHTS_MAGIC);
    reply_field_error(r, field, msg);
    return -1;
}

#define IMPORT_ONNX_SECONDS 120.0 /* a large model's weights are a few hundred MB to convert */
#define IMPORT_ONNX_WAIT_SECONDS 5.0

/* Whether the weights upload is an ONNX model: named .onnx, or a protobuf that is neither
 * cdigits's nor Caffe's weights sent without a network (a ModelProto begins with its
 * ir_version, field 1: byte 0x08). */
static int is_onnx_upload(const fields_t *fields)
{
    const field_t *f = fields_find(fields, "weights_file"), *def = fields_find(fields, "model_def_file");
    if (!f || !f->len)
        return 0;
    size_t n = f->filename ? strlen(f->filename) : 0;
    if (n > 5 && !strcasecmp(f->filename + n - 5, ".onnx"))
        return 1;
    return (!def || !def->len) && jobdir_weights_kind_of(f->value, f->len) == JOBDIR_WEIGHTS_UNKNOWN &&
           ((const unsigned char *)f->value)[0] == 0x08;
}

/* The ONNX model of the manual form into dir by the worker's import-onnx: dir/model.onnx
 * as uploaded, and what the import writes (deploy.prototxt, network.prototxt when the
 * model is a classifier of one image, weights.cdw). *network gets the network file the
 * model job uses. 0 done, -1 after a reply: 400 naming what the import refused (the node
 * and its operator), 503 when no inference slot is free. */
static int import_onnx_upload(req_t *r, const char *dir, const char **network)
{
    static const char model[] = "model.onnx";
    const field_t *f = fields_find(r->fields, "weights_file"), *def = fields_find(r->fields, "model_def_file");
    if (def && def->len) {
        reply_field_error(r, "model_def_file", "An ONNX model carries its own network: leave the model definition "
                                               "out (the network is made from the .onnx file)");
        return -1;
    }
    char path[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s", dir, model);
    if (cd_write_file_atomic(path, f->value, f->len) != CD_OK) {
        reply_error(r, 500, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    char *argv[] = {r->srv->cfg.worker, "import-onnx", path, "--out", (char *)dir, NULL};
    char *out = NULL, *errout = NULL;
    int status = -1, rc = -1;
    cd_err_t ce;
    if (sched_run_check(r->srv->sched, argv, IMPORT_ONNX_WAIT_SECONDS, IMPORT_ONNX_SECONDS, &out, &errout, &status,
                        &ce) != CD_OK) {
        reply_error(r, ce.kind == CD_E_CONFLICT ? 503 : 500, "%s", ce.msg);
        goto done;
    }
    const char *shown = f->filename && *f->filename ? f->filename : "the ONNX upload";
    json_t *res = status == 0 && out ? json_loads(out, 0, NULL) : NULL;
    if (!json_is_object(res)) {
        char *why = errout ? api_replace_all(errout, path, shown, NULL) : NULL;
        size_t n = why ? strlen(why) : 0;
        while (n && (why[n - 1] == '\n' || why[n - 1] == ' '))
            why[--n] = 0;
        reply_field_error(r, "weights_file", why && *why ? why : "the ONNX model could not be imported (the worker "
                                                                 "printed nothing)");
        free(why);
        json_decref(res);
        goto done;
    }
    *network = json_is_string(json_object_get(res, "network")) ? jobdir_name(JOBDIR_NETWORK)
                                                               : jobdir_name(JOBDIR_DEPLOY);
    json_decref(res);
    rc = 0;
done:
    free(out);
    free(errout);
    return rc;
}

/* An image size field of the manual form: 1 .. 4096 pixels; -1 after a reply. */
static long size_field(req_t *r, const char *field)
{
    const char *v = fields_get(r->fields, field);
    char *end = NULL;
    long x = v && *v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < 1 || x > 4096) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s \"%s\" must be a whole number of pixels from 1 to 4096", field, v ? v : "");
        reply_field_error(r, field, msg);
        return -1;
    }
    return x;
}

void h_pretrained_new(req_t *r)
{
    server_t *srv = r->srv;
    const char *jn = fields_get(r->fields, "job_name");
    if (!jn || !*jn) {
        reply_field_error(r, "job_name", "Missing job name: give the pretrained model a name (job_name)");
        return;
    }
    const char *fw = fields_get(r->fields, "framework");
    if (fw && *fw && strcmp(fw, "caffe") != 0 && strcmp(fw, "cdigits") != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "framework \"%s\": cdigits runs its own models (framework cdigits or caffe)", fw);
        reply_field_error(r, "framework", msg);
        return;
    }
    long w = size_field(r, "width");
    long h = w < 0 ? -1 : size_field(r, "height");
    if (w < 0 || h < 0)
        return;
    const char *type = fields_get(r->fields, "image_type");
    int c = type && (!strcmp(type, "1") || !strcmp(type, "gray") || !strcmp(type, "grayscale")) ? 1 : 3;
    char id[64], dir[PATH_MAX];
    cd_err_t e;
    if (api_new_job_dir(srv, id, sizeof id, dir, sizeof dir, &e) != CD_OK) {
        reply_err(r, &e);
        return;
    }
    const char *weights = "upload_weights.cdw", *network = "upload_network.prototxt";
    const char *labels = jobdir_name(JOBDIR_LABELS), *mean = jobdir_name(JOBDIR_MEAN_BIN);
    json_t *info = NULL, *created = NULL;
    int has_mean = 0, onnx = is_onnx_upload(r->fields);
    if (onnx) {
        weights = "weights.cdw";
        if (import_onnx_upload(r, dir, &network) < 0)
            goto fail;
    } else if (check_weights_upload(r, "weights_file") < 0 ||
               save_manual_file(r, dir, "weights_file", "Weights", NULL, weights, 0) < 0 ||
               save_manual_file(r, dir, "model_def_file", "Model definition", ".prototxt", network, 0) < 0) {
        goto fail;
    }
    if (save_manual_file(r, dir, "labels_file", "Labels file", NULL, labels, 0) < 0 ||
        (has_mean = save_manual_file(r, dir, "mean_file", "Mean file", NULL, mean, 1)) < 0)
        goto fail;
    char names[4][ARCHIVE_NAME_MAX];
    int n = 0;
    snprintf(names[n++], ARCHIVE_NAME_MAX, "%s", weights);
    snprintf(names[n++], ARCHIVE_NAME_MAX, "%s", network);
    snprintf(names[n++], ARCHIVE_NAME_MAX, "%s", labels);
    if (has_mean)
        snprintf(names[n++], ARCHIVE_NAME_MAX, "%s", mean);
    const char *mode = fields_get(r->fields, "resize_mode");
    info = json_pack("{s:s, s:s, s:s, s:[i, i, i], s:s, s:s}", "name", jn, "snapshot file", weights, "network file",
                     network, "image dimensions", (int)h, (int)w, c, "image resize mode", mode && *mode ? mode : "squash",
                     "use mean", has_mean ? "image" : "none");
    if (pretrained_make(r, id, dir, names, n, info,
                        json_pack("{s:s, s:s}", "method", "pretrained", "upload", onnx ? "onnx" : "files"),
                        onnx ? "an ONNX model" : "uploaded files", &created) != CD_OK)
        goto fail;
    api_reply_created(r, created);
    json_decref(info);
    return;
fail:
    sched_remove_dir(dir, id);
    json_decref(info);
}

/* A pretrained model is a model job without a dataset. */
void h_pretrained_list(req_t *r)
{
    json_t *jobs = store_job_list(r->srv->store, "model"), *out = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        if (!view_job_is_pretrained(j) || !security_may_read(r, j))
            continue;
        json_t *full = store_job_get(r->srv->store, sval(j, "id"));
        json_t *pre = json_object_get(json_object_get(full, "config"), "pretrained");
        json_array_append_new(
            out, json_pack("{s:O, s:O, s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:I}", "id", json_object_get(j, "id"),
                           "name", json_object_get(j, "name"), "framework", "cdigits", "status",
                           cd_state_name((int)json_integer_value(json_object_get(j, "state"))), "username",
                           json_object_get(j, "username"), "submitted", json_object_get(j, "created"),
                           "snapshot_epoch", json_object_get(pre, "snapshot_epoch") ? json_object_get(pre, "snapshot_epoch") : json_null(),
                           "snapshot_iteration", json_object_get(pre, "snapshot_iteration") ? json_object_get(pre, "snapshot_iteration") : json_null(),
                           "image_dimensions", json_object_get(pre, "image_dimensions") ? json_object_get(pre, "image_dimensions") : json_null(),
                           "resize_mode", json_object_get(pre, "resize_mode") ? json_object_get(pre, "resize_mode") : json_null(),
                           "num_classes", (json_int_t)json_array_size(json_object_get(pre, "labels"))));
        json_decref(full);
    }
    json_decref(jobs);
    infer_reply_json(r, 200, json_pack("{s:o}", "pretrained_models", out));
}

/* Model creation: DIGITS's method=pretrained becomes a previous network (the
 * pretrained job's) starting from its snapshot; every other method goes as it came. */
static void model_create_method(req_t *r, const fields_t *in)
{
    const char *method = fields_get(in, "method");
    if (!method || strcmp(method, "pretrained") != 0) {
        api_model_create_fields(r, in);
        return;
    }
    const char *pid = fields_get(in, "pretrained_networks");
    json_t *job = pid && *pid ? store_job_get(r->srv->store, pid) : NULL;
    if (!job || !view_job_is_pretrained(job)) {
        json_t *errors = json_object();
        if (!pid || !*pid)
            form_add_error(errors, "pretrained_networks", "Pretrained network is required with method pretrained");
        else
            form_add_error(errors, "pretrained_networks",
                           "Pretrained model \"%s\" does not exist; see GET /pretrained_models/json", pid);
        reply_form_errors(r, errors);
        json_decref(job);
        return;
    }
    json_t *snaps = store_snapshot_list(r->srv->store, pid);
    json_t *last = json_array_get(snaps, json_array_size(snaps) ? json_array_size(snaps) - 1 : 0);
    char key[600], epoch[64];
    snprintf(key, sizeof key, "%s-snapshot", pid);
    snprintf(epoch, sizeof epoch, "%.17g", last ? json_number_value(json_object_get(last, "epoch")) : 0.0);
    fields_t *f = fields_new();
    int ok = f != NULL;
    for (size_t i = 0; ok && i < in->n; i++) {
        const field_t *x = &in->v[i];
        if (!strcmp(x->name, "method") || !strcmp(x->name, "previous_networks") || !strcmp(x->name, key))
            continue;
        ok = fields_add(f, x->name, x->value, x->len, x->filename) == CD_OK;
    }
    ok = ok && fields_add(f, "method", "previous", 8, NULL) == CD_OK &&
         fields_add(f, "previous_networks", pid, strlen(pid), NULL) == CD_OK &&
         fields_add(f, key, epoch, strlen(epoch), NULL) == CD_OK;
    if (ok)
        api_model_create_fields(r, f);
    else
        reply_error(r, 500, "out of memory");
    fields_free(f);
    json_decref(snaps);
    json_decref(job);
}

/* The model form, with DIGITS's clone=<id>: that model's fields over the posted ones. */
void h_model_create_any(req_t *r)
{
    fields_t *cloned;
    if (api_clone_fields(r, r->fields, "model", &cloned) != CD_OK)
        return;
    model_create_method(r, cloned ? cloned : r->fields);
    fields_free(cloned);
}
