/* The Slurm executor (--executor slurm, docs/cluster.md): a task's worker command line,
 * the one the local executor would start, goes into a batch script in the job folder
 * (slurm.sbatch), is submitted with `sbatch --parsable`, followed with squeue while
 * Slurm knows it as queued or running and with `scontrol show job` once it has ended
 * (no slurmdbd is needed), and stopped with `scancel --signal=TERM` (the worker saves a
 * snapshot, as it does on SIGTERM here) and then `scancel`. The worker's stdout and
 * stderr are appended to the job's files by Slurm, so the reader thread follows them as
 * it follows a local worker: the job folder must be on a filesystem the nodes share.
 *
 * Every Slurm program is started through sched_spawn with a time limit, never a shell.
 * The scheduler's lock is held while sbatch runs (submit); squeue, scontrol and scancel
 * run in the task's reader thread without it. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/util.h"

#define SLURM_SCRIPT "slurm.sbatch" /* the batch script, in the job folder */
#define SLURM_POLL_S 1.0            /* seconds between squeue calls for one job */
#define SLURM_CMD_TIMEOUT_S 30      /* a Slurm program that has not answered by then is killed */

static const char *const g_tool_names[SLURM_TOOL_COUNT] = {
    [SLURM_SBATCH] = "sbatch",
    [SLURM_SQUEUE] = "squeue",
    [SLURM_SCONTROL] = "scontrol",
    [SLURM_SCANCEL] = "scancel",
};

/* Slurm's job states (squeue %T, scontrol JobState) and what each means for a task. */
static const struct {
    const char *state;
    int phase;
    int aborts;       /* SLURM_STOPPED: an abort (Aborted), not an error */
    const char *what; /* SLURM_STOPPED: what Slurm did, after "Slurm job N " */
} g_states[] = {
    {"PENDING", SLURM_WAITS, 0, NULL},
    {"CONFIGURING", SLURM_WAITS, 0, NULL},
    {"REQUEUED", SLURM_WAITS, 0, NULL},
    {"REQUEUE_HOLD", SLURM_WAITS, 0, NULL},
    {"REQUEUE_FED", SLURM_WAITS, 0, NULL},
    {"RESV_DEL_HOLD", SLURM_WAITS, 0, NULL},
    {"RUNNING", SLURM_RUNS, 0, NULL},
    {"COMPLETING", SLURM_RUNS, 0, NULL}, /* its processes are still being stopped */
    {"SUSPENDED", SLURM_RUNS, 0, NULL},
    {"STOPPED", SLURM_RUNS, 0, NULL},
    {"SIGNALING", SLURM_RUNS, 0, NULL},
    {"STAGE_OUT", SLURM_RUNS, 0, NULL},
    {"RESIZING", SLURM_RUNS, 0, NULL},
    {"COMPLETED", SLURM_ENDED, 0, NULL},
    {"FAILED", SLURM_ENDED, 0, NULL},
    {"CANCELLED", SLURM_STOPPED, 1, "was cancelled outside cdigits (scancel by a user or an administrator)"},
    {"TIMEOUT", SLURM_STOPPED, 0, "was stopped by Slurm at its time limit (--slurm-time, or the partition's limit)"},
    {"NODE_FAIL", SLURM_STOPPED, 0, "ended because a node it ran on failed"},
    {"OUT_OF_MEMORY", SLURM_STOPPED, 0, "was stopped by Slurm for using more memory than it was given"},
    {"PREEMPTED", SLURM_STOPPED, 0, "was preempted by Slurm for a job of higher priority"},
    {"BOOT_FAIL", SLURM_STOPPED, 0, "could not start: its node failed to boot"},
    {"DEADLINE", SLURM_STOPPED, 0, "passed its deadline before it could run"},
    {"REVOKED", SLURM_STOPPED, 0, "was revoked by Slurm (it runs on another cluster of the federation)"},
    {"SPECIAL_EXIT", SLURM_STOPPED, 0, "was held by Slurm after a special exit"},
};

int slurm_phase(const char *state, const char **what, int *aborts)
{
    *what = NULL;
    *aborts = 0;
    for (size_t i = 0; i < CD_ARRAY_LEN(g_states); i++)
        if (strcmp(state, g_states[i].state) == 0) {
            *what = g_states[i].what;
            *aborts = g_states[i].aborts;
            return g_states[i].phase;
        }
    return -1;
}

/* ---- finding and running the Slurm programs -------------------------------------------- */

int slurm_init(sched_t *s, cd_err_t *err)
{
    const char *path = getenv("PATH");
    for (int k = 0; k < SLURM_TOOL_COUNT; k++) {
        s->slurm_tool[k][0] = 0;
        char dirs[8192];
        snprintf(dirs, sizeof dirs, "%s", path && path[0] ? path : "/usr/bin:/bin");
        char *save = NULL;
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            char cand[PATH_MAX];
            if ((size_t)snprintf(cand, sizeof cand, "%s/%s", d, g_tool_names[k]) >= sizeof cand)
                continue;
            if (access(cand, X_OK) == 0) {
                snprintf(s->slurm_tool[k], sizeof s->slurm_tool[k], "%s", cand);
                break;
            }
        }
        if (!s->slurm_tool[k][0]) {
            s->slurm_tool[0][0] = 0; /* not ready */
            return cd_err_set(err, CD_E_INVALID,
                              "--executor slurm: %s was not found on PATH (%s); install Slurm's client programs "
                              "(Debian: apt-get install slurm-client) or add their folder to PATH",
                              g_tool_names[k], path ? path : "unset");
        }
    }
    return CD_OK;
}

/* Runs argv (a Slurm program) with stdin from /dev/null and stdout and stderr together
 * into out (NUL-terminated, the end cut when longer, trailing newlines dropped). CD_OK
 * with its exit status (128 + the signal when killed); CD_ERR when it could not start
 * or did not answer within SLURM_CMD_TIMEOUT_S (it is killed then). */
static int slurm_run(char *const *argv, const char *dir, char *const *env, char *out, size_t len, int *exit_status,
                     cd_err_t *err)
{
    out[0] = 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot run %s: pipe: %s", argv[0], strerror(errno));
    sched_spawn_t sp = {
        .argv = argv,
        .dir = dir,
        .env = env,
        .fd = {{SCHED_FD_NULL}, {SCHED_FD_PIPE, NULL, p[1]}, {SCHED_FD_PIPE, NULL, p[1]}},
        .own_group = 1,
        .what = "the Slurm client",
        .hint = "install slurm-client and check SLURM_CONF",
    };
    pid_t pid;
    if (sched_spawn(&sp, &pid, err) != CD_OK) {
        close(p[0]);
        close(p[1]);
        return CD_ERR;
    }
    close(p[1]);
    size_t n = 0;
    int timed_out = 0;
    double deadline = cd_now() + SLURM_CMD_TIMEOUT_S;
    for (;;) {
        int ms = (int)((deadline - cd_now()) * 1000);
        if (ms <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int r = poll(&pf, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            timed_out = r == 0;
            break;
        }
        char buf[4096];
        ssize_t k = read(p[0], buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        size_t keep = (size_t)k < len - 1 - n ? (size_t)k : len - 1 - n;
        memcpy(out + n, buf, keep);
        n += keep;
    }
    close(p[0]);
    /* the output is closed; the client still has until the deadline to exit */
    int st = 0;
    pid_t r;
    for (;;) {
        r = timed_out ? 0 : waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        if (timed_out || cd_now() >= deadline) {
            timed_out = 1;
            kill(-pid, SIGKILL);
            do
                r = waitpid(pid, &st, 0);
            while (r < 0 && errno == EINTR);
            break;
        }
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    out[n] = 0;
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    if (timed_out)
        return cd_err_set(err, CD_E_INTERNAL,
                          "%s did not answer within %d s; check that slurmctld runs (scontrol ping) and that "
                          "SLURM_CONF names its slurm.conf",
                          argv[0], SLURM_CMD_TIMEOUT_S);
    if (r < 0)
        return cd_err_set(err, CD_E_INTERNAL, "%s: waitpid: %s", argv[0], strerror(errno));
    *exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return CD_OK;
}

/* ---- the batch script ---------------------------------------------------------------- */

/* Appends fmt to out at *n; CD_ERR when it does not fit. */
static int put(char *out, size_t len, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int put(char *out, size_t len, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out + *n, len - *n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= len - *n)
        return CD_ERR;
    *n += (size_t)k;
    return CD_OK;
}

/* One argument in single quotes for sh ('\'' for a quote inside). */
static int put_quoted(char *out, size_t len, size_t *n, const char *arg)
{
    if (put(out, len, n, " '") != CD_OK)
        return CD_ERR;
    for (const char *c = arg; *c; c++)
        if ((*c == '\'' ? put(out, len, n, "'\\''") : put(out, len, n, "%c", *c)) != CD_OK)
            return CD_ERR;
    return put(out, len, n, "'");
}

/* Whether a value can stand in an #SBATCH line: sbatch splits those at blanks, reads
 * quotes and expands % patterns in file names. */
static int sbatch_safe(const char *v) { return v[strcspn(v, " \t\n\r\"'\\%#")] == 0; }

static int job_gpus(const stask_t *t)
{
    return t->req.kind == SCHED_RES_GPU ? (t->req.nids ? t->req.nids : t->req.count) : 0;
}

/* Whether the worker runs as MPI ranks, one srun task each: more than one node, or
 * several ranks of a CPU job (one node's GPUs are one process, a thread per GPU). */
static int runs_ranks(const stask_t *t)
{
    return t->req.nodes > 1 || (job_gpus(t) == 0 && t->req.ranks_per_node > 1);
}

int slurm_script(const sched_config_t *cfg, const stask_t *t, char *const *argv, char *out, size_t len,
                 cd_err_t *err)
{
    const sched_slurm_opts_t *o = &cfg->slurm;
    const char *settings[][2] = {
        {"job folder", t->dir},
        {"--slurm-partition", o->partition ? o->partition : ""},
        {"--slurm-account", o->account ? o->account : ""},
        {"--slurm-time", o->time ? o->time : ""},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(settings); i++)
        if (!sbatch_safe(settings[i][1]))
            return cd_err_set(err, CD_E_INVALID,
                              "the %s \"%s\" cannot be written in a Slurm batch script (it has a blank, a quote, "
                              "a backslash, # or %%); choose one without",
                              settings[i][0], settings[i][1]);
    int gpus = job_gpus(t);
    size_t n = 0;
    int bad = put(out, len, &n,
                  "#!/bin/sh\n"
                  "# cdigits job %s, attempt %d: written by cdigits serve --executor slurm and submitted\n"
                  "# with sbatch --parsable. The worker's lines go to %s in the job folder,\n"
                  "# which the nodes and the server share (docs/cluster.md).\n"
                  "#SBATCH --job-name=cdigits-%s\n"
                  "#SBATCH --chdir=%s\n"
                  "#SBATCH --output=%s/%s\n"
                  "#SBATCH --error=%s/%s\n"
                  "#SBATCH --open-mode=append\n"
                  "#SBATCH --nodes=%d\n"
                  "#SBATCH --ntasks-per-node=%d\n"
                  "#SBATCH --cpus-per-task=%d\n"
                  "#SBATCH --no-requeue\n"
                  "#SBATCH --export=ALL\n",
                  t->job_id, t->attempt, jobdir_name(JOBDIR_WORKER_OUT), t->job_id, t->dir, t->dir,
                  jobdir_name(JOBDIR_WORKER_OUT), t->dir, jobdir_name(JOBDIR_WORKER_ERR),
                  t->req.nodes > 0 ? t->req.nodes : 1, t->req.ranks_per_node > 0 ? t->req.ranks_per_node : 1,
                  o->cpus_per_task > 0 ? o->cpus_per_task : 1);
    if (gpus > 0)
        bad |= put(out, len, &n, "#SBATCH --gpus-per-node=%d\n", gpus);
    static const char *const flags[] = {"partition", "account", "time"};
    const char *values[] = {o->partition, o->account, o->time};
    for (size_t i = 0; i < CD_ARRAY_LEN(flags); i++)
        if (values[i] && values[i][0])
            bad |= put(out, len, &n, "#SBATCH --%s=%s\n", flags[i], values[i]);
    /* exec: the worker is the batch step itself, so Slurm's signals and its exit code
     * are the worker's. Ranks as processes (more than one node, or several ranks of a
     * CPU job) are one srun step, each task a rank over PMIx; one node's GPUs are one
     * process, a thread per GPU (docs/architecture.md, data parallelism). */
    bad |= put(out, len, &n, runs_ranks(t) ? "exec srun --mpi=pmix" : "exec");
    for (int i = 0; argv[i]; i++)
        bad |= put_quoted(out, len, &n, argv[i]);
    bad |= put(out, len, &n, "\n");
    if (bad)
        return cd_err_set(err, CD_E_INTERNAL, "job %s: its Slurm batch script is longer than %zu bytes", t->job_id,
                          len);
    return CD_OK;
}

/* ---- what squeue and scontrol say --------------------------------------------------------- */

static void copy_field(char *dst, size_t len, const char *src, size_t n)
{
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

int slurm_parse_squeue(const char *line, slurm_view_t *v)
{
    memset(v, 0, sizeof *v);
    const char *a = strchr(line, '|'), *b = a ? strchr(a + 1, '|') : NULL;
    if (!a || !b || a == line)
        return CD_ERR;
    copy_field(v->state, sizeof v->state, line, (size_t)(a - line));
    copy_field(v->reason, sizeof v->reason, a + 1, (size_t)(b - a - 1));
    copy_field(v->nodes, sizeof v->nodes, b + 1, strcspn(b + 1, "\n"));
    if (strcmp(v->nodes, "(null)") == 0)
        v->nodes[0] = 0;
    return CD_OK;
}

/* The value of " KEY=" in scontrol's one-line output, up to the next blank. */
static int scontrol_field(const char *text, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = text; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p != text && p[-1] != ' ' && p[-1] != '\n') || p[kl] != '=')
            continue;
        const char *val = p + kl + 1;
        copy_field(out, len, val, strcspn(val, " \n"));
        return CD_OK;
    }
    out[0] = 0;
    return CD_ERR;
}

int slurm_parse_scontrol(const char *text, slurm_view_t *v)
{
    memset(v, 0, sizeof *v);
    if (scontrol_field(text, "JobState", v->state, sizeof v->state) != CD_OK || !v->state[0])
        return CD_ERR;
    scontrol_field(text, "Reason", v->reason, sizeof v->reason);
    scontrol_field(text, "NodeList", v->nodes, sizeof v->nodes);
    if (strcmp(v->nodes, "(null)") == 0)
        v->nodes[0] = 0;
    char code[32];
    if (scontrol_field(text, "ExitCode", code, sizeof code) == CD_OK &&
        sscanf(code, "%d:%d", &v->exit_code, &v->exit_signal) == 2)
        v->have_exit = 1;
    return CD_OK;
}

/* What Slurm says of t's job: 1 with v, -1 when Slurm does not know the job (any more),
 * 0 when it gave no answer (why in err). */
static int slurm_query(sched_t *s, stask_t *t, slurm_view_t *v, cd_err_t *err)
{
    char out[4096];
    int code;
    const char *what;
    int aborts;
    char *sq[] = {s->slurm_tool[SLURM_SQUEUE], "-h", "-j", t->slurm_id, "-o", "%T|%r|%N", NULL};
    if (slurm_run(sq, NULL, NULL, out, sizeof out, &code, err) == CD_OK && code == 0 &&
        slurm_parse_squeue(out, v) == CD_OK) {
        int phase = slurm_phase(v->state, &what, &aborts);
        if (phase == SLURM_WAITS || phase == SLURM_RUNS)
            return 1;
    }
    /* ended (or squeue had nothing to say): scontrol keeps a finished job for MinJobAge */
    char *sc[] = {s->slurm_tool[SLURM_SCONTROL], "show", "job", "-o", t->slurm_id, NULL};
    if (slurm_run(sc, NULL, NULL, out, sizeof out, &code, err) != CD_OK)
        return 0;
    if (code == 0 && slurm_parse_scontrol(out, v) == CD_OK)
        return 1;
    if (strstr(out, "Invalid job id"))
        return -1;
    cd_err_set(err, CD_E_INTERNAL, "scontrol show job %s exited with %d: %.300s", t->slurm_id, code, out);
    return 0;
}

/* Runs scancel for t: SIGTERM to a running job's worker (scancel --signal=TERM --full,
 * the worker being the batch step; ranks: to the srun step's tasks alone, as srun ends
 * its step at once on a SIGTERM of its own), or the end of the job (plain scancel,
 * which also stops a pending one). */
static void slurm_cancel(sched_t *s, stask_t *t, int sig)
{
    int term = sig == SIGTERM && strcmp(t->slurm_state, "PENDING") != 0;
    char *term_argv[] = {s->slurm_tool[SLURM_SCANCEL], "--signal=TERM", "--full", t->slurm_id, NULL};
    char *ranks_argv[] = {s->slurm_tool[SLURM_SCANCEL], "--signal=TERM", t->slurm_id, NULL};
    char *kill_argv[] = {s->slurm_tool[SLURM_SCANCEL], t->slurm_id, NULL};
    char **argv = !term ? kill_argv : runs_ranks(t) ? ranks_argv : term_argv;
    char out[2048];
    int code = 0;
    cd_err_t err;
    cd_info("job %s: %s Slurm job %s", t->job_id, term ? "scancel --signal=TERM" : "scancel", t->slurm_id);
    if (slurm_run(argv, NULL, NULL, out, sizeof out, &code, &err) != CD_OK)
        cd_warn("job %s: scancel of Slurm job %s: %s", t->job_id, t->slurm_id, err.msg);
    else if (code != 0)
        cd_warn("job %s: scancel of Slurm job %s exited with %d: %s", t->job_id, t->slurm_id, code, out);
}

/* ---- the executor ----------------------------------------------------------------------- */

static int touch(const char *dir, jobdir_file f, cd_err_t *err)
{
    char path[PATH_MAX];
    jobdir_path(dir, f, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot create %s: %s", path, strerror(errno));
    close(fd);
    return CD_OK;
}

static int slurm_submit(sched_t *s, stask_t *t, char *const *argv, cd_err_t *err)
{
    if (!s->slurm_tool[0][0] && slurm_init(s, err) != CD_OK)
        return CD_ERR;
    char script[16384], path[PATH_MAX];
    if (slurm_script(&s->cfg, t, argv, script, sizeof script, err) != CD_OK)
        return CD_ERR;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", t->dir, SLURM_SCRIPT) >= sizeof path)
        return cd_err_set(err, CD_E_INVALID, "job folder %s: its path is too long", t->dir);
    if (cd_write_file_atomic(path, script, strlen(script)) != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    /* the reader opens them before Slurm starts the job */
    if (touch(t->dir, JOBDIR_WORKER_OUT, err) != CD_OK || touch(t->dir, JOBDIR_WORKER_ERR, err) != CD_OK)
        return CD_ERR;
    char **env = spawn_worker_env(); /* sbatch --export=ALL hands it to the worker */
    if (!env)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory submitting job %s", t->job_id);
    char *av[] = {s->slurm_tool[SLURM_SBATCH], "--parsable", path, NULL};
    char out[2048];
    int code = 0;
    int rc = slurm_run(av, t->dir, env, out, sizeof out, &code, err);
    free(env);
    if (rc != CD_OK)
        return CD_ERR;
    /* --parsable prints "ID" or "ID;CLUSTER" on a line of its own; a note on stderr may
     * come before or after it */
    const char *id = NULL;
    size_t digits = 0;
    for (const char *line = out; code == 0 && line && *line;) {
        size_t d = strspn(line, "0123456789");
        if (d && (line[d] == 0 || line[d] == ';' || line[d] == '\n' || line[d] == '\r'))
            id = line, digits = d;
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    if (code != 0 || !id || digits >= sizeof t->slurm_id)
        return cd_err_set(err, CD_E_INVALID, "sbatch refused %s (exit status %d): %.600s", path, code, out);
    copy_field(t->slurm_id, sizeof t->slurm_id, id, digits);
    t->pending = 1;
    snprintf(t->slurm_state, sizeof t->slurm_state, "PENDING");
    t->nodes[0] = 0;
    t->slurm_end[0] = 0;
    t->slurm_aborts = 0;
    t->slurm_failures = 0;
    t->slurm_polled = 0;

    cd_err_t e2;
    if (store_task_set_process(s->store, t->task_id, 0, 0, "[]", t->attempt, &e2) != CD_OK ||
        store_task_set_slurm(s->store, t->task_id, t->slurm_id, NULL, &e2) != CD_OK)
        cd_warn("job %s: %s", t->job_id, e2.msg);
    char msg[PATH_MAX + 128];
    snprintf(msg, sizeof msg, "Submitted to Slurm as job %s (%s)", t->slurm_id, path);
    store_log_add(s->store, t->job_id, t->task_id, "info", msg, NULL);
    cd_info("job %s: %s (attempt %d)", t->job_id, msg, t->attempt);
    snprintf(msg, sizeof msg, "Submitted to Slurm as job %s; waiting for Slurm to start it", t->slurm_id);
    sched_set_wait_reason(s, t, msg);
    return CD_OK;
}

/* The wait status of an ended job, from scontrol's ExitCode=code:signal. */
static int ended_status(const slurm_view_t *v, int phase)
{
    if (v->have_exit && v->exit_signal > 0)
        return v->exit_signal & 0x7f;
    if (phase == SLURM_ENDED)
        return (v->have_exit ? v->exit_code & 0xff : 1) << 8;
    return SIGTERM; /* stopped by Slurm: reads as killed by SIGTERM */
}

static int slurm_poll(sched_t *s, stask_t *t, int *status)
{
    pthread_mutex_lock(&s->lock);
    int sig = t->slurm_signal;
    t->slurm_signal = 0;
    pthread_mutex_unlock(&s->lock);
    if (sig)
        slurm_cancel(s, t, sig);
    double now = cd_now();
    if (!sig && now - t->slurm_polled < SLURM_POLL_S)
        return 0;
    t->slurm_polled = now;

    slurm_view_t v;
    cd_err_t err;
    int known = slurm_query(s, t, &v, &err);
    if (known == 0) {
        if (t->slurm_failures++ % 60 == 0)
            cd_warn("job %s: cannot learn the state of Slurm job %s: %s", t->job_id, t->slurm_id, err.msg);
        return 0;
    }
    t->slurm_failures = 0;
    char msg[1024];
    if (known < 0) {
        /* gone from slurmctld's memory (MinJobAge): its lines tell how it ended */
        snprintf(msg, sizeof msg, "Slurm no longer knows job %s; its last lines tell how it ended", t->slurm_id);
        store_log_add(s->store, t->job_id, t->task_id, "warning", msg, NULL);
        t->adopted = 1;
        *status = 0;
        return 1;
    }
    const char *what;
    int aborts;
    int phase = slurm_phase(v.state, &what, &aborts);
    int changed = strcmp(v.state, t->slurm_state) != 0;
    snprintf(t->slurm_state, sizeof t->slurm_state, "%s", v.state);
    if (phase == SLURM_WAITS) {
        snprintf(msg, sizeof msg, "Slurm job %s is %s: %s", t->slurm_id, v.state,
                 v.reason[0] && strcmp(v.reason, "None") != 0 ? v.reason : "waiting for its turn");
        pthread_mutex_lock(&s->lock);
        t->pending = 1;
        sched_set_wait_reason(s, t, msg);
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    if (v.nodes[0] && strcmp(v.nodes, t->nodes) != 0) {
        snprintf(t->nodes, sizeof t->nodes, "%s", v.nodes);
        store_task_set_slurm(s->store, t->task_id, t->slurm_id, t->nodes, NULL);
    }
    if (phase == SLURM_RUNS || phase < 0) {
        pthread_mutex_lock(&s->lock);
        int was_pending = t->pending;
        t->pending = 0;
        pthread_mutex_unlock(&s->lock);
        if (was_pending) {
            /* its silence while it waited was not a hang */
            __atomic_store_n(&t->last_output_ms, (long long)(now * 1000), __ATOMIC_RELAXED);
            snprintf(msg, sizeof msg, "Running as Slurm job %s on %s", t->slurm_id,
                     t->nodes[0] ? t->nodes : "its nodes");
            store_log_add(s->store, t->job_id, t->task_id, "info", msg, NULL);
            sched_set_state(s, t->job_id, t->task_id, CD_ST_RUN, msg);
            cd_info("job %s: %s", t->job_id, msg);
        } else if (changed && phase < 0) {
            cd_warn("job %s: Slurm job %s is in state %s, which cdigits does not know; following it on", t->job_id,
                    t->slurm_id, v.state);
        }
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    int never_seen = t->pending;
    t->pending = 0;
    pthread_mutex_unlock(&s->lock);
    if (never_seen && t->nodes[0]) {
        /* it ran between two looks */
        snprintf(msg, sizeof msg, "Ran as Slurm job %s on %s", t->slurm_id, t->nodes);
        store_log_add(s->store, t->job_id, t->task_id, "info", msg, NULL);
    }
    *status = ended_status(&v, phase);
    snprintf(msg, sizeof msg, "Slurm job %s ended %s (exit code %d:%d%s%s)", t->slurm_id, v.state, v.exit_code,
             v.exit_signal, v.reason[0] && strcmp(v.reason, "None") != 0 ? ", reason " : "",
             v.reason[0] && strcmp(v.reason, "None") != 0 ? v.reason : "");
    store_log_add(s->store, t->job_id, t->task_id, phase == SLURM_ENDED ? "info" : "warning", msg, NULL);
    cd_info("job %s: %s", t->job_id, msg);
    if (phase == SLURM_STOPPED) {
        snprintf(t->slurm_end, sizeof t->slurm_end, "Slurm job %s %s (Slurm: %s%s%s).", t->slurm_id, what, v.state,
                 v.reason[0] && strcmp(v.reason, "None") != 0 ? ", " : "",
                 v.reason[0] && strcmp(v.reason, "None") != 0 ? v.reason : "");
        t->slurm_aborts = aborts;
    }
    return 1;
}

/* The reader thread passes the signal to scancel: scancel must not run under the lock. */
static void slurm_signal(sched_t *s, stask_t *t, int sig)
{
    (void)s;
    if (t->slurm_signal != SIGKILL)
        t->slurm_signal = sig;
}

static int slurm_exit_fd(const stask_t *t)
{
    (void)t;
    return -1;
}

static void slurm_abandon(sched_t *s, stask_t *t)
{
    slurm_cancel(s, t, SIGKILL);
    t->slurm_id[0] = 0;
}

const sched_executor_t sched_exec_slurm = {
    .name = "slurm",
    .uses_pool = 0,
    .submit = slurm_submit,
    .poll = slurm_poll,
    .signal = slurm_signal,
    .exit_fd = slurm_exit_fd,
    .abandon = slurm_abandon,
    .idle_poll_ms = 250,
};
