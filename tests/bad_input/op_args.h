/*
 * The operations' argument slots (tests/bad_input/op_args.def) as data and as calls: what the
 * bad-input suites and the fuzzer share. Plain C11 over the public header, no Criterion, so
 * that the fuzzer (built on its own by mk/sanitize.mk) includes it too.
 *
 * A call is an oa_values: the address and length of every slot (by its position in the
 * operation's row list) as integers, so that a case can point anywhere (NULL, misaligned, the
 * top of the address space) without pointer arithmetic outside an object, and every scalar
 * (by its name, OA_SC_*). oa_invoke() makes the call; an ARGS operation takes its
 * MemraVerifyArgs from the caller, which oa_fill_args() fills from the values.
 */
#ifndef MEMRA_TEST_OP_ARGS_H
#define MEMRA_TEST_OP_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memra.h"

/* The scalars any operation takes, by name (a row's name picks one). */
enum {
    OA_SC_d_state,
    OA_SC_num_v,
    OA_SC_num_k,
    OA_SC_key_dim,
    OA_SC_conv_dim,
    OA_SC_d_conv,
    OA_SC_t,
    OA_SC_b_n,
    OA_SC_mode,
    OA_SC_head_order,
    OA_SC_eps,
    OA_SC_scale,
    OA_SC_n,
    OA_SC_words,
    OA_SC_dst_off,
    OA_N_SC
};
#define OA_SC_IS_FLOAT(sc) ((sc) == OA_SC_eps || (sc) == OA_SC_scale)

/* Slot kinds. */
enum { OA_K_IN, OA_K_TAB, OA_K_U32, OA_K_OUT, OA_K_OPT, OA_K_INOUT, OA_K_EMPTY, OA_K_IGNORED };

/* Length factors. */
enum {
    OA_F_ONE,
    OA_F_B,
    OA_F_T,
    OA_F_T1,
    OA_F_CONV,
    OA_F_DCONV,
    OA_F_PAD,
    OA_F_NV,
    OA_F_DS,
    OA_F_S,
    OA_F_SS,
    OA_F_TABW,
    OA_F_N,
    OA_F_WORDS,
    OA_F_TWO,
    OA_F_OFF_N,
};

/* Regions of the bad-input world that the baseline views lie in. The pointer tables' regions
 * name what their entries point at: rings, canonical states, alternate states, or the packed
 * rows [ring, canonical state, alternate state or journal]. */
enum {
    OA_R_QKV,
    OA_R_W,
    OA_R_CONV_OUT,
    OA_R_SNAP_CONV,
    OA_R_BETA_RAW,
    OA_R_ALPHA,
    OA_R_DT_BIAS,
    OA_R_A,
    OA_R_ACC_J,
    OA_R_ACC_R,
    OA_R_Q,
    OA_R_K,
    OA_R_VG,
    OA_R_BETA,
    OA_R_GLOG,
    OA_R_O,
    OA_R_SNAP_SSM,
    OA_R_CONV_STATE,
    OA_R_STATE_IN,
    OA_R_STATE_OUT,
    OA_R_TAB_RING,
    OA_R_TAB_IN,
    OA_R_TAB_OUT,
    OA_R_TABLE,
    OA_R_TABLE_J,
    OA_R_COPY_TABLE,
    OA_R_SRC_PTR,
    OA_R_COPY_DST,
    OA_N_SLOT_REGIONS
};

/* Baseline values of scalars (resolved by the bad-input world). */
enum {
    OA_Q_S,
    OA_Q_NK,
    OA_Q_NV,
    OA_Q_KEY,
    OA_Q_VAL,
    OA_Q_CONV,
    OA_Q_DCONV,
    OA_Q_T,
    OA_Q_B,
    OA_Q_ROWS,
    OA_Q_MODE,
    OA_Q_TILED,
    OA_Q_EPS,
    OA_Q_SCALE,
    OA_Q_ITEMS,
    OA_Q_WORDS,
    OA_Q_ZERO,
    OA_Q_LITERAL,
};

enum { OA_FORM_POS, OA_FORM_ARGS };
#define OA_MODE_NONE UINT32_MAX
#define OA_MODE_SNAPSHOTS MEMRA_VERIFY_MODE_SNAPSHOTS
#define OA_MODE_FINAL_ONLY MEMRA_VERIFY_MODE_FINAL_ONLY
#define OA_MODE_JOURNAL MEMRA_VERIFY_MODE_JOURNAL

/* The flat list of rows: operation markers and slots, in the file's order. */
enum {
#define OP(id, fn, form, mode, label, fuzz) OA_FLAT_##id,
#define SLICE(id, name, ...) OA_FLAT_##id##_##name,
#define FIELD SLICE
#define END(id) OA_FLAT_END_##id,
#include "op_args.def"
    OA_N_FLAT
};

/* The operations. */
enum {
#define OP(id, fn, form, mode, label, fuzz) OA_##id,
#include "op_args.def"
    OA_N_OP
};

/* The position of slot `name` among the slots of operation `id`. */
#define OA_SLOT(id, name) (OA_FLAT_##id##_##name - OA_FLAT_##id - 1)

typedef struct oa_slot {
    const char *name;
    int kind;
    int region;
    int f[4];
    /* Where an ARGS operation's field lies in MemraVerifyArgs. */
    size_t offset;
} oa_slot;

typedef struct oa_op {
    const char *fn;
    const char *label;
    int form;
    uint32_t mode;
    bool fuzz;
    /* The first of its slots in OA_SLOTS, and how many. */
    int first, n;
    /* 1 + the OA_Q_* baseline of each scalar it reads; 0 for those it does not read. */
    int base[OA_N_SC];
} oa_op;

#define OA_MAX_SLOTS 17

/* Every slot, operation after operation (OA_OPS[op].first is the first of op's). */
static const oa_slot OA_SLOTS[] = {
#define SLICE(id, name, kind, region, f1, f2, f3, f4)                                              \
    {#name, OA_K_##kind, OA_R_##region, {OA_F_##f1, OA_F_##f2, OA_F_##f3, OA_F_##f4}, 0},
#define FIELD(id, name, kind, region, f1, f2, f3, f4)                                              \
    {#name,                                                                                        \
     OA_K_##kind,                                                                                  \
     OA_R_##region,                                                                                \
     {OA_F_##f1, OA_F_##f2, OA_F_##f3, OA_F_##f4},                                                 \
     offsetof(MemraVerifyArgs, name)},
#include "op_args.def"
};

static const oa_op OA_OPS[OA_N_OP] = {
#define OP(id, fn_, form_, mode_, label_, fuzz_)                                                   \
    [OA_##id] = {.fn = #fn_,                                                                       \
                 .label = label_,                                                                  \
                 .form = OA_FORM_##form_,                                                          \
                 .mode = OA_MODE_##mode_,                                                          \
                 .fuzz = fuzz_,                                                                    \
                 .first = OA_FLAT_##id - 2 * OA_##id,                                              \
                 .n = OA_FLAT_END_##id - OA_FLAT_##id - 1,                                         \
                 .base = {
#define END(id)                                                                                    \
    }                                                                                              \
    }                                                                                              \
    ,
#define SIZE(id, name, base_) [OA_SC_##name] = 1 + OA_Q_##base_,
#define OFFSET SIZE
#define ENUM SIZE
#define FLOAT SIZE
#define FSIZE SIZE
#define FENUM SIZE
#define FFLOAT SIZE
#include "op_args.def"
};

/* In-place updates the rules allow: slot `slot` of `op` exactly on slot `other`. */
typedef struct oa_alias {
    int op, slot, other;
} oa_alias;

static const oa_alias OA_ALIASES[] = {
#define ALIAS(id, name, other) {OA_##id, OA_SLOT(id, name), OA_SLOT(id, other)},
#include "op_args.def"
    {-1, -1, -1},
};

/* Size scalars for which 0 is a valid value (OFFSET rows). */
typedef struct oa_zero_ok {
    int op, sc;
} oa_zero_ok;

static const oa_zero_ok OA_ZERO_OK[] = {
#define OFFSET(id, name, base) {OA_##id, OA_SC_##name},
#include "op_args.def"
    {-1, -1},
};

static inline bool oa_zero_valid(int op, int sc)
{
    for (const oa_zero_ok *z = OA_ZERO_OK; z->op >= 0; z++)
        if (z->op == op && z->sc == sc)
            return true;
    return false;
}

static inline const oa_slot *oa_slot_of(int op, int s)
{
    return &OA_SLOTS[OA_OPS[op].first + s];
}

static inline bool oa_may_alias(int op, int s, int other)
{
    for (const oa_alias *a = OA_ALIASES; a->op >= 0; a++)
        if (a->op == op && a->slot == s && a->other == other)
            return true;
    return false;
}

static inline bool oa_reads(int op, int s)
{
    const int k = oa_slot_of(op, s)->kind;
    return k != OA_K_EMPTY && k != OA_K_IGNORED;
}

static inline bool oa_is_output(int op, int s)
{
    const int k = oa_slot_of(op, s)->kind;
    return k == OA_K_OUT || k == OA_K_OPT || k == OA_K_INOUT;
}

static inline size_t oa_elem(int op, int s)
{
    const int k = oa_slot_of(op, s)->kind;
    return k == OA_K_TAB ? sizeof(uint64_t) : k == OA_K_U32 ? sizeof(uint32_t) : sizeof(float);
}

static inline int oa_slot_named(int op, const char *name)
{
    for (int s = 0; s < OA_OPS[op].n; s++)
        if (strcmp(oa_slot_of(op, s)->name, name) == 0)
            return s;
    return -1;
}

/* One call's arguments. */
typedef struct oa_values {
    uintptr_t p[OA_MAX_SLOTS];
    size_t len[OA_MAX_SLOTS];
    size_t z[OA_N_SC];
    float f[OA_N_SC];
} oa_values;

/* Saturating size arithmetic: SIZE_MAX stands for "overflowed", and *ovf says it did. */
static inline size_t oa_mul(size_t a, size_t b, bool *ovf)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *ovf = true;
        return SIZE_MAX;
    }
    return r;
}

static inline size_t oa_add(size_t a, size_t b, bool *ovf)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *ovf = true;
        return SIZE_MAX;
    }
    return r;
}

/* The value of length factor `f` for a call of `op` with scalars `z`. */
static inline size_t oa_factor(int op, int f, const size_t *z, bool *ovf)
{
    const size_t S = MEMRA_D_STATE;
    switch (f) {
    case OA_F_B:
        return z[OA_SC_b_n];
    case OA_F_T:
        return z[OA_SC_t];
    case OA_F_T1:
        return z[OA_SC_t] >= 1 ? z[OA_SC_t] - 1 : 0;
    case OA_F_CONV:
        if (OA_OPS[op].form == OA_FORM_POS)
            return z[OA_SC_conv_dim];
        return oa_add(oa_mul(oa_mul(S, z[OA_SC_num_k], ovf), 2, ovf),
                      oa_mul(S, z[OA_SC_num_v], ovf), ovf);
    case OA_F_DCONV:
        return z[OA_SC_d_conv];
    case OA_F_PAD:
        return z[OA_SC_d_conv] >= 1 ? z[OA_SC_d_conv] - 1 : 0;
    case OA_F_NV:
        return z[OA_SC_num_v];
    case OA_F_DS:
        return z[OA_SC_d_state];
    case OA_F_S:
        return S;
    case OA_F_SS:
        return S * S;
    case OA_F_TABW:
        return MEMRA_TABLE_WIDTH;
    case OA_F_N:
        return z[OA_SC_n];
    case OA_F_WORDS:
        return z[OA_SC_words];
    case OA_F_TWO:
        return 2;
    case OA_F_OFF_N:
        return oa_add(z[OA_SC_dst_off], z[OA_SC_n], ovf);
    }
    return 1;
}

/* The elements slot `s` of `op` needs for the scalars `z` (0 for a slot it does not read). */
static inline size_t oa_need(int op, int s, const size_t *z, bool *ovf)
{
    const oa_slot *sl = oa_slot_of(op, s);
    if (!oa_reads(op, s))
        return 0;
    size_t n = 1;
    for (int i = 0; i < 4; i++)
        n = oa_mul(n, oa_factor(op, sl->f[i], z, ovf), ovf);
    return n;
}

#define OA_VIEW_IN(v, i) ((MemraSliceF32){(const float *)(v)->p[i], (v)->len[i]})
#define OA_VIEW_OUT(v, i) ((MemraSliceMutF32){(float *)(v)->p[i], (v)->len[i]})
#define OA_VIEW_OPT OA_VIEW_OUT
#define OA_VIEW_INOUT OA_VIEW_OUT
#define OA_VIEW_TAB(v, i) ((MemraSliceU64){(const uint64_t *)(v)->p[i], (v)->len[i]})
#define OA_VIEW_U32(v, i) ((MemraSliceU32){(const uint32_t *)(v)->p[i], (v)->len[i]})

/* Every slice of MemraVerifyArgs is {pointer, size_t len}. */
typedef struct oa_raw_slice {
    uintptr_t ptr;
    size_t len;
} oa_raw_slice;

_Static_assert(sizeof(oa_raw_slice) == sizeof(MemraSliceF32) &&
                   sizeof(oa_raw_slice) == sizeof(MemraSliceU32) &&
                   sizeof(oa_raw_slice) == sizeof(MemraSliceMutF32) &&
                   sizeof(oa_raw_slice) == sizeof(MemraSliceU64),
               "slices are {pointer, length}");

static inline oa_raw_slice oa_get_field(const MemraVerifyArgs *a, int op, int s)
{
    oa_raw_slice r;
    memcpy(&r, (const char *)a + oa_slot_of(op, s)->offset, sizeof r);
    return r;
}

static inline void oa_set_field(MemraVerifyArgs *a, int op, int s, uintptr_t ptr, size_t len)
{
    const oa_raw_slice r = {ptr, len};
    memcpy((char *)a + oa_slot_of(op, s)->offset, &r, sizeof r);
}

/* Fills the fields of `a` that ARGS operation `op` reads from `v` (slices it does not read are
 * taken from `v` too: a caller leaves them {NULL, 0} or spoils them on purpose); the others
 * keep what `a` holds. */
static inline void oa_fill_args(int op, MemraVerifyArgs *a, const oa_values *v)
{
    for (int s = 0; s < OA_OPS[op].n; s++)
        oa_set_field(a, op, s, v->p[s], v->len[s]);
    const int *base = OA_OPS[op].base;
    if (base[OA_SC_mode])
        a->mode = (MemraVerifyMode)v->z[OA_SC_mode];
    if (base[OA_SC_head_order])
        a->head_order = (MemraHeadOrder)v->z[OA_SC_head_order];
#define OA_FILL_SIZE(name)                                                                         \
    if (base[OA_SC_##name])                                                                        \
        a->name = v->z[OA_SC_##name];
    OA_FILL_SIZE(d_state)
    OA_FILL_SIZE(num_k)
    OA_FILL_SIZE(num_v)
    OA_FILL_SIZE(d_conv)
    OA_FILL_SIZE(t)
    OA_FILL_SIZE(b_n)
#undef OA_FILL_SIZE
    if (base[OA_SC_eps])
        a->eps = v->f[OA_SC_eps];
    if (base[OA_SC_scale])
        a->scale = v->f[OA_SC_scale];
}

/* Calls `op` on engine `e`: a POS operation with the views and scalars of `v`, an ARGS
 * operation with `args` (which may be anything, NULL included). */
static inline MemraStatus oa_invoke(int op, MemraEngine *e, const oa_values *v,
                                    const MemraVerifyArgs *args)
{
    switch (op) {
#define OA_OPEN_POS(id, fn)                                                                        \
    case OA_##id: return fn(e
#define OA_OPEN_ARGS(id, fn)                                                                       \
    case OA_##id: return fn(e, args
#define OP(id, fn, form, mode, label, fuzz) OA_OPEN_##form(id, fn)
#define SLICE(id, name, kind, ...) , OA_VIEW_##kind(v, OA_SLOT(id, name))
#define SIZE(id, name, base) , v->z[OA_SC_##name]
#define OFFSET SIZE
#define ENUM SIZE
#define FLOAT(id, name, base) , v->f[OA_SC_##name]
#define END(id) );
#include "op_args.def"
#undef OA_OPEN_POS
#undef OA_OPEN_ARGS
    }
    return MEMRA_STATUS_INTERNAL;
}

#endif /* MEMRA_TEST_OP_ARGS_H */
