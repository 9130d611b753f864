/* Clone: DIGITS fills the creation form of a job with the fields another job was made
 * with. GET answers those fields; POST makes the new job at once, with any posted
 * field replacing the saved one. */
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

void h_clone(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    fields_t *f = fields_new();
    if (!f) {
        reply_error(r, 500, "out of memory");
        json_decref(job);
        return;
    }
    /* posted fields first (fields_get returns the first), then the saved ones */
    for (size_t i = 0; i < r->fields->n; i++) {
        const field_t *x = &r->fields->v[i];
        fields_add(f, x->name, x->value, x->len, x->filename);
    }
    const char *key;
    json_t *v;
    char err[256];
    json_t *saved = json_object();
    json_object_foreach(json_object_get(job, "form"), key, v)
    {
        if (!fields_find(r->fields, key))
            json_object_set(saved, key, v);
    }
    int rc = fields_from_json(f, saved, err, sizeof err);
    json_decref(saved);
    if (rc != CD_OK)
        reply_error(r, 500, "the saved fields of job %s cannot be read: %s", jstr(job, "id"), err);
    else if (strcmp(jstr(job, "type"), "model") == 0)
        api_model_create_fields(r, f);
    else
        api_dataset_create_fields(r, f);
    fields_free(f);
    json_decref(job);
}
