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

/* With c locked: the statement reset and unbound, ready for binding. */
sqlite3_stmt *store_stmt(store_conn_t *c, int id);
/* Runs a bound statement that returns no rows to completion, then resets it.
 * CD_OK or CD_ERR with sqlite's message prefixed by what. */
int store_exec(store_conn_t *c, sqlite3_stmt *st, const char *what, cd_err_t *err);
/* Steps a bound query and returns its rows as an array of objects (column name ->
 * value; a column whose name ends in "_json" is parsed and stored without the suffix;
 * "state" letters also get "state" as an int). NULL only on a database error. */
json_t *store_rows(store_conn_t *c, sqlite3_stmt *st);
/* The first row of store_rows, or NULL when there is none. */
json_t *store_row(store_conn_t *c, sqlite3_stmt *st);
/* Transactions nest: inside another one they are savepoints. */
int store_tx_begin(store_conn_t *c, cd_err_t *err);
int store_tx_commit(store_conn_t *c, cd_err_t *err);
void store_tx_rollback(store_conn_t *c);

/* Binding helpers: NULL strings bind NULL. */
int store_bind_text(sqlite3_stmt *st, int i, const char *v);
int store_bind_json(sqlite3_stmt *st, int i, json_t *v); /* NULL binds NULL */
int store_bind_real(sqlite3_stmt *st, int i, double v);  /* NaN and inf bind NULL */

#endif
