/*
 * The kernel grid: every CUDA kernel of the library, in every template instantiation, launched
 * through the public ABI on grids small enough for compute-sanitizer's racecheck, which is slow
 * on large ones. tools/gpu/gpu-check.sh runs the four sanitizer tools over this suite (its
 * `sanitize` step) and proves with its `coverage` step that the suite launches every kernel the
 * library contains. Each test draws fresh inputs, poisons every output first, and compares every
 * result bit for bit (memcmp) with the per-row program of tests/support (one conv, prep and scan
 * launch per row, all sequences at once) run on the same backend; the copies are compared with
 * their sources. The CPU variants run the same cases on the reference backend.
 *
 * What picks an instantiation, as the dispatch of kernels/cuda/ decides it (a change there must be
 * followed here; the coverage step names any kernel the grid no longer reaches):
 * - ssm_conv1d_kernel<D> (the 1.0 conv): D = d_conv, 1 to 8 (memra__with_d_conv). -> `widths`
 * - gdn_prologue_kernel<D, FLAV> (the verify's first kernel): D = d_conv, 1 to 8; FLAV the
 *   snapshot flavour for a SNAPSHOTS verify of t >= 2 and for a FINAL_ONLY or SNAPSHOTS verify
 *   of one row, the journal flavour for a JOURNAL verify and a commit, the final flavour for the
 *   rest (FINAL_ONLY at t >= 2).                                  -> `widths`, `journal`, `one_row`
 * - gdn_scan_kernel<VEC, AHEAD, MAP> (the 1.0 scan, also the scan of a SNAPSHOTS verify of
 *   t >= 2 and of a non-journal verify of one row): AHEAD 1 for t = 1 (the per-row scan), 2 for
 *   t >= 2 (the packed scan); VEC when q, k and the snapshots are 16-byte aligned; MAP when q
 *   and k hold one head per key head, as a verify's do (num_k below num_v), with AHEAD 1 for a
 *   16-byte aligned verify of one row; for t >= 2 rows the form of AHEAD 2, AHEAD 1 or STREAM
 *   (AHEAD 1, snapshots stored evict-first) whose waves leave the fewest block slots idle on a
 *   grid of at most two waves (b_n * num_v * 4 blocks; 3 of AHEAD 2, 4 of AHEAD 1 and 5 of
 *   STREAM fit a multiprocessor of sm_90).
 *      -> `scan_alignment`, `widths`, `one_row`, `snapshots_one_ahead`, `snapshots_streaming`
 * - gdn_verify_scan_kernel<scan_cfg, OUT, ...> (the scan of a verify and of a commit): the narrow
 *   block shape when b_n * num_v * 2 (blocks per head) is below the device's multiprocessor
 *   count, the wide one otherwise; the wide shape stages 8 rows at a time whatever t, the
 *   narrow one 8 when t <= 8 and 16 otherwise (a commit has t = 0); OUT FINAL for FINAL_ONLY
 *   of t >= 2, JOURNAL for a JOURNAL verify and for a commit; MINB, the blocks
 *   per multiprocessor its registers are bounded for: 4 for the wide shape, 2 for the narrow
 *   one (both of 128 threads); FOLD_FIRST for a journal scan whose grid is resident at once
 *   (always in the narrow shape; in the wide one when b_n * num_v * 2 is at most 4 blocks per
 *   multiprocessor), so the wide journal also runs on more sequences than that.
 *                                                                 -> `verify_scan`, `journal`
 * - gdn_verify_scan_v_kernel<scan_cfg, MINB> (the wide FINAL_ONLY scan that computes its v rows
 *   and gates, after a prologue of key-head units only): FINAL_ONLY of 2 to 8 rows, d_conv <= 4,
 *   in the wide shape, where the full prologue grid (b_n * (2 num_k + num_v) blocks) exceeds 9.6
 *   blocks per multiprocessor (1.2 waves of 8).                    -> `v_in_scan`
 * - gdn_prep_kernel (every test's per-row program), gdn_rollback_kernel (`verify_scan`) and
 *   state_copy_kernel (`copies`: its 16-byte and 4-byte paths, picked per copy by alignment).
 *
 * Sizes. The small model shape (num_k 2, num_v 4), d_conv 4 unless a case varies it, so that the
 * sanitized run stays short. Narrow cases take b_n = 2 (b_n * num_v * 2 = 16: below the
 * multiprocessor count of any GPU with more than 16), wide cases b_n = 20 (160: not below the
 * count of any GPU with up to 160 multiprocessors, the H200's 132 and the B200's 148 among them);
 * one wide journal case takes b_n = 80 (640 blocks: more than 4 per multiprocessor on any GPU
 * with up to 159, so the grid takes more than one wave), and the scan that computes its v rows
 * b_n = 208 (a full prologue of 1664 blocks: more than 9.6 per multiprocessor on any GPU with up
 * to 173). The SNAPSHOTS verify whose scan holds one row ahead takes b_n = 32 (512 scan blocks:
 * one wave of 4 per multiprocessor and two of 3 on any GPU of 128 to 170 multiprocessors, the
 * H100 SXM's and the H200's 132 among them), the one whose scan streams its snapshots b_n = 40
 * (640 blocks: one wave of 5 per multiprocessor, two of 4 or 3, on any GPU of 128 to 159).
 * The 8-row staging takes t = 3 (odd, so the final state goes to the alternate buffer), and
 * t = 9 when wide (two staged chunks of 8 and 1 rows); the narrow 16-row staging t = 17, where it
 * is cheap enough to also cross from one staged chunk to the next.
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

#define KG_NUM_K ((size_t)2)
#define KG_NUM_V ((size_t)4)
#define KG_NARROW_B ((size_t)2)
#define KG_WIDE_B ((size_t)20)
#define KG_WAVES_B ((size_t)80)
#define KG_PRO_WAVES_B ((size_t)208)
#define KG_ONE_AHEAD_B ((size_t)32)
#define KG_STREAM_B ((size_t)40)
#define KG_T8 ((size_t)3)
#define KG_T9_WIDE ((size_t)9)
#define KG_T16_NARROW ((size_t)17)
/* The outputs of one row, in tu_gdn_tensor order: conv_outs, q_l2, k_l2, v_g, beta, g_log, o. */
#define KG_N_OUT (TU_GDN_O + 1)

/* ---- The per-row program ---- */

/* What the per-row program computes for b sequences of t rows, sequence-major ([b, t, X]): the
 * outputs of every row, and the ring and the state after every row. */
typedef struct kg_rows {
    size_t b, t;
    float *out[KG_N_OUT];
    float *ring, *state;
} kg_rows;

static void kg_rows_free(kg_rows *r)
{
    for (int i = 0; i < KG_N_OUT; i++)
        free(r->out[i]);
    free(r->ring);
    free(r->state);
}

/* Words of output i for one row of one sequence. */
static size_t kg_row_words(const tu_gdn_shape *sh, int i)
{
    return tu_gdn_tensor_len(sh, 1, 1, i);
}

/* [b, t, words] (sequence-major) to [t, b, words] (row-major), or back when `back`. */
static float *kg_transpose(const float *src, size_t b, size_t t, size_t words, bool back)
{
    float *dst = tu_host_array(b * t * words);
    for (size_t s = 0; s < b; s++)
        for (size_t r = 0; r < t; r++) {
            const size_t seq_major = (s * t + r) * words, row_major = (r * b + s) * words;
            memcpy(dst + (back ? seq_major : row_major), src + (back ? row_major : seq_major),
                   words * sizeof *dst);
        }
    return dst;
}

/*
 * Runs t rows of b sequences (inputs sequence-major, as a verify reads them) from the rings
 * ring0 [b, ring_words] and states state0 [b, state_words] through tu_rows_row, with the weights
 * of `wt`. The prep's outputs, scratch of one row, start `shift` words into their buffers: 1 makes
 * the scan's q and k miss 16-byte alignment (its 4-byte instantiation). Every output is poisoned
 * before its row, and every result must be finite (a word the program left poisoned is not).
 */
static void kg_per_row(MemraEngine *e, const tu_gdn_shape *sh, const tu_gdn_device *wt, size_t b,
                       size_t t, const float *ring0, const float *state0, const float *qkv,
                       const float *beta_raw, const float *alpha, size_t shift, kg_rows *r)
{
    const size_t cd = sh->conv_dim, nv = sh->num_v, vd = sh->value_dim;
    const size_t rw = sh->ring_words, sw = sh->state_words;
    r->b = b;
    r->t = t;
    /* conv_outs and o come from the program's own [t, b, X] outputs at the end. */
    for (int i = TU_GDN_Q_L2; i <= TU_GDN_G_LOG; i++)
        r->out[i] = tu_host_array(b * t * kg_row_words(sh, i));
    r->ring = tu_host_array(b * t * rw);
    r->state = tu_host_array(b * t * sw);

    float *hq = kg_transpose(qkv, b, t, cd, false), *hb = kg_transpose(beta_raw, b, t, nv, false),
          *ha = kg_transpose(alpha, b, t, nv, false);
    MemraSliceMutF32 dq = tu_upload(e, hq, b * t * cd), db = tu_upload(e, hb, b * t * nv),
                     da = tu_upload(e, ha, b * t * nv);
    TU_FREE_HOST(hq, hb, ha);
    /* [rings | canonical | alternate | canonical]: even rows write the alternate state. */
    MemraSliceMutF32 *bufs = malloc(3 * b * sizeof *bufs);
    uint64_t *table = malloc(4 * b * sizeof *table);
    cr_assert(bufs != NULL && table != NULL);
    for (size_t s = 0; s < b; s++) {
        bufs[s] = rw ? tu_upload(e, ring0 + s * rw, rw) : tu_poisoned(e, 1);
        bufs[b + s] = tu_upload(e, state0 + s * sw, sw);
        bufs[2 * b + s] = tu_poisoned(e, sw);
        table[s] = tu_addr(bufs[s]);
        table[b + s] = table[3 * b + s] = tu_addr(bufs[b + s]);
        table[2 * b + s] = tu_addr(bufs[2 * b + s]);
    }
    MemraSliceMutU64 dtable = tu_upload_u64(e, table, 4 * b);
    MemraSliceMutF32 conv_outs = tu_poisoned(e, t * b * cd), o = tu_poisoned(e, t * b * vd);
    /* q, k, v, beta and g_log of one row (tu_gdn_tensor order from q_l2). */
    MemraSliceMutF32 scratch[5], held[5];
    for (int i = 0; i < 5; i++) {
        const size_t words = b * kg_row_words(sh, TU_GDN_Q_L2 + i);
        held[i] = tu_poisoned(e, words + shift);
        scratch[i] = tu_sub_mut(held[i], shift, words);
    }
    const tu_rows p = {
        .num_k = sh->num_k,
        .num_v = nv,
        .d_conv = sh->d_conv,
        .t = t,
        .b = b,
        /* The model, then the rows. */
        .w = tu_view(wt->w),
        .dt_bias = tu_view(wt->dt_bias),
        .a = tu_view(wt->a),
        .eps = TU_GDN_EPS,
        .scale = TU_GDN_SCALE,
        .qkv = tu_view(dq),
        .beta_raw = tu_view(db),
        .alpha = tu_view(da),
        .conv_outs = conv_outs,
        .o = o,
        .q = scratch[0],
        .k = scratch[1],
        .v = scratch[2],
        .beta = scratch[3],
        .g_log = scratch[4],
        .table = tu_view_u64(dtable),
    };
    float *row_buf = tu_host_array(b * vd);
    for (size_t row = 0; row < t; row++) {
        for (int i = 0; i < 5; i++)
            tu_poison(e, held[i]);
        const char *failed = "";
        const MemraStatus st = tu_rows_row(e, &p, row, &failed);
        cr_assert_eq(st, MEMRA_STATUS_OK, "the per-row program, row %zu: %s returned %s: %s", row,
                     failed, memra_status_string(st), memra_last_error_message());
        for (int i = 0; i < 5; i++) {
            const size_t words = kg_row_words(sh, TU_GDN_Q_L2 + i);
            tu_download_into(e, tu_view(scratch[i]), row_buf);
            for (size_t s = 0; s < b; s++)
                memcpy(r->out[TU_GDN_Q_L2 + i] + (s * t + row) * words, row_buf + s * words,
                       words * sizeof *row_buf);
        }
        for (size_t s = 0; s < b; s++) {
            if (rw)
                tu_download_into(e, tu_view(bufs[s]), r->ring + (s * t + row) * rw);
            tu_download_into(e, tu_view(bufs[(row % 2 == 0 ? 2 : 1) * b + s]),
                             r->state + (s * t + row) * sw);
        }
    }
    float *all = tu_download(e, conv_outs);
    r->out[TU_GDN_CONV_OUTS] = kg_transpose(all, b, t, cd, true);
    free(all);
    all = tu_download(e, o);
    r->out[TU_GDN_O] = kg_transpose(all, b, t, vd, true);
    free(all);
    for (int i = 0; i < KG_N_OUT; i++)
        cr_assert(tu_all_finite(r->out[i], b * t * kg_row_words(sh, i)),
                  "the per-row program's %s is not finite", tu_gdn_tensor_name[i]);
    cr_assert(tu_all_finite(r->ring, b * t * rw) && tu_all_finite(r->state, b * t * sw),
              "the per-row program's rings or states are not finite");

    free(row_buf);
    for (int i = 0; i < 5; i++)
        tu_free(e, held[i].ptr);
    for (size_t i = 0; i < 3 * b; i++)
        tu_free(e, bufs[i].ptr);
    void *const dev[] = {dq.ptr, db.ptr, da.ptr, dtable.ptr, conv_outs.ptr, o.ptr};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        tu_free(e, dev[i]);
    free(bufs);
    free(table);
}

/* Every tensor of the per-row program's run as a verify of the same rows writes it
 * (tu_gdn_outputs): the outputs, the snapshots after every row but the last (when `snapshots`,
 * else the poison of views never written), the final ring, and the final state in the buffer the
 * parity of t puts it in (alternate for odd t), the other buffer as `in` filled it. */
static void kg_expected(const tu_gdn_shape *sh, const kg_rows *r, const tu_gdn_inputs *in,
                        bool snapshots, tu_gdn_outputs *x)
{
    const size_t b = r->b, t = r->t, rw = sh->ring_words, sw = sh->state_words;
    tu_gdn_outputs_make(sh, t, b, x);
    for (int i = 0; i < KG_N_OUT; i++)
        memcpy(x->t[i], r->out[i], x->len[i] * sizeof(float));
    for (size_t s = 0; s < b; s++) {
        for (size_t row = 0; snapshots && row + 1 < t; row++) {
            memcpy(x->t[TU_GDN_SNAP_CONV] + (s * (t - 1) + row) * rw, r->ring + (s * t + row) * rw,
                   rw * sizeof(float));
            memcpy(x->t[TU_GDN_SNAP_SSM] + (s * (t - 1) + row) * sw, r->state + (s * t + row) * sw,
                   sw * sizeof(float));
        }
        const float *ring = r->ring + (s * t + t - 1) * rw,
                    *state = r->state + (s * t + t - 1) * sw;
        memcpy(x->t[TU_GDN_RING] + s * rw, ring, rw * sizeof(float));
        memcpy(x->t[TU_GDN_CANONICAL] + s * sw, t % 2 ? in->state0 + s * sw : state,
               sw * sizeof(float));
        memcpy(x->t[TU_GDN_ALTERNATE] + s * sw, t % 2 ? state : in->alt0 + s * sw,
               sw * sizeof(float));
    }
}

/* Fails unless every tensor of `got` equals `ref` bit for bit (poison included). */
static void kg_expect_outputs(const tu_gdn_outputs *got, const tu_gdn_outputs *ref,
                              const char *desc, const char *what)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++)
        tu_expect_bits(got->t[i], ref->t[i], ref->len[i], "%s, %s: %s", desc, what,
                       tu_gdn_tensor_name[i]);
}

/* Runs `step` on the bound verify (rings and states restored, outputs poisoned first) and
 * compares everything it writes with the per-row program's `r`. */
static void kg_run_bound(tu_gdn_bound *bd, const tu_gdn_inputs *in, const kg_rows *r,
                         MemraStatus (*step)(MemraEngine *, void *), bool snapshots,
                         const char *desc, const char *what)
{
    tu_gdn_rebind_inputs(bd, in);
    const MemraStatus st = step(bd->e, bd);
    cr_assert_eq(st, MEMRA_STATUS_OK, "%s, %s returned %s: %s", desc, what, memra_status_string(st),
                 memra_last_error_message());
    TU_OK(memra_engine_synchronize(bd->e));
    tu_gdn_outputs got, ref;
    tu_gdn_outputs_make(&bd->sh, bd->t, bd->b, &got);
    tu_gdn_collect(bd, &got);
    kg_expected(&bd->sh, r, in, snapshots, &ref);
    kg_expect_outputs(&got, &ref, desc, what);
    tu_gdn_outputs_free(&got);
    tu_gdn_outputs_free(&ref);
}

/* A bound problem of b sequences of t rows and the per-row program's run of it. */
typedef struct kg_problem {
    MemraEngine *e;
    tu_gdn_shape sh;
    uint64_t seed;
    char desc[192];
    tu_gdn_inputs in;
    tu_gdn_bound bd;
    kg_rows ref;
} kg_problem;

static void kg_problem_make(kg_problem *p, MemraBackend backend, size_t d_conv, size_t b, size_t t)
{
    p->e = tu_engine(backend);
    p->seed = tu_fresh_seed();
    p->sh = tu_gdn_shape_make(KG_NUM_K, KG_NUM_V, d_conv);
    snprintf(p->desc, sizeof p->desc, "num_k=%zu num_v=%zu d_conv=%zu b_n=%zu t=%zu, " TU_SEED_FMT,
             KG_NUM_K, KG_NUM_V, d_conv, b, t, p->seed);
    tu_gdn_inputs_make(&p->sh, t, b, p->seed, &p->in);
    tu_gdn_bind(p->e, &p->sh, t, b, MEMRA_HEAD_ORDER_TILED, &p->in, &p->bd);
    kg_per_row(p->e, &p->sh, &p->bd.in, b, t, p->in.ring0, p->in.state0, p->in.qkv, p->in.beta_raw,
               p->in.alpha, 0, &p->ref);
}

static void kg_problem_free(kg_problem *p)
{
    kg_rows_free(&p->ref);
    tu_gdn_unbind(&p->bd);
    tu_gdn_inputs_free(&p->in);
    TU_OK(memra_engine_destroy(p->e));
}

/* One problem of b sequences of t rows (d_conv 4), `step` run on it once against the per-row
 * program: a case whose only variable is the grid the launcher sees. */
static void kg_run_once(MemraBackend backend, size_t b, size_t t,
                        MemraStatus (*step)(MemraEngine *, void *), bool snapshots,
                        const char *what)
{
    kg_problem p;
    kg_problem_make(&p, backend, 4, b, t);
    kg_run_bound(&p.bd, &p.in, &p.ref, step, snapshots, p.desc, what);
    kg_problem_free(&p);
}

/* The bound verify in FINAL_ONLY mode: no snapshot views. */
static MemraStatus kg_final_step(MemraEngine *e, void *bound)
{
    tu_gdn_bound *bd = bound;
    MemraVerifyArgs v = bd->args;
    const MemraSliceMutF32 none = {NULL, 0};
    v.mode = MEMRA_VERIFY_MODE_FINAL_ONLY;
    v.snap_conv = v.snap_ssm = none;
    return memra_gdn_verify(e, &v);
}

/* ---- The conv widths: ssm_conv1d_kernel<D> and gdn_prologue_kernel<D> ---- */

/* For every d_conv, at b_n = 2 and t = 3: the 1.0 packed program (its conv's instantiation, the
 * prep, the packed scan), a SNAPSHOTS verify (the prologue's snapshot instantiation, the packed
 * scan on the prologue's workspace) and a FINAL_ONLY verify (its final instantiation) against the
 * per-row program (the per-row conv's instantiation). The journal flavour of each width is the
 * `journal` test's. */
static void kg_widths(MemraBackend backend)
{
    for (size_t d = 1; d <= MEMRA_D_CONV_MAX; d++) {
        kg_problem p;
        kg_problem_make(&p, backend, d, KG_NARROW_B, KG_T8);
        kg_run_bound(&p.bd, &p.in, &p.ref, tu_gdn_program_step, true, p.desc,
                     "the 1.0 packed program");
        kg_run_bound(&p.bd, &p.in, &p.ref, tu_gdn_verify_step, true, p.desc, "a SNAPSHOTS verify");
        kg_run_bound(&p.bd, &p.in, &p.ref, kg_final_step, false, p.desc, "a FINAL_ONLY verify");
        kg_problem_free(&p);
    }
}

TU_TEST_BACKENDS(kernel_grid, widths, kg_widths)

/* ---- One row: the non-journal verifies that take the 1.0 scan at t = 1 ---- */

/* A SNAPSHOTS and a FINAL_ONLY verify of one row (the prologue's snapshot flavour, then the 1.0
 * scan on its workspace) at b_n 2 and 20, against the per-row program. */
static void kg_one_row(MemraBackend backend)
{
    const size_t batches[] = {KG_NARROW_B, KG_WIDE_B};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        kg_problem p;
        kg_problem_make(&p, backend, 4, batches[i], 1);
        kg_run_bound(&p.bd, &p.in, &p.ref, tu_gdn_verify_step, true, p.desc, "a SNAPSHOTS verify");
        kg_run_bound(&p.bd, &p.in, &p.ref, kg_final_step, false, p.desc, "a FINAL_ONLY verify");
        kg_problem_free(&p);
    }
}

TU_TEST_BACKENDS(kernel_grid, one_row, kg_one_row)

/* ---- A SNAPSHOTS verify whose scan holds one row ahead ---- */

/* A SNAPSHOTS verify of t >= 2 rows on a grid that takes one wave of the scan's one-row-ahead form
 * and two of its two-rows-ahead form, and fewer block slots than the one wave of the streaming
 * form, so the launcher picks the one-row-ahead form, against the per-row program. */
static void kg_snapshots_one_ahead(MemraBackend backend)
{
    kg_run_once(backend, KG_ONE_AHEAD_B, KG_T8, tu_gdn_verify_step, true, "a SNAPSHOTS verify");
}

TU_TEST_BACKENDS(kernel_grid, snapshots_one_ahead, kg_snapshots_one_ahead)

/* A SNAPSHOTS verify of t >= 2 rows on a grid that takes one wave of the scan's streaming form
 * (one row ahead, snapshots stored with the evict-first hint) and two of either other form, so
 * the launcher picks the streaming form, against the per-row program. */
static void kg_snapshots_streaming(MemraBackend backend)
{
    kg_run_once(backend, KG_STREAM_B, KG_T8, tu_gdn_verify_step, true, "a SNAPSHOTS verify");
}

TU_TEST_BACKENDS(kernel_grid, snapshots_streaming, kg_snapshots_streaming)

/* ---- The wide scan that computes its v rows and gates ---- */

/* A FINAL_ONLY verify whose full prologue would take more than 1.2 waves: its prologue runs only
 * the key-head units and its wide scan convolves its own v channels and computes the gates
 * (gdn_verify_scan_v_kernel), against the per-row program; all its optional outputs are asked for,
 * since the scan writes those of v and of the gates. */
static void kg_v_in_scan(MemraBackend backend)
{
    kg_run_once(backend, KG_PRO_WAVES_B, KG_T8, kg_final_step, false, "a FINAL_ONLY verify");
}

TU_TEST_BACKENDS(kernel_grid, v_in_scan, kg_v_in_scan)

/* ---- The 1.0 scan's 4-byte instantiations ---- */

/* q and k one word past 16-byte alignment: the per-row scan (t = 1) and the packed scan
 * (t = 3) take their 4-byte instantiations, and must compute what the 16-byte ones computed (the
 * per-row program with aligned buffers, the reference); so must a SNAPSHOTS verify whose
 * snapshots sit one word past it (the packed scan with q and k per key head). b_n = 2, the
 * smallest batch that still has a second sequence whose rows follow another's. */
static void kg_scan_alignment(MemraBackend backend)
{
    kg_problem p;
    kg_problem_make(&p, backend, 4, KG_NARROW_B, KG_T8);
    const tu_gdn_shape *sh = &p.sh;
    const size_t b = KG_NARROW_B, t = KG_T8;

    kg_rows shifted;
    kg_per_row(p.e, sh, &p.bd.in, b, t, p.in.ring0, p.in.state0, p.in.qkv, p.in.beta_raw,
               p.in.alpha, 1, &shifted);
    for (int i = 0; i < KG_N_OUT; i++)
        tu_expect_bits(shifted.out[i], p.ref.out[i], b * t * kg_row_words(sh, i),
                       "%s, the per-row program with q and k misaligned: %s", p.desc,
                       tu_gdn_tensor_name[i]);
    tu_expect_bits(shifted.ring, p.ref.ring, b * t * sh->ring_words,
                   "%s, the per-row program with q and k misaligned: the rings", p.desc);
    tu_expect_bits(shifted.state, p.ref.state, b * t * sh->state_words,
                   "%s, the per-row program with q and k misaligned: the states", p.desc);
    kg_rows_free(&shifted);

    /* The packed program with its q_l2 and k_l2 one word into larger buffers; what lands there
     * is read back into the bound outputs' place before the comparison. */
    const size_t len = tu_gdn_tensor_len(sh, t, b, TU_GDN_Q_L2);
    MemraSliceMutF32 buf[2] = {tu_poisoned(p.e, len + 1), tu_poisoned(p.e, len + 1)};
    const MemraVerifyArgs aligned = p.bd.args;
    tu_gdn_rebind_inputs(&p.bd, &p.in);
    p.bd.args.q_l2 = tu_sub_mut(buf[0], 1, len);
    p.bd.args.k_l2 = tu_sub_mut(buf[1], 1, len);
    TU_OK(tu_gdn_program_step(p.e, &p.bd));
    TU_OK(memra_engine_synchronize(p.e));
    tu_gdn_outputs got, ref;
    tu_gdn_outputs_make(sh, t, b, &got);
    tu_gdn_collect(&p.bd, &got);
    tu_download_into(p.e, tu_view(p.bd.args.q_l2), got.t[TU_GDN_Q_L2]);
    tu_download_into(p.e, tu_view(p.bd.args.k_l2), got.t[TU_GDN_K_L2]);
    kg_expected(sh, &p.ref, &p.in, true, &ref);
    kg_expect_outputs(&got, &ref, p.desc, "the 1.0 packed program with q and k misaligned");
    /* The bound views it replaced were not written. */
    float *left = tu_download(p.e, p.bd.out[TU_GDN_Q_L2]);
    tu_expect_poison(left, len, "%s: the aligned q_l2 the misaligned run did not name", p.desc);
    free(left);
    p.bd.args = aligned;
    tu_gdn_outputs_free(&got);
    tu_gdn_outputs_free(&ref);

    /* The SNAPSHOTS verify with its state snapshots one word into a larger buffer. */
    const size_t slen = tu_gdn_tensor_len(sh, t, b, TU_GDN_SNAP_SSM);
    MemraSliceMutF32 sbuf = tu_poisoned(p.e, slen + 1);
    tu_gdn_rebind_inputs(&p.bd, &p.in);
    p.bd.args.snap_ssm = tu_sub_mut(sbuf, 1, slen);
    TU_OK(tu_gdn_verify_step(p.e, &p.bd));
    TU_OK(memra_engine_synchronize(p.e));
    tu_gdn_outputs_make(sh, t, b, &got);
    tu_gdn_collect(&p.bd, &got);
    tu_download_into(p.e, tu_view(p.bd.args.snap_ssm), got.t[TU_GDN_SNAP_SSM]);
    kg_expected(sh, &p.ref, &p.in, true, &ref);
    kg_expect_outputs(&got, &ref, p.desc, "a SNAPSHOTS verify with its snapshots misaligned");
    left = tu_download(p.e, p.bd.out[TU_GDN_SNAP_SSM]);
    tu_expect_poison(left, slen, "%s: the aligned snapshots the misaligned verify did not name",
                     p.desc);
    free(left);
    p.bd.args = aligned;
    tu_gdn_outputs_free(&got);
    tu_gdn_outputs_free(&ref);
    tu_free(p.e, sbuf.ptr);
    tu_free(p.e, buf[0].ptr);
    tu_free(p.e, buf[1].ptr);
    kg_problem_free(&p);
}

TU_TEST_BACKENDS(kernel_grid, scan_alignment, kg_scan_alignment)

/* ---- The verify's scans: narrow (8 and 16 rows staged) and wide, FINAL_ONLY and SNAPSHOTS; the
 * rollback ---- */

typedef struct kg_scan_case {
    size_t b, t;
} kg_scan_case;

static const kg_scan_case kg_scan_cases[] = {
    {KG_NARROW_B, KG_T8},         /* narrow, 8 rows staged */
    {KG_NARROW_B, KG_T16_NARROW}, /* narrow, 16 rows staged, two chunks */
    {KG_WIDE_B, KG_T8},           /* wide, 8 rows staged */
    {KG_WIDE_B, KG_T9_WIDE},      /* wide, 8 rows staged, two chunks */
};

/* After the SNAPSHOTS verify of `p`: a rollback of sequence s to t - s % t rows (every count
 * from t down to 1 among the sequences, t itself taking the final state from the alternate buffer
 * for odd t) must leave its canonical state and its ring as the per-row program left them after
 * that many rows. */
static void kg_rollback(kg_problem *p)
{
    const tu_gdn_shape *sh = &p->sh;
    const size_t b = p->bd.b, t = p->bd.t, rw = sh->ring_words, sw = sh->state_words;
    uint32_t *counts = malloc(b * sizeof *counts);
    cr_assert_not_null(counts);
    for (size_t s = 0; s < b; s++)
        counts[s] = (uint32_t)(t - s % t);
    MemraSliceMutU32 accepted;
    TU_OK(memra_alloc_u32(p->e, b, MEMRA_ALLOC_INIT_ZEROED, &accepted));
    tu_write_u32(p->e, counts, b, accepted);
    MemraVerifyArgs m;
    TU_OK(memra_verify_args_init(&m));
    m.num_k = sh->num_k;
    m.num_v = sh->num_v;
    m.d_conv = sh->d_conv;
    m.t = t;
    m.b_n = b;
    m.table = tu_view_u64(p->bd.table);
    m.snap_conv = p->bd.args.snap_conv;
    m.snap_ssm = p->bd.args.snap_ssm;
    m.accepted = tu_view_u32(accepted);
    TU_OK(memra_gdn_rollback(p->e, &m));
    TU_OK(memra_engine_synchronize(p->e));
    float *buf = tu_host_array(sw);
    for (size_t s = 0; s < b; s++) {
        const size_t at = s * t + counts[s] - 1;
        tu_download_into(p->e, tu_view(p->bd.canonical[s]), buf);
        tu_expect_bits(buf, p->ref.state + at * sw, sw,
                       "%s: the canonical state of sequence %zu after a rollback to %" PRIu32
                       " rows",
                       p->desc, s, counts[s]);
        tu_download_into(p->e, tu_view(p->bd.ring[s]), buf);
        tu_expect_bits(buf, p->ref.ring + at * rw, rw,
                       "%s: the ring of sequence %zu after a rollback to %" PRIu32 " rows", p->desc,
                       s, counts[s]);
    }
    free(buf);
    free(counts);
    tu_free(p->e, accepted.ptr);
}

static void kg_verify_scan(kg_scan_case c, MemraBackend backend)
{
    kg_problem p;
    kg_problem_make(&p, backend, 4, c.b, c.t);
    kg_run_bound(&p.bd, &p.in, &p.ref, kg_final_step, false, p.desc, "a FINAL_ONLY verify");
    kg_run_bound(&p.bd, &p.in, &p.ref, tu_gdn_verify_step, true, p.desc, "a SNAPSHOTS verify");
    kg_rollback(&p);
    kg_problem_free(&p);
}

TU_PARAM_TEST_BACKENDS(kg_scan_case, TU_PARAMS(kg_scan_case, kg_scan_cases), kernel_grid,
                       verify_scan, kg_verify_scan)

/* ---- The journal: JOURNAL verifies (narrow: 8 and 16 staged rows), the commit ---- */

typedef struct kg_journal_case {
    /* The sequences, the rows of the first verify and of the second (16 staged when above 8
     * in the narrow shape), the conv width. */
    size_t b, t1, t2, d_conv;
} kg_journal_case;

/* Narrow and wide at d_conv 4: the narrow second verify stages 16 rows at a time, the wide one 8
 * (two chunks of its 9 rows). The commit (t = 0, 8 rows staged) folds up to t2 rows: two chunks
 * (wide) or three (narrow). The wide shape again on a grid of several waves, whose scan takes
 * the prologue's verdict after its wait. Then every other conv width, narrow, for the prologue's
 * journal instantiations. */
static const kg_journal_case kg_journal_cases[] = {
    {KG_NARROW_B, KG_T8, KG_T16_NARROW, 4}, {KG_WIDE_B, KG_T8, KG_T9_WIDE, 4},
    {KG_WAVES_B, KG_T8, KG_T9_WIDE, 4},     {KG_NARROW_B, KG_T8, KG_T8, 1},
    {KG_NARROW_B, KG_T8, KG_T8, 2},         {KG_NARROW_B, KG_T8, KG_T8, 3},
    {KG_NARROW_B, KG_T8, KG_T8, 5},         {KG_NARROW_B, KG_T8, KG_T8, 6},
    {KG_NARROW_B, KG_T8, KG_T8, 7},         {KG_NARROW_B, KG_T8, KG_T8, 8},
};

/* The count of sequence s out of t rows: t - s % (t + 1), so that the sequences take every count
 * from t down to 0. */
static uint32_t kg_count(size_t s, size_t t)
{
    return (uint32_t)(t - s % (t + 1));
}

/* The ring and state of sequence s after n rows of `r`, or `ring0` and `state0` for n = 0. */
static void kg_after(const tu_gdn_shape *sh, const kg_rows *r, size_t s, size_t n,
                     const float *ring0, const float *state0, float *ring, float *state)
{
    const float *rs = n ? r->ring + (s * r->t + n - 1) * sh->ring_words : ring0;
    const float *ss = n ? r->state + (s * r->t + n - 1) * sh->state_words : state0;
    memcpy(ring, rs, sh->ring_words * sizeof *ring);
    memcpy(state, ss, sh->state_words * sizeof *state);
}

/* Fails unless the buffers of every sequence hold `ring` and `state` ([b, words] each). */
static void kg_expect_seqs(MemraEngine *e, const tu_gdn_shape *sh, size_t b,
                           const MemraSliceMutF32 *bufs, const float *ring, const float *state,
                           const char *desc, const char *when)
{
    float *got = tu_host_array(sh->state_words);
    for (size_t s = 0; s < b; s++) {
        if (sh->ring_words) {
            tu_download_into(e, tu_view(bufs[2 * s]), got);
            tu_expect_bits(got, ring + s * sh->ring_words, sh->ring_words,
                           "%s: the ring of sequence %zu %s", desc, s, when);
        }
        tu_download_into(e, tu_view(bufs[2 * s + 1]), got);
        tu_expect_bits(got, state + s * sh->state_words, sh->state_words,
                       "%s: the state of sequence %zu %s", desc, s, when);
    }
    free(got);
}

/* One JOURNAL verify of t rows with the counts `counts`; its outputs (o and every optional one)
 * must be the per-row program's `r`. */
static void kg_journal_verify(MemraEngine *e, const tu_gdn_shape *sh, const tu_gdn_device *d,
                              MemraSliceMutU64 table, MemraSliceMutU32 accepted,
                              const uint32_t *counts, size_t b, size_t t, const kg_rows *r,
                              const char *desc)
{
    MemraVerifyArgs v;
    tu_gdn_args_init(&v, sh, t, b, MEMRA_VERIFY_MODE_JOURNAL, MEMRA_HEAD_ORDER_TILED, d);
    v.table = tu_view_u64(table);
    v.accepted = tu_view_u32(accepted);
    tu_write_u32(e, counts, b, accepted);
    MemraSliceMutF32 *views[TU_GDN_N_VIEWS], out[KG_N_OUT];
    tu_gdn_views(&v, views);
    for (int i = 0; i < KG_N_OUT; i++)
        *views[i] = out[i] = tu_poisoned(e, tu_gdn_tensor_len(sh, t, b, i));
    TU_OK(memra_gdn_verify(e, &v));
    TU_OK(memra_engine_synchronize(e));
    for (int i = 0; i < KG_N_OUT; i++) {
        float *got = tu_download(e, out[i]);
        tu_expect_bits(got, r->out[i], out[i].len, "%s: %s of the JOURNAL verify of t=%zu", desc,
                       tu_gdn_tensor_name[i], t);
        free(got);
        tu_free(e, out[i].ptr);
    }
}

/*
 * Two JOURNAL verifies and a commit on empty journals: the first verify (t1 rows, every count 0)
 * must give the per-row program's outputs from the starting rings and states, and leave those in
 * place; the second (t2 rows, counts kg_count(s, t1)) must fold the accepted rows, giving the
 * per-row program's outputs from the rings and states after them, and leave those; the commit
 * (counts kg_count(s, t2)) must leave the per-row program's rings and states after the rows it
 * accepted.
 */
static void kg_journal(kg_journal_case c, MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    const tu_gdn_shape sh = tu_gdn_shape_make(KG_NUM_K, KG_NUM_V, c.d_conv);
    const size_t b = c.b, rw = sh.ring_words, sw = sh.state_words, cd = sh.conv_dim;
    char desc[192];
    snprintf(desc, sizeof desc,
             "journal num_k=%zu num_v=%zu d_conv=%zu b_n=%zu t=%zu then t=%zu, then a "
             "commit, " TU_SEED_FMT,
             KG_NUM_K, KG_NUM_V, c.d_conv, b, c.t1, c.t2, seed);
    size_t jlen = 0;
    /* Sized for the larger of the two verifies: each writes its rows to the journal. */
    const size_t t_max = c.t1 > c.t2 ? c.t1 : c.t2;
    TU_OK(memra_gdn_journal_len(MEMRA_D_STATE, sh.num_k, sh.num_v, t_max, &jlen));

    tu_gdn_inputs in1;
    tu_gdn_inputs_make(&sh, c.t1, b, seed, &in1);
    float *qkv2 = tu_host_array(b * c.t2 * cd), *br2 = tu_host_array(b * c.t2 * sh.num_v),
          *al2 = tu_host_array(b * c.t2 * sh.num_v);
    tu_gdn_rows(&sh, b * c.t2, tu_mix_seed(seed, 7), qkv2, br2, al2);
    tu_gdn_device d1, d2;
    tu_gdn_upload(e, &sh, c.t1, b, &in1, &d1);
    d2 = d1;
    d2.qkv = tu_upload(e, qkv2, b * c.t2 * cd);
    d2.beta_raw = tu_upload(e, br2, b * c.t2 * sh.num_v);
    d2.alpha = tu_upload(e, al2, b * c.t2 * sh.num_v);

    /* Per sequence: the ring and the state (bufs[2s], bufs[2s + 1]) and the journal. */
    MemraSliceMutF32 *bufs = malloc(3 * b * sizeof *bufs);
    uint64_t *host = malloc(3 * b * sizeof *host);
    uint32_t *counts = malloc(b * sizeof *counts);
    cr_assert(bufs != NULL && host != NULL && counts != NULL);
    for (size_t s = 0; s < b; s++) {
        /* d_conv 1 has no ring: a word stands for it, which no kernel reads. */
        bufs[2 * s] = rw ? tu_upload(e, in1.ring0 + s * rw, rw) : tu_poisoned(e, 1);
        bufs[2 * s + 1] = tu_upload(e, in1.state0 + s * sw, sw);
        bufs[2 * b + s] = tu_zeros(e, jlen);
        host[3 * s + 0] = tu_addr(bufs[2 * s]);
        host[3 * s + 1] = tu_addr(bufs[2 * s + 1]);
        host[3 * s + 2] = tu_addr(bufs[2 * b + s]);
    }
    MemraSliceMutU64 table = tu_upload_u64(e, host, 3 * b);
    MemraSliceMutU32 accepted;
    TU_OK(memra_alloc_u32(e, b, MEMRA_ALLOC_INIT_ZEROED, &accepted));

    kg_rows r1, r2;
    kg_per_row(e, &sh, &d1, b, c.t1, in1.ring0, in1.state0, in1.qkv, in1.beta_raw, in1.alpha, 0,
               &r1);
    memset(counts, 0, b * sizeof *counts);
    kg_journal_verify(e, &sh, &d1, table, accepted, counts, b, c.t1, &r1, desc);
    kg_expect_seqs(e, &sh, b, bufs, in1.ring0, in1.state0, desc, "after the first verify");

    float *ring1 = tu_host_array(b * rw), *state1 = tu_host_array(b * sw);
    for (size_t s = 0; s < b; s++) {
        counts[s] = kg_count(s, c.t1);
        kg_after(&sh, &r1, s, counts[s], in1.ring0 + s * rw, in1.state0 + s * sw, ring1 + s * rw,
                 state1 + s * sw);
    }
    kg_per_row(e, &sh, &d1, b, c.t2, ring1, state1, qkv2, br2, al2, 0, &r2);
    kg_journal_verify(e, &sh, &d2, table, accepted, counts, b, c.t2, &r2, desc);
    kg_expect_seqs(e, &sh, b, bufs, ring1, state1, desc,
                   "after the second verify (the accepted rows of the first folded)");

    float *ring2 = tu_host_array(b * rw), *state2 = tu_host_array(b * sw);
    for (size_t s = 0; s < b; s++) {
        counts[s] = kg_count(s, c.t2);
        kg_after(&sh, &r2, s, counts[s], ring1 + s * rw, state1 + s * sw, ring2 + s * rw,
                 state2 + s * sw);
    }
    tu_write_u32(e, counts, b, accepted);
    MemraVerifyArgs m;
    TU_OK(memra_verify_args_init(&m));
    m.mode = MEMRA_VERIFY_MODE_JOURNAL;
    m.num_k = sh.num_k;
    m.num_v = sh.num_v;
    m.d_conv = sh.d_conv;
    m.b_n = b;
    m.eps = TU_GDN_EPS;
    m.table = tu_view_u64(table);
    m.w = tu_view(d1.w);
    m.dt_bias = tu_view(d1.dt_bias);
    m.a = tu_view(d1.a);
    m.accepted = tu_view_u32(accepted);
    TU_OK(memra_gdn_journal_commit(e, &m));
    TU_OK(memra_engine_synchronize(e));
    kg_expect_seqs(e, &sh, b, bufs, ring2, state2, desc, "after the commit");

    kg_rows_free(&r1);
    kg_rows_free(&r2);
    TU_FREE_HOST(qkv2, br2, al2, ring1, state1, ring2, state2, host, counts);
    for (size_t i = 0; i < 3 * b; i++)
        tu_free(e, bufs[i].ptr);
    free(bufs);
    void *const dev[] = {d2.qkv.ptr, d2.beta_raw.ptr, d2.alpha.ptr, table.ptr, accepted.ptr};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        tu_free(e, dev[i]);
    tu_gdn_device_free(e, &d1);
    tu_gdn_inputs_free(&in1);
    TU_OK(memra_engine_destroy(e));
}

TU_PARAM_TEST_BACKENDS(kg_journal_case, TU_PARAMS(kg_journal_case, kg_journal_cases), kernel_grid,
                       journal, kg_journal)

/* ---- The state copies: state_copy_kernel's 16-byte and 4-byte paths ---- */

/* Words of a copy: not a multiple of 4, so the 16-byte path also copies a tail of 3 words; one
 * block of the copy kernel per copy. */
#define KG_COPY_WORDS ((size_t)1027)
#define KG_COPY_GAP ((size_t)5)

/*
 * Three batched copies with aligned addresses (the 16-byte path and its tail), three with every
 * address one word off (the 4-byte path), and one copy through memra_copy_indirect_src_f32; each
 * destination poisoned first must end as its source's words, the gaps between them poisoned.
 */
static void kg_copies(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    const size_t n = 3, words = KG_COPY_WORDS, stride = words + KG_COPY_GAP, len = 1 + n * stride;
    MemraSliceMutF32 src = tu_upload_varied(e, len, seed, 1.0f);
    float *src_host = tu_download(e, src), *ref = tu_host_array(len);
    for (size_t shift = 0; shift < 2; shift++) {
        MemraSliceMutF32 dst = tu_poisoned(e, len);
        uint64_t table[2 * 3];
        tu_poison_host(ref, len);
        for (size_t i = 0; i < n; i++) {
            const size_t at = shift + i * stride;
            table[i] = tu_addr(src) + at * sizeof(float);
            table[n + i] = tu_addr(dst) + at * sizeof(float);
            memcpy(ref + at, src_host + at, words * sizeof *ref);
        }
        MemraSliceMutU64 dtable = tu_upload_u64(e, table, 2 * n);
        TU_OK(memra_copy_batch_uniform_f32(e, tu_view_u64(dtable), n, words));
        float *got = tu_download(e, dst);
        tu_expect_bits(got, ref, len, "%zu copies of %zu words shifted by %zu, " TU_SEED_FMT, n,
                       words, shift, seed);
        free(got);
        tu_free(e, dtable.ptr);
        tu_free(e, dst.ptr);
    }
    const uint64_t entry = tu_addr(src) + sizeof(float);
    MemraSliceMutU64 src_ptr = tu_upload_u64(e, &entry, 1);
    MemraSliceMutF32 dst = tu_poisoned(e, words + 2);
    TU_OK(memra_copy_indirect_src_f32(e, tu_view_u64(src_ptr), dst, 1, words));
    float *got = tu_download(e, dst);
    tu_poison_host(ref, words + 2);
    memcpy(ref + 1, src_host + 1, words * sizeof *ref);
    tu_expect_bits(got, ref, words + 2, "an indirect copy of %zu words, " TU_SEED_FMT, words, seed);
    TU_FREE_HOST(got, ref, src_host);
    tu_free(e, src_ptr.ptr);
    tu_free(e, dst.ptr);
    tu_free(e, src.ptr);
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(kernel_grid, copies, kg_copies)
