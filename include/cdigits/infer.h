/*
 * Inference with a trained model job: the deploy stage of its network with the
 * weights of one snapshot, the dataset's labels, mean image and resize settings, so
 * that any PNG or JPEG is prepared exactly as the training images were.
 *
 * A classifier holds a deploy net of one image and, after cd_classifier_set_batch, a
 * second deploy net of B images that shares its weights (lists are classified B at a
 * time in bounded memory). It also reports every layer's output and parameters for
 * one image (visualizations) and exports the model as files a person can take away
 * (docs/inference.md). Not thread-safe: one classifier per thread.
 *
 * infer.c holds the classifier, infer_list.c the lists (lines, batches, summary, the
 * best images per class), infer_visualize.c the pictures of each layer and
 * infer_generic.c the generic models' outputs by name (segmentation masks and their
 * IoU, regression vectors).
 */
#ifndef CDIGITS_INFER_H
#define CDIGITS_INFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cdigits/backend.h"
#include "cdigits/detect.h"
#include "cdigits/image.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_classifier cd_classifier_t;

/* Open the model in job_dir at snapshot `iteration` (0: the newest). backend NULL
 * means the CPU on every core (cd_backend_select; owned by the classifier); otherwise
 * the caller keeps it. Messages name what is missing and what to do. */
cd_classifier_t *cd_classifier_open(const char *job_dir, long iteration, cd_backend_t *be,
                                    char *err, size_t errlen);
void cd_classifier_close(cd_classifier_t *c); /* accepts NULL */

int cd_classifier_classes(const cd_classifier_t *c);
/* Values per image of the deploy stage's last top: the classes, or more for a network
 * whose num_output is fixed above the dataset's labels (only the first classes are
 * read, as DIGITS reads them). */
int cd_classifier_outputs(const cd_classifier_t *c);
const char *cd_classifier_label(const cd_classifier_t *c, int i);
long cd_classifier_iteration(const cd_classifier_t *c);
/* The stored image shape of the dataset (what every input is resized to). */
void cd_classifier_image_shape(const cd_classifier_t *c, int *channels, int *height, int *width);
const cd_backend_t *cd_classifier_backend(const cd_classifier_t *c);
/* Multiply-adds of one image's forward pass (layers with weights: outputs x fan-in),
 * to tell a network that is cheap per image from one that needs every core. */
double cd_classifier_macs(const cd_classifier_t *c);

/* Probabilities of every class for one decoded image of any size and channel count
 * (resized with the dataset's mode, converted to its channels). probs has
 * cd_classifier_classes() floats. */
int cd_classifier_run(cd_classifier_t *c, const cd_image_t *img, float *probs, char *err,
                      size_t errlen);

/* Builds the batch net of `batch` images (sharing the weights); 1 drops it. A model of
 * images of varying size stays at 1: read cd_classifier_batch after. */
int cd_classifier_set_batch(cd_classifier_t *c, int batch, char *err, size_t errlen);
int cd_classifier_batch(const cd_classifier_t *c); /* 1 when no batch net */
/* How cd_classifier_prepare makes a width x height image the input of a detection model:
 * its boxes go back to the image's pixels through cd_det_to_image. */
cd_det_frame cd_classifier_det_frame(const cd_classifier_t *c, int width, int height);
/* Converts and resizes one image to the dataset's shape on the host (thread-safe for
 * distinct images: it only reads c). out is allocated here. A detection model's image
 * is padded (black, at the top left) to the dataset's padding_image_width x _height and
 * then resized, as the dataset's images were; one larger than the padding, or of a
 * dataset without padding, is resized whole (cd_classifier_det_frame says which). */
int cd_classifier_prepare(const cd_classifier_t *c, const cd_image_t *img, cd_image_t *out,
                          char *err, size_t errlen);
/* Probabilities of n prepared images (1 <= n <= cd_classifier_batch()): probs is
 * (n, classes). */
int cd_classifier_run_prepared(cd_classifier_t *c, const cd_image_t *const *prepared, int n,
                               float *probs, char *err, size_t errlen);

/* The dataset's task (enum cd_dataset_task, cdigits/dataset.h): stats.json's "task",
 * classification when it has none. A model of another task opens without labels.txt
 * (regression) and whatever its outputs per image; classification's checks stay. */
int cd_classifier_task(const cd_classifier_t *c);
const char *cd_classifier_dataset_dir(const cd_classifier_t *c);
/* The deploy net of one image (its blobs name the outputs; read-only). */
const cd_net *cd_classifier_net(const cd_classifier_t *c);
/* Runs n prepared images (1 <= n <= cd_classifier_batch()) forward: the net that ran
 * (the batch-1 net for one image, else the batch net), whose blobs hold every output
 * for the first n images; NULL with a message. */
const cd_net *cd_classifier_forward(cd_classifier_t *c, const cd_image_t *const *prepared, int n, char *err,
                                    size_t errlen);

/* ---- what each layer computed, for visualizations -------------------------------- */

/* A host copy of a tensor: a layer's output for one image or one of its parameters. */
typedef struct cd_infer_tensor {
    char *name;              /* blob name, or "<layer>/<index>" for a parameter */
    int ndim;
    int dims[CD_MAX_DIMS];   /* outputs: (1, C, H, W) or (1, N); conv weights (O, I, KH, KW) */
    size_t count;
    float *data;             /* malloc'd */
} cd_infer_tensor;

typedef struct cd_infer_layer {
    char *name, *type;       /* "conv1", "Convolution" */
    cd_infer_tensor top;     /* the first top right after this layer ran */
    int nparams;
    cd_infer_tensor params[CD_LAYER_MAX_PARAMS];
    size_t param_count;      /* learnable values of the layer */
} cd_infer_layer;

/* Runs one image layer by layer, copying each layer's first top as soon as the layer
 * has run (so a ReLU done in place does not hide the convolution before it) and its
 * parameters. Split layers are left out. *layers (n entries) is freed with
 * cd_infer_layers_free; probs as in cd_classifier_run. */
int cd_classifier_run_layers(cd_classifier_t *c, const cd_image_t *img, float *probs,
                             cd_infer_layer **layers, int *nlayers, char *err, size_t errlen);
void cd_infer_layers_free(cd_infer_layer *layers, int n);

/* ---- lists (infer_list.c) ---------------------------------------------------------- */

/* [[label, percent], ...] of the `top` most probable classes (at most 64) of probs
 * (cd_classifier_classes() floats), most probable first, percent with 2 decimals as
 * DIGITS rounds them. A new reference: the caller decrefs. */
json_t *cd_predictions_json(const cd_classifier_t *c, const float *probs, int top);

/* One image of a list, as cd_list_line_parse reads it. */
typedef struct cd_list_item {
    char *path;   /* the file to read: the line's path, under root when relative */
    char *key;    /* what the output calls the image: the key column, else path */
    int label;    /* the class number; -1 when the line has none (or a bad one) */
    char *error;  /* "label \"x\" is not a class number (0, 1, ...)", else NULL */
} cd_list_item;

/*
 * One line of a list into *item. Lines are `path [label]`: surrounding white space is
 * dropped and a last word that is an integer is the label (DIGITS's rule), so a path
 * may hold spaces; or, tab-separated, `path<TAB>label<TAB>key` (taken as they are,
 * label and key optional). Line endings (LF or CRLF) and a UTF-8 byte order mark at the
 * start of the line are dropped. line is modified. Returns 1 with item filled (its
 * strings malloc'd, freed with cd_list_item_free; a label that is not a class number
 * is item->error, not a failure), or 0 for a line to skip (blank, `#` comment, no
 * path), item untouched.
 */
int cd_list_line_parse(char *line, const char *root, cd_list_item *item);
void cd_list_item_free(cd_list_item *item); /* accepts NULL; the item is zeroed */

/* The `cap` highest scores offered and their names: a min-heap, so each offer is
 * O(log cap) and the memory bounded by cap whatever is offered. Ties with the lowest
 * kept score keep what came first. */
typedef struct cd_topn {
    float *p;     /* (cap) scores, heap order */
    char **name;  /* (cap) malloc'd copies of the names */
    int n, cap;
} cd_topn;

void cd_topn_init(cd_topn *t, int cap); /* cap <= 0 keeps nothing */
void cd_topn_offer(cd_topn *t, float p, const char *name); /* name is copied */
/* [[name, percent], ...] with the highest score first; empties t (cap stays). A new
 * reference: the caller decrefs. */
json_t *cd_topn_json(cd_topn *t);
void cd_topn_free(cd_topn *t); /* accepts NULL; the struct is zeroed */

typedef struct cd_list_opts {
    int top;           /* classes per image (5) */
    int top_n;         /* > 0: keep the top_n images that score highest for each class */
    int batch;         /* images per forward pass of the batch net */
    const char *root;  /* relative paths of the list start here (NULL: the working folder) */
    long limit;        /* classify at most this many images (0: all) */
} cd_list_opts;

/*
 * Classifies the images of a list read from in, `batch` at a time, in memory bounded
 * by the batch and the classes (never by the list); lines as cd_list_line_parse reads
 * them. For each image one JSON line goes to out, in list order:
 *   {"line": N, "path": key, "predictions": [[label, percent], ...], "label": K}
 *   {"line": N, "path": key, "error": "why"}         (unreadable image, bad label)
 * (a label past the model's classes adds "label_error" instead of "label"). Returns
 * the summary (caller decrefs): {"images", "classified", "failed", "labelled", and
 * where labels were given "top1_accuracy", "top5_accuracy" (percent), "labels",
 * "confusion_matrix" (rows: true class, columns: predicted), "per_class_accuracy"
 * (percent or null), "per_class" [{label, count, correct}]; with top_n "top_n"
 * [[label, [[path, percent], ...]], ...]}, or NULL with a message in err. The caller
 * keeps in and out (neither is closed); c is left with a batch net of `batch`.
 */
json_t *cd_classify_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_list_opts *o, char *err,
                         size_t errlen);

/* ---- visualizations (infer_visualize.c) --------------------------------------------- */

/*
 * Pictures of what each layer computed (cd_classifier_run_layers): for every layer
 * with parameters a PNG of its first parameter (weights), and for every layer a PNG
 * of its output (activation), written into dir (created when missing) as
 * "NN-<layer>-weights.png" and "NN-<layer>-activation.png" (NN the layer's index).
 * Returns DIGITS's list, in network order, of
 *   {"name", "type", "vis_type": "Weights", "image": file name, "data_stats",
 *    "param_count"} and {"name", "type", "vis_type": "Activation", "blob", "image",
 *    "data_stats"}
 * with data_stats {"shape", "mean", "stddev", "histogram": [20 counts, 20 bin
 * centres, [min, middle, max]]} over the finite values (docs/inference.md). A new
 * reference (the caller decrefs), or NULL with a message in err; files written before
 * a failure stay.
 */
json_t *cd_infer_visualize(const cd_infer_layer *layers, int n, const char *dir, char *err, size_t errlen);

/* ---- small helpers --------------------------------------------------------------- */

/* Indices of the k largest of p[0..n) in descending order (ties: lower index first);
 * returns min(k, n). */
int cd_topk(const float *p, int n, int k, int *idx);

/* Snapshot iterations present in job_dir, ascending; returns the count (<= max). */
int cd_snapshot_list(const char *job_dir, long *iters, int max);

/* A snapshot with its epoch: from the snapshot_iter_N.epoch the trainer writes beside it
 * (jobdir_snapshots), or for an imported model from its info.json. A snapshot without
 * one gets an epoch from the iterations per epoch of the newest one that has it; when
 * none has (a folder from before .epoch files existed), the epoch is -1: unknown. The
 * snapshots are ascending by iteration; returns how many (<= max). */
typedef struct cd_snapshot_info {
    long iteration;
    double epoch;
} cd_snapshot_info;
int cd_snapshot_epochs(const char *job_dir, cd_snapshot_info *out, int max);
/* The iteration of the snapshot that `epoch` (the text as typed) names by
 * jobdir_epoch_pick's rule (cdigits/jobdir.h), or -1 with a message naming the epochs
 * that exist (and the iterations of those whose epoch is unknown). */
long cd_snapshot_for_epoch(const char *job_dir, const char *epoch, char *err, size_t errlen);

/* ---- generic models: outputs by name, segmentation, regression (infer_generic.c) -- */

/*
 * Every output of the deploy net (a top no later layer takes as a bottom; a top an
 * in-place layer rewrote counts once) for n prepared images, in network order: *outs
 * gets nouts host tensors named by blob, dims (n, ...) as the blob has them with the
 * batch cut to n. Free with cd_infer_tensors_free. CD_ERR with a message (no outputs).
 */
int cd_infer_outputs(cd_classifier_t *c, const cd_image_t *const *prepared, int n, cd_infer_tensor **outs,
                     int *nouts, char *err, size_t errlen);
/* The same for one decoded image of any size (prepared here as cd_classifier_run does). */
int cd_infer_image(cd_classifier_t *c, const cd_image_t *img, cd_infer_tensor **outs, int *nouts, char *err,
                   size_t errlen);
void cd_infer_tensors_free(cd_infer_tensor *t, int n); /* accepts NULL */
/* Image i's values of t as nested JSON arrays of the dims after the batch (a (n, 2)
 * tensor gives [a, b]); i < 0: the whole tensor, batch included (DIGITS's infer_one).
 * A non-finite value is null. A new reference. */
json_t *cd_infer_tensor_json(const cd_infer_tensor *t, int i);
/* The output a segmentation reads: the last 4-D one in network order (n, classes, h,
 * w), the score map an FCN ends in; -1 if none. */
int cd_infer_seg_output(const cd_infer_tensor *outs, int n);

/* Largest class count of a segmentation (255 is the label images' "ignore"). */
#define CD_SEG_MAX_CLASSES 255
#define CD_SEG_IGNORE 255

/* The class of each pixel of scores (classes, h, w): the channel of the largest value
 * (ties: the lower class; NaN loses), into mask (h, w). CD_ERR when classes is not 1 to
 * CD_SEG_MAX_CLASSES. */
int cd_seg_argmax(const float *scores, int classes, int h, int w, uint8_t *mask, char *err, size_t errlen);
/* counts[k] (classes entries, zeroed here) = pixels of class k in mask (n pixels). */
void cd_seg_count(const uint8_t *mask, size_t n, int classes, long *counts);
/* The colours of classes 0..classes-1 into rgb: the dataset's palette.txt, and for the
 * classes it lacks (or no palette.txt) cd_palette_default's. CD_ERR for a bad file. */
int cd_seg_palette(const cd_classifier_t *c, int classes, uint8_t (*rgb)[3], char *err, size_t errlen);
/* mask (h, w) coloured with rgb (ncolors) as an RGB PNG in memory (*png malloc'd); a
 * class past the colours (ignore) is black. */
int cd_seg_mask_png(const uint8_t *mask, int h, int w, const uint8_t (*rgb)[3], int ncolors, uint8_t **png,
                    size_t *len, char *err, size_t errlen);
/*
 * A label image as classes (h, w) into out: each pixel's colour is looked up in rgb
 * (classes colours: a palette PNG or RGB label in the dataset's colours), else a gray
 * pixel below classes is that class (a gray-level label), else CD_SEG_IGNORE. A label
 * of another size is scaled to h x w by the nearest pixel. CD_ERR naming the file.
 */
int cd_seg_label_load(const char *path, int h, int w, const uint8_t (*rgb)[3], int classes, uint8_t *out,
                      char *err, size_t errlen);
/* The same from a label record (1, lh, lw) of class indices (a dataset's label db). */
void cd_seg_label_scale(const uint8_t *label, int lh, int lw, int h, int w, uint8_t *out);

/* Pixel counts of (label, prediction) pairs over any number of images. */
typedef struct cd_seg_confusion {
    int k;              /* classes */
    uint64_t *m;        /* (k, k): rows the label, columns the prediction */
    uint64_t ignored;   /* pixels whose label is CD_SEG_IGNORE or not a class */
} cd_seg_confusion;

void cd_seg_confusion_init(cd_seg_confusion *s, int k);
void cd_seg_confusion_free(cd_seg_confusion *s); /* accepts a zeroed one */
/* Adds n pixels: label[i] against pred[i] (pred < k). */
void cd_seg_confusion_add(cd_seg_confusion *s, const uint8_t *label, const uint8_t *pred, size_t n);
/* Correct pixels / counted pixels (0 when none). */
double cd_seg_pixel_accuracy(const cd_seg_confusion *s);
/* Class k's intersection over union: tp / (tp + fp + fn), or -1 when the class is in
 * neither the labels nor the predictions. */
double cd_seg_iou(const cd_seg_confusion *s, int k);
/* The mean of cd_seg_iou over the classes present (-1 when none is). */
double cd_seg_mean_iou(const cd_seg_confusion *s);
/* {"pixels", "ignored_pixels", "pixel_accuracy", "mean_iou", "per_class": [{"class",
 * "label", "iou" (or null), "label_pixels", "predicted_pixels", "correct_pixels"}]}
 * (accuracy and IoU in percent, 2 decimals). A new reference. */
json_t *cd_seg_confusion_json(const cd_seg_confusion *s, const cd_classifier_t *c);

/*
 * The JSON of image i of outs for its task: {"outputs": {name: values}} (the values of
 * cd_infer_tensor_json(t, whole ? -1 : i)), and for a segmentation model also "mask"
 * (a data:image/png;base64 URL of the class mask coloured with the palette, rgb of
 * classes colours), "mask_size" [h, w] and "class_counts" [{"class", "label", "color"
 * "#rrggbb", "pixels"}]; with label (h, w classes, or NULL) its pixels go into conf
 * and the image's own "iou" summary is added. A new reference, or NULL with a message.
 */
json_t *cd_infer_result_json(const cd_classifier_t *c, const cd_infer_tensor *outs, int nouts, int i, int whole,
                             const uint8_t (*rgb)[3], const uint8_t *label, cd_seg_confusion *conf, char *err,
                             size_t errlen);

/* ---- detection (infer_generic.c, scored by cdigits/detect.h) ------------------------ */

/* The boxes of image i of every clustering output of outs (a 3-D (n, boxes, 5 or 6)
 * tensor, docs/layers.md), in the input's pixels: a 5-column output's class from its
 * name ("bbox-list-class0" is class 1, DetectNet's first class after dontcare) or its
 * place among them (the first is class 1), a 6-column one's from its class column. Up to
 * max into out; returns how many. */
int cd_det_output_boxes(const cd_infer_tensor *outs, int nouts, int i, cd_det_box *out, int max);
/* A class's colour as "#rrggbb": DIGITS's bounding-box view's (class 1 red, 2 cyan, ...). */
void cd_det_color(int cls, char hex[8]);
/*
 * A detection model's answer for image i of outs into out: "bboxes" (DIGITS's bounding-box
 * view: [{blob: [x1, y1, x2, y2, confidence]}] in the input's pixels), "boxes" ([{"class",
 * "label", "x1", "y1", "x2", "y2", "confidence"}] in the pixels of the image as given,
 * through frame), "box_counts" ([{"class", "label", "color", "boxes"}] per class after
 * dontcare) and "image_frame" {"image", "padded", "input"} ([w, h] each). With labels
 * (nlabels boxes in the same pixels as the answer's "boxes"; NULL: none) the image is
 * scored class by class (1..nclasses-1) into per_class[class] (may be NULL) and its
 * "score" {"true_positives", "false_positives", "false_negatives"} added. Returns the
 * number of boxes.
 */
int cd_det_fields(const cd_classifier_t *c, const cd_infer_tensor *outs, int nouts, int i, const cd_det_frame *frame,
                  const cd_det_box *labels, int nlabels, cd_det_counts *per_class, int nclasses, json_t *out);
/* {"iou_threshold", "mAP", "precision", "recall" (percent, 2 decimals, DetectNet's
 * measures), "true_positives", "false_positives", "false_negatives", "per_class": [{"class",
 * "label", "mAP", "precision", "recall", ...counts}]} of per_class[1..nclasses). */
json_t *cd_det_summary_json(const cd_classifier_t *c, const cd_det_counts *per_class, int nclasses);

typedef struct cd_infer_list_opts {
    int batch;         /* images per forward pass (64) */
    long limit;        /* at most this many images (0: all) */
} cd_infer_list_opts;

/*
 * A list through a generic model, batch images at a time: lines `path[<TAB>label
 * image[<TAB>key]]` (or just a path; blank and # lines skipped). One JSON line per image
 * goes to out, in list order: {"line": N, "path": key, ...cd_infer_result_json} or
 * {"line", "path", "error"}. Returns the summary {"images", "inferred", "failed",
 * "labelled"[, "iou": cd_seg_confusion_json over the labelled images]} (caller
 * decrefs), or NULL with a message. c is left with a batch net of `batch`.
 */
json_t *cd_infer_list(cd_classifier_t *c, FILE *in, FILE *out, const cd_infer_list_opts *o, char *err,
                      size_t errlen);
/*
 * The records of a feature db (a dataset's train.db, val.db, test.db: the dataset's
 * image shape) through the model, the same lines with "path" the record's index; with
 * labels_db (its label db, or NULL) a segmentation's records are scored as above.
 */
json_t *cd_infer_db(cd_classifier_t *c, const char *db_path, const char *labels_db, FILE *out,
                    const cd_infer_list_opts *o, char *err, size_t errlen);

/* ---- export (the model download) --------------------------------------------------- */

/* Writes into out_dir (which must exist): deploy.prototxt, original.prototxt,
 * solver.prototxt, labels.txt, mean.bin and mean.png (when the dataset has a mean),
 * the snapshot's weights file and info.json with DIGITS's keys. names gets the file
 * names written (up to max, returns how many). */
int cd_classifier_export(const cd_classifier_t *c, const char *out_dir, const char *job_name,
                         char names[][64], int max, char *err, size_t errlen);

/* ---- writing prototxt (prototxt_write.c) ------------------------------------------ */

/* The fields of a parsed message (the root or any message) as prototxt text, two
 * spaces per level, strings escaped. malloc'd. */
char *cd_pt_write(const cd_pt_node *msg);
/* The deploy network of a built net as prototxt: its layers in order without
 * include/exclude rules, the automatic inputs as Input layers of batch 1, Split
 * layers left out, and num_output written where the file left it to the dataset.
 * malloc'd. */
char *cd_net_write_deploy(const cd_net *net);
/* Caffe's SolverParameter for a training configuration, with the learning rate
 * policy in iterations (iters_per_epoch of training). malloc'd. */
char *cd_solver_write(const cd_train_config *tc, double iters_per_epoch, const char *net_file);

#ifdef __cplusplus
}
#endif
#endif
