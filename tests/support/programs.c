/* The 1.0 programs every check compares against: packed (three launches over all rows) and
 * per-row (three launches per row), as the seed's engine runs them. */
#include "support.h"

#include <stdio.h>

const char *const tu_op_name[TU_OP_COUNT] = {
    "packed conv tloop", "packed prep", "packed scan tsnap", "packed scan tsnap (no snapshots)"};

MemraStatus tu_packed_op(MemraEngine *e, const MemraVerifyArgs *v, int op)
{
    const size_t key_dim = TU_KEY_DIM(v->num_k);
    const size_t conv_dim = TU_CONV_DIM(v->num_k, v->num_v);
    const MemraSliceMutF32 none = {NULL, 0};
    switch (op) {
    case TU_OP_CONV:
        return memra_ssm_conv1d_fused_decode_tloop(e, v->qkv, v->table, v->w, v->conv_outs,
                                                   v->snap_conv, conv_dim, v->d_conv, v->t, v->b_n);
    case TU_OP_PREP:
        return memra_gdn_prep_decode_b(e, tu_view(v->conv_outs), v->beta_raw, v->alpha, v->dt_bias,
                                       v->a, v->q_l2, v->k_l2, v->v_g, v->beta, v->g_log,
                                       MEMRA_D_STATE, v->num_v, v->num_k, key_dim, v->eps, conv_dim,
                                       v->b_n * v->t);
    case TU_OP_SCAN:
    case TU_OP_SCAN_NOSNAP:
        return memra_gdn_scan_s128_tsnap(e, tu_view(v->q_l2), tu_view(v->k_l2), tu_view(v->v_g),
                                         tu_view(v->g_log), tu_view(v->beta), v->table, v->o,
                                         v->num_v, v->t, v->b_n, v->scale,
                                         op == TU_OP_SCAN ? v->snap_ssm : none);
    }
    tu_fail("tu_packed_op: unknown operation %d", op);
}

MemraStatus tu_packed_program(MemraEngine *e, const MemraVerifyArgs *v, const char **failed)
{
    static const int ops[] = {TU_OP_CONV, TU_OP_PREP, TU_OP_SCAN};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        MemraStatus st = tu_packed_op(e, v, ops[i]);
        if (st != MEMRA_STATUS_OK) {
            if (failed != NULL)
                *failed = tu_op_name[ops[i]];
            return st;
        }
    }
    return MEMRA_STATUS_OK;
}

static MemraSliceF32 tu_row_of(MemraSliceF32 s, size_t r, size_t words)
{
    MemraSliceF32 v = {s.ptr + r * words, words};
    if ((r + 1) * words > s.len)
        tu_fail("tu_rows: row %zu of %zu words leaves a buffer of %zu", r, words, s.len);
    return v;
}

MemraStatus tu_rows_row(MemraEngine *e, const tu_rows *p, size_t r, const char **failed)
{
    const size_t B = p->b, cd = TU_CONV_DIM(p->num_k, p->num_v), nv = p->num_v;
    const size_t vd = TU_VALUE_DIM(p->num_v);
    /* Row r reads the buffer holding the state after r rows and writes the other one. */
    const bool from_canonical = tu_state_slot(r) == 1;
    const MemraSliceU64 rings = {p->table.ptr, B};
    const MemraSliceU64 in = {p->table.ptr + (from_canonical ? B : 2 * B), B};
    const MemraSliceU64 out = {p->table.ptr + (from_canonical ? 2 * B : 3 * B), B};
    const char *what = "per-row conv";
    MemraStatus st;

    if (p->table.len < 4 * B)
        tu_fail("tu_rows: a table of %zu entries for %zu sequences", p->table.len, B);
    st = memra_ssm_conv1d_fused_decode_b_view(e, tu_row_of(p->qkv, r, B * cd), rings, p->w,
                                              tu_sub_mut(p->conv_outs, r * B * cd, B * cd), cd,
                                              p->d_conv, B);
    if (st == MEMRA_STATUS_OK) {
        what = "per-row prep";
        st = memra_gdn_prep_decode_b_view(
            e, tu_sub(p->conv_outs, r * B * cd, B * cd), tu_row_of(p->beta_raw, r, B * nv),
            tu_row_of(p->alpha, r, B * nv), p->dt_bias, p->a, p->q, p->k, p->v, p->beta, p->g_log,
            MEMRA_D_STATE, nv, p->num_k, TU_KEY_DIM(p->num_k), p->eps, cd, B);
    }
    if (st == MEMRA_STATUS_OK) {
        what = "per-row scan";
        st = memra_gdn_scan_s128_batched_view(
            e, tu_view(p->q), tu_view(p->k), tu_view(p->v), tu_view(p->g_log), tu_view(p->beta), in,
            out, tu_sub_mut(p->o, r * B * vd, B * vd), nv, B, p->scale);
    }
    if (st != MEMRA_STATUS_OK && failed != NULL)
        *failed = what;
    return st;
}
