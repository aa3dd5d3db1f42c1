//! `Values`: the critic's estimate V(s_t) for every response token, gradients off (the
//! rollout-time values GAE bootstraps from and value clipping centres on).
//!
//! RON: `"values": Values(model: "critic")`.

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::AutodiffModule;
use roll_flow_engine::batch::column::{RESPONSE_MASK, VALUES};
use roll_flow_engine::{Batch, Column, Contract, Operator, OperatorError, Reference, StepContext};
use roll_flow_model::weights::to_f32_vec;
use serde::Deserialize;

use super::kind::{model_ref, NodeKind};
use super::log_prob::scoring_contract;
use crate::runtime::backend::RunBackend;
use crate::runtime::models::CriticModel;
use crate::runtime::resources::Runtime;
use crate::runtime::scoring::{score_chunks, token_positions, token_values};
use crate::training::epochs::SCORING_CHUNK_TOKENS;

/// `Values`' settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesSpec {
    /// The critic (a `models:` name).
    pub model: String,
}

impl NodeKind for ValuesSpec {
    fn contract(&self) -> Contract {
        scoring_contract(VALUES)
    }

    fn may_give() -> Vec<Column> {
        vec![VALUES]
    }

    fn references(&self) -> Vec<Reference> {
        model_ref(&self.model)
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(ValuesNode {
            critic: runtime.critic(&self.model)?,
        }))
    }
}

struct ValuesNode<B: RunBackend> {
    critic: Rc<RefCell<CriticModel<B>>>,
}

impl<B: RunBackend> Operator for ValuesNode<B> {
    fn process(&mut self, ctx: &mut StepContext, mut batch: Batch) -> Result<Batch, OperatorError> {
        let weights = self.critic.borrow().train.module().valid();
        let mut column = vec![0.0f32; batch.num_tokens()];
        let chunks = score_chunks(&batch, SCORING_CHUNK_TOKENS, B::CONCURRENT_PASSES, |part| {
            Ok(to_f32_vec(&token_values(&weights, part)?))
        })
        .map_err(OperatorError)?;
        for (chunk, values) in chunks {
            for (position, value) in token_positions(&batch, &chunk).into_iter().zip(values) {
                column[position] = value;
            }
        }
        let mask = batch.bools(&RESPONSE_MASK)?;
        let (sum, n) = column
            .iter()
            .zip(mask)
            .filter(|(_, &m)| m)
            .fold((0.0, 0usize), |(s, n), (v, _)| (s + *v as f64, n + 1));
        ctx.metrics
            .insert("values/mean".into(), sum / n.max(1) as f64);
        batch.set(&VALUES, column)?;
        Ok(batch)
    }
}
