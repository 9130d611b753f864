/*
 * Warm inference workers: the server keeps one `cdigits-worker serve-model` process
 * per (model, snapshot) that was asked for recently, so that a repeated classify_one
 * skips starting a process and loading the weights (docs/inference.md).
 *
 * A worker holds an inference slot (and a GPU, when one was free when it started)
 * only while it answers a request; idle, it holds only its memory. A worker that
 * answered nothing for the idle time is stopped (closing its stdin), and so is one
 * whose job folder is gone (the model was deleted) or, when more than max_workers are
 * warm, the least recently used idle one. Workers also exit by themselves when the
 * server goes away (their stdin closes). Thread-safe; nothing here exits the process.
 */
#ifndef CDIGITS_MODEL_SERVER_H
#define CDIGITS_MODEL_SERVER_H

#include <jansson.h>

#include "cdigits/sched.h"
#include "cdigits/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct model_server model_server_t;

/* The model server a scheduler owns: made by sched_new with sched_config_t's models
 * options (the server's --model-* flags), stopped by model_server_stop or sched_free;
 * NULL once stopped (the functions below accept NULL). */
model_server_t *model_server_get(sched_t *s);
/* For sched_new: a model server of s with options o (0 fields: the defaults); NULL
 * when its timer thread cannot start. */
model_server_t *model_server_new(sched_t *s, const model_server_opts_t *o);

/* Sends `request` (a JSON object; an "id" is added) to the warm worker of the model
 * in job_dir at snapshot `iteration` (> 0), starting the worker when there is none,
 * and waits for its answer: up to wait_s for the worker and an inference slot, then up
 * to run_s for the answer. CD_OK with the worker's answer in *reply ({"ok": true, ...}
 * or {"ok": false, "error", "kind"}; caller decrefs). CD_ERR with err when no worker
 * could answer: no slot in time (CD_E_CONFLICT), the model cannot be opened (the
 * worker's message, CD_E_INVALID), the worker died or took too long (CD_E_INTERNAL). */
int model_server_call(model_server_t *m, const char *job_id, const char *job_dir, long iteration, json_t *request,
                      double wait_s, double run_s, json_t **reply, cd_err_t *err);

/* Stops the workers of a job (it was deleted); a busy one after its answer. */
void model_server_forget(model_server_t *m, const char *job_id);
/* [{job_id, iteration, pid, device, requests, idle_s, busy}] */
json_t *model_server_workers(model_server_t *m);
/* Stops every worker and the idle timer, and frees m; its scheduler has none after
 * that (for the server's stop; sched_free does it when nobody did). */
void model_server_stop(model_server_t *m);

#ifdef __cplusplus
}
#endif
#endif
