/* Which files are images this project reads, by their first bytes and by their names:
 * below the dataset code (which decodes them) and the server (which lists and accepts
 * them), so both ask one table. */
#ifndef CDIGITS_IMAGE_KIND_H
#define CDIGITS_IMAGE_KIND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cd_image_format { CD_IMAGE_UNKNOWN = 0, CD_IMAGE_PNG, CD_IMAGE_JPEG, CD_IMAGE_BMP, CD_IMAGE_PNM };

/* The format from the first bytes of a file (magic numbers, not the name). */
int cd_image_sniff(const void *buf, size_t len);
/* 1 when a file name has the extension of a format read here (.png, .jpg, .jpeg, .jpe,
 * .bmp, .pgm, .ppm, .pnm; any case). */
int cd_image_name_ok(const char *name);
/* "PNG, JPEG, BMP, PGM or PPM": for messages. */
const char *cd_image_kinds(void);

#ifdef __cplusplus
}
#endif

#endif
