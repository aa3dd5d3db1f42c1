//! Playing env slots with a policy's inference copy: the envs on a bounded pool of threads
//! ([`super::env_pool`]), served by one or more continuous-batching inference loops
//! ([`super::inference`]), with no barrier between envs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use roll_flow_envs::manager::{EnvManager, EnvSlot, Shard};
use roll_flow_model::generate::AnswerChoices;
use roll_flow_model::{Qwen2CausalLm, TextTokenizer};

use super::early_cut::{place_carried, split_outcomes, Carried, CarriedGroup, EarlyCut, NotKept};
use super::env_pool::{panicked, EnvPool, EnvTask, Start};
use super::episode::{Episode, EpisodeJob, INFERENCE_STOPPED};
use super::episode_run::{EpisodeOutcome, Unfinished};
use super::faults::{drop_lost_groups, EnvFaults};
use super::inference::{self, InferenceStats};
use crate::play_settings::PlaySettings;
use crate::runtime::backend::RunBackend;

/// What [`play_episodes`] gives.
pub struct PlayedSlots {
    /// The episodes, in slot order, less the groups an env fault lost and those a partial
    /// rollout did not keep.
    pub episodes: Vec<Episode>,
    pub inference: InferenceStats,
    pub faults: EnvFaults,
    /// What a partial rollout did with the groups it did not keep.
    pub not_kept: NotKept,
}

/// Who plays a step: the sampling seed, the policy version and the worker's shard.
#[derive(Clone, Copy, Debug)]
pub struct StepKeys {
    pub seed: u64,
    pub version: u64,
    pub shard: Shard,
}

/// Plays one episode per slot, all at once; episodes come back in slot order, less the
/// groups an env fault lost ([`super::faults`]). With `settings.extra_groups`, each tag
/// keeps only its first groups to finish, and `carried` groups from the last step play on
/// first ([`super::early_cut`]).
pub fn play_episodes<B: RunBackend>(
    model: &Qwen2CausalLm<B>,
    tokenizer: &Arc<TextTokenizer>,
    settings: &PlaySettings,
    manager: &EnvManager,
    (slots, carried): (Vec<EnvSlot>, Vec<CarriedGroup>),
    guides: &BTreeMap<String, Arc<AnswerChoices>>,
    keys: StepKeys,
) -> Result<PlayedSlots, String> {
    let (carried, times) = place_carried(
        carried,
        manager,
        keys.shard,
        settings.extra_groups,
        keys.version,
    );
    let mut every_slot: Vec<EnvSlot> = carried.iter().map(|c| c.slot().clone()).collect();
    every_slot.extend(slots.iter().cloned());
    let cut = (settings.extra_groups > 0)
        .then(|| EarlyCut::new(&every_slot, &own_groups(manager, &every_slot)));
    let shared = Arc::new(settings.clone());
    let mut starts: Vec<Start> = (carried.into_iter())
        .map(|c| match c {
            Carried::Unfinished(Unfinished::Unstarted(job)) => Start::Fresh(job),
            Carried::Unfinished(Unfinished::Running(run)) => Start::Resumed(run),
            Carried::Finished(episode) => Start::Finished(episode),
        })
        .collect();
    for slot in slots {
        let position = manager.slot_position(&slot);
        let env = manager
            .build_env(&slot.env_tag)
            .map_err(|e| format!("env `{}`: {e}", slot.env_tag))?;
        starts.push(Start::Fresh(EpisodeJob {
            index: 0,
            guide: guides.get(&slot.env_tag).cloned(),
            slot,
            env,
            tokenizer: tokenizer.clone(),
            settings: shared.clone(),
            context: model.config.max_position_embeddings,
            // Keyed by the slot's place among every worker's slots: one worker or several
            // sample the same episodes.
            seed: keys.seed ^ (position as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93),
            version: keys.version,
        }));
    }
    // Each env is known to its inference loop by its index within the loop's group (the
    // seeds were drawn from the global index already).
    let groups = contiguous_groups(starts, settings.inference_loops);
    let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
    let (calls, requests): (Vec<_>, Vec<_>) =
        sizes.iter().map(|_| crossbeam_channel::unbounded()).unzip();
    let pool = EnvPool::new(
        (groups.into_iter().enumerate())
            .flat_map(|(l, group)| {
                (group.into_iter().enumerate()).map(move |(local, start)| (l, local, start))
            })
            .collect(),
        calls,
        cut.as_ref(),
    );
    let threads = settings.env_threads().clamp(1, pool.len().max(1));
    let (tasks, task_queue) = crossbeam_channel::unbounded::<EnvTask>();
    for env in 0..pool.len() {
        tasks.send((env, None)).expect("the queue is open");
    }
    let served: Vec<Result<InferenceStats, String>> = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| pool.work(&task_queue));
        }
        let mut first = 0;
        let loops: Vec<_> = (requests.into_iter().zip(&sizes))
            .map(|(requests, &size)| {
                let (tasks, offset) = (tasks.clone(), first);
                first += size;
                scope.spawn(move || {
                    let reply = |env: usize, output| {
                        tasks
                            .send((offset + env, Some(output)))
                            .map_err(|_| "the env pool stopped".to_string())
                    };
                    let serve = || inference::serve(model, requests, size, reply);
                    match &settings.compute {
                        Some(pool) => pool.install(serve),
                        None => serve(),
                    }
                    .map_err(|e| format!("generation: {e}"))
                })
            })
            .collect();
        drop(tasks);
        // Once every loop is done its task sender is gone and the pool's threads end.
        (loops.into_iter())
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(panicked("an inference loop", p)))
            })
            .collect()
    });
    let mut outcomes: Vec<Vec<Result<EpisodeOutcome, String>>> =
        sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (l, outcome) in pool.outcomes() {
        outcomes[l].push(outcome);
    }
    let mut played = Vec::new();
    let mut stats = InferenceStats::default();
    for (group, served) in outcomes.into_iter().zip(served) {
        played.extend(group_result(group, served, &mut stats)?);
    }
    let (played, not_kept) = match &cut {
        Some(cut) => split_outcomes(played, &cut.kept(), &times, settings.carry_cut),
        None => (played, NotKept::default()),
    };
    let (episodes, faults) = drop_lost_groups(played);
    Ok(PlayedSlots {
        episodes,
        inference: stats,
        faults,
        not_kept,
    })
}

/// The groups each tag of `slots` trains on: its own groups among them (not the extra).
fn own_groups(manager: &EnvManager, slots: &[EnvSlot]) -> HashMap<String, usize> {
    let mut own: HashMap<String, HashSet<usize>> = HashMap::new();
    for slot in slots {
        let groups = manager.groups(&slot.env_tag).unwrap_or(0);
        let ids = own.entry(slot.env_tag.clone()).or_default();
        if slot.group_in_tag < groups {
            ids.insert(slot.group_id);
        }
    }
    own.into_iter().map(|(tag, ids)| (tag, ids.len())).collect()
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

/// One inference loop's episodes, or the cause of its failure: an env's own error (the
/// inference loop only saw it stop), unless the env only saw the inference loop stop.
fn group_result(
    episodes: Vec<Result<EpisodeOutcome, String>>,
    served: Result<InferenceStats, String>,
    stats: &mut InferenceStats,
) -> Result<Vec<EpisodeOutcome>, String> {
    match (
        episodes.into_iter().collect::<Result<Vec<_>, String>>(),
        served,
    ) {
        (Ok(episodes), Ok(served)) => {
            stats.add(&served);
            Ok(episodes)
        }
        (Err(env), Err(inference)) if env == INFERENCE_STOPPED => Err(inference),
        (Err(env), _) => Err(env),
        (Ok(_), Err(inference)) => Err(inference),
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
