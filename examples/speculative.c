/*
 * One Gated DeltaNet layer's speculative decode loop, written twice over the same inputs:
 *
 *   1. SNAPSHOTS mode with device-side rollback: every verify of T rows (the draft tokens plus
 *      one) keeps the state after each row; once the host knows how many rows were accepted,
 *      memra_gdn_rollback() makes the state and the conv ring those after the last accepted
 *      row. The even verifies call memra_gdn_verify(), the odd ones the three calls of the 1.0
 *      packed program, which write the same tensors (the rollback reads either).
 *   2. JOURNAL mode with a deferred commit: each verify first folds the rows accepted from the
 *      previous one, then keeps its own rows in a journal; memra_gdn_journal_commit() folds
 *      the last accepted rows before the host reads the state.
 *
 * Both loops must end with the same state and ring, bit for bit, and compute the same outputs
 * at every verify: the program checks that and prints a checksum of all of them, which does
 * not depend on the language or the backend that computed it.
 *
 * Build and run against an installed libmemra (the last pkg-config call adds the run path, so
 * that the program finds a library installed outside the loader's search path):
 *
 *   cc -std=c11 -O2 speculative.c $(pkg-config --cflags --libs memra) \
 *      $(pkg-config --variable=rpath memra) -o speculative
 *   ./speculative                     # CUDA when a device is usable, else the CPU backend
 *   MEMRA_BACKEND=cpu ./speculative   # the CPU backend
 *
 * Exit status 0 when both loops agree, 1 otherwise or when a call fails.
 */
/* README excerpt: includes */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <memra.h>

/* One statement (do ... while (0)), so that `if (x) CHECK(f()); else ...` pairs as it reads. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        MemraStatus check_status_ = (call);                                                        \
        if (check_status_ != MEMRA_STATUS_OK) {                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,                                 \
                    memra_status_string(check_status_), memra_last_error_message());               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* A read-only view of a buffer, for the arguments the library only reads. */
static MemraSliceF32 ro(MemraSliceMutF32 s)
{
    return (MemraSliceF32){s.ptr, s.len};
}
/* README excerpt end */

/* The layer's shape: a small GDN layer (d_state is always 128) and a draft of 3 tokens. */
#define NUM_K 2
#define NUM_V 4
#define D_STATE 128
#define D_CONV 4
#define T 4
#define KEY_DIM (D_STATE * NUM_K)
#define CONV_DIM (2 * KEY_DIM + D_STATE * NUM_V)
#define RING_LEN ((size_t)CONV_DIM * (D_CONV - 1))
#define STATE_LEN ((size_t)NUM_V * D_STATE * D_STATE)
#define O_LEN ((size_t)T * NUM_V * D_STATE)
#define STEPS 6

/* How many of each verify's T rows the host accepts (1 ..= T: the row after the last accepted
 * draft token is always kept). A real host compares the draft tokens with the model's. */
static const uint32_t accepted_per_step[STEPS] = {3, 1, 4, 2, 4, 1};

/* Deterministic inputs in [-spread, spread), different for every seed (splitmix64). */
static void fill(float *out, size_t len, uint64_t seed, float spread)
{
    uint64_t x = seed * 0xD1290FA554B37A1DULL ^ 0x5851F42D4C957F2DULL;
    for (size_t i = 0; i < len; i++) {
        x += 0x9E3779B97F4A7C15ULL;
        uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        out[i] = ((float)(z >> 40) / (float)(1u << 24) * 2.0f - 1.0f) * spread;
    }
}

/* FNV-1a over the bits of the values, word by word. */
static uint64_t checksum(uint64_t h, const float *v, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        union {
            float f;
            uint32_t u;
        } bits = {v[i]};
        h = (h ^ bits.u) * 0x100000001B3ULL;
    }
    return h;
}

/* What both loops share: the weights, the buffers the host writes the new rows into before
 * each verify, the outputs and the accepted count. */
typedef struct Layer {
    MemraEngine *e;
    MemraSliceF32 w, dt_bias, a;
    MemraSliceMutF32 qkv, beta_raw, alpha, o;
    MemraSliceMutU32 accepted;
    float eps, scale;
} Layer;

/* What a loop ends with: the state and ring after the last accepted row, and the checksum of
 * every verify's outputs and of that state and ring. */
typedef struct Result {
    float *state, *ring;
    uint64_t sum;
} Result;

static MemraSliceMutF32 upload(MemraEngine *e, size_t len, uint64_t seed, float spread)
{
    float *host = malloc(len * sizeof *host);
    if (host == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    fill(host, len, seed, spread);
    MemraSliceMutF32 dev;
    CHECK(memra_htod_f32(e, (MemraSliceF32){host, len}, &dev));
    free(host);
    return dev;
}

static void layer_open(Layer *l, MemraEngine *e)
{
    l->e = e;
    l->w = ro(upload(e, (size_t)CONV_DIM * D_CONV, 1, 0.5f));
    l->dt_bias = ro(upload(e, NUM_V, 2, 0.5f));
    /* The pre-negated decay, -exp(A_log) in a checkpoint: negative. */
    float a[NUM_V];
    fill(a, NUM_V, 3, 0.25f);
    for (int h = 0; h < NUM_V; h++) {
        a[h] -= 0.5f;
    }
    MemraSliceMutF32 a_dev;
    CHECK(memra_htod_f32(e, (MemraSliceF32){a, NUM_V}, &a_dev));
    l->a = ro(a_dev);
    CHECK(memra_alloc_f32(e, (size_t)T * CONV_DIM, MEMRA_ALLOC_INIT_ZEROED, &l->qkv));
    CHECK(memra_alloc_f32(e, (size_t)T * NUM_V, MEMRA_ALLOC_INIT_ZEROED, &l->beta_raw));
    CHECK(memra_alloc_f32(e, (size_t)T * NUM_V, MEMRA_ALLOC_INIT_ZEROED, &l->alpha));
    CHECK(memra_alloc_f32(e, O_LEN, MEMRA_ALLOC_INIT_ZEROED, &l->o));
    CHECK(memra_alloc_u32(e, 1, MEMRA_ALLOC_INIT_ZEROED, &l->accepted));
    /* Typical values: eps is the checkpoint's L2-norm epsilon (1e-6 in Qwen3-Next style GDN
     * layers), scale is 1/sqrt(d_state). */
    l->eps = 1e-6f;
    l->scale = 1.0f / sqrtf((float)D_STATE);
}

/* The new rows of verify `step`: what the model's projections produce for the draft. */
static void write_rows(Layer *l, int step)
{
    static float qkv[(size_t)T * CONV_DIM], beta_raw[T * NUM_V], alpha[T * NUM_V];
    fill(qkv, (size_t)T * CONV_DIM, 100 + 3 * (uint64_t)step, 1.0f);
    fill(beta_raw, T * NUM_V, 101 + 3 * (uint64_t)step, 2.0f);
    fill(alpha, T * NUM_V, 102 + 3 * (uint64_t)step, 2.0f);
    CHECK(memra_htod_f32_into(l->e, (MemraSliceF32){qkv, (size_t)T * CONV_DIM}, l->qkv));
    CHECK(memra_htod_f32_into(l->e, (MemraSliceF32){beta_raw, T * NUM_V}, l->beta_raw));
    CHECK(memra_htod_f32_into(l->e, (MemraSliceF32){alpha, T * NUM_V}, l->alpha));
}

/* The host reads every verify's outputs (to sample from them); here they go into the sum. */
static uint64_t read_outputs(Layer *l, uint64_t sum)
{
    static float o[O_LEN];
    CHECK(memra_dtoh_f32(l->e, ro(l->o), (MemraSliceMutF32){o, O_LEN}));
    return checksum(sum, o, O_LEN);
}

static MemraSliceMutF32 upload_copy(MemraEngine *e, const float *host, size_t len)
{
    MemraSliceMutF32 dev;
    CHECK(memra_htod_f32(e, (MemraSliceF32){host, len}, &dev));
    return dev;
}

/* The pointer table of one sequence, in device memory: read when the operations execute. */
static MemraSliceU64 make_table(MemraEngine *e, const void *p0, const void *p1, const void *p2)
{
    uint64_t entries[MEMRA_TABLE_WIDTH] = {(uintptr_t)p0, (uintptr_t)p1, (uintptr_t)p2};
    MemraSliceMutU64 table;
    CHECK(memra_htod_u64(e, (MemraSliceU64){entries, MEMRA_TABLE_WIDTH}, &table));
    return (MemraSliceU64){table.ptr, table.len};
}

static Result finish(Layer *l, MemraSliceMutF32 state, MemraSliceMutF32 ring, uint64_t sum)
{
    Result r = {malloc(STATE_LEN * sizeof(float)), malloc(RING_LEN * sizeof(float)), sum};
    if (r.state == NULL || r.ring == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    CHECK(memra_dtoh_f32(l->e, ro(state), (MemraSliceMutF32){r.state, STATE_LEN}));
    CHECK(memra_dtoh_f32(l->e, ro(ring), (MemraSliceMutF32){r.ring, RING_LEN}));
    r.sum = checksum(checksum(r.sum, r.state, STATE_LEN), r.ring, RING_LEN);
    return r;
}

/* The buffers the 1.0 program writes besides o: [T, conv_dim], [T, num_v, 128] x 3 and
 * [T, num_v] x 2. memra_gdn_verify() writes them only when asked. */
typedef struct Activations {
    MemraSliceMutF32 conv_outs, q_l2, k_l2, v_g, beta, g_log;
} Activations;

/* README excerpt: args */
/* One description of a verify of this layer, which the verify, the rollback and the commit all
 * read (each the fields it needs); the buffers of the mode are the caller's to add. */
static MemraVerifyArgs layer_args(const Layer *l, MemraVerifyMode mode, MemraSliceU64 table)
{
    MemraVerifyArgs va;
    CHECK(memra_verify_args_init(&va)); /* leaves eps and scale NaN: set them */
    va.mode = mode;
    va.num_k = NUM_K;
    va.num_v = NUM_V;
    va.d_conv = D_CONV;
    va.t = T;            /* rows per sequence: the draft tokens plus one */
    va.b_n = 1;          /* sequences */
    va.eps = l->eps;     /* typically 1e-6 */
    va.scale = l->scale; /* typically 1/sqrt(128) */
    va.qkv = ro(l->qkv);
    va.table = table;
    va.w = l->w;
    va.beta_raw = ro(l->beta_raw);
    va.alpha = ro(l->alpha);
    va.dt_bias = l->dt_bias;
    va.a = l->a;
    va.o = l->o;
    return va;
}
/* README excerpt end */

/* The same verify as memra_gdn_verify() in SNAPSHOTS mode, as the 1.0 packed program: one call
 * per kernel over all T rows (b_n = 1 sequence). */
static void verify_three_calls(Layer *l, const Activations *x, MemraSliceU64 table,
                               MemraSliceMutF32 snap_conv, MemraSliceMutF32 snap_ssm)
{
    MemraEngine *e = l->e;
    /* README excerpt: packed */
    size_t b_n = 1;        /* sequences */
    size_t rows = b_n * T; /* the prep's last argument: every row of every sequence */
    CHECK(memra_ssm_conv1d_fused_decode_tloop(e, ro(l->qkv), table, l->w, x->conv_outs, snap_conv,
                                              CONV_DIM, D_CONV, T, b_n));
    CHECK(memra_gdn_prep_decode_b(e, ro(x->conv_outs), ro(l->beta_raw), ro(l->alpha), l->dt_bias,
                                  l->a, x->q_l2, x->k_l2, x->v_g, x->beta, x->g_log, D_STATE, NUM_V,
                                  NUM_K, KEY_DIM, l->eps, CONV_DIM, rows));
    CHECK(memra_gdn_scan_s128_tsnap(e, ro(x->q_l2), ro(x->k_l2), ro(x->v_g), ro(x->g_log),
                                    ro(x->beta), table, l->o, NUM_V, T, b_n, l->scale, snap_ssm));
    /* README excerpt end */
}

static Result snapshots_loop(Layer *l, const float *state0, const float *ring0)
{
    MemraEngine *e = l->e;
    MemraSliceMutF32 ring = upload_copy(e, ring0, RING_LEN);
    MemraSliceMutF32 canonical = upload_copy(e, state0, STATE_LEN), alternate;
    CHECK(memra_alloc_f32(e, STATE_LEN, MEMRA_ALLOC_INIT_ZEROED, &alternate));
    MemraSliceMutF32 snap_conv, snap_ssm;
    CHECK(memra_alloc_f32(e, (T - 1) * RING_LEN, MEMRA_ALLOC_INIT_ZEROED, &snap_conv));
    CHECK(memra_alloc_f32(e, (T - 1) * STATE_LEN, MEMRA_ALLOC_INIT_ZEROED, &snap_ssm));
    MemraSliceU64 table = make_table(e, ring.ptr, canonical.ptr, alternate.ptr);
    Activations x;
    MemraSliceMutF32 *acts[] = {&x.conv_outs, &x.q_l2, &x.k_l2, &x.v_g, &x.beta, &x.g_log};
    size_t act_len[] = {(size_t)T * CONV_DIM, O_LEN, O_LEN, O_LEN, T * NUM_V, T * NUM_V};
    for (int i = 0; i < 6; i++) {
        CHECK(memra_alloc_f32(e, act_len[i], MEMRA_ALLOC_INIT_ZEROED, acts[i]));
    }

    /* README excerpt: snapshots */
    /* Table rows are [ring, canonical state, alternate state]; the snapshots hold the ring and
     * the state after each row but the last. */
    MemraVerifyArgs va = layer_args(l, MEMRA_VERIFY_MODE_SNAPSHOTS, table);
    va.snap_conv = snap_conv;
    va.snap_ssm = snap_ssm;
    /* The rollback reads the same description plus the accepted count, which a SNAPSHOTS
     * verify refuses (it has no use for one). */
    MemraVerifyArgs rb = va;
    rb.accepted = (MemraSliceU32){l->accepted.ptr, 1};
    uint64_t sum = 0xCBF29CE484222325ULL;
    for (int step = 0; step < STEPS; step++) {
        write_rows(l, step);
        if (step % 2 == 1)
            verify_three_calls(l, &x, table, snap_conv, snap_ssm);
        else
            CHECK(memra_gdn_verify(e, &va));
        sum = read_outputs(l, sum);
        /* The host decides how many rows to keep, writes the count into device memory and
         * rolls back there: the canonical state and the ring become those after row n - 1. */
        uint32_t n = accepted_per_step[step];
        CHECK(memra_htod_u32_into(e, (MemraSliceU32){&n, 1}, l->accepted));
        CHECK(memra_gdn_rollback(e, &rb));
    }
    /* README excerpt end */
    Result r = finish(l, canonical, ring, sum);
    void *bufs[] = {ring.ptr,     canonical.ptr,     alternate.ptr,   snap_conv.ptr,
                    snap_ssm.ptr, (void *)table.ptr, x.conv_outs.ptr, x.q_l2.ptr,
                    x.k_l2.ptr,   x.v_g.ptr,         x.beta.ptr,      x.g_log.ptr};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        CHECK(memra_free(e, bufs[i]));
    }
    return r;
}

static Result journal_loop(Layer *l, const float *state0, const float *ring0)
{
    MemraEngine *e = l->e;
    MemraSliceMutF32 ring = upload_copy(e, ring0, RING_LEN);
    MemraSliceMutF32 state = upload_copy(e, state0, STATE_LEN), journal;
    /* README excerpt: journal */
    /* One journal per sequence, zero-filled: empty. Table rows are [ring, state, journal]. */
    size_t journal_len;
    CHECK(memra_gdn_journal_len(D_STATE, NUM_K, NUM_V, T, &journal_len));
    CHECK(memra_alloc_f32(e, journal_len, MEMRA_ALLOC_INIT_ZEROED, &journal));
    MemraSliceU64 table = make_table(e, ring.ptr, state.ptr, journal.ptr);
    MemraVerifyArgs va = layer_args(l, MEMRA_VERIFY_MODE_JOURNAL, table);
    va.accepted = (MemraSliceU32){l->accepted.ptr, 1}; /* read when the verify executes */
    va.journal_t_max = T; /* the capacity the journal was sized for: bounds every access */

    uint64_t sum = 0xCBF29CE484222325ULL;
    uint32_t n = 0; /* the first verify has nothing to fold */
    for (int step = 0; step < STEPS; step++) {
        write_rows(l, step);
        /* Folds the n rows accepted from the previous verify, then runs and journals these. */
        CHECK(memra_htod_u32_into(e, (MemraSliceU32){&n, 1}, l->accepted));
        CHECK(memra_gdn_verify(e, &va));
        sum = read_outputs(l, sum);
        n = accepted_per_step[step];
    }
    /* Before the host reads the state (or moves the sequence, or runs a plain decode step). */
    CHECK(memra_htod_u32_into(e, (MemraSliceU32){&n, 1}, l->accepted));
    CHECK(memra_gdn_journal_commit(e, &va));
    /* README excerpt end */
    Result r = finish(l, state, ring, sum);
    CHECK(memra_free(e, ring.ptr));
    CHECK(memra_free(e, state.ptr));
    CHECK(memra_free(e, journal.ptr));
    CHECK(memra_free(e, (void *)table.ptr));
    return r;
}

static int same_bits(const float *x, const float *y, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        union {
            float f;
            uint32_t u;
        } a = {x[i]}, b = {y[i]};
        if (a.u != b.u) {
            return 0;
        }
    }
    return 1;
}

int main(void)
{
    /* README excerpt: engine */
    MemraEngineOptions opt;
    CHECK(memra_engine_options_init(&opt)); /* AUTO backend, device 0, own stream */
    MemraEngine *e;
    CHECK(memra_engine_create(&opt, &e));
    MemraBackend backend;
    CHECK(memra_engine_backend(e, &backend));
    /* README excerpt end */
    printf("libmemra %s on %s: num_k=%d num_v=%d d_conv=%d, %d verifies of %d rows\n",
           memra_version_string(), backend == MEMRA_BACKEND_CUDA ? "CUDA" : "CPU", NUM_K, NUM_V,
           D_CONV, STEPS, T);

    Layer l;
    layer_open(&l, e);
    /* The state and ring the prompt left (here: made up). */
    float *state0 = malloc(STATE_LEN * sizeof *state0), ring0[RING_LEN];
    if (state0 == NULL) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    fill(state0, STATE_LEN, 4, 0.3f);
    fill(ring0, RING_LEN, 5, 1.0f);

    Result snap = snapshots_loop(&l, state0, ring0);
    Result jour = journal_loop(&l, state0, ring0);
    printf("snapshots + rollback: checksum 0x%016llx\n", (unsigned long long)snap.sum);
    printf("journal + commit:     checksum 0x%016llx\n", (unsigned long long)jour.sum);
    int same = snap.sum == jour.sum && same_bits(snap.state, jour.state, STATE_LEN) &&
               same_bits(snap.ring, jour.ring, RING_LEN);
    printf("bit-identical: %s\n", same ? "yes" : "no");

    free(state0);
    free(snap.state);
    free(snap.ring);
    free(jour.state);
    free(jour.ring);
    CHECK(memra_engine_destroy(e)); /* frees every buffer still allocated */
    return same ? 0 : 1;
}
