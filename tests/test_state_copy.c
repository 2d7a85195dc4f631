/*
 * The 1.2 state copies, memra_copy_batch_uniform_f32 and memra_copy_indirect_src_f32, on both
 * backends: every copy is the memcpy of its words, bit for bit, and nothing outside them is
 * written; the addresses are read when the copy executes, so a captured graph follows table
 * rewrites; and an address only the device can see that is NULL, misaligned, wrapping, on the
 * table or partially on the copy's own source makes that copy (and only it) a no-op, reported
 * by the next synchronising call, after which the engine goes on.
 *
 * Sources are fresh random words (tests/support's generator); destinations are poisoned
 * before every run, so a word a copy skipped or wrote twice out of place is seen.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Words between two copies' regions: they must stay poisoned. */
#define GAP ((size_t)3)

/* Frees the engine buffers `bufs` (NULL-terminated), then destroys the engine. */
static void release(MemraEngine *e, void *const *bufs)
{
    for (size_t i = 0; bufs[i] != NULL; i++)
        tu_free(e, bufs[i]);
    TU_OK(memra_engine_destroy(e));
}

typedef struct batch_case {
    size_t n, words;
    /* Floats added to the start of the source and destination regions: 1 makes every copy
     * miss 16-byte alignment (the kernel's per-float path), 0 keeps the first aligned. */
    size_t src_shift, dst_shift;
} batch_case;

static const batch_case batch_cases[] = {
    {1, 1, 0, 0},
    {3, 5, 0, 0},
    {8, 4099, 0, 0},
    {8, 4099, 1, 0},
    {5, 1024, 0, 1},
    {2, 300001, 0, 0},
    {37, 96, 2, 2},
    /* More copies than the CUDA grid's y dimension holds: the kernel loops. */
    {66000, 3, 0, 0},
};

/* The table of n copies laid out in one source and one destination buffer: copy i at
 * shift + i * (words + GAP) of each. */
static MemraSliceMutU64 batch_table(MemraEngine *e, const batch_case *c, MemraSliceMutF32 src,
                                    MemraSliceMutF32 dst, uint64_t **host_out)
{
    uint64_t *host = malloc(2 * c->n * sizeof *host);
    cr_assert_not_null(host);
    for (size_t i = 0; i < c->n; i++) {
        host[i] = tu_addr(src) + (c->src_shift + i * (c->words + GAP)) * sizeof(float);
        host[c->n + i] = tu_addr(dst) + (c->dst_shift + i * (c->words + GAP)) * sizeof(float);
    }
    MemraSliceMutU64 table = tu_upload_u64(e, host, 2 * c->n);
    *host_out = host;
    return table;
}

/* The destination buffer as the copies must leave it: poison, with each copy's words. */
static float *batch_expected(const batch_case *c, const float *src, size_t len)
{
    float *ref = tu_host_array(len);
    tu_poison_host(ref, len);
    for (size_t i = 0; i < c->n; i++)
        memcpy(ref + c->dst_shift + i * (c->words + GAP), src + c->src_shift + i * (c->words + GAP),
               c->words * sizeof(float));
    return ref;
}

static void check_batch(batch_case c, MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    const size_t len = 2 + c.n * (c.words + GAP);
    MemraSliceMutF32 src = tu_upload_varied(e, len, seed, 1.0f);
    MemraSliceMutF32 dst = tu_poisoned(e, len);
    float *src_host = tu_download(e, src);
    uint64_t *host_table;
    MemraSliceMutU64 table = batch_table(e, &c, src, dst, &host_table);

    TU_OK(memra_copy_batch_uniform_f32(e, tu_view_u64(table), c.n, c.words));
    TU_OK(memra_engine_synchronize(e));
    float *got = tu_download(e, dst);
    float *ref = batch_expected(&c, src_host, len);
    tu_expect_bits(got, ref, len, "n = %zu copies of %zu words, shifts %zu/%zu " TU_SEED_FMT, c.n,
                   c.words, c.src_shift, c.dst_shift, seed);
    /* The sources are only read. */
    float *src_after = tu_download(e, src);
    tu_expect_bits(src_after, src_host, len, "the sources after the copy " TU_SEED_FMT, seed);

    TU_FREE_HOST(src_host, host_table, got, ref, src_after);
    release(e, (void *const[]){table.ptr, src.ptr, dst.ptr, NULL});
}

TU_PARAM_TEST_BACKENDS(batch_case, TU_PARAMS(batch_case, batch_cases), state_copy, batch_is_memcpy,
                       check_batch)

typedef struct indirect_case {
    size_t n, dst_off, src_shift;
} indirect_case;

static const indirect_case indirect_cases[] = {
    {1, 0, 0}, {7, 0, 0}, {4096, 5, 0}, {4096, 4, 1}, {131075, 3, 2}, {65536, 65536, 0},
};

static void check_indirect(indirect_case c, MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    const size_t dst_len = c.dst_off + c.n + GAP, src_len = c.src_shift + c.n + GAP;
    MemraSliceMutF32 src = tu_upload_varied(e, src_len, seed, 1.0f);
    MemraSliceMutF32 dst = tu_poisoned(e, dst_len);
    const uint64_t entry = tu_addr(src) + c.src_shift * sizeof(float);
    MemraSliceMutU64 src_ptr = tu_upload_u64(e, &entry, 1);
    float *src_host = tu_download(e, src);

    TU_OK(memra_copy_indirect_src_f32(e, tu_view_u64(src_ptr), dst, c.dst_off, c.n));
    float *got = tu_download(e, dst);
    float *ref = tu_host_array(dst_len);
    tu_poison_host(ref, dst_len);
    memcpy(ref + c.dst_off, src_host + c.src_shift, c.n * sizeof(float));
    tu_expect_bits(got, ref, dst_len, "n = %zu at dst_off %zu, source shift %zu " TU_SEED_FMT, c.n,
                   c.dst_off, c.src_shift, seed);

    TU_FREE_HOST(src_host, got, ref);
    release(e, (void *const[]){src_ptr.ptr, src.ptr, dst.ptr, NULL});
}

TU_PARAM_TEST_BACKENDS(indirect_case, TU_PARAMS(indirect_case, indirect_cases), state_copy,
                       indirect_is_memcpy, check_indirect)

/* ---- Graphs follow the tables ---- */

#define G_N ((size_t)4)
#define G_WORDS ((size_t)2053)

typedef struct graph_rig {
    MemraSliceMutU64 table, src_ptr;
    MemraSliceMutF32 stash;
} graph_rig;

/* The captured step: the batched copy, then the indirect copy into the stash at offset 1. */
static MemraStatus graph_step(MemraEngine *e, void *user)
{
    const graph_rig *g = user;
    MemraStatus st = memra_copy_batch_uniform_f32(e, tu_view_u64(g->table), G_N, G_WORDS);
    if (st != MEMRA_STATUS_OK)
        return st;
    return memra_copy_indirect_src_f32(e, tu_view_u64(g->src_ptr), g->stash, 1, G_WORDS);
}

static void check_graph_rebind(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    /* Two sets of sources and destinations; the graph is captured on set 0, replayed on both. */
    MemraSliceMutF32 src[2][G_N], dst[2][G_N];
    float *src_host[2][G_N];
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < G_N; i++) {
            src[s][i] = tu_upload_varied(e, G_WORDS, tu_mix_seed(seed, s * G_N + i), 1.0f);
            dst[s][i] = tu_poisoned(e, G_WORDS);
            src_host[s][i] = tu_download(e, src[s][i]);
        }
    uint64_t host[2][2 * G_N];
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < G_N; i++) {
            host[s][i] = tu_addr(src[s][i]);
            host[s][G_N + i] = tu_addr(dst[s][i]);
        }
    graph_rig g = {.table = tu_upload_u64(e, host[0], 2 * G_N),
                   .src_ptr = tu_upload_u64(e, &host[0][G_N - 1], 1),
                   .stash = tu_poisoned(e, G_WORDS + 1)};
    MemraGraph *graph = NULL;
    TU_OK(memra_graph_capture(e, graph_step, &g, &graph));

    for (int s = 1; s >= 0; s--) {
        /* Rebind: new addresses in the same tables, destinations and stash re-poisoned. */
        tu_write_u64(e, host[s], 2 * G_N, g.table);
        tu_write_u64(e, &host[s][G_N - 1], 1, g.src_ptr);
        for (size_t i = 0; i < G_N; i++) {
            tu_poison(e, dst[0][i]);
            tu_poison(e, dst[1][i]);
        }
        tu_poison(e, g.stash);
        TU_OK(memra_graph_launch(e, graph));
        TU_OK(memra_engine_synchronize(e));
        for (size_t i = 0; i < G_N; i++) {
            float *got = tu_download(e, dst[s][i]);
            tu_expect_bits(got, src_host[s][i], G_WORDS, "replay on set %d, copy %zu " TU_SEED_FMT,
                           s, i, seed);
            free(got);
        }
        /* The stash took the source the entry names now. */
        float *stash = tu_download(e, g.stash);
        tu_expect_poison(stash, 1, "the stash before dst_off");
        tu_expect_bits(stash + 1, src_host[s][G_N - 1], G_WORDS,
                       "the stash after the replay on set %d " TU_SEED_FMT, s, seed);
        free(stash);
        /* The replay wrote none of the other set's destinations (set 0's are the ones the
         * capture named). */
        for (size_t i = 0; i < G_N; i++) {
            float *other = tu_download(e, dst[1 - s][i]);
            tu_expect_poison(other, G_WORDS, "set %d's copy %zu after the replay on set %d", 1 - s,
                             i, s);
            free(other);
        }
    }
    TU_OK(memra_graph_destroy(e, graph));
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < G_N; i++) {
            free(src_host[s][i]);
            tu_free(e, src[s][i].ptr);
            tu_free(e, dst[s][i].ptr);
        }
    release(e, (void *const[]){g.table.ptr, g.src_ptr.ptr, g.stash.ptr, NULL});
}

TU_TEST_BACKENDS(state_copy, graph_follows_table_rewrites, check_graph_rebind)

/* ---- What only the device sees ---- */

/* A bad entry of copy 1 of three (the others valid), and what the report must say. A case holds
 * its phrase as an array, not a pointer: Criterion may run it in another process, where no
 * pointer of this one is valid. */
enum { BAD_NULL_SRC, BAD_NULL_DST, BAD_MISALIGNED_DST, BAD_WRAPS, BAD_ON_TABLE, BAD_OVERLAP };

typedef struct finding_case {
    int what;
    char phrase[48];
} finding_case;

static const finding_case finding_cases[] = {
    {BAD_NULL_SRC, "source address of copy 1, 0x0"},
    {BAD_NULL_DST, "destination address of copy 1, 0x0"},
    {BAD_MISALIGNED_DST, "not 4-byte aligned"},
    {BAD_WRAPS, "runs past the end of the address space"},
    {BAD_ON_TABLE, "overlaps the table"},
    {BAD_OVERLAP, "overlaps the copy's destination"},
};

#define F_N ((size_t)3)
#define F_WORDS ((size_t)1000)

static void check_finding(finding_case c, MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    const uint64_t seed = tu_fresh_seed();
    MemraSliceMutF32 src = tu_upload_varied(e, F_N * F_WORDS, seed, 1.0f);
    MemraSliceMutF32 dst = tu_poisoned(e, F_N * F_WORDS);
    float *src_host = tu_download(e, src);
    /* The table sits in a buffer of its own, poisoned around it, so that a destination can be
     * pointed at it. */
    MemraSliceMutF32 tab_buf = tu_poisoned(e, 4 * F_N + F_WORDS);
    MemraSliceMutU64 table = {(uint64_t *)(void *)tab_buf.ptr, 2 * F_N};
    uint64_t host[2 * F_N];
    for (size_t i = 0; i < F_N; i++) {
        host[i] = tu_addr(src) + i * F_WORDS * sizeof(float);
        host[F_N + i] = tu_addr(dst) + i * F_WORDS * sizeof(float);
    }
    switch (c.what) {
    case BAD_NULL_SRC:
        host[1] = 0;
        break;
    case BAD_NULL_DST:
        host[F_N + 1] = 0;
        break;
    case BAD_MISALIGNED_DST:
        host[F_N + 1] += 2;
        break;
    case BAD_WRAPS:
        host[1] = UINT64_MAX - 15;
        break;
    case BAD_ON_TABLE:
        host[F_N + 1] = tu_addr(tab_buf) + 8 * sizeof(float);
        break;
    case BAD_OVERLAP:
        /* The source starts half-way into the destination's words. */
        host[1] = host[F_N + 1] + F_WORDS / 2 * sizeof(float);
        break;
    }
    tu_write_u64(e, host, 2 * F_N, table);
    float *tab_before = tu_download(e, tab_buf);

    TU_OK(memra_copy_batch_uniform_f32(e, tu_view_u64(table), F_N, F_WORDS));
    MemraStatus st = memra_engine_synchronize(e);
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT,
                 "a bad entry must be reported by the next synchronising call, got %s (%s)",
                 memra_status_string(st), memra_last_error_message());
    const char *msg = memra_last_error_message();
    cr_assert(strstr(msg, "memra_engine_synchronize") &&
                  strstr(msg, "memra_copy_batch_uniform_f32"),
              "the report must name the synchronising call and the copy: %s", msg);
    const char *phrase = c.phrase;
    cr_assert(strstr(msg, phrase) != NULL, "the report \"%s\" lacks \"%s\"", msg, phrase);

    /* Copies 0 and 2 were made, copy 1's destination was left poisoned, the table unchanged. */
    float *got = tu_download(e, dst);
    float *ref = tu_host_array(F_N * F_WORDS);
    tu_poison_host(ref, F_N * F_WORDS);
    memcpy(ref, src_host, F_WORDS * sizeof(float));
    memcpy(ref + 2 * F_WORDS, src_host + 2 * F_WORDS, F_WORDS * sizeof(float));
    tu_expect_bits(got, ref, F_N * F_WORDS, "destinations after a refused copy " TU_SEED_FMT, seed);
    float *tab_after = tu_download(e, tab_buf);
    tu_expect_bits(tab_after, tab_before, 4 * F_N + F_WORDS, "the table and its neighbours");

    /* Reported once, and the engine goes on: a good table copies everything. */
    TU_OK(memra_engine_synchronize(e));
    for (size_t i = 0; i < F_N; i++) {
        host[i] = tu_addr(src) + i * F_WORDS * sizeof(float);
        host[F_N + i] = tu_addr(dst) + i * F_WORDS * sizeof(float);
    }
    tu_write_u64(e, host, 2 * F_N, table);
    TU_OK(memra_copy_batch_uniform_f32(e, tu_view_u64(table), F_N, F_WORDS));
    float *again = tu_download(e, dst);
    tu_expect_bits(again, src_host, F_N * F_WORDS, "a good copy after the report " TU_SEED_FMT,
                   seed);

    TU_FREE_HOST(src_host, tab_before, got, ref, tab_after, again);
    release(e, (void *const[]){src.ptr, dst.ptr, tab_buf.ptr, NULL});
}

TU_PARAM_TEST_BACKENDS(finding_case, TU_PARAMS(finding_case, finding_cases), state_copy,
                       bad_table_entry_reported, check_finding)

/* The indirect copy's source: NULL, misaligned, wrapping, partly on the destination, and the
 * destination itself (in place: nothing to do, nothing reported). */
typedef struct indirect_finding {
    int what;
} indirect_finding;

enum { IB_NULL, IB_MISALIGNED, IB_WRAPS, IB_OVERLAP, IB_IN_PLACE };

static const char *const indirect_phrase[] = {
    [IB_NULL] = "source address 0x0 in src_ptr[0], which is NULL",
    [IB_MISALIGNED] = "not 4-byte aligned",
    [IB_WRAPS] = "runs past the end of the address space",
    [IB_OVERLAP] = "overlaps the copy's destination",
    [IB_IN_PLACE] = NULL,
};

static const indirect_finding indirect_findings[] = {
    {IB_NULL}, {IB_MISALIGNED}, {IB_WRAPS}, {IB_OVERLAP}, {IB_IN_PLACE}};

#define I_N ((size_t)777)

static void check_indirect_finding(indirect_finding c, MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    MemraSliceMutF32 dst = tu_poisoned(e, I_N + 8);
    uint64_t entry = tu_addr(dst) + 4 * sizeof(float);
    if (c.what == IB_NULL)
        entry = 0;
    else if (c.what == IB_MISALIGNED)
        entry += 1;
    else if (c.what == IB_WRAPS)
        entry = UINT64_MAX - 3;
    else if (c.what == IB_OVERLAP)
        entry += 4;
    MemraSliceMutU64 src_ptr = tu_upload_u64(e, &entry, 1);

    TU_OK(memra_copy_indirect_src_f32(e, tu_view_u64(src_ptr), dst, 4, I_N));
    MemraStatus st = memra_engine_synchronize(e);
    const char *phrase = indirect_phrase[c.what];
    if (phrase == NULL) {
        cr_assert_eq(st, MEMRA_STATUS_OK, "an in-place copy is no finding: %s",
                     memra_last_error_message());
    } else {
        cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT, "expected a report, got %s",
                     memra_status_string(st));
        const char *msg = memra_last_error_message();
        cr_assert(strstr(msg, "memra_copy_indirect_src_f32") && strstr(msg, phrase),
                  "the report \"%s\" lacks \"%s\"", msg, phrase);
        TU_OK(memra_engine_synchronize(e));
    }
    float *got = tu_download(e, dst);
    tu_expect_poison(got, I_N + 8, "dst after a copy that had nothing to do or was refused");
    free(got);
    release(e, (void *const[]){src_ptr.ptr, dst.ptr, NULL});
}

TU_PARAM_TEST_BACKENDS(indirect_finding, TU_PARAMS(indirect_finding, indirect_findings), state_copy,
                       bad_source_reported, check_indirect_finding)
