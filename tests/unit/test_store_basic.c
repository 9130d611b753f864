/* The SQLite store: schema, jobs and tasks with their history, metrics and their
 * summary against a summary computed here, replays, supersede, snapshots, deletes,
 * persistence across reopening. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/store.h"
#include "testutil.h"

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static store_t *open_store(const char *path)
{
    store_t *s = NULL;
    cd_err_t err = {0};
    int rc = store_open(path, &s, &err);
    CHECK(rc == CD_OK && s, "store_open %s: %s", path, err.msg);
    return s;
}

static void add_job(store_t *s, const char *id, const char *type, const char *dataset_id)
{
    cd_err_t err = {0};
    json_t *form = json_pack("{s:s}", "model_name", id);
    store_job_new_t j = {.id = id, .type = type, .name = id, .group = "g", .username = "fred",
                         .dataset_id = dataset_id, .dir = "/tmp/x", .form = form, .config = NULL};
    CHECK(store_job_insert(s, &j, &err) == CD_OK, "insert %s: %s", id, err.msg);
    json_decref(form);
}

int main(void)
{
    cd_test_init("test_store_basic");
    char path[4200];
    snprintf(path, sizeof path, "%s/store.db", cd_test_tmpdir());
    store_t *s = open_store(path);
    if (!s)
        return cd_test_finish();
    CHECK(store_schema_version(s) >= 1, "schema version %d", store_schema_version(s));
    cd_err_t err = {0};

    /* jobs and history */
    add_job(s, "20240101-000000-aaaa", "dataset", NULL);
    add_job(s, "20240101-000001-bbbb", "model", "20240101-000000-aaaa");
    store_job_new_t bad = {.id = "x-1", .type = "model", .name = "x", .dir = "/tmp", .dataset_id = "nope"};
    CHECK(store_job_insert(s, &bad, &err) == CD_ERR, "a model on a missing dataset violates the foreign key");
    store_job_new_t badtype = {.id = "x-2", .type = "pony", .name = "x", .dir = "/tmp"};
    CHECK(store_job_insert(s, &badtype, &err) == CD_ERR, "an unknown job type is refused");
    int64_t task = 0;
    CHECK(store_task_insert(s, "20240101-000001-bbbb", "train", "Train Model", &task, &err) == CD_OK && task > 0,
          "task insert: %s", err.msg);
    CHECK(store_job_set_state(s, "20240101-000001-bbbb", CD_ST_WAIT, NULL, &err) == CD_OK, "set W");
    CHECK(store_job_set_wait_reason(s, "20240101-000001-bbbb", "Waiting for a GPU", &err) == CD_OK, "reason");
    CHECK(store_task_set_state(s, task, CD_ST_RUN, "started", &err) == CD_OK, "task R");
    CHECK(store_job_set_state(s, "20240101-000001-bbbb", CD_ST_RUN, "started", &err) == CD_OK, "set R");
    CHECK(store_job_set_state(s, "nope", CD_ST_RUN, NULL, &err) == CD_ERR && err.kind == CD_E_NOTFOUND,
          "a missing job is CD_E_NOTFOUND");
    json_t *job = store_job_get(s, "20240101-000001-bbbb");
    CHECK(job && json_integer_value(json_object_get(job, "state")) == CD_ST_RUN, "state Running");
    CHECK(job && strcmp(jstr(job, "wait_reason"), "") == 0, "Running clears the wait reason");
    CHECK(job && strcmp(jstr(json_object_get(job, "form"), "model_name"), "20240101-000001-bbbb") == 0,
          "form JSON round-trips");
    CHECK(job && json_is_number(json_object_get(job, "started")), "started comes from the task");
    json_decref(job);
    json_t *hist = store_job_history(s, "20240101-000001-bbbb");
    CHECK(json_array_size(hist) == 3, "history has I, W, R (%zu)", json_array_size(hist));
    CHECK(strcmp(json_string_value(json_array_get(json_array_get(hist, 2), 0)), "R") == 0, "last is R");
    json_decref(hist);

    /* metrics against a reference summary, with fresh random values */
    double mn = INFINITY, mx = -INFINITY, last = 0;
    int n = 50 + (int)(cd_test_rand_u64() % 50);
    for (int i = 1; i <= n; i++) {
        double v = cd_test_uniform(-5, 5);
        store_metric_t m = {.job_id = "20240101-000001-bbbb", .task_id = task, .attempt = 1, .phase = "train",
                            .name = "loss", .value = v, .epoch = i / 10.0, .iteration = i};
        int64_t id = -1;
        CHECK(store_metric_add(s, &m, &id, &err) == CD_OK && id > 0, "metric %d: %s", i, err.msg);
        mn = fmin(mn, v);
        mx = fmax(mx, v);
        last = v;
    }
    store_metric_t dup = {.job_id = "20240101-000001-bbbb", .task_id = task, .attempt = 1, .phase = "train",
                          .name = "loss", .value = 1e9, .epoch = 0.1, .iteration = 1};
    int64_t dupid = -1;
    CHECK(store_metric_add(s, &dup, &dupid, &err) == CD_OK && dupid == 0, "a replayed point is ignored");
    store_metric_t nanm = {.job_id = "20240101-000001-bbbb", .task_id = task, .attempt = 1, .phase = "val",
                           .name = "accuracy", .value = NAN, .epoch = 1, .iteration = 10};
    CHECK(store_metric_add(s, &nanm, NULL, &err) == CD_OK, "a NaN value is stored (as null)");
    json_t *sum = store_metric_summary(s, "20240101-000001-bbbb");
    json_t *loss = NULL;
    size_t i;
    json_t *r;
    json_array_foreach(sum, i, r) if (!strcmp(jstr(r, "name"), "loss")) loss = r;
    CHECK(loss != NULL, "summary has loss");
    if (loss) {
        CHECK_NEAR(json_number_value(json_object_get(loss, "min")), mn, 1e-12, "min");
        CHECK_NEAR(json_number_value(json_object_get(loss, "max")), mx, 1e-12, "max");
        CHECK_NEAR(json_number_value(json_object_get(loss, "last")), last, 1e-12, "last");
        CHECK(json_integer_value(json_object_get(loss, "count")) == n, "count %d", n);
    }
    json_decref(sum);
    CHECK(store_metric_count(s, "20240101-000001-bbbb", 0) == n + 1, "count of rows");

    /* resume after iteration k: later rows of attempt 1 are superseded, kept, summary rebuilt */
    int k = 10 + (int)(cd_test_rand_u64() % 30);
    CHECK(store_metric_supersede(s, "20240101-000001-bbbb", 0, k, 2, &err) == CD_OK, "supersede: %s", err.msg);
    CHECK(store_metric_count(s, "20240101-000001-bbbb", 1) == n + 1, "superseded rows stay");
    json_t *cur = store_metric_list(s, "20240101-000001-bbbb", 0, 0, 0);
    int train_rows = 0;
    double rmin = INFINITY;
    json_array_foreach(cur, i, r) if (!strcmp(jstr(r, "phase"), "train"))
    {
        train_rows++;
        rmin = fmin(rmin, json_number_value(json_object_get(r, "value")));
        CHECK(json_integer_value(json_object_get(r, "iteration")) <= k, "only iterations up to %d remain", k);
    }
    CHECK(train_rows == k, "%d current train rows, want %d", train_rows, k);
    json_decref(cur);
    sum = store_metric_summary(s, "20240101-000001-bbbb");
    json_array_foreach(sum, i, r) if (!strcmp(jstr(r, "name"), "loss"))
    {
        CHECK_NEAR(json_number_value(json_object_get(r, "min")), rmin, 1e-12, "rebuilt min");
        CHECK(json_integer_value(json_object_get(r, "count")) == k, "rebuilt count");
    }
    json_decref(sum);
    store_metric_t again = {.job_id = "20240101-000001-bbbb", .task_id = task, .attempt = 2, .phase = "train",
                            .name = "loss", .value = 0.5, .epoch = (k + 1) / 10.0, .iteration = k + 1};
    int64_t againid = 0;
    CHECK(store_metric_add(s, &again, &againid, &err) == CD_OK && againid > 0,
          "the resumed attempt stores the same iteration again");
    /* a batch: one transaction whose writes still fail alone (a duplicate inside) */
    uint64_t v0 = store_version(s);
    CHECK(store_batch_begin(s, &err) == CD_OK, "batch begin: %s", err.msg);
    for (int b = 0; b < 3; b++) {
        store_metric_t bm = {.job_id = "20240101-000001-bbbb", .task_id = task, .attempt = 2, .phase = "val",
                             .name = "loss", .value = b, .epoch = 9, .iteration = 1000 + (b == 2 ? 0 : b)};
        int64_t bid = -1;
        CHECK(store_metric_add(s, &bm, &bid, &err) == CD_OK && (b == 2 ? bid == 0 : bid > 0),
              "batched metric %d (a duplicate for the last)", b);
    }
    CHECK(store_batch_end(s, &err) == CD_OK, "batch end: %s", err.msg);
    CHECK(store_version(s) != v0, "writes change the store version");
    json_t *bl = store_metric_list(s, "20240101-000001-bbbb", 0, 0, 0);
    int nb = 0;
    json_array_foreach(bl, i, r) nb += json_integer_value(json_object_get(r, "iteration")) >= 1000;
    CHECK(nb == 2, "the batch stored two points (%d)", nb);
    json_decref(bl);
    CHECK(store_task_set_out_offset(s, task, 12345, &err) == CD_OK, "offset");
    json_t *tasks = store_task_list(s, "20240101-000001-bbbb");
    CHECK(json_integer_value(json_object_get(json_array_get(tasks, 0), "out_offset")) == 12345, "offset stored");
    json_decref(tasks);
    tasks = store_task_list_by_state(s, 1u << CD_ST_RUN);
    CHECK(json_array_size(tasks) == 1, "one running task");
    json_decref(tasks);

    /* snapshots, logs, users */
    CHECK(store_snapshot_add(s, "20240101-000001-bbbb", 1.5, 15, "snapshot_iter_15.cdw", &err) == CD_OK, "snap");
    CHECK(store_snapshot_add(s, "20240101-000001-bbbb", 1.5, 15, "snapshot_iter_15.cdw", &err) == CD_OK, "snap again");
    CHECK(store_snapshot_add(s, "20240101-000001-bbbb", 1.0, 10, "snapshot_iter_10.cdw", &err) == CD_OK, "snap 2");
    json_t *snaps = store_snapshot_list(s, "20240101-000001-bbbb");
    CHECK(json_array_size(snaps) == 2, "two snapshots");
    CHECK_NEAR(json_number_value(json_object_get(json_array_get(snaps, 0), "epoch")), 1.0, 1e-12, "ordered by epoch");
    json_decref(snaps);
    for (int l = 0; l < 30; l++) {
        char msg[32];
        snprintf(msg, sizeof msg, "line %d", l);
        store_log_add(s, "20240101-000001-bbbb", task, "info", msg, NULL);
    }
    json_t *tail = store_log_tail(s, "20240101-000001-bbbb", 5);
    CHECK(json_array_size(tail) == 5 && !strcmp(jstr(json_array_get(tail, 4), "message"), "line 29"),
          "log tail is the last lines, oldest first");
    json_t *row = store_log_insert(s, "20240101-000001-bbbb", task, "warning", "line 30", &err);
    CHECK(row != NULL, "a line stored with its row: %s", err.msg);
    json_t *prev = json_array_get(tail, 4);
    CHECK(row && json_integer_value(json_object_get(row, "id")) == json_integer_value(json_object_get(prev, "id")) + 1 &&
              !strcmp(jstr(row, "level"), "warning") && !strcmp(jstr(row, "message"), "line 30"),
          "the row answered is the one stored next");
    json_t *tail2 = store_log_tail(s, "20240101-000001-bbbb", 1);
    json_t *stored = json_array_get(tail2, 0);
    CHECK(row && stored && json_equal(json_object_get(row, "id"), json_object_get(stored, "id")) &&
              json_number_value(json_object_get(row, "time")) == json_number_value(json_object_get(stored, "time")),
          "the tail reads the same id and time");
    json_decref(tail2);
    json_decref(row);
    json_decref(tail);
    CHECK(store_user_login(s, "fred", &err) == CD_OK && store_user_login(s, "fred", &err) == CD_OK, "login twice");
    json_t *u = store_user_get(s, "fred");
    CHECK(u != NULL, "user recorded");
    json_decref(u);

    /* deletes */
    CHECK(store_job_delete(s, "20240101-000000-aaaa", &err) == CD_ERR && err.kind == CD_E_FORBIDDEN,
          "a dataset in use is not deleted");
    store_close(s);

    s = open_store(path); /* reopening keeps everything */
    if (!s)
        return cd_test_finish();
    CHECK(store_metric_count(s, "20240101-000001-bbbb", 1) == n + 4, "metrics survive reopening");
    CHECK(store_job_delete(s, "20240101-000001-bbbb", &err) == CD_OK, "model deleted: %s", err.msg);
    CHECK(store_metric_count(s, "20240101-000001-bbbb", 1) == 0, "its metrics went with it");
    json_t *hist2 = store_job_history(s, "20240101-000001-bbbb");
    CHECK(json_array_size(hist2) == 0, "and its history");
    json_decref(hist2);
    CHECK(store_job_delete(s, "20240101-000000-aaaa", &err) == CD_OK, "then the dataset");
    CHECK(store_job_delete(s, "20240101-000000-aaaa", &err) == CD_ERR && err.kind == CD_E_NOTFOUND, "gone");
    json_t *all = store_job_list(s, NULL);
    CHECK(json_array_size(all) == 0, "no jobs left");
    json_decref(all);
    store_close(s);
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
