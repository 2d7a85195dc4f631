/*
 * The packed ops' acceptance test, through the public ABI, on both backends: the packed T-row
 * ops (conv tloop, prep over T rows, scan tsnap) must be BIT-IDENTICAL to T chained per-row
 * launches that ping-pong the state through the table [pc, p0, p1, pc, p1, p0] - conv
 * outputs, scan outputs, the final state where the per-row parity leaves it, the final ring,
 * and every post-row snapshot. "The seed" below is that acceptance program: its shapes
 * (d_conv 4, eps 1e-6, the small and the "ornith" model), its per-T input seeds and spreads,
 * its T sweep and the six tensors it compares, all kept here exactly.
 *
 * Each case runs the per-row reference and the packed program on the same engine, eagerly or
 * as a captured graph replayed twice after the table was rebound to freshly allocated buffers
 * (the second replay with canonical and alternate swapped, as an odd verify round does). The
 * seed's own inputs are replayed exactly (tu_varied with its seeds and spreads), and every
 * case also runs on inputs drawn from a fresh seed. The batched form (B sequences in one launch
 * per op) is checked against B x T per-row launches, and the packed ops without snapshots
 * against the same ops with them. On CUDA every tensor must further agree with the CPU
 * backend's run of the same case within a relative error of 1e-5 (docs/arithmetic.md, rule 3).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

/* The seed's fixed parameters. */
#define GP_D_CONV 4
#define GP_EPS 1e-6f
/* The batched cases' sequence count. */
#define GP_B_MAX 3
/* CUDA against CPU, per tensor (docs/arithmetic.md, rule 3). */
#define GP_CROSS_BACKEND_TOL 1e-5

enum gp_mode { GP_EAGER, GP_GRAPH };
enum gp_inputs { GP_SEED_INPUTS, GP_FRESH_INPUTS };

/* The six tensors the seed compares, in its order. */
enum gp_tensor {
    GP_CONV_OUT,
    GP_SCAN_O,
    GP_FINAL_SSM,
    GP_FINAL_CONV,
    GP_SNAP_CONV,
    GP_SNAP_SSM,
    GP_N_TENSORS
};

static const char *const gp_tensor_name[GP_N_TENSORS] = {
    "conv_out", "scan o", "final ssm state", "final conv ring", "conv snapshots", "ssm snapshots",
};

/* Which tensors a comparison covers. */
#define GP_ALL_TENSORS ((1u << GP_N_TENSORS) - 1)
#define GP_NO_SNAPSHOTS (GP_ALL_TENSORS & ~((1u << GP_SNAP_CONV) | (1u << GP_SNAP_SSM)))

/* One test case: what Criterion reports and what every failure message repeats. */
typedef struct gp_case {
    const char *name;
    size_t num_k;
    size_t num_v;
    size_t t;
    size_t b;
    enum gp_mode mode;
    enum gp_inputs inputs;
    /* Base of the fresh inputs (unused for the seed's inputs). */
    uint64_t seed;
} gp_case;

typedef struct gp_dims {
    size_t num_k, num_v, key_dim, value_dim, conv_dim, pad;
    size_t ring_words, state_words, t, b;
    float scale;
} gp_dims;

/* Host inputs; per-sequence arrays are sequence-major ([B, ...]). */
typedef struct gp_host {
    float *w, *dt_bias, *a;
    float *conv0, *ssm0, *qkv, *beta_raw, *alpha;
} gp_host;

/* The weights every run of a case shares, uploaded once per engine. */
typedef struct gp_shared {
    MemraSliceMutF32 w, dt_bias, a;
} gp_shared;

/* The six tensors of one run, read back to the host. */
typedef struct gp_result {
    float *t[GP_N_TENSORS];
    size_t len[GP_N_TENSORS];
} gp_result;

/* Everything the packed step reads; the graph step gets a pointer to it. */
typedef struct gp_packed {
    gp_dims d;
    MemraSliceF32 qkv, beta_raw, alpha, w, dt_bias, a;
    MemraSliceMutU64 table;
    MemraSliceMutF32 conv_outs, q, k, v, beta, g_log, o_all;
    /* {NULL, 0} when the case runs without snapshots. */
    MemraSliceMutF32 snap_conv, snap_ssm;
    unsigned calls;
} gp_packed;

/* The rings and states of the B sequences the packed ops run on. */
typedef struct gp_seqs {
    MemraSliceMutF32 ring[GP_B_MAX], canonical[GP_B_MAX], alternate[GP_B_MAX];
} gp_seqs;

static gp_dims gp_make_dims(size_t num_k, size_t num_v, size_t t, size_t b)
{
    const tu_gdn_shape sh = tu_gdn_shape_make(num_k, num_v, GP_D_CONV);
    gp_dims d = {num_k,
                 num_v,
                 sh.key_dim,
                 sh.value_dim,
                 sh.conv_dim,
                 sh.pad,
                 sh.ring_words,
                 sh.state_words,
                 t,
                 b,
                 1.0f / sqrtf((float)MEMRA_D_STATE)};
    return d;
}

static float *gp_array(size_t len)
{
    float *p = malloc(len * sizeof *p);
    cr_assert_not_null(p);
    return p;
}

/*
 * The inputs of a case. The seed's inputs exist for one sequence: its T loop index ti = T - 2
 * selects the per-T seeds 10+ti .. 50+ti. Fresh inputs keep the seed's spreads but derive every
 * stream from the case's base seed, sequence by sequence.
 */
static void gp_host_make(const gp_case *c, const gp_dims *d, gp_host *h)
{
    const size_t b = d->b, t = d->t;
    h->w = gp_array(d->conv_dim * GP_D_CONV);
    h->dt_bias = gp_array(d->num_v);
    h->a = gp_array(d->num_v);
    h->conv0 = gp_array(b * d->ring_words);
    h->ssm0 = gp_array(b * d->state_words);
    h->qkv = gp_array(b * t * d->conv_dim);
    h->beta_raw = gp_array(b * t * d->num_v);
    h->alpha = gp_array(b * t * d->num_v);

    if (c->inputs == GP_SEED_INPUTS) {
        cr_assert_eq(b, 1, "the seed's inputs describe one sequence");
        cr_assert(t >= 2 && t <= 8, "the seed's inputs exist for T in 2..=8");
        const uint64_t ti = t - 2;
        tu_varied(h->w, d->conv_dim * GP_D_CONV, 1, 0.5f);
        tu_varied(h->dt_bias, d->num_v, 2, 0.5f);
        tu_varied(h->a, d->num_v, 3, 1.0f);
        tu_varied(h->conv0, d->ring_words, 10 + ti, 1.0f);
        tu_varied(h->ssm0, d->state_words, 20 + ti, 0.3f);
        tu_varied(h->qkv, t * d->conv_dim, 30 + ti, 1.0f);
        tu_varied(h->beta_raw, t * d->num_v, 40 + ti, 2.0f);
        tu_varied(h->alpha, t * d->num_v, 50 + ti, 2.0f);
        return;
    }
    tu_varied(h->w, d->conv_dim * GP_D_CONV, tu_mix_seed(c->seed, 1), 0.5f);
    tu_varied(h->dt_bias, d->num_v, tu_mix_seed(c->seed, 2), 0.5f);
    tu_varied(h->a, d->num_v, tu_mix_seed(c->seed, 3), 1.0f);
    for (size_t s = 0; s < b; s++) {
        const uint64_t base = 16 + 8 * (uint64_t)s;
        tu_varied(h->conv0 + s * d->ring_words, d->ring_words, tu_mix_seed(c->seed, base), 1.0f);
        tu_varied(h->ssm0 + s * d->state_words, d->state_words, tu_mix_seed(c->seed, base + 1),
                  0.3f);
        tu_varied(h->qkv + s * t * d->conv_dim, t * d->conv_dim, tu_mix_seed(c->seed, base + 2),
                  1.0f);
        tu_varied(h->beta_raw + s * t * d->num_v, t * d->num_v, tu_mix_seed(c->seed, base + 3),
                  2.0f);
        tu_varied(h->alpha + s * t * d->num_v, t * d->num_v, tu_mix_seed(c->seed, base + 4), 2.0f);
    }
}

static void gp_host_free(gp_host *h)
{
    TU_FREE_HOST(h->w, h->dt_bias, h->a, h->conv0, h->ssm0, h->qkv, h->beta_raw, h->alpha);
}

static void gp_result_make(const gp_dims *d, gp_result *r)
{
    r->len[GP_CONV_OUT] = d->b * d->t * d->conv_dim;
    r->len[GP_SCAN_O] = d->b * d->t * d->value_dim;
    r->len[GP_FINAL_SSM] = d->b * d->state_words;
    r->len[GP_FINAL_CONV] = d->b * d->ring_words;
    r->len[GP_SNAP_CONV] = d->b * (d->t - 1) * d->ring_words;
    r->len[GP_SNAP_SSM] = d->b * (d->t - 1) * d->state_words;
    for (int i = 0; i < GP_N_TENSORS; i++)
        r->t[i] = gp_array(r->len[i] ? r->len[i] : 1);
}

static void gp_result_free(gp_result *r)
{
    for (int i = 0; i < GP_N_TENSORS; i++)
        free(r->t[i]);
}

static void gp_shared_make(MemraEngine *e, const gp_dims *d, const gp_host *h, gp_shared *sh)
{
    sh->w = tu_upload(e, h->w, d->conv_dim * GP_D_CONV);
    sh->dt_bias = tu_upload(e, h->dt_bias, d->num_v);
    sh->a = tu_upload(e, h->a, d->num_v);
}

static void gp_describe(const gp_case *c, char *buf, size_t n)
{
    if (c->inputs == GP_SEED_INPUTS)
        snprintf(buf, n, "%s (num_k=%zu num_v=%zu T=%zu B=%zu, the seed's inputs)", c->name,
                 c->num_k, c->num_v, c->t, c->b);
    else
        snprintf(buf, n, "%s (num_k=%zu num_v=%zu T=%zu B=%zu, " TU_SEED_FMT ")", c->name, c->num_k,
                 c->num_v, c->t, c->b, c->seed);
}

/* Every selected tensor finite in both runs and equal bit for bit. */
static void gp_expect_identical(const gp_case *c, const char *what, const gp_result *ref,
                                const gp_result *got, unsigned mask)
{
    char desc[256];
    gp_describe(c, desc, sizeof desc);
    for (int i = 0; i < GP_N_TENSORS; i++) {
        if (!(mask & (1u << i)))
            continue;
        const size_t n = ref->len[i];
        cr_assert(tu_all_finite(ref->t[i], n), "%s, %s: reference %s is not finite", desc, what,
                  gp_tensor_name[i]);
        cr_assert(tu_all_finite(got->t[i], n), "%s, %s: %s is not finite", desc, what,
                  gp_tensor_name[i]);
        const size_t diffs = tu_bit_diffs(ref->t[i], got->t[i], n);
        if (diffs != 0) {
            size_t first = 0;
            while (memcmp(&ref->t[i][first], &got->t[i][first], sizeof(float)) == 0)
                first++;
            cr_assert_fail("%s, %s: %s differs in %zu of %zu words (first at %zu: %a vs "
                           "reference %a)",
                           desc, what, gp_tensor_name[i], diffs, n, first, (double)got->t[i][first],
                           (double)ref->t[i][first]);
        }
    }
}

/* Every selected tensor of the CUDA run within 1e-5 of the CPU run. */
static void gp_expect_close(const gp_case *c, const char *what, const gp_result *cpu,
                            const gp_result *cuda, unsigned mask)
{
    char desc[256];
    gp_describe(c, desc, sizeof desc);
    for (int i = 0; i < GP_N_TENSORS; i++) {
        if (!(mask & (1u << i)) || cpu->len[i] == 0)
            continue;
        const double err = tu_rel_err_f32(cuda->t[i], cpu->t[i], cpu->len[i]);
        cr_assert(err <= GP_CROSS_BACKEND_TOL,
                  "%s, %s: CUDA %s is %.3g from the CPU backend's (relative, limit %g)", desc, what,
                  gp_tensor_name[i], err, GP_CROSS_BACKEND_TOL);
    }
}

/*
 * The reference for sequence s: the seed's per-row program, T chained launches of the three
 * per-row ops with b_n = 1 reading the ping-pong table [pc, p0, p1, pc, p1, p0] (even rows use
 * entries 0..2, odd rows 3..5), snapshots taken by reading the ring and the freshly written
 * state back after every row but the last.
 */
static void gp_per_row(MemraEngine *e, const gp_dims *d, const gp_host *h, const gp_shared *sh,
                       size_t s, gp_result *ref)
{
    const size_t t = d->t, cd = d->conv_dim, vd = d->value_dim, nv = d->num_v;
    const size_t rw = d->ring_words, sw = d->state_words;

    MemraSliceMutF32 ring = tu_upload(e, h->conv0 + s * rw, rw);
    MemraSliceMutF32 s0 = tu_upload(e, h->ssm0 + s * sw, sw);
    /* The seed zero-fills the alternate state; poisoning it also proves that row 0 writes all
     * of it. */
    MemraSliceMutF32 s1 = tu_poisoned(e, sw);
    const uint64_t pc = tu_addr(ring), p0 = tu_addr(s0), p1 = tu_addr(s1);
    const uint64_t host_table[6] = {pc, p0, p1, pc, p1, p0};
    MemraSliceMutU64 table = tu_upload_u64(e, host_table, 6);

    MemraSliceMutF32 qkv = tu_upload(e, h->qkv + s * t * cd, t * cd);
    MemraSliceMutF32 beta_raw = tu_upload(e, h->beta_raw + s * t * nv, t * nv);
    MemraSliceMutF32 alpha = tu_upload(e, h->alpha + s * t * nv, t * nv);
    MemraSliceMutF32 conv_out = tu_poisoned(e, cd);
    MemraSliceMutF32 q = tu_poisoned(e, vd);
    MemraSliceMutF32 k = tu_poisoned(e, vd);
    MemraSliceMutF32 v = tu_poisoned(e, vd);
    MemraSliceMutF32 beta = tu_poisoned(e, nv);
    MemraSliceMutF32 g_log = tu_poisoned(e, nv);

    for (size_t r = 0; r < t; r++) {
        const size_t base = (r % 2 == 0) ? 0 : 3;
        if (r > 0) {
            /* Every row must write its outputs afresh, not inherit the previous row's. */
            tu_poison(e, conv_out);
            tu_poison(e, q);
            tu_poison(e, k);
            tu_poison(e, v);
            tu_poison(e, beta);
            tu_poison(e, g_log);
        }
        MemraSliceMutF32 o_row = tu_poisoned(e, vd);

        TU_OK(memra_ssm_conv1d_fused_decode_b_view(e, tu_sub(qkv, r * cd, cd),
                                                   tu_sub_u64(table, base, 1), tu_view(sh->w),
                                                   conv_out, cd, GP_D_CONV, 1));
        TU_OK(memra_gdn_prep_decode_b_view(e, tu_view(conv_out), tu_sub(beta_raw, r * nv, nv),
                                           tu_sub(alpha, r * nv, nv), tu_view(sh->dt_bias),
                                           tu_view(sh->a), q, k, v, beta, g_log, MEMRA_D_STATE, nv,
                                           d->num_k, d->key_dim, GP_EPS, cd, 1));
        TU_OK(memra_gdn_scan_s128_batched_view(
            e, tu_view(q), tu_view(k), tu_view(v), tu_view(g_log), tu_view(beta),
            tu_sub_u64(table, base + 1, 1), tu_sub_u64(table, base + 2, 1), o_row, nv, 1,
            d->scale));

        tu_download_into(e, tu_view(conv_out), ref->t[GP_CONV_OUT] + (s * t + r) * cd);
        tu_download_into(e, tu_view(o_row), ref->t[GP_SCAN_O] + (s * t + r) * vd);
        if (r + 1 < t) {
            tu_download_into(e, tu_view(ring), ref->t[GP_SNAP_CONV] + (s * (t - 1) + r) * rw);
            /* Row r wrote the alternate buffer when r is even, the canonical one when odd. */
            tu_download_into(e, tu_view(r % 2 == 0 ? s1 : s0),
                             ref->t[GP_SNAP_SSM] + (s * (t - 1) + r) * sw);
        }
        tu_free(e, o_row.ptr);
    }
    tu_download_into(e, tu_view(t % 2 == 1 ? s1 : s0), ref->t[GP_FINAL_SSM] + s * sw);
    tu_download_into(e, tu_view(ring), ref->t[GP_FINAL_CONV] + s * rw);

    void *bufs[] = {ring.ptr,     s0.ptr, s1.ptr, table.ptr, qkv.ptr,  beta_raw.ptr, alpha.ptr,
                    conv_out.ptr, q.ptr,  k.ptr,  v.ptr,     beta.ptr, g_log.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
}

/* The packed program: one launch per op over all B sequences and T rows. */
static MemraStatus gp_step(MemraEngine *e, void *user)
{
    gp_packed *p = user;
    const gp_dims *d = &p->d;
    p->calls++;
    MemraStatus st =
        memra_ssm_conv1d_fused_decode_tloop(e, p->qkv, tu_view_u64(p->table), p->w, p->conv_outs,
                                            p->snap_conv, d->conv_dim, GP_D_CONV, d->t, d->b);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_prep_decode_b(e, tu_view(p->conv_outs), p->beta_raw, p->alpha, p->dt_bias, p->a,
                                 p->q, p->k, p->v, p->beta, p->g_log, MEMRA_D_STATE, d->num_v,
                                 d->num_k, d->key_dim, GP_EPS, d->conv_dim, d->b * d->t);
    if (st != MEMRA_STATUS_OK)
        return st;
    return memra_gdn_scan_s128_tsnap(e, tu_view(p->q), tu_view(p->k), tu_view(p->v),
                                     tu_view(p->g_log), tu_view(p->beta), tu_view_u64(p->table),
                                     p->o_all, d->num_v, d->t, d->b, d->scale, p->snap_ssm);
}

static void gp_poison_outputs(MemraEngine *e, const gp_packed *p)
{
    const MemraSliceMutF32 outs[] = {p->conv_outs, p->q,     p->k,         p->v,       p->beta,
                                     p->g_log,     p->o_all, p->snap_conv, p->snap_ssm};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (outs[i].len)
            tu_poison(e, outs[i]);
}

static void gp_bind(MemraEngine *e, const gp_packed *p, const gp_seqs *q)
{
    uint64_t host[3 * GP_B_MAX];
    for (size_t s = 0; s < p->d.b; s++) {
        host[3 * s + 0] = tu_addr(q->ring[s]);
        host[3 * s + 1] = tu_addr(q->canonical[s]);
        host[3 * s + 2] = tu_addr(q->alternate[s]);
    }
    MemraSliceU64 src = {host, 3 * p->d.b};
    TU_OK(memra_htod_u64_into(e, src, p->table));
}

/* Reads the six tensors of a packed run; the final state is where the per-row parity puts it:
 * the alternate buffer when T is odd, the canonical one when T is even. */
static void gp_collect(MemraEngine *e, const gp_packed *p, const gp_seqs *q, gp_result *got)
{
    const gp_dims *d = &p->d;
    tu_download_into(e, tu_view(p->conv_outs), got->t[GP_CONV_OUT]);
    tu_download_into(e, tu_view(p->o_all), got->t[GP_SCAN_O]);
    for (size_t s = 0; s < d->b; s++) {
        tu_download_into(e, tu_view(d->t % 2 == 1 ? q->alternate[s] : q->canonical[s]),
                         got->t[GP_FINAL_SSM] + s * d->state_words);
        tu_download_into(e, tu_view(q->ring[s]), got->t[GP_FINAL_CONV] + s * d->ring_words);
    }
    if (p->snap_conv.len)
        tu_download_into(e, tu_view(p->snap_conv), got->t[GP_SNAP_CONV]);
    if (p->snap_ssm.len)
        tu_download_into(e, tu_view(p->snap_ssm), got->t[GP_SNAP_SSM]);
}

static void gp_seqs_free(MemraEngine *e, const gp_seqs *q, size_t b)
{
    for (size_t s = 0; s < b; s++) {
        tu_free(e, q->ring[s].ptr);
        tu_free(e, q->canonical[s].ptr);
        tu_free(e, q->alternate[s].ptr);
    }
}

/*
 * Runs the packed program of a case and compares every run with `ref`; `got` keeps the last
 * run (the second replay in graph mode). In graph mode the capture-time buffers must come out
 * of both replays untouched: a graph that froze the table's entries at capture would roll
 * those instead of the rebound ones.
 */
static void gp_packed_run(MemraEngine *e, const gp_case *c, const gp_dims *d, const gp_host *h,
                          const gp_shared *sh, bool snapshots, const gp_result *ref, gp_result *got)
{
    const size_t b = d->b, t = d->t, cd = d->conv_dim, vd = d->value_dim, nv = d->num_v;
    const size_t rw = d->ring_words, sw = d->state_words;
    const unsigned mask = snapshots ? GP_ALL_TENSORS : GP_NO_SNAPSHOTS;
    const MemraSliceMutF32 none = {NULL, 0};

    MemraSliceMutF32 qkv = tu_upload(e, h->qkv, b * t * cd);
    MemraSliceMutF32 beta_raw = tu_upload(e, h->beta_raw, b * t * nv);
    MemraSliceMutF32 alpha = tu_upload(e, h->alpha, b * t * nv);
    gp_packed p = {
        .d = *d,
        .qkv = tu_view(qkv),
        .beta_raw = tu_view(beta_raw),
        .alpha = tu_view(alpha),
        .w = tu_view(sh->w),
        .dt_bias = tu_view(sh->dt_bias),
        .a = tu_view(sh->a),
        .conv_outs = tu_poisoned(e, b * t * cd),
        .q = tu_poisoned(e, b * t * vd),
        .k = tu_poisoned(e, b * t * vd),
        .v = tu_poisoned(e, b * t * vd),
        .beta = tu_poisoned(e, b * t * nv),
        .g_log = tu_poisoned(e, b * t * nv),
        .o_all = tu_poisoned(e, b * t * vd),
        .snap_conv = snapshots ? tu_poisoned(e, b * (t - 1) * rw) : none,
        .snap_ssm = snapshots ? tu_poisoned(e, b * (t - 1) * sw) : none,
        .calls = 0,
    };

    /* The buffers the program is first bound to (and, in graph mode, captured with). */
    gp_seqs first;
    for (size_t s = 0; s < b; s++) {
        first.ring[s] = tu_upload(e, h->conv0 + s * rw, rw);
        first.canonical[s] = tu_upload(e, h->ssm0 + s * sw, sw);
        first.alternate[s] = tu_zeros(e, sw);
    }
    {
        uint64_t host[3 * GP_B_MAX];
        for (size_t s = 0; s < b; s++) {
            host[3 * s + 0] = tu_addr(first.ring[s]);
            host[3 * s + 1] = tu_addr(first.canonical[s]);
            host[3 * s + 2] = tu_addr(first.alternate[s]);
        }
        p.table = tu_upload_u64(e, host, 3 * b);
    }

    if (c->mode == GP_EAGER) {
        TU_OK(gp_step(e, &p));
        gp_collect(e, &p, &first, got);
        gp_expect_identical(c, snapshots ? "eager" : "eager without snapshots", ref, got, mask);
    } else {
        MemraGraph *graph = NULL;
        TU_OK(memra_graph_capture(e, gp_step, &p, &graph));
        cr_assert_not_null(graph);
        cr_assert_eq(p.calls, 3, "the step ran %u times during the capture, not 3", p.calls);

        /* What the two warm-up runs left in the capture-time buffers. */
        float *kept = gp_array(b * (2 * sw + rw));
        for (size_t s = 0; s < b; s++) {
            float *at = kept + s * (2 * sw + rw);
            tu_download_into(e, tu_view(first.ring[s]), at);
            tu_download_into(e, tu_view(first.canonical[s]), at + rw);
            tu_download_into(e, tu_view(first.alternate[s]), at + rw + sw);
        }

        for (int replay = 0; replay < 2; replay++) {
            /* Fresh buffers for every sequence, as the seed makes them: ring from conv0, two
             * zeroed states, ssm0 copied into the one that becomes canonical. On the second
             * replay canonical and alternate trade places (for sequence 0, as in the seed; the
             * other sequences alternate so one launch mixes both orders). */
            gp_seqs now;
            for (size_t s = 0; s < b; s++) {
                now.ring[s] = tu_upload(e, h->conv0 + s * rw, rw);
                MemraSliceMutF32 one = tu_zeros(e, sw);
                MemraSliceMutF32 two = tu_zeros(e, sw);
                const bool swapped = (replay + s) % 2 == 1;
                MemraSliceF32 ssm0 = {h->ssm0 + s * sw, sw};
                TU_OK(memra_htod_f32_into(e, ssm0, swapped ? two : one));
                now.canonical[s] = swapped ? two : one;
                now.alternate[s] = swapped ? one : two;
            }
            gp_bind(e, &p, &now);
            gp_poison_outputs(e, &p);
            TU_OK(memra_graph_launch(e, graph));
            gp_collect(e, &p, &now, got);
            char what[96];
            snprintf(what, sizeof what, "graph replay %d after rebinding%s", replay + 1,
                     snapshots ? "" : ", without snapshots");
            gp_expect_identical(c, what, ref, got, mask);
            gp_seqs_free(e, &now, b);
        }
        cr_assert_eq(p.calls, 3, "replaying the graph called the step again");

        for (size_t s = 0; s < b; s++) {
            float *at = kept + s * (2 * sw + rw);
            float *now = gp_array(sw);
            tu_download_into(e, tu_view(first.ring[s]), now);
            cr_assert_eq(tu_bit_diffs(now, at, rw), 0,
                         "%s T=%zu: a replay wrote the capture-time conv ring of sequence %zu "
                         "after the table was rebound",
                         c->name, t, s);
            tu_download_into(e, tu_view(first.canonical[s]), now);
            cr_assert_eq(tu_bit_diffs(now, at + rw, sw), 0,
                         "%s T=%zu: a replay wrote the capture-time canonical state of "
                         "sequence %zu after the table was rebound",
                         c->name, t, s);
            tu_download_into(e, tu_view(first.alternate[s]), now);
            cr_assert_eq(tu_bit_diffs(now, at + rw + sw, sw), 0,
                         "%s T=%zu: a replay wrote the capture-time alternate state of "
                         "sequence %zu after the table was rebound",
                         c->name, t, s);
            free(now);
        }
        free(kept);
        TU_OK(memra_graph_destroy(e, graph));
    }

    gp_seqs_free(e, &first, b);
    void *bufs[] = {qkv.ptr,     beta_raw.ptr,    alpha.ptr,     p.table.ptr, p.conv_outs.ptr,
                    p.q.ptr,     p.k.ptr,         p.v.ptr,       p.beta.ptr,  p.g_log.ptr,
                    p.o_all.ptr, p.snap_conv.ptr, p.snap_ssm.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
}

/* The per-row reference and the packed program of a case on one engine. */
static void gp_run(MemraEngine *e, const gp_case *c, const gp_dims *d, const gp_host *h,
                   gp_result *ref, gp_result *got)
{
    gp_shared sh;
    gp_shared_make(e, d, h, &sh);
    for (size_t s = 0; s < d->b; s++)
        gp_per_row(e, d, h, &sh, s, ref);
    gp_packed_run(e, c, d, h, &sh, true, ref, got);
}

static void gp_check(gp_case c, MemraBackend backend)
{
    if (c.inputs == GP_FRESH_INPUTS)
        c.seed = tu_fresh_seed();
    const gp_dims d = gp_make_dims(c.num_k, c.num_v, c.t, c.b);
    MemraEngine *e = tu_engine(backend);
    gp_host h;
    gp_host_make(&c, &d, &h);

    gp_result ref, got;
    gp_result_make(&d, &ref);
    gp_result_make(&d, &got);
    gp_run(e, &c, &d, &h, &ref, &got);
    TU_OK(memra_engine_destroy(e));

    if (backend == MEMRA_BACKEND_CUDA) {
        MemraEngine *cpu = tu_engine(MEMRA_BACKEND_CPU);
        gp_result cref, cgot;
        gp_result_make(&d, &cref);
        gp_result_make(&d, &cgot);
        gp_run(cpu, &c, &d, &h, &cref, &cgot);
        TU_OK(memra_engine_destroy(cpu));
        gp_expect_close(&c, "per-row reference", &cref, &ref, GP_ALL_TENSORS);
        gp_expect_close(&c, c.mode == GP_GRAPH ? "packed, graph-replayed" : "packed, eager", &cgot,
                        &got, GP_ALL_TENSORS);
        gp_result_free(&cref);
        gp_result_free(&cgot);
    }
    gp_result_free(&ref);
    gp_result_free(&got);
    gp_host_free(&h);
}

/*
 * The packed ops with {NULL, 0} for the snapshots must produce the same outputs, final states
 * and rings as with snapshots (and so as the per-row reference), eagerly and graph-replayed.
 */
static void gp_run_nosnap(MemraEngine *e, const gp_case *c, const gp_dims *d, const gp_host *h,
                          gp_result *ref, gp_result *with, gp_result *without)
{
    gp_shared sh;
    gp_shared_make(e, d, h, &sh);
    for (size_t s = 0; s < d->b; s++)
        gp_per_row(e, d, h, &sh, s, ref);
    gp_packed_run(e, c, d, h, &sh, true, ref, with);
    gp_packed_run(e, c, d, h, &sh, false, ref, without);
    gp_expect_identical(c, "without snapshots against with", with, without, GP_NO_SNAPSHOTS);
}

/* The no-snapshot run's three results (the per-row reference, packed with snapshots, packed
 * without) on a fresh engine of `backend`. */
static void gp_nosnap_on(MemraBackend backend, const gp_case *c, const gp_dims *d, const gp_host *h,
                         gp_result r[3])
{
    MemraEngine *e = tu_engine(backend);
    for (int i = 0; i < 3; i++)
        gp_result_make(d, &r[i]);
    gp_run_nosnap(e, c, d, h, &r[0], &r[1], &r[2]);
    TU_OK(memra_engine_destroy(e));
}

static void gp_check_nosnap(gp_case c, MemraBackend backend)
{
    static const char *const what[3] = {"per-row reference", "packed with snapshots",
                                        "packed without snapshots"};
    c.seed = tu_fresh_seed();
    const gp_dims d = gp_make_dims(c.num_k, c.num_v, c.t, c.b);
    gp_host h;
    gp_host_make(&c, &d, &h);

    gp_result r[3];
    gp_nosnap_on(backend, &c, &d, &h, r);
    if (backend == MEMRA_BACKEND_CUDA) {
        gp_result cr[3];
        gp_nosnap_on(MEMRA_BACKEND_CPU, &c, &d, &h, cr);
        for (int i = 0; i < 3; i++) {
            gp_expect_close(&c, what[i], &cr[i], &r[i], i == 2 ? GP_NO_SNAPSHOTS : GP_ALL_TENSORS);
            gp_result_free(&cr[i]);
        }
    }
    for (int i = 0; i < 3; i++)
        gp_result_free(&r[i]);
    gp_host_free(&h);
}

/* Parameters: T (and B for the sweeps that vary it). */
typedef struct gp_param {
    size_t t;
    size_t b;
} gp_param;

/* The seed's T sweep, one sequence. */
static gp_param gp_seed_sweep[] = {{2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}};
/* The batched form: B = 3 at several T, odd and even. */
static gp_param gp_batched_sweep[] = {{2, 3}, {3, 3}, {5, 3}, {8, 3}};
/* Without snapshots: one and three sequences, both parities. */
static gp_param gp_nosnap_sweep[] = {{2, 1}, {3, 1}, {4, 3}, {5, 3}};

/* One ParameterizedTest per (shape, mode, inputs, backend) over the (t, b) pairs of `sweep`:
 * the name says the case, `check` runs it. */
#define GP_TEST(tname, sweep, nk, nv, gmode, ginputs, check, backend)                              \
    TU_PARAM_TEST(gp_param, TU_PARAMS(gp_param, sweep), gdn_packed, tname, p)                      \
    {                                                                                              \
        gp_case c = {#tname, nk, nv, p->t, p->b, gmode, ginputs, 0};                               \
        check(c, backend);                                                                         \
    }
#define GP_SEED_TEST(tname, nk, nv, gmode, ginputs, backend)                                       \
    GP_TEST(tname, gp_seed_sweep, nk, nv, gmode, ginputs, gp_check, backend)
#define GP_BATCHED_TEST(tname, nk, nv, gmode, backend)                                             \
    GP_TEST(tname, gp_batched_sweep, nk, nv, gmode, GP_FRESH_INPUTS, gp_check, backend)
#define GP_NOSNAP_TEST(tname, nk, nv, gmode, backend)                                              \
    GP_TEST(tname, gp_nosnap_sweep, nk, nv, gmode, GP_FRESH_INPUTS, gp_check_nosnap, backend)

#define CPU MEMRA_BACKEND_CPU
#define CUDA MEMRA_BACKEND_CUDA

/* The seed's three tests: small and ornith eager, both graph-replayed with rebinding. */
GP_SEED_TEST(small_eager_cpu, 2, 4, GP_EAGER, GP_SEED_INPUTS, CPU)
GP_SEED_TEST(ornith_eager_cpu, 16, 32, GP_EAGER, GP_SEED_INPUTS, CPU)
GP_SEED_TEST(small_graph_rebind_cpu, 2, 4, GP_GRAPH, GP_SEED_INPUTS, CPU)
GP_SEED_TEST(ornith_graph_rebind_cpu, 16, 32, GP_GRAPH, GP_SEED_INPUTS, CPU)
GP_SEED_TEST(small_eager_cuda, 2, 4, GP_EAGER, GP_SEED_INPUTS, CUDA)
GP_SEED_TEST(ornith_eager_cuda, 16, 32, GP_EAGER, GP_SEED_INPUTS, CUDA)
GP_SEED_TEST(small_graph_rebind_cuda, 2, 4, GP_GRAPH, GP_SEED_INPUTS, CUDA)
GP_SEED_TEST(ornith_graph_rebind_cuda, 16, 32, GP_GRAPH, GP_SEED_INPUTS, CUDA)

/* The same on inputs nobody chose. */
GP_SEED_TEST(small_eager_fresh_cpu, 2, 4, GP_EAGER, GP_FRESH_INPUTS, CPU)
GP_SEED_TEST(ornith_eager_fresh_cpu, 16, 32, GP_EAGER, GP_FRESH_INPUTS, CPU)
GP_SEED_TEST(small_graph_rebind_fresh_cpu, 2, 4, GP_GRAPH, GP_FRESH_INPUTS, CPU)
GP_SEED_TEST(ornith_graph_rebind_fresh_cpu, 16, 32, GP_GRAPH, GP_FRESH_INPUTS, CPU)
GP_SEED_TEST(small_eager_fresh_cuda, 2, 4, GP_EAGER, GP_FRESH_INPUTS, CUDA)
GP_SEED_TEST(ornith_eager_fresh_cuda, 16, 32, GP_EAGER, GP_FRESH_INPUTS, CUDA)
GP_SEED_TEST(small_graph_rebind_fresh_cuda, 2, 4, GP_GRAPH, GP_FRESH_INPUTS, CUDA)
GP_SEED_TEST(ornith_graph_rebind_fresh_cuda, 16, 32, GP_GRAPH, GP_FRESH_INPUTS, CUDA)

/* B = 3 sequences in one launch per op against 3 x T per-row launches. */
GP_BATCHED_TEST(small_batched_eager_cpu, 2, 4, GP_EAGER, CPU)
GP_BATCHED_TEST(ornith_batched_eager_cpu, 16, 32, GP_EAGER, CPU)
GP_BATCHED_TEST(small_batched_graph_rebind_cpu, 2, 4, GP_GRAPH, CPU)
GP_BATCHED_TEST(ornith_batched_graph_rebind_cpu, 16, 32, GP_GRAPH, CPU)
GP_BATCHED_TEST(small_batched_eager_cuda, 2, 4, GP_EAGER, CUDA)
GP_BATCHED_TEST(ornith_batched_eager_cuda, 16, 32, GP_EAGER, CUDA)
GP_BATCHED_TEST(small_batched_graph_rebind_cuda, 2, 4, GP_GRAPH, CUDA)
GP_BATCHED_TEST(ornith_batched_graph_rebind_cuda, 16, 32, GP_GRAPH, CUDA)

/* {NULL, 0} snapshots change nothing else. */
GP_NOSNAP_TEST(small_nosnap_eager_cpu, 2, 4, GP_EAGER, CPU)
GP_NOSNAP_TEST(ornith_nosnap_eager_cpu, 16, 32, GP_EAGER, CPU)
GP_NOSNAP_TEST(small_nosnap_graph_rebind_cpu, 2, 4, GP_GRAPH, CPU)
GP_NOSNAP_TEST(ornith_nosnap_graph_rebind_cpu, 16, 32, GP_GRAPH, CPU)
GP_NOSNAP_TEST(small_nosnap_eager_cuda, 2, 4, GP_EAGER, CUDA)
GP_NOSNAP_TEST(ornith_nosnap_eager_cuda, 16, 32, GP_EAGER, CUDA)
GP_NOSNAP_TEST(small_nosnap_graph_rebind_cuda, 2, 4, GP_GRAPH, CUDA)
GP_NOSNAP_TEST(ornith_nosnap_graph_rebind_cuda, 16, 32, GP_GRAPH, CUDA)
