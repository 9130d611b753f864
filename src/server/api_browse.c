/* The folder picker of the dataset form, the images it may show and DIGITS's path
 * completion: every path is resolved (symlinks, "..") and must lie inside a data root,
 * as for the form's fields. */
#include "internal.h"

#include "api_browse.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cdigits/image.h"
#include "cdigits/util.h"

#define BROWSE_MAX_DIRS 20000 /* sub-folders listed at most */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                  json_string_value(json_object_get(*(json_t *const *)b, "name")));
}


static int inside_roots(const server_t *srv, const char *real)
{
    for (int i = 0; i < srv->nroots; i++)
        if (paths_inside(real, srv->roots[i]))
            return 1;
    return 0;
}

/* Sorts a JSON array in place by cmp (on json_t **); unsorted when memory runs out. */
static void sort_array(json_t *a, int (*cmp)(const void *, const void *))
{
    size_t n = json_array_size(a);
    json_t **items = calloc(n ? n : 1, sizeof *items);
    if (!items)
        return;
    for (size_t i = 0; i < n; i++)
        items[i] = json_incref(json_array_get(a, i));
    qsort(items, n, sizeof *items, cmp);
    json_array_clear(a);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, items[i]);
    free(items);
}

/* Sorts an array of {name, ...} objects by name in place. */
static void sort_by_name(json_t *dirs) { sort_array(dirs, name_cmp); }

/* GET /browse/json?path=DIR: {"path", "parent", "roots", "dirs": [{name, path}],
 * "images", "sample"}: the sub-folders of DIR that stay inside the roots (a symlink
 * out of them is not offered), how many images lie directly in DIR and the first of
 * them by name (null when none), for the form's resize preview. Without a path: the
 * roots themselves as dirs, path and parent null. */
void h_browse(req_t *r)
{
    server_t *srv = r->srv;
    json_t *roots = json_array();
    for (int i = 0; i < srv->nroots; i++)
        json_array_append_new(roots, json_string(srv->roots[i]));
    const char *path = fields_get(r->fields, "path");
    if (!path || !*path) {
        json_t *dirs = json_array();
        for (int i = 0; i < srv->nroots; i++)
            json_array_append_new(dirs, json_pack("{s:s, s:s}", "name", srv->roots[i], "path", srv->roots[i]));
        reply_json(r, 200, json_pack("{s:n, s:n, s:o, s:o, s:n, s:n}", "path", "parent", "roots", roots, "dirs", dirs,
                                     "images", "sample"));
        return;
    }
    char real[PATH_MAX], msg[1024];
    if (paths_check_field(srv, path, 1, 0, real, sizeof real, msg, sizeof msg) != CD_OK) {
        json_decref(roots);
        reply_error(r, 400, "%s", msg);
        return;
    }
    DIR *d = opendir(real);
    if (!d) {
        json_decref(roots);
        reply_error(r, 400, "cannot list %s: %s", real, strerror(errno));
        return;
    }
    json_t *dirs = json_array();
    int images = 0;
    char first[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d)) && json_array_size(dirs) < BROWSE_MAX_DIRS) {
        if (e->d_name[0] == '.')
            continue;
        char child[PATH_MAX * 2], creal[PATH_MAX];
        snprintf(child, sizeof child, "%s/%s", real, e->d_name);
        struct stat st;
        if (stat(child, &st) != 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            if (cd_image_name_ok(e->d_name)) {
                images++;
                if ((!first[0] || strcmp(e->d_name, first) < 0) && realpath(child, creal) && inside_roots(srv, creal))
                    snprintf(first, sizeof first, "%s", e->d_name);
            }
            continue;
        }
        if (!S_ISDIR(st.st_mode) || !realpath(child, creal) || !inside_roots(srv, creal))
            continue;
        json_t *name = json_string(e->d_name); /* NULL for a name that is not UTF-8 */
        if (name)
            json_array_append_new(dirs, json_pack("{s:o, s:s}", "name", name, "path", child));
    }
    closedir(d);
    sort_by_name(dirs);
    json_t *parent = json_null();
    int is_root = 0;
    for (int i = 0; i < srv->nroots; i++)
        is_root |= strcmp(real, srv->roots[i]) == 0;
    if (!is_root) {
        char up[PATH_MAX];
        snprintf(up, sizeof up, "%s", real);
        char *slash = strrchr(up, '/');
        if (slash && slash != up)
            *slash = 0;
        else if (slash)
            slash[1] = 0;
        parent = json_string(up);
    }
    json_t *sample = NULL;
    if (first[0]) {
        char sp[PATH_MAX * 2];
        snprintf(sp, sizeof sp, "%s/%s", real, first);
        sample = json_string(sp);
    }
    if (!sample)
        sample = json_null();
    reply_json(r, 200, json_pack("{s:s, s:o, s:o, s:o, s:i, s:o}", "path", real, "parent", parent, "roots", roots,
                                 "dirs", dirs, "images", images, "sample", sample));
}

/* GET /browse/file?path=IMG: an image file inside the data roots (by its name: .png,
 * .jpg, ...), so that the dataset form can preview the resize of a real image. */
void h_browse_file(req_t *r)
{
    const char *path = fields_get(r->fields, "path");
    char real[PATH_MAX], msg[1024];
    if (paths_check_field(r->srv, path, 0, 0, real, sizeof real, msg, sizeof msg) != CD_OK) {
        /* 404 for a missing file, 403 for one outside the roots or not a regular file */
        int missing = !path || path[0] != '/' || !realpath(path, real);
        reply_error(r, missing ? 404 : 403, "%s", msg);
        return;
    }
    if (!cd_image_name_ok(real)) {
        reply_error(r, 403, "\"%s\" is not an image (.png, .jpg, .jpeg, .bmp, .pgm, .ppm); only images "
                            "of the data roots are served",
                    path);
        return;
    }
    reply_file(r, real);
}

#define COMPLETE_MAX 1000 /* suggestions at most */

/* Appends the entries of folder dir (resolved, inside the roots) whose names start with
 * prefix, as dir/name, when they resolve inside the roots too. Names starting with a dot
 * only when prefix does (as glob's "*" skips them). */
static void complete_in(const server_t *srv, const char *dir, const char *prefix, json_t *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) && json_array_size(out) < COMPLETE_MAX) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strncmp(e->d_name, prefix, plen) != 0 || (e->d_name[0] == '.' && prefix[0] != '.'))
            continue;
        char child[PATH_MAX * 2], creal[PATH_MAX];
        snprintf(child, sizeof child, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", e->d_name);
        if (!realpath(child, creal) || !inside_roots(srv, creal))
            continue;
        json_t *name = json_string(child); /* NULL for a name that is not UTF-8 */
        if (name)
            json_array_append_new(out, name);
    }
    closedir(d);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

void h_autocomplete_path(req_t *r)
{
    server_t *srv = r->srv;
    const char *query = fields_get(r->fields, "query");
    char q[PATH_MAX];
    if (!query)
        query = "";
    int n = snprintf(q, sizeof q, "%s%s", query[0] == '/' ? "" : "/", query);
    json_t *out = json_array();
    if (n > 0 && (size_t)n < sizeof q) {
        /* q is DIR/PREFIX; DIR must resolve inside a root */
        char *slash = strrchr(q, '/'), dir[PATH_MAX], real[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", slash == q ? 1 : (int)(slash - q), q);
        if (realpath(dir, real) && inside_roots(srv, real))
            complete_in(srv, real, slash + 1, out);
        /* the roots complete a query that is the start of their path */
        for (int i = 0; i < srv->nroots && json_array_size(out) < COMPLETE_MAX; i++)
            if (strncmp(srv->roots[i], q, (size_t)n) == 0)
                json_array_append_new(out, json_string(srv->roots[i]));
    }
    sort_array(out, str_cmp);
    reply_json(r, 200, json_pack("{s:o}", "suggestions", out));
}
