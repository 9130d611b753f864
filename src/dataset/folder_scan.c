/* Walking a folder of class folders: class names from the first level, image files
 * found recursively below each, everything in sorted (strcmp) order so a dataset made
 * twice from the same files is the same. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cdigits/util.h"

#define MAX_DEPTH 32 /* deeper trees are most likely a symlink loop */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = cd_xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* The non-hidden names in dir, sorted. */
static int list_dir(const char *dir, char ***names, size_t *count, char *err, size_t errlen)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return ds_err(err, errlen, "cannot open folder %s: %s; check the path and its "
                      "permissions", dir, strerror(errno));
    size_t n = 0, cap = 0;
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = cd_xrealloc(v, cap * sizeof *v);
        }
        v[n++] = cd_xstrdup(e->d_name);
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return CD_OK;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int ds_scan_classes(const char *dir, char ***names, int *count, ds_skips *skips, char *err,
                    size_t errlen)
{
    char **all;
    size_t n;
    *names = NULL;
    *count = 0;
    if (list_dir(dir, &all, &n, err, errlen) != CD_OK)
        return CD_ERR;
    char **out = cd_xcalloc(n ? n : 1, sizeof *out);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = join(dir, all[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            out[k++] = all[i], all[i] = NULL;
        else
            ds_skip(skips, path, "not in a class folder");
        free(path);
    }
    free_names(all, n);
    *names = out;
    *count = k;
    return CD_OK;
}

static int walk(const char *dir, int depth, int label, ds_items *out, ds_skips *skips, char *err,
                size_t errlen)
{
    if (depth > MAX_DEPTH)
        return ds_err(err, errlen, "%s is more than %d folders deep (a symbolic link loop?); "
                      "remove the loop", dir, MAX_DEPTH);
    char **names;
    size_t n;
    if (list_dir(dir, &names, &n, err, errlen) != CD_OK)
        return CD_ERR;
    int rc = CD_OK;
    if (ds_stop_requested())
        rc = ds_err(err, errlen, "stopped on request before the dataset was complete");
    for (size_t i = 0; i < n && rc == CD_OK; i++) {
        char *path = join(dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0) {
            ds_skip(skips, path, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(path, depth + 1, label, out, skips, err, errlen);
        } else if (!S_ISREG(st.st_mode)) {
            ds_skip(skips, path, "not a regular file");
        } else if (!cd_image_name_ok(names[i])) {
            ds_skip(skips, path, "not a .png, .jpg, .jpeg, .bmp, .pgm or .ppm file");
        } else {
            ds_items_push(out, path, label);
            path = NULL;
        }
        free(path);
    }
    free_names(names, n);
    return rc;
}

int ds_scan_images(const char *dir, int label, ds_items *out, ds_skips *skips, char *err,
                   size_t errlen)
{
    return walk(dir, 0, label, out, skips, err, errlen);
}
