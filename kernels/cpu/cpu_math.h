/*
 * Helpers shared by the CPU reference kernels: the 32-lane dot product of docs/arithmetic.md, in
 * which a 128-element vector is spread over the lanes of one GPU warp.
 *
 * Lane L of the warp owns the elements i = r*32 + L, r = 0..3. Each lane accumulates its four
 * products in an fma chain (the `acc += a * b` that nvcc contracts), then the 32 lane partials
 * are summed by a pairwise tree. The CPU models the lanes explicitly as an array so that every
 * addition happens in the same order as on the GPU. The kernels are compiled with
 * -ffp-contract=off, so fmaf() below is the only fused multiply-add.
 */
#ifndef MEMRA_CPU_MATH_H
#define MEMRA_CPU_MATH_H

#include <math.h>

#include "kernels.h"

/*
 * Sums the 32 lane partials with the pairwise tree of strides 16, 8, 4, 2, 1 (lane L adds lane
 * L + stride) and returns lane 0's value, destroying p.
 *
 * The GPU kernels may use a butterfly all-reduce instead (lane L adds lane L xor stride). At
 * lane 0 the butterfly performs exactly the additions of this tree; at every other lane it
 * adds the same two values, sometimes with the operands swapped, and IEEE addition is
 * commutative, so the butterfly's result at any lane has the same bits as this tree's total.
 */
static inline float memra__cpu_lane_tree_sum(float p[MEMRA__LANES])
{
    for (int stride = MEMRA__LANES / 2; stride >= 1; stride /= 2) {
        for (int lane = 0; lane < stride; lane++)
            p[lane] = p[lane] + p[lane + stride];
    }
    return p[0];
}

/*
 * The warp dot product of two 128-element vectors: lane L's partial is the fma chain over
 * x[i] * y[i] for i = L, L+32, L+64, L+96 (in that order, starting from 0.0f), then the tree
 * above. The loop over r is outside the loop over lanes so that every lane's chain still runs
 * in r order while the compiler can vectorise across lanes.
 */
static inline float memra__cpu_lane_dot(const float *x, const float *y)
{
    float p[MEMRA__LANES];
    for (int lane = 0; lane < MEMRA__LANES; lane++)
        p[lane] = 0.0f;
    for (int r = 0; r < MEMRA__S / MEMRA__LANES; r++) {
        for (int lane = 0; lane < MEMRA__LANES; lane++) {
            int i = r * MEMRA__LANES + lane;
            p[lane] = fmaf(x[i], y[i], p[lane]);
        }
    }
    return memra__cpu_lane_tree_sum(p);
}

#endif /* MEMRA_CPU_MATH_H */
