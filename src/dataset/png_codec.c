/* PNG decode and encode in memory through libpng. libpng reports errors by longjmp;
 * everything that must survive the jump lives in a context struct, not in locals. */
#include "internal.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"

typedef struct png_ctx {
    const uint8_t *src; /* decode: input bytes */
    size_t src_len, src_pos;
    uint8_t *out;       /* encode: growing output buffer */
    size_t out_len, out_cap;
    int out_failed;
    uint8_t *pixels;    /* decode: result (freed on error) */
    png_bytep *rows;
    char msg[200];
} png_ctx;

static void on_error(png_structp png, png_const_charp msg)
{
    png_ctx *ctx = png_get_error_ptr(png);
    snprintf(ctx->msg, sizeof ctx->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void mem_read(png_structp png, png_bytep out, size_t n)
{
    png_ctx *ctx = png_get_io_ptr(png);
    if (n > ctx->src_len - ctx->src_pos)
        png_error(png, "the file ends early (truncated PNG)");
    memcpy(out, ctx->src + ctx->src_pos, n);
    ctx->src_pos += n;
}

static void mem_write(png_structp png, png_bytep data, size_t n)
{
    png_ctx *ctx = png_get_io_ptr(png);
    if (ctx->out_len + n > ctx->out_cap) {
        size_t cap = ctx->out_cap ? ctx->out_cap : 4096;
        while (cap < ctx->out_len + n)
            cap *= 2;
        uint8_t *nb = realloc(ctx->out, cap);
        if (!nb) {
            ctx->out_failed = 1;
            png_error(png, "out of memory");
        }
        ctx->out = nb;
        ctx->out_cap = cap;
    }
    memcpy(ctx->out + ctx->out_len, data, n);
    ctx->out_len += n;
}

static void mem_flush(png_structp png) { (void)png; }

/* What one kind of decode does once the header is read: the transforms it sets (it may
 * png_error, or png_longjmp with ctx->msg set) and the channel counts it accepts after
 * them (1 or max_c). */
typedef struct png_read_kind {
    const char *what; /* "PNG", "label PNG": in error messages */
    void (*transform)(png_structp png, png_infop info, png_ctx *ctx, void *arg);
    int max_c;
} png_read_kind;

/*
 * The libpng read both decoders share: the error handling, the size limits, the
 * header, kind->transform(arg), then every row into one malloc'ed block of (h, w, c)
 * bytes (*pixels, the caller's). CD_ERR names kind->what and the reason in err.
 */
static int png_read(const uint8_t *buf, size_t len, const png_read_kind *kind, void *arg, uint8_t **pixels,
                    int *c, int *h, int *w, char *err, size_t errlen)
{
    png_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ds_err(err, errlen, "out of memory decoding a %s", kind->what);
    ctx->src = buf;
    ctx->src_len = len;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, ctx, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        free(ctx);
        return ds_err(err, errlen, "out of memory decoding a %s", kind->what);
    }
    if (setjmp(png_jmpbuf(png))) {
        ds_err(err, errlen, "bad %s: %s", kind->what, ctx->msg);
        png_destroy_read_struct(&png, &info, NULL);
        free(ctx->pixels);
        free(ctx->rows);
        free(ctx);
        return CD_ERR;
    }
    png_set_user_limits(png, CD_IMAGE_MAX_SIDE, CD_IMAGE_MAX_SIDE);
    png_set_read_fn(png, ctx, mem_read);
    png_read_info(png, info);
    if ((uint64_t)png_get_image_width(png, info) * png_get_image_height(png, info) > CD_IMAGE_MAX_PIXELS) {
        snprintf(ctx->msg, sizeof ctx->msg,
                 "%ux%u is more than %u pixels; resize the image before importing it",
                 png_get_image_width(png, info), png_get_image_height(png, info), CD_IMAGE_MAX_PIXELS);
        png_longjmp(png, 1);
    }
    kind->transform(png, info, ctx, arg);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);

    int ch = png_get_channels(png, info);
    int ih = (int)png_get_image_height(png, info), iw = (int)png_get_image_width(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if ((ch != 1 && ch != kind->max_c) || rowbytes != (size_t)iw * ch)
        png_error(png, "unexpected pixel layout after conversion");
    ctx->pixels = malloc(rowbytes * ih);
    ctx->rows = malloc(sizeof(png_bytep) * ih);
    if (!ctx->pixels || !ctx->rows)
        png_error(png, "out of memory");
    for (int y = 0; y < ih; y++)
        ctx->rows[y] = ctx->pixels + rowbytes * y;
    png_read_image(png, ctx->rows);

    *pixels = ctx->pixels;
    *c = ch;
    *h = ih;
    *w = iw;
    png_destroy_read_struct(&png, &info, NULL);
    free(ctx->rows);
    free(ctx);
    return CD_OK;
}

/* An image: 8 bits, alpha dropped, gray to RGB when 3 channels are wanted (arg: want_c). */
static void image_transform(png_structp png, png_infop info, png_ctx *ctx, void *arg)
{
    (void)ctx;
    int want_c = *(const int *)arg;
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (depth == 16)
        png_set_scale_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    /* alpha is dropped, including the alpha a palette's or gray image's tRNS chunk
     * becomes once expanded */
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_strip_alpha(png);
    if (want_c == 3 && !(color & PNG_COLOR_MASK_COLOR))
        png_set_gray_to_rgb(png);
}

static const png_read_kind g_image_kind = {"PNG", image_transform, 3};

int ds_png_decode(const uint8_t *buf, size_t len, int want_c, uint8_t **pixels, int *c, int *h,
                  int *w, char *err, size_t errlen)
{
    return png_read(buf, len, &g_image_kind, &want_c, pixels, c, h, w, err, errlen);
}

int ds_png_encode(const uint8_t *hwc, int c, int h, int w, int level, uint8_t **buf, size_t *len,
                  char *err, size_t errlen)
{
    png_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return ds_err(err, errlen, "out of memory encoding a PNG");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, ctx, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        free(ctx);
        return ds_err(err, errlen, "out of memory encoding a PNG");
    }
    if (setjmp(png_jmpbuf(png))) {
        ds_err(err, errlen, "encoding a PNG: %s", ctx->msg);
        png_destroy_write_struct(&png, &info);
        free(ctx->out);
        free(ctx->rows);
        free(ctx);
        return CD_ERR;
    }
    png_set_write_fn(png, ctx, mem_write, mem_flush);
    if (level >= 0 && level <= 9)
        png_set_compression_level(png, level);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
                 c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    ctx->rows = malloc(sizeof(png_bytep) * h);
    if (!ctx->rows)
        png_error(png, "out of memory");
    for (int y = 0; y < h; y++)
        ctx->rows[y] = (png_bytep)hwc + (size_t)y * w * c;
    png_set_rows(png, info, ctx->rows);
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);

    *buf = ctx->out;
    *len = ctx->out_len;
    png_destroy_write_struct(&png, &info);
    free(ctx->rows);
    free(ctx);
    return CD_OK;
}

/* Where a label PNG's palette goes. */
typedef struct png_palette_out {
    uint8_t (*rgb)[3];
    int *n;
} png_palette_out;

/* A label image: samples as stored, one byte each; colour and 16 bits refused; the
 * PLTE colours into arg (a png_palette_out). */
static void indexed_transform(png_structp png, png_infop info, png_ctx *ctx, void *arg)
{
    png_palette_out *pal = arg;
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (color != PNG_COLOR_TYPE_PALETTE && (color & PNG_COLOR_MASK_COLOR)) {
        snprintf(ctx->msg, sizeof ctx->msg, "a colour PNG is not a label image of classes; save it "
                 "paletted or grayscale, or use colormap_method textfile");
        png_longjmp(png, 1);
    }
    if (depth == 16) {
        snprintf(ctx->msg, sizeof ctx->msg, "16-bit label PNGs are not supported; save it with 8 bits");
        png_longjmp(png, 1);
    }
    *pal->n = 0;
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_colorp plte = NULL;
        int n = 0;
        if (!png_get_PLTE(png, info, &plte, &n) || n < 1 || n > 256)
            png_error(png, "a paletted PNG without a palette");
        for (int k = 0; k < n; k++)
            pal->rgb[k][0] = plte[k].red, pal->rgb[k][1] = plte[k].green, pal->rgb[k][2] = plte[k].blue;
        *pal->n = n;
    }
    if (depth < 8)
        png_set_packing(png); /* one byte per sample, values unscaled */
    if (color & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
}

static const png_read_kind g_indexed_kind = {"label PNG", indexed_transform, 1};

int ds_png_decode_indexed(const uint8_t *buf, size_t len, uint8_t **index, int *h, int *w,
                          uint8_t (*palette)[3], int *npalette, char *err, size_t errlen)
{
    png_palette_out pal = {palette, npalette};
    int c;
    return png_read(buf, len, &g_indexed_kind, &pal, index, &c, h, w, err, errlen);
}
