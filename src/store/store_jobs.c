/* Jobs and tasks with their status history. */
#include "internal.h"

#include <string.h>

#include "cdigits/util.h"

/* ---- jobs ------------------------------------------------------------------------- */

static int history_add(store_conn_t *c, const char *job_id, int st, const char *message, double now, cd_err_t *err)
{
    sqlite3_stmt *q = store_stmt(c, Q_JOB_HISTORY_ADD);
    store_bind_text(q, 1, job_id);
    store_bind_text(q, 2, cd_state_code(st));
    sqlite3_bind_double(q, 3, now);
    store_bind_text(q, 4, message);
    return store_exec(c, q, "adding to the job's status history", err);
}

int store_job_insert(store_t *s, const store_job_new_t *job, cd_err_t *err)
{
    double now = cd_wall_time();
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_JOB_INSERT);
    store_bind_text(q, 1, job->id);
    store_bind_text(q, 2, job->type);
    store_bind_text(q, 3, job->name);
    store_bind_text(q, 4, job->group ? job->group : "");
    store_bind_text(q, 5, job->username);
    store_bind_text(q, 6, job->dataset_id);
    store_bind_text(q, 7, job->dir);
    json_t *empty = json_object();
    store_bind_json(q, 8, job->form ? job->form : empty);
    store_bind_json(q, 9, job->config ? job->config : empty);
    json_decref(empty);
    sqlite3_bind_double(q, 10, now);
    if (store_exec(c, q, "adding the job", err) != CD_OK ||
        history_add(c, job->id, CD_ST_INIT, NULL, now, err) != CD_OK) {
        store_tx_rollback(c);
        goto err;
    }
    if (store_tx_commit(c, err) != CD_OK)
        goto err;
    store_release(c);
    return CD_OK;
err:
    store_release(c);
    return CD_ERR;
}

json_t *store_job_get(store_t *s, const char *id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_GET);
    store_bind_text(q, 1, id);
    json_t *row = store_row(c, q);
    store_release(c);
    return row;
}

json_t *store_job_list(store_t *s, const char *type)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, type ? Q_JOB_LIST_TYPE : Q_JOB_LIST);
    if (type)
        store_bind_text(q, 1, type);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

/* Runs a one-row UPDATE bound with (id, text) and reports a missing job. */
static int update_text(store_t *s, int stmt, const char *id, const char *value, const char *what, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, stmt);
    store_bind_text(q, 1, id);
    store_bind_text(q, 2, value);
    int rc = store_exec(c, q, what, err);
    if (rc == CD_OK && sqlite3_changes(c->db) == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "%s: no job %s", what, id);
    store_release(c);
    return rc;
}

int store_job_set_state(store_t *s, const char *id, int st, const char *message, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_JOB_SET_STATE);
    store_bind_text(q, 1, id);
    store_bind_text(q, 2, cd_state_code(st));
    if (store_exec(c, q, "setting the job's status", err) != CD_OK)
        goto rollback;
    if (sqlite3_changes(c->db) == 0) {
        cd_err_set(err, CD_E_NOTFOUND, "no job %s", id);
        goto rollback;
    }
    if (history_add(c, id, st, message, cd_wall_time(), err) != CD_OK)
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

int store_job_set_wait_reason(store_t *s, const char *id, const char *reason, cd_err_t *err)
{
    return update_text(s, Q_JOB_SET_WAIT, id, reason ? reason : "", "setting why the job waits", err);
}

int store_job_set_error(store_t *s, const char *id, const char *error, cd_err_t *err)
{
    return update_text(s, Q_JOB_SET_ERROR, id, error, "setting the job's error", err);
}

int store_job_set_interrupted(store_t *s, const char *id, int interrupted, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_SET_INTERRUPTED);
    store_bind_text(q, 1, id);
    sqlite3_bind_int(q, 2, interrupted ? 1 : 0);
    int rc = store_exec(c, q, "marking the job interrupted", err);
    store_release(c);
    return rc;
}

int store_job_set_progress(store_t *s, const char *id, double progress, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_SET_PROGRESS);
    store_bind_text(q, 1, id);
    store_bind_real(q, 2, progress);
    int rc = store_exec(c, q, "setting the job's progress", err);
    store_release(c);
    return rc;
}

int store_job_set_text(store_t *s, const char *id, const char *field, const char *value, cd_err_t *err)
{
    static const struct {
        const char *field;
        int stmt;
    } fields[] = {{"name", Q_JOB_SET_NAME}, {"notes", Q_JOB_SET_NOTES}, {"group", Q_JOB_SET_GROUP}};
    for (size_t i = 0; i < CD_ARRAY_LEN(fields); i++)
        if (strcmp(fields[i].field, field) == 0)
            return update_text(s, fields[i].stmt, id, value, "editing the job", err);
    return cd_err_set(err, CD_E_INVALID, "a job has no editable field \"%s\"", field);
}

static int update_json(store_t *s, int stmt, const char *id, json_t *v, const char *what, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, stmt);
    store_bind_text(q, 1, id);
    store_bind_json(q, 2, v);
    int rc = store_exec(c, q, what, err);
    store_release(c);
    return rc;
}

int store_job_set_result(store_t *s, const char *id, json_t *result, cd_err_t *err)
{
    return update_json(s, Q_JOB_SET_RESULT, id, result, "saving the dataset's result", err);
}

int store_job_set_config(store_t *s, const char *id, json_t *config, cd_err_t *err)
{
    return update_json(s, Q_JOB_SET_CONFIG, id, config, "saving the job's configuration", err);
}

int store_job_delete(store_t *s, const char *id, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_MODELS_USING);
    store_bind_text(q, 1, id);
    json_t *users = store_rows(c, q);
    if (users && json_array_size(users)) {
        json_t *m = json_array_get(users, 0);
        cd_err_set(err, CD_E_FORBIDDEN,
                   "Cannot delete dataset %s: model \"%s\" (%s)%s trains on it; delete the model%s first",
                   id, json_string_value(json_object_get(m, "name")), json_string_value(json_object_get(m, "id")),
                   json_array_size(users) > 1 ? " and others" : "", json_array_size(users) > 1 ? "s" : "");
        json_decref(users);
        store_release(c);
        return CD_ERR;
    }
    json_decref(users);
    q = store_stmt(c, Q_JOB_DELETE);
    store_bind_text(q, 1, id);
    int rc = store_exec(c, q, "deleting the job", err);
    if (rc == CD_OK && sqlite3_changes(c->db) == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", id);
    store_release(c);
    return rc;
}

static json_t *history_rows(store_conn_t *c, sqlite3_stmt *q)
{
    json_t *rows = store_rows(c, q), *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        json_array_append_new(out, json_pack("[OOO]", json_object_get(r, "status"), json_object_get(r, "ts"),
                                             json_object_get(r, "message")));
    }
    json_decref(rows);
    return out;
}

json_t *store_job_history(store_t *s, const char *id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_HISTORY);
    store_bind_text(q, 1, id);
    json_t *out = history_rows(c, q);
    store_release(c);
    return out;
}

json_t *store_job_models_using(store_t *s, const char *dataset_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_JOB_MODELS_USING);
    store_bind_text(q, 1, dataset_id);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

/* ---- tasks ------------------------------------------------------------------------ */

int store_task_insert(store_t *s, const char *job_id, const char *kind, const char *name, int64_t *task_id,
                      cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_TASK_INSERT);
    store_bind_text(q, 1, job_id);
    store_bind_text(q, 2, kind);
    store_bind_text(q, 3, name);
    if (store_exec(c, q, "adding a task", err) != CD_OK)
        goto rollback;
    int64_t id = sqlite3_last_insert_rowid(c->db);
    q = store_stmt(c, Q_TASK_HISTORY_ADD);
    sqlite3_bind_int64(q, 1, id);
    store_bind_text(q, 2, cd_state_code(CD_ST_INIT));
    sqlite3_bind_double(q, 3, cd_wall_time());
    sqlite3_bind_null(q, 4);
    if (store_exec(c, q, "adding to the task's history", err) != CD_OK)
        goto rollback;
    if (store_tx_commit(c, err) != CD_OK)
        goto err;
    if (task_id)
        *task_id = id;
    store_release(c);
    return CD_OK;
rollback:
    store_tx_rollback(c);
err:
    store_release(c);
    return CD_ERR;
}

int store_task_set_state(store_t *s, int64_t task_id, int st, const char *message, cd_err_t *err)
{
    double now = cd_wall_time();
    store_conn_t *c = store_writer(s);
    if (store_tx_begin(c, err) != CD_OK)
        goto err;
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_STATE);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_text(q, 2, cd_state_code(st));
    sqlite3_bind_double(q, 3, now);
    if (store_exec(c, q, "setting the task's status", err) != CD_OK)
        goto rollback;
    if (sqlite3_changes(c->db) == 0) {
        cd_err_set(err, CD_E_NOTFOUND, "no task %lld", (long long)task_id);
        goto rollback;
    }
    q = store_stmt(c, Q_TASK_HISTORY_ADD);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_text(q, 2, cd_state_code(st));
    sqlite3_bind_double(q, 3, now);
    store_bind_text(q, 4, message);
    if (store_exec(c, q, "adding to the task's history", err) != CD_OK)
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

int store_task_set_process(store_t *s, int64_t task_id, int pid, long long pid_start, const char *gpus_json,
                           int attempt, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_PROCESS);
    sqlite3_bind_int64(q, 1, task_id);
    sqlite3_bind_int(q, 2, pid);
    sqlite3_bind_int64(q, 3, pid_start);
    store_bind_text(q, 4, gpus_json);
    sqlite3_bind_int(q, 5, attempt);
    int rc = store_exec(c, q, "recording the worker process", err);
    store_release(c);
    return rc;
}

int store_task_clear_process(store_t *s, int64_t task_id, int exit_status, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_CLEAR_PROCESS);
    sqlite3_bind_int64(q, 1, task_id);
    sqlite3_bind_int(q, 2, exit_status);
    int rc = store_exec(c, q, "recording the worker's exit", err);
    store_release(c);
    return rc;
}

int store_task_set_progress(store_t *s, int64_t task_id, double progress, const char *stage, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_PROGRESS);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_real(q, 2, progress);
    store_bind_text(q, 3, stage);
    int rc = store_exec(c, q, "setting the task's progress", err);
    store_release(c);
    return rc;
}

int store_task_set_error(store_t *s, int64_t task_id, const char *error, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_ERROR);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_text(q, 2, error);
    int rc = store_exec(c, q, "setting the task's error", err);
    store_release(c);
    return rc;
}

int store_task_set_device(store_t *s, int64_t task_id, json_t *device, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_DEVICE);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_json(q, 2, device);
    int rc = store_exec(c, q, "recording the task's device", err);
    store_release(c);
    return rc;
}

int store_task_set_out_offset(store_t *s, int64_t task_id, long long offset, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_OFFSET);
    sqlite3_bind_int64(q, 1, task_id);
    sqlite3_bind_int64(q, 2, offset);
    int rc = store_exec(c, q, "recording how far the worker's output was read", err);
    store_release(c);
    return rc;
}

int store_task_set_runtime(store_t *s, int64_t task_id, const char *key, json_t *value, cd_err_t *err)
{
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
            return cd_err_set(err, CD_E_INVALID, "runtime key \"%s\" must be lowercase letters and _", key);
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_SET_RUNTIME);
    sqlite3_bind_int64(q, 1, task_id);
    store_bind_text(q, 2, key);
    store_bind_json(q, 3, value);
    int rc = store_exec(c, q, "recording what the worker reported", err);
    store_release(c);
    return rc;
}

json_t *store_task_list(store_t *s, const char *job_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_LIST);
    store_bind_text(q, 1, job_id);
    json_t *rows = store_rows(c, q);
    store_release(c);
    return rows ? rows : json_array();
}

json_t *store_task_list_by_state(store_t *s, unsigned state_mask)
{
    store_conn_t *c = store_reader(s);
    json_t *rows = store_rows(c, store_stmt(c, Q_TASK_LIST_ALL));
    store_release(c);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        json_int_t st = json_integer_value(json_object_get(r, "state"));
        if (st >= 0 && (state_mask & (1u << st)))
            json_array_append(out, r);
    }
    json_decref(rows);
    return out;
}

json_t *store_task_history(store_t *s, int64_t task_id)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_TASK_HISTORY);
    sqlite3_bind_int64(q, 1, task_id);
    json_t *out = history_rows(c, q);
    store_release(c);
    return out;
}
