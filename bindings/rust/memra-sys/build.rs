//! Links `libmemra.so` from `MEMRA_LIB_DIR` (default: the repository's `build/` directory) and
//! records that directory as a run path of this crate's own test binaries, so the layout tests
//! run without `LD_LIBRARY_PATH`. Dependent crates link the library through the `rustc-link-lib`
//! and `rustc-link-search` lines, which Cargo forwards to every final link.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEMRA_LIB_DIR");
    let dir = lib_dir();
    if !dir.join("libmemra.so").exists() {
        // Building the Rust library itself or its docs needs no libmemra, so this is a warning:
        // the link of a test or example fails next, and the warning says why.
        println!(
            "cargo:warning=libmemra.so is not in {}; build it with `make` or set MEMRA_LIB_DIR",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=memra");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // Published to dependent build scripts as DEP_MEMRA_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
}

/// `MEMRA_LIB_DIR` when set, else `<repo>/build`, made absolute so that the run path does not
/// depend on the directory a binary is started from.
fn lib_dir() -> PathBuf {
    let dir = match env::var_os("MEMRA_LIB_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let manifest =
                env::var_os("CARGO_MANIFEST_DIR").expect("Cargo sets CARGO_MANIFEST_DIR");
            Path::new(&manifest).join("../../../build")
        }
    };
    dir.canonicalize().unwrap_or(dir)
}
