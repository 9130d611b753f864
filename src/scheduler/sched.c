/* The scheduling thread, the queue, abort, delete and resume. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/jobdir.h"
#include "cdigits/model_server.h"
#include "cdigits/util.h"

/* ---- small helpers ------------------------------------------------------------------ */

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

void sched_set_state(sched_t *s, const char *job_id, int64_t task_id, int st, const char *message)
{
    cd_err_t err;
    if (task_id > 0 && store_task_set_state(s->store, task_id, st, message, &err) != CD_OK)
        cd_warn("job %s: %s", job_id, err.msg);
    if (store_job_set_state(s->store, job_id, st, message, &err) != CD_OK)
        cd_warn("job %s: %s", job_id, err.msg);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "job_id", job_id, "update", "status", "status",
                           cd_state_name(st), "css", cd_state_css(st), "running", cd_state_is_running(st),
                           "message", message ? message : "");
    events_publish_job(s->events, job_id, "status", ev, 1);
    json_decref(ev);
}

void sched_publish_gpus(sched_t *s)
{
    json_t *ev = json_pack("{s:i, s:i}", "total", s->pool.ngpus, "free", pool_gpus_free(&s->pool));
    events_publish(s->events, "home", "gpus", ev);
    json_decref(ev);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc != 0 && errno != ENOENT)
        cd_warn("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

int sched_remove_dir(const char *dir, const char *job_id)
{
    const char *base = strrchr(dir, '/');
    if (!base || strcmp(base + 1, job_id) != 0 || strlen(job_id) < 8) {
        cd_warn("job %s: not removing %s: it is not that job's directory", job_id, dir);
        return CD_ERR;
    }
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
        cd_warn("job %s: removing %s failed: %s", job_id, dir, strerror(errno));
        return CD_ERR;
    }
    return CD_OK;
}

void sched_job_request(const sched_t *s, json_t *job, sched_req_t *req)
{
    memset(req, 0, sizeof *req);
    req->nodes = req->ranks_per_node = 1;
    if (strcmp(jstr(job, "type"), "dataset") == 0) {
        req->kind = SCHED_RES_DATASET;
        return;
    }
    json_t *res = json_object_get(json_object_get(job, "config"), "resources");
    const char *kind = jstr(res, "kind");
    json_int_t nodes = json_integer_value(json_object_get(res, "nodes"));
    json_int_t ranks = json_integer_value(json_object_get(res, "ranks_per_node"));
    req->nodes = nodes > 0 && nodes < 100000 ? (int)nodes : 1;
    req->ranks_per_node = ranks > 0 && ranks < 100000 ? (int)ranks : 0; /* 0: the GPUs asked for, below */
    if (strcmp(kind, "gpu") == 0 && s->pool.ngpus > 0) {
        req->kind = SCHED_RES_GPU;
        json_t *ids = json_object_get(res, "ids");
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v)
        {
            if (req->nids < SCHED_MAX_GPUS)
                req->ids[req->nids++] = (int)json_integer_value(v);
        }
        req->count = (int)json_integer_value(json_object_get(res, "count"));
        if (req->nids == 0 && req->count < 1)
            req->count = 1;
        if (req->ranks_per_node < 1)
            req->ranks_per_node = req->nids ? req->nids : req->count;
        return;
    }
    req->kind = SCHED_RES_CPU;
    if (req->ranks_per_node < 1)
        req->ranks_per_node = 1;
}

static stask_t *find_task(sched_t *s, const char *job_id)
{
    for (stask_t *t = s->tasks; t; t = t->next)
        if (strcmp(t->job_id, job_id) == 0)
            return t;
    return NULL;
}

static void unlink_task(sched_t *s, stask_t *t)
{
    for (stask_t **pp = &s->tasks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            t->next = NULL;
            return;
        }
}

static void free_task(stask_t *t)
{
    if (!t)
        return;
    json_decref(t->dataset_result);
    free(t);
}

/* ---- lifecycle ---------------------------------------------------------------------- */

int sched_new(const sched_config_t *cfg, store_t *store, cd_events_t *events, sched_t **out, cd_err_t *err)
{
    *out = NULL;
    sched_t *s = calloc(1, sizeof *s);
    if (!s)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory creating the scheduler");
    s->cfg = *cfg;
    if (s->cfg.abort_grace <= 0)
        s->cfg.abort_grace = 10;
    if (s->cfg.poll_interval <= 0)
        s->cfg.poll_interval = 0.5;
    s->store = store;
    s->events = events;
    if (s->cfg.executor == SCHED_EXEC_SLURM && slurm_init(s, err) != CD_OK) {
        free(s);
        return CD_ERR;
    }
    pool_init(&s->pool, &s->cfg);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&s->lock, NULL) != 0 || pthread_cond_init(&s->cond, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(s);
        return cd_err_set(err, CD_E_INTERNAL, "cannot create the scheduler's lock");
    }
    pthread_condattr_destroy(&ca);
    if (!(s->models = model_server_new(s, &s->cfg.models))) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return cd_err_set(err, CD_E_INTERNAL, "cannot start the inference workers' timer thread");
    }
    *out = s;
    return CD_OK;
}

static void timed_wait(sched_t *s, double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)(seconds * 1e9) + ts.tv_nsec;
    ts.tv_sec += ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

/* Joins the reader threads of exited tasks (lock held; the join itself is quick since
 * the reader has finished its work when it queues itself here). */
static void reap_finished(sched_t *s)
{
    while (s->finished) {
        stask_t *t = s->finished;
        s->finished = t->next;
        pthread_mutex_unlock(&s->lock);
        pthread_join(t->reader, NULL);
        free_task(t);
        pthread_mutex_lock(&s->lock);
    }
}

/* Fails a queued job for a reason that will not go away (lock held). */
static void fail_queued(sched_t *s, stask_t *t, const char *message)
{
    cd_err_t err;
    unlink_task(s, t);
    if (store_job_set_error(s->store, t->job_id, message, &err) != CD_OK)
        cd_warn("job %s: %s", t->job_id, err.msg);
    store_task_set_error(s->store, t->task_id, message, NULL);
    sched_set_state(s, t->job_id, t->task_id, CD_ST_ERROR, message);
    free_task(t);
}

void sched_set_wait_reason(sched_t *s, stask_t *t, const char *why)
{
    if (strcmp(t->wait_reason, why) == 0)
        return;
    snprintf(t->wait_reason, sizeof t->wait_reason, "%s", why);
    store_job_set_wait_reason(s->store, t->job_id, why, NULL);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "job_id", t->job_id, "update", "status", "status",
                           cd_state_name(CD_ST_WAIT), "css", cd_state_css(CD_ST_WAIT), "wait_reason", why,
                           "running", 1);
    events_publish_job(s->events, t->job_id, "status", ev, 1);
    json_decref(ev);
}

/* Whether a model's dataset is ready: 1 ready, 0 wait, -1 failed (t was failed). */
static int dataset_ready(sched_t *s, stask_t *t)
{
    if (!t->dataset_id[0])
        return 1;
    json_t *ds = store_job_get(s->store, t->dataset_id);
    char msg[512];
    if (!ds) {
        snprintf(msg, sizeof msg, "Dataset %s was deleted; create a new model on an existing dataset",
                 t->dataset_id);
        fail_queued(s, t, msg);
        return -1;
    }
    int st = (int)json_integer_value(json_object_get(ds, "state"));
    int rc = 1;
    if (st == CD_ST_ERROR || st == CD_ST_ABORT) {
        snprintf(msg, sizeof msg,
                 "Dataset \"%s\" (%s) ended %s, so this model cannot train; create the dataset again and clone "
                 "this model onto it",
                 jstr(ds, "name"), t->dataset_id, cd_state_name(st));
        fail_queued(s, t, msg);
        rc = -1;
    } else if (st != CD_ST_DONE) {
        snprintf(msg, sizeof msg, "Waiting for dataset \"%s\" (%s) to finish (%s)", jstr(ds, "name"),
                 t->dataset_id, cd_state_name(st));
        sched_set_wait_reason(s, t, msg);
        rc = 0;
    }
    json_decref(ds);
    return rc;
}

/* One pass over the queue: start what can start, time out aborts (lock held). */
static void schedule_pass(sched_t *s)
{
    double now = cd_now();
    for (stask_t *t = s->tasks, *next; t; t = next) {
        next = t->next;
        if (task_started(t)) {
            double quiet = now - (double)__atomic_load_n(&t->last_output_ms, __ATOMIC_RELAXED) / 1000;
            if (s->cfg.worker_timeout > 0 && quiet > s->cfg.worker_timeout && !t->hung && !t->abort_requested &&
                !t->delete_requested && !s->stopping && !t->pending) {
                cd_warn("job %s: worker %d%s%s printed nothing for %.0f s (--worker-timeout %g): stopping it as hung",
                        t->job_id, (int)t->pid, t->slurm_id[0] ? " of Slurm job " : "", t->slurm_id, quiet,
                        s->cfg.worker_timeout);
                t->hung = 1;
                t->exec->signal(s, t, SIGTERM);
                t->kill_at = now + s->cfg.abort_grace;
            }
            if (t->kill_at > 0 && now >= t->kill_at) {
                cd_warn("job %s: worker %d%s%s did not stop within %.0f s of SIGTERM; sending SIGKILL", t->job_id,
                        (int)t->pid, t->slurm_id[0] ? " of Slurm job " : "", t->slurm_id, s->cfg.abort_grace);
                t->exec->signal(s, t, SIGKILL);
                t->kill_at = 0;
            }
            continue;
        }
        if (s->stopping)
            continue;
        if (dataset_ready(s, t) <= 0)
            continue;
        char why[256];
        if (!t->exec->uses_pool) {
            /* Slurm gives the GPUs: the worker numbers the ones it sees from 0 */
            t->ngpus = t->req.kind == SCHED_RES_GPU ? (t->req.nids ? t->req.nids : t->req.count) : 0;
            for (int g = 0; g < t->ngpus; g++)
                t->gpus[g] = g;
        } else if (pool_acquire(&s->pool, &t->req, t->job_id, t->gpus, &t->ngpus, why, sizeof why) != CD_OK) {
            sched_set_wait_reason(s, t, why);
            continue;
        }
        cd_err_t err;
        if (worker_start(s, t, &err) != CD_OK) {
            if (t->exec->uses_pool)
                pool_release(&s->pool, &t->req, t->job_id);
            t->ngpus = 0;
            cd_error("job %s: %s", t->job_id, err.msg);
            fail_queued(s, t, err.msg);
            continue;
        }
        if (t->exec->uses_pool)
            t->wait_reason[0] = 0;
        if (t->req.kind == SCHED_RES_GPU && t->exec->uses_pool)
            sched_publish_gpus(s);
    }
}

static void *sched_thread(void *arg)
{
    sched_t *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->quit) {
        reap_finished(s);
        schedule_pass(s);
        timed_wait(s, s->cfg.poll_interval);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void sched_set_worker_timeout(sched_t *s, double seconds)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->cfg.worker_timeout = seconds > 0 ? seconds : 0;
    pthread_mutex_unlock(&s->lock);
}

int sched_start(sched_t *s, cd_err_t *err)
{
    int rc = pthread_create(&s->thread, NULL, sched_thread, s);
    if (rc != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot start the scheduler thread: %s", strerror(rc));
    s->thread_started = 1;
    return CD_OK;
}

void sched_stop(sched_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->stopping && !s->thread_started) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->stopping = 1;
    int running = 0;
    for (stask_t *t = s->tasks; t; t = t->next)
        if (task_started(t)) {
            cd_info("job %s: stopping worker %d%s%s (SIGTERM)", t->job_id, (int)t->pid,
                    t->slurm_id[0] ? " of Slurm job " : "", t->slurm_id);
            t->exec->signal(s, t, SIGTERM);
            running++;
        }
    double deadline = cd_now() + s->cfg.abort_grace, killed = 0;
    while (running) {
        reap_finished(s);
        running = 0;
        for (stask_t *t = s->tasks; t; t = t->next)
            running += task_started(t);
        if (!running)
            break;
        double now = cd_now();
        if (!killed && now >= deadline) {
            for (stask_t *t = s->tasks; t; t = t->next)
                if (task_started(t)) {
                    cd_warn("job %s: worker %d%s%s did not stop in time; sending SIGKILL", t->job_id, (int)t->pid,
                            t->slurm_id[0] ? " of Slurm job " : "", t->slurm_id);
                    t->exec->signal(s, t, SIGKILL);
                }
            killed = now;
        } else if (killed && now - killed > 10) {
            cd_error("scheduler: %d worker(s) did not exit after SIGKILL; leaving them", running);
            break;
        }
        timed_wait(s, 0.05);
    }
    s->quit = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
        s->thread_started = 0;
    }
    pthread_mutex_lock(&s->lock);
    reap_finished(s);
    pthread_mutex_unlock(&s->lock);
}

void sched_free(sched_t *s)
{
    if (!s)
        return;
    sched_stop(s);
    model_server_stop(model_server_get(s));
    for (stask_t *t = s->tasks, *next; t; t = next) {
        next = t->next;
        free_task(t);
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* t at the end of the running tasks (the lock held). */
static void append_task(sched_t *s, stask_t *t)
{
    stask_t **pp = &s->tasks;
    while (*pp)
        pp = &(*pp)->next;
    *pp = t;
}

/* ---- queue operations ------------------------------------------------------------- */

int sched_enqueue(sched_t *s, const char *job_id, cd_err_t *err)
{
    json_t *job = store_job_get(s->store, job_id);
    if (!job)
        return cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", job_id);
    json_t *tasks = store_task_list(s->store, job_id);
    json_t *task = json_array_get(tasks, 0);
    stask_t *t = NULL;
    if (!task) {
        cd_err_set(err, CD_E_INTERNAL, "job %s has no task to run", job_id);
        goto err;
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        cd_err_set(err, CD_E_INTERNAL, "out of memory queueing job %s", job_id);
        goto err;
    }
    snprintf(t->job_id, sizeof t->job_id, "%s", job_id);
    snprintf(t->type, sizeof t->type, "%s", jstr(job, "type"));
    snprintf(t->dataset_id, sizeof t->dataset_id, "%s", jstr(job, "dataset_id"));
    snprintf(t->dir, sizeof t->dir, "%s", jstr(job, "dir"));
    t->task_id = json_integer_value(json_object_get(task, "id"));
    t->attempt = (int)json_integer_value(json_object_get(task, "attempt")) + 1;
    t->exec = s->cfg.executor == SCHED_EXEC_SLURM ? &sched_exec_slurm : &sched_exec_local;
    /* Decided from what is on disk, not remembered from sched_resume: a resume queued
     * when the server stopped is queued again at start with only the store and the job
     * folder to go on. A first attempt starts fresh; a later one continues from the
     * newest complete snapshot, the one sched_resume announced, when there is one. */
    jobdir_snapshot snap;
    t->resume = strcmp(t->type, "model") == 0 && t->attempt > 1 &&
                jobdir_snapshot_newest(t->dir, JOBDIR_NEED_STATE, &snap);

    pthread_mutex_lock(&s->lock);
    sched_job_request(s, job, &t->req);
    char why[256];
    if (find_task(s, job_id)) {
        pthread_mutex_unlock(&s->lock);
        cd_err_set(err, CD_E_CONFLICT, "Job %s is already queued or running", job_id);
        goto err;
    }
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        cd_err_set(err, CD_E_CONFLICT, "The server is stopping; try again after it restarts");
        goto err;
    }
    if (t->exec->uses_pool && pool_check(&s->pool, &t->req, why, sizeof why) != CD_OK) {
        pthread_mutex_unlock(&s->lock);
        cd_err_set(err, CD_E_INVALID, "%s", why);
        goto err;
    }
    append_task(s, t);
    /* a Slurm job of an earlier attempt is not this one's: a restart must not follow it */
    store_task_set_slurm(s->store, t->task_id, NULL, NULL, NULL);
    sched_set_state(s, job_id, t->task_id, CD_ST_WAIT, NULL);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    json_decref(tasks);
    json_decref(job);
    return CD_OK;
err:
    free(t);
    json_decref(tasks);
    json_decref(job);
    return CD_ERR;
}

int sched_abort(sched_t *s, const char *job_id, cd_err_t *err)
{
    pthread_mutex_lock(&s->lock);
    stask_t *t = find_task(s, job_id);
    if (!t) {
        pthread_mutex_unlock(&s->lock);
        json_t *job = store_job_get(s->store, job_id);
        if (!job)
            return cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", job_id);
        int st = (int)json_integer_value(json_object_get(job, "state"));
        json_decref(job);
        return cd_err_set(err, CD_E_FORBIDDEN, "Job not aborted: it is %s, not running or waiting",
                          cd_state_name(st));
    }
    if (task_started(t)) {
        if (!t->abort_requested) {
            t->abort_requested = 1;
            t->kill_at = cd_now() + s->cfg.abort_grace;
            cd_info("job %s: aborting worker %d%s%s (SIGTERM, SIGKILL in %.0f s)", job_id, (int)t->pid,
                    t->slurm_id[0] ? " of Slurm job " : "", t->slurm_id, s->cfg.abort_grace);
            t->exec->signal(s, t, SIGTERM);
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        return CD_OK;
    }
    unlink_task(s, t);
    sched_set_state(s, job_id, t->task_id, CD_ST_ABORT, "Aborted before it started");
    pthread_mutex_unlock(&s->lock);
    free_task(t);
    return CD_OK;
}

int sched_delete(sched_t *s, const char *job_id, cd_err_t *err)
{
    json_t *job = store_job_get(s->store, job_id);
    if (!job)
        return cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", job_id);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", jstr(job, "dir"));
    json_decref(job);

    pthread_mutex_lock(&s->lock);
    /* refuse first (a dataset in use), before stopping anything */
    json_t *users = store_job_models_using(s->store, job_id);
    size_t nusers = json_array_size(users);
    json_decref(users);
    if (nusers) {
        pthread_mutex_unlock(&s->lock);
        return store_job_delete(s->store, job_id, err); /* fails with the message */
    }
    stask_t *t = find_task(s, job_id);
    int running = t && task_started(t);
    if (running) {
        t->delete_requested = 1;
        t->exec->signal(s, t, SIGKILL);
    } else if (t) {
        unlink_task(s, t);
        free_task(t);
        t = NULL;
    }
    if (store_job_delete(s->store, job_id, err) != CD_OK) {
        pthread_mutex_unlock(&s->lock);
        return CD_ERR;
    }
    pthread_mutex_unlock(&s->lock);
    model_server_forget(model_server_get(s), job_id); /* its warm inference workers go too */
    if (!running)
        sched_remove_dir(dir, job_id);
    json_t *ev = json_pack("{s:s, s:s}", "job_id", job_id, "update", "deleted");
    events_publish_job(s->events, job_id, "job_removed", ev, 1);
    json_decref(ev);
    return CD_OK;
}

int sched_has_job(sched_t *s, const char *job_id)
{
    pthread_mutex_lock(&s->lock);
    int has = find_task(s, job_id) != NULL;
    pthread_mutex_unlock(&s->lock);
    return has;
}

/* ---- resume -------------------------------------------------------------------------- */

/* Records the snapshots found on disk that the store does not know (a worker that was
 * cut off after writing a snapshot but before its line was read). */
static void reconcile_snapshots(sched_t *s, const char *job_id, const char *dir)
{
    jobdir_snapshot found[1024];
    int n = jobdir_snapshots(dir, JOBDIR_NEED_STATE, found, 1024);
    if (n == 0)
        return;
    json_t *known = store_snapshot_list(s->store, job_id);
    double ipe = store_metric_iters_per_epoch(s->store, job_id);
    for (int k = 0; k < n; k++) {
        int have = 0;
        size_t i;
        json_t *r;
        json_array_foreach(known, i, r) have |= strcmp(jstr(r, "file"), found[k].file) == 0;
        if (have)
            continue;
        double epoch = found[k].by_iteration ? (ipe > 0 ? (double)found[k].number / ipe : 0) : (double)found[k].number;
        epoch = round(epoch * 1e6) / 1e6; /* ipe comes from printed epochs: keep its noise out */
        store_snapshot_add(s->store, job_id, epoch, found[k].by_iteration ? found[k].number : 0, found[k].file, NULL);
        cd_info("job %s: recorded %s found on disk", job_id, found[k].file);
    }
    json_decref(known);
}

int sched_resume(sched_t *s, const char *job_id, double *epoch_out, cd_err_t *err)
{
    json_t *job = store_job_get(s->store, job_id);
    if (!job)
        return cd_err_set(err, CD_E_NOTFOUND, "Job not found: %s", job_id);
    int rc = CD_ERR;
    json_t *tasks = NULL;
    int st = (int)json_integer_value(json_object_get(job, "state"));
    if (strcmp(jstr(job, "type"), "model") != 0) {
        cd_err_set(err, CD_E_INVALID, "Job %s is a dataset; only training jobs can be resumed", job_id);
        goto out;
    }
    if (cd_state_is_running(st) || sched_has_job(s, job_id)) {
        cd_err_set(err, CD_E_CONFLICT, "Job %s is %s; only a stopped job can be resumed", job_id,
                   cd_state_name(st));
        goto out;
    }
    if (st == CD_ST_DONE) {
        cd_err_set(err, CD_E_CONFLICT, "Job %s is Done: there is nothing to resume; clone it to train again",
                   job_id);
        goto out;
    }
    const char *dir = jstr(job, "dir");
    reconcile_snapshots(s, job_id, dir);
    jobdir_snapshot snap;
    int have = jobdir_snapshot_newest(dir, JOBDIR_NEED_STATE, &snap);
    double epoch = 0;
    long long iteration = 0;
    if (have) {
        json_t *known = store_snapshot_list(s->store, job_id);
        size_t i;
        json_t *r;
        json_array_foreach(known, i, r) if (strcmp(jstr(r, "file"), snap.file) == 0)
        {
            epoch = json_number_value(json_object_get(r, "epoch"));
            iteration = json_integer_value(json_object_get(r, "iteration"));
        }
        json_decref(known);
        if (snap.by_iteration)
            iteration = snap.number;
        else
            epoch = (double)snap.number;
    }
    tasks = store_task_list(s->store, job_id);
    int next_attempt = (int)json_integer_value(json_object_get(json_array_get(tasks, 0), "attempt")) + 1;
    if (store_metric_supersede(s->store, job_id, epoch, have && iteration > 0 ? iteration : (have ? -1 : 0),
                               next_attempt, err) != CD_OK)
        goto out;
    char msg[200];
    if (have)
        snprintf(msg, sizeof msg, "Resuming from %s (epoch %g)", snap.file, epoch);
    else
        snprintf(msg, sizeof msg, "Restarting from the beginning: no complete snapshot was found");
    store_log_add(s->store, job_id, 0, "info", msg, NULL);
    if (sched_enqueue(s, job_id, err) != CD_OK)
        goto out;
    json_t *ev = json_pack("{s:s, s:f}", "message", msg, "epoch", epoch);
    events_publish_job(s->events, job_id, "resumed", ev, 0);
    json_decref(ev);
    if (epoch_out)
        *epoch_out = epoch;
    rc = CD_OK;
out:
    json_decref(tasks);
    json_decref(job);
    return rc;
}

/* ---- recovery ------------------------------------------------------------------------ */

static void finish_done(sched_t *s, stask_t *t);

/* Whether pid is still the worker the store recorded for a task in dir: the same start
 * time (a reused pid is someone else's process), the worker program, working in the
 * job's folder. */
static int worker_alive(const sched_t *s, pid_t pid, long long pid_start, const char *dir)
{
    return pid > 0 && proc_start_ticks(pid) == pid_start && pid_start >= 0 && proc_runs(pid, s->cfg.worker) &&
           proc_cwd_is(pid, dir);
}

/* Stops a worker left by a server that died, which cannot be followed again: only if
 * the pid still runs that worker. */
static void stop_orphan(sched_t *s, const char *job_id, const char *dir, pid_t pid, long long pid_start)
{
    if (!worker_alive(s, pid, pid_start, dir)) {
        if (pid > 0)
            cd_info("job %s: its worker %d is gone", job_id, (int)pid);
        return;
    }
    long long start = pid_start;
    cd_warn("job %s: stopping leftover worker %d (SIGTERM)", job_id, (int)pid);
    kill(-pid, SIGTERM);
    kill(pid, SIGTERM);
    double deadline = cd_now() + s->cfg.abort_grace;
    while (cd_now() < deadline && proc_start_ticks(pid) == start)
        usleep(50 * 1000);
    if (proc_start_ticks(pid) == start) {
        cd_warn("job %s: leftover worker %d ignored SIGTERM; sending SIGKILL", job_id, (int)pid);
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        for (int i = 0; i < 100 && proc_start_ticks(pid) == start; i++)
            usleep(20 * 1000);
    }
}

/* A task found again after a restart: what the store says of its job and task, run by
 * exec, asking what its job asks; NULL (err set) when memory runs out. */
static stask_t *adopted_task(sched_t *s, json_t *job, json_t *task, const sched_executor_t *exec, cd_err_t *err)
{
    stask_t *t = calloc(1, sizeof *t);
    if (!t) {
        cd_err_set(err, CD_E_INTERNAL, "out of memory");
        return NULL;
    }
    snprintf(t->job_id, sizeof t->job_id, "%s", jstr(job, "id"));
    snprintf(t->type, sizeof t->type, "%s", jstr(job, "type"));
    snprintf(t->dataset_id, sizeof t->dataset_id, "%s", jstr(job, "dataset_id"));
    snprintf(t->dir, sizeof t->dir, "%s", jstr(job, "dir"));
    t->task_id = json_integer_value(json_object_get(task, "id"));
    t->attempt = (int)json_integer_value(json_object_get(task, "attempt"));
    t->out_offset = json_integer_value(json_object_get(task, "out_offset"));
    t->exec = exec;
    sched_job_request(s, job, &t->req);
    return t;
}

/* Follows again the live worker of a running task (recovery, before the scheduling
 * thread starts): it holds the GPUs it runs on, or its slot, in the pools, and the job
 * stays Running. CD_ERR with why when it cannot be followed (the pools of this server
 * cannot hold what it uses, its output cannot be read): the caller stops it then. */
static int adopt_worker(sched_t *s, json_t *job, json_t *task, cd_err_t *err)
{
    stask_t *t = adopted_task(s, job, task, &sched_exec_local, err);
    if (!t)
        return CD_ERR;
    t->pid = (pid_t)json_integer_value(json_object_get(task, "pid"));
    t->pid_start = json_integer_value(json_object_get(task, "pid_start"));
    json_t *gpus = json_object_get(task, "gpus");
    if (json_array_size(gpus) > 0) {
        if (t->req.kind != SCHED_RES_GPU) {
            free(t);
            return cd_err_set(err, CD_E_CONFLICT, "it runs on GPUs that this server does not schedule (--gpus)");
        }
        /* the GPUs it runs on, whatever the job asked */
        t->req.nids = 0;
        t->req.count = 0;
        size_t i;
        json_t *v;
        json_array_foreach(gpus, i, v)
        {
            if (t->req.nids < SCHED_MAX_GPUS)
                t->req.ids[t->req.nids++] = (int)json_integer_value(v);
        }
    } else if (t->req.kind == SCHED_RES_GPU) {
        free(t);
        return cd_err_set(err, CD_E_CONFLICT, "it runs on the CPU but its job asks for GPUs here");
    }
    pthread_mutex_lock(&s->lock);
    char why[256];
    if (pool_acquire(&s->pool, &t->req, t->job_id, t->gpus, &t->ngpus, why, sizeof why) != CD_OK) {
        pthread_mutex_unlock(&s->lock);
        free(t);
        return cd_err_set(err, CD_E_CONFLICT, "this server's pools cannot hold what it uses: %s", why);
    }
    if (worker_adopt(s, t, err) != CD_OK) {
        pool_release(&s->pool, &t->req, t->job_id);
        pthread_mutex_unlock(&s->lock);
        free(t);
        return CD_ERR;
    }
    append_task(s, t);
    if (t->req.kind == SCHED_RES_GPU)
        sched_publish_gpus(s);
    pthread_mutex_unlock(&s->lock);
    return CD_OK;
}

/* Follows again a task Slurm runs or holds (recovery, before the scheduling thread
 * starts): the Slurm job id the store recorded, its output from the stored offset. The
 * job stays Waiting or Running as it was. CD_ERR with why when the Slurm programs are
 * not there. */
static int adopt_slurm(sched_t *s, json_t *job, json_t *task, cd_err_t *err)
{
    if (!s->slurm_tool[0][0] && slurm_init(s, err) != CD_OK)
        return CD_ERR;
    stask_t *t = adopted_task(s, job, task, &sched_exec_slurm, err);
    if (!t)
        return CD_ERR;
    snprintf(t->slurm_id, sizeof t->slurm_id, "%s", jstr(task, "slurm_job_id"));
    snprintf(t->nodes, sizeof t->nodes, "%s", jstr(task, "nodes"));
    t->pending = json_integer_value(json_object_get(task, "state")) == CD_ST_WAIT;
    snprintf(t->slurm_state, sizeof t->slurm_state, "%s", t->pending ? "PENDING" : "RUNNING");
    pthread_mutex_lock(&s->lock);
    if (worker_adopt(s, t, err) != CD_OK) {
        pthread_mutex_unlock(&s->lock);
        free(t);
        return CD_ERR;
    }
    append_task(s, t);
    pthread_mutex_unlock(&s->lock);
    return CD_OK;
}

/* Tasks submitted to Slurm that were waiting or running when the server stopped: they
 * are followed again, or, when they cannot be, marked interrupted with what to do. */
static void recover_slurm(sched_t *s)
{
    json_t *tasks = store_task_list_by_state(s->store, (1u << CD_ST_RUN) | (1u << CD_ST_WAIT));
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t)
    {
        const char *job_id = jstr(t, "job_id"), *slurm_id = jstr(t, "slurm_job_id");
        if (!slurm_id[0])
            continue;
        json_t *job = store_job_get(s->store, job_id);
        cd_err_t why;
        if (job && adopt_slurm(s, job, t, &why) != CD_OK) {
            int64_t task_id = json_integer_value(json_object_get(t, "id"));
            char msg[1024];
            snprintf(msg, sizeof msg,
                     "Interrupted: this job was submitted to Slurm as job %s, which this server cannot follow (%s); "
                     "scancel %s if it still runs, then resume it with POST /models/<id>/resume",
                     slurm_id, why.msg, slurm_id);
            store_task_set_error(s->store, task_id, "Interrupted", NULL);
            sched_set_state(s, job_id, task_id, CD_ST_ABORT, msg);
            store_job_set_interrupted(s->store, job_id, 1, NULL);
            store_log_add(s->store, job_id, task_id, "warning", msg, NULL);
            cd_warn("job %s: %s", job_id, msg);
        }
        json_decref(job);
    }
    json_decref(tasks);
}

int sched_recover(sched_t *s, int resume_interrupted, cd_err_t *err)
{
    (void)err;
    recover_slurm(s);
    json_t *running = store_task_list_by_state(s->store, 1u << CD_ST_RUN);
    size_t i;
    json_t *t;
    json_array_foreach(running, i, t)
    {
        if (jstr(t, "slurm_job_id")[0])
            continue; /* recover_slurm's */
        const char *job_id = jstr(t, "job_id");
        int64_t task_id = json_integer_value(json_object_get(t, "id"));
        json_t *job = store_job_get(s->store, job_id);
        stask_t *st = calloc(1, sizeof *st);
        if (!job || !st) {
            json_decref(job);
            free(st);
            continue;
        }
        pid_t pid = (pid_t)json_integer_value(json_object_get(t, "pid"));
        long long pid_start = json_integer_value(json_object_get(t, "pid_start"));
        if (worker_alive(s, pid, pid_start, jstr(job, "dir"))) {
            cd_err_t why;
            if (adopt_worker(s, job, t, &why) == CD_OK) {
                free(st);
                json_decref(job);
                continue;
            }
            cd_warn("job %s: cannot follow its worker %d again: %s; stopping it", job_id, (int)pid, why.msg);
        }
        /* stop the orphan first: it writes its last lines (and a snapshot) on SIGTERM */
        stop_orphan(s, job_id, jstr(job, "dir"), pid, pid_start);
        st->owner = s;
        snprintf(st->job_id, sizeof st->job_id, "%s", job_id);
        snprintf(st->type, sizeof st->type, "%s", jstr(job, "type"));
        snprintf(st->dir, sizeof st->dir, "%s", jstr(job, "dir"));
        st->task_id = task_id;
        st->attempt = (int)json_integer_value(json_object_get(t, "attempt"));
        st->out_offset = json_integer_value(json_object_get(t, "out_offset"));
        worker_replay(s, st);
        store_task_clear_process(s->store, task_id, -1, NULL);
        reconcile_snapshots(s, job_id, st->dir);
        if (st->saw_done) {
            cd_info("job %s: its worker finished while the server was down", job_id);
            finish_done(s, st);
        } else if (st->last_error[0]) {
            store_job_set_error(s->store, job_id, st->last_error, NULL);
            store_task_set_error(s->store, task_id, st->last_error, NULL);
            sched_set_state(s, job_id, task_id, CD_ST_ERROR, st->last_error);
        } else {
            const char *msg = strcmp(st->type, "model") == 0
                                  ? "Interrupted: the server stopped while this job ran; every metric and snapshot "
                                    "is kept; resume it with POST /models/<id>/resume"
                                  : "Interrupted: the server stopped while this job ran; clone it to create the "
                                    "dataset again";
            store_task_set_error(s->store, task_id, "Interrupted", NULL);
            sched_set_state(s, job_id, task_id, CD_ST_ABORT, msg);
            store_job_set_interrupted(s->store, job_id, 1, NULL);
            store_log_add(s->store, job_id, task_id, "warning", msg, NULL);
            cd_warn("job %s: interrupted by a server stop", job_id);
        }
        free_task(st);
        json_decref(job);
    }
    json_decref(running);

    json_t *waiting = store_task_list_by_state(s->store, (1u << CD_ST_WAIT) | (1u << CD_ST_INIT));
    json_array_foreach(waiting, i, t)
    {
        if (jstr(t, "slurm_job_id")[0])
            continue; /* followed in Slurm again (recover_slurm) */
        cd_err_t e;
        if (sched_enqueue(s, jstr(t, "job_id"), &e) != CD_OK)
            cd_warn("job %s: cannot queue it again: %s", jstr(t, "job_id"), e.msg);
    }
    json_decref(waiting);

    if (!resume_interrupted)
        return CD_OK;
    json_t *jobs = store_job_list(s->store, NULL);
    json_t *j;
    /* oldest first, so they queue in the order they were submitted */
    for (i = json_array_size(jobs); i-- > 0;) {
        j = json_array_get(jobs, i);
        if (!json_is_true(json_object_get(j, "interrupted")))
            continue;
        const char *id = jstr(j, "id");
        cd_err_t e;
        double epoch = 0;
        if (strcmp(jstr(j, "type"), "model") == 0) {
            if (sched_resume(s, id, &epoch, &e) != CD_OK)
                cd_warn("job %s: cannot resume it: %s", id, e.msg);
            else
                cd_info("job %s: resuming from epoch %g", id, epoch);
        } else if (sched_enqueue(s, id, &e) != CD_OK) {
            cd_warn("job %s: cannot start it again: %s", id, e.msg);
        }
    }
    json_decref(jobs);
    return CD_OK;
}

/* ---- views of the pools --------------------------------------------------------------- */

json_t *sched_resources(sched_t *s)
{
    pthread_mutex_lock(&s->lock);
    json_t *busy = json_array();
    for (int k = 0; k < s->pool.ngpus; k++)
        if (s->pool.gpu_owner[k][0])
            json_array_append_new(busy, json_pack("{s:i, s:s}", "index", s->pool.gpu_id[k], "job_id",
                                                  s->pool.gpu_owner[k]));
    int queued = 0, running = 0;
    for (stask_t *t = s->tasks; t; t = t->next) {
        if (task_started(t))
            running++;
        else
            queued++;
    }
    json_t *out = json_pack(
        "{s:{s:i, s:i, s:o}, s:{s:i, s:i}, s:{s:i, s:i}, s:{s:i, s:i}, s:i, s:i}", "gpus", "total",
        s->pool.ngpus, "free", pool_gpus_free(&s->pool), "busy", busy, "cpu_slots", "total",
        s->pool.slots[SCHED_RES_CPU], "used", s->pool.used[SCHED_RES_CPU], "dataset_slots", "total",
        s->pool.slots[SCHED_RES_DATASET], "used", s->pool.used[SCHED_RES_DATASET], "inference_slots", "total",
        s->pool.slots[SCHED_RES_INFER], "used", s->pool.used[SCHED_RES_INFER], "queued", queued, "running",
        running);
    pthread_mutex_unlock(&s->lock);
    return out;
}

int sched_running(sched_t *s, sched_proc_t *out, int max)
{
    int n = 0;
    pthread_mutex_lock(&s->lock);
    for (stask_t *t = s->tasks; t && n < max; t = t->next) {
        if (t->pid <= 0)
            continue;
        snprintf(out[n].job_id, sizeof out[n].job_id, "%s", t->job_id);
        out[n].task_id = t->task_id;
        out[n].pid = t->pid;
        out[n].ngpus = t->ngpus;
        memcpy(out[n].gpus, t->gpus, sizeof t->gpus);
        n++;
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ---- a worker has exited --------------------------------------------------------------- */

static const char *signal_name(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},   {SIGXFSZ, "SIGXFSZ"},
                 {SIGXCPU, "SIGXCPU"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGPIPE, "SIGPIPE"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return "signal";
}

static void describe_exit(int status, char *out, size_t len)
{
    if (WIFEXITED(status))
        snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "was killed by signal %d (%s: %s)", WTERMSIG(status), signal_name(WTERMSIG(status)),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "stopped (wait status %d)", status);
}

/* Why a worker that nobody asked to stop died, when its exit says more than its lines:
 * a SIGKILL from outside (the kernel's out-of-memory killer, as a rule), a file size
 * limit, a full disk. Empty when there is nothing to add. */
static void failure_cause(const stask_t *t, int status, char *out, size_t len)
{
    out[0] = 0;
    int model = strcmp(t->type, "model") == 0;
    const char *again = model ? "resume the job (POST /models/<id>/resume)" : "clone the job";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        long long now = worker_oom_kills();
        if (t->oom_kills >= 0 && now > t->oom_kills)
            snprintf(out, len,
                     "The worker was killed by signal 9 (SIGKILL) from the kernel's out-of-memory killer, which "
                     "killed a process while it ran (/proc/vmstat oom_kill went from %lld to %lld): it needed "
                     "more memory than the machine had. Lower the batch size (or use batch_size=auto) and %s.",
                     t->oom_kills, now, again);
        else
            snprintf(out, len,
                     "The worker was killed by signal 9 (SIGKILL), which cdigits did not send: most likely the "
                     "kernel's out-of-memory killer (see dmesg or journalctl -k for \"Out of memory\"). If so, "
                     "lower the batch size (or use batch_size=auto) and %s.",
                     again);
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
        snprintf(out, len,
                 "The worker was killed by signal %d (SIGXFSZ): a file it wrote passed the file size limit "
                 "(ulimit -f) of the server's environment; raise the limit and %s.",
                 SIGXFSZ, again);
    } else if (WIFSIGNALED(status)) {
        return;
    }
    struct statvfs vfs;
    if (statvfs(t->dir, &vfs) == 0) {
        unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
        if (avail < (1ull << 20)) {
            size_t n = strlen(out);
            snprintf(out + n, len - n, "%sThe disk that holds %s is full (%llu KiB free): free space and %s.",
                     n ? " " : "", t->dir, avail >> 10, again);
        }
    }
}

/* A task that finished its work (lock not held). */
static void finish_done(sched_t *s, stask_t *t)
{
    if (!t->dataset_result && strcmp(t->type, "dataset") == 0) {
        /* its dataset line was stored before a restart: the reader that ends it never saw it */
        json_t *job = store_job_get(s->store, t->job_id);
        json_t *result = json_object_get(job, "result");
        if (json_is_object(result))
            t->dataset_result = json_deep_copy(result);
        json_decref(job);
    }
    if (t->dataset_result) {
        /* stats.json is written last by a dataset worker; keep it with the line */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/stats.json", t->dir);
        json_t *stats = json_load_file(path, 0, NULL);
        if (stats)
            json_object_set_new(t->dataset_result, "stats", stats);
        store_job_set_result(s->store, t->job_id, t->dataset_result, NULL);
    }
    store_task_set_progress(s->store, t->task_id, 1.0, NULL, NULL);
    store_job_set_progress(s->store, t->job_id, 1.0, NULL);
    sched_set_state(s, t->job_id, t->task_id, CD_ST_DONE, NULL);
}

/* Ends a job whose worker failed in Error with msg (lock not held). */
static void fail_exited(sched_t *s, stask_t *t, const char *msg)
{
    cd_err_t err;
    if (store_job_set_error(s->store, t->job_id, msg, &err) != CD_OK)
        cd_warn("job %s: %s", t->job_id, err.msg);
    store_task_set_error(s->store, t->task_id, msg, NULL);
    /* the worker's own error line is in the log already (lines.c on_error) */
    if (strcmp(msg, t->last_error) != 0)
        store_log_add(s->store, t->job_id, t->task_id, "error", msg, NULL);
    sched_set_state(s, t->job_id, t->task_id, CD_ST_ERROR, msg);
}

/* Ends a job that Slurm stopped by itself (a time limit, a node failure, scancel from
 * outside): Aborted or Error with Slurm's reason as its error text, and the resume that
 * its snapshots allow (lock not held). */
static void slurm_ended(sched_t *s, stask_t *t, const char *how)
{
    int model = strcmp(t->type, "model") == 0;
    char last[1536], msg[2560];
    lines_failure_message(t, how, last, sizeof last);
    snprintf(msg, sizeof msg, "%s %s%s", t->slurm_end,
             model ? "Every metric and snapshot is kept; resume it with POST /models/<id>/resume. "
                   : "Clone the job to create the dataset again. ",
             t->slurm_aborts ? "" : last);
    if (!t->slurm_aborts) {
        fail_exited(s, t, msg);
        return;
    }
    store_job_set_error(s->store, t->job_id, msg, NULL);
    store_task_set_error(s->store, t->task_id, msg, NULL);
    store_log_add(s->store, t->job_id, t->task_id, "warning", msg, NULL);
    sched_set_state(s, t->job_id, t->task_id, CD_ST_ABORT, msg);
}

void sched_task_exited(sched_t *s, stask_t *t, int status)
{
    pthread_mutex_lock(&s->lock);
    int aborted = t->abort_requested, deleted = t->delete_requested, stopping = s->stopping, hung = t->hung;
    double timeout = s->cfg.worker_timeout;
    pthread_mutex_unlock(&s->lock);

    /* An adopted worker is not our child and leaves no wait status: its last lines tell
     * how it ended (done: 0, an error line: 1), and one that printed neither ended as a
     * stop does, or was killed, for all the server can tell (-1: unknown). */
    int known = !t->adopted;
    int code = known ? (WIFEXITED(status) ? WEXITSTATUS(status) : -1) : t->saw_done ? 0 : t->last_error[0] ? 1 : -1;
    int signaled = known && WIFSIGNALED(status);
    int stopped = code == 3 || signaled || (!known && code < 0);
    char how[128], msg[2048];
    if (known)
        describe_exit(status, how, sizeof how);
    else
        snprintf(how, sizeof how, "%s (it was started before the server restarted, so its exit status is unknown)",
                 code == 0 ? "ended after its done line" : code == 1 ? "ended after an error line"
                                                                      : "ended without a done or error line");
    cd_info("job %s: worker %d %s", t->job_id, (int)t->pid, how);

    if (!deleted) {
        store_task_clear_process(s->store, t->task_id, !known || WIFEXITED(status) ? code : -WTERMSIG(status), NULL);
        if (code == 0) {
            finish_done(s, t);
        } else if (stopping && stopped) {
            const char *m = "Interrupted: the server stopped; resume it with POST /models/<id>/resume";
            sched_set_state(s, t->job_id, t->task_id, CD_ST_ABORT, m);
            store_job_set_interrupted(s->store, t->job_id, 1, NULL);
        } else if (hung) {
            char last[1536];
            lines_failure_message(t, how, last, sizeof last);
            snprintf(msg, sizeof msg,
                     "The worker hung: it printed nothing for %g seconds (--worker-timeout), so cdigits stopped it "
                     "(it then %s). %s%s",
                     timeout, how, strcmp(t->type, "model") == 0 ? "Resume it with POST /models/<id>/resume once "
                                                                   "the cause is found. "
                                                                 : "",
                     last);
            fail_exited(s, t, msg);
        } else if (aborted && stopped) {
            sched_set_state(s, t->job_id, t->task_id, CD_ST_ABORT, "Aborted");
        } else if (t->slurm_end[0]) {
            slurm_ended(s, t, how);
        } else if (code == 3) {
            sched_set_state(s, t->job_id, t->task_id, CD_ST_ABORT,
                            "Stopped by SIGTERM after saving its state; resume it with POST /models/<id>/resume");
        } else {
            char cause[768] = "", last[1536];
            if (known)
                failure_cause(t, status, cause, sizeof cause);
            lines_failure_message(t, how, last, sizeof last);
            snprintf(msg, sizeof msg, "%s%s%s", cause, cause[0] ? " " : "", last);
            fail_exited(s, t, msg);
        }
    } else {
        sched_remove_dir(t->dir, t->job_id);
    }

    pthread_mutex_lock(&s->lock);
    if (t->exec->uses_pool)
        pool_release(&s->pool, &t->req, t->job_id);
    int was_gpu = t->req.kind == SCHED_RES_GPU && t->exec->uses_pool;
    unlink_task(s, t);
    t->pid = 0;
    t->slurm_id[0] = 0;
    t->next = s->finished;
    s->finished = t;
    if (was_gpu)
        sched_publish_gpus(s);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}
