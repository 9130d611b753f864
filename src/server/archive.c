/* tar, tar.gz, tar.bz2 and zip: writing a model's files, reading an uploaded archive
 * (see archive.h). Formats: POSIX ustar (512-byte headers, octal sizes); gzip is a
 * deflate stream with zlib's gzip wrapper; bzip2 is libbz2's stream; zip is PKWARE's format with stored or deflated
 * entries, no zip64 and no encryption. */
#define _GNU_SOURCE
#include "archive.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bzlib.h>
#include <zlib.h>

#include "cdigits/util.h"

/* ---- names and kinds ----------------------------------------------------------------------- */

static const char *const g_ext[ARCHIVE_COUNT] = {"tar", "tar.gz", "zip", "tar.bz2"};
static const char *const g_mime[ARCHIVE_COUNT] = {"application/x-tar", "application/gzip", "application/zip",
                                                  "application/x-bzip2"};

int archive_kind_parse(const char *ext)
{
    if (!ext)
        return -1;
    if (!strcmp(ext, "tgz"))
        return ARCHIVE_TGZ;
    for (int i = 0; i < ARCHIVE_COUNT; i++)
        if (!strcmp(ext, g_ext[i]))
            return i;
    return -1;
}

const char *archive_ext(int kind) { return kind >= 0 && kind < ARCHIVE_COUNT ? g_ext[kind] : "?"; }
const char *archive_mime(int kind) { return kind >= 0 && kind < ARCHIVE_COUNT ? g_mime[kind] : "application/octet-stream"; }

int archive_sniff(const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return ARCHIVE_TGZ;
    if (len >= 4 && p[0] == 'P' && p[1] == 'K' && p[2] == 3 && p[3] == 4)
        return ARCHIVE_ZIP;
    if (len >= 4 && p[0] == 'B' && p[1] == 'Z' && p[2] == 'h' && p[3] >= '1' && p[3] <= '9')
        return ARCHIVE_TBZ2;
    if (len >= 512 && memcmp(p + 257, "ustar", 5) == 0)
        return ARCHIVE_TAR;
    return -1;
}

/* ---- writing ---------------------------------------------------------------------------------- */

typedef struct sink {
    FILE *f;
    z_stream zs;      /* gzip: the whole tar goes through it */
    int gz;
    bz_stream bz;     /* bzip2: the same */
    int bz2;
    uint64_t written; /* bytes handed to put (before compression) */
    int bad;
} sink;

static void sink_raw(sink *s, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, s->f) != n)
        s->bad = 1;
}

/* Deflates n bytes through zs into the file (flush: Z_NO_FLUSH or Z_FINISH). */
static void deflate_to(sink *s, z_stream *zs, const void *p, size_t n, int flush)
{
    unsigned char out[65536];
    zs->next_in = (Bytef *)p;
    zs->avail_in = (uInt)n;
    do {
        zs->next_out = out;
        zs->avail_out = sizeof out;
        int rc = deflate(zs, flush);
        if (rc == Z_STREAM_ERROR) {
            s->bad = 1;
            return;
        }
        sink_raw(s, out, sizeof out - zs->avail_out);
    } while (zs->avail_out == 0 || (flush == Z_FINISH && zs->avail_in > 0));
}

/* Compresses n bytes through libbz2 into the file (action: BZ_RUN or BZ_FINISH). */
static void bzip_to(sink *s, const void *p, size_t n, int action)
{
    char out[65536];
    s->bz.next_in = (char *)p;
    s->bz.avail_in = (unsigned)n;
    for (;;) {
        s->bz.next_out = out;
        s->bz.avail_out = sizeof out;
        int rc = BZ2_bzCompress(&s->bz, action);
        if (rc < 0) {
            s->bad = 1;
            return;
        }
        sink_raw(s, out, sizeof out - s->bz.avail_out);
        if (action == BZ_RUN ? s->bz.avail_in == 0 : rc == BZ_STREAM_END)
            return;
    }
}

static void put(sink *s, const void *p, size_t n)
{
    s->written += n;
    if (s->bz2) {
        const char *q = p;
        while (n) {
            size_t k = n > (1u << 30) ? (1u << 30) : n;
            bzip_to(s, q, k, BZ_RUN);
            q += k;
            n -= k;
        }
    } else if (s->gz) {
        /* chunks below 4 GiB for zlib's uInt */
        const char *q = p;
        while (n) {
            size_t k = n > (1u << 30) ? (1u << 30) : n;
            deflate_to(s, &s->zs, q, k, Z_NO_FLUSH);
            q += k;
            n -= k;
        }
    } else {
        sink_raw(s, p, n);
    }
}

static void octal(char *dst, size_t width, uint64_t v)
{
    /* width-1 digits and a NUL, as ustar writes them */
    snprintf(dst, width, "%0*llo", (int)width - 1, (unsigned long long)v);
}

/* dir/name for reading (its path in path, its size in st); NULL with the message. */
static FILE *open_member(const char *dir, const char *name, char *path, size_t pathlen, struct stat *st,
                         char *err, size_t errlen)
{
    snprintf(path, pathlen, "%s/%s", dir, name);
    FILE *in = fopen(path, "rb");
    if (!in || fstat(fileno(in), st) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        if (in)
            fclose(in);
        return NULL;
    }
    return in;
}

static int tar_entry(sink *s, const char *dir, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;
    FILE *in = open_member(dir, name, path, sizeof path, &st, err, errlen);
    if (!in)
        return CD_ERR;
    if (strlen(name) >= 100 || (uint64_t)st.st_size >= (1ull << 33)) {
        snprintf(err, errlen, "%s: the name or size does not fit a tar header", name);
        fclose(in);
        return CD_ERR;
    }
    unsigned char h[512];
    memset(h, 0, sizeof h);
    memcpy(h, name, strlen(name));
    octal((char *)h + 100, 8, 0644);
    octal((char *)h + 108, 8, 0);
    octal((char *)h + 116, 8, 0);
    octal((char *)h + 124, 12, (uint64_t)st.st_size);
    octal((char *)h + 136, 12, (uint64_t)time(NULL));
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memcpy(h + 265, "cdigits", 7);
    memcpy(h + 297, "cdigits", 7);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    put(s, h, sizeof h);
    char buf[65536];
    size_t n;
    uint64_t total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        put(s, buf, n);
        total += n;
    }
    fclose(in);
    if (total != (uint64_t)st.st_size) {
        snprintf(err, errlen, "%s changed while it was archived", path);
        return CD_ERR;
    }
    static const char zeros[512];
    if (total % 512)
        put(s, zeros, 512 - total % 512);
    return CD_OK;
}

/* A zip entry's local header, data (deflated) and what the central directory needs. */
typedef struct zip_rec {
    char name[ARCHIVE_NAME_MAX];
    uint32_t crc, csize, usize, offset;
    uint16_t method, time, date;
} zip_rec;

static void le16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void le32(unsigned char *p, uint32_t v)
{
    le16(p, (uint16_t)v);
    le16(p + 2, (uint16_t)(v >> 16));
}
static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }

static int zip_entry(sink *s, const char *dir, const char *name, zip_rec *rec, char *err, size_t errlen)
{
    char path[PATH_MAX];
    struct stat st;
    FILE *in = open_member(dir, name, path, sizeof path, &st, err, errlen);
    if (!in)
        return CD_ERR;
    if ((uint64_t)st.st_size >= 0xffffffffull || strlen(name) >= sizeof rec->name) {
        snprintf(err, errlen, "%s is too large for a zip archive without zip64; download the .tar.gz", name);
        fclose(in);
        return CD_ERR;
    }
    memset(rec, 0, sizeof *rec);
    snprintf(rec->name, sizeof rec->name, "%s", name);
    long start = ftell(s->f);
    if (start < 0 || start >= 0xffffffffL) {
        fclose(in);
        snprintf(err, errlen, "the zip archive is larger than 4 GiB; download the .tar.gz");
        return CD_ERR;
    }
    rec->offset = (uint32_t)start;
    rec->method = 8;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    rec->time = (uint16_t)(tm.tm_hour << 11 | tm.tm_min << 5 | tm.tm_sec / 2);
    rec->date = (uint16_t)((tm.tm_year - 80) << 9 | (tm.tm_mon + 1) << 5 | tm.tm_mday);
    unsigned char h[30];
    size_t nl = strlen(name);
    memset(h, 0, sizeof h);
    le32(h, 0x04034b50);
    le16(h + 4, 20);
    le16(h + 8, rec->method);
    le16(h + 10, rec->time);
    le16(h + 12, rec->date);
    le16(h + 26, (uint16_t)nl);
    sink_raw(s, h, sizeof h);
    sink_raw(s, name, nl);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        fclose(in);
        snprintf(err, errlen, "zlib cannot start a deflate stream");
        return CD_ERR;
    }
    char buf[65536];
    size_t n;
    uLong crc = crc32(0, NULL, 0);
    uint64_t total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        crc = crc32(crc, (const Bytef *)buf, (uInt)n);
        deflate_to(s, &zs, buf, n, Z_NO_FLUSH);
        total += n;
    }
    deflate_to(s, &zs, NULL, 0, Z_FINISH);
    rec->csize = (uint32_t)zs.total_out;
    deflateEnd(&zs);
    fclose(in);
    rec->crc = (uint32_t)crc;
    rec->usize = (uint32_t)total;
    /* the sizes and CRC are known now: patch the local header */
    long end = ftell(s->f);
    unsigned char fix[12];
    le32(fix, rec->crc);
    le32(fix + 4, rec->csize);
    le32(fix + 8, rec->usize);
    if (end < 0 || fseek(s->f, start + 14, SEEK_SET) != 0 || fwrite(fix, 1, 12, s->f) != 12 ||
        fseek(s->f, end, SEEK_SET) != 0)
        s->bad = 1;
    return CD_OK;
}

static int zip_finish(sink *s, const zip_rec *recs, int n)
{
    long cd_start = ftell(s->f);
    for (int i = 0; i < n; i++) {
        unsigned char h[46];
        size_t nl = strlen(recs[i].name);
        memset(h, 0, sizeof h);
        le32(h, 0x02014b50);
        le16(h + 4, 3 << 8 | 20); /* made on Unix, version 2.0 */
        le16(h + 6, 20);
        le16(h + 10, recs[i].method);
        le16(h + 12, recs[i].time);
        le16(h + 14, recs[i].date);
        le32(h + 16, recs[i].crc);
        le32(h + 20, recs[i].csize);
        le32(h + 24, recs[i].usize);
        le16(h + 28, (uint16_t)nl);
        le32(h + 38, (uint32_t)(0100644u << 16)); /* a regular file, rw-r--r-- */
        le32(h + 42, recs[i].offset);
        sink_raw(s, h, sizeof h);
        sink_raw(s, recs[i].name, nl);
    }
    long cd_end = ftell(s->f);
    if (cd_start < 0 || cd_end < 0 || cd_end >= 0xffffffffL)
        return CD_ERR;
    unsigned char e[22];
    memset(e, 0, sizeof e);
    le32(e, 0x06054b50);
    le16(e + 8, (uint16_t)n);
    le16(e + 10, (uint16_t)n);
    le32(e + 12, (uint32_t)(cd_end - cd_start));
    le32(e + 16, (uint32_t)cd_start);
    sink_raw(s, e, sizeof e);
    return CD_OK;
}

int archive_write(int kind, const char *dir, const char *const *names, int n, const char *out_path, char *err,
                  size_t errlen)
{
    if (kind < 0 || kind >= ARCHIVE_COUNT || n > 65535) {
        snprintf(err, errlen, "unknown archive kind or too many files");
        return CD_ERR;
    }
    sink s = {0};
    s.f = fopen(out_path, "wb");
    if (!s.f) {
        snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(errno));
        return CD_ERR;
    }
    int rc = CD_OK;
    if (kind == ARCHIVE_TGZ) {
        if (deflateInit2(&s.zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            fclose(s.f);
            snprintf(err, errlen, "zlib cannot start a gzip stream");
            return CD_ERR;
        }
        s.gz = 1;
    } else if (kind == ARCHIVE_TBZ2) {
        if (BZ2_bzCompressInit(&s.bz, 9, 0, 0) != BZ_OK) {
            fclose(s.f);
            snprintf(err, errlen, "libbz2 cannot start a bzip2 stream");
            return CD_ERR;
        }
        s.bz2 = 1;
    }
    zip_rec *recs = kind == ARCHIVE_ZIP ? calloc((size_t)n + 1, sizeof *recs) : NULL;
    if (kind == ARCHIVE_ZIP && !recs) {
        snprintf(err, errlen, "out of memory");
        rc = CD_ERR;
    }
    for (int i = 0; i < n && rc == CD_OK; i++)
        rc = kind == ARCHIVE_ZIP ? zip_entry(&s, dir, names[i], &recs[i], err, errlen)
                                 : tar_entry(&s, dir, names[i], err, errlen);
    if (rc == CD_OK && kind != ARCHIVE_ZIP) {
        static const char zeros[1024];
        put(&s, zeros, sizeof zeros);
    }
    if (rc == CD_OK && kind == ARCHIVE_ZIP && zip_finish(&s, recs, n) != CD_OK) {
        snprintf(err, errlen, "the zip archive is larger than 4 GiB; download the .tar.gz");
        rc = CD_ERR;
    }
    if (s.gz) {
        if (rc == CD_OK)
            deflate_to(&s, &s.zs, NULL, 0, Z_FINISH);
        deflateEnd(&s.zs);
    }
    if (s.bz2) {
        if (rc == CD_OK)
            bzip_to(&s, NULL, 0, BZ_FINISH);
        BZ2_bzCompressEnd(&s.bz);
    }
    free(recs);
    if (fclose(s.f) != 0 || s.bad) {
        if (rc == CD_OK)
            snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(errno));
        rc = CD_ERR;
    }
    if (rc != CD_OK)
        unlink(out_path);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------------- */

/* The part of an entry name that becomes the file name: checked and made plain. */
static int entry_name(const char *full, char *out, size_t outlen, int *is_dir, char *err, size_t errlen)
{
    size_t n = strlen(full);
    *is_dir = n > 0 && full[n - 1] == '/';
    if (n == 0 || full[0] == '/' || full[0] == '\\' || strchr(full, '\\') || (n > 1 && full[1] == ':')) {
        snprintf(err, errlen, "the archive entry \"%.200s\" has an absolute or empty name; refused", full);
        return CD_ERR;
    }
    /* no ".." anywhere as a path part */
    const char *p = full;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            snprintf(err, errlen, "the archive entry \"%.200s\" leads out of its folder (\"..\"); refused", full);
            return CD_ERR;
        }
        p += len + (slash ? 1 : 0);
    }
    if (*is_dir)
        return CD_OK;
    const char *base = strrchr(full, '/');
    base = base ? base + 1 : full;
    size_t bl = strlen(base);
    int plain = bl > 0 && bl < outlen && base[0] != '.';
    for (size_t i = 0; i < bl && plain; i++)
        plain = (base[i] >= 'a' && base[i] <= 'z') || (base[i] >= 'A' && base[i] <= 'Z') ||
                (base[i] >= '0' && base[i] <= '9') || base[i] == '.' || base[i] == '_' || base[i] == '-';
    if (!plain) {
        snprintf(err, errlen, "the archive entry \"%.200s\" is not a plain file name (letters, digits, . _ -); "
                              "refused",
                 full);
        return CD_ERR;
    }
    snprintf(out, outlen, "%s", base);
    return CD_OK;
}

typedef struct extract {
    const char *dir;
    const archive_limits *lim;
    char (*names)[ARCHIVE_NAME_MAX];
    int max_names, n;
    uint64_t total;
    int fd;          /* the file being written */
    uint64_t size;   /* its bytes so far */
} extract;

/* Starts the file `full` (an entry name); CD_OK with ex->fd open, or a skip for folders
 * (fd -1). */
static int ex_open(extract *ex, const char *full, char *err, size_t errlen)
{
    char base[ARCHIVE_NAME_MAX];
    int is_dir;
    ex->fd = -1;
    ex->size = 0;
    if (entry_name(full, base, sizeof base, &is_dir, err, errlen) != CD_OK)
        return CD_ERR;
    if (is_dir)
        return CD_OK;
    if (ex->n >= ex->lim->max_entries || ex->n >= ex->max_names) {
        snprintf(err, errlen, "the archive has more than %d files; a model needs about 8", ex->lim->max_entries);
        return CD_ERR;
    }
    for (int i = 0; i < ex->n; i++)
        if (!strcmp(ex->names[i], base)) {
            snprintf(err, errlen, "the archive has two files named %s", base);
            return CD_ERR;
        }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", ex->dir, base);
    ex->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (ex->fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return CD_ERR;
    }
    snprintf(ex->names[ex->n++], ARCHIVE_NAME_MAX, "%s", base);
    return CD_OK;
}

static int ex_write(extract *ex, const void *p, size_t n, char *err, size_t errlen)
{
    if (ex->fd < 0 || n == 0)
        return CD_OK;
    ex->size += n;
    ex->total += n;
    if (ex->size > ex->lim->max_file || ex->total > ex->lim->max_total) {
        snprintf(err, errlen, "the archive unpacks to more than %llu bytes (%s); refused",
                 (unsigned long long)(ex->size > ex->lim->max_file ? ex->lim->max_file : ex->lim->max_total),
                 ex->size > ex->lim->max_file ? "one file" : "in all");
        return CD_ERR;
    }
    const char *q = p;
    while (n) {
        ssize_t w = write(ex->fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "cannot write the unpacked files: %s", strerror(errno));
            return CD_ERR;
        }
        q += w;
        n -= (size_t)w;
    }
    return CD_OK;
}

static int ex_close(extract *ex, char *err, size_t errlen)
{
    if (ex->fd >= 0 && close(ex->fd) != 0) {
        ex->fd = -1;
        snprintf(err, errlen, "cannot write the unpacked files: %s", strerror(errno));
        return CD_ERR;
    }
    ex->fd = -1;
    return CD_OK;
}

/* A byte source for tar: the data as is, inflated from gzip or decompressed from bzip2. */
typedef struct source {
    const unsigned char *data;
    size_t len, off;
    z_stream zs;
    bz_stream bz;
    int gz, bz2, eof;
} source;

/* src_read for bzip2 data. */
static int bz_read(source *s, void *dst, size_t n, char *err, size_t errlen)
{
    s->bz.next_out = dst;
    s->bz.avail_out = (unsigned)n;
    while (s->bz.avail_out > 0) {
        if (s->eof) {
            if (s->bz.avail_out == n)
                return 0;
            snprintf(err, errlen, "the tar.bz2 archive is truncated");
            return -1;
        }
        unsigned before = s->bz.avail_out;
        int rc = BZ2_bzDecompress(&s->bz);
        if (rc == BZ_STREAM_END) {
            s->eof = 1;
        } else if (rc != BZ_OK) {
            snprintf(err, errlen, "the bzip2 data is damaged (libbz2 error %d)", rc);
            return -1;
        } else if (s->bz.avail_in == 0 && s->bz.avail_out == before) {
            s->eof = 1;
        }
    }
    return 1;
}

/* Reads exactly n bytes; 0 at a clean end before any byte, -1 on an error. */
static int src_read(source *s, void *dst, size_t n, char *err, size_t errlen)
{
    if (s->bz2)
        return bz_read(s, dst, n, err, errlen);
    if (!s->gz) {
        if (s->len - s->off < n) {
            if (s->off == s->len)
                return 0;
            snprintf(err, errlen, "the tar archive is truncated");
            return -1;
        }
        memcpy(dst, s->data + s->off, n);
        s->off += n;
        return 1;
    }
    s->zs.next_out = dst;
    s->zs.avail_out = (uInt)n;
    while (s->zs.avail_out > 0) {
        if (s->eof) {
            if (s->zs.avail_out == n)
                return 0;
            snprintf(err, errlen, "the tar.gz archive is truncated");
            return -1;
        }
        int rc = inflate(&s->zs, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            s->eof = 1;
        } else if (rc != Z_OK) {
            snprintf(err, errlen, "the gzip data is damaged (%s)", s->zs.msg ? s->zs.msg : "inflate failed");
            return -1;
        } else if (s->zs.avail_in == 0 && s->zs.avail_out > 0) {
            s->eof = 1;
        }
    }
    return 1;
}

static uint64_t tar_number(const unsigned char *p, size_t n)
{
    if (p[0] & 0x80) { /* base-256 for large values */
        uint64_t v = p[0] & 0x7f;
        for (size_t i = 1; i < n; i++)
            v = v << 8 | p[i];
        return v;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n && p[i]; i++) {
        if (p[i] == ' ')
            continue;
        if (p[i] < '0' || p[i] > '7')
            break;
        v = v * 8 + (uint64_t)(p[i] - '0');
    }
    return v;
}

/* The "path" record of a pax header, if any. */
static void pax_path(const char *rec, size_t len, char *out, size_t outlen)
{
    size_t off = 0;
    while (off < len) {
        char *end;
        unsigned long l = strtoul(rec + off, &end, 10);
        if (l == 0 || off + l > len || *end != ' ')
            return;
        const char *kv = end + 1, *stop = rec + off + l - 1; /* the record ends in \n */
        if ((size_t)(stop - kv) > 5 && !strncmp(kv, "path=", 5) && (size_t)(stop - kv - 5) < outlen) {
            memcpy(out, kv + 5, (size_t)(stop - kv - 5));
            out[stop - kv - 5] = 0;
        }
        off += l;
    }
}

static int extract_tar(source *src, extract *ex, char *err, size_t errlen)
{
    unsigned char h[512];
    char pax_name[1024] = "";
    int zero_blocks = 0;
    for (;;) {
        int r = src_read(src, h, sizeof h, err, errlen);
        if (r < 0)
            return CD_ERR;
        if (r == 0)
            break;
        int zero = 1;
        for (int i = 0; i < 512 && zero; i++)
            zero = h[i] == 0;
        if (zero) {
            if (++zero_blocks == 2)
                break;
            continue;
        }
        zero_blocks = 0;
        unsigned sum = 0;
        for (int i = 0; i < 512; i++)
            sum += i >= 148 && i < 156 ? ' ' : h[i];
        if (tar_number(h + 148, 8) != sum) {
            snprintf(err, errlen, "the tar header checksum does not match: not a tar archive, or a damaged one");
            return CD_ERR;
        }
        uint64_t size = tar_number(h + 124, 12);
        char type = (char)h[156];
        char name[1024];
        if (memcmp(h + 257, "ustar", 5) == 0 && h[345])
            snprintf(name, sizeof name, "%.155s/%.100s", (const char *)h + 345, (const char *)h);
        else
            snprintf(name, sizeof name, "%.100s", (const char *)h);
        if (pax_name[0]) {
            snprintf(name, sizeof name, "%s", pax_name);
            pax_name[0] = 0;
        }
        if (type == 'x' || type == 'g') {
            if (size > 65536) {
                snprintf(err, errlen, "a pax header of %llu bytes is too large", (unsigned long long)size);
                return CD_ERR;
            }
            size_t padded = (size_t)((size + 511) / 512 * 512);
            char *rec = malloc(padded + 1);
            if (!rec || src_read(src, rec, padded, err, errlen) != 1) {
                if (!rec)
                    snprintf(err, errlen, "out of memory");
                else if (!err[0])
                    snprintf(err, errlen, "the tar archive is truncated");
                free(rec);
                return CD_ERR;
            }
            if (type == 'x')
                pax_path(rec, (size_t)size, pax_name, sizeof pax_name);
            free(rec);
            continue;
        }
        if (type == '1' || type == '2' || type == '3' || type == '4' || type == '6' || type == 'L' || type == 'K') {
            snprintf(err, errlen, "the archive entry \"%.200s\" is a %s; only regular files are accepted", name,
                     type == '1' ? "hard link" : type == '2' ? "symbolic link" : type == '6' ? "FIFO"
                     : type == 'L' || type == 'K' ? "GNU long name (write the archive with short names)"
                                                  : "device");
            return CD_ERR;
        }
        int regular = type == '0' || type == 0 || type == '7';
        if (type != '5' && !regular) {
            snprintf(err, errlen, "the archive entry \"%.200s\" has the unknown type '%c'; refused", name, type);
            return CD_ERR;
        }
        if (regular && ex_open(ex, name, err, errlen) != CD_OK)
            return CD_ERR;
        if (!regular) { /* a folder: check the name only */
            char base[ARCHIVE_NAME_MAX];
            int is_dir;
            size_t nl = strlen(name);
            if (nl && name[nl - 1] != '/' && nl + 1 < sizeof name)
                strcat(name, "/");
            if (entry_name(name, base, sizeof base, &is_dir, err, errlen) != CD_OK)
                return CD_ERR;
        }
        uint64_t left = (size + 511) / 512 * 512, data_left = size;
        unsigned char buf[65536];
        while (left) {
            size_t k = left > sizeof buf ? sizeof buf : (size_t)left;
            if (src_read(src, buf, k, err, errlen) != 1) {
                if (!err[0])
                    snprintf(err, errlen, "the tar archive is truncated");
                return CD_ERR;
            }
            size_t use = data_left < k ? (size_t)data_left : k;
            if (ex_write(ex, buf, use, err, errlen) != CD_OK)
                return CD_ERR;
            data_left -= use;
            left -= k;
        }
        if (ex_close(ex, err, errlen) != CD_OK)
            return CD_ERR;
    }
    return CD_OK;
}

static int extract_zip(const unsigned char *d, size_t len, extract *ex, char *err, size_t errlen)
{
    /* the end of central directory record: within the last 64 KiB + 22 bytes */
    size_t eocd = (size_t)-1;
    for (size_t i = len >= 22 ? len - 22 : 0; len >= 22; i--) {
        if (rd32(d + i) == 0x06054b50) {
            eocd = i;
            break;
        }
        if (i == 0 || len - i > 65535 + 22)
            break;
    }
    if (eocd == (size_t)-1) {
        snprintf(err, errlen, "the zip archive has no central directory (truncated?)");
        return CD_ERR;
    }
    uint16_t count = rd16(d + eocd + 10);
    uint32_t cd_size = rd32(d + eocd + 12), cd_off = rd32(d + eocd + 16);
    if (cd_off == 0xffffffffu || count == 0xffff) {
        snprintf(err, errlen, "zip64 archives are not supported; upload a .tar.gz");
        return CD_ERR;
    }
    if ((uint64_t)cd_off + cd_size > eocd) {
        snprintf(err, errlen, "the zip central directory lies outside the archive");
        return CD_ERR;
    }
    size_t p = cd_off;
    for (uint16_t e = 0; e < count; e++) {
        if (p + 46 > eocd || rd32(d + p) != 0x02014b50) {
            snprintf(err, errlen, "the zip central directory is damaged");
            return CD_ERR;
        }
        uint16_t flags = rd16(d + p + 8), method = rd16(d + p + 10);
        uint32_t crc = rd32(d + p + 16), csize = rd32(d + p + 20), usize = rd32(d + p + 24);
        uint16_t nl = rd16(d + p + 28), xl = rd16(d + p + 30), cl = rd16(d + p + 32);
        uint32_t attrs = rd32(d + p + 38), loff = rd32(d + p + 42);
        uint8_t made_by = d[p + 5];
        if (p + 46 + nl + xl + cl > eocd) {
            snprintf(err, errlen, "the zip central directory is damaged");
            return CD_ERR;
        }
        char name[1024];
        snprintf(name, sizeof name, "%.*s", nl < 1000 ? nl : 1000, (const char *)d + p + 46);
        p += 46 + (size_t)nl + xl + cl;
        unsigned mode = attrs >> 16;
        if (made_by == 3 && (mode & 0170000) && (mode & 0170000) != 0100000 && (mode & 0170000) != 0040000) {
            snprintf(err, errlen, "the archive entry \"%.200s\" is %s; only regular files are accepted", name,
                     (mode & 0170000) == 0120000 ? "a symbolic link" : "not a regular file");
            return CD_ERR;
        }
        if (flags & 1) {
            snprintf(err, errlen, "the archive entry \"%.200s\" is encrypted; refused", name);
            return CD_ERR;
        }
        if (method != 0 && method != 8) {
            snprintf(err, errlen, "the archive entry \"%.200s\" uses compression method %u; only stored and "
                                  "deflated entries are read", name, method);
            return CD_ERR;
        }
        if (csize == 0xffffffffu || usize == 0xffffffffu) {
            snprintf(err, errlen, "zip64 archives are not supported; upload a .tar.gz");
            return CD_ERR;
        }
        if (ex_open(ex, name, err, errlen) != CD_OK)
            return CD_ERR;
        if (ex->fd < 0)
            continue; /* a folder */
        if ((uint64_t)loff + 30 > len || rd32(d + loff) != 0x04034b50) {
            snprintf(err, errlen, "the zip entry %s has no local header", name);
            return CD_ERR;
        }
        uint64_t data = (uint64_t)loff + 30 + rd16(d + loff + 26) + rd16(d + loff + 28);
        if (data + csize > len) {
            snprintf(err, errlen, "the zip entry %s is truncated", name);
            return CD_ERR;
        }
        uLong got_crc = crc32(0, NULL, 0);
        uint64_t got = 0;
        if (method == 0) {
            if (csize != usize) {
                snprintf(err, errlen, "the stored zip entry %s has two sizes", name);
                return CD_ERR;
            }
            got_crc = crc32(got_crc, d + data, csize);
            if (ex_write(ex, d + data, csize, err, errlen) != CD_OK)
                return CD_ERR;
            got = csize;
        } else {
            z_stream zs;
            memset(&zs, 0, sizeof zs);
            if (inflateInit2(&zs, -15) != Z_OK) {
                snprintf(err, errlen, "zlib cannot start an inflate stream");
                return CD_ERR;
            }
            zs.next_in = (Bytef *)(d + data);
            zs.avail_in = csize;
            unsigned char out[65536];
            int rc;
            do {
                zs.next_out = out;
                zs.avail_out = sizeof out;
                rc = inflate(&zs, Z_NO_FLUSH);
                if (rc != Z_OK && rc != Z_STREAM_END) {
                    inflateEnd(&zs);
                    snprintf(err, errlen, "the zip entry %s is damaged", name);
                    return CD_ERR;
                }
                size_t k = sizeof out - zs.avail_out;
                got_crc = crc32(got_crc, out, (uInt)k);
                got += k;
                if (ex_write(ex, out, k, err, errlen) != CD_OK) {
                    inflateEnd(&zs);
                    return CD_ERR;
                }
                if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
                    inflateEnd(&zs);
                    snprintf(err, errlen, "the zip entry %s is truncated", name);
                    return CD_ERR;
                }
            } while (rc != Z_STREAM_END);
            inflateEnd(&zs);
        }
        if (got != usize || (uint32_t)got_crc != crc) {
            snprintf(err, errlen, "the zip entry %s is damaged (size or CRC mismatch)", name);
            return CD_ERR;
        }
        if (ex_close(ex, err, errlen) != CD_OK)
            return CD_ERR;
    }
    return CD_OK;
}

int archive_extract(const void *data, size_t len, const char *dir, const archive_limits *lim,
                    char names[][ARCHIVE_NAME_MAX], int max_names, int *nnames, char *err, size_t errlen)
{
    extract ex = {.dir = dir, .lim = lim, .names = names, .max_names = max_names, .fd = -1};
    *nnames = 0;
    err[0] = 0;
    int kind = archive_sniff(data, len), rc = CD_ERR;
    if (kind < 0) {
        snprintf(err, errlen, "the upload is not a tar, tar.gz, tar.bz2 or zip archive");
        return CD_ERR;
    }
    if (kind == ARCHIVE_ZIP) {
        rc = extract_zip(data, len, &ex, err, errlen);
    } else {
        source src = {.data = data, .len = len, .gz = kind == ARCHIVE_TGZ, .bz2 = kind == ARCHIVE_TBZ2};
        if (src.bz2) {
            if (BZ2_bzDecompressInit(&src.bz, 0, 0) != BZ_OK) {
                snprintf(err, errlen, "libbz2 cannot start a bzip2 stream");
                return CD_ERR;
            }
            src.bz.next_in = (char *)data;
            src.bz.avail_in = (unsigned)(len > 0xffffffffu ? 0xffffffffu : len);
        }
        if (src.gz) {
            if (inflateInit2(&src.zs, 15 + 16) != Z_OK) {
                snprintf(err, errlen, "zlib cannot start an inflate stream");
                return CD_ERR;
            }
            src.zs.next_in = (Bytef *)data;
            src.zs.avail_in = (uInt)(len > 0xffffffffu ? 0xffffffffu : len);
        }
        rc = extract_tar(&src, &ex, err, errlen);
        if (src.gz)
            inflateEnd(&src.zs);
        if (src.bz2)
            BZ2_bzDecompressEnd(&src.bz);
    }
    if (ex.fd >= 0)
        close(ex.fd);
    if (rc != CD_OK) {
        for (int i = 0; i < ex.n; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            unlink(path);
        }
        ex.n = 0;
        if (!err[0])
            snprintf(err, errlen, "the archive could not be read");
    }
    *nnames = ex.n;
    return rc;
}
