/* The parse stage from text lists: lines of `path label` (label an index into the
 * labels file; the path may contain spaces, the label is the last field), paths
 * relative to the list's root (textfile_root for the train list, textfile_val_root and
 * textfile_test_root for the others, which fall back to textfile_root), or to the list's
 * own folder when none is given. */
#include "internal.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/list_line.h"
#include "cdigits/util.h"

/* Append the images listed in `list` to out; bad lines are skipped and counted. */
static int parse_list(const char *list, const char *root_cfg, int nlabels, ds_items *out,
                      ds_skips *skips, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = cd_read_file(list, &len);
    if (!text)
        return ds_err(err, errlen, "cannot read %s: %s; check the text file's path", list,
                      strerror(errno));
    char *dir = cd_xstrdup(list);
    const char *root = root_cfg[0] ? root_cfg : dirname(dir);
    int lineno = 0;
    char where[4200], why[256];
    for (char *line = ds_skip_bom(text), *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        char *path, *word;
        if (!cd_list_line_split(line, 0, &path, &word))
            continue;
        snprintf(where, sizeof where, "%s:%d", list, lineno);
        if (!word) {
            ds_skip(skips, where, "expected `path label`");
            continue;
        }
        char *num_end;
        errno = 0;
        long label = strtol(word, &num_end, 10);
        if (*num_end || errno || label < 0 || label >= nlabels) {
            snprintf(why, sizeof why, "label %.32s is not a number in 0..%d (the labels file "
                     "has %d names)", word, nlabels - 1, nlabels);
            ds_skip(skips, where, why);
            continue;
        }
        ds_items_push(out, ds_resolve_path(root, path), (int)label);
    }
    free(dir);
    free(text);
    return CD_OK;
}

int ds_plan_textfiles(const cd_dataset_config_t *cfg, ds_plan *plan, ds_skips *skips,
                      FILE *out, char *err, size_t errlen)
{
    if (cd_labels_load(cfg->textfile_labels, &plan->classes, &plan->nclasses) != CD_OK)
        return ds_err(err, errlen, "textfile_labels: %s", cd_dataset_strerror());
    int nl = plan->nclasses;
    ds_items train = {0};
    if (parse_list(cfg->textfile_train, cfg->textfile_root, nl, &train, skips, err, errlen) !=
        CD_OK)
        return CD_ERR;
    ds_emit_progress(out, "parse", NULL, 1, 3);
    if (train.n == 0) {
        ds_items_free(&train);
        return ds_err(err, errlen, "%s lists no usable images; write one `path label` line per "
                      "image", cfg->textfile_train);
    }
    /* group by class, keeping the list order, then deal each class */
    ds_items *cls = cd_xcalloc((size_t)nl, sizeof *cls);
    for (size_t i = 0; i < train.n; i++)
        ds_items_push(&cls[train.v[i].label], train.v[i].path, train.v[i].label);
    free(train.v);
    double pv = cfg->textfile_val[0] ? 0 : cfg->pct_val;
    double pt = cfg->textfile_test[0] ? 0 : cfg->pct_test;
    for (int c = 0; c < nl; c++) {
        ds_deal_class(&cls[c], ds_seed_mix(cfg->seed, DS_STREAM_CLASS, (uint64_t)c),
                      cfg->max_per_class, pv, pt, plan);
        ds_items_free(&cls[c]);
    }
    free(cls);
    /* each list's relative paths start from its own root (DIGITS's textfile_val_folder,
     * textfile_test_folder), else from the train list's root, else from its own folder */
    const char *lists[CD_SPLIT_COUNT] = {
        [CD_SPLIT_VAL] = cfg->textfile_val,
        [CD_SPLIT_TEST] = cfg->textfile_test,
    };
    const char *roots[CD_SPLIT_COUNT] = {
        [CD_SPLIT_VAL] = cfg->textfile_val_root[0] ? cfg->textfile_val_root : cfg->textfile_root,
        [CD_SPLIT_TEST] = cfg->textfile_test_root[0] ? cfg->textfile_test_root : cfg->textfile_root,
    };
    for (int s = CD_SPLIT_VAL; s <= CD_SPLIT_TEST; s++) {
        if (lists[s][0] &&
            parse_list(lists[s], roots[s], nl, &plan->split[s], skips, err, errlen) != CD_OK)
            return CD_ERR;
        if (lists[s][0] && plan->split[s].n == 0)
            return ds_err(err, errlen, "%s lists no usable images; write one `path label` line "
                          "per image", lists[s]);
        ds_emit_progress(out, "parse", NULL, (size_t)s + 1, 3);
    }
    return CD_OK;
}
