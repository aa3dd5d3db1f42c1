//! KL as a token reward penalty: r_t ← r_t − β·KL_t on response tokens.
//!
//! KL_t is an estimator ([`KlEstimator`], default `K1`) of d = old_logp − ref_logp, the
//! log-probs of the rollout policy and of the reference model (ROLL
//! `compute_token_reward`). The β used for a batch is the controller's value before the
//! update; the update then sees the batch KL, the mean over samples of each sample's mean
//! token KL (ROLL). Defaults from ROLL: `coef` 0.2, no target (fixed β), horizon 10000.
//!
//! RON: `kl_penalty: Some((coef: 0.05, target: Some(0.1)))`.

use roll_flow_engine::batch::column::{OLD_LOGPROB, REF_LOGPROB};
use roll_flow_engine::{Batch, Need};
use serde::Deserialize;

use super::algo_stats::AlgoStats;
use super::batch_read::read_f32;
use super::error::AlgoError;
use super::estimator::AdvantageState;
use super::kl::KlEstimator;
use super::kl_controller::KlController;

fn default_coef() -> f32 {
    0.2
}

fn default_horizon() -> f32 {
    10000.0
}

/// The KL reward penalty and its coefficient controller.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KlPenalty {
    /// Per-token KL estimator: `K1` (default), `Abs`, `Mse` or `K3`. `Full` needs logits
    /// and is refused here.
    #[serde(default)]
    pub estimator: KlEstimator,
    /// Initial β (ROLL `init_kl_coef`, default 0.2).
    #[serde(default = "default_coef")]
    pub coef: f32,
    /// Target KL for the adaptive controller; `None` (default) keeps β fixed.
    #[serde(default)]
    pub target: Option<f32>,
    /// Horizon of the adaptive controller in samples (ROLL `kl_horizon`, default 10000).
    #[serde(default = "default_horizon")]
    pub horizon: f32,
}

const REF_HINT: &str =
    "the KL penalty needs the reference model; add a LogProb node on the reference model upstream";
const OLD_HINT: &str = "the KL penalty needs the rollout policy's log-probs; add a LogProb(model: \"policy\") node upstream";

impl KlPenalty {
    /// The columns the penalty reads.
    pub fn needs(&self) -> Vec<Need> {
        vec![
            Need::with_hint(OLD_LOGPROB, OLD_HINT),
            Need::with_hint(REF_LOGPROB, REF_HINT),
        ]
    }

    /// Checks the configuration.
    pub fn validate(&self, node: &'static str) -> Result<(), AlgoError> {
        if self.estimator == KlEstimator::Full {
            return Err(AlgoError::invalid(node, "kl_penalty cannot use `Full` (it needs full-vocabulary log-probs); use K1, Abs, Mse (K2), K3 or LowVarKl"));
        }
        if let Some(t) = self.target {
            if t.is_nan() || t <= 0.0 {
                return Err(AlgoError::invalid(
                    node,
                    format!("kl_penalty target must be > 0, got {t}"),
                ));
            }
        }
        if self.horizon.is_nan() || self.horizon <= 0.0 {
            return Err(AlgoError::invalid(
                node,
                format!("kl_penalty horizon must be > 0, got {}", self.horizon),
            ));
        }
        Ok(())
    }

    fn controller(&self) -> KlController {
        match self.target {
            None => KlController::Fixed {
                beta: self.coef as f64,
            },
            Some(t) => KlController::Adaptive {
                beta: self.coef as f64,
                target: t as f64,
                horizon: self.horizon as f64,
            },
        }
    }

    /// Subtracts β·KL_t from `rewards` (token-level) on response tokens and updates β.
    pub fn apply(
        &self,
        node: &'static str,
        batch: &Batch,
        mask: &[bool],
        rewards: &mut [f64],
        state: &mut AdvantageState,
        stats: &mut AlgoStats,
    ) -> Result<(), AlgoError> {
        self.validate(node)?;
        let old = read_f32(batch, node, &OLD_LOGPROB)?;
        let reference = read_f32(batch, node, &REF_LOGPROB)?;
        let controller = state.kl.get_or_insert_with(|| self.controller());
        let beta = controller.beta();
        let mut per_sample = Vec::with_capacity(batch.num_samples());
        for i in 0..batch.num_samples() {
            let (mut sum, mut count) = (0.0, 0usize);
            for t in batch.sample_range(i).filter(|&t| mask[t]) {
                let kl = self
                    .estimator
                    .token(old[t] as f64, reference[t] as f64)
                    .unwrap_or(0.0);
                rewards[t] -= beta * kl;
                sum += kl;
                count += 1;
            }
            if count > 0 {
                per_sample.push(sum / count as f64);
            }
        }
        let batch_kl = per_sample.iter().sum::<f64>() / per_sample.len().max(1) as f64;
        controller.update(batch_kl, batch.num_samples());
        stats.insert("kl/penalty_kl".into(), batch_kl);
        stats.insert("kl/beta".into(), beta);
        Ok(())
    }
}
