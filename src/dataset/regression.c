/*
 * The regression task: images with K float targets each. The images come from text
 * lists of `path v1 ... vK` lines, or from a flat folder with a CSV of `file,v1,...,vK`
 * lines; they become train.db ... exactly as classification's (ds_prepare_record), and
 * record i of train_labels.db ... holds the K targets of record i (K x 1 x 1, f32).
 *
 * The parse keeps the targets in one table of rows; a planned item's label is its row
 * there, so ds_deal_class splits the list by pct_val / pct_test as it splits a class.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

/* The most targets an image may have (values per line). */
#define TARGETS_MAX 1024

/* rows x k targets; row r is v[r*k .. r*k+k). k is 0 until the first row fixes it. */
typedef struct targets {
    float *v;
    size_t rows, cap;
    int k;
    const char *k_from; /* the list whose first line fixed k, for messages */
} targets;

static int targets_push(targets *t, const float *row)
{
    if (t->rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->v = cd_xrealloc(t->v, t->cap * (size_t)t->k * sizeof(float));
    }
    memcpy(t->v + t->rows * (size_t)t->k, row, (size_t)t->k * sizeof(float));
    return (int)t->rows++;
}

/* The number the bytes [w, end) spell, when they are all of it and finite as a float. */
static int word_number(const char *w, const char *end, float *out)
{
    if (w == end || isspace((unsigned char)*w))
        return 0;
    char *stop;
    double d = strtod(w, &stop);
    if (stop != end || !isfinite(d) || fabs(d) > FLT_MAX)
        return 0;
    *out = (float)d;
    return 1;
}

/* Line text without a byte order mark, line ending and surrounding white space; NULL
 * for a line to skip (blank, or a `#` comment). */
static char *trim_line(char *line)
{
    line = ds_skip_bom(line);
    while (isspace((unsigned char)*line))
        line++;
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = 0;
    return len && line[0] != '#' ? line : NULL;
}

/* Where a row of values goes: the target table, checked against its k. */
typedef struct row_sink {
    targets *t;
    ds_skips *skips;
    const char *list;
} row_sink;

/* The values vals[0..n) of the line at `where`: their row, or -1 (skipped and named)
 * when n is not the dataset's k. */
static int sink_row(row_sink *s, const char *where, const float *vals, int n)
{
    char why[256];
    if (s->t->k == 0) {
        s->t->k = n;
        s->t->k_from = s->list;
    }
    if (n != s->t->k) {
        snprintf(why, sizeof why, "%d value%s after the path, but every image needs %d (as on the "
                 "first line of %.160s)", n, n == 1 ? "" : "s", s->t->k, s->t->k_from);
        ds_skip(s->skips, where, why);
        return -1;
    }
    return targets_push(s->t, vals);
}

/*
 * Splits `path v1 ... vK` in place: the values are the trailing words that are numbers
 * (the first word is always path, which may hold spaces). Returns their count (0: none,
 * why says so) with *path the rest of the line.
 */
static int split_text_line(char *s, float *vals, char **path, char *why, size_t whylen)
{
    float rev[TARGETS_MAX + 1];
    char *end = s + strlen(s);
    int n = 0;
    for (;;) {
        char *w = end;
        while (w > s && !isspace((unsigned char)w[-1]))
            w--;
        if (w == s || !word_number(w, end, &rev[n < TARGETS_MAX ? n : TARGETS_MAX]))
            break;
        n++;
        end = w;
        while (end > s && isspace((unsigned char)end[-1]))
            end--;
    }
    if (n == 0)
        snprintf(why, whylen, "expected `path v1 ... vK`: no numbers after the path");
    if (n > TARGETS_MAX) {
        snprintf(why, whylen, "%d values; at most %d targets per image are supported", n, TARGETS_MAX);
        return 0;
    }
    *end = 0;
    *path = s;
    for (int i = 0; i < n; i++)
        vals[i] = rev[n - 1 - i];
    return n;
}

/* The items of one list of `path v1 ... vK` lines, paths under root (else the list's
 * own folder). */
static int parse_text_list(const char *list, const char *root_cfg, targets *t, ds_items *out,
                           ds_skips *skips, char *err, size_t errlen)
{
    char *text = cd_read_file(list, NULL);
    if (!text)
        return ds_err(err, errlen, "cannot read %s: %s; check the text file's path", list, strerror(errno));
    char *dir = cd_xstrdup(list);
    const char *root = root_cfg[0] ? root_cfg : dirname(dir);
    row_sink sink = {t, skips, list};
    float vals[TARGETS_MAX];
    char where[4200], why[256];
    int lineno = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        char *s = trim_line(line), *path;
        if (!s)
            continue;
        snprintf(where, sizeof where, "%s:%d", list, lineno);
        int n = split_text_line(s, vals, &path, why, sizeof why);
        int row = n > 0 ? sink_row(&sink, where, vals, n) : -1;
        if (n == 0)
            ds_skip(skips, where, why);
        if (row >= 0)
            ds_items_push(out, ds_resolve_path(root, path), row);
    }
    free(dir);
    free(text);
    return CD_OK;
}

/* One CSV field without its surrounding white space (and quotes, when the whole field
 * is quoted); *end is the field's end. */
static char *csv_field(char *s, char **next)
{
    char *comma = strchr(s, ',');
    *next = comma ? comma + 1 : NULL;
    if (comma)
        *comma = 0;
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        s[--len] = 0;
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
        s[len - 1] = 0;
        s++;
    }
    return s;
}

/* The items of targets_csv: `file,v1,...,vK` lines, files under folder. The first line
 * is a header when one of its values is not a number. */
static int parse_csv(const char *csv, const char *folder, targets *t, ds_items *out, ds_skips *skips,
                     char *err, size_t errlen)
{
    char *text = cd_read_file(csv, NULL);
    if (!text)
        return ds_err(err, errlen, "cannot read targets_csv %s: %s; check its path", csv, strerror(errno));
    row_sink sink = {t, skips, csv};
    float vals[TARGETS_MAX];
    char where[4200], why[300];
    int lineno = 0, first = 1;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        char *s = trim_line(line);
        if (!s)
            continue;
        int quoted = strchr(s, '"') != NULL, n = 0, bad = 0;
        char *rest, *file = csv_field(s, &rest);
        while (rest && !bad) {
            char *f = csv_field(rest, &rest);
            if (n == TARGETS_MAX || !word_number(f, f + strlen(f), &vals[n])) {
                bad = 1;
                snprintf(why, sizeof why, n == TARGETS_MAX ? "more than %d values" : "value %d is not a number",
                         n == TARGETS_MAX ? TARGETS_MAX : n + 1);
            }
            n++;
        }
        int header = first && bad;
        first = 0;
        if (header)
            continue;
        snprintf(where, sizeof where, "%s:%d", csv, lineno);
        if (!bad && (n == 0 || !file[0]))
            snprintf(why, sizeof why, "expected `file,v1,...,vK`");
        if (bad || n == 0 || !file[0]) {
            if (quoted)
                strncat(why, " (quoted fields holding commas are not supported)", sizeof why - strlen(why) - 1);
            ds_skip(skips, where, why);
            continue;
        }
        int row = sink_row(&sink, where, vals, n);
        if (row >= 0)
            ds_items_push(out, ds_resolve_path(folder, file), row);
    }
    free(text);
    return CD_OK;
}

/* Which image goes to which split, with the row of its targets as its label. */
static int plan_regression(const cd_dataset_config_t *cfg, targets *t, ds_plan *plan, ds_skips *skips,
                           FILE *out, char *err, size_t errlen)
{
    ds_items train = {0};
    const char *source = cfg->textfile_train[0] ? cfg->textfile_train : cfg->targets_csv;
    int rc;
    if (cfg->textfile_train[0]) {
        rc = parse_text_list(cfg->textfile_train, cfg->textfile_root, t, &train, skips, err, errlen);
    } else {
        struct stat st;
        if (stat(cfg->folder_train, &st) != 0 || !S_ISDIR(st.st_mode))
            return ds_err(err, errlen, "folder_train %s is not a folder; give the folder the file names "
                          "of targets_csv are relative to", cfg->folder_train);
        rc = parse_csv(cfg->targets_csv, cfg->folder_train, t, &train, skips, err, errlen);
    }
    ds_emit_progress(out, "parse", NULL, 1, 3);
    if (rc == CD_OK && train.n == 0)
        rc = ds_err(err, errlen, "%s lists no usable images; write one `%s` line per image", source,
                    cfg->textfile_train[0] ? "path v1 ... vK" : "file,v1,...,vK");
    if (rc != CD_OK) {
        ds_items_free(&train);
        return rc;
    }
    double pv = cfg->textfile_val[0] ? 0 : cfg->pct_val, pt = cfg->textfile_test[0] ? 0 : cfg->pct_test;
    ds_deal_class(&train, ds_seed_mix(cfg->seed, DS_STREAM_CLASS, 0), 0, pv, pt, plan);
    const char *lists[CD_SPLIT_COUNT] = {[CD_SPLIT_VAL] = cfg->textfile_val, [CD_SPLIT_TEST] = cfg->textfile_test};
    const char *roots[CD_SPLIT_COUNT] = {
        [CD_SPLIT_VAL] = cfg->textfile_val_root[0] ? cfg->textfile_val_root : cfg->textfile_root,
        [CD_SPLIT_TEST] = cfg->textfile_test_root[0] ? cfg->textfile_test_root : cfg->textfile_root,
    };
    for (int s = CD_SPLIT_VAL; s <= CD_SPLIT_TEST; s++) {
        if (lists[s][0] && parse_text_list(lists[s], roots[s], t, &plan->split[s], skips, err, errlen) != CD_OK)
            return CD_ERR;
        if (lists[s][0] && plan->split[s].n == 0)
            return ds_err(err, errlen, "%s lists no usable images; write one `path v1 ... vK` line per image "
                          "with the %d values of the train list", lists[s], t->k);
        ds_emit_progress(out, "parse", NULL, (size_t)s + 1, 3);
    }
    return CD_OK;
}

/* Per-target min, sum and max over the records written. */
typedef struct target_stats {
    double *min, *sum, *max;
    size_t n;
} target_stats;

typedef struct reg_split {
    ds_split_dbs dbs;
    const targets *t;
    target_stats *stats; /* NULL but for train */
    uint8_t *label_rec;  /* k floats, little-endian */
} reg_split;

/* An image's record and its targets (its row of the table) as the label record. */
static int write_record(void *arg, const ds_item *it, ds_record *r, char *err, size_t errlen)
{
    reg_split *c = arg;
    int k = c->t->k;
    const float *row = c->t->v + (size_t)it->label * k;
    ds_put_f32(c->label_rec, row, (size_t)k);
    if (ds_split_dbs_add(&c->dbs, r->rec, r->len, c->label_rec, (size_t)k * 4, err, errlen) != CD_OK)
        return CD_ERR;
    target_stats *st = c->stats;
    for (int j = 0; st && j < k; j++) {
        st->min[j] = st->n ? fmin(st->min[j], row[j]) : row[j];
        st->max[j] = st->n ? fmax(st->max[j], row[j]) : row[j];
        st->sum[j] += row[j];
    }
    if (st)
        st->n++;
    return CD_OK;
}

/* One split's two .db files; *written gets the record count (0: none was made). */
static int create_split(const cd_dataset_config_t *cfg, const ds_items *items, const targets *t, int split,
                        const char *outdir, ds_skips *skips, FILE *out, target_stats *stats, uint64_t *sum,
                        size_t *sum_count, size_t *written, char *err, size_t errlen)
{
    *written = 0;
    ds_db_shape fs = {cfg->channels, cfg->height, cfg->width, cfg->encoding, 0, 0};
    ds_db_shape ls = {t->k, 1, 1, CD_ENC_F32, 0, 0};
    reg_split c = {.t = t, .stats = stats};
    if (ds_split_dbs_open(&c.dbs, outdir, split, &fs, &ls, out, err, errlen) != CD_OK)
        return CD_ERR;
    c.label_rec = cd_xmalloc((size_t)t->k * 4);
    int rc = ds_pipeline_items(cfg, items, split, sum, sum_count, skips, &c.dbs.progress, write_record, &c, err,
                               errlen);
    rc = ds_split_dbs_end(&c.dbs, rc, err, errlen);
    free(c.label_rec);
    if (rc == CD_OK && c.dbs.written == 0)
        return ds_err(err, errlen, "none of the %zu %s images could be read (%zu files skipped; the log "
                      "names the first); check the image files and the paths of the list", items->n,
                      cd_split_name(split), skips->count);
    if (rc == CD_OK)
        *written = c.dbs.written;
    return rc;
}

/* stats.json's regression fields: the label shape and the train targets' range. */
static json_t *stats_fields(const cd_dataset_config_t *cfg, const cd_dataset_result_t *res, int k,
                            const target_stats *st)
{
    ds_db_shape images = {cfg->channels, cfg->height, cfg->width, cfg->encoding, 0, 0};
    ds_db_shape labels = {k, 1, 1, CD_ENC_F32, 0, 0};
    json_t *f = ds_stats_fields(&images, cfg->resize_mode, cfg->seed, CD_TASK_REGRESSION, &labels, res);
    json_t *targets = json_array();
    for (int j = 0; j < k; j++)
        json_array_append_new(targets, json_pack("{s:f, s:f, s:f}", "min", st->min[j], "mean",
                                                 st->sum[j] / (double)(st->n ? st->n : 1), "max", st->max[j]));
    json_object_set_new(f, "targets", targets);
    return f;
}

int ds_create_regression(const cd_dataset_config_t *cfg, const char *outdir, FILE *progress,
                         cd_dataset_result_t *result, char *err, size_t errlen)
{
    cd_dataset_result_t res = {0};
    ds_plan plan = {0};
    ds_skips skips = {0, progress};
    targets t = {0};
    target_stats st = {0};
    uint64_t *sum = NULL;
    size_t sum_count = 0;
    double t0 = cd_now();
    int rc = ds_check_image_cfg(cfg, err, errlen);
    if (rc == CD_OK)
        rc = ds_prepare_outdir(outdir, err, errlen);
    if (rc == CD_OK)
        rc = plan_regression(cfg, &t, &plan, &skips, progress, err, errlen);
    if (rc != CD_OK)
        goto out;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        ds_shuffle_split(cfg->seed, s, plan.split[s].v, plan.split[s].n, sizeof(ds_item));
    ds_emit_log(progress, "info", "%d targets per image; images found: train %zu, val %zu, test %zu; "
                "skipped so far: %zu lines or files", t.k, plan.split[0].n, plan.split[1].n, plan.split[2].n,
                skips.count);
    if (plan.split[CD_SPLIT_TRAIN].n == 0) {
        rc = ds_err(err, errlen, "no images are left for training; lower pct_val and pct_test or add images");
        goto out;
    }
    st.min = cd_xcalloc((size_t)t.k, sizeof(double));
    st.sum = cd_xcalloc((size_t)t.k, sizeof(double));
    st.max = cd_xcalloc((size_t)t.k, sizeof(double));
    sum = cd_xcalloc((size_t)cfg->channels * cfg->height * cfg->width, sizeof(uint64_t));
    for (int s = 0; s < CD_SPLIT_COUNT && rc == CD_OK; s++) {
        int train = s == CD_SPLIT_TRAIN;
        size_t counted = 0;
        if (plan.split[s].n)
            rc = create_split(cfg, &plan.split[s], &t, s, outdir, &skips, progress, train ? &st : NULL,
                              train ? sum : NULL, &counted, &res.count[s], err, errlen);
        if (train)
            sum_count = counted;
    }
    if (rc != CD_OK)
        goto out;
    res.skipped = skips.count;
    if (skips.count)
        ds_emit_log(progress, "warning", "skipped in all: %zu lines or files", skips.count);
    rc = ds_write_mean(outdir, cfg->channels, cfg->height, cfg->width, sum, sum_count, err, errlen);
    if (rc == CD_OK) /* no classes and no labels.txt: the targets are in the label dbs */
        rc = ds_finish_job(outdir, progress, ds_dataset_line(&res, json_array(), 0),
                           stats_fields(cfg, &res, t.k, &st), cd_now() - t0, err, errlen);
out:
    if (result)
        *result = res;
    free(st.min);
    free(st.sum);
    free(st.max);
    free(t.v);
    free(sum);
    ds_plan_free(&plan);
    return rc;
}
