/* Login and logout. With --auth none (loopback only) as DIGITS does them: a username
 * (no password) in a cookie. With --auth password: a user's argon2id-checked password
 * starts a session whose random id travels in an HttpOnly, SameSite cookie and is kept
 * by the store only as a hash, with an expiry the server enforces; failed logins are
 * throttled per user and per address. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#ifdef CDIGITS_HAVE_SODIUM
#include <sodium.h>
#endif

#include "cdigits/util.h"

static const char *next_url(req_t *r)
{
    const char *next = fields_get(r->fields, "next");
    /* only paths of this server: an absolute URL elsewhere would be an open redirect */
    if (next && next[0] == '/' && next[1] != '/' && next[1] != '\\' && !strpbrk(next, "\r\n"))
        return next;
    return NULL;
}

/* Sets a cookie for the server's path. max_age < 0: a session cookie; 0: clears it. */
static void set_cookie(req_t *r, const char *name, const char *value, long max_age, int http_only)
{
    char cookie[512], age[48] = "";
    if (max_age >= 0)
        snprintf(age, sizeof age, "; Max-Age=%ld", max_age);
    snprintf(cookie, sizeof cookie, "%s=%s; Path=%s/; SameSite=Lax%s%s%s", name, value, r->srv->cfg.url_prefix, age,
             http_only ? "; HttpOnly" : "", r->srv->cfg.secure_cookies ? "; Secure" : "");
    reply_add_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
}

void h_login_get(req_t *r)
{
    static const char *const via[] = {"none", "username", "session", "token"};
    json_t *out = json_pack("{s:o, s:s, s:b, s:s}", "username", r->username[0] ? json_string(r->username) : json_null(),
                            "auth", r->srv->cfg.auth_password ? "password" : "username", "is_admin", r->is_admin, "via",
                            via[r->auth_via]);
    /* what a script that holds the session cookie sends as X-CSRF-Token */
    if (r->auth_via == AUTH_SESSION)
        json_object_set_new(out, "csrf_token", json_string(r->csrf));
    reply_json(r, 200, out);
}

/* The trimmed username field in name (128 bytes). */
static void username_field(req_t *r, char *name, size_t len)
{
    name[0] = 0;
    const char *u = fields_get(r->fields, "username");
    if (!u)
        return;
    while (isspace((unsigned char)*u))
        u++;
    snprintf(name, len, "%s", u);
    size_t n = strlen(name);
    while (n && isspace((unsigned char)name[n - 1]))
        name[--n] = 0;
}

static void login_username(req_t *r, const char *name)
{
    cd_err_t err;
    if (store_user_login(r->srv->store, name, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    char where[512];
    const char *next = next_url(r);
    snprintf(where, sizeof where, "%s%s", r->srv->cfg.url_prefix, next ? next : "/");
    reply_redirect(r, where, json_pack("{s:s}", "username", name));
    set_cookie(r, "username", name, -1, 1);
}

/* Ends the session the request's cookie names, if any. */
static void end_cookie_session(req_t *r)
{
    const char *sid = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, AUTH_SESSION_COOKIE);
    if (!sid || !*sid)
        return;
    char hash[65];
    auth_secret_hash(sid, hash);
    store_session_delete(r->srv->store, hash, NULL);
}

static void login_password(req_t *r, const char *name)
{
    server_t *srv = r->srv;
    const char *password = fields_get(r->fields, "password");
    if (!password || !*password) {
        reply_field_error(r, "password", "password is required: this server (--auth password) checks passwords");
        return;
    }
    char peer[64];
    security_peer(r, peer, sizeof peer);
    double wait = auth_throttle_wait(srv, name, peer);
    if (wait > 0) {
        char secs[32];
        snprintf(secs, sizeof secs, "%.0f", wait + 0.999);
        reply_error(r, 429, "Too many failed logins for %s or from %s; try again in %s seconds", name, peer, secs);
        reply_add_header(r, "Retry-After", secs);
        return;
    }
    json_t *user = store_user_get(srv->store, name);
    const char *hash = user ? json_string_value(json_object_get(user, "password_hash")) : NULL;
    if (!auth_password_verify(srv, hash, password)) {
        json_decref(user);
        auth_throttle_fail(srv, name, peer);
        cd_warn("failed login for %s from %s", name, peer);
        reply_error(r, 401, "Wrong username or password");
        return;
    }
    auth_throttle_ok(srv, name);
#ifdef CDIGITS_HAVE_SODIUM
    /* a hash made with weaker limits than today's is replaced while the password is known */
    if (crypto_pwhash_str_needs_rehash(hash, crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE)) {
        char fresh[256];
        if (auth_password_hash(srv, password, fresh, sizeof fresh, NULL) == CD_OK)
            store_user_set_password(srv->store, name, fresh, NULL);
    }
#endif
    json_decref(user);
    end_cookie_session(r); /* a new id at every login: a planted session id is worthless */
    char sid[65], sid_hash[65], csrf[65];
    auth_random_hex(sid, 32);
    auth_random_hex(csrf, 32);
    auth_secret_hash(sid, sid_hash);
    double now = cd_wall_time();
    cd_err_t err;
    if (store_session_add(srv->store, sid_hash, name, csrf, now, now + srv->cfg.session_ttl, &err) != CD_OK ||
        store_user_login(srv->store, name, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("login: %s from %s", name, peer);
    char where[512];
    const char *next = next_url(r);
    snprintf(where, sizeof where, "%s%s", srv->cfg.url_prefix, next ? next : "/");
    reply_redirect(r, where, json_pack("{s:s, s:s}", "username", name, "csrf_token", csrf));
    long ttl = (long)srv->cfg.session_ttl;
    set_cookie(r, AUTH_SESSION_COOKIE, sid, ttl, 1);
    set_cookie(r, AUTH_CSRF_COOKIE, csrf, ttl, 0);
    set_cookie(r, "username", "", 0, 1);
}

void h_login(req_t *r)
{
    char name[128];
    username_field(r, name, sizeof name);
    const char *problem = auth_username_problem(name);
    if (problem) {
        reply_field_error(r, "username", problem);
        return;
    }
    if (r->srv->cfg.auth_password)
        login_password(r, name);
    else
        login_username(r, name);
}

void h_logout(req_t *r)
{
    char where[512];
    const char *next = next_url(r);
    snprintf(where, sizeof where, "%s%s", r->srv->cfg.url_prefix, next ? next : "/");
    end_cookie_session(r);
    reply_redirect(r, where, json_pack("{s:n}", "username"));
    set_cookie(r, "username", "", 0, 1);
    if (r->srv->cfg.auth_password) {
        set_cookie(r, AUTH_SESSION_COOKIE, "", 0, 1);
        set_cookie(r, AUTH_CSRF_COOKIE, "", 0, 0);
    }
}
