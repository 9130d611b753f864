/* `cdigits serve` options: defaults, then CDIGITS_* environment variables, then flags.
 * One table lists every option with its flag, variable and how to read it. */
#include "internal.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "cdigits/util.h"

enum opt_kind { O_STR, O_INT, O_SIZE, O_SECONDS, O_LEVEL, O_ROOT, O_FLAG };

typedef struct option_spec {
    const char *flag;  /* long option without "--" */
    const char *env;   /* environment variable */
    int kind;
    size_t offset;     /* into cd_server_config_t */
    size_t size;       /* for strings */
    const char *arg;   /* what the value is, for --help */
    const char *help;
} option_spec_t;

#define OFF(f) offsetof(cd_server_config_t, f)
#define SZ(f) sizeof(((cd_server_config_t *)0)->f)

static const option_spec_t g_options[] = {
    {"bind", "CDIGITS_BIND", O_STR, OFF(bind), SZ(bind), "ADDR", "address to listen on (127.0.0.1)"},
    {"port", "CDIGITS_PORT", O_INT, OFF(port), 0, "N", "port to listen on (5000; 0 picks a free one)"},
    {"port-file", "CDIGITS_PORT_FILE", O_STR, OFF(port_file), SZ(port_file), "PATH",
     "write the port here once listening"},
    {"data", "CDIGITS_DATA", O_STR, OFF(data_dir), SZ(data_dir), "DIR", "database and jobs/ folder (./data)"},
    {"data-root", "CDIGITS_DATA_ROOT", O_ROOT, 0, 0, "DIR",
     "a folder datasets and inference may read images from; repeat for more (the variable takes a :-list; "
     "default: the data folder)"},
    {"log-file", "CDIGITS_LOG_FILE", O_STR, OFF(log_file), SZ(log_file), "PATH", "log here instead of stderr"},
    {"log-level", "CDIGITS_LOG_LEVEL", O_LEVEL, OFF(log_level), 0, "LEVEL", "debug, info, warning or error (info)"},
    {"server-name", "CDIGITS_SERVER_NAME", O_STR, OFF(server_name), SZ(server_name), "NAME",
     "name shown in /index/json"},
    {"url-prefix", "CDIGITS_URL_PREFIX", O_STR, OFF(url_prefix), SZ(url_prefix), "PREFIX",
     "serve under this path, e.g. /digits"},
    {"worker", "CDIGITS_WORKER", O_STR, OFF(worker), SZ(worker), "PATH",
     "the cdigits-worker executable (next to this one)"},
    {"models", "CDIGITS_MODELS", O_STR, OFF(models_dir), SZ(models_dir), "DIR",
     "standard networks folder (lenet.prototxt, alexnet.prototxt, googlenet.prototxt)"},
    {"web", "CDIGITS_WEB", O_STR, OFF(web_dir), SZ(web_dir), "DIR", "the browser UI folder"},
    {"max-upload", "CDIGITS_MAX_UPLOAD", O_SIZE, OFF(max_upload), 0, "BYTES",
     "largest request body, with K, M or G (64M); larger ones get 413"},
    {"cpu-slots", "CDIGITS_CPU_SLOTS", O_INT, OFF(cpu_slots), 0, "N", "training tasks at once on the CPU (1)"},
    {"dataset-slots", "CDIGITS_DATASET_SLOTS", O_INT, OFF(dataset_slots), 0, "N", "dataset tasks at once (1)"},
    {"inference-slots", "CDIGITS_INFERENCE_SLOTS", O_INT, OFF(inference_slots), 0, "N",
     "inference tasks at once (1)"},
    {"gpus", "CDIGITS_GPUS", O_STR, OFF(gpus), SZ(gpus), "LIST",
     "GPUs to schedule: auto (what NVML sees), none, or a list like 0,1"},
    {"abort-grace", "CDIGITS_ABORT_GRACE", O_SECONDS, OFF(abort_grace), 0, "SECONDS",
     "time from SIGTERM to SIGKILL when a job is aborted (10)"},
    {"monitor-interval", "CDIGITS_MONITOR_INTERVAL", O_SECONDS, OFF(monitor_interval), 0, "SECONDS",
     "hardware sampling period (1)"},
    {"resume-interrupted", "CDIGITS_RESUME_INTERRUPTED", O_FLAG, OFF(resume_interrupted), 0, NULL,
     "resume the training jobs a server stop interrupted"},
    {"worker-timeout", "CDIGITS_WORKER_TIMEOUT", O_SECONDS, OFF(worker_timeout), 0, "SECONDS",
     "end a job in Error when its worker prints nothing for this long (0: never)"},
    /* warm inference workers: docs/inference.md */
    {"model-idle", "CDIGITS_MODEL_IDLE", O_SECONDS, OFF(model_idle), 0, "SECONDS",
     "stop a warm inference worker that answered nothing for this long (300)"},
    {"model-workers", "CDIGITS_MODEL_WORKERS", O_INT, OFF(model_workers), 0, "N",
     "warm inference workers at once (4)"},
    {"model-threads", "CDIGITS_MODEL_THREADS", O_INT, OFF(model_threads), 0, "N",
     "CPU threads of each inference worker (0: all cores)"},
    /* exposure and authentication: docs/security.md */
    {"auth", "CDIGITS_AUTH", O_STR, OFF(auth), SZ(auth), "MODE",
     "none (DIGITS's username login; loopback only) or password (users, sessions, API tokens)"},
    {"admin-user", "CDIGITS_ADMIN_USER", O_STR, OFF(admin_user), SZ(admin_user), "NAME",
     "the administrator created from --admin-password-file (admin)"},
    {"admin-password-file", "CDIGITS_ADMIN_PASSWORD_FILE", O_STR, OFF(admin_password_file),
     SZ(admin_password_file), "PATH", "first line: the administrator's password, set at start when that user is new"},
    {"session-ttl", "CDIGITS_SESSION_TTL", O_SECONDS, OFF(session_ttl), 0, "SECONDS",
     "a login session ends this long after it began (43200)"},
    {"job-visibility", "CDIGITS_JOB_VISIBILITY", O_STR, OFF(job_visibility), SZ(job_visibility), "WHO",
     "all (everyone reads every job, as DIGITS) or own (users read their own jobs; admins all)"},
    {"allowed-hosts", "CDIGITS_ALLOWED_HOSTS", O_STR, OFF(allowed_hosts), SZ(allowed_hosts), "LIST",
     "Host names this server answers to, comma list (loopback: addresses, localhost, names without a dot; else any)"},
    {"login-attempts", "CDIGITS_LOGIN_ATTEMPTS", O_INT, OFF(login_attempts), 0, "N",
     "failed logins per minute for one user or one address before 429 (5)"},
    {"secure-cookies", "CDIGITS_SECURE_COOKIES", O_FLAG, OFF(secure_cookies), 0, NULL,
     "mark cookies Secure (when a TLS proxy serves the server as https)"},
    /* where training and dataset tasks run: docs/cluster.md */
    {"executor", "CDIGITS_EXECUTOR", O_STR, OFF(executor), SZ(executor), "WHERE",
     "local (workers on this machine) or slurm (submitted with sbatch; the data folder must be shared with the "
     "nodes) (local)"},
    {"slurm-partition", "CDIGITS_SLURM_PARTITION", O_STR, OFF(slurm_partition), SZ(slurm_partition), "NAME",
     "Slurm partition of the jobs (Slurm's default)"},
    {"slurm-account", "CDIGITS_SLURM_ACCOUNT", O_STR, OFF(slurm_account), SZ(slurm_account), "NAME",
     "Slurm account the jobs are charged to (Slurm's default)"},
    {"slurm-time", "CDIGITS_SLURM_TIME", O_STR, OFF(slurm_time), SZ(slurm_time), "LIMIT",
     "time limit of each Slurm job, as sbatch --time takes it (MINUTES, H:M:S, D-H:M) (the partition's)"},
    {"slurm-cpus-per-task", "CDIGITS_SLURM_CPUS_PER_TASK", O_INT, OFF(slurm_cpus_per_task), 0, "N",
     "CPUs Slurm gives each worker (1)"},
};

void server_usage(FILE *out)
{
    fprintf(out, "usage: cdigits serve [options]\n\nRuns the cdigits server (DIGITS-compatible JSON API, "
                 "server-sent events, scheduler of cdigits-worker processes).\n\noptions (and environment):\n");
    for (size_t i = 0; i < CD_ARRAY_LEN(g_options); i++) {
        const option_spec_t *o = &g_options[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->flag, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(out, "  %-28s %s [%s]\n", left, o->help, o->env);
    }
    fprintf(out, "  %-28s %s\n", "--help", "this text");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return CD_ERR;
    double mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1024.0; break;
        case 'm': case 'M': mul = 1024.0 * 1024; break;
        case 'g': case 'G': mul = 1024.0 * 1024 * 1024; break;
        default: return CD_ERR;
        }
        end++;
        if (*end == 'B' || *end == 'b' || *end == 'i')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
        if (*end)
            return CD_ERR;
    }
    *out = (size_t)(v * mul);
    return CD_OK;
}

static int parse_level(const char *s)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    if (strcasecmp(s, "warn") == 0)
        return CD_LOG_WARN;
    return -1;
}

static int add_root(cd_server_config_t *cfg, const char *dir, cd_err_t *err)
{
    if (cfg->ndata_roots >= CD_SERVER_MAX_ROOTS)
        return cd_err_set(err, CD_E_INVALID, "--data-root given more than %d times", CD_SERVER_MAX_ROOTS);
    snprintf(cfg->data_roots[cfg->ndata_roots++], PATH_MAX, "%s", dir);
    return CD_OK;
}

static int apply(cd_server_config_t *cfg, const option_spec_t *o, const char *value, const char *source,
                 cd_err_t *err)
{
    char *base = (char *)cfg + o->offset;
    char *end;
    switch (o->kind) {
    case O_STR:
        if (strlen(value) >= o->size)
            return cd_err_set(err, CD_E_INVALID, "%s: value is longer than %zu bytes", source, o->size - 1);
        snprintf(base, o->size, "%s", value);
        return CD_OK;
    case O_INT: {
        errno = 0;
        long v = strtol(value, &end, 10);
        if (end == value || *end || errno || v < 0 || v > INT_MAX)
            return cd_err_set(err, CD_E_INVALID, "%s: \"%s\" is not a whole number >= 0", source, value);
        *(int *)base = (int)v;
        return CD_OK;
    }
    case O_SIZE:
        if (parse_size(value, (size_t *)base) != CD_OK)
            return cd_err_set(err, CD_E_INVALID, "%s: \"%s\" is not a size like 64M", source, value);
        return CD_OK;
    case O_SECONDS: {
        errno = 0;
        double v = strtod(value, &end);
        if (end == value || *end || errno || v < 0)
            return cd_err_set(err, CD_E_INVALID, "%s: \"%s\" is not a number of seconds", source, value);
        *(double *)base = v;
        return CD_OK;
    }
    case O_LEVEL: {
        int l = parse_level(value);
        if (l < 0)
            return cd_err_set(err, CD_E_INVALID, "%s: \"%s\" is not debug, info, warning or error", source, value);
        *(int *)base = l;
        return CD_OK;
    }
    case O_FLAG:
        *(int *)base = field_truthy(value);
        return CD_OK;
    case O_ROOT: {
        /* environment: a :-list; flag: one folder */
        char buf[8192];
        snprintf(buf, sizeof buf, "%s", value);
        if (strncmp(source, "--", 2) == 0)
            return add_root(cfg, buf, err);
        char *save = NULL;
        for (char *t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save))
            if (add_root(cfg, t, err) != CD_OK)
                return CD_ERR;
        return CD_OK;
    }
    }
    return CD_ERR;
}

int server_bind_is_loopback(const char *bind)
{
    struct in_addr a;
    if (strcmp(bind, "localhost") == 0)
        return 1;
    return inet_pton(AF_INET, bind, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* The authentication and visibility settings, and the rule that keeps an open server
 * on loopback: DIGITS's username login trusts whoever can reach the port. */
static int check_exposure(cd_server_config_t *cfg, cd_err_t *err)
{
    if (strcmp(cfg->auth, "none") != 0 && strcmp(cfg->auth, "password") != 0)
        return cd_err_set(err, CD_E_INVALID, "--auth %s: give none (username login, loopback only) or password",
                          cfg->auth);
    cfg->auth_password = strcmp(cfg->auth, "password") == 0;
    if (strcmp(cfg->job_visibility, "all") != 0 && strcmp(cfg->job_visibility, "own") != 0)
        return cd_err_set(err, CD_E_INVALID, "--job-visibility %s: give all (everyone reads every job) or own",
                          cfg->job_visibility);
    cfg->visibility_own = strcmp(cfg->job_visibility, "own") == 0;
    if (cfg->session_ttl < 60)
        return cd_err_set(err, CD_E_INVALID, "--session-ttl %g is too short; give at least 60 seconds",
                          cfg->session_ttl);
    if (cfg->login_attempts < 1)
        return cd_err_set(err, CD_E_INVALID, "--login-attempts must be at least 1");
#ifndef CDIGITS_HAVE_SODIUM
    if (cfg->auth_password)
        return cd_err_set(err, CD_E_INVALID,
                          "--auth password needs libsodium, which this cdigits was built without; install "
                          "libsodium-dev and build again");
#endif
    if (!cfg->auth_password && !server_bind_is_loopback(cfg->bind))
        return cd_err_set(err, CD_E_INVALID,
                          "--bind %s would let anyone who reaches this machine use the server under any name: "
                          "without passwords cdigits listens on loopback only. To serve the network, turn on "
                          "authentication: --auth password --admin-password-file FILE (a file holding the "
                          "administrator's password; see docs/security.md). Or keep --bind 127.0.0.1 and reach "
                          "the server through an SSH tunnel (ssh -L 5000:127.0.0.1:5000 HOST).",
                          cfg->bind);
    return CD_OK;
}

/* The folder of this executable, for the default worker, models and web folders. */
static void exe_dir(char *out, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        snprintf(out, len, ".");
        return;
    }
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (slash)
        *slash = 0;
    snprintf(out, len, "%s", path);
}

/* The first of the candidates that exists as a folder holding `probe`. */
static void find_dir(char *out, size_t len, const char *const *cands, int n, const char *probe)
{
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", cands[i], probe);
        if (access(p, R_OK) == 0) {
            snprintf(out, len, "%s", cands[i]);
            return;
        }
    }
    snprintf(out, len, "%s", cands[n - 1]);
}

int server_config_parse(cd_server_config_t *cfg, int argc, char **argv, cd_err_t *err)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->bind, sizeof cfg->bind, "127.0.0.1");
    cfg->port = 5000;
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "./data");
    cfg->log_level = CD_LOG_INFO;
    cfg->max_upload = (size_t)64 << 20;
    cfg->cpu_slots = cfg->dataset_slots = cfg->inference_slots = 1;
    snprintf(cfg->gpus, sizeof cfg->gpus, "auto");
    cfg->abort_grace = 10;
    cfg->monitor_interval = 1;
    snprintf(cfg->auth, sizeof cfg->auth, "none");
    snprintf(cfg->admin_user, sizeof cfg->admin_user, "admin");
    cfg->session_ttl = 12 * 3600;
    snprintf(cfg->job_visibility, sizeof cfg->job_visibility, "all");
    cfg->login_attempts = 5;
    cfg->model_idle = 300;
    cfg->model_workers = 4;
    snprintf(cfg->executor, sizeof cfg->executor, "local");
    cfg->slurm_cpus_per_task = 1;

    for (size_t i = 0; i < CD_ARRAY_LEN(g_options); i++) {
        const char *v = getenv(g_options[i].env);
        if (v && *v && apply(cfg, &g_options[i], v, g_options[i].env, err) != CD_OK)
            return CD_ERR;
    }
    /* flags given on the command line replace the environment's roots */
    int env_roots = cfg->ndata_roots, flag_roots = 0;

    struct option longopts[CD_ARRAY_LEN(g_options) + 2];
    for (size_t i = 0; i < CD_ARRAY_LEN(g_options); i++)
        longopts[i] = (struct option){g_options[i].flag, g_options[i].kind == O_FLAG ? no_argument : required_argument,
                                      NULL, (int)(i + 256)};
    longopts[CD_ARRAY_LEN(g_options)] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[CD_ARRAY_LEN(g_options) + 1] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            server_usage(stdout);
            return 1;
        }
        if (c == '?')
            return cd_err_set(err, CD_E_INVALID, "unknown option %s; see cdigits serve --help", argv[optind - 1]);
        if (c == ':')
            return cd_err_set(err, CD_E_INVALID, "option %s needs a value; see cdigits serve --help",
                              argv[optind - 1]);
        const option_spec_t *o = &g_options[c - 256];
        char source[64];
        snprintf(source, sizeof source, "--%s", o->flag);
        if (o->kind == O_ROOT && flag_roots++ == 0) {
            cfg->ndata_roots -= env_roots;
            memmove(cfg->data_roots, cfg->data_roots + env_roots, sizeof(cfg->data_roots[0]) * (size_t)cfg->ndata_roots);
        }
        if (apply(cfg, o, o->kind == O_FLAG ? "1" : optarg, source, err) != CD_OK)
            return CD_ERR;
    }
    if (optind < argc)
        return cd_err_set(err, CD_E_INVALID, "unexpected argument \"%s\"; see cdigits serve --help", argv[optind]);
    if (cfg->port > 65535)
        return cd_err_set(err, CD_E_INVALID, "--port %d is not a port number (0-65535)", cfg->port);
    if (cfg->max_upload < 1024)
        return cd_err_set(err, CD_E_INVALID, "--max-upload %zu is too small; give at least 1K", cfg->max_upload);
    /* a prefix is "/x" without a trailing slash, or empty */
    size_t pl = strlen(cfg->url_prefix);
    while (pl && cfg->url_prefix[pl - 1] == '/')
        cfg->url_prefix[--pl] = 0;
    if (pl && cfg->url_prefix[0] != '/') {
        memmove(cfg->url_prefix + 1, cfg->url_prefix, pl + 1 < sizeof cfg->url_prefix - 1 ? pl + 1 : sizeof cfg->url_prefix - 2);
        cfg->url_prefix[0] = '/';
    }

    if (check_exposure(cfg, err) != CD_OK)
        return CD_ERR;
    if (strcmp(cfg->executor, "local") != 0 && strcmp(cfg->executor, "slurm") != 0)
        return cd_err_set(err, CD_E_INVALID,
                          "--executor %s: give local (workers on this machine) or slurm (jobs submitted with sbatch)",
                          cfg->executor);
    cfg->executor_slurm = strcmp(cfg->executor, "slurm") == 0;
    if (cfg->slurm_cpus_per_task < 1)
        return cd_err_set(err, CD_E_INVALID, "--slurm-cpus-per-task must be at least 1");

    char exe[PATH_MAX];
    exe_dir(exe, sizeof exe);
    if (!cfg->worker[0])
        snprintf(cfg->worker, sizeof cfg->worker, "%s/cdigits-worker", exe);
    /* workers start inside their job folder: a relative path would not resolve there */
    char real[PATH_MAX];
    if (realpath(cfg->worker, real))
        snprintf(cfg->worker, sizeof cfg->worker, "%s", real);
    char up[PATH_MAX + 8], upmodels[PATH_MAX + 16], upweb[PATH_MAX + 16];
    snprintf(up, sizeof up, "%s/..", exe);
    if (!cfg->models_dir[0]) {
        snprintf(upmodels, sizeof upmodels, "%s/models", up);
        const char *c2[] = {upmodels, CDIGITS_SOURCE_DIR "/models"};
        find_dir(cfg->models_dir, sizeof cfg->models_dir, c2, 2, "lenet.prototxt");
    }
    if (!cfg->web_dir[0]) {
        snprintf(upweb, sizeof upweb, "%s/web", up);
        const char *c3[] = {upweb, CDIGITS_SOURCE_DIR "/web"};
        find_dir(cfg->web_dir, sizeof cfg->web_dir, c3, 2, "index.html");
    }
    /* files are served only from inside the realpath of the UI folder ("build/../web"
     * would match nothing) */
    if (cfg->web_dir[0] && realpath(cfg->web_dir, real))
        snprintf(cfg->web_dir, sizeof cfg->web_dir, "%s", real);
    return CD_OK;
}
