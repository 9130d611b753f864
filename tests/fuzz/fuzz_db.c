/*
 * libFuzzer target for the dataset record reader (.db files, docs/formats.md): open
 * any bytes as a .db file, read the first records (decoding PNG and JPEG records),
 * verify the per-record checksums. With the first byte odd the target first repairs
 * the file size, the table offsets and the header checksum for the count, encoding and
 * data size the input gives, so mutations reach the index, the labels and the records
 * instead of stopping at the checksum. A crash, a sanitizer report, a leak or a failure
 * without a message is a bug.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "cdigits/dataset.h"

#include <string.h>

#include "../../src/dataset/internal.h"

/* Makes the header agree with itself and the file (offsets, size, checksum); returns
 * the length the file is cut to so the tables fill it exactly. */
static size_t repair(uint8_t *p, size_t n)
{
    if (n < DS_DB_HEADER_SIZE)
        return n;
    ds_db_header h;
    memcpy(p, DS_DB_MAGIC, 4);
    ds_db_header_unpack(p, &h);
    h.version = DS_DB_VERSION;
    h.header_size = h.data_offset = DS_DB_HEADER_SIZE;
    int indexed = h.encoding != CD_ENC_NONE;
    uint64_t rec = (uint64_t)h.channels * h.height * h.width, room = n - DS_DB_HEADER_SIZE;
    if (indexed) {
        if (h.data_size > room)
            h.data_size = room;
        uint64_t tables = (DS_DB_HEADER_SIZE + h.data_size + 7) / 8 * 8;
        h.count = tables <= n ? (n - tables) / (DS_DB_INDEX_ENTRY + 8) : 0;
    } else {
        h.count = rec ? room / (rec + 16) : 0;
        h.data_size = h.count * rec;
    }
    uint64_t tables = (DS_DB_HEADER_SIZE + h.data_size + 7) / 8 * 8;
    h.index_offset = indexed ? tables : 0;
    h.labels_offset = tables + (indexed ? h.count * DS_DB_INDEX_ENTRY : 0);
    h.crc_offset = h.labels_offset + h.count * 4;
    h.file_size = h.crc_offset + h.count * 4;
    if (h.file_size > n)
        return n;
    ds_db_header_pack(&h, p);
    uint32_t crc = ds_crc32(0, p, DS_DB_META_CRC_AT);
    crc = ds_crc32(crc, p + tables, (size_t)(h.file_size - tables));
    ds_put_u32(p + DS_DB_META_CRC_AT, crc);
    return (size_t)h.file_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, size - 1);
    size_t n = (data[0] & 1) ? repair(copy, size - 1) : size - 1;
    char path[64], err[512] = "";
    int fd = fuzz_memfile(copy, n, path, sizeof path);
    free(copy);
    if (fd < 0)
        return 0;
    cd_db_t *db = cd_db_open(path, err, sizeof err);
    if (!db) {
        fuzz_check_message(err);
        close(fd);
        return 0;
    }
    size_t count = cd_db_count(db);
    size_t rec = (size_t)cd_db_channels(db) * cd_db_height(db) * cd_db_width(db);
    uint8_t *chw = rec <= (1u << 24) ? malloc(rec ? rec : 1) : NULL;
    for (size_t i = 0; chw && i < count && i < 8; i++) {
        err[0] = 0;
        if (cd_db_read(db, i, chw, err, sizeof err) != 0)
            fuzz_check_message(err);
        int label = cd_db_label(db, i);
        (void)label;
        size_t rs = 0;
        if (!cd_db_record(db, i, &rs) || rs == 0)
            abort();
    }
    free(chw);
    if (cd_db_label(db, count) != -1 || cd_db_record(db, count, NULL) != NULL)
        abort(); /* one past the end is refused */
    err[0] = 0;
    if (cd_db_verify(db, err, sizeof err) != 0)
        fuzz_check_message(err);
    cd_db_close(db);
    close(fd);
    return 0;
}
