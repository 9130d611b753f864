/* The libmicrohttpd side: one request context per connection call sequence, body
 * decoding into fields (post processor for urlencoded and multipart, jansson for JSON),
 * the upload cap, route dispatch and the response helpers. */
#define _GNU_SOURCE
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cdigits/util.h"
#include "html.h"

/* ---- responses ----------------------------------------------------------------------- */

static const struct {
    int status;
    const char *reason, *type;
} g_http_errors[] = {
    {400, "Bad Request", "BadRequest"},
    {401, "Unauthorized", "Unauthorized"},
    {403, "Forbidden", "Forbidden"},
    {404, "Not Found", "NotFound"},
    {405, "Method Not Allowed", "MethodNotAllowed"},
    {409, "Conflict", "Conflict"},
    {413, "Request Entity Too Large", "RequestEntityTooLarge"},
    {429, "Too Many Requests", "TooManyRequests"},
    {500, "Internal Server Error", "InternalServerError"},
    {503, "Service Unavailable", "ServiceUnavailable"},
};

int err_http_status(int kind)
{
    switch (kind) {
    case CD_E_INVALID:
        return 400;
    case CD_E_UNAUTHORIZED:
        return 401;
    case CD_E_FORBIDDEN:
        return 403;
    case CD_E_NOTFOUND:
        return 404;
    case CD_E_CONFLICT:
        return 409;
    case CD_E_TOOLARGE:
        return 413;
    default:
        return 500;
    }
}

void reply_response(req_t *r, int status, struct MHD_Response *resp)
{
    if (r->resp)
        MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
}

void reply_add_header(req_t *r, const char *name, const char *value)
{
    if (r->resp)
        MHD_add_response_header(r->resp, name, value);
}

/* reply_buffer without the 500: CD_ERR (data freed, nothing sent) when libmicrohttpd
 * cannot make the response, for the replies that are themselves the error. */
static int send_buffer(req_t *r, int status, void *data, size_t len, const char *ctype, const char *cache)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(data);
        return CD_ERR;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
    reply_response(r, status, resp);
    return CD_OK;
}

void reply_buffer(req_t *r, int status, void *data, size_t len, const char *ctype, const char *cache)
{
    if (send_buffer(r, status, data, len, ctype, cache) != CD_OK)
        reply_error(r, 500, "out of memory making the reply of %zu bytes", len);
}

void reply_json(req_t *r, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(body);
    if (!text) {
        text = strdup("{\"error\": {\"message\": \"500 Internal Server Error: the reply could not be encoded\", "
                      "\"type\": \"InternalServerError\"}}");
        status = 500;
        if (!text)
            return;
    }
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (withnl) {
        withnl[n] = '\n';
        withnl[n + 1] = 0;
        text = withnl;
        n++;
    }
    send_buffer(r, status, text, n, "application/json", "no-store");
}

void reply_text(req_t *r, int status, const char *text)
{
    char *copy = strdup(text);
    if (copy)
        send_buffer(r, status, copy, strlen(copy), "text/plain; charset=utf-8", "no-store");
}

void reply_error(req_t *r, int status, const char *fmt, ...)
{
    char desc[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(desc, sizeof desc, fmt, ap);
    va_end(ap);
    const char *reason = "Error", *type = "HTTPException";
    for (size_t i = 0; i < CD_ARRAY_LEN(g_http_errors); i++)
        if (g_http_errors[i].status == status) {
            reason = g_http_errors[i].reason;
            type = g_http_errors[i].type;
        }
    char message[2300];
    snprintf(message, sizeof message, "%d %s: %s", status, reason, desc);
    json_t *d = json_string(desc), *m = json_string(message);
    reply_json(r, status, json_pack("{s:{s:o, s:s, s:o}}", "error", "message", m ? m : json_string(reason), "type",
                                    type, "description", d ? d : json_string("")));
}

void reply_err(req_t *r, const cd_err_t *err)
{
    reply_error(r, err_http_status(err->kind), "%s", err->msg);
}

/* ---- JSON or HTML: DIGITS's request_wants_json ------------------------------------------ */

/* The quality the Accept header gives mime ("type/subtype"): the highest q of the
 * entries that match it (itself, type/\*, \*\/\*), as werkzeug reads the header; 0 when
 * none matches. A q that is no number counts as 1 and q is kept within 0..1. */
static double accept_quality(const char *accept, const char *mime)
{
    const char *slash = strchr(mime, '/');
    size_t tlen = slash ? (size_t)(slash - mime) : strlen(mime);
    double best = 0;
    for (const char *p = accept; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        if (len >= sizeof item)
            len = sizeof item - 1;
        memcpy(item, p, len);
        item[len] = 0;
        p = end ? end + 1 : NULL;
        char *params = strchr(item, ';');
        if (params)
            *params++ = 0;
        char *type = item;
        while (*type == ' ' || *type == '\t')
            type++;
        size_t n = strlen(type);
        while (n && (type[n - 1] == ' ' || type[n - 1] == '\t'))
            type[--n] = 0;
        if (!n)
            continue;
        double q = 1;
        for (char *a = params; a && *a;) {
            char *next = strchr(a, ';');
            if (next)
                *next++ = 0;
            while (*a == ' ' || *a == '\t')
                a++;
            if ((a[0] == 'q' || a[0] == 'Q') && a[1] == '=') {
                char *e;
                double v = strtod(a + 2, &e);
                if (e != a + 2)
                    q = v < 0 ? 0 : v > 1 ? 1 : v;
            }
            a = next;
        }
        int match = strcmp(type, "*") == 0 || strcmp(type, "*/*") == 0 || strcasecmp(type, mime) == 0 ||
                    (n == tlen + 2 && strncasecmp(type, mime, tlen) == 0 && strcmp(type + tlen, "/*") == 0);
        if (match && q > best)
            best = q;
    }
    return best;
}

int http_wants_json(const char *path, const char *accept)
{
    size_t n = strlen(path);
    if (n >= 5 && (strcmp(path + n - 5, ".json") == 0 || strcmp(path + n - 5, "/json") == 0))
        return 1;
    if (!accept)
        return 0;
    return accept_quality(accept, "application/json") > accept_quality(accept, "text/html");
}

int req_wants_json(const req_t *r)
{
    return http_wants_json(r->path, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
}

/* A creation form's errors for a browser (a form post that does not want JSON): a page
 * listing each field with its messages, status 400, as DIGITS answers its form. */
static void reply_form_errors_html(req_t *r, json_t *errors)
{
    html_t h = {0};
    html_raw(&h, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>The form has errors"
                  "</title></head>\n<body><h1>The form has errors</h1>\n<p>Correct these fields and send the form "
                  "again:</p>\n<ul class=\"form-errors\">\n");
    const char *field;
    json_t *msgs;
    json_object_foreach(errors, field, msgs)
    {
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m)
        {
            html_raw(&h, "<li><b>");
            html_text(&h, field);
            html_raw(&h, "</b>: ");
            html_text(&h, json_string_value(m) ? json_string_value(m) : "");
            html_raw(&h, "</li>\n");
        }
    }
    html_raw(&h, "</ul>\n</body></html>\n");
    json_decref(errors);
    if (h.bad) {
        free(h.p);
        reply_error(r, 500, "out of memory making the form's error page");
        return;
    }
    html_reply(r, 400, &h);
}

void reply_form_errors(req_t *r, json_t *errors)
{
    if (r->route && (r->route->flags & R_FORM) && !req_wants_json(r)) {
        reply_form_errors_html(r, errors);
        return;
    }
    reply_json(r, 400, json_pack("{s:o}", "errors", errors));
}

void reply_field_error(req_t *r, const char *field, const char *message)
{
    json_t *errors = json_object();
    form_add_error(errors, field, "%s", message);
    reply_form_errors(r, errors);
}

void reply_redirect(req_t *r, const char *location, json_t *body)
{
    reply_json(r, 302, body ? body : json_pack("{s:s}", "location", location));
    reply_add_header(r, MHD_HTTP_HEADER_LOCATION, location);
}

static const struct {
    const char *ext, *type;
} g_mime[] = {
    {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
    {".json", "application/json"}, {".png", "image/png"}, {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"},
    {".svg", "image/svg+xml"}, {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"},
    {".log", "text/plain; charset=utf-8"}, {".prototxt", "text/plain; charset=utf-8"},
    {".woff2", "font/woff2"}, {".map", "application/json"},
};

void reply_file(req_t *r, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        reply_error(r, 404, "File not found");
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        reply_error(r, 500, "cannot send %s", path);
        return;
    }
    const char *ctype = "application/octet-stream";
    size_t n = strlen(path);
    for (size_t i = 0; i < CD_ARRAY_LEN(g_mime); i++) {
        size_t e = strlen(g_mime[i].ext);
        if (n > e && strcasecmp(path + n - e, g_mime[i].ext) == 0)
            ctype = g_mime[i].type;
    }
    /* a job's files are what users uploaded or workers wrote: never a page or a script
     * of this origin */
    if (r->route && r->route->handler == h_files &&
        (strstr(ctype, "html") || strstr(ctype, "javascript") || strstr(ctype, "svg")))
        ctype = "text/plain; charset=utf-8";
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    reply_response(r, 200, resp);
}

/* ---- routes ---------------------------------------------------------------------------- */

int route_match(const char *pattern, unsigned flags, const char *path, char params[][512], int *nparams)
{
    *nparams = 0;
    size_t plen = strlen(pattern);
    int json_suffix = plen > 5 && strcmp(pattern + plen - 5, "/json") == 0;
    const char *p = pattern, *u = path;
    const char *pend = json_suffix ? pattern + plen - 5 : pattern + plen;
    while (p < pend) {
        if (*p == '<') {
            const char *close = strchr(p, '>');
            if (!close || *nparams >= REQ_MAX_PARAMS)
                return 0;
            p = close + 1;
            const char *start = u;
            if ((flags & R_RAW) && p == pend) {
                u += strlen(u);
            } else {
                /* a parameter stops at "/" or, before a json suffix, at ".json" */
                while (*u && *u != '/') {
                    if (json_suffix && p == pend && strcmp(u, ".json") == 0)
                        break;
                    u++;
                }
            }
            size_t n = (size_t)(u - start);
            if (n == 0 || n >= 512)
                return 0;
            memcpy(params[*nparams], start, n);
            params[*nparams][n] = 0;
            (*nparams)++;
            continue;
        }
        if (*p != *u)
            return 0;
        p++;
        u++;
    }
    if (json_suffix)
        return strcmp(u, "/json") == 0 || strcmp(u, ".json") == 0;
    return *u == 0;
}

/* Finds the route; sets *method_mismatch when the path matches with another method. */
static const route_t *find_route(req_t *r, int *method_mismatch)
{
    const char *method = strcmp(r->method, "HEAD") == 0 ? "GET" : r->method;
    *method_mismatch = 0;
    for (size_t i = 0; i < cd_nroutes; i++) {
        const route_t *rt = &cd_routes[i];
        char params[REQ_MAX_PARAMS][512];
        int np;
        if (!route_match(rt->pattern, rt->flags, r->path, params, &np))
            continue;
        if (strcmp(rt->method, method) != 0) {
            *method_mismatch = 1;
            continue;
        }
        memcpy(r->params, params, sizeof params);
        r->nparams = np;
        return rt;
    }
    return NULL;
}

/* ---- request bodies --------------------------------------------------------------------- */

static MHD_Result_t post_iterator(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *transfer_encoding, const char *data,
                                  uint64_t off, size_t size)
{
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    req_t *r = cls;
    if (!key)
        return MHD_YES;
    /* a new field starts at offset 0; later chunks of the same field continue it */
    if (off == 0 || !r->have_cur || strcmp(r->fields->v[r->cur_field].name, key) != 0) {
        if (fields_add(r->fields, key, data ? data : "", data ? size : 0, filename) != CD_OK)
            return MHD_NO;
        r->cur_field = r->fields->n - 1;
        r->have_cur = 1;
        return MHD_YES;
    }
    if (size && fields_append(r->fields, r->cur_field, data, size) != CD_OK)
        return MHD_NO;
    return MHD_YES;
}

static const char *header(req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* Sets up body decoding from the content type. CD_ERR with a 400 reply. */
static int body_begin(req_t *r)
{
    const char *ctype = header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ctype && (strncasecmp(ctype, "multipart/form-data", 19) == 0 ||
                  strncasecmp(ctype, "application/x-www-form-urlencoded", 33) == 0)) {
        r->pp = MHD_create_post_processor(r->conn, 64 * 1024, post_iterator, r);
        if (!r->pp) {
            reply_error(r, 400, "Malformed form body: a multipart body needs a boundary in its Content-Type");
            return CD_ERR;
        }
        r->body_kind = BODY_FORM;
    } else if (ctype && strncasecmp(ctype, "application/json", 16) == 0) {
        r->body_kind = BODY_JSON;
    } else {
        r->body_kind = BODY_RAW; /* curl -d without a type, or none: JSON or urlencoded */
    }
    return CD_OK;
}

static void body_feed(req_t *r, const char *data, size_t size)
{
    r->received += size;
    if (r->received > r->srv->cfg.max_upload)
        r->too_large = 1; /* too large wins over malformed: keep reading, answer 413 */
    if (r->too_large || r->bad_body)
        return;
    if (r->body_kind == BODY_FORM) {
        if (MHD_post_process(r->pp, data, size) != MHD_YES) {
            r->bad_body = 1;
            snprintf(r->bad_msg, sizeof r->bad_msg, "Malformed form body: the multipart or urlencoded data is broken");
        }
        return;
    }
    if (r->body_len + size + 1 > r->body_cap) {
        size_t ncap = r->body_cap ? r->body_cap : 4096;
        while (ncap < r->body_len + size + 1)
            ncap *= 2;
        char *nb = realloc(r->body, ncap);
        if (!nb) {
            r->too_large = 1;
            return;
        }
        r->body = nb;
        r->body_cap = ncap;
    }
    memcpy(r->body + r->body_len, data, size);
    r->body_len += size;
    r->body[r->body_len] = 0;
}

/* Decodes a buffered body into fields. CD_ERR with a 400 reply. */
static int body_finish(req_t *r)
{
    if (r->body_kind == BODY_FORM) {
        if (MHD_destroy_post_processor(r->pp) != MHD_YES && !r->bad_body) {
            r->bad_body = 1;
            snprintf(r->bad_msg, sizeof r->bad_msg, "Malformed form body: it ended in the middle of a field");
        }
        r->pp = NULL;
        if (r->bad_body) {
            reply_error(r, 400, "%s", r->bad_msg);
            return CD_ERR;
        }
        return CD_OK;
    }
    if (!r->body_len)
        return CD_OK;
    const char *p = r->body;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    if (r->body_kind == BODY_JSON || *p == '{' || *p == '[') {
        json_error_t jerr;
        json_t *obj = json_loadb(r->body, r->body_len, 0, &jerr);
        if (!obj) {
            reply_error(r, 400, "Invalid JSON body: %s at line %d, column %d", jerr.text, jerr.line, jerr.column);
            return CD_ERR;
        }
        char msg[256];
        int rc = fields_from_json(r->fields, obj, msg, sizeof msg);
        json_decref(obj);
        if (rc != CD_OK) {
            reply_error(r, 400, "Invalid JSON body: %s", msg);
            return CD_ERR;
        }
        return CD_OK;
    }
    if (fields_parse_urlencoded(r->fields, r->body, r->body_len) != CD_OK) {
        reply_error(r, 400, "Malformed urlencoded body: a %% escape is broken");
        return CD_ERR;
    }
    return CD_OK;
}

static MHD_Result_t query_iterator(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    req_t *r = cls;
    if (key)
        fields_add(r->fields, key, value ? value : "", value ? strlen(value) : 0, NULL);
    return MHD_YES;
}

/* ---- request counters ------------------------------------------------------------------- */

const double http_latency_bounds[HTTP_LATENCY_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,  0.5,    1,     2.5,  5,     10};

/* A route row's slot is its index: no two rows share a method and pattern
 * (test_server_routes checks it). */
struct http_stats {
    size_t nslots;             /* cd_nroutes + 2 */
    http_slot_stats_t slot[];  /* nslots */
};

/* Made once at start: the counters live as long as the daemon whose threads add to them. */
static int stats_new(server_t *srv, cd_err_t *err)
{
    if (srv->http_stats)
        return CD_OK;
    size_t n = cd_nroutes + 2;
    struct http_stats *st = calloc(1, sizeof *st + n * sizeof st->slot[0]);
    if (!st)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory making the request counters of %zu routes", n);
    st->nslots = n;
    srv->http_stats = st;
    return CD_OK;
}

static void stats_free(server_t *srv)
{
    if (!srv->http_stats)
        return;
    free(srv->http_stats);
    srv->http_stats = NULL;
}

/* Counts one reply of r with status: its slot's status class, latency bucket and sum. */
static void stats_count(const req_t *r, int status)
{
    struct http_stats *st = r->srv->http_stats;
    if (!st)
        return;
    size_t slot;
    if (r->route)
        slot = (size_t)(r->route - cd_routes);
    else if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0)
        slot = HTTP_SLOT_STATIC(cd_nroutes);
    else
        slot = HTTP_SLOT_UNMATCHED(cd_nroutes);
    http_slot_stats_t *s = &st->slot[slot];
    int cls = status / 100 - 1;
    if (cls < 0 || cls >= HTTP_STATUS_CLASSES)
        cls = HTTP_STATUS_CLASSES - 1;
    double took = cd_now() - r->started;
    if (took < 0)
        took = 0;
    size_t b = 0;
    while (b < HTTP_LATENCY_BUCKETS && took > http_latency_bounds[b])
        b++;
    __atomic_fetch_add(&s->status[cls], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->bucket[b], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->sum_us, (uint64_t)(took * 1e6 + 0.5), __ATOMIC_RELAXED);
}

uint64_t http_stats_read(const server_t *srv, size_t slot, http_slot_stats_t *out)
{
    memset(out, 0, sizeof *out);
    const struct http_stats *st = srv->http_stats;
    if (!st || slot >= st->nslots)
        return 0;
    const http_slot_stats_t *s = &st->slot[slot];
    uint64_t n = 0;
    for (int i = 0; i < HTTP_STATUS_CLASSES; i++)
        out->status[i] = __atomic_load_n(&s->status[i], __ATOMIC_RELAXED);
    for (int i = 0; i <= HTTP_LATENCY_BUCKETS; i++) {
        out->bucket[i] = __atomic_load_n(&s->bucket[i], __ATOMIC_RELAXED);
        n += out->bucket[i];
    }
    out->sum_us = __atomic_load_n(&s->sum_us, __ATOMIC_RELAXED);
    return n;
}

/* ---- dispatch -------------------------------------------------------------------------- */

static void serve_static(req_t *r)
{
    server_t *srv = r->srv;
    char path[PATH_MAX];
    if (srv->cfg.web_dir[0] && (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0) &&
        paths_resolve_under(srv->cfg.web_dir, r->path, path, sizeof path) == CD_OK) {
        reply_file(r, path);
        return;
    }
    reply_error(r, 404, "The requested URL %s was not found on the server; see docs/api.md for the routes",
                r->path);
}

/* Connection threads that answer ordinary requests run a little nicer than the threads
 * that store worker lines and feed event streams, so a flood of polls cannot delay a
 * metric on its way to a browser. Once per thread; event streams stay at 0. */
static void lower_priority_once(req_t *r)
{
    static __thread int done;
    if (done || (r->route && (r->route->handler == h_job_events || r->route->handler == h_home_events)))
        return;
    done = 1;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 5) != 0)
        cd_debug("http: cannot lower a connection thread's priority: %s", strerror(errno));
}

static void dispatch(req_t *r)
{
    if (!r->route) {
        int mismatch = 0;
        r->route = find_route(r, &mismatch);
        if (!r->route) {
            if (mismatch)
                reply_error(r, 405, "The method %s is not allowed for %s", r->method, r->path);
            else
                serve_static(r);
            return;
        }
    }
    lower_priority_once(r);
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_iterator, r);
    if (security_check_request(r) != CD_OK)
        return;
    r->route->handler(r);
    if (!r->resp)
        reply_error(r, 500, "%s %s produced no reply", r->method, r->path);
}

static int method_has_body(const char *m)
{
    return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0 || strcmp(m, "PATCH") == 0;
}

static MHD_Result_t queue(req_t *r)
{
    r->done = 1;
    stats_count(r, r->resp ? r->status : 500);
    if (!r->resp)
        return MHD_NO;
    security_headers(r, r->resp);
    MHD_Result_t rc = MHD_queue_response(r->conn, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return rc;
}

static MHD_Result_t on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls)
{
    (void)version;
    server_t *srv = cls;
    req_t *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->srv = srv;
        r->conn = conn;
        r->method = method;
        r->started = cd_now();
        r->fields = fields_new();
        if (!r->fields)
            return MHD_NO;
        const char *prefix = srv->cfg.url_prefix;
        size_t pl = strlen(prefix);
        if (pl && strncmp(url, prefix, pl) == 0 && (url[pl] == '/' || url[pl] == 0))
            url += pl;
        else if (pl) {
            snprintf(r->path, sizeof r->path, "%s", url);
            reply_error(r, 404, "The requested URL %s is outside this server's prefix %s", url, prefix);
            return queue(r);
        }
        snprintf(r->path, sizeof r->path, "%s", url[0] ? url : "/");
        if (strlen(url) >= sizeof r->path) {
            reply_error(r, 404, "The requested URL is too long");
            return queue(r);
        }
        const char *len = header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (len && strtoull(len, NULL, 10) > srv->cfg.max_upload) {
            reply_error(r, 413, "The request body is %s bytes; this server accepts at most %zu (--max-upload)", len,
                        srv->cfg.max_upload);
            return queue(r);
        }
        int mismatch = 0;
        r->route = find_route(r, &mismatch);
        if (security_check_early(r) != CD_OK)
            return queue(r);
        if (r->route && (r->route->flags & R_BODY) && method_has_body(method) && body_begin(r) != CD_OK)
            return queue(r);
        return MHD_YES;
    }
    if (r->done)
        return MHD_YES;
    if (*upload_data_size) {
        if (r->body_kind != BODY_NONE)
            body_feed(r, upload_data, *upload_data_size);
        else
            r->received += *upload_data_size; /* a body nobody reads: drop it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->too_large) {
        reply_error(r, 413, "The request body is larger than this server accepts (%zu bytes, --max-upload)",
                    srv->cfg.max_upload);
        return queue(r);
    }
    if (r->body_kind != BODY_NONE && body_finish(r) != CD_OK)
        return queue(r);
    dispatch(r);
    return queue(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    req_t *r = *con_cls;
    if (!r)
        return;
    if (r->pp)
        MHD_destroy_post_processor(r->pp);
    if (r->resp)
        MHD_destroy_response(r->resp);
    fields_free(r->fields);
    free(r->body);
    free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    cd_debug("http: %s", msg);
}

int http_start(server_t *srv, cd_err_t *err)
{
    if (!srv->sec && security_init(srv, err) != CD_OK)
        return CD_ERR;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)srv->cfg.port);
    if (inet_pton(AF_INET, srv->cfg.bind, &addr.sin_addr) != 1)
        return cd_err_set(err, CD_E_INVALID, "--bind %s is not an IPv4 address; use e.g. 127.0.0.1 or 0.0.0.0",
                          srv->cfg.bind);
    if (stats_new(srv, err) != CD_OK)
        return CD_ERR;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG;
    srv->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, &addr,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT,
                                (unsigned)60, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_EXTERNAL_LOGGER,
                                mhd_log, NULL, MHD_OPTION_END);
    /* libmicrohttpd's default on Linux is SO_REUSEADDR alone: a restart binds at once
     * while old connections linger in TIME_WAIT, yet a second listener on the port is
     * refused (SO_REUSEPORT would let two servers split the connections). */
    if (!srv->mhd) {
        stats_free(srv);
        return cd_err_set(err, CD_E_INTERNAL,
                          "cannot listen on %s:%d: the port is in use or cannot be opened; start with another "
                          "--port (--port 0 picks a free one), or stop the server that holds it",
                          srv->cfg.bind, srv->cfg.port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
    if (info && info->port)
        srv->cfg.port = info->port;
    return CD_OK;
}

void http_stop(server_t *srv)
{
    if (srv->mhd) {
        MHD_stop_daemon(srv->mhd);
        srv->mhd = NULL;
    }
    stats_free(srv);
    security_free(srv);
}
