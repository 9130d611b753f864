/* Reading a .db file through a read-only mmap. The handle is immutable after open,
 * so any number of threads may read records at once. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

struct cd_db {
    char *path;
    const uint8_t *map;
    size_t map_len;
    ds_db_header h;
    size_t rec_size; /* c*h*w values */
    size_t rec_bytes; /* the bytes of a fixed-size record (none: rec_size, f32: 4x) */
};

#define RECREATE "; recreate the dataset"

/* Checks every relation docs/formats.md promises between the header fields and the
 * file size, so the accessors need no bounds checks beyond i < count. */
static int check_header(const cd_db_t *db, size_t file_len, char *err, size_t errlen)
{
    const ds_db_header *h = &db->h;
    const char *p = db->path;
    if (h->version != DS_DB_VERSION)
        return ds_err(err, errlen, "%s: format version %u is not the version %u this build "
                      "reads; use the cdigits that made it or recreate the dataset", p,
                      h->version, DS_DB_VERSION);
    if (h->header_size != DS_DB_HEADER_SIZE || h->data_offset != DS_DB_HEADER_SIZE)
        return ds_err(err, errlen, "%s: bad header size%s", p, RECREATE);
    if (h->encoding >= CD_ENC_COUNT)
        return ds_err(err, errlen, "%s: unknown record encoding %u (known: %s, f32)%s", p,
                      h->encoding, cd_encoding_list(), RECREATE);
    if (h->channels > CD_DB_MAX_VALUES || h->height > CD_DB_MAX_VALUES || h->width > CD_DB_MAX_VALUES ||
        !cd_db_shape_ok((int)h->encoding, (int)h->channels, (int)h->height, (int)h->width))
        return ds_err(err, errlen, "%s: bad record shape %ux%ux%u for encoding %s in the header%s", p,
                      h->channels, h->height, h->width, cd_encoding_name((int)h->encoding), RECREATE);
    if (h->flags & ~DS_DB_FLAG_MIXED)
        return ds_err(err, errlen, "%s: unknown header flags %#x%s", p, h->flags, RECREATE);
    if ((h->flags & DS_DB_FLAG_MIXED) && cd_encoding_fixed((int)h->encoding))
        return ds_err(err, errlen, "%s: records of varying size in fixed-size encoding %s%s", p,
                      cd_encoding_name((int)h->encoding), RECREATE);
    if (h->file_size != file_len)
        return ds_err(err, errlen, "%s: the header says %llu bytes but the file has %zu (%s)%s",
                      p, (unsigned long long)h->file_size, file_len,
                      file_len < h->file_size ? "truncated" : "extra bytes", RECREATE);
    /* sizes from here on are bounded by the file size, so the sums cannot overflow */
    uint64_t n = h->count;
    if (n > file_len / 8 || h->data_size > file_len)
        return ds_err(err, errlen, "%s: record count %llu does not fit the file%s", p,
                      (unsigned long long)n, RECREATE);
    uint64_t data_end = h->data_offset + h->data_size;
    uint64_t tables = (data_end + 7) / 8 * 8;
    int indexed = !cd_encoding_fixed((int)h->encoding);
    if ((!indexed && h->data_size != n * db->rec_bytes) ||
        h->index_offset != (indexed ? tables : 0) ||
        h->labels_offset != tables + (indexed ? n * ds_db_index_entry(h->flags) : 0) ||
        h->crc_offset != h->labels_offset + n * 4 || h->file_size != h->crc_offset + n * 4)
        return ds_err(err, errlen, "%s: the header's offsets do not match its record count%s", p,
                      RECREATE);
    uint32_t crc = ds_crc32(0, db->map, DS_DB_META_CRC_AT);
    crc = ds_crc32(crc, db->map + tables, (size_t)(file_len - tables));
    if (crc != h->meta_crc)
        return ds_err(err, errlen, "%s: the header or tables fail their checksum (damaged "
                      "file)%s", p, RECREATE);
    for (uint64_t i = 0; indexed && i < n; i++) {
        const uint8_t *e = db->map + h->index_offset + i * ds_db_index_entry(h->flags);
        uint64_t off = ds_get_u64(e), size = ds_get_u64(e + 8);
        if (off < h->data_offset || size == 0 || off > data_end || size > data_end - off)
            return ds_err(err, errlen, "%s: record %llu lies outside the data area%s", p,
                          (unsigned long long)i, RECREATE);
        uint32_t rh = (h->flags & DS_DB_FLAG_MIXED) ? ds_get_u32(e + 16) : 1;
        uint32_t rw = (h->flags & DS_DB_FLAG_MIXED) ? ds_get_u32(e + 20) : 1;
        if (rh < 1 || rw < 1 || rh > h->height || rw > h->width)
            return ds_err(err, errlen, "%s: record %llu is %ux%u, outside the header's bounds %ux%u%s", p,
                          (unsigned long long)i, rw, rh, h->width, h->height, RECREATE);
    }
    return CD_OK;
}

cd_db_t *cd_db_open(const char *path, char *err, size_t errlen)
{
    cd_db_t *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        free(db);
        ds_err(err, errlen, "out of memory opening %s", path);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ds_err(err, errlen, "cannot open %s: %s; check the dataset folder (is the dataset "
               "complete?)", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ds_err(err, errlen, "%s is not a regular file", path);
        close(fd);
        goto fail;
    }
    if ((size_t)st.st_size < DS_DB_HEADER_SIZE) {
        ds_err(err, errlen, "%s: %lld bytes is too short for a dataset file (truncated)%s",
               path, (long long)st.st_size, RECREATE);
        close(fd);
        goto fail;
    }
    db->map_len = (size_t)st.st_size;
    void *m = mmap(NULL, db->map_len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ds_err(err, errlen, "cannot map %s: %s", path, strerror(errno));
        goto fail;
    }
    db->map = m;
    if (ds_db_header_unpack(db->map, &db->h) != CD_OK) {
        ds_err(err, errlen, "%s is not a cdigits dataset file (no CDDB magic)", path);
        goto fail;
    }
    /* sized only for a shape the encoding allows (check_header refuses the others), so the
     * product cannot overflow */
    if (db->h.channels <= CD_DB_MAX_VALUES && db->h.height <= CD_DB_MAX_VALUES && db->h.width <= CD_DB_MAX_VALUES &&
        cd_db_shape_ok((int)db->h.encoding, (int)db->h.channels, (int)db->h.height, (int)db->h.width)) {
        db->rec_size = (size_t)db->h.channels * db->h.height * db->h.width;
        db->rec_bytes = db->rec_size * (db->h.encoding == CD_ENC_F32 ? sizeof(float) : 1);
    }
    if (check_header(db, db->map_len, err, errlen) != CD_OK)
        goto fail;
    return db;
fail:
    cd_db_close(db);
    return NULL;
}

void cd_db_close(cd_db_t *db)
{
    if (!db)
        return;
    if (db->map)
        munmap((void *)db->map, db->map_len);
    free(db->path);
    free(db);
}

size_t cd_db_count(const cd_db_t *db) { return (size_t)db->h.count; }
int cd_db_channels(const cd_db_t *db) { return (int)db->h.channels; }
int cd_db_height(const cd_db_t *db) { return (int)db->h.height; }
int cd_db_width(const cd_db_t *db) { return (int)db->h.width; }
int cd_db_encoding(const cd_db_t *db) { return (int)db->h.encoding; }
int cd_db_num_classes(const cd_db_t *db) { return (int)db->h.num_classes; }

int cd_db_mixed(const cd_db_t *db) { return (db->h.flags & DS_DB_FLAG_MIXED) != 0; }

int cd_db_record_shape(const cd_db_t *db, size_t i, int *height, int *width, char *err, size_t errlen)
{
    if (i >= db->h.count)
        return ds_err(err, errlen, "%s: record %zu is out of range (%llu records)", db->path, i,
                      (unsigned long long)db->h.count);
    *height = (int)db->h.height;
    *width = (int)db->h.width;
    if (cd_db_mixed(db)) {
        const uint8_t *e = db->map + db->h.index_offset + i * DS_DB_INDEX_ENTRY_MIXED;
        *height = (int)ds_get_u32(e + 16);
        *width = (int)ds_get_u32(e + 20);
    }
    return CD_OK;
}

int cd_db_label(const cd_db_t *db, size_t i)
{
    if (i >= db->h.count)
        return -1;
    return (int32_t)ds_get_u32(db->map + db->h.labels_offset + i * 4);
}

const uint8_t *cd_db_record(const cd_db_t *db, size_t i, size_t *size)
{
    if (i >= db->h.count)
        return NULL;
    if (cd_encoding_fixed((int)db->h.encoding)) {
        if (size)
            *size = db->rec_bytes;
        return db->map + db->h.data_offset + i * db->rec_bytes;
    }
    const uint8_t *e = db->map + db->h.index_offset + i * ds_db_index_entry(db->h.flags);
    if (size)
        *size = (size_t)ds_get_u64(e + 8);
    return db->map + ds_get_u64(e);
}

const uint8_t *cd_db_raw(const cd_db_t *db, size_t i)
{
    return db->h.encoding == CD_ENC_NONE ? cd_db_record(db, i, NULL) : NULL;
}

/* Encoded record i (png, jpg) decoded into img, checked against the db's shape. */
static int decode_record(const cd_db_t *db, size_t i, const uint8_t *rec, size_t size, cd_image_t *img,
                         char *err, size_t errlen)
{
    char why[256];
    int h = 0, w = 0;
    if (cd_db_record_shape(db, i, &h, &w, err, errlen) != CD_OK)
        return CD_ERR;
    if (cd_image_decode(rec, size, (int)db->h.channels, img, why, sizeof why) != CD_OK)
        return ds_err(err, errlen, "%s: record %zu: %s%s", db->path, i, why, RECREATE);
    if (img->h != h || img->w != w) {
        ds_err(err, errlen, "%s: record %zu is %dx%d, not %dx%d%s", db->path, i, img->w, img->h, w, h,
               RECREATE);
        cd_image_free(img);
        return CD_ERR;
    }
    return CD_OK;
}

int cd_db_read(const cd_db_t *db, size_t i, uint8_t *chw_out, char *err, size_t errlen)
{
    size_t size = 0;
    const uint8_t *rec = cd_db_record(db, i, &size);
    if (!rec)
        return ds_err(err, errlen, "%s: record %zu is out of range (%llu records)", db->path, i,
                      (unsigned long long)db->h.count);
    if (db->h.encoding == CD_ENC_NONE) {
        memcpy(chw_out, rec, size);
        return CD_OK;
    }
    if (db->h.encoding == CD_ENC_F32)
        return ds_err(err, errlen, "%s holds float values, not images (cd_db_read_f32 reads them)", db->path);
    cd_image_t img;
    if (decode_record(db, i, rec, size, &img, err, errlen) != CD_OK)
        return CD_ERR;
    memcpy(chw_out, img.data, (size_t)img.c * img.h * img.w);
    cd_image_free(&img);
    return CD_OK;
}

int cd_db_read_f32(const cd_db_t *db, size_t i, float *out, char *err, size_t errlen)
{
    size_t size = 0;
    const uint8_t *rec = cd_db_record(db, i, &size);
    if (!rec)
        return ds_err(err, errlen, "%s: record %zu is out of range (%llu records)", db->path, i,
                      (unsigned long long)db->h.count);
    if (db->h.encoding == CD_ENC_F32) {
        for (size_t k = 0; k < db->rec_size; k++) {
            uint32_t u = ds_get_u32(rec + 4 * k);
            memcpy(&out[k], &u, sizeof u);
        }
        return CD_OK;
    }
    cd_image_t img = {0};
    if (db->h.encoding != CD_ENC_NONE && decode_record(db, i, rec, size, &img, err, errlen) != CD_OK)
        return CD_ERR;
    const uint8_t *px = db->h.encoding == CD_ENC_NONE ? rec : img.data; /* the pixels, read once */
    size_t values = db->h.encoding == CD_ENC_NONE ? db->rec_size : (size_t)img.c * img.h * img.w;
    for (size_t k = 0; k < values; k++)
        out[k] = (float)px[k];
    if (db->h.encoding != CD_ENC_NONE)
        cd_image_free(&img);
    return CD_OK;
}

int cd_db_verify(const cd_db_t *db, char *err, size_t errlen)
{
    for (size_t i = 0; i < db->h.count; i++) {
        size_t size = 0;
        const uint8_t *rec = cd_db_record(db, i, &size);
        uint32_t want = ds_get_u32(db->map + db->h.crc_offset + i * 4);
        uint32_t got = ds_crc32(0, rec, size);
        if (want != got)
            return ds_err(err, errlen, "%s: record %zu fails its checksum (stored %08x, "
                          "computed %08x): the file is damaged%s", db->path, i, want, got,
                          RECREATE);
        int label = cd_db_label(db, i);
        if (label < 0 || (db->h.num_classes && (uint32_t)label >= db->h.num_classes))
            return ds_err(err, errlen, "%s: record %zu has label %d outside 0..%u%s", db->path,
                          i, label, db->h.num_classes - 1, RECREATE);
    }
    return CD_OK;
}
