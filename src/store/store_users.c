/* Users, login sessions and API tokens. A name is recorded at each login (DIGITS asks
 * for no password); with --auth password a user also has an argon2id hash, and the
 * sessions and tokens clients hold are kept here only as hashes.
 *
 * These statements are prepared per call rather than in the store's table: logins and
 * token checks are rare next to metric writes, and a prepare costs microseconds. */
#include "internal.h"

#include <stdio.h>

#include "cdigits/util.h"

/* Prepares sql on c; NULL with a message in err. */
static sqlite3_stmt *prep(store_conn_t *c, const char *sql, cd_err_t *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
        cd_err_set(err, CD_E_INTERNAL, "database: %s", sqlite3_errmsg(c->db));
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

/* Runs a write on the writer connection; CD_E_NOTFOUND (with notfound as the message)
 * when want_change is set and no row changed. */
static int write_stmt(store_t *s, sqlite3_stmt *st, store_conn_t *c, const char *what, int want_change,
                      const char *notfound, cd_err_t *err)
{
    int rc = store_exec(c, st, what, err);
    if (rc == CD_OK && want_change && sqlite3_changes(c->db) == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "%s", notfound);
    sqlite3_finalize(st);
    store_release(c);
    (void)s;
    return rc;
}

static json_t *read_rows(store_conn_t *c, sqlite3_stmt *st, int one)
{
    json_t *out = st ? (one ? store_row(c, st) : store_rows(c, st)) : NULL;
    sqlite3_finalize(st);
    store_release(c);
    return out;
}

int store_user_login(store_t *s, const char *name, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_USER_LOGIN);
    store_bind_text(q, 1, name);
    sqlite3_bind_double(q, 2, cd_wall_time());
    int rc = store_exec(c, q, "recording the login", err);
    store_release(c);
    return rc;
}

json_t *store_user_get(store_t *s, const char *name)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c, "SELECT name, created, last_login, is_admin, password_hash FROM users WHERE name = ?1",
                           NULL);
    if (q)
        store_bind_text(q, 1, name);
    json_t *row = read_rows(c, q, 1);
    if (row)
        json_object_set_new(row, "is_admin", json_boolean(json_integer_value(json_object_get(row, "is_admin"))));
    return row;
}

int store_user_create(store_t *s, const char *name, const char *password_hash, int is_admin, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    /* a name first seen at a username login (before passwords) gets the password */
    sqlite3_stmt *q = prep(c,
                           "INSERT INTO users (name, created, last_login, password_hash, is_admin) "
                           "VALUES (?1, ?2, 0, ?3, ?4) ON CONFLICT (name) DO UPDATE SET password_hash = ?3, "
                           "is_admin = ?4 WHERE users.password_hash IS NULL",
                           err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, name);
    sqlite3_bind_double(q, 2, cd_wall_time());
    store_bind_text(q, 3, password_hash);
    sqlite3_bind_int(q, 4, is_admin ? 1 : 0);
    int rc = store_exec(c, q, "creating the user", err);
    if (rc == CD_OK && sqlite3_changes(c->db) == 0)
        rc = cd_err_set(err, CD_E_CONFLICT, "User %s exists already; pick another name", name);
    sqlite3_finalize(q);
    store_release(c);
    return rc;
}

int store_user_set_password(store_t *s, const char *name, const char *password_hash, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "UPDATE users SET password_hash = ?2 WHERE name = ?1", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, name);
    store_bind_text(q, 2, password_hash);
    char nf[160];
    snprintf(nf, sizeof nf, "User not found: %s", name);
    return write_stmt(s, q, c, "setting the password", 1, nf, err);
}

int store_user_delete(store_t *s, const char *name, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "DELETE FROM users WHERE name = ?1", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, name);
    char nf[160];
    snprintf(nf, sizeof nf, "User not found: %s", name);
    return write_stmt(s, q, c, "deleting the user", 1, nf, err);
}

json_t *store_user_list(store_t *s)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c,
                           "SELECT name, created, last_login, is_admin, password_hash IS NOT NULL AS has_password "
                           "FROM users ORDER BY name",
                           NULL);
    json_t *rows = read_rows(c, q, 0);
    size_t i;
    json_t *u;
    json_array_foreach(rows, i, u)
    {
        json_object_set_new(u, "is_admin", json_boolean(json_integer_value(json_object_get(u, "is_admin"))));
        json_object_set_new(u, "has_password", json_boolean(json_integer_value(json_object_get(u, "has_password"))));
    }
    return rows ? rows : json_array();
}

int store_user_count_passwords(store_t *s)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c, "SELECT COUNT(*) FROM users WHERE password_hash IS NOT NULL", NULL);
    int n = 0;
    if (q && sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    store_release(c);
    return n;
}

/* ---- sessions ---------------------------------------------------------------------- */

int store_session_add(store_t *s, const char *id_hash, const char *username, const char *csrf, double created,
                      double expires, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c,
                           "INSERT INTO sessions (id_hash, username, csrf, created, expires) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)",
                           err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, id_hash);
    store_bind_text(q, 2, username);
    store_bind_text(q, 3, csrf);
    sqlite3_bind_double(q, 4, created);
    sqlite3_bind_double(q, 5, expires);
    return write_stmt(s, q, c, "starting the session", 0, NULL, err);
}

json_t *store_session_get(store_t *s, const char *id_hash, double now)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c,
                           "SELECT s.username, u.is_admin, s.csrf, s.created, s.expires FROM sessions s "
                           "JOIN users u ON u.name = s.username WHERE s.id_hash = ?1 AND s.expires > ?2 "
                           "AND u.password_hash IS NOT NULL",
                           NULL);
    if (q) {
        store_bind_text(q, 1, id_hash);
        sqlite3_bind_double(q, 2, now);
    }
    json_t *row = read_rows(c, q, 1);
    if (row)
        json_object_set_new(row, "is_admin", json_boolean(json_integer_value(json_object_get(row, "is_admin"))));
    return row;
}

int store_session_delete(store_t *s, const char *id_hash, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "DELETE FROM sessions WHERE id_hash = ?1", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, id_hash);
    return write_stmt(s, q, c, "ending the session", 0, NULL, err);
}

int store_session_delete_user(store_t *s, const char *username, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "DELETE FROM sessions WHERE username = ?1", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, username);
    return write_stmt(s, q, c, "ending the user's sessions", 0, NULL, err);
}

int store_session_purge(store_t *s, double now, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "DELETE FROM sessions WHERE expires <= ?1", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    sqlite3_bind_double(q, 1, now);
    return write_stmt(s, q, c, "removing expired sessions", 0, NULL, err);
}

/* ---- API tokens ------------------------------------------------------------------------ */

int store_token_add(store_t *s, const char *username, const char *name, const char *hash, const char *prefix,
                    double created, double expires, long long *id, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c,
                           "INSERT INTO tokens (username, name, hash, prefix, created, expires) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    store_bind_text(q, 1, username);
    store_bind_text(q, 2, name);
    store_bind_text(q, 3, hash);
    store_bind_text(q, 4, prefix);
    sqlite3_bind_double(q, 5, created);
    if (expires > 0)
        sqlite3_bind_double(q, 6, expires);
    else
        sqlite3_bind_null(q, 6);
    int rc = store_exec(c, q, "creating the token", err);
    if (rc == CD_OK && id)
        *id = (long long)sqlite3_last_insert_rowid(c->db);
    sqlite3_finalize(q);
    store_release(c);
    return rc;
}

json_t *store_token_find(store_t *s, const char *hash, double now)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c,
                           "SELECT t.id, t.username, u.is_admin, t.name, t.last_used FROM tokens t "
                           "JOIN users u ON u.name = t.username "
                           "WHERE t.hash = ?1 AND (t.expires IS NULL OR t.expires > ?2)",
                           NULL);
    if (q) {
        store_bind_text(q, 1, hash);
        sqlite3_bind_double(q, 2, now);
    }
    json_t *row = read_rows(c, q, 1);
    if (!row)
        return NULL;
    json_object_set_new(row, "is_admin", json_boolean(json_integer_value(json_object_get(row, "is_admin"))));
    /* the last use is worth a write at most once a minute */
    double last = json_number_value(json_object_get(row, "last_used"));
    if (now - last > 60) {
        store_conn_t *w = store_writer(s);
        sqlite3_stmt *u = prep(w, "UPDATE tokens SET last_used = ?2 WHERE id = ?1", NULL);
        if (u) {
            sqlite3_bind_int64(u, 1, json_integer_value(json_object_get(row, "id")));
            sqlite3_bind_double(u, 2, now);
            write_stmt(s, u, w, "recording the token's use", 0, NULL, NULL);
        } else {
            store_release(w);
        }
    }
    return row;
}

json_t *store_token_list(store_t *s, const char *username)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c,
                           "SELECT id, name, prefix, created, expires, last_used FROM tokens "
                           "WHERE username = ?1 ORDER BY id",
                           NULL);
    if (q)
        store_bind_text(q, 1, username);
    json_t *rows = read_rows(c, q, 0);
    return rows ? rows : json_array();
}

int store_token_delete(store_t *s, long long id, const char *username, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = prep(c, "DELETE FROM tokens WHERE id = ?1 AND (?2 IS NULL OR username = ?2)", err);
    if (!q) {
        store_release(c);
        return CD_ERR;
    }
    sqlite3_bind_int64(q, 1, id);
    store_bind_text(q, 2, username);
    char nf[160];
    snprintf(nf, sizeof nf, "Token %lld not found among %s tokens", id, username ? "your" : "any user's");
    return write_stmt(s, q, c, "revoking the token", 1, nf, err);
}
