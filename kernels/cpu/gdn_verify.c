/*
 * CPU reference: the 1.1 one-launch verify, journal commit and rollback, built from the 1.0
 * reference kernels (ssm_conv1d.c, gdn_prep.c, gdn_scan.c). A verify in SNAPSHOTS or FINAL_ONLY
 * mode is exactly the 1.0 packed program (conv over t rows, prep over b_n * t rows, scan over
 * t rows with the table's parity), so it is bit-identical to it by construction; the
 * intermediate activations the host did not ask for go to scratch memory.
 *
 * JOURNAL mode, per sequence b with n = accepted[b] (docs/verify-1.1.md), on the journal layout
 * of kernels.h (the same as the CUDA backend's): the header is checked first
 * (memra__journal_check, shared with the CUDA kernels); a journal or count it refuses leaves the
 * sequence untouched and is recorded in args->err. The fold needs no reduction: the ring rolls
 * in the accepted rows' raw inputs, and each state element takes `gd * s + k * delta` per
 * accepted row with the gd, normalised k and rounded delta the verify that wrote the row
 * recorded, which are the operands of the per-row program's own update (so the folded state is
 * the per-row program's bit for bit). The t new rows then run from a copy of the folded ring and
 * state, so the ring and state written back are the folded ones, and their inputs, k, deltas and
 * gd go to the journal's other slot. A commit is the fold alone, leaving the journal empty.
 *
 * Scratch memory (args->workspace) is the backend's: it allocates
 * memra__cpu_verify_scratch_words() floats when the operation is run or recorded, so an
 * allocation failure is reported at enqueue, never inside a replay.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

static void record(memra__dev_error *err, uint32_t op, size_t seq, uint32_t value, uint32_t limit,
                   uint32_t what)
{
    if (err == NULL || err->set != 0)
        return;
    *err = (memra__dev_error){1, op, (uint32_t)seq, value, limit, what};
}

/* Activations of `rows` rows of one sequence: where conv, prep and scan put what they compute.
 * Each points either into the host's output views or into scratch. */
typedef struct rows_out {
    float *conv_out, *q, *k, *v, *beta, *g_log, *o, *delta;
} rows_out;

/* The words of scratch one sequence's `rows` rows need (conv_out, q, k, v, o, delta, beta,
 * g_log). */
static size_t rows_words(const memra__verify_args *a, size_t rows)
{
    const size_t act = a->num_v * MEMRA__S;
    return rows * (a->conv_dim + 5 * act + 2 * a->num_v);
}

/* Scratch layout: the activations of max(t, 1) rows, a ring, a state. */
size_t memra__cpu_verify_scratch_words(const memra__verify_args *a)
{
    const size_t state_words = a->num_v * (size_t)MEMRA__S * MEMRA__S;
    return rows_words(a, a->t > 0 ? a->t : 1) + a->conv_dim * (a->d_conv - 1) + state_words;
}

/* Carves the row buffers out of `scratch` for `rows` rows. */
static rows_out carve(const memra__verify_args *a, float *scratch, size_t rows)
{
    const size_t act = rows * a->num_v * MEMRA__S, heads = rows * a->num_v;
    rows_out r;
    r.conv_out = scratch;
    r.q = r.conv_out + rows * a->conv_dim;
    r.k = r.q + act;
    r.v = r.k + act;
    r.o = r.v + act;
    r.delta = r.o + act;
    r.beta = r.delta + act;
    r.g_log = r.beta + heads;
    return r;
}

/* Runs conv, prep and scan over `rows` rows of one sequence: qkv/beta_raw/alpha are the rows'
 * inputs, ring is rolled in place, the state is read from *state_in and written to *state_out,
 * the snapshots (may be NULL) are those of the rows, and out->delta (may be NULL) receives each
 * column's delta. */
static void run_rows(const memra__verify_args *a, const float *qkv, const float *beta_raw,
                     const float *alpha, size_t rows, uint64_t ring, uint64_t state_in,
                     uint64_t state_out, const rows_out *out, float *snap_conv, float *snap_ssm)
{
    const float *x = qkv, *br = beta_raw, *al = alpha;
    const memra__conv_args conv = {
        .qkv = x,
        .rings = &ring,
        .ring_stride = 1,
        .w = a->w,
        .conv_out = out->conv_out,
        .snap = snap_conv,
        .conv_dim = a->conv_dim,
        .d_conv = a->d_conv,
        .t = rows,
        .b_n = 1,
    };
    const memra__prep_args prep = {
        .conv_out = out->conv_out,
        .beta_raw = br,
        .alpha = al,
        .dt_bias = a->dt_bias,
        .a = a->a,
        .q_l2 = out->q,
        .k_l2 = out->k,
        .v_g = out->v,
        .beta = out->beta,
        .g_log = out->g_log,
        .num_v = a->num_v,
        .num_k = a->num_k,
        .key_dim = a->key_dim,
        .conv_dim = a->conv_dim,
        .rows = rows,
        .eps = a->eps,
        .grouped = a->grouped,
    };
    const memra__scan_args scan = {
        .q = out->q,
        .k = out->k,
        .v = out->v,
        .g_log = out->g_log,
        .beta = out->beta,
        .in_table = &state_in,
        .in_stride = 1,
        .out_table = &state_out,
        .out_stride = 1,
        .o = out->o,
        .snap = snap_ssm,
        .delta = out->delta,
        .num_v = a->num_v,
        .t = rows,
        .b_n = 1,
        .scale = a->scale,
        .qk_heads = a->num_v,
    };
    memra__cpu_ssm_conv1d(&conv);
    memra__cpu_gdn_prep(&prep);
    memra__cpu_gdn_scan(&scan);
}

/* Where the new rows' activations go: the host's view when it asked for one, scratch
 * otherwise. */
static float *pick(float *host, size_t offset, float *scratch)
{
    return host != NULL ? host + offset : scratch;
}

/* Where element i of a 128-vector sits in a journal's k: the CUDA scan's transposed order. */
static size_t perm_index(size_t i)
{
    return MEMRA__LANES * (i % 4) + i / 4;
}

/* The fold of a journal's n accepted rows (slot `half`) into the ring and the state in place. */
static void fold(const memra__verify_args *a, const float *jr, uint32_t n, uint32_t half,
                 float *ring, float *state)
{
    const size_t pad = a->d_conv - 1, num_v = a->num_v, ratio = num_v / a->num_k;
    const size_t jrow = MEMRA__JOURNAL_ROW(a->conv_dim, num_v, a->num_k);
    const size_t jk = MEMRA__JOURNAL_K(a->conv_dim),
                 jd = MEMRA__JOURNAL_DELTA(a->conv_dim, a->num_k),
                 jg = MEMRA__JOURNAL_GD(a->conv_dim, num_v, a->num_k);
    for (uint32_t r = n > pad ? n - (uint32_t)pad : 0; r < n && pad > 0; r++) {
        const float *x = jr + MEMRA__JOURNAL_HEADER + (2 * (size_t)r + half) * jrow;
        for (size_t c = 0; c < a->conv_dim; c++) {
            memmove(ring + c * pad, ring + c * pad + 1, (pad - 1) * sizeof(float));
            ring[c * pad + pad - 1] = x[c];
        }
    }
    for (uint32_t r = 0; r < n; r++) {
        const float *row = jr + MEMRA__JOURNAL_HEADER + (2 * (size_t)r + half) * jrow;
        for (size_t h = 0; h < num_v; h++) {
            const size_t kh = a->grouped ? h / ratio : h % a->num_k;
            const float *k = row + jk + kh * MEMRA__S;
            const float gd = row[jg + h];
            for (size_t c = 0; c < MEMRA__S; c++) {
                const float delta = row[jd + h * MEMRA__S + c];
                float *s = state + (h * MEMRA__S + c) * MEMRA__S;
                for (size_t i = 0; i < MEMRA__S; i++)
                    s[i] = gd * s[i] + k[perm_index(i)] * delta;
            }
        }
    }
}

void memra__cpu_gdn_verify(const memra__verify_args *a)
{
    float *scratch = a->workspace;
    const size_t t = a->t, num_v = a->num_v, pad = a->d_conv - 1;
    const size_t act = num_v * MEMRA__S, state_words = act * MEMRA__S;
    const size_t ratio = num_v / a->num_k;
    const size_t jrow = MEMRA__JOURNAL_ROW(a->conv_dim, num_v, a->num_k);
    const size_t jk = MEMRA__JOURNAL_K(a->conv_dim),
                 jd = MEMRA__JOURNAL_DELTA(a->conv_dim, a->num_k),
                 jg = MEMRA__JOURNAL_GD(a->conv_dim, num_v, a->num_k);
    const int journal = a->mode == MEMRA__MODE_JOURNAL;
    float *ring_copy = scratch + rows_words(a, t > 0 ? t : 1);
    float *state_copy = ring_copy + a->conv_dim * pad;

    for (size_t b = 0; b < a->b_n; b++) {
        const uint64_t *row = a->table + b * MEMRA__TABLE_WIDTH;
        const uint64_t ring = row[0], canonical = row[1];
        const size_t x0 = b * t;
        /* The new rows' outputs for this sequence. */
        const rows_out s = carve(a, scratch, t);
        const rows_out out = {
            .conv_out = pick(a->conv_out, x0 * a->conv_dim, s.conv_out),
            .q = pick(a->q_l2, x0 * act, s.q),
            .k = pick(a->k_l2, x0 * act, s.k),
            .v = pick(a->v_g, x0 * act, s.v),
            .beta = pick(a->beta, x0 * num_v, s.beta),
            .g_log = pick(a->g_log, x0 * num_v, s.g_log),
            .o = a->o != NULL ? a->o + x0 * act : s.o,
            .delta = journal ? s.delta : NULL,
        };
        /* A commit (t == 0) has no new rows, and its row inputs may be NULL. */
        const float *qkv = t > 0 ? a->qkv + x0 * a->conv_dim : NULL;
        const float *beta_raw = t > 0 ? a->beta_raw + x0 * num_v : NULL;
        const float *alpha = t > 0 ? a->alpha + x0 * num_v : NULL;

        if (!journal) {
            /* The 1.0 parity rule places the final state; sequence b's snapshots start at its
             * snapshot of row 0. */
            const uint64_t final = row[memra__final_slot(t)];
            const size_t first = memra__snap_index(b, t, 0);
            float *sc = a->snap_conv ? a->snap_conv + first * a->conv_dim * pad : NULL;
            float *ss = a->snap_ssm ? a->snap_ssm + first * state_words : NULL;
            run_rows(a, qkv, beta_raw, alpha, t, ring, canonical, final, &out, sc, ss);
            continue;
        }

        if (MEMRA__JOURNAL_ADDRESS_BAD(row[2])) {
            record(a->err, a->op, b, (uint32_t)row[2], 0, MEMRA__ERR_JOURNAL_ADDRESS);
            continue;
        }
        float *jr = (float *)(uintptr_t)row[2];
        uint32_t hd[MEMRA__JH_WORDS];
        memcpy(hd, jr, sizeof hd);
        const memra__journal_verdict v = memra__journal_check(hd, a->accepted[b], a->num_k, num_v,
                                                              a->d_conv, a->grouped, a->cap, t);
        if (v.what != 0) {
            record(a->err, a->op, b, v.value, v.limit, v.what);
            continue;
        }
        fold(a, jr, v.n, v.half, (float *)(uintptr_t)ring, (float *)(uintptr_t)canonical);
        if (t > 0) {
            /* The new rows run from copies, so that ring and state keep the folded values. */
            memcpy(ring_copy, (const float *)(uintptr_t)ring, a->conv_dim * pad * sizeof(float));
            run_rows(a, qkv, beta_raw, alpha, t, (uint64_t)(uintptr_t)ring_copy, canonical,
                     (uint64_t)(uintptr_t)state_copy, &out, NULL, NULL);
        }
        /* The new rows go to the other slot: raw inputs, normalised k per key head (read from
         * the first value head of each key head), deltas, gd. */
        const uint32_t next = 1u - v.half;
        for (size_t r = 0; r < t; r++) {
            float *dst = jr + MEMRA__JOURNAL_HEADER + (2 * r + next) * jrow;
            memcpy(dst, qkv + r * a->conv_dim, a->conv_dim * sizeof(float));
            for (size_t kh = 0; kh < a->num_k; kh++) {
                const size_t vh = a->grouped ? kh * ratio : kh;
                const float *k = out.k + (r * num_v + vh) * MEMRA__S;
                for (size_t i = 0; i < MEMRA__S; i++)
                    dst[jk + kh * MEMRA__S + perm_index(i)] = k[i];
            }
            memcpy(dst + jd, out.delta + r * act, act * sizeof(float));
            for (size_t h = 0; h < num_v; h++)
                dst[jg + h] = expf(out.g_log[r * num_v + h]);
        }
        /* The header leaves through memcpy, as it was read: the journal is f32 storage. */
        memra__journal_header_put(hd, a->num_k, num_v, a->d_conv, a->grouped, v.cap, (uint32_t)t,
                                  v.half);
        memcpy(jr, hd, sizeof hd);
    }
}

void memra__cpu_gdn_rollback(const memra__rollback_args *a)
{
    const size_t t = a->t, pad = a->d_conv - 1;
    const size_t ring_words = a->conv_dim * pad;
    const size_t state_words = a->num_v * (size_t)MEMRA__S * MEMRA__S;

    for (size_t b = 0; b < a->b_n; b++) {
        const uint64_t *row = a->table + b * MEMRA__TABLE_WIDTH;
        float *ring = (float *)(uintptr_t)row[0];
        float *canonical = (float *)(uintptr_t)row[1];
        const uint32_t n = a->accepted[b];
        if (n == 0 || n > t) {
            record(a->err, a->op, b, n, (uint32_t)t, MEMRA__ERR_ROLLBACK_RANGE);
            continue;
        }
        const memra__after from = memra__state_after(b, t, n);
        if (from.slot != 0) {
            /* The verify left the ring after row t - 1, and the final state in its parity slot,
             * which may already be the canonical one. */
            if (from.slot != 1)
                memcpy(canonical, (const float *)(uintptr_t)row[from.slot],
                       state_words * sizeof(float));
            continue;
        }
        if (ring_words > 0)
            memcpy(ring, a->snap_conv + from.snap * ring_words, ring_words * sizeof(float));
        memcpy(canonical, a->snap_ssm + from.snap * state_words, state_words * sizeof(float));
    }
}
