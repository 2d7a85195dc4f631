/*
 * CUDA kernel: the 1.2 state copies (kernels.h, memra__copy_args): `items` copies of `words`
 * floats, every address read from the table when the kernel runs, all copies in one launch.
 *
 * Thread mapping: block (x, y) serves copies y, y + gridDim.y, ... (the grid's y dimension is
 * limited to 65535, larger batches loop), and within a copy the blocks of one row split the
 * words: thread blockIdx.x * blockDim.x + threadIdx.x moves element j of the copy, then
 * j + gridDim.x * blockDim.x and so on. An element is a float4 when both addresses are 16-byte
 * aligned (the words past the last whole float4 then go to the first threads of block x == 0)
 * and a float otherwise. Consecutive threads move consecutive elements, so every load and store
 * is coalesced, and no two threads write the same word.
 *
 * Every thread of a copy reads the same two table entries and makes the same
 * memra__copy_check(), so the threads of a refused copy all return before touching memory
 * through its addresses, and one thread (block x == 0, thread 0) records the finding.
 */
#include <stdint.h>

#include "gdn_common.cuh"
#include "kernels.h"

#define COPY_THREADS 256
/* float4 elements per thread the grid is sized for: enough work per thread to hide the table
 * reads and the launch, few enough blocks for a 2 MiB state to cover a GPU many times over. */
#define COPY_PER_THREAD 4
#define COPY_MAX_GRID_X 1024u
#define COPY_MAX_GRID_Y 65535u

/*
 * Records a refused copy in the engine's record (mapped host memory, read after the next
 * synchronisation); the first finding of the engine wins. Which block records is settled on a
 * device word, as host-memory atomics are not available over every interconnect.
 */
static __device__ void note_refused(const memra__copy_args &a, size_t item, uint64_t bad,
                                    uint32_t what)
{
    if (a.err == nullptr || atomicCAS(a.err_claim, 0u, 1u) != 0u)
        return;
    volatile memra__dev_error *rec = a.err;
    rec->what = what;
    rec->limit = (uint32_t)(bad >> 32);
    rec->value = (uint32_t)bad;
    rec->seq = (uint32_t)item;
    rec->op = a.op;
    __threadfence_system();
    rec->set = 1u;
    __threadfence_system();
}

__global__ void __launch_bounds__(COPY_THREADS) state_copy_kernel(const memra__copy_args a)
{
    memra__pdl_enter();
    const uint64_t bytes = (uint64_t)a.words * sizeof(float);
    const uint64_t tab_lo = a.dst == nullptr ? (uint64_t)(uintptr_t)a.table : 0;
    const uint64_t tab_hi = a.dst == nullptr ? tab_lo + 2 * a.items * sizeof(uint64_t) : 0;
    const size_t first = (size_t)blockIdx.x * COPY_THREADS + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * COPY_THREADS;

    for (size_t i = blockIdx.y; i < a.items; i += gridDim.y) {
        const uint64_t src = a.table[i];
        const uint64_t dst = a.dst == nullptr ? a.table[a.items + i] : (uint64_t)(uintptr_t)a.dst;
        const uint32_t what = memra__copy_check(src, dst, bytes, tab_lo, tab_hi);
        if (what != 0) {
            if (blockIdx.x == 0 && threadIdx.x == 0)
                note_refused(a, i, (what & MEMRA__ERR_COPY_DST) ? dst : src, what);
            continue;
        }
        if (src == dst)
            continue;
        const float *s = (const float *)(uintptr_t)src;
        float *d = (float *)(uintptr_t)dst;
        if (((src | dst) & 15u) == 0) {
            const size_t vecs = a.words / 4;
            for (size_t j = first; j < vecs; j += stride)
                ((float4 *)d)[j] = ((const float4 *)s)[j];
            if (blockIdx.x == 0 && threadIdx.x < a.words % 4)
                d[vecs * 4 + threadIdx.x] = s[vecs * 4 + threadIdx.x];
        } else {
            for (size_t j = first; j < a.words; j += stride)
                d[j] = s[j];
        }
    }
}

extern "C" int memra__cuda_state_copy(const memra__copy_args *args, void *stream)
{
    /* Sized for the float4 path; the unaligned path loops over the same grid. */
    const size_t per_block = (size_t)COPY_THREADS * 4 * COPY_PER_THREAD;
    size_t gx = (args->words + per_block - 1) / per_block;
    gx = gx < 1 ? 1 : gx > COPY_MAX_GRID_X ? COPY_MAX_GRID_X : gx;
    const unsigned gy = args->items < COPY_MAX_GRID_Y ? (unsigned)args->items : COPY_MAX_GRID_Y;
    return memra__launch(state_copy_kernel, dim3((unsigned)gx, gy), dim3(COPY_THREADS), stream,
                         *args);
}
