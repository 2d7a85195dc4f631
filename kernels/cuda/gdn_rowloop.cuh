/*
 * The verify's row loop: the kernel body of the scan of every verify mode and of the journal
 * commit (gdn_verify.cu). Every row goes through memra__scan_row (or its pipelined form) below,
 * whose rounding is pinned operation by operation, so no instantiation can compute different
 * bits; the 1.0 scans (gdn_scan.cu, gdn_scan.cuh) run the same contract in their own layout, and
 * the suite's memcmp checks of every verify against the 1.0 program hold the two together.
 *
 * Thread mapping. The contract (docs/arithmetic.md) describes one column of one head as 32
 * "lanes": lane L owns the state rows i = 32r + L (r = 0..3), accumulates its partial dot
 * product over r, and the 32 partials are summed by a pairwise tree with strides 16, 8, 4, 2, 1.
 * Here FOUR threads carry a column: thread j (0..3) of the group plays the lanes L = 4m + j,
 * m = 0..7, i.e. holds the 32 rows i = 32r + 4m + j in s[n][8r + m]. Lanes 4m + j and 4(m+4) + j
 * are both thread j's, and so are L and L + 8, L and L + 4: the tree's strides 16, 8 and 4 are
 * plain additions inside the thread, and only strides 2 and 1 cross threads (two shuffles per
 * reduction, no selects). A thread carries NC columns (n = 0..NC-1, columns n * G + group), a
 * block COLS adjacent columns of one (sequence, head), so a head is S / COLS blocks.
 *
 * Staging. A thread's state rows are 4 floats apart, so the state goes through a padded
 * shared-memory tile: the block's COLS columns (contiguous in the transposed state) arrive by
 * 16-byte cp.async into columns of SST floats, each thread then reads its own 32 words per
 * column (conflict-free: the pad of 4 floats puts the 8 groups of a warp on different banks), and
 * results leave the same way (each thread writes its own words, then the warp writes its columns
 * with coalesced 16-byte stores). k and q are staged transposed: element e = 4w + u of a row sits
 * at [u * 40 + w], so thread j reads its 32 elements (u = j, w = 8r + m) with eight 16-byte loads;
 * v, g_log and beta of a row are staged beside them. Rows are staged TC at a time.
 *
 * Inputs. The scan reads the workspace its prologue kernel wrote ([rows, num_k, S] for q and k,
 * one row per KEY head, already in the transposed order, staged with 16-byte copies).
 *
 * Journal (verify in JOURNAL mode and the commit): before the new rows, the block folds the
 * journal's accepted rows, each `s = fma(gd, s, k * delta)` per element with the rounded delta
 * the verify that wrote it computed (the per-row update's own operands and roundings: no
 * reduction), writes the folded state back in place, then runs the new rows and records their
 * deltas.
 */
#ifndef MEMRA_GDN_ROWLOOP_CUH
#define MEMRA_GDN_ROWLOOP_CUH

#include "gdn_common.cuh"

/* A staged state column (128 rows + 4 pad), a staged k or q row, and its four runs. */
#define SCAN_SST 132
#define SCAN_KRUN 40
#define SCAN_KST (4 * SCAN_KRUN)
/* The slot word of seq_info (n, slot, capacity, blocks ended, per sequence) for a sequence the
 * prologue refused (gdn_verify.cu). */
#define SCAN_REFUSED 0xffffffffu

/* A block's shape: NC columns per thread, COLS per block, TC rows staged at a time. */
template <int NC_, int COLS_, int TC_> struct scan_cfg {
    static constexpr int NC = NC_, COLS = COLS_, TC = TC_;
    static constexpr int G = COLS / NC; /* column groups */
    static constexpr int NT = G * 4;    /* threads */
    static constexpr int WARPS = NT / MEMRA__LANES;
    static constexpr int BPH = MEMRA__S / COLS; /* blocks per head */
    static constexpr int TILE = COLS * SCAN_SST;
    static constexpr int FLOATS = TILE + 2 * TC * SCAN_KST + TC * COLS + 2 * TC;
    static constexpr size_t SMEM = (size_t)FLOATS * sizeof(float);
    /* A journal scan's fold staging beside that: TC journal rows of k, deltas and gd. */
    static constexpr int FOLD_FLOATS = TC * SCAN_KST + TC * COLS + TC;
    static constexpr size_t SMEM_JOURNAL = (size_t)(FLOATS + FOLD_FLOATS) * sizeof(float);
    static_assert(G % 8 == 0, "a warp holds 8 whole groups of every column set");
    static_assert(TC % 4 == 0, "16-byte aligned staging rows");
};

/* Asynchronous global-to-shared copies (sm_80 and newer; a plain load and store before). */
static __device__ __forceinline__ void memra__cp16(float *dst, const float *src)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
    *(float4 *)dst = *(const float4 *)src;
#endif
}
static __device__ __forceinline__ void memra__cp4(float *dst, const float *src)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
#else
    *dst = *src;
#endif
}
static __device__ __forceinline__ void memra__cp_wait_all(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\ncp.async.wait_all;\n" ::: "memory");
#endif
}

/*
 * The staging copies are written per warp, with every loop's trip count known at compile time,
 * so that each copy is one instruction at a constant offset from a base computed once: loops over
 * `i = threadIdx.x; i < n; i += NT` recomputed a division and a 64-bit address for every 16 bytes
 * they copied, and were most of why a third of the wide scan's instructions ran once per block
 * rather than once per row (NOTES.md).
 *
 * One k or q row, already transposed (element 4w + u at src[32u + w]), into its staging row (four
 * runs of 32 floats, SCAN_KRUN apart) by one warp: lane l copies words 4l .. 4l + 3, which belong
 * to run l / 8. 16-byte copies when `vec` (both 16-byte aligned), 4-byte ones otherwise.
 */
static __device__ __forceinline__ void stage_kq_warp(float *dst, const float *src, unsigned lane,
                                                     bool vec)
{
    float *d = dst + (lane / 8) * SCAN_KRUN + 4 * (lane % 8);
    if (vec) {
        memra__cp16(d, src + 4 * lane);
    } else {
#pragma unroll
        for (int u = 0; u < 4; u++)
            memra__cp4(d + u, src + 4 * lane + u);
    }
}

/* COLS contiguous floats from src to dst by one warp: 16-byte copies by its first COLS / 4 lanes
 * when `vec`, 4-byte ones otherwise. */
template <int COLS>
static __device__ __forceinline__ void stage_cols_warp(float *dst, const float *src, unsigned lane,
                                                       bool vec)
{
    static_assert(COLS % 4 == 0 && COLS <= 4 * MEMRA__LANES, "one 16-byte copy per lane at most");
    if (vec) {
        if (lane < COLS / 4)
            memra__cp16(dst + 4 * lane, src + 4 * lane);
    } else {
#pragma unroll
        for (int e = 0; e < COLS; e += MEMRA__LANES)
            if (e + (int)lane < COLS)
                memra__cp4(dst + e + lane, src + e + lane);
    }
}

/* Where element i of a 128-vector goes in the transposed order: 32 * (i % 4) + i / 4. */
static __device__ __forceinline__ int memra__perm_index(int i)
{
    return MEMRA__LANES * (i % 4) + i / 4;
}

/* This thread's 32 elements of a staged k or q row, x[8r + m] = element 32r + 4m + j. */
static __device__ __forceinline__ void load_kq(float (&x)[32], const float *row, unsigned j)
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const float4 a = *(const float4 *)(row + SCAN_KRUN * j + 8 * r);
        const float4 b = *(const float4 *)(row + SCAN_KRUN * j + 8 * r + 4);
        x[8 * r + 0] = a.x;
        x[8 * r + 1] = a.y;
        x[8 * r + 2] = a.z;
        x[8 * r + 3] = a.w;
        x[8 * r + 4] = b.x;
        x[8 * r + 5] = b.y;
        x[8 * r + 6] = b.z;
        x[8 * r + 7] = b.w;
    }
}

/*
 * The contract's 32-lane sum of a column's dot product, this thread holding the partials of lanes
 * 4m + j in p[m]. Strides 16 (m + 4), 8 (m + 2) and 4 (m + 1) are this thread's own additions;
 * strides 2 and 1 pair thread j with j ^ 2 and j ^ 1. Every addition has exactly the tree's two
 * operands (lane L adds lane L + stride; a thread whose j has the stride's bit set adds the same
 * two values the other way round, and IEEE addition is commutative), so every thread of the group
 * ends with the tree's total: lane 0's value, which is also what the contract's butterfly
 * all-reduce (kv) leaves in every lane.
 */
static __device__ __forceinline__ float memra__reduce8(const float (&p)[8])
{
    const float a0 = __fadd_rn(p[0], p[4]), a1 = __fadd_rn(p[1], p[5]);
    const float a2 = __fadd_rn(p[2], p[6]), a3 = __fadd_rn(p[3], p[7]);
    const float b0 = __fadd_rn(a0, a2), b1 = __fadd_rn(a1, a3);
    float c = __fadd_rn(b0, b1);
    c = __fadd_rn(c, __shfl_xor_sync(MEMRA__FULL_MASK, c, 2));
    c = __fadd_rn(c, __shfl_xor_sync(MEMRA__FULL_MASK, c, 1));
    return c;
}

/* The dot product of this thread's column s with x (both in the thread's lane order): each
 * lane's fma chain over r from 0.0f, then the tree. */
static __device__ __forceinline__ float memra__column_dot(const float (&s)[32],
                                                          const float (&x)[32])
{
    float p[8];
#pragma unroll
    for (int m = 0; m < 8; m++) {
        p[m] = 0.0f;
#pragma unroll
        for (int r = 0; r < 4; r++)
            p[m] = __fmaf_rn(s[8 * r + m], x[8 * r + m], p[m]);
    }
    return memra__reduce8(p);
}

/* Four words of a staging row into x by one 16-byte shared-memory load, written as inline PTX
 * (asm volatile) so that nvcc emits it where the code puts it, next to the fma chain that
 * consumes it (memra__update_streamed, memra__dot_streamed). ptxas sees an ordinary ld.shared and
 * may still merge two loads of the same words: in the wide FINAL kernel nvcc 13.0 builds it merges
 * the update's loads of k with the kv's, so that a row loads k and q once each (16 loads). With
 * NOMERGE the load is ld.volatile.shared, which ptxas may not merge with an earlier load of the
 * same words (RELOAD in memra__update_streamed). */
template <bool NOMERGE = false>
static __device__ __forceinline__ void memra__lds4_volatile(float (&x)[4], const float *p)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (NOMERGE)
        asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
                     : "r"(a));
    else
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
                     : "r"(a));
}

/*
 * The state update of this thread's NC columns, s = fma(gd, s, k * delta), with the row's k read
 * from its staging row four words at a time rather than from registers the kv filled. ptxas
 * merges these loads with the kv's unless RELOAD makes them volatile (memra__lds4_volatile): the
 * wide JOURNAL scan, whose row loop also keeps the deltas' address, then reads k again (24 loads
 * per row instead of 16, none of k held across the kv reduction) and fits the bound of 128
 * registers without spilling (124), where the merged loads left it spilling 24 bytes; the wide
 * FINAL_ONLY scan is faster with them merged (NOTES.md). The same operations on the same values,
 * in an order that only differs between independent elements.
 */
template <int NC, bool RELOAD = false>
static __device__ __forceinline__ void memra__update_streamed(float (&s)[NC][32], const float *sk,
                                                              unsigned j, const float (&delta)[NC],
                                                              float gd)
{
#pragma unroll
    for (int q = 0; q < 8; q++) {
        float x[4];
        memra__lds4_volatile<RELOAD>(x, sk + SCAN_KRUN * j + 4 * q);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int n = 0; n < NC; n++)
                s[n][4 * q + u] = __fmaf_rn(gd, s[n][4 * q + u], __fmul_rn(x[u], delta[n]));
    }
}

/*
 * The dot products of this thread's NC columns with a staged k or q row, the row read four words
 * at a time as the fma chains need them (memra__lds4_volatile). Words 4w .. 4w + 3 of the thread's
 * run are its elements e = 4w + u, i.e. lane m = e % 8 at step r = e / 8: each lane's chain still
 * runs over r = 0..3 in order from 0.0f, the same operations as memra__column_dot.
 */
template <int NC>
static __device__ __forceinline__ void
memra__dot_streamed(const float (&s)[NC][32], const float *row, unsigned j, float (&out)[NC])
{
    float p[NC][8];
#pragma unroll
    for (int n = 0; n < NC; n++)
#pragma unroll
        for (int m = 0; m < 8; m++)
            p[n][m] = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; w++) {
        float x[4];
        memra__lds4_volatile(x, row + SCAN_KRUN * j + 4 * w);
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int n = 0; n < NC; n++)
                p[n][(4 * w + u) % 8] = __fmaf_rn(s[n][4 * w + u], x[u], p[n][(4 * w + u) % 8]);
    }
#pragma unroll
    for (int n = 0; n < NC; n++)
        out[n] = memra__reduce8(p[n]);
}

/*
 * One row of this thread's NC columns (docs/arithmetic.md, "Scan"): kv, delta, the state update
 * and at, with the row's k and q staged at sk and sq, v[n] the row's v of column n, gd =
 * expf(g_log) and bt = beta. The operations are written with explicit rounding intrinsics in
 * exactly the form nvcc -O3 gives the contract's expressions (v - gd * kv is one fma, then a
 * multiply by beta; gd * s + k * delta is a multiply, then an fma), so that no instantiation can
 * be compiled differently from another. RELOAD: the update reads k again (memra__update_streamed).
 */
template <int NC, bool RELOAD = false>
static __device__ __forceinline__ void
memra__scan_row(float (&s)[NC][32], const float *sk, const float *sq, const float (&v)[NC],
                float gd, float bt, unsigned j, float (&at)[NC], float (&delta)[NC])
{
    float kv[NC];
    memra__dot_streamed<NC>(s, sk, j, kv);
#pragma unroll
    for (int n = 0; n < NC; n++)
        delta[n] = __fmul_rn(__fmaf_rn(-gd, kv[n], v[n]), bt);
    memra__update_streamed<NC, RELOAD>(s, sk, j, delta, gd);
    memra__dot_streamed<NC>(s, sq, j, at);
}

/*
 * The same row with the next row's kv computed beside this row's at (both read the state after
 * this row's update): `kv` holds this row's kv on entry and the next row's on return. The row's
 * k arrives in registers (kk) and the next row's is loaded from sk_next into kn, so that the
 * caller hands it to the next row instead of that row reading it again: a row reads two staged
 * rows (q, the next k) where it read three, a third less of the shared-memory traffic the
 * narrow scan's rows are bound by (NOTES.md). The same operations on the same values as
 * memra__scan_row; only one reduction per row is then on the recurrence's critical path instead
 * of two.
 */
template <int NC>
static __device__ __forceinline__ void
memra__scan_row_pipe(float (&s)[NC][32], const float (&kk)[32], const float *sq,
                     const float *sk_next, const float (&v)[NC], float gd, float bt, unsigned j,
                     float (&kv)[NC], float (&at)[NC], float (&delta)[NC], float (&kn)[32])
{
#pragma unroll
    for (int n = 0; n < NC; n++) {
        delta[n] = __fmul_rn(__fmaf_rn(-gd, kv[n], v[n]), bt);
#pragma unroll
        for (int e = 0; e < 32; e++)
            s[n][e] = __fmaf_rn(gd, s[n][e], __fmul_rn(kk[e], delta[n]));
    }
    float qq[32];
    load_kq(qq, sq, j);
    load_kq(kn, sk_next, j);
#pragma unroll
    for (int n = 0; n < NC; n++) {
        float pa[8], pk[8];
#pragma unroll
        for (int m = 0; m < 8; m++) {
            pa[m] = 0.0f;
            pk[m] = 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++) {
                pa[m] = __fmaf_rn(s[n][8 * r + m], qq[8 * r + m], pa[m]);
                pk[m] = __fmaf_rn(s[n][8 * r + m], kn[8 * r + m], pk[m]);
            }
        }
        at[n] = memra__reduce8(pa);
        kv[n] = memra__reduce8(pk);
    }
}

/* One journal row folded into this thread's columns: the update of memra__scan_row with the
 * recorded delta, the same two roundings. */
template <int NC>
static __device__ __forceinline__ void
memra__fold_row(float (&s)[NC][32], const float *sk, const float (&delta)[NC], float gd, unsigned j)
{
    memra__update_streamed<NC>(s, sk, j, delta, gd);
}

/* The block's state columns from global memory (column c of the block at src + c * S) into the
 * tile, asynchronously; memra__cp_wait_all and a barrier make them visible. With 16-byte copies,
 * lane l of warp w copies words 4l .. 4l + 3 of columns w, w + WARPS, ...: a column (S = 128
 * words) is one warp's 512 contiguous bytes, and each copy is at a constant offset from the
 * first. */
template <class C>
static __device__ __forceinline__ void tile_load(float *tile, const float *src, bool vec)
{
    static_assert(MEMRA__S == 4 * MEMRA__LANES && C::COLS % C::WARPS == 0,
                  "a warp copies whole columns, each warp as many");
    if (vec) {
        const unsigned lane = threadIdx.x % MEMRA__LANES, w = threadIdx.x / MEMRA__LANES;
        float *d = tile + w * SCAN_SST + 4 * lane;
        const float *s = src + (size_t)w * MEMRA__S + 4 * lane;
#pragma unroll
        for (int c = 0; c < C::COLS / C::WARPS; c++)
            memra__cp16(d + c * C::WARPS * SCAN_SST, s + (size_t)c * C::WARPS * MEMRA__S);
    } else {
        for (int i = (int)threadIdx.x; i < C::COLS * MEMRA__S; i += C::NT) {
            const int c = i / MEMRA__S, r = i % MEMRA__S;
            memra__cp4(tile + c * SCAN_SST + r, src + (size_t)c * MEMRA__S + r);
        }
    }
}

/* This thread's words of the tile into registers, and back. */
template <class C>
static __device__ __forceinline__ void tile_to_regs(float (&s)[C::NC][32], const float *tile,
                                                    unsigned grp, unsigned j)
{
#pragma unroll
    for (int n = 0; n < C::NC; n++)
#pragma unroll
        for (int e = 0; e < 32; e++)
            s[n][e] = tile[(n * C::G + grp) * SCAN_SST + 32 * (e / 8) + 4 * (e % 8) + j];
}

/*
 * The state in registers to global memory (column c of the block at dst + c * S): each thread
 * writes its own tile words, then each warp writes the columns its threads hold (8 groups x NC
 * column sets) with one coalesced 16-byte store per lane and column. Only warp barriers are
 * needed: a warp reads only the tile words its own threads wrote. The 16-byte stores carry the
 * evict-first hint (st.global.cs): no block of the launch reads a state it wrote, so those lines
 * are the first that L2 may give up, before the states the next wave's blocks were asked into L2
 * for (take_tile) and the rows the blocks stage. The same values at the same addresses; only
 * their L2 policy differs.
 */
template <class C>
static __device__ __forceinline__ void
regs_store(float *dst, float *tile, const float (&s)[C::NC][32], unsigned grp, unsigned j, bool vec)
{
#pragma unroll
    for (int n = 0; n < C::NC; n++)
#pragma unroll
        for (int e = 0; e < 32; e++)
            tile[(n * C::G + grp) * SCAN_SST + 32 * (e / 8) + 4 * (e % 8) + j] = s[n][e];
    __syncwarp();
    const unsigned lane = threadIdx.x % MEMRA__LANES, warp = threadIdx.x / MEMRA__LANES;
#pragma unroll
    for (int n = 0; n < C::NC; n++)
#pragma unroll
        for (int g = 0; g < 8; g++) {
            const int c = n * C::G + 8 * warp + g;
            const float4 x = *(const float4 *)(tile + c * SCAN_SST + 4 * lane);
            float *p = dst + (size_t)c * MEMRA__S + 4 * lane;
            if (vec) {
                __stcs((float4 *)p, x);
            } else {
                p[0] = x.x;
                p[1] = x.y;
                p[2] = x.z;
                p[3] = x.w;
            }
        }
    __syncwarp();
}

/*
 * Everything the verify's scan reads (gdn_verify.cu fills it from memra__verify_args and the
 * workspace). Row r of sequence b, head h: q and k at
 * ((b * t + r) * qk_heads + qk_head(h)) * S, v at ((b * t + r) * num_v + h) * S, g_log and beta
 * at (b * t + r) * num_v + h, o like v.
 */
typedef struct memra__scan_job {
    const uint64_t *in_table, *out_table;
    size_t in_stride, out_stride;
    const float *q, *k, *v, *g_log, *beta;
    float *o;
    size_t num_v, num_k, qk_heads, t;
    float scale;
    int grouped;
    /* Journal scans only: the prologue's verdict on each sequence's journal (table entry 2), 4
     * words per sequence: the rows to fold, their slot (or SCAN_REFUSED), the capacity the
     * header records, and a count of the sequence's blocks that have passed their wait, which
     * the prologue zeroes. A scan that folds before its wait checks the journal itself instead,
     * against the accepted counts and the declared capacity (memra__journal_at, as the prologue:
     * the same verdict). */
    const uint32_t *accepted;
    size_t cap;
    uint32_t *seq_info;
    size_t conv_dim;
    uint32_t d_conv;
    /* How many blocks of the grid are resident at once (0: unknown); see take_tile. */
    size_t resident;
} memra__scan_job;

/* What a scan launch writes besides o: the final state (FINAL), or, after folding a journal,
 * the folded state and the new rows' journal entries (JOURNAL). Each is its own instantiation,
 * so that the row loop of one carries no code of another. (A SNAPSHOTS verify runs the 1.0
 * packed scan: gdn_verify.cu.) */
enum { SCAN_FINAL, SCAN_JOURNAL };

/* The staging buffers of a block (gdn_scan.cuh's header: tile, then TC rows of k, q, v, gd,
 * beta). */
extern __shared__ __align__(16) float memra__scan_smem[];

/* Every pointer is derived from the shared array itself, so that the compiler knows them all to
 * be shared-memory addresses (32-bit, LDS/STS) rather than generic ones. */
template <class C> struct scan_smem {
    float *tile, *k, *q, *v, *gd, *bt;
    float *fk, *fd, *fg; /* the fold's (journal scans only) */
    __device__ __forceinline__ scan_smem()
        : tile(memra__scan_smem), k(memra__scan_smem + C::TILE),
          q(memra__scan_smem + C::TILE + C::TC * SCAN_KST),
          v(memra__scan_smem + C::TILE + 2 * C::TC * SCAN_KST),
          gd(memra__scan_smem + C::TILE + 2 * C::TC * SCAN_KST + C::TC * C::COLS),
          bt(memra__scan_smem + C::TILE + 2 * C::TC * SCAN_KST + C::TC * C::COLS + C::TC),
          fk(memra__scan_smem + C::FLOATS), fd(memra__scan_smem + C::FLOATS + C::TC * SCAN_KST),
          fg(memra__scan_smem + C::FLOATS + C::TC * SCAN_KST + C::TC * C::COLS)
    {
    }
};

/*
 * The block's tile into its registers, once its copies have arrived, and the state columns of
 * block blockIdx.x + a.resident asked into L2 (one prefetch per 128-byte line). Blocks start in
 * about the order of their index, so that block is the one likely to take this block's place
 * when a block of the current wave ends: its state then comes from L2 while this block computes,
 * instead of from DRAM after it. The blocks of a wave otherwise load together and compute
 * together, and the DRAM is idle while they compute (ornith FINAL_ONLY verify at B = 32, T = 8:
 * 80.6 us against 83.1, H200). The addresses are those that block reads anyway, from the same
 * table in the same kernel; a prefetch changes no value.
 */
template <class C>
static __device__ __forceinline__ void take_tile(float (&s)[C::NC][32], const scan_smem<C> &sm,
                                                 const memra__scan_job &a, unsigned grp, unsigned j)
{
    const size_t nb = blockIdx.x + a.resident;
    if (a.resident != 0 && nb < gridDim.x) {
        const size_t cb = nb % C::BPH, bh = nb / C::BPH;
        const size_t h = bh % a.num_v, b = bh / a.num_v;
        const char *src =
            (const char *)(uintptr_t)a.in_table[b * a.in_stride] +
            (h * (size_t)MEMRA__S * MEMRA__S + cb * C::COLS * MEMRA__S) * sizeof(float);
        constexpr int LINES = C::COLS * MEMRA__S * (int)sizeof(float) / 128;
        static_assert(LINES % C::NT == 0, "each thread prefetches as many lines");
#pragma unroll
        for (int i = 0; i < LINES / C::NT; i++)
            asm volatile(
                "prefetch.global.L2 [%0];" ::"l"(src + 128 * (threadIdx.x + (size_t)i * C::NT)));
    }
    tile_to_regs<C>(s, sm.tile, grp, j);
}

/* Which rows of which inputs a block reads: row r of sequence b, head h (q and k of key or value
 * head qkh), columns c0 .. c0 + COLS - 1. */
struct scan_pos {
    size_t b, h, qkh, c0, off;
};

/* Stages new rows r0 .. r0 + nr - 1 (their k, q, v, gd and beta; only k and q when KQ_ONLY, the
 * block having computed the rest itself) and, when WAIT, waits for them (and for every copy
 * issued before, the state tile among them). */
template <class C, bool WAIT = true, bool KQ_ONLY = false>
static __device__ __forceinline__ void stage_rows(const memra__scan_job &a, const scan_pos &p,
                                                  const scan_smem<C> &sm, size_t r0, int nr)
{
    static_assert(C::TC % C::WARPS == 0, "each warp stages as many rows");
    const size_t t = a.t, num_v = a.num_v;
    const bool vvec = ((uintptr_t)a.v & 15u) == 0;
    /* Warp w stages rows w, w + WARPS, ... of the chunk. */
    const unsigned lane = threadIdx.x % MEMRA__LANES, w = threadIdx.x / MEMRA__LANES;
    const size_t row = p.b * t + r0 + w;
    const size_t kr = (row * a.qk_heads + p.qkh) * MEMRA__S,
                 kstep = C::WARPS * a.qk_heads * MEMRA__S;
    const float *const vr = a.v + (row * num_v + p.h) * MEMRA__S + p.c0;
    const size_t vstep = C::WARPS * num_v * MEMRA__S;
#pragma unroll
    for (int i = 0; i < C::TC / C::WARPS; i++) {
        const int rr = (int)w + i * C::WARPS;
        if (rr < nr) {
            stage_kq_warp(sm.k + rr * SCAN_KST, a.k + kr + i * kstep, lane, true);
            stage_kq_warp(sm.q + rr * SCAN_KST, a.q + kr + i * kstep, lane, true);
            if (!KQ_ONLY)
                stage_cols_warp<C::COLS>(sm.v + rr * C::COLS, vr + i * vstep, lane, vvec);
        }
    }
    if (!KQ_ONLY && (int)threadIdx.x < nr) {
        const size_t hr = (p.b * t + r0 + threadIdx.x) * num_v + p.h;
        sm.gd[threadIdx.x] = expf(a.g_log[hr]);
        sm.bt[threadIdx.x] = a.beta[hr];
    }
    if (WAIT) {
        memra__cp_wait_all();
        __syncthreads();
    }
}

/* Journal rows r0 .. r0 + nr - 1 of slot `half` (their k, this block's deltas and the head's gd)
 * into the fold's staging, without waiting. */
template <class C>
static __device__ __forceinline__ void stage_fold(const memra__scan_job &a, const scan_pos &p,
                                                  const scan_smem<C> &sm, const float *jr,
                                                  uint32_t half, uint32_t r0, int nr)
{
    const size_t jrow = MEMRA__JOURNAL_ROW(a.conv_dim, a.num_v, a.num_k);
    const size_t jk = MEMRA__JOURNAL_K(a.conv_dim), jd = MEMRA__JOURNAL_DELTA(a.conv_dim, a.num_k),
                 jg = MEMRA__JOURNAL_GD(a.conv_dim, a.num_v, a.num_k);
    const bool jvec = ((uintptr_t)jr & 15u) == 0;
    /* Warp w stages journal rows r0 + w, r0 + w + WARPS, ...; lane 0 copies their gd. */
    const unsigned lane = threadIdx.x % MEMRA__LANES, w = threadIdx.x / MEMRA__LANES;
    const float *const src = jr + MEMRA__JOURNAL_HEADER + (2 * (size_t)(r0 + w) + half) * jrow;
    const size_t step = 2 * C::WARPS * jrow;
#pragma unroll
    for (int i = 0; i < C::TC / C::WARPS; i++) {
        const int rr = (int)w + i * C::WARPS;
        if (rr < nr) {
            const float *sr = src + i * step;
            stage_kq_warp(sm.fk + rr * SCAN_KST, sr + jk + p.qkh * MEMRA__S, lane, jvec);
            stage_cols_warp<C::COLS>(sm.fd + rr * C::COLS, sr + jd + p.h * MEMRA__S + p.c0, lane,
                                     jvec);
            if (lane == 0)
                memra__cp4(sm.fg + rr, sr + jg + p.h);
        }
    }
}

/* The fold of a journal's n accepted rows into this thread's state words, TC journal rows at a
 * time: each `s = fma(gd, s, k * delta)` with the k, delta and gd the verify that wrote the row
 * recorded. The first chunk is staged and waited for by the caller. */
template <class C>
static __device__ __forceinline__ void fold_journal(const memra__scan_job &a, const scan_pos &p,
                                                    const scan_smem<C> &sm, float (&s)[C::NC][32],
                                                    const float *jr, uint32_t half, uint32_t n,
                                                    unsigned grp, unsigned j)
{
    for (uint32_t r0 = 0; r0 < n; r0 += C::TC) {
        const int nr = (int)(n - r0 < (uint32_t)C::TC ? n - r0 : (uint32_t)C::TC);
        if (r0 > 0) {
            __syncthreads(); /* the previous chunk's staging has been read */
            stage_fold<C>(a, p, sm, jr, half, r0, nr);
            memra__cp_wait_all();
            __syncthreads();
        }
#pragma unroll 1
        for (int rr = 0; rr < nr; rr++) {
            float d[C::NC];
#pragma unroll
            for (int nn = 0; nn < C::NC; nn++)
                d[nn] = sm.fd[rr * C::COLS + nn * C::G + grp];
            memra__fold_row<C::NC>(s, sm.fk + rr * SCAN_KST, d, sm.fg[rr], j);
        }
    }
}

/* The journal's new header: this verify's t rows, in the slot the old header did not name. */
static __device__ __forceinline__ void journal_header_write(const memra__scan_job &a, float *jr,
                                                            uint32_t half, uint32_t cap)
{
    memra__journal_header_put((uint32_t *)jr, a.num_k, a.num_v, a.d_conv, a.grouped, cap,
                              (uint32_t)a.t, half);
}

/*
 * The scan of one block: (sequence b, head h, columns c0 .. c0 + COLS - 1), inputs from the
 * prologue's workspace. The state is read before griddepcontrol.wait, and a journal is checked
 * and folded there too: the prologue, which runs before, never writes a state, a journal's
 * header or its accepted slot, and it lets this kernel launch only after its own wait, so every
 * earlier writer of them has completed. The dependents may launch after the row loop. OUT is
 * what the block writes besides o (above).
 */
/* The inputs a scan block computes itself (VIN below): none, in every launch but one. */
struct scan_no_inputs {
    static constexpr bool on = false;
    template <class C> __device__ void load(const scan_pos &, const scan_smem<C> &) {}
    __device__ void close() {}
};

template <class C, int OUT, bool PIPE, bool FOLD_FIRST, class VIN = scan_no_inputs>
static __device__ __forceinline__ void memra__scan_block(const memra__scan_job &a, VIN vin = VIN())
{
    const scan_smem<C> sm;

    const unsigned tid = threadIdx.x, j = tid % 4, grp = tid / 4;
    const size_t cb = blockIdx.x % C::BPH, bh = blockIdx.x / C::BPH;
    const size_t t = a.t, num_v = a.num_v;
    const size_t head_words = (size_t)MEMRA__S * MEMRA__S;
    scan_pos p;
    p.h = bh % num_v;
    p.b = bh / num_v;
    p.c0 = cb * C::COLS;
    p.qkh = a.grouped ? p.h / (num_v / a.num_k) : p.h % a.num_k;
    p.off = p.h * head_words + p.c0 * MEMRA__S;
    const size_t b = p.b;

    /* Table entries are read when the kernel executes: a replayed graph follows the table. The
     * state pointers may alias each other (in place); a block reads all its columns before it
     * writes any, and no block touches another's. */
    const float *const sin = (const float *)(uintptr_t)a.in_table[b * a.in_stride] + p.off;
    float *const sout = (float *)(uintptr_t)a.out_table[b * a.out_stride] + p.off;
    const bool svec = (((uintptr_t)sin | (uintptr_t)sout) & 15u) == 0;
    tile_load<C>(sm.tile, sin, svec);
    /* VIN::on: the block's v rows and gates, computed here beside the state's transfer from
     * inputs the prologue does not write (the block stages only k and q from the workspace). */
    if constexpr (VIN::on)
        vin.template load<C>(p, sm);

    float s[C::NC][32];

    /* JOURNAL: n accepted rows to fold from slot `half`, the new rows go to slot 1 - half. */
    float *jr = nullptr;
    uint32_t half = 0, cap = 0, n = 0;
    if (OUT == SCAN_JOURNAL && FOLD_FIRST) {
        /* The fold reads only what earlier operations wrote (the journal's accepted slot, its
         * header, the counts), all complete before this kernel launched, and the prologue
         * writes none of it: so this block checks the journal and folds it before its wait,
         * while the prologue runs. The verdict is the prologue's (same function, same words);
         * the prologue records a refusal. */
        const memra__journal_verdict v =
            memra__journal_at(a.in_table[b * a.in_stride + 1], &jr, a.accepted[b], a.num_k, num_v,
                              a.d_conv, a.grouped, a.cap, t);
        if (v.what != 0) {
            memra__pdl_wait();
            memra__cp_wait_all();
            return;
        }
        n = v.n;
        half = v.half;
        cap = v.cap;
        /* The fold's first chunk is staged beside the state tile, so that one wait covers both. */
        if (n > 0)
            stage_fold<C>(a, p, sm, jr, half, 0, n < (uint32_t)C::TC ? (int)n : C::TC);
        memra__cp_wait_all();
        __syncthreads();
        take_tile<C>(s, sm, a, grp, j);
        if (n > 0) {
            fold_journal<C>(a, p, sm, s, jr, half, n, grp, j);
            regs_store<C>(sout, sm.tile, s, grp, j, svec);
        }
    }

    memra__pdl_wait();
    /* The journal's header is rewritten by one block of the sequence as soon as no block of
     * the verify can still read the old one; the next operation runs after this one has
     * completed. The prologue's blocks read it before they completed (the wait above), and
     * every block of this scan read it before the barrier that follows its fold's staging: each
     * thread's header words decided the branch it took before that barrier (a refused block
     * returned above, as every block of its sequence did, without counting), and a warp does
     * not pass a branch before the loads it depends on have returned. So each block counts
     * itself now, and the one whose count makes the sequence whole writes the header (the
     * prologue zeroed the count). Counted at the block's end, after a barrier, the atomic's
     * round trip was on the tail of every block; taken here but written at the block's end, the
     * count held across the rows cost the wide shape 40 bytes of spill at its bound of 128
     * registers and most of the gain at 8 sequences (NOTES.md). */
    if (OUT == SCAN_JOURNAL && FOLD_FIRST && tid == 0 &&
        atomicAdd(a.seq_info + 4 * b + 3, 1u) == (uint32_t)(num_v * C::BPH) - 1)
        journal_header_write(a, jr, half, cap);

    /* This thread's output column(s) of row 0; a row advances by num_v heads. */
    float *op = a.o + (b * t * num_v + p.h) * MEMRA__S + p.c0 + grp;
    const size_t row_step = num_v * MEMRA__S;
    const size_t jrow = MEMRA__JOURNAL_ROW(a.conv_dim, num_v, a.num_k);
    /* Where row 0's deltas of this thread's columns go (slot 1 - half); each row is 2 journal
     * rows further. The rows' gd are the prologue's to write. */
    float *jdelta = nullptr;
    if (OUT == SCAN_JOURNAL) {
        if (!FOLD_FIRST) {
            n = a.seq_info[4 * b];
            half = a.seq_info[4 * b + 1];
            cap = a.seq_info[4 * b + 2];
            if (half == SCAN_REFUSED) {
                memra__cp_wait_all();
                return;
            }
            jr = (float *)(uintptr_t)a.in_table[b * a.in_stride + 1];
            /* No block of this scan reads the header (the prologue passed its verdict) and the
             * prologue has completed: the sequence's first block writes it now. */
            if (p.h == 0 && cb == 0 && tid == 0)
                journal_header_write(a, jr, half, cap);
        }
        /* MEMRA__JOURNAL_DELTA(conv_dim, num_k + h) is head h's first delta: head 0's plus
         * h * S words. */
        jdelta = jr + MEMRA__JOURNAL_HEADER + (1 - half) * jrow +
                 MEMRA__JOURNAL_DELTA(a.conv_dim, a.num_k + p.h) + p.c0 + grp;
    }
    /* Unless folded already, the first chunk of the fold's journal rows and of the new rows are
     * staged together, so that one wait covers them and the state tile. */
    if (OUT == SCAN_JOURNAL && !FOLD_FIRST && n > 0)
        stage_fold<C>(a, p, sm, jr, half, 0, n < (uint32_t)C::TC ? (int)n : C::TC);
    const int nr0 = (int)(t < (size_t)C::TC ? t : (size_t)C::TC);
    stage_rows<C, false, VIN::on>(a, p, sm, 0, nr0);
    memra__cp_wait_all();
    __syncthreads();
    if constexpr (VIN::on)
        vin.close();
    if (!(OUT == SCAN_JOURNAL && FOLD_FIRST)) {
        take_tile<C>(s, sm, a, grp, j);
        if (OUT == SCAN_JOURNAL && n > 0) {
            fold_journal<C>(a, p, sm, s, jr, half, n, grp, j);
            regs_store<C>(sout, sm.tile, s, grp, j, svec);
        }
    }

    for (size_t r0 = 0; r0 < t; r0 += C::TC) {
        const int nr = (int)(t - r0 < (size_t)C::TC ? t - r0 : C::TC);
        if (r0 > 0) {
            __syncthreads(); /* the previous chunk's staging has been read */
            stage_rows<C>(a, p, sm, r0, nr);
        }

        /* Row rr's v of the thread's columns. */
        const auto row_v = [&](int rr, float(&vv)[C::NC]) {
#pragma unroll
            for (int nn = 0; nn < C::NC; nn++)
                vv[nn] = sm.v[rr * C::COLS + nn * C::G + grp];
        };
        /* Row rr's outputs: o, and a journal's deltas. */
        const auto row_out = [&](const float(&at)[C::NC], const float(&delta)[C::NC]) {
#pragma unroll
            for (int nn = 0; nn < C::NC; nn++)
                if (j == (unsigned)nn)
                    op[nn * C::G] = __fmul_rn(at[nn], a.scale);
            if (OUT == SCAN_JOURNAL) {
#pragma unroll
                for (int nn = 0; nn < C::NC; nn++)
                    if (j == (unsigned)nn)
                        jdelta[nn * C::G] = delta[nn];
                jdelta += 2 * jrow;
            }
            op += row_step;
        };
        if (PIPE) {
            /* Each row's k stays in registers from the row before (ka and kb in turn, two rows
             * an iteration, so that no copy between them is needed); the chunk's last row
             * computes a kv from its own k again, which the next chunk does not use. */
            float kv[C::NC], ka[32], kb[32];
            load_kq(ka, sm.k, j);
#pragma unroll
            for (int nn = 0; nn < C::NC; nn++)
                kv[nn] = memra__column_dot(s[nn], ka);
            const auto pipe_row = [&](int rr, const float(&kk)[32], float(&kn)[32]) {
                float vv[C::NC], at[C::NC], delta[C::NC];
                row_v(rr, vv);
                memra__scan_row_pipe<C::NC>(s, kk, sm.q + rr * SCAN_KST,
                                            sm.k + (rr + 1 < nr ? rr + 1 : rr) * SCAN_KST, vv,
                                            sm.gd[rr], sm.bt[rr], j, kv, at, delta, kn);
                row_out(at, delta);
            };
            int rr = 0;
#pragma unroll 1
            for (; rr + 1 < nr; rr += 2) {
                pipe_row(rr, ka, kb);
                pipe_row(rr + 1, kb, ka);
            }
            if (rr < nr)
                pipe_row(rr, ka, kb);
        } else {
#pragma unroll 1
            for (int rr = 0; rr < nr; rr++) {
                float vv[C::NC], at[C::NC], delta[C::NC];
                row_v(rr, vv);
                memra__scan_row<C::NC, OUT == SCAN_JOURNAL>(s, sm.k + rr * SCAN_KST,
                                                            sm.q + rr * SCAN_KST, vv, sm.gd[rr],
                                                            sm.bt[rr], j, at, delta);
                row_out(at, delta);
            }
        }
    }

    memra__pdl_trigger();
    if (OUT != SCAN_JOURNAL)
        regs_store<C>(sout, sm.tile, s, grp, j, svec);
}

#endif /* MEMRA_GDN_ROWLOOP_CUH */
