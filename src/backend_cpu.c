/*
 * The CPU backend: host memory stands in for device memory, operations run synchronously on
 * the calling thread through the reference kernels in kernels/cpu/, and a graph is the list of
 * operations recorded during capture, replayed in order. The recorded arguments hold the
 * addresses of pointer tables, never their contents, so a replay follows table rewrites
 * exactly as a CUDA graph does.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dev_error.h"
#include "status.h"

/* Buffers are aligned like cudaMalloc's, so that alignment-sensitive host code behaves the
 * same on both backends. */
#define CPU_ALIGN ((size_t)256)

/* One operation, run at once or kept in a recorded graph. */
typedef struct cpu_op {
    memra__kernel kernel;
    memra__kernel_args u;
    /* The verify's scratch memory (its u.verify.workspace), owned by the op: freed with the
     * graph, or right after an eager run; NULL for the other kernels. */
    float *scratch;
} cpu_op;

typedef struct cpu_graph {
    cpu_op *ops;
    size_t n;
    size_t cap;
} cpu_graph;

typedef struct cpu_engine {
    /* The graph being recorded, between capture_begin and capture_end. */
    cpu_graph *recording;
    /* Bad accepted counts found by the 1.1 operations, reported at the next synchronising call
     * like the CUDA backend's (which can only see them then). */
    memra__dev_error err;
} cpu_engine;

/* The reference kernel of each row of the operation table. */
static void run_op(const cpu_op *op)
{
    switch (op->kernel) {
#define MEMRA__KERNEL(kernel, args, cpu, ...)                                                      \
    case MEMRA__KERNEL_##kernel:                                                                   \
        cpu(&op->u.kernel);                                                                        \
        break;
#include "ops.def"
    case MEMRA__N_KERNELS:
        break;
    }
}

/* The backend's state of an engine. */
static cpu_engine *cpu_of(MemraEngine *engine)
{
    return memra__device_of(engine)->impl;
}

/* Runs `op` now, or appends it to the graph being recorded. */
static MemraStatus submit(MemraEngine *engine, const cpu_op *op)
{
    cpu_graph *g = cpu_of(engine)->recording;
    if (g == NULL) {
        run_op(op);
        free(op->scratch);
        return MEMRA_STATUS_OK;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        cpu_op *grown = realloc(g->ops, cap * sizeof *grown);
        if (grown == NULL) {
            free(op->scratch);
            return memra__fail(MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                               "cannot grow the recorded graph to %zu operations", cap);
        }
        g->ops = grown;
        g->cap = cap;
    }
    g->ops[g->n++] = *op;
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_engine_init(MemraEngine *engine, const MemraEngineOptions *o)
{
    memra__device *d = memra__device_of(engine);
    MEMRA__FAIL_IF(o->stream != NULL, MEMRA_STATUS_INVALID_ARGUMENT, "cpu backend",
                   "parameter 'options->stream': the CPU backend has no stream; expected NULL");
    d->impl = calloc(1, sizeof(cpu_engine));
    MEMRA__FAIL_IF(d->impl == NULL, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                   "cannot allocate the engine state");
    d->stream = NULL;
    d->owns_stream = false;
    return MEMRA_STATUS_OK;
}

static void free_graph(cpu_graph *g)
{
    if (g != NULL) {
        for (size_t i = 0; i < g->n; i++)
            free(g->ops[i].scratch);
        free(g->ops);
    }
    free(g);
}

static void cpu_engine_fini(MemraEngine *engine)
{
    memra__device *d = memra__device_of(engine);
    cpu_engine *c = d->impl;
    if (c != NULL)
        free_graph(c->recording);
    free(c);
    d->impl = NULL;
}

static MemraStatus cpu_mem_alloc(MemraEngine *engine, size_t bytes, bool zeroed, void **out)
{
    /* aligned_alloc wants a multiple of the alignment. */
    size_t rounded = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    void *p;
    MEMRA__FAIL_IF(rounded < bytes, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                   "cannot allocate %zu bytes", bytes);
    p = aligned_alloc(CPU_ALIGN, rounded);
    MEMRA__FAIL_IF(p == NULL, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                   "cannot allocate %zu bytes", bytes);
    if (zeroed)
        memset(p, 0, rounded);
    *out = p;
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_mem_free(MemraEngine *engine, void *ptr)
{
    free(ptr);
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_copy(MemraEngine *engine, void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_synchronize(MemraEngine *engine)
{
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_take_findings(MemraEngine *engine)
{
    return memra__dev_error_take("cpu backend", &cpu_of(engine)->err);
}

static MemraStatus cpu_enqueue(MemraEngine *engine, memra__kernel k, memra__kernel_args *args)
{
    cpu_op op = {.kernel = k, .u = *args};
    memra__kernel_set_findings(k, &op.u, &cpu_of(engine)->err, NULL);
    if (k == MEMRA__KERNEL_verify) {
        /* The host's workspace is sized for the CUDA kernels; the reference needs its own. */
        const size_t words = memra__cpu_verify_scratch_words(&op.u.verify);
        op.scratch = malloc(words * sizeof(float));
        MEMRA__FAIL_IF(op.scratch == NULL, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                       "cannot allocate %zu floats of verify scratch", words);
        op.u.verify.workspace = op.scratch;
    }
    return submit(engine, &op);
}

static MemraStatus cpu_capture_begin(MemraEngine *engine)
{
    cpu_engine *c = cpu_of(engine);
    c->recording = calloc(1, sizeof(cpu_graph));
    MEMRA__FAIL_IF(c->recording == NULL, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                   "cannot allocate the graph being recorded");
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_capture_end(MemraEngine *engine, bool keep, void **out_exec)
{
    cpu_engine *c = cpu_of(engine);
    if (keep)
        *out_exec = c->recording;
    else
        free_graph(c->recording);
    c->recording = NULL;
    return MEMRA_STATUS_OK;
}

static MemraStatus cpu_graph_launch(MemraEngine *engine, void *exec)
{
    const cpu_graph *g = exec;
    for (size_t i = 0; i < g->n; i++)
        run_op(&g->ops[i]);
    return MEMRA_STATUS_OK;
}

static void cpu_graph_free(MemraEngine *engine, void *exec)
{
    free_graph(exec);
}

const memra__backend memra__backend_cpu = {
    .name = "cpu",
    .kind = MEMRA_BACKEND_CPU,
    .engine_init = cpu_engine_init,
    .engine_fini = cpu_engine_fini,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .copy_htod = cpu_copy,
    .copy_dtoh = cpu_copy,
    .synchronize = cpu_synchronize,
    .enqueue = cpu_enqueue,
    .take_findings = cpu_take_findings,
    .capture_begin = cpu_capture_begin,
    .capture_end = cpu_capture_end,
    .graph_launch = cpu_graph_launch,
    .graph_free = cpu_graph_free,
};
