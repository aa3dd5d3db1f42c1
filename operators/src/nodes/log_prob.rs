//! `LogProb`: the log-prob of every response token under the policy, with gradients off:
//! π_old for the PPO ratio, recomputed as verl and ROLL do rather than trusting the
//! sampler's numbers. `RefLogProb` (`super::ref_log_prob`) runs the same scorer on a
//! frozen model.
//!
//! Scoring uses the rollout's temperature and the env tags' answer guides, so it scores
//! the distribution the replies were drawn from. `LogProb` also reports the policy's
//! entropy and how far π_old is from the behaviour log-probs (`behaviour_gap_max`), which
//! is ~0 for on-policy data and grows with staleness.
//!
//! RON: `"old_logprob": LogProb(model: "policy")` (`model` defaults to `"policy"`).

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::AutodiffModule;
use roll_flow_engine::batch::column::{BEHAVIOUR_LOGPROB, OLD_LOGPROB, RESPONSE_MASK};
use roll_flow_engine::{Batch, Column, Operator, OperatorError, StepContext};
use roll_flow_model::weights::to_f32_vec;
use serde::Deserialize;

use super::kind::default_policy;
use crate::runtime::backend::RunBackend;
use crate::runtime::models::PolicyModel;
use crate::runtime::resources::{Guides, Runtime};
use crate::runtime::scoring::{score_chunks, score_responses, token_positions, ScoreOptions};
use crate::training::epochs::SCORING_CHUNK_TOKENS;

/// `LogProb`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogProbSpec {
    /// The model scored (default `"policy"`).
    pub model: String,
}

impl Default for LogProbSpec {
    fn default() -> Self {
        LogProbSpec {
            model: default_policy(),
        }
    }
}

super::scoring_kind::scoring_node_kind!(LogProbSpec, OLD_LOGPROB, |spec, runtime| {
    let node = LogProbNode::build(&spec.model, OLD_LOGPROB, runtime)?;
    Ok(Box::new(node))
});

/// Scores response tokens into one column.
pub(super) struct LogProbNode<B: RunBackend> {
    model: Rc<RefCell<PolicyModel<B>>>,
    guides: Rc<RefCell<Guides>>,
    temperature: f32,
    column: Column,
}

impl<B: RunBackend> LogProbNode<B> {
    /// Scores under `model` into `column` (`old_logprob` or `ref_logprob`).
    pub(super) fn build(
        model: &str,
        column: Column,
        runtime: &mut Runtime<B>,
    ) -> Result<Self, String> {
        Ok(LogProbNode {
            model: runtime.policy(model)?,
            guides: runtime.guides.clone(),
            temperature: runtime.plan.wiring.sampling_temperature(model),
            column,
        })
    }
}

impl<B: RunBackend> Operator for LogProbNode<B> {
    fn process(&mut self, ctx: &mut StepContext, mut batch: Batch) -> Result<Batch, OperatorError> {
        let weights = self.model.borrow().train.module().valid();
        let guides = self.guides.borrow();
        let mut column = vec![0.0f32; batch.num_tokens()];
        let mut entropy_sum = 0.0;
        let mut count = 0usize;
        let (temperature, guides) = (self.temperature, &*guides);
        let chunks = score_chunks(&batch, SCORING_CHUNK_TOKENS, B::CONCURRENT_PASSES, |part| {
            let scored =
                score_responses(&weights, part, temperature, guides, ScoreOptions::default())?;
            let (values, entropy) = (to_f32_vec(&scored.logprobs), to_f32_vec(&scored.entropy));
            Ok((scored.token_index, values, entropy))
        })
        .map_err(OperatorError)?;
        for (chunk, (token_index, values, entropy)) in chunks {
            entropy_sum += entropy.iter().map(|&h| h as f64).sum::<f64>();
            count += entropy.len();
            let positions = token_positions(&batch, &chunk);
            for (&t, &v) in token_index.iter().zip(&values) {
                column[positions[t]] = v;
            }
        }
        if self.column == OLD_LOGPROB {
            ctx.metrics
                .insert("entropy".into(), entropy_sum / count.max(1) as f64);
            if let Ok(behaviour) = batch.f32s(&BEHAVIOUR_LOGPROB) {
                let mask = batch.bools(&RESPONSE_MASK)?;
                let gap = column
                    .iter()
                    .zip(behaviour)
                    .zip(mask)
                    .filter(|(_, &m)| m)
                    .map(|((a, b), _)| (a - b).abs() as f64)
                    .fold(0.0, f64::max);
                ctx.metrics.insert("behaviour_gap_max".into(), gap);
            }
        }
        batch.set(&self.column, column)?;
        Ok(batch)
    }
}
