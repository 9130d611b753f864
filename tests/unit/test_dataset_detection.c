/* The detection task: KITTI label lines parsed into DIGITS's gt_to_lmdb_format rows, the
 * class mappings (KITTI's and custom_classes), a box placed in the padded and resized
 * image against a hand count, the config's rules, and a dataset end to end in a
 * temporary folder. Every image there is one solid colour of its own (its red value
 * tells which image a record came from) with fresh random boxes, and the test checks
 * each label record against the rows it computes itself: clipped, scaled, in DIGITS's
 * order, padded with class -1 rows; each kind of bad label line counted and named; an
 * image without a label file and one larger than the padding skipped and named;
 * val_min_box_size; stats.json's box statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../src/dataset/internal.h"
#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"
#include "testutil_dataset.h"

/* ---- label lines ---------------------------------------------------------------------- */

static void test_parse_line(void)
{
    ds_det_classes kitti, custom;
    char err[512], why[256], line[512];
    CHECK(ds_det_classes_init(&kitti, "", err, sizeof err) == CD_OK && kitti.n == 16 && !kitti.custom,
          "KITTI's mapping has 16 classes");
    CHECK(ds_det_classes_init(&custom, " DontCare, Rectangle ,disc", err, sizeof err) == CD_OK && custom.n == 3 &&
              !strcmp(custom.names[0], "dontcare") && !strcmp(custom.names[1], "rectangle") &&
              !strcmp(custom.names[2], "disc"),
          "custom_classes are trimmed and lower-cased: %s", err);

    /* a line of fresh values lands in gt_to_lmdb_format's order */
    double v[16];
    for (int i = 0; i < 16; i++)
        v[i] = round(cd_test_uniform(-50, 50) * 100) / 100;
    v[6] = v[4] + 1 + fabs(v[6]);
    v[7] = v[5] + 1 + fabs(v[7]);
    snprintf(line, sizeof line, "Disc %g %g %g %g %g %g %g %g %g %g %g %g %g %g\r", v[1], v[2], v[3], v[4], v[5],
             v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]);
    float row[DS_DET_ROW];
    int bad = 0;
    CHECK(ds_det_parse_line(&custom, line, row, &bad, why, sizeof why) == CD_OK && bad == -1, "a good line: %s",
          why);
    const double want[DS_DET_ROW] = {v[4], v[5], v[6] - v[4], v[7] - v[5], v[3], 2, 0, v[14],
                                     v[1], v[2], v[10], v[9], v[8], v[11], v[12], v[13]};
    for (int i = 0; i < DS_DET_ROW; i++)
        CHECK_NEAR(row[i], want[i], 1e-3, "row value");

    static const struct {
        const char *line;
        int bad, rc;
        const char *says;
    } cases[] = {
        {"car 0 0 0 1 2 3", DS_DET_BAD_COLUMNS, CD_ERR, "7 values"},
        {"car 0 0 0 1 2 3 4 5 6 7 8 9 10 11 12 13", DS_DET_BAD_COLUMNS, CD_ERR, "17 values"},
        {"car 0 0 0 1 2 x3 4 1 1 1 0 0 0 0", DS_DET_BAD_NUMBER, CD_ERR, "right (value 7)"},
        {"car 0 0 0 1 2 3 nan 1 1 1 0 0 0 0", DS_DET_BAD_NUMBER, CD_ERR, "bottom"},
        {"car 0 0 0 5 2 5 4 1 1 1 0 0 0 0", DS_DET_BAD_EMPTY, CD_ERR, "is empty"},
        {"car 0 0 0 5 9 6 4 1 1 1 0 0 0 0", DS_DET_BAD_EMPTY, CD_ERR, "is empty"},
        {"truck 0 0 0 1 2 3 4 1 1 1 0 0 0 0", DS_DET_BAD_CLASS, CD_OK, "kept as dontcare"},
        {"DontCare -1 -1 -10 1 2 3 4 -1 -1 -1 -1000 -1000 -1000 -10", -1, CD_OK, ""},
        {"rectangle 0 0 0 1 2 3 4 1 1 1 0 0 0 0 0.87", -1, CD_OK, ""}, /* a score column */
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        snprintf(line, sizeof line, "%s", cases[i].line);
        why[0] = 0;
        int rc = ds_det_parse_line(&custom, line, row, &bad, why, sizeof why);
        CHECK(rc == cases[i].rc && bad == cases[i].bad && strstr(why, cases[i].says),
              "\"%s\": rc %d bad %d (%s), why \"%s\"", cases[i].line, rc, bad, ds_det_bad_name(bad), why);
        if (rc == CD_OK)
            CHECK(row[5] == (i == 8 ? 1 : 0), "\"%s\" is class %g", cases[i].line, row[5]);
    }

    /* KITTI's mapping: names in any case, pedestrian is person's class */
    static const struct {
        const char *type;
        int cls;
    } kt[] = {{"Car", 1}, {"VAN", 2}, {"pedestrian", 8}, {"Person", 8}, {"Cyclist", 12}, {"misc", 15},
              {"DontCare", 0}, {"rectangle", -1}};
    for (size_t i = 0; i < CD_ARRAY_LEN(kt); i++)
        CHECK(ds_det_class_of(&kitti, kt[i].type) == kt[i].cls, "KITTI: %s is class %d, not %d", kt[i].type,
              ds_det_class_of(&kitti, kt[i].type), kt[i].cls);
    CHECK(ds_det_class_of(&custom, "pedestrian") == -1, "custom_classes have no KITTI aliases");
    ds_det_classes_free(&kitti);
    ds_det_classes_free(&custom);
}

static void test_classes_and_config(void)
{
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"\"custom_classes\": \"car,dontcare\"", "write dontcare first"},
        {"\"custom_classes\": \"dontcare,,car\"", "name 2 is empty"},
        {"\"custom_classes\": \"dontcare,car,Car\"", "\"car\" twice"},
        {"\"resize_image_width\": 10", "resize_image_width is set but resize_image_height is not"},
        {"\"padding_image_height\": 10", "padding_image_height is set but padding_image_width is not"},
        {"\"val_image_folder\": \"/v\"", "val_image_folder is set but val_label_folder is not"},
        {"\"padding_image_width\": -1, \"padding_image_height\": 4", "padding_image_width is -1"},
        {"\"val_min_box_size\": 2.5", "val_min_box_size is 2.5"},
    };
    char json[512], err[512];
    for (size_t i = 0; i < CD_ARRAY_LEN(bad); i++) {
        cd_dataset_config_t cfg;
        cd_dataset_config_init(&cfg);
        snprintf(json, sizeof json, "{\"task\": \"detection\", \"train_image_folder\": \"/i\", "
                 "\"train_label_folder\": \"/l\", %s}", bad[i].json);
        err[0] = 0;
        CHECK(cd_dataset_config_parse(json, &cfg, err, sizeof err) == CD_ERR && strstr(err, bad[i].says),
              "%s: \"%s\"", bad[i].json, err);
        cd_dataset_config_free(&cfg);
    }
    cd_dataset_config_t cfg;
    cd_dataset_config_init(&cfg);
    CHECK(cd_dataset_config_parse("{\"task\": \"detection\", \"train_image_folder\": \"/i\"}", &cfg, err,
                                  sizeof err) == CD_ERR && strstr(err, "train_label_folder"),
          "train_label_folder is needed: %s", err);
    cd_dataset_config_free(&cfg);
    cd_dataset_config_init(&cfg);
    CHECK(cd_dataset_config_parse("{\"task\": \"detection\", \"train_image_folder\": \"/i\", \"train_label_folder\": "
                                  "\"/l\", \"custom_classes\": \"dontcare,a\"}", &cfg, err, sizeof err) == CD_OK &&
              cfg.val_min_box_size == 25 && cfg.channel_conversion == 3 && cfg.padding_image_width == 0,
          "the defaults: DIGITS's val_min_box_size 25, RGB, no padding: %s", err);
    cd_dataset_config_free(&cfg);
}

/* A box of the source image in the stored one, against a hand count. */
static void test_place_box(void)
{
    /* a 20x10 image padded to 40x20 and resized to 10x40: x scale 10/40, y scale 40/20 */
    float row[DS_DET_ROW] = {4, 2, 8, 6}; /* left 4 top 2 right 12 bottom 8 */
    int clipped = 1;
    CHECK(ds_det_place_box(row, 20, 10, 10.0 / 40, 40.0 / 20, &clipped) == CD_OK && !clipped, "inside");
    CHECK(row[0] == 1 && row[1] == 4 && row[2] == 2 && row[3] == 12, "scaled: %g %g %g %g", row[0], row[1], row[2],
          row[3]);
    float edge[DS_DET_ROW] = {-3, 7, 10, 6}; /* left -3 top 7 right 7 bottom 13: past the left and bottom */
    CHECK(ds_det_place_box(edge, 20, 10, 1, 1, &clipped) == CD_OK && clipped, "clipped");
    CHECK(edge[0] == 0 && edge[1] == 7 && edge[2] == 7 && edge[3] == 3, "clipped to 0 7 7 10: %g %g %g %g",
          edge[0], edge[1], edge[2], edge[3]);
    float out[DS_DET_ROW] = {21, 2, 5, 5};
    CHECK(ds_det_place_box(out, 20, 10, 1, 1, &clipped) == CD_ERR, "right of the image");
    float below[DS_DET_ROW] = {2, 10, 5, 5};
    CHECK(ds_det_place_box(below, 20, 10, 1, 1, &clipped) == CD_ERR, "below the image (touching its edge)");
}

/* ---- a dataset end to end ---------------------------------------------------------------- */

#define NTRAIN 12
#define NVAL 3
#define MAXB 8
#define PAD_W 24
#define PAD_H 16
#define RS_W 12
#define RS_H 4

typedef struct box {
    int cls;
    double l, t, r, b;  /* in the source image */
    double other[8];    /* truncated occluded alpha height width length z-less x y ... see line_of */
    double z;
    int line;           /* its line in the label file */
} box;

typedef struct det_image {
    int w, h, red, split;
    int labelled;       /* has a label file */
    int nbox;
    box boxes[MAXB];    /* the boxes expected in the record, in file order */
    int seen;
} det_image;

static det_image g_img[NTRAIN + NVAL];
static const char *const g_names[] = {"DontCare", "rectangle", "Disc"};

/* The solid w x h image of colour (red, 7, 200) at rel. */
static void write_solid(const char *rel, int w, int h, int red)
{
    cd_image_t img;
    CHECK(cd_image_alloc(&img, 3, h, w, NULL, 0) == CD_OK, "alloc");
    size_t plane = (size_t)w * h;
    memset(img.data, red, plane);
    memset(img.data + plane, 7, plane);
    memset(img.data + 2 * plane, 200, plane);
    cd_test_write_image(rel, &img, 0);
    cd_image_free(&img);
}

static void append_box_line(char *text, size_t cap, const box *b, const char *type)
{
    size_t n = strlen(text);
    snprintf(text + n, cap - n, "%s %.4f %.0f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", type,
             b->other[0], b->other[1], b->other[2], b->l, b->t, b->r, b->b, b->other[3], b->other[4], b->other[5],
             b->other[6], b->other[7], b->z, b->other[0] * 3);
}

/* Fresh images with fresh boxes, and the label lines that go wrong on purpose. */
static void make_images(void)
{
    for (int i = 0; i < NTRAIN + NVAL; i++) {
        det_image *im = &g_img[i];
        memset(im, 0, sizeof *im);
        im->split = i < NTRAIN ? 0 : 1;
        im->w = 4 + (int)(cd_test_rand_u64() % (PAD_W - 3));
        im->h = 6 + (int)(cd_test_rand_u64() % (PAD_H - 5));
        im->red = 10 + 15 * i;
        im->labelled = i != 7;
        if (i == 8)
            im->w = PAD_W + 3; /* larger than the padding: skipped */
        char rel[64], text[8192] = "";
        snprintf(rel, sizeof rel, "%s/images/%03d.png", im->split ? "val" : "train", i);
        write_solid(rel, im->w, im->h, im->red);
        int nbox = (int)(cd_test_rand_u64() % 5);
        int line = 0;
        for (int k = 0; k < nbox; k++) {
            box *b = &im->boxes[im->nbox];
            b->cls = (int)(cd_test_rand_u64() % 3);
            b->l = round(cd_test_uniform(0, im->w - 2) * 4) / 4;
            b->t = round(cd_test_uniform(0, im->h - 2) * 4) / 4;
            b->r = b->l + 1 + round(cd_test_uniform(0, im->w - b->l - 1) * 4) / 4;
            b->b = b->t + 1 + round(cd_test_uniform(0, im->h - b->t - 1) * 4) / 4;
            for (int o = 0; o < 8; o++)
                b->other[o] = round(cd_test_uniform(-9, 9) * 100) / 100;
            b->other[1] = (double)(cd_test_rand_u64() % 3);
            /* some boxes share a depth: DIGITS's order puts them in reverse */
            b->z = k == 1 && im->nbox ? im->boxes[0].z : round(cd_test_uniform(0, 80) * 10) / 10;
            b->line = ++line;
            append_box_line(text, sizeof text, b, g_names[b->cls]);
            if (im->split && (b->r - b->l < 4 || b->b - b->t < 4))
                b->cls = 0; /* under val_min_box_size */
            if (i < NTRAIN && k == 0 && i == 9)
                strcat(text, "\n\n"), line += 2; /* blank lines are skipped */
            im->nbox++;
        }
        box extra = {.l = 1, .t = 1, .r = 3, .b = 3, .z = 5};
        switch (i) {
        case 0: /* 14 values */
            strcat(text, "rectangle 0 0 0 1 1 3 3 1 1 1 0 0 5\n");
            line++;
            break;
        case 1: /* a value not a number */
            strcat(text, "disc 0 0 zero 1 1 3 3 1 1 1 0 0 5 0\n");
            line++;
            break;
        case 2: /* empty */
            strcat(text, "disc 0 0 0 3 1 3 3 1 1 1 0 0 5 0\n");
            line++;
            break;
        case 3: /* outside: right of the image */
            extra.l = im->w + 1, extra.r = im->w + 4;
            append_box_line(text, sizeof text, &extra, "rectangle");
            line++;
            break;
        case 4: /* no class: kept as dontcare */
            extra.line = ++line;
            extra.cls = 0;
            append_box_line(text, sizeof text, &extra, "truck");
            im->boxes[im->nbox++] = extra;
            break;
        case 5: /* past the top left: clipped */
            extra.l = -2, extra.t = -1, extra.line = ++line;
            extra.cls = 1;
            append_box_line(text, sizeof text, &extra, "Rectangle");
            im->boxes[im->nbox++] = extra;
            break;
        case NTRAIN: /* val: 3 pixels wide, under val_min_box_size 4: dontcare */
            extra.r = 4, extra.b = 6, extra.line = ++line, extra.cls = 1;
            append_box_line(text, sizeof text, &extra, "rectangle");
            extra.cls = 0;
            im->boxes[im->nbox++] = extra;
            break;
        default:
            break;
        }
        if (i == 6) { /* a 16th column (a KITTI result's score) */
            size_t n = strlen(text);
            if (n && text[n - 1] == '\n') {
                text[n - 1] = 0;
                strcat(text, " 0.75\n");
            }
        }
        if (im->labelled) {
            snprintf(rel, sizeof rel, "%s/labels/%03d.txt", im->split ? "val" : "train", i);
            cd_test_write_text(rel, text);
        }
    }
    cd_test_write_text("train/labels/orphan.txt", "car 0 0 0 1 1 2 2 1 1 1 0 0 0 0\n");
}

/* The rows of image im's record, computed here: clipped, scaled, in DIGITS's order
 * (sorted by z, then reversed: z descending, one depth in reverse line order). */
static int expected_rows(const det_image *im, float (*rows)[DS_DET_ROW])
{
    int order[MAXB], n = im->nbox;
    for (int k = 0; k < n; k++)
        order[k] = k;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const box *x = &im->boxes[order[a]], *y = &im->boxes[order[b]];
            if (y->z > x->z || (y->z == x->z && y->line > x->line)) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
        }
    double sx = (double)RS_W / PAD_W, sy = (double)RS_H / PAD_H;
    for (int k = 0; k < n; k++) {
        const box *b = &im->boxes[order[k]];
        double l = fmax(b->l, 0), t = fmax(b->t, 0), r = fmin(b->r, im->w), bt = fmin(b->b, im->h);
        const double v[DS_DET_ROW] = {l * sx, t * sy, (r - l) * sx, (bt - t) * sy, b->other[2], b->cls, 0,
                                      b->other[0] * 3, b->other[0], b->other[1], b->other[5], b->other[4],
                                      b->other[3], b->other[6], b->other[7], b->z};
        for (int j = 0; j < DS_DET_ROW; j++)
            rows[k][j] = (float)v[j];
    }
    return n;
}

static int largest_boxes(void)
{
    int m = 1;
    for (int i = 0; i < NTRAIN + NVAL; i++)
        if (g_img[i].labelled && i != 8 && g_img[i].nbox > m)
            m = g_img[i].nbox;
    return m;
}

/* Every record of a split: its image by its red value, its rows against expected_rows. */
static size_t check_split(const char *outdir, const char *split, int max_boxes)
{
    cd_db_t *f = NULL, *l = NULL;
    size_t n = cd_test_open_split_dbs(outdir, split, &f, &l);
    if (!f || !l) {
        cd_db_close(f);
        cd_db_close(l);
        return 0;
    }
    CHECK(cd_db_width(f) == RS_W && cd_db_height(f) == RS_H && cd_db_channels(f) == 3 &&
              cd_db_encoding(f) == CD_ENC_PNG,
          "%s.db holds %dx%d images", split, RS_W, RS_H);
    CHECK(cd_db_channels(l) == 1 && cd_db_height(l) == max_boxes && cd_db_width(l) == DS_DET_ROW &&
              cd_db_encoding(l) == CD_ENC_F32,
          "%s_labels.db is 1x%dx16 f32: %dx%dx%d", split, max_boxes, cd_db_channels(l), cd_db_height(l),
          cd_db_width(l));
    uint8_t px[3 * RS_W * RS_H];
    float *got = calloc((size_t)max_boxes * DS_DET_ROW, sizeof *got);
    float want[MAXB][DS_DET_ROW];
    for (size_t r = 0; r < n; r++) {
        char err[256];
        CHECK(cd_db_read(f, r, px, err, sizeof err) == CD_OK, "read %s record %zu: %s", split, r, err);
        int who = -1;
        for (int i = 0; i < NTRAIN + NVAL; i++)
            if (abs(px[0] - g_img[i].red) <= 2)
                who = i;
        CHECK(who >= 0, "%s record %zu (red %d) is one of the images", split, r, px[0]);
        if (who < 0)
            continue;
        det_image *im = &g_img[who];
        im->seen++;
        /* the padding is black: the stored image's bottom right is past the source image
         * when it fills less than the padded size there */
        if (im->w * 2 <= PAD_W - 4)
            CHECK(px[RS_W - 1] < 10, "record %zu of image %d: padded black on the right (%d)", r, who, px[RS_W - 1]);
        CHECK(cd_db_read_f32(l, r, got, err, sizeof err) == CD_OK, "read %s label %zu: %s", split, r, err);
        int nb = expected_rows(im, want);
        for (int k = 0; k < max_boxes; k++)
            for (int j = 0; j < DS_DET_ROW; j++) {
                double w = k < nb ? want[k][j] : j == 5 ? -1 : 0;
                if (!cd_test_near(got[k * DS_DET_ROW + j], w, 1e-4))
                    CHECK(0, "%s record %zu (image %d) row %d value %d is %g, not %g", split, r, who, k, j,
                          got[k * DS_DET_ROW + j], w);
            }
    }
    free(got);
    cd_db_close(f);
    cd_db_close(l);
    return n;
}

static size_t json_size_at(json_t *o, const char *a, const char *b)
{
    return (size_t)json_integer_value(json_object_get(json_object_get(o, a), b));
}

static void dataset_json(char *json, size_t size, int threads)
{
    snprintf(json, size,
             "{\"task\": \"detection\", \"train_image_folder\": \"%s\", \"train_label_folder\": \"%s\", "
             "\"val_image_folder\": \"%s\", \"val_label_folder\": \"%s\", \"custom_classes\": "
             "\"dontcare,rectangle,disc\", \"padding_image_width\": %d, \"padding_image_height\": %d, "
             "\"resize_image_width\": %d, \"resize_image_height\": %d, \"val_min_box_size\": 4, \"encoding\": "
             "\"png\", \"seed\": 3, \"threads\": %d}",
             cd_test_tmp_path("train/images"), cd_test_tmp_path("train/labels"), cd_test_tmp_path("val/images"),
             cd_test_tmp_path("val/labels"), PAD_W, PAD_H, RS_W, RS_H, threads);
}

static void test_dataset(void)
{
    make_images();
    char json[4096], err[1024] = "";
    dataset_json(json, sizeof json, 3);
    cd_dataset_result_t res;
    json_t *lines = NULL;
    int rc = cd_test_dataset_run(json, "det1", &res, &lines, err, sizeof err);
    CHECK(rc == CD_OK, "the detection dataset: %s", err);
    if (rc != CD_OK) {
        json_decref(lines);
        return;
    }
    CHECK(res.count[0] == NTRAIN - 2 && res.count[1] == NVAL && res.skipped == 2 && res.num_classes == 3,
          "train %zu val %zu skipped %zu classes %d", res.count[0], res.count[1], res.skipped, res.num_classes);
    CHECK(cd_test_log_mentions(lines, "007.png") && cd_test_log_mentions(lines, "no label file"),
          "the image without a label file is named");
    CHECK(cd_test_log_mentions(lines, "008.png") && cd_test_log_mentions(lines, "larger than the padding size"),
          "the image larger than the padding is named");
    static const struct {
        const char *file, *says;
    } named[] = {{"000.txt:", "14 values"}, {"001.txt:", "\"zero\", not a number"}, {"002.txt:", "is empty"},
                 {"003.txt:", "outside the"}, {"004.txt:", "\"truck\" is no class"}};
    for (size_t i = 0; i < CD_ARRAY_LEN(named); i++)
        CHECK(cd_test_log_mentions(lines, named[i].file) && cd_test_log_mentions(lines, named[i].says),
              "the bad line of %s is named: %s", named[i].file, named[i].says);
    int max_boxes = largest_boxes();
    size_t nt = check_split("det1", "train", max_boxes), nv = check_split("det1", "val", max_boxes);
    CHECK(nt == NTRAIN - 2 && nv == NVAL, "records: train %zu val %zu", nt, nv);
    for (int i = 0; i < NTRAIN + NVAL; i++)
        CHECK(g_img[i].seen == (i == 7 || i == 8 ? 0 : 1), "image %d is in %d records", i, g_img[i].seen);

    json_t *st = cd_test_load_stats("det1");
    json_t *shape = json_object_get(st, "label_shape");
    CHECK(!strcmp(json_string_value(json_object_get(st, "task")), "detection") &&
              json_integer_value(json_object_get(st, "max_boxes")) == max_boxes &&
              json_integer_value(json_array_get(shape, 1)) == max_boxes &&
              json_integer_value(json_array_get(shape, 2)) == DS_DET_ROW,
          "stats.json: task detection, max_boxes %d, label_shape [1, %d, 16]", max_boxes, max_boxes);
    json_t *bad = json_object_get(st, "bad_labels");
    static const char *const kinds[] = {"columns", "number", "empty", "outside", "unknown_class"};
    for (size_t k = 0; k < CD_ARRAY_LEN(kinds); k++)
        CHECK(json_integer_value(json_object_get(bad, kinds[k])) == 1, "bad_labels.%s is 1", kinds[k]);
    CHECK(json_integer_value(json_object_get(st, "clipped_boxes")) == 1, "one box is clipped");
    /* the boxes per class of each split, counted here */
    json_t *bs = json_object_get(st, "box_stats");
    for (int s = 0; s < 2; s++) {
        size_t want[3] = {0}, images[3] = {0};
        double hmax[3] = {0};
        for (int i = 0; i < NTRAIN + NVAL; i++) {
            if (g_img[i].split != s || !g_img[i].seen)
                continue;
            float rows[MAXB][DS_DET_ROW];
            int nb = expected_rows(&g_img[i], rows), has[3] = {0};
            for (int k = 0; k < nb; k++) {
                int c = (int)rows[k][5];
                want[c]++;
                has[c] = 1;
                hmax[c] = fmax(hmax[c], rows[k][3]);
            }
            for (int c = 0; c < 3; c++)
                images[c] += has[c];
        }
        json_t *list = json_object_get(bs, s ? "val" : "train");
        size_t found[3] = {0}, found_images[3] = {0};
        for (size_t k = 0; k < json_array_size(list); k++) {
            json_t *c = json_array_get(list, k);
            int cls = (int)json_integer_value(json_object_get(c, "class"));
            if (cls < 0 || cls > 2)
                continue;
            found[cls] = (size_t)json_integer_value(json_object_get(c, "boxes"));
            found_images[cls] = (size_t)json_integer_value(json_object_get(c, "images"));
            CHECK_NEAR(json_real_value(json_object_get(json_object_get(c, "height"), "max")), hmax[cls], 1e-4,
                       "the tallest box of the class");
            size_t hist = 0;
            json_t *h = json_object_get(c, "height_histogram");
            for (size_t b = 0; b < json_array_size(h); b++)
                hist += (size_t)json_integer_value(json_array_get(h, b));
            CHECK(hist == found[cls], "the height histogram counts every box");
        }
        for (int c = 0; c < 3; c++)
            CHECK(found[c] == want[c] && found_images[c] == images[c], "%s class %d: %zu boxes in %zu images, not "
                  "%zu in %zu", s ? "val" : "train", c, found[c], found_images[c], want[c], images[c]);
    }
    CHECK(json_size_at(st, "splits", "train") == NTRAIN - 2 && json_size_at(st, "splits", "val") == NVAL,
          "stats.json's splits");
    json_decref(st);
    json_decref(lines);

    /* the same again with one thread: the same files */
    dataset_json(json, sizeof json, 1);
    CHECK(cd_test_dataset_run(json, "det2", &res, NULL, err, sizeof err) == CD_OK, "again: %s", err);
    CHECK(cd_test_same_file("det1/train.db", "det2/train.db") &&
              cd_test_same_file("det1/train_labels.db", "det2/train_labels.db") &&
              cd_test_same_file("det1/val_labels.db", "det2/val_labels.db"),
          "the dataset is the same whatever the thread count");
}

/* Without padding and resizing the first image by name sets the shape; KITTI's mapping. */
static void test_unpadded(void)
{
    int red[4] = {30, 60, 90, 120};
    for (int i = 0; i < 4; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "plain/img/%c.png", 'a' + i);
        write_solid(rel, i == 2 ? 9 : 8, 6, red[i]);
        snprintf(rel, sizeof rel, "plain/lab/%c.txt", 'a' + i);
        cd_test_write_text(rel, i == 3 ? "" : "Car 0 0 0 1 1 5 4 1 1 1 0 0 3 0\nPedestrian 0 0 0 2 2 4 5 1 1 1 0 0 9 0\n");
    }
    char json[2048], err[1024] = "";
    snprintf(json, sizeof json, "{\"task\": \"detection\", \"train_image_folder\": \"%s\", \"train_label_folder\": "
             "\"%s\", \"seed\": 11}", cd_test_tmp_path("plain/img"), cd_test_tmp_path("plain/lab"));
    cd_dataset_result_t res;
    json_t *lines = NULL;
    CHECK(cd_test_dataset_run(json, "plain1", &res, &lines, err, sizeof err) == CD_OK, "unpadded: %s", err);
    CHECK(res.count[0] == 3 && res.count[1] == 0 && res.skipped == 1 && res.num_classes == 16,
          "3 records of 8x6, KITTI's 16 classes: %zu, %zu skipped", res.count[0], res.skipped);
    CHECK(cd_test_log_mentions(lines, "c.png") && cd_test_log_mentions(lines, "the dataset's images are 8x6"),
          "the 9x6 image is skipped and named");
    cd_db_t *f = NULL, *l = NULL;
    size_t n = cd_test_open_split_dbs("plain1", "train", &f, &l);
    float v[2 * DS_DET_ROW];
    uint8_t px[3 * 8 * 6];
    int empty = 0;
    for (size_t r = 0; r < n; r++) {
        CHECK(cd_db_read_f32(l, r, v, err, sizeof err) == CD_OK && cd_db_read(f, r, px, err, sizeof err) == CD_OK,
              "read %zu", r);
        if (px[0] == 120) { /* d: no boxes */
            empty = 1;
            CHECK(v[5] == -1 && v[DS_DET_ROW + 5] == -1 && v[0] == 0, "an image without boxes: class -1 rows");
            continue;
        }
        /* z 9 first, then z 3; boxes as they are */
        CHECK(v[5] == 8 && v[0] == 2 && v[1] == 2 && v[2] == 2 && v[3] == 3 && v[15] == 9, "pedestrian first: class 8");
        CHECK(v[DS_DET_ROW + 5] == 1 && v[DS_DET_ROW + 2] == 4 && v[DS_DET_ROW + 3] == 3, "then the car");
    }
    CHECK(empty, "the image without boxes is a record");
    cd_db_close(f);
    cd_db_close(l);
    json_decref(lines);
    json_t *st = cd_test_load_stats("plain1");
    CHECK(json_is_null(json_object_get(st, "padding")) && json_is_null(json_object_get(st, "resize")) &&
              !strcmp(json_string_value(json_object_get(st, "class_mapping")), "kitti"),
          "stats.json: no padding, no resize, KITTI's mapping");
    json_decref(st);

    /* an image folder without any label file is refused, naming both folders */
    snprintf(json, sizeof json, "{\"task\": \"detection\", \"train_image_folder\": \"%s\", \"train_label_folder\": "
             "\"%s\"}", cd_test_tmp_path("plain/img"), cd_test_tmp_path("plain"));
    CHECK(cd_test_dataset_run(json, "plain2", &res, NULL, err, sizeof err) == CD_ERR &&
              strstr(err, "has a label file in"),
          "no label files: %s", err);
}

int main(void)
{
    cd_test_init("test_dataset_detection");
    test_parse_line();
    test_classes_and_config();
    test_place_box();
    test_dataset();
    test_unpadded();
    int rc = cd_test_finish();
    if (rc == 0)
        cd_test_tmpdir_remove();
    return rc;
}
