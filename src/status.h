/*
 * Status plumbing shared by every layer of the host runtime: the per-thread error message and
 * the "return error if" / "forward if error" macros. It is the bottom layer (src/engine.h lists
 * them all): it includes only the public header and calls nothing of the runtime above it.
 */
#ifndef MEMRA_STATUS_H
#define MEMRA_STATUS_H

#include "memra.h"

/* Marks a function defined in the runtime as part of the exported ABI. memra.h already puts
 * MEMRA_API on every declaration; repeating it on the definition keeps the intent visible. */
#define MEMRA__EXPORT MEMRA_API

/* The longest message a failure records (the per-thread message, a capture's failure and an
 * engine's sticky fault are all cut at this size). */
#define MEMRA__MESSAGE_MAX 512

#if defined(__GNUC__) || defined(__clang__)
#define MEMRA__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MEMRA__PRINTF(f, a)
#endif

/* Records "fn: <formatted text>" as the calling thread's last error message and returns
 * `status`, so that a failure is one statement: `return memra__fail(...)`. */
MemraStatus memra__fail(MemraStatus status, const char *fn, const char *fmt, ...)
    MEMRA__PRINTF(3, 4);

/* Called by memra__fail with every failure's status, once its message is recorded. */
typedef void (*memra__failure_hook)(MemraStatus status);

/* Installs the one hook memra__fail calls (later calls replace it). The graph layer installs
 * memra__note_failure (src/handles.c) before a capture's step first runs, so that a failure
 * inside the step reaches the capture; this layer only holds the pointer, which keeps it free
 * of any call into the layers above. */
void memra__set_failure_hook(memra__failure_hook hook);

/* Re-labels a backend failure with the exported function's name, so that the host's message
 * says which call failed first and what the backend saw second. OK passes through. */
MemraStatus memra__from_backend(const char *fn, MemraStatus st);

/* Reads a caller's versioned struct (one whose first field is its struct_size): `size` is that
 * struct_size, which must be at least `min` (the struct as first shipped) and at most `max`
 * (this version's sizeof). Copies the caller's `size` bytes over *out, which the caller has
 * filled with what an older caller leaves unset. In messages `param` names the struct_size
 * field, `what` the struct and `init` the function that fills it. */
MemraStatus memra__read_versioned(const char *fn, const char *param, const char *what,
                                  const char *init, const void *in, size_t size, size_t min,
                                  void *out, size_t max);

/* Return `status` with a message when `cond` holds. */
#define MEMRA__FAIL_IF(cond, status, fn, ...)                                                      \
    do {                                                                                           \
        if (cond)                                                                                  \
            return memra__fail((status), (fn), __VA_ARGS__);                                       \
    } while (0)

/* Forward a non-OK status (its message is already recorded) to the caller. */
#define MEMRA__TRY(expr)                                                                           \
    do {                                                                                           \
        MemraStatus memra__st = (expr);                                                            \
        if (memra__st != MEMRA_STATUS_OK)                                                          \
            return memra__st;                                                                      \
    } while (0)

#endif /* MEMRA_STATUS_H */
