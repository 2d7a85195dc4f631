/*
 * The kernel layer's interface: one argument struct per operation, shared by the CPU reference
 * kernels (kernels/cpu/<op>.c) and the CUDA kernels (kernels/cuda/<op>.cu).
 *
 * Every struct describes already-validated work (src/validate.c guarantees the shapes, lengths,
 * alignment and overlap rules), so kernels never check arguments. The per-row and the packed
 * forms of an operation are the same struct: a per-row call is a packed call with t == 1, which
 * is what makes the two bit-identical by construction.
 *
 * Pointer tables are read by the kernels themselves, when the work executes: a captured CUDA
 * graph or a recorded CPU graph re-reads them at every replay.
 *
 * This header is plain C and also compiles as C++ (nvcc includes it); it includes no CUDA
 * header. The CUDA entry points return a cudaError_t as int so that host C code can map it.
 */
#ifndef MEMRA_KERNELS_H
#define MEMRA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The only supported head dimension (SPEC: d_state = 128) and the warp width the arithmetic
 * contract's reductions are written for. */
#define MEMRA__S 128
#define MEMRA__LANES 32
#define MEMRA__D_CONV_MAX 8

/*
 * Causal depthwise conv + SiLU over t rows of b_n sequences.
 *   qkv      [b_n, t, conv_dim]
 *   rings    b_n ring addresses at rings[b * ring_stride] (1 for per-row conv_ptrs, 3 for a
 *            packed table whose entry 0 is the ring); each ring is [conv_dim, d_conv - 1] and
 *            is rolled in place through all t rows
 *   w        [conv_dim, d_conv]
 *   conv_out [b_n, t, conv_dim]
 *   snap     NULL, or [b_n, t - 1, conv_dim, d_conv - 1]: the ring after row r, r < t - 1
 */
typedef struct memra__conv_args {
    const float *qkv;
    const uint64_t *rings;
    size_t ring_stride;
    const float *w;
    float *conv_out;
    float *snap;
    size_t conv_dim;
    size_t d_conv;
    size_t t;
    size_t b_n;
} memra__conv_args;

/*
 * GDN prep over `rows` independent rows (b_n sequences x t rows, flattened).
 *   conv_out [rows, conv_dim] (q | k | v channels); beta_raw, alpha [rows, num_v];
 *   dt_bias, a [num_v]; q_l2, k_l2, v_g [rows, num_v, S]; beta, g_log [rows, num_v].
 *   key_dim == S * num_k, conv_dim == 2 * key_dim + S * num_v; value head vh reads key head
 *   vh % num_k.
 */
typedef struct memra__prep_args {
    const float *conv_out;
    const float *beta_raw;
    const float *alpha;
    const float *dt_bias;
    const float *a;
    float *q_l2;
    float *k_l2;
    float *v_g;
    float *beta;
    float *g_log;
    size_t num_v;
    size_t num_k;
    size_t key_dim;
    size_t conv_dim;
    size_t rows;
    float eps;
} memra__prep_args;

/*
 * GDN recurrent scan, t rows of b_n sequences, state kept across the rows.
 *   q, k, v  [b_n, t, num_v, S]; g_log, beta [b_n, t, num_v]; o [b_n, t, num_v, S]
 *   states   sequence b reads its state from (float *)in_table[b * in_stride] before row 0 and
 *            writes the state after row t - 1 to (float *)out_table[b * out_stride]; both are
 *            [num_v, S, S] transposed (head h, column c, row i at (h*S + c)*S + i) and may be
 *            the same buffer.
 *            Per-row op: in_ptrs / out_ptrs with stride 1 and t == 1.
 *            Packed op: table + 1 (canonical) in, table + (t odd ? 2 : 1) out, stride 3.
 *   snap     NULL, or [b_n, t - 1, num_v, S, S]: the state after row r, r < t - 1
 */
typedef struct memra__scan_args {
    const float *q;
    const float *k;
    const float *v;
    const float *g_log;
    const float *beta;
    const uint64_t *in_table;
    size_t in_stride;
    const uint64_t *out_table;
    size_t out_stride;
    float *o;
    float *snap;
    size_t num_v;
    size_t t;
    size_t b_n;
    float scale;
} memra__scan_args;

/* CPU reference kernels (kernels/cpu/): synchronous, cannot fail. */
void memra__cpu_ssm_conv1d(const memra__conv_args *args);
void memra__cpu_gdn_prep(const memra__prep_args *args);
void memra__cpu_gdn_scan(const memra__scan_args *args);

/* CUDA kernels (kernels/cuda/): enqueue on `stream` (a cudaStream_t) and return the
 * cudaError_t of the launch as an int (0 == cudaSuccess). */
int memra__cuda_ssm_conv1d(const memra__conv_args *args, void *stream);
int memra__cuda_gdn_prep(const memra__prep_args *args, void *stream);
int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* MEMRA_KERNELS_H */
