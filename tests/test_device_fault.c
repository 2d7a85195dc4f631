/*
 * Device faults (CUDA only; every test skips where no device is usable).
 *
 * Pointer-table entries are trusted: the library cannot check what they point to, so a host
 * bug that puts a bogus, freed or misaligned address in a table makes a kernel fault on the
 * device. What the library owes the host then (abi/memra.h, MEMRA_STATUS_DEVICE_ERROR): the
 * operation, or at the latest the next synchronising call, returns DEVICE_ERROR with a message
 * that carries the CUDA error's name; the fault is sticky, so every later call on that engine
 * returns DEVICE_ERROR too; and memra_engine_destroy() still returns OK. Never a hang, never an
 * abort: each test has a timeout, and Criterion runs each in its own process, which matters
 * because a kernel fault poisons the whole CUDA context of the process.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The small shape (docs/layouts.md), one sequence of three rows (odd: the final state goes to the
 * alternate buffer). */
#define NV TU_SMALL_NUM_V
#define T ((size_t)3)
#define CONV TU_SMALL_CONV_DIM
#define VAL TU_SMALL_VALUE_DIM
#define STATE TU_SMALL_STATE

/* Which operation meets the bad entry, and where it points. */
enum { F_CONV_ROW, F_CONV_PACKED, F_SCAN_ROW_IN, F_SCAN_ROW_OUT, F_SCAN_PACKED, F_GRAPH_REPLAY };
enum {
    A_UNMAPPED,   /* the first page of the address space, never mapped */
    A_WILD,       /* a high address nothing maps */
    A_FREED,      /* a large device buffer, freed before the operation runs */
    A_MISALIGNED, /* a live buffer, two bytes in */
};

typedef struct fault_case {
    int where;
    int addr;
} fault_case;

static const char *const where_name[] = {
    "the per-row conv's ring",           "the packed conv's ring",
    "the per-row scan's input state",    "the per-row scan's output state",
    "the packed scan's canonical state", "a graph replay's rebound canonical state"};
static const char *const addr_name[] = {"address 0x100", "a wild address", "freed memory",
                                        "a misaligned address"};

/* The message must carry one of the CUDA error names a kernel fault produces. */
static bool names_cuda_fault(const char *msg)
{
    static const char *const names[] = {"cudaErrorIllegalAddress", "cudaErrorMisalignedAddress",
                                        "cudaErrorLaunchFailure", "cudaErrorInvalidAddressSpace",
                                        "cudaErrorIllegalInstruction"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(msg, names[i]) != NULL)
            return true;
    return false;
}

typedef struct rig {
    MemraEngine *e;
    MemraSliceMutF32 qkv, w, conv_out, ring, q, k, v, g, beta, o, canon, alt, snap_ssm, dt, a,
        beta_raw, alpha;
    MemraSliceMutU64 table;
    MemraGraph *graph;
    uint64_t bad;
} rig;

static uint64_t bad_address(rig *r, int addr)
{
    switch (addr) {
    case A_UNMAPPED:
        return 0x100;
    case A_WILD:
        return UINT64_C(0x7ead00000000);
    case A_FREED: {
        /* 256 MiB: large enough that cudaFree gives the address range back to the driver. */
        MemraSliceMutF32 big;
        TU_OK(memra_alloc_f32(r->e, (size_t)64 << 20, MEMRA_ALLOC_INIT_UNINIT, &big));
        uint64_t p = tu_addr(big);
        tu_free(r->e, big.ptr);
        return p;
    }
    case A_MISALIGNED:
        return tu_addr(r->canon) + 2;
    }
    cr_assert_fail("unknown address kind %d", addr);
    return 0;
}

static void rig_init(rig *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->e = tu_engine(MEMRA_BACKEND_CUDA);
    /* Inputs drawn from seed + 1, seed + 2, ... in this order. */
    const struct {
        MemraSliceMutF32 *dst;
        size_t len;
        float spread;
    } in[] = {
        {&r->qkv, T * CONV, 1.0f},
        {&r->w, CONV * TU_D_CONV, 0.5f},
        {&r->ring, TU_SMALL_RING, 1.0f},
        {&r->canon, STATE, 0.3f},
        {&r->q, T * VAL, 0.1f},
        {&r->k, T * VAL, 0.1f},
        {&r->v, T * VAL, 1.0f},
        {&r->g, T * NV, 0.5f},
        {&r->beta, T * NV, 0.5f},
        {&r->dt, NV, 0.5f},
        {&r->a, NV, 1.0f},
        {&r->beta_raw, T * NV, 2.0f},
        {&r->alpha, T * NV, 2.0f},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        *in[i].dst = tu_upload_varied(r->e, in[i].len, seed + 1 + i, in[i].spread);
    r->alt = tu_zeros(r->e, STATE);
    r->conv_out = tu_poisoned(r->e, T * CONV);
    r->o = tu_poisoned(r->e, T * VAL);
    r->snap_ssm = tu_poisoned(r->e, (T - 1) * STATE);
    uint64_t tab[3] = {tu_addr(r->ring), tu_addr(r->canon), tu_addr(r->alt)};
    r->table = tu_upload_u64(r->e, tab, 3);
}

static MemraStatus packed_scan(MemraEngine *e, void *user)
{
    rig *r = user;
    return memra_gdn_scan_s128_tsnap(e, tu_view(r->q), tu_view(r->k), tu_view(r->v), tu_view(r->g),
                                     tu_view(r->beta), tu_view_u64(r->table), r->o, NV, T, 1,
                                     0.08838834764831845f, r->snap_ssm);
}

/* Writes `value` into entry `i` of the rig's table. */
static void set_entry(rig *r, size_t i, uint64_t value)
{
    MemraSliceU64 src = {&value, 1};
    MemraSliceMutU64 dst = {r->table.ptr + i, 1};
    TU_OK(memra_htod_u64_into(r->e, src, dst));
}

/* Makes the faulting call. Returns its status (OK when the fault is still in flight). */
static MemraStatus provoke(rig *r, int where)
{
    MemraSliceMutU64 one;
    switch (where) {
    case F_CONV_ROW:
        one = tu_upload_u64(r->e, &r->bad, 1);
        return memra_ssm_conv1d_fused_decode_b_view(r->e, tu_sub(r->qkv, 0, CONV), tu_view_u64(one),
                                                    tu_view(r->w), tu_sub_mut(r->conv_out, 0, CONV),
                                                    CONV, TU_D_CONV, 1);
    case F_CONV_PACKED:
        set_entry(r, 0, r->bad);
        return memra_ssm_conv1d_fused_decode_tloop(
            r->e, tu_view(r->qkv), tu_view_u64(r->table), tu_view(r->w), r->conv_out,
            (MemraSliceMutF32){NULL, 0}, CONV, TU_D_CONV, T, 1);
    case F_SCAN_ROW_IN:
    case F_SCAN_ROW_OUT: {
        uint64_t in = where == F_SCAN_ROW_IN ? r->bad : tu_addr(r->canon);
        uint64_t out = where == F_SCAN_ROW_OUT ? r->bad : tu_addr(r->alt);
        MemraSliceMutU64 tin = tu_upload_u64(r->e, &in, 1);
        MemraSliceMutU64 tout = tu_upload_u64(r->e, &out, 1);
        return memra_gdn_scan_s128_batched_view(
            r->e, tu_sub(r->q, 0, VAL), tu_sub(r->k, 0, VAL), tu_sub(r->v, 0, VAL),
            tu_sub(r->g, 0, NV), tu_sub(r->beta, 0, NV), tu_view_u64(tin), tu_view_u64(tout),
            tu_sub_mut(r->o, 0, VAL), NV, 1, 0.08838834764831845f);
    }
    case F_SCAN_PACKED:
        set_entry(r, 1, r->bad);
        return packed_scan(r->e, r);
    case F_GRAPH_REPLAY:
        /* Captured with good entries (the warm-ups run fine), rebound afterwards. */
        TU_OK(memra_graph_capture(r->e, packed_scan, r, &r->graph));
        TU_OK(memra_engine_synchronize(r->e));
        set_entry(r, 1, r->bad);
        return memra_graph_launch(r->e, r->graph);
    }
    cr_assert_fail("unknown fault site %d", where);
    return MEMRA_STATUS_INTERNAL;
}

/* The later calls that must all report the fault, in this order. */
static const char *const later_calls[] = {
    "memra_engine_synchronize",  "memra_dtoh_f32",
    "memra_htod_f32_into",       "memra_htod_f32",
    "memra_alloc_f32",           "memra_alloc_u64",
    "memra_gdn_scan_s128_tsnap", "memra_gdn_prep_decode_b",
    "memra_graph_capture",       "memra_graph_launch",
    "memra_engine_synchronize",
};

static MemraStatus later_call(rig *r, size_t i, MemraGraph **g)
{
    float host[8] = {0};
    MemraSliceMutF32 hdst = {host, 8};
    MemraSliceF32 hsrc = {host, 8};
    MemraSliceMutF32 s32;
    MemraSliceMutU64 s64;
    switch (i) {
    case 1:
        return memra_dtoh_f32(r->e, tu_sub(r->o, 0, 8), hdst);
    case 2:
        return memra_htod_f32_into(r->e, hsrc, tu_sub_mut(r->o, 0, 8));
    case 3:
        return memra_htod_f32(r->e, hsrc, &s32);
    case 4:
        return memra_alloc_f32(r->e, 8, MEMRA_ALLOC_INIT_ZEROED, &s32);
    case 5:
        return memra_alloc_u64(r->e, 8, MEMRA_ALLOC_INIT_UNINIT, &s64);
    case 6:
        return packed_scan(r->e, r);
    case 7:
        return memra_gdn_prep_decode_b(r->e, tu_view(r->conv_out), tu_view(r->beta_raw),
                                       tu_view(r->alpha), tu_view(r->dt), tu_view(r->a), r->q, r->k,
                                       r->v, r->beta, r->g, MEMRA_D_STATE, NV, TU_SMALL_NUM_K,
                                       TU_KEY_DIM(TU_SMALL_NUM_K), 1e-6f, CONV, T);
    case 8:
        return memra_graph_capture(r->e, packed_scan, r, g);
    case 9:
        /* A graph captured before the fault, or (none) the one capture just refused. */
        return r->graph != NULL ? memra_graph_launch(r->e, r->graph) : MEMRA_STATUS_DEVICE_ERROR;
    }
    return memra_engine_synchronize(r->e);
}

/* Every later call that can report the fault must report it, naming the CUDA error. */
static void check_sticky(rig *r, const char *what)
{
    MemraGraph *g = NULL;
    for (size_t i = 0; i < sizeof later_calls / sizeof later_calls[0]; i++) {
        MemraStatus st = later_call(r, i, &g);
        cr_assert_eq(st, MEMRA_STATUS_DEVICE_ERROR,
                     "%s: after the fault %s returned %s, expected DEVICE_ERROR", what,
                     later_calls[i], memra_status_string(st));
        if (i == 9 && r->graph == NULL)
            continue;
        cr_assert(names_cuda_fault(memra_last_error_message()),
                  "%s: %s's message \"%s\" names no CUDA error", what, later_calls[i],
                  memra_last_error_message());
    }
    cr_assert_null(g, "%s: memra_graph_capture made a graph on a faulted engine", what);
}

static const fault_case cases[] = {
    {F_CONV_ROW, A_UNMAPPED},      {F_CONV_ROW, A_FREED},         {F_CONV_PACKED, A_WILD},
    {F_CONV_PACKED, A_MISALIGNED}, {F_SCAN_ROW_IN, A_UNMAPPED},   {F_SCAN_ROW_IN, A_MISALIGNED},
    {F_SCAN_ROW_OUT, A_WILD},      {F_SCAN_ROW_OUT, A_FREED},     {F_SCAN_PACKED, A_UNMAPPED},
    {F_SCAN_PACKED, A_FREED},      {F_SCAN_PACKED, A_MISALIGNED}, {F_GRAPH_REPLAY, A_UNMAPPED},
    {F_GRAPH_REPLAY, A_FREED},
};

ParameterizedTestParameters(device_fault, bad_table_entry)
{
    return cr_make_param_array(fault_case, (void *)cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(fault_case *fc, device_fault, bad_table_entry, .timeout = 120)
{
    char what[160];
    rig r;
    uint64_t seed = tu_fresh_seed();
    rig_init(&r, seed);
    r.bad = bad_address(&r, fc->addr);
    snprintf(what, sizeof what, "%s at %s", where_name[fc->where], addr_name[fc->addr]);

    /* The launch itself may already see the fault, or it is still in flight. */
    MemraStatus st = provoke(&r, fc->where);
    cr_assert(st == MEMRA_STATUS_OK || st == MEMRA_STATUS_DEVICE_ERROR,
              "%s: the faulting call returned %s (%s)", what, memra_status_string(st),
              memra_last_error_message());
    if (st == MEMRA_STATUS_OK)
        st = memra_engine_synchronize(r.e);
    cr_assert_eq(st, MEMRA_STATUS_DEVICE_ERROR,
                 "%s: the fault was not reported by the next synchronisation (%s: %s)", what,
                 memra_status_string(st), memra_last_error_message());
    cr_assert(names_cuda_fault(memra_last_error_message()),
              "%s: the message \"%s\" does not carry the CUDA error's name", what,
              memra_last_error_message());

    check_sticky(&r, what);

    /* Teardown still works: the graph, then the engine. */
    if (r.graph != NULL)
        TU_OK(memra_graph_destroy(r.e, r.graph));
    TU_OK(memra_engine_destroy(r.e));
}
