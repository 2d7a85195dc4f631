/*
 * Output: one table line per configuration on stdout as soon as it is measured, and the whole
 * run as bench.csv and bench.json (rewritten after every configuration, so an interrupted sweep
 * still leaves what it measured).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

void bench_report_header(const bench_env *env)
{
    uint32_t abi = memra_abi_version();
    printf("memra_bench: libmemra %s (ABI %u.%u), backend %s: %s\n", memra_version_string(),
           (unsigned)(abi >> 16), (unsigned)(abi & 0xffff),
           env->backend == MEMRA_BACKEND_CUDA ? "cuda" : "cpu", env->device);
    if (env->backend == MEMRA_BACKEND_CUDA)
        printf("  compute capability %s, %d SMs, L2 %.0f MiB, %.1f GiB\n", env->compute_capability,
               env->multiprocessors, mib(env->cache_bytes), mib(env->memory_bytes) / 1024.0);
    printf("  copy ceiling: %.1f GB/s best, %.1f GB/s median (%s; %.0f MiB x %zu, read + write "
           "counted)\n",
           env->copy_best_gbs, env->copy_median_gbs, env->copy_method, mib(env->copy_bytes),
           env->copy_reps);
    printf("  each configuration is first checked bit for bit (packed == per-row, eager and graph,"
           " memcmp), then timed\n");
    printf("  times: median us per verify (T rows x B sequences) over samples of back-to-back "
           "verifies rotating through\n"
           "  'sets' independent input/state sets (%.0f MiB apart at least); floor: the packed "
           "verify's bytes at the best\n"
           "  copy bandwidth; fl%%: floor / median, 100%% = at the memory bound; speedup: "
           "row-graph / pack-graph;\n"
           "  spread: largest (max - min) / median of the four; min/max in bench.csv and "
           "bench.json\n",
           mib(env->rotate_bytes));
    printf("%-6s %3s %3s %4s %10s %10s %10s %10s %9s %6s %6s %8s %6s  %s\n", "shape", "T", "B",
           "sets", "row-eager", "row-graph", "pack-eager", "pack-graph", "floor", "fl%row", "fl%pk",
           "speedup", "spread", "check");
    fflush(stdout);
}

static double spread(const bench_result *r)
{
    double worst = 0.0;
    for (int v = 0; v < BV_COUNT; v++) {
        double s = (r->v[v].max_us - r->v[v].min_us) / r->v[v].med_us;
        if (s > worst)
            worst = s;
    }
    return worst;
}

void bench_report_line(const bench_env *env, const bench_result *r)
{
    const bench_config *c = &r->cfg;
    (void)env;
    printf("%-6s %3zu %3zu %4zu ", c->shape, c->t, c->b, r->sets);
    if (!r->ok) {
        printf("FAILED: %s\n", r->failure);
    } else {
        for (int v = 0; v < BV_COUNT; v++)
            printf("%10.2f ", r->v[v].med_us);
        printf("%9.2f %5.1f%% %5.1f%% %7.2fx %5.1f%%  ok\n", r->floor_us,
               100.0 * r->floor_us / r->v[BV_ROW_GRAPH].med_us,
               100.0 * r->floor_us / r->v[BV_PACK_GRAPH].med_us,
               r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us, 100.0 * spread(r));
    }
    fflush(stdout);
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
    for (; *s; s++) {
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

/* A CSV field without the separator or quotes (free text only: names, messages). */
static void csv_text(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(*s == ',' ? ';' : *s == '"' || *s == '\n' ? ' ' : *s, f);
}

static void json_num(FILE *f, double x)
{
    if (x < 0.0)
        fputs("null", f);
    else
        fprintf(f, "%.6g", x);
}

static int write_csv(const bench_env *env, const char *path, const bench_result *rs, size_t n)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    /* Column numbers are used by bench/plot.gp: keep them in step. */
    fputs("shape,num_k,num_v,t,b,backend,device,status,sets,floor_bytes,floor_us,floor_state_us",
          f);
    for (int v = 0; v < BV_COUNT; v++)
        fprintf(f, ",%s_med_us,%s_min_us,%s_max_us", bench_variant_key[v], bench_variant_key[v],
                bench_variant_key[v]);
    for (int v = 0; v < BV_COUNT; v++)
        fprintf(f, ",%s_floor_frac", bench_variant_key[v]);
    fputs(",speedup_graph,speedup_eager,failure\n", f);
    for (size_t i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        const bench_config *c = &r->cfg;
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%s,", c->shape, c->num_k, c->num_v, c->t, c->b,
                env->backend == MEMRA_BACKEND_CUDA ? "cuda" : "cpu");
        csv_text(f, env->device);
        fprintf(f, ",%s,%zu,%llu,%.4f,%.4f", r->ok ? "ok" : "FAILED", r->sets,
                (unsigned long long)r->floor_bytes, r->floor_us, r->floor_state_us);
        if (r->ok) {
            for (int v = 0; v < BV_COUNT; v++)
                fprintf(f, ",%.4f,%.4f,%.4f", r->v[v].med_us, r->v[v].min_us, r->v[v].max_us);
            for (int v = 0; v < BV_COUNT; v++)
                fprintf(f, ",%.5f", r->floor_us / r->v[v].med_us);
            fprintf(f, ",%.4f,%.4f,", r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us,
                    r->v[BV_ROW_EAGER].med_us / r->v[BV_PACK_EAGER].med_us);
        } else {
            /* Empty fields: a failed configuration has no time (gnuplot skips them). */
            for (int k = 0; k < 4 * BV_COUNT + 2; k++)
                fputc(',', f);
            fputc(',', f);
            csv_text(f, r->failure);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_json(const bench_env *env, const char *path, const bench_result *rs, size_t n)
{
    uint32_t abi = memra_abi_version();
    char abi_s[32];
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        bench_fail("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    snprintf(abi_s, sizeof abi_s, "%u.%u", (unsigned)(abi >> 16), (unsigned)(abi & 0xffff));
    fputs("{\n  \"tool\": \"memra_bench\",\n  \"library_version\": ", f);
    json_str(f, memra_version_string());
    fputs(",\n  \"abi_version\": ", f);
    json_str(f, abi_s);
    fputs(",\n  \"date\": ", f);
    json_str(f, env->date);
    fputs(",\n  \"commit\": ", f);
    json_str(f, env->commit);
    fprintf(f,
            ",\n  \"quick\": %s,\n  \"machine\": {\n    \"host\": ", env->quick ? "true" : "false");
    json_str(f, env->host);
    fputs(",\n    \"cpu\": ", f);
    json_str(f, env->cpu);
    fputs(",\n    \"backend\": ", f);
    json_str(f, env->backend == MEMRA_BACKEND_CUDA ? "cuda" : "cpu");
    fputs(",\n    \"backend_notice\": ", f);
    json_str(f, env->notice);
    fputs(",\n    \"device\": ", f);
    json_str(f, env->device);
    if (env->backend == MEMRA_BACKEND_CUDA) {
        fprintf(
            f, ",\n    \"device_ordinal\": %d,\n    \"compute_capability\": ", env->device_ordinal);
        json_str(f, env->compute_capability);
        fprintf(f, ",\n    \"multiprocessors\": %d,\n    \"l2_bytes\": %llu", env->multiprocessors,
                (unsigned long long)env->cache_bytes);
    }
    fprintf(f, ",\n    \"memory_bytes\": %llu\n  },\n", (unsigned long long)env->memory_bytes);
    fputs("  \"copy_bandwidth\": {\n    \"method\": ", f);
    json_str(f, env->copy_method);
    fprintf(f,
            ",\n    \"bytes_per_copy\": %llu,\n    \"copies\": %zu,\n    \"counted\": \"bytes read "
            "+ bytes written\",\n    \"best_gb_per_s\": %.2f,\n    \"median_gb_per_s\": %.2f\n  "
            "},\n",
            (unsigned long long)env->copy_bytes, env->copy_reps, env->copy_best_gbs,
            env->copy_median_gbs);
    fputs("  \"timing\": {\n    \"clock\": ", f);
    json_str(f, env->clock_method);
    fprintf(f,
            ",\n    \"statistic\": \"per verify: sample time / reps per sample; median, min and "
            "max over the samples\",\n    \"rotation_bytes\": %llu,\n    \"max_sets\": %zu,\n    "
            "\"sample_target_us\": %.0f,\n    \"samples\": %zu,\n    \"floor\": \"packed verify "
            "bytes (every input of the three packed operations read once, every output written "
            "once) / best copy bandwidth\",\n    \"floor_state\": \"(T + 1) x state bytes x B / "
            "best copy bandwidth (docs/performance.md)\"\n  },\n",
            (unsigned long long)env->rotate_bytes, env->max_sets, env->sample_us, env->samples);
    fputs("  \"results\": [", f);
    for (size_t i = 0; i < n; i++) {
        const bench_result *r = &rs[i];
        const bench_config *c = &r->cfg;
        fprintf(f, "%s\n    {\"shape\": ", i ? "," : "");
        json_str(f, c->shape);
        fprintf(
            f,
            ", \"num_k\": %zu, \"num_v\": %zu, \"d_state\": %d, \"d_conv\": %zu, \"t\": %zu, "
            "\"b\": %zu, \"status\": \"%s\", \"sets\": %zu,\n     \"state_bytes_per_sequence\": "
            "%llu, \"floor_bytes\": %llu, \"floor_state_bytes\": %llu, \"floor_us\": ",
            c->num_k, c->num_v, MEMRA_D_STATE, c->d_conv, c->t, c->b, r->ok ? "ok" : "FAILED",
            r->sets, (unsigned long long)(c->state_words * sizeof(float)),
            (unsigned long long)r->floor_bytes, (unsigned long long)r->floor_state_bytes);
        json_num(f, r->floor_us);
        fputs(", \"floor_state_us\": ", f);
        json_num(f, r->floor_state_us);
        if (!r->ok) {
            fputs(",\n     \"failure\": ", f);
            json_str(f, r->failure);
            fputs("}", f);
            continue;
        }
        fprintf(f,
                ",\n     \"seconds\": {\"setup\": %.3f, \"check\": %.3f, \"capture\": %.3f, "
                "\"timing\": %.3f},\n     \"checked_words\": %zu, \"variants\": {",
                r->setup_s, r->check_s, r->capture_s, r->timing_s, r->compared_words);
        for (int v = 0; v < BV_COUNT; v++) {
            const bench_stats *s = &r->v[v];
            fprintf(f,
                    "%s\n       \"%s\": {\"median_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f, "
                    "\"samples\": %zu, \"reps_per_sample\": %zu, \"floor_fraction\": %.5f}",
                    v ? "," : "", bench_variant_key[v], s->med_us, s->min_us, s->max_us, s->samples,
                    s->reps, r->floor_us / s->med_us);
        }
        fprintf(f, "},\n     \"speedup_graph\": %.4f, \"speedup_eager\": %.4f}",
                r->v[BV_ROW_GRAPH].med_us / r->v[BV_PACK_GRAPH].med_us,
                r->v[BV_ROW_EAGER].med_us / r->v[BV_PACK_EAGER].med_us);
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
    if (write_csv(env, path, rs, n) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/bench.json", dir);
    return write_json(env, path, rs, n);
}
