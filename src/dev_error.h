/*
 * Findings of device-side checks (accepted counts, and the addresses in the tables of the 1.2
 * copies, that the library could only read when the operation executed): the backends keep one
 * memra__dev_error record per engine, the kernels fill it, and the engine's next synchronising
 * call turns it into a status and a message.
 */
#ifndef MEMRA_DEV_ERROR_H
#define MEMRA_DEV_ERROR_H

#include "kernels.h"
#include "memra.h"

/* After the engine's work has completed: OK when nothing was recorded; otherwise
 * INVALID_ARGUMENT with a message naming `fn` (the synchronising call), the operation, the
 * sequence and the count (for a copy: the copy and the address), and the record is cleared so
 * that the engine goes on. */
MemraStatus memra__dev_error_take(const char *fn, memra__dev_error *rec);

#endif /* MEMRA_DEV_ERROR_H */
