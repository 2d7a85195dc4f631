//! The engine: creation (with the ABI version check), buffers and copies.

use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use memra_sys as sys;

use crate::buffer::sealed::RawBuf;
use crate::buffer::{Alloc, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use crate::error::{check, Error, Result, Status};
use crate::graph::Capture;

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

/// What the engine's buffers and graphs share with it: the handle, and the capture state.
pub(crate) struct Shared {
    pub(crate) raw: NonNull<sys::MemraEngine>,
    /// Set while `memra_graph_capture` runs a step of this engine.
    pub(crate) capturing: Cell<bool>,
    /// Graphs dropped while a capture ran (the library refuses to destroy a graph then); they
    /// are destroyed when the capture ends, or with the engine.
    pub(crate) deferred_graphs: RefCell<Vec<NonNull<sys::MemraGraph>>>,
}

impl Shared {
    /// Destroys the graphs whose destruction a capture deferred.
    pub(crate) fn destroy_deferred_graphs(&self) {
        let graphs = std::mem::take(&mut *self.deferred_graphs.borrow_mut());
        for graph in graphs {
            // SAFETY: a live graph of this live engine, no capture running, destroyed once.
            // Destruction only fails for bad handles, which these are not.
            unsafe {
                sys::memra_graph_destroy(self.raw.as_ptr(), graph.as_ptr());
            }
        }
    }
}

/// An engine: one backend, one device, one stream (`MemraEngine`).
///
/// Buffers ([`CudaSlice`]), streams and graphs borrow the engine, so none of them can outlive
/// it. The engine may be moved to another thread when nothing borrows it (`Send`), but it is not
/// `Sync`: the library requires calls on one engine not to overlap, so only one thread at a
/// time can use it.
///
/// ```compile_fail,E0277
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<memra_engine::Engine>();
/// ```
///
/// A buffer cannot outlive its engine:
///
/// ```compile_fail,E0597
/// use memra_engine::Engine;
/// let buffer;
/// {
///     let engine = Engine::new(0).unwrap();
///     buffer = engine.zeros(4).unwrap();
/// }
/// drop(buffer);
/// ```
pub struct Engine {
    shared: Rc<Shared>,
    backend: Backend,
    stream: *mut c_void,
    pub(crate) capture: RefCell<Option<Capture>>,
}

// SAFETY: the library allows an engine to be used from any thread, one thread at a time. Every
// `Rc` that points at the engine's shared state is held by a value that borrows the engine
// (buffers, views, graphs, streams, none of them `Send`) or by the engine itself, so moving the
// engine, which needs it unborrowed, moves all of its live references along with it.
unsafe impl Send for Engine {}

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
fn check_abi(library: u32, header: u32) -> Result<()> {
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
    check_abi(abi_version(), HEADER_ABI_VERSION)
}

/// The element types buffers hold, with their copy and allocation functions.
pub(crate) trait Elem: Copy + Default {
    unsafe fn alloc(
        e: *mut sys::MemraEngine,
        len: usize,
        init: sys::MemraAllocInit,
    ) -> (sys::MemraStatus, *mut c_void, usize);
    unsafe fn htod(
        e: *mut sys::MemraEngine,
        src: &[Self],
    ) -> (sys::MemraStatus, *mut c_void, usize);
    unsafe fn htod_into(
        e: *mut sys::MemraEngine,
        src: &[Self],
        dst: RawBuf<'_>,
    ) -> sys::MemraStatus;
    unsafe fn dtoh(e: *mut sys::MemraEngine, src: RawBuf<'_>, dst: &mut [Self])
        -> sys::MemraStatus;
}

impl Elem for f32 {
    unsafe fn alloc(
        e: *mut sys::MemraEngine,
        len: usize,
        init: sys::MemraAllocInit,
    ) -> (sys::MemraStatus, *mut c_void, usize) {
        let mut out = sys::MemraSliceMutF32 {
            ptr: ptr::null_mut(),
            len: 0,
        };
        let code = sys::memra_alloc_f32(e, len, init, &mut out);
        (code, out.ptr.cast(), out.len)
    }

    unsafe fn htod(
        e: *mut sys::MemraEngine,
        src: &[f32],
    ) -> (sys::MemraStatus, *mut c_void, usize) {
        let mut out = sys::MemraSliceMutF32 {
            ptr: ptr::null_mut(),
            len: 0,
        };
        let src = sys::MemraSliceF32 {
            ptr: src.as_ptr(),
            len: src.len(),
        };
        let code = sys::memra_htod_f32(e, src, &mut out);
        (code, out.ptr.cast(), out.len)
    }

    unsafe fn htod_into(
        e: *mut sys::MemraEngine,
        src: &[f32],
        dst: RawBuf<'_>,
    ) -> sys::MemraStatus {
        let src = sys::MemraSliceF32 {
            ptr: src.as_ptr(),
            len: src.len(),
        };
        sys::memra_htod_f32_into(e, src, dst.f32_mut())
    }

    unsafe fn dtoh(e: *mut sys::MemraEngine, src: RawBuf<'_>, dst: &mut [f32]) -> sys::MemraStatus {
        let dst = sys::MemraSliceMutF32 {
            ptr: dst.as_mut_ptr(),
            len: dst.len(),
        };
        sys::memra_dtoh_f32(e, src.f32(), dst)
    }
}

impl Elem for u64 {
    unsafe fn alloc(
        e: *mut sys::MemraEngine,
        len: usize,
        init: sys::MemraAllocInit,
    ) -> (sys::MemraStatus, *mut c_void, usize) {
        let mut out = sys::MemraSliceMutU64 {
            ptr: ptr::null_mut(),
            len: 0,
        };
        let code = sys::memra_alloc_u64(e, len, init, &mut out);
        (code, out.ptr.cast(), out.len)
    }

    unsafe fn htod(
        e: *mut sys::MemraEngine,
        src: &[u64],
    ) -> (sys::MemraStatus, *mut c_void, usize) {
        let mut out = sys::MemraSliceMutU64 {
            ptr: ptr::null_mut(),
            len: 0,
        };
        let src = sys::MemraSliceU64 {
            ptr: src.as_ptr(),
            len: src.len(),
        };
        let code = sys::memra_htod_u64(e, src, &mut out);
        (code, out.ptr.cast(), out.len)
    }

    unsafe fn htod_into(
        e: *mut sys::MemraEngine,
        src: &[u64],
        dst: RawBuf<'_>,
    ) -> sys::MemraStatus {
        let src = sys::MemraSliceU64 {
            ptr: src.as_ptr(),
            len: src.len(),
        };
        sys::memra_htod_u64_into(e, src, dst.u64_mut())
    }

    unsafe fn dtoh(e: *mut sys::MemraEngine, src: RawBuf<'_>, dst: &mut [u64]) -> sys::MemraStatus {
        let dst = sys::MemraSliceMutU64 {
            ptr: dst.as_mut_ptr(),
            len: dst.len(),
        };
        sys::memra_dtoh_u64(e, src.u64(), dst)
    }
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
        unsafe { Engine::create(options, ptr::null_mut()) }
    }

    /// An engine that enqueues all its work on the host's `cudaStream_t` `stream`.
    ///
    /// # Safety
    /// `stream` must be a valid CUDA stream of the device `options.device_ordinal` names, and
    /// stay alive until the engine is dropped. The CPU backend refuses a stream.
    pub unsafe fn with_stream(options: &EngineOptions, stream: *mut c_void) -> Result<Engine> {
        Engine::create(options, stream)
    }

    unsafe fn create(options: &EngineOptions, stream: *mut c_void) -> Result<Engine> {
        check_library_abi()?;
        let ordinal = match i32::try_from(options.device_ordinal) {
            Ok(o) => o,
            Err(_) => {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "memra_engine::Engine: device ordinal {} does not fit the C ABI's int32_t",
                        options.device_ordinal
                    ),
                ))
            }
        };
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
        let raw = match NonNull::new(raw) {
            Some(raw) => raw,
            None => {
                return Err(Error::new(
                    Status::Internal,
                    "memra_engine_create returned OK but no engine".to_string(),
                ))
            }
        };
        // From here on the engine is destroyed on every error path by Engine's Drop.
        let mut engine = Engine {
            shared: Rc::new(Shared {
                raw,
                capturing: Cell::new(false),
                deferred_graphs: RefCell::new(Vec::new()),
            }),
            backend: Backend::Cpu,
            stream: ptr::null_mut(),
            capture: RefCell::new(None),
        };
        let mut backend = sys::MEMRA_BACKEND_AUTO;
        check(sys::memra_engine_backend(raw.as_ptr(), &mut backend))?;
        engine.backend = match Backend::from_code(backend) {
            Some(b) if b != Backend::Auto => b,
            _ => {
                return Err(Error::new(
                    Status::Internal,
                    format!("memra_engine_backend reported backend {}", backend),
                ))
            }
        };
        check(sys::memra_engine_stream(raw.as_ptr(), &mut engine.stream))?;
        Ok(engine)
    }

    pub(crate) fn raw(&self) -> *mut sys::MemraEngine {
        self.shared.raw.as_ptr()
    }

    pub(crate) fn shared(&self) -> &Rc<Shared> {
        &self.shared
    }

    pub(crate) fn raw_stream(&self) -> *mut c_void {
        self.stream
    }

    /// The backend the engine runs on ([`Backend::Cuda`] or [`Backend::Cpu`], never `Auto`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The stream the engine's operations are ordered on.
    pub fn stream(&self) -> CudaStream<'_> {
        CudaStream::new(self)
    }

    /// Waits until every operation enqueued on the engine has finished, and reports a device
    /// fault any of them caused.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live engine.
        check(unsafe { sys::memra_engine_synchronize(self.raw()) })
    }

    /// Wraps a buffer the library just allocated for this engine.
    fn adopt<T>(
        &self,
        code: sys::MemraStatus,
        ptr: *mut c_void,
        len: usize,
    ) -> Result<CudaSlice<'_, T>> {
        check(code)?;
        let ptr = match NonNull::new(ptr) {
            Some(p) => p,
            None => {
                return Err(Error::new(
                    Status::Internal,
                    "the library reported an allocation without an address".to_string(),
                ))
            }
        };
        let graph = self.capture.borrow().as_ref().map(|c| c.handle().clone());
        Ok(CudaSlice::new(
            Alloc {
                shared: self.shared.clone(),
                ptr,
                graph,
                freed: false,
            },
            len,
        ))
    }

    /// Checks that `buf`, passed as parameter `name` of `func`, may be handed to the library:
    /// it belongs to this engine and is still allocated. Inside a capture, the graph being
    /// captured takes a reference to the allocation, so that the buffer outlives every replay.
    pub(crate) fn arg<'b>(&self, func: &str, name: &str, buf: RawBuf<'b>) -> Result<RawBuf<'b>> {
        if !Rc::ptr_eq(&buf.alloc.shared, &self.shared) {
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
        if let Some(capture) = self.capture.borrow_mut().as_mut() {
            capture.retain(buf.alloc);
        }
        Ok(buf)
    }

    fn alloc<T: Elem>(&self, len: usize, init: sys::MemraAllocInit) -> Result<CudaSlice<'_, T>> {
        // SAFETY: a live engine; the library writes a new allocation or nothing.
        let (code, ptr, n) = unsafe { T::alloc(self.raw(), len, init) };
        self.adopt(code, ptr, n)
    }

    fn upload<T: Elem>(&self, src: &[T]) -> Result<CudaSlice<'_, T>> {
        // SAFETY: a live engine and a host slice the library reads during the call only.
        let (code, ptr, n) = unsafe { T::htod(self.raw(), src) };
        self.adopt(code, ptr, n)
    }

    fn upload_into<T: Elem, D: DevicePtrMut<T> + ?Sized>(
        &self,
        func: &'static str,
        src: &[T],
        dst: &mut D,
    ) -> Result<()> {
        let dst = self.arg(func, "dst", dst.raw())?;
        // SAFETY: a live engine, a host slice read during the call, and a buffer of this
        // engine described by its true address and length.
        check(unsafe { T::htod_into(self.raw(), src, dst) })
    }

    fn download<T: Elem, S: DevicePtr<T> + ?Sized>(
        &self,
        func: &'static str,
        src: &S,
    ) -> Result<Vec<T>> {
        let src = self.arg(func, "src", src.raw())?;
        let mut out = vec![T::default(); src.len];
        // SAFETY: as in upload_into; `out` holds exactly src.len elements.
        check(unsafe { T::dtoh(self.raw(), src, &mut out) })?;
        Ok(out)
    }

    /// A new buffer holding a copy of `src` (`memra_htod_f32`). Not allowed inside a graph
    /// step (a graph must not bake host data in).
    pub fn htod(&self, src: &[f32]) -> Result<CudaSlice<'_, f32>> {
        self.upload(src)
    }

    /// A new buffer holding a copy of the u64 values `src`, for example a pointer table
    /// (`memra_htod_u64`).
    pub fn htod_u64(&self, src: &[u64]) -> Result<CudaSlice<'_, u64>> {
        self.upload(src)
    }

    /// A new buffer of `len` zeros (`memra_alloc_f32`, zeroed).
    pub fn zeros(&self, len: usize) -> Result<CudaSlice<'_, f32>> {
        self.alloc(len, sys::MEMRA_ALLOC_INIT_ZEROED)
    }

    /// A new buffer of `len` u64 zeros (`memra_alloc_u64`, zeroed).
    pub fn zeros_u64(&self, len: usize) -> Result<CudaSlice<'_, u64>> {
        self.alloc(len, sys::MEMRA_ALLOC_INIT_ZEROED)
    }

    /// A new buffer of `len` elements whose contents are unspecified until written
    /// (`memra_alloc_f32`, uninitialised). Any bit pattern is a valid `f32`, so reading it back
    /// is safe, only meaningless.
    pub fn uninit(&self, len: usize) -> Result<CudaSlice<'_, f32>> {
        self.alloc(len, sys::MEMRA_ALLOC_INIT_UNINIT)
    }

    /// A new buffer of `len` u64 elements with unspecified contents (`memra_alloc_u64`).
    pub fn uninit_u64(&self, len: usize) -> Result<CudaSlice<'_, u64>> {
        self.alloc(len, sys::MEMRA_ALLOC_INIT_UNINIT)
    }

    /// Waits for the engine's work, then copies `src` to a new host vector (`memra_dtoh_f32`).
    pub fn dtoh(&self, src: &impl DevicePtr<f32>) -> Result<Vec<f32>> {
        self.download("Engine::dtoh", src)
    }

    /// Waits for the engine's work, then copies the u64 buffer `src` to the host
    /// (`memra_dtoh_u64`).
    pub fn dtoh_u64(&self, src: &impl DevicePtr<u64>) -> Result<Vec<u64>> {
        self.download("Engine::dtoh_u64", src)
    }

    /// Copies `src` into the first `src.len()` elements of `dst`, in stream order: work
    /// enqueued before sees the old contents, work enqueued after the new ones
    /// (`memra_htod_f32_into`).
    pub fn htod_f32_into(&self, src: &[f32], dst: &mut impl DevicePtrMut<f32>) -> Result<()> {
        self.upload_into("Engine::htod_f32_into", src, dst)
    }

    /// Copies u64 values into `dst` in stream order (`memra_htod_u64_into`); this is how a host
    /// rebinds a pointer table between graph replays.
    pub fn htod_u64_into(&self, src: &[u64], dst: &mut impl DevicePtrMut<u64>) -> Result<()> {
        self.upload_into("Engine::htod_u64_into", src, dst)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.destroy_deferred_graphs();
        // SAFETY: nothing borrows the engine any more, so none of its buffers or graphs is
        // alive (except leaked ones, which the library then refuses to outlive: destroy fails
        // with INVALID_ARGUMENT and the engine leaks, which is safe). The remaining `Rc`s of
        // `shared` are only such leaked ones, which never touch the handle again.
        unsafe {
            sys::memra_engine_destroy(self.raw());
        }
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("stream", &self.stream)
            .finish()
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
}
