/*
 * Run-to-run comparison (`memra_bench --compare BASE.json`): reads two bench.json files and
 * prints, per configuration and variant, this run's median time over the base's, with a
 * geometric mean per variant and over everything.
 *
 * A slower time is flagged as a regression only when the two runs' ranges do not overlap:
 * this run's fastest sample is slower than the base's slowest, i.e. the medians are further
 * apart than the base's upper half-range plus this run's lower half-range (a file without
 * min and max gives its range as the spread around the median). Noise inside one run can
 * then not flag anything, however large the ratio looks. That holds in a noisy configuration
 * too: its wide ranges already make a flag rarer, so a cell whose ranges are apart shows '!'
 * (or '+') there, and '~' marks only the noisy configuration's other cells. On top of that the
 * slowdown must exceed a threshold (--threshold, 2% by default): two runs on one machine drift
 * by about a percent (clocks, temperature) in ways neither run's own spread shows. A variant
 * that was timed in the base and FAILED in this run is a regression too.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "json.h"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (f == NULL) {
        bench_fail("cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (cap - len < 65536) {
            char *nb = realloc(buf, cap + 65536 + 1);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                bench_fail("out of memory reading '%s'", path);
                return NULL;
            }
            buf = nb;
            cap += 65536;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        free(buf);
        fclose(f);
        bench_fail("cannot read '%s': read error", path);
        return NULL;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

/* One variant of one configuration. Files of schema 1 have no status per variant: a variant
 * present in a configuration that was checked is one that was timed. */
static void load_variant(const bj_value *jv, bool config_ok, bench_run_variant *out)
{
    const char *status = bj_str(jv, "status", config_ok ? "ok" : "FAILED");
    memset(out, 0, sizeof *out);
    if (strcmp(status, "skipped") == 0)
        return;
    out->present = true;
    out->ok = strcmp(status, "ok") == 0;
    copy_str(out->failure, sizeof out->failure, bj_str(jv, "failure", ""));
    if (!out->ok)
        return;
    out->med_us = bj_num(jv, "median_us", -1.0);
    if (out->med_us <= 0.0) {
        out->ok = false;
        copy_str(out->failure, sizeof out->failure, "no median in the file");
        return;
    }
    /* The range of the samples. A file that gives only the spread ((max - min) / median) has a
     * range of that width, taken as centred on the median since the file does not say more;
     * with neither, the range is the median alone. */
    if (bj_get(jv, "min_us") != NULL && bj_get(jv, "max_us") != NULL) {
        out->min_us = bj_num(jv, "min_us", out->med_us);
        out->max_us = bj_num(jv, "max_us", out->med_us);
        out->spread = bj_num(jv, "spread", (out->max_us - out->min_us) / out->med_us);
    } else {
        out->spread = bj_num(jv, "spread", 0.0);
        out->min_us = out->med_us * (1.0 - out->spread / 2.0);
        out->max_us = out->med_us * (1.0 + out->spread / 2.0);
    }
}

int bench_run_parse(const char *text, const char *what, bench_run *out)
{
    bj_value root;
    char err[200];
    const bj_value *results, *machine;

    memset(out, 0, sizeof *out);
    if (bj_parse(text, &root, err, sizeof err) != 0) {
        bench_fail("%s: not JSON: %s", what, err);
        return -1;
    }
    if (root.type != BJ_OBJ || strcmp(bj_str(&root, "tool", ""), "memra_bench") != 0) {
        bench_fail("%s: not a memra_bench result (no \"tool\": \"memra_bench\")", what);
        bj_free(&root);
        return -1;
    }
    out->schema_version = (int)bj_num(&root, "schema_version", 1);
    if (out->schema_version > BENCH_SCHEMA_VERSION) {
        bench_fail("%s: schema version %d is newer than this bench reads (%d)", what,
                   out->schema_version, BENCH_SCHEMA_VERSION);
        bj_free(&root);
        return -1;
    }
    /* Schema 2 keeps the library's description in "library"; schema 1 at the top level. */
    if (bj_get(&root, "library") != NULL) {
        const bj_value *lib = bj_get(&root, "library");
        copy_str(out->library_version, sizeof out->library_version, bj_str(lib, "version", "?"));
        copy_str(out->commit, sizeof out->commit, bj_str(lib, "commit", "?"));
    } else {
        copy_str(out->library_version, sizeof out->library_version,
                 bj_str(&root, "library_version", "?"));
        copy_str(out->commit, sizeof out->commit, bj_str(&root, "commit", "?"));
    }
    copy_str(out->date, sizeof out->date, bj_str(&root, "date", "?"));
    out->quick = bj_bool(&root, "quick", false);
    machine = bj_get(&root, "machine");
    copy_str(out->backend, sizeof out->backend, bj_str(machine, "backend", "?"));
    copy_str(out->device, sizeof out->device, bj_str(machine, "device", "?"));

    results = bj_get(&root, "results");
    if (results == NULL || results->type != BJ_ARR) {
        bench_fail("%s: no \"results\" array", what);
        bj_free(&root);
        return -1;
    }
    out->e = calloc(results->n + 1, sizeof *out->e);
    if (out->e == NULL) {
        bench_fail("%s: out of memory", what);
        bj_free(&root);
        return -1;
    }
    for (size_t i = 0; i < results->n; i++) {
        const bj_value *r = &results->items[i];
        const bj_value *vars = bj_get(r, "variants");
        bench_run_entry *e = &out->e[out->n];
        const char *shape = bj_str(r, "shape", NULL);
        double t = bj_num(r, "t", 0), b = bj_num(r, "b", 0);
        if (shape == NULL || t < 1 || b < 1) {
            bench_fail("%s: result %zu has no shape, t or b", what, i);
            bench_run_free(out);
            bj_free(&root);
            return -1;
        }
        copy_str(e->shape, sizeof e->shape, shape);
        e->t = (size_t)t;
        e->b = (size_t)b;
        e->ok = strcmp(bj_str(r, "status", "FAILED"), "ok") == 0;
        for (int v = 0; v < BV_COUNT; v++) {
            const bj_value *jv = bj_get(vars, bench_variant_key[v]);
            if (jv != NULL)
                load_variant(jv, e->ok, &e->v[v]);
        }
        /* Schema 1 has no noisy flag: the same rule from the spreads. */
        if (bj_get(r, "noisy") != NULL) {
            e->noisy = bj_bool(r, "noisy", false);
        } else {
            for (int v = 0; v < BV_COUNT; v++)
                if (e->v[v].ok && e->v[v].spread > BENCH_NOISY_SPREAD)
                    e->noisy = true;
        }
        out->n++;
    }
    bj_free(&root);
    return 0;
}

int bench_run_load(const char *path, bench_run *out)
{
    char *text = read_file(path);
    int rc;
    memset(out, 0, sizeof *out);
    if (text == NULL)
        return -1;
    rc = bench_run_parse(text, path, out);
    free(text);
    return rc;
}

void bench_run_free(bench_run *run)
{
    free(run->e);
    memset(run, 0, sizeof *run);
}

static const bench_run_entry *find(const bench_run *run, const bench_run_entry *key)
{
    for (size_t i = 0; i < run->n; i++)
        if (strcmp(run->e[i].shape, key->shape) == 0 && run->e[i].t == key->t &&
            run->e[i].b == key->b)
            return &run->e[i];
    return NULL;
}

/* What one (configuration, variant) pair shows. */
enum verdict { V_NONE, V_SAME, V_SLOWER, V_FASTER, V_FAILED_NOW, V_FIXED, V_FAILED_BOTH };

static enum verdict judge(const bench_run_variant *b, const bench_run_variant *c,
                          const bench_compare_opts *o, double *ratio)
{
    *ratio = 0.0;
    if (!b->present || !c->present)
        return V_NONE;
    if (b->ok && !c->ok)
        return V_FAILED_NOW;
    if (!b->ok && c->ok)
        return V_FIXED;
    if (!b->ok && !c->ok)
        return V_FAILED_BOTH;
    *ratio = c->med_us / b->med_us;
    if (*ratio > 1.0 + o->threshold && c->min_us > b->max_us)
        return V_SLOWER;
    if (*ratio < 1.0 - o->threshold && c->max_us < b->min_us)
        return V_FASTER;
    return V_SAME;
}

static void header_line(FILE *f)
{
    fprintf(f, "%-6s %3s %3s", "shape", "T", "B");
    for (int v = 0; v < BV_COUNT; v++)
        fprintf(f, " %*s", bench_variant_width[v] + 1, bench_variant_name[v]);
    fputs("  note\n", f);
}

void bench_compare(FILE *f, const bench_run *base, const bench_run *cur,
                   const bench_compare_opts *opts, bench_compare_summary *s)
{
    double log_sum = 0.0, log_v[BV_COUNT] = {0};
    char detail[8192];
    size_t dlen = 0;

    memset(s, 0, sizeof *s);
    detail[0] = '\0';
    fprintf(f, "memra_bench --compare: this run / base, median time per verify\n");
    fprintf(f, "  base: libmemra %s (%s), %s, %s: %s%s\n", base->library_version, base->commit,
            base->date, base->backend, base->device, base->quick ? ", quick sweep" : "");
    fprintf(f, "  this: libmemra %s (%s), %s, %s: %s%s\n", cur->library_version, cur->commit,
            cur->date, cur->backend, cur->device, cur->quick ? ", quick sweep" : "");
    if (strcmp(base->backend, cur->backend) != 0 || strcmp(base->device, cur->device) != 0)
        fprintf(f, "  note: the runs used different backends or devices; the ratios compare "
                   "machines as well as code\n");
    if (strcmp(base->backend, "cpu") == 0 || strcmp(cur->backend, "cpu") == 0)
        fprintf(f, "  note: CPU backend: its times, and so these ratios, are for functional "
                   "comparison only\n");
    fprintf(f,
            "  ratio = this / base (below 1: faster). '!' slower with the two runs' ranges apart "
            "(this run's fastest sample\n"
            "  slower than the base's slowest) and by more than %.1f%% (a regression), '+' "
            "faster by the same rule; '~' in a\n"
            "  configuration noisy in either run, for the cells that are neither ('!' and '+' "
            "win); FAILED: not timed in\n"
            "  this run, '-': not in both\n",
            100.0 * opts->threshold);
    header_line(f);

    for (size_t i = 0; i < cur->n; i++) {
        const bench_run_entry *c = &cur->e[i], *b = find(base, c);
        bool noisy;
        if (b == NULL) {
            s->added++;
            continue;
        }
        s->configs_both++;
        noisy = b->noisy || c->noisy;
        s->noisy += noisy;
        fprintf(f, "%-6s %3zu %3zu", c->shape, c->t, c->b);
        for (int v = 0; v < BV_COUNT; v++) {
            double ratio;
            char cell[24];
            const int w = v == BV_FUSED_NOSNAP ? 13 : 11;
            enum verdict d = judge(&b->v[v], &c->v[v], opts, &ratio);
            switch (d) {
            case V_NONE:
                snprintf(cell, sizeof cell, "-");
                break;
            case V_FAILED_NOW:
            case V_FAILED_BOTH:
                snprintf(cell, sizeof cell, "FAILED");
                break;
            case V_FIXED:
                snprintf(cell, sizeof cell, "fixed");
                break;
            default:
                snprintf(cell, sizeof cell, "%.3fx%c", ratio,
                         d == V_SLOWER   ? '!'
                         : d == V_FASTER ? '+'
                         : noisy         ? '~'
                                         : ' ');
            }
            fprintf(f, " %*s", w, cell);
            if (d == V_SAME || d == V_SLOWER || d == V_FASTER) {
                s->pairs++;
                s->pairs_v[v]++;
                log_sum += log(ratio);
                log_v[v] += log(ratio);
            }
            if (d == V_SLOWER || d == V_FAILED_NOW)
                s->regressions++;
            if (d == V_FASTER)
                s->improvements++;
            if ((d == V_SLOWER || d == V_FAILED_NOW) && dlen < sizeof detail - 400) {
                if (d == V_SLOWER)
                    dlen += (size_t)snprintf(
                        detail + dlen, sizeof detail - dlen,
                        "  regression: %s T=%zu B=%zu %s: %.2f us -> %.2f us (%.3fx); base "
                        "%.2f-%.2f, this %.2f-%.2f\n",
                        c->shape, c->t, c->b, bench_variant_name[v], b->v[v].med_us, c->v[v].med_us,
                        ratio, b->v[v].min_us, b->v[v].max_us, c->v[v].min_us, c->v[v].max_us);
                else
                    dlen += (size_t)snprintf(detail + dlen, sizeof detail - dlen,
                                             "  regression: %s T=%zu B=%zu %s: timed in the base, "
                                             "FAILED now: %.200s\n",
                                             c->shape, c->t, c->b, bench_variant_name[v],
                                             c->v[v].failure);
            }
        }
        fprintf(f, "  %s\n",
                !c->ok   ? "FAILED in this run"
                : !b->ok ? "FAILED in the base"
                : noisy  ? "noisy"
                         : "");
    }
    s->geomean = s->pairs > 0 ? exp(log_sum / (double)s->pairs) : 0.0;
    fprintf(f, "%-6s %3s %3s", "geomean", "", "");
    for (int v = 0; v < BV_COUNT; v++) {
        char cell[24] = "-";
        s->geomean_v[v] = s->pairs_v[v] > 0 ? exp(log_v[v] / (double)s->pairs_v[v]) : 0.0;
        if (s->pairs_v[v] > 0)
            snprintf(cell, sizeof cell, "%.3fx ", s->geomean_v[v]);
        fprintf(f, " %*s", v == BV_FUSED_NOSNAP ? 13 : 11, cell);
    }
    fputc('\n', f);

    for (size_t i = 0; i < base->n; i++)
        if (find(cur, &base->e[i]) == NULL) {
            s->missing++;
            fprintf(f, "  missing in this run: %s T=%zu B=%zu\n", base->e[i].shape, base->e[i].t,
                    base->e[i].b);
        }
    for (size_t i = 0; i < cur->n; i++)
        if (find(base, &cur->e[i]) == NULL)
            fprintf(f, "  not in the base: %s T=%zu B=%zu\n", cur->e[i].shape, cur->e[i].t,
                    cur->e[i].b);
    fputs(detail, f);
    fprintf(f,
            "memra_bench --compare: %zu configurations in both, %zu timed pairs, geomean %.3fx; "
            "%zu regressions, %zu improvements flagged; %zu noisy; %zu missing in this run, %zu "
            "not in the base\n",
            s->configs_both, s->pairs, s->geomean, s->regressions, s->improvements, s->noisy,
            s->missing, s->added);
}
