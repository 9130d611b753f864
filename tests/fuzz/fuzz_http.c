/*
 * libFuzzer target for the server's request handling over real HTTP: the libmicrohttpd
 * daemon of http.c with its body decoding (multipart and urlencoded through the post
 * processor, JSON, raw), cookies, the security checks and a handful of handlers that
 * need no worker, started once on a loopback port with a store in a temporary folder.
 *
 * Input: byte 0 picks the route, byte 1 the Content-Type; then optional extra header
 * lines, a blank line ("\n\n"), and the body. The target sends the request, reads the
 * answer and checks it is HTTP with a status other than 500. A crash or sanitizer
 * report in any server thread, or a 500, is a bug.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "../../src/server/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ctype.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>


static const struct {
    const char *method, *path;
} g_routes[] = {
    {"POST", "/login"},
    {"POST", "/logout"},
    {"POST", "/models/visualize-lr"},
    {"POST", "/group"},
    {"DELETE", "/jobs"},
    {"POST", "/abort_jobs"},
    {"PUT", "/jobs/20240101-000000-abcd"},
    {"POST", "/tokens/json"},
    {"GET", "/login"},
    {"POST", "/nowhere"},
    {"POST", "/models/visualize-lr.json"},
    {"DELETE", "/tokens/1"},
};

static const char *const g_ctypes[] = {
    "multipart/form-data; boundary=cdfuzz",
    "application/x-www-form-urlencoded",
    "application/json",
    NULL,
    "text/plain",
    "multipart/form-data",
    "application/x-www-form-urlencoded; charset=utf-8",
    "multipart/form-data; boundary=\"cd fuzz\"",
};

static server_t *g_srv;
static char g_dir[64];

/* libFuzzer ends with exit(): the folder goes then (the server's files may stay open) */
static void remove_dir(void)
{
    if (!g_dir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_http: could not remove %s\n", g_dir);
    g_dir[0] = 0;
}

static void http_setup(void)
{
    if (g_srv)
        return;
    char tmpl[] = "/tmp/cdigits-fuzz-http-XXXXXX";
    if (!mkdtemp(tmpl))
        abort();
    snprintf(g_dir, sizeof g_dir, "%s", tmpl);
    atexit(remove_dir);
    char *argv[] = {"serve", NULL};
    cd_server_config_t cfg;
    cd_err_t err;
    if (server_config_parse(&cfg, 1, argv, &err) != CD_OK)
        abort();
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", tmpl);
    cfg.port = 0;
    cfg.web_dir[0] = 0;
    cfg.max_upload = 256 * 1024;
    cd_log_set_level(CD_LOG_ERROR);
    g_srv = calloc(1, sizeof *g_srv);
    g_srv->cfg = cfg;
    pthread_mutex_init(&g_srv->hw_lock, NULL);
    pthread_mutex_init(&g_srv->monitor_lock, NULL);
    pthread_mutex_init(&g_srv->index_lock, NULL);
    pthread_cond_init(&g_srv->monitor_cond, NULL);
    char jobs[PATH_MAX + 8], db[PATH_MAX + 16];
    snprintf(jobs, sizeof jobs, "%s/jobs", tmpl);
    cd_mkdirs(jobs, 0755);
    if (!realpath(jobs, g_srv->jobs_dir) || !realpath(tmpl, g_srv->roots[0]))
        abort();
    g_srv->nroots = 1;
    snprintf(db, sizeof db, "%s/cdigits.db", tmpl);
    g_srv->events = events_new(256);
    if (store_open(db, &g_srv->store, &err) != CD_OK || http_start(g_srv, &err) != CD_OK) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        abort();
    }
}

/* Stops the server and removes its folder (the regression test calls it; libFuzzer
 * never returns). */
void fuzz_http_teardown(void);
void fuzz_http_teardown(void)
{
    if (!g_srv)
        return;
    http_stop(g_srv);
    store_close(g_srv->store);
    events_free(g_srv->events);
    free(g_srv->index_body);
    free(g_srv);
    g_srv = NULL;
    remove_dir();
}

/* Appends the extra header lines of text to out: "Name: value" lines only, none that
 * frames the body or names the host (the target sets those). */
static size_t extra_headers(const char *text, size_t len, char *out, size_t cap)
{
    static const char *const skip[] = {"content-length", "transfer-encoding", "host", "connection", "expect",
                                       "content-type"};
    size_t used = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        int ok = colon && colon > p && le - p < 1024;
        for (size_t i = 0; ok && i < sizeof skip / sizeof skip[0]; i++)
            if ((size_t)(colon - p) == strlen(skip[i]) && strncasecmp(p, skip[i], strlen(skip[i])) == 0)
                ok = 0;
        for (const char *q = p; ok && q < le; q++)
            if (*q == '\r' || *q == 0)
                ok = 0;
        if (ok && used + (size_t)(le - p) + 2 < cap) {
            memcpy(out + used, p, (size_t)(le - p));
            used += (size_t)(le - p);
            out[used++] = '\r';
            out[used++] = '\n';
        }
        p = le + 1;
    }
    return used;
}

/* A connection to the server. Hundreds of connections a second use up the loopback's
 * ephemeral ports for a while (each closed one waits in TIME_WAIT), so a refused or
 * timed-out connect is tried again for up to a minute before it counts as the server
 * being gone; the client side resets on close (linger 0) so it keeps no TIME_WAIT. */
static int server_connect(void)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_srv->cfg.port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int last = 0;
    for (int attempt = 0; attempt < 600; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            fprintf(stderr, "fuzz_http: socket: %s\n", strerror(errno));
            abort();
        }
        struct timeval tv = {.tv_sec = 10};
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
            return fd;
        last = errno;
        close(fd);
        usleep(100000);
    }
    fprintf(stderr, "fuzz_http: the server at port %d does not accept connections: %s\n",
            g_srv->cfg.port, strerror(last));
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 200000)
        return 0;
    http_setup();
    const char *method = g_routes[data[0] % (sizeof g_routes / sizeof g_routes[0])].method;
    const char *path = g_routes[data[0] % (sizeof g_routes / sizeof g_routes[0])].path;
    const char *ctype = g_ctypes[data[1] % (sizeof g_ctypes / sizeof g_ctypes[0])];
    const char *rest = (const char *)data + 2;
    size_t restlen = size - 2;
    const char *body = rest;
    size_t bodylen = restlen;
    char hdrs[4096];
    size_t hlen = 0;
    const char *sep = memmem(rest, restlen, "\n\n", 2);
    if (sep) {
        hlen = extra_headers(rest, (size_t)(sep - rest), hdrs, sizeof hdrs);
        body = sep + 2;
        bodylen = restlen - (size_t)(body - rest);
    }
    size_t cap = bodylen + hlen + 1024;
    char *req = malloc(cap);
    if (!req)
        return 0;
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: %zu\r\n",
                     method, path, bodylen);
    if (ctype)
        n += snprintf(req + n, cap - (size_t)n, "Content-Type: %s\r\n", ctype);
    memcpy(req + n, hdrs, hlen);
    n += (int)hlen;
    memcpy(req + n, "\r\n", 2);
    n += 2;
    memcpy(req + n, body, bodylen);
    size_t total = (size_t)n + bodylen;

    int fd = server_connect();
    for (size_t off = 0; off < total;) {
        ssize_t w = send(fd, req + off, total - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may answer (413, 400) and close before reading it all */
        off += (size_t)w;
    }
    free(req);
    char resp[512];
    size_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, got < sizeof resp - 1 ? resp + got : resp + sizeof resp - 1,
                         got < sizeof resp - 1 ? sizeof resp - 1 - got : 1, 0);
        if (r <= 0)
            break;
        if (got < sizeof resp - 1)
            got += (size_t)r;
    }
    close(fd);
    resp[got] = 0;
    if (getenv("CDIGITS_FUZZ_VERBOSE")) /* replaying by hand: what each input got */
        fprintf(stderr, "%s %s -> %.*s\n", method, path, (int)strcspn(resp, "\r\n"), resp);
    if (got >= 12 && strncmp(resp, "HTTP/1.1 500", 12) == 0) {
        fprintf(stderr, "fuzz_http: 500 for %s %s:\n%s\n", method, path, resp);
        abort();
    }
    if (got && strncmp(resp, "HTTP/1.", 7) != 0)
        abort();
    return 0;
}
