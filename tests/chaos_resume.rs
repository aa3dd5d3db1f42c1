//! Kill -9 at random moments, then `--resume`, until the run ends: the final weights equal
//! an uninterrupted run's, and `metrics.jsonl` holds every step exactly once, equal to the
//! uninterrupted file apart from timing fields. `CHAOS_KILLS` sets the number of kills
//! (default 4 here; `bench/chaos/run.sh` runs 20 on a release build).
//!
//! Each kill waits for a drawn step (seeded) to be reached in `metrics.jsonl`, then for a
//! drawn fraction of a step, so the kills land in model loading, rollout, training, the
//! metrics write and the checkpoint commit alike, spread over the whole run.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_ok, run, tiny, untimed};

const FILE: &str = "pipelines/frozen_lake_starpo.ron";
const STEPS: u64 = 8;

fn start(args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_roll-flow"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts")
}

/// The number of records in `dir/metrics.jsonl` (0 before it exists).
fn recorded(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("metrics.jsonl")).map_or(0, |t| t.lines().count())
}

/// A run of `args` killed once `dir` holds `steps` records and `after` more has passed, or
/// its exit code if it ended first.
fn run_or_kill(args: &[String], dir: &Path, steps: usize, after: Duration) -> Option<i32> {
    let mut child = start(args);
    let mut until = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if until.is_none() && recorded(dir) >= steps {
            until = Some(Instant::now() + after);
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// xorshift: the kill moments, the same in every run of the test.
fn next(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn kills_and_resumes_end_as_an_uninterrupted_run() {
    let kills: usize = std::env::var("CHAOS_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let (whole, killed) = (dir.path().join("whole"), dir.path().join("killed"));
    let steps = STEPS.to_string();
    let started = Instant::now();
    assert_ok(&run(FILE, &whole, &["--steps", &steps]));
    let step_time = started.elapsed() / STEPS as u32;

    let mut fresh: Vec<String> = ["run", FILE, "--steps", &steps, "--out"]
        .map(String::from)
        .to_vec();
    fresh.push(killed.display().to_string());
    fresh.extend(tiny(FILE));
    let resume = vec![
        "run".to_string(),
        "--resume".into(),
        killed.display().to_string(),
    ];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut targets: Vec<usize> = (0..kills)
        .map(|_| (next(&mut seed) * STEPS as f64) as usize)
        .collect();
    targets.sort_unstable();
    let (mut done, mut landed) = (false, 0);
    for attempt in 0..=kills {
        // A kill before the pipeline copy exists leaves nothing to resume.
        let args = if killed.join("pipeline.ron").is_file() {
            &resume
        } else {
            &fresh
        };
        let outcome = match targets.get(attempt) {
            Some(&step) => run_or_kill(args, &killed, step, step_time.mul_f64(next(&mut seed))),
            None => run_or_kill(args, &killed, usize::MAX, Duration::ZERO),
        };
        match outcome {
            Some(0) => {
                done = true;
                break;
            }
            Some(code) => panic!("attempt {attempt}: roll-flow exited with {code}"),
            None => landed += 1,
        }
    }
    assert!(done, "the run ended");
    eprintln!("{landed} of {kills} kills landed before the run ended");
    assert!(landed * 2 >= kills, "only {landed} of {kills} kills landed");

    assert_eq!(
        untimed(&killed),
        untimed(&whole),
        "metrics apart from timing"
    );
    // The weights as the HF export holds them (burn's `model.bin` also records each
    // parameter's random id, which differs between processes).
    let weights = |d: &Path| {
        std::fs::read(d.join("checkpoints/step_8/models/policy/hf/model.safetensors"))
            .expect("final weights")
    };
    assert!(weights(&killed) == weights(&whole), "final weights differ");
}
