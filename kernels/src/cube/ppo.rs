//! CubeCL clipped PPO loss: per-sequence partial sums, the combine, and the backward pass.
//!
//! Formula as in [`crate::cpu::ppo`]: r = e^{logp−old}, l = max(−A·r, −A·clip(r, 1−ε_low,
//! 1+ε_high)) ("clipped" when the clipped term wins), dual clip l = −c·A for A < 0 when
//! l > −c·A ("capped"); ∂l/∂logp = −A·r unless clipped or capped.
//! Launch arguments `lower`/`upper` are the ratio bounds 1 − ε_low, 1 + ε_high and
//! `dual` the dual-clip constant (0 = off); `weighted` = 1 scales each token's loss and
//! gradient by `weight` (decoupled PPO), 0 ignores it.
//! - `ppo_partials_kernel`: one cube per sequence → Σm·u·l, Σm, Σm·clipped, Σm·capped,
//!   Σm·(old − logp), and each token's m·u·∂l/∂logp saved for the backward (divided by the
//!   sequence's n_s = Σm in seq-mean-token-mean, `per_token_mean` = 1: those tokens are
//!   still in the unit's cache lines when the cube's sum is known);
//! - the combine (`ppo_combine.rs`): the partials summed over all sequences in parallel,
//!   the loss, the stats and the one weight w left for every sequence;
//! - `ppo_backward_kernel`: one unit per token → dlogp = (g·w)·token_grad.
//!
//! Every aggregation's sequence weight w_s is w, or w/n_s in seq-mean-token-mean, or 0 for a
//! sequence without response tokens, whose token gradients are 0 anyway. So the backward
//! needs neither the offsets nor a per-sequence weight: one launch that reads one column
//! and writes one (the forward reads the four token columns and writes one: 7 passes of
//! the tokens in all). Until run 7 (2026-12-04) the combine wrote each w_s in a third
//! kernel and the backward ran one cube per sequence over offsets uploaded a second time:
//! five launches and two uploads a forward and backward, where the H200's Nsight Compute
//! run found the kernels at 185 µs of the bench's 0.49 ms (bench/history/gpu.md, run 7);
//! now four launches and one upload.
//!
//! Source: Schulman et al. 2017 eq. 7; Ye et al. 2020 (dual clip); verl/ROLL
//! `compute_policy_loss` and `agg_loss`.

use burn::tensor::TensorMetadata;
use burn_cubecl::element::BoolElement;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use super::cube_index::{cube_index, element_index};
use super::launch::{check_offsets, empty, grid, upload_offsets};
use super::ppo_combine::{combine, PARTIALS};
use crate::aggregation::LossAgg;
use crate::backend::PpoTokens;
use crate::ppo_clip::ClipSettings;

/// The dual-clip constant c, 0 when off.
fn dual(config: &ClipSettings) -> f32 {
    config.dual_clip.unwrap_or(0.0)
}

/// The PPO inputs ready for a launch: contiguous, the offsets uploaded, and the token
/// weight (the mask as a placeholder when there is none, with `weighted` = 0).
pub(super) struct PpoLaunch<R: CubeRuntime> {
    logp: CubeTensor<R>,
    old: CubeTensor<R>,
    adv: CubeTensor<R>,
    mask: CubeTensor<R>,
    weight: CubeTensor<R>,
    weighted: u32,
    offsets: CubeTensor<R>,
    tokens: usize,
    sequences: usize,
    /// Units per sequence's cube: about eight tokens a unit at the mean length, 32 to
    /// 256 (a cube of 256 for sequences of 512 spent more on its reduction than on its
    /// two tokens a unit).
    units: u32,
}

impl<R: CubeRuntime> PpoLaunch<R> {
    pub(super) fn new<F: FloatElement, I: IntElement, BT: BoolElement>(
        t: PpoTokens<CubeBackend<R, F, I, BT>>,
        offsets: &[usize],
    ) -> Self {
        let logp = into_contiguous(t.logp);
        let tokens = logp.shape().num_elements();
        check_offsets(offsets, tokens, "ppo_clip_loss");
        let mask = into_contiguous(t.mask);
        let weighted = u32::from(t.weight.is_some());
        PpoLaunch {
            offsets: upload_offsets::<R, F, I, BT>(offsets, &logp.device),
            logp,
            old: into_contiguous(t.old_logp),
            adv: into_contiguous(t.advantages),
            weight: t.weight.map_or_else(|| mask.clone(), into_contiguous),
            mask,
            weighted,
            tokens,
            sequences: offsets.len() - 1,
            units: (tokens / (offsets.len() - 1).max(1) / 8)
                .next_power_of_two()
                .clamp(32, 256) as u32,
        }
    }
}

/// The forward's (loss `[1]`, stats `[4]`, weight w `[1]`, token gradient `[tokens]`;
/// [`crate::PpoSaved::TokenGradients`]).
pub(super) fn forward<R: CubeRuntime>(
    x: PpoLaunch<R>,
    config: &ClipSettings,
) -> [CubeTensor<R>; 4] {
    let sequences = x.sequences;
    let partials = empty(&x.logp, &[sequences * PARTIALS]);
    let token_grad = empty(&x.logp, &[x.tokens]);
    let dtypes = [x.logp.dtype.into(), x.offsets.dtype.into()];
    let client = x.logp.client.clone();
    let units = x.units;
    ppo_partials_kernel::launch::<R>(
        &client,
        grid(sequences),
        CubeDim::new_1d(units),
        x.logp.into_tensor_arg(),
        x.old.into_tensor_arg(),
        x.adv.into_tensor_arg(),
        x.mask.into_tensor_arg(),
        x.weight.into_tensor_arg(),
        x.offsets.into_tensor_arg(),
        partials.clone().into_tensor_arg(),
        token_grad.clone().into_tensor_arg(),
        sequences as u32,
        x.weighted,
        1.0 - config.low,
        1.0 + config.high,
        dual(config),
        u32::from(config.agg == LossAgg::SeqMeanTokenMean),
        units,
        dtypes,
    );
    let (loss, stats, weight) = combine(partials, sequences, config);
    [loss, stats, weight, token_grad]
}

/// dlogp `[tokens]` = (g·w)·token_grad from the forward's token gradient and weight.
pub(super) fn backward<R: CubeRuntime>(
    token_grad: CubeTensor<R>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
) -> CubeTensor<R> {
    let token_grad = into_contiguous(token_grad);
    let tokens = token_grad.shape().num_elements();
    let dlogp = empty(&token_grad, &[tokens]);
    let (client, dtype) = (token_grad.client.clone(), token_grad.dtype.into());
    ppo_backward_kernel::launch::<R>(
        &client,
        grid(tokens.div_ceil(BACKWARD_UNITS as usize)),
        CubeDim::new_1d(BACKWARD_UNITS),
        token_grad.into_tensor_arg(),
        into_contiguous(weight).into_tensor_arg(),
        into_contiguous(grad).into_tensor_arg(),
        dlogp.clone().into_tensor_arg(),
        tokens,
        dtype,
    );
    dlogp
}

/// Units per cube of the backward (one token each).
const BACKWARD_UNITS: u32 = 256;

/// One token's clipped surrogate: loss l, ∂l/∂logp, and whether the clipped term won or
/// the dual clip capped it (0/1).
#[derive(CubeType)]
struct TokenLoss<F: Float> {
    loss: F,
    grad: F,
    clipped: F,
    capped: F,
}

/// The clipped (and, when `c` > 0, dual-clipped) surrogate of one token; `lo`/`hi` are the
/// ratio bounds.
#[cube]
fn token_loss<F: Float>(lp: F, old: F, a: F, lo: F, hi: F, c: F) -> TokenLoss<F> {
    let zero = F::new(0.0);
    let r = (lp - old).exp();
    let pg1 = zero - a * r;
    let pg2 = zero - a * F::max(F::min(r, hi), lo);
    let mut out = TokenLoss::<F> {
        loss: pg1,
        grad: pg1,
        clipped: zero,
        capped: zero,
    };
    if pg2 > pg1 {
        out.loss = pg2;
        out.grad = zero;
        out.clipped = F::new(1.0);
    }
    if c > zero && a < zero && out.loss > zero - c * a {
        out.loss = zero - c * a;
        out.grad = zero;
        out.capped = F::new(1.0);
    }
    out
}

/// The token weight u_t, or 1 when `weighted` is 0 (then `weight` is a placeholder).
#[cube]
fn token_weight<F: Float>(weight: &Tensor<F>, t: usize, weighted: u32) -> F {
    let mut u = F::new(1.0);
    if weighted != 0 {
        u = weight[t];
    }
    u
}

#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ppo_partials_kernel<F: Float, I: Numeric>(
    logp: &Tensor<F>,
    old: &Tensor<F>,
    adv: &Tensor<F>,
    mask: &Tensor<F>,
    weight: &Tensor<F>,
    offsets: &Tensor<I>,
    partials: &mut Tensor<F>,
    token_grad: &mut Tensor<F>,
    sequences: u32,
    weighted: u32,
    lower: f32,
    upper: f32,
    dual: f32,
    per_token_mean: u32,
    #[comptime] block: u32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = cube_index(sequences);
    let start = u32::cast_from(offsets[seq]) as usize;
    let end = u32::cast_from(offsets[seq + 1]) as usize;
    let lo = F::cast_from(lower);
    let hi = F::cast_from(upper);
    let c = F::cast_from(dual);
    let zero = F::new(0.0);
    let mut acc = SharedMemory::<F>::new((block as usize) * PARTIALS);
    let u = UNIT_POS_X as usize;
    let mut sl = zero;
    let mut sm = zero;
    let mut sc = zero;
    let mut sd = zero;
    let mut sk = zero;
    let mut t = start + u;
    while t < end {
        // Every column read before the mask is tested, so the four loads are in flight
        // together rather than three of them waiting behind the mask's.
        let m = mask[t];
        let (lp, o, a) = (logp[t], old[t], adv[t]);
        let weight_t = token_weight(weight, t, weighted);
        let mut d = zero;
        if m != zero {
            let tl = token_loss::<F>(lp, o, a, lo, hi, c);
            let mu = m * weight_t;
            sc += m * tl.clipped;
            sd += m * tl.capped;
            sl += mu * tl.loss;
            sm += m;
            sk += m * (o - lp);
            d = mu * tl.grad;
        }
        token_grad[t] = d;
        t += CUBE_DIM_X as usize;
    }
    acc[u * PARTIALS] = sl;
    acc[u * PARTIALS + 1] = sm;
    acc[u * PARTIALS + 2] = sc;
    acc[u * PARTIALS + 3] = sd;
    acc[u * PARTIALS + 4] = sk;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if u < stride {
            for k in 0..PARTIALS {
                let o = acc[(u + stride) * PARTIALS + k];
                acc[u * PARTIALS + k] += o;
            }
        }
        sync_cube();
        stride /= 2;
    }
    if u < PARTIALS {
        partials[seq * PARTIALS + u] = acc[u];
    }
    // Seq-mean-token-mean weighs the sequence by 1/n_s: each unit rescales the gradients it
    // wrote (its own writes, so no other unit's are read).
    let n = acc[1];
    if per_token_mean != 0 && n > zero {
        let mut t = start + u;
        while t < end {
            token_grad[t] = token_grad[t] / n;
            t += CUBE_DIM_X as usize;
        }
    }
}

/// dlogp_t = (g·w)·token_grad_t.
#[cube(launch)]
pub(crate) fn ppo_backward_kernel<F: Float>(
    token_grad: &Tensor<F>,
    weight: &Tensor<F>,
    grad: &Tensor<F>,
    dlogp: &mut Tensor<F>,
    tokens: usize,
    #[define(F)] _dtype: StorageType,
) {
    let t = element_index(tokens);
    dlogp[t] = grad[0] * weight[0] * token_grad[t];
}
