/* train.json (docs/worker-protocol.md) into a cd_train_config, with DIGITS's defaults
 * and a message naming the key for every bad value; then the train command's options,
 * which override their keys (the scheduler passes its choices for one attempt there and
 * leaves the job's train.json as it was written). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/jobdir.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

void cd_train_config_init(cd_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->epochs = 30;
    c->snapshot_interval = 1;
    c->snapshots = 1;
    c->validation_interval = 1;
    c->iter_size = 1;
    c->use_mean = CD_MEAN_IMAGE;
    c->mirror = -1;
    c->shuffle = 1;
    c->data_parallel = 1;
    c->bucket_mb = 25;
    cd_solver_opts_defaults(&c->solver, CD_SOLVER_SGD, 0.01);
    c->solver.lr.base_lr = 0.01;
    cd_lr_policy_defaults(&c->solver.lr, CD_LR_STEP);
}

static int bad(char *err, size_t errlen, const char *key, const char *want)
{
    snprintf(err, errlen, "train.json: \"%s\" must be %s", key, want);
    return CD_ERR;
}

/* number (or null for "unset") */
static int get_num(json_t *root, const char *key, double *out, int *present, double lo, double hi,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (present)
        *present = 0;
    if (!v || json_is_null(v))
        return CD_OK;
    if (!json_is_number(v)) {
        char want[128];
        snprintf(want, sizeof want, "a number between %g and %g", lo, hi);
        return bad(err, errlen, key, want);
    }
    double d = json_number_value(v);
    if (d < lo || d > hi) {
        char want[128];
        snprintf(want, sizeof want, "between %g and %g (got %g)", lo, hi, d);
        return bad(err, errlen, key, want);
    }
    *out = d;
    if (present)
        *present = 1;
    return CD_OK;
}

/* true or false (or null for "unset": *out keeps its default) */
static int get_bool(json_t *root, const char *key, int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return CD_OK;
    if (!json_is_boolean(v))
        return bad(err, errlen, key, "true or false");
    *out = json_is_true(v);
    return CD_OK;
}

static int get_str(json_t *root, const char *key, char *out, size_t len, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return CD_OK;
    if (!json_is_string(v) || strlen(json_string_value(v)) >= len)
        return bad(err, errlen, key, "a string");
    snprintf(out, len, "%s", json_string_value(v));
    return CD_OK;
}

typedef struct name_value {
    const char *name;
    int value;
} name_value;

static const name_value backends[] = {{"auto", CD_BACKEND_AUTO}, {"cpu", CD_BACKEND_CPU}, {"cuda", CD_BACKEND_CUDA},
                                      {"gpu", CD_BACKEND_CUDA}};
#define BACKEND_LIST "auto, cpu, cuda"

#define MAX_GPUS ((int)(sizeof ((cd_train_config *)0)->gpus / sizeof(int)))
#define MAX_GPU_ID 1023

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

static int get_enum(json_t *root, const char *key, const name_value *table, size_t n, int *out,
                    const char *list, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return CD_OK;
    if (json_is_string(v))
        for (size_t i = 0; i < n; i++)
            if (!strcasecmp(json_string_value(v), table[i].name)) {
                *out = table[i].value;
                return CD_OK;
            }
    char want[256];
    snprintf(want, sizeof want, "one of %s", list);
    return bad(err, errlen, key, want);
}

static int parse_lr(json_t *lp, cd_lr_policy *p, char *err, size_t errlen)
{
    if (!lp || json_is_null(lp))
        return CD_OK;
    if (!json_is_object(lp))
        return bad(err, errlen, "lr_policy", "an object like {\"policy\": \"step\", \"stepsize\": 33}");
    json_t *pol = json_object_get(lp, "policy");
    if (pol) {
        int t = json_is_string(pol) ? cd_lr_type_parse(json_string_value(pol)) : -1;
        if (t < 0) {
            char want[128];
            snprintf(want, sizeof want, "one of %s", cd_lr_type_list());
            return bad(err, errlen, "lr_policy.policy", want);
        }
        double base = p->base_lr;
        long max_iter = p->max_iter;
        cd_lr_policy_defaults(p, t);
        p->base_lr = base;
        p->max_iter = max_iter;
    }
    if (get_num(lp, "gamma", &p->gamma, NULL, 0, 1e6, err, errlen) ||
        get_num(lp, "power", &p->power, NULL, -1e6, 1e6, err, errlen) ||
        get_num(lp, "stepsize", &p->step_pct, NULL, 0, 100, err, errlen))
        return CD_ERR;
    json_t *steps = json_object_get(lp, "steps");
    if (steps && !json_is_null(steps)) {
        p->nsteps = 0;
        if (json_is_string(steps)) {
            char *copy = cd_xstrdup(json_string_value(steps)), *save = NULL;
            for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
                char *end;
                double v = strtod(tok, &end);
                if (*end || v < 0 || v > 100 || p->nsteps >= CD_LR_MAX_STEPS) {
                    free(copy);
                    return bad(err, errlen, "lr_policy.steps", "comma-separated percents between 0 and 100");
                }
                p->steps_pct[p->nsteps++] = v;
            }
            free(copy);
        } else if (json_is_array(steps)) {
            size_t i;
            json_t *v;
            json_array_foreach(steps, i, v) {
                if (!json_is_number(v) || p->nsteps >= CD_LR_MAX_STEPS)
                    return bad(err, errlen, "lr_policy.steps", "a list of percents");
                p->steps_pct[p->nsteps++] = json_number_value(v);
            }
        } else {
            return bad(err, errlen, "lr_policy.steps", "comma-separated percents, e.g. \"50,85\"");
        }
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
    int rc = CD_ERR, present;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s must hold a JSON object", path);
        goto out;
    }
    char network[4096] = "network.prototxt", solver_name[64] = "";
    if (get_str(root, "dataset_dir", c->dataset_dir, sizeof c->dataset_dir, err, errlen) ||
        get_str(root, "network", network, sizeof network, err, errlen) ||
        get_str(root, "pretrained", c->pretrained, sizeof c->pretrained, err, errlen) ||
        get_str(root, "solver_type", solver_name, sizeof solver_name, err, errlen))
        goto out;
    if (!c->dataset_dir[0]) {
        bad(err, errlen, "dataset_dir", "the folder of a dataset job");
        goto out;
    }
    if (network[0] == '/')
        snprintf(c->network, sizeof c->network, "%s", network);
    else
        snprintf(c->network, sizeof c->network, "%s/%s", job_dir, network);

    double lr = 0.01, v;
    if (get_num(root, "learning_rate", &lr, NULL, 0, 1e9, err, errlen))
        goto out;
    int stype = CD_SOLVER_SGD;
    if (solver_name[0] && (stype = cd_solver_type_parse(solver_name)) < 0) {
        char want[128];
        snprintf(want, sizeof want, "one of %s", cd_solver_type_list());
        bad(err, errlen, "solver_type", want);
        goto out;
    }
    cd_lr_policy keep = c->solver.lr;
    cd_solver_opts_defaults(&c->solver, stype, lr);
    c->solver.lr = keep;
    c->solver.lr.base_lr = lr;
    if (parse_lr(json_object_get(root, "lr_policy"), &c->solver.lr, err, errlen))
        goto out;

    if (get_num(root, "epochs", &c->epochs, NULL, 1e-6, 1e6, err, errlen) ||
        get_num(root, "snapshot_interval", &c->snapshot_interval, NULL, 0, 1e6, err, errlen) ||
        get_num(root, "validation_interval", &c->validation_interval, NULL, 0, 1e6, err, errlen) ||
        get_num(root, "momentum", &c->solver.momentum, NULL, 0, 1, err, errlen) ||
        get_num(root, "weight_decay", &c->solver.weight_decay, NULL, 0, 1e3, err, errlen) ||
        get_num(root, "rms_decay", &c->solver.rms_decay, NULL, 0, 1, err, errlen) ||
        get_num(root, "momentum2", &c->solver.momentum2, NULL, 0, 1, err, errlen) ||
        get_num(root, "delta", &c->solver.delta, NULL, 0, 1, err, errlen))
        goto out;
    if (get_num(root, "random_seed", &v, &present, 0, 9007199254740992.0, err, errlen))
        goto out;
    if (present) {
        c->has_seed = 1;
        c->seed = (uint64_t)v;
    }
    json_t *bs = json_object_get(root, "batch_size");
    if (bs && json_is_string(bs) && !strcmp(json_string_value(bs), "auto")) {
        c->batch_auto = 1;
    } else {
        if (get_num(root, "batch_size", &v, &present, 1, 1 << 20, err, errlen))
            goto out;
        if (present)
            c->batch_size = (int)v;
    }
    if (get_num(root, "early_stopping_patience", &v, &present, 0, 1e6, err, errlen))
        goto out;
    if (present)
        c->early_stop_patience = (int)v;
    if (get_num(root, "early_stopping_min_delta", &c->early_stop_min_delta, NULL, 0, 1e9, err, errlen))
        goto out;
    if (get_num(root, "batch_accumulation", &v, &present, 1, 1024, err, errlen))
        goto out;
    if (present)
        c->iter_size = (int)v;
    c->solver.iter_size = c->iter_size;
    if (get_num(root, "crop_size", &v, &present, 1, 1 << 16, err, errlen))
        goto out;
    if (present)
        c->crop_size = (int)v;
    if (get_num(root, "max_iterations", &v, &present, 1, 1e12, err, errlen))
        goto out;
    if (present)
        c->max_iter_override = (long)v;
    if (get_num(root, "replicas", &v, &present, 1, 64, err, errlen))
        goto out;
    if (present)
        c->replicas = (int)v;
    if (get_num(root, "allreduce_bucket_mb", &v, &present, 0, 4096, err, errlen))
        goto out;
    if (present)
        c->bucket_mb = v;
    if (get_num(root, "loader_threads", &v, &present, 1, 64, err, errlen))
        goto out;
    if (present)
        c->loader_threads = (int)v;
    if (get_num(root, "threads", &v, &present, 1, 1024, err, errlen))
        goto out;
    if (present)
        c->threads = (int)v;
    if (get_num(root, "cpu_memory_mb", &v, &present, 0.001, 1e9, err, errlen))
        goto out;
    if (present)
        c->cpu_memory_mb = v;
    if (get_bool(root, "use_mirror", &c->mirror, err, errlen) ||
        get_bool(root, "data_parallel", &c->data_parallel, err, errlen) ||
        get_bool(root, "force_data_parallel", &c->force_data_parallel, err, errlen) ||
        get_bool(root, "shuffle", &c->shuffle, err, errlen))
        goto out;
    /* "snapshots": false writes none at all, the last iteration's and a stop's included
     * (benchmarks, tests); snapshot_interval 0 keeps DIGITS's meaning, only at the end. */
    if (get_bool(root, "snapshots", &c->snapshots, err, errlen))
        goto out;
    json_t *resume = json_object_get(root, "resume");
    c->resume = resume && json_is_true(resume);
    static const name_value means[] = {{"none", CD_MEAN_NONE}, {"image", CD_MEAN_IMAGE},
                                       {"pixel", CD_MEAN_PIXEL}};
    static const name_value flips[] = {{"none", 0},
                                       {"fliplr", CD_FLIP_LR},
                                       {"flipud", CD_FLIP_UD},
                                       {"fliplrud", CD_FLIP_LR | CD_FLIP_UD}};
    static const name_value precisions[] = {{"fp32", CD_PREC_FP32}, {"tf32", CD_PREC_TF32},
                                            {"fp16", CD_PREC_FP16}, {"bf16", CD_PREC_BF16}};
    if (get_enum(root, "use_mean", means, CD_ARRAY_LEN(means), &c->use_mean, "none, image, pixel",
                 err, errlen) ||
        get_enum(root, "backend", backends, CD_ARRAY_LEN(backends), &c->backend, BACKEND_LIST,
                 err, errlen) ||
        get_enum(root, "flip", flips, CD_ARRAY_LEN(flips), &c->flip, "none, fliplr, flipud, fliplrud",
                 err, errlen) ||
        get_enum(root, "precision", precisions, CD_ARRAY_LEN(precisions), &c->precision,
                 "fp32, tf32, fp16, bf16", err, errlen))
        goto out;
    json_t *gpus = json_object_get(root, "gpus");
    if (gpus && json_is_array(gpus)) {
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g) {
            if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) > MAX_GPU_ID ||
                c->ngpus >= MAX_GPUS) {
                bad(err, errlen, "gpus", "a list of up to 16 GPU numbers");
                goto out;
            }
            if (gpu_add(c, (int)json_integer_value(g), "train.json: \"gpus\"", err, errlen))
                goto out;
        }
    }
    rc = CD_OK;
out:
    json_decref(root);
    return rc;
}

/* --gpus LIST: comma-separated GPU numbers, replacing train.json's list. */
static int parse_gpus_arg(cd_train_config *c, const char *list, char *err, size_t errlen)
{
    c->ngpus = 0;
    const char *p = list;
    for (;;) {
        char *end;
        long id = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (id < 0 || id > MAX_GPU_ID || (*end && *end != ',') || c->ngpus >= MAX_GPUS) {
            snprintf(err, errlen, "--gpus %s: give up to %d GPU numbers between 0 and %d separated by commas, "
                     "e.g. --gpus 0,1", list, MAX_GPUS, MAX_GPU_ID);
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
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--resume")) {
            c->resume = 1;
            continue;
        }
        if (strcmp(a, "--gpus") && strcmp(a, "--backend")) {
            snprintf(err, errlen, "%s is not an option of train; the options are --resume, --gpus LIST and "
                     "--backend %s", a, BACKEND_LIST);
            return CD_ERR;
        }
        if (i + 1 >= argc) {
            snprintf(err, errlen, "%s needs a value (%s)", a,
                     !strcmp(a, "--gpus") ? "GPU numbers, e.g. --gpus 0,1" : "one of " BACKEND_LIST);
            return CD_ERR;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--gpus")) {
            if (parse_gpus_arg(c, v, err, errlen))
                return CD_ERR;
            continue;
        }
        size_t k = 0;
        while (k < CD_ARRAY_LEN(backends) && strcasecmp(v, backends[k].name))
            k++;
        if (k == CD_ARRAY_LEN(backends)) {
            snprintf(err, errlen, "--backend %s: must be one of %s", v, BACKEND_LIST);
            return CD_ERR;
        }
        c->backend = backends[k].value;
    }
    return CD_OK;
}
