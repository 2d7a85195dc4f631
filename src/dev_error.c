/*
 * Turning a device-side finding into the synchronising call's status (see dev_error.h).
 */
#include "dev_error.h"

#include <stdbool.h>
#include <string.h>

#include "status.h"

/* The operation a kernel names in its record (memra__op_id), as the host called it. */
static const char *op_name(uint32_t op)
{
    static const char *const names[] = {
        [MEMRA__OP_VERIFY] = "memra_gdn_verify",
        [MEMRA__OP_COMMIT] = "memra_gdn_journal_commit",
        [MEMRA__OP_ROLLBACK] = "memra_gdn_rollback",
        [MEMRA__OP_COPY_BATCH] = "memra_copy_batch_uniform_f32",
        [MEMRA__OP_COPY_INDIRECT] = "memra_copy_indirect_src_f32",
    };
    return op < sizeof names / sizeof names[0] && names[op] ? names[op] : "an operation";
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

MemraStatus memra__dev_error_take(const char *fn, memra__dev_error *rec)
{
    memra__dev_error r = *rec;
    if (r.set == 0)
        return MEMRA_STATUS_OK;
    memset(rec, 0, sizeof *rec);
    if (r.op == MEMRA__OP_COPY_BATCH || r.op == MEMRA__OP_COPY_INDIRECT)
        return copy_finding(fn, &r);
    if (r.what == MEMRA__ERR_ROLLBACK_RANGE)
        return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                           "an earlier %s found accepted[%u] = %u, expected 1..=%u (the verify's "
                           "t); sequence %u was left untouched",
                           op_name(r.op), r.seq, r.value, r.limit, r.seq);
    return memra__fail(MEMRA_STATUS_INVALID_ARGUMENT, fn,
                       "an earlier %s found accepted[%u] = %u, but the journal of sequence %u "
                       "holds %u rows; that sequence's ring, state, journal and outputs were "
                       "left untouched",
                       op_name(r.op), r.seq, r.value, r.seq, r.limit);
}
