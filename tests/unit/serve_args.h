/* `cdigits serve` options for the server tests that parse them. */
#ifndef CDIGITS_TEST_SERVE_ARGS_H
#define CDIGITS_TEST_SERVE_ARGS_H

#include "cdigits/server.h"

/* server_config_parse of "serve a1 a2 a3 a4", the list ending at the first NULL. */
static inline int serve_parse(cd_server_config_t *cfg, cd_err_t *err, const char *a1,
                              const char *a2, const char *a3, const char *a4)
{
    char *argv[8] = {"serve"};
    int argc = 1;
    const char *extra[] = {a1, a2, a3, a4};
    for (int i = 0; i < 4 && extra[i]; i++)
        argv[argc++] = (char *)extra[i];
    return server_config_parse(cfg, argc, argv, err);
}

#endif
