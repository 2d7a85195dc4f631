/*
 * The 1.0 scans' per-row arithmetic and the thread layout it is written for (gdn_scan.cu: the
 * packed, per-row and single-sequence scans run every row through scan_row_step below).
 * gdn_scan.cu's header comment explains the layout (8 threads carry 2 adjacent columns of one
 * head). The verify runs the same contract through gdn_rowloop.cuh's layout; the suite's memcmp
 * checks of the verify against the 1.0 program hold the two to the same bits.
 */
#ifndef MEMRA_GDN_SCAN_CUH
#define MEMRA_GDN_SCAN_CUH

#include "gdn_common.cuh"

/* Threads per column group, columns per group, state elements per thread and column. */
#define SCAN_GROUP 8
#define SCAN_NC 2
#define SCAN_ELEMS (MEMRA__S / SCAN_GROUP)
/* 4 warps = 32 columns per block, 4 blocks per head: at the production shape one sequence is
 * 128 blocks, one per multiprocessor of an H200; a batch of 32 is 4096 blocks. */
#define SCAN_WARPS 4
#define SCAN_THREADS (SCAN_WARPS * MEMRA__LANES)
#define SCAN_COLS (SCAN_THREADS / SCAN_GROUP * SCAN_NC)
#define SCAN_BLOCKS_PER_HEAD (MEMRA__S / SCAN_COLS)
/* Lines (of k, q, v, g_log, beta) the block prefetches per row: see gdn_scan_kernel. */
#define SCAN_PREFETCH_LINES 11

/* Four consecutive floats at p: one 16-byte load when VEC, four 4-byte ones otherwise. STREAM
 * loads with the evict-first hint (ld.global.cs), for lines the kernel reads once: the same
 * values, only their L2 policy differs. */
template <bool VEC, bool STREAM = false>
static __device__ __forceinline__ void load4(float *dst, const float *p)
{
    static_assert(VEC || !STREAM, "the streaming loads are 16-byte loads");
    if (VEC) {
        const float4 x = STREAM ? __ldcs((const float4 *)p) : *(const float4 *)p;
        dst[0] = x.x;
        dst[1] = x.y;
        dst[2] = x.z;
        dst[3] = x.w;
    } else {
#pragma unroll
        for (int u = 0; u < 4; u++)
            dst[u] = p[u];
    }
}

/* Writes this thread's 16 elements of one column; p points at its row 4j. STREAM stores with the
 * evict-first hint (st.global.cs), for snapshots that no later access of the kernel reads: the
 * same values at the same addresses, only their L2 policy differs. */
template <bool VEC, bool STREAM = false>
static __device__ __forceinline__ void store_column(float *p, const float *s)
{
    static_assert(VEC || !STREAM, "the streaming stores are 16-byte stores");
#pragma unroll
    for (int r = 0; r < 4; r++) {
        float *d = p + r * MEMRA__LANES;
        if (STREAM) {
            __stcs((float4 *)d, make_float4(s[4 * r], s[4 * r + 1], s[4 * r + 2], s[4 * r + 3]));
        } else if (VEC) {
            *(float4 *)d = make_float4(s[4 * r], s[4 * r + 1], s[4 * r + 2], s[4 * r + 3]);
        } else {
#pragma unroll
            for (int u = 0; u < 4; u++)
                d[u] = s[4 * r + u];
        }
    }
}

/*
 * The contract's 32-lane sum of a column's dot product of s and x, where this thread is lanes
 * 4j .. 4j + 3. Each lane's fma chain over r starts from 0.0f; then come the tree levels
 * (stride 16, 8, 4, 2, 1: lane L adds lane L + stride), each addition with exactly the
 * contract's two operands. The 8 threads of the group share the work of every level instead
 * of leaving half of them idle, so a level costs one or two shuffles rather than one per value:
 *
 *   16: threads j and j ^ 4 hold lanes 4j' + u and 4j' + 16 + u (j' = j & 3). Each keeps two of
 *       its four partials, sends the other two, and adds what it receives: j < 4 ends with the
 *       sums of lanes 4j, 4j + 1, j >= 4 with those of lanes 4j' + 2, 4j' + 3 (2 shuffles).
 *   8:  the sums of lanes L and L + 8 sit in threads j and j ^ 2, one keeps the first, the other
 *       the second (1 shuffle); thread j now holds lane 4(j & 1) + 2(j >> 2) + ((j >> 1) & 1).
 *   4, 2, 1: lanes L and L + 4 are threads j and j ^ 1, then L and L + 2 are j and j ^ 4, then
 *       lanes 0 and 1 are j and j ^ 2 (1 shuffle each). Both threads of a pair add the same two
 *       values (IEEE addition is commutative), so every thread ends with the total's bits.
 *
 * Every thread of the group returns the total: the tree's value at lane 0. That is also what
 * the contract's butterfly all-reduce (used for kv: for o = 16 .. 1 every lane adds lane L xor o)
 * leaves in every lane: at each step the lanes below o hold exactly the tree's values, and both
 * partners of a pair add the same two operands.
 */
static __device__ __forceinline__ float column_sum(const float *s, const float *x, unsigned j)
{
    float p[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
        p[u] = 0.0f;
#pragma unroll
        for (int r = 0; r < 4; r++)
            p[u] = __fmaf_rn(s[4 * r + u], x[4 * r + u], p[u]);
    }
    const bool upper = (j & 4u) != 0;
    const float keep0 = upper ? p[2] : p[0], keep1 = upper ? p[3] : p[1];
    const float send0 = upper ? p[0] : p[2], send1 = upper ? p[1] : p[3];
    const float a0 = __fadd_rn(keep0, __shfl_xor_sync(MEMRA__FULL_MASK, send0, 4));
    const float a1 = __fadd_rn(keep1, __shfl_xor_sync(MEMRA__FULL_MASK, send1, 4));

    const bool second = (j & 2u) != 0;
    const float keep = second ? a1 : a0, send = second ? a0 : a1;
    float y = __fadd_rn(keep, __shfl_xor_sync(MEMRA__FULL_MASK, send, 2));

    y = __fadd_rn(y, __shfl_xor_sync(MEMRA__FULL_MASK, y, 1));
    y = __fadd_rn(y, __shfl_xor_sync(MEMRA__FULL_MASK, y, 4));
    y = __fadd_rn(y, __shfl_xor_sync(MEMRA__FULL_MASK, y, 2));
    return y;
}

/* One row's inputs for this thread: its 16 elements of k and q, the v of its columns, g_log
 * and beta of the head. */
typedef struct scan_row {
    float k[SCAN_ELEMS], q[SCAN_ELEMS];
    float v[SCAN_NC];
    float g, beta;
} scan_row;

/*
 * One row of this thread's columns (docs/arithmetic.md, "Scan") with the row's inputs in `in`: the
 * state update in s, o[c] (written by thread 0 of the group) and, when sn is not NULL, the
 * post-row state to sn. The operations are written with explicit rounding intrinsics in exactly
 * the form nvcc -O3 gives the contract's expressions (v - gd * kv is one fma, then a multiply by
 * beta; gd * s + k * delta is a multiply, then an fma), so that no copy of this code (the two
 * kernel instantiations) can be compiled differently from another: every row of every call
 * computes the same bits, and the same bits as the 1.0.0 kernel that compiled the expressions
 * (memra_bench --mode hash).
 */
template <bool VEC, bool STREAM = false>
static __device__ __forceinline__ void scan_row_step(float (&s)[SCAN_NC][SCAN_ELEMS],
                                                     const scan_row &in, unsigned j, float scale,
                                                     float *op, float *sn)
{
    const float gd = expf(in.g);
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++) {
        const float kv = column_sum(s[n], in.k, j);
        const float delta = __fmul_rn(__fmaf_rn(-gd, kv, in.v[n]), in.beta);
#pragma unroll
        for (int e = 0; e < SCAN_ELEMS; e++)
            s[n][e] = __fmaf_rn(gd, s[n][e], __fmul_rn(in.k[e], delta));
        const float at = column_sum(s[n], in.q, j);
        /* A journal fold runs rows whose outputs were already produced: op is NULL then. */
        if (j == 0 && op != nullptr)
            op[n] = __fmul_rn(at, scale);
    }
    if (sn != nullptr) {
#pragma unroll
        for (int n = 0; n < SCAN_NC; n++)
            store_column<VEC, STREAM>(sn + n * MEMRA__S, s[n]);
    }
}

/*
 * The same row in two halves, for a caller that overlaps consecutive rows: row r + 1's kv reads
 * the state that row r's update leaves, as row r's at does, so the two sums can be in flight
 * together. scan_row_kv computes a row's kv (the contract's first sum); scan_row_rest runs the
 * row's update, at and outputs from that kv exactly as scan_row_step does (same operations on
 * the same values), and, when `has_next`, the next row's kv from its k (`k_next`) into kv_next.
 */
static __device__ __forceinline__ void scan_row_kv(const float (&s)[SCAN_NC][SCAN_ELEMS],
                                                   const float *k, unsigned j, float (&kv)[SCAN_NC])
{
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
        kv[n] = column_sum(s[n], k, j);
}

template <bool VEC>
static __device__ __forceinline__ void
scan_row_rest(float (&s)[SCAN_NC][SCAN_ELEMS], const scan_row &in, const float (&kv)[SCAN_NC],
              unsigned j, float scale, float *op, float *sn, bool has_next,
              const float (&k_next)[SCAN_ELEMS], float (&kv_next)[SCAN_NC])
{
    const float gd = expf(in.g);
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++) {
        const float delta = __fmul_rn(__fmaf_rn(-gd, kv[n], in.v[n]), in.beta);
#pragma unroll
        for (int e = 0; e < SCAN_ELEMS; e++)
            s[n][e] = __fmaf_rn(gd, s[n][e], __fmul_rn(in.k[e], delta));
    }
    float at[SCAN_NC];
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++) {
        at[n] = column_sum(s[n], in.q, j);
        if (has_next)
            kv_next[n] = column_sum(s[n], k_next, j);
    }
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
        if (j == 0 && op != nullptr)
            op[n] = __fmul_rn(at[n], scale);
    if (sn != nullptr) {
#pragma unroll
        for (int n = 0; n < SCAN_NC; n++)
            store_column<VEC>(sn + n * MEMRA__S, s[n]);
    }
}

#endif /* MEMRA_GDN_SCAN_CUH */
