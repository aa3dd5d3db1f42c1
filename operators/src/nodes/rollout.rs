//! `Rollout`: plays the env sets with the policy's inference copy and emits the step's
//! batch, trajectory-wise (one sample per episode, the whole chat) or step-wise (one
//! sample per turn, its prompt the last `history` turns: GiGPO's anchor states).
//!
//! The envs play on a bounded pool of threads and ask a continuous-batching inference
//! loop for replies (`crate::rollout`); `groups × group_size` envs per env set, the envs
//! of a group sharing one seed (ROLL's env manager). Defaults follow ROLL's agentic
//! examples unless noted.
//!
//! RON: `Rollout(envs: "train", policy: "policy", samples: Step(history: 2), guide: Actions)`.

use std::sync::Arc;

use roll_flow_engine::batch::column::*;
use roll_flow_engine::collective::Collective;
use roll_flow_engine::{
    Batch, BatchError, Column, Contract, Operator, OperatorError, Reference, Role, StepContext,
};
use roll_flow_model::generate::SamplingParams;
use serde::Deserialize;

use super::env_names::EnvNames;
use super::kind::{at_least_one, default_max_new_tokens, default_policy, NodeKind};
use crate::play_settings::{Guide, PlaySettings, PolicyPlay, SampleMode};
use crate::prompt::PromptTemplates;
use crate::rollout::ahead::{AheadRollout, AheadSetup};
use crate::rollout::dynamic_sampling::{check_groups_to_compare, play_dynamic, DynamicSampling};
use crate::rollout::env_player::{env_manager, EnvPlayer, Played};
use crate::rollout::episode::check_room_to_reply;
use crate::rollout::stats::EpisodeSummary;
use crate::rollout::{gathered, samples, stats};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;
use crate::runtime::weight_versions::WeightVersions;

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
        if self.guide == Guide::Actions && !self.prompt.reply_start().is_empty() {
            return Err(
                "`prompt.reply_start` and `guide: Actions` disagree: the guide already \
                 opens every reply with `<answer>`; drop one of them"
                    .into(),
            );
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
            n => Some(start_ahead(name, n, self, runtime)?),
        };
        let collective = runtime.worker.collective.clone();
        if self.dynamic_sampling.is_some() {
            check_groups_to_compare(&player)?;
        }
        Ok(Box::new(RolloutNode {
            player,
            ahead,
            collective,
            dynamic_sampling: self.dynamic_sampling.clone(),
        }))
    }
}

/// The thread pool an asynchronous rollout decodes on: a worker for each inference loop
/// (which waits there for requests) and as many as the global pool has for the
/// arithmetic, which the OS then shares fairly with training's threads.
fn own_compute_pool(loops: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(loops + rayon::current_num_threads())
        .thread_name(|i| format!("rollout-ahead-{i}"))
        .build()
        .map_err(|e| format!("cannot start the rollout's thread pool: {e}"))?;
    Ok(Arc::new(pool))
}

/// Starts the thread of an asynchronous rollout (`staleness: n`), its weights of earlier
/// steps read back from the checkpoint when the run resumes.
fn start_ahead<B: RunBackend>(
    name: &str,
    n: u64,
    spec: &RolloutSpec,
    runtime: &mut Runtime<B>,
) -> Result<AheadRollout<B>, String> {
    let policy = runtime.policy(&spec.policy)?;
    let mut policy = policy.borrow_mut();
    if policy.behind.is_some() {
        return Err(format!(
            "two asynchronous rollouts play policy `{}`; give one of them `staleness: 0`",
            spec.policy
        ));
    }
    let weights = Arc::new(WeightVersions::default());
    let first = runtime.run.first_step;
    if let Some(dir) = runtime.run.resume_dir() {
        let dir = policy.checkpoint_dir(&dir);
        let compute = policy.inference().model.compute;
        weights.restore(
            &dir,
            first.saturating_sub(n),
            first,
            compute,
            &runtime.device,
        )?;
    }
    policy.behind = Some(weights.clone());
    let setup = AheadSetup {
        node: name.to_string(),
        pipeline_seed: runtime.run.seed,
        worker: runtime.worker.index,
        workers: runtime.worker.peers,
        tags: spec.envs.0.clone(),
        manager: env_manager(runtime, &spec.envs.0)?,
        settings: PlaySettings {
            compute: Some(own_compute_pool(spec.inference_loops)?),
            ..spec.play_settings()
        },
        tokenizer: policy.tokenizer.clone(),
        guides: runtime.guides.borrow().clone(),
        first,
        steps: runtime.run.steps,
        staleness: n,
    };
    AheadRollout::start(setup, weights)
}

/// The `Rollout` operator.
struct RolloutNode<B: RunBackend> {
    player: EnvPlayer<B>,
    /// The thread of an asynchronous rollout (`staleness` > 0).
    ahead: Option<AheadRollout<B>>,
    /// Several workers each play a shard of the groups and gather the step's whole batch.
    collective: Collective,
    /// DAPO's dynamic sampling, when on.
    dynamic_sampling: Option<DynamicSampling>,
}

impl<B: RunBackend> RolloutNode<B> {
    /// Step `ctx.step`'s rollout played ahead: publishes the weights this step starts from,
    /// takes the step's episodes and batch, and reports the lag and who waited for whom.
    fn take_ahead(&mut self, ctx: &mut StepContext) -> Result<(Played, Batch, f64), String> {
        let Some(ahead) = &mut self.ahead else {
            unreachable!("only called with a rollout thread")
        };
        let starting = self.player.starting_weights();
        let (step, waited) = ahead.take(ctx.step, starting)?;
        let (played, batch) = step.result?;
        ctx.policy_version = step.version;
        let metrics = [
            ("staleness", (ctx.step - step.played_with) as f64),
            ("trainer_idle_seconds", waited),
            ("rollout_idle_seconds", step.idle_seconds),
        ];
        for (key, value) in metrics {
            ctx.metrics.insert(key.into(), value);
        }
        Ok((played, batch, step.play_seconds))
    }
}

impl<B: RunBackend> Operator for RolloutNode<B> {
    fn process(&mut self, ctx: &mut StepContext, _input: Batch) -> Result<Batch, OperatorError> {
        if self.ahead.is_some() {
            let (played, batch, seconds) = self.take_ahead(ctx).map_err(OperatorError)?;
            return self.finish(ctx, (played, None), Ok(batch), seconds);
        }
        let started = std::time::Instant::now();
        let (played, round_zero) = match &self.dynamic_sampling {
            None => (self.player.play(ctx).map_err(OperatorError)?, None),
            Some(settings) => {
                let draw = play_dynamic(&self.player, ctx, &self.collective, settings)
                    .map_err(OperatorError)?;
                draw.counts.report(&mut ctx.metrics);
                (draw.played, Some(draw.round_zero))
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let manager = self.player.manager();
        let group_size = |tag: &str| manager.group_size(tag).unwrap_or(1);
        let mode = &self.player.settings().samples;
        let mut batch = samples::batch(mode, &played.episodes, group_size, played.version);
        if let (Ok(batch), true) = (&mut batch, self.player.settings().carry_cut) {
            samples::set_policy_lag(batch, 0, played.version).map_err(OperatorError::from)?;
        }
        self.finish(ctx, (played, round_zero), batch, seconds)
    }
}

impl<B: RunBackend> RolloutNode<B> {
    /// What every rollout reports, from its episodes and batch; the episode metrics from
    /// `reported` when given (dynamic sampling's round 0), else from the episodes.
    fn finish(
        &self,
        ctx: &mut StepContext,
        (played, reported): (Played, Option<Vec<EpisodeSummary>>),
        batch: Result<Batch, BatchError>,
        seconds: f64,
    ) -> Result<Batch, OperatorError> {
        let partial = [
            played.cut_episodes,
            played.carried_episodes,
            played.resumed_groups,
        ];
        let (episodes, stats, faults) = (played.episodes, played.inference, played.faults);
        let batch = batch?;
        if batch.num_samples() == 0 {
            check_room_to_reply(&episodes, self.player.settings(), self.player.context())
                .map_err(OperatorError)?;
        }
        let summaries = reported.unwrap_or_else(|| self.player.summaries(&episodes));
        let mut counts = vec![
            stats.generated_tokens as f64,
            stats.requests as f64,
            stats.prompt_tokens as f64,
            stats.reused_prompt_tokens as f64,
        ];
        counts.extend(partial.map(|n| n as f64));
        counts.extend(faults.counts());
        let step = gathered::gather(&self.collective, batch, summaries, counts, seconds)
            .map_err(OperatorError)?;
        let faults = faults.with_totals(&step.counts[7..]);
        faults.report(ctx.step, &mut ctx.metrics);
        if step.episodes.is_empty() && faults.env_errors > 0 {
            let first = (faults.first.as_deref()).unwrap_or("in another worker's shard");
            return Err(OperatorError(format!(
                "every group of the step was lost to env faults, so there is nothing to \
                 train on; the first: {first}"
            )));
        }
        stats::summary_metrics(&step.episodes, &mut ctx.metrics, "");
        let [generated, requests, prompt, reused, cut, carried, resumed, ..] = step.counts[..]
        else {
            unreachable!("nine counts were gathered")
        };
        if self.player.settings().extra_groups > 0 {
            let partial = [
                ("cut_episodes", cut),
                ("carried_episodes", carried),
                ("resumed_groups", resumed),
            ];
            for (key, value) in partial {
                ctx.metrics.insert(key.into(), value);
            }
        }
        let metrics = [
            ("gen_tokens_per_s", generated / step.seconds.max(1e-9)),
            // The playing alone (an asynchronous rollout's `seconds` is the step's wait).
            ("play_seconds", step.seconds),
            ("requests", requests),
            ("prompt_tokens", prompt),
            ("reused_prompt_tokens", reused),
        ];
        for (key, value) in metrics {
            ctx.metrics.insert(key.into(), value);
        }
        Ok(step.batch)
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
