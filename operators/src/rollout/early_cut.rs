//! Partial rollouts' early cut (`Rollout(partial: (extra_groups: N))`): a step starts N
//! groups per env tag more than it trains on and keeps the first groups to finish, as
//! ROLL's agentic scheduler returns the first `rollout_batch_size` trajectories and AReaL
//! cuts generation off; a long-tailed episode then no longer holds up the step.
//!
//! Once a tag has as many finished groups as it trains on, its unfinished envs are cut:
//! each is dropped at its next task (its start, or the reply it waited for), and its
//! inference loop is told it is done. A reply already being generated still finishes
//! first (the continuous batcher has no cancel) and is played.
//!
//! With `carry` (the default) the groups a step did not keep continue in the next step
//! ([`CarriedGroup`]), as AReaL's interrupted generations do: their finished episodes as
//! they are, the others from where they stood, each turn keeping the policy version that
//! wrote it (a sample is as old as its oldest turn, `policy_version`/`policy_lag`). They
//! take the place of the next step's extra groups (it starts N less the carried ones, so
//! a step never plays more than its own groups and N), take group ids after its own and
//! extra ones, and compete with its groups to finish first. A group continues into one
//! more step at most ([`MAX_CARRIES`]); then it is dropped. Without `carry`, groups not
//! kept are dropped at once and every sample is on-policy.
//!
//! Which groups finish first depends on timing, so a run with extra groups is not
//! reproducible, and its batches lean to shorter episodes (those finish first); it is off
//! by default. A run resumed from a checkpoint starts without the carried groups.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use roll_flow_envs::manager::{EnvManager, EnvSlot, Shard};

use super::episode::Episode;
use super::episode_run::{EpisodeOutcome, Unfinished};

/// Which groups of a step have finished, and whether each tag is cut.
pub struct EarlyCut {
    /// Each env's group (an index into the groups below), in slot order.
    group_of: Vec<usize>,
    /// Each group's tag (an index into `keep`) and global id.
    groups: Vec<(usize, usize)>,
    /// Groups each tag trains on.
    keep: Vec<usize>,
    state: Mutex<Finished>,
}

struct Finished {
    /// Envs of each group still playing.
    left: Vec<usize>,
    /// Groups an env fault lost an episode of: they never count as finished.
    lost: Vec<bool>,
    /// Each tag's finished groups, in the order they finished.
    order: Vec<Vec<usize>>,
}

impl EarlyCut {
    /// The cut of `slots` (a step's, in order), keeping `keep[tag]` groups of each tag.
    pub fn new(slots: &[EnvSlot], keep: &HashMap<String, usize>) -> EarlyCut {
        let mut tags: Vec<&str> = Vec::new();
        let mut index: HashMap<usize, usize> = HashMap::new();
        let (mut groups, mut group_of, mut left) = (Vec::new(), Vec::new(), Vec::new());
        for slot in slots {
            let tag = match tags.iter().position(|t| *t == slot.env_tag) {
                Some(t) => t,
                None => {
                    tags.push(&slot.env_tag);
                    tags.len() - 1
                }
            };
            let group = *index.entry(slot.group_id).or_insert_with(|| {
                groups.push((tag, slot.group_id));
                left.push(0);
                groups.len() - 1
            });
            left[group] += 1;
            group_of.push(group);
        }
        let keep = tags
            .iter()
            .map(|t| keep.get(*t).copied().unwrap_or(0))
            .collect();
        EarlyCut {
            group_of,
            groups,
            keep,
            state: Mutex::new(Finished {
                lost: vec![false; left.len()],
                left,
                order: vec![Vec::new(); tags.len()],
            }),
        }
    }

    fn finished(&self) -> std::sync::MutexGuard<'_, Finished> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether env `env`'s tag has its groups, so its unfinished envs are cut.
    pub fn is_cut(&self, env: usize) -> bool {
        let tag = self.groups[self.group_of[env]].0;
        self.finished().order[tag].len() >= self.keep[tag]
    }

    /// Notes that env `env` finished its episode, or lost it to an env fault (`lost`: its
    /// group is dropped, so it never counts among the groups kept).
    pub fn env_finished(&self, env: usize, lost: bool) {
        let group = self.group_of[env];
        let mut finished = self.finished();
        finished.left[group] -= 1;
        finished.lost[group] |= lost;
        if finished.left[group] == 0 && !finished.lost[group] {
            finished.order[self.groups[group].0].push(group);
        }
    }

    /// The global ids of the groups kept: each tag's first `keep` to finish.
    pub fn kept(&self) -> Vec<usize> {
        let finished = self.finished();
        (finished.order.iter().zip(&self.keep))
            .flat_map(|(order, &keep)| order.iter().take(keep))
            .map(|&g| self.groups[g].1)
            .collect()
    }
}

/// Steps a group not kept may continue into.
pub const MAX_CARRIES: u32 = 1;

/// A group a partial rollout did not keep, to continue in the next step.
pub struct CarriedGroup {
    /// Steps it has been carried into so far, this one included.
    pub times: u32,
    pub members: Vec<Carried>,
}

/// A member of a carried group.
pub enum Carried {
    Unfinished(Unfinished),
    Finished(Box<Episode>),
}

impl Carried {
    pub fn slot(&self) -> &EnvSlot {
        match self {
            Carried::Unfinished(u) => u.slot(),
            Carried::Finished(e) => &e.slot,
        }
    }
}

/// The carried groups of a step played by `version` on `shard`, in one list: each group
/// takes a group id after the step's own and extra ones (`total_groups() + tags · extra`
/// on, interleaved over workers so no two workers share one) and a `group_in_tag` after
/// them, so it is never counted among the groups a tag trains on. Also the steps each
/// group id has been carried.
pub fn place_carried(
    groups: Vec<CarriedGroup>,
    manager: &EnvManager,
    shard: Shard,
    extra: usize,
    version: u64,
) -> (Vec<Carried>, HashMap<usize, u32>) {
    let first = manager.total_groups() + manager.tags().count() * extra;
    let (mut members, mut times) = (Vec::new(), HashMap::new());
    for (c, group) in groups.into_iter().enumerate() {
        let group_id = first + c * shard.workers + shard.worker;
        times.insert(group_id, group.times);
        for mut member in group.members {
            let tag = member.slot().env_tag.clone();
            let group_in_tag = manager.groups(&tag).unwrap_or(0) + extra + c;
            match &mut member {
                Carried::Unfinished(u) => u.continue_as(group_id, group_in_tag, version),
                Carried::Finished(e) => {
                    e.slot.group_id = group_id;
                    e.slot.group_in_tag = group_in_tag;
                }
            }
            members.push(member);
        }
    }
    (members, times)
}

/// What a partial step did with the groups it did not keep.
#[derive(Default)]
pub struct NotKept {
    /// Groups to continue in the next step.
    pub carry: Vec<CarriedGroup>,
    /// Episodes dropped (no carry, carried too often, or an env fault lost another
    /// episode of the group; the lost ones count as env errors).
    pub dropped: usize,
    /// Episodes carried to the next step.
    pub carried: usize,
    /// Groups kept this step that began in an earlier one.
    pub resumed_groups: usize,
}

/// Splits a partial step's outcomes into those of the `kept` groups (returned, in order)
/// and the rest, carried (with `carry`, `times` saying how often each group was) or dropped.
pub fn split_outcomes(
    outcomes: Vec<EpisodeOutcome>,
    kept: &[usize],
    times: &HashMap<usize, u32>,
    carry: bool,
) -> (Vec<EpisodeOutcome>, NotKept) {
    let kept: HashSet<usize> = kept.iter().copied().collect();
    let mut not_kept = NotKept {
        resumed_groups: times.keys().filter(|g| kept.contains(g)).count(),
        ..NotKept::default()
    };
    let mut keep = Vec::new();
    let mut rest: BTreeMap<usize, (usize, Vec<Carried>)> = BTreeMap::new();
    for outcome in outcomes {
        let group = match &outcome {
            EpisodeOutcome::Played(e) => e.slot.group_id,
            EpisodeOutcome::Lost { slot, .. } => slot.group_id,
            EpisodeOutcome::Unfinished(u) => u.slot().group_id,
        };
        if kept.contains(&group) {
            keep.push(outcome);
            continue;
        }
        let (lost, members) = rest.entry(group).or_default();
        match outcome {
            EpisodeOutcome::Played(e) => members.push(Carried::Finished(e)),
            EpisodeOutcome::Unfinished(u) => members.push(Carried::Unfinished(u)),
            // A lost episode goes with the kept outcomes, so the step's fault counts see
            // it; its group is dropped.
            lost_episode @ EpisodeOutcome::Lost { .. } => {
                *lost += 1;
                keep.push(lost_episode);
            }
        }
    }
    for (group, (lost, members)) in rest {
        let times = times.get(&group).copied().unwrap_or(0) + 1;
        if carry && lost == 0 && times <= MAX_CARRIES {
            not_kept.carried += members.len();
            not_kept.carry.push(CarriedGroup { times, members });
        } else {
            not_kept.dropped += members.len();
        }
    }
    (keep, not_kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(tag: &str, group_id: usize, index_in_group: usize) -> EnvSlot {
        EnvSlot {
            env_tag: tag.into(),
            group_id,
            group_in_tag: group_id,
            index_in_group,
            seed: 0,
            max_turns: 1,
        }
    }

    #[test]
    fn a_tag_is_cut_once_its_groups_finished_and_the_first_are_kept() {
        // Tag a: groups 0, 1, 2 of two envs (keep 2); tag b: groups 5, 6 of one (keep 1).
        let slots = [
            slot("a", 0, 0),
            slot("a", 0, 1),
            slot("a", 1, 0),
            slot("a", 1, 1),
            slot("a", 2, 0),
            slot("a", 2, 1),
            slot("b", 5, 0),
            slot("b", 6, 0),
        ];
        let keep = HashMap::from([("a".to_string(), 2), ("b".to_string(), 1)]);
        let cut = EarlyCut::new(&slots, &keep);
        // Group 2 finishes first, then one env of group 0: a is not cut yet.
        for env in [4, 5, 0] {
            cut.env_finished(env, false);
        }
        assert!(!cut.is_cut(1) && !cut.is_cut(7));
        // Group 1 finishes: a has two groups, so its last env (group 0's) is cut; b is not.
        cut.env_finished(2, false);
        cut.env_finished(3, false);
        assert!(cut.is_cut(1));
        assert!(!cut.is_cut(6));
        // b: group 6 lost its episode, so it does not count; group 5 then does.
        cut.env_finished(7, true);
        assert!(!cut.is_cut(6));
        cut.env_finished(6, false);
        assert!(cut.is_cut(7));
        // A group finishing after the cut is not kept: the first to finish are.
        cut.env_finished(1, false);
        assert_eq!(cut.kept(), [2, 1, 5]);
    }

    #[test]
    fn groups_not_kept_are_carried_once_unless_a_fault_lost_one_of_their_episodes() {
        let played =
            |g| EpisodeOutcome::Played(Box::new(Episode::start(slot("a", g, 0), "".into())));
        let lost = |g| EpisodeOutcome::Lost {
            slot: slot("a", g, 1),
            reason: "server gone".into(),
        };
        // Kept: 0 and 1. Not kept: 2 (fresh), 3 (carried once already), 4 (a lost episode).
        let outcomes = vec![
            played(0),
            played(1),
            played(2),
            played(3),
            played(4),
            lost(4),
        ];
        let times = HashMap::from([(1, 1), (3, 1)]);
        let (kept, not_kept) = split_outcomes(outcomes, &[0, 1], &times, true);
        assert_eq!(kept.len(), 3);
        assert!(matches!(kept[2], EpisodeOutcome::Lost { .. }));
        assert_eq!(
            not_kept.resumed_groups, 1,
            "group 1 began in an earlier step"
        );
        assert_eq!(not_kept.carry.len(), 1);
        assert_eq!(not_kept.carry[0].times, 1);
        assert_eq!(not_kept.carry[0].members[0].slot().group_id, 2);
        // Group 3's episode and group 4's played one are dropped; the lost one is returned
        // with the kept, for the fault counts.
        assert_eq!((not_kept.carried, not_kept.dropped), (1, 2));
        // Without carry every group not kept is dropped.
        let outcomes = vec![played(0), played(2)];
        let (_, not_kept) = split_outcomes(outcomes, &[0], &HashMap::new(), false);
        assert_eq!((not_kept.carry.len(), not_kept.dropped), (0, 1));
    }
}
