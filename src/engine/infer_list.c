/* Lists of images through a classifier (see infer.h): the `path [label]` line parser,
 * the batches, the per-image JSON lines, the confusion-matrix summary and the best
 * images of each class (a bounded min-heap per class). */
#define _GNU_SOURCE
#include "cdigits/infer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/list_line.h"
#include "cdigits/util.h"
#include "engine_internal.h"

/* A probability as DIGITS shows it: a percentage with 2 decimals. */
static double percent(float p) { return floor((double)p * 10000.0 + 0.5) / 100.0; }

json_t *cd_predictions_json(const cd_classifier_t *c, const float *probs, int top)
{
    int n = cd_classifier_classes(c), idx[64];
    if (top > 64)
        top = 64;
    int k = cd_topk(probs, n, top, idx);
    json_t *list = json_array();
    for (int j = 0; j < k; j++)
        json_array_append_new(list, json_pack("[s, f]", cd_classifier_label(c, idx[j]), percent(probs[idx[j]])));
    return list;
}

/* ---- list lines ------------------------------------------------------------------- */

int cd_list_line_parse(char *line, const char *root, cd_list_item *item)
{
    /* a byte order mark (the first line of a file saved by Notepad) is not the path's */
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        line += 3;
    char *tab = strchr(line, '\t');
    char *path = line, *label = NULL, *key = NULL;
    if (tab) {
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        *tab = 0;
        label = tab + 1;
        char *tab2 = strchr(label, '\t');
        if (tab2) {
            *tab2 = 0;
            key = tab2 + 1;
        }
    } else if (!cd_list_line_split(line, 1, &path, &label)) {
        return 0;
    }
    if (!path[0])
        return 0;
    memset(item, 0, sizeof *item);
    item->label = -1;
    if (path[0] != '/' && root && root[0]) {
        if (asprintf(&item->path, "%s/%s", root, path) < 0)
            item->path = NULL;
    } else {
        item->path = cd_xstrdup(path);
    }
    if (!item->path)
        item->path = cd_xstrdup(path);
    item->key = cd_xstrdup(key && key[0] ? key : item->path);
    if (label && label[0]) {
        char *end;
        long v = strtol(label, &end, 10);
        if (*end || v < 0 || v > 1000000) {
            if (asprintf(&item->error, "label \"%s\" is not a class number (0, 1, ...)", label) < 0)
                item->error = NULL;
        } else {
            item->label = (int)v;
        }
    }
    return 1;
}

void cd_list_item_free(cd_list_item *item)
{
    if (!item)
        return;
    free(item->path);
    free(item->key);
    free(item->error);
    memset(item, 0, sizeof *item);
}

/* ---- the best images of a class ----------------------------------------------------- */

void cd_topn_init(cd_topn *t, int cap)
{
    memset(t, 0, sizeof *t);
    t->cap = cap > 0 ? cap : 0;
    t->p = cd_xmalloc(sizeof(float) * (size_t)(t->cap ? t->cap : 1));
    t->name = cd_xmalloc(sizeof(char *) * (size_t)(t->cap ? t->cap : 1));
}

void cd_topn_free(cd_topn *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        free(t->name[i]);
    free(t->p);
    free(t->name);
    memset(t, 0, sizeof *t);
}

static void topn_swap(cd_topn *t, int a, int b)
{
    float tp = t->p[a];
    char *ts = t->name[a];
    t->p[a] = t->p[b];
    t->name[a] = t->name[b];
    t->p[b] = tp;
    t->name[b] = ts;
}

static void topn_sift_down(cd_topn *t, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n && t->p[l] < t->p[m])
            m = l;
        if (r < t->n && t->p[r] < t->p[m])
            m = r;
        if (m == i)
            return;
        topn_swap(t, i, m);
        i = m;
    }
}

void cd_topn_offer(cd_topn *t, float p, const char *name)
{
    if (t->n < t->cap) {
        int i = t->n++;
        t->p[i] = p;
        t->name[i] = cd_xstrdup(name);
        while (i > 0 && t->p[(i - 1) / 2] > t->p[i]) {
            topn_swap(t, i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
        return;
    }
    if (t->cap == 0 || p <= t->p[0])
        return;
    free(t->name[0]);
    t->p[0] = p;
    t->name[0] = cd_xstrdup(name);
    topn_sift_down(t, 0);
}

json_t *cd_topn_json(cd_topn *t)
{
    int n = t->n;
    json_t *out = json_array();
    int *order = cd_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) /* n is small: insertion sort */
        for (int j = i; j > 0 && t->p[order[j - 1]] < t->p[order[j]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (int i = 0; i < n; i++)
        json_array_append_new(out, json_pack("[s, f]", t->name[order[i]], percent(t->p[order[i]])));
    free(order);
    for (int i = 0; i < n; i++)
        free(t->name[i]);
    t->n = 0;
    return out;
}

/* ---- classifying a list --------------------------------------------------------------- */

typedef struct entry {
    cd_list_item item;
    long line;         /* 1-based line number in the list */
    cd_image_t img;    /* prepared */
} entry;

static void entry_free(entry *e)
{
    cd_list_item_free(&e->item);
    cd_image_free(&e->img);
    memset(e, 0, sizeof *e);
}

typedef struct list_stats {
    int k;                 /* classes */
    long images, classified, errors, labelled, top1, topk;
    long *confusion;       /* (k, k): rows the true class, columns the predicted one */
    cd_topn *best;         /* per class, or NULL */
} list_stats;

void cd_infer_result_line(FILE *out, json_t *line)
{
    /* 9 digits: every float and every percentage (two decimals) exactly */
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(line);
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}

/* Decodes and prepares the batch (in parallel), classifies the usable images in one
 * pass, writes their lines in list order and counts them. probs is (n, classes). */
static int run_batch(cd_classifier_t *c, entry *b, int n, const cd_list_opts *o, float *probs, FILE *out,
                     list_stats *st, char *err, size_t errlen)
{
    int classes = cd_classifier_classes(c), ch, h, w;
    cd_classifier_image_shape(c, &ch, &h, &w);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        if (b[i].item.error)
            continue;
        char msg[1024];
        cd_image_t raw = {0};
        if (cd_image_load(b[i].item.path, ch, &raw, msg, sizeof msg) != CD_OK ||
            cd_classifier_prepare(c, &raw, &b[i].img, msg, sizeof msg) != CD_OK)
            b[i].item.error = cd_xstrdup(msg);
        cd_image_free(&raw);
    }
    const cd_image_t **ready = cd_xmalloc(sizeof *ready * (size_t)n);
    int *slot = cd_xmalloc(sizeof *slot * (size_t)n), m = 0;
    for (int i = 0; i < n; i++) {
        slot[i] = -1;
        if (!b[i].item.error) {
            slot[i] = m;
            ready[m++] = &b[i].img;
        }
    }
    int rc = m ? cd_classifier_run_prepared(c, ready, m, probs, err, errlen) : CD_OK;
    free(ready);
    if (rc != CD_OK) {
        free(slot);
        return CD_ERR;
    }
    int topk = o->top < classes ? o->top : classes, idx[64];
    if (topk > 64)
        topk = 64;
    for (int i = 0; i < n; i++) {
        const cd_list_item *it = &b[i].item;
        st->images++;
        if (slot[i] < 0) {
            st->errors++;
            cd_infer_result_line(out, json_pack("{s:I, s:s, s:s}", "line", (json_int_t)b[i].line, "path", it->key,
                                                 "error", it->error));
            continue;
        }
        const float *p = probs + (size_t)slot[i] * (size_t)classes;
        st->classified++;
        json_t *line = json_pack("{s:I, s:s, s:o}", "line", (json_int_t)b[i].line, "path", it->key, "predictions",
                                 cd_predictions_json(c, p, o->top));
        if (it->label >= classes) {
            json_object_set_new(line, "label_error", json_sprintf("label %d is not a class of this model (0 to %d)",
                                                                  it->label, classes - 1));
        } else if (it->label >= 0) {
            json_object_set_new(line, "label", json_integer(it->label));
            int k = cd_topk(p, classes, topk, idx);
            st->labelled++;
            st->top1 += idx[0] == it->label;
            for (int j = 0; j < k; j++)
                st->topk += idx[j] == it->label;
            st->confusion[(size_t)it->label * (size_t)classes + (size_t)idx[0]]++;
        }
        if (st->best)
            for (int k = 0; k < classes; k++)
                cd_topn_offer(&st->best[k], p[k], it->key);
        cd_infer_result_line(out, line);
    }
    free(slot);
    fflush(out);
    return CD_OK;
}

static double ratio_pct(long a, long b) { return b ? floor(10000.0 * (double)a / (double)b + 0.5) / 100.0 : 0; }

/* The summary object of cd_classify_list (its block comment in infer.h); empties the
 * heaps. */
static json_t *summary(const cd_classifier_t *c, list_stats *st)
{
    int k = st->k;
    json_t *s = json_pack("{s:I, s:I, s:I, s:I}", "images", (json_int_t)st->images, "classified",
                          (json_int_t)st->classified, "failed", (json_int_t)st->errors, "labelled",
                          (json_int_t)st->labelled);
    if (st->labelled) {
        json_t *labels = json_array(), *matrix = json_array(), *acc = json_array(), *per = json_array();
        for (int i = 0; i < k; i++) {
            json_array_append_new(labels, json_string(cd_classifier_label(c, i)));
            json_t *row = json_array();
            long total = 0;
            for (int j = 0; j < k; j++) {
                long v = st->confusion[(size_t)i * k + j];
                json_array_append_new(row, json_integer(v));
                total += v;
            }
            long correct = st->confusion[(size_t)i * k + i];
            json_array_append_new(matrix, row);
            json_array_append_new(acc, total ? json_real(ratio_pct(correct, total)) : json_null());
            json_array_append_new(per, json_pack("{s:s, s:I, s:I}", "label", cd_classifier_label(c, i), "count",
                                                 (json_int_t)total, "correct", (json_int_t)correct));
        }
        json_object_set_new(s, "top1_accuracy", json_real(ratio_pct(st->top1, st->labelled)));
        json_object_set_new(s, "top5_accuracy", json_real(ratio_pct(st->topk, st->labelled)));
        json_object_set_new(s, "labels", labels);
        json_object_set_new(s, "confusion_matrix", matrix);
        json_object_set_new(s, "per_class_accuracy", acc);
        json_object_set_new(s, "per_class", per);
    }
    if (st->best) {
        json_t *res = json_array();
        for (int i = 0; i < k; i++)
            json_array_append_new(res, json_pack("[s, o]", cd_classifier_label(c, i), cd_topn_json(&st->best[i])));
        json_object_set_new(s, "top_n", res);
    }
    return s;
}

json_t *cd_classify_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_list_opts *o, char *err, size_t errlen)
{
    int batch = o->batch > 0 ? o->batch : 64;
    if (cd_classifier_set_batch(c, batch, err, errlen) != CD_OK)
        return NULL;
    batch = cd_classifier_batch(c);
    int k = cd_classifier_classes(c);
    list_stats st = {.k = k};
    st.confusion = cd_xcalloc((size_t)k * k, sizeof *st.confusion);
    if (o->top_n > 0) {
        st.best = cd_xcalloc((size_t)k, sizeof *st.best);
        for (int i = 0; i < k; i++)
            cd_topn_init(&st.best[i], o->top_n);
    }
    entry *b = cd_xcalloc((size_t)batch, sizeof *b);
    float *probs = cd_xmalloc(sizeof(float) * (size_t)batch * (size_t)k);
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, taken = 0;
    int n = 0, rc = CD_OK;
    while (rc == CD_OK && (o->limit <= 0 || taken < o->limit) && getline(&line, &cap, in) > 0) {
        lineno++;
        if (!cd_list_line_parse(line, o->root, &b[n].item))
            continue;
        b[n++].line = lineno;
        taken++;
        if (n == batch) {
            rc = run_batch(c, b, n, o, probs, out, &st, err, errlen);
            for (int i = 0; i < n; i++)
                entry_free(&b[i]);
            n = 0;
        }
    }
    if (rc == CD_OK && n)
        rc = run_batch(c, b, n, o, probs, out, &st, err, errlen);
    for (int i = 0; i < n; i++)
        entry_free(&b[i]);
    if (rc == CD_OK && ferror(in)) {
        snprintf(err, errlen, "cannot read the list: %s", strerror(errno));
        rc = CD_ERR;
    }
    json_t *s = rc == CD_OK ? summary(c, &st) : NULL;
    if (st.best) {
        for (int i = 0; i < k; i++)
            cd_topn_free(&st.best[i]);
        free(st.best);
    }
    free(st.confusion);
    free(line);
    free(probs);
    free(b);
    return s;
}
