/* A small test harness: checks count and report, the binary exits non-zero on any
 * failure and prints "N passed, N failed" last. Random inputs come from a seeded
 * generator whose seed is printed, so a failure can be replayed (CD_TEST_SEED). */
#ifndef CDIGITS_TESTUTIL_H
#define CDIGITS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int cd_test_passed, cd_test_failed;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) {                                                                   \
            cd_test_passed++;                                                         \
        } else {                                                                      \
            cd_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define CHECK_NEAR(a, b, tol, what)                                                   \
    CHECK(cd_test_near((double)(a), (double)(b), (double)(tol)), "%s: %.9g vs %.9g (tol %g)", \
          (what), (double)(a), (double)(b), (double)(tol))

int cd_test_near(double a, double b, double tol);
/* Seeds the generator from CD_TEST_SEED or the clock; prints the seed. */
void cd_test_init(const char *name);
/* Prints the summary and returns the exit status (0 only if nothing failed). */
int cd_test_finish(void);
/* A part of the test that cannot run here (a tool or library this build lacks): prints
 * "SKIP <why>". Under CDIGITS_TEST_STRICT=1 (scripts/test.sh, which installs and builds
 * everything) it counts as a failure instead: a skip there hides a gap. */
void cd_test_cannot(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t cd_test_rand_u64(void);
double cd_test_uniform(double lo, double hi);
double cd_test_gauss(void);
void cd_test_fill_uniform(float *x, size_t n, double lo, double hi);

/* Path helpers: $CDIGITS_SOURCE_DIR/rel, a fresh temporary directory and rel inside
 * it. The paths returned live in a ring of 16 buffers shared by both path functions:
 * each is valid until 16 more calls. */
const char *cd_test_source_path(const char *rel);
const char *cd_test_tmp_path(const char *rel);
/* Runs every file of tests/fuzz/corpus/NAME through a fuzz target (which aborts on a
 * finding), printing each name first; returns how many, and how many are crash-* in
 * *crashes (may be NULL). */
int cd_test_replay_corpus(const char *name, int (*target)(const uint8_t *, size_t), int *crashes);
const char *cd_test_tmpdir(void);
/* Makes the folder cd_test_tmpdir()/name (an existing one is fine) and writes its path
 * into buf; a failure is a failed check. */
void cd_test_tmp_dir(char *buf, size_t size, const char *name);
/* Removes cd_test_tmpdir() and everything in it; says so on stderr when it cannot. */
void cd_test_tmpdir_remove(void);
/* Writes text to cd_test_tmpdir()/name (replacing it); CD_OK, or CD_ERR with a failed
 * check counted. */
int cd_test_write(const char *name, const char *text);
/* The same in the folder dir: dir/name. */
int cd_test_write_at(const char *dir, const char *name, const char *text);

/* The main of a test on the CPU backend: cd_test_init(name), a CPU backend with `threads`
 * threads into *be (none made is a failed check, and nothing runs), each of tests[0..n)
 * in order, then the backend freed (*be = NULL); returns cd_test_finish(). */
typedef struct cd_backend cd_backend_t;
int cd_test_main_cpu(const char *name, int threads, cd_backend_t **be, void (*const tests[])(void),
                     size_t n);

/* A network from prototxt text (named name in messages), validated, built with opts
 * and allocated on be; *tree gets the parsed text (free both with cd_net_free and
 * cd_pt_free). A network that does not build is a failed check naming name and the
 * reason; NULL then, with *tree NULL. */
typedef struct cd_net cd_net;
typedef struct cd_net_opts cd_net_opts;
typedef struct cd_pt_node cd_pt_node;
cd_net *cd_test_build_net(cd_backend_t *be, const char *text, const char *name, const cd_net_opts *opts,
                          cd_pt_node **tree);
/* The network of the job folder dir (dir/network.prototxt, through cd_net_load as a job's
 * network is read) built with opts and allocated on be; NULL after a failed check that
 * names dir and the reason. */
cd_net *cd_test_job_net(cd_backend_t *be, const char *dir, const cd_net_opts *opts);
/* Saves net's weights as the job's snapshot dir/snapshot_iter_<iter>.cdw; a failure is a
 * failed check. */
void cd_test_save_snapshot(const cd_net *net, const char *dir, long iter);

#endif
