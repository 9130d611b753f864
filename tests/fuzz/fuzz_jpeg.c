/*
 * libFuzzer target for the JPEG reader (libjpeg-turbo behind cd_image_decode): decode any
 * bytes as 1 or 3 channels, then resize what decodes as the dataset code does. A crash,
 * a sanitizer report, a leak or a failure without a message is a bug. The corpus holds
 * small JPEGs (gray, colour, progressive); a selector byte (fuzz_image.h) picks channels and
 * resize mode, so every input file is also a valid input.
 */
#include "fuzz_image.h" /* first: it defines _GNU_SOURCE */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_image_input(data, size, size >= 4 && data[0] == 0xFF && data[1] == 0xD8);
}
