/*
 * libFuzzer target for the BMP reader (stb_image behind cd_image_decode) and the PGM/PPM
 * reader (pnm_codec.c): decode any bytes as 1 or 3 channels, then resize what decodes as
 * the dataset code does. A crash, a sanitizer report, a leak or a failure without a
 * message is a bug. The corpus holds small BMPs (8, 24 and 32 bits, bottom-up and
 * top-down) and PGM/PPM files (text and binary, 8 and 16 bits); an input that starts
 * with "BM" or "P" is an image itself, any other has a selector byte first.
 */
#include "fuzz_image.h" /* first: it defines _GNU_SOURCE */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_image_input(data, size, size >= 2 && (data[0] == 'B' || data[0] == 'P'));
}
