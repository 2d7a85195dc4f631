/*
 * The test-support library: what the Criterion suites, the bench (bench/) and the GPU checks
 * share, in plain C11 over the public ABI (abi/memra.h) alone. Nothing here depends on
 * Criterion, so that a program without a test runner links it too; the Criterion layer
 * (tests/testutil.h) adds the helpers that assert or skip.
 *
 * A helper whose caller breaks its contract (a sub-range past the end of its buffer) reports
 * through tu_fail(): the Criterion layer makes that fail the running test; in any other
 * program it prints the message and aborts.
 */
#ifndef MEMRA_TEST_SUPPORT_H
#define MEMRA_TEST_SUPPORT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"

/* ---- Contract failures ---- */

/* Receives the message of a broken contract; it must not return (it fails a test, exits, or
 * aborts). */
typedef void (*tu_fail_fn)(const char *message);
/* Installs `fn` (NULL restores the default: print to stderr and abort). */
void tu_set_fail_handler(tu_fail_fn fn);
void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- The generator and seeds ---- */

/* The seed's generator (gdn_packed_gpu.rs `varied`): xorshift64 mapped to [-spread, spread). */
void tu_varied(float *out, size_t len, uint64_t seed, float spread);

/* A seed nobody chose: from /dev/urandom, or MEMRA_TEST_SEED when set (to replay a failure). */
uint64_t tu_fresh_seed(void);

/* An independent stream seed derived from a base seed and a stream number (splitmix64 of their
 * combination), so one printed base seed replays every input of a test. */
uint64_t tu_mix_seed(uint64_t base, uint64_t stream);

/* Prints a seed (uint64_t) in the form that replays it: `MEMRA_TEST_SEED=0x... ./memra_tests`. */
#define TU_SEED_FMT "MEMRA_TEST_SEED=0x%016" PRIx64

/* The poison pattern: a signalling-NaN bit pattern no kernel produces, so that an element an
 * operation failed to write keeps it and cannot compare equal to a finite reference value. */
#define TU_POISON_BITS UINT32_C(0x7fa5a5a5)

/* Fills `out` with TU_POISON_BITS. */
void tu_poison_host(float *out, size_t len);

/* ---- Views ---- */

/* Read-only view of a buffer / sub-range of a buffer (a range past the end is a tu_fail). */
MemraSliceF32 tu_view(MemraSliceMutF32 s);
MemraSliceF32 tu_sub(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceMutF32 tu_sub_mut(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceU64 tu_view_u64(MemraSliceMutU64 s);
MemraSliceU64 tu_sub_u64(MemraSliceMutU64 s, size_t start, size_t len);
MemraSliceU32 tu_view_u32(MemraSliceMutU32 s);

/* The address of a buffer as a pointer-table entry. */
uint64_t tu_addr(MemraSliceMutF32 s);

/* ---- Comparisons ---- */

/* Number of words whose bits differ (memcmp semantics per element). */
size_t tu_bit_diffs(const float *a, const float *b, size_t len);

/* Index of the first word whose bits differ, or `len` when none does. */
size_t tu_first_diff(const float *a, const float *b, size_t len);

/* True when every element is finite. */
bool tu_all_finite(const float *a, size_t len);

/* ||a - b|| / ||b|| in float64. */
double tu_rel_err(const float *a, const double *ref, size_t len);
double tu_rel_err_f32(const float *a, const float *ref, size_t len);

/* FNV-1a (64-bit) over the bytes of `len` floats; 0 for an absent tensor (a == NULL). Two runs
 * whose fingerprints agree computed the same bits. */
uint64_t tu_fnv1a(const float *a, size_t len);

#endif /* MEMRA_TEST_SUPPORT_H */
