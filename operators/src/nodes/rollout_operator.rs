//! The `Rollout` node's operator ([`RolloutNode`]): plays a step (now, or takes the one an
//! asynchronous rollout played ahead), turns the episodes into the batch and reports what
//! every rollout reports. Its settings and checks are the parent module's [`RolloutSpec`].

use std::sync::Arc;

use roll_flow_engine::collective::Collective;
use roll_flow_engine::{Batch, BatchError, Operator, OperatorError, StepContext};

use super::RolloutSpec;
use crate::play_settings::PlaySettings;
use crate::rollout::ahead::{AheadRollout, AheadSetup};
use crate::rollout::dynamic_sampling::{play_dynamic, DynamicSampling};
use crate::rollout::env_player::{env_manager, EnvPlayer, Played};
use crate::rollout::episode::check_room_to_reply;
use crate::rollout::stats::EpisodeSummary;
use crate::rollout::{gathered, samples, stats};
use crate::runtime::backend::RunBackend;
use crate::runtime::resources::Runtime;
use crate::runtime::weight_versions::WeightVersions;

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
pub(super) fn start_ahead<B: RunBackend>(
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
        let lora = policy.published_from();
        weights.restore(
            &dir,
            first.saturating_sub(n),
            first,
            compute,
            lora.as_deref(),
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
pub(super) struct RolloutNode<B: RunBackend> {
    pub(super) player: EnvPlayer<B>,
    /// The thread of an asynchronous rollout (`staleness` > 0).
    pub(super) ahead: Option<AheadRollout<B>>,
    /// Several workers each play a shard of the groups and gather the step's whole batch.
    pub(super) collective: Collective,
    /// DAPO's dynamic sampling, when on.
    pub(super) dynamic_sampling: Option<DynamicSampling>,
    /// The steps whose replies are guided (`guide_steps`), when not all.
    pub(super) guide_steps: Option<u64>,
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
        if let Some(steps) = self.guide_steps {
            // Derived from the step alone, so a resumed run frees the replies where it was.
            let guided = ctx.step < steps;
            if !guided {
                self.player.free_replies();
            }
            ctx.metrics
                .insert("guided".into(), f64::from(u8::from(guided)));
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
