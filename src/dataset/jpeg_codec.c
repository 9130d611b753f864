/* JPEG decode and encode in memory through libjpeg-turbo. Errors longjmp back to the
 * caller through the error manager; a file that ends early ("Premature end of JPEG
 * file", which libjpeg only warns about and pads with gray) is an error here too. */
#include "internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "cdigits/util.h"

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    int truncated;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

/* Ends the decode or encode in progress with a message: back to its setjmp. */
static void fail(jpeg_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(jpeg_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    longjmp(e->jb, 1);
}

static void on_error_exit(j_common_ptr cinfo)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    e->mgr.format_message(cinfo, e->msg);
    longjmp(e->jb, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF)
        e->truncated = 1;
}

/* libjpeg's error manager with our exits: errors longjmp to e->jb, warnings of a short
 * file set e->truncated. What cinfo.err takes. */
static struct jpeg_error_mgr *error_manager(jpeg_err *e)
{
    jpeg_std_error(&e->mgr);
    e->mgr.error_exit = on_error_exit;
    e->mgr.emit_message = on_emit_message;
    return &e->mgr;
}

#define TRUNCATED "the file ends early (truncated JPEG)"

/* A progressive JPEG of a few hundred bytes can hold thousands of tiny scans, each one a
 * pass over the whole coefficient buffer; real encoders write about ten. */
#define JPEG_MAX_SCANS 1000

/* Called by libjpeg once per row of blocks while it reads a multi-scan file into its
 * coefficient buffer: stops at the first sign that the data ran out, instead of decoding
 * a whole declared image of padding, and at an absurd number of scans. */
static void on_progress(j_common_ptr cinfo)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (e->truncated)
        fail(e, TRUNCATED);
    if (d->input_scan_number > JPEG_MAX_SCANS)
        fail(e, "more than %d progressive scans", JPEG_MAX_SCANS);
}

/* Adobe CMYK/YCCK JPEGs come out of libjpeg as inverted CMYK: R = C * K / 255. */
static void cmyk_to_rgb(const uint8_t *cmyk, uint8_t *rgb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned k = cmyk[4 * i + 3];
        for (int j = 0; j < 3; j++)
            rgb[3 * i + j] = (uint8_t)((cmyk[4 * i + j] * k + 127) / 255);
    }
}

typedef struct jpeg_dec {
    struct jpeg_decompress_struct cinfo;
    jpeg_err jerr;
    struct jpeg_progress_mgr progress;
    uint8_t *pixels, *row;
} jpeg_dec;

int ds_jpeg_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                   int *w, char *err, size_t errlen)
{
    jpeg_dec *d = calloc(1, sizeof *d);
    if (!d)
        return ds_err(err, errlen, "out of memory decoding a JPEG");
    d->cinfo.err = error_manager(&d->jerr);
    if (setjmp(d->jerr.jb)) {
        ds_err(err, errlen, "bad JPEG: %s", d->jerr.msg);
        jpeg_destroy_decompress(&d->cinfo);
        free(d->pixels);
        free(d->row);
        free(d);
        return CD_ERR;
    }
    jpeg_create_decompress(&d->cinfo);
    d->progress.progress_monitor = on_progress;
    d->cinfo.progress = &d->progress;
    jpeg_mem_src(&d->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&d->cinfo, TRUE);
    if (d->jerr.truncated)
        fail(&d->jerr, TRUNCATED);
    int cmyk = d->cinfo.jpeg_color_space == JCS_CMYK || d->cinfo.jpeg_color_space == JCS_YCCK;
    if (cmyk)
        d->cinfo.out_color_space = JCS_CMYK;
    else
        d->cinfo.out_color_space = want_c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    if (d->cinfo.image_width > CD_IMAGE_MAX_SIDE || d->cinfo.image_height > CD_IMAGE_MAX_SIDE)
        fail(&d->jerr, "%ux%u is larger than %d pixels a side", d->cinfo.image_width, d->cinfo.image_height,
             CD_IMAGE_MAX_SIDE);
    if ((uint64_t)d->cinfo.image_width * d->cinfo.image_height > CD_IMAGE_MAX_PIXELS)
        fail(&d->jerr, "%ux%u is more than %u pixels; resize the image before importing it", d->cinfo.image_width,
             d->cinfo.image_height, CD_IMAGE_MAX_PIXELS);
    jpeg_start_decompress(&d->cinfo);
    int ow = (int)d->cinfo.output_width, oh = (int)d->cinfo.output_height;
    int oc = d->cinfo.output_components;
    int keep_c = cmyk ? 3 : oc;
    d->pixels = malloc((size_t)ow * oh * keep_c);
    d->row = malloc((size_t)ow * oc);
    if (!d->pixels || !d->row)
        fail(&d->jerr, "out of memory for %dx%d pixels", ow, oh);
    while (d->cinfo.output_scanline < d->cinfo.output_height) {
        size_t y = d->cinfo.output_scanline;
        JSAMPROW rowp = cmyk ? d->row : d->pixels + y * ow * keep_c;
        jpeg_read_scanlines(&d->cinfo, &rowp, 1);
        if (cmyk)
            cmyk_to_rgb(d->row, d->pixels + y * ow * keep_c, (size_t)ow);
        if (d->jerr.truncated)
            fail(&d->jerr, TRUNCATED);
    }
    jpeg_finish_decompress(&d->cinfo);
    jpeg_destroy_decompress(&d->cinfo);
    *pixels = d->pixels;
    *c = keep_c;
    *h = oh;
    *w = ow;
    free(d->row);
    free(d);
    return CD_OK;
}

typedef struct jpeg_enc {
    struct jpeg_compress_struct cinfo;
    jpeg_err jerr;
    unsigned char *out;
    unsigned long out_len;
} jpeg_enc;

int ds_jpeg_encode(const uint8_t *hwc, int c, int h, int w, int quality, uint8_t **buf,
                   size_t *len, char *err, size_t errlen)
{
    jpeg_enc *e = calloc(1, sizeof *e);
    if (!e)
        return ds_err(err, errlen, "out of memory encoding a JPEG");
    e->cinfo.err = error_manager(&e->jerr);
    if (setjmp(e->jerr.jb)) {
        ds_err(err, errlen, "encoding a JPEG: %s", e->jerr.msg);
        /* e->out is not freed: after libjpeg grows its buffer the pointer it gave us
         * is stale, and only invalid arguments (checked by the caller) get here. */
        jpeg_destroy_compress(&e->cinfo);
        free(e);
        return CD_ERR;
    }
    jpeg_create_compress(&e->cinfo);
    jpeg_mem_dest(&e->cinfo, &e->out, &e->out_len);
    e->cinfo.image_width = (JDIMENSION)w;
    e->cinfo.image_height = (JDIMENSION)h;
    e->cinfo.input_components = c;
    e->cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&e->cinfo);
    jpeg_set_quality(&e->cinfo, quality, TRUE);
    jpeg_start_compress(&e->cinfo, TRUE);
    while (e->cinfo.next_scanline < e->cinfo.image_height) {
        JSAMPROW rowp = (JSAMPROW)hwc + (size_t)e->cinfo.next_scanline * w * c;
        jpeg_write_scanlines(&e->cinfo, &rowp, 1);
    }
    jpeg_finish_compress(&e->cinfo);
    jpeg_destroy_compress(&e->cinfo);
    *buf = e->out;
    *len = e->out_len;
    free(e);
    return CD_OK;
}
