/* The training loader: which records a batch holds (shuffled or in stored order, and
 * the slices replicas read), the flips it draws, and train.json's flip, shuffle and
 * gpus. */
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/dataset.h"
#include "cdigits/loader.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

#define N 50 /* records; record i holds pixel value i and label i % 7 */
#define SIDE 4

static char g_db[4200];

static void write_db(void)
{
    char err[512];
    snprintf(g_db, sizeof g_db, "%s/loader.db", cd_test_tmpdir());
    cd_db_writer_t *w = cd_db_writer_open(g_db, 1, SIDE, SIDE, CD_ENC_NONE, 7, err, sizeof err);
    CHECK(w != NULL, "writer: %s", err);
    if (!w)
        exit(cd_test_finish());
    for (int i = 0; i < N; i++) {
        uint8_t rec[SIDE * SIDE];
        memset(rec, i, sizeof rec);
        CHECK(cd_db_writer_add(w, rec, sizeof rec, i % 7, err, sizeof err) == CD_OK, "add: %s", err);
    }
    CHECK(cd_db_writer_finish(w, err, sizeof err) == CD_OK, "finish: %s", err);
}

/* The records of `batches` batches as the loader delivers them (pixel 0 of each image),
 * with their flip bits; returns the number of images read. */
static int read_batches(const cd_loader_opts *o, int batches, int *rec, uint8_t *flips)
{
    char err[512];
    cd_loader_t *l = cd_loader_start(o, err, sizeof err);
    CHECK(l != NULL, "loader: %s", err);
    if (!l)
        return 0;
    int k = 0;
    for (int b = 0; b < batches; b++) {
        const cd_batch *bt = cd_loader_next(l, NULL);
        if (!bt)
            break;
        for (int j = 0; j < bt->n; j++, k++) {
            rec[k] = bt->pixels[(size_t)j * SIDE * SIDE];
            flips[k] = bt->mirror[j];
            CHECK((int)bt->labels[j] == rec[k] % 7, "label %g of record %d", bt->labels[j], rec[k]);
        }
        cd_loader_release(l, bt);
    }
    CHECK(cd_loader_error(l) == NULL, "loader error: %s", cd_loader_error(l));
    cd_loader_stop(l);
    return k;
}

static cd_loader_opts opts(const cd_db_t *db)
{
    cd_loader_opts o = {.db = db, .batch = 10, .wrap = 1, .seed = 42, .shuffle = 1, .threads = 2, .ring = 3};
    return o;
}

static void test_order(const cd_db_t *db)
{
    int rec[3 * N];
    uint8_t flips[3 * N];
    /* stored order: batch k holds positions 10k..10k+9, passes wrap around */
    cd_loader_opts o = opts(db);
    o.shuffle = 0;
    int n = read_batches(&o, 12, rec, flips);
    CHECK(n == 120, "%d images", n);
    int ok = 1;
    for (int k = 0; k < n; k++)
        ok &= rec[k] == k % N;
    CHECK(ok, "shuffle off: records in stored order, every pass");
    /* shuffled: each pass is a permutation, and the two passes differ */
    o.shuffle = 1;
    n = read_batches(&o, 10, rec, flips);
    CHECK(n == 2 * N, "%d images", n);
    int seen[2][N] = {{0}}, moved = 0, differ = 0;
    for (int k = 0; k < n; k++) {
        seen[k / N][rec[k]]++;
        moved += rec[k] != k % N;
        differ += k < N && rec[k] != rec[k + N];
        CHECK(rec[k] == (int)cd_loader_record(42, 1, N, (uint64_t)k), "position %d", k);
    }
    int perm = 1;
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < N; i++)
            perm &= seen[p][i] == 1;
    CHECK(perm, "shuffled: every record once per pass");
    CHECK(moved > N, "shuffled: %d of %d positions hold another record", moved, n);
    CHECK(differ > N / 2, "shuffled: passes differ at %d of %d positions", differ, N);
    /* replicas: replica r of 2 reads batch i at positions i*20 + 10r .. +9 */
    int whole[40], part[2][20];
    uint8_t f[40];
    o.batch = 20;
    read_batches(&o, 2, whole, f);
    o.batch = 10;
    o.stride = 20;
    for (int r = 0; r < 2; r++) {
        o.offset = 10 * r;
        read_batches(&o, 2, part[r], f);
    }
    int slices = 1;
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 10; j++)
                slices &= part[r][i * 10 + j] == whole[i * 20 + r * 10 + j];
    CHECK(slices, "two replicas of batch 10 read the two halves of each batch of 20");
}

static void test_flips(const cd_db_t *db)
{
    static const struct {
        int flip;
        const char *name;
    } cases[] = {{0, "none"},
                 {CD_FLIP_LR, "fliplr"},
                 {CD_FLIP_UD, "flipud"},
                 {CD_FLIP_LR | CD_FLIP_UD, "fliplrud"}};
    enum { IMAGES = 400 };
    int rec[IMAGES];
    uint8_t flips[IMAGES], lr_only[IMAGES];
    for (size_t c = 0; c < CD_ARRAY_LEN(cases); c++) {
        cd_loader_opts o = opts(db);
        o.flip = cases[c].flip;
        int n = read_batches(&o, IMAGES / 10, rec, flips);
        int count[4] = {0};
        for (int k = 0; k < n; k++)
            count[flips[k] & 3]++;
        CHECK(n == IMAGES && count[0] + count[1] + count[2] + count[3] == n, "%s: %d images", cases[c].name, n);
        for (int bits = 0; bits < 4; bits++) {
            int allowed = (bits & ~cases[c].flip) == 0;
            int on = __builtin_popcount((unsigned)cases[c].flip);
            /* each allowed combination: IMAGES / 2^on images, binomial spread */
            double want = allowed ? (double)IMAGES / (1 << on) : 0;
            CHECK(allowed ? count[bits] > 0.7 * want && count[bits] < 1.3 * want : count[bits] == 0,
                  "%s: %d images with flip bits %d (expected about %.0f)", cases[c].name, count[bits], bits,
                  want);
        }
        if (cases[c].flip == CD_FLIP_LR)
            memcpy(lr_only, flips, sizeof flips);
        if (cases[c].flip == (CD_FLIP_LR | CD_FLIP_UD)) {
            /* the left-right draw does not change when the vertical one is added */
            int same = 1;
            for (int k = 0; k < n; k++)
                same &= (flips[k] & CD_FLIP_LR) == lr_only[k];
            CHECK(same, "fliplrud draws the same left-right flips as fliplr");
        }
    }
}

static int load_config(const char *json, cd_train_config *c, char *err, size_t errlen)
{
    if (cd_test_write("train.json", json) != CD_OK)
        return CD_ERR;
    return cd_train_config_load(c, cd_test_tmpdir(), err, errlen);
}

static void test_config(void)
{
    static const struct {
        const char *json;
        int ok, flip, shuffle, mirror;
    } cases[] = {
        {"{\"dataset_dir\": \"d\"}", 1, 0, 1, -1},
        {"{\"dataset_dir\": \"d\", \"flip\": \"fliplr\"}", 1, CD_FLIP_LR, 1, -1},
        {"{\"dataset_dir\": \"d\", \"flip\": \"flipud\", \"use_mirror\": true}", 1, CD_FLIP_UD, 1, 1},
        {"{\"dataset_dir\": \"d\", \"flip\": \"fliplrud\", \"shuffle\": false}", 1, CD_FLIP_LR | CD_FLIP_UD, 0, -1},
        {"{\"dataset_dir\": \"d\", \"flip\": \"none\", \"shuffle\": true}", 1, 0, 1, -1},
        {"{\"dataset_dir\": \"d\", \"flip\": \"sideways\"}", 0, 0, 0, 0},
        {"{\"dataset_dir\": \"d\", \"shuffle\": \"no\"}", 0, 0, 0, 0},
        {"{\"dataset_dir\": \"d\", \"gpus\": [0, 1, 0]}", 0, 0, 0, 0},
        {"{\"dataset_dir\": \"d\", \"gpus\": [-1]}", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        cd_train_config c;
        cd_train_config_init(&c);
        char err[512] = "";
        int rc = load_config(cases[i].json, &c, err, sizeof err);
        if (cases[i].ok)
            CHECK(rc == CD_OK && c.flip == cases[i].flip && c.shuffle == cases[i].shuffle &&
                      c.mirror == cases[i].mirror,
                  "%s: rc %d (%s) flip %d shuffle %d mirror %d", cases[i].json, rc, err, c.flip, c.shuffle,
                  c.mirror);
        else
            CHECK(rc != CD_OK && (strstr(err, "\"flip\"") || strstr(err, "\"shuffle\"") || strstr(err, "\"gpus\"")),
                  "%s: refused naming the key: %s", cases[i].json, err);
    }
}

int main(void)
{
    cd_test_init("test_loader");
    write_db();
    char err[512];
    cd_db_t *db = cd_db_open(g_db, err, sizeof err);
    CHECK(db != NULL, "open: %s", err);
    if (db) {
        test_order(db);
        test_flips(db);
        cd_db_close(db);
    }
    test_config();
    return cd_test_finish();
}
