/* Writing prototxt: a parsed tree back to text, the deploy network of a built net
 * (what the model download calls deploy.prototxt) and Caffe's SolverParameter for a
 * train.json (solver.prototxt). See infer.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/infer.h"
#include "cdigits/util.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1)
            cap *= 2;
        b->p = cd_xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        sb_put(b, small, (size_t)n);
        return;
    }
    char *big = cd_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)n);
    free(big);
}

static void indent(sbuf *b, int depth)
{
    for (int i = 0; i < depth; i++)
        sb_put(b, "  ", 2);
}

/* A string value in double quotes with C escapes (what the parser decodes). */
static void put_string(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                sb_printf(b, "\\%03o", *p);
            else
                sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void write_field(sbuf *b, const cd_pt_node *n, int depth);

static void write_children(sbuf *b, const cd_pt_node *msg, int depth)
{
    for (const cd_pt_node *c = msg->child; c; c = c->next)
        write_field(b, c, depth);
}

static void write_field(sbuf *b, const cd_pt_node *n, int depth)
{
    indent(b, depth);
    if (n->kind == CD_PT_MESSAGE) {
        sb_printf(b, "%s {\n", n->name);
        write_children(b, n, depth + 1);
        indent(b, depth);
        sb_put(b, "}\n", 2);
        return;
    }
    sb_printf(b, "%s: ", n->name);
    if (n->kind == CD_PT_STRING)
        put_string(b, n->text ? n->text : "");
    else
        sb_printf(b, "%s", n->text ? n->text : "");
    sb_put(b, "\n", 1);
}

char *cd_pt_write(const cd_pt_node *msg)
{
    sbuf b = {0};
    sb_put(&b, "", 0);
    if (msg)
        write_children(&b, msg, 0);
    return b.p;
}

/* An Input layer giving the tops of an input or data layer their built shapes. */
static void write_input(sbuf *b, const cd_layer *l)
{
    sb_put(b, "layer {\n  name: ", 16);
    put_string(b, l->ntop == 1 ? l->top[0]->name : l->name);
    sb_put(b, "\n  type: \"Input\"\n", 17);
    for (int t = 0; t < l->ntop; t++) {
        sb_put(b, "  top: ", 7);
        put_string(b, l->top[t]->name);
        sb_put(b, "\n", 1);
    }
    sb_put(b, "  input_param {\n", 16);
    for (int t = 0; t < l->ntop; t++) {
        const cd_blob *top = l->top[t];
        sb_put(b, "    shape {", 11);
        for (int d = 0; d < top->ndim; d++)
            sb_printf(b, " dim: %d", d == 0 ? 1 : top->dims[d]);
        sb_put(b, " }\n", 3);
    }
    sb_put(b, "  }\n}\n", 6);
}

/* One layer of the file without its stage rules; num_output written where the file
 * leaves it to the number of classes. */
static void write_layer(sbuf *b, const cd_layer *l)
{
    int is_ip = !strcmp(l->type->name, "InnerProduct");
    int outputs = l->ntop > 0 && l->top[0]->dims[0] > 0 ? (int)(l->top[0]->count / (size_t)l->top[0]->dims[0]) : 0;
    int ip_param_seen = 0;
    sb_put(b, "layer {\n", 8);
    for (const cd_pt_node *c = l->def->child; c; c = c->next) {
        if (!strcmp(c->name, "include") || !strcmp(c->name, "exclude"))
            continue;
        if (is_ip && !strcmp(c->name, "inner_product_param")) {
            ip_param_seen = 1;
            if (!cd_pt_get(c, "num_output")) {
                sb_put(b, "  inner_product_param {\n", 24);
                sb_printf(b, "    num_output: %d\n", outputs);
                write_children(b, c, 2);
                sb_put(b, "  }\n", 4);
                continue;
            }
        }
        write_field(b, c, 1);
    }
    if (is_ip && !ip_param_seen)
        sb_printf(b, "  inner_product_param {\n    num_output: %d\n  }\n", outputs);
    sb_put(b, "}\n", 2);
}

char *cd_net_write_deploy(const cd_net *net)
{
    sbuf b = {0};
    sb_put(&b, "", 0);
    if (net->name) {
        sb_put(&b, "name: ", 6);
        put_string(&b, net->name);
        sb_put(&b, "\n", 1);
    }
    for (int i = 0; i < net->nlayers; i++) {
        const cd_layer *l = net->layers[i];
        if (!strcmp(l->type->name, "Split"))
            continue;
        if (!l->def || (l->type->flags & CD_LAYER_DATA))
            write_input(&b, l);
        else
            write_layer(&b, l);
    }
    return b.p;
}

/* Caffe's names of the solver types. */
static const char *const caffe_solver[CD_SOLVER_COUNT] = {
    [CD_SOLVER_SGD] = "SGD",         [CD_SOLVER_NESTEROV] = "Nesterov", [CD_SOLVER_ADAGRAD] = "AdaGrad",
    [CD_SOLVER_RMSPROP] = "RMSProp", [CD_SOLVER_ADADELTA] = "AdaDelta", [CD_SOLVER_ADAM] = "Adam",
};

/* Percent of the training to iterations, as DIGITS converts them for Caffe. */
static long pct_iter(double pct, long max_iter) { return (long)ceil(pct * (double)max_iter / 100.0); }

char *cd_solver_write(const cd_train_config *tc, double iters_per_epoch, const char *net_file)
{
    sbuf b = {0};
    const cd_solver_opts *so = &tc->solver;
    const cd_lr_policy *lr = &so->lr;
    long ipe = iters_per_epoch > 0 ? lround(iters_per_epoch) : 0;
    long max_iter = ipe > 0 ? (long)ceil((double)ipe * tc->epochs) : 0;
    if (max_iter < 1)
        max_iter = 1;
    if (tc->max_iter_override > 0 && tc->max_iter_override < max_iter)
        max_iter = tc->max_iter_override;
    double scale = (double)max_iter / 100.0;
    sb_printf(&b, "# Caffe's SolverParameter for this model's training (%s%s)\n",
              ipe > 0 ? "iterations from the snapshot's epoch" : "iterations per epoch unknown: 1",
              ipe > 0 ? "" : " iteration assumed");
    sb_put(&b, "net: ", 5);
    put_string(&b, net_file);
    int st = so->type >= 0 && so->type < CD_SOLVER_COUNT ? so->type : CD_SOLVER_SGD;
    sb_printf(&b, "\ntype: \"%s\"\nbase_lr: %.9g\n", caffe_solver[st], lr->base_lr);
    sb_printf(&b, "lr_policy: \"%s\"\n", cd_lr_type_name(lr->type));
    switch (lr->type) {
    case CD_LR_STEP:
        sb_printf(&b, "gamma: %.9g\nstepsize: %ld\n", lr->gamma, pct_iter(lr->step_pct, max_iter) > 0
                                                                      ? pct_iter(lr->step_pct, max_iter) : 1);
        break;
    case CD_LR_MULTISTEP:
        sb_printf(&b, "gamma: %.9g\n", lr->gamma);
        for (int i = 0; i < lr->nsteps; i++)
            sb_printf(&b, "stepvalue: %ld\n", pct_iter(lr->steps_pct[i], max_iter));
        break;
    case CD_LR_EXP: sb_printf(&b, "gamma: %.9g\n", pow(lr->gamma, 1.0 / scale)); break;
    case CD_LR_INV: sb_printf(&b, "gamma: %.9g\npower: %.9g\n", lr->gamma / scale, lr->power); break;
    case CD_LR_POLY: sb_printf(&b, "power: %.9g\n", lr->power); break;
    case CD_LR_SIGMOID:
        sb_printf(&b, "gamma: %.9g\nstepsize: %ld\n", -lr->gamma / scale, pct_iter(lr->step_pct, max_iter));
        break;
    default: break;
    }
    if (st != CD_SOLVER_ADAGRAD && st != CD_SOLVER_RMSPROP)
        sb_printf(&b, "momentum: %.9g\n", so->momentum);
    sb_printf(&b, "weight_decay: %.9g\n", so->weight_decay);
    if (st == CD_SOLVER_RMSPROP)
        sb_printf(&b, "rms_decay: %.9g\n", so->rms_decay);
    if (st == CD_SOLVER_ADAM)
        sb_printf(&b, "momentum2: %.9g\n", so->momentum2);
    if (st == CD_SOLVER_ADAM || st == CD_SOLVER_ADADELTA || st == CD_SOLVER_ADAGRAD || st == CD_SOLVER_RMSPROP)
        sb_printf(&b, "delta: %.9g\n", so->delta);
    sb_printf(&b, "max_iter: %ld\niter_size: %d\n", max_iter, tc->iter_size > 0 ? tc->iter_size : 1);
    double snap = tc->snapshot_interval * (double)(ipe > 0 ? ipe : 1);
    sb_printf(&b, "snapshot: %ld\nsnapshot_prefix: \"snapshot\"\n",
              tc->snapshot_interval <= 0 ? max_iter : (snap <= 1 ? 1 : (long)snap));
    long display = ipe / 8 > 0 ? ipe / 8 : 1;
    sb_printf(&b, "display: %ld\n", display);
    if (tc->has_seed)
        sb_printf(&b, "random_seed: %llu\n", (unsigned long long)tc->seed);
    sb_printf(&b, "solver_mode: %s\n", tc->backend == 1 ? "CPU" : "GPU");
    return b.p;
}
