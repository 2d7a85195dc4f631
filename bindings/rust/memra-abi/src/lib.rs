//! Declarations-only mirror of the libmemra 1.x C ABI.
//!
//! This crate is never linked into `libmemra.so` and never called: it exists so that Debian's
//! cbindgen 0.24, driven by `abi/cbindgen.toml`, regenerates `abi/memra.h` byte-for-byte from
//! it. `make test` runs that regeneration and fails on any difference, which proves the header
//! keeps the exact style cbindgen emits. The doc comments below ARE the header's documentation:
//! edit them here, regenerate with `make header`, and commit both files together.
//!
//! The function bodies only satisfy the compiler; the C library in `src/` is the implementation.

#![allow(unused_variables)]
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_void};

/// Major version: changes only when the ABI breaks (a removed or changed symbol or field).
pub const MEMRA_VERSION_MAJOR: u32 = 1;

/// Minor version: grows when symbols or appended struct fields are added.
pub const MEMRA_VERSION_MINOR: u32 = 2;

/// Patch version: fixes that change no declaration.
pub const MEMRA_VERSION_PATCH: u32 = 0;

/// The ABI version this header describes: `(major << 16) | minor`. Compare it with
/// `memra_abi_version()` at load time: the library is usable when the majors are equal and the
/// library's minor is at least the header's.
pub const MEMRA_ABI_VERSION: u32 = (MEMRA_VERSION_MAJOR << 16) | MEMRA_VERSION_MINOR;

/// The only supported head dimension `d_state` (S in the shapes below).
pub const MEMRA_D_STATE: u32 = 128;

/// The largest supported convolution width `d_conv` (the smallest is 1).
pub const MEMRA_D_CONV_MAX: u32 = 8;

/// Entries per sequence in a packed-op pointer table: `[conv ring, canonical state, alternate
/// state]`.
pub const MEMRA_TABLE_WIDTH: u32 = 3;

/// `MemraEngineOptions::flags` bit: do not let the `MEMRA_BACKEND` environment variable
/// override `MEMRA_BACKEND_AUTO`.
pub const MEMRA_ENGINE_FLAG_IGNORE_ENV: u64 = 1;

/// Status codes. Every fallible call returns one; the values are fixed forever and new codes are
/// only ever appended. `memra_status_string()` names a code; `memra_last_error_message()` says
/// what went wrong in the calling thread's last failed call.
#[repr(u32)]
pub enum MemraStatus {
    /// Success.
    Ok = 0,
    /// A NULL handle or pointer, a shape that does not add up, a view shorter than its shape, a
    /// misaligned address, an output overlapping an input, a non-finite scalar, a destroyed,
    /// forged or wrong-kind handle, a handle used with the wrong engine, or an engine that
    /// another thread is inside a call on ("engine in use by another thread"). Nothing was
    /// launched or written.
    InvalidArgument = 1,
    /// The arguments are consistent but this library does not implement them (for example
    /// `d_state != 128`). Nothing was launched or written.
    Unsupported = 2,
    /// Host or device memory could not be allocated. Nothing was written.
    OutOfMemory = 3,
    /// The CUDA backend was asked for (explicitly or through `MEMRA_BACKEND=cuda`) but no usable
    /// device exists at that ordinal, or the library was built without CUDA.
    NoDevice = 4,
    /// The CUDA runtime reported an error; the message carries the CUDA error name. A kernel
    /// fault is sticky: every later call on the engine returns DEVICE_ERROR, and the engine can
    /// still be destroyed.
    DeviceError = 5,
    /// A graph step synchronised, copied between host and device, nested a capture, returned an
    /// error, or made a call on the capturing engine that was refused (also when the step then
    /// ignored that status). The engine stays usable and no graph was created.
    CaptureError = 6,
    /// `struct_size` is larger than any struct this library knows: the caller was compiled
    /// against a newer header.
    AbiMismatch = 7,
    /// A bug in libmemra. Please report it with the message.
    Internal = 8,
}

/// Which implementation an engine runs on.
#[repr(u32)]
pub enum MemraBackend {
    /// CUDA when a usable device exists at the requested ordinal, otherwise the CPU. The
    /// environment variable `MEMRA_BACKEND=cpu|cuda|auto` replaces AUTO unless
    /// `MEMRA_ENGINE_FLAG_IGNORE_ENV` is set. `memra_engine_backend()` tells which one was taken.
    Auto = 0,
    /// The CUDA backend; creation fails with NO_DEVICE when no device is usable. It never falls
    /// back to the CPU.
    Cuda = 1,
    /// The CPU reference backend: plain loops in the order of the arithmetic contract; all
    /// "device" addresses are host addresses.
    Cpu = 2,
}

/// How `memra_alloc_f32()` / `memra_alloc_u64()` initialise the new buffer.
#[repr(u32)]
pub enum MemraAllocInit {
    /// Every element reads as zero to work ordered after the call.
    Zeroed = 0,
    /// The contents are unspecified.
    Uninit = 1,
}

/// An engine: one backend, one device, one stream, and every buffer and graph made through it.
/// Opaque; create with `memra_engine_create()`, release with `memra_engine_destroy()`. A
/// `MemraEngine *` is an identifier, not an address (see "Handles" above).
pub struct MemraEngine {
    _private: [u8; 0],
}

/// A captured graph of library operations, replayable with `memra_graph_launch()`. Opaque;
/// create with `memra_graph_capture()`, release with `memra_graph_destroy()`. A `MemraGraph *`
/// is an identifier, not an address (see "Handles" above).
pub struct MemraGraph {
    _private: [u8; 0],
}

/// Options for `memra_engine_create()`. Extensible: always fill it with
/// `memra_engine_options_init()` first, then set the fields you need; fields are only ever
/// appended, and `struct_size` tells the library which of them the caller knows.
#[repr(C)]
pub struct MemraEngineOptions {
    /// `sizeof(MemraEngineOptions)` as the caller was compiled; set by the init function.
    pub struct_size: usize,
    /// The backend to use (a `MemraBackend` value). Default AUTO.
    pub backend: MemraBackend,
    /// CUDA device ordinal, `>= 0`. Default 0. The CPU backend ignores it.
    pub device_ordinal: i32,
    /// A `cudaStream_t` owned by the host on which every operation of the engine is enqueued,
    /// or NULL for a non-blocking stream of the engine's own. The host keeps ownership and must
    /// keep the stream alive until the engine is destroyed. Must be NULL on the CPU backend.
    pub stream: *mut c_void,
    /// `MEMRA_ENGINE_FLAG_*` bits; unknown bits are refused with INVALID_ARGUMENT. Default 0.
    pub flags: u64,
}

/// A read-only run of `len` f32 elements at `ptr`: device memory for operation inputs, host
/// memory where a copy function says so. `ptr` may be NULL only when `len` is 0.
#[repr(C)]
pub struct MemraSliceF32 {
    /// First element; 4-byte aligned.
    pub ptr: *const f32,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// A writable run of `len` f32 elements at `ptr` (see `MemraSliceF32`).
#[repr(C)]
pub struct MemraSliceMutF32 {
    /// First element; 4-byte aligned.
    pub ptr: *mut f32,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// A read-only run of `len` u64 elements at `ptr`; pointer tables hold device addresses as u64.
#[repr(C)]
pub struct MemraSliceU64 {
    /// First element; 8-byte aligned.
    pub ptr: *const u64,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// A writable run of `len` u64 elements at `ptr` (see `MemraSliceU64`).
#[repr(C)]
pub struct MemraSliceMutU64 {
    /// First element; 8-byte aligned.
    pub ptr: *mut u64,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// One step of work to capture into a graph: it enqueues operations on `engine` and returns
/// MEMRA_STATUS_OK, or any other status to abort the capture. `user` is passed through
/// untouched.
pub type MemraStepFn =
    Option<unsafe extern "C" fn(engine: *mut MemraEngine, user: *mut c_void) -> MemraStatus>;

/// The ABI version of the loaded library, `(major << 16) | minor`. A host compiled against
/// this header accepts the library when `(v >> 16) == MEMRA_VERSION_MAJOR` and
/// `v >= MEMRA_ABI_VERSION` (same major, minor at least the header's). Thread-safe; never fails.
#[no_mangle]
pub extern "C" fn memra_abi_version() -> u32 {
    0
}

/// The library's version as a static string, `"MAJOR.MINOR.PATCH"`. Thread-safe; never NULL.
#[no_mangle]
pub extern "C" fn memra_version_string() -> *const c_char {
    std::ptr::null()
}

/// A static, human-readable name for `status` (`"MEMRA_STATUS_OK"`, ...), or
/// `"MEMRA_STATUS_<unknown>"` for a value this library does not know. Thread-safe; never NULL.
#[no_mangle]
pub extern "C" fn memra_status_string(status: MemraStatus) -> *const c_char {
    std::ptr::null()
}

/// The message of the last call on the calling thread that returned something other than
/// MEMRA_STATUS_OK, naming the function, the parameter and what was expected; `""` before the
/// first failure. Successful calls leave it unchanged. The string is owned by the library and
/// stays valid until the next failing call on the same thread. Thread-safe; never NULL.
#[no_mangle]
pub extern "C" fn memra_last_error_message() -> *const c_char {
    std::ptr::null()
}

/// Fills `*options` with the defaults of this version (backend AUTO, ordinal 0, own stream, no
/// flags) and sets `struct_size`.
///
/// Returns OK, or INVALID_ARGUMENT when `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn memra_engine_options_init(options: *mut MemraEngineOptions) -> MemraStatus {
    MemraStatus::Ok
}

/// Creates an engine and stores it in `*out_engine` (left untouched on failure).
///
/// `options` may be NULL for the defaults. With backend AUTO the environment variable
/// `MEMRA_BACKEND` (`cpu`, `cuda` or `auto`) decides, unless `MEMRA_ENGINE_FLAG_IGNORE_ENV` is
/// set. On CUDA the engine makes (or adopts) its stream on `device_ordinal`.
///
/// Returns OK; INVALID_ARGUMENT (NULL `out_engine`, `struct_size` too small, negative ordinal,
/// unknown backend or flag bits, a stream given to the CPU backend, a bad `MEMRA_BACKEND`
/// value); ABI_MISMATCH (`struct_size` larger than this library knows); NO_DEVICE (CUDA asked
/// for and unusable); DEVICE_ERROR; OUT_OF_MEMORY.
#[no_mangle]
pub unsafe extern "C" fn memra_engine_create(
    options: *const MemraEngineOptions,
    out_engine: *mut *mut MemraEngine,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Waits for the engine's work, frees every buffer still allocated through it and the stream
/// it made (never a host's stream), and releases the engine. NULL is a no-op returning OK.
///
/// Returns OK, even after a sticky device fault (the fault is not reported again here);
/// INVALID_ARGUMENT when `engine` is not a live engine (also when it was destroyed before: a
/// second destroy is refused and changes nothing, whatever was created since), when it is
/// inside `memra_graph_capture()`, when another thread is inside a call on it, or when graphs
/// made from it are still alive (destroy them first: the engine is then left untouched).
#[no_mangle]
pub unsafe extern "C" fn memra_engine_destroy(engine: *mut MemraEngine) -> MemraStatus {
    MemraStatus::Ok
}

/// Stores the backend the engine runs on (CUDA or CPU, never AUTO) in `*out_backend`.
///
/// Returns OK, or INVALID_ARGUMENT for a NULL or dead `engine` or a NULL `out_backend`.
#[no_mangle]
pub unsafe extern "C" fn memra_engine_backend(
    engine: *const MemraEngine,
    out_backend: *mut MemraBackend,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Stores the engine's `cudaStream_t` in `*out_stream` (NULL on the CPU backend). Work the host
/// enqueues on that stream is ordered with the engine's operations.
///
/// Returns OK, or INVALID_ARGUMENT for a NULL or dead `engine` or a NULL `out_stream`.
#[no_mangle]
pub unsafe extern "C" fn memra_engine_stream(
    engine: *const MemraEngine,
    out_stream: *mut *mut c_void,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Blocks until every operation enqueued on the engine has finished, and reports a device fault
/// that happened in any of them.
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`); DEVICE_ERROR; CAPTURE_ERROR when
/// called from a step being captured.
#[no_mangle]
pub unsafe extern "C" fn memra_engine_synchronize(engine: *mut MemraEngine) -> MemraStatus {
    MemraStatus::Ok
}

/// Allocates `len` f32 elements (256-byte aligned) on the engine's device and stores the slice
/// in `*out` (left untouched on failure). Free it with `memra_free()`; whatever is not freed is
/// freed by `memra_engine_destroy()`. Allocations made inside `memra_graph_capture()` belong to
/// the graph (see there).
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`, NULL `out`, `len == 0`, unknown `init`,
/// `len * 4` overflows); OUT_OF_MEMORY; DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_alloc_f32(
    engine: *mut MemraEngine,
    len: usize,
    init: MemraAllocInit,
    out: *mut MemraSliceMutF32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Allocates `len` u64 elements, as `memra_alloc_f32()` does.
///
/// Returns as `memra_alloc_f32()`.
#[no_mangle]
pub unsafe extern "C" fn memra_alloc_u64(
    engine: *mut MemraEngine,
    len: usize,
    init: MemraAllocInit,
    out: *mut MemraSliceMutU64,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Frees a buffer returned by `memra_alloc_*()` or `memra_htod_*()` (the `ptr` of its slice,
/// not a pointer into it), after the work already enqueued on the engine. NULL is a no-op. A
/// buffer that belongs to a graph is released when the graph is destroyed instead; freeing it
/// here first is allowed and deferred.
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`, `ptr` not the start of a live buffer
/// of this engine); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_free(engine: *mut MemraEngine, ptr: *mut c_void) -> MemraStatus {
    MemraStatus::Ok
}

/// Allocates a device buffer of `src.len` f32 elements, copies the host slice `src` into it and
/// stores the new slice in `*out`. `src` may be reused as soon as the call returns.
///
/// Returns as `memra_alloc_f32()`, plus INVALID_ARGUMENT for a NULL or misaligned `src.ptr`
/// and CAPTURE_ERROR inside a capture (a graph must not bake host data in).
#[no_mangle]
pub unsafe extern "C" fn memra_htod_f32(
    engine: *mut MemraEngine,
    src: MemraSliceF32,
    out: *mut MemraSliceMutF32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Allocates and fills a u64 buffer from host memory, as `memra_htod_f32()` does.
#[no_mangle]
pub unsafe extern "C" fn memra_htod_u64(
    engine: *mut MemraEngine,
    src: MemraSliceU64,
    out: *mut MemraSliceMutU64,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies the host slice `src` into the first `src.len` elements of the existing device buffer
/// `dst`, in stream order: work enqueued before sees the old contents, work enqueued after sees
/// the new ones. `src` may be reused as soon as the call returns. The tail of `dst` is left
/// untouched.
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`, NULL or misaligned pointers,
/// `dst.len < src.len`, overlapping `src` and `dst` on the CPU backend); CAPTURE_ERROR inside a
/// capture; DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_htod_f32_into(
    engine: *mut MemraEngine,
    src: MemraSliceF32,
    dst: MemraSliceMutF32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies host u64 values into an existing device buffer, as `memra_htod_f32_into()` does. This
/// is how a host rebinds a pointer table between graph replays.
#[no_mangle]
pub unsafe extern "C" fn memra_htod_u64_into(
    engine: *mut MemraEngine,
    src: MemraSliceU64,
    dst: MemraSliceMutU64,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Waits for the engine's work, then copies the device slice `src` into the first `src.len`
/// elements of the host buffer `dst`.
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`, NULL or misaligned pointers,
/// `dst.len < src.len`, overlapping `src` and `dst` on the CPU backend); CAPTURE_ERROR inside a
/// capture; DEVICE_ERROR (including a fault of earlier work).
#[no_mangle]
pub unsafe extern "C" fn memra_dtoh_f32(
    engine: *mut MemraEngine,
    src: MemraSliceF32,
    dst: MemraSliceMutF32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies device u64 values to the host, as `memra_dtoh_f32()` does.
#[no_mangle]
pub unsafe extern "C" fn memra_dtoh_u64(
    engine: *mut MemraEngine,
    src: MemraSliceU64,
    dst: MemraSliceMutU64,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Per-row causal conv step + SiLU for `b_n` independent sequences, one row each.
///
/// - `qkv`: `[b_n, conv_dim]`, the new row of each sequence.
/// - `conv_ptrs`: `b_n` device addresses; entry b is sequence b's ring `[conv_dim, d_conv-1]`
///   (slot 0 the oldest), read when the operation executes and rolled in place.
/// - `w`: `[conv_dim, d_conv]`.
/// - `conv_out`: `[b_n, conv_dim]`, `y = silu(sum_j window[j] * w[j])`.
///
/// Longer views are fine (the tail is untouched). `conv_out` must not overlap any input.
///
/// Returns OK; INVALID_ARGUMENT (NULL/dead engine, NULL or misaligned pointers, zero
/// `conv_dim` or `b_n`, `d_conv` outside 1..=8, short views, overflowing sizes, overlap);
/// DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_ssm_conv1d_fused_decode_b_view(
    engine: *mut MemraEngine,
    qkv: MemraSliceF32,
    conv_ptrs: MemraSliceU64,
    w: MemraSliceF32,
    conv_out: MemraSliceMutF32,
    conv_dim: usize,
    d_conv: usize,
    b_n: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// GDN prep for `b_n` rows (per-row: one row of each of `b_n` sequences; packed: the `T` rows
/// of one sequence, or `B*T` rows of a batch): L2-normalised q and k expanded to value heads
/// (value head vh reads key head `vh % num_k`), v copied, `beta = sigmoid(beta_raw)`,
/// `g_log = a * softplus(alpha + dt_bias)`.
///
/// - `conv_out`: `[b_n, conv_dim]` with channels `q | k | v`.
/// - `beta_raw`, `alpha`: `[b_n, num_v]`; `dt_bias`, `a`: `[num_v]`.
/// - outputs `q_l2`, `k_l2`, `v_g`: `[b_n, num_v, d_state]`; `beta`, `g_log`: `[b_n, num_v]`.
///
/// Requires `d_state == 128` (else UNSUPPORTED), `num_k >= 1`, `num_v % num_k == 0`,
/// `key_dim == d_state * num_k`, `conv_dim == 2 * key_dim + d_state * num_v`, finite `eps`.
/// Outputs must not overlap inputs or each other.
///
/// Returns OK; INVALID_ARGUMENT; UNSUPPORTED; DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_prep_decode_b(
    engine: *mut MemraEngine,
    conv_out: MemraSliceF32,
    beta_raw: MemraSliceF32,
    alpha: MemraSliceF32,
    dt_bias: MemraSliceF32,
    a: MemraSliceF32,
    q_l2: MemraSliceMutF32,
    k_l2: MemraSliceMutF32,
    v_g: MemraSliceMutF32,
    beta: MemraSliceMutF32,
    g_log: MemraSliceMutF32,
    d_state: usize,
    num_v: usize,
    num_k: usize,
    key_dim: usize,
    eps: f32,
    conv_dim: usize,
    b_n: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Identical to `memra_gdn_prep_decode_b()`; memra-engine has both names (one takes views), so
/// libmemra exports both.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_prep_decode_b_view(
    engine: *mut MemraEngine,
    conv_out: MemraSliceF32,
    beta_raw: MemraSliceF32,
    alpha: MemraSliceF32,
    dt_bias: MemraSliceF32,
    a: MemraSliceF32,
    q_l2: MemraSliceMutF32,
    k_l2: MemraSliceMutF32,
    v_g: MemraSliceMutF32,
    beta: MemraSliceMutF32,
    g_log: MemraSliceMutF32,
    d_state: usize,
    num_v: usize,
    num_k: usize,
    key_dim: usize,
    eps: f32,
    conv_dim: usize,
    b_n: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// One recurrent GDN step (head dim 128) for `b_n` independent sequences, one row each.
///
/// - `q`, `k`, `v`: `[b_n, num_v, 128]`; `g_log`, `beta`: `[b_n, num_v]` (from the prep).
/// - `in_ptrs`, `out_ptrs`: `b_n` device addresses each; entry b is sequence b's state
///   `[num_v, 128, 128]` (transposed: head h, column c, row i at `(h*128 + c)*128 + i`) to read,
///   and where to write the new state. Read when the operation executes; `in == out` (in place)
///   is allowed.
/// - `o`: `[b_n, num_v, 128]`, the step's output scaled by `scale`.
///
/// Returns OK; INVALID_ARGUMENT (zero `num_v` or `b_n`, short views, non-finite `scale`, `o`
/// overlapping an input, ...); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_scan_s128_batched_view(
    engine: *mut MemraEngine,
    q: MemraSliceF32,
    k: MemraSliceF32,
    v: MemraSliceF32,
    g_log: MemraSliceF32,
    beta: MemraSliceF32,
    in_ptrs: MemraSliceU64,
    out_ptrs: MemraSliceU64,
    o: MemraSliceMutF32,
    num_v: usize,
    b_n: usize,
    scale: f32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Packed conv: `t` conv steps for each of `b_n` sequences in one launch, bit-identical to `t`
/// chained `memra_ssm_conv1d_fused_decode_b_view()` calls.
///
/// - `qkv`: `[b_n, t, conv_dim]`.
/// - `table`: `[b_n, 3]` device addresses (`MEMRA_TABLE_WIDTH`); only entry 0 of each row, the
///   sequence's ring `[conv_dim, d_conv-1]`, is used: read at execution, rolled through all `t`
///   rows, left holding the ring after the last row.
/// - `w`: `[conv_dim, d_conv]`; `conv_outs`: `[b_n, t, conv_dim]`.
/// - `snap_conv`: optional (`{NULL, 0}` for none), `[b_n, t-1, conv_dim, d_conv-1]`; entry r is
///   the ring after row r.
///
/// Returns as `memra_ssm_conv1d_fused_decode_b_view()`, with `t == 0` refused too.
#[no_mangle]
pub unsafe extern "C" fn memra_ssm_conv1d_fused_decode_tloop(
    engine: *mut MemraEngine,
    qkv: MemraSliceF32,
    table: MemraSliceU64,
    w: MemraSliceF32,
    conv_outs: MemraSliceMutF32,
    snap_conv: MemraSliceMutF32,
    conv_dim: usize,
    d_conv: usize,
    t: usize,
    b_n: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Packed scan: `t` recurrent steps for each of `b_n` sequences in one launch, bit-identical to
/// `t` chained `memra_gdn_scan_s128_batched_view()` calls that ping-pong the state (even rows
/// read canonical and write alternate, odd rows the reverse).
///
/// - `q`, `k`, `v`: `[b_n, t, num_v, 128]`; `g_log`, `beta`: `[b_n, t, num_v]`.
/// - `table`: `[b_n, 3]` device addresses `[conv ring (unused here), canonical state,
///   alternate state]`, read at execution. The canonical state is read once; the final state is
///   written to the alternate buffer when `t` is odd and back to the canonical buffer when `t`
///   is even, where the per-row chain leaves it.
/// - `o_all`: `[b_n, t, num_v, 128]`.
/// - `snap_ssm`: optional (`{NULL, 0}` for none), `[b_n, t-1, num_v, 128, 128]`; entry r is the
///   state after row r.
///
/// Returns OK; INVALID_ARGUMENT (zero `num_v`, `t` or `b_n`, short views, non-finite `scale`,
/// overlap, ...); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_scan_s128_tsnap(
    engine: *mut MemraEngine,
    q: MemraSliceF32,
    k: MemraSliceF32,
    v: MemraSliceF32,
    g_log: MemraSliceF32,
    beta: MemraSliceF32,
    table: MemraSliceU64,
    o_all: MemraSliceMutF32,
    num_v: usize,
    t: usize,
    b_n: usize,
    scale: f32,
    snap_ssm: MemraSliceMutF32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Captures `step` into a replayable graph stored in `*out_graph` (left untouched on failure).
///
/// `step(engine, user)` is called three times: twice eagerly as warm-ups (their operations
/// run), then once under capture (its operations are recorded, not run). Every buffer the
/// engine allocates during the three calls belongs to the graph and lives until
/// `memra_graph_destroy()`, even if the step frees it. On CUDA this is a CUDA graph captured
/// from the engine's stream in relaxed mode; on the CPU the recorded list of operations.
/// Either way, pointer-table entries are read at every replay, so rewriting a table between
/// replays rebinds the graph to other buffers.
///
/// `step` runs on the calling thread and calls back into `engine`. A graph never silently
/// lacks an operation: any call the step makes on `engine` that does not return OK (a bad
/// argument, a call not allowed inside a capture) fails the capture, even when the step
/// ignores that status and returns OK; so does a call through an engine handle that is not
/// live (it may have been meant for `engine`), and a call on `engine` from another thread
/// while the step runs (it is refused as in use, and may have been the step's). Calls on
/// other live engines do not concern the capture.
///
/// Returns OK; INVALID_ARGUMENT (NULL/dead engine, NULL `step` or `out_graph`); CAPTURE_ERROR
/// (the step returned an error, made a refused call as above, or synchronised, copied to or
/// from the host, or nested a capture; the engine stays usable); DEVICE_ERROR (a device fault
/// during the step); OUT_OF_MEMORY.
#[no_mangle]
pub unsafe extern "C" fn memra_graph_capture(
    engine: *mut MemraEngine,
    step: MemraStepFn,
    user: *mut c_void,
    out_graph: *mut *mut MemraGraph,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Enqueues one replay of `graph` on the engine's stream (CUDA) or runs it (CPU).
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead handles, `graph` made by another engine,
/// called inside a capture); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_graph_launch(
    engine: *mut MemraEngine,
    graph: *const MemraGraph,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Waits for the engine's work, then releases `graph` and every buffer it retained. NULL
/// `graph` is a no-op returning OK.
///
/// Returns OK; INVALID_ARGUMENT (NULL or dead `engine`, dead `graph` (also one destroyed
/// before: a second destroy is refused and changes nothing), `graph` made by another engine,
/// called inside a capture).
#[no_mangle]
pub unsafe extern "C" fn memra_graph_destroy(
    engine: *mut MemraEngine,
    graph: *mut MemraGraph,
) -> MemraStatus {
    MemraStatus::Ok
}

// ---------------------------------------------------------------------------------------------
// ABI 1.1: the verify, journal mode, commit and device-side rollback. Every symbol
// below is exported under the MEMRA_1.1 version node.
// ---------------------------------------------------------------------------------------------

/// Which state traffic a `memra_gdn_verify()` call performs (`MemraVerifyArgs::mode`).
#[repr(u32)]
pub enum MemraVerifyMode {
    /// The 1.0 packed program's contract: table rows are `[ring, canonical state, alternate
    /// state]`; the ring snapshots and state snapshots of rows `0 .. t-2` are written, the final
    /// state goes to the alternate buffer when `t` is odd and back to the canonical one when
    /// `t` is even, and the ring is left after row `t - 1`.
    Snapshots = 0,
    /// As `SNAPSHOTS` (same table, same final-state placement, ring rolled through all rows)
    /// but no snapshot is written: `snap_conv` and `snap_ssm` must be empty.
    FinalOnly = 1,
    /// Deferred commit: table rows are `[ring, state, journal]`. The rows accepted from the
    /// journal (`accepted[b]`) are folded into the ring and the state first, exactly as the
    /// per-row program would have run them; the `t` new rows run from there; the folded ring
    /// and state are written back in place and the journal is replaced by the `t` new rows.
    /// No snapshot is written.
    Journal = 2,
}

/// GQA head order: which key head value head `vh` reads (`MemraVerifyArgs::head_order`).
#[repr(u32)]
pub enum MemraHeadOrder {
    /// `kh = vh % num_k`: the order ggml and memra-engine store the weights in, and the only
    /// order of the 1.0 operations.
    Tiled = 0,
    /// `kh = vh / (num_v / num_k)`: the order of Hugging Face, vLLM and fla checkpoints.
    Grouped = 1,
}

/// A read-only run of `len` u32 elements at `ptr` (accepted counts live in device memory).
#[repr(C)]
pub struct MemraSliceU32 {
    /// First element; 4-byte aligned.
    pub ptr: *const u32,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// A writable run of `len` u32 elements at `ptr` (see `MemraSliceU32`).
#[repr(C)]
pub struct MemraSliceMutU32 {
    /// First element; 4-byte aligned.
    pub ptr: *mut u32,
    /// Number of elements (not bytes).
    pub len: usize,
}

/// Arguments of `memra_gdn_verify()`, `memra_gdn_journal_commit()` and `memra_gdn_rollback()`:
/// one description of a verify of `b_n` sequences x `t` rows that all three read. Extensible:
/// fill it with `memra_verify_args_init()`, then set the fields; fields are only ever appended.
///
/// Shapes (S = `d_state` = 128, key_dim = S*num_k, conv_dim = 2*key_dim + S*num_v, pad =
/// d_conv - 1) are those of the 1.0 operations. Optional outputs are `{NULL, 0}` to skip them;
/// an optional output that is skipped is never written.
#[repr(C)]
pub struct MemraVerifyArgs {
    /// `sizeof(MemraVerifyArgs)` as the caller was compiled; set by the init function.
    pub struct_size: usize,
    /// A `MemraVerifyMode` value. Default SNAPSHOTS.
    pub mode: MemraVerifyMode,
    /// A `MemraHeadOrder` value. Default TILED.
    pub head_order: MemraHeadOrder,
    /// Head dimension; only 128 is supported (else UNSUPPORTED). Default 128.
    pub d_state: usize,
    /// Key heads, `>= 1`. No default (0 is refused).
    pub num_k: usize,
    /// Value heads, a multiple of `num_k`. No default (0 is refused).
    pub num_v: usize,
    /// Conv width, `1 ..= 8`. No default (0 is refused).
    pub d_conv: usize,
    /// Rows per sequence, `>= 1` (the draft length plus one). No default (0 is refused).
    pub t: usize,
    /// Sequences, `>= 1`. No default (0 is refused).
    pub b_n: usize,
    /// The L2-normalisation epsilon of the prep. Default NaN, which is refused: set it.
    pub eps: f32,
    /// The scale applied to every output `o`. Default NaN, which is refused: set it.
    pub scale: f32,
    /// `[b_n, t, conv_dim]`: the new rows (channels `q | k | v`).
    pub qkv: MemraSliceF32,
    /// `[b_n, 3]` device addresses, read when the operation executes (see `MemraVerifyMode`
    /// for what the three entries are in each mode). Rings are `[conv_dim, pad]` (slot 0 the
    /// oldest), states `[num_v, S, S]` transposed, journals `memra_gdn_journal_len()` f32
    /// elements.
    pub table: MemraSliceU64,
    /// `[conv_dim, d_conv]`: the conv weights.
    pub w: MemraSliceF32,
    /// `[b_n, t, num_v]`: the raw beta logits.
    pub beta_raw: MemraSliceF32,
    /// `[b_n, t, num_v]`: the decay inputs.
    pub alpha: MemraSliceF32,
    /// `[num_v]`.
    pub dt_bias: MemraSliceF32,
    /// `[num_v]`: the pre-negated decay (e.g. `-exp(A_log)`).
    pub a: MemraSliceF32,
    /// JOURNAL mode, commit and rollback: `[b_n]` u32 in device memory, read when the
    /// operation executes. Journal: how many of the journal's rows sequence b accepted (0 ..=
    /// rows held). Rollback: how many of the verify's `t` rows were accepted (1 ..= t).
    pub accepted: MemraSliceU32,
    /// `[b_n, t, num_v, S]`: the outputs, scaled by `scale`. Required.
    pub o: MemraSliceMutF32,
    /// Optional `[b_n, t, conv_dim]`: the conv + SiLU outputs.
    pub conv_outs: MemraSliceMutF32,
    /// Optional `[b_n, t, num_v, S]`: L2-normalised q, expanded to value heads.
    pub q_l2: MemraSliceMutF32,
    /// Optional `[b_n, t, num_v, S]`: L2-normalised k, expanded to value heads.
    pub k_l2: MemraSliceMutF32,
    /// Optional `[b_n, t, num_v, S]`: the v channels.
    pub v_g: MemraSliceMutF32,
    /// Optional `[b_n, t, num_v]`: `sigmoid(beta_raw)`.
    pub beta: MemraSliceMutF32,
    /// Optional `[b_n, t, num_v]`: `a * softplus(alpha + dt_bias)`.
    pub g_log: MemraSliceMutF32,
    /// SNAPSHOTS mode (required when `t >= 2`; with `t == 1` there is nothing to write and any
    /// view is accepted and left untouched): `[b_n, t-1, conv_dim, pad]`, entry r the ring after
    /// row r. Must be empty in the other modes.
    pub snap_conv: MemraSliceMutF32,
    /// SNAPSHOTS mode (required when `t >= 2`; with `t == 1` any view is accepted and left
    /// untouched): `[b_n, t-1, num_v, S, S]`, entry r the state after row r. Must be empty in
    /// the other modes.
    pub snap_ssm: MemraSliceMutF32,
    /// (1.2) JOURNAL mode and commit: the `t_max` the journals were sized with
    /// (`memra_gdn_journal_len()`), checked against each journal's header and bounding every
    /// row the operation reads or writes, so that a journal's contents can never steer an
    /// access. 0 (the default, and what a caller compiled against 1.1 passes) declares none:
    /// the bound is then the larger of `t` and the capacity the journal's header records.
    pub journal_t_max: usize,
    /// (1.2) Optional scratch of `memra_gdn_verify_workspace_len()` f32 elements, 16-byte
    /// aligned, for the intermediate rows the CUDA verify does not return (the CPU backend
    /// ignores it). `{NULL, 0}` (the default): the engine uses a workspace of its own, which it
    /// grows when a call needs more, and cannot grow while the host captures the engine's
    /// stream itself (CAPTURE_ERROR: pass one here, or run one such call first).
    pub workspace: MemraSliceMutF32,
}

/// Fills `*args` with the defaults of this version and sets `struct_size`: mode SNAPSHOTS,
/// head order TILED, `d_state` 128, every other count 0 and every slice `{NULL, 0}`, `eps` and
/// `scale` NaN (so that a caller who forgets them is refused rather than surprised).
///
/// Returns OK, or INVALID_ARGUMENT when `args` is NULL.
#[no_mangle]
pub unsafe extern "C" fn memra_verify_args_init(args: *mut MemraVerifyArgs) -> MemraStatus {
    MemraStatus::Ok
}

/// The whole speculative verify of `b_n` sequences x `t` rows, conv + prep + scan: on CUDA a
/// prologue kernel (conv and prep once per key head and row) and the scan kernel, which loads
/// the state while the prologue runs (programmatic dependent launch); one pass on the CPU.
///
/// Every tensor it writes is bit-identical to what the 1.0 program writes for the same inputs
/// (`memra_ssm_conv1d_fused_decode_tloop()`, `memra_gdn_prep_decode_b()` over the `b_n * t`
/// rows, `memra_gdn_scan_s128_tsnap()`), and so to `t` chained per-row calls. With the GROUPED
/// head order it is bit-identical to that program run on head-permuted weights. `o` is always
/// written; `conv_outs`, `q_l2`, `k_l2`, `v_g`, `beta` and `g_log` only when given.
///
/// Modes (`MemraVerifyMode`): SNAPSHOTS and FINAL_ONLY keep the 1.0 table and parity rules;
/// JOURNAL reads `accepted` and the journals, folds the accepted rows, runs the new rows,
/// writes ring and state back in place and leaves the `t` new rows in the journal. In JOURNAL
/// mode each sequence's journal is checked first: its table entry (not 0, 4-byte aligned), its
/// header (zero = empty, or this library's magic and format, this call's d_state, num_k, num_v,
/// d_conv and head order, rows at most its t_max, slot 0 or 1), its capacity (equal to
/// `journal_t_max` when that is set; else the larger of `t` and the header's t_max) and
/// `accepted[b]` (at most the rows held). A sequence that fails is left untouched (ring, state,
/// journal and its outputs), the other sequences proceed, and the next synchronising call on the
/// engine (`memra_engine_synchronize()`, `memra_dtoh_*()`) returns INVALID_ARGUMENT naming the
/// operation, the sequence and what was wrong (e.g. "journal of sequence 1 written for num_v 8,
/// this call has num_v 4"); the engine stays usable. `accepted[b] = 0` is legal (nothing is
/// folded).
///
/// Graph-capturable; table entries and accepted counts are re-read at every replay.
///
/// Returns OK; INVALID_ARGUMENT (NULL/dead engine, NULL `args`, `struct_size` smaller than
/// 1.1's or between 1.1's and 1.2's, unknown mode or head order, a short, misaligned or
/// overlapping `workspace`, `t` above a nonzero `journal_t_max`, zero or inconsistent counts, short or misaligned views,
/// snapshots missing in SNAPSHOTS mode or given in another, `accepted` missing in JOURNAL mode,
/// non-finite `eps` or `scale`, overflowing sizes, outputs overlapping inputs or each other);
/// UNSUPPORTED (`d_state != 128`); ABI_MISMATCH (`struct_size` larger than this library
/// knows); CAPTURE_ERROR (no `workspace` given, the engine's own too small, and the host is
/// capturing the engine's stream itself); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_verify(
    engine: *mut MemraEngine,
    args: *const MemraVerifyArgs,
) -> MemraStatus {
    MemraStatus::Ok
}

/// The length in f32 elements of one sequence's journal for verifies of up to `t_max` rows of
/// the given shape. A journal buffer of that length that is zero-filled is empty; its contents
/// are otherwise the library's own (a header naming the shape, capacity and rows it holds, and
/// two slots of `t_max` rows: the last verify's and the next one's). Pass the same `t_max` as
/// `MemraVerifyArgs::journal_t_max`.
///
/// Returns OK; INVALID_ARGUMENT (NULL `out_len`, zero or inconsistent counts, overflow);
/// UNSUPPORTED (`d_state != 128`).
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_journal_len(
    d_state: usize,
    num_k: usize,
    num_v: usize,
    t_max: usize,
    out_len: *mut usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// (1.2) The length in f32 elements of the workspace a `memra_gdn_verify()` or
/// `memra_gdn_journal_commit()` call with these arguments may use (`MemraVerifyArgs::workspace`):
/// it depends on `b_n`, `t` (0 for a commit), `num_k` and `num_v` only.
///
/// Returns OK; INVALID_ARGUMENT (NULL `args` or `out_len`, `struct_size` as in
/// `memra_gdn_verify()`, zero or inconsistent counts, overflow); UNSUPPORTED (`d_state != 128`).
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_verify_workspace_len(
    args: *const MemraVerifyArgs,
    commit: bool,
    out_len: *mut usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Folds the first `accepted[b]` journal rows of each sequence into its ring and state (table
/// rows `[ring, state, journal]`), exactly as the per-row program would have run them, and
/// empties the journal: afterwards ring and state are bit-identical to the per-row program run
/// on exactly the accepted rows. For a host that must read the state, move the sequence or run
/// a non-speculative step. Reads `mode` (must be JOURNAL), `head_order`, `d_state`, `num_k`,
/// `num_v`, `d_conv`, `b_n`, `eps`, `table`, `w`, `dt_bias`, `a` and `accepted`; ignores the
/// rest. Bad counts are handled as in `memra_gdn_verify()`. Graph-capturable.
///
/// Returns as `memra_gdn_verify()`.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_journal_commit(
    engine: *mut MemraEngine,
    args: *const MemraVerifyArgs,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Device-side rollback after a SNAPSHOTS-mode verify described by `args`: for each sequence,
/// with n = `accepted[b]` (1 ..= t, device memory, read when the operation executes), makes
/// the canonical state and the ring those after row n - 1: snapshot n - 1, or the final state
/// and ring when n == t. Bit-exact copies, one launch for all `b_n` sequences,
/// graph-capturable. Reads `d_state`, `num_k`, `num_v`, `d_conv`, `t`, `b_n`, `table`,
/// `snap_conv`, `snap_ssm` and `accepted`; ignores the rest (`mode` must be SNAPSHOTS). A
/// count of 0 or above `t` leaves that sequence untouched and is reported by the next
/// synchronising call as in `memra_gdn_verify()`.
///
/// Returns as `memra_gdn_verify()`.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_rollback(
    engine: *mut MemraEngine,
    args: *const MemraVerifyArgs,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Allocates `len` u32 elements, as `memra_alloc_f32()` does (for accepted counts).
///
/// Returns as `memra_alloc_f32()`.
#[no_mangle]
pub unsafe extern "C" fn memra_alloc_u32(
    engine: *mut MemraEngine,
    len: usize,
    init: MemraAllocInit,
    out: *mut MemraSliceMutU32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies host u32 values into an existing device buffer, as `memra_htod_f32_into()` does:
/// how a host writes accepted counts between graph replays.
#[no_mangle]
pub unsafe extern "C" fn memra_htod_u32_into(
    engine: *mut MemraEngine,
    src: MemraSliceU32,
    dst: MemraSliceMutU32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies device u32 values to the host, as `memra_dtoh_f32()` does.
#[no_mangle]
pub unsafe extern "C" fn memra_dtoh_u32(
    engine: *mut MemraEngine,
    src: MemraSliceU32,
    dst: MemraSliceMutU32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// The per-row conv step + SiLU of ONE sequence whose ring is passed directly rather than
/// through a pointer table (memra-engine's single-sequence `ssm_conv1d_fused_decode`).
/// Bit-identical to `memra_ssm_conv1d_fused_decode_b_view()` with `b_n = 1` and a table entry
/// holding `conv_state`'s address.
///
/// - `qkv`, `conv_out`: `[conv_dim]`; `w`: `[conv_dim, d_conv]`.
/// - `conv_state`: the ring `[conv_dim, d_conv - 1]`, read and rolled in place (`{NULL, 0}`
///   is accepted when `d_conv == 1`: there is no ring).
///
/// The ring's address is fixed when the call is made: a captured graph rolls this very buffer
/// at every replay. `conv_state` and `conv_out` must not overlap each other or any input.
///
/// Returns OK; INVALID_ARGUMENT (as the table-driven op, with `conv_state` checked for length
/// and alignment like any other view); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_ssm_conv1d_fused_decode(
    engine: *mut MemraEngine,
    qkv: MemraSliceF32,
    conv_state: MemraSliceMutF32,
    w: MemraSliceF32,
    conv_out: MemraSliceMutF32,
    conv_dim: usize,
    d_conv: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// `t` recurrent GDN steps (head dim 128) of ONE sequence whose states are passed directly
/// (memra-engine's single-sequence `gdn_scan_s128` / `gdn_scan_s128_view`): the steps start
/// from `state_in` and the state after the last row is written to `state_out`. Bit-identical
/// to `t` chained `memra_gdn_scan_s128_batched_view()` calls with `b_n = 1` (and so to the
/// packed `memra_gdn_scan_s128_tsnap()`).
///
/// - `q`, `k`, `v`, `o`: `[t, num_v, 128]`; `g_log`, `beta`: `[t, num_v]`.
/// - `state_in`, `state_out`: `[num_v, 128, 128]` (transposed, as the table-driven ops).
///   `state_in` is only read; the same buffer for both (exactly the same address) updates the
///   state in place. Any other overlap of `state_out` or `o` with an argument is refused.
/// - `o` is scaled by `scale`.
///
/// Returns OK; INVALID_ARGUMENT (zero `num_v` or `t`, short views, non-finite `scale`,
/// overlap, ...); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_gdn_scan_s128(
    engine: *mut MemraEngine,
    q: MemraSliceF32,
    k: MemraSliceF32,
    v: MemraSliceF32,
    g_log: MemraSliceF32,
    beta: MemraSliceF32,
    state_in: MemraSliceF32,
    state_out: MemraSliceMutF32,
    o: MemraSliceMutF32,
    num_v: usize,
    t: usize,
    scale: f32,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies `n` states of `words` f32 each in one launch (memra-engine's
/// `copy_batch_uniform_f32`): copy i reads `words` floats at the address in `table[i]` and
/// writes them at the address in `table[n + i]`. The addresses are device addresses read when
/// the copy executes, so a captured graph copies whatever the table names at each replay: the
/// checkpoint stash and the partial-accept restore of every layer's ring and state as one
/// launch, the table rewritten with `memra_htod_u64_into()` between replays. Bit-exact copies.
///
/// - `table`: `[2, n]` u64 device addresses, the n sources then the n destinations. Longer is
///   fine (the tail is not read).
/// - Each address must be non-NULL and 4-byte aligned, and `words` floats from it must not run
///   past the end of the address space. A destination must not overlap the table, nor its own
///   source unless it is exactly the same address (that copy then has nothing to do). Only the
///   device sees the addresses: a copy that breaks one of these rules is not made, its
///   destination is left untouched, the other copies are made, and the next synchronising call
///   (`memra_engine_synchronize()`, `memra_dtoh_f32()`, ...) returns INVALID_ARGUMENT naming
///   the copy and the address; the engine stays usable.
/// - The destinations of different copies must not overlap one another or another copy's
///   source: the copies run in parallel in no defined order (not checked).
///
/// Returns OK; INVALID_ARGUMENT (NULL/dead engine, zero `n` or `words`, a NULL, misaligned or
/// short `table`, overflowing sizes); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_copy_batch_uniform_f32(
    engine: *mut MemraEngine,
    table: MemraSliceU64,
    n: usize,
    words: usize,
) -> MemraStatus {
    MemraStatus::Ok
}

/// Copies `n` f32 from the address held in `src_ptr[0]` into `dst[dst_off .. dst_off + n]`
/// (memra-engine's `copy_indirect_src_f32`): the source is a device address read when the copy
/// executes, so a captured graph copies from whatever the entry names at each replay (a state
/// row that a pointer table selects, stashed into a checkpoint slab). Bit-exact.
///
/// - `src_ptr`: at least 1 u64; only entry 0 is read.
/// - `dst`: at least `dst_off + n` f32. The part written must not overlap `src_ptr` (refused
///   here).
/// - The source address must be non-NULL and 4-byte aligned, must not run past the end of the
///   address space with `n` floats, and must not overlap the part of `dst` written unless it
///   is exactly its address (nothing to do). Only the device sees it: a bad source leaves `dst`
///   untouched and is reported by the next synchronising call as in
///   `memra_copy_batch_uniform_f32()`.
///
/// Returns OK; INVALID_ARGUMENT (NULL/dead engine, zero `n`, NULL, misaligned or short views,
/// `dst_off + n` overflowing, overlap); DEVICE_ERROR.
#[no_mangle]
pub unsafe extern "C" fn memra_copy_indirect_src_f32(
    engine: *mut MemraEngine,
    src_ptr: MemraSliceU64,
    dst: MemraSliceMutF32,
    dst_off: usize,
    n: usize,
) -> MemraStatus {
    MemraStatus::Ok
}
