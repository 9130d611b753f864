/*
 * The archive code of the server (src/server/archive.c, compiled in here):
 *   - tar, tar.gz and zip written from files of fresh random bytes (empty, one byte,
 *     exactly one block, odd sizes, 200 kB) unpack to the same bytes;
 *   - archives made by hand that must be refused, each leaving the folder empty: ".."
 *     in any part, absolute names, backslashes, hidden or odd names, symbolic and hard
 *     links, devices, FIFOs, GNU long names, the same file twice, more files or bytes
 *     than the limits, a bad header checksum, truncated tar and gzip data, a zip entry
 *     whose CRC does not match and one marked as a symbolic link;
 *   - what is accepted: a folder around the files (dropped), folder entries, a pax
 *     header naming the file.
 */
#include "../../src/server/archive.c"

#include <dirent.h>

#include "testutil.h"

static const archive_limits LIM = {.max_entries = 16, .max_file = 1 << 20, .max_total = 4 << 20};

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4400];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
}

static char *read_all(const char *path, size_t *len)
{
    char *p = cd_read_file(path, len);
    if (!p) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    return p;
}

/* ---- a tar made by hand --------------------------------------------------------------- */

typedef struct tbuf {
    unsigned char *p;
    size_t n;
} tbuf;

static void tb_put(tbuf *t, const void *data, size_t n)
{
    t->p = cd_xrealloc(t->p, t->n + n + 1);
    memcpy(t->p + t->n, data, n);
    t->n += n;
}

/* A ustar header, field by field (POSIX.1-1988), written here independently of the
 * server's writer. */
typedef struct ustar_header {
    char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], chksum[8], typeflag;
    char linkname[100], magic[6], version[2], uname[32], gname[32], devmajor[8], devminor[8];
    char prefix[155], pad[12];
} ustar_header;
_Static_assert(sizeof(ustar_header) == 512, "a tar header is one 512-byte block");

static void tb_entry(tbuf *t, const char *name, char type, const void *data, size_t size, const char *link)
{
    ustar_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.name, name, strlen(name) < sizeof h.name ? strlen(name) : sizeof h.name);
    snprintf(h.mode, sizeof h.mode, "%07o", 0644);
    snprintf(h.size, sizeof h.size, "%011llo", (unsigned long long)size);
    snprintf(h.mtime, sizeof h.mtime, "%011o", 0);
    h.typeflag = type;
    if (link)
        memcpy(h.linkname, link, strlen(link));
    memcpy(h.magic, "ustar", sizeof h.magic);
    memcpy(h.version, "00", sizeof h.version);
    /* the checksum: the sum of the header's bytes with its own field read as spaces,
     * six octal digits, a NUL and a space */
    memset(h.chksum, ' ', sizeof h.chksum);
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof h; i++)
        sum += ((const unsigned char *)&h)[i];
    snprintf(h.chksum, sizeof h.chksum, "%06o", sum);
    h.chksum[7] = ' ';
    tb_put(t, &h, sizeof h);
    if (size) {
        tb_put(t, data, size);
        static const char zeros[512];
        if (size % 512)
            tb_put(t, zeros, 512 - size % 512);
    }
}

static void tb_end(tbuf *t)
{
    static const char zeros[1024];
    tb_put(t, zeros, sizeof zeros);
}

/* Extracting t must fail with `what` in the message and leave dir empty. */
static void refused(const char *dir, tbuf *t, const archive_limits *lim, const char *what, const char *label)
{
    char names[16][ARCHIVE_NAME_MAX], err[1024];
    int n = -1;
    int rc = archive_extract(t->p, t->n, dir, lim ? lim : &LIM, names, 16, &n, err, sizeof err);
    CHECK(rc == CD_ERR && strstr(err, what), "%s: refused with \"%s\" (got rc %d: %s)", label, what, rc, err);
    CHECK(count_files(dir) == 0 && n == 0, "%s: nothing is left in the folder", label);
    empty_dir(dir);
    free(t->p);
    t->p = NULL;
    t->n = 0;
}

/* One member of a hand-made tar: data is a string whose terminator is stored too
 * (NULL: no data), link the target of a link entry. */
typedef struct tar_member {
    const char *name;
    char type;
    const char *data, *link;
} tar_member;

static void tb_member(tbuf *t, const tar_member *m)
{
    tb_entry(t, m->name, m->type, m->data, m->data ? strlen(m->data) + 1 : 0, m->link);
}

static void test_refused(const char *dir)
{
    tbuf t = {0};
    static const char x[] = "some data";
    /* archives of one or two members, refused with `what` in the message */
    static const struct {
        tar_member m[2]; /* the second is absent where its name is NULL */
        const char *what, *label;
    } cases[] = {
        {{{"good.txt", '0', x, NULL}, {"a/../../evil.txt", '0', x, NULL}},
         "\"..\"", "a/../../evil.txt (after a good file)"},
        {{{"..", '5', NULL, NULL}}, "\"..\"", "a folder named .."},
        {{{"/etc/evil", '0', x, NULL}}, "absolute", "an absolute name"},
        {{{"a\\..\\evil", '0', x, NULL}}, "absolute", "backslashes"},
        {{{"model/.hidden", '0', x, NULL}}, "plain", "a hidden file"},
        {{{"a b.txt", '0', x, NULL}}, "plain", "a space in the name"},
        {{{"link", '2', NULL, "/etc/passwd"}}, "symbolic link", "a symbolic link"},
        {{{"good.txt", '0', x, NULL}, {"hard", '1', NULL, "good.txt"}}, "hard link", "a hard link"},
        {{{"dev", '3', NULL, NULL}}, "device", "a character device"},
        {{{"fifo", '6', NULL, NULL}}, "FIFO", "a FIFO"},
        {{{"././@LongLink", 'L', "x/evil", NULL}}, "long name", "a GNU long name"},
        {{{"a/same.txt", '0', x, NULL}, {"b/same.txt", '0', x, NULL}},
         "two files named same.txt", "the same name twice"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int k = 0; k < 2 && cases[c].m[k].name; k++)
            tb_member(&t, &cases[c].m[k]);
        tb_end(&t);
        refused(dir, &t, NULL, cases[c].what, cases[c].label);
    }
    archive_limits few = LIM;
    few.max_entries = 3;
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        tb_entry(&t, name, '0', x, sizeof x, NULL);
    }
    tb_end(&t);
    refused(dir, &t, &few, "more than 3 files", "a fourth file over a limit of 3");
    archive_limits small = LIM;
    small.max_file = sizeof x - 1;
    tb_entry(&t, "big", '0', x, sizeof x, NULL);
    tb_end(&t);
    refused(dir, &t, &small, "one file", "a file over the size limit");
    small = LIM;
    small.max_total = 2 * sizeof x - 1;
    tb_entry(&t, "one", '0', x, sizeof x, NULL);
    tb_entry(&t, "two", '0', x, sizeof x, NULL);
    tb_end(&t);
    refused(dir, &t, &small, "in all", "files over the total limit");
    tb_entry(&t, "good.txt", '0', x, sizeof x, NULL);
    tb_end(&t);
    t.p[150] ^= 1; /* the checksum */
    refused(dir, &t, NULL, "checksum", "a bad header checksum");
    unsigned char big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)cd_test_rand_u64();
    tb_entry(&t, "big.bin", '0', big, sizeof big, NULL);
    t.n = 512 + 1000; /* cut inside the data */
    refused(dir, &t, NULL, "truncated", "a truncated tar");
    tb_put(&t, "not an archive at all", 21);
    refused(dir, &t, NULL, "not a tar", "text");
}

static void test_accepted(const char *dir)
{
    tbuf t = {0};
    static const char x[] = "weights", y[] = "labels";
    tb_entry(&t, "model/", '5', NULL, 0, NULL);
    tb_entry(&t, "model/w.cdw", '0', x, sizeof x, NULL);
    static const char pax[] = "30 path=model/labels-long.txt\n";
    tb_entry(&t, "PaxHeader/x", 'x', pax, strlen(pax), NULL);
    tb_entry(&t, "model/short", '0', y, sizeof y, NULL);
    tb_end(&t);
    char names[16][ARCHIVE_NAME_MAX], err[1024], path[4400];
    int n = 0;
    int rc = archive_extract(t.p, t.n, dir, &LIM, names, 16, &n, err, sizeof err);
    CHECK(rc == CD_OK && n == 2 && !strcmp(names[0], "w.cdw") && !strcmp(names[1], "labels-long.txt"),
          "a folder around the files is dropped and a pax path is used: rc %d n %d %s", rc, n, err);
    size_t len = 0;
    snprintf(path, sizeof path, "%s/labels-long.txt", dir);
    char *got = cd_read_file(path, &len);
    CHECK(got && len == sizeof y && !memcmp(got, y, len), "the pax-named file has its data");
    free(got);
    empty_dir(dir);
    free(t.p);
}

/* Random files of awkward sizes through each kind and back. */
static void test_roundtrip(const char *src, const char *dst, const char *tmp)
{
    static const size_t sizes[] = {0, 1, 511, 512, 513, 200000};
    const char *names[6] = {"empty", "one.bin", "odd-511.dat", "block_512", "x.513", "big.cdw"};
    char path[4400], err[1024];
    for (int i = 0; i < 6; i++) {
        unsigned char *d = cd_xmalloc(sizes[i] + 1);
        for (size_t k = 0; k < sizes[i]; k++)
            d[k] = i == 5 && k % 3 ? (unsigned char)(k / 7) : (unsigned char)cd_test_rand_u64(); /* some of it compresses */
        snprintf(path, sizeof path, "%s/%s", src, names[i]);
        cd_write_file_atomic(path, d, sizes[i]);
        free(d);
    }
    for (int kind = 0; kind < ARCHIVE_COUNT; kind++) {
        snprintf(path, sizeof path, "%s/archive.%s", tmp, archive_ext(kind));
        int rc = archive_write(kind, src, names, 6, path, err, sizeof err);
        CHECK(rc == CD_OK, "%s: %s", archive_ext(kind), err);
        size_t len;
        char *data = read_all(path, &len);
        CHECK(archive_sniff(data, len) == kind, "%s is recognised by its bytes", archive_ext(kind));
        char got[16][ARCHIVE_NAME_MAX];
        int n = 0;
        rc = archive_extract(data, len, dst, &LIM, got, 16, &n, err, sizeof err);
        CHECK(rc == CD_OK && n == 6, "%s unpacks 6 files: %s", archive_ext(kind), err);
        for (int i = 0; i < 6 && rc == CD_OK; i++) {
            char a[4400], b[4400];
            snprintf(a, sizeof a, "%s/%s", src, names[i]);
            snprintf(b, sizeof b, "%s/%s", dst, names[i]);
            size_t la, lb;
            char *pa = read_all(a, &la), *pb = read_all(b, &lb);
            CHECK(la == lb && !memcmp(pa, pb, la), "%s: %s has the same %zu bytes", archive_ext(kind), names[i], la);
            free(pa);
            free(pb);
        }
        empty_dir(dst);
        if (kind == ARCHIVE_ZIP) {
            /* a flipped byte inside the stored data of a deflated entry: the CRC catches it */
            char *bad = cd_xmalloc(len);
            memcpy(bad, data, len);
            bad[len / 2] ^= 0x55;
            rc = archive_extract(bad, len, dst, &LIM, got, 16, &n, err, sizeof err);
            CHECK(rc == CD_ERR && count_files(dst) == 0, "a damaged zip is refused: %s", err);
            empty_dir(dst);
            /* the first central directory entry marked as a symbolic link */
            memcpy(bad, data, len);
            for (size_t i = 0; i + 46 < len; i++)
                if (rd32((unsigned char *)bad + i) == 0x02014b50) {
                    le32((unsigned char *)bad + i + 38, (uint32_t)(0120777u << 16));
                    break;
                }
            rc = archive_extract(bad, len, dst, &LIM, got, 16, &n, err, sizeof err);
            CHECK(rc == CD_ERR && strstr(err, "symbolic link") && count_files(dst) == 0, "a zip symlink is refused: %s", err);
            empty_dir(dst);
            free(bad);
        }
        if (kind == ARCHIVE_TGZ) {
            rc = archive_extract(data, len / 2, dst, &LIM, got, 16, &n, err, sizeof err);
            CHECK(rc == CD_ERR && count_files(dst) == 0, "half a tar.gz is refused: %s", err);
            empty_dir(dst);
        }
        free(data);
    }
    CHECK(archive_kind_parse("tgz") == ARCHIVE_TGZ && archive_kind_parse("tar.gz") == ARCHIVE_TGZ &&
              archive_kind_parse("zip") == ARCHIVE_ZIP && archive_kind_parse("rar") == -1,
          "kinds by extension");
}

int main(void)
{
    cd_test_init("test_archive");
    char src[4200], dst[4200], tmp[4200];
    cd_test_tmp_dir(src, sizeof src, "src");
    cd_test_tmp_dir(dst, sizeof dst, "dst");
    cd_test_tmp_dir(tmp, sizeof tmp, "tmp");
    test_roundtrip(src, dst, tmp);
    test_refused(dst);
    test_accepted(dst);
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
