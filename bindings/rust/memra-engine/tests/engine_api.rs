//! The safe facade's own guarantees: errors carry the library's message, buffers of another
//! engine are refused, buffers outlive the Engine value and move between threads, graphs keep
//! what they use alive, failed captures leave the engine usable and their buffers unusable, and
//! memra-engine 0.72's single-sequence ops and the device-to-device copy (built on the
//! single-sequence conv) give the bits of the table-driven ops, eagerly and in graphs. Every
//! test runs on the CPU backend and, where a device is usable, on CUDA; inputs are fresh random
//! values (MEMRA_TEST_SEED=0x... replays a failure's inputs).

mod common;

use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use common::{
    bit_diffs, bits, engine_on, engines, fresh_seed, message, poison, random, replay, status,
    POISON,
};
use memra_engine::{
    Backend, CudaSlice, DevicePtr, Engine, EngineOptions, Status, VerifyArgs, VerifyMode,
};

const NUM_K: usize = 2;
const NUM_V: usize = 4;
const D_CONV: usize = 4;
const KEY_DIM: usize = 128 * NUM_K;
const CONV_DIM: usize = 2 * KEY_DIM + 128 * NUM_V;
const PAD: usize = D_CONV - 1;
/// The calling thread's `memra_last_error_message()`.
fn last_library_message() -> String {
    // SAFETY: the library returns a valid NUL-terminated string, never NULL.
    let message = unsafe { std::ffi::CStr::from_ptr(memra_sys::memra_last_error_message()) };
    message.to_string_lossy().into_owned()
}

/// The packed conv of one sequence, its inputs and its outputs.
struct ConvCase {
    qkv: CudaSlice<f32>,
    w: CudaSlice<f32>,
    ring: CudaSlice<f32>,
    table: CudaSlice<u64>,
    ring0: Vec<f32>,
    t: usize,
}

impl ConvCase {
    fn new(e: &Engine, seed: u64, t: usize) -> ConvCase {
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

    fn run(&self, e: &Engine, out: &mut CudaSlice<f32>) -> memra_engine::Result<()> {
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
        assert_eq!(status(&*err), Status::Unsupported, "{}", err);
        assert!(
            message(&*err).contains("memra_gdn_prep_decode_b")
                && message(&*err).contains("d_state"),
            "the library's message names the function and the parameter: {}",
            err
        );
        assert!(
            err.to_string().contains("MEMRA_STATUS_UNSUPPORTED"),
            "{}",
            err
        );
        assert!(err.to_string().contains("d_state"));
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
        assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
        assert!(message(&*err).contains("conv_outs"), "{}", err);
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
        assert_eq!(status(&*err), Status::InvalidArgument);
        assert!(message(&*err).contains("conv_outs") && message(&*err).contains("another engine"));
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
        let (graph, _keeper) = e
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
        let made = RefCell::new(None);
        let (graph, keeper) = e
            .capture_graph_retained(|step_engine| {
                let mut out = step_engine.uninit(4 * CONV_DIM)?;
                case.run(step_engine, &mut out)?;
                // The captured call's buffer is the one replays write.
                *made.borrow_mut() = Some(out);
                Ok(())
            })
            .expect("capture");
        assert_eq!(keeper.len(), 1, "the keeper holds the graph's resources");
        let mut out = made.into_inner().expect("the step ran");
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
        drop(keeper);
        // The buffer outlives the CudaGraph value; the library's graph lives until it is dropped.
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
        assert_eq!(status(&*err), Status::CaptureError, "{}", err);
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
                assert_eq!(status(&*refused), Status::CaptureError);
                Ok(())
            })
            .expect_err("a step that reads back cannot be captured");
        assert_eq!(status(&*err), Status::CaptureError);
        assert!(message(&*err).contains("memra_dtoh_f32"), "{}", err);
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
                assert_eq!(status(&*inner), Status::CaptureError, "{}", inner);
                Ok(())
            })
            .expect_err("the outer capture fails too");
        assert_eq!(status(&*err), Status::CaptureError, "{}", err);
        assert!(message(&*err).contains("nested"), "{}", err);
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
        let graph = e
            .capture_graph(|_e: &Engine| Ok(()))
            .expect("the engine is usable after the panic");
        graph.launch().expect("launch");
    }
}

#[test]
fn buffers_of_a_failed_capture_are_refused_and_never_freed_twice() {
    let seed = fresh_seed();
    for e in engines() {
        let stash: RefCell<Vec<CudaSlice<f32>>> = RefCell::new(Vec::new());
        e.capture_graph_retained(|_e: &Engine| -> Result<(), memra_engine::StepError> {
            stash.borrow_mut().push(e.zeros(256)?);
            stash.borrow_mut().push(e.zeros(256)?);
            Err(Box::new(StepFailed(seed)))
        })
        .expect_err("the step failed");
        let mut stash = stash.into_inner();
        assert_eq!(stash.len(), 2);
        let err = e.dtoh(&stash[0]).expect_err("a released buffer");
        assert_eq!(status(&*err), Status::InvalidArgument);
        assert!(message(&*err).contains("capture that failed"), "{}", err);
        // New buffers of the same size are likely to take the released memory; neither
        // dropping nor freeing the stale handles may free them.
        let host = random(256, seed, 7, 1.0);
        let fresh: Vec<_> = (0..4).map(|_| e.htod(&host).expect("fresh")).collect();
        let freed = stash.pop().expect("stashed");
        assert_eq!(
            status(&*freed.free().expect_err("already released")),
            Status::InvalidArgument
        );
        // Dropping the other stale handle calls nothing that fails: the thread's last library
        // error stays the one made here (an allocation whose byte count overflows).
        let marker = e.uninit(usize::MAX).expect_err("an impossible allocation");
        assert_eq!(last_library_message(), message(&*marker));
        drop(stash);
        assert_eq!(
            last_library_message(),
            message(&*marker),
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
fn addresses(e: &Engine, bufs: &[&CudaSlice<f32>]) -> Vec<u64> {
    let stream = e.stream();
    bufs.iter().map(|b| b.device_ptr(&stream).0).collect()
}

/// Rings, canonical states, alternate states and their `[B, 3]` table.
type Sequences = (
    Vec<CudaSlice<f32>>,
    Vec<CudaSlice<f32>>,
    Vec<CudaSlice<f32>>,
    CudaSlice<u64>,
);

/// The inputs of a packed verify of `b_n` sequences x `t` rows at the small shape: the
/// activations and weights on the engine, each sequence's initial ring and state on the host.
struct Batch {
    qkv: CudaSlice<f32>,
    w: CudaSlice<f32>,
    beta_raw: CudaSlice<f32>,
    alpha: CudaSlice<f32>,
    dt_bias: CudaSlice<f32>,
    a: CudaSlice<f32>,
    rings0: Vec<Vec<f32>>,
    states0: Vec<Vec<f32>>,
    b_n: usize,
    t: usize,
}

/// Every tensor a packed verify of a [`Batch`] writes, in the order `tensors` lists them.
struct Packed {
    conv_outs: CudaSlice<f32>,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    beta: CudaSlice<f32>,
    g_log: CudaSlice<f32>,
    o: CudaSlice<f32>,
    snap_conv: CudaSlice<f32>,
    snap_ssm: CudaSlice<f32>,
}

impl Packed {
    /// Poisoned outputs for `b_n` sequences x `t` rows.
    fn poisoned(e: &Engine, b_n: usize, t: usize) -> Packed {
        let fresh = |n: usize| e.htod(&poison(n)).expect("output");
        let (rows, heads) = (b_n * t * VALUE_DIM, b_n * t * NUM_V);
        Packed {
            conv_outs: fresh(b_n * t * CONV_DIM),
            q: fresh(rows),
            k: fresh(rows),
            v: fresh(rows),
            beta: fresh(heads),
            g_log: fresh(heads),
            o: fresh(rows),
            snap_conv: fresh(b_n * (t - 1) * CONV_DIM * PAD),
            snap_ssm: fresh(b_n * (t - 1) * STATE),
        }
    }

    /// The tensors' contents.
    fn tensors(&self, e: &Engine) -> Vec<Vec<f32>> {
        [
            &self.conv_outs,
            &self.q,
            &self.k,
            &self.v,
            &self.beta,
            &self.g_log,
            &self.o,
            &self.snap_conv,
            &self.snap_ssm,
        ]
        .iter()
        .map(|b| e.dtoh(*b).expect("dtoh"))
        .collect()
    }
}

impl Batch {
    fn new(e: &Engine, seed: u64, b_n: usize, t: usize) -> Batch {
        let up = |len: usize, stream: u64, spread: f32| {
            e.htod(&random(len, seed, stream, spread)).expect("htod")
        };
        Batch {
            qkv: up(b_n * t * CONV_DIM, 1, 1.0),
            w: up(CONV_DIM * D_CONV, 2, 0.5),
            beta_raw: up(b_n * t * NUM_V, 3, 2.0),
            alpha: up(b_n * t * NUM_V, 4, 2.0),
            dt_bias: up(NUM_V, 5, 0.5),
            a: up(NUM_V, 6, 1.0),
            rings0: (0..b_n)
                .map(|b| random(CONV_DIM * PAD, seed, 10 + b as u64, 1.0))
                .collect(),
            states0: (0..b_n)
                .map(|b| random(STATE, seed, 20 + b as u64, 0.3))
                .collect(),
            b_n,
            t,
        }
    }

    /// The 1.0 packed program over every sequence of `table` (one batched conv, prep and
    /// scan), into poisoned outputs.
    fn packed_program(&self, e: &Engine, table: &CudaSlice<u64>) -> Packed {
        let (b_n, t) = (self.b_n, self.t);
        let mut p = Packed::poisoned(e, b_n, t);
        e.ssm_conv1d_fused_decode_tloop_batched(
            &self.qkv,
            table,
            &self.w,
            &mut p.conv_outs,
            Some(&mut p.snap_conv),
            CONV_DIM,
            D_CONV,
            t,
            b_n,
        )
        .expect("batched conv");
        e.gdn_prep_decode_b(
            &p.conv_outs,
            &self.beta_raw,
            &self.alpha,
            &self.dt_bias,
            &self.a,
            &mut p.q,
            &mut p.k,
            &mut p.v,
            &mut p.beta,
            &mut p.g_log,
            128,
            NUM_V,
            NUM_K,
            KEY_DIM,
            1e-6,
            CONV_DIM,
            b_n * t,
        )
        .expect("prep");
        e.gdn_scan_s128_tsnap_batched(
            &p.q,
            &p.k,
            &p.v,
            &p.g_log,
            &p.beta,
            table,
            &mut p.o,
            NUM_V,
            t,
            b_n,
            SCALE,
            Some(&mut p.snap_ssm),
        )
        .expect("batched scan");
        p
    }

    /// Every sequence's ring and canonical state at their initial values, a poisoned
    /// alternate state, and the `[b_n, 3]` table of their addresses.
    fn sequences(&self, e: &Engine) -> Sequences {
        let rings: Vec<_> = self
            .rings0
            .iter()
            .map(|r| e.htod(r).expect("ring"))
            .collect();
        let canon: Vec<_> = self
            .states0
            .iter()
            .map(|s| e.htod(s).expect("state"))
            .collect();
        let alt: Vec<_> = (0..rings.len())
            .map(|_| e.htod(&poison(STATE)).expect("alt"))
            .collect();
        let mut entries = Vec::new();
        for b in 0..rings.len() {
            entries.extend(addresses(e, &[&rings[b], &canon[b], &alt[b]]));
        }
        let table = e.htod_u64(&entries).expect("table");
        (rings, canon, alt, table)
    }
}

#[test]
fn batched_packed_forms_match_one_call_per_sequence() {
    const B: usize = 2;
    const T: usize = 3;
    let seed = fresh_seed();
    for e in engines() {
        let batch = Batch::new(&e, seed, B, T);
        // Runs the packed verify of all B sequences, either in one call per op (batched) or in
        // one call per sequence; returns every output, snapshot, final state and ring.
        let run = |batched: bool| -> Vec<Vec<f32>> {
            let (rings, _canon, alt, table) = batch.sequences(&e);
            let p = if batched {
                batch.packed_program(&e, &table)
            } else {
                one_call_per_sequence(&e, &batch, &table)
            };
            let mut got = p.tensors(&e);
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

/// The packed program of `batch` as one call per op and sequence, each sequence with its own
/// snapshot buffers, which are then laid out sequence-major like the batched call's.
fn one_call_per_sequence(e: &Engine, batch: &Batch, table: &CudaSlice<u64>) -> Packed {
    let (b_n, t) = (batch.b_n, batch.t);
    let mut p = Packed::poisoned(e, b_n, t);
    let (mut conv_snaps, mut ssm_snaps) = (Vec::new(), Vec::new());
    for b in 0..b_n {
        let rows = |n: usize| b * t * n..(b + 1) * t * n;
        let mut one = Packed::poisoned(e, 1, t);
        e.ssm_conv1d_fused_decode_tloop(
            &batch.qkv.slice(rows(CONV_DIM)),
            &table.slice(3 * b..3 * b + 3),
            &batch.w,
            &mut p.conv_outs.slice_mut(rows(CONV_DIM)),
            Some(&mut one.snap_conv),
            CONV_DIM,
            D_CONV,
            t,
        )
        .expect("conv");
        e.gdn_prep_decode_b(
            &p.conv_outs.slice(rows(CONV_DIM)),
            &batch.beta_raw.slice(rows(NUM_V)),
            &batch.alpha.slice(rows(NUM_V)),
            &batch.dt_bias,
            &batch.a,
            &mut p.q.slice_mut(rows(VALUE_DIM)),
            &mut p.k.slice_mut(rows(VALUE_DIM)),
            &mut p.v.slice_mut(rows(VALUE_DIM)),
            &mut p.beta.slice_mut(rows(NUM_V)),
            &mut p.g_log.slice_mut(rows(NUM_V)),
            128,
            NUM_V,
            NUM_K,
            KEY_DIM,
            1e-6,
            CONV_DIM,
            t,
        )
        .expect("prep");
        e.gdn_scan_s128_tsnap(
            &p.q.slice(rows(VALUE_DIM)),
            &p.k.slice(rows(VALUE_DIM)),
            &p.v.slice(rows(VALUE_DIM)),
            &p.g_log.slice(rows(NUM_V)),
            &p.beta.slice(rows(NUM_V)),
            &table.slice(3 * b..3 * b + 3),
            &mut p.o.slice_mut(rows(VALUE_DIM)),
            NUM_V,
            t,
            SCALE,
            Some(&mut one.snap_ssm),
        )
        .expect("scan");
        conv_snaps.extend(e.dtoh(&one.snap_conv).expect("dtoh"));
        ssm_snaps.extend(e.dtoh(&one.snap_ssm).expect("dtoh"));
    }
    e.htod_f32_into(&conv_snaps, &mut p.snap_conv)
        .expect("snap_conv");
    e.htod_f32_into(&ssm_snaps, &mut p.snap_ssm)
        .expect("snap_ssm");
    p
}

/// The inputs of a GDN decode of `t` rows of one sequence at the small shape.
struct Decode {
    qkv: Vec<f32>,
    beta_raw: Vec<f32>,
    alpha: Vec<f32>,
    w: Vec<f32>,
    dt_bias: Vec<f32>,
    a: Vec<f32>,
    ring0: Vec<f32>,
    state0: Vec<f32>,
    t: usize,
}

const VALUE_DIM: usize = 128 * NUM_V;
const STATE: usize = 128 * 128 * NUM_V;

impl Decode {
    fn new(seed: u64, t: usize) -> Decode {
        Decode {
            qkv: random(t * CONV_DIM, seed, 1, 1.0),
            beta_raw: random(t * NUM_V, seed, 2, 2.0),
            alpha: random(t * NUM_V, seed, 3, 2.0),
            w: random(CONV_DIM * D_CONV, seed, 4, 0.5),
            dt_bias: random(NUM_V, seed, 5, 0.5),
            a: random(NUM_V, seed, 6, 1.0),
            ring0: random(CONV_DIM * PAD, seed, 7, 1.0),
            state0: random(STATE, seed, 8, 0.3),
            t,
        }
    }
}

/// What a decode produced: conv outputs, scan outputs (row-major over the rows), the final
/// state and the final ring.
#[derive(Debug, PartialEq)]
struct Decoded {
    conv: Vec<f32>,
    o: Vec<f32>,
    state: Vec<u32>,
    ring: Vec<u32>,
}

const SCALE: f32 = 0.088_388_35;

/// The 0.136 per-row program through pointer tables (the seed's reference).
fn decode_with_tables(e: &Engine, d: &Decode) -> Decoded {
    let qkv = e.htod(&d.qkv).expect("qkv");
    let beta_raw = e.htod(&d.beta_raw).expect("beta_raw");
    let alpha = e.htod(&d.alpha).expect("alpha");
    let w = e.htod(&d.w).expect("w");
    let dt_bias = e.htod(&d.dt_bias).expect("dt_bias");
    let a = e.htod(&d.a).expect("a");
    let ring = e.htod(&d.ring0).expect("ring");
    let s0 = e.htod(&d.state0).expect("s0");
    let s1 = e.htod(&poison(STATE)).expect("s1");
    let p = addresses(e, &[&ring, &s0, &s1]);
    let table = e
        .htod_u64(&[p[0], p[1], p[2], p[0], p[2], p[1]])
        .expect("table");
    let mut conv_out = e.uninit(CONV_DIM).expect("conv_out");
    let (mut q, mut k, mut v) = (
        e.uninit(VALUE_DIM).expect("q"),
        e.uninit(VALUE_DIM).expect("k"),
        e.uninit(VALUE_DIM).expect("v"),
    );
    let (mut beta, mut g_log) = (e.uninit(NUM_V).expect("b"), e.uninit(NUM_V).expect("g"));
    let mut o = e.uninit(VALUE_DIM).expect("o");
    let (mut conv, mut outs) = (Vec::new(), Vec::new());
    for r in 0..d.t {
        let base = if r % 2 == 0 { 0 } else { 3 };
        // row(n): row r of a [t, n] tensor; entry(i): this row's ring, input state and output
        // state addresses in the table.
        let row = |n: usize| r * n..(r + 1) * n;
        let entry = |i: usize| table.slice(base + i..base + i + 1);
        let (ring_v, in_v, out_v) = (entry(0), entry(1), entry(2));
        let (qkv_r, beta_r, alpha_r) = (
            qkv.slice(row(CONV_DIM)),
            beta_raw.slice(row(NUM_V)),
            alpha.slice(row(NUM_V)),
        );
        e.ssm_conv1d_fused_decode_b_view(&qkv_r, &ring_v, &w, &mut conv_out, CONV_DIM, D_CONV, 1)
            .expect("conv row");
        e.gdn_prep_decode_b_view(
            &conv_out, &beta_r, &alpha_r, &dt_bias, &a, &mut q, &mut k, &mut v, &mut beta,
            &mut g_log, 128, NUM_V, NUM_K, KEY_DIM, 1e-6, CONV_DIM, 1,
        )
        .expect("prep row");
        e.gdn_scan_s128_batched_view(
            &q, &k, &v, &g_log, &beta, &in_v, &out_v, &mut o, NUM_V, 1, SCALE,
        )
        .expect("scan row");
        conv.extend(e.dtoh(&conv_out).expect("dtoh"));
        outs.extend(e.dtoh(&o).expect("dtoh"));
    }
    let last = if d.t % 2 == 1 { &s1 } else { &s0 };
    Decoded {
        conv,
        o: outs,
        state: bits(&e.dtoh(last).expect("state")),
        ring: bits(&e.dtoh(&ring).expect("ring")),
    }
}

/// memra-engine 0.72's single-sequence decode step, as decode.rs writes it: the ring and the
/// two resident states are passed directly, the scan writes the spare state, then the host
/// swaps the two.
fn decode_single_sequence(e: &Engine, d: &Decode) -> Decoded {
    let w = e.htod(&d.w).expect("w");
    let dt_bias = e.htod(&d.dt_bias).expect("dt_bias");
    let a = e.htod(&d.a).expect("a");
    let mut conv_state = e.htod(&d.ring0).expect("ring");
    // The state ping-pongs: each step reads `state` and writes `alt`, then they swap.
    let mut state = e.htod(&d.state0).expect("state");
    let mut alt = e.htod(&poison(STATE)).expect("alt");
    let (mut conv, mut outs) = (Vec::new(), Vec::new());
    for r in 0..d.t {
        let qkv_mixed = e
            .htod(&d.qkv[r * CONV_DIM..(r + 1) * CONV_DIM])
            .expect("qkv");
        let beta_raw = e
            .htod(&d.beta_raw[r * NUM_V..(r + 1) * NUM_V])
            .expect("beta_raw");
        let alpha = e.htod(&d.alpha[r * NUM_V..(r + 1) * NUM_V]).expect("alpha");
        let mut conv_out = e.uninit(CONV_DIM).expect("conv_out");
        e.ssm_conv1d_fused_decode(
            &qkv_mixed,
            &mut conv_state,
            &w,
            &mut conv_out,
            CONV_DIM,
            D_CONV,
        )
        .expect("conv");
        let mut o = e.uninit(VALUE_DIM).expect("o");
        let (mut q_l2, mut k_l2, mut v_gd) = (
            e.uninit(VALUE_DIM).expect("q"),
            e.uninit(VALUE_DIM).expect("k"),
            e.uninit(VALUE_DIM).expect("v"),
        );
        let (mut beta, mut g_log) = (e.uninit(NUM_V).expect("b"), e.uninit(NUM_V).expect("g"));
        e.gdn_prep_decode(
            &conv_out, &beta_raw, &alpha, &dt_bias, &a, &mut q_l2, &mut k_l2, &mut v_gd, &mut beta,
            &mut g_log, 128, NUM_V, NUM_K, KEY_DIM, 1e-6,
        )
        .expect("prep");
        e.gdn_scan_s128(
            &q_l2, &k_l2, &v_gd, &g_log, &beta, &state, &mut alt, &mut o, NUM_V, 1, SCALE,
        )
        .expect("scan");
        std::mem::swap(&mut state, &mut alt);
        conv.extend(e.dtoh(&conv_out).expect("dtoh"));
        outs.extend(e.dtoh(&o).expect("dtoh"));
    }
    Decoded {
        conv,
        o: outs,
        state: bits(&e.dtoh(&state).expect("state")),
        ring: bits(&e.dtoh(&conv_state).expect("ring")),
    }
}

fn assert_same(what: &str, want: &Decoded, got: &Decoded, seed: u64) {
    assert!(
        want.o.iter().chain(&want.conv).all(|x| x.is_finite()),
        "{}: the reference is not finite",
        what
    );
    assert_eq!(
        bit_diffs(&want.conv, &got.conv),
        0,
        "{}: conv outputs, {}",
        what,
        replay(seed)
    );
    assert_eq!(
        bit_diffs(&want.o, &got.o),
        0,
        "{}: scan outputs, {}",
        what,
        replay(seed)
    );
    assert!(
        want.state == got.state,
        "{}: final state, {}",
        what,
        replay(seed)
    );
    assert!(
        want.ring == got.ring,
        "{}: final ring, {}",
        what,
        replay(seed)
    );
}

#[test]
fn single_sequence_ops_give_the_bits_of_the_table_driven_ops() {
    let seed = fresh_seed();
    for e in engines() {
        for t in [1usize, 2, 3, 5] {
            let d = Decode::new(seed ^ t as u64, t);
            let want = decode_with_tables(&e, &d);
            let got = decode_single_sequence(&e, &d);
            assert_same(&format!("{:?} t={}", e.backend(), t), &want, &got, seed);
        }
    }
}

#[test]
fn the_t_row_scan_matches_t_per_row_steps_and_leaves_its_input_state() {
    let seed = fresh_seed();
    for e in engines() {
        for t in [1usize, 2, 3, 4, 7] {
            let d = Decode::new(seed ^ (t as u64) << 8, t);
            let want = decode_with_tables(&e, &d);
            // The packed conv and prep over all t rows, then ONE single-sequence scan of t rows.
            let ring = e.htod(&d.ring0).expect("ring");
            let p = addresses(&e, &[&ring]);
            let table = e.htod_u64(&[p[0], 0, 0]).expect("table");
            let (qkv, w) = (e.htod(&d.qkv).expect("qkv"), e.htod(&d.w).expect("w"));
            let mut conv_outs = e.uninit(t * CONV_DIM).expect("conv_outs");
            e.ssm_conv1d_fused_decode_tloop(
                &qkv,
                &table,
                &w,
                &mut conv_outs,
                None,
                CONV_DIM,
                D_CONV,
                t,
            )
            .expect("conv");
            let (beta_raw, alpha) = (
                e.htod(&d.beta_raw).expect("b"),
                e.htod(&d.alpha).expect("a"),
            );
            let (dt_bias, a) = (e.htod(&d.dt_bias).expect("dt"), e.htod(&d.a).expect("a"));
            let (mut q, mut k, mut v) = (
                e.uninit(t * VALUE_DIM).expect("q"),
                e.uninit(t * VALUE_DIM).expect("k"),
                e.uninit(t * VALUE_DIM).expect("v"),
            );
            let (mut beta, mut g) = (
                e.uninit(t * NUM_V).expect("b"),
                e.uninit(t * NUM_V).expect("g"),
            );
            e.gdn_prep_decode_b(
                &conv_outs, &beta_raw, &alpha, &dt_bias, &a, &mut q, &mut k, &mut v, &mut beta,
                &mut g, 128, NUM_V, NUM_K, KEY_DIM, 1e-6, CONV_DIM, t,
            )
            .expect("prep");
            // Both states inside one larger buffer, as views, with poisoned margins around them.
            let margin = 37;
            let states = e
                .htod(
                    &[
                        poison(margin),
                        d.state0.clone(),
                        poison(margin + STATE + margin),
                    ]
                    .concat(),
                )
                .expect("states");
            let mut o = e.htod(&poison(t * VALUE_DIM)).expect("o");
            {
                let (input, output) = (margin, 2 * margin + STATE);
                let whole = e.dtoh(&states).expect("dtoh");
                let mut copy = e.htod(&whole).expect("copy");
                let state_in = states.slice(input..input + STATE);
                let mut state_out = copy.slice_mut(output..output + STATE);
                e.gdn_scan_s128_view(
                    &q,
                    &k,
                    &v,
                    &g,
                    &beta,
                    &state_in,
                    &mut state_out,
                    &mut o,
                    NUM_V,
                    t,
                    SCALE,
                )
                .expect("scan view");
                let after = e.dtoh(&copy).expect("dtoh");
                assert!(
                    bits(&after[output..output + STATE]) == want.state,
                    "t={}: the view scan's final state, {}",
                    t,
                    replay(seed)
                );
                assert!(
                    after[..output]
                        .iter()
                        .zip(&whole[..output])
                        .all(|(x, y)| x.to_bits() == y.to_bits())
                        && after[output + STATE..]
                            .iter()
                            .all(|x| x.to_bits() == POISON),
                    "t={}: the view scan wrote outside its output view",
                    t
                );
            }
            let got_o = e.dtoh(&o).expect("dtoh");
            assert_eq!(
                bit_diffs(&want.o, &got_o),
                0,
                "t={}: o of the view scan, {}",
                t,
                replay(seed)
            );
            // The slice form: state_in untouched, state_out the final state.
            let s_in = e.htod(&d.state0).expect("s_in");
            let mut s_out = e.htod(&poison(STATE)).expect("s_out");
            let mut o2 = e.htod(&poison(t * VALUE_DIM)).expect("o2");
            e.gdn_scan_s128(
                &q, &k, &v, &g, &beta, &s_in, &mut s_out, &mut o2, NUM_V, t, SCALE,
            )
            .expect("scan");
            assert!(
                bits(&e.dtoh(&s_out).expect("dtoh")) == want.state,
                "t={}: final state",
                t
            );
            assert!(
                bits(&e.dtoh(&s_in).expect("dtoh")) == bits(&d.state0),
                "t={}: the input state changed",
                t
            );
            assert_eq!(
                bit_diffs(&want.o, &e.dtoh(&o2).expect("dtoh")),
                0,
                "t={}: o",
                t
            );
        }
    }
}

#[test]
fn single_sequence_ops_refuse_short_states_before_writing_anything() {
    let seed = fresh_seed();
    for e in engines() {
        let q = e.htod(&random(2 * VALUE_DIM, seed, 1, 1.0)).expect("q");
        let g = e.htod(&random(2 * NUM_V, seed, 2, 0.1)).expect("g");
        let s_in = e.htod(&random(STATE, seed, 3, 0.3)).expect("s_in");
        let mut short = e.htod(&poison(STATE - 1)).expect("short");
        let mut o = e.htod(&poison(2 * VALUE_DIM)).expect("o");
        let err = e
            .gdn_scan_s128(
                &q, &q, &q, &g, &g, &s_in, &mut short, &mut o, NUM_V, 2, SCALE,
            )
            .expect_err("a state one element short");
        assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
        assert!(message(&*err).contains("state_out"), "{}", err);
        // Inputs for fewer rows than `t`: refused before any row runs.
        let mut s_out = e.htod(&poison(STATE)).expect("s_out");
        let err = e
            .gdn_scan_s128(
                &q, &q, &q, &g, &g, &s_in, &mut s_out, &mut o, NUM_V, 3, SCALE,
            )
            .expect_err("inputs for 2 rows, t = 3");
        assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
        let err = e
            .gdn_scan_s128(
                &q,
                &q,
                &q,
                &g,
                &g,
                &s_in,
                &mut s_out,
                &mut o,
                NUM_V,
                2,
                f32::NAN,
            )
            .expect_err("a NaN scale");
        assert!(message(&*err).contains("scale"), "{}", err);
        for (what, buf) in [("state_out", &s_out), ("o", &o)] {
            assert!(
                e.dtoh(buf)
                    .expect("dtoh")
                    .iter()
                    .all(|x| x.to_bits() == POISON),
                "a refused scan wrote {}",
                what
            );
        }
        let mut ring = e.htod(&poison(CONV_DIM * PAD - 1)).expect("ring");
        let mut conv_out = e.htod(&poison(CONV_DIM)).expect("conv_out");
        let w = e.htod(&random(CONV_DIM * D_CONV, seed, 4, 0.5)).expect("w");
        let err = e
            .ssm_conv1d_fused_decode(&q, &mut ring, &w, &mut conv_out, CONV_DIM, D_CONV)
            .expect_err("a ring one element short");
        assert!(message(&*err).contains("conv_state"), "{}", err);
        assert!(e
            .dtoh(&ring)
            .expect("dtoh")
            .iter()
            .all(|x| x.to_bits() == POISON));
    }
}

#[test]
fn the_ring_rebuild_gives_the_verify_s_ring_after_each_accepted_row() {
    const T: usize = 5;
    let seed = fresh_seed();
    for e in engines() {
        let mut case = ConvCase::new(&e, seed, T);
        let mut snaps = e
            .htod(&poison((T - 1) * CONV_DIM * PAD))
            .expect("snap_conv");
        let mut outs = e.uninit(T * CONV_DIM).expect("conv_outs");
        e.ssm_conv1d_fused_decode_tloop(
            &case.qkv,
            &case.table,
            &case.w,
            &mut outs,
            Some(&mut snaps),
            CONV_DIM,
            D_CONV,
            T,
        )
        .expect("packed conv");
        let snaps = e.dtoh(&snaps).expect("dtoh");
        let last = e.dtoh(&case.ring).expect("dtoh");
        case.rewind(&e);
        // The ring after j accepted rows: the initial one, a snapshot, or the final one.
        let want = |j: usize| -> Vec<u32> {
            match j {
                0 => bits(&case.ring0),
                j if j < T => bits(&snaps[(j - 1) * CONV_DIM * PAD..j * CONV_DIM * PAD]),
                _ => bits(&last),
            }
        };
        for j in 0..=T {
            let mut conv_state = e.htod(&poison(CONV_DIM * PAD)).expect("conv_state");
            e.ssm_conv_ring_rebuild(&case.qkv, &case.ring, &mut conv_state, CONV_DIM, j, D_CONV)
                .expect("rebuild");
            assert!(
                bits(&e.dtoh(&conv_state).expect("dtoh")) == want(j),
                "j={}: rebuilt ring, {}",
                j,
                replay(seed)
            );
            assert!(
                bits(&e.dtoh(&case.ring).expect("dtoh")) == bits(&case.ring0),
                "j={}: the old ring changed",
                j
            );
        }
        // Too few rows for j: refused before the ring is touched.
        let mut conv_state = e.htod(&poison(CONV_DIM * PAD)).expect("conv_state");
        let err = e
            .ssm_conv_ring_rebuild(
                &case.qkv,
                &case.ring,
                &mut conv_state,
                CONV_DIM,
                T + 1,
                D_CONV,
            )
            .expect_err("j above the rows given");
        assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
        assert!(message(&*err).contains("'qkv'"), "{}", err);
        assert!(e
            .dtoh(&conv_state)
            .expect("dtoh")
            .iter()
            .all(|x| x.to_bits() == POISON));
        // In a graph, as spec.rs's commit replays it.
        let graph = e
            .capture_graph(|e: &Engine| {
                e.ssm_conv_ring_rebuild(
                    &case.qkv,
                    &case.ring,
                    &mut conv_state,
                    CONV_DIM,
                    2,
                    D_CONV,
                )?;
                Ok(())
            })
            .expect("capture");
        e.htod_f32_into(&poison(CONV_DIM * PAD), &mut conv_state)
            .expect("poison");
        graph.launch().expect("replay");
        assert!(
            bits(&e.dtoh(&conv_state).expect("dtoh")) == want(2),
            "replayed rebuild, {}",
            replay(seed)
        );
    }
}

#[test]
fn copies_are_bit_exact_and_write_only_their_range() {
    let seed = fresh_seed();
    let specials = [
        0x7fa0_0001u32, // a signalling NaN
        0xffc1_2345,    // a quiet NaN with a payload
        0x8000_0000,    // -0.0
        0x0000_0001,    // the smallest subnormal
        0x7f80_0000,    // +inf
        0xff80_0000,    // -inf
    ];
    for e in engines() {
        let mut host = random(4099, seed, 1, 5.0);
        for (i, &s) in specials.iter().enumerate() {
            host[i * 601] = f32::from_bits(s);
        }
        let src = e.htod(&host).expect("src");
        let clone = e.clone_dtod(&src).expect("clone_dtod");
        assert!(
            bits(&e.dtoh(&clone).expect("dtoh")) == bits(&host),
            "clone_dtod, {}",
            replay(seed)
        );
        let mut dst = e.htod(&poison(5000)).expect("dst");
        e.copy_into(&mut dst, 700, &src, 4000).expect("copy_into");
        let got = e.dtoh(&dst).expect("dtoh");
        assert!(
            got[..700]
                .iter()
                .chain(&got[4700..])
                .all(|x| x.to_bits() == POISON),
            "outside the range"
        );
        assert!(
            bits(&got[700..4700]) == bits(&host[..4000]),
            "copy_into, {}",
            replay(seed)
        );
        // Into a view, from a view.
        e.copy_into(&mut dst.slice_mut(10..20), 3, &src.slice(100..), 5)
            .expect("views");
        assert!(bits(&e.dtoh(&dst.slice(13..18)).expect("dtoh")) == bits(&host[100..105]));
        e.dtod_copy_into(&src.slice(200..230), &mut dst, 4950)
            .expect("dtod_copy_into");
        assert!(bits(&e.dtoh(&dst.slice(4950..4980)).expect("dtoh")) == bits(&host[200..230]));
        assert!(e
            .dtoh(&dst.slice(4980..))
            .expect("dtoh")
            .iter()
            .all(|x| x.to_bits() == POISON));
        e.copy_into(&mut dst, 0, &src, 0).expect("an empty copy");
        for (off, len) in [(4999usize, 2usize), (0, 4100), (usize::MAX, 2)] {
            let before = e.dtoh(&dst).expect("dtoh");
            let err = e
                .copy_into(&mut dst, off, &src, len)
                .expect_err("out of range");
            assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
            assert!(
                bits(&e.dtoh(&dst).expect("dtoh")) == bits(&before),
                "a refused copy wrote"
            );
        }
    }
}

#[test]
fn single_sequence_ops_and_copies_replay_in_a_graph() {
    let seed = fresh_seed();
    for e in engines() {
        let d = Decode::new(seed, 3);
        let want = decode_with_tables(&e, &d);
        let w = e.htod(&d.w).expect("w");
        let dt_bias = e.htod(&d.dt_bias).expect("dt_bias");
        let a = e.htod(&d.a).expect("a");
        let mut ring = e.htod(&d.ring0).expect("ring");
        let mut ssm_state = e.htod(&d.state0).expect("state");
        let mut ssm_state_alt = e.uninit(STATE).expect("alt");
        // The step's inputs live in fixed buffers the host rewrites before every replay.
        let mut qkv = e.uninit(CONV_DIM).expect("qkv");
        let (mut beta_raw, mut alpha) = (
            e.uninit(NUM_V).expect("beta_raw"),
            e.uninit(NUM_V).expect("alpha"),
        );
        let mut conv_out = e.uninit(CONV_DIM).expect("conv_out");
        let mut o = e.uninit(VALUE_DIM).expect("o");
        let (mut q, mut k, mut v) = (
            e.uninit(VALUE_DIM).expect("q"),
            e.uninit(VALUE_DIM).expect("k"),
            e.uninit(VALUE_DIM).expect("v"),
        );
        let (mut beta, mut g_log) = (e.uninit(NUM_V).expect("b"), e.uninit(NUM_V).expect("g"));
        e.htod_f32_into(&d.qkv[..CONV_DIM], &mut qkv)
            .expect("row 0");
        e.htod_f32_into(&d.beta_raw[..NUM_V], &mut beta_raw)
            .expect("row 0");
        e.htod_f32_into(&d.alpha[..NUM_V], &mut alpha)
            .expect("row 0");
        // decode.rs's graph form: the canonical state stays at a fixed address, the scan's
        // result is copied back into it inside the graph.
        let graph = e
            .capture_graph(|e: &Engine| {
                e.ssm_conv1d_fused_decode(&qkv, &mut ring, &w, &mut conv_out, CONV_DIM, D_CONV)?;
                e.gdn_prep_decode(
                    &conv_out, &beta_raw, &alpha, &dt_bias, &a, &mut q, &mut k, &mut v, &mut beta,
                    &mut g_log, 128, NUM_V, NUM_K, KEY_DIM, 1e-6,
                )?;
                e.gdn_scan_s128(
                    &q,
                    &k,
                    &v,
                    &g_log,
                    &beta,
                    &ssm_state,
                    &mut ssm_state_alt,
                    &mut o,
                    NUM_V,
                    1,
                    SCALE,
                )?;
                e.copy_into(&mut ssm_state, 0, &ssm_state_alt, STATE)?;
                Ok(())
            })
            .expect("capture");
        // The warm-ups advanced the state: start again from the initial one.
        e.htod_f32_into(&d.ring0, &mut ring).expect("rewind ring");
        e.htod_f32_into(&d.state0, &mut ssm_state)
            .expect("rewind state");
        let (mut conv, mut outs) = (Vec::new(), Vec::new());
        for r in 0..d.t {
            e.htod_f32_into(&d.qkv[r * CONV_DIM..(r + 1) * CONV_DIM], &mut qkv)
                .expect("row");
            e.htod_f32_into(&d.beta_raw[r * NUM_V..(r + 1) * NUM_V], &mut beta_raw)
                .expect("row");
            e.htod_f32_into(&d.alpha[r * NUM_V..(r + 1) * NUM_V], &mut alpha)
                .expect("row");
            graph.launch().expect("replay");
            conv.extend(e.dtoh(&conv_out).expect("dtoh"));
            outs.extend(e.dtoh(&o).expect("dtoh"));
        }
        let got = Decoded {
            conv,
            o: outs,
            state: bits(&e.dtoh(&ssm_state).expect("dtoh")),
            ring: bits(&e.dtoh(&ring).expect("dtoh")),
        };
        assert_same(&format!("{:?} graph", e.backend()), &want, &got, seed);
    }
}

#[test]
fn copies_at_any_offset_and_clones_made_in_a_step_replay_in_a_graph() {
    let seed = fresh_seed();
    for e in engines() {
        let host = random(256, seed, 1, 1.0);
        let src = e.htod(&host).expect("src");
        let mut dst = e.htod(&poison(512)).expect("dst");
        let clone = RefCell::new(None);
        // An offset no operation used before, and a buffer the step itself allocates: the
        // copies take their destination as an argument, so both are recorded.
        let graph = e
            .capture_graph(|e: &Engine| {
                e.copy_into(&mut dst, 17, &src, 256)?;
                *clone.borrow_mut() = Some(e.clone_dtod(&src)?);
                Ok(())
            })
            .expect("capture");
        e.htod_f32_into(&poison(512), &mut dst).expect("re-poison");
        let mut clone = clone.borrow_mut().take().expect("the step ran");
        e.htod_f32_into(&poison(256), &mut clone)
            .expect("poison the clone");
        graph.launch().expect("replay");
        let got = e.dtoh(&dst).expect("dtoh");
        assert!(
            bits(&got[17..273]) == bits(&host),
            "copy_into, {}",
            replay(seed)
        );
        assert!(got[..17]
            .iter()
            .chain(&got[273..])
            .all(|x| x.to_bits() == POISON));
        assert!(
            bits(&e.dtoh(&clone).expect("dtoh")) == bits(&host),
            "clone_dtod, {}",
            replay(seed)
        );
    }
}

#[test]
fn buffers_streams_and_graphs_outlive_the_engine_value() {
    let seed = fresh_seed();
    for e in engines() {
        let host = random(64, seed, 1, 1.0);
        let buf = e.htod(&host).expect("buf");
        let mut out = e.uninit(64).expect("out");
        let stream = e.stream();
        let graph = e
            .capture_graph(|e: &Engine| {
                e.copy_into(&mut out, 0, &buf, 64)?;
                Ok(())
            })
            .expect("capture");
        let moved = e.htod(&host).expect("moved");
        drop(e);
        // The library's engine is still alive: its stream synchronises and its graph replays.
        graph
            .launch()
            .expect("replay after the Engine value is gone");
        stream.synchronize().expect("synchronize");
        // A buffer dropped on another thread is freed there.
        std::thread::spawn(move || drop(moved))
            .join()
            .expect("thread");
        drop(graph);
        drop(buf);
        drop(out);
        stream.synchronize().expect("the last handle still works");
    }
}

#[test]
fn threads_share_one_engine_and_take_turns() {
    let seed = fresh_seed();
    for e in engines() {
        let e = std::sync::Arc::new(e);
        let workers: Vec<_> = (0..4u64)
            .map(|i| {
                let e = e.clone();
                std::thread::spawn(move || {
                    let host = random(1000, seed, 10 + i, 1.0);
                    let src = e.htod(&host).expect("htod");
                    let mut dst = e.uninit(1000).expect("uninit");
                    for round in 0..20 {
                        e.copy_into(&mut dst, 0, &src, 1000).expect("copy_into");
                        let got = e.dtoh(&dst).expect("dtoh");
                        assert!(bits(&got) == bits(&host), "thread {} round {}", i, round);
                    }
                    // The buffer leaves the thread that made it.
                    src
                })
            })
            .collect();
        let bufs: Vec<CudaSlice<f32>> = workers
            .into_iter()
            .map(|w| w.join().expect("thread"))
            .collect();
        for (i, b) in bufs.iter().enumerate() {
            assert!(
                bits(&e.dtoh(b).expect("dtoh")) == bits(&random(1000, seed, 10 + i as u64, 1.0))
            );
        }
    }
}

#[test]
fn empty_buffers_need_no_allocation() {
    for e in engines() {
        let (z, u, h) = (
            e.zeros(0).expect("zeros(0)"),
            e.uninit(0).expect("uninit(0)"),
            e.htod(&[]).expect("htod(&[])"),
        );
        for b in [&z, &u, &h] {
            assert!(b.is_empty());
            assert_eq!(e.dtoh(b).expect("dtoh"), Vec::<f32>::new());
        }
        let mut z = z;
        e.copy_into(&mut z, 0, &h, 0).expect("an empty copy");
        assert!(e.clone_dtod(&u).expect("an empty clone").is_empty());
        z.free().expect("free of an empty buffer");
    }
}

#[test]
fn host_owned_memory_is_used_but_never_freed() {
    let seed = fresh_seed();
    for e in engines() {
        let stream = e.stream();
        let host = random(300, seed, 1, 1.0);
        let owner = e.htod(&host).expect("owner");
        let addr = owner.device_ptr(&stream).0;
        // SAFETY: `owner` holds 300 f32s at `addr` and outlives `wrapped`.
        let mut wrapped = unsafe { e.wrap_device_ptr::<f32>(addr, 300) }.expect("wrap");
        assert!(bits(&e.dtoh(&wrapped).expect("dtoh")) == bits(&host));
        let new = random(300, seed, 2, 1.0);
        e.htod_f32_into(&new, &mut wrapped)
            .expect("write through the wrapper");
        drop(wrapped);
        // Dropping the wrapper freed nothing: the owner's contents and its own free are intact.
        assert!(bits(&e.dtoh(&owner).expect("dtoh")) == bits(&new));
        owner
            .free()
            .expect("the owner's buffer was never freed by the wrapper");
        // SAFETY (both): refused before anything is wrapped.
        let err = unsafe { e.wrap_device_ptr::<f32>(0, 4) }.expect_err("NULL");
        assert_eq!(status(&*err), Status::InvalidArgument);
        let err = unsafe { e.wrap_device_ptr::<u64>(addr + 4, 4) }.expect_err("misaligned");
        assert!(message(&*err).contains("aligned"), "{}", err);
        if e.backend() == Backend::Cpu {
            // On the CPU backend device memory is host memory: a Vec the host owns.
            let mut mine = vec![f32::from_bits(POISON); 16];
            // SAFETY: `mine` outlives `view` and is not touched while the engine writes it.
            let mut view =
                unsafe { e.wrap_device_ptr::<f32>(mine.as_mut_ptr() as u64, 16) }.expect("wrap");
            let src = e.htod(&random(16, seed, 3, 1.0)).expect("src");
            e.copy_into(&mut view, 0, &src, 16)
                .expect("copy into host memory");
            drop(view);
            assert!(bits(&mine) == bits(&random(16, seed, 3, 1.0)));
        }
    }
}

#[test]
fn u32_and_i32_buffers_round_trip() {
    let seed = fresh_seed();
    for e in engines() {
        let zeros = e.alloc_u32_zeroed(33).expect("alloc_u32_zeroed");
        assert_eq!(e.dtoh_u32(&zeros).expect("dtoh_u32"), vec![0u32; 33]);
        let values: Vec<u32> = (0..33u32)
            .map(|i| (seed as u32).rotate_left(i) ^ i)
            .collect();
        let mut buf = e.alloc_u32(33).expect("alloc_u32");
        e.htod_u32_into(&values, &mut buf).expect("htod_u32_into");
        assert_eq!(e.dtoh_u32(&buf).expect("dtoh_u32"), values);
        e.htod_u32_into(&[7, 8], &mut buf.slice_mut(31..))
            .expect("into a view");
        assert_eq!(
            e.dtoh_u32(&buf.slice(30..)).expect("dtoh"),
            vec![values[30], 7, 8]
        );
        let signed: Vec<i32> = values
            .iter()
            .map(|&v| v as i32)
            .chain([i32::MIN, -1, 0])
            .collect();
        let ints = e.htod_i32(&signed).expect("htod_i32");
        assert_eq!(e.dtoh_i32(&ints).expect("dtoh_i32"), signed);
        assert_eq!(
            e.dtoh_u32(&e.htod_u32(&values).expect("htod_u32"))
                .expect("dtoh"),
            values
        );
    }
}

/// The ABI 1.1 entry points through `VerifyArgs`: every field reaches the slot the library
/// reads (the one-launch verify gives the 1.0 packed program's bits for every tensor it is
/// asked for; the rollback and the journal commit move the states the accepted counts say; a
/// missing or foreign buffer is refused by name). Run on the CPU backend: their CUDA kernels
/// are checked by the C suite on a GPU machine.
#[test]
fn verify_args_reach_the_1_1_entry_points() {
    const B: usize = 2;
    const T: usize = 3;
    let seed = fresh_seed();
    let e = engine_on(Backend::Cpu).expect("CPU engine");
    let other = engine_on(Backend::Cpu).expect("second CPU engine");
    let batch = Batch::new(&e, seed, B, T);
    let Batch {
        qkv,
        w,
        beta_raw,
        alpha,
        dt_bias,
        a,
        rings0,
        states0,
        ..
    } = &batch;
    let sequences = || batch.sequences(&e);
    let fresh = |n: usize| e.htod(&poison(n)).expect("output");
    let rows = B * T * VALUE_DIM;

    // The 1.0 packed program.
    let (want_rings, _want_canon, want_alt, table) = sequences();
    let want: Vec<Vec<f32>> = batch
        .packed_program(&e, &table)
        .tensors(&e)
        .into_iter()
        .chain(
            want_alt
                .iter()
                .chain(&want_rings)
                .map(|b| e.dtoh(b).expect("dtoh")),
        )
        .collect();

    // The one-launch verify, every optional output asked for.
    let (rings, canon, alt, table) = sequences();
    let Packed {
        mut conv_outs,
        mut q,
        mut k,
        mut v,
        mut beta,
        g_log: mut g,
        mut o,
        snap_conv: mut sc,
        snap_ssm: mut ss,
    } = Packed::poisoned(&e, B, T);
    {
        let args = VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
            .mode(VerifyMode::Snapshots)
            .eps(1e-6)
            .scale(SCALE)
            .qkv(&qkv)
            .table(&table)
            .w(&w)
            .beta_raw(&beta_raw)
            .alpha(&alpha)
            .dt_bias(&dt_bias)
            .a(&a)
            .o(&mut o)
            .conv_outs(&mut conv_outs)
            .q_l2(&mut q)
            .k_l2(&mut k)
            .v_g(&mut v)
            .beta(&mut beta)
            .g_log(&mut g)
            .snap_conv(&mut sc)
            .snap_ssm(&mut ss);
        e.gdn_verify(&args).expect("gdn_verify");
    }
    let got: Vec<Vec<f32>> = [&conv_outs, &q, &k, &v, &beta, &g, &o, &sc, &ss]
        .iter()
        .map(|b| e.dtoh(*b).expect("dtoh"))
        .chain(alt.iter().chain(&rings).map(|b| e.dtoh(b).expect("dtoh")))
        .collect();
    for (i, (w_, g_)) in want.iter().zip(&got).enumerate() {
        assert!(
            w_.iter().all(|x| x.is_finite()),
            "tensor {} of the reference",
            i
        );
        assert_eq!(
            bit_diffs(w_, g_),
            0,
            "verify tensor {}, {}",
            i,
            replay(seed)
        );
    }

    // Rollback to row accepted[b] - 1: sequence 0 keeps one row (snapshot 0), sequence 1 all
    // three (the final state, in the alternate buffer since T is odd).
    let accepted = e.htod_u32(&[1, T as u32]).expect("accepted");
    {
        let args = VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
            .eps(1e-6)
            .scale(SCALE)
            .table(&table)
            .accepted(&accepted)
            .snap_conv(&mut sc)
            .snap_ssm(&mut ss);
        e.gdn_rollback(&args).expect("gdn_rollback");
    }
    let snaps_s = &want[8];
    let snaps_c = &want[7];
    assert_eq!(
        bit_diffs(&e.dtoh(&canon[0]).expect("dtoh"), &snaps_s[..STATE]),
        0,
        "rollback of sequence 0 to its first snapshot"
    );
    assert_eq!(
        bit_diffs(
            &e.dtoh(&rings[0]).expect("dtoh"),
            &snaps_c[..CONV_DIM * PAD]
        ),
        0,
        "ring 0"
    );
    assert_eq!(
        bit_diffs(&e.dtoh(&canon[1]).expect("dtoh"), &want[9 + 1]),
        0,
        "sequence 1's final state"
    );

    // Journal mode from an empty journal: nothing folded, so the outputs are the packed
    // program's; then a commit of rows [2, 3] gives the states after those rows.
    let t_max = T;
    let journal_len =
        memra_engine::gdn_journal_len(128, NUM_K, NUM_V, t_max).expect("journal length");
    assert!(journal_len > 0);
    let rings: Vec<_> = rings0.iter().map(|r| e.htod(r).expect("ring")).collect();
    let states: Vec<_> = states0.iter().map(|s| e.htod(s).expect("state")).collect();
    let journals: Vec<_> = (0..B)
        .map(|_| e.zeros(journal_len).expect("journal"))
        .collect();
    let mut entries = Vec::new();
    for b in 0..B {
        entries.extend(addresses(&e, &[&rings[b], &states[b], &journals[b]]));
    }
    let jtable = e.htod_u64(&entries).expect("journal table");
    let mut counts = e.alloc_u32_zeroed(B).expect("counts");
    let mut o = fresh(rows);
    {
        let args = VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
            .mode(VerifyMode::Journal)
            .eps(1e-6)
            .scale(SCALE)
            .qkv(&qkv)
            .table(&jtable)
            .w(&w)
            .beta_raw(&beta_raw)
            .alpha(&alpha)
            .dt_bias(&dt_bias)
            .a(&a)
            .accepted(&counts)
            .o(&mut o);
        e.gdn_verify(&args).expect("journal verify");
    }
    assert_eq!(
        bit_diffs(&e.dtoh(&o).expect("dtoh"), &want[6]),
        0,
        "journal-mode outputs"
    );
    e.htod_u32_into(&[2, T as u32], &mut counts)
        .expect("accepted counts");
    {
        let args = VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
            .mode(VerifyMode::Journal)
            .eps(1e-6)
            .scale(SCALE)
            .table(&jtable)
            .w(&w)
            .dt_bias(&dt_bias)
            .a(&a)
            .accepted(&counts);
        e.gdn_journal_commit(&args).expect("commit");
    }
    assert_eq!(
        bit_diffs(
            &e.dtoh(&states[0]).expect("dtoh"),
            &snaps_s[STATE..2 * STATE]
        ),
        0,
        "sequence 0 committed after two rows"
    );
    assert_eq!(
        bit_diffs(&e.dtoh(&states[1]).expect("dtoh"), &want[9 + 1]),
        0,
        "sequence 1 after three"
    );

    // Refusals name the field.
    let err = e
        .gdn_verify(
            &VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
                .eps(1e-6)
                .scale(SCALE)
                .qkv(&qkv),
        )
        .expect_err("no table, no outputs");
    assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
    let foreign = other
        .htod(&random(B * T * CONV_DIM, seed, 1, 1.0))
        .expect("foreign");
    let err = e
        .gdn_verify(
            &VerifyArgs::new(NUM_K, NUM_V, D_CONV, T, B)
                .eps(1e-6)
                .scale(SCALE)
                .qkv(&foreign),
        )
        .expect_err("a buffer of another engine");
    assert!(
        message(&*err).contains("'qkv'") && message(&*err).contains("another engine"),
        "{}",
        err
    );
}

#[test]
fn an_engine_launches_on_a_stream_the_host_owns() {
    let seed = fresh_seed();
    for e in engines() {
        match e.backend() {
            Backend::Cpu => {
                // The CPU backend has no streams: a host stream is refused before it is used.
                // SAFETY: the library refuses the stream without touching it.
                let err = unsafe {
                    Engine::with_stream(
                        &EngineOptions {
                            backend: Backend::Cpu,
                            ignore_env: true,
                            ..EngineOptions::default()
                        },
                        8 as *mut std::ffi::c_void,
                    )
                }
                .expect_err("a stream on the CPU backend");
                assert_eq!(status(&*err), Status::InvalidArgument, "{}", err);
            }
            Backend::Cuda => {
                // The host's stream here is the first engine's, which outlives the second.
                let host_stream = e.stream().cu_stream();
                // SAFETY: a live CUDA stream of device 0 that outlives `on_it` and its buffers.
                let on_it = unsafe { Engine::new_on_stream(0, host_stream) }.expect("engine");
                assert_eq!(on_it.stream().cu_stream(), host_stream);
                let host = random(512, seed, 1, 1.0);
                let src = on_it.htod(&host).expect("htod");
                let copy = on_it.clone_dtod(&src).expect("clone_dtod");
                assert!(bits(&on_it.dtoh(&copy).expect("dtoh")) == bits(&host));
                drop((src, copy, on_it));
                // The host's stream was not destroyed with the engine that used it.
                e.synchronize()
                    .expect("the first engine's stream still works");
            }
            Backend::Auto => unreachable!("an engine never runs on AUTO"),
        }
    }
}

#[test]
fn memset_zeros_clears_every_element_type_and_replays_in_a_graph() {
    let seed = fresh_seed();
    for e in engines() {
        let stream = e.stream();
        let mut f = e.htod(&random(1000, seed, 1, 1.0)).expect("f32");
        stream
            .memset_zeros(&mut f.slice_mut(100..900))
            .expect("a view");
        let got = e.dtoh(&f).expect("dtoh");
        assert!(
            got[100..900].iter().all(|x| x.to_bits() == 0),
            "the view is zero"
        );
        assert!(
            bits(&got[..100]) == bits(&random(1000, seed, 1, 1.0)[..100])
                && bits(&got[900..]) == bits(&random(1000, seed, 1, 1.0)[900..]),
            "outside the view"
        );
        let mut u = e.htod_u32(&[u32::MAX; 7]).expect("u32");
        let mut i = e.htod_i32(&[-1; 9]).expect("i32");
        let mut w = e.htod_u64(&[u64::MAX; 5]).expect("u64");
        e.memset_zeros(&mut u).expect("u32");
        stream.memset_zeros(&mut i).expect("i32");
        e.memset_zeros(&mut w).expect("u64");
        assert_eq!(e.dtoh_u32(&u).expect("dtoh"), vec![0; 7]);
        assert_eq!(e.dtoh_i32(&i).expect("dtoh"), vec![0; 9]);
        assert_eq!(e.dtoh_u64(&w).expect("dtoh"), vec![0; 5]);
        // In a graph, as memra-engine's prime capture clears the recurrent state.
        let mut state = e.htod(&poison(STATE)).expect("state");
        let mut counter = e.htod_i32(&[7]).expect("counter");
        let graph = e
            .capture_graph(|e: &Engine| {
                e.stream().memset_zeros(&mut state)?;
                e.stream().memset_zeros(&mut counter)?;
                Ok(())
            })
            .expect("capture");
        e.htod_f32_into(&poison(STATE), &mut state).expect("poison");
        e.htod_i32_into(&[7], &mut counter).expect("counter");
        graph.launch().expect("replay");
        assert!(e
            .dtoh(&state)
            .expect("dtoh")
            .iter()
            .all(|x| x.to_bits() == 0));
        assert_eq!(e.dtoh_i32(&counter).expect("dtoh"), vec![0]);
        let src = e.htod(&random(50, seed, 2, 1.0)).expect("src");
        let mut dst = e.htod(&poison(60)).expect("dst");
        e.dtod_copy_view(&src.slice(10..40), &mut dst)
            .expect("dtod_copy_view");
        let got = e.dtoh(&dst).expect("dtoh");
        assert!(bits(&got[..30]) == bits(&random(50, seed, 2, 1.0)[10..40]));
        assert!(got[30..].iter().all(|x| x.to_bits() == POISON));
    }
}

/// The 1.2 state copies through the facade: a bad address in a table skips its copy and is
/// reported by the next synchronising call with the library's message, the destination
/// untouched; a buffer of another engine is refused before anything runs; afterwards the
/// engine goes on and the copies are memcpy, bit for bit.
#[test]
fn the_state_copies_report_bad_addresses_and_refuse_foreign_buffers() -> memra_engine::Result<()> {
    let s = fresh_seed();
    const WORDS: usize = 1000;
    for e in engines() {
        let stream = e.stream();
        let want = random(WORDS, s, 1, 1.0);
        let src = e.htod(&want)?;
        let mut dst = e.htod(&poison(WORDS))?;
        let dst_addr = dst.device_ptr(&stream).0;
        let null_source = e.htod_u64(&[0, dst_addr])?;
        e.copy_batch_uniform_f32(&null_source, 1, WORDS)?;
        let err = e.synchronize().unwrap_err();
        assert_eq!(status(&*err), Status::InvalidArgument, "{err}");
        assert!(message(&*err).contains("copy 0"), "{err}");
        assert_eq!(bits(&e.dtoh(&dst)?), bits(&poison(WORDS)), "{}", replay(s));
        e.synchronize()?;

        let other = engine_on(e.backend())?;
        let foreign = other.htod_u64(&[src.device_ptr(&stream).0, dst_addr])?;
        let err = e.copy_batch_uniform_f32(&foreign, 1, WORDS).unwrap_err();
        assert_eq!(status(&*err), Status::InvalidArgument, "{err}");

        let table = e.htod_u64(&[src.device_ptr(&stream).0, dst_addr])?;
        e.copy_indirect_src_f32(&table.slice(0..1), &mut dst, 0, WORDS)?;
        assert_eq!(bits(&e.dtoh(&dst)?), bits(&want), "{}", replay(s));
        e.htod_f32_into(&poison(WORDS), &mut dst)?;
        e.copy_batch_uniform_f32(&table, 1, WORDS)?;
        assert_eq!(bits(&e.dtoh(&dst)?), bits(&want), "{}", replay(s));
    }
    Ok(())
}
