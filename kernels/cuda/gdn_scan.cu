/*
 * CUDA kernel: the GDN recurrent scan of the 1.0 operations, head dim 128, t rows of b_n
 * sequences with the state kept in registers across the rows (docs/arithmetic.md, "Scan"). One
 * kernel serves the per-row op (t == 1, in/out tables with stride 1, in == out allowed), the
 * packed op (t rows, stride-3 table, optional snapshots) and the single-sequence op (state
 * buffers instead of tables). Its body is gdn_scan.cuh's memra__scan_block, the row loop every
 * scan and verify of the library runs, so per-row chains, packed calls and the verify are
 * bit-identical by construction; gdn_scan.cuh describes the thread mapping and the staging.
 *
 * Memory. The kernel reads each state once and writes t - 1 snapshots plus the final state: the
 * (t + 1) x state-size floor of the packed verify. q and k are read in the prep's layout and
 * transposed on their way into shared memory; v, g_log and beta as they are. Views and table
 * entries need only be 4-byte aligned (validate.c): the block checks the alignment of what it
 * reads and writes and uses 16-byte accesses where it can, the same words either way.
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "gdn_scan.cuh"
#include "kernels.h"

/* Two block shapes, chosen per launch (launch_scan): 64 columns per block, two per thread, for
 * batches that fill the device; 16 columns, one per thread, when a batch has fewer blocks of 64
 * columns than the device has multiprocessors, so that more of them work. */
typedef scan_cfg<2, 64, 8> scan_wide8;
typedef scan_cfg<2, 64, 16> scan_wide16;
typedef scan_cfg<1, 16, 8> scan_narrow8;
typedef scan_cfg<1, 16, 16> scan_narrow16;

template <class C, int OUT, bool PIPE, int MINB>
__global__ void __launch_bounds__(C::NT, MINB) gdn_scan_kernel(const memra__scan_job a)
{
    memra__scan_block<C, false, OUT, PIPE>(a);
}

template <class C, int OUT, bool PIPE, int MINB>
static int launch_out_x(const memra__scan_job &job, size_t b_n, void *stream)
{
    const cudaError_t err = memra__kernel_attributes<gdn_scan_kernel<C, OUT, PIPE, MINB>>(C::SMEM);
    if (err != cudaSuccess)
        return (int)err;
    const dim3 grid((unsigned)(b_n * job.num_v * C::BPH));
    return memra__launch_smem(gdn_scan_kernel<C, OUT, PIPE, MINB>, grid, dim3(C::NT), C::SMEM,
                              stream, job);
}

/* The shapes' instantiations: at most 128 registers (4 blocks of 128 threads per multiprocessor:
 * without the bound ptxas takes 168 and 3 fit, and the ornith FINAL_ONLY scan at B = 32, T = 8
 * took 79.6 us instead of 68.7 on an H200), and the narrow shape, whose launches are too few to
 * fill the device and so latency-bound, with the next row's kv beside this row's at. */
template <class C, int OUT>
static int launch_out(const memra__scan_job &job, size_t b_n, void *stream)
{
    return launch_out_x<C, OUT, C::NC == 1, 512 / C::NT>(job, b_n, stream);
}

/* Packed calls with snapshots write one after every row but the last. */
template <class C> static int launch_shape(const memra__scan_job &job, size_t b_n, void *stream)
{
    return job.snap != nullptr && job.t >= 2 ? launch_out<C, SCAN_SNAP>(job, b_n, stream)
                                             : launch_out<C, SCAN_FINAL>(job, b_n, stream);
}

/* Grid: one block per (sequence, head, group of COLS columns), flattened into x as
 * ((b * num_v + h) * BPH + group); far below the 2^31 - 1 limit for any batch that fits in
 * device memory. */
static int launch_scan(const memra__scan_args *a, void *stream)
{
    memra__scan_job job = {};
    job.in_table = a->in_table;
    job.out_table = a->out_table;
    job.in_stride = a->in_stride;
    job.out_stride = a->out_stride;
    job.state_in = a->state_in;
    job.state_out = a->state_out;
    job.q = a->q;
    job.k = a->k;
    job.v = a->v;
    job.g_log = a->g_log;
    job.beta = a->beta;
    job.o = a->o;
    job.snap = a->snap;
    job.num_v = a->num_v;
    job.num_k = a->num_v;
    job.qk_heads = a->num_v;
    job.t = a->t;
    job.scale = a->scale;

    int sms = 0;
    const cudaError_t err = memra__device_sms(&sms);
    if (err != cudaSuccess)
        return (int)err;
    const bool narrow = a->b_n * a->num_v * scan_wide8::BPH < (size_t)sms;
    if (a->t <= 8)
        return narrow ? launch_shape<scan_narrow8>(job, a->b_n, stream)
                      : launch_shape<scan_wide8>(job, a->b_n, stream);
    return narrow ? launch_shape<scan_narrow16>(job, a->b_n, stream)
                  : launch_shape<scan_wide16>(job, a->b_n, stream);
}

extern "C" int memra__cuda_gdn_scan(const memra__scan_args *args, void *stream)
{
    return launch_scan(args, stream);
}
