/*
 * Images as the dataset and classify code see them: 8-bit, planar (c, h, w) with the
 * channels in RGB order, 1 (gray) or 3 (RGB) channels.
 *
 * Decoding reads PNG (libpng: palette, gray < 8 bit, 16 bit and alpha are all
 * normalised) and JPEG (libjpeg-turbo: gray, YCbCr, CMYK/YCCK) from a file or a memory
 * buffer and converts to the requested channel count (gray -> RGB copies the plane;
 * RGB -> gray is ITU-R 601: (299 R + 587 G + 114 B + 500) / 1000; alpha is dropped).
 *
 * Resizing follows DIGITS's resize_image (digits/utils/image.py) with the modes
 * squash, crop, fill and half_crop; docs/formats.md gives the exact arithmetic.
 *
 * Every function returns CD_OK or CD_ERR with a message in err (err may be NULL).
 * All functions are thread-safe: they keep no state between calls.
 */
#ifndef CDIGITS_IMAGE_H
#define CDIGITS_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "cdigits/image_kind.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest width or height accepted by the decoders (a guard against absurd headers). */
#define CD_IMAGE_MAX_SIDE 32768
/* Largest width x height accepted by the decoders: 64 megapixels (8192 x 8192). A few
 * hundred bytes of PNG or progressive JPEG can declare a gigapixel image; decoding it
 * would cost seconds and gigabytes before the data ran out. */
#define CD_IMAGE_MAX_PIXELS (1u << 26)

typedef struct cd_image {
    int c, h, w;   /* channels (1 or 3), height, width */
    uint8_t *data; /* (c, h, w) planar, RGB order; owned, free with cd_image_free */
} cd_image_t;

enum cd_resize_mode {
    CD_RESIZE_SQUASH = 0, /* to exactly w x h, aspect ignored */
    CD_RESIZE_CROP,       /* cover w x h keeping aspect, centre crop */
    CD_RESIZE_FILL,       /* fit inside w x h keeping aspect, pad with noise */
    CD_RESIZE_HALF_CROP,  /* halfway between fill and crop: crop one side, pad the other */
    CD_RESIZE_COUNT
};

/* Mode by name ("squash", "crop", "fill", "half_crop"); -1 if unknown. */
int cd_resize_mode_parse(const char *name);
/* Name of a mode; "?" if out of range. */
const char *cd_resize_mode_name(int mode);
/* "squash, crop, fill, half_crop": for error messages. */
const char *cd_resize_mode_list(void);

/* Allocate a (c, h, w) image (contents undefined). CD_ERR if a size is not positive
 * or too large. cd_image_free releases data and zeroes the struct; NULL is fine. */
int cd_image_alloc(cd_image_t *img, int c, int h, int w, char *err, size_t errlen);
void cd_image_free(cd_image_t *img);

/* cd_image_sniff, cd_image_name_ok, cd_image_kinds: cdigits/image_kind.h */

/* Decode an image (PNG, JPEG, BMP, PGM or PPM) held in memory into out (allocated here) with `channels`
 * channels (1 or 3). Truncated or corrupt data is an error, never a partial image. */
int cd_image_decode(const void *buf, size_t len, int channels, cd_image_t *out, char *err,
                    size_t errlen);
/* The same from a file; err names the file. */
int cd_image_load(const char *path, int channels, cd_image_t *out, char *err, size_t errlen);

/* Copy src into out (allocated here) with `channels` channels (gray <-> RGB). */
int cd_image_convert(const cd_image_t *src, int channels, cd_image_t *out, char *err,
                     size_t errlen);

/* src at the top left of a black width x height image (DIGITS's pad_image for object
 * detection); src must fit. out is allocated here. */
int cd_image_pad(const cd_image_t *src, int width, int height, cd_image_t *out, char *err, size_t errlen);

/* Resample src to exactly width x height (allocated into out) with the bilinear
 * (triangle) filter, widened when shrinking so every source pixel contributes
 * (the filter Pillow's BILINEAR uses). */
int cd_image_scale(const cd_image_t *src, int width, int height, cd_image_t *out, char *err,
                   size_t errlen);

/* Resize src to width x height with a resize mode (enum cd_resize_mode). fill and
 * half_crop pad with uniform noise in 0..255 drawn from a generator seeded with
 * noise_seed, so the result is reproducible. out is allocated here. */
int cd_image_resize(const cd_image_t *src, int width, int height, int mode, uint64_t noise_seed,
                    cd_image_t *out, char *err, size_t errlen);

/* Encode to PNG / JPEG in memory; *buf is malloc'ed (caller frees), *len its size.
 * png_level is the zlib level 0..9 (-1: libpng's default); quality is 1..100. */
int cd_image_encode_png(const cd_image_t *img, int png_level, uint8_t **buf, size_t *len,
                        char *err, size_t errlen);
int cd_image_encode_jpeg(const cd_image_t *img, int quality, uint8_t **buf, size_t *len,
                         char *err, size_t errlen);

/* Write img as a PNG file, atomically (temp file, fsync, rename). */
int cd_image_write_png(const char *path, const cd_image_t *img, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
