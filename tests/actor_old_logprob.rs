//! `ActorStep(old_logprob: ThisStep | Behaviour)` through the binary: a pipeline without a
//! `LogProb` node trains as the same pipeline with one. π_old is the weights the step
//! starts from either way: `ThisStep` with one optimizer step per batch (ratio 1), and
//! `Behaviour` with mini-batches (the rollout sampled with those weights). Only f32
//! rounding may differ (the `LogProb` pass scores the batch in other chunks, the rollout
//! with a KV cache), hence the tolerance of 1e-5 relative on losses and gradient norms,
//! and 1e-6 absolute near zero: a policy loss is a mean of ±advantage × ratio terms of
//! order 1 and can cancel to ~1e-8, where only rounding is left to compare.

mod common;

use common::{assert_ok, metrics, roll_flow, tiny};
use serde_json::{Map, Value};

const STARPO: &str = "pipelines/frozen_lake_starpo.ron";

/// `file` run for three tiny steps into `out`, with `extra` arguments.
fn run_file(
    file: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> Vec<Map<String, Value>> {
    let mut args: Vec<String> = vec![
        "run".into(),
        file.display().to_string(),
        "--steps".into(),
        "3".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(tiny(STARPO));
    args.extend(extra.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = roll_flow(&refs);
    assert_ok(&result);
    metrics(out)
}

/// The shipped StarPO file with π_old from a `LogProb` node (`source: None`) or from the
/// actor's `old_logprob: source`, whichever way the file itself takes it.
fn variant(source: Option<&str>) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(STARPO)).unwrap();
    let node = "        \"old_logprob\": LogProb(model: \"policy\"),\n";
    let node_edges = "(\"adv\", \"old_logprob\"),\n        (\"old_logprob\", \"actor_step\"),";
    let direct_edge = "(\"adv\", \"actor_step\"),";
    // The file in its LogProb-node form.
    let mut with_node = text.clone();
    for shipped in ["ThisStep", "Behaviour"] {
        with_node = with_node.replace(&format!("old_logprob: {shipped}, "), "");
    }
    if !with_node.contains(node) {
        with_node = with_node
            .replace(
                "        \"actor_step\":",
                &format!("{node}        \"actor_step\":"),
            )
            .replace(direct_edge, node_edges);
    }
    assert!(
        with_node.contains(node) && with_node.contains(node_edges),
        "{STARPO}: a LogProb node could not be put in front of its actor step"
    );
    match source {
        None => with_node,
        Some(source) => with_node
            .replace(node, "")
            .replace("ActorStep(", &format!("ActorStep(old_logprob: {source}, "))
            .replace(node_edges, direct_edge),
    }
}

fn close(a: &Value, b: &Value) -> bool {
    let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(0.1)
}

/// Runs the StarPO file with a `LogProb` node and with `old_logprob: source` (both with
/// `extra`) and checks they train alike.
fn trains_alike(source: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let files = [None, Some(source)].map(|s| {
        let file = dir
            .path()
            .join(format!("starpo_{}.ron", s.unwrap_or("node")));
        std::fs::write(&file, variant(s)).unwrap();
        file
    });
    let with_node = run_file(&files[0], &dir.path().join("with"), extra);
    let without = run_file(&files[1], &dir.path().join("without"), extra);
    assert_eq!(with_node.len(), 3);
    assert!(with_node[0].contains_key("old_logprob/seconds"));
    assert!(
        !without[0].contains_key("old_logprob/seconds"),
        "no LogProb pass"
    );
    for (step, (a, b)) in with_node.iter().zip(&without).enumerate() {
        // The same weights sample the same episodes at every step.
        for key in [
            "rollout/score/mean",
            "rollout/tokens",
            "actor_step/tokens",
            "actor_step/optimizer_steps",
        ] {
            assert_eq!(a[key], b[key], "{source}, step {step}: {key}");
        }
        for key in [
            "actor_step/pg_loss",
            "actor_step/grad_norm",
            "actor_step/entropy",
            "actor_step/pg_clipfrac",
            "actor_step/ppo_kl",
        ] {
            let (x, y) = (&a[key], &b[key]);
            assert!(close(x, y), "{source}, step {step}: {key} {x} vs {y}");
        }
    }
}

#[test]
fn this_step_trains_as_a_log_prob_node_does() {
    // `ThisStep` takes one optimizer step per batch: no mini-batches.
    trains_alike("ThisStep", &["--set", "nodes.actor_step.mini_batch=None"]);
}

#[test]
fn behaviour_trains_as_a_log_prob_node_does_with_mini_batches() {
    // 24 episodes, mini-batches of 4: several optimizer steps a step, so π_θ moves away
    // from π_old within the step (non-zero `ppo_kl` and clipping after the first).
    let sets = [
        "envs.train.groups=6",
        "envs.train.group_size=4",
        "nodes.actor_step.mini_batch=4",
    ];
    trains_alike("Behaviour", &sets.map(|s| ["--set", s]).concat());
}
