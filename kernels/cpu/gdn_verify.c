/*
 * CPU reference: the 1.1 one-launch verify, journal commit and rollback, built from the 1.0
 * reference kernels (ssm_conv1d.c, gdn_prep.c, gdn_scan.c). A verify in SNAPSHOTS or FINAL_ONLY
 * mode is exactly the 1.0 packed program (conv over t rows, prep over b_n * t rows, scan over
 * t rows with the table's parity), so it is bit-identical to it by construction; the
 * intermediate activations the host did not ask for go to scratch memory.
 *
 * JOURNAL mode, per sequence b with n = accepted[b] (docs/verify-1.1.md): the first n journal rows
 * are folded into the ring and the state by running the same three kernels over them (their
 * outputs are discarded); the t new rows then run from a copy of the folded ring and state, so
 * the ring and state written back are the folded ones; the journal is rewritten with the new
 * rows. A commit is the fold alone, leaving the journal empty. A count the journal cannot
 * satisfy leaves the sequence untouched and is recorded in args->err.
 *
 * The fold runs the accepted rows one at a time: the per-row program is exactly that chain, and
 * one row of scratch then serves any journal length. Scratch memory is the backend's: it
 * allocates memra__cpu_verify_scratch_words() floats when the operation is run or recorded, so
 * an allocation failure is reported at enqueue, never inside a replay.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* Stores a u32 count in an f32 journal word and reads it back, bit for bit. */
static uint32_t word_u32(const float *p)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

static void set_word_u32(float *p, uint32_t u)
{
    memcpy(p, &u, sizeof u);
}

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
    float *conv_out, *q, *k, *v, *beta, *g_log, *o;
} rows_out;

/* The words of scratch one sequence's `rows` rows need (conv_out, q, k, v, o, beta, g_log). */
static size_t rows_words(const memra__verify_args *a, size_t rows)
{
    const size_t act = a->num_v * MEMRA__S;
    return rows * (a->conv_dim + 4 * act + 2 * a->num_v);
}

/* Scratch layout: the activations of max(t, 1) rows, a ring, a state, one staged journal row. */
size_t memra__cpu_verify_scratch_words(const memra__verify_args *a)
{
    const size_t state_words = a->num_v * (size_t)MEMRA__S * MEMRA__S;
    return rows_words(a, a->t > 0 ? a->t : 1) + a->conv_dim * (a->d_conv - 1) + state_words +
           a->conv_dim + 2 * a->num_v;
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
    r.beta = r.o + act;
    r.g_log = r.beta + heads;
    return r;
}

/* Runs conv, prep and scan over `rows` rows of one sequence: qkv/beta_raw/alpha are the rows'
 * inputs (row stride conv_dim and num_v, or the journal's row stride), ring is rolled in place,
 * the state is read from *state_in and written to *state_out, the snapshots (may be NULL) are
 * those of the rows. */
static void run_rows(const memra__verify_args *a, const float *qkv, size_t qkv_stride,
                     const float *beta_raw, const float *alpha, size_t head_stride, size_t rows,
                     uint64_t ring, uint64_t state_in, uint64_t state_out, const rows_out *out,
                     float *snap_conv, float *snap_ssm, float *staging)
{
    const float *x = qkv, *br = beta_raw, *al = alpha;
    /* The conv and prep kernels read rows at a fixed stride of conv_dim and num_v; a journal
     * row is padded, so it is first gathered into `staging` (one row at a time). */
    if (qkv_stride != a->conv_dim || head_stride != a->num_v) {
        float *sx = staging, *sb = sx + rows * a->conv_dim, *sa = sb + rows * a->num_v;
        for (size_t r = 0; r < rows; r++) {
            memcpy(sx + r * a->conv_dim, qkv + r * qkv_stride, a->conv_dim * sizeof(float));
            memcpy(sb + r * a->num_v, beta_raw + r * head_stride, a->num_v * sizeof(float));
            memcpy(sa + r * a->num_v, alpha + r * head_stride, a->num_v * sizeof(float));
        }
        x = sx;
        br = sb;
        al = sa;
    }
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
        .num_v = a->num_v,
        .t = rows,
        .b_n = 1,
        .scale = a->scale,
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

void memra__cpu_gdn_verify(const memra__verify_args *a, float *scratch)
{
    const size_t t = a->t, num_v = a->num_v, pad = a->d_conv - 1;
    const size_t act = num_v * MEMRA__S, state_words = act * MEMRA__S;
    const size_t row_words = MEMRA__JOURNAL_ROW(a->conv_dim, num_v);
    const size_t header = MEMRA__JOURNAL_HEADER(a->num_k);
    const int journal = a->mode == MEMRA__MODE_JOURNAL;
    float *ring_copy = scratch + rows_words(a, t > 0 ? t : 1);
    float *state_copy = ring_copy + a->conv_dim * pad;
    float *staging = state_copy + state_words;

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
        };
        /* A commit (t == 0) has no new rows, and its row inputs may be NULL. */
        const float *qkv = t > 0 ? a->qkv + x0 * a->conv_dim : NULL;
        const float *beta_raw = t > 0 ? a->beta_raw + x0 * num_v : NULL;
        const float *alpha = t > 0 ? a->alpha + x0 * num_v : NULL;

        if (!journal) {
            /* The 1.0 parity rule: t chained rows leave the state in alternate when t is odd. */
            const uint64_t final = row[t % 2 == 1 ? 2 : 1];
            float *sc = a->snap_conv ? a->snap_conv + b * (t - 1) * a->conv_dim * pad : NULL;
            float *ss = a->snap_ssm ? a->snap_ssm + b * (t - 1) * state_words : NULL;
            run_rows(a, qkv, a->conv_dim, beta_raw, alpha, num_v, t, ring, canonical, final, &out,
                     sc, ss, staging);
            continue;
        }

        float *jr = (float *)(uintptr_t)row[2];
        const uint32_t held = word_u32(jr), n = a->accepted[b];
        if (n > held) {
            record(a->err, a->op, b, n, held, MEMRA__ERR_ACCEPTED_OVER_JOURNAL);
            continue;
        }
        /* The fold: the accepted rows run one by one over the ring and the state in place;
         * their activations land in scratch and are dropped. */
        const rows_out f = carve(a, scratch, 1);
        for (uint32_t r = 0; r < n; r++) {
            const float *jx = jr + header + r * row_words;
            run_rows(a, jx, row_words, jx + a->conv_dim, jx + a->conv_dim + num_v, row_words, 1,
                     ring, canonical, canonical, &f, NULL, NULL, staging);
        }
        if (t > 0) {
            /* The new rows run from copies, so that ring and state keep the folded values. */
            memcpy(ring_copy, (const float *)(uintptr_t)ring, a->conv_dim * pad * sizeof(float));
            run_rows(a, qkv, a->conv_dim, beta_raw, alpha, num_v, t, (uint64_t)(uintptr_t)ring_copy,
                     canonical, (uint64_t)(uintptr_t)state_copy, &out, NULL, NULL, staging);
        }
        /* The journal now holds the new rows (none after a commit). */
        for (size_t r = 0; r < t; r++) {
            float *dst = jr + header + r * row_words;
            memcpy(dst, qkv + r * a->conv_dim, a->conv_dim * sizeof(float));
            memcpy(dst + a->conv_dim, beta_raw + r * num_v, num_v * sizeof(float));
            memcpy(dst + a->conv_dim + num_v, alpha + r * num_v, num_v * sizeof(float));
        }
        for (size_t kh = 0; kh < a->num_k; kh++)
            set_word_u32(jr + kh, (uint32_t)t);
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
            record(a->err, MEMRA__OP_ROLLBACK, b, n, (uint32_t)t, MEMRA__ERR_ROLLBACK_RANGE);
            continue;
        }
        if (n == t) {
            /* The verify left the ring after row t - 1; the final state is in alternate when t
             * is odd, in canonical (nothing to do) when t is even. */
            if (t % 2 == 1)
                memcpy(canonical, (const float *)(uintptr_t)row[2], state_words * sizeof(float));
            continue;
        }
        const size_t e = b * (t - 1) + (n - 1);
        if (ring_words > 0)
            memcpy(ring, a->snap_conv + e * ring_words, ring_words * sizeof(float));
        memcpy(canonical, a->snap_ssm + e * state_words, state_words * sizeof(float));
    }
}
