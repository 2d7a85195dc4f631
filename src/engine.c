/*
 * Engine lifetime: option handling, backend selection (with the MEMRA_BACKEND override), the
 * check of the sticky device fault that the backend reports, and teardown; and the one path by
 * which every operation reaches the backend.
 */
#include "engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* The size of MemraEngineOptions in ABI 1.0. A later minor version that appends fields keeps
 * accepting callers compiled against this size. */
#define MEMRA__OPTIONS_SIZE_1_0 ((size_t)32)
/* The 1.0 fields end with `flags`; a later version only appends after it. */
_Static_assert(offsetof(MemraEngineOptions, flags) + sizeof(uint64_t) == MEMRA__OPTIONS_SIZE_1_0,
               "MemraEngineOptions of ABI 1.0");
#define MEMRA__KNOWN_FLAGS ((uint64_t)MEMRA_ENGINE_FLAG_IGNORE_ENV)

void memra__options_default(MemraEngineOptions *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->backend = MEMRA_BACKEND_AUTO;
    o->device_ordinal = 0;
    o->stream = NULL;
    o->flags = 0;
}

/* Copies the caller's options into a full-size struct of this version, so that a caller built
 * against an older (smaller) header gets defaults for the fields it does not know. */
static MemraStatus read_options(const char *fn, const MemraEngineOptions *in, MemraEngineOptions *o)
{
    memra__options_default(o);
    if (in == NULL)
        return MEMRA_STATUS_OK;
    MEMRA__TRY(memra__read_versioned(fn, "options->struct_size", "structs",
                                     "memra_engine_options_init", in, in->struct_size,
                                     MEMRA__OPTIONS_SIZE_1_0, o, sizeof *o));
    MEMRA__FAIL_IF(o->backend != MEMRA_BACKEND_AUTO && o->backend != MEMRA_BACKEND_CUDA &&
                       o->backend != MEMRA_BACKEND_CPU,
                   MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'options->backend': expected MEMRA_BACKEND_AUTO, _CUDA or _CPU, "
                   "got %u",
                   (unsigned)o->backend);
    MEMRA__FAIL_IF(o->device_ordinal < 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'options->device_ordinal': expected >= 0, got %d",
                   (int)o->device_ordinal);
    MEMRA__FAIL_IF((o->flags & ~MEMRA__KNOWN_FLAGS) != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'options->flags': unknown bits 0x%llx (known: 0x%llx)",
                   (unsigned long long)(o->flags & ~MEMRA__KNOWN_FLAGS),
                   (unsigned long long)MEMRA__KNOWN_FLAGS);
    return MEMRA_STATUS_OK;
}

/* MEMRA_BACKEND replaces AUTO for hosts that do not choose a backend themselves. */
static MemraStatus apply_env(const char *fn, MemraEngineOptions *o)
{
    const char *env;
    if (o->backend != MEMRA_BACKEND_AUTO || (o->flags & MEMRA_ENGINE_FLAG_IGNORE_ENV))
        return MEMRA_STATUS_OK;
    env = getenv("MEMRA_BACKEND");
    if (env == NULL || *env == '\0' || strcmp(env, "auto") == 0)
        return MEMRA_STATUS_OK;
    if (strcmp(env, "cpu") == 0)
        o->backend = MEMRA_BACKEND_CPU;
    else if (strcmp(env, "cuda") == 0)
        o->backend = MEMRA_BACKEND_CUDA;
    else
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "environment variable MEMRA_BACKEND: expected cpu, cuda or auto, got "
                           "\"%.64s\"",
                           env);
    return MEMRA_STATUS_OK;
}

static MemraStatus init_on(MemraEngine *e, const memra__backend *b, const MemraEngineOptions *o)
{
    e->backend = b;
    return b->engine_init(e, o);
}

MemraStatus memra__engine_create(const char *fn, const MemraEngineOptions *options,
                                 MemraEngine **out)
{
    MemraEngineOptions o;
    MemraEngine *e;
    MemraStatus st;

    MEMRA__TRY(read_options(fn, options, &o));
    MEMRA__TRY(apply_env(fn, &o));
    e = calloc(1, sizeof *e);
    MEMRA__FAIL_IF(e == NULL, MEMRA_STATUS_OUT_OF_MEMORY, fn, "cannot allocate the engine");
    e->device_ordinal = o.device_ordinal;

    switch (o.backend) {
    case MEMRA_BACKEND_CUDA:
        st = init_on(e, &memra__backend_cuda, &o);
        break;
    case MEMRA_BACKEND_CPU:
        st = init_on(e, &memra__backend_cpu, &o);
        break;
    default:
        /* AUTO: the CPU is taken only when CUDA reports that no device is usable; any other
         * CUDA failure is an error the host must see. */
        st = init_on(e, &memra__backend_cuda, &o);
        if (st == MEMRA_STATUS_NO_DEVICE)
            st = init_on(e, &memra__backend_cpu, &o);
        break;
    }
    if (st != MEMRA_STATUS_OK) {
        free(e);
        return memra__fail(st, fn, "%s", memra_last_error_message());
    }
    st = memra__handle_new(fn, MEMRA__HANDLE_ENGINE, e, NULL, &e->handle, &e->slot);
    if (st != MEMRA_STATUS_OK) {
        e->backend->engine_fini(e);
        free(e);
        return st;
    }
    *out = (MemraEngine *)e->handle;
    return MEMRA_STATUS_OK;
}

MemraStatus memra__engine_destroy(const char *fn, MemraEngine *e)
{
    MEMRA__FAIL_IF(e->capture != NULL, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'engine': cannot destroy an engine inside its own "
                   "memra_graph_capture step");
    MEMRA__FAIL_IF(e->live_graphs != 0, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter 'engine': %zu graph(s) made from it are still alive; expected "
                   "memra_graph_destroy on each first",
                   e->live_graphs);
    /* From here on the handle is dead for every other thread; this call still holds the slot,
     * so none of them can be inside the engine while it is torn down. */
    memra__engine_retire(e);
    /* Teardown never fails: the engine may carry a sticky fault, and the host must be able to
     * release it regardless. */
    if (e->dev.fault == MEMRA_STATUS_OK)
        (void)e->backend->synchronize(e);
    memra__mem_release_owned(e, NULL, true);
    e->backend->engine_fini(e);
    free(e->allocs);
    free(e);
    return MEMRA_STATUS_OK;
}

MemraStatus memra__engine_check_fault(const MemraEngine *e, const char *fn)
{
    if (e->dev.fault == MEMRA_STATUS_OK)
        return MEMRA_STATUS_OK;
    return memra__fail(e->dev.fault, fn,
                       "the engine carries a device fault from earlier work (%s); destroy it",
                       e->dev.fault_msg);
}

MemraStatus memra__capture_forbid(MemraEngine *e, const char *fn, const char *what)
{
    /* The failure itself marks the capture (memra__note_failure): the call comes from the
     * step, on the capturing engine. */
    return memra__fail(MEMRA_STATUS_CAPTURE_ERROR, fn, "not allowed inside memra_graph_capture: %s",
                       what);
}

MemraStatus memra__enqueue(MemraEngine *e, memra__op op, memra__kernel k, memra__kernel_args *args)
{
    const char *fn = memra__op_name(op);
    MEMRA__FAIL_IF(memra__op_kernel(op) != k, MEMRA_STATUS_INTERNAL, "memra__enqueue",
                   "operation %d does not enqueue kernel %d (src/ops.def)", (int)op, (int)k);
    return memra__from_backend(fn, e->backend->enqueue(e, k, args));
}
