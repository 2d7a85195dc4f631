/*
 * Exported entry points: buffers and copies. Each validates, then dispatches.
 */
#include "engine.h"
#include "status.h"
#include "validate.h"

/* Shared by the typed allocation entry points: element count to bytes, refusing overflow. The
 * caller has checked the engine. */
static MemraStatus alloc_elems(const char *fn, MemraEngine *e, size_t len, size_t elem,
                               MemraAllocInit init, void **out)
{
    size_t bytes;
    MEMRA__FAIL_IF(len == 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'len': expected >= 1, got 0");
    MEMRA__FAIL_IF(init != MEMRA_ALLOC_INIT_ZEROED && init != MEMRA_ALLOC_INIT_UNINIT,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'init': expected MEMRA_ALLOC_INIT_ZEROED or _UNINIT, got %u",
                   (unsigned)init);
    MEMRA__FAIL_IF(__builtin_mul_overflow(len, elem, &bytes), MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'len': %zu elements of %zu bytes overflow size_t", len, elem);
    return memra__mem_alloc(e, fn, bytes, init == MEMRA_ALLOC_INIT_ZEROED, out);
}

/* The body of memra_alloc_f32 / _u64 / _u32 after MEMRA__ENTER: the engine, the out-parameter
 * `out` (filled by the caller from *ptr), then the allocation. */
static MemraStatus alloc_entry(const char *fn, MemraEngine *e, size_t len, size_t elem,
                               MemraAllocInit init, const void *out, void **ptr)
{
    MEMRA__TRY(memra__check_engine(fn, e));
    MEMRA__TRY(memra__check_out(fn, "out", out));
    return alloc_elems(fn, e, len, elem, init, ptr);
}

/* Allocates a buffer and fills it from host memory; frees it again if the copy fails. */
static MemraStatus upload(const char *fn, MemraEngine *e, const void *src, size_t len, size_t elem,
                          void **out)
{
    void *dst = NULL;
    MemraStatus st;
    MEMRA__TRY(memra__check_engine(fn, e));
    if (e->capture != NULL)
        return memra__capture_forbid(e, fn, "copying host data into a new buffer");
    MEMRA__FAIL_IF(len == 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'src.len': expected >= 1, got 0");
    MEMRA__TRY(memra__validate_source(fn, src, len, elem));
    MEMRA__TRY(alloc_elems(fn, e, len, elem, MEMRA_ALLOC_INIT_UNINIT, &dst));
    st = memra__from_backend(fn, e->backend->copy_htod(e, dst, src, len * elem));
    if (st != MEMRA_STATUS_OK) {
        (void)memra__mem_free(e, fn, dst);
        return st;
    }
    *out = dst;
    return MEMRA_STATUS_OK;
}

/* Copies `len` elements between host and engine memory after validating both sides. */
static MemraStatus copy(const char *fn, MemraEngine *e, bool to_device, void *dst, size_t dst_len,
                        const void *src, size_t len, size_t elem)
{
    MEMRA__TRY(memra__check_engine(fn, e));
    if (e->capture != NULL)
        return memra__capture_forbid(e, fn, to_device ? "copying host data" : "reading data back");
    MEMRA__TRY(memra__validate_copy(fn, src, len, dst, dst_len, elem,
                                    e->backend->kind == MEMRA_BACKEND_CPU));
    if (len == 0)
        return MEMRA_STATUS_OK;
    if (to_device)
        return memra__from_backend(fn, e->backend->copy_htod(e, dst, src, len * elem));
    MEMRA__TRY(memra__from_backend(fn, e->backend->copy_dtoh(e, dst, src, len * elem)));
    /* A read-back is a synchronising call: it reports what the 1.1 kernels found. */
    return memra__from_backend(fn, e->backend->take_findings(e));
}

/* The typed entry points differ only in their slice types and element size, so one macro per
 * kind of entry point defines them all and they cannot drift apart; __func__ is still each
 * exported function's own name in messages. */
#define MEMRA__ALLOC_ENTRY(name, Out, T)                                                           \
    MEMRA__EXPORT MemraStatus name(MemraEngine *engine, size_t len, MemraAllocInit init, Out *out) \
    {                                                                                              \
        MEMRA__ENTER(engine);                                                                      \
        void *p = NULL;                                                                            \
        MEMRA__TRY(alloc_entry(__func__, engine, len, sizeof(T), init, out, &p));                  \
        *out = (Out){p, len};                                                                      \
        return MEMRA_STATUS_OK;                                                                    \
    }

#define MEMRA__HTOD_ENTRY(name, Src, Out, T)                                                       \
    MEMRA__EXPORT MemraStatus name(MemraEngine *engine, Src src, Out *out)                         \
    {                                                                                              \
        MEMRA__ENTER(engine);                                                                      \
        void *p = NULL;                                                                            \
        MEMRA__TRY(memra__check_out(__func__, "out", out));                                        \
        MEMRA__TRY(upload(__func__, engine, src.ptr, src.len, sizeof(T), &p));                     \
        *out = (Out){p, src.len};                                                                  \
        return MEMRA_STATUS_OK;                                                                    \
    }

/* to_device: htod (host src, engine dst); otherwise dtoh (engine src, host dst). */
#define MEMRA__COPY_ENTRY(name, Src, Dst, to_device, T)                                            \
    MEMRA__EXPORT MemraStatus name(MemraEngine *engine, Src src, Dst dst)                          \
    {                                                                                              \
        MEMRA__ENTER(engine);                                                                      \
        return copy(__func__, engine, to_device, dst.ptr, dst.len, src.ptr, src.len, sizeof(T));   \
    }

MEMRA__ALLOC_ENTRY(memra_alloc_f32, MemraSliceMutF32, float)
MEMRA__ALLOC_ENTRY(memra_alloc_u64, MemraSliceMutU64, uint64_t)

MEMRA__EXPORT MemraStatus memra_free(MemraEngine *engine, void *ptr)
{
    MEMRA__ENTER(engine);
    /* Freeing must work on a faulted engine: the host is tearing down. */
    MEMRA__TRY(memra__check_engine_handle(__func__, engine));
    return memra__mem_free(engine, __func__, ptr);
}

MEMRA__HTOD_ENTRY(memra_htod_f32, MemraSliceF32, MemraSliceMutF32, float)
MEMRA__HTOD_ENTRY(memra_htod_u64, MemraSliceU64, MemraSliceMutU64, uint64_t)
MEMRA__COPY_ENTRY(memra_htod_f32_into, MemraSliceF32, MemraSliceMutF32, true, float)
MEMRA__COPY_ENTRY(memra_htod_u64_into, MemraSliceU64, MemraSliceMutU64, true, uint64_t)
MEMRA__COPY_ENTRY(memra_dtoh_f32, MemraSliceF32, MemraSliceMutF32, false, float)
MEMRA__COPY_ENTRY(memra_dtoh_u64, MemraSliceU64, MemraSliceMutU64, false, uint64_t)

/* 1.1: u32 buffers, for the accepted counts of the journal and rollback operations. */
MEMRA__ALLOC_ENTRY(memra_alloc_u32, MemraSliceMutU32, uint32_t)
MEMRA__COPY_ENTRY(memra_htod_u32_into, MemraSliceU32, MemraSliceMutU32, true, uint32_t)
MEMRA__COPY_ENTRY(memra_dtoh_u32, MemraSliceU32, MemraSliceMutU32, false, uint32_t)

/* 1.2: device-to-device state copies whose addresses are read from device tables when they
 * execute (graph-capturable like the operations). */
MEMRA__EXPORT MemraStatus memra_copy_batch_uniform_f32(MemraEngine *engine, MemraSliceU64 table,
                                                       size_t n, size_t words)
{
    MEMRA__ENTER(engine);
    memra__copy_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_copy_batch(__func__, table, n, words, &args));
    return memra__enqueue_copy(engine, MEMRA__OP_COPY_BATCH, &args);
}

MEMRA__EXPORT MemraStatus memra_copy_indirect_src_f32(MemraEngine *engine, MemraSliceU64 src_ptr,
                                                      MemraSliceMutF32 dst, size_t dst_off,
                                                      size_t n)
{
    MEMRA__ENTER(engine);
    memra__copy_args args;
    MEMRA__TRY(memra__check_engine(__func__, engine));
    MEMRA__TRY(memra__validate_copy_indirect(__func__, src_ptr, dst, dst_off, n, &args));
    return memra__enqueue_copy(engine, MEMRA__OP_COPY_INDIRECT, &args);
}
