//! Gives this crate's test and example binaries run paths to libmemra: first `$ORIGIN` (so a
//! binary copied next to a copy of the library, as `make rust-gpu-bundle` does, runs anywhere),
//! then the directory memra-sys linked it from (published by its build script as
//! DEP_MEMRA_LIB_DIR; empty when memra-sys did not find the library). Run paths given by
//! memra-sys's own build script apply only to its targets.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEMRA_LIB_DIR");
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN");
    let dir = std::env::var("DEP_MEMRA_LIB_DIR")
        .expect("memra-sys (links = \"memra\") publishes DEP_MEMRA_LIB_DIR");
    if !dir.is_empty() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
