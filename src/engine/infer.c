/* Inference with a model job's snapshot (see infer.h). */
#include "cdigits/infer.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/train.h"
#include "cdigits/util.h"

struct cd_classifier {
    cd_backend_t *be;
    int own_be;
    cd_net *net;
    cd_blob *input, *output;
    char **labels;
    int nlabels;
    int c, h, w;          /* stored image size of the dataset */
    int resize_mode;
    float *mean;          /* device (c, h, w) or NULL */
    uint8_t *pixels;      /* device staging */
    int *oy, *ox;
    uint8_t *mirror;
    float scale;
    long iteration;
};

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int cd_snapshot_list(const char *job_dir, long *iters, int max)
{
    DIR *d = opendir(job_dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        long it;
        char tail[16];
        if (sscanf(e->d_name, "snapshot_iter_%ld.%15s", &it, tail) == 2 && !strcmp(tail, "cdw"))
            iters[n++] = it;
    }
    closedir(d);
    qsort(iters, (size_t)n, sizeof *iters, cmp_long);
    return n;
}

static int setup_net(cd_classifier_t *c, const cd_train_config *tc, int classes, char *err,
                     size_t errlen)
{
    cd_net_opts opts = {.stage = "deploy", .batch = 1, .input_c = c->c, .input_h = c->h,
                        .input_w = c->w, .crop = tc->crop_size, .num_classes = classes};
    if (!(c->net = cd_net_load(tc->network, &opts, err, errlen)))
        return CD_ERR;
    if (cd_net_alloc(c->net, c->be, NULL, err, errlen) != CD_OK)
        return CD_ERR;
    c->input = cd_net_blob(c->net, "data");
    cd_layer *last = c->net->layers[c->net->nlayers - 1];
    c->output = last->top[0];
    if (!c->input || c->input->ndim != 4) {
        snprintf(err, errlen, "%s: the deploy stage has no 4-D input named data", tc->network);
        return CD_ERR;
    }
    if (c->output->count != (size_t)classes) {
        snprintf(err, errlen, "%s: the deploy stage ends in %s with %zu values but the dataset has "
                 "%d classes", tc->network, c->output->name, c->output->count, classes);
        return CD_ERR;
    }
    return CD_OK;
}

cd_classifier_t *cd_classifier_open(const char *job_dir, long iteration, cd_backend_t *be,
                                    char *err, size_t errlen)
{
    cd_classifier_t *c = cd_xcalloc(1, sizeof *c);
    cd_train_config tc;
    cd_dataset_config_t dc;
    int have_dc = 0;
    char path[4400];
    cd_train_config_init(&tc);
    if (cd_train_config_load(&tc, job_dir, err, errlen) != CD_OK)
        goto err;
    snprintf(path, sizeof path, "%s/labels.txt", tc.dataset_dir);
    if (cd_labels_load(path, &c->labels, &c->nlabels) != CD_OK) {
        snprintf(err, errlen, "%s", cd_dataset_strerror());
        goto err;
    }
    cd_dataset_config_init(&dc);
    have_dc = 1;
    snprintf(path, sizeof path, "%s/dataset.json", tc.dataset_dir);
    if (cd_dataset_config_load(path, &dc, err, errlen) != CD_OK)
        goto err;
    c->c = dc.channels;
    c->h = dc.height;
    c->w = dc.width;
    c->resize_mode = dc.resize_mode;
    c->be = be ? be : cd_backend_cpu_new(0);
    c->own_be = !be;
    if (setup_net(c, &tc, c->nlabels, err, errlen) != CD_OK)
        goto err;
    if (iteration <= 0) {
        long iters[4096];
        int n = cd_snapshot_list(job_dir, iters, 4096);
        if (n == 0) {
            snprintf(err, errlen, "%s has no snapshot yet; wait for the first one or train the model",
                     job_dir);
            goto err;
        }
        iteration = iters[n - 1];
    }
    c->iteration = iteration;
    snprintf(path, sizeof path, "%s/snapshot_iter_%ld.cdw", job_dir, iteration);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "%s has no snapshot at iteration %ld", job_dir, iteration);
        goto err;
    }
    if (cd_snapshot_load_weights(c->net, path, 1, NULL, err, errlen) != CD_OK)
        goto err;
    const cd_backend_iface *o = c->be->iface;
    size_t image = (size_t)c->c * c->h * c->w;
    c->pixels = o->alloc(c->be, image);
    c->oy = o->alloc(c->be, sizeof(int));
    c->ox = o->alloc(c->be, sizeof(int));
    c->mirror = o->alloc(c->be, 1);
    if (!c->pixels || !c->oy || !c->ox || !c->mirror) {
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    c->scale = 1.0f;
    if (tc.use_mean != CD_MEAN_NONE) {
        int mc, mh, mw;
        float *mean = NULL;
        snprintf(path, sizeof path, "%s/mean.bin", tc.dataset_dir);
        if (cd_mean_load(path, &mc, &mh, &mw, &mean) != CD_OK) {
            snprintf(err, errlen, "%s", cd_dataset_strerror());
            goto err;
        }
        if (tc.use_mean == CD_MEAN_PIXEL) {
            size_t plane = (size_t)mh * mw;
            for (int ch = 0; ch < mc; ch++) {
                double s = 0;
                for (size_t i = 0; i < plane; i++)
                    s += mean[ch * plane + i];
                for (size_t i = 0; i < plane; i++)
                    mean[ch * plane + i] = (float)(s / (double)plane);
            }
        }
        c->mean = o->alloc(c->be, image * sizeof(float));
        if (c->mean)
            o->upload(c->be, c->mean, mean, image * sizeof(float));
        free(mean);
        if (!c->mean) {
            snprintf(err, errlen, "out of memory");
            goto err;
        }
    }
    cd_dataset_config_free(&dc);
    return c;
err:
    if (have_dc)
        cd_dataset_config_free(&dc);
    cd_classifier_close(c);
    return NULL;
}

void cd_classifier_close(cd_classifier_t *c)
{
    if (!c)
        return;
    if (c->be) {
        const cd_backend_iface *o = c->be->iface;
        o->free(c->be, c->mean);
        o->free(c->be, c->pixels);
        o->free(c->be, c->oy);
        o->free(c->be, c->ox);
        o->free(c->be, c->mirror);
    }
    cd_net_free(c->net);
    if (c->own_be)
        cd_backend_free(c->be);
    cd_labels_free(c->labels, c->nlabels);
    free(c);
}

int cd_classifier_classes(const cd_classifier_t *c) { return c->nlabels; }
const char *cd_classifier_label(const cd_classifier_t *c, int i)
{
    return i >= 0 && i < c->nlabels ? c->labels[i] : "?";
}
long cd_classifier_iteration(const cd_classifier_t *c) { return c->iteration; }

int cd_classifier_run(cd_classifier_t *c, const cd_image_t *img, float *probs, char *err,
                      size_t errlen)
{
    cd_image_t conv = {0}, sized = {0};
    const cd_backend_iface *o = c->be->iface;
    if (cd_image_convert(img, c->c, &conv, err, errlen) != CD_OK)
        return CD_ERR;
    int rc = cd_image_resize(&conv, c->w, c->h, c->resize_mode, 0, &sized, err, errlen);
    cd_image_free(&conv);
    if (rc != CD_OK)
        return CD_ERR;
    int oy = (c->h - c->input->dims[2]) / 2, ox = (c->w - c->input->dims[3]) / 2;
    uint8_t mirror = 0;
    o->upload(c->be, c->pixels, sized.data, (size_t)c->c * c->h * c->w);
    o->upload(c->be, c->oy, &oy, sizeof oy);
    o->upload(c->be, c->ox, &ox, sizeof ox);
    o->upload(c->be, c->mirror, &mirror, 1);
    cd_image_free(&sized);
    o->prepare_batch(c->be, 1, c->c, c->h, c->w, c->input->dims[2], c->input->dims[3], c->pixels,
                     c->oy, c->ox, c->mirror, c->mean, c->scale, c->input->data);
    cd_net_forward(c->net);
    o->download(c->be, probs, c->output->data, c->output->count * sizeof(float));
    return CD_OK;
}
