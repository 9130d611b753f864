/* Writing a .db file: records streamed to PATH.tmp through a buffer, tables kept in
 * memory and written at the end, then the header, fsync and rename (docs/formats.md). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

#define WRITE_BUF (4u << 20)

struct cd_db_writer {
    char *path, *tmp;
    int fd;
    ds_db_header h;
    size_t rec_size;   /* the size of every fixed-size record (none: c*h*w, f32: 4*c*h*w) */
    uint8_t *buf;      /* pending bytes, written when full */
    size_t buf_len;
    uint64_t pos;      /* file offset of the next byte after buf */
    uint8_t *index;    /* count * 16 bytes: offset, size (little-endian u64); mixed: 24,
                        * then height, width (u32) */
    uint8_t *labels;   /* count * 4 bytes: int32 */
    uint8_t *crcs;     /* count * 4 bytes: u32 */
    size_t cap;        /* records the tables have room for */
};

static int io_err(cd_db_writer_t *w, int e, const char *what, char *err, size_t errlen)
{
    return ds_err(err, errlen, "%s %s: %s; %s", what, w->tmp, strerror(e), ds_errno_advice(e));
}

static int flush_buf(cd_db_writer_t *w, char *err, size_t errlen)
{
    if (w->buf_len && cd_write_all(w->fd, w->buf, w->buf_len) != CD_OK)
        return io_err(w, errno, "writing", err, errlen);
    w->buf_len = 0;
    return CD_OK;
}

static int put_bytes(cd_db_writer_t *w, const void *p, size_t n, char *err, size_t errlen)
{
    if (w->buf_len + n > WRITE_BUF && flush_buf(w, err, errlen) != CD_OK)
        return CD_ERR;
    if (n > WRITE_BUF) {
        if (cd_write_all(w->fd, p, n) != CD_OK)
            return io_err(w, errno, "writing", err, errlen);
    } else {
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
    }
    w->pos += n;
    return CD_OK;
}

cd_db_writer_t *cd_db_writer_open(const char *path, int channels, int height, int width,
                                  int encoding, int num_classes, char *err, size_t errlen)
{
    if (!cd_db_shape_ok(encoding, channels, height, width) || num_classes < 0) {
        ds_err(err, errlen, "%s: bad shape %dx%dx%d or encoding %d", path, channels, height,
               width, encoding);
        return NULL;
    }
    cd_db_writer_t *w = calloc(1, sizeof *w);
    size_t plen = strlen(path);
    if (w) {
        w->path = strdup(path);
        w->tmp = malloc(plen + 5);
        w->buf = malloc(WRITE_BUF);
    }
    if (!w || !w->path || !w->tmp || !w->buf) {
        ds_err(err, errlen, "out of memory opening %s", path);
        goto fail;
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp", 5);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        ds_err(err, errlen, "cannot create %s: %s; %s", w->tmp, strerror(e), ds_errno_advice(e));
        goto fail;
    }
    w->h.version = DS_DB_VERSION;
    w->h.header_size = DS_DB_HEADER_SIZE;
    w->h.channels = (uint32_t)channels;
    w->h.height = (uint32_t)height;
    w->h.width = (uint32_t)width;
    w->h.encoding = (uint32_t)encoding;
    w->h.num_classes = (uint32_t)num_classes;
    w->h.data_offset = DS_DB_HEADER_SIZE;
    w->rec_size = (size_t)channels * height * width * (encoding == CD_ENC_F32 ? sizeof(float) : 1);
    /* the header is written last; reserve its bytes (zeros: no valid magic yet) */
    uint8_t zero[DS_DB_HEADER_SIZE] = {0};
    if (put_bytes(w, zero, sizeof zero, err, errlen) != CD_OK) {
        cd_db_writer_abort(w);
        return NULL;
    }
    return w;
fail:
    if (w) {
        free(w->path);
        free(w->tmp);
        free(w->buf);
        free(w);
    }
    return NULL;
}

size_t cd_db_writer_count(const cd_db_writer_t *w) { return w ? (size_t)w->h.count : 0; }

void ds_db_writer_set_classes(cd_db_writer_t *w, int num_classes)
{
    if (w && num_classes >= 0)
        w->h.num_classes = (uint32_t)num_classes;
}

static int grow_tables(cd_db_writer_t *w, char *err, size_t errlen)
{
    size_t cap = w->cap ? w->cap * 2 : 1024;
    uint8_t *ix = realloc(w->index, cap * ds_db_index_entry(w->h.flags));
    if (ix)
        w->index = ix;
    uint8_t *lb = ix ? realloc(w->labels, cap * 4) : NULL;
    if (lb)
        w->labels = lb;
    uint8_t *cr = lb ? realloc(w->crcs, cap * 4) : NULL;
    if (!cr)
        return ds_err(err, errlen, "out of memory for the tables of %s (%zu records)", w->path,
                      cap);
    w->crcs = cr;
    w->cap = cap;
    return CD_OK;
}

int cd_db_writer_set_mixed(cd_db_writer_t *w, char *err, size_t errlen)
{
    if (cd_encoding_fixed((int)w->h.encoding))
        return ds_err(err, errlen, "%s: encoding %s holds records of one size only; use png or jpg for "
                      "images of varying size", w->path, cd_encoding_name((int)w->h.encoding));
    if (w->h.count)
        return ds_err(err, errlen, "%s: records of varying size must be asked for before the first", w->path);
    w->h.flags |= DS_DB_FLAG_MIXED;
    w->h.height = w->h.width = 0; /* the largest record's, as they come */
    return CD_OK;
}

int cd_db_writer_add(cd_db_writer_t *w, const void *record, size_t size, int label, char *err,
                     size_t errlen)
{
    return cd_db_writer_add_sized(w, record, size, label, (int)w->h.height, (int)w->h.width, err, errlen);
}

int cd_db_writer_add_sized(cd_db_writer_t *w, const void *record, size_t size, int label, int height,
                           int width, char *err, size_t errlen)
{
    int mixed = (w->h.flags & DS_DB_FLAG_MIXED) != 0;
    if (!mixed && (height != (int)w->h.height || width != (int)w->h.width))
        return ds_err(err, errlen, "%s: a %dx%d record in a db of %ux%u records", w->path, width, height,
                      w->h.width, w->h.height);
    if (mixed && !cd_db_shape_ok((int)w->h.encoding, (int)w->h.channels, height, width))
        return ds_err(err, errlen, "%s: a record of %dx%d is outside what the db can hold", w->path, width,
                      height);
    if (cd_encoding_fixed((int)w->h.encoding) && size != w->rec_size)
        return ds_err(err, errlen, "%s: a fixed-size record must be %zu bytes (%ux%ux%u), not %zu",
                      w->path, w->rec_size, w->h.channels, w->h.height, w->h.width, size);
    if (label < 0 || (w->h.num_classes && (uint32_t)label >= w->h.num_classes))
        return ds_err(err, errlen, "%s: label %d is not in 0..%u", w->path, label,
                      w->h.num_classes ? w->h.num_classes - 1 : 0);
    if (size == 0)
        return ds_err(err, errlen, "%s: empty record", w->path);
    if (w->h.count == w->cap && grow_tables(w, err, errlen) != CD_OK)
        return CD_ERR;
    size_t i = (size_t)w->h.count;
    uint8_t *e = w->index + i * ds_db_index_entry(w->h.flags);
    ds_put_u64(e, w->pos);
    ds_put_u64(e + 8, size);
    if (mixed) {
        ds_put_u32(e + 16, (uint32_t)height);
        ds_put_u32(e + 20, (uint32_t)width);
        if ((uint32_t)height > w->h.height)
            w->h.height = (uint32_t)height;
        if ((uint32_t)width > w->h.width)
            w->h.width = (uint32_t)width;
    }
    ds_put_u32(w->labels + i * 4, (uint32_t)label);
    ds_put_u32(w->crcs + i * 4, ds_crc32(0, record, size));
    if (put_bytes(w, record, size, err, errlen) != CD_OK)
        return CD_ERR;
    w->h.count++;
    w->h.data_size += size;
    return CD_OK;
}

int cd_db_writer_finish(cd_db_writer_t *w, char *err, size_t errlen)
{
    uint64_t n = w->h.count;
    static const uint8_t pad[8] = {0};
    size_t padn = (size_t)((8 - w->pos % 8) % 8);
    if (put_bytes(w, pad, padn, err, errlen) != CD_OK)
        goto fail;
    int indexed = !cd_encoding_fixed((int)w->h.encoding);
    w->h.index_offset = indexed ? w->pos : 0;
    unsigned entry = ds_db_index_entry(w->h.flags);
    if ((w->h.flags & DS_DB_FLAG_MIXED) && n == 0)
        w->h.height = w->h.width = 1; /* no record: bounds the header can hold */
    w->h.labels_offset = w->pos + (indexed ? n * entry : 0);
    w->h.crc_offset = w->h.labels_offset + n * 4;
    w->h.file_size = w->h.crc_offset + n * 4;

    uint8_t hdr[DS_DB_HEADER_SIZE];
    ds_db_header_pack(&w->h, hdr);
    uint32_t crc = ds_crc32(0, hdr, DS_DB_META_CRC_AT);
    if (indexed) {
        crc = ds_crc32(crc, w->index, (size_t)n * entry);
        if (put_bytes(w, w->index, (size_t)n * entry, err, errlen) != CD_OK)
            goto fail;
    }
    crc = ds_crc32(crc, w->labels, (size_t)n * 4);
    crc = ds_crc32(crc, w->crcs, (size_t)n * 4);
    if (put_bytes(w, w->labels, (size_t)n * 4, err, errlen) != CD_OK ||
        put_bytes(w, w->crcs, (size_t)n * 4, err, errlen) != CD_OK ||
        flush_buf(w, err, errlen) != CD_OK)
        goto fail;
    w->h.meta_crc = crc;
    ds_db_header_pack(&w->h, hdr);
    if (pwrite(w->fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
        io_err(w, errno ? errno : EIO, "writing the header of", err, errlen);
        goto fail;
    }
    if (fsync(w->fd) != 0) {
        io_err(w, errno, "syncing", err, errlen);
        goto fail;
    }
    int rc = close(w->fd);
    w->fd = -1;
    if (rc != 0) {
        io_err(w, errno, "closing", err, errlen);
        goto fail;
    }
    if (rename(w->tmp, w->path) != 0) {
        int e = errno;
        ds_err(err, errlen, "cannot rename %s to %s: %s; %s", w->tmp, w->path, strerror(e),
               ds_errno_advice(e));
        goto fail;
    }
    ds_fsync_dir(w->path);
    free(w->tmp);
    w->tmp = NULL;
    cd_db_writer_abort(w);
    return CD_OK;
fail:
    cd_db_writer_abort(w);
    return CD_ERR;
}

void cd_db_writer_abort(cd_db_writer_t *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w->buf);
    free(w->index);
    free(w->labels);
    free(w->crcs);
    free(w);
}
