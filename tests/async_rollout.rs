//! Asynchronous training through the binary (`Rollout(staleness: N)`, the shipped
//! `frozen_lake_starpo_async.ron` shrunk): the rollout of step t plays with exactly the
//! weights of step max(0, t − N), the same seed gives the same run, a resumed run ends as an
//! uninterrupted one (also with LoRA, whose held steps are saved as adapters), and
//! validation refuses a loss whose π_old the lag makes wrong.

mod common;

use std::path::Path;

use common::{assert_ok, entry_names, metrics, roll_flow, run, untimed};

const FILE: &str = "pipelines/frozen_lake_starpo_async.ron";

fn staleness(n: u64) -> String {
    format!("nodes.rollout.staleness={n}")
}

/// A file of the policy's folder in checkpoint `step`: the final weights, as the HF export
/// (`hf/model.safetensors`) or PEFT's adapter holds them (burn's `model.bin` and
/// `trained.safetensors` also hold parameter ids, which each run draws).
fn policy_file(dir: &Path, step: u64, file: &str) -> Vec<u8> {
    let path = format!("checkpoints/step_{step}/models/policy/{file}");
    std::fs::read(dir.join(path)).expect("final weights")
}

const HF_WEIGHTS: &str = "hf/model.safetensors";

#[test]
fn the_rollout_of_step_t_plays_the_weights_of_step_t_minus_n() {
    let dir = tempfile::tempdir().unwrap();
    for n in [0u64, 1, 2] {
        let out = dir.path().join(format!("n{n}"));
        assert_ok(&run(FILE, &out, &["--steps", "5", "--set", &staleness(n)]));
        let records = metrics(&out);
        assert_eq!(records.len(), 5);
        for (t, record) in records.iter().enumerate() {
            let t = t as u64;
            let version = record["policy_version"].as_f64().unwrap() as u64;
            assert_eq!(version, t.saturating_sub(n), "N = {n}, step {t}");
            // ActorStep publishes once per step, so version t − N is the weights of step t − N.
            let trained = record["actor_step/policy_version"].as_f64().unwrap() as u64;
            assert_eq!(trained, t + 1, "N = {n}, step {t}");
            let lag = record.get("rollout/staleness").and_then(|v| v.as_f64());
            let expected = (n > 0).then_some(t.min(n) as f64);
            assert_eq!(lag, expected, "N = {n}, step {t}");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_asynchronous_run() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        assert_ok(&run(FILE, out, &["--steps", "4"]));
    }
    assert_eq!(untimed(&a), untimed(&b), "metrics apart from timing");
    assert!(
        policy_file(&a, 4, HF_WEIGHTS) == policy_file(&b, 4, HF_WEIGHTS),
        "final weights differ"
    );
    // The behaviour weight moved off 1: the samples really are one step old.
    let last = &metrics(&a)[3];
    let w = last["actor_step/behave_weight_mean"].as_f64().unwrap();
    assert!(w != 1.0, "behaviour weight {w}");
}

#[test]
fn a_resumed_asynchronous_run_ends_as_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    assert_ok(&run(FILE, &whole, &["--steps", "5"]));
    assert_ok(&run(FILE, &split, &["--steps", "5", "--stop-after", "3"]));
    let behind = split.join("checkpoints/step_3/models/policy/behind/2");
    assert!(
        behind.join("model.safetensors").is_file(),
        "step 2's weights kept"
    );
    assert_ok(&roll_flow(&["run", "--resume", split.to_str().unwrap()]));
    assert_eq!(
        untimed(&split),
        untimed(&whole),
        "metrics apart from timing"
    );
    assert!(
        policy_file(&split, 5, HF_WEIGHTS) == policy_file(&whole, 5, HF_WEIGHTS),
        "final weights differ"
    );
}

#[test]
fn a_resumed_asynchronous_lora_run_ends_as_an_uninterrupted_one() {
    // The held steps' weights are the adapters they were merged from, not merged models.
    let lora = "models.policy.lora=(rank: 2, alpha: 4, targets: [\"q_proj\", \"v_proj\"])";
    let dir = tempfile::tempdir().unwrap();
    let (whole, split) = (dir.path().join("whole"), dir.path().join("split"));
    assert_ok(&run(FILE, &whole, &["--steps", "5", "--set", lora]));
    let stopped = ["--steps", "5", "--set", lora, "--stop-after", "3"];
    assert_ok(&run(FILE, &split, &stopped));
    let behind = split.join("checkpoints/step_3/models/policy/behind/2");
    assert_eq!(entry_names(&behind), ["trained.safetensors", "version"]);
    assert_ok(&roll_flow(&["run", "--resume", split.to_str().unwrap()]));
    assert_eq!(
        untimed(&split),
        untimed(&whole),
        "metrics apart from timing"
    );
    let peft = "peft/adapter_model.safetensors";
    assert!(
        policy_file(&split, 5, peft) == policy_file(&whole, 5, peft),
        "final adapters differ"
    );
}

#[test]
fn validation_refuses_a_pi_old_the_lag_makes_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE)).unwrap();
    let cases = [
        (
            "old_logprob: Behaviour, loss: PpoClip(low: 0.2, high: 0.28)",
            "their log-probs come from older weights",
        ),
        (
            "loss: PpoClip(low: 0.2, high: 0.28)",
            "the plain PPO clip does not correct for that",
        ),
        (
            "old_logprob: Behaviour, loss: DecoupledPpo()",
            "the behaviour correction is always 1",
        ),
    ];
    for (loss, why) in cases {
        let file = dir.path().join("stale.ron");
        let changed = text.replace(
            "loss: DecoupledPpo(low: 0.2, high: 0.28, behaviour_cap: Mask(5.0))",
            loss,
        );
        assert_ne!(changed, text);
        std::fs::write(&file, changed).unwrap();
        let out = roll_flow(&["validate", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{loss}: {stderr}");
        assert!(stderr.contains("node `actor_step`"), "{stderr}");
        assert!(stderr.contains(why), "{loss}: {stderr}");
        assert!(
            stderr.contains("DecoupledPpo") || stderr.contains("LogProb"),
            "{stderr}"
        );
        // The same loss with a synchronous rollout is fine.
        let synchronous = std::fs::read_to_string(&file)
            .unwrap()
            .replace("staleness: 1", "staleness: 0");
        std::fs::write(&file, synchronous).unwrap();
        let out = roll_flow(&["validate", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{loss} with staleness 0");
    }
}

/// (start, end) in µs of the trace's span `name` on `track` for `step`.
fn span(trace: &serde_json::Value, track: &str, name: &str, step: u64) -> (f64, f64) {
    let events = trace["traceEvents"].as_array().unwrap();
    let tid = events
        .iter()
        .find(|e| e["ph"] == "M" && e["args"]["name"] == track)
        .map(|e| e["tid"].clone())
        .unwrap_or_else(|| panic!("no track {track}"));
    let e = events
        .iter()
        .find(|e| e["tid"] == tid && e["name"] == name && e["args"]["step"] == step)
        .unwrap_or_else(|| panic!("no {name} of step {step} on {track}"));
    let start = e["ts"].as_f64().unwrap();
    (start, start + e["dur"].as_f64().unwrap())
}

#[test]
fn the_trace_shows_the_next_rollout_while_the_step_trains() {
    let dir = tempfile::tempdir().unwrap();
    let (out, file) = (dir.path().join("run"), dir.path().join("trace.json"));
    let trace_arg = file.to_str().unwrap();
    // 8 of the file's 32 groups of 8: a rollout long enough to overlap the next step's training.
    let args = [
        "run",
        FILE,
        "--steps",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace_arg,
        "--set",
        "envs.val.groups=2",
        "--set",
        "envs.train.groups=8",
    ];
    assert_ok(&roll_flow(&args));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for t in 0..3 {
        // Step t trains from its LogProb pass to the end of its actor step.
        let training = (
            span(&trace, "old_logprob", "old_logprob", t).0,
            span(&trace, "actor_step", "actor_step", t).1,
        );
        let next = span(&trace, "rollout (ahead)", "play", t + 1);
        // The next rollout starts before this step's training ends: a synchronous run
        // starts it only after the update. (Whether it also lasts until training begins
        // depends on how the machine schedules the two threads: under the test suite's
        // load it once ended 10 ms before.)
        assert!(
            next.0 < training.1,
            "step {t}: the next rollout {next:?} waits for training {training:?}"
        );
    }
    // `report --trace` draws it.
    let drawn = roll_flow(&[
        "report",
        "--trace",
        trace_arg,
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_ok(&drawn);
    let png = std::fs::read(dir.path().join("timeline.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}
