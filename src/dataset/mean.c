/* mean.bin (float32 mean image with a small header and a CRC), mean.png and mean.jpg. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

#define MEAN_MAGIC "CDMN"
#define MEAN_VERSION 1u
#define MEAN_HEADER 32u


int cd_mean_save(const char *path, int c, int h, int w, uint64_t images, const float *data,
                 char *err, size_t errlen)
{
    size_t n = (size_t)c * h * w;
    size_t len = MEAN_HEADER + n * 4 + 4;
    uint8_t *buf = cd_xcalloc(len, 1);
    memcpy(buf, MEAN_MAGIC, 4);
    ds_put_u32(buf + 4, MEAN_VERSION);
    ds_put_u32(buf + 8, (uint32_t)c);
    ds_put_u32(buf + 12, (uint32_t)h);
    ds_put_u32(buf + 16, (uint32_t)w);
    ds_put_u64(buf + 24, images);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &data[i], 4);
        ds_put_u32(buf + MEAN_HEADER + 4 * i, bits);
    }
    ds_put_u32(buf + len - 4, ds_crc32(0, buf, len - 4));
    int rc = ds_write_file(path, buf, len, err, errlen);
    free(buf);
    return rc;
}

int cd_mean_load(const char *path, int *c, int *h, int *w, float **data)
{
    *data = NULL;
    size_t len = 0;
    uint8_t *buf = (uint8_t *)cd_read_file(path, &len);
    if (!buf)
        return ds_set_last_error("cannot read %s: %s; is the dataset complete?", path,
                                 strerror(errno));
    int rc = CD_ERR;
    if (len < MEAN_HEADER + 4 || memcmp(buf, MEAN_MAGIC, 4) != 0) {
        ds_set_last_error("%s is not a cdigits mean file (no CDMN magic or too short)", path);
        goto out;
    }
    uint32_t ver = ds_get_u32(buf + 4), cc = ds_get_u32(buf + 8), hh = ds_get_u32(buf + 12),
             ww = ds_get_u32(buf + 16);
    if (ver != MEAN_VERSION) {
        ds_set_last_error("%s: mean file version %u is not %u; recreate the dataset", path, ver,
                          MEAN_VERSION);
        goto out;
    }
    if ((cc != 1 && cc != 3) || hh == 0 || ww == 0 || hh > CD_IMAGE_MAX_SIDE ||
        ww > CD_IMAGE_MAX_SIDE || len != MEAN_HEADER + (size_t)cc * hh * ww * 4 + 4) {
        ds_set_last_error("%s: shape %ux%ux%u does not match the file size %zu (truncated?); "
                          "recreate the dataset", path, cc, hh, ww, len);
        goto out;
    }
    if (ds_crc32(0, buf, len - 4) != ds_get_u32(buf + len - 4)) {
        ds_set_last_error("%s fails its checksum (damaged file); recreate the dataset", path);
        goto out;
    }
    size_t n = (size_t)cc * hh * ww;
    float *d = cd_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = ds_get_u32(buf + MEAN_HEADER + 4 * i);
        memcpy(&d[i], &bits, 4);
    }
    *c = (int)cc;
    *h = (int)hh;
    *w = (int)ww;
    *data = d;
    rc = CD_OK;
out:
    free(buf);
    return rc;
}

/* The mean rounded to uint8 (caller frees img). */
static int mean_picture(int c, int h, int w, const float *data, cd_image_t *img, char *err,
                        size_t errlen)
{
    if (cd_image_alloc(img, c, h, w, err, errlen) != CD_OK)
        return CD_ERR;
    size_t n = (size_t)c * h * w;
    for (size_t i = 0; i < n; i++) {
        float v = floorf(data[i] + 0.5f);
        img->data[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    return CD_OK;
}

int cd_mean_save_png(const char *path, int c, int h, int w, const float *data, char *err,
                     size_t errlen)
{
    cd_image_t img;
    if (mean_picture(c, h, w, data, &img, err, errlen) != CD_OK)
        return CD_ERR;
    int rc = cd_image_write_png(path, &img, err, errlen);
    cd_image_free(&img);
    return rc;
}

#define MEAN_JPG_QUALITY 90

int cd_mean_save_jpg(const char *path, int c, int h, int w, const float *data, char *err,
                     size_t errlen)
{
    cd_image_t img;
    if (mean_picture(c, h, w, data, &img, err, errlen) != CD_OK)
        return CD_ERR;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = cd_image_encode_jpeg(&img, MEAN_JPG_QUALITY, &buf, &len, err, errlen);
    cd_image_free(&img);
    if (rc == CD_OK)
        rc = ds_write_file(path, buf, len, err, errlen);
    free(buf);
    return rc;
}

void cd_mean_to_pixel(float *mean, int c, int h, int w)
{
    size_t plane = (size_t)h * (size_t)w;
    for (int ch = 0; ch < c; ch++) {
        double s = 0;
        for (size_t i = 0; i < plane; i++)
            s += mean[(size_t)ch * plane + i];
        for (size_t i = 0; i < plane; i++)
            mean[(size_t)ch * plane + i] = (float)(s / (double)plane);
    }
}
