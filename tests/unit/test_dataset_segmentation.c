/* Segmentation datasets end to end in a temporary folder: feature images and label
 * images (paletted PNGs written here with libpng, grayscale PNGs, colour PNGs with a
 * colormap file) with orphans, a shape that differs, a label of the wrong size, a
 * broken file, two files of one base name and a label with another palette. Each
 * record is identified by its pixels and compared with the label written for it;
 * class pixel counts, the palette, the split and the reproducibility are checked. */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

/* A paletted 8-bit PNG of indices (h, w) with npal colours, through libpng. */
static void write_paletted(const char *rel, const uint8_t *idx, int h, int w, const uint8_t (*pal)[3], int npal)
{
    cd_test_make_parent(rel);
    const char *path = cd_test_tmp_path(rel);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "open %s", path);
    if (!f)
        return;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    CHECK(info != NULL, "libpng write structs");
    if (!info || setjmp(png_jmpbuf(png))) {
        CHECK(0, "libpng failed writing %s", path);
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color colours[256];
    for (int k = 0; k < npal; k++)
        colours[k].red = pal[k][0], colours[k].green = pal[k][1], colours[k].blue = pal[k][2];
    png_set_PLTE(png, info, colours, npal);
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, idx + (size_t)y * w);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    CHECK(fclose(f) == 0, "close %s", path);
}

/* ---- what a test wrote, to identify records by ------------------------------------ */

#define MAX_PAIRS 16
typedef struct expect {
    int n;
    cd_image_t feature[MAX_PAIRS]; /* as the dataset should hold it (planar) */
    uint8_t *label[MAX_PAIRS];     /* classes (h, w) after the 255 rule */
    int seen[MAX_PAIRS];
    int c, h, w;
} expect;

static void expect_free(expect *e)
{
    for (int i = 0; i < e->n; i++) {
        cd_image_free(&e->feature[i]);
        free(e->label[i]);
    }
    memset(e, 0, sizeof *e);
}

/* Check split's two dbs record by record: each feature record is one expected image
 * (seen once), its label record that image's label; adds the class pixels up into
 * pixels[256]. Returns the record count. */
static size_t check_split(const char *job, const char *split, expect *e, int nclasses, uint64_t *pixels)
{
    char fp[256], lp[256], err[512] = "";
    snprintf(fp, sizeof fp, "%s/%s.db", job, split);
    snprintf(lp, sizeof lp, "%s/%s_labels.db", job, split);
    cd_db_t *f, *l;
    size_t n = cd_test_open_split_dbs(job, split, &f, &l);
    if (f && l) {
        CHECK(cd_db_channels(f) == e->c && cd_db_height(f) == e->h && cd_db_width(f) == e->w,
              "%s shape %dx%dx%d", fp, cd_db_channels(f), cd_db_height(f), cd_db_width(f));
        CHECK(cd_db_channels(l) == 1 && cd_db_height(l) == e->h && cd_db_width(l) == e->w &&
                  cd_db_encoding(l) == CD_ENC_PNG,
              "%s is 1 x h x w png", lp);
        CHECK(cd_db_num_classes(l) == nclasses && cd_db_num_classes(f) == nclasses, "num_classes %d, %d (want %d)",
              cd_db_num_classes(l), cd_db_num_classes(f), nclasses);
        size_t plane = (size_t)e->h * e->w;
        uint8_t *px = malloc(plane * e->c), *lab = malloc(plane);
        for (size_t i = 0; i < n && i < cd_db_count(l); i++) {
            CHECK(cd_db_read(f, i, px, err, sizeof err) == CD_OK && cd_db_read(l, i, lab, err, sizeof err) == CD_OK,
                  "read %s record %zu: %s", split, i, err);
            int who = -1;
            for (int k = 0; k < e->n && who < 0; k++)
                if (!memcmp(px, e->feature[k].data, plane * e->c))
                    who = k;
            CHECK(who >= 0, "%s record %zu is one of the images written", split, i);
            if (who < 0)
                continue;
            CHECK(e->seen[who]++ == 0, "image %d is in the dataset once", who);
            CHECK(!memcmp(lab, e->label[who], plane), "%s record %zu has the label of image %d", split, i, who);
            for (size_t p = 0; p < plane; p++)
                pixels[lab[p]]++;
        }
        free(px);
        free(lab);
    }
    cd_db_close(f);
    cd_db_close(l);
    return n;
}

static json_int_t stat_int(json_t *st, const char *key, const char *sub)
{
    json_t *v = json_object_get(st, key);
    return json_integer_value(sub ? json_object_get(v, sub) : v);
}

/* stats.json's class_pixels of split agree with pixels[0..nclasses) and names. */
static void check_class_pixels(json_t *st, const char *split, const uint64_t *pixels, int nclasses,
                               const char *const *names)
{
    json_t *cp = json_object_get(st, "class_pixels");
    CHECK((int)json_array_size(cp) == nclasses, "class_pixels has %zu classes", json_array_size(cp));
    for (int k = 0; k < nclasses && k < (int)json_array_size(cp); k++) {
        json_t *c = json_array_get(cp, (size_t)k);
        CHECK((uint64_t)json_integer_value(json_object_get(c, split)) == pixels[k], "%s class %d: %lld pixels, counted %llu",
              split, k, (long long)json_integer_value(json_object_get(c, split)), (unsigned long long)pixels[k]);
        CHECK(!strcmp(json_string_value(json_object_get(c, "label")), names[k]), "class %d is %s", k, names[k]);
    }
    CHECK((uint64_t)stat_int(st, "ignored_pixels", split) == pixels[255], "%s ignored pixels %lld, counted %llu", split,
          (long long)stat_int(st, "ignored_pixels", split), (unsigned long long)pixels[255]);
}

static void check_text_lines(const char *rel, const char *const *want, int n)
{
    char **got = NULL;
    int count = 0;
    CHECK(cd_labels_load(cd_test_tmp_path(rel), &got, &count) == CD_OK && count == n, "%s has %d lines (want %d)",
          rel, count, n);
    for (int k = 0; k < n && k < count; k++)
        CHECK(!strcmp(got[k], want[k]), "%s line %d: %s (want %s)", rel, k, got[k], want[k]);
    cd_labels_free(got, count);
}

static void check_palette(const char *job, const uint8_t (*want)[3], int n)
{
    char p[256];
    snprintf(p, sizeof p, "%s/palette.txt", job);
    uint8_t rgb[CD_PALETTE_MAX][3];
    int count = 0;
    CHECK(cd_palette_load(cd_test_tmp_path(p), rgb, CD_PALETTE_MAX, &count) == CD_OK && count == n,
          "%s: %d colours (want %d)", p, count, n);
    CHECK(count == n && !memcmp(rgb, want, (size_t)n * 3), "%s holds the classes' colours", p);
}

/* ---- paletted labels, pct_val, skips, reproducibility -------------------------------- */

static void test_paletted(void)
{
    const int W = 16, H = 12, N = 10;
    uint8_t pal[256][3], other[256][3];
    for (int k = 0; k < 256; k++) /* VOC's habit: a full palette, 255 the border colour */
        pal[k][0] = (uint8_t)(k * 37), pal[k][1] = (uint8_t)(k * 91 + 5), pal[k][2] = (uint8_t)(255 - k);
    memcpy(other, pal, sizeof pal);
    other[1][0] ^= 0x40;
    static const uint8_t values[] = {0, 1, 2, 3, 255};
    expect e = {.c = 3, .h = H, .w = W};
    uint8_t *idx = malloc((size_t)H * W);
    char rel[128];
    for (int i = 0; i < N + 1; i++) {
        cd_test_random_image(&e.feature[i], 3, H, W);
        e.label[i] = malloc((size_t)H * W);
        for (int p = 0; p < H * W; p++)
            e.label[i][p] = values[cd_test_rand_u64() % 5];
        e.label[i][0] = 3; /* the largest class is used */
        if (i < N) {
            snprintf(rel, sizeof rel, "seg1/feat/img%02d.png", i);
            cd_test_write_image(rel, &e.feature[i], 0);
            snprintf(rel, sizeof rel, "seg1/label/img%02d.png", i);
        } else {
            /* dup.jpg (kept: first by name) and dup.png (skipped) share a base name; the
             * JPEG's record is its decoded pixels */
            cd_test_write_image("seg1/feat/dup.png", &e.feature[i], 0);
            cd_test_write_image("seg1/feat/dup.jpg", &e.feature[i], 1);
            cd_image_free(&e.feature[i]);
            CHECK(cd_image_load(cd_test_tmp_path("seg1/feat/dup.jpg"), 3, &e.feature[i], NULL, 0) == CD_OK,
                  "load dup.jpg");
            snprintf(rel, sizeof rel, "seg1/label/dup.png");
        }
        write_paletted(rel, e.label[i], H, W, (const uint8_t(*)[3])pal, 256);
    }
    e.n = N + 1;
    cd_image_t junk;
    cd_test_random_image(&junk, 3, H, W);
    memset(idx, 1, (size_t)H * W);
    cd_test_write_image("seg1/feat/orphan.png", &junk, 0); /* no label */
    write_paletted("seg1/label/lonely.png", idx, H, W, (const uint8_t(*)[3])pal, 256); /* no image */
    cd_test_write_image("seg1/feat/otherpal.png", &junk, 0); /* label of another palette */
    write_paletted("seg1/label/otherpal.png", idx, H, W, (const uint8_t(*)[3])other, 256);
    cd_test_write_image("seg1/feat/wrongsize.png", &junk, 0); /* label 10 wide */
    write_paletted("seg1/label/wrongsize.png", idx, H, 10, (const uint8_t(*)[3])pal, 256);
    cd_image_free(&junk);
    cd_test_random_image(&junk, 3, 6, 8); /* another shape */
    cd_test_write_image("seg1/feat/small.png", &junk, 0);
    write_paletted("seg1/label/small.png", idx, 6, 8, (const uint8_t(*)[3])pal, 256);
    cd_image_free(&junk);
    cd_test_write_text("seg1/feat/broken.png", "\x89PNG\r\n\x1a\n truncated");
    write_paletted("seg1/label/broken.png", idx, H, W, (const uint8_t(*)[3])pal, 256);
    cd_test_write_text("seg1/feat/notes.txt", "not an image");
    free(idx);

    const char *cfg = "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\", "
                      "\"pct_val\": 25, \"seed\": 7, \"encoding\": \"%s\", \"threads\": %d}";
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json, cfg, cd_test_tmp_path("seg1/feat"), cd_test_tmp_path("seg1/label"), "png", 3);
    cd_dataset_result_t res;
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(json, "job1", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK, "create: %s", err);
    /* 11 pairs: val floor(11 * 25 / 100) = 2 */
    CHECK(res.count[0] == 9 && res.count[1] == 2 && res.count[2] == 0, "train %zu val %zu test %zu", res.count[0],
          res.count[1], res.count[2]);
    CHECK(res.skipped == 8, "skipped %zu (orphan, lonely, otherpal, wrongsize, small, broken, dup.png, notes.txt)",
          res.skipped);
    CHECK(res.num_classes == 4, "classes %d: the largest index 3, plus one", res.num_classes);
    static const char *const skipped[] = {"orphan.png", "lonely.png", "otherpal.png", "wrongsize.png",
                                          "small.png",  "broken.png", "dup.png",      "notes.txt"};
    for (size_t k = 0; k < sizeof skipped / sizeof *skipped; k++)
        CHECK(cd_test_log_mentions(lines, skipped[k]), "the log names %s", skipped[k]);
    size_t nl = json_array_size(lines);
    json_t *ds = json_array_get(lines, nl - 2), *done = json_array_get(lines, nl - 1);
    CHECK(nl >= 2 && !strcmp(json_string_value(json_object_get(ds, "type")), "dataset") &&
              !strcmp(json_string_value(json_object_get(done, "type")), "done"),
          "last lines are dataset and done");
    CHECK(json_integer_value(json_object_get(json_object_get(ds, "splits"), "train")) == 9 &&
              json_integer_value(json_object_get(ds, "skipped")) == 8,
          "dataset line counts");
    json_decref(lines);

    uint64_t px[2][256] = {{0}};
    CHECK(check_split("job1", "train", &e, 4, px[0]) == 9, "train records");
    CHECK(check_split("job1", "val", &e, 4, px[1]) == 2, "val records");
    for (int i = 0; i < e.n; i++)
        CHECK(e.seen[i] == 1, "image %d is in train or val", i);
    CHECK(!cd_test_exists("job1/test.db") && !cd_test_exists("job1/test_labels.db"), "no test split");
    static const char *const names[] = {"class0", "class1", "class2", "class3"};
    check_text_lines("job1/labels.txt", names, 4);
    check_palette("job1", (const uint8_t(*)[3])pal, 4);
    json_t *st = cd_test_load_stats("job1");
    CHECK(!strcmp(json_string_value(json_object_get(st, "task")), "segmentation"), "task");
    json_t *ls = json_object_get(st, "label_shape");
    CHECK(json_array_size(ls) == 3 && json_integer_value(json_array_get(ls, 0)) == 1 &&
              json_integer_value(json_array_get(ls, 1)) == H && json_integer_value(json_array_get(ls, 2)) == W,
          "label_shape [1, %d, %d]", H, W);
    CHECK(stat_int(st, "num_classes", NULL) == 4 && stat_int(st, "channels", NULL) == 3 &&
              stat_int(st, "width", NULL) == W && stat_int(st, "height", NULL) == H,
          "stats shape and classes");
    check_class_pixels(st, "train", px[0], 4, names);
    check_class_pixels(st, "val", px[1], 4, names);
    json_decref(st);

    /* the mean is the average of the train records */
    int c, h, w;
    float *mean = NULL;
    CHECK(cd_mean_load(cd_test_tmp_path("job1/mean.bin"), &c, &h, &w, &mean) == CD_OK && c == 3 && h == H && w == W,
          "mean.bin");
    cd_db_t *db = cd_db_open(cd_test_tmp_path("job1/train.db"), err, sizeof err);
    if (db && mean) {
        double worst = 0, acc[3 * 16 * 12] = {0};
        uint8_t rec[3 * 16 * 12];
        for (size_t r = 0; r < cd_db_count(db); r++) {
            cd_db_read(db, r, rec, NULL, 0);
            for (int k = 0; k < 3 * H * W; k++)
                acc[k] += rec[k];
        }
        for (int k = 0; k < 3 * H * W; k++)
            worst = fmax(worst, fabs(acc[k] / (double)cd_db_count(db) - mean[k]));
        CHECK(worst < 1e-3, "mean matches the train records (%g)", worst);
    }
    cd_db_close(db);
    free(mean);

    /* one thread or three, the same files */
    snprintf(json, sizeof json, cfg, cd_test_tmp_path("seg1/feat"), cd_test_tmp_path("seg1/label"), "png", 1);
    CHECK(cd_test_dataset_run(json, "job2", &res, NULL, err, sizeof err) == CD_OK, "create job2: %s", err);
    static const char *const files[] = {"train.db", "train_labels.db", "val.db", "val_labels.db", "palette.txt",
                                        "labels.txt", "mean.bin"};
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "job1/%s", files[k]);
        snprintf(b, sizeof b, "job2/%s", files[k]);
        CHECK(cd_test_same_file(a, b), "%s is the same with 1 and 3 threads", files[k]);
    }
    /* raw records hold the same images */
    snprintf(json, sizeof json, cfg, cd_test_tmp_path("seg1/feat"), cd_test_tmp_path("seg1/label"), "none", 2);
    CHECK(cd_test_dataset_run(json, "job3", &res, NULL, err, sizeof err) == CD_OK, "create job3: %s", err);
    memset(e.seen, 0, sizeof e.seen);
    memset(px, 0, sizeof px);
    CHECK(check_split("job3", "train", &e, 4, px[0]) == 9 && check_split("job3", "val", &e, 4, px[1]) == 2,
          "encoding none: the same split");
    expect_free(&e);
}

/* ---- grayscale labels, names, validation folders, L ------------------------------ */

static void test_gray_names_val(void)
{
    const int W = 10, H = 8;
    static const uint8_t values[] = {0, 1, 2, 5, 255}; /* 5: past the 3 names */
    expect e = {.c = 1, .h = H, .w = W};
    uint64_t fives[2] = {0};
    char rel[128];
    for (int i = 0; i < 9; i++) {
        int val = i >= 6;
        cd_image_t rgb, lab;
        cd_test_random_image(&rgb, 3, H, W);
        snprintf(rel, sizeof rel, "seg2/%s/p%d.png", val ? "vfeat" : "feat", i);
        cd_test_write_image(rel, &rgb, 0);
        CHECK(cd_image_convert(&rgb, 1, &e.feature[i], NULL, 0) == CD_OK, "convert");
        cd_image_free(&rgb);
        cd_image_alloc(&lab, 1, H, W, NULL, 0);
        e.label[i] = malloc((size_t)H * W);
        for (int p = 0; p < H * W; p++) {
            lab.data[p] = values[cd_test_rand_u64() % 5];
            fives[val] += lab.data[p] == 5;
            e.label[i][p] = lab.data[p] == 5 ? 255 : lab.data[p];
        }
        snprintf(rel, sizeof rel, "seg2/%s/p%d.png", val ? "vlabel" : "label", i);
        cd_test_write_image(rel, &lab, 0);
        cd_image_free(&lab);
    }
    e.n = 9;
    cd_test_write_text("seg2/names.txt", "road\ncar\n\nsky\n");
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json,
             "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\", "
             "\"validation_feature_folder\": \"%s\", \"validation_label_folder\": \"%s\", \"class_labels_file\": \"%s\", "
             "\"channel_conversion\": \"L\", \"pct_val\": 50, \"seed\": 3}",
             cd_test_tmp_path("seg2/feat"), cd_test_tmp_path("seg2/label"), cd_test_tmp_path("seg2/vfeat"),
             cd_test_tmp_path("seg2/vlabel"),
             cd_test_tmp_path("seg2/names.txt"));
    cd_dataset_result_t res;
    json_t *lines = NULL;
    CHECK(cd_test_dataset_run(json, "job4", &res, &lines, err, sizeof err) == CD_OK, "create: %s", err);
    CHECK(res.count[0] == 6 && res.count[1] == 3 && res.skipped == 0 && res.num_classes == 3,
          "train %zu val %zu (the folders, not pct_val), skipped %zu, classes %d", res.count[0], res.count[1],
          res.skipped, res.num_classes);
    CHECK(fives[0] == 0 || cd_test_log_mentions(lines, "past the classes"), "the log names the labels with index 5");
    json_decref(lines);
    uint64_t px[2][256] = {{0}};
    CHECK(check_split("job4", "train", &e, 3, px[0]) == 6 && check_split("job4", "val", &e, 3, px[1]) == 3,
          "records");
    static const char *const names[] = {"road", "car", "sky"};
    check_text_lines("job4/labels.txt", names, 3);
    uint8_t dflt[3][3];
    cd_palette_default(dflt, 3);
    check_palette("job4", (const uint8_t(*)[3])dflt, 3);
    json_t *st = cd_test_load_stats("job4");
    check_class_pixels(st, "train", px[0], 3, names);
    check_class_pixels(st, "val", px[1], 3, names);
    CHECK((uint64_t)stat_int(st, "unmapped_pixels", "train") == fives[0] &&
              (uint64_t)stat_int(st, "unmapped_pixels", "val") == fives[1],
          "unmapped pixels %lld %lld, written %llu %llu", (long long)stat_int(st, "unmapped_pixels", "train"),
          (long long)stat_int(st, "unmapped_pixels", "val"), (unsigned long long)fives[0], (unsigned long long)fives[1]);
    CHECK(stat_int(st, "channels", NULL) == 1, "channel_conversion L: 1 channel");
    json_decref(st);
    expect_free(&e);
}

/* ---- colour labels through a colormap file, channel_conversion none ---------------- */

static void test_textfile(void)
{
    const int W = 9, H = 7;
    static const uint8_t cmap[3][3] = {{10, 20, 30}, {200, 0, 0}, {0, 200, 0}};
    cd_test_write_text("seg3/colors.txt", "10 20 30\r\n200 0 0\r\n0 200 0\r\n\r\n");
    expect e = {.c = 1, .h = H, .w = W};
    uint64_t unknown = 0;
    char rel[128];
    for (int i = 0; i < 5; i++) {
        cd_image_t lab;
        cd_test_random_image(&e.feature[i], 1, H, W);
        snprintf(rel, sizeof rel, "seg3/feat/g%d.png", i);
        cd_test_write_image(rel, &e.feature[i], 0);
        cd_image_alloc(&lab, 3, H, W, NULL, 0);
        e.label[i] = malloc((size_t)H * W);
        size_t plane = (size_t)H * W;
        for (size_t p = 0; p < plane; p++) {
            int k = (int)(cd_test_rand_u64() % 4); /* 3: a colour not in the file */
            for (int ch = 0; ch < 3; ch++)
                lab.data[ch * plane + p] = k < 3 ? cmap[k][ch] : 7;
            e.label[i][p] = k < 3 ? (uint8_t)k : 255;
            unknown += k == 3;
        }
        snprintf(rel, sizeof rel, "seg3/label/g%d.png", i);
        cd_test_write_image(rel, &lab, 0);
        cd_image_free(&lab);
    }
    e.n = 5;
    cd_image_t rgb; /* a colour image among gray ones: another channel count under none */
    cd_test_random_image(&rgb, 3, H, W);
    cd_test_write_image("seg3/feat/zrgb.png", &rgb, 0);
    cd_test_write_image("seg3/label/zrgb.png", &rgb, 0);
    cd_image_free(&rgb);
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json,
             "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\", "
             "\"colormap_method\": \"textfile\", \"colormap_text_file\": \"%s\", \"channel_conversion\": \"none\", "
             "\"pct_val\": 0, \"encoding\": \"jpg\"}",
             cd_test_tmp_path("seg3/feat"), cd_test_tmp_path("seg3/label"), cd_test_tmp_path("seg3/colors.txt"));
    cd_dataset_result_t res;
    json_t *lines = NULL;
    CHECK(cd_test_dataset_run(json, "job5", &res, &lines, err, sizeof err) == CD_OK, "create: %s", err);
    CHECK(res.count[0] == 5 && res.count[1] == 0 && res.skipped == 1 && res.num_classes == 3,
          "train %zu val %zu skipped %zu classes %d", res.count[0], res.count[1], res.skipped, res.num_classes);
    CHECK(cd_test_log_mentions(lines, "zrgb.png") && cd_test_log_mentions(lines, "not in colormap_text_file"),
          "the log names the colour image and the unknown colours");
    json_decref(lines);
    CHECK(!cd_test_exists("job5/val.db") && !cd_test_exists("job5/val_labels.db"), "no val split with pct_val 0");
    /* jpg records are lossy: check the labels by opening the label db directly */
    char err2[256] = "";
    cd_db_t *l = cd_db_open(cd_test_tmp_path("job5/train_labels.db"), err2, sizeof err2);
    CHECK(l != NULL, "open: %s", err2);
    uint64_t px[256] = {0};
    if (l) {
        uint8_t lab[9 * 7];
        for (size_t i = 0; i < cd_db_count(l); i++) {
            CHECK(cd_db_read(l, i, lab, err2, sizeof err2) == CD_OK, "read %s", err2);
            int who = -1;
            for (int k = 0; k < 5 && who < 0; k++)
                if (!memcmp(lab, e.label[k], sizeof lab))
                    who = k;
            CHECK(who >= 0 && e.seen[who]++ == 0, "label record %zu is one label, once", i);
            for (size_t p = 0; p < sizeof lab; p++)
                px[lab[p]]++;
        }
        cd_db_close(l);
    }
    CHECK(px[255] == unknown, "%llu pixels of no class, %llu written", (unsigned long long)px[255],
          (unsigned long long)unknown);
    static const char *const names[] = {"class0", "class1", "class2"};
    check_text_lines("job5/labels.txt", names, 3);
    check_palette("job5", cmap, 3);
    json_t *st = cd_test_load_stats("job5");
    check_class_pixels(st, "train", px, 3, names);
    CHECK((uint64_t)stat_int(st, "unmapped_pixels", "train") == unknown && stat_int(st, "channels", NULL) == 1,
          "unmapped pixels and channels");
    json_decref(st);
    expect_free(&e);
}

/* ---- force_same_shape 0: every pair keeps its size ------------------------------- */

static void test_mixed_sizes(void)
{
    enum { N = 6 };
    static const int sizes[N][2] = {{12, 9}, {7, 15}, {20, 11}, {9, 9}, {16, 5}, {11, 18}}; /* h, w */
    cd_image_t img[N];
    uint8_t *lab[N];
    double sum[3] = {0}, pixels = 0;
    char rel[128];
    for (int i = 0; i < N; i++) {
        int h = sizes[i][0], w = sizes[i][1];
        cd_test_random_image(&img[i], 3, h, w);
        snprintf(rel, sizeof rel, "seg5/feat/m%d.png", i);
        cd_test_write_image(rel, &img[i], 0);
        cd_image_t l;
        cd_image_alloc(&l, 1, h, w, NULL, 0);
        for (int p = 0; p < h * w; p++)
            l.data[p] = (uint8_t)(cd_test_rand_u64() % 3);
        lab[i] = malloc((size_t)h * w);
        memcpy(lab[i], l.data, (size_t)h * w);
        snprintf(rel, sizeof rel, "seg5/label/m%d.png", i);
        cd_test_write_image(rel, &l, 0);
        cd_image_free(&l);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < h * w; p++)
                sum[c] += img[i].data[(size_t)c * h * w + p];
        pixels += h * w;
    }
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json, "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\", "
             "\"force_same_shape\": 0, \"pct_val\": 0, \"seed\": 5}", cd_test_tmp_path("seg5/feat"),
             cd_test_tmp_path("seg5/label"));
    cd_dataset_result_t res;
    CHECK(cd_test_dataset_run(json, "job7", &res, NULL, err, sizeof err) == CD_OK, "create mixed: %s", err);
    CHECK(res.count[0] == N && res.skipped == 0, "mixed: %zu records, %zu skipped", res.count[0], res.skipped);
    cd_db_t *f = NULL, *l = NULL;
    size_t n = cd_test_open_split_dbs("job7", "train", &f, &l);
    if (f && l && n == N) {
        CHECK(cd_db_mixed(f) && cd_db_mixed(l), "both dbs hold records of varying size");
        CHECK(cd_db_encoding(f) == CD_ENC_PNG, "encoding none becomes png for varying sizes");
        CHECK(cd_db_height(f) == 20 && cd_db_width(f) == 18, "bounds %dx%d, want the largest 20 and 18",
              cd_db_height(f), cd_db_width(f));
        uint8_t px[3 * 20 * 18], lp[20 * 18];
        int seen = 0;
        for (size_t r = 0; r < n; r++) {
            int h = 0, w = 0, lh = 0, lw = 0;
            CHECK(cd_db_record_shape(f, r, &h, &w, err, sizeof err) == CD_OK &&
                      cd_db_record_shape(l, r, &lh, &lw, err, sizeof err) == CD_OK && h == lh && w == lw,
                  "record %zu: %dx%d, its label %dx%d", r, w, h, lw, lh);
            CHECK(cd_db_read(f, r, px, err, sizeof err) == CD_OK && cd_db_read(l, r, lp, err, sizeof err) == CD_OK,
                  "read record %zu: %s", r, err);
            for (int i = 0; i < N; i++)
                if (sizes[i][0] == h && sizes[i][1] == w && !memcmp(px, img[i].data, (size_t)3 * h * w) &&
                    !memcmp(lp, lab[i], (size_t)h * w))
                    seen |= 1 << i;
        }
        CHECK(seen == (1 << N) - 1, "every image and its label stored at its size (seen %#x)", seen);
    }
    cd_db_close(f);
    cd_db_close(l);
    int mc = 0, mh = 0, mw = 0;
    float *mean = NULL;
    CHECK(cd_mean_load(cd_test_tmp_path("job7/mean.bin"), &mc, &mh, &mw, &mean) == CD_OK && mc == 3 && mh == 1 &&
              mw == 1,
          "a mean pixel: %dx%dx%d", mc, mh, mw);
    for (int c = 0; mean && c < 3; c++)
        CHECK_NEAR(mean[c], sum[c] / pixels, 1e-3, "mean of channel");
    free(mean);
    json_t *st = cd_test_load_stats("job7");
    CHECK(stat_int(st, "force_same_shape", NULL) == 0 && stat_int(st, "height", NULL) == 20,
          "stats say force_same_shape 0 and the largest height");
    json_decref(st);
    for (int i = 0; i < N; i++) {
        cd_image_free(&img[i]);
        free(lab[i]);
    }
}

/* ---- what is refused, and says why -------------------------------------------------- */

static void test_refused(void)
{
    static const struct {
        const char *extra; /* JSON keys after the folders of seg3 */
        const char *why;   /* what err must say */
    } cases[] = {
        {"\"colormap_method\": \"textfile\", \"colormap_text_file\": \"@seg3/colors.txt\", "
         "\"class_labels_file\": \"@seg3/two.txt\"", "names 2 classes but colormap_text_file"},
        {"\"colormap_method\": \"textfile\", \"colormap_text_file\": \"@seg3/dup.txt\"", "the same colour"},
        {"\"colormap_method\": \"textfile\", \"colormap_text_file\": \"@seg3/missing.txt\"", "cannot read colormap_text_file"},
        {"\"colormap_method\": \"label\"", "paletted or grayscale"},
    };
    cd_test_write_text("seg3/two.txt", "a\nb\n");
    cd_test_write_text("seg3/dup.txt", "1 2 3\n4 5 6\n1 2 3\n");
    /* only colour labels: colormap label cannot read them */
    cd_image_t rgb;
    cd_test_random_image(&rgb, 3, 4, 4);
    cd_test_write_image("seg4/feat/a.png", &rgb, 0);
    cd_test_write_image("seg4/label/a.png", &rgb, 0);
    cd_image_free(&rgb);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char extra[1024] = "", *o = extra;
        for (const char *p = cases[i].extra; *p; p++) { /* @rel: a path in the temporary folder */
            if (*p == '@') {
                const char *end = strchr(p, '"');
                char rel[128];
                snprintf(rel, sizeof rel, "%.*s", (int)(end - p - 1), p + 1);
                o += sprintf(o, "%s", cd_test_tmp_path(rel));
                p = end - 1;
            } else {
                *o++ = *p;
            }
        }
        const char *set = i == 3 ? "seg4" : "seg3";
        char json[2048], err[1024] = "", fd[64], ld[64];
        snprintf(fd, sizeof fd, "%s/feat", set);
        snprintf(ld, sizeof ld, "%s/label", set);
        snprintf(json, sizeof json, "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\", %s}",
                 cd_test_tmp_path(fd), cd_test_tmp_path(ld), extra);
        cd_dataset_result_t res;
        int rc = cd_test_dataset_run(json, "job6", &res, NULL, err, sizeof err);
        CHECK(rc == CD_ERR && strstr(err, cases[i].why), "case %zu refused (%s): %s", i, cases[i].why, err);
        CHECK(!cd_test_exists("job6/stats.json"), "case %zu leaves no stats.json", i);
    }
    /* a feature folder that is not there is named */
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json, "{\"task\": \"segmentation\", \"feature_folder\": \"%s\", \"label_folder\": \"%s\"}",
             cd_test_tmp_path("nowhere"), cd_test_tmp_path("seg3/label"));
    cd_dataset_result_t res;
    CHECK(cd_test_dataset_run(json, "job6", &res, NULL, err, sizeof err) == CD_ERR && strstr(err, "nowhere"),
          "missing folder: %s", err);
}

int main(void)
{
    cd_test_init("test_dataset_segmentation");
    test_paletted();
    test_gray_names_val();
    test_textfile();
    test_mixed_sizes();
    test_refused();
    return cd_test_finish();
}
