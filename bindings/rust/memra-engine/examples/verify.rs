//! One packed speculative verify at the production ("ornith") shape, num_k = 16, num_v = 32,
//! T = 4 draft rows, checked against the per-row chain it replaces.
//!
//! The per-row chain runs conv, prep and scan once per row, ping-ponging the recurrent state
//! between a canonical and an alternate buffer through a pointer table. The packed path runs
//! each kernel once over all T rows and must produce the same bits: conv outputs, scan outputs,
//! the final state (in the canonical buffer, T being even), the final conv ring and every
//! post-row snapshot.
//!
//!     MEMRA_BACKEND=cpu cargo run --example verify     # CPU backend
//!     cargo run --example verify                        # CUDA when a device is usable
//!
//! Prints `bit-identical: yes` and exits 0 when every tensor matches, else names what differs
//! and exits 1.

use std::process::ExitCode;

use memra_engine::{CudaSlice, DevicePtr, Engine};

// The inputs and exit status of the user-facing example crate, which this example shares.
#[path = "../../../../examples/rust/src/inputs.rs"]
mod inputs;
use inputs::fill;

const D_STATE: usize = 128;
const D_CONV: usize = 4;
const NUM_K: usize = 16;
const NUM_V: usize = 32;
const T: usize = 4;

fn addresses(e: &Engine, bufs: &[&CudaSlice<f32>]) -> Vec<u64> {
    let stream = e.stream();
    bufs.iter().map(|b| b.device_ptr(&stream).0).collect()
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let e = Engine::new(0)?;
    let key_dim = D_STATE * NUM_K;
    let value_dim = D_STATE * NUM_V;
    let conv_dim = 2 * key_dim + value_dim;
    let pad = D_CONV - 1;
    let state_words = D_STATE * D_STATE * NUM_V;
    let (eps, scale) = (1e-6f32, 1.0 / (D_STATE as f32).sqrt());

    let w = e.htod(&fill(conv_dim * D_CONV, 1, 0.5))?;
    let dt_bias = e.htod(&fill(NUM_V, 2, 0.5))?;
    let a = e.htod(&fill(NUM_V, 3, 1.0))?;
    let qkv = e.htod(&fill(T * conv_dim, 4, 1.0))?;
    let beta_raw = e.htod(&fill(T * NUM_V, 5, 2.0))?;
    let alpha = e.htod(&fill(T * NUM_V, 6, 2.0))?;
    let ring0 = fill(conv_dim * pad, 7, 1.0);
    let state0 = fill(state_words, 8, 0.3);

    // Per-row chain: T launches of each kernel, snapshots read back after every row.
    let ring = e.htod(&ring0)?;
    let (s0, s1) = (e.htod(&state0)?, e.zeros(state_words)?);
    let p = addresses(&e, &[&ring, &s0, &s1]);
    let table = e.htod_u64(&[p[0], p[1], p[2], p[0], p[2], p[1]])?;
    let mut conv_out = e.uninit(conv_dim)?;
    let (mut q, mut k, mut v) = (
        e.uninit(value_dim)?,
        e.uninit(value_dim)?,
        e.uninit(value_dim)?,
    );
    let (mut beta, mut g_log) = (e.uninit(NUM_V)?, e.uninit(NUM_V)?);
    let mut o = e.uninit(value_dim)?;
    let (mut ref_conv, mut ref_o, mut ref_snap_conv, mut ref_snap_ssm) =
        (vec![], vec![], vec![], vec![]);
    for r in 0..T {
        let base = if r % 2 == 0 { 0 } else { 3 };
        let [ring_v, in_v, out_v] = [0, 1, 2].map(|i| table.slice(base + i..base + i + 1));
        let qkv_r = qkv.slice(r * conv_dim..(r + 1) * conv_dim);
        let beta_r = beta_raw.slice(r * NUM_V..(r + 1) * NUM_V);
        let alpha_r = alpha.slice(r * NUM_V..(r + 1) * NUM_V);
        e.ssm_conv1d_fused_decode_b_view(&qkv_r, &ring_v, &w, &mut conv_out, conv_dim, D_CONV, 1)?;
        e.gdn_prep_decode_b_view(
            &conv_out, &beta_r, &alpha_r, &dt_bias, &a, &mut q, &mut k, &mut v, &mut beta,
            &mut g_log, D_STATE, NUM_V, NUM_K, key_dim, eps, conv_dim, 1,
        )?;
        e.gdn_scan_s128_batched_view(
            &q, &k, &v, &g_log, &beta, &in_v, &out_v, &mut o, NUM_V, 1, scale,
        )?;
        ref_conv.extend(e.dtoh(&conv_out)?);
        ref_o.extend(e.dtoh(&o)?);
        if r + 1 < T {
            ref_snap_conv.extend(e.dtoh(&ring)?);
            ref_snap_ssm.extend(e.dtoh(if r % 2 == 0 { &s1 } else { &s0 })?);
        }
    }
    // T is even: the chain ends in the canonical buffer.
    let ref_state = e.dtoh(&s0)?;
    let ref_ring = e.dtoh(&ring)?;

    // Packed: one launch per kernel over all T rows, into buffers of T rows each.
    let ring = e.htod(&ring0)?;
    let (s0, s1) = (e.htod(&state0)?, e.zeros(state_words)?);
    let table = e.htod_u64(&addresses(&e, &[&ring, &s0, &s1]))?;
    let mut conv_out = e.uninit(T * conv_dim)?;
    let mut snap_conv = e.uninit((T - 1) * conv_dim * pad)?;
    let mut snap_ssm = e.uninit((T - 1) * state_words)?;
    let (mut q, mut k, mut v) = (
        e.uninit(T * value_dim)?,
        e.uninit(T * value_dim)?,
        e.uninit(T * value_dim)?,
    );
    let (mut beta, mut g_log) = (e.uninit(T * NUM_V)?, e.uninit(T * NUM_V)?);
    let mut o = e.uninit(T * value_dim)?;
    let (snap_c, snap_s) = (Some(&mut snap_conv), Some(&mut snap_ssm));
    e.ssm_conv1d_fused_decode_tloop(&qkv, &table, &w, &mut conv_out, snap_c, conv_dim, D_CONV, T)?;
    e.gdn_prep_decode_b(
        &conv_out, &beta_raw, &alpha, &dt_bias, &a, &mut q, &mut k, &mut v, &mut beta, &mut g_log,
        D_STATE, NUM_V, NUM_K, key_dim, eps, conv_dim, T,
    )?;
    e.gdn_scan_s128_tsnap(
        &q, &k, &v, &g_log, &beta, &table, &mut o, NUM_V, T, scale, snap_s,
    )?;

    println!(
        "libmemra {} on {:?}: packed verify, num_k={} num_v={} T={}",
        memra_engine::version_string(),
        e.backend(),
        NUM_K,
        NUM_V,
        T
    );
    let mut identical = true;
    for (what, want, got) in [
        ("conv outputs", ref_conv, e.dtoh(&conv_out)?),
        ("scan outputs", ref_o, e.dtoh(&o)?),
        ("final state", ref_state, e.dtoh(&s0)?),
        ("final conv ring", ref_ring, e.dtoh(&ring)?),
        ("conv snapshots", ref_snap_conv, e.dtoh(&snap_conv)?),
        ("state snapshots", ref_snap_ssm, e.dtoh(&snap_ssm)?),
    ] {
        let diffs = want
            .iter()
            .zip(&got)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        let same = want.len() == got.len() && diffs == 0;
        println!(
            "  {:<16} {:>9} words: {}",
            what,
            want.len(),
            if same {
                "identical".to_string()
            } else {
                format!("{} differ", diffs)
            }
        );
        identical &= same;
    }
    println!("bit-identical: {}", if identical { "yes" } else { "no" });
    Ok(identical)
}

fn main() -> ExitCode {
    inputs::exit_code("verify", run())
}
