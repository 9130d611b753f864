/* classify: the top classes of images with a trained model job, for scripts that run
 * no server. Images on the command line print one JSON object: {"iteration": N,
 * "classifications": {path: [[label, percent], ...]}} (DIGITS's shape); a detection
 * model's, {"iteration": N, "detections": {path: [{class, label, x1, y1, x2, y2,
 * confidence}, ...]}} in each image's pixels. A list
 * (--list FILE of `path [label]` lines) is classified in batches in bounded memory;
 * with labels the object adds the top-1 and top-5 accuracy, the confusion matrix and
 * the accuracy per class (docs/inference.md); the list code is the engine's
 * (cd_classify_list, infer_list.c), which serve-model runs too. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/dataset.h"
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
        json_t *line = json_pack("{s:s, s:O}", "type", "summary", "summary", sum);
        json_dumpf(line, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        json_decref(line);
    } else {
        print_object(out, cd_classifier_iteration(c), sum);
    }
    if (!jsonl)
        fclose(out);
    json_decref(sum);
    fflush(stdout);
    return rc;
}

/* A detection model's boxes of one image, in its pixels (cd_det_fields' "boxes"); NULL
 * with err on a failure. */
static json_t *detect_one(cd_classifier_t *c, const cd_image_t *img, char *err, size_t errlen)
{
    cd_infer_tensor *outs = NULL;
    int n = 0;
    if (cd_infer_image(c, img, &outs, &n, err, errlen) != CD_OK)
        return NULL;
    cd_det_frame f = cd_classifier_det_frame(c, img->w, img->h);
    json_t *fields = json_object(), *boxes = NULL;
    if (cd_det_fields(c, outs, n, 0, &f, NULL, 0, NULL, 0, fields) >= 0)
        boxes = json_incref(json_object_get(fields, "boxes"));
    if (!boxes)
        snprintf(err, errlen, "the model's outputs hold no detections (no ClusterDetections output)");
    json_decref(fields);
    cd_infer_tensors_free(outs, n);
    return boxes;
}

int cd_cmd_classify(int argc, char **argv)
{
    const char *model = NULL, *list = NULL, *folder = NULL;
    long iteration = 0;
    double epoch = -1;
    const char *epoch_text = NULL;
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
            epoch = atof(epoch_text = argv[++i]);
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
    if (epoch >= 0 && (iteration = cd_snapshot_for_epoch(model, epoch_text, err, sizeof err)) < 0) {
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
    int task = cd_classifier_task(c);
    if (task != CD_TASK_CLASSIFICATION && task != CD_TASK_DETECTION) {
        fprintf(stderr, "classify: %s is a %s model, which has no classes to answer; run serve-model's infer "
                "request on it (docs/inference.md)\n", model, cd_dataset_task_name(task));
        cd_classifier_close(c);
        return 2;
    }
    int n = cd_classifier_classes(c), ch, h, w;
    cd_classifier_image_shape(c, &ch, &h, &w);
    float *probs = cd_xcalloc((size_t)n, sizeof *probs);
    json_t *out = json_object(), *all = json_object();
    for (int i = first; i < argc; i++) {
        cd_image_t img = {0};
        json_t *answer = NULL;
        if (cd_image_load(argv[i], ch, &img, err, sizeof err) == CD_OK)
            answer = task == CD_TASK_DETECTION ? detect_one(c, &img, err, sizeof err)
                     : cd_classifier_run(c, &img, probs, err, sizeof err) == CD_OK ? cd_predictions_json(c, probs, top)
                                                                                  : NULL;
        cd_image_free(&img);
        if (!answer) {
            fprintf(stderr, "classify: %s\n", err);
            rc = 1;
            continue;
        }
        json_object_set_new(all, argv[i], answer);
    }
    json_object_set_new(out, "iteration", json_integer(cd_classifier_iteration(c)));
    json_object_set_new(out, task == CD_TASK_DETECTION ? "detections" : "classifications", all);
    char *s = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (s)
        puts(s);
    free(s);
    json_decref(out);
    free(probs);
    cd_classifier_close(c);
    return rc;
}
