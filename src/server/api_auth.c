/* Login and logout as DIGITS does them: a username (no password) in a cookie. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* DIGITS's validate_username; NULL when valid, else the message. */
static const char *username_problem(const char *u)
{
    if (!u || !*u)
        return "username is required: send username=<name>";
    if (!islower((unsigned char)u[0]))
        return "Must start with a lowercase letter";
    for (const char *p = u; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return "Only lowercase letters, numbers, periods, dashes and underscores allowed";
    if (strlen(u) > 63)
        return "A username has at most 63 characters";
    return NULL;
}

static const char *next_url(req_t *r)
{
    const char *next = fields_get(r->fields, "next");
    /* only paths of this server: an absolute URL elsewhere would be an open redirect */
    if (next && next[0] == '/' && next[1] != '/')
        return next;
    return NULL;
}

void h_login_get(req_t *r)
{
    reply_json(r, 200, json_pack("{s:o}", "username", r->username[0] ? json_string(r->username) : json_null()));
}

void h_login(req_t *r)
{
    char name[128] = "";
    const char *u = fields_get(r->fields, "username");
    if (u) {
        while (isspace((unsigned char)*u))
            u++;
        snprintf(name, sizeof name, "%s", u);
        size_t n = strlen(name);
        while (n && isspace((unsigned char)name[n - 1]))
            name[--n] = 0;
    }
    const char *problem = username_problem(name);
    if (problem) {
        json_t *errors = json_object();
        form_add_error(errors, "username", "%s", problem);
        reply_form_errors(r, errors);
        return;
    }
    cd_err_t err;
    if (store_user_login(r->srv->store, name, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    char where[512], cookie[512];
    const char *next = next_url(r);
    snprintf(where, sizeof where, "%s%s", r->srv->cfg.url_prefix, next ? next : "/");
    snprintf(cookie, sizeof cookie, "username=%s; Path=%s/; SameSite=Lax", name, r->srv->cfg.url_prefix);
    reply_redirect(r, where, json_pack("{s:s}", "username", name));
    reply_add_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
}

void h_logout(req_t *r)
{
    char where[512], cookie[512];
    const char *next = next_url(r);
    snprintf(where, sizeof where, "%s%s", r->srv->cfg.url_prefix, next ? next : "/");
    snprintf(cookie, sizeof cookie, "username=; Path=%s/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
             r->srv->cfg.url_prefix);
    reply_redirect(r, where, json_pack("{s:n}", "username"));
    reply_add_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
}
