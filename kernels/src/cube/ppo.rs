//! CubeCL clipped PPO loss: per-sequence partial sums, one combine cube, and the
//! backward pass.
//!
//! Formula as in [`crate::cpu::ppo`]: r = e^{logp−old}, l = max(−A·r, −A·clip(r, 1−ε_low,
//! 1+ε_high)) ("clipped" when the clipped term wins), dual clip l = −c·A for A < 0 when
//! l > −c·A ("capped"); ∂l/∂logp = −A·r unless clipped or capped.
//! Launch arguments `lower`/`upper` are the ratio bounds 1 − ε_low, 1 + ε_high and
//! `dual` the dual-clip constant (0 = off); `weighted` = 1 scales each token's loss and
//! gradient by `weight` (decoupled PPO), 0 ignores it.
//! - `ppo_partials_kernel`: one cube per sequence → Σm·u·l, Σm, Σm·clipped, Σm·capped,
//!   Σm·(old − logp), and each token's m·u·∂l/∂logp saved for the backward;
//! - the combine (`ppo_combine.rs`): the partials summed over all sequences in parallel,
//!   the loss, the stats and each sequence's weight w_s of the aggregation mode;
//! - `ppo_backward_kernel`: one cube per sequence → dlogp = g·w_s·(m·u·∂l/∂logp), the
//!   saved token gradient scaled: the backward reads one column and writes one where it
//!   read the four token columns again (9 passes of the tokens in all before, 7 now).
//!
//! Source: Schulman et al. 2017 eq. 7; Ye et al. 2020 (dual clip); verl/ROLL
//! `compute_policy_loss` and `agg_loss`.

use burn::tensor::TensorMetadata;
use burn_cubecl::element::BoolElement;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use super::cube_index::cube_index;
use super::launch::{check_offsets, empty, grid, upload_offsets};
use super::ppo_combine::{combine, PARTIALS};
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

/// The forward's (loss `[1]`, stats `[4]`, seq_weight `[sequences]`, token gradient
/// `[tokens]`).
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
        units,
        dtypes,
    );
    let (loss, stats, seq_weight) = combine(partials, sequences, config);
    [loss, stats, seq_weight, token_grad]
}

/// dlogp `[tokens]` from the forward's token gradient and sequence weights.
pub(super) fn backward<R: CubeRuntime>(
    x: PpoLaunch<R>,
    token_grad: CubeTensor<R>,
    seq_weight: CubeTensor<R>,
    grad: CubeTensor<R>,
) -> CubeTensor<R> {
    let dlogp = empty(&x.logp, &[x.tokens]);
    let dtypes = [x.logp.dtype.into(), x.offsets.dtype.into()];
    let client = x.logp.client.clone();
    ppo_backward_kernel::launch::<R>(
        &client,
        grid(x.sequences),
        CubeDim::new_1d(x.units),
        into_contiguous(token_grad).into_tensor_arg(),
        x.offsets.into_tensor_arg(),
        into_contiguous(seq_weight).into_tensor_arg(),
        into_contiguous(grad).into_tensor_arg(),
        dlogp.clone().into_tensor_arg(),
        x.sequences as u32,
        dtypes,
    );
    dlogp
}

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
        let m = mask[t];
        let mut d = zero;
        if m != zero {
            let tl = token_loss::<F>(logp[t], old[t], adv[t], lo, hi, c);
            let mu = m * token_weight(weight, t, weighted);
            sc += m * tl.clipped;
            sd += m * tl.capped;
            sl += mu * tl.loss;
            sm += m;
            sk += m * (old[t] - logp[t]);
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
}

/// dlogp_t = g·w_s·(m·u·∂l/∂logp)_t from the forward's saved token gradient.
#[cube(launch)]
pub(crate) fn ppo_backward_kernel<F: Float, I: Numeric>(
    token_grad: &Tensor<F>,
    offsets: &Tensor<I>,
    seq_weight: &Tensor<F>,
    grad: &Tensor<F>,
    dlogp: &mut Tensor<F>,
    sequences: u32,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let seq = cube_index(sequences);
    let start = u32::cast_from(offsets[seq]) as usize;
    let end = u32::cast_from(offsets[seq + 1]) as usize;
    let scale = grad[0] * seq_weight[seq];
    let mut t = start + UNIT_POS_X as usize;
    while t < end {
        dlogp[t] = scale * token_grad[t];
        t += CUBE_DIM_X as usize;
    }
}
