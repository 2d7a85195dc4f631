/*
 * The benchmarked work: buffers for one configuration, the per-row chain and the packed
 * program (eager and as captured graphs), the 1.1 one-launch verify in its three modes, the
 * journal commit and the device-side rollback (as captured graphs), and the bit-identity checks
 * that must pass before any of them is timed.
 *
 * Each configuration owns several "sets": complete, independent verifies (rings, states,
 * journals, accepted counts, inputs, outputs, snapshots, pointer tables and one graph per
 * program). Timing rotates through the sets so that a set's memory has left the cache before it
 * is used again; every rep is a full, valid verify of its own set. The graphs read their set's
 * accepted counts from device memory; new counts are written into every set's buffer before
 * each sample, outside the timed region, so nothing is copied from the host between reps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support/support.h"

void bench_config_init(bench_config *c, const char *shape, size_t num_k, size_t num_v, size_t t,
                       size_t b)
{
    size_t jlen = 0;
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
    /* A library that cannot size a journal leaves the journal columns to fail with its
     * message (bench_work_create records it). */
    if (memra_gdn_journal_len(MEMRA_D_STATE, num_k, num_v, t, &jlen) == MEMRA_STATUS_OK)
        c->journal_words = jlen;
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

uint64_t bench_variant_bytes(const bench_config *c, int v)
{
    const uint64_t f = sizeof(float), B = c->b, T = c->t, rows = B * T;
    const uint64_t S = c->state_words * f, R = c->ring_words * f;
    const uint64_t weights = c->conv_dim * c->d_conv * f + 2 * c->num_v * f; /* w, dt_bias, a */
    /* The one-launch verify with `o` as its only output: qkv, beta_raw and alpha read, the
     * weights read, o written, the table read. */
    const uint64_t fused_act = rows * c->conv_dim * f + 2 * rows * c->num_v * f + weights +
                               rows * c->value_dim * f + B * MEMRA_TABLE_WIDTH * sizeof(uint64_t);
    const uint64_t counts = B * sizeof(uint32_t);
    switch (v) {
    case BV_ROW_EAGER:
    case BV_ROW_GRAPH: {
        /* Per row, for B sequences: conv reads the qkv row and the ring, writes the ring and
         * conv_out; prep reads conv_out, beta_raw, alpha and writes q, k, v, beta, g_log; scan
         * reads those five and the state, writes the state and o; every launch reads its
         * weights and its table entries (B for conv, 2B for scan). */
        const uint64_t per_row = B * (2 * R + 2 * S) + B * c->conv_dim * f * 3 + weights +
                                 2 * B * c->num_v * f + B * c->value_dim * f * 6 +
                                 B * c->num_v * f * 4 + B * c->value_dim * f + 3 * B * 8;
        return T * per_row;
    }
    case BV_PACK_EAGER:
    case BV_PACK_GRAPH:
        return bench_floor_bytes(c, NULL);
    case BV_FUSED:
        return (T + 1) * (S + R) * B + fused_act;
    case BV_FUSED_NOSNAP:
        /* The state and the ring read once and written once. */
        return 2 * (S + R) * B + fused_act;
    case BV_JOURNAL:
    case BV_JOURNAL_ALL:
        /* The state and the ring read and written once, the journal read and written once
         * (its whole memra_gdn_journal_len() length), the accepted counts read. */
        return 2 * (S + R) * B + 2 * c->journal_words * f * B + fused_act + counts;
    case BV_ROLLBACK:
        /* One state and one ring read (a snapshot, or the final ones) and written to the
         * canonical buffers per sequence, the table and the counts read. */
        return 2 * (S + R) * B + B * MEMRA_TABLE_WIDTH * sizeof(uint64_t) + counts;
    case BV_COMMIT:
        /* The state and the ring read and written once, the journal read once (its whole
         * length), the weights, the table and the counts read. */
        return 2 * (S + R) * B + c->journal_words * f * B + weights +
               B * MEMRA_TABLE_WIDTH * sizeof(uint64_t) + counts;
    default:
        return 0;
    }
}

/* ---- buffers ---- */

/* Graphs of the 1.1 variants, one per set (both journal variants replay the same graph with
 * different accepted counts; the commit's is a refill verify and the commit). */
enum { G_FUSED, G_NOSNAP, G_JOURNAL, G_ROLLBACK, G_COMMIT, G_COUNT, G_NONE = -1 };

/* Both from variants.def; the 1.0 variants have no 1.1 graph (G_NONE). */
static const int graph_of_variant[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) G_##graph,
#include "variants.def"
#undef X
};
static const bool journal_of_variant[BV_COUNT] = {
#define X(id, key, name, plot, in_table, width, graph, journal) journal,
#include "variants.def"
#undef X
};

static int graph_of(int v)
{
    return graph_of_variant[v];
}

/* The variants that run in JOURNAL mode on the journals. */
static bool uses_journal(int v)
{
    return journal_of_variant[v];
}

typedef struct bench_set {
    /* Shared by all programs: sequence b's ring, canonical and alternate state at b * words. */
    MemraSliceMutF32 ring, canon, alt;
    /* Packed program and 1.1 verify, sequence-major [B, T, ...]. */
    MemraSliceMutF32 qkv, beta_raw, alpha;
    MemraSliceMutF32 conv_outs, q, k, v, beta, g_log, o, snap_conv, snap_ssm;
    /* Sequence b's journal at b * journal_stride, zero-filled (empty) at creation. */
    MemraSliceMutF32 journal;
    /* The accepted counts this set's graphs read, [B] (a part of bench_work's `counts`). */
    MemraSliceMutU32 accepted;
    MemraSliceMutU64 table;   /* [B, 3]: ring, canonical, alternate */
    MemraSliceMutU64 table_j; /* [B, 3]: ring, canonical, journal (JOURNAL mode) */
    /* Per-row chain, row-major [T, B, ...], so that row r of all B sequences is contiguous as
     * the per-row operations take it. Prep outputs are scratch reused by every row, as in
     * memra-engine; conv outputs and scan outputs are kept for every row. */
    MemraSliceMutF32 r_qkv, r_beta_raw, r_alpha, r_conv_out, r_o;
    MemraSliceMutF32 r_q, r_k, r_v, r_beta, r_g_log;
    /* [rings | canonical | alternate | canonical], B entries each: even rows read entries
     * [B, 2B) and write [2B, 3B), odd rows read [2B, 3B) and write [3B, 4B). */
    MemraSliceMutU64 r_table;
    /* The 1.0 programs over these buffers: the per-row chain and the packed program (the
     * arguments of a SNAPSHOTS verify with every output, which the packed operations read). */
    tu_rows rows;
    MemraVerifyArgs packed;
    MemraGraph *graph_rows, *graph_packed;
    MemraGraph *graph11[G_COUNT];
    MemraGraph *graph_op[TU_OP_COUNT]; /* the per-op mode's, one operation each */
    MemraGraph *graph_x[BX_COUNT];     /* enum bench_extra */
    float *arena;
    uint64_t *table_arena;
} bench_set;

/* Host copies of one program's results, in the layout of the per-row chain ([rows][B][X]) or
 * of the packed program ([B][rows][X]); `snaps` entries are rows 0 .. T-2. The prep outputs
 * are kept only where the 1.1 checks need them (packed layout). */
typedef struct results {
    float *conv_out, *o, *ring, *state, *snap_conv, *snap_ssm;
    float *q, *k, *v, *beta, *g_log;
} results;

struct bench_work {
    bench_env *env;
    bench_config c;
    size_t n_sets;
    bench_set *sets;
    MemraSliceMutF32 w, dt_bias, a;
    /* Set 0's initial ring and canonical state, to restart it between the check's runs. */
    float *ring0, *canon0;
    size_t journal_stride; /* words between two sequences' journals, 0 without a journal */
    /* Every set's accepted counts in one device buffer, set i's at i * B, then B zeros (`zero`,
     * the refill verify's, never written); `h_counts` holds what the sets' parts hold. */
    MemraSliceMutU32 counts, zero;
    uint32_t *h_counts, *h_draw, *h_fixed;
    uint64_t seed, rng;
    double accepted_sum;
    uint64_t accepted_draws;
    /* Why the journals or the accepted-count buffer could not be made ("" when they were). */
    char journal_error[300], accepted_error[300];
    /* The packed program's eager results on set 0, kept by bench_work_check() for the 1.1
     * checks (bit-identical to the per-row chain's when that check passed). */
    results pk;
    bool have_pk;
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

static size_t journal_stride(const bench_config *c)
{
    return (c->journal_words + 63) / 64 * 64;
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
    s->journal = take(cv, B * journal_stride(c));
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

/* Packed table, journal table, per-row table. */
static size_t table_words(const bench_config *c)
{
    return 2 * c->b * MEMRA_TABLE_WIDTH + 4 * c->b;
}

uint64_t bench_set_bytes(const bench_config *c)
{
    carver cv = {NULL, 0};
    bench_set s;
    carve_set(c, &cv, &s);
    return (uint64_t)cv.used * sizeof(float) + table_words(c) * sizeof(uint64_t);
}

/* One accepted count, uniform in 1 .. t, from the xorshift64 stream `*x`. */
static uint32_t draw_count(uint64_t *x, size_t t)
{
    return (uint32_t)(1 + (tu_xorshift64(x) >> 11) % t);
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
        if (upload_into(e, chunk, tu_sub_mut(dst, at, n), what) != 0)
            return -1;
    }
    return 0;
}

#define CHUNK_WORDS ((size_t)1 << 20)
static float poison_chunk[CHUNK_WORDS];
static float zero_chunk[CHUNK_WORDS];

/* Fills an output with TU_POISON_BITS: an element the operation failed to write keeps it and
 * cannot compare equal to the reference's finite value. */
static int poison(MemraEngine *e, MemraSliceMutF32 dst)
{
    if (poison_chunk[0] == 0.0f)
        tu_poison_host(poison_chunk, CHUNK_WORDS);
    return fill(e, dst, poison_chunk, CHUNK_WORDS, "poisoning an output");
}

static uint64_t set_seed(const bench_config *c, size_t set)
{
    return 1 + 1000003u * (uint64_t)(set + 1) + 7919u * c->t + 104729u * c->b +
           15485863u * c->num_v;
}

static MemraStatus args_11(const bench_work *w, const bench_set *s, int v, bool every_output,
                           MemraVerifyArgs *va);

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
    tu_varied(h_a, B * c->ring_words, seed + 0, 1.0f);
    if (index == 0)
        memcpy(w->ring0, h_a, B * c->ring_words * sizeof(float));
    if (upload_into(e, h_a, s->ring, "uploading a ring") != 0)
        goto out;
    tu_varied(h_a, B * c->state_words, seed + 1, 0.3f);
    if (index == 0)
        memcpy(w->canon0, h_a, B * c->state_words * sizeof(float));
    if (upload_into(e, h_a, s->canon, "uploading a state") != 0)
        goto out;
    /* The alternate state is always written before it is read, by every program. An empty
     * journal is a zero-filled one. */
    if (fill(e, s->journal, zero_chunk, CHUNK_WORDS, "clearing a journal") != 0)
        goto out;
    struct {
        size_t x;
        float spread;
        MemraSliceMutF32 packed, per_row;
    } in[3] = {{c->conv_dim, 1.0f, s->qkv, s->r_qkv},
               {c->num_v, 2.0f, s->beta_raw, s->r_beta_raw},
               {c->num_v, 2.0f, s->alpha, s->r_alpha}};
    for (size_t i = 0; i < 3; i++) {
        tu_varied(h_a, rows * in[i].x, seed + 2 + i, in[i].spread);
        to_row_major(h_b, h_a, B, T, in[i].x);
        if (upload_into(e, h_a, in[i].packed, "uploading an input") != 0 ||
            upload_into(e, h_b, in[i].per_row, "uploading an input") != 0)
            goto out;
    }
    for (size_t b = 0; b < B; b++) {
        uint64_t ring = (uint64_t)(uintptr_t)(s->ring.ptr + b * c->ring_words);
        uint64_t canon = (uint64_t)(uintptr_t)(s->canon.ptr + b * c->state_words);
        uint64_t alt = (uint64_t)(uintptr_t)(s->alt.ptr + b * c->state_words);
        uint64_t journal = s->journal.ptr != NULL
                               ? (uint64_t)(uintptr_t)(s->journal.ptr + b * w->journal_stride)
                               : 0;
        uint64_t *packed = tab, *jour = tab + B * MEMRA_TABLE_WIDTH;
        uint64_t *per_row = tab + 2 * B * MEMRA_TABLE_WIDTH;
        packed[b * MEMRA_TABLE_WIDTH + 0] = ring;
        packed[b * MEMRA_TABLE_WIDTH + 1] = canon;
        packed[b * MEMRA_TABLE_WIDTH + 2] = alt;
        jour[b * MEMRA_TABLE_WIDTH + 0] = ring;
        jour[b * MEMRA_TABLE_WIDTH + 1] = canon;
        jour[b * MEMRA_TABLE_WIDTH + 2] = journal;
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
    s->table_j = (MemraSliceMutU64){s->table_arena + B * MEMRA_TABLE_WIDTH, B * MEMRA_TABLE_WIDTH};
    s->r_table = (MemraSliceMutU64){s->table_arena + 2 * B * MEMRA_TABLE_WIDTH, 4 * B};
    s->rows = (tu_rows){
        .num_k = c->num_k,
        .num_v = c->num_v,
        .d_conv = c->d_conv,
        .t = T,
        .b = B,
        .eps = c->eps,
        .scale = c->scale,
        .qkv = tu_view(s->r_qkv),
        .beta_raw = tu_view(s->r_beta_raw),
        .alpha = tu_view(s->r_alpha),
        .w = tu_view(w->w),
        .dt_bias = tu_view(w->dt_bias),
        .a = tu_view(w->a),
        .conv_outs = s->r_conv_out,
        .o = s->r_o,
        .q = s->r_q,
        .k = s->r_k,
        .v = s->r_v,
        .beta = s->r_beta,
        .g_log = s->r_g_log,
        .table = tu_view_u64(s->r_table),
    };
    if (args_11(w, s, BV_FUSED, true, &s->packed) != MEMRA_STATUS_OK)
        goto out;
    rc = 0;
out:
    free(tab);
    return rc;
}

size_t bench_work_sets(const bench_work *w)
{
    return w->n_sets;
}

uint64_t bench_work_accepted_seed(const bench_work *w)
{
    return w->seed;
}

double bench_work_journal_mean_accepted(const bench_work *w)
{
    return w->accepted_draws > 0 ? w->accepted_sum / (double)w->accepted_draws : 0.0;
}

static void results_free(results *r)
{
    TU_FREE_HOST(r->conv_out, r->o, r->ring, r->state, r->snap_conv, r->snap_ssm, r->q, r->k, r->v,
                 r->beta, r->g_log);
    memset(r, 0, sizeof *r);
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
        for (int g = 0; g < G_COUNT; g++)
            (void)memra_graph_destroy(e, s->graph11[g]);
        for (int op = 0; op < TU_OP_COUNT; op++)
            (void)memra_graph_destroy(e, s->graph_op[op]);
        for (int x = 0; x < BX_COUNT; x++)
            (void)memra_graph_destroy(e, s->graph_x[x]);
        (void)memra_free(e, s->arena);
        (void)memra_free(e, s->table_arena);
    }
    (void)memra_free(e, w->w.ptr);
    (void)memra_free(e, w->dt_bias.ptr);
    (void)memra_free(e, w->a.ptr);
    (void)memra_free(e, w->counts.ptr);
    if (w->have_pk)
        results_free(&w->pk);
    free(w->sets);
    free(w->ring0);
    free(w->canon0);
    free(w->h_counts);
    free(w->h_draw);
    free(w->h_fixed);
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
    w->journal_stride = journal_stride(c);
    w->seed = set_seed(c, 0) * 16 + 12;
    w->rng = w->seed | 1;
    w->sets = calloc(sets, sizeof *w->sets);
    w->ring0 = malloc(c->b * c->ring_words * sizeof(float));
    w->canon0 = malloc(c->b * c->state_words * sizeof(float));
    w->h_counts = calloc(sets * c->b, sizeof *w->h_counts);
    w->h_draw = calloc(c->b, sizeof *w->h_draw);
    w->h_fixed = calloc(c->b, sizeof *w->h_fixed);
    host_words = c->b * c->state_words;
    if (c->b * c->t * c->conv_dim > host_words)
        host_words = c->b * c->t * c->conv_dim;
    h_a = malloc(host_words * sizeof(float));
    h_b = malloc(host_words * sizeof(float));
    if (w->sets == NULL || w->ring0 == NULL || w->canon0 == NULL || w->h_draw == NULL ||
        w->h_fixed == NULL || w->h_counts == NULL || h_a == NULL || h_b == NULL) {
        bench_fail("out of host memory for %zu sets", sets);
        goto fail;
    }

    /* The 1.1 columns fail on their own when the library cannot size a journal or give an
     * accepted-count buffer; the 1.0 columns do not need either. */
    if (c->journal_words == 0) {
        size_t jlen = 0;
        st = memra_gdn_journal_len(MEMRA_D_STATE, c->num_k, c->num_v, c->t, &jlen);
        snprintf(w->journal_error, sizeof w->journal_error,
                 "memra_gdn_journal_len: %s: %s (no journal to run on)", memra_status_string(st),
                 st == MEMRA_STATUS_OK ? "returned a length of 0" : memra_last_error_message());
    }
    if (env->with_11) {
        st = memra_alloc_u32(e, (sets + 1) * c->b, MEMRA_ALLOC_INIT_ZEROED, &w->counts);
        if (st != MEMRA_STATUS_OK) {
            w->counts = (MemraSliceMutU32){NULL, 0};
            snprintf(w->accepted_error, sizeof w->accepted_error, "memra_alloc_u32: %s: %s",
                     memra_status_string(st), memra_last_error_message());
        } else {
            w->zero = (MemraSliceMutU32){w->counts.ptr + sets * c->b, c->b};
        }
    }

    /* Shared weights. `a` is the pre-negated decay (-exp(A_log), docs/layouts.md): negative, so
     * that thousands of back-to-back verifies running in place keep the state bounded instead
     * of growing it to infinity, which would time arithmetic on inf/NaN. */
    {
        const uint64_t seed = set_seed(c, 0) * 16 + 8;
        MemraSliceMutF32 *dst[3] = {&w->w, &w->dt_bias, &w->a};
        size_t len[3] = {c->conv_dim * c->d_conv, c->num_v, c->num_v};
        tu_varied(h_a, len[0], seed, 0.5f);
        tu_varied(h_a + len[0], len[1], seed + 1, 0.5f);
        tu_varied(h_a + len[0] + len[1], len[2], seed + 2, 0.5f);
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
        if (w->counts.ptr != NULL)
            s->accepted = (MemraSliceMutU32){w->counts.ptr + i * c->b, c->b};
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

/* ---- the programs ---- */

/* Records the failure of an operation for the report and hands its status on. */
static MemraStatus op_failed(const char *what, MemraStatus st)
{
    bench_fail_status(what, st);
    return st;
}

/* Rows first .. first + n - 1 of the per-row chain (b_n = B each): one row for the check, all
 * T for a timed verify. */
static MemraStatus enqueue_rows(MemraEngine *e, const bench_set *s, size_t first, size_t n)
{
    for (size_t r = first; r < first + n; r++) {
        const char *what = "per-row program";
        MemraStatus st = tu_rows_row(e, &s->rows, r, &what);
        if (st != MEMRA_STATUS_OK)
            return op_failed(what, st);
    }
    return MEMRA_STATUS_OK;
}

static MemraStatus enqueue_packed(MemraEngine *e, const bench_set *s)
{
    const char *what = "packed program";
    MemraStatus st = tu_packed_program(e, &s->packed, &what);
    return st == MEMRA_STATUS_OK ? st : op_failed(what, st);
}

/* One operation of the packed program alone (the per-op mode). */
static MemraStatus enqueue_op(MemraEngine *e, const bench_set *s, int op)
{
    MemraStatus st = tu_packed_op(e, &s->packed, op);
    return st == MEMRA_STATUS_OK ? st : op_failed(tu_op_name[op], st);
}

static const char *mode_name(MemraVerifyMode m)
{
    return m == MEMRA_VERIFY_MODE_SNAPSHOTS    ? "SNAPSHOTS"
           : m == MEMRA_VERIFY_MODE_FINAL_ONLY ? "FINAL_ONLY"
                                               : "JOURNAL";
}

/* The 1.1 arguments of variant `v` on set `s`: `o` is the only output unless `every_output`
 * (the checks ask for every intermediate once, to compare it with the packed program's). */
static MemraStatus args_11(const bench_work *w, const bench_set *s, int v, bool every_output,
                           MemraVerifyArgs *va)
{
    const bench_config *c = &w->c;
    const bool journal = uses_journal(v);
    const MemraVerifyMode mode = v == BV_FUSED_NOSNAP ? MEMRA_VERIFY_MODE_FINAL_ONLY
                                 : journal            ? MEMRA_VERIFY_MODE_JOURNAL
                                                      : MEMRA_VERIFY_MODE_SNAPSHOTS;
    const tu_gdn_shape sh = tu_gdn_shape_make(c->num_k, c->num_v, c->d_conv);
    MemraStatus st = tu_verify_args_sizes(va, &sh, c->t, c->b, mode, MEMRA_HEAD_ORDER_TILED);
    if (st != MEMRA_STATUS_OK)
        return op_failed("memra_verify_args_init", st);
    /* The configuration's own eps and scale, which a run may set. */
    va->eps = c->eps;
    va->scale = c->scale;
    va->qkv = tu_view(s->qkv);
    va->table = journal ? (MemraSliceU64){s->table_j.ptr, s->table_j.len}
                        : (MemraSliceU64){s->table.ptr, s->table.len};
    va->w = tu_view(w->w);
    va->beta_raw = tu_view(s->beta_raw);
    va->alpha = tu_view(s->alpha);
    va->dt_bias = tu_view(w->dt_bias);
    va->a = tu_view(w->a);
    va->o = s->o;
    if (every_output) {
        va->conv_outs = s->conv_outs;
        va->q_l2 = s->q;
        va->k_l2 = s->k;
        va->v_g = s->v;
        va->beta = s->beta;
        va->g_log = s->g_log;
    }
    if (va->mode == MEMRA_VERIFY_MODE_SNAPSHOTS) {
        va->snap_conv = s->snap_conv;
        va->snap_ssm = s->snap_ssm;
    }
    if (journal || v == BV_ROLLBACK)
        va->accepted = (MemraSliceU32){s->accepted.ptr, s->accepted.len};
    return MEMRA_STATUS_OK;
}

static MemraStatus enqueue_commit(MemraEngine *e, const bench_work *w, const bench_set *s)
{
    MemraVerifyArgs va;
    MemraStatus st = args_11(w, s, BV_COMMIT, false, &va);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_journal_commit(e, &va);
    return st == MEMRA_STATUS_OK ? st : op_failed("memra_gdn_journal_commit", st);
}

/* The refill verify: JOURNAL mode, `o` only, accepted counts 0 from the zero-filled buffer.
 * It folds nothing, leaves ring and state as they are and fills the journal with T rows. */
static MemraStatus enqueue_refill(MemraEngine *e, const bench_work *w, const bench_set *s)
{
    MemraVerifyArgs va;
    MemraStatus st = args_11(w, s, BV_JOURNAL, false, &va);
    if (st != MEMRA_STATUS_OK)
        return st;
    va.accepted = (MemraSliceU32){w->zero.ptr, w->zero.len};
    st = memra_gdn_verify(e, &va);
    return st == MEMRA_STATUS_OK ? st : op_failed("memra_gdn_verify (JOURNAL, refill)", st);
}

static MemraStatus enqueue_11(MemraEngine *e, const bench_work *w, const bench_set *s, int v,
                              bool every_output)
{
    MemraVerifyArgs va;
    char what[96];
    MemraStatus st = args_11(w, s, v, every_output, &va);
    if (st != MEMRA_STATUS_OK)
        return st;
    if (v == BV_ROLLBACK) {
        st = memra_gdn_rollback(e, &va);
        return st == MEMRA_STATUS_OK ? st : op_failed("memra_gdn_rollback", st);
    }
    if (v == BV_COMMIT) {
        st = enqueue_refill(e, w, s);
        return st == MEMRA_STATUS_OK ? enqueue_commit(e, w, s) : st;
    }
    st = memra_gdn_verify(e, &va);
    if (st == MEMRA_STATUS_OK)
        return st;
    snprintf(what, sizeof what, "memra_gdn_verify (%s%s)", mode_name(va.mode),
             every_output ? ", every output" : "");
    return op_failed(what, st);
}

/* Waits for the engine: errors the operations found in device data (an accepted count out of
 * range) and device faults surface here. */
static int sync_after(MemraEngine *e, const char *what)
{
    MemraStatus st = memra_engine_synchronize(e);
    return st == MEMRA_STATUS_OK ? 0 : bench_fail_status(what, st);
}

/* Writes `n` host counts into device counts `dst`. */
static int upload_counts(bench_work *w, const uint32_t *host, size_t n, MemraSliceMutU32 dst)
{
    MemraStatus st = memra_htod_u32_into(w->env->engine, (MemraSliceU32){host, n}, dst);
    return st == MEMRA_STATUS_OK ? 0 : bench_fail_status("memra_htod_u32_into (accepted)", st);
}

/* Writes B counts into set s's buffer (and its part of h_counts). */
static int write_counts(bench_work *w, const bench_set *s, const uint32_t *host)
{
    const size_t B = w->c.b;
    memcpy(w->h_counts + (size_t)(s - w->sets) * B, host, B * sizeof *host);
    return upload_counts(w, host, B, s->accepted);
}

static int write_fixed(bench_work *w, const bench_set *s, uint32_t n)
{
    for (size_t b = 0; b < w->c.b; b++)
        w->h_fixed[b] = n;
    return write_counts(w, s, w->h_fixed);
}

/* Writes h_counts into every set's buffer in one copy. */
static int write_all_counts(bench_work *w)
{
    const size_t n = w->n_sets * w->c.b;
    return upload_counts(w, w->h_counts, n, (MemraSliceMutU32){w->counts.ptr, n});
}

typedef struct step_ctx {
    const bench_work *w;
    const bench_set *s;
    int v;
} step_ctx;

static MemraStatus step_rows(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_rows(e, x->s, 0, x->w->c.t);
}

static MemraStatus step_packed(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_packed(e, x->s);
}

static MemraStatus step_11(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_11(e, x->w, x->s, x->v, false);
}

/* x->v is the operation (enum tu_op). */
static MemraStatus step_op(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    return enqueue_op(e, x->s, x->v);
}

/* x->v is the extra graph (enum bench_extra): the refill verify, or the FINAL_ONLY or JOURNAL
 * verify that MEMRA_VERIFY_STAGE cuts down to one stage. */
static MemraStatus step_extra(MemraEngine *e, void *user)
{
    const step_ctx *x = user;
    if (x->v == BX_REFILL)
        return enqueue_refill(e, x->w, x->s);
    return enqueue_11(e, x->w, x->s, bench_extra_variant(x->v), false);
}

static int capture(bench_work *w, bench_set *s)
{
    MemraEngine *e = w->env->engine;
    step_ctx x = {w, s, 0};
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

/* Replays graph g; a failure is reported as "replaying NAME". */
static int replay(MemraEngine *e, MemraGraph *g, const char *name)
{
    char what[96];
    MemraStatus st = memra_graph_launch(e, g);
    if (st == MEMRA_STATUS_OK)
        return 0;
    snprintf(what, sizeof what, "replaying %s", name);
    return bench_fail_status(what, st);
}

/* Captures `step` of `x` into *g (unless it is there already) and waits for its warm-ups. */
static int capture_graph(bench_work *w, MemraStatus (*step)(MemraEngine *, void *), step_ctx *x,
                         MemraGraph **g, const char *name)
{
    MemraEngine *e = w->env->engine;
    char what[96];
    MemraStatus st;
    if (*g != NULL)
        return 0;
    bench_error[0] = '\0';
    st = memra_graph_capture(e, step, x, g);
    if (st != MEMRA_STATUS_OK) {
        /* The step's own failure, when it had one, says more than CAPTURE_ERROR. */
        char step_error[sizeof bench_error];
        snprintf(step_error, sizeof step_error, "%s", bench_error);
        *g = NULL;
        snprintf(what, sizeof what, "capturing %s", name);
        bench_fail_status(what, st);
        if (st == MEMRA_STATUS_CAPTURE_ERROR && step_error[0] != '\0') {
            size_t used = strlen(bench_error);
            snprintf(bench_error + used, sizeof bench_error - used, " (the step: %.400s)",
                     step_error);
        }
        return -1;
    }
    snprintf(what, sizeof what, "after capturing %s", name);
    return sync_after(e, what);
}

/* Captures variant v's graph of set s. The capture runs the step twice eagerly first, so the
 * accepted counts must be valid for it: 1 for a rollback (the set holds a SNAPSHOTS verify's
 * results, the 1.0 graphs' warm-ups wrote them), 0 for a journal (empty or not, it holds at
 * least none), 1 for a commit (its refill verify leaves T rows in the journal first). */
static int capture_11(bench_work *w, bench_set *s, int v)
{
    const int g = graph_of(v);
    step_ctx x = {w, s, v};
    if (g == G_NONE) {
        bench_fail("%s has no 1.1 graph", bench_variant_name[v]);
        return -1;
    }
    if (s->graph11[g] != NULL)
        return 0;
    if ((g == G_JOURNAL || g == G_ROLLBACK || g == G_COMMIT) &&
        write_fixed(w, s, g == G_JOURNAL ? 0 : 1) != 0)
        return -1;
    return capture_graph(w, step_11, &x, &s->graph11[g], bench_variant_name[v]);
}

/* Captures extra graph `xg` of set s; a stage graph with MEMRA_VERIFY_STAGE set for the whole
 * capture (its eager warm-ups included) and unset again right after. */
static int capture_extra(bench_work *w, bench_set *s, int xg)
{
    static const char *const stage[BX_COUNT] = {NULL, "prologue", "scan", "prologue", "scan"};
    step_ctx x = {w, s, xg};
    int rc;
    if (stage[xg] != NULL && w->env->backend != MEMRA_BACKEND_CUDA) {
        bench_fail("%s: MEMRA_VERIFY_STAGE exists on the CUDA backend only", bench_extra_name[xg]);
        return -1;
    }
    if (stage[xg] != NULL && setenv("MEMRA_VERIFY_STAGE", stage[xg], 1) != 0) {
        bench_fail("setenv MEMRA_VERIFY_STAGE failed");
        return -1;
    }
    rc = capture_graph(w, step_extra, &x, &s->graph_x[xg], bench_extra_name[xg]);
    if (stage[xg] != NULL)
        (void)unsetenv("MEMRA_VERIFY_STAGE");
    return rc;
}

int bench_work_capture(bench_work *w)
{
    for (size_t i = 0; i < w->n_sets; i++)
        if (capture(w, &w->sets[i]) != 0)
            return -1;
    return 0;
}

/* 0 when variant v has the buffers it needs, else -1 with the reason in bench_error. */
static int setup_ok(const bench_work *w, int v)
{
    const bool journal = uses_journal(v);
    if (journal && w->journal_error[0] != '\0') {
        bench_fail("%s", w->journal_error);
        return -1;
    }
    if ((journal || v == BV_ROLLBACK) && w->accepted_error[0] != '\0') {
        bench_fail("%s", w->accepted_error);
        return -1;
    }
    return 0;
}

int bench_work_capture_11(bench_work *w, int v)
{
    if (setup_ok(w, v) != 0)
        return -1;
    for (size_t i = 0; i < w->n_sets; i++)
        if (capture_11(w, &w->sets[i], v) != 0)
            return -1;
    return 0;
}

int bench_work_capture_extra(bench_work *w, int x)
{
    if (x < 0 || x >= BX_COUNT) {
        bench_fail("unknown extra graph %d", x);
        return -1;
    }
    if (setup_ok(w, bench_extra_variant(x)) != 0)
        return -1;
    for (size_t i = 0; i < w->n_sets; i++)
        if (capture_extra(w, &w->sets[i], x) != 0)
            return -1;
    return 0;
}

int bench_work_rep_extra(bench_work *w, int x, size_t set)
{
    return replay(w->env->engine, w->sets[set].graph_x[x], bench_extra_name[x]);
}

int bench_work_capture_op(bench_work *w, int op)
{
    MemraEngine *e = w->env->engine;
    char what[96];
    if (op < 0 || op >= TU_OP_COUNT) {
        bench_fail("unknown operation %d", op);
        return -1;
    }
    snprintf(what, sizeof what, "capturing %s", tu_op_name[op]);
    for (size_t i = 0; i < w->n_sets; i++) {
        bench_set *s = &w->sets[i];
        step_ctx x = {w, s, op};
        MemraStatus st;
        if (s->graph_op[op] != NULL)
            continue;
        st = memra_graph_capture(e, step_op, &x, &s->graph_op[op]);
        if (st != MEMRA_STATUS_OK) {
            s->graph_op[op] = NULL;
            return bench_fail_status(what, st);
        }
    }
    return sync_after(e, what);
}

int bench_work_rep_op(bench_work *w, int op, size_t set)
{
    return replay(w->env->engine, w->sets[set].graph_op[op], tu_op_name[op]);
}

int bench_work_prepare(bench_work *w, int v)
{
    MemraEngine *e = w->env->engine;
    if (v != BV_JOURNAL && v != BV_JOURNAL_ALL)
        return 0;
    /* The refill verify accepts nothing, leaves ring and state as they are and fills the
     * journal with T rows, so that every replay may accept up to T. */
    for (size_t i = 0; i < w->n_sets; i++)
        if (enqueue_refill(e, w, &w->sets[i]) != MEMRA_STATUS_OK)
            return -1;
    return sync_after(e, "filling the journals");
}

int bench_work_before_sample(bench_work *w, int v)
{
    const size_t n = w->n_sets * w->c.b;
    if (v == BV_JOURNAL_ALL) {
        for (size_t i = 0; i < n; i++)
            w->h_counts[i] = (uint32_t)w->c.t;
    } else if (v == BV_JOURNAL || v == BV_ROLLBACK || v == BV_COMMIT) {
        for (size_t i = 0; i < n; i++)
            w->h_counts[i] = draw_count(&w->rng, w->c.t);
    } else {
        return 0;
    }
    return write_all_counts(w);
}

int bench_work_write_counts(bench_work *w)
{
    return upload_counts(w, w->h_counts, w->c.b, w->sets[0].accepted);
}

static int launch(MemraEngine *e, MemraGraph *g, int v)
{
    return replay(e, g, bench_variant_name[v]);
}

int bench_work_rep(bench_work *w, int variant, size_t set)
{
    MemraEngine *e = w->env->engine;
    const bench_set *s = &w->sets[set];
    switch (variant) {
    case BV_ROW_EAGER:
        return enqueue_rows(e, s, 0, w->c.t) == MEMRA_STATUS_OK ? 0 : -1;
    case BV_PACK_EAGER:
        return enqueue_packed(e, s) == MEMRA_STATUS_OK ? 0 : -1;
    case BV_ROW_GRAPH:
        return launch(e, s->graph_rows, variant);
    case BV_PACK_GRAPH:
        return launch(e, s->graph_packed, variant);
    case BV_JOURNAL:
        /* The mean accepted count is that of the counts this replay reads. */
        for (size_t b = 0; b < w->c.b; b++)
            w->accepted_sum += w->h_counts[set * w->c.b + b];
        w->accepted_draws += w->c.b;
        return launch(e, s->graph11[G_JOURNAL], variant);
    case BV_FUSED:
    case BV_FUSED_NOSNAP:
    case BV_JOURNAL_ALL:
    case BV_ROLLBACK:
    case BV_COMMIT:
        return launch(e, s->graph11[graph_of(variant)], variant);
    default:
        bench_fail("unknown variant %d", variant);
        return -1;
    }
}

/* ---- the checks ---- */

static int results_alloc(results *r, const bench_config *c, bool with_prep)
{
    const size_t B = c->b, T = c->t, rows = B * T;
    memset(r, 0, sizeof *r);
    /* +1: malloc(0) may return NULL, which would read as a failure for T == 1. */
    r->conv_out = malloc((rows * c->conv_dim + 1) * sizeof(float));
    r->o = malloc((rows * c->value_dim + 1) * sizeof(float));
    r->ring = malloc((B * c->ring_words + 1) * sizeof(float));
    r->state = malloc((B * c->state_words + 1) * sizeof(float));
    r->snap_conv = malloc(((T - 1) * B * c->ring_words + 1) * sizeof(float));
    r->snap_ssm = malloc(((T - 1) * B * c->state_words + 1) * sizeof(float));
    bool ok = r->conv_out && r->o && r->ring && r->state && r->snap_conv && r->snap_ssm;
    if (with_prep) {
        r->q = malloc(rows * c->value_dim * sizeof(float));
        r->k = malloc(rows * c->value_dim * sizeof(float));
        r->v = malloc(rows * c->value_dim * sizeof(float));
        r->beta = malloc(rows * c->num_v * sizeof(float));
        r->g_log = malloc(rows * c->num_v * sizeof(float));
        ok = ok && r->q && r->k && r->v && r->beta && r->g_log;
    }
    if (!ok) {
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

/* The state buffer that holds the state after `rows` rows of the per-row ping-pong (the final
 * state for T rows): tu_state_slot. */
static MemraSliceMutF32 state_buffer(const bench_set *s, size_t rows)
{
    return tu_state_slot(rows) == 2 ? s->alt : s->canon;
}

static MemraSliceMutF32 final_state(const bench_config *c, const bench_set *s)
{
    return state_buffer(s, c->t);
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

static int poison_prep(MemraEngine *e, const bench_set *s)
{
    if (poison(e, s->q) != 0 || poison(e, s->k) != 0 || poison(e, s->v) != 0 ||
        poison(e, s->beta) != 0 || poison(e, s->g_log) != 0)
        return -1;
    return 0;
}

static int read_prep(MemraEngine *e, const bench_set *s, results *got)
{
    if (download(e, tu_view(s->q), got->q, "reading q") != 0 ||
        download(e, tu_view(s->k), got->k, "reading k") != 0 ||
        download(e, tu_view(s->v), got->v, "reading v") != 0 ||
        download(e, tu_view(s->beta), got->beta, "reading beta") != 0 ||
        download(e, tu_view(s->g_log), got->g_log, "reading g_log") != 0)
        return -1;
    return 0;
}

static int read_packed(bench_work *w, const bench_set *s, results *got)
{
    MemraEngine *e = w->env->engine;
    if (download(e, tu_view(s->conv_outs), got->conv_out, "reading conv_outs") != 0 ||
        download(e, tu_view(s->o), got->o, "reading o") != 0 ||
        download(e, tu_view(s->ring), got->ring, "reading the ring") != 0 ||
        download(e, tu_view(final_state(&w->c, s)), got->state, "reading the final state") != 0 ||
        download(e, tu_view(s->snap_conv), got->snap_conv, "reading the conv snapshots") != 0 ||
        download(e, tu_view(s->snap_ssm), got->snap_ssm, "reading the state snapshots") != 0)
        return -1;
    return got->q != NULL ? read_prep(e, s, got) : 0;
}

/* Reads the per-row chain's conv outputs, scan outputs, final ring and final state. */
static int read_rows(bench_work *w, const bench_set *s, results *got)
{
    MemraEngine *e = w->env->engine;
    if (download(e, tu_view(s->r_conv_out), got->conv_out, "reading conv_out") != 0 ||
        download(e, tu_view(s->r_o), got->o, "reading o") != 0 ||
        download(e, tu_view(s->ring), got->ring, "reading the ring") != 0 ||
        download(e, tu_view(final_state(&w->c, s)), got->state, "reading the final state") != 0)
        return -1;
    return 0;
}

/* Replays graph `g` of set `s` once and reads its results with `read`. */
static int replay_read(bench_work *w, const bench_set *s, MemraGraph *g, const char *what,
                       int (*read)(bench_work *, const bench_set *, results *), results *got)
{
    MemraStatus st = memra_graph_launch(w->env->engine, g);
    if (st != MEMRA_STATUS_OK)
        return bench_fail_status(what, st);
    return read(w, s, got);
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
    results ref, got, pk;
    int rc = -1;

    *compared = 0;
    if (results_alloc(&ref, c, false) != 0)
        return -1;
    if (results_alloc(&got, c, false) != 0) {
        results_free(&ref);
        return -1;
    }
    if (results_alloc(&pk, c, true) != 0) {
        results_free(&ref);
        results_free(&got);
        return -1;
    }

    /* 1. The reference: the per-row chain, eager, reading the ring and the state after every
     * row but the last, as the seed does. */
    if (restart(w, s) != 0 || poison(e, s->r_conv_out) != 0 || poison(e, s->r_o) != 0)
        goto out;
    for (size_t r = 0; r < T; r++) {
        if (enqueue_rows(e, s, r, 1) != MEMRA_STATUS_OK)
            goto out;
        if (r + 1 < T && (download(e, tu_view(s->ring), ref.snap_conv + r * B * c->ring_words,
                                   "reading a ring") != 0 ||
                          download(e, tu_view(state_buffer(s, r + 1)),
                                   ref.snap_ssm + r * B * c->state_words, "reading a state") != 0))
            goto out;
    }
    if (read_rows(w, s, &ref) != 0)
        goto out;
    if (!tu_all_finite(ref.conv_out, T * B * c->conv_dim) ||
        !tu_all_finite(ref.o, T * B * c->value_dim) ||
        !tu_all_finite(ref.state, B * c->state_words) ||
        !tu_all_finite(ref.ring, B * c->ring_words) ||
        !tu_all_finite(ref.snap_ssm, (T - 1) * B * c->state_words)) {
        snprintf(why, why_len, "the per-row reference is not finite");
        rc = 1;
        goto out;
    }

    /* 2. Packed, eager; its results (prep outputs included) are what the 1.1 variants must
     * reproduce. */
    if (restart(w, s) != 0 || poison_packed(e, s) != 0 || poison_prep(e, s) != 0)
        goto out;
    if (enqueue_packed(e, s) != MEMRA_STATUS_OK || read_packed(w, s, &pk) != 0)
        goto out;
    if ((rc = compare(c, "packed eager", &ref, &pk, true, true, why, why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* 3. Packed, graph-replayed: capture (its warm-up calls run the program on the current
     * state), restart, replay once. */
    if (capture(w, s) != 0 || restart(w, s) != 0 || poison_packed(e, s) != 0)
        goto out;
    if (replay_read(w, s, s->graph_packed, "replaying the packed program", read_packed, &got) != 0)
        goto out;
    if ((rc = compare(c, "packed graph", &ref, &got, true, true, why, why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* 4. The per-row chain, graph-replayed (its final results; it makes no snapshots). */
    if (restart(w, s) != 0 || poison(e, s->r_conv_out) != 0 || poison(e, s->r_o) != 0)
        goto out;
    if (replay_read(w, s, s->graph_rows, "replaying the per-row chain", read_rows, &got) != 0)
        goto out;
    rc = compare(c, "per-row graph", &ref, &got, false, false, why, why_len, compared);
out:
    results_free(&ref);
    results_free(&got);
    if (rc == 0) {
        w->pk = pk;
        w->have_pk = true;
    } else {
        results_free(&pk);
    }
    return rc;
}

/* 0 when every item passes tu_check_items (the suites' check), else 1 with `why` set. */
static int check_items(const tu_check_item *items, size_t n, const char *who, const char *against,
                       char *why, size_t why_len, size_t *compared)
{
    return tu_check_items(items, n, who, against, why, why_len, compared) ? 0 : 1;
}

/* The ring and state after `n` of the T rows, from a packed program's results. */
static const float *ring_after(const bench_config *c, const results *r, size_t b, size_t n)
{
    return tu_state_after(r->ring, r->snap_conv, c->ring_words, b, c->t, n);
}

static const float *state_after(const bench_config *c, const results *r, size_t b, size_t n)
{
    return tu_state_after(r->state, r->snap_ssm, c->state_words, b, c->t, n);
}

/* Host ring and state arrays [B][X] after counts[b] rows of each sequence. */
static void gather_after(const bench_config *c, const results *r, const uint32_t *counts,
                         float *ring, float *state)
{
    for (size_t b = 0; b < c->b; b++) {
        memcpy(ring + b * c->ring_words, ring_after(c, r, b, counts[b]),
               c->ring_words * sizeof(float));
        memcpy(state + b * c->state_words, state_after(c, r, b, counts[b]),
               c->state_words * sizeof(float));
    }
}

/* Compares the canonical state and ring of set 0 with `ring` and `state`. */
static int check_in_place(bench_work *w, const bench_set *s, const float *ring, const float *state,
                          const char *who, const char *against, results *tmp, char *why,
                          size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    if (download(e, tu_view(s->ring), tmp->ring, "reading the ring") != 0 ||
        download(e, tu_view(s->canon), tmp->state, "reading the canonical state") != 0)
        return -1;
    const tu_check_item items[] = {
        {"the ring", ring, tmp->ring, c->b * c->ring_words, true},
        {"the canonical state", state, tmp->state, c->b * c->state_words, true},
    };
    return check_items(items, 2, who, against, why, why_len, compared);
}

/* Compares the results of a 1.1 call with the packed program's `want`: o always, the
 * intermediates when the call was given them (`every_output`), else they must still hold the
 * poison. With `finals` also the final state and ring where the parity rule puts them, and the
 * snapshots when the call made them (`snaps`), else their buffers must still hold the poison. */
static int check_outputs(bench_work *w, const bench_set *s, const results *want, bool every_output,
                         bool finals, bool snaps, const char *who, const char *against,
                         results *got, char *why, size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    const size_t BT = c->b * c->t, BS = c->b * (c->t - 1);
    /* The per-row outputs first, then the final state and ring and the snapshots (`finals`). */
    enum { PER_ROW_OUTPUTS = 7 };
    const tu_check_item items[] = {
        {"o", want->o, got->o, BT * c->value_dim, true},
        {"conv_outs", want->conv_out, got->conv_out, BT * c->conv_dim, every_output},
        {"q_l2", want->q, got->q, BT * c->value_dim, every_output},
        {"k_l2", want->k, got->k, BT * c->value_dim, every_output},
        {"v_g", want->v, got->v, BT * c->value_dim, every_output},
        {"beta", want->beta, got->beta, BT * c->num_v, every_output},
        {"g_log", want->g_log, got->g_log, BT * c->num_v, every_output},
        {"the final state", want->state, got->state, c->b * c->state_words, true},
        {"the final ring", want->ring, got->ring, c->b * c->ring_words, true},
        {"the conv snapshots", want->snap_conv, got->snap_conv, BS * c->ring_words, snaps},
        {"the state snapshots", want->snap_ssm, got->snap_ssm, BS * c->state_words, snaps},
    };
    const MemraSliceMutF32 dev[] = {s->o,    s->conv_outs, s->q,       s->k,
                                    s->v,    s->beta,      s->g_log,   final_state(c, s),
                                    s->ring, s->snap_conv, s->snap_ssm};
    _Static_assert(sizeof dev / sizeof dev[0] == sizeof items / sizeof items[0],
                   "one device buffer per checked item");
    const size_t n = finals ? sizeof items / sizeof items[0] : PER_ROW_OUTPUTS;
    for (size_t i = 0; i < n; i++)
        if (download(e, tu_view(dev[i]), (float *)items[i].got, "reading an output") != 0)
            return -1;
    return check_items(items, n, who, against, why, why_len, compared);
}

/* fused / fused-nosnap: once eagerly with every output, once as the timed graph (o only). */
static int check_fused(bench_work *w, int v, results *got, char *why, size_t why_len,
                       size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bool snaps = v == BV_FUSED;
    bench_set *s = &w->sets[0];
    for (int pass = 0; pass < 2; pass++) {
        const bool eager = pass == 0;
        const char *who = snaps
                              ? (eager ? "fused eager, every output" : "fused graph")
                              : (eager ? "fused-nosnap eager, every output" : "fused-nosnap graph");
        if (!eager && capture_11(w, s, v) != 0)
            return -1;
        if (restart(w, s) != 0 || poison_packed(e, s) != 0 || poison_prep(e, s) != 0)
            return -1;
        if (eager) {
            if (enqueue_11(e, w, s, v, true) != MEMRA_STATUS_OK)
                return -1;
        } else if (launch(e, s->graph11[graph_of(v)], v) != 0) {
            return -1;
        }
        if (sync_after(e, who) != 0)
            return -1;
        const int rc = check_outputs(w, s, &w->pk, eager, true, snaps, who,
                                     "the 1.0 packed program", got, why, why_len, compared);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Runs the packed program on set 0 from the given ring and state ([B][X] host arrays). */
static int packed_from(bench_work *w, const float *ring, const float *state, results *out)
{
    MemraEngine *e = w->env->engine;
    bench_set *s = &w->sets[0];
    if (upload_into(e, ring, s->ring, "uploading a ring") != 0 ||
        upload_into(e, state, s->canon, "uploading a state") != 0 ||
        fill(e, s->alt, zero_chunk, CHUNK_WORDS, "clearing the alternate state") != 0 ||
        poison_packed(e, s) != 0)
        return -1;
    if (enqueue_packed(e, s) != MEMRA_STATUS_OK)
        return -1;
    return read_packed(w, s, out);
}

/* Compares set 0's ring and canonical state with those of the packed program's results `ref`
 * after counts[b] rows of each sequence. */
static int check_after_rows(bench_work *w, const bench_set *s, const results *ref,
                            const uint32_t *counts, const char *who, results *got, char *why,
                            size_t why_len, size_t *compared)
{
    const bench_config *c = &w->c;
    float *ring = malloc(c->b * c->ring_words * sizeof(float) + 1);
    float *state = malloc(c->b * c->state_words * sizeof(float));
    int rc = -1;
    if (ring == NULL || state == NULL) {
        bench_fail("out of host memory for a check");
    } else {
        gather_after(c, ref, counts, ring, state);
        rc = check_in_place(w, s, ring, state, who,
                            "the 1.0 packed program's after the accepted rows", got, why, why_len,
                            compared);
    }
    free(ring);
    free(state);
    return rc;
}

/* One replay of set 0's journal graph as variant `v` (the accepted counts written before),
 * checked: the ring and the canonical state against `ring` and `state`, the outputs against
 * `want`. Returns 0, 1 on a difference (described in `why`), -1 on a failure. */
static int journal_replay(bench_work *w, const bench_set *s, int v, const char *who,
                          const float *ring, const float *state, const char *state_against,
                          const results *want, results *got, char *why, size_t why_len,
                          size_t *compared)
{
    MemraEngine *e = w->env->engine;
    int rc;
    if (poison_packed(e, s) != 0 || poison_prep(e, s) != 0 ||
        launch(e, s->graph11[G_JOURNAL], v) != 0 || sync_after(e, who) != 0)
        return -1;
    rc = check_in_place(w, s, ring, state, who, state_against, got, why, why_len, compared);
    if (rc != 0)
        return rc;
    return check_outputs(w, s, want, false, false, false, who,
                         "the 1.0 packed program from the folded state", got, why, why_len,
                         compared);
}

/* journal and journal-all. X are set 0's new rows, (R0, S0) its initial ring and state; every
 * journal verify here runs X again, so every expected result is a 1.0 packed program's:
 *   a. empty journal, nothing accepted (eager, every output): the packed outputs of X from
 *      (R0, S0); ring and state unchanged;
 *   b. n[b] accepted, uniform in 1..T (the timed graph): ring and state folded to P, the
 *      state after n[b] rows of X; outputs those of X from P (the packed program "ref2");
 *   c. every row accepted (the timed graph): folded to ref2's final state, outputs those of X
 *      from it ("ref3");
 *   d. a commit of m[b] rows, uniform in 1..T: ring and state those of ref3 after m[b] rows. */
static int check_journal(bench_work *w, results *got, char *why, size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    const size_t B = c->b, T = c->t;
    bench_set *s = &w->sets[0];
    uint64_t x = w->seed ^ UINT64_C(0x5bd1e9955bd1e995);
    uint32_t *n = malloc(B * sizeof *n), *m = malloc(B * sizeof *m);
    float *p_ring = malloc(B * c->ring_words * sizeof(float) + 1);
    float *p_state = malloc(B * c->state_words * sizeof(float));
    results ref2, ref3;
    int rc = -1, have2 = -1, have3 = -1;

    if (n == NULL || m == NULL || p_ring == NULL || p_state == NULL ||
        (have2 = results_alloc(&ref2, c, false)) != 0 ||
        (have3 = results_alloc(&ref3, c, false)) != 0) {
        bench_fail("out of host memory for the journal check");
        goto out;
    }
    for (size_t b = 0; b < B; b++) {
        n[b] = draw_count(&x, T);
        m[b] = draw_count(&x, T);
    }
    gather_after(c, &w->pk, n, p_ring, p_state);
    if (packed_from(w, p_ring, p_state, &ref2) != 0 ||
        packed_from(w, ref2.ring, ref2.state, &ref3) != 0)
        goto out;

    /* a. The capture's warm-ups accept nothing either: they fill the journal, which is then
     * emptied again. */
    if (restart(w, s) != 0 ||
        fill(e, s->journal, zero_chunk, CHUNK_WORDS, "clearing a journal") != 0 ||
        capture_11(w, s, BV_JOURNAL) != 0 ||
        fill(e, s->journal, zero_chunk, CHUNK_WORDS, "clearing a journal") != 0 ||
        write_fixed(w, s, 0) != 0 || poison_packed(e, s) != 0 || poison_prep(e, s) != 0)
        goto out;
    if (enqueue_11(e, w, s, BV_JOURNAL, true) != MEMRA_STATUS_OK ||
        sync_after(e, "journal eager, empty journal") != 0)
        goto out;
    if ((rc = check_outputs(w, s, &w->pk, true, false, false, "journal eager, empty journal",
                            "the 1.0 packed program", got, why, why_len, compared)) != 0 ||
        (rc = check_in_place(w, s, w->ring0, w->canon0, "journal eager, empty journal",
                             "the initial ones (nothing accepted)", got, why, why_len, compared)) !=
            0)
        goto out;
    rc = -1;

    /* b. */
    if (write_counts(w, s, n) != 0)
        goto out;
    if ((rc = journal_replay(w, s, BV_JOURNAL, "journal graph, accepted 1..T", p_ring, p_state,
                             "the 1.0 packed program's after the accepted rows", &ref2, got, why,
                             why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* c. */
    if (write_fixed(w, s, (uint32_t)T) != 0)
        goto out;
    if ((rc = journal_replay(w, s, BV_JOURNAL_ALL, "journal graph, every row accepted", ref2.ring,
                             ref2.state, "the 1.0 packed program's after all T rows", &ref3, got,
                             why, why_len, compared)) != 0)
        goto out;
    rc = -1;

    /* d. */
    if (write_counts(w, s, m) != 0 || enqueue_commit(e, w, s) != MEMRA_STATUS_OK ||
        sync_after(e, "memra_gdn_journal_commit") != 0)
        goto out;
    rc = check_after_rows(w, s, &ref3, m, "journal commit, accepted 1..T", got, why, why_len,
                          compared);
out:
    if (have2 == 0)
        results_free(&ref2);
    if (have3 == 0)
        results_free(&ref3);
    free(n);
    free(m);
    free(p_ring);
    free(p_state);
    return rc;
}

/* commit, on set 0 from its initial ring and state (R0, S0), with counts m[b] uniform in 1..T
 * drawn anew for each pass; the refill verify (nothing accepted) runs X from (R0, S0) and leaves
 * its T rows in the journal, so every expected result is the 1.0 packed program's from there:
 *   e. eagerly, the refill verify then memra_gdn_journal_commit: ring and state those of the
 *      packed program after m[b] rows (check d on a journal the refill filled); `o` the packed
 *      program's, the other outputs untouched;
 *   f. the timed graph (refill verify and commit): the same;
 *   g. the refill graph alone, which the commit column subtracts: ring and state unchanged,
 *      `o` the packed program's. */
static int check_commit(bench_work *w, results *got, char *why, size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    bench_set *s = &w->sets[0];
    const char *against = "the 1.0 packed program";
    uint64_t x = w->seed ^ UINT64_C(0x9e3779b97f4a7c15);
    int rc;
    for (int pass = 0; pass < 3; pass++) {
        const char *who = pass == 0   ? "commit eager (refill verify, commit)"
                          : pass == 1 ? "commit graph (refill verify, commit)"
                                      : "refill verify graph";
        for (size_t b = 0; b < c->b; b++)
            w->h_draw[b] = draw_count(&x, c->t);
        if ((pass == 1 && capture_11(w, s, BV_COMMIT) != 0) ||
            (pass == 2 && capture_extra(w, s, BX_REFILL) != 0))
            return -1;
        if (restart(w, s) != 0 || poison_packed(e, s) != 0 || poison_prep(e, s) != 0 ||
            write_counts(w, s, w->h_draw) != 0)
            return -1;
        if (pass == 0   ? enqueue_11(e, w, s, BV_COMMIT, false) != MEMRA_STATUS_OK
            : pass == 1 ? launch(e, s->graph11[G_COMMIT], BV_COMMIT) != 0
                        : bench_work_rep_extra(w, BX_REFILL, 0) != 0)
            return -1;
        if (sync_after(e, who) != 0)
            return -1;
        rc = pass < 2 ? check_after_rows(w, s, &w->pk, w->h_draw, who, got, why, why_len, compared)
                      : check_in_place(w, s, w->ring0, w->canon0, who,
                                       "the initial ones (nothing accepted)", got, why, why_len,
                                       compared);
        if (rc == 0)
            rc = check_outputs(w, s, &w->pk, false, false, false, who, against, got, why, why_len,
                               compared);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* rollback after the 1.0 packed program, eagerly and as the timed graph, each with counts
 * uniform in 1..T: the canonical state and the ring must be the packed program's after that
 * many rows. */
static int check_rollback(bench_work *w, results *got, char *why, size_t why_len, size_t *compared)
{
    MemraEngine *e = w->env->engine;
    const bench_config *c = &w->c;
    bench_set *s = &w->sets[0];
    uint64_t x = w->seed ^ UINT64_C(0x2545f4914f6cdd1d);
    float *want_ring = malloc(c->b * c->ring_words * sizeof(float) + 1);
    float *want_state = malloc(c->b * c->state_words * sizeof(float));
    int rc = -1;

    if (want_ring == NULL || want_state == NULL) {
        bench_fail("out of host memory for the rollback check");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        const char *who = pass == 0 ? "rollback eager" : "rollback graph";
        for (size_t b = 0; b < c->b; b++)
            w->h_draw[b] = draw_count(&x, c->t);
        if (pass == 1 && (write_counts(w, s, w->h_draw) != 0 || capture_11(w, s, BV_ROLLBACK) != 0))
            goto out;
        if (restart(w, s) != 0 || enqueue_packed(e, s) != MEMRA_STATUS_OK ||
            write_counts(w, s, w->h_draw) != 0)
            goto out;
        if (pass == 0 ? enqueue_11(e, w, s, BV_ROLLBACK, false) != MEMRA_STATUS_OK
                      : launch(e, s->graph11[G_ROLLBACK], BV_ROLLBACK) != 0)
            goto out;
        if (sync_after(e, who) != 0)
            goto out;
        gather_after(c, &w->pk, w->h_draw, want_ring, want_state);
        rc = check_in_place(w, s, want_ring, want_state, who,
                            "the 1.0 packed program's after the accepted rows", got, why, why_len,
                            compared);
        if (rc != 0)
            goto out;
    }
out:
    free(want_ring);
    free(want_state);
    return rc;
}

int bench_work_check_11(bench_work *w, int v, char *why, size_t why_len, size_t *compared)
{
    results got;
    int rc;
    if (!w->have_pk) {
        bench_fail("the 1.0 check did not pass");
        return -1;
    }
    if (setup_ok(w, v) != 0)
        return -1;
    if (results_alloc(&got, &w->c, true) != 0)
        return -1;
    bench_error[0] = '\0';
    switch (v) {
    case BV_FUSED:
    case BV_FUSED_NOSNAP:
        rc = check_fused(w, v, &got, why, why_len, compared);
        break;
    case BV_JOURNAL:
    case BV_JOURNAL_ALL:
        rc = check_journal(w, &got, why, why_len, compared);
        break;
    case BV_ROLLBACK:
        rc = check_rollback(w, &got, why, why_len, compared);
        break;
    case BV_COMMIT:
        rc = check_commit(w, &got, why, why_len, compared);
        break;
    default:
        bench_fail("variant %d has no 1.1 check", v);
        rc = -1;
    }
    results_free(&got);
    return rc;
}
