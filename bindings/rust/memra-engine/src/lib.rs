//! Safe Rust API over libmemra, with the method names and signatures of memra-engine (both
//! its 0.72 and its 0.136 generation) and the buffer types of cudarc 0.19, so that
//! memra-engine's callers (and tests) bind to the library unchanged.
//!
//! ```no_run
//! use memra_engine::{DevicePtr, Engine};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // CUDA device 0, or the CPU when there is none (MEMRA_BACKEND=cpu|cuda decides too).
//! let e = Engine::new(0)?;
//! let (num_k, num_v, d_conv, t) = (2usize, 4usize, 4usize, 3usize);
//! let conv_dim = 128 * (2 * num_k + num_v);
//! let qkv = e.htod(&vec![0.25; t * conv_dim])?;
//! let w = e.htod(&vec![0.5; conv_dim * d_conv])?;
//! let ring = e.zeros(conv_dim * (d_conv - 1))?;
//! let (s0, s1) = (e.zeros(128 * 128 * num_v)?, e.zeros(128 * 128 * num_v)?);
//! // Pointer tables hold device addresses: [conv ring, canonical state, alternate state].
//! let stream = e.stream();
//! let (pc, _gc) = ring.device_ptr(&stream);
//! let (p0, _g0) = s0.device_ptr(&stream);
//! let (p1, _g1) = s1.device_ptr(&stream);
//! let table = e.htod_u64(&[pc, p0, p1])?;
//! let mut conv_outs = e.uninit(t * conv_dim)?;
//! e.ssm_conv1d_fused_decode_tloop(
//!     &qkv, &table, &w, &mut conv_outs, None, conv_dim, d_conv, t,
//! )?;
//! println!("{:?}", &e.dtoh(&conv_outs)?[..4]);
//! # Ok(())
//! # }
//! ```
//!
//! # Which memra revision
//!
//! The methods mirror the revision of memra-engine 0.136 whose packed
//! [`Engine::ssm_conv1d_fused_decode_tloop`] and [`Engine::gdn_scan_s128_tsnap`] take a pointer
//! table `[conv ring, canonical state, alternate state]` (above), together with that
//! generation's checkpoint copies [`Engine::copy_indirect_src_f32`] and
//! [`Engine::copy_batch_uniform_f32`]. An earlier 0.136 revision (memra commit 394cfc42) passed
//! those states as buffers (`conv_state: &mut CudaSlice<f32>`, `state_in`, `state_out`,
//! snapshots); code written for it ports to the single-sequence ops, which take the buffers and
//! give the same bits: [`Engine::ssm_conv1d_fused_decode`] once per row with the ring itself,
//! and [`Engine::gdn_scan_s128`] over all `t` rows from `state_in` into `state_out`.
//! README.md's Rust section shows the port.
//!
//! # What the types guarantee
//!
//! - [`Engine::new`] checks the loaded library's ABI version against the header these bindings
//!   were generated from (equal major, library minor at least the header's) and refuses a
//!   mismatched library with [`Status::AbiMismatch`].
//! - [`CudaSlice<T>`] owns its allocation and has no lifetime parameter, as in cudarc: it can be
//!   a struct field, a return value, and be moved to or shared with other threads. It holds the
//!   engine's shared state by reference count, so the library's engine is destroyed only after
//!   the last buffer, stream handle and graph are gone: a buffer may outlive the [`Engine`]
//!   value that made it and is still freed correctly.
//! - [`Engine`], [`CudaSlice`], [`CudaStream`] and [`CudaGraph`] are `Send + Sync`. The library
//!   requires calls on one engine not to overlap, so every call locks the engine (re-entrantly,
//!   so that a capture's step can call back into it); threads sharing an engine take turns.
//! - Every operation refuses a buffer of another engine, and hands the library each buffer's
//!   true address and length; the library validates shapes and lengths before it launches or
//!   writes anything, and its message comes back in the error ([`Error`], read with
//!   [`status_of`]).
//! - Views ([`CudaView`], [`CudaViewMut`]) borrow their buffer; a read-only view cannot be
//!   written, one buffer cannot be an operation's input and output at once, and the trait
//!   that makes a type a buffer is sealed:
//!
//! ```compile_fail,E0597
//! use memra_engine::Engine;
//! let e = Engine::new(0).unwrap();
//! let view;
//! {
//!     let buffer = e.zeros(4).unwrap();
//!     view = buffer.slice(0..2);
//! }
//! e.dtoh_view(&view).unwrap();
//! ```
//!
//! ```compile_fail,E0277
//! use memra_engine::Engine;
//! let e = Engine::new(0).unwrap();
//! let buffer = e.zeros(4).unwrap();
//! // A read-only view is not a DevicePtrMut.
//! e.htod_f32_into(&[1.0], &mut buffer.slice(0..1)).unwrap();
//! ```
//!
//! ```compile_fail,E0502
//! use memra_engine::Engine;
//! let e = Engine::new(0).unwrap();
//! let mut buffer = e.zeros(4).unwrap();
//! // The same buffer as the destination and the source of one copy.
//! e.copy_into(&mut buffer, 0, &buffer, 4).unwrap();
//! ```
//!
//! ```compile_fail,E0499
//! use memra_engine::Engine;
//! let e = Engine::new(0).unwrap();
//! let mut buffer = e.zeros(4).unwrap();
//! let mut low = buffer.slice_mut(0..2);
//! let high = buffer.slice_mut(2..4);
//! e.htod_f32_into(&[1.0, 2.0], &mut low).unwrap();
//! drop(high);
//! ```
//!
//! ```compile_fail,E0277
//! use memra_engine::Engine;
//! let e = Engine::new(0).unwrap();
//! let table = e.htod_u64(&[0, 0, 0]).unwrap();
//! // A u64 buffer is not an f32 one.
//! e.dtoh(&table).unwrap();
//! ```
//!
//! ```compile_fail,E0277
//! // Only this crate's buffers are buffers: an address the library would trust cannot be
//! // forged by implementing the traits.
//! struct Forged;
//! impl memra_engine::DevicePtr<f32> for Forged {}
//! ```
//!
//! ```compile_fail,E0597
//! use memra_engine::{DevicePtr, Engine};
//! let e = Engine::new(0).unwrap();
//! let stream = e.stream();
//! let guard;
//! {
//!     let buffer = e.zeros(4).unwrap();
//!     guard = buffer.device_ptr(&stream).1;
//! }
//! drop(guard);
//! ```
//!
//! - A [`CudaGraph`] keeps every buffer its operations were given alive until it is dropped;
//!   buffers allocated during the capture live as long as the graph, as the library requires.
//!
//! # What they cannot guarantee: pointer tables
//!
//! The packed operations and the per-row conv and scan read device addresses out of pointer
//! tables, at execution time and at every graph replay. The library cannot check them and
//! neither can these bindings: a table must hold addresses obtained with
//! [`DevicePtr::device_ptr`] from buffers of the same engine that are still alive (and large
//! enough for the shape) whenever an operation or replay that reads the table runs. This is the
//! contract memra-engine's own API has; a table that breaks it makes the library read or write
//! memory it does not own.
//!
//! The operations that take a state or ring buffer directly (memra-engine 0.72's
//! single-sequence [`Engine::ssm_conv1d_fused_decode`], [`Engine::gdn_scan_s128`],
//! [`Engine::gdn_scan_s128_view`], and [`Engine::copy_into`] / [`Engine::clone_dtod`]) read no
//! table: the buffer itself is the argument, checked like any other.
//!
//! # Crate layout
//!
//! `memra-sys` holds the raw declarations generated by bindgen from `abi/memra.h`;
//! `memra-cudarc` (imported as `cudarc`) re-exports the buffer types under the
//! `cudarc::driver` paths memra-engine's callers use.
#![deny(missing_docs)]

mod buffer;
mod engine;
mod error;
mod graph;
mod lock;
mod ops;
mod shared;
mod verify;

pub use buffer::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrGuard, DevicePtrMut,
    DeviceSlice, Elem, SyncOnDrop,
};
pub use engine::{
    abi_version, check_library_abi, gdn_journal_len, version_string, Backend, Engine,
    EngineOptions, Gpu, HEADER_ABI_VERSION,
};
pub use error::{status_of, CaptureError, Error, Result, Status, StepError};
pub use graph::{CudaGraph, Graph};
pub use verify::{HeadOrder, VerifyArgs, VerifyMode};
