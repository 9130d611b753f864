/*
 * The create stage's thread pool. Workers claim item indexes from a counter, prepare
 * the record (read, decode, resize, encode) into a ring of slots and mark the slot
 * ready; the calling thread takes the slots in index order and writes them, so the
 * file is the same whatever the thread count. A worker waits while its index is a
 * whole ring ahead of the writer, which bounds memory to RING prepared records.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

static volatile sig_atomic_t g_stop;

void cd_dataset_request_stop(void) { g_stop = 1; }
int ds_stop_requested(void) { return g_stop != 0; }

void ds_prepare_record(const cd_dataset_config_t *cfg, const char *path, int split,
                       size_t index, uint64_t *sum, ds_record *r)
{
    memset(r, 0, sizeof *r);
    size_t len = 0;
    char *buf = cd_read_file(path, &len);
    if (!buf) {
        snprintf(r->msg, sizeof r->msg, "cannot read: %s", strerror(errno));
        return;
    }
    cd_image_t img, out;
    int rc = cd_image_decode(buf, len, cfg->channels, &img, r->msg, sizeof r->msg);
    free(buf);
    if (rc != CD_OK)
        return;
    uint64_t noise = ds_seed_mix(cfg->seed, DS_STREAM_NOISE_TRAIN + (uint64_t)split, index);
    rc = cd_image_resize(&img, cfg->width, cfg->height, cfg->resize_mode, noise, &out, r->msg,
                         sizeof r->msg);
    cd_image_free(&img);
    if (rc != CD_OK)
        return;
    if (sum) {
        size_t n = (size_t)out.c * out.h * out.w;
        for (size_t k = 0; k < n; k++)
            sum[k] += out.data[k];
    }
    if (cfg->encoding == CD_ENC_NONE) {
        r->rec = out.data; /* planar pixels are the record: no copy */
        r->len = (size_t)out.c * out.h * out.w;
        out.data = NULL;
        r->ok = 1;
    } else {
        r->ok = cd_db_encode_record(&out, cfg->encoding, &r->rec, &r->len, r->msg,
                                    sizeof r->msg) == CD_OK;
    }
    cd_image_free(&out);
}

typedef struct slot {
    int ready;
    ds_record r;
} slot;

typedef struct pipe_state {
    ds_pipe_job *job;
    slot *ring;
    size_t nring;
    size_t next;    /* next index to claim */
    size_t written; /* indexes below this are consumed */
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t ready, space;
    size_t plane;   /* c*h*w, for the per-worker sums */
} pipe_state;

static void *worker(void *arg)
{
    pipe_state *ps = arg;
    ds_pipe_job *job = ps->job;
    uint64_t *sum = job->sum ? cd_xcalloc(ps->plane, sizeof(uint64_t)) : NULL;
    size_t summed = 0;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        while (!ps->stop && ps->next < job->n && ps->next - ps->written >= ps->nring)
            pthread_cond_wait(&ps->space, &ps->mu);
        if (ps->stop || ps->next >= job->n) {
            pthread_mutex_unlock(&ps->mu);
            break;
        }
        size_t i = ps->next++;
        pthread_mutex_unlock(&ps->mu);

        ds_record r;
        if (job->prepare)
            job->prepare(job->prepare_ctx, i, sum, &r);
        else
            ds_prepare_record(job->cfg, job->items[i].path, job->split, i, sum, &r);
        summed += r.ok;

        pthread_mutex_lock(&ps->mu);
        slot *s = &ps->ring[i % ps->nring];
        s->r = r;
        s->ready = 1;
        pthread_cond_broadcast(&ps->ready);
        pthread_mutex_unlock(&ps->mu);
    }
    if (sum) {
        pthread_mutex_lock(&ps->mu);
        for (size_t k = 0; k < ps->plane; k++)
            job->sum[k] += sum[k];
        job->sum_count += summed;
        pthread_mutex_unlock(&ps->mu);
        free(sum);
    }
    return NULL;
}

int ds_pipeline_run(ds_pipe_job *job, ds_consume_fn consume, void *ctx, char *err,
                    size_t errlen)
{
    int nt = job->threads > 0 ? job->threads : 1;
    if ((size_t)nt > job->n)
        nt = job->n ? (int)job->n : 1;
    pipe_state ps = {0};
    ps.job = job;
    ps.nring = (size_t)nt * 8 < 64 ? 64 : (size_t)nt * 8;
    ps.ring = cd_xcalloc(ps.nring, sizeof *ps.ring);
    ps.plane = job->sum_values ? job->sum_values : (size_t)job->cfg->channels * job->cfg->height * job->cfg->width;
    pthread_mutex_init(&ps.mu, NULL);
    pthread_cond_init(&ps.ready, NULL);
    pthread_cond_init(&ps.space, NULL);
    pthread_t *tids = cd_xcalloc((size_t)nt, sizeof *tids);
    int started = 0, rc = CD_OK;
    for (; started < nt; started++)
        if (pthread_create(&tids[started], NULL, worker, &ps) != 0)
            break;
    if (started == 0)
        rc = ds_err(err, errlen, "cannot start a thread: %s", strerror(errno));

    for (size_t i = 0; i < job->n && rc == CD_OK; i++) {
        slot *s = &ps.ring[i % ps.nring];
        pthread_mutex_lock(&ps.mu);
        while (!s->ready)
            pthread_cond_wait(&ps.ready, &ps.mu);
        pthread_mutex_unlock(&ps.mu);
        if (ds_stop_requested())
            rc = ds_err(err, errlen, "stopped on request before the dataset was complete");
        else
            rc = consume(ctx, i, &s->r, err, errlen);
        free(s->r.rec);
        pthread_mutex_lock(&ps.mu);
        s->ready = 0;
        ps.written = i + 1;
        pthread_cond_broadcast(&ps.space);
        pthread_mutex_unlock(&ps.mu);
    }
    pthread_mutex_lock(&ps.mu);
    ps.stop = 1;
    pthread_cond_broadcast(&ps.space);
    pthread_mutex_unlock(&ps.mu);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    for (size_t k = 0; k < ps.nring; k++)
        if (ps.ring[k].ready)
            free(ps.ring[k].r.rec);
    free(tids);
    free(ps.ring);
    pthread_mutex_destroy(&ps.mu);
    pthread_cond_destroy(&ps.ready);
    pthread_cond_destroy(&ps.space);
    return rc;
}

/* What ds_pipeline_items hands the pipeline as consume's ctx. */
typedef struct items_run {
    const ds_items *items;
    ds_skips *skips;
    ds_progress *progress;
    ds_item_write_fn write;
    void *ctx;
} items_run;

static int consume_item(void *arg, size_t i, ds_record *r, char *err, size_t errlen)
{
    items_run *run = arg;
    const ds_item *it = &run->items->v[i];
    if (!r->ok)
        ds_skip(run->skips, it->path, r->msg);
    else if (run->write(run->ctx, it, r, err, errlen) != CD_OK)
        return CD_ERR;
    ds_progress_step(run->progress, i + 1, run->items->n);
    return CD_OK;
}

int ds_pipeline_items(const cd_dataset_config_t *cfg, const ds_items *items, int split, uint64_t *sum,
                      size_t *sum_count, ds_skips *skips, ds_progress *progress, ds_item_write_fn write,
                      void *ctx, char *err, size_t errlen)
{
    items_run run = {items, skips, progress, write, ctx};
    ds_pipe_job job = {.cfg = cfg, .items = items->v, .n = items->n, .split = split,
                       .threads = ds_thread_count(cfg), .sum = sum};
    int rc = ds_pipeline_run(&job, consume_item, &run, err, errlen);
    *sum_count = job.sum_count;
    return rc;
}
