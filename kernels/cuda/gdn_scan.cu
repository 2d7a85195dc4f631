/*
 * CUDA kernel: the GDN recurrent scan, head dim 128, t rows of b_n sequences with the state kept
 * in registers across the rows (docs/arithmetic.md, "Scan"). One kernel serves the per-row op
 * (t == 1, in/out tables with stride 1, in == out allowed) and the packed op (t rows, stride-3
 * table, optional snapshots). Every row of every call goes through the same per-row function,
 * scan_row_step, whose rounding is pinned operation by operation (see there), inside a row loop
 * that is not unrolled; so per-row chains and packed calls are bit-identical by construction.
 * The kernel has four instantiations: 16-byte or 4-byte accesses (VEC), and one or two rows of
 * inputs held ahead in registers (AHEAD: 1 for the per-row op, 2 for packed calls; see
 * launch_scan). They differ in where values are loaded from and when, never in arithmetic.
 *
 * Thread mapping. The contract describes one column of one head as 32 "lanes": lane L owns the
 * state rows i = r*32 + L (r = 0..3), accumulates its partial dot products over r, and the 32
 * partials are summed by a pairwise tree with strides 16, 8, 4, 2, 1. Here a group of EIGHT
 * threads carries SCAN_NC = 2 adjacent columns: thread j (0..7) of the group plays the four
 * consecutive lanes L = 4j + u (u = 0..3) of both, i.e. holds the 16 rows i = 32r + 4j + u of
 * each column in s[n][4r + u]. Those rows are four aligned runs of four floats, so every state,
 * k, q and snapshot access of a thread is one 16-byte access per r, and a warp's state store
 * covers whole 128-byte lines. The tree levels that pair lanes of different threads go through
 * shuffles, with the work of each level shared by the group (column_sum): 6 shuffles per
 * reduction. The two columns share their k, q, g_log and beta loads. A warp carries 4 groups
 * (8 adjacent columns), a block SCAN_WARPS warps, i.e. SCAN_COLS adjacent columns of one
 * (sequence, head). NOTES.md (v5) has the measurements behind this layout: on the H200 the scan
 * of 1.0.0 was bound by the multiprocessor's memory instruction issue as much as by HBM; this
 * layout issues about a fifth of its memory instructions per column and row, for twice its
 * shuffles (6 per reduction instead of 3).
 *
 * Memory. The state is stored transposed, so a column is 128 contiguous floats. The kernel
 * reads each state once and writes t - 1 snapshots plus the final state: the (t + 1) x
 * state-size floor of the packed verify. A thread reads all its state elements before it
 * writes any, and no thread touches another's, which makes in == out (in place) safe. The q and
 * k rows that all columns of a head share are read through L1; at the start the block asks L1
 * for all t rows of them at once, and each row requests the inputs of a later row (the next,
 * or the one after it) before it computes. Views and table entries need only be 4-byte aligned
 * (validate.c): the launcher picks the 16-byte kernel when q, k and the snapshots are 16-byte
 * aligned, and the kernel checks the state buffers it reads from the table; otherwise the same code
 * runs with 4-byte accesses (same values in the same registers, so the same results). No shared
 * memory is used: a kernel with a different shared-memory configuration could not share a
 * multiprocessor with the conv and prep kernels that precede it under programmatic dependent launch
 * (NOTES.md, v3).
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "kernels.h"

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

/* Four consecutive floats at p: one 16-byte load when VEC, four 4-byte ones otherwise. */
template <bool VEC> static __device__ __forceinline__ void load4(float *dst, const float *p)
{
    if (VEC) {
        const float4 x = *(const float4 *)p;
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

/* Writes this thread's 16 elements of one column; p points at its row 4j. */
template <bool VEC> static __device__ __forceinline__ void store_column(float *p, const float *s)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        float *d = p + r * MEMRA__LANES;
        if (VEC) {
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

/* Where this thread's inputs and outputs are, after the table lookup. */
typedef struct scan_ptrs {
    const float *in, *kp, *qp, *vp, *gp, *bp;
    float *out, *op, *sn;
    size_t row_step, num_v, state_words, t;
    float scale;
    unsigned j;
    bool state_vec;
} scan_ptrs;

template <bool VEC>
static __device__ __forceinline__ void load_row(scan_row &in, const scan_ptrs &a)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        load4<VEC>(in.k + 4 * r, a.kp + r * MEMRA__LANES);
        load4<VEC>(in.q + 4 * r, a.qp + r * MEMRA__LANES);
    }
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
        in.v[n] = a.vp[n];
    in.g = *a.gp;
    in.beta = *a.bp;
}

/*
 * One row of this thread's columns (SPEC section 4, "Scan") with the row's inputs in `in`: the
 * state update in s, o[c] (written by thread 0 of the group) and, when sn is not NULL, the
 * post-row state to sn. The operations are written with explicit rounding intrinsics in exactly
 * the form nvcc -O3 gives the contract's expressions (v - gd * kv is one fma, then a multiply by
 * beta; gd * s + k * delta is a multiply, then an fma), so that no copy of this code (the two
 * kernel instantiations) can be compiled differently from another: every row of every call
 * computes the same bits, and the same bits as the v4 kernel that compiled the expressions
 * (tools/device/probe hash).
 */
template <bool VEC>
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
        if (j == 0)
            op[n] = __fmul_rn(at, scale);
    }
    if (sn != nullptr) {
#pragma unroll
        for (int n = 0; n < SCAN_NC; n++)
            store_column<VEC>(sn + n * MEMRA__S, s[n]);
    }
}

/* Moves the input pointers to the next row, or leaves them on the current one when `step` is
 * false (the last row: a read past it would leave the views). */
static __device__ __forceinline__ void advance_row(scan_ptrs &a, bool step)
{
    const size_t adv = step ? 1 : 0;
    a.kp += adv * a.row_step;
    a.qp += adv * a.row_step;
    a.vp += adv * a.row_step;
    a.gp += adv * a.num_v;
    a.bp += adv * a.num_v;
}

/*
 * The t rows of this thread's columns. VEC picks 16-byte or 4-byte accesses for k, q and the
 * snapshots; the state's own accesses follow a.state_vec. AHEAD rows of inputs are held in
 * registers: each row requests the inputs of the row AHEAD after it before it computes (rows
 * past the last re-read the last, in bounds, instead of branching). ptxas places those loads
 * after the row's arithmetic (keeping their registers free until then; NOTES.md, v6, has the
 * profile), so with AHEAD == 1 a row starts by waiting for its inputs from L2, which was a
 * quarter of the scan's stall samples at B = 1. AHEAD == 2 gives the loads a whole row to
 * arrive, for about 40 more registers (165-168 instead of 125-127). The rows' arithmetic is the
 * same scan_row_step either way.
 */
template <bool VEC, int AHEAD> static __device__ __forceinline__ void scan_rows(scan_ptrs a)
{
    float s[SCAN_NC][SCAN_ELEMS];
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (a.state_vec)
                load4<true>(s[n] + 4 * r, a.in + n * MEMRA__S + r * MEMRA__LANES);
            else
                load4<false>(s[n] + 4 * r, a.in + n * MEMRA__S + r * MEMRA__LANES);
        }

    /* in[0] is the row being computed, in[i] the row i after it. */
    scan_row in[AHEAD];
    load_row<VEC>(in[0], a);
#pragma unroll
    for (int i = 1; i < AHEAD; i++) {
        advance_row(a, (size_t)i < a.t);
        load_row<VEC>(in[i], a);
    }
#pragma unroll 1
    for (size_t row = 0; row < a.t; row++) {
        advance_row(a, row + AHEAD < a.t);
        scan_row next;
        load_row<VEC>(next, a);

        const bool snap_row = a.sn != nullptr && row + 1 < a.t;
        scan_row_step<VEC>(s, in[0], a.j, a.scale, a.op, snap_row ? a.sn : nullptr);
        if (snap_row)
            a.sn += a.state_words;
        a.op += a.row_step;
#pragma unroll
        for (int i = 0; i + 1 < AHEAD; i++)
            in[i] = in[i + 1];
        in[AHEAD - 1] = next;
    }

#pragma unroll
    for (int n = 0; n < SCAN_NC; n++) {
        if (a.state_vec)
            store_column<true>(a.out + n * MEMRA__S, s[n]);
        else
            store_column<false>(a.out + n * MEMRA__S, s[n]);
    }
}

template <bool VEC, int AHEAD>
__global__ void __launch_bounds__(SCAN_THREADS)
    gdn_scan_kernel(const float *__restrict__ q, const float *__restrict__ k,
                    const float *__restrict__ v, const float *__restrict__ g_log,
                    const float *__restrict__ beta, const uint64_t *__restrict__ in_table,
                    size_t in_stride, const uint64_t *__restrict__ out_table, size_t out_stride,
                    float *__restrict__ o, float *__restrict__ snap, size_t num_v, size_t t,
                    float scale)
{
    memra__pdl_enter();

    scan_ptrs a;
    a.j = threadIdx.x % SCAN_GROUP;
    const unsigned c0 = (blockIdx.x % SCAN_BLOCKS_PER_HEAD) * SCAN_COLS;
    const unsigned c = c0 + threadIdx.x / SCAN_GROUP * SCAN_NC;
    const size_t bh = blockIdx.x / SCAN_BLOCKS_PER_HEAD;
    const size_t h = bh % num_v;
    const size_t b = bh / num_v;

    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    a.state_words = num_v * head_words;
    /* This thread's rows start at row 4j of its first column. */
    const size_t col = h * head_words + (size_t)c * MEMRA__S + 4 * a.j;

    /* Table entries are read here, when the kernel executes: a replayed graph follows a
     * rewritten table. The state pointers may alias each other (in place), so they are not
     * restrict; they never alias q, k, v, o or the snapshots (validate.c). */
    a.in = (const float *)(uintptr_t)in_table[b * in_stride] + col;
    a.out = (float *)(uintptr_t)out_table[b * out_stride] + col;
    /* Every state access is at a multiple of 4 floats from these (head, column and row offsets
     * are multiples of 128 floats), so their alignment decides for the whole thread. */
    a.state_vec = (((uintptr_t)a.in | (uintptr_t)a.out) & 15u) == 0;

    /* Row 0 of this (sequence, head); every row advances the pointers by num_v heads. */
    const size_t head0 = b * t * num_v + h;
    a.row_step = num_v * MEMRA__S;
    a.num_v = num_v;
    a.t = t;
    a.scale = scale;
    a.kp = k + head0 * MEMRA__S + 4 * a.j;
    a.qp = q + head0 * MEMRA__S + 4 * a.j;
    a.vp = v + head0 * MEMRA__S + c;
    a.gp = g_log + head0;
    a.bp = beta + head0;
    a.op = o + head0 * MEMRA__S + c;
    a.sn = snap != nullptr ? snap + b * (t - 1) * a.state_words + col : nullptr;

    /* Ask L1 for every row's inputs now, one line per thread: 16 threads per row, of which
     * 11 take a line each (k and q: 4 lines each, the block's v, g_log, beta). A prefetch
     * only warms the cache; the loads below read the same addresses either way. */
    const unsigned part = threadIdx.x % 16;
    for (size_t row = threadIdx.x / 16; part < SCAN_PREFETCH_LINES && row < t;
         row += SCAN_THREADS / 16) {
        const size_t hr = head0 + row * num_v;
        const float *p = part < 4    ? k + hr * MEMRA__S + part * MEMRA__LANES
                         : part < 8  ? q + hr * MEMRA__S + (part - 4) * MEMRA__LANES
                         : part == 8 ? v + hr * MEMRA__S + c0
                         : part == 9 ? g_log + hr
                                     : beta + hr;
        asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
    }

    scan_rows<VEC, AHEAD>(a);
}

/* Grid: one block per (sequence, head, group of SCAN_COLS columns), flattened into x as
 * ((b * num_v + h) * SCAN_BLOCKS_PER_HEAD + group); far below the 2^31 - 1 limit for any batch
 * that fits in device memory (each block covers 16 KiB of state). The 16-byte kernel needs
 * q, k and the snapshots 16-byte aligned: every offset the kernel adds is a multiple of 4
 * floats. Packed calls (t >= 2) hold two rows of inputs ahead: on the H200 that made the ornith
 * verify at B = 32, T = 8 about 2.4 us faster (three blocks per multiprocessor instead of four,
 * but no row waits for L2), and changed nothing at B = 1. The per-row op (t == 1) has no next
 * row to wait for and keeps AHEAD = 1: with 2, the T = 8 per-row chain took 48.4 us instead of
 * 44.9 (NOTES.md, v6). */
static int launch_scan(const memra__scan_args *a, void *stream)
{
    const dim3 grid((unsigned)(a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD));
    const bool vec = (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->snap) & 15u) == 0;
    decltype(&gdn_scan_kernel<true, 1>) kernel;
    if (a->t >= 2)
        kernel = vec ? gdn_scan_kernel<true, 2> : gdn_scan_kernel<false, 2>;
    else
        kernel = vec ? gdn_scan_kernel<true, 1> : gdn_scan_kernel<false, 1>;
    return memra__launch(kernel, grid, dim3(SCAN_THREADS), stream, a->q, a->k, a->v, a->g_log,
                         a->beta, a->in_table, a->in_stride, a->out_table, a->out_stride, a->o,
                         a->snap, a->num_v, a->t, a->scale);
}

extern "C" int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream)
{
    return launch_scan(args, stream);
}
