/*
 * The data augmentations (src/core/augment.c) against references written here: index
 * arithmetic for quarter turns, a double-precision inverse mapping and bilinear sample
 * for the warp, and the statistics each photometric step must move (contrast, HSV,
 * noise, whitening). Draws are checked for purity (the same seed and position give the
 * same parameters) and for their ranges over many images.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/augment.h"
#include "testutil.h"

static uint8_t *rand_image(int c, int h, int w)
{
    size_t n = (size_t)c * h * w;
    uint8_t *img = malloc(n);
    for (size_t i = 0; i < n; i++)
        img[i] = (uint8_t)(cd_test_rand_u64() & 255);
    return img;
}

static size_t count_diff(const uint8_t *a, const uint8_t *b, size_t n, int *maxd)
{
    size_t k = 0;
    *maxd = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        k += d != 0;
        *maxd = d > *maxd ? d : *maxd;
    }
    return k;
}

static void test_identity(void)
{
    for (int t = 0; t < 6; t++) {
        int c = t % 2 ? 3 : 1, h = 1 + (int)(cd_test_rand_u64() % 40), w = 1 + (int)(cd_test_rand_u64() % 40);
        size_t n = (size_t)c * h * w;
        uint8_t *src = rand_image(c, h, w), *dst = malloc(n), *lab = malloc(n);
        cd_aug_params p;
        cd_aug_identity(&p);
        CHECK(cd_aug_apply_u8(&p, c, h, w, src, dst) == CD_OK, "apply %dx%dx%d", c, h, w);
        CHECK(memcmp(src, dst, n) == 0, "identity params change a %dx%dx%d image", c, h, w);
        cd_aug_apply_label(&p, c, h, w, src, lab, 255);
        CHECK(memcmp(src, lab, n) == 0, "identity params change a %dx%dx%d label image", c, h, w);
        free(src);
        free(dst);
        free(lab);
    }
    uint8_t one = 7, out = 0;
    cd_aug_params p;
    cd_aug_identity(&p);
    CHECK(cd_aug_apply_u8(&p, 0, 1, 1, &one, &out) == CD_ERR, "0 channels accepted");
    CHECK(cd_aug_apply_u8(&p, CD_AUG_MAX_CHANNELS + 1, 1, 1, &one, &out) == CD_ERR, "too many channels accepted");
}

/* A counterclockwise quarter turn of a square (c, n, n) image by index arithmetic:
 * out[y][x] = in[x][n-1-y] (numpy's rot90). */
static void ref_rot90(int c, int n, const uint8_t *in, uint8_t *out)
{
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                out[((size_t)ch * n + y) * n + x] = in[((size_t)ch * n + x) * n + (n - 1 - y)];
}

static void test_quarter_turns(void)
{
    for (int t = 0; t < 6; t++) {
        int c = t % 2 ? 3 : 1, n = 1 + (int)(cd_test_rand_u64() % 33);
        size_t len = (size_t)c * n * n;
        uint8_t *src = rand_image(c, n, n), *a = malloc(len), *b = malloc(len), *ref = malloc(len);
        cd_aug_params p;
        cd_aug_identity(&p);
        p.quarter = 1;
        cd_aug_apply_u8(&p, c, n, n, src, a);
        ref_rot90(c, n, src, ref);
        CHECK(memcmp(a, ref, len) == 0, "quarter turn of %dx%dx%d differs from rot90", c, n, n);
        /* four turns give the image back */
        memcpy(a, src, len);
        for (int i = 0; i < 4; i++) {
            cd_aug_apply_u8(&p, c, n, n, a, b);
            memcpy(a, b, len);
        }
        CHECK(memcmp(a, src, len) == 0, "four quarter turns of %dx%dx%d are not the identity", c, n, n);
        /* two turns are quarter = 2, three are quarter = 3 */
        cd_aug_params p2 = p;
        p2.quarter = 2;
        cd_aug_apply_u8(&p, c, n, n, src, a);
        cd_aug_apply_u8(&p, c, n, n, a, b);
        cd_aug_apply_u8(&p2, c, n, n, src, a);
        CHECK(memcmp(a, b, len) == 0, "quarter 2 is not two quarter turns (%d)", n);
        /* labels turn the same way, with no fill */
        cd_aug_apply_label(&p, c, n, n, src, a, 255);
        CHECK(memcmp(a, ref, len) == 0, "a label quarter turn of %dx%d differs from rot90", n, n);
        free(src);
        free(a);
        free(b);
        free(ref);
    }
}

/* aug_rot's 90 degrees is the quarter turn, up to the float error of cos(pi/2) */
static void test_angle_90(void)
{
    for (int t = 0; t < 4; t++) {
        int c = t % 2 ? 3 : 1, n = 2 + (int)(cd_test_rand_u64() % 40);
        size_t len = (size_t)c * n * n;
        uint8_t *src = rand_image(c, n, n), *a = malloc(len), *b = malloc(len);
        cd_aug_params pq, pa;
        cd_aug_identity(&pq);
        cd_aug_identity(&pa);
        pq.quarter = 1;
        pa.angle = 90.0f;
        cd_aug_apply_u8(&pq, c, n, n, src, a);
        cd_aug_apply_u8(&pa, c, n, n, src, b);
        int maxd;
        count_diff(a, b, len, &maxd);
        CHECK(maxd <= 1, "angle 90 differs from a quarter turn by %d on %dx%d", maxd, n, n);
        pa.angle = -90.0f;
        pq.quarter = 3;
        cd_aug_apply_u8(&pq, c, n, n, src, a);
        cd_aug_apply_u8(&pa, c, n, n, src, b);
        count_diff(a, b, len, &maxd);
        CHECK(maxd <= 1, "angle -90 differs from three quarter turns by %d on %dx%d", maxd, n, n);
        free(src);
        free(a);
        free(b);
    }
}

/* The warp against a reference in double: the source of output (x, y) is
 * center + Q^-1(scale * R^-1(u, v) + move), sampled bilinearly with clamped coordinates. */
static double ref_sample(const cd_aug_params *p, const uint8_t *plane, int h, int w, int x, int y)
{
    double cx = (w - 1) / 2.0, cy = (h - 1) / 2.0, u = x - cx, v = y - cy;
    double t = p->angle * M_PI / 180.0;
    double qx = p->scale * (u * cos(t) - v * sin(t)) + p->move_x * cx;
    double qy = p->scale * (u * sin(t) + v * cos(t)) + p->move_y * cy;
    double q = p->quarter * M_PI / 2;
    double sx = cx + qx * cos(q) - qy * sin(q), sy = cy + qx * sin(q) + qy * cos(q);
    sx = fmin(fmax(sx, 0), w - 1);
    sy = fmin(fmax(sy, 0), h - 1);
    int x0 = (int)floor(sx), y0 = (int)floor(sy), x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    double fx = sx - x0, fy = sy - y0;
    return (plane[y0 * w + x0] * (1 - fx) + plane[y0 * w + x1] * fx) * (1 - fy) +
           (plane[y1 * w + x0] * (1 - fx) + plane[y1 * w + x1] * fx) * fy;
}

static void test_warp_reference(void)
{
    for (int t = 0; t < 8; t++) {
        int c = t % 2 ? 3 : 1, h = 3 + (int)(cd_test_rand_u64() % 30), w = 3 + (int)(cd_test_rand_u64() % 30);
        size_t len = (size_t)c * h * w;
        uint8_t *src = rand_image(c, h, w), *dst = malloc(len);
        cd_aug_params p;
        cd_aug_identity(&p);
        p.quarter = (int)(cd_test_rand_u64() % 4);
        p.angle = (float)cd_test_uniform(-180, 180);
        p.scale = (float)cd_test_uniform(0.5, 1.8);
        p.move_x = (float)cd_test_uniform(-0.3, 0.3);
        p.move_y = (float)cd_test_uniform(-0.3, 0.3);
        cd_aug_apply_u8(&p, c, h, w, src, dst);
        int worst = 0;
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    double r = ref_sample(&p, src + (size_t)ch * h * w, h, w, x, y);
                    int d = abs((int)floor(r + 0.5) - (int)dst[((size_t)ch * h + y) * w + x]);
                    worst = d > worst ? d : worst;
                }
        char desc[256];
        CHECK(worst <= 1, "warp of %dx%dx%d (%s) is off the reference by %d", c, h, w,
              cd_aug_describe(&p, desc, sizeof desc), worst);
        free(src);
        free(dst);
    }
}

/* labels stay within their classes plus the fill; a zoom out shows the fill */
static void test_labels(void)
{
    int h = 24, w = 31, classes = 5;
    size_t len = (size_t)h * w;
    uint8_t *src = malloc(len), *dst = malloc(len);
    for (size_t i = 0; i < len; i++)
        src[i] = (uint8_t)(cd_test_rand_u64() % classes);
    cd_aug_config cfg = {.quad_rot = CD_AUG_QUAD_ROTALL, .rot = 30, .scale = 0.3};
    int bad = 0, filled = 0;
    for (uint64_t k = 0; k < 50; k++) {
        cd_aug_params p;
        cd_aug_draw(&cfg, 99, k, &p);
        cd_aug_apply_label(&p, 1, h, w, src, dst, 255);
        for (size_t i = 0; i < len; i++) {
            bad += dst[i] >= classes && dst[i] != 255;
            filled += dst[i] == 255;
        }
    }
    CHECK(bad == 0, "%d label pixels outside the classes and the fill", bad);
    CHECK(filled > 0, "no fill after 50 rotated and scaled label images");
    cd_aug_params p;
    cd_aug_identity(&p);
    p.scale = 2.0f;
    cd_aug_apply_label(&p, 1, h, w, src, dst, 255);
    CHECK(dst[0] == 255 && dst[len - 1] == 255, "a 2x zoom out leaves corners %d %d, not the fill", dst[0],
          dst[len - 1]);
    CHECK(dst[(h / 2) * w + w / 2] < classes, "the center of a zoomed-out label is %d", dst[(h / 2) * w + w / 2]);
    free(src);
    free(dst);
}

static void test_draw_pure(void)
{
    cd_aug_config cfg = {.quad_rot = CD_AUG_QUAD_ROTALL, .rot = 20, .scale = 0.1, .noise = 0.05, .contrast = 0.5,
                         .whitening = 1, .hsv_use = 1, .hsv_h = 0.02, .hsv_s = 0.04, .hsv_v = 0.06};
    int differ = 0;
    for (uint64_t k = 0; k < 100; k++) {
        cd_aug_params a, b, c;
        cd_aug_draw(&cfg, 1234, k, &a);
        cd_aug_draw(&cfg, 1234, k, &b);
        CHECK(memcmp(&a, &b, sizeof a) == 0, "two draws of k=%llu differ", (unsigned long long)k);
        cd_aug_draw(&cfg, 1234, k + 1, &c);
        differ += a.angle != c.angle && a.noise_seed != c.noise_seed && a.contrast != c.contrast;
        CHECK(a.whiten == 1, "whitening not drawn");
    }
    CHECK(differ >= 99, "only %d of 100 neighbouring positions draw different parameters", differ);
    cd_aug_params a, b;
    cd_aug_draw(&cfg, 1, 5, &a);
    cd_aug_draw(&cfg, 2, 5, &b);
    CHECK(a.angle != b.angle, "the seed does not change the draw");
    cd_aug_config none = {0};
    cd_aug_draw(&none, 1, 5, &a);
    cd_aug_identity(&b);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "an empty config draws something");
    CHECK(!cd_aug_active(&none) && !cd_aug_changes_pixels(&none), "an empty config is active");
    cd_aug_config wh = {.whitening = 1}, hsv_off = {.hsv_h = 0.02, .hsv_s = 0.04, .hsv_v = 0.06};
    CHECK(cd_aug_active(&wh) && !cd_aug_changes_pixels(&wh), "whitening alone: active, no pixel change");
    CHECK(!cd_aug_active(&hsv_off), "HSV stddevs without aug_hsv_use are active");
}

static void test_draw_ranges(void)
{
    const int n = 20000;
    const struct {
        int quad;
        int allowed[4]; /* which quarter turns may appear */
    } quads[] = {{CD_AUG_QUAD_NONE, {1, 0, 0, 0}}, {CD_AUG_QUAD_ROT90, {1, 1, 0, 1}},
                 {CD_AUG_QUAD_ROT180, {1, 0, 1, 0}}, {CD_AUG_QUAD_ROTALL, {1, 1, 1, 1}}};
    for (size_t qi = 0; qi < sizeof quads / sizeof quads[0]; qi++) {
        double rot = cd_test_uniform(1, 180), scale = cd_test_uniform(0.01, 1), contrast = cd_test_uniform(0.1, 5);
        double hh = cd_test_uniform(0.01, 0.5), hs = cd_test_uniform(0.01, 0.5), hv = cd_test_uniform(0.01, 0.5);
        cd_aug_config cfg = {.quad_rot = quads[qi].quad, .rot = rot, .scale = scale, .contrast = contrast,
                             .hsv_use = 1, .hsv_h = hh, .hsv_s = hs, .hsv_v = hv, .noise = 0.03};
        int seen[4] = {0}, out = 0;
        double sum_h = 0, sq_h = 0, sum_a = 0;
        for (int k = 0; k < n; k++) {
            cd_aug_params p;
            cd_aug_draw(&cfg, 777 + qi, (uint64_t)k, &p);
            seen[p.quarter & 3]++;
            out += p.quarter < 0 || p.quarter > 3 || !quads[qi].allowed[p.quarter];
            out += fabsf(p.angle) > rot * (1 + 1e-6);
            out += p.contrast < 1 - contrast - 1e-5 || p.contrast > 1 + contrast + 1e-5;
            out += p.scale < fmax(0.1, 1 - 3 * scale) - 1e-5 || p.scale > 1 + 3 * scale + 1e-5;
            out += fabsf(p.move_x) > fabsf(p.scale - 1) + 1e-5 && p.scale > 0.1f;
            out += fabsf(p.hue) > 3 * hh + 1e-6 || fabsf(p.sat) > 3 * hs + 1e-6 || fabsf(p.val) > 3 * hv + 1e-6;
            out += fabsf(p.noise - 0.03f * 255) > 1e-3;
            sum_h += p.hue;
            sq_h += (double)p.hue * p.hue;
            sum_a += p.angle;
        }
        CHECK(out == 0, "quad %d: %d draws out of range", quads[qi].quad, out);
        for (int q = 0; q < 4; q++)
            if (quads[qi].allowed[q]) {
                int count = 0;
                for (int j = 0; j < 4; j++)
                    count += quads[qi].allowed[j];
                double want = (double)n / count;
                CHECK(fabs(seen[q] - want) < 0.05 * want, "quad %d: turn %d drawn %d times, want about %.0f",
                      quads[qi].quad, q, seen[q], want);
            }
        /* a normal cut at 3 sd has sd 0.9866 of the uncut one */
        double sd = sqrt(sq_h / n - (sum_h / n) * (sum_h / n));
        CHECK(fabs(sd - 0.9866 * hh) < 0.03 * hh, "hue sd %.4g, want about %.4g", sd, 0.9866 * hh);
        CHECK(fabs(sum_a / n) < 0.03 * rot, "angle mean %.3g is not near 0 (rot %.3g)", sum_a / n, rot);
    }
    /* HSV shifts are drawn only with aug_hsv_use */
    cd_aug_config off = {.hsv_h = 0.1, .hsv_s = 0.1, .hsv_v = 0.1, .rot = 5};
    cd_aug_params p;
    cd_aug_draw(&off, 3, 3, &p);
    CHECK(p.hue == 0 && p.sat == 0 && p.val == 0, "HSV drawn without aug_hsv_use");
}

static double plane_sd(const uint8_t *x, size_t n)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        q += (double)x[i] * x[i];
    }
    return sqrt(q / n - (s / n) * (s / n));
}

static void test_contrast(void)
{
    int c = 3, h = 20, w = 30;
    size_t plane = (size_t)h * w, len = c * plane;
    uint8_t *src = malloc(len), *dst = malloc(len);
    for (size_t i = 0; i < len; i++) /* 64..191: room both ways */
        src[i] = (uint8_t)(64 + cd_test_rand_u64() % 128);
    for (int t = 0; t < 2; t++) {
        cd_aug_params p;
        cd_aug_identity(&p);
        p.contrast = t ? 1.5f : 0.5f;
        cd_aug_apply_u8(&p, c, h, w, src, dst);
        int worst = 0;
        for (int ch = 0; ch < c; ch++) {
            double mean = 0;
            for (size_t i = 0; i < plane; i++)
                mean += src[ch * plane + i];
            mean /= plane;
            for (size_t i = 0; i < plane; i++) {
                double r = fmin(fmax((src[ch * plane + i] - mean) * p.contrast + mean, 0), 255);
                int d = abs((int)floor(r + 0.5) - dst[ch * plane + i]);
                worst = d > worst ? d : worst;
            }
            double ratio = plane_sd(dst + ch * plane, plane) / plane_sd(src + ch * plane, plane);
            CHECK(fabs(ratio - p.contrast) < 0.02, "contrast %.1f scales the sd by %.3f", p.contrast, ratio);
        }
        CHECK(worst <= 1, "contrast %.1f is off (x - mean) * f + mean by %d", p.contrast, worst);
    }
    free(src);
    free(dst);
}

static void test_hsv(void)
{
    int h = 4, w = 5;
    size_t plane = (size_t)h * w;
    uint8_t src[3 * 20], dst[3 * 20];
    /* pure red turned a third of the way round the hue circle is pure green */
    for (size_t i = 0; i < plane; i++) {
        src[i] = 255;
        src[plane + i] = 0;
        src[2 * plane + i] = 0;
    }
    cd_aug_params p;
    cd_aug_identity(&p);
    p.hue = 1.0f / 3.0f;
    cd_aug_apply_u8(&p, 3, h, w, src, dst);
    CHECK(dst[0] == 0 && dst[plane] == 255 && dst[2 * plane] == 0, "red + 1/3 turn is %d,%d,%d, not green", dst[0],
          dst[plane], dst[2 * plane]);
    p.hue = -1.0f / 3.0f; /* and the other way, blue; a whole turn is red again */
    cd_aug_apply_u8(&p, 3, h, w, src, dst);
    CHECK(dst[0] == 0 && dst[plane] == 0 && dst[2 * plane] == 255, "red - 1/3 turn is %d,%d,%d, not blue", dst[0],
          dst[plane], dst[2 * plane]);
    /* random colors: saturation -1 makes them gray at their value (max channel) */
    uint8_t *img = rand_image(3, h, w);
    cd_aug_identity(&p);
    p.sat = -1.0f;
    cd_aug_apply_u8(&p, 3, h, w, img, dst);
    int bad = 0;
    for (size_t i = 0; i < plane; i++) {
        int mx = img[i] > img[plane + i] ? img[i] : img[plane + i];
        mx = mx > img[2 * plane + i] ? mx : img[2 * plane + i];
        bad += dst[i] != dst[plane + i] || dst[i] != dst[2 * plane + i] || abs(dst[i] - mx) > 1;
    }
    CHECK(bad == 0, "%d pixels not gray at their value after saturation -1", bad);
    /* value +0.1 raises the max channel by 25.5 (clamped) and keeps hue and saturation */
    cd_aug_identity(&p);
    p.val = 0.1f;
    cd_aug_apply_u8(&p, 3, h, w, img, dst);
    bad = 0;
    for (size_t i = 0; i < plane; i++) {
        int mx = 0, mo = 0;
        for (int ch = 0; ch < 3; ch++) {
            mx = img[ch * plane + i] > mx ? img[ch * plane + i] : mx;
            mo = dst[ch * plane + i] > mo ? dst[ch * plane + i] : mo;
        }
        int want = mx + 25.5 > 255 ? 255 : (int)floor(mx + 25.5 + 0.5);
        bad += abs(mo - want) > 1;
    }
    CHECK(bad == 0, "%d pixels whose value did not rise by 0.1", bad);
    /* on a gray image the value shift is a brightness shift */
    uint8_t g[20], go[20];
    for (int i = 0; i < 20; i++)
        g[i] = (uint8_t)(100 + i);
    p.val = -0.2f;
    cd_aug_apply_u8(&p, 1, h, w, g, go);
    CHECK(go[0] == 49 && go[19] == 68, "gray value -0.2: %d %d, want 49 68", go[0], go[19]);
    free(img);
}

static void test_noise(void)
{
    int c = 3, h = 64, w = 64;
    size_t len = (size_t)c * h * w;
    uint8_t *src = malloc(len), *dst = malloc(len), *again = malloc(len);
    memset(src, 128, len);
    cd_aug_config cfg = {.noise = 0.03};
    cd_aug_params p;
    cd_aug_draw(&cfg, 42, 9, &p);
    cd_aug_apply_u8(&p, c, h, w, src, dst);
    double s = 0, q = 0;
    for (size_t i = 0; i < len; i++) {
        double d = (double)dst[i] - 128;
        s += d;
        q += d * d;
    }
    double mean = s / len, sd = sqrt(q / len - mean * mean);
    /* rounding adds 1/12 to the variance */
    double want = sqrt(0.03 * 255 * 0.03 * 255 + 1.0 / 12);
    CHECK(fabs(mean) < 0.2, "noise mean %.3g", mean);
    CHECK(fabs(sd - want) < 0.04 * want, "noise sd %.3g, want %.3g", sd, want);
    cd_aug_apply_u8(&p, c, h, w, src, again);
    CHECK(memcmp(dst, again, len) == 0, "the same noise seed gives other noise");
    cd_aug_params p2;
    cd_aug_draw(&cfg, 42, 10, &p2);
    cd_aug_apply_u8(&p2, c, h, w, src, again);
    CHECK(memcmp(dst, again, len) != 0, "the next image gets the same noise");
    free(src);
    free(dst);
    free(again);
}

static void test_whiten(void)
{
    size_t n = 3 * 17 * 19;
    float *x = malloc(n * sizeof(float));
    cd_test_fill_uniform(x, n, -50, 200);
    cd_aug_whiten_f32(n, x);
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        q += (double)x[i] * x[i];
    }
    CHECK(fabs(s / n) < 1e-5, "whitened mean %.3g", s / n);
    CHECK(fabs(sqrt(q / n) - 1) < 1e-5, "whitened sd %.6g", sqrt(q / n));
    for (size_t i = 0; i < n; i++)
        x[i] = 7.5f;
    cd_aug_whiten_f32(n, x);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += x[i] != 0.0f;
    CHECK(bad == 0, "a constant image whitens to %d nonzero values", bad);
    free(x);
}

int main(void)
{
    cd_test_init("augment");
    test_identity();
    test_quarter_turns();
    test_angle_90();
    test_warp_reference();
    test_labels();
    test_draw_pure();
    test_draw_ranges();
    test_contrast();
    test_hsv();
    test_noise();
    test_whiten();
    return cd_test_finish();
}
