//! `Rollout`: plays the env sets with the policy's inference copy and emits the step's
//! batch, trajectory-wise (one sample per episode, the whole chat) or step-wise (one
//! sample per turn, its prompt the last `history` turns: GiGPO's anchor states).
//!
//! The envs play on a bounded pool of threads and ask a continuous-batching inference
//! loop for replies (`crate::rollout`); `groups × group_size` envs per env set, the envs
//! of a group sharing one seed (ROLL's env manager). Defaults follow ROLL's agentic
//! examples unless noted.
//!
//! RON: `Rollout(envs: "train", policy: "policy", samples: Step(history: 2), guide: Actions)`;
//! `guide: Actions, guide_steps: 20, prompt: (reply_start: "<answer>")` guides the first 20
//! steps' replies after the `<answer>` every reply opens with, and leaves the rest free.

use roll_flow_engine::batch::column::*;
use roll_flow_engine::{Column, Contract, Operator, Reference, Role};
use roll_flow_model::generate::SamplingParams;
use serde::Deserialize;

use super::env_names::EnvNames;
use super::kind::{at_least_one, default_max_new_tokens, default_policy, NodeKind};
use crate::play_settings::{Guide, PlaySettings, PolicyPlay, SampleMode};
use crate::prompt::PromptTemplates;
use crate::rollout::dynamic_sampling::{check_groups_to_compare, DynamicSampling};
use crate::rollout::env_player::EnvPlayer;
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;

/// The `Rollout` node's settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutSpec {
    /// Env set(s) to play: a name from `envs:` or a list of names (each is an env tag).
    pub envs: EnvNames,
    /// The model that generates (default `"policy"`).
    #[serde(default = "default_policy")]
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
    /// Tokens the model may generate per turn (default 64, ROLL's).
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: usize,
    /// Longest sample (prompt + all turns); a trajectory reaching it ends as truncated
    /// (default 2048).
    #[serde(default = "sequence_length")]
    pub sequence_length: usize,
    /// `Free` (default) or `Actions`: constrain each reply to `<answer>NAME</answer>` for
    /// one of the env's action names (guided decoding, as vLLM's `guided_choice`).
    #[serde(default)]
    pub guide: Guide,
    /// Guide only the first N steps (default: every step), then let the replies go free:
    /// a format warm-up. The policy first learns which answer a state asks for among the
    /// valid ones, then to write it itself; free-text RL from the start learns the format
    /// first and settles on one answer (bench/history/smollm2.md, FrozenLake). Validation
    /// plays free text throughout, so it measures the policy the run ends with. Needs a
    /// synchronous rollout: scoring follows the guide of the step being trained.
    #[serde(default)]
    pub guide_steps: Option<u64>,
    /// Put the env's instruction in the system message (default true). A model trained
    /// from scratch cannot read it; turning it off saves most of the prompt.
    #[serde(default = "yes")]
    pub instruction: bool,
    /// What the model reads, as minijinja templates: `prompt: (system: "...", turn:
    /// "...")`, each optional; the defaults are the instruction and the observation
    /// (`crate::prompt` lists the variables).
    #[serde(default)]
    pub prompt: PromptTemplates,
    /// Inference loops (default 1): the envs are split into this many contiguous
    /// groups, each served by its own continuous batcher on its own thread, so decoding
    /// uses more than one core on the CPU (a decode step's small products do not split
    /// over threads). Each request samples with its own seed, so the number changes the
    /// speed, not the samples (a 1000-step GiGPO run wrote the same `metrics.jsonl` with one
    /// and two loops, bench/history/learning_curve_frozen_lake_gigpo.md).
    #[serde(default = "one_loop")]
    pub inference_loops: usize,
    /// Threads that play the envs (default 4 per core): an env's reset, parse and step run
    /// on one of them between its replies, so any number of envs share a few threads. The
    /// number changes the speed, not the samples. Envs that wait on a slow server
    /// (`Process`, `Remote`) may want more.
    #[serde(default)]
    pub env_threads: Option<usize>,
    /// Asynchronous training (default 0, synchronous): the rollout of step t plays with the
    /// weights step max(0, t − N) started from, on its own thread, while the steps before
    /// it train (ROLL's `async_generation_ratio`, AReaL's `max_head_offpolicyness`). The
    /// samples then carry `policy_lag`, and validation asks for `LogProb` +
    /// `DecoupledPpo` (π_old is no longer the rollout's policy). Reproducible: the same
    /// seed and N give the same run. See `crate::rollout::ahead`.
    #[serde(default)]
    pub staleness: u64,
    /// Partial rollouts (default off): `partial: (extra_groups: N)` starts N groups per env
    /// set more than the step trains on and keeps each set's first groups to finish,
    /// cutting the others off (ROLL's agentic scheduler takes the first trajectories to
    /// finish; AReaL interrupts generation), so a long episode no longer holds up the step.
    /// With `carry: true` (the default) the groups not kept continue in the next step, each
    /// turn keeping the policy version that wrote it, so the samples carry `policy_lag` and
    /// validation asks for `LogProb` + `DecoupledPpo` as with `staleness`. Not
    /// reproducible: which groups finish first depends on timing. The step reports
    /// `cut_episodes`, `carried_episodes` and `resumed_groups`. See
    /// `crate::rollout::early_cut`.
    #[serde(default)]
    pub partial: Option<PartialRollout>,
    /// DAPO's dynamic sampling (default off): `dynamic_sampling: (extra_rounds: 4)` drops
    /// the groups whose episodes all earned the same reward and plays more groups, with
    /// seeds fixed by the step and the round, until each env set has its `groups`
    /// informative ones or `extra_rounds` more rounds were played. Reproducible. The step
    /// reports `dynamic_sampling/rounds`, `groups_drawn`, `informative_groups` and
    /// `filled_groups`. See `crate::rollout::dynamic_sampling`.
    #[serde(default)]
    pub dynamic_sampling: Option<DynamicSampling>,
}

/// The most extra groups a partial rollout may start per env set.
const MAX_EXTRA_GROUPS: usize = 1 << 20;

/// `Rollout(partial: (..))`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialRollout {
    /// Groups per env set started beyond those the step trains on (at least 1).
    pub extra_groups: usize,
    /// Whether the groups not kept continue in the next step (default true) or are
    /// dropped (every sample then stays on-policy).
    #[serde(default = "yes")]
    pub carry: bool,
}

fn trajectory() -> SampleMode {
    SampleMode::Trajectory
}
fn one() -> f32 {
    1.0
}
fn sequence_length() -> usize {
    2048
}
fn yes() -> bool {
    true
}
fn one_loop() -> usize {
    1
}

/// What every rollout gives, per token and per sample.
pub const TRAJECTORY_COLUMNS: [Column; 13] = [
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
    OUTCOME,
];

/// What step-wise rollouts give in addition (GiGPO's anchor states).
pub const STEP_COLUMNS: [Column; 3] = [STATE_HASH, STEP_INDEX, OBSERVATION];

impl RolloutSpec {
    /// How this rollout plays its envs.
    fn play_settings(&self) -> PlaySettings {
        PlaySettings {
            samples: self.samples.clone(),
            sampling: SamplingParams {
                temperature: self.temperature,
                top_p: self.top_p,
                top_k: self.top_k.unwrap_or(0),
            },
            max_new_tokens: self.max_new_tokens,
            sequence_length: self.sequence_length,
            prompt: self.prompt.played(
                self.instruction,
                matches!(self.samples, SampleMode::Step { .. }),
            ),
            record: false,
            inference_loops: self.inference_loops,
            env_threads: self.env_threads,
            compute: None,
            extra_groups: self.partial.as_ref().map_or(0, |p| p.extra_groups),
            carry_cut: self.carries(),
        }
    }

    /// `guide_steps: N` asks for a guide to end, and a rollout that plays the step it trains.
    fn check_guide_steps(&self, steps: u64) -> Result<(), String> {
        at_least_one("guide_steps", steps)?;
        if self.guide != Guide::Actions {
            return Err("`guide_steps` ends guided decoding, so it needs `guide: Actions`".into());
        }
        if self.staleness > 0 || self.partial.is_some() {
            return Err(
                "`guide_steps` needs a synchronous rollout (`staleness: 0`, no `partial`): a \
                 step played ahead could be guided and trained free, or the other way round"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether a partial rollout continues the groups it did not keep.
    fn carries(&self) -> bool {
        self.partial.as_ref().is_some_and(|p| p.carry)
    }
}

impl NodeKind for RolloutSpec {
    fn contract(&self) -> Contract {
        let mut gives = TRAJECTORY_COLUMNS.to_vec();
        if matches!(self.samples, SampleMode::Step { .. }) {
            gives.extend(STEP_COLUMNS);
        }
        // Samples older than the step: played ahead, or continued from an earlier step.
        if self.staleness > 0 || self.carries() {
            gives.push(POLICY_LAG);
        }
        Contract {
            gives,
            ..Contract::default()
        }
    }

    fn may_give() -> Vec<Column> {
        let asynchronous = std::iter::once(POLICY_LAG);
        TRAJECTORY_COLUMNS
            .into_iter()
            .chain(STEP_COLUMNS)
            .chain(asynchronous)
            .collect()
    }

    fn role(&self) -> Role {
        Role::Source
    }

    fn references(&self) -> Vec<Reference> {
        self.envs.played_by(&self.policy)
    }

    fn check(&self) -> Result<(), String> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!(
                "`temperature` must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("`top_p` must be in (0, 1], got {}", self.top_p));
        }
        if self.top_k == Some(0) {
            return Err("`top_k` must be at least 1 (leave it out to disable)".into());
        }
        at_least_one("max_new_tokens", self.max_new_tokens as u64)?;
        at_least_one("inference_loops", self.inference_loops as u64)?;
        if let Some(threads) = self.env_threads {
            at_least_one("env_threads", threads as u64)?;
        }
        if let Some(partial) = &self.partial {
            at_least_one("partial.extra_groups", partial.extra_groups as u64)?;
            if partial.extra_groups > MAX_EXTRA_GROUPS {
                return Err(format!(
                    "`partial.extra_groups` is {}; at most {MAX_EXTRA_GROUPS} groups per env \
                     set can be started beyond a step's own",
                    partial.extra_groups
                ));
            }
        }
        if let Some(dynamic) = &self.dynamic_sampling {
            dynamic.check(self.staleness, self.partial.is_some())?;
        }
        self.prompt.check_instruction(self.instruction)?;
        if let Some(steps) = self.guide_steps {
            self.check_guide_steps(steps)?;
        }
        if self.sequence_length <= self.max_new_tokens {
            return Err(format!(
                "`sequence_length` ({}) must exceed `max_new_tokens` ({}) to leave room for the prompt",
                self.sequence_length, self.max_new_tokens
            ));
        }
        Ok(())
    }

    fn plays(&self) -> Option<PolicyPlay> {
        Some(PolicyPlay {
            policy: self.policy.clone(),
            envs: self.envs.0.clone(),
            settings: self.play_settings(),
            guide: self.guide,
            guide_steps: self.guide_steps,
            staleness: self.staleness,
        })
    }

    fn build<B: RunBackend>(
        &self,
        name: &str,
        runtime: &mut Runtime<B>,
    ) -> Result<Box<dyn Operator>, String> {
        let player = EnvPlayer::build(
            &self.envs.0,
            &self.policy,
            self.guide,
            self.play_settings(),
            runtime,
        )?;
        let ahead = match self.staleness {
            0 => None,
            n => Some(operator::start_ahead(name, n, self, runtime)?),
        };
        let collective = runtime.worker.collective.clone();
        if self.dynamic_sampling.is_some() {
            check_groups_to_compare(&player)?;
        }
        Ok(Box::new(operator::RolloutNode {
            player,
            ahead,
            collective,
            dynamic_sampling: self.dynamic_sampling.clone(),
            guide_steps: self.guide_steps,
        }))
    }
}

#[path = "rollout_operator.rs"]
mod operator;

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
