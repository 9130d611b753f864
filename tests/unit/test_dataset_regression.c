/* The regression and pairs tasks end to end in a temporary folder. Every image is one
 * solid colour of its own, so a record tells which image it came from whatever the
 * resize, and the test checks each label record against the targets (or the classes)
 * it wrote for that image: lists with spaces, CRLF, a BOM, comments and lines of the
 * wrong length; a CSV with a header and quotes; splits; stats.json; the mean;
 * reproducibility across thread counts; pairs from folders and from text lists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

/* A w x h PNG at rel, every pixel (r, g, b). */
static void write_solid(const char *rel, int w, int h, int r, int g, int b)
{
    cd_image_t img;
    CHECK(cd_image_alloc(&img, 3, h, w, NULL, 0) == CD_OK, "alloc");
    size_t plane = (size_t)w * h;
    memset(img.data, r, plane);
    memset(img.data + plane, g, plane);
    memset(img.data + 2 * plane, b, plane);
    cd_test_write_image(rel, &img, 0);
    cd_image_free(&img);
}

/* ---- regression --------------------------------------------------------------- */

#define NREG 16
#define K 3

typedef struct reg_image {
    char rel[64];  /* under src/ */
    int r, g, b;   /* its colour; r is unique */
    float t[K];    /* its targets */
    int listed;    /* on a good line of the list */
    int seen;      /* records found per split */
} reg_image;

static reg_image g_reg[NREG];

static void make_reg_images(void)
{
    for (int i = 0; i < NREG; i++) {
        reg_image *im = &g_reg[i];
        snprintf(im->rel, sizeof im->rel, i % 3 == 0 ? "img %02d.png" : "img%02d.png", i);
        im->r = 10 + 15 * i;
        im->g = (int)(cd_test_rand_u64() % 256);
        im->b = (int)(cd_test_rand_u64() % 256);
        for (int j = 0; j < K; j++)
            im->t[j] = (float)cd_test_uniform(-1000, 1000);
        char rel[128];
        snprintf(rel, sizeof rel, "src/%s", im->rel);
        write_solid(rel, 5 + i % 4, 7 + i % 3, im->r, im->g, im->b);
    }
}

static int reg_find(int r)
{
    for (int i = 0; i < NREG; i++)
        if (g_reg[i].r == r)
            return i;
    return -1;
}

/* Reads outdir's split: every feature record must be the solid colour of a listed image
 * and its label record that image's targets. Returns the records; adds the train
 * targets' min/sum/max. */
static size_t check_reg_split(const char *outdir, const char *split, double *mn, double *sum, double *mx)
{
    char rel[256], err[512] = "";
    snprintf(rel, sizeof rel, "%s/%s.db", outdir, split);
    if (!cd_test_exists(rel))
        return 0;
    cd_db_t *fdb, *ldb;
    size_t n = cd_test_open_split_dbs(outdir, split, &fdb, &ldb);
    if (fdb && ldb) {
        CHECK(cd_db_channels(ldb) == K && cd_db_height(ldb) == 1 && cd_db_width(ldb) == 1 &&
                  cd_db_encoding(ldb) == CD_ENC_F32,
              "label db shape %dx%dx%d encoding %d", cd_db_channels(ldb), cd_db_height(ldb), cd_db_width(ldb),
              cd_db_encoding(ldb));
        size_t px = (size_t)cd_db_channels(fdb) * cd_db_height(fdb) * cd_db_width(fdb);
        uint8_t *rec = malloc(px);
        for (size_t i = 0; i < n && i < cd_db_count(ldb); i++) {
            float t[K];
            CHECK(cd_db_read(fdb, i, rec, err, sizeof err) == CD_OK, "read %zu: %s", i, err);
            CHECK(cd_db_read_f32(ldb, i, t, err, sizeof err) == CD_OK, "read label %zu: %s", i, err);
            CHECK(cd_db_label(fdb, i) == 0, "feature int label %d", cd_db_label(fdb, i));
            int k = reg_find(rec[0]);
            CHECK(k >= 0 && g_reg[k].listed, "%s record %zu: colour %d is no listed image", split, i, rec[0]);
            if (k < 0)
                continue;
            g_reg[k].seen++;
            size_t plane = px / 3;
            CHECK(rec[plane - 1] == g_reg[k].r && rec[plane] == g_reg[k].g && rec[2 * plane] == g_reg[k].b,
                  "record %zu is the image's colour", i);
            for (int j = 0; j < K; j++) {
                CHECK(t[j] == g_reg[k].t[j], "%s record %zu (%s) target %d: %.9g, wrote %.9g", split, i,
                      g_reg[k].rel, j, t[j], g_reg[k].t[j]);
                if (mn) {
                    mn[j] = fmin(mn[j], t[j]);
                    mx[j] = fmax(mx[j], t[j]);
                    sum[j] += t[j];
                }
            }
        }
        free(rec);
    }
    cd_db_close(fdb);
    cd_db_close(ldb);
    return n;
}

/* The list: image i on a line `path t0 t1 t2` except the ones the test spoils. */
static void write_reg_list(const char *rel, int crlf)
{
    char *text = cd_xmalloc(1 << 16);
    size_t n = (size_t)snprintf(text, 1 << 16, "\xEF\xBB\xBF# regression list\n\n");
    for (int i = 0; i < NREG; i++) {
        g_reg[i].listed = 1;
        if (i == 5) { /* two values: skipped, named */
            n += (size_t)snprintf(text + n, (1 << 16) - n, "%s %.9g %.9g\n", g_reg[i].rel, g_reg[i].t[0], g_reg[i].t[1]);
            g_reg[i].listed = 0;
            continue;
        }
        n += (size_t)snprintf(text + n, (1 << 16) - n, "%s\t%.9g  %.9g %.9g%s\n", g_reg[i].rel, g_reg[i].t[0],
                              g_reg[i].t[1], g_reg[i].t[2], crlf && i % 2 ? "\r" : "");
    }
    n += (size_t)snprintf(text + n, (1 << 16) - n, "missing.png 1 2 3\nno_values.png\n");
    cd_test_write_text(rel, text);
    free(text);
}

static void test_regression_list(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    write_reg_list("src/list.txt", 1);
    snprintf(json, sizeof json,
             "{\"task\": \"regression\", \"textfile_train\": \"%s\", \"width\": 6, \"height\": 4, "
             "\"channels\": 3, \"encoding\": \"png\", \"pct_val\": 25, \"seed\": 7, \"threads\": 3}",
             cd_test_tmp_path("src/list.txt"));
    int rc = cd_test_dataset_run(json, "reg1", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "regression from a list: %s", err);
    /* 15 good lines and missing.png: 15 records; the 2-value line, no_values and
     * missing.png skipped */
    CHECK(res.count[0] + res.count[1] == NREG - 1 && res.count[1] >= 3 && res.count[2] == 0,
          "train %zu val %zu test %zu", res.count[0], res.count[1], res.count[2]);
    CHECK(res.skipped == 3, "skipped %zu (a 2-value line, a line without values, a missing file)", res.skipped);
    CHECK(!cd_test_exists("reg1/labels.txt") && cd_test_exists("reg1/mean.bin") && cd_test_exists("reg1/stats.json") &&
              cd_test_exists("reg1/val_labels.db") && !cd_test_exists("reg1/test.db"),
          "files of a regression dataset");

    double mn[K], mx[K], sum[K] = {0};
    for (int j = 0; j < K; j++)
        mn[j] = INFINITY, mx[j] = -INFINITY;
    for (int i = 0; i < NREG; i++)
        g_reg[i].seen = 0;
    size_t ntrain = check_reg_split("reg1", "train", mn, sum, mx);
    size_t nval = check_reg_split("reg1", "val", NULL, NULL, NULL);
    CHECK(ntrain == res.count[0] && nval == res.count[1], "db counts %zu %zu", ntrain, nval);
    for (int i = 0; i < NREG; i++)
        CHECK(g_reg[i].seen == g_reg[i].listed, "%s is in %d records", g_reg[i].rel,
              g_reg[i].seen);

    json_t *st = cd_test_load_stats("reg1");
    json_t *shape = json_object_get(st, "label_shape");
    CHECK(!strcmp(json_string_value(json_object_get(st, "task")), "regression") && json_array_size(shape) == 3 &&
              json_integer_value(json_array_get(shape, 0)) == K && json_integer_value(json_array_get(shape, 1)) == 1 &&
              !strcmp(json_string_value(json_object_get(st, "label_encoding")), "f32"),
          "stats.json task and label shape");
    CHECK(json_integer_value(json_object_get(json_object_get(st, "splits"), "train")) == (json_int_t)ntrain &&
              json_integer_value(json_object_get(json_object_get(st, "splits"), "val")) == (json_int_t)nval,
          "stats.json splits");
    json_t *targets = json_object_get(st, "targets");
    CHECK(json_array_size(targets) == K, "one entry per target");
    for (int j = 0; j < K && ntrain; j++) {
        json_t *tj = json_array_get(targets, (size_t)j);
        CHECK_NEAR(json_real_value(json_object_get(tj, "min")), mn[j], 1e-9, "target min");
        CHECK_NEAR(json_real_value(json_object_get(tj, "max")), mx[j], 1e-9, "target max");
        CHECK_NEAR(json_real_value(json_object_get(tj, "mean")), sum[j] / (double)ntrain, 1e-6, "target mean");
    }
    json_decref(st);

    /* the same seed, one thread: the same files */
    snprintf(json, sizeof json,
             "{\"task\": \"regression\", \"textfile_train\": \"%s\", \"width\": 6, \"height\": 4, "
             "\"channels\": 3, \"encoding\": \"png\", \"pct_val\": 25, \"seed\": 7, \"threads\": 1}",
             cd_test_tmp_path("src/list.txt"));
    CHECK(cd_test_dataset_run(json, "reg2", &res, NULL, err, sizeof err) == CD_OK, "again: %s", err);
    CHECK(cd_test_same_file("reg1/train.db", "reg2/train.db") &&
              cd_test_same_file("reg1/train_labels.db", "reg2/train_labels.db") &&
              cd_test_same_file("reg1/val_labels.db", "reg2/val_labels.db"),
          "reproducible whatever the thread count");
}

static void test_regression_csv(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    char *text = cd_xmalloc(1 << 16);
    size_t n = (size_t)snprintf(text, 1 << 16, "file,speed,angle,height\r\n");
    for (int i = 0; i < NREG; i++) {
        g_reg[i].listed = i != 2 && i != 9;
        if (i == 2) /* a file name with a comma in quotes: not supported, skipped */
            n += (size_t)snprintf(text + n, (1 << 16) - n, "\"a,b.png\",1,2,3\n");
        else if (i == 9) /* four values */
            n += (size_t)snprintf(text + n, (1 << 16) - n, "%s,1,2,3,4\n", g_reg[i].rel);
        else
            n += (size_t)snprintf(text + n, (1 << 16) - n, i % 4 ? "%s, %.9g,%.9g ,%.9g\r\n" : "\"%s\",%.9g,%.9g,%.9g\n",
                                  g_reg[i].rel, g_reg[i].t[0], g_reg[i].t[1], g_reg[i].t[2]);
    }
    n += (size_t)snprintf(text + n, (1 << 16) - n, "\"unterminated,1,2,3\n,1,2,3\nx.png,1,two,3\n");
    cd_test_write_text("targets.csv", text);
    free(text);
    snprintf(json, sizeof json,
             "{\"task\": \"regression\", \"folder_train\": \"%s\", \"targets_csv\": \"%s\", \"width\": 5, "
             "\"height\": 5, \"channels\": 3, \"encoding\": \"none\", \"pct_val\": 20, \"pct_test\": 20, "
             "\"resize_mode\": \"crop\", \"seed\": 3}",
             cd_test_tmp_path("src"), cd_test_tmp_path("targets.csv"));
    int rc = cd_test_dataset_run(json, "reg3", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "regression from a CSV: %s", err);
    CHECK(res.count[0] + res.count[1] + res.count[2] == NREG - 2 && res.count[1] > 0 && res.count[2] > 0,
          "train %zu val %zu test %zu", res.count[0], res.count[1], res.count[2]);
    CHECK(res.skipped == 5, "skipped %zu: the quoted comma, 4 values, unterminated quote, no file, a word",
          res.skipped);
    for (int i = 0; i < NREG; i++)
        g_reg[i].seen = 0;
    size_t total = check_reg_split("reg3", "train", NULL, NULL, NULL) + check_reg_split("reg3", "val", NULL, NULL, NULL) +
                   check_reg_split("reg3", "test", NULL, NULL, NULL);
    CHECK(total == NREG - 2, "records %zu", total);
    for (int i = 0; i < NREG; i++)
        CHECK(g_reg[i].seen == g_reg[i].listed, "%s is in %d records", g_reg[i].rel, g_reg[i].seen);
}

static void test_regression_errors(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    cd_test_write_text("nothing.txt", "a.png\nb.png x\n");
    snprintf(json, sizeof json, "{\"task\": \"regression\", \"textfile_train\": \"%s\"}",
             cd_test_tmp_path("nothing.txt"));
    CHECK(cd_test_dataset_run(json, "reg4", &res, NULL, err, sizeof err) == CD_ERR &&
              strstr(err, "nothing.txt lists no usable images") &&
              strstr(err, "path v1 ... vK"),
          "a list without values: %s", err);
    CHECK(!cd_test_exists("reg4/stats.json"), "no stats.json after a failure");
    snprintf(json, sizeof json, "{\"task\": \"regression\", \"folder_train\": \"%s\", \"targets_csv\": \"%s\"}",
             cd_test_tmp_path("targets.csv"), cd_test_tmp_path("targets.csv"));
    CHECK(cd_test_dataset_run(json, "reg5", &res, NULL, err, sizeof err) == CD_ERR && strstr(err, "is not a folder"),
          "folder_train must be a folder: %s", err);
}

/* ---- pairs -------------------------------------------------------------------- */

#define NCLS 3
#define PER_CLASS 6

/* Image of class c, number i: gray level 20 + 10 * (c * PER_CLASS + i), unique. */
static int pair_level(int c, int i) { return 20 + 10 * (c * PER_CLASS + i); }
static int level_class(int v)
{
    int k = (v - 20) / 10;
    return v >= 20 && (v - 20) % 10 == 0 && k < NCLS * PER_CLASS ? k / PER_CLASS : -1;
}

static void make_pair_images(void)
{
    char rel[128], list[4096] = "";
    size_t n = 0;
    for (int c = 0; c < NCLS; c++)
        for (int i = 0; i < PER_CLASS; i++) {
            int v = pair_level(c, i);
            snprintf(rel, sizeof rel, "pairsrc/class%d/p%d.png", c, i);
            write_solid(rel, 6 + i, 9 - i % 2, v, v, v);
            n += (size_t)snprintf(list + n, sizeof list - n, "class%d/p%d.png %d\n", c, i, c);
        }
    cd_test_write_text("pairsrc/list.txt", list);
    cd_test_write_text("pairsrc/labels.txt", "zero\none\ntwo\n");
}

/* Checks a split of pairs; *levels gets a mark for each image level seen. Returns the
 * pairs, *same the pairs of one class. */
static size_t check_pairs_split(const char *outdir, const char *split, int enc, uint8_t levels[256],
                                size_t *same, double *mean0)
{
    char err[512] = "";
    cd_db_t *fdb, *ldb;
    size_t n = cd_test_open_split_dbs(outdir, split, &fdb, &ldb);
    *same = 0;
    if (fdb && ldb) {
        CHECK(cd_db_channels(fdb) == 3 && cd_db_height(fdb) == 4 && cd_db_width(fdb) == 5 && cd_db_encoding(fdb) == enc,
              "%s: %zu pairs of %dx%dx%d, encoding %d", split, n, cd_db_channels(fdb), cd_db_height(fdb),
              cd_db_width(fdb), cd_db_encoding(fdb));
        CHECK(cd_db_channels(ldb) == 1 && cd_db_height(ldb) == 1 && cd_db_width(ldb) == 1 &&
                  cd_db_encoding(ldb) == CD_ENC_F32,
              "label shape");
        uint8_t rec[60];
        for (size_t i = 0; i < n; i++) {
            float label = -1;
            CHECK(cd_db_read(fdb, i, rec, err, sizeof err) == CD_OK, "read %zu: %s", i, err);
            CHECK(cd_db_read_f32(ldb, i, &label, err, sizeof err) == CD_OK, "label %zu: %s", i, err);
            int ca = level_class(rec[0]), cb = level_class(rec[20]), solid = 1;
            for (int k = 0; k < 20; k++)
                solid &= rec[k] == rec[0] && rec[20 + k] == rec[20] && rec[40 + k] == 0;
            CHECK(ca >= 0 && cb >= 0 && solid, "%s pair %zu: channels %d, %d and zeros", split, i, rec[0], rec[20]);
            CHECK(label == (ca == cb ? 1.0f : 0.0f), "%s pair %zu of classes %d, %d has label %g", split, i, ca, cb,
                  label);
            *same += label == 1.0f;
            levels[rec[0]] = levels[rec[20]] = 1;
            if (mean0)
                *mean0 += rec[0];
        }
    }
    cd_db_close(fdb);
    cd_db_close(ldb);
    return n;
}

static void test_pairs_folders(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    snprintf(json, sizeof json,
             "{\"task\": \"pairs\", \"folder_train\": \"%s\", \"width\": 5, \"height\": 4, \"channels\": 3, "
             "\"encoding\": \"png\", \"pct_val\": 34, \"pairs_train\": 60, \"pairs_val\": 25, \"seed\": 11, "
             "\"threads\": 4}",
             cd_test_tmp_path("pairsrc"));
    int rc = cd_test_dataset_run(json, "pairs1", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "pairs from folders: %s", err);
    CHECK(res.count[0] == 60 && res.count[1] == 25 && res.count[2] == 0 && res.num_classes == 2,
          "pairs train %zu val %zu", res.count[0], res.count[1]);
    uint8_t tl[256] = {0}, vl[256] = {0};
    size_t same_t, same_v;
    double mean0 = 0;
    size_t nt = check_pairs_split("pairs1", "train", CD_ENC_PNG, tl, &same_t, &mean0);
    size_t nv = check_pairs_split("pairs1", "val", CD_ENC_PNG, vl, &same_v, NULL);
    CHECK(nt == 60 && nv == 25, "records %zu %zu", nt, nv);
    int overlap = 0, nvimages = 0;
    for (int v = 0; v < 256; v++) {
        overlap += tl[v] && vl[v];
        nvimages += vl[v];
    }
    /* round(6 * 0.34) = 2 val images per class */
    CHECK(overlap == 0 && nvimages <= NCLS * 2 && nvimages > 0, "val pairs use only the %d val images (%d shared)",
          nvimages, overlap);
    CHECK(same_t > 0 && same_t < nt, "train pairs of both kinds: %zu same of %zu", same_t, nt);

    char **names = NULL;
    int nn = 0;
    CHECK(cd_labels_load(cd_test_tmp_path("pairs1/labels.txt"), &names, &nn) == CD_OK && nn == 2 &&
              !strcmp(names[0], "different") && !strcmp(names[1], "same"),
          "labels.txt");
    if (nn == 2)
        cd_labels_free(names, nn);
    int c, h, w;
    float *mean = NULL;
    CHECK(cd_mean_load(cd_test_tmp_path("pairs1/mean.bin"), &c, &h, &w, &mean) == CD_OK && c == 3 && h == 4 && w == 5,
          "mean.bin");
    if (mean) {
        CHECK_NEAR(mean[0], mean0 / (double)nt, 1e-3, "mean of channel 0 over the train pairs");
        CHECK(mean[40] == 0 && mean[59] == 0, "channel 2 of the mean is zero");
        free(mean);
    }
    json_t *st = cd_test_load_stats("pairs1");
    json_t *pt = json_object_get(json_object_get(st, "pairs"), "train");
    CHECK(!strcmp(json_string_value(json_object_get(st, "task")), "pairs") &&
              json_integer_value(json_object_get(pt, "pairs")) == 60 &&
              json_integer_value(json_object_get(pt, "same")) == (json_int_t)same_t &&
              json_integer_value(json_array_get(json_object_get(st, "label_shape"), 0)) == 1 &&
              json_integer_value(json_object_get(st, "channels")) == 3,
          "stats.json of pairs");
    json_t *sc = json_array_get(json_object_get(st, "classes"), 1);
    CHECK(!strcmp(json_string_value(json_object_get(sc, "label")), "same") &&
              json_integer_value(json_object_get(sc, "val")) == (json_int_t)same_v,
          "classes of stats.json count the same pairs");
    json_decref(st);

    /* one thread, encoding none: the same pairs */
    snprintf(json, sizeof json,
             "{\"task\": \"pairs\", \"folder_train\": \"%s\", \"width\": 5, \"height\": 4, \"channels\": 3, "
             "\"encoding\": \"png\", \"pct_val\": 34, \"pairs_train\": 60, \"pairs_val\": 25, \"seed\": 11, "
             "\"threads\": 1}",
             cd_test_tmp_path("pairsrc"));
    CHECK(cd_test_dataset_run(json, "pairs2", &res, NULL, err, sizeof err) == CD_OK, "again: %s", err);
    CHECK(cd_test_same_file("pairs1/train.db", "pairs2/train.db") &&
              cd_test_same_file("pairs1/val_labels.db", "pairs2/val_labels.db"),
          "pairs are reproducible whatever the thread count");
}

static void test_pairs_textfile(void)
{
    char err[1024] = "", json[8192];
    cd_dataset_result_t res;
    snprintf(json, sizeof json,
             "{\"task\": \"pairs\", \"textfile_train\": \"%s\", \"textfile_labels\": \"%s\", \"width\": 5, "
             "\"height\": 4, \"encoding\": \"none\", \"pct_val\": 0, \"pairs_train\": 30, \"pairs_val\": 10, "
             "\"seed\": 5}",
             cd_test_tmp_path("pairsrc/list.txt"), cd_test_tmp_path("pairsrc/labels.txt"));
    int rc = cd_test_dataset_run(json, "pairs3", &res, NULL, err, sizeof err);
    CHECK(rc == CD_OK, "pairs from a list: %s", err);
    uint8_t tl[256] = {0}, vl[256] = {0};
    size_t same;
    CHECK(check_pairs_split("pairs3", "train", CD_ENC_NONE, tl, &same, NULL) == 30 &&
              check_pairs_split("pairs3", "val", CD_ENC_NONE, vl, &same, NULL) == 10,
          "30 and 10 pairs");
    json_t *st = cd_test_load_stats("pairs3");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_object_get(st, "pairs"), "val"),
                                                    "images_from")),
                  "train"),
          "without a val part, val pairs are drawn from the train images");
    json_decref(st);
}

int main(void)
{
    cd_test_init("test_dataset_regression");
    make_reg_images();
    test_regression_list();
    test_regression_csv();
    test_regression_errors();
    make_pair_images();
    test_pairs_folders();
    test_pairs_textfile();
    int rc = cd_test_finish();
    if (rc == 0)
        cd_test_tmpdir_remove();
    return rc;
}
