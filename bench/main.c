/*
 * memra_bench: the main benchmark (`make bench`). See bench.h for the layout of the sources
 * and README.md for how to read the table.
 *
 * For every configuration (shape, T, B) it builds several independent sets of buffers, checks
 * that the packed program gives bit for bit what the per-row chain gives (refusing to time a
 * wrong result), then times the four variants and relates them to the memory-bandwidth floor
 * measured at the start of the same run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#ifndef MEMRA_BENCH_COMMIT
#define MEMRA_BENCH_COMMIT "unknown"
#endif

typedef struct shape_def {
    const char *name;
    size_t num_k, num_v;
} shape_def;

static const shape_def shapes[] = {{"small", 2, 4}, {"ornith", 16, 32}};

#define MAX_LIST 16

typedef struct options {
    const char *out;
    const char *backend;
    const char *shape;
    const char *commit;
    int device;
    bool quick;
    size_t t[MAX_LIST], n_t;
    size_t b[MAX_LIST], n_b;
    size_t samples;
} options;

static void usage(FILE *f)
{
    fputs("usage: memra_bench [--out DIR] [--quick] [--backend auto|cuda|cpu] [--device N]\n"
          "                   [--shape small|ornith|all] [--t 1,2,4] [--b 1,8] [--samples N]\n"
          "                   [--commit TEXT]\n"
          "Checks that the packed GDN verify is bit-identical to the per-row chain, then times\n"
          "per-row and packed, eager and graph-replayed, against the copy-bandwidth floor.\n"
          "Writes DIR/bench.csv and DIR/bench.json (DIR defaults to results); bench/plot.sh\n"
          "draws DIR/bench.png. --backend defaults to $MEMRA_BACKEND, else auto (CUDA when a\n"
          "device is usable, else the CPU). Defaults: T 1,2,4,8,16; B 1,8,32 on the GPU and\n"
          "1,8 on the CPU; --quick runs a reduced sweep with fewer samples.\n"
          "Exit status: 0 all configurations checked and timed, 1 some FAILED, 2 setup error.\n",
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

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out = "results";
    o->backend = getenv("MEMRA_BACKEND");
    o->shape = "all";
    o->commit = MEMRA_BENCH_COMMIT;
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
        } else if (val == NULL) {
            fprintf(stderr, "memra_bench: %s needs a value\n", a);
            return -1;
        } else if (strcmp(a, "--out") == 0) {
            o->out = val;
        } else if (strcmp(a, "--backend") == 0) {
            o->backend = val;
        } else if (strcmp(a, "--shape") == 0) {
            o->shape = val;
        } else if (strcmp(a, "--commit") == 0) {
            o->commit = val;
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
        /* Revisit a set only after four L2s' worth of other sets has gone through the cache. */
        env->rotate_bytes = 4 * env->cache_bytes;
        if (env->rotate_bytes < (UINT64_C(128) << 20))
            env->rotate_bytes = UINT64_C(128) << 20;
        env->max_sets = 256;
        env->sample_us = 2000.0;
        env->samples = o->quick ? 7 : 15;
        env->warmup_us = 100e3;
        env->variant_us = o->quick ? 0.3e6 : 1.0e6;
        env->clock_method = "CUDA events on the engine's stream around each sample";
    } else {
        /* The CPU kernels are compute-bound; a few sets are enough to keep the last-level cache
         * from holding a whole rotation for the small shapes. */
        env->rotate_bytes = UINT64_C(64) << 20;
        env->max_sets = o->quick ? 4 : 16;
        env->sample_us = o->quick ? 5e3 : 20e3;
        env->samples = o->quick ? 5 : 7;
        env->warmup_us = o->quick ? 10e3 : 50e3;
        env->variant_us = o->quick ? 0.2e6 : 2.0e6;
        env->clock_method = "CLOCK_MONOTONIC around each sample (the CPU backend is synchronous)";
    }
    if (o->samples > 0)
        env->samples = o->samples;
}

typedef struct rep_ctx {
    bench_work *w;
    int variant;
    size_t sets;
} rep_ctx;

static int one_rep(void *user, size_t rep)
{
    const rep_ctx *x = user;
    return bench_work_rep(x->w, x->variant, rep % x->sets);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times one variant: a first rep to estimate, a warm-up over the whole rotation (within the
 * warm-up budget), then samples of `reps` back-to-back verifies each. The rotation continues
 * across samples, so a set is never reused before the others have all run. */
static int measure(bench_env *env, bench_work *w, int variant, bench_stats *out)
{
    rep_ctx x = {w, variant, bench_work_sets(w)};
    size_t rot = 0, warm, reps, n;
    double us, est, per[64];

    if (bench_time_reps(env, one_rep, &x, rot, 1, &us) != 0)
        return -1;
    rot += 1;
    est = us > 0.01 ? us : 0.01;
    warm = (size_t)(env->warmup_us / est);
    if (warm > x.sets)
        warm = x.sets;
    if (warm < 2)
        warm = 2;
    if (bench_time_reps(env, one_rep, &x, rot, warm, &us) != 0)
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
    if (n > sizeof per / sizeof per[0])
        n = sizeof per / sizeof per[0];
    for (size_t s = 0; s < n; s++) {
        if (bench_time_reps(env, one_rep, &x, rot, reps, &us) != 0)
            return -1;
        rot += reps;
        per[s] = us / (double)reps;
    }
    qsort(per, n, sizeof per[0], cmp_double);
    out->samples = n;
    out->reps = reps;
    out->min_us = per[0];
    out->max_us = per[n - 1];
    out->med_us = n % 2 ? per[n / 2] : 0.5 * (per[n / 2 - 1] + per[n / 2]);
    return 0;
}

static void run_config(bench_env *env, const bench_config *c, bench_result *r)
{
    bench_work *w = NULL;
    uint64_t set_bytes, budget;
    size_t sets;
    double t0 = bench_now_us(), t1;
    int rc;

    memset(r, 0, sizeof *r);
    r->cfg = *c;
    r->floor_bytes = bench_floor_bytes(c, &r->floor_state_bytes);
    r->floor_us = (double)r->floor_bytes / (env->copy_best_gbs * 1e3);
    r->floor_state_us = (double)r->floor_state_bytes / (env->copy_best_gbs * 1e3);

    /* Enough sets that each is revisited only after rotate_bytes of other traffic, as many as
     * the memory budget allows. */
    sets = (size_t)((env->rotate_bytes + r->floor_bytes - 1) / r->floor_bytes);
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
        return;
    }
    if ((uint64_t)sets * set_bytes > budget)
        sets = (size_t)(budget / set_bytes);
    r->sets = sets;

    if (bench_work_create(env, c, sets, &w) != 0) {
        snprintf(r->failure, sizeof r->failure, "%s", bench_error);
        return;
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
    for (int v = 0; v < BV_COUNT && rc == 0; v++)
        if (measure(env, w, v, &r->v[v]) != 0) {
            snprintf(r->failure, sizeof r->failure, "timing %s: %.600s", bench_variant_key[v],
                     bench_error);
            rc = -1;
        }
    r->timing_s = (bench_now_us() - t0) / 1e6;
    r->ok = rc == 0;
    bench_work_destroy(w);
}

/* The quick sweep (CI's smoke test) keeps the production shape to its cheapest verifies. */
static bool in_sweep(const options *o, size_t shape, size_t t, size_t b)
{
    if (strcmp(o->shape, "all") != 0 && strcmp(o->shape, shapes[shape].name) != 0)
        return false;
    return !o->quick || shape == 0 || (b == 1 && t <= 2);
}

/* The header's rule: same major, library minor at least the one compiled against. */
static bool abi_usable(uint32_t abi, uint32_t major, uint32_t minor)
{
    return (abi >> 16) == major && (abi & 0xffff) >= minor;
}

int main(int argc, char **argv)
{
    options o;
    bench_env env;
    bench_result *results;
    size_t n_results = 0, n_failed = 0, cap;
    const size_t t_full[] = {1, 2, 4, 8, 16}, t_quick[] = {1, 2, 4, 8};
    const size_t b_gpu[] = {1, 8, 32}, b_cpu[] = {1, 8}, b_quick[] = {1, 8};
    uint32_t abi = memra_abi_version();
    bool aborted = false;
    char path[1200];
    double start_us = bench_now_us();

    if (parse_args(argc, argv, &o) != 0)
        return 2;
    if (!abi_usable(abi, MEMRA_VERSION_MAJOR, MEMRA_VERSION_MINOR)) {
        fprintf(stderr,
                "memra_bench: libmemra ABI %u.%u cannot serve this bench (built for %d.%d)\n",
                (unsigned)(abi >> 16), (unsigned)(abi & 0xffff), MEMRA_VERSION_MAJOR,
                MEMRA_VERSION_MINOR);
        return 2;
    }
    memset(&env, 0, sizeof env);
    env.quick = o.quick;
    snprintf(env.commit, sizeof env.commit, "%s", o.commit);
    if (create_engine(&env, &o) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return 2;
    }
    if (env.notice[0])
        printf("memra_bench: %s\n", env.notice);
    if (env.backend == MEMRA_BACKEND_CUDA &&
        memra_engine_stream(env.engine, &env.stream) != MEMRA_STATUS_OK) {
        fprintf(stderr, "memra_bench: memra_engine_stream: %s\n", memra_last_error_message());
        return 2;
    }
    bench_describe_machine(&env);
    if (bench_device_open(&env) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return 2;
    }
    /* The policy needs the device's cache size; the floor needs the bandwidth. */
    timing_policy(&env, &o);
    if (bench_copy_bandwidth(&env) != 0) {
        fprintf(stderr, "memra_bench: %s\n", bench_error);
        return 2;
    }

    /* Nothing from an earlier run may be mistaken for this one's. */
    for (int i = 0; i < 3; i++) {
        static const char *const names[] = {"bench.csv", "bench.json", "bench.png"};
        snprintf(path, sizeof path, "%s/%s", o.out, names[i]);
        (void)unlink(path);
    }

    if (o.n_t == 0) {
        const size_t *src = o.quick ? t_quick : t_full;
        o.n_t = o.quick ? sizeof t_quick / sizeof t_quick[0] : sizeof t_full / sizeof t_full[0];
        memcpy(o.t, src, o.n_t * sizeof *src);
    }
    if (o.n_b == 0) {
        const size_t *src = o.quick ? b_quick : env.backend == MEMRA_BACKEND_CUDA ? b_gpu : b_cpu;
        o.n_b = o.quick ? 2 : env.backend == MEMRA_BACKEND_CUDA ? 3 : 2;
        memcpy(o.b, src, o.n_b * sizeof *src);
    }
    cap = 2 * o.n_t * o.n_b;
    results = calloc(cap, sizeof *results);
    if (results == NULL) {
        fprintf(stderr, "memra_bench: out of host memory\n");
        return 2;
    }

    bench_report_header(&env);
    for (size_t si = 0; si < 2 && !aborted; si++)
        for (size_t bi = 0; bi < o.n_b && !aborted; bi++)
            for (size_t ti = 0; ti < o.n_t && !aborted; ti++) {
                bench_config c;
                bench_result *r;
                if (!in_sweep(&o, si, o.t[ti], o.b[bi]))
                    continue;
                r = &results[n_results++];
                bench_config_init(&c, shapes[si].name, shapes[si].num_k, shapes[si].num_v, o.t[ti],
                                  o.b[bi]);
                run_config(&env, &c, r);
                bench_report_line(&env, r);
                if (!r->ok) {
                    n_failed++;
                    /* A device fault is sticky: nothing after it could run. */
                    if (memra_engine_synchronize(env.engine) == MEMRA_STATUS_DEVICE_ERROR) {
                        printf("memra_bench: the device faulted (%s); stopping the sweep\n",
                               memra_last_error_message());
                        aborted = true;
                    }
                }
                if (bench_report_files(&env, o.out, results, n_results) != 0) {
                    fprintf(stderr, "memra_bench: %s\n", bench_error);
                    aborted = true;
                    n_failed++;
                }
            }
    printf("memra_bench: %zu configurations, %zu FAILED, %.1f s; wrote %s/bench.csv and "
           "%s/bench.json\n",
           n_results, n_failed, (bench_now_us() - start_us) / 1e6, o.out, o.out);
    free(results);
    bench_device_close(&env);
    (void)memra_engine_destroy(env.engine);
    return n_failed > 0 || aborted ? 1 : 0;
}
