/*
 * Bad input (docs/bad-input.md), the entry points that are not operations: engine options and
 * creation, destruction, queries, synchronisation, allocation, free, the copies, graph capture
 * and replay, and the MemraVerifyArgs struct itself, journal lengths and the u32 memory of 1.1.
 * Hand-written cases (the operations' cases are generated, tests/test_bad_input_ops.c); they
 * run inside the suites bad_input (1.0 entry points) and bad_input_verify (1.1), with the same
 * checks: the documented status, a message naming the function and the parameter, no byte of
 * the world's arena written, and a good call afterwards.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_input/framework.h"

#define INV BI_INV
#define PE "engine"
#define CAP "memra_graph_capture"

/* memra_engine_options_init and memra_verify_args_init with no struct to fill. */
static MemraStatus cc_init_null(bi_world *w, const bi_custom *cc)
{
    if (strcmp(cc->fn, "memra_verify_args_init") == 0)
        return bi_took(w, memra_verify_args_init(NULL));
    return bi_took(w, memra_engine_options_init(NULL));
}

enum {
    CR_NULL_OUT,
    CR_SIZE_ZERO,
    CR_SIZE_8,
    CR_SIZE_LESS,
    CR_SIZE_MORE_1,
    CR_SIZE_MORE_8,
    CR_SIZE_MAX,
    CR_BACKEND_3,
    CR_BACKEND_MAX,
    CR_ORDINAL_M1,
    CR_ORDINAL_MIN,
    CR_FLAG_1,
    CR_FLAG_63,
    CR_FLAG_ALL,
    CR_STREAM_CPU,
    CR_ENV_GPU,
    CR_ENV_UPPER,
    CR_ENV_SPACE,
};

/* struct_size of a struct of `size` bytes spoiled as `how` (the CR_SIZE_* / CO_SIZE_* order),
 * or `size` itself. */
static size_t spoiled_size(int how, size_t size, size_t heap)
{
    switch (how) {
    case CR_SIZE_ZERO:
        return 0;
    case CR_SIZE_8:
        return 8;
    case CR_SIZE_LESS:
        return size - 1;
    case CR_SIZE_MORE_1:
    case CR_SIZE_MORE_8:
        return heap;
    case CR_SIZE_MAX:
        return SIZE_MAX;
    }
    return size;
}

/* The bytes to allocate for a struct of `size` bytes whose struct_size is spoiled as `how`:
 * exactly what struct_size claims where that is larger, so that reading past the caller's
 * struct is seen by the sanitizers. */
static size_t heap_size(int how, size_t size)
{
    return how == CR_SIZE_MORE_1 ? size + 1 : how == CR_SIZE_MORE_8 ? size + 8 : size;
}

static MemraStatus cc_create(bi_world *w, const bi_custom *cc)
{
    MemraEngineOptions *o = calloc(1, heap_size(cc->sub, sizeof *o));
    cr_assert_not_null(o);
    TU_OK(memra_engine_options_init(o));
    o->backend = MEMRA_BACKEND_CPU;
    o->flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    if (cc->sub >= CR_SIZE_ZERO && cc->sub <= CR_SIZE_MAX)
        o->struct_size = spoiled_size(cc->sub, sizeof *o, heap_size(cc->sub, sizeof *o));
    const char *env = NULL;
    switch (cc->sub) {
    case CR_BACKEND_3:
        o->backend = 3;
        break;
    case CR_BACKEND_MAX:
        o->backend = UINT32_MAX;
        break;
    case CR_ORDINAL_M1:
        o->device_ordinal = -1;
        break;
    case CR_ORDINAL_MIN:
        o->device_ordinal = INT32_MIN;
        break;
    case CR_FLAG_1:
        o->flags |= 2;
        break;
    case CR_FLAG_63:
        o->flags |= UINT64_C(1) << 63;
        break;
    case CR_FLAG_ALL:
        o->flags = UINT64_MAX;
        break;
    case CR_STREAM_CPU:
        o->stream = bi_garbage();
        break;
    case CR_ENV_GPU:
        env = "gpu";
        break;
    case CR_ENV_UPPER:
        env = "CPU";
        break;
    case CR_ENV_SPACE:
        env = "cpu ";
        break;
    }
    char *saved = NULL;
    if (env != NULL) {
        /* AUTO without IGNORE_ENV is what lets the variable decide. The previous value is put
         * back, because without fork (under valgrind) the process goes on to other tests. */
        const char *old = getenv("MEMRA_BACKEND");
        saved = old ? strdup(old) : NULL;
        cr_assert_eq(setenv("MEMRA_BACKEND", env, 1), 0);
        o->backend = MEMRA_BACKEND_AUTO;
        o->flags = 0;
    }
    MemraEngine *out = BI_SENTINEL_PTR;
    MemraStatus st = bi_took(w, memra_engine_create(o, cc->sub == CR_NULL_OUT ? NULL : &out));
    if (env != NULL) {
        if (saved != NULL)
            cr_assert_eq(setenv("MEMRA_BACKEND", saved, 1), 0);
        else
            cr_assert_eq(unsetenv("MEMRA_BACKEND"), 0);
        free(saved);
    }
    free(o);
    cr_assert_eq(out, BI_SENTINEL_PTR, "memra_engine_create wrote *out_engine on failure");
    return st;
}

static MemraStatus cc_destroy(bi_world *w, const bi_custom *cc)
{
    return bi_took(w, memra_engine_destroy(bi_engine_handle(w, cc->sub)));
}

static MemraStatus cc_destroy_live_graph(bi_world *w, const bi_custom *cc)
{
    MemraStatus st = bi_took(w, memra_engine_destroy(w->e));
    /* The engine must be untouched: its graph still replays. The replay writes the arena, so
     * compare first. */
    bi_check_untouched(w, "memra_engine_destroy with a live graph");
    TU_OK(memra_graph_launch(w->e, w->g));
    TU_OK(memra_engine_synchronize(w->e));
    bi_snapshot(w, w->before);
    return st;
}

/* sub for cc_query: the engine handle (BI_H_*, or Q_LIVE for the world's engine) and the
 * NULL-out bit. */
#define QS(handle, null_out) ((((handle) + 1) << 4) | (null_out))
#define Q_LIVE (-1)

static MemraStatus cc_query(bi_world *w, const bi_custom *cc)
{
    int handle = (cc->sub >> 4) - 1, null_out = cc->sub & 1;
    MemraEngine *e = handle < 0 ? w->e : bi_engine_handle(w, handle);
    if (strcmp(cc->fn, "memra_engine_backend") == 0) {
        MemraBackend out = 0x5e7e;
        MemraStatus st = bi_took(w, memra_engine_backend(e, null_out ? NULL : &out));
        cr_assert_eq(out, 0x5e7e, "memra_engine_backend wrote *out_backend on failure");
        return st;
    }
    void *out = BI_SENTINEL_PTR;
    MemraStatus st = bi_took(w, memra_engine_stream(e, null_out ? NULL : &out));
    cr_assert_eq(out, BI_SENTINEL_PTR, "memra_engine_stream wrote *out_stream on failure");
    return st;
}

static MemraStatus cc_sync(bi_world *w, const bi_custom *cc)
{
    return bi_took(w, memra_engine_synchronize(bi_engine_handle(w, cc->sub)));
}

/* The element type a memory entry point's name says, and its size. */
enum { T_F32, T_U64, T_U32 };

static int type_of(const char *fn)
{
    return strstr(fn, "u64") ? T_U64 : strstr(fn, "u32") ? T_U32 : T_F32;
}

static size_t elem_size(int type)
{
    return type == T_U64 ? sizeof(uint64_t) : type == T_U32 ? sizeof(uint32_t) : sizeof(float);
}

/* A slice of any element type, and the out-parameter of an allocation left as the sentinel. */
typedef struct raw_out {
    void *ptr;
    size_t len;
} raw_out;

static MemraStatus alloc_any(MemraEngine *e, int type, size_t len, MemraAllocInit init,
                             raw_out *out)
{
    _Static_assert(sizeof(raw_out) == sizeof(MemraSliceMutU64), "slices are {pointer, length}");
    if (type == T_U64)
        return memra_alloc_u64(e, len, init, (MemraSliceMutU64 *)(void *)out);
    if (type == T_U32)
        return memra_alloc_u32(e, len, init, (MemraSliceMutU32 *)(void *)out);
    return memra_alloc_f32(e, len, init, (MemraSliceMutF32 *)(void *)out);
}

enum {
    AL_HANDLE_NULL,
    AL_HANDLE_GARBAGE,
    AL_HANDLE_GRAPH,
    AL_NULL_OUT,
    AL_LEN_ZERO,
    AL_INIT_2,
    AL_INIT_MAX,
    AL_LEN_OVERFLOW,
    AL_LEN_MAX,
    AL_OOM,
};

static MemraStatus cc_alloc(bi_world *w, const bi_custom *cc)
{
    const int type = type_of(cc->fn);
    const size_t elem = elem_size(type);
    MemraEngine *e = w->e;
    size_t len = 64;
    MemraAllocInit init = MEMRA_ALLOC_INIT_ZEROED;
    switch (cc->sub) {
    case AL_HANDLE_NULL:
    case AL_HANDLE_GARBAGE:
    case AL_HANDLE_GRAPH:
        e = bi_engine_handle(w, BI_H_NULL + (cc->sub - AL_HANDLE_NULL));
        break;
    case AL_LEN_ZERO:
        len = 0;
        break;
    case AL_INIT_2:
        init = 2;
        break;
    case AL_INIT_MAX:
        init = UINT32_MAX;
        break;
    case AL_LEN_OVERFLOW:
        len = SIZE_MAX / elem + 1;
        break;
    case AL_LEN_MAX:
        len = SIZE_MAX;
        break;
    case AL_OOM:
        /* Representable in bytes, but no machine has it. */
        len = (SIZE_MAX / elem) / 8;
        break;
    }
    raw_out out = {BI_SENTINEL_PTR, BI_SENTINEL_LEN};
    MemraStatus st =
        bi_took(w, alloc_any(e, type, len, init, cc->sub == AL_NULL_OUT ? NULL : &out));
    cr_assert(out.ptr == BI_SENTINEL_PTR && out.len == BI_SENTINEL_LEN, "%s wrote *out on failure",
              cc->fn);
    return st;
}

enum {
    FR_HANDLE_NULL,
    FR_HANDLE_GARBAGE,
    FR_HANDLE_GRAPH,
    FR_INTERIOR,
    FR_FOREIGN,
    FR_NEVER,
    FR_TWICE,
};

static MemraStatus cc_free(bi_world *w, const bi_custom *cc)
{
    switch (cc->sub) {
    case FR_HANDLE_NULL:
    case FR_HANDLE_GARBAGE:
    case FR_HANDLE_GRAPH:
        /* The arena stays alive: the probe after the case uses it. */
        return bi_took(w, memra_free(bi_engine_handle(w, BI_H_NULL + (cc->sub - FR_HANDLE_NULL)),
                                     w->arena.ptr));
    case FR_INTERIOR:
        return bi_took(w, memra_free(w->e, w->arena.ptr + 1));
    case FR_FOREIGN: {
        MemraEngine *e2 = tu_engine(w->backend);
        MemraSliceMutF32 b = tu_zeros(e2, 64);
        MemraStatus st = bi_took(w, memra_free(w->e, b.ptr));
        tu_free(e2, b.ptr);
        TU_OK(memra_engine_destroy(e2));
        return st;
    }
    case FR_NEVER: {
        float local[4];
        return bi_took(w, memra_free(w->e, local));
    }
    case FR_TWICE: {
        MemraSliceMutF32 b = tu_zeros(w->e, 64);
        tu_free(w->e, b.ptr);
        return bi_took(w, memra_free(w->e, b.ptr));
    }
    }
    return MEMRA_STATUS_INTERNAL;
}

/* Sub-cases of the copies: which side is spoiled and how. */
enum {
    CP_HANDLE_NULL,
    CP_HANDLE_GARBAGE,
    CP_HANDLE_GRAPH,
    CP_NULL_OUT, /* htod only */
    CP_SRC_NULL,
    CP_SRC_NULL_EMPTY,
    CP_SRC_EMPTY, /* htod only: a new buffer of 0 elements */
    CP_SRC_MIS1,
    CP_SRC_MISHALF,
    CP_SRC_WRAP,
    CP_SRC_LEN_OVERFLOW,
    CP_DST_NULL,
    CP_DST_SHORT,
    CP_DST_MIS1,
    CP_DST_MISHALF,
    CP_DST_WRAP,
    CP_BOTH_LEN_OVERFLOW,
    CP_OVERLAP_SAME,
    CP_OVERLAP_SHIFT,
};

#define COPY_LEN ((size_t)6)

/* Spoils one side of a copy: the source for the CP_SRC_* cases, the destination for CP_DST_*,
 * both lengths for CP_BOTH_LEN_OVERFLOW. The destination's spoilings are the source's, less
 * {NULL, 0} and {ptr, 0}, plus a view one element short. */
static void spoil(int sub, bool src, size_t elem, uintptr_t *p, size_t *len)
{
    if (!src) {
        switch (sub) {
        case CP_DST_SHORT:
            *len -= 1;
            return;
        case CP_DST_NULL:
        case CP_DST_MIS1:
        case CP_DST_MISHALF:
        case CP_DST_WRAP:
            sub = sub == CP_DST_NULL      ? CP_SRC_NULL
                  : sub == CP_DST_MIS1    ? CP_SRC_MIS1
                  : sub == CP_DST_MISHALF ? CP_SRC_MISHALF
                                          : CP_SRC_WRAP;
            break;
        case CP_BOTH_LEN_OVERFLOW:
            break;
        default:
            return;
        }
    }
    switch (sub) {
    case CP_SRC_NULL:
        *p = 0;
        break;
    case CP_SRC_NULL_EMPTY:
        *p = 0;
        *len = 0;
        break;
    case CP_SRC_EMPTY:
        *len = 0;
        break;
    case CP_SRC_MIS1:
        *p += 1;
        break;
    case CP_SRC_MISHALF:
        *p += elem / 2;
        break;
    case CP_SRC_WRAP:
        *p = UINTPTR_MAX - 7;
        break;
    case CP_SRC_LEN_OVERFLOW:
    case CP_BOTH_LEN_OVERFLOW:
        *len = SIZE_MAX / elem + 1;
        break;
    }
}

static MemraEngine *copy_engine(bi_world *w, int sub)
{
    return sub <= CP_HANDLE_GRAPH ? bi_engine_handle(w, BI_H_NULL + (sub - CP_HANDLE_NULL)) : w->e;
}

static MemraStatus cc_htod(bi_world *w, const bi_custom *cc)
{
    const size_t elem = elem_size(type_of(cc->fn));
    /* Host source with room for the misaligned variants. */
    uint64_t host[COPY_LEN + 1];
    tu_varied((float *)(void *)host, 2 * (COPY_LEN + 1), w->seed, 1.0f);
    uintptr_t p = (uintptr_t)host;
    size_t len = COPY_LEN;
    spoil(cc->sub, true, elem, &p, &len);
    raw_out out = {BI_SENTINEL_PTR, BI_SENTINEL_LEN};
    raw_out *o = cc->sub == CP_NULL_OUT ? NULL : &out;
    MemraEngine *e = copy_engine(w, cc->sub);
    MemraStatus st;
    if (elem == sizeof(uint64_t)) {
        MemraSliceU64 src = {(const uint64_t *)p, len};
        st = bi_took(w, memra_htod_u64(e, src, (MemraSliceMutU64 *)(void *)o));
    } else {
        MemraSliceF32 src = {(const float *)p, len};
        st = bi_took(w, memra_htod_f32(e, src, (MemraSliceMutF32 *)(void *)o));
    }
    cr_assert(out.ptr == BI_SENTINEL_PTR && out.len == BI_SENTINEL_LEN, "%s wrote *out on failure",
              cc->fn);
    return st;
}

/* Copies in either direction of any element type. */
static MemraStatus copy_any(MemraEngine *e, int type, bool to_device, uintptr_t src, size_t src_len,
                            uintptr_t dst, size_t dst_len)
{
    if (type == T_U64) {
        MemraSliceU64 s = {(const uint64_t *)src, src_len};
        MemraSliceMutU64 d = {(uint64_t *)dst, dst_len};
        return to_device ? memra_htod_u64_into(e, s, d) : memra_dtoh_u64(e, s, d);
    }
    if (type == T_U32) {
        MemraSliceU32 s = {(const uint32_t *)src, src_len};
        MemraSliceMutU32 d = {(uint32_t *)dst, dst_len};
        return to_device ? memra_htod_u32_into(e, s, d) : memra_dtoh_u32(e, s, d);
    }
    MemraSliceF32 s = {(const float *)src, src_len};
    MemraSliceMutF32 d = {(float *)dst, dst_len};
    return to_device ? memra_htod_f32_into(e, s, d) : memra_dtoh_f32(e, s, d);
}

/* The device side of a copy: a region of the arena holding that element type (outputs, the
 * packed table, the journal verify's counts). */
static uintptr_t device_side(const bi_world *w, int type)
{
    return bi_region_addr(w, type == T_U64 ? OA_R_TABLE : type == T_U32 ? OA_R_ACC_J : OA_R_O);
}

/* htod_*_into and dtoh_*: the host side a canary-filled array that must come back unchanged. */
static MemraStatus cc_copy(bi_world *w, const bi_custom *cc)
{
    const int type = type_of(cc->fn);
    const size_t elem = elem_size(type);
    const bool to_device = strstr(cc->fn, "htod") != NULL;
    const uintptr_t dev = device_side(w, type);
    uint64_t host[COPY_LEN + 1], canary[COPY_LEN + 1];
    tu_varied((float *)(void *)host, 2 * (COPY_LEN + 1), w->seed ^ 1, 1.0f);
    memcpy(canary, host, sizeof host);

    uintptr_t src = to_device ? (uintptr_t)host : dev;
    uintptr_t dst = to_device ? dev : (uintptr_t)host;
    size_t src_len = COPY_LEN, dst_len = COPY_LEN;
    spoil(cc->sub, true, elem, &src, &src_len);
    spoil(cc->sub, false, elem, &dst, &dst_len);
    /* On the CPU backend both sides are host memory: make them overlap inside the arena. */
    if (cc->sub == CP_OVERLAP_SAME || cc->sub == CP_OVERLAP_SHIFT) {
        src = dev;
        dst = dev + (cc->sub == CP_OVERLAP_SHIFT ? elem : 0);
    }
    MemraStatus st =
        bi_took(w, copy_any(copy_engine(w, cc->sub), type, to_device, src, src_len, dst, dst_len));
    cr_assert(memcmp(host, canary, sizeof host) == 0, "%s changed the host buffer on failure",
              cc->fn);
    return st;
}

/* Steps that misbehave. Each does the forbidden thing first, before any operation, so that
 * nothing is written and the arena comparison still applies. */
enum {
    SM_FAIL_FIRST,
    SM_FAIL_THIRD,
    SM_ALLOC_THEN_FAIL,
    SM_BAD_OP,
    SM_DTOH,
    SM_HTOD,
    SM_HTOD_INTO,
    SM_HTOD_U32_INTO,
    SM_DTOH_U32,
    SM_NESTED,
    /* SM_HANDLE_CALL + c: tu_call_handles(c) with the world's graph. */
    SM_HANDLE_CALL,
    SM_SYNC = SM_HANDLE_CALL + TU_CALL_SYNCHRONIZE,
    SM_LAUNCH = SM_HANDLE_CALL + TU_CALL_GRAPH_LAUNCH,
    SM_DESTROY_GRAPH = SM_HANDLE_CALL + TU_CALL_GRAPH_DESTROY,
    SM_DESTROY_ENGINE = SM_HANDLE_CALL + TU_CALL_ENGINE_DESTROY,
};

typedef struct step_ctx {
    bi_world *w;
    int mode;
    int calls;
    MemraStatus inner;
    char inner_msg[1024];
} step_ctx;

static MemraStatus misbehaving_step(MemraEngine *e, void *user)
{
    step_ctx *x = user;
    bi_world *w = x->w;
    float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    MemraStatus st = MEMRA_STATUS_OK;
    x->calls++;
    switch (x->mode) {
    case SM_FAIL_FIRST:
        return MEMRA_STATUS_INVALID_ARGUMENT;
    case SM_FAIL_THIRD:
        st = bi_world_step(e, w);
        if (st != MEMRA_STATUS_OK)
            return st;
        return x->calls == 3 ? MEMRA_STATUS_INVALID_ARGUMENT : MEMRA_STATUS_OK;
    case SM_ALLOC_THEN_FAIL: {
        /* Both buffers, the kept one and the freed one, must be released with the failed
         * capture (the leak check sees it if not). */
        MemraSliceMutF32 kept, dropped;
        st = memra_alloc_f32(e, 1024, MEMRA_ALLOC_INIT_ZEROED, &kept);
        if (st == MEMRA_STATUS_OK)
            st = memra_alloc_f32(e, 512, MEMRA_ALLOC_INIT_UNINIT, &dropped);
        if (st == MEMRA_STATUS_OK)
            st = memra_free(e, dropped.ptr);
        if (st != MEMRA_STATUS_OK)
            return st;
        return MEMRA_STATUS_INVALID_ARGUMENT;
    }
    case SM_BAD_OP: {
        bi_call c;
        bi_base_call(w, e, OA_SCAN_B, &c);
        c.v.z[OA_SC_b_n] = 0;
        st = bi_invoke(&c);
        break;
    }
    case SM_DTOH:
    case SM_HTOD_INTO:
        st = copy_any(e, T_F32, x->mode == SM_HTOD_INTO,
                      x->mode == SM_HTOD_INTO ? (uintptr_t)host : device_side(w, T_F32), 8,
                      x->mode == SM_HTOD_INTO ? device_side(w, T_F32) : (uintptr_t)host, 8);
        break;
    case SM_HTOD_U32_INTO:
    case SM_DTOH_U32: {
        const bool in = x->mode == SM_HTOD_U32_INTO;
        const uintptr_t dev = device_side(w, T_U32);
        st = copy_any(e, T_U32, in, in ? (uintptr_t)host : dev, 2, in ? dev : (uintptr_t)host, 2);
        break;
    }
    case SM_HTOD: {
        MemraSliceMutF32 out;
        MemraSliceF32 src = {host, 8};
        st = memra_htod_f32(e, src, &out);
        break;
    }
    case SM_NESTED: {
        MemraGraph *inner = BI_SENTINEL_PTR;
        st = memra_graph_capture(e, bi_empty_step, NULL, &inner);
        cr_assert_eq(inner, BI_SENTINEL_PTR, "a nested capture wrote *out_graph");
        break;
    }
    default:
        st = tu_call_handles((tu_handle_call)(x->mode - SM_HANDLE_CALL), e, w->g);
        break;
    }
    if (x->calls == 1) {
        x->inner = st;
        snprintf(x->inner_msg, sizeof x->inner_msg, "%s", memra_last_error_message());
    }
    return st;
}

/* Runs a capture of a misbehaving step. The case's status and message are the inner call's
 * (for the modes that make one) or the capture's; the capture itself must fail with
 * CAPTURE_ERROR, leave *out_graph alone, and leave the engine able to capture again. */
static MemraStatus cc_step(bi_world *w, const bi_custom *cc)
{
    step_ctx x = {.w = w, .mode = cc->sub};
    MemraGraph *g = BI_SENTINEL_PTR;
    MemraStatus st = memra_graph_capture(w->e, misbehaving_step, &x, &g);
    char capture_msg[1024];
    snprintf(capture_msg, sizeof capture_msg, "%s", memra_last_error_message());
    cr_assert_eq(st, MEMRA_STATUS_CAPTURE_ERROR,
                 "memra_graph_capture of a step that %s returned %s (%s)", cc->what,
                 memra_status_string(st), capture_msg);
    cr_assert(tu_has_word(capture_msg, "memra_graph_capture"),
              "the capture's message \"%s\" does not name memra_graph_capture", capture_msg);
    cr_assert_eq(g, BI_SENTINEL_PTR, "memra_graph_capture wrote *out_graph on failure");
    if (cc->sub != SM_FAIL_THIRD)
        cr_assert_eq(x.calls, 1, "the capture went on calling a failed step (%d calls)", x.calls);

    MemraGraph *again = NULL;
    TU_OK(memra_graph_capture(w->e, bi_empty_step, NULL, &again));
    TU_OK(memra_graph_destroy(w->e, again));

    if (strcmp(cc->fn, "memra_graph_capture") == 0 && cc->sub != SM_NESTED) {
        snprintf(w->msg, sizeof w->msg, "%s", capture_msg);
        return st;
    }
    snprintf(w->msg, sizeof w->msg, "%s", x.inner_msg);
    return x.inner;
}

#define CA_NULL_STEP 0
#define CA_NULL_OUT 1
#define CA_HANDLE(h) (2 + (h))

static MemraStatus cc_capture_args(bi_world *w, const bi_custom *cc)
{
    MemraGraph *g = BI_SENTINEL_PTR;
    MemraStatus st;
    if (cc->sub == CA_NULL_STEP)
        st = bi_took(w, memra_graph_capture(w->e, NULL, NULL, &g));
    else if (cc->sub == CA_NULL_OUT)
        st = bi_took(w, memra_graph_capture(w->e, bi_empty_step, NULL, NULL));
    else
        st = bi_took(w, memra_graph_capture(bi_engine_handle(w, cc->sub - CA_HANDLE(0)),
                                            bi_empty_step, NULL, &g));
    cr_assert_eq(g, BI_SENTINEL_PTR, "memra_graph_capture wrote *out_graph on failure");
    return st;
}

/* sub: the spoiled side (0 engine, 1 graph) and the BI_H_* handle. */
#define GH(graph_side, h) (((graph_side) << 4) | (h))

static MemraStatus cc_graph_handle(bi_world *w, const bi_custom *cc)
{
    int graph_side = cc->sub >> 4, h = cc->sub & 15;
    MemraEngine *e = w->e;
    MemraGraph *g = w->g;
    if (!graph_side) {
        e = bi_engine_handle(w, h);
    } else {
        switch (h) {
        case BI_H_NULL:
            g = NULL;
            break;
        case BI_H_GARBAGE:
            g = bi_garbage();
            break;
        case BI_H_OTHER_TYPE:
            g = (MemraGraph *)(void *)w->e;
            break;
        case BI_H_FOREIGN:
            g = w->g2;
            break;
        case BI_H_OTHER_ENGINE:
            e = w->e2;
            break;
        }
    }
    if (strcmp(cc->fn, "memra_graph_launch") == 0)
        return bi_took(w, memra_graph_launch(e, g));
    return bi_took(w, memra_graph_destroy(e, g));
}

/* ---- 1.1: the MemraVerifyArgs struct, journal lengths ---- */

/* sub of cc_op: the spoiling (its struct_size ones in the CR_SIZE_* order). */
enum {
    CO_ARGS_NULL = CR_SIZE_MAX + 1,
    CO_INIT_ONLY,
    CO_EPS_UNSET,
    CO_SCALE_UNSET,
    CO_SNAP_CONV_GIVEN,
    CO_SNAP_SSM_GIVEN,
    CO_ACCEPTED_GIVEN,
};

/* A field the mode must not have, given as the mode that has it would give it. */
static void give_field(const bi_world *w, MemraVerifyArgs *a, int op, const char *name, int from)
{
    bi_call c;
    bi_base_call(w, w->e, from, &c);
    const int s = oa_slot_named(from, name);
    oa_set_field(a, op, oa_slot_named(op, name), c.v.p[s], c.v.len[s]);
}

static MemraStatus cc_op(bi_world *w, const bi_custom *cc)
{
    const int how = cc->sub;
    bi_call c;
    bi_base_call(w, w->e, cc->op, &c);
    MemraVerifyArgs good;
    bi_call_args(&c, &good);
    /* The struct on the heap, exactly as large as its struct_size claims where that is
     * possible, so that reading past it is seen by the sanitizers. */
    MemraVerifyArgs *a = calloc(1, heap_size(how, sizeof good));
    cr_assert_not_null(a);
    memcpy(a, &good, sizeof good);
    if (how <= CR_SIZE_MAX)
        a->struct_size = spoiled_size(how, sizeof good, heap_size(how, sizeof good));
    switch (how) {
    case CO_INIT_ONLY:
        TU_OK(memra_verify_args_init(a));
        a->mode = good.mode;
        break;
    case CO_EPS_UNSET:
        a->eps = NAN;
        break;
    case CO_SCALE_UNSET:
        a->scale = NAN;
        break;
    case CO_SNAP_CONV_GIVEN:
        give_field(w, a, cc->op, "snap_conv", OA_V_SNAP);
        break;
    case CO_SNAP_SSM_GIVEN:
        give_field(w, a, cc->op, "snap_ssm", OA_V_SNAP);
        break;
    case CO_ACCEPTED_GIVEN:
        give_field(w, a, cc->op, "accepted", OA_V_JOURNAL);
        break;
    }
    c.e = w->e;
    MemraStatus st = bi_took(w, oa_invoke(cc->op, w->e, &c.v, how == CO_ARGS_NULL ? NULL : a));
    free(a);
    return st;
}

enum {
    JL_NULL_OUT,
    JL_D_STATE_0,
    JL_D_STATE_64,
    JL_NUM_K_0,
    JL_NUM_V_0,
    JL_NUM_V_3,
    JL_T_MAX_0,
    JL_T_MAX_HUGE,
    JL_NUM_V_HUGE,
};

static MemraStatus cc_journal_len(bi_world *w, const bi_custom *cc)
{
    size_t d_state = MEMRA_D_STATE, num_k = w->suite->num_k, num_v = w->suite->num_v, t_max = 2,
           out = BI_SENTINEL_LEN;
    switch (cc->sub) {
    case JL_D_STATE_0:
        d_state = 0;
        break;
    case JL_D_STATE_64:
        d_state = 64;
        break;
    case JL_NUM_K_0:
        num_k = 0;
        break;
    case JL_NUM_V_0:
        num_v = 0;
        break;
    case JL_NUM_V_3:
        num_v = 3;
        break;
    case JL_T_MAX_0:
        t_max = 0;
        break;
    case JL_T_MAX_HUGE:
        t_max = SIZE_MAX / 4;
        break;
    case JL_NUM_V_HUGE:
        num_k = BI_P2(61);
        num_v = BI_P2(61);
        break;
    }
    MemraStatus st = bi_took(w, memra_gdn_journal_len(d_state, num_k, num_v, t_max,
                                                      cc->sub == JL_NULL_OUT ? NULL : &out));
    cr_assert_eq(out, BI_SENTINEL_LEN, "memra_gdn_journal_len wrote *out_len on failure");
    return st;
}

/* ---- The tables ---- */

/* clang-format off */
#define ENGINE_CASES(fn, run, sub_null, sub_garbage, sub_graph)                                    \
    {fn, -1, sub_null, INV, PE, BI_CC_ANY, "engine = NULL", run},                                  \
    {fn, -1, sub_garbage, INV, PE, BI_CC_ANY, "engine = garbage", run},                            \
    {fn, -1, sub_graph, INV, PE, BI_CC_GRAPH, "engine = a graph handle", run}

#define ALLOC_CASES(fn, times_elem)                                                                \
    ENGINE_CASES(fn, cc_alloc, AL_HANDLE_NULL, AL_HANDLE_GARBAGE, AL_HANDLE_GRAPH),                \
    {fn, -1, AL_NULL_OUT, INV, "out", 0, "out = NULL", cc_alloc},                                  \
    {fn, -1, AL_LEN_ZERO, INV, "len", 0, "len = 0", cc_alloc},                                     \
    {fn, -1, AL_INIT_2, INV, "init", 0, "init = 2", cc_alloc},                                     \
    {fn, -1, AL_INIT_MAX, INV, "init", 0, "init = UINT32_MAX", cc_alloc},                          \
    {fn, -1, AL_LEN_OVERFLOW, INV, "len", 0, "len " times_elem " overflows", cc_alloc},            \
    {fn, -1, AL_LEN_MAX, INV, "len", 0, "len = SIZE_MAX", cc_alloc},                               \
    {fn, -1, AL_OOM, MEMRA_STATUS_OUT_OF_MEMORY, NULL, 0, "len beyond any memory", cc_alloc}

#define SRC_CASES(fn, run, mishalf)                                                                \
    {fn, -1, CP_SRC_NULL, INV, "src", 0, "src = {NULL, 6}", run},                                  \
    {fn, -1, CP_SRC_MIS1, INV, "src", 0, "src misaligned by 1 byte", run},                         \
    {fn, -1, CP_SRC_MISHALF, INV, "src", 0, mishalf, run},                                         \
    {fn, -1, CP_SRC_WRAP, INV, "src", 0, "src runs past the end of the address space", run}

#define HTOD_CASES(fn, mishalf)                                                                    \
    ENGINE_CASES(fn, cc_htod, CP_HANDLE_NULL, CP_HANDLE_GARBAGE, CP_HANDLE_GRAPH),                 \
    {fn, -1, CP_NULL_OUT, INV, "out", 0, "out = NULL", cc_htod},                                   \
    SRC_CASES(fn, cc_htod, mishalf),                                                               \
    {fn, -1, CP_SRC_NULL_EMPTY, INV, "src", 0, "src = {NULL, 0}", cc_htod},                        \
    {fn, -1, CP_SRC_EMPTY, INV, "src", 0, "src = {ptr, 0}", cc_htod},                              \
    {fn, -1, CP_SRC_LEN_OVERFLOW, INV, "src", 0, "src.len * elem overflows", cc_htod}

#define COPY_CASES(fn, mishalf_src, mishalf_dst)                                                   \
    ENGINE_CASES(fn, cc_copy, CP_HANDLE_NULL, CP_HANDLE_GARBAGE, CP_HANDLE_GRAPH),                 \
    SRC_CASES(fn, cc_copy, mishalf_src),                                                           \
    {fn, -1, CP_SRC_LEN_OVERFLOW, INV, "dst|src", 0, "src.len * elem overflows", cc_copy},         \
    {fn, -1, CP_DST_NULL, INV, "dst", 0, "dst = {NULL, 6}", cc_copy},                              \
    {fn, -1, CP_DST_SHORT, INV, "dst", 0, "dst one element shorter than src", cc_copy},            \
    {fn, -1, CP_DST_MIS1, INV, "dst", 0, "dst misaligned by 1 byte", cc_copy},                     \
    {fn, -1, CP_DST_MISHALF, INV, "dst", 0, mishalf_dst, cc_copy},                                 \
    {fn, -1, CP_DST_WRAP, INV, "dst", 0, "dst runs past the end of the address space", cc_copy},   \
    {fn, -1, CP_BOTH_LEN_OVERFLOW, INV, "dst|src", 0, "both lengths * elem overflow", cc_copy},    \
    {fn, -1, CP_OVERLAP_SAME, INV, "dst|src", BI_CC_CPU, "src and dst the same memory", cc_copy},  \
    {fn, -1, CP_OVERLAP_SHIFT, INV, "dst|src", BI_CC_CPU, "src and dst overlapping by all but "    \
                                                          "one element", cc_copy}

#define CREATE_CASE(sub, params, what)                                                             \
    {"memra_engine_create", -1, sub, INV, params, BI_CC_ANY, what, cc_create}
#define SIZE_CASES(fn, op, run)                                                                    \
    {fn, op, CR_SIZE_ZERO, INV, "struct_size", BI_CC_ANY, "struct_size = 0", run},                 \
    {fn, op, CR_SIZE_8, INV, "struct_size", BI_CC_ANY, "struct_size = 8", run},                    \
    {fn, op, CR_SIZE_LESS, INV, "struct_size", BI_CC_ANY, "struct_size = sizeof - 1", run},        \
    {fn, op, CR_SIZE_MORE_1, BI_ABI, "struct_size", BI_CC_ANY, "struct_size = sizeof + 1", run},   \
    {fn, op, CR_SIZE_MORE_8, BI_ABI, "struct_size", BI_CC_ANY, "struct_size = sizeof + 8", run},   \
    {fn, op, CR_SIZE_MAX, BI_ABI, "struct_size", BI_CC_ANY, "struct_size = SIZE_MAX", run}

const bi_custom BI_ENTRY_10[] = {
    {"memra_engine_options_init", -1, 0, INV, "options", BI_CC_ANY, "options = NULL", cc_init_null},

    CREATE_CASE(CR_NULL_OUT, "out_engine", "out_engine = NULL"),
    SIZE_CASES("memra_engine_create", -1, cc_create),
    CREATE_CASE(CR_BACKEND_3, "backend", "backend = 3"),
    CREATE_CASE(CR_BACKEND_MAX, "backend", "backend = UINT32_MAX"),
    CREATE_CASE(CR_ORDINAL_M1, "device_ordinal", "device_ordinal = -1"),
    CREATE_CASE(CR_ORDINAL_MIN, "device_ordinal", "device_ordinal = INT32_MIN"),
    CREATE_CASE(CR_FLAG_1, "flags", "flags bit 1"),
    CREATE_CASE(CR_FLAG_63, "flags", "flags bit 63"),
    CREATE_CASE(CR_FLAG_ALL, "flags", "flags = UINT64_MAX"),
    CREATE_CASE(CR_STREAM_CPU, "stream", "a stream given to the CPU backend"),
    CREATE_CASE(CR_ENV_GPU, "MEMRA_BACKEND", "MEMRA_BACKEND=gpu"),
    CREATE_CASE(CR_ENV_UPPER, "MEMRA_BACKEND", "MEMRA_BACKEND=CPU"),
    CREATE_CASE(CR_ENV_SPACE, "MEMRA_BACKEND", "MEMRA_BACKEND='cpu '"),

    {"memra_engine_destroy", -1, BI_H_GARBAGE, INV, PE, BI_CC_ANY, "engine = garbage", cc_destroy},
    {"memra_engine_destroy", -1, BI_H_OTHER_TYPE, INV, PE, BI_CC_GRAPH, "engine = a graph handle", cc_destroy},
    {"memra_engine_destroy", -1, 0, INV, PE, BI_CC_GRAPH, "a graph of the engine still alive", cc_destroy_live_graph},
    {"memra_engine_destroy", -1, SM_DESTROY_ENGINE, INV, PE, BI_CC_GRAPH, "destroyed its engine", cc_step},

    ENGINE_CASES("memra_engine_backend", cc_query, QS(BI_H_NULL, 0), QS(BI_H_GARBAGE, 0), QS(BI_H_OTHER_TYPE, 0)),
    {"memra_engine_backend", -1, QS(Q_LIVE, 1), INV, "out_backend", 0, "out_backend = NULL", cc_query},
    ENGINE_CASES("memra_engine_stream", cc_query, QS(BI_H_NULL, 0), QS(BI_H_GARBAGE, 0), QS(BI_H_OTHER_TYPE, 0)),
    {"memra_engine_stream", -1, QS(Q_LIVE, 1), INV, "out_stream", 0, "out_stream = NULL", cc_query},

    ENGINE_CASES("memra_engine_synchronize", cc_sync, BI_H_NULL, BI_H_GARBAGE, BI_H_OTHER_TYPE),
    {"memra_engine_synchronize", -1, SM_SYNC, BI_CAP, CAP, 0, "synchronised", cc_step},

    ALLOC_CASES("memra_alloc_f32", "* elem"),
    ALLOC_CASES("memra_alloc_u64", "* elem"),

    ENGINE_CASES("memra_free", cc_free, FR_HANDLE_NULL, FR_HANDLE_GARBAGE, FR_HANDLE_GRAPH),
    {"memra_free", -1, FR_INTERIOR, INV, "ptr", 0, "ptr inside a buffer, not its start", cc_free},
    {"memra_free", -1, FR_FOREIGN, INV, "ptr", 0, "ptr of another engine's buffer", cc_free},
    {"memra_free", -1, FR_NEVER, INV, "ptr", 0, "ptr never allocated (a stack address)", cc_free},
    {"memra_free", -1, FR_TWICE, INV, "ptr", 0, "ptr freed twice", cc_free},

    HTOD_CASES("memra_htod_f32", "src misaligned by 2 bytes"),
    HTOD_CASES("memra_htod_u64", "src misaligned by 4 bytes"),
    {"memra_htod_f32", -1, SM_HTOD, BI_CAP, CAP, 0, "uploaded into a new buffer", cc_step},

    COPY_CASES("memra_htod_f32_into", "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    COPY_CASES("memra_htod_u64_into", "src misaligned by 4 bytes", "dst misaligned by 4 bytes"),
    COPY_CASES("memra_dtoh_f32", "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    COPY_CASES("memra_dtoh_u64", "src misaligned by 4 bytes", "dst misaligned by 4 bytes"),
    {"memra_htod_f32_into", -1, SM_HTOD_INTO, BI_CAP, CAP, 0, "copied host data in", cc_step},
    {"memra_dtoh_f32", -1, SM_DTOH, BI_CAP, CAP, 0, "read data back", cc_step},

    ENGINE_CASES(CAP, cc_capture_args, CA_HANDLE(BI_H_NULL), CA_HANDLE(BI_H_GARBAGE), CA_HANDLE(BI_H_OTHER_TYPE)),
    {CAP, -1, CA_NULL_STEP, INV, "step", 0, "step = NULL", cc_capture_args},
    {CAP, -1, CA_NULL_OUT, INV, "out_graph", 0, "out_graph = NULL", cc_capture_args},
    {CAP, -1, SM_FAIL_FIRST, BI_CAP, "step", 0, "failed on its first call", cc_step},
    {CAP, -1, SM_FAIL_THIRD, BI_CAP, "step", BI_CC_WRITES, "failed on its captured call", cc_step},
    {CAP, -1, SM_ALLOC_THEN_FAIL, BI_CAP, "step", 0, "allocated, freed, then failed", cc_step},
    {CAP, -1, SM_BAD_OP, BI_CAP, "step", 0, "made a refused operation call", cc_step},
    {CAP, -1, SM_NESTED, BI_CAP, CAP, 0, "nested a capture", cc_step},

#define GRAPH_CASES(fn, other_engine)                                                              \
    {fn, -1, GH(0, BI_H_NULL), INV, PE, BI_CC_GRAPH, "engine = NULL", cc_graph_handle},            \
    {fn, -1, GH(0, BI_H_GARBAGE), INV, PE, BI_CC_GRAPH, "engine = garbage", cc_graph_handle},      \
    {fn, -1, GH(0, BI_H_OTHER_TYPE), INV, PE, BI_CC_GRAPH, "engine = a graph handle", cc_graph_handle}, \
    {fn, -1, GH(1, BI_H_GARBAGE), INV, "graph", BI_CC_GRAPH, "graph = garbage", cc_graph_handle},  \
    {fn, -1, GH(1, BI_H_OTHER_TYPE), INV, "graph", BI_CC_GRAPH, "graph = an engine handle", cc_graph_handle}, \
    {fn, -1, GH(1, BI_H_FOREIGN), INV, "graph", BI_CC_GRAPH, "graph of another engine", cc_graph_handle}, \
    {fn, -1, GH(1, BI_H_OTHER_ENGINE), INV, "graph", BI_CC_GRAPH, other_engine, cc_graph_handle}
    GRAPH_CASES("memra_graph_launch", "graph launched on another engine"),
    {"memra_graph_launch", -1, GH(1, BI_H_NULL), INV, "graph", BI_CC_GRAPH, "graph = NULL", cc_graph_handle},
    {"memra_graph_launch", -1, SM_LAUNCH, INV, "graph", BI_CC_GRAPH, "launched a graph", cc_step},
    GRAPH_CASES("memra_graph_destroy", "graph destroyed through another engine"),
    {"memra_graph_destroy", -1, SM_DESTROY_GRAPH, INV, "graph", BI_CC_GRAPH, "destroyed a graph", cc_step},
};
const size_t BI_N_ENTRY_10 = sizeof BI_ENTRY_10 / sizeof BI_ENTRY_10[0];

#define VERIFY "memra_gdn_verify"
#define OP_CASE(fn, op, how, params, flags, what) {fn, op, how, INV, params, flags, what, cc_op}
#define STRUCT_CASES(fn, op)                                                                       \
    OP_CASE(fn, op, CO_ARGS_NULL, "args", BI_CC_ANY, "args = NULL"),                               \
    SIZE_CASES(fn, op, cc_op)

const bi_custom BI_ENTRY_11[] = {
    STRUCT_CASES(VERIFY, OA_V_SNAP),
    STRUCT_CASES(VERIFY, OA_V_JOURNAL),
    STRUCT_CASES("memra_gdn_journal_commit", OA_COMMIT),
    STRUCT_CASES("memra_gdn_rollback", OA_ROLLBACK),
    {"memra_verify_args_init", -1, 0, INV, "args", BI_CC_ANY, "args = NULL", cc_init_null},
    OP_CASE(VERIFY, OA_V_SNAP, CO_INIT_ONLY, NULL, BI_CC_ANY, "a struct only memra_verify_args_init filled"),
    OP_CASE(VERIFY, OA_V_JOURNAL, CO_INIT_ONLY, NULL, BI_CC_ANY, "a JOURNAL struct only memra_verify_args_init filled"),
    OP_CASE("memra_gdn_journal_commit", OA_COMMIT, CO_INIT_ONLY, NULL, BI_CC_ANY, "a struct only memra_verify_args_init filled"),
    OP_CASE("memra_gdn_rollback", OA_ROLLBACK, CO_INIT_ONLY, NULL, BI_CC_ANY, "a struct only memra_verify_args_init filled"),
    OP_CASE(VERIFY, OA_V_SNAP, CO_EPS_UNSET, "eps", 0, "eps left as init set it (NaN)"),
    OP_CASE(VERIFY, OA_V_FINAL, CO_SCALE_UNSET, "scale", 0, "scale left as init set it (NaN)"),
    OP_CASE("memra_gdn_journal_commit", OA_COMMIT, CO_EPS_UNSET, "eps", 0, "eps left as init set it (NaN)"),
    OP_CASE(VERIFY, OA_V_FINAL, CO_SNAP_CONV_GIVEN, "snap_conv", 0, "snap_conv given in FINAL_ONLY mode"),
    OP_CASE(VERIFY, OA_V_FINAL, CO_SNAP_SSM_GIVEN, "snap_ssm", 0, "snap_ssm given in FINAL_ONLY mode"),
    OP_CASE(VERIFY, OA_V_JOURNAL, CO_SNAP_CONV_GIVEN, "snap_conv", 0, "snap_conv given in JOURNAL mode"),
    OP_CASE(VERIFY, OA_V_JOURNAL, CO_SNAP_SSM_GIVEN, "snap_ssm", 0, "snap_ssm given in JOURNAL mode"),
    OP_CASE(VERIFY, OA_V_SNAP, CO_ACCEPTED_GIVEN, "accepted", 0, "accepted given in SNAPSHOTS mode"),
    OP_CASE(VERIFY, OA_V_FINAL, CO_ACCEPTED_GIVEN, "accepted", 0, "accepted given in FINAL_ONLY mode"),

#define JL_CASE(sub, expect, params, what)                                                         \
    {"memra_gdn_journal_len", -1, sub, expect, params, BI_CC_ANY, what, cc_journal_len}
    JL_CASE(JL_NULL_OUT, INV, "out_len", "out_len = NULL"),
    JL_CASE(JL_D_STATE_0, INV, "d_state", "d_state = 0"),
    JL_CASE(JL_D_STATE_64, BI_UNS, "d_state", "d_state = 64"),
    JL_CASE(JL_NUM_K_0, INV, "num_k", "num_k = 0"),
    JL_CASE(JL_NUM_V_0, INV, "num_v", "num_v = 0"),
    JL_CASE(JL_NUM_V_3, INV, "num_v|num_k", "num_v = 3 not a multiple of num_k = 2"),
    JL_CASE(JL_T_MAX_0, INV, "t_max", "t_max = 0"),
    JL_CASE(JL_T_MAX_HUGE, INV, NULL, "t_max = SIZE_MAX / 4 (the length overflows)"),
    JL_CASE(JL_NUM_V_HUGE, INV, NULL, "num_k = num_v = 2^61 (the length overflows)"),

    ALLOC_CASES("memra_alloc_u32", "* 4"),
    COPY_CASES("memra_htod_u32_into", "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    COPY_CASES("memra_dtoh_u32", "src misaligned by 2 bytes", "dst misaligned by 2 bytes"),
    {"memra_htod_u32_into", -1, SM_HTOD_U32_INTO, BI_CAP, CAP, 0, "copied counts in", cc_step},
    {"memra_dtoh_u32", -1, SM_DTOH_U32, BI_CAP, CAP, 0, "read counts back", cc_step},
};
/* clang-format on */
const size_t BI_N_ENTRY_11 = sizeof BI_ENTRY_11 / sizeof BI_ENTRY_11[0];

/* ---- memra_status_string: unknown values ---- */

static const MemraStatus unknown_statuses[] = {9, 10, 100, 0x7fffffff, UINT32_MAX};

ParameterizedTestParameters(bad_input, status_string_unknown)
{
    return cr_make_param_array(MemraStatus, (void *)unknown_statuses,
                               sizeof unknown_statuses / sizeof unknown_statuses[0]);
}

ParameterizedTest(MemraStatus *status, bad_input, status_string_unknown)
{
    bi_prime_message("memra_status_string");
    char before[1024];
    snprintf(before, sizeof before, "%s", memra_last_error_message());
    const char *s = memra_status_string(*status);
    cr_assert_not_null(s);
    cr_assert_str_eq(s, "MEMRA_STATUS_<unknown>", "memra_status_string(%u) = \"%s\"",
                     (unsigned)*status, s);
    cr_assert_str_eq(memra_last_error_message(), before,
                     "memra_status_string changed the thread's last error message");
}

/* ---- A leak on purpose, to prove that the leak checks see the library ---- */

/* `make asan` and `make leakcheck` run this with MEMRA_LEAK_CANARY=1 and fail unless their
 * checker reports the engine and the buffer below as leaked: a checker that misses them would
 * miss the library's own leaks too. Skipped otherwise. */
Test(bad_input_canary, leak)
{
    const char *on = getenv("MEMRA_LEAK_CANARY");
    if (on == NULL || strcmp(on, "1") != 0)
        cr_skip_test("leaks on purpose; only the leak checks' self-test enables it");
    MemraEngine *e = tu_engine(MEMRA_BACKEND_CPU);
    MemraSliceMutF32 s = tu_zeros(e, 1000);
    cr_assert_not_null(s.ptr);
}
