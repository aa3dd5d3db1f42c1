//! `RefLogProb`: the log-prob of every response token under a frozen reference model (π_ref
//! for KL terms), scored as `LogProb` scores π_old (`super::log_prob`).
//!
//! RON: `"ref_logprob": RefLogProb(model: "reference")`.

use roll_flow_engine::batch::column::REF_LOGPROB;
use roll_flow_engine::{Column, Contract, Operator, Reference};
use serde::Deserialize;

use super::kind::{model_ref, NodeKind};
use super::log_prob::{scoring_contract, LogProbNode};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

/// `RefLogProb`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefLogProbSpec {
    /// The reference model (a `models:` name).
    pub model: String,
}

impl NodeKind for RefLogProbSpec {
    fn contract(&self) -> Contract {
        scoring_contract(REF_LOGPROB)
    }

    fn may_give() -> Vec<Column> {
        vec![REF_LOGPROB]
    }

    fn references(&self) -> Vec<Reference> {
        model_ref(&self.model)
    }

    fn build<B: RunBackend>(
        &self,
        _name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        Ok(Box::new(LogProbNode::build(
            &self.model,
            REF_LOGPROB,
            runtime,
        )?))
    }
}
