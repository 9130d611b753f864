/* The growable byte buffer (cd_buf in include/cdigits/util.h). */
#include "cdigits/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *cd_buf_extend(cd_buf *b, size_t n)
{
    if (n >= SIZE_MAX - b->n)
        cd_die("a buffer of %zu bytes cannot grow by %zu more", b->n, n);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : cap * 2;
        b->p = cd_xrealloc(b->p, cap);
        b->cap = cap;
    }
    char *at = b->p + b->n;
    b->n += n;
    b->p[b->n] = 0;
    return at;
}

void cd_buf_put(cd_buf *b, const void *data, size_t n)
{
    void *at = cd_buf_extend(b, n);
    if (n)
        memcpy(at, data, n);
}

void cd_buf_putc(cd_buf *b, char c) { cd_buf_put(b, &c, 1); }

void cd_buf_printf(cd_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char probe;
    int n = vsnprintf(&probe, 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        cd_die("cannot format \"%s\" into a buffer", fmt);
    /* vsnprintf writes the NUL too: room for it is always there after the bytes */
    char *at = cd_buf_extend(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(at, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

void cd_buf_reset(cd_buf *b)
{
    b->n = 0;
    cd_buf_extend(b, 0);
}

void cd_buf_free(cd_buf *b)
{
    free(b->p);
    *b = (cd_buf){0};
}
