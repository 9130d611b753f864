/* The SSE event hub: a ring of formatted events, a lock and a condition variable. */
#include "cdigits/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdigits/util.h"

typedef struct event {
    uint64_t id;
    char channel[64];
    char *text; /* "id: ...\nevent: ...\ndata: ...\n\n" */
    size_t len;
} event_t;

struct cd_events {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    event_t *ring;
    size_t cap;
    uint64_t next_id; /* id of the next event; ring slot is id % cap */
    int closed;
};

cd_events_t *events_new(size_t capacity)
{
    cd_events_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->cap = capacity ? capacity : 1024;
    ev->ring = calloc(ev->cap, sizeof *ev->ring);
    if (!ev->ring) {
        free(ev);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&ev->lock, NULL) != 0 || pthread_cond_init(&ev->cond, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(ev->ring);
        free(ev);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    ev->next_id = 1;
    return ev;
}

void events_free(cd_events_t *ev)
{
    if (!ev)
        return;
    for (size_t i = 0; i < ev->cap; i++)
        free(ev->ring[i].text);
    free(ev->ring);
    pthread_cond_destroy(&ev->cond);
    pthread_mutex_destroy(&ev->lock);
    free(ev);
}

void events_close(cd_events_t *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&ev->lock);
    ev->closed = 1;
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
}

void events_publish(cd_events_t *ev, const char *channel, const char *name, json_t *data)
{
    if (!ev)
        return;
    char *js = data ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    const char *body = js ? js : "{}";
    pthread_mutex_lock(&ev->lock);
    uint64_t id = ev->next_id++;
    event_t *e = &ev->ring[id % ev->cap];
    free(e->text);
    size_t need = strlen(body) + strlen(name) + 64;
    e->text = malloc(need);
    if (e->text) {
        int n = snprintf(e->text, need, "id: %llu\nevent: %s\ndata: %s\n\n", (unsigned long long)id, name, body);
        e->len = n > 0 ? (size_t)n : 0;
    } else {
        e->len = 0;
    }
    e->id = id;
    snprintf(e->channel, sizeof e->channel, "%s", channel);
    pthread_cond_broadcast(&ev->cond);
    pthread_mutex_unlock(&ev->lock);
    free(js);
}

void events_publish_job(cd_events_t *ev, const char *job_id, const char *name, json_t *data, int to_home)
{
    char channel[64];
    snprintf(channel, sizeof channel, "job:%s", job_id);
    events_publish(ev, channel, name, data);
    if (to_home)
        events_publish(ev, "home", name, data);
}

uint64_t events_last_id(cd_events_t *ev)
{
    pthread_mutex_lock(&ev->lock);
    uint64_t id = ev->next_id - 1;
    pthread_mutex_unlock(&ev->lock);
    return id;
}

/* With the lock held: appends the events after *cursor on channel; returns how many. */
static int collect(cd_events_t *ev, const char *channel, uint64_t *cursor, char **out, size_t *len)
{
    uint64_t first = *cursor + 1;
    /* events older than the ring are gone */
    if (ev->next_id > ev->cap && first < ev->next_id - ev->cap)
        first = ev->next_id - ev->cap;
    int n = 0;
    for (uint64_t id = first; id < ev->next_id; id++) {
        event_t *e = &ev->ring[id % ev->cap];
        if (e->id != id || !e->text || strcmp(e->channel, channel) != 0)
            continue;
        char *nb = realloc(*out, *len + e->len + 1);
        if (!nb)
            break;
        memcpy(nb + *len, e->text, e->len);
        *len += e->len;
        nb[*len] = 0;
        *out = nb;
        n++;
    }
    *cursor = ev->next_id - 1;
    return n;
}

int events_wait(cd_events_t *ev, const char *channel, uint64_t *cursor, double timeout, char **out, size_t *len)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    long long ns = (long long)(timeout * 1e9);
    deadline.tv_sec += ns / 1000000000LL;
    deadline.tv_nsec += ns % 1000000000LL;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ev->lock);
    int n = 0;
    for (;;) {
        if (ev->closed) {
            n = -1;
            break;
        }
        if (ev->next_id - 1 > *cursor) {
            n = collect(ev, channel, cursor, out, len);
            if (n > 0)
                break;
        }
        int rc = pthread_cond_timedwait(&ev->cond, &ev->lock, &deadline);
        if (rc == ETIMEDOUT) {
            if (ev->next_id - 1 > *cursor)
                n = collect(ev, channel, cursor, out, len);
            break;
        }
    }
    pthread_mutex_unlock(&ev->lock);
    return n;
}
