/* Data and Input layers: their tops are filled from outside the net (the data
 * pipeline, or the caller for Input). */
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

int cd_data_top_is_label(const cd_layer *l, int t)
{
    return t == 1 || (t == 0 && l->ntop == 1 && !strcmp(l->top[0]->name, "label"));
}

/* Data: tops data (N,C,H,W) with H = W = crop when cropping, and label (N), or
 * (N, c, h, w) for a generic dataset's labels. */
static int data_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    const cd_pt_node *dp = cd_pt_get(l->def, "data_param");
    const cd_pt_node *tp = cd_pt_get(l->def, "transform_param");
    int batch = net->opts.batch > 0 ? net->opts.batch : (dp ? (int)cd_pt_int(dp, "batch_size", 0) : 0);
    if (batch <= 0)
        return cd_layer_error(l, err, errlen, "no batch size; set data_param { batch_size: N } "
                              "or the job's batch size");
    if (net->opts.input_c <= 0 || net->opts.input_h <= 0 || net->opts.input_w <= 0)
        return cd_layer_error(l, err, errlen, "the image shape is unknown; give it (--input CxHxW) "
                              "or train on a dataset");
    int crop = net->opts.crop > 0 ? net->opts.crop : (tp ? (int)cd_pt_int(tp, "crop_size", 0) : 0);
    int h = net->opts.input_h, w = net->opts.input_w;
    if (crop > 0) {
        if (crop > h || crop > w)
            return cd_layer_error(l, err, errlen, "crop size %d is larger than the %dx%d images; "
                                  "lower the crop size or make the dataset larger", crop, h, w);
        h = w = crop;
    }
    if (net->reshape_h > 0) {
        h = net->reshape_h;
        w = net->reshape_w;
    }
    int dims[4] = {batch, net->opts.input_c, h, w};
    int ldims[4] = {batch, net->opts.label_c, net->opts.label_h, net->opts.label_w};
    for (int t = 0; t < l->ntop; t++) {
        if (!cd_data_top_is_label(l, t))
            cd_blob_set_shape(l->top[t], 4, dims);
        else if (net->opts.label_c > 0)
            cd_blob_set_shape(l->top[t], 4, ldims);
        else
            cd_blob_set_shape(l->top[t], 1, dims);
    }
    return CD_OK;
}

/* Input: one shape per top from input_param (batch replaced by opts.batch when set). */
static int input_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    if (!l->def) {
        /* made by the engine with its shape; cd_net_reshape gives it another size */
        cd_blob *b = l->top[0];
        if (net->reshape_h > 0 && b->ndim == 4) {
            int dims[4] = {b->dims[0], b->dims[1], net->reshape_h, net->reshape_w};
            cd_blob_set_shape(b, 4, dims);
        }
        return CD_OK;
    }
    const cd_pt_node *ip = l->param;
    int nshape = ip ? cd_pt_count(ip, "shape") : 0;
    if (nshape != 1 && nshape != l->ntop)
        return cd_layer_error(l, err, errlen, "input_param needs one shape, or one per top (%d)", l->ntop);
    for (int t = 0; t < l->ntop; t++) {
        const cd_pt_node *s = cd_pt_nth(ip, "shape", nshape == 1 ? 0 : t);
        int nd = cd_pt_count(s, "dim"), dims[CD_MAX_DIMS];
        if (nd < 1 || nd > CD_MAX_DIMS)
            return cd_layer_error(l, err, errlen, "shape needs 1 to 4 dim values, has %d", nd);
        for (int d = 0; d < nd; d++) {
            dims[d] = (int)strtol(cd_pt_nth(s, "dim", d)->text, NULL, 10);
            if (dims[d] <= 0)
                return cd_layer_error(l, err, errlen, "dim %d is %d; dimensions must be positive", d, dims[d]);
        }
        if (net->opts.batch > 0)
            dims[0] = net->opts.batch;
        if (t == 0 && nd == 4 && net->reshape_h > 0) {
            dims[2] = net->reshape_h;
            dims[3] = net->reshape_w;
        }
        cd_blob_set_shape(l->top[t], nd, dims);
    }
    return CD_OK;
}

const cd_layer_type cd_layers_data[] = {
    {.name = "Data", .param_field = "data_param", .min_bottoms = 0, .max_bottoms = 0,
     .min_tops = 1, .max_tops = 2, .flags = CD_LAYER_DATA, .setup = data_setup},
    {.name = "Input", .param_field = "input_param", .min_bottoms = 0, .max_bottoms = 0,
     .min_tops = 1, .max_tops = CD_LAYER_MAX_BLOBS, .flags = CD_LAYER_DATA, .setup = input_setup},
    {.name = NULL},
};
