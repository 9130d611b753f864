/*
 * `cdigits serve`: the HTTP server (libmicrohttpd), its SQLite store, the scheduler of
 * worker processes, server-sent events and hardware monitoring.
 */
#ifndef CDIGITS_SERVER_H
#define CDIGITS_SERVER_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "cdigits/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CD_SERVER_MAX_ROOTS 16

typedef struct cd_server_config {
    char bind[64];                 /* --bind, default 127.0.0.1 */
    int port;                      /* --port, default 5000; 0 picks a free port */
    char port_file[PATH_MAX];      /* --port-file: where to write the port once listening */
    char data_dir[PATH_MAX];       /* --data: the database and jobs/ */
    char data_roots[CD_SERVER_MAX_ROOTS][PATH_MAX]; /* --data-root: where images may be read */
    int ndata_roots;
    char log_file[PATH_MAX];       /* --log-file, default stderr */
    int log_level;                 /* --log-level */
    char server_name[128];         /* --server-name */
    char url_prefix[128];          /* --url-prefix, "" or "/digits" */
    char worker[PATH_MAX];         /* --worker, default cdigits-worker next to the server */
    char models_dir[PATH_MAX];     /* --models: standard networks (lenet.prototxt ...) */
    char web_dir[PATH_MAX];        /* --web: the browser UI */
    size_t max_upload;             /* --max-upload bytes, default 64 MiB */
    int cpu_slots;                 /* --cpu-slots, default 1 */
    int dataset_slots;             /* --dataset-slots, default 1 */
    int inference_slots;           /* --inference-slots, default 1 */
    char gpus[256];                /* --gpus: "auto" (NVML), "none", or a list "0,1" */
    double abort_grace;            /* --abort-grace seconds, default 10 */
    int resume_interrupted;        /* --resume-interrupted */
    double monitor_interval;       /* --monitor-interval seconds, default 1 */
    /* exposure and authentication (docs/security.md) */
    char auth[16];                 /* --auth: "none" (DIGITS's username cookie; loopback only) or "password" */
    int auth_password;             /* auth is "password" */
    char admin_user[64];           /* --admin-user, default "admin" */
    char admin_password_file[PATH_MAX]; /* --admin-password-file: creates the admin at start when missing */
    double session_ttl;            /* --session-ttl seconds, default 12 h */
    char job_visibility[16];       /* --job-visibility: "all" (default, as DIGITS) or "own" */
    int visibility_own;            /* job_visibility is "own" */
    char allowed_hosts[512];       /* --allowed-hosts: Host names this server answers to, comma list */
    int login_attempts;            /* --login-attempts: failed logins per minute per user or address (5) */
    int secure_cookies;            /* --secure-cookies: cookies only over HTTPS (behind a TLS proxy) */
    double worker_timeout;         /* --worker-timeout seconds without worker output; 0: never */
    double model_idle;             /* --model-idle seconds before a warm inference worker stops (300) */
    int model_workers;             /* --model-workers: warm inference workers at once (4) */
    int model_threads;             /* --model-threads: CPU threads per inference worker (0: all) */
    /* where training and dataset tasks run (docs/cluster.md) */
    char executor[16];             /* --executor: "local" (default) or "slurm" */
    int executor_slurm;            /* executor is "slurm" */
    char slurm_partition[128];     /* --slurm-partition: sbatch --partition ("" : Slurm's default) */
    char slurm_account[128];       /* --slurm-account: sbatch --account */
    char slurm_time[32];           /* --slurm-time: sbatch --time */
    int slurm_cpus_per_task;       /* --slurm-cpus-per-task: sbatch --cpus-per-task (1) */
} cd_server_config_t;

/* Defaults, then the CDIGITS_* environment, then the flags (argv[0] is "serve").
 * CD_OK; CD_ERR with a message for a bad flag; 1 when --help was printed. */
int server_config_parse(cd_server_config_t *cfg, int argc, char **argv, cd_err_t *err);
void server_usage(FILE *out);

/* Runs the server until SIGINT or SIGTERM; returns the process exit status. */
int server_run(const cd_server_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
