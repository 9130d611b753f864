/* The network view as a page (network_page.h). */
#include "network_page.h"

#include <stdio.h>
#include <string.h>

#include "cdigits/util.h"
#include "html.h"

/* The stages in the order the engine builds them. */
static const char *const g_stages[] = {"train", "val", "deploy"};

static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* A shape [64, 20, 24, 24] as "64x20x24x24"; [] (a loss, an accuracy) as "scalar". */
static void put_shape(html_t *p, json_t *shape)
{
    if (json_array_size(shape) == 0) {
        html_raw(p, "scalar");
        return;
    }
    size_t i;
    json_t *d;
    json_array_foreach(shape, i, d)
    {
        if (i)
            html_raw(p, "x");
        html_printf(p, "%" JSON_INTEGER_FORMAT, json_integer_value(d));
    }
}

/* The bottoms (strings) or tops ({name, shape}) of a layer, one per line. */
static void put_blobs(html_t *p, json_t *blobs, int with_shape)
{
    size_t i;
    json_t *b;
    json_array_foreach(blobs, i, b)
    {
        if (i)
            html_raw(p, "<br>");
        html_text(p, with_shape ? str(b, "name") : json_string_value(b) ? json_string_value(b) : "");
        if (with_shape && json_is_array(json_object_get(b, "shape"))) {
            html_raw(p, " <span class=\"shape\">");
            put_shape(p, json_object_get(b, "shape"));
            html_raw(p, "</span>");
        }
    }
}

static void put_stage(html_t *p, const char *name, json_t *stage)
{
    json_t *layers = json_object_get(stage, "layers");
    html_raw(p, "<section class=\"stage\" id=\"stage-");
    html_text(p, name);
    html_raw(p, "\">\n<h2>");
    html_text(p, name);
    html_printf(p, ": %zu layers, %" JSON_INTEGER_FORMAT " learnable values", json_array_size(layers),
                json_integer_value(json_object_get(stage, "params")));
    html_raw(p, "</h2>\n<table class=\"layers\">\n<thead><tr><th>Layer</th><th>Type</th><th>Bottoms</th>"
                "<th>Tops and shapes</th><th>Learnable values</th></tr></thead>\n<tbody>\n");
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        html_raw(p, "<tr><td>");
        html_text(p, str(l, "name"));
        html_raw(p, "</td><td>");
        html_text(p, str(l, "type"));
        html_raw(p, "</td><td>");
        put_blobs(p, json_object_get(l, "bottoms"), 0);
        html_raw(p, "</td><td>");
        put_blobs(p, json_object_get(l, "tops"), 1);
        html_raw(p, "</td><td>");
        html_printf(p, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(l, "params")));
        html_raw(p, "</td></tr>\n");
    }
    html_raw(p, "</tbody>\n</table>\n</section>\n");
}

void network_page_reply(req_t *r, json_t *result)
{
    html_t p = {0};
    const char *network = str(result, "network");
    html_raw(&p, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Network ");
    html_text(&p, network);
    html_raw(&p, "</title>\n<style>table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:2px 6px;"
                 "text-align:left;vertical-align:top}.shape{color:#555}.network-errors{color:#a00}</style>"
                 "</head>\n<body><h1>Network ");
    html_text(&p, network);
    html_raw(&p, "</h1>\n<p class=\"network-input\">");
    json_t *input = json_object_get(result, "input");
    if (json_array_size(input) > 0) {
        html_raw(&p, "Input ");
        put_shape(&p, input);
        html_raw(&p, " (channels x height x width), ");
    }
    html_printf(&p, "%" JSON_INTEGER_FORMAT " classes, crop %" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(result, "classes")),
                 json_integer_value(json_object_get(result, "crop")));
    html_raw(&p, "</p>\n");
    json_t *errors = json_object_get(result, "errors");
    if (json_array_size(errors) > 0) {
        html_raw(&p, "<h2>The network has errors</h2>\n<ul class=\"network-errors\">\n");
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e)
        {
            html_raw(&p, "<li>");
            html_text(&p, json_string_value(e) ? json_string_value(e) : "");
            html_raw(&p, "</li>\n");
        }
        html_raw(&p, "</ul>\n");
    }
    json_t *stages = json_object_get(result, "stages");
    for (size_t i = 0; i < CD_ARRAY_LEN(g_stages); i++) {
        json_t *stage = json_object_get(stages, g_stages[i]);
        if (stage)
            put_stage(&p, g_stages[i], stage);
    }
    html_raw(&p, "</body></html>\n");
    html_reply(r, 200, &p);
}
