//! The env manager (ROLL's): `groups × group_size` envs per env tag, the seed each group
//! plays, and which worker runs which group.
//!
//! - Tags and partition: every `envs:` entry is one env tag with its own `groups` and
//!   `group_size`; together they partition the global group ids `0..total_groups()` in
//!   declaration order (ROLL's `num_groups_partition`).
//! - Groups: every env of a group resets with the group's seed, so the group shares one
//!   initial state (what group-normalised advantages compare).
//! - Training seeds: `mix(base_seed, tag, step, group)` with SplitMix64 — a new, stable
//!   episode per (step, group), independent of other tags and of worker count.
//! - Validation seeds: an entry with `seed: Some(s)` plays seed `s + group` at every
//!   step, so eval numbers are comparable across steps (and `roll-flow play --seed s`
//!   replays group 0).
//! - Sharding: worker `w` of `workers` runs the groups whose global id ≡ w (mod workers),
//!   i.e. groups w, w + workers, … — every group stays whole on one worker.
//! - Extra groups (partial rollouts, [`EnvManager::slots_with_extra`]): `extra` groups per
//!   tag more, `group_in_tag` from `groups` on, seeded as any group, their global ids after
//!   every tag's own (`total_groups() + tag's place · extra + k`), the same whichever of
//!   them a step plays.
//! - Rounds (dynamic sampling, [`EnvManager::round_slots`]): round r ≥ 1 of a step plays
//!   each of a tag's `groups` again with new seeds, `group_in_tag = r·groups + k`, seeded
//!   as any group (a fixed function of step and round), their global ids
//!   `r·total_groups() + first group of the tag + k`.

use roll_flow_engine::stable_hash::{combine, fnv1a, FNV_OFFSET};
use roll_flow_engine::EnvSet;

use crate::env::Env;

use crate::config::EnvConfig;

use crate::error::EnvError;

/// One env to run this step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvSlot {
    /// The `envs:` entry name; samples carry it as their env tag.
    pub env_tag: String,
    /// Global group id, unique across tags (the group id of samples).
    pub group_id: usize,
    /// Group index within its tag.
    pub group_in_tag: usize,
    /// Position of this env within its group, `0..group_size`.
    pub index_in_group: usize,
    /// The seed to `reset` with; equal within a group.
    pub seed: u64,
    /// Turn limit of the episode.
    pub max_turns: usize,
}

/// Which share of the groups a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub worker: usize,
    pub workers: usize,
}

impl Shard {
    /// A single worker running everything.
    pub const ALL: Shard = Shard {
        worker: 0,
        workers: 1,
    };

    fn owns(self, group_id: usize) -> bool {
        group_id % self.workers == self.worker
    }
}

struct ManagedSet {
    tag: String,
    set: EnvSet<EnvConfig>,
    first_group: usize,
    tag_hash: u64,
    max_turns: usize,
    /// The env built to check the entry, kept so that an env server's processes
    /// ([`crate::process`]) run as long as the manager, not one step at a time.
    _probe: Box<dyn Env>,
}

/// All env sets of a pipeline (or the subset a rollout or eval node uses).
pub struct EnvManager {
    sets: Vec<ManagedSet>,
    base_seed: u64,
}

/// FNV-1a: a stable hash of the tag name (std's hasher may change between releases).
fn tag_hash(tag: &str) -> u64 {
    fnv1a(FNV_OFFSET, tag.as_bytes())
}

fn invalid(tag: &str, reason: String) -> EnvError {
    EnvError::Spec(format!("envs.\"{tag}\": {reason}"))
}

impl EnvManager {
    /// Validates every entry (building one env of each) and lays out the groups.
    pub fn new<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a EnvSet<EnvConfig>)>,
        base_seed: u64,
    ) -> Result<EnvManager, EnvError> {
        let mut sets = Vec::new();
        let mut first_group = 0;
        for (tag, set) in entries {
            if set.groups == 0 || set.group_size == 0 {
                return Err(invalid(tag, "`groups` and `group_size` must be ≥ 1".into()));
            }
            if set.max_turns == Some(0) {
                return Err(invalid(tag, "`max_turns` must be ≥ 1".into()));
            }
            let env = set.env.build()?;
            let max_turns = set.max_turns.unwrap_or_else(|| env.default_max_turns());
            sets.push(ManagedSet {
                tag: tag.to_string(),
                set: set.clone(),
                first_group,
                tag_hash: tag_hash(tag),
                max_turns,
                _probe: env,
            });
            first_group += set.groups;
        }
        Ok(EnvManager { sets, base_seed })
    }

    /// The env tags, in declaration order.
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.sets.iter().map(|s| s.tag.as_str())
    }

    /// Groups over all tags.
    pub fn total_groups(&self) -> usize {
        self.sets.iter().map(|s| s.set.groups).sum()
    }

    /// Envs over all tags (groups × group_size, summed).
    pub fn total_envs(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.set.groups * s.set.group_size)
            .sum()
    }

    fn set(&self, tag: &str) -> Result<&ManagedSet, EnvError> {
        self.sets.iter().find(|s| s.tag == tag).ok_or_else(|| {
            let known: Vec<&str> = self.tags().collect();
            EnvError::Spec(format!(
                "unknown env tag `{tag}`; known: {}",
                known.join(", ")
            ))
        })
    }

    /// The env config of `tag`.
    pub fn config(&self, tag: &str) -> Result<&EnvConfig, EnvError> {
        Ok(&self.set(tag)?.set.env)
    }

    /// A fresh env for `tag` (envs are reusable: reset it for each slot).
    pub fn build_env(&self, tag: &str) -> Result<Box<dyn Env>, EnvError> {
        self.set(tag)?.set.env.build()
    }

    /// The groups of `tag` (a step's own, without extra groups).
    pub fn groups(&self, tag: &str) -> Result<usize, EnvError> {
        Ok(self.set(tag)?.set.groups)
    }

    /// The group size of `tag`.
    pub fn group_size(&self, tag: &str) -> Result<usize, EnvError> {
        Ok(self.set(tag)?.set.group_size)
    }

    /// The seed group `group_in_tag` of `tag` plays at `step`.
    pub fn group_seed(&self, tag: &str, step: u64, group_in_tag: usize) -> Result<u64, EnvError> {
        Ok(self.seed_of(self.set(tag)?, step, group_in_tag))
    }

    /// The slots of one group: `group_size` episodes of `managed`'s env sharing the group's
    /// seed for `step`.
    fn group_slots<'a>(
        &self,
        managed: &'a ManagedSet,
        step: u64,
        group_id: usize,
        group_in_tag: usize,
    ) -> impl Iterator<Item = EnvSlot> + 'a {
        let seed = self.seed_of(managed, step, group_in_tag);
        (0..managed.set.group_size).map(move |index_in_group| EnvSlot {
            env_tag: managed.tag.clone(),
            group_id,
            group_in_tag,
            index_in_group,
            seed,
            max_turns: managed.max_turns,
        })
    }

    fn seed_of(&self, managed: &ManagedSet, step: u64, group_in_tag: usize) -> u64 {
        match managed.set.seed {
            Some(fixed) => fixed.wrapping_add(group_in_tag as u64),
            None => {
                let seed = combine(self.base_seed, managed.tag_hash);
                combine(combine(seed, step), group_in_tag as u64)
            }
        }
    }

    fn push_slots(&self, managed: &ManagedSet, step: u64, shard: Shard, out: &mut Vec<EnvSlot>) {
        self.push_groups(managed, step, shard, (0, 0), out);
    }

    /// The slots of `tag`'s own groups and of its extra groups `skipped..extra` (each tag
    /// has `extra` extra group ids, whichever of them are played).
    fn push_groups(
        &self,
        managed: &ManagedSet,
        step: u64,
        shard: Shard,
        (extra, skipped): (usize, usize),
        out: &mut Vec<EnvSlot>,
    ) {
        let own = managed.set.groups;
        let place = self.sets.iter().position(|s| s.tag == managed.tag);
        let extra_groups = (own + skipped.min(extra))..(own + extra);
        for group_in_tag in (0..own).chain(extra_groups) {
            let group_id = match group_in_tag.checked_sub(own) {
                None => managed.first_group + group_in_tag,
                Some(k) => self.total_groups() + place.unwrap_or(0) * extra + k,
            };
            if !shard.owns(group_id) {
                continue;
            }
            out.extend(self.group_slots(managed, step, group_id, group_in_tag));
        }
    }

    /// Where `slot` stands among the step's slots of every worker (tag by tag, group by
    /// group): the index it has in a one-worker run's list, so that what is drawn per
    /// slot (its sampling seed) does not depend on the worker count.
    pub fn slot_position(&self, slot: &EnvSlot) -> usize {
        let total = self.total_groups();
        if slot.group_id >= total {
            // An extra group: after every own slot, spaced by the largest group.
            let widest = self.sets.iter().map(|s| s.set.group_size).max();
            let widest = widest.unwrap_or(1);
            return self.total_envs() + (slot.group_id - total) * widest + slot.index_in_group;
        }
        let mut before = 0;
        for managed in &self.sets {
            let (groups, size) = (managed.set.groups, managed.set.group_size);
            let first = managed.first_group;
            if (first..first + groups).contains(&slot.group_id) {
                return before + (slot.group_id - first) * size + slot.index_in_group;
            }
            before += groups * size;
        }
        before + slot.index_in_group
    }

    /// This worker's env slots of every tag for `step`.
    pub fn slots(&self, step: u64, shard: Shard) -> Result<Vec<EnvSlot>, EnvError> {
        check_shard(shard)?;
        let mut out = Vec::new();
        for managed in &self.sets {
            self.push_slots(managed, step, shard, &mut out);
        }
        Ok(out)
    }

    /// This worker's env slots of one tag for `step`.
    pub fn slots_for(&self, tag: &str, step: u64, shard: Shard) -> Result<Vec<EnvSlot>, EnvError> {
        self.slots_with_extra(tag, step, shard, (0, 0))
    }

    /// This worker's env slots of one tag for `step`, with `extra` groups more, less the
    /// first `skipped` of them (partial rollouts: see the module doc).
    pub fn slots_with_extra(
        &self,
        tag: &str,
        step: u64,
        shard: Shard,
        (extra, skipped): (usize, usize),
    ) -> Result<Vec<EnvSlot>, EnvError> {
        check_shard(shard)?;
        let managed = self.set(tag)?;
        let mut out = Vec::new();
        self.push_groups(managed, step, shard, (extra, skipped), &mut out);
        Ok(out)
    }

    /// This worker's env slots of one tag in round `round` ≥ 1 of `step`: the tag's
    /// `groups` groups once more, with seeds and ids of their own (see the module doc).
    pub fn round_slots(
        &self,
        tag: &str,
        step: u64,
        shard: Shard,
        round: usize,
    ) -> Result<Vec<EnvSlot>, EnvError> {
        check_shard(shard)?;
        let managed = self.set(tag)?;
        let groups = managed.set.groups;
        let mut out = Vec::new();
        for k in 0..groups {
            let group_id = round * self.total_groups() + managed.first_group + k;
            if !shard.owns(group_id) {
                continue;
            }
            let group_in_tag = round * groups + k;
            out.extend(self.group_slots(managed, step, group_id, group_in_tag));
        }
        Ok(out)
    }
}

fn check_shard(shard: Shard) -> Result<(), EnvError> {
    if shard.workers == 0 || shard.worker >= shard.workers {
        return Err(EnvError::Spec(format!(
            "worker {} of {} does not exist",
            shard.worker, shard.workers
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
