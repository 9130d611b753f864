/* DIGITS's HTML pages of a dataset, written by the server: the explorer
 * (GET /datasets/images/classification/explore), which pages through a split's records
 * with their labels and images, and the summary fragment (GET /datasets/summary) that
 * DIGITS's pages load after a rename. The records come from api_datasets.c's reader,
 * the images from /datasets/<id>/images/<split>/<index>; every string from the job or
 * the request is escaped (html.h). */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_datasets.h"
#include "html.h"

static const char *sval(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The dataset named by job_id (DIGITS's job_from_request), or NULL after a reply:
 * 400 without job_id or for a model, 404 for an unknown id. Caller decrefs. */
static json_t *dataset_from_request(req_t *r)
{
    return api_job_of_type(r, fields_get(r->fields, "job_id"), "dataset", reply_error);
}

/* A number of the query string: *out keeps its default when the field is absent or
 * empty. CD_ERR after a 400. */
static int query_number(req_t *r, const char *name, long long lo, long long hi, long long *out)
{
    const char *s = fields_get(r->fields, name);
    if (!s || !*s)
        return CD_OK;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) {
        reply_error(r, 400, "%s \"%s\" must be a whole number from %lld to %lld", name, s, lo, hi);
        return CD_ERR;
    }
    *out = v;
    return CD_OK;
}

/* DIGITS picks the split by the word db contains: "train", "val" or "test". -1 after a 400. */
static int split_of_db(req_t *r, const char *db)
{
    char low[64];
    size_t n = 0;
    for (; db[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)db[n]);
    low[n] = 0;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (strstr(low, cd_split_name(s)))
            return s;
    reply_error(r, 400, "db \"%s\" names no split: give db=train, db=val or db=test", db);
    return -1;
}

/* One explorer link: ?job_id=&page=&size=&db=[&label=], with class="active" when
 * active; the text is escaped. */
static void explore_link(html_t *h, const char *id, long long page, long long size, int split, long long label,
                         const char *text, int active)
{
    html_raw(h, "<a href=\"?job_id=");
    html_query_value(h, id);
    html_printf(h, "&amp;page=%lld&amp;size=%lld&amp;db=%s", page, size, cd_split_name(split));
    if (label >= 0)
        html_printf(h, "&amp;label=%lld", label);
    html_raw(h, active ? "\" class=\"active\">" : "\">");
    html_text(h, text);
    html_raw(h, "</a>");
}

static void page_head(html_t *h, req_t *r, const char *title)
{
    html_raw(h, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    html_text(h, title);
    html_raw(h, "</title>\n");
    if (r->srv->cfg.web_dir[0]) {
        html_raw(h, "<link rel=\"stylesheet\" href=\"");
        html_text(h, r->srv->cfg.url_prefix);
        html_raw(h, "/css/cdigits.css\">\n");
    }
    html_raw(h, "</head>\n<body>\n");
}

/* The Create DB task of split in the dataset's JSON (view_job_detail), or NULL. */
static json_t *create_db_task(json_t *detail, int split)
{
    char name[32];
    snprintf(name, sizeof name, "Create DB (%s)", cd_split_name(split));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(detail, "CreateDbTasks"), i, t) if (strcmp(sval(t, "name"), name) == 0) return t;
    return NULL;
}

/* The explorer's body: class filter, page sizes, pages and the records of this page. */
static void explore_body(html_t *h, req_t *r, json_t *job, json_t *labels, int split, long long label,
                         long long page, long long size, long long total, const size_t *idx, size_t n,
                         const cd_db_t *db)
{
    const char *id = sval(job, "id"), *prefix = r->srv->cfg.url_prefix;
    html_raw(h, "<main class=\"explore\">\n<p><a href=\"");
    html_text(h, prefix);
    html_raw(h, "/datasets/");
    html_query_value(h, id);
    html_raw(h, "\">Image Classification Dataset</a></p>\n<h2>Exploring ");
    html_text(h, sval(job, "name"));
    html_printf(h, " (%s) images</h2>\n<ul class=\"classes\">\n<li>", cd_split_name(split));
    explore_link(h, id, 0, size, split, -1, "Show all images", label < 0);
    html_raw(h, "</li>\n<li>or</li>\n<li>filter by class:</li>\n");
    size_t k;
    json_t *l;
    json_array_foreach(labels, k, l)
    {
        html_raw(h, "<li>");
        explore_link(h, id, 0, size, split, (long long)k, json_string_value(l) ? json_string_value(l) : "?",
                     label == (long long)k);
        html_raw(h, "</li>\n");
    }
    html_raw(h, "</ul>\n<p class=\"page-sizes\">Items per page:");
    static const long long sizes[] = {10, 25, 50, 100};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char t[16];
        snprintf(t, sizeof t, "%lld", sizes[i]);
        html_raw(h, i ? " - " : " ");
        explore_link(h, id, 0, sizes[i], split, label, t, size == sizes[i]);
    }
    /* DIGITS's pager: five pages either side of this one, the first and last beyond them */
    long long last = total > 0 ? (total - 1) / size : 0;
    long long lo = page > 5 ? page - 5 : 0, hi = page + 5 < last ? page + 5 : last;
    html_printf(h, "</p>\n<p class=\"records-count\">%lld records</p>\n<ul class=\"pagination\">\n", total);
    if (page > 0) {
        html_raw(h, "<li>");
        explore_link(h, id, page - 1, size, split, label, "\xc2\xab", 0);
        html_raw(h, "</li>\n");
    }
    if (lo > 0) {
        html_raw(h, "<li>");
        explore_link(h, id, 0, size, split, label, "0", 0);
        html_raw(h, "</li>\n<li>...</li>\n");
    }
    for (long long p = lo; p <= hi; p++) {
        char t[32];
        snprintf(t, sizeof t, "%lld", p);
        html_raw(h, "<li>");
        explore_link(h, id, p, size, split, label, t, p == page);
        html_raw(h, "</li>\n");
    }
    if (hi < last) {
        char t[32];
        snprintf(t, sizeof t, "%lld", last);
        html_raw(h, "<li>...</li>\n<li>");
        explore_link(h, id, last, size, split, label, t, 0);
        html_raw(h, "</li>\n");
    }
    if (page < last) {
        html_raw(h, "<li>");
        explore_link(h, id, page + 1, size, split, label, "\xc2\xbb", 0);
        html_raw(h, "</li>\n");
    }
    html_raw(h, "</ul>\n<div class=\"records\">\n");
    for (size_t i = 0; i < n; i++) {
        int lab = cd_db_label(db, idx[i]);
        const char *name = json_string_value(json_array_get(labels, (size_t)lab));
        char fallback[32];
        snprintf(fallback, sizeof fallback, "label %d", lab);
        html_raw(h, "<figure><img src=\"");
        html_text(h, prefix);
        html_raw(h, "/datasets/");
        html_query_value(h, id);
        html_printf(h, "/images/%s/%zu\" alt=\"", cd_split_name(split), idx[i]);
        html_text(h, name ? name : fallback);
        html_raw(h, "\"><figcaption>");
        html_text(h, name ? name : fallback);
        html_raw(h, "</figcaption></figure>\n");
    }
    html_raw(h, "</div>\n</main>\n</body>\n</html>\n");
}

void h_dataset_explore_page(req_t *r)
{
    json_t *job = dataset_from_request(r), *detail = NULL, *labels = NULL;
    size_t *idx = NULL;
    cd_db_t *db = NULL;
    if (!job)
        return;
    const char *db_s = fields_get(r->fields, "db");
    db_s = db_s && *db_s ? db_s : "train";
    int split = split_of_db(r, db_s);
    if (split < 0)
        goto out;
    /* the status first: a dataset that is not Done lists its tasks by plan only */
    int st = (int)json_integer_value(json_object_get(job, "state"));
    if (st != CD_ST_DONE) {
        reply_error(r, 500, "This create_db task's status should be 'D' but is '%s' (%s): only a dataset that is Done "
                    "can be explored", cd_state_code(st), cd_state_name(st));
        goto out;
    }
    detail = view_job_detail(r->srv, job);
    if (!create_db_task(detail, split)) {
        reply_error(r, 500, "No create_db task for %s: dataset %s has no %s split", db_s, sval(job, "id"),
                    cd_split_name(split));
        goto out;
    }
    long long page = 0, size = 25, label = -1;
    const char *label_s = fields_get(r->fields, "label");
    labels = json_array();
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(job, "result"), "classes"), k, c)
        json_array_append(labels, json_object_get(c, "label"));
    if (query_number(r, "page", 0, 1000000000, &page) != CD_OK ||
        query_number(r, "size", 1, EXPLORE_MAX_SIZE, &size) != CD_OK)
        goto out;
    /* DIGITS's own links say label=None for every class; a number picks one class */
    if (label_s && *label_s && strcmp(label_s, "None") != 0 &&
        query_number(r, "label", 0, (long long)json_array_size(labels) - 1, &label) != CD_OK)
        goto out;
    db = dataset_split_open(r, job, split);
    if (!db)
        goto out;
    idx = malloc((size_t)size * sizeof *idx);
    if (!idx) {
        reply_error(r, 500, "out of memory paging %lld records", size);
        goto out;
    }
    size_t n = 0;
    long long total = dataset_page(db, label, page, size, idx, &n);
    char title[600];
    snprintf(title, sizeof title, "%s - Explorer", sval(job, "name"));
    html_t h = {0};
    page_head(&h, r, title);
    explore_body(&h, r, job, labels, split, label, page, size, total, idx, n, db);
    html_reply(r, 200, &h);
out:
    cd_db_close(db);
    free(idx);
    json_decref(labels);
    json_decref(detail);
    json_decref(job);
}

void h_dataset_summary(req_t *r)
{
    json_t *job = dataset_from_request(r);
    if (!job)
        return;
    json_t *d = view_job_detail(r->srv, job), *dims = json_object_get(d, "image_dims"); /* [h, w, c] */
    const char *prefix = r->srv->cfg.url_prefix;
    html_t h = {0};
    html_raw(&h, "<h4>\n<a href=\"");
    html_text(&h, prefix);
    html_raw(&h, "/datasets/");
    html_query_value(&h, sval(job, "id"));
    html_raw(&h, "\" target=\"_blank\">");
    html_text(&h, sval(d, "name"));
    html_raw(&h, "</a>\n</h4>\n<p><span class=\"text-");
    html_text(&h, sval(d, "status_css"));
    html_raw(&h, "\">");
    html_text(&h, sval(d, "status"));
    html_printf(&h, "</span></p>\n<dl>\n<dt>Image Size</dt>\n<dd>%lldx%lld</dd>\n<dt>Image Type</dt>\n<dd>%s</dd>\n",
                (long long)json_integer_value(json_array_get(dims, 1)),
                (long long)json_integer_value(json_array_get(dims, 0)),
                json_integer_value(json_array_get(dims, 2)) == 3 ? "COLOR" : "GRAYSCALE");
    json_t *tasks = json_object_get(d, "CreateDbTasks"), *t;
    html_raw(&h, "<dt>DB backend</dt>\n<dd>");
    html_text(&h, json_array_size(tasks) ? sval(json_array_get(tasks, 0), "backend") : "?");
    html_raw(&h, "</dd>\n");
    size_t i;
    json_array_foreach(tasks, i, t)
    {
        html_raw(&h, "<dt>");
        html_text(&h, sval(t, "name"));
        json_t *e = json_object_get(t, "entries");
        if (json_integer_value(e) > 0)
            html_printf(&h, "</dt>\n<dd>%lld images</dd>\n", (long long)json_integer_value(e));
        else
            html_raw(&h, "</dt>\n<dd>?</dd>\n");
    }
    html_raw(&h, "</dl>\n");
    html_reply(r, 200, &h);
    json_decref(d);
    json_decref(job);
}
