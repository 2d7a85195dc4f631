/*
 * Several engines in one process, and a verify split across them by heads.
 *
 * - Tensor-parallel head shards: the production shape's verify (num_k = 16, num_v = 32,
 *   d_conv = 4, t = 8, b_n = 2) is split into two shards of num_k = 8, num_v = 16 as a host
 *   would split it (docs/multi-gpu.md): every input (the q | k | v channels of qkv, the rows of
 *   the conv weights, the channels of the rings, the heads of beta_raw, alpha, dt_bias, a and of
 *   the states) is cut into the two shards' own layouts, each shard runs on its own engine, and
 *   the outputs (conv_outs, q_l2, k_l2, v_g, beta, g_log, o, the final ring, both state buffers
 *   and every snapshot) are gathered on the host into the unsharded layout. The gathered tensors
 *   must equal the unsharded run BIT FOR BIT: no arithmetic of the verify mixes two key heads,
 *   nor two value heads, so a shard computes exactly the words of its heads. This holds for the
 *   1.0 packed program (tiled order only) and for memra_gdn_verify in SNAPSHOTS mode in both
 *   head orders, on the CPU backend (two CPU engines) and on CUDA (engines on devices 0 and 1,
 *   or two engines on device 0 when only one device exists).
 * - Two devices (skipped with a message when fewer than two exist): two engines on devices 0
 *   and 1, each on its own stream, driven at once from two threads, eagerly and through graphs
 *   captured on each and replayed concurrently, must compute bit for bit what one device
 *   computes for the same work; a buffer or graph of one engine is refused by the other with
 *   INVALID_ARGUMENT and stays usable on its own engine.
 *
 * Devices are counted through the public ABI: a CUDA engine that cannot be created at an
 * ordinal (NO_DEVICE) means there is no usable device there. Worker threads never call
 * Criterion's assertions: they record the first failing call and the test thread asserts on it
 * after joining them.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memra.h"
#include "testutil.h"

/* The production shape and the verify every test runs. */
#define MD_NUM_K 16
#define MD_NUM_V 32
#define MD_D_CONV 4
#define MD_T 8
#define MD_B 2
/* Tensor-parallel degree of the shard tests. */
#define MD_PARTS 2

/* ---- Counting devices ---- */

/* How many CUDA devices, up to `upto`, an engine can be created on (ordinals 0, 1, ...). */
static int md_cuda_devices(int upto)
{
    int n = 0;
    for (; n < upto; n++) {
        MemraEngine *e = NULL;
        const MemraStatus st = tu_engine_try(MEMRA_BACKEND_CUDA, n, &e);
        if (st == MEMRA_STATUS_NO_DEVICE)
            break;
        cr_assert_eq(st, MEMRA_STATUS_OK, "memra_engine_create at ordinal %d: %s", n,
                     memra_last_error_message());
        TU_OK(memra_engine_destroy(e));
    }
    return n;
}

static void md_require_two_devices(void)
{
    const int n = md_cuda_devices(2);
    if (n < 2)
        cr_skip_test("needs two CUDA devices, %d usable (a CUDA engine at ordinal %d returns "
                     "NO_DEVICE)",
                     n, n);
}

/* ---- The shard layout ----
 *
 * Key heads are split into contiguous blocks in both orders: shard s holds global key heads
 * s * nk' .. s * nk' + nk' - 1 (nk' = num_k / parts), local key head j being global key head
 * s * nk' + j. Which value heads go with them depends on the head order, because each value
 * head must stay with the key head it reads, and inside the shard it must read that key head
 * under the same order with the shard's own num_k' = nk' and num_v' = num_v / parts.
 *
 * TILED (value head vh reads key head vh % num_k). Write vh = g * num_k + kh with
 * g = vh / num_k in 0 .. G - 1 (G = num_v / num_k) and kh = vh % num_k. The value heads that
 * read shard s's key heads are those with kh = s * nk' + j, j in 0 .. nk' - 1: for ornith
 * (num_k 16, nk' 8), shard 0 holds value heads 0..7 and 16..23, shard 1 holds 8..15 and 24..31.
 * Give global value head g * num_k + s * nk' + j the local position vh' = g * nk' + j: it reads
 * local key head vh' % nk' = j under the tiled order, which is global key head s * nk' + j =
 * vh % num_k, the key head it reads unsharded. As (g, j) runs over G x nk', vh' runs over
 * 0 .. num_v' - 1 once, so every shard is a complete tiled problem.
 *
 * GROUPED (value head vh reads key head vh / G). Write vh = kh * G + g. The value heads of
 * shard s's key heads are kh * G + g for kh in s * nk' .. s * nk' + nk' - 1: the contiguous
 * block s * num_v' .. s * num_v' + num_v' - 1. Local position vh' = vh - s * num_v' =
 * (kh - s * nk') * G + g = j * G + g reads local key head vh' / G = j under the grouped order
 * (G is the same in the shard: num_v' / nk' = num_v / num_k), global key head s * nk' + j = kh.
 */
typedef struct md_split {
    MemraHeadOrder order;
    size_t parts;
    tu_gdn_shape full, part;
} md_split;

static md_split md_split_make(MemraHeadOrder order, size_t parts)
{
    md_split m;
    m.order = order;
    m.parts = parts;
    m.full = tu_gdn_shape_make(MD_NUM_K, MD_NUM_V, MD_D_CONV);
    cr_assert(MD_NUM_K % parts == 0 && MD_NUM_V % parts == 0);
    m.part = tu_gdn_shape_make(MD_NUM_K / parts, MD_NUM_V / parts, MD_D_CONV);
    return m;
}

/* The global key head of shard s's local key head j. */
static size_t md_key_head(const md_split *m, size_t s, size_t j)
{
    return s * m->part.num_k + j;
}

/* The global value head of shard s's local value head vh' (derivation above). */
static size_t md_value_head(const md_split *m, size_t s, size_t local)
{
    const size_t nk = m->part.num_k;
    if (m->order == MEMRA_HEAD_ORDER_GROUPED)
        return s * m->part.num_v + local;
    return (local / nk) * m->full.num_k + s * nk + local % nk;
}

/* How a tensor's rows are built: conv channels q | k | v of `unit` words each (qkv, conv_outs,
 * w, rings, conv snapshots), or value-head blocks of `unit` words (everything else). */
enum md_kind { MD_CHANNELS, MD_VALUE_HEADS };

typedef struct md_layout {
    enum md_kind kind;
    size_t unit, rows;
} md_layout;

static md_layout md_layout_of(const tu_gdn_shape *sh, int tensor)
{
    const size_t S = MEMRA_D_STATE, rows = MD_B * MD_T, snaps = MD_B * (MD_T - 1);
    switch (tensor) {
    case TU_GDN_CONV_OUTS:
        return (md_layout){MD_CHANNELS, 1, rows};
    case TU_GDN_Q_L2:
    case TU_GDN_K_L2:
    case TU_GDN_V_G:
    case TU_GDN_O:
        return (md_layout){MD_VALUE_HEADS, S, rows};
    case TU_GDN_BETA:
    case TU_GDN_G_LOG:
        return (md_layout){MD_VALUE_HEADS, 1, rows};
    case TU_GDN_SNAP_CONV:
        return (md_layout){MD_CHANNELS, sh->pad, snaps};
    case TU_GDN_SNAP_SSM:
        return (md_layout){MD_VALUE_HEADS, S * S, snaps};
    case TU_GDN_RING:
        return (md_layout){MD_CHANNELS, sh->pad, MD_B};
    case TU_GDN_CANONICAL:
    case TU_GDN_ALTERNATE:
        return (md_layout){MD_VALUE_HEADS, S * S, MD_B};
    }
    cr_assert_fail("md_layout_of: unknown tensor %d", tensor);
    return (md_layout){MD_CHANNELS, 0, 0};
}

static void md_copy(float *full, float *part, size_t words, bool gather)
{
    if (gather)
        memcpy(full, part, words * sizeof *full);
    else
        memcpy(part, full, words * sizeof *part);
}

/*
 * Moves shard s's words of `l.rows` rows between the unsharded layout (`full`) and the shard's
 * (`part`): scatter (gather = false) fills `part` from `full`, gather fills shard s's words of
 * `full` from `part`. A channel row is q (key heads' blocks of S channels), k (the same), v
 * (value heads' blocks of S channels); a value-head row is num_v blocks.
 */
static void md_move(const md_split *m, size_t s, md_layout l, float *full, float *part, bool gather)
{
    const tu_gdn_shape *F = &m->full, *P = &m->part;
    const size_t blk = (l.kind == MD_CHANNELS ? MEMRA_D_STATE : 1) * l.unit;
    const size_t frow = (l.kind == MD_CHANNELS ? F->conv_dim : F->num_v) * l.unit;
    const size_t prow = (l.kind == MD_CHANNELS ? P->conv_dim : P->num_v) * l.unit;
    for (size_t r = 0; r < l.rows; r++) {
        float *f = full + r * frow, *p = part + r * prow;
        if (l.kind == MD_CHANNELS) {
            for (size_t seg = 0; seg < 2; seg++)
                for (size_t j = 0; j < P->num_k; j++)
                    md_copy(f + (seg * F->num_k + md_key_head(m, s, j)) * blk,
                            p + (seg * P->num_k + j) * blk, blk, gather);
            f += 2 * F->key_dim * l.unit;
            p += 2 * P->key_dim * l.unit;
        }
        for (size_t vh = 0; vh < P->num_v; vh++)
            md_copy(f + md_value_head(m, s, vh) * blk, p + vh * blk, blk, gather);
    }
}

/* Shard s's inputs, cut from the unsharded ones. */
static void md_shard_inputs(const md_split *m, size_t s, const tu_gdn_inputs *full,
                            tu_gdn_inputs *part)
{
    const size_t S = MEMRA_D_STATE, rows = MD_B * MD_T;
    tu_gdn_inputs_alloc(&m->part, MD_T, MD_B, part);
    const md_layout w = {MD_CHANNELS, MD_D_CONV, 1}, heads = {MD_VALUE_HEADS, 1, 1};
    const md_layout ring = {MD_CHANNELS, m->full.pad, MD_B};
    const md_layout state = {MD_VALUE_HEADS, S * S, MD_B};
    const md_layout qkv = {MD_CHANNELS, 1, rows}, per_head = {MD_VALUE_HEADS, 1, rows};
    md_move(m, s, w, full->w, part->w, false);
    md_move(m, s, heads, full->dt_bias, part->dt_bias, false);
    md_move(m, s, heads, full->a, part->a, false);
    md_move(m, s, ring, full->ring0, part->ring0, false);
    md_move(m, s, state, full->state0, part->state0, false);
    md_move(m, s, state, full->alt0, part->alt0, false);
    md_move(m, s, qkv, full->qkv, part->qkv, false);
    md_move(m, s, per_head, full->beta_raw, part->beta_raw, false);
    md_move(m, s, per_head, full->alpha, part->alpha, false);
}

/* Puts shard s's outputs where they belong in the unsharded layout. */
static void md_gather_outputs(const md_split *m, size_t s, const tu_gdn_outputs *part,
                              tu_gdn_outputs *full)
{
    for (int i = 0; i < TU_GDN_N_TENSORS; i++)
        md_move(m, s, md_layout_of(&m->full, i), full->t[i], part->t[i], true);
}

/* ---- One run of a bound verify ---- */

typedef MemraStatus (*md_step_fn)(MemraEngine *e, void *bound);

/* Binds `in` to `e`, runs `step` once, reads everything back into `out` (made here). */
static void md_run(MemraEngine *e, const tu_gdn_shape *sh, MemraHeadOrder order, md_step_fn step,
                   const tu_gdn_inputs *in, tu_gdn_outputs *out)
{
    tu_gdn_bound bd;
    tu_gdn_bind(e, sh, MD_T, MD_B, order, in, &bd);
    TU_OK(step(e, &bd));
    tu_gdn_outputs_make(sh, MD_T, MD_B, out);
    tu_gdn_collect(&bd, out);
    tu_gdn_unbind(&bd);
}

/* ---- Tensor-parallel shards ---- */

enum md_op { MD_PROGRAM, MD_VERIFY };

static void md_tensor_parallel(MemraBackend backend, enum md_op op, MemraHeadOrder order)
{
    cr_assert(op == MD_VERIFY || order == MEMRA_HEAD_ORDER_TILED,
              "the 1.0 operations know only the tiled head order");
    const uint64_t seed = tu_fresh_seed();
    const md_split m = md_split_make(order, MD_PARTS);
    const md_step_fn step = op == MD_PROGRAM ? tu_gdn_program_step : tu_gdn_verify_step;

    MemraEngine *engines[MD_PARTS];
    char where[160];
    engines[0] = tu_engine_at(backend, 0);
    if (backend == MEMRA_BACKEND_CUDA) {
        const int devices = md_cuda_devices(MD_PARTS);
        for (int s = 1; s < MD_PARTS; s++)
            engines[s] = tu_engine_at(backend, devices >= MD_PARTS ? s : 0);
        if (devices >= MD_PARTS) {
            snprintf(where, sizeof where, "CUDA, shard s on device s");
        } else {
            snprintf(where, sizeof where,
                     "CUDA, both shards on device 0 (two engines: %d usable device%s)", devices,
                     devices == 1 ? "" : "s");
            cr_log_info("%s", where);
        }
    } else {
        for (int s = 1; s < MD_PARTS; s++)
            engines[s] = tu_engine_at(backend, 0);
        snprintf(where, sizeof where, "CPU, one engine per shard");
    }

    tu_gdn_inputs full;
    tu_gdn_inputs_make(&m.full, MD_T, MD_B, seed, &full);
    tu_gdn_outputs ref, gathered;
    md_run(engines[0], &m.full, order, step, &full, &ref);
    cr_assert(tu_all_finite(ref.t[TU_GDN_O], ref.len[TU_GDN_O]),
              "the unsharded o is not finite (the inputs are out of range), " TU_SEED_FMT, seed);

    /* Poisoned: a word no shard writes back stays poison and fails the comparison. */
    tu_gdn_outputs_make(&m.full, MD_T, MD_B, &gathered);
    for (size_t s = 0; s < MD_PARTS; s++) {
        tu_gdn_inputs part_in;
        tu_gdn_outputs part_out;
        md_shard_inputs(&m, s, &full, &part_in);
        md_run(engines[s], &m.part, order, step, &part_in, &part_out);
        md_gather_outputs(&m, s, &part_out, &gathered);
        tu_gdn_outputs_free(&part_out);
        tu_gdn_inputs_free(&part_in);
    }

    char what[512];
    snprintf(what, sizeof what,
             "%s, %s order, %zu head shards of num_k=%zu num_v=%zu gathered against the "
             "unsharded num_k=%zu num_v=%zu (t=%d b_n=%d, %s), " TU_SEED_FMT,
             op == MD_PROGRAM ? "the 1.0 packed program" : "memra_gdn_verify SNAPSHOTS",
             order == MEMRA_HEAD_ORDER_GROUPED ? "GROUPED" : "TILED", m.parts, m.part.num_k,
             m.part.num_v, m.full.num_k, m.full.num_v, MD_T, MD_B, where, seed);
    tu_gdn_expect_outputs(&gathered, &ref, what);

    tu_gdn_outputs_free(&gathered);
    tu_gdn_outputs_free(&ref);
    tu_gdn_inputs_free(&full);
    for (int s = 0; s < MD_PARTS; s++)
        TU_OK(memra_engine_destroy(engines[s]));
}

/* The shard map must be a bijection onto the unsharded heads, and keep every value head with
 * the key head it reads. The tests below would also catch a wrong map, but only as differing
 * words; this says which head went wrong. */
static void md_check_map(MemraHeadOrder order)
{
    const md_split m = md_split_make(order, MD_PARTS);
    const size_t G = m.full.num_v / m.full.num_k;
    int seen[MD_NUM_V] = {0};
    for (size_t s = 0; s < m.parts; s++)
        for (size_t local = 0; local < m.part.num_v; local++) {
            const size_t vh = md_value_head(&m, s, local);
            cr_assert_lt(vh, m.full.num_v);
            seen[vh]++;
            const size_t kh_full = order == MEMRA_HEAD_ORDER_GROUPED ? vh / G : vh % m.full.num_k;
            const size_t kh_local =
                order == MEMRA_HEAD_ORDER_GROUPED ? local / G : local % m.part.num_k;
            cr_assert_eq(md_key_head(&m, s, kh_local), kh_full,
                         "shard %zu's value head %zu (global %zu) reads local key head %zu, "
                         "global %zu, not %zu",
                         s, local, vh, kh_local, md_key_head(&m, s, kh_local), kh_full);
        }
    for (size_t vh = 0; vh < m.full.num_v; vh++)
        cr_assert_eq(seen[vh], 1, "value head %zu is in %d shards", vh, seen[vh]);
}

Test(multi_device, shard_map_tiled)
{
    md_check_map(MEMRA_HEAD_ORDER_TILED);
}

Test(multi_device, shard_map_grouped)
{
    md_check_map(MEMRA_HEAD_ORDER_GROUPED);
}

static void md_tp_program_tiled(MemraBackend backend)
{
    md_tensor_parallel(backend, MD_PROGRAM, MEMRA_HEAD_ORDER_TILED);
}

static void md_tp_verify_tiled(MemraBackend backend)
{
    md_tensor_parallel(backend, MD_VERIFY, MEMRA_HEAD_ORDER_TILED);
}

static void md_tp_verify_grouped(MemraBackend backend)
{
    md_tensor_parallel(backend, MD_VERIFY, MEMRA_HEAD_ORDER_GROUPED);
}

TU_TEST_BACKENDS(multi_device, tp_program_tiled, md_tp_program_tiled)
TU_TEST_BACKENDS(multi_device, tp_verify_tiled, md_tp_verify_tiled)
TU_TEST_BACKENDS(multi_device, tp_verify_grouped, md_tp_verify_grouped)

/* ---- Two devices driven at once ---- */

/* One thread's work: the 1.0 program and the 1.1 verify on its engine, eagerly or by replaying
 * graphs captured from them, then a synchronisation. */
typedef struct md_worker {
    MemraEngine *e;
    pthread_barrier_t *gate;
    tu_gdn_bound *program, *verify;
    /* NULL: run the steps eagerly. */
    MemraGraph *program_graph, *verify_graph;
    /* The first failing call, if any. */
    MemraStatus st;
    const char *failed;
    char msg[512];
} md_worker;

static bool md_worker_call(md_worker *w, MemraStatus st, const char *what)
{
    if (st == MEMRA_STATUS_OK)
        return true;
    w->st = st;
    w->failed = what;
    snprintf(w->msg, sizeof w->msg, "%s", memra_last_error_message());
    return false;
}

static void *md_worker_main(void *arg)
{
    md_worker *w = arg;
    pthread_barrier_wait(w->gate);
    if (w->program_graph != NULL) {
        if (!md_worker_call(w, memra_graph_launch(w->e, w->program_graph),
                            "memra_graph_launch (the 1.0 program)") ||
            !md_worker_call(w, memra_graph_launch(w->e, w->verify_graph),
                            "memra_graph_launch (memra_gdn_verify)"))
            return NULL;
    } else {
        if (!md_worker_call(w, tu_gdn_program_step(w->e, w->program), "the 1.0 program") ||
            !md_worker_call(w, tu_gdn_verify_step(w->e, w->verify), "memra_gdn_verify"))
            return NULL;
    }
    md_worker_call(w, memra_engine_synchronize(w->e), "memra_engine_synchronize");
    return NULL;
}

/* The two engines' inputs and what device 0 alone computes for them. */
typedef struct md_pair {
    tu_gdn_shape sh;
    uint64_t seed;
    tu_gdn_inputs in[2];
    /* [engine][0: program, 1: verify] */
    tu_gdn_outputs ref[2][2];
} md_pair;

static void md_pair_make(md_pair *p)
{
    p->sh = tu_gdn_shape_make(MD_NUM_K, MD_NUM_V, MD_D_CONV);
    p->seed = tu_fresh_seed();
    MemraEngine *one = tu_engine_at(MEMRA_BACKEND_CUDA, 0);
    for (int d = 0; d < 2; d++) {
        tu_gdn_inputs_make(&p->sh, MD_T, MD_B, tu_mix_seed(p->seed, (uint64_t)d), &p->in[d]);
        md_run(one, &p->sh, MEMRA_HEAD_ORDER_TILED, tu_gdn_program_step, &p->in[d], &p->ref[d][0]);
        md_run(one, &p->sh, MEMRA_HEAD_ORDER_TILED, tu_gdn_verify_step, &p->in[d], &p->ref[d][1]);
    }
    TU_OK(memra_engine_destroy(one));
}

static void md_pair_free(md_pair *p)
{
    for (int d = 0; d < 2; d++) {
        tu_gdn_inputs_free(&p->in[d]);
        tu_gdn_outputs_free(&p->ref[d][0]);
        tu_gdn_outputs_free(&p->ref[d][1]);
    }
}

static void md_concurrent(bool graphs)
{
    md_require_two_devices();
    md_pair p;
    md_pair_make(&p);

    MemraEngine *e[2];
    tu_gdn_bound program[2], verify[2];
    MemraGraph *pg[2] = {NULL, NULL}, *vg[2] = {NULL, NULL};
    void *stream[2];
    for (int d = 0; d < 2; d++) {
        e[d] = tu_engine_at(MEMRA_BACKEND_CUDA, d);
        TU_OK(memra_engine_stream(e[d], &stream[d]));
        cr_assert_not_null(stream[d], "the engine on device %d has no stream", d);
        tu_gdn_bind(e[d], &p.sh, MD_T, MD_B, MEMRA_HEAD_ORDER_TILED, &p.in[d], &program[d]);
        tu_gdn_bind(e[d], &p.sh, MD_T, MD_B, MEMRA_HEAD_ORDER_TILED, &p.in[d], &verify[d]);
        if (graphs) {
            TU_OK(memra_graph_capture(e[d], tu_gdn_program_step, &program[d], &pg[d]));
            TU_OK(memra_graph_capture(e[d], tu_gdn_verify_step, &verify[d], &vg[d]));
            /* The capture's warm-ups ran the steps: start again from the inputs. */
            tu_gdn_rebind_inputs(&program[d], &p.in[d]);
            tu_gdn_rebind_inputs(&verify[d], &p.in[d]);
        }
        TU_OK(memra_engine_synchronize(e[d]));
    }
    cr_assert_neq(stream[0], stream[1], "the engines on devices 0 and 1 share a stream");

    pthread_barrier_t gate;
    cr_assert_eq(pthread_barrier_init(&gate, NULL, 2), 0);
    md_worker w[2];
    pthread_t th[2];
    for (int d = 0; d < 2; d++) {
        w[d] = (md_worker){.e = e[d],
                           .gate = &gate,
                           .program = &program[d],
                           .verify = &verify[d],
                           .program_graph = pg[d],
                           .verify_graph = vg[d],
                           .st = MEMRA_STATUS_OK};
        cr_assert_eq(pthread_create(&th[d], NULL, md_worker_main, &w[d]), 0);
    }
    for (int d = 0; d < 2; d++)
        cr_assert_eq(pthread_join(th[d], NULL), 0);
    pthread_barrier_destroy(&gate);

    for (int d = 0; d < 2; d++) {
        cr_assert_eq(w[d].st, MEMRA_STATUS_OK, "device %d: %s returned %s: %s", d, w[d].failed,
                     memra_status_string(w[d].st), w[d].msg);
        tu_gdn_bound *bound[2] = {&program[d], &verify[d]};
        for (int k = 0; k < 2; k++) {
            tu_gdn_outputs got;
            tu_gdn_outputs_make(&p.sh, MD_T, MD_B, &got);
            tu_gdn_collect(bound[k], &got);
            char what[256];
            snprintf(what, sizeof what,
                     "%s on device %d, %s concurrently with device %d, against device 0 "
                     "alone, " TU_SEED_FMT,
                     k == 0 ? "the 1.0 program" : "memra_gdn_verify", d,
                     graphs ? "graph-replayed" : "eager", 1 - d, p.seed);
            tu_gdn_expect_outputs(&got, &p.ref[d][k], what);
            tu_gdn_outputs_free(&got);
        }
        if (graphs) {
            TU_OK(memra_graph_destroy(e[d], pg[d]));
            TU_OK(memra_graph_destroy(e[d], vg[d]));
        }
        tu_gdn_unbind(&program[d]);
        tu_gdn_unbind(&verify[d]);
        TU_OK(memra_engine_destroy(e[d]));
    }
    md_pair_free(&p);
}

Test(multi_device, concurrent_eager_cuda)
{
    md_concurrent(false);
}

Test(multi_device, concurrent_graphs_cuda)
{
    md_concurrent(true);
}

/* ---- Handles of one engine given to the other ---- */

static void md_expect_refused(MemraStatus st, const char *fn, const char *param, int owner,
                              int other)
{
    cr_assert_eq(st, MEMRA_STATUS_INVALID_ARGUMENT,
                 "%s on the engine of device %d with a handle of device %d's engine returned %s, "
                 "not INVALID_ARGUMENT",
                 fn, other, owner, memra_status_string(st));
    const char *msg = memra_last_error_message();
    cr_assert(tu_has_word(msg, fn) && tu_has_word(msg, param),
              "%s refused a handle of another engine without naming itself and '%s': \"%s\"", fn,
              param, msg);
}

Test(multi_device, foreign_handles_cuda)
{
    md_require_two_devices();
    const uint64_t seed = tu_fresh_seed();
    const tu_gdn_shape sh = tu_gdn_shape_make(2, 4, MD_D_CONV);
    tu_gdn_inputs in;
    tu_gdn_inputs_make(&sh, MD_T, MD_B, seed, &in);
    MemraEngine *e[2] = {tu_engine_at(MEMRA_BACKEND_CUDA, 0), tu_engine_at(MEMRA_BACKEND_CUDA, 1)};
    tu_gdn_bound bd[2];
    MemraGraph *g[2];
    MemraSliceMutF32 buf[2];
    tu_gdn_outputs before[2];
    for (int d = 0; d < 2; d++) {
        tu_gdn_bind(e[d], &sh, MD_T, MD_B, MEMRA_HEAD_ORDER_TILED, &in, &bd[d]);
        TU_OK(memra_graph_capture(e[d], tu_gdn_verify_step, &bd[d], &g[d]));
        buf[d] = tu_poisoned(e[d], 64);
        tu_gdn_outputs_make(&sh, MD_T, MD_B, &before[d]);
        tu_gdn_collect(&bd[d], &before[d]);
    }

    for (int d = 0; d < 2; d++) {
        const int other = 1 - d;
        md_expect_refused(memra_free(e[other], buf[d].ptr), "memra_free", "ptr", d, other);
        md_expect_refused(memra_graph_launch(e[other], g[d]), "memra_graph_launch", "graph", d,
                          other);
        md_expect_refused(memra_graph_destroy(e[other], g[d]), "memra_graph_destroy", "graph", d,
                          other);
    }
    for (int d = 0; d < 2; d++) {
        /* The refused launches ran nothing: every buffer the graphs write is as it was. */
        tu_gdn_outputs after;
        tu_gdn_outputs_make(&sh, MD_T, MD_B, &after);
        tu_gdn_collect(&bd[d], &after);
        char what[160];
        snprintf(
            what, sizeof what,
            "device %d's verify buffers after the other engine refused its graph, " TU_SEED_FMT, d,
            seed);
        tu_gdn_expect_outputs(&after, &before[d], what);
        tu_gdn_outputs_free(&after);
        tu_gdn_outputs_free(&before[d]);
        float *host = tu_download(e[d], buf[d]);
        tu_expect_poison(host, buf[d].len, "device %d's buffer after the other engine refused it",
                         d);
        free(host);

        /* Still live on their own engine. */
        TU_OK(memra_graph_launch(e[d], g[d]));
        TU_OK(memra_engine_synchronize(e[d]));
        TU_OK(memra_graph_destroy(e[d], g[d]));
        TU_OK(memra_free(e[d], buf[d].ptr));
    }
    for (int d = 0; d < 2; d++) {
        tu_gdn_unbind(&bd[d]);
        TU_OK(memra_engine_destroy(e[d]));
    }
    tu_gdn_inputs_free(&in);
}
