/*
 * Fused solver updates, one loop per solver type, in Caffe's order per element:
 * normalize (g *= grad_scale), regularize (g += decay*w or decay*sign(w)), compute the
 * update from g and the history, w -= update. g keeps the regularized, scaled
 * gradient, or is zeroed in the same pass (zero_grad). The formulas are in include/cdigits/backend.h (cd_update_desc).
 */
#include <math.h>

#include "cpu_internal.h"

/* Normalize and regularize element i; g[i] keeps the result, or 0 (zero_grad); returns
 * the result. */
static inline float reg_grad(const cd_update_desc *d, const float *w, float *g, size_t i)
{
    float gi = g[i] * d->grad_scale;
    if (d->decay != 0.0f) {
        if (d->reg == CD_REG_L1)
            gi += d->decay * (float)((w[i] > 0.0f) - (w[i] < 0.0f));
        else
            gi += d->decay * w[i];
    }
    g[i] = d->zero_grad ? 0.0f : gi;
    return gi;
}

typedef void (*update_fn)(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                          float *h1, float *h2);

/* The loop of every solver: for each element i, gi = the normalized and regularized
 * gradient, then STEP updates the history and w[i]. A macro rather than a function
 * taking the step, so that each solver's loop is compiled with its step inline. */
#define SOLVER_LOOP(STEP)                                                                 \
    _Pragma("omp parallel for num_threads(nt) if (n > CPU_PAR_MIN) schedule(static)")     \
    for (size_t i = 0; i < n; i++) {                                                      \
        float gi = reg_grad(d, w, g, i);                                                  \
        STEP;                                                                             \
    }

// w, g, h1 are (n); h2 is unused
CD_CLONES
static void update_sgd(int nt, const cd_update_desc *d, size_t n, float *w, float *g, float *h1,
                       float *h2)
{
    (void)h2;
    SOLVER_LOOP(h1[i] = d->momentum * h1[i] + d->lr * gi;
                w[i] -= h1[i]);
}

// w, g, h1 are (n); h2 is unused
CD_CLONES
static void update_nesterov(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                            float *h1, float *h2)
{
    (void)h2;
    SOLVER_LOOP(float hp = h1[i];
                h1[i] = d->momentum * h1[i] + d->lr * gi;
                w[i] -= (1.0f + d->momentum) * h1[i] - d->momentum * hp);
}

// w, g, h1 are (n); h2 is unused
CD_CLONES
static void update_adagrad(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                           float *h1, float *h2)
{
    (void)h2;
    SOLVER_LOOP(h1[i] += gi * gi;
                w[i] -= d->lr * gi / (sqrtf(h1[i]) + d->delta));
}

// w, g, h1 are (n); h2 is unused
CD_CLONES
static void update_rmsprop(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                           float *h1, float *h2)
{
    (void)h2;
    SOLVER_LOOP(h1[i] = d->rms_decay * h1[i] + (1.0f - d->rms_decay) * gi * gi;
                w[i] -= d->lr * gi / (sqrtf(h1[i]) + d->delta));
}

/* Caffe computes u = g * sqrt((h2 + delta) / (h1 + delta)), one sqrt. */
// w, g, h1, h2 are (n)
CD_CLONES
static void update_adadelta(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                            float *h1, float *h2)
{
    SOLVER_LOOP(h1[i] = d->momentum * h1[i] + (1.0f - d->momentum) * gi * gi;
                float u = gi * sqrtf((h2[i] + d->delta) / (h1[i] + d->delta));
                h2[i] = d->momentum * h2[i] + (1.0f - d->momentum) * u * u;
                w[i] -= d->lr * u);
}

// w, g, h1, h2 are (n)
CD_CLONES
static void update_adam(int nt, const cd_update_desc *d, size_t n, float *w, float *g,
                        float *h1, float *h2)
{
    double t = (double)d->iteration + 1.0;
    double corr = sqrt(1.0 - pow(d->momentum2, t)) / (1.0 - pow(d->momentum, t));
    float rate = (float)(d->lr * corr);
    float b1 = d->momentum, b2 = d->momentum2;
    SOLVER_LOOP(h1[i] = b1 * h1[i] + (1.0f - b1) * gi;
                h2[i] = b2 * h2[i] + (1.0f - b2) * gi * gi;
                w[i] -= rate * h1[i] / (sqrtf(h2[i]) + d->delta));
}

static const update_fn update_table[CD_SOLVER_COUNT] = {
    [CD_SOLVER_SGD] = update_sgd,
    [CD_SOLVER_NESTEROV] = update_nesterov,
    [CD_SOLVER_ADAGRAD] = update_adagrad,
    [CD_SOLVER_RMSPROP] = update_rmsprop,
    [CD_SOLVER_ADADELTA] = update_adadelta,
    [CD_SOLVER_ADAM] = update_adam,
};

/* h2 is only read by ADADELTA and ADAM and may be NULL for the others. */
// w, g, h1, h2 are (n)
void cpu_update(cd_backend_t *be, const cd_update_desc *d, size_t n, float *w, float *g,
                float *h1, float *h2)
{
    if (d->type < 0 || d->type >= CD_SOLVER_COUNT || !update_table[d->type])
        return;
    update_table[d->type](cpu_threads(be), d, n, w, g, h1, h2);
}
