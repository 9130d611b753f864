/* Clone: DIGITS fills the creation form of a job with the fields another job was made
 * with. GET answers those fields; POST makes the new job at once, with any posted
 * field replacing the saved one; and the creation forms take DIGITS's clone=<id> field
 * to the same effect. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static const char *create_url(json_t *job)
{
    return strcmp(jstr(job, "type"), "model") == 0 ? "/models/images/classification/json"
                                                    : "/datasets/images/classification/json";
}

void h_clone_get(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    reply_json(r, 200, json_pack("{s:O, s:s, s:s, s:O}", "id", json_object_get(job, "id"), "type", jstr(job, "type"),
                                 "url", create_url(job), "fields", json_object_get(job, "form")));
    json_decref(job);
}

/* The posted fields, then the saved ones of job that were not posted; clone itself is
 * dropped from both (a clone of a clone starts from the fields, not from the chain).
 * NULL after a reply. */
static fields_t *merge_saved(req_t *r, const fields_t *in, json_t *job)
{
    fields_t *f = fields_new();
    json_t *saved = json_object();
    if (!f || !saved) {
        reply_error(r, 500, "out of memory");
        fields_free(f);
        json_decref(saved);
        return NULL;
    }
    int rc = CD_OK;
    for (size_t i = 0; i < in->n && rc == CD_OK; i++) {
        const field_t *x = &in->v[i];
        if (strcmp(x->name, "clone") != 0)
            rc = fields_add(f, x->name, x->value, x->len, x->filename);
    }
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(job, "form"), key, v)
    {
        if (strcmp(key, "clone") != 0 && !fields_find(in, key))
            json_object_set(saved, key, v);
    }
    char err[256] = "out of memory";
    if (rc == CD_OK)
        rc = fields_from_json(f, saved, err, sizeof err);
    json_decref(saved);
    if (rc != CD_OK) {
        reply_error(r, 500, "the saved fields of job %s cannot be read: %s", jstr(job, "id"), err);
        fields_free(f);
        return NULL;
    }
    return f;
}

int api_clone_fields(req_t *r, const fields_t *in, const char *want_type, fields_t **out)
{
    *out = NULL;
    const char *id = fields_get(in, "clone");
    if (!id || !*id)
        return CD_OK;
    json_t *job = store_job_get(r->srv->store, id);
    if (!job) {
        reply_error(r, 404, "Job not found: clone=%s names no job; give the id of a %s to start from", id, want_type);
        return CD_ERR;
    }
    if (strcmp(jstr(job, "type"), want_type) != 0) {
        reply_error(r, 400, "clone=%s is a %s; this form clones a %s (POST /clone/%s makes a job like any)", id,
                    jstr(job, "type"), want_type, id);
        json_decref(job);
        return CD_ERR;
    }
    *out = merge_saved(r, in, job);
    json_decref(job);
    return *out ? CD_OK : CD_ERR;
}

void h_dataset_create_form(req_t *r)
{
    fields_t *cloned;
    if (api_clone_fields(r, r->fields, "dataset", &cloned) != CD_OK)
        return;
    api_dataset_create_fields(r, cloned ? cloned : r->fields);
    fields_free(cloned);
}

void h_clone(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    fields_t *f = merge_saved(r, r->fields, job);
    if (f) {
        if (strcmp(jstr(job, "type"), "model") == 0)
            api_model_create_fields(r, f);
        else
            api_dataset_create_fields(r, f);
    }
    fields_free(f);
    json_decref(job);
}
