/* The TensorBoard events writer (src/engine/tfevents.c): CRC-32C against RFC 3720's
 * vectors and a bit-by-bit reference on random bytes; a file of random scalars read
 * back record by record (framing and masked CRCs checked here, events unpacked); a
 * full disk (/dev/full) reported once as a warning line, the writer going on quietly.
 * The events file a real training job writes is checked with google.protobuf by
 * tests/shell/tensorboard.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/engine/tfevents.h"
#include "cdigits/util.h"
#include "tensorboard_event.pb-c.h"
#include "testutil.h"

static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

static void test_crc(void)
{
    unsigned char zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        inc[i] = (unsigned char)i;
    CHECK(cd_crc32c("123456789", 9) == 0xe3069283u, "check value %08x", cd_crc32c("123456789", 9));
    CHECK(cd_crc32c(zeros, 32) == 0x8a9136aau, "32 zeros: %08x", cd_crc32c(zeros, 32));
    CHECK(cd_crc32c(ones, 32) == 0x62a8ab43u, "32 0xff: %08x", cd_crc32c(ones, 32));
    CHECK(cd_crc32c(inc, 32) == 0x46dd794eu, "0..31: %08x", cd_crc32c(inc, 32));
    unsigned char buf[777];
    for (int round = 0; round < 20; round++) {
        size_t n = (size_t)(cd_test_rand_u64() % sizeof buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)cd_test_rand_u64();
        CHECK(cd_crc32c(buf, n) == crc_bitwise(buf, n), "%zu random bytes", n);
    }
    uint32_t c = 0x12345678u;
    CHECK(cd_tfrecord_mask(c) == ((c >> 15 | c << 17) + 0xa282ead8u), "mask");
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define NSCALARS 40

static void test_round_trip(void)
{
    char dir[4096], err[512] = "";
    cd_test_tmp_dir(dir, sizeof dir, "tfevents");
    cd_tfevents_t *ev = cd_tfevents_open(dir, err, sizeof err);
    CHECK(ev != NULL, "open: %s", err);
    if (!ev)
        return;
    cd_tfevents_t *ev2 = cd_tfevents_open(dir, err, sizeof err); /* same second: the next name */
    CHECK(ev2 && strcmp(cd_tfevents_path(ev), cd_tfevents_path(ev2)) != 0, "a second file in the same folder");
    cd_tfevents_close(ev2);
    char path[4400];
    snprintf(path, sizeof path, "%s", cd_tfevents_path(ev));
    const char *base = strrchr(path, '/') + 1;
    CHECK(!strncmp(base, "events.out.tfevents.", 20), "file name %s", base);
    double value[NSCALARS];
    long step[NSCALARS];
    char tag[NSCALARS][32];
    for (int i = 0; i < NSCALARS; i++) {
        value[i] = cd_test_uniform(-1e4, 1e4);
        step[i] = (long)(cd_test_rand_u64() % 1000000);
        snprintf(tag[i], sizeof tag[i], "%s/m%d", i % 2 ? "val" : "train", (int)(cd_test_rand_u64() % 100));
        cd_tfevents_scalar(ev, tag[i], step[i], value[i]);
    }
    cd_tfevents_close(ev);

    size_t len = 0;
    unsigned char *data = (unsigned char *)cd_read_file(path, &len);
    CHECK(data != NULL, "read %s", path);
    if (!data)
        return;
    size_t pos = 0;
    int n = 0;
    while (pos + 12 <= len) {
        uint64_t size = get_le(data + pos, 8);
        CHECK(get_le(data + pos + 8, 4) == cd_tfrecord_mask(crc_bitwise(data + pos, 8)), "record %d length CRC", n);
        if (pos + 16 + size > len) {
            CHECK(0, "record %d is cut short", n);
            break;
        }
        const unsigned char *body = data + pos + 12;
        CHECK(get_le(body + size, 4) == cd_tfrecord_mask(crc_bitwise(body, size)), "record %d data CRC", n);
        Tensorflow__Event *e = tensorflow__event__unpack(NULL, size, body);
        CHECK(e != NULL, "record %d unpacks", n);
        if (e && n == 0)
            CHECK(e->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION && !strcmp(e->file_version, "brain.Event:2"),
                  "the first event is the file version");
        if (e && n > 0 && n <= NSCALARS) {
            int i = n - 1;
            int ok = e->what_case == TENSORFLOW__EVENT__WHAT_SUMMARY && e->summary->n_value == 1;
            CHECK(ok, "record %d is one scalar", n);
            if (ok) {
                Tensorflow__Summary__Value *v = e->summary->value[0];
                CHECK(!strcmp(v->tag, tag[i]), "tag %s vs %s", v->tag, tag[i]);
                CHECK(e->step == step[i], "step %ld vs %ld", (long)e->step, step[i]);
                CHECK(v->simple_value == (float)value[i], "value %.9g vs %.9g", v->simple_value, value[i]);
                CHECK(e->wall_time > 1.5e9, "wall time %f", e->wall_time);
            }
        }
        if (e)
            tensorflow__event__free_unpacked(e, NULL);
        pos += 16 + size;
        n++;
    }
    CHECK(pos == len, "%zu stray bytes", len - pos);
    CHECK(n == NSCALARS + 1, "%d records, expected %d", n, NSCALARS + 1);
    free(data);
}

/* Writes to /dev/full fail at the flush: one warning line on stdout, then silence. */
static void test_full_disk(void)
{
    if (access("/dev/full", W_OK) != 0) {
        cd_test_cannot("/dev/full is not writable here");
        return;
    }
    char out[4096];
    snprintf(out, sizeof out, "%s", cd_test_tmp_path("tfevents_stdout.txt"));
    fflush(stdout);
    int saved = dup(1);
    FILE *cap = fopen(out, "w");
    CHECK(saved >= 0 && cap, "capture stdout");
    if (saved < 0 || !cap)
        return;
    dup2(fileno(cap), 1);
    char err[512] = "";
    cd_tfevents_t *ev = cd_tfevents_open_file("/dev/full", err, sizeof err);
    CHECK(ev != NULL, "open /dev/full: %s", err);
    for (int round = 0; ev && round < 3; round++) {
        for (int i = 0; i < 2000; i++) /* beyond stdio's buffer: fwrite fails too */
            cd_tfevents_scalar(ev, "train/loss", i, cd_test_uniform(0, 1));
        cd_tfevents_flush(ev);
    }
    int failed = cd_tfevents_failed(ev);
    cd_tfevents_close(ev);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(cap);
    CHECK(failed, "writing to /dev/full failed");
    char *text = cd_read_file(out, NULL);
    int warnings = 0;
    for (const char *p = text; p && (p = strstr(p, "cannot write the TensorBoard events file /dev/full")); p++)
        warnings++;
    CHECK(warnings == 1, "%d warning lines, expected one: %s", warnings, text ? text : "(none)");
    CHECK(text && strstr(text, "\"level\":\"warning\"") && strstr(text, "training goes on"), "the warning: %s",
          text ? text : "(none)");
    free(text);
}

int main(void)
{
    cd_test_init("test_tfevents");
    test_crc();
    test_round_trip();
    test_full_disk();
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
