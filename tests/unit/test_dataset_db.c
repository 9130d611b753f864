/* The .db format: write/read/verify per encoding (JPEG records decoded exactly as
 * libjpeg itself decodes their bytes), damage detection, truncation, a failing disk,
 * concurrent readers; labels.txt and mean.bin. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"
#include "testutil.h"

#define N 37
#define C 3
#define H 12
#define W 10
#define PLANE (C * H * W)

static uint8_t g_pix[N][PLANE];
static int g_lab[N];

static void make_images(void)
{
    for (int i = 0; i < N; i++) {
        g_lab[i] = (int)(cd_test_rand_u64() % 5);
        /* smooth plus noise, so JPEG stays close; each channel slopes its own way, so the
         * color (the chroma JPEG subsamples 2x2) varies across the image and the
         * decoder's chroma upsampling shows in the pixels */
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int slope = c == 0 ? 12 * x + 4 * y
                              : c == 1 ? 4 * x + 12 * y
                                       : 12 * (W - 1 - x) + 4 * (H - 1 - y);
                    g_pix[i][(c * H + y) * W + x] =
                        (uint8_t)(40 + slope + i + (int)(cd_test_rand_u64() % 4));
                }
    }
}

/* ---- libjpeg itself, the reference for JPEG records ------------------------------ */

typedef struct ref_jpeg {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} ref_jpeg;

static void ref_jpeg_error_exit(j_common_ptr cinfo)
{
    ref_jpeg *r = (ref_jpeg *)cinfo->client_data;
    r->mgr.format_message(cinfo, r->msg);
    longjmp(r->jb, 1);
}

/*
 * Decodes the JPEG bytes buf[0..len) with libjpeg directly into chw (c, h, w planar),
 * with the settings src/dataset/jpeg_codec.c decodes with: libjpeg's defaults (the
 * accurate integer IDCT JDCT_ISLOW, fancy upsampling of subsampled chroma, block
 * smoothing) and the output color space of the db's channels (JCS_GRAYSCALE for 1,
 * JCS_RGB for 3). The same library with the same settings computes the same pixels, so
 * a record must come out of cd_db_read equal to this, not merely close. Returns 0, or -1
 * with msg filled when libjpeg fails or warns, or the image is not c x h x w.
 */
static int ref_jpeg_decode(const uint8_t *buf, size_t len, int c, int h, int w, uint8_t *chw,
                           char *msg, size_t msglen)
{
    ref_jpeg *r = calloc(1, sizeof *r);
    uint8_t *row = malloc((size_t)w * c);
    if (!r || !row) {
        snprintf(msg, msglen, "out of memory");
        free(r);
        free(row);
        return -1;
    }
    r->cinfo.err = jpeg_std_error(&r->mgr);
    r->cinfo.client_data = r;
    r->mgr.error_exit = ref_jpeg_error_exit;
    if (setjmp(r->jb)) {
        snprintf(msg, msglen, "libjpeg: %s", r->msg);
        jpeg_destroy_decompress(&r->cinfo);
        free(row);
        free(r);
        return -1;
    }
    jpeg_create_decompress(&r->cinfo);
    jpeg_mem_src(&r->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&r->cinfo, TRUE);
    r->cinfo.out_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&r->cinfo);
    int rc = -1;
    if ((int)r->cinfo.output_width != w || (int)r->cinfo.output_height != h ||
        r->cinfo.output_components != c) {
        snprintf(msg, msglen, "libjpeg gives %ux%ux%d, not %dx%dx%d", r->cinfo.output_width,
                 r->cinfo.output_height, r->cinfo.output_components, w, h, c);
        jpeg_abort_decompress(&r->cinfo);
        goto out;
    }
    while (r->cinfo.output_scanline < r->cinfo.output_height) {
        int y = (int)r->cinfo.output_scanline;
        JSAMPROW rowp = row;
        jpeg_read_scanlines(&r->cinfo, &rowp, 1);
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++)
                chw[((size_t)k * h + y) * w + x] = row[x * c + k];
    }
    jpeg_finish_decompress(&r->cinfo);
    if (r->mgr.num_warnings) {
        snprintf(msg, msglen, "libjpeg warned %ld times", r->mgr.num_warnings);
        goto out;
    }
    rc = 0;
out:
    jpeg_destroy_decompress(&r->cinfo);
    free(row);
    free(r);
    return rc;
}

/* The largest |a - b| over n bytes. */
static int worst_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int worst = 0;
    for (size_t k = 0; k < n; k++) {
        int d = abs((int)a[k] - (int)b[k]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

static int write_db(const char *path, int enc)
{
    char err[512];
    cd_db_writer_t *w = cd_db_writer_open(path, C, H, W, enc, 5, err, sizeof err);
    if (!w) {
        fprintf(stderr, "%s\n", err);
        return CD_ERR;
    }
    for (int i = 0; i < N; i++) {
        cd_image_t img = {C, H, W, g_pix[i]};
        uint8_t *rec;
        size_t len;
        if (cd_db_encode_record(&img, enc, &rec, &len, err, sizeof err) != CD_OK ||
            cd_db_writer_add(w, rec, len, g_lab[i], err, sizeof err) != CD_OK) {
            fprintf(stderr, "%s\n", err);
            cd_db_writer_abort(w);
            return CD_ERR;
        }
        free(rec);
    }
    CHECK(cd_db_writer_count(w) == N, "writer count");
    int rc = cd_db_writer_finish(w, err, sizeof err);
    if (rc != CD_OK)
        fprintf(stderr, "%s\n", err);
    return rc;
}

static int copy_file(const char *from, const char *to, long cut, long flip_at)
{
    size_t len;
    char *d = cd_read_file(from, &len);
    if (!d)
        return CD_ERR;
    if (cut >= 0 && (size_t)cut < len)
        len = (size_t)cut;
    if (flip_at >= 0)
        d[flip_at] ^= 0x40;
    int rc = cd_write_file_atomic(to, d, len);
    free(d);
    return rc;
}

static void test_roundtrip(int enc)
{
    char name[32], err[512] = "";
    snprintf(name, sizeof name, "rt_%s.db", cd_encoding_name(enc));
    const char *path = cd_test_tmp_path(name);
    CHECK(write_db(path, enc) == CD_OK, "write %s", name);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0, "no temp file left behind");
    cd_db_t *db = cd_db_open(path, err, sizeof err);
    CHECK(db != NULL, "open %s: %s", name, err);
    if (!db)
        return;
    CHECK(cd_db_count(db) == N && cd_db_channels(db) == C && cd_db_height(db) == H &&
              cd_db_width(db) == W && cd_db_encoding(db) == enc && cd_db_num_classes(db) == 5,
          "header fields");
    uint8_t out[PLANE], ref[PLANE];
    int worst = 0, worst_ref = 0, ref_failed = 0;
    double abs_sum = 0;
    int labels_ok = 1, raw_ok = 1;
    for (int i = 0; i < N; i++) {
        labels_ok &= cd_db_label(db, (size_t)i) == g_lab[i];
        CHECK(cd_db_read(db, (size_t)i, out, err, sizeof err) == CD_OK, "read %d: %s", i, err);
        int d = worst_diff(out, g_pix[i], PLANE);
        worst = d > worst ? d : worst;
        for (int k = 0; k < PLANE; k++)
            abs_sum += fabs((double)out[k] - g_pix[i][k]);
        const uint8_t *raw = cd_db_raw(db, (size_t)i);
        raw_ok &= enc == CD_ENC_NONE ? raw && memcmp(raw, g_pix[i], PLANE) == 0 : raw == NULL;
        if (enc == CD_ENC_JPG) {
            size_t len = 0;
            const uint8_t *rec = cd_db_record(db, (size_t)i, &len);
            char why[JMSG_LENGTH_MAX + 64] = "";
            if (!rec || ref_jpeg_decode(rec, len, C, H, W, ref, why, sizeof why) != 0) {
                if (!ref_failed++)
                    fprintf(stderr, "record %d: %s\n", i, rec ? why : "no record");
            } else {
                d = worst_diff(out, ref, PLANE);
                worst_ref = d > worst_ref ? d : worst_ref;
            }
        }
    }
    CHECK(labels_ok, "labels");
    CHECK(raw_ok, "cd_db_raw");
    if (enc == CD_ENC_JPG) {
        /* the decode is libjpeg's own, exactly (another IDCT or chroma upsampling would
         * differ by 1 to 16 levels here); that the bytes hold these images, and not their
         * planes mixed up, which libjpeg would decode just as faithfully, is the
         * quality-90 loss: about 2.6 levels on average and under 20 at worst for these */
        CHECK(ref_failed == 0 && worst_ref == 0,
              "%s: %d records libjpeg could not decode; worst difference from libjpeg's decode %d",
              name, ref_failed, worst_ref);
        double mean_err = abs_sum / ((double)N * PLANE);
        printf("%s: against the original images, mean error %.3f, worst %d\n", name, mean_err,
               worst);
        CHECK(mean_err < 4.0 && worst <= 32, "%s: against the original, mean error %.2f, worst %d",
              name, mean_err, worst);
    } else {
        CHECK(worst == 0, "%s: worst pixel error %d", name, worst);
    }
    CHECK(cd_db_read(db, N, out, err, sizeof err) == CD_ERR && strstr(err, "out of range"),
          "out of range read: %s", err);
    CHECK(cd_db_label(db, N) == -1, "out of range label");
    CHECK(cd_db_verify(db, err, sizeof err) == CD_OK, "verify %s: %s", name, err);
    cd_db_close(db);

    /* one flipped byte inside a record: open works, verify names the record */
    size_t rec_size = 0;
    db = cd_db_open(path, NULL, 0);
    const uint8_t *r5 = cd_db_record(db, 5, &rec_size);
    long at = (long)(r5 + rec_size / 2 - cd_db_record(db, 0, NULL)) + 128;
    cd_db_close(db);
    const char *bad = cd_test_tmp_path("damaged.db");
    CHECK(copy_file(path, bad, -1, at) == CD_OK, "copy");
    db = cd_db_open(bad, err, sizeof err);
    CHECK(db != NULL, "damaged record still opens: %s", err);
    err[0] = 0;
    CHECK(db && cd_db_verify(db, err, sizeof err) == CD_ERR, "verify finds the damage");
    CHECK(strstr(err, "record 5 ") != NULL && strstr(err, "recreate") != NULL,
          "message names record 5: %s", err);
    cd_db_close(db);

    /* a flipped label byte: the header/table checksum fails at open */
    struct stat st;
    stat(path, &st);
    long label_at = (long)st.st_size - 8 * N + 4 * 3; /* labels then crcs, 4 bytes each */
    CHECK(copy_file(path, bad, -1, label_at) == CD_OK, "copy");
    err[0] = 0;
    CHECK(cd_db_open(bad, err, sizeof err) == NULL && strstr(err, "checksum"),
          "damaged label table: %s", err);

    /* truncated files */
    long cuts[] = {(long)st.st_size - 1, (long)st.st_size / 2, 100, 0};
    for (size_t k = 0; k < CD_ARRAY_LEN(cuts); k++) {
        CHECK(copy_file(path, bad, cuts[k], -1) == CD_OK, "copy");
        err[0] = 0;
        CHECK(cd_db_open(bad, err, sizeof err) == NULL, "truncated to %ld opens", cuts[k]);
        CHECK(strstr(err, "truncated") != NULL && strstr(err, bad) != NULL,
              "truncated to %ld: %s", cuts[k], err);
    }
}

/* A one-channel JPEG db: written as grayscale JPEGs, read back as libjpeg decodes them
 * to JCS_GRAYSCALE. */
static void test_jpeg_gray(void)
{
    char err[512] = "";
    const char *path = cd_test_tmp_path("gray_jpg.db");
    cd_db_writer_t *w = cd_db_writer_open(path, 1, H, W, CD_ENC_JPG, 5, err, sizeof err);
    CHECK(w != NULL, "open %s: %s", path, err);
    if (!w)
        return;
    for (int i = 0; i < N; i++) {
        cd_image_t img = {1, H, W, g_pix[i] + (i % C) * H * W}; /* one plane of image i */
        uint8_t *rec;
        size_t len;
        if (cd_db_encode_record(&img, CD_ENC_JPG, &rec, &len, err, sizeof err) != CD_OK ||
            cd_db_writer_add(w, rec, len, g_lab[i], err, sizeof err) != CD_OK) {
            CHECK(0, "gray record %d: %s", i, err);
            cd_db_writer_abort(w);
            return;
        }
        free(rec);
    }
    CHECK(cd_db_writer_finish(w, err, sizeof err) == CD_OK, "finish %s: %s", path, err);
    cd_db_t *db = cd_db_open(path, err, sizeof err);
    CHECK(db != NULL && cd_db_channels(db) == 1, "open %s: %s", path, err);
    if (!db)
        return;
    int worst_ref = 0, worst = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        uint8_t out[H * W], ref[H * W];
        size_t len = 0;
        const uint8_t *rec = cd_db_record(db, (size_t)i, &len);
        char why[JMSG_LENGTH_MAX + 64] = "";
        if (cd_db_read(db, (size_t)i, out, err, sizeof err) != CD_OK || !rec ||
            ref_jpeg_decode(rec, len, 1, H, W, ref, why, sizeof why) != 0) {
            if (!bad++)
                fprintf(stderr, "gray record %d: %s%s\n", i, err, why);
            continue;
        }
        int d = worst_diff(out, ref, H * W);
        worst_ref = d > worst_ref ? d : worst_ref;
        d = worst_diff(out, g_pix[i] + (i % C) * H * W, H * W);
        worst = d > worst ? d : worst;
    }
    CHECK(bad == 0 && worst_ref == 0,
          "gray JPEG: %d records unread; worst difference from libjpeg's decode %d", bad, worst_ref);
    CHECK(worst <= 12, "gray JPEG: worst error against the original %d", worst);
    cd_db_close(db);
}

static void test_bad_files(void)
{
    char err[512] = "";
    const char *junk = cd_test_tmp_path("junk.db");
    char text[300];
    memset(text, 'x', sizeof text);
    cd_write_file_atomic(junk, text, sizeof text);
    CHECK(cd_db_open(junk, err, sizeof err) == NULL && strstr(err, "not a cdigits dataset"),
          "junk: %s", err);
    CHECK(cd_db_open(cd_test_tmp_path("missing.db"), err, sizeof err) == NULL &&
              strstr(err, "missing.db"),
          "missing: %s", err);
    /* a raw record of the wrong size and a label out of range are refused */
    cd_db_writer_t *w = cd_db_writer_open(cd_test_tmp_path("bad.db"), 1, 2, 2, CD_ENC_NONE, 3, err,
                                          sizeof err);
    uint8_t four[4] = {1, 2, 3, 4};
    CHECK(cd_db_writer_add(w, four, 3, 0, err, sizeof err) == CD_ERR, "short raw record");
    CHECK(cd_db_writer_add(w, four, 4, 3, err, sizeof err) == CD_ERR && strstr(err, "0..2"),
          "label out of range: %s", err);
    CHECK(cd_db_writer_add(w, four, 4, 2, err, sizeof err) == CD_OK, "good record");
    cd_db_writer_abort(w);
    CHECK(access(cd_test_tmp_path("bad.db"), F_OK) != 0 && access(cd_test_tmp_path("bad.db.tmp"), F_OK) != 0,
          "abort leaves nothing");
}

/* A file size limit makes write() fail as a full disk would: the error must be
 * reported, nothing may be left that looks complete. */
static void test_write_failure(void)
{
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    setrlimit(RLIMIT_FSIZE, &lim);
    char err[512] = "";
    const char *path = cd_test_tmp_path("full.db");
    cd_db_writer_t *w = cd_db_writer_open(path, 3, 64, 64, CD_ENC_NONE, 0, err, sizeof err);
    static uint8_t rec[3 * 64 * 64];
    int rc = CD_OK;
    for (int i = 0; i < 2000 && rc == CD_OK; i++)
        rc = cd_db_writer_add(w, rec, sizeof rec, 0, err, sizeof err);
    if (rc == CD_OK)
        rc = cd_db_writer_finish(w, err, sizeof err);
    else
        cd_db_writer_abort(w);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(rc == CD_ERR, "writing past the limit fails");
    CHECK(strstr(err, "full.db.tmp") != NULL && strstr(err, "File too large") != NULL,
          "message: %s", err);
    CHECK(access(path, F_OK) != 0, "no final file after a failed write");
}

typedef struct reader_arg {
    cd_db_t *db;
    int bad;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *a = p;
    uint8_t out[PLANE];
    for (int rep = 0; rep < 20; rep++)
        for (int i = 0; i < N; i++) {
            if (cd_db_read(a->db, (size_t)i, out, NULL, 0) != CD_OK ||
                memcmp(out, g_pix[i], PLANE) != 0 || cd_db_label(a->db, (size_t)i) != g_lab[i])
                a->bad++;
        }
    return NULL;
}

static void test_concurrent_reads(void)
{
    cd_db_t *db = cd_db_open(cd_test_tmp_path("rt_png.db"), NULL, 0);
    CHECK(db != NULL, "open png db");
    if (!db)
        return;
    pthread_t t[4];
    reader_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (reader_arg){db, 0};
        pthread_create(&t[i], NULL, reader, &a[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        bad += a[i].bad;
    }
    CHECK(bad == 0, "%d bad reads from 4 threads", bad);
    cd_db_close(db);
}

static void test_labels_mean(void)
{
    const char *lp = cd_test_tmp_path("labels.txt");
    char *names[] = {"cat", "dog", "two words"};
    CHECK(cd_labels_save(lp, names, 3, NULL, 0) == CD_OK, "labels save");
    char **got;
    int n;
    CHECK(cd_labels_load(lp, &got, &n) == CD_OK && n == 3, "labels load");
    CHECK(n == 3 && strcmp(got[0], "cat") == 0 && strcmp(got[2], "two words") == 0, "names");
    cd_labels_free(got, n);
    CHECK(cd_labels_load(cd_test_tmp_path("nolabels.txt"), &got, &n) == CD_ERR &&
              strstr(cd_dataset_strerror(), "nolabels.txt"),
          "missing labels: %s", cd_dataset_strerror());

    const char *mp = cd_test_tmp_path("mean.bin");
    float mean[1 * 4 * 6];
    for (int i = 0; i < 24; i++)
        mean[i] = (float)cd_test_uniform(0, 255);
    CHECK(cd_mean_save(mp, 1, 4, 6, 10, mean, NULL, 0) == CD_OK, "mean save");
    int c, h, w;
    float *m = NULL;
    CHECK(cd_mean_load(mp, &c, &h, &w, &m) == CD_OK, "mean load: %s", cd_dataset_strerror());
    CHECK(c == 1 && h == 4 && w == 6 && m && memcmp(m, mean, sizeof mean) == 0, "mean data");
    free(m);
    size_t len;
    char *d = cd_read_file(mp, &len);
    d[40] ^= 1;
    cd_write_file_atomic(mp, d, len);
    CHECK(cd_mean_load(mp, &c, &h, &w, &m) == CD_ERR && strstr(cd_dataset_strerror(), "checksum"),
          "damaged mean: %s", cd_dataset_strerror());
    cd_write_file_atomic(mp, d, len - 4);
    CHECK(cd_mean_load(mp, &c, &h, &w, &m) == CD_ERR && strstr(cd_dataset_strerror(), "truncated"),
          "short mean: %s", cd_dataset_strerror());
    free(d);
    CHECK(cd_mean_save_png(cd_test_tmp_path("mean.png"), 1, 4, 6, mean, NULL, 0) == CD_OK, "mean png");
    cd_image_t img;
    CHECK(cd_image_load(cd_test_tmp_path("mean.png"), 1, &img, NULL, 0) == CD_OK &&
              img.data[5] == (uint8_t)floorf(mean[5] + 0.5f),
          "mean.png pixel");
    cd_image_free(&img);
}

/* A label db of float targets (f32): values back exactly, fixed-size records without
 * an index, uint8 images read as floats, and shapes refused by encoding. */
static void test_f32(void)
{
    char err[512] = "";
    const char *path = cd_test_tmp_path("targets.db");
    enum { K = 5, R = 7 };
    cd_db_writer_t *w = cd_db_writer_open(path, K, 1, 1, CD_ENC_F32, 0, err, sizeof err);
    CHECK(w != NULL, "open an f32 writer: %s", err);
    if (!w)
        return;
    float v[R][K];
    for (int i = 0; i < R; i++)
        for (int k = 0; k < K; k++)
            v[i][k] = (float)i * 1.5f - (float)k / 3.0f;
    CHECK(cd_db_writer_add(w, v[0], sizeof v[0] - 4, 0, err, sizeof err) == CD_ERR && strstr(err, "20 bytes"),
          "a short f32 record is refused: %s", err);
    for (int i = 0; i < R; i++)
        CHECK(cd_db_writer_add(w, v[i], sizeof v[i], 0, err, sizeof err) == CD_OK, "add %d: %s", i, err);
    CHECK(cd_db_writer_finish(w, err, sizeof err) == CD_OK, "finish: %s", err);
    cd_db_t *db = cd_db_open(path, err, sizeof err);
    CHECK(db != NULL && cd_db_encoding(db) == CD_ENC_F32 && cd_db_count(db) == R && cd_db_channels(db) == K,
          "open the f32 db: %s", err);
    if (!db)
        return;
    int same = 1;
    for (int i = 0; i < R; i++) {
        float got[K];
        CHECK(cd_db_read_f32(db, (size_t)i, got, err, sizeof err) == CD_OK, "read %d: %s", i, err);
        same &= memcmp(got, v[i], sizeof got) == 0;
    }
    CHECK(same, "every value comes back bit for bit");
    uint8_t px[K];
    CHECK(cd_db_read(db, 0, px, err, sizeof err) == CD_ERR && strstr(err, "float values"),
          "reading float records as pixels is refused: %s", err);
    CHECK(cd_db_verify(db, err, sizeof err) == CD_OK, "verify: %s", err);
    cd_db_close(db);
    /* pixels read as floats */
    db = cd_db_open(cd_test_tmp_path("rt_png.db"), err, sizeof err);
    CHECK(db != NULL, "open rt_png.db: %s", err);
    if (db) {
        static float f[PLANE];
        uint8_t u[PLANE];
        CHECK(cd_db_read_f32(db, 1, f, err, sizeof err) == CD_OK && cd_db_read(db, 1, u, err, sizeof err) == CD_OK,
              "read record 1 both ways: %s", err);
        int eq = 1;
        for (int k = 0; k < PLANE; k++)
            eq &= f[k] == (float)u[k];
        CHECK(eq, "pixels read as floats are the pixels");
        cd_db_close(db);
    }
    CHECK(!cd_db_shape_ok(CD_ENC_PNG, 5, 1, 1) && cd_db_shape_ok(CD_ENC_F32, 5, 1, 1) &&
              !cd_db_shape_ok(CD_ENC_F32, 1 << 13, 1 << 12, 1) && cd_encoding_parse("f32") == -1,
          "shape rules by encoding; f32 is no image encoding");
}

int main(void)
{
    cd_test_init("test_dataset_db");
    make_images();
    for (int enc = 0; enc < CD_ENC_IMAGE_COUNT; enc++)
        test_roundtrip(enc);
    test_f32();
    test_jpeg_gray();
    CHECK(cd_encoding_parse("jpg") == CD_ENC_JPG && cd_encoding_parse("gif") == -1, "names");
    test_bad_files();
    test_write_failure();
    test_concurrent_reads();
    test_labels_mean();
    return cd_test_finish();
}
