/* Server-sent event streams, the hardware view, and files of the jobs directory.
 *
 * An SSE stream is a response whose content comes from a callback: each call returns
 * what is pending, or blocks (on the event hub's condition variable, up to the
 * keepalive interval) until the channel has something. The server runs a thread per
 * connection, so a blocked stream holds only its own thread. The home stream carries
 * only the events of jobs the asker may read (security_may_read). */
#include "internal.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

#define SSE_KEEPALIVE 15.0 /* seconds between comments on an idle stream */

typedef struct sse {
    server_t *srv;
    char channel[64];
    uint64_t cursor;
    char *buf;
    size_t len, off;
    req_t *who;   /* the asker's identity, for security_may_read; NULL: every event goes out */
    json_t *seen; /* job id -> whether the asker may read it (owners do not change) */
} sse_t;

/* Whether the event text [p, end) may go to the asker: events about no job do, events
 * about a job when security_may_read says so (a job already gone does not). */
static int sse_event_readable(sse_t *s, const char *p, const char *end)
{
    const char *data = p;
    while (data < end && strncmp(data, "data: ", 6) != 0) {
        const char *nl = memchr(data, '\n', (size_t)(end - data));
        data = nl ? nl + 1 : end;
    }
    if (data >= end)
        return 1;
    data += 6;
    const char *eol = memchr(data, '\n', (size_t)(end - data));
    json_t *d = json_loadb(data, (size_t)((eol ? eol : end) - data), 0, NULL);
    const char *id = json_string_value(json_object_get(d, "job_id"));
    int ok = 1;
    if (id) {
        json_t *known = json_object_get(s->seen, id);
        if (known) {
            ok = json_is_true(known);
        } else {
            json_t *job = store_job_get(s->srv->store, id);
            ok = job && security_may_read(s->who, job);
            if (job) {
                if (json_object_size(s->seen) > 4096)
                    json_object_clear(s->seen);
                json_object_set_new(s->seen, id, json_boolean(ok));
            }
            json_decref(job);
        }
    }
    json_decref(d);
    return ok;
}

/* Keeps in s->buf only the events the asker may read, in place (events_wait's text:
 * "id: N\nevent: NAME\ndata: JSON\n\n" each). */
static void sse_filter(sse_t *s)
{
    char *p = s->buf, *end = s->buf + s->len, *w = s->buf;
    while (p < end) {
        char *stop = strstr(p, "\n\n");
        char *next = stop ? stop + 2 : end;
        if (sse_event_readable(s, p, next)) {
            memmove(w, p, (size_t)(next - p));
            w += next - p;
        }
        p = next;
    }
    s->len = (size_t)(w - s->buf);
    if (s->buf)
        s->buf[s->len] = 0;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    sse_t *s = cls;
    while (s->off >= s->len) { /* until something is left after the filter */
        s->len = s->off = 0;
        if (s->srv->stopping)
            return MHD_CONTENT_READER_END_OF_STREAM;
        int n = events_wait(s->srv->events, s->channel, &s->cursor, SSE_KEEPALIVE, &s->buf, &s->len);
        if (n < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n == 0) {
            static const char ka[] = ": keepalive\n\n";
            char *nb = realloc(s->buf, sizeof ka);
            if (!nb)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            memcpy(nb, ka, sizeof ka);
            s->buf = nb;
            s->len = sizeof ka - 1;
        } else if (s->who) {
            sse_filter(s);
        }
    }
    size_t n = s->len - s->off;
    if (n > max)
        n = max;
    memcpy(out, s->buf + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void sse_free(void *cls)
{
    sse_t *s = cls;
    free(s->buf);
    free(s->who);
    json_decref(s->seen);
    free(s);
}

/* Where a new stream starts: after the newest event, or after the client's Last-Event-ID.
 * Taken before the stream's first event is built, and once every event up to it is
 * committed (events of a batch of worker lines go out before the batch commits), so a
 * change is either in that first event and what the page reads next, or in the stream. */
static uint64_t sse_cursor(req_t *r)
{
    uint64_t newest = events_last_id(r->srv->events);
    store_sync(r->srv->store);
    const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    if (last) {
        unsigned long long v = strtoull(last, NULL, 10);
        if (v <= newest)
            return v;
    }
    return newest;
}

/* Starts a stream on channel from cursor (sse_cursor), first sending `first` (an event
 * with no id, so that it does not move a client's Last-Event-ID). With `filtered`, only
 * the events of jobs the asker may read go out (security_may_read). */
static void sse_start(req_t *r, const char *channel, uint64_t cursor, const char *first_name, json_t *first,
                      int filtered)
{
    sse_t *s = calloc(1, sizeof *s);
    if (s && filtered && !security_reads_all(r)) {
        s->who = calloc(1, sizeof *s->who);
        s->seen = json_object();
        if (!s->who || !s->seen) {
            sse_free(s);
            s = NULL;
        } else {
            s->who->srv = r->srv;
            snprintf(s->who->username, sizeof s->who->username, "%s", r->username);
            s->who->is_admin = r->is_admin;
        }
    }
    if (!s) {
        json_decref(first);
        reply_error(r, 500, "out of memory");
        return;
    }
    s->srv = r->srv;
    snprintf(s->channel, sizeof s->channel, "%s", channel);
    s->cursor = cursor;
    char *data = first ? json_dumps(first, JSON_COMPACT) : NULL;
    json_decref(first);
    size_t need = (data ? strlen(data) : 0) + 128;
    s->buf = malloc(need);
    if (s->buf) {
        int n = data ? snprintf(s->buf, need, "retry: 2000\nevent: %s\ndata: %s\n\n", first_name, data)
                     : snprintf(s->buf, need, "retry: 2000\n\n");
        s->len = n > 0 ? (size_t)n : 0;
    }
    free(data);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!resp) {
        sse_free(s);
        reply_error(r, 500, "cannot create the event stream");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    reply_response(r, 200, resp);
}

void h_job_events(req_t *r)
{
    uint64_t cursor = sse_cursor(r);
    json_t *job = api_job_param(r);
    if (!job)
        return;
    char channel[64];
    snprintf(channel, sizeof channel, "job:%s", r->params[0]);
    sse_start(r, channel, cursor, "job", view_job_detail(r->srv, job), 0); /* the route checked the job */
    json_decref(job);
}

void h_home_events(req_t *r)
{
    uint64_t cursor = sse_cursor(r);
    json_t *res = sched_resources(r->srv->sched);
    json_t *gpus = json_object_get(res, "gpus");
    json_t *hello = json_pack("{s:O, s:O}", "total", json_object_get(gpus, "total"), "free", json_object_get(gpus, "free"));
    json_decref(res);
    sse_start(r, "home", cursor, "gpus", hello, 1);
}

/* The server process's own memory: resident, the C heap in use, and SQLite's share of
 * that heap (its page caches grow until their cap of 2 MiB per connection), so a soak
 * can tell a cache filling up from a leak. */
static json_t *server_memory(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    struct mallinfo2 mi = mallinfo2();
    long long sql = 0, sql_peak = 0;
    store_memory(&sql, &sql_peak);
    return json_pack("{s:I, s:I, s:I, s:I}", "resident_bytes", (json_int_t)resident * sysconf(_SC_PAGESIZE),
                     "heap_in_use_bytes", (json_int_t)mi.uordblks, "sqlite_bytes", (json_int_t)sql,
                     "sqlite_peak_bytes", (json_int_t)sql_peak);
}

void h_hardware(req_t *r)
{
    server_t *srv = r->srv;
    pthread_mutex_lock(&srv->hw_lock);
    json_t *latest = srv->hw_latest ? json_deep_copy(srv->hw_latest) : NULL;
    pthread_mutex_unlock(&srv->hw_lock);
    if (!latest)
        latest = json_pack("{s:o, s:[]}", "gpus", hw_gpus_json(srv->hw), "workers");
    json_object_set_new(latest, "nvml", hw_nvml_json(srv->hw)); /* why "gpus" is empty, when it is */
    json_object_set_new(latest, "resources", sched_resources(srv->sched));
    json_object_set_new(latest, "server", server_memory());
    reply_json(r, 200, latest);
}

void h_files(req_t *r)
{
    char path[PATH_MAX];
    if (r->nparams < 1 || paths_resolve_under(r->srv->jobs_dir, r->params[0], path, sizeof path) != CD_OK) {
        reply_error(r, 404, "File not found: %s is not a file inside the jobs directory",
                    r->nparams > 0 ? r->params[0] : "");
        return;
    }
    reply_file(r, path);
}
