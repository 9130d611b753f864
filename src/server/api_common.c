/* Helpers the handlers share: the job of a route, ownership, new job directories, and
 * starting and announcing a new job. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/util.h"

json_t *api_job_param(req_t *r)
{
    json_t *job = r->nparams > 0 ? store_job_get(r->srv->store, r->params[0]) : NULL;
    if (!job)
        reply_error(r, 404, "Job not found: %s", r->nparams > 0 ? r->params[0] : "");
    return job;
}

json_t *api_job_of_type(req_t *r, const char *id, const char *type, api_error_fn fail)
{
    if (!id || !*id) {
        fail(r, 400, "job_id is a required field: give the id of a %s (?job_id=<id>)", type);
        return NULL;
    }
    json_t *job = store_job_get(r->srv->store, id);
    if (!job) {
        fail(r, 404, "Job not found: %s", id);
        return NULL;
    }
    const char *is = json_string_value(json_object_get(job, "type"));
    if (!is || strcmp(is, type) != 0) {
        fail(r, 400, "Invalid job type: %s is a %s; give the id of a %s", id, is ? is : "job of no type", type);
        json_decref(job);
        return NULL;
    }
    return job;
}

int api_may_edit(const req_t *r, json_t *job)
{
    return security_may_edit(r, job); /* owners and admins: security.c */
}

/* n bytes that make a job id unlikely to collide: random, or (no /dev/urandom) the clock,
 * which still varies; an id is no secret. */
static void id_bytes(unsigned char *buf, size_t n)
{
    if (auth_random_bytes(buf, n) == CD_OK)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(ts.tv_nsec >> (8 * (i % 4)));
}

int api_new_job_dir(server_t *srv, char *id, size_t idlen, char *dir, size_t dirlen, cd_err_t *err)
{
    for (int attempt = 0; attempt < 64; attempt++) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        unsigned char rb[2];
        id_bytes(rb, sizeof rb);
        snprintf(id, idlen, "%s-%02x%02x", stamp, rb[0], rb[1]);
        snprintf(dir, dirlen, "%s/%s", srv->jobs_dir, id);
        if (mkdir(dir, 0755) == 0)
            return CD_OK;
        if (errno != EEXIST)
            return cd_err_set(err, CD_E_INTERNAL, "cannot create the job folder %s: %s", dir, strerror(errno));
    }
    return cd_err_set(err, CD_E_INTERNAL, "cannot find a free job id in %s", srv->jobs_dir);
}

int api_job_start(server_t *srv, const store_job_new_t *job, const char *task_kind, const char *task_name,
                  cd_err_t *err)
{
    if (store_job_insert(srv->store, job, err) != CD_OK)
        return CD_ERR;
    if (store_task_insert(srv->store, job->id, task_kind, task_name, NULL, err) != CD_OK ||
        sched_enqueue(srv->sched, job->id, err) != CD_OK) {
        store_job_delete(srv->store, job->id, NULL);
        return CD_ERR;
    }
    return CD_OK;
}

json_t *api_job_announce(server_t *srv, const char *id)
{
    json_t *row = store_job_get(srv->store, id);
    json_t *brief = row ? view_job_brief(row) : NULL;
    json_decref(row);
    if (brief) {
        json_t *ev = json_pack("{s:s, s:s, s:O}", "job_id", id, "update", "added", "job", brief);
        events_publish(srv->events, "home", "job_added", ev);
        json_decref(ev);
    }
    return brief;
}

int api_write_json(const char *dir, const char *name, json_t *obj, cd_err_t *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = json_dumps(obj, JSON_INDENT(2));
    if (!text)
        return cd_err_set(err, CD_E_INTERNAL, "cannot encode %s", path);
    size_t n = strlen(text);
    char *nl = realloc(text, n + 2);
    if (nl) {
        text = nl;
        text[n++] = '\n';
        text[n] = 0;
    }
    int rc = cd_write_file_atomic(path, text, n);
    free(text);
    if (rc != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    return CD_OK;
}

/* Where a browser goes after creating jobs: the job's page, or the home page for a
 * sweep (several jobs) and a pretrained model (it has no page of its own in DIGITS). */
static void created_location(server_t *srv, json_t *body, char *out, size_t len)
{
    const char *prefix = srv->cfg.url_prefix;
    const char *id = json_string_value(json_object_get(body, "id"));
    json_t *job = id ? store_job_get(srv->store, id) : NULL;
    const char *type = json_string_value(json_object_get(job, "type"));
    if (!type || json_object_get(body, "jobs") || view_job_is_pretrained(job))
        snprintf(out, len, "%s/", prefix);
    else
        snprintf(out, len, "%s/%ss/%s", prefix, type, id);
    json_decref(job);
}

void api_reply_created(req_t *r, json_t *body)
{
    if (req_wants_json(r)) {
        reply_json(r, 200, body);
        return;
    }
    char where[1024];
    created_location(r->srv, body, where, sizeof where);
    reply_redirect(r, where, body);
}

char *api_replace_all(const char *s, const char *from, const char *to, size_t *len)
{
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (const char *p = s; nf && (p = strstr(p, from)); p += nf)
        count++;
    size_t out_len = strlen(s) + count * nt - count * nf;
    char *out = malloc(out_len + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = s, *hit; *p;) {
        hit = nf ? strstr(p, from) : NULL;
        if (!hit) {
            strcpy(o, p);
            o += strlen(p);
            break;
        }
        memcpy(o, p, (size_t)(hit - p));
        o += hit - p;
        memcpy(o, to, nt);
        o += nt;
        p = hit + nf;
    }
    *o = 0;
    if (len)
        *len = out_len;
    return out;
}
