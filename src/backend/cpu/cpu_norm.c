/*
 * Ops over the channel axis of (outer, channels, inner) data: softmax, the cross
 * entropy loss on its output, top-k accuracy, and batch normalization. Sums over many
 * elements accumulate in double (BatchNorm's through cpu_channel_sums: float lanes of
 * at most sixteen terms each, then double).
 */
#include <float.h>
#include <math.h>

#include "cpu_internal.h"

/* Subtracts the channel max before exp, so large scores do not overflow. */
// x, y are (outer, channels, inner); y may equal x
void cpu_softmax_forward(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                         float *y)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN / 4) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            const float *xp = x + (size_t)o * channels * inner + i;
            float *yp = y + (size_t)o * channels * inner + i;
            float m = xp[0];
            for (int c = 1; c < channels; c++)
                m = xp[(size_t)c * inner] > m ? xp[(size_t)c * inner] : m;
            double s = 0.0;
            for (int c = 0; c < channels; c++) {
                float e = expf(xp[(size_t)c * inner] - m);
                yp[(size_t)c * inner] = e;
                s += e;
            }
            float inv = (float)(1.0 / s);
            for (int c = 0; c < channels; c++)
                yp[(size_t)c * inner] *= inv;
        }
    }
}

/* dx = y * (dy - sum_c dy*y); dx may equal dy. */
// y, dy, dx are (outer, channels, inner)
void cpu_softmax_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                          const float *dy, float *dx)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            size_t base = (size_t)o * channels * inner + i;
            double dot = 0.0;
            for (int c = 0; c < channels; c++)
                dot += (double)dy[base + (size_t)c * inner] * y[base + (size_t)c * inner];
            float fd = (float)dot;
            for (int c = 0; c < channels; c++) {
                size_t k = base + (size_t)c * inner;
                dx[k] = y[k] * (dy[k] - fd);
            }
        }
    }
}

/* loss_out[0] = -sum log(max(prob[label], FLT_MIN)) over used positions, count_out[0]
 * = number used. A label outside [0, channels) counts as probability 0 (the loss
 * shows it as -log(FLT_MIN) ~ 87.3 per position instead of reading out of bounds). */
// prob is (outer, channels, inner); label is (outer, inner); loss_out, count_out are (1)
void cpu_xent_forward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                      const float *label, int has_ignore, int ignore_label, float *loss_out,
                      float *count_out)
{
    int nt = cpu_threads(be);
    double loss = 0.0;
    long count = 0;
    size_t total = (size_t)outer * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN / 8) \
    schedule(static) reduction(+ : loss, count)
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            int l = cd_label_at(label, (size_t)o * inner + i, has_ignore, ignore_label);
            if (l == CD_LABEL_IGNORED)
                continue;
            float p = l >= 0 && l < channels ? prob[((size_t)o * channels + l) * inner + i] : 0.0f;
            loss -= log(!(p < FLT_MIN) ? p : FLT_MIN); /* a NaN stays NaN, as in Caffe */
            count++;
        }
    }
    loss_out[0] = (float)loss;
    count_out[0] = (float)count;
}

/* dx = (prob - onehot(label)) * scale; every channel of an ignored position is 0. */
// prob, dx are (outer, channels, inner); label is (outer, inner)
void cpu_xent_backward(cd_backend_t *be, int outer, int channels, int inner, const float *prob,
                       const float *label, int has_ignore, int ignore_label, float scale,
                       float *dx)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            int l = cd_label_at(label, (size_t)o * inner + i, has_ignore, ignore_label);
            size_t base = (size_t)o * channels * inner + i;
            for (int c = 0; c < channels; c++) {
                size_t k = base + (size_t)c * inner;
                dx[k] = l != CD_LABEL_IGNORED ? (prob[k] - (c == l ? 1.0f : 0.0f)) * scale : 0.0f;
            }
        }
    }
}

/* A used position is correct when fewer than top_k other scores are greater than or equal to
 * the score of its label (ties count against it, as in Caffe). A label outside
 * [0, channels) is counted and never correct. */
// x is (outer, channels, inner); label is (outer, inner); correct_out, count_out are (1)
void cpu_accuracy(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                  const float *label, int top_k, int has_ignore, int ignore_label,
                  float *correct_out, float *count_out)
{
    int nt = cpu_threads(be);
    long correct = 0, count = 0;
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) \
    schedule(static) reduction(+ : correct, count)
    for (int o = 0; o < outer; o++) {
        for (int i = 0; i < inner; i++) {
            int l = cd_label_at(label, (size_t)o * inner + i, has_ignore, ignore_label);
            if (l == CD_LABEL_IGNORED)
                continue;
            count++;
            if (l < 0 || l >= channels)
                continue;
            const float *xp = x + (size_t)o * channels * inner + i;
            float s = xp[(size_t)l * inner];
            int greater = 0;
            for (int c = 0; c < channels && greater < top_k; c++)
                greater += c != l && xp[(size_t)c * inner] >= s;
            correct += greater < top_k;
        }
    }
    correct_out[0] = (float)correct;
    count_out[0] = (float)count;
}

/* mean[c], var[c] (biased) over outer*inner elements, in one pass of cpu_channel_sums
 * shifted by k, the mean of the channel's first row: var = E[(x-k)^2] - E[x-k]^2, where
 * |E[x-k]| is of the order of the standard deviation unless that first row is far from
 * the rest (each (x-k)^2 carries float's relative error, the difference cancels the
 * common part: a row 30 deviations off would cost about three digits of var). */
// x is (outer, channels, inner); mean, var are (channels)
void cpu_bn_stats(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                  float *mean, float *var)
{
    double m_count = (double)outer * inner;
    if (m_count <= 0) {
        for (int c = 0; c < channels; c++)
            mean[c] = var[c] = 0.0f;
        return;
    }
    for (int c = 0; c < channels; c++) { /* k, kept in mean until the sums are in */
        double k = 0.0;
        for (int i = 0; i < inner; i++)
            k += x[(size_t)c * inner + i];
        mean[c] = (float)(k / inner);
    }
    double *s = (double *)cpu_scratch_acquire(be, cpu_channel_sums_space(outer, channels, inner));
    cpu_channel_sums(be, outer, channels, inner, x, NULL, mean, s);
    for (int c = 0; c < channels; c++) {
        double d = s[2 * c] / m_count, v = s[2 * c + 1] / m_count - d * d;
        mean[c] = (float)(mean[c] + d);
        var[c] = v > 0.0 ? (float)v : 0.0f;
    }
    cpu_scratch_release(be);
}

// x, y are (outer, channels, inner); mean, var are (channels); y may equal x
CD_CLONES
void cpu_bn_normalize(cd_backend_t *be, int outer, int channels, int inner, const float *x,
                      const float *mean, const float *var, float eps, float *y)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int c = 0; c < channels; c++) {
            size_t base = ((size_t)o * channels + c) * inner;
            float mu = mean[c];
            float inv = (float)(1.0 / sqrt((double)var[c] + eps));
            for (int i = 0; i < inner; i++)
                y[base + i] = (x[base + i] - mu) * inv;
        }
    }
}

/* y is xhat (the normalized output). Batch statistics:
 *   dx = (dy - mean(dy) - xhat*mean(dy*xhat)) / sqrt(var+eps), means per channel;
 * global statistics: dx = dy / sqrt(var+eps). dx may equal dy. dx in memory order, each
 * thread the part of the data the elementwise ops (and the means) give it. */
// y, dy, dx are (outer, channels, inner); var is (channels)
CD_CLONES
void cpu_bn_backward(cd_backend_t *be, int outer, int channels, int inner, const float *y,
                     const float *var, float eps, int global_stats, const float *dy, float *dx)
{
    int nt = cpu_threads(be);
    size_t total = (size_t)outer * channels * inner;
    double m_count = (double)outer * inner;
    int means = !global_stats && m_count > 0;
    double *s = (double *)cpu_scratch_acquire(be, cpu_channel_sums_space(outer, channels, inner));
    if (means)
        cpu_channel_sums(be, outer, channels, inner, dy, y, NULL, s);
#pragma omp parallel for num_threads(nt) collapse(2) if (total > CPU_PAR_MIN) schedule(static)
    for (int o = 0; o < outer; o++) {
        for (int c = 0; c < channels; c++) {
            size_t base = ((size_t)o * channels + c) * inner;
            float inv = (float)(1.0 / sqrt((double)var[c] + eps));
            float mdy = means ? (float)(s[2 * c] / m_count) : 0.0f;
            float mdyx = means ? (float)(s[2 * c + 1] / m_count) : 0.0f;
            for (int i = 0; i < inner; i++)
                dx[base + i] = (dy[base + i] - mdy - y[base + i] * mdyx) * inv;
        }
    }
    cpu_scratch_release(be);
}
