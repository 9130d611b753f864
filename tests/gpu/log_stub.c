/*
 * src/common/log.c without jansson, for the GPU test build (tests/gpu/run.sh) on
 * machines that lack it: the same functions, the error line written by hand.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cdigits/util.h"

static int g_level = CD_LOG_INFO;
static FILE *g_file;

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
    fprintf(out, "[%s] ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    fflush(out);
}

void cd_die(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cdigits-worker: %s\n", msg);
    fflush(stderr);
    exit(1);
}
