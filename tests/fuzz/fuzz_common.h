/* What the file-reading fuzz targets share: the input as a file the readers can open
 * by path, kept in memory (memfd) so a run touches no disk. */
#ifndef CDIGITS_FUZZ_COMMON_H
#define CDIGITS_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a fresh in-memory file; path gets "/proc/self/fd/N". Returns the fd
 * (close it after) or -1. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
    int fd = memfd_create("cdigits-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* Every failure must say what is wrong: a reader that fails with an empty message is a bug. */
static inline void fuzz_check_message(const char *err)
{
    if (!err[0])
        abort();
}

#endif
