/* The hardware monitor: once per interval, GPU figures from NVML and CPU % and resident
 * memory of every running worker from /proc, published on each job's event stream and
 * kept for GET /hardware/json. */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "cdigits/util.h"

#define MAX_PROCS 256

typedef struct sample {
    pid_t pid;
    unsigned long long ticks;
    double at;
} sample_t;

static json_t *gpu_subset(json_t *gpus, const sched_proc_t *p)
{
    json_t *out = json_array();
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        int idx = (int)json_integer_value(json_object_get(g, "index"));
        for (int k = 0; k < p->ngpus; k++)
            if (p->gpus[k] == idx)
                json_array_append(out, g);
    }
    return out;
}

static void monitor_once(server_t *srv, sample_t *prev, int *nprev)
{
    json_t *gpus = hw_gpus_json(srv->hw);
    sched_proc_t procs[MAX_PROCS];
    int n = sched_running(srv->sched, procs, MAX_PROCS);
    sample_t now_samples[MAX_PROCS];
    int nnow = 0;
    double now = cd_now(), hz = (double)proc_ticks_per_sec();
    json_t *workers = json_array();
    for (int i = 0; i < n; i++) {
        unsigned long long ticks, rss;
        if (proc_usage(procs[i].pid, &ticks, &rss) != CD_OK)
            continue;
        json_t *cpu = json_null();
        for (int k = 0; k < *nprev; k++)
            if (prev[k].pid == procs[i].pid && now > prev[k].at && ticks >= prev[k].ticks) {
                cpu = json_real(100.0 * (double)(ticks - prev[k].ticks) / hz / (now - prev[k].at));
                break;
            }
        now_samples[nnow++] = (sample_t){procs[i].pid, ticks, now};
        json_t *gl = json_array();
        for (int k = 0; k < procs[i].ngpus; k++)
            json_array_append_new(gl, json_integer(procs[i].gpus[k]));
        json_t *w = json_pack("{s:s, s:i, s:o, s:I, s:o}", "job_id", procs[i].job_id, "pid", (int)procs[i].pid,
                              "cpu_percent", cpu, "rss_bytes", (json_int_t)rss, "gpus", gl);
        json_array_append(workers, w);
        json_t *ev = json_pack("{s:[O], s:o}", "processes", w, "gpus", gpu_subset(gpus, &procs[i]));
        events_publish_job(srv->events, procs[i].job_id, "hw", ev, 0);
        json_decref(ev);
        json_decref(w);
    }
    memcpy(prev, now_samples, sizeof(sample_t) * (size_t)nnow);
    *nprev = nnow;
    if (json_array_size(gpus)) {
        json_t *ev = json_pack("{s:O}", "gpus", gpus);
        events_publish(srv->events, "home", "hw", ev);
        json_decref(ev);
    }
    json_t *latest = json_pack("{s:o, s:o, s:f}", "gpus", gpus, "workers", workers, "time", cd_wall_time());
    pthread_mutex_lock(&srv->hw_lock);
    json_decref(srv->hw_latest);
    srv->hw_latest = latest;
    pthread_mutex_unlock(&srv->hw_lock);
}

static void *monitor_thread(void *arg)
{
    server_t *srv = arg;
    static sample_t prev[MAX_PROCS];
    int nprev = 0;
    double interval = srv->cfg.monitor_interval > 0 ? srv->cfg.monitor_interval : 1.0;
    pthread_mutex_lock(&srv->monitor_lock);
    while (!srv->stopping) {
        pthread_mutex_unlock(&srv->monitor_lock);
        monitor_once(srv, prev, &nprev);
        pthread_mutex_lock(&srv->monitor_lock);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)(interval * 1e9);
        ts.tv_sec += ns / 1000000000LL;
        ts.tv_nsec = ns % 1000000000LL;
        while (!srv->stopping && pthread_cond_timedwait(&srv->monitor_cond, &srv->monitor_lock, &ts) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&srv->monitor_lock);
    return NULL;
}

int monitor_start(server_t *srv, cd_err_t *err)
{
    int rc = pthread_create(&srv->monitor, NULL, monitor_thread, srv);
    if (rc != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot start the hardware monitor: %s", strerror(rc));
    srv->monitor_started = 1;
    return CD_OK;
}

void monitor_stop(server_t *srv)
{
    if (!srv->monitor_started)
        return;
    pthread_mutex_lock(&srv->monitor_lock);
    srv->stopping = 1;
    pthread_cond_broadcast(&srv->monitor_cond);
    pthread_mutex_unlock(&srv->monitor_lock);
    pthread_join(srv->monitor, NULL);
    srv->monitor_started = 0;
}
