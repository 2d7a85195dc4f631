//! Finds `libmemra.so` and links it:
//!
//! 1. `MEMRA_LIB_DIR`, when set: the directory holding the library (a build folder of the
//!    repository, `make` sets it for its own checks);
//! 2. otherwise `pkg-config memra` (an installed libmemra: `make install` writes `memra.pc`;
//!    `PKG_CONFIG_PATH` selects a prefix pkg-config does not search by default), whose version
//!    must be at least this crate's major.minor, since the bindings use every symbol of it.
//!
//! The directory found is given as a run path to this crate's own test binaries and published
//! to dependent build scripts as `DEP_MEMRA_LIB_DIR` (memra-engine gives it to its tests and
//! examples). Cargo passes link arguments of a build script to that package's own targets only,
//! so a user's binary crate that depends on the bindings finds the library at run time the way
//! any program does: through the dynamic loader's cache for a system prefix (after `ldconfig`),
//! or through a run path the user's crate adds for another prefix (README, "Using it from
//! Rust"). For a library found through pkg-config that the loader's cache does not list, this
//! script prints a cargo warning with the exact RUSTFLAGS line that adds it, unless RUSTFLAGS
//! already give that run path.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "MEMRA_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    let from_env = env::var_os("MEMRA_LIB_DIR").map(|dir| absolute(PathBuf::from(dir)));
    let installed = from_env.is_none();
    let dir = from_env.or_else(from_pkg_config);
    // Linking the library is always requested: building this crate or its documentation needs
    // no libmemra, and a final link without one fails with the linker's own message after the
    // warnings below have said why.
    println!("cargo:rustc-link-lib=dylib=memra");
    match dir {
        Some(dir) => {
            if !dir.join("libmemra.so").exists() {
                println!(
                    "cargo:warning=libmemra.so is not in {}; build it with `make` or point \
                     MEMRA_LIB_DIR at a directory holding it",
                    dir.display()
                );
            }
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
            // Published to dependent build scripts as DEP_MEMRA_LIB_DIR.
            println!("cargo:lib_dir={}", dir.display());
            // The run path above reaches this crate's own targets only. A user's binary that
            // links an installed library the loader does not find starts with "cannot open
            // shared object file" unless the user's build adds the run path itself; the one
            // line that does it is printed here, where the user sees it at build time. A build
            // folder named by MEMRA_LIB_DIR is this repository's own (its targets get run
            // paths from memra-engine's build script), so it is not warned about.
            if installed && !loader_finds(&dir) && !rustflags_have_rpath(&dir) {
                println!(
                    "cargo:warning=libmemra is installed in {dir}, which the dynamic loader does \
                     not search: binaries linking it start only with a run path to it. Build \
                     with RUSTFLAGS=\"-C link-arg=-Wl,-rpath,{dir}\" (for a prefix in \
                     /etc/ld.so.conf, run `ldconfig` instead)",
                    dir = dir.display()
                );
            }
        }
        None => {
            println!(
                "cargo:warning=libmemra was not found: MEMRA_LIB_DIR is unset and `pkg-config \
                 memra` does not know it. Install it (`make install PREFIX=...`, and set \
                 PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not search) \
                 or set MEMRA_LIB_DIR to a directory holding libmemra.so"
            );
            println!("cargo:lib_dir=");
        }
    }
}

/// `dir` made absolute (and canonical when it exists), so that a run path does not depend on
/// the directory a binary is started from.
fn absolute(dir: PathBuf) -> PathBuf {
    let dir = if dir.is_absolute() {
        dir
    } else {
        env::current_dir().map(|cwd| cwd.join(&dir)).unwrap_or(dir)
    };
    dir.canonicalize().unwrap_or(dir)
}

/// The `libdir` of `pkg-config memra`, or `None` when pkg-config is missing or has no memra.
/// An installed libmemra older than these bindings is an error, not a reason to look
/// elsewhere: linking it would fail on the symbols it lacks.
fn from_pkg_config() -> Option<PathBuf> {
    let pkg_config = env::var_os("PKG_CONFIG").unwrap_or_else(|| OsString::from("pkg-config"));
    let run = |args: &[&str]| -> Option<String> {
        let out = Command::new(&pkg_config).args(args).output().ok()?;
        if !out.status.success() {
            return None;
        }
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let version = run(&["--modversion", "memra"])?;
    let want = format!(
        "{}.{}",
        env::var("CARGO_PKG_VERSION_MAJOR").expect("Cargo sets CARGO_PKG_VERSION_MAJOR"),
        env::var("CARGO_PKG_VERSION_MINOR").expect("Cargo sets CARGO_PKG_VERSION_MINOR")
    );
    if run(&["--atleast-version", &want, "memra"]).is_none() {
        panic!(
            "pkg-config found libmemra {} but these bindings need {} or newer: install a newer \
             libmemra or set MEMRA_LIB_DIR",
            version, want
        );
    }
    let libdir = run(&["--variable=libdir", "memra"])?;
    if libdir.is_empty() {
        return None;
    }
    Some(absolute(Path::new(&libdir).to_path_buf()))
}

/// Whether the dynamic loader's cache (`ldconfig -p`, which lists the trusted directories and
/// those of /etc/ld.so.conf after `ldconfig` ran) resolves the library's SONAME into `dir`.
/// Without an ldconfig to ask, the answer is yes: no warning is better than a wrong one.
fn loader_finds(dir: &Path) -> bool {
    let soname = format!(
        "libmemra.so.{}",
        env::var("CARGO_PKG_VERSION_MAJOR").expect("Cargo sets CARGO_PKG_VERSION_MAJOR")
    );
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        if let Ok(out) = Command::new(ldconfig).arg("-p").output() {
            if !out.status.success() {
                continue;
            }
            return String::from_utf8_lossy(&out.stdout).lines().any(|line| {
                let mut parts = line.trim().splitn(2, " => ");
                let name = parts.next().unwrap_or("");
                let path = parts.next().unwrap_or("");
                name.starts_with(&format!("{} ", soname))
                    && Path::new(path).parent().map(absolute_path) == Some(absolute_path(dir))
            });
        }
    }
    true
}

/// `p` canonical when it exists, so that a link in either path does not hide a match.
fn absolute_path(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Whether the flags Cargo passes to rustc already give the binaries a run path to `dir` (the
/// line the warning would print, or any `-rpath` naming it).
fn rustflags_have_rpath(dir: &Path) -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let dir = dir.display().to_string();
    flags
        .split('\x1f')
        .any(|flag| flag.contains("rpath") && flag.contains(&dir))
}
