use roll_flow_envs::{EnvInfo, EnvSlot};

use super::*;
use crate::rollout::episode::TurnRecord;

/// An episode of group `group_id` of `tag` whose turns earned `rewards`.
fn episode(tag: &str, group_id: usize, rewards: &[f32]) -> Episode {
    let slot = EnvSlot {
        env_tag: tag.into(),
        group_id,
        group_in_tag: group_id,
        index_in_group: 0,
        seed: 1,
        max_turns: 5,
    };
    let mut e = Episode::start(slot, String::new());
    e.turns = (rewards.iter())
        .map(|&reward| TurnRecord {
            observation: String::new(),
            prompt: Vec::new(),
            reply: vec![1],
            logprobs: vec![-0.5],
            reply_text: String::new(),
            reward,
            info: EnvInfo::default(),
            policy_version: 0,
        })
        .collect();
    e
}

fn group(tag: usize, group_id: usize, informative: bool) -> DrawnGroup {
    DrawnGroup {
        tag,
        group_id,
        informative,
    }
}

#[test]
fn a_group_is_informative_when_its_episodes_total_rewards_differ() {
    let tags = ["a".to_string(), "b".to_string()];
    let episodes = [
        // Group 0 of `a`: totals 1 and 0 → informative.
        episode("a", 0, &[0.0, 1.0]),
        episode("a", 0, &[0.0]),
        // Group 1 of `a`: totals 0.5 and 0.5 (in different turns) → not.
        episode("a", 1, &[0.5]),
        episode("a", 1, &[0.25, 0.25]),
        // Group 2 of `b`: −0.1 twice → not; group 3 of `b`, one episode → not.
        episode("b", 2, &[-0.1]),
        episode("b", 2, &[-0.1]),
        episode("b", 3, &[1.0]),
    ];
    assert_eq!(
        drawn_groups(&episodes, &tags),
        [
            group(0, 0, true),
            group(0, 1, false),
            group(1, 2, false),
            group(1, 3, false)
        ]
    );
}

#[test]
fn rounds_continue_for_the_short_tags_and_keep_the_first_informative_groups() {
    // Tag 0 wants 2 groups, tag 1 wants 1. Round 0 (ids 0-2): tag 0 has one informative
    // group, tag 1 none.
    let wanted = [2, 1];
    let mut drawn = vec![group(0, 0, false), group(0, 1, true), group(1, 2, false)];
    assert_eq!(short_tags(&drawn, &wanted), [0, 1]);
    // Round 1 (ids 3-5): tag 0 gets two more informative groups, tag 1 one.
    drawn.extend([group(0, 3, true), group(0, 4, true), group(1, 5, true)]);
    assert!(short_tags(&drawn, &wanted).is_empty());
    // Tag 0 trains on its first two informative groups in round order (1 and 3, not 4),
    // tag 1 on group 5; nothing filled.
    let (kept, filled) = kept_groups(&drawn, &wanted);
    assert_eq!(kept, BTreeSet::from([1, 3, 5]));
    assert_eq!(filled, 0);
}

#[test]
fn when_the_rounds_run_out_the_first_uninformative_groups_fill_the_step() {
    // Tag 0 wants 3 and found one informative group (4) in ids 0, 2, 4, 6; it keeps 4 and
    // the first two uninformative ones (0, 2).
    let wanted = [3];
    let drawn = [
        group(0, 6, false),
        group(0, 0, false),
        group(0, 4, true),
        group(0, 2, false),
    ];
    assert_eq!(short_tags(&drawn, &wanted), [0]);
    let (kept, filled) = kept_groups(&drawn, &wanted);
    assert_eq!(kept, BTreeSet::from([0, 2, 4]));
    assert_eq!(filled, 2);
    // A tag that lost groups to env faults keeps what it has.
    let (kept, filled) = kept_groups(&[group(0, 1, true)], &[2]);
    assert_eq!((kept, filled), (BTreeSet::from([1]), 0));
}

#[test]
fn settings_are_checked() {
    let opts = roll_flow_engine::spec::ron_options();
    let d: DynamicSampling = opts.from_str("()").unwrap();
    assert_eq!(d.extra_rounds, 4);
    assert!(d.check(0, false).is_ok());
    assert_eq!(
        DynamicSampling { extra_rounds: 0 }
            .check(0, false)
            .unwrap_err(),
        "`dynamic_sampling.extra_rounds` must be in 1..=1024, got 0"
    );
    assert!(d
        .check(1, false)
        .unwrap_err()
        .starts_with("`dynamic_sampling` cannot be combined with `staleness` > 0"));
    assert!(d
        .check(0, true)
        .unwrap_err()
        .starts_with("`dynamic_sampling` cannot be combined with `partial`"));
    assert!(opts
        .from_str::<DynamicSampling>("(extra_round: 2)")
        .is_err());
}
