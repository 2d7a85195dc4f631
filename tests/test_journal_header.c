/*
 * Journals the library must refuse: a journal written for another shape, a header with any
 * field wrong, random bytes, a journal of another capacity, a never-zeroed buffer, a NULL or
 * misaligned journal address. Each is used with accepted = 1 (0xFFFFFFFF for the never-zeroed
 * buffer) by a JOURNAL memra_gdn_verify and by a memra_gdn_journal_commit of b_n = 2 or 3
 * sequences where only one sequence is bad, eagerly and through a captured graph.
 *
 * Every case runs the same launch three times from the same starting buffers:
 *   1. the reference: the bad sequence's journal zero-filled (empty) and its count 0;
 *   2. the bad launch: the bad journal (or address) and count in place;
 *   3. the reference again.
 * After the bad launch, the bad sequence's ring, state and journal (and the guard words after
 * each) and its rows of every output (o and the six optional activations, poisoned before) must
 * be bit-identical to before (memcmp), every other sequence's buffers and outputs must be
 * bit-identical to the reference launch's (and the reference must have folded them: their
 * states changed), the next memra_engine_synchronize must return INVALID_ARGUMENT with a
 * message naming the operation, the sequence and the field and value found wrong, and the
 * synchronize after it must return OK (reported once). Launch 3 must then succeed and match
 * the reference bit for bit, and a plain verify of every sequence must succeed: the engine
 * stays usable. In the graph variants one graph is captured on scratch sequences and replayed
 * three times; the journal is corrupted between the replays, so the header is read when the
 * graph executes.
 *
 * Every call declares journal_t_max = JH_T_MAX, the capacity the journals were sized with; a
 * verify of more rows than that is refused when it is called, writing nothing
 * (journal_header/t_over_capacity_*).
 * The header layout below is the library's (kernels/kernels.h): the header a verify writes is
 * checked against it before anything is corrupted.
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

/* The capacity every journal is sized with and every call declares, the rows the journals
 * hold before the call, and the rows of the verify under test. */
#define JH_T_MAX ((size_t)4)
#define JH_T_PRIME ((size_t)3)
#define JH_T ((size_t)2)
#define JH_B_MAX 3
#define JH_GUARD ((size_t)16)
/* The verify's outputs: conv_outs, q_l2, k_l2, v_g, beta, g_log, o (tu_gdn_views order). */
#define JH_N_OUT (TU_GDN_O + 1)

/* The header words (u32 in the journal's first f32 words). */
enum {
    JH_W_MAGIC,
    JH_W_FORMAT,
    JH_W_D_STATE,
    JH_W_NUM_K,
    JH_W_NUM_V,
    JH_W_D_CONV,
    JH_W_ORDER,
    JH_W_T_MAX,
    JH_W_ROWS,
    JH_W_SLOT,
    JH_WORDS,
    JH_HEADER = 16
};
#define JH_MAGIC UINT32_C(0x4a41524d)
#define JH_FORMAT UINT32_C(2)

/* How the bad sequence's journal is made. */
enum {
    JH_FILL_WRITER,     /* by a verify of another shape (or capacity) */
    JH_FILL_WORD,       /* a journal of the right shape, one header word overwritten */
    JH_FILL_RANDOM,     /* random bytes over the whole buffer */
    JH_FILL_ONES,       /* every bit set, exactly memra_gdn_journal_len elements */
    JH_FILL_NULL,       /* the table entry is 0 */
    JH_FILL_MISALIGNED, /* the table entry is 2 bytes past the journal */
};

typedef struct jh_shape {
    size_t num_k, num_v, d_conv;
    MemraHeadOrder order;
} jh_shape;

typedef struct jh_kind {
    const char *name;
    int fill;
    /* The call's shape, and the shape and capacity of the verify that wrote the journal. */
    jh_shape call, writer;
    size_t writer_t_max;
    /* The header word found wrong, and (JH_FILL_WORD) the value written there. */
    int word;
    uint32_t value;
} jh_kind;

#define JH_TILED MEMRA_HEAD_ORDER_TILED
#define JH_GROUPED MEMRA_HEAD_ORDER_GROUPED
#define JH_SMALL                                                                                   \
    {                                                                                              \
        2, 4, 4, JH_TILED                                                                          \
    }
#define JH_WRITTEN(name, call, writer, word)                                                       \
    {                                                                                              \
        name, JH_FILL_WRITER, call, writer, JH_T_MAX, word, 0                                      \
    }
#define JH_CORRUPT(name, word, value)                                                              \
    {                                                                                              \
        name, JH_FILL_WORD, JH_SMALL, JH_SMALL, 0, word, value                                     \
    }
#define JH_OTHER(name, fill)                                                                       \
    {                                                                                              \
        name, fill, JH_SMALL, JH_SMALL, 0, JH_W_MAGIC, 0                                           \
    }

static const jh_kind jh_kinds[] = {
    JH_WRITTEN("num_k 2 -> 1", ((jh_shape){1, 4, 4, JH_TILED}), ((jh_shape)JH_SMALL), JH_W_NUM_K),
    JH_WRITTEN("num_k 1 -> 2", ((jh_shape)JH_SMALL), ((jh_shape){1, 4, 4, JH_TILED}), JH_W_NUM_K),
    JH_WRITTEN("num_v 8 -> 4", ((jh_shape)JH_SMALL), ((jh_shape){2, 8, 4, JH_TILED}), JH_W_NUM_V),
    JH_WRITTEN("num_v 4 -> 8", ((jh_shape){2, 8, 4, JH_TILED}), ((jh_shape)JH_SMALL), JH_W_NUM_V),
    JH_WRITTEN("d_conv 4 -> 2", ((jh_shape){2, 4, 2, JH_TILED}), ((jh_shape)JH_SMALL), JH_W_D_CONV),
    JH_WRITTEN("tiled -> grouped", ((jh_shape){2, 4, 4, JH_GROUPED}), ((jh_shape)JH_SMALL),
               JH_W_ORDER),
    JH_CORRUPT("magic corrupted", JH_W_MAGIC, JH_MAGIC + 1),
    JH_CORRUPT("format corrupted", JH_W_FORMAT, 1),
    JH_CORRUPT("d_state corrupted", JH_W_D_STATE, 64),
    JH_CORRUPT("num_k corrupted", JH_W_NUM_K, 1),
    JH_CORRUPT("num_v corrupted", JH_W_NUM_V, 8),
    JH_CORRUPT("d_conv corrupted", JH_W_D_CONV, 3),
    JH_CORRUPT("head order corrupted", JH_W_ORDER, 1),
    JH_CORRUPT("t_max corrupted", JH_W_T_MAX, (uint32_t)JH_T_MAX + 1),
    JH_CORRUPT("rows above t_max", JH_W_ROWS, (uint32_t)JH_T_MAX + 1),
    JH_CORRUPT("slot 2", JH_W_SLOT, 2),
    JH_OTHER("random bytes", JH_FILL_RANDOM),
    {"written with journal_t_max 6", JH_FILL_WRITER, JH_SMALL, JH_SMALL, 6, JH_W_T_MAX, 0},
    JH_OTHER("never zeroed, all ones, accepted 0xFFFFFFFF", JH_FILL_ONES),
    JH_OTHER("NULL journal entry", JH_FILL_NULL),
    JH_OTHER("misaligned journal entry", JH_FILL_MISALIGNED),
};
#define JH_N_KINDS (sizeof jh_kinds / sizeof jh_kinds[0])

enum { JH_VERIFY, JH_COMMIT };
static const char *const jh_op_name[2] = {"memra_gdn_verify", "memra_gdn_journal_commit"};

typedef struct jh_case {
    int kind, op;
    bool graph;
} jh_case;

/* A sequence: ring, state and journal, each followed by JH_GUARD poisoned words (but the
 * never-zeroed journal, which is exactly memra_gdn_journal_len long). */
enum { JH_RING, JH_STATE, JH_JOURNAL, JH_N_BUF };
static const char *const jh_buf_name[JH_N_BUF] = {"ring", "state", "journal"};

typedef struct jh_seq {
    MemraSliceMutF32 buf[JH_N_BUF];
} jh_seq;

typedef struct jh_run {
    const jh_kind *k;
    jh_case c;
    uint64_t seed;
    char desc[320];
    MemraEngine *e;
    tu_gdn_shape sh;
    size_t b, bad, jlen, bad_jlen;
    MemraSliceMutF32 w, dt_bias, a, qkv, beta_raw, alpha;
    MemraSliceMutF32 out[JH_N_OUT];
    MemraSliceMutU32 accepted;
    MemraSliceMutU64 table;
    MemraVerifyArgs args;
    jh_seq seq[JH_B_MAX];
    /* The table entry of the bad sequence's journal in the bad launch. */
    uint64_t bad_entry;
    /* Every buffer before each launch, and after the reference launch. */
    float *before[JH_B_MAX][JH_N_BUF], *ref[JH_B_MAX][JH_N_BUF], *ref_out[JH_N_OUT];
    uint32_t hd[JH_WORDS];
} jh_run;

static tu_gdn_shape jh_make_shape(jh_shape s)
{
    return tu_gdn_shape_make(s.num_k, s.num_v, s.d_conv);
}

static size_t jh_journal_len(jh_shape s, size_t t_max)
{
    size_t len = 0;
    TU_OK(memra_gdn_journal_len(MEMRA_D_STATE, s.num_k, s.num_v, t_max, &len));
    return len;
}

/* A buffer of `words` words drawn from `seed` (zeros when `seed` is 0), then JH_GUARD
 * poisoned words. */
static MemraSliceMutF32 jh_guarded(MemraEngine *e, size_t words, uint64_t seed)
{
    MemraSliceMutF32 s = tu_poisoned(e, words + JH_GUARD);
    float *h = tu_host_array(words);
    if (seed != 0)
        tu_varied(h, words, seed, 0.5f);
    else
        memset(h, 0, words * sizeof *h);
    tu_write(e, h, words, s);
    free(h);
    return s;
}

static void jh_write_words(MemraEngine *e, MemraSliceMutF32 dst, const uint32_t *words, size_t n)
{
    float *h = tu_host_array(n);
    memcpy(h, words, n * sizeof *h);
    tu_write(e, h, n, dst);
    free(h);
}

/* A JOURNAL verify of `t` rows of `b` sequences (table rows `rows`) with every count 0, weights
 * and rows drawn from `seed`, declaring journal_t_max `cap`; it must return `want` (a refusal
 * naming journal_t_max), and a verify that succeeds must synchronise without a report. */
static void jh_verify_plain(MemraEngine *e, jh_shape s, size_t t, size_t b, size_t cap,
                            const uint64_t *rows, uint64_t seed, MemraStatus want)
{
    const tu_gdn_shape sh = jh_make_shape(s);
    tu_gdn_inputs in;
    tu_gdn_inputs_make(&sh, t, b, seed, &in);
    tu_gdn_device d;
    tu_gdn_upload(e, &sh, t, b, &in, &d);
    MemraSliceMutU64 table = tu_upload_u64(e, rows, 3 * b);
    MemraSliceMutU32 accepted;
    TU_OK(memra_alloc_u32(e, b, MEMRA_ALLOC_INIT_ZEROED, &accepted));
    MemraSliceMutF32 o = tu_poisoned(e, tu_gdn_tensor_len(&sh, t, b, TU_GDN_O));
    MemraVerifyArgs v;
    tu_gdn_args_init(&v, &sh, t, b, MEMRA_VERIFY_MODE_JOURNAL, s.order, &d);
    v.table = tu_view_u64(table);
    v.accepted = tu_view_u32(accepted);
    v.o = o;
    v.journal_t_max = cap;
    const MemraStatus st = memra_gdn_verify(e, &v);
    cr_assert_eq(st, want, "a JOURNAL verify of t = %zu, journal_t_max = %zu returned %s (%s)", t,
                 cap, memra_status_string(st), memra_last_error_message());
    if (st != MEMRA_STATUS_OK)
        cr_assert(tu_has_word(memra_last_error_message(), "journal_t_max"),
                  "the refusal \"%s\" does not name journal_t_max", memra_last_error_message());
    TU_OK(memra_engine_synchronize(e));
    tu_gdn_device_free(e, &d);
    tu_gdn_inputs_free(&in);
    void *bufs[] = {table.ptr, accepted.ptr, o.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tu_free(e, bufs[i]);
}

static void jh_header(MemraEngine *e, MemraSliceMutF32 journal, uint32_t *hd)
{
    float h[JH_WORDS];
    tu_download_into(e, tu_sub(journal, 0, JH_WORDS), h);
    memcpy(hd, h, sizeof h);
}

/* The header the call expects, word by word up to its capacity. */
static void jh_wanted(const jh_run *r, uint32_t *want)
{
    const jh_shape s = r->k->call;
    const uint32_t w[JH_W_ROWS] = {JH_MAGIC,          JH_FORMAT,         MEMRA_D_STATE,
                                   (uint32_t)s.num_k, (uint32_t)s.num_v, (uint32_t)s.d_conv,
                                   (uint32_t)s.order, (uint32_t)JH_T_MAX};
    memcpy(want, w, sizeof w);
}

/* The header a verify of JH_T_PRIME rows wrote into a good journal: the documented layout. */
static void jh_expect_layout(jh_run *r)
{
    uint32_t hd[JH_HEADER], want[JH_W_ROWS];
    float h[JH_HEADER];
    tu_download_into(r->e, tu_sub(r->seq[(r->bad + 1) % r->b].buf[JH_JOURNAL], 0, JH_HEADER), h);
    memcpy(hd, h, sizeof h);
    jh_wanted(r, want);
    for (int i = 0; i < JH_W_ROWS; i++)
        cr_assert_eq(hd[i], want[i],
                     "%s: header word %d of a journal the verify wrote is %" PRIu32
                     ", expected %" PRIu32,
                     r->desc, i, hd[i], want[i]);
    cr_assert_eq(hd[JH_W_ROWS], (uint32_t)JH_T_PRIME,
                 "%s: the header records %" PRIu32 " rows after a verify of %zu", r->desc,
                 hd[JH_W_ROWS], JH_T_PRIME);
    cr_assert(hd[JH_W_SLOT] <= 1, "%s: the header's slot is %" PRIu32, r->desc, hd[JH_W_SLOT]);
    for (int i = JH_WORDS; i < JH_HEADER; i++)
        cr_assert_eq(hd[i], 0, "%s: header word %d is %" PRIu32 ", expected 0", r->desc, i, hd[i]);
}

/* Makes the bad sequence's journal what the case says, after the good journals were primed. */
static void jh_make_bad(jh_run *r)
{
    const jh_kind *k = r->k;
    MemraSliceMutF32 j = r->seq[r->bad].buf[JH_JOURNAL];
    r->bad_entry = tu_addr(j);
    switch (k->fill) {
    case JH_FILL_WRITER: {
        const tu_gdn_shape ws = jh_make_shape(k->writer);
        MemraSliceMutF32 ring = jh_guarded(r->e, ws.ring_words, tu_mix_seed(r->seed, 20));
        MemraSliceMutF32 state = jh_guarded(r->e, ws.state_words, tu_mix_seed(r->seed, 21));
        const uint64_t rows[3] = {tu_addr(ring), tu_addr(state), tu_addr(j)};
        jh_verify_plain(r->e, k->writer, JH_T_PRIME, 1, k->writer_t_max, rows,
                        tu_mix_seed(r->seed, 22), MEMRA_STATUS_OK);
        tu_free(r->e, ring.ptr);
        tu_free(r->e, state.ptr);
        break;
    }
    case JH_FILL_WORD:
        jh_write_words(r->e, tu_sub_mut(j, (size_t)k->word, 1), &k->value, 1);
        break;
    case JH_FILL_RANDOM:
    case JH_FILL_ONES: {
        uint32_t *words = malloc(r->bad_jlen * sizeof *words);
        cr_assert_not_null(words);
        uint64_t x = tu_mix_seed(r->seed, 23) | 1;
        for (size_t i = 0; i < r->bad_jlen; i++)
            words[i] = k->fill == JH_FILL_ONES ? UINT32_MAX : (uint32_t)(tu_xorshift64(&x) >> 16);
        /* One chance in 2^32 that random bytes start with the magic word: not this time. */
        if (words[0] == JH_MAGIC)
            words[0] ^= 1;
        jh_write_words(r->e, j, words, r->bad_jlen);
        free(words);
        break;
    }
    case JH_FILL_NULL:
        r->bad_entry = 0;
        break;
    case JH_FILL_MISALIGNED:
        r->bad_entry = tu_addr(j) + 2;
        break;
    }
    jh_header(r->e, j, r->hd);
}

/* The phrases the report of the bad launch must contain (at most three). */
static size_t jh_phrases(const jh_run *r, char out[3][96])
{
    static const char *const field[JH_W_ROWS] = {
        [JH_W_FORMAT] = "format", [JH_W_D_STATE] = "d_state",
        [JH_W_NUM_K] = "num_k",   [JH_W_NUM_V] = "num_v",
        [JH_W_D_CONV] = "d_conv", [JH_W_ORDER] = "head order (0 tiled, 1 grouped)",
        [JH_W_T_MAX] = "t_max",
    };
    const uint32_t *hd = r->hd;
    uint32_t want[JH_W_ROWS];
    jh_wanted(r, want);
    if (r->k->fill == JH_FILL_NULL || r->k->fill == JH_FILL_MISALIGNED) {
        snprintf(out[0], 96, "journal address");
        snprintf(out[1], 96, "NULL or not 4-byte aligned");
        snprintf(out[2], 96, "0x%08" PRIx32, (uint32_t)r->bad_entry);
        return 3;
    }
    switch (r->k->word) {
    case JH_W_MAGIC:
        snprintf(out[0], 96, "not a libmemra journal");
        snprintf(out[1], 96, "magic word 0x%08" PRIx32, hd[JH_W_MAGIC]);
        return 2;
    case JH_W_ROWS:
    case JH_W_SLOT:
        snprintf(out[0], 96, "corrupt journal header");
        snprintf(out[1], 96, "%s %" PRIu32, r->k->word == JH_W_ROWS ? "rows" : "slot",
                 hd[r->k->word]);
        snprintf(out[2], 96, "at most %" PRIu32, r->k->word == JH_W_ROWS ? hd[JH_W_T_MAX] : 1);
        return 3;
    }
    snprintf(out[0], 96, "written for %s %" PRIu32, field[r->k->word], hd[r->k->word]);
    snprintf(out[1], 96, "this call has %s %" PRIu32, field[r->k->word], want[r->k->word]);
    return 2;
}

/* The next synchronize reports the bad sequence once; the one after it succeeds. */
static void jh_expect_report(jh_run *r)
{
    const char *fn = jh_op_name[r->c.op];
    MemraStatus st = memra_engine_synchronize(r->e);
    char msg[1024], seq[48], phrase[3][96];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT,
                 "%s: memra_engine_synchronize after the bad %s returned %s (%s), expected "
                 "MEMRA_STATUS_INVALID_ARGUMENT",
                 r->desc, fn, memra_status_string(st), msg);
    cr_assert(tu_has_word(msg, fn), "%s: the report \"%s\" does not name %s", r->desc, msg, fn);
    snprintf(seq, sizeof seq, "sequence %zu", r->bad);
    cr_assert(tu_has_word(msg, seq), "%s: the report \"%s\" does not name %s", r->desc, msg, seq);
    const size_t n = jh_phrases(r, phrase);
    for (size_t i = 0; i < n; i++)
        cr_assert(tu_has_word(msg, phrase[i]), "%s: the report \"%s\" does not say \"%s\"", r->desc,
                  msg, phrase[i]);
    st = memra_engine_synchronize(r->e);
    cr_assert_eq(st, MEMRA_STATUS_OK,
                 "%s: the synchronize after the report returned %s (%s): a finding is reported "
                 "once and the engine stays usable",
                 r->desc, memra_status_string(st), memra_last_error_message());
}

static MemraStatus jh_op(MemraEngine *e, void *user)
{
    jh_run *r = user;
    return r->c.op == JH_VERIFY ? memra_gdn_verify(e, &r->args)
                                : memra_gdn_journal_commit(e, &r->args);
}

/* The call under test: its inputs, outputs, counts and table, and its arguments. */
static void jh_call_setup(jh_run *r)
{
    const tu_gdn_shape *sh = &r->sh;
    const size_t b = r->b, rows = b * JH_T;
    float *w = tu_host_array(sh->conv_dim * sh->d_conv), *dt = tu_host_array(sh->num_v),
          *a = tu_host_array(sh->num_v);
    tu_gdn_weights(sh, tu_mix_seed(r->seed, 0), w, dt, a);
    r->w = tu_upload(r->e, w, sh->conv_dim * sh->d_conv);
    r->dt_bias = tu_upload(r->e, dt, sh->num_v);
    r->a = tu_upload(r->e, a, sh->num_v);
    float *qkv = tu_host_array(rows * sh->conv_dim), *br = tu_host_array(rows * sh->num_v),
          *al = tu_host_array(rows * sh->num_v);
    tu_gdn_rows(sh, rows, tu_mix_seed(r->seed, 1), qkv, br, al);
    r->qkv = tu_upload(r->e, qkv, rows * sh->conv_dim);
    r->beta_raw = tu_upload(r->e, br, rows * sh->num_v);
    r->alpha = tu_upload(r->e, al, rows * sh->num_v);
    TU_FREE_HOST(w, dt, a, qkv, br, al);
    TU_OK(memra_alloc_u32(r->e, b, MEMRA_ALLOC_INIT_ZEROED, &r->accepted));
    TU_OK(memra_alloc_u64(r->e, 3 * b, MEMRA_ALLOC_INIT_ZEROED, &r->table));

    MemraVerifyArgs *v = &r->args;
    TU_OK(tu_verify_args_sizes(v, sh, JH_T, b, MEMRA_VERIFY_MODE_JOURNAL, r->k->call.order));
    v->table = tu_view_u64(r->table);
    v->w = tu_view(r->w);
    v->dt_bias = tu_view(r->dt_bias);
    v->a = tu_view(r->a);
    v->accepted = tu_view_u32(r->accepted);
    v->journal_t_max = JH_T_MAX;
    if (r->c.op == JH_COMMIT) {
        /* The commit reads only what it documents: no rows, no outputs, t as it is. */
        return;
    }
    v->qkv = tu_view(r->qkv);
    v->beta_raw = tu_view(r->beta_raw);
    v->alpha = tu_view(r->alpha);
    MemraSliceMutF32 *views[TU_GDN_N_VIEWS];
    tu_gdn_views(v, views);
    for (int i = 0; i < JH_N_OUT; i++) {
        const size_t len = tu_gdn_tensor_len(sh, JH_T, b, i);
        r->out[i] = tu_poisoned(r->e, len + JH_GUARD);
        *views[i] = tu_sub_mut(r->out[i], 0, len);
    }
}

/* Puts every buffer back as it was before the first launch, poisons the outputs, and binds the
 * table and counts: the reference launch (`bad` false) gives the bad sequence an empty journal
 * and count 0, the bad launch its bad journal, entry and count. */
static void jh_prepare(jh_run *r, bool bad)
{
    uint64_t host[3 * JH_B_MAX];
    uint32_t counts[JH_B_MAX];
    for (size_t s = 0; s < r->b; s++) {
        for (int i = 0; i < JH_N_BUF; i++)
            tu_write(r->e, r->before[s][i], r->seq[s].buf[i].len, r->seq[s].buf[i]);
        for (int i = 0; i < JH_N_BUF; i++)
            host[3 * s + i] = tu_addr(r->seq[s].buf[i]);
        counts[s] = 1;
    }
    if (bad) {
        host[3 * r->bad + JH_JOURNAL] = r->bad_entry;
        counts[r->bad] = r->k->fill == JH_FILL_ONES ? UINT32_MAX : 1;
    } else {
        MemraSliceMutF32 j = tu_sub_mut(r->seq[r->bad].buf[JH_JOURNAL], 0, r->bad_jlen);
        float *zeros = tu_host_array(r->bad_jlen);
        memset(zeros, 0, r->bad_jlen * sizeof *zeros);
        tu_write(r->e, zeros, r->bad_jlen, j);
        free(zeros);
        counts[r->bad] = 0;
    }
    tu_write_u64(r->e, host, 3 * r->b, r->table);
    tu_write_u32(r->e, counts, r->b, r->accepted);
    for (int i = 0; r->c.op == JH_VERIFY && i < JH_N_OUT; i++)
        tu_poison(r->e, r->out[i]);
}

static void jh_launch(jh_run *r, MemraGraph *g)
{
    if (g != NULL)
        TU_OK(memra_graph_launch(r->e, g));
    else
        TU_OK(jh_op(r->e, r));
}

/* Reads every sequence buffer into `bufs` and every output into `outs` (malloc'ed). */
static void jh_collect(jh_run *r, float *bufs[][JH_N_BUF], float **outs)
{
    for (size_t s = 0; s < r->b; s++)
        for (int i = 0; i < JH_N_BUF; i++)
            bufs[s][i] = tu_download(r->e, r->seq[s].buf[i]);
    for (int i = 0; i < JH_N_OUT; i++)
        outs[i] = r->c.op == JH_VERIFY ? tu_download(r->e, r->out[i]) : NULL;
}

static void jh_free_collected(jh_run *r, float *bufs[][JH_N_BUF], float **outs)
{
    for (size_t s = 0; s < r->b; s++)
        for (int i = 0; i < JH_N_BUF; i++)
            free(bufs[s][i]);
    for (int i = 0; i < JH_N_OUT; i++)
        free(outs[i]);
}

/* After the bad launch (`bad`) or the second reference launch: every buffer against the
 * reference, the bad sequence's against what it held before. */
static void jh_check(jh_run *r, bool bad, const char *when)
{
    float *got[JH_B_MAX][JH_N_BUF], *outs[JH_N_OUT];
    jh_collect(r, got, outs);
    for (size_t s = 0; s < r->b; s++) {
        const bool refused = bad && s == r->bad;
        for (int i = 0; i < JH_N_BUF; i++)
            tu_expect_bits(got[s][i], refused ? r->before[s][i] : r->ref[s][i],
                           r->seq[s].buf[i].len, "%s, %s: the %s of sequence %zu%s", r->desc, when,
                           jh_buf_name[i], s,
                           refused ? " (the bad one) against before the launch"
                                   : " against the reference launch");
    }
    for (int i = 0; r->c.op == JH_VERIFY && i < JH_N_OUT; i++) {
        const size_t len = r->out[i].len, seg = (len - JH_GUARD) / r->b;
        float *want = tu_host_array(len);
        memcpy(want, r->ref_out[i], len * sizeof *want);
        if (bad)
            tu_poison_host(want + r->bad * seg, seg);
        tu_expect_bits(outs[i], want, len, "%s, %s: %s (sequence %zu %s)", r->desc, when,
                       tu_gdn_tensor_name[i], r->bad,
                       bad ? "must keep its poison" : "as in the reference");
        free(want);
    }
    jh_free_collected(r, got, outs);
}

static void jh_run_case(jh_case c, MemraBackend backend)
{
    jh_run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.k = &jh_kinds[c.kind];
    r.seed = tu_fresh_seed();
    r.b = 2 + (size_t)c.kind % 2;
    r.bad = (size_t)(c.kind + c.op) % r.b;
    snprintf(
        r.desc, sizeof r.desc,
        "%s, %s of num_k=%zu num_v=%zu d_conv=%zu %s b_n=%zu (bad: sequence %zu), %s, " TU_SEED_FMT,
        r.k->name, jh_op_name[c.op], r.k->call.num_k, r.k->call.num_v, r.k->call.d_conv,
        r.k->call.order == JH_GROUPED ? "GROUPED" : "TILED", r.b, r.bad,
        c.graph ? "graph-replayed" : "eager", r.seed);
    r.e = tu_engine(backend);
    r.sh = jh_make_shape(r.k->call);
    const tu_gdn_shape *sh = &r.sh;
    r.jlen = r.bad_jlen = jh_journal_len(r.k->call, JH_T_MAX);
    if (r.k->fill == JH_FILL_WRITER) {
        const size_t wlen = jh_journal_len(r.k->writer, r.k->writer_t_max);
        r.bad_jlen = wlen > r.jlen ? wlen : r.jlen;
    }

    /* The sequences, and a verify of JH_T_PRIME rows that fills every journal; the bad
     * sequence's journal, when the case makes it otherwise, is primed in a scratch journal
     * instead (the never-zeroed one is never written before the case fills it). */
    const bool own =
        r.k->fill == JH_FILL_WORD || r.k->fill == JH_FILL_NULL || r.k->fill == JH_FILL_MISALIGNED;
    MemraSliceMutF32 scratch = tu_zeros(r.e, r.jlen);
    uint64_t rows[3 * JH_B_MAX];
    for (size_t s = 0; s < r.b; s++) {
        jh_seq *q = &r.seq[s];
        q->buf[JH_RING] = jh_guarded(r.e, sh->ring_words, tu_mix_seed(r.seed, 100 + s));
        q->buf[JH_STATE] = jh_guarded(r.e, sh->state_words, tu_mix_seed(r.seed, 200 + s));
        if (s == r.bad && r.k->fill == JH_FILL_ONES) {
            TU_OK(memra_alloc_f32(r.e, r.jlen, MEMRA_ALLOC_INIT_UNINIT, &q->buf[JH_JOURNAL]));
        } else {
            q->buf[JH_JOURNAL] = jh_guarded(r.e, s == r.bad ? r.bad_jlen : r.jlen, 0);
        }
        for (int i = 0; i < JH_N_BUF; i++)
            rows[3 * s + i] = tu_addr(q->buf[i]);
        if (s == r.bad && !own)
            rows[3 * s + JH_JOURNAL] = tu_addr(scratch);
    }
    jh_verify_plain(r.e, r.k->call, JH_T_PRIME, r.b, JH_T_MAX, rows, tu_mix_seed(r.seed, 0),
                    MEMRA_STATUS_OK);
    tu_free(r.e, scratch.ptr);
    jh_expect_layout(&r);
    jh_make_bad(&r);
    jh_call_setup(&r);
    for (size_t s = 0; s < r.b; s++)
        for (int i = 0; i < JH_N_BUF; i++)
            r.before[s][i] = tu_download(r.e, r.seq[s].buf[i]);

    /* The graph is captured on scratch sequences with empty journals and counts 0 (the
     * capture runs the step); every replay reads the table and journals as they are then. */
    MemraGraph *g = NULL;
    if (c.graph) {
        jh_seq cap[JH_B_MAX];
        uint64_t host[3 * JH_B_MAX];
        for (size_t s = 0; s < r.b; s++) {
            cap[s].buf[JH_RING] = tu_zeros(r.e, sh->ring_words);
            cap[s].buf[JH_STATE] = tu_zeros(r.e, sh->state_words);
            cap[s].buf[JH_JOURNAL] = tu_zeros(r.e, r.jlen);
            for (int i = 0; i < JH_N_BUF; i++)
                host[3 * s + i] = tu_addr(cap[s].buf[i]);
        }
        tu_write_u64(r.e, host, 3 * r.b, r.table);
        TU_OK(memra_graph_capture(r.e, jh_op, &r, &g));
        TU_OK(memra_engine_synchronize(r.e));
        for (size_t s = 0; s < r.b; s++)
            for (int i = 0; i < JH_N_BUF; i++)
                tu_free(r.e, cap[s].buf[i].ptr);
    }

    /* 1. The reference launch: every good sequence folds one row. */
    jh_prepare(&r, false);
    jh_launch(&r, g);
    TU_OK(memra_engine_synchronize(r.e));
    jh_collect(&r, r.ref, r.ref_out);
    for (size_t s = 0; s < r.b; s++)
        cr_assert(s == r.bad ||
                      tu_bit_diffs(r.ref[s][JH_STATE], r.before[s][JH_STATE], sh->state_words) > 0,
                  "%s: the reference launch left the state of sequence %zu unchanged "
                  "(accepted 1 folds a row)",
                  r.desc, s);

    /* 2. The bad launch. */
    jh_prepare(&r, true);
    jh_launch(&r, g);
    jh_expect_report(&r);
    jh_check(&r, true, "the bad launch");

    /* 3. The reference again: the engine still works, and computes what it did. */
    jh_prepare(&r, false);
    jh_launch(&r, g);
    TU_OK(memra_engine_synchronize(r.e));
    jh_check(&r, false, "the launch after the report");
    /* And a plain verify of every sequence still succeeds without a report. */
    for (size_t s = 0; s < r.b; s++)
        for (int i = 0; i < JH_N_BUF; i++)
            rows[3 * s + i] = tu_addr(r.seq[s].buf[i]);
    jh_verify_plain(r.e, r.k->call, JH_T, r.b, JH_T_MAX, rows, tu_mix_seed(r.seed, 24),
                    MEMRA_STATUS_OK);

    if (g != NULL)
        TU_OK(memra_graph_destroy(r.e, g));
    jh_free_collected(&r, r.before, (float *[JH_N_OUT]){NULL});
    jh_free_collected(&r, r.ref, r.ref_out);
    TU_OK(memra_engine_destroy(r.e));
}

#define JH_CASES(kind)                                                                             \
    {kind, JH_VERIFY, false}, {kind, JH_COMMIT, false}, {kind, JH_VERIFY, true},                   \
    {                                                                                              \
        kind, JH_COMMIT, true                                                                      \
    }

static jh_case jh_cases[] = {
    JH_CASES(0),  JH_CASES(1),  JH_CASES(2),  JH_CASES(3),  JH_CASES(4),  JH_CASES(5),
    JH_CASES(6),  JH_CASES(7),  JH_CASES(8),  JH_CASES(9),  JH_CASES(10), JH_CASES(11),
    JH_CASES(12), JH_CASES(13), JH_CASES(14), JH_CASES(15), JH_CASES(16), JH_CASES(17),
    JH_CASES(18), JH_CASES(19), JH_CASES(20),
};
_Static_assert(sizeof jh_cases / sizeof jh_cases[0] == 4 * JH_N_KINDS, "one set per kind");

TU_PARAM_TEST_BACKENDS(jh_case, TU_PARAMS(jh_case, jh_cases), journal_header, cases, jh_run_case)

/* A verify of more rows than the declared capacity is refused when it is called, and writes
 * nothing: the journal keeps its (empty) contents, the ring and state theirs. */
static void jh_over_capacity(MemraBackend backend)
{
    const uint64_t seed = tu_fresh_seed();
    const jh_shape s = JH_SMALL;
    const tu_gdn_shape sh = jh_make_shape(s);
    MemraEngine *e = tu_engine(backend);
    MemraSliceMutF32 bufs[JH_N_BUF] = {
        jh_guarded(e, sh.ring_words, tu_mix_seed(seed, 1)),
        jh_guarded(e, sh.state_words, tu_mix_seed(seed, 2)),
        jh_guarded(e, jh_journal_len(s, JH_T_MAX), 0),
    };
    uint64_t rows[JH_N_BUF];
    float *before[JH_N_BUF];
    for (int i = 0; i < JH_N_BUF; i++) {
        rows[i] = tu_addr(bufs[i]);
        before[i] = tu_download(e, bufs[i]);
    }
    jh_verify_plain(e, s, JH_T_MAX + 1, 1, JH_T_MAX, rows, seed, MEMRA_STATUS_INVALID_ARGUMENT);
    for (int i = 0; i < JH_N_BUF; i++) {
        float *now = tu_download(e, bufs[i]);
        tu_expect_bits(
            now, before[i], bufs[i].len,
            "the %s after a verify of t = %zu refused for journal_t_max = %zu, " TU_SEED_FMT,
            jh_buf_name[i], JH_T_MAX + 1, JH_T_MAX, seed);
        free(now);
        free(before[i]);
    }
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(journal_header, t_over_capacity, jh_over_capacity)
