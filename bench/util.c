/*
 * The bench's error message and its statistics: what the table, the files, the summary and the
 * comparison all compute the same way.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const bench_variant_key[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) key,
#include "variants.def"
#undef X
};
const char *const bench_variant_name[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) name,
#include "variants.def"
#undef X
};
const bool bench_variant_in_table[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) in_table,
#include "variants.def"
#undef X
};
const int bench_variant_width[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) width,
#include "variants.def"
#undef X
};
const char *const bench_extra_name[BX_COUNT] = {"refill verify", "verify prologue",
                                                "verify row loop", "journal verify prologue",
                                                "journal verify row loop"};

int bench_extra_variant(int x)
{
    return x == BX_PROLOGUE || x == BX_ROWS ? BV_FUSED_NOSNAP : BV_JOURNAL;
}

int bench_variant_from_key(const char *key)
{
    for (int v = 0; v < BV_COUNT; v++)
        if (strcmp(key, bench_variant_key[v]) == 0)
            return v;
    return -1;
}

char bench_error[640];

void bench_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bench_error, sizeof bench_error, fmt, ap);
    va_end(ap);
}

int bench_fail_status(const char *what, MemraStatus st)
{
    bench_fail("%s: %s: %s", what, memra_status_string(st), memra_last_error_message());
    return -1;
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sorted_median(const double *x, size_t n)
{
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

void bench_stats_from_samples(bench_stats *s, double *x, size_t n)
{
    double dev[BENCH_MAX_SAMPLES];
    if (n > BENCH_MAX_SAMPLES)
        n = BENCH_MAX_SAMPLES;
    qsort(x, n, sizeof *x, bench_cmp_double);
    s->samples = n;
    if (n == 0) {
        s->med_us = s->min_us = s->max_us = s->mad_us = 0.0;
        return;
    }
    memcpy(s->sample_us, x, n * sizeof *x);
    s->min_us = x[0];
    s->max_us = x[n - 1];
    s->med_us = sorted_median(x, n);
    for (size_t i = 0; i < n; i++)
        dev[i] = fabs(x[i] - s->med_us);
    qsort(dev, n, sizeof *dev, bench_cmp_double);
    s->mad_us = sorted_median(dev, n);
}

double bench_stats_spread(const bench_stats *s)
{
    return s->med_us > 0.0 ? (s->max_us - s->min_us) / s->med_us : 0.0;
}

double bench_result_spread(const bench_result *r)
{
    double worst = 0.0;
    for (int v = 0; v < BV_COUNT; v++)
        if (r->v[v].status == BS_OK && bench_stats_spread(&r->v[v]) > worst)
            worst = bench_stats_spread(&r->v[v]);
    return worst;
}

bool bench_result_noisy(const bench_result *r)
{
    return r->ok && bench_result_spread(r) > BENCH_NOISY_SPREAD;
}

double bench_stats_gbs(const bench_stats *s)
{
    return s->med_us > 0.0 ? (double)s->bytes / (s->med_us * 1e3) : 0.0;
}

double bench_stats_floor_us(const bench_env *env, const bench_stats *s)
{
    return env->copy_best_gbs > 0.0 ? (double)s->bytes / (env->copy_best_gbs * 1e3) : -1.0;
}

size_t bench_result_failures(const bench_result *r)
{
    size_t n = 0;
    if (!r->ok)
        return 1;
    for (int v = 0; v < BV_COUNT; v++)
        n += r->v[v].status == BS_FAILED;
    return n;
}
