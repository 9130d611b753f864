/* Metrics (with a running summary per job), logs and snapshots. */
#include "internal.h"

#include "cdigits/util.h"

int store_metric_add(store_t *s, const store_metric_t *m, int64_t *id, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_METRIC_INSERT);
    store_bind_text(q, 1, m->job_id);
    if (m->task_id > 0)
        sqlite3_bind_int64(q, 2, m->task_id);
    sqlite3_bind_int(q, 3, m->attempt > 0 ? m->attempt : 1);
    store_bind_text(q, 4, m->phase);
    store_bind_text(q, 5, m->name);
    store_bind_real(q, 6, m->value);
    store_bind_real(q, 7, m->epoch);
    sqlite3_bind_int64(q, 8, m->iteration);
    sqlite3_bind_double(q, 9, m->time > 0 ? m->time : cd_wall_time());
    if (store_exec(c, q, "storing a metric", err) != CD_OK)
        goto rollback;
    if (sqlite3_changes(c->db) == 0) { /* already stored (a replayed line) */
        store_tx_rollback(c);
        if (id)
            *id = 0;
        store_release(c);
        return CD_OK;
    }
    int64_t rowid = sqlite3_last_insert_rowid(c->db);
    q = store_stmt(c, Q_METRIC_SUMMARY_UPSERT);
    store_bind_text(q, 1, m->job_id);
    store_bind_text(q, 2, m->phase);
    store_bind_text(q, 3, m->name);
    store_bind_real(q, 4, m->value);
    if (store_exec(c, q, "updating the metric summary", err) != CD_OK)
        goto rollback;
    if (store_tx_commit(c, err) != CD_OK)
        goto err;
    if (id)
        *id = rowid;
    store_release(c);
    return CD_OK;
rollback:
    store_tx_rollback(c);
err:
    store_release(c);
    return CD_ERR;
}

json_t *store_metric_list(store_t *s, const char *job_id, int64_t after_id, int limit, int with_superseded)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, with_superseded ? Q_METRIC_LIST_ALL : Q_METRIC_LIST);
    store_bind_text(q, 1, job_id);
    sqlite3_bind_int64(q, 2, after_id);
    sqlite3_bind_int(q, 3, limit > 0 ? limit : -1);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

json_t *store_metric_summary(store_t *s, const char *job_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_METRIC_SUMMARY);
    store_bind_text(q, 1, job_id);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

int store_metric_supersede(store_t *s, const char *job_id, double epoch, long long iteration, int attempt,
                           cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_METRIC_SUPERSEDE);
    store_bind_text(q, 1, job_id);
    sqlite3_bind_double(q, 2, epoch);
    sqlite3_bind_int(q, 3, attempt);
    sqlite3_bind_int64(q, 4, iteration);
    if (store_exec(c, q, "marking recomputed metrics", err) != CD_OK)
        goto rollback;
    q = store_stmt(c, Q_METRIC_SUMMARY_CLEAR);
    store_bind_text(q, 1, job_id);
    if (store_exec(c, q, "clearing the metric summary", err) != CD_OK)
        goto rollback;
    q = store_stmt(c, Q_METRIC_SUMMARY_REBUILD);
    store_bind_text(q, 1, job_id);
    if (store_exec(c, q, "rebuilding the metric summary", err) != CD_OK)
        goto rollback;
    if (store_tx_commit(c, err) != CD_OK)
        goto err;
    store_release(c);
    return CD_OK;
rollback:
    store_tx_rollback(c);
err:
    store_release(c);
    return CD_ERR;
}

int64_t store_metric_count(store_t *s, const char *job_id, int with_superseded)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, with_superseded ? Q_METRIC_COUNT_ALL : Q_METRIC_COUNT);
    store_bind_text(q, 1, job_id);
    int64_t n = -1;
    if (sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    store_release(c);
    return n;
}

double store_metric_iters_per_epoch(store_t *s, const char *job_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_METRIC_LAST_POINT);
    store_bind_text(q, 1, job_id);
    double ipe = 0;
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_double(q, 0) > 0)
        ipe = (double)sqlite3_column_int64(q, 1) / sqlite3_column_double(q, 0);
    sqlite3_reset(q);
    store_release(c);
    return ipe;
}

static int log_insert(store_t *s, const char *job_id, int64_t task_id, const char *level, const char *message,
                      double now, json_int_t *id, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_LOG_INSERT);
    store_bind_text(q, 1, job_id);
    if (task_id > 0)
        sqlite3_bind_int64(q, 2, task_id);
    sqlite3_bind_double(q, 3, now);
    store_bind_text(q, 4, level);
    store_bind_text(q, 5, message);
    int rc = store_exec(c, q, "storing a log line", err);
    *id = rc == CD_OK ? (json_int_t)sqlite3_last_insert_rowid(c->db) : 0;
    store_release(c);
    return rc;
}

int store_log_add(store_t *s, const char *job_id, int64_t task_id, const char *level, const char *message,
                  cd_err_t *err)
{
    json_int_t id;
    return log_insert(s, job_id, task_id, level ? level : "info", message ? message : "", cd_wall_time(), &id, err);
}

json_t *store_log_insert(store_t *s, const char *job_id, int64_t task_id, const char *level, const char *message,
                         cd_err_t *err)
{
    double now = cd_wall_time();
    json_int_t id;
    level = level ? level : "info";
    message = message ? message : "";
    if (log_insert(s, job_id, task_id, level, message, now, &id, err) != CD_OK)
        return NULL;
    json_t *row = json_pack("{s:I, s:f, s:s, s:s}", "id", id, "time", now, "level", level, "message", message);
    if (!row) /* stored, but a message that is not UTF-8 has no JSON form */
        cd_err_set(err, CD_E_INVALID, "log line %lld: the message is not UTF-8", (long long)id);
    return row;
}

json_t *store_log_tail(store_t *s, const char *job_id, int n)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_LOG_TAIL);
    store_bind_text(q, 1, job_id);
    sqlite3_bind_int(q, 2, n > 0 ? n : -1);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

int store_snapshot_add(store_t *s, const char *job_id, double epoch, long long iteration, const char *file,
                       cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_SNAPSHOT_UPSERT);
    store_bind_text(q, 1, job_id);
    sqlite3_bind_double(q, 2, epoch);
    sqlite3_bind_int64(q, 3, iteration);
    store_bind_text(q, 4, file);
    sqlite3_bind_double(q, 5, cd_wall_time());
    int rc = store_exec(c, q, "recording a snapshot", err);
    store_release(c);
    return rc;
}

json_t *store_snapshot_list(store_t *s, const char *job_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_SNAPSHOT_LIST);
    store_bind_text(q, 1, job_id);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}
