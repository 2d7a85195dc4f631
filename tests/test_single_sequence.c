/*
 * The single-sequence operations that take a sequence's buffers directly instead of through a
 * pointer table: memra_ssm_conv1d_fused_decode (one row, the ring passed as a buffer) and
 * memra_gdn_scan_s128 (t rows, the states passed as buffers). Each must be BIT-IDENTICAL to the
 * table-driven op it mirrors, run on the same backend and inputs:
 *
 * - conv: t chained memra_ssm_conv1d_fused_decode calls against t chained
 *   memra_ssm_conv1d_fused_decode_b_view calls with b_n = 1 and a one-entry table holding the
 *   reference ring's address: every conv_out row and the ring after the last row;
 * - scan: one memra_gdn_scan_s128 call over t rows against t chained
 *   memra_gdn_scan_s128_batched_view calls with b_n = 1 updating the reference state in place:
 *   every o row and the state after the last row; out of place, state_in must be left exactly
 *   as it was.
 *
 * Outputs are poisoned before every run, rings and states are followed by guard words that must
 * not change, inputs are drawn from a fresh seed. In graph mode the direct call is captured
 * (the capture's two eager warm-ups run it as well), the sequence's buffers are reset, and the
 * graph is replayed twice: each replay must continue the reference exactly, which shows that a
 * graph works on the very buffers it was captured with.
 *
 * Argument rules peculiar to these ops (in place allowed only as the very same address, a ring
 * of no elements when d_conv == 1) are checked here; the generic bad-input slots (NULL,
 * misaligned, short, overflow, ...) are covered with every other op by the bad-input suite.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

#define SS_GUARD ((size_t)8)

typedef struct ss_case {
    size_t num_k, num_v, d_conv, t;
    bool graph;
    /* Scan only: state_in and state_out are one buffer. */
    bool in_place;
} ss_case;

static float *ss_host(size_t words)
{
    float *p = malloc((words ? words : 1) * sizeof(float));
    cr_assert_not_null(p);
    return p;
}

/* A device buffer of `words` values from `host` followed by SS_GUARD guard words (poison). */
static MemraSliceMutF32 ss_guarded(MemraEngine *e, const float *host, size_t words)
{
    MemraSliceMutF32 s = tu_poisoned(e, words + SS_GUARD);
    if (words > 0)
        tu_write(e, host, words, s);
    return s;
}

/* Fails unless the guard words after the first `words` of `s` still hold the poison. */
static void ss_expect_guard(MemraEngine *e, MemraSliceMutF32 s, size_t words, const char *what)
{
    float *all = tu_download(e, s);
    tu_expect_poison(all + words, SS_GUARD, "the guard words after %s", what);
    free(all);
}

static float *ss_read(MemraEngine *e, MemraSliceMutF32 s, size_t words)
{
    float *host = ss_host(words);
    tu_download_into(e, tu_sub(s, 0, words), host);
    return host;
}

/* One pass: a replay of the captured graph, or the step run eagerly. */
static void ss_pass(MemraEngine *e, const MemraGraph *graph, MemraStepFn step, void *user)
{
    if (graph)
        TU_OK(memra_graph_launch(e, graph));
    else
        TU_OK(step(e, user));
}

/* Fails unless the first `words` of `s` equal `ref` bit for bit. */
static void ss_expect_read(MemraEngine *e, MemraSliceMutF32 s, size_t words, const float *ref,
                           const char *what, int pass, uint64_t seed)
{
    float *got = ss_read(e, s, words);
    tu_expect_bits(got, ref, words, "%s, pass %d (seed " TU_SEED_FMT ")", what, pass, seed);
    free(got);
}

/* ---- conv ---- */

typedef struct ss_conv_step {
    size_t t, conv_dim, d_conv;
    MemraSliceF32 qkv, w;
    MemraSliceMutF32 ring, out;
} ss_conv_step;

/* t direct calls, row r of qkv into row r of out. */
static MemraStatus ss_conv_direct(MemraEngine *e, void *user)
{
    const ss_conv_step *s = user;
    for (size_t r = 0; r < s->t; r++) {
        MemraStatus st = memra_ssm_conv1d_fused_decode(
            e, (MemraSliceF32){s->qkv.ptr + r * s->conv_dim, s->conv_dim}, s->ring, s->w,
            tu_sub_mut(s->out, r * s->conv_dim, s->conv_dim), s->conv_dim, s->d_conv);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    return MEMRA_STATUS_OK;
}

static void ss_run_conv(ss_case cs, MemraBackend backend)
{
    const ss_case *c = &cs;
    const uint64_t seed = tu_fresh_seed();
    const tu_gdn_shape sh = tu_gdn_shape_make(c->num_k, c->num_v, c->d_conv);
    const size_t rows_words = c->t * sh.conv_dim;
    MemraEngine *e = tu_engine(backend);

    float *w = ss_host(sh.conv_dim * sh.d_conv), *dt_bias = ss_host(sh.num_v),
          *a = ss_host(sh.num_v);
    float *qkv = ss_host(rows_words), *beta_raw = ss_host(c->t * sh.num_v),
          *alpha = ss_host(c->t * sh.num_v);
    float *ring0 = ss_host(sh.ring_words), *state0 = ss_host(sh.state_words);
    tu_gdn_weights(&sh, tu_mix_seed(seed, 1), w, dt_bias, a);
    tu_gdn_rows(&sh, c->t, tu_mix_seed(seed, 2), qkv, beta_raw, alpha);
    tu_gdn_sequence(&sh, tu_mix_seed(seed, 3), ring0, state0);

    MemraSliceMutF32 d_w = tu_upload(e, w, sh.conv_dim * sh.d_conv);
    MemraSliceMutF32 d_qkv = tu_upload(e, qkv, rows_words);
    MemraSliceMutF32 ref_ring = ss_guarded(e, ring0, sh.ring_words);
    MemraSliceMutF32 ref_out = tu_poisoned(e, 2 * rows_words);
    uint64_t entry = tu_addr(ref_ring);
    MemraSliceMutU64 table = tu_upload_u64(e, &entry, 1);

    /* The reference: 2t rows (the input rows twice), read after t and after 2t rows. */
    float *ref_ring_t[2];
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r < c->t; r++)
            TU_OK(memra_ssm_conv1d_fused_decode_b_view(
                e, tu_sub(d_qkv, r * sh.conv_dim, sh.conv_dim), tu_view_u64(table), tu_view(d_w),
                tu_sub_mut(ref_out, (pass * c->t + r) * sh.conv_dim, sh.conv_dim), sh.conv_dim,
                sh.d_conv, 1));
        ref_ring_t[pass] = ss_read(e, ref_ring, sh.ring_words);
    }
    float *ref_rows = ss_read(e, ref_out, 2 * rows_words);

    /* d_conv == 1 has no ring: the call gets an empty view, as a caller without one passes. */
    MemraSliceMutF32 ring = ss_guarded(e, ring0, sh.ring_words);
    MemraSliceMutF32 out = tu_poisoned(e, rows_words + SS_GUARD);
    ss_conv_step step = {
        c->t,
        sh.conv_dim,
        sh.d_conv,
        tu_view(d_qkv),
        tu_view(d_w),
        sh.ring_words > 0 ? tu_sub_mut(ring, 0, sh.ring_words) : (MemraSliceMutF32){NULL, 0},
        out};
    MemraGraph *graph = NULL;
    if (c->graph) {
        TU_OK(memra_graph_capture(e, ss_conv_direct, &step, &graph));
        if (sh.ring_words > 0)
            tu_write(e, ring0, sh.ring_words, ring);
    }
    for (int pass = 0; pass < (c->graph ? 2 : 1); pass++) {
        tu_poison(e, tu_sub_mut(out, 0, rows_words));
        ss_pass(e, graph, ss_conv_direct, &step);
        ss_expect_read(e, out, rows_words, ref_rows + pass * rows_words, "conv_out rows", pass,
                       seed);
        ss_expect_read(e, ring, sh.ring_words, ref_ring_t[pass], "the ring", pass, seed);
    }
    cr_expect(tu_all_finite(ref_rows, 2 * rows_words), "the reference rows are finite");
    ss_expect_guard(e, ring, sh.ring_words, "the ring");
    ss_expect_guard(e, out, rows_words, "conv_out");
    if (graph)
        TU_OK(memra_graph_destroy(e, graph));

    void *bufs[] = {d_w.ptr, d_qkv.ptr, ref_ring.ptr, ref_out.ptr, table.ptr, ring.ptr, out.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
    float *host[] = {w,     dt_bias, a,        qkv,           beta_raw,     alpha,
                     ring0, state0,  ref_rows, ref_ring_t[0], ref_ring_t[1]};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    TU_OK(memra_engine_destroy(e));
}

/* ---- scan ---- */

typedef struct ss_scan_step {
    size_t num_v, t;
    MemraSliceF32 q, k, v, g_log, beta, state_in;
    MemraSliceMutF32 state_out, o;
} ss_scan_step;

static MemraStatus ss_scan_direct(MemraEngine *e, void *user)
{
    const ss_scan_step *s = user;
    return memra_gdn_scan_s128(e, s->q, s->k, s->v, s->g_log, s->beta, s->state_in, s->state_out,
                               s->o, s->num_v, s->t, TU_GDN_SCALE);
}

/* Scan inputs as the prep would make them: q and k of moderate size, v, a negative log decay
 * and beta in (0, 1), so that long chains stay finite. */
static void ss_scan_inputs(size_t t, size_t num_v, uint64_t seed, float *q, float *k, float *v,
                           float *g_log, float *beta)
{
    const size_t act = t * num_v * MEMRA_D_STATE, heads = t * num_v;
    tu_varied(q, act, tu_mix_seed(seed, 10), 0.2f);
    tu_varied(k, act, tu_mix_seed(seed, 11), 0.2f);
    tu_varied(v, act, tu_mix_seed(seed, 12), 1.0f);
    tu_varied(g_log, heads, tu_mix_seed(seed, 13), 0.5f);
    tu_varied(beta, heads, tu_mix_seed(seed, 14), 0.5f);
    for (size_t i = 0; i < heads; i++) {
        g_log[i] = -0.55f - g_log[i]; /* (-1.05, -0.05] */
        beta[i] = 0.5f + beta[i];     /* [0, 1) */
    }
}

static void ss_run_scan(ss_case cs, MemraBackend backend)
{
    const ss_case *c = &cs;
    const uint64_t seed = tu_fresh_seed();
    const size_t num_v = c->num_v, t = c->t;
    const size_t row = num_v * MEMRA_D_STATE, act = t * row, heads = t * num_v;
    const size_t state_words = num_v * MEMRA_D_STATE * MEMRA_D_STATE;
    MemraEngine *e = tu_engine(backend);

    float *q = ss_host(act), *k = ss_host(act), *v = ss_host(act), *g_log = ss_host(heads),
          *beta = ss_host(heads), *state0 = ss_host(state_words);
    ss_scan_inputs(t, num_v, seed, q, k, v, g_log, beta);
    tu_varied(state0, state_words, tu_mix_seed(seed, 15), 0.3f);
    MemraSliceMutF32 d_q = tu_upload(e, q, act), d_k = tu_upload(e, k, act),
                     d_v = tu_upload(e, v, act), d_g = tu_upload(e, g_log, heads),
                     d_b = tu_upload(e, beta, heads);

    /* The reference: 2t per-row steps in place on one state, read after t and after 2t. */
    MemraSliceMutF32 ref_state = ss_guarded(e, state0, state_words);
    MemraSliceMutF32 ref_o = tu_poisoned(e, 2 * act);
    uint64_t entry = tu_addr(ref_state);
    MemraSliceMutU64 table = tu_upload_u64(e, &entry, 1);
    float *ref_state_t[2];
    for (int pass = 0; pass < 2; pass++) {
        for (size_t r = 0; r < t; r++)
            TU_OK(memra_gdn_scan_s128_batched_view(
                e, tu_sub(d_q, r * row, row), tu_sub(d_k, r * row, row), tu_sub(d_v, r * row, row),
                tu_sub(d_g, r * num_v, num_v), tu_sub(d_b, r * num_v, num_v), tu_view_u64(table),
                tu_view_u64(table), tu_sub_mut(ref_o, (pass * t + r) * row, row), num_v, 1,
                TU_GDN_SCALE));
        ref_state_t[pass] = ss_read(e, ref_state, state_words);
    }
    float *ref_rows = ss_read(e, ref_o, 2 * act);
    cr_expect(tu_all_finite(ref_rows, 2 * act), "the reference rows are finite");

    MemraSliceMutF32 s_in = ss_guarded(e, state0, state_words);
    MemraSliceMutF32 s_out = c->in_place ? s_in : tu_poisoned(e, state_words + SS_GUARD);
    MemraSliceMutF32 o = tu_poisoned(e, act + SS_GUARD);
    ss_scan_step step = {num_v,
                         t,
                         tu_view(d_q),
                         tu_view(d_k),
                         tu_view(d_v),
                         tu_view(d_g),
                         tu_view(d_b),
                         tu_sub(s_in, 0, state_words),
                         tu_sub_mut(s_out, 0, state_words),
                         tu_sub_mut(o, 0, act)};
    MemraGraph *graph = NULL;
    if (c->graph) {
        TU_OK(memra_graph_capture(e, ss_scan_direct, &step, &graph));
        tu_write(e, state0, state_words, s_in);
    }
    /* Out of place, every pass reads state0 and writes the state after t rows; in place, the
     * second pass continues from the first. */
    for (int pass = 0; pass < (c->graph ? 2 : 1); pass++) {
        const int ref_pass = c->in_place ? pass : 0;
        tu_poison(e, tu_sub_mut(o, 0, act));
        if (!c->in_place)
            tu_poison(e, tu_sub_mut(s_out, 0, state_words));
        ss_pass(e, graph, ss_scan_direct, &step);
        ss_expect_read(e, o, act, ref_rows + ref_pass * act,
                       c->in_place ? "o rows, in place" : "o rows, out of place", pass, seed);
        ss_expect_read(e, s_out, state_words, ref_state_t[ref_pass], "the state after the rows",
                       pass, seed);
        if (!c->in_place)
            ss_expect_read(e, s_in, state_words, state0, "state_in left as it was", pass, seed);
    }
    ss_expect_guard(e, s_in, state_words, "state_in");
    if (!c->in_place)
        ss_expect_guard(e, s_out, state_words, "state_out");
    ss_expect_guard(e, o, act, "o");
    if (graph)
        TU_OK(memra_graph_destroy(e, graph));

    void *bufs[] = {d_q.ptr,
                    d_k.ptr,
                    d_v.ptr,
                    d_g.ptr,
                    d_b.ptr,
                    ref_state.ptr,
                    ref_o.ptr,
                    table.ptr,
                    s_in.ptr,
                    o.ptr,
                    c->in_place ? NULL : s_out.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            tu_free(e, bufs[i]);
    float *host[] = {q, k, v, g_log, beta, state0, ref_rows, ref_state_t[0], ref_state_t[1]};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    TU_OK(memra_engine_destroy(e));
}

/* ---- The grids ---- */

/* Both shapes of the suite (1 x 2 heads, and ornith's 16 x 32), every d_conv, eager and graph:
 * {num_k, num_v, d_conv, t, graph, in_place}. */
static ss_case ss_conv_cases[] = {
    {1, 2, 1, 3, false, false},  {1, 2, 2, 3, false, false}, {1, 2, 3, 5, false, false},
    {1, 2, 4, 8, false, false},  {1, 2, 5, 2, true, false},  {1, 2, 6, 1, false, false},
    {1, 2, 7, 4, true, false},   {1, 2, 8, 6, false, false}, {16, 32, 4, 4, false, false},
    {16, 32, 4, 3, true, false},
};

/* t from 1 to 16, in place and out of place, eager and graph. */
static ss_case ss_scan_cases[] = {
    {1, 2, 4, 1, false, false},   {1, 2, 4, 2, false, true},  {1, 2, 4, 3, true, false},
    {1, 2, 4, 5, true, true},     {1, 2, 4, 8, false, false}, {1, 2, 4, 16, false, true},
    {16, 32, 4, 4, false, false}, {16, 32, 4, 3, true, true},
};

TU_PARAM_TEST_BACKENDS(ss_case, TU_PARAMS(ss_case, ss_conv_cases), single_sequence,
                       conv_matches_table_op, ss_run_conv)
TU_PARAM_TEST_BACKENDS(ss_case, TU_PARAMS(ss_case, ss_scan_cases), single_sequence,
                       scan_matches_table_op, ss_run_scan)

/* ---- Argument rules of the direct ops ---- */

static void ss_expect_refused(MemraStatus st, const char *fn, const char *a, const char *b)
{
    const char *msg = memra_last_error_message();
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT, "%s returned %s: %s", fn,
                 memra_status_string(st), msg);
    cr_expect(tu_has_word(msg, fn) && tu_has_word(msg, a) && (b == NULL || tu_has_word(msg, b)),
              "the message names %s, '%s'%s%s: %s", fn, a, b ? " and " : "", b ? b : "", msg);
}

static void ss_rules(MemraBackend backend)
{
    const size_t num_v = 2, row = num_v * MEMRA_D_STATE, sw = num_v * MEMRA_D_STATE * MEMRA_D_STATE;
    const uint64_t seed = tu_fresh_seed();
    MemraEngine *e = tu_engine(backend);
    float *host = ss_host(2 * sw);
    tu_varied(host, 2 * sw, seed, 0.3f);
    MemraSliceMutF32 act = tu_upload(e, host, 3 * row), heads = tu_upload(e, host, 2 * num_v);
    MemraSliceMutF32 states = tu_upload(e, host, 2 * sw);
    MemraSliceMutF32 o = tu_poisoned(e, row);
    for (size_t i = 0; i < 2 * num_v; i++)
        host[i] = 0.25f;
    tu_write(e, host, 2 * num_v, heads);
    MemraSliceF32 q = tu_sub(act, 0, row), k = tu_sub(act, row, row), v = tu_sub(act, 2 * row, row);
    MemraSliceF32 g = tu_sub(heads, 0, num_v), b = tu_sub(heads, num_v, num_v);

    /* In place is the very same address; a state_out shifted by one column into state_in is
     * an overlap and is refused, as is an o inside a state. */
    TU_OK(memra_gdn_scan_s128(e, q, k, v, g, b, tu_sub(states, 0, sw), tu_sub_mut(states, 0, sw), o,
                              num_v, 1, TU_GDN_SCALE));
    ss_expect_refused(memra_gdn_scan_s128(e, q, k, v, g, b, tu_sub(states, 0, sw),
                                          tu_sub_mut(states, MEMRA_D_STATE, sw), o, num_v, 1,
                                          TU_GDN_SCALE),
                      "memra_gdn_scan_s128", "state_out", "state_in");
    ss_expect_refused(memra_gdn_scan_s128(e, q, k, v, g, b, tu_sub(states, 0, sw),
                                          tu_sub_mut(states, sw, sw), tu_sub_mut(states, 0, row),
                                          num_v, 1, TU_GDN_SCALE),
                      "memra_gdn_scan_s128", "o", "state_in");
    /* In place still checks state_in as a view of its own. */
    ss_expect_refused(memra_gdn_scan_s128(e, q, k, v, g, b, tu_sub(states, 0, sw - 1),
                                          tu_sub_mut(states, 0, sw), o, num_v, 1, TU_GDN_SCALE),
                      "memra_gdn_scan_s128", "state_in", NULL);
    ss_expect_refused(memra_gdn_scan_s128(e, q, k, v, g, b, tu_sub(states, 0, sw),
                                          tu_sub_mut(states, sw, sw), o, num_v, 0, TU_GDN_SCALE),
                      "memra_gdn_scan_s128", "t", NULL);

    /* conv: with d_conv == 1 there is no ring, so an empty conv_state is accepted (and so is
     * a non-empty one, which is not touched); with d_conv == 2 a short ring is refused, and the
     * ring may not overlap conv_out. */
    const size_t conv_dim = 3 * MEMRA_D_STATE;
    MemraSliceMutF32 x = tu_upload(e, host, 2 * conv_dim), w = tu_upload(e, host, 2 * conv_dim);
    MemraSliceMutF32 out = tu_poisoned(e, 2 * conv_dim);
    TU_OK(memra_ssm_conv1d_fused_decode(e, tu_sub(x, 0, conv_dim), (MemraSliceMutF32){NULL, 0},
                                        tu_sub(w, 0, conv_dim), tu_sub_mut(out, 0, conv_dim),
                                        conv_dim, 1));
    MemraSliceMutF32 untouched = tu_upload(e, host, conv_dim);
    TU_OK(memra_ssm_conv1d_fused_decode(e, tu_sub(x, 0, conv_dim), untouched,
                                        tu_sub(w, 0, conv_dim), tu_sub_mut(out, 0, conv_dim),
                                        conv_dim, 1));
    float *kept = ss_read(e, untouched, conv_dim);
    tu_expect_bits(kept, host, conv_dim, "a ring passed with d_conv == 1 is not touched");
    free(kept);
    ss_expect_refused(memra_ssm_conv1d_fused_decode(
                          e, tu_sub(x, 0, conv_dim), tu_sub_mut(untouched, 0, conv_dim - 1),
                          tu_view(w), tu_sub_mut(out, 0, conv_dim), conv_dim, 2),
                      "memra_ssm_conv1d_fused_decode", "conv_state", NULL);
    ss_expect_refused(memra_ssm_conv1d_fused_decode(
                          e, tu_sub(x, 0, conv_dim), tu_sub_mut(out, conv_dim / 2, conv_dim),
                          tu_view(w), tu_sub_mut(out, 0, conv_dim), conv_dim, 2),
                      "memra_ssm_conv1d_fused_decode", "conv_state", "conv_out");

    void *bufs[] = {act.ptr, heads.ptr, states.ptr, o.ptr, x.ptr, w.ptr, out.ptr, untouched.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
    free(host);
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(single_sequence, argument_rules, ss_rules)
