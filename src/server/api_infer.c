/* DIGITS's classify_one and classify_many: the top classes of images with a trained
 * model, run by `cdigits-worker classify` under an inference slot. Images come from
 * the data roots (image_path, image_list lines) or with the request (image_file). */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

#define INFER_WAIT 300.0 /* seconds to wait for an inference slot */
#define INFER_RUN 600.0  /* seconds an inference may take */

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* DIGITS's job_from_request: the model named by job_id. NULL after a reply. */
static json_t *model_from_request(req_t *r)
{
    const char *id = fields_get(r->fields, "job_id");
    if (!id || !*id) {
        reply_error(r, 400, "job_id is a required field");
        return NULL;
    }
    json_t *job = store_job_get(r->srv->store, id);
    if (!job) {
        reply_error(r, 404, "Job not found: %s", id);
        return NULL;
    }
    if (strcmp(sval(job, "type"), "model") != 0) {
        reply_error(r, 400, "Job %s is a dataset; classify with a model job", id);
        json_decref(job);
        return NULL;
    }
    return job;
}

/* snapshot_epoch -> "--iteration N" (none: the newest snapshot). CD_ERR after a reply. */
static int snapshot_iteration(req_t *r, json_t *job, char *buf, size_t len)
{
    buf[0] = 0;
    const char *e = fields_get(r->fields, "snapshot_epoch");
    if (!e || !*e)
        return CD_OK;
    char *end;
    double epoch = strtod(e, &end);
    if (*end || !isfinite(epoch)) {
        reply_error(r, 400, "snapshot_epoch \"%s\" is not a number", e);
        return CD_ERR;
    }
    json_t *snaps = store_snapshot_list(r->srv->store, sval(job, "id"));
    size_t i;
    json_t *s;
    long long it = -1;
    json_array_foreach(snaps, i, s)
    {
        if (fabs(json_number_value(json_object_get(s, "epoch")) - epoch) < 1e-3)
            it = json_integer_value(json_object_get(s, "iteration"));
    }
    json_decref(snaps);
    if (it <= 0) {
        reply_error(r, 400, "Job %s has no snapshot of epoch %g; see its snapshots in /models/%s/json", sval(job, "id"),
                    epoch, sval(job, "id"));
        return CD_ERR;
    }
    snprintf(buf, len, "%lld", it);
    return CD_OK;
}

/* Writes an uploaded image into <data>/tmp with its extension; CD_ERR after a reply. */
static int save_upload(req_t *r, const field_t *f, char *path, size_t len)
{
    const char *ext = f->filename ? strrchr(f->filename, '.') : NULL;
    char suffix[16] = ".img";
    if (ext && strlen(ext) < sizeof suffix) {
        snprintf(suffix, sizeof suffix, "%s", ext);
        for (char *p = suffix + 1; *p; p++)
            if (!isalnum((unsigned char)*p))
                *p = '_';
    }
    snprintf(path, len, "%s/../tmp/upload-XXXXXX%s", r->srv->jobs_dir, suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) {
        reply_error(r, 500, "cannot store the uploaded image: %s", strerror(errno));
        return CD_ERR;
    }
    size_t done = 0;
    while (done < f->len) {
        ssize_t w = write(fd, f->value + done, f->len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            unlink(path);
            reply_error(r, 500, "cannot store the uploaded image: %s", strerror(errno));
            return CD_ERR;
        }
        done += (size_t)w;
    }
    close(fd);
    return CD_OK;
}

/* Runs the classifier; the parsed {"iteration", "classifications"} or NULL after a reply. */
static json_t *classify(req_t *r, json_t *job, const char *iteration, const char *const *paths, int n, int top)
{
    int nargs = 0;
    const char **args = calloc((size_t)n + 8, sizeof *args);
    if (!args) {
        reply_error(r, 500, "out of memory");
        return NULL;
    }
    char topbuf[16];
    snprintf(topbuf, sizeof topbuf, "%d", top);
    args[nargs++] = "--model";
    args[nargs++] = sval(job, "dir");
    if (iteration[0]) {
        args[nargs++] = "--iteration";
        args[nargs++] = iteration;
    }
    args[nargs++] = "--top";
    args[nargs++] = topbuf;
    for (int i = 0; i < n; i++)
        args[nargs++] = paths[i];
    char *out = NULL, *errout = NULL;
    size_t outlen = 0;
    int status = -1;
    cd_err_t err;
    int rc = sched_run_classify(r->srv->sched, args, nargs, INFER_WAIT, INFER_RUN, &out, &outlen, &errout, &status,
                                &err);
    free(args);
    json_t *res = NULL;
    if (rc == CD_OK && out)
        res = json_loadb(out, outlen, 0, NULL);
    if (rc != CD_OK)
        reply_err(r, &err);
    else if (!res || !json_is_object(json_object_get(res, "classifications")))
        reply_error(r, status == 0 ? 500 : 400, "%s", status == 0 ? "the classifier answered no JSON" : err.msg);
    if (res && rc == CD_OK && status != 0)
        json_object_set_new(res, "warnings", json_string(errout ? errout : err.msg));
    free(out);
    free(errout);
    if (r->resp) {
        json_decref(res);
        return NULL;
    }
    return res;
}

void h_classify_one(req_t *r)
{
    json_t *job = model_from_request(r);
    if (!job)
        return;
    char iteration[32], path[PATH_MAX], msg[1024], tmp[PATH_MAX] = "";
    if (snapshot_iteration(r, job, iteration, sizeof iteration) != CD_OK)
        goto out;
    const char *image_path = fields_get(r->fields, "image_path");
    const field_t *file = fields_find(r->fields, "image_file");
    if (image_path && *image_path) {
        if (paths_check_field(r->srv, image_path, 0, 0, path, sizeof path, msg, sizeof msg) != CD_OK) {
            json_t *errors = json_object();
            form_add_error(errors, "image_path", "%s", msg);
            reply_form_errors(r, errors);
            goto out;
        }
    } else if (file && file->len) {
        if (save_upload(r, file, tmp, sizeof tmp) != CD_OK)
            goto out;
        snprintf(path, sizeof path, "%s", tmp);
    } else {
        reply_error(r, 400, "must provide image_path or image_file");
        goto out;
    }
    const char *one[] = {path};
    json_t *res = classify(r, job, iteration, one, 1, 5);
    if (res) {
        json_t *pred = json_object_get(json_object_get(res, "classifications"), path);
        if (!pred) {
            reply_error(r, 400, "the image could not be classified: %s", sval(res, "warnings"));
        } else {
            json_t *outj = json_pack("{s:O, s:O}", "predictions", pred, "snapshot_iteration",
                                     json_object_get(res, "iteration"));
            reply_json(r, 200, outj);
        }
        json_decref(res);
    }
out:
    if (tmp[0])
        unlink(tmp);
    json_decref(job);
}

void h_classify_many(req_t *r)
{
    json_t *job = model_from_request(r);
    if (!job)
        return;
    char iteration[32], folder[PATH_MAX] = "", msg[1024];
    char **paths = NULL;
    int n = 0, cap = 0;
    json_t *errors = json_object();
    if (snapshot_iteration(r, job, iteration, sizeof iteration) != CD_OK)
        goto out;
    const field_t *list = fields_find(r->fields, "image_list");
    if (!list || !list->len) {
        reply_error(r, 400, "image_list is a required field");
        goto out;
    }
    const char *f = fields_get(r->fields, "image_folder");
    if (f && *f && paths_check_field(r->srv, f, 1, 0, folder, sizeof folder, msg, sizeof msg) != CD_OK) {
        form_add_error(errors, "image_folder", "%s", msg);
        reply_form_errors(r, errors);
        errors = NULL;
        goto out;
    }
    const char *nt = fields_get(r->fields, "num_test_images");
    int limit = nt && *nt ? atoi(nt) : 0;
    /* DIGITS's read_image_list: "path" or "path label" per line, relative to image_folder */
    char *text = strndup(list->value, list->len), *save = NULL;
    json_t *skipped = json_object();
    for (char *line = text ? strtok_r(text, "\r\n", &save) : NULL; line; line = strtok_r(NULL, "\r\n", &save)) {
        while (isspace((unsigned char)*line))
            line++;
        size_t len = strlen(line);
        while (len && isspace((unsigned char)line[len - 1]))
            line[--len] = 0;
        if (!len)
            continue;
        char *sp = line + len;
        while (sp > line && isdigit((unsigned char)sp[-1]))
            sp--;
        if (sp > line && sp < line + len && isspace((unsigned char)sp[-1])) {
            char *e = sp - 1;
            while (e > line && isspace((unsigned char)e[-1]))
                e--;
            *e = 0;
        }
        char full[PATH_MAX * 2], real[PATH_MAX];
        if (line[0] != '/' && folder[0])
            snprintf(full, sizeof full, "%s/%s", folder, line);
        else
            snprintf(full, sizeof full, "%s", line);
        if (paths_check_field(r->srv, full, 0, 0, real, sizeof real, msg, sizeof msg) != CD_OK) {
            json_object_set_new(skipped, full, json_string(msg));
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **np = realloc(paths, (size_t)cap * sizeof *np);
            if (!np)
                break;
            paths = np;
        }
        paths[n++] = strdup(real);
        if (limit > 0 && n >= limit)
            break;
    }
    free(text);
    if (n == 0) {
        json_decref(skipped);
        reply_error(r, 400, "Unable to classify any image from the file: no line names a readable image inside %s",
                    r->srv->roots_text);
        goto out;
    }
    json_t *res = classify(r, job, iteration, (const char *const *)paths, n, 5);
    if (res) {
        json_t *outj = json_pack("{s:O, s:O}", "classifications", json_object_get(res, "classifications"),
                                 "snapshot_iteration", json_object_get(res, "iteration"));
        if (json_object_size(skipped))
            json_object_set(outj, "skipped", skipped);
        reply_json(r, 200, outj);
        json_decref(res);
    }
    json_decref(skipped);
out:
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    json_decref(errors);
    json_decref(job);
}
