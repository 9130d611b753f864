/*
 * The backend interface's wrappers (cd_be_*) and the input preparation above them.
 *
 * A fake backend in host memory with every optional slot NULL: each wrapper gives the
 * fallback backend.h documents (the identity of a backend in no group, a plain upload,
 * malloc for pinned memory) or CD_ERR naming the backend and what it lacks, and never
 * calls through a NULL slot. The same fake with every optional slot filled: each
 * wrapper calls its slot exactly once. Half of a pair (upload_async without
 * upload_wait, two of the three graph slots) counts as absent. The CPU backend's
 * capabilities are what the engine decides by: host memory, fp32 only.
 *
 * Input preparation: on a backend without prepare_batch the host path must give
 * exactly what the CPU backend's prepare_batch gives (the reference) for fresh random
 * images, crops, flips, means and scales; a mean file is loaded, made per-pixel and
 * refused, naming the file, when it is another dataset's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/engine/input_prep.h"
#include "cdigits/backend.h"
#include "cdigits/dataset.h"
#include "cdigits/group.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

/* ---- a fake backend in host memory ------------------------------------------------ */

enum {
    CALL_UPLOAD, CALL_PREPARE, CALL_ALLREDUCE, CALL_START, CALL_WAIT, CALL_BROADCAST, CALL_MEM,
    CALL_HOST_ALLOC, CALL_HOST_FREE, CALL_UPLOAD_ASYNC, CALL_UPLOAD_WAIT, CALL_GRAPH_BEGIN,
    CALL_GRAPH_END, CALL_GRAPH_REPLAY, CALL_GROUP_ID, CALL_GROUP_JOIN, CALL_LOCAL_JOIN, CALL_HOOK, CALL_AUGMENT,
    CALL_WHITEN, CALL_COUNT
};
static int g_calls[CALL_COUNT];

/* one more call of slot `which`; CD_OK */
static int counted(int which)
{
    g_calls[which]++;
    return CD_OK;
}

static void *fake_alloc(cd_backend_t *be, size_t bytes) { return calloc(1, bytes ? bytes : 1); }
static void fake_free(cd_backend_t *be, void *ptr) { free(ptr); }
static void fake_upload(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    g_calls[CALL_UPLOAD]++;
    memcpy(dst, src, bytes);
}
static void fake_download(cd_backend_t *be, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void fake_copy(cd_backend_t *be, void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void fake_sync(cd_backend_t *be) {}

static void fake_prepare(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow, const uint8_t *src,
                         const int *oy, const int *ox, const uint8_t *mirror, const float *mean, float scale,
                         float *dst)
{
    g_calls[CALL_PREPARE]++;
}
static void fake_augment(cd_backend_t *be, int n, int c, int h, int w, const struct cd_aug_params *params, int kind,
                         uint8_t fill, const uint8_t *src, uint8_t *dst)
{
    g_calls[CALL_AUGMENT]++;
}
static void fake_whiten(cd_backend_t *be, int n, size_t size, float *x) { g_calls[CALL_WHITEN]++; }
static int fake_allreduce(cd_backend_t *be, float *x, size_t n) { return counted(CALL_ALLREDUCE); }
static int fake_start(cd_backend_t *be, float *x, size_t n) { return counted(CALL_START); }
static int fake_wait(cd_backend_t *be) { return counted(CALL_WAIT); }
static int fake_broadcast(cd_backend_t *be, float *x, size_t n) { return counted(CALL_BROADCAST); }
static int fake_mem(cd_backend_t *be, size_t *f, size_t *t)
{
    g_calls[CALL_MEM]++;
    *f = 3;
    *t = 7;
    return CD_OK;
}
static void *fake_host_alloc(cd_backend_t *be, size_t bytes)
{
    g_calls[CALL_HOST_ALLOC]++;
    return malloc(bytes);
}
static void fake_host_free(cd_backend_t *be, void *ptr)
{
    g_calls[CALL_HOST_FREE]++;
    free(ptr);
}
static void fake_upload_async(cd_backend_t *be, void *dst, const void *src, size_t bytes)
{
    g_calls[CALL_UPLOAD_ASYNC]++;
    memcpy(dst, src, bytes);
}
static void fake_upload_wait(cd_backend_t *be) { g_calls[CALL_UPLOAD_WAIT]++; }
static int fake_graph_begin(cd_backend_t *be) { return counted(CALL_GRAPH_BEGIN); }
static int fake_graph_end(cd_backend_t *be) { return counted(CALL_GRAPH_END); }
static int fake_graph_replay(cd_backend_t *be) { return counted(CALL_GRAPH_REPLAY); }
static int fake_group_id(cd_backend_t *be, char *id, size_t len, char *why, size_t wl)
{
    snprintf(id, len, "c0ffee");
    return counted(CALL_GROUP_ID);
}
static int fake_group_join(cd_backend_t *be, const char *id, int nranks, int rank, char *why, size_t wl)
{
    counted(CALL_GROUP_JOIN);
    return strcmp(id, "c0ffee") == 0 ? CD_OK : CD_ERR;
}
static int fake_join_local(cd_backend_t *be, cd_group_t *g, int rank)
{
    counted(CALL_LOCAL_JOIN);
    return rank >= 0 && rank < cd_group_size(g) ? CD_OK : CD_ERR;
}
static cd_backend_fail_hook g_hook_set;
static void fake_set_fail_hook(cd_backend_t *be, cd_backend_fail_hook hook)
{
    g_calls[CALL_HOOK]++;
    g_hook_set = hook;
}
static void some_hook(cd_backend_t *be, const char *message) {}

/* the required memory slots only: every optional one is NULL */
static const cd_backend_iface bare_iface = {
    .name = "fake", .alloc = fake_alloc, .free = fake_free, .upload = fake_upload,
    .download = fake_download, .copy = fake_copy, .sync = fake_sync,
};

static cd_backend_iface full_iface(void)
{
    cd_backend_iface o = bare_iface;
    o.prepare_batch = fake_prepare;
    o.allreduce_mean = fake_allreduce;
    o.allreduce_start = fake_start;
    o.allreduce_wait = fake_wait;
    o.broadcast = fake_broadcast;
    o.mem_info = fake_mem;
    o.host_alloc = fake_host_alloc;
    o.host_free = fake_host_free;
    o.upload_async = fake_upload_async;
    o.upload_wait = fake_upload_wait;
    o.graph_begin = fake_graph_begin;
    o.graph_end = fake_graph_end;
    o.graph_replay = fake_graph_replay;
    o.group_id = fake_group_id;
    o.group_join = fake_group_join;
    o.set_fail_hook = fake_set_fail_hook;
    o.join_local_group = fake_join_local;
    o.augment_batch = fake_augment;
    o.whiten_batch = fake_whiten;
    return o;
}

static int no_calls(void)
{
    int sum = 0;
    for (int i = CALL_PREPARE; i < CALL_COUNT; i++)
        sum += g_calls[i];
    return sum == 0;
}

/* ---- the wrappers ---------------------------------------------------------------- */

static void test_bare(void)
{
    cd_backend_t be = {.iface = &bare_iface};
    memset(g_calls, 0, sizeof g_calls);
    for (int f = 0; f < CD_BE_FEATURE_COUNT; f++) {
        CHECK(!cd_be_supports(&be, f), "a backend without optional slots has %s", cd_be_feature_name(f));
        CHECK(strcmp(cd_be_feature_name(f), "?") != 0, "feature %d has a name", f);
    }
    CHECK(!cd_be_supports(&be, -1) && !cd_be_supports(&be, CD_BE_FEATURE_COUNT) && !cd_be_supports(NULL, 0),
          "unknown features and no backend are never supported");
    CHECK(!strcmp(cd_be_feature_name(CD_BE_FEATURE_COUNT), "?"), "an unknown feature is named ?");

    enum { N = 37 };
    float x[N], keep[N];
    cd_test_fill_uniform(x, N, -5, 5);
    memcpy(keep, x, sizeof x);
    CHECK(cd_be_allreduce_mean(&be, x, N) == CD_OK && cd_be_broadcast(&be, x, N) == CD_OK &&
          cd_be_allreduce_start(&be, x, N) == CD_OK && cd_be_allreduce_wait(&be) == CD_OK &&
          !memcmp(x, keep, sizeof x), "no group: averages and broadcasts are the identity");

    size_t fb = 99, tb = 99;
    CHECK(cd_be_mem_info(&be, &fb, &tb) == CD_ERR && fb == 0 && tb == 0, "no mem_info: CD_ERR and zeros");

    CHECK(cd_be_host_alloc(&be, 64) == NULL, "no pinned memory: NULL, the caller uses malloc");
    cd_be_host_free(&be, NULL);

    float dst[N] = {0};
    g_calls[CALL_UPLOAD] = 0;
    cd_be_upload_async(&be, dst, x, sizeof x);
    cd_be_upload_wait(&be);
    CHECK(g_calls[CALL_UPLOAD] == 1 && !memcmp(dst, x, sizeof x), "no upload_async: a plain upload");

    uint8_t src[4] = {1, 2, 3, 4};
    int zero = 0;
    be.err[0] = 0;
    CHECK(cd_be_prepare_batch(&be, 1, 1, 2, 2, 2, 2, src, &zero, &zero, NULL, NULL, 1.0f, dst) == CD_ERR &&
          strstr(be.err, "fake backend does not support batch preparation"), "prepare_batch: %s", be.err);
    int (*graph[])(cd_backend_t *) = {cd_be_graph_begin, cd_be_graph_end, cd_be_graph_replay};
    for (size_t i = 0; i < CD_ARRAY_LEN(graph); i++) {
        be.err[0] = 0;
        CHECK(graph[i](&be) == CD_ERR && strstr(be.err, "fake backend does not support device graphs"),
              "graph call %zu: %s", i, be.err);
    }
    char id[CD_BE_GROUP_ID_LEN] = "", why[256] = "";
    CHECK(cd_be_group_id(&be, id, sizeof id, why, sizeof why) == CD_ERR && strstr(why, "fake backend"),
          "group_id: %s", why);
    why[0] = 0;
    CHECK(cd_be_group_join(&be, "00", 2, 0, why, sizeof why) == CD_ERR && strstr(why, "fake backend"),
          "group_join: %s", why);
    be.err[0] = 0;
    CHECK(cd_be_augment_batch(&be, 1, 1, 2, 2, NULL, CD_AUG_IMAGE, 255, src, src) == CD_ERR &&
              strstr(be.err, "fake backend does not support data augmentation") &&
              cd_be_whiten_batch(&be, 1, 4, dst) == CD_ERR,
          "augment_batch: %s", be.err);
    cd_group_t *g = cd_group_new(2);
    be.err[0] = 0;
    CHECK(cd_be_join_local_group(&be, g, 0) == CD_ERR &&
          strstr(be.err, "fake backend does not support replicas in one process"), "join_local_group: %s", be.err);
    cd_group_free(g);
    cd_be_set_fail_hook(&be, some_hook);
    CHECK(no_calls(), "no optional slot was reached");
}

static void test_full(void)
{
    cd_backend_iface o = full_iface();
    cd_backend_t be = {.iface = &o};
    memset(g_calls, 0, sizeof g_calls);
    for (int f = 0; f < CD_BE_FEATURE_COUNT; f++)
        CHECK(cd_be_supports(&be, f), "every slot filled: %s", cd_be_feature_name(f));
    float x[4] = {1, 2, 3, 4}, dst[4];
    uint8_t src[4] = {0};
    int zero = 0;
    size_t fb, tb;
    char id[CD_BE_GROUP_ID_LEN] = "", why[64] = "";
    CHECK(cd_be_prepare_batch(&be, 1, 1, 2, 2, 2, 2, src, &zero, &zero, NULL, NULL, 1.0f, dst) == CD_OK,
          "prepare_batch");
    uint8_t out[4];
    CHECK(cd_be_augment_batch(&be, 1, 1, 2, 2, NULL, CD_AUG_IMAGE, 255, src, out) == CD_OK &&
              cd_be_whiten_batch(&be, 1, 4, dst) == CD_OK, "augment_batch and whiten_batch");
    CHECK(cd_be_augment_batch(&be, 1, 0, 2, 2, NULL, CD_AUG_IMAGE, 255, src, out) == CD_ERR &&
              strstr(be.err, "0 channels") && cd_be_augment_batch(&be, 1, 1, 2, 2, NULL, 7, 255, src, out) == CD_ERR,
          "augment_batch refuses 0 channels and an unknown kind: %s", be.err);
    CHECK(cd_be_allreduce_mean(&be, x, 4) == CD_OK && cd_be_allreduce_start(&be, x, 4) == CD_OK &&
          cd_be_allreduce_wait(&be) == CD_OK && cd_be_broadcast(&be, x, 4) == CD_OK, "group calls");
    CHECK(cd_be_mem_info(&be, &fb, &tb) == CD_OK && fb == 3 && tb == 7, "mem_info answers the slot's figures");
    void *h = cd_be_host_alloc(&be, 16);
    CHECK(h != NULL, "host_alloc");
    cd_be_host_free(&be, h);
    cd_be_upload_async(&be, dst, x, sizeof x);
    cd_be_upload_wait(&be);
    CHECK(cd_be_graph_begin(&be) == CD_OK && cd_be_graph_end(&be) == CD_OK && cd_be_graph_replay(&be) == CD_OK,
          "graph calls");
    CHECK(cd_be_group_id(&be, id, sizeof id, why, sizeof why) == CD_OK &&
          cd_be_group_join(&be, id, 2, 1, why, sizeof why) == CD_OK, "group id and join");
    cd_group_t *g = cd_group_new(2);
    CHECK(cd_be_join_local_group(&be, g, 1) == CD_OK, "join_local_group");
    cd_group_free(g);
    cd_be_set_fail_hook(&be, some_hook);
    CHECK(g_hook_set == some_hook, "the hook reached the backend");
    for (int i = CALL_PREPARE; i < CALL_COUNT; i++)
        CHECK(g_calls[i] == 1, "slot %d called %d times, not once", i, g_calls[i]);
    CHECK(g_calls[CALL_UPLOAD] == 0, "an async upload is not also a plain one");
}

static void test_half_pairs(void)
{
    cd_backend_iface o = bare_iface;
    o.upload_async = fake_upload_async; /* without upload_wait */
    o.host_alloc = fake_host_alloc;     /* without host_free */
    o.graph_begin = fake_graph_begin;   /* without graph_replay */
    o.graph_end = fake_graph_end;
    o.allreduce_start = fake_start;     /* without allreduce_wait */
    o.allreduce_mean = fake_allreduce;
    cd_backend_t be = {.iface = &o};
    memset(g_calls, 0, sizeof g_calls);
    CHECK(!cd_be_supports(&be, CD_BE_ASYNC_UPLOAD) && !cd_be_supports(&be, CD_BE_GRAPHS) &&
          !cd_be_supports(&be, CD_BE_OVERLAPPED_ALLREDUCE), "half a pair is no feature");
    float x[3] = {1, 2, 3}, dst[3];
    cd_be_upload_async(&be, dst, x, sizeof x);
    CHECK(g_calls[CALL_UPLOAD] == 1 && g_calls[CALL_UPLOAD_ASYNC] == 0,
          "an upload nobody could wait for is a plain one");
    CHECK(cd_be_host_alloc(&be, 8) == NULL && g_calls[CALL_HOST_ALLOC] == 0, "pinned memory nobody could free");
    CHECK(cd_be_graph_begin(&be) == CD_ERR && g_calls[CALL_GRAPH_BEGIN] == 0, "a capture that could not replay");
    CHECK(cd_be_allreduce_start(&be, x, 3) == CD_OK && g_calls[CALL_START] == 0 && g_calls[CALL_ALLREDUCE] == 1,
          "an average nobody could wait for runs at once (allreduce_mean)");
}

static void test_cpu_caps(void)
{
    cd_backend_t *cpu = cd_backend_cpu_new(1);
    CHECK(cpu && cpu->iface->caps == 0, "the CPU backend: host memory, fp32 only (caps %#x)", cpu->iface->caps);
    CHECK(cd_be_supports(cpu, CD_BE_PREPARE_BATCH) && cd_be_supports(cpu, CD_BE_ASYNC_UPLOAD) &&
          !cd_be_supports(cpu, CD_BE_GRAPHS) && !cd_be_supports(cpu, CD_BE_DEVICE_GROUPS),
          "the CPU backend prepares batches and stages uploads, has no graphs and no device groups");
    char why[256] = "";
    CHECK(cd_be_group_join(cpu, "00", 2, 0, why, sizeof why) == CD_ERR && strstr(why, "cpu backend"),
          "a CPU backend cannot join a device group: %s", why);
    cd_group_t *g = cd_group_new(2);
    CHECK(cd_be_supports(cpu, CD_BE_LOCAL_GROUPS) && cd_be_join_local_group(cpu, g, 1) == CD_OK,
          "a CPU backend joins an in-process group: %s", cpu->err);
    CHECK(cd_be_join_local_group(cpu, g, 2) == CD_ERR && strstr(cpu->err, "rank 2"),
          "a rank outside the group is refused: %s", cpu->err);
    cd_backend_free(cpu);
    cd_group_free(g);
}

/* ---- input preparation ----------------------------------------------------------- */

enum { IC = 3, IH = 11, IW = 13, OH = 8, OW = 9, IN = 5 };

/* The batch through input_prep on be, with the mean given (or none), into out. */
static void prepare_on(cd_backend_t *be, const uint8_t *pixels, const uint8_t *const *images, const int *oy,
                       const int *ox, const uint8_t *mirror, const float *mean, float scale, float *out)
{
    cd_input_prep p;
    cd_input_stage s = {0};
    char err[256] = "";
    cd_input_prep_init(&p, be, IC, IH, IW, scale);
    size_t mean_bytes = sizeof(float) * IC * IH * IW, out_bytes = sizeof(float) * IN * IC * OH * OW;
    if (mean) {
        p.mean = be->iface->alloc(be, mean_bytes);
        be->iface->upload(be, p.mean, mean, mean_bytes);
        p.mean_host = cd_xmalloc(mean_bytes);
        memcpy(p.mean_host, mean, mean_bytes);
    }
    float *dst = be->iface->alloc(be, out_bytes);
    cd_input_batch b = {.n = IN, .pixels = pixels, .images = images, .oy = oy, .ox = ox, .mirror = mirror};
    CHECK(cd_input_stage_alloc(&p, &s, IN, err, sizeof err) == CD_OK, "stage: %s", err);
    cd_input_stage_upload(&p, &s, &b);
    CHECK(cd_input_prepare(&p, &s, OH, OW, dst, err, sizeof err) == CD_OK, "prepare: %s", err);
    be->iface->download(be, out, dst, out_bytes);
    be->iface->free(be, dst);
    cd_input_stage_free(&p, &s);
    cd_input_prep_free(&p);
}

static void test_host_path(void)
{
    cd_backend_t fake = {.iface = &bare_iface};
    cd_backend_t *cpu = cd_backend_cpu_new(2);
    static uint8_t pixels[IN * IC * IH * IW];
    const uint8_t *images[IN];
    int oy[IN], ox[IN];
    uint8_t mirror[IN];
    float mean[IC * IH * IW];
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (uint8_t)(cd_test_rand_u64() & 255);
    for (int i = 0; i < IN; i++) {
        images[i] = pixels + (size_t)i * IC * IH * IW;
        oy[i] = (int)(cd_test_rand_u64() % (IH - OH + 1));
        ox[i] = (int)(cd_test_rand_u64() % (IW - OW + 1));
        mirror[i] = (uint8_t)(i % 4); /* none, LR, UD, both */
    }
    cd_test_fill_uniform(mean, CD_ARRAY_LEN(mean), 20, 230);
    float scale = (float)cd_test_uniform(0.001, 2.0);
    enum { OUT = IN * IC * OH * OW };
    static float ref[OUT], got[OUT];
    struct {
        const char *what;
        const float *mean;
        const uint8_t *mirror;
        int separate;
    } cases[] = {
        {"mean, flips, one block", mean, mirror, 0},
        {"mean, flips, image by image", mean, mirror, 1},
        {"no mean, no flips", NULL, NULL, 0},
    };
    for (size_t k = 0; k < CD_ARRAY_LEN(cases); k++) {
        prepare_on(cpu, pixels, NULL, oy, ox, cases[k].mirror, cases[k].mean, scale, ref);
        memset(got, 0, sizeof got);
        memset(g_calls, 0, sizeof g_calls);
        prepare_on(&fake, cases[k].separate ? NULL : pixels, cases[k].separate ? images : NULL, oy, ox,
                   cases[k].mirror, cases[k].mean, scale, got);
        int bad = -1;
        for (int i = 0; i < OUT && bad < 0; i++)
            if (got[i] != ref[i])
                bad = i;
        CHECK(bad < 0, "%s: the host path differs from the CPU backend at %d: %.9g vs %.9g", cases[k].what, bad,
              bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : ref[bad]);
        CHECK(no_calls(), "%s: the host path reached no optional slot", cases[k].what);
    }
    cd_input_prep p;
    cd_input_stage s = {0};
    char err[256] = "";
    cd_input_prep_init(&p, &fake, IC, IH, IW, 1.0f);
    CHECK(cd_input_stage_alloc(&p, &s, 1, err, sizeof err) == CD_OK, "stage: %s", err);
    CHECK(cd_input_prepare(&p, &s, IH + 1, IW, got, err, sizeof err) == CD_ERR && strstr(err, "crop_size"),
          "an input larger than the images is refused: %s", err);
    cd_input_stage_free(&p, &s);
    cd_input_prep_free(&p);
    cd_backend_free(cpu);
}

static void test_mean(void)
{
    char dir[4096], path[4200], err[1024] = "";
    snprintf(dir, sizeof dir, "%s", cd_test_tmpdir());
    snprintf(path, sizeof path, "%s/mean.bin", dir);
    float mean[IC * IH * IW];
    cd_test_fill_uniform(mean, CD_ARRAY_LEN(mean), 10, 240);
    cd_backend_t fake = {.iface = &bare_iface};
    cd_input_prep p;

    cd_input_prep_init(&p, &fake, IC, IH, IW, 1.0f);
    CHECK(cd_input_mean_load(&p, dir, CD_MEAN_IMAGE, err, sizeof err) == CD_ERR && strstr(err, "mean.bin") &&
          strstr(err, "use_mean none"), "no mean file: %s", err);
    cd_input_prep_free(&p);

    CHECK(cd_mean_save(path, IC, IH, IW, 10, mean, err, sizeof err) == CD_OK, "mean.bin: %s", err);
    cd_input_prep_init(&p, &fake, IC, IH, IW, 1.0f);
    CHECK(cd_input_mean_load(&p, dir, CD_MEAN_NONE, err, sizeof err) == CD_OK && !p.mean && !p.mean_host,
          "use_mean none loads nothing");
    CHECK(cd_input_mean_load(&p, dir, CD_MEAN_IMAGE, err, sizeof err) == CD_OK && p.mean && p.mean_host &&
          !memcmp(p.mean_host, mean, sizeof mean) && !memcmp(p.mean, mean, sizeof mean),
          "the mean image on the host and uploaded: %s", err);
    cd_input_prep_free(&p);

    cd_input_prep_init(&p, &fake, IC, IH, IW, 1.0f);
    CHECK(cd_input_mean_load(&p, dir, CD_MEAN_PIXEL, err, sizeof err) == CD_OK, "pixel mean: %s", err);
    for (int c = 0; c < IC && p.mean_host; c++) {
        double sum = 0;
        for (int i = 0; i < IH * IW; i++)
            sum += mean[c * IH * IW + i];
        int constant = 1;
        for (int i = 1; i < IH * IW; i++)
            constant &= p.mean_host[c * IH * IW + i] == p.mean_host[c * IH * IW];
        CHECK(constant, "channel %d of the pixel mean is one value", c);
        CHECK_NEAR(p.mean_host[c * IH * IW], sum / (IH * IW), 1e-3, "the channel's average");
    }
    cd_input_prep_free(&p);

    cd_input_prep_init(&p, &fake, IC, IH + 1, IW, 1.0f);
    CHECK(cd_input_mean_load(&p, dir, CD_MEAN_IMAGE, err, sizeof err) == CD_ERR && strstr(err, path) &&
          strstr(err, "another dataset") && strstr(err, "recreate the dataset") && !p.mean,
          "another dataset's mean is refused, naming the file: %s", err);
    cd_input_prep_free(&p);
}

int main(void)
{
    cd_test_init("test_backend_iface");
    test_bare();
    test_full();
    test_half_pairs();
    test_cpu_caps();
    test_host_path();
    test_mean();
    return cd_test_finish();
}
