//! The pre-flight memory check through the binary: a run that cannot fit is refused
//! before anything is written, naming the fields that drive it; `--no-memory-check`
//! starts it anyway; `validate --memory` shows the floor.

mod common;

use common::{assert_ok, roll_flow};

const HUGE: &str = "envs.train.groups=10000000";

#[test]
fn ten_million_groups_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_arg = out.display().to_string();
    let args = ["run", "pipelines/frozen_lake_starpo.ron", "--out", &out_arg];
    let refused = roll_flow(&[&args[..], &["--set", HUGE]].concat());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    for needed in [
        "needs at least",
        "playing 80000000 envs at once (envs.train: 80000000 = groups × group_size)",
        "--no-memory-check",
    ] {
        assert!(stderr.contains(needed), "{needed}: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists(), "a refused run wrote {}", out.display());
    // The flag starts it (zero steps, so nothing plays).
    let started = roll_flow(
        &[
            &args[..],
            &["--set", HUGE, "--stop-after", "0", "--no-memory-check"],
        ]
        .concat(),
    );
    assert_ok(&started);
    assert!(out.join("pipeline.ron").exists());
}

#[test]
fn validate_shows_the_floor_part_by_part() {
    let out = roll_flow(&["validate", "pipelines/frozen_lake_starpo.ron", "--memory"]);
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for needed in [
        "memory: at least",
        "model `policy`: 164800 parameters × 4 bytes × 8",
        "training `policy`: 2 micro-batch(es) at once of 32 samples",
    ] {
        assert!(stdout.contains(needed), "{needed}: {stdout}");
    }
}
