/*
 * The one-launch verify (memra_gdn_verify) in SNAPSHOTS and FINAL_ONLY modes against the 1.0
 * packed program on the same backend: memra_ssm_conv1d_fused_decode_tloop with conv snapshots,
 * memra_gdn_prep_decode_b over the b_n * t rows and memra_gdn_scan_s128_tsnap with state
 * snapshots. Every tensor the verify writes must be BIT-IDENTICAL to the program's: conv_outs,
 * q_l2, k_l2, v_g, beta, g_log, o, the final ring, both state buffers of every sequence (the
 * final state where the parity puts it, the other buffer as the program leaves it) and every
 * snapshot.
 *
 * Each case draws fresh inputs, runs the 1.0 program as the reference, then the verify with
 * its outputs carved from one poisoned arena: the outputs the case asks for must match, the
 * optional outputs it omits ({NULL, 0}), the snapshots of FINAL_ONLY mode and the gaps between
 * the views must keep their poison bit for bit, so a write to the wrong place is seen. Rings
 * and states are followed by guard words that must come out unchanged. In graph mode the
 * verify is captured once and replayed twice after the table was rebound: first to fresh
 * buffers, then to the same buffers shifted by one sequence with canonical and alternate
 * swapped; the buffers the graph was captured with must not change in either replay.
 *
 * The GROUPED head order is checked against the tiled 1.0 program run on head-permuted inputs
 * (tu_tiled_head in testutil.h derives the permutation): the verify's outputs, moved to the
 * tiled positions, must equal the program's.
 *
 * On CUDA each operation must also be ONE kernel launch: captured from the engine's stream by
 * the host (through the CUDA driver, loaded at run time, so that the suite needs no CUDA to
 * build), one verify, commit or rollback must be a graph of exactly one kernel node.
 *
 * The default grid samples t 1..16, b_n 1..32 and d_conv 1..8 on the small shape (num_k = 2,
 * num_v = 4) and takes a few points of the production shape (num_k = 16, num_v = 32), so that
 * the CPU run stays short; MEMRA_TEST_FULL=1 adds the full cross product on the small shape.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

/* Words of poison between the output views, and guard words after every ring and state. */
#define GV_GAP ((size_t)64)
#define GV_GUARD ((size_t)16)
#define GV_B_MAX ((size_t)32)

/* The tensors a verify writes are tests/testutil.h's (enum tu_gdn_tensor, in the order they
 * are reported). The first six are the optional activations (bit i of gv_case.outs asks for
 * tensor i); the first TU_GDN_N_VIEWS live in the output arena, the rest are per-sequence
 * buffers. */
#define GV_N_OPTIONAL 6
#define GV_ALL_OUTS ((1u << GV_N_OPTIONAL) - 1)

typedef struct gv_case {
    size_t num_k, num_v, t, b, d_conv;
    MemraVerifyMode mode;
    MemraHeadOrder order;
    /* Which optional activations are given (bit i: tensor i). */
    unsigned outs;
    bool graph;
    /* SNAPSHOTS mode with t = 1 only: pass snapshot views anyway. The shapes are
     * [b_n, 0, ...], so any view is long enough; the verify must accept them and leave them
     * untouched. */
    bool t1_snapshot_views;
    /* Set when the case runs: the base of its inputs. */
    uint64_t seed;
} gv_case;

static void gv_describe(const gv_case *c, char *buf, size_t n)
{
    snprintf(buf, n,
             "num_k=%zu num_v=%zu t=%zu b_n=%zu d_conv=%zu %s %s outs=0x%02x %s, " TU_SEED_FMT,
             c->num_k, c->num_v, c->t, c->b, c->d_conv,
             c->mode == MEMRA_VERIFY_MODE_SNAPSHOTS ? "SNAPSHOTS" : "FINAL_ONLY",
             c->order == MEMRA_HEAD_ORDER_GROUPED ? "GROUPED" : "TILED", c->outs,
             c->graph ? "graph-replayed" : "eager", c->seed);
}

/* ---- Inputs ---- */

/* Host inputs are tests/testutil.h's (tu_gdn_inputs): per-sequence arrays sequence-major, and
 * `alt0` what the alternate state buffers hold before the run (random, so that "left as the
 * program leaves it" means something). */

/* How each tensor's value heads are laid out, for moving them to the tiled positions:
 * `rows` rows of `row_words` words, head blocks of `block` words from `offset`. */
typedef struct gv_layout {
    size_t rows, row_words, offset, block;
} gv_layout;

static gv_layout gv_layout_of(const tu_gdn_shape *sh, size_t t, size_t b, int tensor)
{
    const size_t S = MEMRA_D_STATE, snaps = t >= 1 ? b * (t - 1) : 0;
    switch (tensor) {
    case TU_GDN_CONV_OUTS:
        return (gv_layout){b * t, sh->conv_dim, 2 * sh->key_dim, S};
    case TU_GDN_Q_L2:
    case TU_GDN_K_L2:
    case TU_GDN_V_G:
    case TU_GDN_O:
        return (gv_layout){b * t, sh->value_dim, 0, S};
    case TU_GDN_BETA:
    case TU_GDN_G_LOG:
        return (gv_layout){b * t, sh->num_v, 0, 1};
    case TU_GDN_SNAP_CONV:
        return (gv_layout){snaps, sh->ring_words, 2 * sh->key_dim * sh->pad, S * sh->pad};
    case TU_GDN_SNAP_SSM:
        return (gv_layout){snaps, sh->state_words, 0, S * S};
    case TU_GDN_RING:
        return (gv_layout){b, sh->ring_words, 2 * sh->key_dim * sh->pad, S * sh->pad};
    case TU_GDN_CANONICAL:
    case TU_GDN_ALTERNATE:
        return (gv_layout){b, sh->state_words, 0, S * S};
    }
    cr_assert_fail("gv_layout_of: unknown tensor %d", tensor);
    return (gv_layout){0, 0, 0, 0};
}

static size_t gv_len(const tu_gdn_shape *sh, size_t t, size_t b, int tensor)
{
    gv_layout l = gv_layout_of(sh, t, b, tensor);
    return l.rows * l.row_words;
}

/* A copy of `src` (laid out as `l`, grouped order) with its value heads at the tiled
 * positions. */
static float *gv_tiled_copy(const float *src, gv_layout l, const tu_gdn_shape *sh)
{
    float *dst = tu_host_array(l.rows * l.row_words);
    tu_to_tiled(dst, src, l.rows, l.row_words, l.offset, l.block, sh->num_k, sh->num_v);
    return dst;
}

/* The inputs of `h` with their value heads moved to the tiled positions: what the tiled 1.0
 * program must be given to compute what the grouped verify computes on `h`. */
static void gv_host_tiled(const tu_gdn_shape *sh, size_t t, size_t b, const tu_gdn_inputs *h,
                          tu_gdn_inputs *out)
{
    const size_t S = MEMRA_D_STATE;
    const gv_layout w = {1, sh->conv_dim * sh->d_conv, 2 * sh->key_dim * sh->d_conv,
                         S * sh->d_conv};
    const gv_layout heads = {1, sh->num_v, 0, 1};
    out->w = gv_tiled_copy(h->w, w, sh);
    out->dt_bias = gv_tiled_copy(h->dt_bias, heads, sh);
    out->a = gv_tiled_copy(h->a, heads, sh);
    out->ring0 = gv_tiled_copy(h->ring0, gv_layout_of(sh, t, b, TU_GDN_RING), sh);
    out->state0 = gv_tiled_copy(h->state0, gv_layout_of(sh, t, b, TU_GDN_CANONICAL), sh);
    out->alt0 = gv_tiled_copy(h->alt0, gv_layout_of(sh, t, b, TU_GDN_ALTERNATE), sh);
    out->qkv = gv_tiled_copy(h->qkv, gv_layout_of(sh, t, b, TU_GDN_CONV_OUTS), sh);
    out->beta_raw = gv_tiled_copy(h->beta_raw, gv_layout_of(sh, t, b, TU_GDN_BETA), sh);
    out->alpha = gv_tiled_copy(h->alpha, gv_layout_of(sh, t, b, TU_GDN_G_LOG), sh);
}

/* ---- Results ---- */

typedef struct gv_result {
    float *t[TU_GDN_N_TENSORS];
    size_t len[TU_GDN_N_TENSORS];
} gv_result;

static void gv_result_make(const tu_gdn_shape *sh, size_t t, size_t b, gv_result *r)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++) {
        r->len[i] = gv_len(sh, t, b, i);
        r->t[i] = tu_host_array(r->len[i]);
    }
}

static void gv_result_free(gv_result *r)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++)
        free(r->t[i]);
}

/* ---- Per-sequence buffers ---- */

/* The ring and the two states each sequence row of the table points at, each followed by
 * GV_GUARD guard words. */
typedef struct gv_seqs {
    size_t b;
    MemraSliceMutF32 ring[GV_B_MAX], canonical[GV_B_MAX], alternate[GV_B_MAX];
} gv_seqs;

static float gv_guard_words[GV_GUARD];

static void gv_guard_init(uint64_t seed)
{
    tu_varied(gv_guard_words, GV_GUARD, tu_mix_seed(seed, 999), 1.0f);
}

static MemraSliceMutF32 gv_seq_buffer(MemraEngine *e, const float *init, size_t words)
{
    MemraSliceMutF32 s = tu_poisoned(e, words + GV_GUARD);
    if (words)
        tu_write(e, init, words, s);
    MemraSliceF32 src = {gv_guard_words, GV_GUARD};
    TU_OK(memra_htod_f32_into(e, src, tu_sub_mut(s, words, GV_GUARD)));
    return s;
}

/* Fills (or allocates, when `fresh`) the buffers of every sequence with its starting ring and
 * states. */
static void gv_seqs_fill(MemraEngine *e, const tu_gdn_shape *sh, const tu_gdn_inputs *h, gv_seqs *q,
                         size_t b, bool fresh)
{
    q->b = b;
    for (size_t s = 0; s < b; s++) {
        const float *ring0 = h->ring0 + s * sh->ring_words;
        const float *state0 = h->state0 + s * sh->state_words;
        const float *alt0 = h->alt0 + s * sh->state_words;
        if (fresh) {
            q->ring[s] = gv_seq_buffer(e, ring0, sh->ring_words);
            q->canonical[s] = gv_seq_buffer(e, state0, sh->state_words);
            q->alternate[s] = gv_seq_buffer(e, alt0, sh->state_words);
        } else {
            if (sh->ring_words)
                tu_write(e, ring0, sh->ring_words, q->ring[s]);
            tu_write(e, state0, sh->state_words, q->canonical[s]);
            tu_write(e, alt0, sh->state_words, q->alternate[s]);
        }
    }
}

static void gv_seqs_free(MemraEngine *e, const gv_seqs *q)
{
    for (size_t s = 0; s < q->b; s++) {
        tu_free(e, q->ring[s].ptr);
        tu_free(e, q->canonical[s].ptr);
        tu_free(e, q->alternate[s].ptr);
    }
}

static MemraSliceMutU64 gv_table(MemraEngine *e, const gv_seqs *q)
{
    uint64_t host[3 * GV_B_MAX];
    for (size_t s = 0; s < q->b; s++) {
        host[3 * s + 0] = tu_addr(q->ring[s]);
        host[3 * s + 1] = tu_addr(q->canonical[s]);
        host[3 * s + 2] = tu_addr(q->alternate[s]);
    }
    return tu_upload_u64(e, host, 3 * q->b);
}

static void gv_bind(MemraEngine *e, const gv_seqs *q, MemraSliceMutU64 table)
{
    uint64_t host[3 * GV_B_MAX];
    for (size_t s = 0; s < q->b; s++) {
        host[3 * s + 0] = tu_addr(q->ring[s]);
        host[3 * s + 1] = tu_addr(q->canonical[s]);
        host[3 * s + 2] = tu_addr(q->alternate[s]);
    }
    tu_write_u64(e, host, 3 * q->b, table);
}

/* Reads the ring and both states of every sequence into `r`, and checks every guard. */
static void gv_seqs_collect(MemraEngine *e, const tu_gdn_shape *sh, const gv_seqs *q, gv_result *r,
                            const char *desc, const char *what)
{
    float *buf = tu_host_array(sh->state_words + GV_GUARD);
    for (size_t s = 0; s < q->b; s++) {
        const MemraSliceMutF32 bufs[3] = {q->ring[s], q->canonical[s], q->alternate[s]};
        const int tensors[3] = {TU_GDN_RING, TU_GDN_CANONICAL, TU_GDN_ALTERNATE};
        for (int i = 0; i < 3; i++) {
            const size_t words = i == 0 ? sh->ring_words : sh->state_words;
            tu_download_into(e, tu_view(bufs[i]), buf);
            memcpy(r->t[tensors[i]] + s * words, buf, words * sizeof *buf);
            tu_expect_bits(buf + words, gv_guard_words, GV_GUARD,
                           "%s, %s: the guard words after the %s of sequence %zu", desc, what,
                           tu_gdn_tensor_name[tensors[i]], s);
        }
    }
    free(buf);
}

/* ---- The 1.0 program (the reference) ---- */

static void gv_program(MemraEngine *e, const gv_case *c, const tu_gdn_shape *sh,
                       const tu_gdn_inputs *h, gv_result *ref)
{
    const size_t t = c->t, b = c->b;
    tu_gdn_device d;
    tu_gdn_upload(e, sh, t, b, h, &d);
    MemraSliceMutF32 out[TU_GDN_N_VIEWS];
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        out[i] = tu_poisoned(e, ref->len[i] ? ref->len[i] : 1);
    gv_seqs q;
    gv_seqs_fill(e, sh, h, &q, b, true);
    MemraSliceMutU64 table = gv_table(e, &q);
    /* The 1.0 packed program reads the arguments of a tiled SNAPSHOTS verify with every output
     * given (none for an empty snapshot tensor). */
    MemraVerifyArgs v;
    MemraSliceMutF32 *views[TU_GDN_N_VIEWS];
    const MemraSliceMutF32 none = {NULL, 0};
    tu_gdn_args_init(&v, sh, t, b, MEMRA_VERIFY_MODE_SNAPSHOTS, MEMRA_HEAD_ORDER_TILED, &d);
    v.table = tu_view_u64(table);
    tu_gdn_views(&v, views);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        *views[i] = ref->len[i] ? out[i] : none;
    TU_OK(tu_packed_program(e, &v, NULL));

    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        if (ref->len[i])
            tu_download_into(e, tu_sub(out[i], 0, ref->len[i]), ref->t[i]);
    char desc[256];
    gv_describe(c, desc, sizeof desc);
    gv_seqs_collect(e, sh, &q, ref, desc, "the 1.0 program");
    cr_assert(tu_all_finite(ref->t[TU_GDN_O], ref->len[TU_GDN_O]),
              "%s: the 1.0 program's o is not finite (the inputs are out of range)", desc);

    gv_seqs_free(e, &q);
    tu_gdn_device_free(e, &d);
    tu_free(e, table.ptr);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        tu_free(e, out[i].ptr);
}

/* ---- The verify ---- */

typedef struct gv_run {
    const gv_case *c;
    tu_gdn_shape sh;
    MemraVerifyArgs args;
    /* One poisoned buffer holding every output view, GV_GAP words apart. */
    MemraSliceMutF32 arena;
    size_t off[TU_GDN_N_VIEWS], len[TU_GDN_N_VIEWS];
    unsigned calls;
} gv_run;

static MemraStatus gv_step(MemraEngine *e, void *user)
{
    gv_run *r = user;
    r->calls++;
    return memra_gdn_verify(e, &r->args);
}

/* Whether the verify is given tensor i of the arena. */
static bool gv_given(const gv_case *c, int i)
{
    if (i < GV_N_OPTIONAL)
        return (c->outs >> i) & 1u;
    if (i == TU_GDN_O)
        return true;
    return c->mode == MEMRA_VERIFY_MODE_SNAPSHOTS && c->t >= 2;
}

/* Checks one run of the verify: the arena against the reference (given tensors) and the
 * poison (omitted tensors, gaps), the sequences' buffers against the reference. */
static void gv_check(MemraEngine *e, gv_run *r, const gv_seqs *q, const gv_result *ref,
                     const char *what)
{
    const gv_case *c = r->c;
    const tu_gdn_shape *sh = &r->sh;
    char desc[256];
    gv_describe(c, desc, sizeof desc);
    float *arena = tu_download(e, r->arena);
    gv_result got;
    gv_result_make(sh, c->t, c->b, &got);
    gv_seqs_collect(e, sh, q, &got, desc, what);

    size_t at = 0;
    for (int i = 0; i < TU_GDN_N_VIEWS; i++) {
        /* The poison before this view (the gap after the previous one). */
        tu_expect_poison(arena + at, r->off[i] - at, "%s, %s: the gap before %s", desc, what,
                         tu_gdn_tensor_name[i]);
        const float *view = arena + r->off[i];
        const size_t n = r->len[i];
        if (!gv_given(c, i)) {
            tu_expect_poison(view, n ? n : 1, "%s, %s: %s was not asked for", desc, what,
                             tu_gdn_tensor_name[i]);
        } else if (n > 0) {
            memcpy(got.t[i], view, n * sizeof *view);
        } else {
            /* A view of one word standing for a tensor of none (d_conv = 1 snapshots). */
            tu_expect_poison(view, 1, "%s, %s: the view of %s (0 words needed)", desc, what,
                             tu_gdn_tensor_name[i]);
        }
        at = r->off[i] + (n ? n : 1);
    }
    tu_expect_poison(arena + at, r->arena.len - at, "%s, %s: the gap after the last view", desc,
                     what);

    /* The given tensors against the 1.0 program: the check the bench runs before timing. */
    tu_check_item items[TU_GDN_N_TENSORS];
    float *moved[TU_GDN_N_TENSORS] = {NULL};
    size_t n = 0;
    for (int i = 0; i < TU_GDN_N_TENSORS; i++) {
        if (got.len[i] == 0 || (i < TU_GDN_N_VIEWS && !gv_given(c, i)))
            continue;
        if (c->order == MEMRA_HEAD_ORDER_GROUPED)
            moved[i] = gv_tiled_copy(got.t[i], gv_layout_of(sh, c->t, c->b, i), sh);
        items[n++] = (tu_check_item){tu_gdn_tensor_name[i], ref->t[i],
                                     moved[i] != NULL ? moved[i] : got.t[i], got.len[i], true};
    }
    char who[512], why[1024];
    snprintf(who, sizeof who, "%s, %s", desc, what);
    const bool same = tu_check_items(items, n, who,
                                     c->order == MEMRA_HEAD_ORDER_GROUPED
                                         ? "the 1.0 program on head-permuted inputs"
                                         : "the 1.0 program",
                                     why, sizeof why, NULL);
    for (int i = 0; i < TU_GDN_N_TENSORS; i++)
        free(moved[i]);
    cr_assert(same, "%s", why);
    gv_result_free(&got);
    free(arena);
}

static void gv_verify(MemraEngine *e, const gv_case *c, const tu_gdn_shape *sh,
                      const tu_gdn_inputs *h, const gv_result *ref)
{
    const size_t t = c->t, b = c->b;
    gv_run r = {.c = c, .sh = *sh};
    tu_gdn_device d;
    tu_gdn_upload(e, sh, t, b, h, &d);

    size_t at = GV_GAP;
    for (int i = 0; i < TU_GDN_N_VIEWS; i++) {
        r.len[i] = ref->len[i];
        r.off[i] = at;
        at += (r.len[i] ? r.len[i] : 1) + GV_GAP;
    }
    r.arena = tu_poisoned(e, at);

    gv_seqs first;
    gv_seqs_fill(e, sh, h, &first, b, true);
    MemraSliceMutU64 table = gv_table(e, &first);

    MemraVerifyArgs *v = &r.args;
    tu_gdn_args_init(v, sh, t, b, c->mode, c->order, &d);
    v->table = tu_view_u64(table);
    MemraSliceMutF32 *views[TU_GDN_N_VIEWS];
    tu_gdn_views(v, views);
    for (int i = 0; i < TU_GDN_N_VIEWS; i++)
        if (gv_given(c, i) || (c->t1_snapshot_views && i >= TU_GDN_SNAP_CONV))
            *views[i] = tu_sub_mut(r.arena, r.off[i], r.len[i] ? r.len[i] : 1);

    if (!c->graph) {
        TU_OK(memra_gdn_verify(e, v));
        gv_check(e, &r, &first, ref, "eager");
    } else {
        MemraGraph *graph = NULL;
        TU_OK(memra_graph_capture(e, gv_step, &r, &graph));
        cr_assert_eq(r.calls, 3, "the step ran %u times during the capture, not 3", r.calls);

        /* What the warm-up runs left in the buffers the graph was captured with. */
        gv_result kept;
        gv_result_make(sh, t, b, &kept);
        gv_seqs_collect(e, sh, &first, &kept, "capture", "after the warm-ups");

        gv_seqs now;
        gv_seqs_fill(e, sh, h, &now, b, true);
        gv_bind(e, &now, table);
        tu_poison(e, r.arena);
        TU_OK(memra_graph_launch(e, graph));
        gv_check(e, &r, &now, ref, "graph replay 1, table rebound to fresh buffers");

        /* The same buffers, shifted by one sequence, canonical and alternate swapped. */
        gv_seqs shifted;
        shifted.b = b;
        for (size_t s = 0; s < b; s++) {
            shifted.ring[s] = now.ring[(s + 1) % b];
            shifted.canonical[s] = now.alternate[(s + 1) % b];
            shifted.alternate[s] = now.canonical[(s + 1) % b];
        }
        gv_seqs_fill(e, sh, h, &shifted, b, false);
        gv_bind(e, &shifted, table);
        tu_poison(e, r.arena);
        TU_OK(memra_graph_launch(e, graph));
        gv_check(e, &r, &shifted, ref,
                 "graph replay 2, table shifted by one sequence, canonical and alternate swapped");
        cr_assert_eq(r.calls, 3, "replaying the graph called the step again");

        gv_result after;
        gv_result_make(sh, t, b, &after);
        gv_seqs_collect(e, sh, &first, &after, "capture", "after the replays");
        for (int i = TU_GDN_RING; i <= TU_GDN_ALTERNATE; i++)
            tu_expect_bits(after.t[i], kept.t[i], kept.len[i],
                           "a replay after rebinding wrote the %s the graph was captured with",
                           tu_gdn_tensor_name[i]);
        gv_result_free(&kept);
        gv_result_free(&after);
        gv_seqs_free(e, &now);
        TU_OK(memra_graph_destroy(e, graph));
    }

    gv_seqs_free(e, &first);
    tu_gdn_device_free(e, &d);
    tu_free(e, table.ptr);
    tu_free(e, r.arena.ptr);
}

static void gv_run_case(gv_case c, MemraBackend backend)
{
    c.seed = tu_fresh_seed();
    cr_assert(c.b >= 1 && c.b <= GV_B_MAX && c.t >= 1);
    const tu_gdn_shape sh = tu_gdn_shape_make(c.num_k, c.num_v, c.d_conv);
    MemraEngine *e = tu_engine(backend);
    gv_guard_init(c.seed);
    tu_gdn_inputs h;
    tu_gdn_inputs_make(&sh, c.t, c.b, c.seed, &h);
    gv_result ref;
    gv_result_make(&sh, c.t, c.b, &ref);
    if (c.order == MEMRA_HEAD_ORDER_GROUPED) {
        tu_gdn_inputs tiled;
        gv_host_tiled(&sh, c.t, c.b, &h, &tiled);
        gv_program(e, &c, &sh, &tiled, &ref);
        tu_gdn_inputs_free(&tiled);
    } else {
        gv_program(e, &c, &sh, &h, &ref);
    }
    gv_verify(e, &c, &sh, &h, &ref);
    gv_result_free(&ref);
    tu_gdn_inputs_free(&h);
    TU_OK(memra_engine_destroy(e));
}

/* ---- The grid ---- */

#define SNAP MEMRA_VERIFY_MODE_SNAPSHOTS
#define FINAL MEMRA_VERIFY_MODE_FINAL_ONLY
#define TILED MEMRA_HEAD_ORDER_TILED
#define GROUPED MEMRA_HEAD_ORDER_GROUPED

static bool gv_full(void)
{
    const char *on = getenv("MEMRA_TEST_FULL");
    return on != NULL && strcmp(on, "1") == 0;
}

/* Fills `out` (when not NULL) with the cases and returns their number. */
static size_t gv_cases(gv_case *out)
{
    size_t n = 0;
#define GV_ADD(nk, nv, t_, b_, dc, mode_, order_, outs_, graph_)                                   \
    do {                                                                                           \
        if (out)                                                                                   \
            out[n] = (gv_case){nk, nv, t_, b_, dc, mode_, order_, outs_, graph_, false, 0};        \
        n++;                                                                                       \
    } while (0)
    const MemraVerifyMode modes[2] = {SNAP, FINAL};
    for (int m = 0; m < 2; m++) {
        const MemraVerifyMode mode = modes[m];
        /* Every t, three sequences. */
        for (size_t t = 1; t <= 16; t++)
            GV_ADD(2, 4, t, 3, 4, mode, TILED, GV_ALL_OUTS, false);
        /* b_n up to 32. */
        const size_t bs[] = {1, 2, 5, 8, 17, 32};
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
            GV_ADD(2, 4, bs[i] >= 17 ? 2 : 4, bs[i], 4, mode, TILED, GV_ALL_OUTS, false);
        GV_ADD(2, 4, 7, 32, 4, mode, TILED, GV_ALL_OUTS, false);
        /* Every conv width, at an odd and an even t. */
        for (size_t dc = 1; dc <= MEMRA_D_CONV_MAX; dc++) {
            GV_ADD(2, 4, 5, 2, dc, mode, TILED, GV_ALL_OUTS, false);
            GV_ADD(2, 4, 2, 3, dc, mode, TILED, dc % 2 ? 0u : GV_ALL_OUTS, false);
        }
        /* The optional outputs: none, each alone, each left out. */
        GV_ADD(2, 4, 3, 2, 4, mode, TILED, 0u, false);
        for (unsigned i = 0; i < GV_N_OPTIONAL; i++) {
            GV_ADD(2, 4, 3, 2, 4, mode, TILED, 1u << i, false);
            GV_ADD(2, 4, 4, 2, 3, mode, TILED, GV_ALL_OUTS & ~(1u << i), false);
        }
        /* Graph-replayed with rebinding. */
        const size_t gt[] = {1, 2, 3, 8, 16};
        for (size_t i = 0; i < sizeof gt / sizeof gt[0]; i++)
            GV_ADD(2, 4, gt[i], i % 2 ? 1 : 3, 4, mode, TILED, i % 2 ? 0x15u : GV_ALL_OUTS, true);
        GV_ADD(2, 4, 5, 4, 1, mode, TILED, GV_ALL_OUTS, true);
        GV_ADD(2, 4, 4, 2, 8, mode, TILED, 0u, true);
        GV_ADD(2, 4, 3, 32, 2, mode, TILED, GV_ALL_OUTS, true);
        /* The grouped head order, eager and graph-replayed. */
        GV_ADD(2, 4, 1, 3, 4, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(2, 4, 2, 1, 4, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(2, 4, 5, 3, 1, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(2, 4, 16, 2, 8, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(2, 4, 6, 5, 3, mode, GROUPED, 0x2au, false);
        GV_ADD(2, 4, 3, 3, 4, mode, GROUPED, GV_ALL_OUTS, true);
        GV_ADD(2, 4, 8, 2, 6, mode, GROUPED, 0u, true);
        /* Batches of the wide block shape (two blocks per head at least as many as the
         * multiprocessors of most GPUs): the grouped order, more than 8 rows, one and two staged
         * chunks, the head ratios 1, 2, 4 and 8, a graph replay. {num_k, num_v, t, b_n,
         * grouped, outputs, graph} */
        static const struct {
            size_t nk, nv, t, b;
            bool grouped;
            unsigned outs;
            bool graph;
        } wide[] = {
            {2, 4, 9, 17, true, GV_ALL_OUTS, false},  {2, 4, 17, 17, false, GV_ALL_OUTS, false},
            {4, 4, 3, 17, false, GV_ALL_OUTS, false}, {2, 8, 5, 17, true, GV_ALL_OUTS, false},
            {2, 8, 10, 17, false, 0x15u, false},      {1, 8, 3, 9, false, GV_ALL_OUTS, false},
            {2, 4, 6, 20, false, GV_ALL_OUTS, true}};
        for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
            GV_ADD(wide[i].nk, wide[i].nv, wide[i].t, wide[i].b, 4, mode,
                   wide[i].grouped ? GROUPED : TILED, wide[i].outs, wide[i].graph);
        /* num_v = 8 over num_k = 2: groups of four heads. */
        GV_ADD(2, 8, 4, 2, 4, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(2, 8, 3, 2, 4, mode, TILED, GV_ALL_OUTS, false);
        /* The production shape. */
        GV_ADD(16, 32, mode == SNAP ? 8 : 16, 2, 4, mode, TILED, GV_ALL_OUTS, false);
        GV_ADD(16, 32, 1, 4, 4, mode, TILED, GV_ALL_OUTS, false);
        GV_ADD(16, 32, 5, 2, 4, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(16, 32, 4, 2, 4, mode, TILED, 0x01u, true);
        GV_ADD(16, 32, 3, 2, 4, mode, GROUPED, 0u, true);
        GV_ADD(16, 32, 5, 3, 4, mode, GROUPED, GV_ALL_OUTS, false);
        GV_ADD(16, 32, 12, 3, 4, mode, TILED, GV_ALL_OUTS, false);
    }
    GV_ADD(16, 32, 2, 32, 4, FINAL, TILED, GV_ALL_OUTS, false);
    GV_ADD(16, 32, 2, 8, 4, SNAP, TILED, GV_ALL_OUTS, false);

    if (gv_full()) {
        const size_t bs[] = {1, 2, 3, 7, 16, 32};
        for (int m = 0; m < 2; m++)
            for (int o = 0; o < 2; o++)
                for (size_t t = 1; t <= 16; t++)
                    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
                        for (size_t dc = 1; dc <= MEMRA_D_CONV_MAX; dc++)
                            GV_ADD(2, 4, t, bs[i], dc, modes[m], o ? GROUPED : TILED, GV_ALL_OUTS,
                                   false);
    }
#undef GV_ADD
    return n;
}

static void gv_free_cases(struct criterion_test_params *ctp)
{
    cr_free(ctp->params);
}

static struct criterion_test_params gv_make_cases(void)
{
    size_t n = gv_cases(NULL);
    gv_case *cases = cr_malloc(n * sizeof *cases);
    cr_assert_not_null(cases);
    gv_cases(cases);
    return cr_make_param_array(gv_case, cases, n, gv_free_cases);
}

TU_PARAM_TEST_BACKENDS(gv_case, gv_make_cases(), gdn_verify, grid, gv_run_case)

/* SNAPSHOTS mode with t = 1 writes no snapshot (their shapes hold no row), so snapshot views
 * are not required; given anyway (a host that keeps its snapshot buffers bound whatever t is),
 * they are long enough for their empty shapes and must be accepted and left untouched. */
static void gv_t1_snapshot_views(MemraBackend backend)
{
    const size_t bs[] = {1, 3};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        gv_case c = {2, 4, 1, bs[i], 4, SNAP, TILED, GV_ALL_OUTS, false, true, 0};
        gv_run_case(c, backend);
    }
}

TU_TEST_BACKENDS(gdn_verify, t1_snapshot_views, gv_t1_snapshot_views)

/* ---- One launch per operation (CUDA) ---- */

/* The few CUDA driver entry points the check needs, with the driver's types reduced to what
 * crosses here (CUresult is an int, streams, contexts, graphs and nodes are pointers). */
typedef struct gv_driver {
    void *lib;
    int (*ctx_get_current)(void **ctx);
    int (*stream_get_ctx)(void *stream, void **ctx);
    int (*ctx_push)(void *ctx);
    int (*ctx_pop)(void **ctx);
    int (*begin_capture)(void *stream, int mode);
    int (*end_capture)(void *stream, void **graph);
    int (*graph_nodes)(void *graph, void **nodes, size_t *count);
    int (*node_type)(void *node, int *type);
    int (*graph_destroy)(void *graph);
} gv_driver;

/* CUstreamCaptureMode and CUgraphNodeType values of the driver API. */
#define GV_CAPTURE_MODE_RELAXED 2
#define GV_NODE_KERNEL 0

static void *gv_sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    cr_assert_not_null(p, "the CUDA driver has no %s", name);
    return p;
}

static void gv_driver_load(gv_driver *d)
{
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(d->lib, "a CUDA engine exists but libcuda.so.1 cannot be loaded: %s",
                       dlerror());
    *(void **)&d->ctx_get_current = gv_sym(d->lib, "cuCtxGetCurrent");
    *(void **)&d->stream_get_ctx = gv_sym(d->lib, "cuStreamGetCtx");
    *(void **)&d->ctx_push = gv_sym(d->lib, "cuCtxPushCurrent_v2");
    *(void **)&d->ctx_pop = gv_sym(d->lib, "cuCtxPopCurrent_v2");
    *(void **)&d->begin_capture = gv_sym(d->lib, "cuStreamBeginCapture_v2");
    *(void **)&d->end_capture = gv_sym(d->lib, "cuStreamEndCapture");
    *(void **)&d->graph_nodes = gv_sym(d->lib, "cuGraphGetNodes");
    *(void **)&d->node_type = gv_sym(d->lib, "cuGraphNodeGetType");
    *(void **)&d->graph_destroy = gv_sym(d->lib, "cuGraphDestroy");
}

typedef MemraStatus (*gv_op_fn)(MemraEngine *e, const MemraVerifyArgs *args);

/* Captures one call of `op` from the engine's stream and requires a graph of exactly `kernels`
 * nodes, every one a kernel launch (a verify and a commit are the prologue and the scan, a
 * rollback one copy kernel; no memset or copy node sneaks in). The call runs eagerly first, so
 * that whatever the library sets up once (its workspace) is in place before the capture. */
static void gv_expect_kernels(MemraEngine *e, const gv_driver *d, gv_op_fn op,
                              const MemraVerifyArgs *args, size_t kernels, const char *what)
{
    TU_OK(op(e, args));
    TU_OK(memra_engine_synchronize(e));
    void *stream = NULL, *ctx = NULL, *pushed = NULL;
    TU_OK(memra_engine_stream(e, &stream));
    cr_assert_not_null(stream, "%s: a CUDA engine without a stream", what);
    cr_assert_eq(d->ctx_get_current(&ctx), 0, "%s: cuCtxGetCurrent failed", what);
    if (ctx == NULL) {
        cr_assert_eq(d->stream_get_ctx(stream, &pushed), 0, "%s: cuStreamGetCtx failed", what);
        cr_assert_eq(d->ctx_push(pushed), 0, "%s: cuCtxPushCurrent failed", what);
    }
    cr_assert_eq(d->begin_capture(stream, GV_CAPTURE_MODE_RELAXED), 0,
                 "%s: cuStreamBeginCapture on the engine's stream failed", what);
    MemraStatus st = op(e, args);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    void *graph = NULL;
    const int end = d->end_capture(stream, &graph);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s under a capture of the engine's stream returned %s (%s)",
                 what, memra_status_string(st), msg);
    cr_assert(end == 0 && graph != NULL, "%s: cuStreamEndCapture failed (CUresult %d)", what, end);
    size_t count = 0;
    cr_assert_eq(d->graph_nodes(graph, NULL, &count), 0, "%s: cuGraphGetNodes failed", what);
    void *nodes[16];
    size_t listed = count < 16 ? count : 16;
    char types[128] = "";
    if (listed > 0) {
        cr_assert_eq(d->graph_nodes(graph, nodes, &listed), 0, "%s: cuGraphGetNodes failed", what);
        for (size_t i = 0; i < listed; i++) {
            int type = -1;
            cr_assert_eq(d->node_type(nodes[i], &type), 0, "%s: cuGraphNodeGetType failed", what);
            size_t n = strlen(types);
            snprintf(types + n, sizeof types - n, "%s%d", i ? ", " : "", type);
        }
    }
    size_t launches = 0;
    for (size_t i = 0; i < listed; i++) {
        int type = -1;
        (void)d->node_type(nodes[i], &type);
        launches += type == GV_NODE_KERNEL;
    }
    (void)d->graph_destroy(graph);
    if (pushed != NULL)
        (void)d->ctx_pop(&pushed);
    cr_assert(count == kernels && launches == kernels,
              "%s is %zu graph nodes (CUgraphNodeType %s), not %zu kernel launches", what, count,
              types, kernels);
    TU_OK(memra_engine_synchronize(e));
}

static MemraStatus gv_op_verify(MemraEngine *e, const MemraVerifyArgs *a)
{
    return memra_gdn_verify(e, a);
}

static MemraStatus gv_op_commit(MemraEngine *e, const MemraVerifyArgs *a)
{
    return memra_gdn_journal_commit(e, a);
}

static MemraStatus gv_op_rollback(MemraEngine *e, const MemraVerifyArgs *a)
{
    return memra_gdn_rollback(e, a);
}

Test(gdn_verify, kernel_nodes_cuda)
{
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CUDA);
    gv_driver d;
    gv_driver_load(&d);
    const uint64_t seed = tu_fresh_seed();
    const size_t t = 4, b = 3, S = MEMRA_D_STATE;
    const tu_gdn_shape sh = tu_gdn_shape_make(2, 4, 4);
    const size_t rows = b * t, cd = sh.conv_dim, nv = sh.num_v;
    size_t jlen = 0;
    TU_OK(memra_gdn_journal_len(S, sh.num_k, nv, t, &jlen));

    float *w = tu_host_array(cd * sh.d_conv), *dt_bias = tu_host_array(nv), *a = tu_host_array(nv);
    float *qkv = tu_host_array(rows * cd), *beta_raw = tu_host_array(rows * nv),
          *alpha = tu_host_array(rows * nv);
    float *ring0 = tu_host_array(sh.ring_words), *state0 = tu_host_array(sh.state_words);
    tu_gdn_weights(&sh, tu_mix_seed(seed, 0), w, dt_bias, a);
    tu_gdn_rows(&sh, rows, tu_mix_seed(seed, 1), qkv, beta_raw, alpha);
    tu_gdn_sequence(&sh, tu_mix_seed(seed, 2), ring0, state0);

    uint64_t snap_table[3 * 3], journal_table[3 * 3];
    for (size_t s = 0; s < b; s++) {
        MemraSliceMutF32 ring = tu_upload(e, ring0, sh.ring_words);
        MemraSliceMutF32 state = tu_upload(e, state0, sh.state_words);
        MemraSliceMutF32 alt = tu_upload(e, state0, sh.state_words);
        MemraSliceMutF32 journal = tu_zeros(e, jlen);
        snap_table[3 * s + 0] = journal_table[3 * s + 0] = tu_addr(ring);
        snap_table[3 * s + 1] = journal_table[3 * s + 1] = tu_addr(state);
        snap_table[3 * s + 2] = tu_addr(alt);
        journal_table[3 * s + 2] = tu_addr(journal);
    }
    MemraSliceMutU64 st_table = tu_upload_u64(e, snap_table, 3 * b);
    MemraSliceMutU64 jr_table = tu_upload_u64(e, journal_table, 3 * b);
    MemraSliceMutF32 dw = tu_upload(e, w, cd * sh.d_conv), ddt = tu_upload(e, dt_bias, nv),
                     da = tu_upload(e, a, nv), dqkv = tu_upload(e, qkv, rows * cd),
                     dbr = tu_upload(e, beta_raw, rows * nv), dal = tu_upload(e, alpha, rows * nv);
    MemraSliceMutF32 o = tu_poisoned(e, rows * sh.value_dim);
    MemraSliceMutF32 conv_outs = tu_poisoned(e, rows * cd);
    MemraSliceMutF32 snap_conv = tu_poisoned(e, b * (t - 1) * sh.ring_words);
    MemraSliceMutF32 snap_ssm = tu_poisoned(e, b * (t - 1) * sh.state_words);
    MemraSliceMutU32 zeros, ones;
    TU_OK(memra_alloc_u32(e, b, MEMRA_ALLOC_INIT_ZEROED, &zeros));
    TU_OK(memra_alloc_u32(e, b, MEMRA_ALLOC_INIT_ZEROED, &ones));
    const uint32_t one[3] = {1, 2, (uint32_t)t};
    tu_write_u32(e, one, b, ones);

    MemraVerifyArgs v;
    TU_OK(memra_verify_args_init(&v));
    v.num_k = sh.num_k;
    v.num_v = nv;
    v.d_conv = sh.d_conv;
    v.t = t;
    v.b_n = b;
    v.eps = TU_GDN_EPS;
    v.scale = TU_GDN_SCALE;
    v.qkv = tu_view(dqkv);
    v.table = tu_view_u64(st_table);
    v.w = tu_view(dw);
    v.beta_raw = tu_view(dbr);
    v.alpha = tu_view(dal);
    v.dt_bias = tu_view(ddt);
    v.a = tu_view(da);
    v.o = o;
    v.conv_outs = conv_outs;
    v.snap_conv = snap_conv;
    v.snap_ssm = snap_ssm;
    gv_expect_kernels(e, &d, gv_op_verify, &v, 2, "a SNAPSHOTS verify");
    v.head_order = MEMRA_HEAD_ORDER_GROUPED;
    gv_expect_kernels(e, &d, gv_op_verify, &v, 2, "a grouped SNAPSHOTS verify");
    v.head_order = MEMRA_HEAD_ORDER_TILED;

    MemraVerifyArgs r = v;
    r.accepted = tu_view_u32(ones);
    gv_expect_kernels(e, &d, gv_op_rollback, &r, 1, "a rollback");

    v.mode = MEMRA_VERIFY_MODE_FINAL_ONLY;
    v.snap_conv = v.snap_ssm = (MemraSliceMutF32){NULL, 0};
    gv_expect_kernels(e, &d, gv_op_verify, &v, 2, "a FINAL_ONLY verify");

    v.mode = MEMRA_VERIFY_MODE_JOURNAL;
    v.table = tu_view_u64(jr_table);
    v.accepted = tu_view_u32(zeros);
    gv_expect_kernels(e, &d, gv_op_verify, &v, 2, "a JOURNAL verify");
    gv_expect_kernels(e, &d, gv_op_commit, &v, 2, "a journal commit");

    dlclose(d.lib);
    free(w);
    free(dt_bias);
    free(a);
    free(qkv);
    free(beta_raw);
    free(alpha);
    free(ring0);
    free(state0);
    TU_OK(memra_engine_destroy(e));
}
