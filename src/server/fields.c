/* The field map that urlencoded, multipart and JSON bodies (and query strings) decode
 * into, so that every handler reads its input one way. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdigits/util.h"

fields_t *fields_new(void) { return calloc(1, sizeof(fields_t)); }

void fields_free(fields_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].name);
        free(f->v[i].value);
        free(f->v[i].filename);
    }
    free(f->v);
    free(f);
}

int fields_add(fields_t *f, const char *name, const char *value, size_t len, const char *filename)
{
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 16;
        field_t *nv = realloc(f->v, ncap * sizeof *nv);
        if (!nv)
            return CD_ERR;
        f->v = nv;
        f->cap = ncap;
    }
    field_t *x = &f->v[f->n];
    memset(x, 0, sizeof *x);
    x->name = strdup(name);
    x->value = malloc(len + 1);
    x->filename = filename ? strdup(filename) : NULL;
    if (!x->name || !x->value || (filename && !x->filename)) {
        free(x->name);
        free(x->value);
        free(x->filename);
        return CD_ERR;
    }
    if (len)
        memcpy(x->value, value, len);
    x->value[len] = 0;
    x->len = len;
    f->n++;
    return CD_OK;
}

int fields_append(fields_t *f, size_t index, const char *data, size_t len)
{
    if (index >= f->n)
        return CD_ERR;
    field_t *x = &f->v[index];
    char *nv = realloc(x->value, x->len + len + 1);
    if (!nv)
        return CD_ERR;
    memcpy(nv + x->len, data, len);
    x->len += len;
    nv[x->len] = 0;
    x->value = nv;
    return CD_OK;
}

/* "job_ids" matches "job_ids" and "job_ids[]" both ways */
static int same_name(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 2 && strcmp(a + la - 2, "[]") == 0)
        la -= 2;
    if (lb >= 2 && strcmp(b + lb - 2, "[]") == 0)
        lb -= 2;
    return la == lb && strncmp(a, b, la) == 0;
}

const field_t *fields_find(const fields_t *f, const char *name)
{
    if (!f)
        return NULL;
    for (size_t i = 0; i < f->n; i++)
        if (same_name(f->v[i].name, name))
            return &f->v[i];
    return NULL;
}

const char *fields_get(const fields_t *f, const char *name)
{
    const field_t *x = fields_find(f, name);
    return x ? x->value : NULL;
}

int fields_get_all(const fields_t *f, const char *name, const char **out, int max)
{
    int n = 0;
    for (size_t i = 0; f && i < f->n && n < max; i++)
        if (same_name(f->v[i].name, name))
            out[n++] = f->v[i].value;
    return n;
}

static int add_scalar(fields_t *f, const char *name, json_t *v, char *err, size_t errlen)
{
    char buf[64];
    const char *text;
    if (json_is_string(v)) {
        return fields_add(f, name, json_string_value(v), json_string_length(v), NULL);
    } else if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        text = buf;
    } else if (json_is_real(v)) {
        snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
        text = buf;
    } else if (json_is_boolean(v)) {
        text = json_is_true(v) ? "true" : "false";
    } else if (json_is_null(v)) {
        return CD_OK; /* null reads as absent */
    } else {
        snprintf(err, errlen, "field \"%s\": a value must be a string, number, boolean or a list of them", name);
        return CD_ERR;
    }
    return fields_add(f, name, text, strlen(text), NULL);
}

int fields_from_json(fields_t *f, json_t *obj, char *err, size_t errlen)
{
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "the JSON body must be an object of form fields, like {\"dataset_name\": \"x\"}");
        return CD_ERR;
    }
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (json_is_array(v)) {
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e)
            {
                if (json_is_array(e) || json_is_object(e)) {
                    snprintf(err, errlen, "field \"%s\": a list may hold only strings, numbers and booleans", key);
                    return CD_ERR;
                }
                if (add_scalar(f, key, e, err, errlen) != CD_OK)
                    return CD_ERR;
            }
        } else if (add_scalar(f, key, v, err, errlen) != CD_OK) {
            return CD_ERR;
        }
    }
    return CD_OK;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* decodes src[0..n) in place of dst; returns the decoded length or -1 */
static long url_decode(char *dst, const char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '+') {
            dst[o++] = ' ';
        } else if (src[i] == '%') {
            if (i + 2 >= n)
                return -1;
            int a = hexval((unsigned char)src[i + 1]), b = hexval((unsigned char)src[i + 2]);
            if (a < 0 || b < 0)
                return -1;
            dst[o++] = (char)(a * 16 + b);
            i += 2;
        } else {
            dst[o++] = src[i];
        }
    }
    dst[o] = 0;
    return (long)o;
}

int fields_parse_urlencoded(fields_t *f, const char *body, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && body[end] != '&')
            end++;
        if (end > i) {
            size_t eq = i;
            while (eq < end && body[eq] != '=')
                eq++;
            size_t nlen = eq - i, vlen = eq < end ? end - eq - 1 : 0;
            char *name = malloc(nlen + 1), *value = malloc(vlen + 1);
            if (!name || !value) {
                free(name);
                free(value);
                return CD_ERR;
            }
            long dn = url_decode(name, body + i, nlen);
            long dv = url_decode(value, eq < end ? body + eq + 1 : "", vlen);
            int rc = dn < 0 || dv < 0 ? CD_ERR : fields_add(f, name, value, (size_t)dv, NULL);
            free(name);
            free(value);
            if (rc != CD_OK)
                return CD_ERR;
        }
        i = end + 1;
    }
    return CD_OK;
}

json_t *fields_to_json(const fields_t *f)
{
    json_t *o = json_object();
    for (size_t i = 0; f && i < f->n; i++) {
        const field_t *x = &f->v[i];
        if (x->filename)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%s", x->name);
        size_t n = strlen(name);
        if (n >= 2 && strcmp(name + n - 2, "[]") == 0)
            name[n - 2] = 0;
        json_t *prev = json_object_get(o, name);
        json_t *v = json_stringn(x->value, x->len);
        if (!v) /* not UTF-8: keep what can be kept */
            v = json_string("");
        if (!prev) {
            json_object_set_new(o, name, v);
        } else if (json_is_array(prev)) {
            json_array_append_new(prev, v);
        } else {
            json_t *arr = json_array();
            json_array_append(arr, prev);
            json_array_append_new(arr, v);
            json_object_set_new(o, name, arr);
        }
    }
    return o;
}

int field_truthy(const char *v)
{
    if (!v)
        return 0;
    while (isspace((unsigned char)*v))
        v++;
    static const char *const no[] = {"", "false", "0", "off", "no", "n", "none"};
    for (size_t i = 0; i < CD_ARRAY_LEN(no); i++)
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    return 1;
}
