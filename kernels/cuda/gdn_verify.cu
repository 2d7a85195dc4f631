/*
 * CUDA kernel: the 1.1 one-launch verify (docs/verify-1.1.md). One kernel does the conv, the
 * prep and the scan of b_n sequences x t rows, in the three modes (SNAPSHOTS, FINAL_ONLY, JOURNAL),
 * and the journal commit (JOURNAL with t == 0). Its arithmetic is the 1.0 kernels': the conv
 * row, the normalisation and the gates come from gdn_math.cuh, the scan row from gdn_scan.cuh,
 * so the verify is bit-identical to the 1.0 program by construction.
 *
 * Thread mapping. A block is the scan's block: 128 threads carrying SCAN_COLS = 32 adjacent
 * columns of one (sequence b, value head h), 8 threads per pair of columns (gdn_scan.cu explains
 * the layout). The grid is b_n * num_v * 4 blocks, block (b, h, g) covering columns
 * 32g .. 32g + 31. Each block computes, for every row, the conv of exactly the channels its scan
 * needs: the 128 q and 128 k channels of its key head kh and the 32 v channels of its columns;
 * thread i convolves q channel i and k channel i, threads 0..31 also v channel 32g + i, each
 * holding its channel's window in registers across the rows. The conv outputs go to shared
 * memory, where each warp normalises q and k vectors of some rows (the prep's lane layout: lane
 * L holds elements L, L+32, L+64, L+96) and threads 0..7 compute the rows' beta and g_log. The
 * scan then reads its k, q and v from shared memory. Rows go in chunks of VERIFY_CHUNK so that any
 * t fits in shared memory; the conv windows and the state stay in registers between chunks.
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

#include "gdn_common.cuh"
#include "gdn_math.cuh"
#include "gdn_scan.cuh"
#include "kernels.h"

#define VERIFY_THREADS SCAN_THREADS
/* Rows staged in shared memory at a time. */
#define VERIFY_CHUNK 8
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

/* The shared memory of one block: a chunk of rows, the channels in the order q | k | v. The
 * same words hold the raw inputs, then the conv outputs, then (q and k normalised in place) the
 * scan's inputs. */
typedef struct verify_smem {
    float x[VERIFY_CHUNK][VERIFY_CHANNELS];
    float beta_raw[VERIFY_CHUNK], alpha[VERIFY_CHUNK];
    float beta[VERIFY_CHUNK], g_log[VERIFY_CHUNK];
    unsigned last;
} verify_smem;

/* One channel's conv state: window and weights (zero beyond d_conv), as ssm_conv1d.cu has. */
template <int DCONV> struct conv_channel {
    float win[MEMRA__D_CONV_MAX];
    float w8[MEMRA__D_CONV_MAX];

    __device__ __forceinline__ void load(const float *w, const float *ring, size_t c)
    {
        constexpr int PAD = DCONV - 1;
#pragma unroll
        for (int j = 0; j < MEMRA__D_CONV_MAX; j++) {
            w8[j] = j < DCONV ? w[c * DCONV + j] : 0.0f;
            win[j] = (j < PAD) ? ring[c * PAD + j] : 0.0f;
        }
    }
    __device__ __forceinline__ float row(float x)
    {
        win[DCONV - 1] = x;
        return memra__conv_row<DCONV - 1>(win, w8);
    }
    /* The ring after the last row: slots 0 .. PAD-1 of the window. */
    __device__ __forceinline__ void store_ring(float *dst) const
    {
#pragma unroll
        for (int j = 0; j < DCONV - 1; j++)
            dst[j] = win[j];
    }
};

template <int DCONV, bool VEC>
__global__ void __launch_bounds__(VERIFY_THREADS) gdn_verify_kernel(const memra__verify_args a)
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

    /* Table entries are read here, when the kernel executes. */
    const uint64_t *row = a.table + b * MEMRA__TABLE_WIDTH;
    float *ring = PAD > 0 ? (float *)(uintptr_t)row[0] : nullptr;
    const float *state_in = (const float *)(uintptr_t)row[1];
    float *state_out = (float *)(uintptr_t)row[(journal || t % 2 == 0) ? 1 : 2];
    float *jr = journal ? (float *)(uintptr_t)row[2] : nullptr;
    const size_t jhdr = MEMRA__JOURNAL_HEADER(a.num_k);
    const size_t jrow = MEMRA__JOURNAL_ROW(conv_dim, num_v);

    /* Journal: the accepted count against the rows the journal holds. Every block of the
     * sequence sees the same two numbers and takes the same branch. */
    uint32_t n = 0;
    if (journal) {
        const uint32_t held = word_u32(jr + kh);
        n = a.accepted[b];
        if (n > held) {
            if (tid == 0)
                record_error(a.err, a.err_claim, a.op, b, n, held,
                             MEMRA__ERR_ACCEPTED_OVER_JOURNAL);
            return;
        }
    }
    const size_t rows = n + t;

    /* The state columns of this thread (gdn_scan.cu's layout), loaded first so that their
     * latency overlaps the conv and prep of the first chunk. */
    const unsigned j = tid % SCAN_GROUP;
    const unsigned cl = tid / SCAN_GROUP * SCAN_NC; /* first column, relative to c0 */
    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    const size_t state_words = num_v * head_words;
    const size_t col = h * head_words + (size_t)(c0 + cl) * MEMRA__S + 4 * j;
    const bool state_vec = ((((uintptr_t)state_in | (uintptr_t)state_out) & 15u) == 0);
    float s[SCAN_NC][SCAN_ELEMS];
#pragma unroll
    for (int nn = 0; nn < SCAN_NC; nn++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (state_vec)
                load4<true>(s[nn] + 4 * r, state_in + col + nn * MEMRA__S + r * MEMRA__LANES);
            else
                load4<false>(s[nn] + 4 * r, state_in + col + nn * MEMRA__S + r * MEMRA__LANES);
        }

    /* The channels of this thread: q and k channel tid of key head kh, and (tid < 32) v
     * channel c0 + tid of head h. */
    const size_t ch_q = kh * MEMRA__S + tid;
    const size_t ch_k = key_dim + kh * MEMRA__S + tid;
    const bool has_v = tid < SCAN_COLS;
    const size_t ch_v = 2 * key_dim + h * MEMRA__S + c0 + (has_v ? tid : 0);
    conv_channel<DCONV> cq, ck, cv;
    cq.load(a.w, ring, ch_q);
    ck.load(a.w, ring, ch_k);
    if (has_v)
        cv.load(a.w, ring, ch_v);

    /* Counts this block in as a reader of the key head's shared data (see the header comment);
     * sm.last tells whether it was the last. Every thread fences its own reads first, so that
     * they are complete before the count can let a writer proceed. */
    const unsigned readers = (unsigned)(ratio * SCAN_BLOCKS_PER_HEAD);
    bool counted = false;
    auto count_in = [&]() {
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            unsigned *cnt = a.counters + b * a.num_k + kh;
            const unsigned before = atomicAdd(cnt, 1u);
            const bool last = before + 1 == readers;
            if (last)
                atomicExch(cnt, 0u);
            __threadfence();
            sm.last = last ? 1u : 0u;
        }
        __syncthreads();
        counted = true;
    };
    if (n == 0)
        count_in();

    /* Where the new rows' outputs go. */
    const size_t x_base = b * t; /* row index of new row 0 in [b_n, t, ...] */

    for (size_t r0 = 0; r0 < rows; r0 += VERIFY_CHUNK) {
        const size_t nr = rows - r0 < VERIFY_CHUNK ? rows - r0 : VERIFY_CHUNK;

        /* Stage the chunk's raw inputs: journal rows below n, new rows from n. */
        for (size_t rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            const float *src =
                gr < n ? jr + jhdr + gr * jrow : a.qkv + (x_base + (gr - n)) * conv_dim;
            sm.x[rr][tid] = src[ch_q];
            sm.x[rr][MEMRA__S + tid] = src[ch_k];
            if (has_v)
                sm.x[rr][VERIFY_QK + tid] = src[ch_v];
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
        const bool last = counted && sm.last != 0;

        /* Conv, channel by channel over the chunk's rows. At the journal boundary (after row
         * n - 1) the windows are the folded ring; after the last row, the final ring. */
        for (size_t rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            const float yq = cq.row(sm.x[rr][tid]);
            const float yk = ck.row(sm.x[rr][MEMRA__S + tid]);
            const float yv = has_v ? cv.row(sm.x[rr][VERIFY_QK + tid]) : 0.0f;
            sm.x[rr][tid] = yq;
            sm.x[rr][MEMRA__S + tid] = yk;
            if (has_v)
                sm.x[rr][VERIFY_QK + tid] = yv;

            const bool is_new = gr >= n;
            const size_t r = gr - n; /* new-row index when is_new */
            if (is_new && a.conv_out != nullptr) {
                float *y = a.conv_out + (x_base + r) * conv_dim;
                if (qk_writer) {
                    y[ch_q] = yq;
                    y[ch_k] = yk;
                }
                if (has_v)
                    y[ch_v] = yv;
            }
            if (PAD > 0 && is_new && a.snap_conv != nullptr && r + 1 < t) {
                float *sn = a.snap_conv + (b * (t - 1) + r) * conv_dim * PAD;
                if (qk_writer) {
                    cq.store_ring(sn + ch_q * PAD);
                    ck.store_ring(sn + ch_k * PAD);
                }
                if (has_v)
                    cv.store_ring(sn + ch_v * PAD);
            }
            /* The ring to keep: folded (journal, after row n - 1, or unchanged when n == 0,
             * which needs no write) or final (after the last row). */
            const bool ring_point = journal ? (n > 0 && gr + 1 == n) : (gr + 1 == rows);
            if (PAD > 0 && ring_point) {
                if (last) {
                    cq.store_ring(ring + ch_q * PAD);
                    ck.store_ring(ring + ch_k * PAD);
                }
                if (has_v)
                    cv.store_ring(ring + ch_v * PAD);
            }
        }
        __syncthreads();

        /* Prep: warp w normalises the vectors w, w + 4, ... of the chunk (vector 2rr is row rr's
         * q, 2rr + 1 its k); threads below nr compute their row's gates. */
        const unsigned warp = tid / MEMRA__LANES, lane = tid % MEMRA__LANES;
        for (size_t vec = warp; vec < 2 * nr; vec += SCAN_WARPS) {
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
        if (tid < nr) {
            sm.beta[tid] = memra__gate_beta(sm.beta_raw[tid]);
            sm.g_log[tid] = memra__gate_g_log(sm.alpha[tid], a.dt_bias[h], a.a[h]);
        }
        __syncthreads();

        /* The optional prep outputs of the chunk's new rows. */
        for (size_t rr = 0; rr < nr; rr++) {
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
        for (size_t rr = 0; rr < nr; rr++) {
            const size_t gr = r0 + rr;
            scan_row in;
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

            float *op = nullptr, *sn = nullptr;
            if (gr >= n) {
                const size_t r = gr - n;
                op = a.o + ((x_base + r) * num_v + h) * MEMRA__S + c0 + cl;
                if (a.snap_ssm != nullptr && r + 1 < t)
                    sn = a.snap_ssm + (b * (t - 1) + r) * state_words + col;
            }
            scan_row_step<VEC>(s, in, j, a.scale, op, sn);

            /* Journal: the folded state goes back in place; the new rows continue from it. */
            if (journal && n > 0 && gr + 1 == n) {
#pragma unroll
                for (int nn = 0; nn < SCAN_NC; nn++) {
                    if (state_vec)
                        store_column<true>(state_out + col + nn * MEMRA__S, s[nn]);
                    else
                        store_column<false>(state_out + col + nn * MEMRA__S, s[nn]);
                }
            }
        }
        __syncthreads();
    }

    if (!journal) {
#pragma unroll
        for (int nn = 0; nn < SCAN_NC; nn++) {
            if (state_vec)
                store_column<true>(state_out + col + nn * MEMRA__S, s[nn]);
            else
                store_column<false>(state_out + col + nn * MEMRA__S, s[nn]);
        }
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

template <int DCONV> static int launch_verify(const memra__verify_args *a, void *stream)
{
    const dim3 grid((unsigned)(a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD));
    /* Snapshot stores are 16-byte wide when the snapshots are 16-byte aligned (every offset
     * the kernel adds is a multiple of 4 floats); without snapshots either kernel serves. */
    const bool vec = ((uintptr_t)a->snap_ssm & 15u) == 0;
    return memra__launch(vec ? gdn_verify_kernel<DCONV, true> : gdn_verify_kernel<DCONV, false>,
                         grid, dim3(VERIFY_THREADS), stream, *a);
}

extern "C" int memra__cuda_gdn_verify(const memra__verify_args *args, void *stream)
{
    switch (args->d_conv) {
    case 1:
        return launch_verify<1>(args, stream);
    case 2:
        return launch_verify<2>(args, stream);
    case 3:
        return launch_verify<3>(args, stream);
    case 4:
        return launch_verify<4>(args, stream);
    case 5:
        return launch_verify<5>(args, stream);
    case 6:
        return launch_verify<6>(args, stream);
    case 7:
        return launch_verify<7>(args, stream);
    case 8:
        return launch_verify<8>(args, stream);
    }
    /* validate.c admits only 1..8. */
    return (int)cudaErrorInvalidValue;
}

extern "C" int memra__cuda_gdn_rollback(const memra__rollback_args *args, void *stream)
{
    const dim3 grid((unsigned)(args->b_n * ROLLBACK_PARTS));
    return memra__launch(gdn_rollback_kernel, grid, dim3(ROLLBACK_THREADS), stream, *args);
}
