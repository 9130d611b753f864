/* DIGITS's classify_one and classify_many, and top_n: the top classes of images with a
 * trained (or pretrained) model, answered by the model's warm serve-model worker under
 * an inference slot. Images come from the data roots (image_path, image_list lines)
 * or with the request (image_file). Lists stream through the worker in batches and
 * their answer is assembled from its result file, so a long list costs no more
 * memory than its upload (docs/inference.md). Each answer is JSON, or the page of
 * api_infer_html.c for a request that does not want JSON. */
#define _GNU_SOURCE
#include "api_infer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/base64.h"
#include "cdigits/image.h"
#include "cdigits/jobdir.h"
#include "cdigits/list_line.h"
#include "cdigits/model_server.h"
#include "cdigits/util.h"

#define INFER_WAIT 300.0  /* seconds to wait for the model's worker and a slot */
#define RUN_ONE 120.0     /* seconds one image may take (with visualizations) */
#define RUN_LIST 7200.0   /* seconds a list may take */
#define MAX_SKIPPED 1000  /* refused lines listed by name; the rest are counted */
#define VIS_KEEP 10       /* visualization folders kept per model */

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- shared helpers ------------------------------------------------------------------ */

json_t *infer_model_from_request(req_t *r, long *iteration, double *epoch)
{
    const char *id = fields_get(r->fields, "job_id");
    if ((!id || !*id) && r->nparams > 0)
        id = r->params[0];
    json_t *job = api_job_of_type(r, id, "model", infer_error);
    if (job && infer_snapshot(r, job, iteration, epoch) != CD_OK) {
        json_decref(job);
        return NULL;
    }
    return job;
}

/* "1, 2, 3" of the snapshots' epochs (or iterations). */
static void snapshot_names(json_t *snaps, int by_iteration, char *out, size_t len)
{
    size_t used = 0, i;
    json_t *s;
    out[0] = 0;
    json_array_foreach(snaps, i, s)
    {
        if (used >= len)
            break;
        if (by_iteration)
            used += (size_t)snprintf(out + used, len - used, "%s%lld", i ? ", " : "",
                                     (long long)json_integer_value(json_object_get(s, "iteration")));
        else
            used += (size_t)snprintf(out + used, len - used, "%s%g", i ? ", " : "",
                                     round(json_number_value(json_object_get(s, "epoch")) * 1000) / 1000);
    }
}

int infer_snapshot(req_t *r, json_t *job, long *iteration, double *epoch)
{
    const char *id = sval(job, "id");
    const char *es = fields_get(r->fields, "snapshot_epoch");
    if (!es || !*es)
        es = fields_get(r->fields, "epoch");
    const char *is = fields_get(r->fields, "snapshot_iteration");
    if (!is || !*is)
        is = fields_get(r->fields, "iteration");
    json_t *snaps = store_snapshot_list(r->srv->store, id);
    size_t n = json_array_size(snaps), i;
    json_t *s, *pick = NULL;
    char list[1024];
    int rc = CD_ERR;
    if (n == 0) {
        infer_error(r, 404, "Job %s has no snapshot yet; wait for its first snapshot", id);
        goto out;
    }
    if (es && *es) {
        char *end;
        double want = strtod(es, &end);
        if (*end || !isfinite(want)) {
            infer_error(r, 400, "snapshot_epoch \"%s\" is not a number", es);
            goto out;
        }
        double *epochs = cd_xmalloc(sizeof *epochs * n);
        json_array_foreach(snaps, i, s) epochs[i] = json_number_value(json_object_get(s, "epoch"));
        int k = jobdir_epoch_pick(epochs, (int)n, es);
        free(epochs);
        pick = k >= 0 ? json_array_get(snaps, (size_t)k) : NULL;
        if (!pick) {
            snapshot_names(snaps, 0, list, sizeof list);
            infer_error(r, 404, "Job %s has no snapshot of epoch %g; its snapshots are of epochs %s", id, want, list);
            goto out;
        }
    } else if (is && *is) {
        char *end;
        long long want = strtoll(is, &end, 10);
        if (*end || want <= 0) {
            infer_error(r, 400, "snapshot_iteration \"%s\" is not a positive integer", is);
            goto out;
        }
        json_array_foreach(snaps, i, s) if (json_integer_value(json_object_get(s, "iteration")) == want) pick = s;
        if (!pick) {
            snapshot_names(snaps, 1, list, sizeof list);
            infer_error(r, 404, "Job %s has no snapshot at iteration %lld; its snapshots are at iterations %s", id,
                        want, list);
            goto out;
        }
    } else {
        json_array_foreach(snaps, i, s) if (!pick || json_integer_value(json_object_get(s, "iteration")) >
                                                         json_integer_value(json_object_get(pick, "iteration"))) pick = s;
    }
    *iteration = (long)json_integer_value(json_object_get(pick, "iteration"));
    *epoch = json_is_number(json_object_get(pick, "epoch")) ? json_number_value(json_object_get(pick, "epoch")) : -1;
    rc = CD_OK;
out:
    json_decref(snaps);
    return rc;
}

int infer_call(req_t *r, json_t *job, long iteration, json_t *request, double run_s, json_t **answer)
{
    cd_err_t err = {0};
    *answer = NULL;
    json_t *ans = NULL;
    if (model_server_call(model_server_get(r->srv->sched), sval(job, "id"), sval(job, "dir"), iteration, request,
                          INFER_WAIT, run_s, &ans, &err) != CD_OK) {
        infer_error(r, err_http_status(err.kind), "%s", err.msg);
        return CD_ERR;
    }
    if (!json_is_true(json_object_get(ans, "ok"))) {
        int input = !strcmp(sval(ans, "kind"), "input");
        infer_error(r, input ? 400 : 500, "%s",
                    json_object_get(ans, "error") ? sval(ans, "error") : "the classifier gave no answer");
        json_decref(ans);
        return CD_ERR;
    }
    *answer = ans;
    return CD_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void infer_remove_dir(const char *dir)
{
    if (!strstr(dir, "/inference/"))
        return; /* only the folders infer_request_dir makes */
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[PATH_MAX + 300];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

/* Removes the oldest folders named *-<what>-* beyond the newest keep. */
static void prune(const char *base, const char *what, int keep)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    char tag[48], **names = NULL;
    snprintf(tag, sizeof tag, "-%s-", what);
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, tag))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        if ((names[n] = strdup(e->d_name)))
            n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str); /* names start with the time: oldest first */
    for (size_t i = 0; i + (size_t)keep < n; i++) {
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", base, names[i]);
        infer_remove_dir(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

int infer_request_dir(req_t *r, json_t *job, const char *what, int keep, char *dir, size_t len)
{
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/inference", sval(job, "dir"));
    if (mkdir(base, 0755) != 0 && errno != EEXIST) {
        infer_error(r, 500, "cannot create %s: %s", base, strerror(errno));
        return CD_ERR;
    }
    if (keep > 0)
        prune(base, what, keep - 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(dir, len, "%s/%s%06ld-%s-%02d", base, stamp, ts.tv_nsec / 1000, what, attempt);
        if (mkdir(dir, 0755) == 0)
            return CD_OK;
        if (errno != EEXIST)
            break;
    }
    infer_error(r, 500, "cannot create a folder in %s: %s", base, strerror(errno));
    return CD_ERR;
}

void infer_reply_json(req_t *r, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(body);
    if (!text)
        infer_error(r, 500, "the reply could not be encoded");
    else
        reply_buffer(r, status, text, strlen(text), "application/json", "no-store");
}

void infer_reply_fd(req_t *r, int fd, const char *ctype, const char *filename)
{
    struct stat st;
    struct MHD_Response *resp = NULL;
    if (fstat(fd, &st) == 0)
        resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        infer_error(r, 500, "cannot send the reply");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (filename) {
        char cd[512];
        snprintf(cd, sizeof cd, "attachment; filename=\"%s\"", filename);
        MHD_add_response_header(resp, "Content-Disposition", cd);
    }
    reply_response(r, 200, resp);
}

void infer_reply_file(req_t *r, FILE *f, const char *path, const char *ctype, const char *what)
{
    if (fflush(f) != 0 || ferror(f)) {
        fclose(f);
        infer_error(r, 500, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    int fd = dup(fileno(f));
    fclose(f);
    if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0) {
        if (fd >= 0)
            close(fd);
        infer_error(r, 500, "cannot send %s: %s", what, strerror(errno));
        return;
    }
    r->result_page = !strncmp(ctype, "text/html", 9);
    infer_reply_fd(r, fd, ctype, NULL);
}

/* ---- classify_one --------------------------------------------------------------------- */

static int is_image(const field_t *f)
{
    return cd_image_sniff(f->value, f->len) != CD_IMAGE_UNKNOWN;
}

/* The worker's file names become URLs under /files/. */
static void vis_urls(req_t *r, json_t *vis, const char *dir)
{
    const char *rel = dir + strlen(r->srv->jobs_dir);
    while (*rel == '/')
        rel++;
    size_t i;
    json_t *v;
    json_array_foreach(vis, i, v)
    {
        char url[PATH_MAX + 400];
        snprintf(url, sizeof url, "%s/files/%s/%s", r->srv->cfg.url_prefix, rel, sval(v, "image"));
        json_object_set_new(v, "image", json_string(url));
    }
}

json_t *infer_snapshot_fields(json_t *out, long iteration, double epoch)
{
    json_object_set_new(out, "snapshot_iteration", json_integer(iteration));
    json_object_set_new(out, "snapshot_epoch", epoch >= 0 ? json_real(round(epoch * 1e6) / 1e6) : json_null());
    return out;
}

/* The worker's "outputs" (values per image of the network) and "classes" (the dataset's
 * labels): a network with more outputs than labels is read by its first ones, as DIGITS
 * reads it, and the answer's "note" says which are not shown. Returns out. */
static json_t *outputs_note(json_t *out, json_t *ans)
{
    long classes = (long)json_integer_value(json_object_get(ans, "classes"));
    long outputs = (long)json_integer_value(json_object_get(ans, "outputs"));
    if (classes <= 0 || outputs <= classes)
        return out;
    char note[256];
    if (outputs == classes + 1)
        snprintf(note, sizeof note, "the network has %ld outputs and the dataset %ld labels: output %ld is not shown",
                 outputs, classes, outputs);
    else
        snprintf(note, sizeof note,
                 "the network has %ld outputs and the dataset %ld labels: outputs %ld to %ld are not shown", outputs,
                 classes, classes + 1, outputs);
    json_object_set_new(out, "note", json_string(note));
    return out;
}

int infer_image_request(req_t *r, const char *op, char *path, size_t len, infer_image *shown, json_t **req)
{
    const char *image_path = fields_get(r->fields, "image_path");
    const field_t *file = fields_find(r->fields, "image_file");
    char msg[1024];
    *shown = (infer_image){0};
    *req = NULL;
    if (image_path && *image_path) {
        if (paths_check_field(r->srv, image_path, 0, 0, path, len, msg, sizeof msg) != CD_OK) {
            infer_field_error(r, "image_path", msg);
            return CD_ERR;
        }
        *req = json_pack("{s:s, s:s}", "op", op, "image", path);
        shown->path = path;
    } else if (file && file->len) {
        if (!is_image(file)) {
            infer_error(r, 400, "image_file%s%s%s is not a %s image; upload one of those",
                        file->filename ? " (" : "", file->filename ? file->filename : "", file->filename ? ")" : "",
                        cd_image_kinds());
            return CD_ERR;
        }
        char *b64 = cd_base64_encode(file->value, file->len);
        *req = b64 ? json_pack("{s:s, s:s}", "op", op, "image_b64", b64) : NULL;
        free(b64);
        shown->b64 = json_string_value(json_object_get(*req, "image_b64"));
        shown->format = cd_image_sniff(file->value, file->len);
        shown->filename = file->filename;
    } else {
        infer_error(r, 400, "must provide image_path or image_file");
        return CD_ERR;
    }
    if (!*req) {
        infer_error(r, 500, "out of memory");
        return CD_ERR;
    }
    return CD_OK;
}

void h_classify_one(req_t *r)
{
    long iteration;
    double epoch;
    json_t *job = infer_model_from_request(r, &iteration, &epoch), *req = NULL, *ans = NULL;
    if (!job)
        return;
    char path[PATH_MAX], vdir[PATH_MAX] = "";
    infer_image shown;
    if (infer_image_request(r, "classify", path, sizeof path, &shown, &req) != CD_OK)
        goto out;
    json_object_set_new(req, "top", json_integer(5));
    int show = field_truthy(fields_get(r->fields, "show_visualizations"));
    if (show) {
        if (infer_request_dir(r, job, "vis", VIS_KEEP, vdir, sizeof vdir) != CD_OK)
            goto out;
        json_object_set_new(req, "visualize", json_string(vdir));
    }
    if (infer_call(r, job, iteration, req, RUN_ONE, &ans) != CD_OK) {
        if (vdir[0])
            infer_remove_dir(vdir);
        goto out;
    }
    json_t *body = json_pack("{s:O}", "predictions", json_object_get(ans, "predictions"));
    /* a detection model's answer is its boxes (serve-model's classify) */
    static const char *const boxes[] = {"boxes", "bboxes", "box_counts", "image_frame"};
    for (size_t i = 0; i < CD_ARRAY_LEN(boxes); i++)
        if (json_object_get(ans, boxes[i]))
            json_object_set(body, boxes[i], json_object_get(ans, boxes[i]));
    outputs_note(infer_snapshot_fields(body, iteration, epoch), ans);
    json_t *vis = json_object_get(ans, "visualizations");
    if (show && vis) {
        vis_urls(r, vis, vdir);
        json_object_set(body, "visualizations", vis);
    }
    if (infer_wants_html(r)) {
        infer_page_one(r, job, body, &shown);
        json_decref(body);
    } else {
        infer_reply_json(r, 200, body);
    }
out:
    json_decref(ans);
    json_decref(req);
    json_decref(job);
}

/* ---- lists ---------------------------------------------------------------------------- */

void infer_list_skip(infer_list *l, const char *key, long line, const char *why)
{
    l->nskipped++;
    if (json_object_size(l->skipped) < MAX_SKIPPED) {
        char *msg = NULL;
        if (asprintf(&msg, "line %ld: %s", line, why) >= 0) {
            json_object_set_new(l->skipped, key, json_string(msg));
            free(msg);
        }
    }
}

const char *infer_list_path(req_t *r, const char *folder, const char *rel, const char *what, char *path, size_t plen,
                            char *real, size_t rlen, char *msg, size_t mlen)
{
    if (rel[0] != '/' && folder[0])
        snprintf(path, plen, "%s/%s", folder, rel);
    else
        snprintf(path, plen, "%s", rel);
    if (strchr(path, '\t'))
        snprintf(msg, mlen, "a %s with a tab in it cannot be read", what);
    else if (path[0] != '/')
        snprintf(msg, mlen, "a relative %s needs image_folder", what);
    else if (paths_check_field(r->srv, path, 0, 0, real, rlen, msg, mlen) == CD_OK)
        return NULL;
    return msg;
}

/* One line of the upload: "path [label]" (cd_list_line_split, the rule of every list). */
static void list_line(req_t *r, infer_list *lj, FILE *out, char *text, long lineno, const char *folder)
{
    char *line, *word;
    if (!cd_list_line_split(text, 1, &line, &word))
        return;
    const char *label = word ? word : "";
    char key[PATH_MAX * 2], real[PATH_MAX], msg[1024];
    const char *why = infer_list_path(r, folder, line, "path", key, sizeof key, real, sizeof real, msg, sizeof msg);
    if (why) {
        infer_list_skip(lj, key, lineno, why);
        return;
    }
    fprintf(out, "%s\t%s\t%s\n", real, label, key);
    lj->written++;
}

int infer_list_prepare(req_t *r, json_t *job, const char *what, const char *lines, const char *verb,
                       infer_line_fn line_fn, infer_list *lj)
{
    const field_t *list = fields_find(r->fields, "image_list");
    if (!list || !list->len) {
        infer_error(r, 400, "image_list is a required field: upload a file of \"%s\" lines", lines);
        return CD_ERR;
    }
    char folder[PATH_MAX] = "", msg[1024];
    const char *f = fields_get(r->fields, "image_folder");
    if (f && *f && paths_check_field(r->srv, f, 1, 0, folder, sizeof folder, msg, sizeof msg) != CD_OK) {
        infer_field_error(r, "image_folder", msg);
        return CD_ERR;
    }
    if (f && *f)
        snprintf(folder, sizeof folder, "%s", f); /* keys keep the folder as given */
    const char *nt = fields_get(r->fields, "num_test_images");
    long limit = nt && *nt ? atol(nt) : 0;
    if (infer_request_dir(r, job, what, 0, lj->dir, sizeof lj->dir) != CD_OK)
        return CD_ERR;
    snprintf(lj->src, sizeof lj->src, "%s/list.tsv", lj->dir);
    snprintf(lj->results, sizeof lj->results, "%s/results.jsonl", lj->dir);
    FILE *out = fopen(lj->src, "w");
    if (!out) {
        infer_error(r, 500, "cannot write %s: %s", lj->src, strerror(errno));
        return CD_ERR;
    }
    const char *p = list->value, *end = list->value + list->len;
    long lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    while (p < end && (limit <= 0 || lj->written < limit)) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lineno++;
        if (n + 1 > cap) {
            cap = n + 1;
            char *nb = realloc(line, cap);
            if (!nb)
                break;
            line = nb;
        }
        memcpy(line, p, n);
        line[n] = 0;
        if (strlen(line) == n) /* a NUL inside: not a text line */
            line_fn(r, lj, out, line, lineno, folder);
        p += n + 1;
    }
    free(line);
    if (fclose(out) != 0) {
        infer_error(r, 500, "cannot write %s: %s", lj->src, strerror(errno));
        return CD_ERR;
    }
    if (lj->written == 0) {
        infer_error(r, 400, "Unable to %s any image from the file: no line names a readable image inside %s%s", verb,
                    r->srv->roots_text, json_object_size(lj->skipped) ? " (see the skipped lines)" : "");
        return CD_ERR;
    }
    return CD_OK;
}

/* Runs the list through the worker; the answer's summary on CD_OK. */
static json_t *run_list(req_t *r, json_t *job, long iteration, infer_list *lj, int top_n)
{
    json_t *req = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i}", "op", "classify_list", "list", lj->src, "out",
                            lj->results, "top", 5, "top_n", top_n, "batch", 64);
    json_t *ans = NULL;
    int rc = infer_call(r, job, iteration, req, RUN_LIST, &ans);
    json_decref(req);
    return rc == CD_OK ? ans : NULL;
}

/* Writes `"key":value` pairs of the result lines that have `field` (as "line N: why"
 * when as_message), a comma before each unless *count is 0; counts them in *count. */
void infer_copy_pairs(FILE *res, FILE *out, const char *field, long *count, int as_message)
{
    char *line = NULL;
    size_t cap = 0;
    rewind(res);
    while (getline(&line, &cap, res) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *v = json_object_get(o, field);
        if (v) {
            char *msg = NULL;
            if (as_message && asprintf(&msg, "line %lld: %s", (long long)json_integer_value(json_object_get(o, "line")),
                                       json_string_value(v) ? json_string_value(v) : "") < 0)
                msg = NULL;
            json_t *val = msg ? json_string(msg) : json_incref(v);
            char *k = json_dumps(json_object_get(o, "path"), JSON_ENCODE_ANY);
            char *t = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
            if (k && t)
                fprintf(out, "%s%s:%s", *count ? "," : "", k, t);
            (*count)++;
            free(k);
            free(t);
            free(msg);
            json_decref(val);
        }
        json_decref(o);
    }
    free(line);
}

FILE *infer_list_reply_open(req_t *r, const infer_list *l, FILE *res, char *path, size_t len)
{
    snprintf(path, len, "%s/reply.json", l->dir);
    FILE *out = res ? fopen(path, "w+") : NULL;
    if (!out) {
        infer_error(r, 500, "cannot assemble the reply in %s: %s", l->dir, strerror(errno));
        if (res)
            fclose(res);
    }
    return out;
}

void infer_write_skipped(FILE *out, FILE *res, const infer_list *l, const char *const *fields, size_t n,
                         json_t *tail)
{
    long count = 0;
    fputs("\"skipped\":{", out);
    char *mine = json_dumps(l->skipped, JSON_COMPACT);
    size_t ml = mine ? strlen(mine) : 0;
    if (ml > 2) { /* {...} without its braces */
        fprintf(out, "%.*s", (int)(ml - 2), mine + 1);
        count = 1;
    }
    free(mine);
    for (size_t i = 0; i < n; i++)
        infer_copy_pairs(res, out, fields[i], &count, 1);
    char *t = json_dumps(tail, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    fprintf(out, "},%s\n", t ? t + 1 : "}");
    free(t);
}

/* {"classifications": {...}, "skipped": {...}, snapshot and summary fields} into
 * dir/reply.json (or the page into dir/reply.html), then sent from the file (memory
 * stays bounded for long lists). */
static void reply_classifications(req_t *r, json_t *job, infer_list *lj, json_t *ans, long iteration, double epoch)
{
    json_t *tail = json_deep_copy(json_object_get(ans, "summary"));
    infer_snapshot_fields(tail, iteration, epoch);
    json_object_set_new(tail, "skipped_lines", json_integer(lj->nskipped));
    outputs_note(tail, ans);
    FILE *res = fopen(lj->results, "r");
    if (res && infer_wants_html(r)) {
        infer_page_many(r, job, lj->dir, res, lj->skipped, tail);
        fclose(res);
        json_decref(tail);
        return;
    }
    char path[PATH_MAX + 32];
    FILE *out = infer_list_reply_open(r, lj, res, path, sizeof path);
    if (!out) {
        json_decref(tail);
        return;
    }
    long n = 0;
    fputs("{\"classifications\":{", out);
    infer_copy_pairs(res, out, "predictions", &n, 0);
    static const char *const refused[] = {"error", "label_error"};
    fputs("},", out);
    infer_write_skipped(out, res, lj, refused, CD_ARRAY_LEN(refused), tail);
    fclose(res);
    json_decref(tail);
    infer_reply_file(r, out, path, "application/json", "the reply");
}

/* The top_n field of the top_n route: 9 when absent; CD_ERR after a form error. */
static int top_n_field(req_t *r, long *top_n)
{
    const char *tn = fields_get(r->fields, "top_n");
    char *end = NULL;
    *top_n = tn && *tn ? strtol(tn, &end, 10) : 9;
    if ((end && *end) || *top_n < 1 || *top_n > 1000) {
        infer_field_error(r, "top_n", "Number of images must be a whole number from 1 to 1000");
        return CD_ERR;
    }
    return CD_OK;
}

/* The top N images of each class, with the summary's counts. */
static void reply_top_n(req_t *r, json_t *job, infer_list *lj, json_t *ans, long iteration, double epoch)
{
    json_t *summary = json_object_get(ans, "summary");
    json_t *body = json_pack("{s:O, s:O, s:O, s:O, s:O, s:I}", "results", json_object_get(summary, "top_n"), "images",
                             json_object_get(summary, "images"), "classified", json_object_get(summary, "classified"),
                             "failed", json_object_get(summary, "failed"), "skipped", lj->skipped, "skipped_lines",
                             (json_int_t)lj->nskipped);
    outputs_note(infer_snapshot_fields(body, iteration, epoch), ans);
    if (infer_wants_html(r)) {
        infer_page_top_n(r, job, body);
        json_decref(body);
    } else {
        infer_reply_json(r, 200, body);
    }
}

/* The two list routes: the model, its snapshot, the list, one run of the worker over it
 * and the reply; by_class answers the top N images of each class (N: the top_n field)
 * instead of a classification of every image. */
static void classify_list(req_t *r, int by_class)
{
    long iteration, n = 0;
    double epoch;
    json_t *job = infer_model_from_request(r, &iteration, &epoch), *ans = NULL;
    if (!job)
        return;
    infer_list lj = {.skipped = json_object()};
    if ((!by_class || top_n_field(r, &n) == CD_OK) &&
        infer_list_prepare(r, job, by_class ? "topn" : "many", "path [label]", "classify", list_line, &lj) == CD_OK &&
        (ans = run_list(r, job, iteration, &lj, (int)n))) {
        if (by_class)
            reply_top_n(r, job, &lj, ans, iteration, epoch);
        else
            reply_classifications(r, job, &lj, ans, iteration, epoch);
    }
    if (lj.dir[0])
        infer_remove_dir(lj.dir);
    json_decref(ans);
    json_decref(lj.skipped);
    json_decref(job);
}

void h_classify_many(req_t *r) { classify_list(r, 0); }

void h_classify_top_n(req_t *r) { classify_list(r, 1); }
