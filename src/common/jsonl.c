/* JSON lines on stdout, one object per line, never interleaved between threads. */
#include "cdigits/jsonl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int g_quiet;

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
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *o = json_pack("{s:s, s:s}", "type", type, "message", msg);
    if (o && level)
        json_object_set_new(o, "level", json_string(level));
    if (level)
        cd_jsonl(o);
    else
        emit(o); /* errors print from every thread */
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
