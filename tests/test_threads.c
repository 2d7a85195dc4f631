/*
 * Threads: the header's threading model, exercised.
 *
 * - Different engines are driven concurrently from different threads: each thread runs the
 *   packed verify chain (conv, prep, scan) eagerly and through a captured graph on its own
 *   engine with its own inputs, over and over, and every result must be bit-identical to the
 *   same work done alone beforehand. A race inside the library (shared state, a message or a
 *   graph under capture leaking between engines) shows up as a wrong bit here or as a report
 *   under `make tsan`.
 * - memra_last_error_message() is per thread: threads fail at the same moment with messages only
 *   they can produce, and each must read back its own, also through the pointer it got before
 *   the others failed.
 * - The global functions may be called from any thread at any time.
 * - An engine may move between threads as long as one thread at a time uses it.
 *
 * Worker threads never call Criterion's assertions (they may only abort the test from the test's
 * own thread): they record the first thing that went wrong and the test thread asserts on it
 * after joining them.
 *
 * The scenarios use the public ABI and libc only, because `make tsan` also builds this file
 * without Criterion (-DMEMRA_THREADS_STANDALONE, with a main() at the end): Criterion's runner
 * maps its shared arena at addresses that ThreadSanitizer reserves for itself, so a Criterion
 * binary cannot start under TSan at all.
 */
#ifndef MEMRA_THREADS_STANDALONE
#include <criterion/criterion.h>

#include "testutil.h"
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

#define N_THREADS 4
#define ITERATIONS 3

/* The small shape (docs/layouts.md), one sequence of three rows. */
#define NV TU_SMALL_NUM_V
#define T ((size_t)3)
#define CONV TU_SMALL_CONV_DIM
#define VAL TU_SMALL_VALUE_DIM
#define STATE TU_SMALL_STATE

/* ---- One sequence's inputs and the results of the packed verify chain ---- */

enum { IN_QKV, IN_W, IN_DT_BIAS, IN_A, IN_BETA_RAW, IN_ALPHA, IN_RING, IN_STATE, N_IN };
static const size_t in_len[N_IN] = {T * CONV, CONV *TU_D_CONV, NV,   NV, T *NV,
                                    T *NV,    TU_SMALL_RING,   STATE};

/* What the chain leaves behind: every output, the final ring and the final state (the
 * alternate buffer, T being odd), and both snapshot arrays. */
enum {
    OUT_CONV,
    OUT_Q,
    OUT_K,
    OUT_V,
    OUT_BETA,
    OUT_G,
    OUT_O,
    OUT_SNAP_CONV,
    OUT_SNAP_SSM,
    OUT_RING,
    OUT_STATE,
    N_OUT
};
static const size_t out_len[N_OUT] = {
    T * CONV,        T *VAL,        T *VAL, T *VAL, T *NV, T *NV, T *VAL, (T - 1) * TU_SMALL_RING,
    (T - 1) * STATE, TU_SMALL_RING, STATE};

typedef struct host_data {
    float *in[N_IN];
    float *out[N_OUT];
} host_data;

static bool host_alloc(host_data *h, uint64_t seed)
{
    bool ok = true;
    memset(h, 0, sizeof *h);
    for (int i = 0; i < N_IN; i++) {
        h->in[i] = malloc(in_len[i] * sizeof(float));
        ok &= h->in[i] != NULL;
        /* Spreads as in the seed: states small, gates wide. */
        float spread = i == IN_STATE ? 0.3f : i == IN_BETA_RAW || i == IN_ALPHA ? 2.0f : 1.0f;
        if (h->in[i] != NULL)
            tu_varied(h->in[i], in_len[i], seed + 977 * (uint64_t)(i + 1), spread);
    }
    for (int i = 0; i < N_OUT; i++) {
        h->out[i] = malloc(out_len[i] * sizeof(float));
        ok &= h->out[i] != NULL;
    }
    return ok;
}

static void host_free(host_data *h)
{
    for (int i = 0; i < N_IN; i++)
        free(h->in[i]);
    for (int i = 0; i < N_OUT; i++)
        free(h->out[i]);
}

/* Errors inside worker threads: the first one is kept (tu_record), with the thread's view of
 * the library's message. */
#define CHECK(f, call)                                                                             \
    do {                                                                                           \
        MemraStatus st_ = (call);                                                                  \
        if (st_ != MEMRA_STATUS_OK) {                                                              \
            tu_record((f), "%s returned %s: %s", #call, memra_status_string(st_),                  \
                      memra_last_error_message());                                                 \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* The device side of one chain. */
typedef struct chain {
    MemraEngine *e;
    MemraSliceMutF32 in[N_IN];
    MemraSliceMutF32 out[N_OUT - 2];
    MemraSliceMutF32 alt;
    MemraSliceMutU64 table;
} chain;

static MemraStatus chain_step(MemraEngine *e, void *user)
{
    chain *c = user;
    MemraStatus st = memra_ssm_conv1d_fused_decode_tloop(
        e, tu_view(c->in[IN_QKV]), tu_view_u64(c->table), tu_view(c->in[IN_W]), c->out[OUT_CONV],
        c->out[OUT_SNAP_CONV], CONV, TU_D_CONV, T, 1);
    if (st != MEMRA_STATUS_OK)
        return st;
    st = memra_gdn_prep_decode_b(e, tu_view(c->out[OUT_CONV]), tu_view(c->in[IN_BETA_RAW]),
                                 tu_view(c->in[IN_ALPHA]), tu_view(c->in[IN_DT_BIAS]),
                                 tu_view(c->in[IN_A]), c->out[OUT_Q], c->out[OUT_K], c->out[OUT_V],
                                 c->out[OUT_BETA], c->out[OUT_G], MEMRA_D_STATE, NV, TU_SMALL_NUM_K,
                                 TU_KEY_DIM(TU_SMALL_NUM_K), 1e-6f, CONV, T);
    if (st != MEMRA_STATUS_OK)
        return st;
    return memra_gdn_scan_s128_tsnap(
        e, tu_view(c->out[OUT_Q]), tu_view(c->out[OUT_K]), tu_view(c->out[OUT_V]),
        tu_view(c->out[OUT_G]), tu_view(c->out[OUT_BETA]), tu_view_u64(c->table), c->out[OUT_O], NV,
        T, 1, 0.08838834764831845f, c->out[OUT_SNAP_SSM]);
}

/* Uploads `h`'s inputs, runs the chain once (eagerly, or as a graph replay after putting the
 * ring and state back to what the warm-up calls of the capture changed), reads every result
 * into h->out and frees everything. Thread-safe for distinct engines. */
static bool run_chain(MemraEngine *e, host_data *h, bool graph, tu_failure *f)
{
    chain c = {.e = e};
    MemraGraph *g = NULL;
    bool ok = false;
    for (int i = 0; i < N_IN; i++) {
        MemraSliceF32 src = {h->in[i], in_len[i]};
        CHECK(f, memra_htod_f32(e, src, &c.in[i]));
    }
    for (int i = 0; i < N_OUT - 2; i++)
        CHECK(f, memra_alloc_f32(e, out_len[i], MEMRA_ALLOC_INIT_UNINIT, &c.out[i]));
    CHECK(f, memra_alloc_f32(e, STATE, MEMRA_ALLOC_INIT_ZEROED, &c.alt));
    uint64_t tab[3] = {(uint64_t)(uintptr_t)c.in[IN_RING].ptr,
                       (uint64_t)(uintptr_t)c.in[IN_STATE].ptr, (uint64_t)(uintptr_t)c.alt.ptr};
    MemraSliceU64 tsrc = {tab, 3};
    CHECK(f, memra_htod_u64(e, tsrc, &c.table));

    if (!graph) {
        CHECK(f, chain_step(e, &c));
    } else {
        CHECK(f, memra_graph_capture(e, chain_step, &c, &g));
        MemraSliceF32 ring = {h->in[IN_RING], in_len[IN_RING]};
        MemraSliceF32 state = {h->in[IN_STATE], in_len[IN_STATE]};
        CHECK(f, memra_htod_f32_into(e, ring, c.in[IN_RING]));
        CHECK(f, memra_htod_f32_into(e, state, c.in[IN_STATE]));
        CHECK(f, memra_graph_launch(e, g));
    }
    for (int i = 0; i < N_OUT - 2; i++) {
        MemraSliceMutF32 dst = {h->out[i], out_len[i]};
        CHECK(f, memra_dtoh_f32(e, tu_view(c.out[i]), dst));
    }
    MemraSliceMutF32 ring_out = {h->out[OUT_RING], out_len[OUT_RING]};
    MemraSliceMutF32 state_out = {h->out[OUT_STATE], out_len[OUT_STATE]};
    CHECK(f, memra_dtoh_f32(e, tu_view(c.in[IN_RING]), ring_out));
    /* T is odd: the final state is in the alternate buffer. */
    CHECK(f, memra_dtoh_f32(e, tu_view(c.alt), state_out));
    ok = true;
out:
    if (g != NULL && memra_graph_destroy(e, g) != MEMRA_STATUS_OK)
        tu_record(f, "memra_graph_destroy: %s", memra_last_error_message()), ok = false;
    for (int i = 0; i < N_IN; i++)
        if (memra_free(e, c.in[i].ptr) != MEMRA_STATUS_OK)
            tu_record(f, "memra_free: %s", memra_last_error_message()), ok = false;
    for (int i = 0; i < N_OUT - 2; i++)
        if (memra_free(e, c.out[i].ptr) != MEMRA_STATUS_OK)
            tu_record(f, "memra_free: %s", memra_last_error_message()), ok = false;
    if (memra_free(e, c.alt.ptr) != MEMRA_STATUS_OK ||
        memra_free(e, c.table.ptr) != MEMRA_STATUS_OK)
        tu_record(f, "memra_free: %s", memra_last_error_message()), ok = false;
    return ok;
}

static const char *const out_name[N_OUT] = {"conv_outs", "q_l2",  "k_l2",       "v_g",
                                            "beta",      "g_log", "o_all",      "snap_conv",
                                            "snap_ssm",  "ring",  "final state"};

static bool same_results(const host_data *got, const host_data *want, const char *what,
                         tu_failure *f)
{
    for (int i = 0; i < N_OUT; i++) {
        size_t d = 0;
        for (size_t k = 0; k < out_len[i]; k++)
            d += memcmp(&got->out[i][k], &want->out[i][k], sizeof(float)) != 0;
        if (d != 0) {
            tu_record(f, "%s: %zu of %zu words of %s differ from the single-threaded run", what, d,
                      out_len[i], out_name[i]);
            return false;
        }
    }
    return true;
}

static MemraEngine *engine_or_null(MemraBackend backend, tu_failure *f)
{
    MemraEngine *e = NULL;
    if (tu_engine_try(backend, 0, &e) != MEMRA_STATUS_OK) {
        tu_record(f, "memra_engine_create: %s", memra_last_error_message());
        return NULL;
    }
    return e;
}

/* ---- Concurrent engines ---- */

typedef struct worker {
    int id;
    MemraBackend backend;
    host_data mine;
    host_data want;
    pthread_barrier_t *barrier;
    tu_failure f;
} worker;

/* A tu_failure only thread `id` can produce: a negative device ordinal naming the thread. */
static MemraStatus thread_failure(int id)
{
    MemraEngineOptions o;
    MemraEngine *e = NULL;
    memra_engine_options_init(&o);
    o.backend = MEMRA_BACKEND_CPU;
    o.device_ordinal = -(1000 + id);
    return memra_engine_create(&o, &e);
}

static bool message_is_mine(const char *msg, int id)
{
    char tag[32];
    snprintf(tag, sizeof tag, "got %d", -(1000 + id));
    return strstr(msg, "memra_engine_create") != NULL && strstr(msg, tag) != NULL;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    MemraEngine *e = engine_or_null(w->backend, &w->f);
    for (int it = 0; it < ITERATIONS; it++) {
        /* Every thread reaches every barrier, failed or not, so nobody waits forever. */
        pthread_barrier_wait(w->barrier);
        if (e != NULL && !w->f.failed && run_chain(e, &w->mine, false, &w->f))
            same_results(&w->mine, &w->want, "eager", &w->f);
        if (e != NULL && !w->f.failed && run_chain(e, &w->mine, true, &w->f))
            same_results(&w->mine, &w->want, "graph replay", &w->f);

        pthread_barrier_wait(w->barrier);
        if (thread_failure(w->id) != MEMRA_STATUS_INVALID_ARGUMENT)
            tu_record(&w->f, "thread %d: the bad device ordinal was not refused", w->id);
        const char *held = memra_last_error_message();
        /* Everybody fails at once; then each reads its message, through the pointer it got
         * before the others failed too. */
        pthread_barrier_wait(w->barrier);
        if (!message_is_mine(memra_last_error_message(), w->id) || !message_is_mine(held, w->id))
            tu_record(&w->f, "thread %d reads another thread's message: \"%s\"", w->id,
                      memra_last_error_message());
    }
    if (e != NULL && memra_engine_destroy(e) != MEMRA_STATUS_OK)
        tu_record(&w->f, "memra_engine_destroy: %s", memra_last_error_message());
    return NULL;
}

/* N_THREADS engines at once, each checked against the same work done alone beforehand. */
static void scenario_own_engines(MemraBackend backend, uint64_t seed, tu_failure *f)
{
    worker w[N_THREADS];
    pthread_t th[N_THREADS];
    int started = 0;
    pthread_barrier_t barrier;
    MemraEngine *ref = engine_or_null(backend, f);
    if (ref == NULL)
        return;
    if (pthread_barrier_init(&barrier, NULL, N_THREADS) != 0) {
        tu_record(f, "pthread_barrier_init failed");
        (void)memra_engine_destroy(ref);
        return;
    }
    for (int i = 0; i < N_THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].backend = backend;
        w[i].barrier = &barrier;
        if (!host_alloc(&w[i].mine, seed + (uint64_t)i) ||
            !host_alloc(&w[i].want, seed + (uint64_t)i))
            tu_record(f, "out of host memory");
        else if (!f->failed)
            run_chain(ref, &w[i].want, false, f);
    }
    if (memra_engine_destroy(ref) != MEMRA_STATUS_OK)
        tu_record(f, "memra_engine_destroy: %s", memra_last_error_message());
    /* All threads or none: a missing one would leave the others waiting at the barrier. */
    if (!f->failed) {
        for (started = 0; started < N_THREADS; started++)
            if (pthread_create(&th[started], NULL, worker_main, &w[started]) != 0)
                break;
        if (started < N_THREADS) {
            tu_record(f, "pthread_create failed; the started threads cannot finish");
            abort();
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < N_THREADS; i++) {
        if (w[i].f.failed)
            tu_record(f, "thread %d: %s", i, w[i].f.text);
        host_free(&w[i].mine);
        host_free(&w[i].want);
    }
}

/* ---- The last error message ---- */

typedef struct messenger {
    int id;
    pthread_barrier_t *barrier;
    tu_failure f;
} messenger;

static void *messenger_main(void *arg)
{
    messenger *m = arg;
    /* A thread that has not failed yet has an empty message, whatever the others did. */
    pthread_barrier_wait(m->barrier);
    if (strcmp(memra_last_error_message(), "") != 0)
        tu_record(&m->f, "thread %d starts with the message \"%s\"", m->id,
                  memra_last_error_message());
    pthread_barrier_wait(m->barrier);
    for (int round = 0; round < 200; round++) {
        if (thread_failure(m->id) != MEMRA_STATUS_INVALID_ARGUMENT)
            tu_record(&m->f, "thread %d: the bad device ordinal was not refused", m->id);
        const char *held = memra_last_error_message();
        /* Successful calls leave the message alone. */
        MemraEngineOptions o;
        if (memra_engine_options_init(&o) != MEMRA_STATUS_OK || memra_abi_version() == 0)
            tu_record(&m->f, "a successful call failed");
        if (!message_is_mine(memra_last_error_message(), m->id) || !message_is_mine(held, m->id))
            tu_record(&m->f, "thread %d, round %d, reads \"%s\"", m->id, round,
                      memra_last_error_message());
    }
    return NULL;
}

static void scenario_messages(tu_failure *f)
{
    messenger m[N_THREADS];
    pthread_t th[N_THREADS];
    pthread_barrier_t barrier;
    /* The calling thread fails first, so that a shared message would not be empty. */
    if (memra_engine_options_init(NULL) != MEMRA_STATUS_INVALID_ARGUMENT)
        tu_record(f, "memra_engine_options_init(NULL) was not refused");
    if (pthread_barrier_init(&barrier, NULL, N_THREADS + 1) != 0) {
        tu_record(f, "pthread_barrier_init failed");
        return;
    }
    for (int i = 0; i < N_THREADS; i++) {
        m[i] = (messenger){.id = i, .barrier = &barrier};
        if (pthread_create(&th[i], NULL, messenger_main, &m[i]) != 0) {
            tu_record(f, "pthread_create failed; the started threads cannot finish");
            abort();
        }
    }
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < N_THREADS; i++)
        if (m[i].f.failed)
            tu_record(f, "%s", m[i].f.text);
    if (strstr(memra_last_error_message(), "memra_engine_options_init") == NULL)
        tu_record(f, "the calling thread's message changed to \"%s\"", memra_last_error_message());
}

/* ---- The functions any thread may call at any time ---- */

static void *caller_main(void *arg)
{
    tu_failure *f = arg;
    static const char *const names[] = {"MEMRA_STATUS_OK",
                                        "MEMRA_STATUS_INVALID_ARGUMENT",
                                        "MEMRA_STATUS_UNSUPPORTED",
                                        "MEMRA_STATUS_OUT_OF_MEMORY",
                                        "MEMRA_STATUS_NO_DEVICE",
                                        "MEMRA_STATUS_DEVICE_ERROR",
                                        "MEMRA_STATUS_CAPTURE_ERROR",
                                        "MEMRA_STATUS_ABI_MISMATCH",
                                        "MEMRA_STATUS_INTERNAL"};
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", MEMRA_VERSION_MAJOR, MEMRA_VERSION_MINOR,
             MEMRA_VERSION_PATCH);
    for (int round = 0; round < 2000; round++) {
        if (memra_abi_version() != MEMRA_ABI_VERSION)
            tu_record(f, "memra_abi_version() = 0x%x", memra_abi_version());
        if (strcmp(memra_version_string(), version) != 0)
            tu_record(f, "memra_version_string() = \"%s\"", memra_version_string());
        for (MemraStatus s = 0; s < 9; s++)
            if (strcmp(memra_status_string(s), names[s]) != 0)
                tu_record(f, "memra_status_string(%u) = \"%s\"", (unsigned)s,
                          memra_status_string(s));
        if (strcmp(memra_status_string(1000), "MEMRA_STATUS_<unknown>") != 0)
            tu_record(f, "memra_status_string(1000) = \"%s\"", memra_status_string(1000));
        MemraEngineOptions o;
        memset(&o, 0xff, sizeof o);
        if (memra_engine_options_init(&o) != MEMRA_STATUS_OK || o.struct_size != sizeof o ||
            o.backend != MEMRA_BACKEND_AUTO || o.device_ordinal != 0 || o.stream != NULL ||
            o.flags != 0)
            tu_record(f, "memra_engine_options_init filled something else");
        if (memra_last_error_message() == NULL)
            tu_record(f, "memra_last_error_message() returned NULL");
    }
    return NULL;
}

static void scenario_globals(tu_failure *f)
{
    tu_failure c[N_THREADS];
    pthread_t th[N_THREADS];
    int started = 0;
    memset(c, 0, sizeof c);
    for (; started < N_THREADS; started++)
        if (pthread_create(&th[started], NULL, caller_main, &c[started]) != 0)
            break;
    if (started < N_THREADS)
        tu_record(f, "pthread_create failed");
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < started; i++)
        if (c[i].failed)
            tu_record(f, "%s", c[i].text);
}

/* ---- One engine, three threads, one after the other ---- */

typedef struct relay {
    MemraBackend backend;
    MemraEngine *e;
    host_data *h;
    host_data *want;
    tu_failure f;
} relay;

static void *relay_create(void *arg)
{
    relay *r = arg;
    r->e = engine_or_null(r->backend, &r->f);
    return NULL;
}

static void *relay_use(void *arg)
{
    relay *r = arg;
    if (run_chain(r->e, r->h, false, &r->f))
        same_results(r->h, r->want, "eager on a second thread", &r->f);
    if (!r->f.failed && run_chain(r->e, r->h, true, &r->f))
        same_results(r->h, r->want, "graph replay on a second thread", &r->f);
    return NULL;
}

static void *relay_destroy(void *arg)
{
    relay *r = arg;
    if (memra_engine_destroy(r->e) != MEMRA_STATUS_OK)
        tu_record(&r->f, "memra_engine_destroy on a third thread: %s", memra_last_error_message());
    return NULL;
}

static void scenario_relay(MemraBackend backend, uint64_t seed, tu_failure *f)
{
    host_data h, want;
    MemraEngine *ref = engine_or_null(backend, f);
    if (ref == NULL)
        return;
    if (!host_alloc(&h, seed) || !host_alloc(&want, seed))
        tu_record(f, "out of host memory");
    else
        run_chain(ref, &want, false, f);
    if (memra_engine_destroy(ref) != MEMRA_STATUS_OK)
        tu_record(f, "memra_engine_destroy: %s", memra_last_error_message());

    relay r = {.backend = backend, .h = &h, .want = &want};
    void *(*stage[])(void *) = {relay_create, relay_use, relay_destroy};
    for (size_t i = 0; i < sizeof stage / sizeof stage[0] && !f->failed; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, stage[i], &r) != 0) {
            tu_record(f, "pthread_create failed");
            break;
        }
        pthread_join(th, NULL);
        if (r.f.failed)
            tu_record(f, "stage %zu: %s", i, r.f.text);
        if (r.e == NULL)
            break;
    }
    host_free(&h);
    host_free(&want);
}

#ifndef MEMRA_THREADS_STANDALONE

/* ---- The Criterion tests ---- */

/* Skips the test where the backend is unusable (CUDA without a device). */
static void require_backend(MemraBackend backend)
{
    MemraEngine *e = tu_engine(backend);
    TU_OK(memra_engine_destroy(e));
}

/* Runs a scenario on fresh random inputs (on CUDA only where a device is usable) and fails the
 * test with the scenario's first failure and the seed that replays it. */
static void run_seeded(void (*scenario)(MemraBackend, uint64_t, tu_failure *), MemraBackend backend)
{
    if (backend == MEMRA_BACKEND_CUDA)
        require_backend(backend);
    uint64_t seed = tu_fresh_seed();
    tu_failure f = {0};
    scenario(backend, seed, &f);
    cr_assert(!f.failed, "%s " TU_SEED_FMT, f.text, seed);
}

Test(threads, own_engines_concurrently_cpu)
{
    run_seeded(scenario_own_engines, MEMRA_BACKEND_CPU);
}

Test(threads, own_engines_concurrently_cuda)
{
    run_seeded(scenario_own_engines, MEMRA_BACKEND_CUDA);
}

Test(threads, last_error_message_is_per_thread)
{
    tu_failure f = {0};
    scenario_messages(&f);
    cr_assert(!f.failed, "%s", f.text);
}

Test(threads, global_functions_from_many_threads)
{
    tu_failure f = {0};
    scenario_globals(&f);
    cr_assert(!f.failed, "%s", f.text);
}

Test(threads, engine_handed_between_threads_cpu)
{
    run_seeded(scenario_relay, MEMRA_BACKEND_CPU);
}

Test(threads, engine_handed_between_threads_cuda)
{
    run_seeded(scenario_relay, MEMRA_BACKEND_CUDA);
}

#else

/* ---- The driver `make tsan` runs (CPU backend) ---- */

#include <time.h>

int main(void)
{
    const char *env = getenv("MEMRA_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        static const char *const name[] = {
            "own_engines_concurrently_cpu", "last_error_message_is_per_thread",
            "global_functions_from_many_threads", "engine_handed_between_threads_cpu"};
        tu_failure f = {0};
        if (i == 0)
            scenario_own_engines(MEMRA_BACKEND_CPU, seed, &f);
        else if (i == 1)
            scenario_messages(&f);
        else if (i == 2)
            scenario_globals(&f);
        else
            scenario_relay(MEMRA_BACKEND_CPU, seed, &f);
        printf("threads/%s: %s%s\n", name[i], f.failed ? "FAIL: " : "PASS", f.failed ? f.text : "");
        failed += f.failed;
    }
    printf("threads: %d of 4 scenarios failed (MEMRA_TEST_SEED=0x%016llx)\n", failed,
           (unsigned long long)seed);
    return failed ? 1 : 0;
}

#endif
