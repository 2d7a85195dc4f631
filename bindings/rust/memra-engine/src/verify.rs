//! ABI 1.1: the one-launch verify, journal mode and the device-side rollback
//! (`memra_gdn_verify`, `memra_gdn_journal_commit`, `memra_gdn_rollback`), with their
//! arguments as a struct with a builder.

use std::fmt;

use memra_sys as sys;

use crate::buffer::{DevicePtr, DevicePtrMut, NO_F32, NO_F32_MUT, NO_U32, NO_U64};
use crate::engine::Engine;
use crate::error::{check, Res, Result};
use crate::lock::LockGuard;

/// Which state traffic a verify performs (`MemraVerifyMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerifyMode {
    /// The 1.0 packed program's contract: table rows `[ring, canonical, alternate]`, ring and
    /// state snapshots of rows `0 .. t-1`, the final state placed by the parity of `t`.
    Snapshots,
    /// As `Snapshots` without the snapshots (they must be absent).
    FinalOnly,
    /// Deferred commit: table rows `[ring, state, journal]`; the accepted journal rows are
    /// folded first, the new rows replace the journal, no snapshot is written.
    Journal,
}

impl VerifyMode {
    fn code(self) -> sys::MemraVerifyMode {
        match self {
            VerifyMode::Snapshots => sys::MEMRA_VERIFY_MODE_SNAPSHOTS,
            VerifyMode::FinalOnly => sys::MEMRA_VERIFY_MODE_FINAL_ONLY,
            VerifyMode::Journal => sys::MEMRA_VERIFY_MODE_JOURNAL,
        }
    }
}

/// Which key head a value head reads (`MemraHeadOrder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeadOrder {
    /// `kh = vh % num_k`, as ggml and memra-engine store the weights (the default).
    Tiled,
    /// `kh = vh / (num_v / num_k)`, as Hugging Face, vLLM and fla checkpoints do.
    Grouped,
}

impl HeadOrder {
    fn code(self) -> sys::MemraHeadOrder {
        match self {
            HeadOrder::Tiled => sys::MEMRA_HEAD_ORDER_TILED,
            HeadOrder::Grouped => sys::MEMRA_HEAD_ORDER_GROUPED,
        }
    }
}

/// The arguments of [`Engine::gdn_verify`], [`Engine::gdn_journal_commit`] and
/// [`Engine::gdn_rollback`] (`MemraVerifyArgs`): one description of a verify of `b_n`
/// sequences x `t` rows that all three read.
///
/// [`VerifyArgs::new`] sets the library's defaults (mode `Snapshots`, head order `Tiled`,
/// `d_state` 128, `eps` and `scale` NaN so that forgetting them is refused); the builder
/// methods set the rest. Buffers left unset are passed as `{NULL, 0}`: the library refuses a
/// missing required one, naming it, and skips an optional output. Shapes are those of
/// `abi/memra.h`.
///
/// ```no_run
/// use memra_engine::{Engine, VerifyArgs, VerifyMode};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let e = Engine::new(0)?;
/// let (num_k, num_v, d_conv, t, b_n) = (2usize, 4usize, 4usize, 3usize, 1usize);
/// let conv_dim = 128 * (2 * num_k + num_v);
/// let qkv = e.htod(&vec![0.25; b_n * t * conv_dim])?;
/// let w = e.htod(&vec![0.5; conv_dim * d_conv])?;
/// let (beta_raw, alpha) = (e.htod(&vec![0.1; t * num_v])?, e.htod(&vec![0.2; t * num_v])?);
/// let (dt_bias, a) = (e.htod(&vec![0.3; num_v])?, e.htod(&vec![-0.5; num_v])?);
/// let ring = e.zeros(conv_dim * (d_conv - 1))?;
/// let (s0, s1) = (e.zeros(128 * 128 * num_v)?, e.zeros(128 * 128 * num_v)?);
/// let stream = e.stream();
/// use memra_engine::DevicePtr;
/// let table = e.htod_u64(&[
///     ring.device_ptr(&stream).0,
///     s0.device_ptr(&stream).0,
///     s1.device_ptr(&stream).0,
/// ])?;
/// let mut o = e.uninit(t * num_v * 128)?;
/// let args = VerifyArgs::new(num_k, num_v, d_conv, t, b_n)
///     .mode(VerifyMode::FinalOnly)
///     .eps(1e-6)
///     .scale(1.0 / 128f32.sqrt())
///     .qkv(&qkv)
///     .table(&table)
///     .w(&w)
///     .beta_raw(&beta_raw)
///     .alpha(&alpha)
///     .dt_bias(&dt_bias)
///     .a(&a)
///     .o(&mut o);
/// e.gdn_verify(&args)?;
/// # Ok(())
/// # }
/// ```
pub struct VerifyArgs<'a> {
    /// The mode. Default [`VerifyMode::Snapshots`].
    pub mode: VerifyMode,
    /// The GQA head order. Default [`HeadOrder::Tiled`].
    pub head_order: HeadOrder,
    /// Head dimension; only 128 is supported. Default 128.
    pub d_state: usize,
    /// Key heads.
    pub num_k: usize,
    /// Value heads, a multiple of `num_k`.
    pub num_v: usize,
    /// Conv width, `1 ..= 8`.
    pub d_conv: usize,
    /// Rows per sequence (the draft length plus one).
    pub t: usize,
    /// Sequences.
    pub b_n: usize,
    /// The prep's L2-normalisation epsilon. Default NaN (refused): set it.
    pub eps: f32,
    /// The scale applied to every output. Default NaN (refused): set it.
    pub scale: f32,
    /// `[b_n, t, conv_dim]`: the new rows.
    pub qkv: Option<&'a dyn DevicePtr<f32>>,
    /// `[b_n, 3]` device addresses (see [`VerifyMode`]).
    pub table: Option<&'a dyn DevicePtr<u64>>,
    /// `[conv_dim, d_conv]`: the conv weights.
    pub w: Option<&'a dyn DevicePtr<f32>>,
    /// `[b_n, t, num_v]`: the raw beta logits.
    pub beta_raw: Option<&'a dyn DevicePtr<f32>>,
    /// `[b_n, t, num_v]`: the decay inputs.
    pub alpha: Option<&'a dyn DevicePtr<f32>>,
    /// `[num_v]`.
    pub dt_bias: Option<&'a dyn DevicePtr<f32>>,
    /// `[num_v]`: the pre-negated decay.
    pub a: Option<&'a dyn DevicePtr<f32>>,
    /// `[b_n]` u32 accepted counts (journal mode, commit and rollback).
    pub accepted: Option<&'a dyn DevicePtr<u32>>,
    /// `[b_n, t, num_v, 128]`: the outputs. Required by the verify.
    pub o: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, conv_dim]`: the conv + SiLU outputs.
    pub conv_outs: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, num_v, 128]`.
    pub q_l2: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, num_v, 128]`.
    pub k_l2: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, num_v, 128]`.
    pub v_g: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, num_v]`.
    pub beta: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Optional `[b_n, t, num_v]`.
    pub g_log: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Snapshots mode: `[b_n, t-1, conv_dim, d_conv-1]`.
    pub snap_conv: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Snapshots mode: `[b_n, t-1, num_v, 128, 128]`.
    pub snap_ssm: Option<&'a mut dyn DevicePtrMut<f32>>,
    /// Journal mode and commit: the `t_max` the journals were sized with
    /// (`memra_gdn_journal_len`); 0 (the default) declares none.
    pub journal_t_max: usize,
    /// Optional scratch of `memra_gdn_verify_workspace_len` f32 for the CUDA verify; without
    /// one the engine uses its own.
    pub workspace: Option<&'a mut dyn DevicePtrMut<f32>>,
}

/// Builder methods that set fields: plain values (`name: T`), buffer inputs of `T` elements
/// (`name: T`) and f32 outputs.
macro_rules! setters {
    (
        values { $( $(#[$vdoc:meta])* $val:ident: $vt:ty; )* }
        inputs { $( $(#[$doc:meta])* $name:ident: $t:ty; )* }
        outputs { $( $(#[$odoc:meta])* $out:ident; )* }
    ) => {
        $(
            $(#[$vdoc])*
            pub fn $val(mut self, $val: $vt) -> Self {
                self.$val = $val;
                self
            }
        )*
        $(
            $(#[$doc])*
            pub fn $name(mut self, buf: &'a impl DevicePtr<$t>) -> Self {
                self.$name = Some(buf);
                self
            }
        )*
        $(
            $(#[$odoc])*
            pub fn $out(mut self, buf: &'a mut impl DevicePtrMut<f32>) -> Self {
                self.$out = Some(buf);
                self
            }
        )*
    };
}

impl<'a> VerifyArgs<'a> {
    /// A verify of `b_n` sequences x `t` rows of the shape `num_k`, `num_v`, `d_conv`, with the
    /// library's defaults for everything else and no buffer set.
    pub fn new(num_k: usize, num_v: usize, d_conv: usize, t: usize, b_n: usize) -> VerifyArgs<'a> {
        VerifyArgs {
            mode: VerifyMode::Snapshots,
            head_order: HeadOrder::Tiled,
            d_state: sys::MEMRA_D_STATE as usize,
            num_k,
            num_v,
            d_conv,
            t,
            b_n,
            eps: f32::NAN,
            scale: f32::NAN,
            qkv: None,
            table: None,
            w: None,
            beta_raw: None,
            alpha: None,
            dt_bias: None,
            a: None,
            accepted: None,
            o: None,
            conv_outs: None,
            q_l2: None,
            k_l2: None,
            v_g: None,
            beta: None,
            g_log: None,
            snap_conv: None,
            snap_ssm: None,
            journal_t_max: 0,
            workspace: None,
        }
    }

    setters! {
        values {
            /// Sets the mode.
            mode: VerifyMode;
            /// Sets the head order.
            head_order: HeadOrder;
            /// Sets the prep's epsilon.
            eps: f32;
            /// Sets the output scale.
            scale: f32;
            /// Sets the capacity the journals were sized with.
            journal_t_max: usize;
        }
        inputs {
            /// Sets the new rows.
            qkv: f32;
            /// Sets the pointer table.
            table: u64;
            /// Sets the conv weights.
            w: f32;
            /// Sets the raw beta logits.
            beta_raw: f32;
            /// Sets the decay inputs.
            alpha: f32;
            /// Sets `dt_bias`.
            dt_bias: f32;
            /// Sets the pre-negated decay.
            a: f32;
            /// Sets the accepted counts.
            accepted: u32;
        }
        outputs {
            /// Sets the outputs.
            o;
            /// Asks for the conv outputs.
            conv_outs;
            /// Asks for the normalised q.
            q_l2;
            /// Asks for the normalised k.
            k_l2;
            /// Asks for the v channels.
            v_g;
            /// Asks for `sigmoid(beta_raw)`.
            beta;
            /// Asks for the log decays.
            g_log;
            /// Sets the ring snapshots.
            snap_conv;
            /// Sets the state snapshots.
            snap_ssm;
            /// Gives the verify a workspace of its own.
            workspace;
        }
    }
}

impl fmt::Debug for VerifyArgs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyArgs")
            .field("mode", &self.mode)
            .field("head_order", &self.head_order)
            .field("d_state", &self.d_state)
            .field("num_k", &self.num_k)
            .field("num_v", &self.num_v)
            .field("d_conv", &self.d_conv)
            .field("t", &self.t)
            .field("b_n", &self.b_n)
            .field("eps", &self.eps)
            .field("scale", &self.scale)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The library's argument struct for `args`, every buffer checked (it belongs to this
    /// engine; inside a capture the graph retains it).
    fn verify_args(
        &self,
        g: &LockGuard<'_>,
        func: &str,
        args: &VerifyArgs<'_>,
    ) -> Res<sys::MemraVerifyArgs> {
        let f32_in = |name: &str, b: Option<&dyn DevicePtr<f32>>| -> Res<sys::MemraSliceF32> {
            match b {
                Some(b) => Ok(self.arg(g, func, name, b.raw())?.f32()),
                None => Ok(NO_F32),
            }
        };
        let f32_out =
            |name: &str, b: &Option<&mut dyn DevicePtrMut<f32>>| -> Res<sys::MemraSliceMutF32> {
                match b {
                    Some(b) => Ok(self.arg(g, func, name, b.raw())?.f32_mut()),
                    None => Ok(NO_F32_MUT),
                }
            };
        // SAFETY: MemraVerifyArgs is plain data; the init call below overwrites every field.
        let mut raw: sys::MemraVerifyArgs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a MemraVerifyArgs.
        check(unsafe { sys::memra_verify_args_init(&mut raw) })?;
        raw.mode = args.mode.code();
        raw.head_order = args.head_order.code();
        raw.d_state = args.d_state;
        raw.num_k = args.num_k;
        raw.num_v = args.num_v;
        raw.d_conv = args.d_conv;
        raw.t = args.t;
        raw.b_n = args.b_n;
        raw.eps = args.eps;
        raw.scale = args.scale;
        raw.qkv = f32_in("qkv", args.qkv)?;
        raw.table = match args.table {
            Some(b) => self.arg(g, func, "table", b.raw())?.u64(),
            None => NO_U64,
        };
        raw.w = f32_in("w", args.w)?;
        raw.beta_raw = f32_in("beta_raw", args.beta_raw)?;
        raw.alpha = f32_in("alpha", args.alpha)?;
        raw.dt_bias = f32_in("dt_bias", args.dt_bias)?;
        raw.a = f32_in("a", args.a)?;
        raw.accepted = match args.accepted {
            Some(b) => self.arg(g, func, "accepted", b.raw())?.u32(),
            None => NO_U32,
        };
        raw.o = f32_out("o", &args.o)?;
        raw.conv_outs = f32_out("conv_outs", &args.conv_outs)?;
        raw.q_l2 = f32_out("q_l2", &args.q_l2)?;
        raw.k_l2 = f32_out("k_l2", &args.k_l2)?;
        raw.v_g = f32_out("v_g", &args.v_g)?;
        raw.beta = f32_out("beta", &args.beta)?;
        raw.g_log = f32_out("g_log", &args.g_log)?;
        raw.snap_conv = f32_out("snap_conv", &args.snap_conv)?;
        raw.snap_ssm = f32_out("snap_ssm", &args.snap_ssm)?;
        raw.journal_t_max = args.journal_t_max;
        raw.workspace = f32_out("workspace", &args.workspace)?;
        Ok(raw)
    }

    fn run_verify(
        &self,
        func: &str,
        entry: unsafe extern "C" fn(
            *mut sys::MemraEngine,
            *const sys::MemraVerifyArgs,
        ) -> sys::MemraStatus,
        args: &VerifyArgs<'_>,
    ) -> Res<()> {
        let g = self.lock();
        let raw = self.verify_args(&g, func, args)?;
        // SAFETY: a live engine, its lock held, and an initialised argument struct whose
        // slices describe live buffers of it (or {NULL, 0}).
        check(unsafe { entry(self.raw(), &raw) })
    }

    /// The whole speculative verify of `b_n` sequences x `t` rows, conv + prep + scan, in one
    /// launch on CUDA (`memra_gdn_verify`, ABI 1.1). Every tensor it writes is bit-identical to
    /// what the 1.0 packed program writes for the same inputs. Graph-capturable.
    pub fn gdn_verify(&self, args: &VerifyArgs<'_>) -> Result<()> {
        Ok(self.run_verify("Engine::gdn_verify", sys::memra_gdn_verify, args)?)
    }

    /// Folds the accepted journal rows of each sequence into its ring and state and empties the
    /// journal (`memra_gdn_journal_commit`, ABI 1.1; `args.mode` must be
    /// [`VerifyMode::Journal`]). Graph-capturable.
    pub fn gdn_journal_commit(&self, args: &VerifyArgs<'_>) -> Result<()> {
        Ok(self.run_verify(
            "Engine::gdn_journal_commit",
            sys::memra_gdn_journal_commit,
            args,
        )?)
    }

    /// Device-side rollback after a snapshots-mode verify (`memra_gdn_rollback`, ABI 1.1):
    /// makes each sequence's canonical state and ring those after row `accepted[b] - 1`.
    /// Graph-capturable.
    pub fn gdn_rollback(&self, args: &VerifyArgs<'_>) -> Result<()> {
        Ok(self.run_verify("Engine::gdn_rollback", sys::memra_gdn_rollback, args)?)
    }
}
