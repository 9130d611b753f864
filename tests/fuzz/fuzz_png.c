/*
 * libFuzzer target for the PNG reader (libpng behind cd_image_decode): decode any
 * bytes as 1 or 3 channels, then resize what decodes as the dataset code does. A crash,
 * a sanitizer report, a leak or a failure without a message is a bug. The corpus holds
 * small PNGs of every colour type and bit depth; a selector byte (fuzz_image.h) picks channels and
 * resize mode, so every input file is also a valid input.
 */
#include "fuzz_image.h" /* first: it defines _GNU_SOURCE */

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_image_input(data, size, size >= 8 && memcmp(data, "\x89PNG", 4) == 0);
}
