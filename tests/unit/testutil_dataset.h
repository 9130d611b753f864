/* Helpers of the dataset tests (test_dataset_*.c): files under cd_test_tmpdir() named by
 * their path relative to it, images written there, dataset runs and their output lines.
 * A failure in a helper is a failed check naming the file. */
#ifndef CDIGITS_TESTUTIL_DATASET_H
#define CDIGITS_TESTUTIL_DATASET_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/image.h"

/* Makes the folders rel is in. */
void cd_test_make_parent(const char *rel);
/* Writes len bytes / text to rel (its folders made first, the file replaced whole). */
void cd_test_write_bytes(const char *rel, const void *data, size_t len);
void cd_test_write_text(const char *rel, const char *text);
/* A planar image of fresh random pixels (free with cd_image_free). */
void cd_test_random_image(cd_image_t *img, int c, int h, int w);
/* img as a PNG (level 6), or a JPEG (quality 90) when jpeg, at rel. */
void cd_test_write_image(const char *rel, const cd_image_t *img, int jpeg);
/* Whether rel exists; whether rel a and rel b hold the same bytes. */
int cd_test_exists(const char *rel);
int cd_test_same_file(const char *a, const char *b);

/* cd_dataset_create of dataset.json text `json` into the folder rel outdir (a config
 * that does not parse is a failed check); *lines, unless lines is NULL, gets the
 * progress lines as a JSON array (cd_test_read_lines). Returns cd_dataset_create's rc. */
int cd_test_dataset_run(const char *json, const char *outdir, cd_dataset_result_t *res, json_t **lines,
                        char *err, size_t errlen);
/* Every line of f from its start as a JSON object (one that is not, or has no string
 * `type`, is a failed check); a new array. */
json_t *cd_test_read_lines(FILE *f);
/* Whether the `message` of one of lines holds text. */
int cd_test_log_mentions(json_t *lines, const char *text);
/* outdir/stats.json (rel), parsed; NULL and a failed check when it is not JSON. */
json_t *cd_test_load_stats(const char *outdir);
/* outdir/SPLIT.db and outdir/SPLIT_labels.db (rel) of a generic dataset opened into
 * *features and *labels (NULL, with a failed check, where one does not open), each
 * checked with cd_db_verify and both of one record count: that count (0 unless both
 * opened). */
size_t cd_test_open_split_dbs(const char *outdir, const char *split, cd_db_t **features, cd_db_t **labels);

#endif
