/* cdigits-worker: the engine's command line. One subcommand per task, in a table. */
#include <stdio.h>
#include <string.h>

#include "cdigits/backend.h"
#include "commands.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} command;

static const command commands[] = {
    {"check-net", cd_cmd_check_net, "check-net FILE [--input CxHxW] [--classes N] [--batch N] [--crop N] [--json]"},
    {"dataset", cd_cmd_dataset, "dataset JOBDIR"},
    {"import-onnx", cd_cmd_import_onnx, "import-onnx FILE.onnx --out DIR (deploy.prototxt, network.prototxt, weights.cdw)"},
    {"import-idx", cd_cmd_import_idx, "import-idx --images FILE --labels FILE --out DIR [--labels-names a,b,...]"},
    {"train", cd_cmd_train, "train JOBDIR [--resume] [--gpus LIST] [--backend auto|cpu|cuda]"},
    {"classify", cd_cmd_classify, "classify --model JOBDIR [--iteration N | --epoch E] IMAGE... | --list FILE"},
    {"serve-model", cd_cmd_serve_model, "serve-model --model JOBDIR [--iteration N] [--gpu N] (JSON lines on stdin)"},
    {"export-onnx", cd_cmd_export_onnx, "export-onnx --model JOBDIR [--epoch E | --iteration N] --out FILE"},
    {"train-keys", cd_cmd_train_keys, "train-keys --markdown (the training settings: docs/training.md's table)"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: cdigits-worker COMMAND ...\n       cdigits-worker --version\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %s\n", commands[i].usage);
}

static int version(void)
{
    printf("cdigits-worker %s\n", CDIGITS_VERSION);
    printf("backends: cpu (usable)");
    if (cd_backend_cuda_compiled()) {
        int n = cd_backend_cuda_device_count();
        if (n > 0)
            printf(", cuda (usable: %d GPU%s)", n, n == 1 ? "" : "s");
        else
            printf(", cuda (compiled in; no usable GPU on this machine)");
    } else {
        printf(", cuda (not compiled in)");
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))
        return version();
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "cdigits-worker: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
