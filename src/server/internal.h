/* Inside the HTTP server: the server object, a request, the route table, the field map
 * that every body decodes into, form validation tables and the JSON views. */
#ifndef CDIGITS_SERVER_INTERNAL_H
#define CDIGITS_SERVER_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "cdigits/sched.h"
#include "cdigits/server.h"
#include "cdigits/events.h"
#include "cdigits/server_hw.h"
#include "cdigits/store.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

typedef struct server {
    cd_server_config_t cfg;
    char jobs_dir[PATH_MAX];                        /* realpath of <data>/jobs */
    char roots[CD_SERVER_MAX_ROOTS][PATH_MAX];      /* realpaths of the data roots */
    int nroots;
    char roots_text[4096];                          /* "/a, /b" for messages */
    store_t *store;
    sched_t *sched;
    cd_events_t *events;
    cd_hw_t *hw;
    int gpu_ids[SCHED_MAX_GPUS];                    /* the GPUs the scheduler has (--gpus) */
    int ngpu_ids;
    struct MHD_Daemon *mhd;
    volatile int stopping;
    pthread_t monitor;
    int monitor_started;
    pthread_mutex_t hw_lock;
    json_t *hw_latest;                              /* last monitor sample, for /hardware/json */
    pthread_mutex_t monitor_lock;
    pthread_cond_t monitor_cond;
    /* /index/json is what clients poll: its body is kept until the store changes */
    pthread_mutex_t index_lock;
    uint64_t index_version;
    char *index_body;
    size_t index_len;
    struct security *sec;                           /* security.c: login throttle, admission */
    struct http_stats *http_stats;                  /* http.c: request counters for GET /metrics */
} server_t;

/* ---- fields: every request body (urlencoded, multipart, JSON) and the query string
 * become one list of name/value pairs; a name may repeat ("job_ids[]"). ---------- */

typedef struct field {
    char *name;
    char *value;      /* NUL-terminated; len bytes (uploads may hold NULs) */
    size_t len;
    char *filename;   /* uploads only */
} field_t;

typedef struct fields {
    field_t *v;
    size_t n, cap;
} fields_t;

fields_t *fields_new(void);
void fields_free(fields_t *f);
int fields_add(fields_t *f, const char *name, const char *value, size_t len, const char *filename);
int fields_append(fields_t *f, size_t index, const char *data, size_t len);
/* The first field called name (or name + "[]", or name without "[]"). */
const field_t *fields_find(const fields_t *f, const char *name);
const char *fields_get(const fields_t *f, const char *name);
/* Every value of name (and its [] twin) in order; returns the count (at most max). */
int fields_get_all(const fields_t *f, const char *name, const char **out, int max);
/* Top-level members of a JSON object: strings as is, numbers as text, booleans as
 * "true"/"false", arrays of scalars as repeated fields; nested objects are refused. */
int fields_from_json(fields_t *f, json_t *obj, char *err, size_t errlen);
/* name=value&... with + and %XX decoded; CD_ERR on a bad escape. */
int fields_parse_urlencoded(fields_t *f, const char *body, size_t len);
/* The non-upload fields as an object (repeated names become arrays), for clone. */
json_t *fields_to_json(const fields_t *f);
/* Truthiness as wtforms reads a checkbox: absent, "", "false", "0", "off", "no" are false. */
int field_truthy(const char *v);

/* ---- a request ----------------------------------------------------------------------- */

#define REQ_MAX_PARAMS 4

enum body_kind { BODY_NONE = 0, BODY_FORM, BODY_JSON, BODY_RAW };

typedef struct req {
    server_t *srv;
    struct MHD_Connection *conn;
    const char *method;     /* "GET", ... (HEAD reads as GET) */
    char path[2048];        /* without the URL prefix */
    const struct route *route;
    char params[REQ_MAX_PARAMS][512]; /* the <id>/<path> parts of the pattern */
    int nparams;
    fields_t *fields;
    char username[64];      /* who is asking (security.c), "" when not logged in */
    int is_admin;           /* an administrator (--auth password) */
    int auth_via;           /* enum auth_via: how username was established */
    char csrf[72];          /* the session's CSRF token (sessions only) */
    /* body decoding */
    int body_kind;
    struct MHD_PostProcessor *pp;
    char *body;
    size_t body_len, body_cap;
    size_t received;
    int too_large;
    int bad_body;
    char bad_msg[256];
    size_t cur_field;       /* post processor: the field being filled */
    int have_cur;
    /* response */
    struct MHD_Response *resp;
    int status;
    int done;
    double started;         /* cd_now() when the request arrived, for the latency histogram */
    int result_page;        /* the reply is a result page the server wrote (DIGITS's HTML
                             * classify/infer answers): its images are inline (security.c) */
} req_t;

/* ---- routes ----------------------------------------------------------------------------- */

enum route_flags {
    R_LOGIN = 1 << 0, /* needs the username cookie (401 otherwise) */
    R_BODY = 1 << 1,  /* decodes a request body into fields */
    R_RAW = 1 << 2,   /* the last <path> captures the rest of the URL, slashes included */
    R_ADMIN = 1 << 3, /* administrators only (403 otherwise) */
    R_FORM = 1 << 4,  /* a DIGITS creation form: a request that does not want JSON gets its
                         errors as a page (400) and a 302 to the new job (api_reply_created) */
};

typedef void (*handler_fn)(req_t *r);

typedef struct route {
    const char *method;
    const char *pattern; /* "/datasets/<id>/json": a pattern ending in /json also matches .json */
    handler_fn handler;
    unsigned flags;
    const char *summary; /* one line, as in docs/api.md */
} route_t;

extern const route_t cd_routes[];
extern const size_t cd_nroutes;

/* Matches path against pattern; fills params. 1 on a match. */
int route_match(const char *pattern, unsigned flags, const char *path, char params[][512], int *nparams);

/* ---- responses (http.c) --------------------------------------------------------------- */

void reply_json(req_t *r, int status, json_t *body);             /* steals body */
void reply_text(req_t *r, int status, const char *text);
/* DIGITS's error shape: {"error": {"message": "404 Not Found: ...", "type": "NotFound",
 * "description": "..."}} */
void reply_error(req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void reply_err(req_t *r, const cd_err_t *err);                   /* status from err->kind */
void reply_form_errors(req_t *r, json_t *errors);                /* 400 {"errors": ...}; steals */
/* reply_form_errors with one message for one field: {"errors": {field: [message]}}. */
void reply_field_error(req_t *r, const char *field, const char *message);
/* Sends len bytes of data (malloc'd, taken on every path) as ctype with Cache-Control
 * cache ("no-store", "private, max-age=86400"); a 500 when the response cannot be made. */
void reply_buffer(req_t *r, int status, void *data, size_t len, const char *ctype, const char *cache);
void reply_redirect(req_t *r, const char *location, json_t *body); /* 302; steals body */
/* DIGITS's request_wants_json: the path ends in .json (or cdigits's /json), or the
 * Accept header ranks application/json strictly above text/html (its best match being
 * application/json). No Accept header, or curl's *\/\*, is HTML. */
int http_wants_json(const char *path, const char *accept);
int req_wants_json(const req_t *r); /* http_wants_json of the request's path and Accept */
void reply_response(req_t *r, int status, struct MHD_Response *resp); /* takes resp */
/* Serves a regular file (already resolved and checked). */
void reply_file(req_t *r, const char *path);
void reply_add_header(req_t *r, const char *name, const char *value);
int err_http_status(int kind);

/* ---- exposure, authentication, request checks (security.h) ------------------------ */

#include "security.h"

/* ---- paths (paths.c) ------------------------------------------------------------------- */

/* A path from a form field: absolute, existing, a folder (want_dir) or a regular file,
 * and inside a data root after every symlink and ".." is resolved (allow_jobs also
 * accepts the jobs directory). CD_OK with the resolved path in out, or CD_ERR with a
 * message for the field in msg. */
int paths_check_field(const server_t *srv, const char *path, int want_dir, int allow_jobs, char *out, size_t outlen,
                      char *msg, size_t msglen);
/* A relative URL path under base (a realpath): CD_OK with the resolved file in out
 * when it exists inside base; CD_ERR otherwise (missing, outside, not a file). */
int paths_resolve_under(const char *base, const char *rel, char *out, size_t outlen);
/* Whether real (a realpath) is base or inside it. */
int paths_inside(const char *real, const char *base);

/* ---- forms (forms.c) ------------------------------------------------------------------- */

enum form_type {
    F_STRING,  /* one line, trimmed */
    F_TEXT,    /* free text (network definitions) */
    F_INT,
    F_FLOAT,
    F_BOOL,
    F_CHOICE,  /* one of choices ("a|b|c") */
    F_INTS,    /* comma list or repeated field of ints */
    F_FLOATS,
    F_DIR,     /* path of a folder inside a data root */
    F_FILE,    /* path of a file inside a data root (or a job's upload) */
    F_UPLOAD,  /* a file uploaded with the request */
};

typedef struct form_field {
    const char *name;
    int type;
    const char *def;      /* value when absent, or NULL */
    double min, max;      /* bounds for numbers; NAN for none */
    const char *choices;  /* F_CHOICE */
    const char *when;     /* validate only when this holds: "method=folder&has_val_folder=1", "x!=auto" */
    int required;         /* when validated, must be present and not empty */
    const char *label;    /* what the user calls it */
} form_field_t;

/* Validates in against spec: *values gets {name: typed value} for every validated
 * field (null when absent and optional), *errors {name: [message]} (empty when valid).
 * Returns 1 when there is no error. */
int form_validate(const server_t *srv, const form_field_t *spec, size_t n, const fields_t *in, json_t **values,
                  json_t **errors);
void form_add_error(json_t *errors, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the model form (api_models.c) ------------------------------------------------------ */

/* The model form's fields, with their ranges and choices: the one table every model
 * creation is validated against, from the API or the browser form. */
const form_field_t *model_form_fields(size_t *n);

/* train.json for one job of the model form (docs/worker-protocol.md) from its validated
 * values v: every key whose field v holds, under the key's name in the table of
 * training settings (cdigits/train_keys.h), then what the form does not give as it is:
 * the dataset's folder, the job's network, the sweep's learning rate and batch (NULL:
 * the network's), the weight decay (the rate / 100 when not given), the policy's
 * parameters, the weights to start from (NULL or "": none), and backend "auto", gpus []
 * and resume false. NULL when dataset_dir is NULL or out of memory. Caller decrefs. */
json_t *model_train_json(json_t *v, const char *dataset_dir, const char *pretrained, double lr, json_t *batch);

/* The GPUs a model may ask for: the scheduler's, whether the server was started for
 * the CPU (--gpus none), and why it has those (for messages: "NVML: libnvidia-ml.so.1
 * not found ...", "--gpus 0,1", "NVML found 2"). */
typedef struct model_gpus {
    const int *ids;
    int n;
    int cpu_only;
    const char *why;
} model_gpus_t;

/* What a model asks of the scheduler, from the validated form values v (select_gpus,
 * select_gpus_list, select_gpu, select_gpu_count, data_parallel): {"kind": "gpu",
 * "ids" or "count", "data_parallel"[, "selected"]} or {"kind": "cpu"}. GPUs the server
 * has not got are form errors (NULL is returned, *errors names the field, the count and
 * why); without any GPU field, or on a server started for the CPU with a count, the
 * model trains on the CPU, as in DIGITS. Caller decrefs. */
json_t *model_gpu_request(const model_gpus_t *have, json_t *v, json_t *errors);

/* ---- views (views.c): the JSON shapes of DIGITS ------------------------------------- */

const char *view_job_type(json_t *job); /* "Image Classification Dataset" / "... Model" */
json_t *view_job_brief(json_t *job);     /* {id, name, status} (+ dataset_id for models) */
int view_job_is_pretrained(json_t *job); /* a model uploaded as an archive (no dataset) */
/* completed_jobs' per-job dict; adds the output field names to fields (a set object). */
json_t *view_job_table(server_t *srv, json_t *job, json_t *fields);
json_t *view_job_detail(server_t *srv, json_t *job); /* /datasets/<id>/json, /models/<id>/json */
double view_job_elapsed(server_t *srv, json_t *job);

/* ---- helpers shared by the handlers ------------------------------------------------------ */

/* The job named by the route's <id>, or NULL after a 404 reply. Caller decrefs. */
json_t *api_job_param(req_t *r);
/* How a handler answers an error: reply_error, or a variant that answers with a page. */
typedef void (*api_error_fn)(req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The job id names (DIGITS's job_from_request) when it is of type ("dataset" or
 * "model"), or NULL after fail answered: 400 without an id or for a job of another type,
 * 404 for an unknown id. Caller decrefs. */
json_t *api_job_of_type(req_t *r, const char *id, const char *type, api_error_fn fail);
/* DIGITS's ownership rule: a logged-in user may change a job with no owner or their own. */
int api_may_edit(const req_t *r, json_t *job);
/* A new job id (DIGITS's "YYYYMMDD-HHMMSS-xxxx") whose directory was just created. */
/* s with every `from` replaced by `to` (malloc'd; *len its length when len is not NULL),
 * or NULL when out of memory. */
char *api_replace_all(const char *s, const char *from, const char *to, size_t *len);
int api_new_job_dir(server_t *srv, char *id, size_t idlen, char *dir, size_t dirlen, cd_err_t *err);
int api_write_json(const char *dir, const char *name, json_t *obj, cd_err_t *err);
/* Stores a new job with its one task (kind and name, as the worker runs it: "train",
 * "Train Model") and queues it. CD_ERR with err's reason, the job's rows gone again (its
 * folder stays, for the caller to remove). */
int api_job_start(server_t *srv, const store_job_new_t *job, const char *task_kind, const char *task_name,
                  cd_err_t *err);
/* Tells the home pages that job id was added ("job_added" with its brief); returns the
 * brief (caller decrefs), NULL when the job is not there. */
json_t *api_job_announce(server_t *srv, const char *id);
/* The reply to a request that created jobs (body: one job's JSON or {"jobs": [...]} of a
 * sweep; stolen), as DIGITS answers: the body with 200 when the request wants JSON, else
 * 302 to the new job's page under the URL prefix: /datasets/<id> or /models/<id>, the
 * home page for a sweep or a pretrained model. */
void api_reply_created(req_t *r, json_t *body);
/* DIGITS's clone=<id> of a creation form (want_type: "dataset" or "model"): *out gets
 * the saved fields of job <id> followed by the posted fields it was not made with (so
 * saved fields win, as DIGITS's fill_form_if_cloned has it), without clone itself;
 * NULL when the request has no clone. CD_ERR after a reply (404 for an unknown job,
 * 400 for one of the other type). */
int api_clone_fields(req_t *r, const fields_t *in, const char *want_type, fields_t **out);
/* Creates a dataset / model job from fields (the handlers and clone share these). */
void api_dataset_create_fields(req_t *r, const fields_t *f);
void api_model_create_fields(req_t *r, const fields_t *f);

/* handlers */
void h_home(req_t *r);
void h_index(req_t *r);
void h_completed_jobs(req_t *r);
void h_job_table_data(req_t *r);
void h_login_get(req_t *r);
void h_login(req_t *r);
void h_logout(req_t *r);
void h_dataset_create(req_t *r);
void h_model_create(req_t *r);
void h_job_show(req_t *r);
void h_job_json(req_t *r);
void h_job_redirect(req_t *r);
void h_job_status(req_t *r);
void h_job_abort(req_t *r);
void h_job_delete(req_t *r);
void h_job_edit(req_t *r);
void h_jobs_delete(req_t *r);
void h_jobs_abort(req_t *r);
void h_group(req_t *r);
void h_clone_get(req_t *r);
void h_clone(req_t *r);
void h_model_resume(req_t *r);
void h_model_metrics(req_t *r);
void h_job_log(req_t *r);
void h_visualize_lr(req_t *r);
void h_classify_one(req_t *r);
void h_classify_many(req_t *r);
void h_job_events(req_t *r);
void h_home_events(req_t *r);
void h_hardware(req_t *r);
void h_files(req_t *r);
void h_browse(req_t *r);
void h_browse_file(req_t *r);
void h_dataset_explore(req_t *r);
void h_dataset_image(req_t *r);
void h_visualize_network(req_t *r);
void h_model_standard(req_t *r);
void h_train_keys(req_t *r);
void h_dataset_create_form(req_t *r);  /* api_clone.c: clone=, then h_dataset_create's work */
void h_page_dataset_new(req_t *r);     /* api_pages.c: DIGITS's .../new form pages */
void h_page_model_new(req_t *r);
void h_page_pretrained_new(req_t *r);
void h_pretrained_new(req_t *r);       /* api_infer_pretrained.c: DIGITS's manual upload */
void h_metrics(req_t *r);              /* api_metrics.c: Prometheus's text exposition */

/* http.c */
int http_start(server_t *srv, cd_err_t *err);
void http_stop(server_t *srv);

/* ---- request counters (http.c), read by GET /metrics (api_metrics.c) --------------------
 * One slot per row of cd_routes (no two rows share a method and pattern), then
 * HTTP_SLOT_STATIC for GET and HEAD requests no route matched (files
 * of the browser UI, 404s) and HTTP_SLOT_UNMATCHED for every other unmatched request.
 * Counted when the reply is queued, with relaxed atomic adds: no lock, no allocation. */

#define HTTP_LATENCY_BUCKETS 13
#define HTTP_STATUS_CLASSES 5 /* 1xx .. 5xx */
#define HTTP_SLOT_STATIC(n) (n)
#define HTTP_SLOT_UNMATCHED(n) ((n) + 1)

/* upper bounds in seconds of the latency buckets, ascending; +Inf follows them */
extern const double http_latency_bounds[HTTP_LATENCY_BUCKETS];

typedef struct http_slot_stats {
    uint64_t status[HTTP_STATUS_CLASSES];       /* replies by status class */
    uint64_t bucket[HTTP_LATENCY_BUCKETS + 1];  /* replies whose latency fell in bucket i alone
                                                   (not cumulative); the last is above every bound */
    uint64_t sum_us;                            /* total latency in microseconds */
} http_slot_stats_t;

/* A copy of slot's counters read now (zeros when srv has no counters or slot is out of
 * range); returns the slot's number of replies. */
uint64_t http_stats_read(const server_t *srv, size_t slot, http_slot_stats_t *out);
/* monitor.c */
int monitor_start(server_t *srv, cd_err_t *err);
void monitor_stop(server_t *srv);

#endif
