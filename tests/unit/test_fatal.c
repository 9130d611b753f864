/*
 * Fatal errors and their report: cd_die and a failed cd_x* allocation print why on
 * stderr and, in a program that has src/common/jsonl.c, as the worker's error line on
 * stdout (the report jsonl.c installs before main); a replica's thread leaves with
 * _exit. Each case runs in a child process whose stdout and stderr are read back.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdigits/jsonl.h"
#include "cdigits/util.h"
#include "testutil.h"

typedef struct child_out {
    char out[4096], err[4096];
    int status;
} child_out;

static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
}

/* Runs fn in a child with stdout and stderr captured (each small enough for a pipe). */
static void in_child(void (*fn)(void), child_out *co)
{
    int po[2], pe[2];
    memset(co, 0, sizeof *co);
    if (pipe(po) || pipe(pe)) {
        CHECK(0, "pipe failed");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        fn();
        _exit(99); /* fn must not return */
    }
    close(po[1]);
    close(pe[1]);
    read_all(po[0], co->out, sizeof co->out);
    read_all(pe[0], co->err, sizeof co->err);
    close(po[0]);
    close(pe[0]);
    waitpid(pid, &co->status, 0);
}

/* The message of the first {"type":"error"} line of out, or NULL. */
static char *error_line(const char *out)
{
    char *copy = strdup(out), *save = NULL, *msg = NULL;
    for (char *ln = strtok_r(copy, "\n", &save); ln && !msg; ln = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(ln, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        if (type && !strcmp(type, "error"))
            msg = strdup(json_string_value(json_object_get(j, "message")));
        json_decref(j);
    }
    free(copy);
    return msg;
}

static int g_word;

static void die_plain(void) { cd_die("conv%d: cannot go on; lower the batch size", g_word); }

static void die_unreported(void)
{
    cd_set_fatal_report(NULL);
    cd_die("nobody hears this");
}

static void on_exit_handler(void) { printf("exit handler ran\n"); }

static void *replica_dies(void *arg)
{
    (void)arg;
    cd_jsonl_set_speaker("replica 1");
    cd_die("replica %d gave up", 1);
}

static void die_on_replica(void)
{
    atexit(on_exit_handler);
    pthread_t t;
    if (pthread_create(&t, NULL, replica_dies, NULL) == 0)
        pthread_join(t, NULL);
    _exit(98);
}

static void die_main_thread_exit_handlers(void)
{
    atexit(on_exit_handler);
    cd_die("plain exit");
}

static void alloc_fails(void)
{
    /* more than any machine has: calloc refuses at once */
    void *p = cd_xcalloc(SIZE_MAX / 2, 4);
    (void)p;
    _exit(97);
}

int main(void)
{
    cd_test_init("test_fatal");
    child_out co;
    g_word = (int)(cd_test_rand_u64() % 1000);

    in_child(die_plain, &co);
    char want[128];
    snprintf(want, sizeof want, "conv%d: cannot go on; lower the batch size", g_word);
    char *msg = error_line(co.out);
    CHECK(WIFEXITED(co.status) && WEXITSTATUS(co.status) == 1, "status %d", co.status);
    CHECK(msg && !strcmp(msg, want), "error line '%s', want '%s'", msg ? msg : "(none)", want);
    CHECK(strstr(co.err, want) != NULL, "stderr: '%s'", co.err);
    free(msg);

    in_child(die_unreported, &co);
    CHECK(WIFEXITED(co.status) && WEXITSTATUS(co.status) == 1, "status %d", co.status);
    CHECK(co.out[0] == 0, "no report installed, yet stdout has '%s'", co.out);
    CHECK(strstr(co.err, "nobody hears this") != NULL, "stderr: '%s'", co.err);

    /* a replica's thread: its name on the line, and no exit handlers (_exit) */
    in_child(die_on_replica, &co);
    msg = error_line(co.out);
    CHECK(WIFEXITED(co.status) && WEXITSTATUS(co.status) == 1, "status %d", co.status);
    CHECK(msg && !strcmp(msg, "replica 1: replica 1 gave up"), "error line '%s'", msg ? msg : "(none)");
    CHECK(strstr(co.out, "exit handler ran") == NULL, "a replica's cd_die ran exit handlers");
    free(msg);

    /* the main thread exits normally: exit handlers run */
    in_child(die_main_thread_exit_handlers, &co);
    CHECK(strstr(co.out, "exit handler ran") != NULL, "cd_die on the main thread skipped exit handlers");

    in_child(alloc_fails, &co);
    msg = error_line(co.out);
    CHECK(WIFSIGNALED(co.status) && WTERMSIG(co.status) == SIGABRT, "status %d", co.status);
    CHECK(msg && strstr(msg, "out of memory allocating") && strstr(msg, "lower the batch size"),
          "error line '%s'", msg ? msg : "(none)");
    free(msg);
    return cd_test_finish();
}
