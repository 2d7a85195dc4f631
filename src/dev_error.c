/*
 * Turning a device-side finding into the synchronising call's status (see dev_error.h).
 */
#include "dev_error.h"

#include <string.h>

#include "status.h"

/* The operation a kernel names in its record (memra__op_id), as the host called it. */
static const char *op_name(uint32_t op)
{
    static const char *const names[] = {
        [MEMRA__OP_VERIFY] = "memra_gdn_verify",
        [MEMRA__OP_COMMIT] = "memra_gdn_journal_commit",
        [MEMRA__OP_ROLLBACK] = "memra_gdn_rollback",
    };
    return op < sizeof names / sizeof names[0] && names[op] ? names[op] : "an operation";
}

MemraStatus memra__dev_error_take(const char *fn, memra__dev_error *rec)
{
    memra__dev_error r = *rec;
    if (r.set == 0)
        return MEMRA_STATUS_OK;
    memset(rec, 0, sizeof *rec);
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
