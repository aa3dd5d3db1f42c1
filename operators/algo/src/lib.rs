//! RL algorithms: advantage estimators, reward shaping, KL control and losses.
//!
//! Every piece follows a published rule from ROLL, RAGEN (StarPO), verl-agent (GiGPO) or
//! AReaL; each file holds one estimator, shaping step or loss with its formula, source and
//! defaults in its doc comment (see `docs/REFERENCE.md`).
//!
//! - Estimators ([`AdvantageEstimator`]) read and write [`roll_flow_engine::Batch`] columns,
//!   so the `adv` node (in `roll-flow-operators`) is a thin wrapper over any of them: one
//!   file each ([`gae`], [`bi_level_gae`], [`grpo`], [`reinforce`], [`rloo`], [`dr_grpo`],
//!   [`reinforce_plus_plus`], [`starpo`], [`gigpo`], [`step_reinforce`],
//!   [`agentic_reinforce`]), and one line in the node registry.
//! - Shaping ([`Shaping`], [`KlPenalty`]) runs inside the estimators in ROLL's order:
//!   reward clip, KL penalty, estimator, whitening, advantage clip.
//! - Losses ([`PpoClip`], [`DecoupledPpo`], [`Gspo`], [`Cispo`], as [`PolicyLoss`], with
//!   the [`MismatchCorrection`]; [`ValueLoss`], [`actor_objective`]) work on
//!   packed 1-D token tensors, generic over the backend so autodiff works everywhere; the
//!   clipped surrogate and GAE run in the fused kernels of `roll-flow-kernels` (any
//!   `KernelBackend`), whose `reference` module keeps the unfused formulas as the test
//!   oracle; [`ActorBatch`] / [`CriticBatch`] read their inputs from a batch and
//!   [`clip_grad_norm`] clips the gradients.

pub mod actor_loss;
pub mod advantage_clip;
pub mod agentic_reinforce;
pub mod aggregation;
pub mod algo_stats;
mod batch_read;
pub mod batch_tensors;
pub mod bi_level_gae;
pub mod cispo;
pub mod config_check;
pub mod decoupled_ppo;
pub mod discount;
pub mod dr_grpo;
pub mod entropy_control;
pub mod error;
pub mod estimator;
pub mod gae;
pub mod gigpo;
pub mod grad_clip;
pub mod grad_flat;
pub mod grouping;
pub mod grpo;
pub mod gspo;
pub mod kl;
pub mod kl_controller;
pub mod kl_penalty;
pub mod mismatch_correction;
pub mod packed_layout;
pub mod policy_loss;
pub mod ppo_loss;
pub mod reinforce;
pub mod reinforce_plus_plus;
pub mod repeat_penalty;
pub mod reward_clip;
pub mod rloo;
pub mod segment_ratio;
pub mod shaping;
pub mod similarity;
pub mod starpo;
pub mod step_reinforce;
pub mod update_norm;
pub mod value_loss;
pub mod whiten;
pub mod zero_advantage_filter;

/// Small batches for the estimators' and losses' tests (also the operators crate's).
#[doc(hidden)]
pub mod test_batches;

pub use actor_loss::{actor_objective, ActorExtras, ActorLossOutput, KlLoss, Regularisers};
pub use aggregation::LossAgg;
pub use algo_stats::{AlgoStats, DeviceStats};
pub use batch_tensors::{ActorBatch, CriticBatch};
pub use cispo::Cispo;
pub use decoupled_ppo::{BehaviourCap, DecoupledPpo};
pub use entropy_control::{AdaptiveEntropy, EntropyController};
pub use error::AlgoError;
pub use estimator::{AdvantageEstimator, AdvantageState};
pub use gigpo::{AnchorMode, EpisodeStats, GigpoNorm};
pub use grad_clip::{clip_grad_norm, grad_norm};
pub use grad_flat::{flatten_grads, unflatten_grads};
pub use grouping::{Grouping, Norm};
pub use gspo::Gspo;
pub use kl::KlEstimator;
pub use kl_controller::KlController;
pub use kl_penalty::KlPenalty;
pub use mismatch_correction::{MismatchCorrection, MismatchMask};
pub use packed_layout::PackedLayout;
pub use policy_loss::PolicyLoss;
pub use ppo_loss::{PolicyInputs, PolicyLossOutput, PpoClip, RatioLevel};
pub use shaping::Shaping;
pub use update_norm::update_norm;
pub use value_loss::{ValueLoss, ValueLossOutput};
pub use zero_advantage_filter::no_policy_gradient;
