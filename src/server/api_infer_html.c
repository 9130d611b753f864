/* The pages of DIGITS's classify_one, classify_many and top_n, for a request that does
 * not want JSON (http_wants_json): the structure of DIGITS's templates, which its tests
 * and scripts parse (the predictions of one image as `ul.list-group li`, each
 * "<span class="badge">NN.NN%</span> label"; a list as DIGITS's summary, confusion
 * matrix and table of classifications; the top images of each class as a row per class
 * with the class's name in an h3). Every string that came with the request or from the
 * model (labels, paths, file names, messages) is escaped. Errors of these routes come
 * back as a page too, with their status. */
#define _GNU_SOURCE
#include "api_infer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/image_kind.h"
#include "html.h"

#define HTML_TYPE "text/html; charset=utf-8"

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- which requests get a page ------------------------------------------------------ */

static const handler_fn g_page_handlers[] = {h_classify_one, h_classify_many, h_classify_top_n,
                                             h_infer_one, h_infer_many, h_infer_db};

int infer_wants_html(const req_t *r)
{
    if (!r->route || req_wants_json(r))
        return 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_page_handlers); i++)
        if (r->route->handler == g_page_handlers[i])
            return 1;
    return 0;
}

/* ---- writing -------------------------------------------------------------------------- */

/* A path as a URL query value: unreserved bytes and "/" as they are, the rest %XX. */
static void url_value(FILE *f, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
            fputc(*p, f);
        else
            fprintf(f, "%%%02X", *p);
    }
}

/* A number as DIGITS's templates print it (99.88, 100.0, 0.01). */
static void number(FILE *f, json_t *v)
{
    double x = json_number_value(v);
    if (!json_is_number(v))
        return;
    if (x == floor(x) && fabs(x) < 1e15)
        fprintf(f, "%.1f", x);
    else
        fprintf(f, "%.10g", x);
}

/* The <img src> of an image file of the data roots: /browse/file serves it. */
static void image_url(FILE *f, const req_t *r, const char *path)
{
    html_file_text(f, r->srv->cfg.url_prefix);
    fputs("/browse/file?path=", f);
    url_value(f, path);
}

static void page_head(FILE *f, const req_t *r, json_t *job, const char *what)
{
    const char *prefix = r->srv->cfg.url_prefix;
    fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    html_file_text(f, what);
    if (job) {
        fputs(" · ", f);
        html_file_text(f, sval(job, "name"));
    }
    fputs(" · cdigits</title>\n<link rel=\"stylesheet\" href=\"", f);
    html_file_text(f, prefix);
    fputs("/css/cdigits.css\">\n</head>\n<body>\n<nav><ol class=\"breadcrumb\"><li><a href=\"", f);
    html_file_text(f, prefix);
    fputs("/\">Home</a></li>", f);
    if (job) {
        fputs("<li><a href=\"", f);
        html_file_text(f, prefix);
        fputs("/models/", f);
        html_file_text(f, sval(job, "id"));
        fputs("\">", f);
        html_file_text(f, sval(job, "name"));
        fputs("</a></li>", f);
    }
    fputs("<li class=\"active\"><a>", f);
    html_file_text(f, what);
    fputs("</a></li></ol></nav>\n<main class=\"container\">\n", f);
}

/* The heading of classify_one and classify_many: the model's name, as DIGITS's. */
static void model_header(FILE *f, json_t *job)
{
    fputs("<div class=\"page-header\"><h1>", f);
    html_file_text(f, sval(job, "name"));
    fputs(" <small>Image Classification Model</small></h1></div>\n", f);
}

static void page_tail(FILE *f) { fputs("</main>\n</body>\n</html>\n", f); }

/* The snapshot that answered and the note on outputs past the labels. */
static void page_about(FILE *f, json_t *body)
{
    json_t *epoch = json_object_get(body, "snapshot_epoch");
    fputs("<p class=\"snapshot\">Snapshot: ", f);
    if (json_is_number(epoch)) {
        fputs("epoch ", f);
        number(f, epoch);
        fputs(", ", f);
    }
    fprintf(f, "iteration %lld</p>\n", (long long)json_integer_value(json_object_get(body, "snapshot_iteration")));
    const char *note = json_string_value(json_object_get(body, "note"));
    if (note) {
        fputs("<div class=\"alert alert-warning note\">", f);
        html_file_text(f, note);
        fputs("</div>\n", f);
    }
}

/* [[label, percent], ...] as DIGITS's table cells: label in bold, then its badge. */
static void prediction_cells(FILE *f, json_t *predictions)
{
    size_t i;
    json_t *p;
    json_array_foreach(predictions, i, p)
    {
        fputs("<td align=\"right\"><b>", f);
        html_file_text(f, json_string_value(json_array_get(p, 0)));
        fputs("</b></td><td align=\"left\"><span class=\"badge\">", f);
        number(f, json_array_get(p, 1));
        fputs("%</span></td>", f);
    }
}

/* ---- sending -------------------------------------------------------------------------- */

/* A page being written in memory (open_memstream). */
typedef struct mpage {
    FILE *f;
    char *data;
    size_t len;
} mpage;

/* Opens a page and writes its head (page_head of job and what). */
static int mpage_open(req_t *r, mpage *m, json_t *job, const char *what)
{
    m->data = NULL;
    m->len = 0;
    m->f = open_memstream(&m->data, &m->len);
    if (!m->f) {
        reply_error(r, 500, "cannot make the page: %s", strerror(errno));
        return CD_ERR;
    }
    page_head(m->f, r, job, what);
    return CD_OK;
}

/* Sends the page with status; frees it on every path. */
static void mpage_send(req_t *r, mpage *m, int status)
{
    int bad = ferror(m->f);
    if (fclose(m->f) != 0 || bad || !m->data) {
        free(m->data);
        reply_error(r, 500, "out of memory making the page");
        return;
    }
    r->result_page = 1;
    reply_buffer(r, status, m->data, m->len, HTML_TYPE, "no-store");
}

/* ---- errors ---------------------------------------------------------------------------- */

/* The error page: status, then the message, escaped. */
static void error_page(req_t *r, int status, const char *field, const char *msg)
{
    mpage m;
    char title[32];
    snprintf(title, sizeof title, "Error %d", status);
    if (mpage_open(r, &m, NULL, title) != CD_OK)
        return;
    fprintf(m.f, "<div class=\"page-header\"><h1>Error %d</h1></div>\n<div class=\"alert alert-danger\"><p>", status);
    if (field) {
        fputs("<b>", m.f);
        html_file_text(m.f, field);
        fputs("</b>: ", m.f);
    }
    html_file_text(m.f, msg);
    fputs("</p></div>\n", m.f);
    page_tail(m.f);
    mpage_send(r, &m, status);
}

void infer_error(req_t *r, int status, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (infer_wants_html(r))
        error_page(r, status, NULL, msg);
    else
        reply_error(r, status, "%s", msg);
}

void infer_field_error(req_t *r, const char *field, const char *message)
{
    if (infer_wants_html(r))
        error_page(r, 400, field, message);
    else
        reply_field_error(r, field, message);
}

/* ---- classify_one ---------------------------------------------------------------------- */

static const struct {
    int format;
    const char *mime;
} g_mimes[] = {
    {CD_IMAGE_PNG, "image/png"},
    {CD_IMAGE_JPEG, "image/jpeg"},
    {CD_IMAGE_BMP, "image/bmp"},
    {CD_IMAGE_PNM, "image/x-portable-anymap"},
};

static void image_src(FILE *f, const req_t *r, const infer_image *img)
{
    if (img->path) {
        image_url(f, r, img->path);
        return;
    }
    const char *mime = "application/octet-stream";
    for (size_t i = 0; i < CD_ARRAY_LEN(g_mimes); i++)
        if (g_mimes[i].format == img->format)
            mime = g_mimes[i].mime;
    fprintf(f, "data:%s;base64,", mime);
    fputs(img->b64 ? img->b64 : "", f); /* base64: nothing to escape */
}

/* data_stats's histogram [[counts], [centres], ticks] as 20 bars. */
static void histogram_svg(FILE *f, json_t *hist)
{
    json_t *counts = json_array_get(hist, 0);
    size_t n = json_array_size(counts), i;
    double top = 0;
    json_t *c;
    json_array_foreach(counts, i, c) if (json_number_value(c) > top) top = json_number_value(c);
    if (!n || top <= 0)
        return;
    fprintf(f, "<svg class=\"histogram\" viewBox=\"0 0 %zu 40\" width=\"200\" height=\"40\" preserveAspectRatio=\"none\">",
            n * 10);
    json_array_foreach(counts, i, c)
    {
        double h = 40 * json_number_value(c) / top;
        fprintf(f, "<rect x=\"%zu\" y=\"%.2f\" width=\"9\" height=\"%.2f\"></rect>", i * 10, 40 - h, h);
    }
    fputs("</svg>", f);
}

/* The statistics column of a visualization: the data_stats numbers it shows, in order. */
static const struct {
    const char *label, *key;
} g_vis_stats[] = {{"Mean", "mean"}, {"Std deviation", "stddev"}};

static void visualizations(FILE *f, json_t *vis)
{
    if (!json_array_size(vis))
        return;
    fputs("<table class=\"table visualizations\">\n<tr><th>Description</th><th width=\"20%\">Statistics</th>"
          "<th>Visualization</th></tr>\n",
          f);
    size_t i;
    json_t *v;
    json_array_foreach(vis, i, v)
    {
        json_t *st = json_object_get(v, "data_stats"), *shape = json_object_get(st, "shape");
        fputs("<tr><td><h4>", f);
        html_file_text(f, sval(v, "name"));
        fputs("</h4>\n", f);
        html_file_text(f, sval(v, "vis_type"));
        fputs(" (", f);
        html_file_text(f, sval(v, "type"));
        fputs(")<br>", f);
        size_t k;
        json_t *d;
        json_array_foreach(shape, k, d) fprintf(f, "%s%lld", k ? " x " : "", (long long)json_integer_value(d));
        if (json_is_integer(json_object_get(v, "param_count")))
            fprintf(f, "<br>%lld parameters", (long long)json_integer_value(json_object_get(v, "param_count")));
        fputs("</td><td>", f);
        for (size_t j = 0; j < CD_ARRAY_LEN(g_vis_stats); j++) {
            fprintf(f, "<b>%s:</b> ", g_vis_stats[j].label);
            number(f, json_object_get(st, g_vis_stats[j].key));
            fputs("<br>", f);
        }
        histogram_svg(f, json_object_get(st, "histogram"));
        fputs("</td><td>", f);
        if (*sval(v, "image")) {
            fputs("<img style=\"max-width:100%\" src=\"", f);
            html_file_text(f, sval(v, "image"));
            fputs("\" alt=\"\">", f);
        } else {
            fputs("<i>Not shown</i>", f);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

void infer_page_one(req_t *r, json_t *job, json_t *body, const infer_image *img)
{
    mpage m;
    if (mpage_open(r, &m, job, "Classify One") != CD_OK)
        return;
    FILE *f = m.f;
    model_header(f, job);
    page_about(f, body);
    fputs("<div class=\"row\">\n<div class=\"col-sm-6\"><img src=\"", f);
    image_src(f, r, img);
    fputs("\" style=\"max-width:100%;\" alt=\"the image\">", f);
    if (img->filename || img->path) {
        fputs("<p class=\"image-name\">", f);
        html_file_text(f, img->filename ? img->filename : img->path);
        fputs("</p>", f);
    }
    fputs("</div>\n<div class=\"col-sm-6\">\n<h4>Predictions</h4>\n<ul class=\"list-group\">\n", f);
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(body, "predictions"), i, p)
    {
        fputs("<li class=\"list-group-item\"><span class=\"badge\">", f);
        number(f, json_array_get(p, 1));
        fputs("%</span> ", f);
        html_file_text(f, json_string_value(json_array_get(p, 0)));
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
    json_t *boxes = json_object_get(body, "boxes");
    if (boxes) { /* a detection model's answer */
        fputs("<h4>Boxes</h4>\n<ul class=\"list-group boxes\">\n", f);
        json_array_foreach(boxes, i, p)
        {
            fputs("<li class=\"list-group-item\"><span class=\"badge\">", f);
            number(f, json_object_get(p, "confidence"));
            fputs("</span> ", f);
            html_file_text(f, json_string_value(json_object_get(p, "label")));
            fprintf(f, " %.1f, %.1f to %.1f, %.1f</li>\n", json_number_value(json_object_get(p, "x1")),
                    json_number_value(json_object_get(p, "y1")), json_number_value(json_object_get(p, "x2")),
                    json_number_value(json_object_get(p, "y2")));
        }
        fputs("</ul>\n", f);
    }
    fputs("</div>\n</div>\n", f);
    visualizations(f, json_object_get(body, "visualizations"));
    page_tail(f);
    mpage_send(r, &m, 200);
}

/* ---- classify_many ------------------------------------------------------------------- */

/* Top-1 and top-5 accuracy and the confusion matrix (rows of classes that had images). */
static void list_summary(FILE *f, json_t *tail)
{
    json_t *labels = json_object_get(tail, "labels"), *acc = json_object_get(tail, "per_class_accuracy");
    fputs("<div class=\"panel-heading\"><h4>Summary</h4></div>\n<div class=\"panel-body summary\">\n"
          "<dl><dt>Top-1 accuracy</dt><dd>",
          f);
    number(f, json_object_get(tail, "top1_accuracy"));
    fputs("%</dd></dl>\n<dl><dt>Top-5 accuracy</dt><dd>", f);
    number(f, json_object_get(tail, "top5_accuracy"));
    fputs("%</dd></dl>\n</div>\n<div class=\"panel-heading\"><h4>Confusion matrix</h4></div>\n"
          "<table class=\"table confusion-matrix\">\n<tr><th></th>",
          f);
    size_t i, j;
    json_t *l, *row, *cell;
    json_array_foreach(labels, i, l)
    {
        fputs("<th>", f);
        html_file_text(f, json_string_value(l));
        fputs("</th>", f);
    }
    fputs("<th>Per-class accuracy</th></tr>\n", f);
    json_array_foreach(json_object_get(tail, "confusion_matrix"), i, row)
    {
        if (!json_is_number(json_array_get(acc, i)))
            continue;
        fputs("<tr><th>", f);
        html_file_text(f, json_string_value(json_array_get(labels, i)));
        fputs("</th>", f);
        json_array_foreach(row, j, cell) fprintf(f, "<td>%lld</td>", (long long)json_integer_value(cell));
        fputs("<td>", f);
        number(f, json_array_get(acc, i));
        fputs("%</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* One row per classified image of the results file, in list order. */
static void list_rows(FILE *f, FILE *res, json_t *labels, int ground_truth)
{
    fputs("<div class=\"panel-heading\"><h4>All classifications</h4></div>\n"
          "<table class=\"table classifications\">\n<tr><td></td><th>Path</th>",
          f);
    if (ground_truth)
        fputs("<th>Ground truth</th>", f);
    fputs("<th colspan=10>Top predictions</th></tr>\n", f);
    char *line = NULL;
    size_t cap = 0;
    long n = 0;
    rewind(res);
    while (getline(&line, &cap, res) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *pred = json_object_get(o, "predictions"), *label = json_object_get(o, "label");
        if (pred) {
            fprintf(f, "<tr><td>%ld</td><td>", ++n);
            html_file_text(f, sval(o, "path"));
            fputs("</td>", f);
            if (ground_truth) {
                fputs("<td>", f);
                if (json_is_integer(label))
                    html_file_text(f, json_string_value(json_array_get(labels, (size_t)json_integer_value(label))));
                fputs("</td>", f);
            }
            prediction_cells(f, pred);
            fputs("</tr>\n", f);
        }
        json_decref(o);
    }
    free(line);
    fputs("</table>\n", f);
}

static void skipped_row(FILE *f, const char *path, const char *why)
{
    fputs("<tr><td>", f);
    html_file_text(f, path);
    fputs("</td><td>", f);
    html_file_text(f, why);
    fputs("</td></tr>\n", f);
}

/* The lines the server refused and the images the worker could not use. */
static void list_skipped(FILE *f, FILE *res, json_t *skipped, json_t *tail)
{
    fputs("<div class=\"panel-heading\"><h4>Skipped lines</h4></div>\n<table class=\"table skipped\">\n"
          "<tr><th>Path</th><th>Why</th></tr>\n",
          f);
    const char *key;
    json_t *why;
    json_object_foreach(skipped, key, why) skipped_row(f, key, json_string_value(why));
    char *line = NULL;
    size_t cap = 0;
    rewind(res);
    while (getline(&line, &cap, res) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *e = json_string_value(json_object_get(o, "error"));
        if (!e)
            e = json_string_value(json_object_get(o, "label_error"));
        if (e) {
            char msg[4096];
            snprintf(msg, sizeof msg, "line %lld: %s", (long long)json_integer_value(json_object_get(o, "line")), e);
            skipped_row(f, sval(o, "path"), msg);
        }
        json_decref(o);
    }
    free(line);
    fputs("</table>\n", f);
    long more = (long)json_integer_value(json_object_get(tail, "skipped_lines")) - (long)json_object_size(skipped);
    if (more > 0)
        fprintf(f, "<p>%ld more lines were skipped; the JSON answer (classify_many.json) counts them too.</p>\n", more);
}

FILE *infer_page_file(req_t *r, const char *dir, json_t *job, const char *what, char *path, size_t len)
{
    snprintf(path, len, "%s/reply.html", dir);
    FILE *f = fopen(path, "w+");
    if (!f)
        infer_error(r, 500, "cannot write %s: %s", path, strerror(errno));
    else
        page_head(f, r, job, what);
    return f;
}

void infer_page_many(req_t *r, json_t *job, const char *dir, FILE *res, json_t *skipped, json_t *tail)
{
    char path[PATH_MAX + 32];
    FILE *f = infer_page_file(r, dir, job, "Classify Many", path, sizeof path);
    if (!f)
        return;
    model_header(f, job);
    page_about(f, tail);
    long classified = (long)json_integer_value(json_object_get(tail, "classified"));
    fprintf(f, "<p class=\"counts\">%lld images, %ld classified, %lld failed, %lld lines skipped</p>\n",
            (long long)json_integer_value(json_object_get(tail, "images")), classified,
            (long long)json_integer_value(json_object_get(tail, "failed")),
            (long long)json_integer_value(json_object_get(tail, "skipped_lines")));
    int ground_truth = json_integer_value(json_object_get(tail, "labelled")) > 0 &&
                       json_is_array(json_object_get(tail, "labels"));
    if (classified == 0)
        fputs("<div class=\"alert alert-danger\"><p>Classification failed, see the skipped lines</p></div>\n", f);
    else {
        if (ground_truth)
            list_summary(f, tail);
        list_rows(f, res, json_object_get(tail, "labels"), ground_truth);
    }
    list_skipped(f, res, skipped, tail);
    page_tail(f);
    infer_reply_file(r, f, path, HTML_TYPE, "the page");
}

/* ---- top_n --------------------------------------------------------------------------- */

void infer_page_top_n(req_t *r, json_t *job, json_t *body)
{
    mpage m;
    if (mpage_open(r, &m, job, "Top N") != CD_OK)
        return;
    FILE *f = m.f;
    fputs("<div class=\"page-header\"><h1>Top N Predictions per Category</h1></div>\n", f);
    page_about(f, body);
    json_t *results = json_object_get(body, "results");
    if (!json_array_size(results))
        fputs("<div class=\"alert alert-danger\"><p>Classification failed: no image of the list was "
              "classified</p></div>\n",
              f);
    fputs("<table class=\"table top-n\">\n<tr><th>Category</th><th>Top images for this category</th></tr>\n", f);
    size_t i, j;
    json_t *cls, *im;
    json_array_foreach(results, i, cls)
    {
        fputs("<tr><td><h3>", f);
        html_file_text(f, json_string_value(json_array_get(cls, 0)));
        fputs("</h3></td><td>", f);
        json_array_foreach(json_array_get(cls, 1), j, im)
        {
            const char *p = json_string_value(json_array_get(im, 0));
            fputs("<figure class=\"top-image\"><img src=\"", f);
            image_url(f, r, p ? p : "");
            fputs("\" alt=\"", f);
            html_file_text(f, p);
            fputs("\" title=\"", f);
            html_file_text(f, p);
            fputs("\"><figcaption><span class=\"badge\">", f);
            number(f, json_array_get(im, 1));
            fputs("%</span></figcaption></figure>", f);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    page_tail(f);
    mpage_send(r, &m, 200);
}

/* ---- for the generic models' pages (api_infer_generic.c) ------------------------------- */

void infer_page_end(FILE *f) { page_tail(f); }
void infer_page_snapshot(FILE *f, json_t *body) { page_about(f, body); }
void infer_page_image_src(FILE *f, const req_t *r, const infer_image *img) { image_src(f, r, img); }
