/*
 * memra_bench: the main benchmark (`make bench`). See bench.h for the layout of the sources
 * and README.md for how to read the table.
 *
 * For every configuration (shape, T, B) it builds several independent sets of buffers, checks
 * that the packed program gives bit for bit what the per-row chain gives (refusing to time a
 * wrong result), times the four 1.0 variants, then times the host write of the accepted counts
 * alone, checks each 1.1 variant against the 1.0 packed program and times it, and relates every
 * time to the bytes the variant moves at the copy bandwidth measured at the start of the same run.
 * With --compare it then sets the run beside an earlier bench.json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "support/support.h"

#if defined(__has_include)
#if __has_include("build_info.h")
#include "build_info.h"
#endif
#endif
#ifndef MEMRA_BENCH_COMMIT
#define MEMRA_BENCH_COMMIT "unknown"
#define MEMRA_BENCH_CC "unknown"
#define MEMRA_BENCH_CFLAGS_LIB "unknown"
#define MEMRA_BENCH_CFLAGS "unknown"
#define MEMRA_BENCH_NVCC ""
#define MEMRA_BENCH_NVCCFLAGS ""
#define MEMRA_BENCH_CUDA_ARCHS ""
#define MEMRA_BENCH_LIB_CUDA 0
#endif

/* The two model shapes the tests use too ("small" and "ornith"). */
static const tu_shape_def *const shapes = tu_shapes;

/* What a run does: the sweep (bench.csv and bench.json), each packed operation timed alone, or
 * the fingerprints of the packed verify's outputs (bench/hash.c). */
enum { MODE_SWEEP, MODE_PER_OP, MODE_HASH, MODE_COPY };

#define MAX_LIST 16

/* Exit statuses (also in usage() and bench/README.md). */
enum { EXIT_FAILED = 1, EXIT_SETUP = 2, EXIT_REGRESSION = 3 };

typedef struct options {
    const char *out;
    const char *backend;
    const char *shape;
    const char *commit;
    const char *compare; /* base bench.json */
    const char *against; /* compare this file instead of running */
    int mode;
    bool fail_on_regression;
    double threshold;
    int device;
    bool quick;
    bool with_11;
    size_t t[MAX_LIST], n_t;
    size_t b[MAX_LIST], n_b;
    size_t samples;
} options;

static void usage(FILE *f)
{
    fputs("usage: memra_bench [--out DIR] [--quick] [--backend auto|cuda|cpu] [--device N]\n"
          "                   [--shape small|ornith|all] [--t 1,2,4] [--b 1,8] [--samples N]\n"
          "                   [--no-1.1] [--commit TEXT] [--mode sweep|per-op|hash|copy]\n"
          "                   [--compare BASE.json [--against NEW.json] [--threshold PCT]\n"
          "                    [--fail-on-regression]]\n"
          "Checks that the packed GDN verify is bit-identical to the per-row chain and that the\n"
          "1.1 verify (fused, fused-nosnap, journal), rollback and commit are bit-identical to\n"
          "the packed program, then times every variant against the bytes it moves at the copy\n"
          "bandwidth (accepted counts in device memory; their host write timed on its own).\n"
          "Writes DIR/bench.csv and DIR/bench.json (DIR defaults to results); bench/plot.sh\n"
          "draws DIR/bench.png. --backend defaults to $MEMRA_BACKEND, else auto (CUDA when a\n"
          "device is usable, else the CPU). Defaults: T 1,2,4,8,16; B 1,8,32 on the GPU and\n"
          "1,8 on the CPU; --quick runs a reduced sweep with fewer samples. --no-1.1 times the\n"
          "1.0 variants only. Progress goes to stderr, the table to stdout.\n"
          "--compare BASE.json: after the run, prints it beside BASE (time ratios, geometric\n"
          "means, regressions beyond both runs' spread and --threshold, default 2%); with\n"
          "--against NEW.json it compares the two files and runs nothing.\n"
          "Exit status: 0 all configurations checked and timed, 1 some configuration or column\n"
          "FAILED, 2 setup error (or an unreadable file), 3 a flagged regression under\n"
          "--fail-on-regression.\n"
          "--mode per-op: after the same check, times each operation of the packed program\n"
          "alone (conv, prep, scan, scan without snapshots), graph-replayed, beside the whole\n"
          "program, then the FINAL_ONLY verify whole, its prologue and row loop alone (CUDA\n"
          "only) and the JOURNAL verify, over the same sweep; prints a table, writes no file.\n"
          "--mode hash: prints the fingerprints of every output of the 1.0 packed verify on\n"
          "fixed inputs (tools/gpu/hash-1.0.0.txt holds those of libmemra 1.0.0 on an H200)\n"
          "and runs nothing else.\n"
          "--mode copy: times the 1.2 batched state copy (the restore of 36 layers' states and\n"
          "rings of the ornith shape at B = 8) against one copy per state and per ring and\n"
          "against the bandwidth floor, eager and graph-replayed; prints a table.\n",
          f);
}

static int parse_list(const char *s, size_t *out, size_t *n)
{
    char *end;
    *n = 0;
    while (*s) {
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v == 0 || v > 4096 || *n == MAX_LIST || (*end != ',' && *end != '\0'))
            return -1;
        out[(*n)++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    return *n > 0 ? 0 : -1;
}

/* Where the value of the string option `name` goes, or NULL when `name` is not one. */
static const char **string_option(options *o, const char *name)
{
    const struct {
        const char *name;
        const char **dst;
    } opts[] = {{"--out", &o->out},       {"--backend", &o->backend}, {"--shape", &o->shape},
                {"--commit", &o->commit}, {"--compare", &o->compare}, {"--against", &o->against}};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (strcmp(name, opts[i].name) == 0)
            return opts[i].dst;
    return NULL;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out = "results";
    o->backend = getenv("MEMRA_BACKEND");
    o->shape = "all";
    o->commit = MEMRA_BENCH_COMMIT;
    o->threshold = 0.02;
    o->with_11 = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = true;
            takes = false;
        } else if (strcmp(a, "--no-1.1") == 0) {
            o->with_11 = false;
            takes = false;
        } else if (strcmp(a, "--fail-on-regression") == 0) {
            o->fail_on_regression = true;
            takes = false;
        } else if (val == NULL) {
            fprintf(stderr, "memra_bench: %s needs a value\n", a);
            return -1;
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(val, "sweep") == 0) {
                o->mode = MODE_SWEEP;
            } else if (strcmp(val, "per-op") == 0) {
                o->mode = MODE_PER_OP;
            } else if (strcmp(val, "hash") == 0) {
                o->mode = MODE_HASH;
            } else if (strcmp(val, "copy") == 0) {
                o->mode = MODE_COPY;
            } else {
                fprintf(stderr, "memra_bench: mode must be sweep, per-op, hash or copy, got '%s'\n",
                        val);
                return -1;
            }
        } else if (string_option(o, a) != NULL) {
            *string_option(o, a) = val;
        } else if (strcmp(a, "--threshold") == 0) {
            char *end;
            double pct = strtod(val, &end);
            if (end == val || *end != '\0' || pct < 0.0 || pct >= 100.0) {
                fprintf(stderr, "memra_bench: --threshold takes a percentage, got '%s'\n", val);
                return -1;
            }
            o->threshold = pct / 100.0;
        } else if (strcmp(a, "--device") == 0) {
            o->device = atoi(val);
        } else if (strcmp(a, "--t") == 0) {
            if (parse_list(val, o->t, &o->n_t) != 0) {
                fprintf(stderr, "memra_bench: bad --t list '%s'\n", val);
                return -1;
            }
        } else if (strcmp(a, "--b") == 0) {
            if (parse_list(val, o->b, &o->n_b) != 0) {
                fprintf(stderr, "memra_bench: bad --b list '%s'\n", val);
                return -1;
            }
        } else if (strcmp(a, "--samples") == 0) {
            o->samples = strtoul(val, NULL, 10);
            if (o->samples > BENCH_MAX_SAMPLES)
                o->samples = BENCH_MAX_SAMPLES;
        } else {
            fprintf(stderr, "memra_bench: unknown argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
        if (takes)
            i++;
    }
    if (o->backend == NULL || o->backend[0] == '\0')
        o->backend = "auto";
    if (strcmp(o->backend, "auto") != 0 && strcmp(o->backend, "cuda") != 0 &&
        strcmp(o->backend, "cpu") != 0) {
        fprintf(stderr, "memra_bench: backend must be auto, cuda or cpu, got '%s'\n", o->backend);
        return -1;
    }
    if (strcmp(o->shape, "all") != 0 && strcmp(o->shape, "small") != 0 &&
        strcmp(o->shape, "ornith") != 0) {
        fprintf(stderr, "memra_bench: shape must be small, ornith or all, got '%s'\n", o->shape);
        return -1;
    }
    if (o->device < 0) {
        fprintf(stderr, "memra_bench: --device must be >= 0\n");
        return -1;
    }
    if ((o->against != NULL || o->fail_on_regression) && o->compare == NULL) {
        fprintf(stderr, "memra_bench: --against and --fail-on-regression need --compare\n");
        return -1;
    }
    return 0;
}

static int create_engine(bench_env *env, const options *o)
{
    MemraEngineOptions opt;
    MemraStatus st;
    memra_engine_options_init(&opt);
    opt.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    opt.device_ordinal = o->device;
    env->device_ordinal = o->device;
    if (strcmp(o->backend, "cpu") != 0) {
#if MEMRA_BENCH_CUDA
        opt.backend = MEMRA_BACKEND_CUDA;
        st = memra_engine_create(&opt, &env->engine);
        if (st == MEMRA_STATUS_OK) {
            env->backend = MEMRA_BACKEND_CUDA;
            return 0;
        }
        if (st != MEMRA_STATUS_NO_DEVICE || strcmp(o->backend, "cuda") == 0)
            return bench_fail_status("creating a CUDA engine", st);
        snprintf(env->notice, sizeof env->notice,
                 "no usable CUDA device (%s): benchmarking the CPU backend",
                 memra_last_error_message());
#else
        if (strcmp(o->backend, "cuda") == 0) {
            bench_fail("--backend cuda: this bench was built with CUDA=0");
            return -1;
        }
        snprintf(env->notice, sizeof env->notice,
                 "built with CUDA=0: benchmarking the CPU backend");
#endif
    }
    opt.backend = MEMRA_BACKEND_CPU;
    st = memra_engine_create(&opt, &env->engine);
    if (st != MEMRA_STATUS_OK)
        return bench_fail_status("creating a CPU engine", st);
    env->backend = MEMRA_BACKEND_CPU;
    return 0;
}

/* How long to time and how many sets to rotate through, per backend. */
static void timing_policy(bench_env *env, const options *o)
{
    if (env->backend == MEMRA_BACKEND_CUDA) {
        /* Revisit a set only after four L2s' worth of other sets has gone through the cache.
         * The smallest variants (fused-nosnap, rollback of the small shape) move about half a
         * MiB per verify, hence up to 512 sets. */
        env->rotate_bytes = 4 * env->cache_bytes;
        if (env->rotate_bytes < (UINT64_C(128) << 20))
            env->rotate_bytes = UINT64_C(128) << 20;
        env->max_sets = 512;
        env->sample_us = 2000.0;
        env->samples = o->quick ? 7 : 15;
        env->warmup_us = 100e3;
        env->variant_us = o->quick ? 0.3e6 : 1.0e6;
        env->clock_method = "CUDA events on the engine's stream around each sample";
    } else {
        /* The CPU kernels are compute-bound; a few sets are enough to keep the last-level cache
         * from holding a whole rotation for the small shapes. */
        env->rotate_bytes = UINT64_C(64) << 20;
        env->max_sets = o->quick ? 2 : 16;
        env->sample_us = o->quick ? 2e3 : 20e3;
        env->samples = o->quick ? 3 : 7;
        env->warmup_us = o->quick ? 5e3 : 50e3;
        /* The quick sweep only has to show that every variant runs (CI's smoke test on a
         * machine of two cores): a few short samples each. */
        env->variant_us = o->quick ? 0.06e6 : 2.0e6;
        env->clock_method = "CLOCK_MONOTONIC around each sample (the CPU backend is synchronous)";
    }
    if (o->samples > 0)
        env->samples = o->samples;
}

/* What one rep replays: a variant, an operation of the packed program alone (enum tu_op) or
 * an extra graph (enum bench_extra). */
enum { REP_VARIANT, REP_OP, REP_EXTRA };

typedef struct rep_ctx {
    bench_work *w;
    int kind, which;
    size_t sets;
} rep_ctx;

static int one_rep(void *user, size_t rep)
{
    const rep_ctx *x = user;
    if (x->kind == REP_OP)
        return bench_work_rep_op(x->w, x->which, rep % x->sets);
    if (x->kind == REP_EXTRA)
        return bench_work_rep_extra(x->w, x->which, rep % x->sets);
    return bench_work_rep(x->w, x->which, rep % x->sets);
}

/* One sample of reps first .. first + n - 1; a variant's accepted counts for it are written
 * into every set's buffer first, before the sample's clock starts. */
static int sample(bench_env *env, rep_ctx *x, size_t first, size_t n, double *us)
{
    if (x->kind == REP_VARIANT && bench_work_before_sample(x->w, x->which) != 0)
        return -1;
    return bench_time_reps(env, one_rep, x, first, n, us);
}

/* Times one variant: a first rep to estimate, a warm-up over the whole rotation (within the
 * warm-up budget), then samples of `reps` back-to-back verifies each. The rotation continues
 * across samples, so a set is never reused before the others have all run. */
static int measure_reps(bench_env *env, rep_ctx x, bench_stats *out)
{
    size_t rot = 0, warm, reps, n;
    double us, est, per[BENCH_MAX_SAMPLES];

    if (sample(env, &x, rot, 1, &us) != 0)
        return -1;
    rot += 1;
    est = us > 0.01 ? us : 0.01;
    /* The whole rotation, and at least 8 reps when they are cheap: a single rep is a poor
     * estimate of a variant whose cost varies from rep to rep. */
    warm = (size_t)(env->warmup_us / est);
    if (warm > (x.sets > 8 ? x.sets : 8))
        warm = x.sets > 8 ? x.sets : 8;
    if (warm < 2)
        warm = 2;
    if (sample(env, &x, rot, warm, &us) != 0)
        return -1;
    rot += warm;
    est = us / (double)warm > 0.01 ? us / (double)warm : 0.01;

    reps = (size_t)(env->sample_us / est + 0.999);
    if (reps < 1)
        reps = 1;
    n = env->samples;
    if ((double)n * (double)reps * est > env->variant_us) {
        n = (size_t)(env->variant_us / ((double)reps * est));
        if (n < 3)
            n = 3;
    }
    if (n > BENCH_MAX_SAMPLES)
        n = BENCH_MAX_SAMPLES;
    /* A rep's cost may vary with its set and its accepted counts (a rollback of all T rows
     * copies nothing when T is even), so a sample far longer than intended sets the reps of
     * the next ones, and the budget ends the samples early, after three at least. */
    {
        double spent = 0.0;
        size_t taken = 0, max_reps = reps;
        for (size_t s = 0; s < n; s++) {
            if (sample(env, &x, rot, reps, &us) != 0)
                return -1;
            rot += reps;
            spent += us;
            per[taken++] = us / (double)reps;
            if (reps > max_reps)
                max_reps = reps;
            if (us > 2.0 * env->sample_us) {
                reps = (size_t)(env->sample_us / per[taken - 1] + 0.999);
                if (reps < 1)
                    reps = 1;
            }
            if (spent > env->variant_us && taken >= 3)
                break;
        }
        out->reps = max_reps;
        bench_stats_from_samples(out, per, taken);
    }
    return 0;
}

static int measure(bench_env *env, bench_work *w, int variant, bench_stats *out)
{
    const rep_ctx x = {w, REP_VARIANT, variant, bench_work_sets(w)};
    return measure_reps(env, x, out);
}

static int measure_extra(bench_env *env, bench_work *w, int extra, bench_stats *out)
{
    const rep_ctx x = {w, REP_EXTRA, extra, bench_work_sets(w)};
    return measure_reps(env, x, out);
}

/* The commit column: the graph of the refill verify and the commit, and the graph of the
 * refill verify alone, both over the same rotation; the commit's observations are the first
 * graph's less the second's median, so its median is the difference of the two medians.
 * Returns 0; 1 when that difference is not positive (the run's noise exceeds the commit; no
 * time, described in bench_error); -1 on a failure. */
static int measure_commit(bench_env *env, bench_work *w, bench_result *r)
{
    bench_stats both, refill;
    double x[BENCH_MAX_SAMPLES];
    uint64_t bytes = r->v[BV_COMMIT].bytes;
    if (measure(env, w, BV_COMMIT, &both) != 0 || measure_extra(env, w, BX_REFILL, &refill) != 0)
        return -1;
    r->commit_graph_us = both.med_us;
    r->commit_refill_us = refill.med_us;
    if (both.med_us <= refill.med_us) {
        bench_fail("not resolved: the median of the refill verify and the commit (%.3f us) is "
                   "not above the refill verify's alone (%.3f us)",
                   both.med_us, refill.med_us);
        return 1;
    }
    for (size_t i = 0; i < both.samples; i++)
        x[i] = both.sample_us[i] - refill.med_us;
    bench_stats_from_samples(&r->v[BV_COMMIT], x, both.samples);
    r->v[BV_COMMIT].reps = both.reps;
    r->v[BV_COMMIT].bytes = bytes;
    return 0;
}

static int one_count_write(void *user, size_t rep)
{
    (void)rep;
    return bench_work_write_counts(user);
}

/* One host write of B accepted counts, alone: the median of a few hundred writes, each timed
 * as a sample of one rep. */
static int measure_count_write(bench_env *env, bench_work *w, double *out_us)
{
    double us[300];
    const size_t n = env->quick ? 100 : 300;
    for (size_t i = 0; i < n; i++)
        if (bench_time_reps(env, one_count_write, w, i, 1, &us[i]) != 0)
            return -1;
    qsort(us, n, sizeof *us, bench_cmp_double);
    *out_us = 0.5 * (us[(n - 1) / 2] + us[n / 2]);
    return 0;
}

/* A device fault is sticky: nothing after it can run on this engine. */
static bool device_faulted(bench_env *env)
{
    return memra_engine_synchronize(env->engine) == MEMRA_STATUS_DEVICE_ERROR;
}

static void fail_variant(bench_result *r, int v, const char *why)
{
    r->v[v].status = BS_FAILED;
    snprintf(r->v[v].failure, sizeof r->v[v].failure, "%s", why);
}

/* The 1.1 variants, each on its own: check on set 0, capture the other sets, time. A failure
 * marks that variant's column and moves on to the next. Returns false when the device
 * faulted (the sweep must stop). */
static bool run_11(bench_env *env, bench_work *w, bench_result *r)
{
    static const int order[] = {BV_FUSED,       BV_FUSED_NOSNAP, BV_JOURNAL,
                                BV_JOURNAL_ALL, BV_ROLLBACK,     BV_COMMIT};
    /* The host write the timed columns no longer hold; where it fails, the columns that read
     * accepted counts fail with their own messages. */
    if (measure_count_write(env, w, &r->count_write_us) != 0)
        r->count_write_us = 0.0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const int v = order[i];
        char why[sizeof r->v[v].failure] = "";
        double t0 = bench_now_us(), t1;
        int rc;
        if (v == BV_JOURNAL_ALL) {
            /* The journal check covers both replays (accepted counts drawn and all T). */
            rc = r->v[BV_JOURNAL].status == BS_FAILED ? 1 : 0;
            if (rc != 0)
                snprintf(why, sizeof why, "%s", r->v[BV_JOURNAL].failure);
        } else {
            size_t words = 0;
            rc = bench_work_check_11(w, v, why, sizeof why, &words);
            if (rc < 0)
                snprintf(why, sizeof why, "%.390s", bench_error);
            r->compared_words += words;
        }
        t1 = bench_now_us();
        r->check_s += (t1 - t0) / 1e6;
        t0 = t1;
        if (rc == 0 && (bench_work_capture_11(w, v) != 0 ||
                        (v == BV_COMMIT && bench_work_capture_extra(w, BX_REFILL) != 0))) {
            snprintf(why, sizeof why, "%.390s", bench_error);
            rc = -1;
        }
        t1 = bench_now_us();
        r->capture_s += (t1 - t0) / 1e6;
        t0 = t1;
        if (rc == 0) {
            int m = bench_work_prepare(w, v) != 0 ? -1
                    : v == BV_COMMIT              ? measure_commit(env, w, r)
                                                  : measure(env, w, v, &r->v[v]);
            if (m != 0)
                snprintf(why, sizeof why, "timing: %.380s", bench_error);
            rc = m < 0 ? -1 : rc;
            if (m > 0) {
                /* Timed and checked, but no time to report: not a failure of the column. */
                r->v[v].status = BS_SKIPPED;
                snprintf(r->v[v].failure, sizeof r->v[v].failure, "%.390s", bench_error);
                r->timing_s += (bench_now_us() - t0) / 1e6;
                continue;
            }
        }
        r->timing_s += (bench_now_us() - t0) / 1e6;
        if (rc != 0) {
            fail_variant(r, v, why);
            if (device_faulted(env)) {
                for (size_t k = i + 1; k < sizeof order / sizeof order[0]; k++)
                    fail_variant(r, order[k], "not run: the device faulted");
                return false;
            }
        } else {
            r->v[v].status = BS_OK;
        }
    }
    r->accepted_seed = bench_work_accepted_seed(w);
    r->journal_mean_accepted = bench_work_journal_mean_accepted(w);
    return true;
}

/* Starts `r` for configuration `c`: the floors, each variant's bytes, and how many sets to
 * rotate through. Returns false, with the reason in r->failure, when not one set fits in the
 * memory budget. */
static bool size_config(bench_env *env, const bench_config *c, bench_result *r)
{
    uint64_t set_bytes, budget, min_bytes;
    size_t sets;

    memset(r, 0, sizeof *r);
    r->cfg = *c;
    r->floor_bytes = bench_floor_bytes(c, &r->floor_state_bytes);
    r->floor_us = (double)r->floor_bytes / (env->copy_best_gbs * 1e3);
    r->floor_state_us = (double)r->floor_state_bytes / (env->copy_best_gbs * 1e3);
    min_bytes = r->floor_bytes;
    for (int v = 0; v < BV_COUNT; v++) {
        r->v[v].bytes = bench_variant_bytes(c, v);
        r->v[v].status = BS_SKIPPED;
        if ((v < BV_FIRST_11 || env->with_11) && r->v[v].bytes < min_bytes)
            min_bytes = r->v[v].bytes;
    }

    /* Enough sets that each is revisited only after rotate_bytes of other traffic by the
     * variant that moves the fewest bytes, as many as the memory budget allows. */
    sets = (size_t)((env->rotate_bytes + min_bytes - 1) / min_bytes);
    if (sets > env->max_sets)
        sets = env->max_sets;
    if (sets < 1)
        sets = 1;
    set_bytes = bench_set_bytes(c);
    budget = bench_memory_budget(env);
    if (set_bytes > budget) {
        snprintf(r->failure, sizeof r->failure,
                 "one set needs %.0f MiB, only %.0f MiB may be allocated", set_bytes / 1048576.0,
                 budget / 1048576.0);
        return false;
    }
    if ((uint64_t)sets * set_bytes > budget)
        sets = (size_t)(budget / set_bytes);
    r->sets = sets;
    return true;
}

/* Runs one configuration. Returns false when the device faulted. */
static bool run_config(bench_env *env, const bench_config *c, bench_result *r)
{
    bench_work *w = NULL;
    double t0 = bench_now_us(), t1;
    int rc;
    bool alive = true;

    if (!size_config(env, c, r))
        return true;
    if (bench_work_create(env, c, r->sets, &w) != 0) {
        snprintf(r->failure, sizeof r->failure, "%s", bench_error);
        return !device_faulted(env);
    }
    t1 = bench_now_us();
    r->setup_s = (t1 - t0) / 1e6;
    t0 = t1;
    rc = bench_work_check(w, r->failure, sizeof r->failure, &r->compared_words);
    if (rc < 0)
        snprintf(r->failure, sizeof r->failure, "%s", bench_error);
    t1 = bench_now_us();
    r->check_s = (t1 - t0) / 1e6;
    t0 = t1;
    if (rc == 0 && bench_work_capture(w) != 0) {
        snprintf(r->failure, sizeof r->failure, "%s", bench_error);
        rc = -1;
    }
    t1 = bench_now_us();
    r->capture_s = (t1 - t0) / 1e6;
    t0 = t1;
    for (int v = 0; v < BV_FIRST_11 && rc == 0; v++) {
        if (measure(env, w, v, &r->v[v]) != 0) {
            snprintf(r->failure, sizeof r->failure, "timing %s: %.600s", bench_variant_key[v],
                     bench_error);
            rc = -1;
        } else {
            r->v[v].status = BS_OK;
        }
    }
    r->timing_s = (bench_now_us() - t0) / 1e6;
    r->ok = rc == 0;
    if (!r->ok)
        alive = !device_faulted(env);
    else if (env->with_11)
        alive = run_11(env, w, r);
    bench_work_destroy(w);
    return alive;
}

/* The columns of --mode per-op, each graph-replayed over the rotation of sets: the packed
 * program and its operations alone (1.0), then the FINAL_ONLY verify whole, its two stages
 * alone (CUDA only) and the JOURNAL verify whole (1.2; not with --no-1.1). */
static const struct per_op_col {
    const char *name;
    int kind, which;
    bool is_11, cuda_only;
} per_op_cols[] = {
    {"packed", REP_VARIANT, BV_PACK_GRAPH, false, false},
    {"conv", REP_OP, TU_OP_CONV, false, false},
    {"prep", REP_OP, TU_OP_PREP, false, false},
    {"scan", REP_OP, TU_OP_SCAN, false, false},
    {"scan-nosnap", REP_OP, TU_OP_SCAN_NOSNAP, false, false},
    {"fused-nosnap", REP_VARIANT, BV_FUSED_NOSNAP, true, false},
    {"prologue", REP_EXTRA, BX_PROLOGUE, true, true},
    {"row-loop", REP_EXTRA, BX_ROWS, true, true},
    {"journal", REP_VARIANT, BV_JOURNAL, true, false},
    {"j-prologue", REP_EXTRA, BX_JPROLOGUE, true, true},
    {"j-row-loop", REP_EXTRA, BX_JROWS, true, true},
};
#define PER_OP_COLS (sizeof per_op_cols / sizeof per_op_cols[0])

static int per_op_width(size_t i)
{
    return strlen(per_op_cols[i].name) > 11 ? 12 : 11;
}

/* Checks (the 1.1 verifies: against the 1.0 packed program, bit for bit) and captures column
 * `k` on every set. The stage columns replay the FINAL_ONLY or JOURNAL verify cut down to one
 * kernel: they are timed only where that verify's column passed its check (`passed`, by enum
 * bench_variant). Returns 0, 1 on a mismatch (in `why`), -1 on a failure (in bench_error). */
static int per_op_setup(bench_work *w, const struct per_op_col *k, const bool *passed, char *why,
                        size_t why_len)
{
    size_t words = 0;
    int rc;
    switch (k->kind) {
    case REP_OP:
        return bench_work_capture_op(w, k->which);
    case REP_EXTRA:
        if (!passed[bench_extra_variant(k->which)]) {
            snprintf(why, why_len, "not timed: %s did not pass its check",
                     bench_extra_variant(k->which) == BV_JOURNAL ? "journal" : "fused-nosnap");
            return 1;
        }
        return bench_work_capture_extra(w, k->which);
    default:
        if (!k->is_11)
            return 0;
        rc = bench_work_check_11(w, k->which, why, why_len, &words);
        if (rc != 0)
            return rc;
        if (bench_work_capture_11(w, k->which) != 0 || bench_work_prepare(w, k->which) != 0)
            return -1;
        return 0;
    }
}

/* --mode per-op, one configuration: the 1.0 check, then each column of per_op_cols, checked
 * where it is a 1.1 verify, graph-replayed over the rotation of sets: one table line, then
 * one line per FAILED column. The scan reads the prep outputs the captures' warm-ups left in
 * every set; replayed alone, each operation runs on the ring and state the previous replay
 * left, as the whole program does. Returns false when the device faulted; `*failed` counts a
 * FAILED line or column. */
static bool run_per_op(bench_env *env, const bench_config *c, size_t *failed)
{
    bench_result r;
    bench_stats st[PER_OP_COLS];
    int status[PER_OP_COLS];
    char col_why[PER_OP_COLS][400];
    bench_work *w = NULL;
    char why[sizeof r.failure] = "";
    size_t words = 0;
    int rc = -1;
    bool faulted = false, passed[BV_COUNT] = {false};

    if (!size_config(env, c, &r)) {
        snprintf(why, sizeof why, "%s", r.failure);
    } else if (bench_work_create(env, c, r.sets, &w) != 0) {
        snprintf(why, sizeof why, "%s", bench_error);
    } else if ((rc = bench_work_check(w, why, sizeof why, &words)) < 0 ||
               (rc == 0 && (rc = bench_work_capture(w)) != 0)) {
        snprintf(why, sizeof why, "%s", bench_error);
        rc = -1;
    }
    for (size_t i = 0; i < PER_OP_COLS && rc == 0; i++) {
        const struct per_op_col *k = &per_op_cols[i];
        const rep_ctx x = {w, k->kind, k->which, bench_work_sets(w)};
        int crc;
        memset(&st[i], 0, sizeof st[i]);
        col_why[i][0] = '\0';
        status[i] = BS_SKIPPED;
        if (faulted || (k->is_11 && !env->with_11) ||
            (k->cuda_only && env->backend != MEMRA_BACKEND_CUDA))
            continue;
        crc = per_op_setup(w, k, passed, col_why[i], sizeof col_why[i]);
        if (crc == 0 && measure_reps(env, x, &st[i]) != 0)
            crc = -1;
        if (crc < 0)
            snprintf(col_why[i], sizeof col_why[i], "%.390s", bench_error);
        status[i] = crc == 0 ? BS_OK : BS_FAILED;
        if (crc == 0) {
            if (k->kind == REP_VARIANT)
                passed[k->which] = true;
            continue;
        }
        if (!k->is_11) {
            /* A 1.0 column fails the line, as the 1.0 check does. */
            snprintf(why, sizeof why, "%s: %.560s", k->name, col_why[i]);
            rc = -1;
        }
        faulted = device_faulted(env);
    }
    printf("per-op %-7s %4zu %4zu", c->shape, c->t, c->b);
    if (rc == 0) {
        for (size_t i = 0; i < PER_OP_COLS; i++) {
            if (status[i] == BS_OK)
                printf(" %*.2f", per_op_width(i), st[i].med_us);
            else
                printf(" %*s", per_op_width(i), status[i] == BS_FAILED ? "FAILED" : "-");
            if (i == TU_OP_COUNT)
                printf(" %11.2f", r.floor_us);
        }
        putchar('\n');
        for (size_t i = 0; i < PER_OP_COLS; i++)
            if (status[i] == BS_FAILED) {
                printf("    %s FAILED: %s\n", per_op_cols[i].name, col_why[i]);
                ++*failed;
            }
    } else {
        printf(" FAILED: %s\n", why);
        ++*failed;
    }
    fflush(stdout);
    bench_work_destroy(w);
    return (rc == 0 && !faulted) || !device_faulted(env);
}

/* The quick sweep (CI's smoke test) keeps the production shape to its cheapest verifies. */
static bool in_sweep(const options *o, size_t shape, size_t t, size_t b)
{
    if (strcmp(o->shape, "all") != 0 && strcmp(o->shape, shapes[shape].name) != 0)
        return false;
    return !o->quick || shape == 0 || (b == 1 && t <= 2);
}

/* The T and B lists the command line left out: the full sweep's, or the quick one's. */
static void default_lists(options *o, const bench_env *env)
{
    static const size_t t_full[] = {1, 2, 4, 8, 16}, t_quick[] = {1, 2, 4, 8};
    static const size_t b_gpu[] = {1, 8, 32}, b_cpu[] = {1, 8}, b_quick[] = {1, 8};
    if (o->n_t == 0) {
        const size_t *src = o->quick ? t_quick : t_full;
        o->n_t = o->quick ? sizeof t_quick / sizeof t_quick[0] : sizeof t_full / sizeof t_full[0];
        memcpy(o->t, src, o->n_t * sizeof *src);
    }
    if (o->n_b == 0) {
        const size_t *src = o->quick ? b_quick : env->backend == MEMRA_BACKEND_CUDA ? b_gpu : b_cpu;
        o->n_b = o->quick ? 2 : env->backend == MEMRA_BACKEND_CUDA ? 3 : 2;
        memcpy(o->b, src, o->n_b * sizeof *src);
    }
}

/* --mode per-op over the sweep the options select. */
static int run_per_op_sweep(bench_env *env, options *o)
{
    size_t failed = 0;
    bool alive = true;
    default_lists(o, env);
    printf("memra_bench --mode per-op: %s, %s; copy bandwidth %.1f GB/s (read + write)\n",
           env->backend == MEMRA_BACKEND_CUDA ? "CUDA" : "CPU", env->device, env->copy_best_gbs);
    printf("median us of graph replays; floor: the packed program's bytes at the copy rate\n");
    printf("packed .. scan-nosnap: the 1.0 packed program and each of its operations alone;\n"
           "fused-nosnap: memra_gdn_verify FINAL_ONLY, o only; prologue, row-loop: its two\n"
           "kernels alone (MEMRA_VERIFY_STAGE, CUDA only, '-' elsewhere); journal: JOURNAL mode,\n"
           "accepted counts uniform in 1..T in device memory; j-prologue, j-row-loop: its two\n"
           "kernels alone\n");
    printf("per-op %-7s %4s %4s", "shape", "T", "B");
    for (size_t i = 0; i < PER_OP_COLS; i++) {
        printf(" %*s", per_op_width(i), per_op_cols[i].name);
        if (i == TU_OP_COUNT)
            printf(" %11s", "floor");
    }
    putchar('\n');
    for (size_t si = 0; si < TU_N_SHAPES && alive; si++)
        for (size_t bi = 0; bi < o->n_b && alive; bi++)
            for (size_t ti = 0; ti < o->n_t && alive; ti++) {
                bench_config c;
                if (!in_sweep(o, si, o->t[ti], o->b[bi]))
                    continue;
                bench_config_init(&c, shapes[si].name, shapes[si].num_k, shapes[si].num_v, o->t[ti],
                                  o->b[bi]);
                alive = run_per_op(env, &c, &failed);
                if (!alive)
                    printf("memra_bench: the device faulted (%s); stopping the sweep\n",
                           memra_last_error_message());
            }
    return failed > 0 || !alive ? EXIT_FAILED : 0;
}

/* The header's rule: same major, library minor at least the one compiled against. */
static bool abi_usable(uint32_t abi, uint32_t major, uint32_t minor)
{
    return (abi >> 16) == major && (abi & 0xffff) >= minor;
}

/* Compares the file `cur_path` with `base`; returns the exit status the comparison asks for. */
static int run_compare(const options *o, const bench_run *base, const char *cur_path)
{
    bench_run cur;
    bench_compare_opts copts = {o->threshold};
    bench_compare_summary s;
    if (bench_run_load(cur_path, &cur) != 0) {
        fprintf(stderr, "memra_bench: --compare: %s\n", bench_error);
        return EXIT_SETUP;
    }
    bench_compare(stdout, base, &cur, &copts, &s);
    bench_run_free(&cur);
    return o->fail_on_regression && s.regressions > 0 ? EXIT_REGRESSION : 0;
}

static void join_args(char *out, size_t len, int argc, char **argv)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < argc && used + 1 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

int main(int argc, char **argv)
{
    options o;
    bench_env env;
    bench_run base;
    bench_result *results;
    size_t n_results = 0, n_failed = 0, n_total = 0, cap;
    uint32_t abi = memra_abi_version();
    bool aborted = false, tty = isatty(2) != 0;
    char path[1200];
    double start_us = bench_now_us();
    int status;

    if (parse_args(argc, argv, &o) != 0)
        return EXIT_SETUP;
    /* The base is read first: it may be the very file this run replaces. */
    if (o.compare != NULL && bench_run_load(o.compare, &base) != 0) {
        fprintf(stderr, "memra_bench: --compare: %s\n", bench_error);
        return EXIT_SETUP;
    }
    if (o.against != NULL) {
        status = run_compare(&o, &base, o.against);
        bench_run_free(&base);
        return status;
    }
    if (!abi_usable(abi, MEMRA_VERSION_MAJOR, MEMRA_VERSION_MINOR)) {
        fprintf(stderr,
                "memra_bench: libmemra ABI %u.%u cannot serve this bench (built for %d.%d)\n",
                (unsigned)(abi >> 16), (unsigned)(abi & 0xffff), MEMRA_VERSION_MAJOR,
                MEMRA_VERSION_MINOR);
        return EXIT_SETUP;
    }
    memset(&env, 0, sizeof env);
    env.quick = o.quick;
    env.with_11 = o.with_11;
    env.build =
        (bench_build){MEMRA_BENCH_COMMIT,     MEMRA_BENCH_CC,           MEMRA_BENCH_CFLAGS_LIB,
                      MEMRA_BENCH_CFLAGS,     MEMRA_BENCH_NVCC,         MEMRA_BENCH_NVCCFLAGS,
                      MEMRA_BENCH_CUDA_ARCHS, MEMRA_BENCH_LIB_CUDA != 0};
    snprintf(env.library_version, sizeof env.library_version, "%s", memra_version_string());
    snprintf(env.abi_version, sizeof env.abi_version, "%u.%u", (unsigned)(abi >> 16),
             (unsigned)(abi & 0xffff));
    snprintf(env.commit, sizeof env.commit, "%s", o.commit);
    join_args(env.command, sizeof env.command, argc, argv);
    /* The CUDA backend's profiling switch cuts every verify down to one kernel: only the
     * per-op mode's stage captures may run with it, never a check or a timed column. */
    if (getenv("MEMRA_VERIFY_STAGE") != NULL) {
        fprintf(stderr,
                "memra_bench: ignoring MEMRA_VERIFY_STAGE=%s (set only while the per-op "
                "mode captures its stage columns)\n",
                getenv("MEMRA_VERIFY_STAGE"));
        (void)unsetenv("MEMRA_VERIFY_STAGE");
    }
    if (create_engine(&env, &o) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return EXIT_SETUP;
    }
    if (o.mode == MODE_HASH) {
        /* stdout holds the fingerprint lines alone, to compare with a recorded file. */
        if (env.notice[0])
            fprintf(stderr, "memra_bench: %s\n", env.notice);
        status = bench_hash(env.engine, stdout) == 0 ? 0 : EXIT_SETUP;
        if (status != 0)
            fprintf(stderr, "memra_bench: --mode hash: %s\n", bench_error);
        (void)memra_engine_destroy(env.engine);
        return status;
    }
    if (env.notice[0])
        printf("memra_bench: %s\n", env.notice);
    if (env.backend == MEMRA_BACKEND_CUDA &&
        memra_engine_stream(env.engine, &env.stream) != MEMRA_STATUS_OK) {
        fprintf(stderr, "memra_bench: memra_engine_stream: %s\n", memra_last_error_message());
        return EXIT_SETUP;
    }
    bench_describe_machine(&env);
    if (bench_device_open(&env) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return EXIT_SETUP;
    }
    /* The policy needs the device's cache size; the floor needs the bandwidth. */
    timing_policy(&env, &o);
    if (bench_copy_bandwidth(&env) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return EXIT_SETUP;
    }

    if (o.mode == MODE_PER_OP || o.mode == MODE_COPY) {
        status = o.mode == MODE_COPY ? bench_copy_run(&env) : run_per_op_sweep(&env, &o);
        bench_device_close(&env);
        (void)memra_engine_destroy(env.engine);
        return status;
    }

    /* Nothing from an earlier run may be mistaken for this one's. */
    for (int i = 0; i < 3; i++) {
        static const char *const names[] = {"bench.csv", "bench.json", "bench.png"};
        snprintf(path, sizeof path, "%s/%s", o.out, names[i]);
        (void)unlink(path);
    }

    default_lists(&o, &env);
    for (size_t si = 0; si < TU_N_SHAPES; si++)
        for (size_t bi = 0; bi < o.n_b; bi++)
            for (size_t ti = 0; ti < o.n_t; ti++)
                n_total += in_sweep(&o, si, o.t[ti], o.b[bi]);
    cap = n_total > 0 ? n_total : 1;
    results = calloc(cap, sizeof *results);
    if (results == NULL) {
        fprintf(stderr, "memra_bench: out of host memory\n");
        return EXIT_SETUP;
    }

    bench_report_header(stdout, &env);
    for (size_t si = 0; si < TU_N_SHAPES && !aborted; si++)
        for (size_t bi = 0; bi < o.n_b && !aborted; bi++)
            for (size_t ti = 0; ti < o.n_t && !aborted; ti++) {
                bench_config c;
                bench_result *r;
                if (!in_sweep(&o, si, o.t[ti], o.b[bi]))
                    continue;
                r = &results[n_results++];
                /* Progress on stderr, so that the table on stdout stays clean; on a terminal
                 * the line is erased again before the table line comes. */
                fprintf(stderr, "%s[%zu/%zu] %s T=%zu B=%zu (%.0f s)%s", tty ? "\r\033[K" : "",
                        n_results, n_total, shapes[si].name, o.t[ti], o.b[bi],
                        (bench_now_us() - start_us) / 1e6, tty ? "" : "\n");
                bench_config_init(&c, shapes[si].name, shapes[si].num_k, shapes[si].num_v, o.t[ti],
                                  o.b[bi]);
                if (!run_config(&env, &c, r)) {
                    printf("memra_bench: the device faulted (%s); stopping the sweep\n",
                           memra_last_error_message());
                    aborted = true;
                }
                if (tty)
                    fputs("\r\033[K", stderr);
                bench_report_line(stdout, &env, r);
                n_failed += bench_result_failures(r);
                if (bench_report_files(&env, o.out, results, n_results) != 0) {
                    fprintf(stderr, "memra_bench: %s\n", bench_error);
                    aborted = true;
                    n_failed++;
                }
            }
    bench_report_summary(stdout, &env, results, n_results, (bench_now_us() - start_us) / 1e6);
    printf("memra_bench: %zu configurations, %zu FAILED (configurations and columns); wrote "
           "%s/bench.csv and %s/bench.json\n",
           n_results, n_failed, o.out, o.out);
    free(results);
    bench_device_close(&env);
    (void)memra_engine_destroy(env.engine);
    status = n_failed > 0 || aborted ? EXIT_FAILED : 0;
    if (o.compare != NULL) {
        int cs;
        printf("\n");
        snprintf(path, sizeof path, "%s/bench.json", o.out);
        cs = run_compare(&o, &base, path);
        bench_run_free(&base);
        /* A FAILED configuration outranks a regression; an unreadable file outranks both. */
        if (cs == EXIT_SETUP || status == 0)
            status = cs;
    }
    return status;
}
