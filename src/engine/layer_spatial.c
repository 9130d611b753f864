/* Layers that change a map's spatial size for dense prediction (FCN): Deconvolution
 * (learned upsampling) and Crop (align a map with a reference blob). */
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"
#include "layer_conv.h"

/* ---- Deconvolution ---------------------------------------------------------------- */

/*
 * Caffe's DeconvolutionLayer is the transpose of a convolution, so it runs on the
 * convolution ops with the roles of input and output swapped: d describes the
 * convolution that maps the deconvolution's top (n, num_output, OH, OW) to its bottom
 * (n, C_in, H, W), with weights (C_in, num_output/group, kh, kw), Caffe's layout.
 *   forward:        y  = conv_backward_data(w, x)
 *   data gradient:  dx = conv_forward(dy, w)
 *   weight grad:    dw += conv_backward_filter(x: dy, dy: x)
 * OH = sh*(H-1) + dh*(kh-1) + 1 - 2*ph, likewise OW.
 */
static int deconv_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    cd_conv_priv *c = cd_conv_priv_read(l, 1, err, errlen);
    if (!c)
        return CD_ERR;
    cd_conv_desc *d = &c->d;
    d->h = d->sh * (d->oh - 1) + d->dh * (d->kh - 1) + 1 - 2 * d->ph;
    d->w = d->sw * (d->ow - 1) + d->dw * (d->kw - 1) + 1 - 2 * d->pw;
    if (d->h <= 0 || d->w <= 0)
        return cd_layer_error(l, err, errlen, "pad %dx%d leaves no output for its %dx%d input "
                              "(output %dx%d); lower pad or raise kernel_size or stride",
                              d->ph, d->pw, d->oh, d->ow, d->h, d->w);
    int ydims[4] = {d->n, d->c, d->h, d->w};
    return cd_conv_top_params(net, l, c, ydims, err, errlen);
}

static void deconv_forward(cd_net *net, cd_layer *l)
{
    cd_conv_priv *c = l->priv;
    const cd_conv_desc *d = &c->d;
    float *y = l->top[0]->data;
    OPS(net)->conv_backward_data(BE(net), d, l->params[0]->data, l->bottom[0]->data, y);
    if (c->bias)
        OPS(net)->channel_affine(BE(net), d->n, d->c, d->h * d->w, y, NULL, l->params[1]->data, y);
}

static void deconv_backward(cd_net *net, cd_layer *l)
{
    cd_conv_priv *c = l->priv;
    const cd_conv_desc *d = &c->d;
    cd_param *w = l->params[0], *b = c->bias ? l->params[1] : NULL;
    const float *dy = l->top[0]->diff;
    if (w->lr_mult != 0 || net->opts.force_backward)
        OPS(net)->conv_backward_filter(BE(net), d, dy, l->bottom[0]->data, w->diff, NULL);
    if (b && (b->lr_mult != 0 || net->opts.force_backward))
        OPS(net)->channel_affine_grad(BE(net), d->n, d->c, d->h * d->w, NULL, dy, NULL, b->diff);
    if (l->bottom[0]->need_backward)
        OPS(net)->conv_forward(BE(net), d, dy, w->data, NULL, l->bottom[0]->diff);
}

/* ---- Crop --------------------------------------------------------------------------- */

/*
 * Caffe's CropLayer: the top is bottom 0 cut to bottom 1's shape on the axes from
 * `axis` on, starting at `offset` (none: 0; one value: every cropped axis; else one
 * per cropped axis). The copy runs as one strided 2-D block (the last two axes) per
 * index of the axes before them; the backward zeroes bottom 0's gradient and scatters
 * the top's into the window. Bottom 1 only gives a shape: its gradient is 0.
 */
typedef struct crop_priv {
    int ndim;
    int bdims[CD_MAX_DIMS], tdims[CD_MAX_DIMS];
    size_t base; /* bottom 0's offset of the window's first element */
} crop_priv;

static int crop_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    (void)net;
    const cd_pt_node *p = l->param;
    cd_blob *x = l->bottom[0], *ref = l->bottom[1];
    char s0[64], s1[64];
    if (x->ndim != ref->ndim)
        return cd_layer_error(l, err, errlen, "bottom %s is %s but the reference %s is %s; they "
                              "need the same number of axes", x->name, cd_blob_shape_str(x, s0, sizeof s0),
                              ref->name, cd_blob_shape_str(ref, s1, sizeof s1));
    int axis = p ? (int)cd_pt_int(p, "axis", 2) : 2;
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis >= x->ndim)
        return cd_layer_error(l, err, errlen, "axis %d is outside the %d-D bottoms", axis, x->ndim);
    int noff = p ? cd_pt_count(p, "offset") : 0;
    if (noff > 1 && noff != x->ndim - axis)
        return cd_layer_error(l, err, errlen, "has %d offsets for %d cropped axes (%d to %d); give "
                              "one offset, or one per cropped axis", noff, x->ndim - axis, axis,
                              x->ndim - 1);
    crop_priv *c = cd_xcalloc(1, sizeof *c);
    l->priv = c;
    c->ndim = x->ndim;
    size_t stride = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
        c->bdims[i] = x->dims[i];
        c->tdims[i] = x->dims[i];
        if (i >= axis) {
            int off = noff ? (int)strtol(cd_pt_nth(p, "offset", noff > 1 ? i - axis : 0)->text, NULL, 10) : 0;
            if (off < 0 || off + ref->dims[i] > x->dims[i])
                return cd_layer_error(l, err, errlen, "offset %d with the reference %s (%s) runs "
                                      "past axis %d of %s (%s); lower the offset or crop a larger "
                                      "bottom", off, ref->name, cd_blob_shape_str(ref, s1, sizeof s1),
                                      i, x->name, cd_blob_shape_str(x, s0, sizeof s0));
            c->tdims[i] = ref->dims[i];
            c->base += (size_t)off * stride;
        }
        stride *= (size_t)x->dims[i];
    }
    cd_blob_set_shape(l->top[0], x->ndim, c->tdims);
    return CD_OK;
}

/* Copy between the window of bottom 0 and the whole top: to_top 1 copies bottom ->
 * top, 0 top -> bottom. */
static void crop_copy(cd_net *net, const crop_priv *c, float *b, float *t, int to_top)
{
    int nd = c->ndim;
    int rows = nd > 1 ? c->tdims[nd - 2] : 1;
    size_t cols = (size_t)c->tdims[nd - 1], bcols = (size_t)c->bdims[nd - 1];
    size_t blocks = nd > 2 ? cd_dims_count(c->tdims, 0, nd - 2) : 1;
    size_t bblock = nd > 1 ? bcols * (size_t)c->bdims[nd - 2] : bcols, tblock = cols * (size_t)rows;
    for (size_t k = 0; k < blocks; k++) {
        /* bottom offset of block k: its index on the leading axes, in bottom strides */
        size_t rem = k, boff = 0, bstride = bblock;
        for (int i = nd - 3; i >= 0; i--) {
            boff += (rem % (size_t)c->tdims[i]) * bstride;
            rem /= (size_t)c->tdims[i];
            bstride *= (size_t)c->bdims[i];
        }
        float *bw = b + c->base + boff;
        if (to_top)
            OPS(net)->copy_strided(BE(net), rows, cols, bw, bcols, t + k * tblock, cols, 0);
        else
            OPS(net)->copy_strided(BE(net), rows, cols, t + k * tblock, cols, bw, bcols, 0);
    }
}

static void crop_forward(cd_net *net, cd_layer *l)
{
    crop_copy(net, l->priv, l->bottom[0]->data, l->top[0]->data, 1);
}

static void crop_backward(cd_net *net, cd_layer *l)
{
    cd_blob *x = l->bottom[0], *ref = l->bottom[1];
    if (x->need_backward) {
        OPS(net)->set(BE(net), x->count, 0.0f, x->diff);
        crop_copy(net, l->priv, x->diff, l->top[0]->diff, 0);
    }
    if (ref->need_backward)
        OPS(net)->set(BE(net), ref->count, 0.0f, ref->diff);
}

const cd_layer_type cd_layers_spatial[] = {
    {.name = "Deconvolution", .param_field = "convolution_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = deconv_setup, .forward = deconv_forward,
     .backward = deconv_backward},
    {.name = "Crop", .param_field = "crop_param", .min_bottoms = 2, .max_bottoms = 2,
     .min_tops = 1, .max_tops = 1, .setup = crop_setup, .forward = crop_forward,
     .backward = crop_backward},
    {.name = NULL},
};
