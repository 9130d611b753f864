/* TensorBoard events files (tfevents.h): TFRecord framing around protobuf-c's packing
 * of tensorflow.Event. */
#define _GNU_SOURCE /* O_CLOEXEC, gethostname */
#include "tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/jsonl.h"
#include "cdigits/util.h"
#include "tensorboard_event.pb-c.h"

struct cd_tfevents {
    FILE *f;
    int failed; /* a write failed and was reported: nothing more is written */
    char path[4400];
};

/* ---- CRC-32C, one byte per step through a 256-entry table ------------------------ */

static uint32_t g_crc_table[256];
static pthread_once_t g_crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        g_crc_table[i] = c;
    }
}

uint32_t cd_crc32c(const void *data, size_t len)
{
    pthread_once(&g_crc_once, crc_table_init);
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++)
        c = g_crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t cd_tfrecord_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- records ------------------------------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* The first failure is said once; after it the file takes nothing. */
static void write_failed(cd_tfevents_t *ev, const char *what, int err)
{
    if (ev->failed)
        return;
    ev->failed = 1;
    cd_jsonl_log("warning", "cannot %s the TensorBoard events file %s: %s; training goes on without "
                 "it (check that the job folder is writable and has free space)", what, ev->path,
                 strerror(err));
}

static void write_bytes(cd_tfevents_t *ev, const void *p, size_t n)
{
    if (!ev->failed && fwrite(p, 1, n, ev->f) != n)
        write_failed(ev, "write", errno ? errno : EIO);
}

/* One record: the event packed, framed with its length and both masked CRCs. */
static void write_event(cd_tfevents_t *ev, const Tensorflow__Event *event)
{
    if (ev->failed)
        return;
    size_t n = tensorflow__event__get_packed_size(event);
    unsigned char *data = cd_xmalloc(n ? n : 1);
    if (tensorflow__event__pack(event, data) != n) {
        free(data);
        write_failed(ev, "encode an event for", EINVAL);
        return;
    }
    unsigned char head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, cd_tfrecord_mask(cd_crc32c(head, 8)), 4);
    put_le(tail, cd_tfrecord_mask(cd_crc32c(data, n)), 4);
    write_bytes(ev, head, sizeof head);
    write_bytes(ev, data, n);
    write_bytes(ev, tail, sizeof tail);
    free(data);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the file ------------------------------------------------------------------------ */

/* ev with its FILE open: the file_version event, which a reader expects first. */
static cd_tfevents_t *start(cd_tfevents_t *ev)
{
    Tensorflow__Event e = TENSORFLOW__EVENT__INIT;
    e.wall_time = wall_now();
    e.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
    e.file_version = (char *)"brain.Event:2";
    write_event(ev, &e);
    return ev;
}

cd_tfevents_t *cd_tfevents_open_file(const char *path, char *err, size_t errlen)
{
    cd_tfevents_t *ev = cd_xcalloc(1, sizeof *ev);
    if ((size_t)snprintf(ev->path, sizeof ev->path, "%s", path) >= sizeof ev->path) {
        snprintf(err, errlen, "the TensorBoard events file's path is too long: %s", path);
        free(ev);
        return NULL;
    }
    if (!(ev->f = fopen(path, "wb"))) {
        snprintf(err, errlen, "cannot create the TensorBoard events file %s: %s", path, strerror(errno));
        free(ev);
        return NULL;
    }
    return start(ev);
}

cd_tfevents_t *cd_tfevents_open(const char *dir, char *err, size_t errlen)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    cd_tfevents_t *ev = cd_xcalloc(1, sizeof *ev);
    long now = (long)time(NULL);
    int tried = 0;
    /* O_EXCL: a job resumed within the same second gets the next free name, never the
     * earlier run's file */
    for (int n = 0; n < 100; n++) {
        int len = n ? snprintf(ev->path, sizeof ev->path, "%s/events.out.tfevents.%ld.%s.%d", dir, now, host, n)
                    : snprintf(ev->path, sizeof ev->path, "%s/events.out.tfevents.%ld.%s", dir, now, host);
        if (len < 0 || (size_t)len >= sizeof ev->path) {
            snprintf(err, errlen, "the job folder's path is too long for a TensorBoard events file: %s", dir);
            break;
        }
        int fd = open(ev->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {
            tried++;
            continue;
        }
        if (fd < 0) {
            snprintf(err, errlen, "cannot create the TensorBoard events file %s: %s; check that the job "
                     "folder is writable", ev->path, strerror(errno));
            break;
        }
        if (!(ev->f = fdopen(fd, "wb"))) {
            snprintf(err, errlen, "cannot open the TensorBoard events file %s: %s", ev->path, strerror(errno));
            close(fd);
            break;
        }
        return start(ev);
    }
    if (tried == 100)
        snprintf(err, errlen, "cannot create a TensorBoard events file in %s: 100 names of second %ld "
                 "are taken; remove some events.out.tfevents.* files", dir, now);
    free(ev);
    return NULL;
}

const char *cd_tfevents_path(const cd_tfevents_t *ev) { return ev->path; }

int cd_tfevents_failed(const cd_tfevents_t *ev) { return ev && ev->failed; }

void cd_tfevents_scalar(cd_tfevents_t *ev, const char *tag, long step, double value)
{
    if (!ev || ev->failed)
        return;
    Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    Tensorflow__Summary__Value *values[1] = {&v};
    Tensorflow__Summary s = TENSORFLOW__SUMMARY__INIT;
    s.n_value = 1;
    s.value = values;
    Tensorflow__Event e = TENSORFLOW__EVENT__INIT;
    e.wall_time = wall_now();
    e.step = step;
    e.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
    e.summary = &s;
    write_event(ev, &e);
}

void cd_tfevents_flush(cd_tfevents_t *ev)
{
    if (ev && !ev->failed && fflush(ev->f) != 0)
        write_failed(ev, "write", errno);
}

void cd_tfevents_close(cd_tfevents_t *ev)
{
    if (!ev)
        return;
    cd_tfevents_flush(ev);
    if (fclose(ev->f) != 0)
        write_failed(ev, "close", errno);
    free(ev);
}
