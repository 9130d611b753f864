/* Archives of a model's files for the download and the pretrained-model upload: tar,
 * tar.gz, tar.bz2 and zip, written from files in a folder and read back from memory with every
 * entry checked (docs/inference.md). Compression is zlib's (the server links it, as the
 * dataset library does) and libbz2's. Functions return CD_OK or CD_ERR with a message; nothing here
 * exits. */
#ifndef CDIGITS_SERVER_ARCHIVE_H
#define CDIGITS_SERVER_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

enum archive_kind { ARCHIVE_TAR = 0, ARCHIVE_TGZ, ARCHIVE_ZIP, ARCHIVE_TBZ2, ARCHIVE_COUNT };

/* "tar", "tar.gz" (or "tgz"), "zip", "tar.bz2" -> kind; -1 when unknown. */
int archive_kind_parse(const char *ext);
const char *archive_ext(int kind);  /* "tar", "tar.gz", "zip", "tar.bz2" */
const char *archive_mime(int kind); /* "application/x-tar", ... */
/* The kind from the first bytes (ustar magic, gzip, zip, bzip2); -1 when none. */
int archive_sniff(const void *data, size_t len);

/* Writes dir/names[i] (plain file names) as one archive at out_path. */
int archive_write(int kind, const char *dir, const char *const *names, int n, const char *out_path, char *err,
                  size_t errlen);

typedef struct archive_limits {
    int max_entries;     /* files at most */
    uint64_t max_file;   /* bytes of one file once unpacked */
    uint64_t max_total;  /* bytes of all files once unpacked */
} archive_limits;

#define ARCHIVE_NAME_MAX 128

/* Unpacks the archive in data (any kind, found by its content) into dir, which must
 * exist and be empty. Only regular files are taken (folders are skipped); a link, a
 * device, an absolute name, a name with "..", a name whose last part is not plain
 * (letters, digits, . _ -, not starting with .) or the same last part twice refuses
 * the whole archive, as do the limits. Files are written under their last part (a
 * folder around the files is dropped). names gets what was written. On failure the
 * files written so far are removed. */
int archive_extract(const void *data, size_t len, const char *dir, const archive_limits *lim,
                    char names[][ARCHIVE_NAME_MAX], int max_names, int *nnames, char *err, size_t errlen);

#endif
