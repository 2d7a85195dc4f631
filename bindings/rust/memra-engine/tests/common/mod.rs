//! What the facade's test files share: seeds, random inputs, poison, bit comparisons, the
//! facade's status and message out of a boxed error, and one engine per backend. Each test
//! file is its own crate and uses a part of this, hence `dead_code` is allowed here.
#![allow(dead_code)]

use std::io::Read;

use memra_engine::{status_of, Backend, CudaSlice, Engine, EngineOptions, Status};

/// A signalling-NaN bit pattern no kernel produces: an element still holding it was not
/// written.
pub const POISON: u32 = 0x7fa5_a5a5;

/// A seed nobody chose (or MEMRA_TEST_SEED, to replay a failure).
pub fn fresh_seed() -> u64 {
    if let Ok(s) = std::env::var("MEMRA_TEST_SEED") {
        let digits = s.trim_start_matches("0x");
        return u64::from_str_radix(digits, 16).expect("MEMRA_TEST_SEED is hexadecimal");
    }
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    u64::from_le_bytes(bytes)
}

/// How a failure names the seed that replays it.
pub fn replay(seed: u64) -> String {
    format!("MEMRA_TEST_SEED=0x{:016x}", seed)
}

/// `len` values in [-spread, spread) from `seed` and `stream` (splitmix64).
pub fn random(len: usize, seed: u64, stream: u64, spread: f32) -> Vec<f32> {
    let mut x = seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F);
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * spread
        })
        .collect()
}

/// `len` poisoned elements.
pub fn poison(len: usize) -> Vec<f32> {
    vec![f32::from_bits(POISON); len]
}

/// The bit patterns of `v`.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The bit patterns of a buffer's contents.
pub fn device_bits(e: &Engine, b: &CudaSlice<f32>) -> Vec<u32> {
    bits(&e.dtoh(b).expect("dtoh"))
}

/// How many elements of two equally long vectors differ in their bits.
pub fn bit_diffs(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count()
}

/// The status of an error the facade returned.
pub fn status(err: &(dyn std::error::Error + 'static)) -> Status {
    status_of(err).unwrap_or_else(|| panic!("not an error of the facade: {}", err))
}

/// The library's (or the facade's) message of an error the facade returned.
pub fn message(err: &(dyn std::error::Error + 'static)) -> String {
    if let Some(e) = err.downcast_ref::<memra_engine::Error>() {
        return e.message().to_string();
    }
    match err.downcast_ref::<memra_engine::CaptureError>() {
        Some(e) => e.message().to_string(),
        None => panic!("not an error of the facade: {}", err),
    }
}

/// An engine on `backend`, whatever MEMRA_BACKEND says.
pub fn engine_on(backend: Backend) -> memra_engine::Result<Engine> {
    Engine::with_options(&EngineOptions {
        backend,
        ignore_env: true,
        ..EngineOptions::default()
    })
}

/// One engine per backend this machine has: the CPU always, CUDA when a device is usable
/// (otherwise the CUDA variant is skipped, saying why). The environment does not choose.
pub fn engines() -> Vec<Engine> {
    let mut engines = Vec::new();
    for backend in [Backend::Cpu, Backend::Cuda] {
        match engine_on(backend) {
            Ok(e) => engines.push(e),
            Err(err) if backend == Backend::Cuda && status(&*err) == Status::NoDevice => {
                eprintln!("skipping the CUDA variant: {}", err)
            }
            Err(err) => panic!("creating a {:?} engine: {}", backend, err),
        }
    }
    engines
}
