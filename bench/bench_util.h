/*
 * What the benches share: sorting their repeated times for medians and spreads, and
 * the rounds of one op's forward and backward timed on their own (bench_pool,
 * bench_lrn). Header-only: each bench is one executable (bench/CMakeLists.txt).
 */
#ifndef CD_BENCH_UTIL_H
#define CD_BENCH_UTIL_H

#include <stdlib.h>

#include "cdigits/util.h"

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0, n) in ascending order: v[n / 2] the median, v[0] and v[n - 1] the spread */
static inline void bench_sort(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
}

/* After one warm-up call of each, `rounds` rounds of `reps` calls of fwd then `reps`
 * of bwd: tf[k] and tb[k] are round k's ms a call, sorted (bench_sort). */
static inline void bench_fwd_bwd(int rounds, int reps, void (*fwd)(void *), void (*bwd)(void *), void *ctx,
                                 double *tf, double *tb)
{
    fwd(ctx);
    bwd(ctx);
    for (int k = 0; k < rounds; k++) {
        double t0 = cd_now();
        for (int i = 0; i < reps; i++)
            fwd(ctx);
        double t1 = cd_now();
        for (int i = 0; i < reps; i++)
            bwd(ctx);
        tf[k] = (t1 - t0) / reps * 1e3;
        tb[k] = (cd_now() - t1) / reps * 1e3;
    }
    bench_sort(tf, rounds);
    bench_sort(tb, rounds);
}

#endif
