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

/* Images of a separate val or test folder, labelled by the train classes. */
static int plan_extra_folder(const cd_dataset_config_t *cfg, const char *root, int split,
                             int stream, ds_plan *plan, ds_skips *skips, FILE *out, char *err,
                             size_t errlen)
{
    char **names = NULL;
    int n = 0;
    if (ds_scan_classes(root, &names, &n, skips, err, errlen) != CD_OK)
        return CD_ERR;
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
        if (rc == CD_OK)
            ds_deal_class(&cls, ds_seed_mix(cfg->seed, (uint64_t)stream, (uint64_t)label),
                          cfg->max_per_class, split == CD_SPLIT_VAL ? 100 : 0,
                          split == CD_SPLIT_TEST ? 100 : 0, plan);
        ds_items_free(&cls);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
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
    for (int i = 0; i < n && rc == CD_OK; i++) {
        size_t have = cls[i].n;
        if (cfg->max_per_class > 0 && have > (size_t)cfg->max_per_class)
            have = (size_t)cfg->max_per_class;
        if (have < (size_t)cfg->min_per_class) {
            ds_emit_log(out, "warning", "class %s has %zu images, fewer than the minimum %d; "
                        "it is left out", names[i], cls[i].n, cfg->min_per_class);
            continue;
        }
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
        rc = plan_extra_folder(cfg, cfg->folder_val, CD_SPLIT_VAL, DS_STREAM_VAL_FOLDER, plan,
                               skips, out, err, errlen);
    if (rc == CD_OK && cfg->folder_test[0])
        rc = plan_extra_folder(cfg, cfg->folder_test, CD_SPLIT_TEST, DS_STREAM_TEST_FOLDER, plan,
                               skips, out, err, errlen);
    return rc;
}
