/* serve-model: a warm classifier. It opens one model job at one snapshot, prints a
 * `ready` line, then answers JSON requests read line by line from stdin with one JSON
 * line each on stdout, until stdin closes, a `quit` request, an idle time without
 * requests, or the removal of the job folder (the model was deleted). The server keeps
 * one per (model, snapshot) so that repeated calls skip loading (docs/inference.md).
 *
 *   {"id": 1, "op": "classify", "image": PATH | "image_b64": BASE64, "top": 5,
 *    "visualize": DIR}             -> {"id": 1, "ok": true, "predictions": [...],
 *                                      "visualizations": [...], "ms": 0.8, "classes": 3,
 *                                      "outputs": 3}
 *   {"id": 2, "op": "classify_list", "list": PATH, "out": PATH, "top": 5, "top_n": 0,
 *    "batch": 64, "limit": 0}      -> {"id": 2, "ok": true, "summary": {...}, "classes",
 *                                      "outputs"}
 * "outputs" is the network's values per image and "classes" the dataset's labels: more
 * outputs than classes means the ones past the labels were left out (the server says
 * so with the answer).
 *   {"id": 5, "op": "infer", "image": PATH | "image_b64": BASE64}
 *                                  -> {"id": 5, "ok": true, "outputs": {blob: values},
 *                                      "task", and for segmentation "mask", "class_counts";
 *                                      for detection "bboxes", "boxes", "box_counts",
 *                                      "image_frame" (cd_det_fields), which classify
 *                                      answers too, with "predictions": []}
 *   {"id": 6, "op": "infer_list", "list": PATH, "out": PATH, "batch": 64, "limit": 0}
 *   {"id": 7, "op": "infer_db", "db": PATH, "labels_db": PATH, "out": PATH, "batch": 64,
 *    "limit": 0}                   -> {"id", "ok": true, "summary": {...}} (infer.h)
 * infer, infer_list and infer_db answer any model by its outputs' names (generic
 * models: segmentation, regression).
 *   {"id": 3, "op": "export", "dir": DIR, "name": NAME} -> {"id": 3, "ok": true, "files": [...]}
 *   {"id": 4, "op": "info"}        -> {"id": 4, "ok": true, ...the ready line's fields}
 *   {"op": "quit"}
 * A request that fails answers {"id", "ok": false, "error": "why", "kind": "input" |
 * "internal"}: "input" when the request's image or list is at fault. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/base64.h"
#include "cdigits/dataset.h"
#include "cdigits/infer.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "commands.h"

#define MAX_LINE ((size_t)512 << 20) /* a request line: a base64 image of up to ~380 MB */
#define SMALL_NET_MACS 2e7           /* below this per image, one CPU thread (LeNet: 2.3e6) */

static void usage(void)
{
    fprintf(stderr, "usage: cdigits-worker serve-model --model JOBDIR [--iteration N] [--gpu N] [--threads N]\n"
                    "                                  [--idle-exit SECONDS]\n"
                    "  reads JSON requests on stdin, answers JSON lines on stdout (docs/inference.md)\n"
                    "  --threads 0 (default): every core, one for a small network\n");
}

static void reply(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!s) {
        s = strdup("{\"ok\":false,\"error\":\"the answer could not be encoded\",\"kind\":\"internal\"}");
        if (!s)
            return;
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

static json_t *fail(json_t *id, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *fail(json_t *id, const char *kind, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_pack("{s:O, s:b, s:s, s:s}", "id", id ? id : json_null(), "ok", 0, "error", msg, "kind", kind);
}

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct server {
    cd_classifier_t *c;
    const char *model;
    char job_name[256];
    json_t *ready;
    float *probs;
    uint8_t rgb[CD_PALETTE_MAX][3]; /* a segmentation model's class colours, read once */
    int rgb_classes;                /* classes rgb was read for (0: not yet) */
} server;

static double ms_since(double t0) { return (cd_now() - t0) * 1000.0; }

/* The classes and the network's outputs per image into an answer; returns it. */
static json_t *with_counts(const server *s, json_t *out)
{
    json_object_set_new(out, "classes", json_integer(cd_classifier_classes(s->c)));
    json_object_set_new(out, "outputs", json_integer(cd_classifier_outputs(s->c)));
    return out;
}

/* Loads the request's "image" (a path) or "image_b64" into img; NULL, or the failure. */
static json_t *request_image(server *s, json_t *req, json_t *id, cd_image_t *img)
{
    const char *path = json_string_value(json_object_get(req, "image"));
    const char *b64 = json_string_value(json_object_get(req, "image_b64"));
    int ch, h, w;
    char err[1024];
    cd_classifier_image_shape(s->c, &ch, &h, &w);
    if (path)
        return cd_image_load(path, ch, img, err, sizeof err) == CD_OK ? NULL : fail(id, "input", "%s", err);
    if (!b64)
        return fail(id, "input", "the request needs image or image_b64");
    size_t len = 0;
    unsigned char *bytes = cd_base64_decode(b64, strlen(b64), &len);
    if (!bytes)
        return fail(id, "input", "image_b64 is not base64");
    int rc = cd_image_decode(bytes, len, ch, img, err, sizeof err);
    free(bytes);
    return rc == CD_OK ? NULL : fail(id, "input", "cannot read the uploaded image: %s", err);
}

static json_t *op_infer(server *s, json_t *req, json_t *id);

static json_t *op_classify(server *s, json_t *req, json_t *id)
{
    if (cd_classifier_task(s->c) == CD_TASK_DETECTION) {
        /* a detection model classifies nothing: its answer is the boxes (docs/inference.md) */
        json_t *out = op_infer(s, req, id);
        if (json_is_true(json_object_get(out, "ok")))
            json_object_set_new(out, "predictions", json_array());
        return out;
    }
    double t0 = cd_now();
    const char *vdir = json_string_value(json_object_get(req, "visualize"));
    json_t *topj = json_object_get(req, "top");
    int top = json_is_integer(topj) ? (int)json_integer_value(topj) : 5;
    char err[1024];
    cd_image_t img = {0};
    json_t *bad = request_image(s, req, id, &img);
    if (bad)
        return bad;
    json_t *vis = NULL;
    int rc;
    if (vdir) {
        cd_infer_layer *layers = NULL;
        int n = 0;
        rc = cd_classifier_run_layers(s->c, &img, s->probs, &layers, &n, err, sizeof err);
        if (rc == CD_OK && !(vis = cd_infer_visualize(layers, n, vdir, err, sizeof err)))
            rc = CD_ERR;
        cd_infer_layers_free(layers, n);
    } else {
        rc = cd_classifier_run(s->c, &img, s->probs, err, sizeof err);
    }
    json_t *size = json_pack("[i, i, i]", img.h, img.w, img.c);
    cd_image_free(&img);
    if (rc != CD_OK) {
        json_decref(size);
        return fail(id, "internal", "%s", err);
    }
    json_t *out = json_pack("{s:O, s:b, s:o, s:I, s:o}", "id", id, "ok", 1, "predictions",
                            cd_predictions_json(s->c, s->probs, top), "iteration",
                            (json_int_t)cd_classifier_iteration(s->c), "image_size", size);
    if (vis)
        json_object_set_new(out, "visualizations", vis);
    json_object_set_new(out, "ms", json_real(ms_since(t0)));
    return with_counts(s, out);
}

static json_t *op_list(server *s, json_t *req, json_t *id)
{
    double t0 = cd_now();
    const char *list = json_string_value(json_object_get(req, "list"));
    const char *outp = json_string_value(json_object_get(req, "out"));
    if (!list || !outp)
        return fail(id, "input", "classify_list needs list and out");
    cd_list_opts o = {.top = 5, .batch = 64};
    json_t *v;
    if (json_is_integer(v = json_object_get(req, "top")))
        o.top = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "top_n")))
        o.top_n = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "batch")))
        o.batch = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "limit")))
        o.limit = (long)json_integer_value(v);
    if (o.top < 1 || o.top_n < 0 || o.top_n > 10000 || o.batch < 1 || o.batch > 4096)
        return fail(id, "input", "top, top_n (0 to 10000) or batch (1 to 4096) is out of range");
    FILE *in = fopen(list, "r");
    if (!in)
        return fail(id, "internal", "cannot read %s: %s", list, strerror(errno));
    FILE *out = fopen(outp, "w");
    if (!out) {
        fclose(in);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    char err[1024];
    json_t *sum = cd_classify_list(s->c, in, out, &o, err, sizeof err);
    fclose(in);
    if (fclose(out) != 0 && sum) {
        json_decref(sum);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    if (!sum)
        return fail(id, "internal", "%s", err);
    return with_counts(s, json_pack("{s:O, s:b, s:o, s:I, s:f}", "id", id, "ok", 1, "summary", sum, "iteration",
                                    (json_int_t)cd_classifier_iteration(s->c), "ms", ms_since(t0)));
}


static json_t *op_infer(server *s, json_t *req, json_t *id)
{
    double t0 = cd_now();
    cd_image_t img = {0};
    json_t *bad = request_image(s, req, id, &img);
    if (bad)
        return bad;
    char err[1024];
    cd_infer_tensor *outs = NULL;
    int n = 0;
    int rc = cd_infer_image(s->c, &img, &outs, &n, err, sizeof err);
    int seg = rc == CD_OK ? cd_infer_seg_output(outs, n) : -1;
    if (seg >= 0 && cd_classifier_task(s->c) == CD_TASK_SEGMENTATION && outs[seg].dims[1] <= CD_SEG_MAX_CLASSES &&
        s->rgb_classes != outs[seg].dims[1]) { /* the palette file is read for the first mask only */
        rc = cd_seg_palette(s->c, outs[seg].dims[1], s->rgb, err, sizeof err);
        s->rgb_classes = rc == CD_OK ? outs[seg].dims[1] : 0;
    }
    json_t *out = rc == CD_OK ? cd_infer_result_json(s->c, outs, n, 0, 1, (const uint8_t(*)[3])s->rgb, NULL, NULL, err,
                                                     sizeof err)
                              : NULL;
    if (out && cd_classifier_task(s->c) == CD_TASK_DETECTION) {
        cd_det_frame f = cd_classifier_det_frame(s->c, img.w, img.h);
        cd_det_fields(s->c, outs, n, 0, &f, NULL, 0, NULL, 0, out);
    }
    cd_infer_tensors_free(outs, n);
    json_t *size = json_pack("[i, i, i]", img.h, img.w, img.c);
    cd_image_free(&img);
    if (!out) {
        json_decref(size);
        return fail(id, "internal", "%s", err);
    }
    json_object_set(out, "id", id);
    json_object_set_new(out, "ok", json_true());
    json_object_set_new(out, "task", json_string(cd_dataset_task_name(cd_classifier_task(s->c))));
    json_object_set_new(out, "iteration", json_integer(cd_classifier_iteration(s->c)));
    json_object_set_new(out, "image_size", size);
    json_object_set_new(out, "ms", json_real(ms_since(t0)));
    return out;
}

/* infer_list and infer_db: the lines into "out", the summary in the answer. */
static json_t *op_infer_many(server *s, json_t *req, json_t *id, int from_db)
{
    double t0 = cd_now();
    const char *src = json_string_value(json_object_get(req, from_db ? "db" : "list"));
    const char *outp = json_string_value(json_object_get(req, "out"));
    const char *labels = json_string_value(json_object_get(req, "labels_db"));
    if (!src || !outp)
        return fail(id, "input", "%s needs %s and out", from_db ? "infer_db" : "infer_list", from_db ? "db" : "list");
    cd_infer_list_opts o = {.batch = 64};
    json_t *v;
    if (json_is_integer(v = json_object_get(req, "batch")))
        o.batch = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(req, "limit")))
        o.limit = (long)json_integer_value(v);
    if (o.batch < 1 || o.batch > 4096)
        return fail(id, "input", "batch %d is out of range: use 1 to 4096", o.batch);
    FILE *in = from_db ? NULL : fopen(src, "r");
    if (!from_db && !in)
        return fail(id, "internal", "cannot read %s: %s", src, strerror(errno));
    FILE *out = fopen(outp, "w");
    if (!out) {
        if (in)
            fclose(in);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    char err[1024];
    json_t *sum = from_db ? cd_infer_db(s->c, src, labels, out, &o, err, sizeof err)
                          : cd_infer_list(s->c, in, out, &o, err, sizeof err);
    if (in)
        fclose(in);
    if (fclose(out) != 0 && sum) {
        json_decref(sum);
        return fail(id, "internal", "cannot write %s: %s", outp, strerror(errno));
    }
    if (!sum)
        return fail(id, from_db ? "input" : "internal", "%s", err);
    return json_pack("{s:O, s:b, s:o, s:I, s:f}", "id", id, "ok", 1, "summary", sum, "iteration",
                     (json_int_t)cd_classifier_iteration(s->c), "ms", ms_since(t0));
}

static json_t *op_export(server *s, json_t *req, json_t *id)
{
    const char *dir = json_string_value(json_object_get(req, "dir"));
    const char *name = json_string_value(json_object_get(req, "name"));
    if (!dir)
        return fail(id, "input", "export needs dir");
    char names[16][64], err[1024];
    int n = cd_classifier_export(s->c, dir, name ? name : s->job_name, names, 16, err, sizeof err);
    if (n < 0)
        return fail(id, "internal", "%s", err);
    json_t *files = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(files, json_string(names[i]));
    return json_pack("{s:O, s:b, s:o}", "id", id, "ok", 1, "files", files);
}

static json_t *handle(server *s, const char *line, int *quit)
{
    json_error_t jerr;
    json_t *req = json_loads(line, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return fail(NULL, "input", "a request must be one JSON object per line: %s", jerr.text);
    }
    json_t *id = json_object_get(req, "id");
    if (!id)
        id = json_null();
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *out;
    if (!op)
        out = fail(id, "input", "the request has no op");
    else if (!strcmp(op, "classify"))
        out = op_classify(s, req, id);
    else if (!strcmp(op, "classify_list"))
        out = op_list(s, req, id);
    else if (!strcmp(op, "infer"))
        out = op_infer(s, req, id);
    else if (!strcmp(op, "infer_list") || !strcmp(op, "infer_db"))
        out = op_infer_many(s, req, id, !strcmp(op, "infer_db"));
    else if (!strcmp(op, "export"))
        out = op_export(s, req, id);
    else if (!strcmp(op, "info")) {
        out = json_deep_copy(s->ready);
        json_object_set(out, "id", id ? id : json_null());
        json_object_set_new(out, "ok", json_true());
        json_object_del(out, "type");
    } else if (!strcmp(op, "quit")) {
        *quit = 1;
        out = json_pack("{s:O, s:b}", "id", id ? id : json_null(), "ok", 1);
    } else
        out = fail(id, "input", "unknown op \"%s\": use classify, classify_list, infer, infer_list, infer_db, export, info or quit", op);
    json_decref(req);
    return out;
}

/* The ready line: what the server shows about the worker. */
static json_t *ready_line(const server *s, const char *device)
{
    int n = cd_classifier_classes(s->c), ch, h, w;
    cd_classifier_image_shape(s->c, &ch, &h, &w);
    json_t *labels = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(labels, json_string(cd_classifier_label(s->c, i)));
    cd_snapshot_info snaps[4096];
    int ns = cd_snapshot_epochs(s->model, snaps, 4096);
    double epoch = -1;
    for (int i = 0; i < ns; i++)
        if (snaps[i].iteration == cd_classifier_iteration(s->c))
            epoch = snaps[i].epoch;
    const cd_backend_t *be = cd_classifier_backend(s->c);
    return json_pack("{s:s, s:I, s:o, s:o, s:i, s:s, s:s, s:[i, i, i], s:i, s:s}", "type", "ready", "iteration",
                     (json_int_t)cd_classifier_iteration(s->c), "epoch", epoch >= 0 ? json_real(epoch) : json_null(),
                     "labels", labels, "outputs", cd_classifier_outputs(s->c), "backend", be->iface->name, "device",
                     device, "image", h, w, ch, "pid", (int)getpid(), "task",
                     cd_dataset_task_name(cd_classifier_task(s->c)));
}

/* The log line of cd_backend_select, in serve-model.log (stdout is for answers). */
static void note_stderr(const char *line) { fprintf(stderr, "serve-model: %s\n", line); }

/* Whether the model's folder is still there (deleting the model removes it). */
static int model_present(const char *dir)
{
    char path[4200];
    jobdir_path(dir, JOBDIR_TRAIN_JSON, path, sizeof path);
    return access(path, F_OK) == 0;
}

int cd_cmd_serve_model(int argc, char **argv)
{
    const char *model = NULL;
    long iteration = 0;
    int gpu = -1, threads = 0;
    double idle_exit = 0;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--model") && more)
            model = argv[++i];
        else if (!strcmp(argv[i], "--iteration") && more)
            iteration = atol(argv[++i]);
        else if (!strcmp(argv[i], "--gpu") && more)
            gpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && more)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--idle-exit") && more)
            idle_exit = atof(argv[++i]);
        else if (!strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (!model) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char err[1024], device[128];
    /* --gpu N: that GPU when it is usable, else the CPU */
    cd_backend_request breq = {.kind = gpu >= 0 ? CD_BACKEND_AUTO : CD_BACKEND_CPU, .gpu = gpu, .threads = threads,
                               .task = "classifying", .note = note_stderr};
    cd_backend_t *be = cd_backend_select(&breq, err, sizeof err);
    if (!be) {
        reply(json_pack("{s:s, s:s}", "type", "error", "message", err));
        return 1;
    }
    snprintf(device, sizeof device, "%s:%d", be->iface->name, be->device);
    server s = {.model = model};
    s.c = cd_classifier_open(model, iteration, be, err, sizeof err);
    int on_cores = !(be->iface->caps & CD_BE_CAP_DEVICE); /* the CPU's: its threads are ours to pick */
    if (s.c && threads <= 0 && on_cores && cd_classifier_macs(s.c) < SMALL_NET_MACS &&
        sysconf(_SC_NPROCESSORS_ONLN) > 1) {
        /* a small network: one thread answers sooner than a team that waits for its
         * slowest member on a busy machine */
        cd_classifier_close(s.c);
        cd_backend_free(be);
        breq.kind = CD_BACKEND_CPU;
        breq.threads = threads = 1;
        if (!(be = cd_backend_select(&breq, err, sizeof err))) {
            reply(json_pack("{s:s, s:s}", "type", "error", "message", err));
            return 1;
        }
        s.c = cd_classifier_open(model, iteration, be, err, sizeof err);
    }
    if (!s.c) {
        reply(json_pack("{s:s, s:s}", "type", "error", "message", err));
        cd_backend_free(be);
        return 1;
    }
    if (on_cores)
        snprintf(device, sizeof device, "%s (%d thread%s)", be->iface->name,
                 threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN), threads == 1 ? "" : "s");
    s.probs = cd_xcalloc((size_t)cd_classifier_classes(s.c), sizeof(float));
    s.ready = ready_line(&s, device);
    reply(json_incref(s.ready));

    /* lines from stdin by hand: poll() must see what stdio would have buffered */
    size_t cap = 1 << 16, len = 0;
    char *buf = cd_xmalloc(cap);
    double last = cd_now();
    int quit = 0, rc = 0;
    while (!quit) {
        char *nl = memchr(buf, '\n', len);
        if (nl) {
            *nl = 0;
            reply(handle(&s, buf, &quit));
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, len - used);
            len -= used;
            last = cd_now();
            continue;
        }
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        int pr = poll(&pf, 1, 1000);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0) {
            if ((idle_exit > 0 && cd_now() - last > idle_exit) || !model_present(model))
                break;
            continue;
        }
        if (len + 65536 > cap) {
            if (cap >= MAX_LINE) {
                reply(fail(NULL, "input", "a request line is longer than %zu MB", MAX_LINE >> 20));
                rc = 1;
                break;
            }
            cap *= 2;
            buf = cd_xrealloc(buf, cap);
        }
        ssize_t r = read(0, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* the server went away */
        len += (size_t)r;
    }
    free(buf);
    free(s.probs);
    json_decref(s.ready);
    cd_classifier_close(s.c);
    cd_backend_free(be);
    return rc;
}
