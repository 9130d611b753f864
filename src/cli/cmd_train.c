/* train JOBDIR [options]: run a training task from JOBDIR/train.json, the options
 * overriding its keys. Started by mpirun or srun as one of several ranks (the
 * launcher's environment says so: cd_mpi_launched_ranks), it is that rank of a job
 * trained data parallel over all of them (docs/cluster.md). */
#include <stdio.h>
#include <string.h>

#include "cdigits/group.h"
#include "cdigits/jsonl.h"
#include "cdigits/mpi_group.h"
#include "cdigits/train.h"
#include "commands.h"
#include "jobdir_args.h"

static const char g_train_usage[] =
    "usage: cdigits-worker train JOBDIR [--resume] [--gpus LIST] [--backend auto|cpu|cuda]\n"
    "  Trains the model described by JOBDIR/train.json (see docs/worker-protocol.md).\n"
    "  The options override train.json's keys for this run and leave the file as it is:\n"
    "    --resume          continue from the newest complete snapshot (\"resume\": true)\n"
    "    --gpus LIST       the GPUs to train on, e.g. --gpus 0,1 (\"gpus\": [0, 1])\n"
    "    --backend NAME    auto, cpu or cuda (\"backend\")\n"
    "  Under mpirun -np N or srun -n N (N > 1) each process is one rank of the job: rank 0\n"
    "  reports, validates and snapshots (docs/cluster.md).\n";

/* One rank of a job under mpirun or srun: the group first, so that an error every rank
 * finds in train.json is said once, by rank 0, and every rank ends with it. */
static int train_ranks(int argc, char **argv)
{
    char err[1024];
    cd_group_t *g = cd_mpi_group_new(err, sizeof err);
    if (!g) {
        cd_jsonl_error("%s", err);
        return 1;
    }
    cd_train_config c;
    cd_train_config_init(&c);
    int rc = 0;
    if (cd_train_config_load(&c, argv[1], err, sizeof err) != 0)
        rc = 1;
    else if (cd_train_config_args(&c, argc - 2, argv + 2, err, sizeof err) != 0)
        rc = CD_CLI_EXIT_USAGE;
    if (rc == 0) {
        rc = cd_train_run_rank(&c, g);
    } else if (cd_group_rank(g) == 0) {
        cd_jsonl_error("%s", err);
        if (rc == CD_CLI_EXIT_USAGE)
            fputs(g_train_usage, stderr);
    }
    cd_group_free(g);
    return rc;
}

int cd_cmd_train(int argc, char **argv)
{
    int status = cd_cli_jobdir_args(argc, argv, g_train_usage, argc);
    if (status >= 0)
        return status;
    if (cd_mpi_launched_ranks() > 1)
        return train_ranks(argc, argv);
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
