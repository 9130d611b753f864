/* IDX import: a generated MNIST-style pair (plain and gzipped) becomes class folders
 * of PNGs with the exact pixels; bad files are clear errors; a dataset made from the
 * import holds the same pixels. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"

#define NIMG 23
#define ROWS 5
#define COLS 4

static uint8_t g_pix[NIMG][ROWS * COLS];
static uint8_t g_lab[NIMG];

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* Write an IDX file of unsigned bytes; cut > 0 drops that many bytes from the end. */
static void write_idx(const char *rel, int ndim, const uint32_t *dims, const uint8_t *data,
                      size_t n, size_t cut)
{
    size_t hdr = 4 + 4 * (size_t)ndim;
    uint8_t *buf = calloc(1, hdr + n);
    buf[2] = 0x08;
    buf[3] = (uint8_t)ndim;
    for (int d = 0; d < ndim; d++)
        put_be32(buf + 4 + 4 * d, dims[d]);
    memcpy(buf + hdr, data, n);
    CHECK(cd_write_file_atomic(cd_test_tmp_path(rel), buf, hdr + n - cut) == CD_OK, "write %s", rel);
    free(buf);
}

static void make_files(void)
{
    for (int i = 0; i < NIMG; i++) {
        g_lab[i] = (uint8_t)(cd_test_rand_u64() % 3);
        for (int k = 0; k < ROWS * COLS; k++)
            g_pix[i][k] = (uint8_t)(cd_test_rand_u64() >> 56);
    }
    g_lab[0] = 0, g_lab[1] = 1, g_lab[2] = 2; /* every class present */
    uint32_t idims[3] = {NIMG, ROWS, COLS}, ldims[1] = {NIMG};
    write_idx("images.idx", 3, idims, &g_pix[0][0], sizeof g_pix, 0);
    write_idx("labels.idx", 1, ldims, g_lab, NIMG, 0);
    write_idx("images_cut.idx", 3, idims, &g_pix[0][0], sizeof g_pix, 7);
    uint32_t ldims_short[1] = {NIMG - 1};
    write_idx("labels_short.idx", 1, ldims_short, g_lab, NIMG - 1, 0);
    static const char junk[] = "\x7f" "ELF and so on";
    cd_write_file_atomic(cd_test_tmp_path("junk.idx"), junk, sizeof junk);
}

static int import(const char *images, const char *labels, const char *out, const char *names,
                  size_t limit, char *err, size_t errlen)
{
    cd_idx_import_opts o = {0};
    char im[4300], lb[4300], od[4300];
    snprintf(im, sizeof im, "%s", cd_test_tmp_path(images));
    snprintf(lb, sizeof lb, "%s", cd_test_tmp_path(labels));
    snprintf(od, sizeof od, "%s", cd_test_tmp_path(out));
    o.images = im;
    o.labels = lb;
    o.out_dir = od;
    o.label_names = names;
    o.limit = limit;
    o.threads = 2;
    size_t written = 0;
    int rc = cd_idx_import(&o, &written, err, errlen);
    if (rc == CD_OK)
        CHECK(written == (limit ? limit : NIMG), "written %zu", written);
    return rc;
}

static void check_tree(const char *out, const char *const names[3], size_t n)
{
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s/%02zu.png", out, names[g_lab[i]], i);
        cd_image_t img;
        char err[512];
        if (cd_image_load(cd_test_tmp_path(rel), 1, &img, err, sizeof err) != CD_OK) {
            CHECK(0, "%s", err);
            ok = 0;
            continue;
        }
        ok &= img.h == ROWS && img.w == COLS && memcmp(img.data, g_pix[i], ROWS * COLS) == 0;
        cd_image_free(&img);
    }
    CHECK(ok, "%s: every image is in its class folder with its exact pixels", out);
}

static void test_import(void)
{
    char err[1024] = "";
    CHECK(import("images.idx", "labels.idx", "out_named", "tshirt_top, trouser ,bag", 0, err,
                 sizeof err) == CD_OK,
          "import: %s", err);
    const char *named[3] = {"tshirt_top", "trouser", "bag"};
    check_tree("out_named", named, NIMG);

    CHECK(import("images.idx", "labels.idx", "out_num", NULL, 5, err, sizeof err) == CD_OK,
          "import numbered: %s", err);
    const char *nums[3] = {"0", "1", "2"};
    check_tree("out_num", nums, 5);
    struct stat st;
    CHECK(stat(cd_test_tmp_path("out_num/0/05.png"), &st) != 0, "--limit stops at 5");

    /* gzipped copies, as Debian ships Fashion-MNIST */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s' && gzip -c '%s' > '%s'",
             cd_test_tmp_path("images.idx"), cd_test_tmp_path("images.idx.gz"),
             cd_test_tmp_path("labels.idx"), cd_test_tmp_path("labels.idx.gz"));
    if (system(cmd) != 0) {
        cd_test_cannot("gzip tests: gzip is not installed");
    } else {
        CHECK(import("images.idx.gz", "labels.idx.gz", "out_gz", "tshirt_top,trouser,bag", 0, err,
                     sizeof err) == CD_OK,
              "import gz: %s", err);
        check_tree("out_gz", named, NIMG);
        size_t len;
        char *gz = cd_read_file(cd_test_tmp_path("images.idx.gz"), &len);
        cd_write_file_atomic(cd_test_tmp_path("images_cut.idx.gz"), gz, len - 20);
        free(gz);
        err[0] = 0;
        CHECK(import("images_cut.idx.gz", "labels.idx", "out_bad", NULL, 0, err, sizeof err) ==
                      CD_ERR &&
                  strstr(err, "damaged or truncated"),
              "truncated gz: %s", err);
    }
}

static void test_errors(void)
{
    static const struct {
        const char *images, *labels, *names, *needle;
    } cases[] = {
        {"labels.idx", "images.idx", NULL, "did you swap --images and --labels"},
        {"images_cut.idx", "labels.idx", NULL, "truncated"},
        {"junk.idx", "labels.idx", NULL, "is not an IDX file"},
        {"missing.idx", "labels.idx", NULL, "missing.idx"},
        {"images.idx", "labels_short.idx", NULL, "has 23 images but"},
        {"images.idx", "labels.idx", "a,b", "gives 2 names but the labels go up to 2"},
        {"images.idx", "labels.idx", "a,x/y,c", "cannot be a folder name"},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        char err[1024] = "";
        CHECK(import(cases[i].images, cases[i].labels, "out_err", cases[i].names, 0, err,
                     sizeof err) == CD_ERR &&
                  strstr(err, cases[i].needle),
              "%s + %s: %s", cases[i].images, cases[i].labels, err);
    }
}

/* A gray dataset at the IDX size keeps the pixels exactly. */
static void test_dataset_from_import(void)
{
    char json[8192], err[1024] = "";
    snprintf(json, sizeof json,
             "{\"folder_train\": \"%s\", \"channels\": 1, \"width\": %d, \"height\": %d, "
             "\"pct_val\": 0, \"min_per_class\": 1, \"threads\": 2}",
             cd_test_tmp_path("out_named"), COLS, ROWS);
    cd_dataset_config_t cfg;
    cd_dataset_config_init(&cfg);
    CHECK(cd_dataset_config_parse(json, &cfg, err, sizeof err) == CD_OK, "cfg: %s", err);
    cd_dataset_result_t res;
    CHECK(cd_dataset_create(&cfg, cd_test_tmp_path("job"), NULL, &res, err, sizeof err) == CD_OK,
          "create: %s", err);
    cd_dataset_config_free(&cfg);
    CHECK(res.count[0] == NIMG && res.num_classes == 3, "count %zu", res.count[0]);
    cd_db_t *db = cd_db_open(cd_test_tmp_path("job/train.db"), err, sizeof err);
    CHECK(db != NULL, "open: %s", err);
    if (!db)
        return;
    /* labels are the sorted class names: bag 0, trouser 1, tshirt_top 2 */
    static const int remap[3] = {2, 1, 0};
    int found = 0;
    for (size_t r = 0; r < cd_db_count(db); r++) {
        const uint8_t *raw = cd_db_raw(db, r);
        for (int i = 0; i < NIMG; i++)
            if (memcmp(raw, g_pix[i], ROWS * COLS) == 0 && cd_db_label(db, r) == remap[g_lab[i]]) {
                found++;
                break;
            }
    }
    CHECK(found == NIMG, "%d of %d records match an IDX image and its label", found, NIMG);
    cd_db_close(db);
}

int main(void)
{
    cd_test_init("test_dataset_idx");
    make_files();
    test_import();
    test_errors();
    test_dataset_from_import();
    return cd_test_finish();
}
