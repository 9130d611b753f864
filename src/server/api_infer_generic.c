/* DIGITS's generic model inference: infer_one, infer_many and infer_db answer every
 * output blob of the deploy net by name ({"outputs": {blob: values}}), and for a
 * segmentation model each image's class mask (a PNG data URL in the dataset's palette)
 * with its pixel counts per class, and the mean IoU of lists with label images and of
 * a dataset's db with its label db (docs/inference.md). The work runs in the model's
 * warm serve-model worker (ops infer, infer_list, infer_db) through the plumbing of
 * api_infer.c; lists stream through a result file as classify_many's do. */
#define _GNU_SOURCE
#include "api_infer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/image.h"
#include "cdigits/jobdir.h"
#include "cdigits/list_line.h"
#include "cdigits/util.h"
#include "html.h"

#define RUN_ONE 120.0    /* seconds one image may take */
#define RUN_LIST 7200.0  /* seconds a list or a db may take */
#define PAGE_VALUES 12   /* values of an output a page row shows */
#define HTML_TYPE "text/html; charset=utf-8"

static const char *sval(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The worker's answer fields a reply carries as they are. */
static const char *const g_one_fields[] = {"outputs", "task", "mask", "mask_size", "class_counts",
                                           "bboxes", "boxes", "box_counts", "image_frame"};

/* ---- pages ------------------------------------------------------------------------------- */

/* The first values of a JSON array tree, flattened, as text; "..." past PAGE_VALUES. */
static void values_text(FILE *f, json_t *v, int *shown)
{
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (*shown > PAGE_VALUES)
                return;
            values_text(f, e, shown);
        }
        return;
    }
    if ((*shown)++ == PAGE_VALUES) {
        fputs(" ...", f);
        return;
    }
    fprintf(f, "%s%.6g", *shown > 1 ? ", " : "", json_number_value(v));
}

/* The shape of a nested array ("1x3x6x7"). */
static void shape_text(FILE *f, json_t *v)
{
    int first = 1;
    while (json_is_array(v)) {
        fprintf(f, "%s%zu", first ? "" : "x", json_array_size(v));
        first = 0;
        v = json_array_get(v, 0);
    }
    if (first)
        fputs("1", f);
}

/* One image's outputs as table rows: name, shape, first values. */
static void output_rows(FILE *f, json_t *outputs)
{
    const char *name;
    json_t *v;
    json_object_foreach(outputs, name, v)
    {
        int shown = 0;
        fputs("<tr><td class=\"mono\">", f);
        html_file_text(f, name);
        fputs("</td><td>", f);
        shape_text(f, v);
        fputs("</td><td class=\"mono\">", f);
        values_text(f, v, &shown);
        fputs("</td></tr>\n", f);
    }
}

/* The legend of a mask: colour, class, pixels. */
static void legend(FILE *f, json_t *counts)
{
    size_t i;
    json_t *c;
    fputs("<table class=\"table legend\"><tr><th>Colour</th><th>Class</th><th>Pixels</th></tr>\n", f);
    json_array_foreach(counts, i, c)
    {
        fputs("<tr><td><span class=\"swatch\" style=\"background:", f);
        html_file_text(f, sval(c, "color"));
        fputs("\">&nbsp;&nbsp;&nbsp;</span></td><td>", f);
        html_file_text(f, sval(c, "label"));
        fprintf(f, "</td><td>%lld</td></tr>\n", (long long)json_integer_value(json_object_get(c, "pixels")));
    }
    fputs("</table>\n", f);
}

/* A detection's boxes (in the image's pixels): with over, outlined divs placed in percent
 * of the image (frame's "image" size) inside its relative container, in their class's
 * colour of counts; else the items of a list. */
static void boxes_html(FILE *f, json_t *boxes, json_t *counts, json_t *frame, int over)
{
    json_t *size = json_object_get(frame, "image");
    double iw = json_number_value(json_array_get(size, 0)), ih = json_number_value(json_array_get(size, 1));
    size_t i;
    json_t *b;
    json_array_foreach(boxes, i, b)
    {
        const char *color = "#ff0000";
        size_t k;
        json_t *c;
        json_array_foreach(counts, k, c) if (json_integer_value(json_object_get(c, "class")) ==
                                             json_integer_value(json_object_get(b, "class"))) color = sval(c, "color");
        double x1 = json_number_value(json_object_get(b, "x1")), y1 = json_number_value(json_object_get(b, "y1"));
        double x2 = json_number_value(json_object_get(b, "x2")), y2 = json_number_value(json_object_get(b, "y2"));
        if (over && iw > 0 && ih > 0) {
            fprintf(f, "<div class=\"box\" style=\"position:absolute;left:%.3f%%;top:%.3f%%;width:%.3f%%;height:%.3f%%;"
                       "border:2px solid ", 100 * x1 / iw, 100 * y1 / ih, 100 * (x2 - x1) / iw, 100 * (y2 - y1) / ih);
            html_file_text(f, color);
            fputs("\" title=\"", f);
            html_file_text(f, sval(b, "label"));
            fputs("\"></div>", f);
        } else {
            fputs("<li>", f);
            html_file_text(f, sval(b, "label"));
            fprintf(f, " %.1f, %.1f to %.1f, %.1f (%.3f)</li>\n", x1, y1, x2, y2,
                    json_number_value(json_object_get(b, "confidence")));
        }
    }
}

/* The detection measures of a list or db with labels. */
static void detection_block(FILE *f, json_t *d)
{
    if (!d)
        return;
    fprintf(f, "<p class=\"detection\">mAP %.2f, precision %.2f%%, recall %.2f%% at IoU %.2f (%lld true, %lld false "
               "positives, %lld missed)</p>\n",
            json_number_value(json_object_get(d, "mAP")), json_number_value(json_object_get(d, "precision")),
            json_number_value(json_object_get(d, "recall")), json_number_value(json_object_get(d, "iou_threshold")),
            (long long)json_integer_value(json_object_get(d, "true_positives")),
            (long long)json_integer_value(json_object_get(d, "false_positives")),
            (long long)json_integer_value(json_object_get(d, "false_negatives")));
}

/* The IoU summary of a list or db. */
static void iou_block(FILE *f, json_t *iou)
{
    if (!iou)
        return;
    fprintf(f, "<p class=\"iou\">Mean IoU %.2f%%, pixel accuracy %.2f%% over %lld pixels (%lld ignored)</p>\n",
            json_number_value(json_object_get(iou, "mean_iou")), json_number_value(json_object_get(iou, "pixel_accuracy")),
            (long long)json_integer_value(json_object_get(iou, "pixels")),
            (long long)json_integer_value(json_object_get(iou, "ignored_pixels")));
    fputs("<table class=\"table\"><tr><th>Class</th><th>IoU %</th><th>Label pixels</th><th>Predicted pixels</th></tr>\n",
          f);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(iou, "per_class"), i, c)
    {
        fputs("<tr><td>", f);
        html_file_text(f, sval(c, "label"));
        json_t *v = json_object_get(c, "iou");
        if (json_is_number(v))
            fprintf(f, "</td><td>%.2f", json_number_value(v));
        else
            fputs("</td><td>-", f);
        fprintf(f, "</td><td>%lld</td><td>%lld</td></tr>\n",
                (long long)json_integer_value(json_object_get(c, "label_pixels")),
                (long long)json_integer_value(json_object_get(c, "predicted_pixels")));
    }
    fputs("</table>\n", f);
}

static void model_header(FILE *f, json_t *job, const char *task)
{
    fputs("<div class=\"page-header\"><h1>", f);
    html_file_text(f, sval(job, "name"));
    fputs(" <small>Image Model (", f);
    html_file_text(f, task);
    fputs(")</small></h1></div>\n", f);
}

/* infer_one's page: the image with the mask over it, the legend, the outputs. */
static void page_one(req_t *r, json_t *job, json_t *body, const char *dir, const infer_image *img)
{
    char path[PATH_MAX + 32];
    FILE *f = infer_page_file(r, dir, job, "Infer One", path, sizeof path);
    if (!f)
        return;
    model_header(f, job, sval(body, "task"));
    infer_page_snapshot(f, body);
    fputs("<div class=\"infer-one\"><div class=\"overlay\" style=\"position:relative;display:inline-block\"><img "
          "class=\"input\" alt=\"the image\" src=\"",
          f);
    infer_page_image_src(f, r, img);
    fputs("\" style=\"max-width:512px\">", f);
    const char *mask = sval(body, "mask");
    if (*mask) {
        fputs("<img class=\"mask\" alt=\"the class of each pixel\" style=\"position:absolute;left:0;top:0;"
              "width:100%;height:100%;opacity:0.5;image-rendering:pixelated\" src=\"",
              f);
        html_file_text(f, mask);
        fputs("\">", f);
    }
    json_t *boxes = json_object_get(body, "boxes");
    if (boxes)
        boxes_html(f, boxes, json_object_get(body, "box_counts"), json_object_get(body, "image_frame"), 1);
    fputs("</div>\n", f);
    if (*mask)
        legend(f, json_object_get(body, "class_counts"));
    if (boxes) {
        size_t n = json_array_size(boxes);
        fprintf(f, "<h3>Boxes</h3><p class=\"box-count\">%zu box%s</p><ul class=\"boxes\">\n", n, n == 1 ? "" : "es");
        boxes_html(f, boxes, NULL, NULL, 0);
        fputs("</ul>\n", f);
    }
    fputs("<h3>Outputs</h3><table class=\"table outputs\"><tr><th>Blob</th><th>Shape</th><th>Values</th></tr>\n", f);
    output_rows(f, json_object_get(body, "outputs"));
    fputs("</table></div>\n", f);
    infer_page_end(f);
    infer_reply_file(r, f, path, HTML_TYPE, "the page");
}

/* infer_many's and infer_db's page: the counts, the IoU, a row per image. */
static void page_many(req_t *r, json_t *job, json_t *tail, const char *dir, FILE *res, const char *what)
{
    char path[PATH_MAX + 32];
    FILE *f = infer_page_file(r, dir, job, what, path, sizeof path);
    if (!f)
        return;
    model_header(f, job, sval(tail, "task"));
    infer_page_snapshot(f, tail);
    fprintf(f, "<p class=\"counts\">%lld images, %lld inferred, %lld failed, %lld lines skipped</p>\n",
            (long long)json_integer_value(json_object_get(tail, "images")),
            (long long)json_integer_value(json_object_get(tail, "inferred")),
            (long long)json_integer_value(json_object_get(tail, "failed")),
            (long long)json_integer_value(json_object_get(tail, "skipped_lines")));
    iou_block(f, json_object_get(tail, "iou"));
    detection_block(f, json_object_get(tail, "detection"));
    fputs("<table class=\"table results\"><tr><th>Image</th><th>Mask</th><th>Outputs</th></tr>\n", f);
    char *line = NULL;
    size_t cap = 0;
    rewind(res);
    while (getline(&line, &cap, res) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        fputs("<tr><td class=\"mono\">", f);
        html_file_text(f, sval(o, "path"));
        fputs("</td><td>", f);
        if (*sval(o, "mask")) {
            fputs("<img class=\"mask\" alt=\"mask\" style=\"max-width:128px;image-rendering:pixelated\" src=\"", f);
            html_file_text(f, sval(o, "mask"));
            fputs("\">", f);
        }
        fputs("</td><td>", f);
        if (json_object_get(o, "error")) {
            fputs("<span class=\"error\">", f);
            html_file_text(f, sval(o, "error"));
            fputs("</span>", f);
        } else if (json_object_get(o, "boxes")) {
            fputs("<ul class=\"boxes\">", f);
            boxes_html(f, json_object_get(o, "boxes"), NULL, NULL, 0);
            fputs("</ul>", f);
        } else {
            fputs("<table class=\"table outputs\">", f);
            output_rows(f, json_object_get(o, "outputs"));
            fputs("</table>", f);
        }
        fputs("</td></tr>\n", f);
        json_decref(o);
    }
    free(line);
    fputs("</table>\n", f);
    infer_page_end(f);
    infer_reply_file(r, f, path, HTML_TYPE, "the page");
}

/* ---- infer_one -------------------------------------------------------------------------- */

void h_infer_one(req_t *r)
{
    long iteration;
    double epoch;
    json_t *job = infer_model_from_request(r, &iteration, &epoch), *req = NULL, *ans = NULL;
    if (!job)
        return;
    char path[PATH_MAX], dir[PATH_MAX] = "";
    infer_image shown;
    if (infer_image_request(r, "infer", path, sizeof path, &shown, &req) != CD_OK)
        goto out;
    if (infer_call(r, job, iteration, req, RUN_ONE, &ans) != CD_OK)
        goto out;
    json_t *body = json_object();
    for (size_t i = 0; i < CD_ARRAY_LEN(g_one_fields); i++)
        if (json_object_get(ans, g_one_fields[i]))
            json_object_set(body, g_one_fields[i], json_object_get(ans, g_one_fields[i]));
    infer_snapshot_fields(body, iteration, epoch);
    if (!infer_wants_html(r)) {
        infer_reply_json(r, 200, body);
    } else if (infer_request_dir(r, job, "one", 4, dir, sizeof dir) == CD_OK) {
        page_one(r, job, body, dir, &shown);
        infer_remove_dir(dir);
        json_decref(body);
    } else {
        json_decref(body);
    }
out:
    json_decref(ans);
    json_decref(req);
    json_decref(job);
}

/* ---- infer_many and infer_db ------------------------------------------------------------- */

/*
 * One line of the upload into the worker's list: `image [label]` (the label the last
 * word when it is an image name, or a KITTI .txt file of a detection model's boxes, and
 * something comes before it, or after a tab), or DIGITS's `image [number]` (the number
 * dropped). Both paths must lie in the data roots.
 */
static int label_name_ok(const char *name)
{
    size_t n = strlen(name);
    return cd_image_name_ok(name) || (n > 4 && !strcasecmp(name + n - 4, ".txt"));
}

static void list_line(req_t *r, infer_list *g, FILE *out, char *text, long lineno, const char *folder)
{
    char *tab = strchr(text, '\t'), *label = NULL, *image, *word;
    if (tab) {
        *tab = 0;
        label = tab + 1;
        label[strcspn(label, "\t\r\n")] = 0;
        while (*label == ' ')
            label++;
    } else {
        text[strcspn(text, "\r\n")] = 0;
        char *sp = strrchr(text, ' ');
        if (sp && sp[1] && label_name_ok(sp + 1)) {
            label = sp + 1;
            while (sp > text && sp[-1] == ' ')
                sp--;
            *sp = 0;
        }
    }
    if (!cd_list_line_split(text, 1, &image, &word))
        return;
    char key[PATH_MAX * 2], real[PATH_MAX], lreal[PATH_MAX] = "", lpath[PATH_MAX * 2], msg[1024];
    const char *why = infer_list_path(r, folder, image, "path", key, sizeof key, real, sizeof real, msg, sizeof msg);
    if (!why && label && *label)
        why = infer_list_path(r, folder, label, "label path", lpath, sizeof lpath, lreal, sizeof lreal, msg,
                              sizeof msg);
    if (why) {
        infer_list_skip(g, key, lineno, why);
        return;
    }
    fprintf(out, "%s\t%s\t%s\n", real, lreal, key);
    g->written++;
}

/* The db infer_db reads: db_path as a split of the model's dataset ("train", "val",
 * "test"; "" is val) or a .db file in the data roots or the jobs folder; its label db
 * beside it (<split>_labels.db) when there is one. CD_ERR after a reply. */
static int pick_db(req_t *r, json_t *job, char *db, size_t len, char *labels, size_t llen)
{
    const char *want = fields_get(r->fields, "db_path");
    char path[PATH_MAX + 32], msg[1024];
    labels[0] = 0;
    if (!want || !*want)
        want = "val";
    int split = -1;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        if (!strcmp(want, cd_split_name(s)))
            split = s;
    if (split >= 0) {
        jobdir_path(sval(job, "dir"), JOBDIR_TRAIN_JSON, path, sizeof path);
        json_t *tj = json_load_file(path, 0, NULL);
        const char *ds = sval(tj, "dataset_dir");
        jobdir_path(ds, (jobdir_file)(JOBDIR_TRAIN_DB + split), db, len);
        jobdir_path(ds, (jobdir_file)(JOBDIR_TRAIN_LABELS_DB + split), labels, llen);
        json_decref(tj);
        if (access(db, R_OK) != 0) {
            infer_field_error(r, "db_path", "the model's dataset has no such split; use train, val or test");
            return CD_ERR;
        }
    } else {
        if (paths_check_field(r->srv, want, 0, 1, db, len, msg, sizeof msg) != CD_OK) {
            infer_field_error(r, "db_path", msg);
            return CD_ERR;
        }
        size_t n = strlen(db);
        if (n > 3 && !strcmp(db + n - 3, ".db"))
            snprintf(labels, llen, "%.*s_labels.db", (int)(n - 3), db);
    }
    if (labels[0] && access(labels, R_OK) != 0)
        labels[0] = 0;
    return CD_OK;
}

/* {"outputs": {key: {...}}, "masks"/"class_counts"/"ious" per key for segmentation,
 * "boxes"/"bboxes" (and "scores" with labels) per key for detection,
 * "skipped", and the summary with the snapshot} assembled from the result lines into
 * dir/reply.json and sent from the file. */
static void reply_many(req_t *r, infer_list *g, json_t *tail)
{
    static const char *const per_image[][2] = {
        {"outputs", "outputs"}, {"masks", "mask"}, {"class_counts", "class_counts"}, {"ious", "iou"},
        {"boxes", "boxes"}, {"bboxes", "bboxes"}, {"scores", "score"}};
    static const char *const refused[] = {"error"};
    char path[PATH_MAX + 32];
    FILE *res = fopen(g->results, "r"), *out = infer_list_reply_open(r, g, res, path, sizeof path);
    if (!out)
        return;
    fputc('{', out);
    for (size_t i = 0; i < CD_ARRAY_LEN(per_image); i++) {
        long n = 0;
        long at = ftell(out);
        fprintf(out, "%s\"%s\":{", i ? "," : "", per_image[i][0]);
        infer_copy_pairs(res, out, per_image[i][1], &n, 0);
        if (n == 0 && i > 0) /* a segmentation's keys only where it has them */
            fseek(out, at, SEEK_SET);
        else
            fputc('}', out);
    }
    fputc(',', out);
    infer_write_skipped(out, res, g, refused, CD_ARRAY_LEN(refused), tail);
    fclose(res);
    /* a seek back leaves the file longer than what was written last */
    fflush(out);
    if (ftruncate(fileno(out), ftell(out)) != 0) {
        fclose(out);
        infer_error(r, 500, "cannot write %s: %s", path, strerror(errno));
        return;
    }
    infer_reply_file(r, out, path, "application/json", "the reply");
}

/* The two list routes: the model, its snapshot, the list or db, one worker run, the reply. */
static void infer_many(req_t *r, int from_db)
{
    long iteration;
    double epoch;
    json_t *job = infer_model_from_request(r, &iteration, &epoch), *req = NULL, *ans = NULL;
    if (!job)
        return;
    infer_list g = {.skipped = json_object()};
    char labels[PATH_MAX + 32] = "";
    if (from_db) {
        if (pick_db(r, job, g.src, sizeof g.src, labels, sizeof labels) != CD_OK ||
            infer_request_dir(r, job, "gdb", 0, g.dir, sizeof g.dir) != CD_OK)
            goto out;
        snprintf(g.results, sizeof g.results, "%s/results.jsonl", g.dir);
    } else if (infer_list_prepare(r, job, "gmany", "image [label image or KITTI .txt]", "infer", list_line, &g) != CD_OK) {
        goto out;
    }
    const char *nt = fields_get(r->fields, "num_test_images");
    req = json_pack("{s:s, s:s, s:s, s:i, s:I}", "op", from_db ? "infer_db" : "infer_list", from_db ? "db" : "list",
                    g.src, "out", g.results, "batch", 16, "limit", (json_int_t)(from_db && nt && *nt ? atol(nt) : 0));
    if (labels[0])
        json_object_set_new(req, "labels_db", json_string(labels));
    if (infer_call(r, job, iteration, req, RUN_LIST, &ans) != CD_OK)
        goto out;
    json_t *tail = json_deep_copy(json_object_get(ans, "summary"));
    infer_snapshot_fields(tail, iteration, epoch);
    json_object_set_new(tail, "skipped_lines", json_integer(g.nskipped));
    if (from_db)
        json_object_set_new(tail, "db_path", json_string(g.src));
    if (infer_wants_html(r)) {
        FILE *res = fopen(g.results, "r");
        if (!res)
            infer_error(r, 500, "cannot read %s: %s", g.results, strerror(errno));
        else {
            page_many(r, job, tail, g.dir, res, from_db ? "Infer DB" : "Infer Many");
            fclose(res);
        }
    } else {
        reply_many(r, &g, tail);
    }
    json_decref(tail);
out:
    if (g.dir[0])
        infer_remove_dir(g.dir);
    json_decref(ans);
    json_decref(req);
    json_decref(g.skipped);
    json_decref(job);
}

void h_infer_many(req_t *r) { infer_many(r, 0); }

void h_infer_db(req_t *r) { infer_many(r, 1); }
