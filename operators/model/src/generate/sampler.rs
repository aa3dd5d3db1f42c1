//! Next-token sampling from one row of logits, in transformers' order of logits processors:
//! temperature, then top-k, then top-p (nucleus, Holtzman et al. 2020), then a draw from the
//! renormalised distribution with the request's own seeded RNG (so a request's tokens do not
//! depend on which other requests share its batch).
//!
//! The returned log-prob is the behaviour policy's: `log_softmax(logits / temperature)` at the
//! sampled token, before top-k/top-p truncation; this is what the old_logprob recomputation
//! (`logits / temperature`, log-softmax) reproduces, so the PPO ratio starts at 1. Greedy
//! decoding (temperature 0) reports `log_softmax(logits)`. Logits of −∞ (tokens a guide
//! rules out) get probability 0 and are never drawn, as long as one logit is finite.

use rand::rngs::StdRng;
use rand::Rng;
use serde::Deserialize;

use crate::error::ModelError;

/// How the next token is chosen.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax). Default 1.0.
    pub temperature: f32,
    /// Nucleus sampling: keep the smallest set of most likely tokens whose probability sums
    /// to at least `top_p`. 1.0 (default) keeps all.
    pub top_p: f32,
    /// Keep only the `top_k` most likely tokens; 0 (default) keeps all.
    pub top_k: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
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
            return bad(format!(
                "temperature {} must be finite and >= 0",
                self.temperature
            ));
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
    // Rounding left a sliver of mass: take the last candidate that has any (a token masked
    // to −∞ by a guide has weight 0 and must never be drawn).
    *pool
        .iter()
        .rev()
        .find(|&&i| weights[i] > 0.0)
        .or(pool.last())
        .expect("at least one candidate")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn frequencies(logits: &[f32], params: &SamplingParams, draws: usize) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(11);
        let mut counts = vec![0usize; logits.len()];
        for _ in 0..draws {
            counts[sample(logits, params, &mut rng).token as usize] += 1;
        }
        counts.iter().map(|&c| c as f64 / draws as f64).collect()
    }

    /// Probabilities ln-spaced so that softmax gives exactly [0.5, 0.25, 0.15, 0.1].
    fn logits() -> Vec<f32> {
        [0.5f64, 0.25, 0.15, 0.1]
            .iter()
            .map(|p| p.ln() as f32)
            .collect()
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        let mut rng = StdRng::seed_from_u64(0);
        let s = sample(&[0.1, 2.0, 2.0, -1.0], &SamplingParams::greedy(), &mut rng);
        assert_eq!(s.token, 1);
        let expected = 2.0 - (0.1f64.exp() + 2.0 * 2.0f64.exp() + (-1.0f64).exp()).ln();
        assert!((s.logprob as f64 - expected).abs() < 1e-6);
    }

    #[test]
    fn top_p_keeps_the_smallest_nucleus() {
        // Sorted mass: 0.5, 0.75, 0.9 -> top_p 0.8 keeps the first three, renormalised by 0.9.
        let params = SamplingParams {
            temperature: 1.0,
            top_p: 0.8,
            top_k: 0,
        };
        let f = frequencies(&logits(), &params, 40_000);
        assert_eq!(f[3], 0.0);
        for (got, want) in f.iter().zip([0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9]) {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn top_k_then_top_p_renormalise_in_order() {
        // top_k 2 keeps {0.5, 0.25} -> renormalised {2/3, 1/3}; top_p 0.6 then keeps only the first.
        let params = SamplingParams {
            temperature: 1.0,
            top_p: 0.6,
            top_k: 2,
        };
        let f = frequencies(&logits(), &params, 2_000);
        assert_eq!(f[0], 1.0);
        let params = SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 2,
        };
        let f = frequencies(&logits(), &params, 40_000);
        assert!(
            (f[0] - 2.0 / 3.0).abs() < 0.01 && f[2] == 0.0 && f[3] == 0.0,
            "{f:?}"
        );
    }

    #[test]
    fn temperature_sharpens_and_logprob_is_of_the_scaled_distribution() {
        // T = 0.5 squares the probabilities: [0.25, 0.0625, 0.0225, 0.01] / 0.345.
        let params = SamplingParams {
            temperature: 0.5,
            top_p: 1.0,
            top_k: 0,
        };
        let f = frequencies(&logits(), &params, 40_000);
        let z = 0.25 + 0.0625 + 0.0225 + 0.01;
        for (got, want) in f.iter().zip([0.25 / z, 0.0625 / z, 0.0225 / z, 0.01 / z]) {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
        let mut rng = StdRng::seed_from_u64(3);
        let s = sample(&logits(), &params, &mut rng);
        let p = [0.25, 0.0625, 0.0225, 0.01][s.token as usize] / z;
        assert!((s.logprob as f64 - f64::ln(p)).abs() < 1e-5);
    }
}
