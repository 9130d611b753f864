/* dataset.json (docs/worker-protocol.md): one table of keys with their type, range and
 * default; unknown keys are ignored, null means the default, a bad value is an error
 * that names the key and what it may be. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

enum key_kind { K_STRING, K_INT, K_PCT, K_SEED, K_NAME };

typedef struct key_def {
    const char *name;
    int kind;
    size_t offset;    /* of the field in cd_dataset_config_t */
    double lo, hi;     /* K_INT, K_PCT: allowed range */
    int step;          /* K_INT: allowed values are lo, lo + step, ... (0: 1) */
    double def;        /* the value when the key is absent or null (K_STRING: "") */
    const char *allowed; /* what the value may be, for messages */
    int (*parse)(const char *name); /* K_NAME: the name's number, -1 if unknown */
} key_def;

static int channel_conversion_parse(const char *name)
{
    static const struct { const char *name; int channels; } t[] = {{"RGB", 3}, {"L", 1}, {"none", 0}};
    for (size_t i = 0; i < CD_ARRAY_LEN(t); i++)
        if (!strcmp(name, t[i].name))
            return t[i].channels;
    return -1;
}

static int colormap_parse(const char *name)
{
    return !strcmp(name, "label") ? CD_COLORMAP_LABEL : !strcmp(name, "textfile") ? CD_COLORMAP_TEXTFILE : -1;
}

#define F(field) offsetof(cd_dataset_config_t, field)
static const key_def g_keys[] = {
    {"task", K_NAME, F(task), 0, 0, 0, CD_TASK_CLASSIFICATION,
     "one of classification, segmentation, regression, pairs, detection", cd_dataset_task_parse},
    {"folder_train", K_STRING, F(folder_train), 0, 0, 0, 0, "a folder of class folders", NULL},
    {"folder_val", K_STRING, F(folder_val), 0, 0, 0, 0, "a folder of class folders", NULL},
    {"folder_test", K_STRING, F(folder_test), 0, 0, 0, 0, "a folder of class folders", NULL},
    {"textfile_train", K_STRING, F(textfile_train), 0, 0, 0, 0, "a file of `path label` lines", NULL},
    {"textfile_val", K_STRING, F(textfile_val), 0, 0, 0, 0, "a file of `path label` lines", NULL},
    {"textfile_test", K_STRING, F(textfile_test), 0, 0, 0, 0, "a file of `path label` lines", NULL},
    {"textfile_labels", K_STRING, F(textfile_labels), 0, 0, 0, 0, "a file of class names", NULL},
    {"textfile_root", K_STRING, F(textfile_root), 0, 0, 0, 0, "a folder", NULL},
    {"textfile_val_root", K_STRING, F(textfile_val_root), 0, 0, 0, 0, "a folder", NULL},
    {"textfile_test_root", K_STRING, F(textfile_test_root), 0, 0, 0, 0, "a folder", NULL},
    {"pct_val", K_PCT, F(pct_val), 0, 100, 0, 25, "a percentage from 0 to 100", NULL},
    {"pct_test", K_PCT, F(pct_test), 0, 100, 0, 0, "a percentage from 0 to 100", NULL},
    {"min_per_class", K_INT, F(min_per_class), 1, 1e9, 1, 2, "a whole number >= 1", NULL},
    {"max_per_class", K_INT, F(max_per_class), 0, 1e9, 1, 0, "a whole number >= 0 (0: no limit)", NULL},
    {"val_min_per_class", K_INT, F(val_min_per_class), 1, 1e9, 1, 2, "a whole number >= 1", NULL},
    {"val_max_per_class", K_INT, F(val_max_per_class), 0, 1e9, 1, 0, "a whole number >= 0 (0: no limit)", NULL},
    {"test_min_per_class", K_INT, F(test_min_per_class), 1, 1e9, 1, 2, "a whole number >= 1", NULL},
    {"test_max_per_class", K_INT, F(test_max_per_class), 0, 1e9, 1, 0, "a whole number >= 0 (0: no limit)", NULL},
    {"channels", K_INT, F(channels), 1, 3, 2, 3, "1 (grayscale) or 3 (color)", NULL},
    {"width", K_INT, F(width), 1, 8192, 1, 256, "a whole number from 1 to 8192", NULL},
    {"height", K_INT, F(height), 1, 8192, 1, 256, "a whole number from 1 to 8192", NULL},
    {"resize_mode", K_NAME, F(resize_mode), 0, 0, 0, CD_RESIZE_SQUASH, "one of squash, crop, fill, half_crop",
     cd_resize_mode_parse},
    {"encoding", K_NAME, F(encoding), 0, 0, 0, CD_ENC_NONE, "one of none, png, jpg", cd_encoding_parse},
    {"seed", K_SEED, F(seed), 0, 0, 0, 0, "a whole number >= 0", NULL},
    {"threads", K_INT, F(threads), 0, 1024, 1, 0, "a whole number from 0 (one per CPU) to 1024", NULL},
    {"feature_folder", K_STRING, F(feature_folder), 0, 0, 0, 0, "a folder of images", NULL},
    {"label_folder", K_STRING, F(label_folder), 0, 0, 0, 0, "a folder of label images", NULL},
    {"validation_feature_folder", K_STRING, F(validation_feature_folder), 0, 0, 0, 0, "a folder of images", NULL},
    {"validation_label_folder", K_STRING, F(validation_label_folder), 0, 0, 0, 0, "a folder of label images", NULL},
    {"channel_conversion", K_NAME, F(channel_conversion), 0, 0, 0, 3, "one of RGB, L, none",
     channel_conversion_parse},
    {"class_labels_file", K_STRING, F(class_labels_file), 0, 0, 0, 0, "a file of class names", NULL},
    {"colormap_method", K_NAME, F(colormap_method), 0, 0, 0, CD_COLORMAP_LABEL, "one of label, textfile",
     colormap_parse},
    {"colormap_text_file", K_STRING, F(colormap_text_file), 0, 0, 0, 0, "a file of `r g b` lines", NULL},
    {"force_same_shape", K_INT, F(force_same_shape), 0, 1, 1, 1, "0 or 1", NULL},
    {"targets_csv", K_STRING, F(targets_csv), 0, 0, 0, 0, "a CSV file of `file,v1,...,vK` lines", NULL},
    {"pairs_train", K_INT, F(pairs_train), 1, 1e8, 1, 1000, "a whole number from 1 to 100000000", NULL},
    {"pairs_val", K_INT, F(pairs_val), 0, 1e8, 1, 1000, "a whole number from 0 to 100000000", NULL},
    {"train_image_folder", K_STRING, F(train_image_folder), 0, 0, 0, 0, "a folder of images", NULL},
    {"train_label_folder", K_STRING, F(train_label_folder), 0, 0, 0, 0, "a folder of KITTI label files", NULL},
    {"val_image_folder", K_STRING, F(val_image_folder), 0, 0, 0, 0, "a folder of images", NULL},
    {"val_label_folder", K_STRING, F(val_label_folder), 0, 0, 0, 0, "a folder of KITTI label files", NULL},
    {"padding_image_width", K_INT, F(padding_image_width), 0, 8192, 1, 0, "a whole number from 0 (none) to 8192",
     NULL},
    {"padding_image_height", K_INT, F(padding_image_height), 0, 8192, 1, 0, "a whole number from 0 (none) to 8192",
     NULL},
    {"resize_image_width", K_INT, F(resize_image_width), 0, 8192, 1, 0, "a whole number from 0 (none) to 8192",
     NULL},
    {"resize_image_height", K_INT, F(resize_image_height), 0, 8192, 1, 0, "a whole number from 0 (none) to 8192",
     NULL},
    {"val_min_box_size", K_INT, F(val_min_box_size), 0, 1e6, 1, 25, "a whole number of pixels >= 0 (0: none)", NULL},
    {"custom_classes", K_STRING, F(custom_classes), 0, 0, 0, 0, "a comma-separated list of class names", NULL},
};
#undef F

void cd_dataset_config_init(cd_dataset_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < CD_ARRAY_LEN(g_keys); i++) {
        const key_def *k = &g_keys[i];
        void *field = (char *)cfg + k->offset;
        switch (k->kind) {
        case K_STRING: *(char **)field = cd_xstrdup(""); break;
        case K_PCT: *(double *)field = k->def; break;
        case K_SEED: *(uint64_t *)field = (uint64_t)k->def; break;
        default: *(int *)field = (int)k->def; break; /* K_INT, K_NAME */
        }
    }
}

void cd_dataset_config_free(cd_dataset_config_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_keys); i++)
        if (g_keys[i].kind == K_STRING) {
            char **p = (char **)((char *)cfg + g_keys[i].offset);
            free(*p);
            *p = NULL;
        }
}

/* A number from a JSON number or a numeric string (form fields arrive as strings). */
static int get_number(json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return CD_OK;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        *out = strtod(s, &end);
        while (*end == ' ')
            end++;
        return end != s && !*end && !errno ? CD_OK : CD_ERR;
    }
    return CD_ERR;
}

static int set_key(const key_def *k, json_t *v, cd_dataset_config_t *cfg, char *err,
                   size_t errlen)
{
    void *field = (char *)cfg + k->offset;
    double d = 0;
    int ok = 0, e = -1;
    switch (k->kind) {
    case K_STRING:
        if ((ok = json_is_string(v)) != 0) {
            free(*(char **)field);
            *(char **)field = cd_xstrdup(json_string_value(v));
        }
        break;
    case K_INT:
        ok = get_number(v, &d) == CD_OK && d == floor(d) && d >= k->lo && d <= k->hi &&
             fmod(d - k->lo, k->step) == 0;
        if (ok)
            *(int *)field = (int)d;
        break;
    case K_PCT:
        ok = get_number(v, &d) == CD_OK && d >= k->lo && d <= k->hi;
        if (ok)
            *(double *)field = d;
        break;
    case K_SEED:
        ok = get_number(v, &d) == CD_OK && d == floor(d) && d >= 0 && d <= 9007199254740992.0;
        if (ok)
            *(uint64_t *)field = (uint64_t)d;
        break;
    case K_NAME:
        if (json_is_string(v))
            e = k->parse(json_string_value(v));
        if ((ok = e >= 0) != 0)
            *(int *)field = e;
        break;
    }
    if (!ok) {
        char *given = json_dumps(v, JSON_ENCODE_ANY);
        ds_err(err, errlen, "dataset.json: %s is %.60s; it must be %s", k->name,
               given ? given : "?", k->allowed);
        free(given);
        return CD_ERR;
    }
    return CD_OK;
}

/* Rules between keys, checked once every key is read: one function per task. */
static int check_classification(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    int folders = c->folder_train[0] != 0, texts = c->textfile_train[0] != 0;
    if (folders == texts)
        return ds_err(err, errlen, "dataset.json: set %s folder_train (a folder of class "
                      "folders) or textfile_train (a file of `path label` lines)",
                      folders ? "only one of" : "either");
    if (texts && !c->textfile_labels[0])
        return ds_err(err, errlen, "dataset.json: textfile_train needs textfile_labels (a file "
                      "with one class name per line)");
    if (c->pct_val + c->pct_test >= 100)
        return ds_err(err, errlen, "dataset.json: pct_val + pct_test is %g; it must be below "
                      "100 so that images are left for training", c->pct_val + c->pct_test);
    static const struct {
        const char *prefix;
        size_t min, max;
    } limits[] = {
        {"", offsetof(cd_dataset_config_t, min_per_class), offsetof(cd_dataset_config_t, max_per_class)},
        {"val_", offsetof(cd_dataset_config_t, val_min_per_class),
         offsetof(cd_dataset_config_t, val_max_per_class)},
        {"test_", offsetof(cd_dataset_config_t, test_min_per_class),
         offsetof(cd_dataset_config_t, test_max_per_class)},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(limits); i++) {
        int lo = *(const int *)((const char *)c + limits[i].min);
        int hi = *(const int *)((const char *)c + limits[i].max);
        if (hi > 0 && hi < lo)
            return ds_err(err, errlen, "dataset.json: %smax_per_class (%d) is below "
                          "%smin_per_class (%d); raise it, or set 0 for no limit",
                          limits[i].prefix, hi, limits[i].prefix, lo);
    }
    return CD_OK;
}

static int check_segmentation(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    if (!c->feature_folder[0] || !c->label_folder[0])
        return ds_err(err, errlen, "dataset.json: a segmentation dataset needs feature_folder (the "
                      "images) and label_folder (label images with the same base names)");
    if (!c->validation_feature_folder[0] != !c->validation_label_folder[0])
        return ds_err(err, errlen, "dataset.json: give both validation_feature_folder and "
                      "validation_label_folder, or neither (then pct_val of the images validate)");
    if (c->colormap_method == CD_COLORMAP_TEXTFILE && !c->colormap_text_file[0])
        return ds_err(err, errlen, "dataset.json: colormap_method textfile needs colormap_text_file "
                      "(one `r g b` line per class)");
    if (c->pct_val >= 100)
        return ds_err(err, errlen, "dataset.json: pct_val is %g; it must be below 100", c->pct_val);
    return CD_OK;
}

static int check_regression(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    int folders = c->folder_train[0] != 0, texts = c->textfile_train[0] != 0;
    if (folders == texts)
        return ds_err(err, errlen, "dataset.json: a regression dataset needs %s textfile_train (lines "
                      "of `path v1 ... vK`) or folder_train with targets_csv", folders ? "only one of" : "either");
    if (folders && !c->targets_csv[0])
        return ds_err(err, errlen, "dataset.json: folder_train needs targets_csv (lines of "
                      "`file,v1,...,vK`) in a regression dataset");
    if (c->pct_val + c->pct_test >= 100)
        return ds_err(err, errlen, "dataset.json: pct_val + pct_test is %g; it must be below "
                      "100 so that images are left for training", c->pct_val + c->pct_test);
    return CD_OK;
}

static int check_pairs(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    return check_classification(c, err, errlen);
}

/* Both keys of a pair (a size, a pair of folders) given, or neither. */
static int both_or_neither(int a, int b, const char *ka, const char *kb, const char *what, char *err,
                           size_t errlen)
{
    if (!a == !b)
        return CD_OK;
    return ds_err(err, errlen, "dataset.json: %s is set but %s is not; give both (%s) or neither", a ? ka : kb,
                  a ? kb : ka, what);
}

static int check_detection(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    if (!c->train_image_folder[0] || !c->train_label_folder[0])
        return ds_err(err, errlen, "dataset.json: a detection dataset needs train_image_folder (the images) "
                      "and train_label_folder (a KITTI IDENTIFIER.txt per image IDENTIFIER.png)");
    if (both_or_neither(c->val_image_folder[0], c->val_label_folder[0], "val_image_folder", "val_label_folder",
                        "the validation images and their labels", err, errlen) != CD_OK ||
        both_or_neither(c->padding_image_width, c->padding_image_height, "padding_image_width",
                        "padding_image_height", "the padded size", err, errlen) != CD_OK ||
        both_or_neither(c->resize_image_width, c->resize_image_height, "resize_image_width",
                        "resize_image_height", "the size after padding", err, errlen) != CD_OK)
        return CD_ERR;
    return ds_detection_check_classes(c->custom_classes, err, errlen);
}

static int check_config(const cd_dataset_config_t *c, char *err, size_t errlen)
{
    static int (*const checks[CD_TASK_COUNT])(const cd_dataset_config_t *, char *, size_t) = {
        [CD_TASK_CLASSIFICATION] = check_classification, [CD_TASK_SEGMENTATION] = check_segmentation,
        [CD_TASK_REGRESSION] = check_regression, [CD_TASK_PAIRS] = check_pairs,
        [CD_TASK_DETECTION] = check_detection,
    };
    return checks[c->task](c, err, errlen);
}

int cd_dataset_config_parse(const char *text, cd_dataset_config_t *cfg, char *err,
                            size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root)
        return ds_err(err, errlen, "dataset.json: line %d: %s; fix the JSON", je.line, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return ds_err(err, errlen, "dataset.json: expected a JSON object");
    }
    int rc = CD_OK;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_keys) && rc == CD_OK; i++) {
        json_t *v = json_object_get(root, g_keys[i].name);
        if (v && !json_is_null(v))
            rc = set_key(&g_keys[i], v, cfg, err, errlen);
    }
    json_decref(root);
    return rc == CD_OK ? check_config(cfg, err, errlen) : rc;
}

int cd_dataset_config_load(const char *path, cd_dataset_config_t *cfg, char *err,
                           size_t errlen)
{
    char *text = cd_read_file(path, NULL);
    if (!text)
        return ds_err(err, errlen, "cannot read %s: %s; write the task's config there first",
                      path, strerror(errno));
    char why[1024];
    int rc = cd_dataset_config_parse(text, cfg, why, sizeof why);
    free(text);
    if (rc != CD_OK)
        return ds_err(err, errlen, "%s", why);
    return CD_OK;
}
