/* Short jobs the server runs for a request (the network view's `check-net --json`):
 * one inference slot from the pools while the child runs, its stdout and stderr
 * collected through pipes, a timeout that kills it. */
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

#include "cdigits/util.h"

static const sched_req_t g_check_req = {.kind = SCHED_RES_INFER};

/* The program's name and subcommand for messages: "cdigits-worker check-net". */
static void check_name(char *const argv[], char *name, size_t len)
{
    const char *base = strrchr(argv[0], '/');
    snprintf(name, len, "%s%s%s", base ? base + 1 : argv[0], argv[1] ? " " : "", argv[1] ? argv[1] : "");
}

/* Takes an inference slot, waiting until deadline (cd_now) for one to be given back. */
static int check_take(sched_t *s, const char *name, double deadline, cd_err_t *err)
{
    int got[SCHED_MAX_GPUS], ngot = 0;
    char why[256];
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->stopping) {
            pthread_mutex_unlock(&s->lock);
            return cd_err_set(err, CD_E_CONFLICT, "the server is stopping and runs no %s now; try again once it "
                                                  "has restarted", name);
        }
        if (pool_acquire(&s->pool, &g_check_req, "check", got, &ngot, why, sizeof why) == CD_OK)
            break;
        if (cd_now() >= deadline) {
            int used = s->pool.used[SCHED_RES_INFER], slots = s->pool.slots[SCHED_RES_INFER];
            pthread_mutex_unlock(&s->lock);
            return cd_err_set(err, CD_E_CONFLICT,
                              "%s cannot run now: %d of %d inference slot%s in use (models answering or networks "
                              "being checked); try again in a moment or start the server with more "
                              "--inference-slots",
                              name, used, slots, slots == 1 ? " is" : "s are");
        }
        /* slots are given back with a broadcast; the timeout bounds the wait at the deadline */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double left = deadline - cd_now();
        long long ns = ts.tv_nsec + (long long)((left < 0.1 ? left : 0.1) * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return CD_OK;
}

static void check_give(sched_t *s)
{
    pthread_mutex_lock(&s->lock);
    pool_release(&s->pool, &g_check_req, "check");
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* A growing NUL-terminated buffer of what one pipe gave, SCHED_CHECK_MAX_OUTPUT kept. */
typedef struct capture {
    int fd;
    char *buf;
    size_t len, cap;
} capture_t;

/* Reads what c->fd has: 0 at end of file or on an error, 1 while more may come. Past
 * the limit it keeps reading, so the child never blocks on a full pipe, and drops it. */
static int capture_read(capture_t *c)
{
    char chunk[16384];
    ssize_t n = read(c->fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (n <= 0)
        return 0;
    if (c->len + (size_t)n + 1 > c->cap) {
        if (c->len + (size_t)n + 1 > SCHED_CHECK_MAX_OUTPUT)
            return 1;
        size_t nc = c->cap ? c->cap * 2 : 65536;
        while (nc < c->len + (size_t)n + 1)
            nc *= 2;
        char *nb = realloc(c->buf, nc);
        if (!nb)
            return 1;
        c->buf = nb;
        c->cap = nc;
    }
    memcpy(c->buf + c->len, chunk, (size_t)n);
    c->len += (size_t)n;
    c->buf[c->len] = 0;
    return 1;
}

static void kill_and_reap(pid_t pid)
{
    kill(-pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* Runs argv with stdout and stderr on pipes until both close, then reaps it (slot held). */
static int check_run(char *const argv[], const char *name, double timeout_s, capture_t *co, capture_t *ce,
                     int *exit_status, cd_err_t *err)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, rc = CD_ERR;
    pid_t pid = -1;
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        cd_err_set(err, CD_E_INTERNAL, "cannot create a pipe to run %s: %s", name, strerror(errno));
        goto out;
    }
    sched_spawn_t sp = {
        .argv = argv,
        .fd = {{SCHED_FD_NULL}, {SCHED_FD_PIPE, NULL, po[1]}, {SCHED_FD_PIPE, NULL, pe[1]}},
        .own_group = 1,
        .hint = "build it (cmake --build build) or start the server with --worker PATH",
    };
    if (sched_spawn(&sp, &pid, err) != CD_OK)
        goto out;
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    co->fd = po[0];
    ce->fd = pe[0];
    double deadline = cd_now() + timeout_s;
    struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    capture_t *caps[2] = {co, ce};
    for (int open_fds = 2; open_fds > 0;) {
        int left = (int)((deadline - cd_now()) * 1000);
        if (left <= 0) {
            kill_and_reap(pid);
            pid = -1;
            cd_err_set(err, CD_E_INTERNAL, "%s took longer than %.0f s and was stopped", name, timeout_s);
            goto out;
        }
        if (poll(pf, 2, left) < 0 && errno != EINTR) {
            cd_err_set(err, CD_E_INTERNAL, "cannot wait for the output of %s: %s", name, strerror(errno));
            goto out;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (!capture_read(caps[i])) {
                pf[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (r != pid) {
        cd_err_set(err, CD_E_INTERNAL, "cannot learn how %s ended: %s", name, strerror(errno));
        pid = -1;
        goto out;
    }
    pid = -1;
    if (!WIFEXITED(status)) {
        cd_err_set(err, CD_E_INTERNAL, "%s was killed by signal %d: %.600s", name,
                   WIFSIGNALED(status) ? WTERMSIG(status) : 0, ce->buf && ce->buf[0] ? ce->buf : "it said nothing");
        goto out;
    }
    *exit_status = WEXITSTATUS(status);
    rc = CD_OK;
out:
    if (pid > 0)
        kill_and_reap(pid);
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    return rc;
}

int sched_run_check(sched_t *s, char *const argv[], double wait_s, double timeout_s, char **out, char **errout,
                    int *exit_status, cd_err_t *err)
{
    *out = *errout = NULL;
    *exit_status = -1;
    if (!argv || !argv[0])
        return cd_err_set(err, CD_E_INTERNAL, "no program to run was given");
    char name[256];
    check_name(argv, name, sizeof name);
    if (check_take(s, name, cd_now() + wait_s, err) != CD_OK)
        return CD_ERR;
    capture_t co = {.fd = -1}, ce = {.fd = -1};
    int rc = check_run(argv, name, timeout_s, &co, &ce, exit_status, err);
    check_give(s);
    *out = co.buf;
    *errout = ce.buf;
    return rc;
}
