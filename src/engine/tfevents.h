/* A TensorBoard events file: the scalars a training job reports, in the format
 * TensorFlow's summary writers produce, so `tensorboard --logdir` on the jobs folder
 * shows every job's curves (docs/training.md).
 *
 * The file is a sequence of TFRecord records, each
 *   uint64 length | uint32 masked CRC32C of those 8 bytes | length bytes of data |
 *   uint32 masked CRC32C of the data
 * (little-endian; masked: ((crc >> 15) | (crc << 17)) + 0xa282ead8), whose data is one
 * tensorflow.Event (proto/tensorboard_event.proto, packed by protobuf-c): first
 * {file_version: "brain.Event:2"}, then {wall_time, step, summary {value {tag,
 * simple_value}}} per scalar.
 *
 * A failed write is said once, as a warning line, and the file takes nothing more:
 * training goes on without it. Engine-private. */
#ifndef CDIGITS_TFEVENTS_H
#define CDIGITS_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cd_tfevents cd_tfevents_t;

/* Creates dir/events.out.tfevents.<unix time>.<host name> (with .1, .2, ... after it
 * when that name is taken: a resumed job adds a file, TensorBoard merges them) and
 * writes its file_version event. NULL with err set when the file cannot be made. */
cd_tfevents_t *cd_tfevents_open(const char *dir, char *err, size_t errlen);
/* The same on a named file, created or truncated (tests write to /dev/full). */
cd_tfevents_t *cd_tfevents_open_file(const char *path, char *err, size_t errlen);
/* The file's path (valid until cd_tfevents_close). */
const char *cd_tfevents_path(const cd_tfevents_t *ev);
/* One scalar summary: tag (e.g. "val/loss") at step, wall time now, value as float.
 * Buffered; NULL ev does nothing. */
void cd_tfevents_scalar(cd_tfevents_t *ev, const char *tag, long step, double value);
/* Writes what is buffered to the file, so a TensorBoard watching it sees it. */
void cd_tfevents_flush(cd_tfevents_t *ev);
/* Whether a write failed (and was reported). */
int cd_tfevents_failed(const cd_tfevents_t *ev);
/* Flushes and closes; NULL is fine. */
void cd_tfevents_close(cd_tfevents_t *ev);

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of data, and its TFRecord mask. */
uint32_t cd_crc32c(const void *data, size_t len);
uint32_t cd_tfrecord_mask(uint32_t crc);

#endif
