/*
 * A network built from a Caffe NetParameter for one stage (train, val or deploy):
 * layers in file order, blobs (data + gradient), learnable parameters carved out of
 * one arena per network, and forward/backward passes that call backend ops only.
 *
 * Building is split in two so that a definition can be checked without memory:
 *   cd_net_build  - resolve stages, names, shapes and parameter shapes (no allocation)
 *   cd_net_alloc  - allocate blobs, parameters and layer buffers on the backend and
 *                   fill the parameters (or share them with another net)
 */
#ifndef CDIGITS_NET_H
#define CDIGITS_NET_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/backend.h"
#include "cdigits/prototxt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CD_MAX_DIMS 4

typedef struct cd_net cd_net;
typedef struct cd_layer cd_layer;

/* A blob: a named tensor with its gradient. ndim 0 is a scalar (loss, accuracy). */
typedef struct cd_blob {
    char *name;
    int ndim;
    int dims[CD_MAX_DIMS];
    size_t count;
    float *data;           /* device memory of the net's backend */
    float *diff;
    size_t cap;            /* floats data and diff hold (>= count; cd_net_reshape grows it) */
    struct cd_blob *alias; /* shares data and diff with this blob (Flatten) */
    int need_backward;     /* some learnable parameter lies upstream */
} cd_blob;

/* A learnable (or stored) parameter tensor of a layer. */
typedef struct cd_param {
    char *name;            /* "<layer>/<index>", e.g. "conv1/0" */
    int ndim;
    int dims[CD_MAX_DIMS];
    size_t count;
    size_t offset;         /* floats from the start of the net's arenas */
    float *data, *diff, *h1, *h2;
    float lr_mult, decay_mult;
    int learnable;         /* 0 for stored statistics (BatchNorm) */
    const cd_pt_node *filler; /* FillerParameter or NULL (constant 0) */
    float filler_default;  /* value of the default constant filler */
} cd_param;

/* One row of the layer table: a layer type written once against the backend. */
typedef struct cd_layer_type {
    const char *name;        /* "Convolution" */
    const char *param_field; /* "convolution_param", or NULL */
    const char *param_field2; /* a second *_param message it reads, or NULL */
    int min_bottoms, max_bottoms, min_tops, max_tops;
    unsigned flags;          /* CD_LAYER_* */
    /* Read parameters, check bottoms, set top shapes, declare parameters with
     * cd_layer_add_param. No device memory yet. CD_OK or CD_ERR with a message. */
    int (*setup)(cd_net *net, cd_layer *l, char *err, size_t errlen);
    /* Allocate layer buffers (optional). */
    int (*init)(cd_net *net, cd_layer *l, char *err, size_t errlen);
    void (*forward)(cd_net *net, cd_layer *l);
    /* Writes bottom diffs (overwrite) for bottoms that need them, and accumulates
     * parameter gradients. NULL for layers with nothing to propagate. */
    void (*backward)(cd_net *net, cd_layer *l);
    void (*destroy)(cd_net *net, cd_layer *l); /* free what l->priv points to (the net
                                                 * frees l->priv itself) */
} cd_layer_type;

enum {
    CD_LAYER_IN_PLACE = 1u << 0, /* forward and backward work with top == bottom */
    CD_LAYER_LOSS = 1u << 1,     /* first top is a loss (loss_weight 1 by default) */
    CD_LAYER_DATA = 1u << 2,     /* tops are filled by the data pipeline */
    CD_LAYER_SCALAR = 1u << 3,   /* first top is a scalar read back after the pass (value) */
};

#define CD_LAYER_MAX_BLOBS 16
#define CD_LAYER_MAX_PARAMS 4

struct cd_layer {
    const cd_layer_type *type;
    char *name;
    const cd_pt_node *def;   /* the layer { } message (NULL for inserted layers) */
    const cd_pt_node *param; /* its *_param message or NULL */
    int nbottom, ntop;
    cd_blob *bottom[CD_LAYER_MAX_BLOBS];
    cd_blob *top[CD_LAYER_MAX_BLOBS];
    int nparam;
    cd_param *params[CD_LAYER_MAX_PARAMS];
    float loss_weight;       /* weight of the first top in the total loss */
    int need_backward;       /* run backward for this layer */
    void *priv;              /* layer-private host state (one malloc'ed block) */
    float *bufs[8];          /* layer device buffers, freed with the net */
    size_t bufcap[8];        /* floats each holds */
    int nbufs;
    int nreused;             /* buffers handed out again by this cd_net_reshape */
    float value;             /* last scalar output on the host (loss, accuracy), read by
                              * cd_net_forward or cd_net_read_values */
};

/* How to build: the stage and what the definition can't say by itself. */
typedef struct cd_net_opts {
    const char *stage;       /* "train", "val" or "deploy" */
    int batch;               /* > 0 overrides every Data layer's batch_size */
    int input_c, input_h, input_w; /* image shape delivered by the data pipeline */
    int crop;                /* > 0: Data tops are crop x crop (else transform_param's) */
    int label_c, label_h, label_w; /* > 0: the Data label top is (N, c, h, w), a generic
                              * dataset's label (cd_label_shape); 0: (N) class numbers */
    int num_classes;         /* for an InnerProduct without num_output (0: unknown) */
    int force_backward;      /* compute every bottom gradient (gradient checks) */
    uint64_t seed;           /* fillers and dropout */
} cd_net_opts;

struct cd_net {
    char *name;
    char *filename;
    cd_net_opts opts;
    int phase_train;         /* stage train: dropout on, batch statistics */
    cd_backend_t *be;
    int nlayers, cap_layers;
    cd_layer **layers;
    int nblobs, cap_blobs;
    cd_blob **blobs;
    int nparams, cap_params;
    cd_param **params;
    size_t param_count;      /* floats in each arena */
    float *arena_data, *arena_diff, *arena_h1, *arena_h2; /* NULL when shared */
    const cd_net *shared;    /* parameters come from this net */
    uint64_t rng_counter;    /* advanced per forward; drives dropout */
    int allocated;
    int out_of_memory;       /* the last failure of cd_net_alloc was a failed allocation */
    float loss_scale;        /* loss gradients are multiplied by this (mixed precision) */
    float input_scale;       /* transform_param's scale of the Data layer the stage's input
                              * stands for (deploy): inference scales its pixels by it as
                              * training did; 1 without one */
    int host_reads;          /* some layer reads the device in its forward: no capture */
    int reshape_h, reshape_w; /* > 0: the input's height and width set by cd_net_reshape,
                              * over what the definition and opts say */
    int reshaping;           /* cd_net_reshape runs the layers' setup and init again */
    /* when set, called by cd_net_backward after each layer's backward (layer index): the
     * trainer starts averaging the gradients already final while earlier layers run */
    void (*after_backward)(cd_net *net, int layer, void *ctx);
    void *after_backward_ctx;
    cd_pt_node *owned_tree;  /* the parsed file when built by cd_net_load */
};

/* Build the graph of one stage. def is a validated NetParameter tree that must outlive
 * the net. Returns NULL with "file: layer: what is wrong; what to do" in err. */
cd_net *cd_net_build(const cd_pt_node *def, const char *filename, const cd_net_opts *opts,
                     char *err, size_t errlen);
/* Parse, validate and build from a file (keeps the tree, freed with the net). */
cd_net *cd_net_load(const char *path, const cd_net_opts *opts, char *err, size_t errlen);
/* Allocate on be; parameters are filled (from opts.seed) unless shared_from is given,
 * in which case they point at its parameters (by layer name and index; shapes must
 * match). */
int cd_net_alloc(cd_net *net, cd_backend_t *be, const cd_net *shared_from, char *err,
                 size_t errlen);
void cd_net_free(cd_net *net);

/*
 * Re-plans an allocated net for inputs of h x w (the Data and Input tops' height and
 * width, after any crop) and, when label_h > 0, a spatial label of label_h x label_w:
 * every layer's setup and init run again on the new shapes. Blobs and layer buffers are
 * kept where they are large enough and grown otherwise, so a net allocated for the
 * largest input never allocates again. Parameters keep their place and values; a layer
 * whose parameter shape depends on the input size (an InnerProduct after a convolution)
 * is an error naming it. The batch size does not change. CD_OK, or CD_ERR with the
 * message (the net is then unusable: free it).
 */
int cd_net_reshape(cd_net *net, int h, int w, int label_h, int label_w, char *err, size_t errlen);

/* Forward pass; returns the weighted sum of the losses (0 without loss layers). */
float cd_net_forward(cd_net *net);
/* The forward pass alone, with no reads to the host when net->host_reads is 0 (so it
 * can be captured in a device graph); cd_net_read_values then reads the scalar tops
 * (losses, accuracies) into layer->value and returns the weighted loss. */
void cd_net_forward_device(cd_net *net);
float cd_net_read_values(cd_net *net);
/* Backward pass from the losses; parameter gradients accumulate (see cd_net_zero_grad). */
void cd_net_backward(cd_net *net);
void cd_net_zero_grad(cd_net *net);

cd_blob *cd_net_blob(const cd_net *net, const char *name);
/* Name of the layer whose forward (or backward, *backward = 1) runs on this thread
 * now, or NULL: device failure messages name it. */
const char *cd_net_running(int *backward);
cd_layer *cd_net_layer(const cd_net *net, const char *name);
/* Number of learnable floats. */
size_t cd_net_learnable_count(const cd_net *net);
/* "64x1x28x28" or "64x10" or "1" */
char *cd_blob_shape_str(const cd_blob *b, char *buf, size_t len);

/* --- for layer implementations ------------------------------------------------- */
const cd_layer_type *cd_layer_type_find(const char *name);
/* Declare a parameter of l with the given dims; lr/decay from the layer's i-th
 * param { } (defaults 1, 1). Returns it or NULL (err set). */
cd_param *cd_layer_add_param(cd_net *net, cd_layer *l, int ndim, const int *dims,
                             const cd_pt_node *filler, float filler_default, int learnable,
                             char *err, size_t errlen);
void cd_blob_set_shape(cd_blob *b, int ndim, const int *dims);

/* A Pooling layer's output size along one axis of `in` cells: Caffe's ceil (its last
 * window starting inside the padded image), or floor for round_mode: FLOOR. */
int cd_pool_out(int in, int kernel, int stride, int pad, int floor_mode);
/* A device buffer of n floats owned by the layer (zeroed); NULL on failure. */
float *cd_layer_buffer(cd_net *net, cd_layer *l, size_t n);
/* Number of elements of dims [from, to) */
size_t cd_dims_count(const int *dims, int from, int to);

/* Message helper for layer errors: "layer NAME (TYPE): ..." */
int cd_layer_error(const cd_layer *l, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif
