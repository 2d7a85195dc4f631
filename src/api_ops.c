/*
 * Exported entry points: the GDN operations. Each validates (src/validate.c, shared by both
 * backends), then enqueues its kernel under its id of the operation table (src/ops.def). The
 * per-row and the packed form of an operation reach the same kernel with the same argument
 * struct.
 */
#include "engine.h"
#include "status.h"
#include "validate.h"

static const MemraSliceU64 no_table = {NULL, 0};
static const MemraSliceMutF32 no_snapshots = {NULL, 0};

MEMRA__EXPORT MemraStatus memra_ssm_conv1d_fused_decode_b_view(
    MemraEngine *engine, MemraSliceF32 qkv, MemraSliceU64 conv_ptrs, MemraSliceF32 w,
    MemraSliceMutF32 conv_out, size_t conv_dim, size_t d_conv, size_t b_n)
{
    MEMRA__ENTER(engine);
    memra__conv_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_conv(__func__, false, qkv, conv_ptrs, w, conv_out, no_snapshots,
                                    conv_dim, d_conv, 1, b_n, &args));
    return memra__enqueue_conv(engine, MEMRA__OP_CONV_B, &args);
}

MEMRA__EXPORT MemraStatus memra_ssm_conv1d_fused_decode_tloop(
    MemraEngine *engine, MemraSliceF32 qkv, MemraSliceU64 table, MemraSliceF32 w,
    MemraSliceMutF32 conv_outs, MemraSliceMutF32 snap_conv, size_t conv_dim, size_t d_conv,
    size_t t, size_t b_n)
{
    MEMRA__ENTER(engine);
    memra__conv_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_conv(__func__, true, qkv, table, w, conv_outs, snap_conv, conv_dim,
                                    d_conv, t, b_n, &args));
    return memra__enqueue_conv(engine, MEMRA__OP_CONV_T, &args);
}

/* Both prep names are the same operation; memra-engine has a slice and a view flavour. */
static MemraStatus prep(const char *fn, memra__op op, MemraEngine *engine, MemraSliceF32 conv_out,
                        MemraSliceF32 beta_raw, MemraSliceF32 alpha, MemraSliceF32 dt_bias,
                        MemraSliceF32 a, MemraSliceMutF32 q_l2, MemraSliceMutF32 k_l2,
                        MemraSliceMutF32 v_g, MemraSliceMutF32 beta, MemraSliceMutF32 g_log,
                        size_t d_state, size_t num_v, size_t num_k, size_t key_dim, float eps,
                        size_t conv_dim, size_t b_n)
{
    memra__prep_args args;
    MEMRA__TRY(memra__check_engine(fn, engine));
    MEMRA__TRY(memra__validate_prep(fn, conv_out, beta_raw, alpha, dt_bias, a, q_l2, k_l2, v_g,
                                    beta, g_log, d_state, num_v, num_k, key_dim, eps, conv_dim, b_n,
                                    &args));
    return memra__enqueue_prep(engine, op, &args);
}

/* Both exported prep names have the same signature and body, so one definition serves both
 * and they cannot drift apart; __func__ is still each function's own name in messages. */
#define MEMRA__PREP_ENTRY(name, op)                                                                \
    MEMRA__EXPORT MemraStatus name(                                                                \
        MemraEngine *engine, MemraSliceF32 conv_out, MemraSliceF32 beta_raw, MemraSliceF32 alpha,  \
        MemraSliceF32 dt_bias, MemraSliceF32 a, MemraSliceMutF32 q_l2, MemraSliceMutF32 k_l2,      \
        MemraSliceMutF32 v_g, MemraSliceMutF32 beta, MemraSliceMutF32 g_log, size_t d_state,       \
        size_t num_v, size_t num_k, size_t key_dim, float eps, size_t conv_dim, size_t b_n)        \
    {                                                                                              \
        MEMRA__ENTER(engine);                                                                      \
        return prep(__func__, MEMRA__OP_##op, engine, conv_out, beta_raw, alpha, dt_bias, a, q_l2, \
                    k_l2, v_g, beta, g_log, d_state, num_v, num_k, key_dim, eps, conv_dim, b_n);   \
    }

MEMRA__PREP_ENTRY(memra_gdn_prep_decode_b, PREP_B)
MEMRA__PREP_ENTRY(memra_gdn_prep_decode_b_view, PREP_V)

MEMRA__EXPORT MemraStatus memra_gdn_scan_s128_batched_view(
    MemraEngine *engine, MemraSliceF32 q, MemraSliceF32 k, MemraSliceF32 v, MemraSliceF32 g_log,
    MemraSliceF32 beta, MemraSliceU64 in_ptrs, MemraSliceU64 out_ptrs, MemraSliceMutF32 o,
    size_t num_v, size_t b_n, float scale)
{
    MEMRA__ENTER(engine);
    memra__scan_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_scan(__func__, false, q, k, v, g_log, beta, in_ptrs, out_ptrs, o,
                                    no_snapshots, num_v, 1, b_n, scale, &args));
    return memra__enqueue_scan(engine, MEMRA__OP_SCAN_B, &args);
}

MEMRA__EXPORT MemraStatus memra_gdn_scan_s128_tsnap(MemraEngine *engine, MemraSliceF32 q,
                                                    MemraSliceF32 k, MemraSliceF32 v,
                                                    MemraSliceF32 g_log, MemraSliceF32 beta,
                                                    MemraSliceU64 table, MemraSliceMutF32 o_all,
                                                    size_t num_v, size_t t, size_t b_n, float scale,
                                                    MemraSliceMutF32 snap_ssm)
{
    MEMRA__ENTER(engine);
    memra__scan_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_scan(__func__, true, q, k, v, g_log, beta, table, no_table, o_all,
                                    snap_ssm, num_v, t, b_n, scale, &args));
    /* The packed scan reads canonical once and writes where the per-row chain would leave the
     * state after t rows (the parity rule, memra__final_slot). */
    args.in_table = table.ptr + 1;
    args.out_table = table.ptr + memra__final_slot(t);
    args.in_stride = MEMRA_TABLE_WIDTH;
    args.out_stride = MEMRA_TABLE_WIDTH;
    return memra__enqueue_scan(engine, MEMRA__OP_SCAN_T, &args);
}

MEMRA__EXPORT MemraStatus memra_ssm_conv1d_fused_decode(MemraEngine *engine, MemraSliceF32 qkv,
                                                        MemraSliceMutF32 conv_state,
                                                        MemraSliceF32 w, MemraSliceMutF32 conv_out,
                                                        size_t conv_dim, size_t d_conv)
{
    MEMRA__ENTER(engine);
    memra__conv_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_conv_direct(__func__, qkv, conv_state, w, conv_out, conv_dim, d_conv,
                                           &args));
    return memra__enqueue_conv(engine, MEMRA__OP_CONV_1, &args);
}

MEMRA__EXPORT MemraStatus memra_gdn_scan_s128(MemraEngine *engine, MemraSliceF32 q, MemraSliceF32 k,
                                              MemraSliceF32 v, MemraSliceF32 g_log,
                                              MemraSliceF32 beta, MemraSliceF32 state_in,
                                              MemraSliceMutF32 state_out, MemraSliceMutF32 o,
                                              size_t num_v, size_t t, float scale)
{
    MEMRA__ENTER(engine);
    memra__scan_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_scan_direct(__func__, q, k, v, g_log, beta, state_in, state_out, o,
                                           num_v, t, scale, &args));
    return memra__enqueue_scan(engine, MEMRA__OP_SCAN_1, &args);
}
