//! Graph capture and replay (`memra_graph_capture`, `memra_graph_launch`), in the shapes of
//! memra-engine's `capture_graph_retained` / `capture_graph` and cudarc's `CudaGraph`.
//!
//! Who keeps what alive:
//! - Buffers allocated while a step runs belong to the graph in the library (it frees them
//!   with the graph, or right away when the capture fails). Their `CudaSlice`s hold the graph's
//!   handle, so the library's graph is destroyed only after the last of them is dropped; after
//!   a failed capture they are marked released and refused by every operation.
//! - Buffers allocated before the capture and passed to an operation during it are retained by
//!   the [`CudaGraph`] (and by the keeper), so dropping their `CudaSlice` cannot free memory a
//!   replay still uses.
//! - Buffers reached only through pointer-table entries the host wrote are the host's business:
//!   the library reads those addresses at execution time and cannot check them (see the crate
//!   docs). The operations that take a buffer directly (the single-sequence conv and scan, the
//!   copies) pass it as an argument, so the graph retains it like any other.

use std::any::Any;
use std::collections::HashSet;
use std::error::Error as StdError;
use std::ffi::c_void;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::sync::Arc;

use memra_sys as sys;

use crate::buffer::Alloc;
use crate::engine::Engine;
use crate::error::{check, CaptureError, Error, Result, Status, StepError};
use crate::shared::Shared;

/// `memra_graph_capture` is running.
const CAPTURING: u8 = 0;
/// The capture succeeded; `raw` is the library's graph.
const LIVE: u8 = 1;
/// The capture failed; the library released what it allocated meanwhile.
const FAILED: u8 = 2;

/// The library's graph, shared by the [`CudaGraph`], its keeper and the buffers allocated
/// during its capture.
pub(crate) struct GraphHandle {
    shared: Arc<Shared>,
    raw: AtomicPtr<sys::MemraGraph>,
    state: AtomicU8,
}

impl GraphHandle {
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
    pub(crate) fn handle(&self) -> &Arc<GraphHandle> {
        &self.handle
    }

    /// Keeps `alloc` alive as long as the graph, unless the graph owns it already.
    pub(crate) fn retain(&mut self, alloc: &Arc<Alloc>) {
        let owned = matches!(alloc.graph, Some(ref g) if Arc::ptr_eq(g, &self.handle));
        if !owned && self.seen.insert(Arc::as_ptr(alloc)) {
            self.retained.push(alloc.clone());
        }
    }
}

/// A captured sequence of operations, replayed with [`CudaGraph::launch`] (cudarc's
/// `CudaGraph`, libmemra's `MemraGraph`).
///
/// It keeps its engine's shared state and every buffer its operations were given alive, and is
/// destroyed (`memra_graph_destroy`) when dropped, once the buffers allocated during its capture
/// are dropped too. It is `Send` and `Sync`: replays are serialised by the engine's lock.
pub struct CudaGraph {
    // Declared before `retained`: the graph is destroyed (waiting for its replays) before the
    // buffers it used are freed.
    handle: Arc<GraphHandle>,
    retained: Arc<Vec<Arc<Alloc>>>,
}

/// The name this crate's graph type had before it took cudarc's.
pub type Graph = CudaGraph;

impl CudaGraph {
    /// Enqueues one replay on the engine's stream (CUDA) or runs it (CPU). Pointer tables are
    /// read as the replay executes, so rewriting them beforehand (with
    /// [`Engine::htod_u64_into`]) rebinds the replay to other buffers.
    pub fn launch(&self) -> Result<()> {
        let shared = &self.handle.shared;
        let _guard = shared.lock();
        let raw = self.handle.raw.load(Ordering::Acquire);
        // SAFETY: a live graph of its live engine, the engine's lock held.
        Ok(check(unsafe {
            sys::memra_graph_launch(shared.raw.as_ptr(), raw)
        })?)
    }

    /// How many buffers allocated before the capture the graph keeps alive.
    pub fn retained_buffers(&self) -> usize {
        self.retained.len()
    }
}

impl fmt::Debug for CudaGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaGraph")
            .field("raw", &self.handle.raw.load(Ordering::Relaxed))
            .field("retained_buffers", &self.retained.len())
            .finish()
    }
}

/// What the keeper of [`Engine::capture_graph_retained`] holds: the library's graph and the
/// buffers its replays use. The [`CudaGraph`] holds the same, so keeping or dropping the keeper
/// changes nothing for the graph's safety; it is there for callers written against
/// memra-engine, which store it next to the graph.
struct Keep {
    _handle: Arc<GraphHandle>,
    _retained: Arc<Vec<Arc<Alloc>>>,
}

/// What the trampoline needs to run the host's step.
struct StepContext<'e, F> {
    engine: &'e Engine,
    step: F,
    error: Option<StepError>,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

trait RunStep {
    fn run(&mut self) -> sys::MemraStatus;
}

impl<F> RunStep for StepContext<'_, F>
where
    F: FnMut(&Engine) -> std::result::Result<(), Box<dyn StdError>>,
{
    fn run(&mut self) -> sys::MemraStatus {
        // The library stops calling after a failure; this only guards against a call after a
        // panic left the step's state half updated.
        if self.error.is_some() || self.panic.is_some() {
            return sys::MEMRA_STATUS_CAPTURE_ERROR;
        }
        let engine = self.engine;
        let step = &mut self.step;
        // A panic must not unwind through the library's C frames: it is caught here and resumed
        // once memra_graph_capture has returned.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| step(engine)));
        match outcome {
            Ok(Ok(())) => sys::MEMRA_STATUS_OK,
            Ok(Err(error)) => {
                let code = match crate::error::status_of(&*error) {
                    Some(status) => status.code(),
                    None => sys::MEMRA_STATUS_CAPTURE_ERROR,
                };
                self.error = Some(error);
                code
            }
            Err(payload) => {
                self.panic = Some(payload);
                sys::MEMRA_STATUS_CAPTURE_ERROR
            }
        }
    }
}

unsafe extern "C" fn trampoline<C: RunStep>(
    _engine: *mut sys::MemraEngine,
    user: *mut c_void,
) -> sys::MemraStatus {
    // SAFETY: `user` is the &mut StepContext that capture_graph_retained passed to
    // memra_graph_capture, alive and otherwise unused for the duration of that call. The
    // library calls the step with the engine it was given, the context's own.
    let context = &mut *(user as *mut C);
    context.run()
}

/// The step of a nested capture: the library refuses nested captures before calling it.
unsafe extern "C" fn refuse_nested(
    _engine: *mut sys::MemraEngine,
    _user: *mut c_void,
) -> sys::MemraStatus {
    sys::MEMRA_STATUS_CAPTURE_ERROR
}

impl Engine {
    /// Captures `step` into a replayable graph and returns it with its keeper, as
    /// memra-engine does: `(CudaGraph, Vec<Box<dyn Any + Send>>)`. The keeper holds what the
    /// graph's replays use; the graph holds the same, so it is safe to drop either first.
    ///
    /// `step` runs three times (`memra_graph_capture`): twice eagerly as warm-ups, then once
    /// while its operations are recorded. Buffers it allocates belong to the graph. It must not
    /// copy between host and device, synchronise or capture again; it may return any error
    /// with `?`, which aborts the capture (the step's error becomes the returned
    /// [`CaptureError`]'s source). A panic in `step` aborts the capture and is resumed after the
    /// library has cleaned up. On failure the engine stays usable and no graph exists.
    ///
    /// The engine is locked for the whole capture: other threads using it wait.
    pub fn capture_graph_retained<F>(
        &self,
        step: F,
    ) -> Result<(CudaGraph, Vec<Box<dyn Any + Send>>)>
    where
        F: FnMut(&Engine) -> std::result::Result<(), Box<dyn StdError>>,
    {
        let shared = self.shared();
        let guard = shared.lock();
        let nested = shared.state(&guard).borrow().capture.is_some();
        if nested {
            // Let the library refuse it, so that the capture in progress fails as well.
            let mut raw_graph = ptr::null_mut();
            // SAFETY: a live engine; the library refuses before calling the step.
            let code = unsafe {
                sys::memra_graph_capture(
                    self.raw(),
                    Some(refuse_nested),
                    ptr::null_mut(),
                    &mut raw_graph,
                )
            };
            return Err(match check(code) {
                Err(e) => e.into(),
                Ok(()) => Error::new(
                    Status::Internal,
                    "memra_graph_capture accepted a nested capture".to_string(),
                )
                .into(),
            });
        }
        let handle = Arc::new(GraphHandle {
            shared: shared.clone(),
            raw: AtomicPtr::new(ptr::null_mut()),
            state: AtomicU8::new(CAPTURING),
        });
        shared.state(&guard).borrow_mut().capture = Some(Capture {
            handle: handle.clone(),
            retained: Vec::new(),
            seen: HashSet::new(),
            failure: None,
        });
        let mut context = StepContext {
            engine: self,
            step,
            error: None,
            panic: None,
        };
        let mut raw_graph = ptr::null_mut();
        // SAFETY: a live engine, its lock held; the trampoline's type matches the context
        // passed as `user`, which outlives the call.
        let code = unsafe {
            sys::memra_graph_capture(
                self.raw(),
                Some(trampoline::<StepContext<'_, F>>),
                &mut context as *mut StepContext<'_, F> as *mut c_void,
                &mut raw_graph,
            )
        };
        // Read the library's message before anything below can call into it again.
        let result = check(code);
        let capture = shared
            .state(&guard)
            .borrow_mut()
            .capture
            .take()
            .expect("the capture record lives until here");
        let Capture {
            retained, failure, ..
        } = capture;
        let panic_payload = context.panic.take();
        let step_error = context.error.take();
        drop(context);
        match (result, failure, panic_payload) {
            (Ok(()), None, None) => {
                handle.raw.store(raw_graph, Ordering::Release);
                handle.state.store(LIVE, Ordering::Release);
                shared.destroy_deferred_graphs(&guard);
                drop(guard);
                let retained = Arc::new(retained);
                let keeper: Vec<Box<dyn Any + Send>> = vec![Box::new(Keep {
                    _handle: handle.clone(),
                    _retained: retained.clone(),
                })];
                Ok((CudaGraph { handle, retained }, keeper))
            }
            (result, failure, panic_payload) => {
                if result.is_ok() {
                    // The library made a graph, but the bindings refused an operation of the
                    // step: destroying the graph releases what the capture allocated, exactly
                    // as a failed capture does.
                    // SAFETY: the graph the library just returned, destroyed once, no capture
                    // running.
                    unsafe {
                        sys::memra_graph_destroy(self.raw(), raw_graph);
                    }
                }
                handle.state.store(FAILED, Ordering::Release);
                shared.destroy_deferred_graphs(&guard);
                drop(guard);
                drop(retained);
                if let Some(payload) = panic_payload {
                    panic::resume_unwind(payload);
                }
                let error = match (result, failure) {
                    (_, Some(refusal)) => refusal,
                    (Err(e), None) => e,
                    (Ok(()), None) => Error::new(
                        Status::Internal,
                        "memra_graph_capture failed without a status".to_string(),
                    ),
                };
                Err(Box::new(CaptureError::new(error, step_error)))
            }
        }
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
