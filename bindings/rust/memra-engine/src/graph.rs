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
use std::error::Error as StdError;
use std::ffi::c_void;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

use memra_sys as sys;

use crate::error::{check, CaptureError, Error, Result, Status, StepError};
use crate::shared::{Alloc, Capture, GraphHandle, Shared};

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
    /// [`Engine::htod_u64_into`](crate::Engine::htod_u64_into)) rebinds the replay to other buffers.
    pub fn launch(&self) -> Result<()> {
        let shared = self.handle.shared();
        let _guard = shared.lock();
        let raw = self.handle.raw();
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
            .field("raw", &self.handle.raw())
            .field("retained_buffers", &self.retained.len())
            .finish()
    }
}

/// What the keeper of [`Engine::capture_graph_retained`](crate::Engine::capture_graph_retained) holds: the library's graph and the
/// buffers its replays use. The [`CudaGraph`] holds the same, so keeping or dropping the keeper
/// changes nothing for the graph's safety; it is there for callers written against
/// memra-engine, which store it next to the graph.
struct Keep {
    _handle: Arc<GraphHandle>,
    _retained: Arc<Vec<Arc<Alloc>>>,
}

/// What the trampoline needs to run the host's step (the engine bound in already).
struct StepContext<F> {
    step: F,
    error: Option<StepError>,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

trait RunStep {
    fn run(&mut self) -> sys::MemraStatus;
}

impl<F> RunStep for StepContext<F>
where
    F: FnMut() -> std::result::Result<(), Box<dyn StdError>>,
{
    fn run(&mut self) -> sys::MemraStatus {
        // The library stops calling after a failure; this only guards against a call after a
        // panic left the step's state half updated.
        if self.error.is_some() || self.panic.is_some() {
            return sys::MEMRA_STATUS_CAPTURE_ERROR;
        }
        let step = &mut self.step;
        // A panic must not unwind through the library's C frames: it is caught here and resumed
        // once memra_graph_capture has returned.
        let outcome = panic::catch_unwind(AssertUnwindSafe(step));
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
    // SAFETY: `user` is the &mut StepContext that capture_retained passed to
    // memra_graph_capture, alive and otherwise unused for the duration of that call. The
    // library calls the step with the engine it was given, the one the context's step holds.
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

/// The capture behind [`Engine::capture_graph_retained`](crate::Engine::capture_graph_retained)
/// on `shared`'s engine; `step` is the host's step with the engine bound in.
pub(crate) fn capture_retained<F>(
    shared: &Arc<Shared>,
    step: F,
) -> Result<(CudaGraph, Vec<Box<dyn Any + Send>>)>
where
    F: FnMut() -> std::result::Result<(), Box<dyn StdError>>,
{
    let guard = shared.lock();
    let nested = shared.state(&guard).borrow().capture.is_some();
    if nested {
        // Let the library refuse it, so that the capture in progress fails as well.
        let mut raw_graph = ptr::null_mut();
        // SAFETY: a live engine; the library refuses before calling the step.
        let code = unsafe {
            sys::memra_graph_capture(
                shared.raw.as_ptr(),
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
    let handle = Arc::new(GraphHandle::capturing(shared.clone()));
    shared.state(&guard).borrow_mut().capture = Some(Capture::new(handle.clone()));
    let mut context = StepContext {
        step,
        error: None,
        panic: None,
    };
    let mut raw_graph = ptr::null_mut();
    // SAFETY: a live engine, its lock held; the trampoline's type matches the context
    // passed as `user`, which outlives the call.
    let code = unsafe {
        sys::memra_graph_capture(
            shared.raw.as_ptr(),
            Some(trampoline::<StepContext<F>>),
            &mut context as *mut StepContext<F> as *mut c_void,
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
    let (retained, failure) = capture.finish();
    let panic_payload = context.panic.take();
    let step_error = context.error.take();
    drop(context);
    match (result, failure, panic_payload) {
        (Ok(()), None, None) => {
            handle.set_live(raw_graph);
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
                    sys::memra_graph_destroy(shared.raw.as_ptr(), raw_graph);
                }
            }
            handle.set_failed();
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
