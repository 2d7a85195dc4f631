//! The `cudarc` names that memra-engine's callers import, backed by libmemra.
//!
//! memra-engine hands out cudarc buffers, so its callers write `use cudarc::driver::DevicePtr;`
//! and `cudarc::driver::CudaSlice<f32>`. Depending on this crate under the name `cudarc`,
//!
//! ```toml
//! cudarc = { package = "memra-cudarc", path = "bindings/rust/memra-cudarc" }
//! ```
//!
//! makes those paths name the buffer types of the `memra_engine` crate, so such code compiles
//! unchanged against libmemra. Only the names memra-engine's API exposes are provided; this is
//! not the CUDA driver API.
#![deny(missing_docs)]

/// The `cudarc::driver` names: buffers, views, the stream handle and the address traits of
/// the `memra_engine` crate.
pub mod driver {
    pub use memra_engine::{
        CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrGuard, DevicePtrMut,
    };
}
