//! A rollout whose prompts leave no room for a reply is an error that names the budget,
//! not a silent empty batch.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use roll_flow_engine::{StepContext, WorkerInfo};
use roll_flow_model::CpuBackend;

use crate::catalog::RollFlow;
use crate::registry::run_plan;
use crate::runtime::resources::Runtime;

/// Plays step 0 of one FrozenLake env with a 64-position Tiny policy.
fn play(rollout: &str) -> Result<usize, String> {
    let text = format!(
        r#"Pipeline(name: "t", steps: 1, out_dir: "unused",
            models: {{ "policy": (arch: Tiny(layers: 1, dim: 16, heads: 2, max_positions: 64)) }},
            envs: {{ "train": (env: FrozenLake(size: 4), groups: 1, group_size: 1, max_turns: 1) }},
            nodes: {{ "rollout": {rollout} }})"#
    );
    let pipeline = roll_flow_engine::spec::parse::<RollFlow>(Path::new("t.ron"), &text)
        .unwrap_or_else(|d| panic!("{d}"));
    let worker = WorkerInfo::single(0);
    let mut runtime = Runtime::<CpuBackend>::new(Arc::new(run_plan(&pipeline)), worker)?;
    let rollout = pipeline.nodes.get("rollout").expect("a Rollout node");
    let mut node = rollout.build("rollout", &mut runtime)?;
    let mut ctx = StepContext {
        step: 0,
        policy_version: 0,
        seed: 1,
        worker: 0,
        workers: 1,
        metrics: BTreeMap::new(),
    };
    let batch = node
        .process(&mut ctx, roll_flow_engine::Batch::default())
        .map_err(|e| e.0)?;
    Ok(batch.num_samples())
}

#[test]
fn prompts_longer_than_the_sequence_length_are_an_error_naming_the_budget() {
    let err =
        play(r#"Rollout(envs: "train", sequence_length: 20, max_new_tokens: 4)"#).unwrap_err();
    let prompt: usize = err
        .strip_prefix("no episode could reply: the first prompt is ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        prompt >= 20,
        "a {prompt}-token prompt fits a 20-token sequence: {err}"
    );
    assert!(
        err.contains(
            "min(max_new_tokens 4, sequence_length 20 − prompt, model context 64 − prompt) \
             tokens, which is 0; shorten the prompt (`instruction: false`"
        ),
        "{err}"
    );
    // The same rollout with room for the prompt plays and gives the episode's sample.
    let samples = play(
        r#"Rollout(envs: "train", sequence_length: 60, max_new_tokens: 4, instruction: false)"#,
    );
    assert_eq!(samples, Ok(1));
}

#[test]
fn a_reply_start_and_the_actions_guide_are_refused_together() {
    let text = r#"Pipeline(name: "t", steps: 1, out_dir: "unused",
        models: { "policy": (arch: Tiny(layers: 1, dim: 16, heads: 2, max_positions: 64)) },
        envs: { "train": (env: FrozenLake(size: 4), groups: 1, group_size: 1, max_turns: 1) },
        nodes: { "rollout": Rollout(envs: "train", guide: Actions, prompt: (reply_start: "<answer>")) })"#;
    let pipeline = roll_flow_engine::spec::parse::<RollFlow>(Path::new("t.ron"), text)
        .unwrap_or_else(|d| panic!("{d}"));
    let rollout = pipeline.nodes.get("rollout").expect("a Rollout node");
    let err = roll_flow_engine::NodeSpec::check(rollout).unwrap_err();
    assert!(
        err.contains("`prompt.reply_start` and `guide: Actions` disagree"),
        "{err}"
    );
}
