/* classify: the top classes of images with a trained model job, for scripts that run
 * no server. Prints one JSON object: {"iteration": N, "classifications": {path:
 * [[label, percent], ...]}} (DIGITS's shape). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/infer.h"
#include "commands.h"

static void usage(void)
{
    fprintf(stderr, "usage: cdigits-worker classify --model JOBDIR [--iteration N] [--top N] IMAGE...\n");
}

int cd_cmd_classify(int argc, char **argv)
{
    const char *model = NULL;
    long iteration = 0;
    int top = 5, first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--iteration") && i + 1 < argc)
            iteration = atol(argv[++i]);
        else if (!strcmp(argv[i], "--top") && i + 1 < argc)
            top = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            usage();
            return 2;
        } else {
            first = i;
            break;
        }
    }
    if (!model || first >= argc || top < 1) {
        usage();
        return 2;
    }
    char err[1024];
    cd_classifier_t *c = cd_classifier_open(model, iteration, NULL, err, sizeof err);
    if (!c) {
        fprintf(stderr, "classify: %s\n", err);
        return 1;
    }
    int n = cd_classifier_classes(c), rc = 0;
    if (top > n)
        top = n;
    float *probs = calloc((size_t)n, sizeof *probs);
    int *order = calloc((size_t)n, sizeof *order);
    json_t *out = json_object(), *all = json_object();
    for (int i = first; i < argc; i++) {
        cd_image_t img = {0};
        if (cd_image_load(argv[i], 3, &img, err, sizeof err) != 0 ||
            cd_classifier_run(c, &img, probs, err, sizeof err) != 0) {
            fprintf(stderr, "classify: %s\n", err);
            cd_image_free(&img);
            rc = 1;
            continue;
        }
        cd_image_free(&img);
        for (int k = 0; k < n; k++)
            order[k] = k;
        /* partial selection sort: n is the class count, small */
        json_t *list = json_array();
        for (int k = 0; k < top; k++) {
            int best = k;
            for (int j = k + 1; j < n; j++)
                if (probs[order[j]] > probs[order[best]])
                    best = j;
            int tmp = order[k];
            order[k] = order[best];
            order[best] = tmp;
            json_array_append_new(list, json_pack("[s, f]", cd_classifier_label(c, order[k]),
                                                  (double)((int)(probs[order[k]] * 10000.0f + 0.5f)) / 100.0));
        }
        json_object_set_new(all, argv[i], list);
    }
    json_object_set_new(out, "iteration", json_integer(cd_classifier_iteration(c)));
    json_object_set_new(out, "classifications", all);
    char *s = json_dumps(out, JSON_COMPACT);
    if (s)
        puts(s);
    free(s);
    json_decref(out);
    free(probs);
    free(order);
    cd_classifier_close(c);
    return rc;
}
