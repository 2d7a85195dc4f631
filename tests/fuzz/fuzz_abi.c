/*
 * libFuzzer target over the libmemra ABI on the CPU backend.
 *
 * The input is a little program: a sequence of commands (allocate, free, copy in or out, call
 * an operation, capture a graph of operations, replay or destroy a graph, synchronise, call with
 * a bad handle). Every argument of every call is drawn from the input: shapes, lengths, NULL
 * pointers, misaligned addresses, views into the same buffer (aliasing), and views of any length
 * that real memory can back.
 *
 * The harness holds an independent model of the rules of docs/bad-input.md (an oracle) and checks
 * each call against it:
 * - a call the oracle finds invalid must be refused with INVALID_ARGUMENT (or UNSUPPORTED for a
 *   head dimension other than 128), with a message naming the function, and without a byte of
 *   any buffer, table or table target changing;
 * - a call the oracle finds valid must succeed, and then it really runs: every buffer is exactly
 *   as long as the harness asked for, and every pointer-table entry points at a harness
 *   allocation exactly as long as the accepted shape needs, so AddressSanitizer reports any read
 *   or write the library makes out of bounds.
 * The point is the first rule's converse: an input that the library accepts but then reads or
 * writes out of bounds, which the sanitizers turn into a crash. A disagreement with the oracle
 * is also a crash (abort), with a line on stderr saying which call and why.
 *
 * The 1.1 operations (memra_gdn_verify in its three modes, memra_gdn_journal_commit,
 * memra_gdn_rollback) take their arguments as a MemraVerifyArgs: every field of it is drawn too
 * (struct_size, mode, head order, the counts, eps, scale, all seventeen slices), the oracle
 * knowing which fields each operation and mode reads, requires, must find empty or ignores.
 * Table targets of an accepted call are exactly a ring, a state and a state or a journal
 * (memra_gdn_journal_len) long; journals start empty and counts valid, and a command of its own
 * writes one bad count and expects the next synchronisation to report it while the sequence's
 * ring, state and journal stay untouched. Another fills the journals of a valid journal verify or
 * commit from the input (a header the rules accept or one with a word drawn, or input bytes
 * over the whole buffer), draws every count and some NULL or misaligned journal entries, and
 * expects the sequences the header rules refuse to be reported and left untouched (see
 * cmd_journal_garbage()). memra_gdn_journal_len, memra_alloc_u32,
 * memra_htod_u32_into and memra_dtoh_u32 are called with drawn arguments as well, and so are the
 * single-sequence memra_ssm_conv1d_fused_decode (its ring a harness buffer) and
 * memra_gdn_scan_s128 (its states too, the same buffer for both allowed). The 1.2 copies,
 * memra_copy_batch_uniform_f32 and memra_copy_indirect_src_f32, are drawn with their own n,
 * words and dst_off; every table entry of an accepted copy points at a harness allocation of
 * exactly the copy's bytes.
 *
 * Shapes are drawn near small defaults (num_k = num_v = 1, conv_dim 384, t = 2, b_n = 1) so that
 * an all-zero input is a valid program and the kernels stay fast, with bytes that pick small
 * values, boundary values or values whose products overflow size_t.
 *
 * Every operation's arguments, the slice lengths its shape requires and which slices it reads
 * or writes come from the argument table the bad-input suites are generated from
 * (tests/bad_input/op_args.def); the rules of what must be refused are this file's own.
 *
 * Input format (bytes; a missing byte reads as 0, so every input is a program):
 *   command := op:u8 followed by its own bytes, see run(): below 252, op % 14 picks one of the
 *              fourteen commands of the first corpus, 252 and above the later ones (the
 *              journal fill).
 *   call    := op:u8 — below 243, op % 9 picks one of the nine operations of the first corpus
 *              (the 1.0 ones, the verify, the commit, the rollback), 243 and above the
 *              later ones (the single-sequence conv and scan, the 1.2 copies) — then the
 *              shape scalars (a copy's n, words and dst_off after b_n) and one view per slot.
 *   scalar  := x:u8 — 0..127 the default, 128..191 the small value x - 128, 192..247 an entry of
 *              SPECIAL, 248..255 a raw u64 from the next 8 bytes.
 *   view    := buffer:u8 mode:u8 k:u8 — buffer 0 is the slot's default buffer; mode's low three
 *              bits choose the address (start, +k, +16k, +256k elements, misaligned by a few
 *              bytes, NULL), the next three the length (exactly what the shape needs, one less,
 *              k more, the rest of the buffer, 0, k), and 0xC0 set means "not wanted" for an
 *              optional snapshot.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"

/* The operations' argument slots, shared with the bad-input suites. */
#include "../bad_input/op_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S ((size_t)MEMRA_D_STATE)

/* ---- Reading the input ---- */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t rd8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t rd64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)rd8(r) << (8 * i);
    return v;
}

static const size_t SPECIAL[] = {
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    9,
    64,
    127,
    128,
    129,
    255,
    256,
    383,
    384,
    385,
    (size_t)1 << 32,
    ((size_t)1 << 57) + 4,
    (size_t)1 << 57,
    (size_t)1 << 60,
    (size_t)1 << 61,
    (size_t)1 << 62,
    (size_t)1 << 63,
    SIZE_MAX / 4 + 1,
    SIZE_MAX / 8 + 1,
    SIZE_MAX - 1,
    SIZE_MAX,
};

static size_t pick(reader *r, size_t def)
{
    uint8_t x = rd8(r);
    if (x < 128)
        return def;
    if (x < 192)
        return (size_t)(x - 128);
    if (x < 248)
        return SPECIAL[(x - 192) % (sizeof SPECIAL / sizeof SPECIAL[0])];
    return (size_t)rd64(r);
}

static float pick_float(reader *r, float def)
{
    static const float menu[] = {0.0f, -0.5f, 1e-12f, 1e30f, FLT_MAX, 1e-40f, -1.0f};
    uint8_t x = rd8(r);
    if (x < 160)
        return def;
    switch (x % 4) {
    case 0:
        return NAN;
    case 1:
        return INFINITY;
    case 2:
        return -INFINITY;
    }
    return menu[x % (sizeof menu / sizeof menu[0])];
}

/* Saturating size arithmetic for the oracle (op_args.h): SIZE_MAX stands for "overflowed". */
#define mul oa_mul
#define add oa_add

/* ---- Failing the run ---- */

static void die(const char *what, const char *detail, MemraStatus st)
{
    fprintf(stderr, "fuzz_abi: %s: %s (status %s, message \"%s\")\n", what, detail,
            memra_status_string(st), memra_last_error_message());
    abort();
}

/* ---- The harness's buffers ---- */

#define MAX_BUFS 64
/* One per slot of the widest call (a verify), so that the default views never overlap. */
#define DEFAULT_BUFS 17
/* 16384 floats: room for one state snapshot of num_v = 1 or for 42 rows of 384 channels. */
#define DEFAULT_WORDS ((size_t)16384)

typedef struct hbuf {
    unsigned char *ptr;
    size_t bytes;
    /* A pointer table of one call: its entries point at that call's table targets and must not
     * be rewritten, freed or used by another call. */
    bool table;
    /* The number of live graphs that read or write this buffer: it must stay alive. */
    int pins;
} hbuf;

#define MAX_GRAPHS 4
#define MAX_PREPARED 4
#define MAX_SLOTS 17

/* The operations are the argument table's (op_args.def), by their OA_* ids: the rows the
 * fuzzer draws, in the table's order. A verify is drawn as OA_V_SNAP; its mode is drawn too and
 * picks the row of that mode for what each slot is. */
/* The drawn operations, and how many of them the first corpus was written for: an op byte
 * below 243 (27 * 9) picks one of those nine as it always did, 243 and above the later ones. */
#define N_OP_FIRST 9
#define OP_BYTE_FIRST (27 * N_OP_FIRST)
static int fuzz_ops[OA_N_OP];
static int n_fuzz_ops;

static int draw_op(uint8_t x)
{
    if (n_fuzz_ops == 0)
        for (int op = 0; op < OA_N_OP; op++)
            if (OA_OPS[op].fuzz)
                fuzz_ops[n_fuzz_ops++] = op;
    if (x < OP_BYTE_FIRST || n_fuzz_ops == N_OP_FIRST)
        return fuzz_ops[x % N_OP_FIRST];
    return fuzz_ops[N_OP_FIRST + (x - OP_BYTE_FIRST) % (n_fuzz_ops - N_OP_FIRST)];
}

#define OP_NAME(op) (OA_OPS[op].fn)

/* The slices of MemraVerifyArgs the harness handles itself, by slot. */
#define VS_TABLE OA_SLOT(V_SNAP, table)
#define VS_ACCEPTED OA_SLOT(V_SNAP, accepted)
#define VS_O OA_SLOT(V_SNAP, o)

/* What a 1.1 operation makes of a slot (call.role). */
enum {
    RO_REQ_IN,  /* a required input */
    RO_REQ_OUT, /* a required output */
    RO_OPT_OUT, /* an optional output: {NULL, 0} skips it */
    RO_EMPTY,   /* must be {NULL, 0} */
    RO_IGNORED, /* not read: anything goes */
    RO_T1_SNAP, /* SNAPSHOTS mode with t = 1: no snapshot shape; see oracle_verify() */
};

/* MemraVerifyArgs.struct_size as drawn (call.size_kind). */
enum { SZ_EXACT, SZ_LESS, SZ_ZERO, SZ_MORE, SZ_NULL_ARGS };

/* Verdicts of the oracle. */
enum {
    V_OK,          /* must succeed */
    V_INVALID,     /* must be INVALID_ARGUMENT */
    V_UNSUPPORTED, /* must be UNSUPPORTED */
    V_REFUSE,      /* must be INVALID_ARGUMENT or UNSUPPORTED */
    V_ABI,         /* must be ABI_MISMATCH */
    V_EITHER,      /* OK or INVALID_ARGUMENT: a case the documentation leaves open (the call is
                      still checked for memory safety) */
    V_BAD_HANDLE,  /* INVALID_ARGUMENT, or ABI_MISMATCH for a struct too large: which of the two
                      a library checks first is not documented */
};

typedef struct call {
    int op;
    /* The argument table's row for what each slot is: the operation's, or for a verify the
     * row of its mode (FINAL_ONLY's for a mode that is none: it reads neither the counts nor
     * the snapshots). */
    int row;
    MemraEngine *engine;
    size_t d_state, num_v, num_k, key_dim, conv_dim, d_conv, t, b_n;
    float eps, scale;
    /* The 1.2 copies: n, words and dst_off. */
    size_t n_copy, words, dst_off;
    int n;
    uintptr_t p[MAX_SLOTS];
    size_t len[MAX_SLOTS];
    size_t need[MAX_SLOTS];
    int verdict;
    /* The call's own tables (harness buffer indices, -1 for none) and their targets. */
    int tab[2];
    void **targets;
    size_t n_targets;
    size_t target_bytes;
    /* Data buffers the call's views use (harness buffer indices), for pinning. */
    int uses[MAX_SLOTS];
    /* The 1.1 operations: the MemraVerifyArgs fields beyond the shape, the role of every slot,
     * the call's own count buffer (harness index, -1 for none) and the size of every table
     * target (NULL: all target_bytes). */
    uint32_t mode, order;
    int size_kind;
    char role[MAX_SLOTS];
    int acc;
    size_t *tsizes;
} call;

typedef struct fuzz {
    MemraEngine *e;
    MemraEngine *e2;
    hbuf buf[MAX_BUFS];
    int nbuf;
    MemraGraph *graph[MAX_GRAPHS];
    call prepared[MAX_GRAPHS][MAX_PREPARED];
    int n_prepared[MAX_GRAPHS];
} fuzz;

static size_t slot_elem(const call *c, int s)
{
    return oa_elem(c->row, s);
}

static int slot_kind(const call *c, int s)
{
    return oa_slot_of(c->row, s)->kind;
}

/* How many pointer tables the operation takes. */
static int n_tables(int op)
{
    int n = 0;
    for (int s = 0; s < OA_OPS[op].n; s++)
        n += oa_slot_of(op, s)->kind == OA_K_TAB;
    return n;
}

static bool is_verify_op(int op)
{
    return OA_OPS[op].form == OA_FORM_ARGS;
}

static bool slot_output(const call *c, int s)
{
    if (is_verify_op(c->op))
        return c->role[s] == RO_REQ_OUT || c->role[s] == RO_OPT_OUT;
    return oa_is_output(c->op, s);
}

/* Whether the operation takes a scalar (t, b_n, ...). */
static bool reads(int op, int sc)
{
    return OA_OPS[op].base[sc] != 0;
}

/* Whether a slot's length has a t - 1 factor: a snapshot. */
static bool is_snapshot(const call *c, int s)
{
    const int *f = oa_slot_of(c->row, s)->f;
    return f[0] == OA_F_T1 || f[1] == OA_F_T1 || f[2] == OA_F_T1 || f[3] == OA_F_T1;
}

/* The call's arguments as the argument table holds them. */
static void call_values(const call *c, oa_values *v)
{
    memset(v, 0, sizeof *v);
    memcpy(v->p, c->p, sizeof c->p);
    memcpy(v->len, c->len, sizeof c->len);
    v->z[OA_SC_d_state] = c->d_state;
    v->z[OA_SC_num_v] = c->num_v;
    v->z[OA_SC_num_k] = c->num_k;
    v->z[OA_SC_key_dim] = c->key_dim;
    v->z[OA_SC_conv_dim] = c->conv_dim;
    v->z[OA_SC_d_conv] = c->d_conv;
    v->z[OA_SC_t] = c->t;
    v->z[OA_SC_b_n] = c->b_n;
    v->z[OA_SC_mode] = c->mode;
    v->z[OA_SC_head_order] = c->order;
    v->f[OA_SC_eps] = c->eps;
    v->f[OA_SC_scale] = c->scale;
    v->z[OA_SC_n] = c->n_copy;
    v->z[OA_SC_words] = c->words;
    v->z[OA_SC_dst_off] = c->dst_off;
}

/* The elements every slot needs for the call's shape (the table's lengths). */
static void needs(call *c, bool *ovf)
{
    oa_values v;
    call_values(c, &v);
    for (int s = 0; s < c->n; s++)
        c->need[s] = oa_need(c->row, s, v.z, ovf);
}

static int add_buf(fuzz *f, void *ptr, size_t bytes, bool table)
{
    if (f->nbuf == MAX_BUFS)
        return -1;
    f->buf[f->nbuf] = (hbuf){ptr, bytes, table, 0};
    return f->nbuf++;
}

static void drop_buf(fuzz *f, int i)
{
    f->buf[i].ptr = NULL;
    f->buf[i].bytes = 0;
}

/* A library buffer of `words` f32 words filled with a pattern drawn from `seed`. */
static int new_data_buf(fuzz *f, size_t words, uint8_t seed)
{
    MemraSliceMutF32 s;
    MemraStatus st = memra_alloc_f32(f->e, words, MEMRA_ALLOC_INIT_UNINIT, &s);
    if (st != MEMRA_STATUS_OK)
        die("memra_alloc_f32", "a small allocation failed", st);
    /* Finite, small and different per buffer: 0x3c3c3c3c is 0.0115f. */
    memset(s.ptr, 0x30 + (seed & 15), words * sizeof(float));
    int idx = add_buf(f, s.ptr, words * sizeof(float), false);
    if (idx < 0 && memra_free(f->e, s.ptr) != MEMRA_STATUS_OK)
        die("memra_free", "a fresh buffer could not be freed", MEMRA_STATUS_INTERNAL);
    return idx;
}

/* ---- The oracle: the rules of docs/bad-input.md, written from that page ---- */

/* What each 1.1 operation reads (abi/memra.h, in the argument table): the verify every slice
 * but the counts outside JOURNAL mode and the snapshots outside SNAPSHOTS mode (which must then
 * be empty); the commit the table, w, dt_bias, a and the counts; the rollback the table, the
 * counts and the snapshots, as inputs. */
static void verify_roles(call *c)
{
    c->row = c->op;
    if (c->op == OA_V_SNAP)
        c->row = c->mode == MEMRA_VERIFY_MODE_SNAPSHOTS ? OA_V_SNAP
                 : c->mode == MEMRA_VERIFY_MODE_JOURNAL ? OA_V_JOURNAL
                                                        : OA_V_FINAL;
    for (int s = 0; s < c->n; s++) {
        switch (slot_kind(c, s)) {
        case OA_K_OUT:
            /* SNAPSHOTS mode with t = 1: no snapshot shape; see oracle_verify(). */
            c->role[s] = is_snapshot(c, s) && c->t < 2 ? RO_T1_SNAP : RO_REQ_OUT;
            break;
        case OA_K_OPT:
            c->role[s] = RO_OPT_OUT;
            break;
        case OA_K_EMPTY:
            c->role[s] = RO_EMPTY;
            break;
        case OA_K_IGNORED:
            c->role[s] = RO_IGNORED;
            break;
        default:
            c->role[s] = RO_REQ_IN;
        }
    }
}

/* The rules of one view: NULL only with len == 0, at least the elements the shape needs,
 * aligned to its element, and the part the shape uses not past the end of the address space. */
static bool bad_view(const call *c, int s)
{
    size_t bytes;
    return (c->p[s] == 0 && c->len[s] > 0) || c->len[s] < c->need[s] ||
           c->p[s] % slot_elem(c, s) != 0 ||
           __builtin_mul_overflow(c->need[s], slot_elem(c, s), &bytes) || c->p[s] + bytes < c->p[s];
}

/* Whether an output shares memory with another slice; the extent that counts is the part the
 * shape uses. With `by_role` (the 1.1 operations) a slice the call must find empty, ignores, or
 * has no shape for does not count. The in-place update the rules allow (exactly the same
 * address) is not an overlap. */
static bool outputs_overlap(const call *c, bool by_role)
{
    for (int s = 0; s < c->n; s++) {
        if (!slot_output(c, s) || c->p[s] == 0 || c->need[s] == 0)
            continue;
        const uintptr_t lo = c->p[s], hi = lo + c->need[s] * slot_elem(c, s);
        for (int o = 0; o < c->n; o++) {
            const char role = c->role[o];
            if (o == s || c->p[o] == 0 || c->need[o] == 0 ||
                (by_role && (role == RO_IGNORED || role == RO_EMPTY || role == RO_T1_SNAP)) ||
                (oa_may_alias(c->row, s, o) && c->p[o] == c->p[s]))
                continue;
            const uintptr_t olo = c->p[o], ohi = olo + c->need[o] * slot_elem(c, o);
            if (lo < ohi && olo < hi)
                return true;
        }
    }
    return false;
}

/* memra_copy_indirect_src_f32: the part of dst written against src_ptr's one entry. */
static bool copy_dst_overlaps(const call *c)
{
    const int d = OA_SLOT(COPY_INDIRECT, dst), t = OA_SLOT(COPY_INDIRECT, src_ptr);
    if (c->p[d] == 0 || c->p[t] == 0)
        return false;
    const uintptr_t hi = c->p[d] + c->need[d] * sizeof(float);
    const uintptr_t lo = hi - c->n_copy * sizeof(float);
    return lo < c->p[t] + sizeof(uint64_t) && c->p[t] < hi;
}

static int oracle_verify(call *c)
{
    bool bad = false, ovf = false, open = false;
    if (c->size_kind == SZ_MORE)
        return V_ABI;
    if (c->size_kind != SZ_EXACT)
        return V_INVALID;
    if (c->op == OA_V_SNAP)
        bad |= c->mode > MEMRA_VERIFY_MODE_JOURNAL || c->order > MEMRA_HEAD_ORDER_GROUPED;
    if (c->op == OA_COMMIT)
        bad |= c->mode != MEMRA_VERIFY_MODE_JOURNAL || c->order > MEMRA_HEAD_ORDER_GROUPED;
    if (c->op == OA_ROLLBACK)
        bad |= c->mode != MEMRA_VERIFY_MODE_SNAPSHOTS;
    bad |= c->num_k == 0 || c->num_v == 0 || c->b_n == 0;
    if (c->num_k != 0)
        bad |= c->num_v % c->num_k != 0;
    bad |= c->d_conv < 1 || c->d_conv > MEMRA_D_CONV_MAX;
    if (c->op != OA_COMMIT)
        bad |= c->t == 0;
    if (c->op != OA_ROLLBACK)
        bad |= !isfinite(c->eps);
    if (c->op == OA_V_SNAP)
        bad |= !isfinite(c->scale);
    needs(c, &ovf);
    bad |= ovf;
    for (int s = 0; s < c->n && !ovf; s++) {
        const char role = c->role[s];
        const bool empty = c->p[s] == 0 && c->len[s] == 0;
        if (role == RO_IGNORED)
            continue;
        if (role == RO_EMPTY) {
            bad |= !empty;
            continue;
        }
        if (role == RO_T1_SNAP) {
            /* SNAPSHOTS with t = 1: the snapshots have no shape, so a view is neither missing
             * nor given in another mode; the header leaves it open. */
            open |= !empty;
            continue;
        }
        if (role == RO_OPT_OUT && empty)
            continue;
        bad |= bad_view(c, s);
    }
    /* Outputs must not share memory with any other slice the operation reads or writes. */
    if (!ovf)
        bad |= outputs_overlap(c, true);
    if (c->d_state != S)
        return bad || c->d_state == 0 ? V_REFUSE : V_UNSUPPORTED;
    if (bad)
        return V_INVALID;
    return open ? V_EITHER : V_OK;
}

static int oracle(call *c)
{
    if (is_verify_op(c->op))
        return oracle_verify(c);
    bool bad = false, unsupported = false, ovf = false;
    switch (c->op) {
    case OA_CONV_B:
    case OA_CONV_T:
    case OA_CONV_1:
        bad |= c->conv_dim == 0 || c->d_conv < 1 || c->d_conv > MEMRA_D_CONV_MAX;
        break;
    case OA_PREP_B:
    case OA_PREP_V: {
        bool o2 = false;
        /* Any head dimension but 128 is unsupported; zero is not a shape at all, which a
         * library may call either. */
        if (c->d_state != S)
            unsupported = true;
        bad |= c->num_k == 0 || c->num_v == 0 || !isfinite(c->eps);
        if (c->num_k != 0)
            bad |= c->num_v % c->num_k != 0;
        size_t key = mul(c->d_state, c->num_k, &o2);
        size_t conv = add(mul(key, 2, &o2), mul(c->d_state, c->num_v, &o2), &o2);
        bad |= o2 || c->key_dim != key || c->conv_dim != conv;
        break;
    }
    case OA_SCAN_B:
    case OA_SCAN_T:
    case OA_SCAN_1:
        bad |= c->num_v == 0 || !isfinite(c->scale);
        break;
    case OA_COPY_BATCH:
        /* A copy's bytes, words * 4, must fit in size_t. */
        bad |= c->n_copy == 0 || c->words == 0 || c->words > SIZE_MAX / sizeof(float);
        break;
    case OA_COPY_INDIRECT:
        bad |= c->n_copy == 0;
        break;
    }
    bad |= (reads(c->op, OA_SC_t) && c->t == 0) || (reads(c->op, OA_SC_b_n) && c->b_n == 0);
    needs(c, &ovf);
    bad |= ovf;

    for (int s = 0; s < c->n && !ovf; s++) {
        bool optional = slot_kind(c, s) == OA_K_OPT;
        if (optional && c->p[s] == 0 && c->len[s] == 0)
            continue;
        bad |= bad_view(c, s);
    }
    /* Outputs must not share memory with any other argument; of the indirect copy's dst only
     * the part written, from dst_off on, counts. */
    if (!ovf && c->op == OA_COPY_INDIRECT)
        bad |= copy_dst_overlaps(c);
    else if (!ovf)
        bad |= outputs_overlap(c, false);
    /* A head dimension of 0 is not a shape at all: a library may call it either. */
    if (unsupported)
        return bad || c->d_state == 0 ? V_REFUSE : V_UNSUPPORTED;
    return bad ? V_INVALID : V_OK;
}

/* MEMRA_FUZZ_TRACE=1 prints every checked call (to see what an input exercises). */
static bool tracing(void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("MEMRA_FUZZ_TRACE");
        on = v != NULL && strcmp(v, "1") == 0;
    }
    return on;
}

/* What each verdict accepts (one status or either of two), and how it is named. */
static const struct {
    const char *name;
    MemraStatus one, other;
} VERDICTS[] = {
    [V_OK] = {"success", MEMRA_STATUS_OK, MEMRA_STATUS_OK},
    [V_INVALID] = {"INVALID_ARGUMENT", MEMRA_STATUS_INVALID_ARGUMENT,
                   MEMRA_STATUS_INVALID_ARGUMENT},
    [V_UNSUPPORTED] = {"UNSUPPORTED", MEMRA_STATUS_UNSUPPORTED, MEMRA_STATUS_UNSUPPORTED},
    [V_REFUSE] = {"a refusal", MEMRA_STATUS_INVALID_ARGUMENT, MEMRA_STATUS_UNSUPPORTED},
    [V_ABI] = {"ABI_MISMATCH", MEMRA_STATUS_ABI_MISMATCH, MEMRA_STATUS_ABI_MISMATCH},
    [V_EITHER] = {"success or INVALID_ARGUMENT", MEMRA_STATUS_OK, MEMRA_STATUS_INVALID_ARGUMENT},
    [V_BAD_HANDLE] = {"INVALID_ARGUMENT or ABI_MISMATCH", MEMRA_STATUS_INVALID_ARGUMENT,
                      MEMRA_STATUS_ABI_MISMATCH},
};

static void check_status(const char *fn, int verdict, MemraStatus st)
{
    char detail[256];
    if (tracing())
        fprintf(stderr, "fuzz_abi: %s: expected %s, got %s%s%s\n", fn, VERDICTS[verdict].name,
                memra_status_string(st), st == MEMRA_STATUS_OK ? "" : ": ",
                st == MEMRA_STATUS_OK ? "" : memra_last_error_message());
    if (st != VERDICTS[verdict].one && st != VERDICTS[verdict].other) {
        snprintf(detail, sizeof detail, "the oracle expected %s", VERDICTS[verdict].name);
        die(fn, detail, st);
    }
    if (st != MEMRA_STATUS_OK && strstr(memra_last_error_message(), fn) == NULL)
        die(fn, "the message does not name the function", st);
}

/* ---- Building calls ---- */

static void read_view(fuzz *f, reader *r, call *c, int s, int own_table, int def_buf)
{
    uint8_t sel = rd8(r), mode = rd8(r), k = rd8(r);
    size_t elem = slot_elem(c, s);
    bool table = slot_kind(c, s) == OA_K_TAB || slot_kind(c, s) == OA_K_U32;
    int bi;
    if (table)
        bi = own_table;
    else if (sel == 0)
        bi = def_buf;
    else if (sel >= 250 && c->tab[0] >= 0)
        /* An output or input placed on the call's own table: the overlap rules. */
        bi = c->tab[sel % 2 == 0 || c->tab[1] < 0 ? 0 : 1];
    else
        bi = (sel - 1) % f->nbuf;
    /* Another call's table is never a view: that call may be captured, and a write into its
     * entries would send its replays to garbage addresses. */
    if (!table && f->buf[bi].table && bi != c->tab[0] && bi != c->tab[1])
        bi = def_buf;
    /* Optional slots are left out on request; slots a 1.1 operation must find empty (or
     * ignores) are left out unless asked for. */
    bool drop = (slot_kind(c, s) == OA_K_OPT || is_snapshot(c, s)) && (mode & 0xC0) == 0xC0;
    if (is_verify_op(c->op) &&
        (c->role[s] == RO_EMPTY || c->role[s] == RO_IGNORED || c->role[s] == RO_T1_SNAP))
        drop = (mode & 0xC0) != 0x80;
    if (drop || bi < 0) {
        c->p[s] = 0;
        c->len[s] = 0;
        c->uses[s] = -1;
        return;
    }
    const hbuf *b = &f->buf[bi];
    if (b->ptr == NULL)
        bi = def_buf, b = &f->buf[bi];
    c->uses[s] = bi;

    size_t off = 0;
    bool null = false;
    switch (mode & 7) {
    case 1:
        off = (size_t)k * elem;
        break;
    case 2:
        off = (size_t)k * 16 * elem;
        break;
    case 3:
        off = (size_t)k * 256 * elem;
        break;
    case 4:
        off = 1 + k % (elem - 1);
        break;
    case 5:
        null = true;
        break;
    }
    if (off > b->bytes)
        off = 0;
    size_t need = c->need[s] == SIZE_MAX ? 0 : c->need[s], len = need;
    switch ((mode >> 3) & 7) {
    case 3:
        len = need > 0 ? need - 1 : 0;
        break;
    case 4:
        len = need + k;
        break;
    case 5:
        len = (b->bytes - off) / elem;
        break;
    case 6:
        len = 0;
        break;
    case 7:
        len = k;
        break;
    }
    if (null) {
        c->p[s] = 0;
        c->len[s] = len;
        return;
    }
    /* The view never claims more than the allocation holds: the library trusts views, and the
     * sanitizers must only ever catch the library, not the harness. */
    size_t room = (b->bytes - off) / elem;
    c->p[s] = (uintptr_t)b->ptr + off;
    c->len[s] = len < room ? len : room;
}

/* A pointer table of `entries` u64 entries; fill_table() points them at their targets. */
static int new_table(fuzz *f, size_t entries)
{
    MemraSliceMutU64 tab;
    MemraStatus st = memra_alloc_u64(f->e, entries, MEMRA_ALLOC_INIT_ZEROED, &tab);
    if (st != MEMRA_STATUS_OK)
        die("memra_alloc_u64", "a table allocation failed", st);
    int idx = add_buf(f, tab.ptr, entries * sizeof(uint64_t), true);
    if (idx < 0 && memra_free(f->e, tab.ptr) != MEMRA_STATUS_OK)
        die("memra_free", "freeing a fresh table failed", MEMRA_STATUS_INTERNAL);
    return idx;
}

/* The entry of a 1.1 call's own table at which its table view starts, 0 when the call has no
 * view of it: the view may start anywhere in the buffer. */
static size_t table_first(const fuzz *f, const call *c)
{
    if (c->tab[0] < 0 || c->uses[VS_TABLE] != c->tab[0] || c->p[VS_TABLE] == 0)
        return 0;
    return (c->p[VS_TABLE] - (uintptr_t)f->buf[c->tab[0]].ptr) / sizeof(uint64_t);
}

/* Points every entry of table `idx` at a harness allocation, those of column i (of three)
 * exactly sizes[i] bytes long: one element more read or written by the library is a sanitizer
 * report. `zero` marks the columns whose targets start zero-filled (journals: empty). Columns
 * count from entry `first`, where the call's view of the table starts (table_first): the library
 * reads sequence b's row at entries first + 3b .. first + 3b + 2. */
static void fill_table_columns(fuzz *f, call *c, int idx, size_t first, const size_t sizes[3],
                               const bool zero[3])
{
    size_t entries = f->buf[idx].bytes / sizeof(uint64_t);
    uint64_t *host = malloc(entries * sizeof *host);
    void **grown = realloc(c->targets, (c->n_targets + entries) * sizeof *grown);
    size_t *grown_sizes = realloc(c->tsizes, (c->n_targets + entries) * sizeof *grown_sizes);
    if (grown != NULL)
        c->targets = grown;
    if (grown_sizes != NULL)
        c->tsizes = grown_sizes;
    if (host == NULL || grown == NULL || grown_sizes == NULL)
        abort();
    for (size_t i = 0; i < entries; i++) {
        const size_t col = (i + 3 - first % 3) % 3;
        const size_t bytes = sizes[col] ? sizes[col] : 1;
        void *target = malloc(bytes);
        if (target == NULL)
            abort();
        memset(target, zero[col] ? 0 : 0x3c, bytes);
        c->tsizes[c->n_targets] = bytes;
        c->targets[c->n_targets++] = target;
        host[i] = (uint64_t)(uintptr_t)target;
    }
    MemraSliceU64 src = {host, entries};
    MemraSliceMutU64 dst = {(uint64_t *)(void *)f->buf[idx].ptr, entries};
    MemraStatus st = memra_htod_u64_into(f->e, src, dst);
    if (st != MEMRA_STATUS_OK)
        die("memra_htod_u64_into", "filling a table failed", st);
    free(host);
}

/* As fill_table_columns, every target `target_bytes` long. */
static void fill_table(fuzz *f, call *c, int idx, size_t target_bytes)
{
    const size_t sizes[3] = {target_bytes, target_bytes, target_bytes};
    const bool zero[3] = {false, false, false};
    fill_table_columns(f, c, idx, 0, sizes, zero);
    c->target_bytes = target_bytes;
}

/* The bytes of a table target of call `c` (entry `i` % 3 of a sequence's row). */
static size_t target_size(const call *c, size_t i)
{
    if (c->tsizes != NULL)
        return c->tsizes[i];
    return c->target_bytes ? c->target_bytes : 1;
}

/* The three target sizes of an accepted 1.1 call: [ring, state, alternate state or journal];
 * a commit's journals are the smallest a library can be handed (memra_gdn_journal_len with
 * t_max = 1), a verify's exactly those of its t. Returns false when they are too big. */
static bool verify_target_sizes(const call *c, size_t sizes[3], bool zero[3])
{
    bool ovf = false;
    const size_t pad = c->d_conv - 1;
    const size_t conv = add(mul(2 * S, c->num_k, &ovf), mul(S, c->num_v, &ovf), &ovf);
    sizes[0] = mul(mul(conv, pad, &ovf), sizeof(float), &ovf);
    sizes[1] = sizes[2] = mul(mul(c->num_v, S * S, &ovf), sizeof(float), &ovf);
    zero[0] = zero[1] = zero[2] = false;
    const bool journal =
        c->op == OA_COMMIT || (c->op == OA_V_SNAP && c->mode == MEMRA_VERIFY_MODE_JOURNAL);
    if (journal) {
        size_t words = 0;
        MemraStatus st =
            memra_gdn_journal_len(S, c->num_k, c->num_v, c->op == OA_COMMIT ? 1 : c->t, &words);
        if (st != MEMRA_STATUS_OK)
            return false;
        sizes[2] = mul(words, sizeof(float), &ovf);
        zero[2] = true;
    }
    return !ovf && sizes[0] <= ((size_t)64 << 20) && sizes[1] <= ((size_t)64 << 20) &&
           sizes[2] <= ((size_t)64 << 20);
}

/* The bytes a table target must hold for the call's shape if it is accepted; 0 when no
 * accepted call could need more than a token allocation. */
static size_t target_bytes_for(const call *c, bool *too_big)
{
    bool ovf = false;
    size_t words = 0;
    if (c->op == OA_CONV_B || c->op == OA_CONV_T)
        words = mul(c->conv_dim, c->d_conv >= 1 ? c->d_conv - 1 : 0, &ovf);
    else if (c->op == OA_SCAN_B || c->op == OA_SCAN_T)
        words = mul(c->num_v, S * S, &ovf);
    else if (c->op == OA_COPY_BATCH)
        words = c->words;
    else if (c->op == OA_COPY_INDIRECT)
        words = c->n_copy;
    size_t bytes = mul(words, sizeof(float), &ovf);
    /* Bigger than a call built from the harness's buffers can legitimately need. */
    *too_big = ovf || bytes > ((size_t)64 << 20);
    return bytes;
}

static void free_call(fuzz *f, call *c)
{
    for (int i = 0; i < 2; i++) {
        if (c->tab[i] < 0)
            continue;
        if (memra_free(f->e, f->buf[c->tab[i]].ptr) != MEMRA_STATUS_OK)
            die("memra_free", "freeing a table failed", MEMRA_STATUS_INTERNAL);
        drop_buf(f, c->tab[i]);
        c->tab[i] = -1;
    }
    if (c->acc >= 0) {
        if (memra_free(f->e, f->buf[c->acc].ptr) != MEMRA_STATUS_OK)
            die("memra_free", "freeing a count buffer failed", MEMRA_STATUS_INTERNAL);
        drop_buf(f, c->acc);
        c->acc = -1;
    }
    for (size_t i = 0; i < c->n_targets; i++)
        free(c->targets[i]);
    free(c->targets);
    free(c->tsizes);
    c->targets = NULL;
    c->tsizes = NULL;
    c->n_targets = 0;
}

/* A count buffer of `entries` u32 for a 1.1 call, every element valid for fresh journals (0)
 * or for a rollback of t rows (1 ..= t). Marked like a table: no other call may write it. */
static int new_counts(fuzz *f, const call *c, size_t entries)
{
    MemraSliceMutU32 acc;
    MemraStatus st = memra_alloc_u32(f->e, entries, MEMRA_ALLOC_INIT_ZEROED, &acc);
    if (st != MEMRA_STATUS_OK)
        die("memra_alloc_u32", "a count allocation failed", st);
    if (c->op == OA_ROLLBACK) {
        uint32_t *host = malloc(entries * sizeof *host);
        if (host == NULL)
            abort();
        const size_t t = c->t >= 1 && c->t < 1000 ? c->t : 1;
        for (size_t i = 0; i < entries; i++)
            host[i] = (uint32_t)(1 + i % t);
        MemraSliceU32 src = {host, entries};
        st = memra_htod_u32_into(f->e, src, acc);
        if (st != MEMRA_STATUS_OK)
            die("memra_htod_u32_into", "filling the counts failed", st);
        free(host);
    }
    int idx = add_buf(f, acc.ptr, entries * sizeof(uint32_t), true);
    if (idx < 0 && memra_free(f->e, acc.ptr) != MEMRA_STATUS_OK)
        die("memra_free", "freeing fresh counts failed", MEMRA_STATUS_INTERNAL);
    return idx;
}

/* Reads one operation call from the input. Returns false when the call cannot be set up
 * within the harness's limits (it is then skipped, having allocated nothing). */
static bool read_call(fuzz *f, reader *r, call *c)
{
    memset(c, 0, sizeof *c);
    c->tab[0] = c->tab[1] = -1;
    c->acc = -1;
    c->op = draw_op(rd8(r));
    c->row = c->op;
    c->engine = f->e;
    c->n = OA_OPS[c->op].n;
    c->d_state = pick(r, S);
    c->num_k = pick(r, 1);
    c->num_v = pick(r, c->num_k);
    bool o = false;
    c->key_dim = pick(r, mul(c->d_state, c->num_k, &o));
    size_t model_conv = add(mul(c->key_dim, 2, &o), mul(c->d_state, c->num_v, &o), &o);
    c->conv_dim = pick(r, c->op == OA_PREP_B || c->op == OA_PREP_V ? model_conv : 384);
    c->d_conv = pick(r, 4);
    c->t = pick(r, 2);
    c->b_n = pick(r, 1);
    /* Only the copies read these, so other operations' inputs keep their meaning. */
    if (reads(c->op, OA_SC_n))
        c->n_copy = pick(r, 2);
    if (reads(c->op, OA_SC_words))
        c->words = pick(r, 64);
    if (reads(c->op, OA_SC_dst_off))
        c->dst_off = pick(r, 0);
    c->eps = pick_float(r, 1e-6f);
    c->scale = pick_float(r, 0.08838834764831845f);
    uint8_t flags = rd8(r);
    if (is_verify_op(c->op)) {
        /* Mostly the operation's own mode and known head orders, sometimes anything. */
        const uint8_t m = rd8(r), ob = rd8(r), z = rd8(r);
        const uint32_t own = c->op == OA_COMMIT     ? MEMRA_VERIFY_MODE_JOURNAL
                             : c->op == OA_ROLLBACK ? MEMRA_VERIFY_MODE_SNAPSHOTS
                                                    : (uint32_t)(m % 3);
        c->mode = m < 192 ? own : m < 240 ? (uint32_t)(m % 3) : m < 248 ? 3u : UINT32_MAX;
        c->order = ob < 224 ? (uint32_t)(ob % 2) : ob < 240 ? 2u : UINT32_MAX;
        c->size_kind = z < 224   ? SZ_EXACT
                       : z < 230 ? SZ_LESS
                       : z < 236 ? SZ_ZERO
                       : z < 244 ? SZ_MORE
                                 : SZ_NULL_ARGS;
        verify_roles(c);
    }

    bool ovf = false;
    needs(c, &ovf);
    /* Tables: the needed entries plus a few (capped: a longer need is refused anyway). */
    size_t entries = 1 + (flags & 3);
    for (int s = 0; s < c->n; s++)
        if (slot_kind(c, s) == OA_K_TAB && c->need[s] < 64 && c->need[s] + (flags & 3) > entries)
            entries = c->need[s] + (flags & 3);
    if (n_tables(c->op) > 0) {
        c->tab[0] = new_table(f, entries);
        /* The per-row scan's out_ptrs: a table of its own, or in place (the same entries). */
        if (n_tables(c->op) == 2 && !(flags & 4))
            c->tab[1] = new_table(f, entries);
        if (c->tab[0] < 0 || (n_tables(c->op) == 2 && !(flags & 4) && c->tab[1] < 0)) {
            free_call(f, c);
            return false;
        }
    }
    if (is_verify_op(c->op)) {
        size_t counts = c->need[VS_ACCEPTED] < 64 ? c->need[VS_ACCEPTED] + (flags & 3) : 4;
        c->acc = new_counts(f, c, counts ? counts : 1);
        if (c->acc < 0) {
            free_call(f, c);
            return false;
        }
    }
    int tables_seen = 0;
    for (int s = 0; s < c->n; s++) {
        int own = -1;
        if (slot_kind(c, s) == OA_K_TAB)
            own = c->tab[tables_seen++ == 0 || c->tab[1] < 0 ? 0 : 1];
        if (slot_kind(c, s) == OA_K_U32)
            own = c->acc;
        read_view(f, r, c, s, own, s % DEFAULT_BUFS);
    }
    c->verdict = oracle(c);
    if (is_verify_op(c->op)) {
        /* Targets of exactly a ring, a state and a state or an empty journal for a call that
         * may run; a token allocation for one that must be refused. */
        size_t sizes[3] = {64, 64, 64};
        bool zero[3] = {false, false, true};
        const bool runs = c->verdict == V_OK || c->verdict == V_EITHER;
        if (runs && (!verify_target_sizes(c, sizes, zero) ||
                     mul(entries, sizes[0] + sizes[1] + sizes[2], &ovf) > ((size_t)32 << 20))) {
            free_call(f, c);
            return false;
        }
        fill_table_columns(f, c, c->tab[0], table_first(f, c), sizes, zero);
        return true;
    }

    /* Table targets: for a call that may run, exactly the shape's size; for one that must be
     * refused, a token allocation (if the library ran it anyway, the sanitizers would say). */
    bool too_big = false;
    size_t tbytes = target_bytes_for(c, &too_big);
    bool ovf2 = false;
    if (c->verdict != V_OK || too_big)
        tbytes = 64;
    else if (mul(entries * (c->tab[1] >= 0 ? 2 : 1), tbytes, &ovf2) > ((size_t)32 << 20) || ovf2) {
        /* Legitimate but too big to run quickly: skip it. */
        free_call(f, c);
        return false;
    }
    if (c->verdict == V_OK && too_big) {
        free_call(f, c);
        return false;
    }
    for (int i = 0; i < 2; i++)
        if (c->tab[i] >= 0)
            fill_table(f, c, c->tab[i], tbytes);
    return true;
}

/* The MemraVerifyArgs of a 1.1 call, on the heap and exactly as large as its struct_size says
 * where that is larger than this header's struct (so that a library reading past what it knows
 * is seen); NULL for the calls that pass no struct. Free it with free(). */
static MemraVerifyArgs *verify_args(const call *c)
{
    if (c->size_kind == SZ_NULL_ARGS)
        return NULL;
    const size_t size = sizeof(MemraVerifyArgs) + (c->size_kind == SZ_MORE ? 8 : 0);
    MemraVerifyArgs *a = calloc(1, size);
    if (a == NULL || memra_verify_args_init(a) != MEMRA_STATUS_OK)
        abort();
    a->struct_size = c->size_kind == SZ_MORE   ? size
                     : c->size_kind == SZ_LESS ? sizeof *a - 1
                     : c->size_kind == SZ_ZERO ? 0
                                               : sizeof *a;
    /* Every field as drawn, read or not: the SNAPSHOTS verify's row names them all. */
    oa_values v;
    call_values(c, &v);
    oa_fill_args(OA_V_SNAP, a, &v);
    return a;
}

static MemraStatus invoke(const call *c, MemraEngine *e)
{
    oa_values v;
    call_values(c, &v);
    MemraVerifyArgs *a = is_verify_op(c->op) ? verify_args(c) : NULL;
    MemraStatus st = oa_invoke(c->op, e, &v, a);
    free(a);
    return st;
}

/* ---- "Nothing written": a copy of every buffer and table target before a call ---- */

typedef struct shot {
    unsigned char *data;
    size_t bytes;
} shot;

static size_t memory_bytes(const fuzz *f, const call *c)
{
    size_t n = 0;
    for (int i = 0; i < f->nbuf; i++)
        n += f->buf[i].bytes;
    for (size_t i = 0; c != NULL && i < c->n_targets; i++)
        n += target_size(c, i);
    return n;
}

static void take(const fuzz *f, const call *c, shot *sh)
{
    sh->bytes = memory_bytes(f, c);
    sh->data = malloc(sh->bytes ? sh->bytes : 1);
    if (sh->data == NULL)
        abort();
    size_t at = 0;
    for (int i = 0; i < f->nbuf; i++) {
        if (f->buf[i].bytes == 0)
            continue;
        memcpy(sh->data + at, f->buf[i].ptr, f->buf[i].bytes);
        at += f->buf[i].bytes;
    }
    for (size_t i = 0; c != NULL && i < c->n_targets; i++) {
        size_t b = target_size(c, i);
        memcpy(sh->data + at, c->targets[i], b);
        at += b;
    }
}

static void compare(const fuzz *f, const call *c, shot *sh, const char *fn)
{
    size_t at = 0;
    for (int i = 0; i < f->nbuf; i++) {
        if (f->buf[i].bytes == 0)
            continue;
        if (memcmp(sh->data + at, f->buf[i].ptr, f->buf[i].bytes) != 0)
            die(fn, "a refused call changed a buffer", MEMRA_STATUS_INTERNAL);
        at += f->buf[i].bytes;
    }
    for (size_t i = 0; c != NULL && i < c->n_targets; i++) {
        size_t b = target_size(c, i);
        if (memcmp(sh->data + at, c->targets[i], b) != 0)
            die(fn, "a refused call changed memory behind a table entry", MEMRA_STATUS_INTERNAL);
        at += b;
    }
    free(sh->data);
}

/* Whether the snapshot of a call is affordable (targets can be megabytes). */
static bool affordable(const fuzz *f, const call *c)
{
    return memory_bytes(f, c) <= ((size_t)8 << 20);
}

/* ---- Commands ---- */

enum {
    CMD_OP,
    CMD_OP_AGAIN,
    CMD_ALLOC,
    CMD_FREE,
    CMD_HTOD,
    CMD_DTOH,
    CMD_CAPTURE,
    CMD_LAUNCH,
    CMD_GRAPH_DESTROY,
    CMD_SYNC,
    CMD_BAD_HANDLE,
    CMD_ENGINE_DESTROY,
    CMD_BAD_COUNT,
    CMD_JOURNAL_LEN,
    CMD_JOURNAL_GARBAGE,
    N_CMD
};

/* The commands the first corpus was written for: a command byte below 252 (18 * 14) picks one
 * of those fourteen as it always did, 252 and above the later ones. */
#define N_CMD_FIRST (CMD_JOURNAL_LEN + 1)
#define CMD_BYTE_FIRST (18 * N_CMD_FIRST)

static int draw_cmd(uint8_t x)
{
    if (x < CMD_BYTE_FIRST)
        return x % N_CMD_FIRST;
    return N_CMD_FIRST + (x - CMD_BYTE_FIRST) % (N_CMD - N_CMD_FIRST);
}

static void cmd_op(fuzz *f, reader *r)
{
    call c;
    if (!read_call(f, r, &c))
        return;
    shot sh = {0};
    bool look = c.verdict != V_OK && c.verdict != V_EITHER && affordable(f, &c);
    if (look)
        take(f, &c, &sh);
    MemraStatus st = invoke(&c, f->e);
    check_status(OP_NAME(c.op), c.verdict, st);
    if (look)
        compare(f, &c, &sh, OP_NAME(c.op));
    free_call(f, &c);
}

static void cmd_alloc(fuzz *f, reader *r)
{
    const uint8_t kind = rd8(r);
    bool u64 = kind & 1, u32 = !u64 && (kind & 2);
    size_t elem = u64 ? sizeof(uint64_t) : sizeof(float);
    size_t len = pick(r, 256);
    uint8_t init_byte = rd8(r);
    MemraAllocInit init = init_byte < 200 ? init_byte % 2 : init_byte;
    size_t bytes;
    bool overflow = __builtin_mul_overflow(len, elem, &bytes);
    bool valid = len > 0 && !overflow && init <= MEMRA_ALLOC_INIT_UNINIT;
    /* Requests the machine cannot hold are not the harness's business. */
    if (valid && bytes > ((size_t)16 << 20))
        return;
    MemraStatus st;
    void *ptr = NULL;
    if (u64) {
        MemraSliceMutU64 out;
        st = memra_alloc_u64(f->e, len, init, &out);
        ptr = out.ptr;
    } else if (u32) {
        MemraSliceMutU32 out;
        st = memra_alloc_u32(f->e, len, init, &out);
        ptr = out.ptr;
    } else {
        MemraSliceMutF32 out;
        st = memra_alloc_f32(f->e, len, init, &out);
        ptr = out.ptr;
    }
    check_status(u64   ? "memra_alloc_u64"
                 : u32 ? "memra_alloc_u32"
                       : "memra_alloc_f32",
                 valid ? V_OK : V_INVALID, st);
    if (st != MEMRA_STATUS_OK)
        return;
    memset(ptr, init_byte, bytes);
    if (add_buf(f, ptr, bytes, false) < 0 && memra_free(f->e, ptr) != MEMRA_STATUS_OK)
        die("memra_free", "freeing a fresh buffer failed", MEMRA_STATUS_INTERNAL);
}

static void cmd_free(fuzz *f, reader *r)
{
    int i = rd8(r) % f->nbuf;
    uint8_t how = rd8(r);
    hbuf *b = &f->buf[i];
    if (b->ptr == NULL || b->table || b->pins > 0 || i < DEFAULT_BUFS)
        return;
    MemraStatus st;
    if (how % 4 == 1) {
        /* Not the start of the buffer. */
        st = memra_free(f->e, b->ptr + 4);
        check_status("memra_free", V_INVALID, st);
        return;
    }
    if (how % 4 == 2) {
        char local[8];
        st = memra_free(f->e, local);
        check_status("memra_free", V_INVALID, st);
        return;
    }
    st = memra_free(f->e, b->ptr);
    check_status("memra_free", V_OK, st);
    drop_buf(f, i);
    if (how % 4 == 3)
        check_status("memra_free", V_OK, memra_free(f->e, NULL));
}

/* A host-side view drawn from the input over `host` (bytes). */
static void read_host_view(reader *r, unsigned char *host, size_t bytes, size_t elem, uintptr_t *p,
                           size_t *len)
{
    uint8_t mode = rd8(r), k = rd8(r);
    size_t off = mode & 1 ? 1 + k % (elem - 1) : (size_t)(k % 8) * elem;
    if (off > bytes)
        off = 0;
    *p = (uintptr_t)(host + off);
    *len = (bytes - off) / elem;
    if ((mode >> 1) % 4 == 1)
        *len = *len > 0 ? *len - 1 - k % (*len) : 0;
    if ((mode >> 1) % 4 == 2)
        *p = 0;
}

static void cmd_copy(fuzz *f, reader *r, bool to_device)
{
    int i = rd8(r) % f->nbuf;
    hbuf *b = &f->buf[i];
    if (b->ptr == NULL || b->table)
        return;
    const uint8_t kind = rd8(r);
    bool u64 = kind & 1, u32 = !u64 && (kind & 2);
    size_t elem = u64 ? sizeof(uint64_t) : sizeof(float);
    size_t host_bytes = 8 * (size_t)(rd8(r) + 1);
    unsigned char *host = malloc(host_bytes);
    if (host == NULL)
        abort();
    memset(host, 0x5a, host_bytes);
    /* The device side: a view of the buffer, or (CPU backend) of the host array itself to
     * overlap. */
    uint8_t mode = rd8(r), k = rd8(r);
    size_t off = (mode & 1) ? 1 + k % (elem - 1) : (size_t)k * elem;
    if (off > b->bytes)
        off = 0;
    uintptr_t dp = (uintptr_t)b->ptr + off;
    size_t dlen = (b->bytes - off) / elem;
    if (mode & 2)
        dlen = dlen > k ? k : dlen;
    uintptr_t hp;
    size_t hlen;
    read_host_view(r, host, host_bytes, elem, &hp, &hlen);
    bool overlap_host = mode & 4;
    if (overlap_host) {
        /* Both sides inside the same buffer: the CPU backend must refuse overlapping ranges. */
        hp = (uintptr_t)b->ptr + ((mode >> 3) & 3) * elem;
        hlen = (b->bytes - ((mode >> 3) & 3) * elem) / elem;
        if (hlen > dlen)
            hlen = dlen;
    }
    uintptr_t sp = to_device ? hp : dp, dst = to_device ? dp : hp;
    size_t slen = to_device ? hlen : dlen, dlen2 = to_device ? dlen : hlen;
    if (!to_device && slen > dlen2 && (mode & 8))
        slen = dlen2;
    if (to_device && slen > dlen2 && (mode & 8))
        slen = dlen2;

    /* The rules: pointers non-NULL where len > 0, aligned, dst at least as long as src, and no
     * overlap (CPU backend, where both sides are host memory). */
    bool bad = (sp == 0 && slen > 0) || (dst == 0 && dlen2 > 0) || dlen2 < slen ||
               (sp != 0 && sp % elem) || (dst != 0 && dst % elem);
    if (!bad && slen > 0 && sp < dst + slen * elem && dst < sp + slen * elem)
        bad = true;
    const char *fn = to_device ? (u64   ? "memra_htod_u64_into"
                                  : u32 ? "memra_htod_u32_into"
                                        : "memra_htod_f32_into")
                               : (u64   ? "memra_dtoh_u64"
                                  : u32 ? "memra_dtoh_u32"
                                        : "memra_dtoh_f32");
    shot sh = {0};
    unsigned char *host_copy = malloc(host_bytes);
    if (host_copy == NULL)
        abort();
    memcpy(host_copy, host, host_bytes);
    if (bad)
        take(f, NULL, &sh);
    MemraStatus st;
    if (u64) {
        MemraSliceU64 s = {(const uint64_t *)sp, slen};
        MemraSliceMutU64 d = {(uint64_t *)dst, dlen2};
        st = to_device ? memra_htod_u64_into(f->e, s, d) : memra_dtoh_u64(f->e, s, d);
    } else if (u32) {
        MemraSliceU32 s = {(const uint32_t *)sp, slen};
        MemraSliceMutU32 d = {(uint32_t *)dst, dlen2};
        st = to_device ? memra_htod_u32_into(f->e, s, d) : memra_dtoh_u32(f->e, s, d);
    } else {
        MemraSliceF32 s = {(const float *)sp, slen};
        MemraSliceMutF32 d = {(float *)dst, dlen2};
        st = to_device ? memra_htod_f32_into(f->e, s, d) : memra_dtoh_f32(f->e, s, d);
    }
    check_status(fn, bad ? V_INVALID : V_OK, st);
    if (bad) {
        compare(f, NULL, &sh, fn);
        if (memcmp(host, host_copy, host_bytes) != 0)
            die(fn, "a refused copy changed the host buffer", st);
    }
    free(host_copy);
    free(host);
}

/* A valid journal verify, commit or rollback with one bad count written into its counts (above
 * the rows a fresh journal holds, or 0 / above t for a rollback): it must be accepted, the next
 * synchronisation must report it naming the operation, that sequence's ring, state and third
 * table target must not change, and the engine must stay usable. */
static void cmd_bad_count(fuzz *f, reader *r)
{
    call c;
    if (!read_call(f, r, &c))
        return;
    const bool counted = c.op == OA_COMMIT || c.op == OA_ROLLBACK ||
                         (c.op == OA_V_SNAP && c.mode == MEMRA_VERIFY_MODE_JOURNAL);
    const uint8_t which = rd8(r), how = rd8(r);
    /* The table view may start anywhere in the call's table: sequence b's row is entries
     * first + 3b .. first + 3b + 2 of it. */
    const size_t first = table_first(f, &c);
    if (c.verdict != V_OK || !counted || c.b_n > 64 || c.n_targets < first + 3 * c.b_n) {
        free_call(f, &c);
        return;
    }
    const size_t b = which % c.b_n, row = first + 3 * b;
    uint32_t bad;
    if (c.op == OA_ROLLBACK)
        bad = how % 3 == 0 ? 0 : how % 3 == 1 ? (uint32_t)c.t + 1 : UINT32_MAX;
    else
        bad = how % 2 == 0 ? 1u + how % 16u : UINT32_MAX;
    MemraSliceU32 src = {&bad, 1};
    MemraSliceMutU32 dst = {(uint32_t *)c.p[VS_ACCEPTED] + b, 1};
    MemraStatus st = memra_htod_u32_into(f->e, src, dst);
    if (st != MEMRA_STATUS_OK)
        die("memra_htod_u32_into", "writing a bad count failed", st);
    unsigned char *before[3];
    for (int i = 0; i < 3; i++) {
        const size_t bytes = target_size(&c, row + (size_t)i);
        before[i] = malloc(bytes);
        if (before[i] == NULL)
            abort();
        memcpy(before[i], c.targets[row + (size_t)i], bytes);
    }
    check_status(OP_NAME(c.op), V_OK, invoke(&c, f->e));
    st = memra_engine_synchronize(f->e);
    if (st != MEMRA_STATUS_INVALID_ARGUMENT)
        die(OP_NAME(c.op), "a bad count must be reported by the next synchronisation", st);
    if (strstr(memra_last_error_message(), OP_NAME(c.op)) == NULL)
        die(OP_NAME(c.op), "the report of a bad count does not name the operation", st);
    for (int i = 0; i < 3; i++) {
        if (memcmp(before[i], c.targets[row + (size_t)i], target_size(&c, row + (size_t)i)))
            die(OP_NAME(c.op), "a bad count changed its sequence's buffers", st);
        free(before[i]);
    }
    check_status("memra_engine_synchronize", V_OK, memra_engine_synchronize(f->e));
    free_call(f, &c);
}

/* The journal header (the library's layout, kernels/kernels.h): ten u32 words, magic, format,
 * d_state, num_k, num_v, d_conv, head order, capacity, rows held, slot. */
#define JH_MAGIC UINT32_C(0x4a41524d)
#define JH_FORMAT UINT32_C(2)
enum { JH_T_MAX = 7, JH_ROWS = 8, JH_SLOT = 9, JH_WORDS = 10 };

/* The header a journal of call `c` must carry, up to its capacity `cap`. */
static void journal_wanted(const call *c, size_t cap, uint32_t want[JH_ROWS])
{
    const uint32_t w[JH_ROWS] = {JH_MAGIC,           JH_FORMAT,          (uint32_t)S,
                                 (uint32_t)c->num_k, (uint32_t)c->num_v, (uint32_t)c->d_conv,
                                 c->order,           (uint32_t)cap};
    memcpy(want, w, sizeof w);
}

/* The rules a journal must meet before anything is read from it (docs/verify-1.1.md): a 4-byte
 * aligned address; ten zero header words (empty), or the header of this shape and head order,
 * its capacity the declared one (when declared), its rows within its capacity, its slot 0 or 1;
 * a count no larger than the rows it holds. */
static bool journal_refused(const call *c, uint64_t entry, size_t cap, bool declared,
                            uint32_t count)
{
    uint32_t hd[JH_WORDS], want[JH_ROWS], any = 0, held = 0;
    if (entry == 0 || entry % 4 != 0)
        return true;
    memcpy(hd, (const void *)(uintptr_t)entry, sizeof hd);
    journal_wanted(c, cap, want);
    for (int i = 0; i < JH_WORDS; i++)
        any |= hd[i];
    if (any != 0) {
        for (int i = 0; i < JH_ROWS; i++)
            if (hd[i] != want[i] && (i != JH_T_MAX || declared))
                return true;
        if (hd[JH_ROWS] > hd[JH_T_MAX] || hd[JH_SLOT] > 1)
            return true;
        held = hd[JH_ROWS];
    }
    return count > held;
}

/* Part i of sequence b of a journal call whose table view starts at entry `first`: its ring,
 * state and journal (table targets), then its rows of o (o_words each, a verify only). */
static unsigned char *seq_part(const call *c, size_t first, size_t b, int i, size_t o_words,
                               size_t *bytes)
{
    if (i < 3) {
        *bytes = target_size(c, first + 3 * b + (size_t)i);
        return c->targets[first + 3 * b + (size_t)i];
    }
    *bytes = o_words * sizeof(float);
    return (unsigned char *)c->p[VS_O] + b * *bytes;
}

/* A valid journal verify or commit whose journals are filled from the input, each: left as it
 * is (empty), input bytes tiled over the whole buffer, a header the rules accept with drawn
 * capacity, rows and slot (the rows behind it are whatever the buffer holds), that header with
 * one word drawn, or its table entry NULL or misaligned; every count is drawn. journal_t_max
 * declares the capacity the journals were allocated with, or (drawn) nothing: a header is then
 * the only bound the library has, and one of this shape never claims more than the buffer
 * holds (a host that declares no capacity relies on its headers). journal_refused() says which
 * sequences the library must refuse: the next synchronisation must report one of them naming
 * the operation (or succeed when there is none), and a refused sequence's ring, state, journal
 * and rows of o must not change; the synchronisation after it must succeed. Everything the
 * library reads lies in exact-size allocations: a read past a journal is a sanitizer report. */
static void cmd_journal_garbage(fuzz *f, reader *r)
{
    call c;
    if (!read_call(f, r, &c))
        return;
    const bool journal =
        c.op == OA_COMMIT || (c.op == OA_V_SNAP && c.mode == MEMRA_VERIFY_MODE_JOURNAL);
    const size_t first = table_first(f, &c);
    if (c.verdict != V_OK || !journal || c.size_kind != SZ_EXACT || c.b_n > 64 ||
        c.n_targets < first + 3 * c.b_n) {
        free_call(f, &c);
        return;
    }
    /* The capacity the journals were allocated with (verify_target_sizes). */
    const size_t cap = c.op == OA_COMMIT ? 1 : c.t, b_n = c.b_n;
    const bool declared = rd8(r) < 192;
    uint64_t *entries = (uint64_t *)(void *)f->buf[c.tab[0]].ptr + first;
    uint64_t fresh[64];
    uint32_t counts[64];
    bool refused[64], any_refused = false;
    for (size_t b = 0; b < b_n; b++) {
        const size_t jt = first + 3 * b + 2, jbytes = target_size(&c, jt);
        unsigned char *j = c.targets[jt];
        uint32_t hd[JH_WORDS];
        const uint8_t how = rd8(r);
        fresh[b] = entries[3 * b + 2];
        switch (how % 5) {
        case 1: {
            uint8_t pattern[32];
            const size_t n = 1 + rd8(r) % sizeof pattern;
            for (size_t i = 0; i < n; i++)
                pattern[i] = rd8(r);
            for (size_t i = 0; i < jbytes; i++)
                j[i] = pattern[i % n];
            break;
        }
        case 2:
        case 3:
            journal_wanted(&c, cap, hd);
            hd[JH_T_MAX] = (uint32_t)pick(r, cap);
            hd[JH_ROWS] = (uint32_t)pick(r, 0);
            hd[JH_SLOT] = (uint32_t)pick(r, 0);
            if (how % 5 == 3) {
                const uint8_t w = rd8(r) % JH_WORDS;
                hd[w] = (uint32_t)pick(r, hd[w]);
            }
            memcpy(j, hd, sizeof hd);
            break;
        case 4:
            fresh[b] = rd8(r) % 2 ? 0 : fresh[b] + 1 + rd8(r) % 3;
            break;
        }
        if (!declared && jbytes >= sizeof hd) {
            uint32_t want[JH_ROWS];
            memcpy(hd, j, sizeof hd);
            journal_wanted(&c, cap, want);
            if (memcmp(hd, want, JH_T_MAX * sizeof *hd) == 0 && hd[JH_T_MAX] > cap) {
                hd[JH_T_MAX] = (uint32_t)cap;
                memcpy(j, hd, sizeof hd);
            }
        }
        counts[b] = (uint32_t)pick(r, 0);
        refused[b] = journal_refused(&c, fresh[b], cap, declared, counts[b]);
        any_refused |= refused[b];
    }
    for (size_t b = 0; b < b_n; b++) {
        const MemraSliceMutU64 edst = {entries + 3 * b + 2, 1};
        const MemraSliceU64 one = {&fresh[b], 1};
        MemraStatus st = memra_htod_u64_into(f->e, one, edst);
        if (st != MEMRA_STATUS_OK)
            die("memra_htod_u64_into", "writing a journal entry failed", st);
    }
    const MemraSliceU32 csrc = {counts, b_n};
    const MemraSliceMutU32 cdst = {(uint32_t *)c.p[VS_ACCEPTED], b_n};
    MemraStatus st = memra_htod_u32_into(f->e, csrc, cdst);
    if (st != MEMRA_STATUS_OK)
        die("memra_htod_u32_into", "writing the counts failed", st);

    /* What every refused sequence holds: its three table targets and its rows of o (the verify
     * rows name o at the same slot). */
    _Static_assert(OA_SLOT(V_JOURNAL, o) == VS_O, "the journal verify's o slot");
    const size_t o_words = c.op == OA_V_SNAP ? c.t * c.num_v * S : 0;
    unsigned char *before[64][4];
    const int parts = o_words > 0 ? 4 : 3;
    for (size_t b = 0; b < b_n; b++) {
        for (int i = 0; i < parts && refused[b]; i++) {
            size_t bytes;
            const unsigned char *src = seq_part(&c, first, b, i, o_words, &bytes);
            before[b][i] = malloc(bytes ? bytes : 1);
            if (before[b][i] == NULL)
                abort();
            memcpy(before[b][i], src, bytes);
        }
    }
    MemraVerifyArgs *a = verify_args(&c);
    oa_values v;
    call_values(&c, &v);
    a->journal_t_max = declared ? cap : 0;
    st = oa_invoke(c.op, f->e, &v, a);
    free(a);
    check_status(OP_NAME(c.op), V_OK, st);
    st = memra_engine_synchronize(f->e);
    if (tracing())
        fprintf(stderr, "fuzz_abi: %s with filled journals (%s capacity %zu): %s%s%s\n",
                OP_NAME(c.op), declared ? "declared" : "undeclared", cap, memra_status_string(st),
                st == MEMRA_STATUS_OK ? "" : ": ",
                st == MEMRA_STATUS_OK ? "" : memra_last_error_message());
    if (st != (any_refused ? MEMRA_STATUS_INVALID_ARGUMENT : MEMRA_STATUS_OK))
        die(OP_NAME(c.op),
            any_refused ? "a journal the rules refuse must be reported by the next synchronisation"
                        : "journals the rules accept were reported",
            st);
    if (any_refused && strstr(memra_last_error_message(), OP_NAME(c.op)) == NULL)
        die(OP_NAME(c.op), "the report of a refused journal does not name the operation", st);
    for (size_t b = 0; b < b_n; b++) {
        for (int i = 0; i < parts && refused[b]; i++) {
            size_t bytes;
            const unsigned char *now = seq_part(&c, first, b, i, o_words, &bytes);
            if (memcmp(before[b][i], now, bytes) != 0)
                die(OP_NAME(c.op), "a refused journal's sequence was written", st);
            free(before[b][i]);
        }
    }
    check_status("memra_engine_synchronize", V_OK, memra_engine_synchronize(f->e));
    free_call(f, &c);
}

/* memra_gdn_journal_len with drawn arguments. The journal's layout is the library's, so the
 * oracle knows only a lower bound of the length: far below size_t's range the call must
 * succeed, far above it it must be refused, and in between either is right. */
static void cmd_journal_len(reader *r)
{
    const size_t d_state = pick(r, S), num_k = pick(r, 1), num_v = pick(r, num_k),
                 t_max = pick(r, 2);
    const bool null_out = rd8(r) == 255;
    bool ovf = false;
    const size_t conv = add(mul(2 * S, num_k, &ovf), mul(S, num_v, &ovf), &ovf);
    const size_t low = mul(add(conv, 2 * num_v, &ovf), t_max, &ovf);
    int verdict;
    if (null_out || num_k == 0 || num_v == 0 || t_max == 0 || (num_k && num_v % num_k))
        verdict = d_state != S ? V_REFUSE : V_INVALID;
    else if (d_state != S)
        verdict = d_state == 0 ? V_REFUSE : V_UNSUPPORTED;
    else if (ovf || low > SIZE_MAX / sizeof(float) || t_max > UINT32_MAX)
        verdict = V_INVALID; /* a journal's header records t_max in 32 bits */
    else if (low < ((size_t)1 << 48))
        verdict = V_OK;
    else
        verdict = V_EITHER;
    size_t out = 0x5e7e5e7e;
    MemraStatus st = memra_gdn_journal_len(d_state, num_k, num_v, t_max, null_out ? NULL : &out);
    check_status("memra_gdn_journal_len", verdict, st);
    if (st != MEMRA_STATUS_OK && out != 0x5e7e5e7e)
        die("memra_gdn_journal_len", "a refused call wrote *out_len", st);
}

/* A step that replays prepared calls, optionally misbehaving. */
typedef struct step_ctx {
    fuzz *f;
    call *calls;
    int n;
    int misbehave;
    int calls_made;
} step_ctx;

enum { MB_NONE, MB_SYNC, MB_HTOD, MB_DTOH, MB_FAIL_THIRD, MB_ALLOC, MB_NESTED, MB_COUNT };

static MemraStatus empty_step(MemraEngine *e, void *user)
{
    return MEMRA_STATUS_OK;
}

static MemraStatus fuzz_step(MemraEngine *e, void *user)
{
    step_ctx *x = user;
    float host[4] = {0};
    x->calls_made++;
    switch (x->misbehave) {
    case MB_SYNC: {
        MemraStatus st = memra_engine_synchronize(e);
        if (st != MEMRA_STATUS_CAPTURE_ERROR)
            die("memra_engine_synchronize", "inside a capture it must be CAPTURE_ERROR", st);
        return st;
    }
    case MB_HTOD: {
        MemraSliceF32 src = {host, 4};
        MemraSliceMutF32 dst = {(float *)(void *)x->f->buf[0].ptr, 4};
        MemraStatus st = memra_htod_f32_into(e, src, dst);
        if (st != MEMRA_STATUS_CAPTURE_ERROR)
            die("memra_htod_f32_into", "inside a capture it must be CAPTURE_ERROR", st);
        return st;
    }
    case MB_DTOH: {
        MemraSliceF32 src = {(const float *)(void *)x->f->buf[0].ptr, 4};
        MemraSliceMutF32 dst = {host, 4};
        MemraStatus st = memra_dtoh_f32(e, src, dst);
        if (st != MEMRA_STATUS_CAPTURE_ERROR)
            die("memra_dtoh_f32", "inside a capture it must be CAPTURE_ERROR", st);
        return st;
    }
    case MB_NESTED: {
        MemraGraph *inner = NULL;
        MemraStatus st = memra_graph_capture(e, empty_step, NULL, &inner);
        if (st != MEMRA_STATUS_CAPTURE_ERROR || inner != NULL)
            die("memra_graph_capture", "a nested capture must be CAPTURE_ERROR", st);
        return st;
    }
    case MB_ALLOC: {
        /* Allowed: the buffers belong to the graph (or die with a failed capture). */
        MemraSliceMutF32 a, b;
        if (memra_alloc_f32(e, 100, MEMRA_ALLOC_INIT_ZEROED, &a) != MEMRA_STATUS_OK ||
            memra_alloc_f32(e, 50, MEMRA_ALLOC_INIT_UNINIT, &b) != MEMRA_STATUS_OK ||
            memra_free(e, b.ptr) != MEMRA_STATUS_OK)
            die("memra_alloc_f32", "allocating inside a capture failed", MEMRA_STATUS_INTERNAL);
        break;
    }
    }
    for (int i = 0; i < x->n; i++) {
        MemraStatus st = invoke(&x->calls[i], e);
        check_status(OP_NAME(x->calls[i].op), x->calls[i].verdict, st);
        if (st != MEMRA_STATUS_OK)
            return st;
    }
    if (x->misbehave == MB_FAIL_THIRD && x->calls_made == 3)
        return MEMRA_STATUS_INVALID_ARGUMENT;
    return MEMRA_STATUS_OK;
}

static void cmd_capture(fuzz *f, reader *r)
{
    int slot = -1;
    for (int g = 0; g < MAX_GRAPHS; g++)
        if (f->graph[g] == NULL) {
            slot = g;
            break;
        }
    if (slot < 0)
        return;
    int n = 1 + rd8(r) % MAX_PREPARED;
    int misbehave = rd8(r) % MB_COUNT;
    call *calls = f->prepared[slot];
    int made = 0;
    bool all_ok = true;
    for (int i = 0; i < n; i++) {
        if (!read_call(f, r, &calls[made]))
            continue;
        if (calls[made].verdict == V_EITHER) {
            free_call(f, &calls[made]);
            continue;
        }
        all_ok &= calls[made].verdict == V_OK;
        made++;
    }
    step_ctx x = {.f = f, .calls = calls, .n = made, .misbehave = misbehave};
    MemraGraph *g = NULL;
    MemraStatus st = memra_graph_capture(f->e, fuzz_step, &x, &g);
    bool expect_ok = all_ok && misbehave != MB_SYNC && misbehave != MB_HTOD &&
                     misbehave != MB_DTOH && misbehave != MB_FAIL_THIRD && misbehave != MB_NESTED;
    if (expect_ok ? st != MEMRA_STATUS_OK : st != MEMRA_STATUS_CAPTURE_ERROR)
        die("memra_graph_capture",
            expect_ok ? "a good step must capture"
                      : "a bad step must be "
                        "CAPTURE_ERROR",
            st);
    if (st != MEMRA_STATUS_OK) {
        if (g != NULL)
            die("memra_graph_capture", "a failed capture wrote *out_graph", st);
        for (int i = 0; i < made; i++)
            free_call(f, &calls[i]);
        return;
    }
    f->graph[slot] = g;
    f->n_prepared[slot] = made;
    for (int i = 0; i < made; i++)
        for (int s = 0; s < calls[i].n; s++)
            if (calls[i].uses[s] >= 0)
                f->buf[calls[i].uses[s]].pins++;
}

static void release_graph(fuzz *f, int slot)
{
    for (int i = 0; i < f->n_prepared[slot]; i++) {
        call *c = &f->prepared[slot][i];
        for (int s = 0; s < c->n; s++)
            if (c->uses[s] >= 0)
                f->buf[c->uses[s]].pins--;
        free_call(f, c);
    }
    f->n_prepared[slot] = 0;
    f->graph[slot] = NULL;
}

/* Replays a live graph (one to three times) or destroys it, or passes it with the second
 * engine, which must be refused. */
static void cmd_graph(fuzz *f, reader *r, bool destroy)
{
    const int slot = rd8(r) % MAX_GRAPHS;
    const uint8_t how = rd8(r);
    MemraGraph *g = f->graph[slot];
    if (g == NULL)
        return;
    const char *fn = destroy ? "memra_graph_destroy" : "memra_graph_launch";
    const bool foreign = destroy ? how % 2 == 1 : how % 4 == 1;
    MemraEngine *e = foreign ? f->e2 : f->e;
    const int calls = destroy || foreign ? 1 : 1 + how % 3;
    for (int i = 0; i < calls; i++)
        check_status(fn, foreign ? V_INVALID : V_OK,
                     destroy ? memra_graph_destroy(e, g) : memra_graph_launch(e, g));
    if (destroy && !foreign)
        release_graph(f, slot);
}

static MemraEngine *cpu_engine(void);

/* Makes call `which` of those below with engine `e` and graph `g`, neither of which is a live
 * handle (the graph is used with the live engine): each must be refused. */
enum {
    HC_SYNC,
    HC_OP,
    HC_ALLOC,
    HC_CAPTURE,
    HC_LAUNCH,
    HC_GRAPH_DESTROY,
    HC_ENGINE_DESTROY,
    HC_BACKEND,
};

static void call_with_bad_handle(fuzz *f, reader *r, int which, MemraEngine *e, MemraGraph *g)
{
    switch (which) {
    case HC_SYNC:
        check_status("memra_engine_synchronize", V_INVALID, memra_engine_synchronize(e));
        break;
    case HC_OP: {
        call c;
        if (!read_call(f, r, &c))
            return;
        check_status(OP_NAME(c.op), c.verdict == V_ABI ? V_BAD_HANDLE : V_INVALID, invoke(&c, e));
        free_call(f, &c);
        break;
    }
    case HC_ALLOC: {
        MemraSliceMutF32 out;
        check_status("memra_alloc_f32", V_INVALID,
                     memra_alloc_f32(e, 16, MEMRA_ALLOC_INIT_ZEROED, &out));
        break;
    }
    case HC_CAPTURE: {
        MemraGraph *again = NULL;
        check_status("memra_graph_capture", V_INVALID,
                     memra_graph_capture(e, empty_step, NULL, &again));
        break;
    }
    case HC_LAUNCH:
        check_status("memra_graph_launch", V_INVALID, memra_graph_launch(f->e, g));
        break;
    case HC_GRAPH_DESTROY:
        check_status("memra_graph_destroy", V_INVALID, memra_graph_destroy(f->e, g));
        break;
    case HC_ENGINE_DESTROY:
        check_status("memra_engine_destroy", V_INVALID, memra_engine_destroy(e));
        break;
    case HC_BACKEND: {
        MemraBackend kind;
        check_status("memra_engine_backend", V_INVALID, memra_engine_backend(e, &kind));
        break;
    }
    }
}

/* Calls through the handles of an engine and a graph that were just destroyed: they must be
 * refused whatever the allocator left in the freed memory (the corpus also runs under valgrind
 * and with jemalloc preloaded). */
static void cmd_dead_handle(fuzz *f, reader *r, uint8_t which)
{
    MemraEngine *dead = cpu_engine();
    MemraGraph *g = NULL;
    check_status("memra_graph_capture", V_OK, memra_graph_capture(dead, empty_step, NULL, &g));
    check_status("memra_graph_destroy", V_OK, memra_graph_destroy(dead, g));
    check_status("memra_engine_destroy", V_OK, memra_engine_destroy(dead));
    call_with_bad_handle(f, r, (which >> 1) % 8, dead, g);
}

/* Calls with NULL or with memory that is not a handle. */
static void cmd_bad_handle(fuzz *f, reader *r)
{
    /* Word-aligned memory that is not a handle (never the input's bytes, which could spell a
     * live handle). */
    static uint64_t garbage[32];
    memset(garbage, 0xa5, sizeof garbage);
    uint8_t which = rd8(r);
    if (which >= 0xc0) {
        cmd_dead_handle(f, r, which);
        return;
    }
    MemraEngine *e = which & 1 ? (MemraEngine *)(void *)garbage : NULL;
    const int pick_call = (which >> 1) % 6;
    /* Destroying NULL is allowed (a no-op): only garbage is destroyed. */
    if (pick_call == 5 && !(which & 1))
        return;
    call_with_bad_handle(f, r, pick_call == 5 ? HC_ENGINE_DESTROY : pick_call, e,
                         (MemraGraph *)(void *)garbage);
}

static void cmd_engine_destroy(fuzz *f)
{
    bool graphs = false;
    for (int g = 0; g < MAX_GRAPHS; g++)
        graphs |= f->graph[g] != NULL;
    /* With graphs alive the engine must refuse to go, and stay usable. */
    if (graphs)
        check_status("memra_engine_destroy", V_INVALID, memra_engine_destroy(f->e));
}

static MemraEngine *cpu_engine(void)
{
    MemraEngineOptions o;
    MemraEngine *e = NULL;
    if (memra_engine_options_init(&o) != MEMRA_STATUS_OK)
        abort();
    o.backend = MEMRA_BACKEND_CPU;
    o.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    MemraStatus st = memra_engine_create(&o, &e);
    if (st != MEMRA_STATUS_OK)
        die("memra_engine_create", "a CPU engine could not be created", st);
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fuzz f;
    reader r = {data, size};
    memset(&f, 0, sizeof f);
    f.e = cpu_engine();
    f.e2 = cpu_engine();
    for (int i = 0; i < DEFAULT_BUFS; i++)
        new_data_buf(&f, DEFAULT_WORDS, (uint8_t)i);

    /* At most 64 commands: the point is many short programs, not a few long ones. */
    for (int steps = 0; steps < 64 && r.n > 0 && f.nbuf < MAX_BUFS - 4; steps++) {
        switch (draw_cmd(rd8(&r))) {
        case CMD_OP:
        case CMD_OP_AGAIN:
            cmd_op(&f, &r);
            break;
        case CMD_ALLOC:
            cmd_alloc(&f, &r);
            break;
        case CMD_FREE:
            cmd_free(&f, &r);
            break;
        case CMD_HTOD:
            cmd_copy(&f, &r, true);
            break;
        case CMD_DTOH:
            cmd_copy(&f, &r, false);
            break;
        case CMD_CAPTURE:
            cmd_capture(&f, &r);
            break;
        case CMD_LAUNCH:
            cmd_graph(&f, &r, false);
            break;
        case CMD_GRAPH_DESTROY:
            cmd_graph(&f, &r, true);
            break;
        case CMD_SYNC:
            check_status("memra_engine_synchronize", V_OK, memra_engine_synchronize(f.e));
            break;
        case CMD_BAD_HANDLE:
            cmd_bad_handle(&f, &r);
            break;
        case CMD_ENGINE_DESTROY:
            cmd_engine_destroy(&f);
            break;
        case CMD_BAD_COUNT:
            cmd_bad_count(&f, &r);
            break;
        case CMD_JOURNAL_LEN:
            cmd_journal_len(&r);
            break;
        case CMD_JOURNAL_GARBAGE:
            cmd_journal_garbage(&f, &r);
            break;
        }
    }

    /* Teardown: graphs first (the engine refuses to go while they live), then the engines,
     * which free every buffer still allocated; the leak check sees anything they miss. */
    for (int g = 0; g < MAX_GRAPHS; g++) {
        if (f.graph[g] == NULL)
            continue;
        check_status("memra_graph_destroy", V_OK, memra_graph_destroy(f.e, f.graph[g]));
        for (int i = 0; i < f.n_prepared[g]; i++) {
            call *c = &f.prepared[g][i];
            for (size_t k = 0; k < c->n_targets; k++)
                free(c->targets[k]);
            free(c->targets);
            free(c->tsizes);
        }
    }
    check_status("memra_engine_destroy", V_OK, memra_engine_destroy(f.e));
    check_status("memra_engine_destroy", V_OK, memra_engine_destroy(f.e2));
    return 0;
}
