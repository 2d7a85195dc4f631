/*
 * Engine, graph and allocation bookkeeping shared by the exported entry points and the
 * backends.
 *
 * The host runtime is built in one-way layers. Layers, bottom first:
 *   status: status.h status.c
 *   device: ops.def ops.h backend.h dev_error.h dev_error.c
 *   backends: backend_cpu.c backend_cuda.c
 *   engine: engine.h handles.c memory.c engine.c graph.c
 *   validate: validate.h validate.c
 *   api: api_engine.c api_graph.c api_memory.c api_ops.c api_verify.c
 *
 * A file includes headers and calls functions only of the files listed before it, in its own
 * layer or below; tools/check-layers.sh reads this list and fails `make test` on any include or
 * call that goes up it, so every cycle is refused. What each layer is for:
 *   - status: the per-thread message and the failure macros, under everything;
 *   - device: the operation table (ops.def, the one description of every operation), the
 *     backend interface (the table and the memra__device part of an engine that a backend
 *     sees) and the device-findings record the backends share;
 *   - backends: the CPU and the CUDA implementation of that interface, over kernels/;
 *   - engine: handles and calls, the allocation registry, engine lifetime and graphs, which run
 *     the backends through the interface (this header);
 *   - validate: argument checks shared by both backends;
 *   - api: the exported entry points, each of which validates, then dispatches.
 * Two lower layers are called back without naming the layer above: the backends through the
 * table of backend.h, and the status layer through the failure hook that graph.c installs
 * (memra__set_failure_hook), which is how a failure inside a graph step reaches its capture.
 * The kernels (kernels/kernels.h) and the public header lie below all of them.
 */
#ifndef MEMRA_ENGINE_H
#define MEMRA_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "memra.h"
#include "status.h"

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
    /* Which call of the step is running (0-based), for messages. */
    int call;
    /* The first refused call, forbidden call or failure seen during the capture (OK when
     * none). */
    MemraStatus failure;
    char failure_msg[MEMRA__MESSAGE_MAX];
} memra__capture;

/* The registry slot behind a handle (src/handles.c). */
struct memra__slot;

struct MemraEngine {
    /* What the backend sees (stream, its state, the sticky fault); first, so that the backend
     * reaches it from the engine's address alone (memra__device_of, backend.h). */
    memra__device dev;
    /* The identifier the host holds, and its slot in the registry. */
    uintptr_t handle;
    struct memra__slot *slot;
    const memra__backend *backend;
    int32_t device_ordinal;
    memra__alloc *allocs;
    size_t n_allocs;
    size_t cap_allocs;
    size_t live_graphs;
    memra__capture *capture;
};

struct MemraGraph {
    uintptr_t handle;
    struct memra__slot *slot;
    MemraEngine *engine;
    void *exec;
};

_Static_assert(offsetof(struct MemraEngine, dev) == 0,
               "memra__device_of() converts an engine's address to its device's");

/* ---- Handles and calls (src/handles.c) ----
 *
 * The host never sees an engine's or a graph's address: it holds an identifier that the
 * registry maps back to the object while it lives, and refuses for ever once it is destroyed.
 * Lookups never touch the object's memory, so a dead, foreign or forged handle is refused
 * without reading anything that may have been freed. */

typedef enum { MEMRA__HANDLE_ENGINE = 1, MEMRA__HANDLE_GRAPH = 2 } memra__handle_kind;

/* One exported call that names an engine, on the calling thread's stack. */
typedef struct memra__call {
    const char *fn;
    /* The engine the call holds; NULL before the call got it and once it was destroyed. */
    MemraEngine *engine;
    struct memra__slot *slot;
    /* The thread's enclosing call (a graph step's calls sit inside memra_graph_capture), and
     * where the thread keeps its innermost one. */
    struct memra__call *outer;
    struct memra__call **current;
    /* This call took the engine's owner word (and gives it back when it leaves). */
    bool owns;
    /* The thread already held the engine: a call made by a graph step on its own engine. */
    bool nested;
    /* memra_engine_destroy retired the handle: its slot is free once the call leaves. */
    bool retired;
} memra__call;

/* MEMRA__ENTER(engine): the first statement of every exported function that takes an engine,
 * before anything else uses the parameter (memra_engine_destroy only returns OK for NULL
 * first), and in the function itself, not in a helper: the engine is given back when the
 * function returns, by any `return` (the cleanup attribute). It refuses a NULL, destroyed,
 * foreign or forged handle, and one that another thread is inside a call on, with
 * INVALID_ARGUMENT naming parameter 'engine'; otherwise it replaces the handle in the
 * parameter by the engine it names. The usual memra__check_engine(__func__, engine) follows; it
 * fails with INTERNAL where the bracket is missing. The same thread may enter an engine it
 * already holds: that is a graph step calling back. Inside a step, a call on the capturing
 * engine that fails makes the capture fail (see memra__note_failure). */
#define MEMRA__ENTER(engine)                                                                       \
    memra__call memra__call_ __attribute__((cleanup(memra__leave))) = {0};                         \
    MEMRA__TRY(memra__enter(&memra__call_, __func__, (engine)));                                   \
    (engine) = memra__call_.engine

MemraStatus memra__enter(memra__call *call, const char *fn, const MemraEngine *handle);
void memra__leave(memra__call *call);
/* The calling thread's innermost call, or NULL. */
const memra__call *memra__current_call(void);

/* Registers a new engine (parent NULL) or graph (parent: its engine) and returns its handle
 * and slot. OUT_OF_MEMORY when the registry cannot grow. */
MemraStatus memra__handle_new(const char *fn, memra__handle_kind kind, void *object,
                              const MemraEngine *parent, uintptr_t *out_handle,
                              struct memra__slot **out_slot);
/* Retires a graph's handle and frees its slot. */
void memra__handle_free(struct memra__slot *slot);
/* Retires the handle of the engine that the calling thread's call is destroying; the slot is
 * freed when that call leaves. */
void memra__engine_retire(MemraEngine *e);
/* How many calls from other threads were refused because `e` was in use. */
uint32_t memra__engine_refusals(const MemraEngine *e);
/* Maps a graph handle to the graph, refusing a NULL, dead or forged one and a graph of another
 * engine than `e` (which the caller holds). */
MemraStatus memra__resolve_graph(const char *fn, const MemraEngine *e, const MemraGraph *handle,
                                 MemraGraph **out);

/* The failure hook (memra__set_failure_hook, status.h) that memra__graph_capture installs:
 * inside a graph step, a call on the capturing engine that fails marks the capture as failed
 * with the thread's last message (first failure wins). */
void memra__note_failure(MemraStatus status);

/* Returns the engine's sticky fault (with its message re-recorded for this thread) or OK. */
MemraStatus memra__engine_check_fault(const MemraEngine *e, const char *fn);

/* Returns CAPTURE_ERROR with "fn: not allowed inside memra_graph_capture: what" as the thread's
 * message; like every failure inside a step, it fails the capture. Used by calls that must not
 * run inside a capture. */
MemraStatus memra__capture_forbid(MemraEngine *e, const char *fn, const char *what);

/* Engine lifetime (engine.c). `fn` is the exported function, for messages. */
void memra__options_default(MemraEngineOptions *options);
MemraStatus memra__engine_create(const char *fn, const MemraEngineOptions *options,
                                 MemraEngine **out);
/* `e` is held by the calling thread's call; refuses while graphs are alive or a capture runs. */
MemraStatus memra__engine_destroy(const char *fn, MemraEngine *e);

/* Graphs (graph.c); handles are validated by the caller. */
MemraStatus memra__graph_capture(const char *fn, MemraEngine *e, MemraStepFn step, void *user,
                                 MemraGraph **out);
MemraStatus memra__graph_launch(const char *fn, MemraEngine *e, const MemraGraph *g);
MemraStatus memra__graph_destroy(const char *fn, MemraEngine *e, MemraGraph *g);

/* Operations (engine.c): enqueues operation `op`, whose kernel is `k`, on the engine's backend
 * (run, or recorded while a capture is open), with the message of a failure naming the
 * exported function. The caller has validated the arguments. memra__enqueue_<kernel>, one per
 * kernel of the operation table, takes that kernel's argument struct, so that an entry point
 * cannot hand a kernel another's arguments; an operation of another kernel is refused with
 * INTERNAL. */
MemraStatus memra__enqueue(MemraEngine *e, memra__op op, memra__kernel k, memra__kernel_args *args);
#define MEMRA__KERNEL(kernel, args_type, ...)                                                      \
    static inline MemraStatus memra__enqueue_##kernel(MemraEngine *e, memra__op op,                \
                                                      const args_type *args)                       \
    {                                                                                              \
        memra__kernel_args u;                                                                      \
        u.kernel = *args;                                                                          \
        return memra__enqueue(e, op, MEMRA__KERNEL_##kernel, &u);                                  \
    }
#include "ops.def"

/* Allocation registry (memory.c). */
MemraStatus memra__mem_alloc(MemraEngine *e, const char *fn, size_t bytes, bool zeroed, void **out);
MemraStatus memra__mem_free(MemraEngine *e, const char *fn, void *ptr);
/* Frees every buffer owned by `owner` (NULL: every buffer of the engine). */
void memra__mem_release_owned(MemraEngine *e, const MemraGraph *owner, bool all);

#endif /* MEMRA_ENGINE_H */
