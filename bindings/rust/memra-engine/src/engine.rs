//! The engine: creation (with the ABI version check), the stream handle, buffers and copies, and
//! graph capture. It sits on top of the buffers (buffer.rs), the graphs (graph.rs) and the state
//! they share (shared.rs); the operations (ops.rs, verify.rs) extend it.

use std::any::Any;
use std::error::Error as StdError;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::mem;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use memra_sys as sys;

use crate::buffer::sealed::{ElemImpl, RawBuf};
use crate::buffer::{download, upload, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, Elem};
use crate::error::{check, Error, Res, Result, Status};
use crate::graph::CudaGraph;
use crate::lock::LockGuard;
use crate::shared::{Alloc, CopyScratch, Owner, Shared, State};

/// Which implementation an engine runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CUDA when a device is usable at the requested ordinal, otherwise the CPU. The
    /// environment variable `MEMRA_BACKEND=cpu|cuda|auto` replaces this choice unless
    /// [`EngineOptions::ignore_env`] is set.
    Auto,
    /// The CUDA backend; creation fails with [`Status::NoDevice`] when no device is usable.
    Cuda,
    /// The CPU reference backend.
    Cpu,
}

impl Backend {
    fn code(self) -> sys::MemraBackend {
        match self {
            Backend::Auto => sys::MEMRA_BACKEND_AUTO,
            Backend::Cuda => sys::MEMRA_BACKEND_CUDA,
            Backend::Cpu => sys::MEMRA_BACKEND_CPU,
        }
    }

    fn from_code(code: sys::MemraBackend) -> Option<Backend> {
        match code {
            sys::MEMRA_BACKEND_AUTO => Some(Backend::Auto),
            sys::MEMRA_BACKEND_CUDA => Some(Backend::Cuda),
            sys::MEMRA_BACKEND_CPU => Some(Backend::Cpu),
            _ => None,
        }
    }
}

/// How [`Engine::with_options`] makes an engine. `EngineOptions::default()` is what
/// [`Engine::new`]`(0)` uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    /// The backend to use. Default [`Backend::Auto`].
    pub backend: Backend,
    /// The CUDA device ordinal (the CPU backend ignores it). Default 0.
    pub device_ordinal: usize,
    /// Do not let the `MEMRA_BACKEND` environment variable override [`Backend::Auto`]
    /// (`MEMRA_ENGINE_FLAG_IGNORE_ENV`). Default false.
    pub ignore_env: bool,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            backend: Backend::Auto,
            device_ordinal: 0,
            ignore_env: false,
        }
    }
}

/// The engine's device handle, memra-engine's public `gpu` field: callers write
/// `e.gpu.stream()`.
pub struct Gpu {
    stream: Arc<CudaStream>,
}

impl Gpu {
    /// The stream every operation of the engine is ordered on.
    pub fn stream(&self) -> Arc<CudaStream> {
        self.stream.clone()
    }

    /// The same stream, borrowed (libmemra has one stream per engine).
    pub fn main_stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu").field("stream", &self.stream).finish()
    }
}

/// An engine: one backend, one device, one stream (`MemraEngine`), with memra-engine's
/// methods.
///
/// It is `Send` and `Sync`: every call locks the engine for its duration, because the library
/// requires calls on one engine not to overlap; two threads using one engine take turns.
/// Buffers, streams and graphs hold the engine's shared state, not a borrow of the `Engine`
/// value: they may outlive it, and the library's engine is destroyed after the last of them.
///
/// ```
/// fn shared_between_threads<T: Send + Sync>() {}
/// shared_between_threads::<memra_engine::Engine>();
/// shared_between_threads::<memra_engine::CudaSlice<f32>>();
/// ```
pub struct Engine {
    /// The device handle; `e.gpu.stream()` is the engine's stream, as in memra-engine.
    pub gpu: Gpu,
    shared: Arc<Shared>,
    backend: Backend,
}

/// The ABI version of the loaded library, `(major << 16) | minor` (`memra_abi_version`).
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, callable from any thread at any time.
    unsafe { sys::memra_abi_version() }
}

/// The loaded library's version, `"MAJOR.MINOR.PATCH"` (`memra_version_string`).
pub fn version_string() -> &'static str {
    // SAFETY: the library returns a static NUL-terminated string, never NULL.
    let version = unsafe { CStr::from_ptr(sys::memra_version_string()) };
    version.to_str().unwrap_or("<not UTF-8>")
}

/// The ABI version of the header these bindings were generated from (`MEMRA_ABI_VERSION`).
pub const HEADER_ABI_VERSION: u32 = sys::MEMRA_ABI_VERSION;

/// Accepts a library of ABI `library` for bindings of ABI `header`: equal majors and a library
/// minor at least the header's.
fn check_abi(library: u32, header: u32) -> Res<()> {
    let (lib_major, lib_minor) = (library >> 16, library & 0xffff);
    let (hdr_major, hdr_minor) = (header >> 16, header & 0xffff);
    if lib_major == hdr_major && lib_minor >= hdr_minor {
        return Ok(());
    }
    Err(Error::new(
        Status::AbiMismatch,
        format!(
            "memra_engine: the loaded libmemra implements ABI {}.{} but these bindings were \
             generated for ABI {}.{}; the major versions must be equal and the library's minor \
             at least {} (load a matching libmemra.so.{})",
            lib_major, lib_minor, hdr_major, hdr_minor, hdr_minor, hdr_major
        ),
    ))
}

/// Checks that the loaded library implements the ABI these bindings were generated for; every
/// engine constructor does this first.
pub fn check_library_abi() -> Result<()> {
    Ok(check_abi(abi_version(), HEADER_ABI_VERSION)?)
}

/// The length in f32 elements of one sequence's journal for journal-mode verifies of up to
/// `t_max` rows of the given shape (`memra_gdn_journal_len`). A zero-filled journal of that
/// length is empty.
pub fn gdn_journal_len(d_state: usize, num_k: usize, num_v: usize, t_max: usize) -> Result<usize> {
    let mut len = 0usize;
    // SAFETY: plain values and a valid out pointer.
    check(unsafe { sys::memra_gdn_journal_len(d_state, num_k, num_v, t_max, &mut len) })?;
    Ok(len)
}

/// Element counts of `dims` multiplied, or an INVALID_ARGUMENT error naming `what` on overflow.
pub(crate) fn elements(func: &str, what: &str, dims: &[usize]) -> Res<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: the element count of {} = {:?} overflows usize",
                    func, what, dims
                ),
            )
        })
}

/// The typed copy and allocation methods, one line each: new buffers from host data
/// (`upload_new`), new buffers of a length (`alloc_buf`, with the initialisation), host
/// vectors of buffers (`download_buf`) and host data into buffers (`upload_into`). Errors
/// name each method as `Engine::<name>`.
macro_rules! copies {
    (
        upload_new { $( $(#[$d1:meta])* $new:ident: $t1:ty; )* }
        alloc_buf { $( $(#[$d2:meta])* $alloc:ident: $t2:ty = $init:ident; )* }
        download_buf { $( $(#[$d3:meta])* $down:ident: $t3:ty; )* }
        upload_into { $( $(#[$d4:meta])* $into:ident: $t4:ty; )* }
    ) => {
        $(
            $(#[$d1])*
            pub fn $new(&self, src: &[$t1]) -> Result<CudaSlice<$t1>> {
                Ok(self.upload_new(concat!("Engine::", stringify!($new)), src)?)
            }
        )*
        $(
            $(#[$d2])*
            pub fn $alloc(&self, len: usize) -> Result<CudaSlice<$t2>> {
                Ok(self.alloc_buf(len, sys::$init)?)
            }
        )*
        $(
            $(#[$d3])*
            pub fn $down(&self, src: &impl DevicePtr<$t3>) -> Result<Vec<$t3>> {
                Ok(self.download_buf(concat!("Engine::", stringify!($down)), src)?)
            }
        )*
        $(
            $(#[$d4])*
            pub fn $into(&self, src: &[$t4], dst: &mut impl DevicePtrMut<$t4>) -> Result<()> {
                Ok(self.upload_into(concat!("Engine::", stringify!($into)), src, dst)?)
            }
        )*
    };
}

impl Engine {
    /// An engine on CUDA device `ordinal`, or on the CPU when no device is usable there (backend
    /// AUTO). `MEMRA_BACKEND=cpu` selects the CPU backend and `MEMRA_BACKEND=cuda` insists on
    /// CUDA. Refuses a library whose ABI does not match these bindings.
    pub fn new(ordinal: usize) -> Result<Engine> {
        Engine::with_options(&EngineOptions {
            device_ordinal: ordinal,
            ..EngineOptions::default()
        })
    }

    /// An engine made as `options` say, on a stream of its own.
    pub fn with_options(options: &EngineOptions) -> Result<Engine> {
        // SAFETY: a NULL stream asks the library for a stream of its own.
        Ok(unsafe { Engine::create(options, ptr::null_mut()) }?)
    }

    /// An engine that enqueues all its work on the host's `cudaStream_t` `stream`, so that the
    /// library's operations are ordered with the host's own work on that stream. The host
    /// keeps ownership: the stream is never destroyed by the engine.
    ///
    /// # Safety
    /// `stream` must be a valid CUDA stream of the device `options.device_ordinal` names, and
    /// stay alive until the engine's last buffer, stream handle and graph are dropped (that is
    /// when the library's engine is destroyed). The CPU backend refuses a stream.
    pub unsafe fn with_stream(options: &EngineOptions, stream: *mut c_void) -> Result<Engine> {
        Ok(Engine::create(options, stream)?)
    }

    /// [`Engine::with_stream`] on CUDA device `ordinal`, backend CUDA (a host stream means a
    /// CUDA host).
    ///
    /// # Safety
    /// As for [`Engine::with_stream`].
    pub unsafe fn new_on_stream(ordinal: usize, stream: *mut c_void) -> Result<Engine> {
        Engine::with_stream(
            &EngineOptions {
                backend: Backend::Cuda,
                device_ordinal: ordinal,
                ignore_env: true,
            },
            stream,
        )
    }

    unsafe fn create(options: &EngineOptions, stream: *mut c_void) -> Res<Engine> {
        check_abi(abi_version(), HEADER_ABI_VERSION)?;
        let ordinal = i32::try_from(options.device_ordinal).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "memra_engine::Engine: device ordinal {} does not fit the C ABI's int32_t",
                    options.device_ordinal
                ),
            )
        })?;
        let mut raw_options = sys::MemraEngineOptions {
            struct_size: 0,
            backend: sys::MEMRA_BACKEND_AUTO,
            device_ordinal: 0,
            stream: ptr::null_mut(),
            flags: 0,
        };
        check(sys::memra_engine_options_init(&mut raw_options))?;
        raw_options.backend = options.backend.code();
        raw_options.device_ordinal = ordinal;
        raw_options.stream = stream;
        if options.ignore_env {
            raw_options.flags |= u64::from(sys::MEMRA_ENGINE_FLAG_IGNORE_ENV);
        }
        let mut raw = ptr::null_mut();
        check(sys::memra_engine_create(&raw_options, &mut raw))?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "memra_engine_create returned OK but no engine".to_string(),
            )
        })?;
        // From here on the engine is destroyed on every error path, with its shared state.
        let shared = Arc::new(Shared::new(raw));
        let mut backend = sys::MEMRA_BACKEND_AUTO;
        check(sys::memra_engine_backend(raw.as_ptr(), &mut backend))?;
        let backend = match Backend::from_code(backend) {
            Some(b) if b != Backend::Auto => b,
            _ => {
                return Err(Error::new(
                    Status::Internal,
                    format!("memra_engine_backend reported backend {}", backend),
                ))
            }
        };
        let mut raw_stream = ptr::null_mut();
        check(sys::memra_engine_stream(raw.as_ptr(), &mut raw_stream))?;
        Ok(Engine {
            gpu: Gpu {
                stream: Arc::new(CudaStream::new(shared.clone(), raw_stream, backend)),
            },
            shared,
            backend,
        })
    }

    pub(crate) fn raw(&self) -> *mut sys::MemraEngine {
        self.shared.raw.as_ptr()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The backend the engine runs on ([`Backend::Cuda`] or [`Backend::Cpu`], never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The stream the engine's operations are ordered on (the same as `e.gpu.stream()`).
    pub fn stream(&self) -> Arc<CudaStream> {
        self.gpu.stream()
    }

    /// Waits until every operation enqueued on the engine has finished, and reports a device
    /// fault any of them caused.
    pub fn synchronize(&self) -> Result<()> {
        let _guard = self.shared.lock();
        // SAFETY: a live engine, its lock held.
        Ok(check(unsafe { sys::memra_engine_synchronize(self.raw()) })?)
    }

    /// Locks the engine for one call.
    pub(crate) fn lock(&self) -> LockGuard<'_> {
        self.shared.lock()
    }

    /// True while a graph capture runs on this engine.
    pub(crate) fn capturing(&self, guard: &LockGuard<'_>) -> bool {
        self.shared.state(guard).borrow().capture.is_some()
    }

    /// Wraps an allocation the library just made for this engine.
    fn adopt<T: Elem>(&self, guard: &LockGuard<'_>, ptr: *mut c_void, len: usize) -> CudaSlice<T> {
        let graph = self
            .shared
            .state(guard)
            .borrow()
            .capture
            .as_ref()
            .map(|c| c.handle().clone());
        CudaSlice::new(
            Alloc {
                shared: self.shared.clone(),
                ptr,
                owner: Owner::Library,
                graph,
                freed: false,
            },
            len,
        )
    }

    /// A buffer of no elements: the library allocates none, operations receive `{NULL, 0}`.
    fn empty<T: Elem>(&self) -> CudaSlice<T> {
        CudaSlice::new(
            Alloc {
                shared: self.shared.clone(),
                ptr: ptr::null_mut(),
                owner: Owner::Empty,
                graph: None,
                freed: false,
            },
            0,
        )
    }

    /// Checks that `buf`, passed as parameter `name` of `func`, may be handed to the library:
    /// it belongs to this engine and is still allocated. Inside a capture, the graph being
    /// captured takes a reference to the allocation, so that the buffer outlives every replay.
    pub(crate) fn arg<'b>(
        &self,
        guard: &LockGuard<'_>,
        func: &str,
        name: &str,
        buf: RawBuf<'b>,
    ) -> Res<RawBuf<'b>> {
        if !Arc::ptr_eq(&buf.alloc.shared, &self.shared) {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: parameter '{}': the buffer belongs to another engine",
                    func, name
                ),
            ));
        }
        if buf.alloc.released() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: parameter '{}': the buffer was allocated during a graph capture that \
                     failed, and the library released it with the capture",
                    func, name
                ),
            ));
        }
        if let Some(capture) = self.shared.state(guard).borrow_mut().capture.as_mut() {
            capture.retain(buf.alloc);
        }
        Ok(buf)
    }

    fn alloc_buf<T: Elem>(&self, len: usize, init: sys::MemraAllocInit) -> Res<CudaSlice<T>> {
        let guard = self.lock();
        if len == 0 {
            return Ok(self.empty());
        }
        // SAFETY: a live engine, its lock held; the library writes a new allocation or nothing.
        let (code, ptr) = unsafe { T::alloc(self.raw(), len, init) };
        check(code)?;
        if ptr.is_null() {
            return Err(Error::new(
                Status::Internal,
                "the library reported an allocation without an address".to_string(),
            ));
        }
        Ok(self.adopt(&guard, ptr, len))
    }

    fn upload_new<T: Elem>(&self, func: &str, src: &[T]) -> Res<CudaSlice<T>> {
        let guard = self.lock();
        if src.is_empty() {
            return Ok(self.empty());
        }
        if self.capturing(&guard) {
            // The allocation would belong to the graph for nothing: refuse as the copy would.
            return self.refuse_host_copy(&guard, func, "copying host data into a new buffer");
        }
        let buf = self.alloc_buf::<T>(src.len(), sys::MEMRA_ALLOC_INIT_UNINIT)?;
        // SAFETY: a live engine, its lock held; `buf` holds exactly src.len() elements.
        unsafe { upload(self.raw(), src, &buf.alloc_raw()) }?;
        Ok(buf)
    }

    /// Refuses a host copy inside a capture the way the library does: the capture fails.
    fn refuse_host_copy<R>(&self, guard: &LockGuard<'_>, func: &str, what: &str) -> Res<R> {
        let error = Error::new(
            Status::CaptureError,
            format!(
                "{}: {} is not allowed inside a graph capture step (a graph must not bake host \
                 data in)",
                func, what
            ),
        );
        if let Some(capture) = self.shared.state(guard).borrow_mut().capture.as_mut() {
            if capture.failure.is_none() {
                capture.failure = Some(error.clone());
            }
        }
        Err(error)
    }

    fn upload_into<T: Elem, D: DevicePtrMut<T> + ?Sized>(
        &self,
        func: &str,
        src: &[T],
        dst: &mut D,
    ) -> Res<()> {
        let guard = self.lock();
        let dst = self.arg(&guard, func, "dst", dst.raw())?;
        // SAFETY: a live engine, its lock held, a host slice read during the call, and a
        // buffer of this engine described by its true address and length.
        unsafe { upload(self.raw(), src, &dst) }
    }

    fn download_buf<T: Elem, S: DevicePtr<T> + ?Sized>(&self, func: &str, src: &S) -> Res<Vec<T>> {
        let guard = self.lock();
        let src = self.arg(&guard, func, "src", src.raw())?;
        let mut out = vec![T::default(); src.len];
        // SAFETY: as in upload_into; `out` holds exactly src.len elements.
        unsafe { download(self.raw(), &src, &mut out) }?;
        Ok(out)
    }

    copies! {
        upload_new {
            /// A new buffer holding a copy of `src` (`memra_htod_f32`). Not allowed inside a
            /// graph step (a graph must not bake host data in).
            htod: f32;
            /// A new buffer holding a copy of the u64 values `src`, for example a pointer table.
            htod_u64: u64;
            /// A new buffer holding a copy of the u32 values `src`, for example accepted counts.
            htod_u32: u32;
            /// A new buffer holding a copy of the i32 values `src` (stored through the library's
            /// u32 buffers, bits unchanged).
            htod_i32: i32;
        }
        alloc_buf {
            /// A new buffer of `len` zeros (`memra_alloc_f32`, zeroed). `len == 0` gives an
            /// empty buffer without allocating.
            zeros: f32 = MEMRA_ALLOC_INIT_ZEROED;
            /// A new buffer of `len` u64 zeros (`memra_alloc_u64`, zeroed).
            zeros_u64: u64 = MEMRA_ALLOC_INIT_ZEROED;
            /// A new buffer of `len` u32 zeros (`memra_alloc_u32`, zeroed).
            alloc_u32_zeroed: u32 = MEMRA_ALLOC_INIT_ZEROED;
            /// A new buffer of `len` u32 elements with unspecified contents (`memra_alloc_u32`).
            alloc_u32: u32 = MEMRA_ALLOC_INIT_UNINIT;
            /// A new buffer of `len` elements whose contents are unspecified until written
            /// (`memra_alloc_f32`, uninitialised). Any bit pattern is a valid `f32`, so reading
            /// it back is safe, only meaningless.
            uninit: f32 = MEMRA_ALLOC_INIT_UNINIT;
            /// A new buffer of `len` u64 elements with unspecified contents (`memra_alloc_u64`).
            uninit_u64: u64 = MEMRA_ALLOC_INIT_UNINIT;
        }
        download_buf {
            /// Waits for the engine's work, then copies `src` to a new host vector
            /// (`memra_dtoh_f32`).
            dtoh: f32;
            /// [`Engine::dtoh`] of a view (memra-engine's name for it).
            dtoh_view: f32;
            /// Waits for the engine's work, then copies the u64 buffer `src` to the host.
            dtoh_u64: u64;
            /// Waits for the engine's work, then copies the u32 buffer `src` to the host
            /// (`memra_dtoh_u32`).
            dtoh_u32: u32;
            /// Waits for the engine's work, then copies the i32 buffer `src` to the host.
            dtoh_i32: i32;
        }
        upload_into {
            /// Copies `src` into the first `src.len()` elements of `dst`, in stream order: work
            /// enqueued before sees the old contents, work enqueued after the new ones
            /// (`memra_htod_f32_into`).
            htod_f32_into: f32;
            /// Copies u64 values into `dst` in stream order (`memra_htod_u64_into`); this is how
            /// a host rebinds a pointer table between graph replays.
            htod_u64_into: u64;
            /// Copies u32 values into `dst` in stream order (`memra_htod_u32_into`); this is how
            /// a host writes accepted counts between graph replays.
            htod_u32_into: u32;
            /// Copies i32 values into `dst` in stream order.
            htod_i32_into: i32;
        }
    }

    /// Device-to-device copy of the first `len` elements of `src` into `dst[off .. off + len]`,
    /// in stream order and bit for bit (memra-engine's `copy_into`). Graph-capturable.
    ///
    /// The C ABI has no device-to-device copy, so this runs the library's single-sequence conv
    /// with `d_conv = 2` on one row of `len` channels whose ring is `dst[off .. off + len]`:
    /// the step rolls the ring to hold the row, i.e. `src`, unchanged bit for bit (the ring
    /// roll only moves values). It moves about three times the bytes of a plain copy (the conv
    /// also reads scratch weights and writes scratch outputs).
    pub fn copy_into(
        &self,
        dst: &mut impl DevicePtrMut<f32>,
        off: usize,
        src: &impl DevicePtr<f32>,
        len: usize,
    ) -> Result<()> {
        const F: &str = "Engine::copy_into";
        let guard = self.lock();
        let dst = self.arg(&guard, F, "dst", dst.raw())?;
        let src = self.arg(&guard, F, "src", src.raw())?;
        if !matches!(off.checked_add(len), Some(end) if end <= dst.len) {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: parameter 'dst': expected at least off + len = {} + {} elements, got {}",
                    F, off, len, dst.len
                ),
            )
            .into());
        }
        if len > src.len {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: parameter 'src': expected at least len = {} elements, got {}",
                    F, len, src.len
                ),
            )
            .into());
        }
        if len == 0 {
            return Ok(());
        }
        let target = dst.sub::<f32>(off, len).f32_mut();
        Ok(self.copy_words(&guard, target, src.sub::<f32>(0, len).f32())?)
    }

    /// Copies the `src.len` 4-byte words at `src` to `dst` (a checked destination of as many
    /// words), bit for bit: the single-sequence conv with `d_conv = 2` on one row of `src.len`
    /// channels rolls its ring, `dst`, to hold the row.
    pub(crate) fn copy_words(
        &self,
        guard: &LockGuard<'_>,
        dst: sys::MemraSliceMutF32,
        src: sys::MemraSliceF32,
    ) -> Res<()> {
        let len = src.len;
        let scratch = self.copy_scratch(guard, len)?;
        let (w, out) = scratch.views(len);
        // SAFETY: a live engine, its lock held; the conv reads `len` elements of `src`,
        // `2 * len` weights and writes `len` outputs of the scratch, and rolls the `len` ring
        // elements of `dst`, all inside live buffers of this engine.
        check(unsafe { sys::memra_ssm_conv1d_fused_decode(self.raw(), src, dst, w, out, len, 2) })?;
        drop(scratch);
        Ok(())
    }

    /// Sets every element of `dst` to zero bits, in stream order (cudarc's
    /// `CudaStream::memset_zeros`, also callable on [`CudaStream`]). Graph-capturable. It is
    /// built on [`Engine::copy_into`]'s copy, from zeros the engine keeps.
    pub fn memset_zeros<T: Elem>(&self, dst: &mut impl DevicePtrMut<T>) -> Result<()> {
        const F: &str = "CudaStream::memset_zeros";
        let guard = self.lock();
        let dst = self.arg(&guard, F, "dst", dst.raw())?;
        // Every element type is a whole number of 4-byte words.
        let words = elements(
            F,
            "dst in 4-byte words",
            &[dst.len, mem::size_of::<T>() / 4],
        )?;
        if words == 0 {
            return Ok(());
        }
        let zeros = self.zero_source(&guard, words)?;
        let src = zeros.zeros(words);
        let dst = sys::MemraSliceMutF32 {
            ptr: dst.ptr.cast::<f32>(),
            len: words,
        };
        self.copy_words(&guard, dst, src)?;
        drop(zeros);
        Ok(())
    }

    /// Device-to-device copy of the view `src` into the start of `dst` (memra-engine's
    /// `dtod_copy_view`; [`Engine::copy_into`] with `off = 0` and `src.len()` elements).
    pub fn dtod_copy_view(
        &self,
        src: &impl DevicePtr<f32>,
        dst: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let len = src.len();
        self.copy_into(dst, 0, src, len)
    }

    /// Device-to-device copy of all of `src` into `dst[off .. off + src.len()]`
    /// (memra-engine's `dtod_copy_into`; [`Engine::copy_into`] with `src.len()` elements).
    pub fn dtod_copy_into(
        &self,
        src: &impl DevicePtr<f32>,
        dst: &mut impl DevicePtrMut<f32>,
        off: usize,
    ) -> Result<()> {
        let len = src.len();
        self.copy_into(dst, off, src, len)
    }

    /// [`Engine::copy_into`] from a view (the older memra-engine name).
    pub fn copy_view_into(
        &self,
        dst: &mut impl DevicePtrMut<f32>,
        off: usize,
        src: &impl DevicePtr<f32>,
        len: usize,
    ) -> Result<()> {
        self.copy_into(dst, off, src, len)
    }

    /// A new buffer holding a device-to-device copy of `src` (memra-engine's `clone_dtod`:
    /// a real copy, not a second handle). Inside a graph capture the new buffer belongs to the
    /// graph, and every replay copies into it again.
    pub fn clone_dtod(&self, src: &impl DevicePtr<f32>) -> Result<CudaSlice<f32>> {
        let mut out = self.uninit(src.len())?;
        self.copy_into(&mut out, 0, src, src.len())?;
        Ok(out)
    }

    /// Scratch for a copy of `len` elements (see [`Scratch::views`]).
    fn copy_scratch(&self, guard: &LockGuard<'_>, len: usize) -> Res<Scratch> {
        self.scratch(guard, ScratchKind::Copy, len)
    }

    /// `words` f32 zeros to copy from.
    fn zero_source(&self, guard: &LockGuard<'_>, words: usize) -> Res<Scratch> {
        self.scratch(guard, ScratchKind::Zeros, words)
    }

    /// The engine's scratch of `kind` for `len` elements, grown outside captures; inside a
    /// capture that needs more, scratch allocated for the call (it belongs to the graph).
    fn scratch(&self, guard: &LockGuard<'_>, kind: ScratchKind, len: usize) -> Res<Scratch> {
        const F: &str = "Engine::copy_into";
        // A copy's scratch holds weights and outputs (3 per element); zeros are only read, so
        // they are allocated zeroed and never written.
        let (parts, init) = match kind {
            ScratchKind::Copy => (3, sys::MEMRA_ALLOC_INIT_UNINIT),
            ScratchKind::Zeros => (1, sys::MEMRA_ALLOC_INIT_ZEROED),
        };
        {
            let mut state = self.shared.state(guard).borrow_mut();
            if let Some(s) = kind.of(&mut state).as_ref().filter(|s| s.cap >= len) {
                return Ok(Scratch::Engine(s.ptr, s.cap));
            }
        }
        if self.capturing(guard) {
            let need = elements(F, "the copy's scratch", &[len, parts])?;
            let buf = self.alloc_buf::<f32>(need, init)?;
            return Ok(Scratch::Call(buf, len));
        }
        // Grow geometrically so that a run of growing copies allocates O(log n) times.
        let cap = len.max(1 << 16).next_power_of_two().max(len);
        let elems = elements(F, "the copy's scratch", &[cap, parts])?;
        // SAFETY: a live engine, its lock held.
        let (code, ptr) = unsafe { <f32 as ElemImpl>::alloc(self.raw(), elems, init) };
        check(code)?;
        let ptr = NonNull::new(ptr.cast::<f32>()).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "the library reported an allocation without an address".to_string(),
            )
        })?;
        // The previous scratch stays allocated (graphs captured with it still use it) until
        // the engine is destroyed.
        *kind.of(&mut self.shared.state(guard).borrow_mut()) = Some(CopyScratch { ptr, cap });
        Ok(Scratch::Engine(ptr, cap))
    }

    /// A buffer over device memory the host owns (cudarc's device pointers, for a host with its
    /// own allocator). The buffer is never freed by these bindings or by the library; it is
    /// used like any other buffer of this engine (operations, copies, pointer tables, graphs).
    ///
    /// # Safety
    /// `ptr` must be the address of `len` elements of `T` in memory this engine's operations
    /// may access: device memory of the engine's device on CUDA, host memory on the CPU
    /// backend. The memory must stay allocated, and must not be used by the host in a way that
    /// races with the engine's stream, for as long as the returned buffer, views of it, or any
    /// graph whose capture used it are alive. Two wrappers of overlapping memory must not be
    /// passed to one operation as an input and an output, or as two outputs.
    pub unsafe fn wrap_device_ptr<T: Elem>(&self, ptr: u64, len: usize) -> Result<CudaSlice<T>> {
        const F: &str = "Engine::wrap_device_ptr";
        let elem = mem::size_of::<T>() as u64;
        let bytes = (len as u64).checked_mul(elem);
        let problem = if ptr == 0 && len > 0 {
            Some("expected a non-NULL address for a non-empty buffer".to_string())
        } else if ptr & (elem - 1) != 0 {
            // Element sizes are powers of two.
            Some(format!(
                "expected a {}-byte aligned address, got {:#x}",
                elem, ptr
            ))
        } else if bytes.and_then(|b| ptr.checked_add(b)).is_none() {
            Some(format!(
                "{} elements at {:#x} run past the end of the address space",
                len, ptr
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("{}: parameter 'ptr': {}", F, problem),
            )
            .into());
        }
        let raw_ptr = ptr as usize as *mut c_void;
        Ok(CudaSlice::new(
            Alloc {
                shared: self.shared.clone(),
                ptr: raw_ptr,
                owner: Owner::Host,
                graph: None,
                freed: false,
            },
            len,
        ))
    }
}

/// Which of the engine's scratch buffers.
#[derive(Clone, Copy)]
enum ScratchKind {
    /// The conv weights and outputs a copy writes and ignores.
    Copy,
    /// The zeros `memset_zeros` copies from.
    Zeros,
}

impl ScratchKind {
    /// The engine's scratch of this kind.
    fn of(self, state: &mut State) -> &mut Option<CopyScratch> {
        match self {
            ScratchKind::Copy => &mut state.copy_scratch,
            ScratchKind::Zeros => &mut state.zeros,
        }
    }
}

/// The scratch of one copy.
enum Scratch {
    /// The engine's (`ptr`, `cap`).
    Engine(NonNull<f32>, usize),
    /// One allocated for this call inside a capture, with the copy's length.
    Call(CudaSlice<f32>, usize),
}

impl Scratch {
    /// The first `len` elements, as a copy's source.
    fn zeros(&self, len: usize) -> sys::MemraSliceF32 {
        let base = match self {
            Scratch::Engine(ptr, _) => ptr.as_ptr(),
            Scratch::Call(buf, _) => buf.alloc().ptr.cast::<f32>(),
        };
        sys::MemraSliceF32 { ptr: base, len }
    }

    /// The weights (`2 * len`) and outputs (`len`) of a copy of `len` elements.
    fn views(&self, len: usize) -> (sys::MemraSliceF32, sys::MemraSliceMutF32) {
        let (base, cap) = match self {
            Scratch::Engine(ptr, cap) => (ptr.as_ptr(), *cap),
            Scratch::Call(buf, n) => (buf.alloc().ptr.cast::<f32>(), *n),
        };
        // Weights first (2 * cap), outputs after them (cap); only the first `len` of each part
        // are used. wrapping_add: an address the library dereferences, never Rust.
        (
            sys::MemraSliceF32 {
                ptr: base,
                len: 2 * len,
            },
            sys::MemraSliceMutF32 {
                ptr: base.wrapping_add(2 * cap),
                len,
            },
        )
    }
}

impl CudaStream {
    /// Sets every element of `dst` to zero bits, in stream order (cudarc's name; see
    /// [`Engine::memset_zeros`]).
    pub fn memset_zeros<T: Elem>(&self, dst: &mut impl DevicePtrMut<T>) -> Result<()> {
        self.engine().memset_zeros(dst)
    }

    /// The engine this stream belongs to, as a value (it shares the engine's state).
    fn engine(&self) -> Engine {
        Engine {
            gpu: Gpu {
                stream: Arc::new(CudaStream::new(
                    self.shared.clone(),
                    self.cu_stream(),
                    self.backend,
                )),
            },
            shared: self.shared.clone(),
            backend: self.backend,
        }
    }
}

impl<T> CudaSlice<T> {
    /// The whole allocation as an operation argument.
    pub(crate) fn alloc_raw(&self) -> RawBuf<'_> {
        crate::buffer::sealed::Buffer::raw(self)
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("gpu", &self.gpu)
            .finish()
    }
}

// Graph capture: the machinery is graph.rs's; the engine binds itself into the host's step.
impl Engine {
    /// Captures `step` into a replayable graph and returns it with its keeper, as
    /// memra-engine does: `(CudaGraph, Vec<Box<dyn Any + Send>>)`. The keeper holds what the
    /// graph's replays use; the graph holds the same, so it is safe to drop either first.
    ///
    /// `step` runs three times (`memra_graph_capture`): twice eagerly as warm-ups, then once
    /// while its operations are recorded. Buffers it allocates belong to the graph. It must not
    /// copy between host and device, synchronise or capture again; it may return any error
    /// with `?`, which aborts the capture (the step's error becomes the returned
    /// [`CaptureError`](crate::CaptureError)'s source). A panic in `step` aborts the capture and is resumed after the
    /// library has cleaned up. On failure the engine stays usable and no graph exists.
    ///
    /// The engine is locked for the whole capture: other threads using it wait.
    pub fn capture_graph_retained<F>(
        &self,
        mut step: F,
    ) -> Result<(CudaGraph, Vec<Box<dyn Any + Send>>)>
    where
        F: FnMut(&Engine) -> std::result::Result<(), Box<dyn StdError>>,
    {
        crate::graph::capture_retained(self.shared(), || step(self))
    }

    /// Captures `step` into a replayable graph ([`Engine::capture_graph_retained`] without the
    /// keeper: the graph keeps what its replays use alive by itself).
    pub fn capture_graph<F>(&self, step: F) -> Result<CudaGraph>
    where
        F: FnMut(&Engine) -> std::result::Result<(), Box<dyn StdError>>,
    {
        self.capture_graph_retained(step)
            .map(|(graph, _keeper)| graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_check_accepts_equal_and_newer_minor() {
        assert!(check_abi(0x0001_0000, 0x0001_0000).is_ok());
        assert!(check_abi(0x0001_0003, 0x0001_0002).is_ok());
    }

    #[test]
    fn abi_check_refuses_older_minor_and_other_major() {
        for &(library, header) in &[
            (0x0001_0001u32, 0x0001_0002u32),
            (0x0002_0000, 0x0001_0000),
            (0x0000_0005, 0x0001_0000),
        ] {
            let err = check_abi(library, header).unwrap_err();
            assert_eq!(err.status(), Status::AbiMismatch);
            assert!(
                err.message()
                    .contains(&format!("ABI {}.{}", library >> 16, library & 0xffff)),
                "message names the library's ABI: {}",
                err
            );
        }
    }

    #[test]
    fn loaded_library_matches_the_header() {
        check_library_abi().expect("the library built next to these bindings matches them");
        let abi = abi_version();
        let prefix = format!("{}.{}.", abi >> 16, abi & 0xffff);
        assert!(
            version_string().starts_with(&prefix),
            "version {} disagrees with ABI {:#x}",
            version_string(),
            abi
        );
    }

    #[test]
    fn element_counts_refuse_overflow() {
        assert_eq!(elements("f", "x", &[3, 4, 5]).unwrap(), 60);
        let err = elements("f", "the state", &[usize::MAX, 2]).unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(err.message().contains("the state"), "{}", err);
    }
}
