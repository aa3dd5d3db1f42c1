//! The RON configs of the pipeline's non-estimator nodes, with their contracts.
//!
//! Each struct is what a user writes inside the node's variant, e.g.
//! `Rollout(envs: "train", policy: "policy", samples: Step(history: 2))`. Defaults follow
//! ROLL's agentic examples unless noted.

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Contract, Need, Reference};
use serde::Deserialize;

use super::env_names::EnvNames;
use crate::algo::{KlLoss, PolicyLoss, RatioLevel, ValueLoss, OBSERVATION};

fn policy() -> String {
    "policy".to_string()
}
fn one() -> f32 {
    1.0
}
fn one_usize() -> usize {
    1
}
fn max_new_tokens() -> usize {
    64
}
fn sequence_length() -> usize {
    2048
}
fn eval_every() -> u64 {
    10
}
fn checkpoint_every() -> u64 {
    50
}
fn render_episodes() -> usize {
    4
}

/// How rollout turns episodes into samples.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SampleMode {
    /// One sample per trajectory holding the whole multi-turn history (StarPO, PPO).
    Trajectory,
    /// One sample per step whose prompt holds the last `history` turns (GiGPO).
    Step { history: usize },
}

/// The `Rollout` node: plays the env sets with the policy and emits the step's batch.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutSpec {
    /// Env set(s) to play: a name from `envs:` or a list of names (each is an env tag).
    pub envs: EnvNames,
    /// The model that generates (default `"policy"`).
    #[serde(default = "policy")]
    pub policy: String,
    /// `Trajectory` (default) or `Step(history: N)`.
    #[serde(default = "trajectory")]
    pub samples: SampleMode,
    /// Sampling temperature (default 1.0).
    #[serde(default = "one")]
    pub temperature: f32,
    /// Nucleus sampling mass (default 1.0 = off).
    #[serde(default = "one")]
    pub top_p: f32,
    /// Keep only the k most likely tokens (default off).
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Tokens the model may generate per turn (ROLL: 64).
    #[serde(default = "max_new_tokens")]
    pub max_new_tokens: usize,
    /// Longest sample (prompt + all turns); a trajectory reaching it ends as truncated.
    #[serde(default = "sequence_length")]
    pub sequence_length: usize,
    /// `Free` (default) or `Actions`: constrain each reply to `<answer>NAME</answer>` for
    /// one of the env's action names (guided decoding, as vLLM's `guided_choice`).
    #[serde(default)]
    pub guide: Guide,
    /// Put the env's instruction in the system message (default true). A model trained
    /// from scratch cannot read it; turning it off saves most of the prompt.
    #[serde(default = "yes")]
    pub instruction: bool,
    /// Inference loops (default 1): the env loops are split into this many contiguous
    /// groups, each served by its own continuous batcher on its own thread, so decoding
    /// uses more than one core on the CPU (a decode step's small products do not split
    /// over threads). Each request samples with its own seed, so the number changes the
    /// speed, not the samples (a 1000-step GiGPO run wrote the same `metrics.jsonl` with one
    /// and two loops, bench/README.md).
    #[serde(default = "one_loop")]
    pub inference_loops: usize,
}

fn one_loop() -> usize {
    1
}

/// How replies are constrained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Guide {
    /// Any text (the env parses it; malformed answers earn the format penalty).
    #[default]
    Free,
    /// Exactly one of `<answer>NAME</answer>` for the env's action names, then the end of
    /// the message. The constraint is part of the policy: log-probs are taken over the
    /// allowed tokens when sampling and when training.
    Actions,
}

fn yes() -> bool {
    true
}

/// What every rollout gives, per token and per sample.
pub const TRAJECTORY_COLUMNS: [Column; 12] = [
    RESPONSE_MASK,
    BEHAVIOUR_LOGPROB,
    TOKEN_TURN,
    TOKEN_REWARD,
    SCORE,
    EPISODE_RETURN,
    ENV_TAG,
    GROUP_ID,
    TRAJECTORY_ID,
    POLICY_VERSION,
    TURN_COUNT,
    SUCCESS,
];

/// What step-wise rollouts give in addition (GiGPO's anchor states).
pub const STEP_COLUMNS: [Column; 3] = [STATE_HASH, STEP_INDEX, OBSERVATION];

fn trajectory() -> SampleMode {
    SampleMode::Trajectory
}

impl RolloutSpec {
    pub fn contract(&self) -> Contract {
        let mut gives = TRAJECTORY_COLUMNS.to_vec();
        if matches!(self.samples, SampleMode::Step { .. }) {
            gives.extend(STEP_COLUMNS.iter().cloned());
        }
        Contract {
            needs: vec![],
            gives,
            group_normalised: false,
        }
    }

    pub fn references(&self) -> Vec<Reference> {
        let mut refs = self.envs.references("envs");
        refs.push(Reference::Model {
            field: "policy",
            name: self.policy.clone(),
        });
        refs
    }
}

/// `LogProb`: log-probs of the response tokens under `model` before the update (π_old).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogProbSpec {
    #[serde(default = "policy")]
    pub model: String,
}

/// `RefLogProb`: log-probs under the frozen reference model, for KL terms.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefLogProbSpec {
    pub model: String,
}

/// `Values`: the critic's value estimate of every token.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesSpec {
    pub model: String,
}

pub(super) fn model_ref(name: &str) -> Vec<Reference> {
    vec![Reference::Model {
        field: "model",
        name: name.to_string(),
    }]
}

fn scoring(gives: Column) -> Contract {
    Contract {
        needs: vec![Need::column(RESPONSE_MASK)],
        gives: vec![gives],
        group_normalised: false,
    }
}

impl LogProbSpec {
    pub fn contract(&self) -> Contract {
        scoring(OLD_LOGPROB)
    }
}

impl RefLogProbSpec {
    pub fn contract(&self) -> Contract {
        scoring(REF_LOGPROB)
    }
}

impl ValuesSpec {
    pub fn contract(&self) -> Contract {
        scoring(VALUES)
    }
}

/// `ActorStep`: PPO-style policy update(s) on the step's batch.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorStepSpec {
    /// The model trained (default `"policy"`).
    #[serde(default = "policy")]
    pub model: String,
    /// The policy loss: `PpoClip(...)` (default) or `DecoupledPpo(...)`.
    #[serde(default = "default_policy_loss")]
    pub loss: PolicyLoss,
    /// Entropy bonus coefficient (default 0); with `adaptive_entropy`, its initial value.
    #[serde(default)]
    pub entropy: f32,
    /// Moves the entropy coefficient each step to hold a target entropy (Skywork-OR1's
    /// adaptive entropy control, [`crate::algo::entropy_control`]; default off).
    #[serde(default)]
    pub adaptive_entropy: Option<crate::algo::AdaptiveEntropy>,
    /// Coefficient of KL(U_A‖π), the divergence of the uniform distribution over each
    /// decision's allowed tokens from the policy (label smoothing's regulariser; keeps every
    /// state's actions from saturating, [`crate::algo::actor_loss`]; default 0, off).
    #[serde(default)]
    pub uniform_kl: f32,
    /// KL to the reference model as a loss term (default off).
    #[serde(default)]
    pub kl: Option<KlLoss>,
    /// Passes over the batch per step (default 1).
    #[serde(default = "one_usize")]
    pub ppo_epochs: usize,
    /// Samples per optimizer step (verl's `ppo_mini_batch_size`); each epoch shuffles
    /// the batch and takes one AdamW step per mini-batch (default: the whole batch).
    #[serde(default)]
    pub mini_batch: Option<usize>,
    /// Samples per gradient-accumulation micro-batch within a mini-batch (default: the
    /// whole mini-batch).
    #[serde(default)]
    pub micro_batch: Option<usize>,
    /// Steps to wait while the critic warms up (default 0).
    #[serde(default)]
    pub critic_warmup: u64,
    /// Where π_old comes from: `Column` (default), the `old_logprobs` of a `LogProb` node
    /// upstream; `ThisStep`, the step's own log-probs, detached; `Behaviour`, the rollout's
    /// log-probs. All three are the weights the step starts from: `ThisStep` only with one
    /// optimizer step per batch (`ppo_epochs: 1`, no `mini_batch`), where it gives the same
    /// update bit for bit; `Behaviour` because rollout is synchronous (its recomputation
    /// differs by float rounding, about 5e-6 in a FrozenLake run,
    /// `old_logprob/behaviour_gap_max`), with any mini-batches or epochs (AReaL's
    /// `recompute_logprob: false`). Both save the `LogProb` pass.
    #[serde(default)]
    pub old_logprob: OldLogProb,
}

/// The source of π_old in the PPO ratio, [`ActorStepSpec::old_logprob`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum OldLogProb {
    /// The `old_logprobs` column, from a `LogProb` node upstream.
    #[default]
    Column,
    /// The step's own log-probs, detached (ratio 1 at the one optimizer step).
    ThisStep,
    /// The rollout's `behaviour_logprob` column.
    Behaviour,
}

impl OldLogProb {
    /// The batch column π_old is read from (`None` for `ThisStep`).
    pub fn column(self) -> Option<Column> {
        match self {
            OldLogProb::Column => Some(OLD_LOGPROB),
            OldLogProb::ThisStep => None,
            OldLogProb::Behaviour => Some(BEHAVIOUR_LOGPROB),
        }
    }
}

fn default_policy_loss() -> PolicyLoss {
    PolicyLoss::PpoClip(Default::default())
}

impl ActorStepSpec {
    pub fn contract(&self) -> Contract {
        let mut needs = vec![Need::column(RESPONSE_MASK), Need::column(ADVANTAGES)];
        needs.extend(self.old_logprob.column().map(Need::column));
        if self.kl.is_some() {
            needs.push(Need::with_hint(
                REF_LOGPROB,
                "the `kl` loss term needs a reference model; add a RefLogProb node upstream",
            ));
        }
        let behaviour_read = self.old_logprob == OldLogProb::Behaviour;
        if matches!(self.loss, PolicyLoss::DecoupledPpo(_)) && !behaviour_read {
            needs.push(Need::column(BEHAVIOUR_LOGPROB));
        }
        let ratio = match &self.loss {
            PolicyLoss::PpoClip(p) => p.ratio,
            PolicyLoss::DecoupledPpo(p) => p.ratio,
        };
        if ratio == RatioLevel::Segment {
            needs.push(Need::with_hint(TOKEN_TURN, "segment ratios need turn ids"));
        }
        Contract {
            needs,
            gives: vec![],
            group_normalised: false,
        }
    }
}

/// `CriticStep`: value-function update(s) on the step's batch.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriticStepSpec {
    pub model: String,
    /// The value loss (default: MSE with value clipping as in ROLL).
    #[serde(default)]
    pub loss: ValueLoss,
    #[serde(default = "one_usize")]
    pub ppo_epochs: usize,
    /// Samples per optimizer step (default: the whole batch).
    #[serde(default)]
    pub mini_batch: Option<usize>,
    /// Samples per gradient-accumulation micro-batch (default: the whole mini-batch).
    #[serde(default)]
    pub micro_batch: Option<usize>,
}

impl CriticStepSpec {
    pub fn contract(&self) -> Contract {
        let needs = vec![
            Need::column(RESPONSE_MASK),
            Need::with_hint(
                RETURNS,
                "value targets come from GAE; use `adv: Gae(...)` upstream",
            ),
            Need::column(VALUES),
        ];
        Contract {
            needs,
            gives: vec![],
            group_normalised: false,
        }
    }
}

/// `ModelUpdate`: publishes the trained weights to the inference copy as a new version.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelUpdateSpec {
    #[serde(default = "policy")]
    pub model: String,
}

impl ModelUpdateSpec {
    pub fn contract(&self) -> Contract {
        Contract::default()
    }
}

/// `Eval`: plays the validation env sets every `every` steps (greedy by default).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalSpec {
    pub envs: EnvNames,
    #[serde(default = "policy")]
    pub policy: String,
    /// Evaluate at step 0 and every `every` steps (default 10).
    #[serde(default = "eval_every")]
    pub every: u64,
    /// Sampling temperature; 0 is greedy (default).
    #[serde(default)]
    pub temperature: f32,
    #[serde(default = "max_new_tokens")]
    pub max_new_tokens: usize,
    /// Episodes saved as renders per eval (default 4).
    #[serde(default = "render_episodes")]
    pub render: usize,
}

impl EvalSpec {
    /// Eval starts from the policy version alone and reports metrics; it gives no columns.
    pub fn contract(&self) -> Contract {
        Contract::default()
    }

    pub fn references(&self) -> Vec<Reference> {
        let mut refs = self.envs.references("envs");
        refs.push(Reference::Model {
            field: "policy",
            name: self.policy.clone(),
        });
        refs
    }
}

/// `Checkpoint`: saves models, optimizer, RNG and step every `every` steps.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSpec {
    /// Save every `every` steps and at the last step (default 50).
    #[serde(default = "checkpoint_every")]
    pub every: u64,
    /// Keep only the newest `keep` checkpoints (default: all).
    #[serde(default)]
    pub keep: Option<usize>,
}

impl CheckpointSpec {
    pub fn contract(&self) -> Contract {
        Contract::default()
    }
}
