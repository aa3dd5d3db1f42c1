//! The binary's allocator against glibc's malloc, on the default pipeline.
//!
//! Runs `roll-flow run pipelines/frozen_lake_starpo.ron --stop-after STEPS` through the
//! real binary with three allocators in turn, `ROUNDS` times each, and prints each run's
//! wall time: mimalloc (the binary's default, src/allocator.rs), glibc's malloc with raised
//! mmap/trim thresholds (`ROLL_FLOW_SYSTEM_MALLOC=1`, what the binary used before) and
//! glibc's defaults (`ROLL_FLOW_DEFAULT_MALLOC=1` as well). It also checks that every run
//! wrote the same metrics apart from timings: the allocator may change the speed, never
//! the run.
//!
//! `cargo bench --bench pipeline_allocator [-- STEPS ROUNDS]` (defaults 30 and 2). Run it
//! alone on the machine: any other job shares the cores with whichever arm is running.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const BINARY: &str = env!("CARGO_BIN_EXE_roll-flow");
const PIPELINE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/pipelines/frozen_lake_starpo.ron"
);

/// The run's metrics.jsonl without its timing fields, one map per step.
fn deterministic_metrics(out_dir: &Path) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let text = std::fs::read_to_string(out_dir.join("metrics.jsonl")).expect("metrics.jsonl");
    text.lines()
        .map(|line| {
            let mut row: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).expect("a JSON row");
            row.retain(|key, _| !roll_flow_engine::metrics::is_timing_key(key));
            row
        })
        .collect()
}

/// The arms: a name and the environment variables that select the allocator.
const ARMS: [(&str, &[&str]); 3] = [
    ("mimalloc", &[]),
    ("glibc tuned", &["ROLL_FLOW_SYSTEM_MALLOC"]),
    (
        "glibc default",
        &["ROLL_FLOW_SYSTEM_MALLOC", "ROLL_FLOW_DEFAULT_MALLOC"],
    ),
];

/// Runs the pipeline for `steps` steps into `out_dir` with the allocator that `switches`
/// select; returns the wall time in seconds.
fn run(steps: u32, out_dir: &Path, switches: &[&str]) -> f64 {
    let mut command = Command::new(BINARY);
    command
        .args(["run", PIPELINE, "--stop-after", &steps.to_string(), "--set"])
        .arg(format!("out_dir={:?}", out_dir.display().to_string()))
        .env_remove("ROLL_FLOW_SYSTEM_MALLOC")
        .env_remove("ROLL_FLOW_DEFAULT_MALLOC");
    for switch in switches {
        command.env(switch, "1");
    }
    let started = Instant::now();
    let output = command.output().expect("run the roll-flow binary");
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        output.status.success(),
        "roll-flow run failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    seconds
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[(n - 1) / 2] + values[n / 2]) / 2.0
}

fn main() {
    // `cargo bench` passes `--bench`; the numbers are ours.
    let numbers: Vec<u32> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let steps = numbers.first().copied().unwrap_or(30);
    let rounds = numbers.get(1).copied().unwrap_or(2);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    println!("frozen_lake_starpo.ron, {steps} steps per run, {rounds} rounds");
    println!("round  allocator      seconds");
    let mut seconds: Vec<Vec<f64>> = vec![Vec::new(); ARMS.len()];
    let mut reference = None;
    for round in 0..rounds as usize {
        // Rotate which arm goes first, so drift on the machine spreads over all of them.
        for turn in 0..ARMS.len() {
            let arm = (round + turn) % ARMS.len();
            let (name, switches) = ARMS[arm];
            let out_dir = scratch.path().join(format!("{arm}_{round}"));
            let took = run(steps, &out_dir, switches);
            println!("{round:>5}  {name:<13}  {took:>7.1}");
            let metrics = deterministic_metrics(&out_dir);
            match &reference {
                None => reference = Some(metrics),
                Some(first) => assert!(first == &metrics, "{name} run {round} wrote other metrics"),
            }
            seconds[arm].push(took);
        }
    }
    let medians: Vec<f64> = seconds.into_iter().map(median).collect();
    for ((name, _), m) in ARMS.iter().zip(&medians) {
        println!(
            "median {name:<13} {m:>7.1} s  ({:.2}x mimalloc's time)",
            m / medians[0]
        );
    }
    println!("every run wrote the same metrics (timings aside)");
}
