/*
 * Status plumbing shared by every layer of the host runtime: the per-thread error message and
 * the "return error if" / "forward if error" macros.
 */
#ifndef MEMRA_STATUS_H
#define MEMRA_STATUS_H

#include "memra.h"

/* Marks a function defined in the runtime as part of the exported ABI. memra.h already puts
 * MEMRA_API on every declaration; repeating it on the definition keeps the intent visible. */
#define MEMRA__EXPORT MEMRA_API

#if defined(__GNUC__) || defined(__clang__)
#define MEMRA__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MEMRA__PRINTF(f, a)
#endif

/* Records "fn: <formatted text>" as the calling thread's last error message and returns
 * `status`, so that a failure is one statement: `return memra__fail(...)`. */
MemraStatus memra__fail(MemraStatus status, const char *fn, const char *fmt, ...)
    MEMRA__PRINTF(3, 4);

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

/* Inside a function with a `cleanup:` label and a `MemraStatus st`: record the status of `expr`
 * and jump to the cleanup when it failed. */
#define MEMRA__TRY_GOTO(expr)                                                                      \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != MEMRA_STATUS_OK)                                                                 \
            goto cleanup;                                                                          \
    } while (0)

#endif /* MEMRA_STATUS_H */
