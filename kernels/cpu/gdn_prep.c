/*
 * CPU reference: GDN prep over independent rows (docs/arithmetic.md, "Prep"). For each row and
 * value head: L2-normalise the q and k rows of its key head, copy the v row, and compute the
 * gate beta and the log decay g_log. The GPU gives one warp to each (row, value head); the
 * 32-lane sum of squares is modelled by memra__cpu_lane_dot (cpu_math.h) so that the additions
 * happen in the GPU's order.
 */
#include <math.h>
#include <stddef.h>

#include "cpu_math.h"
#include "kernels.h"

/*
 * out[i] = x[i] * scale with scale = 1 / sqrt(sum x[i]^2 + eps), the sum taken lane-wise as the
 * contract specifies (p_L += x[i] * x[i] is an fma chain, then the lane tree).
 *
 * The GPU computes rsqrtf(total + eps). C's libm has no rsqrtf, so the reference rounds the
 * square root and then the reciprocal; the two may differ in the last bit, which docs/arithmetic.md
 * accepts: CPU and GPU need only agree within a relative error of 1e-5 for exactly these
 * library functions (expf, rsqrtf, log1pf).
 */
static void l2_normalise(const float *x, float *out, float eps)
{
    const float total = memra__cpu_lane_dot(x, x);
    const float scale = 1.0f / sqrtf(total + eps);
    for (int i = 0; i < MEMRA__S; i++)
        out[i] = x[i] * scale;
}

void memra__cpu_gdn_prep(const memra__prep_args *args)
{
    const size_t num_v = args->num_v;
    const size_t num_k = args->num_k;
    const size_t key_dim = args->key_dim;

    for (size_t row = 0; row < args->rows; row++) {
        const float *x = args->conv_out + row * args->conv_dim;
        for (size_t vh = 0; vh < num_v; vh++) {
            const size_t kh = memra__qk_head(vh, num_v, num_k, args->grouped);
            const size_t head = row * num_v + vh;
            float *v_g = args->v_g + head * MEMRA__S;

            l2_normalise(x + kh * MEMRA__S, args->q_l2 + head * MEMRA__S, args->eps);
            l2_normalise(x + key_dim + kh * MEMRA__S, args->k_l2 + head * MEMRA__S, args->eps);
            for (size_t i = 0; i < MEMRA__S; i++)
                v_g[i] = x[2 * key_dim + vh * MEMRA__S + i];

            args->beta[head] = 1.0f / (1.0f + expf(-args->beta_raw[head]));

            /* softplus(alpha + dt_bias), linear above 20 where log1p(exp(x)) == x in f32. */
            const float xs = args->alpha[head] + args->dt_bias[vh];
            const float sp = (xs > 20.0f) ? xs : log1pf(expf(xs));
            args->g_log[head] = args->a[vh] * sp;
        }
    }
}
