/* The local executor: a task's worker is a child process of the server on this machine
 * (sched_spawn: its own process group, stdout and stderr appended to the job's files),
 * followed by waitpid (or /proc and a pidfd once adopted after a restart) and stopped by
 * signals to its process group. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdigits/util.h"

/* Starts the worker with argv in t->dir, with stdin from /dev/null and stdout and
 * stderr appended to the job's output files; records it and sets the job Running. */
static int local_submit(sched_t *s, stask_t *t, char *const *argv, cd_err_t *err)
{
    char out[PATH_MAX], errf[PATH_MAX];
    jobdir_path(t->dir, JOBDIR_WORKER_OUT, out, sizeof out);
    jobdir_path(t->dir, JOBDIR_WORKER_ERR, errf, sizeof errf);
    char **env = spawn_worker_env();
    if (!env)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory starting the worker for %s", t->dir);
    sched_spawn_t sp = {
        .argv = argv,
        .dir = t->dir,
        .env = env,
        .fd = {{SCHED_FD_NULL}, {SCHED_FD_APPEND, out, -1}, {SCHED_FD_APPEND, errf, -1}},
        .own_group = 1,
        .what = "the worker",
        .hint = "build it (cmake --build build) or start the server with --worker PATH",
    };
    pid_t pid;
    int rc = sched_spawn(&sp, &pid, err);
    free(env);
    if (rc != CD_OK)
        return CD_ERR;
    t->pid = pid;
    t->pid_start = proc_start_ticks(pid);

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
    return CD_OK;
}

/* Whether the worker has exited: waitpid for our own child (status filled), /proc for
 * an adopted one, which is init's child now and is reaped there (status stays 0: the
 * exit is told by its last lines, sched_task_exited). */
static int local_poll(sched_t *s, stask_t *t, int *status)
{
    (void)s;
    if (t->adopted)
        return proc_start_ticks(t->pid) != t->pid_start;
    pid_t r;
    do {
        r = waitpid(t->pid, status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == ECHILD) {
        cd_error("job %s: worker %d vanished (waitpid: %s)", t->job_id, (int)t->pid, strerror(errno));
        *status = 0x7f00; /* reads as exited with 127 */
    }
    return r == t->pid || (r < 0 && errno == ECHILD);
}

static void local_signal(sched_t *s, stask_t *t, int sig)
{
    (void)s;
    if (t->pid > 0 && kill(-t->pid, sig) != 0 && errno != ESRCH)
        cd_warn("job %s: signal %d to worker %d failed: %s", t->job_id, sig, (int)t->pid, strerror(errno));
}

static int local_exit_fd(const stask_t *t) { return (int)syscall(SYS_pidfd_open, t->pid, 0); }

static void local_abandon(sched_t *s, stask_t *t)
{
    (void)s;
    kill(-t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
    t->pid = 0;
}

const sched_executor_t sched_exec_local = {
    .name = "local",
    .uses_pool = 1,
    .submit = local_submit,
    .poll = local_poll,
    .signal = local_signal,
    .exit_fd = local_exit_fd,
    .abandon = local_abandon,
    .idle_poll_ms = 50,
};
