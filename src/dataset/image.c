/* Planar images: allocation, decode to a channel count, encode, gray <-> RGB conversion.
 * The codecs are png_codec.c, jpeg_codec.c, bmp_codec.c and pnm_codec.c; which one
 * reads a file is src/common/image_kind.c's call. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

int cd_image_alloc(cd_image_t *img, int c, int h, int w, char *err, size_t errlen)
{
    memset(img, 0, sizeof *img);
    if ((c != 1 && c != 3) || h <= 0 || w <= 0 || h > CD_IMAGE_MAX_SIDE || w > CD_IMAGE_MAX_SIDE)
        return ds_err(err, errlen, "image shape %dx%dx%d is not supported (channels 1 or 3, "
                                   "sides 1..%d)", c, h, w, CD_IMAGE_MAX_SIDE);
    img->data = malloc((size_t)c * h * w);
    if (!img->data)
        return ds_err(err, errlen, "out of memory for a %dx%dx%d image", c, h, w);
    img->c = c;
    img->h = h;
    img->w = w;
    return CD_OK;
}

void cd_image_free(cd_image_t *img)
{
    if (!img)
        return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

/* Interleaved pixels with c_in channels -> planar image with c_out channels. */
static void hwc_to_image(const uint8_t *hwc, int c_in, int h, int w, cd_image_t *out)
{
    size_t plane = (size_t)h * w;
    if (c_in == out->c) {
        ds_hwc_to_chw(hwc, out->data, c_in, h, w);
    } else if (c_in == 1) {
        for (int k = 0; k < 3; k++)
            memcpy(out->data + k * plane, hwc, plane);
    } else {
        for (size_t i = 0; i < plane; i++) {
            const uint8_t *p = hwc + 3 * i;
            out->data[i] = (uint8_t)((299u * p[0] + 587u * p[1] + 114u * p[2] + 500u) / 1000u);
        }
    }
}

typedef int (*decode_fn)(const uint8_t *, size_t, int, uint8_t **, int *, int *, int *, char *,
                         size_t);
static const decode_fn g_decoders[] = {
    [CD_IMAGE_PNG] = ds_png_decode,
    [CD_IMAGE_JPEG] = ds_jpeg_decode,
    [CD_IMAGE_BMP] = ds_bmp_decode,
    [CD_IMAGE_PNM] = ds_pnm_decode,
};

int ds_image_decode_hwc(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c,
                        int *h, int *w, char *err, size_t errlen)
{
    int fmt = cd_image_sniff(buf, len);
    if (fmt == CD_IMAGE_UNKNOWN)
        return ds_err(err, errlen, "not a %s image", cd_image_kinds());
    return g_decoders[fmt](buf, len, want_c, pixels, c, h, w, err, errlen);
}

int cd_image_decode(const void *buf, size_t len, int channels, cd_image_t *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3)
        return ds_err(err, errlen, "channels must be 1 or 3, not %d", channels);
    uint8_t *px = NULL;
    int c = 0, h = 0, w = 0;
    if (ds_image_decode_hwc(buf, len, channels, &px, &c, &h, &w, err, errlen) != CD_OK)
        return CD_ERR;
    if (cd_image_alloc(out, channels, h, w, err, errlen) != CD_OK) {
        free(px);
        return CD_ERR;
    }
    hwc_to_image(px, c, h, w, out);
    free(px);
    return CD_OK;
}

int cd_image_load(const char *path, int channels, cd_image_t *out, char *err, size_t errlen)
{
    size_t len = 0;
    memset(out, 0, sizeof *out);
    char *buf = cd_read_file(path, &len);
    if (!buf)
        return ds_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    char why[256];
    int rc = cd_image_decode(buf, len, channels, out, why, sizeof why);
    free(buf);
    if (rc != CD_OK)
        return ds_err(err, errlen, "%s: %s", path, why);
    return CD_OK;
}

int cd_image_pad(const cd_image_t *src, int width, int height, cd_image_t *out, char *err, size_t errlen)
{
    if (src->w > width || src->h > height) {
        snprintf(err, errlen, "a %dx%d image does not fit a padding of %dx%d", src->w, src->h, width, height);
        return CD_ERR;
    }
    if (cd_image_alloc(out, src->c, height, width, err, errlen) != CD_OK)
        return CD_ERR;
    memset(out->data, 0, (size_t)src->c * height * width);
    for (int ch = 0; ch < src->c; ch++)
        for (int y = 0; y < src->h; y++)
            memcpy(out->data + ((size_t)ch * height + y) * width, src->data + ((size_t)ch * src->h + y) * src->w,
                   (size_t)src->w);
    return CD_OK;
}

int cd_image_convert(const cd_image_t *src, int channels, cd_image_t *out, char *err,
                     size_t errlen)
{
    if (cd_image_alloc(out, channels, src->h, src->w, err, errlen) != CD_OK)
        return CD_ERR;
    size_t plane = (size_t)src->h * src->w;
    if (src->c == channels) {
        memcpy(out->data, src->data, plane * channels);
    } else if (src->c == 1) {
        for (int k = 0; k < 3; k++)
            memcpy(out->data + k * plane, src->data, plane);
    } else {
        const uint8_t *r = src->data, *g = r + plane, *b = g + plane;
        for (size_t i = 0; i < plane; i++)
            out->data[i] = (uint8_t)((299u * r[i] + 587u * g[i] + 114u * b[i] + 500u) / 1000u);
    }
    return CD_OK;
}

static int check_image(const cd_image_t *img, char *err, size_t errlen)
{
    if (!img || !img->data || (img->c != 1 && img->c != 3) || img->h <= 0 || img->w <= 0)
        return ds_err(err, errlen, "not a valid image (channels 1 or 3, positive sides)");
    return CD_OK;
}

/* What the codecs encode: interleaved samples (h, w, c), a level or quality. */
typedef int (*hwc_encoder)(const uint8_t *hwc, int c, int h, int w, int setting, uint8_t **buf, size_t *len,
                           char *err, size_t errlen);

/* img (checked) interleaved, then encoded by enc; what names the format in messages. */
static int encode_planar(const cd_image_t *img, hwc_encoder enc, int setting, const char *what, uint8_t **buf,
                         size_t *len, char *err, size_t errlen)
{
    uint8_t *hwc = malloc((size_t)img->c * img->h * img->w);
    if (!hwc)
        return ds_err(err, errlen, "out of memory encoding a %s", what);
    ds_chw_to_hwc(img->data, hwc, img->c, img->h, img->w);
    int rc = enc(hwc, img->c, img->h, img->w, setting, buf, len, err, errlen);
    free(hwc);
    return rc;
}

int cd_image_encode_png(const cd_image_t *img, int png_level, uint8_t **buf, size_t *len,
                        char *err, size_t errlen)
{
    if (check_image(img, err, errlen) != CD_OK)
        return CD_ERR;
    return encode_planar(img, ds_png_encode, png_level, "PNG", buf, len, err, errlen);
}

int cd_image_encode_jpeg(const cd_image_t *img, int quality, uint8_t **buf, size_t *len,
                         char *err, size_t errlen)
{
    if (check_image(img, err, errlen) != CD_OK)
        return CD_ERR;
    if (quality < 1 || quality > 100)
        return ds_err(err, errlen, "JPEG quality %d is not in 1..100", quality);
    return encode_planar(img, ds_jpeg_encode, quality, "JPEG", buf, len, err, errlen);
}

int cd_image_write_png(const char *path, const cd_image_t *img, char *err, size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char why[256];
    if (cd_image_encode_png(img, -1, &buf, &len, why, sizeof why) != CD_OK)
        return ds_err(err, errlen, "%s: %s", path, why);
    int rc = ds_write_file(path, buf, len, err, errlen);
    free(buf);
    return rc;
}
