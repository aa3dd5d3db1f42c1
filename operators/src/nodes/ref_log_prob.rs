//! `RefLogProb`: the log-prob of every response token under a frozen reference model (π_ref
//! for KL terms), scored as `LogProb` scores π_old (`super::log_prob`).
//!
//! RON: `"ref_logprob": RefLogProb(model: "reference")`.

use roll_flow_engine::batch::column::REF_LOGPROB;
use serde::Deserialize;

use super::log_prob::LogProbNode;

/// `RefLogProb`'s settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefLogProbSpec {
    /// The reference model (a `models:` name).
    pub model: String,
}

super::scoring_kind::scoring_node_kind!(RefLogProbSpec, REF_LOGPROB, |spec, runtime| {
    let node = LogProbNode::build(&spec.model, REF_LOGPROB, runtime)?;
    Ok(Box::new(node))
});
