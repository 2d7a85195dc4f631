//! The GDN operations, with memra-engine's names and argument order.
//!
//! Each method checks that every buffer belongs to this engine, then hands the buffers' true
//! addresses and lengths to the library, which validates the shapes before it launches or
//! writes anything. The library's documentation in `abi/memra.h` (and `memra_sys`) gives the
//! layouts; the summaries here say what each argument is.

use memra_sys as sys;

use crate::buffer::{DevicePtr, DevicePtrMut};
use crate::engine::Engine;
use crate::error::{check, Result};

impl Engine {
    fn in_f32<S: DevicePtr<f32> + ?Sized>(
        &self,
        func: &str,
        name: &str,
        buf: &S,
    ) -> Result<sys::MemraSliceF32> {
        self.arg(func, name, buf.raw()).map(|b| b.f32())
    }

    fn in_u64<S: DevicePtr<u64> + ?Sized>(
        &self,
        func: &str,
        name: &str,
        buf: &S,
    ) -> Result<sys::MemraSliceU64> {
        self.arg(func, name, buf.raw()).map(|b| b.u64())
    }

    fn out_f32<S: DevicePtrMut<f32> + ?Sized>(
        &self,
        func: &str,
        name: &str,
        buf: &mut S,
    ) -> Result<sys::MemraSliceMutF32> {
        self.arg(func, name, buf.raw()).map(|b| b.f32_mut())
    }

    /// An optional output: `{NULL, 0}` when absent, as the library expects.
    fn opt_out_f32(
        &self,
        func: &str,
        name: &str,
        buf: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<sys::MemraSliceMutF32> {
        match buf {
            Some(b) => self.out_f32(func, name, b),
            None => Ok(sys::MemraSliceMutF32 {
                ptr: std::ptr::null_mut(),
                len: 0,
            }),
        }
    }

    /// Per-row causal conv step + SiLU for `b_n` independent sequences, one row each
    /// (`memra_ssm_conv1d_fused_decode_b_view`).
    ///
    /// `qkv` is `[b_n, conv_dim]`; `conv_ptrs` holds `b_n` addresses, entry b the ring
    /// `[conv_dim, d_conv - 1]` of sequence b, read at execution and rolled in place; `w` is
    /// `[conv_dim, d_conv]`; `conv_out` is `[b_n, conv_dim]`.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_conv1d_fused_decode_b_view(
        &self,
        qkv: &impl DevicePtr<f32>,
        conv_ptrs: &impl DevicePtr<u64>,
        w: &impl DevicePtr<f32>,
        conv_out: &mut impl DevicePtrMut<f32>,
        conv_dim: usize,
        d_conv: usize,
        b_n: usize,
    ) -> Result<()> {
        const F: &str = "Engine::ssm_conv1d_fused_decode_b_view";
        let qkv = self.in_f32(F, "qkv", qkv)?;
        let conv_ptrs = self.in_u64(F, "conv_ptrs", conv_ptrs)?;
        let w = self.in_f32(F, "w", w)?;
        let conv_out = self.out_f32(F, "conv_out", conv_out)?;
        // SAFETY: a live engine and slices that describe live buffers of it.
        check(unsafe {
            sys::memra_ssm_conv1d_fused_decode_b_view(
                self.raw(),
                qkv,
                conv_ptrs,
                w,
                conv_out,
                conv_dim,
                d_conv,
                b_n,
            )
        })
    }

    /// GDN prep for `b_n` rows, taking views (`memra_gdn_prep_decode_b_view`); identical to
    /// [`Engine::gdn_prep_decode_b`].
    #[allow(clippy::too_many_arguments)]
    pub fn gdn_prep_decode_b_view(
        &self,
        conv_out: &impl DevicePtr<f32>,
        beta_raw: &impl DevicePtr<f32>,
        alpha: &impl DevicePtr<f32>,
        dt_bias: &impl DevicePtr<f32>,
        a: &impl DevicePtr<f32>,
        q_l2: &mut impl DevicePtrMut<f32>,
        k_l2: &mut impl DevicePtrMut<f32>,
        v_g: &mut impl DevicePtrMut<f32>,
        beta: &mut impl DevicePtrMut<f32>,
        g_log: &mut impl DevicePtrMut<f32>,
        d_state: usize,
        num_v: usize,
        num_k: usize,
        key_dim: usize,
        eps: f32,
        conv_dim: usize,
        b_n: usize,
    ) -> Result<()> {
        self.prep(
            "Engine::gdn_prep_decode_b_view",
            sys::memra_gdn_prep_decode_b_view,
            conv_out,
            beta_raw,
            alpha,
            dt_bias,
            a,
            q_l2,
            k_l2,
            v_g,
            beta,
            g_log,
            d_state,
            num_v,
            num_k,
            key_dim,
            eps,
            conv_dim,
            b_n,
        )
    }

    /// GDN prep for `b_n` rows (`memra_gdn_prep_decode_b`): per-row, one row of each of `b_n`
    /// sequences; packed, the `T` rows of one sequence (`b_n = T`) or `B * T` rows of a batch.
    ///
    /// Inputs: `conv_out` `[b_n, conv_dim]` (channels q | k | v), `beta_raw` and `alpha`
    /// `[b_n, num_v]`, `dt_bias` and `a` `[num_v]`. Outputs: `q_l2`, `k_l2`, `v_g`
    /// `[b_n, num_v, d_state]`, `beta` and `g_log` `[b_n, num_v]`. Requires `d_state == 128`,
    /// `num_v % num_k == 0`, `key_dim == d_state * num_k`,
    /// `conv_dim == 2 * key_dim + d_state * num_v` and a finite `eps`.
    #[allow(clippy::too_many_arguments)]
    pub fn gdn_prep_decode_b(
        &self,
        conv_out: &impl DevicePtr<f32>,
        beta_raw: &impl DevicePtr<f32>,
        alpha: &impl DevicePtr<f32>,
        dt_bias: &impl DevicePtr<f32>,
        a: &impl DevicePtr<f32>,
        q_l2: &mut impl DevicePtrMut<f32>,
        k_l2: &mut impl DevicePtrMut<f32>,
        v_g: &mut impl DevicePtrMut<f32>,
        beta: &mut impl DevicePtrMut<f32>,
        g_log: &mut impl DevicePtrMut<f32>,
        d_state: usize,
        num_v: usize,
        num_k: usize,
        key_dim: usize,
        eps: f32,
        conv_dim: usize,
        b_n: usize,
    ) -> Result<()> {
        self.prep(
            "Engine::gdn_prep_decode_b",
            sys::memra_gdn_prep_decode_b,
            conv_out,
            beta_raw,
            alpha,
            dt_bias,
            a,
            q_l2,
            k_l2,
            v_g,
            beta,
            g_log,
            d_state,
            num_v,
            num_k,
            key_dim,
            eps,
            conv_dim,
            b_n,
        )
    }

    /// Checks the buffers and calls `entry`, one of the two prep entry points, which share
    /// their signature.
    #[allow(clippy::too_many_arguments)]
    fn prep(
        &self,
        func: &str,
        entry: PrepFn,
        conv_out: &impl DevicePtr<f32>,
        beta_raw: &impl DevicePtr<f32>,
        alpha: &impl DevicePtr<f32>,
        dt_bias: &impl DevicePtr<f32>,
        a: &impl DevicePtr<f32>,
        q_l2: &mut impl DevicePtrMut<f32>,
        k_l2: &mut impl DevicePtrMut<f32>,
        v_g: &mut impl DevicePtrMut<f32>,
        beta: &mut impl DevicePtrMut<f32>,
        g_log: &mut impl DevicePtrMut<f32>,
        d_state: usize,
        num_v: usize,
        num_k: usize,
        key_dim: usize,
        eps: f32,
        conv_dim: usize,
        b_n: usize,
    ) -> Result<()> {
        let conv_out = self.in_f32(func, "conv_out", conv_out)?;
        let beta_raw = self.in_f32(func, "beta_raw", beta_raw)?;
        let alpha = self.in_f32(func, "alpha", alpha)?;
        let dt_bias = self.in_f32(func, "dt_bias", dt_bias)?;
        let a = self.in_f32(func, "a", a)?;
        let q_l2 = self.out_f32(func, "q_l2", q_l2)?;
        let k_l2 = self.out_f32(func, "k_l2", k_l2)?;
        let v_g = self.out_f32(func, "v_g", v_g)?;
        let beta = self.out_f32(func, "beta", beta)?;
        let g_log = self.out_f32(func, "g_log", g_log)?;
        // SAFETY: a live engine and slices that describe live buffers of it.
        check(unsafe {
            entry(
                self.raw(),
                conv_out,
                beta_raw,
                alpha,
                dt_bias,
                a,
                q_l2,
                k_l2,
                v_g,
                beta,
                g_log,
                d_state,
                num_v,
                num_k,
                key_dim,
                eps,
                conv_dim,
                b_n,
            )
        })
    }

    /// One recurrent GDN step (head dim 128) for `b_n` independent sequences, one row each
    /// (`memra_gdn_scan_s128_batched_view`).
    ///
    /// `q`, `k`, `v` are `[b_n, num_v, 128]`, `g_log` and `beta` `[b_n, num_v]`; `in_ptrs` and
    /// `out_ptrs` hold `b_n` addresses each, entry b the state `[num_v, 128, 128]` (transposed)
    /// sequence b reads and the one it writes (they may be equal: in place). `o` receives
    /// `[b_n, num_v, 128]`, scaled by `scale`.
    #[allow(clippy::too_many_arguments)]
    pub fn gdn_scan_s128_batched_view(
        &self,
        q: &impl DevicePtr<f32>,
        k: &impl DevicePtr<f32>,
        v: &impl DevicePtr<f32>,
        g_log: &impl DevicePtr<f32>,
        beta: &impl DevicePtr<f32>,
        in_ptrs: &impl DevicePtr<u64>,
        out_ptrs: &impl DevicePtr<u64>,
        o: &mut impl DevicePtrMut<f32>,
        num_v: usize,
        b_n: usize,
        scale: f32,
    ) -> Result<()> {
        const F: &str = "Engine::gdn_scan_s128_batched_view";
        let q = self.in_f32(F, "q", q)?;
        let k = self.in_f32(F, "k", k)?;
        let v = self.in_f32(F, "v", v)?;
        let g_log = self.in_f32(F, "g_log", g_log)?;
        let beta = self.in_f32(F, "beta", beta)?;
        let in_ptrs = self.in_u64(F, "in_ptrs", in_ptrs)?;
        let out_ptrs = self.in_u64(F, "out_ptrs", out_ptrs)?;
        let o = self.out_f32(F, "o", o)?;
        // SAFETY: a live engine and slices that describe live buffers of it.
        check(unsafe {
            sys::memra_gdn_scan_s128_batched_view(
                self.raw(),
                q,
                k,
                v,
                g_log,
                beta,
                in_ptrs,
                out_ptrs,
                o,
                num_v,
                b_n,
                scale,
            )
        })
    }

    /// Packed conv for one sequence: `t` conv steps in one launch, bit-identical to `t` chained
    /// [`Engine::ssm_conv1d_fused_decode_b_view`] calls (`memra_ssm_conv1d_fused_decode_tloop`
    /// with `b_n = 1`).
    ///
    /// `qkv` is `[t, conv_dim]`; `table` is `[conv ring, canonical state, alternate state]`
    /// (only the ring is used: read at execution, rolled through all `t` rows); `conv_outs` is
    /// `[t, conv_dim]`; `snap_conv`, when given, `[t - 1, conv_dim, d_conv - 1]`: entry r is the
    /// ring after row r.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_conv1d_fused_decode_tloop(
        &self,
        qkv: &impl DevicePtr<f32>,
        table: &impl DevicePtr<u64>,
        w: &impl DevicePtr<f32>,
        conv_outs: &mut impl DevicePtrMut<f32>,
        snap_conv: Option<&mut dyn DevicePtrMut<f32>>,
        conv_dim: usize,
        d_conv: usize,
        t: usize,
    ) -> Result<()> {
        self.ssm_conv1d_fused_decode_tloop_batched(
            qkv, table, w, conv_outs, snap_conv, conv_dim, d_conv, t, 1,
        )
    }

    /// Packed conv for `b_n` sequences of `t` rows each in one launch
    /// (`memra_ssm_conv1d_fused_decode_tloop`): `qkv` and `conv_outs` are
    /// `[b_n, t, conv_dim]`, `table` is `[b_n, 3]`, `snap_conv` `[b_n, t - 1, conv_dim,
    /// d_conv - 1]`.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_conv1d_fused_decode_tloop_batched(
        &self,
        qkv: &impl DevicePtr<f32>,
        table: &impl DevicePtr<u64>,
        w: &impl DevicePtr<f32>,
        conv_outs: &mut impl DevicePtrMut<f32>,
        snap_conv: Option<&mut dyn DevicePtrMut<f32>>,
        conv_dim: usize,
        d_conv: usize,
        t: usize,
        b_n: usize,
    ) -> Result<()> {
        const F: &str = "Engine::ssm_conv1d_fused_decode_tloop";
        let qkv = self.in_f32(F, "qkv", qkv)?;
        let table = self.in_u64(F, "table", table)?;
        let w = self.in_f32(F, "w", w)?;
        let conv_outs = self.out_f32(F, "conv_outs", conv_outs)?;
        let snap_conv = self.opt_out_f32(F, "snap_conv", snap_conv)?;
        // SAFETY: a live engine and slices that describe live buffers of it (or {NULL, 0}).
        check(unsafe {
            sys::memra_ssm_conv1d_fused_decode_tloop(
                self.raw(),
                qkv,
                table,
                w,
                conv_outs,
                snap_conv,
                conv_dim,
                d_conv,
                t,
                b_n,
            )
        })
    }

    /// Packed scan for one sequence: `t` recurrent steps in one launch, bit-identical to `t`
    /// chained [`Engine::gdn_scan_s128_batched_view`] calls that ping-pong the state
    /// (`memra_gdn_scan_s128_tsnap` with `b_n = 1`).
    ///
    /// `q`, `k`, `v` are `[t, num_v, 128]`, `g_log` and `beta` `[t, num_v]`; `table` is
    /// `[conv ring (unused), canonical state, alternate state]`, read at execution: the
    /// canonical state is read once and the final state lands in the alternate buffer when `t`
    /// is odd, back in the canonical one when `t` is even. `o_all` is `[t, num_v, 128]`;
    /// `snap_ssm`, when given, `[t - 1, num_v, 128, 128]`: entry r is the state after row r.
    #[allow(clippy::too_many_arguments)]
    pub fn gdn_scan_s128_tsnap(
        &self,
        q: &impl DevicePtr<f32>,
        k: &impl DevicePtr<f32>,
        v: &impl DevicePtr<f32>,
        g_log: &impl DevicePtr<f32>,
        beta: &impl DevicePtr<f32>,
        table: &impl DevicePtr<u64>,
        o_all: &mut impl DevicePtrMut<f32>,
        num_v: usize,
        t: usize,
        scale: f32,
        snap_ssm: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        self.gdn_scan_s128_tsnap_batched(
            q, k, v, g_log, beta, table, o_all, num_v, t, 1, scale, snap_ssm,
        )
    }

    /// Packed scan for `b_n` sequences of `t` rows each in one launch
    /// (`memra_gdn_scan_s128_tsnap`): activations `[b_n, t, ...]`, `table` `[b_n, 3]`,
    /// `snap_ssm` `[b_n, t - 1, num_v, 128, 128]`.
    #[allow(clippy::too_many_arguments)]
    pub fn gdn_scan_s128_tsnap_batched(
        &self,
        q: &impl DevicePtr<f32>,
        k: &impl DevicePtr<f32>,
        v: &impl DevicePtr<f32>,
        g_log: &impl DevicePtr<f32>,
        beta: &impl DevicePtr<f32>,
        table: &impl DevicePtr<u64>,
        o_all: &mut impl DevicePtrMut<f32>,
        num_v: usize,
        t: usize,
        b_n: usize,
        scale: f32,
        snap_ssm: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        const F: &str = "Engine::gdn_scan_s128_tsnap";
        let q = self.in_f32(F, "q", q)?;
        let k = self.in_f32(F, "k", k)?;
        let v = self.in_f32(F, "v", v)?;
        let g_log = self.in_f32(F, "g_log", g_log)?;
        let beta = self.in_f32(F, "beta", beta)?;
        let table = self.in_u64(F, "table", table)?;
        let o_all = self.out_f32(F, "o_all", o_all)?;
        let snap_ssm = self.opt_out_f32(F, "snap_ssm", snap_ssm)?;
        // SAFETY: a live engine and slices that describe live buffers of it (or {NULL, 0}).
        check(unsafe {
            sys::memra_gdn_scan_s128_tsnap(
                self.raw(),
                q,
                k,
                v,
                g_log,
                beta,
                table,
                o_all,
                num_v,
                t,
                b_n,
                scale,
                snap_ssm,
            )
        })
    }
}

/// The signature both prep entry points share.
type PrepFn = unsafe extern "C" fn(
    *mut sys::MemraEngine,
    sys::MemraSliceF32,
    sys::MemraSliceF32,
    sys::MemraSliceF32,
    sys::MemraSliceF32,
    sys::MemraSliceF32,
    sys::MemraSliceMutF32,
    sys::MemraSliceMutF32,
    sys::MemraSliceMutF32,
    sys::MemraSliceMutF32,
    sys::MemraSliceMutF32,
    usize,
    usize,
    usize,
    usize,
    f32,
    usize,
    usize,
) -> sys::MemraStatus;
