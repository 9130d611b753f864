/* ONNX import (docs/formats.md, "ONNX import"): an ONNX ModelProto (proto/onnx.proto,
 * opsets 7..17 of the default domain) becomes a cdigits network in Caffe prototxt and
 * its weights in cdigits's weights format, operator by operator through one table; an
 * operator or an attribute cdigits cannot run exactly is refused naming the node. */
#ifndef CDIGITS_ONNX_IMPORT_H
#define CDIGITS_ONNX_IMPORT_H

#include <stddef.h>

/* One parameter tensor of the imported network: parameter `index` of layer `layer`
 * (the weights file names it "<layer>/<index>", as a built net names its parameters). */
typedef struct cd_onnx_param {
    char *name;        /* "<layer>/<index>" */
    int ndim;
    int dims[4];
    size_t count;
    float *data;
} cd_onnx_param;

/* A graph input or output and the blob it became. */
typedef struct cd_onnx_io {
    char *onnx_name;   /* the ONNX value's name */
    char *blob;        /* the prototxt blob's name */
    int ndim;
    int dims[4];       /* a symbolic (batch) dimension is 1 */
} cd_onnx_io;

typedef struct cd_onnx_model {
    char *deploy;      /* the network with one Input layer per graph input (deploy.prototxt) */
    char *network;     /* DIGITS's one-file form (train and val Data layers, a loss excluded
                        * from deploy, a final Softmax in deploy only) for a model with one
                        * 4-D input and one output: what a classification model trains and
                        * classifies from; NULL otherwise (why_no_network says why) */
    char why_no_network[256];
    int nparams;
    cd_onnx_param *params;
    int ninputs, noutputs;
    cd_onnx_io *inputs, *outputs;
    int nlayers;       /* layers written, Input layers excluded */
    long opset;        /* of the default domain */
} cd_onnx_model;

/* Imports the len bytes at data (a serialized ModelProto; path names it in messages)
 * into *m (zeroed first). CD_OK; or CD_ERR with a message for the user in err, such as
 * "node 'up1' (op Upsample): cdigits cannot import this operator; supported: ...", and
 * *m empty. Free with cd_onnx_model_free either way. */
int cd_onnx_import(const void *data, size_t len, const char *path, cd_onnx_model *m, char *err, size_t errlen);

/* Writes m's parameters to path as a cdigits weights file (what cd_snapshot_save_weights
 * writes and cd_snapshot_load_weights reads), atomically. CD_OK or CD_ERR with the
 * message. */
int cd_onnx_write_weights(const cd_onnx_model *m, const char *path, char *err, size_t errlen);

void cd_onnx_model_free(cd_onnx_model *m);

/* The operators the table imports, ", " between them ("BatchNormalization, Concat, ..."). */
const char *cd_onnx_supported_ops(void);

#endif
