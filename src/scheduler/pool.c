/* Resource pools: GPUs (one training task each, all-or-nothing) and counted slots. */
#include "cdigits/sched.h"

#include <stdio.h>
#include <string.h>

static const char *const g_slot_names[] = {
    [SCHED_RES_CPU] = "CPU training slot",
    [SCHED_RES_DATASET] = "dataset slot",
    [SCHED_RES_INFER] = "inference slot",
};

void pool_init(sched_pool_t *p, const sched_config_t *cfg)
{
    memset(p, 0, sizeof *p);
    p->ngpus = cfg->ngpus < SCHED_MAX_GPUS ? cfg->ngpus : SCHED_MAX_GPUS;
    for (int i = 0; i < p->ngpus; i++)
        p->gpu_id[i] = cfg->gpu_ids[i];
    p->slots[SCHED_RES_CPU] = cfg->cpu_slots > 0 ? cfg->cpu_slots : 1;
    p->slots[SCHED_RES_DATASET] = cfg->dataset_slots > 0 ? cfg->dataset_slots : 1;
    p->slots[SCHED_RES_INFER] = cfg->inference_slots > 0 ? cfg->inference_slots : 1;
}

static int gpu_slot(const sched_pool_t *p, int id)
{
    for (int i = 0; i < p->ngpus; i++)
        if (p->gpu_id[i] == id)
            return i;
    return -1;
}

int pool_gpus_free(const sched_pool_t *p)
{
    int n = 0;
    for (int i = 0; i < p->ngpus; i++)
        n += p->gpu_owner[i][0] == 0;
    return n;
}

int pool_check(const sched_pool_t *p, const sched_req_t *req, char *why, size_t whylen)
{
    if (req->kind != SCHED_RES_GPU)
        return req->kind >= SCHED_RES_CPU && req->kind <= SCHED_RES_INFER ? CD_OK : CD_ERR;
    if (req->nids > 0) {
        for (int i = 0; i < req->nids; i++) {
            if (gpu_slot(p, req->ids[i]) < 0) {
                snprintf(why, whylen, "GPU %d does not exist here (this server has %d GPU%s)", req->ids[i],
                         p->ngpus, p->ngpus == 1 ? "" : "s");
                return CD_ERR;
            }
            for (int j = 0; j < i; j++)
                if (req->ids[j] == req->ids[i]) {
                    snprintf(why, whylen, "GPU %d is listed twice", req->ids[i]);
                    return CD_ERR;
                }
        }
        return CD_OK;
    }
    if (req->count < 1 || req->count > p->ngpus) {
        snprintf(why, whylen, "%d GPU%s asked for but this server has %d", req->count, req->count == 1 ? "" : "s",
                 p->ngpus);
        return CD_ERR;
    }
    return CD_OK;
}

int pool_acquire(sched_pool_t *p, const sched_req_t *req, const char *owner, int *got, int *ngot, char *why,
                 size_t whylen)
{
    *ngot = 0;
    if (req->kind != SCHED_RES_GPU) {
        if (req->kind < SCHED_RES_CPU || req->kind > SCHED_RES_INFER) {
            snprintf(why, whylen, "unknown resource kind %d", req->kind);
            return CD_ERR;
        }
        if (p->used[req->kind] >= p->slots[req->kind]) {
            snprintf(why, whylen, "Waiting for a free %s (%d of %d in use)", g_slot_names[req->kind],
                     p->used[req->kind], p->slots[req->kind]);
            return CD_ERR;
        }
        p->used[req->kind]++;
        return CD_OK;
    }
    if (pool_check(p, req, why, whylen) != CD_OK)
        return CD_ERR;
    int pick[SCHED_MAX_GPUS], n = 0;
    if (req->nids > 0) {
        for (int i = 0; i < req->nids; i++) {
            int k = gpu_slot(p, req->ids[i]);
            if (p->gpu_owner[k][0]) {
                snprintf(why, whylen, "Waiting for GPU %d (in use by job %s)", req->ids[i], p->gpu_owner[k]);
                return CD_ERR;
            }
            pick[n++] = k;
        }
    } else {
        for (int k = 0; k < p->ngpus && n < req->count; k++)
            if (!p->gpu_owner[k][0])
                pick[n++] = k;
        if (n < req->count) {
            snprintf(why, whylen, "Waiting for %d free GPU%s (%d of %d free)", req->count,
                     req->count == 1 ? "" : "s", n, p->ngpus);
            return CD_ERR;
        }
    }
    for (int i = 0; i < n; i++) {
        snprintf(p->gpu_owner[pick[i]], sizeof p->gpu_owner[0], "%s", owner);
        got[i] = p->gpu_id[pick[i]];
    }
    *ngot = n;
    return CD_OK;
}

void pool_release(sched_pool_t *p, const sched_req_t *req, const char *owner)
{
    if (req->kind == SCHED_RES_GPU) {
        for (int k = 0; k < p->ngpus; k++)
            if (strcmp(p->gpu_owner[k], owner) == 0)
                p->gpu_owner[k][0] = 0;
    } else if (req->kind >= SCHED_RES_CPU && req->kind <= SCHED_RES_INFER && p->used[req->kind] > 0) {
        p->used[req->kind]--;
    }
}
