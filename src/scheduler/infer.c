/* Inference: `cdigits-worker classify ...` run under an inference slot, its standard
 * output collected for the request that asked (nothing to store: DIGITS deletes its
 * inference jobs as soon as they answer). */
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
#include <time.h>
#include <unistd.h>

#include "cdigits/util.h"

extern char **environ;

#define MAX_OUTPUT (64u << 20)

/* Appends what fd has to *buf (capped); 0 at EOF. */
static int slurp(int fd, char **buf, size_t *len, size_t *cap)
{
    char chunk[65536];
    ssize_t n;
    do {
        n = read(fd, chunk, sizeof chunk);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return 0;
    if (*len + (size_t)n + 1 > *cap) {
        if (*len + (size_t)n + 1 > MAX_OUTPUT)
            return 1; /* drop the excess, keep draining */
        size_t ncap = *cap ? *cap : 65536;
        while (ncap < *len + (size_t)n + 1)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            return 1;
        *buf = nb;
        *cap = ncap;
    }
    memcpy(*buf + *len, chunk, (size_t)n);
    *len += (size_t)n;
    (*buf)[*len] = 0;
    return 1;
}

/* Waits for an inference slot (lock held on return when CD_OK). */
static int take_slot(sched_t *s, double wait_s, cd_err_t *err)
{
    sched_req_t req = {.kind = SCHED_RES_INFER};
    int got[1], n;
    char why[256];
    double deadline = cd_now() + wait_s;
    pthread_mutex_lock(&s->lock);
    while (pool_acquire(&s->pool, &req, "inference", got, &n, why, sizeof why) != CD_OK) {
        if (s->stopping || cd_now() >= deadline) {
            pthread_mutex_unlock(&s->lock);
            return cd_err_set(err, CD_E_CONFLICT, "%s for %.0f s; try again later or start the server with "
                                                  "more --inference-slots", why, wait_s);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return CD_OK;
}

static void give_slot(sched_t *s)
{
    sched_req_t req = {.kind = SCHED_RES_INFER};
    pthread_mutex_lock(&s->lock);
    pool_release(&s->pool, &req, "inference");
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

int sched_run_classify(sched_t *s, const char *const *args, int nargs, double wait_s, double run_s, char **out,
                       size_t *outlen, char **errout, int *exit_status, cd_err_t *err)
{
    *exit_status = -1;
    *out = NULL;
    *outlen = 0;
    if (errout)
        *errout = NULL;
    if (nargs > 100000)
        return cd_err_set(err, CD_E_INVALID, "too many images at once (%d)", nargs);
    if (take_slot(s, wait_s, err) != CD_OK)
        return CD_ERR;
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, rc = CD_ERR;
    char **argv = calloc((size_t)nargs + 3, sizeof *argv);
    char *obuf = NULL, *ebuf = NULL;
    size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    int fa_ok = 0;
    if (!argv) {
        cd_err_set(err, CD_E_INTERNAL, "out of memory");
        goto out;
    }
    argv[0] = (char *)s->cfg.worker;
    argv[1] = "classify";
    for (int i = 0; i < nargs; i++)
        argv[i + 2] = (char *)args[i];
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        cd_err_set(err, CD_E_INTERNAL, "cannot create a pipe: %s", strerror(errno));
        goto out;
    }
    int e;
    if ((e = posix_spawn_file_actions_init(&fa)) != 0) {
        cd_err_set(err, CD_E_INTERNAL, "cannot start the worker: %s", strerror(e));
        goto out;
    }
    fa_ok = 1;
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    if ((e = posix_spawn(&pid, s->cfg.worker, &fa, NULL, argv, environ)) != 0) {
        pid = -1;
        cd_err_set(err, CD_E_INTERNAL, "cannot start the worker %s: %s; build it or pass --worker", s->cfg.worker,
                   strerror(e));
        goto out;
    }
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    double deadline = cd_now() + run_s;
    int open_fds = 2;
    struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    while (open_fds > 0) {
        int left = (int)((deadline - cd_now()) * 1000);
        if (left <= 0) {
            kill(pid, SIGKILL);
            cd_err_set(err, CD_E_INTERNAL, "classification took longer than %.0f s and was stopped", run_s);
            goto out;
        }
        int r = poll(pf, 2, left);
        if (r < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int more = i == 0 ? slurp(pf[i].fd, &obuf, &olen, &ocap) : slurp(pf[i].fd, &ebuf, &elen, &ecap);
            if (!more) {
                pf[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    pid = -1;
    if (!WIFEXITED(status)) {
        cd_err_set(err, CD_E_INTERNAL, "classification failed: the worker was killed by signal %d: %s",
                   WTERMSIG(status), ebuf ? ebuf : "it said nothing");
        goto out;
    }
    *exit_status = WEXITSTATUS(status);
    if (*exit_status != 0)
        cd_err_set(err, *exit_status == 1 ? CD_E_INVALID : CD_E_INTERNAL, "classification failed: %s",
                   ebuf ? ebuf : "the worker said nothing");
    *out = obuf;
    *outlen = olen;
    obuf = NULL;
    rc = CD_OK;
out:
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (errout && ebuf) {
        *errout = ebuf;
        ebuf = NULL;
    }
    free(obuf);
    free(ebuf);
    free(argv);
    give_slot(s);
    return rc;
}
