/*
 * The bad-input framework: see framework.h.
 */
#include "bad_input/framework.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The world ---- */

/* The suites' common shape: two sequences of two rows, conv width 4. */
#define W_T ((size_t)2)
#define W_B ((size_t)2)
#define W_DCONV ((size_t)4)

static const char *const region_name[BI_N_REGIONS] = {
    [OA_R_QKV] = "qkv",
    [OA_R_W] = "w",
    [OA_R_CONV_OUT] = "conv_out",
    [OA_R_SNAP_CONV] = "snap_conv",
    [OA_R_BETA_RAW] = "beta_raw",
    [OA_R_ALPHA] = "alpha",
    [OA_R_DT_BIAS] = "dt_bias",
    [OA_R_A] = "a",
    [OA_R_ACC_J] = "accepted (journal)",
    [OA_R_ACC_R] = "accepted (rollback)",
    [OA_R_Q] = "q_l2",
    [OA_R_K] = "k_l2",
    [OA_R_VG] = "v_g",
    [OA_R_BETA] = "beta",
    [OA_R_GLOG] = "g_log",
    [OA_R_O] = "o",
    [OA_R_SNAP_SSM] = "snap_ssm",
    [OA_R_CONV_STATE] = "conv_state",
    [OA_R_STATE_IN] = "state_in",
    [OA_R_STATE_OUT] = "state_out",
    [OA_R_TAB_RING] = "conv_ptrs",
    [OA_R_TAB_IN] = "in_ptrs",
    [OA_R_TAB_OUT] = "out_ptrs",
    [OA_R_TABLE] = "table",
    [OA_R_TABLE_J] = "table (journal)",
    [BI_R_STATE_CANON] = "canonical states",
    [BI_R_STATE_ALT] = "alternate states",
    [BI_R_RING] = "rings",
    [BI_R_JOURNAL] = "journals",
    [OA_R_COPY_TABLE] = "table (copies)",
    [OA_R_SRC_PTR] = "src_ptr",
    [OA_R_COPY_DST] = "dst (indirect copy)",
    [BI_R_COPY_SRC] = "copy sources",
    [BI_R_COPY_TARGET] = "copy targets",
};

/* The 1.2 copies' shape: three copies of 40 words (the indirect copy moves 40 words too). */
#define W_ITEMS ((size_t)3)
#define W_WORDS ((size_t)40)

/* The canonical states come first and the alternate states, rings and journals last: at least
 * as long as the longest output view (checked), they are the guard zones that keep an output
 * moved to overlap a neighbour inside the arena (and inside the comparison). */
static int region_at(int i)
{
    if (i == 0)
        return BI_R_STATE_CANON;
    if (i <= OA_N_SLOT_REGIONS)
        return i - 1;
    return i;
}

size_t bi_quantity(const bi_world *w, int op, int q)
{
    const size_t S = MEMRA_D_STATE, nk = w->suite->num_k, nv = w->suite->num_v;
    switch (q) {
    case OA_Q_S:
        return S;
    case OA_Q_NK:
        return nk;
    case OA_Q_NV:
        return nv;
    case OA_Q_KEY:
        return S * nk;
    case OA_Q_VAL:
        return S * nv;
    case OA_Q_CONV:
        return 2 * S * nk + S * nv;
    case OA_Q_DCONV:
        return W_DCONV;
    case OA_Q_T:
        return W_T;
    case OA_Q_B:
        return W_B;
    case OA_Q_ROWS:
        return W_B * W_T;
    case OA_Q_MODE:
        return OA_OPS[op].mode;
    case BI_Q_KEY_VAL:
        return S * nk + S * nv;
    case OA_Q_ITEMS:
        return W_ITEMS;
    case OA_Q_WORDS:
        return W_WORDS;
    case OA_Q_ZERO:
        return 0;
    }
    return 0;
}

static bool in_suite(const bi_suite *suite, int op)
{
    return (suite->ops & BI_OP_BIT(op)) != 0;
}

/* The baseline scalars of `op`. */
static void base_scalars(const bi_world *w, int op, oa_values *v)
{
    for (int sc = 0; sc < OA_N_SC; sc++) {
        const int base = OA_OPS[op].base[sc] - 1;
        if (base < 0)
            continue;
        if (base == OA_Q_EPS)
            v->f[sc] = 1e-6f;
        else if (base == OA_Q_SCALE)
            v->f[sc] = TU_GDN_SCALE;
        else
            v->z[sc] = bi_quantity(w, op, base);
    }
}

static size_t slot_words(int op, int s, size_t len)
{
    return len * oa_elem(op, s) / sizeof(float);
}

static size_t ring_stride(const bi_world *w)
{
    /* Rings are spaced for the widest conv, so that a wrongly accepted d_conv = 9 still rolls
     * memory inside the arena (where the comparison sees it) instead of crashing the test. */
    return bi_quantity(w, 0, OA_Q_CONV) * (MEMRA_D_CONV_MAX + 1);
}

static size_t state_words(const bi_world *w)
{
    return MEMRA_D_STATE * MEMRA_D_STATE * w->suite->num_v;
}

static size_t journal_words(const bi_world *w)
{
    size_t n = 0;
    cr_assert_eq(memra_gdn_journal_len(MEMRA_D_STATE, w->suite->num_k, w->suite->num_v, W_T, &n),
                 MEMRA_STATUS_OK, "memra_gdn_journal_len: %s", memra_last_error_message());
    return n;
}

/* Sizes every region: the longest view any operation of the suite has there (as wide as
 * d_conv = 9 needs, for the case that gives it), and the table targets. Returns the longest
 * output view. */
static size_t size_regions(bi_world *w)
{
    size_t longest = 0;
    for (int op = 0; op < OA_N_OP; op++) {
        if (!in_suite(w->suite, op))
            continue;
        oa_values v = {0};
        base_scalars(w, op, &v);
        v.z[OA_SC_d_conv] = MEMRA_D_CONV_MAX + 1;
        for (int s = 0; s < OA_OPS[op].n; s++) {
            bool ovf = false;
            const int r = oa_slot_of(op, s)->region;
            const size_t words = slot_words(op, s, oa_need(op, s, v.z, &ovf));
            cr_assert(!ovf);
            if (words > w->region_words[r])
                w->region_words[r] = words;
            if (oa_is_output(op, s) && words > longest)
                longest = words;
        }
    }
    w->region_words[BI_R_STATE_CANON] = W_B * state_words(w);
    w->region_words[BI_R_STATE_ALT] = W_B * state_words(w);
    w->region_words[BI_R_RING] = W_B * ring_stride(w);
    if (w->region_words[OA_R_TABLE_J] > 0)
        w->region_words[BI_R_JOURNAL] = W_B * journal_words(w);
    if (w->region_words[OA_R_COPY_TABLE] > 0 || w->region_words[OA_R_SRC_PTR] > 0) {
        w->region_words[BI_R_COPY_SRC] = W_ITEMS * W_WORDS;
        w->region_words[BI_R_COPY_TARGET] = W_ITEMS * W_WORDS;
    }
    return longest;
}

uintptr_t bi_region_addr(const bi_world *w, int r)
{
    return (uintptr_t)w->arena.ptr + w->off[r] * sizeof(float);
}

static void put_u64(float *image, size_t word, uint64_t value)
{
    memcpy(&image[word], &value, sizeof value);
}

static void put_u32(float *image, size_t word, uint32_t value)
{
    memcpy(&image[word], &value, sizeof value);
}

/* Fresh random floats in [-0.5, 0.5): a block from the seed's generator, repeated with the
 * block number mixed into the low mantissa bits (cheaper than drawing every word, which
 * matters when valgrind runs every case; a stray write still has to hit the exact bits of its
 * word to go unseen). */
#define FILL_BLOCK ((size_t)4096)

static void fill_random(float *out, size_t len, uint64_t seed)
{
    static float block[FILL_BLOCK];
    tu_varied(block, FILL_BLOCK, seed, 0.5f);
    for (size_t i = 0; i < len; i++) {
        uint32_t bits;
        memcpy(&bits, &block[i % FILL_BLOCK], sizeof bits);
        bits ^= (uint32_t)((i / FILL_BLOCK) & 0xff);
        memcpy(&out[i], &bits, sizeof bits);
    }
}

/* The tables' entries (every table region holds b_n rows of what its name says) and the
 * counts: empty journals and valid counts, so that the good calls succeed. */
static void fill_tables(bi_world *w)
{
    float *img = w->before;
    const size_t jw = w->region_words[BI_R_JOURNAL] / W_B;
    memset(img + w->off[BI_R_JOURNAL], 0, w->region_words[BI_R_JOURNAL] * sizeof(float));
    for (size_t b = 0; b < W_B; b++) {
        const uint64_t ring = bi_region_addr(w, BI_R_RING) + b * ring_stride(w) * sizeof(float);
        const uint64_t canon =
            bi_region_addr(w, BI_R_STATE_CANON) + b * state_words(w) * sizeof(float);
        const uint64_t alt = bi_region_addr(w, BI_R_STATE_ALT) + b * state_words(w) * sizeof(float);
        const uint64_t journal = bi_region_addr(w, BI_R_JOURNAL) + b * jw * sizeof(float);
        const uint64_t rows[][3] = {{ring, canon, alt}, {ring, canon, journal}};
        for (int i = 0; i < 3; i++) {
            if (w->region_words[OA_R_TABLE] > 0)
                put_u64(img, w->off[OA_R_TABLE] + 2 * (3 * b + i), rows[0][i]);
            if (w->region_words[OA_R_TABLE_J] > 0)
                put_u64(img, w->off[OA_R_TABLE_J] + 2 * (3 * b + i), rows[1][i]);
        }
        const int singles[] = {OA_R_TAB_RING, OA_R_TAB_IN, OA_R_TAB_OUT};
        for (int i = 0; i < 3; i++)
            if (w->region_words[singles[i]] > 0)
                put_u64(img, w->off[singles[i]] + 2 * b, rows[0][i]);
        if (w->region_words[OA_R_ACC_J] > 0)
            put_u32(img, w->off[OA_R_ACC_J] + b, 0);
        if (w->region_words[OA_R_ACC_R] > 0)
            put_u32(img, w->off[OA_R_ACC_R] + b, (uint32_t)(1 + b % W_T));
    }
    /* The copies: copy i from source i to target i, the indirect copy from source 0. */
    for (size_t i = 0; i < W_ITEMS && w->region_words[OA_R_COPY_TABLE] > 0; i++) {
        const uint64_t at = i * W_WORDS * sizeof(float);
        put_u64(img, w->off[OA_R_COPY_TABLE] + 2 * i, bi_region_addr(w, BI_R_COPY_SRC) + at);
        put_u64(img, w->off[OA_R_COPY_TABLE] + 2 * (W_ITEMS + i),
                bi_region_addr(w, BI_R_COPY_TARGET) + at);
    }
    if (w->region_words[OA_R_SRC_PTR] > 0)
        put_u64(img, w->off[OA_R_SRC_PTR], bi_region_addr(w, BI_R_COPY_SRC));
}

MemraStatus bi_empty_step(MemraEngine *e, void *user)
{
    return MEMRA_STATUS_OK;
}

/* The world graph's step: the suite's chain of operations, every operand in the arena. */
MemraStatus bi_world_step(MemraEngine *e, void *user)
{
    const bi_world *w = user;
    for (size_t i = 0; i < w->suite->n_chain; i++) {
        bi_call c;
        bi_base_call(w, e, w->suite->chain[i], &c);
        MemraStatus st = bi_invoke(&c);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    return MEMRA_STATUS_OK;
}

void bi_world_init(bi_world *w, const bi_suite *suite, MemraBackend backend, bool graph)
{
    memset(w, 0, sizeof *w);
    w->suite = suite;
    w->backend = backend;
    w->e = tu_engine(backend);
    const size_t longest = size_regions(w);
    size_t at = 0;
    for (int i = 0; i < BI_N_REGIONS; i++) {
        const int r = region_at(i);
        w->off[r] = at;
        /* 64 words = 256 bytes: every region starts as aligned as a fresh allocation. */
        at += (w->region_words[r] + 63) / 64 * 64;
    }
    w->words = at;
    cr_assert(longest <= w->region_words[BI_R_STATE_CANON] &&
                  longest <= w->region_words[BI_R_STATE_ALT],
              "the guard zones are shorter than the longest output view (%zu words)", longest);
    TU_OK(memra_alloc_f32(w->e, w->words, MEMRA_ALLOC_INIT_UNINIT, &w->arena));
    w->before = malloc(w->words * sizeof(float));
    w->after = malloc(w->words * sizeof(float));
    cr_assert(w->before && w->after);
    w->seed = tu_fresh_seed();
    fill_random(w->before, w->words, w->seed);
    fill_tables(w);
    MemraSliceF32 image = {w->before, w->words};
    TU_OK(memra_htod_f32_into(w->e, image, w->arena));
    if (!graph)
        return;
    TU_OK(memra_graph_capture(w->e, bi_world_step, w, &w->g));
    if (suite->flags & BI_SECOND_ENGINE) {
        w->e2 = tu_engine(backend);
        TU_OK(memra_graph_capture(w->e2, bi_empty_step, NULL, &w->g2));
    }
}

void bi_world_fini(bi_world *w)
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

void bi_snapshot(bi_world *w, float *into)
{
    MemraSliceMutF32 dst = {into, w->words};
    TU_OK(memra_dtoh_f32(w->e, tu_view(w->arena), dst));
}

void bi_base_call(const bi_world *w, MemraEngine *e, int op, bi_call *c)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->e = e;
    base_scalars(w, op, &c->v);
    for (int s = 0; s < OA_OPS[op].n; s++) {
        if (!oa_reads(op, s))
            continue;
        bool ovf = false;
        c->v.p[s] = bi_region_addr(w, oa_slot_of(op, s)->region);
        c->v.len[s] = oa_need(op, s, c->v.z, &ovf);
    }
}

void bi_call_args(const bi_call *c, MemraVerifyArgs *a)
{
    TU_OK(memra_verify_args_init(a));
    oa_fill_args(c->op, a, &c->v);
}

MemraStatus bi_invoke(const bi_call *c)
{
    if (OA_OPS[c->op].form == OA_FORM_POS)
        return oa_invoke(c->op, c->e, &c->v, NULL);
    MemraVerifyArgs a;
    bi_call_args(c, &a);
    return oa_invoke(c->op, c->e, &c->v, &a);
}

/* ---- Checks ---- */

MemraStatus bi_took(bi_world *w, MemraStatus st)
{
    snprintf(w->msg, sizeof w->msg, "%s", memra_last_error_message());
    return st;
}

/* Leaves a failure of another function as the thread's last message, so that a refusal that
 * forgets to record its own message cannot pass on a stale one. */
void bi_prime_message(const char *fn)
{
    if (strcmp(fn, "memra_engine_options_init") != 0)
        cr_assert_eq(memra_engine_options_init(NULL), MEMRA_STATUS_INVALID_ARGUMENT);
    else
        cr_assert_eq(memra_engine_stream(NULL, NULL), MEMRA_STATUS_INVALID_ARGUMENT);
}

void bi_check_refusal(const bi_world *w, const char *what, MemraStatus st, MemraStatus expect,
                      const char *fn, const char *params)
{
    cr_assert_eq(st, expect, "%s: returned %s, expected %s (message: \"%s\") " TU_SEED_FMT, what,
                 memra_status_string(st), memra_status_string(expect), w->msg, w->seed);
    cr_assert(tu_has_word(w->msg, fn), "%s: the message \"%s\" does not name %s", what, w->msg, fn);
    if (params != NULL && params[0] != '\0')
        cr_assert(tu_names_any(w->msg, params), "%s: the message \"%s\" names none of %s", what,
                  w->msg, params);
}

static const char *region_of(const bi_world *w, size_t word)
{
    for (int r = 0; r < BI_N_REGIONS; r++)
        if (word >= w->off[r] && word < w->off[r] + w->region_words[r])
            return region_name[r];
    return "the padding between regions";
}

void bi_check_untouched(bi_world *w, const char *what)
{
    bi_snapshot(w, w->after);
    const size_t first = tu_first_diff(w->before, w->after, w->words);
    if (first == w->words)
        return;
    cr_assert_fail("%s: a refused call changed %zu words of the arena, the first in %s (word "
                   "%zu) " TU_SEED_FMT,
                   what, tu_bit_diffs(w->before, w->after, w->words), region_of(w, first), first,
                   w->seed);
}

/* ---- Handles ---- */

/* Memory that holds no handle: a library that checks its handles reads a word that is not its
 * magic value and refuses. Word-aligned and larger than any handle. */
static uint64_t garbage_words[64];

void *bi_garbage(void)
{
    memset(garbage_words, 0xa5, sizeof garbage_words);
    return garbage_words;
}

MemraEngine *bi_engine_handle(bi_world *w, int h)
{
    switch (h) {
    case BI_H_NULL:
        return NULL;
    case BI_H_GARBAGE:
        return bi_garbage();
    case BI_H_OTHER_TYPE:
        return (MemraEngine *)(void *)w->g;
    }
    return w->e;
}

static const char *const handle_name[] = {"NULL", "garbage", "a graph handle"};

/* ---- Generated cases ---- */

enum {
    K_ENGINE,     /* arg: BI_H_* */
    K_NULL,       /* {NULL, len} with len > 0 */
    K_NULL_EMPTY, /* {NULL, 0} for a required view */
    K_EMPTY,      /* {ptr, 0} */
    K_SHORT,      /* one element short */
    K_MISALIGN,   /* arg: bytes added to the address */
    K_WRAP,       /* the view runs past the end of the address space */
    K_OVERLAP,    /* slot overlaps `other` in geometry `arg` */
    K_ZERO,       /* size scalar `slot` = 0 */
    K_NONFINITE,  /* float scalar `slot` = NaN, +inf, -inf (arg) */
    K_FIXUP,      /* arg: index into the suite's fixups */
    K_CUSTOM,     /* arg: index into the suite's customs */
};

enum {
    G_SAME,         /* both start at the same address */
    G_HEAD_ON_TAIL, /* the output's first element is the other's last */
    G_TAIL_ON_HEAD, /* the output's last element is the other's first */
    G_COUNT
};

static const char *const geom_name[G_COUNT] = {
    "at the same address", "starting on its last element", "ending on its first element"};

static const char *const sc_name[OA_N_SC] = {
    "d_state", "num_v",      "num_k", "key_dim", "conv_dim", "d_conv", "t",       "b_n",
    "mode",    "head_order", "eps",   "scale",   "n",        "words",  "dst_off",
};

static const float nonfinite[] = {NAN, INFINITY, -INFINITY};
static const char *const nonfinite_name[] = {"NaN", "+inf", "-inf"};

static bool overlap_wanted(const bi_suite *suite, int op, int s, int o, int g)
{
    if (g == G_SAME && oa_may_alias(op, s, o))
        return false;
    if (!(suite->flags & BI_ROTATE_GEOMETRIES) || suite->all_geometries(op, s, o))
        return true;
    return g == (s + o) % G_COUNT;
}

static size_t gen_cases(const bi_suite *suite, bi_case *out, MemraBackend backend)
{
    size_t n = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (out)                                                                                   \
            out[n] = (bi_case){__VA_ARGS__};                                                       \
        n++;                                                                                       \
    } while (0)
    for (int op = 0; op < OA_N_OP; op++) {
        if (!in_suite(suite, op))
            continue;
        for (int h = BI_H_NULL; h <= BI_H_OTHER_TYPE; h++)
            ADD(.op = op, .kind = K_ENGINE, .arg = h);
        for (int s = 0; s < OA_OPS[op].n; s++) {
            if (!oa_reads(op, s))
                continue;
            const int half = (int)oa_elem(op, s) / 2;
            ADD(.op = op, .kind = K_NULL, .slot = s);
            if (oa_slot_of(op, s)->kind != OA_K_OPT)
                ADD(.op = op, .kind = K_NULL_EMPTY, .slot = s);
            ADD(.op = op, .kind = K_EMPTY, .slot = s);
            ADD(.op = op, .kind = K_SHORT, .slot = s);
            ADD(.op = op, .kind = K_MISALIGN, .slot = s, .arg = 1);
            ADD(.op = op, .kind = K_MISALIGN, .slot = s, .arg = half);
            ADD(.op = op, .kind = K_WRAP, .slot = s);
            if (!oa_is_output(op, s))
                continue;
            for (int o = 0; o < OA_OPS[op].n; o++) {
                /* Two outputs are one pair: generate it once. */
                if (o == s || !oa_reads(op, o) || (oa_is_output(op, o) && o < s))
                    continue;
                for (int g = 0; g < G_COUNT; g++)
                    if (overlap_wanted(suite, op, s, o, g))
                        ADD(.op = op, .kind = K_OVERLAP, .slot = s, .other = o, .arg = g);
            }
        }
        for (int sc = 0; sc < OA_N_SC; sc++) {
            if (!OA_OPS[op].base[sc] || sc == OA_SC_mode || sc == OA_SC_head_order ||
                oa_zero_valid(op, sc))
                continue;
            if (!OA_SC_IS_FLOAT(sc))
                ADD(.op = op, .kind = K_ZERO, .slot = sc);
            else
                for (int i = 0; i < 3; i++)
                    ADD(.op = op, .kind = K_NONFINITE, .slot = sc, .arg = i);
        }
        for (size_t f = 0; f < suite->n_fixups; f++)
            if (suite->fixups[f].ops & BI_OP_BIT(op))
                ADD(.op = op, .kind = K_FIXUP, .arg = (int)f);
    }
    for (size_t i = 0; i < *suite->n_customs; i++) {
        if (backend != MEMRA_BACKEND_CPU && (suite->customs[i].flags & (BI_CC_ANY | BI_CC_CPU)))
            continue;
        ADD(.op = -1, .kind = K_CUSTOM, .arg = (int)i);
    }
#undef ADD
    return n;
}

/* The names a message may use for a slot: a single letter only in quotes (or, for a struct
 * field, after "->" or "."), since a bare letter would match any word. */
static void name_alts(const bi_suite *suite, char *buf, size_t size, const char *name)
{
    if (strlen(name) != 1)
        snprintf(buf, size, "%s", name);
    else if (suite->flags & BI_FIELD_NAMES)
        snprintf(buf, size, "'%s'|->%s|.%s", name, name, name);
    else
        snprintf(buf, size, "'%s'", name);
}

static void apply_fixup(const bi_world *w, const bi_fixup *x, bi_call *c)
{
    size_t *z = c->v.z;
    /* An all-zero entry ends the list (no rule sets d_state to its baseline). */
    for (int i = 0; i < 4 && x->set[i].sc + x->set[i].q + x->set[i].add != 0; i++) {
        const bi_set *st = &x->set[i];
        z[st->sc] = (st->q == BI_LIT ? 0 : bi_quantity(w, c->op, st->q)) + st->add;
    }
    if (x->flags & BI_FX_HEADS)
        z[OA_SC_key_dim] = z[OA_SC_d_state] * z[OA_SC_num_k];
    if (x->flags & (BI_FX_HEADS | BI_FX_CONV))
        z[OA_SC_conv_dim] = 2 * z[OA_SC_key_dim] + z[OA_SC_d_state] * z[OA_SC_num_v];
    const int ws = oa_slot_named(c->op, "w");
    if ((x->flags & BI_FX_FIT_W) && ws >= 0 && oa_reads(c->op, ws)) {
        bool ovf = false;
        c->v.len[ws] = oa_need(c->op, ws, z, &ovf);
    }
    for (int s = 0; s < OA_OPS[c->op].n && (x->flags & BI_FX_DROP); s++) {
        if (oa_slot_of(c->op, s)->kind == OA_K_OPT) {
            c->v.p[s] = 0;
            c->v.len[s] = 0;
        }
    }
}

static void apply_case(const bi_case *bc, bi_world *w, bi_call *c, MemraStatus *expect, char *what,
                       size_t what_size, char *params, size_t params_size)
{
    const oa_op *op = &OA_OPS[bc->op];
    const bool slot_case = bc->kind >= K_NULL && bc->kind <= K_OVERLAP;
    const char *sname = slot_case ? oa_slot_of(bc->op, bc->slot)->name
                        : bc->kind == K_ZERO || bc->kind == K_NONFINITE ? sc_name[bc->slot]
                                                                        : "";
    char fn[160];
    if (op->label != NULL)
        snprintf(fn, sizeof fn, "%s (%s)", op->fn, op->label);
    else
        snprintf(fn, sizeof fn, "%s", op->fn);
    uintptr_t *p = &c->v.p[bc->slot];
    size_t *len = &c->v.len[bc->slot];
    *expect = BI_INV;
    name_alts(w->suite, params, params_size, sname);

    switch (bc->kind) {
    case K_ENGINE:
        c->e = bi_engine_handle(w, bc->arg);
        snprintf(params, params_size, "engine");
        snprintf(what, what_size, "%s: engine %s", fn, handle_name[bc->arg]);
        break;
    case K_NULL:
        *p = 0;
        snprintf(what, what_size, "%s: %s = {NULL, %zu}", fn, sname, *len);
        break;
    case K_NULL_EMPTY:
        *p = 0;
        *len = 0;
        snprintf(what, what_size, "%s: required %s = {NULL, 0}", fn, sname);
        break;
    case K_EMPTY:
        *len = 0;
        snprintf(what, what_size, "%s: %s = {ptr, 0}", fn, sname);
        break;
    case K_SHORT:
        *len -= 1;
        snprintf(what, what_size, "%s: %s one element short (%zu)", fn, sname, *len);
        break;
    case K_MISALIGN:
        *p += (uintptr_t)bc->arg;
        snprintf(what, what_size, "%s: %s misaligned by %d bytes", fn, sname, bc->arg);
        break;
    case K_WRAP:
        *p = UINTPTR_MAX - 7;
        snprintf(what, what_size, "%s: %s at 2^64 - 8 (runs past the end of the address space)", fn,
                 sname);
        break;
    case K_OVERLAP: {
        const uintptr_t o_lo = c->v.p[bc->other];
        const uintptr_t o_hi = o_lo + c->v.len[bc->other] * oa_elem(bc->op, bc->other);
        const uintptr_t s_bytes = *len * oa_elem(bc->op, bc->slot);
        const char *oname = oa_slot_of(bc->op, bc->other)->name;
        if (bc->arg == G_SAME)
            *p = o_lo;
        else if (bc->arg == G_HEAD_ON_TAIL)
            *p = o_hi - sizeof(float);
        else
            *p = o_lo - s_bytes + sizeof(float);
        char oalt[64];
        name_alts(w->suite, oalt, sizeof oalt, oname);
        const size_t n = strlen(params);
        snprintf(params + n, params_size - n, "|%s", oalt);
        snprintf(what, what_size, "%s: output %s overlapping %s, %s", fn, sname, oname,
                 geom_name[bc->arg]);
        break;
    }
    case K_ZERO:
        c->v.z[bc->slot] = 0;
        snprintf(what, what_size, "%s: %s = 0", fn, sname);
        break;
    case K_NONFINITE:
        c->v.f[bc->slot] = nonfinite[bc->arg];
        snprintf(what, what_size, "%s: %s = %s", fn, sname, nonfinite_name[bc->arg]);
        break;
    case K_FIXUP: {
        const bi_fixup *x = &w->suite->fixups[bc->arg];
        apply_fixup(w, x, c);
        *expect = x->expect;
        snprintf(params, params_size, "%s", x->params ? x->params : "");
        snprintf(what, what_size, "%s: %s", fn, x->what);
        break;
    }
    }
}

static void free_cases(struct criterion_test_params *ctp)
{
    cr_free(ctp->params);
}

struct criterion_test_params bi_make_cases(const bi_suite *suite, MemraBackend backend)
{
    const size_t n = gen_cases(suite, NULL, backend);
    bi_case *cases = cr_malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_cases(suite, cases, backend);
    return cr_make_param_array(bi_case, cases, n, free_cases);
}

void bi_run_case(const bi_suite *suite, const bi_case *bc, MemraBackend backend)
{
    bi_world w;
    char what[512], params[256];
    int good_op = bc->op;

    if (bc->kind == K_CUSTOM) {
        const bi_custom *cc = &suite->customs[bc->arg];
        good_op = cc->op >= 0 ? cc->op : suite->good_op;
        bi_world_init(&w, suite, backend, (cc->flags & BI_CC_GRAPH) != 0);
        bi_snapshot(&w, w.before);
        snprintf(what, sizeof what, "%s: %s", cc->fn, cc->what);
        bi_prime_message(cc->fn);
        MemraStatus st = cc->run(&w, cc);
        bi_check_refusal(&w, what, st, cc->expect, cc->fn, cc->params);
        if (!(cc->flags & BI_CC_WRITES))
            bi_check_untouched(&w, what);
        if (w.g != NULL)
            TU_OK(memra_graph_launch(w.e, w.g));
    } else {
        const bool graph = bc->kind == K_ENGINE && bc->arg == BI_H_OTHER_TYPE;
        bi_world_init(&w, suite, backend, graph);
        bi_snapshot(&w, w.before);
        bi_call c;
        MemraStatus expect;
        bi_base_call(&w, w.e, bc->op, &c);
        apply_case(bc, &w, &c, &expect, what, sizeof what, params, sizeof params);
        bi_prime_message(OA_OPS[bc->op].fn);
        MemraStatus st = bi_took(&w, bi_invoke(&c));
        bi_check_refusal(&w, what, st, expect, OA_OPS[bc->op].fn, params);
        bi_check_untouched(&w, what);
    }
    /* The good call of the same operation (or the suite's, after a case of no operation) must
     * go through: the refusal was for the reason the case was built for, and left the engine
     * usable. */
    bi_call good;
    bi_base_call(&w, w.e, good_op, &good);
    MemraStatus st = bi_invoke(&good);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: the good call after the case returned %s (%s)", what,
                 memra_status_string(st), memra_last_error_message());
    st = memra_engine_synchronize(w.e);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s: synchronising after the good call returned %s (%s)",
                 what, memra_status_string(st), memra_last_error_message());
    bi_world_fini(&w);
}

void bi_good_calls(const bi_suite *suite, MemraBackend backend)
{
    bi_world w;
    bi_world_init(&w, suite, backend, true);
    for (int op = 0; op < OA_N_OP; op++) {
        if (!in_suite(suite, op))
            continue;
        bi_call c;
        bi_base_call(&w, w.e, op, &c);
        TU_OK(bi_invoke(&c));
        TU_OK(memra_engine_synchronize(w.e));
    }
    suite->good_calls(&w);
    TU_OK(memra_graph_launch(w.e, w.g));
    TU_OK(memra_engine_synchronize(w.e));
    bi_world_fini(&w);
}

/* Under valgrind and under compute-sanitizer every test process costs seconds to start, so
 * `make leakcheck` and `make memcheck` run the generated cases here, one after the other in a
 * single process per backend, instead of as the separate tests (which they filter out).
 * Enabled by MEMRA_TEST_SWEEP=1, skipped otherwise (the separate tests already run them). The
 * first failing case stops the sweep and names itself. */
void bi_sweep(const bi_suite *suite, MemraBackend backend, const char *separate)
{
    const char *on = getenv("MEMRA_TEST_SWEEP");
    if (on == NULL || strcmp(on, "1") != 0)
        cr_skip_test("the cases run as %s; MEMRA_TEST_SWEEP=1 runs them in one process (make "
                     "leakcheck and make memcheck do)",
                     separate);
    /* Skip (no CUDA device) before anything is allocated, so that the leak checks see none. */
    TU_OK(memra_engine_destroy(tu_engine(backend)));
    const size_t n = gen_cases(suite, NULL, backend);
    bi_case *cases = malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gen_cases(suite, cases, backend);
    for (size_t i = 0; i < n; i++)
        bi_run_case(suite, &cases[i], backend);
    free(cases);
}
