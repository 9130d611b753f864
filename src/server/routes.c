/* Every HTTP route of the server in one table: DIGITS 6.1's routes first, then the
 * ones cdigits adds. docs/api.md lists the same rows (tests/unit/test_server_routes.c
 * checks that they agree). A pattern ending in /json also answers the older .json
 * suffix; <name> captures one path segment (or the rest of the URL with R_RAW). The
 * dispatcher checks what is common (method, login, body decoding) once. */
#include "internal.h"

const route_t cd_routes[] = {
    /* home */
    {"GET", "/", h_home, 0, "the browser UI's home page (the index JSON when no UI is installed)"},
    {"GET", "/index/json", h_index, 0, "every dataset and model: {version, jobs_dir, datasets, models}"},
    {"GET", "/completed_jobs/json", h_completed_jobs, 0,
     "the home tables: {running, datasets, models, pretrained_models, model_output_fields}"},
    {"GET", "/jobs/<id>/table_data/json", h_job_table_data, 0, "one row of the home tables: {job}"},
    /* login */
    {"GET", "/login", h_login_get, 0, "who is logged in: {username, auth, is_admin, via[, csrf_token]}"},
    {"POST", "/login", h_login, R_BODY,
     "log in: username (--auth none: sets the username cookie), username and password (--auth password: a session)"},
    {"GET", "/logout", h_logout, 0, "log out (clears the cookie, ends the session)"},
    {"POST", "/logout", h_logout, R_BODY, "log out (clears the cookie, ends the session)"},
    /* API tokens and users (--auth password) */
    {"GET", "/tokens/json", h_tokens_list, R_LOGIN, "the caller's API tokens: {tokens: [{id, name, prefix, ...}]} (cdigits)"},
    {"POST", "/tokens/json", h_token_create, R_LOGIN | R_BODY,
     "create an API token: name, expires_days; the answer holds the token, shown once (cdigits)"},
    {"DELETE", "/tokens/<id>", h_token_revoke, R_LOGIN | R_BODY, "revoke one of the caller's API tokens (cdigits)"},
    {"GET", "/users/json", h_users_list, R_ADMIN, "administrators: every user: {users} (cdigits)"},
    {"POST", "/users/json", h_user_create, R_ADMIN | R_BODY,
     "administrators: create a user: username, password, is_admin (cdigits)"},
    {"DELETE", "/users/<name>", h_user_delete, R_ADMIN | R_BODY,
     "administrators: delete a user with their sessions and tokens; their jobs stay (cdigits)"},
    {"POST", "/users/<name>/password", h_user_password, R_LOGIN | R_BODY,
     "change a password: password (and old_password for one's own); ends the user's sessions (cdigits)"},
    /* datasets */
    {"POST", "/datasets/images/classification/json", h_dataset_create, R_LOGIN | R_BODY,
     "create an image classification dataset"},
    {"POST", "/datasets/images/classification", h_dataset_create, R_LOGIN | R_BODY,
     "create an image classification dataset (form post)"},
    {"GET", "/datasets/<id>/json", h_job_json, 0, "a dataset with its ParseFolderTasks and CreateDbTasks"},
    {"GET", "/datasets/<id>/status", h_job_status, 0, "{status, name, type, error}"},
    {"POST", "/datasets/<id>/abort", h_job_abort, R_LOGIN | R_BODY, "abort a dataset job"},
    {"DELETE", "/datasets/<id>", h_job_delete, R_LOGIN | R_BODY, "delete a dataset job"},
    {"GET", "/datasets/<id>", h_job_show, 0, "a dataset's page (its JSON without a UI)"},
    /* models */
    {"POST", "/models/images/classification/json", h_model_create, R_LOGIN | R_BODY,
     "create image classification model(s); {\"jobs\": [...]} for a sweep"},
    {"POST", "/models/images/classification", h_model_create, R_LOGIN | R_BODY,
     "create image classification model(s) (form post)"},
    {"POST", "/models/visualize-lr", h_visualize_lr, R_BODY, "the learning rate curve of a policy: {data: {columns}}"},
    {"POST", "/models/images/classification/classify_one/json", h_classify_one, R_BODY,
     "the top 5 classes of one image: job_id, image_path or image_file, snapshot_epoch"},
    {"POST", "/models/images/classification/classify_many/json", h_classify_many, R_BODY,
     "the top 5 classes of each image of image_list: job_id, image_list, image_folder, num_test_images"},
    {"GET", "/models/<id>/json", h_job_json, 0, "a model with its snapshots"},
    {"GET", "/models/<id>/status", h_job_status, 0, "{status, name, type, error}"},
    {"POST", "/models/<id>/abort", h_job_abort, R_LOGIN | R_BODY, "abort a model job"},
    {"POST", "/models/<id>/resume", h_model_resume, R_LOGIN | R_BODY,
     "resume a stopped training job from its newest snapshot (cdigits)"},
    {"GET", "/models/<id>/metrics/json", h_model_metrics, 0,
     "a model's metrics: {metrics, summary}; ?after=ID, ?all=1 (cdigits)"},
    {"DELETE", "/models/<id>", h_job_delete, R_LOGIN | R_BODY, "delete a model job"},
    {"GET", "/models/<id>", h_job_show, 0, "a model's page (its JSON without a UI)"},
    /* jobs of any kind */
    {"GET", "/jobs/<id>/status", h_job_status, 0, "{status, name, type, error}"},
    {"GET", "/jobs/<id>/json", h_job_json, 0, "a job's JSON, dataset or model (cdigits)"},
    {"GET", "/jobs/<id>/log/json", h_job_log, 0, "a job's last log lines: {log}; ?n=200 (cdigits)"},
    {"GET", "/jobs/<id>/events", h_job_events, 0,
     "server-sent events of one job: status, progress, metric, log, snapshot, hw (cdigits)"},
    {"POST", "/jobs/<id>/abort", h_job_abort, R_LOGIN | R_BODY, "abort a job"},
    {"PUT", "/jobs/<id>", h_job_edit, R_LOGIN | R_BODY, "rename a job or edit its notes: job_name, job_notes"},
    {"DELETE", "/jobs/<id>", h_job_delete, R_LOGIN | R_BODY, "delete a job"},
    {"GET", "/jobs/<id>", h_job_redirect, 0, "redirects to /datasets/<id> or /models/<id>"},
    {"DELETE", "/jobs", h_jobs_delete, R_LOGIN | R_BODY, "delete the jobs in job_ids[]"},
    {"POST", "/abort_jobs", h_jobs_abort, R_LOGIN | R_BODY, "abort the jobs in job_ids[]"},
    {"POST", "/group", h_group, R_BODY, "set group_name on the jobs in job_ids[]"},
    {"GET", "/group", h_group, 0, "set group_name on the jobs in job_ids[] (query string)"},
    {"GET", "/clone/<id>/json", h_clone_get, 0, "the fields a job was created with, to fill a form (cdigits)"},
    {"POST", "/clone/<id>/json", h_clone, R_LOGIN | R_BODY,
     "create a job like <id>; posted fields replace the saved ones"},
    {"POST", "/clone/<id>", h_clone, R_LOGIN | R_BODY, "create a job like <id> (form post)"},
    /* live updates, hardware, files */
    {"GET", "/events", h_home_events, 0, "server-sent events of the home page: jobs, status, progress, gpus (cdigits)"},
    {"GET", "/hardware/json", h_hardware, 0, "GPUs (NVML), worker processes and resource pools (cdigits)"},
    {"GET", "/browse/json", h_browse, 0, "the sub-folders of ?path inside the data roots, for a folder picker (cdigits)"},
    {"GET", "/files/<path>", h_files, R_RAW, "a file inside the jobs directory"},
};

const size_t cd_nroutes = sizeof cd_routes / sizeof cd_routes[0];
