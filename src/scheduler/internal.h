/* Inside the scheduler: the queued and running tasks and the lock that guards them. */
#ifndef CDIGITS_SCHED_INTERNAL_H
#define CDIGITS_SCHED_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <sys/types.h>

#include "cdigits/jobdir.h"
#include "cdigits/sched.h"

#define TAIL_LINES 8

struct stask;
struct sched;

/* Where a task's worker runs: a small table of functions (executor.c: this machine;
 * slurm.c: a Slurm cluster). submit and signal are called with sched.lock held and
 * must not block on anything slow; poll runs in the task's reader thread without it. */
typedef struct sched_executor {
    const char *name;
    int uses_pool; /* the task holds GPUs or a slot of this server's pools while it runs */
    /* Starts argv (the worker's command line) for t in t->dir, records it in the store
     * (the pid, or the Slurm job id) and says so in the job's log and state. */
    int (*submit)(struct sched *s, struct stask *t, char *const *argv, cd_err_t *err);
    /* Whether the worker has ended: 1 with its wait status (W_EXITCODE form), 0 while it
     * waits or runs; also what changed meanwhile (Slurm: pending to running). */
    int (*poll)(struct sched *s, struct stask *t, int *status);
    /* Asks the worker to stop: SIGTERM (it saves a snapshot first) or SIGKILL. */
    void (*signal)(struct sched *s, struct stask *t, int sig);
    /* A descriptor that becomes readable when the worker exits (a pidfd), or -1. */
    int (*exit_fd)(const struct stask *t);
    /* Stops a worker whose reader thread could not start, and waits for it. */
    void (*abandon)(struct sched *s, struct stask *t);
    int idle_poll_ms; /* how often the reader looks when it has no exit_fd or inotify */
} sched_executor_t;

extern const sched_executor_t sched_exec_local; /* executor.c */
extern const sched_executor_t sched_exec_slurm; /* slurm.c */

/* The Slurm client programs, found on PATH once (slurm_init). */
enum slurm_tool { SLURM_SBATCH, SLURM_SQUEUE, SLURM_SCONTROL, SLURM_SCANCEL, SLURM_TOOL_COUNT };

/* One task the scheduler holds: queued (pid 0) or running (pid > 0). Fields above
 * `reader-only` are guarded by sched.lock; the reader thread alone uses the rest. */
typedef struct stask {
    struct stask *next;
    struct sched *owner;
    const sched_executor_t *exec; /* where its worker runs */
    char job_id[40];
    char type[16];        /* "dataset" or "model" */
    char dataset_id[40];  /* model jobs */
    char dir[PATH_MAX];
    int64_t task_id;
    sched_req_t req;
    int attempt;          /* of the run in progress (or next run while queued) */
    int gpus[SCHED_MAX_GPUS];
    int ngpus;
    int resume;           /* a model's later attempt with a complete snapshot: the worker
                           * gets --resume (its train.json is left as the API wrote it) */
    pid_t pid;
    long long pid_start;
    int adopted;          /* the worker was started by an earlier server run and followed
                           * again after a restart: not our child, so no wait status */
    long long out_offset;  /* bytes of worker.out.jsonl read and stored */
    long long err_offset;  /* bytes of worker.err.log read */
    pthread_t reader;
    int abort_requested;
    int delete_requested;
    double kill_at;       /* cd_now() time to send SIGKILL; 0 when none is due */
    int hung;             /* stopped by the worker timeout */
    long long oom_kills;  /* the kernel's OOM kill count (/proc/vmstat) when the worker started */
    long long last_output_ms; /* cd_now() in ms of the worker's last output; the reader stores it atomically */
    char wait_reason[256];
    /* Slurm (exec == &sched_exec_slurm) */
    char slurm_id[32];    /* its Slurm job id once submitted */
    int pending;          /* submitted, not running yet: the job Waits with Slurm's reason */
    int slurm_signal;     /* a stop signal for the reader thread to pass to scancel; 0: none */
    /* reader-only */
    double slurm_polled;  /* cd_now() of the last squeue */
    char slurm_state[32]; /* the last state Slurm reported */
    char nodes[256];      /* the nodes Slurm gave it */
    char slurm_end[640];  /* why Slurm ended it, when it did so by itself (a time limit, a
                           * node failure, scancel from outside): the job's error text */
    int slurm_aborts;     /* that end is an abort (scancel), not an error */
    int slurm_failures;   /* squeue and scontrol calls in a row that gave no answer */
    char last_error[1024];
    char tail[TAIL_LINES][512];
    int ntail;
    int saw_done;
    double progress_published; /* cd_now() of the last stored progress */
    json_t *dataset_result;
} stask_t;

struct sched {
    sched_config_t cfg;
    store_t *store;
    cd_events_t *events;
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* work to do: a task queued or finished, stop */
    sched_pool_t pool;
    stask_t *tasks;       /* queue order */
    stask_t *finished;    /* exited tasks whose reader thread waits to be joined */
    pthread_t thread;
    int thread_started;
    int stopping;         /* sched_stop began: start nothing, mark stopped jobs interrupted */
    int quit;             /* the scheduling thread should return */
    struct model_server *models; /* warm inference workers (model_server.c); NULL once stopped */
    char slurm_tool[SLURM_TOOL_COUNT][PATH_MAX]; /* "" until slurm_init found them */
};

/* A task that has a worker: running here, or submitted to Slurm (pending or running). */
static inline int task_started(const stask_t *t) { return t->pid > 0 || t->slurm_id[0]; }

/* The worker's stdout and stderr go to these files in its job folder (appended across
 * attempts), so that nothing it prints is lost while the server is down. */

/* spawn.c: the server's environment with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that the GPU
 * numbers a worker is given (NVML's order) are the numbers CUDA uses; NULL when out of
 * memory. The caller frees the array only (the strings are environ's). */
char **spawn_worker_env(void);

/* worker.c: start a task's worker and its reader thread (lock held). */
int worker_start(sched_t *s, stask_t *t, cd_err_t *err);
/* worker.c: follows again a live worker an earlier server run started (t->pid,
 * t->pid_start and t->out_offset as the store recorded them; lock held): its lines from
 * t->out_offset on, its exit by pidfd or /proc. No state change: the job stays Running. */
int worker_adopt(sched_t *s, stask_t *t, cd_err_t *err);
/* worker.c: stores what a worker printed after t->out_offset and that was never read
 * (the server was down); for recovery. */
void worker_replay(sched_t *s, stask_t *t);
/* lines.c: one line of a worker's stdout (or stderr when from_stderr). */
void lines_handle(sched_t *s, stask_t *t, char *line, int from_stderr);
/* What a line already stored says of the end (done, or an error and its message), into
 * t without storing it again: a worker followed again after a restart may have printed
 * its last line before the server died. */
void lines_recall(stask_t *t, const char *line);
/* worker.c: the kernel's count of out-of-memory kills so far (-1 when unknown). */
long long worker_oom_kills(void);
/* lines.c: the job's message when its worker failed: the error line or the last lines. */
void lines_failure_message(const stask_t *t, const char *how, char *out, size_t len);

/* slurm.c: finds sbatch, squeue, scontrol and scancel on PATH (CD_ERR naming the one
 * missing and what to install). Called once by sched_new when the executor is Slurm,
 * or when a restarted server finds a task Slurm runs. */
int slurm_init(struct sched *s, cd_err_t *err);
/* slurm.c: the batch script of t (its worker command line argv, nodes, tasks per node,
 * GPUs and CPUs, the time limit, partition and account, output appended to the job's
 * files), into out. CD_ERR when a path cannot be written in a script. */
int slurm_script(const sched_config_t *cfg, const stask_t *t, char *const *argv, char *out, size_t len,
                 cd_err_t *err);
/* What squeue or scontrol say of a job. */
typedef struct slurm_view {
    char state[32];  /* PENDING, RUNNING, COMPLETED, TIMEOUT, ... */
    char reason[160];
    char nodes[256];
    int have_exit, exit_code, exit_signal; /* scontrol's ExitCode=code:signal */
} slurm_view_t;
/* `squeue -h -o "%T|%r|%N"`'s line; CD_ERR when it is not one. */
int slurm_parse_squeue(const char *line, slurm_view_t *v);
/* `scontrol show job -o ID`'s text; CD_ERR when it has no JobState. */
int slurm_parse_scontrol(const char *text, slurm_view_t *v);
/* Slurm's phase of a state: SLURM_WAITS, SLURM_RUNS, SLURM_ENDED (by the worker's
 * exit), SLURM_STOPPED (by Slurm: a time limit, a node failure, scancel), -1 unknown;
 * *what: what it means in words (SLURM_STOPPED), *aborts: it is an abort, not an error. */
enum { SLURM_WAITS, SLURM_RUNS, SLURM_ENDED, SLURM_STOPPED };
int slurm_phase(const char *state, const char **what, int *aborts);

/* sched.c */
/* Records why a queued or pending task waits (lock held). */
void sched_set_wait_reason(sched_t *s, stask_t *t, const char *why);
/* Records a new state for a job and its task and tells the job's listeners. */
void sched_set_state(sched_t *s, const char *job_id, int64_t task_id, int st, const char *message);
/* Called by a reader thread once its worker has exited (status from waitpid). */
void sched_task_exited(sched_t *s, stask_t *t, int wait_status);
void sched_publish_gpus(sched_t *s); /* lock held */
/* Builds the resource request for a job from its config (kind, GPU count or ids). */
void sched_job_request(const sched_t *s, json_t *job, sched_req_t *req);

#endif
