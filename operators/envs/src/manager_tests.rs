//! Env manager: group seeds, fixed validation seeds, partition and sharding.

use std::collections::{BTreeMap, BTreeSet};

use roll_flow_engine::EnvSet;

use super::{EnvManager, Shard};
use crate::config::{ron_options, EnvConfig};

fn set(text: &str) -> EnvSet<EnvConfig> {
    ron_options().from_str(text).unwrap()
}

fn manager() -> EnvManager {
    let train = set("(env: FrozenLake(size: 4), groups: 5, group_size: 3, max_turns: 8)");
    let val = set("(env: Sokoban(), groups: 4, group_size: 1, seed: 1000)");
    let entries = [("train", &train), ("val", &val)];
    EnvManager::new(entries.iter().map(|(t, s)| (*t, *s)), 42).unwrap()
}

#[test]
fn groups_share_a_seed_and_groups_differ() {
    let m = manager();
    let slots = m.slots_for("train", 3, Shard::ALL).unwrap();
    assert_eq!(slots.len(), 15);
    let mut seeds: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
    for slot in &slots {
        seeds.entry(slot.group_id).or_default().insert(slot.seed);
        assert_eq!(slot.max_turns, 8);
    }
    assert!(seeds.values().all(|s| s.len() == 1), "one seed per group");
    let distinct: BTreeSet<u64> = seeds.values().flatten().copied().collect();
    assert_eq!(distinct.len(), 5, "groups play different seeds");
    let indices: Vec<usize> = slots.iter().map(|s| s.index_in_group).collect();
    assert_eq!(indices, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
}

#[test]
fn training_seeds_are_deterministic_and_change_with_step() {
    let (a, b) = (manager(), manager());
    assert_eq!(
        a.slots(7, Shard::ALL).unwrap(),
        b.slots(7, Shard::ALL).unwrap()
    );
    let s7 = a.group_seed("train", 7, 0).unwrap();
    let s8 = a.group_seed("train", 8, 0).unwrap();
    assert_ne!(s7, s8);
    let other_base = EnvManager::new([("train", &set("(env: Bandit(), groups: 1)"))], 43).unwrap();
    assert_ne!(other_base.group_seed("train", 7, 0).unwrap(), s7);
}

#[test]
fn validation_seeds_are_fixed_across_steps() {
    let m = manager();
    for step in [0, 1, 50, 10_000] {
        let seeds: Vec<u64> = m
            .slots_for("val", step, Shard::ALL)
            .unwrap()
            .iter()
            .map(|s| s.seed)
            .collect();
        assert_eq!(seeds, [1000, 1001, 1002, 1003]);
    }
    // Sokoban's own default turn limit applies when the entry sets none.
    assert_eq!(m.slots_for("val", 0, Shard::ALL).unwrap()[0].max_turns, 5);
}

#[test]
fn partition_gives_global_group_ids_in_declaration_order() {
    let m = manager();
    assert_eq!((m.total_groups(), m.total_envs()), (9, 19));
    let ids: BTreeSet<usize> = m
        .slots(0, Shard::ALL)
        .unwrap()
        .iter()
        .map(|s| s.group_id)
        .collect();
    assert_eq!(ids, (0..9).collect());
    let val_ids: Vec<usize> = m
        .slots_for("val", 0, Shard::ALL)
        .unwrap()
        .iter()
        .map(|s| s.group_id)
        .collect();
    assert_eq!(val_ids, [5, 6, 7, 8]);
    assert_eq!(m.tags().collect::<Vec<_>>(), ["train", "val"]);
}

#[test]
fn sharding_splits_whole_groups_round_robin() {
    let m = manager();
    let all = m.slots(2, Shard::ALL).unwrap();
    let mut union = Vec::new();
    for worker in 0..3 {
        let shard = m.slots(2, Shard { worker, workers: 3 }).unwrap();
        let groups: BTreeSet<usize> = shard.iter().map(|s| s.group_id).collect();
        let expected: BTreeSet<usize> = (worker..9).step_by(3).collect();
        assert_eq!(groups, expected, "worker {worker}");
        union.extend(shard);
    }
    union.sort_by_key(|s| (s.group_id, s.index_in_group));
    assert_eq!(union, all, "shards partition the slots exactly");
    assert!(m
        .slots(
            0,
            Shard {
                worker: 3,
                workers: 3
            }
        )
        .is_err());
    assert!(m
        .slots(
            0,
            Shard {
                worker: 0,
                workers: 0
            }
        )
        .is_err());
}

#[test]
fn group_members_reset_to_the_same_state() {
    let m = manager();
    for slot_group in m.slots_for("train", 11, Shard::ALL).unwrap().chunks(3) {
        let observations: BTreeSet<String> = slot_group
            .iter()
            .map(|slot| {
                let mut env = m.build_env(&slot.env_tag).unwrap();
                env.reset(slot.seed).unwrap().observation
            })
            .collect();
        assert_eq!(observations.len(), 1);
    }
}

#[test]
fn bad_entries_are_refused() {
    let zero = set("(env: Bandit(), groups: 0)");
    assert!(EnvManager::new([("t", &zero)], 0).is_err());
    let turns = set("(env: Bandit(), groups: 1, max_turns: 0)");
    assert!(EnvManager::new([("t", &turns)], 0).is_err());
    let bad_env = set("(env: FrozenLake(p: 2.0), groups: 1)");
    let message = EnvManager::new([("t", &bad_env)], 0)
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("`p`"), "{message}");
    let m = manager();
    let unknown = m.slots_for("test", 0, Shard::ALL).unwrap_err().to_string();
    assert!(
        unknown.contains("test") && unknown.contains("train"),
        "{unknown}"
    );
}

#[test]
fn a_slot_position_is_its_index_in_the_one_worker_list() {
    let m = manager();
    let all = m.slots(1, Shard::ALL).unwrap();
    for (i, slot) in all.iter().enumerate() {
        assert_eq!(m.slot_position(slot), i, "{slot:?}");
    }
    // The same on every worker of a sharded step: 15 train slots, then 4 val ones.
    let shard = m
        .slots(
            1,
            Shard {
                worker: 1,
                workers: 2,
            },
        )
        .unwrap();
    let positions: Vec<usize> = shard.iter().map(|s| m.slot_position(s)).collect();
    assert_eq!(positions, vec![3, 4, 5, 9, 10, 11, 15, 17]);
}

#[test]
fn extra_groups_come_after_every_own_group_with_seeds_and_places_of_their_own() {
    let m = manager(); // train: 5 groups of 3 (ids 0-4); val: 4 groups of 1 (ids 5-8)
    let own = m.slots_for("train", 2, Shard::ALL).unwrap();
    let train = m.slots_with_extra("train", 2, Shard::ALL, (2, 0)).unwrap();
    let val = m.slots_with_extra("val", 2, Shard::ALL, (2, 0)).unwrap();
    assert_eq!(train[..15], own[..], "the own groups are unchanged");
    // Extra ids follow all 9 own groups: train's 9 and 10, val's 11 and 12.
    let ids = |slots: &[super::EnvSlot]| -> Vec<(usize, usize)> {
        slots.iter().map(|s| (s.group_id, s.group_in_tag)).collect()
    };
    assert_eq!(
        ids(&train[15..]),
        [(9, 5), (9, 5), (9, 5), (10, 6), (10, 6), (10, 6)]
    );
    assert_eq!(ids(&val[4..]), [(11, 4), (12, 5)]);
    // Seeded as any group: a new seed per training group, `seed + group` for validation.
    let seeds: BTreeSet<u64> = train.iter().map(|s| s.seed).collect();
    assert_eq!(seeds.len(), 7);
    assert_eq!(val[4].seed, 1004);
    // Places after the 19 own slots, spaced by the widest group (3): no two alike.
    let places: Vec<usize> = train[15..]
        .iter()
        .chain(&val[4..])
        .map(|s| m.slot_position(s))
        .collect();
    assert_eq!(places, [19, 20, 21, 22, 23, 24, 25, 28]);
    // Sharded: worker 1 of 2 runs the odd ids, extra ones included.
    let shard = Shard {
        worker: 1,
        workers: 2,
    };
    let odd = m.slots_with_extra("train", 2, shard, (2, 0)).unwrap();
    let odd_ids: BTreeSet<usize> = odd.iter().map(|s| s.group_id).collect();
    assert_eq!(odd_ids, BTreeSet::from([1, 3, 9]));
    // A step that plays only the last extra group (the first gave way to a carried one)
    // keeps the ids: val's second extra group is 12 whichever of train's are played.
    let last = m.slots_with_extra("train", 2, Shard::ALL, (2, 1)).unwrap();
    assert_eq!(ids(&last[15..]), [(10, 6), (10, 6), (10, 6)]);
    let val_last = m.slots_with_extra("val", 2, Shard::ALL, (2, 1)).unwrap();
    assert_eq!(ids(&val_last[4..]), [(12, 5)]);
}

#[test]
fn dynamic_sampling_rounds_have_their_own_seeds_ids_and_places() {
    let m = manager(); // train: 5 groups of 3 (ids 0-4); val: 4 groups of 1 (ids 5-8)
    let own = m.slots_for("train", 2, Shard::ALL).unwrap();
    let r1 = m.round_slots("train", 2, Shard::ALL, 1).unwrap();
    let r2 = m.round_slots("train", 2, Shard::ALL, 2).unwrap();
    let ids = |slots: &[super::EnvSlot]| -> Vec<(usize, usize)> {
        slots
            .iter()
            .step_by(3)
            .map(|s| (s.group_id, s.group_in_tag))
            .collect()
    };
    // Round r: ids r·9 + k, group_in_tag r·5 + k.
    assert_eq!(ids(&r1), [(9, 5), (10, 6), (11, 7), (12, 8), (13, 9)]);
    assert_eq!(ids(&r2), [(18, 10), (19, 11), (20, 12), (21, 13), (22, 14)]);
    // Each group a seed of its own, the same for its 3 members; a fixed function of
    // step and round: asked again, the same seeds.
    let seeds: BTreeSet<u64> = own.iter().chain(&r1).chain(&r2).map(|s| s.seed).collect();
    assert_eq!(seeds.len(), 15);
    assert_eq!(r1, m.round_slots("train", 2, Shard::ALL, 1).unwrap());
    assert_ne!(
        r1[0].seed,
        m.round_slots("train", 3, Shard::ALL, 1).unwrap()[0].seed
    );
    // Round 1 of `val` (first group 5): ids 14-17, validation seeds `seed + group_in_tag`.
    let val = m.round_slots("val", 2, Shard::ALL, 1).unwrap();
    assert_eq!(
        val.iter().map(|s| s.group_id).collect::<Vec<_>>(),
        [14, 15, 16, 17]
    );
    assert_eq!(val[0].seed, 1004);
    // No two slots of a step share a place among the slots.
    let mut places: Vec<usize> = own
        .iter()
        .chain(&r1)
        .chain(&r2)
        .chain(&val)
        .map(|s| m.slot_position(s))
        .collect();
    let n = places.len();
    places.sort_unstable();
    places.dedup();
    assert_eq!(places.len(), n);
    // Sharded as any group: worker 1 of 2 plays the odd ids.
    let shard = Shard {
        worker: 1,
        workers: 2,
    };
    let odd: BTreeSet<usize> = (m.round_slots("train", 2, shard, 1).unwrap().iter())
        .map(|s| s.group_id)
        .collect();
    assert_eq!(odd, BTreeSet::from([9, 11, 13]));
}
