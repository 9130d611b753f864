/*
 * The engine against PyTorch: forward outputs, loss and gradients of two networks
 * compared with the numbers in tests/data/ref/ (lenet.ref, smallnet.ref), written by
 * tests/ref/make_refs.py (PyTorch, float64) and committed, so this test needs no
 * PyTorch. The format is in tests/ref/README.md.
 *
 *  - lenet.ref: models/lenet.prototxt, stage train, batch 4, 1x28x28, 10 classes,
 *    with the Data layer's tops filled from the file;
 *  - smallnet.ref: tests/data/ref/smallnet.prototxt (BatchNorm with batch
 *    statistics, Scale with bias, LRN, grouped convolution, Eltwise SUM with
 *    coefficients, Concat, AVE pooling with and without padding, MAX pooling with
 *    padding, Flatten, InnerProduct, SoftmaxWithLoss).
 *
 * Each file entry names what it is: input/<blob> is uploaded into that blob,
 * param/<layer>/<i> into that parameter; after the forward, blob/<name>, loss and
 * param_after/<name> (BatchNorm's stored statistics) are compared; after the
 * backward, grad/param/<name> and grad/input/<blob>.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/util.h"
#include "testutil.h"

/*
 * Tolerance. The references are exact values rounded once to float32; the engine
 * computes in float32. A float sum of K terms is off by at most about K*u*sum|terms|
 * (u = 2^-24 = 6e-8) and typically sqrt(K)*u*sum|terms|; the longest sums here are
 * the 2,304-term weight gradients of LeNet's conv1 (4 images x 24x24 positions) and
 * the 800-term ip1, with error bounds of 1.4e-4 and 5e-5 relative to the summed
 * magnitudes and typical errors of 3e-6. Layers chain a few such sums. Errors are
 * measured against the largest magnitude in the tensor (a gradient element that
 * cancels to nearly 0 cannot be held to its own size), and 1e-4 of it leaves a
 * margin of 100x over what the engine shows (a few 1e-7), while any wrong formula,
 * layout, divisor or scale is off by far more (at least 1e-2, usually order 1).
 *
 * A tensor can be 0 in exact arithmetic: a bias right before BatchNorm gets no
 * gradient, since the batch mean takes it away again. Float leaves the rounding of
 * the sums that cancel (here ~1e-8); so the magnitude a tensor is measured against
 * is at least 1e-2 of the largest magnitude among the entries of its kind (all
 * gradients, or all forward values) in the file.
 */
#define REF_TOL 1e-4
#define REF_FLOOR 1e-2

static cd_backend_t *g_be;

/* ---- the reference file ----------------------------------------------------------- */

enum { REF_DENSE = 'f', REF_SAMPLED = 's', REF_GENERATED = 'g' };

typedef struct ref_entry {
    char *name;
    int kind;
    int ndim;
    int dims[CD_MAX_DIMS];
    size_t count;     /* elements of the full tensor */
    size_t n;         /* values held: count, or the sample size */
    uint32_t *index;  /* sampled: the element of each value */
    float *value;     /* the values (generated entries: regenerated here) */
    int used;
} ref_entry;

typedef struct ref_file {
    int n;
    ref_entry *e;
} ref_file;

typedef struct reader {
    const unsigned char *p, *end;
    int ok;
} reader;

static const void *take(reader *r, size_t n)
{
    if (!r->ok || (size_t)(r->end - r->p) < n) {
        r->ok = 0;
        return NULL;
    }
    const void *at = r->p;
    r->p += n;
    return at;
}

static uint64_t take_le(reader *r, int bytes)
{
    const unsigned char *b = take(r, (size_t)bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; b && i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static float take_f32(reader *r)
{
    uint32_t u = (uint32_t)take_le(r, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double take_f64(reader *r)
{
    uint64_t u = take_le(r, 8);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static void ref_free(ref_file *f)
{
    for (int i = 0; f && i < f->n; i++) {
        free(f->e[i].name);
        free(f->e[i].index);
        free(f->e[i].value);
    }
    if (f)
        free(f->e);
}

/* Read a .ref file; CD_OK, or CD_ERR with a failed check saying why. Generated
 * tensors are rebuilt with cd_rand_uniform and checked against their checksum. */
static int ref_load(const char *path, ref_file *f)
{
    memset(f, 0, sizeof *f);
    size_t len = 0;
    char *buf = cd_read_file(path, &len);
    CHECK(buf != NULL, "cannot read %s; it is written by tests/ref/make_refs.py", path);
    if (!buf)
        return CD_ERR;
    reader r = {(const unsigned char *)buf, (const unsigned char *)buf + len, 1};
    const char *magic = take(&r, 8);
    int ok = magic && !memcmp(magic, "CDREF01\n", 8);
    f->n = ok ? (int)take_le(&r, 4) : 0;
    ok = ok && r.ok && f->n > 0 && f->n < 10000;
    f->e = ok ? calloc((size_t)f->n, sizeof *f->e) : NULL;
    for (int i = 0; ok && i < f->n; i++) {
        ref_entry *e = &f->e[i];
        e->kind = (int)take_le(&r, 1);
        e->ndim = (int)take_le(&r, 1);
        size_t namelen = (size_t)take_le(&r, 2);
        const char *name = take(&r, namelen);
        if (!r.ok || e->ndim > CD_MAX_DIMS) {
            ok = 0;
            break;
        }
        e->name = calloc(1, namelen + 1);
        memcpy(e->name, name, namelen);
        e->count = 1;
        for (int d = 0; d < e->ndim; d++) {
            e->dims[d] = (int)take_le(&r, 4);
            e->count *= (size_t)e->dims[d];
        }
        if (!r.ok || e->count > ((size_t)1 << 28)) {
            ok = 0;
            break;
        }
        if (e->kind == REF_DENSE) {
            e->n = e->count;
            e->value = malloc(e->n * sizeof(float));
            for (size_t k = 0; k < e->n; k++)
                e->value[k] = take_f32(&r);
        } else if (e->kind == REF_SAMPLED) {
            e->n = (size_t)take_le(&r, 4);
            if (e->n > e->count) {
                ok = 0;
                break;
            }
            e->index = malloc(e->n * sizeof *e->index);
            e->value = malloc(e->n * sizeof(float));
            for (size_t k = 0; k < e->n; k++) {
                e->index[k] = (uint32_t)take_le(&r, 4);
                ok &= e->index[k] < e->count;
            }
            for (size_t k = 0; k < e->n; k++)
                e->value[k] = take_f32(&r);
        } else if (e->kind == REF_GENERATED) {
            /* value = (cd_rand_uniform(seed, counter, i) - 0.5) * scale, scale a power
             * of two: exact in float, the same bits as the generating script */
            uint64_t seed = take_le(&r, 8), counter = take_le(&r, 8);
            float scale = take_f32(&r);
            double checksum = take_f64(&r);
            e->n = e->count;
            e->value = malloc(e->n * sizeof(float));
            double sum = 0;
            for (size_t k = 0; k < e->n; k++) {
                e->value[k] = (cd_rand_uniform(seed, counter, k) - 0.5f) * scale;
                sum += e->value[k];
            }
            CHECK(fabs(sum - checksum) <= 1e-9 * fmax(1.0, fabs(checksum)),
                  "%s: %s: regenerated values sum to %.17g, the file says %.17g", path, e->name,
                  sum, checksum);
        } else {
            ok = 0;
        }
        ok &= r.ok;
    }
    ok = ok && r.p == r.end;
    free(buf);
    CHECK(ok, "%s: not a valid reference file (see tests/ref/README.md); rerun "
          "tests/ref/make_refs.py", path);
    if (!ok) {
        ref_free(f);
        return CD_ERR;
    }
    return CD_OK;
}

static ref_entry *ref_get(ref_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name))
            return &f->e[i];
    return NULL;
}

/* ---- comparing ---------------------------------------------------------------------- */

static int same_shape(const ref_entry *e, int ndim, const int *dims, size_t count)
{
    if (e->count != count)
        return 0;
    /* a scalar (loss) may be 0-D on one side and 1-D of 1 on the other */
    if (count == 1)
        return 1;
    if (e->ndim != ndim)
        return 0;
    for (int d = 0; d < ndim; d++)
        if (e->dims[d] != dims[d])
            return 0;
    return 1;
}

static double max_abs(const ref_entry *e)
{
    double m = 0;
    for (size_t k = 0; k < e->n; k++)
        m = fmax(m, fabs(e->value[k]));
    return m;
}

/* The largest magnitude among the entries whose names start with prefix. */
static double max_abs_of(const ref_file *f, const char *prefix)
{
    double m = 0;
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->e[i].name, prefix, strlen(prefix)))
            m = fmax(m, max_abs(&f->e[i]));
    return m;
}

/* The parameter `name` of net for entry e of case `what`, or NULL (a failed check) when
 * the net has none of e's size. */
static cd_param *entry_param(const char *what, cd_net *net, const ref_entry *e, const char *name)
{
    cd_param *p = NULL;
    for (int j = 0; j < net->nparams; j++)
        if (!strcmp(net->params[j]->name, name))
            p = net->params[j];
    CHECK(p && p->count == e->count, "%s: %s: no parameter of that size", what, e->name);
    return p && p->count == e->count ? p : NULL;
}

/* Compare device floats (count of them) with the entry: the largest error over the
 * largest reference magnitude (at least `floor`). Returns that ratio. */
static double compare(const char *file, const ref_entry *e, const float *dev, size_t count,
                      double floor)
{
    float *host = malloc(count * sizeof(float));
    g_be->iface->download(g_be, host, dev, count * sizeof(float));
    double maxref = fmax(max_abs(e), floor), maxerr = 0;
    size_t worst = 0;
    for (size_t k = 0; k < e->n; k++) {
        size_t i = e->index ? e->index[k] : k;
        double err = fabs((double)host[i] - e->value[k]);
        if (!(err <= maxerr)) { /* NaN counts as the worst */
            maxerr = isnan(err) ? INFINITY : err;
            worst = k;
        }
    }
    double rel = maxerr / fmax(maxref, 1e-30);
    size_t wi = e->index ? e->index[worst] : worst;
    CHECK(rel <= REF_TOL, "%s: %s: element %zu is %.8g, PyTorch says %.8g (error %.3g of the "
          "largest magnitude %.4g; tolerance %g)", file, e->name, wi, (double)host[wi],
          (double)e->value[worst], rel, maxref, REF_TOL);
    free(host);
    return rel;
}

typedef struct ref_case {
    const char *name;
    const char *net_path; /* relative to the source tree */
    const char *ref_path;
    cd_net_opts opts;
} ref_case;

static void run_case(const ref_case *c)
{
    char err[1024], s[64];
    const char *refpath = cd_test_source_path(c->ref_path);
    ref_file f;
    if (ref_load(refpath, &f) != CD_OK)
        return;
    cd_net *net = cd_net_load(cd_test_source_path(c->net_path), &c->opts, err, sizeof err);
    CHECK(net != NULL, "%s: %s", c->name, err);
    if (!net || cd_net_alloc(net, g_be, NULL, err, sizeof err) != CD_OK) {
        CHECK(net == NULL, "%s: %s", c->name, err);
        cd_net_free(net);
        ref_free(&f);
        return;
    }

    /* inputs and parameters */
    for (int i = 0; i < f.n; i++) {
        ref_entry *e = &f.e[i];
        int is_input = !strncmp(e->name, "input/", 6), is_param = !strncmp(e->name, "param/", 6);
        if (!is_input && !is_param)
            continue;
        e->used = 1;
        if (is_input) {
            cd_blob *b = cd_net_blob(net, e->name + 6);
            CHECK(b && same_shape(e, b->ndim, b->dims, b->count), "%s: %s: no blob of that shape (%s)",
                  c->name, e->name, b ? cd_blob_shape_str(b, s, sizeof s) : "none");
            if (b && b->count == e->count && e->n == e->count)
                g_be->iface->upload(g_be, b->data, e->value, e->count * sizeof(float));
        } else {
            cd_param *p = NULL;
            for (int j = 0; j < net->nparams; j++)
                if (!strcmp(net->params[j]->name, e->name + 6))
                    p = net->params[j];
            CHECK(p && same_shape(e, p->ndim, p->dims, p->count), "%s: %s: no parameter of that shape",
                  c->name, e->name);
            if (p && p->count == e->count && e->n == e->count)
                g_be->iface->upload(g_be, p->data, e->value, e->count * sizeof(float));
        }
    }
    /* every learnable parameter must come from the file, with its gradient */
    for (int j = 0; j < net->nparams; j++) {
        cd_param *p = net->params[j];
        char name[256];
        if (!p->learnable)
            continue;
        snprintf(name, sizeof name, "param/%s", p->name);
        CHECK(ref_get(&f, name) != NULL, "%s: the file has no %s", c->name, name);
        snprintf(name, sizeof name, "grad/param/%s", p->name);
        CHECK(ref_get(&f, name) != NULL, "%s: the file has no %s", c->name, name);
    }

    double worst_fwd = 0, worst_bwd = 0;
    double fwd_floor = REF_FLOOR * max_abs_of(&f, "blob/"), bwd_floor = REF_FLOOR * max_abs_of(&f, "grad/");
    float loss = cd_net_forward(net);
    for (int i = 0; i < f.n; i++) {
        ref_entry *e = &f.e[i];
        if (!strncmp(e->name, "blob/", 5)) {
            e->used = 1;
            cd_blob *b = cd_net_blob(net, e->name + 5);
            CHECK(b && same_shape(e, b->ndim, b->dims, b->count), "%s: %s: the net's blob is %s",
                  c->name, e->name, b ? cd_blob_shape_str(b, s, sizeof s) : "missing");
            if (b && b->count == e->count)
                worst_fwd = fmax(worst_fwd, compare(c->name, e, b->data, b->count, fwd_floor));
        } else if (!strcmp(e->name, "loss")) {
            e->used = 1;
            double rel = fabs(loss - e->value[0]) / fabs(e->value[0]);
            CHECK(rel <= REF_TOL, "%s: loss %.8g, PyTorch says %.8g", c->name, loss, e->value[0]);
            worst_fwd = fmax(worst_fwd, rel);
        } else if (!strncmp(e->name, "param_after/", 12)) {
            e->used = 1;
            cd_param *p = entry_param(c->name, net, e, e->name + 12);
            if (p)
                worst_fwd = fmax(worst_fwd, compare(c->name, e, p->data, p->count, fwd_floor));
        }
    }

    cd_net_zero_grad(net);
    cd_net_backward(net);
    for (int i = 0; i < f.n; i++) {
        ref_entry *e = &f.e[i];
        if (!strncmp(e->name, "grad/param/", 11)) {
            e->used = 1;
            cd_param *p = entry_param(c->name, net, e, e->name + 11);
            if (p)
                worst_bwd = fmax(worst_bwd, compare(c->name, e, p->diff, p->count, bwd_floor));
        } else if (!strncmp(e->name, "grad/input/", 11)) {
            e->used = 1;
            cd_blob *b = cd_net_blob(net, e->name + 11);
            CHECK(b && b->count == e->count, "%s: %s: no blob of that size", c->name, e->name);
            if (b && b->count == e->count)
                worst_bwd = fmax(worst_bwd, compare(c->name, e, b->diff, b->count, bwd_floor));
        }
    }
    for (int i = 0; i < f.n; i++)
        CHECK(f.e[i].used, "%s: entry %s of the file is not understood", c->name, f.e[i].name);
    printf("%-10s loss %.6f; worst error of the largest magnitude: forward %.2g, gradients %.2g "
           "(tolerance %g)\n", c->name, loss, worst_fwd, worst_bwd, REF_TOL);
    cd_net_free(net);
    ref_free(&f);
}

int main(void)
{
    static const ref_case cases[] = {
        {"lenet", "models/lenet.prototxt", "tests/data/ref/lenet.ref",
         {.stage = "train", .batch = 4, .input_c = 1, .input_h = 28, .input_w = 28,
          .num_classes = 10, .force_backward = 1, .seed = 1}},
        {"smallnet", "tests/data/ref/smallnet.prototxt", "tests/data/ref/smallnet.ref",
         {.stage = "train", .force_backward = 1, .seed = 1}},
    };
    cd_test_init("test_torch_ref");
    g_be = cd_backend_cpu_new(0);
    CHECK(g_be != NULL, "no CPU backend");
    if (!g_be)
        return cd_test_finish();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    cd_backend_free(g_be);
    return cd_test_finish();
}
