/*
 * Status codes, the per-thread error message, and the version queries.
 */
#include "status.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MEMRA__STR2(x) #x
#define MEMRA__STR(x) MEMRA__STR2(x)

/* Each thread reports its own last failure, so concurrent engines on different threads never
 * see each other's messages. */
static _Thread_local char memra__last_message[MEMRA__MESSAGE_MAX];

/* Atomic because a thread may install it while another fails; relaxed is enough, since a
 * failure only matters to the capture that the failing thread's own step belongs to, and that
 * thread installed the hook itself before running the step. */
static _Atomic(memra__failure_hook) failure_hook;

void memra__set_failure_hook(memra__failure_hook hook)
{
    atomic_store_explicit(&failure_hook, hook, memory_order_relaxed);
}

MemraStatus memra__fail(MemraStatus status, const char *fn, const char *fmt, ...)
{
    char text[MEMRA__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* Formatting goes through `text` first because an argument may be the previous message
     * itself (memra__from_backend re-labels it). The result is cut at the buffer's end. */
    size_t n = strlen(fn);
    if (n > sizeof memra__last_message / 2)
        n = sizeof memra__last_message / 2;
    memcpy(memra__last_message, fn, n);
    memcpy(memra__last_message + n, ": ", 2);
    n += 2;
    size_t room = sizeof memra__last_message - n - 1;
    size_t len = strnlen(text, room);
    memcpy(memra__last_message + n, text, len);
    memra__last_message[n + len] = '\0';
    /* Every failure passes here, so this is where a failure inside a graph step reaches the
     * capture: whatever the step does with the status, the graph must not silently lack the
     * call. */
    memra__failure_hook hook = atomic_load_explicit(&failure_hook, memory_order_relaxed);
    if (hook != NULL)
        hook(status);
    return status;
}

MemraStatus memra__from_backend(const char *fn, MemraStatus st)
{
    if (st == MEMRA_STATUS_OK)
        return st;
    return memra__fail(st, fn, "%s", memra_last_error_message());
}

MemraStatus memra__read_versioned(const char *fn, const char *param, const char *what,
                                  const char *init, const void *in, size_t size, size_t min,
                                  void *out, size_t max)
{
    MEMRA__FAIL_IF(size < min, MEMRA_STATUS_INVALID_ARGUMENT, fn,
                   "parameter '%s': expected at least %zu (call %s first), got %zu", param, min,
                   init, size);
    MEMRA__FAIL_IF(size > max, MEMRA_STATUS_ABI_MISMATCH, fn,
                   "parameter '%s': this libmemra %s knows %s of up to %zu bytes, got %zu (the "
                   "caller was built against a newer header)",
                   param, memra_version_string(), what, max, size);
    memcpy(out, in, size);
    return MEMRA_STATUS_OK;
}

MEMRA__EXPORT uint32_t memra_abi_version(void)
{
    return MEMRA_ABI_VERSION;
}

MEMRA__EXPORT const char *memra_version_string(void)
{
    return MEMRA__STR(MEMRA_VERSION_MAJOR) "." MEMRA__STR(MEMRA_VERSION_MINOR) "." MEMRA__STR(
        MEMRA_VERSION_PATCH);
}

MEMRA__EXPORT const char *memra_status_string(MemraStatus status)
{
    switch (status) {
    case MEMRA_STATUS_OK:
        return "MEMRA_STATUS_OK";
    case MEMRA_STATUS_INVALID_ARGUMENT:
        return "MEMRA_STATUS_INVALID_ARGUMENT";
    case MEMRA_STATUS_UNSUPPORTED:
        return "MEMRA_STATUS_UNSUPPORTED";
    case MEMRA_STATUS_OUT_OF_MEMORY:
        return "MEMRA_STATUS_OUT_OF_MEMORY";
    case MEMRA_STATUS_NO_DEVICE:
        return "MEMRA_STATUS_NO_DEVICE";
    case MEMRA_STATUS_DEVICE_ERROR:
        return "MEMRA_STATUS_DEVICE_ERROR";
    case MEMRA_STATUS_CAPTURE_ERROR:
        return "MEMRA_STATUS_CAPTURE_ERROR";
    case MEMRA_STATUS_ABI_MISMATCH:
        return "MEMRA_STATUS_ABI_MISMATCH";
    case MEMRA_STATUS_INTERNAL:
        return "MEMRA_STATUS_INTERNAL";
    }
    return "MEMRA_STATUS_<unknown>";
}

MEMRA__EXPORT const char *memra_last_error_message(void)
{
    return memra__last_message;
}
