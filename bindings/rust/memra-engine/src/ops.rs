//! The GDN operations, with memra-engine's names, argument order and both API generations:
//! 0.72's (`ssm_conv1d_fused_decode_b`, `gdn_prep_decode_b`, `gdn_scan_s128_batched` and the
//! single-sequence `ssm_conv1d_fused_decode`, `gdn_prep_decode`, `gdn_scan_s128`,
//! `gdn_scan_s128_view`) and 0.136's (`_b_view`, `_batched_view`, `_tloop`, `_tsnap`).
//!
//! Each method checks that every buffer belongs to this engine, then hands the buffers' true
//! addresses and lengths to the library, which validates the shapes before it launches or
//! writes anything. Tensor parameters accept a [`CudaSlice`], a view or a reference to either
//! (`&impl DevicePtr<f32>`); optional snapshot outputs are `Option<&mut CudaSlice<f32>>`, as in
//! memra-engine. The library's documentation in `abi/memra.h` (and `memra_sys`) gives the
//! layouts; the summaries here say what each argument is.

use memra_sys as sys;

use crate::buffer::sealed::RawBuf;
use crate::buffer::{CudaSlice, CudaView, DevicePtr, DevicePtrMut, NO_F32, NO_F32_MUT};
use crate::engine::{elements, Engine};
use crate::error::{check, Error, Res, Result, Status};
use crate::lock::LockGuard;

/// The scan inputs, in the order the entry points take them.
const SCAN_IN: [&str; 5] = ["q", "k", "v", "g_log", "beta"];

/// Defines one operation under each of the names memra-engine's two API generations give it
/// (0.72's `_b` / `_batched` next to 0.136's `_view` forms), from one parameter list and one
/// body: each name gets its own documentation and reports errors as `Engine::<name>` (the
/// constant `F` the body reads).
macro_rules! named_ops {
    (
        fn $params:tt $body:block
        $( $(#[$doc:meta])* $name:ident(); )+
    ) => {
        $(
            $(#[$doc])*
            #[allow(clippy::too_many_arguments)]
            pub fn $name $params -> Result<()> {
                const F: &str = concat!("Engine::", stringify!($name));
                $body
            }
        )+
    };
}

/// Defines the GDN prep under each of its names from one parameter list and one body, which
/// calls the C entry point bound to the identifier before `=>` (each name gives its own).
/// 0.72's single-row name (`without`, first) takes the list without the bracketed parameters
/// and derives their values in its block; the `b_n`-row names take them after the list. Errors name each as `Engine::<name>` (the constant `F`).
macro_rules! prep_ops {
    (
        fn $params:tt $extra:tt $entry:ident => $body:block
        $(#[$odoc:meta])* $one:ident = $one_e:expr, without $derive:block;
        $( $(#[$doc:meta])* $name:ident = $e:expr; )+
    ) => {
        $(
            prep_ops!(@with $params $extra $(#[$doc])* $name {
                let $entry = $e;
                $body
            });
        )+
        prep_ops!(@without $params $extra $(#[$odoc])* $one $derive {
            let $entry = $one_e;
            $body
        });
    };
    (
        @with (&$s:ident, $($p:ident: $t:ty,)*) [$($x:ident: $xt:ty),+]
        $(#[$doc:meta])* $name:ident $body:block
    ) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(&$s, $($p: $t,)* $($x: $xt,)+) -> Result<()> {
            const F: &str = concat!("Engine::", stringify!($name));
            $body
        }
    };
    (
        @without (&$s:ident, $($p:ident: $t:ty,)*) [$($x:ident: $xt:ty),+]
        $(#[$doc:meta])* $name:ident $derive:block $body:block
    ) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(&$s, $($p: $t,)*) -> Result<()> {
            const F: &str = concat!("Engine::", stringify!($name));
            let ($($x,)+): ($($xt,)+) = $derive;
            $body
        }
    };
}

/// Defines a packed operation twice from one parameter list and one body, as memra-engine
/// names it: for one sequence (`b_n` is 1) and `_batched` (`b_n` is a parameter, where `[b_n]`
/// stands in the list). Errors name each as `Engine::<name>` (the constant `F`).
macro_rules! packed_ops {
    (
        fn(&$s:ident, $($pre:ident: $pty:ty,)* [$bn:ident], $($post:ident: $poty:ty,)*)
        $body:block
        $(#[$sdoc:meta])* $single:ident;
        $(#[$bdoc:meta])* $batched:ident;
    ) => {
        $(#[$sdoc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $single(&$s, $($pre: $pty,)* $($post: $poty,)*) -> Result<()> {
            const F: &str = concat!("Engine::", stringify!($single));
            let $bn: usize = 1;
            $body
        }

        $(#[$bdoc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $batched(&$s, $($pre: $pty,)* $bn: usize, $($post: $poty,)*) -> Result<()> {
            const F: &str = concat!("Engine::", stringify!($batched));
            $body
        }
    };
}

impl Engine {
    /// `buf` as argument `name` of `func` (see [`Engine::arg`]).
    fn t<'b, T, B: DevicePtr<T> + ?Sized>(
        &self,
        guard: &LockGuard<'_>,
        func: &str,
        name: &str,
        buf: &'b B,
    ) -> Res<RawBuf<'b>> {
        self.arg(guard, func, name, buf.raw())
    }

    /// An optional output: `{NULL, 0}` when absent, as the library expects.
    fn opt(
        &self,
        guard: &LockGuard<'_>,
        func: &str,
        name: &str,
        buf: &Option<&mut CudaSlice<f32>>,
    ) -> Res<sys::MemraSliceMutF32> {
        match buf {
            Some(b) => Ok(self.t(guard, func, name, &**b)?.f32_mut()),
            None => Ok(NO_F32_MUT),
        }
    }

    /// Five checked f32 inputs named `names`, in that order.
    fn inputs(
        &self,
        g: &LockGuard<'_>,
        func: &str,
        names: [&str; 5],
        ins: [&dyn DevicePtr<f32>; 5],
    ) -> Res<[sys::MemraSliceF32; 5]> {
        let mut out = [NO_F32; 5];
        for (i, buf) in ins.iter().enumerate() {
            out[i] = self.t(g, func, names[i], *buf)?.f32();
        }
        Ok(out)
    }

    /// Five checked f32 outputs named `names`, in that order.
    fn outputs(
        &self,
        g: &LockGuard<'_>,
        func: &str,
        names: [&str; 5],
        outs: [&mut dyn DevicePtrMut<f32>; 5],
    ) -> Res<[sys::MemraSliceMutF32; 5]> {
        let mut out = [NO_F32_MUT; 5];
        for (i, buf) in outs.iter().enumerate() {
            out[i] = self.t(g, func, names[i], &**buf)?.f32_mut();
        }
        Ok(out)
    }

    named_ops! {
        fn(
            &self,
            qkv: &impl DevicePtr<f32>,
            conv_ptrs: &impl DevicePtr<u64>,
            w: &impl DevicePtr<f32>,
            conv_out: &mut impl DevicePtrMut<f32>,
            conv_dim: usize,
            d_conv: usize,
            b_n: usize,
        ) {
            let g = self.lock();
            let qkv = self.t(&g, F, "qkv", qkv)?.f32();
            let conv_ptrs = self.t(&g, F, "conv_ptrs", conv_ptrs)?.u64();
            let w = self.t(&g, F, "w", w)?.f32();
            let conv_out = self.t(&g, F, "conv_out", &*conv_out)?.f32_mut();
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
            Ok(check(unsafe {
                sys::memra_ssm_conv1d_fused_decode_b_view(
                    raw,
                    qkv,
                    conv_ptrs,
                    w,
                    conv_out,
                    conv_dim,
                    d_conv,
                    b_n,
                )
            })?)
        }

        /// Per-row causal conv step + SiLU for `b_n` independent sequences, one row each
        /// (`memra_ssm_conv1d_fused_decode_b_view`).
        ///
        /// `qkv` is `[b_n, conv_dim]`; `conv_ptrs` holds `b_n` addresses, entry b the ring
        /// `[conv_dim, d_conv - 1]` of sequence b, read at execution and rolled in place; `w`
        /// is `[conv_dim, d_conv]`; `conv_out` is `[b_n, conv_dim]`.
        ssm_conv1d_fused_decode_b_view();

        /// memra-engine 0.72's name for [`Engine::ssm_conv1d_fused_decode_b_view`]: the batched
        /// linear layer's conv step over a `[b_n]` table of rings.
        ssm_conv1d_fused_decode_b();
    }

    /// Per-row conv step + SiLU of ONE sequence whose ring `conv_state` (`[conv_dim,
    /// d_conv - 1]`, rolled in place) is passed directly (memra-engine 0.72's single-sequence
    /// `ssm_conv1d_fused_decode`; `memra_ssm_conv1d_fused_decode`). `qkv` and `conv_out` are
    /// `[conv_dim]`, `w` is `[conv_dim, d_conv]`. The bits are those of
    /// [`Engine::ssm_conv1d_fused_decode_b_view`] with `b_n = 1`. A graph captured with it
    /// rolls this very ring at every replay.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_conv1d_fused_decode(
        &self,
        qkv: &impl DevicePtr<f32>,
        conv_state: &mut impl DevicePtrMut<f32>,
        w: &impl DevicePtr<f32>,
        conv_out: &mut impl DevicePtrMut<f32>,
        conv_dim: usize,
        d_conv: usize,
    ) -> Result<()> {
        const F: &str = "Engine::ssm_conv1d_fused_decode";
        let g = self.lock();
        let qkv = self.t(&g, F, "qkv", qkv)?.f32();
        let conv_state = self.t(&g, F, "conv_state", &*conv_state)?.f32_mut();
        let w = self.t(&g, F, "w", w)?.f32();
        let conv_out = self.t(&g, F, "conv_out", &*conv_out)?.f32_mut();
        let raw = self.raw();
        // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
        Ok(check(unsafe {
            sys::memra_ssm_conv1d_fused_decode(raw, qkv, conv_state, w, conv_out, conv_dim, d_conv)
        })?)
    }

    /// Rebuilds a conv ring after a partial accept (memra-engine's `ssm_conv_ring_rebuild`):
    /// `conv_state` becomes the ring `ring_old` would be after the first `j` rows of `qkv`
    /// (`[>= j, conv_dim]`), i.e. the ring a verify leaves after its row `j - 1`. The ring only
    /// holds input columns, so this is a copy: `ring_old` is copied into `conv_state`, then
    /// [`Engine::ssm_conv1d_fused_decode`] rolls it through the `j` rows with scratch weights
    /// and outputs, moving values bit for bit (`j + 1` launches, graph-capturable).
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_conv_ring_rebuild(
        &self,
        qkv: &impl DevicePtr<f32>,
        ring_old: &impl DevicePtr<f32>,
        conv_state: &mut impl DevicePtrMut<f32>,
        conv_dim: usize,
        j: usize,
        d_conv: usize,
    ) -> Result<()> {
        const F: &str = "Engine::ssm_conv_ring_rebuild";
        let g = self.lock();
        let qkv = self.t(&g, F, "qkv", qkv)?;
        let ring_old = self.t(&g, F, "ring_old", ring_old)?;
        let conv_state = self.t(&g, F, "conv_state", &*conv_state)?;
        // Refused here as the library would refuse the first step, so that nothing is written.
        if !(1..=sys::MEMRA_D_CONV_MAX as usize).contains(&d_conv) {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{}: parameter 'd_conv': expected 1 ..= {}, got {}",
                    F,
                    sys::MEMRA_D_CONV_MAX,
                    d_conv
                ),
            )
            .into());
        }
        let rows = elements(F, "[j, conv_dim]", &[j, conv_dim])?;
        let ring = elements(F, "[conv_dim, d_conv - 1]", &[conv_dim, d_conv - 1])?;
        for (name, have, need) in [
            ("qkv", qkv.len, rows),
            ("ring_old", ring_old.len, ring),
            ("conv_state", conv_state.len, ring),
        ] {
            if have < need {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "{}: parameter '{}': expected at least {} elements, got {}",
                        F, name, need, have
                    ),
                )
                .into());
            }
        }
        if ring == 0 {
            // d_conv == 1 (or no channels): there is no ring to rebuild.
            return Ok(());
        }
        let state = conv_state.sub::<f32>(0, ring);
        self.copy_words(&g, state.f32_mut(), ring_old.sub::<f32>(0, ring).f32())?;
        if j == 0 {
            return Ok(());
        }
        let w = self.zeros(elements(F, "[conv_dim, d_conv]", &[conv_dim, d_conv])?)?;
        let out = self.uninit(conv_dim)?;
        for r in 0..j {
            // SAFETY: a live engine, its lock held; row r of the checked `qkv`, the checked
            // ring and the two scratch buffers of this engine, all long enough.
            check(unsafe {
                sys::memra_ssm_conv1d_fused_decode(
                    self.raw(),
                    qkv.sub::<f32>(r * conv_dim, conv_dim).f32(),
                    state.f32_mut(),
                    w.alloc_raw().f32(),
                    out.alloc_raw().f32_mut(),
                    conv_dim,
                    d_conv,
                )
            })?;
        }
        Ok(())
    }

    prep_ops! {
        fn(
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
        ) [conv_dim: usize, b_n: usize] entry => {
            const IN: [&str; 5] = ["conv_out", "beta_raw", "alpha", "dt_bias", "a"];
            const OUT: [&str; 5] = ["q_l2", "k_l2", "v_g", "beta", "g_log"];
            let g = self.lock();
            let ins: [&dyn DevicePtr<f32>; 5] = [conv_out, beta_raw, alpha, dt_bias, a];
            let [conv_out, beta_raw, alpha, dt_bias, a] = self.inputs(&g, F, IN, ins)?;
            let outs: [&mut dyn DevicePtrMut<f32>; 5] = [q_l2, k_l2, v_g, beta, g_log];
            let [q_l2, k_l2, v_g, beta, g_log] = self.outputs(&g, F, OUT, outs)?;
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
            Ok(check(unsafe {
                entry(
                    raw, conv_out, beta_raw, alpha, dt_bias, a, q_l2, k_l2, v_g, beta, g_log,
                    d_state, num_v, num_k, key_dim, eps, conv_dim, b_n,
                )
            })?)
        }

        /// GDN prep of ONE row (memra-engine 0.72's single-sequence `gdn_prep_decode`):
        /// [`Engine::gdn_prep_decode_b`] with `b_n = 1` and
        /// `conv_dim = 2 * key_dim + d_state * num_v`.
        gdn_prep_decode = sys::memra_gdn_prep_decode_b, without {
            let value_dim = elements(F, "d_state * num_v", &[d_state, num_v])?;
            let conv_dim = key_dim
                .checked_mul(2)
                .and_then(|k2| k2.checked_add(value_dim))
                .ok_or_else(|| {
                    Error::new(
                        Status::InvalidArgument,
                        format!(
                            "{}: conv_dim = 2 * key_dim + d_state * num_v overflows usize",
                            F
                        ),
                    )
                })?;
            (conv_dim, 1)
        };

        /// GDN prep for `b_n` rows, taking views (`memra_gdn_prep_decode_b_view`); identical
        /// to [`Engine::gdn_prep_decode_b`].
        gdn_prep_decode_b_view = sys::memra_gdn_prep_decode_b_view;

        /// GDN prep for `b_n` rows (`memra_gdn_prep_decode_b`): per-row, one row of each of
        /// `b_n` sequences; packed, the `T` rows of one sequence (`b_n = T`) or `B * T` rows of
        /// a batch.
        ///
        /// Inputs: `conv_out` `[b_n, conv_dim]` (channels q | k | v), `beta_raw` and `alpha`
        /// `[b_n, num_v]`, `dt_bias` and `a` `[num_v]`. Outputs: `q_l2`, `k_l2`, `v_g`
        /// `[b_n, num_v, d_state]`, `beta` and `g_log` `[b_n, num_v]`. Requires
        /// `d_state == 128`, `num_v % num_k == 0`, `key_dim == d_state * num_k`,
        /// `conv_dim == 2 * key_dim + d_state * num_v` and a finite `eps`.
        gdn_prep_decode_b = sys::memra_gdn_prep_decode_b;

    }

    named_ops! {
        fn(
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
        ) {
            let g = self.lock();
            let [q, k, v, g_log, beta] = self.inputs(&g, F, SCAN_IN, [q, k, v, g_log, beta])?;
            let in_ptrs = self.t(&g, F, "in_ptrs", in_ptrs)?.u64();
            let out_ptrs = self.t(&g, F, "out_ptrs", out_ptrs)?.u64();
            let o = self.t(&g, F, "o", &*o)?.f32_mut();
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
            Ok(check(unsafe {
                sys::memra_gdn_scan_s128_batched_view(
                    raw,
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
            })?)
        }

        /// One recurrent GDN step (head dim 128) for `b_n` independent sequences, one row each
        /// (`memra_gdn_scan_s128_batched_view`).
        ///
        /// `q`, `k`, `v` are `[b_n, num_v, 128]`, `g_log` and `beta` `[b_n, num_v]`; `in_ptrs`
        /// and `out_ptrs` hold `b_n` addresses each, entry b the state `[num_v, 128, 128]`
        /// (transposed) sequence b reads and the one it writes (they may be equal: in place).
        /// `o` receives `[b_n, num_v, 128]`, scaled by `scale`.
        gdn_scan_s128_batched_view();

        /// memra-engine 0.72's name for [`Engine::gdn_scan_s128_batched_view`]: the batched
        /// linear layer's recurrent step over `[b_n]` tables of input and output states.
        gdn_scan_s128_batched();
    }

    named_ops! {
        fn(
            &self,
            q: &impl DevicePtr<f32>,
            k: &impl DevicePtr<f32>,
            v: &impl DevicePtr<f32>,
            g: &impl DevicePtr<f32>,
            beta: &impl DevicePtr<f32>,
            state_in: &impl DevicePtr<f32>,
            state_out: &mut impl DevicePtrMut<f32>,
            o: &mut impl DevicePtrMut<f32>,
            n_head: usize,
            t: usize,
            scale: f32,
        ) {
            let lock = self.lock();
            let names = ["q", "k", "v", "g", "beta"];
            let [q, k, v, g, beta] = self.inputs(&lock, F, names, [q, k, v, g, beta])?;
            let state_in = self.t(&lock, F, "state_in", state_in)?.f32();
            let state_out = self.t(&lock, F, "state_out", &*state_out)?.f32_mut();
            let o = self.t(&lock, F, "o", &*o)?.f32_mut();
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
            Ok(check(unsafe {
                sys::memra_gdn_scan_s128(
                    raw,
                    q,
                    k,
                    v,
                    g,
                    beta,
                    state_in,
                    state_out,
                    o,
                    n_head,
                    t,
                    scale,
                )
            })?)
        }

        /// `t` recurrent GDN steps (head dim 128) of ONE sequence whose states are passed
        /// directly (memra-engine 0.72's single-sequence `gdn_scan_s128`): the steps start from
        /// `state_in`, which is left unchanged, and the state after the last row is written to
        /// `state_out`.
        ///
        /// `q`, `k`, `v` and `o` are `[t, n_head, 128]`, `g` (the log decay) and `beta`
        /// `[t, n_head]`, the states `[n_head, 128, 128]` transposed; `o` is scaled by `scale`.
        ///
        /// `memra_gdn_scan_s128`: the bits are those of `t` chained
        /// [`Engine::gdn_scan_s128_batched_view`] steps (and of the packed
        /// [`Engine::gdn_scan_s128_tsnap`]). A graph captured with it reads and writes these
        /// very states at every replay.
        gdn_scan_s128();

        /// [`Engine::gdn_scan_s128`] with the states given as views (memra-engine's
        /// `gdn_scan_s128_view`, for states resident inside a larger buffer).
        gdn_scan_s128_view();
    }

    packed_ops! {
        fn(
            &self,
            qkv: &impl DevicePtr<f32>,
            table: &impl DevicePtr<u64>,
            w: &impl DevicePtr<f32>,
            conv_outs: &mut impl DevicePtrMut<f32>,
            snap_conv: Option<&mut CudaSlice<f32>>,
            conv_dim: usize,
            d_conv: usize,
            t: usize,
            [b_n],
        ) {
            let g = self.lock();
            let qkv = self.t(&g, F, "qkv", qkv)?.f32();
            let table = self.t(&g, F, "table", table)?.u64();
            let w = self.t(&g, F, "w", w)?.f32();
            let conv_outs = self.t(&g, F, "conv_outs", &*conv_outs)?.f32_mut();
            let snap_conv = self.opt(&g, F, "snap_conv", &snap_conv)?;
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it
            // (or {NULL, 0}).
            Ok(check(unsafe {
                sys::memra_ssm_conv1d_fused_decode_tloop(
                    raw,
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
            })?)
        }

        /// Packed conv for one sequence: `t` conv steps in one launch, bit-identical to `t`
        /// chained [`Engine::ssm_conv1d_fused_decode_b_view`] calls
        /// (`memra_ssm_conv1d_fused_decode_tloop` with `b_n = 1`).
        ///
        /// `qkv` is `[t, conv_dim]`; `table` is `[conv ring, canonical state, alternate state]`
        /// (only the ring is used: read at execution, rolled through all `t` rows);
        /// `conv_outs` is `[t, conv_dim]`; `snap_conv`, when given,
        /// `[t - 1, conv_dim, d_conv - 1]`: entry r is the ring after row r.
        ssm_conv1d_fused_decode_tloop;

        /// Packed conv for `b_n` sequences of `t` rows each in one launch
        /// (`memra_ssm_conv1d_fused_decode_tloop`): `qkv` and `conv_outs` are
        /// `[b_n, t, conv_dim]`, `table` is `[b_n, 3]`, `snap_conv` `[b_n, t - 1, conv_dim,
        /// d_conv - 1]`.
        ssm_conv1d_fused_decode_tloop_batched;
    }

    packed_ops! {
        fn(
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
            [b_n],
            scale: f32,
            snap_ssm: Option<&mut CudaSlice<f32>>,
        ) {
            let g = self.lock();
            let [q, k, v, g_log, beta] = self.inputs(&g, F, SCAN_IN, [q, k, v, g_log, beta])?;
            let table = self.t(&g, F, "table", table)?.u64();
            let o_all = self.t(&g, F, "o_all", &*o_all)?.f32_mut();
            let snap_ssm = self.opt(&g, F, "snap_ssm", &snap_ssm)?;
            let raw = self.raw();
            // SAFETY: a live engine, its lock held, and slices that describe live buffers of it
            // (or {NULL, 0}).
            Ok(check(unsafe {
                sys::memra_gdn_scan_s128_tsnap(
                    raw,
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
            })?)
        }

        /// Packed scan for one sequence: `t` recurrent steps in one launch, bit-identical to
        /// `t` chained [`Engine::gdn_scan_s128_batched_view`] calls that ping-pong the state
        /// (`memra_gdn_scan_s128_tsnap` with `b_n = 1`).
        ///
        /// `q`, `k`, `v` are `[t, num_v, 128]`, `g_log` and `beta` `[t, num_v]`; `table` is
        /// `[conv ring (unused), canonical state, alternate state]`, read at execution: the
        /// canonical state is read once and the final state lands in the alternate buffer when
        /// `t` is odd, back in the canonical one when `t` is even. `o_all` is
        /// `[t, num_v, 128]`; `snap_ssm`, when given, `[t - 1, num_v, 128, 128]`: entry r is
        /// the state after row r.
        gdn_scan_s128_tsnap;

        /// Packed scan for `b_n` sequences of `t` rows each in one launch
        /// (`memra_gdn_scan_s128_tsnap`): activations `[b_n, t, ...]`, `table` `[b_n, 3]`,
        /// `snap_ssm` `[b_n, t - 1, num_v, 128, 128]`.
        gdn_scan_s128_tsnap_batched;
    }
}

/// The state copies of memra-engine 0.136's GDN verify (`memra_copy_batch_uniform_f32`,
/// `memra_copy_indirect_src_f32`): device-to-device f32 copies whose addresses are read from a
/// device table when the copy executes, so that a captured graph follows the table.
impl Engine {
    /// Copies `n` f32 from the address held in `src_ptr[0]` into `dst[dst_off .. dst_off + n]`
    /// (memra-engine's `copy_indirect_src_f32`): the checkpoint stash of a state row that a
    /// pointer table selects. The source address is read when the copy runs; a NULL or
    /// misaligned one leaves `dst` untouched and is reported by the next synchronising call.
    pub fn copy_indirect_src_f32(
        &self,
        src_ptr: &CudaView<u64>,
        dst: &mut CudaSlice<f32>,
        dst_off: usize,
        n: usize,
    ) -> Result<(), Box<dyn std::error::Error>> {
        const F: &str = "Engine::copy_indirect_src_f32";
        let g = self.lock();
        let src_ptr = self.t(&g, F, "src_ptr", src_ptr)?.u64();
        let dst = self.t(&g, F, "dst", &*dst)?.f32_mut();
        let raw = self.raw();
        // SAFETY: a live engine, its lock held, and slices that describe live buffers of it.
        Ok(check(unsafe {
            sys::memra_copy_indirect_src_f32(raw, src_ptr, dst, dst_off, n)
        })?)
    }

    /// Copies `n` states of `words` f32 in one launch (memra-engine's
    /// `copy_batch_uniform_f32`): `table` is `[src x n, dst x n]` device addresses, copy i
    /// from `table[i]` to `table[n + i]`, read when the copy runs. The partial-accept restore
    /// of every layer's ring and state from the checkpoint slabs. A bad address skips that copy
    /// and is reported by the next synchronising call.
    pub fn copy_batch_uniform_f32(
        &self,
        table: &CudaSlice<u64>,
        n: usize,
        words: usize,
    ) -> Result<(), Box<dyn std::error::Error>> {
        const F: &str = "Engine::copy_batch_uniform_f32";
        let g = self.lock();
        let table = self.t(&g, F, "table", table)?.u64();
        let raw = self.raw();
        // SAFETY: a live engine, its lock held, and a slice that describes a live buffer of it.
        Ok(check(unsafe {
            sys::memra_copy_batch_uniform_f32(raw, table, n, words)
        })?)
    }
}
