/* Using trained models over HTTP: classify_one, classify_many, top_n (api_infer.c),
 * the model download (api_infer_download.c), pretrained models made from an uploaded
 * archive and new models that start from them (api_infer_pretrained.c). The work runs
 * in warm `cdigits-worker serve-model` processes (cdigits/model_server.h). */
#ifndef CDIGITS_SERVER_API_INFER_H
#define CDIGITS_SERVER_API_INFER_H

#include <stdio.h>

#include "internal.h"

/* handlers (routes.c) */
void h_classify_one(req_t *r);
void h_classify_many(req_t *r);
void h_classify_top_n(req_t *r);
void h_infer_one(req_t *r);  /* generic models (api_infer_generic.c) */
void h_infer_many(req_t *r);
void h_infer_db(req_t *r);
void h_model_download(req_t *r);
void h_pretrained_upload(req_t *r);
void h_pretrained_list(req_t *r);
void h_model_create_any(req_t *r);

/* ---- shared by the handlers above ------------------------------------------------ */

/* The model job named by the field job_id (or, without it, the route's <id>); NULL
 * after a reply (400, 404). Caller decrefs. */
json_t *infer_model_from_request(req_t *r);
/* The snapshot a request names: snapshot_epoch or epoch (an epoch with a snapshot),
 * or snapshot_iteration or iteration; the newest without any. CD_OK with *iteration
 * and *epoch (-1 when unknown), or CD_ERR after a reply (400 for a bad number, 404
 * naming the snapshots that exist). */
int infer_snapshot(req_t *r, json_t *job, long *iteration, double *epoch);
/* Asks the model's warm worker; the answer's "ok" is true on CD_OK. CD_ERR after a
 * reply: the worker's "input" complaints are 400, the rest 500 (409 without a slot). */
int infer_call(req_t *r, json_t *job, long iteration, json_t *request, double run_s, json_t **answer);
/* A folder for one request's files under the job folder: JOBDIR/inference/<stamp>;
 * CD_ERR after a reply. Older folders beyond the newest `keep` are removed. */
int infer_request_dir(req_t *r, json_t *job, const char *what, int keep, char *dir, size_t len);
/* rm -r of a request folder made by infer_request_dir. */
void infer_remove_dir(const char *dir);
/* reply_json with numbers written as DIGITS writes them (99.99, not 99.989999...). */
void infer_reply_json(req_t *r, int status, json_t *body);
/* Replies with an open file (unlinked or not) as the body; takes fd. */
void infer_reply_fd(req_t *r, int fd, const char *ctype, const char *filename);
/* Replies with the file f written at path, from its start, and closes f: a 500 that
 * names path when the writes failed, or names what ("the page") when it cannot be sent. */
void infer_reply_file(req_t *r, FILE *f, const char *path, const char *ctype, const char *what);

/* Writes `"key":value` pairs of a worker's result lines (JSON lines with "path" and
 * "line") that have `field` (as "line N: why" when as_message), a comma before each
 * unless *count is 0; counts them in *count. Reads res from its start. */
void infer_copy_pairs(FILE *res, FILE *out, const char *field, long *count, int as_message);

/* ---- pages (api_infer_html.c) ------------------------------------------------------ */

/* Whether the request is one of classify_one, classify_many and top_n that does not
 * want JSON (req_wants_json): its answer, errors included, is a page. */
int infer_wants_html(const req_t *r);
/* reply_error, as a page with the same status when infer_wants_html. */
void infer_error(req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* reply_field_error (400), as a page when infer_wants_html. */
void infer_field_error(req_t *r, const char *field, const char *message);

/* The image a classify_one page shows: a file of the data roots, or the upload. */
typedef struct infer_image {
    const char *path;     /* the resolved image_path, or NULL for an upload */
    const char *b64;      /* the upload as base64 */
    int format;           /* the upload's enum cd_image_format */
    const char *filename; /* the upload's name, or NULL */
} infer_image;

/* The pages of the JSON answers' bodies (api_infer.c builds them): classify_one's
 * {predictions, visualizations, snapshot_*, note}; classify_many's summary fields
 * (tail) with the worker's result lines (res) and the server's skipped lines, written
 * into dir/reply.html and sent from the file; top_n's {results, ...}. */
void infer_page_one(req_t *r, json_t *job, json_t *body, const infer_image *img);
void infer_page_many(req_t *r, json_t *job, const char *dir, FILE *res, json_t *skipped, json_t *tail);
void infer_page_top_n(req_t *r, json_t *job, json_t *body);
/* Pieces of those pages for the generic models' (api_infer_generic.c): the head and
 * breadcrumbs, the tail, the snapshot line of a body, an image of the data roots. */
void infer_page_start(FILE *f, const req_t *r, json_t *job, const char *what);
void infer_page_end(FILE *f);
void infer_page_snapshot(FILE *f, json_t *body);
void infer_page_image_url(FILE *f, const req_t *r, const char *path);

#endif
