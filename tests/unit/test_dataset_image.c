/* Image decode/encode and the resize modes, against hand-computed pixels and an
 * independent 2-D reference of the triangle filter. */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cdigits/image.h"
#include "cdigits/util.h"
#include "testutil.h"

static cd_image_t make(int c, int h, int w, const uint8_t *px)
{
    cd_image_t img;
    cd_image_alloc(&img, c, h, w, NULL, 0);
    memcpy(img.data, px, (size_t)c * h * w);
    return img;
}

static cd_image_t random_image(int c, int h, int w)
{
    cd_image_t img;
    cd_image_alloc(&img, c, h, w, NULL, 0);
    for (size_t i = 0; i < (size_t)c * h * w; i++)
        img.data[i] = (uint8_t)(cd_test_rand_u64() >> 56);
    return img;
}

/* Independent reference of scaling: for each output pixel, a 2-D sum over every
 * source pixel of tri(dx) * tri(dy) with the filter widened by the scale factor. */
static double ref_weight(double src_center, double out_center, double scale)
{
    double f = scale > 1 ? scale : 1;
    double d = fabs(src_center - out_center) / f;
    return d < 1 ? 1 - d : 0;
}

static double ref_pixel(const cd_image_t *s, int ch, int oy, int ox, int oh, int ow)
{
    double sx = (double)s->w / ow, sy = (double)s->h / oh;
    double cx = (ox + 0.5) * sx, cy = (oy + 0.5) * sy;
    double num = 0, den_x = 0, den_y = 0;
    for (int x = 0; x < s->w; x++)
        den_x += ref_weight(x + 0.5, cx, sx);
    for (int y = 0; y < s->h; y++)
        den_y += ref_weight(y + 0.5, cy, sy);
    for (int y = 0; y < s->h; y++)
        for (int x = 0; x < s->w; x++)
            num += ref_weight(x + 0.5, cx, sx) * ref_weight(y + 0.5, cy, sy) *
                   s->data[((size_t)ch * s->h + y) * s->w + x];
    return num / (den_x * den_y);
}

static uint8_t px(const cd_image_t *img, int ch, int y, int x)
{
    return img->data[((size_t)ch * img->h + y) * img->w + x];
}

static void test_squash_known(void)
{
    /* 4x2 gray; squashing to 2x2 averages with weights 3/7, 3/7, 1/7 horizontally */
    const uint8_t src[] = {10, 50, 90, 130, 30, 70, 110, 150};
    cd_image_t s = make(1, 2, 4, src), o;
    CHECK(cd_image_resize(&s, 2, 2, CD_RESIZE_SQUASH, 1, &o, NULL, 0) == CD_OK, "squash");
    CHECK(o.w == 2 && o.h == 2 && o.c == 1, "shape %dx%dx%d", o.c, o.h, o.w);
    CHECK(px(&o, 0, 0, 0) == 39 && px(&o, 0, 0, 1) == 101, "row 0: %d %d", px(&o, 0, 0, 0),
          px(&o, 0, 0, 1));
    CHECK(px(&o, 0, 1, 0) == 59 && px(&o, 0, 1, 1) == 121, "row 1: %d %d", px(&o, 0, 1, 0),
          px(&o, 0, 1, 1));
    cd_image_free(&o);
    /* 2x1 -> 4x1 upscaling is plain bilinear with half-pixel centres, edges clamped */
    const uint8_t two[] = {100, 200};
    cd_image_t t = make(1, 1, 2, two);
    CHECK(cd_image_scale(&t, 4, 1, &o, NULL, 0) == CD_OK, "upscale");
    CHECK(px(&o, 0, 0, 0) == 100 && px(&o, 0, 0, 1) == 125 && px(&o, 0, 0, 2) == 175 &&
              px(&o, 0, 0, 3) == 200,
          "upscale %d %d %d %d", px(&o, 0, 0, 0), px(&o, 0, 0, 1), px(&o, 0, 0, 2),
          px(&o, 0, 0, 3));
    cd_image_free(&o);
    cd_image_free(&t);
    cd_image_free(&s);
}

static void test_scale_reference(void)
{
    static const int sizes[][4] = {{7, 5, 3, 2}, {3, 4, 9, 11}, {16, 16, 5, 5}, {10, 3, 4, 7},
                                   {1, 1, 3, 3}, {37, 23, 8, 8}};
    for (size_t k = 0; k < CD_ARRAY_LEN(sizes); k++) {
        int sw = sizes[k][0], sh = sizes[k][1], ow = sizes[k][2], oh = sizes[k][3];
        cd_image_t s = random_image(3, sh, sw), o;
        CHECK(cd_image_scale(&s, ow, oh, &o, NULL, 0) == CD_OK, "scale");
        double worst = 0;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow; x++) {
                    double d = fabs(px(&o, c, y, x) - ref_pixel(&s, c, y, x, oh, ow));
                    worst = d > worst ? d : worst;
                }
        CHECK(worst <= 0.51, "%dx%d -> %dx%d: worst difference %.3f", sw, sh, ow, oh, worst);
        cd_image_free(&o);
        cd_image_free(&s);
    }
}

static void test_crop(void)
{
    /* 8x2 -> 2x2 crop: no scaling (height fits), centre columns 3 and 4 */
    cd_image_t s = random_image(3, 2, 8), o;
    CHECK(cd_image_resize(&s, 2, 2, CD_RESIZE_CROP, 1, &o, NULL, 0) == CD_OK, "crop");
    int same = 1;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 2; x++)
                same &= px(&o, c, y, x) == px(&s, c, y, x + 3);
    CHECK(same, "crop keeps the centre columns");
    cd_image_free(&o);
    cd_image_free(&s);

    /* tall 2x8 -> 2x2: rows 3 and 4 */
    s = random_image(1, 8, 2);
    CHECK(cd_image_resize(&s, 2, 2, CD_RESIZE_CROP, 1, &o, NULL, 0) == CD_OK, "crop tall");
    CHECK(memcmp(o.data, s.data + 3 * 2, 4) == 0, "crop keeps the centre rows");
    cd_image_free(&o);
    cd_image_free(&s);

    /* 6x4 -> 2x2: scaled to 3x2, then start = round(0.5) = 1 */
    s = random_image(1, 4, 6);
    cd_image_t scaled;
    CHECK(cd_image_resize(&s, 2, 2, CD_RESIZE_CROP, 1, &o, NULL, 0) == CD_OK, "crop 6x4");
    CHECK(cd_image_scale(&s, 3, 2, &scaled, NULL, 0) == CD_OK, "scale 3x2");
    same = 1;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            same &= px(&o, 0, y, x) == px(&scaled, 0, y, x + 1);
    CHECK(same, "crop of a scaled image takes columns 1..2");
    cd_image_free(&scaled);
    cd_image_free(&o);
    cd_image_free(&s);
}

/* Count pixels of out that differ from `expect` in rows [y0,y1) x cols [x0,x1). */
static int region_equal(const cd_image_t *o, const cd_image_t *e, int oy, int ox)
{
    for (int c = 0; c < o->c; c++)
        for (int y = 0; y < e->h; y++)
            for (int x = 0; x < e->w; x++)
                if (px(o, c, y + oy, x + ox) != px(e, c, y, x))
                    return 0;
    return 1;
}

static void test_fill(void)
{
    /* 4x2 -> 4x4: fits as 4x2, one noise row above and below */
    cd_image_t s = random_image(3, 2, 4), o, o2, o3;
    CHECK(cd_image_resize(&s, 4, 4, CD_RESIZE_FILL, 7, &o, NULL, 0) == CD_OK, "fill");
    CHECK(region_equal(&o, &s, 1, 0), "fill: the image sits in rows 1..2 unchanged");
    CHECK(cd_image_resize(&s, 4, 4, CD_RESIZE_FILL, 7, &o2, NULL, 0) == CD_OK, "fill again");
    CHECK(memcmp(o.data, o2.data, 48) == 0, "fill noise is reproducible from the seed");
    CHECK(cd_image_resize(&s, 4, 4, CD_RESIZE_FILL, 8, &o3, NULL, 0) == CD_OK, "fill seed 8");
    CHECK(region_equal(&o3, &s, 1, 0), "fill seed 8: image unchanged");
    int diff = 0;
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 4; x++)
            diff += px(&o, c, 0, x) != px(&o3, c, 0, x);
    CHECK(diff > 4, "another seed gives other noise (%d of 12 differ)", diff);
    cd_image_free(&o);
    cd_image_free(&o2);
    cd_image_free(&o3);
    cd_image_free(&s);

    /* tall 2x4 -> 4x4: one noise column each side; noise spans 0..255 over a big pad */
    s = random_image(1, 4, 2);
    CHECK(cd_image_resize(&s, 4, 4, CD_RESIZE_FILL, 3, &o, NULL, 0) == CD_OK, "fill tall");
    CHECK(region_equal(&o, &s, 0, 1), "fill tall: image in columns 1..2");
    cd_image_free(&o);
    cd_image_free(&s);

    /* 64x2 -> 64x64: 31 noise rows above and below; their values spread over 0..255 */
    s = random_image(1, 2, 64);
    CHECK(cd_image_resize(&s, 64, 64, CD_RESIZE_FILL, 5, &o, NULL, 0) == CD_OK, "fill wide");
    CHECK(region_equal(&o, &s, 31, 0), "fill wide: image in rows 31..32");
    int lo = 255, hi = 0;
    double mean = 0;
    for (int y = 0; y < 31; y++)
        for (int x = 0; x < 64; x++) {
            int v = px(&o, 0, y, x);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            mean += v;
        }
    mean /= 31 * 64;
    CHECK(lo < 5 && hi > 250 && fabs(mean - 127.5) < 8, "noise range %d..%d mean %.1f", lo, hi,
          mean);
    cd_image_free(&o);
    cd_image_free(&s);
}

static void test_half_crop(void)
{
    /* 8x2 -> 4x4: ratio (2 + 0.5) / 2 = 1.25 -> scaled 6x2 (7.9 -> round), crop columns
     * 1..4 of it, one noise row above and below */
    cd_image_t s = random_image(3, 2, 8), o, scaled, part;
    CHECK(cd_image_resize(&s, 4, 4, CD_RESIZE_HALF_CROP, 2, &o, NULL, 0) == CD_OK, "half_crop");
    CHECK(cd_image_scale(&s, 6, 2, &scaled, NULL, 0) == CD_OK, "scale 6x2");
    cd_image_alloc(&part, 3, 2, 4, NULL, 0);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 4; x++)
                part.data[((size_t)c * 2 + y) * 4 + x] = px(&scaled, c, y, x + 1);
    CHECK(region_equal(&o, &part, 1, 0), "half_crop: cropped scaled image in rows 1..2");
    cd_image_free(&part);
    cd_image_free(&scaled);
    cd_image_free(&o);
    cd_image_free(&s);

    /* a square source keeps its aspect: every mode squashes */
    s = random_image(1, 6, 6);
    cd_image_t sq;
    CHECK(cd_image_scale(&s, 3, 3, &sq, NULL, 0) == CD_OK, "scale");
    for (int m = 0; m < CD_RESIZE_COUNT; m++) {
        CHECK(cd_image_resize(&s, 3, 3, m, 1, &o, NULL, 0) == CD_OK, "mode %d", m);
        CHECK(memcmp(o.data, sq.data, 9) == 0, "mode %s on the same aspect squashes",
              cd_resize_mode_name(m));
        cd_image_free(&o);
    }
    cd_image_free(&sq);
    cd_image_free(&s);
}

/* crop of a very elongated image: refused with what to do, not with an internal shape */
static void test_crop_elongated(void)
{
    cd_image_t s = random_image(1, 300, 1), d;
    char err[512] = "";
    CHECK(cd_image_resize(&s, 256, 256, CD_RESIZE_CROP, 1, &d, err, sizeof err) == CD_ERR &&
              strstr(err, "1x300 image is too elongated to crop to 256x256") && strstr(err, "fill or squash"),
          "crop of 1x300 to 256x256: %s", err);
    CHECK(cd_image_resize(&s, 256, 256, CD_RESIZE_FILL, 1, &d, err, sizeof err) == CD_OK && d.w == 256,
          "fill of the same image works: %s", err);
    cd_image_free(&d);
    cd_image_free(&s);
}

static void test_mode_names(void)
{
    for (int m = 0; m < CD_RESIZE_COUNT; m++)
        CHECK(cd_resize_mode_parse(cd_resize_mode_name(m)) == m, "mode %d round trip", m);
    CHECK(cd_resize_mode_parse("stretch") == -1, "unknown mode");
    cd_image_t s = random_image(1, 3, 3), o;
    char err[256] = "";
    CHECK(cd_image_resize(&s, 2, 2, 17, 0, &o, err, sizeof err) == CD_ERR, "bad mode");
    CHECK(strstr(err, "half_crop") != NULL, "message lists the modes: %s", err);
    cd_image_free(&s);
}

static void test_png_jpeg_roundtrip(void)
{
    for (int c = 1; c <= 3; c += 2) {
        cd_image_t s = random_image(c, 13, 17), d;
        uint8_t *buf;
        size_t len;
        CHECK(cd_image_encode_png(&s, 6, &buf, &len, NULL, 0) == CD_OK, "png encode");
        CHECK(cd_image_sniff(buf, len) == CD_IMAGE_PNG, "sniff png");
        CHECK(cd_image_decode(buf, len, c, &d, NULL, 0) == CD_OK, "png decode");
        CHECK(d.c == c && d.h == 13 && d.w == 17 && memcmp(d.data, s.data, (size_t)c * 13 * 17) == 0,
              "png round trip is exact (c=%d)", c);
        cd_image_free(&d);
        /* truncated PNG is an error, not a partial image */
        char err[256] = "";
        CHECK(cd_image_decode(buf, len / 2, c, &d, err, sizeof err) == CD_ERR, "truncated png");
        CHECK(strstr(err, "PNG") != NULL, "message: %s", err);
        free(buf);
        cd_image_free(&s);

        /* JPEG of a smooth image with mild noise: close, not exact */
        cd_image_alloc(&s, c, 32, 48, NULL, 0);
        for (int k = 0; k < c; k++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 48; x++)
                    s.data[((size_t)k * 32 + y) * 48 + x] =
                        (uint8_t)(40 + 3 * x + 2 * y + 20 * k + (int)(cd_test_rand_u64() % 5));
        CHECK(cd_image_encode_jpeg(&s, 90, &buf, &len, NULL, 0) == CD_OK, "jpeg encode");
        CHECK(cd_image_sniff(buf, len) == CD_IMAGE_JPEG, "sniff jpeg");
        CHECK(cd_image_decode(buf, len, c, &d, NULL, 0) == CD_OK, "jpeg decode");
        double mad = 0;
        for (size_t i = 0; i < (size_t)c * 32 * 48; i++)
            mad += fabs((double)d.data[i] - s.data[i]);
        mad /= (double)c * 32 * 48;
        CHECK(mad < 4.0, "jpeg mean abs error %.2f (c=%d)", mad, c);
        cd_image_free(&d);
        err[0] = 0;
        CHECK(cd_image_decode(buf, len * 2 / 3, c, &d, err, sizeof err) == CD_ERR,
              "truncated jpeg is an error");
        CHECK(strstr(err, "truncated") != NULL || strstr(err, "JPEG") != NULL, "message: %s",
              err);
        free(buf);
        cd_image_free(&s);
    }
    cd_image_t d;
    char err[256] = "";
    CHECK(cd_image_decode("hello world", 11, 3, &d, err, sizeof err) == CD_ERR, "junk");
    CHECK(strstr(err, "not a PNG, JPEG, BMP, PGM or PPM image") != NULL, "junk message: %s", err);
}

/* Writes a big-endian 16- or 32-bit value. */
static void put_be(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

/* A small file whose header declares 9000 x 9000 pixels (each side allowed, the product
 * over CD_IMAGE_MAX_PIXELS) is refused from its header, with the sizes in the message. */
static void test_pixel_cap(void)
{
    cd_image_t s = random_image(3, 16, 16), d;
    char want[64];
    snprintf(want, sizeof want, "9000x9000 is more than %u pixels", CD_IMAGE_MAX_PIXELS);
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    CHECK(cd_image_encode_png(&s, 6, &buf, &len, NULL, 0) == CD_OK, "png encode");
    /* IHDR: signature(8) length(4) "IHDR"(4) width(4) height(4) ... crc over type+data */
    CHECK(len > 33 && memcmp(buf + 12, "IHDR", 4) == 0, "IHDR first");
    put_be(buf + 16, 9000, 4);
    put_be(buf + 20, 9000, 4);
    put_be(buf + 29, (uint32_t)crc32(0, buf + 12, 17), 4);
    CHECK(cd_image_decode(buf, len, 3, &d, err, sizeof err) == CD_ERR, "huge png refused");
    CHECK(strstr(err, want) != NULL, "png message: %s", err);
    free(buf);
    CHECK(cd_image_encode_jpeg(&s, 90, &buf, &len, NULL, 0) == CD_OK, "jpeg encode");
    size_t sof = 2;
    while (sof + 9 < len && !(buf[sof] == 0xFF && buf[sof + 1] == 0xC0))
        sof++;
    CHECK(sof + 9 < len, "jpeg has a baseline SOF");
    put_be(buf + sof + 5, 9000, 2);
    put_be(buf + sof + 7, 9000, 2);
    err[0] = 0;
    CHECK(cd_image_decode(buf, len, 3, &d, err, sizeof err) == CD_ERR, "huge jpeg refused");
    CHECK(strstr(err, want) != NULL, "jpeg message: %s", err);
    free(buf);
    cd_image_free(&s);
}

/* PNG flavours written directly with libpng: palette, 16-bit, alpha, 1-bit gray. */
typedef struct membuf {
    uint8_t *p;
    size_t n, cap;
} membuf;

static void mb_write(png_structp png, png_bytep d, size_t n)
{
    membuf *m = png_get_io_ptr(png);
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}
static void mb_flush(png_structp png) { (void)png; }

static png_byte g_trns[4]; /* a tRNS chunk for the next write_png_raw (g_ntrns entries) */
static int g_ntrns;

static membuf write_png_raw(int w, int h, int color, int depth, const uint8_t *rows_data,
                            size_t rowbytes, const png_color *palette, int npal)
{
    membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_set_write_fn(png, &m, mb_write, mb_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(png, info, palette, npal);
    if (g_ntrns)
        png_set_tRNS(png, info, g_trns, g_ntrns, NULL);
    g_ntrns = 0;
    png_write_info(png, info);
    for (int y = 0; y < h; y++)
        png_write_row(png, rows_data + (size_t)y * rowbytes);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return m;
}

static void test_png_flavours(void)
{
    cd_image_t d;
    /* palette: 2x2 with four colours */
    png_color pal[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 30}};
    uint8_t idx[] = {0, 1, 2, 3};
    membuf m = write_png_raw(2, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 2, pal, 4);
    CHECK(cd_image_decode(m.p, m.n, 3, &d, NULL, 0) == CD_OK, "palette decode");
    CHECK(px(&d, 0, 0, 0) == 255 && px(&d, 1, 0, 1) == 255 && px(&d, 2, 1, 0) == 255 &&
              px(&d, 0, 1, 1) == 10 && px(&d, 1, 1, 1) == 20 && px(&d, 2, 1, 1) == 30,
          "palette colours");
    cd_image_free(&d);
    /* as gray: ITU-R 601 weights */
    CHECK(cd_image_decode(m.p, m.n, 1, &d, NULL, 0) == CD_OK, "palette as gray");
    CHECK(px(&d, 0, 0, 0) == 76 && px(&d, 0, 0, 1) == 150 && px(&d, 0, 1, 0) == 29,
          "601 gray %d %d %d", px(&d, 0, 0, 0), px(&d, 0, 0, 1), px(&d, 0, 1, 0));
    cd_image_free(&d);
    free(m.p);

    /* a palette with transparency (tRNS; common in optimised web PNGs): RGB, alpha dropped */
    g_trns[0] = 0, g_trns[1] = 128, g_ntrns = 2;
    m = write_png_raw(2, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 2, pal, 4);
    char err[256] = "";
    CHECK(cd_image_decode(m.p, m.n, 3, &d, err, sizeof err) == CD_OK, "palette with tRNS: %s", err);
    CHECK(d.c == 3 && px(&d, 0, 0, 0) == 255 && px(&d, 2, 1, 0) == 255 && px(&d, 2, 1, 1) == 30,
          "palette with tRNS: its colours");
    cd_image_free(&d);
    CHECK(cd_image_decode(m.p, m.n, 1, &d, err, sizeof err) == CD_OK && px(&d, 0, 0, 0) == 76,
          "palette with tRNS as gray: %s", err);
    cd_image_free(&d);
    free(m.p);

    /* 16-bit RGBA: alpha dropped, 16 -> 8 bit scaled */
    uint8_t rgba16[2 * 8];
    const uint16_t v[8] = {0xFFFF, 0x0000, 0x8080, 0x1234, 0x0101, 0xFEFE, 0x0000, 0xFFFF};
    for (int i = 0; i < 8; i++)
        rgba16[2 * i] = (uint8_t)(v[i] >> 8), rgba16[2 * i + 1] = (uint8_t)v[i];
    m = write_png_raw(2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 16, rgba16, 16, NULL, 0);
    CHECK(cd_image_decode(m.p, m.n, 3, &d, NULL, 0) == CD_OK, "rgba16 decode");
    CHECK(d.c == 3 && px(&d, 0, 0, 0) == 255 && px(&d, 1, 0, 0) == 0 && px(&d, 2, 0, 0) == 128 &&
              px(&d, 0, 0, 1) == 1 && px(&d, 1, 0, 1) == 254 && px(&d, 2, 0, 1) == 0,
          "rgba16 pixels %d %d %d / %d %d %d", px(&d, 0, 0, 0), px(&d, 1, 0, 0), px(&d, 2, 0, 0),
          px(&d, 0, 0, 1), px(&d, 1, 0, 1), px(&d, 2, 0, 1));
    cd_image_free(&d);
    free(m.p);

    /* 1-bit gray -> RGB: 0 and 255 in every channel */
    uint8_t bits[] = {0xA0}; /* 1 0 1 0 */
    m = write_png_raw(4, 1, PNG_COLOR_TYPE_GRAY, 1, bits, 1, NULL, 0);
    CHECK(cd_image_decode(m.p, m.n, 3, &d, NULL, 0) == CD_OK, "1-bit decode");
    int ok = 1;
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 4; x++)
            ok &= px(&d, c, 0, x) == (x % 2 == 0 ? 255 : 0);
    CHECK(ok, "1-bit gray expands to 0/255 in each channel");
    cd_image_free(&d);
    free(m.p);

    /* gray + alpha as gray */
    uint8_t ga[] = {200, 0, 17, 255};
    m = write_png_raw(2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, 4, NULL, 0);
    CHECK(cd_image_decode(m.p, m.n, 1, &d, NULL, 0) == CD_OK, "gray+alpha decode");
    CHECK(d.c == 1 && px(&d, 0, 0, 0) == 200 && px(&d, 0, 0, 1) == 17, "alpha dropped");
    cd_image_free(&d);
    free(m.p);
}

static void test_write_png_file(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/img.png", cd_test_tmpdir());
    cd_image_t s = random_image(3, 9, 5), d;
    CHECK(cd_image_write_png(path, &s, NULL, 0) == CD_OK, "write png");
    CHECK(cd_image_load(path, 3, &d, NULL, 0) == CD_OK, "load png");
    CHECK(d.w == 5 && d.h == 9 && memcmp(d.data, s.data, 135) == 0, "file round trip");
    cd_image_free(&d);
    char err[512] = "";
    CHECK(cd_image_load("/nonexistent/x.png", 3, &d, err, sizeof err) == CD_ERR, "missing");
    CHECK(strstr(err, "/nonexistent/x.png") != NULL, "message names the file: %s", err);
    cd_image_t g;
    CHECK(cd_image_convert(&s, 1, &g, NULL, 0) == CD_OK, "to gray");
    size_t i = 7;
    unsigned want = (299u * s.data[i] + 587u * s.data[45 + i] + 114u * s.data[90 + i] + 500) / 1000;
    CHECK(g.data[i] == want, "gray %u vs %u", g.data[i], want);
    cd_image_free(&g);
    cd_image_free(&s);
}

/* ---- BMP and netpbm, written here byte by byte from their specifications ---------------- */

static void put_le(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A BMP of src (c = 3: 24-bit BGR; c = 1: 8-bit with a gray palette), bottom-up rows
 * padded to 4 bytes, or top-down (negative height) when top_down. */
static uint8_t *write_bmp(const cd_image_t *src, int top_down, size_t *len)
{
    int bpp = src->c == 3 ? 24 : 8, palette = src->c == 1 ? 256 * 4 : 0;
    size_t row = ((size_t)src->w * bpp / 8 + 3) / 4 * 4, off = 14 + 40 + (size_t)palette;
    *len = off + row * (size_t)src->h;
    uint8_t *b = calloc(1, *len);
    b[0] = 'B', b[1] = 'M';
    put_le(b + 2, (uint32_t)*len, 4);
    put_le(b + 10, (uint32_t)off, 4);
    put_le(b + 14, 40, 4);
    put_le(b + 18, (uint32_t)src->w, 4);
    put_le(b + 22, (uint32_t)(top_down ? -src->h : src->h), 4);
    put_le(b + 26, 1, 2);
    put_le(b + 28, (uint32_t)bpp, 2);
    put_le(b + 46, src->c == 1 ? 256 : 0, 4);
    for (int i = 0; i < palette / 4; i++)
        b[54 + 4 * i] = b[55 + 4 * i] = b[56 + 4 * i] = (uint8_t)i;
    size_t plane = (size_t)src->h * src->w;
    for (int y = 0; y < src->h; y++) {
        uint8_t *r = b + off + row * (size_t)(top_down ? y : src->h - 1 - y);
        for (int x = 0; x < src->w; x++) {
            size_t i = (size_t)y * src->w + x;
            if (src->c == 1)
                r[x] = src->data[i];
            else
                for (int k = 0; k < 3; k++)
                    r[3 * x + k] = src->data[(2 - k) * plane + i]; /* B, G, R */
        }
    }
    return b;
}

static int same_pixels(const cd_image_t *a, const cd_image_t *b)
{
    return a->c == b->c && a->h == b->h && a->w == b->w && !memcmp(a->data, b->data, (size_t)a->c * a->h * a->w);
}

static void test_bmp(void)
{
    for (int c = 1; c <= 3; c += 2)
        for (int top = 0; top < 2; top++) {
            cd_image_t s = random_image(c, 7, 5), d; /* 5 wide: rows need padding */
            size_t len;
            uint8_t *b = write_bmp(&s, top, &len);
            char err[256] = "";
            CHECK(cd_image_sniff(b, len) == CD_IMAGE_BMP, "sniffed as BMP");
            CHECK(cd_image_decode(b, len, c, &d, err, sizeof err) == CD_OK, "bmp c=%d top=%d: %s", c, top, err);
            CHECK(same_pixels(&s, &d), "bmp c=%d top-down=%d: the pixels written come back", c, top);
            cd_image_free(&d);
            CHECK(cd_image_decode(b, len - 3, c, &d, err, sizeof err) == CD_ERR && strstr(err, "truncated BMP"),
                  "a BMP short of its last row is refused: %s", err);
            free(b);
            cd_image_free(&s);
        }
    /* gray asked of a colour BMP: the same luma as a PNG's */
    cd_image_t s = random_image(3, 4, 4), d, ref;
    size_t len;
    uint8_t *b = write_bmp(&s, 0, &len);
    char err[256] = "";
    CHECK(cd_image_decode(b, len, 1, &d, err, sizeof err) == CD_OK && cd_image_convert(&s, 1, &ref, err, sizeof err) == CD_OK,
          "bmp to gray: %s", err);
    CHECK(same_pixels(&d, &ref), "a colour BMP read as gray matches cd_image_convert");
    cd_image_free(&d);
    cd_image_free(&ref);
    put_le(b + 30, 1, 4); /* BI_RLE8 */
    CHECK(cd_image_decode(b, len, 3, &d, err, sizeof err) == CD_ERR && strstr(err, "BMP"), "RLE refused: %s", err);
    /* an OS/2 BMP that is all header (26 bytes, 4096x4096 declared): refused, not black */
    uint8_t os2[26] = {'B', 'M'};
    put_le(os2 + 2, 26, 4);
    put_le(os2 + 10, 26, 4);
    put_le(os2 + 14, 12, 4);
    put_le(os2 + 18, 4096, 2);
    put_le(os2 + 20, 4096, 2);
    put_le(os2 + 22, 1, 2);
    put_le(os2 + 24, 24, 2);
    for (size_t n = 26; n <= 29; n++) {
        uint8_t pad[29] = {0};
        memcpy(pad, os2, sizeof os2);
        CHECK(cd_image_decode(pad, n, 3, &d, err, sizeof err) == CD_ERR && strstr(err, "truncated BMP"),
              "an OS/2 BMP of %zu bytes declaring 4096x4096 is refused: %s", n, err);
    }
    put_le(b + 30, 0, 4);
    put_le(b + 18, 9000, 4);
    put_le(b + 22, 9000, 4);
    CHECK(cd_image_decode(b, len, 3, &d, err, sizeof err) == CD_ERR, "a 9000x9000 BMP refused: %s", err);
    free(b);
    cd_image_free(&s);
}

/* A netpbm file: header text then the samples (binary, or text when ascii). */
static uint8_t *write_pnm(const cd_image_t *src, int maxval, int ascii, size_t *len)
{
    size_t plane = (size_t)src->h * src->w, n = plane * (size_t)src->c, cap = 64 + n * 12;
    uint8_t *b = malloc(cap);
    int magic = src->c == 1 ? (ascii ? 2 : 5) : (ascii ? 3 : 6);
    size_t at = (size_t)snprintf((char *)b, cap, "P%d\n# written by a test\n%d %d\n%d\n", magic, src->w, src->h, maxval);
    for (size_t i = 0; i < plane; i++)
        for (int k = 0; k < src->c; k++) {
            /* the sample whose scaled value is the pixel's: round(p * maxval / 255) */
            unsigned v = (src->data[k * plane + i] * (unsigned)maxval + 127) / 255;
            if (ascii)
                at += (size_t)snprintf((char *)b + at, cap - at, "%u%c", v, i % 7 == 6 ? '\n' : ' ');
            else if (maxval > 255)
                b[at++] = (uint8_t)(v >> 8), b[at++] = (uint8_t)v;
            else
                b[at++] = (uint8_t)v;
        }
    *len = at;
    return b;
}

static void test_pnm(void)
{
    static const struct {
        int c, maxval, ascii;
    } cases[] = {{1, 255, 0}, {3, 255, 0}, {1, 65535, 0}, {3, 65535, 0}, {1, 255, 1}, {3, 255, 1}, {3, 1023, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        int c = cases[t].c, maxval = cases[t].maxval;
        cd_image_t s = random_image(c, 6, 9), d;
        size_t len;
        uint8_t *b = write_pnm(&s, maxval, cases[t].ascii, &len);
        char err[256] = "";
        CHECK(cd_image_sniff(b, len) == CD_IMAGE_PNM, "sniffed as netpbm");
        CHECK(cd_image_decode(b, len, c, &d, err, sizeof err) == CD_OK, "pnm case %zu: %s", t, err);
        /* 8 and 16 bits give the pixels back exactly; 10 bits to within the rounding twice */
        int worst = 0;
        for (size_t i = 0; d.data && i < (size_t)c * 6 * 9; i++)
            worst = abs(d.data[i] - s.data[i]) > worst ? abs(d.data[i] - s.data[i]) : worst;
        CHECK(d.c == c && d.h == 6 && d.w == 9 && worst <= (maxval == 1023 ? 1 : 0), "pnm case %zu: pixels off by %d", t,
              worst);
        cd_image_free(&d);
        if (!cases[t].ascii)
            CHECK(cd_image_decode(b, len - 1, c, &d, err, sizeof err) == CD_ERR && strstr(err, "truncated"),
                  "pnm case %zu: one byte short is refused: %s", t, err);
        else
            CHECK(cd_image_decode(b, len / 2, c, &d, err, sizeof err) == CD_ERR && strstr(err, "missing"),
                  "pnm case %zu: half the text is refused: %s", t, err);
        free(b);
        cd_image_free(&s);
    }
    cd_image_t d;
    char err[256] = "";
    CHECK(cd_image_decode("P4\n2 2\n\xc0\x40", 9, 1, &d, err, sizeof err) == CD_ERR && strstr(err, "PBM"),
          "PBM refused by name: %s", err);
    CHECK(cd_image_decode("P5\n2 2\n255\n\x01\x02\x03\x04", 15, 1, &d, err, sizeof err) == CD_OK && d.data[3] == 4,
          "a 2x2 P5: %s", err);
    cd_image_free(&d);
    CHECK(cd_image_decode("P5\n2 2\n15\n\x01\x02\x03\x10", 14, 1, &d, err, sizeof err) == CD_ERR && strstr(err, "maxval"),
          "a sample over maxval refused: %s", err);
    CHECK(cd_image_decode("P6\n9000 9000\n255\n", 17, 3, &d, err, sizeof err) == CD_ERR && strstr(err, "more than"),
          "a 9000x9000 PPM refused from its header: %s", err);
    CHECK(cd_image_decode("P5\n2 x\n255\n", 11, 1, &d, err, sizeof err) == CD_ERR && strstr(err, "header"),
          "a bad header: %s", err);
    CHECK(cd_image_name_ok("a.PGM") && cd_image_name_ok("b.bmp") && cd_image_name_ok("c.ppm") && !cd_image_name_ok("d.gif") &&
              !cd_image_name_ok("bmp"),
          "image names by extension");
}

int main(void)
{
    cd_test_init("test_dataset_image");
    test_squash_known();
    test_scale_reference();
    test_crop();
    test_fill();
    test_half_crop();
    test_mode_names();
    test_crop_elongated();
    test_png_jpeg_roundtrip();
    test_pixel_cap();
    test_png_flavours();
    test_write_png_file();
    test_bmp();
    test_pnm();
    return cd_test_finish();
}
