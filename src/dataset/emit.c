/* JSON lines for the worker protocol (docs/worker-protocol.md): one object per line,
 * written whole under a lock and flushed, so lines from threads never interleave. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

#include <jansson.h>

static pthread_mutex_t g_emit_lock = PTHREAD_MUTEX_INITIALIZER;

void ds_emit_json(FILE *out, json_t *obj)
{
    if (!obj)
        return;
    if (out) {
        char *s = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (s) {
            pthread_mutex_lock(&g_emit_lock);
            fputs(s, out);
            fputc('\n', out);
            fflush(out);
            pthread_mutex_unlock(&g_emit_lock);
            free(s);
        }
    }
    json_decref(obj);
}

/* Replace bytes that are not valid UTF-8 with '?' (file names need not be UTF-8 but
 * JSON strings must be), in place. */
void ds_utf8_sanitize(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 0x6 ? 1 : (*p >> 4) == 0xE ? 2 : (*p >> 3) == 0x1E ? 3 : -1;
        int ok = n >= 0;
        for (int k = 1; ok && k <= n; k++)
            ok = (p[k] & 0xC0) == 0x80;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
}

void ds_emit_log(FILE *out, const char *level, const char *fmt, ...)
{
    if (!out)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ds_utf8_sanitize(msg);
    ds_emit_json(out, json_pack("{s:s, s:s, s:s}", "type", "log", "level", level, "message", msg));
}

void ds_emit_progress(FILE *out, const char *stage, const char *split, size_t done, size_t total)
{
    if (!out)
        return;
    json_t *j = json_pack("{s:s, s:I, s:I}", "type", "progress", "done", (json_int_t)done,
                          "total", (json_int_t)total);
    if (j && stage)
        json_object_set_new(j, "stage", json_string(stage));
    if (j && split)
        json_object_set_new(j, "split", json_string(split));
    ds_emit_json(out, j);
}
