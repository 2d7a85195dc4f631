//! What the example programs share: their deterministic inputs and how their outcome becomes
//! the exit status. memra-engine's own `verify` example includes this file as a module too, so
//! that both programs draw their inputs from the same generator as the C example's `fill`.

use std::error::Error;
use std::process::ExitCode;

/// Deterministic inputs in [-spread, spread), different for every seed (splitmix64), the same
/// values as the C example's `fill`.
pub fn fill(len: usize, seed: u64, spread: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0xD129_0FA5_54B3_7A1D) ^ 0x5851_F42D_4C95_7F2D;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let z = z ^ (z >> 31);
        out.push(((z >> 40) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * spread);
    }
    out
}

/// The exit status of a program whose `run` says whether every comparison matched: success
/// only when it did, and a failure naming the program when an error stopped it.
pub fn exit_code(program: &str, outcome: Result<bool, Box<dyn Error>>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("{}: {}", program, err);
            ExitCode::FAILURE
        }
    }
}
