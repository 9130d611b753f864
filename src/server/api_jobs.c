/* Handlers for the home page and for jobs of any kind: lists, status, JSON, abort,
 * delete, edit, group. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static int job_state(json_t *job) { return (int)json_integer_value(json_object_get(job, "state")); }

/* ---- home ------------------------------------------------------------------------ */

/* The body of /index/json: the jobs the asker may read (security_may_read). The body
 * for those who read every job comes from the cache while the store has not changed. */
void h_index(req_t *r)
{
    server_t *srv = r->srv;
    int all = security_reads_all(r);
    uint64_t version = store_version(srv->store);
    pthread_mutex_lock(&srv->index_lock);
    if (all && srv->index_body && srv->index_version == version) {
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(srv->index_len, srv->index_body, MHD_RESPMEM_MUST_COPY);
        pthread_mutex_unlock(&srv->index_lock);
        if (resp) {
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
            reply_response(r, 200, resp);
            return;
        }
    } else {
        pthread_mutex_unlock(&srv->index_lock);
    }
    json_t *out = json_pack("{s:s, s:s}", "version", CDIGITS_VERSION, "jobs_dir", srv->jobs_dir);
    static const char *const types[] = {"dataset", "model"}, *const keys[] = {"datasets", "models"};
    for (int k = 0; k < 2; k++) {
        json_t *jobs = store_job_list(srv->store, types[k]), *running = json_array(), *done = json_array();
        size_t i;
        json_t *j;
        json_array_foreach(jobs, i, j)
        {
            if (security_may_read(r, j))
                json_array_append_new(cd_state_is_running(job_state(j)) ? running : done, view_job_brief(j));
        }
        json_array_extend(running, done);
        json_object_set_new(out, keys[k], running);
        json_decref(done);
        json_decref(jobs);
    }
    if (srv->cfg.server_name[0])
        json_object_set_new(out, "server_name", json_string(srv->cfg.server_name));
    char *text = all ? json_dumps(out, JSON_COMPACT) : NULL;
    if (text) {
        pthread_mutex_lock(&srv->index_lock);
        free(srv->index_body);
        srv->index_body = text;
        srv->index_len = strlen(text);
        srv->index_version = version; /* read before the store: a later change invalidates it */
        pthread_mutex_unlock(&srv->index_lock);
    }
    reply_json(r, 200, out);
}

void h_home(req_t *r)
{
    char path[PATH_MAX];
    if (r->srv->cfg.web_dir[0] && paths_resolve_under(r->srv->cfg.web_dir, "index.html", path, sizeof path) == CD_OK) {
        reply_file(r, path);
        return;
    }
    h_index(r);
}

/* The home tables: the jobs the asker may read (security_may_read), running ones first. */
void h_completed_jobs(req_t *r)
{
    server_t *srv = r->srv;
    json_t *jobs = store_job_list(srv->store, NULL);
    json_t *fields = json_object(), *running = json_array(), *datasets = json_array(), *models = json_array();
    json_t *pretrained = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        if (!security_may_read(r, j))
            continue;
        json_t *d = view_job_table(srv, j, fields);
        if (cd_state_is_running(job_state(j)))
            json_array_append_new(running, d);
        else if (view_job_is_pretrained(j))
            json_array_append_new(pretrained, d);
        else
            json_array_append_new(strcmp(jstr(j, "type"), "model") == 0 ? models : datasets, d);
    }
    json_decref(jobs);
    json_t *names = json_array();
    const char *key;
    json_t *v;
    json_object_foreach(fields, key, v) json_array_append_new(names, json_string(key));
    json_decref(fields);
    /* sorted, as DIGITS sorts the set */
    size_t n = json_array_size(names);
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && strcmp(json_string_value(json_array_get(names, b - 1)),
                                           json_string_value(json_array_get(names, b))) > 0;
             b--) {
            json_t *x = json_incref(json_array_get(names, b - 1));
            json_array_set(names, b - 1, json_array_get(names, b));
            json_array_set_new(names, b, x);
        }
    reply_json(r, 200,
               json_pack("{s:o, s:o, s:o, s:o, s:o}", "running", running, "datasets", datasets, "models", models,
                         "pretrained_models", pretrained, "model_output_fields", names));
}

void h_job_table_data(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    reply_json(r, 200, json_pack("{s:o}", "job", view_job_table(r->srv, job, NULL)));
    json_decref(job);
}

/* ---- one job ------------------------------------------------------------------------ */

/* /datasets/<id>/json must name a dataset, /models/<id>/json a model. */
static int route_kind_matches(req_t *r, json_t *job)
{
    const char *want = strncmp(r->path, "/datasets/", 10) == 0 ? "dataset"
                       : strncmp(r->path, "/models/", 8) == 0  ? "model"
                                                               : NULL;
    if (want && strcmp(jstr(job, "type"), want) != 0) {
        reply_error(r, 404, "Job %s is a %s, not a %s; use /%ss/%s", jstr(job, "id"), jstr(job, "type"), want,
                    jstr(job, "type"), jstr(job, "id"));
        return 0;
    }
    return 1;
}

void h_job_json(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    if (route_kind_matches(r, job))
        reply_json(r, 200, view_job_detail(r->srv, job));
    json_decref(job);
}

void h_job_show(req_t *r)
{
    /* without a page for it in web/, the page is the JSON */
    const char *page = strncmp(r->path, "/models/", 8) == 0 ? "model.html" : "dataset.html";
    char path[PATH_MAX];
    const char *accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    int wants_html = accept && strstr(accept, "text/html");
    json_t *job = api_job_param(r);
    if (!job)
        return;
    if (route_kind_matches(r, job)) {
        if (wants_html && r->srv->cfg.web_dir[0] &&
            paths_resolve_under(r->srv->cfg.web_dir, page, path, sizeof path) == CD_OK)
            reply_file(r, path);
        else
            reply_json(r, 200, view_job_detail(r->srv, job));
    }
    json_decref(job);
}

void h_job_redirect(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    char where[600];
    snprintf(where, sizeof where, "%s/%ss/%s", r->srv->cfg.url_prefix, jstr(job, "type"), jstr(job, "id"));
    reply_redirect(r, where, view_job_brief(job));
    json_decref(job);
}

void h_job_status(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    int st = job_state(job);
    json_t *out = json_pack("{s:n, s:s, s:O, s:s, s:i}", "error", "status", cd_state_name(st), "name",
                            json_object_get(job, "name"), "type", view_job_type(job), "progress",
                            (int)(100 * json_number_value(json_object_get(job, "progress")) + 0.5));
    if (st == CD_ST_DONE)
        json_object_set_new(out, "progress", json_integer(100));
    if (st == CD_ST_WAIT && jstr(job, "wait_reason")[0])
        json_object_set(out, "wait_reason", json_object_get(job, "wait_reason"));
    if (json_is_string(json_object_get(job, "error")))
        json_object_set(out, "message", json_object_get(job, "error"));
    if (json_is_true(json_object_get(job, "interrupted")))
        json_object_set_new(out, "interrupted", json_true());
    reply_json(r, 200, out);
    json_decref(job);
}

void h_job_log(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    const char *n = fields_get(r->fields, "n");
    int count = n ? atoi(n) : 200;
    if (count <= 0 || count > 100000)
        count = 200;
    reply_json(r, 200, json_pack("{s:O, s:o}", "id", json_object_get(job, "id"), "log",
                                 store_log_tail(r->srv->store, jstr(job, "id"), count)));
    json_decref(job);
}

/* ---- abort, delete, edit ------------------------------------------------------------ */

/* What a job's owner may do to it from its page: the route's verb, the scheduler's
 * call and the answer when it is done. */
typedef struct owner_action {
    const char *verb;
    int (*run)(sched_t *s, const char *job_id, cd_err_t *err);
    const char *done;
} owner_action;

static const owner_action g_abort = {"abort", sched_abort, "Job aborted."};
static const owner_action g_delete = {"delete", sched_delete, "Job deleted."};

static void job_owner_action(req_t *r, const owner_action *a)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    cd_err_t err;
    if (!api_may_edit(r, job))
        reply_error(r, 403, "Job %s belongs to %s; only its owner may %s it", jstr(job, "id"), jstr(job, "username"),
                    a->verb);
    else if (a->run(r->srv->sched, jstr(job, "id"), &err) != CD_OK)
        reply_err(r, &err);
    else
        reply_text(r, 200, a->done);
    json_decref(job);
}

void h_job_abort(req_t *r) { job_owner_action(r, &g_abort); }

void h_job_delete(req_t *r) { job_owner_action(r, &g_delete); }

void h_job_edit(req_t *r)
{
    json_t *job = api_job_param(r);
    if (!job)
        return;
    const char *id = jstr(job, "id");
    cd_err_t err;
    if (!api_may_edit(r, job)) {
        reply_error(r, 403, "Job %s belongs to %s; only its owner may edit it", id, jstr(job, "username"));
        goto out;
    }
    const char *name = fields_get(r->fields, "job_name"), *notes = fields_get(r->fields, "job_notes");
    if (!name && !notes) {
        reply_error(r, 400, "Nothing to edit: send job_name or job_notes");
        goto out;
    }
    if (name) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", name);
        char *p = buf;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strlen(p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\n'))
            p[--n] = 0;
        if (!*p) {
            reply_error(r, 400, "name cannot be blank");
            goto out;
        }
        if (store_job_set_text(r->srv->store, id, "name", p, &err) != CD_OK) {
            reply_err(r, &err);
            goto out;
        }
        json_t *ev = json_pack("{s:s, s:s, s:s, s:s}", "job_id", id, "update", "attribute", "attribute", "name",
                               "value", p);
        events_publish_job(r->srv->events, id, "attribute", ev, 1);
        json_decref(ev);
    }
    if (notes) {
        const char *p = notes;
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
        if (store_job_set_text(r->srv->store, id, "notes", *p ? notes : NULL, &err) != CD_OK) {
            reply_err(r, &err);
            goto out;
        }
    }
    char msg[128];
    snprintf(msg, sizeof msg, "%s updated.", view_job_type(job));
    reply_text(r, 200, msg);
out:
    json_decref(job);
}

/* ---- many jobs ------------------------------------------------------------------------ */

enum bulk_op { BULK_DELETE, BULK_ABORT, BULK_GROUP };

/* DIGITS counts what could not be done and answers 400 with a sentence per kind. */
static void bulk(req_t *r, int op)
{
    const char *ids[1024];
    int n = fields_get_all(r->fields, "job_ids", ids, 1024);
    const char *group = op == BULK_GROUP ? fields_get(r->fields, "group_name") : NULL;
    if (op == BULK_GROUP && !group)
        group = "";
    int not_found = 0, forbidden = 0, failed = 0;
    char detail[1024] = "";
    for (int i = 0; i < n; i++) {
        json_t *job = store_job_get(r->srv->store, ids[i]);
        if (!job) {
            not_found++;
            continue;
        }
        cd_err_t err;
        if (!api_may_edit(r, job)) {
            forbidden++;
        } else {
            int rc = op == BULK_DELETE  ? sched_delete(r->srv->sched, ids[i], &err)
                     : op == BULK_ABORT ? sched_abort(r->srv->sched, ids[i], &err)
                                        : store_job_set_text(r->srv->store, ids[i], "group", group, &err);
            if (rc != CD_OK) {
                failed++;
                if (!detail[0])
                    snprintf(detail, sizeof detail, " (%s)", err.msg);
            } else if (op == BULK_GROUP) {
                json_t *ev = json_pack("{s:s, s:s, s:s, s:s}", "job_id", ids[i], "update", "attribute", "attribute",
                                       "group", "value", group);
                events_publish_job(r->srv->events, ids[i], "attribute", ev, 1);
                json_decref(ev);
            }
        }
        json_decref(job);
    }
    static const char *const verbs[] = {"deleted", "aborted", "regrouped"};
    static const char *const done[] = {"Jobs deleted.", "Jobs aborted.", "Jobs regrouped."};
    char msg[2048] = "";
    size_t len = 0;
    if (not_found)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%d job%s not found. ", not_found,
                                not_found == 1 ? "" : "s");
    if (forbidden)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%d job%s not permitted to be %s. ", forbidden,
                                forbidden == 1 ? "" : "s", verbs[op]);
    if (failed && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%d job%s failed to %s%s. ", failed,
                                failed == 1 ? "" : "s", op == BULK_DELETE ? "delete" : op == BULK_ABORT ? "abort" : "regroup",
                                detail);
    if (len) {
        if (msg[len - 1] == ' ')
            msg[len - 1] = 0;
        reply_error(r, 400, "%s", msg);
        return;
    }
    reply_text(r, 200, done[op]);
}

void h_jobs_delete(req_t *r) { bulk(r, BULK_DELETE); }
void h_jobs_abort(req_t *r) { bulk(r, BULK_ABORT); }
void h_group(req_t *r) { bulk(r, BULK_GROUP); }
