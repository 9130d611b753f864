/* The model form without a server: its GPU fields checked against the GPUs a server
 * has (random servers and requests, against a reference written out here), the limits
 * of precision, early stopping and batch size in its field table, and why NVML is not
 * loaded (a missing library, a library that is not NVML, NVML turned off). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/server/internal.h"
#include "cdigits/train.h"
#include "cdigits/train_keys.h"
#include "testutil.h"

static server_t g_srv; /* form_validate reads the data roots only for path fields */

/* The model form's values for an urlencoded body, as the handler gets them. */
static json_t *form_values(const char *body)
{
    fields_t *f = fields_new();
    CHECK(fields_parse_urlencoded(f, body, strlen(body)) == CD_OK, "parse %s", body);
    size_t n;
    const form_field_t *spec = model_form_fields(&n);
    json_t *v = NULL, *e = NULL;
    form_validate(&g_srv, spec, n, f, &v, &e);
    json_decref(e);
    fields_free(f);
    return v;
}

/* The form's errors for body (the whole form: dataset and name given). */
static json_t *form_errors(const char *extra)
{
    char body[1024];
    snprintf(body, sizeof body, "dataset=d&model_name=m&method=custom&custom_network=x%s%s", extra[0] ? "&" : "",
             extra);
    fields_t *f = fields_new();
    fields_parse_urlencoded(f, body, strlen(body));
    size_t n;
    const form_field_t *spec = model_form_fields(&n);
    json_t *v = NULL, *e = NULL;
    form_validate(&g_srv, spec, n, f, &v, &e);
    json_decref(v);
    fields_free(f);
    return e;
}

static const char *first_error(json_t *errors, const char *field)
{
    const char *s = json_string_value(json_array_get(json_object_get(errors, field), 0));
    return s ? s : "";
}

/* A random server: n GPUs with distinct ids below 8 (as --gpus 1,3 gives), ascending. */
static int random_gpus(int *ids)
{
    int n = 0;
    for (int g = 0; g < 8; g++)
        if (cd_test_rand_u64() % 2)
            ids[n++] = g;
    if (cd_test_rand_u64() % 4 == 0)
        n = 0;
    return n;
}

static void test_gpu_count(void)
{
    int ids[8];
    for (int round = 0; round < 200; round++) {
        int n = random_gpus(ids);
        int cpu_only = n == 0 && cd_test_rand_u64() % 2;
        const char *why = cpu_only ? "--gpus none" : n ? "--gpus 0,1" : "NVML: libnvidia-ml.so.1 not found";
        model_gpus_t have = {ids, n, cpu_only, why};
        int asked = 1 + (int)(cd_test_rand_u64() % 9), parallel = (int)(cd_test_rand_u64() % 2);
        char body[256];
        snprintf(body, sizeof body, "select_gpu_count=%d&data_parallel=%s", asked, parallel ? "true" : "false");
        json_t *v = form_values(body), *errors = json_object();
        json_t *res = model_gpu_request(&have, v, errors);
        /* the reference: a count beyond the server's GPUs is refused unless it was started
         * for the CPU; without GPUs the model trains on the CPU; without data parallelism
         * a job asks for one GPU and keeps the count it was given */
        if (!cpu_only && asked > n) {
            const char *msg = first_error(errors, "select_gpu_count");
            char has[64];
            snprintf(has, sizeof has, "this server has %d (", n);
            CHECK(!res && strstr(msg, "select_gpu_count: ") == msg && strstr(msg, has) && strstr(msg, why),
                  "%d of %d GPUs: \"%s\" names the field, the count and why", asked, n, msg);
            CHECK(strstr(msg, n ? "ask for at most" : "to train on the CPU") != NULL, "and says what to do: %s", msg);
        } else if (n == 0) {
            CHECK(res && !strcmp(json_string_value(json_object_get(res, "kind")), "cpu") && !json_object_size(errors),
                  "%d GPUs on a server started for the CPU train on the CPU", asked);
        } else {
            json_int_t count = json_integer_value(json_object_get(res, "count"));
            json_t *sel = json_object_get(res, "selected");
            CHECK(res && !strcmp(json_string_value(json_object_get(res, "kind")), "gpu") &&
                      count == (parallel ? asked : 1),
                  "%d of %d GPUs, data parallel %d: a request for %lld", asked, n, parallel, (long long)count);
            CHECK(json_is_true(json_object_get(res, "data_parallel")) == parallel &&
                      (parallel || asked == 1 ? !sel : json_integer_value(json_object_get(sel, "count")) == asked),
                  "data_parallel and the selected count are kept");
        }
        json_decref(res);
        json_decref(errors);
        json_decref(v);
    }
}

static void test_gpu_ids(void)
{
    int ids[8];
    static const char *const fields[] = {"select_gpus", "select_gpus_list", "select_gpu"};
    for (int round = 0; round < 300; round++) {
        int n = random_gpus(ids);
        int cpu_only = n == 0 && cd_test_rand_u64() % 2;
        model_gpus_t have = {ids, n, cpu_only, cpu_only ? "--gpus none" : "NVML found 2"};
        int k = (int)(cd_test_rand_u64() % 3);
        int want[4], nwant = k == 2 ? 1 : 1 + (int)(cd_test_rand_u64() % 4);
        char body[256];
        size_t used = (size_t)snprintf(body, sizeof body, "%s=", fields[k]);
        for (int i = 0; i < nwant; i++) {
            want[i] = (int)(cd_test_rand_u64() % 8);
            used += (size_t)snprintf(body + used, sizeof body - used, "%s%d", i ? "," : "", want[i]);
        }
        json_t *v = form_values(body), *errors = json_object();
        json_t *res = model_gpu_request(&have, v, errors);
        /* the reference: the first GPU the server lacks, else the first one named twice */
        int missing = -1, twice = -1;
        for (int i = 0; i < nwant && missing < 0 && twice < 0; i++) {
            int found = 0;
            for (int j = 0; j < n; j++)
                found |= ids[j] == want[i];
            for (int j = 0; j < i; j++)
                if (want[j] == want[i] && found)
                    twice = want[i];
            if (!found)
                missing = want[i];
        }
        const char *msg = first_error(errors, fields[k]);
        if (missing >= 0) {
            char gpu[64];
            snprintf(gpu, sizeof gpu, "%s: GPU %d does not exist here", fields[k], missing);
            CHECK(!res && strstr(msg, gpu) == msg && strstr(msg, have.why), "%s: \"%s\" names GPU %d and why", body,
                  msg, missing);
        } else if (twice >= 0) {
            char text[96];
            snprintf(text, sizeof text, "GPU %d is selected twice; select each GPU once", twice);
            CHECK(!res && !strcmp(msg, text), "%s: \"%s\"", body, msg);
        } else {
            json_t *got = json_object_get(res, "ids");
            int same = res && json_array_size(got) == (size_t)nwant;
            for (int i = 0; same && i < nwant; i++)
                same = json_integer_value(json_array_get(got, (size_t)i)) == want[i];
            CHECK(same && !json_object_size(errors), "%s: exactly those GPUs, in order", body);
        }
        json_decref(res);
        json_decref(errors);
        json_decref(v);
    }
    /* DIGITS's single choice: "next" asks for nothing in particular; a word is refused */
    int two[] = {0, 1};
    model_gpus_t none = {NULL, 0, 0, "NVML: x"}, some = {two, 2, 0, "NVML found 2"};
    json_t *v = form_values("select_gpu=next"), *errors = json_object();
    json_t *res = model_gpu_request(&none, v, errors);
    CHECK(res && !strcmp(json_string_value(json_object_get(res, "kind")), "cpu"),
          "select_gpu=next without GPUs: the CPU");
    json_decref(res);
    res = model_gpu_request(&some, v, errors);
    CHECK(res && json_integer_value(json_object_get(res, "count")) == 1, "select_gpu=next with GPUs: any one");
    json_decref(res);
    json_decref(v);
    v = form_values("select_gpu=first");
    res = model_gpu_request(&some, v, errors);
    CHECK(!res && strstr(first_error(errors, "select_gpu"), "\"first\""), "select_gpu=first is refused: %s",
          first_error(errors, "select_gpu"));
    json_decref(v);
    json_decref(errors);
    /* no GPU field at all: the CPU without GPUs, one GPU with them (DIGITS's default) */
    v = form_values("model_name=m");
    errors = json_object();
    res = model_gpu_request(&none, v, errors);
    CHECK(res && !strcmp(json_string_value(json_object_get(res, "kind")), "cpu") && !json_object_size(errors),
          "no GPU field and no GPU: the CPU, no error");
    json_decref(res);
    res = model_gpu_request(&some, v, errors);
    CHECK(res && json_integer_value(json_object_get(res, "count")) == 1, "no GPU field and GPUs: one of them");
    json_decref(res);
    json_decref(errors);
    json_decref(v);
}

static void test_limits(void)
{
    static const char *const precisions[] = {"fp32", "tf32", "fp16", "bf16"};
    for (size_t i = 0; i < 4; i++) {
        char extra[64];
        snprintf(extra, sizeof extra, "precision=%s", precisions[i]);
        json_t *e = form_errors(extra);
        CHECK(!json_object_size(e), "precision %s is accepted", precisions[i]);
        json_decref(e);
    }
    json_t *e = form_errors("precision=fp8");
    CHECK(strstr(first_error(e, "precision"), "fp32,tf32,fp16,bf16"), "fp8 is refused with the choices: %s",
          first_error(e, "precision"));
    json_decref(e);

    /* patience: a whole number from 0 (off) to 1000000; a random one inside, one outside */
    int p = (int)(cd_test_rand_u64() % 1000001);
    char extra[128];
    snprintf(extra, sizeof extra, "early_stopping_patience=%d&early_stopping_min_delta=%g", p,
             cd_test_uniform(0, 1));
    e = form_errors(extra);
    CHECK(!json_object_size(e), "patience %d and a min delta in [0, 1) are accepted", p);
    json_decref(e);
    e = form_errors("early_stopping_patience=-1");
    CHECK(!strcmp(first_error(e, "early_stopping_patience"),
                  "Early stopping patience must be between 0 and 1000000; got -1"),
          "patience -1: \"%s\"", first_error(e, "early_stopping_patience"));
    json_decref(e);
    e = form_errors("early_stopping_patience=2.5&early_stopping_min_delta=-0.01");
    CHECK(strstr(first_error(e, "early_stopping_patience"), "whole number") &&
              strstr(first_error(e, "early_stopping_min_delta"), "Early stopping minimum change must be between 0"),
          "patience 2.5 and min delta -0.01 are refused: %s / %s", first_error(e, "early_stopping_patience"),
          first_error(e, "early_stopping_min_delta"));
    json_decref(e);

    /* batch size: auto (any case) is not a number to check; 0 and lists with a word are */
    e = form_errors("batch_size=auto");
    CHECK(!json_object_size(e), "batch_size=auto is accepted");
    json_decref(e);
    e = form_errors("batch_size=AUTO&batch_accumulation=4");
    CHECK(!json_object_size(e), "batch_size=AUTO with accumulation 4 is accepted");
    json_decref(e);
    e = form_errors("batch_size=0");
    CHECK(strstr(first_error(e, "batch_size"), "Batch size must be between 1"), "batch_size=0: %s",
          first_error(e, "batch_size"));
    json_decref(e);
    e = form_errors("batch_size=16,auto");
    CHECK(json_object_get(e, "batch_size") != NULL, "auto in a sweep is refused: %s", first_error(e, "batch_size"));
    json_decref(e);
    /* the worker takes at most 1024 accumulated batches: the form says so first */
    e = form_errors("batch_accumulation=1025");
    CHECK(!strcmp(first_error(e, "batch_accumulation"), "Batch accumulation must be between 1 and 1024; got 1025"),
          "accumulation 1025: %s", first_error(e, "batch_accumulation"));
    json_decref(e);
}

static void test_nvml(void)
{
    const char *tmp = cd_test_tmpdir();
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/no-such-dir/libnvidia-ml.so.1", tmp);
    struct {
        const char *env, *says;
    } cases[] = {
        {lib, "not found (no NVIDIA driver)"},
        {"", "NVML disabled (CDIGITS_NVML is empty)"},
        {"libm.so.6", "libm.so.6 lacks nvmlInit_v2"}, /* a library that is not NVML */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("CDIGITS_NVML", cases[i].env, 1);
        char why[512] = "x";
        cd_hw_t *hw = hw_open(why, sizeof why);
        CHECK(hw && !hw_nvml_loaded(hw) && hw_gpu_count(hw) == 0, "CDIGITS_NVML=%s: not loaded", cases[i].env);
        CHECK(strstr(hw_nvml_reason(hw), cases[i].says) && !strcmp(why, hw_nvml_reason(hw)),
              "CDIGITS_NVML=%s: \"%s\" says %s", cases[i].env, hw_nvml_reason(hw), cases[i].says);
        json_t *j = hw_nvml_json(hw), *gpus = hw_gpus_json(hw);
        CHECK(json_is_false(json_object_get(j, "loaded")) &&
                  !strcmp(json_string_value(json_object_get(j, "reason")), hw_nvml_reason(hw)),
              "nvml JSON {loaded: false, reason}");
        CHECK(json_is_array(gpus) && json_array_size(gpus) == 0, "no GPU listed");
        json_decref(j);
        json_decref(gpus);
        hw_close(hw);
    }
    /* this machine's own NVML, whatever it has: loaded with no reason, or a reason */
    unsetenv("CDIGITS_NVML");
    cd_hw_t *hw = hw_open(NULL, 0);
    json_t *j = hw_nvml_json(hw);
    int loaded = json_is_true(json_object_get(j, "loaded"));
    const char *reason = json_string_value(json_object_get(j, "reason"));
    CHECK(json_is_boolean(json_object_get(j, "loaded")) && reason && (loaded ? !reason[0] : reason[0] != 0),
          "here: loaded %d, reason \"%s\"", loaded, reason ? reason : "(none)");
    json_decref(j);
    hw_close(hw);
    CHECK(!hw_nvml_loaded(NULL) && hw_nvml_reason(NULL)[0], "no hw: not loaded, with a reason");

    /* NVIDIA device nodes: none in an empty folder, nvidia0 or nvidiactl found */
    char dev[4200], node[4300], found[4300];
    snprintf(dev, sizeof dev, "%s/dev", tmp);
    CHECK(cd_mkdirs(dev, 0755) == CD_OK, "mkdir %s", dev);
    CHECK(!hw_nvidia_device(dev, found, sizeof found) && !found[0], "no device node in an empty folder");
    const char *name = cd_test_rand_u64() % 2 ? "nvidia0" : "nvidiactl";
    snprintf(node, sizeof node, "%s/%s", dev, name);
    FILE *f = fopen(node, "w");
    CHECK(f != NULL, "create %s", node);
    if (f)
        fclose(f);
    CHECK(hw_nvidia_device(dev, found, sizeof found) && !strcmp(found, node), "%s found: %s", name, found);
}

/* The model form's training fields are the table's rows (cdigits/train_keys.h): the same
 * label, default, bounds and choices, and every row with a field is a field of the form. */
static void test_form_is_table(void)
{
    size_t n;
    const form_field_t *spec = model_form_fields(&n);
    for (size_t i = 0; i < n; i++) {
        const form_field_t *f = &spec[i];
        const cd_train_key *k = cd_train_key_by_field(f->name);
        CHECK(f->label && (k || strcmp(f->label, f->name) != 0), "%s has a label", f->name);
        if (!k)
            continue;
        int same_def = f->def && k->def ? !strcmp(f->def, k->def) : f->def == k->def;
        int same_bounds = (isnan(f->min) ? isnan(k->lo) : f->min == k->lo) &&
                          (isnan(f->max) ? isnan(k->hi) : f->max == k->hi);
        int same_choices = f->type != F_CHOICE || (f->choices && k->choices && !strcmp(f->choices, k->choices));
        CHECK(!strcmp(f->label, k->label) && same_def && same_bounds && same_choices,
              "%s: label \"%s\", default %s, bounds %g..%g, choices %s are %s's", f->name, f->label,
              f->def ? f->def : "none", f->min, f->max, f->choices ? f->choices : "none", k->key);
    }
    for (size_t r = 0; r < cd_train_key_count(); r++) {
        const cd_train_key *k = cd_train_key_at(r);
        int found = 0;
        for (size_t i = 0; k->field && i < n; i++)
            found |= !strcmp(spec[i].name, k->field);
        CHECK(!k->field || found, "%s's field %s is in the model form", k->key, k->field);
    }
}

/* Writes train as the job's train.json (decrefs it) and loads it as the worker does. */
static int worker_load(json_t *train, char *err, size_t errlen)
{
    char *text = train ? json_dumps(train, 0) : NULL;
    json_decref(train);
    int rc = text && cd_test_write("train.json", text) == CD_OK ? CD_OK : CD_ERR;
    free(text);
    cd_train_config c;
    cd_train_config_init(&c);
    return rc == CD_OK ? cd_train_config_load(&c, cd_test_tmpdir(), err, errlen) : CD_ERR;
}

/* train.json as the server writes it for the form's values v (its first learning rate
 * and batch size, as the first job of a sweep). */
static json_t *train_json_of(json_t *v)
{
    json_t *lrs = json_object_get(v, "learning_rate"), *bss = json_object_get(v, "batch_size");
    return model_train_json(v, "d", NULL, json_number_value(json_array_get(lrs, 0)), json_array_get(bss, 0));
}

/* Every bound of every training field: the form accepts it and the worker accepts the
 * train.json made of it; one past it the form refuses naming the field and its bounds,
 * and so does the worker, naming the key. */
static void test_form_bounds_are_worker_bounds(void)
{
    size_t n;
    const form_field_t *spec = model_form_fields(&n);
    for (size_t i = 0; i < n; i++) {
        const form_field_t *f = &spec[i];
        const cd_train_key *k = cd_train_key_by_field(f->name);
        if (!k || isnan(f->min))
            continue;
        int whole = f->type == F_INT || f->type == F_INTS;
        double lo = whole ? ceil(f->min) : f->min, hi = whole ? floor(f->max) : f->max;
        double past[2] = {whole ? lo - 1 : lo - fmax(fabs(lo), 1) * 1e-9,
                          whole ? hi + 1 : hi + fmax(fabs(hi), 1) * 1e-9};
        double ends[2] = {lo, hi};
        char range[128], quoted[80], when[128] = "";
        snprintf(range, sizeof range, "between %.15g and %.15g; got", lo, hi);
        snprintf(quoted, sizeof quoted, "\"%s\"", k->key);
        if (f->when && !strchr(f->when, '!'))
            snprintf(when, sizeof when, "&%s", f->when);
        for (int e = 0; e < 2; e++) {
            char extra[256], body[512], err[1024] = "";
            snprintf(extra, sizeof extra, "%s=%.17g%s", f->name, ends[e], when);
            json_t *errors = form_errors(extra);
            CHECK(!json_object_get(errors, f->name), "%s: the form accepts %s: %s", f->name, extra,
                  first_error(errors, f->name));
            json_decref(errors);
            snprintf(body, sizeof body, "dataset=d&model_name=m&method=custom&custom_network=x&%s", extra);
            json_t *v = form_values(body), *train = train_json_of(v);
            CHECK(worker_load(json_incref(train), err, sizeof err) == CD_OK,
                  "%s: the worker takes the train.json of %s: %s", f->name, extra, err);

            snprintf(extra, sizeof extra, "%s=%.17g%s", f->name, past[e], when);
            errors = form_errors(extra);
            CHECK(strstr(first_error(errors, f->name), range), "%s: the form refuses %s naming its bounds (%s): %s",
                  f->name, extra, range, first_error(errors, f->name));
            json_decref(errors);
            /* the same value in the train.json the form made, where the form would have put it */
            json_t *obj = strchr(k->key, '.') ? json_object_get(train, "lr_policy") : train;
            json_t *x = k->type == CD_TK_LIST ? json_sprintf("%.17g", past[e]) : json_real(past[e]);
            json_object_set_new(obj, cd_train_key_member(k), x);
            CHECK(worker_load(train, err, sizeof err) != CD_OK && strstr(err, quoted),
                  "%s: the worker refuses %s = %.17g naming the key: %s", f->name, k->key, past[e], err);
            json_decref(v);
        }
    }
}

/* A step of 150% of training: refused by the form, naming the field and its bounds, as
 * the worker refuses lr_policy.stepsize 150; the request is answered 400 and makes no
 * job. */
static void test_step_size_150(void)
{
    static const struct {
        const char *extra, *field, *says;
    } cases[] = {
        {"lr_policy=step&lr_step_size=150", "lr_step_size",
         "Step size (% of training) must be between 0 and 100; got 150"},
        {"lr_policy=sigmoid&lr_sigmoid_step=100.5", "lr_sigmoid_step",
         "Step (% of training) must be between 0 and 100; got 100.5"},
        {"lr_policy=sigmoid&lr_sigmoid_gamma=-1", "lr_sigmoid_gamma", "Gamma must be between 0 and 1000000; got -1"},
        {"lr_policy=multistep&lr_multistep_values=50,101", "lr_multistep_values",
         "Step values (% of training) must be between 0 and 100; got 101"},
        {"weight_decay=1001", "weight_decay", "Weight decay must be between 0 and 1000; got 1001"},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        json_t *e = form_errors(cases[i].extra);
        CHECK(!strcmp(first_error(e, cases[i].field), cases[i].says), "%s: \"%s\"", cases[i].extra,
              first_error(e, cases[i].field));
        json_decref(e);
    }

    const char *body = "model_name=m&method=custom&custom_network=x&lr_policy=step&lr_step_size=150";
    fields_t *f = fields_new();
    CHECK(fields_parse_urlencoded(f, body, strlen(body)) == CD_OK, "parse %s", body);
    req_t r = {.srv = &g_srv, .method = "POST", .fields = f};
    api_model_create_fields(&r, f);
    CHECK(r.status == 400 && r.resp != NULL, "POST %s: status %d", body, r.status);
    if (r.resp)
        MHD_destroy_response(r.resp);
    fields_free(f);
}

/* DIGITS's sweeps: learning_rate and batch_size as a comma list or as a bracketed Python
 * list, drawn fresh each run; both spellings give the same numbers in the same order. */
static void test_bracketed_lists(void)
{
    int n = 2 + rand() % 4;
    double lrs[8];
    int bss[8];
    char plain_lr[256] = "", plain_bs[256] = "", brack_lr[256] = "[", brack_bs[256] = "[";
    for (int i = 0; i < n; i++) {
        lrs[i] = (1 + rand() % 999) / 10000.0;
        bss[i] = 1 + rand() % 256;
        char one[64];
        snprintf(one, sizeof one, "%s%g", i ? "," : "", lrs[i]);
        strcat(plain_lr, one);
        snprintf(one, sizeof one, "%s%g", i ? ", " : "", lrs[i]);
        strcat(brack_lr, one);
        snprintf(one, sizeof one, "%s%d", i ? "," : "", bss[i]);
        strcat(plain_bs, one);
        snprintf(one, sizeof one, "%s%d", i ? ", " : "", bss[i]);
        strcat(brack_bs, one);
    }
    strcat(brack_lr, "]");
    strcat(brack_bs, "]");
    const char *spellings[][2] = {{plain_lr, plain_bs}, {brack_lr, brack_bs}};
    for (int k = 0; k < 2; k++) {
        char body[1024], lr_enc[512] = "", bs_enc[512] = "";
        /* urlencode the brackets, commas and spaces as a browser would */
        const char *src[] = {spellings[k][0], spellings[k][1]};
        char *dst[] = {lr_enc, bs_enc};
        for (int j = 0; j < 2; j++)
            for (const char *c = src[j]; *c; c++) {
                char one[8];
                if (*c == '[' || *c == ']' || *c == ',' || *c == ' ')
                    snprintf(one, sizeof one, "%%%02X", (unsigned char)*c);
                else
                    snprintf(one, sizeof one, "%c", *c);
                strcat(dst[j], one);
            }
        snprintf(body, sizeof body, "dataset=d&model_name=m&method=custom&custom_network=x&learning_rate=%s"
                 "&batch_size=%s", lr_enc, bs_enc);
        json_t *v = form_values(body);
        json_t *lr = json_object_get(v, "learning_rate"), *bs = json_object_get(v, "batch_size");
        CHECK(json_array_size(lr) == (size_t)n, "learning_rate=%s: %zu values, want %d", src[0],
              json_array_size(lr), n);
        CHECK(json_array_size(bs) == (size_t)n, "batch_size=%s: %zu values, want %d", src[1], json_array_size(bs), n);
        for (int i = 0; i < n && i < (int)json_array_size(lr) && i < (int)json_array_size(bs); i++) {
            CHECK(fabs(json_number_value(json_array_get(lr, (size_t)i)) - lrs[i]) < 1e-12,
                  "learning_rate=%s: value %d is %g, want %g", src[0], i,
                  json_number_value(json_array_get(lr, (size_t)i)), lrs[i]);
            CHECK(json_integer_value(json_array_get(bs, (size_t)i)) == bss[i], "batch_size=%s: value %d is %lld, want %d",
                  src[1], i, (long long)json_integer_value(json_array_get(bs, (size_t)i)), bss[i]);
        }
        json_decref(v);
    }
    /* an unpaired bracket is no list: the item holding it is named */
    json_t *e = form_errors("learning_rate=%5B0.01,0.02");
    CHECK(strstr(first_error(e, "learning_rate"), "\"[0.01\" is not a number") != NULL, "learning_rate=[0.01,0.02: %s",
          first_error(e, "learning_rate"));
    json_decref(e);
}

/* DIGITS fields cdigits does not implement: DIGITS's whole form at its defaults (as its
 * page posts it, numbers written another way, empty file fields) is accepted; each field
 * set to anything else is refused, naming the field and what to do. The augmentations,
 * now implemented, are accepted within their bounds. */
static void test_unsupported_fields(void)
{
    static const char defaults[] =
        "framework=caffe&aug_flip=none&aug_quad_rot=none&aug_rot=0&aug_scale=0.0&aug_noise=0&aug_contrast=0"
        "&aug_hsv_h=0.020&aug_hsv_s=0.04&aug_hsv_v=6e-2&python_layer_server_file=&python_layer_client_file=";
    static const char *const fields[] = {"framework", "python_layer_from_client", "python_layer_client_file",
                                         "python_layer_server_file"};
    static const char *const bad[] = {"framework=torch", "python_layer_from_client=y",
                                      "python_layer_client_file=layer.py", "python_layer_server_file=%2Ftmp%2Flayer.py"};
    json_t *e = form_errors(defaults);
    CHECK(json_object_size(e) == 0, "DIGITS's defaults are refused: %s", json_object_iter_key(json_object_iter(e)));
    json_decref(e);
    for (size_t i = 0; i < CD_ARRAY_LEN(bad); i++) {
        e = form_errors(bad[i]);
        const char *msg = first_error(e, fields[i]);
        CHECK(strstr(msg, "cdigits does not implement") && strstr(msg, fields[i]) && strstr(msg, "default"),
              "%s: want a refusal naming %s, got \"%s\"", bad[i], fields[i], msg);
        CHECK(json_object_size(e) == 1, "%s: only %s is refused (%zu errors)", bad[i], fields[i],
              json_object_size(e));
        json_decref(e);
    }
    /* the augmentations are implemented (augment.h): their values within DIGITS's
     * bounds are accepted, one past a bound is the field's own range error */
    e = form_errors("aug_quad_rot=rot90&aug_rot=15&aug_scale=0.1&aug_noise=0.05&aug_contrast=0.5&aug_whitening=y"
                    "&aug_hsv_use=y&aug_hsv_h=0.1&aug_hsv_s=0.2&aug_hsv_v=0.3");
    CHECK(json_object_size(e) == 0, "augmentations are refused: %s", json_object_iter_key(json_object_iter(e)));
    json_decref(e);
    e = form_errors("aug_rot=181");
    CHECK(!strstr(first_error(e, "aug_rot"), "does not implement") && first_error(e, "aug_rot")[0],
          "aug_rot=181: want a range error, got \"%s\"", first_error(e, "aug_rot"));
    json_decref(e);
}

int main(void)
{
    cd_test_init("test_server_model_form");
    test_gpu_count();
    test_gpu_ids();
    test_limits();
    test_nvml();
    test_form_is_table();
    test_form_bounds_are_worker_bounds();
    test_step_size_150();
    test_bracketed_lists();
    test_unsupported_fields();
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", cd_test_tmpdir());
    if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", cd_test_tmpdir());
    return cd_test_finish();
}
