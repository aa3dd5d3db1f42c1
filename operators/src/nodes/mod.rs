//! The node kinds: one file each, holding the kind's RON settings, its contract and checks
//! ([`kind::NodeKind`]) and its operator. The registry (`crate::registry`) lists them,
//! one line each; the advantage estimators of `roll-flow-algo` are node kinds through
//! [`advantage`].

mod actor_objective;
pub mod actor_step;
pub mod advantage;
pub mod checkpoint;
pub mod critic_step;
pub mod env_names;
pub mod eval;
pub mod kind;
pub mod log_prob;
pub mod model_update;
pub mod pi_old;
pub mod ref_log_prob;
pub mod rollout;
pub mod scoring_kind;
pub mod values;
