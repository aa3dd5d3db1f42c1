//! The unfused formulations in plain burn tensor ops: the oracles the fused kernels are
//! tested against, and the "unfused burn path" of the benchmark. They restate, operation
//! for operation as an eager framework computes them, the formulas that
//! `roll-flow-operators` (`model::logprob`, `algo::gae`, `algo::ppo_loss`,
//! `algo::aggregation`, and the model's norm, MLP and attention) runs through this crate's
//! fused kernels; this crate cannot depend on that crate (it depends on this one), so the
//! formulas are written out here.

use burn::tensor::activation::{log_softmax, silu, softmax};
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Int, Tensor, TensorData};

use crate::aggregation::LossAgg;

use crate::ppo_clip::ClipSettings;

use crate::ppo_clip::PpoStats;

/// (logp, entropy) per row: log_softmax(logits / T), gather, −Σ e^{log p} log p.
pub fn logprob_entropy<B: Backend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
    temperature: f32,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let [n, _] = logits.dims();
    let log_probs = log_softmax(logits.div_scalar(temperature as f64), 1);
    let logp = log_probs
        .clone()
        .gather(1, targets.reshape([n, 1]))
        .reshape([n]);
    let entropy = log_probs
        .clone()
        .exp()
        .mul(log_probs)
        .sum_dim(1)
        .neg()
        .reshape([n]);
    (logp, entropy)
}

/// A dense layer `x·weight (+ bias)`, as burn's `linear` computes it on the tokens
/// flattened to `[tokens, k]`, as the model called it before the fused op (burn 0.21's
/// 3-D `linear` on flex crashed in gemm's gemv on this suite's inputs).
pub fn linear<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, D> {
    let mut dims = x.dims();
    let [k, m] = weight.dims();
    let flat = x.reshape([dims[..D - 1].iter().product::<usize>(), k]);
    dims[D - 1] = m;
    burn::tensor::module::linear(flat, weight, bias).reshape(dims)
}

/// SwiGLU's gate `silu(gate) ⊙ up`, as burn computes it.
pub fn swiglu<B: Backend, const D: usize>(gate: Tensor<B, D>, up: Tensor<B, D>) -> Tensor<B, D> {
    silu(gate).mul(up)
}

/// RMSNorm over the last axis, as the model computed it.
pub fn rms_norm<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 1>,
    eps: f32,
) -> Tensor<B, D> {
    let inv_rms = x
        .clone()
        .square()
        .mean_dim(D - 1)
        .add_scalar(eps)
        .sqrt()
        .recip();
    x.mul(inv_rms).mul(weight.unsqueeze::<D>())
}

/// Rotary embedding `x ⊙ cos + rotate_half(x) ⊙ sin` over the last axis, with
/// rotate_half([x₁, x₂]) = [−x₂, x₁] as transformers writes it (narrow, negate, concatenate).
pub fn rotary<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    cos: Tensor<B, D>,
    sin: Tensor<B, D>,
) -> Tensor<B, D> {
    let d = x.dims()[D - 1];
    let (x1, x2) = (
        x.clone().narrow(D - 1, 0, d / 2),
        x.clone().narrow(D - 1, d / 2, d / 2),
    );
    let rotated = Tensor::cat(vec![x2.neg(), x1], D - 1);
    x.mul(cos).add(rotated.mul(sin))
}

/// Attention's `softmax(scores + mask)` over the last axis, as the model computed it.
pub fn masked_softmax<B: Backend, const D: usize>(
    scores: Tensor<B, D>,
    mask: Tensor<B, D>,
) -> Tensor<B, D> {
    softmax(scores.add(mask), D - 1)
}

/// GAE of one response sequence as a plain f64 loop (δ_t = r_t + γ·V_{t+1} − V_t with
/// V = 0 past the last token, A_t = δ_t + γλ·A_{t+1}, returns A_t + V_t): the exact host
/// oracle of the GAE tests, which `roll-flow-operators` re-exports as `algo::gae::gae`.
pub fn gae_sequence(
    rewards: &[f64],
    values: &[f64],
    gamma: f64,
    lambda: f64,
) -> (Vec<f64>, Vec<f64>) {
    let n = rewards.len();
    let (mut adv, mut ret) = (vec![0.0; n], vec![0.0; n]);
    let (mut next_value, mut next_adv) = (0.0, 0.0);
    for t in (0..n).rev() {
        let delta = rewards[t] + gamma * next_value - values[t];
        next_adv = delta + gamma * lambda * next_adv;
        adv[t] = next_adv;
        ret[t] = next_adv + values[t];
        next_value = values[t];
    }
    (adv, ret)
}

fn host<B: Backend>(t: Tensor<B, 1>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("f32 data")
}

/// GAE in burn ops, the way an eager framework does it: response tokens gathered into a
/// padded `[sequences, longest]` matrix, then a loop over time steps of column ops
/// (δ = r + γ·V_next − V, A = δ + γλ·A_next), scattered back; 0 outside the mask.
pub fn gae<B: Backend>(
    rewards: Tensor<B, 1>,
    values: Tensor<B, 1>,
    mask: Tensor<B, 1>,
    offsets: &[usize],
    gamma: f32,
    lambda: f32,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let device = rewards.device();
    let n = rewards.dims()[0];
    let m = host(mask);
    let positions: Vec<Vec<usize>> = offsets
        .windows(2)
        .map(|w| (w[0]..w[1]).filter(|&t| m[t] != 0.0).collect())
        .collect();
    let (s, width) = (
        positions.len(),
        positions.iter().map(Vec::len).max().unwrap_or(0),
    );
    if width == 0 {
        return (Tensor::zeros([n], &device), Tensor::zeros([n], &device));
    }
    // Padded index (token n is a zero pad appended to the packed columns).
    let mut index = vec![n as i64; s * width];
    let mut valid = vec![0.0f32; s * width];
    for (i, pos) in positions.iter().enumerate() {
        for (k, &t) in pos.iter().enumerate() {
            index[i * width + k] = t as i64;
            valid[i * width + k] = 1.0;
        }
    }
    let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(index.clone(), [s * width]), &device);
    let pad = |x: Tensor<B, 1>| {
        Tensor::cat(vec![x, Tensor::zeros([1], &device)], 0)
            .select(0, idx.clone())
            .reshape([s, width])
    };
    let (r, v) = (pad(rewards), pad(values));
    let valid = Tensor::<B, 2>::from_data(TensorData::new(valid, [s, width]), &device);
    let mut next_v = Tensor::<B, 2>::zeros([s, 1], &device);
    let mut next_a = Tensor::<B, 2>::zeros([s, 1], &device);
    let mut columns = Vec::with_capacity(width);
    for t in (0..width).rev() {
        let (rt, vt) = (
            r.clone().slice([0..s, t..t + 1]),
            v.clone().slice([0..s, t..t + 1]),
        );
        let mt = valid.clone().slice([0..s, t..t + 1]);
        let delta = rt + next_v.mul_scalar(gamma) - vt.clone();
        next_a = (delta + next_a.mul_scalar(gamma * lambda)) * mt.clone();
        next_v = vt * mt;
        columns.push(next_a.clone());
    }
    columns.reverse();
    let adv = Tensor::cat(columns, 1);
    let ret = adv.clone() + v * valid;
    // Back to packed order on the host (burn's scatter-add with the repeated pad index
    // is not deterministic on every backend).
    let scatter = |x: Tensor<B, 2>| {
        let x = x
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .expect("f32 data");
        let mut packed = vec![0.0f32; n + 1];
        for (&i, &v) in index.iter().zip(&x) {
            packed[i as usize] += v;
        }
        packed.truncate(n);
        Tensor::<B, 1>::from_data(TensorData::new(packed, [n]), &device)
    };
    (scatter(adv), scatter(ret))
}

/// Per-token aggregation weights of `agg` (mask included), from the host mask.
pub fn aggregation_weights(mask: &[f32], offsets: &[usize], config: &ClipSettings) -> Vec<f32> {
    let counts: Vec<f32> = offsets
        .windows(2)
        .map(|w| mask[w[0]..w[1]].iter().sum())
        .collect();
    let total: f32 = counts.iter().sum();
    let valid = counts.iter().filter(|&&c| c > 0.0).count().max(1) as f32;
    let longest = counts.iter().copied().fold(0.0, f32::max);
    let mut w = vec![0.0f32; mask.len()];
    for (i, win) in offsets.windows(2).enumerate() {
        let c = counts[i];
        let seq_w = match config.agg {
            LossAgg::TokenMean => 1.0 / total.max(1.0),
            LossAgg::SeqMeanTokenSumNorm => {
                1.0 / config.norm_length.map_or(longest, |l| l as f32).max(1.0)
            }
            LossAgg::SeqMeanTokenSum if c > 0.0 => 1.0 / valid,
            LossAgg::SeqMeanTokenMean if c > 0.0 => 1.0 / (c * valid),
            _ => 0.0,
        };
        for t in win[0]..win[1] {
            w[t] = seq_w * mask[t];
        }
    }
    w
}

fn masked_mean<B: Backend>(x: Tensor<B, 1>, mask: Tensor<B, 1>, total: f32) -> f32 {
    let s: f32 = (x * mask).sum().into_scalar().elem();
    s / total.max(1.0)
}

/// The clipped (dual-clipped) surrogate of `algo::ppo_loss`, times the optional token
/// weight, aggregated as `algo::aggregation`, with the same stats: (loss `[1]`, stats).
pub fn ppo_clip_loss<B: Backend>(
    logp: Tensor<B, 1>,
    old_logp: Tensor<B, 1>,
    adv: Tensor<B, 1>,
    mask: Tensor<B, 1>,
    token_weight: Option<Tensor<B, 1>>,
    offsets: &[usize],
    config: &ClipSettings,
) -> (Tensor<B, 1>, PpoStats) {
    let device = logp.device();
    let m = host(mask.clone());
    let total: f32 = m.iter().sum();
    let n = m.len();
    let weights = aggregation_weights(&m, offsets, config);
    let weights = Tensor::<B, 1>::from_data(TensorData::new(weights, [n]), &device);
    let ratio = (logp.clone() - old_logp.clone()).exp();
    let pg1 = adv.clone().neg() * ratio.clone();
    let pg2 = adv.clone().neg() * ratio.clamp(1.0 - config.low, 1.0 + config.high);
    let clipped = pg2.clone().greater(pg1.clone()).float();
    let mut loss = pg1.max_pair(pg2);
    let mut stats = PpoStats {
        clipfrac: masked_mean(clipped, mask.clone(), total),
        response_tokens: total,
        ..PpoStats::default()
    };
    if let Some(c) = config.dual_clip {
        let pg3 = adv.clone().neg().mul_scalar(c);
        let negative = adv.lower_elem(0.0);
        let capped = loss.clone().greater(pg3.clone()).float() * negative.clone().float();
        stats.clipfrac_lower = masked_mean(capped, mask.clone(), total);
        let dual = loss.clone().min_pair(pg3);
        loss = loss.mask_where(negative, dual);
    }
    stats.approx_kl = masked_mean((old_logp - logp).detach(), mask, total);
    if let Some(u) = token_weight {
        loss = loss * u;
    }
    ((loss * weights).sum().reshape([1]), stats)
}
