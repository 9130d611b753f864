/* Keeping every path a request names inside the folders it may read: realpath resolves
 * symlinks and "..", then the result must lie under one of the roots. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/util.h"

int paths_inside(const char *real, const char *base)
{
    size_t n = strlen(base);
    if (n == 1 && base[0] == '/')
        return real[0] == '/';
    return strncmp(real, base, n) == 0 && (real[n] == 0 || real[n] == '/');
}

int paths_check_field(const server_t *srv, const char *path, int want_dir, int allow_jobs, char *out, size_t outlen,
                      char *msg, size_t msglen)
{
    const char *what = want_dir ? "Folder" : "File";
    if (!path || !path[0]) {
        snprintf(msg, msglen, "No path given; give the absolute path of a %s on the server", want_dir ? "folder" : "file");
        return CD_ERR;
    }
    if (path[0] != '/') {
        snprintf(msg, msglen, "%s \"%s\" is not an absolute path; give a path that starts with /", what, path);
        return CD_ERR;
    }
    if (strlen(path) >= PATH_MAX) {
        snprintf(msg, msglen, "%s path is longer than %d bytes", what, PATH_MAX - 1);
        return CD_ERR;
    }
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        snprintf(msg, msglen, "%s \"%s\" does not exist (%s); give the path of an existing %s", what, path,
                 strerror(errno), want_dir ? "folder" : "file");
        return CD_ERR;
    }
    int inside = allow_jobs && paths_inside(real, srv->jobs_dir);
    for (int i = 0; i < srv->nroots && !inside; i++)
        inside = paths_inside(real, srv->roots[i]);
    if (!inside) {
        snprintf(msg, msglen,
                 "%s \"%s\" is outside the folders this server may read (%s); put the images under one of them "
                 "or start the server with --data-root",
                 what, path, srv->roots_text);
        return CD_ERR;
    }
    struct stat st;
    if (stat(real, &st) != 0) {
        snprintf(msg, msglen, "%s \"%s\" cannot be read: %s", what, path, strerror(errno));
        return CD_ERR;
    }
    if (want_dir && !S_ISDIR(st.st_mode)) {
        snprintf(msg, msglen, "\"%s\" is not a folder; give the folder that holds one subfolder per class", path);
        return CD_ERR;
    }
    if (!want_dir && !S_ISREG(st.st_mode)) {
        snprintf(msg, msglen, "\"%s\" is not a regular file", path);
        return CD_ERR;
    }
    snprintf(out, outlen, "%s", real);
    return CD_OK;
}

int paths_resolve_under(const char *base, const char *rel, char *out, size_t outlen)
{
    char joined[PATH_MAX * 2], real[PATH_MAX];
    while (*rel == '/')
        rel++;
    if (!*rel || strlen(rel) >= PATH_MAX)
        return CD_ERR;
    snprintf(joined, sizeof joined, "%s/%s", base, rel);
    if (!realpath(joined, real))
        return CD_ERR;
    if (!paths_inside(real, base) || strcmp(real, base) == 0)
        return CD_ERR;
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode))
        return CD_ERR;
    snprintf(out, outlen, "%s", real);
    return CD_OK;
}
