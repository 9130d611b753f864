/* export-onnx: a model job's deploy stage at one snapshot as an ONNX file (the engine's
 * onnx_export.c; docs/inference.md, "ONNX export"). Prints {"out": FILE} on
 * success; a refused layer or a missing snapshot is a message on stderr and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/infer.h"
#include "cdigits/onnx_export.h"
#include "commands.h"
#include "jobdir_args.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: cdigits-worker export-onnx --model JOBDIR [--epoch E | --iteration N] --out FILE\n"
               "  writes the model's deploy stage at that snapshot (default: the newest) as ONNX\n"
               "  (opset 13): input data float32 NxCxHxW, pixel values 0-255 at the dataset's size\n");
}

int cd_cmd_export_onnx(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *epoch = NULL;
    long iteration = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--model") && more)
            model = argv[++i];
        else if (!strcmp(a, "--out") && more)
            out = argv[++i];
        else if (!strcmp(a, "--epoch") && more)
            epoch = argv[++i];
        else if (!strcmp(a, "--iteration") && more) {
            char *end;
            iteration = strtol(argv[++i], &end, 10);
            if (*end || iteration < 1) {
                fprintf(stderr, "export-onnx: --iteration %s is not a snapshot iteration; give a positive "
                                "number\n", argv[i]);
                return CD_CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "export-onnx: unknown or incomplete argument %s\n", a);
            usage(stderr);
            return CD_CLI_EXIT_USAGE;
        }
    }
    if (!model || !out || (epoch && iteration > 0)) {
        fprintf(stderr, "export-onnx: %s\n", !model ? "--model JOBDIR is required"
                                             : !out ? "--out FILE is required"
                                                    : "give --epoch or --iteration, not both");
        usage(stderr);
        return CD_CLI_EXIT_USAGE;
    }
    char err[2048];
    if (epoch && (iteration = cd_snapshot_for_epoch(model, epoch, err, sizeof err)) < 0) {
        fprintf(stderr, "export-onnx: %s: %s\n", model, err);
        return 1;
    }
    if (cd_onnx_export(model, iteration, out, err, sizeof err) != 0) {
        fprintf(stderr, "export-onnx: %s\n", err);
        return 1;
    }
    json_t *done = json_pack("{s:s}", "out", out);
    char *text = done ? json_dumps(done, JSON_COMPACT) : NULL;
    if (text)
        puts(text);
    free(text);
    json_decref(done);
    return 0;
}
