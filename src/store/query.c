/* Running statements: binding type-tagged values, stepping to done, reading rows into
 * JSON or through a callback, and transactions with one error path. Every store file
 * goes through these instead of calling sqlite3_bind/step/reset itself. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- statements and binding --------------------------------------------------------- */

sqlite3_stmt *store_stmt(store_conn_t *c, int id)
{
    sqlite3_stmt *st = c->stmt[id];
    /* reset returns the error of the last step, already reported there; clear_bindings
     * always succeeds */
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

int store_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

int store_bind_json(sqlite3_stmt *st, int i, json_t *v)
{
    if (!v)
        return sqlite3_bind_null(st, i);
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return SQLITE_NOMEM;
    int rc = sqlite3_bind_text(st, i, text, -1, SQLITE_TRANSIENT);
    free(text);
    return rc;
}

int store_bind_real(sqlite3_stmt *st, int i, double v)
{
    return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

static int bind_one(sqlite3_stmt *st, int i, const store_val_t *v)
{
    switch (v->kind) {
    case STORE_V_TEXT:
        return store_bind_text(st, i, v->u.text);
    case STORE_V_JSON:
        return store_bind_json(st, i, v->u.json);
    case STORE_V_REAL:
        return store_bind_real(st, i, v->u.real);
    case STORE_V_DOUBLE:
        return sqlite3_bind_double(st, i, v->u.real);
    case STORE_V_INT:
        return sqlite3_bind_int64(st, i, v->u.i);
    default:
        return sqlite3_bind_null(st, i);
    }
}

int store_bind(sqlite3_stmt *st, const store_val_t *v, int n, const char *what, cd_err_t *err)
{
    for (int i = 0; i < n; i++) {
        int rc = bind_one(st, i + 1, &v[i]);
        if (rc != SQLITE_OK)
            return cd_err_set(err, CD_E_INTERNAL, "%s: %s", what, sqlite3_errstr(rc));
    }
    return CD_OK;
}

/* ---- writes ------------------------------------------------------------------------- */

int store_exec(store_conn_t *c, sqlite3_stmt *st, const char *what, cd_err_t *err)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    if (rc != SQLITE_DONE) {
        cd_err_set(err, rc == SQLITE_CONSTRAINT ? CD_E_CONFLICT : CD_E_INTERNAL, "%s: %s", what,
                   sqlite3_errmsg(c->db));
        sqlite3_reset(st);
        return CD_ERR;
    }
    sqlite3_reset(st);
    return CD_OK;
}

int store_run_stmt(store_conn_t *c, sqlite3_stmt *st, const char *what, store_changes_t *out, cd_err_t *err,
                   const store_val_t *v, int n)
{
    if (store_bind(st, v, n, what, err) != CD_OK || store_exec(c, st, what, err) != CD_OK)
        return CD_ERR;
    if (out) {
        out->changes = sqlite3_changes(c->db);
        out->rowid = sqlite3_last_insert_rowid(c->db);
    }
    return CD_OK;
}

int store_run(store_conn_t *c, int id, const char *what, store_changes_t *out, cd_err_t *err,
              const store_val_t *v, int n)
{
    return store_run_stmt(c, store_stmt(c, id), what, out, err, v, n);
}

int store_write(store_t *s, int id, const char *what, store_changes_t *out, cd_err_t *err, const store_val_t *v,
                int n)
{
    store_conn_t *c = store_writer(s);
    int rc = store_run(c, id, what, out, err, v, n);
    store_release(c);
    return rc;
}

/* ---- reads -------------------------------------------------------------------------- */

/* Steps st, calling row for each row until it returns other than CD_OK; the last
 * step's sqlite code (SQLITE_DONE when every row was read). Leaves st unreset, so the
 * connection's error message still describes a failed step. */
static int step_rows(sqlite3_stmt *st, int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (row(st, ctx) != CD_OK)
            break;
    return rc;
}

int store_each(sqlite3_stmt *st, int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
    int rc = step_rows(st, row, ctx);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? CD_OK : CD_ERR;
}

static int read_int64(sqlite3_stmt *st, void *ctx)
{
    *(int64_t *)ctx = sqlite3_column_int64(st, 0);
    return CD_OK;
}

int store_scalar(sqlite3_stmt *st, int64_t *out)
{
    return store_each(st, read_int64, out);
}

static json_t *column_json(sqlite3_stmt *st, int c, const char *name)
{
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(st, c));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(st, c));
    case SQLITE_TEXT: {
        const char *text = (const char *)sqlite3_column_text(st, c);
        size_t n = strlen(name);
        if (n > 5 && strcmp(name + n - 5, "_json") == 0) {
            json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
            return v ? v : json_null();
        }
        return json_string(text);
    }
    default:
        return json_null();
    }
}

/* store_each's row callback for store_rows: ctx is the array the row object joins. */
static int append_row(sqlite3_stmt *st, void *ctx)
{
    json_t *row = json_object();
    int ncol = sqlite3_column_count(st);
    for (int c = 0; c < ncol; c++) {
        const char *name = sqlite3_column_name(st, c);
        json_t *v = column_json(st, c, name);
        char key[64];
        size_t n = strlen(name);
        if (n > 5 && n < sizeof key && strcmp(name + n - 5, "_json") == 0) {
            memcpy(key, name, n - 5);
            key[n - 5] = 0;
            name = key;
        }
        if (strcmp(name, "state") == 0 && json_is_string(v)) {
            json_object_set(row, "status", v);
            json_object_set_new(row, "state", json_integer(cd_state_from_code(json_string_value(v))));
            json_decref(v);
            continue;
        }
        if (strcmp(name, "interrupted") == 0 || strcmp(name, "superseded") == 0) {
            json_object_set_new(row, name, json_boolean(json_integer_value(v)));
            json_decref(v);
            continue;
        }
        json_object_set_new(row, name, v ? v : json_null());
    }
    json_array_append_new(ctx, row);
    return CD_OK;
}

json_t *store_rows(store_conn_t *c, sqlite3_stmt *st)
{
    json_t *rows = json_array();
    if (step_rows(st, append_row, rows) != SQLITE_DONE) {
        cd_error("store: query failed: %s", sqlite3_errmsg(c->db));
        json_decref(rows);
        rows = NULL;
    }
    sqlite3_reset(st);
    return rows;
}

json_t *store_row(store_conn_t *c, sqlite3_stmt *st)
{
    json_t *rows = store_rows(c, st);
    if (!rows)
        return NULL;
    json_t *row = json_array_size(rows) ? json_incref(json_array_get(rows, 0)) : NULL;
    json_decref(rows);
    return row;
}

json_t *store_query_stmt(store_conn_t *c, sqlite3_stmt *st, int one, const store_val_t *v, int n)
{
    cd_err_t err;
    if (store_bind(st, v, n, "binding a query's values", &err) != CD_OK) {
        cd_error("store: query failed: %s", err.msg);
        return NULL;
    }
    return one ? store_row(c, st) : store_rows(c, st);
}

json_t *store_query(store_conn_t *c, int id, const store_val_t *v, int n)
{
    return store_query_stmt(c, store_stmt(c, id), 0, v, n);
}

json_t *store_list(store_t *s, int id, const store_val_t *v, int n)
{
    store_conn_t *c = store_reader(s);
    json_t *rows = store_query(c, id, v, n);
    store_release(c);
    return rows ? rows : json_array();
}

json_t *store_get(store_t *s, int id, const store_val_t *v, int n)
{
    store_conn_t *c = store_reader(s);
    json_t *row = store_query_stmt(c, store_stmt(c, id), 1, v, n);
    store_release(c);
    return row;
}

/* ---- transactions ------------------------------------------------------------------- */

int store_tx_begin(store_conn_t *c, cd_err_t *err)
{
    if (store_exec(c, store_stmt(c, c->tx_depth ? Q_SAVEPOINT : Q_BEGIN), "begin transaction", err) != CD_OK)
        return CD_ERR;
    c->tx_depth++;
    return CD_OK;
}

int store_tx_commit(store_conn_t *c, cd_err_t *err)
{
    if (c->tx_depth <= 0)
        return CD_OK;
    if (store_exec(c, store_stmt(c, c->tx_depth == 1 ? Q_COMMIT : Q_RELEASE), "commit", err) != CD_OK) {
        store_tx_rollback(c);
        return CD_ERR;
    }
    c->tx_depth--;
    return CD_OK;
}

void store_tx_rollback(store_conn_t *c)
{
    if (c->tx_depth <= 0)
        return;
    if (c->tx_depth == 1) {
        if (!sqlite3_get_autocommit(c->db))
            store_exec(c, store_stmt(c, Q_ROLLBACK), "rollback", NULL);
    } else {
        store_exec(c, store_stmt(c, Q_ROLLBACK_TO), "rollback", NULL);
        store_exec(c, store_stmt(c, Q_RELEASE), "rollback", NULL);
    }
    c->tx_depth--;
}

int store_tx_start(store_t *s, store_conn_t **out, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK) {
        store_release(c);
        *out = NULL;
        return CD_ERR;
    }
    *out = c;
    return CD_OK;
}

int store_tx_finish(store_conn_t *c, int rc, cd_err_t *err)
{
    if (rc == CD_OK)
        rc = store_tx_commit(c, err); /* a failed commit rolls back */
    else
        store_tx_rollback(c);
    store_release(c);
    return rc;
}

void store_tx_abandon(store_conn_t *c)
{
    store_tx_rollback(c);
    store_release(c);
}
