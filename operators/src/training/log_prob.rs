//! `LogProb` and `RefLogProb`: the log-prob of every response token under a model, with
//! gradients off. `LogProb` on the policy gives π_old for the PPO ratio (recomputed, as
//! verl and ROLL do, rather than trusting the sampler's numbers); `RefLogProb` on a frozen
//! model gives π_ref for KL terms.
//!
//! Both use the rollout's temperature and the env tags' answer guides, so they score the
//! distribution the replies were drawn from. `LogProb` also reports how far π_old is from
//! the behaviour log-probs (`behaviour_gap_max`), which is ~0 for on-policy data and grows
//! with staleness.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use burn::module::AutodiffModule;
use roll_flow_engine::batch::column::{BEHAVIOUR_LOGPROB, OLD_LOGPROB, REF_LOGPROB, RESPONSE_MASK};
use roll_flow_engine::{Batch, Column, Operator, OperatorError, StepContext};

use super::SCORING_CHUNK_TOKENS;
use crate::model::generate::AnswerChoices;
use crate::model::weights::to_f32_vec;
use crate::runtime::scoring::{
    rollout_temperature, score_chunks, score_responses, token_positions,
};
use crate::runtime::{PolicyModel, RunBackend, Runtime};

/// Scores response tokens into one column.
pub struct LogProbNode<B: RunBackend> {
    model: Rc<RefCell<PolicyModel<B>>>,
    guides: Rc<RefCell<BTreeMap<String, Arc<AnswerChoices>>>>,
    temperature: f32,
    column: Column,
}

impl<B: RunBackend> LogProbNode<B> {
    /// `LogProb(model)` (`reference: false`) or `RefLogProb(model)`.
    pub fn build(model: &str, reference: bool, runtime: &mut Runtime<B>) -> Result<Self, String> {
        Ok(LogProbNode {
            model: runtime.policy(model)?,
            guides: runtime.guides.clone(),
            temperature: rollout_temperature(&runtime.pipeline, model),
            column: if reference { REF_LOGPROB } else { OLD_LOGPROB },
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
        let chunks = score_chunks(&batch, SCORING_CHUNK_TOKENS, |part| {
            let scored = score_responses(&weights, part, temperature, guides, false)?;
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
