/* Starting a worker process (sched_spawn: its own process group, stdout and stderr
 * appended to files in its job folder) and the thread that follows those files and
 * stores each line until the worker exits. Files rather than pipes: a worker never dies
 * of SIGPIPE because the server did, and a restarted server reads what it missed. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdigits/util.h"

#define MAX_LINE (4u << 20) /* longer lines are cut: no worker line is that long */

long long worker_oom_kills(void)
{
    FILE *f = fopen("/proc/vmstat", "r");
    if (!f)
        return -1;
    char line[128];
    long long n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "oom_kill %lld", &n) == 1)
            break;
    fclose(f);
    return n;
}

static void note_output(stask_t *t)
{
    __atomic_store_n(&t->last_output_ms, (long long)(cd_now() * 1000), __ATOMIC_RELAXED);
}

/* Size of a file, 0 when it does not exist yet. */
static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* The worker's command line for t (docs/worker-protocol.md): `train DIR` with --resume,
 * --gpus and --backend for this attempt, or `dataset DIR`. The strings point into t and
 * gpus (a buffer of the caller's); argv has room for WORKER_ARGV entries, NULL last. */
#define WORKER_ARGV 10
static void worker_argv(const char *worker, const stask_t *t, char *gpus, size_t gpus_len, char **argv)
{
    int n = 0;
    argv[n++] = (char *)worker;
    if (strcmp(t->type, "model") != 0) {
        argv[n++] = "dataset";
        argv[n++] = (char *)t->dir;
        argv[n] = NULL;
        return;
    }
    argv[n++] = "train";
    argv[n++] = (char *)t->dir;
    if (t->resume)
        argv[n++] = "--resume";
    if (t->ngpus > 0) {
        gpus[0] = 0;
        for (int i = 0; i < t->ngpus; i++) {
            size_t used = strlen(gpus);
            snprintf(gpus + used, gpus_len - used, "%s%d", i ? "," : "", t->gpus[i]);
        }
        argv[n++] = "--gpus";
        argv[n++] = gpus;
    }
    argv[n++] = "--backend";
    argv[n++] = t->ngpus > 0 ? "cuda" : "cpu";
    argv[n] = NULL;
}

/* A growing buffer that yields complete lines of a file that is still being written. */
typedef struct linebuf {
    int fd;
    char *buf;
    size_t len, cap;
    int skipping;        /* inside a line longer than MAX_LINE: drop until its newline */
    long long *offset;   /* file offset of the first byte not yet handled */
} linebuf_t;

/* Handles the complete lines the file has now; with final, also a last line that has
 * no newline. Returns how many bytes were read. */
static size_t drain(sched_t *s, stask_t *t, linebuf_t *lb, int from_stderr, int final)
{
    size_t total = 0;
    for (;;) {
        if (lb->cap - lb->len < 65536) {
            size_t ncap = lb->cap ? lb->cap * 2 : 131072;
            char *nb = realloc(lb->buf, ncap);
            if (!nb)
                break;
            lb->buf = nb;
            lb->cap = ncap;
        }
        ssize_t n;
        do {
            n = read(lb->fd, lb->buf + lb->len, lb->cap - lb->len - 1);
        } while (n < 0 && errno == EINTR);
        if (n <= 0)
            break;
        total += (size_t)n;
        size_t old = lb->len, start = 0;
        lb->len += (size_t)n;
        /* the lines of one read are stored in one transaction, with how far they go */
        int batch = store_batch_begin(s->store, NULL) == CD_OK;
        for (size_t i = old; i < lb->len; i++) {
            if (lb->buf[i] != '\n')
                continue;
            lb->buf[i] = 0;
            if (!lb->skipping)
                lines_handle(s, t, lb->buf + start, from_stderr);
            lb->skipping = 0;
            *lb->offset += (long long)(i + 1 - start);
            start = i + 1;
        }
        if (!from_stderr && start)
            store_task_set_out_offset(s->store, t->task_id, *lb->offset, NULL);
        if (batch)
            store_batch_end(s->store, NULL);
        memmove(lb->buf, lb->buf + start, lb->len - start);
        lb->len -= start;
        if (lb->len > MAX_LINE) {
            lb->buf[lb->len] = 0;
            if (!lb->skipping)
                lines_handle(s, t, lb->buf, from_stderr);
            *lb->offset += (long long)lb->len;
            lb->skipping = 1;
            lb->len = 0;
        }
    }
    if (final && lb->len) {
        lb->buf[lb->len] = 0;
        if (!lb->skipping)
            lines_handle(s, t, lb->buf, from_stderr);
        *lb->offset += (long long)lb->len;
        lb->len = 0;
        if (!from_stderr)
            store_task_set_out_offset(s->store, t->task_id, *lb->offset, NULL);
    }
    return total;
}

static int open_at(const char *dir, const char *name, long long offset)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void worker_replay(sched_t *s, stask_t *t)
{
    linebuf_t lo = {.fd = open_at(t->dir, jobdir_name(JOBDIR_WORKER_OUT), t->out_offset), .offset = &t->out_offset};
    if (lo.fd < 0)
        return;
    size_t n = drain(s, t, &lo, 0, 1);
    if (n)
        cd_info("job %s: stored %zu bytes the worker printed while the server was down", t->job_id, n);
    close(lo.fd);
    free(lo.buf);
}

/* Follows the worker's output files until it exits: inotify wakes the thread when they
 * grow (a line reaches the store and the event stream within a millisecond or so), a
 * pidfd when the worker exits (a pidfd works for an adopted worker too); a timeout covers
 * kernels without either. */
static void *reader_thread(void *arg)
{
    stask_t *t = arg;
    sched_t *s = t->owner;
    linebuf_t lo = {.fd = open_at(t->dir, jobdir_name(JOBDIR_WORKER_OUT), t->out_offset), .offset = &t->out_offset};
    linebuf_t le = {.fd = open_at(t->dir, jobdir_name(JOBDIR_WORKER_ERR), t->err_offset), .offset = &t->err_offset};
    int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    char path[PATH_MAX];
    if (ino >= 0) {
        jobdir_path(t->dir, JOBDIR_WORKER_OUT, path, sizeof path);
        inotify_add_watch(ino, path, IN_MODIFY);
        jobdir_path(t->dir, JOBDIR_WORKER_ERR, path, sizeof path);
        inotify_add_watch(ino, path, IN_MODIFY);
    }
    int pidfd = t->exec->exit_fd(t);
    if (lo.fd < 0)
        cd_error("job %s: cannot read the worker's output %s/%s: %s", t->job_id, t->dir, jobdir_name(JOBDIR_WORKER_OUT),
                 strerror(errno));
    int status = 0;
    for (;;) {
        size_t got = 0;
        if (lo.fd >= 0)
            got += drain(s, t, &lo, 0, 0);
        if (le.fd >= 0)
            got += drain(s, t, &le, 1, 0);
        if (got)
            note_output(t);
        if (t->exec->poll(s, t, &status))
            break;
        struct pollfd pf[2] = {{.fd = ino, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        int rc = poll(pf, 2, ino >= 0 && pidfd >= 0 ? 1000 : t->exec->idle_poll_ms);
        if (rc > 0 && (pf[0].revents & POLLIN)) {
            char ev[4096];
            while (read(ino, ev, sizeof ev) > 0)
                ;
        }
    }
    /* everything the worker wrote is in the files now */
    if (lo.fd >= 0)
        drain(s, t, &lo, 0, 1);
    if (le.fd >= 0)
        drain(s, t, &le, 1, 1);
    if (lo.fd >= 0)
        close(lo.fd);
    if (le.fd >= 0)
        close(le.fd);
    if (ino >= 0)
        close(ino);
    if (pidfd >= 0)
        close(pidfd);
    free(lo.buf);
    free(le.buf);
    sched_task_exited(s, t, status);
    return NULL;
}

/* A task whose worker is (again) being followed: no kill pending, no line seen yet. */
static void follow_from_now(sched_t *s, stask_t *t)
{
    t->kill_at = 0;
    t->hung = 0;
    t->oom_kills = worker_oom_kills();
    note_output(t);
    t->abort_requested = 0;
    t->saw_done = 0;
    t->ntail = 0;
    t->last_error[0] = 0;
    t->owner = s;
}

/* The last line before out_offset, the last one the previous server stored: a done or
 * error line there is how the worker ended, even when it exits before anything new. */
static void recall_last_line(stask_t *t)
{
    char buf[4096];
    long end = (long)t->out_offset, start = end > (long)sizeof buf - 1 ? end - (long)sizeof buf + 1 : 0;
    int fd = open_at(t->dir, jobdir_name(JOBDIR_WORKER_OUT), start);
    if (fd < 0 || end <= 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    ssize_t n = read(fd, buf, (size_t)(end - start));
    close(fd);
    if (n <= 0 || buf[n - 1] != '\n')
        return;
    buf[n - 1] = 0;
    char *line = strrchr(buf, '\n');
    lines_recall(t, line ? line + 1 : buf);
}

int worker_adopt(sched_t *s, stask_t *t, cd_err_t *err)
{
    char path[PATH_MAX];
    jobdir_path(t->dir, JOBDIR_WORKER_OUT, path, sizeof path);
    if (access(path, R_OK) != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot read its output %s: %s", path, strerror(errno));
    /* stderr is not recorded in the store: what it printed while the server was down
     * stays in the file, and the log follows it from here */
    jobdir_path(t->dir, JOBDIR_WORKER_ERR, path, sizeof path);
    t->err_offset = file_size(path);
    t->adopted = t->pid > 0; /* a Slurm job's exit status is Slurm's to tell */
    follow_from_now(s, t);
    recall_last_line(t);
    int rc = pthread_create(&t->reader, NULL, reader_thread, t);
    if (rc != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot start a thread to read the worker: %s", strerror(rc));
    char msg[256];
    if (t->pid > 0)
        snprintf(msg, sizeof msg, "Following worker %d again after a server restart (attempt %d)", (int)t->pid,
                 t->attempt);
    else
        snprintf(msg, sizeof msg, "Following Slurm job %s again after a server restart (attempt %d)", t->slurm_id,
                 t->attempt);
    store_log_add(s->store, t->job_id, t->task_id, "info", msg, NULL);
    cd_info("job %s: %s", t->job_id, msg);
    return CD_OK;
}

int worker_start(sched_t *s, stask_t *t, cd_err_t *err)
{
    /* read from where the files end now: earlier attempts' lines are stored already */
    char path[PATH_MAX];
    jobdir_path(t->dir, JOBDIR_WORKER_OUT, path, sizeof path);
    t->out_offset = file_size(path);
    jobdir_path(t->dir, JOBDIR_WORKER_ERR, path, sizeof path);
    t->err_offset = file_size(path);
    store_task_set_out_offset(s->store, t->task_id, t->out_offset, NULL);
    char gpu_list[16 * SCHED_MAX_GPUS], *argv[WORKER_ARGV];
    worker_argv(s->cfg.worker, t, gpu_list, sizeof gpu_list, argv);
    follow_from_now(s, t);
    if (t->exec->submit(s, t, argv, err) != CD_OK)
        return CD_ERR;
    int rc = pthread_create(&t->reader, NULL, reader_thread, t);
    if (rc != 0) {
        t->exec->abandon(s, t);
        return cd_err_set(err, CD_E_INTERNAL, "cannot start a thread to read the worker: %s", strerror(rc));
    }
    return CD_OK;
}
