/*
 * CUDA kernels: the verify (docs/verify-1.1.md) in its three modes, the journal commit and the
 * device-side rollback.
 *
 * A verify or a commit is two kernels, launched back to back with programmatic dependent launch:
 *
 * 1. The prologue (gdn_prologue_kernel) computes the conv and the prep once per key head and row:
 *    block (b, unit) with unit < 2 * num_k takes the q (unit even) or k (odd) channels of key
 *    head unit / 2 (thread i convolves channel i through all t rows, its window in registers),
 *    stages the chunk's outputs in shared memory, and its warps L2-normalise them (the prep's
 *    lane layout: lane L holds elements L, L+32, L+64, L+96); block (b, 2 * num_k + h) takes the v
 *    channels of value head h (thread i: channel i) and the head's gates. Results go to the
 *    verify's workspace, and to the optional outputs the host asked for. It also rolls each
 *    channel's ring (a channel is read and written by one thread only) and, in JOURNAL mode,
 *    checks the sequence's journal header and accepted count (memra__journal_check, every block
 *    the same verdict), folds the accepted rows' raw inputs into the ring, and writes the new
 *    rows' raw qkv, normalised k and gd into the journal's free slot. Its block 0 of each
 *    sequence records a refusal and zeroes the word the scan's blocks count themselves on. It
 *    waits for its predecessor before it reads anything, and only then lets the scan launch.
 *
 * 2. The scan. FINAL_ONLY, JOURNAL and the commit run gdn_rowloop.cuh's row loop
 * (gdn_verify_scan_kernel): it issues its state loads before griddepcontrol.wait, so the state
 * transfer overlaps the prologue, and a journal scan also checks the journal (the prologue's
 * verdict, computed again from the same words) and folds its accepted rows (reduction-free: the
 * recorded deltas) before that wait, since they are earlier operations' results that the
 * prologue does not touch; then it reads the normalised rows from the workspace, runs the new
 * rows, and writes o, the final state or the folded state, the new rows' deltas and, from one
 * block of the sequence, the journal header. A SNAPSHOTS verify of t >= 2 rows runs the
 * 1.0 packed scan (gdn_scan.cu) on the workspace instead: that layout stores each snapshot
 * straight from registers with 16-byte stores, where the row loop's go through its shared-memory
 * tile, and it measured faster for SNAPSHOTS at every B (ornith, T = 8, H200: 14.4 / 52.4 / 184.7
 * us at B = 1 / 8 / 32 against 17.0 / 58.1 / 205.7). A FINAL_ONLY or SNAPSHOTS verify of one row
 * runs it too (verify_packed_scan, below).
 *
 * The conv row, the normalisation and the gates are the 1.0 kernels' own functions (gdn_math.cuh);
 * the scan row is the contract's in gdn_rowloop.cuh's layout, with every rounding pinned. The suite
 * checks every verify against the 1.0 program with memcmp. A sequence whose journal or count is
 * refused is not touched by either kernel (ring, state, journal, outputs) and the finding is
 * recorded in the engine's error record.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_common.cuh"
#include "gdn_math.cuh"
#include "gdn_rowloop.cuh"
#include "kernels.h"

/*
 * Which scan follows the prologue. A SNAPSHOTS verify of t >= 2 rows runs the 1.0 packed scan
 * (gdn_scan.cu), whose snapshots leave straight from registers as 16-byte stores, and so does a
 * FINAL_ONLY or SNAPSHOTS verify of one row: with a single row the row loop's staging of the
 * state through its shared-memory tile and of the rows has nothing to amortise over, and the 1.0
 * scan, which loads its state and its row straight into registers, measured faster at every B
 * (ornith, one H100: FINAL_ONLY at T = 1 6.6 us against 7.0 at B = 1, 17.7 against 18.5 at
 * B = 8, 57.4 against 60.0 at B = 32). Those verifies put q and k in the workspace in their
 * natural order; every other verify and the commit run gdn_rowloop.cuh's scan, which stages them
 * transposed (element 4w + u at 32u + w, memra__perm_index).
 */
static __host__ __device__ bool verify_packed_scan(const memra__verify_args &a)
{
    return a.mode != MEMRA__MODE_JOURNAL && (a.t == 1 || (a.snap_ssm != nullptr && a.t >= 2));
}

/* Prologue blocks: one thread per channel of a head; rows normalised PRO_CHUNK at a time. */
#define PRO_THREADS MEMRA__S
#define PRO_WARPS (PRO_THREADS / MEMRA__LANES)
#define PRO_CHUNK 8

/* The workspace of a verify of b_n x t rows (memra__verify_workspace_words lays it out). */
typedef struct verify_ws {
    float *q, *k, *v, *g_log, *beta;
    uint32_t *seq;
} verify_ws;

static __host__ __device__ verify_ws carve_ws(float *w, size_t b_n, size_t t, size_t num_k,
                                              size_t num_v)
{
    const size_t rows = b_n * t;
    verify_ws ws;
    ws.q = w;
    ws.k = ws.q + rows * num_k * MEMRA__S;
    ws.v = ws.k + rows * num_k * MEMRA__S;
    ws.g_log = ws.v + rows * num_v * MEMRA__S;
    ws.beta = ws.g_log + MEMRA__ROUND4(rows * num_v);
    ws.seq = (uint32_t *)(ws.beta + MEMRA__ROUND4(rows * num_v));
    return ws;
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
 * What a prologue carries besides the conv and the normalisation, fixed per instantiation so that
 * each mode's kernel holds only its own code and registers: nothing (FINAL_ONLY, and a SNAPSHOTS
 * verify of one row, which has no snapshot), the conv snapshots and q and k in their natural
 * order for the 1.0 scan (SNAPSHOTS of t >= 2 rows), or the journal (JOURNAL and the commit).
 */
#define PRO_FINAL 0
#define PRO_SNAP 1
#define PRO_JOURNAL 2
#define PRO_MINB 8

static __host__ __device__ int prologue_flavour(const memra__verify_args &a)
{
    return a.mode == MEMRA__MODE_JOURNAL ? PRO_JOURNAL
           : verify_packed_scan(a)       ? PRO_SNAP
                                         : PRO_FINAL;
}

/* One conv channel through a verify: its weights and window in registers. */
template <int DCONV> struct conv_chan {
    static constexpr int PAD = DCONV - 1;
    float w8[MEMRA__D_CONV_MAX], win[MEMRA__D_CONV_MAX];
    size_t c;
};

/* What every channel of a sequence shares: where its ring and journal are, the fold. */
typedef struct chan_seq {
    float *ring, *jr;
    size_t jrow;
    uint32_t n, half;
} chan_seq;

/* Channel c's weights: they depend on nothing the kernel decides, so they are loaded first,
 * beside the raw rows, before the table's loads that the ring's address waits for. */
template <int DCONV>
static __device__ __forceinline__ void chan_weights(conv_chan<DCONV> &ch,
                                                    const memra__verify_args &a, size_t c)
{
    ch.c = c;
#pragma unroll
    for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
        ch.w8[j] = j < DCONV ? a.w[c * DCONV + j] : 0.0f;
}

/* Loads the channel's ring into its window. */
template <int DCONV>
static __device__ __forceinline__ void chan_ring_load(conv_chan<DCONV> &ch, const chan_seq &q)
{
    constexpr int PAD = DCONV - 1;
#pragma unroll
    for (int j = 0; j < MEMRA__D_CONV_MAX; j++)
        ch.win[j] = j < PAD ? q.ring[ch.c * PAD + j] : 0.0f;
}

/* A journal's n accepted raw inputs rolled into the window (only the last PAD of them stay in
 * it); the folded ring is written back at once when n > 0, since the new rows are not
 * committed. Window slot j ends up holding element n + j of the old window followed by the
 * accepted rows: accepted row n - PAD + j when n + j >= PAD, old slot n + j otherwise. The old
 * slots move by a shift of n in binary steps of fixed size, so that the window stays in registers
 * (indexed by n, it went to local memory); when n >= PAD every slot is then replaced. The rows
 * that stay (at most PAD) are independent predicated loads, so the fold waits for memory once,
 * not once per row. */
template <int DCONV>
static __device__ __forceinline__ void chan_ring_fold(conv_chan<DCONV> &ch, const chan_seq &q)
{
    constexpr int PAD = DCONV - 1;
    const size_t c = ch.c;
    if constexpr (PAD > 0) {
        const uint32_t n = q.n;
#pragma unroll
        for (int b = 1; b < PAD; b *= 2) {
            if (n & (uint32_t)b) {
#pragma unroll
                for (int j = 0; j + b < PAD; j++)
                    ch.win[j] = ch.win[j + b];
            }
        }
#pragma unroll
        for (int j = 0; j < PAD; j++) {
            const uint32_t e = n + (uint32_t)j; /* element e of window ++ rows */
            if (e >= (uint32_t)PAD)
                ch.win[j] =
                    q.jr[MEMRA__JOURNAL_HEADER + (2 * (size_t)(e - PAD) + q.half) * q.jrow + c];
        }
        if (n > 0) {
#pragma unroll
            for (int j = 0; j < PAD; j++)
                q.ring[c * PAD + j] = ch.win[j];
        }
    }
}

/* New row r of sequence b through channel c: the conv output (also to conv_outs when asked),
 * the ring snapshot after the row (SNAPSHOTS), the raw input into the journal's free slot. */
template <int DCONV, int FLAV>
static __device__ __forceinline__ float chan_row(conv_chan<DCONV> &ch, const memra__verify_args &a,
                                                 const chan_seq &q, size_t b, size_t r, float x)
{
    constexpr int PAD = DCONV - 1;
    const size_t t = a.t, c = ch.c;
    ch.win[PAD] = x;
    const float y = memra__conv_row<PAD>(ch.win, ch.w8);
    if (a.conv_out != nullptr)
        a.conv_out[(b * t + r) * a.conv_dim + c] = y;
    if constexpr (PAD > 0 && FLAV == PRO_SNAP) {
        if (a.snap_conv != nullptr && r + 1 < t) {
            float *dst = a.snap_conv + ((b * (t - 1) + r) * a.conv_dim + c) * PAD;
#pragma unroll
            for (int j = 0; j < PAD; j++)
                dst[j] = ch.win[j];
        }
    }
    if constexpr (FLAV == PRO_JOURNAL)
        q.jr[MEMRA__JOURNAL_HEADER + (2 * r + 1 - q.half) * q.jrow + c] = x;
    return y;
}

/* The ring after the last new row (SNAPSHOTS and FINAL_ONLY; a journal keeps the folded one). */
template <int DCONV, int FLAV>
static __device__ __forceinline__ void chan_close(const conv_chan<DCONV> &ch, const chan_seq &q)
{
    constexpr int PAD = DCONV - 1;
    if constexpr (PAD > 0 && FLAV != PRO_JOURNAL) {
#pragma unroll
        for (int j = 0; j < PAD; j++)
            q.ring[ch.c * PAD + j] = ch.win[j];
    }
}

/* Rows r0 .. r0 + nr - 1 of sequence b, raw inputs of channel c (loaded together, so that their
 * latencies overlap). */
static __device__ __forceinline__ void load_rows(float (&x)[PRO_CHUNK], const memra__verify_args &a,
                                                 size_t b, size_t r0, unsigned nr, size_t c)
{
#pragma unroll
    for (unsigned rr = 0; rr < PRO_CHUNK; rr++)
        x[rr] = rr < nr ? a.qkv[(b * a.t + r0 + rr) * a.conv_dim + c] : 0.0f;
}

/* The rows of the chunk that starts at r0 (at most PRO_CHUNK). */
static __device__ __forceinline__ unsigned chunk_rows(size_t t, size_t r0)
{
    return (unsigned)(t - r0 < PRO_CHUNK ? t - r0 : PRO_CHUNK);
}

/*
 * Thread i of block (b, unit) takes channel i of the unit's head: q or k of key head unit / 2
 * (unit < 2 num_k), or v of value head unit - 2 num_k, whose block also computes the head's
 * gates (thread i: rows i, i + 128, ...). Every load that depends on nothing the kernel decides
 * (the first chunk of raw rows, the weights, the gates' inputs) is issued before the table entry
 * that the ring's address waits for, and in a journal the ring is read beside the journal's
 * header, so that a block waits for memory about twice, not four times. At most 64 registers
 * (8 blocks per multiprocessor): at B = 32 its 2048 blocks then take two waves, not three.
 */
template <int DCONV, int FLAV>
__global__ void __launch_bounds__(PRO_THREADS, PRO_MINB)
    gdn_prologue_kernel(const memra__verify_args a)
{
    __shared__ __align__(16) float sy[PRO_CHUNK][MEMRA__S];

    /* Nothing is read before the predecessor has completed; the scan may launch only then, so
     * that the state it reads before its own wait is the completed predecessors' (gdn_rowloop.cuh).
     */
    memra__pdl_wait();
    memra__pdl_trigger();

    const unsigned tid = threadIdx.x, lane = tid % MEMRA__LANES, warp = tid / MEMRA__LANES;
    /* The grid holds 2 num_k + num_v units per sequence, or only the 2 num_k key-head units when
     * the scan computes the v rows and gates itself (scan_v_inputs, below). */
    const size_t units = gridDim.x / a.b_n;
    const size_t u = blockIdx.x % units, b = blockIdx.x / units;
    const size_t t = a.t, num_k = a.num_k, num_v = a.num_v, key_dim = a.key_dim;
    const size_t ratio = num_v / num_k;
    const bool key = u < 2 * num_k;
    const size_t kh = u / 2, which = u % 2, h = u - 2 * num_k;
    const size_t c = key ? which * key_dim + kh * MEMRA__S + tid : 2 * key_dim + h * MEMRA__S + tid;
    const verify_ws ws = carve_ws(a.workspace, a.b_n, t, num_k, num_v);

    conv_chan<DCONV> ch;
    chan_weights(ch, a, c);
    float x[PRO_CHUNK];
    load_rows(x, a, b, 0, chunk_rows(t, 0), c);
    float br = 0.0f, al = 0.0f, dt = 0.0f, av = 0.0f;
    if (!key) {
        dt = a.dt_bias[h];
        av = a.a[h];
        if (tid < t) {
            br = a.beta_raw[(b * t + tid) * num_v + h];
            al = a.alpha[(b * t + tid) * num_v + h];
        }
    }

    const uint64_t *row = a.table + b * MEMRA__TABLE_WIDTH;
    chan_seq q;
    q.ring = DCONV > 1 ? (float *)(uintptr_t)row[0] : nullptr;
    q.jr = nullptr;
    q.jrow = MEMRA__JOURNAL_ROW(a.conv_dim, num_v, num_k);
    q.n = 0;
    q.half = 0;
    chan_ring_load(ch, q);
    if constexpr (FLAV == PRO_JOURNAL) {
        /* Table entries are read now, when the kernel executes. */
        const memra__journal_verdict v = memra__journal_at(row[2], &q.jr, a.accepted[b], num_k,
                                                           num_v, a.d_conv, a.grouped, a.cap, t);
        if (u == 0 && tid == 0) {
            ws.seq[4 * b] = v.n;
            ws.seq[4 * b + 1] = v.what != 0 ? SCAN_REFUSED : v.half;
            ws.seq[4 * b + 2] = v.cap;
            ws.seq[4 * b + 3] = 0; /* the scan's blocks count themselves here */
            if (v.what != 0)
                record_error(a.err, a.err_claim, a.op, b, v.value, v.limit, v.what);
        }
        if (v.what != 0)
            return;
        q.n = v.n;
        q.half = v.half;
        chan_ring_fold(ch, q);
    }

    if (key) {
        /* Key head kh, its q channels (u even) or k channels (u odd). */
        float *const wsv = which ? ws.k : ws.q;
        float *const out = which ? a.k_l2 : a.q_l2;
        for (size_t r0 = 0; r0 < t; r0 += PRO_CHUNK) {
            const unsigned nr = chunk_rows(t, r0);
            if (r0 > 0)
                load_rows(x, a, b, r0, nr, c);
#pragma unroll
            for (unsigned rr = 0; rr < PRO_CHUNK; rr++)
                if (rr < nr)
                    sy[rr][tid] = chan_row<DCONV, FLAV>(ch, a, q, b, r0 + rr, x[rr]);
            __syncthreads();
            /* Normalisation: warp w takes rows w, w + 4, ... of the chunk; lane L holds elements
             * L, L+32, L+64, L+96, as in the prep kernel. */
            for (unsigned rr = warp; rr < nr; rr += PRO_WARPS) {
                const size_t hr = b * t + r0 + rr;
                float y[MEMRA__PER_LANE];
#pragma unroll
                for (int r4 = 0; r4 < MEMRA__PER_LANE; r4++)
                    y[r4] = sy[rr][r4 * MEMRA__LANES + lane];
                memra__l2_normalise(y, a.eps);
                float *wsd = wsv + (hr * num_k + kh) * MEMRA__S;
                float *jk = nullptr;
                if constexpr (FLAV == PRO_JOURNAL)
                    jk = which ? q.jr + MEMRA__JOURNAL_HEADER +
                                     (2 * (r0 + rr) + 1 - q.half) * q.jrow +
                                     MEMRA__JOURNAL_K(a.conv_dim) + kh * MEMRA__S
                               : nullptr;
#pragma unroll
                for (int r4 = 0; r4 < MEMRA__PER_LANE; r4++) {
                    const int i = r4 * MEMRA__LANES + (int)lane;
                    wsd[FLAV == PRO_SNAP ? i : memra__perm_index(i)] = y[r4];
                    if (jk != nullptr)
                        jk[memra__perm_index(i)] = y[r4];
                    if (out != nullptr)
                        for (size_t m = 0; m < ratio; m++) {
                            const size_t vh = a.grouped ? kh * ratio + m : kh + m * num_k;
                            out[(hr * num_v + vh) * MEMRA__S + i] = y[r4];
                        }
                }
            }
            __syncthreads();
        }
        chan_close<DCONV, FLAV>(ch, q);
        return;
    }

    /* Value head h: its v channels, then its gates (and, in a journal, each new row's gd =
     * expf(g_log), the same expression as the scan's, into the free slot). */
    for (size_t r0 = 0; r0 < t; r0 += PRO_CHUNK) {
        const unsigned nr = chunk_rows(t, r0);
        if (r0 > 0)
            load_rows(x, a, b, r0, nr, c);
#pragma unroll
        for (unsigned rr = 0; rr < PRO_CHUNK; rr++) {
            if (rr < nr) {
                const size_t hr = (b * t + r0 + rr) * num_v + h;
                const float y = chan_row<DCONV, FLAV>(ch, a, q, b, r0 + rr, x[rr]);
                ws.v[hr * MEMRA__S + tid] = y;
                if (a.v_g != nullptr)
                    a.v_g[hr * MEMRA__S + tid] = y;
            }
        }
    }
    chan_close<DCONV, FLAV>(ch, q);
    for (size_t r = tid; r < t; r += PRO_THREADS) {
        const size_t hr = (b * t + r) * num_v + h;
        if (r >= PRO_THREADS) {
            br = a.beta_raw[hr];
            al = a.alpha[hr];
        }
        const float bt = memra__gate_beta(br);
        const float g = memra__gate_g_log(al, dt, av);
        ws.beta[hr] = bt;
        ws.g_log[hr] = g;
        if (a.beta != nullptr)
            a.beta[hr] = bt;
        if (a.g_log != nullptr)
            a.g_log[hr] = g;
        if constexpr (FLAV == PRO_JOURNAL)
            q.jr[MEMRA__JOURNAL_HEADER + (2 * r + 1 - q.half) * q.jrow +
                 MEMRA__JOURNAL_GD(a.conv_dim, num_v, num_k) + h] = expf(g);
    }
}

/* The verify's scan: gdn_rowloop.cuh's block in the shapes below. The wide one stages 8 rows at a
 * time whatever t. The narrow one (one column a thread) runs in blocks of 32 columns (4 warps, 4
 * blocks per head) and stages 8 rows when t <= 8, 16 otherwise. A block of 4 warps stages its 8
 * rows two a warp, where blocks of 2 warps staged four each, and a head's k and q rows are staged
 * by 4 blocks instead of 8: what follows the wait for the prologue is shorter (NOTES.md). */
typedef scan_cfg<2, 64, 8> vscan_wide8;
typedef scan_cfg<1, 32, 8> vscan_narrow8;
typedef scan_cfg<1, 32, 16> vscan_narrow16;

template <class C, int OUT, bool PIPE, int MINB, bool FOLD_FIRST>
__global__ void __launch_bounds__(C::NT, MINB) gdn_verify_scan_kernel(const memra__scan_job a)
{
    memra__scan_block<C, OUT, PIPE, FOLD_FIRST>(a);
}

/*
 * The v rows and gates of a wide FINAL_ONLY scan block, computed by the block itself where the
 * prologue would take more than 1.2 waves (verify_v_in_scan): the prologue then runs only its
 * key-head units, half its grid at ornith, and the scan block convolves its own COLS v channels
 * through the t rows (t <= TC, d_conv <= V_TAPS) before its wait, beside its state's transfer:
 * those inputs are earlier operations' results, which the prologue does not touch. Thread i takes
 * channel c0 + i % COLS, rows i / COLS, i / COLS + NT / COLS, ...; lane r of the last warp row r's
 * gates. Every load is issued before the first use (the conv's window per row from the ring and
 * the raw rows: the taps above d_conv are zeros, which memra__conv_out takes as the contract
 * says), the results go to the staging rows and to the optional outputs, and the channel's ring
 * is rolled after the staging barrier (close), once every thread of the block has read it.
 */
#define V_TAPS 4

/* Element e of channel c's ring followed by sequence b's raw rows. */
static __device__ __forceinline__ float v_elem(const memra__verify_args &a, const float *ring,
                                               size_t b, size_t e, size_t c, size_t pad)
{
    return e >= pad ? a.qkv[(b * a.t + e - pad) * a.conv_dim + c] : ring[c * pad + e];
}

struct scan_v_inputs {
    static constexpr bool on = true;
    const memra__verify_args *va;
    float *ring;
    size_t c, pad;
    bool roll;
    float nw[V_TAPS - 1];

    template <class C>
    __device__ __forceinline__ void load(const scan_pos &p, const scan_smem<C> &sm)
    {
        const memra__verify_args &a = *va;
        constexpr int TPC = C::NT / C::COLS, VR = C::TC / TPC;
        const unsigned tid = threadIdx.x, lane = tid % MEMRA__LANES, warp = tid / MEMRA__LANES;
        const unsigned col = tid % C::COLS, part = tid / C::COLS;
        const size_t b = p.b, h = p.h, t = a.t, num_v = a.num_v;
        pad = a.d_conv - 1;
        c = 2 * a.key_dim + h * MEMRA__S + p.c0 + col;
        ring = pad > 0 ? (float *)(uintptr_t)a.table[b * MEMRA__TABLE_WIDTH] : (float *)nullptr;
        roll = part == 0 && pad > 0;
        const bool gates = warp == C::WARPS - 1 && lane < t;
        const size_t hr = (b * t + lane) * num_v + h;

        float w[V_TAPS], win[VR][V_TAPS];
#pragma unroll
        for (int j = 0; j < V_TAPS; j++)
            w[j] = (size_t)j < a.d_conv ? a.w[c * a.d_conv + j] : 0.0f;
#pragma unroll
        for (int i = 0; i < VR; i++) {
            const size_t r = part + (size_t)i * TPC;
#pragma unroll
            for (int j = 0; j < V_TAPS; j++)
                win[i][j] = r < t && (size_t)j <= pad ? v_elem(a, ring, b, r + j, c, pad) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < V_TAPS - 1; j++)
            nw[j] = roll && (size_t)j < pad ? v_elem(a, ring, b, t + j, c, pad) : 0.0f;
        float br = 0.0f, al = 0.0f, dt = 0.0f, av = 0.0f;
        if (gates) {
            br = a.beta_raw[hr];
            al = a.alpha[hr];
            dt = a.dt_bias[h];
            av = a.a[h];
        }

#pragma unroll
        for (int i = 0; i < VR; i++) {
            const size_t r = part + (size_t)i * TPC;
            if (r < t) {
                float win8[MEMRA__D_CONV_MAX], w8[MEMRA__D_CONV_MAX];
#pragma unroll
                for (int j = 0; j < MEMRA__D_CONV_MAX; j++) {
                    win8[j] = j < V_TAPS ? win[i][j] : 0.0f;
                    w8[j] = j < V_TAPS ? w[j] : 0.0f;
                }
                const float y = memra__conv_out(win8, w8);
                sm.v[r * C::COLS + col] = y;
                if (a.conv_out != nullptr)
                    a.conv_out[(b * t + r) * a.conv_dim + c] = y;
                if (a.v_g != nullptr)
                    a.v_g[((b * t + r) * num_v + h) * MEMRA__S + p.c0 + col] = y;
            }
        }
        if (gates) {
            const float g = memra__gate_g_log(al, dt, av), bt = memra__gate_beta(br);
            sm.gd[lane] = expf(g);
            sm.bt[lane] = bt;
            if (p.c0 == 0) {
                if (a.beta != nullptr)
                    a.beta[hr] = bt;
                if (a.g_log != nullptr)
                    a.g_log[hr] = g;
            }
        }
    }

    __device__ __forceinline__ void close()
    {
        if (roll) {
#pragma unroll
            for (int j = 0; j < V_TAPS - 1; j++)
                if ((size_t)j < pad)
                    ring[c * pad + j] = nw[j];
        }
    }
};

/* The wide FINAL_ONLY scan with its v rows and gates computed in the block. */
template <class C, int MINB>
__global__ void __launch_bounds__(C::NT, MINB)
    gdn_verify_scan_v_kernel(const memra__scan_job a, const memra__verify_args va)
{
    scan_v_inputs vin;
    vin.va = &va;
    memra__scan_block<C, SCAN_FINAL, false, false, scan_v_inputs>(a, vin);
}

/* Whether a verify runs its v rows and gates in the scan: a FINAL_ONLY verify of 2 .. 8 rows in
 * the wide shape whose full prologue would take more than 1.2 waves (PRO_MINB blocks per
 * multiprocessor). Its own v rows make every scan block longer, which pays only where they take a
 * substantial part of a wave off the prologue, so the threshold leaves a second wave of up to a
 * fifth of one to the full prologue: measured on 132 multiprocessors (ornith, T = 2 to 8), the
 * scan with its v rows was slower at 17 and 18 sequences (1088 and 1152 prologue blocks for 1056
 * places), level at 19 (1216) and faster from 20 (1280) on (NOTES.md). */
static bool verify_v_in_scan(const memra__verify_args &a, bool narrow, int sms)
{
    return a.mode == MEMRA__MODE_FINAL_ONLY && !narrow && a.t >= 2 && a.t <= 8 &&
           a.d_conv <= V_TAPS &&
           5 * a.b_n * (2 * a.num_k + a.num_v) > 6 * (size_t)PRO_MINB * (size_t)sms;
}

/* Sets scan kernel K's attributes and puts into the job how many of its blocks (`smem` bytes of
 * dynamic shared memory each) are resident at once on the device, for the scan's L2 prefetch of
 * the next wave's states. */
template <auto K, class C> static cudaError_t scan_prepare(memra__scan_job &j, size_t smem, int sms)
{
    const cudaError_t err = memra__kernel_attributes<K>(smem);
    if (err != cudaSuccess)
        return err;
    return memra__kernel_wave<K>(C::NT, smem, sms, &j.resident);
}

template <class C, int OUT, bool PIPE, int MINB, bool FOLD_FIRST>
static cudaError_t vscan_prepare(memra__scan_job &j, int sms)
{
    constexpr size_t smem = OUT == SCAN_JOURNAL ? C::SMEM_JOURNAL : C::SMEM;
    return scan_prepare<gdn_verify_scan_kernel<C, OUT, PIPE, MINB, FOLD_FIRST>, C>(j, smem, sms);
}

/* A journal scan whose grid is resident at once folds before its wait (FOLD_FIRST): each of its
 * blocks runs beside the prologue. Where the grid takes several waves, the blocks of the later
 * ones start when the prologue is over, and folding first would only add the journal's header
 * to their chain and a second wait for staged rows (NOTES.md). The narrow shape's grid always
 * is: it is taken only below twice the multiprocessors in blocks, and 2 of its blocks fit one
 * (its bound, below), so it has no other instantiation. */
template <class C, int OUT, bool PIPE, int MINB>
static int launch_vscan_out_x(const memra__scan_job &job, size_t b_n, int sms, void *stream)
{
    constexpr size_t smem = OUT == SCAN_JOURNAL ? C::SMEM_JOURNAL : C::SMEM;
    constexpr bool always_first = OUT == SCAN_JOURNAL && C::NC == 1;
    const dim3 grid((unsigned)(b_n * job.num_v * C::BPH));
    memra__scan_job j = job;
    cudaError_t e = vscan_prepare<C, OUT, PIPE, MINB, always_first>(j, sms);
    if (e != cudaSuccess)
        return (int)e;
    if constexpr (OUT == SCAN_JOURNAL && !always_first) {
        if (grid.x <= j.resident) {
            e = vscan_prepare<C, OUT, PIPE, MINB, true>(j, sms);
            if (e != cudaSuccess)
                return (int)e;
            return memra__launch_smem(gdn_verify_scan_kernel<C, OUT, PIPE, MINB, true>, grid,
                                      dim3(C::NT), smem, stream, j);
        }
    }
    return memra__launch_smem(gdn_verify_scan_kernel<C, OUT, PIPE, MINB, always_first>, grid,
                              dim3(C::NT), smem, stream, j);
}

/* The shapes' instantiations: at most 128 registers (4 blocks of 128 threads per multiprocessor:
 * without the bound ptxas takes 168 and 3 fit, and the ornith FINAL_ONLY scan at B = 32, T = 8
 * took 79.6 us instead of 68.7 on an H200). The wide journal scan fits that bound without
 * spilling by reading each row's k again for the update (gdn_rowloop.cuh); spilling 24 bytes
 * there, it was already faster than bounded to 3, also on large grids: ornith, T = 8, JOURNAL
 * 97.2 us against 103.0 at B = 32 (H200, one run). The narrow shape, whose launches are too few to
 * fill the device and so latency-bound, computes the next row's kv beside this row's at, and is
 * bounded for 2 blocks per multiprocessor (at most 144 registers, no spill; 3 blocks still fit):
 * it is taken only when the wide shape's blocks are fewer than the multiprocessors, so its own
 * blocks (twice as many) average fewer than two per multiprocessor, and the bound costs no
 * residency (NOTES.md). */
template <class C, int OUT>
static int launch_vscan_out(const memra__scan_job &job, size_t b_n, int sms, void *stream)
{
    constexpr int MINB = C::NC == 1 ? 256 / C::NT : 512 / C::NT;
    return launch_vscan_out_x<C, OUT, C::NC == 1, MINB>(job, b_n, sms, stream);
}

/* The scan's flavour: the journal's, or the final state alone. */
template <class C>
static int launch_vscan(const memra__scan_job &job, size_t b_n, bool journal, int sms, void *stream)
{
    return journal ? launch_vscan_out<C, SCAN_JOURNAL>(job, b_n, sms, stream)
                   : launch_vscan_out<C, SCAN_FINAL>(job, b_n, sms, stream);
}

/* The wide FINAL_ONLY scan that computes its v rows and gates (gdn_verify_scan_v_kernel), bounded
 * for 4 blocks per multiprocessor as the wide scans are. */
static int launch_vscan_v(const memra__scan_job &job, const memra__verify_args &va, int sms,
                          void *stream)
{
    typedef vscan_wide8 C;
    constexpr size_t smem = C::SMEM;
    memra__scan_job j = job;
    const cudaError_t e = scan_prepare<gdn_verify_scan_v_kernel<C, 4>, C>(j, smem, sms);
    if (e != cudaSuccess)
        return (int)e;
    const dim3 grid((unsigned)(va.b_n * va.num_v * C::BPH));
    return memra__launch_smem(gdn_verify_scan_v_kernel<C, 4>, grid, dim3(C::NT), smem, stream, j,
                              va);
}

/* keys_only: the key-head units alone (the scan computes the v rows and gates). */
template <int DCONV, int FLAV>
static int launch_prologue_x(const memra__verify_args *a, bool keys_only, void *stream)
{
    const cudaError_t err = memra__kernel_attributes<gdn_prologue_kernel<DCONV, FLAV>>(0);
    if (err != cudaSuccess)
        return (int)err;
    const dim3 grid((unsigned)(a->b_n * (2 * a->num_k + (keys_only ? 0 : a->num_v))));
    return memra__launch(gdn_prologue_kernel<DCONV, FLAV>, grid, dim3(PRO_THREADS), stream, *a);
}

template <int DCONV>
static int launch_prologue(const memra__verify_args *a, bool keys_only, void *stream)
{
    switch (prologue_flavour(*a)) {
    case PRO_JOURNAL:
        return launch_prologue_x<DCONV, PRO_JOURNAL>(a, false, stream);
    case PRO_SNAP:
        return launch_prologue_x<DCONV, PRO_SNAP>(a, false, stream);
    default:
        return launch_prologue_x<DCONV, PRO_FINAL>(a, keys_only, stream);
    }
}

/* Grids: the prologue one block per (sequence, key head, q or k) and (sequence, value head); the
 * scan one per (sequence, value head, column block), as the 1.0 scan. */
/* MEMRA_VERIFY_STAGE=prologue or =scan, read at every enqueue, launches only that kernel of a
 * verify or commit: a profiling switch (memra_bench --mode per-op times each stage alone with
 * it). Results are then wrong by design; nothing else reads it. */
static int verify_stage(void)
{
    const char *v = getenv("MEMRA_VERIFY_STAGE");
    if (v == nullptr)
        return 0;
    return strcmp(v, "prologue") == 0 ? 1 : strcmp(v, "scan") == 0 ? 2 : 0;
}

static int launch_verify(const memra__verify_args *a, void *stream)
{
    const int stage = verify_stage();
    /* The packed scan (SNAPSHOTS) chooses its own grid; the row loop's shape and where the v rows
     * are computed depend on the multiprocessors. */
    const bool packed = verify_packed_scan(*a);
    int sms = 0;
    if (!packed) {
        const cudaError_t se = memra__device_sms(&sms);
        if (se != cudaSuccess)
            return (int)se;
    }
    const bool narrow = !packed && a->b_n * a->num_v * vscan_wide8::BPH < (size_t)sms;
    const bool v_in_scan = !packed && verify_v_in_scan(*a, narrow, sms);
    if (stage != 2) {
        const int err = memra__with_d_conv(a->d_conv, [&](auto d) {
            return launch_prologue<decltype(d)::value>(a, v_in_scan, stream);
        });
        if (err != 0 || stage == 1)
            return err;
    }

    const bool journal = a->mode == MEMRA__MODE_JOURNAL;
    const verify_ws ws = carve_ws(a->workspace, a->b_n, a->t, a->num_k, a->num_v);
    if (packed) {
        /* The packed scan's arguments in memra__scan_args order: the workspace's rows, the
         * table's canonical state in and the parity slot out (as memra_gdn_scan_s128_tsnap),
         * no direct states, o and the snapshots, no deltas, the shape, q and k per key head. */
        const memra__scan_args s = {ws.q,
                                    ws.k,
                                    ws.v,
                                    ws.g_log,
                                    ws.beta,
                                    a->table + 1,
                                    MEMRA__TABLE_WIDTH,
                                    a->table + memra__final_slot(a->t),
                                    MEMRA__TABLE_WIDTH,
                                    nullptr,
                                    nullptr,
                                    a->o,
                                    a->snap_ssm,
                                    nullptr,
                                    a->num_v,
                                    a->t,
                                    a->b_n,
                                    a->scale,
                                    a->num_k,
                                    a->grouped};
        return memra__cuda_gdn_scan(&s, stream);
    }
    memra__scan_job job = {};
    job.in_table = a->table + 1;
    job.out_table = a->table + (journal ? 1 : memra__final_slot(a->t));
    job.in_stride = MEMRA__TABLE_WIDTH;
    job.out_stride = MEMRA__TABLE_WIDTH;
    job.q = ws.q;
    job.k = ws.k;
    job.v = ws.v;
    job.g_log = ws.g_log;
    job.beta = ws.beta;
    job.o = a->o;
    job.num_v = a->num_v;
    job.num_k = a->num_k;
    job.qk_heads = a->num_k;
    job.t = a->t;
    job.scale = a->scale;
    job.grouped = a->grouped;
    job.accepted = a->accepted;
    job.cap = a->cap;
    job.seq_info = ws.seq;
    job.conv_dim = a->conv_dim;
    job.d_conv = (uint32_t)a->d_conv;

    if (v_in_scan)
        return launch_vscan_v(job, *a, sms, stream);
    /* A wide scan stages 8 rows at a time at every t: staging 16, 3 of its blocks fit a
     * multiprocessor instead of 4 (57 KiB of shared memory each, 71 KiB with a journal's fold
     * staging beside them), which cost more than the extra staging waits (NOTES.md). */
    if (!narrow)
        return launch_vscan<vscan_wide8>(job, a->b_n, journal, sms, stream);
    return a->t <= 8 ? launch_vscan<vscan_narrow8>(job, a->b_n, journal, sms, stream)
                     : launch_vscan<vscan_narrow16>(job, a->b_n, journal, sms, stream);
}

/*
 * Device-side rollback: sequence b's snapshot n - 1 (or its final state) copied into the
 * canonical state and its ring, in chunks of ROLLBACK_CHUNK floats: block (b, part) copies chunk
 * `part` of the state (part < the state's chunk count) or of the ring (the parts after those).
 * Thread i of a block moves vectors i, i + 256, ... of its chunk, ROLLBACK_VECS of them, all
 * loaded before the first is stored, so that a block has 32 KiB in flight; 16-byte vectors when
 * both addresses are 16-byte aligned, single floats otherwise (the same words either way). One
 * block per chunk keeps even B = 1 spread over the device: the ornith state is 64 chunks.
 */
#define ROLLBACK_THREADS 256
#define ROLLBACK_VECS 8
#define ROLLBACK_CHUNK (ROLLBACK_THREADS * ROLLBACK_VECS * 4)

static __host__ __device__ size_t rollback_chunks(size_t words)
{
    return (words + ROLLBACK_CHUNK - 1) / ROLLBACK_CHUNK;
}

/* Words [lo, hi) of src to dst by the block. */
static __device__ __forceinline__ void rollback_copy(float *dst, const float *src, size_t lo,
                                                     size_t hi)
{
    const unsigned tid = threadIdx.x;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0 && (hi - lo) % 4 == 0) {
        const float4 *s4 = (const float4 *)(src + lo);
        float4 *d4 = (float4 *)(dst + lo);
        const size_t n4 = (hi - lo) / 4;
        float4 r[ROLLBACK_VECS];
#pragma unroll
        for (int j = 0; j < ROLLBACK_VECS; j++) {
            const size_t i = tid + (size_t)j * ROLLBACK_THREADS;
            if (i < n4)
                r[j] = __ldcs(s4 + i);
        }
#pragma unroll
        for (int j = 0; j < ROLLBACK_VECS; j++) {
            const size_t i = tid + (size_t)j * ROLLBACK_THREADS;
            if (i < n4)
                d4[i] = r[j];
        }
        return;
    }
    for (size_t i = lo + tid; i < hi; i += ROLLBACK_THREADS)
        dst[i] = src[i];
}

__global__ void __launch_bounds__(ROLLBACK_THREADS)
    gdn_rollback_kernel(const memra__rollback_args a)
{
    memra__pdl_enter();
    const size_t state_words = a.num_v * (size_t)MEMRA__S * MEMRA__S;
    const size_t ring_words = a.conv_dim * (a.d_conv - 1);
    const size_t parts = rollback_chunks(state_words) + rollback_chunks(ring_words);
    const size_t b = blockIdx.x / parts, part = blockIdx.x % parts;
    const size_t t = a.t;
    const uint64_t *row = a.table + b * MEMRA__TABLE_WIDTH;
    const uint32_t n = a.accepted[b];
    if (n == 0 || n > t) {
        if (part == 0 && threadIdx.x == 0)
            record_error(a.err, a.err_claim, a.op, b, n, (uint32_t)t, MEMRA__ERR_ROLLBACK_RANGE);
        return;
    }
    const memra__after from = memra__state_after(b, t, n);
    float *dst;
    const float *src;
    size_t lo, words;
    if (part < rollback_chunks(state_words)) {
        dst = (float *)(uintptr_t)row[1];
        lo = part * ROLLBACK_CHUNK;
        words = state_words;
        if (from.slot != 0) {
            /* The final state is in its parity slot, which may already be the canonical one. */
            if (from.slot == 1)
                return;
            src = (const float *)(uintptr_t)row[from.slot];
        } else {
            src = a.snap_ssm + from.snap * state_words;
        }
    } else {
        /* The ring already is the final one when every row was accepted. */
        if (from.slot != 0)
            return;
        dst = (float *)(uintptr_t)row[0];
        lo = (part - rollback_chunks(state_words)) * ROLLBACK_CHUNK;
        words = ring_words;
        src = a.snap_conv + from.snap * ring_words;
    }
    const size_t hi = lo + ROLLBACK_CHUNK < words ? lo + ROLLBACK_CHUNK : words;
    rollback_copy(dst, src, lo, hi);
}

extern "C" int memra__cuda_gdn_verify(const memra__verify_args *args, void *stream)
{
    return launch_verify(args, stream);
}

extern "C" int memra__cuda_gdn_rollback(const memra__rollback_args *args, void *stream)
{
    const cudaError_t err = memra__kernel_attributes<gdn_rollback_kernel>(0);
    if (err != cudaSuccess)
        return (int)err;
    const size_t state_words = args->num_v * (size_t)MEMRA__S * MEMRA__S;
    const size_t parts =
        rollback_chunks(state_words) + rollback_chunks(args->conv_dim * (args->d_conv - 1));
    const dim3 grid((unsigned)(args->b_n * parts));
    return memra__launch(gdn_rollback_kernel, grid, dim3(ROLLBACK_THREADS), stream, *args);
}
