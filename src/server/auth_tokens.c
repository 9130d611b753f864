/* API tokens for scripts (--auth password): a user creates one, sees it once, and
 * sends it as `Authorization: Bearer cdt_...`; the store keeps only its hash and a short
 * prefix to tell tokens apart in lists. Only the owner (or an admin) revokes it. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

static int need_password_mode(req_t *r)
{
    if (r->srv->cfg.auth_password)
        return 1;
    reply_error(r, 409,
                "API tokens need passwords (--auth password); on a loopback server without them, scripts log in "
                "with a username as in DIGITS (POST /login)");
    return 0;
}

void h_tokens_list(req_t *r)
{
    if (!need_password_mode(r))
        return;
    reply_json(r, 200, json_pack("{s:s, s:o}", "username", r->username, "tokens",
                                 store_token_list(r->srv->store, r->username)));
}

void h_token_create(req_t *r)
{
    if (!need_password_mode(r))
        return;
    const char *name = fields_get(r->fields, "name");
    const char *days = fields_get(r->fields, "expires_days");
    json_t *errors = json_object();
    if (!name || !*name)
        form_add_error(errors, "name", "name is required: what the token is for (\"nightly sweep\")");
    else if (strlen(name) > 100)
        form_add_error(errors, "name", "A token name has at most 100 characters");
    double d = 0;
    if (days && *days) {
        char *end;
        d = strtod(days, &end);
        if (end == days || *end || !(d >= 0 && d <= 3650))
            form_add_error(errors, "expires_days", "expires_days is a number of days from 0 (never) to 3650");
    }
    if (json_object_size(errors)) {
        reply_form_errors(r, errors);
        return;
    }
    json_decref(errors);
    char secret[65], token[80], hash[65], prefix[16];
    auth_random_hex(secret, 32);
    snprintf(token, sizeof token, AUTH_TOKEN_PREFIX "%s", secret);
    snprintf(prefix, sizeof prefix, "%.12s", token);
    auth_secret_hash(token, hash);
    double now = cd_wall_time(), expires = d > 0 ? now + d * 86400 : 0;
    long long id = 0;
    cd_err_t err;
    if (store_token_add(r->srv->store, r->username, name, hash, prefix, now, expires, &id, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("token %lld (%s) created by %s", id, name, r->username);
    reply_json(r, 200, json_pack("{s:I, s:s, s:s, s:s, s:f, s:o, s:s}", "id", (json_int_t)id, "name", name, "token",
                                 token, "prefix", prefix, "created", now,
                                 "expires", expires > 0 ? json_real(expires) : json_null(), "note",
                                 "This is the only time the token is shown; send it as Authorization: Bearer <token>"));
}

void h_token_revoke(req_t *r)
{
    if (!need_password_mode(r))
        return;
    char *end;
    long long id = strtoll(r->params[0], &end, 10);
    if (end == r->params[0] || *end || id <= 0) {
        reply_error(r, 404, "Token not found: %s (tokens are numbered; GET /tokens/json lists yours)", r->params[0]);
        return;
    }
    cd_err_t err;
    if (store_token_delete(r->srv->store, id, r->is_admin ? NULL : r->username, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("token %lld revoked by %s", id, r->username);
    reply_json(r, 200, json_pack("{s:I, s:b}", "id", (json_int_t)id, "revoked", 1));
}
