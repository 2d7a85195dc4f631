/*
 * The Criterion layer over the test-support library (tests/support/support.h, included here):
 * helpers that assert with Criterion (a failed library call fails the test) or skip a test (no
 * CUDA device). Tests use the public ABI only (abi/memra.h).
 */
#ifndef MEMRA_TESTUTIL_H
#define MEMRA_TESTUTIL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"
#include "support/support.h"

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
/* A malloc'ed host array of `words` floats (at least one, so that an empty tensor still has
 * an address); fails the test when there is no memory. */
float *tu_host_array(size_t words);
/* A buffer of `len` values drawn by tu_varied(seed, spread). */
MemraSliceMutF32 tu_upload_varied(MemraEngine *e, size_t len, uint64_t seed, float spread);
/* Re-poisons an existing buffer. */
void tu_poison(MemraEngine *e, MemraSliceMutF32 s);

/* Asserts that a library call returned MEMRA_STATUS_OK, naming the call, the status and the
 * library's message. Usable wherever Criterion assertions are. */
#define TU_OK(call)                                                                                \
    do {                                                                                           \
        MemraStatus tu_st_ = (call);                                                               \
        cr_assert_eq(tu_st_, MEMRA_STATUS_OK, "%s returned %s: %s", #call,                         \
                     memra_status_string(tu_st_), memra_last_error_message());                     \
    } while (0)

/* A buffer whose every element reads as zero. */
MemraSliceMutF32 tu_zeros(MemraEngine *e, size_t len);

/* Frees a buffer made through the engine (memra_free), asserting success. */
void tu_free(MemraEngine *e, void *ptr);

/* Reads a device slice back into the existing host array `dst` (src.len elements). */
void tu_download_into(MemraEngine *e, MemraSliceF32 src, float *dst);

/* The head of a parameterised test over the cases `params` returns (a cr_make_param_array
 * expression), each case reached through `type *var`; the test's body follows. */
#define TU_PARAM_TEST(type, params, suite, tname, var)                                             \
    ParameterizedTestParameters(suite, tname)                                                      \
    {                                                                                              \
        return params;                                                                             \
    }                                                                                              \
    ParameterizedTest(type *var, suite, tname)

/* A test calling fn(backend), and a parameterised test over the cases `params` returns (a
 * cr_make_param_array expression) calling fn(case, backend) with a copy of each case. */
#define TU_TEST_ON(suite, tname, fn, backend)                                                      \
    Test(suite, tname)                                                                             \
    {                                                                                              \
        fn(backend);                                                                               \
    }
#define TU_PARAM_TEST_ON(type, params, suite, tname, fn, backend)                                  \
    TU_PARAM_TEST(type, params, suite, tname, tu_param_)                                           \
    {                                                                                              \
        fn(*tu_param_, backend);                                                                   \
    }

/* The CPU and CUDA pair of each, suite/name_cpu and suite/name_cuda (tu_engine skips the CUDA
 * one where no device is usable). */
#define TU_TEST_BACKENDS(suite, name, fn)                                                          \
    TU_TEST_ON(suite, name##_cpu, fn, MEMRA_BACKEND_CPU)                                           \
    TU_TEST_ON(suite, name##_cuda, fn, MEMRA_BACKEND_CUDA)
#define TU_PARAM_TEST_BACKENDS(type, params, suite, name, fn)                                      \
    TU_PARAM_TEST_ON(type, (params), suite, name##_cpu, fn, MEMRA_BACKEND_CPU)                     \
    TU_PARAM_TEST_ON(type, (params), suite, name##_cuda, fn, MEMRA_BACKEND_CUDA)

/* The Criterion parameters of a test over the static array `cases` of `type`. */
#define TU_PARAMS(type, cases) cr_make_param_array(type, cases, sizeof cases / sizeof cases[0])

/* ---- Copies into existing buffers ---- */

/* Stream-ordered copies of `len` host elements into the start of an existing buffer. */
void tu_write(MemraEngine *e, const float *host, size_t len, MemraSliceMutF32 dst);
void tu_write_u32(MemraEngine *e, const uint32_t *host, size_t len, MemraSliceMutU32 dst);
void tu_write_u64(MemraEngine *e, const uint64_t *host, size_t len, MemraSliceMutU64 dst);

/* ---- Bit-exact comparisons that say where they fail ---- */

/* Fails the test unless `got` equals `ref` bit for bit, naming the comparison (printf-style
 * `what`), how many words differ, the first of them and both values there. */
void tu_expect_bits(const float *got, const float *ref, size_t len, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the test unless every word of `got` still holds TU_POISON_BITS. */
void tu_expect_poison(const float *got, size_t len, const char *what, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- GDN problems: shapes, inputs, and the head order ---- */

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

/* ---- Engines on a chosen device ---- */

/* tu_engine() on CUDA device `ordinal` (the CPU backend ignores it). For MEMRA_BACKEND_CUDA it
 * skips the running test when no device is usable at that ordinal. */
MemraEngine *tu_engine_at(MemraBackend backend, int32_t ordinal);

/* ---- A whole verify: its inputs, the tensors it writes, the 1.0 program and the 1.1 call ---- */

/* Every tensor a SNAPSHOTS verify (or the 1.0 packed program with snapshots) writes, in the
 * order failures report them. The first nine come from the output views, the last three are
 * the sequences' own buffers read back after the run. */
enum tu_gdn_tensor {
    TU_GDN_CONV_OUTS,
    TU_GDN_Q_L2,
    TU_GDN_K_L2,
    TU_GDN_V_G,
    TU_GDN_BETA,
    TU_GDN_G_LOG,
    TU_GDN_O,
    TU_GDN_SNAP_CONV,
    TU_GDN_SNAP_SSM,
    TU_GDN_RING,
    TU_GDN_CANONICAL,
    TU_GDN_ALTERNATE,
    TU_GDN_N_TENSORS
};
#define TU_GDN_N_VIEWS (TU_GDN_SNAP_SSM + 1)

extern const char *const tu_gdn_tensor_name[TU_GDN_N_TENSORS];

/* Words of `tensor` for `b` sequences of `t` rows. */
size_t tu_gdn_tensor_len(const tu_gdn_shape *sh, size_t t, size_t b, int tensor);

/* Host inputs of a verify of `b` sequences of `t` rows; per-sequence arrays are sequence-major.
 * `alt0` is what the alternate state buffers hold before the run (random, so that a buffer the
 * run must leave alone is seen to be left alone). */
typedef struct tu_gdn_inputs {
    float *w, *dt_bias, *a;
    float *ring0, *state0, *alt0;
    float *qkv, *beta_raw, *alpha;
} tu_gdn_inputs;

/* Allocates the arrays (uninitialised). */
void tu_gdn_inputs_alloc(const tu_gdn_shape *sh, size_t t, size_t b, tu_gdn_inputs *in);
/* Allocates and draws every input from `seed` (tu_gdn_weights, tu_gdn_rows, tu_gdn_sequence). */
void tu_gdn_inputs_make(const tu_gdn_shape *sh, size_t t, size_t b, uint64_t seed,
                        tu_gdn_inputs *in);
void tu_gdn_inputs_free(tu_gdn_inputs *in);

/* Every tensor of one run on the host, each filled with the poison pattern when made. */
typedef struct tu_gdn_outputs {
    float *t[TU_GDN_N_TENSORS];
    size_t len[TU_GDN_N_TENSORS];
} tu_gdn_outputs;

void tu_gdn_outputs_make(const tu_gdn_shape *sh, size_t t, size_t b, tu_gdn_outputs *out);
void tu_gdn_outputs_free(tu_gdn_outputs *out);

/* Fails the test unless every tensor of `got` equals `ref` bit for bit (tu_expect_bits), each
 * failure naming the tensor after `what`. */
void tu_gdn_expect_outputs(const tu_gdn_outputs *got, const tu_gdn_outputs *ref, const char *what);

/* The device copies of a verify's model and row inputs. */
typedef struct tu_gdn_device {
    MemraSliceMutF32 w, dt_bias, a, qkv, beta_raw, alpha;
} tu_gdn_device;

void tu_gdn_upload(MemraEngine *e, const tu_gdn_shape *sh, size_t t, size_t b,
                   const tu_gdn_inputs *in, tu_gdn_device *d);
void tu_gdn_device_free(MemraEngine *e, const tu_gdn_device *d);

/* memra_verify_args_init, then the sizes, the suite's eps and scale, `mode`, `order` and the
 * inputs of `d` of a verify of `b` sequences of `t` rows; the table and the outputs are the
 * caller's. */
void tu_gdn_args_init(MemraVerifyArgs *v, const tu_gdn_shape *sh, size_t t, size_t b,
                      MemraVerifyMode mode, MemraHeadOrder order, const tu_gdn_device *d);

/* The output views of `v` in tensor order (conv_outs .. snap_ssm, TU_GDN_N_VIEWS of them). */
void tu_gdn_views(MemraVerifyArgs *v, MemraSliceMutF32 *views[TU_GDN_N_VIEWS]);

/* A verify bound to an engine: the inputs uploaded, one ring and two states per sequence, the
 * [b, 3] table pointing at them, every output view poisoned, and `args` filled for a SNAPSHOTS
 * memra_gdn_verify in `order` with every optional output given. */
typedef struct tu_gdn_bound {
    MemraEngine *e;
    tu_gdn_shape sh;
    size_t t, b;
    tu_gdn_device in;
    MemraSliceMutF32 out[TU_GDN_N_VIEWS];
    /* b entries each. */
    MemraSliceMutF32 *ring, *canonical, *alternate;
    MemraSliceMutU64 table;
    MemraVerifyArgs args;
} tu_gdn_bound;

void tu_gdn_bind(MemraEngine *e, const tu_gdn_shape *sh, size_t t, size_t b, MemraHeadOrder order,
                 const tu_gdn_inputs *in, tu_gdn_bound *bd);
/* Writes the starting rings and states of `in` back into the sequences' buffers and poisons
 * every output view, so that the next run starts where the first did. */
void tu_gdn_rebind_inputs(tu_gdn_bound *bd, const tu_gdn_inputs *in);
/* Reads every output view and every sequence buffer into `out`. */
void tu_gdn_collect(tu_gdn_bound *bd, tu_gdn_outputs *out);
void tu_gdn_unbind(tu_gdn_bound *bd);

/* Graph steps (MemraStepFn) over a tu_gdn_bound; they only return statuses, so that worker
 * threads may call them. The 1.0 program: memra_ssm_conv1d_fused_decode_tloop with conv
 * snapshots, memra_gdn_prep_decode_b over the b * t rows, memra_gdn_scan_s128_tsnap with state
 * snapshots (the tiled head order only: bd->args.head_order is not consulted). The 1.1 call:
 * memra_gdn_verify(bd->args). */
MemraStatus tu_gdn_program_step(MemraEngine *e, void *bound);
MemraStatus tu_gdn_verify_step(MemraEngine *e, void *bound);

/* A graph step that counts its calls and runs another: memra_graph_capture(e, tu_counted_step,
 * &c, &g) calls c.step(e, c.user) as often as it calls the step, and c.calls says how often that
 * was, so that a test can hold the capture to its two warm-ups and one captured call, and
 * replays to none. */
typedef struct tu_counted {
    MemraStepFn step;
    void *user;
    int calls;
} tu_counted;
MemraStatus tu_counted_step(MemraEngine *e, void *counted);

#endif /* MEMRA_TESTUTIL_H */
