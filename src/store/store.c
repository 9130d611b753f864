/* Opening the store: pragmas, numbered migrations, the prepared statement table and
 * the connections with their locks. Running statements is in query.c. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- states ------------------------------------------------------------------- */

static const struct {
    const char *code, *name, *css;
} g_states[CD_ST_COUNT] = {
    [CD_ST_INIT] = {"I", "Initialized", "warning"},
    [CD_ST_WAIT] = {"W", "Waiting", "warning"},
    [CD_ST_RUN] = {"R", "Running", "info"},
    [CD_ST_DONE] = {"D", "Done", "success"},
    [CD_ST_ABORT] = {"A", "Aborted", "warning"},
    [CD_ST_ERROR] = {"E", "Error", "danger"},
};

const char *cd_state_name(int st) { return st >= 0 && st < CD_ST_COUNT ? g_states[st].name : "Unknown"; }
const char *cd_state_css(int st) { return st >= 0 && st < CD_ST_COUNT ? g_states[st].css : "default"; }
const char *cd_state_code(int st) { return st >= 0 && st < CD_ST_COUNT ? g_states[st].code : "E"; }
int cd_state_is_running(int st) { return st == CD_ST_INIT || st == CD_ST_WAIT || st == CD_ST_RUN; }

int cd_state_from_code(const char *code)
{
    if (!code)
        return -1;
    for (int i = 0; i < CD_ST_COUNT; i++)
        if (strcmp(code, g_states[i].code) == 0)
            return i;
    return -1;
}

/* ---- schema --------------------------------------------------------------------- */

/* Migration i takes the schema from version i to i+1. Append, never edit. */
static const char *const g_migrations[] = {
    /* 1: the first schema */
    "CREATE TABLE users ("
    "  name TEXT PRIMARY KEY,"
    "  created REAL NOT NULL,"
    "  last_login REAL NOT NULL);"
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY,"
    "  type TEXT NOT NULL CHECK (type IN ('dataset', 'model')),"
    "  name TEXT NOT NULL,"
    "  grp TEXT NOT NULL DEFAULT '',"
    "  username TEXT,"
    "  notes TEXT,"
    "  status TEXT NOT NULL DEFAULT 'I',"
    "  wait_reason TEXT NOT NULL DEFAULT '',"
    "  error TEXT,"
    "  interrupted INTEGER NOT NULL DEFAULT 0,"
    "  created REAL NOT NULL,"
    "  dataset_id TEXT REFERENCES jobs(id),"
    "  dir TEXT NOT NULL,"
    "  form TEXT NOT NULL DEFAULT '{}',"
    "  config TEXT NOT NULL DEFAULT '{}',"
    "  result TEXT,"
    "  progress REAL NOT NULL DEFAULT 0);"
    "CREATE INDEX jobs_type ON jobs(type, created);"
    "CREATE INDEX jobs_dataset ON jobs(dataset_id);"
    "CREATE TABLE job_status ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  status TEXT NOT NULL,"
    "  ts REAL NOT NULL,"
    "  message TEXT);"
    "CREATE INDEX job_status_job ON job_status(job_id, id);"
    "CREATE TABLE tasks ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  status TEXT NOT NULL DEFAULT 'I',"
    "  progress REAL NOT NULL DEFAULT 0,"
    "  stage TEXT,"
    "  attempt INTEGER NOT NULL DEFAULT 0,"
    "  pid INTEGER,"
    "  pid_start INTEGER,"
    "  gpus TEXT,"
    "  started REAL,"
    "  finished REAL,"
    "  exit_status INTEGER,"
    "  error TEXT,"
    "  device TEXT,"
    "  out_offset INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX tasks_job ON tasks(job_id);"
    "CREATE TABLE task_status ("
    "  id INTEGER PRIMARY KEY,"
    "  task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,"
    "  status TEXT NOT NULL,"
    "  ts REAL NOT NULL,"
    "  message TEXT);"
    "CREATE INDEX task_status_task ON task_status(task_id, id);"
    "CREATE TABLE metrics ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  task_id INTEGER,"
    "  attempt INTEGER NOT NULL DEFAULT 1,"
    "  phase TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  value REAL,"
    "  epoch REAL,"
    "  iteration INTEGER,"
    "  ts REAL NOT NULL,"
    "  superseded INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX metrics_job ON metrics(job_id, id);"
    "CREATE UNIQUE INDEX metrics_point ON metrics(job_id, attempt, phase, name, iteration);"
    "CREATE TABLE metric_summary ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  phase TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  last REAL,"
    "  min REAL,"
    "  max REAL,"
    "  count INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (job_id, phase, name));"
    "CREATE TABLE logs ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  task_id INTEGER,"
    "  ts REAL NOT NULL,"
    "  level TEXT NOT NULL,"
    "  message TEXT NOT NULL);"
    "CREATE INDEX logs_job ON logs(job_id, id);"
    "CREATE TABLE snapshots ("
    "  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  file TEXT NOT NULL,"
    "  epoch REAL NOT NULL,"
    "  iteration INTEGER,"
    "  ts REAL NOT NULL,"
    "  PRIMARY KEY (job_id, file));",
    /* 2: what a worker reports about its run: {"batch": {...}, "advice": {...}} */
    "ALTER TABLE tasks ADD COLUMN runtime TEXT;",
    /* 3: authentication (--auth password): an argon2id hash per user, login sessions
     * and API tokens, both kept only as hashes of what the client holds */
    "ALTER TABLE users ADD COLUMN password_hash TEXT;"
    "ALTER TABLE users ADD COLUMN is_admin INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE sessions ("
    "  id_hash TEXT PRIMARY KEY,"
    "  username TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,"
    "  csrf TEXT NOT NULL,"
    "  created REAL NOT NULL,"
    "  expires REAL NOT NULL);"
    "CREATE INDEX sessions_user ON sessions(username);"
    "CREATE INDEX sessions_expires ON sessions(expires);"
    "CREATE TABLE tokens ("
    "  id INTEGER PRIMARY KEY,"
    "  username TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,"
    "  name TEXT NOT NULL,"
    "  hash TEXT NOT NULL UNIQUE,"
    "  prefix TEXT NOT NULL,"
    "  created REAL NOT NULL,"
    "  expires REAL,"
    "  last_used REAL);"
    "CREATE INDEX tokens_user ON tokens(username);",
    /* 4: a task run by Slurm (--executor slurm): its Slurm job id, so that a restarted
     * server follows it again, and the nodes Slurm gave it */
    ("ALTER TABLE tasks ADD COLUMN slurm_job_id TEXT;"
     "ALTER TABLE tasks ADD COLUMN nodes TEXT;"),
};

/* The statement table. Columns named *_json hold JSON text (see store_rows). */
#define JOB_COLS                                                                            \
    "id, type, name, grp AS \"group\", username, notes, status AS state, wait_reason, error, " \
    "interrupted, created, dataset_id, dir, result AS result_json, progress, "                  \
    "(SELECT MIN(t.started) FROM tasks t WHERE t.job_id = jobs.id) AS started, "               \
    "(SELECT MAX(t.finished) FROM tasks t WHERE t.job_id = jobs.id) AS finished"
#define TASK_COLS                                                                           \
    "id, job_id, kind, name, status AS state, progress, stage, attempt, pid, pid_start, "   \
    "gpus AS gpus_json, started, finished, exit_status, error, device AS device_json, out_offset, "  \
    "runtime AS runtime_json, slurm_job_id, nodes"

static const char *const g_sql[Q_COUNT] = {
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_SAVEPOINT] = "SAVEPOINT nested",
    [Q_RELEASE] = "RELEASE nested",
    [Q_ROLLBACK_TO] = "ROLLBACK TO nested",
    [Q_JOB_INSERT] = "INSERT INTO jobs (id, type, name, grp, username, dataset_id, dir, form, "
                     "config, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [Q_JOB_GET] = "SELECT " JOB_COLS ", form AS form_json, config AS config_json "
                  "FROM jobs WHERE id = ?1",
    [Q_JOB_LIST] = "SELECT " JOB_COLS ", config AS config_json FROM jobs ORDER BY created DESC, id DESC",
    [Q_JOB_LIST_TYPE] = "SELECT " JOB_COLS ", config AS config_json FROM jobs WHERE type = ?1 "
                        "ORDER BY created DESC, id DESC",
    [Q_JOB_SET_STATE] = "UPDATE jobs SET status = ?2, "
                        "error = CASE WHEN ?2 IN ('W', 'R') THEN NULL ELSE error END, "
                        "interrupted = CASE WHEN ?2 IN ('W', 'R') THEN 0 ELSE interrupted END, "
                        "wait_reason = CASE WHEN ?2 = 'W' THEN wait_reason ELSE '' END "
                        "WHERE id = ?1",
    [Q_JOB_SET_WAIT] = "UPDATE jobs SET wait_reason = ?2 WHERE id = ?1",
    [Q_JOB_SET_ERROR] = "UPDATE jobs SET error = ?2 WHERE id = ?1",
    [Q_JOB_SET_INTERRUPTED] = "UPDATE jobs SET interrupted = ?2 WHERE id = ?1",
    [Q_JOB_SET_PROGRESS] = "UPDATE jobs SET progress = ?2 WHERE id = ?1",
    [Q_JOB_SET_NAME] = "UPDATE jobs SET name = ?2 WHERE id = ?1",
    [Q_JOB_SET_NOTES] = "UPDATE jobs SET notes = ?2 WHERE id = ?1",
    [Q_JOB_SET_GROUP] = "UPDATE jobs SET grp = ?2 WHERE id = ?1",
    [Q_JOB_SET_RESULT] = "UPDATE jobs SET result = ?2 WHERE id = ?1",
    [Q_JOB_SET_CONFIG] = "UPDATE jobs SET config = ?2 WHERE id = ?1",
    [Q_JOB_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    [Q_JOB_HISTORY_ADD] = "INSERT INTO job_status (job_id, status, ts, message) VALUES (?1, ?2, ?3, ?4)",
    [Q_JOB_HISTORY] = "SELECT status, ts, message FROM job_status WHERE job_id = ?1 ORDER BY id",
    [Q_JOB_MODELS_USING] = "SELECT id, name FROM jobs WHERE dataset_id = ?1 ORDER BY created",
    [Q_TASK_INSERT] = "INSERT INTO tasks (job_id, kind, name) VALUES (?1, ?2, ?3)",
    [Q_TASK_SET_STATE] = "UPDATE tasks SET status = ?2, "
                         "started = CASE WHEN ?2 = 'R' AND started IS NULL THEN ?3 ELSE started END, "
                         "finished = CASE WHEN ?2 IN ('D', 'A', 'E') THEN ?3 "
                         "                WHEN ?2 IN ('W', 'R') THEN NULL ELSE finished END, "
                         "error = CASE WHEN ?2 IN ('W', 'R') THEN NULL ELSE error END "
                         "WHERE id = ?1",
    [Q_TASK_HISTORY_ADD] = "INSERT INTO task_status (task_id, status, ts, message) VALUES (?1, ?2, ?3, ?4)",
    [Q_TASK_HISTORY] = "SELECT status, ts, message FROM task_status WHERE task_id = ?1 ORDER BY id",
    [Q_TASK_SET_PROCESS] = "UPDATE tasks SET pid = ?2, pid_start = ?3, gpus = ?4, attempt = ?5, "
                           "exit_status = NULL WHERE id = ?1",
    [Q_TASK_CLEAR_PROCESS] = "UPDATE tasks SET pid = NULL, pid_start = NULL, exit_status = ?2 WHERE id = ?1",
    [Q_TASK_SET_SLURM] = "UPDATE tasks SET slurm_job_id = ?2, nodes = ?3 WHERE id = ?1",
    [Q_TASK_SET_PROGRESS] = "UPDATE tasks SET progress = ?2, stage = ?3 WHERE id = ?1",
    [Q_TASK_SET_ERROR] = "UPDATE tasks SET error = ?2 WHERE id = ?1",
    [Q_TASK_SET_DEVICE] = "UPDATE tasks SET device = ?2 WHERE id = ?1",
    [Q_TASK_SET_OFFSET] = "UPDATE tasks SET out_offset = ?2 WHERE id = ?1",
    [Q_TASK_SET_RUNTIME] = "UPDATE tasks SET runtime = json_set(COALESCE(runtime, '{}'), '$.' || ?2, json(?3)) "
                           "WHERE id = ?1",
    [Q_TASK_LIST] = "SELECT " TASK_COLS " FROM tasks WHERE job_id = ?1 ORDER BY id",
    [Q_TASK_LIST_ALL] = "SELECT " TASK_COLS " FROM tasks ORDER BY id",
    /* a line replayed after a crash is the same point again: ignored */
    [Q_METRIC_INSERT] = "INSERT OR IGNORE INTO metrics (job_id, task_id, attempt, phase, name, value, epoch, "
                        "iteration, ts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [Q_METRIC_SUMMARY_UPSERT] =
        "INSERT INTO metric_summary (job_id, phase, name, last, min, max, count) "
        "VALUES (?1, ?2, ?3, ?4, ?4, ?4, 1) "
        "ON CONFLICT (job_id, phase, name) DO UPDATE SET last = ?4, "
        "min = CASE WHEN ?4 IS NULL THEN min WHEN min IS NULL OR ?4 < min THEN ?4 ELSE min END, "
        "max = CASE WHEN ?4 IS NULL THEN max WHEN max IS NULL OR ?4 > max THEN ?4 ELSE max END, "
        "count = count + 1",
    [Q_METRIC_LIST] = "SELECT id, phase, name, value, epoch, iteration, ts AS time, attempt, superseded "
                      "FROM metrics WHERE job_id = ?1 AND id > ?2 AND superseded = 0 ORDER BY id LIMIT ?3",
    [Q_METRIC_LIST_ALL] = "SELECT id, phase, name, value, epoch, iteration, ts AS time, attempt, superseded "
                          "FROM metrics WHERE job_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
    [Q_METRIC_SUMMARY] = "SELECT phase, name, last, min, max, count FROM metric_summary "
                         "WHERE job_id = ?1 ORDER BY phase DESC, name",
    [Q_METRIC_SUPERSEDE] = "UPDATE metrics SET superseded = 1 WHERE job_id = ?1 AND attempt < ?3 "
                           "AND CASE WHEN ?4 >= 0 THEN iteration > ?4 ELSE epoch > ?2 END",
    [Q_METRIC_SUMMARY_CLEAR] = "DELETE FROM metric_summary WHERE job_id = ?1",
    [Q_METRIC_SUMMARY_REBUILD] =
        "INSERT INTO metric_summary (job_id, phase, name, last, min, max, count) "
        "SELECT m.job_id, m.phase, m.name, "
        "  (SELECT l.value FROM metrics l WHERE l.job_id = m.job_id AND l.phase = m.phase "
        "     AND l.name = m.name AND l.superseded = 0 ORDER BY l.id DESC LIMIT 1), "
        "  MIN(m.value), MAX(m.value), COUNT(*) "
        "FROM metrics m WHERE m.job_id = ?1 AND m.superseded = 0 GROUP BY m.phase, m.name",
    [Q_METRIC_COUNT] = "SELECT COUNT(*) FROM metrics WHERE job_id = ?1 AND superseded = 0",
    [Q_METRIC_COUNT_ALL] = "SELECT COUNT(*) FROM metrics WHERE job_id = ?1",
    [Q_LOG_INSERT] = "INSERT INTO logs (job_id, task_id, ts, level, message) VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_LOG_TAIL] = "SELECT * FROM (SELECT id, ts AS time, level, message FROM logs WHERE job_id = ?1 "
                   "ORDER BY id DESC LIMIT ?2) ORDER BY id",
    [Q_SNAPSHOT_UPSERT] = "INSERT INTO snapshots (job_id, epoch, iteration, file, ts) "
                          "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (job_id, file) DO UPDATE SET "
                          "epoch = ?2, iteration = ?3, ts = ?5",
    [Q_SNAPSHOT_LIST] = "SELECT epoch, iteration, file, ts AS time FROM snapshots WHERE job_id = ?1 "
                        "ORDER BY epoch, iteration",
    [Q_METRIC_LAST_POINT] = "SELECT epoch, iteration FROM metrics WHERE job_id = ?1 AND epoch > 0 "
                            "AND iteration > 0 ORDER BY id DESC LIMIT 1",
    [Q_USER_LOGIN] = "INSERT INTO users (name, created, last_login) VALUES (?1, ?2, ?2) "
                     "ON CONFLICT (name) DO UPDATE SET last_login = ?2",
    [Q_USER_GET] = "SELECT name, created, last_login FROM users WHERE name = ?1",
};

/* ---- helpers ----------------------------------------------------------------------- */

store_conn_t *store_writer(store_t *s)
{
    pthread_mutex_lock(&s->writer.lock);
    return &s->writer;
}

store_conn_t *store_reader(store_t *s)
{
    unsigned start = __atomic_fetch_add(&s->next_reader, 1, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < STORE_READERS; i++) {
        store_conn_t *c = &s->readers[(start + i) % STORE_READERS];
        if (pthread_mutex_trylock(&c->lock) == 0)
            return c;
    }
    store_conn_t *c = &s->readers[start % STORE_READERS];
    pthread_mutex_lock(&c->lock);
    return c;
}

void store_release(store_conn_t *c)
{
    __atomic_add_fetch(&c->releases, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->lock);
}

uint64_t store_version(store_t *s) { return __atomic_load_n(&s->writer.releases, __ATOMIC_ACQUIRE); }

int store_batch_begin(store_t *s, cd_err_t *err)
{
    store_conn_t *c;
    return store_tx_start(s, &c, err); /* the lock stays taken until store_batch_end */
}

int store_batch_end(store_t *s, cd_err_t *err)
{
    return store_tx_finish(&s->writer, CD_OK, err);
}

void store_sync(store_t *s)
{
    store_release(store_writer(s));
}

/* ---- open / migrate ---------------------------------------------------------------- */

static int exec_sql(sqlite3 *db, const char *sql, const char *what, cd_err_t *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        cd_err_set(err, CD_E_INTERNAL, "database: %s failed: %s", what, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return CD_ERR;
    }
    return CD_OK;
}

static int pragma_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return CD_ERR;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? CD_OK : CD_ERR;
}

static int migrate(sqlite3 *db, const char *path, cd_err_t *err)
{
    int version = 0, n = (int)CD_ARRAY_LEN(g_migrations);
    if (pragma_int(db, "PRAGMA user_version", &version) != CD_OK)
        return cd_err_set(err, CD_E_INTERNAL, "database %s: cannot read its schema version: %s", path,
                          sqlite3_errmsg(db));
    if (version > n)
        return cd_err_set(err, CD_E_INTERNAL,
                          "database %s has schema version %d but this cdigits knows only up to %d; "
                          "run a newer cdigits or use another --data folder",
                          path, version, n);
    for (int v = version; v < n; v++) {
        char what[64], bump[64];
        snprintf(what, sizeof what, "migration to schema version %d", v + 1);
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if (exec_sql(db, "BEGIN IMMEDIATE", what, err) != CD_OK)
            return CD_ERR;
        if (exec_sql(db, g_migrations[v], what, err) != CD_OK || exec_sql(db, bump, what, err) != CD_OK) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return CD_ERR;
        }
        if (exec_sql(db, "COMMIT", what, err) != CD_OK)
            return CD_ERR;
        cd_info("database %s: migrated to schema version %d", path, v + 1);
    }
    return CD_OK;
}

/* Opens one connection with the pragmas every connection needs; prepares statements. */
static int conn_open(store_conn_t *c, const char *path, int reader, cd_err_t *err)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    int mrc = pthread_mutex_init(&c->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (mrc != 0)
        return cd_err_set(err, CD_E_INTERNAL, "cannot create a database lock");
    int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        return cd_err_set(err, CD_E_INTERNAL,
                          "cannot open database %s: %s; check that its folder exists and is writable", path,
                          c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(c->db, 10000);
    sqlite3_extended_result_codes(c->db, 0);
    if (exec_sql(c->db, "PRAGMA foreign_keys = ON", "enabling foreign keys", err) != CD_OK ||
        exec_sql(c->db, "PRAGMA synchronous = NORMAL", "setting synchronous", err) != CD_OK)
        return CD_ERR;
    if (reader && exec_sql(c->db, "PRAGMA query_only = ON", "making a reader", err) != CD_OK)
        return CD_ERR;
    return CD_OK;
}

static int conn_prepare(store_conn_t *c, cd_err_t *err)
{
    for (int i = 0; i < Q_COUNT; i++) {
        if (sqlite3_prepare_v3(c->db, g_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &c->stmt[i], NULL) != SQLITE_OK)
            return cd_err_set(err, CD_E_INTERNAL, "database: preparing statement %d failed: %s", i,
                              sqlite3_errmsg(c->db));
    }
    return CD_OK;
}

static void conn_close(store_conn_t *c, const char *path)
{
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(c->stmt[i]);
    if (c->db && sqlite3_close(c->db) != SQLITE_OK)
        cd_warn("database %s: close failed: %s", path, sqlite3_errmsg(c->db));
    if (c->db || c->stmt[0])
        pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

int store_open(const char *path, store_t **out, cd_err_t *err)
{
    *out = NULL;
    store_t *s = calloc(1, sizeof *s);
    if (!s)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory opening the database");
    snprintf(s->path, sizeof s->path, "%s", path);
    if (conn_open(&s->writer, path, 0, err) != CD_OK)
        goto err;
    if (exec_sql(s->writer.db, "PRAGMA journal_mode = WAL", "switching to WAL mode", err) != CD_OK)
        goto err;
    int fk = 0;
    if (pragma_int(s->writer.db, "PRAGMA foreign_keys", &fk) != CD_OK || fk != 1) {
        cd_err_set(err, CD_E_INTERNAL, "database %s: this SQLite cannot enforce foreign keys", path);
        goto err;
    }
    if (migrate(s->writer.db, path, err) != CD_OK || conn_prepare(&s->writer, err) != CD_OK)
        goto err;
    for (int i = 0; i < STORE_READERS; i++)
        if (conn_open(&s->readers[i], path, 1, err) != CD_OK || conn_prepare(&s->readers[i], err) != CD_OK)
            goto err;
    *out = s;
    return CD_OK;
err:
    store_close(s);
    return CD_ERR;
}

void store_close(store_t *s)
{
    if (!s)
        return;
    for (int i = 0; i < STORE_READERS; i++)
        conn_close(&s->readers[i], s->path);
    conn_close(&s->writer, s->path);
    free(s);
}

int store_schema_version(store_t *s)
{
    int v = -1;
    store_conn_t *c = store_reader(s);
    pragma_int(c->db, "PRAGMA user_version", &v);
    store_release(c);
    return v;
}

void store_memory(long long *now, long long *peak)
{
    *now = (long long)sqlite3_memory_used();
    *peak = (long long)sqlite3_memory_highwater(0);
}
