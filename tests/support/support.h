/*
 * The test-support library: what the Criterion suites, the bench (bench/) and the GPU checks
 * share, in plain C11 over the public ABI (abi/memra.h) alone. Nothing here depends on
 * Criterion, so that a program without a test runner links it too; the Criterion layer
 * (tests/testutil.h) adds the helpers that assert or skip.
 *
 * A helper whose caller breaks its contract (a sub-range past the end of its buffer) reports
 * through tu_fail(): the Criterion layer makes that fail the running test; in any other
 * program it prints the message and aborts.
 */
#ifndef MEMRA_TEST_SUPPORT_H
#define MEMRA_TEST_SUPPORT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"

/* ---- Contract failures ---- */

/* Receives the message of a broken contract; it must not return (it fails a test, exits, or
 * aborts). */
typedef void (*tu_fail_fn)(const char *message);
/* Installs `fn` (NULL restores the default: print to stderr and abort). */
void tu_set_fail_handler(tu_fail_fn fn);
void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- Engines ---- */

/* Creates an engine on `backend` (and, for CUDA, device `ordinal`) with
 * MEMRA_ENGINE_FLAG_IGNORE_ENV: the caller picks the backend, not the environment. Returns
 * memra_engine_create's status; `*out` is NULL unless it is OK. */
MemraStatus tu_engine_try(MemraBackend backend, int32_t ordinal, MemraEngine **out);

/* The entry points that take nothing but an engine and, for the two graph calls, a graph: the
 * calls a test makes through a handle, or at a moment, that the library must refuse. */
typedef enum tu_handle_call {
    TU_CALL_SYNCHRONIZE,    /* memra_engine_synchronize */
    TU_CALL_GRAPH_LAUNCH,   /* memra_graph_launch */
    TU_CALL_GRAPH_DESTROY,  /* memra_graph_destroy */
    TU_CALL_ENGINE_DESTROY, /* memra_engine_destroy, last so that a test may call them in order */
    TU_N_HANDLE_CALLS
} tu_handle_call;

/* Makes call `c` with `e` and `g` (which the engine calls do not take) and returns its status. */
MemraStatus tu_call_handles(tu_handle_call c, MemraEngine *e, MemraGraph *g);
/* The name of the entry point call `c` makes. */
const char *tu_handle_call_name(tu_handle_call c);

/* ---- The generator and seeds ---- */

/* One step of the xorshift64 stream `*x` (13, 7, 17): the next state, also stored in `*x`. */
uint64_t tu_xorshift64(uint64_t *x);

/* The seed's generator (gdn_packed_gpu.rs `varied`): xorshift64 mapped to [-spread, spread). */
void tu_varied(float *out, size_t len, uint64_t seed, float spread);

/* A seed nobody chose: from /dev/urandom, or MEMRA_TEST_SEED when set (to replay a failure). */
uint64_t tu_fresh_seed(void);

/* An independent stream seed derived from a base seed and a stream number (splitmix64 of their
 * combination), so one printed base seed replays every input of a test. */
uint64_t tu_mix_seed(uint64_t base, uint64_t stream);

/* Prints a seed (uint64_t) in the form that replays it: `MEMRA_TEST_SEED=0x... ./memra_tests`. */
#define TU_SEED_FMT "MEMRA_TEST_SEED=0x%016" PRIx64

/* The poison pattern: a signalling-NaN bit pattern no kernel produces, so that an element an
 * operation failed to write keeps it and cannot compare equal to a finite reference value. */
#define TU_POISON_BITS UINT32_C(0x7fa5a5a5)

/* Fills `out` with TU_POISON_BITS. */
void tu_poison_host(float *out, size_t len);

/* ---- Host arrays ---- */

/* free() of each of `n` host arrays (NULL ones included). */
void tu_free_host_n(void *const *arrays, size_t n);
/* free() of every host array named: TU_FREE_HOST(h->w, h->a, ...). */
#define TU_FREE_HOST(...)                                                                          \
    tu_free_host_n((void *const[]){__VA_ARGS__},                                                   \
                   sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* ---- Views ---- */

/* Read-only view of a buffer / sub-range of a buffer (a range past the end is a tu_fail). */
MemraSliceF32 tu_view(MemraSliceMutF32 s);
MemraSliceF32 tu_sub(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceMutF32 tu_sub_mut(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceU64 tu_view_u64(MemraSliceMutU64 s);
MemraSliceU64 tu_sub_u64(MemraSliceMutU64 s, size_t start, size_t len);
MemraSliceU32 tu_view_u32(MemraSliceMutU32 s);

/* The address of a buffer as a pointer-table entry. */
uint64_t tu_addr(MemraSliceMutF32 s);

/* ---- Comparisons ---- */

/* Number of words whose bits differ (memcmp semantics per element). */
size_t tu_bit_diffs(const float *a, const float *b, size_t len);

/* Index of the first word whose bits differ, or `len` when none does. */
size_t tu_first_diff(const float *a, const float *b, size_t len);

/* True when every element is finite. */
bool tu_all_finite(const float *a, size_t len);

/* ||a - b|| / ||b|| in float64. */
double tu_rel_err(const float *a, const double *ref, size_t len);
double tu_rel_err_f32(const float *a, const float *ref, size_t len);

/* FNV-1a (64-bit) over the bytes of `len` floats; 0 for an absent tensor (a == NULL). Two runs
 * whose fingerprints agree computed the same bits. */
uint64_t tu_fnv1a(const float *a, size_t len);

/* ---- Checks that describe their first failure ---- */

/* One output of a call checked against a reference: `got` must equal `want` bit for bit when
 * the call was given the output, and must still hold TU_POISON_BITS everywhere (`want` unused)
 * when it was not. */
typedef struct tu_check_item {
    const char *what; /* the output's name */
    const float *want, *got;
    size_t len; /* words */
    bool given;
} tu_check_item;

/* Checks the `n` items in order. True when all pass, with the words compared added to
 * `*compared` (may be NULL). Otherwise false, with `why` naming the first failing item after
 * `who`, how many of its words differ, and the first of them: its index and both values as
 * hex bits; `against` names the reference (the 1.0 program, say). The suites assert on the
 * result, and the bench runs the same check before it times a call. */
bool tu_check_items(const tu_check_item *items, size_t n, const char *who, const char *against,
                    char *why, size_t why_len, size_t *compared);

/* ---- Failures recorded where no assertion may run (worker threads, standalone drivers) ---- */

/* The first failure of a scenario, with its message; later ones are dropped. */
typedef struct tu_failure {
    bool failed;
    char text[768];
} tu_failure;

/* Records a failure in `f` unless one is recorded already. */
void tu_record(tu_failure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Messages ---- */

/* Whether `msg` contains `word` as a whole identifier, not as part of a longer one (so that
 * "memra_gdn_verify" is not found inside "memra_gdn_verify_x", nor "3" inside "13"). */
bool tu_has_word(const char *msg, const char *word);

/* Whether `msg` names one of the '|'-separated alternatives in `alts` (tu_has_word). */
bool tu_names_any(const char *msg, const char *alts);

/* ---- Model shapes ---- */

/* The two model shapes of the tests and the bench (docs/layouts.md): "small" (2 key heads, 4
 * value heads) and "ornith" (16 and 32), d_state 128 and d_conv 4 both. */
#define TU_SMALL_NUM_K ((size_t)2)
#define TU_SMALL_NUM_V ((size_t)4)
#define TU_ORNITH_NUM_K ((size_t)16)
#define TU_ORNITH_NUM_V ((size_t)32)
#define TU_D_CONV ((size_t)4)

/* The derived sizes as constant expressions (for array lengths): key and value dims, conv
 * channels, one sequence's conv ring [conv_dim, d_conv - 1] and state [num_v, 128, 128]. */
#define TU_KEY_DIM(nk) ((size_t)MEMRA_D_STATE * (nk))
#define TU_VALUE_DIM(nv) ((size_t)MEMRA_D_STATE * (nv))
#define TU_CONV_DIM(nk, nv) (2 * TU_KEY_DIM(nk) + TU_VALUE_DIM(nv))
#define TU_RING_WORDS(nk, nv, dc) (TU_CONV_DIM(nk, nv) * ((dc)-1))
#define TU_STATE_WORDS(nv) ((size_t)MEMRA_D_STATE * MEMRA_D_STATE * (nv))

/* The small shape's sizes, for the arrays of the suites that run it at a fixed size. */
#define TU_SMALL_CONV_DIM TU_CONV_DIM(TU_SMALL_NUM_K, TU_SMALL_NUM_V)
#define TU_SMALL_VALUE_DIM TU_VALUE_DIM(TU_SMALL_NUM_V)
#define TU_SMALL_RING TU_RING_WORDS(TU_SMALL_NUM_K, TU_SMALL_NUM_V, TU_D_CONV)
#define TU_SMALL_STATE TU_STATE_WORDS(TU_SMALL_NUM_V)

typedef struct tu_shape_def {
    const char *name;
    size_t num_k, num_v;
} tu_shape_def;

#define TU_N_SHAPES 2
extern const tu_shape_def tu_shapes[TU_N_SHAPES];

/* A model shape (d_state = 128) and the sizes derived from it. */
typedef struct tu_gdn_shape {
    size_t num_k, num_v, d_conv;
    size_t key_dim, value_dim, conv_dim, pad;
    /* One sequence's conv ring [conv_dim, pad] and recurrent state [num_v, 128, 128]. */
    size_t ring_words, state_words;
} tu_gdn_shape;

tu_gdn_shape tu_gdn_shape_make(size_t num_k, size_t num_v, size_t d_conv);

/* The seed's eps and scale (1 / sqrt(128)). */
#define TU_GDN_EPS 1e-6f
#define TU_GDN_SCALE 0.08838834764831845f

/* memra_verify_args_init, then `mode`, `order`, the sizes of `b` sequences of `t` rows of
 * shape `sh`, TU_GDN_EPS and TU_GDN_SCALE; buffers are the caller's. Returns the init's status. */
MemraStatus tu_verify_args_sizes(MemraVerifyArgs *v, const tu_gdn_shape *sh, size_t t, size_t b,
                                 MemraVerifyMode mode, MemraHeadOrder order);

/* ---- Where the state sits after n rows ---- */

/* The public rule of docs/layouts.md ("Parity", "Snapshots") and docs/verify-1.1.md
 * ("Device-side rollback"), restated here once for the suites and the bench, which may not use
 * the library's own copy: the table entry (1: canonical, 2: alternate) holding the state after
 * `rows` chained rows, that is the alternate one after an odd count. A packed scan or a
 * SNAPSHOTS or FINAL_ONLY verify of `rows` rows leaves its final state there too. */
size_t tu_state_slot(size_t rows);

/* Snapshot r (0 <= r < t - 1) of sequence b among the [b, t - 1] snapshots of t rows. */
size_t tu_snap_index(size_t b, size_t t, size_t r);

/* Sequence b's ring or state (`words` each) after n of t rows (1 <= n <= t), from a run's
 * results: entry b of `finals` ([b, words]) for n == t, else its snapshot n - 1 of `snaps`. */
const float *tu_state_after(const float *finals, const float *snaps, size_t words, size_t b,
                            size_t t, size_t n);

/* ---- The 1.0 programs ---- */

/* The operations of the 1.0 packed program: memra_ssm_conv1d_fused_decode_tloop with conv
 * snapshots, memra_gdn_prep_decode_b over the b * t rows, memra_gdn_scan_s128_tsnap with state
 * snapshots, and the same scan without them. */
enum tu_op { TU_OP_CONV, TU_OP_PREP, TU_OP_SCAN, TU_OP_SCAN_NOSNAP, TU_OP_COUNT };
/* "packed conv tloop", "packed prep", "packed scan tsnap", "packed scan tsnap (no snapshots)". */
extern const char *const tu_op_name[TU_OP_COUNT];

/* One operation of the packed program over the buffers a tiled SNAPSHOTS verify names in `v`
 * (qkv, table, w, beta_raw, alpha, dt_bias, a in; conv_outs, q_l2, k_l2, v_g, beta, g_log, o,
 * snap_conv and snap_ssm out, each of them given); `v`'s mode and head order are not read. */
MemraStatus tu_packed_op(MemraEngine *e, const MemraVerifyArgs *v, int op);

/* conv, prep and scan (with snapshots) in order; on a failure `*failed` (when not NULL) is the
 * tu_op_name of the operation that returned it. */
MemraStatus tu_packed_program(MemraEngine *e, const MemraVerifyArgs *v, const char **failed);

/* The 1.0 per-row program over b sequences: row r of all b sequences through the per-row conv,
 * prep and scan (b_n = b each), the state ping-ponging between canonical and alternate. */
typedef struct tu_rows {
    size_t num_k, num_v, d_conv, t, b;
    float eps, scale;
    /* Inputs row-major [t, b, X], so that row r of all b sequences is contiguous. */
    MemraSliceF32 qkv, beta_raw, alpha;
    MemraSliceF32 w, dt_bias, a;
    /* conv_outs [t, b, conv_dim] and o [t, b, value_dim] for every row; the prep outputs are
     * scratch of one row ([b, X]), reused by every row. */
    MemraSliceMutF32 conv_outs, o;
    MemraSliceMutF32 q, k, v, beta, g_log;
    /* [rings | canonical | alternate | canonical], b entries each: even rows read entries
     * [b, 2b) and write [2b, 3b), odd rows read [2b, 3b) and write [3b, 4b). */
    MemraSliceU64 table;
} tu_rows;

/* Row r; on a failure `*failed` (when not NULL) is "per-row conv", "per-row prep" or "per-row
 * scan". */
MemraStatus tu_rows_row(MemraEngine *e, const tu_rows *p, size_t r, const char **failed);

#endif /* MEMRA_TEST_SUPPORT_H */
