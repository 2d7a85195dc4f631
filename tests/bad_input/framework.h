/*
 * The bad-input framework (docs/bad-input.md): the world every case works on, the generated
 * per-slot cases, the checks, and the Criterion tests of a suite.
 *
 * Every case works on one "world": a single arena buffer that holds every operand of every
 * operation of its suite (activations, weights, counts, snapshots and the pointer tables,
 * whose entries point back into the arena at rings, states and journals), filled with fresh
 * random bits and framed by guard zones. A case spoils one argument of a known-good call,
 * makes the call, and compares full read-backs of the arena taken before and after it, so a
 * stray write anywhere, also through a table entry, is seen. Then it makes the good call,
 * which must succeed: that proves the case was refused for the reason it was built for (and
 * nothing else in the call was wrong), and that a refusal leaves the engine usable.
 *
 * The known-good calls and the per-slot cases come from tests/bad_input/op_args.def: NULL,
 * empty, short, misaligned and wrapping views of every slot, every output against every other
 * slot in three overlap geometries, a zero for every size and a NaN and both infinities for
 * every float, and a bad engine handle of three kinds. A suite adds its shape rules (bi_fixup)
 * and its hand-written cases for the other entry points (bi_custom).
 */
#ifndef MEMRA_TEST_BAD_INPUT_FRAMEWORK_H
#define MEMRA_TEST_BAD_INPUT_FRAMEWORK_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bad_input/op_args.h"
#include "testutil.h"

/* The overflow cases build shape values such as 2^63 that only exist with a 64-bit size_t. */
_Static_assert(SIZE_MAX == UINT64_MAX, "the overflow cases assume a 64-bit size_t");

#define BI_INV MEMRA_STATUS_INVALID_ARGUMENT
#define BI_UNS MEMRA_STATUS_UNSUPPORTED
#define BI_ABI MEMRA_STATUS_ABI_MISMATCH
#define BI_CAP MEMRA_STATUS_CAPTURE_ERROR
#define BI_P2(k) ((size_t)1 << (k))
#define BI_OP_BIT(op) (1u << (op))

/* Regions of the arena beyond the slots' (op_args.h): what the tables point at. */
enum {
    BI_R_STATE_CANON = OA_N_SLOT_REGIONS,
    BI_R_STATE_ALT,
    BI_R_RING,
    BI_R_JOURNAL,
    BI_R_COPY_SRC,
    BI_R_COPY_TARGET,
    BI_N_REGIONS
};

/* A pattern that no call under test writes: where an out-parameter must be left untouched. */
#define BI_SENTINEL_PTR ((void *)(uintptr_t)0x5e7e5e7e5e7e5e70u)
#define BI_SENTINEL_LEN ((size_t)0x5e7e5e7e)

/* Handles that are not what they claim to be. */
enum {
    BI_H_NULL,
    BI_H_GARBAGE,
    /* A handle of the other type: a graph passed as an engine, an engine as a graph. */
    BI_H_OTHER_TYPE,
    /* Graphs only: a live graph of the second engine passed with the first engine. */
    BI_H_FOREIGN,
    /* Graphs only: the first engine's graph passed with the second engine. */
    BI_H_OTHER_ENGINE,
};

typedef struct bi_suite bi_suite;
typedef struct bi_world bi_world;

/* One call of an operation. */
typedef struct bi_call {
    int op;
    MemraEngine *e;
    oa_values v;
} bi_call;

struct bi_world {
    const bi_suite *suite;
    MemraBackend backend;
    MemraEngine *e;
    MemraSliceMutF32 arena;
    size_t off[BI_N_REGIONS];
    size_t region_words[BI_N_REGIONS];
    size_t words;
    float *before;
    float *after;
    uint64_t seed;
    /* The world's graph (a graph handle for the handle cases), and with BI_SECOND_ENGINE a
     * second engine with a graph of its own. */
    MemraGraph *g;
    MemraEngine *e2;
    MemraGraph *g2;
    /* The message the call under test left (copied, because later calls may replace it). */
    char msg[1024];
};

/* A shape rule broken on purpose: up to four scalars set (to a world quantity plus a constant,
 * or with BI_LIT to the constant alone), then the derivations its flags ask for, keeping
 * everything else consistent where it can so that exactly one rule is broken. */
typedef struct bi_set {
    int sc;
    int q;
    size_t add;
} bi_set;

enum {
    /* key_dim = d_state * num_k, then as BI_FX_CONV. */
    BI_FX_HEADS = 1,
    /* conv_dim = 2 * key_dim + d_state * num_v. */
    BI_FX_CONV = 2,
    /* The w view as long as the new d_conv needs (where the operation reads w). */
    BI_FX_FIT_W = 4,
    /* The optional outputs left out. */
    BI_FX_DROP = 8,
};

#define BI_LIT OA_Q_LITERAL
/* key_dim + value_dim: a conv_dim without one of the two key blocks. */
#define BI_Q_KEY_VAL (OA_Q_LITERAL + 1)

typedef struct bi_fixup {
    const char *what;
    unsigned ops;
    MemraStatus expect;
    /* '|'-separated names of which the message must contain one (NULL: no name asked for). */
    const char *params;
    unsigned flags;
    bi_set set[4];
} bi_fixup;

enum {
    BI_CC_ANY = 1,    /* does not depend on the backend: run in the CPU variant only */
    BI_CC_CPU = 2,    /* only meaningful on the CPU backend (host and "device" memory are one) */
    BI_CC_GRAPH = 4,  /* needs the world's graph (and second engine) */
    BI_CC_WRITES = 8, /* the case legitimately runs operations first (no arena comparison) */
};

typedef struct bi_custom bi_custom;
struct bi_custom {
    /* The function whose refusal it is, and the operation it calls (-1: none), whose good
     * call follows the case. */
    const char *fn;
    int op;
    int sub;
    MemraStatus expect;
    const char *params;
    unsigned flags;
    const char *what;
    MemraStatus (*run)(bi_world *w, const bi_custom *cc);
};

enum {
    /* The world's graph replays `chain`; without, it is a graph of an empty step. */
    BI_SECOND_ENGINE = 1,
    /* Single-letter names may also be matched as "->x" and ".x" (struct fields). */
    BI_FIELD_NAMES = 2,
    /* Each pair of an output and another slot in one geometry, the geometries taking turns,
     * except where all_geometries() asks for all three. */
    BI_ROTATE_GEOMETRIES = 4,
};

struct bi_suite {
    const char *name;
    /* The operations (BI_OP_BIT of OA_*) the suite generates cases for. */
    unsigned ops;
    size_t num_k, num_v;
    unsigned flags;
    const int *chain;
    size_t n_chain;
    /* The operation whose good call follows a case of no operation. */
    int good_op;
    bool (*all_geometries)(int op, int slot, int other);
    const bi_fixup *fixups;
    size_t n_fixups;
    const bi_custom *customs;
    const size_t *n_customs;
    /* Extra controls of the good-calls test, on a world with its graph. */
    void (*good_calls)(bi_world *w);
};

/* A generated case (a Criterion parameter). */
typedef struct bi_case {
    int op;
    int kind;
    int slot;
    int other;
    int arg;
} bi_case;

/* The world. */
void bi_world_init(bi_world *w, const bi_suite *suite, MemraBackend backend, bool graph);
void bi_world_fini(bi_world *w);
uintptr_t bi_region_addr(const bi_world *w, int r);
size_t bi_quantity(const bi_world *w, int op, int q);
void bi_snapshot(bi_world *w, float *into);
/* The known-good call of `op`, and an ARGS operation's MemraVerifyArgs from a call. */
void bi_base_call(const bi_world *w, MemraEngine *e, int op, bi_call *c);
void bi_call_args(const bi_call *c, MemraVerifyArgs *a);
MemraStatus bi_invoke(const bi_call *c);

/* Checks. */
MemraStatus bi_took(bi_world *w, MemraStatus st);
void bi_prime_message(const char *fn);
void bi_check_untouched(bi_world *w, const char *what);
void bi_check_refusal(const bi_world *w, const char *what, MemraStatus st, MemraStatus expect,
                      const char *fn, const char *params);
/* Handles. */
void *bi_garbage(void);
MemraEngine *bi_engine_handle(bi_world *w, int h);
MemraStatus bi_empty_step(MemraEngine *e, void *user);
MemraStatus bi_world_step(MemraEngine *e, void *user);

/* The cases and the tests. */
struct criterion_test_params bi_make_cases(const bi_suite *suite, MemraBackend backend);
void bi_run_case(const bi_suite *suite, const bi_case *bc, MemraBackend backend);
void bi_good_calls(const bi_suite *suite, MemraBackend backend);
void bi_sweep(const bi_suite *suite, MemraBackend backend, const char *separate);

/* The tests of a suite: every case as a test of its own on each backend, the good calls
 * accepted, and every case in one process (for valgrind and compute-sanitizer). */
#define BI_BACKEND_TESTS(suite_name, suite, be, BACKEND)                                           \
    ParameterizedTestParameters(suite_name, be)                                                    \
    {                                                                                              \
        return bi_make_cases(&suite, BACKEND);                                                     \
    }                                                                                              \
    ParameterizedTest(bi_case *bc, suite_name, be)                                                 \
    {                                                                                              \
        bi_run_case(&suite, bc, BACKEND);                                                          \
    }                                                                                              \
    Test(suite_name, be##_good_calls_accepted)                                                     \
    {                                                                                              \
        bi_good_calls(&suite, BACKEND);                                                            \
    }                                                                                              \
    Test(suite_name, be##_sweep)                                                                   \
    {                                                                                              \
        bi_sweep(&suite, BACKEND, #suite_name "/" #be);                                            \
    }

#define BI_SUITE_TESTS(suite_name, suite)                                                          \
    BI_BACKEND_TESTS(suite_name, suite, cpu, MEMRA_BACKEND_CPU)                                    \
    BI_BACKEND_TESTS(suite_name, suite, cuda, MEMRA_BACKEND_CUDA)

#endif /* MEMRA_TEST_BAD_INPUT_FRAMEWORK_H */
