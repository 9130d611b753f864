/* Jobs and tasks with their status history. */
#include "internal.h"

#include <string.h>

#include "cdigits/util.h"

/* ---- jobs ------------------------------------------------------------------------- */

static int history_add(store_conn_t *c, const char *job_id, int st, const char *message, double now, cd_err_t *err)
{
    return store_run(c, Q_JOB_HISTORY_ADD, "adding to the job's status history", NULL, err,
                     STORE_ARGS(STORE_TEXT(job_id), STORE_TEXT(cd_state_code(st)), STORE_DOUBLE(now),
                                STORE_TEXT(message)));
}

int store_job_insert(store_t *s, const store_job_new_t *job, cd_err_t *err)
{
    double now = cd_wall_time();
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    json_t *empty = json_object();
    int rc = store_run(c, Q_JOB_INSERT, "adding the job", NULL, err,
                       STORE_ARGS(STORE_TEXT(job->id), STORE_TEXT(job->type), STORE_TEXT(job->name),
                                  STORE_TEXT(job->group ? job->group : ""), STORE_TEXT(job->username),
                                  STORE_TEXT(job->dataset_id), STORE_TEXT(job->dir),
                                  STORE_JSON(job->form ? job->form : empty),
                                  STORE_JSON(job->config ? job->config : empty), STORE_DOUBLE(now)));
    json_decref(empty);
    if (rc == CD_OK)
        rc = history_add(c, job->id, CD_ST_INIT, NULL, now, err);
    return store_tx_finish(c, rc, err);
}

json_t *store_job_get(store_t *s, const char *id)
{
    return store_get(s, Q_JOB_GET, STORE_ARGS(STORE_TEXT(id)));
}

json_t *store_job_list(store_t *s, const char *type)
{
    if (type)
        return store_list(s, Q_JOB_LIST_TYPE, STORE_ARGS(STORE_TEXT(type)));
    return store_list(s, Q_JOB_LIST, NULL, 0);
}

/* Runs a one-row UPDATE bound with (id, value) and reports a missing job. */
static int update_job(store_t *s, int stmt, const char *id, store_val_t value, const char *what, cd_err_t *err)
{
    store_changes_t ch = {0, 0};
    int rc = store_write(s, stmt, what, &ch, err, STORE_ARGS(STORE_TEXT(id), value));
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "%s: no job %s", what, id);
    return rc;
}

int store_job_set_state(store_t *s, const char *id, int st, const char *message, cd_err_t *err)
{
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    store_changes_t ch = {0, 0};
    int rc = store_run(c, Q_JOB_SET_STATE, "setting the job's status", &ch, err,
                       STORE_ARGS(STORE_TEXT(id), STORE_TEXT(cd_state_code(st))));
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "no job %s", id);
    if (rc == CD_OK)
        rc = history_add(c, id, st, message, cd_wall_time(), err);
    return store_tx_finish(c, rc, err);
}

int store_job_set_wait_reason(store_t *s, const char *id, const char *reason, cd_err_t *err)
{
    return update_job(s, Q_JOB_SET_WAIT, id, STORE_TEXT(reason ? reason : ""), "setting why the job waits", err);
}

int store_job_set_error(store_t *s, const char *id, const char *error, cd_err_t *err)
{
    return update_job(s, Q_JOB_SET_ERROR, id, STORE_TEXT(error), "setting the job's error", err);
}

int store_job_set_interrupted(store_t *s, const char *id, int interrupted, cd_err_t *err)
{
    return store_write(s, Q_JOB_SET_INTERRUPTED, "marking the job interrupted", NULL, err,
                       STORE_ARGS(STORE_TEXT(id), STORE_INT(interrupted ? 1 : 0)));
}

int store_job_set_progress(store_t *s, const char *id, double progress, cd_err_t *err)
{
    return store_write(s, Q_JOB_SET_PROGRESS, "setting the job's progress", NULL, err,
                       STORE_ARGS(STORE_TEXT(id), STORE_REAL(progress)));
}

int store_job_set_text(store_t *s, const char *id, const char *field, const char *value, cd_err_t *err)
{
    static const struct {
        const char *field;
        int stmt;
    } fields[] = {{"name", Q_JOB_SET_NAME}, {"notes", Q_JOB_SET_NOTES}, {"group", Q_JOB_SET_GROUP}};
    for (size_t i = 0; i < CD_ARRAY_LEN(fields); i++)
        if (strcmp(fields[i].field, field) == 0)
            return update_job(s, fields[i].stmt, id, STORE_TEXT(value), "editing the job", err);
    return cd_err_set(err, CD_E_INVALID, "a job has no editable field \"%s\"", field);
}

int store_job_set_result(store_t *s, const char *id, json_t *result, cd_err_t *err)
{
    return store_write(s, Q_JOB_SET_RESULT, "saving the dataset's result", NULL, err,
                       STORE_ARGS(STORE_TEXT(id), STORE_JSON(result)));
}

int store_job_set_config(store_t *s, const char *id, json_t *config, cd_err_t *err)
{
    return store_write(s, Q_JOB_SET_CONFIG, "saving the job's configuration", NULL, err,
                       STORE_ARGS(STORE_TEXT(id), STORE_JSON(config)));
}

int store_job_delete(store_t *s, const char *id, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    json_t *users = store_query(c, Q_JOB_MODELS_USING, STORE_ARGS(STORE_TEXT(id)));
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
    store_changes_t ch = {0, 0};
    int rc = store_run(c, Q_JOB_DELETE, "deleting the job", &ch, err, STORE_ARGS(STORE_TEXT(id)));
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", id);
    store_release(c);
    return rc;
}

/* The rows of a status history query as [status, ts, message] triples. */
static json_t *history_rows(store_t *s, int stmt, store_val_t key)
{
    store_conn_t *c = store_reader(s);
    json_t *rows = store_query(c, stmt, STORE_ARGS(key)), *out = json_array();
    store_release(c);
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
    return history_rows(s, Q_JOB_HISTORY, STORE_TEXT(id));
}

json_t *store_job_models_using(store_t *s, const char *dataset_id)
{
    return store_list(s, Q_JOB_MODELS_USING, STORE_ARGS(STORE_TEXT(dataset_id)));
}

/* ---- tasks ------------------------------------------------------------------------ */

static int task_history_add(store_conn_t *c, int64_t task_id, int st, const char *message, double now,
                            cd_err_t *err)
{
    return store_run(c, Q_TASK_HISTORY_ADD, "adding to the task's history", NULL, err,
                     STORE_ARGS(STORE_INT(task_id), STORE_TEXT(cd_state_code(st)), STORE_DOUBLE(now),
                                STORE_TEXT(message)));
}

int store_task_insert(store_t *s, const char *job_id, const char *kind, const char *name, int64_t *task_id,
                      cd_err_t *err)
{
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    store_changes_t ch = {0, 0};
    int rc = store_run(c, Q_TASK_INSERT, "adding a task", &ch, err,
                       STORE_ARGS(STORE_TEXT(job_id), STORE_TEXT(kind), STORE_TEXT(name)));
    if (rc == CD_OK)
        rc = task_history_add(c, ch.rowid, CD_ST_INIT, NULL, cd_wall_time(), err);
    rc = store_tx_finish(c, rc, err);
    if (rc == CD_OK && task_id)
        *task_id = ch.rowid;
    return rc;
}

int store_task_set_state(store_t *s, int64_t task_id, int st, const char *message, cd_err_t *err)
{
    double now = cd_wall_time();
    store_conn_t *c;
    if (store_tx_start(s, &c, err) != CD_OK)
        return CD_ERR;
    store_changes_t ch = {0, 0};
    int rc = store_run(c, Q_TASK_SET_STATE, "setting the task's status", &ch, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_TEXT(cd_state_code(st)), STORE_DOUBLE(now)));
    if (rc == CD_OK && ch.changes == 0)
        rc = cd_err_set(err, CD_E_NOTFOUND, "no task %lld", (long long)task_id);
    if (rc == CD_OK)
        rc = task_history_add(c, task_id, st, message, now, err);
    return store_tx_finish(c, rc, err);
}

int store_task_set_process(store_t *s, int64_t task_id, int pid, long long pid_start, const char *gpus_json,
                           int attempt, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_PROCESS, "recording the worker process", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_INT(pid), STORE_INT(pid_start), STORE_TEXT(gpus_json),
                                  STORE_INT(attempt)));
}

int store_task_clear_process(store_t *s, int64_t task_id, int exit_status, cd_err_t *err)
{
    return store_write(s, Q_TASK_CLEAR_PROCESS, "recording the worker's exit", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_INT(exit_status)));
}

int store_task_set_slurm(store_t *s, int64_t task_id, const char *slurm_job_id, const char *nodes, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_SLURM, "recording the task's Slurm job", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_TEXT(slurm_job_id && slurm_job_id[0] ? slurm_job_id : NULL),
                                  STORE_TEXT(nodes && nodes[0] ? nodes : NULL)));
}

int store_task_set_progress(store_t *s, int64_t task_id, double progress, const char *stage, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_PROGRESS, "setting the task's progress", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_REAL(progress), STORE_TEXT(stage)));
}

int store_task_set_error(store_t *s, int64_t task_id, const char *error, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_ERROR, "setting the task's error", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_TEXT(error)));
}

int store_task_set_device(store_t *s, int64_t task_id, json_t *device, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_DEVICE, "recording the task's device", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_JSON(device)));
}

int store_task_set_out_offset(store_t *s, int64_t task_id, long long offset, cd_err_t *err)
{
    return store_write(s, Q_TASK_SET_OFFSET, "recording how far the worker's output was read", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_INT(offset)));
}

int store_task_set_runtime(store_t *s, int64_t task_id, const char *key, json_t *value, cd_err_t *err)
{
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
            return cd_err_set(err, CD_E_INVALID, "runtime key \"%s\" must be lowercase letters and _", key);
    return store_write(s, Q_TASK_SET_RUNTIME, "recording what the worker reported", NULL, err,
                       STORE_ARGS(STORE_INT(task_id), STORE_TEXT(key), STORE_JSON(value)));
}

json_t *store_task_list(store_t *s, const char *job_id)
{
    return store_list(s, Q_TASK_LIST, STORE_ARGS(STORE_TEXT(job_id)));
}

json_t *store_task_list_by_state(store_t *s, unsigned state_mask)
{
    json_t *rows = store_list(s, Q_TASK_LIST_ALL, NULL, 0);
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
    return history_rows(s, Q_TASK_HISTORY, STORE_INT(task_id));
}
