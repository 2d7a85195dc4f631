/*
 * The allocation registry. Every buffer the library hands out is recorded on its engine, so
 * that memra_free() can refuse pointers it never made, memra_engine_destroy() can release what
 * the host forgot, and buffers allocated (or freed) while a graph is being captured can live
 * exactly as long as that graph.
 */
#include <stdlib.h>

#include "engine.h"
#include "status.h"

static memra__alloc *find(MemraEngine *e, const void *ptr)
{
    for (size_t i = 0; i < e->n_allocs; i++)
        if (e->allocs[i].ptr == ptr)
            return &e->allocs[i];
    return NULL;
}

static void forget(MemraEngine *e, memra__alloc *a)
{
    *a = e->allocs[--e->n_allocs];
}

MemraStatus memra__mem_alloc(MemraEngine *e, const char *fn, size_t bytes, bool zeroed, void **out)
{
    void *ptr = NULL;
    /* Grow the registry first: once the backend has allocated, recording it must not fail. */
    if (e->n_allocs == e->cap_allocs) {
        size_t cap = e->cap_allocs ? 2 * e->cap_allocs : 16;
        memra__alloc *grown = realloc(e->allocs, cap * sizeof *grown);
        MEMRA__FAIL_IF(grown == NULL, MEMRA_STATUS_OUT_OF_MEMORY, fn,
                       "cannot grow the allocation registry to %zu entries", cap);
        e->allocs = grown;
        e->cap_allocs = cap;
    }
    MEMRA__TRY(memra__from_backend(fn, e->backend->mem_alloc(e, bytes, zeroed, &ptr)));
    e->allocs[e->n_allocs++] = (memra__alloc){
        .ptr = ptr,
        .bytes = bytes,
        .owner = e->capture ? e->capture->graph : NULL,
        .freed_by_host = false,
    };
    *out = ptr;
    return MEMRA_STATUS_OK;
}

MemraStatus memra__mem_free(MemraEngine *e, const char *fn, void *ptr)
{
    memra__alloc *a;
    MemraStatus st;
    if (ptr == NULL)
        return MEMRA_STATUS_OK;
    a = find(e, ptr);
    MEMRA__FAIL_IF(a == NULL || a->freed_by_host, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'ptr': expected the start of a live buffer of this engine, got %p "
                   "(%s)",
                   ptr, a ? "already freed" : "not allocated by this engine");
    /* A buffer freed while a graph is being captured may be used by what the graph recorded,
     * so it goes to that graph; a buffer the graph already owns stays until the graph goes. */
    if (e->capture != NULL && a->owner == NULL)
        a->owner = e->capture->graph;
    if (a->owner != NULL) {
        a->freed_by_host = true;
        return MEMRA_STATUS_OK;
    }
    st = e->backend->mem_free(e, ptr);
    /* After a device fault the driver may refuse to free; the buffer is gone with the context
     * anyway, and the host must be able to drop its handles. */
    if (st != MEMRA_STATUS_OK && e->dev.fault == MEMRA_STATUS_OK)
        return memra__from_backend(fn, st);
    forget(e, a);
    return MEMRA_STATUS_OK;
}

void memra__mem_release_owned(MemraEngine *e, const MemraGraph *owner, bool all)
{
    size_t i = 0;
    while (i < e->n_allocs) {
        memra__alloc *a = &e->allocs[i];
        if (all || a->owner == owner) {
            (void)e->backend->mem_free(e, a->ptr);
            forget(e, a);
        } else {
            i++;
        }
    }
}
