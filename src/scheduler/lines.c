/* One worker line (docs/worker-protocol.md): stored as it arrives, then published to the
 * job's event stream. A table maps each line type to its handler. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cdigits/util.h"

/* Progress is stored and published at most this often, except at stage ends. */
#define PROGRESS_INTERVAL 0.1

static const char *jstr(json_t *o, const char *key, const char *def)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : def;
}

static double jnum(json_t *o, const char *key, double def)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

/* Keeps the last lines a user would want to see when the worker dies. */
static void remember(stask_t *t, const char *line)
{
    if (!line[0])
        return;
    if (t->ntail == TAIL_LINES) {
        memmove(t->tail[0], t->tail[1], sizeof t->tail[0] * (TAIL_LINES - 1));
        t->ntail--;
    }
    snprintf(t->tail[t->ntail++], sizeof t->tail[0], "%s", line);
}

/* Stores the line, then sends it to the job's page with its row id: a page that reads the
 * log and listens to the events sees each line once, whichever comes first. */
static void add_log(sched_t *s, stask_t *t, const char *level, const char *message)
{
    cd_err_t err;
    json_t *row = store_log_insert(s->store, t->job_id, t->task_id, level, message, &err);
    if (!row && !t->delete_requested)
        cd_warn("job %s: %s", t->job_id, err.msg);
    if (!row) /* not stored: the page still sees it, without an id */
        row = json_pack("{s:s, s:s, s:f}", "level", level, "message", message, "time", cd_wall_time());
    if (row)
        events_publish_job(s->events, t->job_id, "log", row, 0);
    json_decref(row);
}

static void on_log(sched_t *s, stask_t *t, json_t *j)
{
    const char *msg = jstr(j, "message", "");
    add_log(s, t, jstr(j, "level", "info"), msg);
    remember(t, msg);
}

/* A dataset's progress runs through two stages: parsing the folders is the first
 * tenth, writing the records the rest. */
static double overall_progress(const stask_t *t, const char *stage, double frac)
{
    if (strcmp(t->type, "dataset") == 0 && stage) {
        if (strcmp(stage, "parse") == 0)
            return 0.1 * frac;
        if (strcmp(stage, "create") == 0)
            return 0.1 + 0.9 * frac;
    }
    return frac;
}

static void on_progress(sched_t *s, stask_t *t, json_t *j)
{
    double done = jnum(j, "done", 0), total = jnum(j, "total", 0);
    if (total <= 0)
        return;
    double frac = done / total;
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    const char *stage = json_string_value(json_object_get(j, "stage"));
    double now = cd_now();
    if (done < total && now - t->progress_published < PROGRESS_INTERVAL)
        return;
    t->progress_published = now;
    double p = overall_progress(t, stage, frac);
    json_t *ev = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f}", "job_id", t->job_id, "update", "progress",
                           "percentage", (int)lround(100 * p), "progress", p, "done", done, "total", total);
    if (stage)
        json_object_set_new(ev, "stage", json_string(stage));
    json_t *epoch = json_object_get(j, "epoch");
    if (json_is_number(epoch))
        json_object_set(ev, "epoch", epoch);
    events_publish_job(s->events, t->job_id, "progress", ev, 1);
    json_decref(ev);
    store_task_set_progress(s->store, t->task_id, p, stage, NULL);
    store_job_set_progress(s->store, t->job_id, p, NULL);
}

static void on_metric(sched_t *s, stask_t *t, json_t *j)
{
    json_t *value = json_object_get(j, "value");
    store_metric_t m = {
        .job_id = t->job_id,
        .task_id = t->task_id,
        .attempt = t->attempt,
        .phase = jstr(j, "phase", "train"),
        .name = jstr(j, "name", "unknown"),
        .value = json_is_number(value) ? json_number_value(value) : NAN,
        .epoch = jnum(j, "epoch", 0),
        .iteration = (long long)jnum(j, "iteration", 0),
        .time = cd_wall_time(),
    };
    /* stored first, so the event carries the row id clients merge with /metrics/json; the
     * insert is cheap inside the reader's batch */
    int64_t id = 0;
    cd_err_t err;
    if (store_metric_add(s->store, &m, &id, &err) != CD_OK) {
        if (!t->delete_requested)
            cd_warn("job %s: %s", t->job_id, err.msg);
        return;
    }
    if (id == 0)
        return; /* a replayed line: stored and announced before */
    json_t *ev = json_pack("{s:I, s:s, s:s, s:f, s:I, s:f, s:i}", "id", (json_int_t)id, "phase", m.phase, "name",
                           m.name, "epoch", m.epoch, "iteration", (json_int_t)m.iteration, "time", m.time,
                           "attempt", m.attempt);
    json_object_set_new(ev, "value", isfinite(m.value) ? json_real(m.value) : json_null());
    events_publish_job(s->events, t->job_id, "metric", ev, 0);
    json_decref(ev);
}

static void on_snapshot(sched_t *s, stask_t *t, json_t *j)
{
    double epoch = jnum(j, "epoch", 0);
    const char *file = jstr(j, "file", "");
    cd_err_t err;
    if (store_snapshot_add(s->store, t->job_id, epoch, (long long)jnum(j, "iteration", 0), file, &err) != CD_OK) {
        if (!t->delete_requested)
            cd_warn("job %s: %s", t->job_id, err.msg);
        return;
    }
    json_t *ev = json_pack("{s:f, s:I, s:s}", "epoch", epoch, "iteration", (json_int_t)jnum(j, "iteration", 0),
                           "file", file);
    events_publish_job(s->events, t->job_id, "snapshot", ev, 0);
    json_decref(ev);
}

static void on_dataset(sched_t *s, stask_t *t, json_t *j)
{
    json_decref(t->dataset_result);
    t->dataset_result = json_deep_copy(j);
    json_object_del(t->dataset_result, "type");
    store_job_set_result(s->store, t->job_id, t->dataset_result, NULL);
    events_publish_job(s->events, t->job_id, "dataset", t->dataset_result, 0);
}

static void on_device(sched_t *s, stask_t *t, json_t *j)
{
    json_t *dev = json_deep_copy(j);
    json_object_del(dev, "type");
    store_task_set_device(s->store, t->task_id, dev, NULL);
    char msg[256];
    snprintf(msg, sizeof msg, "Running on %s (%s)", jstr(j, "name", "?"), jstr(j, "backend", "?"));
    add_log(s, t, "info", msg);
    events_publish_job(s->events, t->job_id, "device", dev, 0);
    json_decref(dev);
}

/* "batch" (the batch differs from what was asked) and "advice" (what limits training
 * now): kept as the task's latest, logged, and passed to the job's listeners. */
static void runtime_line(sched_t *s, stask_t *t, json_t *j, const char *key, const char *text)
{
    json_t *v = json_deep_copy(j);
    json_object_del(v, "type");
    store_task_set_runtime(s->store, t->task_id, key, v, NULL);
    events_publish_job(s->events, t->job_id, key, v, 0);
    json_decref(v);
    add_log(s, t, "info", text);
}

static void on_batch(sched_t *s, stask_t *t, json_t *j)
{
    char text[512];
    snprintf(text, sizeof text, "Batch %d x %d accumulation = %d: %s", (int)jnum(j, "batch", 0),
             (int)jnum(j, "accumulation", 1), (int)jnum(j, "effective", 0), jstr(j, "reason", ""));
    runtime_line(s, t, j, "batch", text);
}

static void on_advice(sched_t *s, stask_t *t, json_t *j)
{
    char text[1024];
    snprintf(text, sizeof text, "Limited by %s: %s", jstr(j, "limit", "?"), jstr(j, "message", ""));
    runtime_line(s, t, j, "advice", text);
}

static void on_error(sched_t *s, stask_t *t, json_t *j)
{
    const char *msg = jstr(j, "message", "unknown error");
    snprintf(t->last_error, sizeof t->last_error, "%s", msg);
    add_log(s, t, "error", msg);
    remember(t, msg);
}

static void on_done(sched_t *s, stask_t *t, json_t *j)
{
    (void)s;
    (void)j;
    t->saw_done = 1;
}

static const struct {
    const char *type;
    void (*handle)(sched_t *s, stask_t *t, json_t *line);
} g_line_types[] = {
    {"log", on_log},         {"progress", on_progress}, {"metric", on_metric}, {"snapshot", on_snapshot},
    {"dataset", on_dataset}, {"device", on_device},     {"error", on_error},   {"done", on_done},
    {"batch", on_batch},     {"advice", on_advice},
};

/* A line that is not JSON is kept as text, its stray bytes made '?' so it can be stored,
 * shown and sent like any other, and remembered as the worker's last words. */
static void keep_text(sched_t *s, stask_t *t, const char *level, char *line)
{
    cd_utf8_scrub(line);
    add_log(s, t, level, line);
    remember(t, line);
}

void lines_handle(sched_t *s, stask_t *t, char *line, int from_stderr)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    if (!n)
        return;
    if (from_stderr || line[0] != '{') {
        keep_text(s, t, from_stderr ? "stderr" : "info", line);
        return;
    }
    json_error_t jerr;
    json_t *j = json_loadb(line, n, 0, &jerr);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        keep_text(s, t, "info", line);
        return;
    }
    const char *type = jstr(j, "type", "");
    for (size_t i = 0; i < CD_ARRAY_LEN(g_line_types); i++)
        if (strcmp(type, g_line_types[i].type) == 0) {
            g_line_types[i].handle(s, t, j);
            break;
        }
    /* unknown types are ignored, as the protocol says */
    json_decref(j);
}

void lines_recall(stask_t *t, const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *type = json_is_object(j) ? jstr(j, "type", "") : "";
    if (!strcmp(type, "done"))
        t->saw_done = 1;
    else if (!strcmp(type, "error"))
        snprintf(t->last_error, sizeof t->last_error, "%s", jstr(j, "message", "unknown error"));
    json_decref(j);
}

void lines_failure_message(const stask_t *t, const char *how, char *out, size_t len)
{
    if (t->last_error[0]) {
        snprintf(out, len, "%s", t->last_error);
        return;
    }
    int n = snprintf(out, len, "The worker %s without saying why.", how);
    if (t->ntail > 0 && n > 0 && (size_t)n < len) {
        size_t used = (size_t)n;
        used += (size_t)snprintf(out + used, len - used, " Its last lines:");
        for (int i = 0; i < t->ntail && used < len; i++)
            used += (size_t)snprintf(out + used, len - used, "\n%s", t->tail[i]);
    } else if (n > 0 && (size_t)n < len) {
        snprintf(out + n, len - (size_t)n, " It printed nothing; run it by hand on the job directory to see more.");
    }
}
