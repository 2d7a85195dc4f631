/*
 * The per-element arithmetic of the conv and the prep (docs/arithmetic.md), shared by the 1.0
 * kernels (ssm_conv1d.cu, gdn_prep.cu) and the one-launch verify (gdn_verify.cu). Every kernel
 * that computes a conv output, a normalised q or k, a beta or a g_log calls these functions, so
 * the expressions nvcc compiles (and the multiply-adds it contracts) are the same text in every
 * kernel: the verify cannot drift from the 1.0 program. The scan's row step is shared the same
 * way through gdn_scan.cuh.
 */
#ifndef MEMRA_GDN_MATH_CUH
#define MEMRA_GDN_MATH_CUH

#include "gdn_common.cuh"

/*
 * One conv row of one channel: win[0 .. PAD-1] holds the ring, the caller has put the new input
 * in win[PAD], and win[PAD+1 ..] and w8[DCONV ..] are zero. Returns silu(sum_j win[j] * w8[j])
 * with the sum taken over all 8 taps in order from 0.0f (the zero taps take part, as the
 * contract says). memra__conv_row also rolls the window: the oldest slot drops out and win[PAD]
 * is free for the next row's input.
 */
static __device__ __forceinline__ float memra__conv_out(const float (&win)[MEMRA__D_CONV_MAX],
                                                        const float (&w8)[MEMRA__D_CONV_MAX])
{
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
        acc += win[j] * w8[j];
    return acc / (1.0f + expf(-acc));
}

/* The same output, then the window rolled (the caller's window in registers, d_conv fixed). */
template <int PAD>
static __device__ __forceinline__ float memra__conv_row(float (&win)[MEMRA__D_CONV_MAX],
                                                        const float (&w8)[MEMRA__D_CONV_MAX])
{
    const float y = memra__conv_out(win, w8);
#pragma unroll
    for (int j = 0; j < PAD; j++)
        win[j] = win[j + 1];
    return y;
}

/*
 * L2-normalises the 128-element vector a warp holds, lane L holding x[r] = v[r*32 + L]: p_L is
 * the fma chain of x[r]^2 from 0.0f, the total the pairwise tree over the lanes (lane 0's
 * value, broadcast), and every element is multiplied by rsqrtf(total + eps). All 32 lanes of the
 * warp must call it together.
 */
static __device__ __forceinline__ void memra__l2_normalise(float (&x)[MEMRA__PER_LANE], float eps)
{
    float p = 0.0f;
#pragma unroll
    for (int r = 0; r < MEMRA__PER_LANE; r++)
        p += x[r] * x[r];
    const float total = __shfl_sync(MEMRA__FULL_MASK, memra__warp_sum_down(p), 0);
    const float scale = rsqrtf(total + eps);
#pragma unroll
    for (int r = 0; r < MEMRA__PER_LANE; r++)
        x[r] = x[r] * scale;
}

/* beta = sigmoid(beta_raw). */
static __device__ __forceinline__ float memra__gate_beta(float beta_raw)
{
    return 1.0f / (1.0f + expf(-beta_raw));
}

/* g_log = a * softplus(alpha + dt_bias), linear above 20 where log1pf(expf(x)) == x in f32. */
static __device__ __forceinline__ float memra__gate_g_log(float alpha, float dt_bias, float a)
{
    const float xs = alpha + dt_bias;
    const float sp = (xs > 20.0f) ? xs : log1pf(expf(xs));
    return a * sp;
}

#endif /* MEMRA_GDN_MATH_CUH */
