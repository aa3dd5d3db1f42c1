//! A rollout whose prompts leave no room for a reply is an error that names the budget,
//! not a silent empty batch; a guide that ends after `guide_steps` guides those steps'
//! replies after `reply_start` and leaves the later ones free; a system template sees each
//! sample's place in its group.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use roll_flow_engine::batch::column::{BEHAVIOUR_LOGPROB, RESPONSE_MASK};
use roll_flow_engine::spec::Pipeline;
use roll_flow_engine::{Batch, NodeSpec, Operator, StepContext, WorkerInfo};
use roll_flow_model::CpuBackend;

use crate::catalog::RollFlow;
use crate::play_settings::Guide;
use crate::registry::run_plan;
use crate::rollout::env_player::EnvPlayer;
use crate::runtime::resources::Runtime;

/// A pipeline of one FrozenLake env set (`groups` groups of 4) and a `positions`-long
/// Tiny policy, its rollout node `rollout`.
fn pipeline(rollout: &str, groups: usize, positions: usize) -> Pipeline<RollFlow> {
    let text = format!(
        r#"Pipeline(name: "t", steps: 1, out_dir: "unused",
            models: {{ "policy": (arch: Tiny(layers: 1, dim: 16, heads: 2, max_positions: {positions})) }},
            envs: {{ "train": (env: FrozenLake(size: 4), groups: {groups}, group_size: 4, max_turns: 1) }},
            nodes: {{ "rollout": {rollout} }})"#
    );
    roll_flow_engine::spec::parse::<RollFlow>(Path::new("t.ron"), &text)
        .unwrap_or_else(|d| panic!("{d}"))
}

/// The pipeline's `rollout` node.
fn node_of(pipeline: &Pipeline<RollFlow>) -> &crate::registry::Node {
    pipeline.nodes.get("rollout").expect("a Rollout node")
}

/// The rollout's operator, built on a fresh runtime (as a run that starts or resumes).
fn build(
    pipeline: &Pipeline<RollFlow>,
) -> Result<(Box<dyn Operator>, Runtime<CpuBackend>), String> {
    let worker = WorkerInfo::single(0);
    let mut runtime = Runtime::<CpuBackend>::new(Arc::new(run_plan(pipeline)), worker)?;
    let node = node_of(pipeline).build("rollout", &mut runtime)?;
    Ok((node, runtime))
}

/// Step `step` of a one-worker run with seed 1.
fn step_context(step: u64) -> StepContext {
    StepContext {
        step,
        policy_version: 0,
        seed: 1,
        worker: 0,
        workers: 1,
        metrics: BTreeMap::new(),
    }
}

/// Plays step `step` with `node`: its batch and metrics.
fn play_step(node: &mut dyn Operator, step: u64) -> Result<(Batch, Metrics), String> {
    let mut ctx = step_context(step);
    let batch = node.process(&mut ctx, Batch::default()).map_err(|e| e.0)?;
    Ok((batch, ctx.metrics))
}

/// Plays step 0 of one group of FrozenLake envs with a 64-position Tiny policy.
fn play(rollout: &str) -> Result<usize, String> {
    let (mut node, _runtime) = build(&pipeline(rollout, 1, 64))?;
    Ok(play_step(node.as_mut(), 0)?.0.num_samples())
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
    assert_eq!(samples, Ok(4));
}

type Metrics = BTreeMap<String, f64>;

/// Each reply's text after `reply_start`, and its tokens' behaviour log-probs.
fn replies(batch: &Batch, runtime: &Runtime<CpuBackend>) -> Vec<(String, Vec<f32>)> {
    let models = runtime.models.borrow();
    let policy = models.policies["policy"].borrow();
    let mask = batch.bools(&RESPONSE_MASK).unwrap();
    let logprobs = batch.f32s(&BEHAVIOUR_LOGPROB).unwrap();
    (0..batch.num_samples())
        .map(|i| {
            let reply: Vec<usize> = batch.sample_range(i).filter(|&t| mask[t]).collect();
            let tokens: Vec<u32> = reply.iter().map(|&t| batch.tokens()[t]).collect();
            let text = policy.tokenizer.decode(&tokens, true).unwrap();
            (text, reply.iter().map(|&t| logprobs[t]).collect())
        })
        .collect()
}

#[test]
fn a_guide_with_guide_steps_guides_those_steps_after_the_reply_start_then_frees_the_replies() {
    let rollout = r#"Rollout(envs: "train", guide: Actions, guide_steps: 2, instruction: false,
        prompt: (reply_start: "<answer>"), sequence_length: 250, max_new_tokens: 16)"#;
    let pipeline = pipeline(rollout, 2, 256);
    let (mut node, runtime) = build(&pipeline).unwrap();
    let answers = [
        "Left</answer>",
        "Down</answer>",
        "Right</answer>",
        "Up</answer>",
    ];
    for step in 0..2 {
        let (batch, metrics) = play_step(node.as_mut(), step).unwrap();
        assert_eq!(metrics["guided"], 1.0, "step {step}");
        for (text, logprobs) in replies(&batch, &runtime) {
            // The reply is one of the actions after the `<answer>` of the prompt, and its
            // closing tokens are forced (the only ones allowed): log-prob exactly 0.
            let answer = text.as_str();
            assert!(answers.contains(&answer), "step {step}: {text:?}");
            assert_eq!(logprobs.last(), Some(&0.0), "step {step}: {text:?}");
        }
        assert!(runtime.guides.borrow().contains_key("train"));
    }
    for step in 2..4 {
        let (batch, metrics) = play_step(node.as_mut(), step).unwrap();
        assert_eq!(metrics["guided"], 0.0, "step {step}");
        assert!(
            runtime.guides.borrow().is_empty(),
            "scoring takes the whole vocabulary"
        );
        // An untrained Tiny model over the whole vocabulary: no token is certain.
        let free = replies(&batch, &runtime);
        assert!(free.iter().all(|(_, lp)| lp.iter().all(|&l| l < 0.0)));
        assert!(free
            .iter()
            .any(|(text, _)| !answers.contains(&text.as_str())));
    }
    // A run resumed past the warm-up plays free from its first step.
    let (mut resumed, runtime) = build(&pipeline).unwrap();
    assert!(runtime.guides.borrow().contains_key("train"));
    let (_, metrics) = play_step(resumed.as_mut(), 7).unwrap();
    assert_eq!(metrics["guided"], 0.0);
    assert!(runtime.guides.borrow().is_empty());
    // Validation measures the policy the run ends with: free text.
    let play = node_of(&pipeline).plays().expect("a rollout plays");
    assert_eq!(
        (play.guide, play.eval_guide()),
        (Guide::Actions, Guide::Free)
    );
}

#[test]
fn guide_steps_and_reply_starts_the_guide_cannot_follow_are_refused() {
    let check = |rollout: &str| {
        let pipeline = pipeline(rollout, 1, 64);
        NodeSpec::check(node_of(&pipeline)).err()
    };
    let refused = [
        (
            r#"Rollout(envs: "train", guide_steps: 3)"#,
            "needs `guide: Actions`",
        ),
        (
            r#"Rollout(envs: "train", guide: Actions, guide_steps: 0)"#,
            "`guide_steps`",
        ),
        (
            r#"Rollout(envs: "train", guide: Actions, guide_steps: 3, staleness: 1)"#,
            "needs a synchronous rollout",
        ),
        (
            r#"Rollout(envs: "train", guide: Actions, guide_steps: 3, partial: (extra_groups: 1))"#,
            "needs a synchronous rollout",
        ),
    ];
    for (rollout, expected) in refused {
        let err = check(rollout).unwrap_or_else(|| panic!("{rollout} was accepted"));
        assert!(err.contains(expected), "{rollout}: {err}");
    }
    assert_eq!(
        check(r#"Rollout(envs: "train", guide: Actions, guide_steps: 3)"#),
        None
    );
    // The guide's replies must open with the reply start the prompt already holds.
    let err = build(&pipeline(
        r#"Rollout(envs: "train", guide: Actions, prompt: (reply_start: "Answer: "))"#,
        1,
        64,
    ))
    .err()
    .expect("a reply start the guide cannot follow");
    let expected = "`<answer>Left</answer>` to env `train`, which does not open with \
                    `prompt.reply_start` (`Answer: `)";
    assert!(err.contains(expected), "{err}");
}

#[test]
fn a_free_player_plays_free_text_on_a_tag_another_node_guides() {
    // An `Eval` on a warm-up rollout's own env set: the rollout's guide for `train` is in
    // the shared table (scoring reads it), but the eval plays as `eval_guide()` says.
    let rollout = r#"Rollout(envs: "train", guide: Actions, guide_steps: 2, instruction: false,
        prompt: (reply_start: "<answer>"), sequence_length: 250, max_new_tokens: 16)"#;
    let pipeline = pipeline(rollout, 2, 256);
    let (_rollout, mut runtime) = build(&pipeline).unwrap();
    let play = node_of(&pipeline).plays().expect("a rollout plays");
    let tags = ["train".to_string()];
    let mut eval_replies = |guide| {
        let settings = play.for_eval(0.0, 16, false);
        let player = EnvPlayer::build(&tags, "policy", guide, settings, &mut runtime).unwrap();
        let episodes = player.play(&step_context(0)).unwrap().episodes;
        let turns = episodes.into_iter().flat_map(|e| e.turns);
        turns
            .map(|t| (t.reply_text, t.logprobs))
            .collect::<Vec<_>>()
    };
    let guided = eval_replies(Guide::Actions);
    assert!(!guided.is_empty());
    for (text, logprobs) in &guided {
        assert_eq!(
            logprobs.last(),
            Some(&0.0),
            "a forced closing token: {text:?}"
        );
    }
    let free = eval_replies(play.eval_guide());
    assert!(!free.is_empty());
    for (text, logprobs) in &free {
        assert!(logprobs.iter().all(|&l| l < 0.0), "free text: {text:?}");
        assert!(!text.ends_with("</answer>"), "free text: {text:?}");
    }
    assert!(
        runtime.guides.borrow().contains_key("train"),
        "the rollout's guide stays for scoring"
    );
}

#[test]
fn a_system_template_reads_each_samples_place_in_its_group() {
    let rollout = r#"Rollout(envs: "train", prompt: (system: "You are sample {{ sample }} of four."),
        sequence_length: 250, max_new_tokens: 2)"#;
    let (mut node, runtime) = build(&pipeline(rollout, 1, 256)).unwrap();
    let (batch, _) = play_step(node.as_mut(), 0).unwrap();
    let models = runtime.models.borrow();
    let tokenizer = &models.policies["policy"].borrow().tokenizer;
    let mask = batch.bools(&RESPONSE_MASK).unwrap();
    let mut systems: Vec<String> = (0..batch.num_samples())
        .map(|i| {
            let prompt: Vec<u32> = (batch.sample_range(i))
                .take_while(|&t| !mask[t])
                .map(|t| batch.tokens()[t])
                .collect();
            let text = tokenizer.decode(&prompt, false).unwrap();
            let start = text
                .find("You are sample")
                .unwrap_or_else(|| panic!("{text}"));
            text[start..start + "You are sample 0".len()].to_string()
        })
        .collect();
    systems.sort();
    let expected: Vec<String> = (0..4).map(|i| format!("You are sample {i}")).collect();
    assert_eq!(
        systems, expected,
        "one prompt per place in the group of four"
    );
}
