/* train JOBDIR [options]: run a training task from JOBDIR/train.json, the options
 * overriding its keys. */
#include <stdio.h>
#include <string.h>

#include "cdigits/jsonl.h"
#include "cdigits/train.h"
#include "commands.h"
#include "jobdir_args.h"

static const char g_train_usage[] =
    "usage: cdigits-worker train JOBDIR [--resume] [--gpus LIST] [--backend auto|cpu|cuda]\n"
    "  Trains the model described by JOBDIR/train.json (see docs/worker-protocol.md).\n"
    "  The options override train.json's keys for this run and leave the file as it is:\n"
    "    --resume          continue from the newest complete snapshot (\"resume\": true)\n"
    "    --gpus LIST       the GPUs to train on, e.g. --gpus 0,1 (\"gpus\": [0, 1])\n"
    "    --backend NAME    auto, cpu or cuda (\"backend\")\n";

int cd_cmd_train(int argc, char **argv)
{
    int status = cd_cli_jobdir_args(argc, argv, g_train_usage, argc);
    if (status >= 0)
        return status;
    cd_train_config c;
    char err[1024];
    cd_train_config_init(&c);
    if (cd_train_config_load(&c, argv[1], err, sizeof err) != 0) {
        cd_jsonl_error("%s", err);
        return 1;
    }
    if (cd_train_config_args(&c, argc - 2, argv + 2, err, sizeof err) != 0) {
        cd_jsonl_error("%s", err);
        fputs(g_train_usage, stderr);
        return CD_CLI_EXIT_USAGE;
    }
    return cd_train_run(&c);
}
