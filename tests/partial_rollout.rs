//! Partial rollouts through the binary (`Rollout(partial: (extra_groups: N))`, shipped
//! FrozenLake files shrunk to 2 groups of 2): each step starts N groups more than it trains
//! on and keeps as many whole groups as without them; the groups not kept are dropped
//! (`carry: false`) or continue in the next step, where they count as groups to keep; and
//! validation refuses no extra group, and a π_old the carried turns make wrong.

mod common;

use common::{assert_ok, metrics, roll_flow, run};

/// The shrunk files' train set: 2 groups of 2 ([`common::tiny`]).
const GROUPS: f64 = 2.0;
const GROUP_SIZE: f64 = 2.0;

fn partial(settings: &str) -> String {
    format!("nodes.rollout.partial=({settings})")
}

fn number(record: &serde_json::Map<String, serde_json::Value>, key: &str) -> f64 {
    record[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {record:?}"))
}

#[test]
fn without_carry_the_groups_not_kept_are_dropped_and_the_step_stays_on_policy() {
    let dir = tempfile::tempdir().unwrap();
    let file = "pipelines/frozen_lake_starpo.ron";
    let (plain, extra) = (dir.path().join("plain"), dir.path().join("extra"));
    let cut = partial("extra_groups: 3, carry: false");
    assert_ok(&run(file, &plain, &["--steps", "3"]));
    assert_ok(&run(file, &extra, &["--steps", "3", "--set", &cut]));
    for (p, e) in metrics(&plain).iter().zip(metrics(&extra)) {
        // Trajectory-wise: a sample per episode, 2 groups of 2 with or without extra ones.
        assert_eq!(e["rollout/samples"], p["rollout/samples"]);
        assert_eq!(number(&e, "rollout/samples"), GROUPS * GROUP_SIZE);
        // The 3 groups not kept, whole: cut off, or finished after the step had its 2.
        assert_eq!(number(&e, "rollout/cut_episodes"), 3.0 * GROUP_SIZE);
        assert_eq!(number(&e, "rollout/carried_episodes"), 0.0);
        assert_eq!(number(&e, "rollout/resumed_groups"), 0.0);
        assert!(
            p.get("rollout/cut_episodes").is_none(),
            "reported only when on"
        );
    }
}

#[test]
fn carried_groups_continue_in_the_next_step_and_count_among_its_groups() {
    let dir = tempfile::tempdir().unwrap();
    // π_old from a LogProb node and the decoupled loss, as carried turns need.
    let file = "pipelines/frozen_lake_starpo_async.ron";
    let out = dir.path().join("carry");
    let args = ["--steps", "8", "--set", "nodes.rollout.staleness=0"];
    let carry = partial("extra_groups: 2");
    assert_ok(&run(file, &out, &[&args[..], &["--set", &carry]].concat()));
    let records = metrics(&out);
    let mut carried_in = 0.0;
    let mut resumed = 0.0;
    for record in &records {
        assert_eq!(number(record, "rollout/samples"), GROUPS * GROUP_SIZE);
        // A step plays its 2 groups and 2 more: the groups carried in, and fresh extra ones
        // for the rest. The 2 not kept are carried on (once) or dropped.
        let (cut, carried) = (
            number(record, "rollout/cut_episodes"),
            number(record, "rollout/carried_episodes"),
        );
        assert_eq!(cut + carried, 2.0 * GROUP_SIZE, "{record:?}");
        let kept_in = number(record, "rollout/resumed_groups");
        assert!(kept_in * GROUP_SIZE <= carried_in, "{record:?}");
        resumed += kept_in;
        carried_in = carried;
    }
    assert!(resumed > 0.0, "no carried group was ever kept in 8 steps");
}

#[test]
fn a_step_wise_partial_rollout_trains_on_whole_groups() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gigpo");
    let file = "pipelines/frozen_lake_gigpo.ron";
    let loss = "nodes.actor_step.loss=DecoupledPpo(low: 0.2, high: 0.28, behaviour_cap: Mask(5.0))";
    let carry = partial("extra_groups: 2");
    let args = ["--steps", "3", "--set", loss, "--set", &carry];
    assert_ok(&run(file, &out, &args));
    for record in metrics(&out) {
        let not_kept =
            number(&record, "rollout/cut_episodes") + number(&record, "rollout/carried_episodes");
        assert_eq!(not_kept, 2.0 * GROUP_SIZE, "{record:?}");
        assert!(number(&record, "actor_step/samples") > 0.0);
    }
}

#[test]
fn validation_refuses_no_extra_group_and_a_pi_old_carried_turns_make_wrong() {
    let file = "pipelines/frozen_lake_starpo.ron";
    let validate = |settings: &str| roll_flow(&["validate", file, "--set", &partial(settings)]);
    let out = validate("extra_groups: 0");
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("partial.extra_groups"), "{stderr}");
    // The default file takes π_old from the rollout (PPO clip): carried turns are older.
    let out = validate("extra_groups: 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("a partial rollout's carried groups"),
        "{stderr}"
    );
    assert!(stderr.contains("DecoupledPpo"), "{stderr}");
    // Without carry every sample is on-policy, and the file is fine.
    assert_ok(&validate("extra_groups: 2, carry: false"));
}
