/*
 * libFuzzer target for the BMP reader (stb_image behind cd_image_decode) and the PGM/PPM
 * reader (pnm_codec.c): decode any bytes as 1 or 3 channels, then resize what decodes as
 * the dataset code does. A crash, a sanitizer report, a leak or a failure without a
 * message is a bug. The corpus holds small BMPs (8, 24 and 32 bits, bottom-up and
 * top-down) and PGM/PPM files (text and binary, 8 and 16 bits); an input that starts
 * with "BM" or "P" is an image itself, any other has a selector byte first.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "cdigits/image.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int channels = (data[0] & 1) ? 3 : 1, mode = (data[0] >> 1) % CD_RESIZE_COUNT;
    const uint8_t *img = data + 1;
    size_t n = size - 1;
    if (data[0] == 'B' || data[0] == 'P') {
        img = data;
        n = size;
        channels = size > 1 && (data[1] & 1) ? 3 : 1;
    }
    char err[512] = "";
    cd_image_t out = {0};
    if (cd_image_decode(img, n, channels, &out, err, sizeof err) != 0) {
        fuzz_check_message(err);
        return 0;
    }
    if (out.c != channels || out.h <= 0 || out.w <= 0 || out.h > CD_IMAGE_MAX_SIDE || out.w > CD_IMAGE_MAX_SIDE)
        abort();
    if ((size_t)out.h * out.w <= 1u << 20) {
        cd_image_t small = {0};
        err[0] = 0;
        if (cd_image_resize(&out, 17, 9, mode, 1, &small, err, sizeof err) != 0)
            fuzz_check_message(err);
        cd_image_free(&small);
    }
    cd_image_free(&out);
    return 0;
}
