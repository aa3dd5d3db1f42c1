//! The operator contract: what a node needs, what it gives, and how it processes a step.
//!
//! Every pipeline node is an [`Operator`] built from its RON variant by the `Catalog`.
//! The contract ([`Contract`]) is declared by the node's spec alone, before anything is
//! built, so graph validation can check every edge without loading a model.

use std::collections::BTreeMap;

use crate::batch::Batch;

use crate::batch::column::Column;

/// A column a node needs, with the advice shown when nothing upstream gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    pub column: Column,
    /// Extra advice appended to the "unmet need" error, e.g. "GiGPO needs step-wise samples;
    /// set the rollout's `samples: Step(history: 2)`".
    pub hint: Option<String>,
}

impl Need {
    pub fn column(column: Column) -> Self {
        Need { column, hint: None }
    }

    pub fn with_hint(column: Column, hint: impl Into<String>) -> Self {
        Need {
            column,
            hint: Some(hint.into()),
        }
    }
}

/// A column a node cannot take, with why and what to do instead: validation refuses a
/// graph in which a node upstream gives it (StarPO on step-wise samples).
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub column: Column,
    /// The error shown, e.g. "StarPO needs trajectory-wise samples, but the rollout gives
    /// step-wise ones; set the rollout's `samples: Trajectory` (or use GiGPO)".
    pub reason: String,
}

/// What a node declares about its data: the columns it reads, the ones it adds, and the
/// ones it cannot take.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contract {
    pub needs: Vec<Need>,
    pub gives: Vec<Column>,
    pub refuses: Vec<Refusal>,
    /// The node normalises within groups (GRPO-style); a group of one makes it degenerate.
    pub group_normalised: bool,
}

/// How the executor wires a node in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Starts each step from the policy version alone (rollout, eval).
    Source,
    /// Transforms the batches of its upstream nodes.
    Transform,
    /// Transforms, and its completion publishes a new policy version to the sources
    /// (the feedback edge): actor_step, model_update.
    PolicyUpdate,
}

/// Per-call context handed to [`Operator::process`].
#[derive(Clone, Debug)]
pub struct StepContext {
    /// The global training step (the timely epoch).
    pub step: u64,
    /// The policy version the step's samples were generated with.
    pub policy_version: u64,
    /// A seed unique to (pipeline seed, node, step, worker): deterministic.
    pub seed: u64,
    pub worker: usize,
    pub workers: usize,
    /// Scalar metrics the operator reports for this step (e.g. `loss`, `kl`).
    pub metrics: BTreeMap<String, f64>,
}

/// An error from an operator while processing a step.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct OperatorError(pub String);

impl From<crate::batch::BatchError> for OperatorError {
    fn from(e: crate::batch::BatchError) -> Self {
        OperatorError(e.to_string())
    }
}

/// A node's implementation. Built once per worker, inside the worker thread, so it may
/// hold thread-local resources (models, envs) without `Send`.
pub trait Operator {
    /// Processes one step. Sources receive an empty batch; other nodes receive the merge
    /// of their upstream nodes' outputs for the same step.
    fn process(&mut self, ctx: &mut StepContext, input: Batch) -> Result<Batch, OperatorError>;
}

impl<F> Operator for F
where
    F: FnMut(&mut StepContext, Batch) -> Result<Batch, OperatorError>,
{
    fn process(&mut self, ctx: &mut StepContext, input: Batch) -> Result<Batch, OperatorError> {
        self(ctx, input)
    }
}
