//! What an engine's buffers, streams and graphs share with it, reference-counted: the library
//! handle (destroyed with the last reference, so a buffer may outlive the `Engine` value that
//! made it), the lock every call holds, and the bookkeeping behind the lock.

use std::cell::RefCell;
use std::ptr::NonNull;

use memra_sys as sys;

use crate::graph::Capture;
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
