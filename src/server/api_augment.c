/* The model form's augmentation preview (api_augment.h): a few of the dataset's
 * training images through the worker's own augmentation code (cd_core's augment.c),
 * with the settings the form holds, checked against the same rows of the training
 * settings' table (train_keys.c) the model form and the worker use. */
#include "internal.h"
#include "api_augment.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_datasets.h"
#include "api_generic.h"
#include "cdigits/augment.h"
#include "cdigits/base64.h"
#include "cdigits/image.h"
#include "cdigits/train_keys.h"

/* The form's fields and where each goes in cd_aug_config: an int (a choice, a
 * checkbox) or a double. */
static const struct {
    const char *field;
    size_t off;
    int is_int;
} g_aug_fields[] = {
    {"aug_quad_rot", offsetof(cd_aug_config, quad_rot), 1},
    {"aug_rot", offsetof(cd_aug_config, rot), 0},
    {"aug_scale", offsetof(cd_aug_config, scale), 0},
    {"aug_noise", offsetof(cd_aug_config, noise), 0},
    {"aug_contrast", offsetof(cd_aug_config, contrast), 0},
    {"aug_whitening", offsetof(cd_aug_config, whitening), 1},
    {"aug_hsv_use", offsetof(cd_aug_config, hsv_use), 1},
    {"aug_hsv_h", offsetof(cd_aug_config, hsv_h), 0},
    {"aug_hsv_s", offsetof(cd_aug_config, hsv_s), 0},
    {"aug_hsv_v", offsetof(cd_aug_config, hsv_v), 0},
};

/* The value of one field by its row: the row's default when absent or empty, a form
 * error (naming the field, what it takes and what came) when it is not one. */
static double field_value(const fields_t *f, const cd_train_key *k, json_t *errors)
{
    const char *v = fields_get(f, k->field);
    const char *text = v && *v ? v : k->def;
    char want[320];
    if (k->type == CD_TK_BOOL)
        return v && *v ? field_truthy(v) : !strcmp(k->def, "true");
    if (k->type == CD_TK_ENUM) {
        int i = cd_train_key_choice(k, text);
        if (i < 0)
            form_add_error(errors, k->field, "%s must be %s; got \"%s\"", k->label, cd_train_key_want(k, want, sizeof want),
                           text);
        return i < 0 ? 0 : i;
    }
    char *end;
    double d = strtod(text, &end);
    int whole = k->type != CD_TK_INT || d == floor(d);
    if (end == text || *end || !isfinite(d) || !whole || d < k->lo || d > k->hi) {
        form_add_error(errors, k->field, "%s must be %s; got \"%s\"", k->label, cd_train_key_want(k, want, sizeof want),
                       text);
        return 0;
    }
    return d;
}

/* A whole number field within lo..hi, def when absent; CD_ERR after a form error. */
static int int_field(const fields_t *f, const char *name, long long lo, long long hi, long long def, long long *out,
                     json_t *errors)
{
    const char *v = fields_get(f, name);
    *out = def;
    if (!v || !*v)
        return CD_OK;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (*end || n < lo || n > hi) {
        form_add_error(errors, name, "%s must be a whole number from %lld to %lld; got \"%s\"", name, lo, hi, v);
        return CD_ERR;
    }
    *out = n;
    return CD_OK;
}

/* (c, h, w) uint8 as a base64 PNG, or NULL with err. */
static char *png_b64(const uint8_t *chw, int c, int h, int w, char *err, size_t errlen)
{
    cd_image_t img = {.c = c, .h = h, .w = w, .data = (uint8_t *)chw};
    uint8_t *png = NULL;
    size_t len = 0;
    if (cd_image_encode_png(&img, 1, &png, &len, err, errlen) != CD_OK)
        return NULL;
    char *b64 = cd_base64_encode(png, len);
    free(png);
    if (!b64)
        snprintf(err, errlen, "out of memory encoding a %dx%dx%d preview", c, h, w);
    return b64;
}

/* A whitened image cannot be shown as it is (its values are around 0): it is drawn as
 * 128 + 48 * z, clamped, so one standard deviation is 48 levels. scratch: c*h*w floats. */
static void whiten_for_view(size_t n, uint8_t *img, float *scratch)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = img[i];
    cd_aug_whiten_f32(n, scratch);
    for (size_t i = 0; i < n; i++)
        img[i] = cd_aug_to_u8(128.0f + 48.0f * scratch[i]);
}

static json_t *params_json(const cd_aug_params *p)
{
    return json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "quarter_turns", (int)p->quarter,
                     "angle", (double)p->angle, "scale", (double)p->scale, "move_x", (double)p->move_x, "move_y",
                     (double)p->move_y, "contrast", (double)p->contrast, "hue", (double)p->hue, "saturation",
                     (double)p->sat, "value", (double)p->val, "noise", (double)p->noise, "whiten", p->whiten != 0);
}

void h_augment_preview(req_t *r)
{
    const fields_t *f = r->fields;
    json_t *errors = json_object();
    cd_aug_config cfg;
    memset(&cfg, 0, sizeof cfg);
    for (size_t i = 0; i < CD_ARRAY_LEN(g_aug_fields); i++) {
        const cd_train_key *k = cd_train_key_by_field(g_aug_fields[i].field);
        if (!k) { /* every field has its row (test_train_keys checks DIGITS's list) */
            form_add_error(errors, g_aug_fields[i].field, "%s has no row in the training settings",
                           g_aug_fields[i].field);
            continue;
        }
        double v = field_value(f, k, errors);
        char *at = (char *)&cfg + g_aug_fields[i].off;
        if (g_aug_fields[i].is_int)
            *(int *)at = (int)v;
        else
            *(double *)at = v;
    }
    long long count, seed;
    int_field(f, "count", 1, AUGMENT_PREVIEW_MAX, 6, &count, errors);
    int_field(f, "random_seed", 0, 4294967295LL, 1, &seed, errors);
    const char *id = fields_get(f, "dataset");
    if (!id || !*id)
        form_add_error(errors, "dataset", "Dataset is required: give the id of a dataset job");
    if (json_object_size(errors) > 0) {
        reply_form_errors(r, errors);
        return;
    }
    json_decref(errors);

    json_t *job = api_job_of_type(r, id, "dataset", reply_error), *out = NULL, *images = NULL;
    cd_db_t *db = NULL;
    uint8_t *src = NULL, *dst = NULL;
    float *scratch = NULL;
    char *b_src = NULL, *b_dst = NULL;
    if (!job)
        return;
    db = dataset_split_open(r, job, CD_SPLIT_TRAIN);
    if (!db)
        goto out;
    size_t total = cd_db_count(db);
    int c = cd_db_channels(db), h = cd_db_height(db), w = cd_db_width(db);
    if (total == 0 || cd_db_encoding(db) >= CD_ENC_IMAGE_COUNT || c < 1 || c > CD_AUG_MAX_CHANNELS) {
        reply_error(r, 400, "Dataset %s has no training images to preview (%zu records of %d channels); the "
                    "augmentations take uint8 images of 1 to %d channels", id, total, c, CD_AUG_MAX_CHANNELS);
        goto out;
    }
    size_t len = (size_t)c * h * w;
    src = malloc(len);
    dst = malloc(len);
    scratch = cfg.whitening ? malloc(len * sizeof(float)) : NULL;
    images = json_array();
    out = json_pack("{s:s, s:I}", "dataset", id, "seed", (json_int_t)seed);
    if (!src || !dst || (cfg.whitening && !scratch) || !images || !out) {
        reply_error(r, 500, "out of memory previewing %lld images of %dx%dx%d", count, c, h, w);
        goto out;
    }
    json_t *classes = json_object_get(json_object_get(job, "result"), "classes");
    int generic = generic_job_extension(job) != NULL;
    size_t n = (size_t)count < total ? (size_t)count : total;
    for (size_t k = 0; k < n; k++) {
        size_t idx = k * total / n; /* spread over the split */
        char err[512] = "";
        if (cd_db_read(db, idx, src, err, sizeof err) != CD_OK) {
            reply_error(r, 500, "cannot read training record %zu of dataset %s: %s", idx, id, err);
            goto out;
        }
        cd_aug_params p;
        cd_aug_draw(&cfg, (uint64_t)seed, k, &p);
        cd_aug_apply_u8(&p, c, h, w, src, dst);
        if (p.whiten)
            whiten_for_view(len, dst, scratch);
        b_src = png_b64(src, c, h, w, err, sizeof err);
        b_dst = b_src ? png_b64(dst, c, h, w, err, sizeof err) : NULL;
        if (!b_dst) {
            reply_error(r, 500, "cannot encode the preview of record %zu: %s", idx, err);
            goto out;
        }
        json_t *one = json_pack("{s:I, s:s, s:s, s:o}", "index", (json_int_t)idx, "original", b_src, "augmented",
                                b_dst, "params", params_json(&p));
        if (!generic) { /* a generic dataset's images have no class of their own */
            int lab = cd_db_label(db, idx);
            const char *name = json_string_value(json_object_get(json_array_get(classes, (size_t)lab), "label"));
            json_object_set_new(one, "class", json_integer(lab));
            if (name)
                json_object_set_new(one, "label", json_string(name));
        }
        json_array_append_new(images, one);
        free(b_src);
        free(b_dst);
        b_src = b_dst = NULL;
    }
    json_object_set_new(out, "images", images);
    images = NULL;
    reply_json(r, 200, out);
    out = NULL;
out:
    free(b_src);
    free(b_dst);
    free(src);
    free(dst);
    free(scratch);
    json_decref(images);
    json_decref(out);
    cd_db_close(db);
    json_decref(job);
}
