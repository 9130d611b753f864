/* Pages the server writes itself (DIGITS's dataset explorer and summary): a growing
 * text that notes a failed allocation instead of exiting, with the escapes every string
 * from a job, a form or a URL goes through. */
#ifndef CDIGITS_SERVER_HTML_H
#define CDIGITS_SERVER_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "internal.h"

typedef struct html {
    char *p; /* n bytes and a NUL; NULL until the first append */
    size_t n, cap;
    int bad; /* an allocation failed: html_reply answers 500 */
} html_t;

/* Markup as it is: only the page's own literals. */
void html_raw(html_t *h, const char *markup);
/* Formatted markup: the format is a literal, the arguments numbers. */
void html_printf(html_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text with & < > " ' escaped, for an element or a quoted attribute. */
void html_text(html_t *h, const char *text);
/* The same escaping written to a stream (a page made with open_memstream or in a file);
 * NULL writes nothing. A failed write shows in ferror(f). */
void html_file_text(FILE *f, const char *text);
/* A query value percent-encoded (all but A-Z a-z 0-9 - _ . ~), safe in an href. */
void html_query_value(html_t *h, const char *value);
/* Sends the page as text/html with status and frees it; a 500 when it ran out of memory. */
void html_reply(req_t *r, int status, html_t *h);

#endif
