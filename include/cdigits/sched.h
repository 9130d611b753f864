/*
 * The scheduler: a queue of jobs, resource pools, and one cdigits-worker process per
 * running task.
 *
 * Pools: every GPU runs one training task at a time (a job asks for N GPUs or for
 * specific ones and gets all of them or none), CPU training slots, dataset slots and
 * inference slots. A model job also waits until its dataset is Done. A job that waits
 * says why (jobs.wait_reason, and a "status" event).
 *
 * A worker is started with posix_spawn (sched_spawn) in its own process group with its
 * stdout and stderr appended to files in its job folder; a reader thread per worker
 * stores each JSON line in the store as it arrives and publishes it as an event. Abort
 * sends SIGTERM to the group, then SIGKILL after the grace period. The job's
 * configuration (dataset.json or train.json in its directory) is written by the API
 * before the job is queued; the scheduler only adds what it decides at start: the
 * GPUs, the backend and whether to resume. Where a task runs is its executor's: the
 * local one starts the worker on this machine, the Slurm one (--executor slurm,
 * docs/cluster.md) submits the same command line with sbatch and follows it with squeue
 * and scontrol; Slurm then does the resource scheduling and the pools are not used.
 * Short checks the server runs
 * (sched_run_check) take an inference slot like any other task.
 *
 * Thread-safe; no function here exits or aborts the process.
 */
#ifndef CDIGITS_SCHED_H
#define CDIGITS_SCHED_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cdigits/events.h"
#include "cdigits/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SCHED_MAX_GPUS 64

typedef struct sched sched_t;

/* Warm inference workers (model_server.h); 0 in a field takes its default. */
typedef struct model_server_opts {
    double idle_s;   /* stop a worker idle this long (default 300 s) */
    int max_workers; /* warm workers at once (default 4) */
    int threads;     /* CPU threads per worker (default 0: all cores) */
} model_server_opts_t;

enum sched_executor_kind { SCHED_EXEC_LOCAL = 0, SCHED_EXEC_SLURM };

/* How tasks are submitted to Slurm (--executor slurm); NULL or "" leaves a setting to
 * Slurm's defaults. The strings must outlive the scheduler. */
typedef struct sched_slurm_opts {
    const char *partition; /* sbatch --partition */
    const char *account;   /* sbatch --account */
    const char *time;      /* sbatch --time, Slurm's forms (MINUTES, H:M:S, D-H) */
    int cpus_per_task;     /* sbatch --cpus-per-task (0: 1) */
} sched_slurm_opts_t;

typedef struct sched_config {
    const char *worker;    /* path of the cdigits-worker executable */
    int ngpus;             /* GPUs in the pool, by their NVML/CUDA PCI-order index */
    int gpu_ids[SCHED_MAX_GPUS];
    int cpu_slots;         /* training tasks at once on the CPU (>= 1) */
    int dataset_slots;     /* dataset tasks at once (>= 1) */
    int inference_slots;   /* inference tasks at once (>= 1) */
    double abort_grace;    /* seconds from SIGTERM to SIGKILL */
    double poll_interval;  /* seconds between scheduling passes when nothing happens */
    double worker_timeout; /* a worker silent this long (stdout and stderr) has hung; 0: never */
    model_server_opts_t models; /* the scheduler's warm inference workers */
    int executor;          /* SCHED_EXEC_LOCAL (default) or SCHED_EXEC_SLURM: where training and
                            * dataset tasks run (inference stays on this machine) */
    sched_slurm_opts_t slurm;
} sched_config_t;

/* ---- resource pools (pure; the scheduler holds one under its lock) ---------------- */

enum sched_res_kind { SCHED_RES_NONE = 0, SCHED_RES_GPU, SCHED_RES_CPU, SCHED_RES_DATASET, SCHED_RES_INFER };

/* What a task needs: a dataset or inference slot, a CPU training slot, or GPUs (either
 * `count` of any, or exactly the `nids` listed in ids). */
typedef struct sched_req {
    int kind;
    int count;
    int nids;
    int ids[SCHED_MAX_GPUS];
    int nodes;          /* nodes asked for (the model's resources.nodes; 1 by default) */
    int ranks_per_node; /* worker ranks per node (resources.ranks_per_node; 1 by default) */
} sched_req_t;

typedef struct sched_pool {
    int ngpus;
    int gpu_id[SCHED_MAX_GPUS];
    char gpu_owner[SCHED_MAX_GPUS][40]; /* job id holding the GPU, "" when free */
    int slots[SCHED_RES_INFER + 1];     /* per kind (CPU, DATASET, INFER) */
    int used[SCHED_RES_INFER + 1];
} sched_pool_t;

void pool_init(sched_pool_t *p, const sched_config_t *cfg);
/* Checks a request against the pool's size (not its current use): CD_ERR with a
 * message when it can never be met (GPU 5 on a machine with 2, 3 GPUs of 2). */
int pool_check(const sched_pool_t *p, const sched_req_t *req, char *why, size_t whylen);
/* Takes everything the request needs for owner, or nothing: CD_OK with the GPU ids in
 * got[0..*ngot) (none for slots), or CD_ERR with why it must wait. */
int pool_acquire(sched_pool_t *p, const sched_req_t *req, const char *owner, int *got, int *ngot, char *why,
                 size_t whylen);
/* Gives back what owner holds of req's kind. */
void pool_release(sched_pool_t *p, const sched_req_t *req, const char *owner);
int pool_gpus_free(const sched_pool_t *p);

/* ---- the scheduler ------------------------------------------------------------------ */

int sched_new(const sched_config_t *cfg, store_t *store, cd_events_t *events, sched_t **out, cd_err_t *err);
/* Sets worker_timeout: a running worker that prints nothing for this many seconds is
 * stopped (SIGTERM, then SIGKILL after the grace period) and its job ends in Error
 * saying it hung. 0 turns the check off. */
void sched_set_worker_timeout(sched_t *s, double seconds);
/* Starts the scheduling thread. */
int sched_start(sched_t *s, cd_err_t *err);
/* Stops the scheduling thread and every worker (SIGTERM, the grace period, SIGKILL).
 * Stopped jobs are left Aborted and marked interrupted, so they can be resumed. */
void sched_stop(sched_t *s);
void sched_free(sched_t *s); /* accepts NULL; stops first if needed */

/* Queues a job whose task is in the store (Initialized, or re-queued after a resume):
 * the job becomes Waiting until its dataset and its resources are ready. */
int sched_enqueue(sched_t *s, const char *job_id, cd_err_t *err);
/* Aborts a job that waits (Aborted at once) or runs (SIGTERM now, SIGKILL after the
 * grace period). CD_E_CONFLICT when the job does not run or wait. */
int sched_abort(sched_t *s, const char *job_id, cd_err_t *err);
/* Deletes a job: stops its worker at once if it runs, removes it from the store and
 * removes its directory (after the worker has exited). */
int sched_delete(sched_t *s, const char *job_id, cd_err_t *err);
/* Queues a stopped training job again from its newest complete snapshot (with the
 * solver state); metrics recorded after that snapshot are kept but marked superseded.
 * CD_E_CONFLICT when the job runs or is Done. *epoch gets the snapshot epoch (0: from
 * the start) when not NULL. */
int sched_resume(sched_t *s, const char *job_id, double *epoch, cd_err_t *err);
/* At start, before sched_start: tasks the store shows Running belong to a server that
 * died. Leftover worker processes (recorded pid, same start time, still a worker) are
 * stopped; the tasks become Aborted, their jobs are marked interrupted, snapshots found
 * on disk are recorded. Waiting and Initialized jobs are queued again. With
 * resume_interrupted, every interrupted training job is resumed and every interrupted
 * dataset job started again. */
int sched_recover(sched_t *s, int resume_interrupted, cd_err_t *err);

/* {"gpus": {"total", "free", "busy": [{"index", "job_id"}]}, "cpu_slots": {"total",
 *  "used"}, "dataset_slots": {...}, "inference_slots": {...}, "queued", "running"} */
json_t *sched_resources(sched_t *s);
/* Whether the job has a task queued or running here. */
int sched_has_job(sched_t *s, const char *job_id);

typedef struct sched_proc {
    char job_id[40];
    int64_t task_id;
    pid_t pid;
    int ngpus;
    int gpus[SCHED_MAX_GPUS];
} sched_proc_t;
/* The running workers, at most max; returns how many were written. */
int sched_running(sched_t *s, sched_proc_t *out, int max);

/* rm -rf of a job directory, refused unless its last component is job_id. */
int sched_remove_dir(const char *dir, const char *job_id);

/* ---- child processes (spawn.c, check.c) ---------------------------------------------- */

/* What a child's descriptor 0, 1 or 2 becomes; a zeroed sched_fd_t is /dev/null. */
enum sched_fd_kind {
    SCHED_FD_NULL = 0, /* /dev/null */
    SCHED_FD_READ,     /* path, opened for reading */
    SCHED_FD_APPEND,   /* path, created when missing, appended to */
    SCHED_FD_TRUNC,    /* path, created when missing, emptied */
    SCHED_FD_PIPE,     /* fd: a descriptor of the caller's (a pipe end), duplicated */
};
typedef struct sched_fd {
    int kind;
    const char *path; /* SCHED_FD_READ, _APPEND, _TRUNC */
    int fd;           /* SCHED_FD_PIPE */
} sched_fd_t;

typedef struct sched_spawn {
    char *const *argv; /* argv[0]: the program's path; NULL last */
    const char *dir;   /* working folder; NULL: the caller's */
    char *const *env;  /* NULL: the caller's environment */
    sched_fd_t fd[3];  /* stdin, stdout, stderr */
    int own_group;     /* a process group of its own: kill(-pid) reaches all it starts,
                        * and a terminal's Ctrl-C reaches only the server */
    const char *what;  /* the program in messages ("the worker"); may be NULL */
    const char *hint;  /* what to do, appended to a failure message; may be NULL */
} sched_spawn_t;

/* Starts sp->argv[0] (a path: no PATH search) with no signal blocked and SIGPIPE,
 * SIGTERM, SIGINT, SIGHUP and SIGCHLD at their defaults. CD_OK with *pid (the caller
 * reaps it); CD_ERR with a message naming the program and the cause (it cannot be run,
 * its folder or a file it was given is missing), *pid -1. Pipe ends the caller keeps
 * should be close-on-exec, so the child holds only the ones it was given. */
int sched_spawn(const sched_spawn_t *sp, pid_t *pid, cd_err_t *err);

/* Runs a short job (argv, as for sched_spawn, stdin from /dev/null) under one of the
 * scheduler's inference slots, waiting up to wait_s for a free one, and collects its
 * stdout and stderr (NUL-terminated, at most SCHED_CHECK_MAX_OUTPUT bytes of each kept;
 * the caller frees *out and *errout, NULL when it printed nothing) until it exits. A
 * child still running after timeout_s is killed with its process group. CD_OK with its
 * exit status when it exited by itself; CD_ERR otherwise: err->kind CD_E_CONFLICT when
 * no slot was free in time or the scheduler is stopping (a server answers 503 and asks
 * the client to retry), CD_E_INTERNAL when it could not start, was killed or timed out.
 * The scheduler's lock is not held while the child runs. */
#define SCHED_CHECK_MAX_OUTPUT ((size_t)8 << 20)
int sched_run_check(sched_t *s, char *const argv[], double wait_s, double timeout_s, char **out, char **errout,
                    int *exit_status, cd_err_t *err);

/* ---- /proc ------------------------------------------------------------------------- */

/* Start time of a process in clock ticks after boot; -1 when it does not exist or is
 * a zombie. */
long long proc_start_ticks(pid_t pid);
/* Whether argv[0] or argv[1] of pid ends in "/<name>" or is name (a script runs as
 * "bash script ..."). */
int proc_runs(pid_t pid, const char *name);
/* Whether the working folder of pid is dir (both resolved); 0 when either cannot be read. */
int proc_cwd_is(pid_t pid, const char *dir);
/* CPU time (user + system, clock ticks) and resident bytes; CD_ERR when gone. */
int proc_usage(pid_t pid, unsigned long long *cpu_ticks, unsigned long long *rss_bytes);
long proc_ticks_per_sec(void);

#ifdef __cplusplus
}
#endif
#endif
