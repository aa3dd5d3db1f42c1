//! Partial rollouts' early cut (`Rollout(partial: (extra_groups: N))`): a step starts N
//! groups per env tag more than it trains on and keeps the first groups to finish, as
//! ROLL's agentic scheduler returns the first `rollout_batch_size` trajectories and AReaL
//! cuts generation off; a long-tailed episode then no longer holds up the step.
//!
//! Once a tag has as many finished groups as it trains on, its unfinished envs are cut:
//! each is dropped at its next task (its start, or the reply it waited for), and its
//! inference loop is told it is done. A reply already being generated still finishes
//! first (the continuous batcher has no cancel). Which groups finish first depends on
//! timing, so a run with extra groups is not reproducible, and its batches lean to shorter
//! episodes (those finish first); it is off by default. A cut episode is dropped, not
//! continued into the next step.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use roll_flow_envs::manager::EnvSlot;

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

    /// Notes that env `env` finished its episode.
    pub fn env_finished(&self, env: usize) {
        let group = self.group_of[env];
        let mut finished = self.finished();
        finished.left[group] -= 1;
        if finished.left[group] == 0 {
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
            cut.env_finished(env);
        }
        assert!(!cut.is_cut(1) && !cut.is_cut(7));
        // Group 1 finishes: a has two groups, so its last env (group 0's) is cut; b is not.
        cut.env_finished(2);
        cut.env_finished(3);
        assert!(cut.is_cut(1));
        assert!(!cut.is_cut(6));
        cut.env_finished(7);
        assert!(cut.is_cut(6));
        // A group finishing after the cut is not kept: the first to finish are.
        cut.env_finished(1);
        assert_eq!(cut.kept(), [2, 1, 6]);
    }
}
