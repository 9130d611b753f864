/* The dataset task end to end in a temporary folder: class folders with PNGs, JPEGs,
 * a junk file and a truncated PNG; minimum per class; separate val folder; text lists;
 * dataset.json parsing; reproducibility across thread counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

/* A random image of w x h, written as PNG or JPEG at rel. */
static void write_image(const char *rel, int w, int h, int jpeg)
{
    cd_image_t img;
    cd_test_random_image(&img, 3, h, w);
    cd_test_write_image(rel, &img, jpeg);
    cd_image_free(&img);
}

static void make_tree(void)
{
    char name[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "src/cat/c%d.png", i);
        write_image(name, 20 + i, 12, 0);
    }
    write_image("src/cat/deeper/c9.png", 9, 30, 0); /* found recursively */
    cd_test_write_text("src/cat/notes.txt", "not an image\n");
    /* a PNG cut in half */
    write_image("src/cat/broken.png", 40, 40, 0);
    size_t len;
    char *d = cd_read_file(cd_test_tmp_path("src/cat/broken.png"), &len);
    cd_write_file_atomic(cd_test_tmp_path("src/cat/broken.png"), d, len / 2);
    free(d);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "src/dog/d%d.jpg", i);
        write_image(name, 16, 10 + i, 1);
    }
    write_image("src/bird/b0.png", 8, 8, 0); /* one image: below the minimum */
}

static char *cfg_json(const char *extra)
{
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"folder_train\": \"%s\", \"width\": 8, \"height\": 6, \"channels\": 3, "
             "\"resize_mode\": \"fill\", \"encoding\": \"png\", \"seed\": 42, \"threads\": 2, "
             "\"some_future_key\": [1, 2] %s%s}",
             cd_test_tmp_path("src"), extra[0] ? ", " : "", extra);
    return buf;
}

static void test_folders(void)
{
    char err[1024] = "";
    cd_dataset_result_t res;
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(cfg_json(""), "job1", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK, "create: %s", err);
    /* cat: 6 good + 1 broken listed -> val round(7 * .25) = 2; dog: 5 -> val 1 */
    CHECK(res.num_classes == 2, "classes %d (bird dropped)", res.num_classes);
    CHECK(res.skipped == 2, "skipped %zu (notes.txt and broken.png)", res.skipped);
    CHECK(res.count[0] + res.count[1] == 11 && res.count[2] == 0, "train %zu val %zu test %zu",
          res.count[0], res.count[1], res.count[2]);
    CHECK(res.count[1] == 3 || res.count[1] == 2, "val %zu", res.count[1]);
    CHECK(cd_test_log_mentions(lines, "bird") && cd_test_log_mentions(lines, "notes.txt") &&
              cd_test_log_mentions(lines, "broken.png"),
          "the log names the dropped class and the skipped files");
    size_t n = json_array_size(lines);
    json_t *ds = json_array_get(lines, n - 2), *done = json_array_get(lines, n - 1);
    CHECK(n >= 2 && strcmp(json_string_value(json_object_get(ds, "type")), "dataset") == 0 &&
              strcmp(json_string_value(json_object_get(done, "type")), "done") == 0,
          "last lines are dataset and done");
    CHECK(json_integer_value(json_object_get(ds, "skipped")) == 2, "dataset line skipped");
    json_t *classes = json_object_get(ds, "classes");
    CHECK(json_array_size(classes) == 2 &&
              strcmp(json_string_value(json_object_get(json_array_get(classes, 0), "label")),
                     "cat") == 0,
          "classes in the dataset line");
    int saw_create = 0;
    size_t i;
    json_t *j;
    json_array_foreach(lines, i, j)
    {
        const char *stage = json_string_value(json_object_get(j, "stage"));
        saw_create |= stage && strcmp(stage, "create") == 0;
    }
    CHECK(saw_create, "progress lines of the create stage");
    json_decref(lines);

    CHECK(cd_test_exists("job1/stats.json") && cd_test_exists("job1/train.db") && cd_test_exists("job1/val.db") &&
              !cd_test_exists("job1/test.db") && cd_test_exists("job1/mean.png"),
          "files");
    char **names;
    int nn;
    CHECK(cd_labels_load(cd_test_tmp_path("job1/labels.txt"), &names, &nn) == CD_OK && nn == 2 &&
              strcmp(names[0], "cat") == 0 && strcmp(names[1], "dog") == 0,
          "labels.txt");
    cd_labels_free(names, nn);

    /* the mean is the average of the train records (PNG is lossless) */
    cd_db_t *db = cd_db_open(cd_test_tmp_path("job1/train.db"), err, sizeof err);
    CHECK(db && cd_db_verify(db, err, sizeof err) == CD_OK, "train.db verifies: %s", err);
    if (db) {
        CHECK(cd_db_channels(db) == 3 && cd_db_height(db) == 6 && cd_db_width(db) == 8 &&
                  cd_db_encoding(db) == CD_ENC_PNG,
              "shape");
        double acc[144] = {0};
        uint8_t rec[144];
        for (size_t r = 0; r < cd_db_count(db); r++) {
            CHECK(cd_db_read(db, r, rec, err, sizeof err) == CD_OK, "read");
            CHECK(cd_db_label(db, r) == 0 || cd_db_label(db, r) == 1, "label");
            for (int k = 0; k < 144; k++)
                acc[k] += rec[k];
        }
        int c, h, w;
        float *mean;
        CHECK(cd_mean_load(cd_test_tmp_path("job1/mean.bin"), &c, &h, &w, &mean) == CD_OK &&
                  c == 3 && h == 6 && w == 8,
              "mean.bin");
        double worst = 0;
        for (int k = 0; k < 144; k++)
            worst = fmax(worst, fabs(acc[k] / (double)cd_db_count(db) - mean[k]));
        CHECK(worst < 1e-3, "mean matches the train records (%.g)", worst);
        free(mean);
        cd_db_close(db);
    }

    /* the same seed gives the same files whatever the thread count */
    rc = cd_test_dataset_run(cfg_json("\"threads\": 1"), "job2", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "create job2: %s", err);
    size_t l1, l2;
    char *a = cd_read_file(cd_test_tmp_path("job1/train.db"), &l1);
    char *b = cd_read_file(cd_test_tmp_path("job2/train.db"), &l2);
    CHECK(a && b && l1 == l2 && memcmp(a, b, l1) == 0, "train.db is reproducible");
    free(a);
    free(b);
}

static void test_min_max(void)
{
    char err[1024] = "";
    cd_dataset_result_t res;
    /* a stale stats.json of an earlier run must disappear when a run fails */
    cd_mkdirs(cd_test_tmp_path("job3"), 0755);
    cd_test_write_text("job3/stats.json", "{}");
    int rc = cd_test_dataset_run(cfg_json("\"min_per_class\": 100, \"max_per_class\": 0"), "job3", &res, NULL,
                 err, sizeof err);
    CHECK(rc == CD_ERR, "min 100 fails");
    CHECK(strstr(err, "no class has at least 100 images in") && strstr(err, "src") &&
              strstr(err, "lower the minimum per class"),
          "message: %s", err);
    CHECK(!cd_test_exists("job3/stats.json"), "no stats.json after a failure");

    rc = cd_test_dataset_run(cfg_json("\"min_per_class\": 1, \"max_per_class\": 3, \"pct_val\": 0, "
                      "\"encoding\": \"none\", \"resize_mode\": \"crop\""),
             "job4", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "max 3: %s", err);
    CHECK(res.num_classes == 3 && res.count[0] <= 7 && res.count[0] >= 6,
          "3 classes (bird kept with min 1), at most 3 each: %d classes, %zu images",
          res.num_classes, res.count[0]);
}

static void test_val_folder_and_text(void)
{
    char err[1024] = "", extra[8192];
    cd_dataset_result_t res;
    write_image("valsrc/dog/v0.png", 7, 7, 0);
    write_image("valsrc/dog/v1.png", 7, 9, 0);
    write_image("valsrc/fish/f0.png", 7, 7, 0);
    snprintf(extra, sizeof extra, "\"folder_val\": \"%s\", \"pct_test\": 20",
             cd_test_tmp_path("valsrc"));
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(cfg_json(extra), "job5", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK, "val folder: %s", err);
    CHECK(res.count[1] == 2, "val from the folder: %zu", res.count[1]);
    /* test 20%: round(7 * .2) + round(5 * .2) = 2 listed, one may be the broken PNG */
    CHECK(res.count[0] + res.count[2] == 11 && res.count[2] >= 1 && res.count[2] <= 2,
          "train %zu test %zu", res.count[0], res.count[2]);
    CHECK(cd_test_log_mentions(lines, "fish"), "unknown val class is reported");
    json_decref(lines);

    /* text lists: relative to textfile_root, absolute, bad lines */
    char list[8192];
    snprintf(list, sizeof list,
             "cat/c0.png 0\ncat/c1.png 0\n  cat/c2.png   0  \n%s 1\ndog/d1.jpg 1\n"
             "dog/d2.jpg 1\n# comment\n\nnolabel\ndog/d3.jpg 7\ncat/missing.png 0\n",
             cd_test_tmp_path("src/dog/d0.jpg"));
    cd_test_write_text("train.txt", list);
    cd_test_write_text("val.txt", "cat/c3.png 0\ndog/d4.jpg 1\n");
    cd_test_write_text("labels_in.txt", "cat\ndog\n");
    snprintf(extra, sizeof extra,
             "{\"textfile_train\": \"%s\", \"textfile_val\": \"%s\", \"textfile_labels\": "
             "\"%s\", \"textfile_root\": \"%s\", \"width\": 5, \"height\": 5, \"channels\": 1, "
             "\"resize_mode\": \"half_crop\", \"encoding\": \"jpg\"}",
             cd_test_tmp_path("train.txt"), cd_test_tmp_path("val.txt"), cd_test_tmp_path("labels_in.txt"),
             cd_test_tmp_path("src"));
    cd_dataset_config_t cfg;
    cd_dataset_config_init(&cfg);
    CHECK(cd_dataset_config_parse(extra, &cfg, err, sizeof err) == CD_OK, "text cfg: %s", err);
    FILE *f = tmpfile();
    rc = cd_dataset_create(&cfg, cd_test_tmp_path("job6"), f, &res, err, sizeof err);
    lines = cd_test_read_lines(f);
    fclose(f);
    cd_dataset_config_free(&cfg);
    CHECK(rc == CD_OK, "text lists: %s", err);
    CHECK(res.count[0] == 6 && res.count[1] == 2, "train %zu (6 good lines) val %zu",
          res.count[0], res.count[1]);
    CHECK(res.skipped == 3, "skipped %zu: the line without label, label 7, the missing file",
          res.skipped);
    CHECK(cd_test_log_mentions(lines, "train.txt:9") && cd_test_log_mentions(lines, "train.txt:10"),
          "bad lines are named with their line numbers");
    json_decref(lines);
    cd_db_t *db = cd_db_open(cd_test_tmp_path("job6/val.db"), err, sizeof err);
    CHECK(db && cd_db_channels(db) == 1 && cd_db_encoding(db) == CD_ENC_JPG &&
              cd_db_verify(db, err, sizeof err) == CD_OK,
          "val.db: %s", err);
    uint8_t rec[25];
    CHECK(db && cd_db_read(db, 0, rec, err, sizeof err) == CD_OK, "decode a jpg record: %s",
          err);
    cd_db_close(db);
}

/* Small classes keep a training image however the percentages round; a text list and a
 * labels file saved with a UTF-8 byte order mark (Windows editors) read as without one. */
static void test_small_classes_and_bom(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    const char *files[] = {"small/a/0.png", "small/a/1.png", "small/b/0.png", "small/b/1.png",
                           "small/c/0.png", "small/c/1.png", "small/c/2.png"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        write_image(files[i], 6, 6, 0);
    snprintf(json, sizeof json,
             "{\"folder_train\": \"%s\", \"width\": 6, \"height\": 6, \"channels\": 1, "
             "\"pct_val\": 75, \"encoding\": \"none\", \"seed\": 1}",
             cd_test_tmp_path("small"));
    int rc = cd_test_dataset_run(json, "job-small", &res, NULL, err, sizeof err);
    /* round(2 x 0.75) = 2 would take both images of a and of b: each gives one back */
    CHECK(rc == CD_OK && res.count[0] == 3 && res.count[1] == 4,
          "every class keeps one training image: train %zu (want 3), val %zu (want 4): %s", res.count[0],
          res.count[1], err);

    cd_test_write_text("bom-train.txt", "\xEF\xBB\xBF" "a/0.png 0\r\na/1.png 0\r\nb/0.png 1\r\nb/1.png 1\r\n");
    cd_test_write_text("bom-labels.txt", "\xEF\xBB\xBF" "apple\r\nbanana\r\n");
    snprintf(json, sizeof json,
             "{\"textfile_train\": \"%s\", \"textfile_labels\": \"%s\", \"textfile_root\": \"%s\", "
             "\"width\": 6, \"height\": 6, \"channels\": 1, \"pct_val\": 0, \"encoding\": \"none\"}",
             cd_test_tmp_path("bom-train.txt"), cd_test_tmp_path("bom-labels.txt"), cd_test_tmp_path("small"));
    json_t *lines = NULL;
    rc = cd_test_dataset_run(json, "job-bom", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK && res.count[0] == 4 && res.skipped == 0,
          "a list with a byte order mark: train %zu (want 4), skipped %zu: %s", res.count[0], res.skipped, err);
    json_decref(lines);
    char *labels = cd_read_file(cd_test_tmp_path("job-bom/labels.txt"), NULL);
    CHECK(labels && strcmp(labels, "apple\nbanana\n") == 0, "labels.txt without the mark: \"%s\"",
          labels ? labels : "(none)");
    free(labels);
}

/* The parse of one folder in the result: the entry for its own split, or NULL. */
static const struct cd_dataset_parse *parsed_of(const cd_dataset_result_t *res, int split)
{
    for (int i = 0; i < res->nparsed; i++)
        if (res->parsed[i].split == split)
            return &res->parsed[i];
    return NULL;
}

/* The `dataset` line of a run's output, or NULL. */
static json_t *dataset_line(json_t *lines)
{
    size_t i;
    json_t *j;
    json_array_foreach(lines, i, j) if (!strcmp(json_string_value(json_object_get(j, "type")), "dataset")) return j;
    return NULL;
}

/* folder_val and folder_test: their own minimum and maximum per class, one parse each. */
static void test_extra_folder_limits(void)
{
    char err[1024] = "", extra[8192], name[64];
    cd_dataset_result_t res;
    int ncat = 3 + (int)(cd_test_rand_u64() % 4); /* 3..6 cat images in each extra folder */
    for (int i = 0; i < ncat; i++) {
        snprintf(name, sizeof name, "xval/cat/v%d.png", i);
        write_image(name, 9, 7, 0);
        snprintf(name, sizeof name, "xtest/cat/t%d.jpg", i);
        write_image(name, 7, 9, 1);
    }
    write_image("xval/dog/v0.png", 5, 5, 0); /* one image: below the default minimum 2 */
    write_image("xtest/dog/t0.png", 5, 5, 0);
    write_image("xtest/dog/t1.png", 6, 5, 0);

    /* defaults: min 2 drops the val dog; no maximum */
    snprintf(extra, sizeof extra, "\"folder_val\": \"%s\", \"folder_test\": \"%s\"",
             cd_test_tmp_path("xval"), cd_test_tmp_path("xtest"));
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(cfg_json(extra), "job_x1", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK, "extra folders: %s", err);
    const struct cd_dataset_parse *tr = parsed_of(&res, CD_SPLIT_TRAIN), *va = parsed_of(&res, CD_SPLIT_VAL),
                                  *te = parsed_of(&res, CD_SPLIT_TEST);
    CHECK(res.nparsed == 3 && tr && va && te, "one parse per folder: %d", res.nparsed);
    if (tr && va && te) {
        CHECK(tr->label_count == 2 && tr->count[CD_SPLIT_VAL] == 0 && tr->count[CD_SPLIT_TEST] == 0 &&
                  tr->count[CD_SPLIT_TRAIN] == 12, /* the broken PNG is listed, then skipped */
              "train folder: %d classes, %zu/%zu/%zu", tr->label_count, tr->count[0], tr->count[1], tr->count[2]);
        CHECK(va->label_count == 1 && va->count[CD_SPLIT_VAL] == (size_t)ncat && va->count[CD_SPLIT_TRAIN] == 0 &&
                  va->count[CD_SPLIT_TEST] == 0,
              "val folder keeps cat only (%d images): %d classes, %zu", ncat, va->label_count, va->count[1]);
        CHECK(te->label_count == 2 && te->count[CD_SPLIT_TEST] == (size_t)ncat + 2, "test folder: %d classes, %zu",
              te->label_count, te->count[2]);
    }
    CHECK(res.count[CD_SPLIT_VAL] == (size_t)ncat && res.count[CD_SPLIT_TEST] == (size_t)ncat + 2,
          "val.db %zu test.db %zu", res.count[1], res.count[2]);
    json_t *tasks = json_object_get(dataset_line(lines), "parse_tasks");
    CHECK(json_array_size(tasks) == 3 &&
              !strcmp(json_string_value(json_object_get(json_array_get(tasks, 0), "name")), "Parse Folder (train)") &&
              !strcmp(json_string_value(json_object_get(json_array_get(tasks, 1), "name")), "Parse Folder (val)") &&
              !strcmp(json_string_value(json_object_get(json_array_get(tasks, 2), "name")), "Parse Folder (test)") &&
              json_integer_value(json_object_get(json_array_get(tasks, 1), "val_count")) == ncat &&
              json_integer_value(json_object_get(json_array_get(tasks, 1), "train_count")) == 0,
          "the dataset line names each folder's parse as DIGITS does");
    CHECK(cd_test_log_mentions(lines, "class dog in") && cd_test_log_mentions(lines, "fewer than the minimum 2"),
          "the dropped val class is named");
    json_decref(lines);

    /* the val folder's own maximum and minimum; the train folder's limits do not apply */
    int max = 1 + (int)(cd_test_rand_u64() % (uint64_t)(ncat - 1)); /* 1..ncat-1 */
    snprintf(extra, sizeof extra, "\"folder_val\": \"%s\", \"val_min_per_class\": 1, \"val_max_per_class\": %d, "
             "\"max_per_class\": 2, \"pct_test\": 0", cd_test_tmp_path("xval"), max);
    rc = cd_test_dataset_run(cfg_json(extra), "job_x2", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "val limits: %s", err);
    va = parsed_of(&res, CD_SPLIT_VAL);
    CHECK(va && va->label_count == 2 && va->count[CD_SPLIT_VAL] == (size_t)max + 1,
          "val max %d and min 1: %d classes, %zu images", max, va ? va->label_count : -1,
          va ? va->count[CD_SPLIT_VAL] : 0);
    tr = parsed_of(&res, CD_SPLIT_TRAIN);
    CHECK(tr && tr->count[CD_SPLIT_TRAIN] == 4, "train max 2 over 2 classes: %zu", tr ? tr->count[0] : 0);

    /* the test folder's minimum above every class: an error, not an empty split */
    snprintf(extra, sizeof extra, "\"folder_test\": \"%s\", \"test_min_per_class\": %d", cd_test_tmp_path("xtest"),
             ncat + 1);
    rc = cd_test_dataset_run(cfg_json(extra), "job_x3", &res, NULL, err, sizeof err);
    CHECK(rc == CD_ERR && strstr(err, "gave no test images") && strstr(err, "lower its minimum"),
          "test min %d: %s", ncat + 1, err);
    CHECK(!cd_test_exists("job_x3/stats.json"), "a failed run leaves no stats.json");
}

/* mean.jpg beside mean.png: the same picture, DIGITS's name for it. */
static void test_mean_jpg(void)
{
    char err[1024] = "";
    cd_dataset_result_t res;
    int rc = cd_test_dataset_run(cfg_json("\"pct_val\": 0"), "job_m", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "dataset: %s", err);
    size_t jl = 0, pl = 0;
    char *jpg = cd_read_file(cd_test_tmp_path("job_m/mean.jpg"), &jl);
    char *png = cd_read_file(cd_test_tmp_path("job_m/mean.png"), &pl);
    CHECK(jpg && jl > 3 && (uint8_t)jpg[0] == 0xFF && (uint8_t)jpg[1] == 0xD8, "mean.jpg is a JPEG");
    cd_image_t a = {0}, b = {0};
    CHECK(jpg && png && cd_image_decode(jpg, jl, 3, &a, err, sizeof err) == CD_OK &&
              cd_image_decode(png, pl, 3, &b, err, sizeof err) == CD_OK,
          "decode the means: %s", err);
    CHECK(a.w == 8 && a.h == 6 && a.c == 3, "mean.jpg is the dataset's size: %dx%dx%d", a.w, a.h, a.c);
    /* JPEG's error (4:2:0 chroma, quantisation) on a noisy 8x6 picture: small on average */
    double total = 0;
    size_t n = (size_t)3 * a.h * a.w;
    for (size_t i = 0; a.data && b.data && a.w == b.w && a.h == b.h && i < n; i++)
        total += abs((int)a.data[i] - (int)b.data[i]);
    CHECK(a.data && b.data && total / (double)n <= 10, "mean.jpg matches mean.png within JPEG error: %.1f levels",
          total / (double)n);
    cd_image_free(&a);
    cd_image_free(&b);
    free(jpg);
    free(png);
}

/* textfile_val_root resolves the val list; a list whose images are all missing fails. */
static void test_list_roots(void)
{
    char err[1024] = "", cfgtext[8192];
    cd_dataset_result_t res;
    write_image("vroot/a/x0.png", 6, 6, 0);
    write_image("vroot/b/x1.jpg", 6, 6, 1);
    write_image("vroot/b/x2.png", 7, 6, 0);
    cd_test_write_text("lt_train.txt", "cat/c0.png 0\ncat/c1.png 0\ndog/d1.jpg 1\ndog/d2.jpg 1\n");
    cd_test_write_text("lt_val.txt", "a/x0.png 0\nb/x1.jpg 1\nb/x2.png 1\n");
    cd_test_write_text("lt_labels.txt", "cat\ndog\n");
    const char *fmt = "{\"textfile_train\": \"%s\", \"textfile_val\": \"%s\", \"textfile_labels\": \"%s\", "
                      "\"textfile_root\": \"%s\", \"textfile_val_root\": \"%s\", \"width\": 5, \"height\": 5}";
    snprintf(cfgtext, sizeof cfgtext, fmt, cd_test_tmp_path("lt_train.txt"), cd_test_tmp_path("lt_val.txt"),
             cd_test_tmp_path("lt_labels.txt"), cd_test_tmp_path("src"), cd_test_tmp_path("vroot"));
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(cfgtext, "job_l1", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK && res.count[CD_SPLIT_VAL] == 3 && res.skipped == 0,
          "val list under textfile_val_root: %s; val %zu skipped %zu", err, res.count[1], res.skipped);
    CHECK(json_object_get(dataset_line(lines), "parse_tasks") == NULL, "text lists have no folder parse");
    json_decref(lines);

    /* the val list's root left out: its paths start from textfile_root, where they are
     * all missing; the run fails and says how many were skipped */
    snprintf(cfgtext, sizeof cfgtext, fmt, cd_test_tmp_path("lt_train.txt"), cd_test_tmp_path("lt_val.txt"),
             cd_test_tmp_path("lt_labels.txt"), cd_test_tmp_path("src"), "");
    rc = cd_test_dataset_run(cfgtext, "job_l2", &res, &lines, err, sizeof err);
    CHECK(rc == CD_ERR && strstr(err, "none of the 3 val images could be read (3 files skipped") &&
              strstr(err, "textfile_val_root"),
          "all val images missing: %s", err);
    CHECK(cd_test_log_mentions(lines, "a/x0.png"), "the missing images are named in the log");
    CHECK(!cd_test_exists("job_l2/stats.json"), "and the dataset is not complete");
    json_decref(lines);
}

static void test_config(void)
{
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"folder_train\": \"/x\", \"resize_mode\": \"stretch\"}",
         "resize_mode is \"stretch\"; it must be one of squash, crop, fill, half_crop"},
        {"{\"folder_train\": \"/x\", \"encoding\": \"gif\"}", "one of none, png, jpg"},
        {"{\"folder_train\": \"/x\", \"channels\": 2}", "1 (grayscale) or 3 (color)"},
        {"{\"folder_train\": \"/x\", \"width\": 0}", "width is 0"},
        {"{\"folder_train\": \"/x\", \"pct_val\": 60, \"pct_test\": 40}", "below 100"},
        {"{\"folder_train\": \"/x\", \"pct_val\": -1}", "percentage"},
        {"{\"folder_train\": \"/x\", \"min_per_class\": 5, \"max_per_class\": 3}",
         "max_per_class (3) is below min_per_class (5)"},
        {"{\"folder_train\": \"/x\", \"val_min_per_class\": 4, \"val_max_per_class\": 2}",
         "val_max_per_class (2) is below val_min_per_class (4)"},
        {"{\"folder_train\": \"/x\", \"test_max_per_class\": -1}", "test_max_per_class is -1"},
        {"{\"folder_train\": 7}", "folder_train is 7; it must be a folder"},
        {"{}", "set either folder_train"},
        {"{\"folder_train\": \"/x\", \"textfile_train\": \"/y\"}", "only one of"},
        {"{\"textfile_train\": \"/y\"}", "textfile_labels"},
        {"[1]", "JSON object"},
        {"{\"folder_train\": ", "fix the JSON"},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(bad); i++) {
        cd_dataset_config_t cfg;
        char err[512] = "";
        cd_dataset_config_init(&cfg);
        CHECK(cd_dataset_config_parse(bad[i].json, &cfg, err, sizeof err) == CD_ERR &&
                  strstr(err, bad[i].needle),
              "%s -> %s", bad[i].json, err);
        cd_dataset_config_free(&cfg);
    }
    cd_dataset_config_t cfg;
    char err[512] = "";
    /* the defaults docs/worker-protocol.md lists for dataset.json */
    cd_dataset_config_init(&cfg);
    CHECK(cfg.pct_val == 25 && cfg.pct_test == 0 && cfg.min_per_class == 2 && cfg.max_per_class == 0 &&
              cfg.channels == 3 && cfg.width == 256 && cfg.height == 256 && cfg.resize_mode == CD_RESIZE_SQUASH &&
              cfg.encoding == CD_ENC_NONE && cfg.seed == 0 && cfg.threads == 0,
          "defaults: pct_val %g pct_test %g min %d max %d %dx%dx%d resize %d encoding %d seed %llu threads %d",
          cfg.pct_val, cfg.pct_test, cfg.min_per_class, cfg.max_per_class, cfg.channels, cfg.height, cfg.width,
          cfg.resize_mode, cfg.encoding, (unsigned long long)cfg.seed, cfg.threads);
    CHECK(!cfg.folder_train[0] && !cfg.folder_val[0] && !cfg.folder_test[0] && !cfg.textfile_train[0] &&
              !cfg.textfile_val[0] && !cfg.textfile_test[0] && !cfg.textfile_labels[0] && !cfg.textfile_root[0],
          "every path defaults to \"\"");
    cd_dataset_config_free(&cfg);
    cd_dataset_config_init(&cfg);
    CHECK(cd_dataset_config_parse("{\"folder_train\": \"/x\", \"width\": \"28\", \"height\": "
                                  "28.0, \"seed\": null, \"pct_val\": \"12.5\", \"new\": 1}",
                                  &cfg, err, sizeof err) == CD_OK,
          "lenient numbers: %s", err);
    CHECK(cfg.width == 28 && cfg.height == 28 && cfg.pct_val == 12.5 && cfg.channels == 3 &&
              cfg.resize_mode == CD_RESIZE_SQUASH && cfg.min_per_class == 2,
          "values and defaults");
    cd_dataset_config_free(&cfg);
}

int main(void)
{
    cd_test_init("test_dataset_create");
    make_tree();
    test_folders();
    test_min_max();
    test_val_folder_and_text();
    test_small_classes_and_bom();
    test_extra_folder_limits();
    test_mean_jpg();
    test_list_roots();
    test_config();
    return cd_test_finish();
}
