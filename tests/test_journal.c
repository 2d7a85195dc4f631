/*
 * Journal mode, commit and rollback (memra_gdn_verify in JOURNAL mode, memra_gdn_journal_commit,
 * memra_gdn_rollback) against the per-row program: t chained calls of
 * memra_ssm_conv1d_fused_decode_b_view, memra_gdn_prep_decode_b and
 * memra_gdn_scan_s128_batched_view with b_n = 1 on the same backend, run on exactly the rows a
 * host accepted.
 *
 * Journal histories: b_n sequences, each with a ring, ONE state buffer and a zero-filled (empty)
 * journal of memra_gdn_journal_len(t_max) words, go through several verifies in a row, with
 * accepted counts drawn per sequence and per step (0 and the whole journal included), t drawn
 * per step, the sequences bound to different table rows at every step, and commits in between
 * and at the end. Every verify's o (and the optional activations the history asks for) must be
 * memcmp-equal to the per-row program's outputs for its rows, started from the per-row
 * program's ring and state after exactly the rows accepted so far; the ring and state the
 * verify writes back must be those (the folded ones), and after a commit the ring and state
 * must equal the per-row program run on exactly the accepted rows. Outputs are poisoned before
 * every call; rings, states and journals are followed by guard words that must not change. In
 * graph mode one captured verify and one captured commit serve the whole history, the table
 * and the counts rewritten in device memory between replays.
 *
 * Bad counts (a count above the rows a journal holds, a count on an empty journal, a rollback
 * count of 0 or above t) must leave that sequence's ring, state, journal and outputs untouched
 * while the others proceed, and make the next synchronising call return INVALID_ARGUMENT with
 * a message naming the operation, the sequence and the value; the call after that succeeds.
 *
 * Rollback: after a SNAPSHOTS verify, memra_gdn_rollback with counts in 1..t must leave the
 * canonical state and the ring bit-identical to the per-row program after exactly that many
 * rows, eagerly and captured together with the verify in one graph.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

#define JR_B_MAX ((size_t)32)
#define JR_GUARD ((size_t)16)
#define JR_GAP ((size_t)64)

/* ---- Small helpers ---- */

static size_t jr_below(uint64_t *rng, size_t n)
{
    return (size_t)(tu_xorshift64(rng) % n);
}

/* How a tensor's value heads are laid out (see tu_to_tiled). */
typedef struct jr_layout {
    size_t rows, row_words, offset, block;
} jr_layout;

/* Copies `src` (the library's head order) into `dst` in the per-row program's order: the
 * tiled positions of tu_tiled_head for the GROUPED order, unchanged for TILED. */
static void jr_to_ref(MemraHeadOrder order, const tu_gdn_shape *sh, float *dst, const float *src,
                      jr_layout l)
{
    if (order == MEMRA_HEAD_ORDER_GROUPED)
        tu_to_tiled(dst, src, l.rows, l.row_words, l.offset, l.block, sh->num_k, sh->num_v);
    else if (l.rows * l.row_words != 0)
        memcpy(dst, src, l.rows * l.row_words * sizeof *dst);
}

static jr_layout jr_ring_layout(const tu_gdn_shape *sh, size_t rows)
{
    return (jr_layout){rows, sh->ring_words, 2 * sh->key_dim * sh->pad, MEMRA_D_STATE * sh->pad};
}

static jr_layout jr_state_layout(const tu_gdn_shape *sh, size_t rows)
{
    return (jr_layout){rows, sh->state_words, 0, (size_t)MEMRA_D_STATE * MEMRA_D_STATE};
}

/* The optional activations, in MemraVerifyArgs order, then o. */
enum { JR_CONV_OUTS, JR_Q_L2, JR_K_L2, JR_V_G, JR_BETA, JR_G_LOG, JR_O, JR_N_OUT };
#define JR_N_OPTIONAL 6
#define JR_ALL_OUTS ((1u << JR_N_OPTIONAL) - 1)

static const char *const jr_out_name[JR_N_OUT] = {"conv_outs", "q_l2",  "k_l2", "v_g",
                                                  "beta",      "g_log", "o"};

/* Words per row of output i, and its head layout for `rows` rows. */
static jr_layout jr_out_layout(const tu_gdn_shape *sh, int i, size_t rows)
{
    switch (i) {
    case JR_CONV_OUTS:
        return (jr_layout){rows, sh->conv_dim, 2 * sh->key_dim, MEMRA_D_STATE};
    case JR_BETA:
    case JR_G_LOG:
        return (jr_layout){rows, sh->num_v, 0, 1};
    }
    return (jr_layout){rows, sh->value_dim, 0, MEMRA_D_STATE};
}

/* Weights on the engine, in the library's order and in the per-row program's. */
typedef struct jr_weights {
    MemraSliceMutF32 w, dt_bias, a;
    MemraSliceMutF32 ref_w, ref_dt_bias, ref_a;
} jr_weights;

static void jr_weights_make(MemraEngine *e, const tu_gdn_shape *sh, MemraHeadOrder order,
                            uint64_t seed, jr_weights *wt)
{
    const size_t nw = sh->conv_dim * sh->d_conv, nv = sh->num_v;
    float *w = tu_host_array(nw), *dt_bias = tu_host_array(nv), *a = tu_host_array(nv);
    float *rw = tu_host_array(nw), *rdt = tu_host_array(nv), *ra = tu_host_array(nv);
    tu_gdn_weights(sh, seed, w, dt_bias, a);
    jr_to_ref(order, sh, rw, w,
              (jr_layout){1, nw, 2 * sh->key_dim * sh->d_conv, MEMRA_D_STATE * sh->d_conv});
    jr_to_ref(order, sh, rdt, dt_bias, (jr_layout){1, nv, 0, 1});
    jr_to_ref(order, sh, ra, a, (jr_layout){1, nv, 0, 1});
    wt->w = tu_upload(e, w, nw);
    wt->dt_bias = tu_upload(e, dt_bias, nv);
    wt->a = tu_upload(e, a, nv);
    wt->ref_w = tu_upload(e, rw, nw);
    wt->ref_dt_bias = tu_upload(e, rdt, nv);
    wt->ref_a = tu_upload(e, ra, nv);
    float *all[] = {w, dt_bias, a, rw, rdt, ra};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* ---- The per-row program ---- */

/* What the per-row program computes for `n` rows of one sequence (its order): the outputs of
 * every row and the ring and state after every row. */
typedef struct jr_rows {
    size_t n;
    float *out[JR_N_OUT];
    float *ring, *state;
} jr_rows;

static void jr_rows_alloc(const tu_gdn_shape *sh, size_t n, jr_rows *r)
{
    r->n = n;
    for (int i = 0; i < JR_N_OUT; i++) {
        jr_layout l = jr_out_layout(sh, i, n);
        r->out[i] = tu_host_array(l.rows * l.row_words);
    }
    r->ring = tu_host_array(n * sh->ring_words);
    r->state = tu_host_array(n * sh->state_words);
}

static void jr_rows_free(jr_rows *r)
{
    for (int i = 0; i < JR_N_OUT; i++)
        free(r->out[i]);
    free(r->ring);
    free(r->state);
    memset(r, 0, sizeof *r);
}

/*
 * Runs `n` rows (qkv [n, conv_dim], beta_raw and alpha [n, num_v], the per-row program's order)
 * from `ring0` and `state0` through the three per-row operations with b_n = 1, the state
 * ping-ponging between two buffers through the table [ring, s0, s1, ring, s1, s0] as the seed's
 * per-row program does. Every output is poisoned before its row.
 */
static void jr_per_row(MemraEngine *e, const tu_gdn_shape *sh, const jr_weights *wt,
                       const float *ring0, const float *state0, size_t n, const float *qkv,
                       const float *beta_raw, const float *alpha, jr_rows *r)
{
    const size_t cd = sh->conv_dim, vd = sh->value_dim, nv = sh->num_v;
    const size_t rw = sh->ring_words, sw = sh->state_words;
    jr_rows_alloc(sh, n, r);
    if (n == 0)
        return;
    MemraSliceMutF32 ring = tu_poisoned(e, rw + 1);
    if (rw)
        tu_write(e, ring0, rw, ring);
    MemraSliceMutF32 s0 = tu_upload(e, state0, sw);
    MemraSliceMutF32 s1 = tu_poisoned(e, sw);
    const uint64_t host_table[6] = {tu_addr(ring), tu_addr(s0), tu_addr(s1),
                                    tu_addr(ring), tu_addr(s1), tu_addr(s0)};
    MemraSliceMutU64 table = tu_upload_u64(e, host_table, 6);
    MemraSliceMutF32 in_qkv = tu_upload(e, qkv, n * cd);
    MemraSliceMutF32 in_beta_raw = tu_upload(e, beta_raw, n * nv);
    MemraSliceMutF32 in_alpha = tu_upload(e, alpha, n * nv);
    MemraSliceMutF32 out[JR_N_OUT];
    for (int i = 0; i < JR_N_OUT; i++)
        out[i] = tu_poisoned(e, jr_out_layout(sh, i, 1).row_words);

    for (size_t row = 0; row < n; row++) {
        /* The table row whose canonical entry holds the state after `row` rows. */
        const size_t base = tu_state_slot(row) == 1 ? 0 : 3;
        for (int i = 0; row > 0 && i < JR_N_OUT; i++)
            tu_poison(e, out[i]);
        TU_OK(memra_ssm_conv1d_fused_decode_b_view(e, tu_sub(in_qkv, row * cd, cd),
                                                   tu_sub_u64(table, base, 1), tu_view(wt->ref_w),
                                                   out[JR_CONV_OUTS], cd, sh->d_conv, 1));
        TU_OK(memra_gdn_prep_decode_b(
            e, tu_view(out[JR_CONV_OUTS]), tu_sub(in_beta_raw, row * nv, nv),
            tu_sub(in_alpha, row * nv, nv), tu_view(wt->ref_dt_bias), tu_view(wt->ref_a),
            out[JR_Q_L2], out[JR_K_L2], out[JR_V_G], out[JR_BETA], out[JR_G_LOG], MEMRA_D_STATE, nv,
            sh->num_k, sh->key_dim, TU_GDN_EPS, cd, 1));
        TU_OK(memra_gdn_scan_s128_batched_view(
            e, tu_view(out[JR_Q_L2]), tu_view(out[JR_K_L2]), tu_view(out[JR_V_G]),
            tu_view(out[JR_G_LOG]), tu_view(out[JR_BETA]), tu_sub_u64(table, base + 1, 1),
            tu_sub_u64(table, base + 2, 1), out[JR_O], nv, 1, TU_GDN_SCALE));
        for (int i = 0; i < JR_N_OUT; i++) {
            const size_t words = jr_out_layout(sh, i, 1).row_words;
            tu_download_into(e, tu_view(out[i]), r->out[i] + row * words);
        }
        if (rw)
            tu_download_into(e, tu_sub(ring, 0, rw), r->ring + row * rw);
        tu_download_into(e, tu_view(tu_state_slot(row + 1) == 2 ? s1 : s0), r->state + row * sw);
    }
    cr_assert(tu_all_finite(r->out[JR_O], n * vd), "the per-row program's o is not finite");
    void *bufs[] = {ring.ptr, s0.ptr, s1.ptr, table.ptr, in_qkv.ptr, in_beta_raw.ptr, in_alpha.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
    for (int i = 0; i < JR_N_OUT; i++)
        tu_free(e, out[i].ptr);
}

/* ---- Sequence buffers with guard words ---- */

static float jr_guard_words[JR_GUARD];

static MemraSliceMutF32 jr_guarded(MemraEngine *e, const float *init, size_t words, bool zero)
{
    MemraSliceMutF32 s = zero ? tu_zeros(e, words + JR_GUARD) : tu_poisoned(e, words + JR_GUARD);
    if (init != NULL && words)
        tu_write(e, init, words, s);
    MemraSliceF32 src = {jr_guard_words, JR_GUARD};
    TU_OK(memra_htod_f32_into(e, src, tu_sub_mut(s, words, JR_GUARD)));
    return s;
}

/* Reads the first `words` words of a guarded buffer into `dst` (may be NULL) and checks its
 * guard. */
static void jr_read_guarded(MemraEngine *e, MemraSliceMutF32 s, size_t words, float *dst,
                            const char *desc, const char *what)
{
    float *all = tu_download(e, s);
    if (dst != NULL && words)
        memcpy(dst, all, words * sizeof *all);
    tu_expect_bits(all + words, jr_guard_words, JR_GUARD, "%s: the guard words after %s", desc,
                   what);
    free(all);
}

/* ---- Bad counts: the report of the next synchronising call ---- */

/* Which synchronising call must carry a report. */
enum { JR_SYNC_ENGINE, JR_SYNC_DTOH_F32, JR_SYNC_DTOH_U32, JR_N_SYNC };

static const char *const jr_sync_name[JR_N_SYNC] = {"memra_engine_synchronize", "memra_dtoh_f32",
                                                    "memra_dtoh_u32"};

/* The report of bad counts made by `fn`: the next synchronising call (`how`) must return
 * INVALID_ARGUMENT naming `fn`, one of the bad sequences and its value; the call after that
 * must succeed. `seqs` and `values` hold the `n_bad` bad table rows and their counts. */
static MemraStatus jr_empty_step(MemraEngine *e, void *user)
{
    (void)e;
    (void)user;
    return MEMRA_STATUS_OK;
}

static void jr_expect_report(MemraEngine *e, int how, const char *fn, const size_t *seqs,
                             const uint32_t *values, size_t n_bad, MemraSliceF32 some_f32,
                             MemraSliceU32 some_u32, const char *desc)
{
    MemraStatus st = MEMRA_STATUS_OK;
    float f32[4];
    uint32_t u32[4];
    /* The library's own waits (here a graph's capture and destroy, which wait for the engine's
     * work) must not swallow the report meant for the host's next synchronising call. */
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(e, jr_empty_step, NULL, &g));
    TU_OK(memra_graph_destroy(e, g));
    switch (how) {
    case JR_SYNC_ENGINE:
        st = memra_engine_synchronize(e);
        break;
    case JR_SYNC_DTOH_F32: {
        MemraSliceF32 src = {some_f32.ptr, some_f32.len < 4 ? some_f32.len : 4};
        MemraSliceMutF32 dst = {f32, 4};
        st = memra_dtoh_f32(e, src, dst);
        break;
    }
    case JR_SYNC_DTOH_U32: {
        MemraSliceU32 src = {some_u32.ptr, some_u32.len < 4 ? some_u32.len : 4};
        MemraSliceMutU32 dst = {u32, 4};
        st = memra_dtoh_u32(e, src, dst);
        break;
    }
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT,
                 "%s: %s after %s with a bad count returned %s, expected "
                 "MEMRA_STATUS_INVALID_ARGUMENT",
                 desc, jr_sync_name[how], fn, memra_status_string(st));
    cr_assert(tu_has_word(msg, fn), "%s: the report \"%s\" does not name %s", desc, msg, fn);
    bool named = false;
    for (size_t i = 0; i < n_bad && !named; i++) {
        char seq[32], value[32];
        snprintf(seq, sizeof seq, "%zu", seqs[i]);
        snprintf(value, sizeof value, "%" PRIu32, values[i]);
        named = tu_has_word(msg, seq) && tu_has_word(msg, value);
    }
    cr_assert(named,
              "%s: the report \"%s\" names no bad sequence together with its count (%zu "
              "bad, the first sequence %zu with %" PRIu32 ")",
              desc, msg, n_bad, seqs[0], values[0]);
    st = memra_engine_synchronize(e);
    cr_assert_eq(st, MEMRA_STATUS_OK,
                 "%s: the call after the report returned %s (%s): the engine must stay usable",
                 desc, memra_status_string(st), memra_last_error_message());
}

/* ---- Journal histories ---- */

typedef struct jr_case {
    size_t num_k, num_v, d_conv, t_max, b, steps;
    MemraHeadOrder order;
    /* Which optional activations the verifies are given (bit i: output i). */
    unsigned outs;
    bool graph;
    /* Also give bad counts: to a verify on empty journals, to later verifies, to a commit. */
    bool bad;
    uint64_t seed;
} jr_case;

/* One sequence: its buffers on the engine, and the per-row program's view of it. */
typedef struct jr_seq {
    MemraSliceMutF32 ring, state, journal;
    /* The per-row program's ring and state after every row accepted so far (its order). */
    float *ref_ring, *ref_state;
    /* The rows the journal holds: the per-row program's run of them from ref_ring/ref_state. */
    jr_rows held;
} jr_seq;

typedef struct jr_history {
    const jr_case *c;
    char desc[256];
    MemraEngine *e;
    tu_gdn_shape sh;
    size_t jlen;
    jr_weights wt;
    jr_seq seq[JR_B_MAX];
    /* Table row -> sequence, redrawn at every step. */
    size_t slot_seq[JR_B_MAX];
    MemraSliceMutF32 qkv, beta_raw, alpha;
    MemraSliceMutU32 accepted;
    MemraSliceMutU64 table;
    /* Every output view of a verify of up to t_max rows, JR_GAP poisoned words apart. */
    MemraSliceMutF32 arena;
    size_t off[JR_N_OUT];
    MemraVerifyArgs vargs, cargs;
    MemraGraph *vgraph, *cgraph;
    uint64_t rng;
    int sync_turn;
} jr_history;

static void jr_history_desc(jr_history *s, const char *fmt, size_t step)
{
    const jr_case *c = s->c;
    snprintf(s->desc, sizeof s->desc,
             "journal history num_k=%zu num_v=%zu d_conv=%zu t_max=%zu b_n=%zu %s outs=0x%02x "
             "%s%s, step %zu%s, " TU_SEED_FMT,
             c->num_k, c->num_v, c->d_conv, c->t_max, c->b,
             c->order == MEMRA_HEAD_ORDER_GROUPED ? "GROUPED" : "TILED", c->outs,
             c->graph ? "graph-replayed" : "eager", c->bad ? " with bad counts" : "", step, fmt,
             c->seed);
}

static void jr_fill_args(jr_history *s, size_t t)
{
    const tu_gdn_shape *sh = &s->sh;
    const size_t b = s->c->b;
    MemraVerifyArgs *v = &s->vargs;
    TU_OK(tu_verify_args_sizes(v, sh, t, b, MEMRA_VERIFY_MODE_JOURNAL, s->c->order));
    v->qkv = tu_sub(s->qkv, 0, b * t * sh->conv_dim);
    v->table = tu_view_u64(s->table);
    v->w = tu_view(s->wt.w);
    v->beta_raw = tu_sub(s->beta_raw, 0, b * t * sh->num_v);
    v->alpha = tu_sub(s->alpha, 0, b * t * sh->num_v);
    v->dt_bias = tu_view(s->wt.dt_bias);
    v->a = tu_view(s->wt.a);
    v->accepted = tu_view_u32(s->accepted);
    MemraSliceMutF32 *const views[JR_N_OUT] = {&v->conv_outs, &v->q_l2,  &v->k_l2, &v->v_g,
                                               &v->beta,      &v->g_log, &v->o};
    for (int i = 0; i < JR_N_OUT; i++) {
        jr_layout l = jr_out_layout(sh, i, b * t);
        if (i == JR_O || ((s->c->outs >> i) & 1u))
            *views[i] = tu_sub_mut(s->arena, s->off[i], l.rows * l.row_words);
    }

    /* The commit reads only what it documents; everything else stays as init left it (t = 0,
     * scale NaN, no rows, no outputs). */
    MemraVerifyArgs *m = &s->cargs;
    TU_OK(memra_verify_args_init(m));
    m->mode = MEMRA_VERIFY_MODE_JOURNAL;
    m->head_order = s->c->order;
    m->num_k = sh->num_k;
    m->num_v = sh->num_v;
    m->d_conv = sh->d_conv;
    m->b_n = b;
    m->eps = TU_GDN_EPS;
    m->table = tu_view_u64(s->table);
    m->w = tu_view(s->wt.w);
    m->dt_bias = tu_view(s->wt.dt_bias);
    m->a = tu_view(s->wt.a);
    m->accepted = tu_view_u32(s->accepted);
}

static MemraStatus jr_verify_step(MemraEngine *e, void *user)
{
    return memra_gdn_verify(e, &((jr_history *)user)->vargs);
}

static MemraStatus jr_commit_step(MemraEngine *e, void *user)
{
    return memra_gdn_journal_commit(e, &((jr_history *)user)->cargs);
}

/* Points table row b at the buffers of sequence slot_seq[b]. */
static void jr_bind(jr_history *s)
{
    uint64_t host[3 * JR_B_MAX];
    for (size_t b = 0; b < s->c->b; b++) {
        const jr_seq *q = &s->seq[s->slot_seq[b]];
        host[3 * b + 0] = tu_addr(q->ring);
        host[3 * b + 1] = tu_addr(q->state);
        host[3 * b + 2] = tu_addr(q->journal);
    }
    tu_write_u64(s->e, host, 3 * s->c->b, s->table);
}

static size_t jr_out_capacity(const jr_history *s, int i)
{
    jr_layout l = jr_out_layout(&s->sh, i, s->c->b * s->c->t_max);
    return l.rows * l.row_words;
}

static bool jr_out_given(const jr_history *s, int i)
{
    return i == JR_O || ((s->c->outs >> i) & 1u);
}

/* The ring, state and journal of a sequence as they are on the engine, guards included. */
typedef struct jr_saved {
    float *ring, *state, *journal;
} jr_saved;

static void jr_save(jr_history *s, const jr_seq *q, jr_saved *out)
{
    out->ring = tu_download(s->e, q->ring);
    out->state = tu_download(s->e, q->state);
    out->journal = tu_download(s->e, q->journal);
}

static void jr_expect_saved(jr_history *s, const jr_seq *q, jr_saved *was, size_t slot)
{
    float *ring = tu_download(s->e, q->ring);
    float *state = tu_download(s->e, q->state);
    float *journal = tu_download(s->e, q->journal);
    tu_expect_bits(ring, was->ring, q->ring.len, "%s: the ring of table row %zu (a bad count)",
                   s->desc, slot);
    tu_expect_bits(state, was->state, q->state.len, "%s: the state of table row %zu (a bad count)",
                   s->desc, slot);
    tu_expect_bits(journal, was->journal, q->journal.len,
                   "%s: the journal of table row %zu (a bad count)", s->desc, slot);
    free(ring);
    free(state);
    free(journal);
    free(was->ring);
    free(was->state);
    free(was->journal);
}

/* The ring and state of a sequence must be the per-row program's after the rows accepted so
 * far (in the library's head order on the engine, moved to the program's order here). */
static void jr_expect_folded(jr_history *s, const jr_seq *q, size_t slot, const char *when)
{
    const tu_gdn_shape *sh = &s->sh;
    float *ring = tu_host_array(sh->ring_words), *state = tu_host_array(sh->state_words);
    float *ring_ref = tu_host_array(sh->ring_words), *state_ref = tu_host_array(sh->state_words);
    jr_read_guarded(s->e, q->ring, sh->ring_words, ring, s->desc, "a ring");
    jr_read_guarded(s->e, q->state, sh->state_words, state, s->desc, "a state");
    jr_read_guarded(s->e, q->journal, s->jlen, NULL, s->desc, "a journal");
    jr_to_ref(s->c->order, sh, ring_ref, ring, jr_ring_layout(sh, 1));
    jr_to_ref(s->c->order, sh, state_ref, state, jr_state_layout(sh, 1));
    tu_expect_bits(ring_ref, q->ref_ring, sh->ring_words,
                   "%s: the ring of table row %zu %s against the per-row program on the accepted "
                   "rows",
                   s->desc, slot, when);
    tu_expect_bits(state_ref, q->ref_state, sh->state_words,
                   "%s: the state of table row %zu %s against the per-row program on the "
                   "accepted rows",
                   s->desc, slot, when);
    free(ring);
    free(state);
    free(ring_ref);
    free(state_ref);
}

/* Folds the first n held rows into the per-row program's ring and state of a sequence and
 * empties its held rows. */
static void jr_ref_fold(jr_history *s, jr_seq *q, size_t n)
{
    cr_assert(n <= q->held.n);
    if (n > 0) {
        memcpy(q->ref_ring, q->held.ring + (n - 1) * s->sh.ring_words,
               s->sh.ring_words * sizeof(float));
        memcpy(q->ref_state, q->held.state + (n - 1) * s->sh.state_words,
               s->sh.state_words * sizeof(float));
    }
    jr_rows_free(&q->held);
}

/* A count for a sequence holding `held` rows: 0 and all of them often, anything between
 * otherwise. */
static uint32_t jr_draw_count(jr_history *s, size_t held)
{
    if (held == 0)
        return 0;
    switch (jr_below(&s->rng, 4)) {
    case 0:
        return 0;
    case 1:
        return (uint32_t)held;
    }
    return (uint32_t)(1 + jr_below(&s->rng, held));
}

/* A count no journal holding `held` rows can satisfy. */
static uint32_t jr_draw_bad(jr_history *s, size_t held)
{
    switch (jr_below(&s->rng, 3)) {
    case 0:
        return (uint32_t)held + 1;
    case 1:
        return (uint32_t)held + 7;
    }
    return UINT32_MAX;
}

/* Checks what must keep its poison in the output arena after a verify of t rows: the gaps,
 * the outputs not given, the part of each view beyond b_n * t rows. */
static void jr_expect_arena_poison(const jr_history *s, const float *arena, size_t t)
{
    size_t at = 0;
    for (int i = 0; i < JR_N_OUT; i++) {
        tu_expect_poison(arena + at, s->off[i] - at, "%s: the gap before %s", s->desc,
                         jr_out_name[i]);
        const size_t cap = jr_out_capacity(s, i);
        jr_layout l = jr_out_layout(&s->sh, i, s->c->b * t);
        const size_t used = jr_out_given(s, i) ? l.rows * l.row_words : 0;
        tu_expect_poison(arena + s->off[i] + used, cap - used, "%s: %s beyond what was asked for",
                         s->desc, jr_out_name[i]);
        at = s->off[i] + cap;
    }
    tu_expect_poison(arena + at, s->arena.len - at, "%s: the gap after the last view", s->desc);
}

static void jr_history_setup(jr_history *s, const jr_case *c, MemraBackend backend)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    jr_history_desc(s, " (setup)", 0);
    s->e = tu_engine(backend);
    s->sh = tu_gdn_shape_make(c->num_k, c->num_v, c->d_conv);
    const tu_gdn_shape *sh = &s->sh;
    TU_OK(memra_gdn_journal_len(MEMRA_D_STATE, c->num_k, c->num_v, c->t_max, &s->jlen));
    s->rng = tu_mix_seed(c->seed, 5) | 1;
    tu_varied(jr_guard_words, JR_GUARD, tu_mix_seed(c->seed, 6), 1.0f);
    jr_weights_make(s->e, sh, c->order, tu_mix_seed(c->seed, 0), &s->wt);

    float *ring0 = tu_host_array(sh->ring_words), *state0 = tu_host_array(sh->state_words);
    for (size_t q = 0; q < c->b; q++) {
        jr_seq *sq = &s->seq[q];
        tu_gdn_sequence(sh, tu_mix_seed(c->seed, 100 + q), ring0, state0);
        sq->ring = jr_guarded(s->e, ring0, sh->ring_words, false);
        sq->state = jr_guarded(s->e, state0, sh->state_words, false);
        sq->journal = jr_guarded(s->e, NULL, s->jlen, true);
        sq->ref_ring = tu_host_array(sh->ring_words);
        sq->ref_state = tu_host_array(sh->state_words);
        jr_to_ref(c->order, sh, sq->ref_ring, ring0, jr_ring_layout(sh, 1));
        jr_to_ref(c->order, sh, sq->ref_state, state0, jr_state_layout(sh, 1));
        s->slot_seq[q] = q;
    }
    free(ring0);
    free(state0);

    const size_t rows = c->b * c->t_max;
    s->qkv = tu_poisoned(s->e, rows * sh->conv_dim);
    s->beta_raw = tu_poisoned(s->e, rows * sh->num_v);
    s->alpha = tu_poisoned(s->e, rows * sh->num_v);
    TU_OK(memra_alloc_u32(s->e, c->b, MEMRA_ALLOC_INIT_ZEROED, &s->accepted));
    TU_OK(memra_alloc_u64(s->e, 3 * c->b, MEMRA_ALLOC_INIT_ZEROED, &s->table));
    size_t at = JR_GAP;
    for (int i = 0; i < JR_N_OUT; i++) {
        s->off[i] = at;
        at += jr_out_capacity(s, i) + JR_GAP;
    }
    s->arena = tu_poisoned(s->e, at);
    jr_fill_args(s, c->t_max);

    if (c->graph) {
        /* Captured on scratch sequences with empty journals and zero counts (the warm-ups run);
         * every replay below works on the table as rewritten before it. */
        jr_seq scratch[JR_B_MAX];
        uint64_t host[3 * JR_B_MAX];
        for (size_t b = 0; b < c->b; b++) {
            scratch[b].ring = tu_zeros(s->e, sh->ring_words + 1);
            scratch[b].state = tu_zeros(s->e, sh->state_words);
            scratch[b].journal = tu_zeros(s->e, s->jlen);
            host[3 * b + 0] = tu_addr(scratch[b].ring);
            host[3 * b + 1] = tu_addr(scratch[b].state);
            host[3 * b + 2] = tu_addr(scratch[b].journal);
        }
        tu_write_u64(s->e, host, 3 * c->b, s->table);
        float *qkv = tu_host_array(rows * sh->conv_dim), *br = tu_host_array(rows * sh->num_v),
              *al = tu_host_array(rows * sh->num_v);
        tu_gdn_rows(sh, rows, tu_mix_seed(c->seed, 7), qkv, br, al);
        tu_write(s->e, qkv, rows * sh->conv_dim, s->qkv);
        tu_write(s->e, br, rows * sh->num_v, s->beta_raw);
        tu_write(s->e, al, rows * sh->num_v, s->alpha);
        free(qkv);
        free(br);
        free(al);
        TU_OK(memra_graph_capture(s->e, jr_verify_step, s, &s->vgraph));
        TU_OK(memra_graph_capture(s->e, jr_commit_step, s, &s->cgraph));
        TU_OK(memra_engine_synchronize(s->e));
        for (size_t b = 0; b < c->b; b++) {
            tu_free(s->e, scratch[b].ring.ptr);
            tu_free(s->e, scratch[b].state.ptr);
            tu_free(s->e, scratch[b].journal.ptr);
        }
    }
}

static void jr_history_teardown(jr_history *s)
{
    if (s->vgraph)
        TU_OK(memra_graph_destroy(s->e, s->vgraph));
    if (s->cgraph)
        TU_OK(memra_graph_destroy(s->e, s->cgraph));
    for (size_t q = 0; q < s->c->b; q++) {
        free(s->seq[q].ref_ring);
        free(s->seq[q].ref_state);
        jr_rows_free(&s->seq[q].held);
    }
    TU_OK(memra_engine_destroy(s->e));
}

/* After an operation with `n_bad` bad counts: the report, or no report at all. */
static void jr_after_call(jr_history *s, const char *fn, const size_t *bad_slots,
                          const uint32_t *bad_values, size_t n_bad)
{
    if (n_bad == 0) {
        MemraStatus st = memra_engine_synchronize(s->e);
        cr_assert_eq(st, MEMRA_STATUS_OK, "%s: memra_engine_synchronize after %s returned %s (%s)",
                     s->desc, fn, memra_status_string(st), memra_last_error_message());
        return;
    }
    jr_expect_report(s->e, s->sync_turn++ % JR_N_SYNC, fn, bad_slots, bad_values, n_bad,
                     tu_view(s->qkv), tu_view_u32(s->accepted), s->desc);
}

/* One journal verify of t rows: draws the binding, the rows and the counts, runs it, and checks
 * it against the per-row program. `bad_mode`: 0 none, 1 one bad count, 2 two. */
static void jr_verify_once(jr_history *s, size_t step, size_t t, int bad_mode, bool first_empty)
{
    const jr_case *c = s->c;
    const tu_gdn_shape *sh = &s->sh;
    const size_t b_n = c->b, cd = sh->conv_dim, nv = sh->num_v;
    char when[64];
    snprintf(when, sizeof when, " (verify of t=%zu)", t);
    jr_history_desc(s, when, step);

    /* A new binding of sequences to table rows. */
    for (size_t b = b_n; b > 1; b--) {
        size_t j = jr_below(&s->rng, b), tmp = s->slot_seq[b - 1];
        s->slot_seq[b - 1] = s->slot_seq[j];
        s->slot_seq[j] = tmp;
    }
    jr_bind(s);

    float *qkv = tu_host_array(b_n * t * cd), *br = tu_host_array(b_n * t * nv),
          *al = tu_host_array(b_n * t * nv);
    tu_gdn_rows(sh, b_n * t, tu_mix_seed(c->seed, 1000 + step), qkv, br, al);
    tu_write(s->e, qkv, b_n * t * cd, s->qkv);
    tu_write(s->e, br, b_n * t * nv, s->beta_raw);
    tu_write(s->e, al, b_n * t * nv, s->alpha);

    uint32_t counts[JR_B_MAX];
    bool bad[JR_B_MAX] = {false};
    size_t bad_slots[JR_B_MAX], n_bad = 0;
    uint32_t bad_values[JR_B_MAX];
    for (size_t b = 0; b < b_n; b++)
        counts[b] = jr_draw_count(s, s->seq[s->slot_seq[b]].held.n);
    if (first_empty) {
        /* Every journal is empty: any count above 0 is bad. */
        counts[0] = 1;
        bad[0] = true;
    }
    for (int k = 0; k < bad_mode && (size_t)k < b_n; k++) {
        size_t b = jr_below(&s->rng, b_n);
        while (bad[b])
            b = (b + 1) % b_n;
        bad[b] = true;
        counts[b] = jr_draw_bad(s, s->seq[s->slot_seq[b]].held.n);
    }
    jr_saved saved[JR_B_MAX];
    for (size_t b = 0; b < b_n; b++)
        if (bad[b]) {
            bad_slots[n_bad] = b;
            bad_values[n_bad++] = counts[b];
            jr_save(s, &s->seq[s->slot_seq[b]], &saved[b]);
        }
    tu_write_u32(s->e, counts, b_n, s->accepted);
    tu_poison(s->e, s->arena);

    if (c->graph) {
        TU_OK(memra_graph_launch(s->e, s->vgraph));
    } else {
        jr_fill_args(s, t);
        TU_OK(memra_gdn_verify(s->e, &s->vargs));
    }
    jr_after_call(s, "memra_gdn_verify", bad_slots, bad_values, n_bad);

    float *arena = tu_download(s->e, s->arena);
    jr_expect_arena_poison(s, arena, t);
    float *rq = tu_host_array(t * cd), *rb = tu_host_array(t * nv), *ra = tu_host_array(t * nv);
    for (size_t b = 0; b < b_n; b++) {
        jr_seq *q = &s->seq[s->slot_seq[b]];
        if (bad[b]) {
            jr_expect_saved(s, q, &saved[b], b);
            for (int i = 0; i < JR_N_OUT; i++) {
                if (!jr_out_given(s, i))
                    continue;
                const size_t words = jr_out_layout(sh, i, t).row_words * t;
                tu_expect_poison(arena + s->off[i] + b * words, words,
                                 "%s: %s of table row %zu (a bad count)", s->desc, jr_out_name[i],
                                 b);
            }
            continue;
        }
        jr_ref_fold(s, q, counts[b]);
        jr_to_ref(c->order, sh, rq, qkv + b * t * cd, jr_out_layout(sh, JR_CONV_OUTS, t));
        jr_to_ref(c->order, sh, rb, br + b * t * nv, jr_out_layout(sh, JR_BETA, t));
        jr_to_ref(c->order, sh, ra, al + b * t * nv, jr_out_layout(sh, JR_BETA, t));
        jr_per_row(s->e, sh, &s->wt, q->ref_ring, q->ref_state, t, rq, rb, ra, &q->held);
        for (int i = 0; i < JR_N_OUT; i++) {
            if (!jr_out_given(s, i))
                continue;
            jr_layout l = jr_out_layout(sh, i, t);
            float *got = tu_host_array(l.rows * l.row_words);
            jr_to_ref(c->order, sh, got, arena + s->off[i] + b * l.rows * l.row_words, l);
            tu_expect_bits(got, q->held.out[i], l.rows * l.row_words,
                           "%s: %s of table row %zu (accepted %" PRIu32
                           ") against the per-row program from the accepted rows",
                           s->desc, jr_out_name[i], b, counts[b]);
            free(got);
        }
        jr_expect_folded(s, q, b, "after the verify");
    }
    free(rq);
    free(rb);
    free(ra);
    free(arena);
    free(qkv);
    free(br);
    free(al);
}

/* A commit with counts drawn per sequence (one of them bad when `bad_one`). */
static void jr_commit_once(jr_history *s, size_t step, bool bad_one)
{
    const size_t b_n = s->c->b;
    jr_history_desc(s, " (commit)", step);
    uint32_t counts[JR_B_MAX];
    bool bad[JR_B_MAX] = {false};
    size_t bad_slots[1];
    uint32_t bad_values[1];
    jr_saved saved;
    for (size_t b = 0; b < b_n; b++)
        counts[b] = jr_draw_count(s, s->seq[s->slot_seq[b]].held.n);
    if (bad_one) {
        const size_t b = jr_below(&s->rng, b_n);
        bad[b] = true;
        counts[b] = jr_draw_bad(s, s->seq[s->slot_seq[b]].held.n);
        bad_slots[0] = b;
        bad_values[0] = counts[b];
        jr_save(s, &s->seq[s->slot_seq[b]], &saved);
    }
    tu_write_u32(s->e, counts, b_n, s->accepted);
    if (s->c->graph)
        TU_OK(memra_graph_launch(s->e, s->cgraph));
    else
        TU_OK(memra_gdn_journal_commit(s->e, &s->cargs));
    jr_after_call(s, "memra_gdn_journal_commit", bad_slots, bad_values, bad_one ? 1 : 0);
    for (size_t b = 0; b < b_n; b++) {
        jr_seq *q = &s->seq[s->slot_seq[b]];
        if (bad[b]) {
            jr_expect_saved(s, q, &saved, b);
            continue;
        }
        jr_ref_fold(s, q, counts[b]);
        jr_expect_folded(s, q, b, "after the commit");
    }
}

static void jr_history_run(jr_case c, MemraBackend backend)
{
    c.seed = tu_fresh_seed();
    cr_assert(c.b >= 1 && c.b <= JR_B_MAX && c.t_max >= 1 && c.steps >= 1);
    jr_history s;
    jr_history_setup(&s, &c, backend);
    for (size_t step = 0; step < c.steps; step++) {
        size_t t = c.t_max;
        if (!c.graph && step > 0)
            t = step == 1 ? 1 : 1 + jr_below(&s.rng, c.t_max);
        int bad_mode = 0;
        if (c.bad && step == 2)
            bad_mode = 1;
        if (c.bad && step == 3)
            bad_mode = 2;
        jr_verify_once(&s, step, t, bad_mode, c.bad && step == 0);
        if (step % 3 == 2 && step + 1 < c.steps) {
            jr_commit_once(&s, step, false);
            /* A commit empties the journals: a count above 0 right after it is bad. */
            if (c.bad && step + 1 < c.steps) {
                jr_verify_once(&s, step, c.graph ? c.t_max : 1 + jr_below(&s.rng, c.t_max), 0,
                               true);
            }
        }
    }
    if (c.bad)
        jr_commit_once(&s, c.steps, true);
    jr_commit_once(&s, c.steps, false);
    jr_history_teardown(&s);
}

#define TILED MEMRA_HEAD_ORDER_TILED
#define GROUPED MEMRA_HEAD_ORDER_GROUPED

static jr_case jr_histories[] = {
    /* num_k, num_v, d_conv, t_max, b, steps, order, outs, graph, bad */
    {2, 4, 4, 1, 3, 4, TILED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 4, 2, 1, 6, TILED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 4, 4, 3, 6, TILED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 4, 8, 5, 6, TILED, 0x15u, false, false, 0},
    {2, 4, 4, 16, 2, 5, TILED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 1, 5, 3, 5, TILED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 8, 6, 2, 5, TILED, 0u, false, false, 0},
    {2, 4, 2, 3, 32, 4, TILED, 0x2au, false, false, 0},
    {2, 4, 4, 5, 3, 5, GROUPED, JR_ALL_OUTS, false, false, 0},
    {2, 8, 3, 4, 2, 4, GROUPED, JR_ALL_OUTS, false, false, 0},
    {2, 4, 4, 1, 2, 4, TILED, JR_ALL_OUTS, true, false, 0},
    {2, 4, 4, 3, 4, 5, TILED, JR_ALL_OUTS, true, false, 0},
    {2, 4, 5, 8, 3, 5, TILED, 0u, true, false, 0},
    {2, 4, 4, 16, 2, 4, GROUPED, 0x01u, true, false, 0},
    {2, 4, 4, 4, 4, 5, TILED, JR_ALL_OUTS, false, true, 0},
    {2, 4, 3, 3, 1, 5, TILED, JR_ALL_OUTS, false, true, 0},
    {2, 4, 4, 5, 3, 5, TILED, 0x3u, true, true, 0},
    {16, 32, 4, 4, 2, 4, TILED, JR_ALL_OUTS, false, false, 0},
    {16, 32, 4, 3, 2, 3, GROUPED, 0u, true, false, 0},
    {16, 32, 4, 2, 2, 5, TILED, 0u, false, true, 0},
};

TU_PARAM_TEST_BACKENDS(jr_case, TU_PARAMS(jr_case, jr_histories), journal, histories,
                       jr_history_run)

/* A journal replaces the t - 1 state snapshots of a verify; it must take at most a quarter of
 * their memory, for every t the suite uses and both shapes. */
Test(journal, memory_bound)
{
    const size_t shapes[2][2] = {{2, 4}, {16, 32}};
    for (int i = 0; i < 2; i++) {
        const tu_gdn_shape sh = tu_gdn_shape_make(shapes[i][0], shapes[i][1], 4);
        for (size_t t = 1; t <= 16; t++) {
            size_t len = 0;
            TU_OK(memra_gdn_journal_len(MEMRA_D_STATE, sh.num_k, sh.num_v, t, &len));
            cr_assert(len > 0, "memra_gdn_journal_len(t_max = %zu) = 0", t);
            if (t < 2)
                continue;
            const size_t snapshots = (t - 1) * sh.state_words;
            cr_assert(4 * len <= snapshots,
                      "num_k=%zu num_v=%zu t=%zu: a journal of %zu words is more than a quarter "
                      "of the %zu words of t - 1 state snapshots",
                      sh.num_k, sh.num_v, t, len, snapshots);
        }
    }
}

/* ---- Rollback ---- */

typedef struct rb_case {
    size_t num_k, num_v, d_conv, t, b;
    bool graph;
    bool bad;
    uint64_t seed;
} rb_case;

typedef struct rb_run {
    const rb_case *c;
    char desc[256];
    MemraEngine *e;
    tu_gdn_shape sh;
    jr_weights wt;
    MemraSliceMutF32 qkv, beta_raw, alpha, o, snap_conv, snap_ssm;
    MemraSliceMutU32 accepted;
    MemraSliceMutU64 table;
    MemraVerifyArgs vargs, rargs;
    float *ring0, *state0, *alt0;
    /* The per-row program of every sequence, and what the verify leaves (for bad counts). */
    jr_rows ref[JR_B_MAX];
    float *post[JR_B_MAX][3];
    unsigned calls;
} rb_run;

/* A sequence's ring, canonical and alternate state, guarded. */
typedef struct rb_seq {
    MemraSliceMutF32 buf[3];
} rb_seq;

static const char *const rb_buf_name[3] = {"ring", "canonical state", "alternate state"};

static size_t rb_words(const rb_run *r, int i)
{
    return i == 0 ? r->sh.ring_words : r->sh.state_words;
}

static void rb_seqs_make(rb_run *r, rb_seq *q)
{
    for (size_t b = 0; b < r->c->b; b++) {
        q[b].buf[0] = jr_guarded(r->e, r->ring0 + b * r->sh.ring_words, r->sh.ring_words, false);
        q[b].buf[1] = jr_guarded(r->e, r->state0 + b * r->sh.state_words, r->sh.state_words, false);
        q[b].buf[2] = jr_guarded(r->e, r->alt0 + b * r->sh.state_words, r->sh.state_words, false);
    }
}

static void rb_seqs_free(rb_run *r, rb_seq *q)
{
    for (size_t b = 0; b < r->c->b; b++)
        for (int i = 0; i < 3; i++)
            tu_free(r->e, q[b].buf[i].ptr);
}

static void rb_bind(rb_run *r, const rb_seq *q, bool swap)
{
    uint64_t host[3 * JR_B_MAX];
    for (size_t b = 0; b < r->c->b; b++) {
        host[3 * b + 0] = tu_addr(q[b].buf[0]);
        host[3 * b + 1] = tu_addr(q[b].buf[swap ? 2 : 1]);
        host[3 * b + 2] = tu_addr(q[b].buf[swap ? 1 : 2]);
    }
    tu_write_u64(r->e, host, 3 * r->c->b, r->table);
}

static MemraStatus rb_step(MemraEngine *e, void *user)
{
    rb_run *r = user;
    r->calls++;
    MemraStatus st = memra_gdn_verify(e, &r->vargs);
    if (st != MEMRA_STATUS_OK)
        return st;
    return memra_gdn_rollback(e, &r->rargs);
}

/* Counts for one rollback: 1 and t among them, bad ones (0, t + 1, UINT32_MAX) when asked. */
static size_t rb_counts(rb_run *r, uint64_t *rng, bool bad, uint32_t *counts, size_t *bad_slots,
                        uint32_t *bad_values)
{
    const size_t b_n = r->c->b, t = r->c->t;
    size_t n_bad = 0;
    for (size_t b = 0; b < b_n; b++)
        counts[b] = b == 0 ? 1 : b == 1 ? (uint32_t)t : (uint32_t)(1 + jr_below(rng, t));
    if (bad) {
        const uint32_t values[3] = {0, (uint32_t)t + 1, UINT32_MAX};
        const size_t b = jr_below(rng, b_n);
        counts[b] = values[jr_below(rng, 3)];
        bad_slots[n_bad] = b;
        bad_values[n_bad++] = counts[b];
    }
    return n_bad;
}

/* Checks the sequences after a rollback with `counts` (canonical and ring the per-row
 * program's after counts[b] rows; a bad count: all three buffers as the verify left them), and
 * that the snapshots did not change. */
static void rb_check(rb_run *r, const rb_seq *q, bool swap, const uint32_t *counts,
                     const size_t *bad_slots, size_t n_bad, const float *snaps_before,
                     const char *what)
{
    const tu_gdn_shape *sh = &r->sh;
    for (size_t b = 0; b < r->c->b; b++) {
        bool bad = false;
        for (size_t i = 0; i < n_bad; i++)
            bad |= bad_slots[i] == b;
        float *now[3];
        for (int i = 0; i < 3; i++) {
            now[i] = tu_host_array(rb_words(r, i));
            jr_read_guarded(r->e, q[b].buf[i], rb_words(r, i), now[i], r->desc, rb_buf_name[i]);
        }
        /* Index 1 and 2 of `now` are the buffers the table names canonical and alternate. */
        float *canonical = now[swap ? 2 : 1], *alternate = now[swap ? 1 : 2];
        if (bad) {
            const float *roles[3] = {now[0], canonical, alternate};
            for (int i = 0; i < 3; i++)
                tu_expect_bits(roles[i], r->post[b][i], rb_words(r, i),
                               "%s, %s: the %s of sequence %zu after a bad count (%" PRIu32
                               ") must be as the verify left it",
                               r->desc, what, rb_buf_name[i], b, counts[b]);
        } else {
            const size_t n = counts[b];
            tu_expect_bits(canonical, r->ref[b].state + (n - 1) * sh->state_words, sh->state_words,
                           "%s, %s: the canonical state of sequence %zu after rollback to %zu "
                           "rows against the per-row program",
                           r->desc, what, b, n);
            tu_expect_bits(now[0], r->ref[b].ring + (n - 1) * sh->ring_words, sh->ring_words,
                           "%s, %s: the ring of sequence %zu after rollback to %zu rows against "
                           "the per-row program",
                           r->desc, what, b, n);
        }
        for (int i = 0; i < 3; i++)
            free(now[i]);
    }
    if (r->snap_ssm.len) {
        float *conv = tu_download(r->e, r->snap_conv), *ssm = tu_download(r->e, r->snap_ssm);
        tu_expect_bits(conv, snaps_before, r->snap_conv.len,
                       "%s, %s: the rollback changed the conv snapshots", r->desc, what);
        tu_expect_bits(ssm, snaps_before + r->snap_conv.len, r->snap_ssm.len,
                       "%s, %s: the rollback changed the state snapshots", r->desc, what);
        free(conv);
        free(ssm);
    }
}

static float *rb_snaps(rb_run *r)
{
    float *all = tu_host_array(r->snap_conv.len + r->snap_ssm.len);
    if (r->snap_ssm.len) {
        tu_download_into(r->e, tu_view(r->snap_conv), all);
        tu_download_into(r->e, tu_view(r->snap_ssm), all + r->snap_conv.len);
    }
    return all;
}

static void rb_run_case(rb_case c, MemraBackend backend)
{
    c.seed = tu_fresh_seed();
    cr_assert(c.b >= 2 && c.b <= JR_B_MAX && c.t >= 1);
    rb_run r = {.c = &c};
    snprintf(r.desc, sizeof r.desc,
             "rollback num_k=%zu num_v=%zu d_conv=%zu t=%zu b_n=%zu %s%s, " TU_SEED_FMT, c.num_k,
             c.num_v, c.d_conv, c.t, c.b, c.graph ? "graph-replayed" : "eager",
             c.bad ? " with bad counts" : "", c.seed);
    r.e = tu_engine(backend);
    r.sh = tu_gdn_shape_make(c.num_k, c.num_v, c.d_conv);
    const tu_gdn_shape *sh = &r.sh;
    const size_t t = c.t, b_n = c.b, cd = sh->conv_dim, nv = sh->num_v;
    const size_t rw = sh->ring_words, sw = sh->state_words;
    tu_varied(jr_guard_words, JR_GUARD, tu_mix_seed(c.seed, 6), 1.0f);
    uint64_t rng = tu_mix_seed(c.seed, 5) | 1;
    jr_weights_make(r.e, sh, MEMRA_HEAD_ORDER_TILED, tu_mix_seed(c.seed, 0), &r.wt);

    r.ring0 = tu_host_array(b_n * rw);
    r.state0 = tu_host_array(b_n * sw);
    r.alt0 = tu_host_array(b_n * sw);
    float *qkv = tu_host_array(b_n * t * cd), *br = tu_host_array(b_n * t * nv),
          *al = tu_host_array(b_n * t * nv);
    tu_gdn_rows(sh, b_n * t, tu_mix_seed(c.seed, 1), qkv, br, al);
    for (size_t b = 0; b < b_n; b++) {
        tu_gdn_sequence(sh, tu_mix_seed(c.seed, 100 + b), r.ring0 + b * rw, r.state0 + b * sw);
        tu_varied(r.alt0 + b * sw, sw, tu_mix_seed(c.seed, 200 + b), 0.3f);
        jr_per_row(r.e, sh, &r.wt, r.ring0 + b * rw, r.state0 + b * sw, t, qkv + b * t * cd,
                   br + b * t * nv, al + b * t * nv, &r.ref[b]);
    }
    r.qkv = tu_upload(r.e, qkv, b_n * t * cd);
    r.beta_raw = tu_upload(r.e, br, b_n * t * nv);
    r.alpha = tu_upload(r.e, al, b_n * t * nv);
    free(qkv);
    free(br);
    free(al);
    r.o = tu_poisoned(r.e, b_n * t * sh->value_dim);
    const MemraSliceMutF32 none = {NULL, 0};
    /* A view of one word stands for snapshots of no word (d_conv = 1). */
    r.snap_conv = t >= 2 ? tu_poisoned(r.e, rw ? b_n * (t - 1) * rw : 1) : none;
    r.snap_ssm = t >= 2 ? tu_poisoned(r.e, b_n * (t - 1) * sw) : none;
    TU_OK(memra_alloc_u32(r.e, b_n, MEMRA_ALLOC_INIT_ZEROED, &r.accepted));
    TU_OK(memra_alloc_u64(r.e, 3 * b_n, MEMRA_ALLOC_INIT_ZEROED, &r.table));

    MemraVerifyArgs *v = &r.vargs;
    TU_OK(memra_verify_args_init(v));
    v->mode = MEMRA_VERIFY_MODE_SNAPSHOTS;
    v->num_k = c.num_k;
    v->num_v = nv;
    v->d_conv = c.d_conv;
    v->t = t;
    v->b_n = b_n;
    v->eps = TU_GDN_EPS;
    v->scale = TU_GDN_SCALE;
    v->qkv = tu_view(r.qkv);
    v->table = tu_view_u64(r.table);
    v->w = tu_view(r.wt.w);
    v->beta_raw = tu_view(r.beta_raw);
    v->alpha = tu_view(r.alpha);
    v->dt_bias = tu_view(r.wt.dt_bias);
    v->a = tu_view(r.wt.a);
    v->o = r.o;
    v->snap_conv = r.snap_conv;
    v->snap_ssm = r.snap_ssm;
    /* The rollback reads only what it documents: eps, scale, rows and outputs stay as init left
     * them. */
    MemraVerifyArgs *m = &r.rargs;
    TU_OK(memra_verify_args_init(m));
    m->num_k = c.num_k;
    m->num_v = nv;
    m->d_conv = c.d_conv;
    m->t = t;
    m->b_n = b_n;
    m->table = tu_view_u64(r.table);
    m->snap_conv = r.snap_conv;
    m->snap_ssm = r.snap_ssm;
    m->accepted = tu_view_u32(r.accepted);

    /* What the verify leaves in every sequence: a bad count must leave exactly that. */
    {
        rb_seq q[JR_B_MAX];
        rb_seqs_make(&r, q);
        rb_bind(&r, q, false);
        TU_OK(memra_gdn_verify(r.e, v));
        for (size_t b = 0; b < b_n; b++)
            for (int i = 0; i < 3; i++) {
                r.post[b][i] = tu_host_array(rb_words(&r, i));
                jr_read_guarded(r.e, q[b].buf[i], rb_words(&r, i), r.post[b][i], r.desc,
                                rb_buf_name[i]);
            }
        /* The verify itself is the 1.0 program's (test_gdn_verify.c); here its final ring and
         * state must also be the per-row program's after t rows. */
        tu_expect_bits(r.post[0][0], r.ref[0].ring + (t - 1) * rw, rw,
                       "%s: the verify's final ring against the per-row program", r.desc);
        tu_expect_bits(r.post[0][tu_state_slot(t)], r.ref[0].state + (t - 1) * sw, sw,
                       "%s: the verify's final state against the per-row program", r.desc);
        rb_seqs_free(&r, q);
    }

    uint32_t counts[JR_B_MAX], bad_values[JR_B_MAX];
    size_t bad_slots[JR_B_MAX];
    if (!c.graph) {
        rb_seq q[JR_B_MAX];
        rb_seqs_make(&r, q);
        rb_bind(&r, q, false);
        TU_OK(memra_gdn_verify(r.e, v));
        float *snaps = rb_snaps(&r);
        const size_t n_bad = rb_counts(&r, &rng, c.bad, counts, bad_slots, bad_values);
        tu_write_u32(r.e, counts, b_n, r.accepted);
        TU_OK(memra_gdn_rollback(r.e, m));
        if (n_bad)
            jr_expect_report(r.e, (int)(c.seed % JR_N_SYNC), "memra_gdn_rollback", bad_slots,
                             bad_values, n_bad, tu_view(r.o), tu_view_u32(r.accepted), r.desc);
        else
            TU_OK(memra_engine_synchronize(r.e));
        rb_check(&r, q, false, counts, bad_slots, n_bad, snaps, "eager");
        free(snaps);
        rb_seqs_free(&r, q);
    } else {
        /* Captured on scratch sequences with valid counts (the warm-ups run). */
        rb_seq scratch[JR_B_MAX];
        rb_seqs_make(&r, scratch);
        rb_bind(&r, scratch, false);
        for (size_t b = 0; b < b_n; b++)
            counts[b] = 1;
        tu_write_u32(r.e, counts, b_n, r.accepted);
        MemraGraph *graph = NULL;
        TU_OK(memra_graph_capture(r.e, rb_step, &r, &graph));
        cr_assert_eq(r.calls, 3, "the step ran %u times during the capture, not 3", r.calls);
        TU_OK(memra_engine_synchronize(r.e));
        for (int replay = 0; replay < 2; replay++) {
            rb_seq q[JR_B_MAX];
            rb_seqs_make(&r, q);
            /* The second replay: canonical and alternate trade places. */
            const bool swap = replay == 1;
            if (swap)
                for (size_t b = 0; b < b_n; b++) {
                    tu_write(r.e, r.state0 + b * sw, sw, q[b].buf[2]);
                    tu_write(r.e, r.alt0 + b * sw, sw, q[b].buf[1]);
                }
            rb_bind(&r, q, swap);
            const size_t n_bad =
                rb_counts(&r, &rng, c.bad && replay == 1, counts, bad_slots, bad_values);
            tu_write_u32(r.e, counts, b_n, r.accepted);
            tu_poison(r.e, r.o);
            TU_OK(memra_graph_launch(r.e, graph));
            if (n_bad)
                jr_expect_report(r.e, replay % JR_N_SYNC, "memra_gdn_rollback", bad_slots,
                                 bad_values, n_bad, tu_view(r.o), tu_view_u32(r.accepted), r.desc);
            else
                TU_OK(memra_engine_synchronize(r.e));
            /* The snapshots the replay's verify wrote are what the rollback read. */
            float *snaps = rb_snaps(&r);
            char what[64];
            snprintf(what, sizeof what, "graph replay %d", replay + 1);
            rb_check(&r, q, swap, counts, bad_slots, n_bad, snaps, what);
            free(snaps);
            rb_seqs_free(&r, q);
        }
        TU_OK(memra_graph_destroy(r.e, graph));
        rb_seqs_free(&r, scratch);
    }

    for (size_t b = 0; b < b_n; b++) {
        jr_rows_free(&r.ref[b]);
        for (int i = 0; i < 3; i++)
            free(r.post[b][i]);
    }
    free(r.ring0);
    free(r.state0);
    free(r.alt0);
    TU_OK(memra_engine_destroy(r.e));
}

static rb_case rb_cases[] = {
    /* num_k, num_v, d_conv, t, b, graph, bad */
    {2, 4, 4, 1, 2, false, false, 0},   {2, 4, 4, 2, 3, false, false, 0},
    {2, 4, 4, 5, 4, false, false, 0},   {2, 4, 4, 8, 3, false, false, 0},
    {2, 4, 4, 16, 2, false, false, 0},  {2, 4, 1, 4, 3, false, false, 0},
    {2, 4, 8, 3, 2, false, false, 0},   {2, 4, 4, 3, 32, false, false, 0},
    {2, 4, 4, 1, 2, true, false, 0},    {2, 4, 4, 4, 3, true, false, 0},
    {2, 4, 2, 7, 2, true, false, 0},    {2, 4, 4, 3, 3, false, true, 0},
    {2, 4, 4, 1, 2, false, true, 0},    {2, 4, 4, 4, 3, true, true, 0},
    {16, 32, 4, 4, 2, false, false, 0}, {16, 32, 4, 3, 2, true, true, 0},
};

TU_PARAM_TEST_BACKENDS(rb_case, TU_PARAMS(rb_case, rb_cases), rollback, cases, rb_run_case)
