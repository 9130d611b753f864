/* Writing prototxt: a parsed tree back to text, the deploy network of a built net
 * (what the model download calls deploy.prototxt) and Caffe's SolverParameter for a
 * train.json (solver.prototxt). See infer.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/infer.h"
#include "cdigits/lr_policy.h"
#include "cdigits/util.h"

static void indent(cd_buf *b, int depth)
{
    for (int i = 0; i < depth; i++)
        cd_buf_put(b, "  ", 2);
}

/* A string value in double quotes with C escapes (what the parser decodes). */
static void put_string(cd_buf *b, const char *s)
{
    cd_buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': cd_buf_put(b, "\\\"", 2); break;
        case '\\': cd_buf_put(b, "\\\\", 2); break;
        case '\n': cd_buf_put(b, "\\n", 2); break;
        case '\t': cd_buf_put(b, "\\t", 2); break;
        case '\r': cd_buf_put(b, "\\r", 2); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                cd_buf_printf(b, "\\%03o", *p);
            else
                cd_buf_put(b, (const char *)p, 1);
        }
    }
    cd_buf_put(b, "\"", 1);
}

static void write_field(cd_buf *b, const cd_pt_node *n, int depth);

static void write_children(cd_buf *b, const cd_pt_node *msg, int depth)
{
    for (const cd_pt_node *c = msg->child; c; c = c->next)
        write_field(b, c, depth);
}

static void write_field(cd_buf *b, const cd_pt_node *n, int depth)
{
    indent(b, depth);
    if (n->kind == CD_PT_MESSAGE) {
        cd_buf_printf(b, "%s {\n", n->name);
        write_children(b, n, depth + 1);
        indent(b, depth);
        cd_buf_put(b, "}\n", 2);
        return;
    }
    cd_buf_printf(b, "%s: ", n->name);
    if (n->kind == CD_PT_STRING)
        put_string(b, n->text ? n->text : "");
    else
        cd_buf_printf(b, "%s", n->text ? n->text : "");
    cd_buf_put(b, "\n", 1);
}

char *cd_pt_write(const cd_pt_node *msg)
{
    cd_buf b = {0};
    cd_buf_put(&b, "", 0);
    if (msg)
        write_children(&b, msg, 0);
    return b.p;
}

/* An Input layer giving the tops of an input or data layer their built shapes. */
static void write_input(cd_buf *b, const cd_layer *l)
{
    cd_buf_put(b, "layer {\n  name: ", 16);
    put_string(b, l->ntop == 1 ? l->top[0]->name : l->name);
    cd_buf_put(b, "\n  type: \"Input\"\n", 17);
    for (int t = 0; t < l->ntop; t++) {
        cd_buf_put(b, "  top: ", 7);
        put_string(b, l->top[t]->name);
        cd_buf_put(b, "\n", 1);
    }
    cd_buf_put(b, "  input_param {\n", 16);
    for (int t = 0; t < l->ntop; t++) {
        const cd_blob *top = l->top[t];
        cd_buf_put(b, "    shape {", 11);
        for (int d = 0; d < top->ndim; d++)
            cd_buf_printf(b, " dim: %d", d == 0 ? 1 : top->dims[d]);
        cd_buf_put(b, " }\n", 3);
    }
    cd_buf_put(b, "  }\n}\n", 6);
}

/* One layer of the file without its stage rules; num_output written where the file
 * leaves it to the number of classes. */
static void write_layer(cd_buf *b, const cd_layer *l)
{
    int is_ip = !strcmp(l->type->name, "InnerProduct");
    int outputs = l->ntop > 0 && l->top[0]->dims[0] > 0 ? (int)(l->top[0]->count / (size_t)l->top[0]->dims[0]) : 0;
    int ip_param_seen = 0;
    cd_buf_put(b, "layer {\n", 8);
    for (const cd_pt_node *c = l->def->child; c; c = c->next) {
        if (!strcmp(c->name, "include") || !strcmp(c->name, "exclude"))
            continue;
        if (is_ip && !strcmp(c->name, "inner_product_param")) {
            ip_param_seen = 1;
            if (!cd_pt_get(c, "num_output")) {
                cd_buf_put(b, "  inner_product_param {\n", 24);
                cd_buf_printf(b, "    num_output: %d\n", outputs);
                write_children(b, c, 2);
                cd_buf_put(b, "  }\n", 4);
                continue;
            }
        }
        write_field(b, c, 1);
    }
    if (is_ip && !ip_param_seen)
        cd_buf_printf(b, "  inner_product_param {\n    num_output: %d\n  }\n", outputs);
    cd_buf_put(b, "}\n", 2);
}

char *cd_net_write_deploy(const cd_net *net)
{
    cd_buf b = {0};
    cd_buf_put(&b, "", 0);
    if (net->name) {
        cd_buf_put(&b, "name: ", 6);
        put_string(&b, net->name);
        cd_buf_put(&b, "\n", 1);
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

char *cd_solver_write(const cd_train_config *tc, double iters_per_epoch, const char *net_file)
{
    cd_buf b = {0};
    const cd_solver_opts *so = &tc->solver;
    const cd_lr_policy *lr = &so->lr;
    long ipe = iters_per_epoch > 0 ? lround(iters_per_epoch) : 0;
    long max_iter = ipe > 0 ? (long)ceil((double)ipe * tc->epochs) : 0;
    if (max_iter < 1)
        max_iter = 1;
    if (tc->max_iter_override > 0 && tc->max_iter_override < max_iter)
        max_iter = tc->max_iter_override;
    double scale = (double)max_iter / 100.0;
    cd_buf_printf(&b, "# Caffe's SolverParameter for this model's training (%s%s)\n",
              ipe > 0 ? "iterations from the snapshot's epoch" : "iterations per epoch unknown: 1",
              ipe > 0 ? "" : " iteration assumed");
    cd_buf_put(&b, "net: ", 5);
    put_string(&b, net_file);
    int st = so->type >= 0 && so->type < CD_SOLVER_COUNT ? so->type : CD_SOLVER_SGD;
    cd_buf_printf(&b, "\ntype: \"%s\"\nbase_lr: %.9g\n", caffe_solver[st], lr->base_lr);
    cd_buf_printf(&b, "lr_policy: \"%s\"\n", cd_lr_type_name(lr->type));
    switch (lr->type) {
    case CD_LR_STEP:
        cd_buf_printf(&b, "gamma: %.9g\nstepsize: %ld\n", lr->gamma, cd_lr_pct_iter(lr->step_pct, max_iter) > 0
                                                                      ? cd_lr_pct_iter(lr->step_pct, max_iter) : 1);
        break;
    case CD_LR_MULTISTEP:
        cd_buf_printf(&b, "gamma: %.9g\n", lr->gamma);
        for (int i = 0; i < lr->nsteps; i++)
            cd_buf_printf(&b, "stepvalue: %ld\n", cd_lr_pct_iter(lr->steps_pct[i], max_iter));
        break;
    case CD_LR_EXP: cd_buf_printf(&b, "gamma: %.9g\n", pow(lr->gamma, 1.0 / scale)); break;
    case CD_LR_INV: cd_buf_printf(&b, "gamma: %.9g\npower: %.9g\n", lr->gamma / scale, lr->power); break;
    case CD_LR_POLY: cd_buf_printf(&b, "power: %.9g\n", lr->power); break;
    case CD_LR_SIGMOID:
        cd_buf_printf(&b, "gamma: %.9g\nstepsize: %ld\n", -lr->gamma / scale, cd_lr_pct_iter(lr->step_pct, max_iter));
        break;
    default: break;
    }
    if (st != CD_SOLVER_ADAGRAD && st != CD_SOLVER_RMSPROP)
        cd_buf_printf(&b, "momentum: %.9g\n", so->momentum);
    cd_buf_printf(&b, "weight_decay: %.9g\n", so->weight_decay);
    if (st == CD_SOLVER_RMSPROP)
        cd_buf_printf(&b, "rms_decay: %.9g\n", so->rms_decay);
    if (st == CD_SOLVER_ADAM)
        cd_buf_printf(&b, "momentum2: %.9g\n", so->momentum2);
    if (st == CD_SOLVER_ADAM || st == CD_SOLVER_ADADELTA || st == CD_SOLVER_ADAGRAD || st == CD_SOLVER_RMSPROP)
        cd_buf_printf(&b, "delta: %.9g\n", so->delta);
    cd_buf_printf(&b, "max_iter: %ld\niter_size: %d\n", max_iter, tc->iter_size > 0 ? tc->iter_size : 1);
    double snap = tc->snapshot_interval * (double)(ipe > 0 ? ipe : 1);
    cd_buf_printf(&b, "snapshot: %ld\nsnapshot_prefix: \"snapshot\"\n",
              tc->snapshot_interval <= 0 ? max_iter : (snap <= 1 ? 1 : (long)snap));
    long display = ipe / 8 > 0 ? ipe / 8 : 1;
    cd_buf_printf(&b, "display: %ld\n", display);
    if (tc->has_seed)
        cd_buf_printf(&b, "random_seed: %llu\n", (unsigned long long)tc->seed);
    cd_buf_printf(&b, "solver_mode: %s\n", tc->backend == 1 ? "CPU" : "GPU");
    return b.p;
}
