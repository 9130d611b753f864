/* Dataset routes. POST /datasets/images/classification/json: DIGITS's form fields,
 * validated by the table below, become dataset.json (docs/worker-protocol.md) in a new
 * job folder. The explorer pages through the records of a split's .db file and serves
 * each record as an image; it reads the file's header, index and labels itself
 * (docs/formats.md), since the server links neither the engine nor the dataset library. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    {"has_test_folder", F_BOOL, "false", NAN, NAN, NULL, FOLDER, 0, "Separate test images folder"},
    {"folder_test", F_DIR, NULL, NAN, NAN, NULL, FOLDER "&has_test_folder=1", 1, "Test images folder"},
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
    json_t *maxpc = json_object_get(v, "folder_train_max_per_class"), *minpc = json_object_get(v, "folder_train_min_per_class");
    if (folder && json_is_integer(maxpc) && json_is_integer(minpc) && json_integer_value(maxpc) < json_integer_value(minpc)) {
        form_add_error(errors, "folder_train_max_per_class", "Maximum samples per class (%d) must be at least the minimum (%d)",
                       (int)json_integer_value(maxpc), (int)json_integer_value(minpc));
        ok = 0;
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
        if (json_is_integer(minpc))
            json_object_set(cfg, "min_per_class", minpc);
        if (json_is_integer(maxpc))
            json_object_set(cfg, "max_per_class", maxpc);
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
    if (!folder && json_is_string(json_object_get(v, "textfile_train_folder")))
        json_object_set(cfg, "textfile_root", json_object_get(v, "textfile_train_folder"));
    if (api_write_json(dir, "dataset.json", cfg, &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    conf = json_pack("{s:s, s:[i,i,i], s:s, s:s, s:b, s:b, s:{s:s}}", "method", method, "image_dims",
                     (int)ival(v, "resize_height"), (int)ival(v, "resize_width"), atoi(sval(v, "resize_channels")),
                     "resize_mode", sval(v, "resize_mode"), "encoding", sval(v, "encoding"), "has_val", has_val,
                     "has_test", has_test, "resources", "kind", "dataset");
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
    if (store_job_insert(srv->store, &job, &err) != CD_OK ||
        store_task_insert(srv->store, id, "dataset", "Create Dataset", NULL, &err) != CD_OK) {
        reply_err(r, &err);
        store_job_delete(srv->store, id, NULL);
        goto fail;
    }
    if (sched_enqueue(srv->sched, id, &err) != CD_OK) {
        reply_err(r, &err);
        store_job_delete(srv->store, id, NULL);
        goto fail;
    }
    json_t *row = store_job_get(srv->store, id);
    if (row) {
        json_t *ev = json_pack("{s:s, s:s, s:o}", "job_id", id, "update", "added", "job", view_job_brief(row));
        events_publish(srv->events, "home", "job_added", ev);
        json_decref(ev);
        reply_json(r, 200, view_job_brief(row));
        json_decref(row);
    } else {
        reply_error(r, 500, "the new job %s vanished", id);
    }
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

/* ---- the explorer: records of a split's .db ------------------------------------------ */

#define DB_HEADER 128
#define EXPLORE_MAX_SIZE 1000 /* records per page */

enum { DB_ENC_NONE = 0, DB_ENC_PNG = 1, DB_ENC_JPG = 2 };

typedef struct dbfile {
    int fd;
    uint32_t channels, height, width, encoding;
    uint64_t count, data_size, index_offset, labels_offset;
} dbfile_t;

static uint32_t le32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* pread of exactly n bytes; CD_ERR on a short read. */
static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return CD_ERR;
        got += (size_t)k;
    }
    return CD_OK;
}

/* Opens <dataset dir>/<split>.db and checks the header's layout rules (docs/formats.md:
 * every offset follows from count, the shape and the data size; the size on disk is
 * file_size). The record CRCs are not checked: that would read every record for one
 * page. CD_OK with db->fd open, or CD_ERR after a reply. */
static int db_open(req_t *r, json_t *job, const char *split, dbfile_t *db)
{
    db->fd = -1;
    if (strcmp(split, "train") != 0 && strcmp(split, "val") != 0 && strcmp(split, "test") != 0) {
        reply_error(r, 404, "No split \"%s\": a dataset's splits are train, val and test", split);
        return CD_ERR;
    }
    const char *type = json_string_value(json_object_get(job, "type"));
    if (!type || strcmp(type, "dataset") != 0) {
        reply_error(r, 404, "Job %s is not a dataset; the explorer shows a dataset's records", r->params[0]);
        return CD_ERR;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.db", sval(job, "dir"), split);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        reply_error(r, 404, "Dataset %s has no %s records (%s.db: %s); its %s split is empty or the dataset is not done",
                    r->params[0], split, split, strerror(errno), split);
        return CD_ERR;
    }
    unsigned char h[DB_HEADER];
    struct stat st;
    if (fstat(fd, &st) != 0 || read_at(fd, h, sizeof h, 0) != CD_OK || memcmp(h, "CDDB", 4) != 0 || le32(h + 4) != 1 ||
        le32(h + 8) != DB_HEADER)
        goto bad;
    db->channels = le32(h + 12);
    db->height = le32(h + 16);
    db->width = le32(h + 20);
    db->encoding = le32(h + 24);
    db->count = le64(h + 32);
    db->data_size = le64(h + 48);
    db->index_offset = le64(h + 56);
    db->labels_offset = le64(h + 64);
    uint64_t data_offset = le64(h + 40), crc_offset = le64(h + 72), file_size = le64(h + 80);
    if ((db->channels != 1 && db->channels != 3) || db->height < 1 || db->height > 65536 || db->width < 1 ||
        db->width > 65536 || db->encoding > DB_ENC_JPG || data_offset != DB_HEADER ||
        file_size != (uint64_t)st.st_size || db->count > file_size / 4 || db->data_size > file_size)
        goto bad;
    uint64_t t = (DB_HEADER + db->data_size + 7) & ~(uint64_t)7;
    uint64_t pixels = (uint64_t)db->channels * db->height * db->width;
    uint64_t want_labels = t + (db->encoding != DB_ENC_NONE ? 16 * db->count : 0);
    if ((db->encoding == DB_ENC_NONE ? db->index_offset != 0 || db->data_size != db->count * pixels
                                     : db->index_offset != t) ||
        db->labels_offset != want_labels || crc_offset != want_labels + 4 * db->count ||
        file_size != crc_offset + 4 * db->count)
        goto bad;
    db->fd = fd;
    return CD_OK;
bad:
    close(fd);
    reply_error(r, 500, "%s is not a valid cdigits .db file (see docs/formats.md); create the dataset again", path);
    return CD_ERR;
}

static const char *const g_encodings[] = {"none", "png", "jpg"};

/* GET /datasets/<id>/explore/json?split=train&label=N&page=P&size=S: one page of the
 * records of a split (of one class with label), each with the URL of its image.
 * Pages count from 0. Reading the labels costs 4 bytes per record of the split. */
void h_dataset_explore(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    const char *split = fields_get(r->fields, "split"), *label_s = fields_get(r->fields, "label");
    const char *page_s = fields_get(r->fields, "page"), *size_s = fields_get(r->fields, "size");
    long long label = -1, page = 0, size = 25;
    char *end;
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
    dbfile_t db;
    if (db_open(r, job, split && *split ? split : "train", &db) != CD_OK)
        goto out;
    split = split && *split ? split : "train";
    unsigned char *labels = db.count ? malloc(4 * db.count) : NULL;
    if (db.count && (!labels || read_at(db.fd, labels, 4 * db.count, db.labels_offset) != CD_OK)) {
        free(labels);
        close(db.fd);
        reply_error(r, 500, "cannot read the labels of %s.db of dataset %s", split, r->params[0]);
        goto out;
    }
    close(db.fd);
    long long first = page * size, total = 0;
    json_t *items = json_array();
    for (uint64_t i = 0; i < db.count; i++) {
        int32_t l = (int32_t)le32(labels + 4 * i);
        if (label >= 0 && l != label)
            continue;
        if (total >= first && total < first + size) {
            char url[1024];
            snprintf(url, sizeof url, "%s/datasets/%s/images/%s/%llu", r->srv->cfg.url_prefix, r->params[0], split,
                     (unsigned long long)i);
            json_array_append_new(items, json_pack("{s:I, s:i, s:s}", "index", (json_int_t)i, "label", (int)l, "url", url));
        }
        total++;
    }
    free(labels);
    reply_json(r, 200, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:[i,i,i], s:s, s:o}", "split", split, "label",
                                 (json_int_t)label, "total", (json_int_t)total, "count", (json_int_t)db.count, "page",
                                 (json_int_t)page, "size", (json_int_t)size, "image_dims", (int)db.height,
                                 (int)db.width, (int)db.channels, "encoding", g_encodings[db.encoding], "items", items));
out:
    json_decref(job);
}

/* ---- a record as a PNG file ---------------------------------------------------------------
 * Records of encoding none are planar CHW bytes: they are sent as a PNG whose zlib
 * stream uses stored (uncompressed) deflate blocks, which needs only CRC-32 and
 * Adler-32. A few KB to a few hundred KB per image, made in microseconds. */

static uint32_t g_crc_table[256];
static pthread_once_t g_crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        g_crc_table[n] = c;
    }
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    pthread_once(&g_crc_once, crc_init);
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = g_crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes a chunk (length, type, the len bytes already at p + 8, CRC); returns its size. */
static size_t png_chunk(unsigned char *p, const char *type, size_t len)
{
    put_be32(p, (uint32_t)len);
    memcpy(p + 4, type, 4);
    put_be32(p + 8 + len, crc32_of(p + 4, len + 4));
    return len + 12;
}

/* planar is (c,h,w) uint8 with c 1 (gray) or 3 (RGB). Returns a malloc'd PNG file. */
static unsigned char *png_from_planar(const unsigned char *planar, uint32_t c, uint32_t h, uint32_t w, size_t *outlen)
{
    size_t row = 1 + (size_t)w * c, raw = row * h;
    size_t nblocks = raw / 65535 + 1;
    size_t zlen = 2 + 5 * nblocks + raw + 4;
    size_t total = 8 + (12 + 13) + (12 + zlen) + 12;
    unsigned char *png = malloc(total), *rows = malloc(raw);
    if (!png || !rows) {
        free(png);
        free(rows);
        return NULL;
    }
    size_t plane = (size_t)h * w;
    for (uint32_t y = 0; y < h; y++) {
        unsigned char *o = rows + y * row;
        *o++ = 0; /* filter: none */
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < c; k++)
                *o++ = planar[k * plane + (size_t)y * w + x];
    }
    unsigned char *p = png;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p += 8;
    put_be32(p + 8, w);
    put_be32(p + 12, h);
    p[16] = 8;                /* bits per sample */
    p[17] = c == 3 ? 2 : 0;   /* RGB or gray */
    p[18] = p[19] = p[20] = 0; /* deflate, adaptive filters, no interlace */
    p += png_chunk(p, "IHDR", 13);
    unsigned char *z = p + 8, *zp = z;
    *zp++ = 0x78; /* zlib: deflate, 32K window */
    *zp++ = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t off = 0, left = raw; nblocks--;) {
        size_t n = left < 65535 ? left : 65535;
        *zp++ = nblocks == 0; /* BFINAL on the last block, BTYPE 00 (stored) */
        zp[0] = (unsigned char)n;
        zp[1] = (unsigned char)(n >> 8);
        zp[2] = (unsigned char)~n;
        zp[3] = (unsigned char)(~n >> 8);
        zp += 4;
        memcpy(zp, rows + off, n);
        for (size_t i = 0; i < n; i++) {
            a = (a + rows[off + i]) % 65521;
            b = (b + a) % 65521;
        }
        zp += n;
        off += n;
        left -= n;
    }
    put_be32(zp, b << 16 | a);
    p += png_chunk(p, "IDAT", zlen);
    p += png_chunk(p, "IEND", 0);
    free(rows);
    *outlen = (size_t)(p - png);
    return png;
}

/* GET /datasets/<id>/images/<split>/<index>: record <index> of the split as an image:
 * PNG for encodings none and png, the stored JPEG for jpg. A record never changes, so
 * browsers may keep it. */
void h_dataset_image(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    dbfile_t db;
    if (db_open(r, job, r->params[1], &db) != CD_OK) {
        json_decref(job);
        return;
    }
    json_decref(job);
    char *end;
    errno = 0;
    unsigned long long i = strtoull(r->params[2], &end, 10);
    if (*end || errno || r->params[2][0] == '-' || i >= db.count) {
        close(db.fd);
        reply_error(r, 404, "No record %s in the %s split of dataset %s: it has %llu (0 .. %llu)", r->params[2],
                    r->params[1], r->params[0], (unsigned long long)db.count,
                    (unsigned long long)(db.count ? db.count - 1 : 0));
        return;
    }
    unsigned char *body = NULL;
    size_t len = 0;
    const char *ctype = db.encoding == DB_ENC_JPG ? "image/jpeg" : "image/png";
    if (db.encoding == DB_ENC_NONE) {
        size_t n = (size_t)db.channels * db.height * db.width;
        unsigned char *px = malloc(n);
        if (px && read_at(db.fd, px, n, DB_HEADER + i * n) == CD_OK)
            body = png_from_planar(px, db.channels, db.height, db.width, &len);
        free(px);
    } else {
        unsigned char ent[16];
        if (read_at(db.fd, ent, sizeof ent, db.index_offset + 16 * i) == CD_OK) {
            uint64_t off = le64(ent), size = le64(ent + 8);
            if (off >= DB_HEADER && size > 0 && size <= db.data_size && off - DB_HEADER <= db.data_size - size &&
                (body = malloc(size)) && read_at(db.fd, body, size, off) != CD_OK) {
                free(body);
                body = NULL;
            }
            len = (size_t)size;
        }
    }
    close(db.fd);
    if (!body) {
        reply_error(r, 500, "cannot read record %llu of the %s split of dataset %s", i, r->params[1], r->params[0]);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        reply_error(r, 500, "out of memory");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "private, max-age=86400");
    reply_response(r, 200, resp);
}
