/*
 * Tests of memra_bench's report and compare code (bench/report.c, bench/compare.c,
 * bench/json.c, bench/util.c) on canned results: the JSON and CSV it writes read back, the
 * table line and the summary, and the comparison of two canned bench.json files with a flagged
 * regression, a noisy configuration, a missing one, a FAILED variant and a file of the first
 * schema. Nothing here runs the library's operations or times anything.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "json.h"

/* ---- canned bench.json files ---- */

/* The base: three configurations, every 1.0 variant timed, fused timed in two of them. */
static const char base_json[] =
    "{\n"
    "  \"tool\": \"memra_bench\", \"schema_version\": 2, \"date\": \"2026-11-30T10:00:00Z\",\n"
    "  \"quick\": false,\n"
    "  \"library\": {\"version\": \"1.1.0\", \"abi\": \"1.1\", \"commit\": \"aaaa111\"},\n"
    "  \"machine\": {\"backend\": \"cuda\", \"device\": \"NVIDIA H200\"},\n"
    "  \"results\": [\n"
    "    {\"shape\": \"ornith\", \"t\": 8, \"b\": 32, \"status\": \"ok\", \"noisy\": false,\n"
    "     \"variants\": {\n"
    "       \"row_graph\": {\"status\": \"ok\", \"median_us\": 338.0, \"min_us\": 336.0, "
    "\"max_us\": 340.0, \"spread\": 0.0118},\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 186.0, \"min_us\": 185.0, "
    "\"max_us\": 187.5, \"spread\": 0.0134},\n"
    "       \"fused\": {\"status\": \"ok\", \"median_us\": 180.0, \"min_us\": 179.0, "
    "\"max_us\": 181.0, \"spread\": 0.0111},\n"
    "       \"journal\": {\"status\": \"skipped\"}}},\n"
    "    {\"shape\": \"small\", \"t\": 16, \"b\": 1, \"status\": \"ok\", \"noisy\": true,\n"
    "     \"variants\": {\n"
    "       \"row_graph\": {\"status\": \"ok\", \"median_us\": 72.0, \"min_us\": 70.0, "
    "\"max_us\": 90.0},\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 20.0, \"min_us\": 19.5, "
    "\"max_us\": 24.0},\n"
    "       \"fused\": {\"status\": \"ok\", \"median_us\": 18.0, \"min_us\": 17.5, "
    "\"max_us\": 18.5}}},\n"
    "    {\"shape\": \"small\", \"t\": 1, \"b\": 8, \"status\": \"ok\", \"noisy\": false,\n"
    "     \"variants\": {\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 8.0, \"min_us\": 7.9, "
    "\"max_us\": 8.1}}}\n"
    "  ]\n"
    "}\n";

/* This run: ornith T=8 B=32's packed graph 10% slower with its range above the base's (a
 * regression) and its fused FAILED (another); small T=16 B=1 (noisy in the base) 30% slower in
 * row-graph but inside the base's wide range; small T=1 B=8 missing; small T=2 B=8 new. */
static const char head_json[] =
    "{\n"
    "  \"tool\": \"memra_bench\", \"schema_version\": 2, \"date\": \"2026-12-01T10:00:00Z\",\n"
    "  \"quick\": false,\n"
    "  \"library\": {\"version\": \"1.1.0\", \"abi\": \"1.1\", \"commit\": \"bbbb222\"},\n"
    "  \"machine\": {\"backend\": \"cuda\", \"device\": \"NVIDIA H200\"},\n"
    "  \"results\": [\n"
    "    {\"shape\": \"ornith\", \"t\": 8, \"b\": 32, \"status\": \"ok\", \"noisy\": false,\n"
    "     \"variants\": {\n"
    "       \"row_graph\": {\"status\": \"ok\", \"median_us\": 338.0, \"min_us\": 337.0, "
    "\"max_us\": 339.0},\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 204.6, \"min_us\": 203.0, "
    "\"max_us\": 206.0},\n"
    "       \"fused\": {\"status\": \"FAILED\", \"failure\": \"memra_gdn_verify (SNAPSHOTS): "
    "UNSUPPORTED: not on this backend\"},\n"
    "       \"journal\": {\"status\": \"ok\", \"median_us\": 100.0, \"min_us\": 99.0, "
    "\"max_us\": 101.0}}},\n"
    "    {\"shape\": \"small\", \"t\": 16, \"b\": 1, \"status\": \"ok\", \"noisy\": false,\n"
    "     \"variants\": {\n"
    "       \"row_graph\": {\"status\": \"ok\", \"median_us\": 93.6, \"min_us\": 88.0, "
    "\"max_us\": 95.0},\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 20.0, \"min_us\": 19.8, "
    "\"max_us\": 20.2},\n"
    "       \"fused\": {\"status\": \"ok\", \"median_us\": 18.0, \"min_us\": 17.9, "
    "\"max_us\": 18.1}}},\n"
    "    {\"shape\": \"small\", \"t\": 2, \"b\": 8, \"status\": \"ok\", \"noisy\": false,\n"
    "     \"variants\": {\n"
    "       \"packed_graph\": {\"status\": \"ok\", \"median_us\": 9.0, \"min_us\": 8.9, "
    "\"max_us\": 9.1}}}\n"
    "  ]\n"
    "}\n";

/* A file of the bench before the schema was versioned: the library at the top level, no
 * status per variant, no noisy flag. */
static const char schema1_json[] =
    "{\"tool\": \"memra_bench\", \"library_version\": \"1.0.0\", \"abi_version\": \"1.0\",\n"
    " \"date\": \"2026-11-01T00:00:00Z\", \"commit\": \"cccc333\", \"quick\": true,\n"
    " \"machine\": {\"host\": \"h\", \"backend\": \"cpu\", \"device\": \"some CPU\"},\n"
    " \"results\": [\n"
    "  {\"shape\": \"small\", \"t\": 2, \"b\": 1, \"status\": \"ok\", \"sets\": 4,\n"
    "   \"variants\": {\"row_eager\": {\"median_us\": 100.0, \"min_us\": 90.0, \"max_us\": "
    "150.0, \"samples\": 5},\n"
    "                \"packed_graph\": {\"median_us\": 50.0, \"min_us\": 49.0, \"max_us\": "
    "51.0, \"samples\": 5}}},\n"
    "  {\"shape\": \"small\", \"t\": 4, \"b\": 1, \"status\": \"FAILED\", \"failure\": \"x\"}\n"
    " ]}\n";

static bench_run load(const char *text)
{
    bench_run run;
    cr_assert_eq(bench_run_parse(text, "canned", &run), 0, "parse failed: %s", bench_error);
    return run;
}

/* The comparison's text output, in a malloc'ed string. */
static char *compare_text(const bench_run *base, const bench_run *cur, double threshold,
                          bench_compare_summary *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bench_compare_opts o = {threshold};
    cr_assert_not_null(f);
    bench_compare(f, base, cur, &o, s);
    fclose(f);
    return buf;
}

/* Frees a comparison's text and the two runs it compared. */
static void compare_free(char *text, bench_run *base, bench_run *cur)
{
    free(text);
    bench_run_free(base);
    bench_run_free(cur);
}

static const bench_run_entry *entry(const bench_run *run, const char *shape, size_t t, size_t b)
{
    for (size_t i = 0; i < run->n; i++)
        if (strcmp(run->e[i].shape, shape) == 0 && run->e[i].t == t && run->e[i].b == b)
            return &run->e[i];
    return NULL;
}

Test(bench_compare, canned_runs_flag_regression_noisy_missing)
{
    bench_run base = load(base_json), head = load(head_json);
    bench_compare_summary s;
    char *text = compare_text(&base, &head, 0.02, &s);

    cr_expect_eq(s.configs_both, 2);
    cr_expect_eq(s.missing, 1, "small T=1 B=8 is missing: %zu", s.missing);
    cr_expect_eq(s.added, 1);
    /* packed_graph of ornith (slower beyond both spreads) and its fused (FAILED now). */
    cr_expect_eq(s.regressions, 2, "%s", text);
    cr_expect_eq(s.improvements, 0);
    cr_expect_eq(s.noisy, 1, "small T=16 B=1 was noisy in the base");
    /* Timed in both: ornith row_graph, packed_graph; small row_graph, packed_graph, fused.
     * The journal was skipped in the base. */
    cr_expect_eq(s.pairs, 5);
    double want = exp((log(338.0 / 338.0) + log(204.6 / 186.0) + log(93.6 / 72.0) +
                       log(20.0 / 20.0) + log(18.0 / 18.0)) /
                      5.0);
    cr_expect(fabs(s.geomean - want) < 1e-12, "geomean %.15g, want %.15g", s.geomean, want);
    cr_expect_eq(s.pairs_v[BV_PACK_GRAPH], 2);
    cr_expect(fabs(s.geomean_v[BV_PACK_GRAPH] - sqrt(204.6 / 186.0)) < 1e-12);

    cr_expect_not_null(strstr(text, "regression: ornith T=8 B=32 pack-graph: 186.00 us -> "
                                    "204.60 us (1.100x)"),
                       "%s", text);
    cr_expect_not_null(strstr(text, "regression: ornith T=8 B=32 fused: timed in the base, "
                                    "FAILED now: memra_gdn_verify (SNAPSHOTS): UNSUPPORTED"),
                       "%s", text);
    /* The noisy row's 1.3x slowdown of row-graph is inside the base's range: shown, not
     * flagged. */
    cr_expect_not_null(strstr(text, "1.300x~"), "%s", text);
    cr_expect_null(strstr(text, "small T=16 B=1 row-graph"), "%s", text);
    cr_expect_not_null(strstr(text, "missing in this run: small T=1 B=8"), "%s", text);
    cr_expect_not_null(strstr(text, "not in the base: small T=2 B=8"), "%s", text);
    cr_expect_not_null(strstr(text, "1.100x!"), "%s", text);
    compare_free(text, &base, &head);
}

Test(bench_compare, threshold_decides_a_small_slowdown)
{
    /* 1.5% slower, ranges disjoint: beyond both spreads, but only past a 1% threshold. */
    static const char a[] = "{\"tool\": \"memra_bench\", \"schema_version\": 2, \"results\": ["
                            "{\"shape\": \"small\", \"t\": 1, \"b\": 1, \"status\": \"ok\", "
                            "\"variants\": {\"packed_graph\": {\"status\": \"ok\", \"median_us\": "
                            "100.0, \"min_us\": 99.9, \"max_us\": 100.1}}}]}";
    static const char b[] = "{\"tool\": \"memra_bench\", \"schema_version\": 2, \"results\": ["
                            "{\"shape\": \"small\", \"t\": 1, \"b\": 1, \"status\": \"ok\", "
                            "\"variants\": {\"packed_graph\": {\"status\": \"ok\", \"median_us\": "
                            "101.5, \"min_us\": 101.4, \"max_us\": 101.6}}}]}";
    bench_run ra = load(a), rb = load(b);
    bench_compare_summary s;
    char *text = compare_text(&ra, &rb, 0.02, &s);
    cr_expect_eq(s.regressions, 0, "%s", text);
    free(text);
    text = compare_text(&ra, &rb, 0.01, &s);
    cr_expect_eq(s.regressions, 1, "%s", text);
    free(text);
    /* The other way round it is an improvement, never a regression. */
    text = compare_text(&rb, &ra, 0.01, &s);
    cr_expect_eq(s.regressions, 0, "%s", text);
    cr_expect_eq(s.improvements, 1, "%s", text);
    compare_free(text, &ra, &rb);
}

/* A bench.json of one configuration, small T=1 B=1, whose variants are `variants` (JSON members)
 * and whose noisy flag is `noisy`, in `buf`. */
static const char *one_config(char *buf, size_t len, const char *variants, bool noisy)
{
    int n = snprintf(buf, len,
                     "{\"tool\": \"memra_bench\", \"schema_version\": 2, \"results\": ["
                     "{\"shape\": \"small\", \"t\": 1, \"b\": 1, \"status\": \"ok\", "
                     "\"noisy\": %s, \"variants\": {%s}}]}",
                     noisy ? "true" : "false", variants);
    cr_assert(n > 0 && (size_t)n < len);
    return buf;
}

/* One packed-graph timing of a canned file: its JSON member. */
#define PG(fields) "\"packed_graph\": {\"status\": \"ok\", " fields "}"

/* A base and a run of one variant each, and what the comparison must say of them. */
typedef struct range_case {
    const char *why, *base, *cur;
    size_t regressions;
    const char *shows; /* a piece of the text, or NULL */
} range_case;

static const range_case range_cases[] = {
    {"6% slower, past the threshold, but this run's fastest sample is inside the base's range",
     PG("\"median_us\": 100.0, \"min_us\": 95.0, \"max_us\": 110.0"),
     PG("\"median_us\": 106.0, \"min_us\": 104.0, \"max_us\": 112.0"), 0, "1.060x "},
    {"the same medians with the ranges apart",
     PG("\"median_us\": 100.0, \"min_us\": 95.0, \"max_us\": 104.0"),
     PG("\"median_us\": 106.0, \"min_us\": 104.5, \"max_us\": 112.0"), 1, "1.060x!"},
    {"spreads only: the base spans 95..105, 104 +- 2% reaches down into it",
     PG("\"median_us\": 100.0, \"spread\": 0.10"), PG("\"median_us\": 104.0, \"spread\": 0.04"), 0,
     NULL},
    {"spreads only: 108 +- 2% starts at 105.84, above the base's 105",
     PG("\"median_us\": 100.0, \"spread\": 0.10"), PG("\"median_us\": 108.0, \"spread\": 0.04"), 1,
     "base 95.00-105.00, this 105.84-110.16"},
};

Test(bench_compare, ranges_apart_decide_a_regression_not_the_ratio)
{
    for (size_t i = 0; i < sizeof range_cases / sizeof range_cases[0]; i++) {
        const range_case *c = &range_cases[i];
        char b[1024], t[1024];
        bench_run rb = load(one_config(b, sizeof b, c->base, false));
        bench_run rc = load(one_config(t, sizeof t, c->cur, false));
        bench_compare_summary s;
        char *text = compare_text(&rb, &rc, 0.02, &s);
        cr_expect_eq(s.regressions, c->regressions, "%s:\n%s", c->why, text);
        if (c->shows != NULL)
            cr_expect_not_null(strstr(text, c->shows), "%s: no '%s'\n%s", c->why, c->shows, text);
        compare_free(text, &rb, &rc);
    }
}

Test(bench_compare, noisy_marks_only_the_cells_not_flagged)
{
    /* A noisy configuration (in this run): packed-graph's ranges are apart (a regression, '!'),
     * row-graph's overlap ('~'), fused is faster with its range below the base's ('+'). */
    char b[1024], c[1024];
    bench_run rb = load(one_config(
        b, sizeof b,
        "\"row_graph\": {\"status\": \"ok\", \"median_us\": 50.0, \"min_us\": 45.0, "
        "\"max_us\": 70.0}, \"packed_graph\": {\"status\": \"ok\", \"median_us\": 20.0, "
        "\"min_us\": 19.5, \"max_us\": 20.5}, \"fused\": {\"status\": \"ok\", \"median_us\": "
        "30.0, \"min_us\": 29.0, \"max_us\": 31.0}",
        false));
    bench_run rc = load(one_config(
        c, sizeof c,
        "\"row_graph\": {\"status\": \"ok\", \"median_us\": 60.0, \"min_us\": 55.0, "
        "\"max_us\": 80.0}, \"packed_graph\": {\"status\": \"ok\", \"median_us\": 24.0, "
        "\"min_us\": 23.0, \"max_us\": 30.0}, \"fused\": {\"status\": \"ok\", \"median_us\": "
        "25.0, \"min_us\": 24.0, \"max_us\": 26.0}",
        true));
    bench_compare_summary s;
    char *text = compare_text(&rb, &rc, 0.02, &s);
    cr_expect_eq(s.regressions, 1, "%s", text);
    cr_expect_eq(s.improvements, 1, "%s", text);
    cr_expect_eq(s.noisy, 1, "%s", text);
    /* Each mark the text must show, and why. */
    static const struct {
        const char *mark, *why;
    } marks[] = {
        {"1.200x~", "row-graph overlaps: noisy mark"},
        {"1.200x!", "packed-graph apart: flagged"},
        {"0.833x+", "fused apart: flagged"},
        {"  noisy\n", "the row's note says noisy"},
    };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        cr_expect_not_null(strstr(text, marks[i].mark), "%s\n%s", marks[i].why, text);
    compare_free(text, &rb, &rc);
}

Test(bench_compare, reads_a_schema_1_file)
{
    bench_run old = load(schema1_json);
    cr_expect_eq(old.schema_version, 1);
    cr_expect_str_eq(old.library_version, "1.0.0");
    cr_expect_str_eq(old.commit, "cccc333");
    cr_expect_str_eq(old.backend, "cpu");
    cr_expect(old.quick);
    cr_assert_eq(old.n, 2);
    const bench_run_entry *e = entry(&old, "small", 2, 1);
    cr_assert_not_null(e);
    cr_expect(e->ok);
    cr_expect(e->v[BV_ROW_EAGER].present && e->v[BV_ROW_EAGER].ok);
    cr_expect(fabs(e->v[BV_ROW_EAGER].spread - 0.6) < 1e-12, "spread from min and max");
    cr_expect(e->noisy, "a 60%% spread is noisy");
    cr_expect(!e->v[BV_FUSED].present);
    cr_expect(!entry(&old, "small", 4, 1)->ok);

    /* Compared with itself: every timed pair at 1.000x, nothing flagged. */
    bench_compare_summary s;
    char *text = compare_text(&old, &old, 0.02, &s);
    cr_expect_eq(s.pairs, 2);
    cr_expect(fabs(s.geomean - 1.0) < 1e-15);
    cr_expect_eq(s.regressions + s.improvements + s.missing + s.added, 0, "%s", text);
    free(text);
    bench_run_free(&old);
}

Test(bench_compare, refuses_what_is_not_a_bench_file)
{
    bench_run run;
    cr_expect_eq(bench_run_parse("{\"tool\": \"other\", \"results\": []}", "x", &run), -1);
    cr_expect_not_null(strstr(bench_error, "not a memra_bench result"), "%s", bench_error);
    cr_expect_eq(bench_run_parse("{\"tool\": \"memra_bench\", \"results\": [1,]}", "x", &run), -1);
    cr_expect_not_null(strstr(bench_error, "not JSON: line 1"), "%s", bench_error);
    cr_expect_eq(bench_run_parse("{\"tool\": \"memra_bench\", \"schema_version\": 99, "
                                 "\"results\": []}",
                                 "x", &run),
                 -1);
    cr_expect_not_null(strstr(bench_error, "newer"), "%s", bench_error);
    cr_expect_eq(
        bench_run_parse("{\"tool\": \"memra_bench\", \"results\": [{\"t\": 1}]}", "x", &run), -1);
    cr_expect_eq(bench_run_load("/nonexistent/bench.json", &run), -1);
    cr_expect_not_null(strstr(bench_error, "cannot read"), "%s", bench_error);
}

Test(bench_json, parses_escapes_nesting_and_reports_the_line)
{
    bj_value v;
    char err[128];
    cr_assert_eq(bj_parse("{\"a\": [1, -2.5e3, true, null, {\"b\": \"x\\u00e9\\n\\\"\"}],"
                          " \"c\": \"\\ud83d\\ude00\"}",
                          &v, err, sizeof err),
                 0, "%s", err);
    const bj_value *a = bj_get(&v, "a");
    cr_assert_not_null(a);
    cr_assert_eq(a->type, BJ_ARR);
    cr_assert_eq(a->n, 5);
    cr_expect_eq(a->items[1].num, -2500.0);
    cr_expect(a->items[2].type == BJ_BOOL && a->items[2].b);
    cr_expect_eq(a->items[3].type, BJ_NULL);
    cr_expect_str_eq(bj_str(&a->items[4], "b", ""), "x\xc3\xa9\n\"");
    cr_expect_str_eq(bj_str(&v, "c", ""), "\xf0\x9f\x98\x80");
    cr_expect_eq(bj_num(&v, "missing", 7.0), 7.0);
    bj_free(&v);
    cr_expect_eq(bj_parse("{\n\"a\": 1,\n\"b\": tru}", &v, err, sizeof err), -1);
    cr_expect_str_eq(err, "line 3: bad literal");
    cr_expect_eq(bj_parse("[1] 2", &v, err, sizeof err), -1);
    cr_expect_eq(bj_parse("\"open", &v, err, sizeof err), -1);
}

/* ---- the writers ---- */

static bench_env canned_env(void)
{
    bench_env env;
    memset(&env, 0, sizeof env);
    env.backend = MEMRA_BACKEND_CUDA;
    env.build = (bench_build){"dddd444", "gcc 12", "-O2", "-O2", "nvcc 13.0", "-O3", "90", true};
    snprintf(env.library_version, sizeof env.library_version, "1.1.0");
    snprintf(env.abi_version, sizeof env.abi_version, "1.1");
    snprintf(env.commit, sizeof env.commit, "dddd444");
    snprintf(env.device, sizeof env.device, "NVIDIA H200 \"SXM\"");
    snprintf(env.date, sizeof env.date, "2026-12-01T12:00:00Z");
    snprintf(env.cuda_driver, sizeof env.cuda_driver, "13.0");
    env.multiprocessors = 132;
    env.cache_bytes = 60u << 20;
    env.copy_best_gbs = 4000.0;
    env.copy_median_gbs = 3990.0;
    env.copy_method = "copy";
    env.clock_method = "events";
    return env;
}

/* Timed stats from exactly representable samples. */
static void timed(bench_stats *s, double a, double b, double c, uint64_t bytes)
{
    double x[3] = {c, a, b};
    s->status = BS_OK;
    s->reps = 4;
    s->bytes = bytes;
    bench_stats_from_samples(s, x, 3);
}

/* Four configurations: clean; noisy (pack-eager spread 50%); fused FAILED; FAILED outright. */
static void canned_results(bench_result r[4])
{
    memset(r, 0, 4 * sizeof *r);
    for (int i = 0; i < 4; i++) {
        bench_config_init(&r[i].cfg, i < 2 ? "small" : "ornith", i < 2 ? 2 : 16, i < 2 ? 4 : 32,
                          (size_t)(i + 1), 8);
        r[i].ok = i < 3;
        r[i].sets = 4;
        r[i].floor_us = 5.0;
        for (int v = 0; v < BV_COUNT && r[i].ok; v++)
            timed(&r[i].v[v], 10.0 + v, 10.25 + v, 10.5 + v, 40000 * (uint64_t)(v + 1));
    }
    r[0].count_write_us = 6.5;
    r[0].commit_graph_us = 40.0;
    r[0].commit_refill_us = 20.75;
    /* A commit checked and timed whose difference of medians was not positive. */
    r[1].v[BV_COMMIT].status = BS_SKIPPED;
    snprintf(r[1].v[BV_COMMIT].failure, sizeof r[1].v[BV_COMMIT].failure, "not resolved: x");
    timed(&r[1].v[BV_PACK_EAGER], 8.0, 10.0, 13.0, 1000);
    r[2].v[BV_FUSED].status = BS_FAILED;
    snprintf(r[2].v[BV_FUSED].failure, sizeof r[2].v[BV_FUSED].failure,
             "memra_gdn_verify (SNAPSHOTS): INTERNAL: broken, \"quoted\"");
    snprintf(r[3].failure, sizeof r[3].failure, "packed eager: scan o differs");
}

static char *tmp_dir(void)
{
    static char dir[256];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/memra-bench-test.XXXXXX", base && base[0] ? base : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    return dir;
}

/* Removes what bench_report_files() wrote into `dir`, and `dir`. */
static void rm_dir(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bench.csv", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/bench.json", dir);
    unlink(path);
    rmdir(dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n;
    cr_assert_not_null(f, "cannot open %s", path);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(bench_report, json_reads_back)
{
    bench_env env = canned_env();
    bench_result r[4];
    bench_run run;
    char path[512];
    const char *dir = tmp_dir();

    canned_results(r);
    cr_assert_eq(bench_report_files(&env, dir, r, 4), 0, "%s", bench_error);
    snprintf(path, sizeof path, "%s/bench.json", dir);
    cr_assert_eq(bench_run_load(path, &run), 0, "%s", bench_error);
    cr_expect_eq(run.schema_version, BENCH_SCHEMA_VERSION);
    cr_expect_str_eq(run.library_version, "1.1.0");
    cr_expect_str_eq(run.commit, "dddd444");
    cr_expect_str_eq(run.backend, "cuda");
    cr_expect_str_eq(run.device, "NVIDIA H200 \"SXM\"");
    cr_assert_eq(run.n, 4);
    for (int i = 0; i < 3; i++) {
        cr_expect(run.e[i].ok);
        /* The samples are printed with 4 decimals; these are exact in binary. */
        cr_expect_eq(run.e[i].v[BV_ROW_GRAPH].med_us, 11.25);
        cr_expect_eq(run.e[i].v[BV_ROW_GRAPH].min_us, 11.0);
        cr_expect_eq(run.e[i].v[BV_ROW_GRAPH].max_us, 11.5);
    }
    cr_expect(!run.e[0].noisy);
    cr_expect(run.e[1].noisy, "pack-eager's spread of 50%% is above the threshold");
    cr_expect_eq(run.e[1].v[BV_PACK_EAGER].spread, 0.5);
    cr_expect(run.e[2].v[BV_FUSED].present && !run.e[2].v[BV_FUSED].ok);
    cr_expect_str_eq(run.e[2].v[BV_FUSED].failure,
                     "memra_gdn_verify (SNAPSHOTS): INTERNAL: broken, \"quoted\"");
    cr_expect(run.e[2].v[BV_JOURNAL].ok, "the other 1.1 columns are unaffected");
    cr_expect(!run.e[3].ok);
    cr_expect(!run.e[3].v[BV_FUSED].present, "1.1 columns of a FAILED configuration: skipped");

    /* Written and read back, a run compares with itself as identical. */
    bench_compare_summary s;
    char *text = compare_text(&run, &run, 0.0, &s);
    cr_expect_eq(s.regressions, 0, "%s", text);
    cr_expect_eq(s.pairs, 3 * BV_COUNT - 2, "fused FAILED in one, commit skipped in another");
    cr_expect_eq(s.geomean, 1.0);
    free(text);
    bench_run_free(&run);

    /* The JSON carries the provenance and the statistics the README documents. */
    const char *json = slurp(path);
    static const char *const keys[] = {
        "\"schema_version\": 2",
        "\"commit\": \"dddd444\"",
        "\"nvcc\": \"nvcc 13.0\"",
        "\"cuda_driver\": \"13.0\"",
        "\"multiprocessors\": 132",
        "\"noisy_spread\": 0.100",
        "\"mad_us\": ",
        "\"samples_us\": [10.0000, 10.2500, 10.5000]",
        "\"gb_per_s\": 3.902",
        "\"noisy\": true",
        "\"count_write_us\": 6.5,",
        "\"count_write_us\": null",
        "\"graph_median_us\": 40.0000, \"refill_median_us\": 20.7500",
        "\"commit\": \"median of a graph of the refill verify",
        "\"commit\": {\"status\": \"skipped\", \"bytes\": 400000, \"note\": \"not resolved: x\"}"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect_not_null(strstr(json, keys[i]), "bench.json lacks %s", keys[i]);
    rm_dir(dir);
}

Test(bench_report, csv_rows_have_the_header_width)
{
    bench_env env = canned_env();
    bench_result r[4];
    char path[512];
    const char *dir = tmp_dir();
    size_t header_fields = 0, lines = 0;

    canned_results(r);
    cr_assert_eq(bench_report_files(&env, dir, r, 4), 0, "%s", bench_error);
    snprintf(path, sizeof path, "%s/bench.csv", dir);
    char *csv = slurp(path);
    for (char *line = strtok(csv, "\n"); line != NULL; line = strtok(NULL, "\n"), lines++) {
        size_t fields = 1;
        for (char *p = line; *p; p++)
            fields += *p == ',';
        if (lines == 0)
            header_fields = fields;
        else
            cr_expect_eq(fields, header_fields, "line %zu has %zu fields, the header %zu", lines,
                         fields, header_fields);
    }
    cr_expect_eq(lines, 5);
    cr_expect_eq(header_fields, 17 + 11 * BV_COUNT + 1);
    rm_dir(dir);
}

static char *report_text(void (*fn)(FILE *, const bench_env *, const bench_result *, size_t),
                         const bench_env *env, const bench_result *r, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    fn(f, env, r, n);
    fclose(f);
    return buf;
}

static void line_fn(FILE *f, const bench_env *env, const bench_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bench_report_line(f, env, &r[i]);
}

static void summary_fn(FILE *f, const bench_env *env, const bench_result *r, size_t n)
{
    bench_report_summary(f, env, r, n, 1.5);
}

Test(bench_report, table_lines_mark_noisy_and_failed)
{
    bench_env env = canned_env();
    bench_result r[4];
    canned_results(r);
    char *text = report_text(line_fn, &env, r, 4);
    char *first = strstr(text, "small    1   8"), *second = strstr(text, "small    2   8");
    cr_assert(first != NULL && second != NULL && first < second, "%s", text);
    *second = '\0';
    cr_expect_null(strstr(first, "noisy"), "the clean row is marked noisy:\n%s", first);
    *second = 's';
    cr_expect_not_null(strstr(second, "ok noisy"), "%s", text);
    cr_expect_not_null(strstr(text, "FAILED: packed eager: scan o differs"), "%s", text);
    cr_expect_not_null(strstr(text, "    fused FAILED: memra_gdn_verify (SNAPSHOTS): INTERNAL"),
                       "%s", text);
    /* GB/s: bytes / median: 40000 x 4 bytes / 13.25 us. */
    char want[32];
    snprintf(want, sizeof want, "%.1f", 160000.0 / 13.25 / 1e3);
    cr_expect_not_null(strstr(text, want), "no %s in:\n%s", want, text);
    /* The host write of the counts: its own line, where it was measured only. */
    cr_expect_not_null(strstr(text, "\n  count write (host to device, 8 words): 6.50 us\n"), "%s",
                       text);
    cr_expect_null(strstr(strstr(text, "count write") + 1, "count write"), "%s", text);
    cr_expect_not_null(strstr(text, "\n    commit not timed: not resolved: x\n"), "%s", text);
    free(text);
}

Test(bench_report, summary_counts_and_geomean)
{
    bench_env env = canned_env();
    bench_result r[4];
    canned_results(r);
    char *text = report_text(summary_fn, &env, r, 4);
    char want[160];
    /* row-graph / pack-graph = 11.25 / 13.25 in each of the three checked configurations. */
    snprintf(want, sizeof want, "geometric mean: %.3fx over 3 configurations", 11.25 / 13.25);
    cr_expect_not_null(strstr(text, want), "no '%s' in:\n%s", want, text);
    cr_expect_not_null(strstr(text, "4 configurations, 3 checked and timed, 1 FAILED, 1 noisy"),
                       "%s", text);
    cr_expect_not_null(strstr(text, "fused FAILED in 1 of 3 checked configurations"), "%s", text);
    /* pack-graph's floor fraction: its bytes at 4000 GB/s over its median, the same in every
     * configuration (best and worst alike). */
    snprintf(want, sizeof want, "fl%% pack-graph   best %5.1f%%", 100.0 * 160000.0 / 4e6 / 13.25);
    cr_expect_not_null(strstr(text, want), "no '%s' in:\n%s", want, text);
    free(text);
}
