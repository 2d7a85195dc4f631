//! Status codes and the error types behind the `Box<dyn std::error::Error>` every call returns.

use std::error::Error as StdError;
use std::ffi::CStr;
use std::fmt;

use memra_sys as sys;

/// What every fallible method returns, as memra-engine's methods do: the error is a
/// `Box<dyn std::error::Error>` holding an [`Error`] (or, for a failed graph capture, a
/// [`CaptureError`]); [`status_of`] reads the status back out of it.
pub type Result<T, E = Box<dyn StdError>> = std::result::Result<T, E>;

/// The error type a graph step returns (see [`Engine::capture_graph_retained`]). Any error
/// converts into it with `?`, including this crate's [`Error`].
///
/// [`Engine::capture_graph_retained`]: crate::Engine::capture_graph_retained
pub type StepError = Box<dyn StdError>;

/// The crate's internal result: a library or facade [`Error`], boxed at the public boundary.
pub(crate) type Res<T> = std::result::Result<T, Error>;

/// Why a call failed: the library's `MemraStatus`, without the OK value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// A shape that does not add up, a view shorter than its shape, an output overlapping an
    /// input, a non-finite scalar, a buffer or graph of another engine. Nothing was written.
    InvalidArgument,
    /// Consistent arguments the library does not implement (for example `d_state != 128`).
    Unsupported,
    /// Host or device memory could not be allocated.
    OutOfMemory,
    /// The CUDA backend was requested but no usable device exists at that ordinal.
    NoDevice,
    /// The CUDA runtime reported an error. A kernel fault is sticky: every later call on the
    /// engine fails with it.
    DeviceError,
    /// A graph step did something a capture cannot record, or failed; no graph was created and
    /// the engine stays usable.
    CaptureError,
    /// The loaded library does not implement the ABI these bindings were generated for.
    AbiMismatch,
    /// A bug in libmemra or in these bindings.
    Internal,
    /// A status code newer than these bindings.
    Unknown(u32),
}

impl Status {
    /// The status for a `MemraStatus` code, or `None` for `MEMRA_STATUS_OK`.
    pub fn from_code(code: u32) -> Option<Status> {
        Some(match code {
            sys::MEMRA_STATUS_OK => return None,
            sys::MEMRA_STATUS_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::MEMRA_STATUS_UNSUPPORTED => Status::Unsupported,
            sys::MEMRA_STATUS_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::MEMRA_STATUS_NO_DEVICE => Status::NoDevice,
            sys::MEMRA_STATUS_DEVICE_ERROR => Status::DeviceError,
            sys::MEMRA_STATUS_CAPTURE_ERROR => Status::CaptureError,
            sys::MEMRA_STATUS_ABI_MISMATCH => Status::AbiMismatch,
            sys::MEMRA_STATUS_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        })
    }

    /// The `MemraStatus` code of this status.
    pub fn code(self) -> u32 {
        match self {
            Status::InvalidArgument => sys::MEMRA_STATUS_INVALID_ARGUMENT,
            Status::Unsupported => sys::MEMRA_STATUS_UNSUPPORTED,
            Status::OutOfMemory => sys::MEMRA_STATUS_OUT_OF_MEMORY,
            Status::NoDevice => sys::MEMRA_STATUS_NO_DEVICE,
            Status::DeviceError => sys::MEMRA_STATUS_DEVICE_ERROR,
            Status::CaptureError => sys::MEMRA_STATUS_CAPTURE_ERROR,
            Status::AbiMismatch => sys::MEMRA_STATUS_ABI_MISMATCH,
            Status::Internal => sys::MEMRA_STATUS_INTERNAL,
            Status::Unknown(code) => code,
        }
    }

    /// The library's name for this status (`"MEMRA_STATUS_INVALID_ARGUMENT"`, ...), from
    /// `memra_status_string()`.
    pub fn name(self) -> &'static str {
        // SAFETY: memra_status_string() accepts any value and returns a static, NUL-terminated
        // ASCII string, never NULL.
        let name = unsafe { CStr::from_ptr(sys::memra_status_string(self.code())) };
        name.to_str().unwrap_or("MEMRA_STATUS_<not UTF-8>")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: the status and the message saying which function, which parameter and what
/// was expected. It is `Send + Sync + 'static`, so it also converts into
/// `Box<dyn std::error::Error + Send + Sync>`.
#[derive(Clone, Debug)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// An error made by these bindings rather than reported by the library.
    pub(crate) fn new(status: Status, message: String) -> Error {
        Error { status, message }
    }

    /// The error the library just reported with `code`: its message is the calling thread's
    /// `memra_last_error_message()`, so this must be called right after the failing call.
    pub(crate) fn from_library(code: u32) -> Error {
        // SAFETY: memra_last_error_message() never returns NULL and its string stays valid
        // until the next failing call on this thread; it is copied out at once.
        let message = unsafe { CStr::from_ptr(sys::memra_last_error_message()) };
        Error::new(
            Status::from_code(code).unwrap_or(Status::Internal),
            message.to_string_lossy().into_owned(),
        )
    }

    /// Why the call failed.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's message (`memra_last_error_message()` right after the failure), or the
    /// bindings' own for failures they detect before calling the library.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, self.status)
    }
}

impl StdError for Error {}

/// A graph capture that created no graph: the library's (or the bindings') [`Error`], and the
/// error the step itself returned, if it returned one, as the [`source`](StdError::source).
///
/// The step's error is a plain `Box<dyn std::error::Error>` (memra-engine's step type), which
/// need not be `Send`; this type is therefore neither `Send` nor `Sync`, unlike [`Error`].
#[derive(Debug)]
pub struct CaptureError {
    error: Error,
    step: Option<StepError>,
}

impl CaptureError {
    pub(crate) fn new(error: Error, step: Option<StepError>) -> CaptureError {
        CaptureError { error, step }
    }

    /// The status: [`Status::CaptureError`], or the status of the failure that ended the
    /// capture when the library reported something more specific (a device fault).
    pub fn status(&self) -> Status {
        self.error.status()
    }

    /// The library's or the bindings' message about the capture.
    pub fn message(&self) -> &str {
        self.error.message()
    }

    /// The error without the step's source.
    pub fn error(&self) -> &Error {
        &self.error
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)?;
        // The library's message about a failed step can only say which status the step
        // returned; the step's own error says what went wrong.
        if let Some(step) = &self.step {
            write!(f, "; the step failed with: {}", step)?;
        }
        Ok(())
    }
}

impl StdError for CaptureError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.step.as_deref()
    }
}

/// The [`Status`] of an error this crate returned (an [`Error`] or a [`CaptureError`] inside
/// the `Box<dyn Error>`), or `None` for any other error.
///
/// ```no_run
/// use memra_engine::{status_of, Engine, Status};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let e = Engine::new(0)?;
/// let mut short = e.uninit(3)?;
/// let err = e.htod_f32_into(&[1.0; 4], &mut short).unwrap_err();
/// assert_eq!(status_of(&*err), Some(Status::InvalidArgument));
/// # Ok(())
/// # }
/// ```
pub fn status_of(err: &(dyn StdError + 'static)) -> Option<Status> {
    if let Some(e) = err.downcast_ref::<Error>() {
        return Some(e.status());
    }
    err.downcast_ref::<CaptureError>().map(CaptureError::status)
}

/// `Ok(())` for `MEMRA_STATUS_OK`, else the library's error for `code`.
pub(crate) fn check(code: sys::MemraStatus) -> Res<()> {
    if code == sys::MEMRA_STATUS_OK {
        Ok(())
    } else {
        Err(Error::from_library(code))
    }
}
