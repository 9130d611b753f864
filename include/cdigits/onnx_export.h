/*
 * ONNX export of a trained model: the deploy stage of a model job at one snapshot, as
 * an ONNX ModelProto (opset 13, IR version 7) that does what cdigits's classify does
 * from the stored image on (docs/inference.md, "ONNX export"):
 *
 *   input  "data"  float32 (N, C, H, W): pixel values 0-255 in the dataset's channel
 *                  order at the dataset's size (the caller resizes with the dataset's
 *                  resize mode); N is the symbolic dimension "N"
 *   graph          Sub mean (image or pixel), Slice (the centre crop), Mul (the input
 *                  scale), the per-image whitening when the model trained with it,
 *                  then one node or a few per layer of the deploy stage
 *   output         the deploy stage's last top (DIGITS's "prob"), (N, ...)
 *   metadata       labels (newline-joined labels.txt), mean, scale, crop, whitening,
 *                  channels, resize mode, snapshot iteration and epoch
 *
 * A layer the export has no row for, or a setting ONNX cannot express the same way
 * (LRN WITHIN_CHANNEL, BatchNorm with batch statistics at inference), is refused with
 * a message that names the layer and its type.
 */
#ifndef CDIGITS_ONNX_EXPORT_H
#define CDIGITS_ONNX_EXPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the model job at job_dir, at the snapshot of `iteration` (<= 0: the newest),
 * to out_path (written beside it as out_path.tmp first, then renamed). CD_OK, or CD_ERR
 * with a message naming what is wrong and what to do; out_path is then left as it was. */
int cd_onnx_export(const char *job_dir, long iteration, const char *out_path, char *err, size_t errlen);

/* The layer types the export maps, ", "-separated (for messages and docs). */
const char *cd_onnx_export_types(void);

#ifdef __cplusplus
}
#endif
#endif
