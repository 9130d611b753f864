/* JSON lines on stdout: the worker's report to the server (docs/worker-protocol.md).
 * Each call prints one compact object and a newline and flushes; calls from several
 * threads never interleave. */
#ifndef CDIGITS_JSONL_H
#define CDIGITS_JSONL_H

#include <jansson.h>

/* Print obj (the reference is stolen; NULL is ignored). */
void cd_jsonl(json_t *obj);
/* {"type":"log","level":level,"message":...} and the same line on stderr */
void cd_jsonl_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Silence cd_jsonl and cd_jsonl_log on this thread (errors still print): replicas
 * other than the first. */
void cd_jsonl_set_quiet(int quiet);
/* {"type":"error","message":...} */
void cd_jsonl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Name this thread in its error lines ("who: message") and in the line a crash on it
 * prints (see cd_jsonl_catch_crashes), and give it an alternate signal stack so that
 * line is printed after a stack overflow too; NULL or "" forgets both. who is plain
 * ASCII. */
void cd_jsonl_set_speaker(const char *who);
/* Whether this thread has a speaker (a data-parallel replica's thread). */
int cd_jsonl_has_speaker(void);
/* From now on a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) on a thread
 * with a speaker prints {"type":"error","message":"<who> crashed with SIGSEGV ..."}
 * first, unless that thread already printed an error line; then the signal takes its
 * course (the handler that was there before, e.g. a sanitizer's, or the default). */
void cd_jsonl_catch_crashes(void);

#endif
