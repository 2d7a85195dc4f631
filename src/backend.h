/*
 * The backend interface: what the shared host runtime needs from an implementation, as a table
 * of function pointers (the pattern of ggml's backend interface). There are two instances,
 * memra__backend_cpu (src/backend_cpu.c) and memra__backend_cuda (src/backend_cuda.c).
 *
 * A backend differs from the other in how it allocates, copies, synchronises and captures, and
 * in how it runs a kernel: one `enqueue` entry takes every operation by its kernel id from the
 * operation table (src/ops.def, src/ops.h), which also gives each backend its kernel functions.
 *
 * A backend sees one part of an engine, its memra__device (below), and nothing of the engine
 * layer above it (src/engine.h): not the allocation registry, the handle, nor the state of a
 * memra_graph_capture call (which of the step's calls is running). Whether work is recorded
 * rather than run is the backend's own state: the CPU backend records between its
 * capture_begin and capture_end; on CUDA the stream records whatever is enqueued while it is
 * captured, by capture_begin or by a host that captures the stream it gave the engine. The
 * entries take the engine itself, so that the runtime calls them as
 * e->backend->enqueue(e, ...); a backend turns it into its device with memra__device_of().
 *
 * Contract for every entry: the arguments are already validated, the engine is live, not
 * faulted, and the caller holds it exclusively. A failure returns a status with its message
 * already recorded through memra__fail(). A device fault that poisons the context is also
 * reported as the device's sticky fault (memra__device.fault, first one wins), which the engine
 * layer reads to refuse every later call and to skip teardown work that cannot succeed.
 */
#ifndef MEMRA_BACKEND_H
#define MEMRA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels.h"
#include "memra.h"
#include "ops.h"
#include "status.h"

/* The part of an engine that belongs to its backend: the first member of struct MemraEngine
 * (src/engine.h asserts it), so that the engine's address is also its device's. */
typedef struct memra__device {
    /* cudaStream_t on CUDA, NULL on the CPU. */
    void *stream;
    bool owns_stream;
    /* Backend-private state. */
    void *impl;
    /* A device fault that poisoned the context: the backend sets it (first one wins) and every
     * later call returns it. */
    MemraStatus fault;
    char fault_msg[MEMRA__MESSAGE_MAX];
} memra__device;

/* The device of `e`. A pointer to a struct, converted, points to its first member; the
 * conversion needs no view of the engine's other members. */
static inline memra__device *memra__device_of(MemraEngine *e)
{
    return (memra__device *)(void *)e;
}

typedef struct memra__backend {
    const char *name;
    MemraBackend kind;

    /* Sets up e->impl and e->stream (a new non-blocking stream, or options->stream adopted).
     * NO_DEVICE when the backend cannot run here. On failure nothing is left allocated. */
    MemraStatus (*engine_init)(MemraEngine *e, const MemraEngineOptions *options);
    /* Waits for outstanding work and releases what engine_init made; never fails. */
    void (*engine_fini)(MemraEngine *e);

    /* Device memory. `bytes` > 0; `zeroed` buffers read as zero to work enqueued afterwards,
     * also when called while the engine's stream is being captured. Frees are ordered after the
     * work already enqueued. */
    MemraStatus (*mem_alloc)(MemraEngine *e, size_t bytes, bool zeroed, void **out);
    MemraStatus (*mem_free)(MemraEngine *e, void *ptr);
    /* Stream-ordered copy from host memory; `src` may be reused once it returns. */
    MemraStatus (*copy_htod)(MemraEngine *e, void *dst, const void *src, size_t bytes);
    /* Waits for the engine's work, then copies to host memory. */
    MemraStatus (*copy_dtoh)(MemraEngine *e, void *dst, const void *src, size_t bytes);
    MemraStatus (*synchronize)(MemraEngine *e);

    /* Runs operation kernel `k` (src/ops.def) with its arguments `args->k`, or records it
     * into the graph being captured instead while a capture is open (above). The
     * backend fills what the arguments leave to it: the finding record of the kernels that
     * record findings (memra__kernel_set_findings) and the verify's workspace (the engine's
     * own on CUDA when the host passed none; on the CPU always the backend's scratch). Counts
     * and addresses found bad on the device are recorded, not returned: `take_findings`
     * reports them. `args` is the caller's to reuse once this returns. */
    MemraStatus (*enqueue)(MemraEngine *e, memra__kernel k, memra__kernel_args *args);
    /* After a synchronisation: INVALID_ARGUMENT with the first finding the kernels recorded
     * (and the record cleared), or OK. Only the exported synchronising calls ask for it, so
     * that the runtime's own waits (graph and engine teardown) lose no report. */
    MemraStatus (*take_findings)(MemraEngine *e);

    /* Graph capture: begin recording the engine's operations; end it, producing an executable
     * (`keep`) or discarding what was recorded (`!keep`, *out_exec untouched, must not fail). */
    MemraStatus (*capture_begin)(MemraEngine *e);
    MemraStatus (*capture_end)(MemraEngine *e, bool keep, void **out_exec);
    MemraStatus (*graph_launch)(MemraEngine *e, void *exec);
    /* Releases an executable; the runtime has synchronised the engine before calling it. */
    void (*graph_free)(MemraEngine *e, void *exec);
} memra__backend;

extern const memra__backend memra__backend_cpu;
extern const memra__backend memra__backend_cuda;

#endif /* MEMRA_BACKEND_H */
