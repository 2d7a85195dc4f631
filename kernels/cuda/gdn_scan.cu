/*
 * CUDA kernel: the GDN recurrent scan, head dim 128, t rows of b_n sequences with the state kept
 * in registers across the rows (SPEC section 4, "Scan"). One kernel serves the per-row op
 * (t == 1, in/out tables with stride 1, in == out allowed) and the packed op (t rows, stride-3
 * table, optional snapshots): every row of every call runs the same machine code (the row loop
 * is not unrolled), so per-row chains and packed calls are bit-identical by construction.
 *
 * Thread mapping. The contract describes one column of one head as 32 "lanes": lane L owns the
 * state rows i = r*32 + L (r = 0..3), accumulates its partial dot products over r, and the 32
 * partials are summed by a pairwise tree whose first two levels pair lane L with L + 16 and then
 * L with L + 8. Here EIGHT threads carry one column: thread j (0..7) of a column plays lanes
 * j, j+8, j+16 and j+24, i.e. holds the 16 rows i = 32r + 8m + j (m = 0..3 picks the lane) in
 * s[4r + m]. It sums the first two tree levels itself ((p_j + p_{j+16}) + (p_{j+8} + p_{j+24})),
 * and the last three levels (strides 4, 2, 1) go through shuffles inside the 8-thread group.
 * Every addition is the contract's, in its order; only the work per column shrinks (3 shuffles
 * per reduction instead of 5, and 4 columns share each warp instruction), which is what bounds
 * a warp-per-column kernel on the H200 (see NOTES.md). A warp carries 4 consecutive columns, a
 * block SCAN_WARPS warps, i.e. SCAN_COLS consecutive columns of one (sequence, head).
 *
 * Memory. The state is stored transposed, so a column is 128 contiguous floats; each state load
 * or store instruction of a warp covers 4 columns x 32 contiguous bytes (whole sectors). The
 * q and k rows that all columns of a head share are read through L1 (the 4 columns of a warp
 * read the same addresses). The kernel reads each state once and writes t - 1 snapshots plus
 * the final state: the (t + 1) x state-size floor of the packed verify. A thread reads all its
 * state elements before it writes any, and no thread touches another's, which makes in == out
 * (in place) safe. No shared memory is used: a kernel with a different shared-memory
 * configuration could not share a multiprocessor with the conv and prep kernels that precede it
 * under programmatic dependent launch (NOTES.md, v3).
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "kernels.h"

/* Threads per column, columns per warp, state elements per thread. */
#define SCAN_GROUP 8
#define SCAN_COLS_PER_WARP (MEMRA__LANES / SCAN_GROUP)
#define SCAN_ELEMS (MEMRA__S / SCAN_GROUP)
/* 4 warps = 16 columns per block, 8 blocks per head. At the production shape one sequence is
 * 256 blocks (1024 warps), about two blocks on each of the H200's 132 multiprocessors. */
#define SCAN_WARPS 4
#define SCAN_THREADS (SCAN_WARPS * MEMRA__LANES)
#define SCAN_COLS (SCAN_WARPS * SCAN_COLS_PER_WARP)
#define SCAN_BLOCKS_PER_HEAD (MEMRA__S / SCAN_COLS)

/* Offset of this thread's element e (= 4r + m) from its first element: row 32r + 8m. */
#define SCAN_OFF(e) (((e) / 4) * MEMRA__LANES + ((e) % 4) * SCAN_GROUP)

/* The state is read once and the snapshots and the final state are written once: evict-first
 * ("streaming") accesses keep them from displacing the q and k rows that every column of a
 * head re-reads. They load and store the same values as plain accesses. */
static __device__ __forceinline__ float load_once(const float *p)
{
    return __ldcs(p);
}

static __device__ __forceinline__ void store_once(float *p, float x)
{
    __stcs(p, x);
}

/* The four lane partials of a dot product over this thread's 16 elements (p[m] is lane
 * j + 8m's fma chain over r), then the tree levels 16 and 8, which stay inside the thread. */
static __device__ __forceinline__ float local_levels(const float (&s)[SCAN_ELEMS],
                                                     const float (&x)[SCAN_ELEMS])
{
    float p[4];
#pragma unroll
    for (int m = 0; m < 4; m++) {
        p[m] = 0.0f;
#pragma unroll
        for (int r = 0; r < 4; r++)
            p[m] += s[4 * r + m] * x[4 * r + m];
    }
    return (p[0] + p[2]) + (p[1] + p[3]);
}

__global__ void __launch_bounds__(SCAN_THREADS)
    gdn_scan_kernel(const float *__restrict__ q, const float *__restrict__ k,
                    const float *__restrict__ v, const float *__restrict__ g_log,
                    const float *__restrict__ beta, const uint64_t *__restrict__ in_table,
                    size_t in_stride, const uint64_t *__restrict__ out_table, size_t out_stride,
                    float *__restrict__ o, float *__restrict__ snap, size_t num_v, size_t t,
                    float scale)
{
    memra__pdl_enter();

    const unsigned j = threadIdx.x % SCAN_GROUP;
    const unsigned c = (blockIdx.x % SCAN_BLOCKS_PER_HEAD) * SCAN_COLS + threadIdx.x / SCAN_GROUP;
    const size_t bh = blockIdx.x / SCAN_BLOCKS_PER_HEAD;
    const size_t h = bh % num_v;
    const size_t b = bh / num_v;

    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    const size_t state_words = num_v * head_words;
    /* Element 32r + 8m + j of this thread's column is at col + SCAN_OFF(4r + m). */
    const size_t col = h * head_words + (size_t)c * MEMRA__S + j;

    /* Table entries are read here, when the kernel executes: a replayed graph follows a
     * rewritten table. The state pointers may alias each other (in place), so they are not
     * restrict; they never alias q, k, v, o or the snapshots (validate.c). */
    const float *in = (const float *)(uintptr_t)in_table[b * in_stride] + col;
    float *out = (float *)(uintptr_t)out_table[b * out_stride] + col;
    float s[SCAN_ELEMS];
#pragma unroll
    for (int e = 0; e < SCAN_ELEMS; e++)
        s[e] = load_once(in + SCAN_OFF(e));

    /* Row 0 of this (sequence, head); every row advances the pointers by num_v heads. */
    const size_t head0 = b * t * num_v + h;
    const size_t row_step = num_v * MEMRA__S;
    const float *kp = k + head0 * MEMRA__S + j;
    const float *qp = q + head0 * MEMRA__S + j;
    const float *vp = v + head0 * MEMRA__S + c;
    const float *gp = g_log + head0;
    const float *bp = beta + head0;
    float *op = o + head0 * MEMRA__S + c;
    float *sn = snap != nullptr ? snap + b * (t - 1) * state_words + col : nullptr;

#pragma unroll 1
    for (size_t row = 0; row < t; row++) {
        /* The row's inputs; ptxas issues the k loads first and the q, v and beta loads as
         * late as their use allows (they then overlap the kv reduction). */
        float x[SCAN_ELEMS], y[SCAN_ELEMS];
#pragma unroll
        for (int e = 0; e < SCAN_ELEMS; e++) {
            x[e] = kp[SCAN_OFF(e)];
            y[e] = qp[SCAN_OFF(e)];
        }
        const float gd = expf(*gp);
        const float bt = *bp;
        const float vc = *vp;

        float kv = local_levels(s, x);
        /* Tree levels 4, 2, 1 as a butterfly inside the 8-thread group: every thread of the
         * column ends with the same kv. */
        kv = kv + __shfl_xor_sync(MEMRA__FULL_MASK, kv, 4);
        kv = kv + __shfl_xor_sync(MEMRA__FULL_MASK, kv, 2);
        kv = kv + __shfl_xor_sync(MEMRA__FULL_MASK, kv, 1);

        const float delta = (vc - gd * kv) * bt;
#pragma unroll
        for (int e = 0; e < SCAN_ELEMS; e++)
            s[e] = gd * s[e] + x[e] * delta;

        float at = local_levels(s, y);
        /* Levels 4, 2, 1 where thread j adds thread j + stride; thread 0 of the group holds
         * the column's total. */
        at = at + __shfl_down_sync(MEMRA__FULL_MASK, at, 4, SCAN_GROUP);
        at = at + __shfl_down_sync(MEMRA__FULL_MASK, at, 2, SCAN_GROUP);
        at = at + __shfl_down_sync(MEMRA__FULL_MASK, at, 1, SCAN_GROUP);
        if (j == 0)
            *op = at * scale;

        if (sn != nullptr && row + 1 < t) {
#pragma unroll
            for (int e = 0; e < SCAN_ELEMS; e++)
                store_once(sn + SCAN_OFF(e), s[e]);
            sn += state_words;
        }
        kp += row_step;
        qp += row_step;
        vp += row_step;
        op += row_step;
        gp += num_v;
        bp += num_v;
    }

#pragma unroll
    for (int e = 0; e < SCAN_ELEMS; e++)
        store_once(out + SCAN_OFF(e), s[e]);
}

/* Grid: one block per (sequence, head, group of SCAN_COLS columns), flattened into x as
 * ((b * num_v + h) * SCAN_BLOCKS_PER_HEAD + group); far below the 2^31 - 1 limit for any batch
 * that fits in device memory (each block covers 8 KiB of state). */
static int launch_scan(const memra__scan_args *a, void *stream)
{
    const dim3 grid((unsigned)(a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD));
    return memra__launch(gdn_scan_kernel, grid, dim3(SCAN_THREADS), stream, a->q, a->k, a->v,
                         a->g_log, a->beta, a->in_table, a->in_stride, a->out_table, a->out_stride,
                         a->o, a->snap, a->num_v, a->t, a->scale);
}

extern "C" int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream)
{
    return launch_scan(args, stream);
}
