/* Warm inference workers (see cdigits/model_server.h): one `cdigits-worker serve-model`
 * per (model, snapshot), a request at a time, under the scheduler's inference slots. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/jobdir.h"
#include "cdigits/model_server.h"
#include "cdigits/util.h"

#define MAX_REPLY ((size_t)256 << 20) /* one answer line */
#define START_S 120.0                 /* to load a model and print `ready` */
#define KILL_AFTER_S 5.0              /* from closing stdin to SIGKILL */

/* Waits on c (its clock is CLOCK_MONOTONIC) for a signal or a tenth of a second. */
static void wait_a_tenth(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(c, m, &ts);
}

typedef struct mworker {
    struct mworker *next;
    char job_id[40];
    char dir[PATH_MAX];
    long iteration;
    pid_t pid;           /* 0 until started */
    int in_fd, out_fd;
    char *buf;           /* stdout bytes not consumed yet */
    size_t len, cap;
    int busy;            /* a caller owns the pipes (starting or asking) */
    int closing;         /* stdin closed: waiting for the exit */
    int retire;          /* close once the current answer is in */
    double last_used, closed_at;
    int gpu;             /* the GPU it runs on, -1 for the CPU */
    char owner[40];      /* its name in the GPU pool */
    json_t *ready;
    unsigned long requests;
    long long next_id;
} mworker;

struct model_server {
    sched_t *sched;
    model_server_opts_t o;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a worker became free */
    mworker *workers;
    pthread_t timer;
    int stop;
};

/* ---- slots --------------------------------------------------------------------------- */

/* Waits until `deadline` (cd_now) for what req asks of the pool. */
static int take(sched_t *s, sched_req_t *req, const char *owner, double deadline, int *gpu, cd_err_t *err)
{
    int got[SCHED_MAX_GPUS], n = 0;
    char why[256];
    pthread_mutex_lock(&s->lock);
    while (pool_acquire(&s->pool, req, owner, got, &n, why, sizeof why) != CD_OK) {
        if (s->stopping || cd_now() >= deadline) {
            pthread_mutex_unlock(&s->lock);
            return cd_err_set(err, CD_E_CONFLICT, "%s; try again later or start the server with more "
                                                  "--inference-slots", why);
        }
        wait_a_tenth(&s->cond, &s->lock);
    }
    if (gpu)
        *gpu = n > 0 ? got[0] : -1;
    pthread_mutex_unlock(&s->lock);
    return CD_OK;
}

static void give(sched_t *s, const sched_req_t *req, const char *owner)
{
    pthread_mutex_lock(&s->lock);
    pool_release(&s->pool, req, owner);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* A free GPU for a new worker, taken for owner: its id, or -1 (none free: the CPU). */
static int take_free_gpu(sched_t *s, const char *owner)
{
    int gpu = -1;
    pthread_mutex_lock(&s->lock);
    if (pool_gpus_free(&s->pool) > 0 && !s->stopping) {
        sched_req_t req = {.kind = SCHED_RES_GPU, .count = 1};
        int got[SCHED_MAX_GPUS], n = 0;
        char why[256];
        if (pool_acquire(&s->pool, &req, owner, got, &n, why, sizeof why) == CD_OK && n == 1)
            gpu = got[0];
    }
    pthread_mutex_unlock(&s->lock);
    return gpu;
}

/* The worker's own GPU, if it is free now (training may have taken it meanwhile). */
static int take_gpu(sched_t *s, int gpu, const char *owner)
{
    sched_req_t req = {.kind = SCHED_RES_GPU, .nids = 1, .ids = {gpu}};
    int got[SCHED_MAX_GPUS], n = 0, ok;
    char why[256];
    pthread_mutex_lock(&s->lock);
    ok = !s->stopping && pool_acquire(&s->pool, &req, owner, got, &n, why, sizeof why) == CD_OK;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

/* ---- workers ----------------------------------------------------------------------------- */

static void close_stdin(mworker *w)
{
    if (w->in_fd >= 0)
        close(w->in_fd);
    w->in_fd = -1;
    if (!w->closing) {
        w->closing = 1;
        w->closed_at = cd_now();
    }
}

static void mw_free(mworker *w)
{
    if (w->in_fd >= 0)
        close(w->in_fd);
    if (w->out_fd >= 0)
        close(w->out_fd);
    json_decref(w->ready);
    free(w->buf);
    free(w);
}

static void unlink_worker(model_server_t *m, mworker *w)
{
    for (mworker **p = &m->workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            return;
        }
}

/* Reads one line from the worker's stdout before deadline: malloc'd, or NULL with why. */
static char *read_line(mworker *w, double deadline, cd_err_t *err)
{
    for (;;) {
        char *nl = w->buf ? memchr(w->buf, '\n', w->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - w->buf);
            char *line = malloc(n + 1);
            if (!line) {
                cd_err_set(err, CD_E_INTERNAL, "out of memory");
                return NULL;
            }
            memcpy(line, w->buf, n);
            line[n] = 0;
            memmove(w->buf, nl + 1, w->len - n - 1);
            w->len -= n + 1;
            return line;
        }
        int left = (int)((deadline - cd_now()) * 1000);
        if (left <= 0) {
            cd_err_set(err, CD_E_INTERNAL, "the inference worker did not answer in time");
            return NULL;
        }
        struct pollfd pf = {.fd = w->out_fd, .events = POLLIN};
        int r = poll(&pf, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        if (w->len + 65536 + 1 > w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 65536 * 2;
            if (cap > MAX_REPLY) {
                cd_err_set(err, CD_E_INTERNAL, "the inference worker's answer is larger than %zu MB",
                           MAX_REPLY >> 20);
                return NULL;
            }
            char *nb = realloc(w->buf, cap);
            if (!nb) {
                cd_err_set(err, CD_E_INTERNAL, "out of memory");
                return NULL;
            }
            w->buf = nb;
            w->cap = cap;
        }
        ssize_t n = read(w->out_fd, w->buf + w->len, w->cap - w->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            cd_err_set(err, CD_E_INTERNAL, "the inference worker stopped (see serve-model.log in the job folder)");
            return NULL;
        }
        w->len += (size_t)n;
    }
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return CD_ERR;
        p += w;
        n -= (size_t)w;
    }
    return CD_OK;
}

/* Starts w's process and waits for its ready line. CD_ERR with the worker's message. */
static int mw_start(model_server_t *m, mworker *w, cd_err_t *err)
{
    sched_t *s = m->sched;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, rc = CD_ERR;
    char **env = NULL;
    char iter[32], gpu[16], threads[16], idle[32], log[PATH_MAX + 32];
    snprintf(iter, sizeof iter, "%ld", w->iteration);
    snprintf(gpu, sizeof gpu, "%d", w->gpu);
    snprintf(threads, sizeof threads, "%d", m->o.threads);
    /* a backstop: the worker leaves by itself a minute after the server would stop it */
    snprintf(idle, sizeof idle, "%.0f", m->o.idle_s + 60);
    snprintf(log, sizeof log, "%s/serve-model.log", w->dir);
    const char *argv[16];
    int a = 0;
    argv[a++] = s->cfg.worker;
    argv[a++] = "serve-model";
    argv[a++] = "--model";
    argv[a++] = w->dir;
    argv[a++] = "--iteration";
    argv[a++] = iter;
    argv[a++] = "--threads";
    argv[a++] = threads;
    argv[a++] = "--idle-exit";
    argv[a++] = idle;
    if (w->gpu >= 0) {
        argv[a++] = "--gpu";
        argv[a++] = gpu;
    }
    argv[a] = NULL;
    env = spawn_worker_env();
    if (!env) {
        cd_err_set(err, CD_E_INTERNAL, "out of memory starting the inference worker of model %s", w->job_id);
        goto out;
    }
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        cd_err_set(err, CD_E_INTERNAL, "cannot create a pipe for the inference worker of model %s: %s", w->job_id,
                   strerror(errno));
        goto out;
    }
    /* its own process group: a terminal's Ctrl-C reaches the server, which stops it */
    sched_spawn_t sp = {
        .argv = (char *const *)argv,
        .env = env,
        .fd = {{SCHED_FD_PIPE, NULL, in[0]}, {SCHED_FD_PIPE, NULL, out[1]}, {SCHED_FD_APPEND, log, -1}},
        .own_group = 1,
        .what = "the inference worker",
        .hint = "build it (cmake --build build) or start the server with --worker PATH",
    };
    if (sched_spawn(&sp, &w->pid, err) != CD_OK) {
        w->pid = 0;
        goto out;
    }
    close(in[0]);
    close(out[1]);
    in[0] = out[1] = -1;
    w->in_fd = in[1];
    w->out_fd = out[0];
    in[1] = out[0] = -1;
    char *line = read_line(w, cd_now() + START_S, err);
    json_t *ready = line ? json_loads(line, 0, NULL) : NULL;
    free(line);
    const char *type = json_string_value(json_object_get(ready, "type"));
    if (type && !strcmp(type, "ready")) {
        w->ready = ready;
        cd_info("inference: model %s at iteration %ld is warm in worker %d (%s)", w->job_id, w->iteration,
                (int)w->pid, json_string_value(json_object_get(ready, "device")));
        rc = CD_OK;
    } else {
        const char *msg = json_string_value(json_object_get(ready, "message"));
        if (msg)
            cd_err_set(err, CD_E_INVALID, "%s", msg);
        else if (line)
            cd_err_set(err, CD_E_INTERNAL, "the inference worker did not start (see serve-model.log in %s)",
                       w->dir);
        json_decref(ready);
    }
out:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
    }
    free(env);
    return rc;
}

/* Ends a worker the caller owns (busy): SIGKILL and reap. */
static void mw_kill(mworker *w)
{
    if (w->pid > 0) {
        kill(-w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        w->pid = 0;
    }
}

/* ---- the idle timer ---------------------------------------------------------------------- */

static int job_present(const char *dir)
{
    char path[PATH_MAX + 16];
    jobdir_path(dir, JOBDIR_TRAIN_JSON, path, sizeof path);
    return access(path, F_OK) == 0;
}

/* Once a second: close idle and orphaned workers, reap the ones that exited. */
static void sweep(model_server_t *m)
{
    double now = cd_now();
    pthread_mutex_lock(&m->lock);
    for (mworker *w = m->workers, *next; w; w = next) {
        next = w->next;
        if (w->busy)
            continue;
        if (!w->closing && (now - w->last_used > m->o.idle_s || w->retire || !job_present(w->dir))) {
            cd_info("inference: stopping the worker of model %s (%s)", w->job_id,
                    !job_present(w->dir) ? "the model was deleted" : "idle");
            close_stdin(w);
        }
        int st;
        pid_t r = w->pid > 0 ? waitpid(w->pid, &st, WNOHANG) : w->pid;
        if (r == w->pid || (r < 0 && errno == ECHILD)) {
            unlink_worker(m, w);
            mw_free(w);
            continue;
        }
        if (w->closing && now - w->closed_at > KILL_AFTER_S)
            kill(-w->pid, SIGKILL);
    }
    pthread_mutex_unlock(&m->lock);
}

static void *timer_main(void *arg)
{
    model_server_t *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
        if (m->stop)
            break;
        pthread_mutex_unlock(&m->lock);
        sweep(m);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* ---- the public side ------------------------------------------------------------------ */

model_server_t *model_server_new(sched_t *s, const model_server_opts_t *o)
{
    model_server_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->sched = s;
    m->o.idle_s = o && o->idle_s > 0 ? o->idle_s : 300;
    m->o.max_workers = o && o->max_workers > 0 ? o->max_workers : 4;
    m->o.threads = o && o->threads > 0 ? o->threads : 0;
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&m->timer, NULL, timer_main, m) != 0) {
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
    }
    return m;
}

model_server_t *model_server_get(sched_t *s)
{
    pthread_mutex_lock(&s->lock);
    model_server_t *m = s->models;
    pthread_mutex_unlock(&s->lock);
    return m;
}

/* Makes room for one more worker by closing the least recently used idle one (lock held). */
static void make_room(model_server_t *m)
{
    int live = 0;
    mworker *lru = NULL;
    for (mworker *w = m->workers; w; w = w->next) {
        if (w->closing)
            continue;
        live++;
        if (!w->busy && (!lru || w->last_used < lru->last_used))
            lru = w;
    }
    if (live >= m->o.max_workers && lru) {
        cd_info("inference: %d workers are warm (CDIGITS_MODEL_WORKERS); stopping the one of model %s", live,
                lru->job_id);
        close_stdin(lru);
    }
}

/* Takes the worker of (job, iteration) for the caller, made when missing (pid 0). */
static mworker *acquire(model_server_t *m, const char *job_id, const char *dir, long iteration, double deadline,
                        cd_err_t *err)
{
    pthread_mutex_lock(&m->lock);
    for (;;) {
        mworker *w = m->workers;
        while (w && (w->closing || w->retire || w->iteration != iteration || strcmp(w->job_id, job_id) != 0))
            w = w->next;
        if (w && !w->busy) {
            w->busy = 1;
            pthread_mutex_unlock(&m->lock);
            return w;
        }
        if (!w) {
            make_room(m);
            w = calloc(1, sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&m->lock);
                cd_err_set(err, CD_E_INTERNAL, "out of memory");
                return NULL;
            }
            snprintf(w->job_id, sizeof w->job_id, "%s", job_id);
            snprintf(w->dir, sizeof w->dir, "%s", dir);
            w->iteration = iteration;
            w->in_fd = w->out_fd = -1;
            w->gpu = -1;
            w->busy = 1;
            w->last_used = cd_now();
            snprintf(w->owner, sizeof w->owner, "infer:%.20s:%ld", job_id, iteration % 1000000000L);
            w->next = m->workers;
            m->workers = w;
            pthread_mutex_unlock(&m->lock);
            return w;
        }
        if (m->stop || cd_now() >= deadline) {
            pthread_mutex_unlock(&m->lock);
            cd_err_set(err, CD_E_CONFLICT, "the model %s is busy answering other requests; try again later", job_id);
            return NULL;
        }
        wait_a_tenth(&m->cond, &m->lock);
    }
}

/* Gives the worker back; a dead one (pid 0) is dropped. */
static void release(model_server_t *m, mworker *w)
{
    pthread_mutex_lock(&m->lock);
    w->busy = 0;
    w->last_used = cd_now();
    if (w->pid == 0) {
        unlink_worker(m, w);
        mw_free(w);
    } else if (w->retire) {
        close_stdin(w);
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

int model_server_call(model_server_t *m, const char *job_id, const char *job_dir, long iteration, json_t *request,
                      double wait_s, double run_s, json_t **reply, cd_err_t *err)
{
    *reply = NULL;
    if (!m)
        return cd_err_set(err, CD_E_INTERNAL, "the inference service could not start (out of memory or threads)");
    double deadline = cd_now() + wait_s;
    mworker *w = acquire(m, job_id, job_dir, iteration, deadline, err);
    if (!w)
        return CD_ERR;
    sched_req_t slot = {.kind = SCHED_RES_INFER}, gpu_req = {.kind = SCHED_RES_GPU};
    int have_gpu = 0, rc = CD_ERR;
    if (take(m->sched, &slot, "inference", deadline, NULL, err) != CD_OK) {
        release(m, w);
        return CD_ERR;
    }
    if (w->pid > 0 && w->gpu >= 0) {
        have_gpu = take_gpu(m->sched, w->gpu, w->owner);
        if (!have_gpu) {
            /* training took its GPU: this worker goes, a new one starts where there is room */
            cd_info("inference: GPU %d of the worker of model %s is in use; starting another worker", w->gpu, job_id);
            close_stdin(w);
            mw_kill(w);
            if (w->out_fd >= 0)
                close(w->out_fd);
            w->out_fd = -1;
            w->closing = 0;
            w->len = 0;
            json_decref(w->ready);
            w->ready = NULL;
        }
    }
    if (w->pid == 0) {
        w->gpu = take_free_gpu(m->sched, w->owner);
        have_gpu = w->gpu >= 0;
        if (mw_start(m, w, err) != CD_OK) {
            mw_kill(w);
            goto out;
        }
    }
    json_t *req = json_copy(request);
    json_object_set_new(req, "id", json_integer(++w->next_id));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text) {
        cd_err_set(err, CD_E_INTERNAL, "cannot encode the request");
        goto out;
    }
    size_t n = strlen(text);
    text[n] = '\n';
    int wrote = write_all(w->in_fd, text, n + 1);
    free(text);
    if (wrote != CD_OK) {
        cd_err_set(err, CD_E_INTERNAL, "the inference worker stopped (see serve-model.log in the job folder)");
        mw_kill(w);
        goto out;
    }
    double until = cd_now() + run_s;
    for (;;) {
        char *line = read_line(w, until, err);
        if (!line) {
            mw_kill(w);
            goto out;
        }
        json_t *o = json_loads(line, 0, NULL);
        free(line);
        if (json_integer_value(json_object_get(o, "id")) == w->next_id) {
            *reply = o;
            break;
        }
        json_decref(o); /* a stale answer: skip it */
    }
    w->requests++;
    rc = CD_OK;
out:
    if (have_gpu)
        give(m->sched, &gpu_req, w->owner);
    give(m->sched, &slot, "inference");
    release(m, w);
    return rc;
}

void model_server_forget(model_server_t *m, const char *job_id)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    for (mworker *w = m->workers; w; w = w->next)
        if (!strcmp(w->job_id, job_id)) {
            w->retire = 1;
            if (!w->busy)
                close_stdin(w);
        }
    pthread_mutex_unlock(&m->lock);
}

json_t *model_server_workers(model_server_t *m)
{
    json_t *out = json_array();
    if (!m)
        return out;
    double now = cd_now();
    pthread_mutex_lock(&m->lock);
    for (mworker *w = m->workers; w; w = w->next)
        if (!w->closing && w->pid > 0)
            json_array_append_new(out, json_pack("{s:s, s:I, s:i, s:O, s:I, s:f, s:b}", "job_id", w->job_id,
                                                 "iteration", (json_int_t)w->iteration, "pid", (int)w->pid,
                                                 "device", json_object_get(w->ready, "device")
                                                               ? json_object_get(w->ready, "device")
                                                               : json_null(),
                                                 "requests", (json_int_t)w->requests, "idle_s",
                                                 w->busy ? 0.0 : now - w->last_used, "busy", w->busy));
    pthread_mutex_unlock(&m->lock);
    return out;
}

void model_server_stop(model_server_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->sched->lock);
    if (m->sched->models == m)
        m->sched->models = NULL; /* new calls find none from now on */
    pthread_mutex_unlock(&m->sched->lock);
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->timer, NULL);
    /* stdin closed: each worker exits; those that do not within the grace get SIGKILL.
     * A worker a request still holds is only killed: its caller drops it. */
    double until = cd_now() + KILL_AFTER_S;
    pthread_mutex_lock(&m->lock);
    for (mworker *w = m->workers; w; w = w->next)
        if (!w->busy)
            close_stdin(w);
    while (m->workers) {
        for (mworker *w = m->workers, *next; w; w = next) {
            next = w->next;
            if (w->busy) {
                if (cd_now() > until && w->pid > 0)
                    kill(-w->pid, SIGKILL);
                continue;
            }
            pid_t r = w->pid > 0 ? waitpid(w->pid, NULL, WNOHANG) : w->pid;
            if (r == w->pid || (r < 0 && errno == ECHILD)) {
                unlink_worker(m, w);
                mw_free(w);
            } else if (cd_now() > until) {
                kill(-w->pid, SIGKILL);
            }
        }
        if (m->workers) {
            pthread_mutex_unlock(&m->lock);
            usleep(20 * 1000);
            pthread_mutex_lock(&m->lock);
        }
    }
    pthread_mutex_unlock(&m->lock);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
