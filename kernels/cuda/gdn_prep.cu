/*
 * CUDA kernel: GDN prep over independent rows (docs/arithmetic.md, "Prep"). One kernel serves the
 * per-row op (rows == b_n) and the packed op (rows == b_n * t): every (row, value head) runs the
 * same code whatever the row count, so the two are bit-identical by construction.
 *
 * Thread mapping: one warp per (row, value head vh); the global warp index is row * num_v + vh,
 * so consecutive warps of a block write consecutive heads of the [rows, num_v, S] outputs. Lane
 * L owns the elements i = r*32 + L, r = 0..3, of the q, k and v rows: each of the 4 loads and
 * stores per row is one coalesced 128-byte access of the warp, and the lane partials of the
 * sums of squares are exactly the contract's p_L. Lane 0 also computes the head's beta and
 * g_log.
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "gdn_math.cuh"
#include "kernels.h"

/* 4 warps (4 heads) per block: the production shape has 32 heads per row, so a verify step of
 * T = 8 rows is 64 blocks spread over the multiprocessors; the kernel is latency-bound at small
 * batch and more, smaller blocks start sooner. */
#define PREP_WARPS 4
#define PREP_THREADS (PREP_WARPS * MEMRA__LANES)

__global__ void __launch_bounds__(PREP_THREADS)
    gdn_prep_kernel(const float *__restrict__ conv_out, const float *__restrict__ beta_raw,
                    const float *__restrict__ alpha, const float *__restrict__ dt_bias,
                    const float *__restrict__ a, float *__restrict__ q_l2, float *__restrict__ k_l2,
                    float *__restrict__ v_g, float *__restrict__ beta, float *__restrict__ g_log,
                    size_t num_v, size_t num_k, size_t key_dim, size_t conv_dim, size_t heads,
                    float eps, int grouped)
{
    memra__pdl_enter();

    const unsigned lane = threadIdx.x % MEMRA__LANES;
    const size_t head = (size_t)blockIdx.x * PREP_WARPS + threadIdx.x / MEMRA__LANES;
    if (head >= heads)
        return;
    const size_t row = head / num_v;
    const size_t vh = head % num_v;
    const size_t kh = memra__qk_head(vh, num_v, num_k, grouped);

    /* Every load first, so the warp has all of them in flight at once. */
    const float *xrow = conv_out + row * conv_dim;
    const float *xq = xrow + kh * MEMRA__S;
    const float *xk = xrow + key_dim + kh * MEMRA__S;
    const float *xv = xrow + 2 * key_dim + vh * MEMRA__S;
    float q[MEMRA__PER_LANE], k[MEMRA__PER_LANE], v[MEMRA__PER_LANE];
#pragma unroll
    for (int r = 0; r < MEMRA__PER_LANE; r++) {
        q[r] = xq[r * MEMRA__LANES + lane];
        k[r] = xk[r * MEMRA__LANES + lane];
        v[r] = xv[r * MEMRA__LANES + lane];
    }
    float braw = 0.0f, al = 0.0f, dt = 0.0f, av = 0.0f;
    if (lane == 0) {
        braw = beta_raw[head];
        al = alpha[head];
        dt = dt_bias[vh];
        av = a[vh];
    }

    /* The arithmetic is gdn_math.cuh's, shared with the one-launch verify. */
    memra__l2_normalise(q, eps);
    memra__l2_normalise(k, eps);
#pragma unroll
    for (int r = 0; r < MEMRA__PER_LANE; r++) {
        q_l2[head * MEMRA__S + r * MEMRA__LANES + lane] = q[r];
        k_l2[head * MEMRA__S + r * MEMRA__LANES + lane] = k[r];
        v_g[head * MEMRA__S + r * MEMRA__LANES + lane] = v[r];
    }

    if (lane == 0) {
        beta[head] = memra__gate_beta(braw);
        g_log[head] = memra__gate_g_log(al, dt, av);
    }
}

/* Grid: one warp per (row, value head), PREP_WARPS of them per block, in one dimension (the
 * head count is far below the 2^31 - 1 blocks the x dimension allows). */
static int launch_prep(const memra__prep_args *a, void *stream)
{
    const size_t heads = a->rows * a->num_v;
    const dim3 grid((unsigned)((heads + PREP_WARPS - 1) / PREP_WARPS));
    return memra__launch(gdn_prep_kernel, grid, dim3(PREP_THREADS), stream, a->conv_out,
                         a->beta_raw, a->alpha, a->dt_bias, a->a, a->q_l2, a->k_l2, a->v_g, a->beta,
                         a->g_log, a->num_v, a->num_k, a->key_dim, a->conv_dim, heads, a->eps,
                         a->grouped);
}

extern "C" int memra__cuda_gdn_prep(const memra__prep_args *args, void *stream)
{
    return launch_prep(args, stream);
}
