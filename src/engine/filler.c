/* Parameter fillers with Caffe's definitions (FillerParameter): constant, uniform,
 * gaussian, xavier, msra and bilinear, the random ones drawn from the counter-based generator so that a seed
 * gives the same weights on every backend and machine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "engine_internal.h"

typedef struct filler_ctx {
    const cd_param *p;
    const cd_pt_node *f;
    uint64_t seed, stream;
} filler_ctx;

static float uniform01(const filler_ctx *c, size_t i) { return cd_rand_uniform(c->seed, c->stream, i); }

/* Caffe: fan_in = count / shape(0); fan_out = count / shape(1) (count for 1-D) */
static double variance_n(const filler_ctx *c)
{
    const cd_param *p = c->p;
    double fan_in = (double)p->count / p->dims[0];
    double fan_out = p->ndim > 1 ? (double)p->count / p->dims[1] : (double)p->count;
    const char *norm = c->f ? cd_pt_str(c->f, "variance_norm", "FAN_IN") : "FAN_IN";
    if (!strcmp(norm, "FAN_OUT"))
        return fan_out;
    if (!strcmp(norm, "AVERAGE"))
        return (fan_in + fan_out) / 2.0;
    return fan_in;
}

static void fill_constant(const filler_ctx *c, float *x)
{
    float v = c->f ? (float)cd_pt_float(c->f, "value", 0.0) : c->p->filler_default;
    for (size_t i = 0; i < c->p->count; i++)
        x[i] = v;
}

static void fill_uniform_range(const filler_ctx *c, float *x, double lo, double hi)
{
    for (size_t i = 0; i < c->p->count; i++)
        x[i] = (float)(lo + (hi - lo) * uniform01(c, i));
}

static void fill_gaussian_std(const filler_ctx *c, float *x, double mean, double std)
{
    for (size_t i = 0; i < c->p->count; i++) {
        double u1 = uniform01(c, 2 * i) + 1e-12, u2 = uniform01(c, 2 * i + 1);
        x[i] = (float)(mean + std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
}

static void fill_uniform(const filler_ctx *c, float *x)
{
    fill_uniform_range(c, x, cd_pt_float(c->f, "min", 0.0), cd_pt_float(c->f, "max", 1.0));
}

static void fill_gaussian(const filler_ctx *c, float *x)
{
    fill_gaussian_std(c, x, cd_pt_float(c->f, "mean", 0.0), cd_pt_float(c->f, "std", 1.0));
}

static void fill_xavier(const filler_ctx *c, float *x)
{
    double scale = sqrt(3.0 / variance_n(c));
    fill_uniform_range(c, x, -scale, scale);
}

static void fill_msra(const filler_ctx *c, float *x)
{
    fill_gaussian_std(c, x, 0.0, sqrt(2.0 / variance_n(c)));
}

/* Caffe's BilinearFiller: every (kh, kw) slice of a 4-D blob with a square kernel
 * holds the interpolation kernel (1 - |x/f - c|) * (1 - |y/f - c|), f = ceil(k/2),
 * c = (2f - 1 - f%2) / (2f), Caffe's centre exactly (not (k-1)/(2f), which differs for
 * k = 3, 6, 7, ... and for FCN-AlexNet's 63): a Deconvolution with kernel
 * 2s - s%2, stride s and pad ceil((s-1)/2) then upsamples by s. */
static void fill_bilinear(const filler_ctx *c, float *x)
{
    int k = c->p->dims[3];
    int f = (k + 1) / 2;
    double cc = (2 * f - 1 - f % 2) / (2.0 * f);
    for (size_t i = 0; i < c->p->count; i++) {
        double u = (double)(i % (size_t)k), v = (double)((i / (size_t)k) % (size_t)k);
        x[i] = (float)((1 - fabs(u / f - cc)) * (1 - fabs(v / f - cc)));
    }
}

static int shape_bilinear(const cd_param *p, char *err, size_t errlen)
{
    if (p->ndim != 4 || p->dims[2] != p->dims[3]) {
        snprintf(err, errlen, "parameter %s: the bilinear filler needs a 4-D blob with a square "
                 "kernel (a Deconvolution's weights with kernel_size set once)", p->name);
        return CD_ERR;
    }
    return CD_OK;
}

typedef struct filler_type {
    const char *name;
    void (*fill)(const filler_ctx *c, float *x);
    /* optional: can it fill a blob of p's shape? CD_OK, or CD_ERR with a message */
    int (*check_shape)(const cd_param *p, char *err, size_t errlen);
} filler_type;

static const filler_type filler_types[] = {
    {"constant", fill_constant, NULL}, {"uniform", fill_uniform, NULL},
    {"gaussian", fill_gaussian, NULL}, {"xavier", fill_xavier, NULL},
    {"msra", fill_msra, NULL},         {"bilinear", fill_bilinear, shape_bilinear},
};

static const filler_type *filler_find(const char *name)
{
    for (size_t i = 0; i < CD_ARRAY_LEN(filler_types); i++)
        if (!strcmp(filler_types[i].name, name))
            return &filler_types[i];
    return NULL;
}

int cd_filler_check(const cd_pt_node *f, char *err, size_t errlen)
{
    if (!f)
        return CD_OK;
    const char *type = cd_pt_str(f, "type", "constant");
    if (!filler_find(type)) {
        snprintf(err, errlen, "%d:%d: unknown filler type \"%s\"; expected constant, uniform, "
                 "gaussian, xavier, msra or bilinear", f->line, f->col, type);
        return CD_ERR;
    }
    if (cd_pt_int(f, "sparse", -1) > 0) {
        snprintf(err, errlen, "%d:%d: sparse gaussian fillers are not supported; remove sparse",
                 f->line, f->col);
        return CD_ERR;
    }
    return CD_OK;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int cd_fill_params(cd_net *net, char *err, size_t errlen)
{
    for (int i = 0; i < net->nparams; i++) {
        cd_param *p = net->params[i];
        filler_ctx c = {p, p->filler, net->opts.seed, hash_name(p->name)};
        const filler_type *ft = filler_find(p->filler ? cd_pt_str(p->filler, "type", "constant") : "constant");
        if (!ft) {
            snprintf(err, errlen, "parameter %s: unknown filler", p->name);
            return CD_ERR;
        }
        if (ft->check_shape && ft->check_shape(p, err, errlen) != CD_OK)
            return CD_ERR;
        float *host = cd_xmalloc(p->count * sizeof(float));
        ft->fill(&c, host);
        net->be->iface->upload(net->be, p->data, host, p->count * sizeof(float));
        free(host);
    }
    return CD_OK;
}
