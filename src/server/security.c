/* The checks every request passes before its handler, in order:
 *
 *   early (headers only, before a body is read)
 *     1. Host: a loopback server answers only to loopback names (or --allowed-hosts), so
 *        a page on another site that rebinds its DNS name to 127.0.0.1 reaches nothing;
 *     2. cross-site: a POST, PUT, DELETE or PATCH whose Origin (or Referer) is another
 *        site, or whose Sec-Fetch-Site says cross-site or same-site, is refused;
 *   before the handler
 *     3. who: an API token (Authorization: Bearer), a session cookie (--auth password)
 *        or, with --auth none, a username field of the request or the username cookie;
 *     4. CSRF: an X-CSRF-Token that is sent must match; a state-changing request with
 *        a session cookie must carry the token or a same-origin Origin header (scripts
 *        use tokens, which a browser never sends on its own);
 *     5. login (every route but login/logout with --auth password), admin routes;
 *     6. whose job: under --job-visibility own, the jobs a request names must be the
 *        asker's (or an admin's to see).
 *
 * Responses all get the security headers (security_headers). */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#ifdef CDIGITS_HAVE_SODIUM
#include <sodium.h>
#endif

#include "cdigits/util.h"

static const char *header(const req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static int method_is_unsafe(const char *m)
{
    return strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "OPTIONS") != 0;
}

static int secrets_equal(const char *a, const char *b)
{
    size_t n = strlen(a);
    if (n != strlen(b))
        return 0;
#ifdef CDIGITS_HAVE_SODIUM
    return sodium_memcmp(a, b, n) == 0;
#else
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
#endif
}

void security_peer(const req_t *r, char *out, size_t len)
{
    out[0] = 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)len);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)len);
}

/* ---- start ----------------------------------------------------------------------------- */

/* The first line of path (the administrator's password). */
static int read_first_line(const char *path, char *out, size_t len, cd_err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return cd_err_set(err, CD_E_INVALID, "--admin-password-file %s: %s", path, strerror(errno));
    if (!fgets(out, (int)len, f))
        out[0] = 0;
    fclose(f);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    return CD_OK;
}

static int bootstrap_admin(server_t *srv, cd_err_t *err)
{
    const cd_server_config_t *cfg = &srv->cfg;
    const char *problem = auth_username_problem(cfg->admin_user);
    if (problem)
        return cd_err_set(err, CD_E_INVALID, "--admin-user %s: %s", cfg->admin_user, problem);
    json_t *user = store_user_get(srv->store, cfg->admin_user);
    int has = user && json_is_string(json_object_get(user, "password_hash"));
    json_decref(user);
    if (has) {
        cd_info("auth: user %s has a password already; --admin-password-file is not applied again",
                cfg->admin_user);
        return CD_OK;
    }
    char password[1100];
    if (read_first_line(cfg->admin_password_file, password, sizeof password, err) != CD_OK)
        return CD_ERR;
    if ((problem = auth_password_problem(password)))
        return cd_err_set(err, CD_E_INVALID, "--admin-password-file %s: %s", cfg->admin_password_file, problem);
    char hash[256];
    int rc = auth_password_hash(srv, password, hash, sizeof hash, err);
#ifdef CDIGITS_HAVE_SODIUM
    sodium_memzero(password, sizeof password);
#endif
    if (rc != CD_OK || store_user_create(srv->store, cfg->admin_user, hash, 1, err) != CD_OK)
        return CD_ERR;
    cd_info("auth: administrator %s created from %s", cfg->admin_user, cfg->admin_password_file);
    return CD_OK;
}

int security_init(server_t *srv, cd_err_t *err)
{
    struct security *sec = calloc(1, sizeof *sec);
    if (!sec)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory");
    pthread_mutex_init(&sec->lock, NULL);
    pthread_cond_init(&sec->hash_cond, NULL);
    srv->sec = sec;
    sched_set_worker_timeout(srv->sched, srv->cfg.worker_timeout);
    if (!srv->cfg.auth_password) {
        if (srv->cfg.admin_password_file[0])
            cd_warn("auth: --admin-password-file is ignored without --auth password");
        return CD_OK;
    }
    if (srv->cfg.admin_password_file[0] && bootstrap_admin(srv, err) != CD_OK)
        return CD_ERR;
    if (store_user_count_passwords(srv->store) == 0)
        return cd_err_set(err, CD_E_INVALID,
                          "--auth password: no user has a password yet, so nobody could log in; give "
                          "--admin-password-file FILE (its first line becomes the password of %s)",
                          srv->cfg.admin_user);
    store_session_purge(srv->store, cd_wall_time(), NULL);
    cd_info("auth: passwords on (sessions last %.0f s, %d failed logins a minute, jobs visible to %s)",
            srv->cfg.session_ttl, srv->cfg.login_attempts, srv->cfg.visibility_own ? "their owners" : "everyone");
    return CD_OK;
}

void security_free(server_t *srv)
{
    if (!srv->sec)
        return;
    pthread_cond_destroy(&srv->sec->hash_cond);
    pthread_mutex_destroy(&srv->sec->lock);
    free(srv->sec);
    srv->sec = NULL;
}

/* ---- 1. Host ------------------------------------------------------------------------------ */

/* The host part of "host:port", "[v6]:port" or "host" into out (lowercase). */
static void host_name(const char *hostport, char *out, size_t len)
{
    size_t n = 0;
    const char *p = hostport;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        n = close ? (size_t)(close - p + 1) : strlen(p);
    } else {
        while (p[n] && p[n] != ':' && p[n] != '/')
            n++;
    }
    if (n >= len)
        n = len - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
    out[n] = 0;
}

static int host_in_list(const char *list, const char *host)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
        if (strcasecmp(t, host) == 0)
            return 1;
    return 0;
}

/* What a browser may call a loopback server: an address (a page cannot rebind one),
 * localhost and *.localhost, or a one-label name (/etc/hosts, an SSH tunnel's alias). A
 * DNS rebinding attack needs a name the attacker's DNS answers for, which has a dot. */
static int host_is_local_name(const char *host)
{
    struct in_addr a;
    struct in6_addr a6;
    size_t n = strlen(host);
    if (strcmp(host, "localhost") == 0 || (n > 10 && strcmp(host + n - 10, ".localhost") == 0))
        return 1;
    if (inet_pton(AF_INET, host, &a) == 1)
        return 1;
    if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
        char v6[64];
        snprintf(v6, sizeof v6, "%.*s", (int)(n - 2), host + 1);
        return inet_pton(AF_INET6, v6, &a6) == 1;
    }
    return n > 0 && !strchr(host, '.') && !strchr(host, ':');
}

static int host_allowed(const server_t *srv, const char *host)
{
    if (srv->cfg.allowed_hosts[0])
        return host_in_list(srv->cfg.allowed_hosts, host);
    if (server_bind_is_loopback(srv->cfg.bind))
        return host_is_local_name(host);
    return 1;
}

/* ---- 2. cross-site requests ------------------------------------------------------------------- */

/* Whether url ("scheme://host[:port][/...]", an Origin or a Referer) names this server. */
static int url_is_self(const req_t *r, const char *url)
{
    const char *p = strstr(url, "://");
    if (!p || strcmp(url, "null") == 0)
        return 0;
    p += 3;
    char hostport[300];
    size_t n = strcspn(p, "/?#");
    if (n >= sizeof hostport)
        return 0;
    memcpy(hostport, p, n);
    hostport[n] = 0;
    const char *host = header(r, MHD_HTTP_HEADER_HOST), *fwd = header(r, "X-Forwarded-Host");
    if (host && strcasecmp(hostport, host) == 0)
        return 1;
    if (fwd && strcasecmp(hostport, fwd) == 0)
        return 1;
    char name[300];
    host_name(hostport, name, sizeof name);
    return r->srv->cfg.allowed_hosts[0] && host_in_list(r->srv->cfg.allowed_hosts, name);
}

int security_check_early(req_t *r)
{
    const char *host = header(r, MHD_HTTP_HEADER_HOST);
    if (host) {
        char name[300];
        host_name(host, name, sizeof name);
        if (!host_allowed(r->srv, name)) {
            reply_error(r, 403,
                        "This server does not answer to the host name %s: it listens on %s and answers to %s; "
                        "give the names it may be reached by with --allowed-hosts",
                        name, r->srv->cfg.bind,
                        r->srv->cfg.allowed_hosts[0] ? r->srv->cfg.allowed_hosts
                                                     : "addresses, localhost and names without a dot");
            return CD_ERR;
        }
    }
    if (!method_is_unsafe(r->method))
        return CD_OK;
    const char *site = header(r, "Sec-Fetch-Site"), *origin = header(r, "Origin"), *referer = header(r, "Referer");
    const char *from = NULL;
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        from = origin ? origin : site;
    else if (origin && !url_is_self(r, origin))
        from = origin;
    else if (!origin && referer && !url_is_self(r, referer))
        from = referer;
    if (from) {
        char shown[200];
        snprintf(shown, sizeof shown, "%s", from);
        reply_error(r, 403,
                    "Cross-site request refused: a %s to %s sent from a page of %s. Requests that change "
                    "something must come from this server's own pages or from a script (docs/security.md)",
                    r->method, r->path, shown);
        return CD_ERR;
    }
    return CD_OK;
}

/* ---- 3. who is asking ---------------------------------------------------------------------------- */

/* CD_ERR after a 401 for a bearer token that is not valid. */
static int authenticate(req_t *r)
{
    server_t *srv = r->srv;
    r->username[0] = 0;
    r->is_admin = 0;
    r->auth_via = AUTH_ANON;
    const char *authz = header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    if (authz && strncasecmp(authz, "Bearer ", 7) == 0) {
        const char *tok = authz + 7;
        while (*tok == ' ')
            tok++;
        json_t *row = NULL;
        if (srv->cfg.auth_password && strncmp(tok, AUTH_TOKEN_PREFIX, strlen(AUTH_TOKEN_PREFIX)) == 0 &&
            strlen(tok) < 200) {
            char hash[65];
            auth_secret_hash(tok, hash);
            row = store_token_find(srv->store, hash, cd_wall_time());
        }
        if (!row) {
            reply_error(r, 401,
                        srv->cfg.auth_password
                            ? "The API token is not valid (revoked, expired or mistyped); create one with POST "
                              "/tokens/json after logging in"
                            : "API tokens are used only with --auth password; this server logs in by username "
                              "(POST /login)");
            reply_add_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"cdigits\"");
            return CD_ERR;
        }
        snprintf(r->username, sizeof r->username, "%s", json_string_value(json_object_get(row, "username")));
        r->is_admin = json_is_true(json_object_get(row, "is_admin"));
        r->auth_via = AUTH_TOKEN;
        json_decref(row);
        return CD_OK;
    }
    if (srv->cfg.auth_password) {
        const char *sid = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, AUTH_SESSION_COOKIE);
        if (!sid || strlen(sid) != 64)
            return CD_OK;
        char hash[65];
        auth_secret_hash(sid, hash);
        double now = cd_wall_time();
        json_t *row = store_session_get(srv->store, hash, now);
        if (!row)
            return CD_OK;
        snprintf(r->username, sizeof r->username, "%s", json_string_value(json_object_get(row, "username")));
        snprintf(r->csrf, sizeof r->csrf, "%s", json_string_value(json_object_get(row, "csrf")));
        r->is_admin = json_is_true(json_object_get(row, "is_admin"));
        r->auth_via = AUTH_SESSION;
        json_decref(row);
        /* expired sessions leave the store every ten minutes or so */
        struct security *sec = srv->sec;
        int purge = 0;
        if (sec) {
            pthread_mutex_lock(&sec->lock);
            if (now >= sec->next_purge) {
                sec->next_purge = now + 600;
                purge = 1;
            }
            pthread_mutex_unlock(&sec->lock);
        }
        if (purge)
            store_session_purge(srv->store, now, NULL);
        return CD_OK;
    }
    /* --auth none (loopback only) is DIGITS's get_username: a username field of the
     * request (query string, then body) first, then the cookie; no password, as there */
    const char *field = fields_get(r->fields, "username");
    const char *cookie = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, "username");
    const char *who = field && *field ? field : cookie;
    if (who && !auth_username_problem(who)) {
        snprintf(r->username, sizeof r->username, "%s", who);
        r->auth_via = AUTH_USERNAME_COOKIE;
    }
    return CD_OK;
}

/* ---- 6. whose job -------------------------------------------------------------------------- */

int security_may_edit(const req_t *r, json_t *job)
{
    if (!r->username[0])
        return 0;
    if (r->is_admin)
        return 1;
    const char *owner = json_string_value(json_object_get(job, "username"));
    if (!owner || !owner[0])
        return !r->srv->cfg.auth_password; /* with passwords, a job nobody owns is the admins' */
    return strcmp(owner, r->username) == 0;
}

int security_reads_all(const req_t *r) { return !r->srv->cfg.visibility_own || r->is_admin; }

int security_may_read(const req_t *r, json_t *job)
{
    if (security_reads_all(r))
        return 1;
    const char *owner = json_string_value(json_object_get(job, "username"));
    if (!owner || !owner[0])
        return 1;
    return r->username[0] && strcmp(owner, r->username) == 0;
}

/* Refuses with 403 when job id exists and the asker may not read it. */
static int check_job_readable(req_t *r, const char *id)
{
    if (!id || !*id)
        return CD_OK;
    json_t *job = store_job_get(r->srv->store, id);
    if (!job)
        return CD_OK; /* the handler answers 404 */
    int ok = security_may_read(r, job);
    json_decref(job);
    if (ok)
        return CD_OK;
    reply_error(r, 403,
                "Job %s belongs to another user; this server shows each user only their own jobs "
                "(--job-visibility own)",
                id);
    return CD_ERR;
}

/* Every job the request names: the route's <id> (datasets, models, jobs, clone), the
 * folder of /files/<path>, and the fields that name jobs. */
static int check_named_jobs(req_t *r)
{
    const char *pat = r->route->pattern;
    static const char *const job_prefixes[] = {"/datasets/<id>", "/models/<id>", "/jobs/<id>", "/clone/<id>"};
    for (size_t i = 0; i < CD_ARRAY_LEN(job_prefixes); i++)
        if (strncmp(pat, job_prefixes[i], strlen(job_prefixes[i])) == 0 && r->nparams > 0 &&
            check_job_readable(r, r->params[0]) != CD_OK)
            return CD_ERR;
    if (strcmp(pat, "/files/<path>") == 0 && r->nparams > 0) {
        char id[128];
        size_t n = strcspn(r->params[0], "/");
        snprintf(id, sizeof id, "%.*s", (int)(n < sizeof id ? n : sizeof id - 1), r->params[0]);
        if (check_job_readable(r, id) != CD_OK)
            return CD_ERR;
    }
    static const char *const fields[] = {"job_id", "dataset", "previous_networks", "job_ids"};
    for (size_t i = 0; i < CD_ARRAY_LEN(fields); i++) {
        const char *ids[256];
        int n = fields_get_all(r->fields, fields[i], ids, 256);
        for (int k = 0; k < n; k++)
            if (check_job_readable(r, ids[k]) != CD_OK)
                return CD_ERR;
    }
    return CD_OK;
}

/* ---- 4, 5 ------------------------------------------------------------------------------------ */

static int is_login_route(const req_t *r)
{
    handler_fn h = r->route->handler;
    return h == h_login_get || h == h_login || h == h_logout;
}

/* 4: the CSRF rule for cookies. */
static int check_csrf(req_t *r)
{
    if (!method_is_unsafe(r->method) || r->auth_via == AUTH_TOKEN || r->auth_via == AUTH_ANON)
        return CD_OK;
    const char *sent = header(r, AUTH_CSRF_HEADER);
    if (!sent)
        sent = fields_get(r->fields, "csrf_token");
    if (sent) {
        const char *want = r->auth_via == AUTH_SESSION
                               ? r->csrf
                               : MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, AUTH_CSRF_COOKIE);
        if (!want || !*want || !secrets_equal(sent, want)) {
            reply_error(r, 403, "The CSRF token of this request does not match your session; reload the page");
            return CD_ERR;
        }
        return CD_OK;
    }
    if (r->auth_via == AUTH_SESSION && !is_login_route(r) && !header(r, "Origin")) {
        reply_error(r, 403,
                    "A request that changes something with a session cookie needs the X-CSRF-Token header "
                    "(csrf_token from GET /login) or must come from this server's pages; scripts should send "
                    "an API token instead (POST /tokens/json, then Authorization: Bearer <token>)");
        return CD_ERR;
    }
    return CD_OK;
}

/* 5: login and admin. */
static int check_login(req_t *r)
{
    server_t *srv = r->srv;
    int need = (r->route->flags & (R_LOGIN | R_ADMIN)) || (srv->cfg.auth_password && !is_login_route(r));
    if (need && !r->username[0]) {
        const char *accept = header(r, MHD_HTTP_HEADER_ACCEPT);
        if (srv->cfg.auth_password && strcmp(r->method, "GET") == 0 && accept && strstr(accept, "text/html")) {
            /* a browser opening a page: the login page, and back here after it */
            char where[2600], next[2200];
            size_t k = 0;
            for (const char *p = r->path; *p && k + 4 < sizeof next; p++) {
                unsigned char ch = (unsigned char)*p;
                if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    strchr("/-_.~", ch))
                    next[k++] = (char)ch;
                else
                    k += (size_t)snprintf(next + k, sizeof next - k, "%%%02X", ch);
            }
            next[k] = 0;
            snprintf(where, sizeof where, "%s/login.html?next=%s%s", srv->cfg.url_prefix, srv->cfg.url_prefix, next);
            reply_redirect(r, where, NULL);
            return CD_ERR;
        }
        reply_error(r, 401,
                    srv->cfg.auth_password
                        ? "You must be logged in: POST /login with username and password, or send "
                          "Authorization: Bearer <API token>"
                        : "You must be logged in: POST /login with a username first");
        return CD_ERR;
    }
    if ((r->route->flags & R_ADMIN) && !r->is_admin) {
        reply_error(r, 403, "Only an administrator may %s %s; %s is not one", r->method, r->path, r->username);
        return CD_ERR;
    }
    return CD_OK;
}

int security_check_request(req_t *r)
{
    if (authenticate(r) != CD_OK || check_csrf(r) != CD_OK || check_login(r) != CD_OK)
        return CD_ERR;
    if (!security_reads_all(r) && check_named_jobs(r) != CD_OK)
        return CD_ERR;
    return CD_OK;
}

/* ---- headers ------------------------------------------------------------------------------- */

/* The UI is built for default-src 'self' (web/README.md): no inline script or style,
 * no image from a data: or blob: URL (the dataset explorer decodes records with
 * createImageBitmap from a Blob, which needs no URL). Files of jobs are user data:
 * they get no script, style or frame at all. */
static const char g_csp_ui[] =
    "default-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";
static const char g_csp_files[] = "default-src 'none'; img-src 'self'; sandbox; frame-ancestors 'none'";
/* DIGITS's HTML answers of classify and infer, written by the server with every text
 * escaped (html.c): the posted image and a mask are inline data: images and the
 * overlay is placed by style attributes; scripts stay the server's own only. */
static const char g_csp_pages[] = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                  "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

void security_headers(const req_t *r, struct MHD_Response *resp)
{
    int files = r->route && r->route->handler == h_files;
    MHD_add_response_header(resp, "Content-Security-Policy",
                            files ? g_csp_files : r->result_page ? g_csp_pages : g_csp_ui);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
}
