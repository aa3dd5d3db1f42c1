//! Playing env slots with a policy's inference copy: each env on its own thread
//! ([`super::episode`]), served by one or more continuous-batching inference loops
//! ([`super::inference`]), with no barrier between envs.

use std::collections::BTreeMap;
use std::sync::Arc;

use roll_flow_envs::manager::{EnvManager, EnvSlot};
use roll_flow_model::generate::{AnswerChoices, GenerationOutput};
use roll_flow_model::{Qwen2CausalLm, TextTokenizer};

use super::episode::{
    run_episode, EnvMessage, Episode, EpisodeJob, EpisodeOutcome, INFERENCE_STOPPED,
};
use super::faults::{drop_lost_groups, EnvFaults};
use super::inference::{self, InferenceStats};
use crate::play_settings::PlaySettings;
use crate::runtime::backend::RunBackend;

/// Plays one episode per slot, all at once; episodes come back in slot order, less the
/// groups an env fault lost ([`super::faults`]).
pub fn play_episodes<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    tokenizer: &TextTokenizer,
    settings: &PlaySettings,
    manager: &EnvManager,
    slots: Vec<EnvSlot>,
    guides: &BTreeMap<String, Arc<AnswerChoices>>,
    seed: u64,
) -> Result<(Vec<Episode>, InferenceStats, EnvFaults), String> {
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
        let mut outcomes = Vec::new();
        let mut stats = InferenceStats::default();
        let joined: Vec<_> = loops
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(panicked("an inference loop", p)))
            })
            .collect();
        for group in joined {
            let (group_outcomes, group_stats) = group?;
            outcomes.extend(group_outcomes);
            stats.add(&group_stats);
        }
        let (episodes, faults) = drop_lost_groups(outcomes);
        Ok((episodes, stats, faults))
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
) -> Result<(Vec<EpisodeOutcome>, InferenceStats), String> {
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
    // Every handle is joined before any error returns: a panicked thread left to the
    // scope would panic the scope itself and lose the message.
    let joined: Vec<Result<EpisodeOutcome, String>> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|p| Err(panicked("an env loop", p))))
        .collect();
    // The cause, not its echo: an env loop's own error (the inference loop only saw it
    // stop), unless the env loop only saw the inference loop stop.
    match (
        joined.into_iter().collect::<Result<Vec<_>, String>>(),
        served,
    ) {
        (Ok(episodes), Ok(stats)) => Ok((episodes, stats)),
        (Err(env), Err(inference)) if env == INFERENCE_STOPPED => Err(inference),
        (Err(env), _) => Err(env),
        (Ok(_), Err(inference)) => Err(inference),
    }
}

/// A thread's panic as an error: `who` and the panic's message.
fn panicked(who: &str, payload: Box<dyn std::any::Any + Send>) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    format!("{who} panicked: {message}")
}

fn serve_or_report<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    requests: crossbeam_channel::Receiver<EnvMessage>,
    replies: Vec<crossbeam_channel::Sender<GenerationOutput>>,
) -> Result<InferenceStats, String> {
    inference::serve(model, requests, replies).map_err(|e| format!("generation: {e}"))
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
