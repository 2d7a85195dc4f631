/*
 * Turning a device-side finding into the synchronising call's status (see dev_error.h).
 */
#include "dev_error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "status.h"

/* The operation a kernel names in its record (memra__dev_error.op), as the host called it. */
static const char *op_name(uint32_t op)
{
    const char *name = memra__op_name(op);
    return name != NULL ? name : "an operation";
}

/* The header field a journal finding names (memra__error_kind JOURNAL_FOREIGN + word). */
static const char *journal_field(uint32_t what)
{
    static const char *const names[] = {
        [MEMRA__ERR_JOURNAL_FORMAT] = "format",
        [MEMRA__ERR_JOURNAL_D_STATE] = "d_state",
        [MEMRA__ERR_JOURNAL_NUM_K] = "num_k",
        [MEMRA__ERR_JOURNAL_NUM_V] = "num_v",
        [MEMRA__ERR_JOURNAL_D_CONV] = "d_conv",
        [MEMRA__ERR_JOURNAL_HEAD_ORDER] = "head order (0 tiled, 1 grouped)",
        [MEMRA__ERR_JOURNAL_T_MAX] = "t_max",
    };
    return what < sizeof names / sizeof names[0] && names[what] ? names[what] : "a field";
}

/* What a refused 1.2 copy found (memra__copy_check), as a phrase after the address. */
static const char *copy_fault(uint32_t what)
{
    switch (what & ~MEMRA__ERR_COPY_DST) {
    case MEMRA__ERR_COPY_NULL:
        return "is NULL";
    case MEMRA__ERR_COPY_MISALIGNED:
        return "is not 4-byte aligned";
    case MEMRA__ERR_COPY_WRAPS:
        return "runs past the end of the address space";
    case MEMRA__ERR_COPY_ON_TABLE:
        return "overlaps the table the copies read their addresses from";
    }
    return "overlaps the copy's destination without being the same address";
}

/* A refused 1.2 copy: seq is the copy, value and limit the low and high halves of the
 * address at fault. */
static MemraStatus copy_finding(const char *fn, const memra__dev_error *r)
{
    const uint64_t addr = (uint64_t)r->limit << 32 | r->value;
    const bool dst = (r->what & MEMRA__ERR_COPY_DST) != 0;
    if (r->op == MEMRA__OP_COPY_INDIRECT)
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "an earlier %s found the source address 0x%llx in src_ptr[0], which "
                           "%s; nothing was copied",
                           op_name(r->op), (unsigned long long)addr, copy_fault(r->what));
    return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "an earlier %s found the %s address of copy %u, 0x%llx (in 'table'), "
                       "which %s; that copy's destination was left untouched",
                       op_name(r->op), dst ? "destination" : "source", r->seq,
                       (unsigned long long)addr, copy_fault(r->what));
}

/* A finding that kept the whole of one sequence as it was: the finding (printf-style, from "an
 * earlier <op>" on), then the one sentence every such message ends with, so that the hosts that
 * match it see the same words whatever was found. */
static MemraStatus MEMRA__PRINTF(2, 3) left_untouched(const char *fn, const char *fmt, ...)
{
    char finding[MEMRA__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(finding, sizeof finding, fmt, ap);
    va_end(ap);
    return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "%s; that sequence's ring, state, journal and outputs were left untouched",
                       finding);
}

MemraStatus memra__dev_error_take(const char *fn, memra__dev_error *rec)
{
    memra__dev_error r = *rec;
    const char *op;
    if (r.set == 0)
        return MEMRA_STATUS_OK;
    memset(rec, 0, sizeof *rec);
    if (r.op == MEMRA__OP_COPY_BATCH || r.op == MEMRA__OP_COPY_INDIRECT)
        return copy_finding(fn, &r);
    op = op_name(r.op);
    switch (r.what) {
    case MEMRA__ERR_ROLLBACK_RANGE:
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "an earlier %s found accepted[%u] = %u, expected 1..=%u (the verify's "
                           "t); sequence %u was left untouched",
                           op, r.seq, r.value, r.limit, r.seq);
    case MEMRA__ERR_ACCEPTED_OVER_JOURNAL:
        return left_untouched(fn,
                              "an earlier %s found accepted[%u] = %u, but the journal of sequence "
                              "%u holds %u rows",
                              op, r.seq, r.value, r.seq, r.limit);
    case MEMRA__ERR_JOURNAL_FOREIGN:
        return left_untouched(fn,
                              "an earlier %s found that the journal of sequence %u is not a "
                              "libmemra journal (magic word 0x%08x, expected 0x%08x, or a "
                              "zero-filled buffer)",
                              op, r.seq, r.value, r.limit);
    case MEMRA__ERR_JOURNAL_ROWS:
    case MEMRA__ERR_JOURNAL_SLOT:
        return left_untouched(fn,
                              "an earlier %s found a corrupt journal header in sequence %u (%s %u, "
                              "at most %u)",
                              op, r.seq, r.what == MEMRA__ERR_JOURNAL_ROWS ? "rows" : "slot",
                              r.value, r.limit);
    case MEMRA__ERR_JOURNAL_CAPACITY:
        return left_untouched(fn,
                              "an earlier %s of t = %u rows found that the journal of sequence %u "
                              "holds at most %u rows",
                              op, r.value, r.seq, r.limit);
    case MEMRA__ERR_JOURNAL_ADDRESS:
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "an earlier %s found the journal address of sequence %u NULL or not "
                           "4-byte aligned (low bits 0x%08x); that sequence's ring, state and "
                           "outputs were left untouched",
                           op, r.seq, r.value);
    default:
        return left_untouched(fn,
                              "an earlier %s found the journal of sequence %u written for %s %u, "
                              "this call has %s %u",
                              op, r.seq, journal_field(r.what), r.value, journal_field(r.what),
                              r.limit);
    }
}
