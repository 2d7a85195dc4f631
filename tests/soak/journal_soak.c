/*
 * journal_soak: a long run of JOURNAL verifies and commits with bad counts and corrupted
 * journals among them (`make soak`, not part of `make test`). Public ABI and the test-support
 * library only.
 *
 * B sequences (ring, one state, a journal of memra_gdn_journal_len(t_max) words) are bound to
 * the table rows in a new order every cycle. A cycle is a verify of t rows (t drawn in
 * 1..t_max) or, one time in eight, a commit, every call declaring journal_t_max = t_max, with
 * accepted counts drawn per sequence in 0..rows held. One cycle in sixteen also injects one
 * fault into one sequence: a count above the rows its journal holds, a count of 0xFFFFFFFF, one
 * header word made wrong, random bytes over the whole journal, a NULL or a misaligned journal
 * entry. Then:
 *   - a cycle with a fault: the next memra_engine_synchronize must return INVALID_ARGUMENT
 *     naming the operation and the sequence (and the count, for a bad count), the one after it
 *     OK; the bad sequence's ring, state and journal, and its rows of o, must be bit-identical
 *     to before the call; the journal is then put back as it was;
 *   - a cycle without one: the synchronize must return OK.
 * A host model follows every sequence: the per-row program of the test-support library
 * (tu_rows_row: the 1.0 per-row conv, prep and scan on the same engine) run on exactly the rows
 * each sequence accepted, in order. Every `--check-every` cycles, and after a final commit at
 * the end, every sequence's ring and state must equal the model's bit for bit. The run prints
 * the cycles, verifies, commits, rows folded, faults injected (by kind), reports and wall time;
 * it exits 0 when every check held, 1 at the first that did not (with the seed that replays it).
 *
 * usage: journal_soak [--backend cpu|cuda] [--cycles N] [--b B] [--t-max T] [--seed S]
 *                     [--check-every K]
 * The number of cycles is --cycles, else $SOAK_CYCLES, else 100000; the seed --seed, else
 * $MEMRA_TEST_SEED, else a fresh one. The shape is the small one (2 key heads, 4 value heads,
 * d_conv 4, tiled).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memra.h"
#include "support/support.h"

#define SK_B_MAX 16
#define SK_T_MAX_MAX 16
/* The header words the faults corrupt (the library's layout, kernels/kernels.h). */
#define SK_HEADER_WORDS 10
#define SK_MAGIC UINT32_C(0x4a41524d)

enum {
    SK_F_COUNT_OVER,
    SK_F_COUNT_MAX,
    SK_F_HEADER_WORD,
    SK_F_RANDOM_BYTES,
    SK_F_NULL_ENTRY,
    SK_F_MISALIGNED_ENTRY,
    SK_N_FAULTS
};
static const char *const sk_fault_name[SK_N_FAULTS] = {
    "count above the rows held", "count 0xFFFFFFFF",        "a header word wrong", "random bytes",
    "NULL journal entry",        "misaligned journal entry"};

typedef struct sk_opts {
    MemraBackend backend;
    size_t cycles, b, t_max, check_every;
    uint64_t seed;
} sk_opts;

/* One sequence and its model. */
typedef struct sk_seq {
    MemraSliceMutF32 ring, state, journal;
    size_t held;
    /* The model: its ring, two states (the per-row program ping-pongs between them; ms[which]
     * holds the state), the inputs of the rows the journal holds, and a per-row table for each
     * `which`: [ring, ms[which], ms[1 - which], ms[which]]. */
    MemraSliceMutF32 mring, ms[2], mqkv, mbeta_raw, malpha;
    MemraSliceMutU64 mtab[2];
    int which;
} sk_seq;

typedef struct sk_run {
    sk_opts o;
    MemraEngine *e;
    tu_gdn_shape sh;
    size_t jlen;
    sk_seq seq[SK_B_MAX];
    size_t slot_seq[SK_B_MAX];
    MemraSliceMutF32 w, dt_bias, a, qkv, beta_raw, alpha, out;
    /* The model's row scratch: conv_outs and o of t_max rows, the prep outputs of one. */
    MemraSliceMutF32 s_conv, s_o, s_q, s_k, s_v, s_beta, s_g;
    MemraSliceMutU32 accepted;
    MemraSliceMutU64 table;
    uint64_t rng;
    size_t cycle;
    /* The figures. */
    size_t verifies, commits, rows_folded, faults, reports, by_kind[SK_N_FAULTS], checks;
} sk_run;

static sk_run *sk_current;

static void sk_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void sk_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "journal_soak: FAILED");
    if (sk_current != NULL)
        fprintf(stderr, " at cycle %zu", sk_current->cycle);
    fprintf(stderr, ": ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (sk_current != NULL)
        fprintf(stderr, "\njournal_soak: replay with " TU_SEED_FMT " (or --seed 0x%016" PRIx64 ")",
                sk_current->o.seed, sk_current->o.seed);
    fprintf(stderr, "\n");
    exit(1);
}

static void sk_ok(MemraStatus st, const char *what)
{
    if (st != MEMRA_STATUS_OK)
        sk_fail("%s returned %s: %s", what, memra_status_string(st), memra_last_error_message());
}

static size_t sk_below(sk_run *r, size_t n)
{
    return (size_t)(tu_xorshift64(&r->rng) % n);
}

static void *sk_host(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL)
        sk_fail("out of host memory (%zu bytes)", bytes);
    return p;
}

static MemraSliceMutF32 sk_buf(sk_run *r, size_t len)
{
    MemraSliceMutF32 s;
    sk_ok(memra_alloc_f32(r->e, len ? len : 1, MEMRA_ALLOC_INIT_ZEROED, &s), "memra_alloc_f32");
    return s;
}

static void sk_put(sk_run *r, const float *host, size_t len, MemraSliceMutF32 dst)
{
    const MemraSliceF32 src = {host, len};
    sk_ok(memra_htod_f32_into(r->e, src, dst), "memra_htod_f32_into");
}

static float *sk_get(sk_run *r, MemraSliceMutF32 s)
{
    float *h = sk_host(s.len * sizeof *h);
    const MemraSliceMutF32 dst = {h, s.len};
    sk_ok(memra_dtoh_f32(r->e, tu_view(s), dst), "memra_dtoh_f32");
    return h;
}

/* A buffer filled by tu_varied(seed, spread). */
static MemraSliceMutF32 sk_varied(sk_run *r, size_t len, uint64_t seed, float spread)
{
    MemraSliceMutF32 s = sk_buf(r, len);
    float *h = sk_host(len * sizeof *h);
    tu_varied(h, len, seed, spread);
    sk_put(r, h, len, s);
    free(h);
    return s;
}

static void sk_expect_same(const float *got, const float *want, size_t len, const char *what,
                           size_t seq)
{
    const size_t i = tu_first_diff(got, want, len);
    if (i != len)
        sk_fail("%s of sequence %zu: word %zu of %zu differs (%a against %a)", what, seq, i, len,
                (double)got[i], (double)want[i]);
}

/* ---- Setup ---- */

static void sk_setup(sk_run *r)
{
    const tu_gdn_shape *sh = &r->sh;
    const size_t cd = sh->conv_dim, nv = sh->num_v, rows = r->o.b * r->o.t_max;
    sk_ok(tu_engine_try(r->o.backend, 0, &r->e), "memra_engine_create");
    sk_ok(memra_gdn_journal_len(MEMRA_D_STATE, sh->num_k, nv, r->o.t_max, &r->jlen),
          "memra_gdn_journal_len");
    /* The weights (the seed's spreads; `a` negative, so that long histories stay bounded). */
    r->w = sk_varied(r, cd * sh->d_conv, tu_mix_seed(r->o.seed, 1), 0.5f);
    r->dt_bias = sk_varied(r, nv, tu_mix_seed(r->o.seed, 2), 0.5f);
    float *a = sk_host(nv * sizeof *a);
    tu_varied(a, nv, tu_mix_seed(r->o.seed, 3), 1.0f);
    for (size_t h = 0; h < nv; h++)
        a[h] = -0.05f - (a[h] < 0 ? -a[h] : a[h]);
    r->a = sk_buf(r, nv);
    sk_put(r, a, nv, r->a);
    free(a);
    r->qkv = sk_buf(r, rows * cd);
    r->beta_raw = sk_buf(r, rows * nv);
    r->alpha = sk_buf(r, rows * nv);
    r->out = sk_buf(r, rows * sh->value_dim);
    r->s_conv = sk_buf(r, r->o.t_max * cd);
    r->s_o = sk_buf(r, r->o.t_max * sh->value_dim);
    r->s_q = sk_buf(r, sh->value_dim);
    r->s_k = sk_buf(r, sh->value_dim);
    r->s_v = sk_buf(r, sh->value_dim);
    r->s_beta = sk_buf(r, nv);
    r->s_g = sk_buf(r, nv);
    sk_ok(memra_alloc_u32(r->e, r->o.b, MEMRA_ALLOC_INIT_ZEROED, &r->accepted), "memra_alloc_u32");
    sk_ok(memra_alloc_u64(r->e, 3 * r->o.b, MEMRA_ALLOC_INIT_ZEROED, &r->table), "memra_alloc_u64");

    float *ring = sk_host(sh->ring_words * sizeof *ring);
    float *state = sk_host(sh->state_words * sizeof *state);
    for (size_t q = 0; q < r->o.b; q++) {
        sk_seq *s = &r->seq[q];
        tu_varied(ring, sh->ring_words, tu_mix_seed(r->o.seed, 100 + q), 1.0f);
        tu_varied(state, sh->state_words, tu_mix_seed(r->o.seed, 200 + q), 0.3f);
        s->ring = sk_buf(r, sh->ring_words);
        s->state = sk_buf(r, sh->state_words);
        s->journal = sk_buf(r, r->jlen);
        s->mring = sk_buf(r, sh->ring_words);
        s->ms[0] = sk_buf(r, sh->state_words);
        s->ms[1] = sk_buf(r, sh->state_words);
        sk_put(r, ring, sh->ring_words, s->ring);
        sk_put(r, ring, sh->ring_words, s->mring);
        sk_put(r, state, sh->state_words, s->state);
        sk_put(r, state, sh->state_words, s->ms[0]);
        s->mqkv = sk_buf(r, r->o.t_max * cd);
        s->mbeta_raw = sk_buf(r, r->o.t_max * nv);
        s->malpha = sk_buf(r, r->o.t_max * nv);
        for (int w = 0; w < 2; w++) {
            const uint64_t host[4] = {tu_addr(s->mring), tu_addr(s->ms[w]), tu_addr(s->ms[1 - w]),
                                      tu_addr(s->ms[w])};
            const MemraSliceU64 src = {host, 4};
            sk_ok(memra_htod_u64(r->e, src, &s->mtab[w]), "memra_htod_u64");
        }
        r->slot_seq[q] = q;
    }
    free(ring);
    free(state);
}

/* ---- The model ---- */

/* The per-row program on the first n rows the sequence's journal holds. */
static void sk_model_fold(sk_run *r, sk_seq *s, size_t n)
{
    const tu_gdn_shape *sh = &r->sh;
    if (n == 0)
        return;
    const tu_rows p = {
        .num_k = sh->num_k,
        .num_v = sh->num_v,
        .d_conv = sh->d_conv,
        .t = n,
        .b = 1,
        .eps = TU_GDN_EPS,
        .scale = TU_GDN_SCALE,
        .qkv = tu_sub(s->mqkv, 0, n * sh->conv_dim),
        .beta_raw = tu_sub(s->mbeta_raw, 0, n * sh->num_v),
        .alpha = tu_sub(s->malpha, 0, n * sh->num_v),
        .w = tu_view(r->w),
        .dt_bias = tu_view(r->dt_bias),
        .a = tu_view(r->a),
        .conv_outs = r->s_conv,
        .o = r->s_o,
        .q = r->s_q,
        .k = r->s_k,
        .v = r->s_v,
        .beta = r->s_beta,
        .g_log = r->s_g,
        .table = tu_view_u64(s->mtab[s->which]),
    };
    for (size_t row = 0; row < n; row++) {
        const char *failed = NULL;
        MemraStatus st = tu_rows_row(r->e, &p, row, &failed);
        if (st != MEMRA_STATUS_OK)
            sk_fail("the model's %s returned %s: %s", failed, memra_status_string(st),
                    memra_last_error_message());
    }
    s->which ^= (int)(n % 2);
    r->rows_folded += n;
}

/* Every sequence's ring and state against the model's. */
static void sk_check_all(sk_run *r, const char *when)
{
    for (size_t q = 0; q < r->o.b; q++) {
        sk_seq *s = &r->seq[q];
        float *got[2] = {sk_get(r, s->ring), sk_get(r, s->state)};
        float *want[2] = {sk_get(r, s->mring), sk_get(r, s->ms[s->which])};
        char what[96];
        snprintf(what, sizeof what, "%s: the ring against the per-row program", when);
        sk_expect_same(got[0], want[0], s->ring.len, what, q);
        snprintf(what, sizeof what, "%s: the state against the per-row program", when);
        sk_expect_same(got[1], want[1], s->state.len, what, q);
        TU_FREE_HOST(got[0], got[1], want[0], want[1]);
    }
    r->checks++;
}

/* ---- One cycle ---- */

/* A count for a journal holding `held` rows: 0 and all of them often, anything between
 * otherwise. */
static uint32_t sk_count(sk_run *r, size_t held)
{
    if (held == 0)
        return 0;
    switch (sk_below(r, 4)) {
    case 0:
        return 0;
    case 1:
        return (uint32_t)held;
    }
    return (uint32_t)(1 + sk_below(r, held));
}

/* Header word `word` made wrong for this call, whatever the journal held. */
static uint32_t sk_wrong_word(sk_run *r, int word)
{
    const tu_gdn_shape *sh = &r->sh;
    switch (word) {
    case 0:
        return SK_MAGIC ^ (UINT32_C(1) << sk_below(r, 32));
    case 1:
        return 2u + 1u + (uint32_t)sk_below(r, 1000);
    case 2:
        return sk_below(r, 2) ? 64u : 256u;
    case 3:
        return (uint32_t)sh->num_k + 1u + (uint32_t)sk_below(r, 7);
    case 4:
        return (uint32_t)sh->num_v * 2u;
    case 5:
        return (uint32_t)(sh->d_conv % MEMRA_D_CONV_MAX + 1);
    case 6:
        return 1u + (uint32_t)sk_below(r, 3);
    case 7:
        return (uint32_t)r->o.t_max + 1u + (uint32_t)sk_below(r, 100);
    case 8:
        return (uint32_t)r->o.t_max + 1u + (uint32_t)sk_below(r, UINT32_MAX - 64);
    }
    return 2u + (uint32_t)sk_below(r, 1000);
}

static void sk_args(sk_run *r, MemraVerifyArgs *v, size_t t, bool commit)
{
    const tu_gdn_shape *sh = &r->sh;
    const size_t b = r->o.b;
    sk_ok(tu_verify_args_sizes(v, sh, commit ? 1 : t, b, MEMRA_VERIFY_MODE_JOURNAL,
                               MEMRA_HEAD_ORDER_TILED),
          "memra_verify_args_init");
    v->table = tu_view_u64(r->table);
    v->w = tu_view(r->w);
    v->dt_bias = tu_view(r->dt_bias);
    v->a = tu_view(r->a);
    v->accepted = tu_view_u32(r->accepted);
    v->journal_t_max = r->o.t_max;
    if (commit)
        return;
    v->qkv = tu_sub(r->qkv, 0, b * t * sh->conv_dim);
    v->beta_raw = tu_sub(r->beta_raw, 0, b * t * sh->num_v);
    v->alpha = tu_sub(r->alpha, 0, b * t * sh->num_v);
    v->o = tu_sub_mut(r->out, 0, b * t * sh->value_dim);
}

/* The report of a fault: INVALID_ARGUMENT naming the operation, the sequence (and the count),
 * then OK. */
static void sk_expect_report(sk_run *r, const char *fn, size_t row, int kind, uint32_t count)
{
    MemraStatus st = memra_engine_synchronize(r->e);
    char msg[1024], seq[48], value[24];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    if (st != MEMRA_STATUS_INVALID_ARGUMENT)
        sk_fail("%s with a fault (%s, table row %zu): memra_engine_synchronize returned %s, "
                "expected INVALID_ARGUMENT (%s)",
                fn, sk_fault_name[kind], row, memra_status_string(st), msg);
    snprintf(seq, sizeof seq, "sequence %zu", row);
    snprintf(value, sizeof value, "%" PRIu32, count);
    if (!tu_has_word(msg, fn) || !tu_has_word(msg, seq) ||
        (kind <= SK_F_COUNT_MAX && !tu_has_word(msg, value)))
        sk_fail("%s with a fault (%s, table row %zu, count %" PRIu32
                "): the report \"%s\" does not name the operation, the sequence and the value",
                fn, sk_fault_name[kind], row, count, msg);
    r->reports++;
    st = memra_engine_synchronize(r->e);
    if (st != MEMRA_STATUS_OK)
        sk_fail("%s: the synchronize after the report returned %s (%s): reported twice?", fn,
                memra_status_string(st), memra_last_error_message());
}

static void sk_cycle(sk_run *r, bool last)
{
    const tu_gdn_shape *sh = &r->sh;
    const size_t b_n = r->o.b, cd = sh->conv_dim, nv = sh->num_v;
    const bool commit = last || sk_below(r, 8) == 0;
    const size_t t = commit ? 0 : 1 + sk_below(r, r->o.t_max);
    const int kind = !last && sk_below(r, 16) == 0 ? (int)sk_below(r, SK_N_FAULTS) : -1;
    const size_t bad = sk_below(r, b_n);
    const char *fn = commit ? "memra_gdn_journal_commit" : "memra_gdn_verify";

    for (size_t b = b_n; b > 1; b--) {
        const size_t j = sk_below(r, b), tmp = r->slot_seq[b - 1];
        r->slot_seq[b - 1] = r->slot_seq[j];
        r->slot_seq[j] = tmp;
    }
    uint64_t host[3 * SK_B_MAX];
    uint32_t counts[SK_B_MAX];
    for (size_t b = 0; b < b_n; b++) {
        const sk_seq *s = &r->seq[r->slot_seq[b]];
        host[3 * b + 0] = tu_addr(s->ring);
        host[3 * b + 1] = tu_addr(s->state);
        host[3 * b + 2] = tu_addr(s->journal);
        counts[b] = sk_count(r, s->held);
    }

    /* The fault, and what the bad sequence holds before the call. */
    sk_seq *bs = &r->seq[r->slot_seq[bad]];
    float *orig = NULL, *was[3] = {NULL, NULL, NULL};
    if (kind >= 0) {
        r->faults++;
        r->by_kind[kind]++;
        if (kind == SK_F_COUNT_OVER)
            counts[bad] = (uint32_t)bs->held + 1u + (uint32_t)sk_below(r, 3);
        else if (kind == SK_F_COUNT_MAX)
            counts[bad] = UINT32_MAX;
        else if (kind == SK_F_NULL_ENTRY)
            host[3 * bad + 2] = 0;
        else if (kind == SK_F_MISALIGNED_ENTRY)
            host[3 * bad + 2] += 2;
        if (kind == SK_F_HEADER_WORD || kind == SK_F_RANDOM_BYTES) {
            orig = sk_get(r, bs->journal);
            float *bent = sk_host(r->jlen * sizeof *bent);
            memcpy(bent, orig, r->jlen * sizeof *bent);
            uint32_t word;
            if (kind == SK_F_HEADER_WORD) {
                const int i = (int)sk_below(r, SK_HEADER_WORDS);
                word = sk_wrong_word(r, i);
                memcpy(&bent[i], &word, sizeof word);
            } else {
                for (size_t i = 0; i < r->jlen; i++) {
                    word = (uint32_t)(tu_xorshift64(&r->rng) >> 16);
                    memcpy(&bent[i], &word, sizeof word);
                }
                memcpy(&word, &bent[0], sizeof word);
                if (word == SK_MAGIC) {
                    word ^= 1;
                    memcpy(&bent[0], &word, sizeof word);
                }
            }
            sk_put(r, bent, r->jlen, bs->journal);
            free(bent);
        }
        was[0] = sk_get(r, bs->ring);
        was[1] = sk_get(r, bs->state);
        was[2] = sk_get(r, bs->journal);
    }
    const MemraSliceU64 tsrc = {host, 3 * b_n};
    sk_ok(memra_htod_u64_into(r->e, tsrc, r->table), "memra_htod_u64_into");
    const MemraSliceU32 csrc = {counts, b_n};
    sk_ok(memra_htod_u32_into(r->e, csrc, r->accepted), "memra_htod_u32_into");

    float *qkv = NULL, *br = NULL, *al = NULL;
    if (!commit) {
        qkv = sk_host(b_n * t * cd * sizeof *qkv);
        br = sk_host(b_n * t * nv * sizeof *br);
        al = sk_host(b_n * t * nv * sizeof *al);
        const uint64_t rows_seed = tu_mix_seed(r->o.seed, 1000 + r->cycle);
        tu_varied(qkv, b_n * t * cd, tu_mix_seed(rows_seed, 1), 1.0f);
        tu_varied(br, b_n * t * nv, tu_mix_seed(rows_seed, 2), 2.0f);
        tu_varied(al, b_n * t * nv, tu_mix_seed(rows_seed, 3), 2.0f);
        sk_put(r, qkv, b_n * t * cd, r->qkv);
        sk_put(r, br, b_n * t * nv, r->beta_raw);
        sk_put(r, al, b_n * t * nv, r->alpha);
        if (kind >= 0) {
            float *poison = sk_host(r->out.len * sizeof *poison);
            tu_poison_host(poison, r->out.len);
            sk_put(r, poison, r->out.len, r->out);
            free(poison);
        }
    }

    MemraVerifyArgs v;
    sk_args(r, &v, t, commit);
    sk_ok(commit ? memra_gdn_journal_commit(r->e, &v) : memra_gdn_verify(r->e, &v), fn);
    if (commit)
        r->commits++;
    else
        r->verifies++;
    if (kind >= 0) {
        sk_expect_report(r, fn, bad, kind, counts[bad]);
        float *now[3] = {sk_get(r, bs->ring), sk_get(r, bs->state), sk_get(r, bs->journal)};
        static const char *const names[3] = {"the refused ring", "the refused state",
                                             "the refused journal"};
        const size_t lens[3] = {bs->ring.len, bs->state.len, bs->journal.len};
        for (int i = 0; i < 3; i++) {
            sk_expect_same(now[i], was[i], lens[i], names[i], bad);
            free(now[i]);
            free(was[i]);
        }
        if (!commit) {
            const size_t seg = t * sh->value_dim;
            float *o = sk_get(r, r->out), *poison = sk_host(seg * sizeof *poison);
            tu_poison_host(poison, seg);
            sk_expect_same(o + bad * seg, poison, seg, "the refused rows of o", bad);
            TU_FREE_HOST(o, poison);
        }
        if (orig != NULL)
            sk_put(r, orig, r->jlen, bs->journal);
        free(orig);
    } else {
        sk_ok(memra_engine_synchronize(r->e), "memra_engine_synchronize after a good call");
    }

    /* The model: every sequence but the refused one folds its count and takes the new rows. */
    for (size_t b = 0; b < b_n; b++) {
        sk_seq *s = &r->seq[r->slot_seq[b]];
        if (kind >= 0 && b == bad)
            continue;
        sk_model_fold(r, s, counts[b]);
        s->held = t;
        if (t > 0) {
            sk_put(r, qkv + b * t * cd, t * cd, s->mqkv);
            sk_put(r, br + b * t * nv, t * nv, s->mbeta_raw);
            sk_put(r, al + b * t * nv, t * nv, s->malpha);
        }
    }
    TU_FREE_HOST(qkv, br, al);
}

/* ---- main ---- */

static void sk_usage(FILE *f)
{
    fputs("usage: journal_soak [--backend cpu|cuda] [--cycles N] [--b B] [--t-max T] [--seed S]\n"
          "                    [--check-every K]\n"
          "JOURNAL verifies and commits with random t and counts, bad counts and corrupted\n"
          "journals; checks every report and every good sequence against the per-row program.\n"
          "Cycles: --cycles, else $SOAK_CYCLES, else 100000. Defaults: --backend cpu, --b 2,\n"
          "--t-max 3, --check-every 10000, the seed $MEMRA_TEST_SEED or a fresh one.\n",
          f);
}

static size_t sk_size_arg(const char *name, const char *s, size_t lo, size_t hi)
{
    char *end = NULL;
    const unsigned long long v = s != NULL ? strtoull(s, &end, 0) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "journal_soak: %s expects a number in %zu..%zu, got '%s'\n", name, lo, hi,
                s != NULL ? s : "");
        exit(2);
    }
    return (size_t)v;
}

int main(int argc, char **argv)
{
    static sk_run r;
    const char *env = getenv("SOAK_CYCLES");
    r.o = (sk_opts){MEMRA_BACKEND_CPU, 100000, 2, 3, 10000, tu_fresh_seed()};
    if (env != NULL && *env != '\0')
        r.o.cycles = sk_size_arg("SOAK_CYCLES", env, 1, SIZE_MAX);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sk_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--backend") == 0 && val != NULL && strcmp(val, "cpu") == 0)
            r.o.backend = MEMRA_BACKEND_CPU;
        else if (strcmp(a, "--backend") == 0 && val != NULL && strcmp(val, "cuda") == 0)
            r.o.backend = MEMRA_BACKEND_CUDA;
        else if (strcmp(a, "--cycles") == 0)
            r.o.cycles = sk_size_arg(a, val, 1, SIZE_MAX);
        else if (strcmp(a, "--b") == 0)
            r.o.b = sk_size_arg(a, val, 2, SK_B_MAX);
        else if (strcmp(a, "--t-max") == 0)
            r.o.t_max = sk_size_arg(a, val, 1, SK_T_MAX_MAX);
        else if (strcmp(a, "--seed") == 0)
            r.o.seed = sk_size_arg(a, val, 0, SIZE_MAX);
        else if (strcmp(a, "--check-every") == 0)
            r.o.check_every = sk_size_arg(a, val, 1, SIZE_MAX);
        else {
            sk_usage(stderr);
            return 2;
        }
        i++;
    }
    r.sh = tu_gdn_shape_make(TU_SMALL_NUM_K, TU_SMALL_NUM_V, TU_D_CONV);
    r.rng = tu_mix_seed(r.o.seed, 5) | 1;
    sk_current = &r;
    printf("journal_soak: backend %s, %zu cycles, b_n %zu, t 1..%zu, num_k %zu num_v %zu "
           "d_conv %zu, " TU_SEED_FMT "\n",
           r.o.backend == MEMRA_BACKEND_CUDA ? "cuda" : "cpu", r.o.cycles, r.o.b, r.o.t_max,
           r.sh.num_k, r.sh.num_v, r.sh.d_conv, r.o.seed);
    fflush(stdout);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sk_setup(&r);
    for (r.cycle = 0; r.cycle < r.o.cycles; r.cycle++) {
        sk_cycle(&r, false);
        if ((r.cycle + 1) % r.o.check_every == 0) {
            sk_check_all(&r, "a periodic check");
            printf(
                "journal_soak: cycle %zu: every sequence equals the per-row program; faults %zu, "
                "reports %zu\n",
                r.cycle + 1, r.faults, r.reports);
            fflush(stdout);
        }
    }
    /* A final commit of every sequence with drawn counts, then the last check. */
    sk_cycle(&r, true);
    sk_check_all(&r, "after the final commit");
    if (r.reports != r.faults)
        sk_fail("%zu faults injected, %zu reported", r.faults, r.reports);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;

    printf("journal_soak: cycles %zu (verifies %zu, commits %zu including the final one), rows "
           "folded by the model %zu\n",
           r.o.cycles, r.verifies, r.commits, r.rows_folded);
    printf("journal_soak: injected faults %zu:", r.faults);
    for (int k = 0; k < SK_N_FAULTS; k++)
        printf("%s %s %zu", k ? "," : "", sk_fault_name[k], r.by_kind[k]);
    printf("\njournal_soak: reports %zu (each exactly once), model checks %zu, wall time %.1f s\n",
           r.reports, r.checks, wall);
    printf("journal_soak: PASSED\n");
    sk_ok(memra_engine_destroy(r.e), "memra_engine_destroy");
    return 0;
}
