//! A user's binary built against an installed libmemra (`make rust-install-check`): it starts
//! without LD_LIBRARY_PATH, checks the library it loaded, and runs one packed verify of 3 rows
//! against the per-row chain, printing `packed == per-row: yes` when every bit agrees.

use cudarc::driver::{CudaSlice, DevicePtr};
use memra_engine::Engine;

fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        // One xorshift64 step; its top 24 bits give a value in [-0.5, 0.5).
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5);
    }
    out
}

fn table(e: &Engine, ring: &CudaSlice<f32>, s0: &CudaSlice<f32>, s1: &CudaSlice<f32>) -> Vec<u64> {
    let stream = e.stream();
    vec![
        ring.device_ptr(&stream).0,
        s0.device_ptr(&stream).0,
        s1.device_ptr(&stream).0,
    ]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let e = Engine::new(0)?;
    println!(
        "libmemra {} on {:?}",
        memra_engine::version_string(),
        e.backend()
    );
    let (num_v, d_conv, t) = (4usize, 4usize, 3usize);
    let conv_dim = 128 * (2 * 2 + num_v);
    let qkv = e.htod(&values(t * conv_dim, 1))?;
    let w = e.htod(&values(conv_dim * d_conv, 2))?;
    let ring0 = values(conv_dim * (d_conv - 1), 3);

    // Per-row: t one-row conv steps through a one-entry table.
    let ring = e.htod(&ring0)?;
    let (s0, s1) = (e.zeros(128 * 128 * num_v)?, e.zeros(128 * 128 * num_v)?);
    let per_row_table = e.htod_u64(&table(&e, &ring, &s0, &s1))?;
    let mut per_row = Vec::new();
    let mut out = e.uninit(conv_dim)?;
    for r in 0..t {
        e.ssm_conv1d_fused_decode_b(
            &qkv.slice(r * conv_dim..(r + 1) * conv_dim),
            &per_row_table.slice(0..1),
            &w,
            &mut out,
            conv_dim,
            d_conv,
            1,
        )?;
        per_row.extend(e.dtoh(&out)?);
    }

    // Packed: one launch over the t rows.
    let ring_p = e.htod(&ring0)?;
    let packed_table = e.htod_u64(&table(&e, &ring_p, &s0, &s1))?;
    let mut outs = e.uninit(t * conv_dim)?;
    e.ssm_conv1d_fused_decode_tloop(
        &qkv,
        &packed_table,
        &w,
        &mut outs,
        None,
        conv_dim,
        d_conv,
        t,
    )?;
    let packed = e.dtoh(&outs)?;

    let same = per_row.len() == packed.len()
        && per_row
            .iter()
            .zip(&packed)
            .all(|(a, b)| a.to_bits() == b.to_bits())
        && e.dtoh(&ring)?
            .iter()
            .zip(e.dtoh(&ring_p)?)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    println!("packed == per-row: {}", if same { "yes" } else { "no" });
    if !same {
        std::process::exit(1);
    }
    Ok(())
}
