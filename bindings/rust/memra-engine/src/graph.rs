//! Graph capture and replay (`memra_graph_capture`, `memra_graph_launch`).
//!
//! Who keeps what alive:
//! - Buffers allocated while a step runs belong to the graph in the library (it frees them
//!   with the graph, or right away when the capture fails). Their `CudaSlice`s hold the graph's
//!   handle, so the library's graph is destroyed only after the last of them is dropped; after
//!   a failed capture they are marked released and refused by every operation.
//! - Buffers allocated before the capture and passed to an operation during it are retained by
//!   the [`Graph`], so dropping their `CudaSlice` cannot free memory a replay still uses.
//! - Buffers reached only through pointer-table entries are the host's business: the library
//!   reads those addresses at execution time and cannot check them (see the crate docs).

use std::any::Any;
use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::c_void;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::rc::Rc;

use memra_sys as sys;

use crate::buffer::Alloc;
use crate::engine::{Engine, Shared};
use crate::error::{check, Error, Result, Status, StepError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GraphState {
    /// `memra_graph_capture` is running.
    Capturing,
    /// The capture succeeded; `raw` is the library's graph.
    Live,
    /// The capture failed; the library released what it allocated meanwhile.
    Failed,
}

/// The library's graph, shared by the [`Graph`] and the buffers allocated during its capture.
pub(crate) struct GraphHandle {
    shared: Rc<Shared>,
    raw: Cell<*mut sys::MemraGraph>,
    state: Cell<GraphState>,
}

impl GraphHandle {
    pub(crate) fn failed(&self) -> bool {
        self.state.get() == GraphState::Failed
    }
}

impl Drop for GraphHandle {
    fn drop(&mut self) {
        let raw = match NonNull::new(self.raw.get()) {
            Some(raw) if self.state.get() == GraphState::Live => raw,
            _ => return,
        };
        if self.shared.capturing.get() {
            // The library refuses to destroy a graph inside a capture step.
            self.shared.deferred_graphs.borrow_mut().push(raw);
            return;
        }
        // SAFETY: a live graph of this live engine (every owner of the handle borrows the
        // engine), no capture running, destroyed exactly once. It waits for pending replays
        // and then frees the buffers allocated during the capture.
        unsafe {
            sys::memra_graph_destroy(self.shared.raw.as_ptr(), raw.as_ptr());
        }
    }
}

/// The Rust side of a capture in progress.
pub(crate) struct Capture {
    handle: Rc<GraphHandle>,
    /// Allocations made before the capture and passed to operations during it.
    retained: Vec<Rc<Alloc>>,
    seen: HashSet<*const Alloc>,
}

impl Capture {
    pub(crate) fn handle(&self) -> &Rc<GraphHandle> {
        &self.handle
    }

    /// Keeps `alloc` alive as long as the graph, unless the graph owns it already.
    pub(crate) fn retain(&mut self, alloc: &Rc<Alloc>) {
        let owned = matches!(alloc.graph, Some(ref g) if Rc::ptr_eq(g, &self.handle));
        if !owned && self.seen.insert(Rc::as_ptr(alloc)) {
            self.retained.push(alloc.clone());
        }
    }
}

/// A captured sequence of operations, replayed with [`Graph::launch`] (`MemraGraph`).
///
/// It borrows its engine, retains every buffer its operations were given, and is destroyed
/// (`memra_graph_destroy`) when dropped, once the buffers allocated during its capture are
/// dropped too.
///
/// ```compile_fail,E0597
/// use memra_engine::Engine;
/// let graph;
/// {
///     let engine = Engine::new(0).unwrap();
///     graph = engine.capture_graph_retained(|_e: &Engine| Ok(())).unwrap().0;
/// }
/// graph.launch().unwrap();
/// ```
pub struct Graph<'e> {
    engine: &'e Engine,
    // Declared before `retained`: the graph is destroyed (waiting for its replays) before the
    // buffers it used are freed.
    handle: Rc<GraphHandle>,
    retained: Vec<Rc<Alloc>>,
}

impl<'e> Graph<'e> {
    /// Enqueues one replay on the engine's stream (CUDA) or runs it (CPU). Pointer tables are
    /// read as the replay executes, so rewriting them beforehand (with
    /// [`Engine::htod_u64_into`]) rebinds the replay to other buffers.
    pub fn launch(&self) -> Result<()> {
        // SAFETY: a live graph of its live engine.
        check(unsafe { sys::memra_graph_launch(self.engine.raw(), self.handle.raw.get()) })
    }

    /// The engine the graph was captured on.
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// How many buffers allocated before the capture the graph keeps alive.
    pub fn retained_buffers(&self) -> usize {
        self.retained.len()
    }
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.handle.raw.get())
            .field("retained_buffers", &self.retained.len())
            .finish()
    }
}

/// What the trampoline needs to run the host's step.
struct StepContext<'e, F, R> {
    engine: &'e Engine,
    step: F,
    /// The value of the most recent call: after a successful capture, the captured call's.
    last: Option<R>,
    error: Option<StepError>,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

trait RunStep {
    fn run(&mut self) -> sys::MemraStatus;
}

impl<'e, F, R> RunStep for StepContext<'e, F, R>
where
    F: FnMut(&'e Engine) -> std::result::Result<R, StepError>,
{
    fn run(&mut self) -> sys::MemraStatus {
        // The library stops calling after a failure; this only guards against a call after a
        // panic left the step's state half updated.
        if self.error.is_some() || self.panic.is_some() {
            return sys::MEMRA_STATUS_CAPTURE_ERROR;
        }
        let engine = self.engine;
        let step = &mut self.step;
        let last = &mut self.last;
        // A panic must not unwind through the library's C frames: it is caught here and resumed
        // once memra_graph_capture has returned. Dropping the previous call's value happens
        // inside the guarded region too.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            step(engine).map(|value| {
                *last = Some(value);
            })
        }));
        match outcome {
            Ok(Ok(())) => sys::MEMRA_STATUS_OK,
            Ok(Err(error)) => {
                let code = match error.downcast_ref::<Error>() {
                    Some(e) => e.status().code(),
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
    /// Captures `step` into a replayable graph and returns it with the value the captured call
    /// of `step` returned (the "keeper": for example buffers the step allocated, which live as
    /// long as the graph can use them).
    ///
    /// `step` runs three times (`memra_graph_capture`): twice eagerly as warm-ups, then once
    /// while its operations are recorded. Buffers it allocates belong to the graph. It must not
    /// copy between host and device, synchronise or capture again; it may return any error
    /// with `?`, which aborts the capture (the error becomes the returned error's source). A
    /// panic in `step` aborts the capture and is resumed after the library has cleaned up.
    /// On failure the engine stays usable and no graph exists.
    pub fn capture_graph_retained<'e, F, R>(&'e self, step: F) -> Result<(Graph<'e>, R)>
    where
        F: FnMut(&'e Engine) -> std::result::Result<R, StepError>,
    {
        let shared = self.shared();
        if shared.capturing.get() {
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
                Err(e) => e,
                Ok(()) => Error::new(
                    Status::Internal,
                    "memra_graph_capture accepted a nested capture".to_string(),
                ),
            });
        }
        let handle = Rc::new(GraphHandle {
            shared: shared.clone(),
            raw: Cell::new(ptr::null_mut()),
            state: Cell::new(GraphState::Capturing),
        });
        *self.capture.borrow_mut() = Some(Capture {
            handle: handle.clone(),
            retained: Vec::new(),
            seen: HashSet::new(),
        });
        shared.capturing.set(true);
        let mut context = StepContext {
            engine: self,
            step,
            last: None,
            error: None,
            panic: None,
        };
        let mut raw_graph = ptr::null_mut();
        // SAFETY: a live engine; the trampoline's type matches the context passed as `user`,
        // which outlives the call.
        let code = unsafe {
            sys::memra_graph_capture(
                self.raw(),
                Some(trampoline::<StepContext<'e, F, R>>),
                &mut context as *mut StepContext<'e, F, R> as *mut c_void,
                &mut raw_graph,
            )
        };
        // Read the library's message before anything below can call into it again.
        let result = check(code);
        shared.capturing.set(false);
        let capture = self.capture.borrow_mut().take();
        let retained = capture.map(|c| c.retained).unwrap_or_default();
        match (result, context.panic.take()) {
            (Ok(()), None) => {
                handle.raw.set(raw_graph);
                handle.state.set(GraphState::Live);
                shared.destroy_deferred_graphs();
                let graph = Graph {
                    engine: self,
                    handle,
                    retained,
                };
                match context.last.take() {
                    Some(keeper) => Ok((graph, keeper)),
                    None => Err(Error::new(
                        Status::Internal,
                        "memra_graph_capture succeeded without calling the step".to_string(),
                    )),
                }
            }
            (result, panic_payload) => {
                handle.state.set(GraphState::Failed);
                shared.destroy_deferred_graphs();
                if let Some(payload) = panic_payload {
                    drop(context);
                    drop(retained);
                    panic::resume_unwind(payload);
                }
                let error = match result {
                    Err(e) => e,
                    Ok(()) => Error::new(
                        Status::Internal,
                        "memra_graph_capture failed without a status".to_string(),
                    ),
                };
                Err(match context.error.take() {
                    Some(source) => error.with_source(source),
                    None => error,
                })
            }
        }
    }
}
