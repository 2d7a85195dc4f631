/*
 * The operation table (src/ops.def) as C: the ids of the kernels and of the exported
 * operations, the union of the kernels' argument structs, and the lookups the runtime and the
 * backends share. Below the backend interface, over kernels/kernels.h only.
 */
#ifndef MEMRA_OPS_H
#define MEMRA_OPS_H

#include <stdint.h>

#include "kernels.h"

/* The kernels, as the backends dispatch on them. */
typedef enum memra__kernel {
#define MEMRA__KERNEL(kernel, ...) MEMRA__KERNEL_##kernel,
#include "ops.def"
    MEMRA__N_KERNELS
} memra__kernel;

/* The exported operations. Numbered from 1, so that a zero memra__dev_error.op names none. */
typedef enum memra__op {
    MEMRA__OP_NONE,
#define MEMRA__OP(id, ...) MEMRA__OP_##id,
#include "ops.def"
    MEMRA__N_OPS
} memra__op;

/* The arguments of any kernel: member `kernel` (the row's first column) is kernel's. */
typedef union memra__kernel_args {
#define MEMRA__KERNEL(kernel, args, ...) args kernel;
#include "ops.def"
} memra__kernel_args;

/* The exported function of operation `op`, or NULL for an id that names none. */
static inline const char *memra__op_name(uint32_t op)
{
    static const char *const names[MEMRA__N_OPS] = {
#define MEMRA__OP(id, name, ...) [MEMRA__OP_##id] = #name,
#include "ops.def"
    };
    return op < MEMRA__N_OPS ? names[op] : NULL;
}

/* The kernel that operation `op` enqueues (MEMRA__N_KERNELS for an id that names none). */
static inline memra__kernel memra__op_kernel(uint32_t op)
{
    static const memra__kernel kernels[MEMRA__N_OPS] = {
#define MEMRA__OP(id, name, kernel, ...) [MEMRA__OP_##id] = MEMRA__KERNEL_##kernel,
#include "ops.def"
    };
    return op != MEMRA__OP_NONE && op < MEMRA__N_OPS ? kernels[op] : MEMRA__N_KERNELS;
}

/* Points the finding record of kernel `k`'s arguments at `rec` (and, on CUDA, the word that
 * settles which finding is recorded at `claim`) when the kernel records findings (the
 * `findings` column); leaves the arguments of the other kernels as they are. */
#define MEMRA__FINDINGS_1(a, rec, claim) ((a)->err = (rec), (a)->err_claim = (claim))
#define MEMRA__FINDINGS_0(a, rec, claim) ((void)(a), (void)(rec), (void)(claim))
static inline void memra__kernel_set_findings(memra__kernel k, memra__kernel_args *a,
                                              memra__dev_error *rec, uint32_t *claim)
{
    switch (k) {
#define MEMRA__KERNEL(kernel, args, cpu, cuda, findings, what)                                     \
    case MEMRA__KERNEL_##kernel:                                                                   \
        MEMRA__FINDINGS_##findings(&a->kernel, rec, claim);                                        \
        break;
#include "ops.def"
    case MEMRA__N_KERNELS:
        break;
    }
}
#undef MEMRA__FINDINGS_1
#undef MEMRA__FINDINGS_0

#endif /* MEMRA_OPS_H */
