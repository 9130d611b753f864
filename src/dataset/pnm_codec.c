/* Netpbm images: PGM (P2 text, P5 binary) and PPM (P3 text, P6 binary), 8 or 16 bits
 * per sample, scaled from their maxval to 0..255. The format is a short text header and
 * the samples, so it is read here rather than through a library. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "cdigits/image.h"
#include "cdigits/util.h"

typedef struct pnm_reader {
    const uint8_t *p, *end;
} pnm_reader;

static int is_space(int ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* The next decimal number, skipping white space and # comments; -1 at the end of the
 * data, on something else, or past 2^24 (no side or maxval gets there). */
static long next_number(pnm_reader *r)
{
    for (;;) {
        while (r->p < r->end && is_space(*r->p))
            r->p++;
        if (r->p < r->end && *r->p == '#') {
            while (r->p < r->end && *r->p != '\n' && *r->p != '\r')
                r->p++;
            continue;
        }
        break;
    }
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return -1;
    long v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        v = v * 10 + (*r->p++ - '0');
        if (v > (1L << 24))
            return -1;
    }
    return v;
}

int ds_pnm_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h, int *w,
                  char *err, size_t errlen)
{
    (void)want_c; /* gray stays gray, colour stays colour: cd_image_decode converts */
    if (len < 2 || buf[0] != 'P' || !strchr("2356", buf[1]) || !buf[1])
        return ds_err(err, errlen, "not a PGM or PPM image (P2, P3, P5 or P6); PBM bitmaps and PAM are not read");
    int binary = buf[1] == '5' || buf[1] == '6';
    int channels = buf[1] == '3' || buf[1] == '6' ? 3 : 1;
    pnm_reader r = {buf + 2, buf + len};
    long width = next_number(&r), height = next_number(&r), maxval = next_number(&r);
    if (width <= 0 || height <= 0 || maxval <= 0 || maxval > 65535)
        return ds_err(err, errlen, "bad PGM/PPM header (width %ld, height %ld, maxval %ld)", width, height, maxval);
    if ((uint64_t)width * (uint64_t)height > CD_IMAGE_MAX_PIXELS)
        return ds_err(err, errlen, "%ldx%ld is more than %u pixels; resize the image before importing it", width,
                      height, CD_IMAGE_MAX_PIXELS);
    size_t samples = (size_t)width * (size_t)height * (size_t)channels;
    size_t bytes_per = maxval > 255 ? 2 : 1;
    if (binary) {
        /* exactly one white space character ends the header */
        if (r.p >= r.end || !is_space(*r.p))
            return ds_err(err, errlen, "bad PGM/PPM header: no white space after maxval");
        r.p++;
        if ((size_t)(r.end - r.p) < samples * bytes_per)
            return ds_err(err, errlen, "truncated PGM/PPM image: %zu of %zu bytes of samples", (size_t)(r.end - r.p),
                          samples * bytes_per);
    }
    uint8_t *out = malloc(samples);
    if (!out)
        return ds_err(err, errlen, "out of memory for a %ldx%ld image", width, height);
    for (size_t i = 0; i < samples; i++) {
        long v;
        if (binary) {
            v = bytes_per == 2 ? (long)r.p[0] << 8 | r.p[1] : r.p[0];
            r.p += bytes_per;
        } else if ((v = next_number(&r)) < 0) {
            free(out);
            return ds_err(err, errlen, "truncated or bad PGM/PPM text: sample %zu of %zu is missing", i + 1, samples);
        }
        if (v > maxval) {
            free(out);
            return ds_err(err, errlen, "bad PGM/PPM image: sample %zu is %ld, over its maxval %ld", i + 1, v, maxval);
        }
        out[i] = (uint8_t)((v * 255 + maxval / 2) / maxval);
    }
    *pixels = out;
    *c = channels;
    *h = (int)height;
    *w = (int)width;
    return CD_OK;
}
