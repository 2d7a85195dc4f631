/*
 * The benchmarked work: buffers for one configuration, the per-row chain and the packed
 * program (eager and as captured graphs), and the bit-identity check that must pass before any
 * of them is timed.
 *
 * Each configuration owns several "sets": complete, independent verifies (rings, states,
 * inputs, outputs, snapshots, pointer tables and one graph per program). Timing rotates through
 * the sets so that a set's memory has left the cache before it is used again; every rep is a
 * full, valid verify of its own set, with no host copy between reps.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const bench_variant_key[BV_COUNT] = {"row_eager", "row_graph", "packed_eager",
                                                 "packed_graph"};

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

void bench_config_init(bench_config *c, const char *shape, size_t num_k, size_t num_v, size_t t,
                       size_t b)
{
    memset(c, 0, sizeof *c);
    c->shape = shape;
    c->num_k = num_k;
    c->num_v = num_v;
    c->t = t;
    c->b = b;
    c->d_conv = 4;
    c->pad = c->d_conv - 1;
    c->key_dim = MEMRA_D_STATE * num_k;
    c->value_dim = MEMRA_D_STATE * num_v;
    c->conv_dim = 2 * c->key_dim + c->value_dim;
    c->ring_words = c->conv_dim * c->pad;
    c->state_words = (size_t)MEMRA_D_STATE * MEMRA_D_STATE * num_v;
    /* The seed's constants. */
    c->eps = 1e-6f;
    c->scale = 1.0f / sqrtf((float)MEMRA_D_STATE);
}

uint64_t bench_floor_bytes(const bench_config *c, uint64_t *state_only)
{
    const uint64_t f = sizeof(float), B = c->b, T = c->t;
    const uint64_t rows = B * T;
    /* Canonical state read, T - 1 snapshots and the final state written. */
    uint64_t state = (T + 1) * c->state_words * f * B;
    /* The same for the conv ring: read, T - 1 snapshots, the rolled ring written. */
    uint64_t ring = (T + 1) * c->ring_words * f * B;
    /* conv: qkv in, conv_outs out, weights in; prep: conv_outs, beta_raw, alpha in, q, k, v,
     * beta, g_log out; scan: q, k, v, beta, g_log in, o out; tables read by conv and scan. */
    uint64_t act = rows * c->conv_dim * f * 3 + c->conv_dim * c->d_conv * f + 2 * c->num_v * f +
                   rows * c->num_v * f * 2 + rows * c->value_dim * f * 3 * 2 +
                   rows * c->num_v * f * 2 * 2 + rows * c->value_dim * f +
                   2 * B * MEMRA_TABLE_WIDTH * sizeof(uint64_t);
    if (state_only != NULL)
        *state_only = state;
    return state + ring + act;
}

/* ---- buffers ---- */

typedef struct bench_set {
    /* Shared by both programs: sequence b's ring, canonical and alternate state at b * words. */
    MemraSliceMutF32 ring, canon, alt;
    /* Packed program, sequence-major [B, T, ...]. */
    MemraSliceMutF32 qkv, beta_raw, alpha;
    MemraSliceMutF32 conv_outs, q, k, v, beta, g_log, o, snap_conv, snap_ssm;
    MemraSliceMutU64 table; /* [B, 3]: ring, canonical, alternate */
    /* Per-row chain, row-major [T, B, ...], so that row r of all B sequences is contiguous as
     * the per-row operations take it. Prep outputs are scratch reused by every row, as in
     * memra-engine; conv outputs and scan outputs are kept for every row. */
    MemraSliceMutF32 r_qkv, r_beta_raw, r_alpha, r_conv_out, r_o;
    MemraSliceMutF32 r_q, r_k, r_v, r_beta, r_g_log;
    /* [rings | canonical | alternate | canonical], B entries each: even rows read entries
     * [B, 2B) and write [2B, 3B), odd rows read [2B, 3B) and write [3B, 4B). */
    MemraSliceMutU64 r_table;
    MemraGraph *graph_rows, *graph_packed;
    float *arena;
    uint64_t *table_arena;
} bench_set;

struct bench_work {
    bench_env *env;
    bench_config c;
    size_t n_sets;
    bench_set *sets;
    MemraSliceMutF32 w, dt_bias, a;
    /* Set 0's initial ring and canonical state, to restart it between the check's runs. */
    float *ring0, *canon0;
};

/* Regions are carved from one allocation per set, each 256-byte aligned. Carving with a NULL
 * base only counts. */
typedef struct carver {
    float *base;
    size_t used;
} carver;

static MemraSliceMutF32 take(carver *cv, size_t len)
{
    MemraSliceMutF32 s = {NULL, 0};
    if (len == 0)
        return s;
    if (cv->base != NULL)
        s.ptr = cv->base + cv->used;
    s.len = len;
    cv->used += (len + 63) / 64 * 64;
    return s;
}

static void carve_set(const bench_config *c, carver *cv, bench_set *s)
{
    const size_t B = c->b, T = c->t, rows = B * T;
    s->ring = take(cv, B * c->ring_words);
    s->canon = take(cv, B * c->state_words);
    s->alt = take(cv, B * c->state_words);
    s->qkv = take(cv, rows * c->conv_dim);
    s->beta_raw = take(cv, rows * c->num_v);
    s->alpha = take(cv, rows * c->num_v);
    s->conv_outs = take(cv, rows * c->conv_dim);
    s->q = take(cv, rows * c->value_dim);
    s->k = take(cv, rows * c->value_dim);
    s->v = take(cv, rows * c->value_dim);
    s->beta = take(cv, rows * c->num_v);
    s->g_log = take(cv, rows * c->num_v);
    s->o = take(cv, rows * c->value_dim);
    /* T == 1 has no snapshots: the slices stay {NULL, 0}, which the ABI reads as "none". */
    s->snap_conv = take(cv, B * (T - 1) * c->ring_words);
    s->snap_ssm = take(cv, B * (T - 1) * c->state_words);
    s->r_qkv = take(cv, rows * c->conv_dim);
    s->r_beta_raw = take(cv, rows * c->num_v);
    s->r_alpha = take(cv, rows * c->num_v);
    s->r_conv_out = take(cv, rows * c->conv_dim);
    s->r_o = take(cv, rows * c->value_dim);
    s->r_q = take(cv, B * c->value_dim);
    s->r_k = take(cv, B * c->value_dim);
    s->r_v = take(cv, B * c->value_dim);
    s->r_beta = take(cv, B * c->num_v);
    s->r_g_log = take(cv, B * c->num_v);
}

static size_t table_words(const bench_config *c)
{
    return c->b * MEMRA_TABLE_WIDTH + 4 * c->b;
}

uint64_t bench_set_bytes(const bench_config *c)
{
    carver cv = {NULL, 0};
    bench_set s;
    carve_set(c, &cv, &s);
    return (uint64_t)cv.used * sizeof(float) + table_words(c) * sizeof(uint64_t);
}

static MemraSliceF32 ro(MemraSliceMutF32 s)
{
    return (MemraSliceF32){s.ptr, s.len};
}

static MemraSliceF32 sub(MemraSliceMutF32 s, size_t start, size_t len)
{
    return (MemraSliceF32){s.ptr + start, len};
}

static MemraSliceMutF32 sub_mut(MemraSliceMutF32 s, size_t start, size_t len)
{
    return (MemraSliceMutF32){s.ptr + start, len};
}

static MemraSliceU64 sub_u64(MemraSliceMutU64 s, size_t start, size_t len)
{
    return (MemraSliceU64){s.ptr + start, len};
}

/* The seed's generator (gdn_packed_gpu.rs `varied`): xorshift64 mapped to [-spread, spread). */
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

/* [B, T, X] -> [T, B, X] */
static void to_row_major(float *dst, const float *src, size_t B, size_t T, size_t X)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            memcpy(dst + (t * B + b) * X, src + (b * T + t) * X, X * sizeof(float));
}

static int upload_into(MemraEngine *e, const float *host, MemraSliceMutF32 dst, const char *what)
{
    MemraStatus st;
    if (dst.len == 0)
        return 0;
    st = memra_htod_f32_into(e, (MemraSliceF32){host, dst.len}, dst);
    return st == MEMRA_STATUS_OK ? 0 : bench_fail_status(what, st);
}

/* Fills a buffer with a repeated host pattern of `chunk_len` words, chunk by chunk. */
static int fill(MemraEngine *e, MemraSliceMutF32 dst, const float *chunk, size_t chunk_len,
                const char *what)
{
    for (size_t at = 0; at < dst.len; at += chunk_len) {
        size_t n = dst.len - at < chunk_len ? dst.len - at : chunk_len;
        if (upload_into(e, chunk, sub_mut(dst, at, n), what) != 0)
            return -1;
    }
    return 0;
}

#define CHUNK_WORDS ((size_t)1 << 20)
static float poison_chunk[CHUNK_WORDS];
static float zero_chunk[CHUNK_WORDS];

/* A signalling-NaN bit pattern no kernel produces: an output element the operation failed to
 * write keeps it and cannot compare equal to the reference's finite value. */
static int poison(MemraEngine *e, MemraSliceMutF32 dst)
{
    if (poison_chunk[0] == 0.0f) {
        uint32_t bits = UINT32_C(0x7fa5a5a5);
        for (size_t i = 0; i < CHUNK_WORDS; i++)
            memcpy(&poison_chunk[i], &bits, sizeof bits);
    }
    return fill(e, dst, poison_chunk, CHUNK_WORDS, "poisoning an output");
}

static uint64_t set_seed(const bench_config *c, size_t set)
{
    return 1 + 1000003u * (uint64_t)(set + 1) + 7919u * c->t + 104729u * c->b +
           15485863u * c->num_v;
}

static int fill_set(bench_work *w, bench_set *s, size_t index, float *h_a, float *h_b)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    const size_t B = c->b, T = c->t, rows = B * T;
    const uint64_t seed = set_seed(c, index) * 16;
    uint64_t *tab = malloc(table_words(c) * sizeof *tab);
    int rc = -1;

    if (tab == NULL) {
        bench_fail("out of host memory for a pointer table");
        return -1;
    }
    /* The seed's spreads: ring 1.0, state 0.3, qkv 1.0, beta_raw and alpha 2.0. */
    varied(h_a, B * c->ring_words, seed + 0, 1.0f);
    if (index == 0)
        memcpy(w->ring0, h_a, B * c->ring_words * sizeof(float));
    if (upload_into(e, h_a, s->ring, "uploading a ring") != 0)
        goto out;
    varied(h_a, B * c->state_words, seed + 1, 0.3f);
    if (index == 0)
        memcpy(w->canon0, h_a, B * c->state_words * sizeof(float));
    if (upload_into(e, h_a, s->canon, "uploading a state") != 0)
        goto out;
    /* The alternate state is always written before it is read, by both programs. */
    struct {
        size_t x;
        float spread;
        MemraSliceMutF32 packed, per_row;
    } in[3] = {{c->conv_dim, 1.0f, s->qkv, s->r_qkv},
               {c->num_v, 2.0f, s->beta_raw, s->r_beta_raw},
               {c->num_v, 2.0f, s->alpha, s->r_alpha}};
    for (size_t i = 0; i < 3; i++) {
        varied(h_a, rows * in[i].x, seed + 2 + i, in[i].spread);
        to_row_major(h_b, h_a, B, T, in[i].x);
        if (upload_into(e, h_a, in[i].packed, "uploading an input") != 0 ||
            upload_into(e, h_b, in[i].per_row, "uploading an input") != 0)
            goto out;
    }
    for (size_t b = 0; b < B; b++) {
        uint64_t ring = (uint64_t)(uintptr_t)(s->ring.ptr + b * c->ring_words);
        uint64_t canon = (uint64_t)(uintptr_t)(s->canon.ptr + b * c->state_words);
        uint64_t alt = (uint64_t)(uintptr_t)(s->alt.ptr + b * c->state_words);
        uint64_t *packed = tab, *per_row = tab + B * MEMRA_TABLE_WIDTH;
        packed[b * MEMRA_TABLE_WIDTH + 0] = ring;
        packed[b * MEMRA_TABLE_WIDTH + 1] = canon;
        packed[b * MEMRA_TABLE_WIDTH + 2] = alt;
        per_row[b] = ring;
        per_row[B + b] = canon;
        per_row[2 * B + b] = alt;
        per_row[3 * B + b] = canon;
    }
    MemraStatus st = memra_htod_u64_into(e, (MemraSliceU64){tab, table_words(c)},
                                         (MemraSliceMutU64){s->table_arena, table_words(c)});
    if (st != MEMRA_STATUS_OK) {
        bench_fail_status("uploading the pointer tables", st);
        goto out;
    }
    s->table = (MemraSliceMutU64){s->table_arena, B * MEMRA_TABLE_WIDTH};
    s->r_table = (MemraSliceMutU64){s->table_arena + B * MEMRA_TABLE_WIDTH, 4 * B};
    rc = 0;
out:
    free(tab);
    return rc;
}

size_t bench_work_sets(const bench_work *w)
{
    return w->n_sets;
}

void bench_work_destroy(bench_work *w)
{
    MemraEngine *e;
    if (w == NULL)
        return;
    e = w->env->engine;
    for (size_t i = 0; i < w->n_sets; i++) {
        bench_set *s = &w->sets[i];
        (void)memra_graph_destroy(e, s->graph_rows);
        (void)memra_graph_destroy(e, s->graph_packed);
        (void)memra_free(e, s->arena);
        (void)memra_free(e, s->table_arena);
    }
    (void)memra_free(e, w->w.ptr);
    (void)memra_free(e, w->dt_bias.ptr);
    (void)memra_free(e, w->a.ptr);
    free(w->sets);
    free(w->ring0);
    free(w->canon0);
    free(w);
}

int bench_work_create(bench_env *env, const bench_config *c, size_t sets, bench_work **out)
{
    MemraEngine *e = env->engine;
    bench_work *w = calloc(1, sizeof *w);
    float *h_a = NULL, *h_b = NULL;
    size_t host_words;
    MemraStatus st;

    if (w == NULL) {
        bench_fail("out of host memory");
        return -1;
    }
    w->env = env;
    w->c = *c;
    w->sets = calloc(sets, sizeof *w->sets);
    w->ring0 = malloc(c->b * c->ring_words * sizeof(float));
    w->canon0 = malloc(c->b * c->state_words * sizeof(float));
    host_words = c->b * c->state_words;
    if (c->b * c->t * c->conv_dim > host_words)
        host_words = c->b * c->t * c->conv_dim;
    h_a = malloc(host_words * sizeof(float));
    h_b = malloc(host_words * sizeof(float));
    if (w->sets == NULL || w->ring0 == NULL || w->canon0 == NULL || h_a == NULL || h_b == NULL) {
        bench_fail("out of host memory for %zu sets", sets);
        goto fail;
    }

    /* Shared weights. `a` is the pre-negated decay (-exp(A_log), docs/layouts.md): negative, so
     * that thousands of back-to-back verifies running in place keep the state bounded instead
     * of growing it to infinity, which would time arithmetic on inf/NaN. */
    {
        const uint64_t seed = set_seed(c, 0) * 16 + 8;
        MemraSliceMutF32 *dst[3] = {&w->w, &w->dt_bias, &w->a};
        size_t len[3] = {c->conv_dim * c->d_conv, c->num_v, c->num_v};
        varied(h_a, len[0], seed, 0.5f);
        varied(h_a + len[0], len[1], seed + 1, 0.5f);
        varied(h_a + len[0] + len[1], len[2], seed + 2, 0.5f);
        for (size_t i = 0; i < len[2]; i++)
            h_a[len[0] + len[1] + i] = -expf(h_a[len[0] + len[1] + i]);
        for (size_t i = 0, at = 0; i < 3; at += len[i], i++) {
            st = memra_htod_f32(e, (MemraSliceF32){h_a + at, len[i]}, dst[i]);
            if (st != MEMRA_STATUS_OK) {
                bench_fail_status("uploading the weights", st);
                goto fail;
            }
        }
    }

    for (size_t i = 0; i < sets; i++) {
        bench_set *s = &w->sets[i];
        carver cv = {NULL, 0};
        MemraSliceMutF32 arena;
        MemraSliceMutU64 tables;
        carve_set(c, &cv, s);
        st = memra_alloc_f32(e, cv.used, MEMRA_ALLOC_INIT_UNINIT, &arena);
        if (st != MEMRA_STATUS_OK) {
            bench_fail_status("allocating a set", st);
            goto fail;
        }
        s->arena = arena.ptr;
        w->n_sets = i + 1;
        st = memra_alloc_u64(e, table_words(c), MEMRA_ALLOC_INIT_UNINIT, &tables);
        if (st != MEMRA_STATUS_OK) {
            bench_fail_status("allocating a set's tables", st);
            goto fail;
        }
        s->table_arena = tables.ptr;
        cv = (carver){arena.ptr, 0};
        carve_set(c, &cv, s);
        if (fill_set(w, s, i, h_a, h_b) != 0)
            goto fail;
    }
    free(h_a);
    free(h_b);
    *out = w;
    return 0;
fail:
    free(h_a);
    free(h_b);
    bench_work_destroy(w);
    return -1;
}

/* ---- the two programs ---- */

/* Records the failure of an operation for the report and hands its status on. */
static MemraStatus op_failed(const char *what, MemraStatus st)
{
    bench_fail_status(what, st);
    return st;
}

static MemraStatus enqueue_row(MemraEngine *e, const bench_work *w, const bench_set *s, size_t r)
{
    const bench_config *c = &w->c;
    const size_t B = c->b;
    const bool even = r % 2 == 0;
    MemraStatus st;

    st = memra_ssm_conv1d_fused_decode_b_view(
        e, sub(s->r_qkv, r * B * c->conv_dim, B * c->conv_dim), sub_u64(s->r_table, 0, B), ro(w->w),
        sub_mut(s->r_conv_out, r * B * c->conv_dim, B * c->conv_dim), c->conv_dim, c->d_conv, B);
    if (st != MEMRA_STATUS_OK)
        return op_failed("per-row conv", st);
    st = memra_gdn_prep_decode_b_view(e, sub(s->r_conv_out, r * B * c->conv_dim, B * c->conv_dim),
                                      sub(s->r_beta_raw, r * B * c->num_v, B * c->num_v),
                                      sub(s->r_alpha, r * B * c->num_v, B * c->num_v),
                                      ro(w->dt_bias), ro(w->a), s->r_q, s->r_k, s->r_v, s->r_beta,
                                      s->r_g_log, MEMRA_D_STATE, c->num_v, c->num_k, c->key_dim,
                                      c->eps, c->conv_dim, B);
    if (st != MEMRA_STATUS_OK)
        return op_failed("per-row prep", st);
    st = memra_gdn_scan_s128_batched_view(
        e, ro(s->r_q), ro(s->r_k), ro(s->r_v), ro(s->r_g_log), ro(s->r_beta),
        sub_u64(s->r_table, even ? B : 2 * B, B), sub_u64(s->r_table, even ? 2 * B : 3 * B, B),
        sub_mut(s->r_o, r * B * c->value_dim, B * c->value_dim), c->num_v, B, c->scale);
    if (st != MEMRA_STATUS_OK)
        return op_failed("per-row scan", st);
    return MEMRA_STATUS_OK;
}

static MemraStatus enqueue_rows(MemraEngine *e, const bench_work *w, const bench_set *s)
{
    for (size_t r = 0; r < w->c.t; r++) {
        MemraStatus st = enqueue_row(e, w, s, r);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    return MEMRA_STATUS_OK;
}

static MemraStatus enqueue_packed(MemraEngine *e, const bench_work *w, const bench_set *s)
{
    const bench_config *c = &w->c;
    const MemraSliceU64 table = {s->table.ptr, s->table.len};
    MemraStatus st;

    st = memra_ssm_conv1d_fused_decode_tloop(e, ro(s->qkv), table, ro(w->w), s->conv_outs,
                                             s->snap_conv, c->conv_dim, c->d_conv, c->t, c->b);
    if (st != MEMRA_STATUS_OK)
        return op_failed("packed conv tloop", st);
    st = memra_gdn_prep_decode_b(e, ro(s->conv_outs), ro(s->beta_raw), ro(s->alpha), ro(w->dt_bias),
                                 ro(w->a), s->q, s->k, s->v, s->beta, s->g_log, MEMRA_D_STATE,
                                 c->num_v, c->num_k, c->key_dim, c->eps, c->conv_dim, c->b * c->t);
    if (st != MEMRA_STATUS_OK)
        return op_failed("packed prep", st);
    st = memra_gdn_scan_s128_tsnap(e, ro(s->q), ro(s->k), ro(s->v), ro(s->g_log), ro(s->beta),
                                   table, s->o, c->num_v, c->t, c->b, c->scale, s->snap_ssm);
    if (st != MEMRA_STATUS_OK)
        return op_failed("packed scan tsnap", st);
    return MEMRA_STATUS_OK;
}

typedef struct step_ctx {
    const bench_work *w;
    const bench_set *s;
} step_ctx;

static MemraStatus step_rows(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_rows(e, x->w, x->s);
}

static MemraStatus step_packed(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_packed(e, x->w, x->s);
}

static int capture(bench_work *w, bench_set *s)
{
    MemraEngine *e = w->env->engine;
    step_ctx x = {w, s};
    MemraStatus st;
    if (s->graph_rows == NULL) {
        st = memra_graph_capture(e, step_rows, &x, &s->graph_rows);
        if (st != MEMRA_STATUS_OK)
            return bench_fail_status("capturing the per-row chain", st);
    }
    if (s->graph_packed == NULL) {
        st = memra_graph_capture(e, step_packed, &x, &s->graph_packed);
        if (st != MEMRA_STATUS_OK)
            return bench_fail_status("capturing the packed program", st);
    }
    return 0;
}

int bench_work_capture(bench_work *w)
{
    for (size_t i = 0; i < w->n_sets; i++)
        if (capture(w, &w->sets[i]) != 0)
            return -1;
    return 0;
}

int bench_work_rep(bench_work *w, int variant, size_t set)
{
    MemraEngine *e = w->env->engine;
    const bench_set *s = &w->sets[set];
    MemraStatus st;
    switch (variant) {
    case BV_ROW_EAGER:
        return enqueue_rows(e, w, s) == MEMRA_STATUS_OK ? 0 : -1;
    case BV_PACK_EAGER:
        return enqueue_packed(e, w, s) == MEMRA_STATUS_OK ? 0 : -1;
    case BV_ROW_GRAPH:
        st = memra_graph_launch(e, s->graph_rows);
        return st == MEMRA_STATUS_OK ? 0 : bench_fail_status("replaying the per-row chain", st);
    case BV_PACK_GRAPH:
        st = memra_graph_launch(e, s->graph_packed);
        return st == MEMRA_STATUS_OK ? 0 : bench_fail_status("replaying the packed program", st);
    default:
        bench_fail("unknown variant %d", variant);
        return -1;
    }
}

/* ---- the check ---- */

/* Host copies of one program's results, in the layout of the per-row chain ([rows][B][X]) or
 * of the packed program ([B][rows][X]); `snaps` entries are rows 0 .. T-2. */
typedef struct results {
    float *conv_out, *o, *ring, *state, *snap_conv, *snap_ssm;
} results;

static void results_free(results *r)
{
    free(r->conv_out);
    free(r->o);
    free(r->ring);
    free(r->state);
    free(r->snap_conv);
    free(r->snap_ssm);
}

static int results_alloc(results *r, const bench_config *c)
{
    const size_t B = c->b, T = c->t;
    memset(r, 0, sizeof *r);
    /* +1: malloc(0) may return NULL, which would read as a failure for T == 1. */
    r->conv_out = malloc((T * B * c->conv_dim + 1) * sizeof(float));
    r->o = malloc((T * B * c->value_dim + 1) * sizeof(float));
    r->ring = malloc((B * c->ring_words + 1) * sizeof(float));
    r->state = malloc((B * c->state_words + 1) * sizeof(float));
    r->snap_conv = malloc(((T - 1) * B * c->ring_words + 1) * sizeof(float));
    r->snap_ssm = malloc(((T - 1) * B * c->state_words + 1) * sizeof(float));
    if (!r->conv_out || !r->o || !r->ring || !r->state || !r->snap_conv || !r->snap_ssm) {
        results_free(r);
        bench_fail("out of host memory for the check");
        return -1;
    }
    return 0;
}

static int download(MemraEngine *e, MemraSliceF32 src, float *dst, const char *what)
{
    MemraStatus st;
    if (src.len == 0)
        return 0;
    st = memra_dtoh_f32(e, src, (MemraSliceMutF32){dst, src.len});
    return st == MEMRA_STATUS_OK ? 0 : bench_fail_status(what, st);
}

/* The final state is where the per-row ping-pong leaves it: alternate for odd T. */
static MemraSliceMutF32 final_state(const bench_config *c, const bench_set *s)
{
    return c->t % 2 == 1 ? s->alt : s->canon;
}

/* Puts set 0 back to its initial ring and state (alternate zeroed). */
static int restart(bench_work *w, bench_set *s)
{
    MemraEngine *e = w->env->engine;
    if (upload_into(e, w->ring0, s->ring, "restoring the ring") != 0 ||
        upload_into(e, w->canon0, s->canon, "restoring the state") != 0 ||
        fill(e, s->alt, zero_chunk, CHUNK_WORDS, "clearing the alternate state") != 0)
        return -1;
    return 0;
}

static int poison_packed(MemraEngine *e, const bench_set *s)
{
    if (poison(e, s->conv_outs) != 0 || poison(e, s->o) != 0 || poison(e, s->snap_conv) != 0 ||
        poison(e, s->snap_ssm) != 0)
        return -1;
    return 0;
}

static int read_packed(bench_work *w, const bench_set *s, results *got)
{
    MemraEngine *e = w->env->engine;
    if (download(e, ro(s->conv_outs), got->conv_out, "reading conv_outs") != 0 ||
        download(e, ro(s->o), got->o, "reading o") != 0 ||
        download(e, ro(s->ring), got->ring, "reading the ring") != 0 ||
        download(e, ro(final_state(&w->c, s)), got->state, "reading the final state") != 0 ||
        download(e, ro(s->snap_conv), got->snap_conv, "reading the conv snapshots") != 0 ||
        download(e, ro(s->snap_ssm), got->snap_ssm, "reading the state snapshots") != 0)
        return -1;
    return 0;
}

/* Compares `n_rows` x B blocks of X words: the reference is [rows][B][X]; `got` is [B][rows][X]
 * when `got_seq_major`, else laid out as the reference. Returns the number of differing words
 * and describes the first one. */
static size_t diff_blocks(const float *ref, const float *got, size_t n_rows, size_t B, size_t X,
                          bool got_seq_major, char *first, size_t first_len)
{
    size_t diffs = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t r = 0; r < n_rows; r++) {
            const float *pr = ref + (r * B + b) * X;
            const float *pg = got + (got_seq_major ? b * n_rows + r : r * B + b) * X;
            if (memcmp(pr, pg, X * sizeof(float)) == 0)
                continue;
            for (size_t i = 0; i < X; i++) {
                uint32_t vr, vg;
                memcpy(&vr, pr + i, sizeof vr);
                memcpy(&vg, pg + i, sizeof vg);
                if (vr == vg)
                    continue;
                if (diffs++ == 0)
                    snprintf(first, first_len,
                             "first at sequence %zu, row %zu, word %zu: per-row 0x%08x (%.9g), "
                             "got 0x%08x (%.9g)",
                             b, r, i, (unsigned)vr, (double)pr[i], (unsigned)vg, (double)pg[i]);
            }
        }
    return diffs;
}

static bool all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return false;
    return true;
}

/* Compares every result of `got` (from `who`) with the per-row reference. Snapshots are
 * compared only when `with_snaps` (the per-row graph replay produces none). */
static int compare(const bench_config *c, const char *who, const results *ref, const results *got,
                   bool got_seq_major, bool with_snaps, char *why, size_t why_len, size_t *compared)
{
    const size_t B = c->b, T = c->t;
    struct {
        const char *what;
        const float *r, *g;
        size_t rows, x;
        bool seq_major, snap;
    } items[] = {
        {"conv_out", ref->conv_out, got->conv_out, T, c->conv_dim, got_seq_major, false},
        {"scan o", ref->o, got->o, T, c->value_dim, got_seq_major, false},
        {"final ssm state", ref->state, got->state, 1, c->state_words, false, false},
        {"final conv ring", ref->ring, got->ring, 1, c->ring_words, false, false},
        {"conv snapshots", ref->snap_conv, got->snap_conv, T - 1, c->ring_words, got_seq_major,
         true},
        {"ssm snapshots", ref->snap_ssm, got->snap_ssm, T - 1, c->state_words, got_seq_major, true},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        char first[200] = "";
        size_t n = items[i].rows * B * items[i].x, d;
        if (items[i].snap && !with_snaps)
            continue;
        d = diff_blocks(items[i].r, items[i].g, items[i].rows, B, items[i].x, items[i].seq_major,
                        first, sizeof first);
        if (d != 0) {
            snprintf(why, why_len, "%s: %s differs from the per-row chain in %zu of %zu words (%s)",
                     who, items[i].what, d, n, first);
            return 1;
        }
        *compared += n;
    }
    return 0;
}

int bench_work_check(bench_work *w, char *why, size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    const size_t B = c->b, T = c->t;
    bench_set *s = &w->sets[0];
    results ref, got;
    int rc = -1;
    MemraStatus st;

    *compared = 0;
    if (results_alloc(&ref, c) != 0)
        return -1;
    if (results_alloc(&got, c) != 0) {
        results_free(&ref);
        return -1;
    }

    /* 1. The reference: the per-row chain, eager, reading the ring and the state after every
     * row but the last, as the seed does. */
    if (restart(w, s) != 0 || poison(e, s->r_conv_out) != 0 || poison(e, s->r_o) != 0)
        goto out;
    for (size_t r = 0; r < T; r++) {
        if (enqueue_row(e, w, s, r) != MEMRA_STATUS_OK)
            goto out;
        if (r + 1 < T && (download(e, ro(s->ring), ref.snap_conv + r * B * c->ring_words,
                                   "reading a ring") != 0 ||
                          download(e, ro(r % 2 == 0 ? s->alt : s->canon),
                                   ref.snap_ssm + r * B * c->state_words, "reading a state") != 0))
            goto out;
    }
    if (download(e, ro(s->r_conv_out), ref.conv_out, "reading conv_out") != 0 ||
        download(e, ro(s->r_o), ref.o, "reading o") != 0 ||
        download(e, ro(s->ring), ref.ring, "reading the ring") != 0 ||
        download(e, ro(final_state(c, s)), ref.state, "reading the final state") != 0)
        goto out;
    if (!all_finite(ref.conv_out, T * B * c->conv_dim) ||
        !all_finite(ref.o, T * B * c->value_dim) || !all_finite(ref.state, B * c->state_words) ||
        !all_finite(ref.ring, B * c->ring_words) ||
        !all_finite(ref.snap_ssm, (T - 1) * B * c->state_words)) {
        snprintf(why, why_len, "the per-row reference is not finite");
        rc = 1;
        goto out;
    }

    /* 2. Packed, eager. */
    if (restart(w, s) != 0 || poison_packed(e, s) != 0)
        goto out;
    if (enqueue_packed(e, w, s) != MEMRA_STATUS_OK || read_packed(w, s, &got) != 0)
        goto out;
    if ((rc = compare(c, "packed eager", &ref, &got, true, true, why, why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* 3. Packed, graph-replayed: capture (its warm-up calls run the program on the current
     * state), restart, replay once. */
    if (capture(w, s) != 0 || restart(w, s) != 0 || poison_packed(e, s) != 0)
        goto out;
    st = memra_graph_launch(e, s->graph_packed);
    if (st != MEMRA_STATUS_OK) {
        bench_fail_status("replaying the packed program", st);
        goto out;
    }
    if (read_packed(w, s, &got) != 0)
        goto out;
    if ((rc = compare(c, "packed graph", &ref, &got, true, true, why, why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* 4. The per-row chain, graph-replayed (its final results; it makes no snapshots). */
    if (restart(w, s) != 0 || poison(e, s->r_conv_out) != 0 || poison(e, s->r_o) != 0)
        goto out;
    st = memra_graph_launch(e, s->graph_rows);
    if (st != MEMRA_STATUS_OK) {
        bench_fail_status("replaying the per-row chain", st);
        goto out;
    }
    if (download(e, ro(s->r_conv_out), got.conv_out, "reading conv_out") != 0 ||
        download(e, ro(s->r_o), got.o, "reading o") != 0 ||
        download(e, ro(s->ring), got.ring, "reading the ring") != 0 ||
        download(e, ro(final_state(c, s)), got.state, "reading the final state") != 0)
        goto out;
    rc = compare(c, "per-row graph", &ref, &got, false, false, why, why_len, compared);
out:
    results_free(&ref);
    results_free(&got);
    return rc;
}
