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

/* The model job named by the field job_id (or, without it, the route's <id>) and the
 * snapshot the request names (infer_snapshot: into *iteration and *epoch); NULL after a
 * reply (400, 404). Caller decrefs. */
json_t *infer_model_from_request(req_t *r, long *iteration, double *epoch);
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

/* The image a one-image page shows: a file of the data roots, or the upload. */
typedef struct infer_image {
    const char *path;     /* the resolved image_path, or NULL for an upload */
    const char *b64;      /* the upload as base64 */
    int format;           /* the upload's enum cd_image_format */
    const char *filename; /* the upload's name, or NULL */
} infer_image;
/* snapshot_iteration and snapshot_epoch (null when unknown) into out; returns out. */
json_t *infer_snapshot_fields(json_t *out, long iteration, double epoch);

/* The image of a one-image request: image_path (a file of the data roots, resolved into
 * path[len]) or the upload image_file, as the worker's request {"op": op, "image": path}
 * or {"op": op, "image_b64": ...} into *req (caller decrefs), and what a page shows of
 * it into *shown (pointing into path and *req). CD_ERR after a reply (400: neither, a
 * path outside the data roots, an upload that is not an image). */
int infer_image_request(req_t *r, const char *op, char *path, size_t len, infer_image *shown, json_t **req);

/* ---- lists: classify_many and top_n, infer_many and infer_db ------------------------- */

/* A list request's files: the list (or db) the worker reads, its results file, the
 * request folder that holds them, and the lines refused here. */
typedef struct infer_list {
    char dir[PATH_MAX];
    char src[PATH_MAX + 32], results[PATH_MAX + 32];
    json_t *skipped; /* {key: "line N: why"} of lines refused here, the first 1000 */
    long nskipped;   /* all of them */
    long written;    /* lines written for the worker */
} infer_list;

/* Counts a refused line of the upload and names it under key. */
void infer_list_skip(infer_list *l, const char *key, long line, const char *why);
/* A path of a list line: folder/rel (rel when absolute or without a folder) into
 * path[plen], the key the answer names it by, and resolved inside the data roots into
 * real[rlen]. NULL when it may be read; else why not (what: "path", "label path"), in
 * msg[mlen]. */
const char *infer_list_path(req_t *r, const char *folder, const char *rel, const char *what, char *path, size_t plen,
                            char *real, size_t rlen, char *msg, size_t mlen);
/* Checks one line of the upload (text: without its newline, writable; folder: the
 * image_folder as given, or "") into out, counting it in l->written, or skips it. */
typedef void (*infer_line_fn)(req_t *r, infer_list *l, FILE *out, char *text, long lineno, const char *folder);
/* The uploaded image_list, line by line through line_fn, into l->src of a new request
 * folder l->dir (named by what), with l->results beside it; at most num_test_images
 * lines. lines: the format a missing list's 400 names ("path [label]"); verb: what no
 * usable line makes impossible ("classify"). CD_ERR after a reply. */
int infer_list_prepare(req_t *r, json_t *job, const char *what, const char *lines, const char *verb,
                       infer_line_fn line_fn, infer_list *l);
/* l->dir/reply.json (its name into path[len]) opened for the JSON reply made from the
 * results file res; NULL after a 500, res closed then (res NULL: it could not be read). */
FILE *infer_list_reply_open(req_t *r, const infer_list *l, FILE *res, char *path, size_t len);
/* The end of a list's JSON reply: `"skipped":{...}` (the lines refused here, then the
 * result lines that have one of fields[0..n), as "line N: why") and the members of tail
 * (borrowed), closing the reply's object. */
void infer_write_skipped(FILE *out, FILE *res, const infer_list *l, const char *const *fields, size_t n,
                         json_t *tail);

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


/* The pages of the JSON answers' bodies (api_infer.c builds them): classify_one's
 * {predictions, visualizations, snapshot_*, note}; classify_many's summary fields
 * (tail) with the worker's result lines (res) and the server's skipped lines, written
 * into dir/reply.html and sent from the file; top_n's {results, ...}. */
void infer_page_one(req_t *r, json_t *job, json_t *body, const infer_image *img);
void infer_page_many(req_t *r, json_t *job, const char *dir, FILE *res, json_t *skipped, json_t *tail);
void infer_page_top_n(req_t *r, json_t *job, json_t *body);
/* Pieces of those pages for the generic models' (api_infer_generic.c): a page written
 * into dir/reply.html (its name into path[len], for infer_reply_file) with its head and
 * breadcrumbs written, or NULL after a 500; the tail; the snapshot line of a body; the
 * <img src> of a request's image. */
FILE *infer_page_file(req_t *r, const char *dir, json_t *job, const char *what, char *path, size_t len);
void infer_page_end(FILE *f);
void infer_page_snapshot(FILE *f, json_t *body);
void infer_page_image_src(FILE *f, const req_t *r, const infer_image *img);

#endif
