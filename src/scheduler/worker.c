/* Starting a worker process (posix_spawn, its own process group, stdout and stderr on
 * pipes) and the thread that reads its lines until it exits. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdigits/util.h"

extern char **environ;

#define MAX_LINE (4u << 20) /* longer lines are cut: no worker line is that long */

/* Adds the GPUs and the backend to train.json, which the API wrote at creation. */
static int write_train_devices(const stask_t *t, cd_err_t *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/train.json", t->dir);
    json_error_t jerr;
    json_t *cfg = json_load_file(path, 0, &jerr);
    if (!cfg)
        return cd_err_set(err, CD_E_INTERNAL, "cannot read %s: %s (line %d)", path, jerr.text, jerr.line);
    json_t *gpus = json_array();
    for (int i = 0; i < t->ngpus; i++)
        json_array_append_new(gpus, json_integer(t->gpus[i]));
    json_object_set_new(cfg, "gpus", gpus);
    json_object_set_new(cfg, "backend", json_string(t->ngpus > 0 ? "cuda" : "cpu"));
    char *text = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    if (!text)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory writing %s", path);
    int rc = cd_write_file_atomic(path, text, strlen(text));
    free(text);
    if (rc != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    return CD_OK;
}

/* The server's environment plus CUDA_DEVICE_ORDER=PCI_BUS_ID, so that the GPU numbers
 * in train.json (NVML's order) are the numbers CUDA uses. Caller frees the array only. */
static char **worker_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "CUDA_DEVICE_ORDER=", 18) != 0)
            env[k++] = environ[i];
    env[k++] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
    env[k] = NULL;
    return env;
}

static int spawn(const char *worker, const char *cmd, const char *dir, pid_t *pid, int *fd_out, int *fd_err,
                 cd_err_t *err)
{
    int out[2] = {-1, -1}, errp[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int fa_ok = 0, attr_ok = 0, rc;
    char **env = NULL;
    if (access(worker, X_OK) != 0)
        return cd_err_set(err, CD_E_INTERNAL,
                          "cannot run the worker %s: %s; build it (cmake --build build) or start the server "
                          "with --worker PATH",
                          worker, strerror(errno));
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        cd_err_set(err, CD_E_INTERNAL, "cannot create a pipe for the worker: %s", strerror(errno));
        goto fail;
    }
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0)
        goto spawn_err;
    fa_ok = 1;
    if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, out[1], 1)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, errp[1], 2)) != 0 ||
        (rc = posix_spawn_file_actions_addchdir_np(&fa, dir)) != 0)
        goto spawn_err;
    if ((rc = posix_spawnattr_init(&attr)) != 0)
        goto spawn_err;
    attr_ok = 1;
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGCHLD);
    if ((rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                  POSIX_SPAWN_SETSIGDEF)) != 0 ||
        (rc = posix_spawnattr_setpgroup(&attr, 0)) != 0 || (rc = posix_spawnattr_setsigmask(&attr, &none)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(&attr, &defaults)) != 0)
        goto spawn_err;
    env = worker_env();
    if (!env) {
        rc = ENOMEM;
        goto spawn_err;
    }
    char *argv[] = {(char *)worker, (char *)cmd, (char *)dir, NULL};
    if ((rc = posix_spawn(pid, worker, &fa, &attr, argv, env)) != 0)
        goto spawn_err;
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(out[1]);
    close(errp[1]);
    *fd_out = out[0];
    *fd_err = errp[0];
    return CD_OK;
spawn_err:
    cd_err_set(err, CD_E_INTERNAL, "cannot start the worker %s %s %s: %s", worker, cmd, dir, strerror(rc));
fail:
    free(env);
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (attr_ok)
        posix_spawnattr_destroy(&attr);
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    return CD_ERR;
}

/* A growing buffer that yields complete lines. */
typedef struct linebuf {
    char *buf;
    size_t len, cap;
    int skipping; /* inside a line longer than MAX_LINE: drop until its newline */
} linebuf_t;

/* Reads what fd has; calls lines_handle per complete line. Returns 0 at EOF or error. */
static int read_lines(sched_t *s, stask_t *t, int fd, linebuf_t *lb, int from_stderr)
{
    if (lb->cap - lb->len < 65536) {
        size_t ncap = lb->cap ? lb->cap * 2 : 131072;
        char *nb = realloc(lb->buf, ncap);
        if (!nb)
            return 0;
        lb->buf = nb;
        lb->cap = ncap;
    }
    ssize_t n;
    do {
        n = read(fd, lb->buf + lb->len, lb->cap - lb->len - 1);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (lb->len && !lb->skipping) { /* last line without a newline */
            lb->buf[lb->len] = 0;
            lines_handle(s, t, lb->buf, from_stderr);
        }
        lb->len = 0;
        return 0;
    }
    lb->len += (size_t)n;
    size_t start = 0;
    for (size_t i = lb->len - (size_t)n; i < lb->len; i++) {
        if (lb->buf[i] != '\n')
            continue;
        lb->buf[i] = 0;
        if (!lb->skipping)
            lines_handle(s, t, lb->buf + start, from_stderr);
        lb->skipping = 0;
        start = i + 1;
    }
    memmove(lb->buf, lb->buf + start, lb->len - start);
    lb->len -= start;
    if (lb->len > MAX_LINE) {
        lb->buf[lb->len] = 0;
        if (!lb->skipping)
            lines_handle(s, t, lb->buf, from_stderr);
        lb->skipping = 1;
        lb->len = 0;
    }
    return 1;
}

static void *reader_thread(void *arg)
{
    stask_t *t = arg;
    sched_t *s = t->owner;
    linebuf_t lo = {0}, le = {0};
    struct pollfd pf[2] = {{.fd = t->fd_out, .events = POLLIN}, {.fd = t->fd_err, .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        int rc = poll(pf, 2, -1);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            cd_error("job %s: poll on the worker's pipes failed: %s", t->job_id, strerror(errno));
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (!read_lines(s, t, pf[i].fd, i == 0 ? &lo : &le, i == 1)) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    free(lo.buf);
    free(le.buf);
    int status = 0;
    pid_t r;
    do {
        r = waitpid(t->pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        cd_error("job %s: waitpid(%d) failed: %s", t->job_id, (int)t->pid, strerror(errno));
        status = 0x7f00; /* reads as exited with 127 */
    }
    sched_task_exited(s, t, status);
    return NULL;
}

int worker_start(sched_t *s, stask_t *t, cd_err_t *err)
{
    int is_train = strcmp(t->type, "model") == 0;
    if (is_train && write_train_devices(t, err) != CD_OK)
        return CD_ERR;
    pid_t pid;
    if (spawn(s->cfg.worker, is_train ? "train" : "dataset", t->dir, &pid, &t->fd_out, &t->fd_err, err) != CD_OK)
        return CD_ERR;
    t->pid = pid;
    t->pid_start = proc_start_ticks(pid);
    t->kill_at = 0;
    t->abort_requested = 0;
    t->saw_done = 0;
    t->ntail = 0;
    t->last_error[0] = 0;
    t->owner = s;

    char gpus[512] = "[";
    for (int i = 0; i < t->ngpus; i++) {
        size_t n = strlen(gpus);
        snprintf(gpus + n, sizeof gpus - n, "%s%d", i ? "," : "", t->gpus[i]);
    }
    strncat(gpus, "]", sizeof gpus - strlen(gpus) - 1);
    cd_err_t e2;
    if (store_task_set_process(s->store, t->task_id, (int)pid, t->pid_start, gpus, t->attempt, &e2) != CD_OK)
        cd_warn("job %s: %s", t->job_id, e2.msg);
    char msg[256];
    if (t->ngpus > 0)
        snprintf(msg, sizeof msg, "Started worker %d on GPU%s %s", (int)pid, t->ngpus > 1 ? "s" : "", gpus);
    else
        snprintf(msg, sizeof msg, "Started worker %d on the CPU", (int)pid);
    store_log_add(s->store, t->job_id, t->task_id, "info", msg, NULL);
    sched_set_state(s, t->job_id, t->task_id, CD_ST_RUN, msg);
    cd_info("job %s: %s (attempt %d)", t->job_id, msg, t->attempt);

    int rc = pthread_create(&t->reader, NULL, reader_thread, t);
    if (rc != 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(t->fd_out);
        close(t->fd_err);
        t->pid = 0;
        return cd_err_set(err, CD_E_INTERNAL, "cannot start a thread to read the worker: %s", strerror(rc));
    }
    return CD_OK;
}
