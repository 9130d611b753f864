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
