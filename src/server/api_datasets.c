/* Dataset routes. POST /datasets/images/classification/json: DIGITS's form fields,
 * validated by the table below, become dataset.json (docs/worker-protocol.md) in a new
 * job folder. The explorer pages through the records of a split's .db file and serves
 * each record as an image, through the dataset library's reader and PNG writer (the
 * server links that backend-free library, never the engine). */
#include "internal.h"

#include "api_datasets.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/dataset.h"
#include "cdigits/image.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

#define ALWAYS NULL
#define FOLDER "method=folder"
#define TEXTFILE "method=textfile"

static const form_field_t g_dataset_form[] = {
    {"dataset_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 1, "Dataset name"},
    {"group_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Group name"},
    {"method", F_CHOICE, "folder", NAN, NAN, "folder|textfile", ALWAYS, 1, "Dataset type (method)"},
    {"resize_channels", F_CHOICE, "3", NAN, NAN, "1|3", ALWAYS, 1, "Image type (resize_channels: 1 gray, 3 color)"},
    {"resize_width", F_INT, "256", 1, 4096, NULL, ALWAYS, 1, "Resize width"},
    {"resize_height", F_INT, "256", 1, 4096, NULL, ALWAYS, 1, "Resize height"},
    {"resize_mode", F_CHOICE, "squash", NAN, NAN, "squash|crop|fill|half_crop", ALWAYS, 1, "Resize transformation"},
    {"encoding", F_CHOICE, "png", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Image encoding"},
    {"backend", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "DB backend"},
    {"compression", F_CHOICE, "none", NAN, NAN, "none|gzip", ALWAYS, 0, "DB compression"},
    /* method folder */
    {"folder_train", F_DIR, NULL, NAN, NAN, NULL, FOLDER, 1, "Training images folder"},
    {"folder_pct_val", F_INT, "25", 0, 100, NULL, FOLDER, 1, "% for validation"},
    {"folder_pct_test", F_INT, "0", 0, 100, NULL, FOLDER, 1, "% for testing"},
    {"folder_train_min_per_class", F_INT, "2", 1, NAN, NULL, FOLDER, 0, "Minimum samples per class"},
    {"folder_train_max_per_class", F_INT, NULL, 1, NAN, NULL, FOLDER, 0, "Maximum samples per class"},
    {"has_val_folder", F_BOOL, "false", NAN, NAN, NULL, FOLDER, 0, "Separate validation images folder"},
    {"folder_val", F_DIR, NULL, NAN, NAN, NULL, FOLDER "&has_val_folder=1", 1, "Validation images folder"},
    {"folder_val_min_per_class", F_INT, "2", 1, NAN, NULL, FOLDER "&has_val_folder=1", 0,
     "Minimum samples per class (validation folder)"},
    {"folder_val_max_per_class", F_INT, NULL, 1, NAN, NULL, FOLDER "&has_val_folder=1", 0,
     "Maximum samples per class (validation folder)"},
    {"has_test_folder", F_BOOL, "false", NAN, NAN, NULL, FOLDER, 0, "Separate test images folder"},
    {"folder_test", F_DIR, NULL, NAN, NAN, NULL, FOLDER "&has_test_folder=1", 1, "Test images folder"},
    {"folder_test_min_per_class", F_INT, "2", 1, NAN, NULL, FOLDER "&has_test_folder=1", 0,
     "Minimum samples per class (test folder)"},
    {"folder_test_max_per_class", F_INT, NULL, 1, NAN, NULL, FOLDER "&has_test_folder=1", 0,
     "Maximum samples per class (test folder)"},
    /* method textfile: lists uploaded with the request, or files on the server */
    {"textfile_use_local_files", F_BOOL, "false", NAN, NAN, NULL, TEXTFILE, 0, "Use local files"},
    {"textfile_train_images", F_UPLOAD, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_local_files=0", 1,
     "Training images list"},
    {"textfile_local_train_images", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_local_files=1", 1,
     "Training images list"},
    {"textfile_train_folder", F_DIR, NULL, NAN, NAN, NULL, TEXTFILE, 0, "Training images folder"},
    {"textfile_use_val", F_BOOL, "false", NAN, NAN, NULL, TEXTFILE, 0, "Validation set"},
    {"textfile_val_images", F_UPLOAD, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_val=1&textfile_use_local_files=0",
     1, "Validation images list"},
    {"textfile_local_val_images", F_FILE, NULL, NAN, NAN, NULL,
     TEXTFILE "&textfile_use_val=1&textfile_use_local_files=1", 1, "Validation images list"},
    {"textfile_val_folder", F_DIR, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_val=1", 0, "Validation images folder"},
    {"textfile_use_test", F_BOOL, "false", NAN, NAN, NULL, TEXTFILE, 0, "Test set"},
    {"textfile_test_images", F_UPLOAD, NULL, NAN, NAN, NULL,
     TEXTFILE "&textfile_use_test=1&textfile_use_local_files=0", 1, "Test images list"},
    {"textfile_local_test_images", F_FILE, NULL, NAN, NAN, NULL,
     TEXTFILE "&textfile_use_test=1&textfile_use_local_files=1", 1, "Test images list"},
    {"textfile_test_folder", F_DIR, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_test=1", 0, "Test images folder"},
    /* DIGITS's checkbox; the worker always shuffles each split's records (seeded) */
    {"textfile_shuffle", F_BOOL, "true", NAN, NAN, NULL, TEXTFILE, 0, "Shuffle lines"},
    {"textfile_labels_file", F_UPLOAD, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_local_files=0", 1, "Labels file"},
    {"textfile_local_labels_file", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE "&textfile_use_local_files=1", 1,
     "Labels file"},
};

/* Each folder's minimum and maximum images per class: form field -> dataset.json key. */
static const struct {
    const char *min_field, *max_field, *min_key, *max_key;
} g_per_class[] = {
    {"folder_train_min_per_class", "folder_train_max_per_class", "min_per_class", "max_per_class"},
    {"folder_val_min_per_class", "folder_val_max_per_class", "val_min_per_class", "val_max_per_class"},
    {"folder_test_min_per_class", "folder_test_max_per_class", "test_min_per_class", "test_max_per_class"},
};

/* The folder each list's relative paths start from: form field -> dataset.json key. */
static const struct {
    const char *field, *key;
} g_list_roots[] = {
    {"textfile_train_folder", "textfile_root"},
    {"textfile_val_folder", "textfile_val_root"},
    {"textfile_test_folder", "textfile_test_root"},
};

static json_int_t ival(json_t *v, const char *k) { return json_integer_value(json_object_get(v, k)); }
static const char *sval(json_t *v, const char *k)
{
    const char *s = json_string_value(json_object_get(v, k));
    return s ? s : "";
}

/* Saves an uploaded list into the job folder as `name`; its path goes to `key`. Also
 * records the saved path in form so a clone can read it without the upload. */
static int save_upload(req_t *r, const char *field, const char *dir, const char *name, json_t *cfg, const char *key,
                       json_t *form, const char *local_field, cd_err_t *err)
{
    const field_t *f = fields_find(r->fields, field);
    if (!f)
        return CD_OK;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (cd_write_file_atomic(path, f->value, f->len) != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot save the uploaded %s as %s: %s", field, path, strerror(errno));
    json_object_set_new(cfg, key, json_string(path));
    json_object_set_new(form, local_field, json_string(path));
    json_object_set_new(form, "textfile_use_local_files", json_string("true"));
    return CD_OK;
}

int dataset_job_start(req_t *r, json_t *v, const char *id, const char *dir, json_t *form, json_t *conf)
{
    cd_err_t err;
    if (!form || !conf) {
        reply_error(r, 500, "out of memory saving the dataset's fields");
        return CD_ERR;
    }
    store_job_new_t job = {
        .id = id,
        .type = "dataset",
        .name = sval(v, "dataset_name"),
        .group = sval(v, "group_name"),
        .username = r->username[0] ? r->username : NULL,
        .dir = dir,
        .form = form,
        .config = conf,
    };
    if (api_job_start(r->srv, &job, "dataset", "Create Dataset", &err) != CD_OK) {
        reply_err(r, &err);
        return CD_ERR;
    }
    json_t *brief = api_job_announce(r->srv, id);
    if (brief)
        api_reply_created(r, brief);
    else
        reply_error(r, 500, "the new job %s vanished", id);
    return CD_OK;
}

void api_dataset_create_fields(req_t *r, const fields_t *in)
{
    server_t *srv = r->srv;
    json_t *v = NULL, *errors = NULL;
    json_t *form = NULL, *cfg = NULL, *conf = NULL;
    char id[64] = "", dir[PATH_MAX] = "";
    cd_err_t err;
    int ok = form_validate(srv, g_dataset_form, CD_ARRAY_LEN(g_dataset_form), in, &v, &errors);
    const char *method = sval(v, "method");
    int folder = strcmp(method, "folder") == 0;
    if (folder && json_is_integer(json_object_get(v, "folder_pct_val")) &&
        json_is_integer(json_object_get(v, "folder_pct_test")) &&
        ival(v, "folder_pct_val") + ival(v, "folder_pct_test") > 100) {
        form_add_error(errors, "folder_pct_test", "%% for validation plus %% for testing is %d; it must be at most 100",
                       (int)(ival(v, "folder_pct_val") + ival(v, "folder_pct_test")));
        ok = 0;
    }
    for (size_t i = 0; folder && i < CD_ARRAY_LEN(g_per_class); i++) {
        json_t *minpc = json_object_get(v, g_per_class[i].min_field), *maxpc = json_object_get(v, g_per_class[i].max_field);
        if (json_is_integer(maxpc) && json_is_integer(minpc) && json_integer_value(maxpc) < json_integer_value(minpc)) {
            form_add_error(errors, g_per_class[i].max_field, "Maximum samples per class (%d) must be at least the minimum (%d)",
                           (int)json_integer_value(maxpc), (int)json_integer_value(minpc));
            ok = 0;
        }
    }
    if (!ok) {
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    if (api_new_job_dir(srv, id, sizeof id, dir, sizeof dir, &err) != CD_OK) {
        reply_err(r, &err);
        goto out;
    }
    form = fields_to_json(in);
    int has_val = folder ? json_is_true(json_object_get(v, "has_val_folder")) : json_is_true(json_object_get(v, "textfile_use_val"));
    int has_test = folder ? json_is_true(json_object_get(v, "has_test_folder")) : json_is_true(json_object_get(v, "textfile_use_test"));
    cfg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:i, s:i}",
                    "folder_train", "", "folder_val", "", "folder_test", "", "textfile_train", "", "textfile_val", "",
                    "textfile_test", "", "textfile_labels", "", "textfile_root", "", "pct_val", 0, "pct_test", 0,
                    "min_per_class", 2, "max_per_class", 0, "channels", atoi(sval(v, "resize_channels")), "width",
                    (int)ival(v, "resize_width"), "height", (int)ival(v, "resize_height"), "resize_mode",
                    sval(v, "resize_mode"), "encoding", sval(v, "encoding"), "seed", 0, "threads", 0);
    if (folder) {
        json_object_set(cfg, "folder_train", json_object_get(v, "folder_train"));
        if (has_val)
            json_object_set(cfg, "folder_val", json_object_get(v, "folder_val"));
        if (has_test)
            json_object_set(cfg, "folder_test", json_object_get(v, "folder_test"));
        json_object_set_new(cfg, "pct_val", json_integer(has_val ? 0 : ival(v, "folder_pct_val")));
        json_object_set_new(cfg, "pct_test", json_integer(has_test ? 0 : ival(v, "folder_pct_test")));
        for (size_t i = 0; i < CD_ARRAY_LEN(g_per_class); i++) {
            json_t *minpc = json_object_get(v, g_per_class[i].min_field), *maxpc = json_object_get(v, g_per_class[i].max_field);
            if (json_is_integer(minpc))
                json_object_set(cfg, g_per_class[i].min_key, minpc);
            if (json_is_integer(maxpc))
                json_object_set(cfg, g_per_class[i].max_key, maxpc);
        }
        has_val = has_val || ival(v, "folder_pct_val") > 0;
        has_test = has_test || ival(v, "folder_pct_test") > 0;
    } else if (json_is_true(json_object_get(v, "textfile_use_local_files"))) {
        json_object_set(cfg, "textfile_train", json_object_get(v, "textfile_local_train_images"));
        if (has_val)
            json_object_set(cfg, "textfile_val", json_object_get(v, "textfile_local_val_images"));
        if (has_test)
            json_object_set(cfg, "textfile_test", json_object_get(v, "textfile_local_test_images"));
        json_object_set(cfg, "textfile_labels", json_object_get(v, "textfile_local_labels_file"));
    } else if (save_upload(r, "textfile_train_images", dir, "upload_train.txt", cfg, "textfile_train", form,
                           "textfile_local_train_images", &err) != CD_OK ||
               (has_val && save_upload(r, "textfile_val_images", dir, "upload_val.txt", cfg, "textfile_val", form,
                                       "textfile_local_val_images", &err) != CD_OK) ||
               (has_test && save_upload(r, "textfile_test_images", dir, "upload_test.txt", cfg, "textfile_test", form,
                                        "textfile_local_test_images", &err) != CD_OK) ||
               save_upload(r, "textfile_labels_file", dir, "upload_labels.txt", cfg, "textfile_labels", form,
                           "textfile_local_labels_file", &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    for (size_t i = 0; !folder && i < CD_ARRAY_LEN(g_list_roots); i++)
        if (json_is_string(json_object_get(v, g_list_roots[i].field)))
            json_object_set(cfg, g_list_roots[i].key, json_object_get(v, g_list_roots[i].field));
    if (api_write_json(dir, jobdir_name(JOBDIR_DATASET_JSON), cfg, &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    conf = json_pack("{s:s, s:[i,i,i], s:s, s:s, s:b, s:b, s:{s:s}}", "method", method, "image_dims",
                     (int)ival(v, "resize_height"), (int)ival(v, "resize_width"), atoi(sval(v, "resize_channels")),
                     "resize_mode", sval(v, "resize_mode"), "encoding", sval(v, "encoding"), "has_val", has_val,
                     "has_test", has_test, "resources", "kind", "dataset");
    if (dataset_job_start(r, v, id, dir, form, conf) != CD_OK)
        goto fail;
    goto out;
fail:
    if (dir[0])
        sched_remove_dir(dir, id);
out:
    json_decref(v);
    json_decref(errors);
    json_decref(form);
    json_decref(cfg);
    json_decref(conf);
}

void h_dataset_create(req_t *r) { api_dataset_create_fields(r, r->fields); }

/* ---- the explorer: records of a split's .db ------------------------------------------
 * Through the dataset library (src/dataset/db_read.c): one reader, with the format's
 * layout rules and checksums (docs/formats.md), for the worker and the server. */

cd_db_t *dataset_split_open(req_t *r, json_t *job, int split)
{
    const char *id = sval(job, "id"), *name = cd_split_name(split);
    if (strcmp(sval(job, "type"), "dataset") != 0) {
        reply_error(r, 404, "Job %s is not a dataset; the explorer shows a dataset's records", id);
        return NULL;
    }
    int missing = 0;
    char why[512];
    cd_db_t *db = dataset_own_db(sval(job, "dir"), JOBDIR_TRAIN_DB + split, &missing, why, sizeof why);
    if (!db && missing)
        reply_error(r, 404, "Dataset %s has no %s records (%s); its %s split is empty or the dataset is not done", id,
                    name, why, name);
    else if (!db) /* why names the file, what is wrong with it and what to do */
        reply_error(r, 500, "%s", why);
    return db;
}

cd_db_t *dataset_own_db(const char *dir, int file, int *missing, char *why, size_t len)
{
    char path[PATH_MAX];
    struct stat st;
    int gone = 0;
    if (missing)
        *missing = 0;
    if (jobdir_path(dir, file, path, sizeof path) != CD_OK) {
        snprintf(why, len, "the job folder's path is too long");
        return NULL;
    }
    /* the job folder's own file, never one a link points to */
    if (lstat(path, &st) != 0) {
        snprintf(why, len, "%s: %s", jobdir_name(file), strerror(errno));
        gone = 1;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s: not a plain file", jobdir_name(file));
        gone = 1;
    }
    if (gone) {
        if (missing)
            *missing = 1;
        return NULL;
    }
    return cd_db_open(path, why, len);
}

int dataset_split_param(req_t *r, const char *name)
{
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (strcmp(name, cd_split_name(s)) == 0)
            return s;
    reply_error(r, 404, "No split \"%s\": a dataset's splits are train, val and test", name);
    return -1;
}

long long dataset_page(const cd_db_t *db, long long label, long long page, long long size, size_t *out,
                       size_t *nout)
{
    size_t count = cd_db_count(db);
    long long first = page * size, total = 0;
    *nout = 0;
    for (size_t i = 0; i < count; i++) {
        if (label >= 0 && cd_db_label(db, i) != label)
            continue;
        if (total >= first && total < first + size)
            out[(*nout)++] = i;
        total++;
    }
    return total;
}

/* GET /datasets/<id>/explore/json?split=train&label=N&page=P&size=S: one page of the
 * records of a split (of one class with label), each with the URL of its image.
 * Pages count from 0. */
void h_dataset_explore(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    const char *split = fields_get(r->fields, "split"), *label_s = fields_get(r->fields, "label");
    const char *page_s = fields_get(r->fields, "page"), *size_s = fields_get(r->fields, "size");
    long long label = -1, page = 0, size = 25;
    char *end;
    size_t *idx = NULL;
    if (label_s && *label_s) {
        label = strtoll(label_s, &end, 10);
        if (*end || label < -1) {
            reply_error(r, 400, "label \"%s\" is not a class index; give 0 .. classes-1, or -1 for every class", label_s);
            goto out;
        }
    }
    if (page_s && *page_s) {
        page = strtoll(page_s, &end, 10);
        if (*end || page < 0 || page > 1000000000) {
            reply_error(r, 400, "page \"%s\" is not a page number; pages count from 0", page_s);
            goto out;
        }
    }
    if (size_s && *size_s) {
        size = strtoll(size_s, &end, 10);
        if (*end || size < 1 || size > EXPLORE_MAX_SIZE) {
            reply_error(r, 400, "size \"%s\" must be between 1 and %d records per page", size_s, EXPLORE_MAX_SIZE);
            goto out;
        }
    }
    split = split && *split ? split : "train";
    int s = dataset_split_param(r, split);
    cd_db_t *db = s < 0 ? NULL : dataset_split_open(r, job, s);
    if (!db)
        goto out;
    idx = malloc((size_t)size * sizeof *idx);
    if (!idx) {
        cd_db_close(db);
        reply_error(r, 500, "out of memory paging %lld records", size);
        goto out;
    }
    size_t n = 0;
    long long total = dataset_page(db, label, page, size, idx, &n);
    json_t *items = json_array();
    for (size_t k = 0; k < n; k++) {
        char url[1024];
        snprintf(url, sizeof url, "%s/datasets/%s/images/%s/%zu", r->srv->cfg.url_prefix, r->params[0], split, idx[k]);
        json_array_append_new(items, json_pack("{s:I, s:i, s:s}", "index", (json_int_t)idx[k], "label",
                                               cd_db_label(db, idx[k]), "url", url));
    }
    reply_json(r, 200, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:[i,i,i], s:s, s:o}", "split", split, "label",
                                 (json_int_t)label, "total", (json_int_t)total, "count", (json_int_t)cd_db_count(db),
                                 "page", (json_int_t)page, "size", (json_int_t)size, "image_dims", cd_db_height(db),
                                 cd_db_width(db), cd_db_channels(db), "encoding",
                                 cd_encoding_name(cd_db_encoding(db)), "items", items));
    cd_db_close(db);
out:
    free(idx);
    json_decref(job);
}

/* Record i of db as an image file: a PNG (level 1: a few KB, made in well under a
 * millisecond) for records of encoding none, the stored bytes (PNG or JPEG) for the
 * others. malloc'd, or NULL with err. */
static uint8_t *record_file(const cd_db_t *db, size_t i, size_t *len, char *err, size_t errlen)
{
    const uint8_t *raw = cd_db_raw(db, i);
    if (raw) {
        cd_image_t img = {.c = cd_db_channels(db), .h = cd_db_height(db), .w = cd_db_width(db),
                          .data = (uint8_t *)raw};
        uint8_t *png = NULL;
        return cd_image_encode_png(&img, 1, &png, len, err, errlen) == CD_OK ? png : NULL;
    }
    size_t size = 0;
    const uint8_t *rec = cd_db_record(db, i, &size);
    uint8_t *copy = rec && size ? malloc(size) : NULL;
    if (!copy) {
        snprintf(err, errlen, rec ? "out of memory" : "no such record");
        return NULL;
    }
    memcpy(copy, rec, size);
    *len = size;
    return copy;
}

int dataset_record_param(req_t *r, const cd_db_t *db, const char *what, size_t *index)
{
    const char *text = r->params[2];
    char *end;
    errno = 0;
    unsigned long long i = strtoull(text, &end, 10);
    size_t count = cd_db_count(db);
    if (*end || errno || text[0] == '-' || i >= count) {
        reply_error(r, 404, "No record %s in the %s %s of dataset %s: it has %zu (0 .. %zu)", text, r->params[1], what,
                    r->params[0], count, count ? count - 1 : 0);
        return CD_ERR;
    }
    *index = (size_t)i;
    return CD_OK;
}

/* GET /datasets/<id>/images/<split>/<index>: record <index> of the split as an image:
 * PNG for encodings none and png, the stored JPEG for jpg. A record never changes, so
 * browsers may keep it. */
void h_dataset_image(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    int s = dataset_split_param(r, r->params[1]);
    cd_db_t *db = s < 0 ? NULL : dataset_split_open(r, job, s);
    json_decref(job);
    if (!db)
        return;
    size_t i;
    if (dataset_record_param(r, db, "split", &i) != CD_OK) {
        cd_db_close(db);
        return;
    }
    const char *ctype = cd_db_encoding(db) == CD_ENC_JPG ? "image/jpeg" : "image/png";
    char err[512] = "";
    size_t len = 0;
    uint8_t *body = record_file(db, i, &len, err, sizeof err);
    cd_db_close(db);
    if (!body) {
        reply_error(r, 500, "cannot read record %zu of the %s split of dataset %s: %s", i, r->params[1],
                    r->params[0], err);
        return;
    }
    reply_buffer(r, 200, body, len, ctype, "private, max-age=86400");
}
