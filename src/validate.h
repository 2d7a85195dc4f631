/*
 * The one validation layer both backends share (docs/bad-input.md): every exported entry point
 * validates here before anything is launched or written, so the CPU and the CUDA backend refuse
 * exactly the same inputs with exactly the same status and message.
 */
#ifndef MEMRA_VALIDATE_H
#define MEMRA_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "memra.h"

/* Checks that `engine` is the engine this call holds (MEMRA__ENTER, engine.h, refused every
 * handle that does not name a live engine) and that it carries no sticky device fault. */
MemraStatus memra__check_engine(const char *fn, const MemraEngine *engine);
/* The same without the fault check, for calls that must work on a faulted engine. */
MemraStatus memra__check_engine_handle(const char *fn, const MemraEngine *engine);
/* Maps the handle `graph` to a live graph made by `engine` (held by this call) in `*out`,
 * refusing a NULL, destroyed, foreign or forged handle without reading through it. */
MemraStatus memra__check_graph(const char *fn, const MemraEngine *engine, const MemraGraph *graph,
                               MemraGraph **out);
/* Checks an out-parameter pointer. */
MemraStatus memra__check_out(const char *fn, const char *name, const void *out);

/* Copies: `src` has `len` elements of `elem` bytes, `dst` holds `dst_len`. `host_overlap`
 * additionally refuses overlapping ranges (both sides in one address space: CPU backend). */
MemraStatus memra__validate_copy(const char *fn, const void *src, size_t len, const void *dst,
                                 size_t dst_len, size_t elem, bool host_overlap);

/* The host source of a copy into a new buffer. */
MemraStatus memra__validate_source(const char *fn, const void *src, size_t len, size_t elem);

/* The per-row conv (packed == false: `table` is conv_ptrs with one entry per sequence, t == 1,
 * no snapshots) and the packed conv (table [b_n, 3], t rows, optional snapshots). */
MemraStatus memra__validate_conv(const char *fn, bool packed, MemraSliceF32 qkv,
                                 MemraSliceU64 table, MemraSliceF32 w, MemraSliceMutF32 conv_out,
                                 MemraSliceMutF32 snap, size_t conv_dim, size_t d_conv, size_t t,
                                 size_t b_n, memra__conv_args *out);

/* The single-sequence conv step: the ring is the buffer `conv_state`, not a table entry. */
MemraStatus memra__validate_conv_direct(const char *fn, MemraSliceF32 qkv,
                                        MemraSliceMutF32 conv_state, MemraSliceF32 w,
                                        MemraSliceMutF32 conv_out, size_t conv_dim, size_t d_conv,
                                        memra__conv_args *out);

MemraStatus memra__validate_prep(const char *fn, MemraSliceF32 conv_out, MemraSliceF32 beta_raw,
                                 MemraSliceF32 alpha, MemraSliceF32 dt_bias, MemraSliceF32 a,
                                 MemraSliceMutF32 q_l2, MemraSliceMutF32 k_l2, MemraSliceMutF32 v_g,
                                 MemraSliceMutF32 beta, MemraSliceMutF32 g_log, size_t d_state,
                                 size_t num_v, size_t num_k, size_t key_dim, float eps,
                                 size_t conv_dim, size_t b_n, memra__prep_args *out);

/* The per-row scan (packed == false: `in_tab` / `out_tab` are in_ptrs / out_ptrs with one entry
 * per sequence, t == 1, no snapshots) and the packed scan (`in_tab` is the [b_n, 3] table,
 * `out_tab` unused; the table entries in *out are left NULL for the entry point to choose). */
MemraStatus memra__validate_scan(const char *fn, bool packed, MemraSliceF32 q, MemraSliceF32 k,
                                 MemraSliceF32 v, MemraSliceF32 g_log, MemraSliceF32 beta,
                                 MemraSliceU64 in_tab, MemraSliceU64 out_tab, MemraSliceMutF32 o,
                                 MemraSliceMutF32 snap, size_t num_v, size_t t, size_t b_n,
                                 float scale, memra__scan_args *out);

/* The single-sequence scan over t rows: the states are the buffers `state_in` (read) and
 * `state_out` (written), which may be the same buffer (in place). */
MemraStatus memra__validate_scan_direct(const char *fn, MemraSliceF32 q, MemraSliceF32 k,
                                        MemraSliceF32 v, MemraSliceF32 g_log, MemraSliceF32 beta,
                                        MemraSliceF32 state_in, MemraSliceMutF32 state_out,
                                        MemraSliceMutF32 o, size_t num_v, size_t t, float scale,
                                        memra__scan_args *out);

/* The 1.1 verify (commit == false) and journal commit (commit == true: mode JOURNAL, no new
 * rows, so t, scale, the row inputs and every output are not read). Fills everything of *out
 * but the backend's pointers (err, err_claim, and the workspace when the host passed none). */
MemraStatus memra__validate_verify(const char *fn, bool commit, const MemraVerifyArgs *args,
                                   memra__verify_args *out);

/* The 1.1 rollback after a SNAPSHOTS verify; fills everything of *out but err. */
MemraStatus memra__validate_rollback(const char *fn, const MemraVerifyArgs *args,
                                     memra__rollback_args *out);

/* memra_gdn_verify_workspace_len's arguments, and the length itself. */
MemraStatus memra__validate_workspace_len(const char *fn, const MemraVerifyArgs *args, bool commit,
                                          size_t *out_len);
/* memra_gdn_journal_len's arguments, and the length itself. */
MemraStatus memra__validate_journal_len(const char *fn, size_t d_state, size_t num_k, size_t num_v,
                                        size_t t_max, size_t *out_len);

/* The 1.2 batched uniform copy: `table` holds n source then n destination addresses, each copy
 * `words` floats. What only the device can see (the addresses) is checked by the kernels. */
MemraStatus memra__validate_copy_batch(const char *fn, MemraSliceU64 table, size_t n, size_t words,
                                       memra__copy_args *out);

/* The 1.2 copy of n floats from the address in src_ptr[0] into dst[dst_off .. dst_off + n]. */
MemraStatus memra__validate_copy_indirect(const char *fn, MemraSliceU64 src_ptr,
                                          MemraSliceMutF32 dst, size_t dst_off, size_t n,
                                          memra__copy_args *out);

#endif /* MEMRA_VALIDATE_H */
