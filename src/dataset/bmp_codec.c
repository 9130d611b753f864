/* Windows BMP through stb_image (Debian's libstb-dev header), compiled here with only
 * its BMP decoder. stb reads past the end of the data as zeros, so the header is read
 * first and a file shorter than its pixel rows is refused: never a partial image. */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/image.h"
#include "cdigits/util.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS CD_IMAGE_MAX_SIDE
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#include <stb_image.h>
#pragma GCC diagnostic pop

/* The bytes a BMP needs for its header and pixel rows, from its headers (which stb has
 * accepted); more than any file when the headers themselves are cut short. */
static uint64_t bmp_needs(const uint8_t *b, size_t len)
{
    if (len < 18 || len < 14 + (uint64_t)ds_get_u32(b + 14) || len < 30)
        return UINT64_MAX; /* 26 bytes of OS/2 header and no pixel row is short too */
    uint32_t offset = ds_get_u32(b + 10), hsz = ds_get_u32(b + 14);
    int64_t width, height;
    uint32_t bpp;
    if (hsz == 12) {
        width = ds_get_u16(b + 18);
        height = ds_get_u16(b + 20);
        bpp = ds_get_u16(b + 24);
    } else {
        width = (int32_t)ds_get_u32(b + 18);
        height = (int32_t)ds_get_u32(b + 22);
        bpp = ds_get_u16(b + 28);
    }
    if (height < 0)
        height = -height; /* rows stored top-down */
    if (width <= 0 || height <= 0 || bpp == 0 || bpp > 32)
        return 0;
    uint64_t row = ((uint64_t)width * bpp + 31) / 32 * 4;
    return (uint64_t)offset + row * (uint64_t)height;
}

int ds_bmp_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h, int *w,
                  char *err, size_t errlen)
{
    (void)want_c;
    if (len > INT_MAX)
        return ds_err(err, errlen, "a BMP of %zu bytes is too large", len);
    int x = 0, y = 0, comp = 0;
    if (!stbi_info_from_memory(buf, (int)len, &x, &y, &comp))
        return ds_err(err, errlen, "cannot read the BMP: %s", stbi_failure_reason());
    if (x <= 0 || y == 0 || y == INT_MIN)
        return ds_err(err, errlen, "bad BMP: %dx%d pixels", x, y);
    if (y < 0)
        y = -y; /* stb's info gives a top-down BMP's height as stored, negative */
    if ((uint64_t)x * (uint64_t)y > CD_IMAGE_MAX_PIXELS)
        return ds_err(err, errlen, "%dx%d is more than %u pixels; resize the image before importing it", x, y,
                      CD_IMAGE_MAX_PIXELS);
    uint64_t need = bmp_needs(buf, len);
    if (need == UINT64_MAX)
        return ds_err(err, errlen, "truncated BMP: %zu bytes end inside its headers", len);
    if (need > len)
        return ds_err(err, errlen, "truncated BMP: %zu of %llu bytes", len, (unsigned long long)need);
    /* alpha dropped as for PNG; gray to RGB and back are cd_image_decode's */
    int keep = comp >= 3 ? 3 : 1;
    uint8_t *px = stbi_load_from_memory(buf, (int)len, &x, &y, &comp, keep);
    if (!px)
        return ds_err(err, errlen, "cannot read the BMP: %s", stbi_failure_reason());
    *pixels = px; /* stb allocates with malloc: the caller's free() releases it */
    *c = keep;
    *h = y;
    *w = x;
    return CD_OK;
}
