//! Engine buffers, views of them, and the traits that hand out their device addresses.
//!
//! A [`CudaSlice`] owns one allocation of an engine and frees it when dropped (through
//! `memra_free`). The allocation itself is reference-counted so that a graph can keep every
//! buffer its operations use alive for as long as the graph can be replayed, even after the
//! host dropped its `CudaSlice`. Nothing in Rust ever forms a reference to the buffer's
//! contents: they are device memory (or, on the CPU backend, memory only the library touches),
//! read and written through the library's copy functions.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::rc::Rc;

use memra_sys as sys;

use crate::engine::{Engine, Shared};
use crate::error::{Error, Result, Status};
use crate::graph::GraphHandle;

/// One allocation made by `memra_alloc_*` or `memra_htod_*`.
pub(crate) struct Alloc {
    pub(crate) shared: Rc<Shared>,
    pub(crate) ptr: NonNull<c_void>,
    /// The graph whose capture made this allocation: the library ties its lifetime to that
    /// graph, so the handle keeps the graph from being destroyed while the buffer is alive.
    pub(crate) graph: Option<Rc<GraphHandle>>,
    /// Set by `CudaSlice::free`, which already called `memra_free`.
    pub(crate) freed: bool,
}

impl Alloc {
    /// True when the library already released this buffer: it was allocated during a capture
    /// that failed, and a failed capture frees what it allocated.
    pub(crate) fn released(&self) -> bool {
        matches!(self.graph, Some(ref g) if g.failed())
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if self.freed || self.released() {
            return;
        }
        // SAFETY: the engine is alive (every owner of an Alloc borrows it), and `ptr` is the
        // start of a buffer it allocated and that has not been freed: this is its only free.
        // The call can only fail when the CUDA runtime refuses to free, which a destructor
        // cannot handle; `CudaSlice::free` reports that status.
        unsafe {
            sys::memra_free(self.shared.raw.as_ptr(), self.ptr.as_ptr());
        }
    }
}

pub(crate) mod sealed {
    use std::rc::Rc;

    use super::Alloc;

    /// A run of elements of one allocation, as the operations pass it to the library.
    pub struct RawBuf<'a> {
        pub(crate) alloc: &'a Rc<Alloc>,
        pub(crate) ptr: *mut u8,
        pub(crate) len: usize,
    }

    /// Implemented by this crate's buffer types only, so that every address and length an
    /// operation passes to the library describes a live allocation of an engine.
    pub trait Buffer<T> {
        /// The allocation, the address of the first element and the number of elements.
        fn raw(&self) -> RawBuf<'_>;
    }
}

use sealed::{Buffer, RawBuf};

/// Keeps a buffer borrowed while the device address [`DevicePtr::device_ptr`] returned is in
/// use. Dropping it does nothing else: every operation of an engine is ordered on the engine's
/// one stream, so there is no event to record.
#[must_use = "the address is meant to be used while the guard is alive"]
pub struct DevicePtrGuard<'a> {
    _borrow: PhantomData<&'a ()>,
}

impl fmt::Debug for DevicePtrGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DevicePtrGuard")
    }
}

/// A buffer whose device address can be read, for example to write it into a pointer table.
///
/// Implemented by [`CudaSlice`], [`CudaView`] and [`CudaViewMut`] only (the trait is sealed).
/// The address is a device address on the CUDA backend and a host address on the CPU backend;
/// either way it is only meaningful to the library.
pub trait DevicePtr<T>: Buffer<T> {
    /// The address of the first element, and a guard that keeps the buffer borrowed while the
    /// address is in use. `stream` is taken for cudarc compatibility only: every buffer is
    /// ordered on its engine's one stream, so there is nothing to synchronise with.
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream<'_>) -> (u64, DevicePtrGuard<'a>) {
        let _ = stream;
        (
            self.raw().ptr as usize as u64,
            DevicePtrGuard {
                _borrow: PhantomData,
            },
        )
    }
}

/// A buffer the library may write: an owned [`CudaSlice`] or a [`CudaViewMut`].
pub trait DevicePtrMut<T>: DevicePtr<T> {
    /// The address of the first element, for writing, and a guard that keeps the buffer
    /// mutably borrowed while the address is in use.
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream<'_>) -> (u64, DevicePtrGuard<'a>) {
        let _ = stream;
        (
            self.raw().ptr as usize as u64,
            DevicePtrGuard {
                _borrow: PhantomData,
            },
        )
    }
}

/// The stream an engine's operations are ordered on (`memra_engine_stream`), as cudarc's
/// `CudaStream`. Obtained from [`Engine::stream`]; it borrows the engine.
pub struct CudaStream<'e> {
    engine: &'e Engine,
}

impl<'e> CudaStream<'e> {
    pub(crate) fn new(engine: &'e Engine) -> CudaStream<'e> {
        CudaStream { engine }
    }

    /// The engine's `cudaStream_t`, or NULL on the CPU backend. Work a host enqueues on it is
    /// ordered with the engine's operations.
    pub fn cu_stream(&self) -> *mut c_void {
        self.engine.raw_stream()
    }

    /// Waits for every operation enqueued on the engine ([`Engine::synchronize`]).
    pub fn synchronize(&self) -> Result<()> {
        self.engine.synchronize()
    }
}

impl fmt::Debug for CudaStream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaStream")
            .field("cu_stream", &self.cu_stream())
            .finish()
    }
}

/// `start..end` of `range` within `0..len`, or `None` when it does not fit.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start <= end && end <= len {
        Some((start, end))
    } else {
        None
    }
}

fn bounds_or_panic(range: impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    match bounds(range, len) {
        Some(b) => b,
        None => panic!("slice range out of bounds for a buffer of {} elements", len),
    }
}

/// An owned buffer of `T` (`f32` or `u64`) on an engine, freed with `memra_free` when dropped.
///
/// Made by [`Engine::htod`], [`Engine::zeros`], [`Engine::uninit`] and their `u64` twins. It
/// borrows its engine, so it cannot outlive it. A graph whose capture used the buffer keeps the
/// allocation alive until the graph is dropped, even if the `CudaSlice` goes first.
pub struct CudaSlice<'e, T> {
    alloc: Rc<Alloc>,
    len: usize,
    _marker: PhantomData<(&'e Engine, T)>,
}

impl<'e, T> CudaSlice<'e, T> {
    pub(crate) fn new(alloc: Alloc, len: usize) -> CudaSlice<'e, T> {
        CudaSlice {
            alloc: Rc::new(alloc),
            len,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no elements (the library never makes one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.len * mem::size_of::<T>()
    }

    /// A read-only view of the elements in `range`.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> CudaView<'_, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaView::new(&self.alloc, start, end - start)
    }

    /// A read-only view of the elements in `range`, or `None` when it does not fit.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<CudaView<'_, T>> {
        bounds(range, self.len).map(|(s, e)| CudaView::new(&self.alloc, s, e - s))
    }

    /// A writable view of the elements in `range`.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> CudaViewMut<'_, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaViewMut::new(&self.alloc, start, end - start)
    }

    /// A writable view of the elements in `range`, or `None` when it does not fit.
    pub fn try_slice_mut(&mut self, range: impl RangeBounds<usize>) -> Option<CudaViewMut<'_, T>> {
        let alloc = &self.alloc;
        bounds(range, self.len).map(move |(s, e)| CudaViewMut::new(alloc, s, e - s))
    }

    /// Frees the buffer now and reports a failure that dropping it would ignore. When a graph
    /// still uses the buffer, it is freed with the graph instead and this returns `Ok`.
    pub fn free(self) -> Result<()> {
        let mut alloc = match Rc::try_unwrap(self.alloc) {
            Ok(alloc) => alloc,
            // A graph holds the allocation: it is freed when the graph is dropped.
            Err(_) => return Ok(()),
        };
        if alloc.released() {
            return Err(Error::new(
                Status::InvalidArgument,
                "CudaSlice::free: the buffer was allocated during a graph capture that failed, \
                 and the library already released it with the capture"
                    .to_string(),
            ));
        }
        // SAFETY: as in Alloc::drop; setting `freed` makes this the buffer's only free.
        let code = unsafe { sys::memra_free(alloc.shared.raw.as_ptr(), alloc.ptr.as_ptr()) };
        alloc.freed = true;
        crate::error::check(code)
    }
}

impl<T> fmt::Debug for CudaSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaSlice")
            .field("ptr", &self.alloc.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// A read-only view of part of a [`CudaSlice`], from [`CudaSlice::slice`].
pub struct CudaView<'a, T> {
    alloc: &'a Rc<Alloc>,
    offset: usize,
    len: usize,
    _marker: PhantomData<&'a T>,
}

impl<'a, T> CudaView<'a, T> {
    fn new(alloc: &'a Rc<Alloc>, offset: usize, len: usize) -> CudaView<'a, T> {
        CudaView {
            alloc,
            offset,
            len,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a view of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A view of the elements in `range` of this view.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> CudaView<'a, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaView::new(self.alloc, self.offset + start, end - start)
    }
}

impl<T> Clone for CudaView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for CudaView<'_, T> {}

impl<T> fmt::Debug for CudaView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaView")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

/// A writable view of part of a [`CudaSlice`], from [`CudaSlice::slice_mut`]. It borrows the
/// slice mutably, so no other view of it exists meanwhile.
pub struct CudaViewMut<'a, T> {
    alloc: &'a Rc<Alloc>,
    offset: usize,
    len: usize,
    _marker: PhantomData<&'a mut T>,
}

impl<'a, T> CudaViewMut<'a, T> {
    fn new(alloc: &'a Rc<Alloc>, offset: usize, len: usize) -> CudaViewMut<'a, T> {
        CudaViewMut {
            alloc,
            offset,
            len,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a view of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A read-only view of the elements in `range` of this view.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> CudaView<'_, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaView::new(self.alloc, self.offset + start, end - start)
    }

    /// A writable view of the elements in `range` of this view.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> CudaViewMut<'_, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaViewMut::new(self.alloc, self.offset + start, end - start)
    }
}

impl<T> fmt::Debug for CudaViewMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaViewMut")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

/// The run of `len` elements of `T` starting `offset` elements into `alloc`.
fn raw_at<T>(alloc: &Rc<Alloc>, offset: usize, len: usize) -> RawBuf<'_> {
    RawBuf {
        alloc,
        // wrapping_add keeps the pointer's provenance on the CPU backend and never dereferences
        // it; `offset` lies within the allocation because views are made from checked ranges.
        ptr: alloc
            .ptr
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(offset * mem::size_of::<T>()),
        len,
    }
}

impl<T> Buffer<T> for CudaSlice<'_, T> {
    fn raw(&self) -> RawBuf<'_> {
        raw_at::<T>(&self.alloc, 0, self.len)
    }
}

impl<T> Buffer<T> for CudaView<'_, T> {
    fn raw(&self) -> RawBuf<'_> {
        raw_at::<T>(self.alloc, self.offset, self.len)
    }
}

impl<T> Buffer<T> for CudaViewMut<'_, T> {
    fn raw(&self) -> RawBuf<'_> {
        raw_at::<T>(self.alloc, self.offset, self.len)
    }
}

impl<T> DevicePtr<T> for CudaSlice<'_, T> {}
impl<T> DevicePtr<T> for CudaView<'_, T> {}
impl<T> DevicePtr<T> for CudaViewMut<'_, T> {}
impl<T> DevicePtrMut<T> for CudaSlice<'_, T> {}
impl<T> DevicePtrMut<T> for CudaViewMut<'_, T> {}

impl RawBuf<'_> {
    pub(crate) fn f32(&self) -> sys::MemraSliceF32 {
        sys::MemraSliceF32 {
            ptr: self.ptr as *const f32,
            len: self.len,
        }
    }

    pub(crate) fn f32_mut(&self) -> sys::MemraSliceMutF32 {
        sys::MemraSliceMutF32 {
            ptr: self.ptr as *mut f32,
            len: self.len,
        }
    }

    pub(crate) fn u64(&self) -> sys::MemraSliceU64 {
        sys::MemraSliceU64 {
            ptr: self.ptr as *const u64,
            len: self.len,
        }
    }

    pub(crate) fn u64_mut(&self) -> sys::MemraSliceMutU64 {
        sys::MemraSliceMutU64 {
            ptr: self.ptr as *mut u64,
            len: self.len,
        }
    }
}
