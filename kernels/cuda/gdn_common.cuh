/*
 * Device and launch helpers shared by the CUDA kernels (ssm_conv1d.cu, gdn_prep.cu,
 * gdn_scan.cu): the contract's 32-lane pairwise tree (docs/arithmetic.md) for a warp that holds one
 * vector, the programmatic-dependent-launch handshake, the one launch function every entry
 * point uses and the choice of a conv window's kernel instantiation.
 *
 * Build: nvcc -O3 with the default floating-point flags (FMA contraction on, IEEE division and
 * square root, no fast-math, no -ftz). Nothing here may change an arithmetic result; the
 * reduction below fixes the order of every addition the contract names.
 */
#ifndef MEMRA_GDN_COMMON_CUH
#define MEMRA_GDN_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include "kernels.h"

#define MEMRA__FULL_MASK 0xffffffffu

/* Rows of a 128-element vector that one lane owns: lane L holds i = r*32 + L, r = 0..3. */
#define MEMRA__PER_LANE (MEMRA__S / MEMRA__LANES)

/*
 * Pairwise tree over the 32 lanes with strides 16, 8, 4, 2, 1 where lane L adds lane L + stride;
 * the total is lane 0's value (the other lanes hold partial sums and must not use theirs). The
 * prep's sums of squares use it; the scan spreads the same tree over 8 threads (column_sum in
 * gdn_scan.cu).
 */
static __device__ __forceinline__ float memra__warp_sum_down(float x)
{
#pragma unroll
    for (int o = MEMRA__LANES / 2; o >= 1; o /= 2)
        x = x + __shfl_down_sync(MEMRA__FULL_MASK, x, o);
    return x;
}

/* griddepcontrol.wait and .launch_dependents, the two halves of memra__pdl_enter below; a kernel
 * that reads something its predecessor cannot write before it waits (the verify's scans) calls
 * them apart. */
static __device__ __forceinline__ void memra__pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void memra__pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/*
 * Programmatic dependent launch (Hopper and newer). Every kernel of this library is launched
 * with programmatic stream serialisation where the device supports it, so the next kernel on the
 * stream can be scheduled while this one still runs and the launch latency between the three
 * kernels of a verify step (and the 3 x T of a per-row chain) is hidden.
 *
 * The handshake keeps stream semantics exact: memra__pdl_enter() first lets the NEXT kernel
 * launch early (griddepcontrol.launch_dependents: it only becomes resident and then waits), then
 * waits until the PREVIOUS grid has completed and its memory is visible (griddepcontrol.wait).
 * No global memory is touched before the wait, so a kernel never reads what its predecessor
 * may still be writing, whoever launched that predecessor. Without the launch attribute, and on
 * architectures before sm_90 where the attribute is not set, the wait returns at once.
 */
static __device__ __forceinline__ void memra__pdl_enter(void)
{
    memra__pdl_trigger();
    memra__pdl_wait();
}

/* The compute capability major of the current device into *major; the CUDA error of the query. */
static cudaError_t memra__device_major(int *major)
{
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
    return err;
}

/* The number of multiprocessors of the current device; the CUDA error of the query. */
static cudaError_t memra__device_sms(int *sms)
{
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
    return err;
}

/*
 * Launches `kernel` on `stream` with `smem` bytes of dynamic shared memory and programmatic
 * stream serialisation on devices of compute capability 9.0 and newer (see memra__pdl_enter),
 * and as a plain stream-ordered launch elsewhere. Returns the launch's cudaError_t as an int.
 */
template <typename... Params, typename... Args>
static int memra__launch_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                              void *stream, Args... args)
{
    int major = 0;
    const cudaError_t err = memra__device_major(&major);
    if (err != cudaSuccess)
        return (int)err;

    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)stream;
    const bool pdl = major >= 9;
    cfg.attrs = pdl ? attr : NULL;
    cfg.numAttrs = pdl ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, kernel, ((Params)args)...);
}

/* The same without dynamic shared memory. */
template <typename... Params, typename... Args>
static int memra__launch(void (*kernel)(Params...), dim3 grid, dim3 block, void *stream,
                         Args... args)
{
    return memra__launch_smem(kernel, grid, block, 0, stream, args...);
}

/*
 * Sets kernel K's dynamic shared-memory limit to `smem` bytes (needed above 48 KiB) and its
 * preferred carveout to the largest shared-memory share, once per device: with every kernel of a
 * verify asking for the same carveout, a multiprocessor never has to drain to reconfigure
 * between them, and the blocks of a kernel launched early under programmatic dependent launch
 * fit beside those of the kernel before it. Attributes belong to a device's context, hence the
 * record per device ordinal (ordinals beyond the record are set at every launch).
 */
#define MEMRA__ATTR_DEVICES 64
template <auto K> static cudaError_t memra__kernel_attributes(size_t smem)
{
    static std::atomic<int> done[MEMRA__ATTR_DEVICES];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess)
        return err;
    if (device < MEMRA__ATTR_DEVICES && done[device].load(std::memory_order_acquire) != 0)
        return cudaSuccess;
    err = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(K, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   (int)cudaSharedmemCarveoutMaxShared);
    if (err == cudaSuccess && device < MEMRA__ATTR_DEVICES)
        done[device].store(1, std::memory_order_release);
    return err;
}

/*
 * How many blocks of kernel K (`threads` threads, `smem` bytes of dynamic shared memory; the
 * same for every launch of K) a multiprocessor holds at once, into *per_sm: the occupancy API's
 * answer, asked once per device and then kept, since the query costs host time on every
 * enqueue and its answer depends only on the kernel and the device.
 */
template <auto K>
static cudaError_t memra__kernel_blocks_per_sm(int threads, size_t smem, int *per_sm)
{
    static std::atomic<int> known[MEMRA__ATTR_DEVICES];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess)
        return err;
    if (device < MEMRA__ATTR_DEVICES) {
        const int k = known[device].load(std::memory_order_acquire);
        if (k > 0) {
            *per_sm = k;
            return cudaSuccess;
        }
    }
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, K, threads, smem);
    const bool keep = err == cudaSuccess && *per_sm > 0 && device < MEMRA__ATTR_DEVICES;
    if (keep)
        known[device].store(*per_sm, std::memory_order_release);
    return err;
}

/* How many blocks of kernel K (`threads` threads, `smem` bytes of dynamic shared memory) the
 * device's `sms` multiprocessors hold at once, i.e. one wave of its grid, into *wave (0 when the
 * occupancy query fails); the CUDA error of the query. */
template <auto K>
static cudaError_t memra__kernel_wave(int threads, size_t smem, int sms, size_t *wave)
{
    int per_sm = 0;
    const cudaError_t err = memra__kernel_blocks_per_sm<K>(threads, smem, &per_sm);
    *wave = (size_t)per_sm * (size_t)sms;
    return err;
}

/*
 * The kernels with a conv window are instantiated for every d_conv 1..MEMRA__D_CONV_MAX; this
 * calls launch(std::integral_constant<int, D>()) for D == d_conv, so that the host picks the
 * instantiation at run time. validate.c admits only 1..8, so the cudaErrorInvalidValue for any
 * other d_conv is unreachable; it is still reported, not ignored.
 */
template <int D = 1, typename Launch> static int memra__with_d_conv(size_t d_conv, Launch launch)
{
    if constexpr (D > MEMRA__D_CONV_MAX)
        return (int)cudaErrorInvalidValue;
    else if (d_conv == (size_t)D)
        return launch(std::integral_constant<int, D>());
    else
        return memra__with_d_conv<D + 1>(d_conv, launch);
}

#endif /* MEMRA_GDN_COMMON_CUH */
