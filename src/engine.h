/*
 * Engine, graph and allocation bookkeeping shared by the exported entry points and the
 * backends. Layering: api_*.c -> validate.c -> engine.c / graph.c / memory.c -> backend_*.c ->
 * kernels/. Nothing below calls upwards.
 */
#ifndef MEMRA_ENGINE_H
#define MEMRA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "memra.h"

/* Handles carry a magic word so that a NULL, foreign or already destroyed handle is refused with
 * INVALID_ARGUMENT instead of being dereferenced further (best effort: freed memory can be
 * reused, but destroy clears the word first). */
#define MEMRA__ENGINE_MAGIC UINT64_C(0x454e474e41524d45) /* "EMRANGNE" */
#define MEMRA__GRAPH_MAGIC UINT64_C(0x4850524741524d45)  /* "EMRAGRPH" */

#define MEMRA__MESSAGE_MAX 512

/* One live buffer made by memra_alloc_* / memra_htod_*. */
typedef struct memra__alloc {
    void *ptr;
    size_t bytes;
    /* The graph this buffer belongs to (allocated during its capture), or NULL. */
    MemraGraph *owner;
    /* memra_free() was called on a graph-owned buffer: it goes with the graph. */
    bool freed_by_host;
} memra__alloc;

/* State of one memra_graph_capture() call while its step runs. */
typedef struct memra__capture {
    MemraGraph *graph;
    /* Set during the third, captured call of the step: operations are recorded, not run. */
    bool recording;
    /* The first forbidden call or failure seen during the capture (OK when none). */
    MemraStatus failure;
    char failure_msg[MEMRA__MESSAGE_MAX];
} memra__capture;

struct MemraEngine {
    uint64_t magic;
    const memra__backend *backend;
    int32_t device_ordinal;
    /* cudaStream_t on CUDA, NULL on the CPU. */
    void *stream;
    bool owns_stream;
    /* Backend-private state. */
    void *impl;
    /* A device fault that poisoned the context: every later call returns it. */
    MemraStatus fault;
    char fault_msg[MEMRA__MESSAGE_MAX];
    memra__alloc *allocs;
    size_t n_allocs;
    size_t cap_allocs;
    size_t live_graphs;
    memra__capture *capture;
};

struct MemraGraph {
    uint64_t magic;
    MemraEngine *engine;
    void *exec;
};

/* Records a sticky device fault on the engine (first one wins) and returns `status` with the
 * message also set as the thread's last error. */
MemraStatus memra__engine_fault(MemraEngine *e, MemraStatus status, const char *fn,
                                const char *msg);

/* Returns the engine's sticky fault (with its message re-recorded for this thread) or OK. */
MemraStatus memra__engine_check_fault(const MemraEngine *e, const char *fn);

/* Marks the capture in progress as failed (first failure wins) and returns CAPTURE_ERROR with
 * "fn: what" as the thread's message. Used by calls that must not run inside a capture. */
MemraStatus memra__capture_forbid(MemraEngine *e, const char *fn, const char *what);

/* Engine lifetime (engine.c). `fn` is the exported function, for messages. */
void memra__options_default(MemraEngineOptions *options);
MemraStatus memra__engine_create(const char *fn, const MemraEngineOptions *options,
                                 MemraEngine **out);
/* `e` is a live handle; refuses while graphs are alive or a capture runs. */
MemraStatus memra__engine_destroy(const char *fn, MemraEngine *e);

/* Graphs (graph.c); handles are validated by the caller. */
MemraStatus memra__graph_capture(const char *fn, MemraEngine *e, MemraStepFn step, void *user,
                                 MemraGraph **out);
MemraStatus memra__graph_launch(const char *fn, MemraEngine *e, const MemraGraph *g);
MemraStatus memra__graph_destroy(const char *fn, MemraEngine *e, MemraGraph *g);

/* Re-labels a backend failure with the exported function's name, so that the host's message
 * says which call failed first and what the backend saw second. OK passes through. */
MemraStatus memra__from_backend(const char *fn, MemraStatus st);

/* Allocation registry (memory.c). */
MemraStatus memra__mem_alloc(MemraEngine *e, const char *fn, size_t bytes, bool zeroed, void **out);
MemraStatus memra__mem_free(MemraEngine *e, const char *fn, void *ptr);
/* Frees every buffer owned by `owner` (NULL: every buffer of the engine). */
void memra__mem_release_owned(MemraEngine *e, const MemraGraph *owner, bool all);

#endif /* MEMRA_ENGINE_H */
