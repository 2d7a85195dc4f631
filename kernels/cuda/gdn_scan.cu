/*
 * CUDA kernel: the GDN recurrent scan, head dim 128, t rows of b_n sequences with the state kept
 * in registers across the rows (docs/arithmetic.md, "Scan"). One kernel serves the per-row op
 * (t == 1, in/out tables with stride 1, in == out allowed) and the packed op (t rows, stride-3
 * table, optional snapshots); the SNAPSHOTS verify (gdn_verify.cu) runs the packed form on its
 * prologue's rows, whose q and k hold one head per key head (qk_heads). Every row of every call
 * goes through the same per-row function, scan_row_step, whose rounding is pinned operation by
 * operation (see there), inside a row loop that is not unrolled; so per-row chains and packed calls
 * are bit-identical by construction. The kernel has eight instantiations: 16-byte or 4-byte
 * accesses (VEC), one or two rows of inputs held ahead in registers (AHEAD: 1 for the per-row op,
 * 2 for packed calls), q and k per value head or per key head (MAP: the SNAPSHOTS verify's, whose
 * 16-byte form takes either AHEAD; see launch_scan), and snapshots stored with the evict-first
 * hint or not (STREAM: one of the MAP forms). They differ in where values are loaded from and
 * when and in the stores' cache policy, never in arithmetic.
 *
 * Thread mapping. The contract describes one column of one head as 32 "lanes": lane L owns the
 * state rows i = r*32 + L (r = 0..3), accumulates its partial dot products over r, and the 32
 * partials are summed by a pairwise tree with strides 16, 8, 4, 2, 1. Here a group of EIGHT
 * threads carries SCAN_NC = 2 adjacent columns: thread j (0..7) of the group plays the four
 * consecutive lanes L = 4j + u (u = 0..3) of both, i.e. holds the 16 rows i = 32r + 4j + u of
 * each column in s[n][4r + u]. Those rows are four aligned runs of four floats, so every state,
 * k, q and snapshot access of a thread is one 16-byte access per r, and a warp's state store
 * covers whole 128-byte lines. The tree levels that pair lanes of different threads go through
 * shuffles, with the work of each level shared by the group (column_sum): 6 shuffles per
 * reduction. The two columns share their k, q, g_log and beta loads. A warp carries 4 groups
 * (8 adjacent columns), a block SCAN_WARPS warps, i.e. SCAN_COLS adjacent columns of one
 * (sequence, head). NOTES.md ("The 1.0 scan") has the measurements behind this layout: on the H200
 * the scan of 1.0.0 was bound by the multiprocessor's memory instruction issue as much as by HBM;
 * this layout issues about a fifth of its memory instructions per column and row, for twice its
 * shuffles (6 per reduction instead of 3).
 *
 * Memory. The state is stored transposed, so a column is 128 contiguous floats. The kernel
 * reads each state once and writes t - 1 snapshots plus the final state: the (t + 1) x
 * state-size floor of the packed verify. A thread reads all its state elements before it
 * writes any, and no thread touches another's, which makes in == out (in place) safe. The q and
 * k rows that all columns of a head share are read through L1; at the start the block asks L1
 * for all t rows of them at once, and each row requests the inputs of a later row (the next,
 * or the one after it) before it computes. Views and table entries need only be 4-byte aligned
 * (validate.c): the launcher picks the 16-byte kernel when q, k and the snapshots are 16-byte
 * aligned, and the kernel checks the state buffers it reads from the table; otherwise the same code
 * runs with 4-byte accesses (same values in the same registers, so the same results). No shared
 * memory is used: a kernel with a different shared-memory configuration could not share a
 * multiprocessor with the conv and prep kernels that precede it under programmatic dependent launch
 * (NOTES.md, "The 1.0 scan").
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "gdn_scan.cuh"
#include "kernels.h"

/* Where this thread's inputs and outputs are, after the table lookup. */
typedef struct scan_ptrs {
    const float *in, *kp, *qp, *vp, *gp, *bp;
    float *out, *op, *sn;
    size_t row_step, qk_step, num_v, state_words, t;
    float scale;
    unsigned j;
    bool state_vec;
} scan_ptrs;

template <bool VEC>
static __device__ __forceinline__ void load_row(scan_row &in, const scan_ptrs &a)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        load4<VEC>(in.k + 4 * r, a.kp + r * MEMRA__LANES);
        load4<VEC>(in.q + 4 * r, a.qp + r * MEMRA__LANES);
    }
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
        in.v[n] = a.vp[n];
    in.g = *a.gp;
    in.beta = *a.bp;
}

/* Moves the input pointers to the next row, or leaves them on the current one when `step` is
 * false (the last row: a read past it would leave the views). */
static __device__ __forceinline__ void advance_row(scan_ptrs &a, bool step)
{
    const size_t adv = step ? 1 : 0;
    a.kp += adv * a.qk_step;
    a.qp += adv * a.qk_step;
    a.vp += adv * a.row_step;
    a.gp += adv * a.num_v;
    a.bp += adv * a.num_v;
}

/*
 * The t rows of this thread's columns. VEC picks 16-byte or 4-byte accesses for k, q and the
 * snapshots; the state's own accesses follow a.state_vec. AHEAD rows of inputs are held in
 * registers: each row requests the inputs of the row AHEAD after it before it computes (rows
 * past the last re-read the last, in bounds, instead of branching). ptxas places those loads
 * after the row's arithmetic (keeping their registers free until then; NOTES.md has the
 * profile), so with AHEAD == 1 a row starts by waiting for its inputs from L2, which was a
 * quarter of the scan's stall samples at B = 1. AHEAD == 2 gives the loads a whole row to
 * arrive, for about 40 more registers (165-168 instead of 125-127). The rows' arithmetic is the
 * same scan_row_step either way. EF (the MAP instantiations' 16-byte forms) loads the state and
 * stores the final state with the evict-first hint (ld.global.cs, st.global.cs) where the state's
 * accesses are 16-byte ones: a block touches each of those lines once, so L2 may give them up
 * before the rows' inputs and the snapshots (NOTES.md, "the MAP scan's state evict-first"). The
 * 1.0 operations' instantiations keep 1.0.0's plain accesses.
 */
template <bool VEC, int AHEAD, bool STREAM, bool EF = false, class AfterState>
static __device__ __forceinline__ void scan_rows(scan_ptrs a, AfterState after_state)
{
    float s[SCAN_NC][SCAN_ELEMS];
#pragma unroll
    for (int n = 0; n < SCAN_NC; n++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (a.state_vec)
                load4<true, EF>(s[n] + 4 * r, a.in + n * MEMRA__S + r * MEMRA__LANES);
            else
                load4<false>(s[n] + 4 * r, a.in + n * MEMRA__S + r * MEMRA__LANES);
        }
    after_state(s);

    /* in[0] is the row being computed, in[i] the row i after it. */
    scan_row in[AHEAD];
    load_row<VEC>(in[0], a);
#pragma unroll
    for (int i = 1; i < AHEAD; i++) {
        advance_row(a, (size_t)i < a.t);
        load_row<VEC>(in[i], a);
    }
#pragma unroll 1
    for (size_t row = 0; row < a.t; row++) {
        advance_row(a, row + AHEAD < a.t);
        scan_row next;
        load_row<VEC>(next, a);

        const bool snap_row = a.sn != nullptr && row + 1 < a.t;
        scan_row_step<VEC, STREAM>(s, in[0], a.j, a.scale, a.op, snap_row ? a.sn : nullptr);
        if (snap_row)
            a.sn += a.state_words;
        a.op += a.row_step;
#pragma unroll
        for (int i = 0; i + 1 < AHEAD; i++)
            in[i] = in[i + 1];
        in[AHEAD - 1] = next;
    }

#pragma unroll
    for (int n = 0; n < SCAN_NC; n++) {
        if (a.state_vec)
            store_column<true, EF>(a.out + n * MEMRA__S, s[n]);
        else
            store_column<false>(a.out + n * MEMRA__S, s[n]);
    }
}

template <bool VEC, int AHEAD, bool MAP, bool STREAM = false>
__global__ void __launch_bounds__(SCAN_THREADS)
    gdn_scan_kernel(const float *__restrict__ q, const float *__restrict__ k,
                    const float *__restrict__ v, const float *__restrict__ g_log,
                    const float *__restrict__ beta, const uint64_t *__restrict__ in_table,
                    size_t in_stride, const uint64_t *__restrict__ out_table, size_t out_stride,
                    const float *state_in, float *state_out, float *__restrict__ o,
                    float *__restrict__ snap, size_t num_v, size_t t, float scale, size_t qk_heads,
                    int grouped)
{
    /* The SNAPSHOTS verify's scan (MAP) reads its state before it waits for its predecessor, the
     * verify's prologue, so that the state's transfer overlaps the prologue: the prologue never
     * writes a state, and it lets this kernel launch only after its own griddepcontrol.wait, when
     * every earlier kernel that could write the state has completed (as the row loop of
     * gdn_rowloop.cuh does). It waits before it reads or prefetches anything the prologue writes.
     * The 1.0 operations' scans (MAP false) wait before they read anything, as in 1.0.0. */
    if (MAP)
        memra__pdl_trigger();
    else
        memra__pdl_enter();

    scan_ptrs a;
    a.j = threadIdx.x % SCAN_GROUP;
    const unsigned c0 = (blockIdx.x % SCAN_BLOCKS_PER_HEAD) * SCAN_COLS;
    const unsigned c = c0 + threadIdx.x / SCAN_GROUP * SCAN_NC;
    const size_t bh = blockIdx.x / SCAN_BLOCKS_PER_HEAD;
    const size_t h = bh % num_v;
    const size_t b = bh / num_v;

    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    a.state_words = num_v * head_words;
    /* This thread's rows start at row 4j of its first column. */
    const size_t col = h * head_words + (size_t)c * MEMRA__S + 4 * a.j;

    /* Table entries are read here, when the kernel executes: a replayed graph follows a
     * rewritten table. The state pointers may alias each other (in place), so they are not
     * restrict; they never alias q, k, v, o or the snapshots (validate.c). The
     * single-sequence op passes its states directly and no tables. */
    a.in =
        (in_table != nullptr ? (const float *)(uintptr_t)in_table[b * in_stride] : state_in) + col;
    a.out =
        (out_table != nullptr ? (float *)(uintptr_t)out_table[b * out_stride] : state_out) + col;
    /* Every state access is at a multiple of 4 floats from these (head, column and row offsets
     * are multiples of 128 floats), so their alignment decides for the whole thread. */
    a.state_vec = (((uintptr_t)a.in | (uintptr_t)a.out) & 15u) == 0;

    /* Row 0 of this (sequence, head); every row advances the pointers by num_v heads (q and k,
     * when MAP, by qk_heads: memra__scan_args). The 1.0 operations' q and k rows are per value
     * head and take no head mapping (MAP false): its code, 64-bit divisions and all, is then not
     * in their kernel, which made their per-row chains 2 to 3 % slower than 1.1.0's (H200,
     * graph-replayed, B = 1 and 8). */
    const size_t head0 = b * t * num_v + h;
    const size_t qk0 = MAP ? b * t * qk_heads + memra__qk_head(h, num_v, qk_heads, grouped) : head0;
    const size_t qk_row = MAP ? qk_heads : num_v;
    a.row_step = num_v * MEMRA__S;
    a.qk_step = qk_row * MEMRA__S;
    a.num_v = num_v;
    a.t = t;
    a.scale = scale;
    a.kp = k + qk0 * MEMRA__S + 4 * a.j;
    a.qp = q + qk0 * MEMRA__S + 4 * a.j;
    a.vp = v + head0 * MEMRA__S + c;
    a.gp = g_log + head0;
    a.bp = beta + head0;
    a.op = o + head0 * MEMRA__S + c;
    a.sn = snap != nullptr ? snap + b * (t - 1) * a.state_words + col : nullptr;

    /* Ask L1 for every row's inputs, one line per thread: 16 threads per row, of which 11 take a
     * line each (k and q: 4 lines each, the block's v, g_log, beta). A prefetch only warms the
     * cache; the loads read the same addresses either way. */
    const auto prefetch = [&]() {
        const unsigned part = threadIdx.x % 16;
        for (size_t row = threadIdx.x / 16; part < SCAN_PREFETCH_LINES && row < t;
             row += SCAN_THREADS / 16) {
            const size_t hr = head0 + row * num_v, qr = qk0 + row * qk_row;
            const float *p = part < 4    ? k + qr * MEMRA__S + part * MEMRA__LANES
                             : part < 8  ? q + qr * MEMRA__S + (part - 4) * MEMRA__LANES
                             : part == 8 ? v + hr * MEMRA__S + c0
                             : part == 9 ? g_log + hr
                                         : beta + hr;
            asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
        }
    };
    if (MAP) {
        scan_rows<VEC, AHEAD, STREAM, VEC>(a, [&](float(&s)[SCAN_NC][SCAN_ELEMS]) {
        /* The state's values as operands of an (empty) volatile asm, so that the compiler
         * issues their loads here, before the wait, rather than next to their first use. */
#pragma unroll
            for (int n = 0; n < SCAN_NC; n++)
#pragma unroll
                for (int e = 0; e < SCAN_ELEMS; e++)
                    asm volatile("" : "+f"(s[n][e]));
            memra__pdl_wait();
            prefetch();
        });
    } else {
        prefetch();
        scan_rows<VEC, AHEAD, false>(a, [](float(&)[SCAN_NC][SCAN_ELEMS]) {});
    }
}

/* The 16-byte MAP scan's forms for a SNAPSHOTS verify of t >= 2 rows, listed once: the kernels
 * (kernels[f]) and one wave of each on the device (waves), in the same order. */
template <auto... K> struct scan_forms {
    static constexpr size_t count = sizeof...(K);
    static constexpr decltype(&gdn_scan_kernel<true, 1, true>) kernels[count] = {K...};

    static cudaError_t waves(int sms, size_t (&wave)[count])
    {
        cudaError_t err = cudaSuccess;
        size_t f = 0;
        ((err = err == cudaSuccess ? memra__kernel_wave<K>(SCAN_THREADS, 0, sms, &wave[f++]) : err),
         ...);
        return err;
    }
};

/* In the order of their blocks per multiprocessor on sm_90 with nvcc 13.0: two rows of inputs
 * ahead (165 registers, 3 blocks), one row ahead (127, 4) and one row ahead with streaming
 * snapshot stores (ptxas schedules that one in 96 registers, 5 blocks). */
typedef scan_forms<gdn_scan_kernel<true, 2, true>, gdn_scan_kernel<true, 1, true>,
                   gdn_scan_kernel<true, 1, true, true>>
    map_forms;
#define MAP_ONE_AHEAD ((size_t)1)

/* The form (index into map_forms::kernels) of the 16-byte MAP scan of `blocks` blocks, for a
 * SNAPSHOTS verify of t >= 2 rows, into *form; the CUDA error of the device queries. Two rows ahead
 * keep every row off L2's latency; the other forms fit more blocks per multiprocessor, and a wave
 * of more blocks takes about as much longer as it holds more (the multiprocessor's issue and memory
 * rate are shared). What a form with more blocks per multiprocessor saves is the idle part of a
 * grid's last wave, so the rule counts block slots: waves times the blocks of one wave. A form
 * other than two rows ahead is taken where its grid is at most two waves and takes fewer slots;
 * beyond two waves blocks start as others finish, no wave stands idle, and two rows ahead win.
 * Equal slots go to the form with fewer blocks per multiprocessor. Measured on 132
 * multiprocessors (one H100, ornith, T = 2 to 16, 128 blocks per sequence; NOTES.md): one row
 * ahead was faster at 4, 7 and 8 sequences and slower at 6, 10 and 16; the streaming form faster
 * at 5 and 10 (660 and 1320 slots against 792 and 1584) and slower at 6, 8 and 9 (1320 against
 * 792, 1188 and 1188). */
static int map_form(size_t blocks, size_t *form)
{
    int sms = 0;
    size_t wave[map_forms::count] = {0};
    cudaError_t err = memra__device_sms(&sms);
    if (err == cudaSuccess)
        err = map_forms::waves(sms, wave);
    if (err != cudaSuccess)
        return (int)err;
    *form = 0;
    size_t best = 0;
    for (size_t f = 0; f < map_forms::count; f++) {
        if (wave[f] == 0)
            continue;
        const size_t waves = (blocks + wave[f] - 1) / wave[f];
        const size_t slots = waves * wave[f];
        if ((f == 0 || waves <= 2) && (best == 0 || slots < best)) {
            best = slots;
            *form = f;
        }
    }
    return 0;
}

/* Grid: one block per (sequence, head, group of SCAN_COLS columns), flattened into x as
 * ((b * num_v + h) * SCAN_BLOCKS_PER_HEAD + group); far below the 2^31 - 1 limit for any batch
 * that fits in device memory (each block covers 16 KiB of state). The 16-byte kernel needs
 * q, k and the snapshots 16-byte aligned: every offset the kernel adds is a multiple of 4
 * floats. Packed calls (t >= 2) hold two rows of inputs ahead: on the H200 that made the ornith
 * verify at B = 32, T = 8 about 2.4 us faster (three blocks per multiprocessor instead of four,
 * but no row waits for L2), and changed nothing at B = 1. The per-row op (t == 1) has no next
 * row to wait for and keeps AHEAD = 1: with 2, the T = 8 per-row chain took 48.4 us instead of
 * 44.9 (NOTES.md). q and k of one head per key head (qk_heads below num_v: the scan of a
 * SNAPSHOTS verify, and of a FINAL_ONLY verify of one row) take the MAP instantiations; every 1.0
 * operation passes one per value head. A verify of one row holds one row ahead too, as the
 * per-row op does, when its q and k are 16-byte aligned (as the verify's workspace always is):
 * the 16-byte form with two rows ahead takes 165 registers and 3 blocks per multiprocessor, with
 * one 127 and 4. A verify of several rows takes the form of map_forms that leaves the fewest
 * block slots of its waves idle, on a grid of at most two waves (map_form). */
static int launch_scan(const memra__scan_args *a, void *stream)
{
    const size_t blocks = a->b_n * a->num_v * SCAN_BLOCKS_PER_HEAD;
    const dim3 grid((unsigned)blocks);
    const bool vec = (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->snap) & 15u) == 0;
    decltype(&gdn_scan_kernel<true, 1, false>) kernel;
    if (a->qk_heads != a->num_v && vec) {
        size_t form = MAP_ONE_AHEAD;
        if (a->t >= 2) {
            const int err = map_form(blocks, &form);
            if (err != 0)
                return err;
        }
        kernel = map_forms::kernels[form];
    } else if (a->qk_heads != a->num_v)
        kernel = gdn_scan_kernel<false, 2, true>;
    else if (a->t >= 2)
        kernel = vec ? gdn_scan_kernel<true, 2, false> : gdn_scan_kernel<false, 2, false>;
    else
        kernel = vec ? gdn_scan_kernel<true, 1, false> : gdn_scan_kernel<false, 1, false>;
    return memra__launch(kernel, grid, dim3(SCAN_THREADS), stream, a->q, a->k, a->v, a->g_log,
                         a->beta, a->in_table, a->in_stride, a->out_table, a->out_stride,
                         a->state_in, a->state_out, a->o, a->snap, a->num_v, a->t, a->scale,
                         a->qk_heads, a->grouped);
}

extern "C" int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream)
{
    return launch_scan(args, stream);
}
