/*
 * The wrappers of the backend interface's optional slots (backend.h): the one place
 * that tests whether a backend has a slot, gives the documented fallback when it has
 * not, or says in be->err (why, for the groups) that the backend does not support it:
 * "the <name> backend does not support device graphs".
 */
#include <stdio.h>

#include "cdigits/augment.h"
#include "cdigits/backend.h"
#include "cdigits/util.h"

/* Each feature and the slots it needs (all of them: half an async pair would queue
 * uploads nobody waits for). */
static int has_prepare_batch(const cd_backend_iface *o) { return o->prepare_batch != NULL; }
static int has_async_upload(const cd_backend_iface *o) { return o->upload_async && o->upload_wait; }
static int has_overlapped_allreduce(const cd_backend_iface *o)
{
    return o->allreduce_start && o->allreduce_wait;
}
static int has_graphs(const cd_backend_iface *o)
{
    return o->graph_begin && o->graph_end && o->graph_replay;
}
static int has_device_groups(const cd_backend_iface *o) { return o->group_id && o->group_join; }
static int has_local_groups(const cd_backend_iface *o) { return o->join_local_group != NULL; }
static int has_augment(const cd_backend_iface *o) { return o->augment_batch && o->whiten_batch; }

static const struct {
    const char *name;
    int (*present)(const cd_backend_iface *o);
} features[CD_BE_FEATURE_COUNT] = {
    [CD_BE_PREPARE_BATCH] = {"batch preparation on the device", has_prepare_batch},
    [CD_BE_ASYNC_UPLOAD] = {"uploads beside compute", has_async_upload},
    [CD_BE_OVERLAPPED_ALLREDUCE] = {"averages beside compute", has_overlapped_allreduce},
    [CD_BE_GRAPHS] = {"device graphs", has_graphs},
    [CD_BE_DEVICE_GROUPS] = {"data-parallel groups across devices", has_device_groups},
    [CD_BE_LOCAL_GROUPS] = {"replicas in one process", has_local_groups},
    [CD_BE_AUGMENT] = {"data augmentation on the device", has_augment},
};

int cd_be_supports(const cd_backend_t *be, int feature)
{
    if (!be || !be->iface || feature < 0 || feature >= CD_BE_FEATURE_COUNT)
        return 0;
    return features[feature].present(be->iface);
}

const char *cd_be_feature_name(int feature)
{
    return feature >= 0 && feature < CD_BE_FEATURE_COUNT ? features[feature].name : "?";
}

/* CD_ERR with "the <name> backend does not support <feature>" in be->err */
static int unsupported(cd_backend_t *be, int feature)
{
    snprintf(be->err, sizeof be->err, "the %s backend does not support %s", be->iface->name,
             cd_be_feature_name(feature));
    return CD_ERR;
}

int cd_be_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                        const uint8_t *src, const int *oy, const int *ox,
                        const uint8_t *mirror, const float *mean, float scale, float *dst)
{
    if (!cd_be_supports(be, CD_BE_PREPARE_BATCH))
        return unsupported(be, CD_BE_PREPARE_BATCH);
    be->iface->prepare_batch(be, n, c, sh, sw, oh, ow, src, oy, ox, mirror, mean, scale, dst);
    return CD_OK;
}

int cd_be_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params,
                        int kind, uint8_t fill, const uint8_t *src, uint8_t *dst)
{
    if (!cd_be_supports(be, CD_BE_AUGMENT))
        return unsupported(be, CD_BE_AUGMENT);
    if (c < 1 || c > CD_AUG_MAX_CHANNELS || (kind != CD_AUG_IMAGE && kind != CD_AUG_LABEL)) {
        snprintf(be->err, sizeof be->err, "augment_batch: %d channels of kind %d; augmentations take 1 to %d "
                 "channels of images (%d) or labels (%d)", c, kind, CD_AUG_MAX_CHANNELS, CD_AUG_IMAGE, CD_AUG_LABEL);
        return CD_ERR;
    }
    if (n > 0 && h > 0 && w > 0)
        be->iface->augment_batch(be, n, c, h, w, params, kind, fill, src, dst);
    return CD_OK;
}

int cd_be_whiten_batch(cd_backend_t *be, int n, size_t size, float *x)
{
    if (!cd_be_supports(be, CD_BE_AUGMENT))
        return unsupported(be, CD_BE_AUGMENT);
    if (n > 0 && size > 0)
        be->iface->whiten_batch(be, n, size, x);
    return CD_OK;
}

int cd_be_allreduce_mean(cd_backend_t *be, float *x, size_t n)
{
    return be->iface->allreduce_mean ? be->iface->allreduce_mean(be, x, n) : CD_OK;
}

int cd_be_broadcast(cd_backend_t *be, float *x, size_t n)
{
    return be->iface->broadcast ? be->iface->broadcast(be, x, n) : CD_OK;
}

int cd_be_allreduce_start(cd_backend_t *be, float *x, size_t n)
{
    if (!cd_be_supports(be, CD_BE_OVERLAPPED_ALLREDUCE))
        return cd_be_allreduce_mean(be, x, n);
    return be->iface->allreduce_start(be, x, n);
}

int cd_be_allreduce_wait(cd_backend_t *be)
{
    return cd_be_supports(be, CD_BE_OVERLAPPED_ALLREDUCE) ? be->iface->allreduce_wait(be) : CD_OK;
}

size_t cd_be_pool_mask_size(cd_backend_t *be, const cd_pool_desc *d)
{
    return be->iface->pool_mask_size ? be->iface->pool_mask_size(be, d) : 0;
}

int cd_be_mem_info(cd_backend_t *be, size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    return be->iface->mem_info ? be->iface->mem_info(be, free_bytes, total_bytes) : CD_ERR;
}

void *cd_be_host_alloc(cd_backend_t *be, size_t bytes)
{
    const cd_backend_iface *o = be->iface;
    return o->host_alloc && o->host_free ? o->host_alloc(be, bytes) : NULL;
}

void cd_be_host_free(cd_backend_t *be, void *ptr)
{
    if (ptr && be->iface->host_alloc && be->iface->host_free)
        be->iface->host_free(be, ptr);
}

void cd_be_upload_async(cd_backend_t *be, void *dst_dev, const void *src_host, size_t bytes)
{
    if (cd_be_supports(be, CD_BE_ASYNC_UPLOAD))
        be->iface->upload_async(be, dst_dev, src_host, bytes);
    else
        be->iface->upload(be, dst_dev, src_host, bytes);
}

void cd_be_upload_wait(cd_backend_t *be)
{
    if (cd_be_supports(be, CD_BE_ASYNC_UPLOAD))
        be->iface->upload_wait(be);
}

int cd_be_graph_begin(cd_backend_t *be)
{
    return cd_be_supports(be, CD_BE_GRAPHS) ? be->iface->graph_begin(be) : unsupported(be, CD_BE_GRAPHS);
}

int cd_be_graph_end(cd_backend_t *be)
{
    return cd_be_supports(be, CD_BE_GRAPHS) ? be->iface->graph_end(be) : unsupported(be, CD_BE_GRAPHS);
}

int cd_be_graph_replay(cd_backend_t *be)
{
    return cd_be_supports(be, CD_BE_GRAPHS) ? be->iface->graph_replay(be) : unsupported(be, CD_BE_GRAPHS);
}

/* CD_ERR with "the <name> backend does not support ..." in why */
static int no_groups(cd_backend_t *be, char *why, size_t why_len)
{
    snprintf(why, why_len, "the %s backend does not support %s", be->iface->name,
             cd_be_feature_name(CD_BE_DEVICE_GROUPS));
    return CD_ERR;
}

int cd_be_group_id(cd_backend_t *be, char *id, size_t id_len, char *why, size_t why_len)
{
    if (!cd_be_supports(be, CD_BE_DEVICE_GROUPS))
        return no_groups(be, why, why_len);
    return be->iface->group_id(be, id, id_len, why, why_len);
}

int cd_be_group_join(cd_backend_t *be, const char *id, int nranks, int rank, char *why,
                     size_t why_len)
{
    if (!cd_be_supports(be, CD_BE_DEVICE_GROUPS))
        return no_groups(be, why, why_len);
    return be->iface->group_join(be, id, nranks, rank, why, why_len);
}

int cd_be_join_local_group(cd_backend_t *be, cd_group_t *g, int rank)
{
    if (!cd_be_supports(be, CD_BE_LOCAL_GROUPS))
        return unsupported(be, CD_BE_LOCAL_GROUPS);
    if (be->iface->join_local_group(be, g, rank) != CD_OK) {
        snprintf(be->err, sizeof be->err, "rank %d is outside the group of replicas", rank);
        return CD_ERR;
    }
    return CD_OK;
}

void cd_be_set_fail_hook(cd_backend_t *be, cd_backend_fail_hook hook)
{
    if (be->iface->set_fail_hook)
        be->iface->set_fail_hook(be, hook);
}
