#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/util.h"

int cd_test_passed, cd_test_failed;
static uint64_t g_state;
static const char *g_name = "test";

int cd_test_near(double a, double b, double tol)
{
    if (isnan(a) || isnan(b))
        return 0;
    return fabs(a - b) <= tol;
}

void cd_test_init(const char *name)
{
    g_name = name;
    const char *s = getenv("CD_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    g_state = seed ? seed : 1;
    printf("%s: seed %llu (set CD_TEST_SEED to replay)\n", name, (unsigned long long)seed);
}

int cd_test_finish(void)
{
    printf("%s: %d passed, %d failed\n", g_name, cd_test_passed, cd_test_failed);
    return cd_test_failed || cd_test_passed == 0 ? 1 : 0;
}

void cd_test_cannot(const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const char *strict = getenv("CDIGITS_TEST_STRICT");
    if (strict && !strcmp(strict, "1")) {
        cd_test_failed++;
        fprintf(stderr, "FAIL cannot run: %s (scripts/test.sh installs and builds everything a test needs)\n", why);
    } else {
        printf("SKIP %s\n", why);
    }
}

uint64_t cd_test_rand_u64(void)
{
    /* xorshift64* */
    g_state ^= g_state >> 12;
    g_state ^= g_state << 25;
    g_state ^= g_state >> 27;
    return g_state * 0x2545F4914F6CDD1DULL;
}

double cd_test_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(cd_test_rand_u64() >> 11) / 9007199254740992.0);
}

double cd_test_gauss(void)
{
    double u1 = cd_test_uniform(1e-12, 1.0), u2 = cd_test_uniform(0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void cd_test_fill_uniform(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)cd_test_uniform(lo, hi);
}

/* dir/rel in the next of a ring of buffers (see testutil.h: valid for 16 calls). */
static const char *ring_path(const char *dir, const char *rel)
{
    static char buf[16][4400];
    static int k;
    char *b = buf[k++ & 15];
    snprintf(b, sizeof buf[0], "%s/%s", dir, rel);
    return b;
}

const char *cd_test_source_path(const char *rel)
{
    const char *root = getenv("CDIGITS_SOURCE_DIR");
    return ring_path(root ? root : CDIGITS_SOURCE_DIR, rel);
}

const char *cd_test_tmp_path(const char *rel)
{
    return ring_path(cd_test_tmpdir(), rel);
}

const char *cd_test_tmpdir(void)
{
    static char dir[4096];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/cdigits-test-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return dir;
}

void cd_test_tmp_dir(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", cd_test_tmpdir(), name);
    CHECK(mkdir(buf, 0755) == 0 || errno == EEXIST, "cannot make %s: %s", buf, strerror(errno));
}

void cd_test_tmpdir_remove(void)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cd_test_tmpdir());
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cd_test_tmpdir());
}

int cd_test_write(const char *name, const char *text) { return cd_test_write_at(cd_test_tmpdir(), name, text); }

int cd_test_write_at(const char *dir, const char *name, const char *text)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return CD_ERR;
    int ok = fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    CHECK(ok, "cannot write %s", path);
    return ok ? CD_OK : CD_ERR;
}

int cd_test_replay_corpus(const char *name, int (*target)(const uint8_t *, size_t), int *crashes)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", cd_test_source_path("tests/fuzz/corpus"), name);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = cd_read_file(path, &len);
        CHECK(data != NULL, "cannot read %s", path);
        if (!data)
            continue;
        /* printed first: if the target aborts, this names the input */
        printf("replay %s/%s (%zu bytes)\n", name, e->d_name, len);
        fflush(stdout);
        target((const uint8_t *)data, len);
        free(data);
        n++;
        if (crashes && strncmp(e->d_name, "crash-", 6) == 0)
            (*crashes)++;
        cd_test_passed++;
    }
    closedir(d);
    return n;
}
