/*
 * Bad input (docs/bad-input.md) for the 1.1 entry points: memra_gdn_verify in its three modes,
 * memra_gdn_journal_commit, memra_gdn_rollback, memra_verify_args_init, memra_gdn_journal_len,
 * memra_alloc_u32, memra_htod_u32_into and memra_dtoh_u32. Every refusal must carry the
 * documented status and a message naming the function and the offending field, and must not
 * write a single byte of any output, ring, state, journal, count or table.
 *
 * The method is test_bad_input.c's: one arena holds every operand (activations, weights,
 * counts, snapshots, the pointer tables and the rings, states and journals they point at),
 * filled with fresh random bits (journals zero, i.e. empty, and counts valid, so that the good
 * calls succeed). A case spoils one field of a known-good MemraVerifyArgs, makes the call and
 * compares full read-backs of the arena taken before and after it; then the good call of the
 * same operation must succeed, which proves that the case was refused for the reason it was
 * built for and that the engine stays usable.
 *
 * Generated cases cover every slice field each operation reads (NULL, empty, short,
 * misaligned, wrapping the address space; every output against every other slice in three
 * overlap geometries) and the scalar fields (struct_size, mode, head_order, d_state, the counts,
 * eps, scale, products that overflow); hand-written cases cover fields given in a mode that
 * must not have them, the struct itself, and the other 1.1 entry points.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

_Static_assert(SIZE_MAX == UINT64_MAX, "the overflow cases assume a 64-bit size_t");

/* ---- The world: two key and two value heads, two sequences of two rows ----
 *
 * Smaller than the suite's shapes on purpose: every case ends with a good call that runs, and
 * the arena is read back twice per case. */

#define W_S ((size_t)MEMRA_D_STATE)
#define W_NK ((size_t)2)
#define W_NV ((size_t)2)
#define W_T ((size_t)2)
#define W_B ((size_t)2)
#define W_DCONV ((size_t)4)
#define W_KEY (W_S * W_NK)
#define W_VAL (W_S * W_NV)
#define W_CONV (2 * W_KEY + W_VAL)
#define W_PAD (W_DCONV - 1)
#define W_STATE (W_S * W_S * W_NV)
#define W_ROWS (W_B * W_T)
/* Rings spaced for the widest conv, so that a wrongly accepted d_conv = 9 still rolls memory
 * inside the arena (where the comparison sees it). */
#define W_RING_STRIDE (W_CONV * (MEMRA_D_CONV_MAX + 1))

/* Regions in address order. The canonical states come first and the alternate states, rings
 * and journals last: at least as long as the longest output view, they keep an output moved
 * to overlap a neighbour inside the arena. */
enum {
    R_STATE_CANON,
    R_QKV,
    R_W,
    R_BETA_RAW,
    R_ALPHA,
    R_DT_BIAS,
    R_A,
    R_ACC_J,
    R_ACC_R,
    R_O,
    R_CONV_OUTS,
    R_Q,
    R_K,
    R_VG,
    R_BETA,
    R_GLOG,
    R_SNAP_CONV,
    R_SNAP_SSM,
    R_TABLE_S,
    R_TABLE_J,
    R_STATE_ALT,
    R_RING,
    R_JOURNAL,
    R_COUNT
};

static const char *const region_name[R_COUNT] = {
    "canonical states",
    "qkv",
    "w",
    "beta_raw",
    "alpha",
    "dt_bias",
    "a",
    "accepted (journal)",
    "accepted (rollback)",
    "o",
    "conv_outs",
    "q_l2",
    "k_l2",
    "v_g",
    "beta",
    "g_log",
    "snap_conv",
    "snap_ssm",
    "table (snapshot modes)",
    "table (journal)",
    "alternate states",
    "rings",
    "journals",
};

static size_t journal_words(void)
{
    size_t n = 0;
    cr_assert_eq(memra_gdn_journal_len(W_S, W_NK, W_NV, W_T, &n), MEMRA_STATUS_OK,
                 "memra_gdn_journal_len: %s", memra_last_error_message());
    return n;
}

static size_t region_words(int r)
{
    switch (r) {
    case R_QKV:
    case R_CONV_OUTS:
        return W_ROWS * W_CONV;
    case R_W:
        return W_CONV * (MEMRA_D_CONV_MAX + 1);
    case R_BETA_RAW:
    case R_ALPHA:
    case R_BETA:
    case R_GLOG:
        return W_ROWS * W_NV;
    case R_DT_BIAS:
    case R_A:
        return W_NV;
    case R_ACC_J:
    case R_ACC_R:
        return W_B;
    case R_O:
    case R_Q:
    case R_K:
    case R_VG:
        return W_ROWS * W_VAL;
    case R_SNAP_CONV:
        return W_B * (W_T - 1) * W_CONV * W_PAD;
    case R_SNAP_SSM:
    case R_STATE_CANON:
    case R_STATE_ALT:
        return W_B * W_STATE;
    case R_TABLE_S:
    case R_TABLE_J:
        return 2 * MEMRA_TABLE_WIDTH * W_B;
    case R_RING:
        return W_B * W_RING_STRIDE;
    case R_JOURNAL:
        return W_B * journal_words();
    }
    return 0;
}

_Static_assert(W_T - 1 <= 1, "the state regions are the guard zones");

typedef struct world {
    MemraBackend backend;
    MemraEngine *e;
    MemraSliceMutF32 arena;
    size_t off[R_COUNT];
    size_t words;
    float *before, *after;
    uint64_t seed;
    /* A graph of the engine (for a graph handle passed as an engine). */
    MemraGraph *g;
    char msg[1024];
} world;

static uintptr_t region_addr(const world *w, int r)
{
    return (uintptr_t)w->arena.ptr + w->off[r] * sizeof(float);
}

/* Fresh random floats in [-0.5, 0.5): a block of xorshift64 bits put straight into the mantissa,
 * repeated with the block number mixed into the low mantissa bits (cheaper than drawing every
 * word, and a stray write still has to hit the exact bits of its word to go unseen). */
#define FILL_BLOCK ((size_t)4096)

static void fill_random(float *out, size_t len, uint64_t seed)
{
    uint32_t block[FILL_BLOCK];
    uint64_t x = seed | 1;
    for (size_t i = 0; i < FILL_BLOCK; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        block[i] = (uint32_t)(x >> 41) | UINT32_C(0x3f800000);
    }
    for (size_t i = 0; i < len; i++) {
        uint32_t bits = block[i % FILL_BLOCK] ^ (uint32_t)((i / FILL_BLOCK) & 0xff);
        float one_to_two;
        memcpy(&one_to_two, &bits, sizeof bits);
        out[i] = one_to_two - 1.5f;
    }
}

static void put_u64(float *image, size_t word, uint64_t value)
{
    memcpy(&image[word], &value, sizeof value);
}

static void put_u32(float *image, size_t word, uint32_t value)
{
    memcpy(&image[word], &value, sizeof value);
}

static void snapshot(world *w, float *into)
{
    MemraSliceMutF32 dst = {into, w->words};
    TU_OK(memra_dtoh_f32(w->e, tu_view(w->arena), dst));
}

static MemraStatus empty_step(MemraEngine *e, void *user)
{
    return MEMRA_STATUS_OK;
}

static void world_init(world *w, MemraBackend backend, bool graph)
{
    memset(w, 0, sizeof *w);
    w->backend = backend;
    w->e = tu_engine(backend);
    size_t at = 0;
    for (int r = 0; r < R_COUNT; r++) {
        w->off[r] = at;
        at += (region_words(r) + 63) / 64 * 64;
    }
    w->words = at;
    TU_OK(memra_alloc_f32(w->e, w->words, MEMRA_ALLOC_INIT_UNINIT, &w->arena));
    w->before = malloc(w->words * sizeof(float));
    w->after = malloc(w->words * sizeof(float));
    cr_assert(w->before && w->after);
    w->seed = tu_fresh_seed();
    fill_random(w->before, w->words, w->seed);
    /* Empty journals and valid counts: the good calls must succeed. */
    memset(w->before + w->off[R_JOURNAL], 0, region_words(R_JOURNAL) * sizeof(float));
    const size_t jw = journal_words();
    for (size_t b = 0; b < W_B; b++) {
        put_u32(w->before, w->off[R_ACC_J] + b, 0);
        put_u32(w->before, w->off[R_ACC_R] + b, (uint32_t)(1 + b % W_T));
        const uint64_t ring = region_addr(w, R_RING) + b * W_RING_STRIDE * sizeof(float);
        const uint64_t canon = region_addr(w, R_STATE_CANON) + b * W_STATE * sizeof(float);
        const uint64_t alt = region_addr(w, R_STATE_ALT) + b * W_STATE * sizeof(float);
        const uint64_t journal = region_addr(w, R_JOURNAL) + b * jw * sizeof(float);
        put_u64(w->before, w->off[R_TABLE_S] + 2 * (3 * b + 0), ring);
        put_u64(w->before, w->off[R_TABLE_S] + 2 * (3 * b + 1), canon);
        put_u64(w->before, w->off[R_TABLE_S] + 2 * (3 * b + 2), alt);
        put_u64(w->before, w->off[R_TABLE_J] + 2 * (3 * b + 0), ring);
        put_u64(w->before, w->off[R_TABLE_J] + 2 * (3 * b + 1), canon);
        put_u64(w->before, w->off[R_TABLE_J] + 2 * (3 * b + 2), journal);
    }
    MemraSliceF32 image = {w->before, w->words};
    TU_OK(memra_htod_f32_into(w->e, image, w->arena));
    if (graph)
        TU_OK(memra_graph_capture(w->e, empty_step, NULL, &w->g));
}

static void world_fini(world *w)
{
    if (w->g)
        TU_OK(memra_graph_destroy(w->e, w->g));
    TU_OK(memra_engine_destroy(w->e));
    free(w->before);
    free(w->after);
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
    const size_t first = tu_first_diff(w->before, w->after, w->words);
    if (first == w->words)
        return;
    cr_assert_fail("%s: a refused call changed %zu words of the arena, the first in %s (word "
                   "%zu) " TU_SEED_FMT,
                   what, tu_bit_diffs(w->before, w->after, w->words), region_of(w, first), first,
                   w->seed);
}

static MemraStatus took(world *w, MemraStatus st)
{
    snprintf(w->msg, sizeof w->msg, "%s", memra_last_error_message());
    return st;
}

/* Leaves a failure of another function as the thread's last message, so that a refusal that
 * records no message of its own cannot pass on a stale one. */
static void prime_message(void)
{
    cr_assert_eq(memra_engine_options_init(NULL), MEMRA_STATUS_INVALID_ARGUMENT);
}

static void check_refusal(const world *w, const char *what, MemraStatus st, MemraStatus expect,
                          const char *fn, const char *params)
{
    cr_assert_eq(st, expect, "%s: returned %s, expected %s (message: \"%s\") " TU_SEED_FMT, what,
                 memra_status_string(st), memra_status_string(expect), w->msg, w->seed);
    cr_assert(tu_has_word(w->msg, fn), "%s: the message \"%s\" does not name %s", what, w->msg, fn);
    if (params != NULL)
        cr_assert(tu_names_any(w->msg, params), "%s: the message \"%s\" names none of %s", what,
                  w->msg, params);
}

/* ---- The operations and the fields they read ---- */

enum {
    E_V_SNAP,
    E_V_FINAL,
    E_V_JOURNAL,
    E_COMMIT,
    E_ROLLBACK,
    N_OPS,
    E_ARGS_INIT = N_OPS,
    E_JOURNAL_LEN,
    E_ALLOC_U32,
    E_HTOD_U32_INTO,
    E_DTOH_U32,
    E_COUNT
};

static const char *const entry_name[E_COUNT] = {
    "memra_gdn_verify",         "memra_gdn_verify",   "memra_gdn_verify",
    "memra_gdn_journal_commit", "memra_gdn_rollback", "memra_verify_args_init",
    "memra_gdn_journal_len",    "memra_alloc_u32",    "memra_htod_u32_into",
    "memra_dtoh_u32",
};

static const char *const op_label[N_OPS] = {"SNAPSHOTS verify", "FINAL_ONLY verify",
                                            "JOURNAL verify", "journal commit", "rollback"};

typedef enum {
    SK_IN,  /* f32 input */
    SK_TAB, /* u64 pointer table */
    SK_U32, /* u32 input (accepted counts) */
    SK_OUT, /* required f32 output */
    SK_OPT, /* optional f32 output: {NULL, 0} skips it */
} slot_kind;

enum {
    F_QKV,
    F_TABLE,
    F_W,
    F_BETA_RAW,
    F_ALPHA,
    F_DT_BIAS,
    F_A,
    F_ACCEPTED,
    F_O,
    F_CONV_OUTS,
    F_Q_L2,
    F_K_L2,
    F_V_G,
    F_BETA,
    F_G_LOG,
    F_SNAP_CONV,
    F_SNAP_SSM,
    N_FIELDS
};

typedef struct field_spec {
    const char *name;
    size_t offset;
    size_t elem;
    int region;
    size_t len;
} field_spec;

static const field_spec FIELDS[N_FIELDS] = {
    [F_QKV] = {"qkv", offsetof(MemraVerifyArgs, qkv), 4, R_QKV, W_ROWS *W_CONV},
    [F_TABLE] = {"table", offsetof(MemraVerifyArgs, table), 8, R_TABLE_S, 3 * W_B},
    [F_W] = {"w", offsetof(MemraVerifyArgs, w), 4, R_W, W_CONV *W_DCONV},
    [F_BETA_RAW] = {"beta_raw", offsetof(MemraVerifyArgs, beta_raw), 4, R_BETA_RAW, W_ROWS *W_NV},
    [F_ALPHA] = {"alpha", offsetof(MemraVerifyArgs, alpha), 4, R_ALPHA, W_ROWS *W_NV},
    [F_DT_BIAS] = {"dt_bias", offsetof(MemraVerifyArgs, dt_bias), 4, R_DT_BIAS, W_NV},
    [F_A] = {"a", offsetof(MemraVerifyArgs, a), 4, R_A, W_NV},
    [F_ACCEPTED] = {"accepted", offsetof(MemraVerifyArgs, accepted), 4, R_ACC_J, W_B},
    [F_O] = {"o", offsetof(MemraVerifyArgs, o), 4, R_O, W_ROWS *W_VAL},
    [F_CONV_OUTS] = {"conv_outs", offsetof(MemraVerifyArgs, conv_outs), 4, R_CONV_OUTS,
                     W_ROWS *W_CONV},
    [F_Q_L2] = {"q_l2", offsetof(MemraVerifyArgs, q_l2), 4, R_Q, W_ROWS *W_VAL},
    [F_K_L2] = {"k_l2", offsetof(MemraVerifyArgs, k_l2), 4, R_K, W_ROWS *W_VAL},
    [F_V_G] = {"v_g", offsetof(MemraVerifyArgs, v_g), 4, R_VG, W_ROWS *W_VAL},
    [F_BETA] = {"beta", offsetof(MemraVerifyArgs, beta), 4, R_BETA, W_ROWS *W_NV},
    [F_G_LOG] = {"g_log", offsetof(MemraVerifyArgs, g_log), 4, R_GLOG, W_ROWS *W_NV},
    [F_SNAP_CONV] = {"snap_conv", offsetof(MemraVerifyArgs, snap_conv), 4, R_SNAP_CONV,
                     W_B *(W_T - 1) * W_CONV *W_PAD},
    [F_SNAP_SSM] = {"snap_ssm", offsetof(MemraVerifyArgs, snap_ssm), 4, R_SNAP_SSM,
                    W_B *(W_T - 1) * W_STATE},
};

/* How operation `op` reads field `f` (-1: it is left {NULL, 0}). */
static int field_kind(int op, int f)
{
    switch (op) {
    case E_V_SNAP:
    case E_V_FINAL:
    case E_V_JOURNAL:
        if (f == F_ACCEPTED)
            return op == E_V_JOURNAL ? SK_U32 : -1;
        if (f == F_SNAP_CONV || f == F_SNAP_SSM)
            return op == E_V_SNAP ? SK_OUT : -1;
        if (f == F_TABLE)
            return SK_TAB;
        if (f == F_O)
            return SK_OUT;
        if (f >= F_CONV_OUTS)
            return SK_OPT;
        return SK_IN;
    case E_COMMIT:
        if (f == F_TABLE)
            return SK_TAB;
        if (f == F_ACCEPTED)
            return SK_U32;
        return f == F_W || f == F_DT_BIAS || f == F_A ? SK_IN : -1;
    case E_ROLLBACK:
        if (f == F_TABLE)
            return SK_TAB;
        if (f == F_ACCEPTED)
            return SK_U32;
        return f == F_SNAP_CONV || f == F_SNAP_SSM ? SK_IN : -1;
    }
    return -1;
}

static bool is_output(int op, int f)
{
    int k = field_kind(op, f);
    return k == SK_OUT || k == SK_OPT;
}

static int field_region(int op, int f)
{
    if (f == F_TABLE)
        return op == E_V_JOURNAL || op == E_COMMIT ? R_TABLE_J : R_TABLE_S;
    if (f == F_ACCEPTED)
        return op == E_ROLLBACK ? R_ACC_R : R_ACC_J;
    return FIELDS[f].region;
}

/* Every slice of MemraVerifyArgs is {pointer, size_t len}. */
typedef struct raw_slice {
    uintptr_t ptr;
    size_t len;
} raw_slice;

static raw_slice get_field(const MemraVerifyArgs *a, int f)
{
    raw_slice s;
    memcpy(&s, (const char *)a + FIELDS[f].offset, sizeof s);
    return s;
}

static void set_field(MemraVerifyArgs *a, int f, uintptr_t ptr, size_t len)
{
    raw_slice s = {ptr, len};
    memcpy((char *)a + FIELDS[f].offset, &s, sizeof s);
}

_Static_assert(sizeof(raw_slice) == sizeof(MemraSliceF32) &&
                   sizeof(raw_slice) == sizeof(MemraSliceU32) &&
                   sizeof(raw_slice) == sizeof(MemraSliceMutF32) &&
                   sizeof(raw_slice) == sizeof(MemraSliceU64),
               "slices are {pointer, length}");

/* The known-good arguments of `op` on the world: every field the operation reads, the others
 * as memra_verify_args_init left them. */
static void base_args(const world *w, int op, MemraVerifyArgs *a)
{
    TU_OK(memra_verify_args_init(a));
    a->mode = op == E_V_FINAL                       ? MEMRA_VERIFY_MODE_FINAL_ONLY
              : op == E_V_JOURNAL || op == E_COMMIT ? MEMRA_VERIFY_MODE_JOURNAL
                                                    : MEMRA_VERIFY_MODE_SNAPSHOTS;
    a->num_k = W_NK;
    a->num_v = W_NV;
    a->d_conv = W_DCONV;
    a->b_n = W_B;
    if (op != E_COMMIT)
        a->t = W_T;
    if (op != E_ROLLBACK)
        a->eps = 1e-6f;
    if (op <= E_V_JOURNAL)
        a->scale = TU_GDN_SCALE;
    for (int f = 0; f < N_FIELDS; f++)
        if (field_kind(op, f) >= 0)
            set_field(a, f, region_addr(w, field_region(op, f)), FIELDS[f].len);
}

static MemraStatus invoke(MemraEngine *e, int op, const MemraVerifyArgs *a)
{
    switch (op) {
    case E_V_SNAP:
    case E_V_FINAL:
    case E_V_JOURNAL:
        return memra_gdn_verify(e, a);
    case E_COMMIT:
        return memra_gdn_journal_commit(e, a);
    case E_ROLLBACK:
        return memra_gdn_rollback(e, a);
    }
    cr_assert_fail("invoke: unknown operation %d", op);
    return MEMRA_STATUS_INTERNAL;
}

/* The names a message may use for a field: single letters only in quotes or after "->" or
 * "." (a bare letter would match any word). */
static void field_alts(char *buf, size_t size, const char *name)
{
    if (strlen(name) == 1)
        snprintf(buf, size, "'%s'|->%s|.%s", name, name, name);
    else
        snprintf(buf, size, "%s", name);
}

/* ---- Handles ---- */

static uint64_t garbage_words[64];

static void *garbage(void)
{
    memset(garbage_words, 0xa5, sizeof garbage_words);
    return garbage_words;
}

enum { H_NULL, H_GARBAGE, H_GRAPH };
static const char *const handle_name[] = {"NULL", "garbage", "a graph handle"};

static MemraEngine *engine_handle(world *w, int h)
{
    switch (h) {
    case H_NULL:
        return NULL;
    case H_GARBAGE:
        return garbage();
    case H_GRAPH:
        return (MemraEngine *)(void *)w->g;
    }
    return w->e;
}

/* ---- Generated cases ---- */

enum {
    K_ENGINE,     /* arg: H_* */
    K_NULL,       /* {NULL, len} with len > 0 */
    K_NULL_EMPTY, /* {NULL, 0} for a required field */
    K_EMPTY,      /* {ptr, 0} */
    K_SHORT,      /* one element short */
    K_MISALIGN,   /* arg: bytes added to the address */
    K_WRAP,       /* the view runs past the end of the address space */
    K_OVERLAP,    /* field overlaps `other` in geometry `arg` */
    K_FIXUP,      /* arg: index into FIXUPS */
    K_CUSTOM,     /* arg: index into CUSTOM */
};

enum { G_SAME, G_HEAD_ON_TAIL, G_TAIL_ON_HEAD, G_COUNT };
static const char *const geom_name[G_COUNT] = {
    "at the same address", "starting on its last element", "ending on its first element"};

typedef struct bv_case {
    int entry;
    int kind;
    int field;
    int other;
    int arg;
} bv_case;

typedef struct fixup {
    const char *what;
    unsigned ops;
    MemraStatus expect;
    const char *params;
    void (*apply)(MemraVerifyArgs *a, int op);
} fixup;

#define OP_BIT(op) (1u << (op))
#define OPS_VERIFY (OP_BIT(E_V_SNAP) | OP_BIT(E_V_FINAL) | OP_BIT(E_V_JOURNAL))
#define OPS_FOLD (OPS_VERIFY | OP_BIT(E_COMMIT))
#define OPS_T (OPS_VERIFY | OP_BIT(E_ROLLBACK))
#define OPS_SNAPS (OP_BIT(E_V_SNAP) | OP_BIT(E_ROLLBACK))
#define OPS_ALL (OPS_FOLD | OP_BIT(E_ROLLBACK))
#define P2(k) ((size_t)1 << (k))
#define INV MEMRA_STATUS_INVALID_ARGUMENT
#define UNS MEMRA_STATUS_UNSUPPORTED

static void fx_mode_3(MemraVerifyArgs *a, int op)
{
    a->mode = 3;
}
static void fx_mode_max(MemraVerifyArgs *a, int op)
{
    a->mode = UINT32_MAX;
}
static void fx_mode_snapshots(MemraVerifyArgs *a, int op)
{
    a->mode = MEMRA_VERIFY_MODE_SNAPSHOTS;
}
static void fx_mode_final(MemraVerifyArgs *a, int op)
{
    a->mode = MEMRA_VERIFY_MODE_FINAL_ONLY;
}
static void fx_mode_journal(MemraVerifyArgs *a, int op)
{
    a->mode = MEMRA_VERIFY_MODE_JOURNAL;
}
static void fx_order_2(MemraVerifyArgs *a, int op)
{
    a->head_order = 2;
}
static void fx_order_max(MemraVerifyArgs *a, int op)
{
    a->head_order = UINT32_MAX;
}
static void fx_d_state_0(MemraVerifyArgs *a, int op)
{
    a->d_state = 0;
}
static void fx_d_state_64(MemraVerifyArgs *a, int op)
{
    a->d_state = 64;
}
static void fx_d_state_127(MemraVerifyArgs *a, int op)
{
    a->d_state = 127;
}
static void fx_d_state_1(MemraVerifyArgs *a, int op)
{
    a->d_state = 1;
}
static void fx_num_k_0(MemraVerifyArgs *a, int op)
{
    a->num_k = 0;
}
static void fx_num_v_0(MemraVerifyArgs *a, int op)
{
    a->num_v = 0;
}
/* conv_dim = 2 * 256 + 128 = 640, below the world's 768: every view stays long enough and only
 * the GQA rule breaks. */
static void fx_num_v_1(MemraVerifyArgs *a, int op)
{
    a->num_v = 1;
}
static void fx_d_conv_0(MemraVerifyArgs *a, int op)
{
    a->d_conv = 0;
}
static void fx_d_conv_9(MemraVerifyArgs *a, int op)
{
    a->d_conv = MEMRA_D_CONV_MAX + 1;
    raw_slice s = get_field(a, F_W);
    if (s.ptr)
        set_field(a, F_W, s.ptr, W_CONV * (MEMRA_D_CONV_MAX + 1));
}
static void fx_d_conv_max(MemraVerifyArgs *a, int op)
{
    a->d_conv = SIZE_MAX;
}
static void fx_t_0(MemraVerifyArgs *a, int op)
{
    a->t = 0;
}
static void fx_b_n_0(MemraVerifyArgs *a, int op)
{
    a->b_n = 0;
}
static void fx_eps_nan(MemraVerifyArgs *a, int op)
{
    a->eps = NAN;
}
static void fx_eps_inf(MemraVerifyArgs *a, int op)
{
    a->eps = INFINITY;
}
static void fx_eps_ninf(MemraVerifyArgs *a, int op)
{
    a->eps = -INFINITY;
}
static void fx_scale_nan(MemraVerifyArgs *a, int op)
{
    a->scale = NAN;
}
static void fx_scale_inf(MemraVerifyArgs *a, int op)
{
    a->scale = INFINITY;
}
static void fx_scale_ninf(MemraVerifyArgs *a, int op)
{
    a->scale = -INFINITY;
}
/* b_n * t * conv_dim, b_n * 3 and every other b_n product are 0 modulo 2^64. */
static void fx_b_n_2_62(MemraVerifyArgs *a, int op)
{
    a->b_n = P2(62);
}
static void fx_t_2_62(MemraVerifyArgs *a, int op)
{
    a->t = P2(62);
}
/* d_state * num_v wraps to 256, the world's value_dim, modulo 2^64. */
static void fx_num_v_wrap(MemraVerifyArgs *a, int op)
{
    a->num_v = P2(57) + W_NV;
}
/* d_state * num_k wraps to 0. */
static void fx_num_k_wrap(MemraVerifyArgs *a, int op)
{
    a->num_k = P2(62);
    a->num_v = P2(62);
}
/* Only the state snapshot size b_n * (t-1) * num_v * 128 * 128 overflows. */
static void fx_snap_wrap(MemraVerifyArgs *a, int op)
{
    a->num_v = P2(50);
}

static const fixup FIXUPS[] = {
    {"mode = 3", OPS_ALL, INV, "mode", fx_mode_3},
    {"mode = UINT32_MAX", OPS_ALL, INV, "mode", fx_mode_max},
    {"a commit with mode = SNAPSHOTS", OP_BIT(E_COMMIT), INV, "mode", fx_mode_snapshots},
    {"a commit with mode = FINAL_ONLY", OP_BIT(E_COMMIT), INV, "mode", fx_mode_final},
    {"a rollback with mode = FINAL_ONLY", OP_BIT(E_ROLLBACK), INV, "mode", fx_mode_final},
    {"a rollback with mode = JOURNAL", OP_BIT(E_ROLLBACK), INV, "mode", fx_mode_journal},
    {"head_order = 2", OPS_FOLD, INV, "head_order", fx_order_2},
    {"head_order = UINT32_MAX", OPS_FOLD, INV, "head_order", fx_order_max},
    {"d_state = 0", OPS_ALL, INV, "d_state", fx_d_state_0},
    {"d_state = 64", OPS_ALL, UNS, "d_state", fx_d_state_64},
    {"d_state = 127", OPS_ALL, UNS, "d_state", fx_d_state_127},
    {"d_state = 1", OPS_ALL, UNS, "d_state", fx_d_state_1},
    {"num_k = 0", OPS_ALL, INV, "num_k", fx_num_k_0},
    {"num_v = 0", OPS_ALL, INV, "num_v", fx_num_v_0},
    {"num_v = 1 not a multiple of num_k = 2", OPS_ALL, INV, "num_v|num_k", fx_num_v_1},
    {"d_conv = 0", OPS_ALL, INV, "d_conv", fx_d_conv_0},
    {"d_conv = 9 with a w view long enough for it", OPS_ALL, INV, "d_conv", fx_d_conv_9},
    {"d_conv = SIZE_MAX", OPS_ALL, INV, "d_conv", fx_d_conv_max},
    {"t = 0", OPS_T, INV, "t|'t'", fx_t_0},
    {"b_n = 0", OPS_ALL, INV, "b_n", fx_b_n_0},
    {"eps = NaN", OPS_FOLD, INV, "eps", fx_eps_nan},
    {"eps = +inf", OPS_FOLD, INV, "eps", fx_eps_inf},
    {"eps = -inf", OPS_FOLD, INV, "eps", fx_eps_ninf},
    {"scale = NaN", OPS_VERIFY, INV, "scale", fx_scale_nan},
    {"scale = +inf", OPS_VERIFY, INV, "scale", fx_scale_inf},
    {"scale = -inf", OPS_VERIFY, INV, "scale", fx_scale_ninf},
    {"b_n = 2^62 (every b_n product wraps to 0)", OPS_ALL, INV, NULL, fx_b_n_2_62},
    {"t = 2^62 (b_n * t * num_v wraps to 0)", OPS_T, INV, NULL, fx_t_2_62},
    {"num_v = 2^57 + 2 (d_state * num_v wraps to 256)", OPS_ALL, INV, NULL, fx_num_v_wrap},
    {"num_k = num_v = 2^62 (d_state * num_k wraps to 0)", OPS_ALL, INV, NULL, fx_num_k_wrap},
    {"num_v = 2^50 (the state snapshot size overflows)", OPS_SNAPS, INV, NULL, fx_snap_wrap},
};
#define N_FIXUPS (sizeof FIXUPS / sizeof FIXUPS[0])

/* ---- Hand-written cases ---- */

enum {
    CC_ANY = 1,   /* independent of the backend: CPU variant only */
    CC_CPU = 2,   /* only meaningful where host and device memory are one */
    CC_GRAPH = 4, /* needs the world's graph */
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

#define SENTINEL_PTR ((void *)(uintptr_t)0x5e7e5e7e5e7e5e70u)
#define SENTINEL_LEN ((size_t)0x5e7e5e7e)

/* sub of cc_op: the operation in the low byte, the spoiling in the rest. */
#define OPSUB(op, how) ((op) | ((how) << 8))
enum {
    CO_ARGS_NULL,
    CO_SIZE_0,
    CO_SIZE_8,
    CO_SIZE_LESS,
    CO_SIZE_MORE_1,
    CO_SIZE_MORE_8,
    CO_SIZE_MAX,
    CO_INIT_ONLY,
    CO_EPS_UNSET,
    CO_SCALE_UNSET,
    CO_SNAP_CONV_GIVEN,
    CO_SNAP_SSM_GIVEN,
    CO_ACCEPTED_GIVEN,
};

static MemraStatus cc_op(world *w, const custom_case *cc)
{
    const int op = cc->sub & 0xff, how = cc->sub >> 8;
    MemraVerifyArgs good;
    base_args(w, op, &good);
    /* The struct on the heap, exactly as large as its struct_size claims where that is
     * possible, so that reading past it is seen by the sanitizers. */
    size_t size = sizeof good;
    switch (how) {
    case CO_SIZE_MORE_1:
        size = sizeof good + 1;
        break;
    case CO_SIZE_MORE_8:
        size = sizeof good + 8;
        break;
    }
    MemraVerifyArgs *a = calloc(1, size);
    cr_assert_not_null(a);
    memcpy(a, &good, sizeof good);
    switch (how) {
    case CO_SIZE_0:
        a->struct_size = 0;
        break;
    case CO_SIZE_8:
        a->struct_size = 8;
        break;
    case CO_SIZE_LESS:
        a->struct_size = sizeof good - 1;
        break;
    case CO_SIZE_MORE_1:
    case CO_SIZE_MORE_8:
        a->struct_size = size;
        break;
    case CO_SIZE_MAX:
        a->struct_size = SIZE_MAX;
        break;
    case CO_INIT_ONLY:
        TU_OK(memra_verify_args_init(a));
        a->mode = good.mode;
        break;
    case CO_EPS_UNSET:
        a->eps = NAN;
        break;
    case CO_SCALE_UNSET:
        a->scale = NAN;
        break;
    case CO_SNAP_CONV_GIVEN:
        set_field(a, F_SNAP_CONV, region_addr(w, R_SNAP_CONV), FIELDS[F_SNAP_CONV].len);
        break;
    case CO_SNAP_SSM_GIVEN:
        set_field(a, F_SNAP_SSM, region_addr(w, R_SNAP_SSM), FIELDS[F_SNAP_SSM].len);
        break;
    case CO_ACCEPTED_GIVEN:
        set_field(a, F_ACCEPTED, region_addr(w, R_ACC_J), W_B);
        break;
    }
    MemraStatus st = took(w, invoke(w->e, op, how == CO_ARGS_NULL ? NULL : a));
    free(a);
    return st;
}

static MemraStatus cc_args_init(world *w, const custom_case *cc)
{
    return took(w, memra_verify_args_init(NULL));
}

enum {
    JL_NULL_OUT,
    JL_D_STATE_0,
    JL_D_STATE_64,
    JL_NUM_K_0,
    JL_NUM_V_0,
    JL_NUM_V_3,
    JL_T_MAX_0,
    JL_T_MAX_HUGE,
    JL_NUM_V_HUGE,
};

static MemraStatus cc_journal_len(world *w, const custom_case *cc)
{
    size_t d_state = W_S, num_k = W_NK, num_v = W_NV, t_max = W_T, out = SENTINEL_LEN;
    switch (cc->sub) {
    case JL_D_STATE_0:
        d_state = 0;
        break;
    case JL_D_STATE_64:
        d_state = 64;
        break;
    case JL_NUM_K_0:
        num_k = 0;
        break;
    case JL_NUM_V_0:
        num_v = 0;
        break;
    case JL_NUM_V_3:
        num_v = 3;
        break;
    case JL_T_MAX_0:
        t_max = 0;
        break;
    case JL_T_MAX_HUGE:
        t_max = SIZE_MAX / 4;
        break;
    case JL_NUM_V_HUGE:
        num_k = P2(61);
        num_v = P2(61);
        break;
    }
    MemraStatus st = took(w, memra_gdn_journal_len(d_state, num_k, num_v, t_max,
                                                   cc->sub == JL_NULL_OUT ? NULL : &out));
    cr_assert_eq(out, SENTINEL_LEN, "memra_gdn_journal_len wrote *out_len on failure");
    return st;
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
    MemraEngine *e = w->e;
    size_t len = 64;
    MemraAllocInit init = MEMRA_ALLOC_INIT_ZEROED;
    switch (cc->sub) {
    case AL_HANDLE_NULL:
    case AL_HANDLE_GARBAGE:
    case AL_HANDLE_GRAPH:
        e = engine_handle(w, H_NULL + (cc->sub - AL_HANDLE_NULL));
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
        len = SIZE_MAX / sizeof(uint32_t) + 1;
        break;
    case AL_LEN_MAX:
        len = SIZE_MAX;
        break;
    case AL_OOM:
        len = (SIZE_MAX / sizeof(uint32_t)) / 8;
        break;
    }
    MemraSliceMutU32 out = {SENTINEL_PTR, SENTINEL_LEN};
    MemraStatus st = took(w, memra_alloc_u32(e, len, init, cc->sub == AL_NULL_OUT ? NULL : &out));
    cr_assert(out.ptr == SENTINEL_PTR && out.len == SENTINEL_LEN,
              "memra_alloc_u32 wrote *out on failure");
    return st;
}

enum {
    CP_HANDLE_NULL,
    CP_HANDLE_GARBAGE,
    CP_HANDLE_GRAPH,
    CP_SRC_NULL,
    CP_SRC_MIS1,
    CP_SRC_MIS2,
    CP_SRC_WRAP,
    CP_SRC_LEN_OVERFLOW,
    CP_DST_NULL,
    CP_DST_SHORT,
    CP_DST_MIS1,
    CP_DST_MIS2,
    CP_DST_WRAP,
    CP_BOTH_LEN_OVERFLOW,
    CP_OVERLAP_SAME,
    CP_OVERLAP_SHIFT,
};

#define COPY_LEN ((size_t)6)

/* The device side is the journal verify's count region of the arena, the host side a
 * canary-filled array that must come back unchanged too. */
static MemraStatus cc_copy(world *w, const custom_case *cc)
{
    const bool to_device = cc->entry == E_HTOD_U32_INTO;
    const size_t elem = sizeof(uint32_t);
    uintptr_t dev = region_addr(w, R_ACC_J);
    uint32_t host[COPY_LEN + 1], canary[COPY_LEN + 1];
    for (size_t i = 0; i < COPY_LEN + 1; i++)
        host[i] = (uint32_t)(tu_mix_seed(w->seed, i) >> 40);
    memcpy(canary, host, sizeof host);
    uintptr_t src = to_device ? (uintptr_t)host : dev;
    uintptr_t dst = to_device ? dev : (uintptr_t)host;
    /* Two counts fit the region (b_n = 2): the copies use them. */
    size_t src_len = W_B, dst_len = W_B;
    switch (cc->sub) {
    case CP_SRC_NULL:
        src = 0;
        break;
    case CP_SRC_MIS1:
        src += 1;
        break;
    case CP_SRC_MIS2:
        src += 2;
        break;
    case CP_SRC_WRAP:
        src = UINTPTR_MAX - 3;
        break;
    case CP_SRC_LEN_OVERFLOW:
        src_len = SIZE_MAX / elem + 1;
        break;
    case CP_DST_NULL:
        dst = 0;
        break;
    case CP_DST_SHORT:
        dst_len = src_len - 1;
        break;
    case CP_DST_MIS1:
        dst += 1;
        break;
    case CP_DST_MIS2:
        dst += 2;
        break;
    case CP_DST_WRAP:
        dst = UINTPTR_MAX - 3;
        break;
    case CP_BOTH_LEN_OVERFLOW:
        src_len = dst_len = SIZE_MAX / elem + 1;
        break;
    case CP_OVERLAP_SAME:
    case CP_OVERLAP_SHIFT:
        src = dev;
        dst = dev + (cc->sub == CP_OVERLAP_SHIFT ? elem : 0);
        src_len = dst_len = W_B;
        break;
    }
    MemraEngine *e = w->e;
    if (cc->sub <= CP_HANDLE_GRAPH)
        e = engine_handle(w, H_NULL + (cc->sub - CP_HANDLE_NULL));
    MemraSliceU32 s = {(const uint32_t *)src, src_len};
    MemraSliceMutU32 d = {(uint32_t *)dst, dst_len};
    MemraStatus st = took(w, to_device ? memra_htod_u32_into(e, s, d) : memra_dtoh_u32(e, s, d));
    cr_assert(memcmp(host, canary, sizeof host) == 0, "%s changed the host buffer on failure",
              entry_name[cc->entry]);
    return st;
}

typedef struct step_ctx {
    world *w;
    int entry;
    int calls;
    MemraStatus inner;
    char inner_msg[1024];
} step_ctx;

static MemraStatus copy_step(MemraEngine *e, void *user)
{
    step_ctx *x = user;
    uint32_t host[W_B] = {0, 0};
    MemraSliceMutU32 dev = {(uint32_t *)region_addr(x->w, R_ACC_J), W_B};
    MemraStatus st;
    if (x->entry == E_HTOD_U32_INTO) {
        MemraSliceU32 src = {host, W_B};
        st = memra_htod_u32_into(e, src, dev);
    } else {
        MemraSliceU32 src = {dev.ptr, W_B};
        MemraSliceMutU32 dst = {host, W_B};
        st = memra_dtoh_u32(e, src, dst);
    }
    if (x->calls++ == 0) {
        x->inner = st;
        snprintf(x->inner_msg, sizeof x->inner_msg, "%s", memra_last_error_message());
    }
    return st;
}

/* A copy between host and device inside a capture: CAPTURE_ERROR, the capture refused, the
 * engine still able to capture. */
static MemraStatus cc_copy_in_capture(world *w, const custom_case *cc)
{
    step_ctx x = {.w = w, .entry = cc->entry};
    MemraGraph *g = SENTINEL_PTR;
    MemraStatus st = memra_graph_capture(w->e, copy_step, &x, &g);
    cr_assert_eq(st, MEMRA_STATUS_CAPTURE_ERROR, "memra_graph_capture of a step that %s: %s",
                 cc->what, memra_status_string(st));
    cr_assert_eq(g, SENTINEL_PTR, "memra_graph_capture wrote *out_graph on failure");
    MemraGraph *again = NULL;
    TU_OK(memra_graph_capture(w->e, empty_step, NULL, &again));
    TU_OK(memra_graph_destroy(w->e, again));
    snprintf(w->msg, sizeof w->msg, "%s", x.inner_msg);
    return x.inner;
}

#define PE "engine"
#define CAP_ERR MEMRA_STATUS_CAPTURE_ERROR
#define ABI MEMRA_STATUS_ABI_MISMATCH

/* clang-format off */
#define STRUCT_CASES(op)                                                                           \
    {op, OPSUB(op, CO_ARGS_NULL), INV, "args", CC_ANY, "args = NULL", cc_op},                      \
    {op, OPSUB(op, CO_SIZE_0), INV, "struct_size", CC_ANY, "struct_size = 0", cc_op},              \
    {op, OPSUB(op, CO_SIZE_8), INV, "struct_size", CC_ANY, "struct_size = 8", cc_op},              \
    {op, OPSUB(op, CO_SIZE_LESS), INV, "struct_size", CC_ANY, "struct_size = sizeof - 1", cc_op},  \
    {op, OPSUB(op, CO_SIZE_MORE_1), ABI, "struct_size", CC_ANY, "struct_size = sizeof + 1", cc_op},\
    {op, OPSUB(op, CO_SIZE_MORE_8), ABI, "struct_size", CC_ANY, "struct_size = sizeof + 8", cc_op},\
    {op, OPSUB(op, CO_SIZE_MAX), ABI, "struct_size", CC_ANY, "struct_size = SIZE_MAX", cc_op}

static const custom_case CUSTOM[] = {
    STRUCT_CASES(E_V_SNAP),
    STRUCT_CASES(E_V_JOURNAL),
    STRUCT_CASES(E_COMMIT),
    STRUCT_CASES(E_ROLLBACK),
    {E_ARGS_INIT, 0, INV, "args", CC_ANY, "args = NULL", cc_args_init},
    {E_V_SNAP, OPSUB(E_V_SNAP, CO_INIT_ONLY), INV, NULL, CC_ANY, "a struct only memra_verify_args_init filled", cc_op},
    {E_V_JOURNAL, OPSUB(E_V_JOURNAL, CO_INIT_ONLY), INV, NULL, CC_ANY, "a JOURNAL struct only memra_verify_args_init filled", cc_op},
    {E_COMMIT, OPSUB(E_COMMIT, CO_INIT_ONLY), INV, NULL, CC_ANY, "a struct only memra_verify_args_init filled", cc_op},
    {E_ROLLBACK, OPSUB(E_ROLLBACK, CO_INIT_ONLY), INV, NULL, CC_ANY, "a struct only memra_verify_args_init filled", cc_op},
    {E_V_SNAP, OPSUB(E_V_SNAP, CO_EPS_UNSET), INV, "eps", 0, "eps left as init set it (NaN)", cc_op},
    {E_V_FINAL, OPSUB(E_V_FINAL, CO_SCALE_UNSET), INV, "scale", 0, "scale left as init set it (NaN)", cc_op},
    {E_COMMIT, OPSUB(E_COMMIT, CO_EPS_UNSET), INV, "eps", 0, "eps left as init set it (NaN)", cc_op},
    {E_V_FINAL, OPSUB(E_V_FINAL, CO_SNAP_CONV_GIVEN), INV, "snap_conv", 0, "snap_conv given in FINAL_ONLY mode", cc_op},
    {E_V_FINAL, OPSUB(E_V_FINAL, CO_SNAP_SSM_GIVEN), INV, "snap_ssm", 0, "snap_ssm given in FINAL_ONLY mode", cc_op},
    {E_V_JOURNAL, OPSUB(E_V_JOURNAL, CO_SNAP_CONV_GIVEN), INV, "snap_conv", 0, "snap_conv given in JOURNAL mode", cc_op},
    {E_V_JOURNAL, OPSUB(E_V_JOURNAL, CO_SNAP_SSM_GIVEN), INV, "snap_ssm", 0, "snap_ssm given in JOURNAL mode", cc_op},
    {E_V_SNAP, OPSUB(E_V_SNAP, CO_ACCEPTED_GIVEN), INV, "accepted", 0, "accepted given in SNAPSHOTS mode", cc_op},
    {E_V_FINAL, OPSUB(E_V_FINAL, CO_ACCEPTED_GIVEN), INV, "accepted", 0, "accepted given in FINAL_ONLY mode", cc_op},

    {E_JOURNAL_LEN, JL_NULL_OUT, INV, "out_len", CC_ANY, "out_len = NULL", cc_journal_len},
    {E_JOURNAL_LEN, JL_D_STATE_0, INV, "d_state", CC_ANY, "d_state = 0", cc_journal_len},
    {E_JOURNAL_LEN, JL_D_STATE_64, UNS, "d_state", CC_ANY, "d_state = 64", cc_journal_len},
    {E_JOURNAL_LEN, JL_NUM_K_0, INV, "num_k", CC_ANY, "num_k = 0", cc_journal_len},
    {E_JOURNAL_LEN, JL_NUM_V_0, INV, "num_v", CC_ANY, "num_v = 0", cc_journal_len},
    {E_JOURNAL_LEN, JL_NUM_V_3, INV, "num_v|num_k", CC_ANY, "num_v = 3 not a multiple of num_k = 2", cc_journal_len},
    {E_JOURNAL_LEN, JL_T_MAX_0, INV, "t_max", CC_ANY, "t_max = 0", cc_journal_len},
    {E_JOURNAL_LEN, JL_T_MAX_HUGE, INV, NULL, CC_ANY, "t_max = SIZE_MAX / 4 (the length overflows)", cc_journal_len},
    {E_JOURNAL_LEN, JL_NUM_V_HUGE, INV, NULL, CC_ANY, "num_k = num_v = 2^61 (the length overflows)", cc_journal_len},

    {E_ALLOC_U32, AL_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_alloc},
    {E_ALLOC_U32, AL_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_alloc},
    {E_ALLOC_U32, AL_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_alloc},
    {E_ALLOC_U32, AL_NULL_OUT, INV, "out", 0, "out = NULL", cc_alloc},
    {E_ALLOC_U32, AL_LEN_ZERO, INV, "len", 0, "len = 0", cc_alloc},
    {E_ALLOC_U32, AL_INIT_2, INV, "init", 0, "init = 2", cc_alloc},
    {E_ALLOC_U32, AL_INIT_MAX, INV, "init", 0, "init = UINT32_MAX", cc_alloc},
    {E_ALLOC_U32, AL_LEN_OVERFLOW, INV, "len", 0, "len * 4 overflows", cc_alloc},
    {E_ALLOC_U32, AL_LEN_MAX, INV, "len", 0, "len = SIZE_MAX", cc_alloc},
    {E_ALLOC_U32, AL_OOM, MEMRA_STATUS_OUT_OF_MEMORY, NULL, 0, "len beyond any memory", cc_alloc},

#define COPY_CASES(entry)                                                                          \
    {entry, CP_HANDLE_NULL, INV, PE, CC_ANY, "engine = NULL", cc_copy},                            \
    {entry, CP_HANDLE_GARBAGE, INV, PE, CC_ANY, "engine = garbage", cc_copy},                      \
    {entry, CP_HANDLE_GRAPH, INV, PE, CC_GRAPH, "engine = a graph handle", cc_copy},               \
    {entry, CP_SRC_NULL, INV, "src", 0, "src = {NULL, 2}", cc_copy},                               \
    {entry, CP_SRC_MIS1, INV, "src", 0, "src misaligned by 1 byte", cc_copy},                      \
    {entry, CP_SRC_MIS2, INV, "src", 0, "src misaligned by 2 bytes", cc_copy},                     \
    {entry, CP_SRC_WRAP, INV, "src", 0, "src runs past the end of the address space", cc_copy},    \
    {entry, CP_SRC_LEN_OVERFLOW, INV, "dst|src", 0, "src.len * 4 overflows", cc_copy},             \
    {entry, CP_DST_NULL, INV, "dst", 0, "dst = {NULL, 2}", cc_copy},                               \
    {entry, CP_DST_SHORT, INV, "dst", 0, "dst one element shorter than src", cc_copy},             \
    {entry, CP_DST_MIS1, INV, "dst", 0, "dst misaligned by 1 byte", cc_copy},                      \
    {entry, CP_DST_MIS2, INV, "dst", 0, "dst misaligned by 2 bytes", cc_copy},                     \
    {entry, CP_DST_WRAP, INV, "dst", 0, "dst runs past the end of the address space", cc_copy},    \
    {entry, CP_BOTH_LEN_OVERFLOW, INV, "dst|src", 0, "both lengths * 4 overflow", cc_copy},        \
    {entry, CP_OVERLAP_SAME, INV, "dst|src", CC_CPU, "src and dst the same memory", cc_copy},      \
    {entry, CP_OVERLAP_SHIFT, INV, "dst|src", CC_CPU, "src and dst overlapping by one element", cc_copy}
    COPY_CASES(E_HTOD_U32_INTO),
    COPY_CASES(E_DTOH_U32),
    {E_HTOD_U32_INTO, 0, CAP_ERR, "memra_graph_capture", 0, "copied counts in", cc_copy_in_capture},
    {E_DTOH_U32, 0, CAP_ERR, "memra_graph_capture", 0, "read counts back", cc_copy_in_capture},
};
/* clang-format on */
#define N_CUSTOM (sizeof CUSTOM / sizeof CUSTOM[0])

/* ---- Case generation and the test bodies ---- */

static bool op_has_field(int op, int f)
{
    return field_kind(op, f) >= 0;
}

static size_t gen_cases(bv_case *out, MemraBackend backend)
{
    size_t n = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (out)                                                                                   \
            out[n] = (bv_case){__VA_ARGS__};                                                       \
        n++;                                                                                       \
    } while (0)
    for (int op = 0; op < N_OPS; op++) {
        for (int h = H_NULL; h <= H_GRAPH; h++)
            ADD(.entry = op, .kind = K_ENGINE, .arg = h);
        for (int f = 0; f < N_FIELDS; f++) {
            if (!op_has_field(op, f))
                continue;
            const bool optional = field_kind(op, f) == SK_OPT;
            const int half = (int)FIELDS[f].elem / 2;
            ADD(.entry = op, .kind = K_NULL, .field = f);
            if (!optional)
                ADD(.entry = op, .kind = K_NULL_EMPTY, .field = f);
            ADD(.entry = op, .kind = K_EMPTY, .field = f);
            ADD(.entry = op, .kind = K_SHORT, .field = f);
            ADD(.entry = op, .kind = K_MISALIGN, .field = f, .arg = 1);
            ADD(.entry = op, .kind = K_MISALIGN, .field = f, .arg = half);
            ADD(.entry = op, .kind = K_WRAP, .field = f);
            if (!is_output(op, f))
                continue;
            for (int o = 0; o < N_FIELDS; o++) {
                if (o == f || !op_has_field(op, o) || (is_output(op, o) && o < f))
                    continue;
                /* Each pair in one geometry, the geometries taking turns over the pairs;
                 * o (the one required output of every verify) and the journal's counts in all
                 * three. */
                const bool all = f == F_O || o == F_ACCEPTED;
                for (int g = 0; g < G_COUNT; g++)
                    if (all || g == (f + o) % G_COUNT)
                        ADD(.entry = op, .kind = K_OVERLAP, .field = f, .other = o, .arg = g);
            }
        }
        for (size_t x = 0; x < N_FIXUPS; x++)
            if (FIXUPS[x].ops & OP_BIT(op))
                ADD(.entry = op, .kind = K_FIXUP, .arg = (int)x);
    }
    for (size_t i = 0; i < N_CUSTOM; i++) {
        if (backend != MEMRA_BACKEND_CPU && (CUSTOM[i].flags & (CC_ANY | CC_CPU)))
            continue;
        ADD(.entry = CUSTOM[i].entry, .kind = K_CUSTOM, .arg = (int)i);
    }
#undef ADD
    return n;
}

static void apply_case(const bv_case *bc, world *w, MemraEngine **e, MemraVerifyArgs *a,
                       MemraStatus *expect, char *what, size_t what_size, char *params,
                       size_t params_size)
{
    const char *fn = entry_name[bc->entry];
    const char *label = op_label[bc->entry];
    const char *fname = bc->kind != K_ENGINE && bc->kind != K_FIXUP ? FIELDS[bc->field].name : "";
    raw_slice s =
        bc->kind != K_ENGINE && bc->kind != K_FIXUP ? get_field(a, bc->field) : (raw_slice){0, 0};
    *expect = INV;
    field_alts(params, params_size, fname);
    switch (bc->kind) {
    case K_ENGINE:
        *e = engine_handle(w, bc->arg);
        snprintf(params, params_size, "engine");
        snprintf(what, what_size, "%s (%s): engine %s", fn, label, handle_name[bc->arg]);
        return;
    case K_NULL:
        s.ptr = 0;
        snprintf(what, what_size, "%s (%s): %s = {NULL, %zu}", fn, label, fname, s.len);
        break;
    case K_NULL_EMPTY:
        s.ptr = 0;
        s.len = 0;
        snprintf(what, what_size, "%s (%s): required %s = {NULL, 0}", fn, label, fname);
        break;
    case K_EMPTY:
        s.len = 0;
        snprintf(what, what_size, "%s (%s): %s = {ptr, 0}", fn, label, fname);
        break;
    case K_SHORT:
        s.len -= 1;
        snprintf(what, what_size, "%s (%s): %s one element short (%zu)", fn, label, fname, s.len);
        break;
    case K_MISALIGN:
        s.ptr += (uintptr_t)bc->arg;
        snprintf(what, what_size, "%s (%s): %s misaligned by %d bytes", fn, label, fname, bc->arg);
        break;
    case K_WRAP:
        s.ptr = UINTPTR_MAX - 7;
        snprintf(what, what_size,
                 "%s (%s): %s at 2^64 - 8 (runs past the end of the address "
                 "space)",
                 fn, label, fname);
        break;
    case K_OVERLAP: {
        raw_slice o = get_field(a, bc->other);
        const uintptr_t o_hi = o.ptr + o.len * FIELDS[bc->other].elem;
        const uintptr_t s_bytes = s.len * FIELDS[bc->field].elem;
        if (bc->arg == G_SAME)
            s.ptr = o.ptr;
        else if (bc->arg == G_HEAD_ON_TAIL)
            s.ptr = o_hi - sizeof(float);
        else
            s.ptr = o.ptr - s_bytes + sizeof(float);
        char oalt[64];
        field_alts(oalt, sizeof oalt, FIELDS[bc->other].name);
        size_t n = strlen(params);
        snprintf(params + n, params_size - n, "|%s", oalt);
        snprintf(what, what_size, "%s (%s): output %s overlapping %s, %s", fn, label, fname,
                 FIELDS[bc->other].name, geom_name[bc->arg]);
        break;
    }
    case K_FIXUP: {
        const fixup *x = &FIXUPS[bc->arg];
        x->apply(a, bc->entry);
        *expect = x->expect;
        if (x->params)
            snprintf(params, params_size, "%s", x->params);
        else
            params[0] = '\0';
        snprintf(what, what_size, "%s (%s): %s", fn, label, x->what);
        return;
    }
    }
    set_field(a, bc->field, s.ptr, s.len);
}

static void run_case(const bv_case *bc, MemraBackend backend)
{
    world w;
    char what[512], params[256];
    const char *fn = entry_name[bc->entry];
    int good_op = bc->entry < N_OPS ? bc->entry : E_V_SNAP;

    if (bc->kind == K_CUSTOM) {
        const custom_case *cc = &CUSTOM[bc->arg];
        world_init(&w, backend, (cc->flags & CC_GRAPH) != 0);
        snapshot(&w, w.before);
        snprintf(what, sizeof what, "%s: %s", fn, cc->what);
        prime_message();
        MemraStatus st = cc->run(&w, cc);
        check_refusal(&w, what, st, cc->expect, fn, cc->params);
        check_untouched(&w, what);
    } else {
        world_init(&w, backend, bc->kind == K_ENGINE && bc->arg == H_GRAPH);
        snapshot(&w, w.before);
        MemraVerifyArgs a;
        MemraEngine *e = w.e;
        MemraStatus expect;
        base_args(&w, bc->entry, &a);
        apply_case(bc, &w, &e, &a, &expect, what, sizeof what, params, sizeof params);
        prime_message();
        MemraStatus st = took(&w, invoke(e, bc->entry, &a));
        check_refusal(&w, what, st, expect, fn, params[0] ? params : NULL);
        check_untouched(&w, what);
    }
    /* The good call of the same operation must go through. */
    MemraVerifyArgs good;
    base_args(&w, good_op, &good);
    MemraStatus st = invoke(w.e, good_op, &good);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: the good call after the case returned %s (%s)", what,
                 memra_status_string(st), memra_last_error_message());
    st = memra_engine_synchronize(w.e);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: synchronising after the good call returned %s (%s)",
                 what, memra_status_string(st), memra_last_error_message());
    world_fini(&w);
}

static void free_cases(struct criterion_test_params *ctp)
{
    cr_free(ctp->params);
}

static struct criterion_test_params make_cases(MemraBackend backend)
{
    size_t n = gen_cases(NULL, backend);
    bv_case *cases = cr_malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_cases(cases, backend);
    return cr_make_param_array(bv_case, cases, n, free_cases);
}

ParameterizedTestParameters(bad_input_verify, cpu)
{
    return make_cases(MEMRA_BACKEND_CPU);
}

ParameterizedTest(bv_case *bc, bad_input_verify, cpu)
{
    run_case(bc, MEMRA_BACKEND_CPU);
}

ParameterizedTestParameters(bad_input_verify, cuda)
{
    return make_cases(MEMRA_BACKEND_CUDA);
}

ParameterizedTest(bv_case *bc, bad_input_verify, cuda)
{
    run_case(bc, MEMRA_BACKEND_CUDA);
}

/* ---- Controls: the good calls the cases start from are accepted ---- */

static void good_calls(MemraBackend backend)
{
    world w;
    world_init(&w, backend, false);
    for (int op = 0; op < N_OPS; op++) {
        MemraVerifyArgs a;
        base_args(&w, op, &a);
        TU_OK(invoke(w.e, op, &a));
        TU_OK(memra_engine_synchronize(w.e));
    }
    /* Optional outputs left out, and the outputs back to back without a gap (touching is not
     * overlapping). */
    MemraVerifyArgs a;
    base_args(&w, E_V_SNAP, &a);
    for (int f = F_CONV_OUTS; f <= F_G_LOG; f++)
        set_field(&a, f, 0, 0);
    TU_OK(memra_gdn_verify(w.e, &a));
    base_args(&w, E_V_FINAL, &a);
    uintptr_t at = region_addr(&w, R_SNAP_SSM);
    for (int f = F_O; f <= F_G_LOG; f++) {
        set_field(&a, f, at, FIELDS[f].len);
        at += FIELDS[f].len * sizeof(float);
    }
    TU_OK(memra_gdn_verify(w.e, &a));
    /* The grouped head order. */
    base_args(&w, E_V_JOURNAL, &a);
    a.head_order = MEMRA_HEAD_ORDER_GROUPED;
    TU_OK(memra_gdn_verify(w.e, &a));
    TU_OK(memra_engine_synchronize(w.e));
    /* memra_gdn_journal_len and the count copies. */
    size_t len = 0;
    TU_OK(memra_gdn_journal_len(W_S, W_NK, W_NV, W_T, &len));
    cr_assert(len > 0);
    MemraSliceMutU32 counts;
    TU_OK(memra_alloc_u32(w.e, W_B, MEMRA_ALLOC_INIT_ZEROED, &counts));
    const uint32_t host[W_B] = {7, 9};
    uint32_t back[W_B] = {0, 0};
    MemraSliceU32 src = {host, W_B};
    TU_OK(memra_htod_u32_into(w.e, src, counts));
    MemraSliceMutU32 dst = {back, W_B};
    TU_OK(memra_dtoh_u32(w.e, tu_view_u32(counts), dst));
    cr_assert(back[0] == 7 && back[1] == 9, "memra_dtoh_u32 read back %u, %u, not 7, 9", back[0],
              back[1]);
    tu_free(w.e, counts.ptr);
    world_fini(&w);
}

Test(bad_input_verify, cpu_good_calls_accepted)
{
    good_calls(MEMRA_BACKEND_CPU);
}

Test(bad_input_verify, cuda_good_calls_accepted)
{
    good_calls(MEMRA_BACKEND_CUDA);
}

/* ---- The same cases in one process, for valgrind and compute-sanitizer ---- */

/* As bad_input/cpu_sweep: MEMRA_TEST_SWEEP=1 runs every generated case in one process (each
 * sanitized process costs seconds to start); skipped otherwise. */
static void sweep(MemraBackend backend, const char *separate)
{
    const char *on = getenv("MEMRA_TEST_SWEEP");
    if (on == NULL || strcmp(on, "1") != 0)
        cr_skip_test("the cases run as %s; MEMRA_TEST_SWEEP=1 runs them in one process", separate);
    TU_OK(memra_engine_destroy(tu_engine(backend)));
    size_t n = gen_cases(NULL, backend);
    bv_case *cases = malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_cases(cases, backend);
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i], backend);
    free(cases);
}

Test(bad_input_verify, cpu_sweep)
{
    sweep(MEMRA_BACKEND_CPU, "bad_input_verify/cpu");
}

Test(bad_input_verify, cuda_sweep)
{
    sweep(MEMRA_BACKEND_CUDA, "bad_input_verify/cuda");
}
