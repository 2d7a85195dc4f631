/*
 * CPU reference: the 1.2 state copies (kernels.h, memra__copy_args). Copy i reads its source
 * address, and for the batched op its destination address, from the table when the work
 * executes, so that a recorded graph replayed after the host rewrote the table copies the new
 * states. Every copy is checked with memra__copy_check() before anything is read through its
 * addresses; a refused copy writes nothing, is recorded in args->err (the first finding wins,
 * as on the device) and the other copies still run.
 */
#include <stdint.h>
#include <string.h>

#include "kernels.h"

void memra__cpu_state_copy(const memra__copy_args *a)
{
    const uint64_t bytes = (uint64_t)a->words * sizeof(float);
    /* The batched op's destinations live in the table, which they must then not overwrite;
     * the indirect op's destination was checked against the table by the host. */
    const uint64_t tab_lo = a->dst == NULL ? (uint64_t)(uintptr_t)a->table : 0;
    const uint64_t tab_hi = a->dst == NULL ? tab_lo + 2 * a->items * sizeof(uint64_t) : 0;

    for (size_t i = 0; i < a->items; i++) {
        const uint64_t src = a->table[i];
        const uint64_t dst = a->dst == NULL ? a->table[a->items + i] : (uint64_t)(uintptr_t)a->dst;
        const uint32_t what = memra__copy_check(src, dst, bytes, tab_lo, tab_hi);
        if (what != 0) {
            if (a->err != NULL && a->err->set == 0) {
                const uint64_t bad = (what & MEMRA__ERR_COPY_DST) ? dst : src;
                *a->err = (memra__dev_error){
                    1, a->op, (uint32_t)i, (uint32_t)bad, (uint32_t)(bad >> 32), what};
            }
            continue;
        }
        if (src != dst)
            memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, (size_t)bytes);
    }
}
