/* The .db header's byte layout and the record encodings (docs/formats.md). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

void ds_db_header_pack(const ds_db_header *h, uint8_t out[DS_DB_HEADER_SIZE])
{
    memset(out, 0, DS_DB_HEADER_SIZE);
    memcpy(out, DS_DB_MAGIC, 4);
    ds_put_u32(out + 4, h->version);
    ds_put_u32(out + 8, h->header_size);
    ds_put_u32(out + 12, h->channels);
    ds_put_u32(out + 16, h->height);
    ds_put_u32(out + 20, h->width);
    ds_put_u32(out + 24, h->encoding);
    ds_put_u32(out + 28, h->flags);
    ds_put_u64(out + 32, h->count);
    ds_put_u64(out + 40, h->data_offset);
    ds_put_u64(out + 48, h->data_size);
    ds_put_u64(out + 56, h->index_offset);
    ds_put_u64(out + 64, h->labels_offset);
    ds_put_u64(out + 72, h->crc_offset);
    ds_put_u64(out + 80, h->file_size);
    ds_put_u32(out + 88, h->num_classes);
    ds_put_u32(out + DS_DB_META_CRC_AT, h->meta_crc);
}

int ds_db_header_unpack(const uint8_t in[DS_DB_HEADER_SIZE], ds_db_header *h)
{
    if (memcmp(in, DS_DB_MAGIC, 4) != 0)
        return CD_ERR;
    h->version = ds_get_u32(in + 4);
    h->header_size = ds_get_u32(in + 8);
    h->channels = ds_get_u32(in + 12);
    h->height = ds_get_u32(in + 16);
    h->width = ds_get_u32(in + 20);
    h->encoding = ds_get_u32(in + 24);
    h->flags = ds_get_u32(in + 28);
    h->count = ds_get_u64(in + 32);
    h->data_offset = ds_get_u64(in + 40);
    h->data_size = ds_get_u64(in + 48);
    h->index_offset = ds_get_u64(in + 56);
    h->labels_offset = ds_get_u64(in + 64);
    h->crc_offset = ds_get_u64(in + 72);
    h->file_size = ds_get_u64(in + 80);
    h->num_classes = ds_get_u32(in + 88);
    h->meta_crc = ds_get_u32(in + DS_DB_META_CRC_AT);
    return CD_OK;
}

/* ---- encodings ------------------------------------------------------------- */

static int encode_none(const cd_image_t *img, uint8_t **buf, size_t *len, char *err,
                       size_t errlen)
{
    size_t n = (size_t)img->c * img->h * img->w;
    *buf = malloc(n);
    if (!*buf)
        return ds_err(err, errlen, "out of memory for a %zu-byte record", n);
    memcpy(*buf, img->data, n);
    *len = n;
    return CD_OK;
}

/* zlib level 3: a quarter of the default's time for a few percent more bytes. */
static int encode_png(const cd_image_t *img, uint8_t **buf, size_t *len, char *err,
                      size_t errlen)
{
    return cd_image_encode_png(img, 3, buf, len, err, errlen);
}

static int encode_jpg(const cd_image_t *img, uint8_t **buf, size_t *len, char *err,
                      size_t errlen)
{
    return cd_image_encode_jpeg(img, 90, buf, len, err, errlen);
}

typedef struct encoding_def {
    const char *name;
    int (*encode)(const cd_image_t *img, uint8_t **buf, size_t *len, char *err, size_t errlen);
} encoding_def;

/* f32 records are values, not images: they are added as bytes (cd_db_writer_add) */
static const encoding_def g_encodings[CD_ENC_COUNT] = {
    [CD_ENC_NONE] = {"none", encode_none},
    [CD_ENC_PNG] = {"png", encode_png},
    [CD_ENC_JPG] = {"jpg", encode_jpg},
    [CD_ENC_F32] = {"f32", NULL},
};

int cd_encoding_fixed(int encoding) { return encoding == CD_ENC_NONE || encoding == CD_ENC_F32; }

int cd_db_shape_ok(int encoding, int channels, int height, int width)
{
    if (encoding < 0 || encoding >= CD_ENC_COUNT || channels < 1 || height < 1 || width < 1)
        return 0;
    if (encoding == CD_ENC_F32) { /* one factor at a time: the product of three ints can overflow */
        uint64_t ch = (uint64_t)channels * (uint64_t)height;
        return ch <= CD_DB_MAX_VALUES && ch * (uint64_t)width <= CD_DB_MAX_VALUES;
    }
    return (channels == 1 || channels == 3) && height <= CD_IMAGE_MAX_SIDE && width <= CD_IMAGE_MAX_SIDE;
}

int cd_encoding_parse(const char *name)
{
    for (int i = 0; i < CD_ENC_IMAGE_COUNT; i++)
        if (name && strcmp(name, g_encodings[i].name) == 0)
            return i;
    return -1;
}

const char *cd_encoding_name(int encoding)
{
    return encoding >= 0 && encoding < CD_ENC_COUNT ? g_encodings[encoding].name : "?";
}

const char *cd_encoding_list(void) { return "none, png, jpg"; }

int cd_db_encode_record(const cd_image_t *img, int encoding, uint8_t **buf, size_t *len,
                        char *err, size_t errlen)
{
    *buf = NULL;
    *len = 0;
    if (encoding < 0 || encoding >= CD_ENC_IMAGE_COUNT)
        return ds_err(err, errlen, "encoding %d is not one of %s", encoding, cd_encoding_list());
    return g_encodings[encoding].encode(img, buf, len, err, errlen);
}
