/*
 * memra_bench: packed versus per-row GDN verify, eager versus graph-replayed, against the
 * memory-bandwidth floor measured in the same run. Uses the public ABI (abi/memra.h) only; on
 * the GPU it also calls the CUDA runtime for events and for the copy-bandwidth measurement
 * (compiled in with MEMRA_BENCH_CUDA, i.e. the Makefile's CUDA=1).
 *
 * Files: main.c (command line, sweep, exit status), workload.c (buffers, the four variants,
 * the bit-identity check), timing.c (clocks, copy bandwidth, machine description), report.c
 * (stdout table, bench.csv, bench.json).
 */
#ifndef MEMRA_BENCH_H
#define MEMRA_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memra.h"

/* The four ways of running one verify (T rows of B sequences through conv, prep and scan). */
enum bench_variant {
    BV_ROW_EAGER,  /* T rows x 3 per-row launches with b_n = B, enqueued one by one */
    BV_ROW_GRAPH,  /* the same 3T launches captured once and replayed */
    BV_PACK_EAGER, /* conv tloop + prep + scan tsnap over all T rows, snapshots on */
    BV_PACK_GRAPH, /* the same 3 launches captured once and replayed */
    BV_COUNT
};

/* Short names used in the CSV/JSON keys ("row_eager", ...) and in the table header. */
extern const char *const bench_variant_key[BV_COUNT];

/* One configuration of the sweep, with the derived sizes (element counts). */
typedef struct bench_config {
    const char *shape;
    size_t num_k, num_v, t, b;
    size_t d_conv, pad, key_dim, value_dim, conv_dim;
    size_t ring_words;  /* one sequence's conv ring [conv_dim, pad] */
    size_t state_words; /* one sequence's recurrent state [num_v, 128, 128] */
    float eps, scale;
} bench_config;

void bench_config_init(bench_config *c, const char *shape, size_t num_k, size_t num_v, size_t t,
                       size_t b);

/* Bytes one packed verify must move through memory at least: every input of the three packed
 * operations read once and every output written once, so the canonical state read, the T - 1
 * state snapshots and the final state written ((T + 1) x state x B), the same for the conv
 * ring, plus the activations (qkv, beta_raw, alpha, weights, the prep outputs the scan reads,
 * conv_outs and o). `state_only` is the (T + 1) x state bytes x B term alone: the state floor
 * of docs/performance.md. */
uint64_t bench_floor_bytes(const bench_config *c, uint64_t *state_only);

/* Timing statistics of one variant: per-verify microseconds over `samples` samples, each the
 * time of `reps` back-to-back verifies divided by `reps`. */
typedef struct bench_stats {
    double med_us, min_us, max_us;
    size_t samples, reps;
} bench_stats;

typedef struct bench_result {
    bench_config cfg;
    bool ok;           /* checked bit-identical and timed */
    char failure[640]; /* why not, when !ok */
    size_t sets;       /* input/state sets rotated through while timing */
    size_t compared_words;
    uint64_t floor_bytes, floor_state_bytes;
    double floor_us, floor_state_us; /* negative when no bandwidth was measured */
    bench_stats v[BV_COUNT];
    /* Wall-clock seconds spent building the sets, checking, capturing graphs and timing. */
    double setup_s, check_s, capture_s, timing_s;
} bench_result;

/* The run: engine, machine, bandwidth and timing policy. */
typedef struct bench_env {
    MemraEngine *engine;
    MemraBackend backend;
    void *stream; /* the engine's cudaStream_t on CUDA */
    int device_ordinal;
    bool quick;

    char host[128];
    char cpu[160];
    char device[256]; /* GPU name, or the CPU model for the CPU backend */
    char compute_capability[16];
    int multiprocessors;
    uint64_t cache_bytes;  /* the GPU's L2 (0 on the CPU) */
    uint64_t memory_bytes; /* device memory, or host MemTotal */
    char date[32];
    char commit[96];
    char notice[256]; /* why the CPU backend was used, when it was */

    /* Copy bandwidth counted as bytes read plus bytes written. */
    const char *copy_method;
    uint64_t copy_bytes; /* bytes of one copy (read + write is twice this) */
    size_t copy_reps;
    double copy_best_gbs, copy_median_gbs;

    /* Timing policy. */
    uint64_t rotate_bytes; /* memory each set must be revisited after, at least */
    size_t max_sets;
    double sample_us;  /* aim for samples this long */
    size_t samples;    /* samples per variant (fewer when a variant is slow) */
    double warmup_us;  /* warm-up time budget per variant */
    double variant_us; /* timed budget per variant */
    const char *clock_method;
} bench_env;

/* Last failure of the bench itself (bench_fail() formats it). */
extern char bench_error[640];
void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Formats a failed library call: "what: STATUS: message". Returns -1. */
int bench_fail_status(const char *what, MemraStatus st);

/* timing.c */
double bench_now_us(void);
int bench_device_open(bench_env *env);
void bench_device_close(bench_env *env);
void bench_describe_machine(bench_env *env);
int bench_copy_bandwidth(bench_env *env);
/* Memory the next configuration may allocate: half of what is free now. */
uint64_t bench_memory_budget(const bench_env *env);

/* One verify of the rotation: rep number `rep` (the caller maps it to a set). */
typedef int (*bench_rep_fn)(void *user, size_t rep);
/* Runs reps first .. first + n - 1 back to back and stores their total time. On the GPU the
 * time is the one between CUDA events recorded on the engine's stream around them. */
int bench_time_reps(bench_env *env, bench_rep_fn fn, void *user, size_t first, size_t n,
                    double *out_us);

/* workload.c */
typedef struct bench_work bench_work;
/* Allocates and fills `sets` sets of buffers for configuration `c`. */
int bench_work_create(bench_env *env, const bench_config *c, size_t sets, bench_work **out);
/* Bytes one set allocates on the engine (to size the rotation against the memory budget). */
uint64_t bench_set_bytes(const bench_config *c);
/* Runs the per-row chain and the packed program on set 0 (eager, then graph-replayed) and
 * compares every output, snapshot, final state and final ring bit for bit. Returns 0 when all
 * are identical, 1 on a mismatch (described in `why`), -1 on a library failure. Also captures
 * set 0's graphs. */
int bench_work_check(bench_work *w, char *why, size_t why_len, size_t *compared_words);
/* Captures the graphs of the remaining sets. */
int bench_work_capture(bench_work *w);
/* One verify of `variant` on set `set`. */
int bench_work_rep(bench_work *w, int variant, size_t set);
size_t bench_work_sets(const bench_work *w);
void bench_work_destroy(bench_work *w);

/* report.c */
void bench_report_header(const bench_env *env);
void bench_report_line(const bench_env *env, const bench_result *r);
int bench_report_files(const bench_env *env, const char *dir, const bench_result *rs, size_t n);

#endif /* MEMRA_BENCH_H */
