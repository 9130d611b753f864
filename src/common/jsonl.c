/* JSON lines on stdout, one object per line, never interleaved between threads. */
#include "cdigits/jsonl.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int g_quiet;
static _Thread_local char g_speaker[96];
static _Thread_local int g_said_error;

void cd_jsonl_set_quiet(int quiet) { g_quiet = quiet; }

static void emit(json_t *obj);

void cd_jsonl(json_t *obj)
{
    if (g_quiet) {
        json_decref(obj);
        return;
    }
    emit(obj);
}

static void emit(json_t *obj)
{
    if (!obj)
        return;
    char *s = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(obj);
    if (!s)
        return;
    pthread_mutex_lock(&g_out);
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&g_out);
    free(s);
}

static void vline(const char *type, const char *level, const char *fmt, va_list ap)
{
    char msg[2048];
    int n = !level && g_speaker[0] ? snprintf(msg, sizeof msg, "%s: ", g_speaker) : 0;
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    json_t *o = json_pack("{s:s, s:s}", "type", type, "message", msg);
    if (o && level)
        json_object_set_new(o, "level", json_string(level));
    if (level) {
        cd_jsonl(o);
    } else {
        g_said_error = 1;
        emit(o); /* errors print from every thread */
    }
}

void cd_jsonl_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("log", level, fmt, ap);
    va_end(ap);
}

void cd_jsonl_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("error", NULL, fmt, ap);
    va_end(ap);
}

static _Thread_local void *g_altstack;

void cd_jsonl_set_speaker(const char *who)
{
    snprintf(g_speaker, sizeof g_speaker, "%s", who ? who : "");
    stack_t ss = {0}, old;
    if (g_speaker[0] && !g_altstack) {
        /* only where the thread has none (a sanitizer may have set its own) */
        if (sigaltstack(NULL, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
            ss.ss_size = 64 * 1024;
            ss.ss_sp = g_altstack = malloc(ss.ss_size);
            if (!g_altstack || sigaltstack(&ss, NULL) != 0) {
                free(g_altstack);
                g_altstack = NULL;
            }
        }
    } else if (!g_speaker[0] && g_altstack) {
        ss.ss_flags = SS_DISABLE;
        if (sigaltstack(&ss, NULL) == 0) {
            free(g_altstack);
            g_altstack = NULL;
        }
    }
}

int cd_jsonl_has_speaker(void) { return g_speaker[0] != 0; }

/* ---- fatal errors ---------------------------------------------------------------------- */

/* cd_die's and a failed allocation's report: the error line, with the replica's name on
 * a replica's thread; a replica leaves with _exit. */
static int fatal_report(const char *message)
{
    cd_jsonl_error("%s", message);
    return cd_jsonl_has_speaker();
}

/* Installed whenever this file is part of a program (it is linked in by the first
 * cd_jsonl_* call the program makes), before main runs, so no fatal error can come
 * before it. */
__attribute__((constructor)) static void install_fatal_report(void)
{
    cd_set_fatal_report(fatal_report);
}

/* ---- a crash on a named thread -------------------------------------------------------- */

static const struct {
    int sig;
    const char *line; /* the rest of the message, JSON-safe */
} g_fatal[] = {
    {SIGSEGV, " crashed with SIGSEGV (a bad memory access)"},
    {SIGBUS, " crashed with SIGBUS (a bad memory access)"},
    {SIGFPE, " crashed with SIGFPE (an arithmetic fault)"},
    {SIGILL, " crashed with SIGILL (an illegal instruction)"},
    {SIGABRT, " crashed with SIGABRT (it aborted)"},
};
static struct sigaction g_before[CD_ARRAY_LEN(g_fatal)];

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
    while (*s && at < cap)
        buf[at++] = *s++;
    return at;
}

/* Only async-signal-safe calls: the line is assembled by hand and written in one
 * write(2) (every other line was flushed whole, so it starts a line of its own). */
static void on_fatal(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    size_t i = 0;
    while (i < CD_ARRAY_LEN(g_fatal) && g_fatal[i].sig != sig)
        i++;
    if (i == CD_ARRAY_LEN(g_fatal))
        return;
    if (g_speaker[0] && !g_said_error) {
        char line[256];
        size_t n = put(line, 0, sizeof line, "{\"type\":\"error\",\"message\":\"");
        n = put(line, n, sizeof line, g_speaker);
        n = put(line, n, sizeof line, g_fatal[i].line);
        n = put(line, n, sizeof line - 3, "\"}\n");
        g_said_error = 1;
        ssize_t w = write(STDOUT_FILENO, line, n);
        (void)w;
    }
    /* the handler from before takes it: a fault returns to the faulting instruction
     * and faults again; a sent or raised signal is raised again (blocked until this
     * handler returns) */
    sigaction(sig, &g_before[i], NULL);
    if (!info || info->si_code <= 0)
        raise(sig);
}

static void install_fatal(void)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_fatal); i++) {
        struct sigaction sa = {.sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO | SA_ONSTACK};
        sigemptyset(&sa.sa_mask);
        sigaction(g_fatal[i].sig, &sa, &g_before[i]);
    }
}

void cd_jsonl_catch_crashes(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_fatal);
}
