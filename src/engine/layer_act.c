/* Elementwise layers: ReLU, Sigmoid, TanH, Power and Dropout. */
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

static void same_shape(cd_layer *l)
{
    if (l->top[0] != l->bottom[0])
        cd_blob_set_shape(l->top[0], l->bottom[0]->ndim, l->bottom[0]->dims);
}

/* ---- activations ------------------------------------------------------------------- */

typedef struct act_priv {
    int act;
    float slope;
} act_priv;

static int act_setup_kind(cd_layer *l, int act, float slope)
{
    act_priv *a = cd_xcalloc(1, sizeof *a);
    a->act = act;
    a->slope = slope;
    l->priv = a;
    same_shape(l);
    return CD_OK;
}

static int relu_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    float slope = l->param ? (float)cd_pt_float(l->param, "negative_slope", 0.0) : 0.0f;
    if (slope < 0 && l->top[0] == l->bottom[0])
        return cd_layer_error(l, err, errlen, "a negative negative_slope needs a separate top; "
                              "give the top another name");
    return act_setup_kind(l, CD_ACT_RELU, slope);
}

static int sigmoid_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    return act_setup_kind(l, CD_ACT_SIGMOID, 0);
}

static int tanh_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    return act_setup_kind(l, CD_ACT_TANH, 0);
}

static void act_forward(cd_net *net, cd_layer *l)
{
    act_priv *a = l->priv;
    OPS(net)->act_forward(BE(net), a->act, a->slope, l->bottom[0]->count, l->bottom[0]->data,
                          l->top[0]->data);
}

static void act_backward(cd_net *net, cd_layer *l)
{
    act_priv *a = l->priv;
    if (l->bottom[0]->need_backward)
        OPS(net)->act_backward(BE(net), a->act, a->slope, l->bottom[0]->count, l->bottom[0]->data,
                               l->top[0]->data, l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- Power: y = (shift + scale*x)^power ---------------------------------------------- */

typedef struct power_priv {
    float power, scale, shift;
} power_priv;

static int power_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    power_priv *p = cd_xcalloc(1, sizeof *p);
    p->power = l->param ? (float)cd_pt_float(l->param, "power", 1.0) : 1.0f;
    p->scale = l->param ? (float)cd_pt_float(l->param, "scale", 1.0) : 1.0f;
    p->shift = l->param ? (float)cd_pt_float(l->param, "shift", 0.0) : 0.0f;
    l->priv = p;
    same_shape(l);
    return CD_OK;
}

static void power_forward(cd_net *net, cd_layer *l)
{
    power_priv *p = l->priv;
    OPS(net)->power_forward(BE(net), l->bottom[0]->count, p->power, p->scale, p->shift,
                            l->bottom[0]->data, l->top[0]->data);
}

static void power_backward(cd_net *net, cd_layer *l)
{
    power_priv *p = l->priv;
    if (l->bottom[0]->need_backward)
        OPS(net)->power_backward(BE(net), l->bottom[0]->count, p->power, p->scale, p->shift,
                                 l->bottom[0]->data, l->top[0]->diff, l->bottom[0]->diff);
}

/* ---- Dropout ------------------------------------------------------------------------ */

typedef struct dropout_priv {
    float ratio;
    uint64_t seed;
    float *mask;
} dropout_priv;

static int dropout_setup(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    dropout_priv *d = cd_xcalloc(1, sizeof *d);
    l->priv = d;
    d->ratio = l->param ? (float)cd_pt_float(l->param, "dropout_ratio", 0.5) : 0.5f;
    if (d->ratio < 0 || d->ratio >= 1)
        return cd_layer_error(l, err, errlen, "dropout_ratio %g must be in [0, 1)", d->ratio);
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = l->name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    d->seed = net->opts.seed ^ h;
    same_shape(l);
    return CD_OK;
}

static int dropout_init(cd_net *net, cd_layer *l, char *err, size_t errlen)
{
    dropout_priv *d = l->priv;
    if (!net->phase_train)
        return CD_OK;
    d->mask = cd_layer_buffer(net, l, l->bottom[0]->count);
    if (!d->mask)
        return cd_layer_error(l, err, errlen, "out of memory for the dropout mask");
    return CD_OK;
}

static void dropout_forward(cd_net *net, cd_layer *l)
{
    dropout_priv *d = l->priv;
    cd_blob *x = l->bottom[0], *y = l->top[0];
    if (net->phase_train)
        OPS(net)->dropout_forward(BE(net), x->count, d->ratio, d->seed, net->rng_counter, x->data,
                                  d->mask, y->data);
    else if (x != y)
        OPS(net)->copy(BE(net), y->data, x->data, x->count * sizeof(float));
}

static void dropout_backward(cd_net *net, cd_layer *l)
{
    dropout_priv *d = l->priv;
    cd_blob *x = l->bottom[0], *y = l->top[0];
    if (!x->need_backward)
        return;
    if (net->phase_train)
        OPS(net)->mul(BE(net), x->count, y->diff, d->mask, x->diff);
    else if (x != y)
        OPS(net)->copy(BE(net), x->diff, y->diff, x->count * sizeof(float));
}

const cd_layer_type cd_layers_act[] = {
    {.name = "ReLU", .param_field = "relu_param", .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1,
     .max_tops = 1, .flags = CD_LAYER_IN_PLACE, .setup = relu_setup, .forward = act_forward,
     .backward = act_backward},
    {.name = "Sigmoid", .param_field = "sigmoid_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .flags = CD_LAYER_IN_PLACE, .setup = sigmoid_setup,
     .forward = act_forward, .backward = act_backward},
    {.name = "TanH", .param_field = "tanh_param", .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1,
     .max_tops = 1, .flags = CD_LAYER_IN_PLACE, .setup = tanh_setup, .forward = act_forward,
     .backward = act_backward},
    {.name = "Power", .param_field = "power_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .setup = power_setup, .forward = power_forward,
     .backward = power_backward},
    {.name = "Dropout", .param_field = "dropout_param", .min_bottoms = 1, .max_bottoms = 1,
     .min_tops = 1, .max_tops = 1, .flags = CD_LAYER_IN_PLACE, .setup = dropout_setup,
     .init = dropout_init, .forward = dropout_forward, .backward = dropout_backward},
    {.name = NULL},
};
