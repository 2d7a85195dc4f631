//! What an engine's buffers, streams and graphs share with it, reference-counted: the library
//! handle (destroyed with the last reference, so a buffer may outlive the `Engine` value that
//! made it), the lock every call holds, and the bookkeeping behind the lock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr::{self, NonNull};
use std::sync::{Mutex, PoisonError};

use memra_sys as sys;

use crate::error::{check, Error, Res, Status};
use crate::graph::Capture;
use crate::lock::{EngineLock, LockGuard};

/// The engine handle and everything guarded by its lock.
pub(crate) struct Shared {
    pub(crate) raw: NonNull<sys::MemraEngine>,
    lock: EngineLock,
    /// Only touched while `lock` is held (see [`Shared::state`]).
    state: RefCell<State>,
    /// Base addresses of the live buffers, with how many buffers start there (host-owned
    /// wrappers may share an address). A graph capture gives each of them a pointer-table slot
    /// first (see [`AddressBook`]). A plain mutex: it is held for a map update only, never while
    /// the library is called, so it nests inside the engine lock without deadlock.
    live: Mutex<HashMap<u64, usize>>,
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
    pub(crate) book: AddressBook,
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
                book: AddressBook::default(),
                copy_scratch: None,
                zeros: None,
            }),
            live: Mutex::new(HashMap::new()),
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

    pub(crate) fn add_live(&self, addr: u64) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        *live.entry(addr).or_insert(0) += 1;
    }

    pub(crate) fn remove_live(&self, addr: u64) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = live.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                live.remove(&addr);
            }
        }
    }

    pub(crate) fn live_addresses(&self) -> Vec<u64> {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        live.keys().copied().collect()
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
        // it, the pointer-table chunks and the copy scratch included.
        unsafe {
            sys::memra_engine_destroy(self.raw.as_ptr());
        }
    }
}

/// Entries per address: one slot holds the address three times, so that it serves both as a
/// one-entry table (`[addr]`: the per-row conv's ring, the per-row scan's input or output
/// state) and as a packed-op table row (`[addr, addr, addr]`: ring unused, canonical ==
/// alternate, i.e. the packed scan running in place).
pub(crate) const SLOT_WIDTH: usize = 3;
const SLOTS_PER_CHUNK: usize = 512;

/// Device-resident pointer tables for the operations that take a buffer directly where the
/// library's entry point takes a pointer table (memra-engine 0.72's single-sequence ops, and
/// the device-to-device copy).
///
/// Each slot holds one address and is written once, when the address is first needed, and
/// never again: its contents are the address itself, so they stay right for every later
/// operation and every graph replay, whatever buffer lives there by then. The library forbids
/// host-to-device copies while a graph is being captured, so no slot can be written then: a
/// capture first gives a slot to every live f32 buffer (`Engine::capture_graph_retained`), and
/// an operation inside the capture that needs an address without a slot (a view at an offset
/// never used before, a buffer allocated during the capture) fails the capture.
///
/// Chunks are allocated outside any capture (so they belong to the engine, not to a graph) and
/// live until the engine is destroyed.
#[derive(Default)]
pub(crate) struct AddressBook {
    chunks: Vec<NonNull<u64>>,
    /// Slots used in the last chunk.
    used: usize,
    slots: HashMap<u64, NonNull<u64>>,
}

// SAFETY: the chunk pointers are device (or, on the CPU backend, library-owned host) addresses
// that Rust never dereferences; the book is only used under the engine lock.
unsafe impl Send for AddressBook {}

impl AddressBook {
    /// The slot of `addr`, if it has one.
    pub(crate) fn slot(&self, addr: u64) -> Option<NonNull<u64>> {
        self.slots.get(&addr).copied()
    }

    /// Gives every address in `addrs` without a slot one, and writes those slots with one copy
    /// per chunk touched. Must not be called during a capture. On failure no new slot is kept.
    pub(crate) fn add(&mut self, engine: *mut sys::MemraEngine, addrs: &[u64]) -> Res<()> {
        let mut fresh: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.slots.contains_key(a))
            .collect();
        fresh.sort_unstable();
        fresh.dedup();
        let mut start = 0;
        while start < fresh.len() {
            if self.chunks.is_empty() || self.used == SLOTS_PER_CHUNK {
                self.chunks.push(new_chunk(engine)?);
                self.used = 0;
            }
            let chunk = *self.chunks.last().expect("a chunk was just ensured");
            let n = (SLOTS_PER_CHUNK - self.used).min(fresh.len() - start);
            let entries: Vec<u64> = fresh[start..start + n]
                .iter()
                .flat_map(|&a| [a; SLOT_WIDTH])
                .collect();
            // SAFETY: the chunk holds SLOTS_PER_CHUNK * SLOT_WIDTH u64s; slots `used .. used+n`
            // lie inside it.
            let first = unsafe { chunk.as_ptr().add(self.used * SLOT_WIDTH) };
            let src = sys::MemraSliceU64 {
                ptr: entries.as_ptr(),
                len: entries.len(),
            };
            let dst = sys::MemraSliceMutU64 {
                ptr: first,
                len: entries.len(),
            };
            // SAFETY: a live engine (the caller holds its lock), a host slice read during the
            // call, and a destination inside a chunk this engine allocated.
            check(unsafe { sys::memra_htod_u64_into(engine, src, dst) })?;
            for (i, &a) in fresh[start..start + n].iter().enumerate() {
                // SAFETY: inside the chunk, as above.
                let slot = unsafe { NonNull::new_unchecked(first.add(i * SLOT_WIDTH)) };
                self.slots.insert(a, slot);
            }
            self.used += n;
            start += n;
        }
        Ok(())
    }
}

fn new_chunk(engine: *mut sys::MemraEngine) -> Res<NonNull<u64>> {
    let mut out = sys::MemraSliceMutU64 {
        ptr: ptr::null_mut(),
        len: 0,
    };
    // SAFETY: a live engine; the library writes a new allocation or nothing.
    check(unsafe {
        sys::memra_alloc_u64(
            engine,
            SLOTS_PER_CHUNK * SLOT_WIDTH,
            sys::MEMRA_ALLOC_INIT_UNINIT,
            &mut out,
        )
    })?;
    NonNull::new(out.ptr).ok_or_else(|| {
        Error::new(
            Status::Internal,
            "memra_alloc_u64 returned OK without an address".to_string(),
        )
    })
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
