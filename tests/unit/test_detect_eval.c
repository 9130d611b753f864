/* Detection boxes and their scoring (src/engine/detect_eval.c): IoU against areas worked
 * by hand, the rows of a clustering output and of a label db, the way back from the
 * stored image to the image as given, KITTI files, and the scoring against a literal
 * transcription of DetectNet's score_det and calcmAP on random boxes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/detect.h"
#include "testutil.h"

static void test_iou(void)
{
    cd_det_box a = {0, 0, 10, 10, 0, 1}, b = {5, 0, 15, 10, 0, 1}, c = {20, 20, 30, 30, 0, 1};
    CHECK_NEAR(cd_det_iou(&a, &b), 50.0 / 150.0, 1e-9, "half-overlapping squares");
    CHECK_NEAR(cd_det_iou(&a, &a), 1.0, 1e-9, "a box with itself");
    CHECK(cd_det_iou(&a, &c) == 0, "apart boxes overlap by %g", cd_det_iou(&a, &c));
    cd_det_box flat = {3, 3, 3, 8, 0, 1};
    CHECK(cd_det_iou(&a, &flat) == 0, "a box without area overlaps by %g", cd_det_iou(&a, &flat));
}

static void test_rows(void)
{
    /* a clustering output of 4 rows: two boxes, a zero row, then a zero-confidence row */
    float rows[4][6] = {{1, 2, 11, 22, 2.5f, 2}, {5, 5, 9, 9, 0.7f, 1}, {0}, {3, 3, 8, 8, 0, 1}};
    cd_det_box b[4];
    int n = cd_det_from_rows(&rows[0][0], 4, 6, -1, 1, b, 4);
    CHECK(n == 2 && b[0].x2 == 11 && b[0].cls == 1 && b[1].confidence == 0.7f, "5 columns read %d boxes", n);
    n = cd_det_from_rows(&rows[0][0], 4, 6, 5, 1, b, 4);
    CHECK(n == 2 && b[0].cls == 2 && b[1].cls == 1, "the class column reads classes %d, %d", b[0].cls, b[1].cls);
    CHECK(cd_det_from_rows(&rows[0][0], 4, 6, 5, 1, b, 1) == 1, "max is not kept");

    float label[3][CD_DET_LABEL_WIDTH] = {{0}};
    label[0][0] = 4, label[0][1] = 6, label[0][2] = 10, label[0][3] = 20, label[0][CD_DET_LABEL_CLASS] = 2;
    label[1][0] = 1, label[1][1] = 1, label[1][2] = 3, label[1][3] = 3, label[1][CD_DET_LABEL_CLASS] = 0;
    label[2][CD_DET_LABEL_CLASS] = -1;
    n = cd_det_from_label_rows(&label[0][0], 3, b, 3);
    CHECK(n == 2 && b[0].x1 == 4 && b[0].y1 == 6 && b[0].x2 == 14 && b[0].y2 == 26 && b[0].cls == 2 && b[1].cls == 0,
          "label rows read %d boxes, the first (%g %g %g %g) class %d", n, b[0].x1, b[0].y1, b[0].x2, b[0].y2,
          b[0].cls);
}

static void test_frame(void)
{
    /* a 100x50 image padded to 200x100 and stored at 64x32: a stored pixel is 3.125 */
    cd_det_frame f = cd_det_frame_make(100, 50, 200, 100, 64, 32);
    cd_det_box b = {16, 8, 40, 30, 1, 1};
    cd_det_to_image(&f, &b, 1);
    CHECK_NEAR(b.x1, 50, 1e-4, "x1");
    CHECK_NEAR(b.y1, 25, 1e-4, "y1");
    CHECK_NEAR(b.x2, 100, 1e-4, "x2 clipped to the image's width (125 in the padding)");
    CHECK_NEAR(b.y2, 50, 1e-4, "y2 clipped to the image's height (93.75 in the padding)");
    /* larger than the padding: resized whole */
    f = cd_det_frame_make(400, 100, 200, 100, 64, 32);
    CHECK(f.pad_w == 400 && f.pad_h == 100, "an image wider than the padding keeps pad %dx%d", f.pad_w, f.pad_h);
    b = (cd_det_box){8, 8, 16, 16, 1, 1};
    cd_det_to_image(&f, &b, 1);
    CHECK_NEAR(b.x1, 50, 1e-4, "x1 of a squashed image");
    CHECK_NEAR(b.y2, 50, 1e-4, "y2 of a squashed image");
}

static void test_kitti(void)
{
    const char *names[] = {"dontcare", "rectangle", "disc"};
    cd_det_box b[8];
    char err[512];
    cd_test_write("ok.txt", "Rectangle 0.00 0 0.0 10.5 20 30 40.25 0 0 0 0 0 0 0\n"
                                 "DontCare -1 -1 -10 1 2 3 4 -1 -1 -1 -1000 -1000 -1000 -10\n"
                                 "\n"
                                 "disc 0 0 0 5 6 7 8 1 1 1 1 1 1 1 0.9\r\n"
                                 "triangle 0 0 0 1 1 2 2 0 0 0 0 0 0 0\n");
    int n = cd_det_kitti_load(cd_test_tmp_path("ok.txt"), names, 3, b, 8, err, sizeof err);
    CHECK(n == 4, "read %d boxes: %s", n, n < 0 ? err : "");
    if (n == 4) {
        CHECK(b[0].cls == 1 && b[0].x1 == 10.5f && b[0].y2 == 40.25f, "the first box is class %d at %g..%g", b[0].cls,
              b[0].x1, b[0].y2);
        CHECK(b[1].cls == 0 && b[2].cls == 2 && b[3].cls == 0, "classes %d %d %d (an unknown type is dontcare)",
              b[1].cls, b[2].cls, b[3].cls);
    }
    cd_test_write("bad.txt", "Car 0 0 0 1 2 3 4\n");
    n = cd_det_kitti_load(cd_test_tmp_path("bad.txt"), names, 3, b, 8, err, sizeof err);
    CHECK(n == -1 && strstr(err, "line 1 has 8 columns"), "a short line reads %d: %s", n, err);
    n = cd_det_kitti_load(cd_test_tmp_path("missing.txt"), names, 3, b, 8, err, sizeof err);
    CHECK(n == -1 && strstr(err, "missing.txt"), "a missing file reads %d: %s", n, err);
}

/* ---- DetectNet's score_det and calcmAP, as mean_ap.py writes them, for one class ------- */

static double ref_iou(const float *d, const float *r)
{
    double xo = fmax(0, fmin(d[2], r[2]) - fmax(d[0], r[0])), yo = fmax(0, fmin(d[3], r[3]) - fmax(d[1], r[1]));
    double o = xo * yo;
    if (o == 0)
        return 0;
    return o / ((d[2] - d[0]) * (d[3] - d[1]) + (r[2] - r[0]) * (r[3] - r[1]) - o);
}

/* gt (ngt, 4) and det (ndet, 4) already by confidence: tp, fp, tn as score_det marks them. */
static void ref_score(const float (*gt)[4], int ngt, const float (*det)[4], int ndet, double thr, long *tp, long *fp,
                      long *tn)
{
    int gm[64] = {0}, dm[64] = {0};
    for (int i = 0; i < ngt; i++)
        for (int j = 0; j < ndet; j++)
            if (ref_iou(det[j], gt[i]) >= thr && dm[j] == 0) {
                gm[i] = 1;
                dm[j] = 1;
                break;
            }
    for (int j = 0; j < ndet; j++)
        *tp += dm[j] == 1, *fp += dm[j] == 0;
    for (int i = 0; i < ngt; i++)
        *tn += gm[i] == 0;
}

static void random_box(float *b, double size)
{
    b[0] = (float)cd_test_uniform(0, 100);
    b[1] = (float)cd_test_uniform(0, 100);
    b[2] = b[0] + (float)cd_test_uniform(1, size);
    b[3] = b[1] + (float)cd_test_uniform(1, size);
}

static void test_score_reference(void)
{
    cd_det_counts mine = {0};
    long tp = 0, fp = 0, tn = 0;
    for (int img = 0; img < 200; img++) {
        int ngt = (int)cd_test_uniform(0, 6), ndet = (int)cd_test_uniform(0, 8);
        float gt[8][4], det[8][4];
        cd_det_box g[8], d[8];
        for (int i = 0; i < ngt; i++) {
            random_box(gt[i], 40);
            g[i] = (cd_det_box){gt[i][0], gt[i][1], gt[i][2], gt[i][3], 0, 1};
        }
        /* detections near the labels and astray, confidences falling (the reference's order) */
        for (int j = 0; j < ndet; j++) {
            if (ngt && j % 2 == 0) {
                const float *s = gt[(j / 2) % ngt];
                for (int k = 0; k < 4; k++)
                    det[j][k] = s[k] + (float)cd_test_uniform(-4, 4);
                if (det[j][2] <= det[j][0] + 0.5f)
                    det[j][2] = det[j][0] + 1;
                if (det[j][3] <= det[j][1] + 0.5f)
                    det[j][3] = det[j][1] + 1;
            } else {
                random_box(det[j], 40);
            }
            d[j] = (cd_det_box){det[j][0], det[j][1], det[j][2], det[j][3], (float)(10 - j), 1};
        }
        /* handed over in another order: the scoring sorts by confidence itself */
        cd_det_box shuffled[8];
        for (int j = 0; j < ndet; j++)
            shuffled[j] = d[ndet - 1 - j];
        ref_score((const float(*)[4])gt, ngt, (const float(*)[4])det, ndet, CD_DET_IOU, &tp, &fp, &tn);
        cd_det_score(g, ngt, shuffled, ndet, CD_DET_IOU, 0, &mine);
    }
    CHECK(mine.tp == tp && mine.fp == fp && mine.fn == tn, "tp %ld fp %ld fn %ld; DetectNet's %ld %ld %ld", mine.tp,
          mine.fp, mine.fn, tp, fp, tn);
    CHECK(tp > 20 && fp > 20 && tn > 20, "the random cases are one-sided: tp %ld fp %ld fn %ld", tp, fp, tn);
    double p, r, m;
    cd_det_measures(&mine, &p, &r, &m);
    double rp = 100.0 * tp / (double)(tp + fp), rr = 100.0 * tp / (double)(tp + tn);
    CHECK_NEAR(p, rp, 1e-9, "precision");
    CHECK_NEAR(r, rr, 1e-9, "recall");
    CHECK_NEAR(m, rp * rr / 100.0, 1e-9, "mAP");
}

static void test_score_classes(void)
{
    cd_det_box labels[] = {{0, 0, 10, 10, 0, 1}, {20, 20, 30, 30, 0, 2}, {50, 50, 90, 90, 0, 0}};
    cd_det_box dets[] = {
        {0, 0, 10, 10, 2, 2},     /* on the class-1 box, of class 2: false */
        {0, 1, 10, 10, 1, 1},     /* class 1: true */
        {21, 20, 30, 30, 3, 2},   /* class 2: true */
        {55, 55, 70, 70, 1, 1},   /* inside the DontCare box: neither */
        {40, 40, 70, 70, 1, 2},   /* under half inside it: false */
    };
    cd_det_counts all = {0}, one = {0}, two = {0};
    cd_det_score(labels, 3, dets, 5, CD_DET_IOU, 0, &all);
    cd_det_score(labels, 3, dets, 5, CD_DET_IOU, 1, &one);
    cd_det_score(labels, 3, dets, 5, CD_DET_IOU, 2, &two);
    CHECK(all.tp == 2 && all.fp == 2 && all.fn == 0, "every class: tp %ld fp %ld fn %ld", all.tp, all.fp, all.fn);
    CHECK(one.tp == 1 && one.fp == 0 && one.fn == 0, "class 1: tp %ld fp %ld fn %ld", one.tp, one.fp, one.fn);
    CHECK(two.tp == 1 && two.fp == 2 && two.fn == 0, "class 2: tp %ld fp %ld fn %ld", two.tp, two.fp, two.fn);
    cd_det_counts none = {0};
    double p, r, m;
    cd_det_measures(&none, &p, &r, &m);
    CHECK(p == 0 && r == 0 && m == 0, "nothing scored reads %g %g %g", p, r, m);
}

int main(void)
{
    cd_test_init("test_detect_eval");
    test_iou();
    test_rows();
    test_frame();
    test_kitti();
    test_score_reference();
    test_score_classes();
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
