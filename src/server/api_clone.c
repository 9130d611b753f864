/* Clone: DIGITS fills the creation form of a job with the fields another job was made
 * with. GET /clone/<id>/json answers those fields; POST /clone/<id> makes the new job
 * at once, with any posted field replacing the saved one; and the creation forms take
 * DIGITS's clone=<id> field as DIGITS does, the saved fields over the posted ones (so a
 * script that posts its usual fields with clone= gets a copy of the job). */
#include "internal.h"

#include "api_generic.h"

#include <stdio.h>
#include <string.h>

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The route that makes a job like job (its kind: classification or generic). */
static const char *create_url(json_t *job, char *buf, size_t len)
{
    const char *ext = generic_job_extension(job);
    if (strcmp(jstr(job, "type"), "model") == 0)
        return ext ? "/models/images/generic/json" : "/models/images/classification/json";
    if (!ext)
        return "/datasets/images/classification/json";
    snprintf(buf, len, "/datasets/generic/create/%s/json", ext);
    return buf;
}

void h_clone_get(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    char url[256];
    reply_json(r, 200, json_pack("{s:O, s:s, s:s, s:O}", "id", json_object_get(job, "id"), "type", jstr(job, "type"),
                                 "url", create_url(job, url, sizeof url), "fields", json_object_get(job, "form")));
    json_decref(job);
}

/* Adds the fields of from, but clone (a clone of a clone starts from the fields, not
 * from the chain) and those whose names skip holds (NULL: none). */
static int add_fields(fields_t *f, const fields_t *from, const fields_t *skip)
{
    int rc = CD_OK;
    for (size_t i = 0; i < from->n && rc == CD_OK; i++) {
        const field_t *x = &from->v[i];
        if (strcmp(x->name, "clone") != 0 && !(skip && fields_find(skip, x->name)))
            rc = fields_add(f, x->name, x->value, x->len, x->filename);
    }
    return rc;
}

/* The fields of a job like job: with saved_win the fields it was made with, then the
 * posted ones it was not made with (DIGITS's clone=<id> of a creation form, which
 * fills the form from the job over what was posted); otherwise the posted fields, then
 * the saved ones that were not posted (POST /clone/<id>, which makes a job like <id>
 * with changes). NULL after a reply. */
static fields_t *merge_saved(req_t *r, const fields_t *in, json_t *job, int saved_win)
{
    fields_t *f = fields_new(), *saved = fields_new();
    char err[256] = "out of memory";
    json_t *form = json_object_get(job, "form"); /* none for an uploaded model */
    int rc = !f || !saved ? CD_ERR : json_is_object(form) ? fields_from_json(saved, form, err, sizeof err) : CD_OK;
    if (rc == CD_OK) {
        const fields_t *first = saved_win ? saved : in, *second = saved_win ? in : saved;
        rc = add_fields(f, first, NULL);
        if (rc == CD_OK)
            rc = add_fields(f, second, first);
    }
    fields_free(saved);
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
    *out = merge_saved(r, in, job, 1);
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
    fields_t *f = merge_saved(r, r->fields, job, 0);
    if (f) {
        if (strcmp(jstr(job, "type"), "model") == 0)
            api_model_create_fields(r, f);
        else if (generic_job_extension(job))
            generic_dataset_create_fields(r, generic_job_extension(job), f);
        else
            api_dataset_create_fields(r, f);
    }
    fields_free(f);
    json_decref(job);
}
