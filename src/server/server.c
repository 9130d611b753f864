/* The server's life: open the data folder and the store, find the GPUs, recover what a
 * crash left, start the scheduler, the HTTP daemon and the monitor, wait for SIGINT or
 * SIGTERM, then stop in the reverse order. */
#define _GNU_SOURCE
#include "cdigits/model_server.h"
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdigits/util.h"

static int setup_dirs(server_t *srv, cd_err_t *err)
{
    const cd_server_config_t *cfg = &srv->cfg;
    char jobs[PATH_MAX + 8];
    snprintf(jobs, sizeof jobs, "%s/jobs", cfg->data_dir);
    if (cd_mkdirs(jobs, 0755) != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot create %s: %s; choose another --data folder", jobs,
                          strerror(errno));
    if (!realpath(jobs, srv->jobs_dir))
        return cd_err_set(err, CD_E_INTERNAL, "cannot resolve %s: %s", jobs, strerror(errno));
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s/tmp", cfg->data_dir); /* uploaded images, while they are classified */
    if (cd_mkdirs(tmp, 0700) != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "cannot create %s: %s", tmp, strerror(errno));
    size_t used = 0;
    for (int i = 0; i <= cfg->ndata_roots; i++) {
        const char *root = i < cfg->ndata_roots ? cfg->data_roots[i] : (cfg->ndata_roots ? NULL : cfg->data_dir);
        if (!root)
            break;
        char real[PATH_MAX];
        if (!realpath(root, real))
            return cd_err_set(err, CD_E_INVALID, "--data-root %s: %s; give an existing folder", root, strerror(errno));
        struct stat st;
        if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
            return cd_err_set(err, CD_E_INVALID, "--data-root %s is not a folder", root);
        snprintf(srv->roots[srv->nroots++], PATH_MAX, "%s", real);
        used += (size_t)snprintf(srv->roots_text + used, used < sizeof srv->roots_text ? sizeof srv->roots_text - used : 0,
                                 "%s%s", used ? ", " : "", real);
    }
    return CD_OK;
}

/* --gpus: auto (NVML), none, or a list. */
static int pick_gpus(server_t *srv, sched_config_t *sc, cd_err_t *err)
{
    const char *g = srv->cfg.gpus;
    sc->ngpus = 0;
    if (strcmp(g, "auto") == 0) {
        int n = hw_gpu_count(srv->hw);
        for (int i = 0; i < n && i < SCHED_MAX_GPUS; i++)
            sc->gpu_ids[sc->ngpus++] = i;
        return CD_OK;
    }
    if (strcmp(g, "none") == 0 || !g[0])
        return CD_OK;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", g);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t || *end || v < 0 || v >= SCHED_MAX_GPUS || sc->ngpus >= SCHED_MAX_GPUS)
            return cd_err_set(err, CD_E_INVALID, "--gpus %s: \"%s\" is not a GPU number; use auto, none or 0,1", g, t);
        sc->gpu_ids[sc->ngpus++] = (int)v;
    }
    return CD_OK;
}

/* Refuses a --port another listener holds, before the store is opened and crashed jobs
 * are recovered: a second server must neither share the port (the two would split the
 * connections) nor stop the first one's workers. A probe bound with SO_REUSEADDR alone,
 * as the daemon's own socket is, so a port whose old connections linger in TIME_WAIT
 * passes. --port 0 asks the kernel for a free port and is never in use. */
static int check_port(const cd_server_config_t *cfg, cd_err_t *err)
{
    if (cfg->port == 0)
        return CD_OK;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1)
        return cd_err_set(err, CD_E_INVALID, "--bind %s is not an IPv4 address; use e.g. 127.0.0.1 or 0.0.0.0",
                          cfg->bind);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot open a socket to check port %d: %s", cfg->port,
                          strerror(errno));
    int one = 1, rc = CD_OK;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        rc = cd_err_set(err, CD_E_INTERNAL, "cannot set SO_REUSEADDR to check port %d: %s", cfg->port,
                        strerror(errno));
    else if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 1) != 0) {
        if (errno == EADDRINUSE)
            rc = cd_err_set(err, CD_E_CONFLICT,
                            "port %d is in use on %s (another cdigits serve or another program listens there); "
                            "start this server with another --port (--port 0 picks a free one), or stop the other "
                            "server first",
                            cfg->port, cfg->bind);
        else if (errno == EACCES)
            rc = cd_err_set(err, CD_E_FORBIDDEN,
                            "port %d on %s needs privileges this user lacks; use a --port above 1023", cfg->port,
                            cfg->bind);
        else
            rc = cd_err_set(err, CD_E_INTERNAL, "cannot listen on %s:%d: %s; check --bind and --port", cfg->bind,
                            cfg->port, strerror(errno));
    }
    close(fd);
    return rc;
}

static int write_port_file(const server_t *srv)
{
    if (!srv->cfg.port_file[0])
        return CD_OK;
    char text[32];
    int n = snprintf(text, sizeof text, "%d\n", srv->cfg.port);
    if (cd_write_file_atomic(srv->cfg.port_file, text, (size_t)n) != CD_OK) {
        cd_error("cannot write --port-file %s: %s", srv->cfg.port_file, strerror(errno));
        return CD_ERR;
    }
    return CD_OK;
}

int server_run(const cd_server_config_t *cfg)
{
    server_t *srv = calloc(1, sizeof *srv);
    if (!srv) {
        fprintf(stderr, "cdigits: out of memory\n");
        return 1;
    }
    srv->cfg = *cfg;
    pthread_mutex_init(&srv->hw_lock, NULL);
    pthread_mutex_init(&srv->monitor_lock, NULL);
    pthread_mutex_init(&srv->index_lock, NULL);
    pthread_cond_init(&srv->monitor_cond, NULL);
    int status = 1;
    cd_err_t err = {0};
    FILE *logf = NULL;
    cd_log_set_level(cfg->log_level);
    if (cfg->log_file[0]) {
        logf = fopen(cfg->log_file, "a");
        if (!logf) {
            fprintf(stderr, "cdigits: cannot open --log-file %s: %s\n", cfg->log_file, strerror(errno));
            goto out;
        }
        cd_log_set_file(logf);
    }

    /* every thread started from here on inherits the blocked set; main waits for them */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (check_port(cfg, &err) != CD_OK || setup_dirs(srv, &err) != CD_OK)
        goto fail;
    char dbpath[PATH_MAX + 16];
    snprintf(dbpath, sizeof dbpath, "%s/cdigits.db", cfg->data_dir);
    if (store_open(dbpath, &srv->store, &err) != CD_OK)
        goto fail;
    srv->events = events_new(4096);
    srv->hw = hw_open(NULL, 0);
    if (!srv->events || !srv->hw) {
        cd_err_set(&err, CD_E_INTERNAL, "out of memory");
        goto fail;
    }
    char dev[PATH_MAX];
    if (hw_nvml_loaded(srv->hw))
        cd_info("%d GPU%s found by NVML", hw_gpu_count(srv->hw), hw_gpu_count(srv->hw) == 1 ? "" : "s");
    else if (hw_nvidia_device(NULL, dev, sizeof dev))
        /* a driver is installed, so GPUs were meant to be here: say why none are seen */
        cd_warn("%s exists but NVML is not loaded: %s; with --gpus auto no GPU is scheduled and GPU requests "
                "are refused. Check that the NVIDIA driver's libnvidia-ml.so.1 matches the kernel module and is "
                "on the library path, and that this user may open %s (or start the server with --gpus none)",
                dev, hw_nvml_reason(srv->hw), dev);
    else
        cd_info("%s", hw_nvml_reason(srv->hw));

    sched_config_t sc = {
        .worker = srv->cfg.worker,
        .cpu_slots = cfg->cpu_slots,
        .dataset_slots = cfg->dataset_slots,
        .inference_slots = cfg->inference_slots,
        .abort_grace = cfg->abort_grace,
        .models = {.idle_s = cfg->model_idle, .max_workers = cfg->model_workers, .threads = cfg->model_threads},
        .executor = cfg->executor_slurm ? SCHED_EXEC_SLURM : SCHED_EXEC_LOCAL,
        .slurm = {srv->cfg.slurm_partition, srv->cfg.slurm_account, srv->cfg.slurm_time, cfg->slurm_cpus_per_task},
    };
    if (pick_gpus(srv, &sc, &err) != CD_OK)
        goto fail;
    memcpy(srv->gpu_ids, sc.gpu_ids, sizeof srv->gpu_ids);
    srv->ngpu_ids = sc.ngpus;
    if (access(srv->cfg.worker, X_OK) != 0)
        cd_warn("the worker %s cannot be run (%s): jobs will fail until it is built; pass --worker PATH",
                srv->cfg.worker, strerror(errno));
    if (sched_new(&sc, srv->store, srv->events, &srv->sched, &err) != CD_OK)
        goto fail;
    if (sched_recover(srv->sched, cfg->resume_interrupted, &err) != CD_OK)
        goto fail;
    if (sched_start(srv->sched, &err) != CD_OK)
        goto fail;
    if (http_start(srv, &err) != CD_OK)
        goto fail;
    if (monitor_start(srv, &err) != CD_OK)
        goto fail;
    write_port_file(srv);
    cd_info("cdigits %s listening on http://%s:%d%s/ (data %s, worker %s, %d GPU%s scheduled)", CDIGITS_VERSION,
            srv->cfg.bind, srv->cfg.port, srv->cfg.url_prefix, srv->cfg.data_dir, srv->cfg.worker, sc.ngpus,
            sc.ngpus == 1 ? "" : "s");

    int sig = 0;
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP)
        cd_info("SIGHUP ignored; stop the server with SIGINT or SIGTERM");
    cd_info("signal %d: stopping (running workers get SIGTERM and are resumable)", sig);
    status = 0;
    goto stop;
fail:
    cd_error("%s", err.msg);
    fprintf(stderr, "cdigits serve: %s\n", err.msg);
stop:
    srv->stopping = 1;
    if (srv->events)
        events_close(srv->events);
    if (srv->mhd) {
        MHD_quiesce_daemon(srv->mhd);
    }
    monitor_stop(srv);
    if (srv->sched)
        model_server_stop(model_server_get(srv->sched)); /* warm inference workers first */
    sched_free(srv->sched);
    http_stop(srv);
    hw_close(srv->hw);
    events_free(srv->events);
    store_close(srv->store);
    json_decref(srv->hw_latest);
    cd_info("stopped");
out:
    if (logf) {
        cd_log_set_file(NULL);
        fclose(logf);
    }
    pthread_cond_destroy(&srv->monitor_cond);
    pthread_mutex_destroy(&srv->monitor_lock);
    pthread_mutex_destroy(&srv->index_lock);
    free(srv->index_body);
    pthread_mutex_destroy(&srv->hw_lock);
    free(srv);
    return status;
}
