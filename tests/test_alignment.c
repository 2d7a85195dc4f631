/*
 * The scan on views and states that are 4-byte but not 16-byte aligned.
 *
 * The CUDA scan reads and writes 16 bytes at a time where it can and falls back to 4-byte
 * accesses for q, k and snapshot views, or for states found in the table, that are only 4-byte
 * aligned (all the validation asks for). Both paths must give the same bits. Each case runs
 * the packed scan and the per-row scan (in place) twice on the same fresh random inputs: once
 * in buffers as the allocator returns them, once with every view and every state moved one
 * float further (so every vector access would be misaligned), and compares the outputs, final
 * states and snapshots with memcmp. The per-row chain must also match the packed call bit for
 * bit in both placements.
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

#define AL_S MEMRA_D_STATE

typedef struct al_param {
    MemraBackend backend;
    size_t num_v, t, b;
} al_param;

typedef struct al_host {
    size_t value_dim, state_words, rows;
    float *q, *k, *v, *g, *beta, *state;
} al_host;

/* What one placement produced: packed o, final state and snapshots, per-row o and state. */
typedef struct al_out {
    float *o, *state, *snap, *row_o, *row_state;
} al_out;

static void al_make(al_host *h, const al_param *p, uint64_t seed)
{
    h->value_dim = AL_S * p->num_v;
    h->state_words = AL_S * AL_S * p->num_v;
    h->rows = p->b * p->t;
    const size_t act = h->rows * h->value_dim, heads = h->rows * p->num_v;
    h->q = malloc(act * sizeof(float));
    h->k = malloc(act * sizeof(float));
    h->v = malloc(act * sizeof(float));
    h->g = malloc(heads * sizeof(float));
    h->beta = malloc(heads * sizeof(float));
    h->state = malloc(p->b * h->state_words * sizeof(float));
    cr_assert(h->q && h->k && h->v && h->g && h->beta && h->state);
    tu_varied(h->q, act, tu_mix_seed(seed, 1), 0.2f);
    tu_varied(h->k, act, tu_mix_seed(seed, 2), 0.2f);
    tu_varied(h->v, act, tu_mix_seed(seed, 3), 1.0f);
    tu_varied(h->g, heads, tu_mix_seed(seed, 4), 0.5f);
    tu_varied(h->beta, heads, tu_mix_seed(seed, 5), 0.4f);
    tu_varied(h->state, p->b * h->state_words, tu_mix_seed(seed, 6), 0.5f);
    /* A decaying state (g_log < 0) and a gate in (0, 1), as a model produces them. */
    for (size_t i = 0; i < heads; i++) {
        h->g[i] = -fabsf(h->g[i]) - 0.01f;
        h->beta[i] = 0.5f + h->beta[i];
    }
}

static void al_free_host(al_host *h)
{
    TU_FREE_HOST(h->q, h->k, h->v, h->g, h->beta, h->state);
}

/* A buffer of len + 1 elements and the view of len elements that starts `off` floats in. */
static MemraSliceMutF32 al_place(MemraEngine *e, const float *host, size_t len, size_t off,
                                 MemraSliceMutF32 *whole)
{
    *whole = tu_poisoned(e, len + 1);
    MemraSliceMutF32 view = tu_sub_mut(*whole, off, len);
    if (host != NULL)
        TU_OK(memra_htod_f32_into(e, (MemraSliceF32){host, len}, view));
    return view;
}

static void al_run(MemraEngine *e, const al_param *p, const al_host *h, size_t off, al_out *out)
{
    const size_t vd = h->value_dim, sw = h->state_words, nv = p->num_v;
    const size_t act = h->rows * vd, heads = h->rows * nv;
    const float scale = 1.0f / sqrtf((float)AL_S);
    MemraSliceMutF32 bq, bk, bv, bg, bb, bo, bsnap, bcanon, balt, brow_o, brow_state;
    MemraSliceMutF32 q = al_place(e, h->q, act, off, &bq);
    MemraSliceMutF32 k = al_place(e, h->k, act, off, &bk);
    MemraSliceMutF32 v = al_place(e, h->v, act, off, &bv);
    MemraSliceMutF32 g = al_place(e, h->g, heads, off, &bg);
    MemraSliceMutF32 beta = al_place(e, h->beta, heads, off, &bb);
    MemraSliceMutF32 o = al_place(e, NULL, act, off, &bo);
    /* A single row takes no snapshots: the view is then absent, as the ABI asks. */
    MemraSliceMutF32 snap = al_place(e, NULL, p->b * (p->t - 1) * sw, off, &bsnap);
    if (p->t == 1)
        snap = (MemraSliceMutF32){NULL, 0};
    MemraSliceMutF32 canon = al_place(e, h->state, p->b * sw, off, &bcanon);
    MemraSliceMutF32 alt = al_place(e, NULL, p->b * sw, off, &balt);

    /* Packed: table [b, 3] = {ring (unused by the scan), canonical, alternate}. */
    uint64_t *tab = malloc(3 * p->b * sizeof(uint64_t));
    cr_assert(tab != NULL);
    for (size_t b = 0; b < p->b; b++) {
        tab[3 * b] = tu_addr(canon) + b * sw * sizeof(float);
        tab[3 * b + 1] = tu_addr(canon) + b * sw * sizeof(float);
        tab[3 * b + 2] = tu_addr(alt) + b * sw * sizeof(float);
    }
    MemraSliceMutU64 table = tu_upload_u64(e, tab, 3 * p->b);
    TU_OK(memra_gdn_scan_s128_tsnap(e, tu_view(q), tu_view(k), tu_view(v), tu_view(g),
                                    tu_view(beta), tu_view_u64(table), o, nv, p->t, p->b, scale,
                                    snap));
    out->o = tu_download(e, o);
    out->state = tu_download(e, p->t % 2 ? alt : canon);
    out->snap = p->t > 1 ? tu_download(e, snap) : NULL;

    /* Per-row, in place: sequence b's rows one launch each, its state updated where it lies. */
    MemraSliceMutF32 row_o = al_place(e, NULL, act, off, &brow_o);
    MemraSliceMutF32 row_state = al_place(e, h->state, p->b * sw, off, &brow_state);
    for (size_t b = 0; b < p->b; b++) {
        uint64_t addr = tu_addr(row_state) + b * sw * sizeof(float);
        MemraSliceMutU64 ptr = tu_upload_u64(e, &addr, 1);
        for (size_t r = 0; r < p->t; r++) {
            const size_t row = b * p->t + r;
            TU_OK(memra_gdn_scan_s128_batched_view(
                e, tu_sub(q, row * vd, vd), tu_sub(k, row * vd, vd), tu_sub(v, row * vd, vd),
                tu_sub(g, row * nv, nv), tu_sub(beta, row * nv, nv), tu_view_u64(ptr),
                tu_view_u64(ptr), tu_sub_mut(row_o, row * vd, vd), nv, 1, scale));
        }
        tu_free(e, ptr.ptr);
    }
    out->row_o = tu_download(e, row_o);
    out->row_state = tu_download(e, row_state);

    tu_free(e, table.ptr);
    free(tab);
    MemraSliceMutF32 all[] = {bq, bk, bv, bg, bb, bo, bsnap, bcanon, balt, brow_o, brow_state};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tu_free(e, all[i].ptr);
}

static void al_free_out(al_out *o)
{
    TU_FREE_HOST(o->o, o->state, o->snap, o->row_o, o->row_state);
}

static void al_expect_same(const char *what, const float *a, const float *b, size_t n,
                           uint64_t seed, const char *ctx)
{
    size_t d = tu_bit_diffs(a, b, n);
    cr_expect_eq(d, 0, "%s: %s differs in %zu of %zu words (" TU_SEED_FMT ")", ctx, what, d, n,
                 seed);
    cr_expect(tu_all_finite(b, n), "%s: %s has non-finite (unwritten) words (" TU_SEED_FMT ")", ctx,
              what, seed);
}

static void al_case(const al_param *p)
{
    MemraEngine *e = tu_engine(p->backend);
    const uint64_t seed = tu_fresh_seed();
    al_host h;
    al_make(&h, p, seed);
    al_out aligned, shifted;
    al_run(e, p, &h, 0, &aligned);
    al_run(e, p, &h, 1, &shifted);

    const size_t act = h.rows * h.value_dim, states = p->b * h.state_words;
    const size_t snaps = p->b * (p->t - 1) * h.state_words;
    al_expect_same("packed o", aligned.o, shifted.o, act, seed, "shifted vs aligned");
    al_expect_same("packed final state", aligned.state, shifted.state, states, seed,
                   "shifted vs aligned");
    if (snaps > 0)
        al_expect_same("snapshots", aligned.snap, shifted.snap, snaps, seed, "shifted vs aligned");
    al_expect_same("per-row o", aligned.row_o, shifted.row_o, act, seed, "shifted vs aligned");
    al_expect_same("per-row state", aligned.row_state, shifted.row_state, states, seed,
                   "shifted vs aligned");
    al_expect_same("o", aligned.o, shifted.row_o, act, seed, "per-row vs packed, shifted");
    al_expect_same("final state", aligned.state, shifted.row_state, states, seed,
                   "per-row vs packed, shifted");

    al_free_out(&aligned);
    al_free_out(&shifted);
    al_free_host(&h);
    TU_OK(memra_engine_destroy(e));
}

/* Cases: (num_v, t, b). Both shapes, one and several rows and sequences. */
#define AL_CASES(backend)                                                                          \
    {backend, 4, 3, 2}, {backend, 4, 8, 1}, {backend, 32, 4, 2},                                   \
    {                                                                                              \
        backend, 32, 1, 3                                                                          \
    }

ParameterizedTestParameters(alignment, scan_offset_views_same_bits_cpu)
{
    static al_param params[] = {AL_CASES(MEMRA_BACKEND_CPU)};
    return cr_make_param_array(al_param, params, sizeof params / sizeof params[0]);
}

ParameterizedTest(al_param *p, alignment, scan_offset_views_same_bits_cpu)
{
    al_case(p);
}

ParameterizedTestParameters(alignment, scan_offset_views_same_bits_cuda)
{
    static al_param params[] = {AL_CASES(MEMRA_BACKEND_CUDA)};
    return cr_make_param_array(al_param, params, sizeof params / sizeof params[0]);
}

ParameterizedTest(al_param *p, alignment, scan_offset_views_same_bits_cuda)
{
    al_case(p);
}
