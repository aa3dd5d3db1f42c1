//! Next-token sampling from one row of logits, in transformers' order of logits processors:
//! temperature, then top-k, then top-p (nucleus, Holtzman et al. 2020), then a draw from the
//! renormalised distribution with the request's own seeded RNG (so a request's tokens do not
//! depend on which other requests share its batch).
//!
//! The returned log-prob is the behaviour policy's: `log_softmax(logits / temperature)` at the
//! sampled token, before top-k/top-p truncation; this is what the old_logprob recomputation
//! (`logits / temperature`, log-softmax) reproduces, so the PPO ratio starts at 1. Greedy
//! decoding (temperature 0) reports `log_softmax(logits)`.

use rand::rngs::StdRng;
use rand::Rng;
use serde::Deserialize;

use crate::model::error::ModelError;

/// How the next token is chosen.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax). Default 1.0.
    #[serde(default = "default_temperature")]
    pub temperature: f32,
    /// Nucleus sampling: keep the smallest set of most likely tokens whose probability sums
    /// to at least `top_p`. 1.0 (default) keeps all.
    #[serde(default = "default_top_p")]
    pub top_p: f32,
    /// Keep only the `top_k` most likely tokens; 0 (default) keeps all.
    #[serde(default)]
    pub top_k: usize,
}

fn default_temperature() -> f32 {
    1.0
}
fn default_top_p() -> f32 {
    1.0
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: default_temperature(),
            top_p: default_top_p(),
            top_k: 0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..Self::default()
        }
    }

    /// Rejects values outside their domain.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |message: String| Err(ModelError::Request { message });
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!("temperature {} must be finite and >= 0", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p {} must be in (0, 1]", self.top_p));
        }
        Ok(())
    }
}

/// One sampled token and its behaviour log-prob.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampled {
    /// The token id.
    pub token: u32,
    /// `log π(token)` under the temperature-scaled distribution.
    pub logprob: f32,
}

/// Chooses the next token from `logits` (one vocabulary row).
pub fn sample(logits: &[f32], params: &SamplingParams, rng: &mut StdRng) -> Sampled {
    if params.temperature == 0.0 {
        let token = argmax(logits);
        let logprob = log_softmax_at(logits, 1.0, token);
        return Sampled {
            token: token as u32,
            logprob,
        };
    }
    let inv_t = 1.0 / params.temperature;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| (((l - max) * inv_t) as f64).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let candidates = truncate(&weights, total, params);
    let token = draw(&weights, &candidates, rng);
    Sampled {
        token: token as u32,
        logprob: ((weights[token] / total).ln()) as f32,
    }
}

/// Index of the largest logit (the first one on ties, as `torch.argmax`).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best
}

/// `log_softmax(logits / temperature)[token]` computed in f64.
pub fn log_softmax_at(logits: &[f32], temperature: f32, token: usize) -> f32 {
    let t = temperature as f64;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| ((l as f64 - max) / t).exp()).sum();
    ((logits[token] as f64 - max) / t - sum.ln()) as f32
}

/// The tokens that survive top-k and top-p, or `None` for "all of them".
fn truncate(weights: &[f64], total: f64, params: &SamplingParams) -> Option<Vec<usize>> {
    let top_k = params.top_k > 0 && params.top_k < weights.len();
    if !top_k && params.top_p >= 1.0 {
        return None;
    }
    let by_weight = |a: &usize, b: &usize| weights[*b].total_cmp(&weights[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..weights.len()).collect();
    if top_k {
        order.select_nth_unstable_by(params.top_k - 1, by_weight);
        order.truncate(params.top_k);
    }
    order.sort_unstable_by(by_weight);
    if params.top_p < 1.0 {
        let kept_mass: f64 = if top_k {
            order.iter().map(|&i| weights[i]).sum()
        } else {
            total
        };
        let mut cumulative = 0.0;
        let mut keep = 0;
        for &i in &order {
            cumulative += weights[i] / kept_mass;
            keep += 1;
            if cumulative >= params.top_p as f64 {
                break;
            }
        }
        order.truncate(keep.max(1));
    }
    Some(order)
}

/// Draws an index proportionally to `weights` restricted to `candidates`.
fn draw(weights: &[f64], candidates: &Option<Vec<usize>>, rng: &mut StdRng) -> usize {
    let all: Vec<usize>;
    let pool = match candidates {
        Some(c) => c,
        None => {
            all = (0..weights.len()).collect();
            &all
        }
    };
    let mass: f64 = pool.iter().map(|&i| weights[i]).sum();
    let mut target = rng.random::<f64>() * mass;
    for &i in pool {
        target -= weights[i];
        if target < 0.0 {
            return i;
        }
    }
    *pool.last().expect("at least one candidate")
}
