//! Caller code written the way memra-engine's GDN callers write it (its `decode.rs`,
//! `decode_batch.rs`, `spec.rs` and memra-kv's cache), compiled against the facade as is: struct
//! fields of `CudaSlice<f32>`, helpers returning `Result<CudaSlice<f32>, Box<dyn Error>>`, a
//! graph and its keeper stored in a struct and a map, both API generations' names, an
//! `Arc<CudaStream>` kept in a struct, `e.gpu.stream()`, and buffers and engines moving between
//! threads. That it builds is the first check; the tests then run it on the CPU backend (and on
//! CUDA where a device is usable) and check that the single-sequence decode, the batched decode,
//! the packed verify and the commit of a partial accept agree bit for bit.

mod common;

use std::any::Any;
use std::collections::HashMap;
use std::error::Error;
use std::sync::Arc;

use common::{device_bits, engines, fresh_seed, random};
use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, CudaView, DevicePtr};
use memra_engine::Engine;

const D_STATE: usize = 128;
const D_CONV: usize = 4;

/// One model's linear-attention geometry.
#[derive(Clone, Copy)]
pub struct Geometry {
    pub num_k: usize,
    pub num_v: usize,
}

impl Geometry {
    fn key_dim(self) -> usize {
        D_STATE * self.num_k
    }
    fn value_dim(self) -> usize {
        D_STATE * self.num_v
    }
    fn conv_dim(self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }
    fn state(self) -> usize {
        D_STATE * D_STATE * self.num_v
    }
}

/// memra-kv's per-linear-attention-layer recurrent state.
pub struct RecurLayer {
    pub conv_state: CudaSlice<f32>,
    pub ssm_state: CudaSlice<f32>,
    pub ssm_state_alt: CudaSlice<f32>,
}

/// memra-kv's cache, reduced to its recurrent layers.
pub struct Cache {
    pub recur: Vec<Option<RecurLayer>>,
    pub pos: usize,
    pub len_d: CudaSlice<i32>,
}

/// memra-kv's snapshot: real device copies of the recurrent state.
pub struct CacheSnapshot {
    pub conv: Vec<Option<CudaSlice<f32>>>,
    pub ssm: Vec<Option<CudaSlice<f32>>>,
    pub pos: usize,
}

/// A weight as the model holds it.
pub struct Weight {
    data: CudaSlice<f32>,
}

impl Weight {
    pub fn float_data(&self) -> &CudaSlice<f32> {
        &self.data
    }
}

/// A linear-attention layer's GDN weights.
pub struct LinearLayer {
    pub ssm_conv1d: Weight,
    pub ssm_dt: Weight,
    pub ssm_a: Weight,
}

/// A captured decode step and what keeps it valid, as the decode graph store holds them.
pub struct DecodeGraph {
    pub graph: CudaGraph,
    pub keeper: Vec<Box<dyn Any + Send>>,
}

/// A step whose device work is enqueued, with the stream its result will be read on.
pub struct PendingStep {
    pub logits: CudaSlice<f32>,
    pub readback: Arc<CudaStream>,
}

pub fn upload(e: &Engine, host: &[f32]) -> Result<CudaSlice<f32>, Box<dyn Error>> {
    let buf = e.htod(host)?;
    Ok(buf)
}

pub fn rows_of<'a>(buf: &'a CudaSlice<f32>, row: usize, width: usize) -> CudaView<'a, f32> {
    buf.slice(row * width..(row + 1) * width)
}

impl Cache {
    pub fn new(e: &Engine, g: Geometry, n_layer: usize) -> Result<Self, Box<dyn Error>> {
        let mut recur = Vec::with_capacity(n_layer);
        for _ in 0..n_layer {
            recur.push(Some(RecurLayer {
                conv_state: e.zeros(g.conv_dim() * D_CONV.saturating_sub(1))?,
                ssm_state: e.zeros(g.state())?,
                ssm_state_alt: e.zeros(g.state())?,
            }));
        }
        Ok(Cache {
            recur,
            pos: 0,
            len_d: e.htod_i32(&[0])?,
        })
    }

    pub fn snapshot(&self, e: &Engine) -> Result<CacheSnapshot, Box<dyn Error>> {
        let mut conv = Vec::with_capacity(self.recur.len());
        let mut ssm = Vec::with_capacity(self.recur.len());
        for rl in &self.recur {
            match rl {
                Some(rl) => {
                    conv.push(Some(e.clone_dtod(&rl.conv_state)?));
                    ssm.push(Some(e.clone_dtod(&rl.ssm_state)?));
                }
                None => {
                    conv.push(None);
                    ssm.push(None);
                }
            }
        }
        Ok(CacheSnapshot {
            conv,
            ssm,
            pos: self.pos,
        })
    }

    pub fn rollback(&mut self, e: &Engine, snap: &CacheSnapshot) -> Result<(), Box<dyn Error>> {
        for (il, rl) in self.recur.iter_mut().enumerate() {
            if let (Some(rl), Some(c), Some(s)) = (rl.as_mut(), &snap.conv[il], &snap.ssm[il]) {
                let (nc, ns) = (c.len(), s.len());
                e.copy_into(&mut rl.conv_state, 0, c, nc)?;
                e.copy_into(&mut rl.ssm_state, 0, s, ns)?;
            }
        }
        self.pos = snap.pos;
        Ok(())
    }
}

/// One row of a linear layer's inputs, as the projections produce them.
pub struct RowInputs {
    pub qkv_mixed: CudaSlice<f32>,
    pub beta_raw: CudaSlice<f32>,
    pub alpha: CudaSlice<f32>,
}

/// decode.rs's single-sequence linear-attention step (0.72 names): the ring and the resident
/// states are passed directly; returns the scan output.
pub fn linear_attn_decode(
    e: &Engine,
    la: &LinearLayer,
    cache: &mut Cache,
    il: usize,
    x: &RowInputs,
    g: Geometry,
    persistent_state: bool,
) -> Result<CudaSlice<f32>, Box<dyn Error>> {
    let (num_v, num_k, key_dim, conv_dim) = (g.num_v, g.num_k, g.key_dim(), g.conv_dim());
    let eps = 1e-6f32;
    let scale = 1.0 / (D_STATE as f32).sqrt();
    let rl = cache.recur[il].as_mut().unwrap();
    let mut conv_out = e.uninit(conv_dim)?;
    e.ssm_conv1d_fused_decode(
        &x.qkv_mixed,
        &mut rl.conv_state,
        la.ssm_conv1d.float_data(),
        &mut conv_out,
        conv_dim,
        D_CONV,
    )?;
    let mut o = e.uninit(D_STATE * num_v)?;
    let n_state = D_STATE * D_STATE * num_v;
    {
        let mut q_l2 = e.uninit(D_STATE * num_v)?;
        let mut k_l2 = e.uninit(D_STATE * num_v)?;
        let mut v_gd = e.uninit(D_STATE * num_v)?;
        let mut beta = e.uninit(num_v)?;
        let mut g_log = e.uninit(num_v)?;
        e.gdn_prep_decode(
            &conv_out,
            &x.beta_raw,
            &x.alpha,
            la.ssm_dt.float_data(),
            la.ssm_a.float_data(),
            &mut q_l2,
            &mut k_l2,
            &mut v_gd,
            &mut beta,
            &mut g_log,
            D_STATE,
            num_v,
            num_k,
            key_dim,
            eps,
        )?;
        let RecurLayer {
            ssm_state,
            ssm_state_alt,
            ..
        } = rl;
        e.gdn_scan_s128(
            &q_l2,
            &k_l2,
            &v_gd,
            &g_log,
            &beta,
            ssm_state,
            ssm_state_alt,
            &mut o,
            num_v,
            1,
            scale,
        )?;
    }
    if persistent_state {
        let alt = std::mem::replace(&mut rl.ssm_state_alt, e.zeros(0)?);
        e.copy_into(&mut rl.ssm_state, 0, &alt, n_state)?;
        rl.ssm_state_alt = alt;
    } else {
        std::mem::swap(&mut rl.ssm_state, &mut rl.ssm_state_alt);
    }
    Ok(o)
}

/// decode_batch.rs's per-step pointer table: `[conv x B][ssm_in x B][ssm_out x B]` of layer
/// `il`, built through the engine that owns the caches.
pub struct BatchLayerCtx {
    pub lin_base: Vec<Option<usize>>,
    pub ptr_table: Option<CudaSlice<u64>>,
}

pub fn batch_layer_ctx(
    e: &Engine,
    caches: &[&mut Cache],
    il: usize,
) -> Result<BatchLayerCtx, Box<dyn Error>> {
    let stream = e.gpu.stream();
    let mut ptrs = Vec::new();
    for cache in caches {
        let rl = cache.recur[il].as_ref().unwrap();
        ptrs.push(rl.conv_state.device_ptr(&stream).0);
    }
    for cache in caches {
        let rl = cache.recur[il].as_ref().unwrap();
        ptrs.push(rl.ssm_state.device_ptr(&stream).0);
    }
    for cache in caches {
        let rl = cache.recur[il].as_ref().unwrap();
        ptrs.push(rl.ssm_state_alt.device_ptr(&stream).0);
    }
    let mut lin_base = vec![None; il + 1];
    lin_base[il] = Some(0);
    Ok(BatchLayerCtx {
        lin_base,
        ptr_table: Some(e.htod_u64(&ptrs)?),
    })
}

/// decode_batch.rs's batched recurrent state ops: three launches for all B sequences.
pub fn linear_attn_batched(
    e: &Engine,
    la: &LinearLayer,
    caches: &mut [&mut Cache],
    ctx: &BatchLayerCtx,
    il: usize,
    x: &RowInputs,
    g: Geometry,
) -> Result<CudaSlice<f32>, Box<dyn Error>> {
    let b_n = caches.len();
    let (num_v, num_k, key_dim, conv_dim, value_dim) =
        (g.num_v, g.num_k, g.key_dim(), g.conv_dim(), g.value_dim());
    let (eps, gdn_scale) = (1e-6f32, 1.0 / (D_STATE as f32).sqrt());
    let base = ctx.lin_base[il].expect("linear layer missing from pointer table");
    let table = ctx.ptr_table.as_ref().expect("pointer table missing");
    let conv_view = table.slice(base..base + b_n);
    let in_view = table.slice(base + b_n..base + 2 * b_n);
    let out_view = table.slice(base + 2 * b_n..base + 3 * b_n);
    let mut conv_outs = e.uninit(b_n * conv_dim)?;
    e.ssm_conv1d_fused_decode_b(
        &x.qkv_mixed,
        &conv_view,
        la.ssm_conv1d.float_data(),
        &mut conv_outs,
        conv_dim,
        D_CONV,
        b_n,
    )?;
    let mut q_l2 = e.uninit(b_n * value_dim)?;
    let mut k_l2 = e.uninit(b_n * value_dim)?;
    let mut v_gd = e.uninit(b_n * value_dim)?;
    let mut beta_b = e.uninit(b_n * num_v)?;
    let mut g_log = e.uninit(b_n * num_v)?;
    e.gdn_prep_decode_b(
        &conv_outs,
        &x.beta_raw,
        &x.alpha,
        la.ssm_dt.float_data(),
        la.ssm_a.float_data(),
        &mut q_l2,
        &mut k_l2,
        &mut v_gd,
        &mut beta_b,
        &mut g_log,
        D_STATE,
        num_v,
        num_k,
        key_dim,
        eps,
        conv_dim,
        b_n,
    )?;
    let mut o_all = e.uninit(b_n * value_dim)?;
    e.gdn_scan_s128_batched(
        &q_l2, &k_l2, &v_gd, &g_log, &beta_b, &in_view, &out_view, &mut o_all, num_v, b_n,
        gdn_scale,
    )?;
    for cache in caches.iter_mut() {
        let rl = cache.recur[il].as_mut().unwrap();
        std::mem::swap(&mut rl.ssm_state, &mut rl.ssm_state_alt);
    }
    Ok(o_all)
}

/// spec.rs's stash of a verify: the scan's inputs, kept so that a partial accept can rebuild
/// the state after any prefix of the rows without running the layer again.
pub struct GdnStash {
    pub qkv_mixed: CudaSlice<f32>,
    pub q_l2: CudaSlice<f32>,
    pub k_l2: CudaSlice<f32>,
    pub v_g: CudaSlice<f32>,
    pub g_log: CudaSlice<f32>,
    pub beta: CudaSlice<f32>,
}

/// spec.rs's verify of `t` rows of one linear layer (0.72 names): the conv through the
/// carried ring, one prep over the rows, ONE scan of `t` rows from the carried state into the
/// spare, then the swap; the scan's inputs are stashed.
pub fn linear_attn_verify_t(
    e: &Engine,
    la: &LinearLayer,
    cache: &mut Cache,
    il: usize,
    x: RowInputs,
    g: Geometry,
    t: usize,
) -> Result<(CudaSlice<f32>, GdnStash), Box<dyn Error>> {
    let (num_v, num_k, key_dim, conv_dim) = (g.num_v, g.num_k, g.key_dim(), g.conv_dim());
    let scale = 1.0 / (D_STATE as f32).sqrt();
    let rl = cache.recur[il].as_mut().unwrap();
    let mut conv_out = e.uninit(conv_dim * t)?;
    for r in 0..t {
        e.ssm_conv1d_fused_decode(
            &rows_of(&x.qkv_mixed, r, conv_dim),
            &mut rl.conv_state,
            la.ssm_conv1d.float_data(),
            &mut conv_out.slice_mut(r * conv_dim..(r + 1) * conv_dim),
            conv_dim,
            D_CONV,
        )?;
    }
    let mut q_l2 = e.uninit(D_STATE * num_v * t)?;
    let mut k_l2 = e.uninit(D_STATE * num_v * t)?;
    let mut v_g = e.uninit(D_STATE * num_v * t)?;
    let mut beta = e.uninit(t * num_v)?;
    let mut g_log = e.uninit(t * num_v)?;
    e.gdn_prep_decode_b(
        &conv_out,
        &x.beta_raw,
        &x.alpha,
        la.ssm_dt.float_data(),
        la.ssm_a.float_data(),
        &mut q_l2,
        &mut k_l2,
        &mut v_g,
        &mut beta,
        &mut g_log,
        D_STATE,
        num_v,
        num_k,
        key_dim,
        1e-6,
        conv_dim,
        t,
    )?;
    let mut o = e.uninit(D_STATE * num_v * t)?;
    {
        let RecurLayer {
            ssm_state,
            ssm_state_alt,
            ..
        } = rl;
        e.gdn_scan_s128(
            &q_l2,
            &k_l2,
            &v_g,
            &g_log,
            &beta,
            ssm_state,
            ssm_state_alt,
            &mut o,
            num_v,
            t,
            scale,
        )?;
    }
    std::mem::swap(&mut rl.ssm_state, &mut rl.ssm_state_alt);
    let stash = GdnStash {
        qkv_mixed: x.qkv_mixed,
        q_l2,
        k_l2,
        v_g,
        g_log,
        beta,
    };
    Ok((o, stash))
}

/// spec.rs's replay-free commit of the first `j` verify rows of one linear layer: the ring
/// rebuilt from the snapshot's by copies, the state by a `j`-row scan from the snapshot's.
pub fn commit_verified_prefix(
    e: &Engine,
    cache: &mut Cache,
    snap: &CacheSnapshot,
    st: &GdnStash,
    il: usize,
    g: Geometry,
    j: usize,
) -> Result<(), Box<dyn Error>> {
    let (num_v, conv_dim) = (g.num_v, g.conv_dim());
    let scale = 1.0 / (D_STATE as f32).sqrt();
    if let Some(rl) = cache.recur[il].as_mut() {
        let ring_old = snap.conv[il].as_ref().expect("snapshot missing conv");
        e.ssm_conv_ring_rebuild(
            &st.qkv_mixed,
            ring_old,
            &mut rl.conv_state,
            conv_dim,
            j,
            D_CONV,
        )?;
        let state_in = snap.ssm[il].as_ref().expect("snapshot missing ssm");
        let mut o = e.uninit(D_STATE * num_v * j)?;
        e.gdn_scan_s128(
            &st.q_l2,
            &st.k_l2,
            &st.v_g,
            &st.g_log,
            &st.beta,
            state_in,
            &mut rl.ssm_state,
            &mut o,
            num_v,
            j,
            scale,
        )?;
    }
    cache.pos = snap.pos + j;
    Ok(())
}

/// The 0.136 packed verify of `t` rows of one sequence, snapshots optional and pre-built.
#[allow(clippy::too_many_arguments)]
pub fn packed_verify(
    e: &Engine,
    la: &LinearLayer,
    rows: &RowInputs,
    table: &CudaSlice<u64>,
    g: Geometry,
    t: usize,
    snap_conv: Option<&mut CudaSlice<f32>>,
    snap_ssm: Option<&mut CudaSlice<f32>>,
) -> Result<(CudaSlice<f32>, CudaSlice<f32>), Box<dyn Error>> {
    let (num_v, num_k, key_dim, conv_dim, value_dim) =
        (g.num_v, g.num_k, g.key_dim(), g.conv_dim(), g.value_dim());
    let scale = 1.0 / (D_STATE as f32).sqrt();
    let mut conv_outs = e.uninit(t * conv_dim)?;
    e.ssm_conv1d_fused_decode_tloop(
        &rows.qkv_mixed,
        &table.slice(0..3),
        la.ssm_conv1d.float_data(),
        &mut conv_outs,
        snap_conv,
        conv_dim,
        D_CONV,
        t,
    )?;
    let (mut q_l2, mut k_l2, mut v_g) = (
        e.uninit(t * value_dim)?,
        e.uninit(t * value_dim)?,
        e.uninit(t * value_dim)?,
    );
    let (mut beta_b, mut g_log) = (e.uninit(t * num_v)?, e.uninit(t * num_v)?);
    e.gdn_prep_decode_b_view(
        &conv_outs,
        &rows.beta_raw,
        &rows.alpha,
        la.ssm_dt.float_data(),
        la.ssm_a.float_data(),
        &mut q_l2,
        &mut k_l2,
        &mut v_g,
        &mut beta_b,
        &mut g_log,
        D_STATE,
        num_v,
        num_k,
        key_dim,
        1e-6,
        conv_dim,
        t,
    )?;
    let mut o_all = e.uninit(t * value_dim)?;
    let states = table.slice(0..3);
    e.gdn_scan_s128_tsnap(
        &q_l2, &k_l2, &v_g, &g_log, &beta_b, &states, &mut o_all, num_v, t, scale, snap_ssm,
    )?;
    Ok((conv_outs, o_all))
}

fn layer(e: &Engine, g: Geometry, seed: u64) -> Result<LinearLayer, Box<dyn Error>> {
    Ok(LinearLayer {
        ssm_conv1d: Weight {
            data: upload(e, &random(g.conv_dim() * D_CONV, seed, 10, 0.5))?,
        },
        ssm_dt: Weight {
            data: upload(e, &random(g.num_v, seed, 11, 0.5))?,
        },
        ssm_a: Weight {
            data: upload(e, &random(g.num_v, seed, 12, 1.0))?,
        },
    })
}

fn row_inputs(
    e: &Engine,
    g: Geometry,
    rows: usize,
    seed: u64,
) -> Result<RowInputs, Box<dyn Error>> {
    Ok(RowInputs {
        qkv_mixed: upload(e, &random(rows * g.conv_dim(), seed, 20, 1.0))?,
        beta_raw: upload(e, &random(rows * g.num_v, seed, 21, 2.0))?,
        alpha: upload(e, &random(rows * g.num_v, seed, 22, 2.0))?,
    })
}

/// Initial ring and state of sequence `s`, set the way a prefill would leave them.
fn prime(e: &Engine, cache: &mut Cache, g: Geometry, s: u64) -> Result<(), Box<dyn Error>> {
    let rl = cache.recur[0].as_mut().unwrap();
    e.htod_f32_into(
        &random(g.conv_dim() * (D_CONV - 1), s, 30, 1.0),
        &mut rl.conv_state,
    )?;
    e.htod_f32_into(&random(g.state(), s, 31, 0.3), &mut rl.ssm_state)?;
    Ok(())
}

#[test]
fn single_sequence_and_batched_decode_agree_bitwise() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    for e in engines() {
        let la = layer(&e, g, s)?;
        const B: usize = 3;
        let mut singles: Vec<Cache> = (0..B)
            .map(|_| Cache::new(&e, g, 1))
            .collect::<Result<_, _>>()?;
        let mut batched: Vec<Cache> = (0..B)
            .map(|_| Cache::new(&e, g, 1))
            .collect::<Result<_, _>>()?;
        for b in 0..B {
            prime(&e, &mut singles[b], g, s ^ (b as u64) << 20)?;
            prime(&e, &mut batched[b], g, s ^ (b as u64) << 20)?;
        }
        for step in 0..3u64 {
            let x = row_inputs(&e, g, B, s ^ (step << 40))?;
            let mut want = Vec::new();
            for (b, cache) in singles.iter_mut().enumerate() {
                let row = RowInputs {
                    qkv_mixed: e.clone_dtod(&rows_of(&x.qkv_mixed, b, g.conv_dim()))?,
                    beta_raw: e.clone_dtod(&rows_of(&x.beta_raw, b, g.num_v))?,
                    alpha: e.clone_dtod(&rows_of(&x.alpha, b, g.num_v))?,
                };
                let o = linear_attn_decode(&e, &la, cache, 0, &row, g, step % 2 == 1)?;
                want.extend(e.dtoh(&o)?);
            }
            let mut refs: Vec<&mut Cache> = batched.iter_mut().collect();
            let ctx = batch_layer_ctx(&e, &refs, 0)?;
            let got = linear_attn_batched(&e, &la, &mut refs, &ctx, 0, &x, g)?;
            let got = e.dtoh_view(&got.slice(..))?;
            assert!(want.iter().all(|v| v.is_finite()));
            let diffs = want
                .iter()
                .zip(&got)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(diffs, 0, "step {step}: outputs (seed {s:#x})");
            for b in 0..B {
                let (l, r) = (
                    singles[b].recur[0].as_ref().unwrap(),
                    batched[b].recur[0].as_ref().unwrap(),
                );
                assert_eq!(
                    device_bits(&e, &l.ssm_state),
                    device_bits(&e, &r.ssm_state),
                    "step {step}: state {b}"
                );
                assert_eq!(
                    device_bits(&e, &l.conv_state),
                    device_bits(&e, &r.conv_state),
                    "step {step}: ring {b}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn snapshots_roll_back_and_graphs_live_in_structs_and_maps() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    for e in engines() {
        let la = layer(&e, g, s)?;
        let mut cache = Cache::new(&e, g, 1)?;
        prime(&e, &mut cache, g, s)?;
        let snap = cache.snapshot(&e)?;
        let x = row_inputs(&e, g, 1, s ^ 77)?;
        let first = linear_attn_decode(&e, &la, &mut cache, 0, &x, g, true)?;
        cache.rollback(&e, &snap)?;
        let again = linear_attn_decode(&e, &la, &mut cache, 0, &x, g, true)?;
        assert_eq!(
            device_bits(&e, &first),
            device_bits(&e, &again),
            "the rolled-back step repeats"
        );

        // The decode step captured with the state at fixed addresses, stored in a struct; the
        // step allocates its scratch, which the graph keeps.
        cache.rollback(&e, &snap)?;
        let mut store: HashMap<usize, (CudaGraph, Vec<Box<dyn Any + Send>>)> = HashMap::new();
        let out = std::cell::RefCell::new(None);
        let (graph, keeper) = e.capture_graph_retained(|e| {
            let o = linear_attn_decode(e, &la, &mut cache, 0, &x, g, true)?;
            *out.borrow_mut() = Some(o);
            Ok(())
        })?;
        let decode = DecodeGraph { graph, keeper };
        cache.rollback(&e, &snap)?;
        decode.graph.launch()?;
        let o = out.borrow_mut().take().expect("the step ran");
        assert_eq!(
            device_bits(&e, &o),
            device_bits(&e, &first),
            "the replay is the first step"
        );
        assert_eq!(decode.keeper.len(), 1);
        store.insert(1, (decode.graph, decode.keeper));
        cache.rollback(&e, &snap)?;
        store.get(&1).unwrap().0.launch()?;
        assert_eq!(
            device_bits(&e, &o),
            device_bits(&e, &first),
            "a replay from the map"
        );

        // capture_graph into an Option, an error reported with Display.
        let mut draft_graph: Option<CudaGraph> = None;
        match e.capture_graph(|e| {
            let _ = e.zeros(16)?;
            Ok(())
        }) {
            Ok(g) => draft_graph = Some(g),
            Err(err) => eprintln!("[spec] draft-graph capture failed ({err}); eager fallback"),
        }
        draft_graph.as_ref().expect("captured").launch()?;
    }
    Ok(())
}

#[test]
fn the_packed_verify_takes_pre_built_snapshot_options() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    const T: usize = 3;
    for e in engines() {
        let la = layer(&e, g, s)?;
        let rows = row_inputs(&e, g, T, s ^ 5)?;
        let mut results = Vec::new();
        for with_snapshots in [true, false] {
            let mut cache = Cache::new(&e, g, 1)?;
            prime(&e, &mut cache, g, s)?;
            let stream = e.stream();
            let rl = cache.recur[0].as_ref().unwrap();
            let (pc, _g0) = rl.conv_state.device_ptr(&stream);
            let (p0, _g1) = rl.ssm_state.device_ptr(&stream);
            let (p1, _g2) = rl.ssm_state_alt.device_ptr(&stream);
            let table = e.htod_u64(&[pc, p0, p1])?;
            let mut sc = e.zeros((T - 1) * g.conv_dim() * (D_CONV - 1))?;
            let mut ss = e.zeros((T - 1) * g.state())?;
            let snap_conv: Option<&mut CudaSlice<f32>> =
                if with_snapshots { Some(&mut sc) } else { None };
            let snap_ssm: Option<&mut CudaSlice<f32>> =
                if with_snapshots { Some(&mut ss) } else { None };
            let (conv_outs, o_all) =
                packed_verify(&e, &la, &rows, &table, g, T, snap_conv, snap_ssm)?;
            let pending = PendingStep {
                logits: o_all,
                readback: e.stream(),
            };
            pending.readback.synchronize()?;
            results.push((
                device_bits(&e, &conv_outs),
                device_bits(&e, &pending.logits),
            ));
        }
        assert_eq!(results[0], results[1], "snapshots change no output");
    }
    Ok(())
}

#[test]
fn engines_and_buffers_cross_threads() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    for e in engines() {
        let e = Arc::new(e);
        let cache = Cache::new(&e, g, 2)?;
        let handles: Vec<_> = cache
            .recur
            .into_iter()
            .enumerate()
            .map(|(i, layer)| {
                let e = Arc::clone(&e);
                std::thread::spawn(move || -> Result<Vec<f32>, String> {
                    let rl = layer.expect("a recurrent layer");
                    let host = random(16, s, i as u64, 1.0);
                    let src = e.htod(&host).map_err(|e| e.to_string())?;
                    let mut state = rl.ssm_state;
                    e.copy_into(&mut state, 0, &src, 16)
                        .map_err(|e| e.to_string())?;
                    e.dtoh_view(&state.slice(0..16)).map_err(|e| e.to_string())
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let got = h.join().expect("thread")?;
            assert_eq!(got, random(16, s, i as u64, 1.0));
        }
        let counts = e.alloc_u32_zeroed(4)?;
        assert_eq!(e.dtoh_u32(&counts)?, vec![0; 4]);
        assert_eq!(e.dtoh_i32(&cache.len_d)?, vec![0]);
    }
    Ok(())
}

#[test]
fn a_partial_accept_commits_the_state_of_its_rows() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    const T: usize = 4;
    for e in engines() {
        let la = layer(&e, g, s)?;
        for j in 1..T {
            let rows = row_inputs(&e, g, T, s ^ 11)?;
            // The reference: the first j rows decoded one at a time.
            let mut eager = Cache::new(&e, g, 1)?;
            prime(&e, &mut eager, g, s)?;
            for r in 0..j {
                let row = RowInputs {
                    qkv_mixed: e.clone_dtod(&rows_of(&rows.qkv_mixed, r, g.conv_dim()))?,
                    beta_raw: e.clone_dtod(&rows_of(&rows.beta_raw, r, g.num_v))?,
                    alpha: e.clone_dtod(&rows_of(&rows.alpha, r, g.num_v))?,
                };
                linear_attn_decode(&e, &la, &mut eager, 0, &row, g, false)?;
            }
            // The verify of all T rows, then the commit of the first j.
            let mut cache = Cache::new(&e, g, 1)?;
            prime(&e, &mut cache, g, s)?;
            let snap = cache.snapshot(&e)?;
            let (_o, stash) = linear_attn_verify_t(&e, &la, &mut cache, 0, rows, g, T)?;
            commit_verified_prefix(&e, &mut cache, &snap, &stash, 0, g, j)?;
            let (want, got) = (
                eager.recur[0].as_ref().unwrap(),
                cache.recur[0].as_ref().unwrap(),
            );
            assert_eq!(
                device_bits(&e, &got.conv_state),
                device_bits(&e, &want.conv_state),
                "j={j}: ring (seed {s:#x})"
            );
            assert_eq!(
                device_bits(&e, &got.ssm_state),
                device_bits(&e, &want.ssm_state),
                "j={j}: state (seed {s:#x})"
            );
            assert_eq!(cache.pos, j);
        }
    }
    Ok(())
}

/// The ring and state of linear layer `il` of `cache`, set the way a prefill would leave them.
fn prime_layer(
    e: &Engine,
    cache: &mut Cache,
    il: usize,
    g: Geometry,
    s: u64,
) -> Result<(), Box<dyn Error>> {
    let rl = cache.recur[il].as_mut().unwrap();
    let seed = s ^ (il as u64) << 32;
    e.htod_f32_into(
        &random(g.conv_dim() * (D_CONV - 1), seed, 30, 1.0),
        &mut rl.conv_state,
    )?;
    e.htod_f32_into(&random(g.state(), seed, 31, 0.3), &mut rl.ssm_state)?;
    Ok(())
}

/// spec.rs's checkpoint stash of 0.136: after verify row `r`, every layer's ring and state go
/// into row `r` of the checkpoint slabs, each copied from the address its layer's pointer-table
/// entry holds (the per-row ping-pong moves the state between two buffers, so the entry is
/// rewritten, and a captured stash would follow it).
fn stash_row(
    e: &Engine,
    cache: &Cache,
    slabs: (&mut CudaSlice<f32>, &mut CudaSlice<f32>),
    g: Geometry,
    r: usize,
    t: usize,
) -> Result<(), Box<dyn Error>> {
    let stream = e.gpu.stream();
    let (ring, state) = (g.conv_dim() * (D_CONV - 1), g.state());
    let mut entries = Vec::new();
    for rl in cache.recur.iter().flatten() {
        entries.push(rl.conv_state.device_ptr(&stream).0);
        entries.push(rl.ssm_state.device_ptr(&stream).0);
    }
    let table = e.htod_u64(&entries)?;
    for il in 0..cache.recur.len() {
        let at = il * t + r;
        e.copy_indirect_src_f32(&table.slice(2 * il..2 * il + 1), slabs.0, at * ring, ring)?;
        e.copy_indirect_src_f32(
            &table.slice(2 * il + 1..2 * il + 2),
            slabs.1,
            at * state,
            state,
        )?;
    }
    Ok(())
}

/// spec.rs's partial-accept commit of 0.136: every layer's ring, then every layer's state,
/// restored from checkpoint row `j - 1` in one launch each (a table `[src x n, dst x n]`).
fn restore_accepted(
    e: &Engine,
    cache: &mut Cache,
    slabs: (&CudaSlice<f32>, &CudaSlice<f32>),
    g: Geometry,
    j: usize,
    t: usize,
) -> Result<(), Box<dyn Error>> {
    let stream = e.gpu.stream();
    let (ring, state) = (g.conv_dim() * (D_CONV - 1), g.state());
    let n = cache.recur.len();
    let (conv_base, ssm_base) = (slabs.0.device_ptr(&stream).0, slabs.1.device_ptr(&stream).0);
    let (mut conv_tab, mut ssm_tab) = (Vec::new(), Vec::new());
    for il in 0..n {
        let at = (il * t + j - 1) as u64;
        conv_tab.push(conv_base + at * (ring * 4) as u64);
        ssm_tab.push(ssm_base + at * (state * 4) as u64);
    }
    for rl in cache.recur.iter().flatten() {
        conv_tab.push(rl.conv_state.device_ptr(&stream).0);
        ssm_tab.push(rl.ssm_state.device_ptr(&stream).0);
    }
    e.copy_batch_uniform_f32(&e.htod_u64(&conv_tab)?, n, ring)?;
    e.copy_batch_uniform_f32(&e.htod_u64(&ssm_tab)?, n, state)?;
    Ok(())
}

#[test]
fn a_checkpoint_stash_and_batched_restore_are_the_per_row_program() -> Result<(), Box<dyn Error>> {
    let s = fresh_seed();
    let g = Geometry { num_k: 2, num_v: 4 };
    const L: usize = 3;
    const T: usize = 3;
    let (ring, state) = (g.conv_dim() * (D_CONV - 1), g.state());
    for e in engines() {
        let la: Vec<LinearLayer> = (0..L)
            .map(|il| layer(&e, g, s ^ (il as u64) << 16))
            .collect::<Result<_, _>>()?;
        let rows = row_inputs(&e, g, T, s ^ 0x5eed)?;
        let row = |r: usize| -> Result<RowInputs, Box<dyn Error>> {
            Ok(RowInputs {
                qkv_mixed: e.clone_dtod(&rows_of(&rows.qkv_mixed, r, g.conv_dim()))?,
                beta_raw: e.clone_dtod(&rows_of(&rows.beta_raw, r, g.num_v))?,
                alpha: e.clone_dtod(&rows_of(&rows.alpha, r, g.num_v))?,
            })
        };
        for j in 1..=T {
            // The reference: the first j rows through every layer, one row at a time.
            let mut eager = Cache::new(&e, g, L)?;
            for il in 0..L {
                prime_layer(&e, &mut eager, il, g, s)?;
            }
            for r in 0..j {
                let x = row(r)?;
                for il in 0..L {
                    linear_attn_decode(&e, &la[il], &mut eager, il, &x, g, false)?;
                }
            }
            // The verify of all T rows with a checkpoint after each, then the accept of j.
            let mut cache = Cache::new(&e, g, L)?;
            for il in 0..L {
                prime_layer(&e, &mut cache, il, g, s)?;
            }
            let mut conv_slab = upload(&e, &common::poison(L * T * ring))?;
            let mut ssm_slab = upload(&e, &common::poison(L * T * state))?;
            for r in 0..T {
                let x = row(r)?;
                for il in 0..L {
                    linear_attn_decode(&e, &la[il], &mut cache, il, &x, g, false)?;
                }
                stash_row(&e, &cache, (&mut conv_slab, &mut ssm_slab), g, r, T)?;
            }
            let stashed = device_bits(&e, &ssm_slab);
            assert!(stashed
                .iter()
                .all(|&b| b != common::bits(&common::poison(1))[0]));
            restore_accepted(&e, &mut cache, (&conv_slab, &ssm_slab), g, j, T)?;
            e.synchronize()?;
            let ring_and_state = |c: &Cache, il: usize| {
                let rl = c.recur[il].as_ref().unwrap();
                [
                    device_bits(&e, &rl.conv_state),
                    device_bits(&e, &rl.ssm_state),
                ]
            };
            for il in 0..L {
                let (got, want) = (ring_and_state(&cache, il), ring_and_state(&eager, il));
                assert!(
                    got == want,
                    "j={j} layer {il}: ring and state differ (seed {s:#x})"
                );
            }
        }
    }
    Ok(())
}
