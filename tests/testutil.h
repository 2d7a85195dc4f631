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

/* ---- Views of u32 buffers (accepted counts), copies into existing buffers ---- */

MemraSliceU32 tu_view_u32(MemraSliceMutU32 s);
/* Stream-ordered copies of `len` host elements into the start of an existing buffer. */
void tu_write(MemraEngine *e, const float *host, size_t len, MemraSliceMutF32 dst);
void tu_write_u32(MemraEngine *e, const uint32_t *host, size_t len, MemraSliceMutU32 dst);
void tu_write_u64(MemraEngine *e, const uint64_t *host, size_t len, MemraSliceMutU64 dst);

/* ---- Bit-exact comparisons that say where they fail ---- */

/* Index of the first word whose bits differ, or `len` when none does. */
size_t tu_first_diff(const float *a, const float *b, size_t len);

/* Fails the test unless `got` equals `ref` bit for bit, naming the comparison (printf-style
 * `what`), how many words differ, the first of them and both values there. */
void tu_expect_bits(const float *got, const float *ref, size_t len, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the test unless every word of `got` still holds TU_POISON_BITS. */
void tu_expect_poison(const float *got, size_t len, const char *what, ...)
    __attribute__((format(printf, 3, 4)));

/* Whether `msg` contains `word` as a whole identifier, not as part of a longer one (so that
 * "memra_gdn_verify" is not found inside "memra_gdn_verify_x", nor "3" inside "13"). */
bool tu_has_word(const char *msg, const char *word);

/* Whether `msg` names one of the '|'-separated alternatives in `alts` (tu_has_word). */
bool tu_names_any(const char *msg, const char *alts);

/* ---- GDN problems: shapes, inputs, and the head order ---- */

/* A model shape (d_state = 128) and the sizes derived from it. */
typedef struct tu_gdn_shape {
    size_t num_k, num_v, d_conv;
    size_t key_dim, value_dim, conv_dim, pad;
    /* One sequence's conv ring [conv_dim, pad] and recurrent state [num_v, 128, 128]. */
    size_t ring_words, state_words;
} tu_gdn_shape;

tu_gdn_shape tu_gdn_shape_make(size_t num_k, size_t num_v, size_t d_conv);

/* The suite's eps and scale (the seed's). */
#define TU_GDN_EPS 1e-6f
#define TU_GDN_SCALE 0.08838834764831845f

/* Model weights drawn from `seed`: w [conv_dim, d_conv], dt_bias and a [num_v]. The seed's
 * spreads (w 0.5, dt_bias 0.5), except that `a` is negative, in (-1.05, -0.05], as the
 * pre-negated decay -exp(A_log) of a real model is: long chains of rows (many decode steps)
 * then stay bounded instead of growing by up to e^2.7 per row. */
void tu_gdn_weights(const tu_gdn_shape *sh, uint64_t seed, float *w, float *dt_bias, float *a);

/* `rows` new rows drawn from `seed` with the seed's spreads: qkv [rows, conv_dim] (1.0),
 * beta_raw and alpha [rows, num_v] (2.0). */
void tu_gdn_rows(const tu_gdn_shape *sh, size_t rows, uint64_t seed, float *qkv, float *beta_raw,
                 float *alpha);

/* One sequence's starting conv ring (spread 1.0) and state (spread 0.3), drawn from `seed`. */
void tu_gdn_sequence(const tu_gdn_shape *sh, uint64_t seed, float *ring, float *state);

/*
 * The grouped GQA head order (value head vh reads key head vh / G, G = num_v / num_k) run on
 * some inputs equals the tiled order (vh reads vh % num_k) run on the same inputs with their
 * value heads moved: grouped head vh = kh * G + g (kh = vh / G, g = vh % G) goes to tiled
 * position tu_tiled_head(vh) = g * num_k + kh. That position reads key head
 * (g * num_k + kh) % num_k = kh, the key head grouped head vh reads; every per-value-head
 * quantity (dt_bias, a, beta_raw, alpha, the v channels of qkv, their conv weights and ring
 * columns, the state's head, and every output indexed by value head) moves with it, and no
 * arithmetic mixes two value heads, so the tiled run computes bit for bit what the grouped run
 * does, at the moved positions. The map is a bijection: g * num_k + kh runs over 0 .. num_v - 1
 * exactly once as (kh, g) runs over num_k x G.
 */
size_t tu_tiled_head(size_t num_k, size_t num_v, size_t vh);

/* Copies `rows` rows of `row_words` words from src to dst, moving the value-head blocks: the
 * block of `block` words of grouped head vh at `offset + vh * block` of a source row lands at
 * `offset + tu_tiled_head(vh) * block` of the destination row; every other word is copied in
 * place. dst and src must not overlap. */
void tu_to_tiled(float *dst, const float *src, size_t rows, size_t row_words, size_t offset,
                 size_t block, size_t num_k, size_t num_v);

#endif /* MEMRA_TESTUTIL_H */
