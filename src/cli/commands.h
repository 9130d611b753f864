/* The worker's subcommands: each is int cmd_NAME(int argc, char **argv) with argv[0]
 * the subcommand name; returns the process exit status (see docs/worker-protocol.md). */
#ifndef CDIGITS_CLI_COMMANDS_H
#define CDIGITS_CLI_COMMANDS_H

#include <stdio.h>

#include <jansson.h>

#include "cdigits/infer.h"

int cd_cmd_check_net(int argc, char **argv);
int cd_cmd_dataset(int argc, char **argv);
int cd_cmd_import_idx(int argc, char **argv);
int cd_cmd_train(int argc, char **argv);
int cd_cmd_classify(int argc, char **argv);
int cd_cmd_serve_model(int argc, char **argv);

/* ---- shared by classify and serve-model (cmd_classify.c) ------------------------- */

/* [[label, percent], ...] of the `top` most probable classes (percent with 2 decimals,
 * as DIGITS rounds them). */
json_t *cd_predictions_json(const cd_classifier_t *c, const float *probs, int top);

typedef struct cd_list_opts {
    int top;           /* classes per image (5) */
    int top_n;         /* > 0: keep the top_n images that score highest for each class */
    int batch;         /* images per forward pass of the batch net */
    const char *root;  /* relative paths of the list start here (NULL: the working folder) */
    long limit;        /* classify at most this many images (0: all) */
} cd_list_opts;

/*
 * Classifies the images of a list, `batch` at a time, in memory bounded by the batch
 * and the classes (never by the list). Lines are `path [label]` (the label an integer
 * class index) or, tab-separated, `path<TAB>label<TAB>key` where key is what the
 * output calls the image (the path by default). Blank lines and lines starting with #
 * are skipped. For each image one JSON line goes to out, in list order:
 *   {"line": N, "path": key, "predictions": [[label, percent], ...], "label": K}
 *   {"line": N, "path": key, "error": "why"}         (unreadable image, bad label)
 * Returns the summary (caller decrefs): {"images", "classified", "failed", "labelled",
 * and where labels were given "top1_accuracy", "top5_accuracy" (percent), "labels",
 * "confusion_matrix" (rows: true class, columns: predicted), "per_class_accuracy"
 * (percent or null), "per_class" [{label, count, correct}]; with top_n "top_n"
 * [[label, [[path, percent], ...]], ...]}, or NULL with a message.
 */
json_t *cd_classify_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_list_opts *o, char *err,
                         size_t errlen);

#endif
