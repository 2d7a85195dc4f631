//! The safe facade's own guarantees: errors carry the library's message, buffers of another
//! engine are refused, graphs keep what they use alive, failed captures leave the engine usable
//! and their buffers unusable. Every test runs on the CPU backend and, where a device is usable,
//! on CUDA; inputs are fresh random values (MEMRA_TEST_SEED=0x... replays a failure's inputs).

use std::cell::RefCell;
use std::error::Error as _;
use std::fmt;
use std::io::Read;
use std::panic::{self, AssertUnwindSafe};

use memra_engine::{Backend, CudaSlice, DevicePtr, Engine, EngineOptions, Status};

const NUM_K: usize = 2;
const NUM_V: usize = 4;
const D_CONV: usize = 4;
const KEY_DIM: usize = 128 * NUM_K;
const CONV_DIM: usize = 2 * KEY_DIM + 128 * NUM_V;
const PAD: usize = D_CONV - 1;
/// A signalling-NaN bit pattern no kernel produces: an element still holding it was not
/// written.
const POISON: u32 = 0x7fa5_a5a5;

/// A seed nobody chose (or MEMRA_TEST_SEED, to replay a failure).
fn fresh_seed() -> u64 {
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
fn replay(seed: u64) -> String {
    format!("MEMRA_TEST_SEED=0x{:016x}", seed)
}

/// `len` values in [-spread, spread) from `seed` and `stream` (splitmix64).
fn random(len: usize, seed: u64, stream: u64, spread: f32) -> Vec<f32> {
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

/// The calling thread's `memra_last_error_message()`.
fn last_library_message() -> String {
    // SAFETY: the library returns a valid NUL-terminated string, never NULL.
    let message = unsafe { std::ffi::CStr::from_ptr(memra_sys::memra_last_error_message()) };
    message.to_string_lossy().into_owned()
}

fn poison(len: usize) -> Vec<f32> {
    vec![f32::from_bits(POISON); len]
}

fn bit_diffs(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count()
}

/// One engine per backend this machine has: the CPU always, CUDA when a device is usable
/// (otherwise the CUDA variant is skipped, saying why). The environment does not choose.
fn engines() -> Vec<Engine> {
    let mut engines = Vec::new();
    for backend in [Backend::Cpu, Backend::Cuda] {
        let options = EngineOptions {
            backend,
            ignore_env: true,
            ..EngineOptions::default()
        };
        match Engine::with_options(&options) {
            Ok(e) => engines.push(e),
            Err(err) if backend == Backend::Cuda && err.status() == Status::NoDevice => {
                eprintln!("skipping the CUDA variant: {}", err)
            }
            Err(err) => panic!("creating a {:?} engine: {}", backend, err),
        }
    }
    engines
}

/// The packed conv of one sequence, its inputs and its outputs.
struct ConvCase<'e> {
    qkv: CudaSlice<'e, f32>,
    w: CudaSlice<'e, f32>,
    ring: CudaSlice<'e, f32>,
    table: CudaSlice<'e, u64>,
    ring0: Vec<f32>,
    t: usize,
}

impl<'e> ConvCase<'e> {
    fn new(e: &'e Engine, seed: u64, t: usize) -> ConvCase<'e> {
        let ring0 = random(CONV_DIM * PAD, seed, 1, 1.0);
        let ring = e.htod(&ring0).expect("ring");
        let address = ring.device_ptr(&e.stream()).0;
        ConvCase {
            qkv: e.htod(&random(t * CONV_DIM, seed, 2, 1.0)).expect("qkv"),
            w: e.htod(&random(CONV_DIM * D_CONV, seed, 3, 0.5)).expect("w"),
            table: e.htod_u64(&[address, 0, 0]).expect("table"),
            ring,
            ring0,
            t,
        }
    }

    fn run(&self, e: &Engine, out: &mut CudaSlice<'_, f32>) -> memra_engine::Result<()> {
        e.ssm_conv1d_fused_decode_tloop(
            &self.qkv,
            &self.table,
            &self.w,
            out,
            None,
            CONV_DIM,
            D_CONV,
            self.t,
        )
    }

    /// Conv outputs of an eager run from the initial ring.
    fn reference(&mut self, e: &Engine) -> Vec<f32> {
        let mut out = e.htod(&poison(self.t * CONV_DIM)).expect("out");
        self.run(e, &mut out).expect("eager conv");
        self.rewind(e);
        e.dtoh(&out).expect("dtoh")
    }

    fn rewind(&mut self, e: &Engine) {
        e.htod_f32_into(&self.ring0, &mut self.ring)
            .expect("rewind ring");
    }
}

#[derive(Debug)]
struct StepFailed(u64);

impl fmt::Display for StepFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the host's step gave up (token {:#x})", self.0)
    }
}

impl std::error::Error for StepFailed {}

#[test]
fn engine_reports_its_backend_and_stream() {
    for e in engines() {
        let stream = e.stream();
        match e.backend() {
            Backend::Cpu => assert!(stream.cu_stream().is_null(), "the CPU has no stream"),
            Backend::Cuda => assert!(!stream.cu_stream().is_null(), "CUDA engine without stream"),
            Backend::Auto => panic!("an engine never runs on AUTO"),
        }
        stream.synchronize().expect("synchronize");
    }
}

#[test]
fn memra_backend_cpu_selects_the_cpu_backend() {
    match std::env::var("MEMRA_BACKEND") {
        Ok(ref v) if v == "cpu" => {
            let e = Engine::new(0).expect("Engine::new under MEMRA_BACKEND=cpu");
            assert_eq!(e.backend(), Backend::Cpu);
        }
        _ => eprintln!("skipping: MEMRA_BACKEND is not cpu in this run"),
    }
}

#[test]
fn copies_round_trip_and_views_write_only_their_range() {
    let seed = fresh_seed();
    for e in engines() {
        let host = random(1000, seed, 1, 3.0);
        let mut buf = e.htod(&host).expect("htod");
        assert_eq!(buf.len(), 1000);
        assert_eq!(e.dtoh(&buf).expect("dtoh"), host, "{}", replay(seed));

        let patch = random(100, seed, 2, 3.0);
        e.htod_f32_into(&patch, &mut buf.slice_mut(300..400))
            .expect("into view");
        let mut want = host.clone();
        want[300..400].copy_from_slice(&patch);
        assert_eq!(
            bit_diffs(&e.dtoh(&buf).expect("dtoh"), &want),
            0,
            "{}",
            replay(seed)
        );
        assert_eq!(
            e.dtoh(&buf.slice(350..360)).expect("dtoh view"),
            &want[350..360],
            "{}",
            replay(seed)
        );
        assert!(buf.try_slice(990..1001).is_none());
        assert_eq!(buf.slice(10..20).slice(5..).len(), 5);

        let table: Vec<u64> = (0..7u64).map(|i| seed.rotate_left(i as u32 * 9)).collect();
        let mut t = e.htod_u64(&table).expect("htod_u64");
        assert_eq!(e.dtoh_u64(&t).expect("dtoh_u64"), table);
        e.htod_u64_into(&[1, 2], &mut t.slice_mut(5..7))
            .expect("into");
        assert_eq!(e.dtoh_u64(&t.slice(5..)).expect("dtoh_u64"), vec![1, 2]);

        let zeros = e.zeros(64).expect("zeros");
        assert!(e
            .dtoh(&zeros)
            .expect("dtoh")
            .iter()
            .all(|&x| x.to_bits() == 0));
        zeros.free().expect("free");
    }
}

#[test]
fn library_errors_carry_the_message_and_leave_outputs_untouched() {
    let seed = fresh_seed();
    for e in engines() {
        let conv_out = e.htod(&random(CONV_DIM, seed, 1, 1.0)).expect("conv_out");
        let beta_raw = e.htod(&random(NUM_V, seed, 2, 1.0)).expect("beta_raw");
        let alpha = e.htod(&random(NUM_V, seed, 3, 1.0)).expect("alpha");
        let dt_bias = e.htod(&random(NUM_V, seed, 4, 1.0)).expect("dt_bias");
        let a = e.htod(&random(NUM_V, seed, 5, 1.0)).expect("a");
        let mut q = e.htod(&poison(128 * NUM_V)).expect("q");
        let mut k = e.htod(&poison(128 * NUM_V)).expect("k");
        let mut v = e.htod(&poison(128 * NUM_V)).expect("v");
        let mut beta = e.htod(&poison(NUM_V)).expect("beta");
        let mut g_log = e.htod(&poison(NUM_V)).expect("g_log");
        let err = e
            .gdn_prep_decode_b(
                &conv_out,
                &beta_raw,
                &alpha,
                &dt_bias,
                &a,
                &mut q,
                &mut k,
                &mut v,
                &mut beta,
                &mut g_log,
                64,
                NUM_V,
                NUM_K,
                64 * NUM_K,
                1e-6,
                CONV_DIM,
                1,
            )
            .expect_err("d_state 64 is unsupported");
        assert_eq!(err.status(), Status::Unsupported, "{}", err);
        assert!(
            err.message().contains("memra_gdn_prep_decode_b") && err.message().contains("d_state"),
            "the library's message names the function and the parameter: {}",
            err
        );
        assert!(
            err.to_string().contains("MEMRA_STATUS_UNSUPPORTED"),
            "{}",
            err
        );
        let boxed: Box<dyn std::error::Error> = Box::new(err);
        assert!(boxed.to_string().contains("d_state"));
        for out in [&q, &k, &v, &beta, &g_log] {
            let got = e.dtoh(out).expect("dtoh");
            assert!(
                got.iter().all(|x| x.to_bits() == POISON),
                "a refused call wrote an output"
            );
        }

        // A view one element short of its shape.
        let mut case = ConvCase::new(&e, seed, 2);
        let mut conv_outs = e.htod(&poison(2 * CONV_DIM)).expect("conv_outs");
        let err = e
            .ssm_conv1d_fused_decode_tloop(
                &case.qkv,
                &case.table,
                &case.w,
                &mut conv_outs.slice_mut(..2 * CONV_DIM - 1),
                None,
                CONV_DIM,
                D_CONV,
                2,
            )
            .expect_err("short conv_outs");
        assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
        assert!(err.message().contains("conv_outs"), "{}", err);
        let got = e.dtoh(&conv_outs).expect("dtoh");
        assert!(
            got.iter().all(|x| x.to_bits() == POISON),
            "a refused call wrote conv_outs"
        );
        assert_eq!(
            e.dtoh(&case.ring).expect("ring"),
            case.ring0,
            "a refused call rolled the ring"
        );
        case.rewind(&e);
    }
}

#[test]
fn buffers_of_another_engine_are_refused() {
    let seed = fresh_seed();
    for (e, other) in engines().into_iter().zip(engines()) {
        let case = ConvCase::new(&e, seed, 2);
        let mut foreign = other.htod(&poison(2 * CONV_DIM)).expect("foreign");
        let err = e
            .ssm_conv1d_fused_decode_tloop(
                &case.qkv,
                &case.table,
                &case.w,
                &mut foreign,
                None,
                CONV_DIM,
                D_CONV,
                2,
            )
            .expect_err("a buffer of another engine");
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(err.message().contains("conv_outs") && err.message().contains("another engine"));
        assert!(e.dtoh(&foreign).is_err(), "dtoh of another engine's buffer");
        let got = other.dtoh(&foreign).expect("dtoh on its own engine");
        assert!(got.iter().all(|x| x.to_bits() == POISON));
    }
}

#[test]
fn graph_replays_match_eager_runs_after_the_inputs_are_dropped() {
    let seed = fresh_seed();
    for e in engines() {
        let mut case = ConvCase::new(&e, seed, 3);
        let want = case.reference(&e);
        let mut out = e.htod(&poison(3 * CONV_DIM)).expect("out");
        let (graph, ()) = e
            .capture_graph_retained(|e: &Engine| {
                case.run(e, &mut out)?;
                Ok(())
            })
            .expect("capture");
        // qkv, w, table and out; the ring is reached through the table only.
        assert_eq!(graph.retained_buffers(), 4);
        let ConvCase {
            qkv,
            w,
            table,
            mut ring,
            ring0,
            ..
        } = case;
        drop((qkv, w, table));
        // Allocations of the same sizes, with other contents, where freed memory would be
        // reused first.
        let decoys: Vec<_> = [3 * CONV_DIM, CONV_DIM * D_CONV]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                e.htod(&random(n, seed, 100 + i as u64, 9.0))
                    .expect("decoy")
            })
            .collect();
        e.htod_f32_into(&ring0, &mut ring).expect("rewind ring");
        graph.launch().expect("replay");
        let got = e.dtoh(&out).expect("dtoh");
        assert_eq!(
            bit_diffs(&got, &want),
            0,
            "replay after drop, {}",
            replay(seed)
        );
        drop(decoys);
    }
}

#[test]
fn the_keeper_holds_buffers_the_step_allocated() {
    let seed = fresh_seed();
    for e in engines() {
        let mut case = ConvCase::new(&e, seed, 4);
        let want = case.reference(&e);
        let (graph, mut out) = e
            .capture_graph_retained(|step_engine| {
                let mut out = step_engine.uninit(4 * CONV_DIM)?;
                case.run(step_engine, &mut out)?;
                Ok(out)
            })
            .expect("capture");
        // The warm-ups ran the conv twice: rewind the ring and clear the output.
        case.rewind(&e);
        e.htod_f32_into(&poison(4 * CONV_DIM), &mut out)
            .expect("poison");
        graph.launch().expect("replay");
        assert_eq!(
            bit_diffs(&e.dtoh(&out).expect("dtoh"), &want),
            0,
            "{}",
            replay(seed)
        );
        drop(graph);
        // The keeper outlives the Graph value; the library's graph lives until it is dropped.
        assert_eq!(
            bit_diffs(&e.dtoh(&out).expect("dtoh"), &want),
            0,
            "{}",
            replay(seed)
        );
    }
}

#[test]
fn a_step_error_aborts_the_capture_and_becomes_the_source() {
    let seed = fresh_seed();
    for e in engines() {
        let mut calls = 0;
        let err = e
            .capture_graph_retained(|_e: &Engine| -> Result<(), memra_engine::StepError> {
                calls += 1;
                Err(Box::new(StepFailed(seed)))
            })
            .expect_err("the step failed");
        assert_eq!(calls, 1, "the library stops at the first failing call");
        assert_eq!(err.status(), Status::CaptureError, "{}", err);
        let source = err.source().expect("the step's error is the source");
        assert_eq!(source.downcast_ref::<StepFailed>().map(|s| s.0), Some(seed));
        assert!(
            err.to_string().contains("the host's step gave up"),
            "{}",
            err
        );
        // The engine stays usable.
        let mut case = ConvCase::new(&e, seed, 2);
        let want = case.reference(&e);
        assert_eq!(want.len(), 2 * CONV_DIM);
    }
}

#[test]
fn host_copies_inside_a_step_fail_the_capture() {
    let seed = fresh_seed();
    for e in engines() {
        let buf = e.htod(&random(16, seed, 1, 1.0)).expect("buf");
        let err = e
            .capture_graph_retained(|e: &Engine| {
                // The step ignores the refusal; the capture fails anyway.
                let refused = e.dtoh(&buf).expect_err("dtoh inside a capture");
                assert_eq!(refused.status(), Status::CaptureError);
                Ok(())
            })
            .expect_err("a step that reads back cannot be captured");
        assert_eq!(err.status(), Status::CaptureError);
        assert!(err.message().contains("memra_dtoh_f32"), "{}", err);
        assert_eq!(
            e.dtoh(&buf).expect("usable again"),
            random(16, seed, 1, 1.0)
        );
    }
}

#[test]
fn captures_do_not_nest() {
    for e in engines() {
        let err = e
            .capture_graph_retained(|e: &Engine| {
                let inner = e
                    .capture_graph_retained(|_e: &Engine| Ok(()))
                    .expect_err("nested capture");
                assert_eq!(inner.status(), Status::CaptureError, "{}", inner);
                Ok(())
            })
            .expect_err("the outer capture fails too");
        assert_eq!(err.status(), Status::CaptureError, "{}", err);
        assert!(err.message().contains("nested"), "{}", err);
        e.capture_graph_retained(|_e: &Engine| Ok(()))
            .expect("a later capture works");
    }
}

#[test]
fn a_panic_in_a_step_resumes_after_the_capture_is_cleaned_up() {
    for e in engines() {
        let payload = panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = e.capture_graph_retained(|e: &Engine| -> Result<(), memra_engine::StepError> {
                let _scratch = e.zeros(8)?;
                panic!("the step panicked");
            });
        }))
        .expect_err("the panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the step panicked"));
        let (graph, ()) = e
            .capture_graph_retained(|_e: &Engine| Ok(()))
            .expect("the engine is usable after the panic");
        graph.launch().expect("launch");
    }
}

#[test]
fn buffers_of_a_failed_capture_are_refused_and_never_freed_twice() {
    let seed = fresh_seed();
    for e in engines() {
        let stash: RefCell<Vec<CudaSlice<'_, f32>>> = RefCell::new(Vec::new());
        e.capture_graph_retained(|_e: &Engine| -> Result<(), memra_engine::StepError> {
            stash.borrow_mut().push(e.zeros(256)?);
            stash.borrow_mut().push(e.zeros(256)?);
            Err(Box::new(StepFailed(seed)))
        })
        .expect_err("the step failed");
        let mut stash = stash.into_inner();
        assert_eq!(stash.len(), 2);
        let err = e.dtoh(&stash[0]).expect_err("a released buffer");
        assert_eq!(err.status(), Status::InvalidArgument);
        assert!(err.message().contains("capture that failed"), "{}", err);
        // New buffers of the same size are likely to take the released memory; neither
        // dropping nor freeing the stale handles may free them.
        let host = random(256, seed, 7, 1.0);
        let fresh: Vec<_> = (0..4).map(|_| e.htod(&host).expect("fresh")).collect();
        let freed = stash.pop().expect("stashed");
        assert_eq!(
            freed.free().expect_err("already released").status(),
            Status::InvalidArgument
        );
        // Dropping the other stale handle calls nothing that fails: the thread's last library
        // error stays the one made here.
        let marker = e.zeros(0).expect_err("zero-length allocation");
        assert_eq!(last_library_message(), marker.message());
        drop(stash);
        assert_eq!(
            last_library_message(),
            marker.message(),
            "dropping a released buffer freed it"
        );
        for f in &fresh {
            assert_eq!(e.dtoh(f).expect("fresh buffers stay allocated"), host);
        }
    }
}

#[test]
fn the_engine_moves_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
    let seed = fresh_seed();
    for e in engines() {
        let host = random(32, seed, 1, 1.0);
        let back = std::thread::spawn(move || {
            let buf = e.htod(&host).expect("htod on the new thread");
            e.dtoh(&buf).expect("dtoh on the new thread")
        })
        .join()
        .expect("thread");
        assert_eq!(back, random(32, seed, 1, 1.0));
    }
}

/// Addresses of `bufs` on `e`, for a pointer table.
fn addresses(e: &Engine, bufs: &[&CudaSlice<'_, f32>]) -> Vec<u64> {
    let stream = e.stream();
    bufs.iter().map(|b| b.device_ptr(&stream).0).collect()
}

#[test]
fn batched_packed_forms_match_one_call_per_sequence() {
    const B: usize = 2;
    const T: usize = 3;
    let value_dim = 128 * NUM_V;
    let state = 128 * 128 * NUM_V;
    let seed = fresh_seed();
    for e in engines() {
        let qkv = e
            .htod(&random(B * T * CONV_DIM, seed, 1, 1.0))
            .expect("qkv");
        let w = e.htod(&random(CONV_DIM * D_CONV, seed, 2, 0.5)).expect("w");
        let beta_raw = e
            .htod(&random(B * T * NUM_V, seed, 3, 2.0))
            .expect("beta_raw");
        let alpha = e.htod(&random(B * T * NUM_V, seed, 4, 2.0)).expect("alpha");
        let dt_bias = e.htod(&random(NUM_V, seed, 5, 0.5)).expect("dt_bias");
        let a = e.htod(&random(NUM_V, seed, 6, 1.0)).expect("a");
        let rings0: Vec<Vec<f32>> = (0..B)
            .map(|b| random(CONV_DIM * PAD, seed, 10 + b as u64, 1.0))
            .collect();
        let states0: Vec<Vec<f32>> = (0..B)
            .map(|b| random(state, seed, 20 + b as u64, 0.3))
            .collect();

        // Runs the packed verify of all B sequences, either in one call per op (batched) or in
        // one call per sequence; returns every output, snapshot, final state and ring.
        let run = |batched: bool| -> Vec<Vec<f32>> {
            let rings: Vec<_> = rings0.iter().map(|r| e.htod(r).expect("ring")).collect();
            let canon: Vec<_> = states0.iter().map(|s| e.htod(s).expect("state")).collect();
            let alt: Vec<_> = (0..B)
                .map(|_| e.htod(&poison(state)).expect("alt"))
                .collect();
            let mut entries = Vec::new();
            for b in 0..B {
                entries.extend(addresses(&e, &[&rings[b], &canon[b], &alt[b]]));
            }
            let table = e.htod_u64(&entries).expect("table");
            let mut conv_outs = e.htod(&poison(B * T * CONV_DIM)).expect("conv_outs");
            let mut snap_conv = e
                .htod(&poison(B * (T - 1) * CONV_DIM * PAD))
                .expect("snap_conv");
            let mut q = e.htod(&poison(B * T * value_dim)).expect("q");
            let mut k = e.htod(&poison(B * T * value_dim)).expect("k");
            let mut v = e.htod(&poison(B * T * value_dim)).expect("v");
            let mut beta = e.htod(&poison(B * T * NUM_V)).expect("beta");
            let mut g_log = e.htod(&poison(B * T * NUM_V)).expect("g_log");
            let mut o_all = e.htod(&poison(B * T * value_dim)).expect("o_all");
            let mut snap_ssm = e.htod(&poison(B * (T - 1) * state)).expect("snap_ssm");
            let scale = 1.0 / 128f32.sqrt();
            if batched {
                e.ssm_conv1d_fused_decode_tloop_batched(
                    &qkv,
                    &table,
                    &w,
                    &mut conv_outs,
                    Some(&mut snap_conv),
                    CONV_DIM,
                    D_CONV,
                    T,
                    B,
                )
                .expect("batched conv");
                e.gdn_prep_decode_b(
                    &conv_outs,
                    &beta_raw,
                    &alpha,
                    &dt_bias,
                    &a,
                    &mut q,
                    &mut k,
                    &mut v,
                    &mut beta,
                    &mut g_log,
                    128,
                    NUM_V,
                    NUM_K,
                    KEY_DIM,
                    1e-6,
                    CONV_DIM,
                    B * T,
                )
                .expect("prep");
                e.gdn_scan_s128_tsnap_batched(
                    &q,
                    &k,
                    &v,
                    &g_log,
                    &beta,
                    &table,
                    &mut o_all,
                    NUM_V,
                    T,
                    B,
                    scale,
                    Some(&mut snap_ssm),
                )
                .expect("batched scan");
            } else {
                for b in 0..B {
                    let rows = |n: usize| b * T * n..(b + 1) * T * n;
                    let snaps = |n: usize| b * (T - 1) * n..(b + 1) * (T - 1) * n;
                    e.ssm_conv1d_fused_decode_tloop(
                        &qkv.slice(rows(CONV_DIM)),
                        &table.slice(3 * b..3 * b + 3),
                        &w,
                        &mut conv_outs.slice_mut(rows(CONV_DIM)),
                        Some(&mut snap_conv.slice_mut(snaps(CONV_DIM * PAD))),
                        CONV_DIM,
                        D_CONV,
                        T,
                    )
                    .expect("conv");
                    e.gdn_prep_decode_b(
                        &conv_outs.slice(rows(CONV_DIM)),
                        &beta_raw.slice(rows(NUM_V)),
                        &alpha.slice(rows(NUM_V)),
                        &dt_bias,
                        &a,
                        &mut q.slice_mut(rows(value_dim)),
                        &mut k.slice_mut(rows(value_dim)),
                        &mut v.slice_mut(rows(value_dim)),
                        &mut beta.slice_mut(rows(NUM_V)),
                        &mut g_log.slice_mut(rows(NUM_V)),
                        128,
                        NUM_V,
                        NUM_K,
                        KEY_DIM,
                        1e-6,
                        CONV_DIM,
                        T,
                    )
                    .expect("prep");
                    e.gdn_scan_s128_tsnap(
                        &q.slice(rows(value_dim)),
                        &k.slice(rows(value_dim)),
                        &v.slice(rows(value_dim)),
                        &g_log.slice(rows(NUM_V)),
                        &beta.slice(rows(NUM_V)),
                        &table.slice(3 * b..3 * b + 3),
                        &mut o_all.slice_mut(rows(value_dim)),
                        NUM_V,
                        T,
                        scale,
                        Some(&mut snap_ssm.slice_mut(snaps(state))),
                    )
                    .expect("scan");
                }
            }
            let mut got = vec![
                e.dtoh(&conv_outs).expect("dtoh"),
                e.dtoh(&snap_conv).expect("dtoh"),
                e.dtoh(&o_all).expect("dtoh"),
                e.dtoh(&snap_ssm).expect("dtoh"),
            ];
            for b in 0..B {
                // T is odd: the final state is in the alternate buffer.
                got.push(e.dtoh(&alt[b]).expect("dtoh"));
                got.push(e.dtoh(&rings[b]).expect("dtoh"));
            }
            got
        };
        let (separate, batched) = (run(false), run(true));
        for (i, (s, b)) in separate.iter().zip(&batched).enumerate() {
            assert!(
                s.iter().all(|x| x.is_finite()),
                "tensor {} not fully written",
                i
            );
            assert_eq!(bit_diffs(s, b), 0, "tensor {}, {}", i, replay(seed));
        }
    }
}
