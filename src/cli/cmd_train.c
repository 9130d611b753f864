/* train JOBDIR: run a training task from JOBDIR/train.json. */
#include <stdio.h>

#include "cdigits/jsonl.h"
#include "cdigits/train.h"
#include "commands.h"

int cd_cmd_train(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cdigits-worker train JOBDIR\n");
        return 2;
    }
    cd_train_config c;
    char err[1024];
    cd_train_config_init(&c);
    if (cd_train_config_load(&c, argv[1], err, sizeof err) != 0) {
        cd_jsonl_error("%s", err);
        return 1;
    }
    return cd_train_run(&c);
}
