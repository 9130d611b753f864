/* Checked allocation, file helpers and clocks. */
#include "cdigits/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n)
{
    char msg[128];
    snprintf(msg, sizeof msg, "out of memory allocating %zu bytes; free memory or lower the batch size", n);
    fprintf(stderr, "cdigits: %s\n", msg);
    /* the same on the report, where there is one (small allocations may still work) */
    cd_report_fatal(msg);
    abort();
}

void *cd_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *cd_xcalloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        oom(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *cd_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *cd_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = cd_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

char *cd_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int cd_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return CD_ERR;
        }
        if (w == 0) {
            errno = ENOSPC;
            return CD_ERR;
        }
        p += w;
        len -= (size_t)w;
    }
    return CD_OK;
}

int cd_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return CD_ERR;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return CD_ERR;
    if (cd_write_all(fd, data, len) != CD_OK || fsync(fd) != 0)
        goto err;
    if (close(fd) != 0) {
        fd = -1;
        goto err;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return CD_ERR;
    }
    return CD_OK;
err: {
    int e = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    errno = e;
    return CD_ERR;
}
}

int cd_mkdirs(const char *path, int mode)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return CD_ERR;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
                return CD_ERR;
            buf[i] = c;
        }
    }
    return CD_OK;
}

double cd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cd_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

char *cd_fmt(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
    return dst;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p)
{
    static const struct {
        unsigned char lead_lo, lead_hi, next_lo, next_hi; /* the second byte's range */
        size_t len;
    } forms[] = {
        {0x00, 0x7f, 0, 0, 1},       {0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
        {0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3}, {0xee, 0xef, 0x80, 0xbf, 3},
        {0xf0, 0xf0, 0x90, 0xbf, 4}, {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4},
    };
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        if (p[0] < forms[f].lead_lo || p[0] > forms[f].lead_hi)
            continue;
        if (forms[f].len == 1)
            return 1;
        if (p[1] < forms[f].next_lo || p[1] > forms[f].next_hi)
            return 0;
        for (size_t i = 2; i < forms[f].len; i++)
            if (p[i] < 0x80 || p[i] > 0xbf)
                return 0;
        return forms[f].len;
    }
    return 0;
}

size_t cd_utf8_scrub(char *s)
{
    size_t replaced = 0;
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = utf8_seq(p);
        if (n) {
            p += n;
        } else {
            *p++ = '?';
            replaced++;
        }
    }
    return replaced;
}
