/*
 * Learning-rate policies as DIGITS defines them (steps in percent of training) and
 * computed as Caffe computes them. Backend-free (library cd_core): the worker trains
 * with these functions and the server previews the same curves with them.
 */
#ifndef CDIGITS_LR_POLICY_H
#define CDIGITS_LR_POLICY_H

#ifdef __cplusplus
extern "C" {
#endif

enum cd_lr_type { CD_LR_FIXED, CD_LR_STEP, CD_LR_MULTISTEP, CD_LR_EXP, CD_LR_INV, CD_LR_POLY,
                  CD_LR_SIGMOID, CD_LR_COUNT };

#define CD_LR_MAX_STEPS 32

/* DIGITS's form defaults (digits/model/forms.py), the one home for them: the policy
 * table of src/core/lr_policy.c starts from these, and the server's model form shows
 * them as text (CD_LR_TEXT). */
#define CD_LR_DEFAULT_STEP_SIZE 33      /* step: percent of training */
#define CD_LR_DEFAULT_STEP_GAMMA 0.1
#define CD_LR_DEFAULT_MULTISTEP_A 50    /* multistep: percents */
#define CD_LR_DEFAULT_MULTISTEP_B 85
#define CD_LR_DEFAULT_MULTISTEP_GAMMA 0.5
#define CD_LR_DEFAULT_EXP_GAMMA 0.95
#define CD_LR_DEFAULT_INV_GAMMA 0.1
#define CD_LR_DEFAULT_INV_POWER 0.5
#define CD_LR_DEFAULT_POLY_POWER 3
#define CD_LR_DEFAULT_SIGMOID_STEP 50   /* sigmoid: percent of training */
#define CD_LR_DEFAULT_SIGMOID_GAMMA 0.1
/* a default as the form's text: CD_LR_TEXT(CD_LR_DEFAULT_EXP_GAMMA) is "0.95" */
#define CD_LR_TEXT_(x) #x
#define CD_LR_TEXT(x) CD_LR_TEXT_(x)
#define CD_LR_DEFAULT_MULTISTEP_VALUES \
    CD_LR_TEXT(CD_LR_DEFAULT_MULTISTEP_A) "," CD_LR_TEXT(CD_LR_DEFAULT_MULTISTEP_B)

typedef struct cd_lr_policy {
    int type;
    double base_lr;
    double gamma;                 /* step, multistep, exp, inv, sigmoid */
    double power;                 /* inv, poly */
    double step_pct;              /* step, sigmoid: percent of training */
    double steps_pct[CD_LR_MAX_STEPS]; /* multistep: percents */
    int nsteps;
    long max_iter;
} cd_lr_policy;

/* The parameters a policy reads, for cd_lr_field. */
enum cd_lr_arg { CD_LR_ARG_STEP, CD_LR_ARG_GAMMA, CD_LR_ARG_POWER, CD_LR_ARG_STEPS, CD_LR_ARG_COUNT };

/* Policy by name ("step"); -1 if unknown. */
int cd_lr_type_parse(const char *name);
const char *cd_lr_type_name(int type);
const char *cd_lr_type_list(void);
/* The model form's field (DIGITS's name, "lr_step_size") that sets parameter arg of
 * policy type, or NULL where the policy does not read that parameter. */
const char *cd_lr_field(int type, int arg);
/* DIGITS's defaults for a policy (gamma, power, steps), keeping base_lr and max_iter. */
void cd_lr_policy_defaults(cd_lr_policy *p, int type);
/* pct percent of a max_iter-iteration training as the iteration DIGITS gives Caffe
 * (ceil(pct * max_iter / 100)), the conversion cd_lr_at uses. */
long cd_lr_pct_iter(double pct, long max_iter);
/* Learning rate at solver iteration iter (0-based), exactly as Caffe computes it from
 * the parameters DIGITS derives (see docs/training.md). */
double cd_lr_at(const cd_lr_policy *p, long iter);
/* The curve DIGITS's form draws: y[i] is the rate at i percent of training, i in
 * [0, n), the rate training uses at iteration i of a 100-iteration run (max_iter is
 * taken as 100; p is not changed). */
void cd_lr_preview(const cd_lr_policy *p, double *y, int n);

#ifdef __cplusplus
}
#endif
#endif
