/*
 * CPU reference: the GDN recurrent scan over t rows of b_n sequences (docs/arithmetic.md, "Scan").
 *
 * Mapping to the GPU layout: one warp handles one (sequence, head h, column c); lane L owns the
 * state rows i = r*32 + L, r = 0..3, of that column. The state is stored transposed (head h,
 * column c, row i at (h*S + c)*S + i), so the 128 values a warp holds are one contiguous run of
 * memory: the CPU loads it into s[i] (i = r*32 + L, the lanes of a row r next to each other),
 * carries it through the t rows like the GPU's registers, and stores it once after the last
 * row. The two 32-lane reductions per row are memra__cpu_lane_dot (cpu_math.h).
 *
 * In place: the input and output states may be the same buffer (the packed op with t even).
 * Each column is read completely before anything is written to it and no column reads another
 * column, so writing column c back cannot disturb a later column's input.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_math.h"
#include "kernels.h"

void memra__cpu_gdn_scan(const memra__scan_args *args)
{
    const size_t num_v = args->num_v;
    const size_t t = args->t;
    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    const size_t state_words = num_v * head_words;

    for (size_t b = 0; b < args->b_n; b++) {
        /* Table entries are read now, when the work executes (a recorded graph re-reads them at
         * every replay). The single-sequence op has no tables: its states are the buffers the
         * host passed. */
        const float *in = args->in_table
                              ? (const float *)(uintptr_t)args->in_table[b * args->in_stride]
                              : args->state_in;
        float *out = args->out_table ? (float *)(uintptr_t)args->out_table[b * args->out_stride]
                                     : args->state_out;
        float *snap = args->snap ? args->snap + b * (t - 1) * state_words : NULL;

        for (size_t h = 0; h < num_v; h++) {
            const size_t qkh = memra__qk_head(h, num_v, args->qk_heads, args->grouped);
            for (size_t c = 0; c < MEMRA__S; c++) {
                const size_t col = h * head_words + c * MEMRA__S;
                float s[MEMRA__S];
                memcpy(s, in + col, sizeof s);

                for (size_t r = 0; r < t; r++) {
                    const size_t head = (b * t + r) * num_v + h;
                    const size_t qk = (b * t + r) * args->qk_heads + qkh;
                    const float *q = args->q + qk * MEMRA__S;
                    const float *k = args->k + qk * MEMRA__S;
                    const float v = args->v[head * MEMRA__S + c];
                    const float gd = expf(args->g_log[head]);
                    const float bt = args->beta[head];

                    /* kv = sum_i S[i][c] * k[i]: lane partials + tree. */
                    const float kv = memra__cpu_lane_dot(s, k);
                    const float delta = (v - gd * kv) * bt;
                    if (args->delta)
                        args->delta[head * MEMRA__S + c] = delta;
                    for (int i = 0; i < MEMRA__S; i++)
                        s[i] = gd * s[i] + k[i] * delta;
                    /* at = sum_i S'[i][c] * q[i] over the updated column. */
                    const float at = memra__cpu_lane_dot(s, q);
                    args->o[head * MEMRA__S + c] = at * args->scale;

                    if (snap && r + 1 < t)
                        memcpy(snap + r * state_words + col, s, sizeof s);
                }

                memcpy(out + col, s, sizeof s);
            }
        }
    }
}
