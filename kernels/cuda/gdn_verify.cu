/*
 * CUDA kernel: the 1.1 one-launch verify (docs/verify-1.1.md). One kernel does the conv, the
 * prep and the scan of b_n sequences x t rows, in the three modes (SNAPSHOTS, FINAL_ONLY, JOURNAL),
 * and the journal commit (JOURNAL with t == 0). Its arithmetic is the 1.0 kernels': the conv
 * row, the normalisation and the gates come from gdn_math.cuh, the scan row from gdn_scan.cuh,
 * so the verify is bit-identical to the 1.0 program by construction.
 *
 * There are two forms of the kernel, with the same arithmetic and the same results. On devices
 * of compute capability 9.0 and newer, when a key head is read by at most two value heads, the
 * cluster form (gdn_verify_cluster_kernel, below) lets the blocks that read one key head share
 * its conv and normalisation. Elsewhere the plain form described first does that work in every
 * block.
 *
 * Thread mapping (plain form). A block is the scan's block: 128 threads carrying SCAN_COLS = 32
 * adjacent columns of one (sequence b, value head h), 8 threads per pair of columns (gdn_scan.cu
 * explains the layout). The grid is b_n * num_v * 4 blocks, block (b, h, g) covering columns 32g ..
 * 32g + 31. Each block computes, for every row, the conv of exactly the channels its scan needs:
 * the 128 q and 128 k channels of its key head kh and the 32 v channels of its columns; thread i
 * convolves q channel i and k channel i, threads 0..31 also v channel 32g + i, each holding its
 * channel's window in registers across the rows. The conv outputs go to shared memory, where each
 * warp normalises q and k vectors of some rows (the prep's lane layout: lane L holds elements L,
 * L+32, L+64, L+96) and threads 0..7 compute the rows' beta and g_log. The scan then reads its k, q
 * and v from shared memory. Rows go in chunks of VERIFY_CHUNK so that any t fits in shared memory;
 * the conv windows and the state stay in registers between chunks.
 *
 * The q and k conv of a key head is computed by every block that reads it (4 per value head,
 * num_v / num_k value heads per key head). That redundant arithmetic is small against the scan's
 * and saves a hand-over between kernels, which is what a single launch is for.
 *
 * Shared in-place buffers. The ring of a q or k channel is read by all the blocks of its key
 * head but may be rewritten only when none of them still has to read it; a block that started
 * late would otherwise see the next ring. The same holds for a journal's q and k channels and
 * its per-key-head header word. So the blocks of a (sequence, key head) count themselves in:
 * after its last read of shared data, each block adds one to a counter of the engine's
 * workspace (counters[b * num_k + kh]); the block that brings it to the group's size is the
 * last reader, writes the shared data (rings, journal rows and header of the key head) and sets
 * the counter back to zero for the next launch. No block ever waits for another, so the scheme
 * cannot deadlock whatever the scheduling. Data that only one block reads (its v channels, its
 * state columns) it writes itself. Outputs that several blocks could write (conv outputs and
 * snapshots of q and k channels, a head's q_l2, k_l2, beta, g_log) are written by one
 * designated block.
 *
 * Journal mode. With n = accepted[b] (checked against the journal's header: a larger n leaves
 * the whole sequence untouched and is recorded in the engine's error record), rows 0 .. n-1 of
 * the work are the journal's rows (raw qkv, beta_raw, alpha), rows n .. n+t-1 the new rows. At
 * the boundary the windows and the state are the folded ones: they are written back (the ring
 * by its writers as above, the state columns in place when n > 0) and the new rows go on from
 * copies in registers; the new rows' o (and optional activations) are written, no snapshot and
 * no final state. Finally the new rows become the journal.
 */
#include <stdint.h>
#include <stdlib.h>

#include <cooperative_groups.h>
#include <cuda/atomic>

#include "gdn_common.cuh"
#include "gdn_math.cuh"
#include "gdn_scan.cuh"
#include "kernels.h"

#define VERIFY_THREADS SCAN_THREADS
/* Rows staged in shared memory at a time. */
#define VERIFY_CHUNK 8
/* Blocks per multiprocessor the register allocation must allow. */
#ifndef VERIFY_MIN_BLOCKS
#define VERIFY_MIN_BLOCKS 4
#endif
/* Channels a block convolves: q and k of its key head, v of its columns. */
#define VERIFY_QK (2 * MEMRA__S)
#define VERIFY_CHANNELS (VERIFY_QK + SCAN_COLS)

static_assert(VERIFY_THREADS == MEMRA__S, "one thread per q (and k) channel");
static_assert(VERIFY_CHUNK <= VERIFY_THREADS, "one thread per row computes the gates");
static_assert(VERIFY_CHANNELS % 4 == 0, "16-byte aligned shared rows");

static __device__ __forceinline__ uint32_t word_u32(const float *p)
{
    return __float_as_uint(*p);
}

/*
 * Records a device-side finding; the first one wins, later ones are dropped. The record itself
 * lives in mapped host memory, where the engine reads it after its next synchronisation; the
 * race between blocks that find something at once is settled on a word of device memory
 * (`claim`), because atomics on host memory are not available over every interconnect.
 */
static __device__ void record_error(memra__dev_error *err, uint32_t *claim, uint32_t op, size_t seq,
                                    uint32_t value, uint32_t limit, uint32_t what)
{
    if (err == nullptr || atomicCAS(claim, 0u, 1u) != 0u)
        return;
    volatile memra__dev_error *rec = err;
    rec->op = op;
    rec->seq = (uint32_t)seq;
    rec->value = value;
    rec->limit = limit;
    rec->what = what;
    __threadfence_system();
    rec->set = 1u;
    __threadfence_system();
}

/*
 * The shared memory of one block, channels in the order q | k | v (local channel l: q channel
 * l, k channel l - 128, v channel l - 256 of the block's columns). `raw` holds the conv's
 * inputs: PAD ring slots, then the chunk's rows, so that the window of row rr of local channel
 * l is raw[rr .. rr + PAD][l] and every (channel, row) output can be computed on its own. `x`
 * holds the conv outputs, then (q and k normalised in place) the scan's inputs.
 */
typedef struct verify_smem {
    float raw[VERIFY_CHUNK + MEMRA__D_CONV_MAX - 1][VERIFY_CHANNELS];
    float x[VERIFY_CHUNK][VERIFY_CHANNELS];
    float beta_raw[VERIFY_CHUNK], alpha[VERIFY_CHUNK];
    float beta[VERIFY_CHUNK], g_log[VERIFY_CHUNK];
    unsigned last;
} verify_smem;

/* The conv outputs of local channel l for rows 0 .. nr-1 of the chunk into x, each from its own
 * window (raw rows rr .. rr + PAD) through gdn_math.cuh's conv row: the rows are independent, so
 * their arithmetic chains overlap. */
template <int DCONV>
static __device__ __forceinline__ void conv_rows(verify_smem &sm, const float *w, size_t c,
                                                 unsigned l, unsigned nr)
{
    constexpr int PAD = DCONV - 1;
    float w8[MEMRA__D_CONV_MAX];
#pragma unroll
    for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
        w8[j] = j < DCONV ? w[c * DCONV + j] : 0.0f;
#pragma unroll
    for (unsigned rr = 0; rr < VERIFY_CHUNK; rr++) {
        if (rr < nr) {
            float win[MEMRA__D_CONV_MAX];
#pragma unroll
            for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
                win[j] = j <= PAD ? sm.raw[rr + j][l] : 0.0f;
            sm.x[rr][l] = memra__conv_row<PAD>(win, w8);
        }
    }
}

/* The ring after row rr of the chunk (raw rows rr + 1 .. rr + PAD) of local channel l, to
 * dst[0 .. PAD-1]. */
template <int PAD>
static __device__ __forceinline__ void ring_after(const verify_smem &sm, unsigned rr, unsigned l,
                                                  float *dst)
{
#pragma unroll
    for (int j = 0; j < PAD; j++)
        dst[j] = sm.raw[rr + 1 + j][l];
}

/* This thread's state columns, 16- or 4-byte accesses. */
static __device__ __forceinline__ void load_state(float (&s)[SCAN_NC][SCAN_ELEMS], const float *p,
                                                  bool vec)
{
#pragma unroll
    for (int nn = 0; nn < SCAN_NC; nn++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (vec)
                load4<true>(s[nn] + 4 * r, p + nn * MEMRA__S + r * MEMRA__LANES);
            else
                load4<false>(s[nn] + 4 * r, p + nn * MEMRA__S + r * MEMRA__LANES);
        }
}

static __device__ __forceinline__ void store_state(float *p, const float (&s)[SCAN_NC][SCAN_ELEMS],
                                                   bool vec)
{
#pragma unroll
    for (int nn = 0; nn < SCAN_NC; nn++) {
        if (vec)
            store_column<true>(p + nn * MEMRA__S, s[nn]);
        else
            store_column<false>(p + nn * MEMRA__S, s[nn]);
    }
}

/* What a block knows of its sequence once it has read the table row and, in journal mode, the
 * accepted count: where its ring, states and journal are, how many journal rows it folds (n) and
 * how many rows it runs in all (n + t). */
struct verify_seq {
    float *ring;
    const float *state_in;
    float *state_out;
    float *jr;
    size_t jhdr, jrow;
    uint32_t n;
    size_t rows;
};

/* Reads sequence b's table row when the kernel executes (a replayed graph follows a rewritten
 * table) and checks its accepted count against the rows key head kh's journal holds. Every
 * block of the sequence sees the same two numbers and takes the same branch, so with a bad
 * count all of them return before any barrier (cluster barriers included) and leave the
 * sequence untouched; thread 0 of each records the finding, the first record wins. */
template <int PAD>
static __device__ __forceinline__ bool open_sequence(const memra__verify_args &a, size_t b,
                                                     size_t kh, unsigned tid, verify_seq &q)
{
    const bool journal = a.mode == MEMRA__MODE_JOURNAL;
    const uint64_t *row = a.table + b * MEMRA__TABLE_WIDTH;
    q.ring = PAD > 0 ? (float *)(uintptr_t)row[0] : nullptr;
    q.state_in = (const float *)(uintptr_t)row[1];
    q.state_out = (float *)(uintptr_t)row[(journal || a.t % 2 == 0) ? 1 : 2];
    q.jr = journal ? (float *)(uintptr_t)row[2] : nullptr;
    q.jhdr = MEMRA__JOURNAL_HEADER(a.num_k);
    q.jrow = MEMRA__JOURNAL_ROW(a.conv_dim, a.num_v);
    q.n = 0;
    if (journal) {
        const uint32_t held = word_u32(q.jr + kh);
        q.n = a.accepted[b];
        if (q.n > held) {
            if (tid == 0)
                record_error(a.err, a.err_claim, a.op, b, q.n, held,
                             MEMRA__ERR_ACCEPTED_OVER_JOURNAL);
            return false;
        }
    }
    q.rows = q.n + a.t;
    return true;
}

/* Row rr of the chunk as this thread's scan reads it from shared memory (either kernel's
 * layout: x holds the normalised q | k | v, then the gates): its 16 elements of k and q as
 * thread j of its group, the v of its columns (cl: the first, relative to c0), the gates. */
template <class Smem>
static __device__ __forceinline__ void chunk_row(scan_row &in, const Smem &sm, unsigned rr,
                                                 unsigned j, unsigned cl)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        load4<true>(in.k + 4 * r, &sm.x[rr][MEMRA__S + r * MEMRA__LANES + 4 * j]);
        load4<true>(in.q + 4 * r, &sm.x[rr][r * MEMRA__LANES + 4 * j]);
    }
#pragma unroll
    for (int nn = 0; nn < SCAN_NC; nn++)
        in.v[nn] = sm.x[rr][VERIFY_QK + cl + nn];
    in.g = sm.g_log[rr];
    in.beta = sm.beta[rr];
}

template <int DCONV, bool VEC>
__global__ void __launch_bounds__(VERIFY_THREADS, VERIFY_MIN_BLOCKS)
    gdn_verify_kernel(const memra__verify_args a)
{
    constexpr int PAD = DCONV - 1;
    __shared__ __align__(16) verify_smem sm;

    memra__pdl_enter();

    const unsigned tid = threadIdx.x;
    const unsigned grp = blockIdx.x % SCAN_BLOCKS_PER_HEAD;
    const size_t bh = blockIdx.x / SCAN_BLOCKS_PER_HEAD;
    const size_t h = bh % a.num_v;
    const size_t b = bh / a.num_v;
    const size_t num_v = a.num_v, t = a.t, conv_dim = a.conv_dim, key_dim = a.key_dim;
    const size_t ratio = num_v / a.num_k;
    const size_t kh = a.grouped ? h / ratio : h % a.num_k;
    /* The first value head that reads key head kh: its group-0 block writes the q and k
     * channels' outputs; each head's group-0 block writes the head's outputs. */
    const size_t first_vh = a.grouped ? kh * ratio : kh;
    const bool qk_writer = grp == 0 && h == first_vh;
    const bool head_writer = grp == 0;
    const unsigned c0 = grp * SCAN_COLS;
    const bool journal = a.mode == MEMRA__MODE_JOURNAL;

    verify_seq sq;
    if (!open_sequence<PAD>(a, b, kh, tid, sq))
        return;
    float *const ring = sq.ring;
    const float *const state_in = sq.state_in;
    float *const state_out = sq.state_out;
    float *const jr = sq.jr;
    const size_t jhdr = sq.jhdr, jrow = sq.jrow, rows = sq.rows;
    const uint32_t n = sq.n;

    /* This thread's channels: q and k channel tid of key head kh and (tid < 32) v channel
     * c0 + tid of head h; their places in shared memory are tid, 128 + tid and 256 + tid. */
    const size_t ch_q = kh * MEMRA__S + tid;
    const size_t ch_k = key_dim + kh * MEMRA__S + tid;
    const bool has_v = tid < SCAN_COLS;
    const size_t ch_v = 2 * key_dim + h * MEMRA__S + c0 + (has_v ? tid : 0);

    /* The rings of the block's channels, staged as the first PAD rows of raw: three
     * contiguous runs of device memory (q, k and v channels), read by consecutive threads. */
    if (PAD > 0) {
        const float *rq = ring + kh * MEMRA__S * PAD;
        const float *rk = ring + (key_dim + kh * MEMRA__S) * PAD;
        const float *rv = ring + (2 * key_dim + h * MEMRA__S + c0) * PAD;
        constexpr int PADD = PAD > 0 ? PAD : 1; /* PAD as a divisor */
        for (int i = (int)tid; i < MEMRA__S * PAD; i += VERIFY_THREADS) {
            sm.raw[i % PADD][i / PADD] = rq[i];
            sm.raw[i % PADD][MEMRA__S + i / PADD] = rk[i];
        }
        for (int i = (int)tid; i < SCAN_COLS * PAD; i += VERIFY_THREADS)
            sm.raw[i % PADD][VERIFY_QK + i / PADD] = rv[i];
    }

    /* The state columns of this thread (gdn_scan.cu's layout). */
    const unsigned j = tid % SCAN_GROUP;
    const unsigned cl = tid / SCAN_GROUP * SCAN_NC; /* first column, relative to c0 */
    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    const size_t state_words = num_v * head_words;
    const size_t col = h * head_words + (size_t)(c0 + cl) * MEMRA__S + 4 * j;
    const bool state_vec = ((((uintptr_t)state_in | (uintptr_t)state_out) & 15u) == 0);
    float s[SCAN_NC][SCAN_ELEMS];

    /*
     * Counting in as a reader of the key head's shared data (see the header comment). Every
     * shared value this block reads (rings, journal rows, the header word) has reached a
     * register that was used or shared memory before the barrier, so none of those reads can
     * still be outstanding; thread 0's acquire-release increment then orders them before any
     * write the last reader makes, and orders the last reader's writes after everyone's reads.
     * The state is loaded only after the count when that comes in the first chunk, so that the
     * release does not wait for the state's HBM latency, which then overlaps the conv and prep.
     */
    const unsigned readers = (unsigned)(ratio * SCAN_BLOCKS_PER_HEAD);
    bool counted = false, state_loaded = false;
    auto count_in = [&]() {
        __syncthreads();
        if (tid == 0) {
            cuda::atomic_ref<unsigned, cuda::thread_scope_device> cnt(a.counters[b * a.num_k + kh]);
            const unsigned before = cnt.fetch_add(1u, cuda::memory_order_acq_rel);
            const bool last = before + 1 == readers;
            if (last)
                cnt.store(0u, cuda::memory_order_relaxed);
            sm.last = last ? 1u : 0u;
        }
        __syncthreads();
        counted = true;
    };
    /* A fold longer than one chunk reads journal rows after the first chunk's scan has begun:
     * the state must be there first. */
    if (n > VERIFY_CHUNK) {
        load_state(s, state_in + col, state_vec);
        state_loaded = true;
    }

    const size_t x_base = b * t; /* row index of new row 0 in [b_n, t, ...] */

    for (size_t r0 = 0; r0 < rows || !counted; r0 += VERIFY_CHUNK) {
        const size_t nr = r0 >= rows ? 0 : rows - r0 < VERIFY_CHUNK ? rows - r0 : VERIFY_CHUNK;

        /* Stage the chunk's raw inputs: journal rows below n, new rows from n. The loop has a
         * fixed trip count so that all its loads are in flight at once. */
#pragma unroll
        for (unsigned rr = 0; rr < VERIFY_CHUNK; rr++) {
            if (rr < nr) {
                const size_t gr = r0 + rr;
                const float *src =
                    gr < n ? jr + jhdr + gr * jrow : a.qkv + (x_base + (gr - n)) * conv_dim;
                const float xq = src[ch_q], xk = src[ch_k];
                const float xv = has_v ? src[ch_v] : 0.0f;
                sm.raw[PAD + rr][tid] = xq;
                sm.raw[PAD + rr][MEMRA__S + tid] = xk;
                if (has_v)
                    sm.raw[PAD + rr][VERIFY_QK + tid] = xv;
            }
        }
        if (tid < nr) {
            const size_t gr = r0 + tid;
            if (gr < n) {
                const float *src = jr + jhdr + gr * jrow + conv_dim;
                sm.beta_raw[tid] = src[h];
                sm.alpha[tid] = src[num_v + h];
            } else {
                const size_t hr = (x_base + (gr - n)) * num_v + h;
                sm.beta_raw[tid] = a.beta_raw[hr];
                sm.alpha[tid] = a.alpha[hr];
            }
        }
        if (!counted && r0 + nr >= n)
            count_in();
        else
            __syncthreads();
        if (!state_loaded) {
            load_state(s, state_in + col, state_vec);
            state_loaded = true;
        }
        if (nr == 0)
            break;
        const bool last = counted && sm.last != 0;

        /* Conv of the chunk's rows: this thread's three channels (gdn_math.cuh's row), then
         * the rings the rows leave, which are windows of raw: after each new row for the
         * snapshots, after row n - 1 for a journal's folded ring (n == 0 leaves the ring as it
         * is), after the last row for the final ring. */
        conv_rows<DCONV>(sm, a.w, ch_q, tid, nr);
        conv_rows<DCONV>(sm, a.w, ch_k, MEMRA__S + tid, nr);
        if (has_v)
            conv_rows<DCONV>(sm, a.w, ch_v, VERIFY_QK + tid, nr);
        for (unsigned rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            const bool is_new = gr >= n;
            const size_t r = gr - n; /* new-row index when is_new */
            if (is_new && a.conv_out != nullptr) {
                float *y = a.conv_out + (x_base + r) * conv_dim;
                if (qk_writer) {
                    y[ch_q] = sm.x[rr][tid];
                    y[ch_k] = sm.x[rr][MEMRA__S + tid];
                }
                if (has_v)
                    y[ch_v] = sm.x[rr][VERIFY_QK + tid];
            }
            if (PAD > 0 && is_new && a.snap_conv != nullptr && r + 1 < t) {
                float *sn = a.snap_conv + (b * (t - 1) + r) * conv_dim * PAD;
                if (qk_writer) {
                    ring_after<PAD>(sm, rr, tid, sn + ch_q * PAD);
                    ring_after<PAD>(sm, rr, MEMRA__S + tid, sn + ch_k * PAD);
                }
                if (has_v)
                    ring_after<PAD>(sm, rr, VERIFY_QK + tid, sn + ch_v * PAD);
            }
            const bool ring_point = journal ? (n > 0 && gr + 1 == n) : (gr + 1 == rows);
            if (PAD > 0 && ring_point) {
                if (last) {
                    ring_after<PAD>(sm, rr, tid, ring + ch_q * PAD);
                    ring_after<PAD>(sm, rr, MEMRA__S + tid, ring + ch_k * PAD);
                }
                if (has_v)
                    ring_after<PAD>(sm, rr, VERIFY_QK + tid, ring + ch_v * PAD);
            }
        }
        /* The next chunk's first PAD raw rows are this chunk's last (full chunks have
         * VERIFY_CHUNK >= PAD rows, so source and destination rows do not overlap); each
         * thread moves its own channels, which only it reads in the conv. */
        if (PAD > 0 && r0 + nr < rows) {
#pragma unroll
            for (int j = 0; j < PAD; j++) {
                sm.raw[j][tid] = sm.raw[nr + j][tid];
                sm.raw[j][MEMRA__S + tid] = sm.raw[nr + j][MEMRA__S + tid];
                if (has_v)
                    sm.raw[j][VERIFY_QK + tid] = sm.raw[nr + j][VERIFY_QK + tid];
            }
        }
        __syncthreads();

        /* Prep: warp w normalises the vectors w, w + 4, ... of the chunk (vector 2rr is row rr's
         * q, 2rr + 1 its k); threads below nr compute their row's gates. */
        const unsigned warp = tid / MEMRA__LANES, lane = tid % MEMRA__LANES;
#pragma unroll
        for (unsigned i = 0; i < 2 * VERIFY_CHUNK / SCAN_WARPS; i++) {
            const unsigned vec = warp + i * SCAN_WARPS;
            if (vec < 2 * nr) {
                float *xv = &sm.x[vec / 2][(vec % 2) * MEMRA__S];
                float x[MEMRA__PER_LANE];
#pragma unroll
                for (int r = 0; r < MEMRA__PER_LANE; r++)
                    x[r] = xv[r * MEMRA__LANES + lane];
                memra__l2_normalise(x, a.eps);
#pragma unroll
                for (int r = 0; r < MEMRA__PER_LANE; r++)
                    xv[r * MEMRA__LANES + lane] = x[r];
            }
        }
        if (tid < nr) {
            sm.beta[tid] = memra__gate_beta(sm.beta_raw[tid]);
            sm.g_log[tid] = memra__gate_g_log(sm.alpha[tid], a.dt_bias[h], a.a[h]);
        }
        __syncthreads();

        /* The optional prep outputs of the chunk's new rows. */
        for (unsigned rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            if (gr < n)
                continue;
            const size_t hr = (x_base + (gr - n)) * num_v + h;
            if (head_writer) {
                if (a.q_l2 != nullptr)
                    a.q_l2[hr * MEMRA__S + tid] = sm.x[rr][tid];
                if (a.k_l2 != nullptr)
                    a.k_l2[hr * MEMRA__S + tid] = sm.x[rr][MEMRA__S + tid];
                if (tid == 0 && a.beta != nullptr)
                    a.beta[hr] = sm.beta[rr];
                if (tid == 0 && a.g_log != nullptr)
                    a.g_log[hr] = sm.g_log[rr];
            }
            if (has_v && a.v_g != nullptr)
                a.v_g[hr * MEMRA__S + c0 + tid] = sm.x[rr][VERIFY_QK + tid];
        }

        /* Scan the chunk's rows. */
        for (unsigned rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            scan_row in;
            chunk_row(in, sm, rr, j, cl);

            float *op = nullptr, *sn = nullptr;
            if (gr >= n) {
                const size_t r = gr - n;
                op = a.o + ((x_base + r) * num_v + h) * MEMRA__S + c0 + cl;
                if (a.snap_ssm != nullptr && r + 1 < t)
                    sn = a.snap_ssm + (b * (t - 1) + r) * state_words + col;
            }
            scan_row_step<VEC>(s, in, j, a.scale, op, sn);

            /* Journal: the folded state goes back in place; the new rows continue from it. */
            if (journal && n > 0 && gr + 1 == n)
                store_state(state_out + col, s, state_vec);
        }
        __syncthreads();
    }

    if (!journal) {
        store_state(state_out + col, s, state_vec);
        return;
    }

    /* Journal: the new rows replace the old ones. Every block writes its v channels; the last
     * reader of the key head writes its q and k channels, the beta_raw and alpha of the value
     * heads that read it, and its header word. */
    const bool last = sm.last != 0;
    for (size_t r = 0; r < t; r++) {
        const float *src = a.qkv + (x_base + r) * conv_dim;
        float *dst = jr + jhdr + r * jrow;
        if (has_v)
            dst[ch_v] = src[ch_v];
        if (last) {
            dst[ch_q] = src[ch_q];
            dst[ch_k] = src[ch_k];
            for (size_t i = tid; i < ratio; i += VERIFY_THREADS) {
                const size_t vh = a.grouped ? kh * ratio + i : kh + i * a.num_k;
                dst[conv_dim + vh] = a.beta_raw[(x_base + r) * num_v + vh];
                dst[conv_dim + num_v + vh] = a.alpha[(x_base + r) * num_v + vh];
            }
        }
    }
    if (last && tid == 0)
        jr[kh] = __uint_as_float((uint32_t)t);
}

/*
 * The cluster form of the verify (compute capability 9.0 and newer, num_v / num_k <= 2): the
 * CS = 4 * num_v / num_k blocks that read one key head (the 4 column groups of each of its
 * value heads) form one thread-block cluster, and share its q and k work instead of each doing
 * all of it. Block rank r of the cluster convolves q/k local channels [r * QKP, (r + 1) * QKP)
 * (QKP = 256 / CS; local channel l < 128 is q channel l of the key head, l >= 128 is k channel
 * l - 128) and its own 32 v channels; the conv outputs stay in its shared memory. Warp w of rank
 * r then normalises vectors 4r + w, 4r + w + 4 CS, ... of the chunk (vector 2rr is row rr's q,
 * 2rr + 1 its k): lane L reads its four elements L + 32i from the ranks holding them (distributed
 * shared memory), runs the prep's normalisation, and writes the result into every rank's `x`.
 * Each rank then scans its own columns from its own shared memory, as the plain kernel does.
 *
 * Every shared buffer has exactly one reader-writer block here: a q or k channel's ring and
 * journal rows belong to the rank that convolves it, a v channel's to its block, a value head's
 * journal beta_raw and alpha (read by the head's 4 blocks) are rewritten by its group-0 block
 * after the cluster's last barrier, the key head's header word by rank 0. So no counter is
 * needed, and a late block cannot exist: a cluster's blocks run together.
 *
 * Grid: blockIdx.x = ((b * num_k + kh) * ratio + vi) * 4 + grp, value head vi of key head kh
 * (vh = kh * ratio + vi grouped, kh + vi * num_k tiled), so that the CS consecutive blocks of a
 * cluster are one key head's.
 */
#define CL_NCH_MAX (VERIFY_QK / 4 + SCAN_COLS) /* q/k channels of a rank (CS = 4) + v */

typedef struct cluster_smem {
    float raw[VERIFY_CHUNK + MEMRA__D_CONV_MAX - 1][CL_NCH_MAX];
    float y[VERIFY_CHUNK][VERIFY_QK / 4]; /* conv outputs of the rank's q/k channels */
    float x[VERIFY_CHUNK][VERIFY_CHANNELS];
    float w8[CL_NCH_MAX][MEMRA__D_CONV_MAX];
    float beta_raw[VERIFY_CHUNK], alpha[VERIFY_CHUNK];
    float beta[VERIFY_CHUNK], g_log[VERIFY_CHUNK];
} cluster_smem;

/* The ring after row rr of a staged raw array of width W (rows rr + 1 .. rr + PAD). */
template <int PAD, int W>
static __device__ __forceinline__ void
ring_after_c(const float (&raw)[VERIFY_CHUNK + MEMRA__D_CONV_MAX - 1][W], unsigned rr, unsigned l,
             float *dst)
{
#pragma unroll
    for (int j = 0; j < PAD; j++)
        dst[j] = raw[rr + 1 + j][l];
}

template <int DCONV, bool VEC, int CS>
__global__ void __launch_bounds__(VERIFY_THREADS, VERIFY_MIN_BLOCKS)
    gdn_verify_cluster_kernel(const memra__verify_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int PAD = DCONV - 1;
    /* PAD as a divisor, for index arithmetic that only runs when PAD > 0. */
    constexpr unsigned PADD = PAD > 0 ? PAD : 1;
    constexpr unsigned QKP = VERIFY_QK / CS;
    constexpr unsigned NCH = QKP + SCAN_COLS;
    __shared__ __align__(16) cluster_smem sm;
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();

    memra__pdl_enter();

    const unsigned tid = threadIdx.x;
    const unsigned rank = cluster.block_rank();
    const unsigned grp = blockIdx.x % SCAN_BLOCKS_PER_HEAD;
    const size_t num_v = a.num_v, t = a.t, conv_dim = a.conv_dim, key_dim = a.key_dim;
    const size_t ratio = num_v / a.num_k;
    const size_t bkv = blockIdx.x / SCAN_BLOCKS_PER_HEAD; /* (b * num_k + kh) * ratio + vi */
    const size_t vi = bkv % ratio, bk = bkv / ratio;
    const size_t kh = bk % a.num_k, b = bk / a.num_k;
    const size_t h = a.grouped ? kh * ratio + vi : kh + vi * a.num_k;
    const unsigned c0 = grp * SCAN_COLS;
    const bool journal = a.mode == MEMRA__MODE_JOURNAL;

    verify_seq sq;
    if (!open_sequence<PAD>(a, b, kh, tid, sq))
        return;
    float *const ring = sq.ring;
    const float *const state_in = sq.state_in;
    float *const state_out = sq.state_out;
    float *const jr = sq.jr;
    const size_t jhdr = sq.jhdr, jrow = sq.jrow, rows = sq.rows;
    const uint32_t n = sq.n;

    /* The state columns, first, so that their latency overlaps everything before the scan. */
    const unsigned j = tid % SCAN_GROUP;
    const unsigned cl = tid / SCAN_GROUP * SCAN_NC;
    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    const size_t state_words = num_v * head_words;
    const size_t col = h * head_words + (size_t)(c0 + cl) * MEMRA__S + 4 * j;
    const bool state_vec = ((((uintptr_t)state_in | (uintptr_t)state_out) & 15u) == 0);
    float s[SCAN_NC][SCAN_ELEMS];
    load_state(s, state_in + col, state_vec);

    /* The rank's channels: local l < QKP is q/k channel qk0 + l, l >= QKP v channel
     * vc0 + l - QKP; both runs are contiguous in the channel order. */
    const unsigned qk0 = rank * QKP;
    const size_t gq0 =
        qk0 < MEMRA__S ? kh * MEMRA__S + qk0 : key_dim + kh * MEMRA__S + qk0 - MEMRA__S;
    const size_t vc0 = 2 * key_dim + h * MEMRA__S + c0;
    auto channel = [&](unsigned l) -> size_t { return l < QKP ? gq0 + l : vc0 + (l - QKP); };

    const size_t x_base = b * t;
    const unsigned warp = tid / MEMRA__LANES, lane = tid % MEMRA__LANES;
    const float dt_h = a.dt_bias[h], a_h = a.a[h];

    /* Per thread, the staging below moves X_PER raw inputs per chunk and, with the first chunk,
     * W_PER weights (zero beyond d_conv) and R_PER ring slots: all loads of a step are issued
     * before any of their stores, so that their latencies overlap instead of adding up. */
    constexpr unsigned X_PER = (NCH * VERIFY_CHUNK + VERIFY_THREADS - 1) / VERIFY_THREADS;
    constexpr unsigned W_PER = (NCH * MEMRA__D_CONV_MAX + VERIFY_THREADS - 1) / VERIFY_THREADS;
    constexpr unsigned R_PER = (NCH * PADD + VERIFY_THREADS - 1) / VERIFY_THREADS;

    for (size_t r0 = 0; r0 < rows; r0 += VERIFY_CHUNK) {
        const unsigned nr = (unsigned)(rows - r0 < VERIFY_CHUNK ? rows - r0 : VERIFY_CHUNK);

        /* Stage the chunk's raw inputs of the rank's channels and its head's gate inputs (and,
         * first, the channels' weights and rings). */
        float xr[X_PER], wr[W_PER], rg[R_PER];
        float br = 0.0f, al = 0.0f;
#pragma unroll
        for (unsigned u = 0; u < X_PER; u++) {
            const unsigned i = tid + u * VERIFY_THREADS, l = i % NCH, rr = i / NCH;
            const size_t gr = r0 + rr;
            const float *src =
                gr < n ? jr + jhdr + gr * jrow : a.qkv + (x_base + (gr - n)) * conv_dim;
            xr[u] = rr < nr ? src[channel(l)] : 0.0f;
        }
        if (r0 == 0) {
#pragma unroll
            for (unsigned u = 0; u < W_PER; u++) {
                const unsigned i = tid + u * VERIFY_THREADS;
                const unsigned l = i / MEMRA__D_CONV_MAX, jj = i % MEMRA__D_CONV_MAX;
                wr[u] = (l < NCH && jj < DCONV) ? a.w[channel(l) * DCONV + jj] : 0.0f;
            }
#pragma unroll
            for (unsigned u = 0; u < R_PER; u++) {
                const unsigned i = tid + u * VERIFY_THREADS;
                rg[u] =
                    (PAD > 0 && i < NCH * PAD) ? ring[channel(i / PADD) * PAD + i % PADD] : 0.0f;
            }
        }
        if (tid < nr) {
            const size_t gr = r0 + tid;
            const float *src = gr < n ? jr + jhdr + gr * jrow + conv_dim : nullptr;
            const size_t hr = (x_base + (gr - n)) * num_v + h;
            br = gr < n ? src[h] : a.beta_raw[hr];
            al = gr < n ? src[num_v + h] : a.alpha[hr];
        }
#pragma unroll
        for (unsigned u = 0; u < X_PER; u++) {
            const unsigned i = tid + u * VERIFY_THREADS;
            if (i / NCH < nr)
                sm.raw[PAD + i / NCH][i % NCH] = xr[u];
        }
        if (r0 == 0) {
#pragma unroll
            for (unsigned u = 0; u < W_PER; u++) {
                const unsigned i = tid + u * VERIFY_THREADS;
                if (i / MEMRA__D_CONV_MAX < NCH)
                    sm.w8[i / MEMRA__D_CONV_MAX][i % MEMRA__D_CONV_MAX] = wr[u];
            }
#pragma unroll
            for (unsigned u = 0; u < R_PER; u++) {
                const unsigned i = tid + u * VERIFY_THREADS;
                if (PAD > 0 && i < NCH * PAD)
                    sm.raw[i % PADD][i / PADD] = rg[u];
            }
        }
        if (tid < nr) {
            sm.beta_raw[tid] = br;
            sm.alpha[tid] = al;
        }
        __syncthreads();

        /* Conv: one (channel, row) output per iteration, each from its own window. The v
         * channels' outputs go straight to x, the q/k channels' to y for the normalisers. */
        for (unsigned i = tid; i < NCH * nr; i += VERIFY_THREADS) {
            const unsigned l = i % NCH, rr = i / NCH;
            float win[MEMRA__D_CONV_MAX], w8[MEMRA__D_CONV_MAX];
#pragma unroll
            for (int jj = 0; jj < MEMRA__D_CONV_MAX; jj++) {
                win[jj] = jj <= PAD ? sm.raw[rr + jj][l] : 0.0f;
                w8[jj] = sm.w8[l][jj];
            }
            const float yv = memra__conv_row<PAD>(win, w8);
            if (l < QKP)
                sm.y[rr][l] = yv;
            else
                sm.x[rr][VERIFY_QK + l - QKP] = yv;
            const size_t gr = r0 + rr;
            if (gr >= n && a.conv_out != nullptr)
                a.conv_out[(x_base + gr - n) * conv_dim + channel(l)] = yv;
        }
        /* Rings: after each new row for the snapshots, after row n - 1 for a journal's folded
         * ring, after the last row for the final ring; all windows of raw. */
        if (PAD > 0) {
            for (unsigned i = tid; i < NCH * nr; i += VERIFY_THREADS) {
                const unsigned l = i % NCH, rr = i / NCH;
                const size_t gr = r0 + rr, r = gr - n;
                float *dst = nullptr;
                if (gr >= n && a.snap_conv != nullptr && r + 1 < t)
                    dst = a.snap_conv + (b * (t - 1) + r) * conv_dim * PAD;
                if (dst != nullptr)
                    ring_after_c<PAD>(sm.raw, rr, l, dst + channel(l) * PAD);
                if (journal ? (n > 0 && gr + 1 == n) : (gr + 1 == rows))
                    ring_after_c<PAD>(sm.raw, rr, l, ring + channel(l) * PAD);
            }
        }
        if (tid < nr) {
            sm.beta[tid] = memra__gate_beta(sm.beta_raw[tid]);
            sm.g_log[tid] = memra__gate_g_log(sm.alpha[tid], dt_h, a_h);
        }
        cluster.sync();

        /* Prep: this warp's vectors, gathered from the ranks that convolved them, normalised,
         * and written into every rank's x. */
        for (unsigned vec = rank * SCAN_WARPS + warp; vec < 2 * nr; vec += CS * SCAN_WARPS) {
            const unsigned rr = vec / 2, base = (vec % 2) * MEMRA__S;
            float x[MEMRA__PER_LANE];
#pragma unroll
            for (int r = 0; r < MEMRA__PER_LANE; r++) {
                const unsigned l = base + r * MEMRA__LANES + lane;
                const float *yr = cluster.map_shared_rank(&sm.y[rr][l % QKP], l / QKP);
                x[r] = *yr;
            }
            memra__l2_normalise(x, a.eps);
            const size_t gr = r0 + rr;
#pragma unroll
            for (int r = 0; r < MEMRA__PER_LANE; r++) {
                const unsigned l = base + r * MEMRA__LANES + lane;
                for (unsigned q = 0; q < CS; q++)
                    *cluster.map_shared_rank(&sm.x[rr][l], q) = x[r];
                if (gr >= n) {
                    float *out = base == 0 ? a.q_l2 : a.k_l2;
                    if (out != nullptr)
                        for (size_t v2 = 0; v2 < ratio; v2++) {
                            const size_t vh = a.grouped ? kh * ratio + v2 : kh + v2 * a.num_k;
                            out[((x_base + gr - n) * num_v + vh) * MEMRA__S + l - base] = x[r];
                        }
                }
            }
        }
        /* This block's head outputs of the chunk's new rows. */
        for (unsigned rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            if (gr < n)
                continue;
            const size_t hr = (x_base + gr - n) * num_v + h;
            if (grp == 0 && tid == 0 && a.beta != nullptr)
                a.beta[hr] = sm.beta[rr];
            if (grp == 0 && tid == 0 && a.g_log != nullptr)
                a.g_log[hr] = sm.g_log[rr];
            if (tid < SCAN_COLS && a.v_g != nullptr)
                a.v_g[hr * MEMRA__S + c0 + tid] = sm.x[rr][VERIFY_QK + tid];
        }
        /* The next chunk's first PAD raw rows are this chunk's last. */
        if (PAD > 0 && r0 + nr < rows)
            for (int i = (int)tid; i < (int)(NCH * PAD); i += VERIFY_THREADS)
                sm.raw[i / NCH][i % NCH] = sm.raw[nr + i / NCH][i % NCH];
        cluster.sync();

        /* Scan the chunk's rows, each row's at overlapping the next row's kv
         * (scan_row_rest). */
        float kv[SCAN_NC], kv_next[SCAN_NC];
        {
            float k0[SCAN_ELEMS];
#pragma unroll
            for (int r = 0; r < 4; r++)
                load4<true>(k0 + 4 * r, &sm.x[0][MEMRA__S + r * MEMRA__LANES + 4 * j]);
            scan_row_kv(s, k0, j, kv);
        }
        for (unsigned rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            scan_row in;
            chunk_row(in, sm, rr, j, cl);
            float k_next[SCAN_ELEMS];
            const bool next = rr + 1 < nr;
            if (next) {
#pragma unroll
                for (int r = 0; r < 4; r++)
                    load4<true>(k_next + 4 * r, &sm.x[rr + 1][MEMRA__S + r * MEMRA__LANES + 4 * j]);
            }
            float *op = nullptr, *sn = nullptr;
            if (gr >= n) {
                const size_t r = gr - n;
                op = a.o + ((x_base + r) * num_v + h) * MEMRA__S + c0 + cl;
                if (a.snap_ssm != nullptr && r + 1 < t)
                    sn = a.snap_ssm + (b * (t - 1) + r) * state_words + col;
            }
            scan_row_rest<VEC>(s, in, kv, j, a.scale, op, sn, next, k_next, kv_next);
#pragma unroll
            for (int nn = 0; nn < SCAN_NC; nn++)
                kv[nn] = kv_next[nn];
            if (journal && n > 0 && gr + 1 == n)
                store_state(state_out + col, s, state_vec);
        }
        /* The raw rows moved above and x are rewritten by the next chunk only after its first
         * barrier; the scan reads nothing else of the next chunk's. */
        __syncthreads();
    }
    if (rows == 0)
        cluster.sync(); /* a commit of nothing still rewrites the header below */

    if (!journal) {
        store_state(state_out + col, s, state_vec);
        return;
    }
    /* Journal: the new rows replace the old ones, each part written by its only reader. */
    for (size_t r = 0; r < t; r++) {
        const float *src = a.qkv + (x_base + r) * conv_dim;
        float *dst = jr + jhdr + r * jrow;
        for (unsigned l = tid; l < NCH; l += VERIFY_THREADS)
            dst[channel(l)] = src[channel(l)];
        if (grp == 0 && tid == 0) {
            dst[conv_dim + h] = a.beta_raw[(x_base + r) * num_v + h];
            dst[conv_dim + num_v + h] = a.alpha[(x_base + r) * num_v + h];
        }
    }
    if (rank == 0 && tid == 0)
        jr[kh] = __uint_as_float((uint32_t)t);
#endif
}

/*
 * Device-side rollback: block (b, part) copies part of sequence b's snapshot n - 1 (or its final
 * state) into the canonical state and the ring. Thread i copies words i, i + blockDim.x, ...
 * of its part; the parts split the state words evenly.
 */
#define ROLLBACK_THREADS 256
#define ROLLBACK_PARTS 32

__global__ void __launch_bounds__(ROLLBACK_THREADS)
    gdn_rollback_kernel(const memra__rollback_args a)
{
    memra__pdl_enter();
    const size_t b = blockIdx.x / ROLLBACK_PARTS, part = blockIdx.x % ROLLBACK_PARTS;
    const size_t t = a.t, pad = a.d_conv - 1;
    const uint64_t *row = a.table + b * MEMRA__TABLE_WIDTH;
    const uint32_t n = a.accepted[b];
    if (n == 0 || n > t) {
        if (part == 0 && threadIdx.x == 0)
            record_error(a.err, a.err_claim, MEMRA__OP_ROLLBACK, b, n, (uint32_t)t,
                         MEMRA__ERR_ROLLBACK_RANGE);
        return;
    }
    const size_t state_words = a.num_v * (size_t)MEMRA__S * MEMRA__S;
    const size_t ring_words = a.conv_dim * pad;
    float *canonical = (float *)(uintptr_t)row[1];
    const float *src_state, *src_ring = nullptr;
    if (n == t) {
        /* The ring already is the final one; the final state is in alternate for odd t. */
        if (t % 2 == 0)
            return;
        src_state = (const float *)(uintptr_t)row[2];
    } else {
        const size_t e = b * (t - 1) + (n - 1);
        src_state = a.snap_ssm + e * state_words;
        src_ring = ring_words > 0 ? a.snap_conv + e * ring_words : nullptr;
    }
    const size_t per = (state_words + ROLLBACK_PARTS - 1) / ROLLBACK_PARTS;
    const size_t lo = part * per, hi = lo + per < state_words ? lo + per : state_words;
    for (size_t i = lo + threadIdx.x; i < hi; i += ROLLBACK_THREADS)
        canonical[i] = src_state[i];
    if (src_ring != nullptr) {
        float *ring = (float *)(uintptr_t)row[0];
        const size_t rper = (ring_words + ROLLBACK_PARTS - 1) / ROLLBACK_PARTS;
        const size_t rlo = part * rper, rhi = rlo + rper < ring_words ? rlo + rper : ring_words;
        for (size_t i = rlo + threadIdx.x; i < rhi; i += ROLLBACK_THREADS)
            ring[i] = src_ring[i];
    }
}

/* MEMRA_VERIFY_NO_CLUSTER=1 selects the plain kernel everywhere: the tests run both forms on
 * one device, and a profile can compare them. Read once. */
static bool cluster_disabled(void)
{
    static int disabled = -1;
    if (disabled < 0) {
        const char *v = getenv("MEMRA_VERIFY_NO_CLUSTER");
        disabled = v != nullptr && v[0] == '1';
    }
    return disabled != 0;
}

/* Launches the cluster kernel with CS blocks per cluster and programmatic stream
 * serialisation (memra__launch's, plus the cluster dimension). */
template <int DCONV, bool VEC, int CS>
static int launch_cluster(const memra__verify_args *a, void *stream)
{
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = CS;
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD));
    cfg.blockDim = dim3(VERIFY_THREADS);
    cfg.stream = (cudaStream_t)stream;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    return (int)cudaLaunchKernelEx(&cfg, gdn_verify_cluster_kernel<DCONV, VEC, CS>, *a);
}

template <int DCONV> static int launch_verify(const memra__verify_args *a, void *stream)
{
    /* Snapshot stores are 16-byte wide when the snapshots are 16-byte aligned (every offset
     * the kernel adds is a multiple of 4 floats); without snapshots either kernel serves. */
    const bool vec = ((uintptr_t)a->snap_ssm & 15u) == 0;
    const size_t ratio = a->num_v / a->num_k;
    int major = 0;
    const cudaError_t err = memra__device_major(&major);
    if (err != cudaSuccess)
        return (int)err;
    /* Clusters need compute capability 9.0; a cluster holds a key head's 4 * ratio blocks,
     * at most the 8 every such device supports. */
    if (major >= 9 && ratio <= 2 && !cluster_disabled()) {
        if (ratio == 1)
            return vec ? launch_cluster<DCONV, true, 4>(a, stream)
                       : launch_cluster<DCONV, false, 4>(a, stream);
        return vec ? launch_cluster<DCONV, true, 8>(a, stream)
                   : launch_cluster<DCONV, false, 8>(a, stream);
    }
    const dim3 grid((unsigned)(a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD));
    return memra__launch(vec ? gdn_verify_kernel<DCONV, true> : gdn_verify_kernel<DCONV, false>,
                         grid, dim3(VERIFY_THREADS), stream, *a);
}

extern "C" int memra__cuda_gdn_verify(const memra__verify_args *args, void *stream)
{
    return memra__with_d_conv(
        args->d_conv, [&](auto d) { return launch_verify<decltype(d)::value>(args, stream); });
}

extern "C" int memra__cuda_gdn_rollback(const memra__rollback_args *args, void *stream)
{
    const dim3 grid((unsigned)(args->b_n * ROLLBACK_PARTS));
    return memra__launch(gdn_rollback_kernel, grid, dim3(ROLLBACK_THREADS), stream, *args);
}
