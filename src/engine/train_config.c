/* train.json (docs/worker-protocol.md) into a cd_train_config, with DIGITS's defaults
 * and a message naming the key for every bad value; then the train command's options,
 * which override their keys (the scheduler passes its choices for one attempt there and
 * leaves the job's train.json as it was written). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/jobdir.h"
#include "cdigits/train.h"
#include "cdigits/train_keys.h"
#include "cdigits/util.h"

/* The row of a key the worker reads: every one has a row in the table of training
 * settings (src/core/train_keys.c), which gives its bounds, default and choices. */
static const cd_train_key *key_row(const char *key)
{
    const cd_train_key *k = cd_train_key_find(key);
    if (!k)
        cd_die("train.json key \"%s\" has no row in the table of training settings (src/core/train_keys.c); "
               "add one", key);
    return k;
}

/* Where a key's value goes in cd_train_config, by the C type there. */
enum dest_kind { D_DOUBLE, D_INT, D_LONG };

typedef struct key_dest {
    const char *key;
    size_t off;
    int kind; /* enum dest_kind; booleans and enums are D_INT */
} key_dest;

#define AT(member) offsetof(cd_train_config, member)

/* The keys read as they are: numbers, booleans (1 or 0) and choices (choice i of the
 * key's row is value i: backend_select.h, backend.h, train.h). The others (the dataset,
 * the network, the solver and its policy, the seed, batch_size, gpus) are read below.
 * "snapshots": false writes none at all, the last iteration's and a stop's included
 * (benchmarks, tests); snapshot_interval 0 keeps DIGITS's meaning, only at the end. */
static const key_dest g_direct[] = {
    {"epochs", AT(epochs), D_DOUBLE},
    {"snapshot_interval", AT(snapshot_interval), D_DOUBLE},
    {"validation_interval", AT(validation_interval), D_DOUBLE},
    {"momentum", AT(solver.momentum), D_DOUBLE},
    {"weight_decay", AT(solver.weight_decay), D_DOUBLE},
    {"rms_decay", AT(solver.rms_decay), D_DOUBLE},
    {"momentum2", AT(solver.momentum2), D_DOUBLE},
    {"delta", AT(solver.delta), D_DOUBLE},
    {"early_stopping_patience", AT(early_stop_patience), D_INT},
    {"early_stopping_min_delta", AT(early_stop_min_delta), D_DOUBLE},
    {"batch_accumulation", AT(iter_size), D_INT},
    {"crop_size", AT(crop_size), D_INT},
    {"max_iterations", AT(max_iter_override), D_LONG},
    {"replicas", AT(replicas), D_INT},
    {"allreduce_bucket_mb", AT(bucket_mb), D_DOUBLE},
    {"loader_threads", AT(loader_threads), D_INT},
    {"threads", AT(threads), D_INT},
    {"cpu_memory_mb", AT(cpu_memory_mb), D_DOUBLE},
    {"use_mirror", AT(mirror), D_INT},
    {"data_parallel", AT(data_parallel), D_INT},
    {"force_data_parallel", AT(force_data_parallel), D_INT},
    {"shuffle", AT(shuffle), D_INT},
    {"snapshots", AT(snapshots), D_INT},
    {"resume", AT(resume), D_INT},
    {"use_mean", AT(use_mean), D_INT},
    {"backend", AT(backend), D_INT},
    {"flip", AT(flip), D_INT},
    {"precision", AT(precision), D_INT},
    {"quad_rotation", AT(aug.quad_rot), D_INT},
    {"rotation", AT(aug.rot), D_DOUBLE},
    {"rescale", AT(aug.scale), D_DOUBLE},
    {"noise", AT(aug.noise), D_DOUBLE},
    {"contrast", AT(aug.contrast), D_DOUBLE},
    {"whitening", AT(aug.whitening), D_INT},
    {"hsv_shift", AT(aug.hsv_use), D_INT},
    {"hsv_h", AT(aug.hsv_h), D_DOUBLE},
    {"hsv_s", AT(aug.hsv_s), D_DOUBLE},
    {"hsv_v", AT(aug.hsv_v), D_DOUBLE},
};

static void dest_set(cd_train_config *c, const key_dest *d, double v)
{
    char *at = (char *)c + d->off;
    if (d->kind == D_DOUBLE)
        *(double *)at = v;
    else if (d->kind == D_INT)
        *(int *)at = (int)v;
    else
        *(long *)at = (long)v;
}

/* The default of a key's row as a value: a number, 1/0 for true/false, a choice's index;
 * 0 with *has 0 where the row has none. */
static double row_default(const cd_train_key *k, int *has)
{
    *has = k->def != NULL;
    if (!k->def)
        return 0;
    if (k->type == CD_TK_BOOL)
        return !strcmp(k->def, "true");
    if (k->type == CD_TK_ENUM)
        return cd_train_key_choice(k, k->def);
    return atof(k->def);
}


void cd_train_config_init(cd_train_config *c)
{
    memset(c, 0, sizeof *c);
    int has;
    double lr = row_default(key_row("learning_rate"), &has);
    cd_solver_opts_defaults(&c->solver, (int)row_default(key_row("solver_type"), &has), lr);
    c->solver.lr.base_lr = lr;
    cd_lr_policy_defaults(&c->solver.lr, (int)row_default(key_row("lr_policy.policy"), &has));
    c->mirror = -1; /* use_mirror unset: the network's transform_param */
    for (size_t i = 0; i < CD_ARRAY_LEN(g_direct); i++) {
        double v = row_default(key_row(g_direct[i].key), &has);
        if (has)
            dest_set(c, &g_direct[i], v);
    }
    c->solver.iter_size = c->iter_size;
}

static int bad(char *err, size_t errlen, const char *key, const char *want)
{
    snprintf(err, errlen, "train.json: \"%s\" must be %s", key, want);
    return CD_ERR;
}

/* What the key's row takes, as bad()'s message says it. */
static int bad_row(char *err, size_t errlen, const cd_train_key *k)
{
    char want[320];
    return bad(err, errlen, k->key, cd_train_key_want(k, want, sizeof want));
}

/* The key's value in obj (the key's member there: "gamma" inside "lr_policy"), or NULL
 * when it is absent or null ("unset": the default holds). */
static json_t *member(json_t *obj, const cd_train_key *k)
{
    json_t *v = json_object_get(obj, cd_train_key_member(k));
    return v && !json_is_null(v) ? v : NULL;
}

/* A number within the key's bounds; *present says whether it was there. */
static int get_num(json_t *obj, const char *key, double *out, int *present, char *err, size_t errlen)
{
    const cd_train_key *k = key_row(key);
    json_t *v = member(obj, k);
    *present = 0;
    if (!v)
        return CD_OK;
    if (!json_is_number(v))
        return bad_row(err, errlen, k);
    double d = json_number_value(v);
    if (cd_train_key_check(k, d, err, errlen) != CD_OK)
        return CD_ERR;
    *out = d;
    *present = 1;
    return CD_OK;
}

/* true or false, or one of the choices of the key's row (its index) */
static int get_choice(json_t *obj, const char *key, double *out, int *present, char *err, size_t errlen)
{
    const cd_train_key *k = key_row(key);
    json_t *v = member(obj, k);
    *present = 0;
    if (!v)
        return CD_OK;
    int i = k->type == CD_TK_BOOL ? (json_is_boolean(v) ? json_is_true(v) : -1)
                                  : cd_train_key_choice(k, json_string_value(v));
    if (i < 0)
        return bad_row(err, errlen, k);
    *out = i;
    *present = 1;
    return CD_OK;
}

/* Every key of g_direct, by its row's type: a number, or true/false or a choice. */
static int get_direct(json_t *root, cd_train_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_direct); i++) {
        const char *key = g_direct[i].key;
        int kind = key_row(key)->type, present;
        double v;
        if ((kind == CD_TK_BOOL || kind == CD_TK_ENUM ? get_choice : get_num)(root, key, &v, &present, err, errlen))
            return CD_ERR;
        if (present)
            dest_set(c, &g_direct[i], v);
    }
    return CD_OK;
}

static int get_str(json_t *root, const char *key, char *out, size_t len, char *err, size_t errlen)
{
    json_t *v = member(root, key_row(key));
    if (!v)
        return CD_OK;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
        return bad(err, errlen, key, "a string");
    snprintf(out, len, "%s", json_string_value(v));
    return CD_OK;
}

#define MAX_GPUS ((int)(sizeof ((cd_train_config *)0)->gpus / sizeof(int)))

/* Appends GPU id to c->gpus; what names the source ("train.json: \"gpus\"", "--gpus")
 * in the message. The caller has checked the range and the count. */
static int gpu_add(cd_train_config *c, int id, const char *what, char *err, size_t errlen)
{
    for (int k = 0; k < c->ngpus; k++)
        if (c->gpus[k] == id) {
            /* two replicas on one device: NCCL does not support it (it may hang) */
            snprintf(err, errlen, "%s lists GPU %d twice; list each GPU once", what, id);
            return CD_ERR;
        }
    c->gpus[c->ngpus++] = id;
    return CD_OK;
}

/* lr_policy.steps: percents as "50,85" (commas or spaces) or [50, 85], each within the
 * row's bounds, at most its count */
static int get_steps(json_t *lp, cd_lr_policy *p, char *err, size_t errlen)
{
    const cd_train_key *k = key_row("lr_policy.steps");
    json_t *steps = member(lp, k);
    if (!steps)
        return CD_OK;
    int max = k->max_items < CD_LR_MAX_STEPS ? k->max_items : CD_LR_MAX_STEPS;
    p->nsteps = 0;
    if (json_is_array(steps)) {
        size_t i;
        json_t *v;
        json_array_foreach(steps, i, v) {
            if (!json_is_number(v) || p->nsteps >= max)
                return bad_row(err, errlen, k);
            if (cd_train_key_check(k, json_number_value(v), err, errlen) != CD_OK)
                return CD_ERR;
            p->steps_pct[p->nsteps++] = json_number_value(v);
        }
        return CD_OK;
    }
    if (!json_is_string(steps))
        return bad_row(err, errlen, k);
    char *copy = cd_xstrdup(json_string_value(steps)), *save = NULL;
    int rc = CD_OK;
    for (char *tok = strtok_r(copy, ", ", &save); tok && rc == CD_OK; tok = strtok_r(NULL, ", ", &save)) {
        char *end;
        double v = strtod(tok, &end);
        if (*end || p->nsteps >= max)
            rc = bad_row(err, errlen, k);
        else if ((rc = cd_train_key_check(k, v, err, errlen)) == CD_OK)
            p->steps_pct[p->nsteps++] = v;
    }
    free(copy);
    return rc;
}

static int parse_lr(json_t *lp, cd_lr_policy *p, char *err, size_t errlen)
{
    if (!lp || json_is_null(lp))
        return CD_OK;
    if (!json_is_object(lp))
        return bad(err, errlen, "lr_policy", "an object like {\"policy\": \"step\", \"stepsize\": 33}");
    double v;
    int present;
    if (get_choice(lp, "lr_policy.policy", &v, &present, err, errlen) != CD_OK)
        return CD_ERR;
    if (present) {
        double base = p->base_lr;
        long max_iter = p->max_iter;
        cd_lr_policy_defaults(p, (int)v);
        p->base_lr = base;
        p->max_iter = max_iter;
    }
    static const struct {
        const char *key;
        size_t off;
    } params[] = {{"lr_policy.gamma", offsetof(cd_lr_policy, gamma)},
                  {"lr_policy.power", offsetof(cd_lr_policy, power)},
                  {"lr_policy.stepsize", offsetof(cd_lr_policy, step_pct)}};
    for (size_t i = 0; i < CD_ARRAY_LEN(params); i++) {
        if (get_num(lp, params[i].key, &v, &present, err, errlen) != CD_OK)
            return CD_ERR;
        if (present)
            *(double *)((char *)p + params[i].off) = v;
    }
    return get_steps(lp, p, err, errlen);
}

/* The solver: its type and base rate set its defaults (DIGITS's), which the policy and
 * the keys read later override. */
static int parse_solver(json_t *root, cd_train_config *c, char *err, size_t errlen)
{
    double lr = c->solver.lr.base_lr, type = c->solver.type;
    int present;
    if (get_num(root, "learning_rate", &lr, &present, err, errlen) != CD_OK ||
        get_choice(root, "solver_type", &type, &present, err, errlen) != CD_OK)
        return CD_ERR;
    cd_lr_policy keep = c->solver.lr;
    cd_solver_opts_defaults(&c->solver, (int)type, lr);
    c->solver.lr = keep;
    c->solver.lr.base_lr = lr;
    return parse_lr(json_object_get(root, "lr_policy"), &c->solver.lr, err, errlen);
}

/* random_seed (absent: one from the clock), batch_size ("auto" or a number) and gpus */
static int parse_special(json_t *root, cd_train_config *c, char *err, size_t errlen)
{
    double v;
    int present;
    if (get_num(root, "random_seed", &v, &present, err, errlen) != CD_OK)
        return CD_ERR;
    if (present) {
        c->has_seed = 1;
        c->seed = (uint64_t)v;
    }
    json_t *bs = json_object_get(root, "batch_size");
    if (bs && json_is_string(bs) && !strcmp(json_string_value(bs), "auto")) {
        c->batch_auto = 1;
    } else {
        if (get_num(root, "batch_size", &v, &present, err, errlen) != CD_OK)
            return CD_ERR;
        if (present)
            c->batch_size = (int)v;
    }
    const cd_train_key *k = key_row("gpus");
    json_t *gpus = member(root, k);
    if (gpus && !json_is_array(gpus))
        return bad_row(err, errlen, k);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g) {
        if (!json_is_integer(g) || c->ngpus >= MAX_GPUS || c->ngpus >= k->max_items)
            return bad_row(err, errlen, k);
        if (cd_train_key_check(k, (double)json_integer_value(g), err, errlen) != CD_OK ||
            gpu_add(c, (int)json_integer_value(g), "train.json: \"gpus\"", err, errlen) != CD_OK)
            return CD_ERR;
    }
    return CD_OK;
}

int cd_train_config_load(cd_train_config *c, const char *job_dir, char *err, size_t errlen)
{
    char path[4200];
    jobdir_path(job_dir, JOBDIR_TRAIN_JSON, path, sizeof path);
    snprintf(c->job_dir, sizeof c->job_dir, "%s", job_dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        snprintf(err, errlen, "%s: %s (line %d); write the training settings there "
                 "(docs/worker-protocol.md)", path, je.text, je.line);
        return CD_ERR;
    }
    int rc = CD_ERR;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s must hold a JSON object", path);
        goto out;
    }
    char network[4096];
    snprintf(network, sizeof network, "%s", jobdir_name(JOBDIR_NETWORK));
    if (get_str(root, "dataset_dir", c->dataset_dir, sizeof c->dataset_dir, err, errlen) ||
        get_str(root, "network", network, sizeof network, err, errlen) ||
        get_str(root, "pretrained", c->pretrained, sizeof c->pretrained, err, errlen))
        goto out;
    if (!c->dataset_dir[0]) {
        bad(err, errlen, "dataset_dir", "the folder of a dataset job");
        goto out;
    }
    if (network[0] == '/')
        snprintf(c->network, sizeof c->network, "%s", network);
    else
        snprintf(c->network, sizeof c->network, "%s/%s", job_dir, network);
    if (parse_solver(root, c, err, errlen) != CD_OK || get_direct(root, c, err, errlen) != CD_OK ||
        parse_special(root, c, err, errlen) != CD_OK)
        goto out;
    c->solver.iter_size = c->iter_size;
    rc = CD_OK;
out:
    json_decref(root);
    return rc;
}

/* --gpus LIST: comma-separated GPU numbers, replacing train.json's list. */
static int parse_gpus_arg(cd_train_config *c, const char *list, char *err, size_t errlen)
{
    const cd_train_key *k = key_row("gpus");
    int max = k->max_items < MAX_GPUS ? k->max_items : MAX_GPUS;
    c->ngpus = 0;
    const char *p = list;
    for (;;) {
        char *end;
        long id = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (id < 0 || id > k->hi || (*end && *end != ',') || c->ngpus >= max) {
            snprintf(err, errlen, "--gpus %s: give up to %d GPU numbers between %.15g and %.15g separated by "
                     "commas, e.g. --gpus 0,1", list, max, k->lo, k->hi);
            return CD_ERR;
        }
        if (gpu_add(c, (int)id, "--gpus", err, errlen))
            return CD_ERR;
        if (!*end)
            return CD_OK;
        p = end + 1;
    }
}

int cd_train_config_args(cd_train_config *c, int argc, char **argv, char *err, size_t errlen)
{
    const cd_train_key *backend = key_row("backend");
    char backends[128];
    cd_train_key_choice_list(backend, ", ", backends, sizeof backends);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--resume")) {
            c->resume = 1;
            continue;
        }
        if (strcmp(a, "--gpus") && strcmp(a, "--backend")) {
            snprintf(err, errlen, "%s is not an option of train; the options are --resume, --gpus LIST and "
                     "--backend %s", a, backends);
            return CD_ERR;
        }
        if (i + 1 >= argc) {
            int gpus = !strcmp(a, "--gpus");
            snprintf(err, errlen, "%s needs a value (%s%s)", a, gpus ? "GPU numbers, e.g. --gpus 0,1" : "one of ",
                     gpus ? "" : backends);
            return CD_ERR;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--gpus")) {
            if (parse_gpus_arg(c, v, err, errlen))
                return CD_ERR;
            continue;
        }
        int kind = cd_train_key_choice(backend, v);
        if (kind < 0) {
            snprintf(err, errlen, "--backend %s: must be one of %s", v, backends);
            return CD_ERR;
        }
        c->backend = kind;
    }
    return CD_OK;
}
