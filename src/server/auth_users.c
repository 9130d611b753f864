/* Users of --auth password: administrators list, create and delete them; every user
 * changes their own password (with the old one), an administrator anyone's. A new
 * password ends the user's sessions. Routes with R_ADMIN reach here only for admins. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "cdigits/util.h"

static int need_password_mode(req_t *r)
{
    if (r->srv->cfg.auth_password)
        return 1;
    reply_error(r, 409, "Users have passwords only on a server started with --auth password (docs/security.md)");
    return 0;
}

void h_users_list(req_t *r)
{
    if (!need_password_mode(r))
        return;
    reply_json(r, 200, json_pack("{s:o}", "users", store_user_list(r->srv->store)));
}

void h_user_create(req_t *r)
{
    if (!need_password_mode(r))
        return;
    const char *name = fields_get(r->fields, "username"), *password = fields_get(r->fields, "password");
    json_t *errors = json_object();
    const char *problem = auth_username_problem(name);
    if (problem)
        form_add_error(errors, "username", "%s", problem);
    if ((problem = auth_password_problem(password)))
        form_add_error(errors, "password", "%s", problem);
    if (json_object_size(errors)) {
        reply_form_errors(r, errors);
        return;
    }
    json_decref(errors);
    int admin = field_truthy(fields_get(r->fields, "is_admin"));
    char hash[256];
    cd_err_t err;
    if (auth_password_hash(r->srv, password, hash, sizeof hash, &err) != CD_OK ||
        store_user_create(r->srv->store, name, hash, admin, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("user %s%s created by %s", name, admin ? " (admin)" : "", r->username);
    reply_json(r, 200, json_pack("{s:s, s:b}", "username", name, "is_admin", admin));
}

void h_user_delete(req_t *r)
{
    if (!need_password_mode(r))
        return;
    const char *name = r->params[0];
    if (strcmp(name, r->username) == 0) {
        reply_error(r, 409, "You cannot delete yourself; another administrator can");
        return;
    }
    cd_err_t err;
    if (store_user_delete(r->srv->store, name, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("user %s deleted by %s (their jobs stay)", name, r->username);
    reply_json(r, 200, json_pack("{s:s, s:b}", "username", name, "deleted", 1));
}

void h_user_password(req_t *r)
{
    if (!need_password_mode(r))
        return;
    const char *name = r->params[0];
    int self = strcmp(name, r->username) == 0;
    if (!self && !r->is_admin) {
        reply_error(r, 403, "Only %s or an administrator may change %s's password", name, name);
        return;
    }
    const char *password = fields_get(r->fields, "password");
    const char *problem = auth_password_problem(password);
    if (problem) {
        reply_field_error(r, "password", problem);
        return;
    }
    json_t *user = store_user_get(r->srv->store, name);
    if (!user) {
        reply_error(r, 404, "User not found: %s", name);
        return;
    }
    if (self && !r->is_admin) {
        /* a stolen session alone cannot lock its owner out */
        const char *old = fields_get(r->fields, "old_password");
        if (!old || !auth_password_verify(r->srv, json_string_value(json_object_get(user, "password_hash")), old)) {
            json_decref(user);
            reply_field_error(r, "old_password", "old_password is wrong or missing");
            return;
        }
    }
    json_decref(user);
    char hash[256];
    cd_err_t err;
    if (auth_password_hash(r->srv, password, hash, sizeof hash, &err) != CD_OK ||
        store_user_set_password(r->srv->store, name, hash, &err) != CD_OK ||
        store_session_delete_user(r->srv->store, name, &err) != CD_OK) {
        reply_err(r, &err);
        return;
    }
    cd_info("password of %s changed by %s; their sessions ended", name, r->username);
    reply_json(r, 200, json_pack("{s:s, s:b, s:s}", "username", name, "changed", 1, "note",
                                 "Every session of this user has ended; log in again with the new password"));
}
