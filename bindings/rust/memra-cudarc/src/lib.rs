//! The `cudarc` names that memra-engine's callers import, backed by libmemra.
//!
//! memra-engine hands out cudarc buffers, so its callers write `use cudarc::driver::DevicePtr;`
//! and `cudarc::driver::CudaSlice<f32>`. Depending on this crate under the name `cudarc`,
//!
//! ```toml
//! cudarc = { package = "memra-cudarc", path = "bindings/rust/memra-cudarc" }
//! ```
//!
//! makes those paths name the types of the `memra_engine` crate, which have cudarc 0.19's
//! shapes (an owning `CudaSlice<T>` without a lifetime, `CudaView<'a, T>` / `CudaViewMut<'a, T>`,
//! `DevicePtr::device_ptr(&stream)`, `CudaGraph::launch`, `Arc<CudaStream>`), so such code
//! compiles unchanged against libmemra. Only the names memra-engine's GDN API exposes are
//! provided; this is not the CUDA driver API.
#![deny(missing_docs)]

/// The `cudarc::driver` names: buffers, views, the stream handle, the graph and the address
/// traits of the `memra_engine` crate.
pub mod driver {
    pub use memra_engine::{
        CudaGraph, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrGuard,
        DevicePtrMut, DeviceSlice, SyncOnDrop,
    };
}
