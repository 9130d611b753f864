/*
 * Protobuf text format (as Caffe's .prototxt files use it) into a cd_pt_node tree,
 * validation of a tree against a schema table, and value lookups.
 *
 * Grammar accepted (a superset of what Caffe writes, a subset of protobuf's):
 *
 *   body    := { field [ "," | ";" ] }
 *   field   := IDENT ":" value
 *            | IDENT [ ":" ] ( "{" body "}" | "<" body ">" )
 *            | IDENT [ ":" ] "[" [ elem { "," elem } ] "]"   -- one node per element
 *   value   := STRING { STRING } | [ "-" ] NUMBER | [ "-" ] inf | [ "-" ] nan | IDENT
 *
 * Comments run from "#" to the end of the line. Numbers are decimal or 0x hex integers,
 * or floats with optional fraction, exponent and trailing f/F. Integers with leading
 * zeros are read as decimal (protobuf would read octal; Caffe files never use it).
 *
 * Bad input is always a returned error with "FILE:LINE:COL: found; expected"; the only
 * abort is on out-of-memory (cd_xmalloc), where a worker has nothing better to do.
 */
#include "cdigits/prototxt.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/util.h"

/* ---- character classes (ASCII only: no locale, no ctype on signed chars) ---------- */

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident(int c) { return is_alpha(c) || is_digit(c); }
static int is_hex(int c) { return is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
static int hex_val(int c) { return is_digit(c) ? c - '0' : (c | 32) - 'a' + 10; }

static int ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if ((*a | 32) != (*b | 32))
            return 0;
    return *a == *b;
}

/* inf, infinity and nan in any case are numbers, as in protobuf. */
static int is_special_float(const char *s, size_t n)
{
    static const char *const names[] = {"inf", "infinity", "nan"};
    char buf[16];
    if (n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(names); i++)
        if (ieq(buf, names[i]))
            return 1;
    return 0;
}

/* Quote user text for a message: printable ASCII as is, the rest as \xHH, at most
 * max source bytes (then "..."), so garbage input cannot garble the message. */
static void quote_text(char *dst, size_t dstlen, const char *s, size_t n, size_t max)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < dstlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == max) {
            o += (size_t)snprintf(dst + o, dstlen - o, "...");
            break;
        }
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(dst + o, dstlen - o, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            dst[o++] = (char)c;
        else
            o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02X", c);
    }
    if (dstlen)
        dst[o < dstlen ? o : dstlen - 1] = 0;
}

/* ---- errors -------------------------------------------------------------------------- */

static void write_error(char *err, size_t errlen, const char *file, int line, int col,
                        const char *fmt, va_list ap)
{
    if (!err || !errlen)
        return;
    char what[1024];
    vsnprintf(what, sizeof what, fmt, ap);
    cd_fmt(err, errlen, "%s:%d:%d: %s", file ? file : "<input>", line, col, what);
}

int cd_pt_error_at(const cd_pt_node *node, const char *filename, char *err, size_t errlen,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_error(err, errlen, filename, node ? node->line : 0, node ? node->col : 0, fmt, ap);
    va_end(ap);
    return CD_ERR;
}

/* ---- tokenizer ------------------------------------------------------------------------ */

enum tok_type { TOK_EOF, TOK_IDENT, TOK_NUMBER, TOK_STRING, TOK_PUNCT };

typedef struct {
    int type;
    size_t start, end; /* source span (for strings: including the quotes) */
    int line, col;
} token;

typedef struct {
    const char *s;
    size_t len, pos;
    int line, col;
    token tok;    /* the lookahead */
    cd_buf str;   /* decoded text of the lookahead when it is a string */
    cd_buf val;   /* a value being assembled (adjacent strings joined) */
    const char *file;
    char *err;
    size_t errlen;
} parser;

static int perr(parser *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int perr(parser *p, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_error(p->err, p->errlen, p->file, line, col, fmt, ap);
    va_end(ap);
    return CD_ERR;
}

static int peekc(const parser *p, size_t ahead)
{
    return p->pos + ahead < p->len ? (unsigned char)p->s[p->pos + ahead] : -1;
}

static void advance(parser *p)
{
    if (p->s[p->pos] == '\n') {
        p->line++;
        p->col = 1;
    } else {
        p->col++;
    }
    p->pos++;
}

static void skip_space(parser *p)
{
    while (p->pos < p->len) {
        int c = peekc(p, 0);
        if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n')
                advance(p);
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            advance(p);
        } else {
            break;
        }
    }
}

/* Describe the lookahead for "unexpected X" messages. */
static const char *describe_tok(const parser *p, char *buf, size_t len)
{
    const token *t = &p->tok;
    char q[128];
    switch (t->type) {
    case TOK_EOF:
        return "end of file";
    case TOK_STRING:
        quote_text(q, sizeof q, p->str.p ? p->str.p : "", p->str.n, 40);
        cd_fmt(buf, len, "string \"%s\"", q);
        return buf;
    case TOK_NUMBER:
        quote_text(q, sizeof q, p->s + t->start, t->end - t->start, 40);
        cd_fmt(buf, len, "number %s", q);
        return buf;
    case TOK_IDENT:
        quote_text(q, sizeof q, p->s + t->start, t->end - t->start, 40);
        cd_fmt(buf, len, "identifier %s", q);
        return buf;
    default:
        cd_fmt(buf, len, "\"%c\"", p->s[t->start]);
        return buf;
    }
}

static int lex_number(parser *p)
{
    if (peekc(p, 0) == '0' && (peekc(p, 1) | 32) == 'x') {
        advance(p);
        advance(p);
        if (!is_hex(peekc(p, 0)))
            goto bad;
        while (is_hex(peekc(p, 0)))
            advance(p);
    } else {
        while (is_digit(peekc(p, 0)))
            advance(p);
        if (peekc(p, 0) == '.') {
            advance(p);
            while (is_digit(peekc(p, 0)))
                advance(p);
        }
        if ((peekc(p, 0) | 32) == 'e') {
            advance(p);
            if (peekc(p, 0) == '+' || peekc(p, 0) == '-')
                advance(p);
            if (!is_digit(peekc(p, 0)))
                goto bad;
            while (is_digit(peekc(p, 0)))
                advance(p);
        }
        if ((peekc(p, 0) | 32) == 'f')
            advance(p);
    }
    if (!is_ident(peekc(p, 0)) && peekc(p, 0) != '.')
        return CD_OK;
bad:
    /* Take the rest of the word so the message shows the whole malformed literal. */
    while (is_ident(peekc(p, 0)) || peekc(p, 0) == '.' ||
           ((peekc(p, 0) == '+' || peekc(p, 0) == '-') && (p->s[p->pos - 1] | 32) == 'e'))
        advance(p);
    {
        char q[128];
        quote_text(q, sizeof q, p->s + p->tok.start, p->pos - p->tok.start, 40);
        return perr(p, p->tok.line, p->tok.col,
                    "malformed number \"%s\"; expected a number such as 12, -3, 0x1F, 0.5, 1e-4 or 2.5f", q);
    }
}

/* Decode one escape after the backslash into p->str. */
static int lex_escape(parser *p)
{
    static const char simple_in[] = "ntrabfv\\'\"?";
    static const char simple_out[] = "\n\t\r\a\b\f\v\\'\"?";
    int line = p->line, col = p->col - 1, c = peekc(p, 0);
    const char *hit = c > 0 ? strchr(simple_in, c) : NULL;
    unsigned v = 0;
    if (hit) {
        advance(p);
        cd_buf_putc(&p->str, simple_out[hit - simple_in]);
        return CD_OK;
    }
    if (c == 'x' || c == 'X') {
        advance(p);
        if (!is_hex(peekc(p, 0)))
            return perr(p, line, col, "\"\\x\" without hex digits in a string; expected \\xHH such as \\x41");
        for (int i = 0; i < 2 && is_hex(peekc(p, 0)); i++) {
            v = v * 16 + (unsigned)hex_val(peekc(p, 0));
            advance(p);
        }
    } else if (c >= '0' && c <= '7') {
        for (int i = 0; i < 3 && peekc(p, 0) >= '0' && peekc(p, 0) <= '7'; i++) {
            v = v * 8 + (unsigned)(peekc(p, 0) - '0');
            advance(p);
        }
        if (v > 255)
            return perr(p, line, col, "octal escape \\%o is larger than a byte; expected \\000 to \\377", v);
    } else {
        char q[32];
        if (c < 0)
            return perr(p, line, col, "end of file after \"\\\" in a string; "
                        "expected an escape and a closing quote");
        quote_text(q, sizeof q, p->s + p->pos, 1, 1);
        return perr(p, line, col, "unknown escape \"\\%s\" in a string; expected one of "
                    "\\n \\t \\r \\a \\b \\f \\v \\\\ \\' \\\" \\? \\xHH \\ooo", q);
    }
    if (v == 0)
        return perr(p, line, col, "escape for a NUL byte in a string; expected no NUL bytes in strings");
    cd_buf_putc(&p->str, (char)v);
    return CD_OK;
}

static int lex_string(parser *p)
{
    int quote = peekc(p, 0);
    cd_buf_reset(&p->str);
    advance(p);
    for (;;) {
        int c = peekc(p, 0);
        if (c < 0 || c == '\n')
            return perr(p, p->tok.line, p->tok.col,
                        "unterminated string (the %s comes first); expected a closing %c",
                        c < 0 ? "end of file" : "end of the line", quote);
        if (c == quote) {
            advance(p);
            return CD_OK;
        }
        if (c == 0)
            return perr(p, p->line, p->col, "NUL byte inside a string; expected text (write bytes as \\xHH)");
        advance(p);
        if (c == '\\') {
            if (lex_escape(p) != CD_OK)
                return CD_ERR;
        } else {
            cd_buf_putc(&p->str, (char)c);
        }
    }
}

/* Scan the next token into p->tok. */
static int next(parser *p)
{
    skip_space(p);
    token *t = &p->tok;
    t->start = p->pos;
    t->line = p->line;
    t->col = p->col;
    int c = peekc(p, 0), rc = CD_OK;
    if (c < 0) {
        t->type = TOK_EOF;
    } else if (is_alpha(c)) {
        t->type = TOK_IDENT;
        while (is_ident(peekc(p, 0)))
            advance(p);
    } else if (is_digit(c) || (c == '.' && is_digit(peekc(p, 1)))) {
        t->type = TOK_NUMBER;
        rc = lex_number(p);
    } else if (c == '"' || c == '\'') {
        t->type = TOK_STRING;
        rc = lex_string(p);
    } else if (c && strchr("{}<>[]:,;-", c)) {
        t->type = TOK_PUNCT;
        advance(p);
    } else {
        char q[32];
        quote_text(q, sizeof q, p->s + p->pos, 1, 1);
        return perr(p, t->line, t->col, "unexpected character \"%s\"; expected a field name, "
                    "value, \"{\", \"}\", \":\" or a # comment", q);
    }
    t->end = p->pos;
    return rc;
}

static int tok_is(const parser *p, char c)
{
    return p->tok.type == TOK_PUNCT && p->s[p->tok.start] == c;
}

/* ---- parser ------------------------------------------------------------------------------ */

static char *span_dup(const char *s, size_t n)
{
    char *d = cd_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Where a field name was seen: every node made for the field carries it. */
typedef struct {
    size_t start, len;
    int line, col;
} field_name;

static cd_pt_node *add_node(parser *p, cd_pt_node ***tail, const field_name *f, int kind, char *text)
{
    cd_pt_node *n = cd_xcalloc(1, sizeof *n);
    n->name = span_dup(p->s + f->start, f->len);
    n->kind = kind;
    n->text = text;
    n->line = f->line;
    n->col = f->col;
    **tail = n;
    *tail = &n->next;
    return n;
}

static int parse_body(parser *p, cd_pt_node *msg, int depth, char close);

/* A scalar value after "name:"; adds one node. */
static int parse_scalar(parser *p, cd_pt_node ***tail, const field_name *f)
{
    char what[192], q[128];
    const token *t = &p->tok;
    if (t->type == TOK_STRING) {
        cd_buf_reset(&p->val);
        while (p->tok.type == TOK_STRING) { /* "a" "b" is "ab", as in C */
            cd_buf_put(&p->val, p->str.p, p->str.n);
            if (next(p) != CD_OK)
                return CD_ERR;
        }
        add_node(p, tail, f, CD_PT_STRING, span_dup(p->val.p, p->val.n));
        return CD_OK;
    }
    int neg = tok_is(p, '-');
    if (neg && next(p) != CD_OK)
        return CD_ERR;
    size_t n = t->end - t->start;
    if (t->type == TOK_NUMBER || (t->type == TOK_IDENT && is_special_float(p->s + t->start, n))) {
        char *text = cd_xmalloc(n + 2); /* "-" (when negated), the literal, NUL */
        if (neg)
            text[0] = '-';
        memcpy(text + neg, p->s + t->start, n);
        text[n + neg] = 0;
        add_node(p, tail, f, CD_PT_NUMBER, text);
        return next(p);
    }
    if (neg)
        return perr(p, t->line, t->col, "unexpected %s after \"-\"; expected a number",
                    describe_tok(p, what, sizeof what));
    if (t->type == TOK_IDENT) {
        add_node(p, tail, f, CD_PT_IDENT, span_dup(p->s + t->start, n));
        return next(p);
    }
    quote_text(q, sizeof q, p->s + f->start, f->len, 40);
    return perr(p, t->line, t->col, "unexpected %s after \"%s:\"; expected a value "
                "(number, \"string\", identifier) or \"{\"", describe_tok(p, what, sizeof what), q);
}

/* A nested message at the lookahead "{" or "<"; adds one node. */
static int parse_message(parser *p, cd_pt_node ***tail, const field_name *f, int depth)
{
    char q[128];
    if (depth + 1 > CD_PT_MAX_DEPTH) {
        quote_text(q, sizeof q, p->s + f->start, f->len, 40);
        return perr(p, f->line, f->col, "message \"%s\" nested %d levels deep; expected at most %d levels",
                    q, depth + 1, CD_PT_MAX_DEPTH);
    }
    char close = tok_is(p, '{') ? '}' : '>';
    cd_pt_node *n = add_node(p, tail, f, CD_PT_MESSAGE, NULL);
    if (next(p) != CD_OK)
        return CD_ERR;
    return parse_body(p, n, depth + 1, close);
}

/* "[a, b, c]" or "[{...}, {...}]": one node per element, all named after the field.
 * Without a ":" before it, protobuf allows only messages in the list. */
static int parse_list(parser *p, cd_pt_node ***tail, const field_name *f, int depth, int colon)
{
    char what[192];
    int line = p->tok.line, col = p->tok.col;
    if (next(p) != CD_OK)
        return CD_ERR;
    if (tok_is(p, ']'))
        return next(p);
    for (;;) {
        int rc;
        if (tok_is(p, '{') || tok_is(p, '<'))
            rc = parse_message(p, tail, f, depth);
        else if (colon)
            rc = parse_scalar(p, tail, f);
        else
            return perr(p, p->tok.line, p->tok.col, "unexpected %s in a list without \":\"; expected \"{\" "
                        "(write \"name: [1, 2]\" for a list of values)", describe_tok(p, what, sizeof what));
        if (rc != CD_OK)
            return CD_ERR;
        if (tok_is(p, ']'))
            return next(p);
        if (!tok_is(p, ','))
            return perr(p, p->tok.line, p->tok.col, "unexpected %s in the list opened at %d:%d; "
                        "expected \",\" or \"]\"", describe_tok(p, what, sizeof what), line, col);
        if (next(p) != CD_OK)
            return CD_ERR;
    }
}

/* One field at the lookahead identifier. */
static int parse_field(parser *p, cd_pt_node ***tail, int depth)
{
    char what[192], q[128];
    field_name f = {p->tok.start, p->tok.end - p->tok.start, p->tok.line, p->tok.col};
    if (next(p) != CD_OK)
        return CD_ERR;
    int colon = tok_is(p, ':');
    if (colon && next(p) != CD_OK)
        return CD_ERR;
    if (tok_is(p, '{') || tok_is(p, '<'))
        return parse_message(p, tail, &f, depth);
    if (tok_is(p, '['))
        return parse_list(p, tail, &f, depth, colon);
    if (colon)
        return parse_scalar(p, tail, &f);
    quote_text(q, sizeof q, p->s + f.start, f.len, 40);
    return perr(p, p->tok.line, p->tok.col, "unexpected %s after field name \"%s\"; expected \":\" or \"{\"",
                describe_tok(p, what, sizeof what), q);
}

/* Fields until close ('}' or '>') or, for the top level (close 0), the end of file. */
static int parse_body(parser *p, cd_pt_node *msg, int depth, char close)
{
    char what[192], q[128];
    cd_pt_node **tail = &msg->child;
    for (;;) {
        const token *t = &p->tok;
        if (t->type == TOK_EOF && !close)
            return CD_OK;
        if (close && tok_is(p, close))
            return next(p);
        if (t->type == TOK_IDENT) {
            if (parse_field(p, &tail, depth) != CD_OK)
                return CD_ERR;
            if ((tok_is(p, ',') || tok_is(p, ';')) && next(p) != CD_OK)
                return CD_ERR;
            continue;
        }
        describe_tok(p, what, sizeof what);
        quote_text(q, sizeof q, msg->name, strlen(msg->name), 40);
        if (t->type == TOK_EOF)
            return perr(p, t->line, t->col, "unexpected end of file inside \"%s\" opened at %d:%d; "
                        "expected \"%c\"", q, msg->line, msg->col, close);
        if (!close)
            return perr(p, t->line, t->col, "unexpected %s at the top level; expected a field name", what);
        return perr(p, t->line, t->col, "unexpected %s inside \"%s\" opened at %d:%d; "
                    "expected a field name or \"%c\"", what, q, msg->line, msg->col, close);
    }
}

cd_pt_node *cd_pt_parse(const char *text, size_t len, const char *filename, char *err, size_t errlen)
{
    parser p = {.s = text ? text : "", .len = text ? len : 0, .line = 1, .col = 1,
                .file = filename, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = 0;
    if (p.len > CD_PT_MAX_BYTES) {
        perr(&p, 1, 1, "input of %zu bytes; expected at most %zu bytes (16 MiB) for a prototxt file",
             p.len, CD_PT_MAX_BYTES);
        return NULL;
    }
    cd_pt_node *root = cd_xcalloc(1, sizeof *root);
    root->name = cd_xstrdup("");
    root->kind = CD_PT_MESSAGE;
    root->line = root->col = 1;
    int rc = next(&p);
    if (rc == CD_OK)
        rc = parse_body(&p, root, 0, 0);
    cd_buf_free(&p.str);
    cd_buf_free(&p.val);
    if (rc != CD_OK) {
        cd_pt_free(root);
        return NULL;
    }
    return root;
}

cd_pt_node *cd_pt_parse_file(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!err)
        errlen = 0;
    /* Check before reading so that a huge file is refused without loading it. */
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            cd_fmt(err, errlen, "%s: is a directory; expected a prototxt file", path);
            return NULL;
        }
        if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > CD_PT_MAX_BYTES) {
            cd_fmt(err, errlen, "%s: file of %lld bytes; expected at most 16 MiB for a prototxt file",
                   path, (long long)st.st_size);
            return NULL;
        }
    }
    size_t len = 0;
    char *text = cd_read_file(path, &len);
    if (!text) {
        cd_fmt(err, errlen, "%s: cannot read (%s); expected a readable prototxt file", path,
               strerror(errno));
        return NULL;
    }
    cd_pt_node *root = cd_pt_parse(text, len, path, err, errlen);
    free(text);
    return root;
}

/* Children are freed recursively (depth is bounded by CD_PT_MAX_DEPTH for parsed
 * trees), siblings in a loop (there may be millions). */
void cd_pt_free(cd_pt_node *root)
{
    while (root) {
        cd_pt_node *next_node = root->next;
        cd_pt_free(root->child);
        free(root->name);
        free(root->text);
        free(root);
        root = next_node;
    }
}

/* ---- numbers ---------------------------------------------------------------------------------- */

/* An integer literal: optional "-", then decimal digits or 0x and hex digits, nothing
 * else. Returns 0 and *v, 1 when text is not an integer literal, 2 when it does not
 * fit in 64 bits. */
static int parse_int(const char *t, long long *v)
{
    int neg = *t == '-';
    t += neg;
    unsigned base = 10;
    if (t[0] == '0' && (t[1] | 32) == 'x') {
        base = 16;
        t += 2;
    }
    if (!*t)
        return 1;
    unsigned long long m = 0;
    int overflow = 0;
    for (; *t; t++) {
        if (base == 10 ? !is_digit(*t) : !is_hex(*t))
            return 1;
        unsigned d = (unsigned)hex_val(*t);
        if (m > (ULLONG_MAX - d) / base)
            overflow = 1;
        else
            m = m * base + d;
    }
    if (overflow || m > (neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX))
        return 2;
    *v = neg ? (long long)(0 - m) : (long long)m;
    return 0;
}

/* Any number token as a double: integers exactly as parse_int reads them, the rest
 * (fractions, exponents, trailing f, inf, nan) through strtod. */
static double number_value(const char *t)
{
    long long v;
    if (parse_int(t, &v) == 0)
        return (double)v;
    return strtod(t, NULL);
}

/* ---- lookups -------------------------------------------------------------------------------------- */

const cd_pt_node *cd_pt_get(const cd_pt_node *msg, const char *name)
{
    return cd_pt_nth(msg, name, 0);
}

int cd_pt_count(const cd_pt_node *msg, const char *name)
{
    int n = 0;
    for (const cd_pt_node *c = msg ? msg->child : NULL; c; c = c->next)
        n += strcmp(c->name, name) == 0;
    return n;
}

const cd_pt_node *cd_pt_nth(const cd_pt_node *msg, const char *name, int i)
{
    for (const cd_pt_node *c = msg ? msg->child : NULL; c; c = c->next)
        if (strcmp(c->name, name) == 0 && i-- == 0)
            return c;
    return NULL;
}

long cd_pt_int(const cd_pt_node *msg, const char *name, long def)
{
    const cd_pt_node *n = cd_pt_get(msg, name);
    long long v;
    if (!n || n->kind != CD_PT_NUMBER || parse_int(n->text, &v) != 0 || v < LONG_MIN || v > LONG_MAX)
        return def;
    return (long)v;
}

double cd_pt_float(const cd_pt_node *msg, const char *name, double def)
{
    const cd_pt_node *n = cd_pt_get(msg, name);
    return n && n->kind == CD_PT_NUMBER ? number_value(n->text) : def;
}

/* The spellings a bool field accepts; the index parity is the value. */
static const char *const bool_names[] = {"false", "true", "False", "True", "0", "1"};

static int bool_value(const cd_pt_node *n)
{
    if (!n || (n->kind != CD_PT_IDENT && n->kind != CD_PT_NUMBER))
        return -1;
    for (size_t i = 0; i < CD_ARRAY_LEN(bool_names); i++)
        if (strcmp(n->text, bool_names[i]) == 0)
            return (int)(i & 1);
    return -1;
}

int cd_pt_bool(const cd_pt_node *msg, const char *name, int def)
{
    int v = bool_value(cd_pt_get(msg, name));
    return v < 0 ? def : v;
}

const char *cd_pt_str(const cd_pt_node *msg, const char *name, const char *def)
{
    const cd_pt_node *n = cd_pt_get(msg, name);
    return n && n->kind != CD_PT_MESSAGE && n->text ? n->text : def;
}

/* ---- validation ------------------------------------------------------------------------------------ */

typedef struct {
    const char *file;
    char *err;
    size_t errlen;
} validator;

const cd_pt_field *cd_pt_find_field(const cd_pt_message *msg, const char *name)
{
    for (const cd_pt_field *f = msg ? msg->fields : NULL; f && f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* Edit distance for "closest:" hints; names longer than 63 bytes get no hint. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[64];
    if (la > 63 || lb > 63)
        return 1 << 20;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* "a, b, c" from a NULL-terminated list, stopping with ", ..." before len runs out. */
static void join_names(char *dst, size_t len, const char *const *names, size_t stride)
{
    size_t o = 0;
    dst[0] = 0;
    for (const char *const *n = names; *n; n = (const char *const *)((const char *)n + stride)) {
        size_t need = strlen(*n) + 2;
        if (o + need + 6 >= len) {
            cd_fmt(dst + o, len - o, "%s...", o ? ", " : "");
            return;
        }
        o += (size_t)snprintf(dst + o, len - o, "%s%s", o ? ", " : "", *n);
    }
}

static int verr(validator *v, const cd_pt_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verr(validator *v, const cd_pt_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_error(v->err, v->errlen, v->file, n->line, n->col, fmt, ap);
    va_end(ap);
    return CD_ERR;
}

static int unknown_field(validator *v, const cd_pt_node *n, const cd_pt_message *msg)
{
    char names[600], q[128], hint[160] = "";
    const char *best = NULL;
    int best_d = 1 << 20;
    for (const cd_pt_field *f = msg->fields; f->name; f++) {
        int d = edit_distance(n->name, f->name);
        if (d < best_d) {
            best_d = d;
            best = f->name;
        }
    }
    if (best && best_d <= 1 + (int)strlen(best) / 8)
        cd_fmt(hint, sizeof hint, " (closest: \"%s\")", best);
    join_names(names, sizeof names, &msg->fields[0].name, sizeof(cd_pt_field));
    quote_text(q, sizeof q, n->name, strlen(n->name), 40);
    return verr(v, n, "unknown field \"%s\" in %s; expected one of: %s%s", q, msg->name, names, hint);
}

/* What a field of type t takes, for messages. */
static const char *type_words(int t)
{
    static const char *const words[] = {
        [CD_PT_T_INT] = "an integer (int32)",
        [CD_PT_T_UINT] = "a non-negative integer (uint32)",
        [CD_PT_T_FLOAT] = "a number",
        [CD_PT_T_BOOL] = "true or false",
        [CD_PT_T_STRING] = "a quoted string",
        [CD_PT_T_ENUM] = "an enum name",
        [CD_PT_T_MSG] = "a message",
        [CD_PT_T_INT64] = "an integer (int64)",
    };
    return t >= 0 && t < (int)CD_ARRAY_LEN(words) && words[t] ? words[t] : "a value";
}

/* Inclusive ranges of the integer types. */
static int int_range(int t, long long *lo, long long *hi)
{
    switch (t) {
    case CD_PT_T_INT: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case CD_PT_T_UINT: *lo = 0; *hi = UINT32_MAX; return 1;
    case CD_PT_T_INT64: *lo = LLONG_MIN; *hi = LLONG_MAX; return 1;
    default: return 0;
    }
}

static void describe_value(const cd_pt_node *n, char *buf, size_t len)
{
    char q[128];
    quote_text(q, sizeof q, n->text ? n->text : "", n->text ? strlen(n->text) : 0, 40);
    static const char *const kinds[] = {"a message", "number %s", "string \"%s\"", "identifier %s"};
    if (n->kind == CD_PT_MESSAGE)
        cd_fmt(buf, len, "a message");
    else if (n->kind > 0 && n->kind < (int)CD_ARRAY_LEN(kinds))
        cd_fmt(buf, len, kinds[n->kind], q);
    else
        cd_fmt(buf, len, "a value");
}

static int validate_msg(validator *v, const cd_pt_node *node, const cd_pt_message *msg);

static int check_integer(validator *v, const cd_pt_node *n, const cd_pt_field *f, const cd_pt_message *msg)
{
    char what[192];
    long long x, lo = 0, hi = 0;
    int rc = n->kind == CD_PT_NUMBER ? parse_int(n->text, &x) : 1;
    int_range(f->type, &lo, &hi);
    describe_value(n, what, sizeof what);
    if (rc == 1)
        return verr(v, n, "field \"%s\" in %s given %s, which is not an integer; expected %s",
                    f->name, msg->name, what, type_words(f->type));
    if (rc == 2 || x < lo || x > hi)
        return verr(v, n, "field \"%s\" in %s given %s, which is out of range; expected %s from %lld to %lld",
                    f->name, msg->name, what, type_words(f->type), lo, hi);
    return CD_OK;
}

static int check_enum(validator *v, const cd_pt_node *n, const cd_pt_field *f, const cd_pt_message *msg)
{
    char what[192], names[600];
    if (n->kind == CD_PT_IDENT)
        for (const char *const *e = f->enum_names; e && *e; e++)
            if (strcmp(*e, n->text) == 0)
                return CD_OK;
    describe_value(n, what, sizeof what);
    join_names(names, sizeof names, f->enum_names ? f->enum_names : (const char *const[]){NULL},
               sizeof(char *));
    return verr(v, n, "field \"%s\" in %s given %s; expected one of: %s", f->name, msg->name, what, names);
}

/* One field's value against its declared type. */
static int check_value(validator *v, const cd_pt_node *n, const cd_pt_field *f, const cd_pt_message *msg)
{
    char what[192];
    describe_value(n, what, sizeof what);
    if (f->type == CD_PT_T_MSG) {
        if (n->kind != CD_PT_MESSAGE)
            return verr(v, n, "field \"%s\" in %s given %s; expected a %s message: %s { ... }",
                        f->name, msg->name, what, f->msg ? f->msg->name : "", f->name);
        return f->msg ? validate_msg(v, n, f->msg) : CD_OK;
    }
    if (n->kind == CD_PT_MESSAGE)
        return verr(v, n, "field \"%s\" in %s given a message; expected %s: %s: <value>",
                    f->name, msg->name, type_words(f->type), f->name);
    switch (f->type) {
    case CD_PT_T_INT:
    case CD_PT_T_UINT:
    case CD_PT_T_INT64:
        return check_integer(v, n, f, msg);
    case CD_PT_T_FLOAT:
        if (n->kind == CD_PT_NUMBER)
            return CD_OK;
        break;
    case CD_PT_T_BOOL:
        if (bool_value(n) >= 0)
            return CD_OK;
        break;
    case CD_PT_T_STRING:
        if (n->kind == CD_PT_STRING)
            return CD_OK;
        if (n->kind == CD_PT_IDENT)
            return verr(v, n, "field \"%s\" in %s given %s; expected a quoted string: %s: \"%s\"",
                        f->name, msg->name, what, f->name, n->text);
        break;
    case CD_PT_T_ENUM:
        return check_enum(v, n, f, msg);
    }
    return verr(v, n, "field \"%s\" in %s given %s; expected %s", f->name, msg->name, what,
                type_words(f->type));
}

/* Every child of node against msg's table. seen[i] is the first node for field i, to
 * catch a non-repeated field given twice. */
static int validate_msg(validator *v, const cd_pt_node *node, const cd_pt_message *msg)
{
    size_t nf = 0;
    while (msg->fields[nf].name)
        nf++;
    const cd_pt_node **seen = cd_xcalloc(nf, sizeof *seen);
    int rc = CD_OK;
    for (const cd_pt_node *c = node->child; c && rc == CD_OK; c = c->next) {
        const cd_pt_field *f = cd_pt_find_field(msg, c->name);
        if (!f) {
            rc = unknown_field(v, c, msg);
            break;
        }
        size_t i = (size_t)(f - msg->fields);
        if (!f->repeated && seen[i]) {
            rc = verr(v, c, "field \"%s\" given again in %s (first at %d:%d); expected it at most once",
                      f->name, msg->name, seen[i]->line, seen[i]->col);
            break;
        }
        if (!seen[i])
            seen[i] = c;
        rc = check_value(v, c, f, msg);
    }
    free(seen);
    return rc;
}

int cd_pt_validate(const cd_pt_node *root, const cd_pt_message *msg, const char *filename,
                   char *err, size_t errlen)
{
    if (!err)
        errlen = 0;
    validator v = {filename, err, errlen};
    if (errlen)
        err[0] = 0;
    if (!root || !msg) {
        cd_fmt(err, errlen, "%s:1:1: no %s; expected a parsed file and a schema",
               filename ? filename : "<input>", root ? "schema" : "tree");
        return CD_ERR;
    }
    if (root->kind != CD_PT_MESSAGE)
        return verr(&v, root, "a value where %s was expected; expected a message", msg->name);
    return validate_msg(&v, root, msg);
}
