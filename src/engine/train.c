/*
 * The training task: a dataset job's splits, a network's train and val stages sharing
 * parameters, the solver, snapshots and exact resume, reported as JSON lines.
 *
 * Iteration i (0-based) trains on batches i*iter_size .. i*iter_size + iter_size-1 of
 * the training stream; the stream, the crops, the mirroring and dropout are pure
 * functions of the seed and those numbers, so a run resumed from the snapshot taken
 * after iteration k repeats exactly what the uninterrupted run did from k on.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cdigits/backend_select.h"
#include "cdigits/dataset.h"
#include "cdigits/group.h"
#include "cdigits/infer.h"
#include "cdigits/jobdir.h"
#include "cdigits/jsonl.h"
#include "cdigits/loader.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "engine_internal.h"
#include "grad_reduce.h"
#include "input_prep.h"
#include "tfevents.h"

static volatile sig_atomic_t g_stop;

/* A failed device call: say which layer ran it before the backend aborts. */
static void device_failed(cd_backend_t *be, const char *message)
{
    int backward = 0;
    const char *layer = cd_net_running(&backward);
    if (layer)
        cd_jsonl_error("%s in the %s pass of layer %s", message, backward ? "backward" : "forward", layer);
    else
        cd_jsonl_error("%s", message);
}

void cd_train_request_stop(void) { g_stop = 1; }

/* One batch staged on the backend: its images with their crops and flips, and its
 * labels. Two of them, so the next batch can be uploaded while this one trains. */
typedef struct staging {
    cd_input_stage in;
    float *labels;
} staging;

typedef struct trainer {
    const cd_train_config *c;
    cd_backend_t *be;
    cd_db_t *train_db, *val_db, *test_db;
    cd_db_t *train_labels, *val_labels, *test_labels; /* a generic dataset's label dbs */
    int task;              /* enum cd_dataset_task, from the dataset's stats.json */
    cd_label_shape label;  /* one image's label in a batch */
    int classes;
    int c_in, h_in, w_in;  /* the images (mixed: the largest height and width) */
    int mixed;             /* images of varying size (cd_db_mixed): batch 1, the nets
                            * re-planned for each image (cd_net_reshape) */
    cd_net *train, *val, *val_tail, *test_tail; /* tails: the last, partial val and test batches */
    int train_batch, val_batch;
    int crop, flip; /* flip: enum cd_flip bits drawn per training image */
    cd_input_prep prep;    /* mean, scale, crops and flips into the Data layer's top */
    int iter_size;         /* batch accumulation actually used (may grow on OOM) */
    int rank, nranks;      /* data-parallel replica (0 reports, validates, snapshots) */
    int gpu_ranks;         /* replicas are GPUs, this one on `gpu` */
    int gpu;
    cd_group_t *group;
    staging st[2];
    int free_slot;         /* the staging slot validation may use: not the one holding the
                            * next training batch, uploaded ahead */
    int group_error;       /* the error is the group's (every replica finds the same): rank 0
                            * says it once, without a replica's name */
    int loader_threads;
    int loader_auto;       /* loader_threads not given: add threads while data-bound */
    int cores;
    char advice[64];       /* the last limit reported */
    char advice_next[64];  /* a different limit seen in the last window(s), not yet */
    int advice_seen;       /* reported: how many windows in a row */
    float *acc_scalars; /* device: correct, count */
    long max_iter, iters_per_epoch;
    long snapshot_every, val_every;
    int snapshots;         /* 0: none at all, not even the last ("snapshots": false) */
    uint64_t seed;
} trainer;

static double epoch_of(const trainer *t, long iter)
{
    /* DIGITS: epoch = iteration / iterations per epoch, so a run ends at its epoch count */
    if (t->iters_per_epoch > 0)
        return (double)iter / (double)t->iters_per_epoch;
    return (double)iter * t->train_batch * t->nranks * t->iter_size / (double)cd_db_count(t->train_db);
}

/* Rank 0's TensorBoard events file in the job folder (tfevents.h), opened by setup and
 * closed by teardown; the other replicas' threads have none, as they print no metric. */
static _Thread_local cd_tfevents_t *t_events;

/* A metric line, and the same scalar as "<phase>/<name>" at step iter in the events
 * file, which evaluate flushes after each validation (and its close at the end). */
static void metric(const char *phase, const char *name, double value, double epoch, long iter)
{
    cd_jsonl(json_pack("{s:s, s:s, s:s, s:f, s:f, s:I}", "type", "metric", "phase", phase, "name",
                       name, "value", value, "epoch", epoch, "iteration", (json_int_t)iter));
    if (t_events) {
        char tag[128];
        snprintf(tag, sizeof tag, "%s/%s", phase, name);
        cd_tfevents_scalar(t_events, tag, iter, value);
    }
}

/* The Data layer of a stage (for transform_param), or NULL. */
static const cd_pt_node *data_layer_def(const cd_net *net)
{
    for (int i = 0; i < net->nlayers; i++)
        if (net->layers[i]->def && (net->layers[i]->type->flags & CD_LAYER_DATA))
            return net->layers[i]->def;
    return NULL;
}

/* The stage's images (which 0) or labels (which 1): a top of its Data layer(s). */
static cd_blob *data_top(const cd_net *net, int which)
{
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (!l->def || strcmp(l->type->name, "Data") != 0)
            continue;
        for (int t = 0; t < l->ntop; t++)
            if (cd_data_top_is_label(l, t) == (which == 1))
                return l->top[t];
    }
    return NULL;
}

/* The first loss layer, whose bottoms are the class scores and the labels. */
static cd_layer *loss_layer(const cd_net *net)
{
    for (int i = 0; i < net->nlayers; i++)
        if (net->layers[i]->type->flags & CD_LAYER_LOSS)
            return net->layers[i];
    return NULL;
}

/* Upload one loaded batch into a staging slot; queued on the copy stream where the
 * backend has one (then it overlaps the step running now). b stays the loader's until
 * the upload is waited for (prepare, cd_input_stage_wait). */
static void stage(trainer *t, staging *st, const cd_batch *b)
{
    cd_input_batch in = {.n = b->n, .h = b->h, .w = b->w, .pixels = b->pixels, .oy = b->oy, .ox = b->ox,
                         .mirror = b->mirror, .aug = b->aug};
    cd_input_stage_upload(&t->prep, &st->in, &in);
    cd_be_upload_async(t->be, st->labels, b->labels, (size_t)b->n * b->label_floats * sizeof(float));
}

/* Crop, flip, subtract the mean and scale into the net's data; the labels into its
 * label. Waits for the slot's uploads. */
static int prepare(trainer *t, cd_net *net, const staging *st, char *err, size_t errlen)
{
    cd_blob *data = data_top(net, 0), *label = data_top(net, 1);
    if (t->mixed && !t->crop && (data->dims[2] != st->in.h || data->dims[3] != st->in.w)) {
        /* an image of another size: the net re-planned for it, in the memory it has
         * (allocated for the largest) */
        int lh = t->label.spatial ? st->in.h : 0, lw = t->label.spatial ? st->in.w : 0;
        if (cd_net_reshape(net, st->in.h, st->in.w, lh, lw, err, errlen) != CD_OK)
            return CD_ERR;
    }
    if (cd_input_prepare(&t->prep, &st->in, data->dims[2], data->dims[3], data->data, err, errlen) != CD_OK)
        return CD_ERR;
    if (label)
        t->be->iface->copy(t->be, label->data, st->labels, label->count * sizeof(float));
    return CD_OK;
}

/* A batch through the free staging slot, synchronously (validation). */
static int feed(trainer *t, cd_net *net, const cd_batch *b, char *err, size_t errlen)
{
    stage(t, &t->st[t->free_slot], b);
    return prepare(t, net, &t->st[t->free_slot], err, errlen);
}

static cd_net *build_stage(trainer *t, const char *stage, int batch, char *err, size_t errlen)
{
    cd_net_opts opts = {
        .stage = stage, .batch = batch, .input_c = t->c_in, .input_h = t->h_in, .input_w = t->w_in,
        .crop = t->c->crop_size, .num_classes = t->classes, .seed = t->seed,
    };
    if (t->train_labels)
        opts.label_c = t->label.c, opts.label_h = t->label.h, opts.label_w = t->label.w;
    return cd_net_load(t->c->network, &opts, err, errlen);
}

/* The newest snapshot in the job dir with both files present; 0 if none. */
static long newest_snapshot(const char *dir)
{
    jobdir_snapshot s;
    return jobdir_snapshot_newest(dir, JOBDIR_ITER_ONLY | JOBDIR_NEED_STATE, &s) ? (long)s.number : 0;
}

static int save_snapshot(trainer *t, long iter, char *err, size_t errlen)
{
    char w[4200], s[4200];
    jobdir_snapshot_path(t->c->job_dir, iter, JOBDIR_WEIGHTS, w, sizeof w);
    jobdir_snapshot_path(t->c->job_dir, iter, JOBDIR_STATE, s, sizeof s);
    /* The epoch goes last and an older one first: a .epoch beside a snapshot was
     * written after that very snapshot, so a crash leaves at worst a snapshot without
     * its epoch (readers then call it unknown), never an epoch for a missing or older
     * snapshot. A weights file without its state is never taken for a resume. */
    char e[4200];
    jobdir_snapshot_path(t->c->job_dir, iter, JOBDIR_EPOCH, e, sizeof e);
    if (unlink(e) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the old %s: %s; check the job folder's permissions", e, strerror(errno));
        return CD_ERR;
    }
    if (cd_snapshot_save_weights(t->train, w, err, errlen) != CD_OK ||
        cd_snapshot_save_state(t->train, iter, s, err, errlen) != CD_OK)
        return CD_ERR;
    if (jobdir_snapshot_epoch_write(t->c->job_dir, iter, epoch_of(t, iter)) != CD_OK) {
        snprintf(err, errlen, "cannot write %s: %s; free space on the job folder's disk and resume", e, strerror(errno));
        return CD_ERR;
    }
    char file[64];
    jobdir_snapshot_name(iter, JOBDIR_WEIGHTS, file, sizeof file);
    cd_jsonl(json_pack("{s:s, s:f, s:I, s:s}", "type", "snapshot", "epoch", epoch_of(t, iter),
                       "iteration", (json_int_t)iter, "file", file));
    return CD_OK;
}

/* Accuracy (top-k) of the scores against the labels, accumulated into *correct. */
static void count_correct(trainer *t, cd_net *net, int top_k, double *correct)
{
    cd_layer *l = loss_layer(net);
    if (!l || l->nbottom < 2)
        return;
    cd_blob *scores = l->bottom[0];
    int outer = scores->dims[0], channels = scores->ndim > 1 ? scores->dims[1] : 1;
    int inner = (int)(scores->count / ((size_t)outer * channels));
    float host[2];
    t->be->iface->accuracy(t->be, outer, channels, inner, scores->data, l->bottom[1]->data, top_k,
                           0, 0, t->acc_scalars, t->acc_scalars + 1);
    t->be->iface->download(t->be, host, t->acc_scalars, sizeof host);
    *correct += host[0];
}

/* The val stage's net for a last batch of n images, or NULL. */
static cd_net *tail_net(trainer *t, int n)
{
    cd_net *tails[] = {t->val_tail, t->test_tail};
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++)
        if (tails[i] && data_top(tails[i], 0)->dims[0] == n)
            return tails[i];
    return NULL;
}

/* What a validation pass adds up beyond the loss, by task: correct top-1/top-5 counts
 * (classification), a confusion matrix of pixels (segmentation), absolute errors of
 * the targets (regression). */
typedef struct val_sums {
    double top1, top5;
    cd_seg_confusion confusion; /* k 0 until the first batch gives the class count */
    uint8_t *mask, *label;      /* one image's predicted and true classes */
    size_t plane_cap;           /* pixels mask and label hold */
    double abs_err, values;
    double detections[3];       /* detection: true positives, false positives, missed boxes */
    const cd_layer *map_layer;  /* the first mAP layer met, whose tops name the measures */
    float *host;         /* scores and labels copied down */
    size_t host_floats;
} val_sums;

/* The two bottoms of the loss layer on the host: a at v->host, b right after it. */
static void host_copy(trainer *t, val_sums *v, const cd_blob *a, const cd_blob *b)
{
    if (a->count + b->count > v->host_floats) {
        v->host_floats = a->count + b->count;
        v->host = cd_xrealloc(v->host, v->host_floats * sizeof(float));
    }
    t->be->iface->download(t->be, v->host, a->data, a->count * sizeof(float));
    t->be->iface->download(t->be, v->host + a->count, b->data, b->count * sizeof(float));
}

/* Pixels of the loss layer's scores (n, classes, h, w) against its labels (n, 1, h, w):
 * each pixel's argmax counted against its label (infer.h's confusion, as inference
 * counts); labels outside the classes (255, the ignore label) are not counted. */
static void count_pixels(trainer *t, cd_net *net, val_sums *v)
{
    cd_layer *l = loss_layer(net);
    if (!l || l->nbottom < 2 || l->bottom[0]->ndim != 4)
        return;
    const cd_blob *sb = l->bottom[0], *lb = l->bottom[1];
    int n = sb->dims[0], k = sb->dims[1], h = sb->dims[2], w = sb->dims[3];
    size_t plane = (size_t)h * w;
    if (lb->count != (size_t)n * plane || k < 1 || k > CD_SEG_MAX_CLASSES || (v->confusion.k && k != v->confusion.k))
        return;
    if (!v->confusion.k)
        cd_seg_confusion_init(&v->confusion, k);
    if (plane > v->plane_cap) { /* images of varying size: room for the largest so far */
        v->mask = cd_xrealloc(v->mask, plane);
        v->label = cd_xrealloc(v->label, plane);
        v->plane_cap = plane;
    }
    host_copy(t, v, sb, lb);
    const float *labels = v->host + sb->count;
    for (int i = 0; i < n; i++) {
        char err[128];
        if (cd_seg_argmax(v->host + (size_t)i * k * plane, k, h, w, v->mask, err, sizeof err) != CD_OK)
            return;
        for (size_t p = 0; p < plane; p++) {
            float want = labels[(size_t)i * plane + p];
            v->label[p] = want >= 0 && want < (float)k ? (uint8_t)want : CD_SEG_IGNORE;
        }
        cd_seg_confusion_add(&v->confusion, v->label, v->mask, plane);
    }
}

/* |prediction - target| of the loss layer's two bottoms, summed. */
static void count_errors(trainer *t, cd_net *net, val_sums *v)
{
    cd_layer *l = loss_layer(net);
    if (!l || l->nbottom < 2 || l->bottom[0]->count != l->bottom[1]->count)
        return;
    host_copy(t, v, l->bottom[0], l->bottom[1]);
    const float *pred = v->host, *want = v->host + l->bottom[0]->count;
    for (size_t i = 0; i < l->bottom[0]->count; i++)
        v->abs_err += fabs((double)pred[i] - want[i]);
    v->values += (double)l->bottom[0]->count;
}

/* The marked lists (ScoreDetections' tops) below the net's mAP layers, counted over the
 * whole pass as mean_ap.py's calcmAP counts one batch. */
static void count_detections(trainer *t, cd_net *net, val_sums *v)
{
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (!cd_detect_is_map_layer(l))
            continue;
        const cd_blob *b = l->bottom[0];
        if (b->count > v->host_floats) {
            v->host_floats = b->count;
            v->host = cd_xrealloc(v->host, v->host_floats * sizeof(float));
        }
        t->be->iface->download(t->be, v->host, b->data, b->count * sizeof(float));
        cd_detect_count_scored(v->host, b->count / 5, v->detections);
        if (!v->map_layer)
            v->map_layer = l;
    }
}

/* mAP, precision and recall (percent, DetectNet's) under the mAP layer's top names. */
static void report_detections(const val_sums *v, const char *phase, double e, long iter)
{
    if (!v->map_layer) {
        cd_jsonl_log("warning", "%s: no precision, recall or mAP: the val stage has no Python layer of module "
                     "caffe.layers.detectnet.mean_ap layer mAP; add DetectNet's cluster, score and mAP layers "
                     "(models/detectnet.prototxt)", phase);
        return;
    }
    double out[3];
    cd_detect_map(v->detections, out);
    for (int k = 0; k < v->map_layer->ntop && k < 3; k++)
        metric(phase, v->map_layer->top[k]->name, out[k], e, iter);
}

static void add_batch(trainer *t, cd_net *net, val_sums *v)
{
    switch (t->task) {
    case CD_TASK_CLASSIFICATION:
        count_correct(t, net, 1, &v->top1);
        if (t->classes > 5)
            count_correct(t, net, 5, &v->top5);
        break;
    case CD_TASK_SEGMENTATION: count_pixels(t, net, v); break;
    case CD_TASK_REGRESSION: count_errors(t, net, v); break;
    case CD_TASK_DETECTION: count_detections(t, net, v); break;
    default: break; /* pairs: the contrastive loss says it */
    }
}

/* Pixel accuracy, mean IoU over the classes that occur (in the labels or the
 * predictions) and each such class's IoU as iou_class_K (K its line in labels.txt);
 * nothing, and a warning, when no pixel could be counted. */
static void report_pixels(const val_sums *v, const char *phase, double e, long iter)
{
    const cd_seg_confusion *c = &v->confusion;
    if (!c->k || cd_seg_mean_iou(c) < 0) {
        cd_jsonl_log("warning", "%s: no pixel was counted for accuracy and IoU: the loss layer's bottoms are not "
                     "scores (N, classes, H, W) against labels (N, 1, H, W) of those classes", phase);
        return;
    }
    for (int k = 0; k < c->k; k++)
        if (cd_seg_iou(c, k) >= 0) {
            char name[32];
            snprintf(name, sizeof name, "iou_class_%d", k);
            metric(phase, name, cd_seg_iou(c, k), e, iter);
        }
    metric(phase, "accuracy", cd_seg_pixel_accuracy(c), e, iter);
    metric(phase, "mean_iou", cd_seg_mean_iou(c), e, iter);
}

/* One pass over a split with the val stage (the val split, or the test split after
 * training); reports loss and the task's measures under `phase`. CD_ERR on a read
 * error. */
static int evaluate(trainer *t, cd_db_t *db, cd_db_t *labels, const char *phase, long iter,
                    double *loss_out, char *err, size_t errlen)
{
    cd_loader_opts lo = {.db = db, .label_db = labels, .batch = t->val_batch, .crop = t->crop,
                         .wrap = 0, .seed = t->seed, .threads = 1, .ring = 3};
    cd_loader_t *ld = cd_loader_start(&lo, err, errlen);
    if (!ld)
        return CD_ERR;
    double loss = 0;
    val_sums v = {0};
    size_t seen = 0;
    int rc = CD_ERR;
    const cd_batch *b;
    while ((b = cd_loader_next(ld, NULL))) {
        /* the last, partial batch runs through a net of its own size (make_nets built it),
         * so every image counts once */
        cd_net *net = b->n == t->val_batch ? t->val : tail_net(t, b->n);
        if (!net) {
            snprintf(err, errlen, "%s data: a batch of %d images has no net (internal error)", phase, b->n);
            cd_loader_release(ld, b);
            goto out;
        }
        if (feed(t, net, b, err, errlen) != CD_OK) {
            cd_loader_release(ld, b);
            goto out;
        }
        float l = cd_net_forward(net);
        loss += (double)l * b->n;
        add_batch(t, net, &v);
        seen += (size_t)b->n;
        cd_loader_release(ld, b);
    }
    const char *lerr = cd_loader_error(ld);
    if (lerr) {
        snprintf(err, errlen, "%s data: %s", phase, lerr);
        goto out;
    }
    double e = epoch_of(t, iter);
    metric(phase, "loss", loss / (double)seen, e, iter);
    if (loss_out)
        *loss_out = loss / (double)seen;
    if (t->task == CD_TASK_CLASSIFICATION) {
        metric(phase, "accuracy", v.top1 / (double)seen, e, iter);
        if (t->classes > 5)
            metric(phase, "accuracy_top5", v.top5 / (double)seen, e, iter);
    } else if (t->task == CD_TASK_SEGMENTATION) {
        report_pixels(&v, phase, e, iter);
    } else if (t->task == CD_TASK_REGRESSION && v.values > 0) {
        metric(phase, "mae", v.abs_err / v.values, e, iter);
    } else if (t->task == CD_TASK_DETECTION) {
        report_detections(&v, phase, e, iter);
    }
    if (t_events) /* once per validation: TensorBoard sees it while training goes on */
        cd_tfevents_flush(t_events);
    rc = CD_OK;
out:
    cd_loader_stop(ld);
    cd_seg_confusion_free(&v.confusion);
    free(v.mask);
    free(v.label);
    free(v.host);
    return rc;
}

/* The split's db (labels: its label db) when the file exists; rank 0 alone opens the
 * val and test splits (validation is rank 0's). */
static int open_split(trainer *t, int split, int labels, cd_db_t **db, char *err, size_t errlen)
{
    char path[4200];
    jobdir_path(t->c->dataset_dir, (labels ? JOBDIR_TRAIN_LABELS_DB : JOBDIR_TRAIN_DB) + split, path, sizeof path);
    if ((split != CD_SPLIT_TRAIN && t->rank != 0) || access(path, R_OK) != 0)
        return CD_OK;
    return (*db = cd_db_open(path, err, errlen)) ? CD_OK : CD_ERR;
}

/* The dataset's task from its stats.json (classification when it names none). */
static int read_task(trainer *t, const char *path, char *err, size_t errlen)
{
    json_error_t je;
    json_t *stats = json_load_file(path, 0, &je);
    if (!stats) {
        snprintf(err, errlen, "%s: %s; create the dataset again", path, je.text);
        return CD_ERR;
    }
    const char *name = cd_dataset_task_named(stats, NULL, &t->task);
    if (t->task < 0)
        snprintf(err, errlen, "%s: task \"%s\" is not one this worker trains; update cdigits", path, name);
    json_decref(stats);
    return t->task < 0 ? CD_ERR : CD_OK;
}

static int open_dataset(trainer *t, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    char path[4200];
    jobdir_path(c->dataset_dir, JOBDIR_STATS_JSON, path, sizeof path);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "the dataset in %s is not complete (no stats.json); wait for the "
                 "dataset job to finish or create it again", c->dataset_dir);
        return CD_ERR;
    }
    t->label = (cd_label_shape){1, 1, 1, 0};
    if (read_task(t, path, err, errlen) != CD_OK)
        return CD_ERR;
    jobdir_path(c->dataset_dir, JOBDIR_TRAIN_DB, path, sizeof path);
    if (!(t->train_db = cd_db_open(path, err, errlen)))
        return CD_ERR;
    if (open_split(t, CD_SPLIT_VAL, 0, &t->val_db, err, errlen) != CD_OK ||
        open_split(t, CD_SPLIT_TEST, 0, &t->test_db, err, errlen) != CD_OK)
        return CD_ERR;
    if (t->task != CD_TASK_CLASSIFICATION) {
        cd_db_t **labels[] = {&t->train_labels, &t->val_labels, &t->test_labels};
        cd_db_t *images[] = {t->train_db, t->val_db, t->test_db};
        for (int s = 0; s < CD_SPLIT_COUNT; s++) {
            if (!images[s])
                continue;
            if (open_split(t, s, 1, labels[s], err, errlen) != CD_OK)
                return CD_ERR;
            cd_label_shape shape;
            if (!*labels[s]) {
                snprintf(err, errlen, "the %s dataset in %s has no %s; create the dataset again",
                         cd_dataset_task_name(t->task), c->dataset_dir,
                         jobdir_name(JOBDIR_TRAIN_LABELS_DB + s));
                return CD_ERR;
            }
            if (cd_label_shape_of(images[s], *labels[s], c->crop_size, &shape, err, errlen) != CD_OK)
                return CD_ERR;
            if (s == CD_SPLIT_TRAIN)
                t->label = shape;
        }
    }
    t->mixed = cd_db_mixed(t->train_db);
    t->c_in = cd_db_channels(t->train_db);
    t->h_in = cd_db_height(t->train_db);
    t->w_in = cd_db_width(t->train_db);
    cd_db_t *others[] = {t->val_db, t->test_db};
    for (size_t s = 0; t->mixed && s < CD_ARRAY_LEN(others); s++) {
        /* room for the largest image of any split */
        if (others[s] && cd_db_height(others[s]) > t->h_in)
            t->h_in = cd_db_height(others[s]);
        if (others[s] && cd_db_width(others[s]) > t->w_in)
            t->w_in = cd_db_width(others[s]);
    }
    if (t->mixed && t->label.spatial)
        cd_label_shape_for(t->h_in, t->w_in, t->label.c, t->h_in, t->w_in, c->crop_size, &t->label);
    t->classes = cd_db_num_classes(t->train_db);
    jobdir_path(c->dataset_dir, JOBDIR_LABELS, path, sizeof path);
    char **names = NULL;
    int n = 0;
    if (cd_labels_load(path, &names, &n) == CD_OK) {
        if (n > t->classes)
            t->classes = n;
        cd_labels_free(names, n);
    }
    if (t->task == CD_TASK_REGRESSION) /* an InnerProduct without num_output gives the targets */
        t->classes = (int)cd_label_size(&t->label);
    else if (t->task == CD_TASK_SEGMENTATION && t->train_labels && cd_db_num_classes(t->train_labels) > t->classes)
        t->classes = cd_db_num_classes(t->train_labels);
    if (t->task != CD_TASK_REGRESSION && t->classes < 2) {
        snprintf(err, errlen, "the dataset has %d class; training needs at least 2", t->classes);
        return CD_ERR;
    }
    return CD_OK;
}

static void note_log(const char *line) { cd_jsonl_log("info", "%s", line); }

/* The backend request of the job (backend, its first GPU, threads, cpu_memory_mb). */
static cd_backend_request backend_request(const cd_train_config *c, int kind, int threads)
{
    return (cd_backend_request){.kind = kind, .gpu = c->ngpus > 0 ? c->gpus[0] : 0, .threads = threads,
                                .cpu_memory = c->cpu_memory_mb > 0 ? (size_t)(c->cpu_memory_mb * 1048576.0) : 0,
                                .task = "training", .note = note_log};
}

/* A CPU replica's threads: the cores divided among the ranks on this host, and no more
 * than this process may run on (mpirun and srun may bind a rank to some cores). */
static int rank_threads(const cd_group_t *g)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(cores / (g->local_size > 0 ? g->local_size : 1));
    cpu_set_t set;
    if (cd_group_rank(g) >= 0 && sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < threads)
        threads = CPU_COUNT(&set);
    return threads > 0 ? threads : 1;
}

static int choose_backend(trainer *t, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    if (t->group && t->gpu_ranks) {
        /* one replica per GPU: its own CUDA backend, the gradients averaged by NCCL */
        char why[512] = "";
        cd_backend_request req = backend_request(c, CD_BACKEND_CUDA, 0);
        req.gpu = t->gpu;
        t->be = cd_backend_select(&req, why, sizeof why);
        if (!t->be) {
            snprintf(err, errlen, "replica %d cannot train: %s", t->rank, why);
            return CD_ERR;
        }
        char id[CD_BE_GROUP_ID_LEN] = "";
        if (t->rank == 0 && cd_be_group_id(t->be, id, sizeof id, why, sizeof why) != CD_OK)
            snprintf(id, sizeof id, "!%s", why);
        cd_group_broadcast_bytes(t->group, t->rank, id, sizeof id);
        if (id[0] == '!' || cd_be_group_join(t->be, id, t->nranks, t->rank, why, sizeof why) != CD_OK) {
            snprintf(err, errlen, "replica %d cannot join the group of GPU replicas: %s", t->rank,
                     id[0] == '!' ? id + 1 : why);
            return CD_ERR;
        }
    } else if (t->group && c->backend == CD_BACKEND_CUDA && cd_backend_gpu_count() > 0) {
        /* replicas on GPUs are one per GPU listed: unjoined backends on one GPU would
         * train apart */
        snprintf(err, errlen, "%d replica%s on GPUs need%s as many usable GPUs listed in \"gpus\", one "
                 "each (%d listed, %d usable here); list them, or use backend cpu for CPU replicas",
                 t->nranks, t->nranks == 1 ? "" : "s", t->nranks == 1 ? "s" : "", c->ngpus,
                 cd_backend_gpu_count());
        return CD_ERR;
    } else if (t->group && c->backend != CD_BACKEND_CUDA) {
        /* replicas in one process: CPU backends sharing the cores, joined in a group
         * (a job that asked for a GPU on a machine without one fails below) */
        int threads = c->threads > 0 ? c->threads : rank_threads(t->group);
        cd_backend_request req = backend_request(c, CD_BACKEND_CPU, threads > 0 ? threads : 1);
        char why[256] = "";
        t->be = cd_backend_select(&req, why, sizeof why);
        if (!t->be) {
            snprintf(err, errlen, "cannot start the CPU backend of replica %d: %s", t->rank, why);
            return CD_ERR;
        }
        if (cd_be_join_local_group(t->be, t->group, t->rank) != CD_OK) {
            snprintf(err, errlen, "replica %d cannot join the group of CPU replicas: %s", t->rank, t->be->err);
            return CD_ERR;
        }
    }
    if (!t->be) {
        cd_backend_request req = backend_request(c, c->backend, c->threads);
        char why[256] = "";
        if (!(t->be = cd_backend_select(&req, why, sizeof why))) {
            if (c->backend == CD_BACKEND_CUDA)
                snprintf(err, errlen, "a GPU was asked for but %s", why);
            else
                snprintf(err, errlen, "%s", why);
            return CD_ERR;
        }
    }
    char name[64];
    if (t->be->device >= 0 && (t->be->iface->caps & CD_BE_CAP_DEVICE))
        snprintf(name, sizeof name, "%s:%d", t->be->iface->name, t->be->device);
    else
        snprintf(name, sizeof name, "%s (%ld cores)", t->be->iface->name, sysconf(_SC_NPROCESSORS_ONLN));
    cd_jsonl(json_pack("{s:s, s:s, s:s, s:i}", "type", "device", "backend", t->be->iface->name,
                       "name", name, "ranks", t->nranks));
    return CD_OK;
}

static void free_nets(trainer *t)
{
    for (int i = 0; i < 2 && t->be; i++) {
        staging *st = &t->st[i];
        cd_input_stage_free(&t->prep, &st->in);
        t->be->iface->free(t->be, st->labels);
        st->labels = NULL;
    }
    cd_net_free(t->test_tail);
    cd_net_free(t->val_tail);
    cd_net_free(t->val);
    cd_net_free(t->train);
    t->test_tail = t->val_tail = t->val = t->train = NULL;
}

/* The net for a split's last, partial batch (none when the batch divides the split or a
 * tail of that size exists), built with the others so the batch search counts its memory. */
static int make_tail(trainer *t, cd_db_t *db, cd_net **tail, int *oom, char *err, size_t errlen)
{
    int rem = db ? (int)(cd_db_count(db) % (size_t)t->val_batch) : 0;
    if (!rem || tail_net(t, rem))
        return CD_OK;
    if (!(*tail = build_stage(t, "val", rem, err, errlen)))
        return CD_ERR;
    if (cd_net_alloc(*tail, t->be, t->train, err, errlen) != CD_OK) {
        *oom = (*tail)->out_of_memory;
        return CD_ERR;
    }
    return CD_OK;
}

/* Two staging slots for the larger of the train and val batches (uploads overlap). */
static int alloc_staging(trainer *t, int *oom, char *err, size_t errlen)
{
    int batch = t->train_batch > t->val_batch ? t->train_batch : t->val_batch;
    const cd_backend_iface *o = t->be->iface;
    for (int i = 0; i < 2; i++) {
        staging *st = &t->st[i];
        if (cd_input_stage_alloc(&t->prep, &st->in, batch, err, errlen) != CD_OK) {
            *oom = 1;
            return CD_ERR;
        }
        if (!(st->labels = o->alloc(t->be, (size_t)batch * cd_label_size(&t->label) * sizeof(float)))) {
            *oom = 1;
            snprintf(err, errlen, "out of %s memory for the labels of a batch of %d; lower the batch size",
                     o->name, batch);
            return CD_ERR;
        }
    }
    return CD_OK;
}

/* Build and allocate everything whose size follows the batch: the train and val stages,
 * the val and test tails, the staging slots; with a batch (0: the network's). Returns
 * CD_OK, or CD_ERR with *oom set when an allocation failed (a smaller batch may fit). */
static int make_nets(trainer *t, int batch, int *oom, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    *oom = 0;
    if (!(t->train = build_stage(t, "train", batch, err, errlen)))
        return CD_ERR;
    cd_blob *data = data_top(t->train, 0);
    if (!data || !loss_layer(t->train)) {
        snprintf(err, errlen, "%s: the train stage needs a Data layer (tops data and label) and a "
                 "loss layer", c->network);
        return CD_ERR;
    }
    t->train_batch = data->dims[0];
    const cd_pt_node *tp = cd_pt_get(data_layer_def(t->train), "transform_param");
    t->crop = data->dims[2] != t->h_in || data->dims[3] != t->w_in ? data->dims[2] : 0;
    int mirror = c->mirror >= 0 ? c->mirror : (tp && cd_pt_bool(tp, "mirror", 0));
    t->flip = (mirror ? CD_FLIP_LR : 0) | c->flip;
    if (t->task == CD_TASK_DETECTION && (t->flip || t->crop || cd_aug_changes_pixels(&c->aug))) {
        snprintf(err, errlen, "%s: the boxes of a detection dataset do not move with the data layer's crops, "
                 "flips and augmentations; turn them off and augment in DetectNetTransformation "
                 "(detectnet_augmentation_param)", c->network);
        return CD_ERR;
    }
    t->prep.scale = tp ? (float)cd_pt_float(tp, "scale", 1.0) : 1.0f;
    if (cd_net_alloc(t->train, t->be, NULL, err, errlen) != CD_OK) {
        *oom = t->train->out_of_memory;
        return CD_ERR;
    }
    if (t->val_db) {
        if (!(t->val = build_stage(t, "val", batch, err, errlen)))
            return CD_ERR;
        cd_blob *vdata = data_top(t->val, 0);
        if (!vdata || !loss_layer(t->val)) {
            snprintf(err, errlen, "%s: the val stage needs a Data layer and a loss layer", c->network);
            return CD_ERR;
        }
        t->val_batch = vdata->dims[0];
        if (cd_net_alloc(t->val, t->be, t->train, err, errlen) != CD_OK) {
            *oom = t->val->out_of_memory;
            return CD_ERR;
        }
        if (make_tail(t, t->val_db, &t->val_tail, oom, err, errlen) != CD_OK ||
            make_tail(t, t->test_db, &t->test_tail, oom, err, errlen) != CD_OK)
            return CD_ERR;
    }
    return alloc_staging(t, oom, err, errlen);
}

/* One try of the batch search: 1 if the nets at `batch` fit on every replica (they stay
 * built), 0 if some replica ran out of memory (freed), -1 on another error (in err).
 * With `reserve`, a fit must also leave that many bytes of the device free. Every
 * replica tries the same batches in the same order, agreeing on each answer. */
static int try_batch(trainer *t, int batch, size_t reserve, char *err, size_t errlen)
{
    free_nets(t); /* the last try's nets */
    int oom = 0, ok = make_nets(t, batch, &oom, err, errlen) == CD_OK;
    if (!ok && !oom) {
        free_nets(t);
        return -1;
    }
    size_t free_b = 0, total_b = 0;
    if (ok && reserve && cd_be_mem_info(t->be, &free_b, &total_b) == CD_OK && free_b < reserve)
        ok = 0;
    if (t->group)
        ok = (int)cd_group_min(t->group, t->rank, ok);
    if (!ok)
        free_nets(t);
    return ok;
}

/* The largest batch whose blobs stay within INT_MAX elements (cuDNN and cuBLAS count a
 * tensor's elements in an int), from net built at `batch`. */
static int blob_batch_limit(const cd_net *net, int batch)
{
    size_t per_image = 1;
    for (int i = 0; i < net->nblobs; i++) {
        size_t n = net->blobs[i]->count / (size_t)(batch > 0 ? batch : 1);
        per_image = n > per_image ? n : per_image;
    }
    return (int)((size_t)INT_MAX / per_image);
}

/*
 * batch_size auto: the largest batch that fits, `effective` (the network's batch times
 * the accumulation asked, per replica) tried first. If it fits and the backend can say
 * how much memory it has (a GPU, or a CPU under cpu_memory_mb), the batch doubles while
 * it fits up to a ceiling (the training images per replica, at most 4096); if it does
 * not, it halves until one fits. Bisection between the largest batch seen to fit and the
 * smallest seen not to then ends at `largest`: it fits, one more does not (or it is the
 * ceiling, which is also kept where a blob would pass INT_MAX elements, the most the
 * GPU libraries take). A batch below `effective` takes A = ceil(effective / largest) passes of
 * ceil(effective / A) images, the fewest passes of equal size; above it, one pass.
 * On GPUs a fit leaves an eighth of the memory free for what grows while training
 * (cuDNN workspaces, scratch and fp16 copies); the CPU keeps those outside its cap.
 */
static int search_batch(trainer *t, int effective, int *accumulation, int *largest, char *err,
                        size_t errlen)
{
    const cd_backend_iface *o = t->be->iface;
    size_t free_b = 0, total_b = 0;
    int sized = cd_be_mem_info(t->be, &free_b, &total_b) == CD_OK && total_b > 0;
    size_t reserve = sized && (o->caps & CD_BE_CAP_DEVICE) ? total_b / 8 : 0;
    long per_rank = (long)cd_db_count(t->train_db) / t->nranks;
    int ceiling = per_rank > 4096 ? 4096 : (per_rank < 1 ? 1 : (int)per_rank);
    int fit = 0, fail = 0, tries = 0; /* the largest batch seen to fit, the smallest seen not to */
    int batch = effective, built = 0;
    for (;;) {
        int r = try_batch(t, batch, reserve, err, errlen);
        if (r < 0)
            return CD_ERR;
        built = r ? batch : 0;
        if (r) {
            int limit = blob_batch_limit(t->train, batch);
            ceiling = ceiling < limit ? ceiling : limit;
            fit = batch;
            if (fail && fail <= fit)
                fail = 0;
        } else {
            fail = batch;
            if (fit >= fail)
                fit = 0; /* memory was taken meanwhile: what fitted before may not now */
        }
        if (!fit && fail <= 1) {
            t->group_error = t->group != NULL; /* every replica found it */
            snprintf(err, errlen, "batch 1 does not fit in %s memory%s; use a smaller network or "
                     "input size", o->name, t->group ? " on every replica" : "");
            return CD_ERR;
        }
        if (++tries >= 100) {
            t->group_error = t->group != NULL;
            snprintf(err, errlen, "the batch search found no stable answer in %d tries: the free %s "
                     "memory keeps changing; give batch_size a number", tries, o->name);
            return CD_ERR;
        }
        if (!fit)
            batch = (fail + 1) / 2;
        else if (fail)
            batch = fail - fit > 1 ? fit + (fail - fit) / 2 : 0;
        else
            batch = sized && fit < ceiling ? (fit > ceiling / 2 ? ceiling : 2 * fit) : 0;
        if (!batch)
            break;
    }
    *largest = fit;
    int passes = fit >= effective ? 1 : (effective + fit - 1) / fit;
    int want = fit >= effective ? fit : (effective + passes - 1) / passes;
    if (built != want) {
        /* the balanced batch is below the largest fit, yet the nets for the splits' last
         * batches differ with it, so it is tried too; the largest fit is the fallback */
        int r = try_batch(t, want, reserve, err, errlen);
        if (r == 0 && want != fit)
            r = try_batch(t, want = fit, reserve, err, errlen);
        if (r == 0)
            snprintf(err, errlen, "batch %d fitted in %s memory a moment ago but no longer does; is "
                     "something else using the device?", fit, o->name);
        if (r <= 0)
            return CD_ERR;
    }
    *accumulation = passes;
    if (!sized)
        cd_jsonl_log("info", "batch_size auto: batch %d fits; %s memory without a cap (cpu_memory_mb) "
                     "is not searched above the network's batch", fit, o->name);
    else if (fail)
        cd_jsonl_log("info", "batch_size auto: batch %d is the largest that fits in %s memory (%d does "
                     "not); training at batch %d x %d", fit, o->name, fail, t->train_batch, passes);
    else
        cd_jsonl_log("info", "batch_size auto: batch %d fits in %s memory and no larger one is tried "
                     "(the training images per replica, at most 4096, and no blob past 2^31 "
                     "elements); training at batch %d x %d",
                     fit, o->name, t->train_batch, passes);
    return CD_OK;
}

/* The batch of the train stage's Data layer when built at `batch` (0: the network's own),
 * 0 without one. */
static int network_batch(trainer *t, int batch, int *out, char *err, size_t errlen)
{
    cd_net *probe = build_stage(t, "train", batch, err, errlen);
    if (!probe)
        return CD_ERR;
    *out = data_top(probe, 0) ? data_top(probe, 0)->dims[0] : 0;
    cd_net_free(probe);
    return CD_OK;
}

/*
 * The nets at the batch that fits. With batch_size auto, search_batch. Otherwise the
 * batch asked for (or the network's) and, when an allocation fails, half of it with
 * twice the accumulation, until it fits: the images per iteration (batch x
 * accumulation) stay what was asked for.
 */
static int fit_nets(trainer *t, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    int batch = c->batch_size, accumulation = c->iter_size > 0 ? c->iter_size : 1;
    if (c->batch_auto) {
        /* the network's batch tells the effective batch, where the search starts */
        if (network_batch(t, c->batch_size, &batch, err, errlen) != CD_OK)
            return CD_ERR;
        batch *= accumulation;
        accumulation = 1;
    }
    if (t->group) {
        /* the batch asked for is the group's: each replica takes an equal slice */
        int full = batch;
        if (full <= 0 && network_batch(t, 0, &full, err, errlen) != CD_OK)
            return CD_ERR;
        t->group_error = 1; /* until the checks below pass */
        if (full < t->nranks) {
            snprintf(err, errlen, "batch %d can't be split over %d replicas (each needs at least one "
                     "image); use a batch of at least %d, or turn data parallelism off for this "
                     "network", full, t->nranks, t->nranks);
            return CD_ERR;
        }
        if (full % t->nranks != 0) {
            snprintf(err, errlen, "batch %d does not split evenly over %d replicas; choose a batch "
                     "size that %d divides", full, t->nranks, t->nranks);
            return CD_ERR;
        }
        batch = full / t->nranks;
        t->group_error = 0;
    }
    int search = c->batch_auto;
    if (t->mixed) {
        /* images of varying size: one per pass, as many passes per step as the batch asked */
        int images = batch;
        if (images <= 0 && network_batch(t, 0, &images, err, errlen) != CD_OK)
            return CD_ERR;
        accumulation *= images > 0 ? images : 1;
        batch = 1;
        search = 0;
        cd_jsonl_log("info", "the images are of varying size (force_same_shape 0): training at batch 1 x %d, "
                     "the network re-planned for each image's size", accumulation);
    }
    int asked_batch = batch, asked_acc = accumulation, largest = 0;
    if (search) {
        if (search_batch(t, batch, &accumulation, &largest, err, errlen) != CD_OK)
            return CD_ERR;
    }
    while (!search) {
        int oom = 0, ok = make_nets(t, batch, &oom, err, errlen) == CD_OK;
        int cur = batch > 0 ? batch : t->train_batch;
        if (!ok && (!oom || cur <= 1)) {
            free_nets(t);
            return CD_ERR;
        }
        /* replicas train equal slices: the group takes the smallest batch that fits
         * every device (each halves the same way from the same batch) */
        int fits = ok ? cur : (cur + 1) / 2;
        int agreed = t->group ? (int)cd_group_min(t->group, t->rank, fits) : fits;
        if (ok && agreed == cur)
            break;
        free_nets(t);
        batch = cur;
        while (batch > agreed) {
            batch = (batch + 1) / 2;
            accumulation *= 2;
        }
        cd_jsonl_log("warning", "batch %d does not fit in %s memory%s; trying batch %d with "
                     "accumulation %d", cur, t->be->iface->name,
                     ok ? " on another replica" : "", batch, accumulation);
    }
    t->iter_size = accumulation;
    size_t free_b = 0, total_b = 0;
    if (cd_be_mem_info(t->be, &free_b, &total_b) == CD_OK && total_b)
        cd_jsonl_log("info", "with the nets at batch %d: %.3f MiB of %.3f MiB %s memory in use",
                     t->train_batch, (double)(total_b - free_b) / 1048576.0, (double)total_b / 1048576.0,
                     t->be->iface->name);
    if (search)
        cd_jsonl(json_pack("{s:s, s:i, s:i, s:i, s:i, s:s}", "type", "batch", "batch", t->train_batch,
                           "accumulation", t->iter_size, "effective", t->train_batch * t->iter_size,
                           "largest", largest, "reason", "batch_size auto"));
    else if (batch != asked_batch || accumulation != asked_acc)
        cd_jsonl(json_pack("{s:s, s:i, s:i, s:i, s:s}", "type", "batch", "batch", t->train_batch,
                           "accumulation", t->iter_size, "effective", t->train_batch * t->iter_size,
                           "reason", "out of memory"));
    return CD_OK;
}

static int setup(trainer *t, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    t->seed = c->has_seed ? c->seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (open_dataset(t, err, errlen) != CD_OK || choose_backend(t, err, errlen) != CD_OK)
        return CD_ERR;
    cd_be_set_fail_hook(t->be, device_failed);
    t->be->precision = c->precision;
    if (c->precision != CD_PREC_FP32 && !(t->be->iface->caps & CD_BE_CAP_REDUCED_PRECISION))
        cd_jsonl_log("info", "precision %s applies on GPUs; the %s backend computes in fp32",
                     (const char *[]){"fp32", "tf32", "fp16", "bf16"}[c->precision], t->be->iface->name);
    cd_input_prep_init(&t->prep, t->be, t->c_in, t->h_in, t->w_in, 1.0f);
    cd_input_prep_augment(&t->prep, &c->aug);
    /* what does not depend on the batch first, so the batch search sees what is left */
    t->acc_scalars = t->be->iface->alloc(t->be, 2 * sizeof(float));
    if (!t->acc_scalars) {
        snprintf(err, errlen, "out of %s memory", t->be->iface->name);
        return CD_ERR;
    }
    if (cd_input_mean_load(&t->prep, c->dataset_dir, c->use_mean, err, errlen) != CD_OK)
        return CD_ERR;
    if (fit_nets(t, err, errlen) != CD_OK)
        return CD_ERR;

    /* epochs to iterations, as DIGITS converts them */
    size_t ntrain = cd_db_count(t->train_db);
    size_t per_iter = (size_t)t->train_batch * (size_t)t->nranks * (size_t)t->iter_size;
    t->iters_per_epoch = (long)((ntrain + per_iter - 1) / per_iter);
    t->max_iter = (long)ceil(t->iters_per_epoch * c->epochs);
    if (t->max_iter < 1)
        t->max_iter = 1;
    if (c->max_iter_override > 0 && c->max_iter_override < t->max_iter)
        t->max_iter = c->max_iter_override;
    double s = c->snapshot_interval * t->iters_per_epoch, v = c->validation_interval * t->iters_per_epoch;
    t->snapshot_every = s <= 0 ? 0 : (s <= 1 ? 1 : (long)s);
    t->snapshots = c->snapshots;
    t->val_every = v <= 0 ? 0 : (v <= 1 ? 1 : (long)v);
    if (t->rank == 0) {
        /* a job trains without its TensorBoard file rather than not at all */
        char why[4600];
        if (!(t_events = cd_tfevents_open(c->job_dir, why, sizeof why)))
            cd_jsonl_log("warning", "%s; training goes on without TensorBoard scalars", why);
    }
    return CD_OK;
}

/* The job folder's solver.prototxt: Caffe's SolverParameter of this training, the text
 * a download holds (cd_solver_write), with the accumulation and iterations per epoch the
 * trainer settled on (an out-of-memory retry doubles the accumulation) and the backend it
 * trains on (solver_mode: GPU for a device's backend, else CPU). DIGITS keeps
 * the file in the job folder and its model JSON names it ("solver file"). Rewritten on
 * a resume, which trains the same way. */
static int write_solver(const trainer *t, char *err, size_t errlen)
{
    char path[4400];
    if (jobdir_path(t->c->job_dir, JOBDIR_SOLVER, path, sizeof path) != CD_OK) {
        snprintf(err, errlen, "the job folder's path is too long for %s: %s", jobdir_name(JOBDIR_SOLVER),
                 t->c->job_dir);
        return CD_ERR;
    }
    cd_train_config *tc = cd_xmalloc(sizeof *tc);
    *tc = *t->c;
    tc->iter_size = t->iter_size;
    tc->backend = t->be->iface->caps & CD_BE_CAP_DEVICE ? CD_BACKEND_CUDA : CD_BACKEND_CPU; /* solver_mode */
    const char *slash = strrchr(t->c->network, '/');
    char *text = cd_solver_write(tc, (double)t->iters_per_epoch, slash ? slash + 1 : t->c->network);
    int rc = cd_write_file_atomic(path, text, strlen(text));
    if (rc != CD_OK)
        snprintf(err, errlen, "cannot write %s: %s; check that the job folder is writable and has free space", path,
                 strerror(errno));
    free(text);
    free(tc);
    return rc;
}

static void teardown(trainer *t)
{
    if (t->rank == 0) {
        cd_tfevents_close(t_events);
        t_events = NULL;
    }
    free_nets(t);
    cd_input_prep_free(&t->prep);
    if (t->be)
        t->be->iface->free(t->be, t->acc_scalars);
    cd_db_close(t->train_db);
    cd_db_close(t->val_db);
    cd_db_close(t->test_db);
    cd_db_close(t->train_labels);
    cd_db_close(t->val_labels);
    cd_db_close(t->test_labels);
    cd_backend_free(t->be);
}

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Where to start: a resume, pretrained weights, or the fillers. */
static int starting_point(trainer *t, long *start, char *err, size_t errlen)
{
    const cd_train_config *c = t->c;
    *start = 0;
    if (c->resume) {
        long it = newest_snapshot(c->job_dir);
        if (it > 0) {
            char w[4200], s[4200];
            jobdir_snapshot_path(c->job_dir, it, JOBDIR_WEIGHTS, w, sizeof w);
            jobdir_snapshot_path(c->job_dir, it, JOBDIR_STATE, s, sizeof s);
            if (cd_snapshot_load_weights(t->train, w, 0, NULL, err, errlen) != CD_OK ||
                cd_snapshot_load_state(t->train, start, s, err, errlen) != CD_OK)
                return CD_ERR;
            cd_jsonl_log("info", "resuming from iteration %ld (epoch %.3f)", *start, epoch_of(t, *start));
            return CD_OK;
        }
        cd_jsonl_log("info", "no snapshot to resume from; starting from the beginning");
    }
    if (c->pretrained[0]) {
        int loaded = 0;
        if (cd_snapshot_load_weights(t->train, c->pretrained, 1, &loaded, err, errlen) != CD_OK)
            return CD_ERR;
        cd_jsonl_log("info", "took %d parameter tensors from %s", loaded, c->pretrained);
    }
    return CD_OK;
}

/* Data parallel: every replica starts from rank 0's weights and solver state (the same
 * seed, snapshot or pretrained file gives the same anyway; this makes it so). */
static int same_start(trainer *t, char *err, size_t errlen)
{
    cd_net *net = t->train;
    cd_backend_t *be = t->be;
    if (net->param_count == 0)
        return CD_OK;
    float *arenas[] = {net->arena_data, net->arena_h1, net->arena_h2};
    for (size_t i = 0; i < CD_ARRAY_LEN(arenas); i++)
        if (arenas[i] && cd_be_broadcast(be, arenas[i], net->param_count) != CD_OK) {
            snprintf(err, errlen, "copying rank 0's weights to replica %d failed: %s", t->rank, be->err);
            return CD_ERR;
        }
    return CD_OK;
}

/* The limit of the last window and what to change, from what the worker measures
 * itself (the server adds GPU utilization from NVML). Printed when it changes. */
static void advise(trainer *t, double wait_share, double images_per_sec, double epoch)
{
    const char *limit, *message;
    char buf[512];
    size_t free_b = 0, total_b = 0;
    int gpu = (t->be->iface->caps & CD_BE_CAP_DEVICE) != 0;
    int have_mem = cd_be_mem_info(t->be, &free_b, &total_b) == CD_OK && total_b > 0;
    /* data-bound from 10% of the step waiting, and no longer below 5%: a share near
     * the line does not flip the advice every window */
    double data_line = strcmp(t->advice, "data") ? 0.10 : 0.05;
    if (wait_share > data_line) {
        limit = "data";
        int n = snprintf(buf, sizeof buf, "the step waits for data %.0f%% of the time with %d loader "
                         "thread%s", 100 * wait_share, t->loader_threads, t->loader_threads == 1 ? "" : "s");
        if (!t->loader_auto)
            n += snprintf(buf + n, sizeof buf - n, " (loader_threads in train.json); raise it, or leave "
                          "it out and cdigits adds threads while the step waits (up to two per core)");
        else if (t->loader_threads < 2 * t->cores)
            n += snprintf(buf + n, sizeof buf - n, "; cdigits adds loader threads up to two per core");
        else
            n += snprintf(buf + n, sizeof buf - n, ", two per core, the most cdigits starts");
        snprintf(buf + n, sizeof buf - n, "; a dataset with encoding none decodes nothing while training");
    } else if (gpu && have_mem && (double)free_b / (double)total_b > 0.5 && !t->c->batch_auto) {
        limit = "batch";
        snprintf(buf, sizeof buf, "%.0f%% of the GPU's memory is unused at batch %d; a larger batch "
                 "(batch_size auto takes the largest that fits) keeps the GPU busier",
                 100.0 * (double)free_b / (double)total_b, t->train_batch);
    } else if (gpu && (t->be->precision == CD_PREC_FP32 || t->be->precision == CD_PREC_TF32)) {
        limit = "precision";
        snprintf(buf, sizeof buf, "training in %s; mixed precision (fp16 or bf16) runs the convolutions "
                 "on the tensor cores", t->be->precision == CD_PREC_FP32 ? "fp32" : "tf32");
    } else if (!gpu) {
        limit = "cpu";
        snprintf(buf, sizeof buf, "compute-bound on the CPU at %.0f images/s; a GPU is the way to go faster",
                 images_per_sec);
    } else {
        limit = "compute";
        snprintf(buf, sizeof buf, "compute-bound on the GPU at %.0f images/s", images_per_sec);
    }
    message = buf;
    if (!strcmp(limit, t->advice)) {
        t->advice_next[0] = 0;
        return;
    }
    /* a new limit is reported once it held for two windows in a row (the first at once) */
    if (strcmp(limit, t->advice_next) != 0) {
        snprintf(t->advice_next, sizeof t->advice_next, "%s", limit);
        t->advice_seen = 0;
    }
    if (++t->advice_seen < 2 && t->advice[0])
        return;
    t->advice_next[0] = 0;
    snprintf(t->advice, sizeof t->advice, "%s", limit);
    cd_jsonl(json_pack("{s:s, s:s, s:s, s:f, s:f, s:f}", "type", "advice", "limit", limit, "message",
                       message, "data_wait", wait_share, "images_per_sec", images_per_sec, "epoch", epoch));
}

/* The loader's batches in the backend's page-locked memory where it has some (NULL:
 * the loader uses malloc). */
static void *pinned_alloc(void *ctx, size_t bytes) { return cd_be_host_alloc(ctx, bytes); }
static void pinned_free(void *ctx, void *ptr) { cd_be_host_free(ctx, ptr); }

/* Fetch the next batch of the stream, or fail with the loader's reason. */
static const cd_batch *next_batch(cd_loader_t *ld, double *waited, char *err, size_t errlen)
{
    const cd_batch *b = cd_loader_next(ld, waited);
    if (!b)
        snprintf(err, errlen, "training data: %s", cd_loader_error(ld) ? cd_loader_error(ld) : "ended");
    return b;
}

/* Device graphs of the training pass (forward and backward), where the backend has
 * them: captured on the second pass, replayed from then on, captured again when the
 * loss scale (a constant inside the graph) changes. Any failure falls back to running
 * the pass op by op for the rest of the run. */
typedef struct graph_state {
    int usable;
    int captured;
    float scale;      /* loss scale the graph was captured with */
} graph_state;

static float train_pass(trainer *t, graph_state *g, int first_pass)
{
    cd_backend_t *be = t->be;
    cd_net *net = t->train;
    if (g->usable && g->captured && g->scale == net->loss_scale) {
        /* the graph advances its own dropout counter by one per replay, as a forward does */
        net->rng_counter++;
        if (cd_be_graph_replay(be) == CD_OK)
            return cd_net_read_values(net);
        net->rng_counter--;
        g->usable = 0;
        cd_jsonl_log("warning", "replaying the captured step failed (%s); running it op by op", be->err);
    } else if (g->usable && !first_pass) {
        uint64_t counter = net->rng_counter;
        if (cd_be_graph_begin(be) == CD_OK) {
            cd_net_forward_device(net);
            cd_net_backward(net);
            if (cd_be_graph_end(be) == CD_OK && cd_be_graph_replay(be) == CD_OK) {
                g->captured = 1;
                g->scale = net->loss_scale;
                return cd_net_read_values(net);
            }
        }
        net->rng_counter = counter;
        g->usable = 0;
        cd_jsonl_log("warning", "capturing the training step as a device graph failed (%s); running "
                     "it op by op", be->err);
    }
    cd_net_forward_device(net);
    cd_net_backward(net);
    return cd_net_read_values(net);
}

typedef struct loss_scaler {
    int on;
    double scale;
    long good;       /* steps since the last overflow */
    long skipped;
} loss_scaler;

/* After backward with a scaled loss: 1 if the gradients are finite (step), else 0
 * (skip the step, halve the scale). Every 2000 good steps the scale doubles. */
static int scaler_check(trainer *t, loss_scaler *ls)
{
    if (!ls->on)
        return 1;
    float sum = t->be->iface->asum(t->be, t->train->param_count, t->train->arena_diff);
    if (isfinite(sum)) {
        if (++ls->good % 2000 == 0 && ls->scale < 16777216.0)
            ls->scale *= 2;
        return 1;
    }
    ls->skipped++;
    ls->good = 0;
    ls->scale = ls->scale > 1 ? ls->scale / 2 : 1;
    cd_net_zero_grad(t->train);
    return 0;
}

/* Early stopping watches the val loss of the validations before the last iteration: the
 * first sets the best, `patience` more without a better one stop the run. Says so (once,
 * rank 0) when the run has too few of them for it ever to act. */
static void early_stop_warn(const trainer *t, long start)
{
    int patience = t->c->early_stop_patience;
    if (patience <= 0 || t->rank != 0)
        return;
    if (!t->val) {
        cd_jsonl_log("warning", "early_stopping_patience %d has no effect: the dataset has no val split "
                     "to watch; create the dataset with one (pct_val or folder_val), or set "
                     "early_stopping_patience to 0", patience);
        return;
    }
    if (!t->val_every) {
        cd_jsonl_log("warning", "early_stopping_patience %d has no effect with validation_interval 0, "
                     "which validates only after the last iteration; set validation_interval (in "
                     "epochs) to validate during training", patience);
        return;
    }
    long before_last = (t->max_iter - 1) / t->val_every - start / t->val_every;
    if (before_last < patience + 1)
        cd_jsonl_log("warning", "early_stopping_patience %d has no effect: the run validates %ld time%s "
                     "before its last iteration (validation_interval %g epochs) and stopping needs %d "
                     "(early_stopping_patience + 1); lower validation_interval or "
                     "early_stopping_patience", patience, before_last, before_last == 1 ? "" : "s",
                     t->c->validation_interval, patience + 1);
}

/* One replica's training loop (the whole task when there is one). */
static int train_rank(const cd_train_config *c, int rank, int nranks, int gpu, cd_group_t *group)
{
    trainer t = {.c = c, .rank = rank, .nranks = nranks, .gpu_ranks = gpu >= 0, .gpu = gpu, .group = group};
    char err[1024] = "";
    int rc = 1;
    cd_loader_t *ld = NULL;
    const cd_batch *pending = NULL; /* fetched and staged ahead, released after the wait */
    cd_grad_reduce reduce = {0};
    if (group && nranks > 1) {
        /* this replica's error lines, and a crash on its thread, say which it is */
        char who[96], gpu_name[16] = "";
        if (gpu >= 0)
            snprintf(gpu_name, sizeof gpu_name, "GPU %d", gpu);
        if (cd_group_rank(group) >= 0) /* a process of its own: which one, where */
            snprintf(who, sizeof who, "rank %d of %d (host %s%s%s)", rank, nranks, group->host,
                     gpu >= 0 ? ", " : "", gpu_name);
        else if (gpu >= 0)
            snprintf(who, sizeof who, "replica %d of %d (%s)", rank, nranks, gpu_name);
        else
            snprintf(who, sizeof who, "replica %d of %d", rank, nranks);
        cd_jsonl_set_speaker(who);
    }

    if (setup(&t, err, sizeof err) != CD_OK)
        goto fail;
    if (t.rank == 0 && write_solver(&t, err, sizeof err) != CD_OK)
        goto fail;
    long start;
    if (starting_point(&t, &start, err, sizeof err) != CD_OK)
        goto fail;
    if (t.group) {
        if (same_start(&t, err, sizeof err) != CD_OK)
            goto fail;
        /* every replica starts its first step with the broadcast done on its device,
         * none still allocating while another already averages */
        t.be->iface->sync(t.be);
        cd_group_broadcast(t.group, t.rank, 0);
        cd_grad_reduce_init(&reduce, t.train, c->bucket_mb);
        if (t.rank == 0)
            cd_jsonl_log("info", "data parallel over %d replica%s: %.0f KiB of gradients averaged in %d "
                         "bucket%s (up to %g MiB), %s", t.nranks, t.nranks == 1 ? "" : "s",
                         (double)t.train->param_count * sizeof(float) / 1024, reduce.n,
                         reduce.n == 1 ? "" : "s", c->bucket_mb,
                         reduce.overlapped ? "each started during the backward pass"
                                           : "each as the backward pass reaches it");
    }
    cd_jsonl_log("info", "training %s on %zu images (%d classes, %dx%dx%d), batch %d x %d, %ld "
                 "iterations (%ld per epoch), backend %s", c->network, cd_db_count(t.train_db),
                 t.classes, t.c_in, t.h_in, t.w_in, t.train_batch, t.iter_size, t.max_iter,
                 t.iters_per_epoch, t.be->iface->name);

    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    t.cores = cores;
    t.loader_auto = c->loader_threads <= 0;
    t.loader_threads = t.loader_auto ? (cores > 4 ? 4 : 1) : c->loader_threads;
    cd_loader_opts lo = {.db = t.train_db, .label_db = t.train_labels, .aug = &c->aug, .batch = t.train_batch, .crop = t.crop, .random_crop = 1,
                         .stride = (long)t.train_batch * t.nranks, .offset = (long)t.train_batch * t.rank,
                         .flip = t.flip, .shuffle = c->shuffle, .wrap = 1, .seed = t.seed,
                         .start_batch = start * t.iter_size, .threads = t.loader_threads, .ring = 4,
                         .host_alloc = pinned_alloc, .host_free = pinned_free, .host_ctx = t.be};
    if (!(ld = cd_loader_start(&lo, err, sizeof err)))
        goto fail;
    /* with a copy stream, batch i+1 is uploaded into the other staging slot while
     * batch i trains: `ready` says the current slot already holds the next batch and
     * `pending` is its loader buffer, released once the upload is done */
    int overlap = cd_be_supports(t.be, CD_BE_ASYNC_UPLOAD), slot = 0, ready = 0;

    /* DIGITS: report 8 times per epoch or every 5000 images, whichever is more often */
    long display = t.iters_per_epoch / 8;
    long by_images = (long)ceil(5000.0 / ((double)t.train_batch * t.nranks * t.iter_size));
    if (by_images < display)
        display = by_images;
    if (display < 1)
        display = 1;

    /* fp16 gradients underflow without a scaled loss, where the backend computes in fp16 */
    int fp16 = t.be->precision == CD_PREC_FP16 && (t.be->iface->caps & CD_BE_CAP_REDUCED_PRECISION);
    loss_scaler ls = {.on = fp16, .scale = 65536.0};
    const char *graphs_env = getenv("CDIGITS_GRAPHS");
    /* a net re-planned per image has no one graph to replay */
    graph_state graph = {.usable = cd_be_supports(t.be, CD_BE_GRAPHS) && !t.train->host_reads && !t.mixed &&
                                   !(graphs_env && !strcmp(graphs_env, "0"))};
    if (graph.usable && t.group) {
        /* the buckets' averages start from the host between the layers of the backward */
        graph.usable = 0;
        if (t.rank == 0)
            cd_jsonl_log("info", "data parallel: the step runs op by op, not as a device graph, so "
                         "that averaging the gradients overlaps the backward pass");
    }
    if (graph.usable)
        cd_jsonl_log("info", "the training step runs as a captured device graph from its second pass "
                     "(CDIGITS_GRAPHS=0 turns this off)");
    early_stop_warn(&t, start);
    double best_val = INFINITY;
    int stale = 0, stopped_early = 0;
    long finished = start; /* the last iteration done (less than max_iter after an early stop) */
    double window_start = cd_now(), waited = 0, excluded = 0; /* excluded: validation, snapshots */
    long window_images = 0;
    cd_net_zero_grad(t.train);
    for (long iter = start; iter < t.max_iter; iter++) {
        float loss = 0;
        t.train->loss_scale = ls.on ? (float)ls.scale : 1.0f;
        for (int a = 0; a < t.iter_size; a++) {
            if (!ready) {
                const cd_batch *b = next_batch(ld, &waited, err, sizeof err);
                if (!b)
                    goto fail;
                stage(&t, &t.st[slot], b);
                pending = b;
            }
            if (prepare(&t, t.train, &t.st[slot], err, sizeof err) != CD_OK) /* waits for its upload */
                goto fail;
            if (pending)
                cd_loader_release(ld, pending);
            pending = NULL;
            ready = 0;
            if (overlap) {
                /* queue the next batch's upload now: it runs while this one trains */
                const cd_batch *b = next_batch(ld, &waited, err, sizeof err);
                if (!b)
                    goto fail;
                slot ^= 1;
                stage(&t, &t.st[slot], b);
                pending = b;
                ready = 1;
            }
            t.train->rng_counter = (uint64_t)(iter * t.iter_size + a);
            if (t.group && a == t.iter_size - 1)
                cd_grad_reduce_arm(&reduce); /* the gradients are final in this pass */
            loss += train_pass(&t, &graph, iter == start && a == 0) / (float)t.iter_size;
            window_images += (long)t.train_batch * t.nranks;
        }
        if (!isfinite(loss) && !ls.on) {
            snprintf(err, sizeof err, "the loss became %s at iteration %ld (epoch %.2f); lower the "
                     "learning rate (now %g) and train again", isnan(loss) ? "NaN" : "infinite", iter,
                     epoch_of(&t, iter), cd_lr_at(&c->solver.lr, iter));
            goto fail;
        }
        if (t.group) {
            /* the group's gradient: the mean of the replicas' (each averaged its slice) */
            if (cd_grad_reduce_finish(&reduce, err, sizeof err) != CD_OK)
                goto fail;
            cd_group_allreduce_mean(t.group, t.rank, &loss, 1);
        }
        cd_solver_opts so = c->solver;
        so.lr.max_iter = t.max_iter;
        so.iter_size = t.iter_size;
        so.loss_scale = ls.on ? ls.scale : 1.0;
        double rate = cd_lr_at(&so.lr, iter);
        if (scaler_check(&t, &ls))
            rate = cd_solver_step(t.train, &so, iter);
        long done = iter + 1;
        double e = epoch_of(&t, done);
        finished = done;
        if (done % display == 0 || done == t.max_iter) {
            t.be->iface->sync(t.be);
            double dt = cd_now() - window_start - excluded;
            metric("train", "loss", loss, e, done);
            metric("train", "learning_rate", rate, e, done);
            if (ls.on) {
                metric("train", "loss_scale", ls.scale, e, done);
                metric("train", "skipped_steps", (double)ls.skipped, e, done);
            }
            if (dt > 0) {
                double ips = (double)window_images / dt, share = waited / dt;
                metric("train", "images_per_sec", ips, e, done);
                metric("train", "data_wait", share, e, done);
                advise(&t, share, ips, e);
                if (share > 0.10 && t.loader_auto && t.loader_threads < 2 * cores) {
                    /* data-bound: one more loader thread, from the next batch on */
                    long next = cd_loader_next_index(ld);
                    if (pending) { /* already staged: finish its upload, keep it */
                        cd_input_stage_wait(&t.prep);
                        next = pending->index + 1;
                        pending = NULL;
                    }
                    cd_loader_stop(ld);
                    lo.threads = ++t.loader_threads;
                    lo.start_batch = next;
                    if (!(ld = cd_loader_start(&lo, err, sizeof err)))
                        goto fail;
                    cd_jsonl_log("info", "data loading held the step %.0f%% of the time; now %d loader "
                                 "threads", 100 * share, t.loader_threads);
                }
            }
            cd_jsonl(json_pack("{s:s, s:s, s:I, s:I, s:f}", "type", "progress", "stage", "train",
                               "done", (json_int_t)done, "total", (json_int_t)t.max_iter, "epoch", e));
            window_start = cd_now();
            waited = 0;
            excluded = 0;
            window_images = 0;
        }
        int last = done == t.max_iter;
        /* read the signal once per iteration: the snapshot and the stop below must agree,
         * and every replica stops where rank 0 does */
        int stop = g_stop;
        if (t.group)
            stop = (int)cd_group_broadcast(t.group, t.rank, stop);
        double aside = cd_now();
        if (t.val && ((t.val_every && done % t.val_every == 0) || last)) {
            double vloss = 0;
            t.free_slot = ready ? slot ^ 1 : slot;
            if (evaluate(&t, t.val_db, t.val_labels, "val", done, &vloss, err, sizeof err) != CD_OK)
                goto fail;
            if (vloss < best_val - c->early_stop_min_delta) {
                best_val = vloss;
                stale = 0;
            } else if (c->early_stop_patience > 0 && ++stale >= c->early_stop_patience && !last) {
                stopped_early = 1;
                cd_jsonl_log("info", "stopping early at epoch %.2f: the val loss has not improved on "
                             "%.6g by more than early_stopping_min_delta (%g) for %d validation%s", e,
                             best_val, c->early_stop_min_delta, stale, stale == 1 ? "" : "s");
            }
        }
        if (t.rank == 0 && t.snapshots &&
            ((t.snapshot_every && done % t.snapshot_every == 0) || last || stop || stopped_early)) {
            if (save_snapshot(&t, done, err, sizeof err) != CD_OK)
                goto fail;
        }
        excluded += cd_now() - aside;
        if (t.group)
            stopped_early = (int)cd_group_broadcast(t.group, t.rank, stopped_early);
        if (stopped_early)
            break;
        if (stop && !last) {
            if (t.snapshots)
                cd_jsonl_log("info", "stopped at iteration %ld (epoch %.3f) with its snapshot saved; "
                             "resume to continue", done, e);
            else
                cd_jsonl_log("info", "stopped at iteration %ld (epoch %.3f) without a snapshot "
                             "(\"snapshots\": false): a resume starts from the beginning", done, e);
            rc = 3;
            goto out;
        }
    }
    if (t.test_db && t.val) {
        /* the held-out test split, once, with the final weights */
        t.free_slot = ready ? slot ^ 1 : slot;
        if (evaluate(&t, t.test_db, t.test_labels, "test", finished, NULL, err, sizeof err) != CD_OK)
            goto fail;
    }
    cd_jsonl(json_pack("{s:s}", "type", "done"));
    rc = 0;
    goto out;
fail:
    if (group && t.group_error) {
        if (rank != 0)
            goto out; /* rank 0 says it for the group */
        cd_jsonl_set_speaker(NULL);
    }
    if (group) {
        /* the others wait for this replica at the next reduction, perhaps inside an
         * NCCL kernel that will never finish: end every rank at once (threads: the
         * process, without the exit handlers that would tear the runtime down under
         * them; processes: MPI_Abort), after this rank has said why */
        cd_jsonl_error("%s", err[0] ? err : "training failed"); /* names the replica */
        cd_group_abort(group, 1);
    }
    cd_jsonl_error("%s", err[0] ? err : "training failed");
    rc = 1;
out:
    cd_jsonl_set_speaker(NULL);
    cd_grad_reduce_free(&reduce);
    if (pending && t.be)
        cd_input_stage_wait(&t.prep);
    cd_loader_stop(ld);
    teardown(&t);
    return rc;
}

typedef struct rank_arg {
    const cd_train_config *c;
    int rank, nranks, gpu; /* gpu: the replica's GPU, or -1 */
    cd_group_t *group;
    int rc;
    pthread_t thread;
} rank_arg;

static void *rank_main(void *p)
{
    rank_arg *a = p;
    cd_jsonl_set_quiet(1); /* rank 0 speaks for the group */
    char name[16];
    snprintf(name, sizeof name, "cd-replica-%d", a->rank);
    pthread_setname_np(pthread_self(), name); /* top -H, gdb and the tests can tell them apart */
    a->rc = train_rank(a->c, a->rank, a->nranks, a->gpu, a->group);
    return NULL;
}

/* SIGTERM and SIGINT: snapshot at the end of the step and exit 3 (every replica). So
 * does SIGUSR1, the signal mpirun forwards to every rank: on SIGTERM it ends the job
 * itself (SIGTERM to each rank, SIGKILL a second later). */
static void catch_stop(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    g_stop = 0;
    struct sigaction sa = {.sa_handler = on_term};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < CD_ARRAY_LEN(sigs); i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            cd_jsonl_log("warning", "cannot catch signal %d (%s): stopping by it will not snapshot",
                         sigs[i], strerror(errno));
}

int cd_train_run_rank(const cd_train_config *c, cd_group_t *g)
{
    catch_stop();
    int rank = cd_group_rank(g), n = cd_group_size(g);
    cd_train_config shared = *c;
    /* one seed for all: rank 0's (a long carries the 64 bits) */
    if (!shared.has_seed)
        shared.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    shared.has_seed = 1;
    shared.seed = (uint64_t)cd_group_broadcast(g, rank, (long)shared.seed);
    /* GPUs when every rank has one: the local rank's of "gpus", or GPU local_rank */
    int gpus = c->backend == CD_BACKEND_CPU ? 0 : cd_backend_gpu_count();
    int gpu = g->local_rank < c->ngpus ? c->gpus[g->local_rank] : g->local_rank;
    int on_gpus = (int)cd_group_min(g, rank, gpus > 0 && gpu < gpus);
    if (rank != 0)
        cd_jsonl_set_quiet(1); /* rank 0 speaks for the group */
    else if (c->replicas > 1)
        cd_jsonl_log("info", "\"replicas\": %d is for threads of one process; under MPI the %d "
                     "ranks are the replicas", c->replicas, n);
    if (!on_gpus && c->backend == CD_BACKEND_CUDA && !(gpus > 0 && gpu < gpus)) {
        /* the ranks that have theirs fail in choose_backend, if this abort is not first */
        cd_jsonl_error("rank %d of %d (host %s) has no GPU of its own: local rank %d would train on GPU "
                       "%d, and this host has %d; start at most as many ranks per host as it has GPUs, "
                       "list theirs in \"gpus\", or use backend cpu", rank, n, g->host, g->local_rank,
                       gpu, gpus);
        cd_group_abort(g, 1);
    }
    cd_jsonl_catch_crashes();
    return train_rank(&shared, rank, n, on_gpus ? gpu : -1, g);
}

int cd_train_run(const cd_train_config *c)
{
    catch_stop();
    int n = c->replicas > 1 ? c->replicas : 1, gpu = 0;
    int force = c->force_data_parallel && c->data_parallel;
    cd_train_config shared = *c;
    if (force && c->backend != CD_BACKEND_CPU && c->ngpus == 0 && cd_backend_gpu_count() > 0)
        shared.gpus[shared.ngpus++] = 0; /* a group of one on the first GPU */
    if (c->backend != CD_BACKEND_CPU && shared.ngpus >= (force ? 1 : 2) &&
        cd_backend_gpu_count() >= shared.ngpus) {
        if (c->data_parallel) {
            n = shared.ngpus; /* one replica per GPU */
            gpu = 1;
        } else {
            cd_jsonl_log("info", "data parallelism is off for this job: training on GPU %d only",
                         c->gpus[0]);
        }
    }
    if (n == 1 && !force)
        return train_rank(c, 0, 1, -1, NULL);
    /* data parallel in one process: n replicas, one thread each, one seed for all */
    if (!shared.has_seed) {
        shared.has_seed = 1;
        shared.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    }
    cd_jsonl_catch_crashes();
    cd_group_t *g = cd_group_new(n);
    if (!g) {
        cd_jsonl_error("cannot set up %d replicas", n);
        return 1;
    }
    rank_arg *args = cd_xcalloc((size_t)n, sizeof *args);
    for (int r = 1; r < n; r++) {
        args[r] = (rank_arg){.c = &shared, .rank = r, .nranks = n, .gpu = gpu ? shared.gpus[r] : -1, .group = g};
        if (pthread_create(&args[r].thread, NULL, rank_main, &args[r]) != 0) {
            cd_jsonl_error("cannot start replica %d", r);
            fflush(stdout);
            _exit(1);
        }
    }
    int rc = train_rank(&shared, 0, n, gpu ? shared.gpus[0] : -1, g);
    for (int r = 1; r < n; r++) {
        pthread_join(args[r].thread, NULL);
        if (args[r].rc != 0 && rc == 0)
            rc = args[r].rc;
    }
    free(args);
    cd_group_free(g);
    return rc;
}
