/*
 * Bad input (docs/bad-input.md), the operations: every exported operation refuses every class
 * of invalid argument with the documented status, a message naming the function and the
 * parameter, and without writing a single byte of any output, ring, state, journal, count or
 * table. The method and the generated per-slot cases are tests/bad_input/framework.h's; this
 * file holds the two suites, their shape rules and their controls.
 *
 * bad_input: the 1.0 operations (and the hand-written cases of the 1.0 entry points,
 * tests/test_bad_input_entry.c) on the suite's small shape (docs/layouts.md: num_k 2,
 * num_v 4), two sequences of two rows each.
 * bad_input_verify: the 1.1 operations (memra_gdn_verify in its three modes,
 * memra_gdn_journal_commit, memra_gdn_rollback, the single-sequence
 * memra_ssm_conv1d_fused_decode and memra_gdn_scan_s128) and the 1.1 entry points, on two key and
 * two value heads: smaller on purpose, since every case ends with a good call that runs, and the
 * arena is read back twice per case.
 */
#include <stdlib.h>
#include <string.h>

#include "bad_input/framework.h"

extern const bi_custom BI_ENTRY_10[], BI_ENTRY_11[];
extern const size_t BI_N_ENTRY_10, BI_N_ENTRY_11;

#define SET(name, q, add)                                                                          \
    {                                                                                              \
        OA_SC_##name, q, add                                                                       \
    }
#define LIT(name, value) SET(name, BI_LIT, value)

/* The suite of ABI version `ver` and its tests, Criterion suite `suite_name`: the version's
 * operations (OPS_<ver>), shape rules (FIXUPS_<ver>), hand-written entry-point cases
 * (BI_ENTRY_<ver>) and extra good calls (good_calls_<ver>), then the fields given. */
#define OPS_SUITE(ver, suite_name, ...)                                                            \
    static const bi_suite SUITE_##ver = {.name = #suite_name,                                      \
                                         .ops = OPS_##ver,                                         \
                                         .fixups = FIXUPS_##ver,                                   \
                                         .n_fixups = sizeof FIXUPS_##ver / sizeof FIXUPS_##ver[0], \
                                         .customs = BI_ENTRY_##ver,                                \
                                         .n_customs = &BI_N_ENTRY_##ver,                           \
                                         .good_calls = good_calls_##ver,                           \
                                         __VA_ARGS__};                                             \
    BI_SUITE_TESTS(suite_name, SUITE_##ver)

/* ---- 1.0 ---- */

#define OPS_CONV (BI_OP_BIT(OA_CONV_B) | BI_OP_BIT(OA_CONV_T))
#define OPS_PREP (BI_OP_BIT(OA_PREP_B) | BI_OP_BIT(OA_PREP_V))
#define OPS_SCAN (BI_OP_BIT(OA_SCAN_B) | BI_OP_BIT(OA_SCAN_T))
#define OPS_10 (OPS_CONV | OPS_PREP | OPS_SCAN)

/* The products named "wrap to 0" are 0 modulo 2^64: a library that multiplies without
 * checking sees zero-length requirements and accepts the baseline views. */
/* clang-format off */
static const bi_fixup FIXUPS_10[] = {
    {"d_conv = 9 with a w view long enough for it", OPS_CONV, BI_INV, "d_conv", BI_FX_FIT_W | BI_FX_DROP, {LIT(d_conv, MEMRA_D_CONV_MAX + 1)}},
    {"d_conv = SIZE_MAX", OPS_CONV, BI_INV, "d_conv", BI_FX_DROP, {LIT(d_conv, SIZE_MAX)}},
    {"conv_dim = 2^63, d_conv = 2 (rows and w wrap to 0)", OPS_CONV, BI_INV, "conv_dim", 0, {LIT(conv_dim, BI_P2(63)), LIT(d_conv, 2)}},
    {"conv_dim = 2^62 (conv_dim * d_conv wraps to 0)", OPS_CONV, BI_INV, "conv_dim", 0, {LIT(conv_dim, BI_P2(62))}},
    {"t = 2^63 (b_n * t wraps to 0)", BI_OP_BIT(OA_CONV_T), BI_INV, "'t'|b_n, t", BI_FX_DROP, {LIT(t, BI_P2(63))}},
    {"b_n = 2^63", OPS_CONV, BI_INV, "b_n", 0, {LIT(b_n, BI_P2(63))}},
    {"conv_dim = 2^60, d_conv = 8 (only the snapshot size overflows)", BI_OP_BIT(OA_CONV_T), BI_INV, "snap_conv|conv_dim|d_conv", 0, {LIT(conv_dim, BI_P2(60)), LIT(d_conv, 8)}},
    {"d_state = 64 with consistent key_dim and conv_dim", OPS_PREP, BI_UNS, "d_state", BI_FX_HEADS, {LIT(d_state, 64)}},
    {"d_state = 127 with consistent key_dim and conv_dim", OPS_PREP, BI_UNS, "d_state", BI_FX_HEADS, {LIT(d_state, 127)}},
    {"d_state = 1 with consistent key_dim and conv_dim", OPS_PREP, BI_UNS, "d_state", BI_FX_HEADS, {LIT(d_state, 1)}},
    {"num_k = 0 with key_dim = 0", OPS_PREP, BI_INV, "num_k", BI_FX_HEADS, {LIT(num_k, 0)}},
    {"num_v = 0 with conv_dim = 2 * key_dim", OPS_PREP, BI_INV, "num_v", BI_FX_HEADS, {LIT(num_v, 0)}},
    {"num_v = 4 not a multiple of num_k = 3", OPS_PREP, BI_INV, "num_v|num_k", BI_FX_HEADS, {LIT(num_k, 3)}},
    {"num_v = 3 not a multiple of num_k = 2", OPS_PREP, BI_INV, "num_v|num_k", BI_FX_HEADS, {LIT(num_v, 3)}},
    {"key_dim = 128 for num_k = 2", OPS_PREP, BI_INV, "key_dim", BI_FX_CONV, {LIT(key_dim, 128)}},
    {"key_dim = 255 for num_k = 2", OPS_PREP, BI_INV, "key_dim", BI_FX_CONV, {LIT(key_dim, 255)}},
    {"key_dim = 257 for num_k = 2", OPS_PREP, BI_INV, "key_dim|conv_dim", 0, {LIT(key_dim, 257)}},
    {"conv_dim one less than 2 * key_dim + value_dim", OPS_PREP, BI_INV, "conv_dim", 0, {SET(conv_dim, OA_Q_CONV, (size_t)-1)}},
    {"conv_dim one more than 2 * key_dim + value_dim", OPS_PREP, BI_INV, "conv_dim|conv_out", 0, {SET(conv_dim, OA_Q_CONV, 1)}},
    {"conv_dim = key_dim + value_dim", OPS_PREP, BI_INV, "conv_dim", 0, {SET(conv_dim, BI_Q_KEY_VAL, 0)}},
    /* b_n * conv_dim, b_n * num_v and b_n * num_v * d_state are all 0 modulo 2^64. */
    {"b_n = 2^62 (every row product wraps to 0)", OPS_PREP, BI_INV, "b_n", 0, {LIT(b_n, BI_P2(62))}},
    /* d_state * num_v is the world's value_dim modulo 2^64: conv_dim looks consistent. */
    {"num_v = 2^57 + num_v (d_state * num_v wraps to a consistent value)", OPS_PREP, BI_INV, "num_v", 0, {SET(num_v, OA_Q_NV, BI_P2(57))}},
    {"num_k = num_v = 2^62, key_dim = conv_dim = 0 (d_state * num_k wraps to 0)", OPS_PREP, BI_INV, "num_k|key_dim", 0, {LIT(num_k, BI_P2(62)), LIT(num_v, BI_P2(62)), LIT(key_dim, 0), LIT(conv_dim, 0)}},
    {"num_v = 2^57 (b_n * num_v * 128 wraps to 0)", OPS_SCAN, BI_INV, "num_v", 0, {LIT(num_v, BI_P2(57))}},
    {"t = 2^62 (b_n * t * num_v wraps to 0)", BI_OP_BIT(OA_SCAN_T), BI_INV, "'t'|b_n, t", BI_FX_DROP, {LIT(t, BI_P2(62))}},
    {"b_n = 2^62", OPS_SCAN, BI_INV, "b_n", 0, {LIT(b_n, BI_P2(62))}},
    {"num_v = 2^50 (only the snapshot size overflows)", BI_OP_BIT(OA_SCAN_T), BI_INV, "snap_ssm|num_v", 0, {LIT(num_v, BI_P2(50))}},
};
/* clang-format on */

/* The documented exception to "outputs must not overlap" (the per-row scan in place), and
 * views that touch without overlapping (the outputs of the packed prep back to back). */
static void good_calls_10(bi_world *w)
{
    bi_call c;
    bi_base_call(w, w->e, OA_SCAN_B, &c);
    c.v.p[OA_SLOT(SCAN_B, out_ptrs)] = c.v.p[OA_SLOT(SCAN_B, in_ptrs)];
    TU_OK(bi_invoke(&c));
    bi_base_call(w, w->e, OA_PREP_B, &c);
    uintptr_t at = bi_region_addr(w, OA_R_SNAP_SSM);
    for (int s = OA_SLOT(PREP_B, q_l2); s < OA_OPS[OA_PREP_B].n; s++) {
        c.v.p[s] = at;
        at += c.v.len[s] * sizeof(float);
    }
    TU_OK(bi_invoke(&c));
}

static const int CHAIN_10[] = {OA_CONV_T, OA_PREP_B, OA_SCAN_T};

OPS_SUITE(10, bad_input, .num_k = 2, .num_v = 4, .flags = BI_SECOND_ENGINE, .chain = CHAIN_10,
          .n_chain = sizeof CHAIN_10 / sizeof CHAIN_10[0], .good_op = OA_CONV_B)

/* ---- 1.1 ---- */

#define OPS_VERIFY (BI_OP_BIT(OA_V_SNAP) | BI_OP_BIT(OA_V_FINAL) | BI_OP_BIT(OA_V_JOURNAL))
#define OPS_FOLD (OPS_VERIFY | BI_OP_BIT(OA_COMMIT))
#define OPS_T (OPS_VERIFY | BI_OP_BIT(OA_ROLLBACK))
#define OPS_SNAPS (BI_OP_BIT(OA_V_SNAP) | BI_OP_BIT(OA_ROLLBACK))
#define OPS_ARGS (OPS_FOLD | BI_OP_BIT(OA_ROLLBACK))
#define OPS_11 (OPS_ARGS | BI_OP_BIT(OA_CONV_1) | BI_OP_BIT(OA_SCAN_1))

/* clang-format off */
static const bi_fixup FIXUPS_11[] = {
    {"mode = 3", OPS_ARGS, BI_INV, "mode", 0, {LIT(mode, 3)}},
    {"mode = UINT32_MAX", OPS_ARGS, BI_INV, "mode", 0, {LIT(mode, UINT32_MAX)}},
    {"a commit with mode = SNAPSHOTS", BI_OP_BIT(OA_COMMIT), BI_INV, "mode", 0, {LIT(mode, MEMRA_VERIFY_MODE_SNAPSHOTS)}},
    {"a commit with mode = FINAL_ONLY", BI_OP_BIT(OA_COMMIT), BI_INV, "mode", 0, {LIT(mode, MEMRA_VERIFY_MODE_FINAL_ONLY)}},
    {"a rollback with mode = FINAL_ONLY", BI_OP_BIT(OA_ROLLBACK), BI_INV, "mode", 0, {LIT(mode, MEMRA_VERIFY_MODE_FINAL_ONLY)}},
    {"a rollback with mode = JOURNAL", BI_OP_BIT(OA_ROLLBACK), BI_INV, "mode", 0, {LIT(mode, MEMRA_VERIFY_MODE_JOURNAL)}},
    {"head_order = 2", OPS_FOLD, BI_INV, "head_order", 0, {LIT(head_order, 2)}},
    {"head_order = UINT32_MAX", OPS_FOLD, BI_INV, "head_order", 0, {LIT(head_order, UINT32_MAX)}},
    {"d_state = 64", OPS_ARGS, BI_UNS, "d_state", 0, {LIT(d_state, 64)}},
    {"d_state = 127", OPS_ARGS, BI_UNS, "d_state", 0, {LIT(d_state, 127)}},
    {"d_state = 1", OPS_ARGS, BI_UNS, "d_state", 0, {LIT(d_state, 1)}},
    /* conv_dim = 2 * 256 + 128 = 640, below the world's 768: every view stays long enough and
     * only the GQA rule breaks. */
    {"num_v = 1 not a multiple of num_k = 2", OPS_ARGS, BI_INV, "num_v|num_k", 0, {LIT(num_v, 1)}},
    {"d_conv = 9 with a w view long enough for it", OPS_ARGS, BI_INV, "d_conv", BI_FX_FIT_W, {LIT(d_conv, MEMRA_D_CONV_MAX + 1)}},
    {"d_conv = SIZE_MAX", OPS_ARGS, BI_INV, "d_conv", 0, {LIT(d_conv, SIZE_MAX)}},
    /* b_n * t * conv_dim, b_n * 3 and every other b_n product are 0 modulo 2^64. */
    {"b_n = 2^62 (every b_n product wraps to 0)", OPS_ARGS, BI_INV, NULL, 0, {LIT(b_n, BI_P2(62))}},
    {"t = 2^62 (b_n * t * num_v wraps to 0)", OPS_T, BI_INV, NULL, 0, {LIT(t, BI_P2(62))}},
    /* d_state * num_v wraps to the world's value_dim. */
    {"num_v = 2^57 + num_v (d_state * num_v wraps to value_dim)", OPS_ARGS, BI_INV, NULL, 0, {SET(num_v, OA_Q_NV, BI_P2(57))}},
    {"num_k = num_v = 2^62 (d_state * num_k wraps to 0)", OPS_ARGS, BI_INV, NULL, 0, {LIT(num_k, BI_P2(62)), LIT(num_v, BI_P2(62))}},
    {"num_v = 2^50 (the state snapshot size overflows)", OPS_SNAPS, BI_INV, NULL, 0, {LIT(num_v, BI_P2(50))}},
    /* The single-sequence ops. */
    {"d_conv = 9 with a w view long enough for it", BI_OP_BIT(OA_CONV_1), BI_INV, "d_conv", BI_FX_FIT_W, {LIT(d_conv, MEMRA_D_CONV_MAX + 1)}},
    {"d_conv = SIZE_MAX", BI_OP_BIT(OA_CONV_1), BI_INV, "d_conv", 0, {LIT(d_conv, SIZE_MAX)}},
    {"conv_dim = 2^63, d_conv = 2 (w wraps to 0)", BI_OP_BIT(OA_CONV_1), BI_INV, "[conv_dim, d_conv]", 0, {LIT(conv_dim, BI_P2(63)), LIT(d_conv, 2)}},
    {"conv_dim = 2^62 (conv_dim * d_conv wraps to 0)", BI_OP_BIT(OA_CONV_1), BI_INV, "[conv_dim, d_conv]", 0, {LIT(conv_dim, BI_P2(62))}},
    {"num_v = 2^57 (t * num_v * 128 wraps to 0)", BI_OP_BIT(OA_SCAN_1), BI_INV, "[t, num_v, 128]", 0, {LIT(num_v, BI_P2(57))}},
    {"t = 2^62 (t * num_v * 128 wraps to 0)", BI_OP_BIT(OA_SCAN_1), BI_INV, "[t, num_v, 128]", 0, {LIT(t, BI_P2(62))}},
    {"num_v = 2^50 (only the state size overflows)", BI_OP_BIT(OA_SCAN_1), BI_INV, "[num_v, 128, 128]", 0, {LIT(num_v, BI_P2(50))}},
};
/* clang-format on */

/* o, the one required output of every verify, and the journal's counts meet every other
 * slice in all three geometries. */
static bool all_geometries_11(int op, int slot, int other)
{
    return strcmp(oa_slot_of(op, slot)->name, "o") == 0 || oa_slot_of(op, other)->kind == OA_K_U32;
}

/* Optional outputs left out, the outputs back to back without a gap (touching is not
 * overlapping), the grouped head order, memra_gdn_journal_len and the count copies. */
static void good_calls_11(bi_world *w)
{
    bi_call c;
    bi_base_call(w, w->e, OA_V_SNAP, &c);
    for (int s = OA_SLOT(V_SNAP, conv_outs); s <= OA_SLOT(V_SNAP, g_log); s++)
        c.v.p[s] = c.v.len[s] = 0;
    TU_OK(bi_invoke(&c));
    bi_base_call(w, w->e, OA_V_FINAL, &c);
    uintptr_t at = bi_region_addr(w, OA_R_SNAP_SSM);
    for (int s = OA_SLOT(V_FINAL, o); s <= OA_SLOT(V_FINAL, g_log); s++) {
        c.v.p[s] = at;
        at += c.v.len[s] * sizeof(float);
    }
    TU_OK(bi_invoke(&c));
    /* A journal holds the rows of the head order it was written with, and a verify of the other
     * order refuses it: the grouped call starts from empty journals again. */
    TU_OK(memra_engine_synchronize(w->e));
    {
        const size_t words = w->region_words[BI_R_JOURNAL];
        float *zeros = calloc(words, sizeof *zeros);
        cr_assert_not_null(zeros);
        TU_OK(memra_htod_f32_into(
            w->e, (MemraSliceF32){zeros, words},
            (MemraSliceMutF32){(float *)bi_region_addr(w, BI_R_JOURNAL), words}));
        free(zeros);
    }
    bi_base_call(w, w->e, OA_V_JOURNAL, &c);
    c.v.z[OA_SC_head_order] = MEMRA_HEAD_ORDER_GROUPED;
    TU_OK(bi_invoke(&c));
    TU_OK(memra_engine_synchronize(w->e));

    size_t len = 0;
    TU_OK(memra_gdn_journal_len(MEMRA_D_STATE, w->suite->num_k, w->suite->num_v, 2, &len));
    cr_assert(len > 0);
    MemraSliceMutU32 counts;
    TU_OK(memra_alloc_u32(w->e, 2, MEMRA_ALLOC_INIT_ZEROED, &counts));
    const uint32_t host[2] = {7, 9};
    uint32_t back[2] = {0, 0};
    MemraSliceU32 src = {host, 2};
    TU_OK(memra_htod_u32_into(w->e, src, counts));
    MemraSliceMutU32 dst = {back, 2};
    TU_OK(memra_dtoh_u32(w->e, tu_view_u32(counts), dst));
    cr_assert(back[0] == 7 && back[1] == 9, "memra_dtoh_u32 read back %u, %u, not 7, 9", back[0],
              back[1]);
    tu_free(w->e, counts.ptr);

    /* The single-sequence ops: the state updated in place, and no ring at all for d_conv 1. */
    bi_base_call(w, w->e, OA_SCAN_1, &c);
    c.v.p[OA_SLOT(SCAN_1, state_out)] = c.v.p[OA_SLOT(SCAN_1, state_in)];
    TU_OK(bi_invoke(&c));
    bi_base_call(w, w->e, OA_CONV_1, &c);
    c.v.z[OA_SC_d_conv] = 1;
    c.v.len[OA_SLOT(CONV_1, w)] = c.v.z[OA_SC_conv_dim];
    c.v.p[OA_SLOT(CONV_1, conv_state)] = c.v.len[OA_SLOT(CONV_1, conv_state)] = 0;
    TU_OK(bi_invoke(&c));
}

OPS_SUITE(11, bad_input_verify, .num_k = 2, .num_v = 2,
          .flags = BI_FIELD_NAMES | BI_ROTATE_GEOMETRIES, .good_op = OA_V_SNAP,
          .all_geometries = all_geometries_11)

/* ---- 1.2: the state copies ---- */

#define OPS_12 (BI_OP_BIT(OA_COPY_BATCH) | BI_OP_BIT(OA_COPY_INDIRECT))

/* clang-format off */
static const bi_fixup FIXUPS_12[] = {
    {"n = 2^63 (2 * n wraps to 0)", BI_OP_BIT(OA_COPY_BATCH), BI_INV, "n|table", 0, {LIT(n, BI_P2(63))}},
    {"n = 2^62 (the table's 2 * n * 8 bytes wrap to 0)", BI_OP_BIT(OA_COPY_BATCH), BI_INV, "table", 0, {LIT(n, BI_P2(62))}},
    {"words = 2^62 (a copy's words * 4 bytes wrap to 0)", BI_OP_BIT(OA_COPY_BATCH), BI_INV, "words", 0, {LIT(words, BI_P2(62))}},
    {"dst_off = SIZE_MAX (dst_off + n wraps)", BI_OP_BIT(OA_COPY_INDIRECT), BI_INV, "dst_off", 0, {LIT(dst_off, SIZE_MAX)}},
    {"dst_off = 1 with dst one element short of dst_off + n", BI_OP_BIT(OA_COPY_INDIRECT), BI_INV, "dst", 0, {LIT(dst_off, 1)}},
    {"n = 2^62 (dst's n * 4 bytes wrap to 0)", BI_OP_BIT(OA_COPY_INDIRECT), BI_INV, "dst", 0, {LIT(n, BI_P2(62))}},
};
/* clang-format on */

/* What only the device sees: every copy of the call given a bad address. Each copy must be
 * skipped (the arena comparison sees any word written), the next synchronising call must
 * report it, and the table is restored afterwards so that the good call runs. */
enum { BAD_SRC_NULL, BAD_DST_MISALIGNED, BAD_DST_ON_TABLE };

static MemraStatus cc_bad_entries(bi_world *w, const bi_custom *cc)
{
    bi_call c;
    bi_base_call(w, w->e, cc->op, &c);
    const bool batch = cc->op == OA_COPY_BATCH;
    const size_t n = batch ? c.v.z[OA_SC_n] : 1;
    uint64_t *table = (uint64_t *)c.v.p[0];
    uint64_t bad[2 * 8], orig[2 * 8];
    cr_assert(2 * n <= 8);
    MemraSliceMutU64 entries = {table, batch ? 2 * n : 1};
    TU_OK(memra_dtoh_u64(w->e, (MemraSliceU64){table, entries.len},
                         (MemraSliceMutU64){orig, entries.len}));
    memcpy(bad, orig, entries.len * sizeof *bad);
    for (size_t i = 0; i < n; i++) {
        if (cc->sub == BAD_SRC_NULL)
            bad[i] = 0;
        else if (cc->sub == BAD_DST_MISALIGNED)
            bad[n + i] += 2;
        else
            bad[n + i] = (uint64_t)(uintptr_t)table;
    }
    TU_OK(memra_htod_u64_into(w->e, (MemraSliceU64){bad, entries.len}, entries));
    TU_OK(bi_invoke(&c));
    MemraStatus st = bi_took(w, memra_engine_synchronize(w->e));
    TU_OK(memra_htod_u64_into(w->e, (MemraSliceU64){orig, entries.len}, entries));
    return st;
}

static const bi_custom BI_ENTRY_12[] = {
    {"memra_engine_synchronize", OA_COPY_BATCH, BAD_SRC_NULL, BI_INV, "table", 0,
     "memra_copy_batch_uniform_f32 with NULL sources in the table", cc_bad_entries},
    {"memra_engine_synchronize", OA_COPY_BATCH, BAD_DST_MISALIGNED, BI_INV, "table", 0,
     "memra_copy_batch_uniform_f32 with misaligned destinations", cc_bad_entries},
    {"memra_engine_synchronize", OA_COPY_BATCH, BAD_DST_ON_TABLE, BI_INV, "table", 0,
     "memra_copy_batch_uniform_f32 with destinations on the table", cc_bad_entries},
    {"memra_engine_synchronize", OA_COPY_INDIRECT, BAD_SRC_NULL, BI_INV, "src_ptr", 0,
     "memra_copy_indirect_src_f32 with a NULL source", cc_bad_entries},
};
static const size_t BI_N_ENTRY_12 = sizeof BI_ENTRY_12 / sizeof BI_ENTRY_12[0];

/* A copy in place (a source that is its destination) and the indirect copy at an offset, its
 * table right before the part written (only that part counts for the overlap rules). */
static void good_calls_12(bi_world *w)
{
    bi_call c;
    bi_base_call(w, w->e, OA_COPY_BATCH, &c);
    uint64_t *table = (uint64_t *)c.v.p[0];
    const size_t n = c.v.z[OA_SC_n];
    uint64_t host[2 * 8];
    cr_assert(2 * n <= 8);
    TU_OK(memra_dtoh_u64(w->e, (MemraSliceU64){table, 2 * n}, (MemraSliceMutU64){host, 2 * n}));
    const uint64_t first_dst = host[n];
    host[n] = host[0];
    TU_OK(
        memra_htod_u64_into(w->e, (MemraSliceU64){host, 2 * n}, (MemraSliceMutU64){table, 2 * n}));
    TU_OK(bi_invoke(&c));
    host[n] = first_dst;
    TU_OK(
        memra_htod_u64_into(w->e, (MemraSliceU64){host, 2 * n}, (MemraSliceMutU64){table, 2 * n}));
    TU_OK(memra_engine_synchronize(w->e));

    bi_base_call(w, w->e, OA_COPY_INDIRECT, &c);
    const int dst = OA_SLOT(COPY_INDIRECT, dst), src_ptr = OA_SLOT(COPY_INDIRECT, src_ptr);
    const uint64_t source = bi_region_addr(w, BI_R_COPY_SRC);
    MemraSliceMutU64 entry = {(uint64_t *)c.v.p[dst], 1};
    TU_OK(memra_htod_u64_into(w->e, (MemraSliceU64){&source, 1}, entry));
    c.v.p[src_ptr] = c.v.p[dst];
    c.v.z[OA_SC_dst_off] = 2;
    c.v.z[OA_SC_n] -= 2;
    TU_OK(bi_invoke(&c));
}

OPS_SUITE(12, bad_input_copy, .num_k = 1, .num_v = 1, .good_op = OA_COPY_BATCH)
