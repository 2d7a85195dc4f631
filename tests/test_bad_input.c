/*
 * Bad input (docs/bad-input.md): every exported entry point refuses every class of invalid
 * argument with the documented status, a message naming the function and the parameter, and
 * without writing a single byte of any output, ring, state or table.
 *
 * Every case works on one "world": a single arena buffer that holds every operand of every
 * operation (activations, weights, rings, states, snapshots and the pointer tables, whose
 * entries point back into the arena), filled with fresh random bits and framed by guard zones.
 * A case spoils one argument of a known-good call, makes the call, and compares full read-backs
 * of the arena taken before and after it, so a stray write anywhere, also through a table entry,
 * is seen. Then it makes the good call, which must succeed: that proves the case was refused for
 * the reason it was built for (and nothing else in the call was wrong), and that a refusal
 * leaves the engine usable.
 *
 * The cases are generated from a description of each operation's arguments (NULL, empty, short,
 * misaligned and wrapping views of every slot; every output against every other argument in
 * three overlap geometries; shape scalars that are zero, out of range, inconsistent, non-finite
 * or whose products overflow), plus a table of hand-written cases for the engine, memory, copy
 * and graph entry points. The CUDA variants run the same cases on a CUDA engine and skip where
 * no device is usable.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The overflow cases below build shape values such as 2^63 that only exist with a 64-bit
 * size_t. */
_Static_assert(SIZE_MAX == UINT64_MAX, "the overflow cases assume a 64-bit size_t");

/* ---- The world: the suite's small shape (docs/layouts.md: num_k 2, num_v 4), two sequences of two
 * rows each. ---- */

#define W_S ((size_t)MEMRA_D_STATE)
#define W_NK ((size_t)2)
#define W_NV ((size_t)4)
#define W_T ((size_t)2)
#define W_B ((size_t)2)
#define W_DCONV ((size_t)4)
#define W_KEY (W_S * W_NK)
#define W_VAL (W_S * W_NV)
#define W_CONV (2 * W_KEY + W_VAL)
#define W_PAD (W_DCONV - 1)
#define W_STATE (W_S * W_S * W_NV)
#define W_ROWS (W_B * W_T)
/* Rings are spaced for the widest conv, so that a wrongly accepted d_conv = 9 still rolls
 * memory inside the arena (where the comparison sees it) instead of crashing the test. */
#define W_RING_STRIDE (W_CONV * (MEMRA_D_CONV_MAX + 1))

/* Regions of the arena, in address order. Tables hold u64 entries and take two f32 words each.
 * The canonical states come first and the alternate states and rings last: being at least as
 * long as the longest output view, they are the guard zones that keep an output moved to overlap
 * a neighbour inside the arena (and inside the comparison). */
enum {
    R_STATE_CANON,
    R_QKV,
    R_W,
    R_CONV_OUT,
    R_SNAP_CONV,
    R_BETA_RAW,
    R_ALPHA,
    R_DT_BIAS,
    R_A,
    R_Q,
    R_K,
    R_VG,
    R_BETA,
    R_GLOG,
    R_O,
    R_SNAP_SSM,
    R_TAB_CONV,
    R_TAB_IN,
    R_TAB_OUT,
    R_TABLE,
    R_STATE_ALT,
    R_RING,
    R_COUNT
};

static const char *const region_name[R_COUNT] = {
    "canonical states",
    "qkv",
    "w",
    "conv_out",
    "snap_conv",
    "beta_raw",
    "alpha",
    "dt_bias",
    "a",
    "q_l2",
    "k_l2",
    "v_g",
    "beta",
    "g_log",
    "o",
    "snap_ssm",
    "conv_ptrs",
    "in_ptrs",
    "out_ptrs",
    "table",
    "alternate states",
    "rings",
};

static size_t region_words(int r)
{
    switch (r) {
    case R_QKV:
    case R_CONV_OUT:
        return W_ROWS * W_CONV;
    case R_W:
        /* Room for the d_conv = 9 case, whose w view must be long enough for nine taps. */
        return W_CONV * (MEMRA_D_CONV_MAX + 1);
    case R_SNAP_CONV:
        return W_B * (W_T - 1) * W_CONV * W_PAD;
    case R_RING:
        return W_B * W_RING_STRIDE;
    case R_BETA_RAW:
    case R_ALPHA:
    case R_BETA:
    case R_GLOG:
        return W_ROWS * W_NV;
    case R_DT_BIAS:
    case R_A:
        return W_NV;
    case R_Q:
    case R_K:
    case R_VG:
    case R_O:
        return W_ROWS * W_VAL;
    case R_STATE_CANON:
    case R_STATE_ALT:
        return W_B * W_STATE;
    case R_SNAP_SSM:
        return W_B * (W_T - 1) * W_STATE;
    case R_TAB_CONV:
    case R_TAB_IN:
    case R_TAB_OUT:
        return 2 * W_B;
    case R_TABLE:
        return 2 * MEMRA_TABLE_WIDTH * W_B;
    }
    return 0;
}

/* The longest output view, snap_ssm ([B, T-1] states), must fit in a guard zone of B states. */
_Static_assert(W_T - 1 <= 1, "the state regions are the guard zones");

/* Flags of a world. */
enum {
    /* Also capture a graph of the packed ops on the engine, and make a second engine with a
     * graph of its own (for the handle and cross-engine cases). */
    WF_GRAPH = 1,
};

typedef struct world {
    MemraBackend backend;
    MemraEngine *e;
    MemraSliceMutF32 arena;
    size_t off[R_COUNT];
    size_t words;
    float *before;
    float *after;
    uint64_t seed;
    MemraGraph *g;
    MemraEngine *e2;
    MemraGraph *g2;
    /* The message the call under test left (copied, because later calls may replace it). */
    char msg[1024];
} world;

static uintptr_t region_addr(const world *w, int r)
{
    return (uintptr_t)w->arena.ptr + w->off[r] * sizeof(float);
}

static uint64_t ring_addr(const world *w, size_t b)
{
    return (uint64_t)(region_addr(w, R_RING) + b * W_RING_STRIDE * sizeof(float));
}

static uint64_t state_addr(const world *w, size_t b, size_t which)
{
    return (uint64_t)(region_addr(w, which ? R_STATE_ALT : R_STATE_CANON) +
                      b * W_STATE * sizeof(float));
}

/* Fresh random floats in [-0.5, 0.5): xorshift64 bits put straight into the mantissa. Cheaper
 * per element than tu_varied, which matters when valgrind runs every case (the arena is large). */
static void fill_random(float *out, size_t len, uint64_t seed)
{
    uint64_t x = seed | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t bits = (uint32_t)(x >> 41) | UINT32_C(0x3f800000);
        float one_to_two;
        memcpy(&one_to_two, &bits, sizeof bits);
        out[i] = one_to_two - 1.5f;
    }
}

static void put_u64(float *image, size_t word, uint64_t value)
{
    memcpy(&image[word], &value, sizeof value);
}

static void snapshot(world *w, float *into)
{
    MemraSliceMutF32 dst = {into, w->words};
    TU_OK(memra_dtoh_f32(w->e, tu_view(w->arena), dst));
}

/* ---- The operations, described slot by slot ---- */

/* Entry points. The six operations come first: their cases are generated from OPS below. */
enum {
    E_CONV_B,
    E_CONV_T,
    E_PREP_B,
    E_PREP_V,
    E_SCAN_B,
    E_SCAN_T,
    E_OPTIONS_INIT,
    E_ENGINE_CREATE,
    E_ENGINE_DESTROY,
    E_ENGINE_BACKEND,
    E_ENGINE_STREAM,
    E_ENGINE_SYNC,
    E_ALLOC_F32,
    E_ALLOC_U64,
    E_FREE,
    E_HTOD_F32,
    E_HTOD_U64,
    E_HTOD_F32_INTO,
    E_HTOD_U64_INTO,
    E_DTOH_F32,
    E_DTOH_U64,
    E_GRAPH_CAPTURE,
    E_GRAPH_LAUNCH,
    E_GRAPH_DESTROY,
    E_COUNT
};
#define N_OPS 6

static const char *const entry_name[E_COUNT] = {
    "memra_ssm_conv1d_fused_decode_b_view",
    "memra_ssm_conv1d_fused_decode_tloop",
    "memra_gdn_prep_decode_b",
    "memra_gdn_prep_decode_b_view",
    "memra_gdn_scan_s128_batched_view",
    "memra_gdn_scan_s128_tsnap",
    "memra_engine_options_init",
    "memra_engine_create",
    "memra_engine_destroy",
    "memra_engine_backend",
    "memra_engine_stream",
    "memra_engine_synchronize",
    "memra_alloc_f32",
    "memra_alloc_u64",
    "memra_free",
    "memra_htod_f32",
    "memra_htod_u64",
    "memra_htod_f32_into",
    "memra_htod_u64_into",
    "memra_dtoh_f32",
    "memra_dtoh_u64",
    "memra_graph_capture",
    "memra_graph_launch",
    "memra_graph_destroy",
};

typedef enum {
    SK_IN,   /* f32 input */
    SK_TAB,  /* u64 pointer table (an input) */
    SK_OUT,  /* f32 output */
    SK_SNAP, /* optional f32 output; {NULL, 0} means "not wanted" */
} slot_kind;

typedef struct slot_spec {
    const char *name;
    slot_kind kind;
    int region;
    size_t len;
} slot_spec;

#define MAX_SLOTS 10

typedef struct op_spec {
    int n;
    slot_spec s[MAX_SLOTS];
} op_spec;

static const op_spec OPS[N_OPS] = {
    [E_CONV_B] = {4,
                  {{"qkv", SK_IN, R_QKV, W_B *W_CONV},
                   {"conv_ptrs", SK_TAB, R_TAB_CONV, W_B},
                   {"w", SK_IN, R_W, W_CONV *W_DCONV},
                   {"conv_out", SK_OUT, R_CONV_OUT, W_B *W_CONV}}},
    [E_CONV_T] = {5,
                  {{"qkv", SK_IN, R_QKV, W_ROWS *W_CONV},
                   {"table", SK_TAB, R_TABLE, MEMRA_TABLE_WIDTH *W_B},
                   {"w", SK_IN, R_W, W_CONV *W_DCONV},
                   {"conv_outs", SK_OUT, R_CONV_OUT, W_ROWS *W_CONV},
                   {"snap_conv", SK_SNAP, R_SNAP_CONV, W_B *(W_T - 1) * W_CONV *W_PAD}}},
    [E_PREP_B] = {10,
                  {{"conv_out", SK_IN, R_CONV_OUT, W_ROWS *W_CONV},
                   {"beta_raw", SK_IN, R_BETA_RAW, W_ROWS *W_NV},
                   {"alpha", SK_IN, R_ALPHA, W_ROWS *W_NV},
                   {"dt_bias", SK_IN, R_DT_BIAS, W_NV},
                   {"a", SK_IN, R_A, W_NV},
                   {"q_l2", SK_OUT, R_Q, W_ROWS *W_VAL},
                   {"k_l2", SK_OUT, R_K, W_ROWS *W_VAL},
                   {"v_g", SK_OUT, R_VG, W_ROWS *W_VAL},
                   {"beta", SK_OUT, R_BETA, W_ROWS *W_NV},
                   {"g_log", SK_OUT, R_GLOG, W_ROWS *W_NV}}},
    /* The per-row name is called the way the seed calls it: one row of each of b_n = B
     * sequences. */
    [E_PREP_V] = {10,
                  {{"conv_out", SK_IN, R_CONV_OUT, W_B *W_CONV},
                   {"beta_raw", SK_IN, R_BETA_RAW, W_B *W_NV},
                   {"alpha", SK_IN, R_ALPHA, W_B *W_NV},
                   {"dt_bias", SK_IN, R_DT_BIAS, W_NV},
                   {"a", SK_IN, R_A, W_NV},
                   {"q_l2", SK_OUT, R_Q, W_B *W_VAL},
                   {"k_l2", SK_OUT, R_K, W_B *W_VAL},
                   {"v_g", SK_OUT, R_VG, W_B *W_VAL},
                   {"beta", SK_OUT, R_BETA, W_B *W_NV},
                   {"g_log", SK_OUT, R_GLOG, W_B *W_NV}}},
    [E_SCAN_B] = {8,
                  {{"q", SK_IN, R_Q, W_B *W_VAL},
                   {"k", SK_IN, R_K, W_B *W_VAL},
                   {"v", SK_IN, R_VG, W_B *W_VAL},
                   {"g_log", SK_IN, R_GLOG, W_B *W_NV},
                   {"beta", SK_IN, R_BETA, W_B *W_NV},
                   {"in_ptrs", SK_TAB, R_TAB_IN, W_B},
                   {"out_ptrs", SK_TAB, R_TAB_OUT, W_B},
                   {"o", SK_OUT, R_O, W_B *W_VAL}}},
    [E_SCAN_T] = {8,
                  {{"q", SK_IN, R_Q, W_ROWS *W_VAL},
                   {"k", SK_IN, R_K, W_ROWS *W_VAL},
                   {"v", SK_IN, R_VG, W_ROWS *W_VAL},
                   {"g_log", SK_IN, R_GLOG, W_ROWS *W_NV},
                   {"beta", SK_IN, R_BETA, W_ROWS *W_NV},
                   {"table", SK_TAB, R_TABLE, MEMRA_TABLE_WIDTH *W_B},
                   {"o_all", SK_OUT, R_O, W_ROWS *W_VAL},
                   {"snap_ssm", SK_SNAP, R_SNAP_SSM, W_B *(W_T - 1) * W_STATE}}},
};

static size_t slot_elem(int op, int s)
{
    return OPS[op].s[s].kind == SK_TAB ? sizeof(uint64_t) : sizeof(float);
}

static bool slot_is_output(int op, int s)
{
    return OPS[op].s[s].kind == SK_OUT || OPS[op].s[s].kind == SK_SNAP;
}

static int slot_named(int op, const char *name)
{
    for (int s = 0; s < OPS[op].n; s++)
        if (strcmp(OPS[op].s[s].name, name) == 0)
            return s;
    return -1;
}

/* One call of an operation: addresses as integers, so that the cases can point anywhere
 * (NULL, misaligned, the top of the address space) without pointer arithmetic outside an
 * object. */
typedef struct opcall {
    int op;
    MemraEngine *e;
    uintptr_t p[MAX_SLOTS];
    size_t len[MAX_SLOTS];
    size_t d_state, num_v, num_k, key_dim, conv_dim, d_conv, t, b_n;
    float eps, scale;
} opcall;

/* The known-good call of `op` on the world. */
static void base_call(const world *w, MemraEngine *e, int op, opcall *c)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->e = e;
    for (int s = 0; s < OPS[op].n; s++) {
        c->p[s] = region_addr(w, OPS[op].s[s].region);
        c->len[s] = OPS[op].s[s].len;
    }
    c->d_state = W_S;
    c->num_v = W_NV;
    c->num_k = W_NK;
    c->key_dim = W_KEY;
    c->conv_dim = W_CONV;
    c->d_conv = W_DCONV;
    c->t = (op == E_CONV_T || op == E_SCAN_T) ? W_T : 1;
    c->b_n = op == E_PREP_B ? W_ROWS : W_B;
    c->eps = 1e-6f;
    c->scale = 1.0f / sqrtf((float)W_S);
}

#define FIN(i) ((MemraSliceF32){(const float *)c->p[i], c->len[i]})
#define FOUT(i) ((MemraSliceMutF32){(float *)c->p[i], c->len[i]})
#define UIN(i) ((MemraSliceU64){(const uint64_t *)c->p[i], c->len[i]})

static MemraStatus invoke(const opcall *c)
{
    switch (c->op) {
    case E_CONV_B:
        return memra_ssm_conv1d_fused_decode_b_view(c->e, FIN(0), UIN(1), FIN(2), FOUT(3),
                                                    c->conv_dim, c->d_conv, c->b_n);
    case E_CONV_T:
        return memra_ssm_conv1d_fused_decode_tloop(c->e, FIN(0), UIN(1), FIN(2), FOUT(3), FOUT(4),
                                                   c->conv_dim, c->d_conv, c->t, c->b_n);
    case E_PREP_B:
        return memra_gdn_prep_decode_b(c->e, FIN(0), FIN(1), FIN(2), FIN(3), FIN(4), FOUT(5),
                                       FOUT(6), FOUT(7), FOUT(8), FOUT(9), c->d_state, c->num_v,
                                       c->num_k, c->key_dim, c->eps, c->conv_dim, c->b_n);
    case E_PREP_V:
        return memra_gdn_prep_decode_b_view(
            c->e, FIN(0), FIN(1), FIN(2), FIN(3), FIN(4), FOUT(5), FOUT(6), FOUT(7), FOUT(8),
            FOUT(9), c->d_state, c->num_v, c->num_k, c->key_dim, c->eps, c->conv_dim, c->b_n);
    case E_SCAN_B:
        return memra_gdn_scan_s128_batched_view(c->e, FIN(0), FIN(1), FIN(2), FIN(3), FIN(4),
                                                UIN(5), UIN(6), FOUT(7), c->num_v, c->b_n,
                                                c->scale);
    case E_SCAN_T:
        return memra_gdn_scan_s128_tsnap(c->e, FIN(0), FIN(1), FIN(2), FIN(3), FIN(4), UIN(5),
                                         FOUT(6), c->num_v, c->t, c->b_n, c->scale, FOUT(7));
    }
    cr_assert_fail("invoke: unknown operation %d", c->op);
    return MEMRA_STATUS_INTERNAL;
}

/* The world graph's step: the packed verify chain, every operand in the arena. */
static MemraStatus world_step(MemraEngine *e, void *user)
{
    static const int chain[] = {E_CONV_T, E_PREP_B, E_SCAN_T};
    const world *w = user;
    for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++) {
        opcall c;
        base_call(w, e, chain[i], &c);
        MemraStatus st = invoke(&c);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    return MEMRA_STATUS_OK;
}

static MemraStatus empty_step(MemraEngine *e, void *user)
{
    return MEMRA_STATUS_OK;
}

static void world_init(world *w, MemraBackend backend, unsigned flags)
{
    memset(w, 0, sizeof *w);
    w->backend = backend;
    w->e = tu_engine(backend);
    size_t at = 0;
    for (int r = 0; r < R_COUNT; r++) {
        w->off[r] = at;
        /* 64 words = 256 bytes: every region starts as aligned as a fresh allocation. */
        at += (region_words(r) + 63) / 64 * 64;
    }
    w->words = at;
    TU_OK(memra_alloc_f32(w->e, w->words, MEMRA_ALLOC_INIT_UNINIT, &w->arena));

    w->before = malloc(w->words * sizeof(float));
    w->after = malloc(w->words * sizeof(float));
    cr_assert(w->before && w->after);
    w->seed = tu_fresh_seed();
    fill_random(w->before, w->words, w->seed);
    for (size_t b = 0; b < W_B; b++) {
        put_u64(w->before, w->off[R_TAB_CONV] + 2 * b, ring_addr(w, b));
        put_u64(w->before, w->off[R_TAB_IN] + 2 * b, state_addr(w, b, 0));
        put_u64(w->before, w->off[R_TAB_OUT] + 2 * b, state_addr(w, b, 1));
        put_u64(w->before, w->off[R_TABLE] + 2 * (3 * b + 0), ring_addr(w, b));
        put_u64(w->before, w->off[R_TABLE] + 2 * (3 * b + 1), state_addr(w, b, 0));
        put_u64(w->before, w->off[R_TABLE] + 2 * (3 * b + 2), state_addr(w, b, 1));
    }
    MemraSliceF32 image = {w->before, w->words};
    TU_OK(memra_htod_f32_into(w->e, image, w->arena));

    if (flags & WF_GRAPH) {
        TU_OK(memra_graph_capture(w->e, world_step, w, &w->g));
        w->e2 = tu_engine(backend);
        TU_OK(memra_graph_capture(w->e2, empty_step, NULL, &w->g2));
    }
}

static void world_fini(world *w)
{
    if (w->g2)
        TU_OK(memra_graph_destroy(w->e2, w->g2));
    if (w->e2)
        TU_OK(memra_engine_destroy(w->e2));
    if (w->g)
        TU_OK(memra_graph_destroy(w->e, w->g));
    TU_OK(memra_engine_destroy(w->e));
    free(w->before);
    free(w->after);
}

/* ---- Checks ---- */

static bool ident_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* Whether `msg` contains `word` and not merely as part of a longer identifier (so that
 * "memra_gdn_prep_decode_b" is not found inside "memra_gdn_prep_decode_b_view"). */
static bool has_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    if (n == 0)
        return false;
    for (const char *p = strstr(msg, word); p != NULL; p = strstr(p + 1, word)) {
        bool left = p == msg || !ident_char(p[-1]) || !ident_char(word[0]);
        bool right = !ident_char(p[n]) || !ident_char(word[n - 1]);
        if (left && right)
            return true;
    }
    return false;
}

/* Whether `msg` names one of the '|'-separated alternatives in `alts`. */
static bool names_any(const char *msg, const char *alts)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", alts);
    for (char *save = NULL, *alt = strtok_r(buf, "|", &save); alt != NULL;
         alt = strtok_r(NULL, "|", &save))
        if (has_word(msg, alt))
            return true;
    return false;
}

/* Leaves a failure of another function as the thread's last message, so that a refusal that
 * forgets to record its own message cannot pass on a stale one. */
static void prime_message(const char *fn)
{
    if (strcmp(fn, "memra_engine_options_init") != 0)
        cr_assert_eq(memra_engine_options_init(NULL), MEMRA_STATUS_INVALID_ARGUMENT);
    else
        cr_assert_eq(memra_engine_stream(NULL, NULL), MEMRA_STATUS_INVALID_ARGUMENT);
}

static MemraStatus took(world *w, MemraStatus st)
{
    snprintf(w->msg, sizeof w->msg, "%s", memra_last_error_message());
    return st;
}

static void check_refusal(const world *w, const char *what, MemraStatus st, MemraStatus expect,
                          const char *fn, const char *params)
{
    cr_assert_eq(st, expect, "%s: returned %s, expected %s (message: \"%s\") " TU_SEED_FMT, what,
                 memra_status_string(st), memra_status_string(expect), w->msg, w->seed);
    cr_assert(has_word(w->msg, fn), "%s: the message \"%s\" does not name %s", what, w->msg, fn);
    if (params != NULL)
        cr_assert(names_any(w->msg, params), "%s: the message \"%s\" names none of %s", what,
                  w->msg, params);
}

static const char *region_of(const world *w, size_t word)
{
    for (int r = 0; r < R_COUNT; r++)
        if (word >= w->off[r] && word < w->off[r] + region_words(r))
            return region_name[r];
    return "the padding between regions";
}

static void check_untouched(world *w, const char *what)
{
    snapshot(w, w->after);
    size_t changed = tu_bit_diffs(w->before, w->after, w->words);
    if (changed == 0)
        return;
    size_t first = 0;
    while (memcmp(&w->before[first], &w->after[first], sizeof(float)) == 0)
        first++;
    cr_assert_fail("%s: a refused call changed %zu words of the arena, the first in %s (word "
                   "%zu) " TU_SEED_FMT,
                   what, changed, region_of(w, first), first, w->seed);
}

/* ---- Handles that are not what they claim to be ---- */

/* Memory that holds no handle: a library that checks its handles reads a word that is not its
 * magic value and refuses. Word-aligned and larger than any handle. */
static uint64_t garbage_words[64];

static void *garbage(void)
{
    memset(garbage_words, 0xa5, sizeof garbage_words);
    return garbage_words;
}

enum {
    H_NULL,
    H_GARBAGE,
    /* A handle of the other type: a graph passed as an engine, an engine as a graph. */
    H_OTHER_TYPE,
    /* Graphs only: a live graph of the second engine passed with the first engine. */
    H_FOREIGN,
    /* Graphs only: the first engine's graph passed with the second engine. */
    H_OTHER_ENGINE,
};

static const char *const handle_name[] = {"NULL", "garbage", "a handle of the other type",
                                          "a graph of another engine", "used with another engine"};

static MemraEngine *engine_handle(world *w, int h)
{
    switch (h) {
    case H_NULL:
        return NULL;
    case H_GARBAGE:
        return garbage();
    case H_OTHER_TYPE:
        return (MemraEngine *)(void *)w->g;
    }
    return w->e;
}

/* ---- Generated cases for the operations ---- */

enum {
    K_ENGINE,     /* arg: H_* */
    K_NULL,       /* {NULL, len} with len > 0 */
    K_NULL_EMPTY, /* {NULL, 0} for a required view */
    K_EMPTY,      /* {ptr, 0} */
    K_SHORT,      /* one element short */
    K_MISALIGN,   /* arg: bytes added to the address */
    K_WRAP,       /* the view runs past the end of the address space */
    K_OVERLAP,    /* slot overlaps `other` in geometry `arg` */
    K_FIXUP,      /* arg: index into FIXUPS */
    K_CUSTOM,     /* arg: index into CUSTOM */
};

enum {
    G_SAME,         /* both start at the same address */
    G_HEAD_ON_TAIL, /* the output's first element is the other's last */
    G_TAIL_ON_HEAD, /* the output's last element is the other's first */
    G_COUNT
};

static const char *const geom_name[G_COUNT] = {
    "at the same address", "starting on its last element", "ending on its first element"};

typedef struct bi_case {
    int entry;
    int kind;
    int slot;
    int other;
    int arg;
} bi_case;

/* Scalar shape arguments made invalid, each keeping everything else consistent where it can
 * so that exactly one rule is broken. */
typedef struct fixup {
    const char *what;
    unsigned ops;
    MemraStatus expect;
    const char *params;
    void (*apply)(opcall *c);
} fixup;

#define OP_BIT(op) (1u << (op))
#define OPS_CONV (OP_BIT(E_CONV_B) | OP_BIT(E_CONV_T))
#define OPS_PREP (OP_BIT(E_PREP_B) | OP_BIT(E_PREP_V))
#define OPS_SCAN (OP_BIT(E_SCAN_B) | OP_BIT(E_SCAN_T))
#define OPS_PACKED (OP_BIT(E_CONV_T) | OP_BIT(E_SCAN_T))
#define OPS_ALL (OPS_CONV | OPS_PREP | OPS_SCAN)
#define P2(k) ((size_t)1 << (k))

static void drop_snapshots(opcall *c)
{
    int s = slot_named(c->op, c->op == E_CONV_T ? "snap_conv" : "snap_ssm");
    if (s >= 0) {
        c->p[s] = 0;
        c->len[s] = 0;
    }
}

/* A prep call whose heads are (d_state, num_k, num_v) with key_dim and conv_dim derived from
 * them, so that only the rule under test is broken. */
static void prep_heads(opcall *c, size_t d_state, size_t num_k, size_t num_v)
{
    c->d_state = d_state;
    c->num_k = num_k;
    c->num_v = num_v;
    c->key_dim = d_state * num_k;
    c->conv_dim = 2 * c->key_dim + d_state * num_v;
}

static void fx_b_n_zero(opcall *c)
{
    c->b_n = 0;
}
static void fx_t_zero(opcall *c)
{
    c->t = 0;
}
static void fx_conv_dim_zero(opcall *c)
{
    c->conv_dim = 0;
}
static void fx_d_conv_zero(opcall *c)
{
    c->d_conv = 0;
    drop_snapshots(c);
}
static void fx_d_conv_nine(opcall *c)
{
    c->d_conv = MEMRA_D_CONV_MAX + 1;
    c->len[slot_named(c->op, "w")] = W_CONV * (MEMRA_D_CONV_MAX + 1);
    drop_snapshots(c);
}
static void fx_d_conv_huge(opcall *c)
{
    c->d_conv = SIZE_MAX;
    drop_snapshots(c);
}
/* b_n * t * conv_dim and conv_dim * d_conv are 0 modulo 2^64: a library that multiplies
 * without checking sees zero-length requirements and accepts the three-element views. */
static void fx_conv_wrap_rows(opcall *c)
{
    c->conv_dim = P2(63);
    c->d_conv = 2;
}
static void fx_conv_wrap_w(opcall *c)
{
    c->conv_dim = P2(62);
}
static void fx_conv_wrap_t(opcall *c)
{
    c->t = P2(63);
    drop_snapshots(c);
}
static void fx_conv_wrap_b_n(opcall *c)
{
    c->b_n = P2(63);
}
/* Only the snapshot product b_n * (t-1) * conv_dim * (d_conv-1) overflows. */
static void fx_conv_wrap_snap(opcall *c)
{
    c->conv_dim = P2(60);
    c->d_conv = MEMRA_D_CONV_MAX;
}
static void fx_d_state_zero(opcall *c)
{
    c->d_state = 0;
}
static void fx_d_state_64(opcall *c)
{
    prep_heads(c, 64, W_NK, W_NV);
}
static void fx_d_state_127(opcall *c)
{
    prep_heads(c, 127, W_NK, W_NV);
}
static void fx_d_state_1(opcall *c)
{
    prep_heads(c, 1, W_NK, W_NV);
}
static void fx_num_k_zero_alone(opcall *c)
{
    prep_heads(c, W_S, 0, W_NV);
}
static void fx_num_k_zero(opcall *c)
{
    c->num_k = 0;
}
static void fx_num_v_zero_alone(opcall *c)
{
    prep_heads(c, W_S, W_NK, 0);
}
static void fx_num_v_zero(opcall *c)
{
    c->num_v = 0;
}
static void fx_num_k_3(opcall *c)
{
    prep_heads(c, W_S, 3, W_NV);
}
static void fx_num_v_3(opcall *c)
{
    prep_heads(c, W_S, W_NK, 3);
}
static void fx_key_dim_128(opcall *c)
{
    c->key_dim = 128;
    c->conv_dim = 2 * 128 + W_VAL;
}
static void fx_key_dim_255(opcall *c)
{
    c->key_dim = 255;
    c->conv_dim = 2 * 255 + W_VAL;
}
static void fx_key_dim_257(opcall *c)
{
    c->key_dim = 257;
}
static void fx_conv_dim_less(opcall *c)
{
    c->conv_dim = W_CONV - 1;
}
static void fx_conv_dim_more(opcall *c)
{
    c->conv_dim = W_CONV + 1;
}
static void fx_conv_dim_no_k(opcall *c)
{
    c->conv_dim = W_KEY + W_VAL;
}
static void fx_eps_nan(opcall *c)
{
    c->eps = NAN;
}
static void fx_eps_inf(opcall *c)
{
    c->eps = INFINITY;
}
static void fx_eps_ninf(opcall *c)
{
    c->eps = -INFINITY;
}
static void fx_scale_nan(opcall *c)
{
    c->scale = NAN;
}
static void fx_scale_inf(opcall *c)
{
    c->scale = INFINITY;
}
static void fx_scale_ninf(opcall *c)
{
    c->scale = -INFINITY;
}
/* b_n * conv_dim, b_n * num_v and b_n * num_v * d_state are all 0 modulo 2^64. */
static void fx_prep_wrap_b_n(opcall *c)
{
    c->b_n = P2(62);
}
/* d_state * num_v is 512 modulo 2^64, so a wrapping library would find conv_dim "consistent". */
static void fx_prep_wrap_num_v(opcall *c)
{
    c->num_v = P2(57) + W_NV;
}
/* d_state * num_k is 0 modulo 2^64, matching key_dim = 0. */
static void fx_prep_wrap_num_k(opcall *c)
{
    c->num_k = P2(62);
    c->num_v = P2(62);
    c->key_dim = 0;
    c->conv_dim = 0;
}
/* b_n * num_v * 128 is 0 modulo 2^64. */
static void fx_scan_wrap_num_v(opcall *c)
{
    c->num_v = P2(57);
}
static void fx_scan_wrap_t(opcall *c)
{
    c->t = P2(62);
    drop_snapshots(c);
}
static void fx_scan_wrap_b_n(opcall *c)
{
    c->b_n = P2(62);
}
/* Only the snapshot product b_n * (t-1) * num_v * 128 * 128 overflows. */
static void fx_scan_wrap_snap(opcall *c)
{
    c->num_v = P2(50);
}

#define INV MEMRA_STATUS_INVALID_ARGUMENT
#define UNS MEMRA_STATUS_UNSUPPORTED

static const fixup FIXUPS[] = {
    {"b_n = 0", OPS_ALL, INV, "b_n", fx_b_n_zero},
    {"t = 0", OPS_PACKED, INV, "'t'", fx_t_zero},
    {"conv_dim = 0", OPS_CONV | OPS_PREP, INV, "conv_dim", fx_conv_dim_zero},
    {"d_conv = 0", OPS_CONV, INV, "d_conv", fx_d_conv_zero},
    {"d_conv = 9 with a w view long enough for it", OPS_CONV, INV, "d_conv", fx_d_conv_nine},
    {"d_conv = SIZE_MAX", OPS_CONV, INV, "d_conv", fx_d_conv_huge},
    {"conv_dim = 2^63, d_conv = 2 (rows and w wrap to 0)", OPS_CONV, INV, "conv_dim",
     fx_conv_wrap_rows},
    {"conv_dim = 2^62 (conv_dim * d_conv wraps to 0)", OPS_CONV, INV, "conv_dim", fx_conv_wrap_w},
    {"t = 2^63 (b_n * t wraps to 0)", OP_BIT(E_CONV_T), INV, "'t'|b_n, t", fx_conv_wrap_t},
    {"b_n = 2^63", OPS_CONV, INV, "b_n", fx_conv_wrap_b_n},
    {"conv_dim = 2^60, d_conv = 8 (only the snapshot size overflows)", OP_BIT(E_CONV_T), INV,
     "snap_conv|conv_dim|d_conv", fx_conv_wrap_snap},
    {"d_state = 0", OPS_PREP, INV, "d_state", fx_d_state_zero},
    {"d_state = 64 with consistent key_dim and conv_dim", OPS_PREP, UNS, "d_state", fx_d_state_64},
    {"d_state = 127 with consistent key_dim and conv_dim", OPS_PREP, UNS, "d_state",
     fx_d_state_127},
    {"d_state = 1 with consistent key_dim and conv_dim", OPS_PREP, UNS, "d_state", fx_d_state_1},
    {"num_k = 0 with key_dim = 0", OPS_PREP, INV, "num_k", fx_num_k_zero_alone},
    {"num_k = 0", OPS_PREP, INV, "num_k|key_dim", fx_num_k_zero},
    {"num_v = 0 with conv_dim = 2 * key_dim", OPS_PREP, INV, "num_v", fx_num_v_zero_alone},
    {"num_v = 0", OPS_SCAN, INV, "num_v", fx_num_v_zero},
    {"num_v = 4 not a multiple of num_k = 3", OPS_PREP, INV, "num_v|num_k", fx_num_k_3},
    {"num_v = 3 not a multiple of num_k = 2", OPS_PREP, INV, "num_v|num_k", fx_num_v_3},
    {"key_dim = 128 for num_k = 2", OPS_PREP, INV, "key_dim", fx_key_dim_128},
    {"key_dim = 255 for num_k = 2", OPS_PREP, INV, "key_dim", fx_key_dim_255},
    {"key_dim = 257 for num_k = 2", OPS_PREP, INV, "key_dim|conv_dim", fx_key_dim_257},
    {"conv_dim one less than 2 * key_dim + value_dim", OPS_PREP, INV, "conv_dim", fx_conv_dim_less},
    {"conv_dim one more than 2 * key_dim + value_dim", OPS_PREP, INV, "conv_dim|conv_out",
     fx_conv_dim_more},
    {"conv_dim = key_dim + value_dim", OPS_PREP, INV, "conv_dim", fx_conv_dim_no_k},
    {"eps = NaN", OPS_PREP, INV, "eps", fx_eps_nan},
    {"eps = +inf", OPS_PREP, INV, "eps", fx_eps_inf},
    {"eps = -inf", OPS_PREP, INV, "eps", fx_eps_ninf},
    {"scale = NaN", OPS_SCAN, INV, "scale", fx_scale_nan},
    {"scale = +inf", OPS_SCAN, INV, "scale", fx_scale_inf},
    {"scale = -inf", OPS_SCAN, INV, "scale", fx_scale_ninf},
    {"b_n = 2^62 (every row product wraps to 0)", OPS_PREP, INV, "b_n", fx_prep_wrap_b_n},
    {"num_v = 2^57 + 4 (d_state * num_v wraps to a consistent value)", OPS_PREP, INV, "num_v",
     fx_prep_wrap_num_v},
    {"num_k = num_v = 2^62, key_dim = conv_dim = 0 (d_state * num_k wraps to 0)", OPS_PREP, INV,
     "num_k|key_dim", fx_prep_wrap_num_k},
    {"num_v = 2^57 (b_n * num_v * 128 wraps to 0)", OPS_SCAN, INV, "num_v", fx_scan_wrap_num_v},
    {"t = 2^62 (b_n * t * num_v wraps to 0)", OP_BIT(E_SCAN_T), INV, "'t'|b_n, t", fx_scan_wrap_t},
    {"b_n = 2^62", OPS_SCAN, INV, "b_n", fx_scan_wrap_b_n},
    {"num_v = 2^50 (only the snapshot size overflows)", OP_BIT(E_SCAN_T), INV, "snap_ssm|num_v",
     fx_scan_wrap_snap},
};
#define N_FIXUPS (sizeof FIXUPS / sizeof FIXUPS[0])

/* Single-letter parameter names (q, k, v, a, o) are matched with the quotes the messages put
 * around names; a bare letter would match any word. */
static void param_alt(char *buf, size_t size, const char *name)
{
    if (strlen(name) == 1)
        snprintf(buf, size, "'%s'", name);
    else
        snprintf(buf, size, "%s", name);
}

static void apply_op_case(const bi_case *bc, world *w, opcall *c, MemraStatus *expect, char *what,
                          size_t what_size, char *params, size_t params_size)
{
    const op_spec *spec = &OPS[bc->entry];
    const char *fn = entry_name[bc->entry];
    const char *sname = bc->kind != K_ENGINE && bc->kind != K_FIXUP ? spec->s[bc->slot].name : "";
    *expect = MEMRA_STATUS_INVALID_ARGUMENT;
    param_alt(params, params_size, sname);

    switch (bc->kind) {
    case K_ENGINE:
        c->e = engine_handle(w, bc->arg);
        snprintf(params, params_size, "engine");
        snprintf(what, what_size, "%s: engine %s", fn, handle_name[bc->arg]);
        break;
    case K_NULL:
        c->p[bc->slot] = 0;
        snprintf(what, what_size, "%s: %s = {NULL, %zu}", fn, sname, c->len[bc->slot]);
        break;
    case K_NULL_EMPTY:
        c->p[bc->slot] = 0;
        c->len[bc->slot] = 0;
        snprintf(what, what_size, "%s: required %s = {NULL, 0}", fn, sname);
        break;
    case K_EMPTY:
        c->len[bc->slot] = 0;
        snprintf(what, what_size, "%s: %s = {ptr, 0}", fn, sname);
        break;
    case K_SHORT:
        c->len[bc->slot] -= 1;
        snprintf(what, what_size, "%s: %s one element short (%zu)", fn, sname, c->len[bc->slot]);
        break;
    case K_MISALIGN:
        c->p[bc->slot] += (uintptr_t)bc->arg;
        snprintf(what, what_size, "%s: %s misaligned by %d bytes", fn, sname, bc->arg);
        break;
    case K_WRAP:
        c->p[bc->slot] = UINTPTR_MAX - 7;
        snprintf(what, what_size, "%s: %s at 2^64 - 8 (runs past the end of the address space)", fn,
                 sname);
        break;
    case K_OVERLAP: {
        uintptr_t o_lo = c->p[bc->other];
        uintptr_t o_hi = o_lo + c->len[bc->other] * slot_elem(bc->entry, bc->other);
        uintptr_t s_bytes = c->len[bc->slot] * sizeof(float);
        const char *oname = spec->s[bc->other].name;
        char oalt[64];
        param_alt(oalt, sizeof oalt, oname);
        if (bc->arg == G_SAME)
            c->p[bc->slot] = o_lo;
        else if (bc->arg == G_HEAD_ON_TAIL)
            c->p[bc->slot] = o_hi - sizeof(float);
        else
            c->p[bc->slot] = o_lo - s_bytes + sizeof(float);
        size_t n = strlen(params);
        snprintf(params + n, params_size - n, "|%s", oalt);
        snprintf(what, what_size, "%s: output %s overlapping %s, %s", fn, sname, oname,
                 geom_name[bc->arg]);
        break;
    }
    case K_FIXUP: {
        const fixup *f = &FIXUPS[bc->arg];
        f->apply(c);
        *expect = f->expect;
        snprintf(params, params_size, "%s", f->params);
        snprintf(what, what_size, "%s: %s", fn, f->what);
        break;
    }
    }
}

/* ---- Hand-written cases for the other entry points ---- */

enum {
    CC_ANY = 1,    /* does not depend on the backend: run in the CPU variant only */
    CC_CPU = 2,    /* only meaningful on the CPU backend (host and "device" memory are one) */
    CC_GRAPH = 4,  /* needs the world's graphs and second engine */
    CC_WRITES = 8, /* the case legitimately runs operations first (skip the arena comparison) */
};

typedef struct custom_case custom_case;
struct custom_case {
    int entry;
    int sub;
    MemraStatus expect;
    const char *params;
    unsigned flags;
    const char *what;
    MemraStatus (*run)(world *w, const custom_case *cc);
};

/* A pattern that no call under test writes: where an out-parameter must be left untouched. */
#define SENTINEL_PTR ((void *)(uintptr_t)0x5e7e5e7e5e7e5e70u)
#define SENTINEL_LEN ((size_t)0x5e7e5e7e)

static MemraStatus cc_options_init(world *w, const custom_case *cc)
{
    return took(w, memra_engine_options_init(NULL));
}

enum {
    CR_NULL_OUT,
    CR_SIZE_ZERO,
    CR_SIZE_8,
    CR_SIZE_LESS,
    CR_SIZE_MORE_1,
    CR_SIZE_MORE_8,
    CR_SIZE_MAX,
    CR_BACKEND_3,
    CR_BACKEND_MAX,
    CR_ORDINAL_M1,
    CR_ORDINAL_MIN,
    CR_FLAG_1,
    CR_FLAG_63,
    CR_FLAG_ALL,
    CR_STREAM_CPU,
    CR_ENV_GPU,
    CR_ENV_UPPER,
    CR_ENV_SPACE,
};

static MemraStatus cc_create(world *w, const custom_case *cc)
{
    /* An exactly sized heap copy, so that reading past the caller's struct_size is seen by the
     * sanitizers. */
    MemraEngineOptions *o = malloc(sizeof *o);
    cr_assert_not_null(o);
    TU_OK(memra_engine_options_init(o));
    o->backend = MEMRA_BACKEND_CPU;
    o->flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    const char *env = NULL;
    switch (cc->sub) {
    case CR_SIZE_ZERO:
        o->struct_size = 0;
        break;
    case CR_SIZE_8:
        o->struct_size = 8;
        break;
    case CR_SIZE_LESS:
        o->struct_size = sizeof *o - 1;
        break;
    case CR_SIZE_MORE_1:
        o->struct_size = sizeof *o + 1;
        break;
    case CR_SIZE_MORE_8:
        o->struct_size = sizeof *o + 8;
        break;
    case CR_SIZE_MAX:
        o->struct_size = SIZE_MAX;
        break;
    case CR_BACKEND_3:
        o->backend = 3;
        break;
    case CR_BACKEND_MAX:
        o->backend = UINT32_MAX;
        break;
    case CR_ORDINAL_M1:
        o->device_ordinal = -1;
        break;
    case CR_ORDINAL_MIN:
        o->device_ordinal = INT32_MIN;
        break;
    case CR_FLAG_1:
        o->flags |= 2;
        break;
    case CR_FLAG_63:
        o->flags |= UINT64_C(1) << 63;
        break;
    case CR_FLAG_ALL:
        o->flags = UINT64_MAX;
        break;
    case CR_STREAM_CPU:
        o->stream = garbage();
        break;
    case CR_ENV_GPU:
        env = "gpu";
        break;
    case CR_ENV_UPPER:
        env = "CPU";
        break;
    case CR_ENV_SPACE:
        env = "cpu ";
        break;
    }
    char *saved = NULL;
    if (env != NULL) {
        /* AUTO without IGNORE_ENV is what lets the variable decide. The previous value is put
         * back, because without fork (under valgrind) the process goes on to other tests. */
        const char *old = getenv("MEMRA_BACKEND");
        saved = old ? strdup(old) : NULL;
        cr_assert_eq(setenv("MEMRA_BACKEND", env, 1), 0);
        o->backend = MEMRA_BACKEND_AUTO;
        o->flags = 0;
    }
    MemraEngine *out = SENTINEL_PTR;
    MemraStatus st = took(w, memra_engine_create(o, cc->sub == CR_NULL_OUT ? NULL : &out));
    if (env != NULL) {
        if (saved != NULL)
            cr_assert_eq(setenv("MEMRA_BACKEND", saved, 1), 0);
        else
            cr_assert_eq(unsetenv("MEMRA_BACKEND"), 0);
        free(saved);
    }
    free(o);
    cr_assert_eq(out, SENTINEL_PTR, "memra_engine_create wrote *out_engine on failure");
    return st;
}

static MemraStatus cc_destroy(world *w, const custom_case *cc)
{
    return took(w, memra_engine_destroy(engine_handle(w, cc->sub)));
}

static MemraStatus cc_destroy_live_graph(world *w, const custom_case *cc)
{
    MemraStatus st = took(w, memra_engine_destroy(w->e));
    /* The engine must be untouched: its graph still replays. The replay writes the arena, so
     * compare first. */
    check_untouched(w, "memra_engine_destroy with a live graph");
    TU_OK(memra_graph_launch(w->e, w->g));
    TU_OK(memra_engine_synchronize(w->e));
    snapshot(w, w->before);
    return st;
}

enum { Q_BACKEND, Q_STREAM };

static MemraStatus cc_query(world *w, const custom_case *cc)
{
    int handle = (cc->sub >> 4) - 1, null_out = cc->sub & 1;
    MemraEngine *e = handle < 0 ? w->e : engine_handle(w, handle);
    if (cc->entry == E_ENGINE_BACKEND) {
        MemraBackend out = 0x5e7e;
        MemraStatus st = took(w, memra_engine_backend(e, null_out ? NULL : &out));
        cr_assert_eq(out, 0x5e7e, "memra_engine_backend wrote *out_backend on failure");
        return st;
    }
    void *out = SENTINEL_PTR;
    MemraStatus st = took(w, memra_engine_stream(e, null_out ? NULL : &out));
    cr_assert_eq(out, SENTINEL_PTR, "memra_engine_stream wrote *out_stream on failure");
    return st;
}
/* sub for cc_query: the engine handle (H_*, or Q_LIVE for the world's engine) and NULL-out
 * bit. */
#define QS(handle, null_out) ((((handle) + 1) << 4) | (null_out))
#define Q_LIVE (-1)

static MemraStatus cc_sync(world *w, const custom_case *cc)
{
    return took(w, memra_engine_synchronize(engine_handle(w, cc->sub)));
}

enum {
    AL_HANDLE_NULL,
    AL_HANDLE_GARBAGE,
    AL_HANDLE_GRAPH,
    AL_NULL_OUT,
    AL_LEN_ZERO,
    AL_INIT_2,
    AL_INIT_MAX,
    AL_LEN_OVERFLOW,
    AL_LEN_MAX,
    AL_OOM,
};

static MemraStatus cc_alloc(world *w, const custom_case *cc)
{
    bool u64 = cc->entry == E_ALLOC_U64;
    size_t elem = u64 ? sizeof(uint64_t) : sizeof(float);
    MemraEngine *e = w->e;
    size_t len = 64;
    MemraAllocInit init = MEMRA_ALLOC_INIT_ZEROED;
    bool null_out = false;
    switch (cc->sub) {
    case AL_HANDLE_NULL:
    case AL_HANDLE_GARBAGE:
    case AL_HANDLE_GRAPH:
        e = engine_handle(w, H_NULL + (cc->sub - AL_HANDLE_NULL));
        break;
    case AL_NULL_OUT:
        null_out = true;
        break;
    case AL_LEN_ZERO:
        len = 0;
        break;
    case AL_INIT_2:
        init = 2;
        break;
    case AL_INIT_MAX:
        init = UINT32_MAX;
        break;
    case AL_LEN_OVERFLOW:
        len = SIZE_MAX / elem + 1;
        break;
    case AL_LEN_MAX:
        len = SIZE_MAX;
        break;
    case AL_OOM:
        /* Representable in bytes, but no machine has it. */
        len = (SIZE_MAX / elem) / 8;
        break;
    }
    MemraStatus st;
    if (u64) {
        MemraSliceMutU64 out = {SENTINEL_PTR, SENTINEL_LEN};
        st = took(w, memra_alloc_u64(e, len, init, null_out ? NULL : &out));
        cr_assert(out.ptr == SENTINEL_PTR && out.len == SENTINEL_LEN,
                  "memra_alloc_u64 wrote *out on failure");
    } else {
        MemraSliceMutF32 out = {SENTINEL_PTR, SENTINEL_LEN};
        st = took(w, memra_alloc_f32(e, len, init, null_out ? NULL : &out));
        cr_assert(out.ptr == SENTINEL_PTR && out.len == SENTINEL_LEN,
                  "memra_alloc_f32 wrote *out on failure");
    }
    return st;
}

enum {
    FR_HANDLE_NULL,
    FR_HANDLE_GARBAGE,
    FR_HANDLE_GRAPH,
    FR_INTERIOR,
    FR_FOREIGN,
    FR_NEVER,
    FR_TWICE,
};

static MemraStatus cc_free(world *w, const custom_case *cc)
{
    switch (cc->sub) {
    case FR_HANDLE_NULL:
    case FR_HANDLE_GARBAGE:
    case FR_HANDLE_GRAPH:
        /* The arena stays alive: the probe after the case uses it. */
        return took(
            w, memra_free(engine_handle(w, H_NULL + (cc->sub - FR_HANDLE_NULL)), w->arena.ptr));
    case FR_INTERIOR:
        return took(w, memra_free(w->e, w->arena.ptr + 1));
    case FR_FOREIGN: {
        MemraEngine *e2 = tu_engine(w->backend);
        MemraSliceMutF32 b = tu_zeros(e2, 64);
        MemraStatus st = took(w, memra_free(w->e, b.ptr));
        tu_free(e2, b.ptr);
        TU_OK(memra_engine_destroy(e2));
        return st;
    }
    case FR_NEVER: {
        float local[4];
        return took(w, memra_free(w->e, local));
    }
    case FR_TWICE: {
        MemraSliceMutF32 b = tu_zeros(w->e, 64);
        tu_free(w->e, b.ptr);
        return took(w, memra_free(w->e, b.ptr));
    }
    }
    return MEMRA_STATUS_INTERNAL;
}

/* Sub-cases of the copies: which side is spoiled and how. */
enum {
    CP_HANDLE_NULL,
    CP_HANDLE_GARBAGE,
    CP_HANDLE_GRAPH,
    CP_NULL_OUT, /* htod only */
    CP_SRC_NULL,
    CP_SRC_NULL_EMPTY,
    CP_SRC_EMPTY, /* htod only: a new buffer of 0 elements */
    CP_SRC_MIS1,
    CP_SRC_MISHALF,
    CP_SRC_WRAP,
    CP_SRC_LEN_OVERFLOW,
    CP_DST_NULL,
    CP_DST_SHORT,
    CP_DST_MIS1,
    CP_DST_MISHALF,
    CP_DST_WRAP,
    CP_BOTH_LEN_OVERFLOW,
    CP_OVERLAP_SAME,
    CP_OVERLAP_SHIFT,
};

#define COPY_LEN ((size_t)6)

static void spoil_src(int sub, size_t elem, uintptr_t *p, size_t *len)
{
    switch (sub) {
    case CP_SRC_NULL:
        *p = 0;
        break;
    case CP_SRC_NULL_EMPTY:
        *p = 0;
        *len = 0;
        break;
    case CP_SRC_EMPTY:
        *len = 0;
        break;
    case CP_SRC_MIS1:
        *p += 1;
        break;
    case CP_SRC_MISHALF:
        *p += elem / 2;
        break;
    case CP_SRC_WRAP:
        *p = UINTPTR_MAX - 7;
        break;
    case CP_SRC_LEN_OVERFLOW:
    case CP_BOTH_LEN_OVERFLOW:
        *len = SIZE_MAX / elem + 1;
        break;
    }
}

static void spoil_dst(int sub, size_t elem, uintptr_t *p, size_t *len)
{
    switch (sub) {
    case CP_DST_NULL:
        *p = 0;
        break;
    case CP_DST_SHORT:
        *len -= 1;
        break;
    case CP_DST_MIS1:
        *p += 1;
        break;
    case CP_DST_MISHALF:
        *p += elem / 2;
        break;
    case CP_DST_WRAP:
        *p = UINTPTR_MAX - 7;
        break;
    case CP_BOTH_LEN_OVERFLOW:
        *len = SIZE_MAX / elem + 1;
        break;
    }
}

static MemraStatus cc_htod(world *w, const custom_case *cc)
{
    bool u64 = cc->entry == E_HTOD_U64;
    size_t elem = u64 ? sizeof(uint64_t) : sizeof(float);
    /* Host source with room for the misaligned variants. */
    uint64_t host[COPY_LEN + 1];
    tu_varied((float *)(void *)host, 2 * (COPY_LEN + 1), w->seed, 1.0f);
    uintptr_t p = (uintptr_t)host;
    size_t len = COPY_LEN;
    spoil_src(cc->sub, elem, &p, &len);
    MemraEngine *e = w->e;
    if (cc->sub <= CP_HANDLE_GRAPH)
        e = engine_handle(w, H_NULL + (cc->sub - CP_HANDLE_NULL));
    bool null_out = cc->sub == CP_NULL_OUT;
    MemraStatus st;
    if (u64) {
        MemraSliceMutU64 out = {SENTINEL_PTR, SENTINEL_LEN};
        MemraSliceU64 src = {(const uint64_t *)p, len};
        st = took(w, memra_htod_u64(e, src, null_out ? NULL : &out));
        cr_assert(out.ptr == SENTINEL_PTR && out.len == SENTINEL_LEN,
                  "memra_htod_u64 wrote *out on failure");
    } else {
        MemraSliceMutF32 out = {SENTINEL_PTR, SENTINEL_LEN};
        MemraSliceF32 src = {(const float *)p, len};
        st = took(w, memra_htod_f32(e, src, null_out ? NULL : &out));
        cr_assert(out.ptr == SENTINEL_PTR && out.len == SENTINEL_LEN,
                  "memra_htod_f32 wrote *out on failure");
    }
    return st;
}

/* htod_*_into and dtoh_*: the device side is a region of the arena (the table for u64), the
 * host side a canary-filled array that must also come back unchanged. */
static MemraStatus cc_copy(world *w, const custom_case *cc)
{
    bool u64 = cc->entry == E_HTOD_U64_INTO || cc->entry == E_DTOH_U64;
    bool to_device = cc->entry == E_HTOD_F32_INTO || cc->entry == E_HTOD_U64_INTO;
    size_t elem = u64 ? sizeof(uint64_t) : sizeof(float);
    uintptr_t dev = region_addr(w, u64 ? R_TABLE : R_O);
    uint64_t host[COPY_LEN + 1], canary[COPY_LEN + 1];
    tu_varied((float *)(void *)host, 2 * (COPY_LEN + 1), w->seed ^ 1, 1.0f);
    memcpy(canary, host, sizeof host);

    uintptr_t src = to_device ? (uintptr_t)host : dev;
    uintptr_t dst = to_device ? dev : (uintptr_t)host;
    size_t src_len = COPY_LEN, dst_len = COPY_LEN;
    spoil_src(cc->sub, elem, &src, &src_len);
    spoil_dst(cc->sub, elem, &dst, &dst_len);
    /* On the CPU backend both sides are host memory: make them overlap inside the arena. */
    if (cc->sub == CP_OVERLAP_SAME || cc->sub == CP_OVERLAP_SHIFT) {
        src = dev;
        dst = dev + (cc->sub == CP_OVERLAP_SHIFT ? elem : 0);
    }
    MemraEngine *e = w->e;
    if (cc->sub <= CP_HANDLE_GRAPH)
        e = engine_handle(w, H_NULL + (cc->sub - CP_HANDLE_NULL));

    MemraStatus st;
    if (u64) {
        MemraSliceU64 s = {(const uint64_t *)src, src_len};
        MemraSliceMutU64 d = {(uint64_t *)dst, dst_len};
        st = took(w, to_device ? memra_htod_u64_into(e, s, d) : memra_dtoh_u64(e, s, d));
    } else {
        MemraSliceF32 s = {(const float *)src, src_len};
        MemraSliceMutF32 d = {(float *)dst, dst_len};
        st = took(w, to_device ? memra_htod_f32_into(e, s, d) : memra_dtoh_f32(e, s, d));
    }
    cr_assert(memcmp(host, canary, sizeof host) == 0, "%s changed the host buffer on failure",
              entry_name[cc->entry]);
    return st;
}

/* Steps that misbehave. Each does the forbidden thing first, before any operation, so that
 * nothing is written and the arena comparison still applies. */
enum {
    SM_FAIL_FIRST,
    SM_FAIL_THIRD,
    SM_ALLOC_THEN_FAIL,
    SM_BAD_OP,
    SM_SYNC,
    SM_DTOH,
    SM_HTOD,
    SM_HTOD_INTO,
    SM_NESTED,
    SM_DESTROY_ENGINE,
    SM_LAUNCH,
    SM_DESTROY_GRAPH,
};

typedef struct step_ctx {
    world *w;
    int mode;
    int calls;
    MemraStatus inner;
    char inner_msg[1024];
} step_ctx;

static MemraStatus misbehaving_step(MemraEngine *e, void *user)
{
    step_ctx *x = user;
    world *w = x->w;
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    MemraStatus st = MEMRA_STATUS_OK;
    x->calls++;
    switch (x->mode) {
    case SM_FAIL_FIRST:
        return MEMRA_STATUS_INVALID_ARGUMENT;
    case SM_FAIL_THIRD:
        st = world_step(e, w);
        if (st != MEMRA_STATUS_OK)
            return st;
        return x->calls == 3 ? MEMRA_STATUS_INVALID_ARGUMENT : MEMRA_STATUS_OK;
    case SM_ALLOC_THEN_FAIL: {
        /* Both buffers, the kept one and the freed one, must be released with the failed
         * capture (the leak check sees it if not). */
        MemraSliceMutF32 kept, dropped;
        st = memra_alloc_f32(e, 1024, MEMRA_ALLOC_INIT_ZEROED, &kept);
        if (st == MEMRA_STATUS_OK)
            st = memra_alloc_f32(e, 512, MEMRA_ALLOC_INIT_UNINIT, &dropped);
        if (st == MEMRA_STATUS_OK)
            st = memra_free(e, dropped.ptr);
        if (st != MEMRA_STATUS_OK)
            return st;
        return MEMRA_STATUS_INVALID_ARGUMENT;
    }
    case SM_BAD_OP: {
        opcall c;
        base_call(w, e, E_SCAN_B, &c);
        c.b_n = 0;
        st = invoke(&c);
        break;
    }
    case SM_SYNC:
        st = memra_engine_synchronize(e);
        break;
    case SM_DTOH: {
        MemraSliceMutF32 dst = {host, 8};
        st = memra_dtoh_f32(e, tu_sub(w->arena, w->off[R_O], 8), dst);
        break;
    }
    case SM_HTOD: {
        MemraSliceMutF32 out;
        MemraSliceF32 src = {host, 8};
        st = memra_htod_f32(e, src, &out);
        break;
    }
    case SM_HTOD_INTO: {
        MemraSliceF32 src = {host, 8};
        st = memra_htod_f32_into(e, src, tu_sub_mut(w->arena, w->off[R_O], 8));
        break;
    }
    case SM_NESTED: {
        MemraGraph *inner = SENTINEL_PTR;
        st = memra_graph_capture(e, empty_step, NULL, &inner);
        cr_assert_eq(inner, SENTINEL_PTR, "a nested capture wrote *out_graph");
        break;
    }
    case SM_DESTROY_ENGINE:
        st = memra_engine_destroy(e);
        break;
    case SM_LAUNCH:
        st = memra_graph_launch(e, w->g);
        break;
    case SM_DESTROY_GRAPH:
        st = memra_graph_destroy(e, w->g);
        break;
    }
    if (x->calls == 1) {
        x->inner = st;
        snprintf(x->inner_msg, sizeof x->inner_msg, "%s", memra_last_error_message());
    }
    return st;
}

/* Runs a capture of a misbehaving step. The case's status and message are the inner call's
 * (for the modes that make one) or the capture's; the capture itself must fail with
 * CAPTURE_ERROR, leave *out_graph alone, and leave the engine able to capture again. */
static MemraStatus cc_step(world *w, const custom_case *cc)
{
    step_ctx x = {.w = w, .mode = cc->sub};
    MemraGraph *g = SENTINEL_PTR;
    MemraStatus st = memra_graph_capture(w->e, misbehaving_step, &x, &g);
    char capture_msg[1024];
    snprintf(capture_msg, sizeof capture_msg, "%s", memra_last_error_message());
    cr_assert_eq(st, MEMRA_STATUS_CAPTURE_ERROR,
                 "memra_graph_capture of a step that %s returned %s (%s)", cc->what,
                 memra_status_string(st), capture_msg);
    cr_assert(has_word(capture_msg, "memra_graph_capture"),
              "the capture's message \"%s\" does not name memra_graph_capture", capture_msg);
    cr_assert_eq(g, SENTINEL_PTR, "memra_graph_capture wrote *out_graph on failure");
    if (cc->sub != SM_FAIL_THIRD)
        cr_assert_eq(x.calls, 1, "the capture went on calling a failed step (%d calls)", x.calls);

    MemraGraph *again = NULL;
    TU_OK(memra_graph_capture(w->e, empty_step, NULL, &again));
    TU_OK(memra_graph_destroy(w->e, again));

    if (cc->entry == E_GRAPH_CAPTURE && cc->sub != SM_NESTED) {
        snprintf(w->msg, sizeof w->msg, "%s", capture_msg);
        return st;
    }
    snprintf(w->msg, sizeof w->msg, "%s", x.inner_msg);
    return x.inner;
}

static MemraStatus cc_capture_args(world *w, const custom_case *cc)
{
    MemraGraph *g = SENTINEL_PTR;
    MemraStatus st;
    if (cc->sub == 0)
        st = took(w, memra_graph_capture(w->e, NULL, NULL, &g));
    else if (cc->sub == 1)
        st = took(w, memra_graph_capture(w->e, empty_step, NULL, NULL));
    else
        st = took(w, memra_graph_capture(engine_handle(w, cc->sub - 2), empty_step, NULL, &g));
    cr_assert_eq(g, SENTINEL_PTR, "memra_graph_capture wrote *out_graph on failure");
    return st;
}
#define CA_NULL_STEP 0
#define CA_NULL_OUT 1
#define CA_HANDLE(h) (2 + (h))

/* sub: the spoiled side (0 engine, 1 graph) and the H_* handle. */
#define GH(graph_side, h) (((graph_side) << 4) | (h))

static MemraStatus cc_graph_handle(world *w, const custom_case *cc)
{
    int graph_side = cc->sub >> 4, h = cc->sub & 15;
    MemraEngine *e = w->e;
    MemraGraph *g = w->g;
    if (!graph_side) {
        e = engine_handle(w, h);
    } else {
        switch (h) {
        case H_NULL:
            g = NULL;
            break;
        case H_GARBAGE:
            g = garbage();
            break;
        case H_OTHER_TYPE:
            g = (MemraGraph *)(void *)w->e;
            break;
        case H_FOREIGN:
            g = w->g2;
            break;
        case H_OTHER_ENGINE:
            e = w->e2;
            break;
        }
    }
    if (cc->entry == E_GRAPH_LAUNCH)
        return took(w, memra_graph_launch(e, g));
    return took(w, memra_graph_destroy(e, g));
}

#define PE "engine"
#define CAP "memra_graph_capture"

/* clang-format off */
static const custom_case CUSTOM[] = {
    {E_OPTIONS_INIT, 0, INV, "options", CC_ANY, "options = NULL", cc_options_init},

    {E_ENGINE_CREATE, CR_NULL_OUT, INV, "out_engine", CC_ANY, "out_engine = NULL", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_ZERO, INV, "struct_size", CC_ANY, "struct_size = 0", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_8, INV, "struct_size", CC_ANY, "struct_size = 8", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_LESS, INV, "struct_size", CC_ANY, "struct_size = sizeof - 1", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_MORE_1, MEMRA_STATUS_ABI_MISMATCH, "struct_size", CC_ANY, "struct_size = sizeof + 1", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_MORE_8, MEMRA_STATUS_ABI_MISMATCH, "struct_size", CC_ANY, "struct_size = sizeof + 8", cc_create},
    {E_ENGINE_CREATE, CR_SIZE_MAX, MEMRA_STATUS_ABI_MISMATCH, "struct_size", CC_ANY, "struct_size = SIZE_MAX", cc_create},
    {E_ENGINE_CREATE, CR_BACKEND_3, INV, "backend", CC_ANY, "backend = 3", cc_create},
    {E_ENGINE_CREATE, CR_BACKEND_MAX, INV, "backend", CC_ANY, "backend = UINT32_MAX", cc_create},
    {E_ENGINE_CREATE, CR_ORDINAL_M1, INV, "device_ordinal", CC_ANY, "device_ordinal = -1", cc_create},
    {E_ENGINE_CREATE, CR_ORDINAL_MIN, INV, "device_ordinal", CC_ANY, "device_ordinal = INT32_MIN", cc_create},
    {E_ENGINE_CREATE, CR_FLAG_1, INV, "flags", CC_ANY, "flags bit 1", cc_create},
    {E_ENGINE_CREATE, CR_FLAG_63, INV, "flags", CC_ANY, "flags bit 63", cc_create},
    {E_ENGINE_CREATE, CR_FLAG_ALL, INV, "flags", CC_ANY, "flags = UINT64_MAX", cc_create},
    {E_ENGINE_CREATE, CR_STREAM_CPU, INV, "stream", CC_ANY, "a stream given to the CPU backend", cc_create},
    {E_ENGINE_CREATE, CR_ENV_GPU, INV, "MEMRA_BACKEND", CC_ANY, "MEMRA_BACKEND=gpu", cc_create},
    {E_ENGINE_CREATE, CR_ENV_UPPER, INV, "MEMRA_BACKEND", CC_ANY, "MEMRA_BACKEND=CPU", cc_create},
    {E_ENGINE_CREATE, CR_ENV_SPACE, INV, "MEMRA_BACKEND", CC_ANY, "MEMRA_BACKEND='cpu '", cc_create},

    {E_ENGINE_DESTROY, H_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_destroy},
    {E_ENGINE_DESTROY, H_OTHER_TYPE, INV, PE, CC_GRAPH, "engine = a graph handle", cc_destroy},
    {E_ENGINE_DESTROY, 0, INV, PE, CC_GRAPH, "a graph of the engine still alive", cc_destroy_live_graph},
    {E_ENGINE_DESTROY, SM_DESTROY_ENGINE, INV, PE, CC_GRAPH, "destroyed its engine", cc_step},

    {E_ENGINE_BACKEND, QS(H_NULL, 0), INV, PE, CC_ANY, "engine = NULL", cc_query},
    {E_ENGINE_BACKEND, QS(H_GARBAGE, 0), INV, PE, CC_ANY, "engine = garbage", cc_query},
    {E_ENGINE_BACKEND, QS(H_OTHER_TYPE, 0), INV, PE, CC_GRAPH, "engine = a graph handle", cc_query},
    {E_ENGINE_BACKEND, QS(Q_LIVE, 1), INV, "out_backend", 0, "out_backend = NULL", cc_query},
    {E_ENGINE_STREAM, QS(H_NULL, 0), INV, PE, CC_ANY, "engine = NULL", cc_query},
    {E_ENGINE_STREAM, QS(H_GARBAGE, 0), INV, PE, CC_ANY, "engine = garbage", cc_query},
    {E_ENGINE_STREAM, QS(H_OTHER_TYPE, 0), INV, PE, CC_GRAPH, "engine = a graph handle", cc_query},
    {E_ENGINE_STREAM, QS(Q_LIVE, 1), INV, "out_stream", 0, "out_stream = NULL", cc_query},

    {E_ENGINE_SYNC, H_NULL, INV, PE, CC_ANY, "engine = NULL", cc_sync},
    {E_ENGINE_SYNC, H_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_sync},
    {E_ENGINE_SYNC, H_OTHER_TYPE, INV, PE, CC_GRAPH, "engine = a graph handle", cc_sync},
    {E_ENGINE_SYNC, SM_SYNC, MEMRA_STATUS_CAPTURE_ERROR, CAP, 0, "synchronised", cc_step},

#define ALLOC_CASES(entry)                                                                         \
    {entry, AL_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_alloc},                           \
    {entry, AL_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_alloc},                     \
    {entry, AL_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_alloc},              \
    {entry, AL_NULL_OUT, INV, "out", 0, "out = NULL", cc_alloc},                                   \
    {entry, AL_LEN_ZERO, INV, "len", 0, "len = 0", cc_alloc},                                      \
    {entry, AL_INIT_2, INV, "init", 0, "init = 2", cc_alloc},                                      \
    {entry, AL_INIT_MAX, INV, "init", 0, "init = UINT32_MAX", cc_alloc},                           \
    {entry, AL_LEN_OVERFLOW, INV, "len", 0, "len * elem overflows", cc_alloc},                     \
    {entry, AL_LEN_MAX, INV, "len", 0, "len = SIZE_MAX", cc_alloc},                                \
    {entry, AL_OOM, MEMRA_STATUS_OUT_OF_MEMORY, NULL, 0, "len beyond any memory", cc_alloc}
    ALLOC_CASES(E_ALLOC_F32),
    ALLOC_CASES(E_ALLOC_U64),

    {E_FREE, FR_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_free},
    {E_FREE, FR_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_free},
    {E_FREE, FR_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_free},
    {E_FREE, FR_INTERIOR, INV, "ptr", 0, "ptr inside a buffer, not its start", cc_free},
    {E_FREE, FR_FOREIGN, INV, "ptr", 0, "ptr of another engine's buffer", cc_free},
    {E_FREE, FR_NEVER, INV, "ptr", 0, "ptr never allocated (a stack address)", cc_free},
    {E_FREE, FR_TWICE, INV, "ptr", 0, "ptr freed twice", cc_free},

#define HTOD_CASES(entry, mishalf)                                                                 \
    {entry, CP_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_htod},                            \
    {entry, CP_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_htod},                      \
    {entry, CP_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_htod},               \
    {entry, CP_NULL_OUT, INV, "out", 0, "out = NULL", cc_htod},                                    \
    {entry, CP_SRC_NULL, INV, "src", 0, "src = {NULL, 6}", cc_htod},                               \
    {entry, CP_SRC_NULL_EMPTY, INV, "src", 0, "src = {NULL, 0}", cc_htod},                         \
    {entry, CP_SRC_EMPTY, INV, "src", 0, "src = {ptr, 0}", cc_htod},                               \
    {entry, CP_SRC_MIS1, INV, "src", 0, "src misaligned by 1 byte", cc_htod},                      \
    {entry, CP_SRC_MISHALF, INV, "src", 0, mishalf, cc_htod},                                      \
    {entry, CP_SRC_WRAP, INV, "src", 0, "src runs past the end of the address space", cc_htod},    \
    {entry, CP_SRC_LEN_OVERFLOW, INV, "src", 0, "src.len * elem overflows", cc_htod}
    HTOD_CASES(E_HTOD_F32, "src misaligned by 2 bytes"),
    HTOD_CASES(E_HTOD_U64, "src misaligned by 4 bytes"),
    {E_HTOD_F32, SM_HTOD, MEMRA_STATUS_CAPTURE_ERROR, CAP, 0, "uploaded into a new buffer", cc_step},

#define COPY_CASES(entry, mishalf_src, mishalf_dst)                                                \
    {entry, CP_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_copy},                            \
    {entry, CP_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_copy},                      \
    {entry, CP_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_copy},               \
    {entry, CP_SRC_NULL, INV, "src", 0, "src = {NULL, 6}", cc_copy},                               \
    {entry, CP_SRC_MIS1, INV, "src", 0, "src misaligned by 1 byte", cc_copy},                      \
    {entry, CP_SRC_MISHALF, INV, "src", 0, mishalf_src, cc_copy},                                  \
    {entry, CP_SRC_WRAP, INV, "src", 0, "src runs past the end of the address space", cc_copy},    \
    {entry, CP_SRC_LEN_OVERFLOW, INV, "dst|src", 0, "src.len * elem overflows", cc_copy},          \
    {entry, CP_DST_NULL, INV, "dst", 0, "dst = {NULL, 6}", cc_copy},                               \
    {entry, CP_DST_SHORT, INV, "dst", 0, "dst one element shorter than src", cc_copy},             \
    {entry, CP_DST_MIS1, INV, "dst", 0, "dst misaligned by 1 byte", cc_copy},                      \
    {entry, CP_DST_MISHALF, INV, "dst", 0, mishalf_dst, cc_copy},                                  \
    {entry, CP_DST_WRAP, INV, "dst", 0, "dst runs past the end of the address space", cc_copy},    \
    {entry, CP_BOTH_LEN_OVERFLOW, INV, "dst|src", 0, "both lengths * elem overflow", cc_copy},     \
    {entry, CP_OVERLAP_SAME, INV, "dst|src", CC_CPU, "src and dst the same memory", cc_copy},      \
    {entry, CP_OVERLAP_SHIFT, INV, "dst|src", CC_CPU, "src and dst overlapping by all but one "   \
                                                      "element", cc_copy}
    COPY_CASES(E_HTOD_F32_INTO, "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    COPY_CASES(E_HTOD_U64_INTO, "src misaligned by 4 bytes", "dst misaligned by 4 bytes"),
    COPY_CASES(E_DTOH_F32, "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    COPY_CASES(E_DTOH_U64, "src misaligned by 4 bytes", "dst misaligned by 4 bytes"),
    {E_HTOD_F32_INTO, SM_HTOD_INTO, MEMRA_STATUS_CAPTURE_ERROR, CAP, 0, "copied host data in", cc_step},
    {E_DTOH_F32, SM_DTOH, MEMRA_STATUS_CAPTURE_ERROR, CAP, 0, "read data back", cc_step},

    {E_GRAPH_CAPTURE, CA_HANDLE(H_NULL), INV, PE, CC_ANY, "engine = NULL", cc_capture_args},
    {E_GRAPH_CAPTURE, CA_HANDLE(H_GARBAGE), INV, PE, CC_ANY, "engine = garbage", cc_capture_args},
    {E_GRAPH_CAPTURE, CA_HANDLE(H_OTHER_TYPE), INV, PE, CC_GRAPH, "engine = a graph handle", cc_capture_args},
    {E_GRAPH_CAPTURE, CA_NULL_STEP, INV, "step", 0, "step = NULL", cc_capture_args},
    {E_GRAPH_CAPTURE, CA_NULL_OUT, INV, "out_graph", 0, "out_graph = NULL", cc_capture_args},
    {E_GRAPH_CAPTURE, SM_FAIL_FIRST, MEMRA_STATUS_CAPTURE_ERROR, "step", 0, "failed on its first call", cc_step},
    {E_GRAPH_CAPTURE, SM_FAIL_THIRD, MEMRA_STATUS_CAPTURE_ERROR, "step", CC_WRITES, "failed on its captured call", cc_step},
    {E_GRAPH_CAPTURE, SM_ALLOC_THEN_FAIL, MEMRA_STATUS_CAPTURE_ERROR, "step", 0, "allocated, freed, then failed", cc_step},
    {E_GRAPH_CAPTURE, SM_BAD_OP, MEMRA_STATUS_CAPTURE_ERROR, "step", 0, "made a refused operation call", cc_step},
    {E_GRAPH_CAPTURE, SM_NESTED, MEMRA_STATUS_CAPTURE_ERROR, CAP, 0, "nested a capture", cc_step},

    {E_GRAPH_LAUNCH, GH(0, H_NULL), INV, PE, CC_GRAPH, "engine = NULL", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(0, H_GARBAGE), INV, PE, CC_GRAPH, "engine = garbage", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(0, H_OTHER_TYPE), INV, PE, CC_GRAPH, "engine = a graph handle", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(1, H_NULL), INV, "graph", CC_GRAPH, "graph = NULL", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(1, H_GARBAGE), INV, "graph", CC_GRAPH, "graph = garbage", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(1, H_OTHER_TYPE), INV, "graph", CC_GRAPH, "graph = an engine handle", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(1, H_FOREIGN), INV, "graph", CC_GRAPH, "graph of another engine", cc_graph_handle},
    {E_GRAPH_LAUNCH, GH(1, H_OTHER_ENGINE), INV, "graph", CC_GRAPH, "graph launched on another engine", cc_graph_handle},
    {E_GRAPH_LAUNCH, SM_LAUNCH, INV, "graph", CC_GRAPH, "launched a graph", cc_step},
    {E_GRAPH_DESTROY, GH(0, H_NULL), INV, PE, CC_GRAPH, "engine = NULL", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(0, H_GARBAGE), INV, PE, CC_GRAPH, "engine = garbage", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(0, H_OTHER_TYPE), INV, PE, CC_GRAPH, "engine = a graph handle", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(1, H_GARBAGE), INV, "graph", CC_GRAPH, "graph = garbage", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(1, H_OTHER_TYPE), INV, "graph", CC_GRAPH, "graph = an engine handle", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(1, H_FOREIGN), INV, "graph", CC_GRAPH, "graph of another engine", cc_graph_handle},
    {E_GRAPH_DESTROY, GH(1, H_OTHER_ENGINE), INV, "graph", CC_GRAPH, "graph destroyed through another engine", cc_graph_handle},
    {E_GRAPH_DESTROY, SM_DESTROY_GRAPH, INV, "graph", CC_GRAPH, "destroyed a graph", cc_step},
};
/* clang-format on */
#define N_CUSTOM (sizeof CUSTOM / sizeof CUSTOM[0])

/* ---- Case generation and the test bodies ---- */

static size_t gen_op_cases(bi_case *out, MemraBackend backend)
{
    size_t n = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (out)                                                                                   \
            out[n] = (bi_case){__VA_ARGS__};                                                       \
        n++;                                                                                       \
    } while (0)
    for (int op = 0; op < N_OPS; op++) {
        const op_spec *spec = &OPS[op];
        for (int h = H_NULL; h <= H_OTHER_TYPE; h++)
            ADD(.entry = op, .kind = K_ENGINE, .arg = h);
        for (int s = 0; s < spec->n; s++) {
            bool snap = spec->s[s].kind == SK_SNAP;
            int half = (int)slot_elem(op, s) / 2;
            ADD(.entry = op, .kind = K_NULL, .slot = s);
            if (!snap)
                ADD(.entry = op, .kind = K_NULL_EMPTY, .slot = s);
            ADD(.entry = op, .kind = K_EMPTY, .slot = s);
            ADD(.entry = op, .kind = K_SHORT, .slot = s);
            ADD(.entry = op, .kind = K_MISALIGN, .slot = s, .arg = 1);
            ADD(.entry = op, .kind = K_MISALIGN, .slot = s, .arg = half);
            ADD(.entry = op, .kind = K_WRAP, .slot = s);
            if (!slot_is_output(op, s))
                continue;
            for (int o = 0; o < spec->n; o++) {
                /* Two outputs are one pair: generate it once. */
                if (o == s || (slot_is_output(op, o) && o < s))
                    continue;
                for (int g = 0; g < G_COUNT; g++)
                    ADD(.entry = op, .kind = K_OVERLAP, .slot = s, .other = o, .arg = g);
            }
        }
        for (size_t f = 0; f < N_FIXUPS; f++)
            if (FIXUPS[f].ops & OP_BIT(op))
                ADD(.entry = op, .kind = K_FIXUP, .arg = (int)f);
    }
    for (size_t i = 0; i < N_CUSTOM; i++) {
        unsigned fl = CUSTOM[i].flags;
        if (backend != MEMRA_BACKEND_CPU && (fl & (CC_ANY | CC_CPU)))
            continue;
        ADD(.entry = CUSTOM[i].entry, .kind = K_CUSTOM, .arg = (int)i);
    }
#undef ADD
    return n;
}

static void free_cases(struct criterion_test_params *ctp)
{
    cr_free(ctp->params);
}

static struct criterion_test_params make_cases(MemraBackend backend)
{
    size_t n = gen_op_cases(NULL, backend);
    bi_case *cases = cr_malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_op_cases(cases, backend);
    return cr_make_param_array(bi_case, cases, n, free_cases);
}

static void run_case(const bi_case *bc, MemraBackend backend)
{
    world w;
    char what[512], params[256];
    const char *fn = entry_name[bc->entry];

    if (bc->kind == K_CUSTOM) {
        const custom_case *cc = &CUSTOM[bc->arg];
        world_init(&w, backend, cc->flags & CC_GRAPH ? WF_GRAPH : 0);
        snapshot(&w, w.before);
        snprintf(what, sizeof what, "%s: %s", fn, cc->what);
        prime_message(fn);
        MemraStatus st = cc->run(&w, cc);
        check_refusal(&w, what, st, cc->expect, fn, cc->params);
        if (!(cc->flags & CC_WRITES))
            check_untouched(&w, what);
        if (w.g != NULL)
            TU_OK(memra_graph_launch(w.e, w.g));
    } else {
        bool graph = bc->kind == K_ENGINE && bc->arg == H_OTHER_TYPE;
        world_init(&w, backend, graph ? WF_GRAPH : 0);
        snapshot(&w, w.before);
        opcall c;
        MemraStatus expect;
        base_call(&w, w.e, bc->entry, &c);
        apply_op_case(bc, &w, &c, &expect, what, sizeof what, params, sizeof params);
        prime_message(fn);
        MemraStatus st = took(&w, invoke(&c));
        check_refusal(&w, what, st, expect, fn, params);
        check_untouched(&w, what);
    }
    /* The good call of the same operation (or the first one, after a non-operation case) must
     * go through: the refusal was for the reason the case was built for, and left the engine
     * usable. */
    opcall good;
    base_call(&w, w.e, bc->entry < N_OPS ? bc->entry : E_CONV_B, &good);
    MemraStatus st = invoke(&good);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: the good call after the case returned %s (%s)", what,
                 memra_status_string(st), memra_last_error_message());
    TU_OK(memra_engine_synchronize(w.e));
    world_fini(&w);
}

ParameterizedTestParameters(bad_input, cpu)
{
    return make_cases(MEMRA_BACKEND_CPU);
}

ParameterizedTest(bi_case *bc, bad_input, cpu)
{
    run_case(bc, MEMRA_BACKEND_CPU);
}

ParameterizedTestParameters(bad_input, cuda)
{
    return make_cases(MEMRA_BACKEND_CUDA);
}

ParameterizedTest(bi_case *bc, bad_input, cuda)
{
    run_case(bc, MEMRA_BACKEND_CUDA);
}

/* ---- Controls: the good calls the cases start from are accepted ---- */

static void good_calls(MemraBackend backend)
{
    world w;
    world_init(&w, backend, WF_GRAPH);
    for (int op = 0; op < N_OPS; op++) {
        opcall c;
        base_call(&w, w.e, op, &c);
        TU_OK(invoke(&c));
    }
    /* The documented exception to "outputs must not overlap": the per-row scan in place. */
    opcall c;
    base_call(&w, w.e, E_SCAN_B, &c);
    c.p[slot_named(E_SCAN_B, "out_ptrs")] = c.p[slot_named(E_SCAN_B, "in_ptrs")];
    TU_OK(invoke(&c));
    /* Views that touch without overlapping: the outputs of the packed prep back to back. */
    base_call(&w, w.e, E_PREP_B, &c);
    uintptr_t at = region_addr(&w, R_SNAP_SSM);
    for (int s = slot_named(E_PREP_B, "q_l2"); s < OPS[E_PREP_B].n; s++) {
        c.p[s] = at;
        at += c.len[s] * sizeof(float);
    }
    TU_OK(invoke(&c));
    TU_OK(memra_graph_launch(w.e, w.g));
    TU_OK(memra_engine_synchronize(w.e));
    world_fini(&w);
}

Test(bad_input, cpu_good_calls_accepted)
{
    good_calls(MEMRA_BACKEND_CPU);
}

Test(bad_input, cuda_good_calls_accepted)
{
    good_calls(MEMRA_BACKEND_CUDA);
}

/* ---- memra_status_string: unknown values ---- */

static const MemraStatus unknown_statuses[] = {9, 10, 100, 0x7fffffff, UINT32_MAX};

ParameterizedTestParameters(bad_input, status_string_unknown)
{
    return cr_make_param_array(MemraStatus, (void *)unknown_statuses,
                               sizeof unknown_statuses / sizeof unknown_statuses[0]);
}

ParameterizedTest(MemraStatus *status, bad_input, status_string_unknown)
{
    prime_message("memra_status_string");
    char before[1024];
    snprintf(before, sizeof before, "%s", memra_last_error_message());
    const char *s = memra_status_string(*status);
    cr_assert_not_null(s);
    cr_assert_str_eq(s, "MEMRA_STATUS_<unknown>", "memra_status_string(%u) = \"%s\"",
                     (unsigned)*status, s);
    cr_assert_str_eq(memra_last_error_message(), before,
                     "memra_status_string changed the thread's last error message");
}

/* ---- The same cases in one process, for valgrind and compute-sanitizer ---- */

/* Under valgrind and under compute-sanitizer every test process costs seconds to start, so
 * `make leakcheck` and `make memcheck` run the generated cases here, one after the other in a
 * single process per backend, instead of as the separate tests above (which they filter out).
 * Enabled by MEMRA_TEST_SWEEP=1, skipped otherwise (the separate tests already run them). The
 * first failing case stops the sweep and names itself. */
static void sweep(MemraBackend backend, const char *separate)
{
    const char *on = getenv("MEMRA_TEST_SWEEP");
    if (on == NULL || strcmp(on, "1") != 0)
        cr_skip_test("the cases run as %s; MEMRA_TEST_SWEEP=1 runs them in one process (make "
                     "leakcheck and make memcheck do)",
                     separate);
    /* Skip (no CUDA device) before anything is allocated, so that the leak checks see none. */
    TU_OK(memra_engine_destroy(tu_engine(backend)));
    size_t n = gen_op_cases(NULL, backend);
    bi_case *cases = malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_op_cases(cases, backend);
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i], backend);
    free(cases);
}

Test(bad_input, cpu_sweep)
{
    sweep(MEMRA_BACKEND_CPU, "bad_input/cpu");
}

Test(bad_input, cuda_sweep)
{
    sweep(MEMRA_BACKEND_CUDA, "bad_input/cuda");
}

/* ---- A leak on purpose, to prove that the leak checks see the library ---- */

/* `make asan` and `make leakcheck` run this with MEMRA_LEAK_CANARY=1 and fail unless their
 * checker reports the engine and the buffer below as leaked: a checker that misses them would
 * miss the library's own leaks too. Skipped otherwise. */
Test(bad_input_canary, leak)
{
    const char *on = getenv("MEMRA_LEAK_CANARY");
    if (on == NULL || strcmp(on, "1") != 0)
        cr_skip_test("leaks on purpose; only the leak checks' self-test enables it");
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CPU);
    MemraSliceMutF32 s = tu_zeros(e, 1000);
    cr_assert_not_null(s.ptr);
}
