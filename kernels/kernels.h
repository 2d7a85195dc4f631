/*
 * The kernel layer's interface: one argument struct per operation, shared by the CPU reference
 * kernels (kernels/cpu/<op>.c) and the CUDA kernels (kernels/cuda/<op>.cu).
 *
 * Every struct describes already-validated work (src/validate.c guarantees the shapes, lengths,
 * alignment and overlap rules), so kernels never check arguments. The per-row and the packed
 * forms of an operation are the same struct: a per-row call is a packed call with t == 1, which
 * is what makes the two bit-identical by construction.
 *
 * Pointer tables are read by the kernels themselves, when the work executes: a captured CUDA
 * graph or a recorded CPU graph re-reads them at every replay.
 *
 * This header is plain C and also compiles as C++ (nvcc includes it); it includes no CUDA
 * header. The CUDA entry points return a cudaError_t as int so that host C code can map it.
 */
#ifndef MEMRA_KERNELS_H
#define MEMRA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The only supported head dimension (d_state = 128, docs/layouts.md) and the warp width the
 * arithmetic contract's reductions are written for. */
#define MEMRA__S 128
#define MEMRA__LANES 32
#define MEMRA__D_CONV_MAX 8
/* Entries per sequence of a packed table, and the verify modes: the values of the public
 * MEMRA_TABLE_WIDTH and MemraVerifyMode (src/validate.c asserts that they agree). */
#define MEMRA__TABLE_WIDTH 3
#define MEMRA__MODE_SNAPSHOTS 0
#define MEMRA__MODE_FINAL_ONLY 1
#define MEMRA__MODE_JOURNAL 2

/*
 * Causal depthwise conv + SiLU over t rows of b_n sequences.
 *   qkv      [b_n, t, conv_dim]
 *   rings    b_n ring addresses at rings[b * ring_stride] (1 for per-row conv_ptrs, 3 for a
 *            packed table whose entry 0 is the ring); each ring is [conv_dim, d_conv - 1] and
 *            is rolled in place through all t rows
 *   ring     the ring itself when rings is NULL (the single-sequence op: b_n == 1, the host
 *            passes the buffer rather than a table entry, so nothing is read at execution)
 *   w        [conv_dim, d_conv]
 *   conv_out [b_n, t, conv_dim]
 *   snap     NULL, or [b_n, t - 1, conv_dim, d_conv - 1]: the ring after row r, r < t - 1
 */
typedef struct memra__conv_args {
    const float *qkv;
    const uint64_t *rings;
    size_t ring_stride;
    float *ring;
    const float *w;
    float *conv_out;
    float *snap;
    size_t conv_dim;
    size_t d_conv;
    size_t t;
    size_t b_n;
} memra__conv_args;

/*
 * GDN prep over `rows` independent rows (b_n sequences x t rows, flattened).
 *   conv_out [rows, conv_dim] (q | k | v channels); beta_raw, alpha [rows, num_v];
 *   dt_bias, a [num_v]; q_l2, k_l2, v_g [rows, num_v, S]; beta, g_log [rows, num_v].
 *   key_dim == S * num_k, conv_dim == 2 * key_dim + S * num_v; value head vh reads key head
 *   vh % num_k.
 */
typedef struct memra__prep_args {
    const float *conv_out;
    const float *beta_raw;
    const float *alpha;
    const float *dt_bias;
    const float *a;
    float *q_l2;
    float *k_l2;
    float *v_g;
    float *beta;
    float *g_log;
    size_t num_v;
    size_t num_k;
    size_t key_dim;
    size_t conv_dim;
    size_t rows;
    float eps;
    /* Value head vh reads key head vh / (num_v / num_k) when set, vh % num_k otherwise. */
    int grouped;
} memra__prep_args;

/*
 * GDN recurrent scan, t rows of b_n sequences, state kept across the rows.
 *   q, k, v  [b_n, t, num_v, S]; g_log, beta [b_n, t, num_v]; o [b_n, t, num_v, S]
 *   states   sequence b reads its state from (float *)in_table[b * in_stride] before row 0 and
 *            writes the state after row t - 1 to (float *)out_table[b * out_stride]; both are
 *            [num_v, S, S] transposed (head h, column c, row i at (h*S + c)*S + i) and may be
 *            the same buffer.
 *            Per-row op: in_ptrs / out_ptrs with stride 1 and t == 1.
 *            Packed op: table + 1 (canonical) in, table + (t odd ? 2 : 1) out, stride 3.
 *            Single-sequence op: both tables NULL, b_n == 1, and the states are state_in and
 *            state_out themselves.
 *   snap     NULL, or [b_n, t - 1, num_v, S, S]: the state after row r, r < t - 1
 *   delta    CPU only: NULL, or [b_n, t, num_v, S]: each column's rounded delta of each row,
 *            what a journal records (the CUDA verify records it inside its own kernel)
 */
typedef struct memra__scan_args {
    const float *q;
    const float *k;
    const float *v;
    const float *g_log;
    const float *beta;
    const uint64_t *in_table;
    size_t in_stride;
    const uint64_t *out_table;
    size_t out_stride;
    const float *state_in;
    float *state_out;
    float *o;
    float *snap;
    float *delta;
    size_t num_v;
    size_t t;
    size_t b_n;
    float scale;
    /* The heads of a q or k row: num_v for the 1.0 ops (value head h reads q and k head h);
     * num_k for the CUDA verify's SNAPSHOTS scan, which reads its workspace's rows of one head
     * per key head (value head h reads key head h / (num_v / num_k) when `grouped`, else
     * h % num_k). */
    size_t qk_heads;
    int grouped;
} memra__scan_args;

/*
 * Device data the library cannot check at enqueue (accepted counts, journal headers) is checked
 * by the kernels themselves. A kernel that finds a bad value leaves that sequence untouched and
 * records the first such finding here; the engine reports it at its next synchronising call.
 * `set` is 0 while nothing was recorded; the first writer sets it to 1 (atomically on CUDA).
 */
typedef struct memra__dev_error {
    uint32_t set;
    uint32_t op;    /* the operation, from its arguments' `op` (memra__op, src/ops.def) */
    uint32_t seq;   /* the sequence index */
    uint32_t value; /* the count found */
    uint32_t limit; /* the largest legal value */
    uint32_t what;  /* memra__error_kind */
} memra__dev_error;

typedef enum memra__error_kind {
    /* accepted[b] is larger than the rows the journal holds (value: the count, limit: rows) */
    MEMRA__ERR_ACCEPTED_OVER_JOURNAL = 1,
    /* rollback: accepted[b] is 0 or larger than t */
    MEMRA__ERR_ROLLBACK_RANGE = 2,
    /* The journal's header (value: the word found, limit: the word expected): not a journal of
     * this library, another format, a journal written for another shape, head order or
     * capacity, a row count above its capacity, a slot word that is neither 0 nor 1. */
    MEMRA__ERR_JOURNAL_FOREIGN = 3,
    MEMRA__ERR_JOURNAL_FORMAT = 4,
    MEMRA__ERR_JOURNAL_D_STATE = 5,
    MEMRA__ERR_JOURNAL_NUM_K = 6,
    MEMRA__ERR_JOURNAL_NUM_V = 7,
    MEMRA__ERR_JOURNAL_D_CONV = 8,
    MEMRA__ERR_JOURNAL_HEAD_ORDER = 9,
    MEMRA__ERR_JOURNAL_T_MAX = 10,
    MEMRA__ERR_JOURNAL_ROWS = 11,
    MEMRA__ERR_JOURNAL_SLOT = 12,
    /* The verify's t is above the capacity the journal records (value: t, limit: capacity). */
    MEMRA__ERR_JOURNAL_CAPACITY = 13,
    /* The journal's table entry is NULL or not 4-byte aligned (value: its low 32 bits). */
    MEMRA__ERR_JOURNAL_ADDRESS = 14,
} memra__error_kind;

/*
 * Journal layout (f32 words of one sequence's journal buffer; every part 16-byte aligned).
 *
 * A header of MEMRA__JOURNAL_HEADER words (u32 stored in f32 words, indices MEMRA__JH_*): a magic
 * number and format, the shape it was written for (d_state, num_k, num_v, d_conv, head order),
 * its capacity t_max, the rows it holds and which of two slots they are in. A header of ten zero
 * words is an empty journal, so a zero-filled buffer is one.
 *
 * Then rows: row r of slot h (0 or 1) at MEMRA__JOURNAL_HEADER + (2r + h) * ROW, ROW =
 * MEMRA__JOURNAL_ROW. A verify folds from the slot the header names and writes its new rows to
 * the other one, so that no block of it overwrites what another block may still read. A row
 * holds what a fold needs without recomputing anything: the raw qkv row (for the conv ring),
 * the L2-normalised k of every key head (in the scan's transposed order, 32 * (i % 4) + i / 4),
 * the rounded delta of every (value head, column), and gd = expf(g_log) of every value head.
 */
#define MEMRA__ROUND4(n) (((n) + 3) / 4 * 4)
#define MEMRA__JOURNAL_HEADER 16
#define MEMRA__JOURNAL_ROW(conv_dim, num_v, num_k)                                                 \
    MEMRA__ROUND4((conv_dim) + ((num_k) + (num_v)) * (size_t)MEMRA__S + (num_v))
/* Where a row's parts start, in words from the row's start (the raw qkv row at 0): k of key head
 * 0, the delta of (value head 0, column 0), gd of value head 0. Every reader and writer of a
 * journal, on both backends, takes the offsets from here. */
#define MEMRA__JOURNAL_K(conv_dim) (conv_dim)
#define MEMRA__JOURNAL_DELTA(conv_dim, num_k) ((conv_dim) + (num_k) * (size_t)MEMRA__S)
#define MEMRA__JOURNAL_GD(conv_dim, num_v, num_k)                                                  \
    (MEMRA__JOURNAL_DELTA(conv_dim, num_k) + (num_v) * (size_t)MEMRA__S)
#define MEMRA__JOURNAL_MAGIC 0x4a41524du /* "MRAJ" */
#define MEMRA__JOURNAL_FORMAT 2u
enum {
    MEMRA__JH_MAGIC,
    MEMRA__JH_FORMAT,
    MEMRA__JH_D_STATE,
    MEMRA__JH_NUM_K,
    MEMRA__JH_NUM_V,
    MEMRA__JH_D_CONV,
    MEMRA__JH_GROUPED,
    MEMRA__JH_T_MAX,
    MEMRA__JH_ROWS,
    MEMRA__JH_HALF,
    MEMRA__JH_WORDS
};

#if defined(__CUDACC__)
#define MEMRA__HD __host__ __device__
#else
#define MEMRA__HD
#endif

/* Grouped-query attention: the q and k head that value head h reads among qk_heads of them
 * (num_k for the normalisation and the verify's rows, num_v where q and k are already per value
 * head, memra__scan_args::qk_heads): h / (num_v / qk_heads) in the grouped order, h % qk_heads in
 * the tiled one. Both preps and both backends' 1.0 scans take it from here. */
static inline MEMRA__HD size_t memra__qk_head(size_t h, size_t num_v, size_t qk_heads, int grouped)
{
    return grouped ? h / (num_v / qk_heads) : h % qk_heads;
}

/*
 * Where a sequence's state sits after n of t chained rows: the rule of docs/layouts.md
 * ("Parity", "Snapshots", "Device-side rollback"), decided here once for the API and both
 * backends. Row r of the per-row program reads the canonical state (table entry 1) when r is
 * even and the alternate one (entry 2) when r is odd, and writes the other; so after t rows the
 * final state is in the alternate buffer when t is odd and in the canonical one when t is even.
 * The packed scan and the 1.1 verify (SNAPSHOTS and FINAL_ONLY) write their final state there.
 */
static inline MEMRA__HD size_t memra__final_slot(size_t t)
{
    return t % 2 == 1 ? 2 : 1;
}

/* Snapshot r (0 <= r < t - 1) of sequence b among the [b_n, t - 1] snapshots of t rows: the
 * ring or the state after row r. The state after the last row is the final state instead. */
static inline MEMRA__HD size_t memra__snap_index(size_t b, size_t t, size_t r)
{
    return b * (t - 1) + r;
}

/* The state and the ring after n of t rows (1 <= n <= t) of sequence b, once the verify ran:
 * for n < t, snapshot `snap` holds both and `slot` is 0; for n == t, the state is in table
 * entry `slot` (memra__final_slot) and the ring in entry 0. A rollback to n rows copies from
 * there into the canonical state and the ring. */
typedef struct memra__after {
    size_t slot; /* the table entry holding the state, or 0: snapshot `snap` */
    size_t snap;
} memra__after;

static inline MEMRA__HD memra__after memra__state_after(size_t b, size_t t, size_t n)
{
    memra__after w;
    w.slot = n == t ? memra__final_slot(t) : 0;
    w.snap = n < t ? memra__snap_index(b, t, n - 1) : 0;
    return w;
}

/* What a verify or commit makes of a sequence's journal header and accepted count. */
typedef struct memra__journal_verdict {
    uint32_t what; /* 0: usable; else the memra__error_kind */
    uint32_t value, limit;
    uint32_t n;    /* rows to fold */
    uint32_t half; /* the slot they are in */
    uint32_t cap;  /* the capacity the rewritten header records */
} memra__journal_verdict;

/*
 * Checks a journal header against the operation: the shape, the head order, the capacity and
 * the count. `cap` is the capacity the host declared (MemraVerifyArgs::journal_t_max), or 0 when
 * it declared none: then the capacity is the larger of the verify's t and the capacity the
 * header records (a journal the library wrote records the capacity of the verify that wrote
 * it). `t` is the verify's new rows (0 for a commit). Both backends run this same function.
 */
static inline MEMRA__HD memra__journal_verdict memra__journal_check(const uint32_t *hd,
                                                                    uint32_t accepted, size_t num_k,
                                                                    size_t num_v, size_t d_conv,
                                                                    int grouped, size_t cap,
                                                                    size_t t)
{
    memra__journal_verdict v = {0, 0, 0, 0, 0, 0};
    uint32_t any = 0;
    for (int i = 0; i < MEMRA__JH_WORDS; i++)
        any |= hd[i];
    const uint32_t want[MEMRA__JH_ROWS] = {
        MEMRA__JOURNAL_MAGIC, MEMRA__JOURNAL_FORMAT, MEMRA__S,          (uint32_t)num_k,
        (uint32_t)num_v,      (uint32_t)d_conv,      (uint32_t)grouped, (uint32_t)cap};
    uint32_t held = 0, have_cap = 0;
    if (any != 0) {
        for (int i = 0; i < MEMRA__JH_ROWS; i++) {
            if (i == MEMRA__JH_T_MAX && cap == 0)
                continue;
            if (hd[i] != want[i]) {
                v.what = (uint32_t)MEMRA__ERR_JOURNAL_FOREIGN + (uint32_t)i;
                v.value = hd[i];
                v.limit = want[i];
                return v;
            }
        }
        have_cap = hd[MEMRA__JH_T_MAX];
        held = hd[MEMRA__JH_ROWS];
        if (held > have_cap) {
            v.what = MEMRA__ERR_JOURNAL_ROWS;
            v.value = held;
            v.limit = have_cap;
            return v;
        }
        if (hd[MEMRA__JH_HALF] > 1) {
            v.what = MEMRA__ERR_JOURNAL_SLOT;
            v.value = hd[MEMRA__JH_HALF];
            v.limit = 1;
            return v;
        }
        v.half = hd[MEMRA__JH_HALF];
    }
    v.cap = cap != 0 ? (uint32_t)cap : (have_cap > t ? have_cap : (uint32_t)t);
    if (t > v.cap) {
        v.what = MEMRA__ERR_JOURNAL_CAPACITY;
        v.value = (uint32_t)t;
        v.limit = v.cap;
        return v;
    }
    if (accepted > held) {
        v.what = MEMRA__ERR_ACCEPTED_OVER_JOURNAL;
        v.value = accepted;
        v.limit = held;
        return v;
    }
    v.n = accepted;
    return v;
}

/* Whether a journal address (a sequence's table entry 2) is refused before anything is read:
 * NULL, or not 4-byte aligned. Both backends ask here, so that they refuse the same addresses.
 * A macro, not a function: the CUDA kernels then compile to the same machine code as with the
 * test written out, which an inline function did not (nvcc 13.0 scheduled the journal kernels
 * differently). */
#define MEMRA__JOURNAL_ADDRESS_BAD(addr) ((addr) == 0 || (addr) % 4 != 0)

/*
 * The verdict on the journal whose address is a sequence's table entry 2: a NULL or misaligned
 * address is refused before anything is read (the verdict's value is the address's low word);
 * otherwise *jr is set to the journal and its header checked (memra__journal_check). The CUDA
 * prologue and the journal scan that folds before its wait both take their verdict from here, so
 * that the two agree by construction on the same words.
 */
static inline MEMRA__HD memra__journal_verdict memra__journal_at(uint64_t addr, float **jr,
                                                                 uint32_t accepted, size_t num_k,
                                                                 size_t num_v, size_t d_conv,
                                                                 int grouped, size_t cap, size_t t)
{
    if (MEMRA__JOURNAL_ADDRESS_BAD(addr)) {
        const memra__journal_verdict v = {MEMRA__ERR_JOURNAL_ADDRESS, (uint32_t)addr, 0, 0, 0, 0};
        return v;
    }
    *jr = (float *)(uintptr_t)addr;
    return memra__journal_check((const uint32_t *)*jr, accepted, num_k, num_v, d_conv, grouped, cap,
                                t);
}

/*
 * Writes a journal's header: the operation's shape and head order, the capacity `cap` to record,
 * and the `rows` new rows, which the verify wrote into the slot other than `old_half`, the one
 * the header it replaces named. With no new rows the slot is 0, so that a journal the verify
 * leaves empty has one header whichever slot it held before. Both backends write it with this
 * function, once nothing can still read the header it replaces.
 */
static inline MEMRA__HD void memra__journal_header_put(uint32_t *hd, size_t num_k, size_t num_v,
                                                       size_t d_conv, int grouped, uint32_t cap,
                                                       uint32_t rows, uint32_t old_half)
{
    hd[MEMRA__JH_MAGIC] = MEMRA__JOURNAL_MAGIC;
    hd[MEMRA__JH_FORMAT] = MEMRA__JOURNAL_FORMAT;
    hd[MEMRA__JH_D_STATE] = MEMRA__S;
    hd[MEMRA__JH_NUM_K] = (uint32_t)num_k;
    hd[MEMRA__JH_NUM_V] = (uint32_t)num_v;
    hd[MEMRA__JH_D_CONV] = (uint32_t)d_conv;
    hd[MEMRA__JH_GROUPED] = (uint32_t)grouped;
    hd[MEMRA__JH_T_MAX] = cap;
    hd[MEMRA__JH_ROWS] = rows;
    hd[MEMRA__JH_HALF] = rows > 0 ? 1u - old_half : 0u;
}

/*
 * The whole verify (conv + prep + scan) of b_n sequences x t rows, or a journal commit (t == 0,
 * JOURNAL mode: fold only). Mode values are MemraVerifyMode's.
 *   qkv [b_n, t, conv_dim]; table [b_n, 3]; w [conv_dim, d_conv]; beta_raw, alpha
 *   [b_n, t, num_v]; dt_bias, a [num_v]; accepted [b_n] (JOURNAL only).
 *   o [b_n, t, num_v, S]; optional (NULL: not written) conv_out [b_n, t, conv_dim], q_l2, k_l2,
 *   v_g [b_n, t, num_v, S], beta, g_log [b_n, t, num_v]; snap_conv [b_n, t-1, conv_dim, pad]
 *   and snap_ssm [b_n, t-1, num_v, S, S] in SNAPSHOTS mode (NULL when t == 1 or other modes).
 *   grouped: value head vh reads key head vh / (num_v / num_k) instead of vh % num_k.
 *   err: where a bad accepted count or journal is recorded.
 */
typedef struct memra__verify_args {
    const float *qkv;
    const uint64_t *table;
    const float *w;
    const float *beta_raw;
    const float *alpha;
    const float *dt_bias;
    const float *a;
    const uint32_t *accepted;
    float *o;
    float *conv_out;
    float *q_l2;
    float *k_l2;
    float *v_g;
    float *beta;
    float *g_log;
    float *snap_conv;
    float *snap_ssm;
    size_t num_v;
    size_t num_k;
    size_t key_dim;
    size_t conv_dim;
    size_t d_conv;
    size_t t;
    size_t b_n;
    uint32_t mode;
    uint32_t op;
    int grouped;
    float eps;
    float scale;
    memra__dev_error *err;
    /* CUDA only: a zero-initialised device word that settles which finding is recorded. */
    uint32_t *err_claim;
    /* The journals' declared capacity (MemraVerifyArgs::journal_t_max), 0 when not declared. */
    size_t cap;
    /* CUDA: memra__verify_workspace_words() floats, 16-byte aligned (the host's or the
     * engine's). CPU: the backend's own memra__cpu_verify_scratch_words() floats. */
    float *workspace;
} memra__verify_args;

/*
 * The CUDA verify's workspace (floats), for b_n sequences x t rows (t = 0: a commit): the
 * prologue's normalised q and k per key head ([rows, num_k, S] each, transposed), the v channels
 * ([rows, num_v, S]), g_log and beta ([rows, num_v] each, rounded up to 4), and the verdict on
 * each sequence's journal with a count of its scan blocks that have passed their wait (4 words
 * per sequence). 0 when the size overflows.
 */
static inline size_t memra__verify_workspace_words(size_t b_n, size_t t, size_t num_k, size_t num_v)
{
    size_t rows, qk, v, gates, seqw, total;
    if (__builtin_mul_overflow(b_n, t, &rows) ||
        __builtin_mul_overflow(rows, num_k * (size_t)MEMRA__S, &qk) ||
        __builtin_mul_overflow(rows, num_v * (size_t)MEMRA__S, &v) ||
        __builtin_mul_overflow(rows, num_v, &gates) || gates > SIZE_MAX / 4 || qk > SIZE_MAX / 4 ||
        __builtin_add_overflow(2 * qk, v, &total) ||
        __builtin_add_overflow(total, 2 * MEMRA__ROUND4(gates), &total) ||
        __builtin_mul_overflow(b_n, (size_t)4, &seqw) ||
        __builtin_add_overflow(total, seqw, &total))
        return 0;
    return total;
}

/*
 * Device-side rollback after a SNAPSHOTS verify of t rows: for n = accepted[b] in 1..t the
 * canonical state becomes snapshot n - 1 (or the final state when n == t, which sits in the
 * alternate buffer when t is odd) and the ring becomes conv snapshot n - 1 (or stays, n == t).
 */
typedef struct memra__rollback_args {
    const uint64_t *table;
    const float *snap_conv;
    const float *snap_ssm;
    const uint32_t *accepted;
    size_t num_v;
    size_t conv_dim;
    size_t d_conv;
    size_t t;
    size_t b_n;
    uint32_t op;
    memra__dev_error *err;
    uint32_t *err_claim;
} memra__rollback_args;

/* CPU reference kernels (kernels/cpu/): synchronous, cannot fail. */
void memra__cpu_ssm_conv1d(const memra__conv_args *args);
void memra__cpu_gdn_prep(const memra__prep_args *args);
void memra__cpu_gdn_scan(const memra__scan_args *args);
/* The 1.1 verify needs args->workspace of memra__cpu_verify_scratch_words(args) floats. */
size_t memra__cpu_verify_scratch_words(const memra__verify_args *args);
void memra__cpu_gdn_verify(const memra__verify_args *args);
void memra__cpu_gdn_rollback(const memra__rollback_args *args);

/* CUDA kernels (kernels/cuda/): enqueue on `stream` (a cudaStream_t) and return the
 * cudaError_t of the launch as an int (0 == cudaSuccess). */
int memra__cuda_ssm_conv1d(const memra__conv_args *args, void *stream);
int memra__cuda_gdn_prep(const memra__prep_args *args, void *stream);
int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream);
int memra__cuda_gdn_verify(const memra__verify_args *args, void *stream);

int memra__cuda_gdn_rollback(const memra__rollback_args *args, void *stream);

/*
 * The 1.2 state copies: f32 copies whose addresses are read from a device table when the copy
 * executes, so that a captured graph follows the table like every other operation.
 *   Batched (memra_copy_batch_uniform_f32): `items` copies of `words` floats each; copy i reads
 *   from (float *)table[i] and writes to (float *)table[items + i]; dst is NULL.
 *   Indirect source (memra_copy_indirect_src_f32): one copy (items == 1) from
 *   (float *)table[0] to dst, a host-checked buffer.
 * The host cannot see the addresses in the table, so each copy checks its own with
 * memra__copy_check() first: a refused copy writes nothing and is recorded in `err`.
 */
typedef struct memra__copy_args {
    const uint64_t *table;
    size_t items;
    size_t words;
    float *dst;
    uint32_t op;
    memra__dev_error *err;
    /* CUDA only: the zero-initialised device word that settles which finding is recorded. */
    uint32_t *err_claim;
} memra__copy_args;

/* What memra__copy_check() finds wrong with one copy (memra__dev_error.what, numbered on from
 * memra__error_kind), and the flag that says the finding is about the copy's destination
 * rather than its source. */
enum {
    MEMRA__ERR_COPY_NULL = 3,
    MEMRA__ERR_COPY_MISALIGNED = 4,
    MEMRA__ERR_COPY_WRAPS = 5,
    MEMRA__ERR_COPY_ON_TABLE = 6,
    MEMRA__ERR_COPY_OVERLAP = 7,
};
#define MEMRA__ERR_COPY_DST 0x100u

#ifdef __CUDACC__
#define MEMRA__HOST_DEVICE __host__ __device__
#else
#define MEMRA__HOST_DEVICE
#endif

/*
 * The checks of one copy of `bytes` bytes from `src` to `dst`, shared by both backends so that
 * they refuse exactly the same tables: 0 when the copy may run, otherwise a
 * MEMRA__ERR_COPY_* kind (with MEMRA__ERR_COPY_DST when the destination is at fault). A NULL,
 * misaligned or wrapping address is refused before it is dereferenced; so is a destination
 * that overlaps the table [tab_lo, tab_hi) (tab_lo == tab_hi: the host has checked it), since
 * the other copies are still reading their addresses there, and a destination that overlaps
 * its source partially, whose result would depend on the order of the copy. The very same
 * address for both is not an overlap: that copy has nothing to do.
 */
static inline MEMRA__HOST_DEVICE uint32_t memra__copy_check(uint64_t src, uint64_t dst,
                                                            uint64_t bytes, uint64_t tab_lo,
                                                            uint64_t tab_hi)
{
    const uint64_t ends[2] = {src, dst};
    for (uint32_t side = 0; side < 2; side++) {
        const uint64_t a = ends[side];
        const uint32_t flag = side == 1 ? MEMRA__ERR_COPY_DST : 0u;
        if (a == 0)
            return MEMRA__ERR_COPY_NULL | flag;
        if (a % sizeof(float) != 0)
            return MEMRA__ERR_COPY_MISALIGNED | flag;
        if (a > UINT64_MAX - bytes)
            return MEMRA__ERR_COPY_WRAPS | flag;
    }
    if (dst < tab_hi && tab_lo < dst + bytes)
        return MEMRA__ERR_COPY_ON_TABLE | MEMRA__ERR_COPY_DST;
    if (src != dst && src < dst + bytes && dst < src + bytes)
        return MEMRA__ERR_COPY_OVERLAP;
    return 0;
}

void memra__cpu_state_copy(const memra__copy_args *args);
int memra__cuda_state_copy(const memra__copy_args *args, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MEMRA_KERNELS_H */
