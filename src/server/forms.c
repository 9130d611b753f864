/* Form validation from tables: each form is an array of form_field_t; this file turns
 * the request's fields into typed values and DIGITS-shaped errors {field: [message]}. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdigits/util.h"

void form_add_error(json_t *errors, const char *field, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *list = json_object_get(errors, field);
    if (!list) {
        list = json_array();
        json_object_set_new(errors, field, list);
    }
    json_t *s = json_string(msg);
    json_array_append_new(list, s ? s : json_string("invalid value"));
}

static const char *spec_default(const form_field_t *spec, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(spec[i].name, name) == 0)
            return spec[i].def;
    return NULL;
}

/* The raw value of name with its default applied. */
static const char *raw_value(const form_field_t *spec, size_t n, const fields_t *in, const char *name)
{
    const char *v = fields_get(in, name);
    return v ? v : spec_default(spec, n, name);
}

/* "method=folder&has_val_folder=1": every term must hold; "x=1" on a checkbox means
 * checked, "x=0" unchecked; "x!=auto" holds when x is absent or anything but auto. */
static int condition_holds(const form_field_t *spec, size_t n, const fields_t *in, const char *when)
{
    if (!when || !when[0])
        return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", when);
    char *save = NULL;
    for (char *term = strtok_r(buf, "&", &save); term; term = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(term, '=');
        if (!eq)
            continue;
        int negate = eq > term && eq[-1] == '!';
        eq[-negate] = 0;
        *eq = 0;
        const char *want = eq + 1, *have = raw_value(spec, n, in, term);
        int ok;
        if (negate)
            ok = !have || strcasecmp(have, want) != 0;
        else if (strcmp(want, "1") == 0)
            ok = field_truthy(have);
        else if (strcmp(want, "0") == 0)
            ok = !field_truthy(have);
        else
            ok = have && strcmp(have, want) == 0;
        if (!ok)
            return 0;
    }
    return 1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* Whether what follows a number is only white space (" 12 " is 12, "12px" is no number). */
static int blank(const char *rest)
{
    while (isspace((unsigned char)*rest))
        rest++;
    return *rest == 0;
}

static int parse_int(const char *text, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || errno || !blank(end))
        return CD_ERR;
    *out = v;
    return CD_OK;
}

static int parse_float(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || !blank(end))
        return CD_ERR;
    *out = v;
    return CD_OK;
}

/* Range message: "must be at least 1", "must be between 0 and 1000000" (bounds in full, not 1e+06).
 * A whole-number field's bounds are the whole numbers inside them (1 for a minimum of 1e-06). */
static int check_range(const form_field_t *f, double v, json_t *errors, const char *text)
{
    int lo = !isnan(f->min), hi = !isnan(f->max), whole = f->type == F_INT || f->type == F_INTS;
    double min = whole ? ceil(f->min) : f->min, max = whole ? floor(f->max) : f->max;
    if ((lo && v < min) || (hi && v > max)) {
        if (lo && hi)
            form_add_error(errors, f->name, "%s must be between %.15g and %.15g; got %s", f->label, min, max, text);
        else if (lo)
            form_add_error(errors, f->name, "%s must be at least %.15g; got %s", f->label, min, text);
        else
            form_add_error(errors, f->name, "%s must be at most %.15g; got %s", f->label, max, text);
        return CD_ERR;
    }
    return CD_OK;
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* The items of one list value: DIGITS's MultiNumberField takes "0.01,0.02" and the
 * Python list "[0.01, 0.02]" alike, so one pair of enclosing brackets is dropped. A
 * bracket left unpaired stays, and the item holding it is not a number. */
static char *list_items(char *text)
{
    char *t = trim(text);
    size_t n = strlen(t);
    if (n >= 2 && t[0] == '[' && t[n - 1] == ']') {
        t[n - 1] = 0;
        t++;
    }
    return t;
}

/* A list field: repeated values, each of which may hold a comma list, bracketed or not. */
static json_t *parse_list(const form_field_t *f, const fields_t *in, json_t *errors)
{
    const char *vals[64];
    int nv = fields_get_all(in, f->name, vals, 64);
    if (nv == 0 && f->def) {
        vals[0] = f->def;
        nv = 1;
    }
    json_t *out = json_array();
    for (int i = 0; i < nv; i++) {
        char *copy = strdup(vals[i]), *save = NULL;
        if (!copy)
            break;
        for (char *tok = strtok_r(list_items(copy), ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *t = trim(tok);
            if (!*t)
                continue;
            if (f->type == F_INTS) {
                long long v;
                if (parse_int(t, &v) != CD_OK) {
                    form_add_error(errors, f->name, "%s must be whole numbers separated by commas; \"%s\" is not one",
                                   f->label, t);
                    continue;
                }
                if (check_range(f, (double)v, errors, t) == CD_OK)
                    json_array_append_new(out, json_integer(v));
            } else {
                double v;
                if (parse_float(t, &v) != CD_OK) {
                    form_add_error(errors, f->name, "%s must be numbers separated by commas; \"%s\" is not a number",
                                   f->label, t);
                    continue;
                }
                if (check_range(f, v, errors, t) == CD_OK)
                    json_array_append_new(out, json_real(v));
            }
        }
        free(copy);
    }
    return out;
}

static void validate_one(const server_t *srv, const form_field_t *f, const form_field_t *spec, size_t n,
                         const fields_t *in, json_t *values, json_t *errors)
{
    if (f->type == F_INTS || f->type == F_FLOATS) {
        json_t *list = parse_list(f, in, errors);
        if (f->required && json_array_size(list) == 0 && !json_object_get(errors, f->name))
            form_add_error(errors, f->name, "%s is required", f->label);
        json_object_set_new(values, f->name, list);
        return;
    }
    if (f->type == F_UPLOAD) {
        const field_t *x = fields_find(in, f->name);
        if (!x || (x->len == 0 && !x->filename)) {
            if (f->required)
                form_add_error(errors, f->name, "%s is required: upload the file with the request", f->label);
            json_object_set_new(values, f->name, json_null());
            return;
        }
        json_object_set_new(values, f->name, json_string(f->name)); /* the handler reads the bytes */
        return;
    }
    if (f->type == F_BOOL) {
        const char *v = raw_value(spec, n, in, f->name);
        json_object_set_new(values, f->name, json_boolean(field_truthy(v)));
        return;
    }
    const char *raw = raw_value(spec, n, in, f->name);
    const field_t *given = fields_find(in, f->name);
    if (given && given->value == raw && memchr(given->value, 0, given->len)) {
        /* a C string would end at the NUL and keep only what comes before it */
        size_t at = strlen(given->value);
        form_add_error(errors, f->name, "%s must be text, but it holds a NUL byte (byte %zu of %zu): a binary file, not "
                       "a %s", f->label, at + 1, given->len, f->type == F_TEXT ? "text definition" : "value");
        json_object_set_new(values, f->name, json_null());
        return;
    }
    char *copy = raw ? strdup(raw) : NULL;
    char *v = copy ? (f->type == F_TEXT ? copy : trim(copy)) : NULL;
    if (!v || !*v) {
        if (f->required)
            form_add_error(errors, f->name, "%s is required", f->label);
        json_object_set_new(values, f->name, json_null());
        free(copy);
        return;
    }
    switch (f->type) {
    case F_STRING:
    case F_TEXT: {
        json_t *s = json_string(v);
        if (!s)
            form_add_error(errors, f->name, "%s must be UTF-8 text", f->label);
        json_object_set_new(values, f->name, s ? s : json_null());
        break;
    }
    case F_INT: {
        long long x;
        if (parse_int(v, &x) != CD_OK)
            form_add_error(errors, f->name, "%s must be a whole number; got \"%s\"", f->label, v);
        else if (check_range(f, (double)x, errors, v) == CD_OK)
            json_object_set_new(values, f->name, json_integer(x));
        break;
    }
    case F_FLOAT: {
        double x;
        if (parse_float(v, &x) != CD_OK)
            form_add_error(errors, f->name, "%s must be a number; got \"%s\"", f->label, v);
        else if (check_range(f, x, errors, v) == CD_OK)
            json_object_set_new(values, f->name, json_real(x));
        break;
    }
    case F_CHOICE:
        if (!choice_ok(f->choices, v)) {
            char list[512];
            snprintf(list, sizeof list, "%s", f->choices);
            for (char *p = list; *p; p++)
                if (*p == '|')
                    *p = ',';
            form_add_error(errors, f->name, "%s must be one of %s; got \"%s\"", f->label, list, v);
        } else {
            json_object_set_new(values, f->name, json_string(v));
        }
        break;
    case F_DIR:
    case F_FILE: {
        char resolved[PATH_MAX], msg[1024];
        if (paths_check_field(srv, v, f->type == F_DIR, f->type == F_FILE, resolved, sizeof resolved, msg,
                              sizeof msg) != CD_OK)
            form_add_error(errors, f->name, "%s", msg);
        else
            json_object_set_new(values, f->name, json_string(resolved));
        break;
    }
    default:
        break;
    }
    free(copy);
}

/* ---- DIGITS fields cdigits does not implement ----------------------------------------- */

/* How a field's value is compared with its DIGITS default. */
enum { U_CHOICE, U_NUMBER, U_UNCHECKED, U_EMPTY };

/* A DIGITS 6.1 field that no cdigits form implements. DIGITS's own pages post every
 * field, most at their defaults, so a field left out or posted at its default is
 * accepted and means what DIGITS means by it; any other value is refused, naming the
 * field, instead of being dropped in silence. A row belongs to the form whose table
 * holds its `form` field (model_name: the model form, dataset_name: the dataset form). */
typedef struct form_unsupported {
    const char *form, *name;
    int kind;
    const char *accepted; /* U_CHOICE: "a|b"; U_NUMBER: the default */
    const char *what;     /* what cdigits does not implement */
} form_unsupported_t;

static const form_unsupported_t g_unsupported[] = {
    {"model_name", "framework", U_CHOICE, "caffe", "frameworks other than Caffe (Torch, TensorFlow)"},
    {"model_name", "python_layer_from_client", U_UNCHECKED, NULL, "Python layers"},
    {"model_name", "python_layer_client_file", U_EMPTY, NULL, "Python layers"},
    {"model_name", "python_layer_server_file", U_EMPTY, NULL, "Python layers"},
    {"dataset_name", "backend", U_CHOICE, "lmdb", "DB backends other than LMDB (HDF5)"},
    /* DIGITS's generic dataset form (dsopts_batch_size is its field alone) */
    {"dsopts_batch_size", "dsopts_backend", U_CHOICE, "lmdb", "DB backends other than LMDB"},
    {"dsopts_batch_size", "dsopts_label_encoding", U_CHOICE, "none|png",
     "JPEG label encoding (lossy labels change classes; the label db is PNG)"},
};

static int spec_has(const form_field_t *spec, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(spec[i].name, name) == 0)
            return 1;
    return 0;
}

/* Whether a posted value is the field's DIGITS default (or empty, which DIGITS's own
 * pages post for a field they do not show). */
static int unsupported_at_default(const form_unsupported_t *u, const field_t *x)
{
    const char *v = x->value ? x->value : "";
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    char *t = trim(buf);
    double have, want;
    switch (u->kind) {
    case U_CHOICE: return t[0] == 0 || choice_ok(u->accepted, t);
    case U_NUMBER:
        return t[0] == 0 || (parse_float(t, &have) == CD_OK && parse_float(u->accepted, &want) == CD_OK &&
                             fabs(have - want) <= 1e-9 * fmax(1, fabs(want)));
    case U_UNCHECKED: return !field_truthy(t);
    default: return x->len == 0;
    }
}

static void refuse_unsupported(const form_field_t *spec, size_t n, const fields_t *in, json_t *errors)
{
    static const char *const hint[] = {[U_CHOICE] = "", [U_NUMBER] = "", [U_UNCHECKED] = "unchecked",
                                       [U_EMPTY] = "empty"};
    for (size_t i = 0; i < CD_ARRAY_LEN(g_unsupported); i++) {
        const form_unsupported_t *u = &g_unsupported[i];
        const field_t *x = spec_has(spec, n, u->form) ? fields_find(in, u->name) : NULL;
        if (!x || unsupported_at_default(u, x))
            continue;
        form_add_error(errors, u->name, "cdigits does not implement %s yet; leave %s out or at its default (%s)",
                       u->what, u->name, u->accepted ? u->accepted : hint[u->kind]);
    }
}

int form_validate(const server_t *srv, const form_field_t *spec, size_t n, const fields_t *in, json_t **values,
                  json_t **errors)
{
    *values = json_object();
    *errors = json_object();
    for (size_t i = 0; i < n; i++) {
        const form_field_t *f = &spec[i];
        if (!condition_holds(spec, n, in, f->when))
            continue;
        validate_one(srv, f, spec, n, in, *values, *errors);
    }
    refuse_unsupported(spec, n, in, *errors);
    return json_object_size(*errors) == 0;
}
