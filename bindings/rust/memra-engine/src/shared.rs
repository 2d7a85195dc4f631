//! What an engine's buffers, streams and graphs share with it, reference-counted: the library
//! handle (destroyed with the last reference, so a buffer may outlive the `Engine` value that
//! made it), the lock every call holds, and the bookkeeping behind the lock; and what buffers
//! and graphs share with each other: the record of an allocation, which buffers hold and graphs
//! retain, and the library's graph handle, which graphs hold and the buffers allocated during
//! their capture too. The modules above build on these in one direction: buffers, then graphs,
//! then the engine.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::sync::Arc;

use memra_sys as sys;

use crate::error::Error;
use crate::lock::{EngineLock, LockGuard};

/// The engine handle and everything guarded by its lock.
pub(crate) struct Shared {
    pub(crate) raw: NonNull<sys::MemraEngine>,
    lock: EngineLock,
    /// Only touched while `lock` is held (see [`Shared::state`]).
    state: RefCell<State>,
}

// SAFETY: the library allows an engine to be used from any thread, one thread at a time; every
// call on `raw` and every access to `state` happens while `lock` is held by the calling thread
// (`state` can only be reached through a `LockGuard`), so no two threads ever touch them at once.
unsafe impl Send for Shared {}
// SAFETY: as for Send: shared access is serialised by `lock`.
unsafe impl Sync for Shared {}

/// The bookkeeping of one engine.
pub(crate) struct State {
    /// The Rust side of the graph capture in progress on this engine.
    pub(crate) capture: Option<Capture>,
    /// Graphs dropped while a capture ran (the library refuses to destroy a graph then); they
    /// are destroyed when the capture ends, or with the engine.
    pub(crate) deferred_graphs: Vec<NonNull<sys::MemraGraph>>,
    /// The scratch the device-to-device copy runs with (see [`CopyScratch`]).
    pub(crate) copy_scratch: Option<CopyScratch>,
    /// Zeros the copy reads to clear a buffer (`memset_zeros`): `cap` f32 zeros, engine-owned,
    /// only replaced by a larger buffer outside captures and never written.
    pub(crate) zeros: Option<CopyScratch>,
}

impl Shared {
    pub(crate) fn new(raw: NonNull<sys::MemraEngine>) -> Shared {
        Shared {
            raw,
            lock: EngineLock::default(),
            state: RefCell::new(State {
                capture: None,
                deferred_graphs: Vec::new(),
                copy_scratch: None,
                zeros: None,
            }),
        }
    }

    /// Takes the engine lock (re-entrant on the owning thread).
    pub(crate) fn lock(&self) -> LockGuard<'_> {
        self.lock.lock()
    }

    /// The bookkeeping; the guard proves the caller holds the lock. Borrows of the `RefCell`
    /// are kept short and never span a call that can drop a buffer or a graph.
    pub(crate) fn state<'g>(&'g self, _guard: &'g LockGuard<'_>) -> &'g RefCell<State> {
        &self.state
    }

    /// Destroys the graphs whose destruction a capture deferred.
    pub(crate) fn destroy_deferred_graphs(&self, guard: &LockGuard<'_>) {
        let graphs = std::mem::take(&mut self.state(guard).borrow_mut().deferred_graphs);
        for graph in graphs {
            // SAFETY: a live graph of this live engine, no capture running, destroyed once.
            // Destruction only fails for bad handles, which these are not.
            unsafe {
                sys::memra_graph_destroy(self.raw.as_ptr(), graph.as_ptr());
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let guard = self.lock.lock();
        self.destroy_deferred_graphs(&guard);
        drop(guard);
        // SAFETY: this is the last reference to the engine's shared state: every buffer, view,
        // stream and graph of the engine held one, so none of them is alive any more (a leaked
        // one never touches the handle again). The engine frees what is still allocated through
        // it, the copy scratch and zeros included.
        unsafe {
            sys::memra_engine_destroy(self.raw.as_ptr());
        }
    }
}

/// One allocation of `3 * cap` f32 elements: the conv weights (`2 * cap`) and outputs (`cap`)
/// the device-to-device copy needs (their values are never used). It belongs to the engine and
/// is only replaced by a larger one outside captures; replaced ones stay allocated until the
/// engine is destroyed, because graphs captured with them still use them.
pub(crate) struct CopyScratch {
    pub(crate) ptr: NonNull<f32>,
    pub(crate) cap: usize,
}

// SAFETY: a device address Rust never dereferences, used under the engine lock only.
unsafe impl Send for CopyScratch {}

/// Who frees an allocation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Owner {
    /// Made by `memra_alloc_*` / `memra_htod_*`: freed with `memra_free`.
    Library,
    /// Memory the host owns (`Engine::wrap_device_ptr`): never freed here.
    Host,
    /// No memory at all: a buffer of no elements (the library allocates none).
    Empty,
}

/// One allocation of an engine.
pub(crate) struct Alloc {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ptr: *mut c_void,
    pub(crate) owner: Owner,
    /// The graph whose capture made this allocation: the library ties its lifetime to that
    /// graph, so the handle keeps the graph from being destroyed while the buffer is alive.
    pub(crate) graph: Option<Arc<GraphHandle>>,
    /// Set by `CudaSlice::free`, which already called `memra_free`.
    pub(crate) freed: bool,
}

// SAFETY: `ptr` is a device address (or library-owned host memory) that Rust never
// dereferences; it is only passed to the library, under the engine lock.
unsafe impl Send for Alloc {}
// SAFETY: as for Send; an Alloc is never mutated through a shared reference.
unsafe impl Sync for Alloc {}

impl Alloc {
    /// True when the library already released this buffer: it was allocated during a capture
    /// that failed, and a failed capture frees what it allocated.
    pub(crate) fn released(&self) -> bool {
        matches!(self.graph, Some(ref g) if g.failed())
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if self.owner != Owner::Library || self.freed || self.released() {
            return;
        }
        let _guard = self.shared.lock();
        // SAFETY: the engine is alive (this Alloc holds its shared state), and `ptr` is the
        // start of a buffer it allocated and that has not been freed: this is its only free.
        // The call can only fail when the CUDA runtime refuses to free, which a destructor
        // cannot handle; `CudaSlice::free` reports that status.
        unsafe {
            sys::memra_free(self.shared.raw.as_ptr(), self.ptr);
        }
    }
}

/// `memra_graph_capture` is running.
const CAPTURING: u8 = 0;
/// The capture succeeded; `raw` is the library's graph.
const LIVE: u8 = 1;
/// The capture failed; the library released what it allocated meanwhile.
const FAILED: u8 = 2;

/// The library's graph, shared by the [`CudaGraph`](crate::CudaGraph), its keeper and the
/// buffers allocated during its capture.
pub(crate) struct GraphHandle {
    shared: Arc<Shared>,
    raw: AtomicPtr<sys::MemraGraph>,
    state: AtomicU8,
}

impl GraphHandle {
    /// The handle of a capture about to start on `shared`'s engine: no graph yet.
    pub(crate) fn capturing(shared: Arc<Shared>) -> GraphHandle {
        GraphHandle {
            shared,
            raw: AtomicPtr::new(std::ptr::null_mut()),
            state: AtomicU8::new(CAPTURING),
        }
    }

    /// The engine the graph belongs to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The library's graph (null until the capture succeeded).
    pub(crate) fn raw(&self) -> *mut sys::MemraGraph {
        self.raw.load(Ordering::Acquire)
    }

    /// The capture succeeded and made `raw`.
    pub(crate) fn set_live(&self, raw: *mut sys::MemraGraph) {
        self.raw.store(raw, Ordering::Release);
        self.state.store(LIVE, Ordering::Release);
    }

    /// The capture failed.
    pub(crate) fn set_failed(&self) {
        self.state.store(FAILED, Ordering::Release);
    }

    pub(crate) fn failed(&self) -> bool {
        self.state.load(Ordering::Acquire) == FAILED
    }
}

impl Drop for GraphHandle {
    fn drop(&mut self) {
        let raw = match NonNull::new(*self.raw.get_mut()) {
            Some(raw) if *self.state.get_mut() == LIVE => raw,
            _ => return,
        };
        let guard = self.shared.lock();
        {
            // A borrow of the state is never held while a handle can be dropped; should that
            // ever change, leaking the graph (and with it the engine) is the safe outcome.
            let mut state = match self.shared.state(&guard).try_borrow_mut() {
                Ok(state) => state,
                Err(_) => return,
            };
            if state.capture.is_some() {
                // The library refuses to destroy a graph inside a capture step.
                state.deferred_graphs.push(raw);
                return;
            }
        }
        // SAFETY: a live graph of this live engine (the handle holds its shared state), no
        // capture running, destroyed exactly once. It waits for pending replays and then frees
        // the buffers allocated during the capture.
        unsafe {
            sys::memra_graph_destroy(self.shared.raw.as_ptr(), raw.as_ptr());
        }
    }
}

/// The Rust side of a capture in progress.
pub(crate) struct Capture {
    handle: Arc<GraphHandle>,
    /// Allocations made before the capture and passed to operations during it.
    retained: Vec<Arc<Alloc>>,
    seen: HashSet<*const Alloc>,
    /// A refusal of these bindings that must fail the capture even if the step ignores it
    /// (the library fails a capture the same way when a step copies host data).
    pub(crate) failure: Option<Error>,
}

// SAFETY: the raw pointers in `seen` are only compared, never dereferenced.
unsafe impl Send for Capture {}

impl Capture {
    /// The record of a capture that makes the graph `handle`.
    pub(crate) fn new(handle: Arc<GraphHandle>) -> Capture {
        Capture {
            handle,
            retained: Vec::new(),
            seen: HashSet::new(),
            failure: None,
        }
    }

    pub(crate) fn handle(&self) -> &Arc<GraphHandle> {
        &self.handle
    }

    /// At the end of the capture: the allocations the graph keeps alive, and the refusal that
    /// fails the capture, if any.
    pub(crate) fn finish(self) -> (Vec<Arc<Alloc>>, Option<Error>) {
        (self.retained, self.failure)
    }

    /// Keeps `alloc` alive as long as the graph, unless the graph owns it already.
    pub(crate) fn retain(&mut self, alloc: &Arc<Alloc>) {
        let owned = matches!(alloc.graph, Some(ref g) if Arc::ptr_eq(g, &self.handle));
        if !owned && self.seen.insert(Arc::as_ptr(alloc)) {
            self.retained.push(alloc.clone());
        }
    }
}
