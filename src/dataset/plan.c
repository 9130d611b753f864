/* The parse stage: deciding which image goes to which split with which label, from a
 * folder of class folders (this file) or from text lists (textfile.c). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

void ds_items_push(ds_items *l, char *path_owned, int label)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = cd_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (ds_item){path_owned, label};
}

void ds_items_free(ds_items *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void ds_skip(ds_skips *s, const char *path, const char *why)
{
    s->count++;
    if (s->count <= DS_SKIPS_NAMED)
        ds_emit_log(s->out, "warning", "skipped %s: %s", path, why);
    if (s->count == DS_SKIPS_NAMED + 1)
        ds_emit_log(s->out, "warning", "more files skipped; the count is in the summary");
}

void ds_plan_free(ds_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nclasses; i++)
        free(p->classes[i]);
    free(p->classes);
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        ds_items_free(&p->split[s]);
    memset(p, 0, sizeof *p);
}

static size_t pct_of(size_t n, double pct) { return (size_t)round((double)n * pct / 100.0); }

void ds_deal_class(ds_items *cls, uint64_t rng_seed, int max, double pct_val, double pct_test,
                   ds_plan *plan)
{
    uint64_t rng = rng_seed;
    ds_shuffle(cls->v, cls->n, sizeof *cls->v, &rng);
    size_t n = cls->n;
    if (max > 0 && n > (size_t)max) {
        for (size_t i = (size_t)max; i < n; i++)
            free(cls->v[i].path);
        n = (size_t)max;
    }
    size_t nv = pct_of(n, pct_val), nt = pct_of(n, pct_test);
    if (nv > n)
        nv = n;
    if (nt > n - nv)
        nt = n - nv;
    /* a class of the training source keeps at least one training image: rounding would
     * otherwise send the whole of a small class to val and test (2 images at 75%) */
    while (pct_val + pct_test < 100 && n > 0 && nv + nt >= n) {
        if (nt > 0)
            nt--;
        else
            nv--;
    }
    for (size_t i = 0; i < n; i++) {
        int split = i < nv ? CD_SPLIT_VAL : i < nv + nt ? CD_SPLIT_TEST : CD_SPLIT_TRAIN;
        ds_items_push(&plan->split[split], cls->v[i].path, cls->v[i].label);
    }
    free(cls->v);
    memset(cls, 0, sizeof *cls);
}

static int find_class(const ds_plan *plan, const char *name)
{
    for (int i = 0; i < plan->nclasses; i++)
        if (strcmp(plan->classes[i], name) == 0)
            return i;
    return -1;
}

int ds_class_kept(const char *name, const char *root, size_t n, int min, int max, FILE *out)
{
    size_t have = max > 0 && n > (size_t)max ? (size_t)max : n;
    if (have >= (size_t)min)
        return 1;
    ds_emit_log(out, "warning", "class %s in %s has %zu images, fewer than the minimum %d; it is "
                "left out", name, root, n, min);
    return 0;
}

/* Starts the record of one folder's parse: what the splits hold before it. */
static struct cd_dataset_parse *parse_begin(ds_plan *plan, int split)
{
    struct cd_dataset_parse *p = &plan->parsed[plan->nparsed++];
    memset(p, 0, sizeof *p);
    p->split = split;
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        p->count[s] = plan->split[s].n; /* made relative by parse_end */
    return p;
}

static void parse_end(const ds_plan *plan, struct cd_dataset_parse *p)
{
    for (int s = 0; s < CD_SPLIT_COUNT; s++)
        p->count[s] = plan->split[s].n - p->count[s];
}

/* Images of a separate val or test folder, labelled by the train classes, with that
 * folder's own minimum and maximum per class. */
static int plan_extra_folder(const cd_dataset_config_t *cfg, int split, ds_plan *plan,
                             ds_skips *skips, FILE *out, char *err, size_t errlen)
{
    int val = split == CD_SPLIT_VAL;
    const char *root = val ? cfg->folder_val : cfg->folder_test;
    int min = val ? cfg->val_min_per_class : cfg->test_min_per_class;
    int max = val ? cfg->val_max_per_class : cfg->test_max_per_class;
    int stream = val ? DS_STREAM_VAL_FOLDER : DS_STREAM_TEST_FOLDER;
    char **names = NULL;
    int n = 0;
    if (ds_scan_classes(root, &names, &n, skips, err, errlen) != CD_OK)
        return CD_ERR;
    struct cd_dataset_parse *parsed = parse_begin(plan, split);
    int rc = CD_OK;
    for (int i = 0; i < n && rc == CD_OK; i++) {
        int label = find_class(plan, names[i]);
        if (label < 0) {
            ds_emit_log(out, "warning", "class folder %s in %s is not a class of the training "
                        "folder; its images are not used", names[i], root);
            continue;
        }
        char *dir = cd_xmalloc(strlen(root) + strlen(names[i]) + 2);
        sprintf(dir, "%s/%s", root, names[i]);
        ds_items cls = {0};
        rc = ds_scan_images(dir, label, &cls, skips, err, errlen);
        free(dir);
        if (rc == CD_OK && ds_class_kept(names[i], root, cls.n, min, max, out)) {
            parsed->label_count++;
            ds_deal_class(&cls, ds_seed_mix(cfg->seed, (uint64_t)stream, (uint64_t)label), max,
                          val ? 100 : 0, val ? 0 : 100, plan);
        }
        ds_items_free(&cls);
    }
    parse_end(plan, parsed);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == CD_OK && parsed->count[split] == 0)
        rc = ds_err(err, errlen, "%s gave no %s images: no class folder of it is a training "
                    "class with at least %d images; check the folder or lower its minimum per "
                    "class", root, cd_split_name(split), min);
    return rc;
}

int ds_plan_folders(const cd_dataset_config_t *cfg, ds_plan *plan, ds_skips *skips, FILE *out,
                    char *err, size_t errlen)
{
    const char *root = cfg->folder_train;
    char **names = NULL;
    int n = 0;
    if (ds_scan_classes(root, &names, &n, skips, err, errlen) != CD_OK)
        return CD_ERR;
    ds_items *cls = cd_xcalloc((size_t)(n ? n : 1), sizeof *cls);
    int rc = CD_OK;
    for (int i = 0; i < n && rc == CD_OK; i++) {
        char *dir = cd_xmalloc(strlen(root) + strlen(names[i]) + 2);
        sprintf(dir, "%s/%s", root, names[i]);
        rc = ds_scan_images(dir, -1, &cls[i], skips, err, errlen);
        free(dir);
        ds_emit_progress(out, "parse", NULL, (size_t)i + 1, (size_t)n);
    }
    /* keep the classes with enough images; labels are their ranks in sorted order */
    plan->classes = cd_xcalloc((size_t)(n ? n : 1), sizeof(char *));
    struct cd_dataset_parse *parsed = parse_begin(plan, CD_SPLIT_TRAIN);
    for (int i = 0; i < n && rc == CD_OK; i++) {
        if (!ds_class_kept(names[i], root, cls[i].n, cfg->min_per_class, cfg->max_per_class,
                           out))
            continue;
        int label = plan->nclasses++;
        plan->classes[label] = names[i];
        names[i] = NULL;
        for (size_t k = 0; k < cls[i].n; k++)
            cls[i].v[k].label = label;
        double pv = cfg->folder_val[0] ? 0 : cfg->pct_val;
        double pt = cfg->folder_test[0] ? 0 : cfg->pct_test;
        ds_deal_class(&cls[i], ds_seed_mix(cfg->seed, DS_STREAM_CLASS, (uint64_t)label),
                      cfg->max_per_class, pv, pt, plan);
    }
    parse_end(plan, parsed);
    parsed->label_count = plan->nclasses;
    if (rc == CD_OK && plan->nclasses == 0)
        rc = ds_err(err, errlen, "no class has at least %d images in %s; add images or lower "
                    "the minimum per class", cfg->min_per_class, root);
    else if (rc == CD_OK && plan->nclasses == 1)
        rc = ds_err(err, errlen, "only class %s in %s has at least %d images, and a classifier "
                    "needs 2 classes; add a class folder or lower the minimum per class",
                    plan->classes[0], root, cfg->min_per_class);
    for (int i = 0; i < n; i++) {
        free(names[i]);
        ds_items_free(&cls[i]);
    }
    free(names);
    free(cls);
    if (rc == CD_OK && cfg->folder_val[0])
        rc = plan_extra_folder(cfg, CD_SPLIT_VAL, plan, skips, out, err, errlen);
    if (rc == CD_OK && cfg->folder_test[0])
        rc = plan_extra_folder(cfg, CD_SPLIT_TEST, plan, skips, out, err, errlen);
    return rc;
}
