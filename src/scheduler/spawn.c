/* Starting a child process: the one place that calls posix_spawn. Every worker, warm
 * inference worker and check goes through sched_spawn, so each gets the same signal
 * state, the same checks and the same messages. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* How each kind of descriptor is opened (SCHED_FD_PIPE is a dup2, not an open). */
static const struct {
    int flags;
    const char *how; /* for messages: "its stdout appended to FILE" */
} g_fd_kinds[] = {
    [SCHED_FD_NULL] = {O_RDWR, "from /dev/null"},
    [SCHED_FD_READ] = {O_RDONLY, "read from"},
    [SCHED_FD_APPEND] = {O_WRONLY | O_CREAT | O_APPEND, "appended to"},
    [SCHED_FD_TRUNC] = {O_WRONLY | O_CREAT | O_TRUNC, "written to"},
    [SCHED_FD_PIPE] = {0, "on a pipe"},
};

static const char *const g_fd_names[3] = {"stdin", "stdout", "stderr"};

char **spawn_worker_env(void)
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

/* The failure message: what could not start, why, and what to do. */
static int spawn_fail(const sched_spawn_t *sp, const char *cause, cd_err_t *err)
{
    return cd_err_set(err, CD_E_INTERNAL, "cannot start %s%s%s: %s%s%s", sp->what ? sp->what : "",
                      sp->what ? " " : "", sp->argv[0], cause, sp->hint ? "; " : "", sp->hint ? sp->hint : "");
}

/* posix_spawn's errno says only that something failed in the child (a file that would
 * not open, a folder it could not enter); the message names all of them. */
static int spawn_fail_child(const sched_spawn_t *sp, int rc, cd_err_t *err)
{
    char cause[900];
    size_t n = (size_t)snprintf(cause, sizeof cause, "%s", strerror(rc));
    const char *sep = " (starting";
    if (sp->dir && n < sizeof cause) {
        n += (size_t)snprintf(cause + n, sizeof cause - n, "%s in %s", sep, sp->dir);
        sep = ",";
    }
    for (int i = 0; i < 3 && n < sizeof cause; i++) {
        int k = sp->fd[i].kind;
        if (k == SCHED_FD_READ || k == SCHED_FD_APPEND || k == SCHED_FD_TRUNC) {
            n += (size_t)snprintf(cause + n, sizeof cause - n, "%s its %s %s %s", sep, g_fd_names[i],
                                  g_fd_kinds[k].how, sp->fd[i].path);
            sep = ",";
        }
    }
    if (sep[0] == ',' && n < sizeof cause)
        snprintf(cause + n, sizeof cause - n, ")");
    return spawn_fail(sp, cause, err);
}

/* Fills fa with what descriptors 0, 1 and 2 become, and the working directory. */
static int spawn_actions(const sched_spawn_t *sp, posix_spawn_file_actions_t *fa, char *cause, size_t len)
{
    int rc;
    for (int i = 0; i < 3; i++) {
        const sched_fd_t *f = &sp->fd[i];
        if (f->kind < SCHED_FD_NULL || f->kind > SCHED_FD_PIPE) {
            snprintf(cause, len, "unknown kind %d for its %s", f->kind, g_fd_names[i]);
            return CD_ERR;
        }
        if (f->kind == SCHED_FD_PIPE) {
            if (f->fd < 0) {
                snprintf(cause, len, "its %s is a pipe with no descriptor", g_fd_names[i]);
                return CD_ERR;
            }
            rc = posix_spawn_file_actions_adddup2(fa, f->fd, i);
        } else {
            const char *path = f->kind == SCHED_FD_NULL ? "/dev/null" : f->path;
            if (!path) {
                snprintf(cause, len, "its %s is a file with no name", g_fd_names[i]);
                return CD_ERR;
            }
            rc = posix_spawn_file_actions_addopen(fa, i, path, g_fd_kinds[f->kind].flags, 0644);
        }
        if (rc != 0) {
            snprintf(cause, len, "cannot arrange its %s: %s", g_fd_names[i], strerror(rc));
            return CD_ERR;
        }
    }
    if (sp->dir && (rc = posix_spawn_file_actions_addchdir_np(fa, sp->dir)) != 0) {
        snprintf(cause, len, "cannot arrange its working folder %s: %s", sp->dir, strerror(rc));
        return CD_ERR;
    }
    return CD_OK;
}

/* The child starts with no signal blocked and the signals the server handles or
 * ignores at their defaults, whatever thread of the server starts it. */
static int spawn_attrs(const sched_spawn_t *sp, posix_spawnattr_t *at, char *cause, size_t len)
{
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    static const int g_defaults[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof g_defaults / sizeof g_defaults[0]; i++)
        sigaddset(&defaults, g_defaults[i]);
    short flags = (short)(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (sp->own_group ? POSIX_SPAWN_SETPGROUP : 0));
    int rc;
    if ((rc = posix_spawnattr_setflags(at, flags)) != 0 || (rc = posix_spawnattr_setsigmask(at, &none)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(at, &defaults)) != 0 ||
        (sp->own_group && (rc = posix_spawnattr_setpgroup(at, 0)) != 0)) {
        snprintf(cause, len, "cannot set its process attributes: %s", strerror(rc));
        return CD_ERR;
    }
    return CD_OK;
}

int sched_spawn(const sched_spawn_t *sp, pid_t *pid, cd_err_t *err)
{
    *pid = -1;
    if (!sp->argv || !sp->argv[0])
        return cd_err_set(err, CD_E_INTERNAL, "cannot start a child process: no program was given");
    char cause[512];
    struct stat st;
    if (access(sp->argv[0], X_OK) != 0) {
        snprintf(cause, sizeof cause, "cannot run it: %s", strerror(errno));
        return spawn_fail(sp, cause, err);
    }
    if (sp->dir && stat(sp->dir, &st) != 0) {
        snprintf(cause, sizeof cause, "its working folder %s: %s", sp->dir, strerror(errno));
        return spawn_fail(sp, cause, err);
    }
    if (sp->dir && !S_ISDIR(st.st_mode)) {
        snprintf(cause, sizeof cause, "its working folder %s is not a folder", sp->dir);
        return spawn_fail(sp, cause, err);
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc;
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0) {
        snprintf(cause, sizeof cause, "cannot arrange its descriptors: %s", strerror(rc));
        return spawn_fail(sp, cause, err);
    }
    if ((rc = posix_spawnattr_init(&at)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        snprintf(cause, sizeof cause, "cannot set its process attributes: %s", strerror(rc));
        return spawn_fail(sp, cause, err);
    }
    int ok = CD_ERR;
    if (spawn_actions(sp, &fa, cause, sizeof cause) != CD_OK || spawn_attrs(sp, &at, cause, sizeof cause) != CD_OK) {
        spawn_fail(sp, cause, err);
    } else if ((rc = posix_spawn(pid, sp->argv[0], &fa, &at, sp->argv, sp->env ? sp->env : environ)) != 0) {
        *pid = -1;
        spawn_fail_child(sp, rc, err);
    } else {
        ok = CD_OK;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return ok;
}
