/* The start of the JOBDIR subcommands (jobdir_args.h). */
#include "jobdir_args.h"

#include <stdio.h>
#include <string.h>

int cd_cli_jobdir_args(int argc, char **argv, const char *usage, int max_args)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc < 2 || argc - 1 > max_args || !argv[1][0] || argv[1][0] == '-') {
        fputs(usage, stderr);
        return CD_CLI_EXIT_USAGE;
    }
    return -1;
}
