/* Inside the store: the connection, its lock and the table of prepared statements. */
#ifndef CDIGITS_STORE_INTERNAL_H
#define CDIGITS_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "cdigits/store.h"

/* Every statement the store runs, prepared once at open (see stmt_sql in store.c). */
enum store_stmt_id {
    Q_BEGIN,
    Q_COMMIT,
    Q_ROLLBACK,
    Q_SAVEPOINT,
    Q_RELEASE,
    Q_ROLLBACK_TO,
    Q_JOB_INSERT,
    Q_JOB_GET,
    Q_JOB_LIST,
    Q_JOB_LIST_TYPE,
    Q_JOB_SET_STATE,
    Q_JOB_SET_WAIT,
    Q_JOB_SET_ERROR,
    Q_JOB_SET_INTERRUPTED,
    Q_JOB_SET_PROGRESS,
    Q_JOB_SET_NAME,
    Q_JOB_SET_NOTES,
    Q_JOB_SET_GROUP,
    Q_JOB_SET_RESULT,
    Q_JOB_SET_CONFIG,
    Q_JOB_DELETE,
    Q_JOB_HISTORY_ADD,
    Q_JOB_HISTORY,
    Q_JOB_MODELS_USING,
    Q_TASK_INSERT,
    Q_TASK_SET_STATE,
    Q_TASK_HISTORY_ADD,
    Q_TASK_HISTORY,
    Q_TASK_SET_PROCESS,
    Q_TASK_CLEAR_PROCESS,
    Q_TASK_SET_SLURM,
    Q_TASK_SET_PROGRESS,
    Q_TASK_SET_ERROR,
    Q_TASK_SET_DEVICE,
    Q_TASK_SET_OFFSET,
    Q_TASK_SET_RUNTIME,
    Q_TASK_LIST,
    Q_TASK_LIST_ALL,
    Q_METRIC_INSERT,
    Q_METRIC_SUMMARY_UPSERT,
    Q_METRIC_LIST,
    Q_METRIC_LIST_ALL,
    Q_METRIC_SUMMARY,
    Q_METRIC_SUPERSEDE,
    Q_METRIC_SUMMARY_CLEAR,
    Q_METRIC_SUMMARY_REBUILD,
    Q_METRIC_COUNT,
    Q_METRIC_COUNT_ALL,
    Q_LOG_INSERT,
    Q_LOG_TAIL,
    Q_SNAPSHOT_UPSERT,
    Q_SNAPSHOT_LIST,
    Q_METRIC_LAST_POINT,
    Q_USER_LOGIN,
    Q_USER_GET,
    Q_COUNT
};

/* One SQLite connection with its own prepared statements and lock. */
typedef struct store_conn {
    sqlite3 *db;
    pthread_mutex_t lock;   /* recursive: a batch (store_batch_begin) nests writes */
    sqlite3_stmt *stmt[Q_COUNT];
    int tx_depth;           /* open transactions: the outer one BEGIN, inner ones SAVEPOINTs */
    uint64_t releases;      /* writer: bumped at every release, so readers can tell "changed" */
} store_conn_t;

/* Readers never wait for a writer (WAL) nor for each other beyond their connection. */
#define STORE_READERS 4

struct store {
    store_conn_t writer;                 /* every write (and reads inside a write) */
    store_conn_t readers[STORE_READERS]; /* query_only connections for the API's reads */
    unsigned next_reader;
    char path[4096];
};

/* The writer connection, locked; or a reader connection, locked (a free one when
 * there is one). store_release unlocks either. */
store_conn_t *store_writer(store_t *s);
store_conn_t *store_reader(store_t *s);
void store_release(store_conn_t *c);

/* ---- running statements (query.c) ----
 * Values to bind go as a type-tagged array, ?1 first, most easily written with
 * STORE_ARGS: store_write(s, Q_JOB_SET_NAME, "editing the job", NULL, err,
 *                         STORE_ARGS(STORE_TEXT(id), STORE_TEXT(name))). */
enum store_val_kind {
    STORE_V_NULL,
    STORE_V_TEXT,   /* NULL binds NULL */
    STORE_V_JSON,   /* compact JSON text; NULL binds NULL */
    STORE_V_REAL,   /* NaN and inf bind NULL */
    STORE_V_DOUBLE, /* bound as given */
    STORE_V_INT,
};
typedef struct store_val {
    enum store_val_kind kind;
    union {
        const char *text;
        json_t *json;
        double real;
        int64_t i;
    } u;
} store_val_t;

#define STORE_NULL ((store_val_t){.kind = STORE_V_NULL})
#define STORE_TEXT(x) ((store_val_t){.kind = STORE_V_TEXT, .u.text = (x)})
#define STORE_JSON(x) ((store_val_t){.kind = STORE_V_JSON, .u.json = (x)})
#define STORE_REAL(x) ((store_val_t){.kind = STORE_V_REAL, .u.real = (x)})
#define STORE_DOUBLE(x) ((store_val_t){.kind = STORE_V_DOUBLE, .u.real = (x)})
#define STORE_INT(x) ((store_val_t){.kind = STORE_V_INT, .u.i = (int64_t)(x)})
/* Expands to the two arguments (array, count) the helpers below take last. */
#define STORE_ARGS(...)                                                                    \
    (const store_val_t[]){__VA_ARGS__},                                                    \
        (int)(sizeof((const store_val_t[]){__VA_ARGS__}) / sizeof(store_val_t))

/* What a write did, read before the connection is released. */
typedef struct store_changes {
    int changes;   /* rows the statement changed */
    int64_t rowid; /* the connection's last inserted rowid */
} store_changes_t;

/* With c locked: the statement reset and unbound, ready for binding. */
sqlite3_stmt *store_stmt(store_conn_t *c, int id);

/* Binds v[0..n) to ?1..?n. CD_OK, or CD_ERR with "what: reason" in err. */
int store_bind(sqlite3_stmt *st, const store_val_t *v, int n, const char *what, cd_err_t *err);
/* Single binding helpers, returning sqlite's code: NULL strings bind NULL. */
int store_bind_text(sqlite3_stmt *st, int i, const char *v);
int store_bind_json(sqlite3_stmt *st, int i, json_t *v); /* NULL binds NULL */
int store_bind_real(sqlite3_stmt *st, int i, double v);  /* NaN and inf bind NULL */

/* Runs a bound statement that returns no rows to completion, then resets it.
 * CD_OK or CD_ERR with sqlite's message prefixed by what (CD_E_CONFLICT for a
 * constraint, CD_E_INTERNAL otherwise). */
int store_exec(store_conn_t *c, sqlite3_stmt *st, const char *what, cd_err_t *err);
/* Binds v to st (or to statement id, reset first) and runs it with store_exec; out,
 * when not NULL, gets what it changed. With c locked. */
int store_run_stmt(store_conn_t *c, sqlite3_stmt *st, const char *what, store_changes_t *out, cd_err_t *err,
                   const store_val_t *v, int n);
int store_run(store_conn_t *c, int id, const char *what, store_changes_t *out, cd_err_t *err,
              const store_val_t *v, int n);
/* store_run on the writer connection, taken and released around it. */
int store_write(store_t *s, int id, const char *what, store_changes_t *out, cd_err_t *err, const store_val_t *v,
                int n);

/* Steps a bound query and calls row for each row until it returns other than CD_OK,
 * then resets it. CD_OK when every row was read. */
int store_each(sqlite3_stmt *st, int (*row)(sqlite3_stmt *st, void *ctx), void *ctx);
/* store_each keeping column 0 of the last row in *out (untouched when there is none). */
int store_scalar(sqlite3_stmt *st, int64_t *out);
/* Steps a bound query and returns its rows as an array of objects (column name ->
 * value; a column whose name ends in "_json" is parsed and stored without the suffix;
 * "state" letters also get "state" as an int). NULL only on a database error, which
 * is logged. */
json_t *store_rows(store_conn_t *c, sqlite3_stmt *st);
/* The first row of store_rows, or NULL when there is none. */
json_t *store_row(store_conn_t *c, sqlite3_stmt *st);
/* Binds v and returns store_row (one) or store_rows; NULL on a database error. */
json_t *store_query_stmt(store_conn_t *c, sqlite3_stmt *st, int one, const store_val_t *v, int n);
/* store_query_stmt's rows for statement id on c, locked. */
json_t *store_query(store_conn_t *c, int id, const store_val_t *v, int n);
/* On a reader connection, taken and released around it: the rows of statement id
 * (an empty array on a database error), or its first row (NULL when none). */
json_t *store_list(store_t *s, int id, const store_val_t *v, int n);
json_t *store_get(store_t *s, int id, const store_val_t *v, int n);

/* Transactions nest: inside another one they are savepoints. With c locked. */
int store_tx_begin(store_conn_t *c, cd_err_t *err);
int store_tx_commit(store_conn_t *c, cd_err_t *err); /* a failed commit rolls back */
void store_tx_rollback(store_conn_t *c);
/* A write transaction with one error path: store_tx_start takes the writer and begins
 * (on failure nothing stays taken); store_tx_finish commits when rc is CD_OK and rolls
 * back otherwise, releases, and returns the outcome; store_tx_abandon rolls back a
 * transaction that has nothing to keep and releases. */
int store_tx_start(store_t *s, store_conn_t **out, cd_err_t *err);
int store_tx_finish(store_conn_t *c, int rc, cd_err_t *err);
void store_tx_abandon(store_conn_t *c);

#endif
