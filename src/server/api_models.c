/* Model jobs: creation from DIGITS's form (with learning rate and batch size sweeps),
 * resume, metrics, the learning rate curve, the standard networks' files, and the
 * network view (the engine's own shapes, from `cdigits-worker check-net --json`). */
#define _GNU_SOURCE
#include "internal.h"
#include "api_models.h"
#include "api_generic.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cdigits/jobdir.h"
#include "cdigits/lr_policy.h"
#include "cdigits/train_keys.h"
#include "cdigits/util.h"
#include "network_page.h"

#define ALWAYS NULL

/* A field that sets a train.json key: its default, bounds, choices and label are the
 * key's row in the table of training settings (cdigits/train_keys.h), filled in by
 * forms_from_keys before any request. */
#define TRAIN(name, type, when, required) {name, type, NULL, NAN, NAN, NULL, when, required, NULL}

static form_field_t g_model_form[] = {
    {"dataset", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 1, "Dataset"},
    {"model_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 1, "Model name"},
    {"group_name", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Group name"},
    {"framework", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Framework"},
    {"method", F_CHOICE, "standard", NAN, NAN, "standard|custom|previous", ALWAYS, 1, "Network type (method)"},
    {"standard_networks", F_CHOICE, NULL, NAN, NAN, "lenet|alexnet|googlenet", "method=standard", 1,
     "Standard network"},
    {"custom_network", F_TEXT, NULL, NAN, NAN, NULL, "method=custom", 1, "Custom network"},
    {"custom_network_snapshot", F_FILE, NULL, NAN, NAN, NULL, "method=custom", 0, "Pretrained model"},
    {"previous_networks", F_STRING, NULL, NAN, NAN, NULL, "method=previous", 1, "Previous network"},
    TRAIN("train_epochs", F_INT, ALWAYS, 1),
    TRAIN("snapshot_interval", F_FLOAT, ALWAYS, 1),
    TRAIN("val_interval", F_FLOAT, ALWAYS, 1),
    TRAIN("random_seed", F_INT, ALWAYS, 0),
    TRAIN("batch_size", F_INTS, "batch_size!=auto", 0),
    TRAIN("batch_accumulation", F_INT, ALWAYS, 0),
    TRAIN("solver_type", F_CHOICE, ALWAYS, 1),
    TRAIN("rms_decay", F_FLOAT, ALWAYS, 1),
    TRAIN("learning_rate", F_FLOATS, ALWAYS, 1),
    TRAIN("momentum", F_FLOAT, ALWAYS, 0),
    TRAIN("weight_decay", F_FLOAT, ALWAYS, 0),
    TRAIN("lr_policy", F_CHOICE, ALWAYS, 1),
    TRAIN("lr_step_size", F_FLOAT, "lr_policy=step", 1),
    TRAIN("lr_step_gamma", F_FLOAT, "lr_policy=step", 1),
    TRAIN("lr_multistep_values", F_FLOATS, "lr_policy=multistep", 1),
    TRAIN("lr_multistep_gamma", F_FLOAT, "lr_policy=multistep", 1),
    TRAIN("lr_exp_gamma", F_FLOAT, "lr_policy=exp", 1),
    TRAIN("lr_inv_gamma", F_FLOAT, "lr_policy=inv", 1),
    TRAIN("lr_inv_power", F_FLOAT, "lr_policy=inv", 1),
    TRAIN("lr_poly_power", F_FLOAT, "lr_policy=poly", 1),
    TRAIN("lr_sigmoid_step", F_FLOAT, "lr_policy=sigmoid", 1),
    TRAIN("lr_sigmoid_gamma", F_FLOAT, "lr_policy=sigmoid", 1),
    TRAIN("use_mean", F_CHOICE, ALWAYS, 1),
    TRAIN("crop_size", F_INT, ALWAYS, 0),
    /* three-valued, read by mirror_choice: absent keeps the network's transform_param */
    TRAIN("use_mirror", F_STRING, ALWAYS, 0),
    TRAIN("data_parallel", F_BOOL, ALWAYS, 0),
    TRAIN("aug_flip", F_CHOICE, ALWAYS, 0),
    TRAIN("aug_quad_rot", F_CHOICE, ALWAYS, 0),
    TRAIN("aug_rot", F_INT, ALWAYS, 0),
    TRAIN("aug_scale", F_FLOAT, ALWAYS, 0),
    TRAIN("aug_noise", F_FLOAT, ALWAYS, 0),
    TRAIN("aug_contrast", F_FLOAT, ALWAYS, 0),
    TRAIN("aug_whitening", F_BOOL, ALWAYS, 0),
    TRAIN("aug_hsv_use", F_BOOL, ALWAYS, 0),
    TRAIN("aug_hsv_h", F_FLOAT, ALWAYS, 0),
    TRAIN("aug_hsv_s", F_FLOAT, ALWAYS, 0),
    TRAIN("aug_hsv_v", F_FLOAT, ALWAYS, 0),
    TRAIN("shuffle", F_BOOL, ALWAYS, 0),
    TRAIN("precision", F_CHOICE, ALWAYS, 0),
    TRAIN("early_stopping_patience", F_INT, ALWAYS, 0),
    TRAIN("early_stopping_min_delta", F_FLOAT, ALWAYS, 0),
    {"select_gpus", F_INTS, NULL, 0, SCHED_MAX_GPUS - 1, NULL, ALWAYS, 0, "GPUs"},
    {"select_gpus_list", F_INTS, NULL, 0, SCHED_MAX_GPUS - 1, NULL, ALWAYS, 0, "GPUs"},
    {"select_gpu_count", F_INT, NULL, 1, SCHED_MAX_GPUS, NULL, ALWAYS, 0, "Use this many GPUs"},
    {"select_gpu", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "GPU"},
    /* where the job runs (docs/cluster.md): nodes (1) and worker ranks on each (the GPUs
     * asked for on each node, 1 on the CPU) */
    {"nodes", F_INT, NULL, 1, 4096, NULL, ALWAYS, 0, "Nodes"},
    {"ranks_per_node", F_INT, NULL, 1, SCHED_MAX_GPUS, NULL, ALWAYS, 0, "Ranks per node"},
};

/* The model form's row for field name; every caller names a row the table has. */
static const form_field_t *model_form_row(const char *name)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_model_form); i++)
        if (!strcmp(g_model_form[i].name, name))
            return &g_model_form[i];
    abort();
}

/* Adds nodes and ranks_per_node to the job's resources when the form gives either
 * (the scheduler takes the same defaults when it gives neither). More ranks than one
 * process holds are worker ranks under MPI (docs/cluster.md). */
static void placement_request(json_t *v, json_t *resources)
{
    json_t *nodes = json_object_get(v, "nodes"), *ranks = json_object_get(v, "ranks_per_node");
    json_int_t n = json_is_integer(nodes) ? json_integer_value(nodes) : 1;
    if (!resources || (!json_is_integer(nodes) && !json_is_integer(ranks)))
        return; /* the defaults: the scheduler's, and the job's resources as they were */
    json_t *ids = json_object_get(resources, "ids");
    json_int_t gpus = json_is_array(ids) ? (json_int_t)json_array_size(ids)
                                         : json_integer_value(json_object_get(resources, "count"));
    json_int_t r = json_is_integer(ranks) ? json_integer_value(ranks) : gpus > 0 ? gpus : 1;
    json_object_set_new(resources, "nodes", json_integer(n));
    json_object_set_new(resources, "ranks_per_node", json_integer(r));
}

static const char *sval(json_t *v, const char *k)
{
    const char *s = json_string_value(json_object_get(v, k));
    return s ? s : "";
}

static double fval(json_t *v, const char *k, double def)
{
    json_t *x = json_object_get(v, k);
    return json_is_number(x) ? json_number_value(x) : def;
}

/* A policy's parameters from the validated model form v: each field the policy reads
 * (cd_lr_field), and the worker's default (cd_lr_policy_defaults) for a field the form
 * leaves out. base_lr and max_iter are 0. */
static void lr_from_form(cd_lr_policy *p, int type, json_t *v)
{
    memset(p, 0, sizeof *p);
    cd_lr_policy_defaults(p, type);
    double *num[CD_LR_ARG_COUNT] = {[CD_LR_ARG_STEP] = &p->step_pct, [CD_LR_ARG_GAMMA] = &p->gamma,
                                    [CD_LR_ARG_POWER] = &p->power};
    for (int a = 0; a < CD_LR_ARG_COUNT; a++) {
        const char *k = cd_lr_field(type, a);
        if (!k)
            continue;
        if (a != CD_LR_ARG_STEPS) {
            *num[a] = fval(v, k, *num[a]);
        } else if (json_is_array(json_object_get(v, k))) {
            size_t i;
            json_t *x;
            p->nsteps = 0;
            json_array_foreach(json_object_get(v, k), i, x) if (p->nsteps < CD_LR_MAX_STEPS)
                p->steps_pct[p->nsteps++] = json_number_value(x);
        }
    }
}

/* Train.json's lr_policy: the protocol's keys, filled from the fields of the policy. */
static json_t *lr_policy(json_t *v)
{
    const char *name = sval(v, "lr_policy");
    cd_lr_policy p;
    lr_from_form(&p, cd_lr_type_parse(name), v);
    char steps[512] = "";
    size_t n = 0;
    for (int i = 0; i < p.nsteps; i++)
        n += (size_t)snprintf(steps + n, n < sizeof steps ? sizeof steps - n : 0, "%s%g", i ? "," : "",
                              p.steps_pct[i]);
    return json_pack("{s:s, s:f, s:f, s:f, s:s}", "policy", name, "stepsize", p.step_pct, "gamma", p.gamma,
                     "power", p.power, "steps", steps);
}

/* Where the network comes from, checked before any job is made. */
typedef struct netsrc {
    char *text;            /* the prototxt to copy into each job */
    size_t len;
    char pretrained[PATH_MAX];
    json_t *desc;          /* {method, standard_network | previous_job, epoch} */
} netsrc_t;

/* The snapshot that a typed epoch names (jobdir_epoch_pick's rule), or NULL. Borrowed
 * from snaps. */
static json_t *snapshot_for_epoch(json_t *snaps, const char *text)
{
    size_t n = json_array_size(snaps), i;
    double *epochs = cd_xmalloc(sizeof *epochs * (n ? n : 1));
    json_t *sn;
    json_array_foreach(snaps, i, sn) epochs[i] = json_number_value(json_object_get(sn, "epoch"));
    int k = jobdir_epoch_pick(epochs, (int)n, text);
    free(epochs);
    return k >= 0 ? json_array_get(snaps, (size_t)k) : NULL;
}

static int load_network(req_t *r, const fields_t *in, json_t *v, netsrc_t *ns, json_t *errors)
{
    server_t *srv = r->srv;
    const char *method = sval(v, "method");
    ns->pretrained[0] = 0;
    if (strcmp(method, "standard") == 0) {
        const char *name = sval(v, "standard_networks");
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.prototxt", srv->cfg.models_dir, name);
        ns->text = cd_read_file(path, &ns->len);
        if (!ns->text) {
            form_add_error(errors, "standard_networks",
                           "Standard network \"%s\" is not installed: cannot read %s (%s); start the server with "
                           "--models DIR",
                           name, path, strerror(errno));
            return CD_ERR;
        }
        ns->desc = json_pack("{s:s, s:s}", "method", "standard", "standard_network", name);
        return CD_OK;
    }
    if (strcmp(method, "custom") == 0) {
        const char *text = sval(v, "custom_network");
        ns->len = strlen(text);
        ns->text = strdup(text);
        if (json_is_string(json_object_get(v, "custom_network_snapshot")))
            snprintf(ns->pretrained, sizeof ns->pretrained, "%s", sval(v, "custom_network_snapshot"));
        ns->desc = json_pack("{s:s}", "method", "custom");
        return ns->text ? CD_OK : CD_ERR;
    }
    /* previous: another model's network, optionally with the weights of one of its epochs */
    const char *prev = sval(v, "previous_networks");
    json_t *old = store_job_get(srv->store, prev);
    if (!old || strcmp(sval(old, "type"), "model") != 0) {
        form_add_error(errors, "previous_networks", "Selected job doesn't exist (%s); maybe it was deleted", prev);
        json_decref(old);
        return CD_ERR;
    }
    char path[PATH_MAX], key[600];
    jobdir_path(sval(old, "dir"), JOBDIR_NETWORK, path, sizeof path);
    ns->text = cd_read_file(path, &ns->len);
    if (!ns->text) {
        form_add_error(errors, "previous_networks", "cannot read the network of job %s (%s)", prev, strerror(errno));
        json_decref(old);
        return CD_ERR;
    }
    snprintf(key, sizeof key, "%s-snapshot", prev);
    const char *es = fields_get(in, key);
    double epoch = es && *es ? atof(es) : 0;
    if (epoch == -1) {
        char tpath[PATH_MAX];
        jobdir_path(sval(old, "dir"), JOBDIR_TRAIN_JSON, tpath, sizeof tpath);
        json_t *tj = json_load_file(tpath, 0, NULL);
        const char *pre = json_string_value(json_object_get(tj, "pretrained"));
        if (pre)
            snprintf(ns->pretrained, sizeof ns->pretrained, "%s", pre);
        json_decref(tj);
    } else if (epoch > 0) {
        json_t *snaps = store_snapshot_list(srv->store, prev);
        json_t *sn = snapshot_for_epoch(snaps, es);
        if (sn) {
            snprintf(ns->pretrained, sizeof ns->pretrained, "%s/%s", sval(old, "dir"), sval(sn, "file"));
            epoch = json_number_value(json_object_get(sn, "epoch"));
        }
        json_decref(snaps);
        if (!ns->pretrained[0] || access(ns->pretrained, R_OK) != 0) {
            form_add_error(errors, "previous_networks",
                           "For the job %s, the snapshot of epoch %s does not exist; pick one of its snapshots (the "
                           "epochs in \"snapshots\" of /models/%s/json)",
                           prev, es, prev);
            json_decref(old);
            return CD_ERR;
        }
    }
    ns->desc = json_pack("{s:s, s:s, s:f}", "method", "previous", "previous_job", prev, "epoch", epoch);
    json_decref(old);
    return CD_OK;
}

const form_field_t *model_form_fields(size_t *n)
{
    *n = CD_ARRAY_LEN(g_model_form);
    return g_model_form;
}

static int have_gpu(const model_gpus_t *have, json_int_t id)
{
    for (int i = 0; i < have->n; i++)
        if (have->ids[i] == id)
            return 1;
    return 0;
}

/* A GPU the server has not got, named by field: how many it has, why, what to do. */
static void missing_gpu(const model_gpus_t *have, json_t *errors, const char *field, json_int_t id)
{
    const char *why = have->why && have->why[0] ? have->why : "no reason known";
    if (have->cpu_only) {
        form_add_error(errors, field,
                       "%s: GPU %lld does not exist here: this server was started for the CPU (--gpus none); "
                       "leave %s out to train on the CPU, or restart the server with --gpus auto",
                       field, (long long)id, field);
        return;
    }
    if (have->n == 0) {
        form_add_error(errors, field,
                       "%s: GPU %lld does not exist here: this server has 0 GPUs (%s); leave %s out to train on "
                       "the CPU",
                       field, (long long)id, why, field);
        return;
    }
    char list[512];
    size_t used = 0;
    for (int i = 0; i < have->n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "", have->ids[i]);
    form_add_error(errors, field, "%s: GPU %lld does not exist here: this server has %d GPU%s (%s); choose %s %s",
                   field, (long long)id, have->n, have->n == 1 ? "" : "s", why,
                   have->n == 1 ? "GPU" : "among GPUs", list);
}

/* What the job asks of the scheduler: GPUs (some count, or exactly these) or the CPU.
 * Without data parallelism the worker trains on the first GPU of its list only, so the
 * job asks for exactly one: count 1, or the first of the listed GPUs; "selected" then
 * keeps what the form asked for, so the job's JSON shows why it holds one GPU. Every
 * listed GPU is still checked: a GPU the server lacks is a mistake either way. */
json_t *model_gpu_request(const model_gpus_t *have, json_t *v, json_t *errors)
{
    static const char *const fields[] = {"select_gpus", "select_gpus_list", "select_gpu"};
    json_t *ids = json_array();
    for (size_t k = 0; k < CD_ARRAY_LEN(fields); k++) {
        const char *field = fields[k];
        json_t *list = json_object_get(v, field), *one = NULL;
        if (k == 2) {
            /* DIGITS's single choice: "next" (its default) is any GPU, as no field is */
            const char *text = sval(v, field);
            if (!text[0] || strcmp(text, "next") == 0)
                continue;
            char *end;
            long long g = strtoll(text, &end, 10);
            if (end == text || *end || g < 0) {
                form_add_error(errors, field, "GPU must be \"next\" or a GPU number; got \"%s\"", text);
                json_decref(ids);
                return NULL;
            }
            list = one = json_pack("[I]", (json_int_t)g);
        }
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x)
        {
            json_int_t g = json_integer_value(x);
            int twice = 0;
            for (size_t j = 0; j < json_array_size(ids); j++)
                twice |= json_integer_value(json_array_get(ids, j)) == g;
            if (!have_gpu(have, g))
                missing_gpu(have, errors, field, g);
            else if (twice)
                form_add_error(errors, field, "GPU %lld is selected twice; select each GPU once", (long long)g);
            else {
                json_array_append(ids, x);
                continue;
            }
            json_decref(one);
            json_decref(ids);
            return NULL;
        }
        json_decref(one);
    }
    int parallel = json_is_true(json_object_get(v, "data_parallel"));
    if (json_array_size(ids)) {
        json_t *out = json_pack("{s:s, s:b}", "kind", "gpu", "data_parallel", parallel);
        if (!parallel && json_array_size(ids) > 1) {
            json_t *first = json_pack("[O]", json_array_get(ids, 0));
            json_object_set_new(out, "selected", json_pack("{s:o}", "ids", ids));
            ids = first;
        }
        json_object_set_new(out, "ids", ids);
        return out;
    }
    json_decref(ids);
    json_t *count = json_object_get(v, "select_gpu_count");
    if (json_is_integer(count) && !have->cpu_only && json_integer_value(count) > have->n) {
        json_int_t asked = json_integer_value(count);
        const char *why = have->why && have->why[0] ? have->why : "no reason known";
        char fix[128]; /* what the user can do instead */
        if (have->n == 0)
            snprintf(fix, sizeof fix, "leave select_gpu_count out to train on the CPU");
        else
            snprintf(fix, sizeof fix, "ask for at most %d", have->n);
        form_add_error(errors, "select_gpu_count",
                       "select_gpu_count: %lld GPU%s asked for, this server has %d (%s); %s", (long long)asked,
                       asked == 1 ? "" : "s", have->n, why, fix);
        return NULL;
    }
    if (have->n == 0)
        return json_pack("{s:s}", "kind", "cpu");
    json_int_t n = json_is_integer(count) ? json_integer_value(count) : 1;
    json_t *out = json_pack("{s:s, s:I, s:b}", "kind", "gpu", "count", parallel ? n : 1, "data_parallel",
                            parallel);
    if (!parallel && n > 1)
        json_object_set_new(out, "selected", json_pack("{s:I}", "count", n));
    return out;
}

/* The server's GPUs for model_gpu_request, and why it has that many. */
static json_t *gpu_request(server_t *srv, json_t *v, json_t *errors)
{
    const char *g = srv->cfg.gpus;
    char why[700];
    if (strcmp(g, "auto") != 0)
        snprintf(why, sizeof why, "--gpus %s", g[0] ? g : "none");
    else if (hw_nvml_loaded(srv->hw))
        snprintf(why, sizeof why, "NVML found %d", hw_gpu_count(srv->hw));
    else
        snprintf(why, sizeof why, "NVML: %s", hw_nvml_reason(srv->hw));
    model_gpus_t have = {srv->gpu_ids, srv->ngpu_ids, strcmp(g, "none") == 0 || !g[0], why};
    return model_gpu_request(&have, v, errors);
}

json_t *model_train_json(json_t *v, const char *dataset_dir, const char *pretrained, double lr, json_t *batch)
{
    json_t *train = json_object();
    if (!train || !dataset_dir)
        goto fail;
    /* the keys the form gives as they are, each under its table name: what v holds, null
     * for an optional field left empty, nothing for one it did not validate */
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        json_t *x = k->field && !strchr(k->key, '.') ? json_object_get(v, k->field) : NULL;
        if (x && json_object_set(train, k->key, x) != 0)
            goto fail;
    }
    json_t *wd = json_object_get(v, "weight_decay");
    json_t *decay = json_is_number(wd) ? json_incref(wd) : json_real(lr / 100.0);
    json_t *start = pretrained && pretrained[0] ? json_string(pretrained) : json_null();
    int bad = json_object_set_new(train, "dataset_dir", json_string(dataset_dir)) |
              json_object_set_new(train, "network", json_string(jobdir_name(JOBDIR_NETWORK))) |
              json_object_set_new(train, "learning_rate", json_real(lr)) |
              json_object_set(train, "batch_size", batch ? batch : json_null()) |
              json_object_set_new(train, "weight_decay", decay) |
              json_object_set_new(train, "lr_policy", lr_policy(v)) | json_object_set_new(train, "pretrained", start);
    /* the server never changes these: its GPUs and resumes are the worker's options */
    bad |= json_object_set_new(train, "backend", json_string("auto")) |
           json_object_set_new(train, "gpus", json_array()) | json_object_set_new(train, "resume", json_false());
    if (!bad)
        return train;
fail:
    json_decref(train);
    return NULL;
}

/* Makes one job of a sweep; returns its brief JSON or NULL after replying. */
static json_t *make_job(req_t *r, json_t *v, json_t *form, json_t *dataset, const netsrc_t *ns, json_t *resources,
                        const char *name, double lr, json_t *batch)
{
    server_t *srv = r->srv;
    char id[64], dir[PATH_MAX];
    cd_err_t err;
    json_t *train = NULL, *conf = NULL, *out = NULL;
    if (api_new_job_dir(srv, id, sizeof id, dir, sizeof dir, &err) != CD_OK) {
        reply_err(r, &err);
        return NULL;
    }
    char path[PATH_MAX];
    jobdir_path(dir, JOBDIR_NETWORK, path, sizeof path);
    if (cd_write_file_atomic(path, ns->text, ns->len) != CD_OK) {
        reply_error(r, 500, "cannot write %s: %s", path, strerror(errno));
        goto fail;
    }
    train = model_train_json(v, json_string_value(json_object_get(dataset, "dir")), ns->pretrained, lr, batch);
    if (!train) {
        reply_error(r, 500, "cannot build %s", jobdir_name(JOBDIR_TRAIN_JSON));
        goto fail;
    }
    if (api_write_json(dir, jobdir_name(JOBDIR_TRAIN_JSON), train, &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    conf = json_pack("{s:O, s:O, s:O}", "network", ns->desc, "train", train, "resources", resources);
    if (conf && generic_job_extension(dataset)) /* a generic model: its dataset's extension */
        json_object_set_new(conf, "extension_id", json_string(generic_job_extension(dataset)));
    store_job_new_t job = {
        .id = id,
        .type = "model",
        .name = name,
        .group = sval(v, "group_name"),
        .username = r->username[0] ? r->username : NULL,
        .dataset_id = sval(dataset, "id"),
        .dir = dir,
        .form = form,
        .config = conf,
    };
    if (api_job_start(srv, &job, "train", "Train Model", &err) != CD_OK) {
        reply_err(r, &err);
        goto fail;
    }
    out = api_job_announce(srv, id);
    json_decref(train);
    json_decref(conf);
    return out;
fail:
    json_decref(train);
    json_decref(conf);
    sched_remove_dir(dir, id);
    return NULL;
}

/* use_mirror is three-valued: absent, empty, "default" or "network" keep the network's
 * transform_param { mirror } (the key is left out of train.json); DIGITS's checkbox
 * values ("y", "1", "true", "on") turn it on and "0", "false", "off" turn it off. Replaces
 * the string in v by true or false, or removes it; an unknown value is a form error. */
static void mirror_choice(json_t *v, json_t *errors)
{
    static const char *const on[] = {"1", "true", "on", "yes", "y", "mirror"};
    static const char *const off[] = {"0", "false", "off", "no", "n", "none"};
    static const char *const net[] = {"", "default", "network"};
    const char *s = json_string_value(json_object_get(v, "use_mirror"));
    if (!s) {
        json_object_del(v, "use_mirror");
        return;
    }
    for (size_t i = 0; i < CD_ARRAY_LEN(net); i++)
        if (strcasecmp(s, net[i]) == 0) {
            json_object_del(v, "use_mirror");
            return;
        }
    for (size_t i = 0; i < CD_ARRAY_LEN(on); i++)
        if (strcasecmp(s, on[i]) == 0) {
            json_object_set_new(v, "use_mirror", json_true());
            return;
        }
    for (size_t i = 0; i < CD_ARRAY_LEN(off); i++)
        if (strcasecmp(s, off[i]) == 0) {
            json_object_set_new(v, "use_mirror", json_false());
            return;
        }
    form_add_error(errors, "use_mirror",
                   "Mirror images (use_mirror) must be true, false or default (the network's "
                   "transform_param); got \"%s\"", s);
    json_object_del(v, "use_mirror");
}

static void check_custom_network(req_t *r, json_t *v, const netsrc_t *ns, json_t *dataset, json_t *errors);

void api_model_create_fields(req_t *r, const fields_t *in)
{
    server_t *srv = r->srv;
    json_t *v = NULL, *errors = NULL, *dataset = NULL, *resources = NULL, *form = NULL, *jobs = NULL;
    netsrc_t ns = {0};
    form_validate(srv, g_model_form, CD_ARRAY_LEN(g_model_form), in, &v, &errors);
    mirror_choice(v, errors);
    const char *ds = sval(v, "dataset");
    if (ds[0]) {
        dataset = store_job_get(srv->store, ds);
        int st = dataset ? (int)json_integer_value(json_object_get(dataset, "state")) : -1;
        if (!dataset || strcmp(sval(dataset, "type"), "dataset") != 0) {
            form_add_error(errors, "dataset", "Dataset \"%s\" does not exist; give the id of a dataset job", ds);
        } else if (st == CD_ST_ERROR || st == CD_ST_ABORT) {
            form_add_error(errors, "dataset", "Dataset \"%s\" is %s; choose a dataset that is Done or still running",
                           ds, cd_state_name(st));
        } else {
            generic_model_dataset_fits(r, dataset, errors);
        }
    }
    if (json_object_size(errors) == 0 && load_network(r, in, v, &ns, errors) == CD_OK &&
        strcmp(sval(v, "method"), "custom") == 0)
        check_custom_network(r, v, &ns, dataset, errors);
    resources = gpu_request(srv, v, errors); /* its errors come with the others */
    placement_request(v, resources);
    if (json_object_size(errors) > 0) {
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    form = fields_to_json(in);
    json_t *lrs = json_object_get(v, "learning_rate"), *bss = json_object_get(v, "batch_size");
    /* batch_size=auto: the worker picks the largest batch that fits (no sweep) */
    json_t *auto_bs = NULL;
    const char *bs_text = fields_get(in, "batch_size");
    if (bs_text && strcasecmp(bs_text, "auto") == 0) {
        auto_bs = json_pack("[s]", "auto");
        bss = auto_bs;
    }
    size_t nlr = json_array_size(lrs), nbs = json_array_size(bss) ? json_array_size(bss) : 1;
    if (nlr * nbs > 64) {
        reply_error(r, 400, "A sweep of %zu learning rates and %zu batch sizes makes %zu jobs; at most 64 at once",
                    nlr, nbs, nlr * nbs);
        goto out;
    }
    jobs = json_array();
    for (size_t b = 0; b < nbs; b++) {
        for (size_t l = 0; l < nlr; l++) {
            double lr = json_number_value(json_array_get(lrs, l));
            json_t *batch = json_array_get(bss, b);
            char name[512];
            int n = snprintf(name, sizeof name, "%s", sval(v, "model_name"));
            if (nlr > 1 && n >= 0 && (size_t)n < sizeof name)
                n += snprintf(name + n, sizeof name - (size_t)n, " learning_rate:%g", lr);
            if (json_array_size(bss) > 1 && n >= 0 && (size_t)n < sizeof name)
                snprintf(name + n, sizeof name - (size_t)n, " batch_size:%d", (int)json_integer_value(batch));
            json_t *one = json_deep_copy(form);
            if (nlr > 1)
                json_object_set_new(one, "learning_rate", json_real(lr));
            if (json_array_size(bss) > 1)
                json_object_set(one, "batch_size", batch);
            json_t *brief = make_job(r, v, one, dataset, &ns, resources, name, lr, batch);
            json_decref(one);
            if (!brief) {
                json_decref(auto_bs);
                goto out; /* replied; the jobs made so far stay */
            }
            json_array_append_new(jobs, brief);
        }
    }
    json_decref(auto_bs);
    if (json_array_size(jobs) == 1)
        api_reply_created(r, json_incref(json_array_get(jobs, 0)));
    else
        api_reply_created(r, json_pack("{s:O}", "jobs", jobs));
out:
    free(ns.text);
    json_decref(ns.desc);
    json_decref(v);
    json_decref(errors);
    json_decref(dataset);
    json_decref(resources);
    json_decref(form);
    json_decref(jobs);
}

void h_model_create(req_t *r) { api_model_create_fields(r, r->fields); }

void h_model_resume(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    cd_err_t err;
    double epoch = 0;
    if (!api_may_edit(r, job)) {
        reply_error(r, 403, "Job %s belongs to %s; only its owner may resume it", sval(job, "id"),
                    sval(job, "username"));
    } else if (sched_resume(r->srv->sched, sval(job, "id"), &epoch, &err) != CD_OK) {
        reply_err(r, &err);
    } else {
        json_t *row = store_job_get(r->srv->store, sval(job, "id"));
        json_t *out = row ? view_job_brief(row) : json_object();
        json_object_set_new(out, "resumed_from_epoch", epoch == floor(epoch) ? json_integer((json_int_t)epoch)
                                                                               : json_real(epoch));
        reply_json(r, 200, out);
        json_decref(row);
    }
    json_decref(job);
}

void h_model_metrics(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    const char *after = fields_get(r->fields, "after"), *all = fields_get(r->fields, "all");
    const char *limit = fields_get(r->fields, "limit");
    const char *id = sval(job, "id");
    json_t *metrics = store_metric_list(r->srv->store, id, after ? strtoll(after, NULL, 10) : 0,
                                        limit ? atoi(limit) : 0, field_truthy(all));
    reply_json(r, 200, json_pack("{s:s, s:o, s:o, s:o}", "id", id, "metrics", metrics, "summary",
                                 store_metric_summary(r->srv->store, id), "snapshots",
                                 store_snapshot_list(r->srv->store, id)));
    json_decref(job);
}

/* DIGITS's /models/visualize-lr: 101 points of each learning rate's curve. */
void h_visualize_lr(req_t *r)
{
    const fields_t *f = r->fields;
    const char *policy = fields_get(f, "lr_policy");
    const char *lrs = fields_get(f, "learning_rate");
    if (!policy || !lrs) {
        json_t *errors = json_object();
        if (!policy)
            form_add_error(errors, "lr_policy", "Policy is required");
        if (!lrs)
            form_add_error(errors, "learning_rate", "Base learning rate is required");
        reply_form_errors(r, errors);
        return;
    }
    int type = cd_lr_type_parse(policy);
    if (type < 0) {
        reply_error(r, 400, "Invalid policy \"%s\": use fixed, step, multistep, exp, inv, poly or sigmoid", policy);
        return;
    }
    /* the rates and the policy's fields checked as the model form checks them (their
     * rows in g_model_form: types and bounds), a field left out taking its default */
    form_field_t spec[1 + CD_LR_ARG_COUNT];
    size_t n = 0;
    spec[n++] = *model_form_row("learning_rate");
    for (int a = 0; a < CD_LR_ARG_COUNT; a++)
        if (cd_lr_field(type, a)) {
            spec[n] = *model_form_row(cd_lr_field(type, a));
            spec[n].when = ALWAYS;
            spec[n++].required = 0;
        }
    json_t *v = NULL, *errors = NULL;
    form_validate(r->srv, spec, n, f, &v, &errors);
    if (json_object_size(errors) > 0) {
        json_decref(v);
        reply_form_errors(r, errors);
        return;
    }
    json_decref(errors);
    cd_lr_policy p;
    lr_from_form(&p, type, v);
    json_t *columns = json_array(), *lr;
    size_t j;
    json_array_foreach(json_object_get(v, "learning_rate"), j, lr) {
        p.base_lr = json_number_value(lr);
        double y[101];
        cd_lr_preview(&p, y, 101);
        char label[64];
        snprintf(label, sizeof label, "Learning Rate %zu", j);
        json_t *col = json_pack("[s]", label);
        for (int i = 0; i <= 100; i++)
            json_array_append_new(col, isfinite(y[i]) ? json_real(y[i]) : json_null());
        json_array_append_new(columns, col);
    }
    json_decref(v);
    reply_json(r, 200, json_pack("{s:{s:o}}", "data", "columns", columns));
}

/* ---- the table of training settings ---------------------------------------------------- */

/* A bound or default as JSON: a whole number as an integer, null for none (NAN). */
static json_t *number_json(double x)
{
    if (isnan(x))
        return json_null();
    return x == floor(x) && fabs(x) < 9007199254740992.0 ? json_integer((json_int_t)x) : json_real(x);
}

static json_t *default_json(const cd_train_key *k)
{
    if (!k->def)
        return json_null();
    if (k->type == CD_TK_NUMBER || k->type == CD_TK_INT)
        return number_json(atof(k->def));
    if (k->type == CD_TK_BOOL)
        return json_boolean(strcmp(k->def, "true") == 0);
    return json_string(k->def);
}

/* GET /models/train-keys/json: every row of the table of training settings
 * (cdigits/train_keys.h), from which the browser's model form takes its limits:
 * {"keys": [{key, field, type, min, max, default, choices, label, doc}]}; field,
 * min, max, default and choices are null where the row has none. */
void h_train_keys(req_t *r)
{
    json_t *keys = json_array();
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        json_t *choices = k->choices ? json_array() : json_null();
        char name[64];
        for (int c = 0; k->choices && cd_train_key_choice_name(k, c, name, sizeof name)[0]; c++)
            json_array_append_new(choices, json_string(name));
        json_t *row = json_pack("{s:s, s:s?, s:s, s:o, s:o, s:o, s:o, s:s, s:s}", "key", k->key, "field", k->field,
                                "type", cd_train_key_type_name(k->type), "min", number_json(k->lo), "max",
                                number_json(k->hi), "default", default_json(k), "choices", choices, "label",
                                k->label, "doc", k->doc);
        if (!row || json_array_append_new(keys, row) != 0) {
            json_decref(keys);
            reply_error(r, 500, "cannot encode the training setting %s", k->key);
            return;
        }
    }
    reply_json(r, 200, json_pack("{s:o}", "keys", keys));
}

/* ---- standard networks ------------------------------------------------------------------ */

/* The file of the standard network `name` (letters, digits, "-" and "_") in the models
 * folder (--models), resolved inside it; CD_ERR when there is none. */
static int standard_path(server_t *srv, const char *name, char *path, size_t len)
{
    char base[PATH_MAX], file[PATH_MAX];
    int ok = name[0] != 0;
    for (const char *c = name; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
             *c == '_';
    if (!ok || snprintf(file, sizeof file, "%s.prototxt", name) >= (int)sizeof file)
        return CD_ERR;
    if (!realpath(srv->cfg.models_dir, base) || paths_resolve_under(base, file, path, len) != CD_OK)
        return CD_ERR;
    return access(path, R_OK) == 0 ? CD_OK : CD_ERR;
}

/* GET /models/standard/<name>.prototxt: a file of the models folder (--models), for the
 * form's Customize. */
void h_model_standard(req_t *r)
{
    const char *file = r->params[0];
    static const char ext[] = ".prototxt";
    size_t n = strlen(file), e = sizeof ext - 1;
    char name[256], path[PATH_MAX];
    int ok = n > e && n - e < sizeof name && strcmp(file + n - e, ext) == 0;
    if (ok)
        snprintf(name, sizeof name, "%.*s", (int)(n - e), file);
    if (!ok || standard_path(r->srv, name, path, sizeof path) != CD_OK) {
        reply_error(r, 404, "No standard network \"%s\" in %s; the standard networks are models/NAME.prototxt "
                            "(lenet, alexnet, googlenet; start the server with --models DIR)",
                    file, r->srv->cfg.models_dir[0] ? r->srv->cfg.models_dir : "(no models folder)");
        return;
    }
    reply_file(r, path);
}

/* The weights that DIGITS's customize names for a model job and snapshot_epoch: none for
 * 0, the job's own starting weights (train.json's pretrained) for -1, else the snapshot
 * of that epoch; a pretrained model's weights whatever the epoch. NULL when there are
 * none. */
static json_t *customize_snapshot(server_t *srv, json_t *job, double epoch, const char *text)
{
    const char *id = sval(job, "id"), *dir = sval(job, "dir");
    int pretrained = view_job_is_pretrained(job);
    json_t *out = json_null();
    if (epoch == 0 && !pretrained)
        return out;
    if (epoch == -1 && !pretrained) {
        char tpath[PATH_MAX];
        jobdir_path(dir, JOBDIR_TRAIN_JSON, tpath, sizeof tpath);
        json_t *tj = json_load_file(tpath, 0, NULL);
        const char *pre = json_string_value(json_object_get(tj, "pretrained"));
        if (pre && pre[0])
            out = json_string(pre);
        json_decref(tj);
        return out;
    }
    json_t *snaps = store_snapshot_list(srv->store, id);
    json_t *sn = pretrained ? json_array_get(snaps, json_array_size(snaps) - 1) : snapshot_for_epoch(snaps, text);
    if (sn) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, sval(sn, "file"));
        json_t *p = json_string(path);
        out = p ? p : out;
    }
    json_decref(snaps);
    return out;
}

/* POST /models/customize?network=NAME|JOB_ID (DIGITS's Customize link): a standard
 * network's text as {"network"}, or a model job's network with the weights of
 * snapshot_epoch as {"network", "snapshot"} (snapshot null where there are none). */
void h_model_customize(req_t *r)
{
    server_t *srv = r->srv;
    const char *network = fields_get(r->fields, "network");
    if (!network || !network[0]) {
        reply_error(r, 400, "network not provided: give ?network=NAME (lenet, alexnet, googlenet) or a model job id");
        return;
    }
    char path[PATH_MAX];
    size_t len = 0;
    if (standard_path(srv, network, path, sizeof path) == CD_OK) {
        char *text = cd_read_file(path, &len);
        if (!text) {
            reply_error(r, 500, "cannot read the standard network %s: %s", path, strerror(errno));
            return;
        }
        json_t *s = json_stringn(text, len);
        free(text);
        if (!s) {
            reply_error(r, 500, "the standard network %s is not UTF-8 text", path);
            return;
        }
        reply_json(r, 200, json_pack("{s:o}", "network", s));
        return;
    }
    json_t *job = store_job_get(srv->store, network);
    if (!job || strcmp(sval(job, "type"), "model") != 0) {
        reply_error(r, 404, "Job not found: \"%s\" is neither a standard network (lenet, alexnet, googlenet) nor a "
                            "model job",
                    network);
        json_decref(job);
        return;
    }
    const char *es = fields_get(r->fields, "snapshot_epoch");
    char *end = NULL;
    double epoch = es && *es ? strtod(es, &end) : 0;
    if (es && *es && (end == es || *end)) {
        char msg[600];
        snprintf(msg, sizeof msg, "snapshot_epoch must be a number (0: no weights, -1: the job's own starting weights, "
                                  "or an epoch with a snapshot); got \"%.400s\"", es);
        reply_field_error(r, "snapshot_epoch", msg);
        json_decref(job);
        return;
    }
    jobdir_path(sval(job, "dir"), JOBDIR_NETWORK, path, sizeof path);
    char *text = cd_read_file(path, &len);
    json_t *s = text ? json_stringn(text, len) : NULL;
    free(text);
    if (!s) {
        reply_error(r, 500, "cannot read the network of job %s at %s: %s", network, path,
                    errno ? strerror(errno) : "not UTF-8 text");
        json_decref(job);
        return;
    }
    reply_json(r, 200, json_pack("{s:o, s:o}", "network", s, "snapshot", customize_snapshot(srv, job, epoch, es)));
    json_decref(job);
}

/* ---- the network view: the engine's shapes ------------------------------------------------- */

#define CHECKNET_SECONDS 15.0     /* a check builds three graphs without memory: well under 1 s */
#define CHECKNET_WAIT_SECONDS 5.0 /* for a free inference slot; then 503 with Retry-After */

static form_field_t g_visualize_form[] = {
    {"method", F_CHOICE, "standard", NAN, NAN, "standard|custom|previous", ALWAYS, 1, "Network type (method)"},
    {"standard_networks", F_CHOICE, NULL, NAN, NAN, "lenet|alexnet|googlenet", "method=standard", 1,
     "Standard network"},
    {"custom_network", F_TEXT, NULL, NAN, NAN, NULL, "method=custom", 1, "Custom network"},
    {"previous_networks", F_STRING, NULL, NAN, NAN, NULL, "method=previous", 1, "Previous network"},
    {"dataset", F_STRING, NULL, NAN, NAN, NULL, ALWAYS, 0, "Dataset"},
    TRAIN("crop_size", F_INT, ALWAYS, 0),
    TRAIN("batch_size", F_INTS, "batch_size!=auto", 0),
};

/* The TRAIN rows of both forms from the table of training settings: what a form
 * accepts, the worker accepts. Runs once, before main, so the forms are never seen
 * half filled. A field without a row keeps its name as its label (test_server_model_form
 * checks that there is none). */
__attribute__((constructor)) static void forms_from_keys(void)
{
    struct {
        form_field_t *rows;
        size_t n;
    } forms[] = {{g_model_form, CD_ARRAY_LEN(g_model_form)}, {g_visualize_form, CD_ARRAY_LEN(g_visualize_form)}};
    for (size_t f = 0; f < CD_ARRAY_LEN(forms); f++)
        for (size_t i = 0; i < forms[f].n; i++) {
            form_field_t *row = &forms[f].rows[i];
            if (row->label)
                continue;
            const cd_train_key *k = cd_train_key_by_field(row->name);
            row->label = k ? k->label : row->name;
            if (!k)
                continue;
            row->def = k->def;
            row->min = k->lo;
            row->max = k->hi;
            row->choices = k->choices;
        }
}

/* The worker's options for the dataset: --input CxHxW, --classes N and, for a generic
 * dataset, --label CxHxW (the labels' shape). Each is empty when unknown. */
typedef struct dataset_opts {
    char input[64], classes[32], label[64];
} dataset_opts;

static int dataset_args(req_t *r, const char *id, dataset_opts *o, json_t *errors)
{
    json_t *job = store_job_get(r->srv->store, id);
    if (!job || strcmp(sval(job, "type"), "dataset") != 0) {
        form_add_error(errors, "dataset", "Dataset \"%s\" does not exist; give the id of a dataset job", id);
        json_decref(job);
        return CD_ERR;
    }
    json_t *d = view_job_detail(r->srv, job);
    json_t *dims = json_object_get(d, "image_dims"), *labels = json_object_get(d, "labels");
    if (json_array_size(dims) != 3) /* a generic dataset's */
        dims = json_object_get(d, "feature_dims");
    json_t *ls = json_object_get(d, "label_shape"); /* [c, h, w] */
    if (json_array_size(dims) == 3)
        snprintf(o->input, sizeof o->input, "%dx%dx%d", (int)json_integer_value(json_array_get(dims, 2)),
                 (int)json_integer_value(json_array_get(dims, 0)), (int)json_integer_value(json_array_get(dims, 1)));
    if (json_array_size(labels) > 0)
        snprintf(o->classes, sizeof o->classes, "%zu", json_array_size(labels));
    if (json_array_size(ls) == 3)
        snprintf(o->label, sizeof o->label, "%dx%dx%d", (int)json_integer_value(json_array_get(ls, 0)),
                 (int)json_integer_value(json_array_get(ls, 1)), (int)json_integer_value(json_array_get(ls, 2)));
    json_decref(d);
    json_decref(job);
    return CD_OK;
}

/* What a check of a network gives: the engine's JSON with its messages naming the
 * network as the form does, or why there is none (the HTTP status and the text). */
typedef struct netcheck {
    json_t *result; /* {stages, errors, ...}; NULL when the check did not run */
    int status;     /* without a result: 503 no free slot, 500 the worker failed */
    char why[1024];
} netcheck_t;

/* Runs `cdigits-worker check-net --json` on ns's text under an inference slot, with the
 * dataset's image shape and classes (input, classes: empty for none), the crop and the
 * first batch size of v. The network goes to the worker in a temporary file, whose name
 * in messages is replaced by what the form calls the network (custom_network,
 * lenet.prototxt, JOB/network.prototxt). CD_OK with c->result, or CD_ERR with
 * c->status and c->why. */
static int check_network(server_t *srv, json_t *v, const netsrc_t *ns, const dataset_opts *d, int parse_only,
                         netcheck_t *c)
{
    char tmp[PATH_MAX], crop[32] = "", batch[32] = "";
    char *out = NULL, *errout = NULL;
    int rc = CD_ERR;
    c->result = NULL;
    c->status = 500;
    c->why[0] = 0;
    if (json_is_integer(json_object_get(v, "crop_size")))
        snprintf(crop, sizeof crop, "%d", (int)json_integer_value(json_object_get(v, "crop_size")));
    if (json_is_integer(json_array_get(json_object_get(v, "batch_size"), 0)))
        snprintf(batch, sizeof batch, "%d", (int)json_integer_value(json_array_get(json_object_get(v, "batch_size"), 0)));
    snprintf(tmp, sizeof tmp, "%s/../tmp/network-XXXXXX.prototxt", srv->jobs_dir);
    int fd = mkstemps(tmp, (int)strlen(".prototxt"));
    if (fd < 0 || write(fd, ns->text, ns->len) != (ssize_t)ns->len) {
        snprintf(c->why, sizeof c->why, "cannot write the network to %s: %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return CD_ERR;
    }
    close(fd);
    struct {
        const char *flag, *value;
    } opts[] = {{"--input", d->input}, {"--classes", d->classes}, {"--label", d->label}, {"--crop", crop},
                {"--batch", batch}};
    char *argv[16];
    int n = 0;
    argv[n++] = srv->cfg.worker;
    argv[n++] = "check-net";
    argv[n++] = tmp;
    argv[n++] = "--json";
    for (size_t i = 0; i < CD_ARRAY_LEN(opts); i++)
        if (opts[i].value[0]) {
            argv[n++] = (char *)opts[i].flag;
            argv[n++] = (char *)opts[i].value;
        }
    if (parse_only)
        argv[n++] = "--parse-only";
    argv[n] = NULL;
    int status;
    cd_err_t ce;
    if (sched_run_check(srv->sched, argv, CHECKNET_WAIT_SECONDS, CHECKNET_SECONDS, &out, &errout, &status, &ce) !=
        CD_OK) {
        c->status = ce.kind == CD_E_CONFLICT ? 503 : 500;
        snprintf(c->why, sizeof c->why, "%s", ce.msg);
        goto out;
    }
    /* the temporary name means nothing to the user: messages name the network as the form does */
    const char *method = sval(v, "method");
    char label[600];
    if (strcmp(method, "standard") == 0)
        snprintf(label, sizeof label, "%s.prototxt", sval(v, "standard_networks"));
    else if (strcmp(method, "previous") == 0)
        snprintf(label, sizeof label, "%s/network.prototxt", sval(v, "previous_networks"));
    else
        snprintf(label, sizeof label, "custom_network");
    char *named = out ? api_replace_all(out, tmp, label, NULL) : NULL;
    json_t *result = named ? json_loads(named, 0, NULL) : NULL;
    free(named);
    if (!json_is_object(result) || !json_is_object(json_object_get(result, "stages"))) {
        char *why = errout ? api_replace_all(errout, tmp, label, NULL) : NULL;
        snprintf(c->why, sizeof c->why, "the worker %s could not check the network (exit status %d): %.600s",
                 srv->cfg.worker, status,
                 why && why[0] ? why : "it printed no result; is it a cdigits-worker with check-net --json?");
        free(why);
        json_decref(result);
        goto out;
    }
    json_object_set_new(result, "network", json_string(label));
    c->result = result;
    rc = CD_OK;
out:
    unlink(tmp);
    free(out);
    free(errout);
    return rc;
}

/* POST /models/visualize-network/json: the model form's network fields (method,
 * standard_networks, custom_network, previous_networks, dataset, crop_size, batch_size)
 * checked by the engine: {"stages": {"train"|"val"|"deploy": {"layers", "params"}},
 * "errors", "input", "classes", "crop", "network"}. A network the engine refuses is an
 * answer (200 with errors), not a failure. DIGITS's POST /models/visualize-network
 * (?framework=caffe, custom_network alone: a custom network) gets the same as a page
 * unless it asks for JSON (http_wants_json). */
void h_visualize_network(req_t *r)
{
    server_t *srv = r->srv;
    json_t *v = NULL, *errors = NULL;
    netsrc_t ns = {0};
    dataset_opts d = {0};
    const char *fw = fields_get(r->fields, "framework");
    if (fw && *fw && strcmp(fw, "caffe") != 0 && strcmp(fw, "cdigits") != 0) {
        reply_field_error(r, "framework", "framework must be caffe: cdigits runs Caffe networks (Torch and "
                                          "TensorFlow are not provided); send framework=caffe or leave it out");
        return;
    }
    /* DIGITS's network view posts the custom network alone */
    if (!fields_get(r->fields, "method") && fields_get(r->fields, "custom_network") &&
        fields_add(r->fields, "method", "custom", strlen("custom"), NULL) != CD_OK) {
        reply_error(r, 500, "out of memory reading the network view's fields");
        return;
    }
    form_validate(srv, g_visualize_form, CD_ARRAY_LEN(g_visualize_form), r->fields, &v, &errors);
    const char *ds = sval(v, "dataset");
    if (json_object_size(errors) == 0 && ds[0])
        dataset_args(r, ds, &d, errors);
    if (json_object_size(errors) == 0)
        load_network(r, r->fields, v, &ns, errors);
    if (json_object_size(errors) > 0) {
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    netcheck_t c;
    if (check_network(srv, v, &ns, &d, 0, &c) != CD_OK) {
        reply_error(r, c.status, "%s", c.why);
        if (c.status == 503)
            reply_add_header(r, "Retry-After", "1");
        goto out;
    }
    if (req_wants_json(r)) {
        reply_json(r, 200, c.result);
    } else {
        network_page_reply(r, c.result);
        json_decref(c.result);
    }
out:
    free(ns.text);
    json_decref(ns.desc);
    json_decref(v);
    json_decref(errors);
}

/* DIGITS validates a custom network when the model is created: one that does not parse
 * as a NetParameter, or holds a field Caffe's messages lack, is a form error on
 * custom_network naming custom_network:LINE:COL as the network view does. As in DIGITS
 * the stages are not built here: an unknown layer type or a shape that does not fit
 * passes, and the job's training says what is wrong. A sweep is checked once (its jobs
 * share the network). When no check can run (no free slot, no worker) the job is made
 * and its worker checks the network. */
static void check_custom_network(req_t *r, json_t *v, const netsrc_t *ns, json_t *dataset, json_t *errors)
{
    dataset_opts d = {0};
    if (dataset_args(r, sval(dataset, "id"), &d, errors) != CD_OK)
        return;
    netcheck_t c;
    if (check_network(r->srv, v, ns, &d, 1, &c) != CD_OK) {
        cd_warn("the custom network of model \"%s\" was not checked at creation (%s); its worker checks it",
                sval(v, "model_name"), c.why);
        return;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(c.result, "errors"), i, e)
    {
        const char *m = json_string_value(e);
        form_add_error(errors, "custom_network", "%s", m ? m : "the engine refused the network");
    }
    json_decref(c.result);
}
