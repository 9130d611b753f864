/* DIGITS's model download: /models/<id>/download[.tar|.tar.gz|.tgz|.tar.bz2|.zip] with ?epoch=N (or
 * snapshot_epoch, iteration) gives the files to use the model elsewhere: the deploy
 * and original networks, the solver, labels, mean, weights and info.json, and the
 * deploy stage as ONNX (model.onnx) when the export maps every layer (else the archive
 * carries model.onnx.txt saying why). /models/<id>/download.onnx answers the ONNX file
 * alone. The model's worker writes the files (it has the network parsed); the ONNX file
 * comes from `cdigits-worker export-onnx` run under an inference slot (the server links
 * no engine); the server packs them. */
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
#define ONNX_WAIT 30.0  /* for a free inference slot */
#define ONNX_NAME "model.onnx"
#define ONNX_NOTE "model.onnx.txt"

/* What a download route gives besides the archives: a kind past archive.h's. */
enum { DOWNLOAD_ONNX = ARCHIVE_COUNT };

static const struct {
    const char *ext;
    int kind;
    const char *mime;
} g_plain_kinds[] = {{"onnx", DOWNLOAD_ONNX, "application/octet-stream"}};

/* The kind from the route: /download (DIGITS's default tar.gz), an archive's suffix,
 * or a plain file's (g_plain_kinds); -1 when unknown. */
static int route_kind(const char *path)
{
    const char *d = strrchr(path, '/');
    const char *dot = d ? strchr(d, '.') : NULL;
    if (!dot)
        return ARCHIVE_TGZ;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_plain_kinds); i++)
        if (!strcmp(dot + 1, g_plain_kinds[i].ext))
            return g_plain_kinds[i].kind;
    return archive_kind_parse(dot + 1);
}

static const char *kind_ext(int kind)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_plain_kinds); i++)
        if (g_plain_kinds[i].kind == kind)
            return g_plain_kinds[i].ext;
    return archive_ext(kind);
}

static const char *kind_mime(int kind)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(g_plain_kinds); i++)
        if (g_plain_kinds[i].kind == kind)
            return g_plain_kinds[i].mime;
    return archive_mime(kind);
}

/*
 * Runs `cdigits-worker export-onnx` for the job at iteration into out. CD_OK; or CD_ERR
 * with why[len] and *refused 1 when the worker refused the model (a layer the export
 * does not map: its message, without the command's prefix), 0 when it could not run
 * (*status then the HTTP status: 503 without a free slot, 500).
 */
static int export_onnx(req_t *r, json_t *job, long iteration, const char *out, char *why, size_t len, int *refused,
                       int *status)
{
    char iter[32];
    snprintf(iter, sizeof iter, "%ld", iteration);
    char *argv[] = {r->srv->cfg.worker, "export-onnx", "--model", (char *)json_string_value(json_object_get(job, "dir")), "--iteration", iter,
                    "--out", (char *)out, NULL};
    char *sout = NULL, *serr = NULL;
    int exit_status = -1, rc = CD_ERR;
    cd_err_t ce;
    *refused = 0;
    *status = 500;
    if (sched_run_check(r->srv->sched, argv, ONNX_WAIT, RUN_EXPORT, &sout, &serr, &exit_status, &ce) != CD_OK) {
        *status = ce.kind == CD_E_CONFLICT ? 503 : 500;
        snprintf(why, len, "%s", ce.msg);
    } else if (exit_status != 0) {
        const char *msg = serr ? serr : "";
        const char *prefix = "export-onnx: ";
        if (!strncmp(msg, prefix, strlen(prefix)))
            msg += strlen(prefix);
        snprintf(why, len, "%.*s", (int)strcspn(msg, "\n"), msg[0] ? msg : "the worker printed no reason");
        *refused = exit_status == 1;
    } else {
        rc = CD_OK;
    }
    free(sout);
    free(serr);
    return rc;
}

static void attachment_name(json_t *job, long iteration, double epoch, int kind, char *out, size_t len)
{
    if (epoch >= 0)
        snprintf(out, len, "%s_epoch_%g.%s", json_string_value(json_object_get(job, "id")), round(epoch * 1000) / 1000,
                 kind_ext(kind));
    else
        snprintf(out, len, "%s_iter_%ld.%s", json_string_value(json_object_get(job, "id")), iteration,
                 kind_ext(kind));
}

/* Answers the file at path as the job's download of this kind (the reply reads from the
 * open file, so the folder may go). */
static void reply_attachment(req_t *r, const char *path, json_t *job, long iteration, double epoch, int kind,
                             const char *mime)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        reply_error(r, 500, "cannot read %s: %s", path, strerror(errno));
        return;
    }
    char filename[160];
    attachment_name(job, iteration, epoch, kind, filename, sizeof filename);
    infer_reply_fd(r, fd, mime, filename);
}

/* Writes text to dir/name; CD_OK or CD_ERR with err. */
static int write_note(const char *dir, const char *name, const char *text, char *err, size_t errlen)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    int ok = f && fprintf(f, "%s\n", text) >= 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return ok ? CD_OK : CD_ERR;
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
        reply_error(r, 400, "Invalid extension \"%s\": download the model as .tar, .tar.gz (.tgz), .tar.bz2, .zip or "
                    ".onnx",
                    r->nparams > 1 ? r->params[1] : r->path);
        goto out;
    }
    if (infer_snapshot(r, job, &iteration, &epoch) != CD_OK ||
        infer_request_dir(r, job, "export", 0, dir, sizeof dir) != CD_OK)
        goto out;
    char onnx[PATH_MAX + 32], why[1024];
    snprintf(onnx, sizeof onnx, "%s/%s", dir, ONNX_NAME);
    int refused, status;
    if (kind == DOWNLOAD_ONNX) {
        if (export_onnx(r, job, iteration, onnx, why, sizeof why, &refused, &status) != CD_OK) {
            if (refused)
                reply_error(r, 400, "the model cannot be exported as ONNX: %s", why);
            else
                reply_error(r, status, "the ONNX export did not run: %s", why);
            goto out;
        }
        reply_attachment(r, onnx, job, iteration, epoch, kind, kind_mime(kind));
        goto out;
    }
    const char *name = json_string_value(json_object_get(job, "name"));
    req = json_pack("{s:s, s:s, s:s}", "op", "export", "dir", dir, "name", name ? name : "");
    if (infer_call(r, job, iteration, req, RUN_EXPORT, &ans) != CD_OK)
        goto out;
    json_t *files = json_object_get(ans, "files");
    size_t n = json_array_size(files);
    names = calloc(n + 2, sizeof *names);
    if (!names) {
        reply_error(r, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_array_get(files, i));
    /* the ONNX file when the export maps the network, else a note saying why not */
    if (export_onnx(r, job, iteration, onnx, why, sizeof why, &refused, &status) == CD_OK) {
        names[n++] = ONNX_NAME;
    } else {
        char note[1200];
        snprintf(note, sizeof note, "model.onnx is not in this archive: %s", why);
        if (write_note(dir, ONNX_NOTE, note, err, sizeof err) != CD_OK) {
            reply_error(r, 500, "%s", err);
            goto out;
        }
        names[n++] = ONNX_NOTE;
    }
    char archive[PATH_MAX + 32];
    snprintf(archive, sizeof archive, "%s/model.%s", dir, archive_ext(kind));
    if (archive_write(kind, dir, names, (int)n, archive, err, sizeof err) != CD_OK) {
        reply_error(r, 500, "%s", err);
        goto out;
    }
    reply_attachment(r, archive, job, iteration, epoch, kind, archive_mime(kind));
out:
    if (dir[0])
        infer_remove_dir(dir); /* the reply reads from its open file */
    free(names);
    json_decref(req);
    json_decref(ans);
    json_decref(job);
}
