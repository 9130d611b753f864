/* Base64 (RFC 4648) for the one place the two programs exchange bytes as text: an
 * uploaded image travels from the server to serve-model as a request's image_b64
 * (docs/inference.md). In src/common, so both programs link it; no JSON library. */
#ifndef CDIGITS_BASE64_H
#define CDIGITS_BASE64_H

#include <stddef.h>

/* The standard alphabet with '=' padding, NUL-terminated: 4 * ceil(n / 3) characters.
 * malloc'd (the caller frees), or NULL when out of memory. */
char *cd_base64_encode(const void *data, size_t n);

/* The bytes of standard or URL-safe base64 (both alphabets accepted, padding optional,
 * spaces, tabs and line breaks ignored); *out_len gets their count. malloc'd (the caller
 * frees), or NULL for a character outside both alphabets or when out of memory. */
unsigned char *cd_base64_decode(const char *s, size_t len, size_t *out_len);

#endif
