/* Declarations shared inside the engine module only. */
#ifndef CDIGITS_ENGINE_INTERNAL_H
#define CDIGITS_ENGINE_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "cdigits/net.h"

/* "Accuracy, BatchNorm, ..." (static buffer) */
const char *cd_layer_type_names(void);
/* Fill every parameter of an allocated, non-shared net from its filler. */
int cd_fill_params(cd_net *net, char *err, size_t errlen);
/* Is a FillerParameter (or NULL) one the engine can fill? */
int cd_filler_check(const cd_pt_node *f, char *err, size_t errlen);
/* cd_layer_buffer for a layer's init: *out gets n floats. CD_OK, or CD_ERR with an
 * out-of-memory message naming the layer. */
int cd_layer_buffer_init(cd_net *net, cd_layer *l, size_t n, float **out, char *err, size_t errlen);
/* The setup both two-bottom losses share (EuclideanLoss, L1Loss): the same batch and
 * count of values in both bottoms, a scalar top; *num gets the batch (layer_regress.c). */
int cd_loss_pair_setup(cd_layer *l, int *num, char *err, size_t errlen);

/* Layer tables, one per file of layers; each ends with a {NULL} row. */
extern const cd_layer_type cd_layers_data[];

/* Does top t of a Data layer carry the labels? The second top of a two-top Data layer
 * (Caffe's classification form), or the one top of a Data layer whose top is named
 * "label" (DIGITS's generic form: one Data layer for the images, one for the labels). */
int cd_data_top_is_label(const cd_layer *l, int t);

/* A dataset's task: stats.json's "task" (stats), else its config's (dataset.json, when
 * the dataset is not done), else classification (a dataset from before tasks, an
 * imported model). *task is -1 for a name this build does not know; returns the name
 * (NULL when none is given), valid while stats and config are. */
const char *cd_dataset_task_named(json_t *stats, json_t *config, int *task);
extern const cd_layer_type cd_layers_conv[];
extern const cd_layer_type cd_layers_act[];
extern const cd_layer_type cd_layers_norm[];
extern const cd_layer_type cd_layers_shape[];
extern const cd_layer_type cd_layers_loss[];
extern const cd_layer_type cd_layers_spatial[];
extern const cd_layer_type cd_layers_regress[];
extern const cd_layer_type cd_layers_detect[];         /* layer_detect.c */
extern const cd_layer_type cd_layers_detect_cluster[]; /* layer_detect_cluster.c: Python */

/* DetectNet's validation measures (layer_detect_cluster.c). Is l a Python layer running
 * mean_ap.py's mAP (its bottom is ScoreDetections' marked list (N, R, 5))? */
int cd_detect_is_map_layer(const cd_layer *l);
/* Adds the rows of a marked list marked 1 (true positive), 2 (false positive) and 3
 * (missed true box) to counts[0..2]. */
void cd_detect_count_scored(const float *scored, size_t rows, double counts[3]);
/* mAP, precision and recall in percent from those counts, as mean_ap.py's calcmAP. */
void cd_detect_map(const double counts[3], double out[3]);

/* Writes line (stolen) to a list's results file as one compact JSON line, numbers to a
 * float's precision: cd_classify_list's lines (infer_list.c) and cd_infer_list's and
 * cd_infer_db's (infer_generic.c). */
void cd_infer_result_line(FILE *out, json_t *line);

/* shorthand for a layer's backend */
#define BE(net) ((net)->be)
#define OPS(net) ((net)->be->iface)

#endif
