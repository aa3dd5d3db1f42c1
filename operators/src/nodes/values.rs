//! `Values`: the critic's estimate V(s_t) for every response token, gradients off (the
//! rollout-time values GAE bootstraps from and value clipping centres on).
//!
//! RON: `"values": Values(model: "critic")`.

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::AutodiffModule;
use roll_flow_engine::batch::column::{RESPONSE_MASK, VALUES};
use roll_flow_engine::{Batch, Operator, OperatorError, StepContext};
use roll_flow_model::weights::to_f32_vec;
use serde::Deserialize;

use crate::runtime::backend::RunBackend;
use crate::runtime::models::CriticModel;
use crate::runtime::scoring::{score_chunks, token_positions, token_values};
use crate::training::epochs::SCORING_CHUNK_TOKENS;

/// `Values`' settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesSpec {
    /// The critic (a `models:` name).
    pub model: String,
}

super::scoring_kind::scoring_node_kind!(ValuesSpec, VALUES, |spec, runtime| {
    let critic = runtime.critic(&spec.model)?;
    Ok(Box::new(ValuesNode { critic }))
});

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
