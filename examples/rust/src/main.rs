//! One Gated DeltaNet layer's speculative decode loop through the Rust facade, written twice
//! over the same inputs, as `examples/speculative.c` does in C:
//!
//! 1. snapshots mode with device-side rollback: every verify of `T` rows keeps the state after
//!    each row, and [`Engine::gdn_rollback`] makes the state and the ring those after the last
//!    accepted row. The even verifies call [`Engine::gdn_verify`], the odd ones the three calls
//!    of the 1.0 packed program, which write the same tensors.
//! 2. journal mode with a deferred commit: each verify folds the rows accepted from the
//!    previous one and journals its own; [`Engine::gdn_journal_commit`] folds the last ones.
//!
//! Both loops must end with the same state and ring and compute the same outputs at every
//! verify. The program prints a checksum of all of them, the same number the C example prints
//! for the same inputs, and `bit-identical: yes` (exit status 0) when the loops agree.

use std::error::Error;
use std::process::ExitCode;

use cudarc::driver::{CudaSlice, DevicePtr};
use memra_engine::{Backend, Engine, VerifyArgs, VerifyMode};

mod inputs;
use inputs::fill;

const NUM_K: usize = 2;
const NUM_V: usize = 4;
const D_STATE: usize = 128;
const D_CONV: usize = 4;
const T: usize = 4;
const KEY_DIM: usize = D_STATE * NUM_K;
const CONV_DIM: usize = 2 * KEY_DIM + D_STATE * NUM_V;
const RING_LEN: usize = CONV_DIM * (D_CONV - 1);
const STATE_LEN: usize = NUM_V * D_STATE * D_STATE;
const O_LEN: usize = T * NUM_V * D_STATE;

/// How many of each verify's `T` rows the host accepts (1 ..= T).
const ACCEPTED_PER_STEP: [u32; 6] = [3, 1, 4, 2, 4, 1];

/// FNV-1a over the bits of the values, word by word.
fn checksum(mut h: u64, v: &[f32]) -> u64 {
    for x in v {
        h = (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01B3);
    }
    h
}

/// What every fallible step returns: the facade's errors and the host's, boxed.
type Res<T> = Result<T, Box<dyn Error>>;

const FNV_BASIS: u64 = 0xCBF2_9CE4_8422_2325;

/// The weights, the buffers the host writes each verify's rows into and the accepted count:
/// what both loops share.
struct Layer {
    w: CudaSlice<f32>,
    dt_bias: CudaSlice<f32>,
    a: CudaSlice<f32>,
    qkv: CudaSlice<f32>,
    beta_raw: CudaSlice<f32>,
    alpha: CudaSlice<f32>,
    accepted: CudaSlice<u32>,
    /// Typical values: the checkpoint's L2-norm epsilon (1e-6) and 1/sqrt(d_state).
    eps: f32,
    scale: f32,
}

impl Layer {
    fn new(e: &Engine) -> Res<Layer> {
        // The pre-negated decay, -exp(A_log) in a checkpoint: negative.
        let a: Vec<f32> = fill(NUM_V, 3, 0.25).iter().map(|x| x - 0.5).collect();
        Ok(Layer {
            w: e.htod(&fill(CONV_DIM * D_CONV, 1, 0.5))?,
            dt_bias: e.htod(&fill(NUM_V, 2, 0.5))?,
            a: e.htod(&a)?,
            qkv: e.zeros(T * CONV_DIM)?,
            beta_raw: e.zeros(T * NUM_V)?,
            alpha: e.zeros(T * NUM_V)?,
            accepted: e.alloc_u32_zeroed(1)?,
            eps: 1e-6,
            scale: 1.0 / (D_STATE as f32).sqrt(),
        })
    }

    /// The new rows of verify `step`.
    fn write_rows(&mut self, e: &Engine, step: u64) -> Res<()> {
        e.htod_f32_into(&fill(T * CONV_DIM, 100 + 3 * step, 1.0), &mut self.qkv)?;
        e.htod_f32_into(&fill(T * NUM_V, 101 + 3 * step, 2.0), &mut self.beta_raw)?;
        e.htod_f32_into(&fill(T * NUM_V, 102 + 3 * step, 2.0), &mut self.alpha)?;
        Ok(())
    }

    /// A verify's arguments without its buffers of the mode.
    fn args<'a>(&'a self, mode: VerifyMode, table: &'a CudaSlice<u64>) -> VerifyArgs<'a> {
        VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, 1)
            .mode(mode)
            .eps(self.eps)
            .scale(self.scale)
            .qkv(&self.qkv)
            .table(table)
            .w(&self.w)
            .beta_raw(&self.beta_raw)
            .alpha(&self.alpha)
            .dt_bias(&self.dt_bias)
            .a(&self.a)
    }
}

/// The device addresses of one sequence's table row.
fn table(e: &Engine, bufs: [&CudaSlice<f32>; 3]) -> Res<CudaSlice<u64>> {
    let stream = e.stream();
    Ok(e.htod_u64(&bufs.map(|b| b.device_ptr(&stream).0))?)
}

/// What a loop ends with: the checksum of every verify's outputs and of the final state and
/// ring, and that state and ring.
struct Outcome {
    sum: u64,
    state: Vec<f32>,
    ring: Vec<f32>,
}

fn outcome(e: &Engine, sum: u64, state: &CudaSlice<f32>, ring: &CudaSlice<f32>) -> Res<Outcome> {
    let (state, ring) = (e.dtoh(state)?, e.dtoh(ring)?);
    let sum = checksum(checksum(sum, &state), &ring);
    Ok(Outcome { sum, state, ring })
}

fn snapshots_loop(e: &Engine, l: &mut Layer, state0: &[f32], ring0: &[f32]) -> Res<Outcome> {
    let ring = e.htod(ring0)?;
    let (canonical, alternate) = (e.htod(state0)?, e.zeros(STATE_LEN)?);
    let (mut snap_conv, mut snap_ssm) =
        (e.zeros((T - 1) * RING_LEN)?, e.zeros((T - 1) * STATE_LEN)?);
    let table = table(e, [&ring, &canonical, &alternate])?;
    // The buffers the 1.0 program writes besides o.
    let mut conv_outs = e.zeros(T * CONV_DIM)?;
    let (mut q, mut k, mut v) = (e.zeros(O_LEN)?, e.zeros(O_LEN)?, e.zeros(O_LEN)?);
    let (mut beta, mut g_log) = (e.zeros(T * NUM_V)?, e.zeros(T * NUM_V)?);
    let mut o = e.zeros(O_LEN)?;

    let mut sum = FNV_BASIS;
    for (step, &n) in ACCEPTED_PER_STEP.iter().enumerate() {
        l.write_rows(e, step as u64)?;
        if step % 2 == 1 {
            let b_n = 1; // sequences
            let rows = b_n * T; // the prep's last argument: every row of every sequence
            e.ssm_conv1d_fused_decode_tloop(
                &l.qkv,
                &table,
                &l.w,
                &mut conv_outs,
                Some(&mut snap_conv),
                CONV_DIM,
                D_CONV,
                T,
            )?;
            e.gdn_prep_decode_b(
                &conv_outs,
                &l.beta_raw,
                &l.alpha,
                &l.dt_bias,
                &l.a,
                &mut q,
                &mut k,
                &mut v,
                &mut beta,
                &mut g_log,
                D_STATE,
                NUM_V,
                NUM_K,
                KEY_DIM,
                l.eps,
                CONV_DIM,
                rows,
            )?;
            e.gdn_scan_s128_tsnap(
                &q,
                &k,
                &v,
                &g_log,
                &beta,
                &table,
                &mut o,
                NUM_V,
                T,
                l.scale,
                Some(&mut snap_ssm),
            )?;
        } else {
            let args = l
                .args(VerifyMode::Snapshots, &table)
                .o(&mut o)
                .snap_conv(&mut snap_conv)
                .snap_ssm(&mut snap_ssm);
            e.gdn_verify(&args)?;
        }
        sum = checksum(sum, &e.dtoh(&o)?);
        // The host decides how many rows to keep and rolls back on the device.
        e.htod_u32_into(&[n], &mut l.accepted)?;
        let rollback = VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, 1)
            .table(&table)
            .snap_conv(&mut snap_conv)
            .snap_ssm(&mut snap_ssm)
            .accepted(&l.accepted);
        e.gdn_rollback(&rollback)?;
    }
    outcome(e, sum, &canonical, &ring)
}

fn journal_loop(e: &Engine, l: &mut Layer, state0: &[f32], ring0: &[f32]) -> Res<Outcome> {
    let ring = e.htod(ring0)?;
    let state = e.htod(state0)?;
    // One journal per sequence, zero-filled: empty. Table rows are [ring, state, journal].
    let journal = e.zeros(memra_engine::gdn_journal_len(D_STATE, NUM_K, NUM_V, T)?)?;
    let table = table(e, [&ring, &state, &journal])?;
    let mut o = e.zeros(O_LEN)?;

    let mut sum = FNV_BASIS;
    let mut n = 0u32; // the first verify has nothing to fold
    for (step, &accepted) in ACCEPTED_PER_STEP.iter().enumerate() {
        l.write_rows(e, step as u64)?;
        e.htod_u32_into(&[n], &mut l.accepted)?;
        e.gdn_verify(
            &l.args(VerifyMode::Journal, &table)
                .accepted(&l.accepted)
                .o(&mut o),
        )?;
        sum = checksum(sum, &e.dtoh(&o)?);
        n = accepted;
    }
    // Before the host reads the state (or moves the sequence, or runs a plain decode step).
    e.htod_u32_into(&[n], &mut l.accepted)?;
    e.gdn_journal_commit(&l.args(VerifyMode::Journal, &table).accepted(&l.accepted))?;
    outcome(e, sum, &state, &ring)
}

fn run() -> Res<bool> {
    let e = Engine::new(0)?;
    println!(
        "libmemra {} on {}: num_k={} num_v={} d_conv={}, {} verifies of {} rows",
        memra_engine::version_string(),
        if e.backend() == Backend::Cuda {
            "CUDA"
        } else {
            "CPU"
        },
        NUM_K,
        NUM_V,
        D_CONV,
        ACCEPTED_PER_STEP.len(),
        T
    );
    let mut layer = Layer::new(&e)?;
    // The state and ring the prompt left (here: made up).
    let (state0, ring0) = (fill(STATE_LEN, 4, 0.3), fill(RING_LEN, 5, 1.0));
    let snap = snapshots_loop(&e, &mut layer, &state0, &ring0)?;
    let jour = journal_loop(&e, &mut layer, &state0, &ring0)?;
    println!("snapshots + rollback: checksum 0x{:016x}", snap.sum);
    println!("journal + commit:     checksum 0x{:016x}", jour.sum);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let same = snap.sum == jour.sum
        && bits(&snap.state) == bits(&jour.state)
        && bits(&snap.ring) == bits(&jour.ring);
    println!("bit-identical: {}", if same { "yes" } else { "no" });
    Ok(same)
}

fn main() -> ExitCode {
    inputs::exit_code("speculative", run())
}
