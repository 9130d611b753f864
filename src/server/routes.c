/* Every HTTP route of the server in one table: DIGITS 6.1's routes first, then the
 * ones cdigits adds. docs/api.md lists the same rows (tests/unit/test_server_routes.c
 * checks that they agree). A pattern ending in /json also answers the older .json
 * suffix; <name> captures one path segment (or the rest of the URL with R_RAW). The
 * dispatcher checks what is common (method, login, body decoding) once. */
#include "internal.h"

#include "api_browse.h"
#include "api_infer.h"
#include "api_models.h"

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
    {"GET", "/datasets/images/classification/new", h_page_dataset_new, 0,
     "the new-dataset form (the UI's dataset-new.html; ?clone=<id> fills it)"},
    {"POST", "/datasets/images/classification/json", h_dataset_create_form, R_LOGIN | R_BODY | R_FORM,
     "create an image classification dataset; clone=<id> starts from that dataset's fields"},
    {"POST", "/datasets/images/classification", h_dataset_create_form, R_LOGIN | R_BODY | R_FORM,
     "create an image classification dataset (form post: 302 to its page unless JSON is asked for)"},
    {"GET", "/datasets/<id>/json", h_job_json, 0, "a dataset with its ParseFolderTasks and CreateDbTasks"},
    {"GET", "/datasets/<id>/status", h_job_status, 0, "{status, name, type, error}"},
    {"GET", "/datasets/<id>/explore/json", h_dataset_explore, 0,
     "one page of a split's records: ?split, ?label, ?page, ?size: {total, items: [{index, label, url}]} (cdigits)"},
    {"GET", "/datasets/<id>/images/<split>/<index>", h_dataset_image, 0,
     "record <index> of a split as an image (PNG; JPEG for jpg datasets) (cdigits)"},
    {"POST", "/datasets/<id>/abort", h_job_abort, R_LOGIN | R_BODY, "abort a dataset job"},
    {"DELETE", "/datasets/<id>", h_job_delete, R_LOGIN | R_BODY, "delete a dataset job"},
    {"GET", "/datasets/<id>", h_job_show, 0, "a dataset's page (its JSON without a UI)"},
    /* models */
    {"GET", "/models/images/classification/new", h_page_model_new, 0,
     "the new-model form (the UI's model-new.html; ?clone=<id> fills it)"},
    {"POST", "/models/images/classification/json", h_model_create_any, R_LOGIN | R_BODY | R_FORM,
     "create image classification model(s); {\"jobs\": [...]} for a sweep; clone=<id> starts from that model's fields"},
    {"POST", "/models/images/classification", h_model_create_any, R_LOGIN | R_BODY | R_FORM,
     "create image classification model(s) (form post: 302 to its page, or home for a sweep, unless JSON is asked for)"},
    {"POST", "/models/customize", h_model_customize, R_BODY,
     "a network to edit: ?network=NAME (a standard network) or a model job id, snapshot_epoch: {network[, snapshot]}"},
    {"POST", "/models/visualize-lr", h_visualize_lr, R_BODY, "the learning rate curve of a policy: {data: {columns}}"},
    {"POST", "/models/visualize-network/json", h_visualize_network, R_BODY,
     "the layers and shapes of a network for each stage, from the engine: {stages, errors} (cdigits)"},
    {"GET", "/models/standard/<file>", h_model_standard, 0, "a standard network's prototxt: <name>.prototxt (cdigits)"},
    {"GET", "/models/train-keys/json", h_train_keys, 0, "the training settings with their limits and defaults (cdigits)"},
    {"POST", "/models/images/classification/classify_one/json", h_classify_one, R_BODY,
     "the top 5 classes of one image: job_id, image_path or image_file, snapshot_epoch, show_visualizations"},
    {"POST", "/models/images/classification/classify_many/json", h_classify_many, R_BODY,
     "the top 5 classes of each image of image_list (with accuracy and confusion matrix for labelled lines)"},
    {"POST", "/models/images/classification/top_n/json", h_classify_top_n, R_BODY,
     "the top_n images of image_list that score highest for each class"},
    {"GET", "/models/<id>/download", h_model_download, 0, "the model's files as a .tar.gz: ?epoch=N"},
    {"GET", "/models/<id>/download.<ext>", h_model_download, 0,
     "the model's files as a .tar, .tar.gz (.tgz), .tar.bz2 or .zip; another extension is 400 Invalid extension"},
    {"POST", "/models/<id>/download", h_model_download, R_BODY, "the same (DIGITS's form post with snapshot_epoch)"},
    {"POST", "/models/<id>/download.<ext>", h_model_download, R_BODY, "the same (form post)"},
    {"GET", "/models/<id>/json", h_job_json, 0, "a model with its snapshots"},
    {"GET", "/models/<id>/status", h_job_status, 0, "{status, name, type, error}"},
    {"POST", "/models/<id>/abort", h_job_abort, R_LOGIN | R_BODY, "abort a model job"},
    {"POST", "/models/<id>/resume", h_model_resume, R_LOGIN | R_BODY,
     "resume a stopped training job from its newest snapshot (cdigits)"},
    {"GET", "/models/<id>/metrics/json", h_model_metrics, 0,
     "a model's metrics: {metrics, summary}; ?after=ID, ?all=1 (cdigits)"},
    {"DELETE", "/models/<id>", h_job_delete, R_LOGIN | R_BODY, "delete a model job"},
    {"GET", "/models/<id>", h_job_show, 0, "a model's page (its JSON without a UI)"},
    /* pretrained models */
    {"POST", "/pretrained_models/upload_archive", h_pretrained_upload, R_LOGIN | R_BODY,
     "make a pretrained model from an archive of a downloaded model: archive, job_name"},
    {"GET", "/pretrained_models/json", h_pretrained_list, 0, "the pretrained models: {pretrained_models}"},
    {"GET", "/pretrained_models/new", h_page_pretrained_new, 0, "the upload form of a pretrained model (the UI's pretrained-new.html)"},
    {"POST", "/pretrained_models/new", h_pretrained_new, R_LOGIN | R_BODY | R_FORM,
     "a pretrained model from DIGITS's separate files: job_name, weights_file, model_def_file, labels_file, mean_file, "
     "image_type, resize_mode, width, height; 302 home (JSON when asked for)"},
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
    {"POST", "/clone/<id>/json", h_clone, R_LOGIN | R_BODY | R_FORM,
     "create a job like <id>; posted fields replace the saved ones"},
    {"POST", "/clone/<id>", h_clone, R_LOGIN | R_BODY | R_FORM, "create a job like <id> (form post)"},
    /* live updates, hardware, files */
    {"GET", "/events", h_home_events, 0, "server-sent events of the home page: jobs, status, progress, gpus (cdigits)"},
    {"GET", "/hardware/json", h_hardware, 0, "GPUs (NVML), worker processes and resource pools (cdigits)"},
    {"GET", "/browse/json", h_browse, 0, "the sub-folders of ?path inside the data roots, for a folder picker (cdigits)"},
    {"GET", "/browse/file", h_browse_file, 0, "an image file ?path inside the data roots, for the resize preview (cdigits)"},
    {"GET", "/files/<path>", h_files, R_RAW, "a file inside the jobs directory"},
    {"GET", "/autocomplete/path", h_autocomplete_path, 0,
     "DIGITS's path completion: ?query=PATH, {\"suggestions\": [paths inside the data roots]}"},
};

const size_t cd_nroutes = sizeof cd_routes / sizeof cd_routes[0];
