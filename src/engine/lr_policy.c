/* Learning-rate policies as DIGITS defines them: every step or rate parameter is in
 * percent of the whole training, converted to iterations the way DIGITS converts it
 * for Caffe (scale = max_iter / 100), and the rate computed as Caffe computes it. */
#include <math.h>
#include <string.h>

#include "cdigits/train.h"
#include "cdigits/util.h"

static const char *const lr_names[CD_LR_COUNT] = {
    [CD_LR_FIXED] = "fixed", [CD_LR_STEP] = "step",   [CD_LR_MULTISTEP] = "multistep",
    [CD_LR_EXP] = "exp",     [CD_LR_INV] = "inv",     [CD_LR_POLY] = "poly",
    [CD_LR_SIGMOID] = "sigmoid",
};

int cd_lr_type_parse(const char *name)
{
    for (int i = 0; i < CD_LR_COUNT; i++)
        if (!strcmp(name, lr_names[i]))
            return i;
    return -1;
}

const char *cd_lr_type_name(int type)
{
    return type >= 0 && type < CD_LR_COUNT ? lr_names[type] : "?";
}

const char *cd_lr_type_list(void) { return "fixed, step, multistep, exp, inv, poly, sigmoid"; }

/* DIGITS's form defaults (lr_step_size 33, lr_step_gamma 0.1, lr_multistep_values
 * "50,85", lr_multistep_gamma 0.5, lr_exp_gamma 0.95, lr_inv_gamma 0.1, lr_inv_power
 * 0.5, lr_poly_power 3, lr_sigmoid_step 50, lr_sigmoid_gamma 0.1) */
void cd_lr_policy_defaults(cd_lr_policy *p, int type)
{
    p->type = type;
    p->nsteps = 0;
    p->power = 1.0;
    p->gamma = 0.1;
    switch (type) {
    case CD_LR_STEP: p->step_pct = 33; p->gamma = 0.1; break;
    case CD_LR_MULTISTEP:
        p->steps_pct[0] = 50;
        p->steps_pct[1] = 85;
        p->nsteps = 2;
        p->gamma = 0.5;
        break;
    case CD_LR_EXP: p->gamma = 0.95; break;
    case CD_LR_INV: p->gamma = 0.1; p->power = 0.5; break;
    case CD_LR_POLY: p->power = 3; break;
    case CD_LR_SIGMOID: p->step_pct = 50; p->gamma = 0.1; break;
    default: break;
    }
}

static long pct_to_iter(double pct, double scale) { return (long)ceil(pct * scale); }

typedef double (*lr_fn)(const cd_lr_policy *p, long iter, double scale);

static double lr_fixed(const cd_lr_policy *p, long iter, double scale) { return p->base_lr; }

/* Caffe: base_lr * gamma ^ floor(iter / stepsize) */
static double lr_step(const cd_lr_policy *p, long iter, double scale)
{
    long stepsize = pct_to_iter(p->step_pct, scale);
    if (stepsize < 1)
        stepsize = 1;
    return p->base_lr * pow(p->gamma, (double)(iter / stepsize));
}

/* Caffe: base_lr * gamma ^ (number of stepvalues <= iter) */
static double lr_multistep(const cd_lr_policy *p, long iter, double scale)
{
    int passed = 0;
    for (int i = 0; i < p->nsteps; i++)
        if (iter >= pct_to_iter(p->steps_pct[i], scale))
            passed++;
    return p->base_lr * pow(p->gamma, passed);
}

/* Caffe: base_lr * g^iter with g = gamma^(1/scale), i.e. gamma per percent */
static double lr_exp(const cd_lr_policy *p, long iter, double scale)
{
    return p->base_lr * pow(pow(p->gamma, 1.0 / scale), (double)iter);
}

/* Caffe: base_lr * (1 + g*iter)^-power with g = gamma/scale */
static double lr_inv(const cd_lr_policy *p, long iter, double scale)
{
    return p->base_lr * pow(1.0 + p->gamma / scale * (double)iter, -p->power);
}

/* Caffe: base_lr * (1 - iter/max_iter)^power */
static double lr_poly(const cd_lr_policy *p, long iter, double scale)
{
    double f = 1.0 - (double)iter / (double)(p->max_iter > 0 ? p->max_iter : 1);
    return p->base_lr * pow(f > 0 ? f : 0.0, p->power);
}

/* Caffe: base_lr / (1 + exp(-g*(iter - stepsize))) with g = -gamma/scale */
static double lr_sigmoid(const cd_lr_policy *p, long iter, double scale)
{
    double g = -p->gamma / scale;
    long stepsize = pct_to_iter(p->step_pct, scale);
    return p->base_lr / (1.0 + exp(-g * (double)(iter - stepsize)));
}

static const lr_fn lr_fns[CD_LR_COUNT] = {
    [CD_LR_FIXED] = lr_fixed, [CD_LR_STEP] = lr_step, [CD_LR_MULTISTEP] = lr_multistep,
    [CD_LR_EXP] = lr_exp,     [CD_LR_INV] = lr_inv,   [CD_LR_POLY] = lr_poly,
    [CD_LR_SIGMOID] = lr_sigmoid,
};

double cd_lr_at(const cd_lr_policy *p, long iter)
{
    double scale = (double)(p->max_iter > 0 ? p->max_iter : 1) / 100.0;
    if (p->type < 0 || p->type >= CD_LR_COUNT)
        return p->base_lr;
    return lr_fns[p->type](p, iter, scale);
}
