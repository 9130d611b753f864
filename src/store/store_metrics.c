/* Metrics (with a running summary per job), logs and snapshots. */
#include "internal.h"

#include "cdigits/util.h"

int store_metric_add(store_t *s, const store_metric_t *m, int64_t *id, cd_err_t *err)
{
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    store_changes_t ch = {0, 0};
    int rc = store_run(c, Q_METRIC_INSERT, "storing a metric", &ch, err,
                       STORE_ARGS(STORE_TEXT(m->job_id), m->task_id > 0 ? STORE_INT(m->task_id) : STORE_NULL,
                                  STORE_INT(m->attempt > 0 ? m->attempt : 1), STORE_TEXT(m->phase),
                                  STORE_TEXT(m->name), STORE_REAL(m->value), STORE_REAL(m->epoch),
                                  STORE_INT(m->iteration), STORE_DOUBLE(m->time > 0 ? m->time : cd_wall_time())));
    if (rc == CD_OK && ch.changes == 0) { /* already stored (a replayed line) */
        store_tx_abandon(c);
        if (id)
            *id = 0;
        return CD_OK;
    }
    if (rc == CD_OK)
        rc = store_run(c, Q_METRIC_SUMMARY_UPSERT, "updating the metric summary", NULL, err,
                       STORE_ARGS(STORE_TEXT(m->job_id), STORE_TEXT(m->phase), STORE_TEXT(m->name),
                                  STORE_REAL(m->value)));
    rc = store_tx_finish(c, rc, err);
    if (rc == CD_OK && id)
        *id = ch.rowid;
    return rc;
}

json_t *store_metric_list(store_t *s, const char *job_id, int64_t after_id, int limit, int with_superseded)
{
    return store_list(s, with_superseded ? Q_METRIC_LIST_ALL : Q_METRIC_LIST,
                      STORE_ARGS(STORE_TEXT(job_id), STORE_INT(after_id), STORE_INT(limit > 0 ? limit : -1)));
}

json_t *store_metric_summary(store_t *s, const char *job_id)
{
    return store_list(s, Q_METRIC_SUMMARY, STORE_ARGS(STORE_TEXT(job_id)));
}

int store_metric_supersede(store_t *s, const char *job_id, double epoch, long long iteration, int attempt,
                           cd_err_t *err)
{
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    int rc = store_run(c, Q_METRIC_SUPERSEDE, "marking recomputed metrics", NULL, err,
                       STORE_ARGS(STORE_TEXT(job_id), STORE_DOUBLE(epoch), STORE_INT(attempt),
                                  STORE_INT(iteration)));
    if (rc == CD_OK)
        rc = store_run(c, Q_METRIC_SUMMARY_CLEAR, "clearing the metric summary", NULL, err,
                       STORE_ARGS(STORE_TEXT(job_id)));
    if (rc == CD_OK)
        rc = store_run(c, Q_METRIC_SUMMARY_REBUILD, "rebuilding the metric summary", NULL, err,
                       STORE_ARGS(STORE_TEXT(job_id)));
    return store_tx_finish(c, rc, err);
}

int64_t store_metric_count(store_t *s, const char *job_id, int with_superseded)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, with_superseded ? Q_METRIC_COUNT_ALL : Q_METRIC_COUNT);
    int64_t n = -1;
    if (store_bind(q, STORE_ARGS(STORE_TEXT(job_id)), "counting metrics", NULL) == CD_OK)
        store_scalar(q, &n);
    store_release(c);
    return n;
}

/* store_each's row callback: iterations per epoch from the last (epoch, iteration). */
static int read_iters_per_epoch(sqlite3_stmt *q, void *ctx)
{
    if (sqlite3_column_double(q, 0) > 0)
        *(double *)ctx = (double)sqlite3_column_int64(q, 1) / sqlite3_column_double(q, 0);
    return CD_OK;
}

double store_metric_iters_per_epoch(store_t *s, const char *job_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_METRIC_LAST_POINT);
    double ipe = 0;
    if (store_bind(q, STORE_ARGS(STORE_TEXT(job_id)), "reading the last metric point", NULL) == CD_OK)
        store_each(q, read_iters_per_epoch, &ipe);
    store_release(c);
    return ipe;
}

static int log_insert(store_t *s, const char *job_id, int64_t task_id, const char *level, const char *message,
                      double now, json_int_t *id, cd_err_t *err)
{
    store_changes_t ch = {0, 0};
    int rc = store_write(s, Q_LOG_INSERT, "storing a log line", &ch, err,
                         STORE_ARGS(STORE_TEXT(job_id), task_id > 0 ? STORE_INT(task_id) : STORE_NULL,
                                    STORE_DOUBLE(now), STORE_TEXT(level), STORE_TEXT(message)));
    *id = rc == CD_OK ? (json_int_t)ch.rowid : 0;
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
    return store_list(s, Q_LOG_TAIL, STORE_ARGS(STORE_TEXT(job_id), STORE_INT(n > 0 ? n : -1)));
}

int store_snapshot_add(store_t *s, const char *job_id, double epoch, long long iteration, const char *file,
                       cd_err_t *err)
{
    return store_write(s, Q_SNAPSHOT_UPSERT, "recording a snapshot", NULL, err,
                       STORE_ARGS(STORE_TEXT(job_id), STORE_DOUBLE(epoch), STORE_INT(iteration), STORE_TEXT(file),
                                  STORE_DOUBLE(cd_wall_time())));
}

json_t *store_snapshot_list(store_t *s, const char *job_id)
{
    return store_list(s, Q_SNAPSHOT_LIST, STORE_ARGS(STORE_TEXT(job_id)));
}
