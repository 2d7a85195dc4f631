/*
 * CPU reference: causal depthwise conv + SiLU over t rows of b_n sequences (docs/arithmetic.md,
 * "Conv"). One channel of one sequence is independent of every other, so the loops run
 * sequence, channel, row: the channel's window is carried across the rows in locals, exactly
 * as a packed GPU kernel carries it in registers, and the ring is written back once after the
 * last row. A per-row call is the same code with t == 1.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

void memra__cpu_ssm_conv1d(const memra__conv_args *args)
{
    const size_t conv_dim = args->conv_dim;
    const size_t d_conv = args->d_conv;
    const size_t pad = d_conv - 1;
    const size_t t = args->t;

    for (size_t b = 0; b < args->b_n; b++) {
        /* The table entry is read now, when the work executes, so that a recorded graph
         * replayed after the host rewrote the table rolls the new ring. The single-sequence op
         * has no table: its ring is the buffer the host passed. */
        float *ring =
            args->rings ? (float *)(uintptr_t)args->rings[b * args->ring_stride] : args->ring;
        const float *qkv = args->qkv + b * t * conv_dim;
        float *out = args->conv_out + b * t * conv_dim;
        float *snap = args->snap ? args->snap + b * (t - 1) * conv_dim * pad : NULL;

        for (size_t c = 0; c < conv_dim; c++) {
            /* The contract always runs the full 8-term chain: the window and the weights are
             * zero beyond d_conv, and those zero terms are part of the accumulation order. */
            float win[MEMRA__D_CONV_MAX] = {0.0f};
            float w8[MEMRA__D_CONV_MAX] = {0.0f};
            for (size_t j = 0; j < d_conv; j++)
                w8[j] = args->w[c * d_conv + j];
            for (size_t j = 0; j < pad; j++)
                win[j] = ring[c * pad + j];

            for (size_t r = 0; r < t; r++) {
                win[pad] = qkv[r * conv_dim + c];
                /* acc += win[j] * w8[j] is contracted to an fma by nvcc; written out here. */
                float acc = 0.0f;
                for (size_t j = 0; j < MEMRA__D_CONV_MAX; j++)
                    acc = fmaf(win[j], w8[j], acc);
                out[r * conv_dim + c] = acc / (1.0f + expf(-acc));

                /* Roll: the oldest column drops out and the new input becomes the newest ring
                 * slot. win[pad] is overwritten by the next row's input before it is read. */
                for (size_t j = 0; j < pad; j++)
                    win[j] = win[j + 1];
                if (snap && r + 1 < t) {
                    for (size_t j = 0; j < pad; j++)
                        snap[(r * conv_dim + c) * pad + j] = win[j];
                }
            }

            for (size_t j = 0; j < pad; j++)
                ring[c * pad + j] = win[j];
        }
    }
}
