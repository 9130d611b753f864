/* DIGITS's model download: /models/<id>/download[.tar|.tar.gz|.tgz|.tar.bz2|.zip] with ?epoch=N (or
 * snapshot_epoch, iteration) gives the files to use the model elsewhere: the deploy
 * and original networks, the solver, labels, mean, weights and info.json. The model's
 * worker writes them (it has the network parsed); the server packs them. */
#define _GNU_SOURCE
#include "api_infer.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "archive.h"
#include "cdigits/util.h"

#define RUN_EXPORT 300.0

/* The archive kind from the route: /download (DIGITS's default tar.gz) or its suffix. */
static int route_kind(const char *path)
{
    const char *d = strrchr(path, '/');
    const char *dot = d ? strchr(d, '.') : NULL;
    return dot ? archive_kind_parse(dot + 1) : ARCHIVE_TGZ;
}

void h_model_download(req_t *r)
{
    json_t *job = api_job_param(r), *ans = NULL, *req = NULL;
    if (!job)
        return;
    char dir[PATH_MAX] = "", err[1024];
    const char **names = NULL;
    long iteration;
    double epoch;
    int kind = route_kind(r->path);
    if (strcmp(json_string_value(json_object_get(job, "type")), "model") != 0) {
        reply_error(r, 404, "Job %s is a dataset; only models can be downloaded", r->params[0]);
        goto out;
    }
    if (kind < 0) {
        reply_error(r, 400, "Invalid extension \"%s\": download the model as .tar, .tar.gz (.tgz), .tar.bz2 or .zip",
                    r->nparams > 1 ? r->params[1] : r->path);
        goto out;
    }
    if (infer_snapshot(r, job, &iteration, &epoch) != CD_OK ||
        infer_request_dir(r, job, "export", 0, dir, sizeof dir) != CD_OK)
        goto out;
    const char *name = json_string_value(json_object_get(job, "name"));
    req = json_pack("{s:s, s:s, s:s}", "op", "export", "dir", dir, "name", name ? name : "");
    if (infer_call(r, job, iteration, req, RUN_EXPORT, &ans) != CD_OK)
        goto out;
    json_t *files = json_object_get(ans, "files");
    size_t n = json_array_size(files);
    names = calloc(n + 1, sizeof *names);
    if (!names) {
        reply_error(r, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_array_get(files, i));
    char archive[PATH_MAX + 32];
    snprintf(archive, sizeof archive, "%s/model.%s", dir, archive_ext(kind));
    if (archive_write(kind, dir, names, (int)n, archive, err, sizeof err) != CD_OK) {
        reply_error(r, 500, "%s", err);
        goto out;
    }
    int fd = open(archive, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        reply_error(r, 500, "cannot read %s: %s", archive, strerror(errno));
        goto out;
    }
    char filename[160];
    if (epoch >= 0)
        snprintf(filename, sizeof filename, "%s_epoch_%g.%s", json_string_value(json_object_get(job, "id")),
                 round(epoch * 1000) / 1000, archive_ext(kind));
    else
        snprintf(filename, sizeof filename, "%s_iter_%ld.%s", json_string_value(json_object_get(job, "id")),
                 iteration, archive_ext(kind));
    infer_reply_fd(r, fd, archive_mime(kind), filename);
out:
    if (dir[0])
        infer_remove_dir(dir); /* the reply reads from its open file */
    free(names);
    json_decref(req);
    json_decref(ans);
    json_decref(job);
}
