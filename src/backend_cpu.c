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

typedef enum {
    CPU_OP_CONV,
    CPU_OP_PREP,
    CPU_OP_SCAN,
    CPU_OP_VERIFY,
    CPU_OP_ROLLBACK,
    CPU_OP_COPY
} cpu_op_kind;

typedef struct cpu_op {
    cpu_op_kind kind;
    union {
        memra__conv_args conv;
        memra__prep_args prep;
        memra__scan_args scan;
        memra__verify_args verify;
        memra__rollback_args rollback;
        memra__copy_args copy;
    } u;
    /* CPU_OP_VERIFY: its scratch memory, owned by the op (freed with the graph, or right after
     * an eager run). */
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

static void run_op(const cpu_op *op)
{
    switch (op->kind) {
    case CPU_OP_CONV:
        memra__cpu_ssm_conv1d(&op->u.conv);
        break;
    case CPU_OP_PREP:
        memra__cpu_gdn_prep(&op->u.prep);
        break;
    case CPU_OP_SCAN:
        memra__cpu_gdn_scan(&op->u.scan);
        break;
    case CPU_OP_VERIFY:
        memra__cpu_gdn_verify(&op->u.verify, op->scratch);
        break;
    case CPU_OP_ROLLBACK:
        memra__cpu_gdn_rollback(&op->u.rollback);
        break;
    case CPU_OP_COPY:
        memra__cpu_state_copy(&op->u.copy);
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

static MemraStatus cpu_conv(MemraEngine *engine, const memra__conv_args *args)
{
    cpu_op op = {.kind = CPU_OP_CONV, .u.conv = *args};
    return submit(engine, &op);
}

static MemraStatus cpu_prep(MemraEngine *engine, const memra__prep_args *args)
{
    cpu_op op = {.kind = CPU_OP_PREP, .u.prep = *args};
    return submit(engine, &op);
}

static MemraStatus cpu_scan(MemraEngine *engine, const memra__scan_args *args)
{
    cpu_op op = {.kind = CPU_OP_SCAN, .u.scan = *args};
    return submit(engine, &op);
}

static MemraStatus cpu_verify(MemraEngine *engine, const memra__verify_args *args)
{
    cpu_op op = {.kind = CPU_OP_VERIFY, .u.verify = *args};
    const size_t words = memra__cpu_verify_scratch_words(args);
    op.u.verify.err = &cpu_of(engine)->err;
    op.scratch = malloc(words * sizeof(float));
    MEMRA__FAIL_IF(op.scratch == NULL, MEMRA_STATUS_OUT_OF_MEMORY, "cpu backend",
                   "cannot allocate %zu floats of verify scratch", words);
    return submit(engine, &op);
}

static MemraStatus cpu_rollback(MemraEngine *engine, const memra__rollback_args *args)
{
    cpu_op op = {.kind = CPU_OP_ROLLBACK, .u.rollback = *args};
    op.u.rollback.err = &cpu_of(engine)->err;
    return submit(engine, &op);
}

static MemraStatus cpu_state_copy(MemraEngine *engine, const memra__copy_args *args)
{
    cpu_op op = {.kind = CPU_OP_COPY, .u.copy = *args};
    op.u.copy.err = &cpu_of(engine)->err;
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
    .conv = cpu_conv,
    .prep = cpu_prep,
    .scan = cpu_scan,
    .verify = cpu_verify,
    .rollback = cpu_rollback,
    .take_findings = cpu_take_findings,
    .capture_begin = cpu_capture_begin,
    .capture_end = cpu_capture_end,
    .graph_launch = cpu_graph_launch,
    .graph_free = cpu_graph_free,
    .state_copy = cpu_state_copy,
};
