/* What Convolution shares with the layers built on its geometry (Deconvolution), and
 * the layers' state that the exporters read. */
#ifndef CDIGITS_LAYER_CONV_H
#define CDIGITS_LAYER_CONV_H

#include "engine_internal.h"

/* The state of Convolution and Deconvolution: the convolution they run, and bias_term. */
typedef struct cd_conv_priv {
    cd_conv_desc d;
    int bias;
} cd_conv_priv;

/* The state of Pooling: its geometry, and the backend's record of MAX's choices where
 * the backend keeps one (cd_be_pool_mask_size; training only, since a forward without
 * a backward needs none), else NULL. */
typedef struct cd_pool_priv {
    cd_pool_desc d;
    float *mask;
} cd_pool_priv;

/* Give l a zeroed cd_conv_priv (l->priv), read its convolution_param into it
 * (cd_conv_param_read) and take n and the bottom's side from l's first bottom: the
 * convolution's input (c, h, w), or with transposed its output (k, oh, ow), num_output
 * filling the other side's channels. Checks group against both channel counts. The
 * priv, or NULL with a message naming the layer. */
cd_conv_priv *cd_conv_priv_read(cd_layer *l, int transposed, char *err, size_t errlen);
/* Shape l's top as ydims (N, C, H, W) and add its weights (d->k, d->c/group, kh, kw)
 * and, with bias_term, a bias of C values. CD_OK, or CD_ERR with a message. */
int cd_conv_top_params(cd_net *net, cd_layer *l, const cd_conv_priv *c, const int ydims[4],
                       char *err, size_t errlen);
/* Read l's convolution_param into d->k (num_output), kh/kw, sh/sw, ph/pw, dh/dw and
 * group, and *bias (bias_term); l's first bottom must be 4-D. The caller fills the
 * shapes. CD_OK, or CD_ERR with a message naming the layer. */
int cd_conv_param_read(const cd_layer *l, cd_conv_desc *d, int *bias, char *err, size_t errlen);

#endif
