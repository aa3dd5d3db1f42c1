//! Rollout: playing env sets with the policy's inference copy and turning the episodes
//! into the step's batch.
//!
//! - [`episode`]: one env's loop, on its own thread.
//! - [`inference`]: the inference loop that serves env loops with continuous batching (one
//!   loop per group of envs, `inference_loops`).
//! - [`transcript`]: multi-turn chats as tokens, without re-tokenizing replies.
//! - [`samples`]: trajectory-wise and step-wise sample builders.
//! - [`RolloutNode`]: the `Rollout` operator; [`play_episodes`] is shared with `Eval`.

pub mod episode;
pub mod episode_text;
pub mod inference;
#[cfg(test)]
mod prompt_budget_tests;
pub mod samples;
pub mod stats;
pub mod transcript;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use roll_flow_engine::{Batch, Operator, OperatorError, Pipeline, StepContext};

pub use episode::{Episode, PlaySettings, TurnRecord};
pub use inference::InferenceStats;

use crate::envs::{EnvManager, EnvSlot, Shard};
use crate::model::generate::{AnswerChoices, SamplingParams};
use crate::model::{Qwen2CausalLm, TextTokenizer};
use crate::nodes::{Guide, Node, RolloutSpec, SampleMode};
use crate::runtime::{PolicyModel, RunBackend, Runtime};
use crate::RollFlow;
use episode::{run_episode, EpisodeJob};

/// Plays one episode per slot, all at once; episodes come back in slot order.
pub fn play_episodes<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    tokenizer: &TextTokenizer,
    settings: &PlaySettings,
    manager: &EnvManager,
    slots: Vec<EnvSlot>,
    guides: &BTreeMap<String, Arc<AnswerChoices>>,
    seed: u64,
) -> Result<(Vec<Episode>, InferenceStats), String> {
    let mut jobs = Vec::with_capacity(slots.len());
    for (index, slot) in slots.into_iter().enumerate() {
        let env = manager
            .build_env(&slot.env_tag)
            .map_err(|e| format!("env `{}`: {e}", slot.env_tag))?;
        jobs.push(EpisodeJob {
            index,
            guide: guides.get(&slot.env_tag).cloned(),
            slot,
            env,
            tokenizer,
            settings,
            context: model.config.max_position_embeddings,
            seed: seed ^ (index as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
        });
    }
    // Each job is known to its inference loop by its index within the group (the seeds
    // were drawn from the global index already).
    let mut groups = contiguous_groups(jobs, settings.inference_loops);
    for group in &mut groups {
        for (local, job) in group.iter_mut().enumerate() {
            job.index = local;
        }
    }
    std::thread::scope(|scope| {
        let loops: Vec<_> = groups
            .into_iter()
            .map(|group| scope.spawn(move || serve_group(scope, model, group)))
            .collect();
        let mut episodes = Vec::new();
        let mut stats = InferenceStats::default();
        for handle in loops {
            let (group_episodes, group_stats) = handle
                .join()
                .unwrap_or_else(|_| Err("an inference loop panicked".into()))?;
            episodes.extend(group_episodes);
            stats.add(&group_stats);
        }
        Ok((episodes, stats))
    })
}

/// `items` in `n` contiguous groups of near-equal size (at most one per item), in order.
fn contiguous_groups<T>(items: Vec<T>, n: usize) -> Vec<Vec<T>> {
    let total = items.len();
    let n = n.clamp(1, total.max(1));
    let mut groups: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        groups[i * n / total].push(item);
    }
    groups
}

/// One inference loop and its env loops (each env on its own thread); episodes in job
/// order.
fn serve_group<'scope, 'env, B: RunBackend>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    model: &'env Qwen2CausalLm<B>,
    jobs: Vec<EpisodeJob<'env>>,
) -> Result<(Vec<Episode>, InferenceStats), String> {
    let (calls, requests) = crossbeam_channel::unbounded();
    let (reply_senders, reply_receivers): (Vec<_>, Vec<_>) =
        jobs.iter().map(|_| crossbeam_channel::bounded(1)).unzip();
    let handles: Vec<_> = jobs
        .into_iter()
        .zip(reply_receivers)
        .map(|(job, replies)| {
            let calls = calls.clone();
            scope.spawn(move || run_episode(job, calls, replies))
        })
        .collect();
    drop(calls);
    let served = serve_or_report(model, requests, reply_senders);
    let episodes: Result<Vec<Episode>, String> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("an env loop panicked".into()))
        })
        .collect();
    let stats = served?;
    Ok((episodes?, stats))
}

fn serve_or_report<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    requests: crossbeam_channel::Receiver<episode::EnvMessage>,
    replies: Vec<crossbeam_channel::Sender<crate::model::generate::GenerationOutput>>,
) -> Result<InferenceStats, String> {
    inference::serve(model, requests, replies).map_err(|e| format!("generation: {e}"))
}

/// How a policy plays, from its `Rollout` node (eval plays the same way, greedily).
pub fn play_settings(spec: &RolloutSpec, record: bool) -> PlaySettings {
    PlaySettings {
        samples: spec.samples.clone(),
        sampling: SamplingParams {
            temperature: spec.temperature,
            top_p: spec.top_p,
            top_k: spec.top_k.unwrap_or(0),
        },
        max_new_tokens: spec.max_new_tokens,
        sequence_length: spec.sequence_length,
        instruction: spec.instruction,
        record,
        inference_loops: spec.inference_loops,
    }
}

/// Builds and registers the answer guide of every env tag in `tags`, if `guide` asks.
pub fn register_guides(
    guide: Guide,
    tags: &[String],
    manager: &EnvManager,
    tokenizer: &TextTokenizer,
    guides: &RefCell<BTreeMap<String, Arc<AnswerChoices>>>,
) -> Result<(), String> {
    if guide == Guide::Free {
        return Ok(());
    }
    let stop = tokenizer
        .token_id("<|im_end|>")
        .or_else(|| tokenizer.stop_tokens().first().copied())
        .ok_or("`guide: Actions` needs a tokenizer with an end-of-message token")?;
    for tag in tags {
        let env = manager
            .build_env(tag)
            .map_err(|e| format!("env `{tag}`: {e}"))?;
        let names = env.action_names();
        if names.is_empty() {
            return Err(format!(
                "`guide: Actions`: env `{tag}` ({}) has no fixed action set; use `guide: Free`",
                env.name()
            ));
        }
        let texts: Vec<String> = names
            .iter()
            .map(|n| format!("<answer>{n}</answer>"))
            .collect();
        let choices =
            AnswerChoices::from_texts(tokenizer, &texts, stop).map_err(|e| e.to_string())?;
        guides.borrow_mut().insert(tag.clone(), Arc::new(choices));
    }
    Ok(())
}

/// The env sets a node plays and the policy it plays them with: what `Rollout` and
/// `Eval` share.
pub struct EnvPlayer<B: RunBackend> {
    tags: Vec<String>,
    manager: EnvManager,
    policy: Rc<RefCell<PolicyModel<B>>>,
    guides: Rc<RefCell<BTreeMap<String, Arc<AnswerChoices>>>>,
    settings: PlaySettings,
}

impl<B: RunBackend> EnvPlayer<B> {
    /// Loads `policy` and registers the answer guide of every tag when `guide` asks.
    pub fn build(
        tags: &[String],
        policy: &str,
        guide: Guide,
        settings: PlaySettings,
        runtime: &mut Runtime<B>,
    ) -> Result<Self, String> {
        let manager = env_manager(runtime, tags)?;
        let policy = runtime.policy(policy)?;
        register_guides(
            guide,
            tags,
            &manager,
            &policy.borrow().tokenizer,
            &runtime.guides,
        )?;
        Ok(EnvPlayer {
            tags: tags.to_vec(),
            manager,
            policy,
            guides: runtime.guides.clone(),
            settings,
        })
    }

    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The env manager over this player's tags.
    pub fn manager(&self) -> &EnvManager {
        &self.manager
    }

    /// The policy's tokenizer (to show its tokens as text).
    pub fn tokenizer(&self) -> Arc<TextTokenizer> {
        self.policy.borrow().tokenizer.clone()
    }

    /// Plays this worker's slots of `ctx.step`; also returns the policy version played.
    pub fn play(&self, ctx: &StepContext) -> Result<(Vec<Episode>, InferenceStats, u64), String> {
        let slots = step_slots(&self.manager, &self.tags, ctx)?;
        self.play_slots(slots, ctx.seed)
    }

    /// Plays the given slots with sampling seed `seed`; also returns the policy version.
    pub fn play_slots(
        &self,
        slots: Vec<EnvSlot>,
        seed: u64,
    ) -> Result<(Vec<Episode>, InferenceStats, u64), String> {
        let policy = self.policy.borrow();
        let (episodes, stats) = play_episodes(
            policy.inference(),
            &policy.tokenizer,
            &self.settings,
            &self.manager,
            slots,
            &self.guides.borrow(),
            seed,
        )?;
        Ok((episodes, stats, policy.version))
    }
}

/// The pipeline's `Rollout` nodes.
pub fn rollouts(pipeline: &Pipeline<RollFlow>) -> impl Iterator<Item = &RolloutSpec> {
    pipeline.nodes.iter().filter_map(|(_, n)| match n {
        Node::Rollout(r) => Some(r),
        _ => None,
    })
}

/// The `Rollout` node that trains `policy`, if any.
pub fn rollout_for<'a>(pipeline: &'a Pipeline<RollFlow>, policy: &str) -> Option<&'a RolloutSpec> {
    rollouts(pipeline).find(|r| r.policy == policy)
}

/// The `Rollout` operator.
pub struct RolloutNode<B: RunBackend> {
    samples: SampleMode,
    player: EnvPlayer<B>,
}

impl<B: RunBackend> RolloutNode<B> {
    pub fn build(spec: &RolloutSpec, runtime: &mut Runtime<B>) -> Result<Self, String> {
        let settings = play_settings(spec, false);
        Ok(RolloutNode {
            samples: spec.samples.clone(),
            player: EnvPlayer::build(&spec.envs.0, &spec.policy, spec.guide, settings, runtime)?,
        })
    }
}

/// An env manager over the named env sets of the pipeline.
pub fn env_manager<B: RunBackend>(
    runtime: &Runtime<B>,
    tags: &[String],
) -> Result<EnvManager, String> {
    let pipeline = &runtime.pipeline;
    let entries = tags.iter().map(|t| {
        let set = pipeline.envs.get(t).expect("validated env reference");
        (t.as_str(), set)
    });
    EnvManager::new(entries, pipeline.seed).map_err(|e| e.to_string())
}

/// This worker's slots of every tag at `step`.
pub fn step_slots(
    manager: &EnvManager,
    tags: &[String],
    ctx: &StepContext,
) -> Result<Vec<EnvSlot>, String> {
    let shard = Shard {
        worker: ctx.worker,
        workers: ctx.workers,
    };
    let mut slots = Vec::new();
    for tag in tags {
        slots.extend(
            manager
                .slots_for(tag, ctx.step, shard)
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(slots)
}

impl<B: RunBackend> Operator for RolloutNode<B> {
    fn process(&mut self, ctx: &mut StepContext, _input: Batch) -> Result<Batch, OperatorError> {
        let started = std::time::Instant::now();
        let (episodes, stats, version) = self.player.play(ctx).map_err(OperatorError)?;
        let seconds = started.elapsed().as_secs_f64();
        let group_size = |tag: &str| self.player.manager.group_size(tag).unwrap_or(1);
        let batch = match self.samples {
            SampleMode::Trajectory => samples::trajectory_batch(&episodes, group_size, version),
            SampleMode::Step { .. } => samples::step_batch(&episodes, group_size, version),
        }?;
        if batch.num_samples() == 0 {
            let context = self
                .player
                .policy
                .borrow()
                .inference()
                .config
                .max_position_embeddings;
            episode::check_room_to_reply(&episodes, &self.player.settings, context)
                .map_err(OperatorError)?;
        }
        let all: Vec<&Episode> = episodes.iter().collect();
        stats::episode_metrics(&all, &mut ctx.metrics, "");
        ctx.metrics.insert(
            "gen_tokens_per_s".into(),
            stats.generated_tokens as f64 / seconds.max(1e-9),
        );
        ctx.metrics.insert("requests".into(), stats.requests as f64);
        ctx.metrics
            .insert("prompt_tokens".into(), stats.prompt_tokens as f64);
        ctx.metrics.insert(
            "reused_prompt_tokens".into(),
            stats.reused_prompt_tokens as f64,
        );
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::contiguous_groups;

    #[test]
    fn groups_are_contiguous_ordered_and_near_equal() {
        let groups = |n, k| contiguous_groups((0..n).collect::<Vec<usize>>(), k);
        assert_eq!(groups(5, 2), vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!(groups(4, 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(groups(3, 1), vec![vec![0, 1, 2]]);
        // More loops than items: one item each; no items: one empty group.
        assert_eq!(groups(2, 4), vec![vec![0], vec![1]]);
        assert_eq!(groups(0, 3), vec![Vec::<usize>::new()]);
        assert_eq!(groups(7, 0), vec![(0..7).collect::<Vec<_>>()]);
    }
}
