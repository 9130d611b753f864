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

/* Runs sql bound to v on the writer connection; out, when not NULL, gets what it
 * changed. */
static int write_sql(store_t *s, const char *sql, const char *what, store_changes_t *out, cd_err_t *err,
                     const store_val_t *v, int n)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *st = prep(c, sql, err);
    int rc = st ? store_run_stmt(c, st, what, out, err, v, n) : CD_ERR;
    sqlite3_finalize(st);
    store_release(c);
    return rc;
}

/* write_sql that reports CD_E_NOTFOUND with notfound as the message when no row changed. */
static int change_sql(store_t *s, const char *sql, const char *what, const char *notfound, cd_err_t *err,
                      const store_val_t *v, int n)
{
    store_changes_t ch = {0, 0};
    int rc = write_sql(s, sql, what, &ch, err, v, n);
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "%s", notfound);
    return rc;
}

/* The rows of sql bound to v on a reader connection (its first row when one is set);
 * NULL on a database error or, with one, when there is no row. */
static json_t *read_sql(store_t *s, const char *sql, int one, const store_val_t *v, int n)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *st = prep(c, sql, NULL);
    json_t *out = st ? store_query_stmt(c, st, one, v, n) : NULL;
    sqlite3_finalize(st);
    store_release(c);
    return out;
}

/* Turns row's integer field name into a JSON boolean. */
static void set_bool(json_t *row, const char *name)
{
    json_object_set_new(row, name, json_boolean(json_integer_value(json_object_get(row, name))));
}

/* read_sql's first row with its is_admin as a JSON boolean; NULL when there is none. */
static json_t *read_user_row(store_t *s, const char *sql, const store_val_t *v, int n)
{
    json_t *row = read_sql(s, sql, 1, v, n);
    if (row)
        set_bool(row, "is_admin");
    return row;
}

int store_user_login(store_t *s, const char *name, cd_err_t *err)
{
    return store_write(s, Q_USER_LOGIN, "recording the login", NULL, err,
                       STORE_ARGS(STORE_TEXT(name), STORE_DOUBLE(cd_wall_time())));
}

json_t *store_user_get(store_t *s, const char *name)
{
    return read_user_row(s, "SELECT name, created, last_login, is_admin, password_hash FROM users WHERE name = ?1",
                         STORE_ARGS(STORE_TEXT(name)));
}

int store_user_create(store_t *s, const char *name, const char *password_hash, int is_admin, cd_err_t *err)
{
    store_changes_t ch = {0, 0};
    /* a name first seen at a username login (before passwords) gets the password */
    int rc = write_sql(s,
                       "INSERT INTO users (name, created, last_login, password_hash, is_admin) "
                       "VALUES (?1, ?2, 0, ?3, ?4) ON CONFLICT (name) DO UPDATE SET password_hash = ?3, "
                       "is_admin = ?4 WHERE users.password_hash IS NULL",
                       "creating the user", &ch, err,
                       STORE_ARGS(STORE_TEXT(name), STORE_DOUBLE(cd_wall_time()), STORE_TEXT(password_hash),
                                  STORE_INT(is_admin ? 1 : 0)));
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_CONFLICT, "User %s exists already; pick another name", name);
    return rc;
}

int store_user_set_password(store_t *s, const char *name, const char *password_hash, cd_err_t *err)
{
    char nf[160];
    snprintf(nf, sizeof nf, "User not found: %s", name);
    return change_sql(s, "UPDATE users SET password_hash = ?2 WHERE name = ?1", "setting the password", nf, err,
                      STORE_ARGS(STORE_TEXT(name), STORE_TEXT(password_hash)));
}

int store_user_delete(store_t *s, const char *name, cd_err_t *err)
{
    char nf[160];
    snprintf(nf, sizeof nf, "User not found: %s", name);
    return change_sql(s, "DELETE FROM users WHERE name = ?1", "deleting the user", nf, err,
                      STORE_ARGS(STORE_TEXT(name)));
}

json_t *store_user_list(store_t *s)
{
    json_t *rows = read_sql(s,
                            "SELECT name, created, last_login, is_admin, password_hash IS NOT NULL AS has_password "
                            "FROM users ORDER BY name",
                            0, NULL, 0);
    size_t i;
    json_t *u;
    json_array_foreach(rows, i, u)
    {
        set_bool(u, "is_admin");
        set_bool(u, "has_password");
    }
    return rows ? rows : json_array();
}

int store_user_count_passwords(store_t *s)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = prep(c, "SELECT COUNT(*) FROM users WHERE password_hash IS NOT NULL", NULL);
    int64_t n = 0;
    if (q)
        store_scalar(q, &n);
    sqlite3_finalize(q);
    store_release(c);
    return (int)n;
}

/* ---- sessions ---------------------------------------------------------------------- */

int store_session_add(store_t *s, const char *id_hash, const char *username, const char *csrf, double created,
                      double expires, cd_err_t *err)
{
    return write_sql(s,
                     "INSERT INTO sessions (id_hash, username, csrf, created, expires) "
                     "VALUES (?1, ?2, ?3, ?4, ?5)",
                     "starting the session", NULL, err,
                     STORE_ARGS(STORE_TEXT(id_hash), STORE_TEXT(username), STORE_TEXT(csrf), STORE_DOUBLE(created),
                                STORE_DOUBLE(expires)));
}

json_t *store_session_get(store_t *s, const char *id_hash, double now)
{
    return read_user_row(s,
                         "SELECT s.username, u.is_admin, s.csrf, s.created, s.expires FROM sessions s "
                         "JOIN users u ON u.name = s.username WHERE s.id_hash = ?1 AND s.expires > ?2 "
                         "AND u.password_hash IS NOT NULL",
                         STORE_ARGS(STORE_TEXT(id_hash), STORE_DOUBLE(now)));
}

int store_session_delete(store_t *s, const char *id_hash, cd_err_t *err)
{
    return write_sql(s, "DELETE FROM sessions WHERE id_hash = ?1", "ending the session", NULL, err,
                     STORE_ARGS(STORE_TEXT(id_hash)));
}

int store_session_delete_user(store_t *s, const char *username, cd_err_t *err)
{
    return write_sql(s, "DELETE FROM sessions WHERE username = ?1", "ending the user's sessions", NULL, err,
                     STORE_ARGS(STORE_TEXT(username)));
}

int store_session_purge(store_t *s, double now, cd_err_t *err)
{
    return write_sql(s, "DELETE FROM sessions WHERE expires <= ?1", "removing expired sessions", NULL, err,
                     STORE_ARGS(STORE_DOUBLE(now)));
}

/* ---- API tokens ------------------------------------------------------------------------ */

int store_token_add(store_t *s, const char *username, const char *name, const char *hash, const char *prefix,
                    double created, double expires, long long *id, cd_err_t *err)
{
    store_changes_t ch = {0, 0};
    int rc = write_sql(s,
                       "INSERT INTO tokens (username, name, hash, prefix, created, expires) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                       "creating the token", &ch, err,
                       STORE_ARGS(STORE_TEXT(username), STORE_TEXT(name), STORE_TEXT(hash), STORE_TEXT(prefix),
                                  STORE_DOUBLE(created), expires > 0 ? STORE_DOUBLE(expires) : STORE_NULL));
    if (rc == CD_OK && id)
        *id = (long long)ch.rowid;
    return rc;
}

json_t *store_token_find(store_t *s, const char *hash, double now)
{
    json_t *row = read_user_row(s,
                                "SELECT t.id, t.username, u.is_admin, t.name, t.last_used FROM tokens t "
                                "JOIN users u ON u.name = t.username "
                                "WHERE t.hash = ?1 AND (t.expires IS NULL OR t.expires > ?2)",
                                STORE_ARGS(STORE_TEXT(hash), STORE_DOUBLE(now)));
    if (!row)
        return NULL;
    /* the last use is worth a write at most once a minute */
    double last = json_number_value(json_object_get(row, "last_used"));
    if (now - last > 60)
        write_sql(s, "UPDATE tokens SET last_used = ?2 WHERE id = ?1", "recording the token's use", NULL, NULL,
                  STORE_ARGS(STORE_INT(json_integer_value(json_object_get(row, "id"))), STORE_DOUBLE(now)));
    return row;
}

json_t *store_token_list(store_t *s, const char *username)
{
    json_t *rows = read_sql(s,
                            "SELECT id, name, prefix, created, expires, last_used FROM tokens "
                            "WHERE username = ?1 ORDER BY id",
                            0, STORE_ARGS(STORE_TEXT(username)));
    return rows ? rows : json_array();
}

int store_token_delete(store_t *s, long long id, const char *username, cd_err_t *err)
{
    char nf[160];
    snprintf(nf, sizeof nf, "Token %lld not found among %s tokens", id, username ? "your" : "any user's");
    return change_sql(s, "DELETE FROM tokens WHERE id = ?1 AND (?2 IS NULL OR username = ?2)", "revoking the token",
                      nf, err, STORE_ARGS(STORE_INT(id), STORE_TEXT(username)));
}
