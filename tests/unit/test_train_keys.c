/* The table of training settings (src/core/train_keys.c) against the worker's reading
 * of train.json (src/engine/train_config.c): every row is read (a value of the wrong
 * type is refused naming its key), its bounds are the ones enforced (both ends
 * accepted, one past either refused with a message naming the key and the bounds), its
 * default is the worker's own (writing it out changes nothing), and its choices are the
 * worker's values, against a reference written out here. The model form's side is in
 * test_server_model_form.c. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/train.h"
#include "cdigits/train_keys.h"
#include "cdigits/util.h"
#include "testutil.h"

/* {"dataset_dir": "d"}: the least train.json the worker takes */
static json_t *base_json(void) { return json_pack("{s:s}", "dataset_dir", "d"); }

/* Sets k's member in root ("gamma" inside "lr_policy" for lr_policy.gamma); steals v. */
static void set_key(json_t *root, const cd_train_key *k, json_t *v)
{
    json_t *obj = root;
    const char *dot = strchr(k->key, '.');
    if (dot) {
        char parent[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(dot - k->key), k->key);
        obj = json_object_get(root, parent);
        if (!obj) {
            obj = json_object();
            json_object_set_new(root, parent, obj);
        }
    }
    json_object_set_new(obj, cd_train_key_member(k), v);
}

/* Writes root as JOBDIR/train.json (and decrefs it) and loads it over the defaults. */
static int load(json_t *root, cd_train_config *c, char *err, size_t errlen)
{
    char *text = json_dumps(root, 0);
    json_decref(root);
    int rc = text && cd_test_write("train.json", text) == CD_OK ? CD_OK : CD_ERR;
    free(text);
    cd_train_config_init(c);
    if (rc == CD_OK)
        rc = cd_train_config_load(c, cd_test_tmpdir(), err, errlen);
    return rc;
}

/* A number as the row's JSON: an integer when whole (gpus takes nothing else), a list
 * of one for a list. */
static json_t *value_json(const cd_train_key *k, double v)
{
    json_t *x = v == floor(v) && fabs(v) < 1e15 ? json_integer((json_int_t)v) : json_real(v);
    return k->type == CD_TK_LIST ? json_pack("[o]", x) : x;
}

/* The default of a row as the JSON train.json would hold. */
static json_t *default_json(const cd_train_key *k)
{
    if (k->type == CD_TK_BOOL)
        return json_boolean(!strcmp(k->def, "true"));
    if (k->type == CD_TK_NUMBER || k->type == CD_TK_INT)
        return json_real(atof(k->def));
    return json_string(k->def); /* choices, and a list as "50,85" */
}

static int same_bound(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void test_rows(void)
{
    CHECK(cd_train_key_count() > 40 && cd_train_key_at(cd_train_key_count()) == NULL, "%zu rows, NULL past them",
          cd_train_key_count());
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        int numeric = k->type == CD_TK_NUMBER || k->type == CD_TK_INT || k->type == CD_TK_LIST;
        CHECK(k->key[0] && k->label && k->label[0] && k->doc && k->doc[0] && !strchr(k->doc, '|'),
              "%s: a key, a label and a line of doc without a table bar", k->key);
        CHECK(strcmp(cd_train_key_type_name(k->type), "?") != 0, "%s: type %d", k->key, k->type);
        CHECK(numeric ? isfinite(k->lo) && isfinite(k->hi) && k->lo <= k->hi : isnan(k->lo) && isnan(k->hi),
              "%s: bounds %g..%g fit its type %s", k->key, k->lo, k->hi, cd_train_key_type_name(k->type));
        CHECK((k->type == CD_TK_LIST) == (k->max_items > 0), "%s: max_items %d", k->key, k->max_items);
        CHECK((k->type == CD_TK_ENUM) == (k->choices != NULL), "%s: choices only for an enum", k->key);
        if (k->type == CD_TK_ENUM && k->def)
            CHECK(cd_train_key_choice(k, k->def) >= 0, "%s: its default %s is one of its choices", k->key, k->def);
        const cd_train_key *first = cd_train_key_find(k->key);
        CHECK(first && first->type == k->type && same_bound(first->lo, k->lo) && same_bound(first->hi, k->hi),
              "%s: every row of a key has the first one's type and bounds", k->key);
        if (k->field)
            CHECK(cd_train_key_by_field(k->field) == k, "field %s names one row", k->field);
    }
    CHECK(!cd_train_key_find("no_such_key") && !cd_train_key_by_field("no_such_field"), "unknown names: NULL");
}

/* Every row is read: a JSON object, which no key takes, is refused naming the key. */
static void test_every_row_read(void)
{
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        json_t *root = base_json();
        set_key(root, k, json_object());
        cd_train_config c;
        char err[1024] = "", quoted[80];
        snprintf(quoted, sizeof quoted, "\"%s\"", k->key);
        int rc = load(root, &c, err, sizeof err);
        CHECK(rc != CD_OK && strstr(err, quoted), "%s: {} refused naming it: \"%s\"", k->key, err);
    }
}

/* Both bounds accepted; one past each refused, the message naming the key and the
 * bounds; a fraction refused for a whole number. */
static void test_bounds(void)
{
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        if (isnan(k->lo))
            continue;
        int whole = k->type == CD_TK_INT || !strcmp(k->key, "gpus");
        double step_lo = whole ? 1 : fmax(fabs(k->lo), 1) * 1e-9, step_hi = whole ? 1 : fmax(fabs(k->hi), 1) * 1e-9;
        struct {
            double v;
            int ok;
        } cases[] = {{k->lo, 1}, {k->hi, 1}, {k->lo - step_lo, 0}, {k->hi + step_hi, 0}, {k->lo + 0.5, !whole}};
        size_t ncases = k->lo + 0.5 <= k->hi ? 5 : 4; /* a fraction where the range holds one */
        char range[128], quoted[80];
        snprintf(range, sizeof range, "between %.15g and %.15g", k->lo, k->hi);
        snprintf(quoted, sizeof quoted, "\"%s\"", k->key);
        for (size_t j = 0; j < ncases; j++) {
            json_t *root = base_json();
            set_key(root, k, value_json(k, cases[j].v));
            cd_train_config c;
            char err[1024] = "";
            int rc = load(root, &c, err, sizeof err);
            if (cases[j].ok)
                CHECK(rc == CD_OK, "%s = %.17g is inside %s: %s", k->key, cases[j].v, range, err);
            else
                CHECK(rc != CD_OK && strstr(err, quoted) && strstr(err, range),
                      "%s = %.17g refused naming it and %s: %s", k->key, cases[j].v, range, err);
        }
    }
}

/* Writing a row's default changes nothing: for every row (every policy's and every
 * solver's, for theirs), the config equals the one without the key. */
static int same_with_default(json_t *base, const cd_train_key *k)
{
    cd_train_config a, b;
    char err[1024] = "";
    json_t *with = json_deep_copy(base);
    set_key(with, k, default_json(k));
    int ok = load(json_deep_copy(base), &a, err, sizeof err) == CD_OK && load(with, &b, err, sizeof err) == CD_OK;
    CHECK(ok, "%s: %s", k->key, err);
    return ok && memcmp(&a, &b, sizeof a) == 0;
}

static void test_defaults(void)
{
    cd_train_config c;
    cd_train_config_init(&c);
    CHECK(c.epochs == 30 && c.iter_size == 1 && c.solver.iter_size == 1 && c.mirror == -1 && c.shuffle == 1 &&
              c.snapshots == 1 && c.use_mean == CD_MEAN_IMAGE && c.solver.lr.base_lr == 0.01,
          "DIGITS's defaults: %g epochs, accumulation %d, mirror %d, mean %d, rate %g", c.epochs, c.iter_size,
          c.mirror, c.use_mean, c.solver.lr.base_lr);
    const cd_train_key *policy = cd_train_key_find("lr_policy.policy"), *solver = cd_train_key_find("solver_type");
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        if (!k->def)
            continue;
        json_t *base = base_json();
        if (strchr(k->key, '.')) {
            /* a policy's parameter: the default is the one of the policy whose field it is */
            int type = -1;
            for (int t = 0; t < CD_LR_COUNT; t++)
                for (int a = 0; a < CD_LR_ARG_COUNT; a++)
                    if (k->field && cd_lr_field(t, a) && !strcmp(cd_lr_field(t, a), k->field))
                        type = t;
            if (k != policy)
                CHECK(type >= 0, "%s (%s) is a parameter of some policy", k->key, k->field);
            if (type >= 0)
                set_key(base, policy, json_string(cd_lr_type_name(type)));
        }
        CHECK(same_with_default(base, k), "%s: writing its default %s changes the config", k->key, k->def);
        json_decref(base);
    }
    /* the solver's own defaults hold for every solver */
    char name[64];
    for (int s = 0; cd_train_key_choice_name(solver, s, name, sizeof name)[0]; s++)
        for (size_t i = 0; i < cd_train_key_count(); i++) {
            const cd_train_key *k = cd_train_key_at(i);
            if (!k->def || k->type != CD_TK_NUMBER || strchr(k->key, '.'))
                continue;
            json_t *base = base_json();
            set_key(base, solver, json_string(name));
            CHECK(same_with_default(base, k), "%s with %s: writing its default %s changes the config", k->key, name,
                  k->def);
            json_decref(base);
        }
}

/* The worker's values of the choices, written out: choice i of a row is value i. */
static const struct {
    const char *key, *name;
    int value;
} g_values[] = {
    {"use_mean", "none", CD_MEAN_NONE},     {"use_mean", "image", CD_MEAN_IMAGE},
    {"use_mean", "pixel", CD_MEAN_PIXEL},   {"flip", "none", 0},
    {"flip", "fliplr", CD_FLIP_LR},         {"flip", "flipud", CD_FLIP_UD},
    {"flip", "fliplrud", CD_FLIP_LR | CD_FLIP_UD}, {"precision", "fp32", CD_PREC_FP32},
    {"precision", "tf32", CD_PREC_TF32},    {"precision", "fp16", CD_PREC_FP16},
    {"precision", "bf16", CD_PREC_BF16},    {"backend", "auto", CD_BACKEND_AUTO},
    {"backend", "cpu", CD_BACKEND_CPU},     {"backend", "cuda", CD_BACKEND_CUDA},
    {"backend", "GPU", CD_BACKEND_CUDA},    {"solver_type", "adam", CD_SOLVER_ADAM},
    {"lr_policy.policy", "Sigmoid", CD_LR_SIGMOID},
    {"quad_rotation", "none", CD_AUG_QUAD_NONE}, {"quad_rotation", "rot90", CD_AUG_QUAD_ROT90},
    {"quad_rotation", "rot180", CD_AUG_QUAD_ROT180}, {"quad_rotation", "rotall", CD_AUG_QUAD_ROTALL},
};

static int value_of(const cd_train_config *c, const char *key)
{
    static const struct {
        const char *key;
        size_t off;
    } where[] = {{"use_mean", offsetof(cd_train_config, use_mean)}, {"flip", offsetof(cd_train_config, flip)},
                 {"precision", offsetof(cd_train_config, precision)}, {"backend", offsetof(cd_train_config, backend)},
                 {"solver_type", offsetof(cd_train_config, solver.type)},
                 {"lr_policy.policy", offsetof(cd_train_config, solver.lr.type)},
                 {"quad_rotation", offsetof(cd_train_config, aug.quad_rot)}};
    for (size_t i = 0; i < CD_ARRAY_LEN(where); i++)
        if (!strcmp(where[i].key, key))
            return *(const int *)((const char *)c + where[i].off);
    return -1;
}

static void test_choices(void)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_values); i++) {
        const cd_train_key *k = cd_train_key_find(g_values[i].key);
        json_t *root = base_json();
        set_key(root, k, json_string(g_values[i].name));
        cd_train_config c;
        char err[1024] = "";
        CHECK(load(root, &c, err, sizeof err) == CD_OK && value_of(&c, k->key) == g_values[i].value,
              "%s = %s: value %d, want %d (%s)", k->key, g_values[i].name, value_of(&c, k->key), g_values[i].value,
              err);
    }
    /* every choice of every row is the worker's value of its index */
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        char name[64], list[256], want[320];
        for (int j = 0; k->type == CD_TK_ENUM && cd_train_key_choice_name(k, j, name, sizeof name)[0]; j++) {
            int known = 0;
            for (size_t r = 0; r < CD_ARRAY_LEN(g_values); r++)
                known |= !strcmp(g_values[r].key, k->key) && !strcmp(g_values[r].name, name) && g_values[r].value == j;
            if (!strcmp(k->key, "solver_type"))
                known = cd_solver_type_parse(name) == j;
            if (!strcmp(k->key, "lr_policy.policy"))
                known = cd_lr_type_parse(name) == j;
            CHECK(known, "%s: choice %d (%s) is the worker's value %d", k->key, j, name, j);
        }
        if (k->type != CD_TK_ENUM)
            continue;
        json_t *root = base_json();
        set_key(root, k, json_string("median"));
        cd_train_config c;
        char err[1024] = "";
        cd_train_key_choice_list(k, ", ", list, sizeof list);
        snprintf(want, sizeof want, "\"%s\" must be one of %s", k->key, list);
        CHECK(load(root, &c, err, sizeof err) != CD_OK && strstr(err, want), "%s = median: \"%s\" says \"%s\"", k->key,
              err, want);
    }
    const cd_train_key *backend = cd_train_key_find("backend");
    CHECK(cd_train_key_choice(backend, "Gpu") == CD_BACKEND_CUDA && cd_train_key_choice(backend, "gp") == -1 &&
              cd_train_key_choice(backend, NULL) == -1,
          "aliases: gpu is cuda, a prefix is nothing");
}

/* The messages: the range check names the key and the bounds, whole numbers say so. */
static void test_messages(void)
{
    char err[256], want[256];
    const cd_train_key *step = cd_train_key_by_field("lr_step_size"), *acc = cd_train_key_find("batch_accumulation");
    CHECK(cd_train_key_check(step, 100, err, sizeof err) == CD_OK &&
              cd_train_key_check(step, 0, err, sizeof err) == CD_OK,
          "0 and 100 are steps");
    CHECK(cd_train_key_check(step, 150, err, sizeof err) != CD_OK &&
              !strcmp(err, "train.json: \"lr_policy.stepsize\" must be between 0 and 100 (got 150)"),
          "step 150: %s", err);
    CHECK(cd_train_key_check(acc, 2.5, err, sizeof err) != CD_OK &&
              !strcmp(err, "train.json: \"batch_accumulation\" must be a whole number between 1 and 1024 (got 2.5)"),
          "accumulation 2.5: %s", err);
    CHECK(cd_train_key_check(acc, NAN, err, sizeof err) != CD_OK, "NaN is outside every range");
    CHECK(!strcmp(cd_train_key_want(acc, want, sizeof want), "a whole number between 1 and 1024") &&
              !strcmp(cd_train_key_want(cd_train_key_find("use_mean"), want, sizeof want),
                      "one of none, image, pixel") &&
              !strcmp(cd_train_key_want(cd_train_key_find("shuffle"), want, sizeof want), "true or false"),
          "what a key takes: %s", want);
}

/* DIGITS's augmentation fields (digits/model/images/forms.py), written out: the form
 * field, the bounds and the default of each, and where its value lands in the config. */
static void test_augment_keys(void)
{
    static const struct {
        const char *field;
        double lo, hi;
        const char *def;
        size_t off; /* a double in cd_train_config; 0 for the booleans and the choice */
    } digits[] = {
        {"aug_rot", 0, 180, "0", offsetof(cd_train_config, aug.rot)},
        {"aug_scale", 0, 1, "0", offsetof(cd_train_config, aug.scale)},
        {"aug_noise", 0, 1, "0", offsetof(cd_train_config, aug.noise)},
        {"aug_contrast", 0, 5, "0", offsetof(cd_train_config, aug.contrast)},
        {"aug_hsv_h", 0, 0.5, "0.02", offsetof(cd_train_config, aug.hsv_h)},
        {"aug_hsv_s", 0, 0.5, "0.04", offsetof(cd_train_config, aug.hsv_s)},
        {"aug_hsv_v", 0, 0.5, "0.06", offsetof(cd_train_config, aug.hsv_v)},
        {"aug_quad_rot", NAN, NAN, "none", 0},
        {"aug_whitening", NAN, NAN, "false", 0},
        {"aug_hsv_use", NAN, NAN, "false", 0},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(digits); i++) {
        const cd_train_key *k = cd_train_key_by_field(digits[i].field);
        CHECK(k != NULL, "no row for DIGITS's %s", digits[i].field);
        if (!k)
            continue;
        CHECK(same_bound(k->lo, digits[i].lo) && same_bound(k->hi, digits[i].hi) && !strcmp(k->def, digits[i].def),
              "%s: %g..%g default %s, DIGITS has %g..%g default %s", digits[i].field, k->lo, k->hi, k->def,
              digits[i].lo, digits[i].hi, digits[i].def);
        if (!digits[i].off)
            continue;
        double v = digits[i].lo + (digits[i].hi - digits[i].lo) * (k->type == CD_TK_INT ? 0.5 : 0.37);
        json_t *root = base_json();
        set_key(root, k, value_json(k, v));
        cd_train_config c;
        char err[512] = "";
        CHECK(load(root, &c, err, sizeof err) == CD_OK, "%s = %g: %s", k->key, v, err);
        double got = *(const double *)((const char *)&c + digits[i].off);
        CHECK(got == v, "%s = %g read as %g", k->key, v, got);
    }
    CHECK(cd_train_key_by_field("aug_rot")->type == CD_TK_INT, "aug_rot is a whole number of degrees, as in DIGITS");
    json_t *root = base_json();
    set_key(root, cd_train_key_by_field("aug_whitening"), json_true());
    set_key(root, cd_train_key_by_field("aug_hsv_use"), json_true());
    cd_train_config c;
    char err[512] = "";
    CHECK(load(root, &c, err, sizeof err) == CD_OK && c.aug.whitening == 1 && c.aug.hsv_use == 1,
          "whitening and hsv_shift read: %s", err);
    cd_train_config_init(&c);
    CHECK(!cd_aug_active(&c.aug), "the defaults augment nothing");
}

int main(void)
{
    cd_test_init("test_train_keys");
    test_rows();
    test_every_row_read();
    test_bounds();
    test_defaults();
    test_choices();
    test_messages();
    test_augment_keys();
    return cd_test_finish();
}
