/* `cdigits serve` options: defaults, environment, flags over environment, and a message
 * for every bad value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/server.h"
#include "serve_args.h"
#include "testutil.h"

int main(void)
{
    cd_test_init("test_server_config");
    static const char *const vars[] = {"CDIGITS_BIND", "CDIGITS_PORT", "CDIGITS_DATA", "CDIGITS_DATA_ROOT",
                                       "CDIGITS_MAX_UPLOAD", "CDIGITS_URL_PREFIX", "CDIGITS_GPUS",
                                       "CDIGITS_RESUME_INTERRUPTED", "CDIGITS_LOG_LEVEL", "CDIGITS_WORKER"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    cd_server_config_t cfg;
    cd_err_t err = {0};
    CHECK(serve_parse(&cfg, &err, NULL, NULL, NULL, NULL) == CD_OK, "defaults: %s", err.msg);
    CHECK(!strcmp(cfg.bind, "127.0.0.1") && cfg.port == 5000 && !strcmp(cfg.data_dir, "./data"), "default address");
    CHECK(cfg.max_upload == (size_t)64 << 20 && cfg.cpu_slots == 1 && !strcmp(cfg.gpus, "auto"), "default pools");
    CHECK(strstr(cfg.worker, "cdigits-worker") != NULL, "the worker defaults to cdigits-worker: %s", cfg.worker);

    int port = 1024 + (int)(cd_test_rand_u64() % 60000);
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    setenv("CDIGITS_PORT", portbuf, 1);
    setenv("CDIGITS_DATA_ROOT", "/a:/b", 1);
    setenv("CDIGITS_MAX_UPLOAD", "3M", 1);
    setenv("CDIGITS_URL_PREFIX", "digits/", 1);
    setenv("CDIGITS_RESUME_INTERRUPTED", "1", 1);
    CHECK(serve_parse(&cfg, &err, NULL, NULL, NULL, NULL) == CD_OK, "environment: %s", err.msg);
    CHECK(cfg.port == port, "CDIGITS_PORT %d", cfg.port);
    CHECK(cfg.ndata_roots == 2 && !strcmp(cfg.data_roots[1], "/b"), "CDIGITS_DATA_ROOT is a :-list");
    CHECK(cfg.max_upload == 3u << 20, "3M is %zu", cfg.max_upload);
    CHECK(!strcmp(cfg.url_prefix, "/digits"), "the prefix gets a leading slash and loses the trailing one: %s",
          cfg.url_prefix);
    CHECK(cfg.resume_interrupted == 1, "CDIGITS_RESUME_INTERRUPTED");
    CHECK(serve_parse(&cfg, &err, "--port", "8080", "--data-root", "/c") == CD_OK, "flags: %s", err.msg);
    CHECK(cfg.port == 8080, "a flag wins over the environment");
    CHECK(cfg.ndata_roots == 1 && !strcmp(cfg.data_roots[0], "/c"), "--data-root replaces the environment's roots");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);

    CHECK(serve_parse(&cfg, &err, "--port", "70000", NULL, NULL) == CD_ERR && strstr(err.msg, "port"), "port range: %s",
          err.msg);
    CHECK(serve_parse(&cfg, &err, "--port", "abc", NULL, NULL) == CD_ERR && strstr(err.msg, "--port"), "port text: %s",
          err.msg);
    CHECK(serve_parse(&cfg, &err, "--log-level", "loud", NULL, NULL) == CD_ERR && strstr(err.msg, "debug"),
          "log level: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "--max-upload", "12Q", NULL, NULL) == CD_ERR, "size suffix");
    CHECK(serve_parse(&cfg, &err, "--nope", NULL, NULL, NULL) == CD_ERR && strstr(err.msg, "unknown option"),
          "unknown flag: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "--port", NULL, NULL, NULL) == CD_ERR && strstr(err.msg, "needs a value"),
          "missing value: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "extra", NULL, NULL, NULL) == CD_ERR, "stray argument");
    CHECK(serve_parse(&cfg, &err, "--abort-grace", "2.5", "--gpus", "0,1") == CD_OK && cfg.abort_grace == 2.5 &&
              !strcmp(cfg.gpus, "0,1"),
          "seconds and GPU list");
    return cd_test_finish();
}
