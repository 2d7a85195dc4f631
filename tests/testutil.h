/*
 * Helpers shared by the Criterion suites. Tests use the public ABI only (abi/memra.h).
 */
#ifndef MEMRA_TESTUTIL_H
#define MEMRA_TESTUTIL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"

/* The seed's generator (gdn_packed_gpu.rs `varied`): xorshift64 mapped to [-spread, spread). */
void tu_varied(float *out, size_t len, uint64_t seed, float spread);

/* A seed nobody chose: from /dev/urandom, or MEMRA_TEST_SEED when set (to replay a failure).
 * Criterion prints it with every failing assertion that uses TU_SEED_FMT. */
uint64_t tu_fresh_seed(void);

/* Creates an engine on `backend` with MEMRA_ENGINE_FLAG_IGNORE_ENV (tests pick the backend
 * themselves). For MEMRA_BACKEND_CUDA it skips the running test with a clear reason when no
 * device is usable; any other failure fails the test. */
MemraEngine *tu_engine(MemraBackend backend);

/* Device (or CPU-backend) buffers: allocate uninitialised and fill with `host`; allocate and
 * fill with the poison pattern; read back into a malloc'ed host array (free() it). */
MemraSliceMutF32 tu_upload(MemraEngine *e, const float *host, size_t len);
MemraSliceMutU64 tu_upload_u64(MemraEngine *e, const uint64_t *host, size_t len);
MemraSliceMutF32 tu_poisoned(MemraEngine *e, size_t len);
float *tu_download(MemraEngine *e, MemraSliceMutF32 s);
/* Re-poisons an existing buffer. */
void tu_poison(MemraEngine *e, MemraSliceMutF32 s);

/* Read-only view of a buffer / sub-range of a buffer. */
MemraSliceF32 tu_view(MemraSliceMutF32 s);
MemraSliceF32 tu_sub(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceMutF32 tu_sub_mut(MemraSliceMutF32 s, size_t start, size_t len);
MemraSliceU64 tu_view_u64(MemraSliceMutU64 s);
MemraSliceU64 tu_sub_u64(MemraSliceMutU64 s, size_t start, size_t len);

/* Number of words whose bits differ (memcmp semantics per element). */
size_t tu_bit_diffs(const float *a, const float *b, size_t len);

/* True when every element is finite. */
bool tu_all_finite(const float *a, size_t len);

/* ||a - b|| / ||b|| in float64. */
double tu_rel_err(const float *a, const double *ref, size_t len);
double tu_rel_err_f32(const float *a, const float *ref, size_t len);

/* The poison pattern: a signalling-NaN bit pattern no kernel produces. */
#define TU_POISON_BITS UINT32_C(0x7fa5a5a5)

/* Prints a seed (uint64_t) in the form that replays it: `MEMRA_TEST_SEED=0x... ./memra_tests`. */
#define TU_SEED_FMT "MEMRA_TEST_SEED=0x%016" PRIx64

/* Asserts that a library call returned MEMRA_STATUS_OK, naming the call, the status and the
 * library's message. Usable wherever Criterion assertions are. */
#define TU_OK(call)                                                                                \
    do {                                                                                           \
        MemraStatus tu_st_ = (call);                                                               \
        cr_assert_eq(tu_st_, MEMRA_STATUS_OK, "%s returned %s: %s", #call,                         \
                     memra_status_string(tu_st_), memra_last_error_message());                     \
    } while (0)

/* An independent stream seed derived from a base seed and a stream number (splitmix64 of their
 * combination), so one printed base seed replays every input of a test. */
uint64_t tu_mix_seed(uint64_t base, uint64_t stream);

/* The address of a buffer as a pointer-table entry. */
uint64_t tu_addr(MemraSliceMutF32 s);

/* A buffer whose every element reads as zero. */
MemraSliceMutF32 tu_zeros(MemraEngine *e, size_t len);

/* Frees a buffer made through the engine (memra_free), asserting success. */
void tu_free(MemraEngine *e, void *ptr);

/* Reads a device slice back into the existing host array `dst` (src.len elements). */
void tu_download_into(MemraEngine *e, MemraSliceF32 src, float *dst);

#endif /* MEMRA_TESTUTIL_H */
