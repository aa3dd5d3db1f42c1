//! The entry points of the three RL kernels: token log-prob + entropy, GAE over packed
//! sequences and the clipped PPO loss. Each checks its inputs, refusing with a
//! [`KernelError`] what it cannot compute, and hands the rest to its backend's kernel
//! ([`KernelBackend`]).

use burn::tensor::{Int, Tensor};

use crate::backend::{GaeTokens, KernelBackend, PpoTokens};
use crate::float_primitive::{float, wrap};
use crate::kernel_error::{refuse, KernelError};
use crate::ppo_clip::ClipSettings;

/// Per-row log-probs and entropies, `[N]` each.
#[derive(Clone, Debug)]
pub struct LogProbEntropy<B: burn::tensor::backend::Backend> {
    pub logprob: Tensor<B, 1>,
    pub entropy: Tensor<B, 1>,
}

/// The loss `[1]` and its statistics `[4]` (see [`crate::PpoStats::from_tensor`]).
#[derive(Clone, Debug)]
pub struct PpoClipOutput<B: burn::tensor::backend::Backend> {
    pub loss: Tensor<B, 1>,
    pub stats: Tensor<B, 1>,
}

/// log softmax(logits / T)\[target\] and the entropy of softmax(logits / T), per row, in one
/// pass; never builds a `[N, V]` log-softmax. Targets must lie in `[0, V)` (the CPU path
/// checks; the GPU path clamps nothing, so an out-of-range id gives an undefined value).
/// Logits may be −∞ (tokens ruled out by a guide: probability 0, no entropy term, zero
/// gradient), except the target's.
pub fn token_logprob_entropy<B: KernelBackend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
    temperature: f32,
) -> Result<LogProbEntropy<B>, KernelError> {
    const OP: &str = "token_logprob_entropy";
    let [n, v] = logits.dims();
    if targets.dims()[0] != n {
        return refuse(
            OP,
            format!("{} targets for {n} logits rows", targets.dims()[0]),
        );
    }
    if !(temperature > 0.0 && temperature.is_finite()) {
        return refuse(OP, format!("temperature {temperature} must be positive"));
    }
    if n == 0 || v == 0 {
        let device = logits.device();
        return Ok(LogProbEntropy {
            logprob: Tensor::zeros([n], &device),
            entropy: Tensor::zeros([n], &device),
        });
    }
    let out: Tensor<B, 2> = wrap(B::logprob_entropy(
        float(logits),
        targets.into_primitive(),
        temperature,
    ));
    Ok(LogProbEntropy {
        logprob: out.clone().slice([0..n, 0..1]).reshape([n]),
        entropy: out.slice([0..n, 1..2]).reshape([n]),
    })
}

fn check_packed(op: &'static str, lens: &[usize], offsets: &[usize]) -> Result<(), KernelError> {
    let n = lens[0];
    if lens.iter().any(|&l| l != n) {
        return refuse(op, format!("per-token inputs differ in length: {lens:?}"));
    }
    if offsets.first() != Some(&0) || offsets.last() != Some(&n) {
        return refuse(
            op,
            format!("offsets must run from 0 to the token count {n}"),
        );
    }
    if offsets.windows(2).any(|w| w[0] > w[1]) {
        return refuse(op, "offsets must be non-decreasing".into());
    }
    Ok(())
}

/// GAE over packed sequences (see [`crate::cpu::gae`] for the formula): (advantages, returns).
pub fn gae<B: KernelBackend>(
    rewards: Tensor<B, 1>,
    values: Tensor<B, 1>,
    mask: Tensor<B, 1>,
    offsets: &[usize],
    gamma: f32,
    lambda: f32,
) -> Result<(Tensor<B, 1>, Tensor<B, 1>), KernelError> {
    let lens = [rewards.dims()[0], values.dims()[0], mask.dims()[0]];
    check_packed("gae", &lens, offsets)?;
    for (name, x) in [("gamma", gamma), ("lambda", lambda)] {
        if !(0.0..=1.0).contains(&x) {
            return refuse("gae", format!("{name} must be in [0, 1], got {x}"));
        }
    }
    if lens[0] == 0 {
        return Ok((rewards.clone(), rewards));
    }
    let tokens = GaeTokens {
        rewards: float(rewards),
        values: float(values),
        mask: float(mask),
    };
    let (a, r) = B::gae(tokens, offsets, gamma, lambda);
    Ok((wrap(a), wrap(r)))
}

/// The clipped PPO loss, aggregated by `config.agg`, and its stats, in one fused pass.
pub fn ppo_clip_loss<B: KernelBackend>(
    logp: Tensor<B, 1>,
    old_logp: Tensor<B, 1>,
    advantages: Tensor<B, 1>,
    mask: Tensor<B, 1>,
    offsets: &[usize],
    config: &ClipSettings,
) -> Result<PpoClipOutput<B>, KernelError> {
    ppo_clip_loss_weighted(logp, old_logp, advantages, mask, None, offsets, config)
}

/// [`ppo_clip_loss`] with a constant per-token loss weight u (decoupled PPO's behaviour
/// weight): each token's loss and gradient are scaled by u; counts and statistics are not.
pub fn ppo_clip_loss_weighted<B: KernelBackend>(
    logp: Tensor<B, 1>,
    old_logp: Tensor<B, 1>,
    advantages: Tensor<B, 1>,
    mask: Tensor<B, 1>,
    weight: Option<Tensor<B, 1>>,
    offsets: &[usize],
    config: &ClipSettings,
) -> Result<PpoClipOutput<B>, KernelError> {
    const OP: &str = "ppo_clip_loss";
    let mut lens = vec![
        logp.dims()[0],
        old_logp.dims()[0],
        advantages.dims()[0],
        mask.dims()[0],
    ];
    lens.extend(weight.iter().map(|w| w.dims()[0]));
    check_packed(OP, &lens, offsets)?;
    if !(0.0..1.0).contains(&config.low) || config.high.is_nan() || config.high < 0.0 {
        return refuse(
            OP,
            format!("clip needs 0 ≤ low < 1 and high ≥ 0, got {config:?}"),
        );
    }
    if config.dual_clip.is_some_and(|c| c.is_nan() || c <= 1.0) {
        return refuse(
            OP,
            format!("dual_clip must be > 1, got {:?}", config.dual_clip),
        );
    }
    if offsets.len() < 2 {
        return refuse(OP, "needs at least one sequence".into());
    }
    let tokens = PpoTokens {
        logp: float(logp),
        old_logp: float(old_logp),
        advantages: float(advantages),
        mask: float(mask),
        weight: weight.map(float),
    };
    let (loss, stats) = B::ppo_clip_loss(tokens, offsets, config);
    Ok(PpoClipOutput {
        loss: wrap(loss),
        stats: wrap(stats),
    })
}
