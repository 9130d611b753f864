/* A dataset's records for the explorers (api_datasets.c: the JSON one and the record
 * images; api_dataset_pages.c: DIGITS's explorer page and summary), and the handlers
 * the route table names beside those of internal.h. */
#ifndef CDIGITS_SERVER_API_DATASETS_H
#define CDIGITS_SERVER_API_DATASETS_H

#include <stddef.h>

#include "internal.h"

#include "cdigits/dataset.h"

#define EXPLORE_MAX_SIZE 1000 /* records per page */

/* Opens <dataset dir>/<split>.db of a dataset job (split: cd_split_name's index). The
 * db, or NULL after a reply (404: not a dataset or no such file; 500: a broken file). */
cd_db_t *dataset_split_open(req_t *r, json_t *job, int split);
/* Opens file (a jobdir_file: a split's .db or label db) of the job folder dir: its own
 * file, never one a link points to. The db, or NULL with why; *missing (may be NULL) is
 * 1 when the file is not there or not a plain file (a 404), 0 when it is broken. */
cd_db_t *dataset_own_db(const char *dir, int file, int *missing, char *why, size_t len);
/* The index of split name (train, val, test), or -1 after a 404. */
int dataset_split_param(req_t *r, const char *name);
/* The record index of the route's <index> (params[2]) in db, whose split params[1]
 * names (what: "split", "labels": the word of the 404). CD_OK with *index, or CD_ERR
 * after a 404 that says how many records there are. */
int dataset_record_param(req_t *r, const cd_db_t *db, const char *what, size_t *index);

/* Stores and starts the dataset job id made in dir (v: the validated fields, with
 * dataset_name and group_name; form: the posted fields, conf: the job's config row,
 * either NULL when out of memory; both borrowed) and answers it as api_reply_created
 * does. CD_OK, or CD_ERR after a reply: the caller removes dir. The classification
 * form and every data extension's (api_generic.c) create their jobs through it. */
int dataset_job_start(req_t *r, json_t *v, const char *id, const char *dir, json_t *form, json_t *conf);

/* The records of db on page `page` (pages of `size`, from 0) among those of class label
 * (-1: every class): their indices go to out (room for size), their number to *nout.
 * Returns how many records of the split have that label (all of them for -1). Reads the
 * labels table only: 4 bytes a record. */
long long dataset_page(const cd_db_t *db, long long label, long long page, long long size, size_t *out,
                       size_t *nout);

/* GET /datasets/images/classification/explore?job_id=&db=&page=&size=&label=: DIGITS's
 * explorer page. */
void h_dataset_explore_page(req_t *r);
/* GET /datasets/summary?job_id=: DIGITS's summary fragment of a dataset. */
void h_dataset_summary(req_t *r);

#endif
