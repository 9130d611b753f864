/*
 * `cdigits-worker dataset JOBDIR`: make the dataset described by JOBDIR/dataset.json
 * (docs/worker-protocol.md), and `cdigits-worker import-idx`: turn MNIST-style IDX
 * files into a folder of class folders of PNGs.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "commands.h"
#include "jobdir_args.h"

#define EXIT_FAILED 1
#define EXIT_USAGE CD_CLI_EXIT_USAGE
#define EXIT_STOPPED 3

static volatile sig_atomic_t g_stopped;

static void on_stop_signal(int sig)
{
    (void)sig;
    g_stopped = 1;
    cd_dataset_request_stop();
}

static void install_stop_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* past a file size limit, write() then fails with EFBIG and the error is reported
     * like a full disk, instead of the process dying without a word */
    signal(SIGXFSZ, SIG_IGN);
}

/* The protocol's error line on stdout, and the same text on stderr for people. */
static void print_error(const char *msg)
{
    fprintf(stderr, "cdigits-worker: %s\n", msg);
    json_t *j = json_pack("{s:s, s:s}", "type", "error", "message", msg);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    if (s)
        printf("%s\n", s);
    else
        printf("{\"type\":\"error\",\"message\":\"the dataset task failed\"}\n");
    fflush(stdout);
    free(s);
    json_decref(j);
}

static const char g_dataset_usage[] =
    "usage: cdigits-worker dataset JOBDIR\n"
    "  Makes the image dataset described by JOBDIR/dataset.json (see docs/worker-protocol.md):\n"
    "  train.db, val.db, test.db, labels.txt, mean.bin, mean.png and stats.json in JOBDIR.\n";

int cd_cmd_dataset(int argc, char **argv)
{
    int status = cd_cli_jobdir_args(argc, argv, g_dataset_usage, 1);
    if (status >= 0)
        return status;
    const char *jobdir = argv[1];
    char path[4096], err[2048];
    if (jobdir_path(jobdir, JOBDIR_DATASET_JSON, path, sizeof path) != CD_OK) {
        fprintf(stderr, "cdigits-worker dataset: the folder name %.80s... is too long\n", jobdir);
        return EXIT_USAGE;
    }
    cd_dataset_config_t cfg;
    cd_dataset_config_init(&cfg);
    if (cd_dataset_config_load(path, &cfg, err, sizeof err) != CD_OK) {
        cd_dataset_config_free(&cfg);
        print_error(err);
        return EXIT_FAILED;
    }
    install_stop_handler();
    cd_dataset_result_t res;
    int rc = cd_dataset_create(&cfg, jobdir, stdout, &res, err, sizeof err);
    cd_dataset_config_free(&cfg);
    if (rc != CD_OK) {
        print_error(err);
        return g_stopped ? EXIT_STOPPED : EXIT_FAILED;
    }
    return 0;
}

static const char g_idx_usage[] =
    "usage: cdigits-worker import-idx --images FILE --labels FILE --out DIR\n"
    "                                 [--labels-names a,b,c] [--limit N] [--threads N]\n"
    "  Writes every image of an IDX image file (MNIST, Fashion-MNIST; .gz is fine) as\n"
    "  DIR/<class name>/<index>.png, the class from the IDX label file. Class names are\n"
    "  0, 1, ... unless --labels-names gives one name per label.\n";

/* --name VALUE or --name=VALUE; returns the value or NULL if argv[*i] is not --name. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_count(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-')
        return CD_ERR;
    *out = (size_t)v;
    return CD_OK;
}

int cd_cmd_import_idx(int argc, char **argv)
{
    cd_idx_import_opts o = {0};
    o.progress = stdout;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        size_t num;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(g_idx_usage, stdout);
            return 0;
        } else if ((v = opt_value(argc, argv, &i, "--images", &missing))) {
            o.images = v;
        } else if ((v = opt_value(argc, argv, &i, "--labels-names", &missing))) {
            o.label_names = v;
        } else if ((v = opt_value(argc, argv, &i, "--labels", &missing))) {
            o.labels = v;
        } else if ((v = opt_value(argc, argv, &i, "--out", &missing))) {
            o.out_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--limit", &missing))) {
            if (parse_count(v, &num) != CD_OK) {
                fprintf(stderr, "cdigits-worker import-idx: --limit %s is not a count\n", v);
                return EXIT_USAGE;
            }
            o.limit = num;
        } else if ((v = opt_value(argc, argv, &i, "--threads", &missing))) {
            if (parse_count(v, &num) != CD_OK || num > 1024) {
                fprintf(stderr, "cdigits-worker import-idx: --threads %s is not 0..1024\n", v);
                return EXIT_USAGE;
            }
            o.threads = (int)num;
        } else {
            fprintf(stderr, "cdigits-worker import-idx: %s %s\n%s", argv[i],
                    missing ? "needs a value" : "is not an option", g_idx_usage);
            return EXIT_USAGE;
        }
        if (missing) {
            fprintf(stderr, "cdigits-worker import-idx: %s needs a value\n%s", argv[i],
                    g_idx_usage);
            return EXIT_USAGE;
        }
    }
    if (!o.images || !o.labels || !o.out_dir) {
        fprintf(stderr, "cdigits-worker import-idx: --images, --labels and --out are "
                        "required\n%s", g_idx_usage);
        return EXIT_USAGE;
    }
    char err[2048];
    size_t written = 0;
    if (cd_idx_import(&o, &written, err, sizeof err) != CD_OK) {
        print_error(err);
        return EXIT_FAILED;
    }
    printf("{\"type\":\"done\"}\n");
    fflush(stdout);
    return 0;
}
