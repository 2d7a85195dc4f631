/*
 * Output: one table entry per configuration on stdout as soon as it is measured (a line of
 * medians and a line of achieved bandwidths), a closing summary, and the whole run as
 * bench.csv and bench.json (rewritten after every configuration, so an interrupted sweep still
 * leaves what it measured). bench/README.md documents every column and field.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static const char *backend_name(const bench_env *env)
{
    return env->backend == MEMRA_BACKEND_CUDA ? "cuda" : "cpu";
}

static const char *or_unknown(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : "unknown";
}

/* Column width of variant v in the table. */
static int col_width(int v)
{
    return bench_variant_width[v];
}

void bench_report_header(FILE *f, const bench_env *env)
{
    const bench_build *bb = &env->build;
    fprintf(f, "memra_bench: libmemra %s (ABI %s, commit %s), backend %s: %s\n",
            env->library_version, env->abi_version, or_unknown(env->commit), backend_name(env),
            env->device);
    if (env->backend != MEMRA_BACKEND_CUDA)
        fprintf(f, "  CPU BACKEND: these times are for functional comparison only. The CPU "
                   "kernels are the single-threaded\n  bit-exact reference and compute-bound; "
                   "the bench runs on them to show that every variant works, not how fast\n"
                   "  libmemra is (that is the GPU's table)\n");
    fprintf(f, "  build: %s; library %s%s%s%s%s\n", or_unknown(bb->cc), or_unknown(bb->cflags_lib),
            bb->cuda ? "; " : "; CUDA not compiled in", bb->cuda ? or_unknown(bb->nvcc) : "",
            bb->cuda ? ", archs " : "", bb->cuda ? or_unknown(bb->cuda_archs) : "");
    if (env->backend == MEMRA_BACKEND_CUDA) {
        fprintf(f, "  GPU %d: compute capability %s, %d SMs, L2 %.0f MiB, %.1f GiB",
                env->device_ordinal, env->compute_capability, env->multiprocessors,
                mib(env->cache_bytes), mib(env->memory_bytes) / 1024.0);
        if (env->sm_clock_mhz > 0)
            fprintf(f, ", SM clock %d MHz", env->sm_clock_mhz);
        if (env->memory_clock_mhz > 0)
            fprintf(f, ", memory clock %d MHz x %d bits", env->memory_clock_mhz,
                    env->memory_bus_bits);
        fprintf(f, " (peak clocks; clocks left as the driver sets them)\n");
        fprintf(f, "  CUDA driver %s (NVIDIA kernel module %s), runtime %s\n",
                or_unknown(env->cuda_driver), or_unknown(env->nvidia_driver),
                or_unknown(env->cuda_runtime));
    }
    fprintf(f, "  host %s: %s; %s; %s\n", env->host, env->cpu, env->os, env->kernel);
    fprintf(f,
            "  date %s; copy ceiling: %.1f GB/s best, %.1f GB/s median (%s; %.0f MiB x %zu, "
            "read + write counted)\n",
            env->date, env->copy_best_gbs, env->copy_median_gbs, env->copy_method,
            mib(env->copy_bytes), env->copy_reps);
    fprintf(f,
            "  every configuration is checked bit for bit first (1.0: packed == per-row, eager "
            "and graph; 1.1: == the 1.0\n  packed program; memcmp), then timed: median us per "
            "verify (T rows x B sequences) over samples of\n  back-to-back verifies rotating "
            "through 'sets' input/state sets (%.0f MiB of traffic apart at least)\n",
            mib(env->rotate_bytes));
    fprintf(f,
            "  GB/s: the variant's bytes (bench/README.md) / its median; floor: the packed "
            "verify's bytes at the best copy\n  bandwidth; fl%%pk: floor / pack-graph; "
            "speedup: row-graph / pack-graph; spread: largest (max - min) / median of\n"
            "  the row's variants, 'noisy' above %.0f%%; fused, fused-nosnap, journal: "
            "memra_gdn_verify (1.1), graph-replayed;\n  journal, rollback, commit: accepted "
            "counts in device memory, written before each sample; commit: a graph of\n  a "
            "refill verify and the commit less a graph of the refill verify alone; count write: "
            "one host\n  write of the B counts (memra_htod_u32_into), timed alone\n",
            100.0 * BENCH_NOISY_SPREAD);
    fprintf(f, "%-6s %3s %3s %4s %-4s", "shape", "T", "B", "sets", "");
    for (int v = 0; v < BV_COUNT; v++)
        if (bench_variant_in_table[v])
            fprintf(f, " %*s", col_width(v), bench_variant_name[v]);
    fprintf(f, " %9s %6s %8s %6s  %s\n", "floor", "fl%pk", "speedup", "spread", "check");
    fflush(f);
}

/* The last message printed per column, so that a failure repeated configuration after
 * configuration is spelled out once. */
static char last_failure[BV_COUNT][400];

void bench_report_line(FILE *f, const bench_env *env, const bench_result *r)
{
    const bench_config *c = &r->cfg;
    (void)env;
    fprintf(f, "%-6s %3zu %3zu %4zu ", c->shape, c->t, c->b, r->sets);
    if (!r->ok) {
        fprintf(f, "FAILED: %s\n", r->failure);
        fflush(f);
        return;
    }
    fprintf(f, "%-4s", "us");
    for (int v = 0; v < BV_COUNT; v++) {
        if (!bench_variant_in_table[v])
            continue;
        if (r->v[v].status == BS_OK)
            fprintf(f, " %*.2f", col_width(v), r->v[v].med_us);
        else
            fprintf(f, " %*s", col_width(v), r->v[v].status == BS_FAILED ? "FAILED" : "-");
    }
    fprintf(f, " %9.2f %5.1f%% %7.2fx %5.1f%%  ok%s\n", r->floor_us,
            100.0 * r->floor_us / r->v[BV_PACK_GRAPH].med_us,
            r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us, 100.0 * bench_result_spread(r),
            bench_result_noisy(r) ? " noisy" : "");
    fprintf(f, "%-6s %3s %3s %4s %-4s", "", "", "", "", "GB/s");
    for (int v = 0; v < BV_COUNT; v++) {
        if (!bench_variant_in_table[v])
            continue;
        if (r->v[v].status == BS_OK)
            fprintf(f, " %*.1f", col_width(v), bench_stats_gbs(&r->v[v]));
        else
            fprintf(f, " %*s", col_width(v), "");
    }
    fputc('\n', f);
    if (r->count_write_us > 0.0)
        fprintf(f, "  count write (host to device, %zu words): %.2f us\n", c->b, r->count_write_us);
    for (int v = 0; v < BV_COUNT; v++) {
        /* A skipped column with a message was checked and timed but has no time (commit). */
        if (r->v[v].status == BS_SKIPPED && r->v[v].failure[0] != '\0')
            fprintf(f, "    %s not timed: %s\n", bench_variant_name[v], r->v[v].failure);
        if (r->v[v].status != BS_FAILED)
            continue;
        if (strcmp(last_failure[v], r->v[v].failure) == 0) {
            fprintf(f, "    %s FAILED: as above\n", bench_variant_name[v]);
        } else {
            fprintf(f, "    %s FAILED: %s\n", bench_variant_name[v], r->v[v].failure);
            snprintf(last_failure[v], sizeof last_failure[v], "%s", r->v[v].failure);
        }
    }
    fflush(f);
}

/* Floor fraction of variant v in r (its own floor over its median), or -1 when not timed. */
static double floor_fraction(const bench_env *env, const bench_result *r, int v)
{
    if (!r->ok || r->v[v].status != BS_OK)
        return -1.0;
    return bench_stats_floor_us(env, &r->v[v]) / r->v[v].med_us;
}

static void config_name(char *out, size_t len, const bench_result *r)
{
    snprintf(out, len, "%s T=%zu B=%zu", r->cfg.shape, r->cfg.t, r->cfg.b);
}

/* Geometric mean of num/den medians over the configurations where both were timed. */
static double geomean_ratio(const bench_result *rs, size_t n, int num, int den, size_t *count)
{
    double sum = 0.0;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rs[i].ok || rs[i].v[num].status != BS_OK || rs[i].v[den].status != BS_OK)
            continue;
        sum += log(rs[i].v[num].med_us / rs[i].v[den].med_us);
        (*count)++;
    }
    return *count > 0 ? exp(sum / (double)*count) : 0.0;
}

void bench_report_summary(FILE *f, const bench_env *env, const bench_result *rs, size_t n,
                          double seconds)
{
    size_t checked = 0, failed = 0, noisy = 0, cnt;
    size_t failed_v[BV_COUNT] = {0};
    double g;

    for (size_t i = 0; i < n; i++) {
        checked += rs[i].ok;
        failed += !rs[i].ok;
        noisy += bench_result_noisy(&rs[i]);
        for (int v = 0; v < BV_COUNT; v++)
            failed_v[v] += rs[i].ok && rs[i].v[v].status == BS_FAILED;
    }
    fprintf(f,
            "summary: %zu configurations, %zu checked and timed, %zu FAILED, %zu noisy (spread "
            "> %.0f%%), %.1f s\n",
            n, checked, failed, noisy, 100.0 * BENCH_NOISY_SPREAD, seconds);
    {
        /* The speedups, each printed where some configuration timed both variants. */
        static const struct {
            int from, to;
            const char *what;
            bool count;
        } speedups[] = {
            {BV_ROW_GRAPH, BV_PACK_GRAPH, "packed over per-row (graph-replayed)", true},
            {BV_ROW_EAGER, BV_PACK_EAGER, "packed over per-row (eager)", false},
            {BV_PACK_GRAPH, BV_FUSED, "fused over the packed graph", true},
        };
        for (size_t i = 0; i < sizeof speedups / sizeof speedups[0]; i++) {
            g = geomean_ratio(rs, n, speedups[i].from, speedups[i].to, &cnt);
            if (cnt == 0)
                continue;
            fprintf(f, "  speedup %s, geometric mean: %.3fx", speedups[i].what, g);
            if (speedups[i].count)
                fprintf(f, " over %zu configurations", cnt);
            fputc('\n', f);
        }
    }
    for (int v = BV_PACK_GRAPH; v < BV_COUNT; v++) {
        double best = -1.0, worst = 2e9;
        char best_at[64] = "", worst_at[64] = "";
        if (v == BV_JOURNAL_ALL || v == BV_ROLLBACK)
            continue; /* the summary lists pack-graph, fused, fused-nosnap, journal, commit */
        for (size_t i = 0; i < n; i++) {
            double fr = floor_fraction(env, &rs[i], v);
            if (fr < 0.0)
                continue;
            if (fr > best) {
                best = fr;
                config_name(best_at, sizeof best_at, &rs[i]);
            }
            if (fr < worst) {
                worst = fr;
                config_name(worst_at, sizeof worst_at, &rs[i]);
            }
        }
        if (best >= 0.0)
            fprintf(f, "  fl%% %-12s best %5.1f%% (%s), worst %5.1f%% (%s)\n",
                    bench_variant_name[v], 100.0 * best, best_at, 100.0 * worst, worst_at);
    }
    for (int v = 0; v < BV_COUNT; v++)
        if (failed_v[v] > 0)
            fprintf(f, "  %s FAILED in %zu of %zu checked configurations\n", bench_variant_name[v],
                    failed_v[v], checked);
    if (env->backend != MEMRA_BACKEND_CUDA)
        fprintf(f, "  (CPU backend: functional comparison only)\n");
    fflush(f);
}

/* Creates `dir` and its parents. */
static int make_dirs(const char *dir)
{
    char path[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        bench_fail("bad output directory '%s'", dir);
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            bench_fail("cannot create '%s': %s", path, strerror(errno));
            return -1;
        }
        path[i] = saved;
    }
    return 0;
}

/* A JSON string literal (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (s = s != NULL ? s : ""; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* "key": "value" with the given separator before it. */
static void json_kv(FILE *f, const char *sep, const char *key, const char *value)
{
    fprintf(f, "%s\"%s\": ", sep, key);
    json_str(f, value);
}

/* A CSV field without the separator or quotes (free text only: names, messages). */
static void csv_text(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(*s == ',' ? ';' : *s == '"' || *s == '\n' ? ' ' : *s, f);
}

static void json_num(FILE *f, double x)
{
    if (x < 0.0 || !isfinite(x))
        fputs("null", f);
    else
        fprintf(f, "%.6g", x);
}

static const char *status_name(int status)
{
    return status == BS_OK ? "ok" : status == BS_FAILED ? "FAILED" : "skipped";
}

int bench_write_csv(const bench_env *env, const char *path, const bench_result *rs, size_t n)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    /* bench/plot.gp reads the columns by name. */
    fputs("shape,num_k,num_v,t,b,backend,device,status,noisy,sets,spread,floor_bytes,floor_us,"
          "floor_state_us,speedup_graph,speedup_eager,count_write_us",
          f);
    for (int v = 0; v < BV_COUNT; v++) {
        const char *k = bench_variant_key[v];
        fprintf(f,
                ",%s_status,%s_med_us,%s_min_us,%s_max_us,%s_mad_us,%s_spread,%s_samples,"
                "%s_bytes,%s_gb_per_s,%s_floor_us,%s_floor_frac",
                k, k, k, k, k, k, k, k, k, k, k);
    }
    fputs(",failure\n", f);
    for (size_t i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        const bench_config *c = &r->cfg;
        char why[1600] = "";
        size_t wl = 0;
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%s,", c->shape, c->num_k, c->num_v, c->t, c->b,
                backend_name(env));
        csv_text(f, env->device);
        fprintf(f, ",%s,%s,%zu,", r->ok ? "ok" : "FAILED", bench_result_noisy(r) ? "1" : "0",
                r->sets);
        if (r->ok)
            fprintf(f, "%.5f", bench_result_spread(r));
        fprintf(f, ",%llu,%.4f,%.4f,", (unsigned long long)r->floor_bytes, r->floor_us,
                r->floor_state_us);
        /* Empty fields where nothing was timed (gnuplot skips them). */
        if (r->ok)
            fprintf(f, "%.4f,%.4f", r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us,
                    r->v[BV_ROW_EAGER].med_us / r->v[BV_PACK_EAGER].med_us);
        else
            fputc(',', f);
        fputc(',', f);
        if (r->ok && r->count_write_us > 0.0)
            fprintf(f, "%.4f", r->count_write_us);
        for (int v = 0; v < BV_COUNT; v++) {
            const bench_stats *s = &r->v[v];
            int status = r->ok ? s->status : BS_FAILED;
            if (!r->ok && v >= BV_FIRST_11)
                status = BS_SKIPPED;
            fprintf(f, ",%s", status_name(status));
            if (r->ok && s->status == BS_OK)
                fprintf(f, ",%.4f,%.4f,%.4f,%.4f,%.5f,%zu,%llu,%.2f,%.4f,%.5f", s->med_us,
                        s->min_us, s->max_us, s->mad_us, bench_stats_spread(s), s->samples,
                        (unsigned long long)s->bytes, bench_stats_gbs(s),
                        bench_stats_floor_us(env, s), bench_stats_floor_us(env, s) / s->med_us);
            else
                /* The bytes and the floor are the configuration's even when nothing ran. */
                fprintf(f, ",,,,,,,%llu,,%.4f,", (unsigned long long)s->bytes,
                        bench_stats_floor_us(env, s));
            if (r->ok && s->status == BS_FAILED && wl < sizeof why - 10)
                wl += (size_t)snprintf(why + wl, sizeof why - wl, "%s%s: %.300s", wl ? "; " : "",
                                       bench_variant_key[v], s->failure);
        }
        fputc(',', f);
        csv_text(f, r->ok ? why : r->failure);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void write_variant(FILE *f, const bench_env *env, const bench_result *r, int v)
{
    const bench_stats *s = &r->v[v];
    int status = s->status;
    if (!r->ok)
        status = v < BV_FIRST_11 ? BS_FAILED : BS_SKIPPED;
    fprintf(f, "\n       \"%s\": {\"status\": \"%s\", \"bytes\": %llu", bench_variant_key[v],
            status_name(status), (unsigned long long)s->bytes);
    if (status == BS_FAILED) {
        json_kv(f, ", ", "failure", r->ok ? s->failure : r->failure);
        fputc('}', f);
        return;
    }
    if (status != BS_OK) {
        if (r->ok && s->failure[0] != '\0')
            json_kv(f, ", ", "note", s->failure);
        fputc('}', f);
        return;
    }
    fprintf(f,
            ",\n         \"median_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f, \"mad_us\": "
            "%.4f, \"spread\": %.5f,\n         \"samples\": %zu, \"reps_per_sample\": %zu, "
            "\"gb_per_s\": %.3f, \"floor_us\": ",
            s->med_us, s->min_us, s->max_us, s->mad_us, bench_stats_spread(s), s->samples, s->reps,
            bench_stats_gbs(s));
    json_num(f, bench_stats_floor_us(env, s));
    fputs(", \"floor_fraction\": ", f);
    json_num(f, bench_stats_floor_us(env, s) / s->med_us);
    if (v == BV_COMMIT)
        fprintf(f, ",\n         \"graph_median_us\": %.4f, \"refill_median_us\": %.4f",
                r->commit_graph_us, r->commit_refill_us);
    fputs(",\n         \"samples_us\": [", f);
    for (size_t i = 0; i < s->samples; i++)
        fprintf(f, "%s%.4f", i ? ", " : "", s->sample_us[i]);
    fputs("]}", f);
}

int bench_write_json(const bench_env *env, const char *path, const bench_result *rs, size_t n)
{
    const bench_build *bb = &env->build;
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"tool\": \"memra_bench\",\n  \"schema_version\": %d", BENCH_SCHEMA_VERSION);
    json_kv(f, ",\n  ", "date", env->date);
    fprintf(f, ",\n  \"quick\": %s", env->quick ? "true" : "false");
    json_kv(f, ",\n  ", "command", env->command);
    json_kv(f, ",\n  \"library\": {\n    ", "version", env->library_version);
    json_kv(f, ",\n    ", "abi", env->abi_version);
    json_kv(f, ",\n    ", "commit", env->commit);
    json_kv(f, ",\n    \"build\": {\n      ", "cc", bb->cc);
    json_kv(f, ",\n      ", "cflags", bb->cflags_lib);
    json_kv(f, ",\n      ", "bench_cflags", bb->cflags_bench);
    fprintf(f, ",\n      \"cuda\": %s", bb->cuda ? "true" : "false");
    json_kv(f, ",\n      ", "nvcc", bb->cuda ? bb->nvcc : "");
    json_kv(f, ",\n      ", "nvccflags", bb->cuda ? bb->nvccflags : "");
    json_kv(f, ",\n      ", "cuda_archs", bb->cuda ? bb->cuda_archs : "");
    fputs("\n    }\n  },\n  \"machine\": {", f);
    json_kv(f, "\n    ", "host", env->host);
    json_kv(f, ",\n    ", "cpu", env->cpu);
    json_kv(f, ",\n    ", "os", env->os);
    json_kv(f, ",\n    ", "kernel", env->kernel);
    json_kv(f, ",\n    ", "backend", backend_name(env));
    json_kv(f, ",\n    ", "backend_notice", env->notice);
    json_kv(f, ",\n    ", "device", env->device);
    if (env->backend == MEMRA_BACKEND_CUDA) {
        fprintf(f, ",\n    \"device_ordinal\": %d", env->device_ordinal);
        json_kv(f, ",\n    ", "compute_capability", env->compute_capability);
        fprintf(f, ",\n    \"multiprocessors\": %d,\n    \"l2_bytes\": %llu", env->multiprocessors,
                (unsigned long long)env->cache_bytes);
        fputs(",\n    \"sm_clock_mhz\": ", f);
        json_num(f, env->sm_clock_mhz > 0 ? env->sm_clock_mhz : -1);
        fputs(",\n    \"memory_clock_mhz\": ", f);
        json_num(f, env->memory_clock_mhz > 0 ? env->memory_clock_mhz : -1);
        fputs(",\n    \"memory_bus_bits\": ", f);
        json_num(f, env->memory_bus_bits > 0 ? env->memory_bus_bits : -1);
        json_kv(f, ",\n    ", "cuda_driver", env->cuda_driver);
        json_kv(f, ",\n    ", "cuda_runtime", env->cuda_runtime);
        json_kv(f, ",\n    ", "nvidia_driver", env->nvidia_driver);
    }
    fprintf(f, ",\n    \"memory_bytes\": %llu\n  },\n", (unsigned long long)env->memory_bytes);
    json_kv(f, "  \"copy_bandwidth\": {\n    ", "method", env->copy_method);
    fprintf(f,
            ",\n    \"bytes_per_copy\": %llu,\n    \"copies\": %zu,\n    \"counted\": \"bytes read "
            "+ bytes written\",\n    \"best_gb_per_s\": %.2f,\n    \"median_gb_per_s\": %.2f\n  "
            "},\n",
            (unsigned long long)env->copy_bytes, env->copy_reps, env->copy_best_gbs,
            env->copy_median_gbs);
    json_kv(f, "  \"timing\": {\n    ", "clock", env->clock_method);
    fprintf(f,
            ",\n    \"statistic\": \"per verify: sample time / reps per sample; median, min, max "
            "and median absolute deviation over the samples\",\n    \"spread\": \"(max - min) / "
            "median\",\n    \"noisy_spread\": %.3f,\n    \"rotation_bytes\": %llu,\n    "
            "\"max_sets\": %zu,\n    \"sample_target_us\": %.0f,\n    \"samples\": %zu,\n    "
            "\"bytes\": \"what the variant's launches move, every input read once and every output "
            "written once (bench/README.md)\",\n    \"floor\": \"packed verify bytes / best copy "
            "bandwidth\",\n    \"floor_state\": \"(T + 1) x state bytes x B / best copy bandwidth "
            "(docs/performance.md)\",\n    \"accepted\": \"journal, rollback and commit: counts "
            "uniform in 1..T per sequence, drawn anew for every set before every sample and "
            "written into each set's device buffer before the sample's clock starts; "
            "journal_all: T for every sequence\",\n    \"commit\": \"median of a graph of the "
            "refill verify (JOURNAL mode, accepted 0) and memra_gdn_journal_commit, less the "
            "median of a graph of the refill verify alone, both over the same rotation\",\n    "
            "\"count_write\": \"one memra_htod_u32_into of the B accepted counts alone: median "
            "over a few hundred calls, each timed with the clock above; added to no variant\"\n  "
            "},\n",
            BENCH_NOISY_SPREAD, (unsigned long long)env->rotate_bytes, env->max_sets,
            env->sample_us, env->samples);
    fputs("  \"results\": [", f);
    for (size_t i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        const bench_config *c = &r->cfg;
        fprintf(f, "%s\n    {", i ? "," : "");
        json_kv(f, "", "shape", c->shape);
        fprintf(f,
                ", \"num_k\": %zu, \"num_v\": %zu, \"d_state\": %d, \"d_conv\": %zu, \"t\": %zu, "
                "\"b\": %zu, \"status\": \"%s\", \"noisy\": %s, \"sets\": %zu,\n     "
                "\"state_bytes_per_sequence\": %llu, \"journal_bytes_per_sequence\": %llu, "
                "\"floor_bytes\": %llu, \"floor_state_bytes\": %llu, \"floor_us\": ",
                c->num_k, c->num_v, MEMRA_D_STATE, c->d_conv, c->t, c->b, r->ok ? "ok" : "FAILED",
                bench_result_noisy(r) ? "true" : "false", r->sets,
                (unsigned long long)(c->state_words * sizeof(float)),
                (unsigned long long)(c->journal_words * sizeof(float)),
                (unsigned long long)r->floor_bytes, (unsigned long long)r->floor_state_bytes);
        json_num(f, r->floor_us);
        fputs(", \"floor_state_us\": ", f);
        json_num(f, r->floor_state_us);
        if (!r->ok) {
            json_kv(f, ",\n     ", "failure", r->failure);
            fputc(',', f);
        } else {
            fprintf(f,
                    ",\n     \"spread\": %.5f, \"speedup_graph\": %.4f, \"speedup_eager\": %.4f, "
                    "\"checked_words\": %zu,",
                    bench_result_spread(r), r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us,
                    r->v[BV_ROW_EAGER].med_us / r->v[BV_PACK_EAGER].med_us, r->compared_words);
        }
        fprintf(f,
                "\n     \"accepted\": {\"seed\": %llu, \"journal_mean\": %.3f},\n     "
                "\"count_write_us\": ",
                (unsigned long long)r->accepted_seed, r->journal_mean_accepted);
        json_num(f, r->count_write_us > 0.0 ? r->count_write_us : -1.0);
        fprintf(f,
                ",\n     \"seconds\": {\"setup\": %.3f, \"check\": %.3f, \"capture\": %.3f, "
                "\"timing\": "
                "%.3f},\n     \"variants\": {",
                r->setup_s, r->check_s, r->capture_s, r->timing_s);
        for (int v = 0; v < BV_COUNT; v++) {
            if (v)
                fputc(',', f);
            write_variant(f, env, r, v);
        }
        fputs("}}", f);
    }
    fputs("\n  ]\n}\n", f);
    if (fclose(f) != 0) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int bench_report_files(const bench_env *env, const char *dir, const bench_result *rs, size_t n)
{
    char path[1200];
    if (make_dirs(dir) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/bench.csv", dir);
    if (bench_write_csv(env, path, rs, n) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/bench.json", dir);
    return bench_write_json(env, path, rs, n);
}
