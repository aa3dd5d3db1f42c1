//! DAPO's dynamic sampling (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement
//! Learning System at Scale", §3.2 and Algorithm 1; verl `algorithm.filter_groups` in
//! `recipe/dapo`, ROLL's and AReaL's dynamic filtering): a group whose episodes all earned
//! the same total reward gives every group-normalised estimator zero advantages, so no
//! policy gradient. Such groups are dropped and more are played until the step has its
//! configured number of groups.
//!
//! A step plays its own groups (round 0), then, while some env tag has fewer than its
//! `groups` informative groups (reward std > 1e-6, the std below which GRPO's `MeanStd`
//! gives 0) and fewer than `extra_rounds` rounds were played, round r = 1, 2, … plays that
//! tag's `groups` groups again with new seeds (`EnvManager::round_slots`: a fixed
//! function of the pipeline seed, the tag, the step and the round; each episode's sampling
//! seed is keyed by its slot's place as in every rollout), so the same seed gives the same
//! run. Each tag then trains on its first `groups` informative groups in round order; if
//! the rounds ran out first, the tag's first uninformative groups fill the step to
//! `groups` (they give zero advantages, as without dynamic sampling; verl raises an error
//! there instead). With several workers the workers play their shards of every round and
//! agree on each decision by gathering which groups were informative.
//!
//! The criterion is the episodes' total reward (`episode_return`), also for step-wise
//! samples, whose per-step advantages (GiGPO's anchor states) a group with equal returns
//! may still have. The rollout's episode metrics (`score`, `success`, …) describe round 0,
//! the step's own draw, so they compare with a run without dynamic sampling; the batch is
//! the groups kept. Metrics: `dynamic_sampling/rounds` (extra rounds played),
//! `dynamic_sampling/groups_drawn` (groups played in all rounds), `.../informative_groups`
//! (of them, those whose rewards differ), `.../filled_groups` (uninformative groups kept
//! because the rounds ran out).
//!
//! Not with `staleness` > 0 or `partial` (validation refuses both).
//!
//! RON: `Rollout(envs: "train", dynamic_sampling: (extra_rounds: 4))`.

use std::collections::{BTreeMap, BTreeSet};

use roll_flow_algo::grouping::{mean_std, EPS};
use roll_flow_engine::collective::Collective;
use roll_flow_engine::StepContext;
use roll_flow_envs::manager::Shard;
use serde::{Deserialize, Serialize};

use super::env_player::{EnvPlayer, Played};
use super::episode::Episode;
use super::stats::EpisodeSummary;
use crate::runtime::backend::RunBackend;

/// The most extra rounds a step may play.
pub const MAX_EXTRA_ROUNDS: usize = 1 << 10;

fn four() -> usize {
    4
}

/// `Rollout(dynamic_sampling: (..))`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamicSampling {
    /// The most rounds a step plays after its own (default 4; at least 1).
    #[serde(default = "four")]
    pub extra_rounds: usize,
}

impl DynamicSampling {
    /// The range of `extra_rounds`, and what dynamic sampling cannot be combined with: an
    /// asynchronous rollout (`staleness` > 0) or a partial one.
    pub fn check(&self, staleness: u64, partial: bool) -> Result<(), String> {
        if !(1..=MAX_EXTRA_ROUNDS).contains(&self.extra_rounds) {
            return Err(format!(
                "`dynamic_sampling.extra_rounds` must be in 1..={MAX_EXTRA_ROUNDS}, got {}",
                self.extra_rounds
            ));
        }
        let other = match (staleness > 0, partial) {
            (true, _) => "`staleness` > 0 (its rollout thread plays ahead on its own)",
            (_, true) => "`partial` (which groups finish first depends on timing)",
            _ => return Ok(()),
        };
        Err(format!(
            "`dynamic_sampling` cannot be combined with {other}; remove one of them"
        ))
    }
}

/// One played group: its env tag's place among the rollout's tags, its global id, and
/// whether its episodes' rewards differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DrawnGroup {
    pub tag: usize,
    pub group_id: usize,
    pub informative: bool,
}

/// What dynamic sampling did in a step (over every worker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrawCounts {
    pub rounds: usize,
    pub drawn: usize,
    pub informative: usize,
    pub filled: usize,
}

impl DrawCounts {
    /// Adds the metrics of the module doc.
    pub fn report(&self, metrics: &mut BTreeMap<String, f64>) {
        let counts = [
            ("rounds", self.rounds),
            ("groups_drawn", self.drawn),
            ("informative_groups", self.informative),
            ("filled_groups", self.filled),
        ];
        for (key, value) in counts {
            metrics.insert(format!("dynamic_sampling/{key}"), value as f64);
        }
    }
}

/// A step played with dynamic sampling: the episodes of the groups kept, and the summaries
/// of round 0's episodes (what the episode metrics report).
pub struct DynamicDraw {
    pub played: Played,
    pub round_zero: Vec<EpisodeSummary>,
    pub counts: DrawCounts,
}

/// The groups of `episodes` (by id), each with whether its
/// episodes' total rewards differ (std > [`EPS`]).
pub fn drawn_groups(episodes: &[Episode], tags: &[String]) -> Vec<DrawnGroup> {
    let mut rewards: BTreeMap<usize, (usize, Vec<f64>)> = BTreeMap::new();
    for e in episodes {
        let tag = tags.iter().position(|t| *t == e.slot.env_tag).unwrap_or(0);
        let entry = rewards.entry(e.slot.group_id).or_insert((tag, Vec::new()));
        entry.1.push(e.total_reward() as f64);
    }
    rewards
        .into_iter()
        .map(|(group_id, (tag, r))| DrawnGroup {
            tag,
            group_id,
            informative: r.len() > 1 && mean_std(&r).1 > EPS,
        })
        .collect()
}

/// The tags (by place) that have fewer than `wanted[tag]` informative groups in `drawn`.
pub fn short_tags(drawn: &[DrawnGroup], wanted: &[usize]) -> Vec<usize> {
    (0..wanted.len())
        .filter(|&tag| {
            let informative = drawn.iter().filter(|g| g.tag == tag && g.informative);
            informative.count() < wanted[tag]
        })
        .collect()
}

/// The groups each tag trains on: its first `wanted[tag]` informative groups by id (the
/// rounds in order), then, if there are fewer, its first uninformative ones up to
/// `wanted[tag]`; and how many were such fillers.
pub fn kept_groups(drawn: &[DrawnGroup], wanted: &[usize]) -> (BTreeSet<usize>, usize) {
    let mut sorted = drawn.to_vec();
    sorted.sort_by_key(|g| g.group_id);
    let mut kept = BTreeSet::new();
    let mut filled = 0;
    for (tag, &want) in wanted.iter().enumerate() {
        let of_tag = || sorted.iter().filter(move |g| g.tag == tag);
        let informative: Vec<usize> = (of_tag().filter(|g| g.informative))
            .map(|g| g.group_id)
            .take(want)
            .collect();
        let fill = want.saturating_sub(informative.len());
        let fillers: Vec<usize> = (of_tag().filter(|g| !g.informative))
            .map(|g| g.group_id)
            .take(fill)
            .collect();
        filled += fillers.len();
        kept.extend(informative);
        kept.extend(fillers);
    }
    (kept, filled)
}

/// Every worker's drawn groups (this worker's alone when it is the only one).
fn gathered(collective: &Collective, mine: Vec<DrawnGroup>) -> Result<Vec<DrawnGroup>, String> {
    if collective.peers() == 1 {
        return Ok(mine);
    }
    let all = collective
        .gather(&mine)
        .map_err(|e| format!("gathering the workers' dynamic sampling rounds: {e}"))?;
    Ok(all.into_iter().flatten().collect())
}

/// Refuses env sets whose groups have one episode: a lone episode's rewards cannot
/// differ, so every round would drop every group.
pub fn check_groups_to_compare<B: RunBackend>(player: &EnvPlayer<B>) -> Result<(), String> {
    for tag in player.tags() {
        let size = player
            .manager()
            .group_size(tag)
            .map_err(|e| e.to_string())?;
        if size < 2 {
            return Err(format!(
                "`dynamic_sampling` keeps the groups whose rewards differ, but env set `{tag}` \
                 has `group_size: {size}`; give it `group_size` ≥ 2 or remove \
                 `dynamic_sampling`"
            ));
        }
    }
    Ok(())
}

/// Plays step `ctx.step` with dynamic sampling (module doc).
pub fn play_dynamic<B: RunBackend>(
    player: &EnvPlayer<B>,
    ctx: &StepContext,
    collective: &Collective,
    settings: &DynamicSampling,
) -> Result<DynamicDraw, String> {
    let tags = player.tags().to_vec();
    let manager = player.manager();
    let wanted = (tags.iter())
        .map(|t| manager.groups(t).map_err(|e| e.to_string()))
        .collect::<Result<Vec<usize>, String>>()?;
    let shard = Shard {
        worker: ctx.worker,
        workers: ctx.workers,
    };
    let first = player.play(ctx)?;
    let round_zero = player.summaries(&first.episodes);
    let (mut inference, mut faults, version) = (first.inference, first.faults, first.version);
    let mut episodes = first.episodes;
    let mut drawn = gathered(collective, drawn_groups(&episodes, &tags))?;
    let mut rounds = 0;
    for round in 1..=settings.extra_rounds {
        let short = short_tags(&drawn, &wanted);
        if short.is_empty() {
            break;
        }
        let mut slots = Vec::new();
        for &tag in &short {
            let more = manager.round_slots(&tags[tag], ctx.step, shard, round);
            slots.extend(more.map_err(|e| e.to_string())?);
        }
        let played = player.play_slots(slots, ctx.seed, shard)?;
        inference.add(&played.inference);
        faults = merged(faults, played.faults);
        drawn.extend(gathered(collective, drawn_groups(&played.episodes, &tags))?);
        episodes.extend(played.episodes);
        rounds = round;
    }
    let (kept, filled) = kept_groups(&drawn, &wanted);
    let counts = DrawCounts {
        rounds,
        drawn: drawn.len(),
        informative: drawn.iter().filter(|g| g.informative).count(),
        filled,
    };
    episodes.retain(|e| kept.contains(&e.slot.group_id));
    let played = Played {
        episodes,
        inference,
        faults,
        cut_episodes: 0,
        carried_episodes: 0,
        resumed_groups: 0,
        version,
    };
    Ok(DynamicDraw {
        played,
        round_zero,
        counts,
    })
}

/// The faults of two rounds together.
fn merged(a: super::faults::EnvFaults, b: super::faults::EnvFaults) -> super::faults::EnvFaults {
    super::faults::EnvFaults {
        env_errors: a.env_errors + b.env_errors,
        dropped_groups: a.dropped_groups + b.dropped_groups,
        first: a.first.or(b.first),
    }
}

#[cfg(test)]
#[path = "dynamic_sampling_tests.rs"]
mod tests;
