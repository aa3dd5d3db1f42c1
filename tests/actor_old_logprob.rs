//! `ActorStep(old_logprob: ThisStep)` through the binary: a pipeline without a `LogProb`
//! node trains as the same pipeline with one. With one optimizer step per batch, π_old is
//! the weights the step starts from either way, so the ratio is 1 and the update is the
//! same; only f32 rounding may differ (the `LogProb` pass scores the batch in other
//! chunks), hence the tolerance of 1e-5 relative on losses and gradient norms.

mod common;

use common::{assert_ok, metrics, roll_flow, tiny};
use serde_json::{Map, Value};

const STARPO: &str = "pipelines/frozen_lake_starpo.ron";

/// `file` run for three tiny steps into `out`.
fn run_file(file: &std::path::Path, out: &std::path::Path) -> Vec<Map<String, Value>> {
    let mut args: Vec<String> = vec![
        "run".into(),
        file.display().to_string(),
        "--steps".into(),
        "3".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(tiny(STARPO));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = roll_flow(&refs);
    assert_ok(&result);
    metrics(out)
}

/// The shipped StarPO file with π_old from a `LogProb` node, or from the actor's own pass.
fn variant(with_log_prob_node: bool) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(STARPO)).unwrap();
    let has_node = text.contains("\"old_logprob\": LogProb(model: \"policy\"),");
    let this_step = text.contains("old_logprob: ThisStep");
    assert!(
        has_node != this_step,
        "{STARPO} uses exactly one of the two"
    );
    if has_node == with_log_prob_node {
        return text;
    }
    let edges_with = "(\"adv\", \"old_logprob\"),\n        (\"old_logprob\", \"actor_step\"),";
    let edges_without = "(\"adv\", \"actor_step\"),";
    if with_log_prob_node {
        text.replace("old_logprob: ThisStep, ", "")
            .replace(
                "\"actor_step\":",
                "\"old_logprob\": LogProb(model: \"policy\"),\n        \"actor_step\":",
            )
            .replace(edges_without, edges_with)
    } else {
        text.replace("        \"old_logprob\": LogProb(model: \"policy\"),\n", "")
            .replace("ActorStep(", "ActorStep(old_logprob: ThisStep, ")
            .replace(edges_with, edges_without)
    }
}

fn close(a: &Value, b: &Value) -> bool {
    let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-3)
}

#[test]
fn this_step_trains_as_a_log_prob_node_does() {
    let dir = tempfile::tempdir().unwrap();
    let files = [true, false].map(|with| {
        let file = dir.path().join(format!("starpo_{with}.ron"));
        std::fs::write(&file, variant(with)).unwrap();
        file
    });
    let with_node = run_file(&files[0], &dir.path().join("with"));
    let without = run_file(&files[1], &dir.path().join("without"));
    assert_eq!(with_node.len(), 3);
    assert!(with_node[0].contains_key("old_logprob/seconds"));
    assert!(
        !without[0].contains_key("old_logprob/seconds"),
        "no LogProb pass"
    );
    for (step, (a, b)) in with_node.iter().zip(&without).enumerate() {
        // The same weights sample the same episodes at every step.
        for key in ["rollout/score/mean", "rollout/tokens", "actor_step/tokens"] {
            assert_eq!(a[key], b[key], "step {step}: {key}");
        }
        for key in [
            "actor_step/pg_loss",
            "actor_step/grad_norm",
            "actor_step/entropy",
            "actor_step/ppo_kl",
        ] {
            assert!(
                close(&a[key], &b[key]),
                "step {step}: {key} {} vs {}",
                a[key],
                b[key]
            );
        }
        assert_eq!(b["actor_step/pg_clipfrac"], 0.0, "ratio 1: nothing clipped");
    }
}
