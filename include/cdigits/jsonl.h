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

#endif
