/* build/cdigits: the server's command line. `cdigits serve [options]` runs the server. */
#include <stdio.h>
#include <string.h>

#include "cdigits/server.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: cdigits serve [options]   run the server (see cdigits serve --help)\n"
                 "       cdigits version           print the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("cdigits %s\n", CDIGITS_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "cdigits: unknown command \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
    }
    cd_server_config_t cfg;
    cd_err_t err;
    int rc = server_config_parse(&cfg, argc - 1, argv + 1, &err);
    if (rc == 1)
        return 0;
    if (rc != CD_OK) {
        fprintf(stderr, "cdigits serve: %s\n", err.msg);
        return 2;
    }
    return server_run(&cfg);
}
