/* The job lists under --job-visibility own, for a user who is not an administrator:
 * /index/json, /completed_jobs/json and the home event stream with only the jobs the
 * user may read (their own and those nobody owns). Same shapes as api_jobs.c and
 * api_live.c give everyone else. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

#define VIS_KEEPALIVE 15.0

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static int job_state(json_t *job) { return (int)json_integer_value(json_object_get(job, "state")); }

void h_index_visible(req_t *r)
{
    server_t *srv = r->srv;
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
    reply_json(r, 200, out);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

void h_completed_jobs_visible(req_t *r)
{
    server_t *srv = r->srv;
    json_t *jobs = store_job_list(srv->store, NULL);
    json_t *fields = json_object(), *running = json_array(), *datasets = json_array(), *models = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        if (!security_may_read(r, j))
            continue;
        json_t *d = view_job_table(srv, j, fields);
        if (cd_state_is_running(job_state(j)))
            json_array_append_new(running, d);
        else
            json_array_append_new(strcmp(jstr(j, "type"), "model") == 0 ? models : datasets, d);
    }
    json_decref(jobs);
    size_t n = json_object_size(fields), k = 0;
    json_t **v = calloc(n ? n : 1, sizeof *v);
    const char *key;
    json_t *val;
    json_object_foreach(fields, key, val) if (v) v[k++] = json_string(key);
    json_decref(fields);
    json_t *names = json_array();
    if (v) {
        qsort(v, k, sizeof *v, cmp_names); /* sorted, as DIGITS sorts the set */
        for (size_t a = 0; a < k; a++)
            json_array_append_new(names, v[a]);
        free(v);
    }
    reply_json(r, 200,
               json_pack("{s:o, s:o, s:o, s:[], s:o}", "running", running, "datasets", datasets, "models", models,
                         "pretrained_models", "model_output_fields", names));
}

/* ---- the home stream, filtered -------------------------------------------------------- */

typedef struct vis_stream {
    server_t *srv;
    req_t who;         /* a copy of the asker's identity, for security_may_read */
    uint64_t cursor;
    char *raw;         /* events as the hub gives them */
    size_t rawlen;
    char *buf;         /* what goes to the client */
    size_t len, off, cap;
    json_t *seen;      /* job id -> true/false: whether the asker may read it */
} vis_stream_t;

static int visible(vis_stream_t *s, const char *job_id)
{
    json_t *known = json_object_get(s->seen, job_id);
    if (known)
        return json_is_true(known);
    json_t *job = store_job_get(s->srv->store, job_id);
    int ok = job && security_may_read(&s->who, job); /* a job gone before it was seen stays hidden */
    json_decref(job);
    if (json_object_size(s->seen) > 4096)
        json_object_clear(s->seen);
    json_object_set_new(s->seen, job_id, json_boolean(ok));
    return ok;
}

static void out_append(vis_stream_t *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *nb = realloc(s->buf, cap);
        if (!nb)
            return;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
}

/* Copies the events of raw whose job the asker may read (and those about no job). */
static void filter_events(vis_stream_t *s)
{
    char *p = s->raw, *end = s->raw + s->rawlen;
    while (p < end) {
        char *stop = strstr(p, "\n\n");
        char *next = stop ? stop + 2 : end;
        char *data = strstr(p, "\ndata: ");
        int keep = 1;
        if (data && data < next) {
            data += 7;
            char *eol = memchr(data, '\n', (size_t)(next - data));
            json_t *d = json_loadb(data, eol ? (size_t)(eol - data) : (size_t)(next - data), 0, NULL);
            const char *id = json_string_value(json_object_get(d, "job_id"));
            if (id)
                keep = visible(s, id);
            json_decref(d);
        }
        if (keep)
            out_append(s, p, (size_t)(next - p));
        p = next;
    }
}

static ssize_t vis_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    vis_stream_t *s = cls;
    while (s->off >= s->len) {
        s->len = s->off = 0;
        if (s->srv->stopping)
            return MHD_CONTENT_READER_END_OF_STREAM;
        s->rawlen = 0;
        int n = events_wait(s->srv->events, "home", &s->cursor, VIS_KEEPALIVE, &s->raw, &s->rawlen);
        if (n < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n == 0) {
            static const char ka[] = ": keepalive\n\n";
            out_append(s, ka, sizeof ka - 1);
        } else {
            filter_events(s);
        }
    }
    size_t n = s->len - s->off;
    if (n > max)
        n = max;
    memcpy(out, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void vis_free(void *cls)
{
    vis_stream_t *s = cls;
    free(s->raw);
    free(s->buf);
    json_decref(s->seen);
    free(s);
}

void h_home_events_visible(req_t *r)
{
    vis_stream_t *s = calloc(1, sizeof *s);
    if (!s || !(s->seen = json_object())) {
        free(s);
        reply_error(r, 500, "out of memory");
        return;
    }
    s->srv = r->srv;
    s->who.srv = r->srv;
    snprintf(s->who.username, sizeof s->who.username, "%s", r->username);
    s->who.is_admin = r->is_admin;
    const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    uint64_t newest = events_last_id(r->srv->events);
    s->cursor = newest;
    if (last) {
        unsigned long long v = strtoull(last, NULL, 10);
        if (v <= newest)
            s->cursor = v;
    }
    json_t *res = sched_resources(r->srv->sched);
    json_t *gpus = json_object_get(res, "gpus");
    json_t *hello = json_pack("{s:O, s:O}", "total", json_object_get(gpus, "total"), "free", json_object_get(gpus, "free"));
    json_decref(res);
    char *data = json_dumps(hello, JSON_COMPACT);
    json_decref(hello);
    char head[512];
    int n = snprintf(head, sizeof head, "retry: 2000\nevent: gpus\ndata: %s\n\n", data ? data : "{}");
    free(data);
    out_append(s, head, n > 0 ? (size_t)n : 0);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, vis_read, s, vis_free);
    if (!resp) {
        vis_free(s);
        reply_error(r, 500, "cannot create the event stream");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    reply_response(r, 200, resp);
}
