/*
 * Object detection's boxes, backend-free (src/engine/detect_eval.c): the rows of a
 * clustering output and of a detection label db as boxes, boxes moved from the stored
 * image (padded, then resized, as the dataset made it) back to the image as given,
 * KITTI label files, and DetectNet's scoring of detections against ground truth
 * (python/caffe/layers/detectnet/mean_ap.py: precision, recall and its "mAP",
 * precision x recall). Validation's ScoreDetections layer and inference (lists, dbs)
 * match detections to labels with the same function, cd_det_match (docs/inference.md).
 */
#ifndef CDIGITS_DETECT_H
#define CDIGITS_DETECT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DetectNet's IoU threshold of a match, DIGITS's object-detection example's. */
#define CD_DET_IOU 0.5
/* Values per row of a detection label db (DIGITS's gt_to_lmdb_format) and the column of
 * its class number (0 dontcare, 1..K the classes, -1 a row past the image's boxes). */
#define CD_DET_LABEL_WIDTH 16
#define CD_DET_LABEL_CLASS 5
/* The column of a 6-column clustering output holding the class number (1..K; DetectNet's
 * own outputs have 5 columns, one output per class: docs/layers.md), and the most boxes
 * one image's answer holds (DetectNet keeps 50 per class). */
#define CD_DET_CLASS_COL 5
#define CD_DET_MAX_BOXES 1024

/* One box in pixels of some image: x1 < x2 and y1 < y2 for a real box. */
typedef struct cd_det_box {
    float x1, y1, x2, y2;
    float confidence; /* a detection's (DetectNet's log of its cluster's size); 0 for a label */
    int cls;          /* class number: 0 dontcare, 1..K */
} cd_det_box;

/* Intersection over union of a and b (0 when either has no area). */
double cd_det_iou(const cd_det_box *a, const cd_det_box *b);

/*
 * The boxes of one image of a clustering output: rows (nrows, cols) of [x1, y1, x2, y2,
 * confidence] (cols 5) or [x1, y1, x2, y2, confidence, class] (cols 6, class_col 5),
 * DetectNet's ClusterDetections order. A row counts when its confidence is above 0 and
 * it has area (DIGITS's bounding-box view keeps confidence > 0); its class is the class
 * column, else cls. Up to max boxes into out; returns how many.
 */
int cd_det_from_rows(const float *rows, int nrows, int cols, int class_col, int cls, cd_det_box *out, int max);

/* The boxes of one label record: rows (nrows, CD_DET_LABEL_WIDTH) with x, y, w, h in
 * columns 0..3 and the class number in CD_DET_LABEL_CLASS; rows of class -1 (padding)
 * are skipped. Up to max into out; returns how many. DontCare boxes (class 0) are kept:
 * the scoring leaves detections inside them out. */
int cd_det_from_label_rows(const float *rows, int nrows, cd_det_box *out, int max);

/* How an image given to a detection model became its input: kept at the top left of a
 * pad_w x pad_h canvas, which was resized to net_w x net_h (the stored image). An image
 * larger than the padding is resized whole: pad = its own size. */
typedef struct cd_det_frame {
    int orig_w, orig_h; /* the image as given */
    int pad_w, pad_h;
    int net_w, net_h;
} cd_det_frame;

/* The frame of an orig_w x orig_h image for a dataset padded to pad_w x pad_h (0: not
 * padded) and stored at net_w x net_h. */
cd_det_frame cd_det_frame_make(int orig_w, int orig_h, int pad_w, int pad_h, int net_w, int net_h);
/* Boxes in stored-image pixels into pixels of the image as given, clipped to it. */
void cd_det_to_image(const cd_det_frame *f, cd_det_box *b, int n);

/*
 * A KITTI label file (15 or 16 space-separated columns: type truncated occluded alpha
 * x1 y1 x2 y2 ...) as boxes: the type looked up case-insensitively in names (nnames
 * entries, names[0] "dontcare": a name not among them is dontcare, as DIGITS maps
 * unknown classes). Up to max boxes into out; returns how many, or -1 with a message
 * naming the file and line.
 */
int cd_det_kitti_load(const char *path, const char *const *names, int nnames, cd_det_box *out, int max, char *err,
                      size_t errlen);

/* Counts of DetectNet's scoring, summed over images. */
typedef struct cd_det_counts {
    long tp; /* detections that matched a label box */
    long fp; /* detections that matched none (and lie outside every DontCare box) */
    long fn; /* label boxes no detection matched */
} cd_det_counts;

/*
 * DetectNet's matching (mean_ap.py's score_det) of one image: each label box in order
 * takes the first detection in order (the clustering's: by descending confidence) of
 * its class, not yet taken, whose IoU with it is at least iou. gmatch[i] and dmatch[j]
 * (set here) say which matched. Validation's ScoreDetections layer and cd_det_score
 * both match through it.
 */
void cd_det_match(const cd_det_box *labels, int nlabels, const cd_det_box *dets, int ndets, double iou, char *gmatch,
                  char *dmatch);

/*
 * KITTI's DontCare rule, the one rule of validation (ScoreDetections) and inference: an
 * unmatched detection whose area lies at least half inside a DontCare box (class 0) of
 * boxes (n of them; boxes of other classes are passed over) is neither a true nor a
 * false positive. Returns 1 when det is such a detection.
 */
int cd_det_in_dontcare(const cd_det_box *det, const cd_det_box *boxes, int n);

/*
 * Scores the detections of one image against its label boxes, class by class: each
 * label box (in order) takes the first detection, by descending confidence, of its class
 * not yet taken whose IoU with it is at least iou (DetectNet's ScoreDetections). An
 * unmatched detection whose area lies at least half inside a DontCare box is neither
 * true nor false. cls > 0 scores that class alone, 0 every class. Adds into *c.
 */
void cd_det_score(const cd_det_box *labels, int nlabels, const cd_det_box *dets, int ndets, double iou, int cls,
                  cd_det_counts *c);

/* DetectNet's measures in percent (mean_ap.py's calcmAP): precision tp/(tp+fp), recall
 * tp/(tp+fn) (0 when the denominator is 0) and mAP = precision x recall / 100. */
void cd_det_measures(const cd_det_counts *c, double *precision, double *recall, double *map);

#ifdef __cplusplus
}
#endif
#endif
