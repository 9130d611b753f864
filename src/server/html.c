/* The page text of html.h. */
#include "html.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

static void put(html_t *h, const char *s, size_t n)
{
    if (h->bad)
        return;
    if (n >= SIZE_MAX / 2 - h->n) {
        h->bad = 1;
        return;
    }
    if (h->n + n + 1 > h->cap) {
        size_t cap = h->cap ? h->cap : 4096;
        while (cap < h->n + n + 1)
            cap *= 2;
        char *p = realloc(h->p, cap);
        if (!p) {
            h->bad = 1;
            return;
        }
        h->p = p;
        h->cap = cap;
    }
    memcpy(h->p + h->n, s, n);
    h->n += n;
    h->p[h->n] = 0;
}

void html_raw(html_t *h, const char *markup) { put(h, markup, strlen(markup)); }

void html_printf(html_t *h, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        h->bad = 1;
    else
        put(h, buf, (size_t)n);
}

/* The entity of a byte that element text and quoted attributes must not hold as it is;
 * NULL for every other byte. The one list of html_text and html_file_text. */
static const char *entity_of(char c)
{
    static const struct {
        char c;
        const char *entity;
    } ent[] = {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}};
    for (size_t i = 0; i < CD_ARRAY_LEN(ent); i++)
        if (ent[i].c == c)
            return ent[i].entity;
    return NULL;
}

void html_text(html_t *h, const char *text)
{
    const char *run = text;
    for (const char *p = text; *p; p++) {
        const char *e = entity_of(*p);
        if (!e)
            continue;
        put(h, run, (size_t)(p - run));
        html_raw(h, e);
        run = p + 1;
    }
    html_raw(h, run);
}

void html_file_text(FILE *f, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++) {
        const char *e = entity_of(*p);
        if (e)
            fputs(e, f);
        else
            fputc(*p, f);
    }
}

void html_query_value(html_t *h, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
            *p == '_' || *p == '.' || *p == '~') {
            put(h, (const char *)p, 1);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            put(h, esc, 3);
        }
    }
}

void html_reply(req_t *r, int status, html_t *h)
{
    if (h->bad || !h->p) {
        free(h->p);
        *h = (html_t){0};
        reply_error(r, 500, "out of memory writing the page of %s", r->path);
        return;
    }
    reply_buffer(r, status, h->p, h->n, "text/html; charset=utf-8", "no-store");
    *h = (html_t){0};
}
