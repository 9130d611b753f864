/* classify: the top classes of images with a trained model job, for scripts that run
 * no server. Images on the command line print one JSON object: {"iteration": N,
 * "classifications": {path: [[label, percent], ...]}} (DIGITS's shape). A list
 * (--list FILE of `path [label]` lines) is classified in batches in bounded memory;
 * with labels the object adds the top-1 and top-5 accuracy, the confusion matrix and
 * the accuracy per class (docs/inference.md). Also the list code serve-model uses. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/infer.h"
#include "cdigits/util.h"
#include "commands.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: cdigits-worker classify --model JOBDIR [--iteration N | --epoch E] [--top N] IMAGE...\n"
            "       cdigits-worker classify --model JOBDIR [--iteration N | --epoch E] --list FILE [--folder DIR]\n"
            "                               [--top N] [--top-n N] [--batch 64] [--limit N] [--jsonl]\n"
            "  --list FILE   `path [label]` lines (- for stdin); relative paths start in --folder\n"
            "  --jsonl       one JSON line per image, then the summary line (instead of one object)\n");
}

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

/* ---- lists ---------------------------------------------------------------------- */

typedef struct entry {
    long line;
    char *path;        /* file to read */
    char *key;         /* name in the output */
    int label;         /* -1: none */
    char *error;       /* set when the line or the image is unusable */
    cd_image_t img;    /* prepared */
} entry;

/* One list line into e (strings malloc'd). 0 for a line to skip. */
static int parse_line(char *line, const char *root, entry *e)
{
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = 0;
    char *tab = strchr(line, '\t');
    char *path = line, *label = NULL, *key = NULL;
    if (tab) {
        *tab = 0;
        label = tab + 1;
        char *tab2 = strchr(label, '\t');
        if (tab2) {
            *tab2 = 0;
            key = tab2 + 1;
        }
    } else {
        while (isspace((unsigned char)*path))
            path++;
        len = strlen(path);
        while (len && isspace((unsigned char)path[len - 1]))
            path[--len] = 0;
        if (!len || path[0] == '#')
            return 0;
        /* DIGITS's rule: a last word that is an integer is the label */
        char *sp = path + len;
        while (sp > path && !isspace((unsigned char)sp[-1]))
            sp--;
        if (sp > path) {
            char *end;
            strtol(sp, &end, 10);
            if (*end == 0 && end != sp && (isdigit((unsigned char)*sp) || *sp == '-')) {
                label = sp;
                char *t = sp;
                while (t > path && isspace((unsigned char)t[-1]))
                    t--;
                *t = 0;
            }
        }
    }
    if (!path[0])
        return 0;
    memset(e, 0, sizeof *e);
    e->label = -1;
    if (path[0] != '/' && root && root[0]) {
        if (asprintf(&e->path, "%s/%s", root, path) < 0)
            e->path = NULL;
    } else {
        e->path = cd_xstrdup(path);
    }
    if (!e->path)
        e->path = cd_xstrdup(path);
    e->key = cd_xstrdup(key && key[0] ? key : e->path);
    if (label && label[0]) {
        char *end;
        long v = strtol(label, &end, 10);
        if (*end || v < 0 || v > 1000000) {
            if (asprintf(&e->error, "label \"%s\" is not a class number (0, 1, ...)", label) < 0)
                e->error = NULL;
        } else {
            e->label = (int)v;
        }
    }
    return 1;
}

static void entry_free(entry *e)
{
    free(e->path);
    free(e->key);
    free(e->error);
    cd_image_free(&e->img);
    memset(e, 0, sizeof *e);
}

/* The best images of one class: a min-heap of (probability, path) of at most n. */
typedef struct best {
    float *p;
    char **path;
    int n, cap;
} best;

static void best_sift_down(best *b, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < b->n && b->p[l] < b->p[m])
            m = l;
        if (r < b->n && b->p[r] < b->p[m])
            m = r;
        if (m == i)
            return;
        float tp = b->p[i];
        char *ts = b->path[i];
        b->p[i] = b->p[m];
        b->path[i] = b->path[m];
        b->p[m] = tp;
        b->path[m] = ts;
        i = m;
    }
}

static void best_offer(best *b, float p, const char *path)
{
    if (b->n < b->cap) {
        int i = b->n++;
        b->p[i] = p;
        b->path[i] = cd_xstrdup(path);
        while (i > 0 && b->p[(i - 1) / 2] > b->p[i]) {
            int up = (i - 1) / 2;
            float tp = b->p[i];
            char *ts = b->path[i];
            b->p[i] = b->p[up];
            b->path[i] = b->path[up];
            b->p[up] = tp;
            b->path[up] = ts;
            i = up;
        }
        return;
    }
    if (b->cap == 0 || p <= b->p[0])
        return;
    free(b->path[0]);
    b->p[0] = p;
    b->path[0] = cd_xstrdup(path);
    best_sift_down(b, 0);
}

/* Descending [[path, percent], ...]; empties the heap. */
static json_t *best_json(best *b)
{
    int n = b->n;
    json_t *out = json_array();
    int *order = cd_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) /* n is small: insertion sort */
        for (int j = i; j > 0 && b->p[order[j - 1]] < b->p[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        json_array_append_new(out, json_pack("[s, f]", b->path[order[i]], percent(b->p[order[i]])));
    free(order);
    for (int i = 0; i < n; i++)
        free(b->path[i]);
    b->n = 0;
    return out;
}

typedef struct list_stats {
    int k;                 /* classes */
    long images, classified, errors, labelled, top1, topk;
    long *confusion;       /* (k, k) */
    best *best;            /* per class, or NULL */
} list_stats;

static void emit(FILE *out, json_t *line)
{
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(line);
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}

/* Decodes and prepares the batch (in parallel), classifies the usable images in one
 * pass, writes their lines in list order and counts them. */
static int run_batch(cd_classifier_t *c, entry *b, int n, const cd_list_opts *o, float *probs, FILE *out,
                     list_stats *st, char *err, size_t errlen)
{
    int classes = cd_classifier_classes(c), ch, h, w;
    cd_classifier_image_shape(c, &ch, &h, &w);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        if (b[i].error)
            continue;
        char msg[1024];
        cd_image_t raw = {0};
        if (cd_image_load(b[i].path, ch, &raw, msg, sizeof msg) != CD_OK ||
            cd_classifier_prepare(c, &raw, &b[i].img, msg, sizeof msg) != CD_OK)
            b[i].error = cd_xstrdup(msg);
        cd_image_free(&raw);
    }
    const cd_image_t **ready = cd_xmalloc(sizeof *ready * (size_t)n);
    int *slot = cd_xmalloc(sizeof *slot * (size_t)n), m = 0;
    for (int i = 0; i < n; i++) {
        slot[i] = -1;
        if (!b[i].error) {
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
        st->images++;
        if (slot[i] < 0) {
            st->errors++;
            emit(out, json_pack("{s:I, s:s, s:s}", "line", (json_int_t)b[i].line, "path", b[i].key, "error",
                                b[i].error));
            continue;
        }
        const float *p = probs + (size_t)slot[i] * (size_t)classes;
        st->classified++;
        json_t *line = json_pack("{s:I, s:s, s:o}", "line", (json_int_t)b[i].line, "path", b[i].key, "predictions",
                                 cd_predictions_json(c, p, o->top));
        if (b[i].label >= classes) {
            json_object_set_new(line, "label_error", json_sprintf("label %d is not a class of this model (0 to %d)",
                                                                  b[i].label, classes - 1));
        } else if (b[i].label >= 0) {
            json_object_set_new(line, "label", json_integer(b[i].label));
            int k = cd_topk(p, classes, topk, idx);
            st->labelled++;
            st->top1 += idx[0] == b[i].label;
            for (int j = 0; j < k; j++)
                st->topk += idx[j] == b[i].label;
            st->confusion[(size_t)b[i].label * (size_t)classes + (size_t)idx[0]]++;
        }
        if (st->best)
            for (int k = 0; k < classes; k++)
                best_offer(&st->best[k], p[k], b[i].key);
        emit(out, line);
    }
    free(slot);
    fflush(out);
    return CD_OK;
}

static double ratio_pct(long a, long b) { return b ? floor(10000.0 * (double)a / (double)b + 0.5) / 100.0 : 0; }

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
            json_array_append_new(res, json_pack("[s, o]", cd_classifier_label(c, i), best_json(&st->best[i])));
        json_object_set_new(s, "top_n", res);
    }
    return s;
}

json_t *cd_classify_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_list_opts *o, char *err, size_t errlen)
{
    int batch = o->batch > 0 ? o->batch : 64;
    if (cd_classifier_set_batch(c, batch, err, errlen) != CD_OK)
        return NULL;
    int k = cd_classifier_classes(c);
    list_stats st = {.k = k};
    st.confusion = cd_xcalloc((size_t)k * k, sizeof *st.confusion);
    if (o->top_n > 0) {
        st.best = cd_xcalloc((size_t)k, sizeof *st.best);
        for (int i = 0; i < k; i++) {
            st.best[i].cap = o->top_n;
            st.best[i].p = cd_xmalloc(sizeof(float) * (size_t)o->top_n);
            st.best[i].path = cd_xmalloc(sizeof(char *) * (size_t)o->top_n);
        }
    }
    entry *b = cd_xcalloc((size_t)batch, sizeof *b);
    float *probs = cd_xmalloc(sizeof(float) * (size_t)batch * (size_t)k);
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, taken = 0;
    int n = 0, rc = CD_OK;
    while (rc == CD_OK && (o->limit <= 0 || taken < o->limit) && getline(&line, &cap, in) > 0) {
        lineno++;
        if (!parse_line(line, o->root, &b[n]))
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
        for (int i = 0; i < k; i++) {
            for (int j = 0; j < st.best[i].n; j++)
                free(st.best[i].path[j]);
            free(st.best[i].p);
            free(st.best[i].path);
        }
        free(st.best);
    }
    free(st.confusion);
    free(line);
    free(probs);
    free(b);
    return s;
}

/* ---- the command ------------------------------------------------------------------ */

/* Prints {"iteration", "classifications": {...}, "errors": {...}, summary...} from the
 * per-image lines in tmp, without holding them all. */
static void print_object(FILE *tmp, long iteration, json_t *sum)
{
    rewind(tmp);
    printf("{\"iteration\":%ld,\"classifications\":{", iteration);
    char *line = NULL;
    size_t cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        int first = 1;
        rewind(tmp);
        if (pass == 1)
            printf("},\"errors\":{");
        while (getline(&line, &cap, tmp) > 0) {
            json_t *o = json_loads(line, 0, NULL);
            json_t *v = json_object_get(o, pass == 0 ? "predictions" : "error");
            if (v) {
                char *k = json_dumps(json_object_get(o, "path"), JSON_ENCODE_ANY);
                char *val = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
                printf("%s%s:%s", first ? "" : ",", k ? k : "\"?\"", val ? val : "null");
                first = 0;
                free(k);
                free(val);
            }
            json_decref(o);
        }
    }
    free(line);
    char *rest = json_dumps(sum, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    printf("}%s%s\n", rest && strlen(rest) > 2 ? "," : "}", rest && strlen(rest) > 2 ? rest + 1 : "");
    free(rest);
}

static int classify_list(cd_classifier_t *c, const char *list, const cd_list_opts *o, int jsonl)
{
    FILE *in = strcmp(list, "-") == 0 ? stdin : fopen(list, "r");
    if (!in) {
        fprintf(stderr, "classify: cannot read --list %s: %s\n", list, strerror(errno));
        return 1;
    }
    FILE *out = jsonl ? stdout : tmpfile();
    if (!out) {
        fprintf(stderr, "classify: cannot create a temporary file: %s\n", strerror(errno));
        if (in != stdin)
            fclose(in);
        return 1;
    }
    char err[1024];
    json_t *sum = cd_classify_list(c, in, out, o, err, sizeof err);
    if (in != stdin)
        fclose(in);
    int rc = 0;
    if (!sum) {
        fprintf(stderr, "classify: %s\n", err);
        rc = 1;
    } else if (jsonl) {
        json_object_set_new(sum, "iteration", json_integer(cd_classifier_iteration(c)));
        emit(stdout, json_pack("{s:s, s:O}", "type", "summary", "summary", sum));
    } else {
        print_object(out, cd_classifier_iteration(c), sum);
    }
    if (!jsonl)
        fclose(out);
    json_decref(sum);
    fflush(stdout);
    return rc;
}

int cd_cmd_classify(int argc, char **argv)
{
    const char *model = NULL, *list = NULL, *folder = NULL;
    long iteration = 0;
    double epoch = -1;
    int top = 5, first = argc, jsonl = 0;
    cd_list_opts lo = {.top = 5, .batch = 64};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--model") && more)
            model = argv[++i];
        else if (!strcmp(a, "--iteration") && more)
            iteration = atol(argv[++i]);
        else if (!strcmp(a, "--epoch") && more)
            epoch = atof(argv[++i]);
        else if (!strcmp(a, "--top") && more)
            top = atoi(argv[++i]);
        else if (!strcmp(a, "--top-n") && more)
            lo.top_n = atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && more)
            lo.batch = atoi(argv[++i]);
        else if (!strcmp(a, "--limit") && more)
            lo.limit = atol(argv[++i]);
        else if (!strcmp(a, "--list") && more)
            list = argv[++i];
        else if (!strcmp(a, "--folder") && more)
            folder = argv[++i];
        else if (!strcmp(a, "--jsonl"))
            jsonl = 1;
        else if (!strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (a[0] == '-' && a[1]) {
            usage();
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (!model || (first >= argc && !list) || top < 1 || lo.batch < 1 || lo.top_n < 0 ||
        (epoch >= 0 && iteration > 0)) {
        usage();
        return 2;
    }
    char err[1024];
    if (epoch >= 0 && (iteration = cd_snapshot_for_epoch(model, epoch, err, sizeof err)) < 0) {
        fprintf(stderr, "classify: %s: %s\n", model, err);
        return 1;
    }
    cd_classifier_t *c = cd_classifier_open(model, iteration, NULL, err, sizeof err);
    if (!c) {
        fprintf(stderr, "classify: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (list) {
        lo.top = top;
        lo.root = folder;
        rc = classify_list(c, list, &lo, jsonl);
        cd_classifier_close(c);
        return rc;
    }
    int n = cd_classifier_classes(c), ch, h, w;
    cd_classifier_image_shape(c, &ch, &h, &w);
    float *probs = cd_xcalloc((size_t)n, sizeof *probs);
    json_t *out = json_object(), *all = json_object();
    for (int i = first; i < argc; i++) {
        cd_image_t img = {0};
        if (cd_image_load(argv[i], ch, &img, err, sizeof err) != CD_OK ||
            cd_classifier_run(c, &img, probs, err, sizeof err) != CD_OK) {
            fprintf(stderr, "classify: %s\n", err);
            cd_image_free(&img);
            rc = 1;
            continue;
        }
        cd_image_free(&img);
        json_object_set_new(all, argv[i], cd_predictions_json(c, probs, top));
    }
    json_object_set_new(out, "iteration", json_integer(cd_classifier_iteration(c)));
    json_object_set_new(out, "classifications", all);
    char *s = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (s)
        puts(s);
    free(s);
    json_decref(out);
    free(probs);
    cd_classifier_close(c);
    return rc;
}
