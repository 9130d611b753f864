/*
 * libFuzzer target for the IDX reader (MNIST and Fashion-MNIST files, plain or
 * gzipped): load any bytes as a file, check what loads against its own header. A
 * crash, a sanitizer report, a leak, a failure without a message or a loaded file whose
 * size disagrees with its dimensions is a bug.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "cdigits/dataset.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512] = "";
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    cd_idx_t idx = {0};
    if (cd_idx_load(path, &idx, err, sizeof err) != 0) {
        fuzz_check_message(err);
    } else {
        size_t n = 1;
        if (idx.ndim < 1 || idx.ndim > 4)
            abort();
        for (int i = 0; i < idx.ndim; i++)
            n *= idx.dims[i];
        if (n != idx.size)
            abort();
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < idx.size; i++) /* every byte it claims is readable */
            sum += idx.data[i];
        (void)sum;
    }
    cd_idx_free(&idx);
    close(fd);
    return 0;
}
