/* Generic datasets: DIGITS 6.1 makes datasets other than classification through data
 * extensions, each with a form of its own (POST /datasets/generic/create/<extension_id>).
 * Here each extension is one table: a row per form field with its validation and the
 * dataset.json key it fills (docs/worker-protocol.md), and the dataset's task. The job
 * is stored and run as a classification dataset job is (the scheduler's `dataset`
 * task); the worker's creator for the task writes the feature and label dbs.
 *
 * Models on generic datasets take the classification model form (api_models.c); the
 * rule between the route and the dataset's kind is here, as are the label records of a
 * generic dataset, served as images (segmentation, coloured by palette.txt) or values. */
#include "internal.h"

#include "api_datasets.h"
#include "api_generic.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/image.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"

#define ALWAYS NULL
#define FOLDER "method=folder"
#define TEXTFILE "method=textfile"

/* How a validated value becomes its dataset.json value. */
enum gen_conv {
    GV_AS_IS = 0, /* the typed value: text, number, resolved path */
    GV_INT,       /* a choice of digits ("3", "0") as a number */
};

typedef struct gen_field {
    form_field_t f;
    const char *key; /* the dataset.json key; NULL: validated only */
    int conv;        /* enum gen_conv */
} gen_field_t;

#define ROW(name, type, def, min, max, choices, when, required, label, key, conv)                                     \
    {{name, type, def, min, max, choices, when, required, label}, key, conv}

/* Every extension's form starts with these (DIGITS's DatasetForm). */
static const gen_field_t g_common[] = {
    ROW("dataset_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 1, "Dataset name", NULL, 0),
    ROW("group_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Group name", NULL, 0),
};

/* DIGITS's image-segmentation extension (its forms.py) with GenericDatasetForm's dsopts_*.
 * Images keep their size (no resize fields): force_same_shape refuses another shape. */
static const gen_field_t g_segmentation[] = {
    ROW("feature_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 1, "Feature image folder", "feature_folder", 0),
    ROW("label_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 1, "Label image folder", "label_folder", 0),
    ROW("has_val_folder", F_BOOL, "false", NAN, NAN, NULL, ALWAYS, 0, "Separate validation images", NULL, 0),
    ROW("folder_pct_val", F_INT, "10", 0, 100, NULL, "has_val_folder=0", 1, "% for validation", "pct_val", 0),
    ROW("validation_feature_folder", F_DIR, NULL, NAN, NAN, NULL, "has_val_folder=1", 1,
        "Validation feature image folder", "validation_feature_folder", 0),
    ROW("validation_label_folder", F_DIR, NULL, NAN, NAN, NULL, "has_val_folder=1", 1,
        "Validation label image folder", "validation_label_folder", 0),
    ROW("channel_conversion", F_CHOICE, "none", NAN, NAN, "RGB|L|none", ALWAYS, 1, "Channel conversion",
        "channel_conversion", 0),
    ROW("class_labels_file", F_FILE, NULL, NAN, NAN, NULL, ALWAYS, 0, "Class labels", "class_labels_file", 0),
    ROW("colormap_method", F_CHOICE, "label", NAN, NAN, "label|textfile", ALWAYS, 1, "Color map specification",
        "colormap_method", 0),
    ROW("colormap_text_file", F_FILE, NULL, NAN, NAN, NULL, "colormap_method=textfile", 1, "Color map file",
        "colormap_text_file", 0),
    ROW("dsopts_feature_encoding", F_CHOICE, "png", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Feature Encoding",
        "encoding", 0),
    /* the label db is PNG whatever is asked (exact, and small); jpg is refused (forms.c) */
    ROW("dsopts_label_encoding", F_CHOICE, "none", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Label Encoding", NULL, 0),
    ROW("dsopts_batch_size", F_INT, "32", 1, NAN, NULL, ALWAYS, 1, "Encoder batch size", NULL, 0),
    ROW("dsopts_num_threads", F_INT, "4", 1, 1024, NULL, ALWAYS, 1, "Number of encoder threads", "threads", 0),
    ROW("dsopts_backend", F_STRING, "lmdb", NAN, NAN, NULL, ALWAYS, 0, "DB backend", NULL, 0),
    ROW("dsopts_force_same_shape", F_CHOICE, "1", NAN, NAN, "1|0", ALWAYS, 1, "Enforce same shape",
        "force_same_shape", GV_INT),
    /* the name DIGITS's own tests post; given, it wins over dsopts_force_same_shape */
    ROW("force_same_shape", F_CHOICE, NULL, NAN, NAN, "1|0", ALWAYS, 0, "Enforce same shape", "force_same_shape",
        GV_INT),
};

/* The classification form's image fields (api_datasets.c), for the extensions that
 * resize their images. */
#define RESIZE_ROWS                                                                                                  \
    ROW("resize_channels", F_CHOICE, "3", NAN, NAN, "1|3", ALWAYS, 1, "Image type (resize_channels: 1 gray, 3 color)", \
        "channels", GV_INT),                                                                                         \
        ROW("resize_width", F_INT, "256", 1, 4096, NULL, ALWAYS, 1, "Resize width", "width", 0),                     \
        ROW("resize_height", F_INT, "256", 1, 4096, NULL, ALWAYS, 1, "Resize height", "height", 0),                  \
        ROW("resize_mode", F_CHOICE, "squash", NAN, NAN, "squash|crop|fill|half_crop", ALWAYS, 1,                    \
            "Resize transformation", "resize_mode", 0),                                                              \
        ROW("encoding", F_CHOICE, "png", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Image encoding", "encoding", 0)

/* cdigits's regression extension: images with K float targets each, from lines of
 * `path v1 ... vK` or a folder of images with a CSV of `file,v1,...,vK`. */
static const gen_field_t g_regression[] = {
    ROW("method", F_CHOICE, NULL, NAN, NAN, "folder|textfile", ALWAYS, 1, "Targets from (method)", NULL, 0),
    ROW("folder_train", F_DIR, NULL, NAN, NAN, NULL, FOLDER, 1, "Training images folder", "folder_train", 0),
    ROW("targets_csv", F_FILE, NULL, NAN, NAN, NULL, FOLDER, 1, "Targets CSV (file,v1,...,vK)", "targets_csv", 0),
    ROW("textfile_train", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE, 1, "Training list (path v1 ... vK)",
        "textfile_train", 0),
    ROW("textfile_val", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE, 0, "Validation list (path v1 ... vK)",
        "textfile_val", 0),
    ROW("textfile_root", F_DIR, NULL, NAN, NAN, NULL, TEXTFILE, 0, "Folder the lists' paths start from",
        "textfile_root", 0),
    ROW("pct_val", F_INT, "25", 0, 100, NULL, ALWAYS, 1, "% for validation", "pct_val", 0),
    ROW("pct_test", F_INT, "0", 0, 100, NULL, ALWAYS, 1, "% for testing", "pct_test", 0),
    RESIZE_ROWS,
};

/* cdigits's siamese extension: pairs of images of a classification source, each with
 * the target 1 (same class) or 0 (different classes). */
static const gen_field_t g_pairs[] = {
    ROW("method", F_CHOICE, NULL, NAN, NAN, "folder|textfile", ALWAYS, 1, "Images from (method)", NULL, 0),
    ROW("folder_train", F_DIR, NULL, NAN, NAN, NULL, FOLDER, 1, "Training images folder (a folder per class)",
        "folder_train", 0),
    ROW("textfile_train", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE, 1, "Training list (path label)", "textfile_train",
        0),
    ROW("textfile_labels", F_FILE, NULL, NAN, NAN, NULL, TEXTFILE, 1, "Labels file", "textfile_labels", 0),
    ROW("textfile_root", F_DIR, NULL, NAN, NAN, NULL, TEXTFILE, 0, "Folder the list's paths start from",
        "textfile_root", 0),
    ROW("pct_val", F_INT, "25", 0, 100, NULL, ALWAYS, 1, "% for validation", "pct_val", 0),
    ROW("pct_test", F_INT, "0", 0, 100, NULL, ALWAYS, 1, "% for testing", "pct_test", 0),
    ROW("pairs_train", F_INT, "1000", 1, 100000000, NULL, ALWAYS, 1, "Training pairs", "pairs_train", 0),
    ROW("pairs_val", F_INT, "1000", 0, 100000000, NULL, ALWAYS, 1, "Validation pairs", "pairs_val", 0),
    RESIZE_ROWS,
};

/* DIGITS's image-object-detection extension (its forms.py, its defaults) with
 * GenericDatasetForm's dsopts_*: images with KITTI labels, padded then resized. The
 * label db is f32 (boxes) whatever dsopts_label_encoding says; the images are one
 * shape (padded, resized or as the first image), whatever dsopts_force_same_shape says. */
static const gen_field_t g_detection[] = {
    ROW("train_image_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 1, "Training image folder", "train_image_folder",
        0),
    ROW("train_label_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 1, "Training label folder", "train_label_folder",
        0),
    ROW("val_image_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 0, "Validation image folder", "val_image_folder", 0),
    ROW("val_label_folder", F_DIR, NULL, NAN, NAN, NULL, ALWAYS, 0, "Validation label folder", "val_label_folder", 0),
    ROW("resize_image_width", F_INT, NULL, 1, 8192, NULL, ALWAYS, 0, "Resize Image Width", "resize_image_width", 0),
    ROW("resize_image_height", F_INT, NULL, 1, 8192, NULL, ALWAYS, 0, "Resize Image Height", "resize_image_height",
        0),
    ROW("padding_image_width", F_INT, "1248", 1, 8192, NULL, ALWAYS, 0, "Padding Image Width",
        "padding_image_width", 0),
    ROW("padding_image_height", F_INT, "384", 1, 8192, NULL, ALWAYS, 0, "Padding Image Height",
        "padding_image_height", 0),
    ROW("channel_conversion", F_CHOICE, "RGB", NAN, NAN, "RGB|L|none", ALWAYS, 1, "Channel conversion",
        "channel_conversion", 0),
    ROW("val_min_box_size", F_INT, "25", 0, 1000000, NULL, ALWAYS, 1,
        "Minimum box size (in pixels) for validation set", "val_min_box_size", 0),
    ROW("custom_classes", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Custom classes", "custom_classes", 0),
    ROW("dsopts_feature_encoding", F_CHOICE, "png", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Feature Encoding",
        "encoding", 0),
    ROW("dsopts_label_encoding", F_CHOICE, "none", NAN, NAN, "none|png|jpg", ALWAYS, 1, "Label Encoding", NULL, 0),
    ROW("dsopts_batch_size", F_INT, "32", 1, NAN, NULL, ALWAYS, 1, "Encoder batch size", NULL, 0),
    ROW("dsopts_num_threads", F_INT, "4", 1, 1024, NULL, ALWAYS, 1, "Number of encoder threads", "threads", 0),
    ROW("dsopts_backend", F_STRING, "lmdb", NAN, NAN, NULL, ALWAYS, 0, "DB backend", NULL, 0),
    ROW("dsopts_force_same_shape", F_CHOICE, "1", NAN, NAN, "1|0", ALWAYS, 1, "Enforce same shape", NULL, 0),
};

typedef struct gen_ext {
    const char *id;    /* DIGITS's extension id */
    const char *title; /* DIGITS's get_title() */
    const char *task;  /* dataset.json's task */
    const gen_field_t *rows;
    size_t nrows;
} gen_ext_t;

static const gen_ext_t g_exts[] = {
    {"image-segmentation", "Segmentation", "segmentation", g_segmentation, CD_ARRAY_LEN(g_segmentation)},
    {"image-regression", "Regression", "regression", g_regression, CD_ARRAY_LEN(g_regression)},
    {"image-siamese", "Siamese pairs", "pairs", g_pairs, CD_ARRAY_LEN(g_pairs)},
    {"image-object-detection", "Object Detection", "detection", g_detection, CD_ARRAY_LEN(g_detection)},
};

static const char *sval(json_t *v, const char *k)
{
    const char *s = json_string_value(json_object_get(v, k));
    return s ? s : "";
}

static const gen_ext_t *ext_find(const char *id)
{
    for (size_t i = 0; id && i < CD_ARRAY_LEN(g_exts); i++)
        if (strcmp(g_exts[i].id, id) == 0)
            return &g_exts[i];
    return NULL;
}

int generic_extension_known(const char *id) { return ext_find(id) != NULL; }

static char g_ext_list[256];
static pthread_once_t g_ext_list_once = PTHREAD_ONCE_INIT;

static void ext_list_make(void)
{
    size_t n = 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_exts) && n < sizeof g_ext_list; i++)
        n += (size_t)snprintf(g_ext_list + n, sizeof g_ext_list - n, "%s%s", i ? ", " : "", g_exts[i].id);
}

const char *generic_extension_list(void)
{
    pthread_once(&g_ext_list_once, ext_list_make); /* handlers run on several threads */
    return g_ext_list;
}

const char *generic_job_extension(json_t *job)
{
    const char *ext = json_string_value(json_object_get(json_object_get(job, "config"), "extension_id"));
    return ext && ext[0] ? ext : NULL;
}

/* The rows of ext after the common ones: row i of the form is rows[i]. */
static size_t ext_rows(const gen_ext_t *ext, const gen_field_t **rows)
{
    size_t n = 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_common); i++)
        rows[n++] = &g_common[i];
    for (size_t i = 0; i < ext->nrows; i++)
        rows[n++] = &ext->rows[i];
    return n;
}

#define GEN_MAX_ROWS 64

/* The field that fills a dataset.json key named in a message of the dataset library
 * (which names keys): the first row whose key occurs in msg as a word, or NULL. */
static const char *field_of_message(const gen_field_t *const *rows, size_t n, const char *msg)
{
    for (size_t i = 0; i < n; i++) {
        const char *key = rows[i]->key;
        size_t kl = key ? strlen(key) : 0;
        for (const char *p = key ? strstr(msg, key) : NULL; p; p = strstr(p + 1, key)) {
            int before = p == msg || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
            int after = !(p[kl] == '_' || (p[kl] >= 'a' && p[kl] <= 'z'));
            if (before && after)
                return rows[i]->f.name;
        }
    }
    return NULL;
}

/* dataset.json from the validated values v: the task, no split held back unless a row
 * says so, then each row's key with its value (rows later in the table win). */
static json_t *dataset_json(const gen_ext_t *ext, const gen_field_t *const *rows, size_t n, json_t *v)
{
    json_t *cfg = json_pack("{s:s, s:i, s:i}", "task", ext->task, "pct_val", 0, "pct_test", 0);
    for (size_t i = 0; cfg && i < n; i++) {
        json_t *x = json_object_get(v, rows[i]->f.name);
        if (!rows[i]->key || !x || json_is_null(x))
            continue;
        json_t *val = rows[i]->conv == GV_INT ? json_integer(atoi(json_string_value(x) ? json_string_value(x) : "0"))
                                              : json_incref(x);
        json_object_set_new(cfg, rows[i]->key, val);
    }
    return cfg;
}

/* The dataset library's own rules between keys (config.c's check_* of the task), so a
 * job that would fail at once is a 400 instead. CD_OK, or CD_ERR with msg. */
static int library_check(json_t *cfg, char *msg, size_t len)
{
    char *text = json_dumps(cfg, JSON_COMPACT);
    if (!text) {
        snprintf(msg, len, "out of memory encoding dataset.json");
        return CD_ERR;
    }
    cd_dataset_config_t c;
    cd_dataset_config_init(&c);
    int rc = cd_dataset_config_parse(text, &c, msg, len);
    cd_dataset_config_free(&c);
    free(text);
    return rc;
}

/* The job's config row: what the views and the scheduler read. */
static json_t *job_config(const gen_ext_t *ext, json_t *cfg)
{
    const char *val_keys[] = {"validation_feature_folder", "textfile_val", "val_image_folder"};
    int has_val = json_integer_value(json_object_get(cfg, "pct_val")) > 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(val_keys); i++)
        has_val = has_val || json_is_string(json_object_get(cfg, val_keys[i]));
    /* the stored size: the resize keys, else (detection) the resize or padding ones */
    static const char *const size_keys[][2] = {
        {"width", "height"}, {"resize_image_width", "resize_image_height"},
        {"padding_image_width", "padding_image_height"}};
    json_t *w = NULL, *h = NULL, *c = json_object_get(cfg, "channels");
    for (size_t i = 0; i < CD_ARRAY_LEN(size_keys) && !(w && h); i++)
        w = json_object_get(cfg, size_keys[i][0]), h = json_object_get(cfg, size_keys[i][1]);
    const char *conv = json_string_value(json_object_get(cfg, "channel_conversion"));
    json_t *conv_c = conv && !c ? json_integer(!strcmp(conv, "RGB") ? 3 : !strcmp(conv, "L") ? 1 : 0) : NULL;
    if (conv_c && json_integer_value(conv_c))
        c = conv_c;
    json_t *dims = w && h && c ? json_pack("[O,O,O]", h, w, c) : json_null();
    json_decref(conv_c);
    json_t *mode = json_object_get(cfg, "resize_mode");
    return json_pack("{s:s, s:s, s:s, s:o, s:O, s:O, s:b, s:b, s:{s:s}}", "extension_id", ext->id, "task", ext->task,
                     "method", "generic", "image_dims", dims, "resize_mode", mode ? mode : json_null(), "encoding",
                     json_object_get(cfg, "encoding"), "has_val", has_val, "has_test",
                     json_integer_value(json_object_get(cfg, "pct_test")) > 0, "resources", "kind", "dataset");
}

void generic_dataset_create_fields(req_t *r, const char *ext_id, const fields_t *in)
{
    server_t *srv = r->srv;
    const gen_ext_t *ext = ext_find(ext_id);
    if (!ext) {
        reply_error(r, 404, "Unknown extension '%s': the data extensions are %s", ext_id, generic_extension_list());
        return;
    }
    const gen_field_t *rows[GEN_MAX_ROWS];
    form_field_t spec[GEN_MAX_ROWS];
    size_t n = ext_rows(ext, rows);
    for (size_t i = 0; i < n; i++) {
        spec[i] = rows[i]->f;
        /* a method left out follows the list that was given */
        if (strcmp(spec[i].name, "method") == 0)
            spec[i].def = fields_get(in, "textfile_train") ? "textfile" : "folder";
    }
    json_t *v = NULL, *errors = NULL, *cfg = NULL, *conf = NULL, *form = NULL;
    char id[64] = "", dir[PATH_MAX] = "", msg[1024];
    cd_err_t err;
    if (!form_validate(srv, spec, n, in, &v, &errors)) {
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    cfg = dataset_json(ext, rows, n, v);
    if (!cfg) {
        reply_error(r, 500, "out of memory making dataset.json");
        goto out;
    }
    if (library_check(cfg, msg, sizeof msg) != CD_OK) {
        const char *field = field_of_message(rows, n, msg);
        if (!field) {
            reply_error(r, 400, "%s", msg);
            goto out;
        }
        form_add_error(errors, field, "%s", msg);
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    if (api_new_job_dir(srv, id, sizeof id, dir, sizeof dir, &err) != CD_OK) {
        reply_err(r, &err);
        goto out;
    }
    if (api_write_json(dir, jobdir_name(JOBDIR_DATASET_JSON), cfg, &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    form = fields_to_json(in);
    conf = job_config(ext, cfg);
    if (dataset_job_start(r, v, id, dir, form, conf) != CD_OK)
        goto fail;
    goto out;
fail:
    sched_remove_dir(dir, id);
out:
    json_decref(v);
    json_decref(errors);
    json_decref(cfg);
    json_decref(conf);
    json_decref(form);
}

void h_generic_dataset_create(req_t *r)
{
    const char *ext = r->params[0];
    if (!ext_find(ext)) {
        reply_error(r, 404, "Unknown extension '%s': the data extensions are %s", ext, generic_extension_list());
        return;
    }
    fields_t *cloned;
    if (api_clone_fields(r, r->fields, "dataset", &cloned) != CD_OK)
        return;
    generic_dataset_create_fields(r, ext, cloned ? cloned : r->fields);
    fields_free(cloned);
}

/* ---- models ------------------------------------------------------------------------ */

/* Which kind of model a route makes: 1 generic, 0 classification, -1 the dataset's. */
static int route_kind(const req_t *r)
{
    static const struct {
        const char *prefix;
        int kind;
    } kinds[] = {{"/models/images/generic", 1}, {"/models/images/classification", 0}};
    const char *pattern = r->route ? r->route->pattern : "";
    for (size_t i = 0; i < CD_ARRAY_LEN(kinds); i++)
        if (strncmp(pattern, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
            return kinds[i].kind;
    return -1;
}

int generic_model_dataset_fits(const req_t *r, json_t *dataset, json_t *errors)
{
    int want = route_kind(r);
    const char *ext = generic_job_extension(dataset), *id = sval(dataset, "id");
    if (want == 1 && !ext) {
        form_add_error(errors, "dataset",
                       "Dataset \"%s\" is an image classification dataset; a generic model needs a generic dataset "
                       "(POST /datasets/generic/create/<extension>: %s), or create this model with POST "
                       "/models/images/classification",
                       id, generic_extension_list());
        return 0;
    }
    if (want == 0 && ext) {
        form_add_error(errors, "dataset",
                       "Dataset \"%s\" is a generic dataset (%s); create its model with POST /models/images/generic",
                       id, ext);
        return 0;
    }
    return 1;
}

/* ---- the JSON of a generic dataset --------------------------------------------------- */

void generic_dataset_detail(server_t *srv, json_t *job, json_t *d)
{
    (void)srv;
    json_t *cfg = json_object_get(job, "config"), *res = json_object_get(job, "result");
    json_t *splits = json_object_get(res, "splits");
    const char *dir = sval(job, "dir");
    int done = json_integer_value(json_object_get(job, "state")) == CD_ST_DONE;
    json_object_set(d, "extension_id", json_object_get(cfg, "extension_id"));
    json_object_set(d, "task", json_object_get(cfg, "task"));
    json_t *tasks = json_array(), *dims = json_null(), *label_shape = json_null();
    int planned[CD_SPLIT_COUNT] = {1, json_is_true(json_object_get(cfg, "has_val")),
                                   json_is_true(json_object_get(cfg, "has_test"))};
    for (int s = 0; s < CD_SPLIT_COUNT; s++) {
        json_t *count = json_object_get(splits, cd_split_name(s));
        if (res ? json_integer_value(count) <= 0 : !planned[s])
            continue;
        char name[48], stage[32];
        snprintf(name, sizeof name, "Create DB (%s)", cd_split_name(s));
        snprintf(stage, sizeof stage, "%s_db", cd_split_name(s)); /* DIGITS's constants.TRAIN_DB, ... */
        json_array_append_new(tasks, json_pack("{s:s, s:s, s:O, s:s, s:s}", "name", name, "stage", stage,
                                               "entry_count", count ? count : json_null(), "feature_db_path",
                                               jobdir_name(JOBDIR_TRAIN_DB + s), "label_db_path",
                                               jobdir_name(JOBDIR_TRAIN_LABELS_DB + s)));
    }
    char why[512];
    cd_db_t *db = done ? dataset_own_db(dir, JOBDIR_TRAIN_DB, NULL, why, sizeof why) : NULL;
    if (db) /* DIGITS's feature_dims: the train features' shape as [h, w, c] */
        dims = json_pack("[i,i,i]", cd_db_height(db), cd_db_width(db), cd_db_channels(db));
    cd_db_close(db);
    db = done ? dataset_own_db(dir, JOBDIR_TRAIN_LABELS_DB, NULL, why, sizeof why) : NULL;
    if (db)
        label_shape = json_pack("[i,i,i]", cd_db_channels(db), cd_db_height(db), cd_db_width(db));
    cd_db_close(db);
    if (json_is_null(dims) && json_array_size(json_object_get(cfg, "image_dims")) == 3)
        dims = json_deep_copy(json_object_get(cfg, "image_dims"));
    json_object_set_new(d, "create_db_tasks", tasks);
    json_object_set_new(d, "feature_dims", dims);
    json_object_set_new(d, "label_shape", label_shape);
    char palette[PATH_MAX];
    jobdir_path(dir, JOBDIR_PALETTE, palette, sizeof palette);
    json_object_set_new(d, "palette_file", access(palette, R_OK) == 0 ? json_string(jobdir_name(JOBDIR_PALETTE)) : json_null());
}

/* ---- label records -------------------------------------------------------------------- */

/* The colours of a segmentation dataset: palette.txt, or the default palette when the
 * dataset has none. CD_ERR with why when palette.txt is there but unreadable. */
static int load_palette(const char *dir, uint8_t (*rgb)[3], int *count, char *why, size_t len)
{
    char path[PATH_MAX];
    jobdir_path(dir, JOBDIR_PALETTE, path, sizeof path);
    if (access(path, F_OK) != 0) {
        cd_palette_default(rgb, CD_PALETTE_MAX);
        *count = CD_PALETTE_MAX;
        return CD_OK;
    }
    if (cd_palette_load(path, rgb, CD_PALETTE_MAX, count) != CD_OK) {
        snprintf(why, len, "%s", cd_dataset_strerror());
        return CD_ERR;
    }
    return CD_OK;
}

/* A label image (1 x h x w class indices) as an RGB image through the palette; class
 * numbers without a colour (255: ignore) are Pascal VOC's void colour. */
static int colour_labels(const uint8_t *idx, int h, int w, const uint8_t (*rgb)[3], int count, cd_image_t *out,
                         char *err, size_t errlen)
{
    static const uint8_t void_rgb[3] = {224, 224, 192};
    if (cd_image_alloc(out, 3, h, w, err, errlen) != CD_OK)
        return CD_ERR;
    size_t plane = (size_t)h * (size_t)w;
    for (size_t p = 0; p < plane; p++) {
        const uint8_t *c = idx[p] < count ? rgb[idx[p]] : void_rgb;
        for (int ch = 0; ch < 3; ch++)
            out->data[(size_t)ch * plane + p] = c[ch];
    }
    return CD_OK;
}

/* GET /datasets/<id>/labels/<split>/<index>: the label of record <index>: a PNG for a
 * label image (coloured through palette.txt; ?raw=1: the class indices as gray levels),
 * {"index", "shape": [c,h,w], "values": [...]} for float targets. */
void h_generic_label(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    cd_db_t *db = NULL;
    uint8_t *idx = NULL, *png = NULL;
    float *vals = NULL;
    cd_image_t img = {0};
    char why[512] = "";
    int split, missing = 0;
    size_t i;
    if (!generic_job_extension(job) || strcmp(sval(job, "type"), "dataset") != 0) {
        reply_error(r, 404, "Job %s is not a generic dataset: only those have label records (an image "
                    "classification dataset's labels are its classes: /datasets/%s/explore/json)",
                    r->params[0], r->params[0]);
        goto out;
    }
    if ((split = dataset_split_param(r, r->params[1])) < 0)
        goto out;
    db = dataset_own_db(sval(job, "dir"), JOBDIR_TRAIN_LABELS_DB + split, &missing, why, sizeof why);
    if (!db && missing) {
        reply_error(r, 404, "Dataset %s has no %s labels (%s); its %s split is empty or the dataset is not done",
                    r->params[0], r->params[1], why, r->params[1]);
        goto out;
    }
    if (!db) { /* why names the file, what is wrong with it and what to do */
        reply_error(r, 500, "%s", why);
        goto out;
    }
    if (dataset_record_param(r, db, "labels", &i) != CD_OK)
        goto out;
    int c = cd_db_channels(db), h = cd_db_height(db), w = cd_db_width(db);
    size_t nval = (size_t)c * (size_t)h * (size_t)w;
    if (cd_db_encoding(db) == CD_ENC_F32) {
        vals = malloc(nval * sizeof *vals);
        if (!vals || cd_db_read_f32(db, i, vals, why, sizeof why) != CD_OK) {
            reply_error(r, 500, "cannot read label %zu of the %s split of dataset %s: %s", i, r->params[1],
                        r->params[0], vals ? why : "out of memory");
            goto out;
        }
        json_t *list = json_array();
        for (size_t k = 0; k < nval; k++)
            json_array_append_new(list, json_real(vals[k]));
        reply_json(r, 200, json_pack("{s:s, s:I, s:[i,i,i], s:o}", "split", r->params[1], "index", (json_int_t)i,
                                     "shape", c, h, w, "values", list));
        goto out;
    }
    idx = malloc(nval);
    if (!idx || cd_db_read(db, i, idx, why, sizeof why) != CD_OK) {
        reply_error(r, 500, "cannot read label %zu of the %s split of dataset %s: %s", i, r->params[1], r->params[0],
                    idx ? why : "out of memory");
        goto out;
    }
    uint8_t rgb[CD_PALETTE_MAX][3];
    int ncolours = 0;
    if (field_truthy(fields_get(r->fields, "raw")) || c != 1) {
        img = (cd_image_t){.c = c, .h = h, .w = w, .data = idx};
        idx = NULL; /* img owns it now */
    } else if (load_palette(sval(job, "dir"), rgb, &ncolours, why, sizeof why) != CD_OK ||
               colour_labels(idx, h, w, (const uint8_t(*)[3])rgb, ncolours, &img, why, sizeof why) != CD_OK) {
        reply_error(r, 500, "cannot colour label %zu of dataset %s: %s", i, r->params[0], why);
        goto out;
    }
    size_t len = 0;
    if (cd_image_encode_png(&img, 1, &png, &len, why, sizeof why) != CD_OK) {
        reply_error(r, 500, "cannot encode label %zu of dataset %s as PNG: %s", i, r->params[0], why);
        goto out;
    }
    reply_buffer(r, 200, png, len, "image/png", "private, max-age=86400");
    png = NULL;
out:
    cd_image_free(&img);
    free(idx);
    free(vals);
    free(png);
    cd_db_close(db);
    json_decref(job);
}
