/* DIGITS's form pages: GET /datasets/images/classification/new, /datasets/generic/new/
 * <extension_id>, /models/images/classification/new, /models/images/generic/new and
 * /pretrained_models/new answer the browser UI's forms (web/),
 * so DIGITS's bookmarks and links (?clone=<id> included) work. The pages refer to their
 * files relative to the UI's folder; served from a deeper path, each gets a <base> of
 * the URL prefix's root after its <head>. */
#include "internal.h"

#include "api_generic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

/* Serves page with the <base> of the URL prefix; `from` (when not NULL) is replaced by
 * `to` throughout, for a page that serves two of DIGITS's forms. */
static void serve_page_as(req_t *r, const char *page, const char *api, const char *from, const char *to)
{
    server_t *srv = r->srv;
    char path[PATH_MAX];
    if (!srv->cfg.web_dir[0] || paths_resolve_under(srv->cfg.web_dir, page, path, sizeof path) != CD_OK) {
        reply_error(r, 404, "This server has no browser UI (%s is not in --web); create the job with POST %s", page,
                    api);
        return;
    }
    size_t len = 0;
    char *html = cd_read_file(path, &len);
    if (!html) {
        reply_error(r, 500, "cannot read %s: %s", path, strerror(errno));
        return;
    }
    if (from) {
        char *swapped = api_replace_all(html, from, to, &len);
        free(html);
        if (!swapped) {
            reply_error(r, 500, "out of memory serving %s", page);
            return;
        }
        html = swapped;
    }
    char base[sizeof srv->cfg.url_prefix + 32];
    int bl = snprintf(base, sizeof base, "<base href=\"%s/\">", srv->cfg.url_prefix);
    const char *head = strstr(html, "<head>");
    size_t at = head ? (size_t)(head - html) + 6 : 0;
    char *out = bl > 0 ? malloc(len + (size_t)bl + 1) : NULL;
    if (!out) {
        free(html);
        reply_error(r, 500, "out of memory serving %s", page);
        return;
    }
    memcpy(out, html, at);
    memcpy(out + at, base, (size_t)bl);
    memcpy(out + at + (size_t)bl, html + at, len - at);
    free(html);
    reply_buffer(r, 200, out, len + (size_t)bl, "text/html; charset=utf-8", "no-store");
}

static void serve_page(req_t *r, const char *page, const char *api) { serve_page_as(r, page, api, NULL, NULL); }

void h_page_dataset_new(req_t *r) { serve_page(r, "dataset-new.html", "/datasets/images/classification/json"); }
void h_page_model_new(req_t *r) { serve_page(r, "model-new.html", "/models/images/classification/json"); }
void h_page_pretrained_new(req_t *r) { serve_page(r, "pretrained-new.html", "/pretrained_models/new"); }

/* DIGITS raises on an unknown extension; here it is a 404 that names the known ones. */
void h_page_generic_dataset_new(req_t *r)
{
    if (!generic_extension_known(r->params[0])) {
        reply_error(r, 404, "Unknown extension '%s': the data extensions are %s", r->params[0],
                    generic_extension_list());
        return;
    }
    serve_page(r, "dataset-generic-new.html", "/datasets/generic/create/<extension_id>/json");
}

/* The model form, titled as DIGITS's generic one; served from this path it lists the
 * generic datasets and posts to /models/images/generic/json (web/js/model-new.js). */
void h_page_generic_model_new(req_t *r)
{
    serve_page_as(r, "model-new.html", "/models/images/generic/json", "New Image Classification Model",
                  "New Image Model");
}
