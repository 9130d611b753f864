/* What the image fuzz targets share: decode the bytes with cd_image_decode, check what
 * comes out, resize it as the dataset code does. A crash, a sanitizer report, a leak, a
 * decoded image of the wrong shape or a failure without a message is a bug. */
#ifndef CDIGITS_FUZZ_IMAGE_H
#define CDIGITS_FUZZ_IMAGE_H

#include "fuzz_common.h"

#include "cdigits/image.h"

static inline void fuzz_image_one(const uint8_t *img, size_t n, int channels, int mode)
{
    char err[512] = "";
    cd_image_t out = {0};
    if (cd_image_decode(img, n, channels, &out, err, sizeof err) != 0) {
        fuzz_check_message(err);
        return;
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
}

/* A target's input: a selector byte (bit 0: 1 or 3 channels; the rest: the resize
 * mode) then the image, or, when whole_image, an image file itself (the selector is then
 * its last byte), so that every seed file is also a valid input. */
static inline int fuzz_image_input(const uint8_t *data, size_t size, int whole_image)
{
    if (size < 1)
        return 0;
    uint8_t sel = whole_image ? data[size - 1] : data[0];
    if (whole_image)
        fuzz_image_one(data, size, (sel & 1) ? 3 : 1, (sel >> 1) % CD_RESIZE_COUNT);
    else
        fuzz_image_one(data + 1, size - 1, (sel & 1) ? 3 : 1, (sel >> 1) % CD_RESIZE_COUNT);
    return 0;
}

#endif
