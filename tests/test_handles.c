/*
 * Handles, captures and overlapping calls: the library's defences against a host that gets
 * them wrong.
 *
 * - Dead, forged and mismatched handles: every entry point that takes an engine refuses a
 *   destroyed, forged or wrong-kind handle with INVALID_ARGUMENT naming the function and the
 *   parameter, and writes nothing: no output parameter, no byte of any buffer. A second
 *   destroy of an engine or a graph is refused the same way, also after new engines and graphs
 *   have been made in the memory the old ones occupied. None of this may depend on what the
 *   allocator leaves in freed memory: the suite also runs under valgrind, with jemalloc
 *   preloaded and under AddressSanitizer (mk/sanitize.mk).
 * - A graph step whose call on the capturing engine is refused makes the capture fail with
 *   CAPTURE_ERROR even when the step ignores the status and returns OK (the graph would
 *   otherwise silently lack the operation), and the engine stays usable. A step that calls back
 *   into its own engine on the capturing thread works.
 * - Two threads inside calls on the same engine at once: the later call is refused with
 *   INVALID_ARGUMENT ("engine in use by another thread") and does nothing, the earlier one is
 *   unaffected. `make tsan` builds the thread scenarios without Criterion
 *   (-DMEMRA_HANDLES_STANDALONE), like tests/test_threads.c, to prove there is no data race.
 *
 * Worker threads never call Criterion's assertions: they record the first thing that went wrong
 * and the test thread asserts on it after joining them.
 */
#ifndef MEMRA_HANDLES_STANDALONE
#include <criterion/criterion.h>

#include "testutil.h"
#endif

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_input/op_args.h"
#include "support/support.h"

/* ---- Shared by the Criterion tests and the standalone driver ---- */

/* Failures in threads are recorded (tu_record) and asserted by the test or printed by the
 * driver; a message names a function when it holds it as a whole identifier (tu_has_word). */

#define IN_USE "engine in use by another thread"

/* A small per-row conv problem, the cheapest real operation: C channels of width D, one
 * sequence. Its buffers belong to the engine that made them. */
#define C ((size_t)16)
#define D ((size_t)4)
#define RING (C * (D - 1))

typedef struct conv_fx {
    MemraEngine *e;
    MemraSliceMutF32 qkv, w, out, ring;
    MemraSliceMutU64 table;
} conv_fx;

static bool conv_fx_make(conv_fx *fx, MemraEngine *e, uint64_t seed, tu_failure *f)
{
    float qkv[C], w[C * D], ring[RING];
    tu_varied(qkv, C, seed, 1.0f);
    tu_varied(w, C * D, seed + 1, 1.0f);
    tu_varied(ring, RING, seed + 2, 1.0f);
    memset(fx, 0, sizeof *fx);
    fx->e = e;
    MemraStatus st = memra_htod_f32(e, (MemraSliceF32){qkv, C}, &fx->qkv);
    if (st == MEMRA_STATUS_OK)
        st = memra_htod_f32(e, (MemraSliceF32){w, C * D}, &fx->w);
    if (st == MEMRA_STATUS_OK)
        st = memra_htod_f32(e, (MemraSliceF32){ring, RING}, &fx->ring);
    if (st == MEMRA_STATUS_OK)
        st = memra_alloc_f32(e, C, MEMRA_ALLOC_INIT_ZEROED, &fx->out);
    if (st == MEMRA_STATUS_OK) {
        uint64_t entry = (uint64_t)(uintptr_t)fx->ring.ptr;
        st = memra_htod_u64(e, (MemraSliceU64){&entry, 1}, &fx->table);
    }
    if (st != MEMRA_STATUS_OK)
        tu_record(f, "setting up the conv problem: %s", memra_last_error_message());
    return st == MEMRA_STATUS_OK;
}

/* One conv call on `e` with the fixture's buffers (b_n = 0 makes it a bad call). */
static MemraStatus conv_call(MemraEngine *e, const conv_fx *fx, size_t b_n)
{
    return memra_ssm_conv1d_fused_decode_b_view(
        e, (MemraSliceF32){fx->qkv.ptr, C}, (MemraSliceU64){fx->table.ptr, 1},
        (MemraSliceF32){fx->w.ptr, C * D}, fx->out, C, D, b_n);
}

/* Checks a call another thread made while the engine was held: refused as in use, naming the
 * function. */
static void expect_in_use(tu_failure *f, MemraStatus st, const char *fn)
{
    const char *msg = memra_last_error_message();
    if (st != MEMRA_STATUS_INVALID_ARGUMENT || !tu_has_word(msg, fn) || strstr(msg, IN_USE) == NULL)
        tu_record(f,
                  "%s on an engine another thread is inside returned %s (\"%s\"), expected "
                  "INVALID_ARGUMENT naming %s and saying \"" IN_USE "\"",
                  fn, memra_status_string(st), msg, fn);
}

/* ---- Scenario: a call from a second thread while the first is inside a call ----
 *
 * The first thread captures a graph whose step, on its first call, lets the second thread go
 * and waits until it is done: the second thread's calls are certain to overlap a call on the
 * engine, with no timing involved. */

typedef struct overlap {
    MemraEngine *e;
    conv_fx fx;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int phase; /* 0 waiting, 1 the step holds the engine, 2 the second thread is done */
    int steps;
    tu_failure f;
} overlap;

static MemraStatus holding_step(MemraEngine *e, void *user)
{
    overlap *o = user;
    o->steps++;
    MemraStatus st = conv_call(e, &o->fx, 1);
    pthread_mutex_lock(&o->lock);
    o->phase = 1;
    pthread_cond_broadcast(&o->cond);
    while (o->phase != 2)
        pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);
    return st;
}

static void *intruder_main(void *arg)
{
    overlap *o = arg;
    pthread_mutex_lock(&o->lock);
    while (o->phase != 1)
        pthread_cond_wait(&o->cond, &o->lock);
    pthread_mutex_unlock(&o->lock);

    MemraBackend kind = (MemraBackend)0x5e7e;
    expect_in_use(&o->f, memra_engine_backend(o->e, &kind), "memra_engine_backend");
    if (kind != (MemraBackend)0x5e7e)
        tu_record(&o->f, "a refused memra_engine_backend wrote *out_backend");
    MemraSliceMutF32 s = {(float *)(uintptr_t)0x5e7e0, 77};
    expect_in_use(&o->f, memra_alloc_f32(o->e, 64, MEMRA_ALLOC_INIT_ZEROED, &s), "memra_alloc_f32");
    if (s.ptr != (float *)(uintptr_t)0x5e7e0 || s.len != 77)
        tu_record(&o->f, "a refused memra_alloc_f32 wrote *out");
    expect_in_use(&o->f, conv_call(o->e, &o->fx, 1), "memra_ssm_conv1d_fused_decode_b_view");
    /* The engine must survive a destroy from another thread while it is in use. */
    expect_in_use(&o->f, memra_engine_destroy(o->e), "memra_engine_destroy");
    expect_in_use(&o->f, memra_engine_synchronize(o->e), "memra_engine_synchronize");

    pthread_mutex_lock(&o->lock);
    o->phase = 2;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

static void *user_main(void *arg)
{
    overlap *o = arg;
    MemraBackend kind;
    if (memra_engine_backend(o->e, &kind) != MEMRA_STATUS_OK)
        tu_record(&o->f, "after the overlap, memra_engine_backend from another thread: %s",
                  memra_last_error_message());
    if (conv_call(o->e, &o->fx, 1) != MEMRA_STATUS_OK)
        tu_record(&o->f, "after the overlap, a conv from another thread: %s",
                  memra_last_error_message());
    return NULL;
}

static void scenario_overlap(MemraEngine *e, tu_failure *f)
{
    overlap o = {.e = e};
    pthread_mutex_init(&o.lock, NULL);
    pthread_cond_init(&o.cond, NULL);
    if (!conv_fx_make(&o.fx, e, 0x0fe1, f))
        return;
    pthread_t th;
    if (pthread_create(&th, NULL, intruder_main, &o) != 0) {
        tu_record(f, "pthread_create failed");
        return;
    }
    MemraGraph *sentinel = (MemraGraph *)(uintptr_t)0x6b6b6b60, *g = sentinel;
    MemraStatus st = memra_graph_capture(e, holding_step, &o, &g);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    pthread_join(th, NULL);
    if (o.f.failed) {
        tu_record(f, "%s", o.f.text);
        return;
    }
    /* The refused calls may have been the step's own (a step that hands work to a thread), so
     * the graph may lack them: the capture must fail, and say why. */
    if (st != MEMRA_STATUS_CAPTURE_ERROR || !tu_has_word(msg, "memra_graph_capture") ||
        strstr(msg, "another thread") == NULL)
        tu_record(f,
                  "a capture during which another thread's calls were refused returned %s "
                  "(\"%s\"), expected CAPTURE_ERROR naming memra_graph_capture and the other "
                  "thread",
                  memra_status_string(st), msg);
    if (g != sentinel)
        tu_record(f, "the failed capture wrote *out_graph");
    if (o.steps != 1)
        tu_record(f, "the capture went on calling the step after the refusal (%d calls)", o.steps);

    /* The engine is free again: another thread may use it, then this one. */
    if (pthread_create(&th, NULL, user_main, &o) != 0) {
        tu_record(f, "pthread_create failed");
        return;
    }
    pthread_join(th, NULL);
    if (o.f.failed)
        tu_record(f, "%s", o.f.text);
    if (conv_call(e, &o.fx, 1) != MEMRA_STATUS_OK)
        tu_record(f, "after the overlap, a conv on the first thread: %s",
                  memra_last_error_message());
    pthread_cond_destroy(&o.cond);
    pthread_mutex_destroy(&o.lock);
}

/* ---- Scenario: two threads hammering one engine ----
 *
 * Both threads run the same loop on one engine: a query, an allocation and its free, and a conv
 * on shared buffers. Every call either runs (alone: a call that got in holds the engine) or is
 * refused as in use; nothing else may happen, and under ThreadSanitizer no access may race,
 * also through the operations' writes to the shared buffers. Whether calls overlap at all
 * depends on the scheduler, so the overlap itself is the other scenario's to prove. */

#define HAMMER_ITERATIONS 2000

/* Both threads start together, so that their loops have a chance to overlap. */
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open, abandoned;
} gate;

typedef struct hammer {
    MemraEngine *e;
    const conv_fx *fx;
    gate *start;
    unsigned long refused;
    tu_failure f;
} hammer;

/* OK, or refused because the engine is in use; anything else fails the worker. */
static bool ran(hammer *h, MemraStatus st, const char *fn)
{
    if (st == MEMRA_STATUS_OK)
        return true;
    if (st == MEMRA_STATUS_INVALID_ARGUMENT && strstr(memra_last_error_message(), IN_USE)) {
        h->refused++;
        return false;
    }
    tu_record(&h->f, "%s returned %s (\"%s\"): expected OK or \"" IN_USE "\"", fn,
              memra_status_string(st), memra_last_error_message());
    return false;
}

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    MemraBackend want = (MemraBackend)0x5e7e; /* the first query that runs sets it */
    pthread_mutex_lock(&h->start->lock);
    while (!h->start->open)
        pthread_cond_wait(&h->start->cond, &h->start->lock);
    bool abandoned = h->start->abandoned;
    pthread_mutex_unlock(&h->start->lock);
    if (abandoned)
        return NULL;
    for (int i = 0; i < HAMMER_ITERATIONS && !h->f.failed; i++) {
        MemraBackend kind = (MemraBackend)0x5e7e;
        if (ran(h, memra_engine_backend(h->e, &kind), "memra_engine_backend")) {
            if (want == (MemraBackend)0x5e7e)
                want = kind;
            if (kind != want)
                tu_record(&h->f, "memra_engine_backend gave %u, then %u", (unsigned)want,
                          (unsigned)kind);
        }
        MemraSliceMutF32 s;
        if (ran(h, memra_alloc_f32(h->e, 32, MEMRA_ALLOC_INIT_ZEROED, &s), "memra_alloc_f32")) {
            /* A refused free leaves the buffer allocated: try until it goes. */
            while (!h->f.failed && !ran(h, memra_free(h->e, s.ptr), "memra_free"))
                sched_yield();
        }
        (void)ran(h, conv_call(h->e, h->fx, 1), "memra_ssm_conv1d_fused_decode_b_view");
    }
    return NULL;
}

static void scenario_hammer(MemraEngine *e, tu_failure *f, unsigned long *refused)
{
    conv_fx fx;
    if (!conv_fx_make(&fx, e, 0x4a3e, f))
        return;
    gate start = {.open = false};
    pthread_mutex_init(&start.lock, NULL);
    pthread_cond_init(&start.cond, NULL);
    hammer h[2] = {{.e = e, .fx = &fx, .start = &start}, {.e = e, .fx = &fx, .start = &start}};
    pthread_t th[2];
    int started = 0;
    for (; started < 2; started++)
        if (pthread_create(&th[started], NULL, hammer_main, &h[started]) != 0)
            break;
    pthread_mutex_lock(&start.lock);
    start.open = true;
    start.abandoned = started < 2;
    pthread_cond_broadcast(&start.cond);
    pthread_mutex_unlock(&start.lock);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_cond_destroy(&start.cond);
    pthread_mutex_destroy(&start.lock);
    if (started < 2) {
        tu_record(f, "pthread_create failed");
        return;
    }
    for (int i = 0; i < 2; i++)
        if (h[i].f.failed)
            tu_record(f, "thread %d: %s", i, h[i].f.text);
    *refused = h[0].refused + h[1].refused;
    /* Every buffer the loops made was freed again: only the fixture's five are left. */
    MemraSliceMutF32 probe;
    if (memra_alloc_f32(e, 1, MEMRA_ALLOC_INIT_ZEROED, &probe) != MEMRA_STATUS_OK ||
        memra_free(e, probe.ptr) != MEMRA_STATUS_OK)
        tu_record(f, "the engine is unusable after the hammering: %s", memra_last_error_message());
}

#ifndef MEMRA_HANDLES_STANDALONE

/* ---- Criterion helpers ---- */

#define SENTINEL_PTR ((void *)(uintptr_t)0x5e7e5e70)
#define SENTINEL_LEN ((size_t)0x5e7e)
#define GRAPH_SENTINEL ((MemraGraph *)(uintptr_t)0x6b6b6b60)

static MemraStatus empty_step(MemraEngine *e, void *user)
{
    return MEMRA_STATUS_OK;
}

static MemraStatus counting_step(MemraEngine *e, void *user)
{
    ++*(int *)user;
    return MEMRA_STATUS_OK;
}

/* Asserts INVALID_ARGUMENT with a message naming the function and the parameter (and, when
 * given, containing `reason`). */
static void expect_refused(MemraStatus st, const char *fn, const char *param, const char *reason,
                           const char *what)
{
    const char *msg = memra_last_error_message();
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", param);
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT, "%s with %s returned %s (\"%s\")", fn, what,
                 memra_status_string(st), msg);
    cr_assert(tu_has_word(msg, fn), "%s with %s: the message \"%s\" does not name the function", fn,
              what, msg);
    cr_assert(strstr(msg, quoted) != NULL,
              "%s with %s: the message \"%s\" does not name parameter %s", fn, what, msg, quoted);
    if (reason != NULL)
        cr_assert(strstr(msg, reason) != NULL, "%s with %s: the message \"%s\" does not say \"%s\"",
                  fn, what, msg, reason);
}

/* An engine that stays alive to own the buffers and the graph that calls through bad handles
 * are given, filled with fresh random bits, so that a write through any of them shows. */
#define ARENA ((size_t)4096)

typedef struct witness {
    MemraEngine *e;
    MemraSliceMutF32 arena;
    float before[ARENA];
    MemraGraph *g;
    int graph_steps;
} witness;

static void witness_make(witness *w, MemraBackend backend)
{
    memset(w, 0, sizeof *w);
    w->e = tu_engine(backend);
    tu_varied(w->before, ARENA, tu_fresh_seed(), 1.0f);
    w->arena = tu_upload(w->e, w->before, ARENA);
    TU_OK(memra_graph_capture(w->e, counting_step, &w->graph_steps, &w->g));
    cr_assert_eq(w->graph_steps, 3, "the witness graph's capture ran its step %d times",
                 w->graph_steps);
}

/* The witness's buffer is exactly as it was and its graph still replays; then it goes. */
static void witness_check_and_destroy(witness *w, const char *what)
{
    float *after = tu_download(w->e, w->arena);
    cr_assert_eq(tu_bit_diffs(after, w->before, ARENA), 0,
                 "calls with %s wrote into another engine's buffer", what);
    free(after);
    cr_assert_eq(w->graph_steps, 3, "a call with %s ran a step", what);
    TU_OK(memra_graph_launch(w->e, w->g));
    TU_OK(memra_graph_destroy(w->e, w->g));
    TU_OK(memra_engine_destroy(w->e));
}

/* Every exported function that takes an engine handle: the engine, memory and graph functions
 * that take more than handles, then every row of the operation argument table
 * (tests/bad_input/op_args.def, the verify once per mode), so that an operation added there is
 * covered here too, then the calls that take only handles (tu_call_handles), which end with
 * memra_engine_destroy. */
enum {
    X_ENGINE_BACKEND,
    X_ENGINE_STREAM,
    X_ALLOC_F32,
    X_ALLOC_U64,
    X_ALLOC_U32,
    X_FREE,
    X_HTOD_F32,
    X_HTOD_U64,
    X_HTOD_F32_INTO,
    X_HTOD_U64_INTO,
    X_HTOD_U32_INTO,
    X_DTOH_F32,
    X_DTOH_U64,
    X_DTOH_U32,
    X_GRAPH_CAPTURE,
    X_OPS,
    X_HANDLE_CALLS = X_OPS + OA_N_OP,
    X_COUNT = X_HANDLE_CALLS + TU_N_HANDLE_CALLS
};

static const char *entry_name(int x)
{
    static const char *const names[X_OPS] = {
        "memra_engine_backend", "memra_engine_stream", "memra_alloc_f32",     "memra_alloc_u64",
        "memra_alloc_u32",      "memra_free",          "memra_htod_f32",      "memra_htod_u64",
        "memra_htod_f32_into",  "memra_htod_u64_into", "memra_htod_u32_into", "memra_dtoh_f32",
        "memra_dtoh_u64",       "memra_dtoh_u32",      "memra_graph_capture",
    };
    if (x >= X_HANDLE_CALLS)
        return tu_handle_call_name((tu_handle_call)(x - X_HANDLE_CALLS));
    return x >= X_OPS ? OA_OPS[x - X_OPS].fn : names[x];
}

/* Calls operation `op` of the argument table with engine `e`: every slice it takes points into
 * the witness's buffer (inputs at `in`, outputs at `out`, tables at `tab`, counts at `in32`),
 * with small shapes. */
static MemraStatus call_op(int op, MemraEngine *e, MemraSliceF32 in, MemraSliceMutF32 out,
                           MemraSliceU64 tab, MemraSliceU32 in32)
{
    oa_values v;
    memset(&v, 0, sizeof v);
    for (int s = 0; s < OA_OPS[op].n; s++) {
        const int kind = oa_slot_of(op, s)->kind;
        if (kind == OA_K_IN) {
            v.p[s] = (uintptr_t)in.ptr, v.len[s] = in.len;
        } else if (kind == OA_K_TAB) {
            v.p[s] = (uintptr_t)tab.ptr, v.len[s] = tab.len;
        } else if (kind == OA_K_U32) {
            v.p[s] = (uintptr_t)in32.ptr, v.len[s] = in32.len;
        } else if (oa_is_output(op, s)) {
            v.p[s] = (uintptr_t)out.ptr, v.len[s] = out.len;
        }
    }
    const size_t z[OA_N_SC] = {
        [OA_SC_d_state] = 128,  [OA_SC_num_v] = 1,  [OA_SC_num_k] = 1, [OA_SC_key_dim] = 128,
        [OA_SC_conv_dim] = 384, [OA_SC_d_conv] = 4, [OA_SC_t] = 1,     [OA_SC_b_n] = 1,
        [OA_SC_n] = 1,          [OA_SC_words] = 1,
    };
    memcpy(v.z, z, sizeof z);
    v.z[OA_SC_mode] = OA_OPS[op].mode == OA_MODE_NONE ? 0 : OA_OPS[op].mode;
    v.f[OA_SC_eps] = 1e-6f;
    v.f[OA_SC_scale] = 0.1f;
    MemraVerifyArgs args;
    TU_OK(memra_verify_args_init(&args));
    if (OA_OPS[op].form == OA_FORM_ARGS)
        oa_fill_args(op, &args, &v);
    return oa_invoke(op, e, &v, &args);
}

/* Whether all `n` bytes at `p` are `value`. */
static bool same_bytes(const void *p, size_t n, unsigned char value)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != value)
            return false;
    return true;
}

/* Calls entry point `x` with engine handle `e`; every other argument points into the witness's
 * buffer (or is its graph), so that a call which went through would write there. Output
 * parameters hold sentinels that must survive. */
static MemraStatus call_entry(int x, MemraEngine *e, witness *w)
{
    float *a = w->arena.ptr;
    MemraSliceF32 in = {a, 256};
    MemraSliceMutF32 out = {a + 1024, 256};
    MemraSliceU64 tab = {(const uint64_t *)(void *)(a + 512), 6};
    MemraSliceMutU64 tab_out = {(uint64_t *)(void *)(a + 512), 6};
    MemraSliceU32 in32 = {(const uint32_t *)(void *)(a + 768), 4};
    MemraSliceMutU32 out32 = {(uint32_t *)(void *)(a + 2048), 4};
    float host[256];
    uint64_t host64[6];
    uint32_t host32[4];
    memset(host, 0x3c, sizeof host);
    memset(host64, 0x3c, sizeof host64);
    memset(host32, 0x3c, sizeof host32);
    MemraStatus st = MEMRA_STATUS_INTERNAL;

    if (x >= X_OPS && x < X_HANDLE_CALLS)
        st = call_op(x - X_OPS, e, in, out, tab, in32);
    else if (x >= X_HANDLE_CALLS)
        st = tu_call_handles((tu_handle_call)(x - X_HANDLE_CALLS), e, w->g);

/* Sets `st` to `fn` called with `e`, the arguments given and the address of a slice of `type`
 * holding sentinels, which a refused call must leave as they are. */
#define KEEPS_OUT(type, fn, ...)                                                                   \
    do {                                                                                           \
        type out_ = {SENTINEL_PTR, SENTINEL_LEN};                                                  \
        st = fn(e, __VA_ARGS__, &out_);                                                            \
        cr_assert(out_.ptr == SENTINEL_PTR && out_.len == SENTINEL_LEN, #fn " wrote *out");        \
    } while (0)
    switch (x) {
    case X_ENGINE_BACKEND: {
        MemraBackend k = (MemraBackend)0x5e7e;
        st = memra_engine_backend(e, &k);
        cr_assert_eq(k, (MemraBackend)0x5e7e, "memra_engine_backend wrote *out_backend");
        break;
    }
    case X_ENGINE_STREAM: {
        void *s = SENTINEL_PTR;
        st = memra_engine_stream(e, &s);
        cr_assert_eq(s, SENTINEL_PTR, "memra_engine_stream wrote *out_stream");
        break;
    }
    case X_ALLOC_F32:
        KEEPS_OUT(MemraSliceMutF32, memra_alloc_f32, 64, MEMRA_ALLOC_INIT_ZEROED);
        break;
    case X_ALLOC_U64:
        KEEPS_OUT(MemraSliceMutU64, memra_alloc_u64, 64, MEMRA_ALLOC_INIT_ZEROED);
        break;
    case X_ALLOC_U32:
        KEEPS_OUT(MemraSliceMutU32, memra_alloc_u32, 64, MEMRA_ALLOC_INIT_ZEROED);
        break;
    case X_FREE:
        /* The witness's own buffer: freeing it through a bad handle must not free it. */
        st = memra_free(e, w->arena.ptr);
        break;
    case X_HTOD_F32:
        KEEPS_OUT(MemraSliceMutF32, memra_htod_f32, (MemraSliceF32){host, 256});
        break;
    case X_HTOD_U64:
        KEEPS_OUT(MemraSliceMutU64, memra_htod_u64, (MemraSliceU64){host64, 6});
        break;
    case X_HTOD_F32_INTO:
        st = memra_htod_f32_into(e, (MemraSliceF32){host, 256}, out);
        break;
    case X_HTOD_U64_INTO:
        st = memra_htod_u64_into(e, (MemraSliceU64){host64, 6}, tab_out);
        break;
    case X_HTOD_U32_INTO:
        st = memra_htod_u32_into(e, (MemraSliceU32){host32, 4}, out32);
        break;
    case X_DTOH_F32:
        st = memra_dtoh_f32(e, in, (MemraSliceMutF32){host, 256});
        break;
    case X_DTOH_U64:
        st = memra_dtoh_u64(e, tab, (MemraSliceMutU64){host64, 6});
        break;
    case X_DTOH_U32:
        st = memra_dtoh_u32(e, in32, (MemraSliceMutU32){host32, 4});
        break;
    case X_GRAPH_CAPTURE: {
        MemraGraph *g = GRAPH_SENTINEL;
        st = memra_graph_capture(e, counting_step, &w->graph_steps, &g);
        cr_assert_eq(g, GRAPH_SENTINEL, "memra_graph_capture wrote *out_graph");
        break;
    }
    }
#undef KEEPS_OUT
    /* Whatever the entry point, a refused call wrote none of the host arrays (the copies to the
     * host are the calls that would). */
    cr_assert(same_bytes(host, sizeof host, 0x3c) && same_bytes(host64, sizeof host64, 0x3c) &&
                  same_bytes(host32, sizeof host32, 0x3c),
              "%s wrote a host array", entry_name(x));
    return st;
}

/* Every entry point refuses handle `bad` (described by `what`) for parameter 'engine', saying
 * `reason` when given, and nothing of the witness changes. */
static void expect_every_entry_refuses(MemraBackend backend, MemraEngine *bad, const char *what,
                                       const char *reason)
{
    witness w;
    witness_make(&w, backend);
    for (int x = 0; x < X_COUNT; x++)
        expect_refused(call_entry(x, bad, &w), entry_name(x), "engine", reason, what);
    witness_check_and_destroy(&w, what);
}

/* ---- Dead, forged and mismatched handles ---- */

/* Exactly the sequence that first showed the problem: each call must be refused under any
 * allocator (glibc's free() happened to overwrite what the old check read; jemalloc's and
 * valgrind's do not). */
static void check_reproduction(MemraBackend backend)
{
    MemraEngine *first = tu_engine(backend);
    MemraEngine *second = tu_engine(backend);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(second, empty_step, NULL, &g));
    TU_OK(memra_graph_destroy(second, g));
    expect_refused(memra_graph_launch(second, g), "memra_graph_launch", "graph", "destroyed",
                   "a destroyed graph");
    TU_OK(memra_engine_destroy(first));
    MemraBackend k = (MemraBackend)0x5e7e;
    expect_refused(memra_engine_backend(first, &k), "memra_engine_backend", "engine", "destroyed",
                   "a destroyed engine");
    cr_assert_eq(k, (MemraBackend)0x5e7e, "memra_engine_backend wrote *out_backend");
    expect_refused(memra_engine_destroy(first), "memra_engine_destroy", "engine", "destroyed",
                   "a destroyed engine");
    TU_OK(memra_engine_destroy(second));
}

TU_TEST_BACKENDS(handles, issue_reproduction_refused, check_reproduction)

static void check_destroyed_engine_everywhere(MemraBackend backend)
{
    MemraEngine *dead = tu_engine(backend);
    /* Buffers and a graph die with it; their memory goes back to the allocator. */
    (void)tu_zeros(dead, 1000);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(dead, empty_step, NULL, &g));
    TU_OK(memra_graph_destroy(dead, g));
    TU_OK(memra_engine_destroy(dead));
    expect_every_entry_refuses(backend, dead, "a destroyed engine", "destroyed");
}

TU_TEST_BACKENDS(handles, destroyed_engine_refused_by_every_entry_point,
                 check_destroyed_engine_everywhere)

/* A destroyed handle stays dead while new engines take its memory and its registry slot: a
 * second destroy through it must never hit the engine that lives there now. */
static void check_destroy_twice(MemraBackend backend)
{
    enum { ROUNDS = 64 };
    MemraEngine *old[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        old[i] = tu_engine(backend);
        TU_OK(memra_engine_destroy(old[i]));
    }
    MemraEngine *live = tu_engine(backend);
    MemraSliceMutF32 keep = tu_zeros(live, 64);
    for (int i = 0; i < ROUNDS; i++) {
        cr_assert_neq(old[i], live, "a new engine got the handle of a destroyed one");
        expect_refused(memra_engine_destroy(old[i]), "memra_engine_destroy", "engine", "destroyed",
                       "an engine destroyed before");
        MemraBackend k;
        expect_refused(memra_engine_backend(old[i], &k), "memra_engine_backend", "engine",
                       "destroyed", "an engine destroyed before");
    }
    /* The live engine is untouched by all of that. */
    MemraBackend k;
    TU_OK(memra_engine_backend(live, &k));
    cr_assert_eq(k, backend);
    float back[64];
    tu_download_into(live, tu_view(keep), back);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(back[i], 0.0f, "the live engine's buffer changed");
    TU_OK(memra_engine_destroy(live));
    expect_refused(memra_engine_destroy(live), "memra_engine_destroy", "engine", "destroyed",
                   "an engine destroyed twice");
}

TU_TEST_BACKENDS(handles, engine_destroyed_twice_refused, check_destroy_twice)

static void check_graph_destroy_twice(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    MemraGraph *g = NULL, *again = NULL;
    int steps = 0;
    TU_OK(memra_graph_capture(e, counting_step, &steps, &g));
    TU_OK(memra_graph_destroy(e, g));
    expect_refused(memra_graph_destroy(e, g), "memra_graph_destroy", "graph", "destroyed",
                   "a graph destroyed twice");
    expect_refused(memra_graph_launch(e, g), "memra_graph_launch", "graph", "destroyed",
                   "a destroyed graph");
    /* A new graph in the old one's memory and slot; the old handle still names nothing. */
    TU_OK(memra_graph_capture(e, counting_step, &steps, &again));
    cr_assert_neq(again, g, "a new graph got the handle of a destroyed one");
    expect_refused(memra_graph_destroy(e, g), "memra_graph_destroy", "graph", "destroyed",
                   "a graph destroyed before a new one was made");
    expect_refused(memra_graph_launch(e, g), "memra_graph_launch", "graph", "destroyed",
                   "a graph destroyed before a new one was made");
    cr_assert_eq(steps, 6, "the refused calls ran a step");
    TU_OK(memra_graph_launch(e, again));
    /* The engine counts one live graph, not zero: it refuses to go. */
    cr_assert_eq(memra_engine_destroy(e), MEMRA_STATUS_INVALID_ARGUMENT,
                 "a refused graph destroy changed the engine's count of live graphs");
    TU_OK(memra_graph_destroy(e, again));
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(handles, graph_destroyed_twice_refused, check_graph_destroy_twice)

/* Values a host could pass that no call of the library ever returned. */
static void check_forged_engines(MemraBackend backend)
{
    MemraEngine *live = tu_engine(backend);
    uintptr_t h = (uintptr_t)live;
    static uint64_t words[16];
    memset(words, 0xa5, sizeof words);
    void *heap = malloc(4096);
    cr_assert_not_null(heap);
    memset(heap, 0, 4096);
    const struct {
        uintptr_t value;
        const char *what;
    } forged[] = {
        {1, "the value 1"},
        {8, "the value 8"},
        {(uintptr_t)words, "the address of static memory"},
        {(uintptr_t)heap, "the address of zeroed heap memory"},
        {(uintptr_t)&h, "the address of a stack variable"},
        {UINTPTR_MAX, "all bits set"},
        {h ^ 1, "a live handle with its lowest bit flipped"},
        {h ^ ((uintptr_t)1 << 40), "a live handle with a middle bit flipped"},
        {h ^ ((uintptr_t)1 << 63), "a live handle with its top bit flipped"},
    };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++)
        expect_every_entry_refuses(backend, (MemraEngine *)forged[i].value, forged[i].what, NULL);
    free(heap);
    MemraBackend k;
    TU_OK(memra_engine_backend(live, &k));
    TU_OK(memra_engine_destroy(live));
}

TU_TEST_BACKENDS(handles, forged_engine_handles_refused, check_forged_engines)

/* Graph parameters: NULL (launch), forged values, an engine handle, a graph of another engine,
 * a destroyed graph. The good graph is never disturbed. */
static void check_bad_graphs(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend), *other = tu_engine(backend);
    int steps = 0, other_steps = 0;
    MemraGraph *g = NULL, *foreign = NULL, *dead = NULL;
    TU_OK(memra_graph_capture(e, counting_step, &steps, &g));
    TU_OK(memra_graph_capture(other, counting_step, &other_steps, &foreign));
    TU_OK(memra_graph_capture(e, counting_step, &steps, &dead));
    TU_OK(memra_graph_destroy(e, dead));
    static uint64_t words[16];
    memset(words, 0xa5, sizeof words);
    const struct {
        MemraGraph *graph;
        const char *what;
        const char *reason;
    } bad[] = {
        {(MemraGraph *)(uintptr_t)words, "the address of static memory", NULL},
        {(MemraGraph *)((uintptr_t)g ^ 1), "a live handle with its lowest bit flipped", NULL},
        {(MemraGraph *)((uintptr_t)g ^ ((uintptr_t)1 << 40)),
         "a live handle with a middle bit flipped", NULL},
        {(MemraGraph *)(void *)e, "an engine handle", "an engine handle"},
        {foreign, "a graph of another engine", "another engine"},
        {dead, "a destroyed graph", "destroyed"},
    };
    expect_refused(memra_graph_launch(e, NULL), "memra_graph_launch", "graph", "NULL",
                   "a NULL graph");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_refused(memra_graph_launch(e, bad[i].graph), "memra_graph_launch", "graph",
                       bad[i].reason, bad[i].what);
        expect_refused(memra_graph_destroy(e, bad[i].graph), "memra_graph_destroy", "graph",
                       bad[i].reason, bad[i].what);
    }
    /* A graph handle where an engine belongs. */
    MemraBackend k;
    expect_refused(memra_engine_backend((MemraEngine *)(void *)g, &k), "memra_engine_backend",
                   "engine", "a graph handle", "a graph handle");
    cr_assert_eq(steps + other_steps, 9, "a refused call ran a step");
    TU_OK(memra_graph_launch(e, g));
    TU_OK(memra_graph_launch(other, foreign));
    TU_OK(memra_graph_destroy(e, g));
    TU_OK(memra_graph_destroy(other, foreign));
    TU_OK(memra_engine_destroy(e));
    TU_OK(memra_engine_destroy(other));
}

TU_TEST_BACKENDS(handles, bad_graph_handles_refused, check_bad_graphs)

/* ---- A capture cannot silently drop a refused call ---- */

enum {
    RF_BAD_ARGUMENT, /* an operation with b_n = 0 */
    RF_BAD_FREE,     /* memra_free of memory the engine never made */
    RF_ZERO_ALLOC,   /* memra_alloc_f32 of 0 elements */
    RF_DEAD_HANDLE,  /* a call through a destroyed engine handle */
    /* RF_HANDLE_CALL + c: tu_call_handles(c) inside the step, with the engine's other graph. */
    RF_HANDLE_CALL,
    RF_COUNT = RF_HANDLE_CALL + TU_N_HANDLE_CALLS
};

static const char *rf_name(int mode)
{
    static const char *const names[RF_HANDLE_CALL] = {
        "memra_ssm_conv1d_fused_decode_b_view",
        "memra_free",
        "memra_alloc_f32",
        "memra_ssm_conv1d_fused_decode_b_view",
    };
    return mode >= RF_HANDLE_CALL ? tu_handle_call_name((tu_handle_call)(mode - RF_HANDLE_CALL))
                                  : names[mode];
}

typedef struct refusing {
    conv_fx fx;
    int mode;
    /* Refuse in every call of the step, or only in the third (captured) one. */
    bool every_call;
    int calls;
    MemraGraph *other_graph;
    MemraEngine *dead;
    MemraStatus inner;
} refusing;

/* Runs the good operation, then makes the refused call and ignores its status. */
static MemraStatus refusing_step(MemraEngine *e, void *user)
{
    refusing *r = user;
    const int call = ++r->calls;
    MemraStatus st = conv_call(e, &r->fx, 1);
    if (st != MEMRA_STATUS_OK)
        return st;
    if (!r->every_call && call < 3)
        return MEMRA_STATUS_OK;
    float local[4];
    MemraSliceMutF32 s;
    switch (r->mode) {
    case RF_BAD_ARGUMENT:
        st = conv_call(e, &r->fx, 0);
        break;
    case RF_BAD_FREE:
        st = memra_free(e, local);
        break;
    case RF_ZERO_ALLOC:
        st = memra_alloc_f32(e, 0, MEMRA_ALLOC_INIT_ZEROED, &s);
        break;
    case RF_DEAD_HANDLE:
        st = conv_call(r->dead, &r->fx, 1);
        break;
    default:
        /* RF_COUNT, the good step's mode, makes no refused call. */
        if (r->mode < RF_COUNT)
            st = tu_call_handles((tu_handle_call)(r->mode - RF_HANDLE_CALL), e, r->other_graph);
        break;
    }
    r->inner = st;
    return MEMRA_STATUS_OK;
}

static void check_refusal_fails_capture(MemraBackend backend, int mode, bool every_call)
{
    const char *when = every_call ? "every call" : "the captured call only";
    MemraEngine *e = tu_engine(backend);
    refusing r;
    memset(&r, 0, sizeof r);
    r.mode = mode;
    r.every_call = every_call;
    r.inner = MEMRA_STATUS_OK;
    tu_failure f = {0};
    cr_assert(conv_fx_make(&r.fx, e, tu_fresh_seed(), &f), "%s", f.text);
    int other_steps = 0;
    TU_OK(memra_graph_capture(e, counting_step, &other_steps, &r.other_graph));
    r.dead = tu_engine(backend);
    TU_OK(memra_engine_destroy(r.dead));

    MemraGraph *g = GRAPH_SENTINEL;
    MemraStatus st = memra_graph_capture(e, refusing_step, &r, &g);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", memra_last_error_message());
    cr_assert_neq(r.inner, MEMRA_STATUS_OK, "%s in %s: the call inside the step was not refused",
                  rf_name(mode), when);
    cr_assert_eq(st, MEMRA_STATUS_CAPTURE_ERROR,
                 "a step that ignored a refused %s in %s: the capture returned %s (\"%s\")",
                 rf_name(mode), when, memra_status_string(st), msg);
    cr_assert(tu_has_word(msg, "memra_graph_capture") && tu_has_word(msg, rf_name(mode)),
              "the capture's message \"%s\" does not name memra_graph_capture and %s", msg,
              rf_name(mode));
    cr_assert_eq(g, GRAPH_SENTINEL, "the failed capture wrote *out_graph");
    cr_assert_eq(r.calls, every_call ? 1 : 3, "%s in %s: the step ran %d times", rf_name(mode),
                 when, r.calls);

    /* The engine carries on: its other graph replays, a good capture works and replays. */
    TU_OK(memra_graph_launch(e, r.other_graph));
    refusing good = r;
    good.mode = RF_COUNT;
    good.calls = 0;
    MemraGraph *ok = NULL;
    TU_OK(memra_graph_capture(e, refusing_step, &good, &ok));
    TU_OK(memra_graph_launch(e, ok));
    TU_OK(memra_engine_synchronize(e));
    TU_OK(memra_graph_destroy(e, ok));
    TU_OK(memra_graph_destroy(e, r.other_graph));
    TU_OK(memra_engine_destroy(e));
}

/* The refusal `mode` ignored in every call of the step and in the captured call only, each on
 * both backends. */
#define REFUSAL_TESTS(name, mode)                                                                  \
    static void refusal_in_every_call_##name(MemraBackend backend)                                 \
    {                                                                                              \
        check_refusal_fails_capture(backend, mode, true);                                          \
    }                                                                                              \
    static void refusal_in_the_captured_call_##name(MemraBackend backend)                          \
    {                                                                                              \
        check_refusal_fails_capture(backend, mode, false);                                         \
    }                                                                                              \
    TU_TEST_BACKENDS(handles, capture_fails_when_step_ignores_##name,                              \
                     refusal_in_every_call_##name)                                                 \
    TU_TEST_BACKENDS(handles, capture_fails_when_captured_call_ignores_##name,                     \
                     refusal_in_the_captured_call_##name)

REFUSAL_TESTS(a_bad_argument, RF_BAD_ARGUMENT)
REFUSAL_TESTS(a_refused_free, RF_BAD_FREE)
REFUSAL_TESTS(a_refused_alloc, RF_ZERO_ALLOC)
REFUSAL_TESTS(a_launch_inside_the_step, RF_HANDLE_CALL + TU_CALL_GRAPH_LAUNCH)
REFUSAL_TESTS(a_graph_destroy_inside_the_step, RF_HANDLE_CALL + TU_CALL_GRAPH_DESTROY)
REFUSAL_TESTS(an_engine_destroy_inside_the_step, RF_HANDLE_CALL + TU_CALL_ENGINE_DESTROY)
REFUSAL_TESTS(a_synchronize_inside_the_step, RF_HANDLE_CALL + TU_CALL_SYNCHRONIZE)
REFUSAL_TESTS(a_call_through_a_dead_handle, RF_DEAD_HANDLE)

/* A step may drive another engine too; that engine's refusals are its own business and do not
 * concern the capture. */
typedef struct two_engines {
    conv_fx fx, other_fx;
    MemraStatus other_status;
} two_engines;

static MemraStatus two_engines_step(MemraEngine *e, void *user)
{
    two_engines *t = user;
    t->other_status = conv_call(t->other_fx.e, &t->other_fx, 0);
    return conv_call(e, &t->fx, 1);
}

static void check_other_engine_refusal(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend), *other = tu_engine(backend);
    two_engines t;
    tu_failure f = {0};
    cr_assert(conv_fx_make(&t.fx, e, 11, &f) && conv_fx_make(&t.other_fx, other, 12, &f), "%s",
              f.text);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(e, two_engines_step, &t, &g));
    cr_assert_eq(t.other_status, MEMRA_STATUS_INVALID_ARGUMENT,
                 "the bad call on the other engine was not refused");
    TU_OK(memra_graph_launch(e, g));
    TU_OK(memra_graph_destroy(e, g));
    TU_OK(memra_engine_destroy(other));
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(handles, capture_unaffected_by_a_refusal_on_another_engine,
                 check_other_engine_refusal)

/* The step calls back into its engine on the capturing thread: queries, an allocation and its
 * free, and the operation; the graph then replays the operation exactly as an eager call. */
static MemraStatus calling_back_step(MemraEngine *e, void *user)
{
    conv_fx *fx = user;
    MemraBackend k;
    void *stream;
    MemraSliceMutF32 s;
    MemraStatus st = memra_engine_backend(e, &k);
    if (st == MEMRA_STATUS_OK)
        st = memra_engine_stream(e, &stream);
    if (st == MEMRA_STATUS_OK)
        st = memra_alloc_f32(e, 16, MEMRA_ALLOC_INIT_ZEROED, &s);
    if (st == MEMRA_STATUS_OK)
        st = memra_free(e, s.ptr);
    if (st == MEMRA_STATUS_OK)
        st = conv_call(e, fx, 1);
    return st;
}

static void check_step_calls_back(MemraBackend backend)
{
    uint64_t seed = tu_fresh_seed();
    MemraEngine *e = tu_engine(backend), *ref = tu_engine(backend);
    conv_fx fx, rfx;
    tu_failure f = {0};
    cr_assert(conv_fx_make(&fx, e, seed, &f) && conv_fx_make(&rfx, ref, seed, &f), "%s", f.text);
    MemraGraph *g = NULL;
    TU_OK(memra_graph_capture(e, calling_back_step, &fx, &g));
    TU_OK(memra_graph_launch(e, g));
    /* Two warm-ups and one replay: three rolls of the ring. */
    for (int i = 0; i < 3; i++)
        TU_OK(conv_call(ref, &rfx, 1));
    float got[RING], want[RING], got_out[C], want_out[C];
    tu_download_into(e, tu_view(fx.ring), got);
    tu_download_into(ref, tu_view(rfx.ring), want);
    tu_download_into(e, tu_view(fx.out), got_out);
    tu_download_into(ref, tu_view(rfx.out), want_out);
    cr_assert_eq(tu_bit_diffs(got, want, RING), 0,
                 "the ring after the replay differs from three eager calls (" TU_SEED_FMT ")",
                 seed);
    cr_assert_eq(tu_bit_diffs(got_out, want_out, C), 0,
                 "the output of the replay differs from the eager call's (" TU_SEED_FMT ")", seed);
    TU_OK(memra_graph_destroy(e, g));
    TU_OK(memra_engine_destroy(ref));
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(handles, step_calls_back_into_its_engine, check_step_calls_back)

/* ---- Overlapping calls from two threads ---- */

static void check_overlap(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    tu_failure f = {0};
    scenario_overlap(e, &f);
    cr_assert(!f.failed, "%s", f.text);
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(handles, overlapping_call_from_another_thread_refused, check_overlap)

static void check_hammer(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    tu_failure f = {0};
    unsigned long refused = 0;
    scenario_hammer(e, &f, &refused);
    cr_assert(!f.failed, "%s", f.text);
    TU_OK(memra_engine_destroy(e));
}

TU_TEST_BACKENDS(handles, two_threads_hammering_one_engine_refused_not_raced, check_hammer)

#else

/* ---- The driver `make tsan` runs (CPU backend) ---- */

/* Creates an engine; NULL (and no tu_failure) when CUDA is asked for and no device is usable. */
static MemraEngine *engine_on(MemraBackend backend, tu_failure *f)
{
    MemraEngineOptions o;
    MemraEngine *e = NULL;
    if (memra_engine_options_init(&o) != MEMRA_STATUS_OK) {
        tu_record(f, "memra_engine_options_init: %s", memra_last_error_message());
        return NULL;
    }
    o.backend = backend;
    o.flags = MEMRA_ENGINE_FLAG_IGNORE_ENV;
    MemraStatus st = memra_engine_create(&o, &e);
    if (st == MEMRA_STATUS_NO_DEVICE && backend == MEMRA_BACKEND_CUDA)
        return NULL;
    if (st != MEMRA_STATUS_OK) {
        tu_record(f, "memra_engine_create: %s", memra_last_error_message());
        return NULL;
    }
    return e;
}

int main(void)
{
    int failed = 0;
    for (int i = 0; i < 2; i++) {
        static const char *const name[] = {
            "overlapping_call_from_another_thread_refused_cpu",
            "two_threads_hammering_one_engine_refused_not_raced_cpu"};
        tu_failure f = {0};
        unsigned long refused = 0;
        MemraEngine *e = engine_on(MEMRA_BACKEND_CPU, &f);
        if (e != NULL) {
            if (i == 0)
                scenario_overlap(e, &f);
            else
                scenario_hammer(e, &f, &refused);
            if (memra_engine_destroy(e) != MEMRA_STATUS_OK)
                tu_record(&f, "memra_engine_destroy: %s", memra_last_error_message());
        }
        printf("handles/%s: %s%s", name[i], f.failed ? "FAIL: " : "PASS", f.failed ? f.text : "");
        if (i == 1 && !f.failed)
            printf(" (%lu calls refused as overlapping)", refused);
        printf("\n");
        failed += f.failed;
    }
    printf("handles: %d of 2 scenarios failed\n", failed);
    return failed ? 1 : 0;
}

#endif
