/*
 * Learning-rate policies against their formulas, written here independently of
 * src/engine/lr_policy.c from DIGITS's conversion of percents to iterations
 * (scale = max_iter / 100, as DIGITS's caffe_train.py sets up Caffe's solver) and
 * Caffe's SGDSolver::GetLearningRate:
 *
 *   fixed:     base
 *   step:      base * gamma ^ floor(iter / ceil(step_pct * scale))
 *   multistep: base * gamma ^ (number of steps v with ceil(v * scale) <= iter)
 *   exp:       base * gamma ^ (iter / scale)
 *   inv:       base * (1 + gamma * iter / scale) ^ -power
 *   poly:      base * (1 - iter / max_iter) ^ power
 *   sigmoid:   base / (1 + exp(gamma * (iter - ceil(step_pct * scale)) / scale))
 *
 * Every policy is checked with random parameters and random max_iter (including
 * values that are not multiples of 100, where the ceil matters) at every iteration of
 * short runs and, for long runs, at a random sample plus every boundary: 0, the
 * iterations around each step, max_iter - 1 and max_iter.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/train.h"
#include "testutil.h"

/* The rates are computed in double on both sides; the only differences are the order
 * of operations (exp: gamma^(1/scale) raised to iter against gamma^(iter/scale)), a
 * relative error of at most iter * 1e-16 * |log gamma|, far below this bound. */
#define LR_RTOL 1e-9

static long ref_iters(double pct, double scale) { return (long)ceil(pct * scale); }

static double ref_lr(const cd_lr_policy *p, long iter)
{
    double scale = (double)p->max_iter / 100.0, base = p->base_lr;
    switch (p->type) {
    case CD_LR_FIXED: return base;
    case CD_LR_STEP: return base * pow(p->gamma, floor((double)iter / (double)ref_iters(p->step_pct, scale)));
    case CD_LR_MULTISTEP: {
        int passed = 0;
        for (int i = 0; i < p->nsteps; i++)
            passed += ref_iters(p->steps_pct[i], scale) <= iter;
        return base * pow(p->gamma, passed);
    }
    case CD_LR_EXP: return base * pow(p->gamma, (double)iter / scale);
    case CD_LR_INV: return base * pow(1.0 + p->gamma * (double)iter / scale, -p->power);
    case CD_LR_POLY: return base * pow(1.0 - (double)iter / (double)p->max_iter, p->power);
    case CD_LR_SIGMOID:
        return base / (1.0 + exp(p->gamma * (double)(iter - ref_iters(p->step_pct, scale)) / scale));
    }
    return NAN;
}

static int g_worst_type = -1;
static double g_worst = 0;

static void check_at(const cd_lr_policy *p, long iter)
{
    double want = ref_lr(p, iter), got = cd_lr_at(p, iter);
    double err = fabs(got - want), tol = LR_RTOL * fabs(want) + 1e-300;
    if (err / tol > g_worst) {
        g_worst = err / tol;
        g_worst_type = p->type;
    }
    CHECK(isfinite(got) && err <= tol,
          "%s: base %g gamma %g power %g step %g%% (%d steps) max_iter %ld, iter %ld: got %.17g, "
          "want %.17g", cd_lr_type_name(p->type), p->base_lr, p->gamma, p->power, p->step_pct,
          p->nsteps, p->max_iter, iter, got, want);
}

/* Random parameters in the ranges DIGITS's form allows for the policy. */
static void random_policy(cd_lr_policy *p, int type, long max_iter)
{
    memset(p, 0, sizeof *p);
    p->type = type;
    p->max_iter = max_iter;
    p->base_lr = cd_test_uniform(1e-4, 0.5);
    p->gamma = type == CD_LR_EXP ? cd_test_uniform(0.5, 0.999) : cd_test_uniform(0.01, 0.9);
    if (type == CD_LR_SIGMOID)
        p->gamma = cd_test_uniform(0.01, 2.0);
    p->power = cd_test_uniform(0.1, 4.0);
    /* at least 1% so that Caffe's stepsize is at least one iteration */
    p->step_pct = cd_test_uniform(1.0, 100.0);
    if (cd_test_rand_u64() % 3 == 0)
        p->step_pct = (double)(1 + cd_test_rand_u64() % 100); /* whole percents, as the form gives */
    p->nsteps = 1 + (int)(cd_test_rand_u64() % 5);
    double at = 0;
    for (int i = 0; i < p->nsteps; i++) {
        at += cd_test_uniform(0.0, 100.0 / p->nsteps);
        p->steps_pct[i] = cd_test_rand_u64() % 2 ? floor(at) : at;
    }
}

/* Every iteration of a short run, or for a long one the boundaries and a sample. */
static void check_policy(const cd_lr_policy *p)
{
    long max_iter = p->max_iter;
    double scale = (double)max_iter / 100.0;
    if (max_iter <= 2000) {
        for (long it = 0; it <= max_iter; it++)
            check_at(p, it);
        return;
    }
    long edges[64];
    int ne = 0;
    edges[ne++] = 0;
    edges[ne++] = max_iter - 1;
    edges[ne++] = max_iter;
    if (p->type == CD_LR_STEP || p->type == CD_LR_SIGMOID) {
        long s = ref_iters(p->step_pct, scale);
        edges[ne++] = s;
        edges[ne++] = 2 * s;
        edges[ne++] = 3 * s;
    }
    if (p->type == CD_LR_MULTISTEP)
        for (int i = 0; i < p->nsteps; i++)
            edges[ne++] = ref_iters(p->steps_pct[i], scale);
    for (int i = 0; i < ne; i++)
        for (long d = -2; d <= 2; d++)
            if (edges[i] + d >= 0 && edges[i] + d <= max_iter)
                check_at(p, edges[i] + d);
    for (int i = 0; i < 300; i++)
        check_at(p, (long)(cd_test_rand_u64() % (uint64_t)(max_iter + 1)));
}

static void test_formulas(void)
{
    /* multiples of 100 and not, tiny runs where ceil rounds up a fraction of one
     * iteration, and a long one */
    static const long fixed_max[] = {1, 3, 7, 99, 100, 101, 150, 333, 1000, 1234, 100000};
    for (int type = 0; type < CD_LR_COUNT; type++) {
        for (size_t k = 0; k < sizeof fixed_max / sizeof fixed_max[0]; k++) {
            cd_lr_policy p;
            random_policy(&p, type, fixed_max[k]);
            check_policy(&p);
        }
        for (int k = 0; k < 20; k++) {
            cd_lr_policy p;
            random_policy(&p, type, 1 + (long)(cd_test_rand_u64() % 5000));
            check_policy(&p);
        }
    }
    printf("formulas: worst error %.3g of the tolerance (%s)\n", g_worst,
           g_worst_type >= 0 ? cd_lr_type_name(g_worst_type) : "-");
}

/* A few values worked out by hand, so that a shared misreading of the formulas above
 * and the engine cannot pass unnoticed. */
static void test_hand_values(void)
{
    cd_lr_policy p;
    memset(&p, 0, sizeof p);
    p.base_lr = 0.01;
    p.max_iter = 300; /* scale 3 */

    p.type = CD_LR_STEP;
    p.gamma = 0.1;
    p.step_pct = 33; /* stepsize ceil(99) = 99 */
    CHECK_NEAR(cd_lr_at(&p, 0), 0.01, 1e-15, "step at 0");
    CHECK_NEAR(cd_lr_at(&p, 98), 0.01, 1e-15, "step at 98");
    CHECK_NEAR(cd_lr_at(&p, 99), 0.001, 1e-15, "step at 99");
    CHECK_NEAR(cd_lr_at(&p, 198), 0.0001, 1e-15, "step at 198");
    CHECK_NEAR(cd_lr_at(&p, 299), 0.00001, 1e-15, "step at 299");
    p.step_pct = 33.5; /* ceil(100.5) = 101 */
    CHECK_NEAR(cd_lr_at(&p, 100), 0.01, 1e-15, "step 33.5%% at 100");
    CHECK_NEAR(cd_lr_at(&p, 101), 0.001, 1e-15, "step 33.5%% at 101");

    p.type = CD_LR_MULTISTEP;
    p.gamma = 0.5;
    p.nsteps = 2;
    p.steps_pct[0] = 50;   /* 150 */
    p.steps_pct[1] = 85.1; /* ceil(255.3) = 256 */
    CHECK_NEAR(cd_lr_at(&p, 149), 0.01, 1e-15, "multistep at 149");
    CHECK_NEAR(cd_lr_at(&p, 150), 0.005, 1e-15, "multistep at 150");
    CHECK_NEAR(cd_lr_at(&p, 255), 0.005, 1e-15, "multistep at 255");
    CHECK_NEAR(cd_lr_at(&p, 256), 0.0025, 1e-15, "multistep at 256");

    p.type = CD_LR_EXP;
    p.gamma = 0.95; /* 0.95 per percent: 0.95^10 after 30 iterations */
    CHECK_NEAR(cd_lr_at(&p, 30), 0.01 * 0.5987369392383789, 1e-13, "exp at 30");

    p.type = CD_LR_INV;
    p.gamma = 0.1;
    p.power = 0.5; /* (1 + 0.1 * 90/3)^-0.5 = 4^-0.5 */
    CHECK_NEAR(cd_lr_at(&p, 90), 0.005, 1e-15, "inv at 90");

    p.type = CD_LR_POLY;
    p.power = 3; /* (1 - 150/300)^3 = 1/8 */
    CHECK_NEAR(cd_lr_at(&p, 150), 0.00125, 1e-15, "poly at 150");
    CHECK_NEAR(cd_lr_at(&p, 300), 0.0, 1e-15, "poly at max_iter");

    p.type = CD_LR_SIGMOID;
    p.gamma = 0.1;
    p.step_pct = 50; /* stepsize 150: half the rate there, falling after */
    CHECK_NEAR(cd_lr_at(&p, 150), 0.005, 1e-15, "sigmoid at its step");
    CHECK_NEAR(cd_lr_at(&p, 180), 0.01 / (1.0 + exp(1.0)), 1e-15, "sigmoid at 180");
    CHECK(cd_lr_at(&p, 0) > 0.0099 && cd_lr_at(&p, 299) < 0.0001, "sigmoid falls from %g to %g",
          cd_lr_at(&p, 0), cd_lr_at(&p, 299));

    p.type = CD_LR_FIXED;
    for (long it = 0; it <= 300; it += 37)
        CHECK(cd_lr_at(&p, it) == 0.01, "fixed at %ld: %g", it, cd_lr_at(&p, it));
}

static void test_names(void)
{
    static const char *const want[CD_LR_COUNT] = {
        [CD_LR_FIXED] = "fixed", [CD_LR_STEP] = "step", [CD_LR_MULTISTEP] = "multistep",
        [CD_LR_EXP] = "exp",     [CD_LR_INV] = "inv",   [CD_LR_POLY] = "poly",
        [CD_LR_SIGMOID] = "sigmoid",
    };
    const char *list = cd_lr_type_list();
    for (int t = 0; t < CD_LR_COUNT; t++) {
        CHECK(!strcmp(cd_lr_type_name(t), want[t]), "name of %d: %s, want %s", t, cd_lr_type_name(t),
              want[t]);
        CHECK(cd_lr_type_parse(want[t]) == t, "parse %s: %d, want %d", want[t],
              cd_lr_type_parse(want[t]), t);
        CHECK(cd_lr_type_parse(cd_lr_type_name(t)) == t, "round trip of %d", t);
        CHECK(strstr(list, want[t]) != NULL, "the list \"%s\" lacks %s", list, want[t]);
    }
    static const char *const bad[] = {"", "steps", "fix", "linear", "cosine", "step "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(cd_lr_type_parse(bad[i]) == -1, "\"%s\" parsed as %d", bad[i], cd_lr_type_parse(bad[i]));
    CHECK(!strcmp(cd_lr_type_name(-1), "?") && !strcmp(cd_lr_type_name(CD_LR_COUNT), "?"),
          "out-of-range names: %s %s", cd_lr_type_name(-1), cd_lr_type_name(CD_LR_COUNT));
}

/* DIGITS's form defaults (digits/model/forms.py): lr_step_size 33, lr_step_gamma 0.1,
 * lr_multistep_values "50,85", lr_multistep_gamma 0.5, lr_exp_gamma 0.95,
 * lr_inv_gamma 0.1, lr_inv_power 0.5, lr_poly_power 3, lr_sigmoid_step 50,
 * lr_sigmoid_gamma 0.1. base_lr and max_iter are the caller's and must survive. */
static void test_defaults(void)
{
    for (int t = 0; t < CD_LR_COUNT; t++) {
        cd_lr_policy p;
        memset(&p, 0, sizeof p);
        double base = cd_test_uniform(1e-4, 1.0);
        long max_iter = 1 + (long)(cd_test_rand_u64() % 100000);
        p.base_lr = base;
        p.max_iter = max_iter;
        cd_lr_policy_defaults(&p, t);
        const char *n = cd_lr_type_name(t);
        CHECK(p.type == t, "%s: type %d", n, p.type);
        CHECK(p.base_lr == base && p.max_iter == max_iter, "%s: base_lr %g max_iter %ld changed to "
              "%g %ld", n, base, max_iter, p.base_lr, p.max_iter);
        switch (t) {
        case CD_LR_STEP:
            CHECK(p.step_pct == 33 && p.gamma == 0.1, "step: %g%% gamma %g", p.step_pct, p.gamma);
            break;
        case CD_LR_MULTISTEP:
            CHECK(p.nsteps == 2 && p.steps_pct[0] == 50 && p.steps_pct[1] == 85 && p.gamma == 0.5,
                  "multistep: %d steps (%g, %g) gamma %g", p.nsteps, p.steps_pct[0], p.steps_pct[1],
                  p.gamma);
            break;
        case CD_LR_EXP: CHECK(p.gamma == 0.95, "exp: gamma %g", p.gamma); break;
        case CD_LR_INV: CHECK(p.gamma == 0.1 && p.power == 0.5, "inv: gamma %g power %g", p.gamma, p.power); break;
        case CD_LR_POLY: CHECK(p.power == 3, "poly: power %g", p.power); break;
        case CD_LR_SIGMOID:
            CHECK(p.step_pct == 50 && p.gamma == 0.1, "sigmoid: %g%% gamma %g", p.step_pct, p.gamma);
            break;
        default: break;
        }
        /* the defaults give a usable schedule: finite, positive at the start, not rising */
        double first = cd_lr_at(&p, 0), prev = first;
        CHECK(first > 0 && first <= base * (1 + 1e-12), "%s: rate %g at 0 (base %g)", n, first, base);
        for (long it = 1; it < max_iter; it += 1 + max_iter / 97) {
            double r = cd_lr_at(&p, it);
            CHECK(isfinite(r) && r <= prev * (1 + 1e-12), "%s: rate rises from %g to %g at %ld", n,
                  prev, r, it);
            prev = r;
        }
    }
    /* the train.json defaults (docs/worker-protocol.md): step 33%, gamma 0.1 */
    cd_train_config c;
    cd_train_config_init(&c);
    CHECK(c.solver.lr.type == CD_LR_STEP && c.solver.lr.step_pct == 33 && c.solver.lr.gamma == 0.1 &&
          c.solver.lr.base_lr == 0.01, "train.json default policy: %s %g%% gamma %g base %g",
          cd_lr_type_name(c.solver.lr.type), c.solver.lr.step_pct, c.solver.lr.gamma,
          c.solver.lr.base_lr);
}

/* The server's preview (cd_lr_preview: 101 points, one per percent of training) is the
 * training rate of a 100-iteration run: checked exactly against cd_lr_at, the function
 * the solver calls, and within the tolerance against the reference above, for every
 * policy with random parameters and a random max_iter in p that the preview must
 * neither use nor change. */
static void test_preview(void)
{
    for (int type = 0; type < CD_LR_COUNT; type++) {
        for (int k = 0; k < 20; k++) {
            cd_lr_policy p, train;
            random_policy(&p, type, 1 + (long)(cd_test_rand_u64() % 100000));
            long max_iter = p.max_iter;
            double y[101];
            cd_lr_preview(&p, y, 101);
            CHECK(p.max_iter == max_iter, "%s: the preview changed max_iter %ld to %ld",
                  cd_lr_type_name(type), max_iter, p.max_iter);
            train = p;
            train.max_iter = 100;
            for (long i = 0; i <= 100; i++) {
                CHECK(y[i] == cd_lr_at(&train, i), "%s: preview at %ld%% is %.17g, training's rate %.17g",
                      cd_lr_type_name(type), i, y[i], cd_lr_at(&train, i));
                check_at(&train, i);
            }
        }
    }
    /* by hand: the server test's curve (step 50%, gamma 0.5) and a fractional step,
     * which training rounds up to whole iterations: 33.5% of 100 is iteration 34 */
    cd_lr_policy p;
    memset(&p, 0, sizeof p);
    cd_lr_policy_defaults(&p, CD_LR_STEP);
    p.base_lr = 0.1;
    p.step_pct = 50;
    p.gamma = 0.5;
    double y[101];
    cd_lr_preview(&p, y, 101);
    CHECK_NEAR(y[49], 0.1, 1e-15, "preview step at 49%%");
    CHECK_NEAR(y[99], 0.05, 1e-15, "preview step at 99%%");
    CHECK_NEAR(y[100], 0.025, 1e-15, "preview step at 100%%");
    p.step_pct = 33.5;
    cd_lr_preview(&p, y, 101);
    CHECK_NEAR(y[33], 0.1, 1e-15, "preview step 33.5%% at 33%%");
    CHECK_NEAR(y[34], 0.05, 1e-15, "preview step 33.5%% at 34%%");
}

/* The model form's field of each parameter (DIGITS's names), and the defaults as the
 * form's text: the same numbers cd_lr_policy_defaults gives. */
static void test_fields(void)
{
    static const struct {
        int type, arg;
        const char *field, *text;
    } want[] = {
        {CD_LR_STEP, CD_LR_ARG_STEP, "lr_step_size", "33"},
        {CD_LR_STEP, CD_LR_ARG_GAMMA, "lr_step_gamma", "0.1"},
        {CD_LR_MULTISTEP, CD_LR_ARG_STEPS, "lr_multistep_values", "50,85"},
        {CD_LR_MULTISTEP, CD_LR_ARG_GAMMA, "lr_multistep_gamma", "0.5"},
        {CD_LR_EXP, CD_LR_ARG_GAMMA, "lr_exp_gamma", "0.95"},
        {CD_LR_INV, CD_LR_ARG_GAMMA, "lr_inv_gamma", "0.1"},
        {CD_LR_INV, CD_LR_ARG_POWER, "lr_inv_power", "0.5"},
        {CD_LR_POLY, CD_LR_ARG_POWER, "lr_poly_power", "3"},
        {CD_LR_SIGMOID, CD_LR_ARG_STEP, "lr_sigmoid_step", "50"},
        {CD_LR_SIGMOID, CD_LR_ARG_GAMMA, "lr_sigmoid_gamma", "0.1"},
    };
    const size_t n = sizeof want / sizeof want[0];
    for (int t = 0; t < CD_LR_COUNT; t++)
        for (int a = 0; a < CD_LR_ARG_COUNT; a++) {
            const char *got = cd_lr_field(t, a), *field = NULL, *text = NULL;
            for (size_t i = 0; i < n; i++)
                if (want[i].type == t && want[i].arg == a) {
                    field = want[i].field;
                    text = want[i].text;
                }
            CHECK(field ? got && !strcmp(got, field) : got == NULL, "%s parameter %d: field %s, want %s",
                  cd_lr_type_name(t), a, got ? got : "(none)", field ? field : "(none)");
            if (!text)
                continue;
            cd_lr_policy p;
            memset(&p, 0, sizeof p);
            cd_lr_policy_defaults(&p, t);
            if (a == CD_LR_ARG_STEPS) {
                CHECK(p.nsteps == 2 && p.steps_pct[0] == 50 && p.steps_pct[1] == 85, "%s: default steps", field);
                continue;
            }
            double v = a == CD_LR_ARG_STEP ? p.step_pct : a == CD_LR_ARG_GAMMA ? p.gamma : p.power;
            CHECK(v == strtod(text, NULL), "%s: default %g, DIGITS's form says %s", field, v, text);
        }
    CHECK(cd_lr_field(-1, 0) == NULL && cd_lr_field(CD_LR_COUNT, 0) == NULL &&
          cd_lr_field(CD_LR_STEP, CD_LR_ARG_COUNT) == NULL, "out-of-range fields");
    /* the texts the server's form shows */
    CHECK(!strcmp(CD_LR_TEXT(CD_LR_DEFAULT_STEP_SIZE), "33") &&
          !strcmp(CD_LR_TEXT(CD_LR_DEFAULT_EXP_GAMMA), "0.95") &&
          !strcmp(CD_LR_TEXT(CD_LR_DEFAULT_MULTISTEP_GAMMA), "0.5") &&
          !strcmp(CD_LR_DEFAULT_MULTISTEP_VALUES, "50,85"),
          "form texts: %s %s %s %s", CD_LR_TEXT(CD_LR_DEFAULT_STEP_SIZE), CD_LR_TEXT(CD_LR_DEFAULT_EXP_GAMMA),
          CD_LR_TEXT(CD_LR_DEFAULT_MULTISTEP_GAMMA), CD_LR_DEFAULT_MULTISTEP_VALUES);
}

/* percent to iteration: DIGITS's ceil(pct * max_iter / 100), saturating where no
 * iteration is reached instead of overflowing (a multistep value of 1e117 percent) */
static void test_pct_iter(void)
{
    static const struct {
        double pct;
        long max_iter, want;
    } rows[] = {{33, 300, 99}, {33, 100, 33}, {50, 1, 1}, {0, 1000, 0}, {100, 937, 937}, {1, 150, 2},
                {5.88e117, 100, 1000000000000000L}, {-1e300, 100, -1000000000000000L}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECK(cd_lr_pct_iter(rows[i].pct, rows[i].max_iter) == rows[i].want, "%g%% of %ld: %ld, want %ld",
              rows[i].pct, rows[i].max_iter, cd_lr_pct_iter(rows[i].pct, rows[i].max_iter), rows[i].want);
    CHECK(cd_lr_pct_iter(NAN, 100) == 1000000000000000L, "NaN%%: %ld", cd_lr_pct_iter(NAN, 100));
    cd_lr_policy p = {.type = CD_LR_MULTISTEP, .base_lr = 1, .gamma = 0.5, .nsteps = 2,
                      .steps_pct = {10, 5.88e117}, .max_iter = 100};
    CHECK(cd_lr_at(&p, 50) == 0.5 && cd_lr_at(&p, 5) == 1, "a step no iteration reaches: %g %g",
          cd_lr_at(&p, 5), cd_lr_at(&p, 50));
}

int main(void)
{
    cd_test_init("test_lr_policy");
    test_names();
    test_defaults();
    test_fields();
    test_hand_values();
    test_formulas();
    test_preview();
    test_pct_iter();
    return cd_test_finish();
}
