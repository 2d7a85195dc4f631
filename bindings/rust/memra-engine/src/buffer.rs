//! Buffers, views, the stream handle and the address traits, in the shapes of cudarc 0.19.
//!
//! A [`CudaSlice`] owns one allocation through a reference-counted handle that also holds the
//! engine's shared state: the engine is destroyed only after its last buffer, so a buffer may
//! outlive the `Engine` value that made it and is still freed correctly. A graph keeps the
//! allocations its operations use alive for as long as it can be replayed, even after the
//! host dropped its `CudaSlice`. Nothing in Rust ever forms a reference to a buffer's contents:
//! they are device memory (or, on the CPU backend, memory only the library touches), read and
//! written through the library's copy functions.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Bound, RangeBounds};
use std::ptr;
use std::sync::Arc;

use memra_sys as sys;

use crate::error::{check, Res};
use crate::shared::{Alloc, Owner, Shared};

pub(crate) mod sealed {
    use std::sync::Arc;

    use crate::shared::Alloc;

    /// A run of elements of one allocation, as the operations pass it to the library.
    pub struct RawBuf<'a> {
        pub(crate) alloc: &'a Arc<Alloc>,
        pub(crate) ptr: *mut u8,
        pub(crate) len: usize,
    }

    /// Implemented by this crate's buffer types only, so that every address and length an
    /// operation passes to the library describes a live allocation of an engine.
    pub trait Buffer<T> {
        /// The allocation, the address of the first element and the number of elements.
        fn raw(&self) -> RawBuf<'_>;
    }

    /// The library's entry points for one element type; implemented by the element types
    /// only.
    pub trait ElemImpl: Sized {
        unsafe fn alloc(
            e: *mut memra_sys::MemraEngine,
            len: usize,
            init: memra_sys::MemraAllocInit,
        ) -> (memra_sys::MemraStatus, *mut std::ffi::c_void);
        unsafe fn upload(
            e: *mut memra_sys::MemraEngine,
            src: &[Self],
            dst: *mut std::ffi::c_void,
            dst_len: usize,
        ) -> memra_sys::MemraStatus;
        unsafe fn download(
            e: *mut memra_sys::MemraEngine,
            src: *const std::ffi::c_void,
            src_len: usize,
            dst: &mut [Self],
        ) -> memra_sys::MemraStatus;
    }
}

use sealed::{Buffer, RawBuf};

/// An element type buffers can hold: `f32`, `u64`, `u32` or `i32` (the trait is sealed).
///
/// `u32` and `i32` buffers share the library's u32 entry points (same size and alignment; the
/// bits are copied unchanged).
pub trait Elem: sealed::ElemImpl + Copy + Default + Send + Sync + 'static {}

impl Elem for f32 {}
impl Elem for u64 {}
impl Elem for u32 {}
impl Elem for i32 {}

/// The library's entry points for element type `$t`, stored as the library's `$lib` elements:
/// `u32` and `i32` share the u32 entry points (same size and alignment, and every bit pattern
/// is valid for both, so the copies move either unchanged).
macro_rules! elem_impl {
    ($t:ty => $lib:ty, $slice:ident, $slice_mut:ident, $alloc:ident, $htod:ident, $dtoh:ident) => {
        impl sealed::ElemImpl for $t {
            unsafe fn alloc(
                e: *mut sys::MemraEngine,
                len: usize,
                init: sys::MemraAllocInit,
            ) -> (sys::MemraStatus, *mut c_void) {
                let mut out = sys::$slice_mut {
                    ptr: ptr::null_mut(),
                    len: 0,
                };
                let code = sys::$alloc(e, len, init, &mut out);
                (code, out.ptr.cast())
            }

            unsafe fn upload(
                e: *mut sys::MemraEngine,
                src: &[$t],
                dst: *mut c_void,
                dst_len: usize,
            ) -> sys::MemraStatus {
                let src = sys::$slice {
                    ptr: src.as_ptr().cast::<$lib>(),
                    len: src.len(),
                };
                let dst = sys::$slice_mut {
                    ptr: dst.cast(),
                    len: dst_len,
                };
                sys::$htod(e, src, dst)
            }

            unsafe fn download(
                e: *mut sys::MemraEngine,
                src: *const c_void,
                src_len: usize,
                dst: &mut [$t],
            ) -> sys::MemraStatus {
                let src = sys::$slice {
                    ptr: src.cast(),
                    len: src_len,
                };
                let dst = sys::$slice_mut {
                    ptr: dst.as_mut_ptr().cast::<$lib>(),
                    len: dst.len(),
                };
                sys::$dtoh(e, src, dst)
            }
        }
    };
}

elem_impl!(f32 => f32, MemraSliceF32, MemraSliceMutF32,
           memra_alloc_f32, memra_htod_f32_into, memra_dtoh_f32);
elem_impl!(u64 => u64, MemraSliceU64, MemraSliceMutU64,
           memra_alloc_u64, memra_htod_u64_into, memra_dtoh_u64);
elem_impl!(u32 => u32, MemraSliceU32, MemraSliceMutU32,
           memra_alloc_u32, memra_htod_u32_into, memra_dtoh_u32);
elem_impl!(i32 => u32, MemraSliceU32, MemraSliceMutU32,
           memra_alloc_u32, memra_htod_u32_into, memra_dtoh_u32);

/// Keeps a buffer borrowed while the device address [`DevicePtr::device_ptr`] returned is in
/// use (cudarc's `SyncOnDrop`). Dropping it does nothing else: every operation of an engine is
/// ordered on the engine's one stream, so there is no event to record.
#[must_use = "the address is meant to be used while the guard is alive"]
pub struct DevicePtrGuard<'a> {
    _borrow: PhantomData<&'a ()>,
}

/// cudarc's name for the guard [`DevicePtr::device_ptr`] returns.
pub type SyncOnDrop<'a> = DevicePtrGuard<'a>;

impl fmt::Debug for DevicePtrGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DevicePtrGuard")
    }
}

/// A run of device elements: a [`CudaSlice`], a [`CudaView`] or a [`CudaViewMut`] (the trait
/// is sealed).
pub trait DeviceSlice<T>: Buffer<T> {
    /// Number of elements.
    fn len(&self) -> usize {
        self.raw().len
    }

    /// True for no elements.
    fn is_empty(&self) -> bool {
        self.raw().len == 0
    }

    /// Size in bytes.
    fn num_bytes(&self) -> usize {
        self.raw().len * mem::size_of::<T>()
    }
}

/// A buffer whose device address can be read, for example to write it into a pointer table.
///
/// Implemented by [`CudaSlice`], [`CudaView`] and [`CudaViewMut`] (and references to them) only.
/// The address is a device address on the CUDA backend and a host address on the CPU backend;
/// either way it is only meaningful to the library.
pub trait DevicePtr<T>: DeviceSlice<T> {
    /// The address of the first element, and a guard that keeps the buffer borrowed while the
    /// address is in use. `stream` is taken for cudarc compatibility only: every buffer is
    /// ordered on its engine's one stream, so there is nothing to synchronise with.
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (u64, DevicePtrGuard<'a>) {
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
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (u64, DevicePtrGuard<'a>) {
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
/// `CudaStream`. Obtained from [`Engine::stream`](crate::Engine::stream) as an
/// `Arc<CudaStream>`; it keeps the engine's shared state alive.
pub struct CudaStream {
    pub(crate) shared: Arc<Shared>,
    /// The `cudaStream_t`, or 0 on the CPU backend.
    raw: usize,
    pub(crate) backend: crate::Backend,
}

impl CudaStream {
    pub(crate) fn new(
        shared: Arc<Shared>,
        raw: *mut c_void,
        backend: crate::Backend,
    ) -> CudaStream {
        CudaStream {
            shared,
            raw: raw as usize,
            backend,
        }
    }

    /// The engine's `cudaStream_t`, or NULL on the CPU backend. Work a host enqueues on it is
    /// ordered with the engine's operations.
    pub fn cu_stream(&self) -> *mut c_void {
        self.raw as *mut c_void
    }

    /// Waits for every operation enqueued on the engine (`memra_engine_synchronize`).
    pub fn synchronize(&self) -> crate::Result<()> {
        let _guard = self.shared.lock();
        // SAFETY: a live engine, its lock held.
        Ok(check(unsafe {
            sys::memra_engine_synchronize(self.shared.raw.as_ptr())
        })?)
    }
}

impl fmt::Debug for CudaStream {
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

/// An owned buffer of `T` (`f32`, `u64`, `u32` or `i32`) on an engine, cudarc's `CudaSlice`.
///
/// Made by [`Engine::htod`](crate::Engine::htod), [`zeros`](crate::Engine::zeros),
/// [`uninit`](crate::Engine::uninit) and their twins; freed with `memra_free` when dropped (or,
/// for host-owned memory, never). It has no lifetime parameter: struct fields and return types
/// hold `CudaSlice<f32>`, it is `Send` and `Sync`, and it may outlive the `Engine` value that
/// made it (the engine is destroyed after its last buffer). A graph whose capture used the
/// buffer keeps the allocation alive until the graph is dropped, even if the `CudaSlice` goes
/// first. Operations refuse a buffer of another engine.
pub struct CudaSlice<T> {
    alloc: Arc<Alloc>,
    len: usize,
    _marker: PhantomData<T>,
}

impl<T> CudaSlice<T> {
    pub(crate) fn new(alloc: Alloc, len: usize) -> CudaSlice<T> {
        CudaSlice {
            alloc: Arc::new(alloc),
            len,
            _marker: PhantomData,
        }
    }

    pub(crate) fn alloc(&self) -> &Arc<Alloc> {
        &self.alloc
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

    /// A view of the whole buffer.
    pub fn as_view(&self) -> CudaView<'_, T> {
        CudaView::new(&self.alloc, 0, self.len)
    }

    /// A writable view of the whole buffer.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, T> {
        CudaViewMut::new(&self.alloc, 0, self.len)
    }

    /// Frees the buffer now and reports a failure that dropping it would ignore. When a graph
    /// still uses the buffer, it is freed with the graph instead and this returns `Ok`; a
    /// host-owned or empty buffer is only forgotten.
    pub fn free(self) -> crate::Result<()> {
        let mut alloc = match Arc::try_unwrap(self.alloc) {
            Ok(alloc) => alloc,
            // A graph holds the allocation: it is freed when the graph is dropped.
            Err(_) => return Ok(()),
        };
        if alloc.released() {
            return Err(crate::error::Error::new(
                crate::Status::InvalidArgument,
                "CudaSlice::free: the buffer was allocated during a graph capture that failed, \
                 and the library already released it with the capture"
                    .to_string(),
            )
            .into());
        }
        if alloc.owner != Owner::Library {
            return Ok(());
        }
        let guard = alloc.shared.lock();
        // SAFETY: as in Alloc::drop; setting `freed` makes this the buffer's only free.
        let code = unsafe { sys::memra_free(alloc.shared.raw.as_ptr(), alloc.ptr) };
        let result = check(code);
        drop(guard);
        alloc.freed = true;
        Ok(result?)
    }
}

impl<T> fmt::Debug for CudaSlice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaSlice")
            .field("ptr", &self.alloc.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// Defines a view type: the elements `offset .. offset + len` of an allocation, borrowed as its
/// marker says, with its constructor, its `Debug` form (offset and length) and its raw run.
macro_rules! view_type {
    ($(#[$doc:meta])* $name:ident, $marker:ty) => {
        $(#[$doc])*
        pub struct $name<'a, T> {
            alloc: &'a Arc<Alloc>,
            offset: usize,
            len: usize,
            _marker: PhantomData<$marker>,
        }

        impl<'a, T> $name<'a, T> {
            fn new(alloc: &'a Arc<Alloc>, offset: usize, len: usize) -> $name<'a, T> {
                let _marker = PhantomData;
                $name { alloc, offset, len, _marker }
            }
        }

        impl<T> fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut d = f.debug_struct(stringify!($name));
                d.field("offset", &self.offset).field("len", &self.len).finish()
            }
        }

        impl<T> Buffer<T> for $name<'_, T> {
            fn raw(&self) -> RawBuf<'_> {
                raw_at::<T>(self.alloc, self.offset, self.len)
            }
        }
    };
}

view_type!(
    /// A read-only view of part of a [`CudaSlice`], from [`CudaSlice::slice`]. It borrows the
    /// slice, so the slice outlives it.
    CudaView,
    &'a T
);

view_type!(
    /// A writable view of part of a [`CudaSlice`], from [`CudaSlice::slice_mut`]. It borrows the
    /// slice mutably, so no other view of it exists meanwhile.
    CudaViewMut,
    &'a mut T
);

impl<'a, T> CudaView<'a, T> {
    /// A view of the elements in `range` of this view.
    ///
    /// # Panics
    /// When `range` does not lie within `0..self.len()`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> CudaView<'a, T> {
        let (start, end) = bounds_or_panic(range, self.len);
        CudaView::new(self.alloc, self.offset + start, end - start)
    }

    /// A view of the elements in `range` of this view, or `None` when it does not fit.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<CudaView<'a, T>> {
        bounds(range, self.len).map(|(s, e)| CudaView::new(self.alloc, self.offset + s, e - s))
    }
}

impl<T> Clone for CudaView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for CudaView<'_, T> {}

impl<'a, T> CudaViewMut<'a, T> {
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

/// The sizes every buffer and view reports, as cudarc's types do without a trait import.
macro_rules! sizes {
    ($($ty:ty),+) => {
        $(
            impl<T> $ty {
                /// Number of elements.
                pub fn len(&self) -> usize {
                    self.len
                }

                /// True for no elements.
                pub fn is_empty(&self) -> bool {
                    self.len == 0
                }

                /// Size in bytes.
                pub fn num_bytes(&self) -> usize {
                    self.len * mem::size_of::<T>()
                }
            }
        )+
    };
}

sizes!(CudaSlice<T>, CudaView<'_, T>, CudaViewMut<'_, T>);

/// The run of `len` elements of `T` starting `offset` elements into `alloc`.
fn raw_at<T>(alloc: &Arc<Alloc>, offset: usize, len: usize) -> RawBuf<'_> {
    RawBuf {
        alloc,
        // wrapping_add keeps the pointer's provenance on the CPU backend and never dereferences
        // it; `offset` lies within the allocation because views are made from checked ranges.
        ptr: alloc
            .ptr
            .cast::<u8>()
            .wrapping_add(offset * mem::size_of::<T>()),
        len,
    }
}

impl<T> Buffer<T> for CudaSlice<T> {
    fn raw(&self) -> RawBuf<'_> {
        raw_at::<T>(&self.alloc, 0, self.len)
    }
}

// References to buffers are buffers too, so that `&&CudaSlice` (a reference taken to a
// reference a helper received) is accepted where memra-engine's concrete parameter types would
// have dereferenced it.
impl<T, S: Buffer<T> + ?Sized> Buffer<T> for &S {
    fn raw(&self) -> RawBuf<'_> {
        (**self).raw()
    }
}

impl<T, S: Buffer<T> + ?Sized> Buffer<T> for &mut S {
    fn raw(&self) -> RawBuf<'_> {
        (**self).raw()
    }
}

impl<T> DeviceSlice<T> for CudaSlice<T> {}
impl<T> DeviceSlice<T> for CudaView<'_, T> {}
impl<T> DeviceSlice<T> for CudaViewMut<'_, T> {}
impl<T, S: DeviceSlice<T> + ?Sized> DeviceSlice<T> for &S {}
impl<T, S: DeviceSlice<T> + ?Sized> DeviceSlice<T> for &mut S {}
impl<T> DevicePtr<T> for CudaSlice<T> {}
impl<T> DevicePtr<T> for CudaView<'_, T> {}
impl<T> DevicePtr<T> for CudaViewMut<'_, T> {}
impl<T, S: DevicePtr<T> + ?Sized> DevicePtr<T> for &S {}
impl<T, S: DevicePtr<T> + ?Sized> DevicePtr<T> for &mut S {}
impl<T> DevicePtrMut<T> for CudaSlice<T> {}
impl<T> DevicePtrMut<T> for CudaViewMut<'_, T> {}
impl<T, S: DevicePtrMut<T> + ?Sized> DevicePtrMut<T> for &mut S {}

/// The library's slice descriptions of a run: `name` describes it as a `ty` (pointer and
/// length), the form of an argument read or written as that element type.
macro_rules! raw_slices {
    ($($name:ident -> $ty:ident as $ptr:ty,)+) => {
        $(
            pub(crate) fn $name(&self) -> sys::$ty {
                sys::$ty { ptr: self.ptr as $ptr, len: self.len }
            }
        )+
    };
}

/// Defines the `{NULL, 0}` slice of each kind the library takes: what an absent optional
/// argument is passed as.
macro_rules! no_slices {
    ($($name:ident: $ty:ident = $null:ident;)+) => {
        $(pub(crate) const $name: sys::$ty = sys::$ty { ptr: ptr::$null(), len: 0 };)+
    };
}

no_slices! {
    NO_F32: MemraSliceF32 = null;
    NO_F32_MUT: MemraSliceMutF32 = null_mut;
    NO_U64: MemraSliceU64 = null;
    NO_U32: MemraSliceU32 = null;
}

impl RawBuf<'_> {
    /// `len` elements of `T` starting `start` elements in; the caller has checked the range.
    pub(crate) fn sub<T>(&self, start: usize, len: usize) -> RawBuf<'_> {
        debug_assert!(start + len <= self.len);
        RawBuf {
            alloc: self.alloc,
            ptr: self.ptr.wrapping_add(start * mem::size_of::<T>()),
            len,
        }
    }

    raw_slices! {
        f32 -> MemraSliceF32 as *const f32,
        f32_mut -> MemraSliceMutF32 as *mut f32,
        u64 -> MemraSliceU64 as *const u64,
        u32 -> MemraSliceU32 as *const u32,
    }
}

/// Downloads `src` into `dst` (same length), for `Engine`'s copy functions.
pub(crate) unsafe fn download<T: Elem>(
    engine: *mut sys::MemraEngine,
    src: &RawBuf<'_>,
    dst: &mut [T],
) -> Res<()> {
    check(T::download(engine, src.ptr.cast(), src.len, dst))
}

/// Uploads `src` into the first `src.len()` elements of `dst`.
pub(crate) unsafe fn upload<T: Elem>(
    engine: *mut sys::MemraEngine,
    src: &[T],
    dst: &RawBuf<'_>,
) -> Res<()> {
    check(T::upload(engine, src, dst.ptr.cast(), dst.len))
}
