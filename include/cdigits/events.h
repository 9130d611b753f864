/*
 * The event hub behind server-sent events. Producers (worker readers, the scheduler,
 * the hardware monitor) publish named JSON events on a channel; each SSE connection
 * waits for the events of its channel after a cursor. Events live in one ring of
 * recent events, so a client that reconnects with Last-Event-ID gets what it missed
 * as long as it is still in the ring.
 *
 * Channels: "home" (jobs added or removed, status and progress of every job, GPUs
 * free) and "job:<id>" (one job's status, progress, metrics, logs, snapshots and
 * hardware figures). Thread-safe.
 */
#ifndef CDIGITS_EVENTS_H
#define CDIGITS_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_events cd_events_t;

/* A hub that keeps the last `capacity` events; NULL when out of memory. */
cd_events_t *events_new(size_t capacity);
void events_free(cd_events_t *ev); /* accepts NULL */
/* Ends every stream: waiters return -1 from now on. */
void events_close(cd_events_t *ev);

/* Publishes `name` with data (borrowed; NULL sends {}) on a channel. */
void events_publish(cd_events_t *ev, const char *channel, const char *name, json_t *data);
/* Publishes on "job:<job_id>", and also on "home" when to_home is set. */
void events_publish_job(cd_events_t *ev, const char *job_id, const char *name, json_t *data, int to_home);
/* The id of the newest event (0 before the first). */
uint64_t events_last_id(cd_events_t *ev);

/* Waits up to timeout seconds for events on channel with an id after *cursor and
 * appends them as SSE text ("id: N\nevent: NAME\ndata: JSON\n\n") to the malloc'd
 * buffer *out of *len bytes (both may start NULL/0); advances *cursor. Returns the
 * number of events appended, 0 on timeout, -1 once the hub is closed. */
int events_wait(cd_events_t *ev, const char *channel, uint64_t *cursor, double timeout, char **out,
                size_t *len);

#ifdef __cplusplus
}
#endif
#endif
