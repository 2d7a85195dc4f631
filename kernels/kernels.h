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
    size_t num_v;
    size_t t;
    size_t b_n;
    float scale;
} memra__scan_args;

/*
 * Device data the library cannot check at enqueue (accepted counts, journal headers) is checked
 * by the kernels themselves. A kernel that finds a bad value leaves that sequence untouched and
 * records the first such finding here; the engine reports it at its next synchronising call.
 * `set` is 0 while nothing was recorded; the first writer sets it to 1 (atomically on CUDA).
 */
typedef struct memra__dev_error {
    uint32_t set;
    uint32_t op;    /* memra__op_id of the operation */
    uint32_t seq;   /* the sequence index */
    uint32_t value; /* the count found */
    uint32_t limit; /* the largest legal value */
    uint32_t what;  /* memra__error_kind */
} memra__dev_error;

typedef enum memra__op_id {
    MEMRA__OP_VERIFY = 1,
    MEMRA__OP_COMMIT = 2,
    MEMRA__OP_ROLLBACK = 3
} memra__op_id;

typedef enum memra__error_kind {
    /* accepted[b] is larger than the rows the journal holds */
    MEMRA__ERR_ACCEPTED_OVER_JOURNAL = 1,
    /* rollback: accepted[b] is 0 or larger than t */
    MEMRA__ERR_ROLLBACK_RANGE = 2,
} memra__error_kind;

/*
 * Journal layout (f32 words of one sequence's journal buffer). The header holds one row count
 * per key head (a u32 stored in the f32 word), because the blocks that share a key head's q and
 * k channels are the ones that read and rewrite those rows together (see gdn_verify.cu); all
 * counts of a sequence are equal. Rows follow, each the raw qkv row, then beta_raw, then
 * alpha, padded to a multiple of 4 words so that every row starts 16-byte aligned. A
 * zero-filled journal holds no rows.
 */
#define MEMRA__ROUND4(n) (((n) + 3) / 4 * 4)
#define MEMRA__JOURNAL_HEADER(num_k) MEMRA__ROUND4(num_k)
#define MEMRA__JOURNAL_ROW(conv_dim, num_v) MEMRA__ROUND4((conv_dim) + 2 * (num_v))

/*
 * The whole verify (conv + prep + scan) of b_n sequences x t rows, or a journal commit (t == 0,
 * JOURNAL mode: fold only). Mode values are MemraVerifyMode's.
 *   qkv [b_n, t, conv_dim]; table [b_n, 3]; w [conv_dim, d_conv]; beta_raw, alpha
 *   [b_n, t, num_v]; dt_bias, a [num_v]; accepted [b_n] (JOURNAL only).
 *   o [b_n, t, num_v, S]; optional (NULL: not written) conv_out [b_n, t, conv_dim], q_l2, k_l2,
 *   v_g [b_n, t, num_v, S], beta, g_log [b_n, t, num_v]; snap_conv [b_n, t-1, conv_dim, pad]
 *   and snap_ssm [b_n, t-1, num_v, S, S] in SNAPSHOTS mode (NULL when t == 1 or other modes).
 *   grouped: value head vh reads key head vh / (num_v / num_k) instead of vh % num_k.
 *   counters: CUDA only, b_n * num_k zero-initialised words the kernel leaves zero.
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
    uint32_t *counters;
    memra__dev_error *err;
    /* CUDA only: a zero-initialised device word that settles which finding is recorded. */
    uint32_t *err_claim;
} memra__verify_args;

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
    memra__dev_error *err;
    uint32_t *err_claim;
} memra__rollback_args;

/* CPU reference kernels (kernels/cpu/): synchronous, cannot fail. */
void memra__cpu_ssm_conv1d(const memra__conv_args *args);
void memra__cpu_gdn_prep(const memra__prep_args *args);
void memra__cpu_gdn_scan(const memra__scan_args *args);
/* The 1.1 verify needs `scratch` of memra__cpu_verify_scratch_words(args) floats. */
size_t memra__cpu_verify_scratch_words(const memra__verify_args *args);
void memra__cpu_gdn_verify(const memra__verify_args *args, float *scratch);
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

/* The operations of the 1.2 copies (memra__dev_error.op). */
#define MEMRA__OP_COPY_BATCH 4
#define MEMRA__OP_COPY_INDIRECT 5

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
