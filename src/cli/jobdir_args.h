/* The start every JOBDIR subcommand of the worker shares (dataset, train). */
#ifndef CDIGITS_CLI_JOBDIR_ARGS_H
#define CDIGITS_CLI_JOBDIR_ARGS_H

#define CD_CLI_EXIT_USAGE 2 /* docs/worker-protocol.md: the command line is wrong */

/* argv[1] alone as --help or -h prints usage on stdout: returns 0. A missing JOBDIR
 * (none, empty, or an option in its place) or more than max_args arguments prints it on
 * stderr: returns CD_CLI_EXIT_USAGE. Otherwise -1: the command goes on, argv[1] is its
 * JOBDIR. */
int cd_cli_jobdir_args(int argc, char **argv, const char *usage, int max_args);

#endif
