/* check-net: parse and check a network definition for each stage, print every
 * layer with its top shapes and the number of learnable parameters; with --json, one
 * JSON object that the server's network view draws:
 *   {"input": [c, h, w], "classes": N, "crop": K,
 *    "stages": {"train": {"layers": [{"name", "type", "bottoms": [name],
 *                                     "tops": [{"name", "shape": [n, c, h, w]}],
 *                                     "params": learnable floats}], "params": N}, ...},
 *    "errors": ["file:line:col: what is wrong; what to do", ...]}
 * A stage that cannot be built is left out and its message is in errors (once, when
 * every stage fails the same way). With --parse-only the file is parsed and checked
 * against Caffe's messages but no stage is built (what DIGITS checks when a model is
 * created: an unknown layer type passes there and fails in training); stages is then
 * {}. Exit status 0 without errors, 1 with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/loader.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "commands.h"

/* "CxHxW" -> c, h, w */
static int parse_shape(const char *s, int *c, int *h, int *w)
{
    char tail;
    return sscanf(s, "%dx%dx%d%c", c, h, w, &tail) == 3 && *c > 0 && *h > 0 && *w > 0;
}

/* The intended input of a network file: a "# cdigits-input: CxHxW" line. */
static int intended_input(const char *path, int *c, int *h, int *w)
{
    char *text = cd_read_file(path, NULL);
    if (!text)
        return 0;
    const char *m = strstr(text, "cdigits-input:");
    int ok = m && sscanf(m + strlen("cdigits-input:"), " %dx%dx%d", c, h, w) == 3;
    free(text);
    return ok;
}

static void print_stage(const cd_net *net)
{
    char shape[128];
    printf("stage %s:\n", net->opts.stage);
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        printf("  %-24s %-16s", l->name, l->type->name);
        for (int j = 0; j < l->ntop; j++)
            printf(" %s %s", l->top[j]->name, cd_blob_shape_str(l->top[j], shape, sizeof shape));
        printf("\n");
    }
}

static json_t *shape_json(const cd_blob *b)
{
    json_t *dims = json_array();
    for (int k = 0; k < b->ndim; k++)
        json_array_append_new(dims, json_integer(b->dims[k]));
    return dims;
}

static json_t *stage_json(const cd_net *net)
{
    json_t *layers = json_array();
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        json_t *bottoms = json_array(), *tops = json_array();
        for (int j = 0; j < l->nbottom; j++)
            json_array_append_new(bottoms, json_string(l->bottom[j]->name));
        for (int j = 0; j < l->ntop; j++)
            json_array_append_new(tops, json_pack("{s:s, s:o}", "name", l->top[j]->name, "shape", shape_json(l->top[j])));
        size_t learnable = 0;
        for (int j = 0; j < l->nparam; j++)
            if (l->params[j]->learnable)
                learnable += l->params[j]->count;
        json_array_append_new(layers, json_pack("{s:s, s:s, s:o, s:o, s:I}", "name", l->name, "type", l->type->name,
                                                "bottoms", bottoms, "tops", tops, "params", (json_int_t)learnable));
    }
    return json_pack("{s:o, s:I}", "layers", layers, "params", (json_int_t)cd_net_learnable_count(net));
}

static void add_error(json_t *errors, const char *msg)
{
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        if (strcmp(json_string_value(e), msg) == 0)
            return;
    }
    json_array_append_new(errors, json_string(msg));
}

#define USAGE                                                                                                     \
    "usage: cdigits-worker check-net FILE [--input CxHxW] [--classes N] [--batch N] [--crop N] [--label CxHxW] [--json] "            \
    "[--parse-only]\n"

/* Parses and validates file against NetParameter without building: NULL when it is
 * well formed, else the message (malloc'd). */
static char *parse_error(const char *file)
{
    char err[1024];
    cd_pt_node *tree = cd_pt_parse_file(file, err, sizeof err);
    int ok = tree && cd_pt_validate(tree, &cd_pt_net_parameter, file, err, sizeof err) == CD_OK;
    cd_pt_free(tree);
    return ok ? NULL : cd_xstrdup(err);
}

int cd_cmd_check_net(int argc, char **argv)
{
    const char *file = NULL;
    cd_net_opts opts = {0};
    opts.num_classes = 10;
    int have_input = 0, as_json = 0, parse_only = 0, label_c = 0, label_h = 0, label_w = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            if (!parse_shape(argv[++i], &opts.input_c, &opts.input_h, &opts.input_w)) {
                fprintf(stderr, "check-net: --input %s: expected CxHxW, e.g. 1x28x28\n", argv[i]);
                return 2;
            }
            have_input = 1;
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            if (!parse_shape(argv[++i], &label_c, &label_h, &label_w)) {
                fprintf(stderr, "check-net: --label %s: expected CxHxW, e.g. 1x32x32\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--classes") && i + 1 < argc) {
            opts.num_classes = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            opts.batch = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--crop") && i + 1 < argc) {
            opts.crop = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--parse-only")) {
            parse_only = 1;
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, USAGE);
            return 2;
        } else {
            file = argv[i];
        }
    }
    if (!file || opts.batch < 0 || opts.crop < 0 || opts.num_classes < 0) {
        fprintf(stderr, USAGE);
        return 2;
    }
    if (!have_input && !intended_input(file, &opts.input_c, &opts.input_h, &opts.input_w)) {
        opts.input_c = 3;
        opts.input_h = opts.input_w = 256;
    }
    if (label_c > 0) { /* a generic dataset's labels, cropped with the images when spatial */
        cd_label_shape ls;
        cd_label_shape_for(opts.input_h, opts.input_w, label_c, label_h, label_w, opts.crop, &ls);
        opts.label_c = ls.c, opts.label_h = ls.h, opts.label_w = ls.w;
    }
    static const char *stages[] = {"train", "val", "deploy"};
    if (as_json) {
        json_t *out = json_pack("{s:[i,i,i], s:i, s:i, s:{}, s:[]}", "input", opts.input_c, opts.input_h,
                                opts.input_w, "classes", opts.num_classes, "crop", opts.crop, "stages", "errors");
        json_t *errors = json_object_get(out, "errors");
        char *perr = parse_only ? parse_error(file) : NULL;
        if (perr)
            add_error(errors, perr);
        free(perr);
        for (size_t s = 0; s < CD_ARRAY_LEN(stages) && !parse_only; s++) {
            char err[1024];
            opts.stage = stages[s];
            cd_net *net = cd_net_load(file, &opts, err, sizeof err);
            if (!net) {
                add_error(errors, err);
                continue;
            }
            json_object_set_new(json_object_get(out, "stages"), stages[s], stage_json(net));
            cd_net_free(net);
        }
        int rc = json_array_size(errors) ? 1 : 0;
        if (json_dumpf(out, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
            rc = 1;
        json_decref(out);
        return rc;
    }
    if (parse_only) {
        char *perr = parse_error(file);
        int bad = perr != NULL;
        if (bad)
            fprintf(stderr, "%s\n", perr);
        else
            printf("%s: parsed and checked; no stage built (--parse-only)\n", file);
        free(perr);
        return bad;
    }
    size_t params = 0;
    int rc = 0;
    for (size_t s = 0; s < CD_ARRAY_LEN(stages); s++) {
        char err[1024];
        opts.stage = stages[s];
        cd_net *net = cd_net_load(file, &opts, err, sizeof err);
        if (!net) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        print_stage(net);
        size_t n = cd_net_learnable_count(net);
        if (s == 0 || n > params)
            params = n;
        cd_net_free(net);
    }
    printf("parameters: %zu\n", params);
    return rc;
}
