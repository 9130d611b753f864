/* Inference with a model job's snapshot (see infer.h). */
#define _GNU_SOURCE
#include "cdigits/infer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cdigits/backend_select.h"
#include "cdigits/dataset.h"
#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "engine_internal.h"
#include "input_prep.h"

struct cd_classifier {
    cd_backend_t *be;
    int own_be;
    cd_train_config tc;
    char job_dir[4096];
    cd_net *net;          /* deploy stage, batch 1 */
    cd_blob *input, *output;
    cd_net *bnet;         /* deploy stage, batch `batch`, sharing net's weights; or NULL */
    cd_blob *binput, *boutput;
    int batch;
    char **labels;
    int nlabels;
    int nout;             /* values per image of the deploy stage's last top: nlabels or more */
    float *scores;        /* room for `batch` rows of nout values when nout > nlabels */
    int c, h, w;          /* stored image size of the dataset (mixed: the largest) */
    int mixed;            /* the dataset's images are of varying size (force_same_shape 0):
                           * each image keeps its size (within c, h, w), one at a time, the
                           * net re-planned for it */
    int resize_mode;
    int pad_w, pad_h;     /* a detection dataset's padding (dataset.json), 0 when none */
    int task;             /* enum cd_dataset_task of the dataset (stats.json) */
    int targets;          /* values per label of a regression dataset */
    cd_input_prep prep;   /* the mean, and the images into the input */
    cd_input_stage stage; /* room for `batch` images */
    int *oy, *ox;         /* `batch` centre crops, on the host */
    long iteration;
};

int cd_snapshot_list(const char *job_dir, long *iters, int max)
{
    jobdir_snapshot *all = cd_xmalloc(sizeof *all * (size_t)(max > 0 ? max : 1));
    int n = jobdir_snapshots(job_dir, JOBDIR_ITER_ONLY, all, max);
    for (int i = 0; i < n; i++)
        iters[i] = (long)all[i].number;
    free(all);
    return n;
}

int cd_snapshot_epochs(const char *job_dir, cd_snapshot_info *out, int max)
{
    jobdir_snapshot *all = cd_xmalloc(sizeof *all * (size_t)(max > 0 ? max : 1));
    int n = jobdir_snapshots(job_dir, JOBDIR_ITER_ONLY, all, max);
    for (int i = 0; i < n; i++)
        out[i] = (cd_snapshot_info){(long)all[i].number, all[i].epoch};
    free(all);
    /* an imported model names the epoch of its one snapshot in info.json */
    char path[4200];
    jobdir_path(job_dir, JOBDIR_INFO_JSON, path, sizeof path);
    json_t *info = access(path, R_OK) == 0 ? json_load_file(path, 0, NULL) : NULL;
    json_t *ie = json_object_get(info, "snapshot epoch"), *ii = json_object_get(info, "snapshot iteration");
    if (json_is_number(ie) && json_number_value(ie) >= 0 && json_is_integer(ii))
        for (int i = 0; i < n; i++)
            if (out[i].iteration == (long)json_integer_value(ii) && out[i].epoch < 0)
                out[i].epoch = json_number_value(ie);
    json_decref(info);
    /* a snapshot whose .epoch the trainer did not get to write (a crash right after the
     * weights) takes the iterations per epoch of the newest one that has it */
    double per_iter = -1;
    for (int i = 0; i < n; i++)
        if (out[i].iteration > 0 && out[i].epoch > 0)
            per_iter = out[i].epoch / (double)out[i].iteration;
    for (int i = 0; i < n; i++)
        if (out[i].epoch < 0 && per_iter > 0)
            out[i].epoch = per_iter * (double)out[i].iteration;
    return n;
}

long cd_snapshot_for_epoch(const char *job_dir, const char *epoch, char *err, size_t errlen)
{
    enum { MAX = 4096 };
    cd_snapshot_info *snaps = cd_xmalloc(sizeof *snaps * MAX);
    double *epochs = cd_xmalloc(sizeof *epochs * MAX);
    int n = cd_snapshot_epochs(job_dir, snaps, MAX);
    for (int i = 0; i < n; i++)
        epochs[i] = snaps[i].epoch;
    int k = jobdir_epoch_pick(epochs, n, epoch);
    long it = k >= 0 ? snaps[k].iteration : -1;
    free(epochs);
    if (it >= 0) {
        free(snaps);
        return it;
    }
    size_t used = (size_t)snprintf(err, errlen, "there is no snapshot of epoch %s; the snapshots are of epoch%s ",
                                   epoch, n == 1 ? "" : "s");
    int unknown = 0;
    for (int i = 0; i < n && used < errlen; i++) {
        unknown |= snaps[i].epoch < 0;
        if (snaps[i].epoch < 0)
            used += (size_t)snprintf(err + used, errlen - used, "%sunknown (iteration %ld)", i ? ", " : "",
                                     snaps[i].iteration);
        else
            used += (size_t)snprintf(err + used, errlen - used, "%s%g", i ? ", " : "", snaps[i].epoch);
    }
    if (n == 0 && used < errlen)
        snprintf(err + used, errlen - used, "(none yet)");
    else if (unknown && used < errlen)
        snprintf(err + used, errlen - used, "; name a snapshot of unknown epoch by its iteration");
    free(snaps);
    return -1;
}

int cd_topk(const float *p, int n, int k, int *idx)
{
    if (k > n)
        k = n;
    /* partial selection: k is small (5), n the class count */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int t = 0; t < j && !taken; t++)
                taken = idx[t] == i;
            if (!taken && (best < 0 || p[i] > p[best] || (isnan(p[best]) && !isnan(p[i]))))
                best = i;
        }
        idx[j] = best;
    }
    return k;
}

/* Builds a deploy net of `batch` images; shares `from`'s weights when given. */
static cd_net *deploy_net(cd_classifier_t *c, int batch, const cd_net *from, cd_blob **in, cd_blob **out,
                          char *err, size_t errlen)
{
    cd_net_opts opts = {.stage = "deploy", .batch = batch, .input_c = c->c, .input_h = c->h,
                        .input_w = c->w, .crop = c->tc.crop_size,
                        .num_classes = c->task == CD_TASK_REGRESSION ? c->targets : c->nlabels};
    cd_net *net = cd_net_load(c->tc.network, &opts, err, errlen);
    if (!net)
        return NULL;
    if (cd_net_alloc(net, c->be, from, err, errlen) != CD_OK) {
        cd_net_free(net);
        return NULL;
    }
    *in = cd_net_blob(net, "data");
    *out = net->layers[net->nlayers - 1]->top[0];
    if (!*in || (*in)->ndim != 4) {
        snprintf(err, errlen, "%s: the deploy stage has no 4-D input named data", c->tc.network);
        cd_net_free(net);
        return NULL;
    }
    /* DIGITS classifies with the first nlabels outputs and drops the rest (a network
     * with a fixed num_output larger than the dataset's classes); fewer cannot be read.
     * A generic model's outputs are read by name (infer_generic.c), whatever their size. */
    size_t per = (*out)->count / (size_t)batch;
    int classify = c->task == CD_TASK_CLASSIFICATION;
    if ((*out)->count % (size_t)batch != 0 || (classify && per < (size_t)c->nlabels)) {
        snprintf(err, errlen, "%s: the deploy stage ends in %s with %zu values per image but the dataset has "
                 "%d classes; its last InnerProduct needs num_output %d or more (leave num_output out to get %d)",
                 c->tc.network, (*out)->name, per, c->nlabels, c->nlabels, c->nlabels);
        cd_net_free(net);
        return NULL;
    }
    c->nout = (int)per;
    return net;
}

/* The class scores of the first n images of output into probs (n rows of nlabels): the
 * outputs past the labels are dropped, as DIGITS drops class indices past its labels. */
static void download_scores(cd_classifier_t *c, const cd_blob *output, int n, float *probs)
{
    size_t nl = (size_t)c->nlabels, no = (size_t)c->nout;
    if (no == nl) {
        c->be->iface->download(c->be, probs, output->data, (size_t)n * nl * sizeof(float));
        return;
    }
    /* a generic model may have fewer outputs than labels (pairs): the rest read 0 */
    size_t take = no < nl ? no : nl;
    c->scores = cd_xrealloc(c->scores, (size_t)n * no * sizeof(float));
    c->be->iface->download(c->be, c->scores, output->data, (size_t)n * no * sizeof(float));
    for (int i = 0; i < n; i++) {
        memcpy(probs + (size_t)i * nl, c->scores + (size_t)i * no, take * sizeof(float));
        memset(probs + (size_t)i * nl + take, 0, (nl - take) * sizeof(float));
    }
}

static void free_staging(cd_classifier_t *c)
{
    cd_input_stage_free(&c->prep, &c->stage);
    free(c->oy);
    free(c->ox);
    c->oy = c->ox = NULL;
}

/* Room for `n` images, and their centre crops into input. */
static int alloc_staging(cd_classifier_t *c, int n, const cd_blob *input, char *err, size_t errlen)
{
    free_staging(c);
    if (cd_input_stage_alloc(&c->prep, &c->stage, n, err, errlen) != CD_OK)
        return CD_ERR;
    c->oy = cd_xmalloc(sizeof(int) * (size_t)n);
    c->ox = cd_xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        c->oy[i] = (c->h - input->dims[2]) / 2;
        c->ox[i] = (c->w - input->dims[3]) / 2;
    }
    return CD_OK;
}

const char *cd_dataset_task_named(json_t *stats, json_t *config, int *task)
{
    const char *name = json_string_value(json_object_get(stats, "task"));
    if (!name)
        name = json_string_value(json_object_get(config, "task"));
    *task = name ? cd_dataset_task_parse(name) : CD_TASK_CLASSIFICATION;
    return name;
}

/* An image key of dataset.json (o), else of stats.json (a segmentation dataset keeps its
 * images' size, which only stats.json names), else def. */
static int image_key(json_t *o, json_t *stats, const char *key, int def)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        v = json_object_get(stats, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

/* The stored image shape and resize mode from the dataset's dataset.json (an imported
 * model has one with just these keys) or its stats.json, its task, and the values per
 * label of a regression dataset (stats.json's label_shape: what an InnerProduct without
 * num_output gives, as in training). */
static int read_image_shape(cd_classifier_t *c, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/dataset.json", c->tc.dataset_dir);
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    if (!json_is_object(o)) {
        snprintf(err, errlen, "cannot read %s: %s", path, jerr.text);
        json_decref(o);
        return CD_ERR;
    }
    char spath[4200];
    jobdir_path(c->tc.dataset_dir, JOBDIR_STATS_JSON, spath, sizeof spath);
    json_t *stats = access(spath, R_OK) == 0 ? json_load_file(spath, 0, NULL) : NULL;
    const char *mode = json_string_value(json_object_get(o, "resize_mode"));
    c->c = image_key(o, stats, "channels", 3);
    c->w = image_key(o, stats, "width", 256);
    c->h = image_key(o, stats, "height", 256);
    c->resize_mode = mode ? cd_resize_mode_parse(mode) : CD_RESIZE_SQUASH;
    c->pad_w = image_key(o, stats, "padding_image_width", 0);
    c->pad_h = image_key(o, stats, "padding_image_height", 0);
    const char *task_name = cd_dataset_task_named(stats, o, &c->task);
    if (c->task < 0) {
        snprintf(err, errlen, "%s: task \"%s\" is not one this worker knows; update cdigits", spath, task_name);
        json_decref(stats);
        json_decref(o);
        return CD_ERR;
    }
    json_t *same = json_object_get(stats, "force_same_shape");
    c->mixed = json_is_integer(same) && json_integer_value(same) == 0;
    c->targets = 1;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(stats, "label_shape"), i, d)
        c->targets *= json_is_integer(d) && json_integer_value(d) > 0 ? (int)json_integer_value(d) : 1;
    json_decref(stats);
    json_decref(o);
    if ((c->c != 1 && c->c != 3) || c->w < 1 || c->h < 1 || c->w > 32768 || c->h > 32768 || c->resize_mode < 0) {
        snprintf(err, errlen, "%s: channels must be 1 or 3, width and height 1 to 32768, resize_mode one of %s", path,
                 cd_resize_mode_list());
        return CD_ERR;
    }
    return CD_OK;
}

cd_classifier_t *cd_classifier_open(const char *job_dir, long iteration, cd_backend_t *be, char *err,
                                    size_t errlen)
{
    cd_classifier_t *c = cd_xcalloc(1, sizeof *c);
    char path[4400];
    snprintf(c->job_dir, sizeof c->job_dir, "%s", job_dir);
    c->be = be ? be : cd_backend_select(&(cd_backend_request){.kind = CD_BACKEND_CPU}, err, errlen);
    c->own_be = !be;
    c->batch = 1;
    cd_train_config_init(&c->tc);
    if (!c->be)
        goto err;
    if (cd_train_config_load(&c->tc, job_dir, err, errlen) != CD_OK)
        goto err;
    if (read_image_shape(c, err, errlen) != CD_OK)
        goto err;
    /* a regression dataset has no labels.txt; a classification one needs it */
    jobdir_path(c->tc.dataset_dir, JOBDIR_LABELS, path, sizeof path);
    if ((c->task == CD_TASK_CLASSIFICATION || access(path, F_OK) == 0) &&
        cd_labels_load(path, &c->labels, &c->nlabels) != CD_OK) {
        snprintf(err, errlen, "%s", cd_dataset_strerror());
        goto err;
    }
    cd_input_prep_init(&c->prep, c->be, c->c, c->h, c->w, 1.0f);
    /* whitened as training whitened: every image the model saw was (input_prep.h) */
    c->prep.whiten = c->tc.aug.whitening;
    if (!(c->net = deploy_net(c, 1, NULL, &c->input, &c->output, err, errlen)))
        goto err;
    c->prep.scale = c->net->input_scale; /* as training scaled (train.c) */
    if (iteration <= 0) {
        long iters[4096];
        int n = cd_snapshot_list(job_dir, iters, 4096);
        if (n == 0) {
            snprintf(err, errlen, "%s has no snapshot yet; wait for the first one or train the model", job_dir);
            goto err;
        }
        iteration = iters[n - 1];
    }
    c->iteration = iteration;
    jobdir_snapshot_path(job_dir, iteration, JOBDIR_WEIGHTS, path, sizeof path);
    if (access(path, R_OK) != 0) {
        long iters[4096];
        int n = cd_snapshot_list(job_dir, iters, 4096);
        size_t used = (size_t)snprintf(err, errlen, "%s has no snapshot at iteration %ld; it has", job_dir, iteration);
        for (int i = 0; i < n && used < errlen; i++)
            used += (size_t)snprintf(err + used, errlen - used, " %ld", iters[i]);
        if (n == 0 && used < errlen)
            snprintf(err + used, errlen - used, " none");
        goto err;
    }
    if (cd_snapshot_load_weights(c->net, path, 0, NULL, err, errlen) != CD_OK)
        goto err;
    if (alloc_staging(c, 1, c->input, err, errlen) != CD_OK)
        goto err;
    if (cd_input_mean_load(&c->prep, c->tc.dataset_dir, c->tc.use_mean, err, errlen) != CD_OK)
        goto err;
    return c;
err:
    cd_classifier_close(c);
    return NULL;
}

void cd_classifier_close(cd_classifier_t *c)
{
    if (!c)
        return;
    if (c->be)
        free_staging(c);
    cd_input_prep_free(&c->prep);
    cd_net_free(c->bnet);
    cd_net_free(c->net);
    if (c->own_be)
        cd_backend_free(c->be);
    cd_labels_free(c->labels, c->nlabels);
    free(c->scores);
    free(c);
}

int cd_classifier_classes(const cd_classifier_t *c) { return c->nlabels; }
int cd_classifier_task(const cd_classifier_t *c) { return c->task; }
const char *cd_classifier_dataset_dir(const cd_classifier_t *c) { return c->tc.dataset_dir; }
const cd_net *cd_classifier_net(const cd_classifier_t *c) { return c->net; }
int cd_classifier_outputs(const cd_classifier_t *c) { return c->nout; }
const char *cd_classifier_label(const cd_classifier_t *c, int i)
{
    return i >= 0 && i < c->nlabels ? c->labels[i] : "?";
}
long cd_classifier_iteration(const cd_classifier_t *c) { return c->iteration; }
void cd_classifier_image_shape(const cd_classifier_t *c, int *channels, int *height, int *width)
{
    *channels = c->c;
    *height = c->h;
    *width = c->w;
}
const cd_backend_t *cd_classifier_backend(const cd_classifier_t *c) { return c->be; }
int cd_classifier_batch(const cd_classifier_t *c) { return c->bnet ? c->batch : 1; }

cd_det_frame cd_classifier_det_frame(const cd_classifier_t *c, int width, int height)
{
    return cd_det_frame_make(width, height, c->pad_w, c->pad_h, c->w, c->h);
}

double cd_classifier_macs(const cd_classifier_t *c)
{
    double macs = 0;
    for (int i = 0; i < c->net->nlayers; i++) {
        const cd_layer *l = c->net->layers[i];
        if (l->nparam < 1 || l->ntop < 1 || l->params[0]->ndim < 2 || l->params[0]->dims[0] < 1)
            continue;
        double fan_in = (double)l->params[0]->count / l->params[0]->dims[0];
        macs += fan_in * (double)l->top[0]->count;
    }
    return macs;
}

int cd_classifier_set_batch(cd_classifier_t *c, int batch, char *err, size_t errlen)
{
    if (batch < 1 || batch > 4096) {
        snprintf(err, errlen, "batch %d: use 1 to 4096 images", batch);
        return CD_ERR;
    }
    if (c->mixed)
        batch = 1; /* images of varying size go one at a time (cd_classifier_batch says so) */
    if (batch == cd_classifier_batch(c))
        return CD_OK;
    cd_net_free(c->bnet);
    c->bnet = NULL;
    c->batch = 1;
    if (batch > 1) {
        if (!(c->bnet = deploy_net(c, batch, c->net, &c->binput, &c->boutput, err, errlen))) {
            char ignored[256];
            alloc_staging(c, 1, c->input, ignored, sizeof ignored);
            return CD_ERR;
        }
        c->batch = batch;
    }
    return alloc_staging(c, c->batch, c->bnet ? c->binput : c->input, err, errlen);
}

int cd_classifier_prepare(const cd_classifier_t *c, const cd_image_t *img, cd_image_t *out, char *err,
                          size_t errlen)
{
    cd_image_t conv = {0};
    if (cd_image_convert(img, c->c, &conv, err, errlen) != CD_OK)
        return CD_ERR;
    int rc;
    cd_det_frame f = cd_classifier_det_frame(c, conv.w, conv.h);
    if (c->task == CD_TASK_DETECTION && (f.pad_w != conv.w || f.pad_h != conv.h)) {
        /* as the dataset was made: at the top left of the padding (black), then resized */
        cd_image_t padded = {0};
        rc = cd_image_pad(&conv, f.pad_w, f.pad_h, &padded, err, errlen);
        if (rc == CD_OK)
            rc = cd_image_resize(&padded, c->w, c->h, CD_RESIZE_SQUASH, 0, out, err, errlen);
        cd_image_free(&padded);
    } else if (c->task == CD_TASK_DETECTION) {
        rc = cd_image_resize(&conv, c->w, c->h, CD_RESIZE_SQUASH, 0, out, err, errlen);
    } else if (c->mixed) {
        /* its own size, scaled down (aspect kept) only where it exceeds the largest the
         * model was made for */
        double f = fmin(1.0, fmin((double)c->w / conv.w, (double)c->h / conv.h));
        int w = (int)fmax(1.0, floor(conv.w * f + 0.5)), h = (int)fmax(1.0, floor(conv.h * f + 0.5));
        if (w > c->w)
            w = c->w;
        if (h > c->h)
            h = c->h;
        rc = cd_image_scale(&conv, w, h, out, err, errlen);
    } else {
        rc = cd_image_resize(&conv, c->w, c->h, c->resize_mode, 0, out, err, errlen);
    }
    cd_image_free(&conv);
    return rc;
}

/* Fills input (n, C, oh, ow) from n prepared (c, h, w) images: centre crop and mean. */
static int fill_input(cd_classifier_t *c, cd_blob *input, const cd_image_t *const *prepared, int n, char *err,
                      size_t errlen)
{
    const uint8_t **images = cd_xmalloc(sizeof *images * (size_t)n);
    for (int i = 0; i < n; i++)
        images[i] = prepared[i]->data;
    cd_input_batch b = {.n = n, .h = prepared[0]->h, .w = prepared[0]->w, .images = images, .oy = c->oy,
                        .ox = c->ox};
    cd_input_stage_upload(&c->prep, &c->stage, &b);
    int rc = cd_input_prepare(&c->prep, &c->stage, input->dims[2], input->dims[3], input->data, err, errlen);
    free(images);
    return rc;
}

/* A model of images of varying size: the batch-1 net re-planned for img's size (or kept
 * at its crop), and img's centre crop. */
static int replan(cd_classifier_t *c, const cd_image_t *img, char *err, size_t errlen)
{
    int crop = c->tc.crop_size;
    if (crop > 0 && (img->h < crop || img->w < crop)) {
        snprintf(err, errlen, "the image is %dx%d, smaller than the model's crop size %d; give a larger image",
                 img->w, img->h, crop);
        return CD_ERR;
    }
    c->oy[0] = crop > 0 ? (img->h - crop) / 2 : 0;
    c->ox[0] = crop > 0 ? (img->w - crop) / 2 : 0;
    if (crop > 0 || (c->input->dims[2] == img->h && c->input->dims[3] == img->w))
        return CD_OK;
    return cd_net_reshape(c->net, img->h, img->w, 0, 0, err, errlen);
}

const cd_net *cd_classifier_forward(cd_classifier_t *c, const cd_image_t *const *prepared, int n, char *err,
                                    size_t errlen)
{
    int batch = cd_classifier_batch(c);
    if (n < 1 || n > batch) {
        snprintf(err, errlen, "%d images given to a classifier of batch %d", n, batch);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const cd_image_t *p = prepared[i];
        int fits = c->mixed ? p->c == c->c && p->h <= c->h && p->w <= c->w
                            : p->c == c->c && p->h == c->h && p->w == c->w;
        if (!fits) {
            snprintf(err, errlen, "image %d is %dx%dx%d, not %s the dataset's %dx%dx%d; prepare it first", i,
                     p->c, p->h, p->w, c->mixed ? "within" : "", c->c, c->h, c->w);
            return NULL;
        }
    }
    if (c->mixed && replan(c, prepared[0], err, errlen) != CD_OK)
        return NULL;
    /* one image takes the batch-1 net (the staging has room for a batch, the crop is
     * the same); a short last batch runs whole, the rows past n are ignored */
    int whole = n > 1;
    cd_net *net = whole ? c->bnet : c->net;
    if (fill_input(c, whole ? c->binput : c->input, prepared, n, err, errlen) != CD_OK)
        return NULL;
    cd_net_forward(net);
    return net;
}

int cd_classifier_run_prepared(cd_classifier_t *c, const cd_image_t *const *prepared, int n, float *probs,
                               char *err, size_t errlen)
{
    const cd_net *net = cd_classifier_forward(c, prepared, n, err, errlen);
    if (!net)
        return CD_ERR;
    download_scores(c, net == c->net ? c->output : c->boutput, n, probs);
    return CD_OK;
}

/* Prepares one image into the batch-1 net's input. */
static int load_one(cd_classifier_t *c, const cd_image_t *img, char *err, size_t errlen)
{
    cd_image_t sized = {0};
    if (cd_classifier_prepare(c, img, &sized, err, errlen) != CD_OK)
        return CD_ERR;
    const cd_image_t *one[1] = {&sized};
    int rc = fill_input(c, c->input, one, 1, err, errlen);
    cd_image_free(&sized);
    return rc;
}

int cd_classifier_run(cd_classifier_t *c, const cd_image_t *img, float *probs, char *err, size_t errlen)
{
    if (load_one(c, img, err, errlen) != CD_OK)
        return CD_ERR;
    cd_net_forward(c->net);
    download_scores(c, c->output, 1, probs);
    return CD_OK;
}

static void tensor_copy(cd_backend_t *be, cd_infer_tensor *t, const char *name, int ndim, const int *dims,
                        size_t count, const float *dev)
{
    t->name = cd_xstrdup(name);
    t->ndim = ndim;
    for (int d = 0; d < CD_MAX_DIMS; d++)
        t->dims[d] = d < ndim ? dims[d] : 1;
    t->count = count;
    t->data = cd_xmalloc(count ? count * sizeof(float) : 1);
    if (count)
        be->iface->download(be, t->data, dev, count * sizeof(float));
}

int cd_classifier_run_layers(cd_classifier_t *c, const cd_image_t *img, float *probs, cd_infer_layer **layers,
                             int *nlayers, char *err, size_t errlen)
{
    *layers = NULL;
    *nlayers = 0;
    if (load_one(c, img, err, errlen) != CD_OK)
        return CD_ERR;
    cd_net *net = c->net;
    cd_infer_layer *out = cd_xcalloc((size_t)net->nlayers, sizeof *out);
    int n = 0;
    net->rng_counter++;
    for (int i = 0; i < net->nlayers; i++) {
        cd_layer *l = net->layers[i];
        if (l->type->forward)
            l->type->forward(net, l);
        if (!strcmp(l->type->name, "Split") || l->ntop < 1)
            continue;
        cd_infer_layer *r = &out[n++];
        r->name = cd_xstrdup(l->name);
        r->type = cd_xstrdup(l->type->name);
        const cd_blob *top = l->top[0];
        tensor_copy(c->be, &r->top, top->name, top->ndim, top->dims, top->count, top->data);
        for (int p = 0; p < l->nparam; p++) {
            const cd_param *pa = l->params[p];
            tensor_copy(c->be, &r->params[r->nparams++], pa->name, pa->ndim, pa->dims, pa->count, pa->data);
            if (pa->learnable)
                r->param_count += pa->count;
        }
    }
    download_scores(c, c->output, 1, probs);
    *layers = out;
    *nlayers = n;
    return CD_OK;
}

void cd_infer_layers_free(cd_infer_layer *layers, int n)
{
    if (!layers)
        return;
    for (int i = 0; i < n; i++) {
        free(layers[i].name);
        free(layers[i].type);
        free(layers[i].top.name);
        free(layers[i].top.data);
        for (int p = 0; p < layers[i].nparams; p++) {
            free(layers[i].params[p].name);
            free(layers[i].params[p].data);
        }
    }
    free(layers);
}

/* ---- export ---------------------------------------------------------------------- */

/* Hard link src as dst (same file system: the export folder lies in the job folder),
 * else a copy. */
static int put_file(const char *src, const char *dst, char *err, size_t errlen)
{
    unlink(dst);
    if (link(src, dst) == 0)
        return CD_OK;
    size_t len = 0;
    char *data = cd_read_file(src, &len);
    if (!data) {
        snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
        return CD_ERR;
    }
    int rc = cd_write_file_atomic(dst, data, len);
    if (rc != CD_OK)
        snprintf(err, errlen, "cannot write %s: %s", dst, strerror(errno));
    free(data);
    return rc;
}

static int put_text(const char *dir, const char *name, const char *text, char *err, size_t errlen)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!text || cd_write_file_atomic(path, text, strlen(text)) != CD_OK) {
        snprintf(err, errlen, "cannot write %s: %s", path, text ? strerror(errno) : "out of memory");
        return CD_ERR;
    }
    return CD_OK;
}

static const char *mean_name(int use_mean)
{
    return use_mean == CD_MEAN_IMAGE ? "image" : use_mean == CD_MEAN_PIXEL ? "pixel" : "none";
}

int cd_classifier_export(const cd_classifier_t *c, const char *out_dir, const char *job_name, char names[][64],
                         int max, char *err, size_t errlen)
{
    int n = 0, rc = CD_ERR;
    char src[4400], dst[4400];
    char *deploy = NULL, *solver = NULL, *info_text = NULL;
    json_t *info = NULL;
#define NAME(x) (n < max ? (void)snprintf(names[n++], 64, "%s", (x)) : (void)0)
    double epoch = -1;
    cd_snapshot_info snaps[4096];
    int ns = cd_snapshot_epochs(c->job_dir, snaps, 4096);
    for (int i = 0; i < ns; i++)
        if (snaps[i].iteration == c->iteration)
            epoch = snaps[i].epoch;
    double per_epoch = epoch > 0 ? (double)c->iteration / epoch : 0;

    deploy = cd_net_write_deploy(c->net);
    if (put_text(out_dir, jobdir_name(JOBDIR_DEPLOY), deploy, err, errlen) != CD_OK)
        goto out;
    NAME(jobdir_name(JOBDIR_DEPLOY));
    jobdir_path(out_dir, JOBDIR_ORIGINAL, dst, sizeof dst);
    if (put_file(c->tc.network, dst, err, errlen) != CD_OK)
        goto out;
    NAME(jobdir_name(JOBDIR_ORIGINAL));
    solver = cd_solver_write(&c->tc, per_epoch, jobdir_name(JOBDIR_ORIGINAL));
    if (put_text(out_dir, jobdir_name(JOBDIR_SOLVER), solver, err, errlen) != CD_OK)
        goto out;
    NAME(jobdir_name(JOBDIR_SOLVER));
    jobdir_path(c->tc.dataset_dir, JOBDIR_LABELS, src, sizeof src);
    jobdir_path(out_dir, JOBDIR_LABELS, dst, sizeof dst);
    if (put_file(src, dst, err, errlen) != CD_OK)
        goto out;
    NAME(jobdir_name(JOBDIR_LABELS));
    int have_mean = 0;
    static const jobdir_file mean_files[] = {JOBDIR_MEAN_BIN, JOBDIR_MEAN_PNG};
    for (int i = 0; i < 2; i++) {
        jobdir_path(c->tc.dataset_dir, mean_files[i], src, sizeof src);
        if (access(src, R_OK) != 0)
            continue;
        jobdir_path(out_dir, mean_files[i], dst, sizeof dst);
        if (put_file(src, dst, err, errlen) != CD_OK)
            goto out;
        NAME(jobdir_name(mean_files[i]));
        have_mean |= i == 0;
    }
    char weights[64];
    jobdir_snapshot_name(c->iteration, JOBDIR_WEIGHTS, weights, sizeof weights);
    snprintf(src, sizeof src, "%s/%s", c->job_dir, weights);
    snprintf(dst, sizeof dst, "%s/%s", out_dir, weights);
    if (put_file(src, dst, err, errlen) != CD_OK)
        goto out;
    NAME(weights);
    int oh = c->input->dims[2], ow = c->input->dims[3];
    info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[i,i,i], s:s, s:s, s:I, s:o, s:i, s:s}", "name",
                     job_name ? job_name : "", "framework", "cdigits", "snapshot file", weights, "model file",
                     jobdir_name(JOBDIR_DEPLOY), "network file", jobdir_name(JOBDIR_ORIGINAL), "solver file",
                     jobdir_name(JOBDIR_SOLVER),
                     "labels file", jobdir_name(JOBDIR_LABELS), "image dimensions", c->h, c->w, c->c, "image resize mode",
                     cd_resize_mode_name(c->resize_mode), "use mean", mean_name(c->tc.use_mean),
                     "snapshot iteration", (json_int_t)c->iteration, "snapshot epoch",
                     epoch >= 0 ? json_real(epoch) : json_null(), "num classes", c->nlabels, "version",
                     CDIGITS_VERSION);
    if (!info) {
        snprintf(err, errlen, "cannot build info.json");
        goto out;
    }
    if (have_mean) {
        json_object_set_new(info, "mean file", json_string(jobdir_name(JOBDIR_MEAN_BIN)));
        json_object_set_new(info, "mean image file", json_string(jobdir_name(JOBDIR_MEAN_PNG)));
    }
    if (oh != c->h || ow != c->w)
        json_object_set_new(info, "crop size", json_integer(oh));
    info_text = json_dumps(info, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (put_text(out_dir, jobdir_name(JOBDIR_INFO_JSON), info_text, err, errlen) != CD_OK)
        goto out;
    NAME("info.json");
#undef NAME
    rc = CD_OK;
out:
    free(deploy);
    free(solver);
    free(info_text);
    json_decref(info);
    return rc == CD_OK ? n : CD_ERR;
}
