/* Logging to stderr (or a file) with a level, and the worker's fatal exit. */
#include "cdigits/util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int g_level = CD_LOG_INFO;
static FILE *g_file;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cd_fatal_report_fn g_report;

void cd_set_fatal_report(cd_fatal_report_fn report) { g_report = report; }
int cd_report_fatal(const char *message) { return g_report ? g_report(message) : 0; }

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
    int quick = cd_report_fatal(msg);
    fflush(stdout);
    fflush(stderr);
    if (quick)
        _exit(1); /* the other replicas may be inside a collective: no exit handlers */
    exit(1);
}
