/*
 * memra_bench: the GDN verify four 1.0 ways (per-row and packed, eager and graph-replayed) and
 * the 1.1 one-launch verify in its three modes plus the journal commit and the device-side
 * rollback, each against the
 * bytes it must move at the copy bandwidth measured in the same run. Uses the public ABI
 * (abi/memra.h) only; on the GPU it also calls the CUDA runtime for events, the copy-bandwidth
 * measurement and the device description (compiled in with MEMRA_BENCH_CUDA, i.e. the
 * Makefile's CUDA=1).
 *
 * Files: main.c (command line, sweep, progress, exit status), workload.c (buffers, the
 * variants, the bit-identity checks, the bytes each variant moves), timing.c (clocks, copy
 * bandwidth, machine and build description), report.c (stdout table and summary, bench.csv,
 * bench.json), compare.c (reading bench.json files, run-to-run comparison), json.c (the JSON
 * reader compare.c uses), util.c (errors and statistics), hash.c (--mode hash: fingerprints of
 * the packed verify's outputs), variants.def (the list of variants). The generator, the
 * views and the 1.0 programs come from the test-support library (tests/support/support.h).
 */
#ifndef MEMRA_BENCH_H
#define MEMRA_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memra.h"

/* Version of the bench.json layout (bench/README.md documents it). Files written before the
 * field existed are read as version 1. */
#define BENCH_SCHEMA_VERSION 2

/* A configuration whose largest per-variant spread ((max - min) / median) exceeds this is
 * marked noisy: its variants differ from each other by less than their own scatter. */
#define BENCH_NOISY_SPREAD 0.10

/* Every variant of one verify, from the list in variants.def (which says what each one is). */
enum bench_variant {
#define X(id, key, name, plot, in_table, width, graph, journal) BV_##id,
#include "variants.def"
#undef X
    BV_COUNT
};
#define BV_FIRST_11 BV_FUSED

/* Keys in bench.csv and bench.json ("row_eager", ...), names in the table header
 * ("row-eager", ...), whether the stdout table has a column for the variant and that column's
 * width. */
extern const char *const bench_variant_key[BV_COUNT];
extern const char *const bench_variant_name[BV_COUNT];
extern const bool bench_variant_in_table[BV_COUNT];
extern const int bench_variant_width[BV_COUNT];
/* The variant with this key, or -1. */
int bench_variant_from_key(const char *key);

/* One configuration of the sweep, with the derived sizes (element counts). */
typedef struct bench_config {
    const char *shape;
    size_t num_k, num_v, t, b;
    size_t d_conv, pad, key_dim, value_dim, conv_dim;
    size_t ring_words;    /* one sequence's conv ring [conv_dim, pad] */
    size_t state_words;   /* one sequence's recurrent state [num_v, 128, 128] */
    size_t journal_words; /* one sequence's journal (memra_gdn_journal_len), 0 if unknown */
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
/* The bytes variant `v` moves, counted the same way for its own launches (README.md lists
 * them term by term). */
uint64_t bench_variant_bytes(const bench_config *c, int v);

/* Status of one variant in one configuration. */
enum bench_status {
    BS_SKIPPED, /* not run: left out on the command line, or the configuration failed first */
    BS_OK,      /* checked bit-identical, then timed */
    BS_FAILED   /* its check, its capture or its timing failed; `failure` says how */
};

#define BENCH_MAX_SAMPLES 64

/* Timing statistics of one variant: per-verify microseconds over `samples` samples, each the
 * time of `reps` back-to-back verifies divided by `reps`. */
typedef struct bench_stats {
    int status;
    char failure[400];
    double med_us, min_us, max_us;
    double mad_us; /* median absolute deviation from the median */
    size_t samples, reps;
    double sample_us[BENCH_MAX_SAMPLES]; /* sorted */
    uint64_t bytes;                      /* what the variant moves per verify */
} bench_stats;

typedef struct bench_result {
    bench_config cfg;
    bool ok;           /* the 1.0 check passed and the 1.0 variants were timed */
    char failure[640]; /* why not, when !ok */
    size_t sets;       /* input/state sets rotated through while timing */
    size_t compared_words;
    uint64_t floor_bytes, floor_state_bytes;
    double floor_us, floor_state_us; /* negative when no bandwidth was measured */
    bench_stats v[BV_COUNT];
    /* The accepted counts the journal, rollback and commit replays used. */
    uint64_t accepted_seed;
    double journal_mean_accepted;
    /* One host write of the B accepted counts (memra_htod_u32_into), median us; 0 when not
     * measured. Timed on its own, added to no column. */
    double count_write_us;
    /* The commit column's two graphs: refill verify + commit, and the refill verify alone
     * (median us each); the commit's median is their difference. */
    double commit_graph_us, commit_refill_us;
    /* Wall-clock seconds spent building the sets, checking, capturing graphs and timing. */
    double setup_s, check_s, capture_s, timing_s;
} bench_result;

/* How the library and the bench were built (mk/bench.mk writes it into build_info.h). */
typedef struct bench_build {
    const char *commit;
    const char *cc, *cflags_lib, *cflags_bench;
    const char *nvcc, *nvccflags, *cuda_archs;
    bool cuda;
} bench_build;

/* The run: engine, machine, bandwidth and timing policy. */
typedef struct bench_env {
    MemraEngine *engine;
    MemraBackend backend;
    void *stream; /* the engine's cudaStream_t on CUDA */
    int device_ordinal;
    bool quick;
    bool with_11; /* time the 1.1 variants */

    bench_build build;
    char library_version[32];
    char abi_version[16];
    char command[512]; /* the command line */

    char host[128];
    char cpu[160];
    char os[160];
    char kernel[200];
    char device[256]; /* GPU name, or the CPU model for the CPU backend */
    char compute_capability[16];
    int multiprocessors;
    uint64_t cache_bytes;                                /* the GPU's L2 (0 on the CPU) */
    uint64_t memory_bytes;                               /* device memory, or host MemTotal */
    int sm_clock_mhz, memory_clock_mhz, memory_bus_bits; /* 0 when not readable */
    char cuda_driver[32], cuda_runtime[32], nvidia_driver[64];
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

/* util.c: statistics. */
int bench_cmp_double(const void *a, const void *b);
/* Sorts `x` and fills med, min, max and mad of `s` from it. */
void bench_stats_from_samples(bench_stats *s, double *x, size_t n);
/* (max - min) / median of one variant. */
double bench_stats_spread(const bench_stats *s);
/* The largest spread among the variants of `r` that were timed. */
double bench_result_spread(const bench_result *r);
bool bench_result_noisy(const bench_result *r);
/* GB/s achieved (bytes / median), and the variant's floor at the run's best copy rate. */
double bench_stats_gbs(const bench_stats *s);
double bench_stats_floor_us(const bench_env *env, const bench_stats *s);

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
 * set 0's graphs and keeps the reference results for bench_work_check_11(). */
int bench_work_check(bench_work *w, char *why, size_t why_len, size_t *compared_words);
/* Checks 1.1 variant `v` on set 0 against the 1.0 results bench_work_check() kept (the journal
 * check serves BV_JOURNAL and BV_JOURNAL_ALL; the commit check also checks the refill graph).
 * Same return values; also captures set 0's graph of the variant. */
int bench_work_check_11(bench_work *w, int v, char *why, size_t why_len, size_t *compared_words);
/* Captures the 1.0 graphs of the remaining sets. */
int bench_work_capture(bench_work *w);
/* Captures variant `v`'s graph for the remaining sets. */
int bench_work_capture_11(bench_work *w, int v);
/* The per-op mode: captures, on every set, a graph of operation `op` of the packed program
 * alone (enum tu_op of tests/support/support.h: conv, prep, scan, scan without snapshots), and
 * replays it on set `set`. Run after bench_work_capture(), whose warm-ups leave every set's
 * intermediates (the prep outputs the scan reads) written. */
int bench_work_capture_op(bench_work *w, int op);
int bench_work_rep_op(bench_work *w, int op, size_t set);
/* Graphs timed beside the variants, one per set: the refill verify the commit column
 * subtracts (JOURNAL mode, accepted counts 0 from a zero-filled buffer), and the two stages of
 * the FINAL_ONLY verify alone (--mode per-op, CUDA only: captured with MEMRA_VERIFY_STAGE set
 * to prologue or scan, so that the verify launches that one kernel; results wrong by design). */
enum bench_extra { BX_REFILL, BX_PROLOGUE, BX_ROWS, BX_JPROLOGUE, BX_JROWS, BX_COUNT };
extern const char *const bench_extra_name[BX_COUNT];
/* The verify variant (enum bench_variant) extra graph x replays, whole or cut to one stage. */
int bench_extra_variant(int x);
/* Captures extra graph `x` for every set. */
int bench_work_capture_extra(bench_work *w, int x);
int bench_work_rep_extra(bench_work *w, int x, size_t set);
/* Brings every set to where variant `v`'s replays start (a journal holding T rows). */
int bench_work_prepare(bench_work *w, int v);
/* Writes the accepted counts variant `v`'s next sample replays into every set's own device
 * buffer, outside the timed region: new counts uniform in 1..T per sequence for the journal,
 * the rollback and the commit, T for journal-all; nothing for the other variants. */
int bench_work_before_sample(bench_work *w, int v);
/* One host write of B accepted counts into set 0's buffer (memra_htod_u32_into), to be timed
 * on its own. */
int bench_work_write_counts(bench_work *w);
/* One verify of `variant` on set `set` (the accepted counts already in device memory). */
int bench_work_rep(bench_work *w, int variant, size_t set);
size_t bench_work_sets(const bench_work *w);
/* The seed of the accepted counts, and their mean over the journal replays so far (each
 * replay counted with the counts its set's buffer held). */
uint64_t bench_work_accepted_seed(const bench_work *w);
double bench_work_journal_mean_accepted(const bench_work *w);
void bench_work_destroy(bench_work *w);

/* hash.c: prints the fingerprint lines of --mode hash (one per shape and T) to `f`. Returns 0,
 * or -1 with bench_error set. */
int bench_hash(MemraEngine *e, FILE *f);

/* report.c */
void bench_report_header(FILE *f, const bench_env *env);
void bench_report_line(FILE *f, const bench_env *env, const bench_result *r);
/* The closing summary: geometric-mean speedups, best and worst floor fractions, counts. */
void bench_report_summary(FILE *f, const bench_env *env, const bench_result *rs, size_t n,
                          double seconds);
int bench_write_csv(const bench_env *env, const char *path, const bench_result *rs, size_t n);
int bench_write_json(const bench_env *env, const char *path, const bench_result *rs, size_t n);
/* Writes DIR/bench.csv and DIR/bench.json, creating DIR. */
int bench_report_files(const bench_env *env, const char *dir, const bench_result *rs, size_t n);
/* How many FAILED statuses `r` holds: the configuration's own, or one per failed variant. */
size_t bench_result_failures(const bench_result *r);

/* compare.c: a bench.json read back. */
typedef struct bench_run_variant {
    bool present; /* the file has this variant for the configuration */
    bool ok;
    double med_us, min_us, max_us, spread;
    char failure[200];
} bench_run_variant;

typedef struct bench_run_entry {
    char shape[32];
    size_t t, b;
    bool ok;
    bool noisy;
    bench_run_variant v[BV_COUNT];
} bench_run_entry;

typedef struct bench_run {
    int schema_version;
    char library_version[32], commit[96], date[32], backend[16], device[256];
    bool quick;
    size_t n;
    bench_run_entry *e;
} bench_run;

/* Reads `path`; on failure returns -1 with bench_error set. */
int bench_run_load(const char *path, bench_run *out);
/* The same from JSON text (for the tests and for files already read). */
int bench_run_parse(const char *text, const char *what, bench_run *out);
void bench_run_free(bench_run *run);

typedef struct bench_compare_opts {
    /* A slower time is flagged as a regression only when it is more than this fraction slower
     * than the base as well as beyond both runs' spread. */
    double threshold;
} bench_compare_opts;

typedef struct bench_compare_summary {
    size_t configs_both; /* configurations present in both runs */
    size_t pairs;        /* (configuration, variant) pairs timed in both runs */
    size_t regressions;  /* slower beyond both spreads and the threshold, or FAILED now */
    size_t improvements; /* faster beyond both spreads and the threshold */
    size_t noisy;        /* configurations noisy in either run */
    size_t missing;      /* configurations of the base this run lacks */
    size_t added;        /* configurations of this run the base lacks */
    double geomean;      /* of every pair's time ratio (this / base) */
    double geomean_v[BV_COUNT];
    size_t pairs_v[BV_COUNT];
} bench_compare_summary;

/* Prints this run (`cur`) beside `base`, configuration by configuration, and fills `s`. */
void bench_compare(FILE *f, const bench_run *base, const bench_run *cur,
                   const bench_compare_opts *opts, bench_compare_summary *s);

/* copy.c: --mode copy, the 1.2 batched state copy against one copy per layer and against the
 * bandwidth floor (bench/README.md). Prints a table; returns the exit status (0 or 1). */
int bench_copy_run(bench_env *env);

#endif /* MEMRA_BENCH_H */
