/*
 * CUDA kernel: causal depthwise conv + SiLU over t rows of b_n sequences (docs/arithmetic.md,
 * "Conv"). One kernel serves both the per-row op (t == 1, ring_stride 1) and the packed op
 * (t rows, ring_stride 3), so the two run the same machine code for every row and are
 * bit-identical by construction.
 *
 * Thread mapping: one thread per (sequence b, channel c); blockIdx.x * blockDim.x + threadIdx.x
 * is c and blockIdx.y is b (a grid-stride loop over b covers b_n beyond the grid's y limit).
 * Consecutive threads take consecutive channels, so the loads of the input rows and the stores
 * of the output rows are coalesced across the warp. The thread keeps its channel's window (ring
 * slots plus the newest input) in registers across all t rows, rolls it after each row, writes
 * each post-row ring to the snapshot, and writes the ring back once at the end. Channels are
 * independent, so no thread reads what another writes.
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "gdn_math.cuh"
#include "kernels.h"

/* 128 threads (4 warps) per block: at the production shape a sequence has 8192 channels, i.e.
 * 64 blocks, which spreads one sequence over half of an H200's 132 multiprocessors; the work
 * is latency-bound at small batch, so more, smaller blocks start sooner than fewer large ones. */
#define CONV_THREADS 128

/* Rows whose input is requested ahead of the row being computed. */
#define CONV_PREFETCH 8

/* The grid's y dimension is limited to 65535; larger batches loop. */
#define CONV_MAX_GRID_Y 65535u

/*
 * DCONV (1..8) is a template parameter so that the window is a register array indexed only by
 * compile-time constants (a run-time index would move it to local memory).
 */
template <int DCONV>
__global__ void __launch_bounds__(CONV_THREADS)
    ssm_conv1d_kernel(const float *__restrict__ qkv, const uint64_t *__restrict__ rings,
                      size_t ring_stride, float *direct_ring, const float *__restrict__ w,
                      float *__restrict__ conv_out, float *__restrict__ snap, size_t conv_dim,
                      size_t t, size_t b_n)
{
    constexpr int PAD = DCONV - 1;
    memra__pdl_enter();

    const size_t c = (size_t)blockIdx.x * CONV_THREADS + threadIdx.x;
    if (c >= conv_dim)
        return;

    /* The contract's window and weights are 8 wide; beyond d_conv both are zero and those zero
     * terms still take part in the accumulation chain. */
    float w8[MEMRA__D_CONV_MAX];
#pragma unroll
    for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
        w8[j] = j < DCONV ? w[c * DCONV + j] : 0.0f;

    for (size_t b = blockIdx.y; b < b_n; b += gridDim.y) {
        float win[MEMRA__D_CONV_MAX];
#pragma unroll
        for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
            win[j] = 0.0f;

        /* The ring address is read here, when the kernel executes, so a replayed graph follows
         * a rewritten table. With d_conv == 1 there is no ring and the entry is not used. The
         * single-sequence op passes its ring directly and no table. */
        float *ring = nullptr;
        if (PAD > 0) {
            ring = (rings != nullptr ? (float *)(uintptr_t)rings[b * ring_stride] : direct_ring) +
                   c * PAD;
#pragma unroll
            for (int j = 0; j < PAD; j++)
                win[j] = ring[j];
        }

        const float *x = qkv + b * t * conv_dim + c;
        float *y = conv_out + b * t * conv_dim + c;
        float *sn =
            (PAD > 0 && snap != nullptr) ? snap + b * (t - 1) * conv_dim * PAD + c * PAD : nullptr;

        /* Software pipelining: the inputs of the next CONV_PREFETCH rows are in flight while a
         * row is computed (a verify step's T <= 8 rows are all requested at once), so the rows
         * do not each wait for memory. The window of prefetched inputs shifts by one register
         * per row. The arithmetic is one copy of the loop body (unroll 1), the same for every
         * row and for a t == 1 call. */
        float ahead[CONV_PREFETCH];
#pragma unroll
        for (int p = 0; p < CONV_PREFETCH; p++)
            ahead[p] = (size_t)p < t ? x[p * conv_dim] : 0.0f;
#pragma unroll 1
        for (size_t r = 0; r < t; r++) {
            win[PAD] = ahead[0];
#pragma unroll
            for (int p = 0; p + 1 < CONV_PREFETCH; p++)
                ahead[p] = ahead[p + 1];
            ahead[CONV_PREFETCH - 1] =
                r + CONV_PREFETCH < t ? x[(r + CONV_PREFETCH) * conv_dim] : 0.0f;

            /* The row's arithmetic and the roll (gdn_math.cuh); win[PAD] is refilled by the
             * next row. */
            y[r * conv_dim] = memra__conv_row<PAD>(win, w8);
            if (sn != nullptr && r + 1 < t) {
#pragma unroll
                for (int j = 0; j < PAD; j++)
                    sn[r * conv_dim * PAD + j] = win[j];
            }
        }

        if (PAD > 0) {
#pragma unroll
            for (int j = 0; j < PAD; j++)
                ring[j] = win[j];
        }
    }
}

/* Grid: x covers the channels in blocks of CONV_THREADS, y the sequences. */
template <int DCONV> static int launch_conv(const memra__conv_args *a, void *stream)
{
    const unsigned gy = a->b_n < CONV_MAX_GRID_Y ? (unsigned)a->b_n : CONV_MAX_GRID_Y;
    const dim3 grid((unsigned)((a->conv_dim + CONV_THREADS - 1) / CONV_THREADS), gy);
    return memra__launch(ssm_conv1d_kernel<DCONV>, grid, dim3(CONV_THREADS), stream, a->qkv,
                         a->rings, a->ring_stride, a->ring, a->w, a->conv_out, a->snap, a->conv_dim,
                         a->t, a->b_n);
}

extern "C" int memra__cuda_ssm_conv1d(const memra__conv_args *args, void *stream)
{
    return memra__with_d_conv(
        args->d_conv, [&](auto d) { return launch_conv<decltype(d)::value>(args, stream); });
}
