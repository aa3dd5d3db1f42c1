//! A full disk through the binary, made with `RLIMIT_FSIZE` (`ulimit -f`, SIGXFSZ ignored,
//! so a write past the limit fails with EFBIG as on a full disk): the run stops with an
//! error naming the file, no half-written checkpoint is left in place, `metrics.jsonl`
//! keeps its complete lines, and `--resume` without the limit finishes the run.

mod common;

use std::process::Command;

use common::{assert_ok, metrics, tiny};

const FILE: &str = "pipelines/frozen_lake_starpo.ron";

#[test]
fn a_full_disk_stops_the_run_naming_the_file_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    // 40 KiB: the metrics and event lines fit; the checkpoint's model.bin (130 KiB) does not.
    let out = Command::new("bash")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-c", r#"trap '' XFSZ; ulimit -f 40; exec "$0" "$@""#])
        .arg(env!("CARGO_BIN_EXE_roll-flow"))
        .args(["run", FILE, "--steps", "3", "--out"])
        .arg(&out_dir)
        .args(tiny(FILE))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("node `checkpoint` at step 0: cannot write ")
            && stderr.contains("model.bin: File too large"),
        "{stderr}"
    );
    // What was staged stays a staging folder, never a checkpoint in place.
    let in_place: Vec<_> = std::fs::read_dir(out_dir.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|name| name.starts_with("step_"))
        .collect();
    assert!(in_place.is_empty(), "a checkpoint in place: {in_place:?}");
    assert_eq!(metrics(&out_dir).len(), 1, "step 0's line, whole");

    let resumed = common::roll_flow(&["run", "--resume", out_dir.to_str().unwrap()]);
    assert_ok(&resumed);
    let records = metrics(&out_dir);
    let steps: Vec<u64> = records
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [0, 1, 2]);
    assert!(out_dir.join("checkpoints/step_3").is_dir());
}
