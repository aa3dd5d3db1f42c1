//! [`NodeKind`]: what every node kind tells the engine and the registry about itself, and
//! how it builds its operator. A kind implements it in its own file; the registry
//! (`crate::registry`) lists the kinds, one line each, and asks them these questions.

use roll_flow_engine::{Column, Contract, Operator, Reference, Role};

use crate::play_settings::{EvalPlay, PolicyPlay};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

/// One node kind: its RON config struct implements this.
pub trait NodeKind {
    /// The columns it needs and gives, as configured.
    fn contract(&self) -> Contract;

    /// Every column some configuration of this kind gives, for the advice "add a … node
    /// upstream" when a column is missing.
    fn may_give() -> Vec<Column>
    where
        Self: Sized;

    /// How the executor wires it in.
    fn role(&self) -> Role {
        Role::Transform
    }

    /// The models and envs it names.
    fn references(&self) -> Vec<Reference> {
        Vec::new()
    }

    /// Range and combination checks, run at validation before anything is built.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// It trains a model (so several workers must average its gradients, and
    /// `--dump-batches` saves its input).
    fn trains(&self) -> bool {
        self.trained().is_some()
    }

    /// The model it trains and how (the pre-flight memory estimate's input).
    fn trained(&self) -> Option<TrainedModel> {
        None
    }

    /// The model whose trained weights it publishes to the inference copy, when a node
    /// of this kind decides that rather than the training node (`ModelUpdate`).
    fn publishes(&self) -> Option<&str> {
        None
    }

    /// The policy it trains by playing envs, and how it plays them (`Rollout`).
    fn plays(&self) -> Option<PolicyPlay> {
        None
    }

    /// The policy it evaluates, and on which envs (`Eval`).
    fn evaluates(&self) -> Option<EvalPlay> {
        None
    }

    /// The name the kind gives itself, which its registry line must repeat (checked by a
    /// test): the settings type's name less its `Spec` suffix (`ActorStepSpec` is
    /// `ActorStep`); an estimator's [`kind`](roll_flow_algo::AdvantageEstimator::kind).
    fn own_name() -> String
    where
        Self: Sized,
    {
        let path = std::any::type_name::<Self>();
        let name = path.rsplit("::").next().unwrap_or(path);
        name.strip_suffix("Spec").unwrap_or(name).to_string()
    }

    /// Builds the operator for node `name` on backend `B`.
    fn build<B: RunBackend>(
        &self,
        name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String>
    where
        Self: Sized;
}

/// What a training node trains: the model, the samples per micro-batch (its mini-batch when
/// it sets no micro-batch; `None`: the whole
/// batch at once) and whether the model ends in the vocabulary-wide LM head (a critic
/// ends in one value per token).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainedModel {
    pub model: String,
    pub micro_batch: Option<usize>,
    /// Its `max_tokens_per_micro_batch`.
    pub max_tokens_per_micro_batch: Option<usize>,
    pub lm_head: bool,
}

/// The model a node uses when its file names none: `"policy"`.
pub fn default_policy() -> String {
    "policy".into()
}

/// Tokens per reply of `Rollout` and `Eval` when the file gives none (ROLL's 64).
pub fn default_max_new_tokens() -> usize {
    64
}

/// `field` must be at least 1 (counts and periods).
pub fn at_least_one(field: &str, value: u64) -> Result<(), String> {
    if value == 0 {
        return Err(format!("`{field}` must be at least 1"));
    }
    Ok(())
}

/// The reference of a node's `model:` field.
pub fn model_ref(name: &str) -> Vec<Reference> {
    vec![Reference::Model {
        field: "model",
        name: name.to_string(),
    }]
}
