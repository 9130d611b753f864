/* Logging to stderr (or a file) with a level, and the worker's fatal exit. */
#include "cdigits/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/jsonl.h"

static int g_level = CD_LOG_INFO;
static FILE *g_file;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void cd_log_set_level(int level) { g_level = level; }
void cd_log_set_file(FILE *f) { g_file = f; }

void cd_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (level < g_level)
        return;
    if (level < 0 || level > CD_LOG_ERROR)
        level = CD_LOG_ERROR;
    FILE *out = g_file ? g_file : stderr;
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    pthread_mutex_lock(&g_lock);
    fprintf(out, "%s [%s] ", when, names[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
    pthread_mutex_unlock(&g_lock);
}

void cd_die(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cdigits-worker: %s\n", msg);
    cd_jsonl_error("%s", msg); /* with the replica's name on a replica's thread */
    fflush(stdout);
    fflush(stderr);
    if (cd_jsonl_has_speaker())
        _exit(1); /* the other replicas may be inside a collective: no exit handlers */
    exit(1);
}
