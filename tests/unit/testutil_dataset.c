/* Helpers of the dataset tests: see testutil_dataset.h. */
#include "testutil_dataset.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/util.h"
#include "testutil.h"

void cd_test_make_parent(const char *rel)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s", cd_test_tmp_path(rel));
    *strrchr(dir, '/') = 0;
    CHECK(cd_mkdirs(dir, 0755) == CD_OK, "cannot make the folder %s", dir);
}

void cd_test_write_bytes(const char *rel, const void *data, size_t len)
{
    cd_test_make_parent(rel);
    const char *path = cd_test_tmp_path(rel);
    CHECK(cd_write_file_atomic(path, data, len) == CD_OK, "cannot write %s", path);
}

void cd_test_write_text(const char *rel, const char *text)
{
    cd_test_write_bytes(rel, text, strlen(text));
}

void cd_test_random_image(cd_image_t *img, int c, int h, int w)
{
    CHECK(cd_image_alloc(img, c, h, w, NULL, 0) == CD_OK, "alloc a %dx%dx%d image", c, h, w);
    for (size_t i = 0; i < (size_t)c * h * w; i++)
        img->data[i] = (uint8_t)(cd_test_rand_u64() >> 56);
}

void cd_test_write_image(const char *rel, const cd_image_t *img, int jpeg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc = jpeg ? cd_image_encode_jpeg(img, 90, &buf, &len, err, sizeof err)
                  : cd_image_encode_png(img, 6, &buf, &len, err, sizeof err);
    CHECK(rc == CD_OK, "encode %s: %s", rel, err);
    if (rc != CD_OK)
        return;
    cd_test_write_bytes(rel, buf, len);
    free(buf);
}

int cd_test_exists(const char *rel)
{
    struct stat st;
    return stat(cd_test_tmp_path(rel), &st) == 0;
}

int cd_test_same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = cd_read_file(cd_test_tmp_path(a), &la), *y = cd_read_file(cd_test_tmp_path(b), &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

int cd_test_dataset_run(const char *json, const char *outdir, cd_dataset_result_t *res, json_t **lines,
                        char *err, size_t errlen)
{
    cd_dataset_config_t cfg;
    cd_dataset_config_init(&cfg);
    int rc = cd_dataset_config_parse(json, &cfg, err, errlen);
    CHECK(rc == CD_OK, "config: %s", err);
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile for the progress lines");
    if (rc == CD_OK && f)
        rc = cd_dataset_create(&cfg, cd_test_tmp_path(outdir), f, res, err, errlen);
    if (lines)
        *lines = f ? cd_test_read_lines(f) : json_array();
    if (f)
        fclose(f);
    cd_dataset_config_free(&cfg);
    return rc;
}

json_t *cd_test_read_lines(FILE *f)
{
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    rewind(f);
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        CHECK(j && json_is_string(json_object_get(j, "type")), "bad line: %s", line);
        if (j)
            json_array_append_new(arr, j);
    }
    free(line);
    return arr;
}

int cd_test_log_mentions(json_t *lines, const char *text)
{
    size_t i;
    json_t *j;
    json_array_foreach(lines, i, j)
    {
        const char *m = json_string_value(json_object_get(j, "message"));
        if (m && strstr(m, text))
            return 1;
    }
    return 0;
}

json_t *cd_test_load_stats(const char *outdir)
{
    char rel[4200];
    snprintf(rel, sizeof rel, "%s/stats.json", outdir);
    json_error_t je;
    json_t *st = json_load_file(cd_test_tmp_path(rel), 0, &je);
    CHECK(st != NULL, "%s: %s", rel, je.text);
    return st;
}

size_t cd_test_open_split_dbs(const char *outdir, const char *split, cd_db_t **features, cd_db_t **labels)
{
    static const char *const suffix[2] = {"", "_labels"};
    cd_db_t **db[2] = {features, labels};
    for (int k = 0; k < 2; k++) {
        char rel[4200], err[512] = "";
        snprintf(rel, sizeof rel, "%s/%s%s.db", outdir, split, suffix[k]);
        *db[k] = cd_db_open(cd_test_tmp_path(rel), err, sizeof err);
        CHECK(*db[k] != NULL, "%s: %s", rel, err);
        if (*db[k])
            CHECK(cd_db_verify(*db[k], err, sizeof err) == CD_OK, "%s verifies: %s", rel, err);
    }
    if (!*features || !*labels)
        return 0;
    size_t n = cd_db_count(*features);
    CHECK(cd_db_count(*labels) == n, "%s of %s: %zu label records for %zu records", split, outdir,
          cd_db_count(*labels), n);
    return n;
}
