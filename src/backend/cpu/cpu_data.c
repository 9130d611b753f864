/*
 * Batch preparation: crop, flips, mean subtraction and scale, as Caffe's data
 * transformer does it. The mean is read at the source pixel (the same crop and
 * flips as the image), so a mean image of the stored size works with any crop.
 * And DIGITS's augmentations before it, and whitening after it, with the reference of
 * cdigits/augment.h (src/core/augment.c).
 */
#include "cdigits/augment.h"
#include "cpu_internal.h"

/*
 * dst[i,ch,y,x] = (src[i,ch,sy,sx] - mean[ch,sy,sx]) * scale with
 * sx = mirror[i] & CD_FLIP_LR ? ox[i]+ow-1-x : ox[i]+x and
 * sy = mirror[i] & CD_FLIP_UD ? oy[i]+oh-1-y : oy[i]+y. mean and mirror may be NULL.
 * The caller keeps crops inside the image: 0 <= oy[i] <= sh-oh, 0 <= ox[i] <= sw-ow.
 */
// src is (n, c, sh, sw) uint8; oy, ox, mirror are (n); mean is (c, sh, sw); dst is (n, c, oh, ow)
CD_CLONES
void cpu_prepare_batch(cd_backend_t *be, int n, int c, int sh, int sw, int oh, int ow,
                       const uint8_t *src, const int *oy, const int *ox, const uint8_t *mirror,
                       const float *mean, float scale, float *dst)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)n * c * oh * ow;
#pragma omp parallel for num_threads(nt) collapse(3) if (total > CPU_PAR_MIN / 4) schedule(static)
    for (int i = 0; i < n; i++) {
        for (int ch = 0; ch < c; ch++) {
            for (int y = 0; y < oh; y++) {
                int flip = mirror ? mirror[i] : 0;
                int sy = oy[i] + (flip & CD_FLIP_UD ? oh - 1 - y : y);
                size_t srow = (((size_t)i * c + ch) * sh + sy) * sw + ox[i];
                size_t mrow = ((size_t)ch * sh + sy) * sw + ox[i];
                float *d = dst + (((size_t)i * c + ch) * oh + y) * ow;
                const uint8_t *s = src + srow;
                const float *m = mean ? mean + mrow : NULL;
                if (flip & CD_FLIP_LR) {
                    for (int x = 0; x < ow; x++) {
                        int sx = ow - 1 - x;
                        d[x] = ((float)s[sx] - (m ? m[sx] : 0.0f)) * scale;
                    }
                } else if (m) {
                    for (int x = 0; x < ow; x++)
                        d[x] = ((float)s[x] - m[x]) * scale;
                } else {
                    for (int x = 0; x < ow; x++)
                        d[x] = (float)s[x] * scale;
                }
            }
        }
    }
}

// src, dst are (n, c, h, w) uint8; params (n)
void cpu_augment_batch(cd_backend_t *be, int n, int c, int h, int w, const cd_aug_params *params, int kind,
                       uint8_t fill, const uint8_t *src, uint8_t *dst)
{
    int nt = cpu_threads(be);
    size_t img = (size_t)c * h * w;
#pragma omp parallel for num_threads(nt) if (n > 1) schedule(static)
    for (int i = 0; i < n; i++) {
        if (kind == CD_AUG_LABEL)
            cd_aug_apply_label(&params[i], c, h, w, src + i * img, dst + i * img, fill);
        else
            cd_aug_apply_u8(&params[i], c, h, w, src + i * img, dst + i * img); /* c checked by the wrapper */
    }
}

// x is (n, size) floats, whitened per image in place
void cpu_whiten_batch(cd_backend_t *be, int n, size_t size, float *x)
{
    int nt = cpu_threads(be);
#pragma omp parallel for num_threads(nt) if (n > 1) schedule(static)
    for (int i = 0; i < n; i++)
        cd_aug_whiten_f32(size, x + (size_t)i * size);
}
