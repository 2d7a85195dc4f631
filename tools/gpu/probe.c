/*
 * The GPU probe, run by tools/gpu/gpu-check.sh on a machine with a CUDA device: a quick
 * correctness pass over the public ABI (packed vs per-row bit identity, eager and graph-replayed
 * with table rebinding, GPU vs CPU agreement, the d_conv sweep, the in-place per-row scan) and
 * the timings of docs/performance.md (graph-replayed packed verify and per-row chain at the
 * ornith shape, T = 8, against the HBM floor measured by a device-to-device copy in the same
 * run).
 *
 * It is a development tool, not a test: the Criterion suite is the test. It uses only the
 * public ABI plus CUDA events for timing.
 *
 * usage: probe [check] [time] [cpu]   (check and time when neither is given; `cpu` runs the
 *        checks on the CPU backend alone, to test the probe itself on a machine without a GPU)
 *        probe sweep | hash | step B T   (see run_sweep, run_hash and run_step)
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "memra.h"

#define S 128
static int failures;

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        MemraStatus st_ = (expr);                                                                  \
        if (st_ != MEMRA_STATUS_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,                    \
                    memra_status_string(st_), memra_last_error_message());                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CUDA(expr)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, cudaGetErrorName(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void varied(float *out, size_t len, uint64_t seed, float spread)
{
    uint64_t x = (seed * UINT64_C(0x9E3779B97F4A7C15)) | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (float)((double)(x >> 11) / (double)(UINT64_C(1) << 53) * 2.0 - 1.0) * spread;
    }
}

static float *hvaried(size_t len, uint64_t seed, float spread)
{
    float *h = malloc(len * sizeof *h);
    varied(h, len, seed, spread);
    return h;
}

static MemraEngine *engine(MemraBackend b)
{
    MemraEngineOptions o;
    MemraEngine *e = NULL;
    CHECK(memra_engine_options_init(&o));
    o.backend = b;
    o.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    CHECK(memra_engine_create(&o, &e));
    return e;
}

static MemraSliceMutF32 up(MemraEngine *e, const float *h, size_t n)
{
    MemraSliceMutF32 s;
    CHECK(memra_htod_f32(e, (MemraSliceF32){h, n}, &s));
    return s;
}

/* A buffer filled with a NaN pattern no kernel produces, so unwritten elements show. */
static MemraSliceMutF32 poisoned(MemraEngine *e, size_t n)
{
    uint32_t *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = 0x7fa5a5a5u;
    MemraSliceMutF32 s = up(e, (const float *)(void *)h, n);
    free(h);
    return s;
}

static float *down(MemraEngine *e, MemraSliceMutF32 s)
{
    float *h = malloc(s.len * sizeof *h);
    CHECK(memra_dtoh_f32(e, (MemraSliceF32){s.ptr, s.len}, (MemraSliceMutF32){h, s.len}));
    return h;
}

static MemraSliceF32 ro(MemraSliceMutF32 s)
{
    return (MemraSliceF32){s.ptr, s.len};
}

static MemraSliceF32 sub(MemraSliceMutF32 s, size_t at, size_t n)
{
    return (MemraSliceF32){s.ptr + at, n};
}

static MemraSliceMutF32 subm(MemraSliceMutF32 s, size_t at, size_t n)
{
    return (MemraSliceMutF32){s.ptr + at, n};
}

static MemraSliceMutU64 table_of(MemraEngine *e, const uint64_t *h, size_t n)
{
    MemraSliceMutU64 s;
    CHECK(memra_htod_u64(e, (MemraSliceU64){h, n}, &s));
    return s;
}

static size_t bit_diffs(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

static double rel_err(const float *a, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static bool all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return false;
    return true;
}

static void expect_same(const char *what, const char *ctx, const float *ref, const float *got,
                        size_t n)
{
    size_t d = bit_diffs(ref, got, n);
    if (d != 0 || !all_finite(got, n)) {
        fprintf(stderr, "FAIL %s: %s differs in %zu of %zu words (finite %d)\n", ctx, what, d, n,
                all_finite(got, n));
        failures++;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The workload of one (shape, T, B, d_conv): host inputs and the results of one run.          */

typedef struct problem {
    size_t num_k, num_v, t, b, d_conv;
    size_t key_dim, value_dim, conv_dim, pad, state_words;
    float eps, scale;
    float *w, *dt, *a, *conv0, *ssm0, *qkv, *beta_raw, *alpha;
} problem;

typedef struct results {
    float *conv_out, *o, *final_ssm, *final_conv, *snap_conv, *snap_ssm;
} results;

static problem make_problem(size_t num_k, size_t num_v, size_t t, size_t b, size_t d_conv,
                            uint64_t seed)
{
    problem p = {.num_k = num_k, .num_v = num_v, .t = t, .b = b, .d_conv = d_conv};
    p.key_dim = S * num_k;
    p.value_dim = S * num_v;
    p.conv_dim = 2 * p.key_dim + p.value_dim;
    p.pad = d_conv - 1;
    p.state_words = (size_t)S * S * num_v;
    p.eps = 1e-6f;
    p.scale = 1.0f / sqrtf((float)S);
    p.w = hvaried(p.conv_dim * d_conv, seed + 1, 0.5f);
    p.dt = hvaried(num_v, seed + 2, 0.5f);
    p.a = hvaried(num_v, seed + 3, 1.0f);
    p.conv0 = hvaried(b * p.conv_dim * (p.pad ? p.pad : 1), seed + 10, 1.0f);
    p.ssm0 = hvaried(b * p.state_words, seed + 20, 0.3f);
    p.qkv = hvaried(b * t * p.conv_dim, seed + 30, 1.0f);
    p.beta_raw = hvaried(b * t * num_v, seed + 40, 2.0f);
    p.alpha = hvaried(b * t * num_v, seed + 50, 2.0f);
    return p;
}

/* The per-row program, sequence by sequence, row by row, state ping-pong, snapshots by copy. */
static results run_per_row(MemraEngine *e, const problem *p)
{
    const size_t cd = p->conv_dim, vd = p->value_dim, nv = p->num_v, t = p->t;
    const size_t ring = cd * (p->pad ? p->pad : 1);
    results r = {0};
    r.conv_out = malloc(p->b * t * cd * 4);
    r.o = malloc(p->b * t * vd * 4);
    r.final_ssm = malloc(p->b * p->state_words * 4);
    r.final_conv = malloc(p->b * ring * 4);
    r.snap_conv = malloc(p->b * (t ? t - 1 : 0) * cd * p->pad * 4 + 4);
    r.snap_ssm = malloc(p->b * (t - 1) * p->state_words * 4 + 4);

    MemraSliceMutF32 w = up(e, p->w, cd * p->d_conv), dt = up(e, p->dt, nv), a = up(e, p->a, nv);
    MemraSliceMutF32 qkv = up(e, p->qkv, p->b * t * cd);
    MemraSliceMutF32 braw = up(e, p->beta_raw, p->b * t * nv);
    MemraSliceMutF32 alpha = up(e, p->alpha, p->b * t * nv);
    MemraSliceMutF32 co = poisoned(e, cd), q = poisoned(e, vd), k = poisoned(e, vd),
                     v = poisoned(e, vd), be = poisoned(e, nv), g = poisoned(e, nv),
                     o = poisoned(e, vd);
    for (size_t b = 0; b < p->b; b++) {
        MemraSliceMutF32 conv = up(e, p->conv0 + b * ring, ring);
        MemraSliceMutF32 s0 = up(e, p->ssm0 + b * p->state_words, p->state_words);
        MemraSliceMutF32 s1 = poisoned(e, p->state_words);
        uint64_t h[6] = {(uintptr_t)conv.ptr, (uintptr_t)s0.ptr, (uintptr_t)s1.ptr,
                         (uintptr_t)conv.ptr, (uintptr_t)s1.ptr, (uintptr_t)s0.ptr};
        MemraSliceMutU64 tab = table_of(e, h, 6);
        for (size_t row = 0; row < t; row++) {
            size_t base = row % 2 ? 3 : 0;
            MemraSliceU64 cv = {tab.ptr + base, 1}, in = {tab.ptr + base + 1, 1},
                          out = {tab.ptr + base + 2, 1};
            size_t at = b * t + row;
            CHECK(memra_ssm_conv1d_fused_decode_b_view(e, sub(qkv, at * cd, cd), cv, ro(w), co, cd,
                                                       p->d_conv, 1));
            CHECK(memra_gdn_prep_decode_b_view(e, ro(co), sub(braw, at * nv, nv),
                                               sub(alpha, at * nv, nv), ro(dt), ro(a), q, k, v, be,
                                               g, S, nv, p->num_k, p->key_dim, p->eps, cd, 1));
            CHECK(memra_gdn_scan_s128_batched_view(e, ro(q), ro(k), ro(v), ro(g), ro(be), in, out,
                                                   o, nv, 1, p->scale));
            CHECK(memra_dtoh_f32(e, ro(co), (MemraSliceMutF32){r.conv_out + at * cd, cd}));
            CHECK(memra_dtoh_f32(e, ro(o), (MemraSliceMutF32){r.o + at * vd, vd}));
            if (row + 1 < t) {
                size_t sc = (b * (t - 1) + row);
                if (p->pad)
                    CHECK(memra_dtoh_f32(
                        e, ro(conv),
                        (MemraSliceMutF32){r.snap_conv + sc * cd * p->pad, cd * p->pad}));
                MemraSliceMutF32 cur = row % 2 == 0 ? s1 : s0;
                CHECK(memra_dtoh_f32(
                    e, ro(cur),
                    (MemraSliceMutF32){r.snap_ssm + sc * p->state_words, p->state_words}));
            }
        }
        CHECK(memra_dtoh_f32(e, ro(t % 2 ? s1 : s0),
                             (MemraSliceMutF32){r.final_ssm + b * p->state_words, p->state_words}));
        CHECK(memra_dtoh_f32(e, ro(conv), (MemraSliceMutF32){r.final_conv + b * ring, ring}));
        CHECK(memra_free(e, conv.ptr));
        CHECK(memra_free(e, s0.ptr));
        CHECK(memra_free(e, s1.ptr));
        CHECK(memra_free(e, tab.ptr));
    }
    return r;
}

/* The packed program: one launch per op over B sequences x T rows. */
typedef struct packed {
    const problem *p;
    MemraSliceMutF32 w, dt, a, qkv, braw, alpha, co, q, k, v, be, g, o, snap_c, snap_s;
    MemraSliceMutU64 table;
} packed;

static MemraStatus packed_step(MemraEngine *e, void *user)
{
    packed *k = user;
    const problem *p = k->p;
    MemraStatus st;
    st = memra_ssm_conv1d_fused_decode_tloop(e, ro(k->qkv),
                                             (MemraSliceU64){k->table.ptr, k->table.len}, ro(k->w),
                                             k->co, k->snap_c, p->conv_dim, p->d_conv, p->t, p->b);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_prep_decode_b(e, ro(k->co), ro(k->braw), ro(k->alpha), ro(k->dt), ro(k->a), k->q,
                                 k->k, k->v, k->be, k->g, S, p->num_v, p->num_k, p->key_dim, p->eps,
                                 p->conv_dim, p->b * p->t);
    if (st != MEMRA_STATUS_OK)
        return st;
    return memra_gdn_scan_s128_tsnap(e, ro(k->q), ro(k->k), ro(k->v), ro(k->g), ro(k->be),
                                     (MemraSliceU64){k->table.ptr, k->table.len}, k->o, p->num_v,
                                     p->t, p->b, p->scale, k->snap_s);
}

static packed packed_setup(MemraEngine *e, const problem *p)
{
    const size_t cd = p->conv_dim, vd = p->value_dim, nv = p->num_v, t = p->t, b = p->b;
    packed k = {.p = p};
    k.w = up(e, p->w, cd * p->d_conv);
    k.dt = up(e, p->dt, nv);
    k.a = up(e, p->a, nv);
    k.qkv = up(e, p->qkv, b * t * cd);
    k.braw = up(e, p->beta_raw, b * t * nv);
    k.alpha = up(e, p->alpha, b * t * nv);
    k.co = poisoned(e, b * t * cd);
    k.q = poisoned(e, b * t * vd);
    k.k = poisoned(e, b * t * vd);
    k.v = poisoned(e, b * t * vd);
    k.be = poisoned(e, b * t * nv);
    k.g = poisoned(e, b * t * nv);
    k.o = poisoned(e, b * t * vd);
    k.snap_c = p->pad && t > 1 ? poisoned(e, b * (t - 1) * cd * p->pad) : (MemraSliceMutF32){0};
    k.snap_s = t > 1 ? poisoned(e, b * (t - 1) * p->state_words) : (MemraSliceMutF32){0};
    uint64_t *h = calloc(3 * b, 8);
    k.table = table_of(e, h, 3 * b);
    free(h);
    return k;
}

/* Fresh rings and states for every sequence (canonical = ssm0, alternate poisoned), swapped
 * in the table when `swap`; returns the device buffers so the caller can read them back. */
typedef struct bound {
    MemraSliceMutF32 conv, first, second;
} bound;

static bound bind(MemraEngine *e, packed *k, bool swap)
{
    const problem *p = k->p;
    const size_t ring = p->conv_dim * (p->pad ? p->pad : 1);
    bound bd;
    bd.conv = up(e, p->conv0, p->b * ring);
    bd.first = poisoned(e, p->b * p->state_words);
    bd.second = poisoned(e, p->b * p->state_words);
    MemraSliceMutF32 canon = swap ? bd.second : bd.first, alt = swap ? bd.first : bd.second;
    CHECK(memra_htod_f32_into(e, (MemraSliceF32){p->ssm0, p->b * p->state_words}, canon));
    uint64_t *h = malloc(3 * p->b * 8);
    for (size_t b = 0; b < p->b; b++) {
        h[3 * b] = (uintptr_t)(bd.conv.ptr + b * ring);
        h[3 * b + 1] = (uintptr_t)(canon.ptr + b * p->state_words);
        h[3 * b + 2] = (uintptr_t)(alt.ptr + b * p->state_words);
    }
    CHECK(memra_htod_u64_into(e, (MemraSliceU64){h, 3 * p->b}, k->table));
    free(h);
    return bd;
}

static results collect(MemraEngine *e, packed *k, bound *bd, bool swap)
{
    const problem *p = k->p;
    results r = {0};
    MemraSliceMutF32 canon = swap ? bd->second : bd->first, alt = swap ? bd->first : bd->second;
    r.conv_out = down(e, k->co);
    r.o = down(e, k->o);
    r.final_ssm = down(e, p->t % 2 ? alt : canon);
    r.final_conv = down(e, bd->conv);
    r.snap_conv = k->snap_c.len ? down(e, k->snap_c) : NULL;
    r.snap_ssm = k->snap_s.len ? down(e, k->snap_s) : NULL;
    return r;
}

static void compare(const char *ctx, const problem *p, const results *ref, const results *got)
{
    const size_t t = p->t, b = p->b;
    const size_t ring = p->conv_dim * (p->pad ? p->pad : 1);
    expect_same("conv_out", ctx, ref->conv_out, got->conv_out, b * t * p->conv_dim);
    expect_same("scan o", ctx, ref->o, got->o, b * t * p->value_dim);
    expect_same("final ssm", ctx, ref->final_ssm, got->final_ssm, b * p->state_words);
    if (p->pad)
        expect_same("final conv", ctx, ref->final_conv, got->final_conv, b * ring);
    if (t > 1 && p->pad)
        expect_same("snap conv", ctx, ref->snap_conv, got->snap_conv,
                    b * (t - 1) * p->conv_dim * p->pad);
    if (t > 1)
        expect_same("snap ssm", ctx, ref->snap_ssm, got->snap_ssm, b * (t - 1) * p->state_words);
}

static void free_results(results *r)
{
    free(r->conv_out);
    free(r->o);
    free(r->final_ssm);
    free(r->final_conv);
    free(r->snap_conv);
    free(r->snap_ssm);
}

static void free_problem(problem *p)
{
    free(p->w);
    free(p->dt);
    free(p->a);
    free(p->conv0);
    free(p->ssm0);
    free(p->qkv);
    free(p->beta_raw);
    free(p->alpha);
}

static void check_case(MemraEngine *gpu, MemraEngine *cpu, size_t num_k, size_t num_v, size_t t,
                       size_t b, size_t d_conv, uint64_t seed)
{
    char ctx[128];
    snprintf(ctx, sizeof ctx, "num_k=%zu num_v=%zu T=%zu B=%zu d_conv=%zu seed=%llu", num_k, num_v,
             t, b, d_conv, (unsigned long long)seed);
    problem p = make_problem(num_k, num_v, t, b, d_conv, seed);
    results ref = run_per_row(gpu, &p);

    /* Eager packed. */
    packed k = packed_setup(gpu, &p);
    bound bd = bind(gpu, &k, false);
    CHECK(packed_step(gpu, &k));
    results got = collect(gpu, &k, &bd, false);
    compare(ctx, &p, &ref, &got);
    free_results(&got);

    /* Graph: captured once, replayed with rebinding, the second time with canonical and
     * alternate swapped. */
    MemraGraph *graph = NULL;
    CHECK(memra_graph_capture(gpu, packed_step, &k, &graph));
    for (int replay = 0; replay < 2; replay++) {
        bound rb = bind(gpu, &k, replay == 1);
        CHECK(memra_graph_launch(gpu, graph));
        results gr = collect(gpu, &k, &rb, replay == 1);
        char c2[160];
        snprintf(c2, sizeof c2, "%s graph replay %d", ctx, replay);
        compare(c2, &p, &ref, &gr);
        free_results(&gr);
    }
    CHECK(memra_graph_destroy(gpu, graph));

    /* CPU agreement (per-row program on the CPU backend) for the outputs. */
    if (cpu != NULL) {
        results cref = run_per_row(cpu, &p);
        double e1 = rel_err(ref.conv_out, cref.conv_out, b * t * p.conv_dim);
        double e2 = rel_err(ref.o, cref.o, b * t * p.value_dim);
        double e3 = rel_err(ref.final_ssm, cref.final_ssm, b * p.state_words);
        double e4 = t > 1 ? rel_err(ref.snap_ssm, cref.snap_ssm, b * (t - 1) * p.state_words) : 0;
        double worst = fmax(fmax(e1, e2), fmax(e3, e4));
        if (!(worst <= 1e-5)) {
            fprintf(stderr, "FAIL %s: GPU vs CPU rel err conv %.3g o %.3g state %.3g snap %.3g\n",
                    ctx, e1, e2, e3, e4);
            failures++;
        }
        free_results(&cref);
    }
    free_results(&ref);
    free_problem(&p);
}

/* Per-row scan with in == out (in place) equals the ping-pong result. */
static void check_in_place(MemraEngine *e, uint64_t seed)
{
    problem p = make_problem(2, 4, 1, 1, 4, seed);
    const size_t nv = p.num_v, vd = p.value_dim, sw = p.state_words;
    float *q = hvaried(vd, seed + 5, 0.1f), *k = hvaried(vd, seed + 6, 0.1f),
          *v = hvaried(vd, seed + 7, 1.0f), *g = hvaried(nv, seed + 8, 0.5f),
          *be = hvaried(nv, seed + 9, 0.5f);
    MemraSliceMutF32 dq = up(e, q, vd), dk = up(e, k, vd), dv = up(e, v, vd), dg = up(e, g, nv),
                     db = up(e, be, nv);
    MemraSliceMutF32 a = up(e, p.ssm0, sw), b = poisoned(e, sw), c = up(e, p.ssm0, sw);
    MemraSliceMutF32 o1 = poisoned(e, vd), o2 = poisoned(e, vd);
    uint64_t h[3] = {(uintptr_t)a.ptr, (uintptr_t)b.ptr, (uintptr_t)c.ptr};
    MemraSliceMutU64 tab = table_of(e, h, 3);
    CHECK(memra_gdn_scan_s128_batched_view(e, ro(dq), ro(dk), ro(dv), ro(dg), ro(db),
                                           (MemraSliceU64){tab.ptr, 1},
                                           (MemraSliceU64){tab.ptr + 1, 1}, o1, nv, 1, p.scale));
    CHECK(memra_gdn_scan_s128_batched_view(e, ro(dq), ro(dk), ro(dv), ro(dg), ro(db),
                                           (MemraSliceU64){tab.ptr + 2, 1},
                                           (MemraSliceU64){tab.ptr + 2, 1}, o2, nv, 1, p.scale));
    float *hb = down(e, b), *hc = down(e, c), *h1 = down(e, o1), *h2 = down(e, o2);
    expect_same("in-place state", "per-row scan in place", hb, hc, sw);
    expect_same("in-place o", "per-row scan in place", h1, h2, vd);
    free(hb);
    free(hc);
    free(h1);
    free(h2);
    free(q);
    free(k);
    free(v);
    free(g);
    free(be);
    free_problem(&p);
}

static void run_checks(bool cpu_only)
{
    MemraEngine *gpu = engine(cpu_only ? MEMRA_BACKEND_CPU : MEMRA_BACKEND_CUDA);
    MemraEngine *cpu = cpu_only ? NULL : engine(MEMRA_BACKEND_CPU);
    uint64_t seed = 1;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1)
            seed = 1;
        fclose(f);
    }
    seed %= 1000000;
    printf("check: seed %llu\n", (unsigned long long)seed);
    for (size_t t = 1; t <= 8; t++) {
        check_case(gpu, cpu, 2, 4, t, 1, 4, seed + t);
        check_case(gpu, t <= 3 ? cpu : NULL, 16, 32, t, 1, 4, seed + 100 + t);
    }
    check_case(gpu, cpu, 2, 4, 5, 3, 4, seed + 200);
    check_case(gpu, NULL, 16, 32, 8, 2, 4, seed + 201);
    for (size_t dc = 1; dc <= 8; dc++)
        check_case(gpu, cpu, 1, 2, 4, 2, dc, seed + 300 + dc);
    check_in_place(gpu, seed + 400);
    if (cpu != NULL)
        CHECK(memra_engine_destroy(cpu));
    CHECK(memra_engine_destroy(gpu));
    printf("check: %s (%d failure(s))\n", failures ? "FAILED" : "all bit-identical", failures);
}

/* ------------------------------------------------------------------------------------------ */
/* Timing.                                                                                       */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median over `rounds` of the mean time of `reps` replays, in microseconds. */
static float time_graph(MemraEngine *e, MemraGraph *g, int rounds, int reps)
{
    void *sp = NULL;
    CHECK(memra_engine_stream(e, &sp));
    cudaStream_t s = sp;
    cudaEvent_t a, b;
    CUDA(cudaEventCreate(&a));
    CUDA(cudaEventCreate(&b));
    for (int i = 0; i < 20; i++)
        CHECK(memra_graph_launch(e, g));
    float t[64];
    for (int r = 0; r < rounds; r++) {
        CUDA(cudaEventRecord(a, s));
        for (int i = 0; i < reps; i++)
            CHECK(memra_graph_launch(e, g));
        CUDA(cudaEventRecord(b, s));
        CUDA(cudaEventSynchronize(b));
        float ms;
        CUDA(cudaEventElapsedTime(&ms, a, b));
        t[r] = ms * 1000.0f / (float)reps;
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp_float);
    CUDA(cudaEventDestroy(a));
    CUDA(cudaEventDestroy(b));
    return t[rounds / 2];
}

/* The ornith shape (d_conv 4) with a decaying state, as a real model has: the timed problem. */
static problem timing_problem(size_t t, size_t b, uint64_t seed)
{
    problem p = make_problem(16, 32, t, b, 4, seed);
    for (size_t i = 0; i < p.num_v; i++)
        p.a[i] = -fabsf(p.a[i]);
    return p;
}

/* Device-to-device copy bandwidth (bytes read + written per second) over a 2 GiB buffer. */
static double copy_bandwidth(void)
{
    size_t bytes = (size_t)1 << 30;
    void *x, *y;
    cudaStream_t s;
    cudaEvent_t a, b;
    CUDA(cudaMalloc(&x, bytes));
    CUDA(cudaMalloc(&y, bytes));
    CUDA(cudaMemset(x, 1, bytes));
    CUDA(cudaStreamCreate(&s));
    CUDA(cudaEventCreate(&a));
    CUDA(cudaEventCreate(&b));
    float t[9];
    for (int r = 0; r < 9; r++) {
        CUDA(cudaEventRecord(a, s));
        CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
        CUDA(cudaEventRecord(b, s));
        CUDA(cudaEventSynchronize(b));
        CUDA(cudaEventElapsedTime(&t[r], a, b));
    }
    qsort(t, 9, sizeof t[0], cmp_float);
    /* Write-only bandwidth, for reference: the scan's traffic is 8/9 writes. */
    float wt[9];
    for (int r = 0; r < 9; r++) {
        CUDA(cudaEventRecord(a, s));
        CUDA(cudaMemsetAsync(y, r, bytes, s));
        CUDA(cudaEventRecord(b, s));
        CUDA(cudaEventSynchronize(b));
        CUDA(cudaEventElapsedTime(&wt[r], a, b));
    }
    qsort(wt, 9, sizeof wt[0], cmp_float);
    printf("time: memset (write-only) bandwidth %.3f TB/s\n",
           (double)bytes / (wt[4] * 1e-3) / 1e12);
    CUDA(cudaFree(x));
    CUDA(cudaFree(y));
    CUDA(cudaStreamDestroy(s));
    return 2.0 * (double)bytes / (t[4] * 1e-3);
}

/* The per-row chain of memra-engine: T rows x (conv, prep, scan), b_n = B per launch. */
typedef struct chain {
    const problem *p;
    MemraSliceMutF32 w, dt, a, qkv, braw, alpha, co, q, k, v, be, g, o;
    MemraSliceMutU64 tab; /* [conv ring x B | state0 x B | state1 x B] */
} chain;

static MemraStatus chain_step(MemraEngine *e, void *user)
{
    chain *c = user;
    const problem *p = c->p;
    const size_t cd = p->conv_dim, nv = p->num_v, vd = p->value_dim, B = p->b;
    for (size_t row = 0; row < p->t; row++) {
        MemraSliceU64 ring = {c->tab.ptr, B};
        MemraSliceU64 in = {c->tab.ptr + (row % 2 ? 2 : 1) * B, B};
        MemraSliceU64 out = {c->tab.ptr + (row % 2 ? 1 : 2) * B, B};
        MemraStatus st = memra_ssm_conv1d_fused_decode_b_view(
            e, sub(c->qkv, row * B * cd, B * cd), ring, ro(c->w), c->co, cd, p->d_conv, B);
        if (st == MEMRA_STATUS_OK)
            st = memra_gdn_prep_decode_b_view(e, ro(c->co), sub(c->braw, row * B * nv, B * nv),
                                              sub(c->alpha, row * B * nv, B * nv), ro(c->dt),
                                              ro(c->a), c->q, c->k, c->v, c->be, c->g, S, nv,
                                              p->num_k, p->key_dim, p->eps, cd, B);
        if (st == MEMRA_STATUS_OK)
            st = memra_gdn_scan_s128_batched_view(
                e, ro(c->q), ro(c->k), ro(c->v), ro(c->g), ro(c->be), in, out,
                subm(c->o, row * B * vd, B * vd), nv, B, p->scale);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    return MEMRA_STATUS_OK;
}

/* Single-op steps for the per-kernel breakdown. */
static MemraStatus conv_only(MemraEngine *e, void *user)
{
    packed *k = user;
    const problem *p = k->p;
    return memra_ssm_conv1d_fused_decode_tloop(
        e, ro(k->qkv), (MemraSliceU64){k->table.ptr, k->table.len}, ro(k->w), k->co, k->snap_c,
        p->conv_dim, p->d_conv, p->t, p->b);
}

static MemraStatus prep_only(MemraEngine *e, void *user)
{
    packed *k = user;
    const problem *p = k->p;
    return memra_gdn_prep_decode_b(e, ro(k->co), ro(k->braw), ro(k->alpha), ro(k->dt), ro(k->a),
                                   k->q, k->k, k->v, k->be, k->g, S, p->num_v, p->num_k, p->key_dim,
                                   p->eps, p->conv_dim, p->b * p->t);
}

/* The packed scan alone, writing its snapshots to `snap` (none when snap is empty). */
static MemraStatus scan_into(MemraEngine *e, const packed *k, MemraSliceMutF32 snap)
{
    const problem *p = k->p;
    return memra_gdn_scan_s128_tsnap(e, ro(k->q), ro(k->k), ro(k->v), ro(k->g), ro(k->be),
                                     (MemraSliceU64){k->table.ptr, k->table.len}, k->o, p->num_v,
                                     p->t, p->b, p->scale, snap);
}

static MemraStatus scan_only(MemraEngine *e, void *user)
{
    const packed *k = user;
    return scan_into(e, k, k->snap_s);
}

static float time_step(MemraEngine *e, MemraStepFn fn, void *user, int reps)
{
    MemraGraph *g = NULL;
    CHECK(memra_graph_capture(e, fn, user, &g));
    float us = time_graph(e, g, 15, reps);
    CHECK(memra_graph_destroy(e, g));
    return us;
}

static void run_timing(void)
{
    const double bw = copy_bandwidth();
    printf("time: D2D copy bandwidth %.3f TB/s (read + write)\n", bw / 1e12);
    MemraEngine *e = engine(MEMRA_BACKEND_CUDA);
    const size_t T = 8;
    const size_t batches[3] = {1, 8, 32};
    printf("time: ornith T=8 graph-replayed, median of 15 rounds (us)\n");
    printf("%4s %10s %10s %8s %10s %8s | %8s %8s %8s\n", "B", "packed", "floor", "x floor",
           "per-row", "speedup", "conv", "prep", "scan");
    for (int bi = 0; bi < 3; bi++) {
        const size_t B = batches[bi];
        problem p = timing_problem(T, B, 77 + B);
        packed k = packed_setup(e, &p);
        bound bd = bind(e, &k, false);
        const int reps = B == 1 ? 200 : 50;
        float t_packed = time_step(e, packed_step, &k, reps);
        float t_conv = time_step(e, conv_only, &k, reps);
        float t_prep = time_step(e, prep_only, &k, reps);
        float t_scan = time_step(e, scan_only, &k, reps);

        /* Per-row chain with b_n = B per launch. */
        chain c = {.p = &p, .w = k.w, .dt = k.dt, .a = k.a, .braw = k.braw, .alpha = k.alpha};
        c.qkv = k.qkv; /* any [T, B, conv_dim] data does for timing */
        c.co = poisoned(e, B * p.conv_dim);
        c.q = poisoned(e, B * p.value_dim);
        c.k = poisoned(e, B * p.value_dim);
        c.v = poisoned(e, B * p.value_dim);
        c.be = poisoned(e, B * p.num_v);
        c.g = poisoned(e, B * p.num_v);
        c.o = poisoned(e, T * B * p.value_dim);
        uint64_t *h = malloc(3 * B * 8);
        for (size_t b = 0; b < B; b++) {
            h[b] = (uintptr_t)(bd.conv.ptr + b * p.conv_dim * p.pad);
            h[B + b] = (uintptr_t)(bd.first.ptr + b * p.state_words);
            h[2 * B + b] = (uintptr_t)(bd.second.ptr + b * p.state_words);
        }
        c.tab = table_of(e, h, 3 * B);
        free(h);
        float t_chain = time_step(e, chain_step, &c, B == 1 ? 100 : 20);

        const double floor_us = (double)(T + 1) * 2.0 * 1048576.0 * (double)B / bw * 1e6;
        printf("%4zu %10.2f %10.2f %8.2f %10.2f %8.2f | %8.2f %8.2f %8.2f\n", B, t_packed, floor_us,
               t_packed / floor_us, t_chain, t_chain / t_packed, t_conv, t_prep, t_scan);
        free_problem(&p);
    }
    CHECK(memra_engine_destroy(e));
}

static MemraStatus scan_nosnap(MemraEngine *e, void *user)
{
    return scan_into(e, user, (MemraSliceMutF32){NULL, 0});
}

/* Scan-alone and packed times over T at B = 1 and 32: the slope over T is the cost of a row,
 * the intercept the fixed cost (launch, state load, final store). */
static void run_sweep(void)
{
    MemraEngine *e = engine(MEMRA_BACKEND_CUDA);
    const size_t ts[5] = {1, 2, 4, 8, 16};
    const size_t bs[2] = {1, 32};
    printf("sweep: ornith, hot graph replays (us): B T packed conv prep scan scan-nosnap\n");
    for (int bi = 0; bi < 2; bi++) {
        for (int ti = 0; ti < 5; ti++) {
            const size_t B = bs[bi], T = ts[ti];
            problem p = timing_problem(T, B, 99 + T + B);
            packed k = packed_setup(e, &p);
            (void)bind(e, &k, false);
            const int reps = B == 1 ? 200 : 20;
            float tp = time_step(e, packed_step, &k, reps);
            float tc = time_step(e, conv_only, &k, reps);
            float tq = time_step(e, prep_only, &k, reps);
            float ts_ = time_step(e, scan_only, &k, reps);
            float tn = time_step(e, scan_nosnap, &k, reps);
            printf("sweep %3zu %3zu %9.2f %9.2f %9.2f %9.2f %9.2f\n", B, T, tp, tc, tq, ts_, tn);
            free_problem(&p);
        }
    }
    CHECK(memra_engine_destroy(e));
}

/* Five eager packed verifies at the ornith shape (B and T from the command line), for a
 * profiler: `ncu -k regex:gdn_scan --launch-skip 2 --launch-count 1 probe step 1 8` looks at
 * one scan that runs after two warm-up verifies, with nothing else on the GPU. */
static void run_step(size_t B, size_t T)
{
    MemraEngine *e = engine(MEMRA_BACKEND_CUDA);
    problem p = timing_problem(T, B, 5 + T + B);
    packed k = packed_setup(e, &p);
    (void)bind(e, &k, false);
    for (int i = 0; i < 5; i++)
        CHECK(packed_step(e, &k));
    CHECK(memra_engine_synchronize(e));
    printf("step: ornith B=%zu T=%zu, 5 eager packed verifies\n", B, T);
    free_problem(&p);
    CHECK(memra_engine_destroy(e));
}

/* FNV-1a over the bits of n floats (0 for an absent tensor). */
static unsigned long long fnv(const float *a, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037);
    if (a == NULL)
        return 0;
    const unsigned char *c = (const unsigned char *)a;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        h ^= c[i];
        h *= UINT64_C(1099511628211);
    }
    return (unsigned long long)h;
}

/* Fingerprints of the packed verify's outputs on fixed inputs (both shapes, T = 1, 3 and 8, two
 * sequences): two builds that print the same lines compute the same bits. */
static void run_hash(void)
{
    MemraEngine *e = engine(MEMRA_BACKEND_CUDA);
    const size_t shapes[2][2] = {{2, 4}, {16, 32}};
    const size_t ts[3] = {1, 3, 8};
    for (int si = 0; si < 2; si++) {
        for (int ti = 0; ti < 3; ti++) {
            problem p = make_problem(shapes[si][0], shapes[si][1], ts[ti], 2, 4, 4242 + ti);
            packed k = packed_setup(e, &p);
            bound bd = bind(e, &k, false);
            CHECK(packed_step(e, &k));
            results r = collect(e, &k, &bd, false);
            const size_t t = p.t, b = p.b;
            const size_t ring = p.conv_dim * p.pad;
            printf("hash num_v=%zu T=%zu conv_out %016llx o %016llx state %016llx ring %016llx "
                   "snaps %016llx %016llx\n",
                   p.num_v, t, fnv(r.conv_out, b * t * p.conv_dim), fnv(r.o, b * t * p.value_dim),
                   fnv(r.final_ssm, b * p.state_words), fnv(r.final_conv, b * ring),
                   fnv(r.snap_conv, b * (t - 1) * ring),
                   fnv(r.snap_ssm, b * (t - 1) * p.state_words));
            free_results(&r);
            free_problem(&p);
        }
    }
    CHECK(memra_engine_destroy(e));
}

int main(int argc, char **argv)
{
    bool check = false, timing = false, cpu_only = false, sweep = false;
    for (int i = 1; i < argc; i++) {
        check |= strcmp(argv[i], "check") == 0;
        timing |= strcmp(argv[i], "time") == 0;
        cpu_only |= strcmp(argv[i], "cpu") == 0;
        sweep |= strcmp(argv[i], "sweep") == 0;
        if (strcmp(argv[i], "step") == 0 && i + 2 < argc) {
            run_step(strtoul(argv[i + 1], NULL, 10), strtoul(argv[i + 2], NULL, 10));
            return failures ? 1 : 0;
        }
        if (strcmp(argv[i], "hash") == 0) {
            run_hash();
            return failures ? 1 : 0;
        }
    }
    if (sweep) {
        run_sweep();
        return failures ? 1 : 0;
    }
    if (!check && !timing)
        check = timing = true;
    if (check)
        run_checks(cpu_only);
    if (timing)
        run_timing();
    return failures ? 1 : 0;
}
