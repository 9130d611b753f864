/*
 * The server's SQLite store: jobs, tasks, their status history, metrics, logs,
 * snapshots and users. Everything a page or the API shows lives here; the jobs
 * directory holds only the large files (datasets, snapshots, worker configs).
 *
 * One connection in WAL mode with foreign keys on, every statement prepared once at
 * open (no SQL is built from strings), one mutex around the connection: every
 * function here may be called from any thread. Schema changes are numbered
 * migrations applied in order at open (PRAGMA user_version holds the number done).
 *
 * Reads return jansson values the caller owns (json_decref); NULL means "not found"
 * unless the function says otherwise. Writes return CD_OK, or CD_ERR with a message in
 * *err (err may be NULL).
 */
#ifndef CDIGITS_STORE_H
#define CDIGITS_STORE_H

#include <stdint.h>

#include <jansson.h>

#include "cdigits/err.h"
#include "cdigits/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DIGITS's six states of a job or task, stored as one letter (I W R D A E). */
enum cd_state { CD_ST_INIT = 0, CD_ST_WAIT, CD_ST_RUN, CD_ST_DONE, CD_ST_ABORT, CD_ST_ERROR, CD_ST_COUNT };
const char *cd_state_name(int st); /* "Initialized" ... "Error" */
const char *cd_state_css(int st);  /* DIGITS's bootstrap class: "warning", "info", ... */
const char *cd_state_code(int st); /* "I" ... "E" */
int cd_state_from_code(const char *code); /* -1 when unknown */
int cd_state_is_running(int st);   /* Initialized, Waiting or Running */

typedef struct store store_t;

/* Opens (creating when missing) the database at path and migrates it to the newest
 * schema. CD_OK with *out set, or CD_ERR with the reason in err. */
int store_open(const char *path, store_t **out, cd_err_t *err);
void store_close(store_t *s); /* accepts NULL */

/* Runs every write this thread makes until store_batch_end in one transaction (each
 * write still succeeds or fails alone, as a savepoint). Other threads' writes wait
 * meanwhile; reads do not. Much faster for bursts of worker lines. */
int store_batch_begin(store_t *s, cd_err_t *err);
int store_batch_end(store_t *s, cd_err_t *err);
/* Waits for the write in progress on another thread (a batch included) to commit. */
void store_sync(store_t *s);
int store_schema_version(store_t *s);
/* bytes SQLite holds in this process now (page caches, statements), and its peak */
void store_memory(long long *now, long long *peak);
/* A number that changes whenever anything may have been written: a reply built from
 * the store at version v is still right while store_version() == v. */
uint64_t store_version(store_t *s);

/* ---- jobs ---------------------------------------------------------------------- */

typedef struct store_job_new {
    const char *id;         /* "20240101-120000-ab12" */
    const char *type;       /* "dataset" or "model" */
    const char *name;
    const char *group;      /* "" for none */
    const char *username;   /* owner; NULL for none */
    const char *dataset_id; /* model jobs: the dataset they train on; else NULL */
    const char *dir;        /* absolute job directory */
    json_t *form;           /* the submitted fields (kept for clone); borrowed */
    json_t *config;         /* what the server derived (image shape, GPU request); borrowed */
} store_job_new_t;

/* Inserts a job in state Initialized with its first status-history entry. */
int store_job_insert(store_t *s, const store_job_new_t *job, cd_err_t *err);
/* One job as an object: id, type, name, group, username, notes, state (int), status
 * (letter), wait_reason, error, interrupted (bool), created, dataset_id, dir, form,
 * config, result, progress; NULL when there is no such job. */
json_t *store_job_get(store_t *s, const char *id);
/* All jobs of a type ("dataset", "model" or NULL for all), newest first, in the shape
 * of store_job_get without form and config. */
json_t *store_job_list(store_t *s, const char *type);
/* Sets the state and appends (state, time, message) to the job's history. message may
 * be NULL. Setting Waiting or Running also clears the error and interrupted flag. */
int store_job_set_state(store_t *s, const char *id, int st, const char *message, cd_err_t *err);
/* Why a job waits ("" when it does not); does not touch the history. */
int store_job_set_wait_reason(store_t *s, const char *id, const char *reason, cd_err_t *err);
int store_job_set_error(store_t *s, const char *id, const char *error, cd_err_t *err);
int store_job_set_interrupted(store_t *s, const char *id, int interrupted, cd_err_t *err);
int store_job_set_progress(store_t *s, const char *id, double progress, cd_err_t *err);
/* Editable text fields: "name", "notes", "group". */
int store_job_set_text(store_t *s, const char *id, const char *field, const char *value, cd_err_t *err);
/* The object a dataset task produced (its `dataset` line and stats); borrowed. */
int store_job_set_result(store_t *s, const char *id, json_t *result, cd_err_t *err);
int store_job_set_config(store_t *s, const char *id, json_t *config, cd_err_t *err);
/* Deletes the job and everything that hangs off it (tasks, history, metrics, logs,
 * snapshots). A dataset that a model uses is refused with CD_E_FORBIDDEN. */
int store_job_delete(store_t *s, const char *id, cd_err_t *err);
/* [[state letter, time, message|null], ...] oldest first */
json_t *store_job_history(store_t *s, const char *id);
/* [{id, name}] of the models that train on a dataset */
json_t *store_job_models_using(store_t *s, const char *dataset_id);

/* ---- tasks --------------------------------------------------------------------- */

/* Adds a task (kind "dataset" or "train") in state Initialized; *task_id gets its id. */
int store_task_insert(store_t *s, const char *job_id, const char *kind, const char *name,
                      int64_t *task_id, cd_err_t *err);
/* Sets the state and appends to the task's history. A running state records the
 * first start time; a final state records the finish time. */
int store_task_set_state(store_t *s, int64_t task_id, int st, const char *message, cd_err_t *err);
/* A worker started: its pid, its start time in clock ticks since boot (to tell it from
 * a later process with the same pid), the GPUs it holds (JSON array text) and the
 * attempt number (1 for the first run, +1 per resume). */
int store_task_set_process(store_t *s, int64_t task_id, int pid, long long pid_start,
                           const char *gpus_json, int attempt, cd_err_t *err);
int store_task_clear_process(store_t *s, int64_t task_id, int exit_status, cd_err_t *err);
/* A task submitted to Slurm (--executor slurm): its Slurm job id and the nodes it runs
 * on (NULL or "" clears each), kept after it ends; the job's JSON shows both. */
int store_task_set_slurm(store_t *s, int64_t task_id, const char *slurm_job_id, const char *nodes, cd_err_t *err);
int store_task_set_progress(store_t *s, int64_t task_id, double progress, const char *stage,
                            cd_err_t *err);
int store_task_set_error(store_t *s, int64_t task_id, const char *error, cd_err_t *err);
int store_task_set_device(store_t *s, int64_t task_id, json_t *device, cd_err_t *err);
/* How far the worker's output file (worker.out.jsonl) has been read and stored: a
 * restarted server replays it from there. */
int store_task_set_out_offset(store_t *s, int64_t task_id, long long offset, cd_err_t *err);
/* Sets runtime[key] of a task (key: lowercase letters and _): the latest of what the
 * worker reports about its run, e.g. "batch" and "advice" lines. */
int store_task_set_runtime(store_t *s, int64_t task_id, const char *key, json_t *value, cd_err_t *err);
/* [{id, job_id, kind, name, state, status, progress, stage, attempt, pid, pid_start,
 *   gpus, started, finished, exit_status, error, device, out_offset, runtime,
 *   slurm_job_id, nodes}] of a job,
 *   in creation order */
json_t *store_task_list(store_t *s, const char *job_id);
/* The same for every task whose state is in the bit mask (1 << CD_ST_*), all jobs. */
json_t *store_task_list_by_state(store_t *s, unsigned state_mask);
/* [[state letter, time, message|null], ...] of one task */
json_t *store_task_history(store_t *s, int64_t task_id);

/* ---- metrics, logs, snapshots ---------------------------------------------------- */

typedef struct store_metric {
    const char *job_id;
    int64_t task_id;
    int attempt;
    const char *phase; /* "train" or "val" */
    const char *name;  /* "loss", "accuracy", ... */
    double value;      /* NaN is stored as NULL */
    double epoch;
    long long iteration;
    double time;
} store_metric_t;
/* Appends a metric and folds it into the job's summary (last, min, max) in one
 * transaction; *id gets its row id (may be NULL), 0 when the same point (job, attempt,
 * phase, name, iteration) was already stored: a replayed line is stored once. */
int store_metric_add(store_t *s, const store_metric_t *m, int64_t *id, cd_err_t *err);
/* [{id, phase, name, value, epoch, iteration, time, attempt, superseded}] with id >
 * after_id, oldest first, at most limit (0: no limit); superseded rows only when asked. */
json_t *store_metric_list(store_t *s, const char *job_id, int64_t after_id, int limit,
                          int with_superseded);
/* [{phase, name, last, min, max, count}] over the rows that are not superseded. */
json_t *store_metric_summary(store_t *s, const char *job_id);
/* Marks the metrics of attempts before `attempt` that lie after a resume point as
 * superseded (the resumed run recomputes them): iteration > `iteration` when it is >= 0,
 * else epoch > `epoch`. Rebuilds the job's summary. The rows stay stored. */
int store_metric_supersede(store_t *s, const char *job_id, double epoch, long long iteration, int attempt,
                           cd_err_t *err);
/* Iterations per epoch as the newest metric with both shows it; 0 when unknown. */
double store_metric_iters_per_epoch(store_t *s, const char *job_id);
int64_t store_metric_count(store_t *s, const char *job_id, int with_superseded);

int store_log_add(store_t *s, const char *job_id, int64_t task_id, const char *level,
                  const char *message, cd_err_t *err);
/* the same, answering the stored row {id, time, level, message} (NULL on error, err set) */
json_t *store_log_insert(store_t *s, const char *job_id, int64_t task_id, const char *level,
                         const char *message, cd_err_t *err);
/* the last n log rows [{id, time, level, message}], oldest first */
json_t *store_log_tail(store_t *s, const char *job_id, int n);

/* Records (or updates) a snapshot file (relative to the job folder) with its epoch. */
int store_snapshot_add(store_t *s, const char *job_id, double epoch, long long iteration,
                       const char *file, cd_err_t *err);
/* [{epoch, iteration, file, time}] by epoch */
json_t *store_snapshot_list(store_t *s, const char *job_id);

/* ---- users ---------------------------------------------------------------------- */

/* Records a login (creates the user on first login). */
int store_user_login(store_t *s, const char *name, cd_err_t *err);
/* {name, created, last_login, is_admin, password_hash (null without one)}; NULL when
 * there is no such user. The hash never leaves the server. */
json_t *store_user_get(store_t *s, const char *name);
/* Creates a user with a password hash (argon2id text); CD_E_CONFLICT when the name is
 * taken by a user who has a password already (a name only seen at username logins gets
 * the password). */
int store_user_create(store_t *s, const char *name, const char *password_hash, int is_admin, cd_err_t *err);
int store_user_set_password(store_t *s, const char *name, const char *password_hash, cd_err_t *err);
/* Removes a user with their sessions and tokens (their jobs stay); CD_E_NOTFOUND. */
int store_user_delete(store_t *s, const char *name, cd_err_t *err);
/* [{name, created, last_login, is_admin, has_password}] by name */
json_t *store_user_list(store_t *s);
/* Users who can log in with a password. */
int store_user_count_passwords(store_t *s);

/* Login sessions, by the hash of the cookie's value: id_hash and csrf are hex text. */
int store_session_add(store_t *s, const char *id_hash, const char *username, const char *csrf, double created,
                      double expires, cd_err_t *err);
/* {username, is_admin, csrf, created, expires} of a session that has not expired at now. */
json_t *store_session_get(store_t *s, const char *id_hash, double now);
int store_session_delete(store_t *s, const char *id_hash, cd_err_t *err);
/* Ends every session of a user (a new password); and expired sessions of everyone. */
int store_session_delete_user(store_t *s, const char *username, cd_err_t *err);
int store_session_purge(store_t *s, double now, cd_err_t *err);

/* API tokens, by the hash of the token: *id gets the new row's id. expires <= 0: never. */
int store_token_add(store_t *s, const char *username, const char *name, const char *hash, const char *prefix,
                    double created, double expires, long long *id, cd_err_t *err);
/* {id, username, is_admin, name} of a token that has not expired at now; NULL otherwise.
 * Records the use. */
json_t *store_token_find(store_t *s, const char *hash, double now);
/* [{id, name, prefix, created, expires, last_used}] of one user */
json_t *store_token_list(store_t *s, const char *username);
/* Revokes token id of username (any user's when username is NULL); CD_E_NOTFOUND. */
int store_token_delete(store_t *s, long long id, const char *username, cd_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
