/* Learning-rate policies as DIGITS defines them: every step or rate parameter is in
 * percent of the whole training, converted to iterations the way DIGITS converts it
 * for Caffe (scale = max_iter / 100), and the rate computed as Caffe computes it. */
#include <math.h>
#include <string.h>

#include "cdigits/lr_policy.h"

/* pct percent of training at scale iterations per percent, as an iteration; a value no
 * iteration reaches (beyond 1e15, or NaN) saturates rather than overflowing a long */
static long pct_to_iter(double pct, double scale)
{
    double it = ceil(pct * scale);
    return it >= -1e15 && it <= 1e15 ? (long)it : it < 0 ? -1000000000000000L : 1000000000000000L;
}

static double iter_scale(long max_iter) { return (double)(max_iter > 0 ? max_iter : 1) / 100.0; }

long cd_lr_pct_iter(double pct, long max_iter) { return pct_to_iter(pct, iter_scale(max_iter)); }

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

/* One row per policy: its name, its rate, the form's field for each parameter it reads
 * (DIGITS's names) and the defaults DIGITS's form gives them. Parameters a policy does
 * not read keep the first row's values (gamma 0.1, power 1, no steps). */
typedef struct lr_policy_def {
    const char *name;
    lr_fn fn;
    const char *field[CD_LR_ARG_COUNT]; /* indexed by enum cd_lr_arg; NULL: not read */
    double step_pct, gamma, power;
    int nsteps;
    double steps_pct[2];
} lr_policy_def;

static const lr_policy_def lr_defs[CD_LR_COUNT] = {
    [CD_LR_FIXED] = {.name = "fixed", .fn = lr_fixed, .gamma = 0.1, .power = 1},
    [CD_LR_STEP] = {.name = "step", .fn = lr_step,
                    .field = {[CD_LR_ARG_STEP] = "lr_step_size", [CD_LR_ARG_GAMMA] = "lr_step_gamma"},
                    .step_pct = CD_LR_DEFAULT_STEP_SIZE, .gamma = CD_LR_DEFAULT_STEP_GAMMA, .power = 1},
    [CD_LR_MULTISTEP] = {.name = "multistep", .fn = lr_multistep,
                         .field = {[CD_LR_ARG_STEPS] = "lr_multistep_values",
                                   [CD_LR_ARG_GAMMA] = "lr_multistep_gamma"},
                         .gamma = CD_LR_DEFAULT_MULTISTEP_GAMMA, .power = 1, .nsteps = 2,
                         .steps_pct = {CD_LR_DEFAULT_MULTISTEP_A, CD_LR_DEFAULT_MULTISTEP_B}},
    [CD_LR_EXP] = {.name = "exp", .fn = lr_exp, .field = {[CD_LR_ARG_GAMMA] = "lr_exp_gamma"},
                   .gamma = CD_LR_DEFAULT_EXP_GAMMA, .power = 1},
    [CD_LR_INV] = {.name = "inv", .fn = lr_inv,
                   .field = {[CD_LR_ARG_GAMMA] = "lr_inv_gamma", [CD_LR_ARG_POWER] = "lr_inv_power"},
                   .gamma = CD_LR_DEFAULT_INV_GAMMA, .power = CD_LR_DEFAULT_INV_POWER},
    [CD_LR_POLY] = {.name = "poly", .fn = lr_poly, .field = {[CD_LR_ARG_POWER] = "lr_poly_power"},
                    .gamma = 0.1, .power = CD_LR_DEFAULT_POLY_POWER},
    [CD_LR_SIGMOID] = {.name = "sigmoid", .fn = lr_sigmoid,
                       .field = {[CD_LR_ARG_STEP] = "lr_sigmoid_step", [CD_LR_ARG_GAMMA] = "lr_sigmoid_gamma"},
                       .step_pct = CD_LR_DEFAULT_SIGMOID_STEP, .gamma = CD_LR_DEFAULT_SIGMOID_GAMMA, .power = 1},
};

int cd_lr_type_parse(const char *name)
{
    for (int i = 0; i < CD_LR_COUNT; i++)
        if (!strcmp(name, lr_defs[i].name))
            return i;
    return -1;
}

const char *cd_lr_type_name(int type)
{
    return type >= 0 && type < CD_LR_COUNT ? lr_defs[type].name : "?";
}

const char *cd_lr_type_list(void) { return "fixed, step, multistep, exp, inv, poly, sigmoid"; }

const char *cd_lr_field(int type, int arg)
{
    if (type < 0 || type >= CD_LR_COUNT || arg < 0 || arg >= CD_LR_ARG_COUNT)
        return NULL;
    return lr_defs[type].field[arg];
}

void cd_lr_policy_defaults(cd_lr_policy *p, int type)
{
    const lr_policy_def *d = &lr_defs[type >= 0 && type < CD_LR_COUNT ? type : CD_LR_FIXED];
    p->type = type;
    p->step_pct = d->step_pct;
    p->gamma = d->gamma;
    p->power = d->power;
    p->nsteps = d->nsteps;
    for (int i = 0; i < d->nsteps; i++)
        p->steps_pct[i] = d->steps_pct[i];
}

double cd_lr_at(const cd_lr_policy *p, long iter)
{
    double scale = iter_scale(p->max_iter);
    if (p->type < 0 || p->type >= CD_LR_COUNT)
        return p->base_lr;
    return lr_defs[p->type].fn(p, iter, scale);
}

void cd_lr_preview(const cd_lr_policy *p, double *y, int n)
{
    cd_lr_policy run = *p;
    run.max_iter = 100;
    for (int i = 0; i < n; i++)
        y[i] = cd_lr_at(&run, i);
}
