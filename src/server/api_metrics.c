/* GET /metrics: the server in Prometheus's text exposition format (version 0.0.4) for
 * a scrape: jobs by type and state, how long jobs waited in the queue, the scheduler's
 * workers, each GPU from the hardware monitor's latest sample, the throughput of the
 * running trainings, and the HTTP requests by route. docs/monitoring.md lists every
 * metric with its type and labels.
 *
 * The families are one table; each row's writer prints the samples under the HELP and
 * TYPE lines the table gives. A family without samples (no GPU, no running training)
 * still has its HELP and TYPE. Jobs are the ones the asker may read, as /index/json
 * shows them (--job-visibility own); the GPU and HTTP figures are the server's. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/model_server.h"
#include "cdigits/util.h"
#include "html.h"

#define METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"

static const char *const g_job_types[] = {"dataset", "model"};
#define NTYPES ((int)CD_ARRAY_LEN(g_job_types))

/* queue waits: seconds from a job's Waiting entry to the Running entry after it */
static const double g_wait_bounds[] = {1, 5, 15, 60, 300, 900, 3600, 14400, 86400};
#define NWAIT ((int)CD_ARRAY_LEN(g_wait_bounds))

typedef struct scrape {
    req_t *r;
    server_t *srv;
    html_t h;
    double now;               /* wall-clock seconds, as the store's history keeps time */
    json_t *jobs;             /* the jobs the asker may read (store_job_list's shape) */
    /* from the status histories, per job type */
    uint64_t wait_bucket[NTYPES][NWAIT + 1]; /* not cumulative; the last is above every bound */
    double wait_sum[NTYPES];
    double oldest_wait[NTYPES]; /* age of the oldest job now Waiting; 0 when none waits */
} scrape_t;

typedef struct family family_t;
struct family {
    const char *name, *type, *help;
    void (*samples)(scrape_t *s, const family_t *f);
};

/* ---- writing ------------------------------------------------------------------------- */

static int type_index(const char *type)
{
    for (int i = 0; i < NTYPES; i++)
        if (strcmp(type, g_job_types[i]) == 0)
            return i;
    return -1;
}

static const char *jstr(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* A label value with the three escapes of the format: \\, \" and \n. */
static void put_label_value(html_t *h, const char *v)
{
    static const struct {
        char c;
        const char *esc;
    } escapes[] = {{'\\', "\\\\"}, {'"', "\\\""}, {'\n', "\\n"}};
    for (const char *p = v; *p; p++) {
        const char *esc = NULL;
        for (size_t i = 0; i < CD_ARRAY_LEN(escapes); i++)
            if (escapes[i].c == *p)
                esc = escapes[i].esc;
        char one[2] = {*p, 0};
        html_raw(h, esc ? esc : one);
    }
}

/* name{k1="v1",k2="v2"} value: labels is a NULL-ended list of key, value pairs (NULL
 * for none), suffix goes after the name ("_bucket", "_sum", ""). */
static void put_sample(html_t *h, const char *name, const char *suffix, const char *const *labels, double value)
{
    html_raw(h, name);
    html_raw(h, suffix);
    if (labels && labels[0]) {
        html_raw(h, "{");
        for (int i = 0; labels[i]; i += 2) {
            html_raw(h, i ? "," : "");
            html_raw(h, labels[i]);
            html_raw(h, "=\"");
            put_label_value(h, labels[i + 1]);
            html_raw(h, "\"");
        }
        html_raw(h, "}");
    }
    if (isnan(value))
        html_raw(h, " NaN\n");
    else if (isinf(value))
        html_raw(h, value > 0 ? " +Inf\n" : " -Inf\n");
    else if (value == floor(value) && fabs(value) < 1e15)
        html_printf(h, " %.0f\n", value);
    else
        html_printf(h, " %.9g\n", value);
}

/* A histogram's samples: bucket[i] observations fell in bucket i alone (nb bounds, then
 * one above them all); labels as put_sample's, with room left for "le" at its end. */
static void put_histogram(html_t *h, const char *name, const char **labels, int nlabels, const double *bounds, int nb,
                          const uint64_t *bucket, double sum)
{
    char le[32];
    labels[nlabels] = "le";
    labels[nlabels + 1] = le;
    labels[nlabels + 2] = NULL;
    uint64_t cum = 0;
    for (int i = 0; i <= nb; i++) {
        cum += bucket[i];
        if (i < nb)
            snprintf(le, sizeof le, "%.9g", bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        put_sample(h, name, "_bucket", labels, (double)cum);
    }
    labels[nlabels] = NULL;
    put_sample(h, name, "_sum", labels, sum);
    put_sample(h, name, "_count", labels, (double)cum);
}

/* ---- the families ---------------------------------------------------------------------- */

static void s_build_info(scrape_t *s, const family_t *f)
{
    const char *labels[] = {"version", CDIGITS_VERSION, NULL};
    put_sample(&s->h, f->name, "", labels, 1);
}

static void s_jobs(scrape_t *s, const family_t *f)
{
    int count[NTYPES][CD_ST_COUNT] = {{0}};
    size_t i;
    json_t *j;
    json_array_foreach(s->jobs, i, j)
    {
        int t = type_index(jstr(j, "type"));
        int st = (int)json_integer_value(json_object_get(j, "state"));
        if (t >= 0 && st >= 0 && st < CD_ST_COUNT)
            count[t][st]++;
    }
    for (int t = 0; t < NTYPES; t++)
        for (int st = 0; st < CD_ST_COUNT; st++) {
            const char *labels[] = {"type", g_job_types[t], "state", cd_state_name(st), NULL};
            put_sample(&s->h, f->name, "", labels, count[t][st]);
        }
}

/* Reads every readable job's status history once: one observation per start (a
 * Running entry whose previous entry is Waiting), and the oldest job waiting now. */
static void read_waits(scrape_t *s)
{
    size_t i;
    json_t *j;
    json_array_foreach(s->jobs, i, j)
    {
        int t = type_index(jstr(j, "type"));
        if (t < 0)
            continue;
        json_t *hist = store_job_history(s->srv->store, jstr(j, "id"));
        double waiting_since = -1;
        size_t k;
        json_t *e;
        json_array_foreach(hist, k, e)
        {
            int st = cd_state_from_code(json_string_value(json_array_get(e, 0)));
            double at = json_number_value(json_array_get(e, 1));
            if (st == CD_ST_RUN && waiting_since >= 0) {
                double w = at > waiting_since ? at - waiting_since : 0;
                int b = 0;
                while (b < NWAIT && w > g_wait_bounds[b])
                    b++;
                s->wait_bucket[t][b]++;
                s->wait_sum[t] += w;
            }
            waiting_since = st == CD_ST_WAIT ? at : -1;
        }
        json_decref(hist);
        int st = (int)json_integer_value(json_object_get(j, "state"));
        if (st == CD_ST_WAIT && waiting_since >= 0 && s->now - waiting_since > s->oldest_wait[t])
            s->oldest_wait[t] = s->now - waiting_since;
    }
}

static void s_queue_wait(scrape_t *s, const family_t *f)
{
    for (int t = 0; t < NTYPES; t++) {
        const char *labels[6] = {"type", g_job_types[t]};
        put_histogram(&s->h, f->name, labels, 2, g_wait_bounds, NWAIT, s->wait_bucket[t], s->wait_sum[t]);
    }
}

static void s_oldest_wait(scrape_t *s, const family_t *f)
{
    for (int t = 0; t < NTYPES; t++) {
        const char *labels[] = {"type", g_job_types[t], NULL};
        put_sample(&s->h, f->name, "", labels, s->oldest_wait[t]);
    }
}

static void s_workers(scrape_t *s, const family_t *f)
{
    json_t *res = sched_resources(s->srv->sched);
    put_sample(&s->h, f->name, "", NULL, (double)json_integer_value(json_object_get(res, "running")));
    json_decref(res);
}

static void s_queued(scrape_t *s, const family_t *f)
{
    json_t *res = sched_resources(s->srv->sched);
    put_sample(&s->h, f->name, "", NULL, (double)json_integer_value(json_object_get(res, "queued")));
    json_decref(res);
}

static void s_inference_workers(scrape_t *s, const family_t *f)
{
    json_t *w = model_server_workers(model_server_get(s->srv->sched));
    int busy = 0, idle = 0;
    size_t i;
    json_t *x;
    json_array_foreach(w, i, x)
    {
        if (json_is_true(json_object_get(x, "busy")))
            busy++;
        else
            idle++;
    }
    json_decref(w);
    const char *lb[] = {"state", "busy", NULL}, *li[] = {"state", "idle", NULL};
    put_sample(&s->h, f->name, "", lb, busy);
    put_sample(&s->h, f->name, "", li, idle);
}

/* One sample per GPU of the monitor's latest sample: the number under key (and sub:
 * "utilization" "gpu", "memory" "used", "temperature" NULL); a GPU whose NVML did not
 * give it has none. */
static void gpu_samples(scrape_t *s, const family_t *f, const char *key, const char *sub)
{
    pthread_mutex_lock(&s->srv->hw_lock);
    json_t *gpus = json_deep_copy(json_object_get(s->srv->hw_latest, "gpus"));
    pthread_mutex_unlock(&s->srv->hw_lock);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_t *v = json_object_get(g, key);
        if (sub)
            v = json_object_get(v, sub);
        if (!json_is_number(v))
            continue;
        char idx[24];
        snprintf(idx, sizeof idx, "%lld", (long long)json_integer_value(json_object_get(g, "index")));
        const char *labels[] = {"gpu", idx, "name", jstr(g, "name"), NULL};
        put_sample(&s->h, f->name, "", labels, json_number_value(v));
    }
    json_decref(gpus);
}

static void s_gpu_util(scrape_t *s, const family_t *f) { gpu_samples(s, f, "utilization", "gpu"); }
static void s_gpu_mem_used(scrape_t *s, const family_t *f) { gpu_samples(s, f, "memory", "used"); }
static void s_gpu_mem_total(scrape_t *s, const family_t *f) { gpu_samples(s, f, "memory", "total"); }
static void s_gpu_temp(scrape_t *s, const family_t *f) { gpu_samples(s, f, "temperature", NULL); }

/* The last value of the train-phase metric name of every Running model (the trainer
 * reports images_per_sec and data_wait once per reporting window). */
static void training_samples(scrape_t *s, const family_t *f, const char *metric)
{
    size_t i;
    json_t *j;
    json_array_foreach(s->jobs, i, j)
    {
        if (strcmp(jstr(j, "type"), "model") != 0 ||
            (int)json_integer_value(json_object_get(j, "state")) != CD_ST_RUN)
            continue;
        json_t *sum = store_metric_summary(s->srv->store, jstr(j, "id"));
        size_t k;
        json_t *m;
        json_array_foreach(sum, k, m)
        {
            json_t *last = json_object_get(m, "last");
            if (strcmp(jstr(m, "phase"), "train") == 0 && strcmp(jstr(m, "name"), metric) == 0 &&
                json_is_number(last)) {
                const char *labels[] = {"job_id", jstr(j, "id"), "name", jstr(j, "name"), NULL};
                put_sample(&s->h, f->name, "", labels, json_number_value(last));
                break;
            }
        }
        json_decref(sum);
    }
}

static void s_images_per_sec(scrape_t *s, const family_t *f) { training_samples(s, f, "images_per_sec"); }
static void s_data_wait(scrape_t *s, const family_t *f) { training_samples(s, f, "data_wait"); }

/* The route and method labels of counter slot k. */
static void slot_labels(size_t k, const char **route, const char **method)
{
    if (k < cd_nroutes) {
        *route = cd_routes[k].pattern;
        *method = cd_routes[k].method;
    } else if (k == HTTP_SLOT_STATIC(cd_nroutes)) {
        *route = "(static)";
        *method = "GET";
    } else {
        *route = "(unmatched)";
        *method = "other";
    }
}

/* Slots that have counted a reply. */
static int slot_in_use(const server_t *srv, size_t k, http_slot_stats_t *st)
{
    return http_stats_read(srv, k, st) > 0;
}

static void s_http_requests(scrape_t *s, const family_t *f)
{
    static const char *const classes[HTTP_STATUS_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    http_slot_stats_t st;
    for (size_t k = 0; k < cd_nroutes + 2; k++) {
        if (!slot_in_use(s->srv, k, &st))
            continue;
        const char *route, *method;
        slot_labels(k, &route, &method);
        for (int c = 0; c < HTTP_STATUS_CLASSES; c++)
            if (st.status[c]) {
                const char *labels[] = {"route", route, "method", method, "status", classes[c], NULL};
                put_sample(&s->h, f->name, "", labels, (double)st.status[c]);
            }
    }
}

static void s_http_latency(scrape_t *s, const family_t *f)
{
    http_slot_stats_t st;
    for (size_t k = 0; k < cd_nroutes + 2; k++) {
        if (!slot_in_use(s->srv, k, &st))
            continue;
        const char *labels[8] = {"route", NULL, "method", NULL};
        slot_labels(k, &labels[1], &labels[3]);
        put_histogram(&s->h, f->name, labels, 4, http_latency_bounds, HTTP_LATENCY_BUCKETS, st.bucket,
                      (double)st.sum_us / 1e6);
    }
}

static const family_t g_families[] = {
    {"cdigits_build_info", "gauge", "The server's version, as a label of a constant 1.", s_build_info},
    {"cdigits_jobs", "gauge", "Jobs by type (dataset, model) and state, as the store names them.", s_jobs},
    {"cdigits_job_queue_wait_seconds", "histogram",
     "Seconds from a job's Waiting entry to its Running entry in the status history, one observation per start.",
     s_queue_wait},
    {"cdigits_job_oldest_waiting_seconds", "gauge", "Age in seconds of the oldest job Waiting now; 0 when none waits.",
     s_oldest_wait},
    {"cdigits_workers_running", "gauge", "Worker processes the scheduler runs now (datasets and trainings).",
     s_workers},
    {"cdigits_tasks_queued", "gauge", "Tasks the scheduler holds that have no worker yet.", s_queued},
    {"cdigits_inference_workers", "gauge", "Warm inference workers by state (busy answering, idle).",
     s_inference_workers},
    {"cdigits_gpu_utilization_percent", "gauge", "GPU utilization in percent (NVML), from the monitor's latest sample.",
     s_gpu_util},
    {"cdigits_gpu_memory_used_bytes", "gauge", "GPU memory in use in bytes (NVML).", s_gpu_mem_used},
    {"cdigits_gpu_memory_total_bytes", "gauge", "GPU memory in bytes (NVML).", s_gpu_mem_total},
    {"cdigits_gpu_temperature_celsius", "gauge", "GPU temperature in degrees Celsius (NVML).", s_gpu_temp},
    {"cdigits_training_images_per_second", "gauge",
     "Training images per second of each Running model, its trainer's latest report.", s_images_per_sec},
    {"cdigits_training_data_wait_ratio", "gauge",
     "Share (0 to 1) of each Running model's step spent waiting for data, its trainer's latest report.",
     s_data_wait},
    {"cdigits_http_requests_total", "counter",
     "HTTP replies by route pattern, method and status class since the server started.", s_http_requests},
    {"cdigits_http_request_duration_seconds", "histogram",
     "Seconds from a request's arrival to its reply being queued, by route pattern and method.", s_http_latency},
};

void h_metrics(req_t *r)
{
    scrape_t s = {.r = r, .srv = r->srv, .now = cd_wall_time()};
    json_t *all = store_job_list(r->srv->store, NULL);
    s.jobs = json_array();
    size_t i;
    json_t *j;
    json_array_foreach(all, i, j)
    {
        if (security_may_read(r, j))
            json_array_append(s.jobs, j);
    }
    json_decref(all);
    read_waits(&s);
    for (size_t k = 0; k < CD_ARRAY_LEN(g_families); k++) {
        const family_t *f = &g_families[k];
        html_printf(&s.h, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
        f->samples(&s, f);
    }
    json_decref(s.jobs);
    if (s.h.bad) {
        free(s.h.p);
        reply_error(r, 500, "out of memory writing the metrics; try again when the server has more memory");
        return;
    }
    reply_buffer(r, 200, s.h.p, s.h.n, METRICS_CTYPE, "no-store");
}
