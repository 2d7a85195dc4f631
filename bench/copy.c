/*
 * --mode copy: the 1.2 batched state copy (memra_copy_batch_uniform_f32) in the configuration
 * of a speculative verify's partial-accept restore: every linear layer's SSM state and conv
 * ring, for B sequences, copied from the checkpoint slabs back into the live buffers. The model
 * is the ornith shape (num_k 16, num_v 32: a 2 MiB state and a 96 KiB ring) with 36 linear
 * layers, as in a 48-layer hybrid of three linear layers to one attention layer, at B = 8: 288
 * states and 288 rings, about 603 MiB.
 *
 * Timed, eager and graph-replayed: the batched form (two calls, one table of 288 states and
 * one of 288 rings) and one copy per state and per ring (576 calls of the same entry point
 * with n = 1, what a host that copies layer by layer launches). Both are set against the floor
 * of their bytes (read + write) at the copy bandwidth the run measured first. Before any time,
 * the batched copy runs on poisoned destinations and the first, a middle and the last state
 * and ring are compared with their sources bit for bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support/support.h"

#define CP_LAYERS ((size_t)36)
#define CP_B ((size_t)8)
#define CP_ITEMS (CP_LAYERS * CP_B)
#define CP_NUM_K ((size_t)16)
#define CP_NUM_V ((size_t)32)
#define CP_D_CONV ((size_t)4)

/* The two tensors of a restore. */
enum { CP_STATE, CP_RING, CP_TENSORS };
static const char *const cp_name[CP_TENSORS] = {"state", "ring"};

typedef struct copy_rig {
    MemraEngine *e;
    size_t words[CP_TENSORS];
    MemraSliceMutF32 src[CP_TENSORS], dst[CP_TENSORS];
    /* [src x n, dst x n] for the batched calls; [src, dst] pairs for the separate ones. */
    MemraSliceMutU64 batch[CP_TENSORS], pairs[CP_TENSORS];
    MemraGraph *graph[2];
} copy_rig;

enum { CP_BATCHED, CP_SEPARATE, CP_FORMS };
static const char *const form_name[CP_FORMS] = {"batched (2 calls)", "separate (576 calls)"};

static MemraStatus run_form(copy_rig *r, int form)
{
    MemraStatus st = MEMRA_STATUS_OK;
    for (int k = 0; k < CP_TENSORS && st == MEMRA_STATUS_OK; k++) {
        if (form == CP_BATCHED) {
            MemraSliceU64 t = {r->batch[k].ptr, r->batch[k].len};
            st = memra_copy_batch_uniform_f32(r->e, t, CP_ITEMS, r->words[k]);
        }
        for (size_t i = 0; form == CP_SEPARATE && i < CP_ITEMS && st == MEMRA_STATUS_OK; i++) {
            MemraSliceU64 t = {r->pairs[k].ptr + 2 * i, 2};
            st = memra_copy_batch_uniform_f32(r->e, t, 1, r->words[k]);
        }
    }
    return st;
}

static MemraStatus step_batched(MemraEngine *e, void *user)
{
    return run_form(user, CP_BATCHED);
}

static MemraStatus step_separate(MemraEngine *e, void *user)
{
    return run_form(user, CP_SEPARATE);
}

/* One timed rep: `user` is the rig, the rep number picks nothing (the copy is the same). */
typedef struct cp_rep {
    copy_rig *r;
    int form;
    bool graph;
} cp_rep;

static int one_copy(void *user, size_t rep)
{
    const cp_rep *x = user;
    MemraStatus st =
        x->graph ? memra_graph_launch(x->r->e, x->r->graph[x->form]) : run_form(x->r, x->form);
    return st == MEMRA_STATUS_OK ? 0 : bench_fail_status(form_name[x->form], st);
}

static int make_tables(copy_rig *r)
{
    for (int k = 0; k < CP_TENSORS; k++) {
        uint64_t *b = malloc(2 * CP_ITEMS * sizeof *b), *p = malloc(2 * CP_ITEMS * sizeof *p);
        MemraStatus st = MEMRA_STATUS_OK;
        if (b == NULL || p == NULL) {
            free(b);
            free(p);
            bench_fail("out of host memory for the copy tables");
            return -1;
        }
        for (size_t i = 0; i < CP_ITEMS; i++) {
            const uint64_t at = (uint64_t)(i * r->words[k] * sizeof(float));
            b[i] = p[2 * i] = (uint64_t)(uintptr_t)r->src[k].ptr + at;
            b[CP_ITEMS + i] = p[2 * i + 1] = (uint64_t)(uintptr_t)r->dst[k].ptr + at;
        }
        MemraSliceU64 hb = {b, 2 * CP_ITEMS}, hp = {p, 2 * CP_ITEMS};
        st = memra_htod_u64(r->e, hb, &r->batch[k]);
        if (st == MEMRA_STATUS_OK)
            st = memra_htod_u64(r->e, hp, &r->pairs[k]);
        free(b);
        free(p);
        if (st != MEMRA_STATUS_OK)
            return bench_fail_status("memra_htod_u64 (copy tables)", st);
    }
    return 0;
}

/* Allocates the slabs and live buffers, fills the sources with fresh random words. */
static int make_rig(bench_env *env, copy_rig *r, uint64_t seed)
{
    const size_t conv_dim = MEMRA_D_STATE * (2 * CP_NUM_K + CP_NUM_V);
    r->e = env->engine;
    r->words[CP_STATE] = MEMRA_D_STATE * MEMRA_D_STATE * CP_NUM_V;
    r->words[CP_RING] = conv_dim * (CP_D_CONV - 1);
    const uint64_t need =
        2 * CP_ITEMS * (r->words[CP_STATE] + r->words[CP_RING]) * (uint64_t)sizeof(float);
    if (need > bench_memory_budget(env)) {
        bench_fail("the copy configuration needs %.0f MiB, more than the memory budget",
                   need / 1048576.0);
        return -1;
    }
    for (int k = 0; k < CP_TENSORS; k++) {
        const size_t len = CP_ITEMS * r->words[k];
        float *host = malloc(r->words[k] * sizeof *host);
        MemraStatus st = memra_alloc_f32(r->e, len, MEMRA_ALLOC_INIT_UNINIT, &r->src[k]);
        if (st == MEMRA_STATUS_OK)
            st = memra_alloc_f32(r->e, len, MEMRA_ALLOC_INIT_UNINIT, &r->dst[k]);
        for (size_t i = 0; i < CP_ITEMS && st == MEMRA_STATUS_OK && host != NULL; i++) {
            MemraSliceF32 h = {host, r->words[k]};
            MemraSliceMutF32 d = {r->src[k].ptr + i * r->words[k], r->words[k]};
            tu_varied(host, r->words[k], tu_mix_seed(seed, (uint64_t)k * CP_ITEMS + i), 1.0f);
            st = memra_htod_f32_into(r->e, h, d);
        }
        free(host);
        if (host == NULL) {
            bench_fail("out of host memory for the copy sources");
            return -1;
        }
        if (st != MEMRA_STATUS_OK)
            return bench_fail_status("allocating the copy buffers", st);
    }
    return make_tables(r);
}

/* The batched copy on poisoned destinations, then items 0, n/2 and n-1 of both tensors
 * compared with their sources. Returns 0, 1 on a mismatch (in `why`), -1 on a failure. */
static int check_batched(copy_rig *r, char *why, size_t why_len)
{
    const size_t probe[] = {0, CP_ITEMS / 2, CP_ITEMS - 1};
    float *a = malloc(r->words[CP_STATE] * sizeof *a), *b = malloc(r->words[CP_STATE] * sizeof *b);
    int rc = 0;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        bench_fail("out of host memory for the check");
        return -1;
    }
    MemraStatus st = MEMRA_STATUS_OK;
    tu_poison_host(a, r->words[CP_STATE]);
    for (int k = 0; k < CP_TENSORS && st == MEMRA_STATUS_OK; k++)
        for (size_t i = 0; i < CP_ITEMS && st == MEMRA_STATUS_OK; i++) {
            MemraSliceF32 h = {a, r->words[k]};
            MemraSliceMutF32 d = {r->dst[k].ptr + i * r->words[k], r->words[k]};
            st = memra_htod_f32_into(r->e, h, d);
        }
    if (st == MEMRA_STATUS_OK)
        st = run_form(r, CP_BATCHED);
    if (st != MEMRA_STATUS_OK)
        rc = bench_fail_status("poisoning the destinations, then the batched copy", st);
    for (int k = 0; k < CP_TENSORS && rc == 0; k++)
        for (size_t j = 0; j < sizeof probe / sizeof probe[0] && rc == 0; j++) {
            const size_t at = probe[j] * r->words[k], words = r->words[k];
            MemraSliceF32 s = {r->src[k].ptr + at, words}, d = {r->dst[k].ptr + at, words};
            MemraSliceMutF32 ha = {a, words}, hb = {b, words};
            st = memra_dtoh_f32(r->e, s, ha);
            if (st == MEMRA_STATUS_OK)
                st = memra_dtoh_f32(r->e, d, hb);
            if (st != MEMRA_STATUS_OK) {
                rc = bench_fail_status("memra_dtoh_f32 (copy check)", st);
            } else if (tu_first_diff(a, b, words) != words) {
                snprintf(why, why_len, "%s %zu: %zu words differ from its source", cp_name[k],
                         probe[j], tu_bit_diffs(a, b, words));
                rc = 1;
            }
        }
    free(a);
    free(b);
    return rc;
}

static void free_rig(copy_rig *r)
{
    for (int f = 0; f < 2; f++)
        if (r->graph[f] != NULL)
            (void)memra_graph_destroy(r->e, r->graph[f]);
    for (int k = 0; k < CP_TENSORS; k++) {
        void *p[] = {r->src[k].ptr, r->dst[k].ptr, r->batch[k].ptr, r->pairs[k].ptr};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
            if (p[i] != NULL)
                (void)memra_free(r->e, p[i]);
    }
}

/* Median of `n` one-rep samples after two warm-up reps. */
static int time_form(bench_env *env, cp_rep *x, size_t n, bench_stats *s)
{
    double per[BENCH_MAX_SAMPLES], us = 0.0;
    if (bench_time_reps(env, one_copy, x, 0, 2, &us) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (bench_time_reps(env, one_copy, x, 0, 1, &per[i]) != 0)
            return -1;
    bench_stats_from_samples(s, per, n);
    return 0;
}

int bench_copy_run(bench_env *env)
{
    copy_rig r;
    char why[256] = "";
    const uint64_t seed = tu_fresh_seed();
    size_t n = env->samples < 3                   ? 3
               : env->samples > BENCH_MAX_SAMPLES ? BENCH_MAX_SAMPLES
                                                  : env->samples;
    int rc;

    memset(&r, 0, sizeof r);
    if (env->backend != MEMRA_BACKEND_CUDA && n > 5)
        n = 5;
    printf("memra_bench --mode copy: %s, %s; copy bandwidth %.1f GB/s (read + write)\n",
           env->backend == MEMRA_BACKEND_CUDA ? "CUDA" : "CPU", env->device, env->copy_best_gbs);
    printf("restore of %zu layers x B = %zu: %zu states of %zu words and %zu rings of %zu words "
           "(inputs seed 0x%016llx)\n",
           CP_LAYERS, CP_B, CP_ITEMS, (size_t)(MEMRA_D_STATE * MEMRA_D_STATE * CP_NUM_V), CP_ITEMS,
           (size_t)(MEMRA_D_STATE * (2 * CP_NUM_K + CP_NUM_V) * (CP_D_CONV - 1)),
           (unsigned long long)seed);
    rc = make_rig(env, &r, seed);
    if (rc == 0)
        rc = check_batched(&r, why, sizeof why);
    if (rc == 1) {
        printf("copy FAILED: %s\n", why);
    } else if (rc == 0) {
        const uint64_t bytes =
            2 * CP_ITEMS * (r.words[CP_STATE] + r.words[CP_RING]) * (uint64_t)sizeof(float);
        const double floor_us = env->copy_best_gbs > 0 ? bytes / (env->copy_best_gbs * 1e3) : -1.0;
        MemraStatus st = memra_graph_capture(r.e, step_batched, &r, &r.graph[CP_BATCHED]);
        if (st == MEMRA_STATUS_OK)
            st = memra_graph_capture(r.e, step_separate, &r, &r.graph[CP_SEPARATE]);
        if (st != MEMRA_STATUS_OK)
            rc = bench_fail_status("memra_graph_capture (copies)", st);
        printf("%-22s %8s %12s %12s %10s %10s\n", "copy", "launch", "median us", "floor us",
               "x floor", "GB/s");
        for (int g = 0; g < 2 && rc == 0; g++)
            for (int f = 0; f < CP_FORMS && rc == 0; f++) {
                cp_rep x = {&r, f, g == 1};
                bench_stats s;
                memset(&s, 0, sizeof s);
                rc = time_form(env, &x, n, &s);
                if (rc == 0)
                    printf("%-22s %8s %12.1f %12.1f %10.3f %10.1f\n", form_name[f],
                           g ? "graph" : "eager", s.med_us, floor_us,
                           floor_us > 0 ? s.med_us / floor_us : 0.0, bytes / (s.med_us * 1e3));
            }
    }
    if (rc < 0)
        printf("copy FAILED: %s\n", bench_error);
    free_rig(&r);
    return rc == 0 ? 0 : 1;
}
