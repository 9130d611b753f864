/*
 * libFuzzer target for the JPEG reader (libjpeg-turbo behind cd_image_decode): decode any
 * bytes as 1 or 3 channels, then resize what decodes as the dataset code does. A crash,
 * a sanitizer report, a leak or a failure without a message is a bug. The corpus holds
 * small JPEGs (gray, colour, progressive); the first byte picks channels and
 * resize mode, so every input file is also a valid input.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "cdigits/image.h"

#include <string.h>


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int channels = (data[0] & 1) ? 3 : 1, mode = (data[0] >> 1) % CD_RESIZE_COUNT;
    /* the JPEG starts after the selector byte unless the input is a JPEG itself */
    const uint8_t *img = data + 1;
    size_t n = size - 1;
    if (size >= 4 && data[0] == 0xFF && data[1] == 0xD8) {
        img = data;
        n = size;
    }
    char err[512] = "";
    cd_image_t out = {0};
    if (cd_image_decode(img, n, channels, &out, err, sizeof err) != 0) {
        fuzz_check_message(err);
        return 0;
    }
    if (out.c != channels || out.h <= 0 || out.w <= 0 || out.h > CD_IMAGE_MAX_SIDE || out.w > CD_IMAGE_MAX_SIDE)
        abort();
    /* keep the work bounded: resizing a 32768-pixel side is slow but not a bug */
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
