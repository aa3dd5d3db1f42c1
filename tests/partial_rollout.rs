//! Partial rollouts through the binary (`Rollout(partial: (extra_groups: N))`, the default
//! FrozenLake file and the GiGPO one, shrunk to 2 groups of 2): each step starts N groups
//! more than it trains on, keeps as many whole groups as without them and reports the
//! episodes it did not keep; validation refuses no extra group.

mod common;

use common::{assert_ok, metrics, roll_flow, run};

/// The shrunk files' train set: 2 groups of 2 ([`common::tiny`]).
const GROUPS: f64 = 2.0;
const GROUP_SIZE: f64 = 2.0;

fn partial(n: usize) -> String {
    format!("nodes.rollout.partial=(extra_groups: {n})")
}

#[test]
fn a_partial_rollout_keeps_the_steps_groups_and_reports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = "pipelines/frozen_lake_starpo.ron";
    let (plain, extra) = (dir.path().join("plain"), dir.path().join("extra"));
    assert_ok(&run(file, &plain, &["--steps", "2"]));
    assert_ok(&run(file, &extra, &["--steps", "2", "--set", &partial(3)]));
    for (p, e) in metrics(&plain).iter().zip(metrics(&extra)) {
        // Trajectory-wise: a sample per episode, 2 groups of 2 with or without extra ones.
        assert_eq!(e["rollout/samples"], p["rollout/samples"]);
        assert_eq!(e["rollout/samples"].as_f64(), Some(GROUPS * GROUP_SIZE));
        // The 3 groups not kept, whole: cut off, or finished after the step had its 2.
        assert_eq!(e["rollout/cut_episodes"].as_f64(), Some(3.0 * GROUP_SIZE));
        assert!(
            p.get("rollout/cut_episodes").is_none(),
            "reported only when on"
        );
    }
}

#[test]
fn a_step_wise_partial_rollout_trains_on_whole_groups() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gigpo");
    let file = "pipelines/frozen_lake_gigpo.ron";
    assert_ok(&run(file, &out, &["--steps", "2", "--set", &partial(2)]));
    for record in metrics(&out) {
        assert_eq!(
            record["rollout/cut_episodes"].as_f64(),
            Some(2.0 * GROUP_SIZE)
        );
        assert!(record["actor_step/samples"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn validation_refuses_a_partial_rollout_without_extra_groups() {
    let out = roll_flow(&[
        "validate",
        "pipelines/frozen_lake_starpo.ron",
        "--set",
        &partial(0),
    ]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("partial.extra_groups"), "{stderr}");
}
