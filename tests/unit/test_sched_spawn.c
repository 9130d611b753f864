/* Child processes: sched_spawn's descriptors, folder, environment, process group and
 * messages, and sched_run_check's capture, output limit, timeout and inference slot.
 * Every expected output is built here from fresh random tokens. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdigits/sched.h"
#include "testutil.h"

static char g_dir[PATH_MAX];

static void token(char *buf, size_t len)
{
    snprintf(buf, len, "t%016llx", (unsigned long long)cd_test_rand_u64());
}

static void path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", g_dir, name);
}

/* The whole of a file (malloc'd), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* Reads fd to its end (malloc'd, NUL-terminated) and closes it. */
static char *read_all(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = 0;
    close(fd);
    return buf;
}

static int reap(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* stdin from a file, stdout to a file it empties, stderr to a pipe; the folder, the
 * environment and the process group are the ones asked for. */
static void spawn_files_and_pipes(void)
{
    char in_tok[32], env_tok[32], work[PATH_MAX], in[PATH_MAX], outf[PATH_MAX], env_var[64];
    token(in_tok, sizeof in_tok);
    token(env_tok, sizeof env_tok);
    path_in(work, sizeof work, "work");
    path_in(in, sizeof in, "in.txt");
    path_in(outf, sizeof outf, "out.txt");
    CHECK(mkdir(work, 0755) == 0, "mkdir %s: %s", work, strerror(errno));
    char text[64];
    snprintf(text, sizeof text, "%s\n", in_tok);
    cd_test_write("in.txt", text);
    cd_test_write("out.txt", "stale contents longer than what the child writes, to be emptied first\n");
    snprintf(env_var, sizeof env_var, "TOKEN=%s", env_tok);
    char *env[] = {env_var, "PATH=/usr/bin:/bin", NULL};
    char *argv[] = {"/bin/sh", "-c", "read line; echo \"out:$line:$TOKEN:$(pwd -P)\"; echo \"err:$TOKEN\" >&2", NULL};
    int pe[2];
    CHECK(pipe2(pe, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    sched_spawn_t sp = {
        .argv = argv,
        .dir = work,
        .env = env,
        .fd = {{SCHED_FD_READ, in, -1}, {SCHED_FD_TRUNC, outf, -1}, {SCHED_FD_PIPE, NULL, pe[1]}},
        .own_group = 1,
    };
    pid_t pid;
    cd_err_t err = {0};
    int rc = sched_spawn(&sp, &pid, &err);
    CHECK(rc == CD_OK && pid > 0, "spawn: %s", err.msg);
    if (rc != CD_OK) {
        close(pe[0]);
        close(pe[1]);
        return;
    }
    /* a zombie keeps its group until it is reaped */
    CHECK(getpgid(pid) == pid, "the child leads a process group of its own (pgid %d, pid %d)", (int)getpgid(pid),
          (int)pid);
    close(pe[1]);
    char *got_err = read_all(pe[0]);
    CHECK(reap(pid) == 0, "the child exits 0");
    char real[PATH_MAX], want[3 * PATH_MAX];
    CHECK(realpath(work, real) != NULL, "realpath %s", work);
    snprintf(want, sizeof want, "out:%s:%s:%s\n", in_tok, env_tok, real);
    char *got_out = slurp(outf);
    CHECK(got_out && strcmp(got_out, want) == 0, "stdout file holds only [%s], not [%s]", want,
          got_out ? got_out : "(none)");
    snprintf(want, sizeof want, "err:%s\n", env_tok);
    CHECK(strcmp(got_err, want) == 0, "stderr pipe gives [%s], not [%s]", want, got_err);
    free(got_out);
    free(got_err);
}

/* Appending keeps what was there; no own_group leaves the child in ours; a zeroed
 * stdin is /dev/null (cat ends at once). */
static void spawn_append_and_null(void)
{
    char app[PATH_MAX], lines[2][32], want[128];
    path_in(app, sizeof app, "append.txt");
    token(lines[0], sizeof lines[0]);
    token(lines[1], sizeof lines[1]);
    snprintf(want, sizeof want, "%s\n", lines[0]);
    cd_test_write("append.txt", want);
    snprintf(want, sizeof want, "%s\n%s\n", lines[0], lines[1]);
    char script[96];
    snprintf(script, sizeof script, "cat; echo %s", lines[1]);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    sched_spawn_t sp = {.argv = argv, .fd = {{SCHED_FD_NULL}, {SCHED_FD_APPEND, app, -1}, {SCHED_FD_NULL}}};
    pid_t pid;
    cd_err_t err = {0};
    int rc = sched_spawn(&sp, &pid, &err);
    CHECK(rc == CD_OK, "spawn: %s", err.msg);
    if (rc != CD_OK)
        return;
    CHECK(getpgid(pid) == getpgrp(), "without own_group the child stays in the caller's group");
    CHECK(reap(pid) == 0, "cat of /dev/null and echo exit 0");
    char *got = slurp(app);
    CHECK(got && strcmp(got, want) == 0, "appended file is [%s], not [%s]", want, got ? got : "(none)");
    free(got);
}

/* A failure names the program and the cause, and what to do. */
static void spawn_failures(void)
{
    char tok[32], prog[PATH_MAX], nodir[PATH_MAX], outf[PATH_MAX];
    token(tok, sizeof tok);
    path_in(prog, sizeof prog, tok);
    pid_t pid = 0;
    cd_err_t err = {0};
    char *missing[] = {prog, NULL};
    sched_spawn_t sp = {.argv = missing, .what = "the test program", .hint = "build it first"};
    CHECK(sched_spawn(&sp, &pid, &err) == CD_ERR && pid == -1, "a missing program is refused");
    CHECK(strstr(err.msg, prog) && strstr(err.msg, "the test program") && strstr(err.msg, strerror(ENOENT)) &&
              strstr(err.msg, "build it first"),
          "the message names the program, the cause and the fix: %s", err.msg);

    char *sh[] = {"/bin/sh", "-c", "exit 0", NULL};
    snprintf(nodir, sizeof nodir, "%s/missing-%s", g_dir, tok);
    sched_spawn_t in_nodir = {.argv = sh, .dir = nodir};
    CHECK(sched_spawn(&in_nodir, &pid, &err) == CD_ERR, "a missing working folder is refused");
    CHECK(strstr(err.msg, "/bin/sh") && strstr(err.msg, nodir), "the message names the program and the folder: %s",
          err.msg);

    snprintf(outf, sizeof outf, "%s/out.txt", nodir);
    sched_spawn_t to_nodir = {.argv = sh, .fd = {{SCHED_FD_NULL}, {SCHED_FD_TRUNC, outf, -1}, {SCHED_FD_NULL}}};
    CHECK(sched_spawn(&to_nodir, &pid, &err) == CD_ERR && pid == -1, "stdout into a missing folder is refused");
    CHECK(strstr(err.msg, "/bin/sh") && strstr(err.msg, outf) && strstr(err.msg, strerror(ENOENT)),
          "the message names the program, the file and the cause: %s", err.msg);
}

static sched_t *new_sched(void)
{
    sched_config_t cfg = {.worker = "/bin/false", .cpu_slots = 1, .dataset_slots = 1, .inference_slots = 1};
    sched_t *s = NULL;
    cd_err_t err = {0};
    CHECK(sched_new(&cfg, NULL, NULL, &s, &err) == CD_OK, "sched_new: %s", err.msg);
    return s;
}

static int infer_used(sched_t *s)
{
    json_t *res = sched_resources(s);
    int used = (int)json_integer_value(json_object_get(json_object_get(res, "inference_slots"), "used"));
    json_decref(res);
    return used;
}

/* stdout and stderr come back apart with the exit status; output past the limit is
 * read and dropped, so a child that prints more than that still ends by itself. */
static void check_capture(sched_t *s)
{
    char a[32], b[32], script[160];
    token(a, sizeof a);
    token(b, sizeof b);
    int code = (int)(cd_test_rand_u64() % 100) + 1;
    snprintf(script, sizeof script, "printf %%s %s; printf %%s %s >&2; exit %d", a, b, code);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    char *out = NULL, *errout = NULL;
    int status = -2;
    cd_err_t err = {0};
    CHECK(sched_run_check(s, argv, 0, 600, &out, &errout, &status, &err) == CD_OK, "check: %s", err.msg);
    CHECK(out && strcmp(out, a) == 0, "stdout [%s], not [%s]", a, out ? out : "(none)");
    CHECK(errout && strcmp(errout, b) == 0, "stderr [%s], not [%s]", b, errout ? errout : "(none)");
    CHECK(status == code, "exit status %d, not %d", code, status);
    CHECK(infer_used(s) == 0, "the slot is given back");
    free(out);
    free(errout);

    char *big[] = {"/bin/sh", "-c", "yes | head -c 9000000; echo done >&2", NULL};
    CHECK(sched_run_check(s, big, 0, 600, &out, &errout, &status, &err) == CD_OK && status == 0,
          "a child printing 9 MB ends by itself: %s", err.msg);
    size_t n = out ? strlen(out) : 0;
    CHECK(n < SCHED_CHECK_MAX_OUTPUT && n + 16384 + 1 >= SCHED_CHECK_MAX_OUTPUT,
          "stdout is cut just under %zu bytes (kept %zu)", SCHED_CHECK_MAX_OUTPUT, n);
    CHECK(n >= 2 && strncmp(out, "y\ny\n", 4) == 0, "what is kept is the start of it");
    CHECK(errout && strcmp(errout, "done\n") == 0, "stderr still comes back: [%s]", errout ? errout : "(none)");
    free(out);
    free(errout);

    char tok[32], prog[PATH_MAX];
    token(tok, sizeof tok);
    path_in(prog, sizeof prog, tok);
    char *missing[] = {prog, "check-net", NULL};
    CHECK(sched_run_check(s, missing, 0, 600, &out, &errout, &status, &err) == CD_ERR &&
              err.kind == CD_E_INTERNAL && strstr(err.msg, prog) && strstr(err.msg, "--worker"),
          "a missing program is an error naming it: %s", err.msg);
    CHECK(infer_used(s) == 0, "the slot is given back after a failed start");
    free(out);
    free(errout);
}

/* A child that never ends is killed at the timeout, with what it started. */
static void check_timeout(sched_t *s)
{
    char *argv[] = {"/bin/sh", "-c", "sleep 100000 & echo $!; wait", NULL};
    char *out = NULL, *errout = NULL;
    int status = -2;
    cd_err_t err = {0};
    CHECK(sched_run_check(s, argv, 0, 1.0, &out, &errout, &status, &err) == CD_ERR && err.kind == CD_E_INTERNAL,
          "a child past its timeout is an error");
    CHECK(strstr(err.msg, "sh -c") && strstr(err.msg, "took longer than 1 s"), "the message says so: %s", err.msg);
    CHECK(infer_used(s) == 0, "the slot is given back after the timeout");
    /* the sleep is in the killed group; once gone (or a zombie of init's) it has no start time */
    long gpid = out ? strtol(out, NULL, 10) : 0;
    if (gpid > 0) {
        int gone = 0;
        for (int i = 0; i < 6000 && !gone; i++) {
            gone = proc_start_ticks((pid_t)gpid) < 0;
            if (!gone)
                usleep(10000);
        }
        CHECK(gone, "the grandchild %ld was killed with its group", gpid);
    }
    free(out);
    free(errout);
}

typedef struct holder {
    sched_t *s;
    char fifo[PATH_MAX];
    char *out, *errout;
    int status, rc;
    cd_err_t err;
} holder_t;

static void *hold_slot(void *arg)
{
    holder_t *h = arg;
    char script[PATH_MAX + 16];
    snprintf(script, sizeof script, "cat '%s'", h->fifo);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    h->rc = sched_run_check(h->s, argv, 0, 600, &h->out, &h->errout, &h->status, &h->err);
    return NULL;
}

/* With the only inference slot held by a check, another is refused at once (the
 * server's 503), and runs again once the first has given it back. */
static void check_no_slot(sched_t *s)
{
    holder_t h = {.s = s, .status = -2};
    char tok[32];
    token(tok, sizeof tok);
    path_in(h.fifo, sizeof h.fifo, "hold.fifo");
    CHECK(mkfifo(h.fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, hold_slot, &h) == 0, "thread");
    for (int i = 0; i < 60000 && infer_used(s) != 1; i++)
        usleep(1000);
    CHECK(infer_used(s) == 1, "the first check holds the inference slot");
    char *argv[] = {"/bin/sh", "-c", "echo ran", NULL};
    char *out = NULL, *errout = NULL;
    int status = -2;
    cd_err_t err = {0};
    CHECK(sched_run_check(s, argv, 0, 600, &out, &errout, &status, &err) == CD_ERR && err.kind == CD_E_CONFLICT,
          "a second check finds no slot: %s", err.msg);
    CHECK(strstr(err.msg, "sh -c") && strstr(err.msg, "1 of 1 inference slot") && strstr(err.msg, "try again"),
          "the message says what is busy and what to do: %s", err.msg);
    CHECK(out == NULL && errout == NULL, "nothing ran");
    /* the writer's open releases cat's open; what it writes comes back to the first check */
    int fd = open(h.fifo, O_WRONLY);
    CHECK(fd >= 0, "open the fifo: %s", strerror(errno));
    if (fd >= 0) {
        CHECK(write(fd, tok, strlen(tok)) == (ssize_t)strlen(tok), "write");
        close(fd);
    }
    pthread_join(th, NULL);
    CHECK(h.rc == CD_OK && h.status == 0 && h.out && strcmp(h.out, tok) == 0, "the first check ends with [%s]: %s",
          tok, h.rc == CD_OK ? (h.out ? h.out : "(none)") : h.err.msg);
    free(h.out);
    free(h.errout);
    CHECK(sched_run_check(s, argv, 0, 600, &out, &errout, &status, &err) == CD_OK && out &&
              strcmp(out, "ran\n") == 0,
          "with the slot back a check runs: %s", err.msg);
    free(out);
    free(errout);
    unlink(h.fifo);
}

int main(void)
{
    cd_test_init("test_sched_spawn");
    snprintf(g_dir, sizeof g_dir, "%s", cd_test_tmpdir());
    spawn_files_and_pipes();
    spawn_append_and_null();
    spawn_failures();
    sched_t *s = new_sched();
    if (s) {
        check_capture(s);
        check_timeout(s);
        check_no_slot(s);
        sched_free(s);
    }
    return cd_test_finish();
}
