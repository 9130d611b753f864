/* check-net: parse and check a network definition for each stage, print every
 * layer with its top shapes and the number of learnable parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/net.h"
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

int cd_cmd_check_net(int argc, char **argv)
{
    const char *file = NULL;
    cd_net_opts opts = {0};
    opts.num_classes = 10;
    int have_input = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            if (!parse_shape(argv[++i], &opts.input_c, &opts.input_h, &opts.input_w)) {
                fprintf(stderr, "check-net: --input %s: expected CxHxW, e.g. 1x28x28\n", argv[i]);
                return 2;
            }
            have_input = 1;
        } else if (!strcmp(argv[i], "--classes") && i + 1 < argc) {
            opts.num_classes = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            opts.batch = atoi(argv[++i]);
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, "usage: cdigits-worker check-net FILE [--input CxHxW] [--classes N] [--batch N]\n");
            return 2;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        fprintf(stderr, "usage: cdigits-worker check-net FILE [--input CxHxW] [--classes N] [--batch N]\n");
        return 2;
    }
    if (!have_input && !intended_input(file, &opts.input_c, &opts.input_h, &opts.input_w)) {
        opts.input_c = 3;
        opts.input_h = opts.input_w = 256;
    }
    static const char *stages[] = {"train", "val", "deploy"};
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
