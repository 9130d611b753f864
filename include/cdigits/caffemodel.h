/* Caffe's weights: a .caffemodel (a NetParameter in protobuf, proto/caffe.proto) read
 * into a cdigits net's parameters, by the rules Caffe's Net::CopyTrainedLayersFrom
 * follows (docs/formats.md). */
#ifndef CDIGITS_CAFFEMODEL_H
#define CDIGITS_CAFFEMODEL_H

#include <stddef.h>

#include "cdigits/net.h"

/* What a load did besides what it took. */
typedef struct cd_caffemodel_report {
    int loaded;         /* parameter tensors taken from the file */
    int ignored;        /* layers of the file no layer of the net is named after */
    int missing;        /* layers of the net with parameters the file has no layer for:
                         * they keep the values they have (their fillers') */
    char missing_names[512]; /* those layers' names, ", " between them ("..." when
                         * they do not fit); "" when none */
} cd_caffemodel_report;

/* Reads the len bytes at data (the file path, named in messages) into net: blob i of
 * the file's layer L becomes parameter i of the net's layer L. Shapes must agree: a
 * blob's shape (BlobShape) exactly, or its legacy num, channels, height and width
 * with leading 1s dropped on both sides; the blob counts of the two layers too. A
 * mismatch is CD_ERR naming the layer and both shapes; every blob is checked before
 * the first is uploaded, so the net is then as it was.
 * Layers the file lacks and layers the net lacks are counted in *rep (may be NULL); a
 * file with values for none of the net's layers with parameters is refused (CD_ERR),
 * since it belongs to another network. CD_OK, or CD_ERR with a message for the user. */
int cd_caffemodel_load(cd_net *net, const void *data, size_t len, const char *path, cd_caffemodel_report *rep,
                       char *err, size_t errlen);

#endif
