/* Small helpers shared by every module: checked allocation, files, a growable buffer,
 * time, logging. */
#ifndef CDIGITS_UTIL_H
#define CDIGITS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CD_OK 0
#define CD_ERR (-1)

#define CD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Marks a small inline function that the CUDA kernels call too (the .cu files of
 * kernels/), so the host and the device compute it from one text. */
#ifdef __CUDACC__
#define CD_HD __host__ __device__
#else
#define CD_HD
#endif

/* Marks a memory-bound loop's function to be compiled twice, for x86-64's baseline
 * (SSE2) and for AVX2, the loader picking the version the processor runs (GCC's
 * target_clones; an OpenMP region's body is cloned with its function). AVX2 without
 * FMA computes every element as SSE2 does, bit for bit: the vectors are wider and no
 * sum changes order, so results do not depend on the machine. The CPU backend's
 * elementwise, pooling, LRN, solver and im2col loops carry it (AlexNet's LRN 1.45x
 * faster, dropout 2x), and bench_net's triad, their ceiling. Other compilers and
 * targets, and CD_NO_CLONES (test_simd_bits's second build, which checks the claim
 * above), get the one baseline version. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && !defined(CD_NO_CLONES)
/* 1 where the attributes below compile for their targets (x86-64 intrinsics may be used
 * in CD_TARGET_V4 functions), 0 where they are empty */
#define CD_TARGETS 1
#define CD_CLONES __attribute__((target_clones("avx2", "default")))
/* The same with a third version for AVX-512 (x86-64-v4), which multiplies 64-bit
 * integers in vectors, has 32 vector registers where AVX2 has 16, and divides and takes
 * square roots 16 floats at a time: for the generator's loops (cd_rand_uniform, 3x
 * faster than AVX2's), max pooling's compares, selects and transposes (pool5's forward
 * 0.20 to 0.165 ms) and LRN's s^-0.75 (norm2's forward 1.46 to 0.98 ms). x86-64-v4 has
 * FMA, which GCC would contract a*b + c into, changing the bits: only for integer work
 * and compares, or in files compiled with -ffp-contract=off (the CPU backend's,
 * CD_CPU_OPTIONS in CMakeLists.txt). */
#define CD_CLONES_V4 __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
/* A function compiled for AVX-512 alone, where its vectors are wider than the other
 * versions' (max pooling's sixteen planes at a time): called only where cd_cpu_v4()
 * says the processor runs it, the same rules as CD_CLONES_V4 for its arithmetic. */
#define CD_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
static inline int cd_cpu_v4(void)
{
    return __builtin_cpu_supports("x86-64-v4");
}
#else
#define CD_TARGETS 0
#define CD_CLONES
#define CD_CLONES_V4
#define CD_TARGET_V4
static inline int cd_cpu_v4(void)
{
    return 0;
}
#endif

/* The counter-based uniform generator shared by every backend and by the data
 * augmentations (augment.h), in [0,1). Same (seed, counter, index) gives the same number
 * on every backend. */
static inline CD_HD uint64_t cd_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* The top 24 bits convert through uint32_t: the same value, and x86-64 converts a
 * uint64_t to float with a branch (dropout ran 2.7x slower with it). */
static inline CD_HD float cd_rand_uniform(uint64_t seed, uint64_t counter, uint64_t index)
{
    uint64_t z = cd_mix64(seed ^ cd_mix64(counter ^ cd_mix64(index)));
    return (float)(uint32_t)(z >> 40) * (1.0f / 16777216.0f);
}

/* The same kind of number for bulk draws of one (seed, counter), as dropout makes for
 * every element of its blob: the pair is mixed once into a 64-bit key (cd_rand_key),
 * and each index costs one 32-bit mix (cd_rand_keyed32: two 32-bit multiplies, which
 * vectors hold twice as many of as 64-bit ones), the key's low half added before it
 * and its high half xored in between, so that the draws of two keys are not one
 * sequence shifted. An index past 2^32 takes the key of its block of 2^32
 * (cd_rand_block_key), block 0's being the key itself. Same (key, index) gives the
 * same number on every backend; the numbers differ from cd_rand_uniform's. */
static inline CD_HD uint64_t cd_rand_key(uint64_t seed, uint64_t counter)
{
    return cd_mix64(seed ^ cd_mix64(counter));
}
static inline CD_HD uint64_t cd_rand_block_key(uint64_t key, uint64_t block)
{
    return key ^ block * 0x9e3779b97f4a7c15ULL;
}
/* the 24 bits behind cd_rand_keyed32's number, which is bits * 2^-24 */
static inline CD_HD uint32_t cd_rand_bits24(uint64_t key, uint32_t index)
{
    uint32_t z = index + (uint32_t)key;
    z = (z ^ (z >> 16)) * 0x7feb352dU;
    z = (z ^ (z >> 15) ^ (uint32_t)(key >> 32)) * 0x846ca68bU;
    return (z ^ (z >> 16)) >> 8;
}
static inline CD_HD float cd_rand_keyed32(uint64_t key, uint32_t index)
{
    return (float)cd_rand_bits24(key, index) * (1.0f / 16777216.0f);
}
static inline CD_HD float cd_rand_keyed(uint64_t key, uint64_t index)
{
    return cd_rand_keyed32(cd_rand_block_key(key, index >> 32), (uint32_t)index);
}


/* What cd_label_at returns for a position whose label is ignored. */
#define CD_LABEL_IGNORED (-2147483647 - 1)

/* The loss and accuracy ops' label at a position, for every backend: the float label as
 * an int (-1 for NaN or a value beyond int: it then counts and is never right), or
 * CD_LABEL_IGNORED where it is the ignored label. */
static inline CD_HD int cd_label_at(const float *label, size_t pos, int has_ignore, int ignore_label)
{
    float v = label[pos];
    int l = v > -2147483648.0f && v < 2147483648.0f ? (int)v : -1;
    return has_ignore && l == ignore_label ? CD_LABEL_IGNORED : l;
}

/* Allocation that reports and aborts on failure: for worker code paths only, where a
 * failed small allocation leaves nothing sensible to do. Server code uses malloc and
 * returns errors. */
void *cd_xmalloc(size_t n);
void *cd_xcalloc(size_t n, size_t size);
void *cd_xrealloc(void *p, size_t n);
char *cd_xstrdup(const char *s);

/* Read a whole file; returns a NUL-terminated buffer (caller frees) or NULL with
 * errno set. *len gets the byte count when len is not NULL. */
char *cd_read_file(const char *path, size_t *len);
/* Writes all of data to fd, retrying short writes and EINTR. CD_OK or CD_ERR with errno
 * (ENOSPC for a write that makes no progress). */
int cd_write_all(int fd, const void *data, size_t len);
/* Write a file atomically (temp file, fsync, rename). CD_OK or CD_ERR with errno. */
int cd_write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p; CD_OK or CD_ERR with errno */
int cd_mkdirs(const char *path, int mode);

/* Monotonic seconds. */
double cd_now(void);
/* Wall-clock seconds since the epoch. */
double cd_wall_time(void);

/* snprintf into a fixed buffer that always terminates; returns dst. */
char *cd_fmt(char *dst, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Replaces, in place, each byte of s that is not part of a well-formed UTF-8 sequence
 * with '?', so a line a program printed can go into JSON; returns how many it replaced. */
size_t cd_utf8_scrub(char *s);

/* A growable byte buffer for code that builds a file or a text in memory (prototxt
 * written back, snapshots; src/common/buf.c): appends grow it by doubling, and the bytes
 * are always followed by a NUL, so a text in it is a C string. Allocation goes through
 * cd_x* (worker code paths). */
typedef struct cd_buf {
    char *p; /* n bytes and a NUL; NULL until the first append */
    size_t n;
    size_t cap;
} cd_buf;

/* Appends n bytes left for the caller to fill and returns where they start. */
void *cd_buf_extend(cd_buf *b, size_t n);
/* Appends n bytes of data. */
void cd_buf_put(cd_buf *b, const void *data, size_t n);
void cd_buf_putc(cd_buf *b, char c);
/* Appends the formatted text (without its NUL). */
void cd_buf_printf(cd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties b, keeping its memory; b->p is then "". */
void cd_buf_reset(cd_buf *b);
/* Frees the bytes; b is then empty (and may be appended to again). */
void cd_buf_free(cd_buf *b);

enum cd_log_level { CD_LOG_DEBUG = 0, CD_LOG_INFO, CD_LOG_WARN, CD_LOG_ERROR };
void cd_log_set_level(int level);
void cd_log_set_file(FILE *f);
void cd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cd_info(...) cd_log(CD_LOG_INFO, __VA_ARGS__)
#define cd_warn(...) cd_log(CD_LOG_WARN, __VA_ARGS__)
#define cd_error(...) cd_log(CD_LOG_ERROR, __VA_ARGS__)
#define cd_debug(...) cd_log(CD_LOG_DEBUG, __VA_ARGS__)

/* A worker's fatal error: says why on stderr and through the fatal report (below),
 * then exits 1. */
void cd_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Where a fatal error (cd_die, a failed cd_x* allocation) is reported besides stderr.
 * The common code knows no JSON: src/common/jsonl.c installs, when it is linked into a
 * program, a report that writes the worker's error line. report gets the message and
 * returns nonzero when the process must leave with _exit rather than exit (a
 * data-parallel replica's thread, whose siblings may be inside a collective). NULL
 * removes it. */
typedef int (*cd_fatal_report_fn)(const char *message);
void cd_set_fatal_report(cd_fatal_report_fn report);
/* Calls the installed report with message; 0 where none is installed. */
int cd_report_fatal(const char *message);

#ifdef __cplusplus
}
#endif
#endif
