use std::path::Path;

use super::*;
use crate::catalog::RollFlow;

/// A 1-layer, 32-wide Tiny policy (2 heads of 16, FFN 128, vocab 600, tied embeddings,
/// context 64) trained on 3 groups of 2 envs, micro-batches of 4, samples up to 48 tokens.
fn pipeline(device: &str, extra_nodes: &str) -> Pipeline<RollFlow> {
    pipeline_of(device, extra_nodes, 3)
}

fn pipeline_of(device: &str, extra_nodes: &str, groups: usize) -> Pipeline<RollFlow> {
    let policy = "(arch: Tiny(layers: 1, dim: 32, heads: 2, vocab: 600, max_positions: 64))";
    pipeline_with(device, extra_nodes, groups, policy)
}

fn pipeline_with(
    device: &str,
    extra_nodes: &str,
    groups: usize,
    policy: &str,
) -> Pipeline<RollFlow> {
    let text = format!(
        r#"Pipeline(
    name: "t", steps: 10, out_dir: "runs/t", device: {device},
    models: {{ "policy": {policy} }},
    envs: {{
        "train": (env: FrozenLake(size: 4), groups: {groups}, group_size: 2, max_turns: 4),
        "val": (env: FrozenLake(size: 4), groups: 5, max_turns: 4),
    }},
    nodes: {{
        "rollout": Rollout(envs: "train", max_new_tokens: 8, sequence_length: 48),
        "adv": Grpo(),
        "actor_step": ActorStep(model: "policy", old_logprob: Behaviour, micro_batch: 4),
        {extra_nodes}
    }},
    edges: [("rollout", "adv"), ("adv", "actor_step")],
)"#
    );
    roll_flow_engine::spec::parse::<RollFlow>(Path::new("t.ron"), &text)
        .unwrap_or_else(|d| panic!("{d}"))
}

// Parameters, by hand: a layer has q 32·32 + 32, k and v 2·(32·32 + 32), o 32·32, the MLP
// 3·32·128 and two norms 2·32: 16,544; the tied embedding 600·32 = 19,200; the final
// norm 32: 35,776.
const PARAMS: u64 = 35_776;

#[test]
fn parameters_of_a_tiny_shape_by_hand() {
    let pipeline = pipeline("Cpu", "");
    let spec = pipeline.models.get("policy").unwrap();
    let config = model_config(spec, Path::new(".")).unwrap();
    assert_eq!(parameters(&config), PARAMS);
    // Untied, the LM head adds another 600·32.
    let untied = Qwen2Config {
        tie_word_embeddings: false,
        ..config
    };
    assert_eq!(parameters(&untied), PARAMS + 19_200);
}

#[test]
fn the_floor_of_a_small_cpu_run_by_hand() {
    let estimate = estimate(&pipeline("Cpu", ""), Path::new("."), 2, 1);
    let resident: Vec<u64> = estimate.resident.iter().map(|p| p.bytes).collect();
    // The trained policy: 8 copies of 4-byte parameters.
    assert_eq!(resident, vec![PROCESS_BYTES, PARAMS * 4 * 8]);
    // Playing 6 envs of at least 4 tokens (one per turn): keys and values of 1 layer,
    // 2 · 32 · 4 = 256 bytes a token, twice (spare capacity, the kept prefix): 512; the
    // logits row 600 · 4.
    let playing = 6 * (ENV_BYTES + 512 * 4 + 2_400);
    // Training: 6 samples in micro-batches of 4 (2 of them, both at once on 2 cores) of 4
    // tokens; per token 4 · (2 · (8·32 + 4·128 + 2·2·4) + 3·600) = 13,472 bytes.
    let training = 2 * 16 * 13_472;
    assert!(training > playing);
    let phase = estimate.largest_phase.as_ref().unwrap();
    assert_eq!(phase.bytes, training);
    assert!(phase.what.contains("training `policy`"), "{}", phase.what);
    assert_eq!(estimate.floor(), PROCESS_BYTES + PARAMS * 32 + training);
}

#[test]
fn each_worker_holds_its_own_models() {
    let one = estimate(&pipeline("Cpu", ""), Path::new("."), 2, 1);
    let three = estimate(&pipeline("Cpu", ""), Path::new("."), 2, 3);
    // The policy's 8 copies, twice more; the envs and the training are shared out.
    assert_eq!(three.floor(), one.floor() + 2 * PARAMS * 4 * 8);
    assert_eq!(three.largest_phase, one.largest_phase);
    let model = three.resident.iter().find(|r| r.what.contains("`policy`"));
    assert!(
        model.unwrap().what.contains("× 3 workers (`-w`)"),
        "{three:?}"
    );
}

#[test]
fn gradient_checkpointing_keeps_two_layers_and_each_layers_input() {
    let policy = |on: bool| {
        format!(
            "(arch: Tiny(layers: 3, dim: 32, heads: 2, vocab: 600, max_positions: 64), \
             gradient_checkpointing: {on})"
        )
    };
    let training = |on: bool| {
        let pipeline = pipeline_with("Cpu", "", 3, &policy(on));
        let phase = estimate(&pipeline, Path::new("."), 2, 1)
            .largest_phase
            .unwrap();
        assert!(phase.what.contains("training `policy`"), "{}", phase.what);
        assert_eq!(phase.what.contains("(gradient_checkpointing)"), on);
        phase.bytes
    };
    // Two micro-batches of 16 tokens at once, as above. A layer keeps
    // 2 · (8·32 + 4·128 + 2·2·4) = 1,568 floats a token: all three layers' 4,704 without
    // checkpointing; with it, two layers' 3,136 and the two lower layers' inputs, 2 · 2 · 32
    // = 128. The logits: 3 · 600.
    assert_eq!(training(false), 2 * 16 * 4 * (4_704 + 1_800));
    assert_eq!(training(true), 2 * 16 * 4 * (3_136 + 128 + 1_800));
}

#[test]
fn an_asynchronous_rollout_adds_its_weights_and_plays_beside_training() {
    let sync = estimate(&pipeline("Cpu", ""), Path::new("."), 2, 1);
    let p = roll_flow_engine::spec::parse::<RollFlow>(
        Path::new("t.ron"),
        &PIPELINE_ASYNC.replace("{staleness}", "2"),
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let ahead = estimate(&p, Path::new("."), 2, 1);
    let playing = 6 * (ENV_BYTES + 512 * 4 + 2_400);
    // Two earlier steps' inference weights, and the rollout's part held beside training.
    assert_eq!(ahead.floor(), sync.floor() + PARAMS * 4 * 2 + playing);
    assert!(ahead
        .resident
        .iter()
        .any(|r| r.what.contains("2 earlier step(s)")));
}

/// [`pipeline`]'s text with an asynchronous rollout and the loss it needs.
const PIPELINE_ASYNC: &str = r#"Pipeline(
    name: "t", steps: 10, out_dir: "runs/t", device: Cpu,
    models: { "policy": (arch: Tiny(layers: 1, dim: 32, heads: 2, vocab: 600, max_positions: 64)) },
    envs: {
        "train": (env: FrozenLake(size: 4), groups: 3, group_size: 2, max_turns: 4),
        "val": (env: FrozenLake(size: 4), groups: 5, max_turns: 4),
    },
    nodes: {
        "rollout": Rollout(envs: "train", max_new_tokens: 8, sequence_length: 48, staleness: {staleness}),
        "adv": Grpo(),
        "actor_step": ActorStep(model: "policy", old_logprob: Behaviour, micro_batch: 4),
    },
    edges: [("rollout", "adv"), ("adv", "actor_step")],
)"#;

#[test]
fn eval_plays_its_own_env_count() {
    let eval = r#""eval": Eval(envs: "val", every: 5),"#;
    let estimate = estimate(&pipeline("Cpu", eval), Path::new("."), 1, 1);
    // One core: the two micro-batches train one after the other.
    let training = 16 * 13_472;
    assert_eq!(estimate.largest_phase.unwrap().bytes, training);
    // Eval's 5 envs at least 4 tokens each (no Rollout limit on eval's length) hold less.
    assert!(5 * (ENV_BYTES + 512 * 4 + 2_400) < training);
}

#[test]
fn on_a_gpu_only_the_envs_host_memory_counts() {
    let estimate = estimate(&pipeline("Wgpu", ""), Path::new("."), 2, 1);
    assert_eq!(estimate.resident.len(), 1, "{:?}", estimate.resident);
    assert_eq!(estimate.floor(), PROCESS_BYTES + 6 * ENV_BYTES);
}

#[test]
fn ten_million_groups_are_refused_naming_the_field() {
    let pipeline = pipeline_of("Cpu", "", 10_000_000);
    let estimate = estimate(&pipeline, Path::new("."), 2, 1);
    let playing = 20_000_000 * (ENV_BYTES + 512 * 4 + 2_400);
    assert_eq!(estimate.largest_phase.as_ref().unwrap().bytes, playing);
    let message = check_fits(&estimate, 24 << 30).unwrap_err();
    for needed in [
        "at least 388.0 GiB",
        "24.0 GiB available",
        "envs.train: 20000000 = groups × group_size",
        "--no-memory-check",
    ] {
        assert!(message.contains(needed), "{needed}: {message}");
    }
    assert!(check_fits(&estimate, estimate.floor()).is_ok());
}

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(gib(300 << 20), "300 MiB");
    assert_eq!(gib(3 << 29), "1.5 GiB");
}

#[test]
fn a_lora_policy_holds_its_base_its_adapted_layers_again_and_its_adapters_seven_times() {
    let policy = "(arch: Tiny(layers: 1, dim: 32, heads: 2, vocab: 600, max_positions: 64), \
                  lora: (rank: 2, targets: [\"q_proj\", \"v_proj\"]))";
    let estimate = estimate(&pipeline_with("Cpu", "", 3, policy), Path::new("."), 2, 1);
    // Adapters: one layer, rank 2 × (32 in + 32 out) for q_proj and for v_proj = 256; the
    // merged copy of those two layers' weights, 2 × 32 · 32 = 2,048.
    let model = estimate
        .resident
        .iter()
        .find(|r| r.what.contains("`policy`"));
    let model = model.unwrap();
    let expected = (PARAMS + 2_048) * 4 + 256 * 4 * 7;
    assert_eq!(model.bytes, expected, "{}", model.what);
    assert!(model.what.contains("256 LoRA parameters"), "{}", model.what);
}

#[test]
fn a_token_budget_bounds_the_micro_batch() {
    let pipeline = pipeline("Cpu", "");
    let spec = pipeline.models.get("policy").unwrap();
    let config = model_config(spec, Path::new(".")).unwrap();
    let trained = |tokens: Option<usize>| TrainedModel {
        model: "policy".into(),
        micro_batch: Some(4),
        max_tokens_per_micro_batch: tokens,
        lm_head: true,
    };
    // 6 samples of at least 4 tokens, 13,472 bytes a token (above), 2 cores: micro-batches
    // of 4 samples, 2 at once; a budget of 8 tokens holds 2 samples, 2 at once; a budget
    // below one sample's length holds it alone.
    let bytes = |tokens| training(&trained(tokens), &config, false, (6, 4, 2)).bytes;
    assert_eq!(bytes(None), 2 * 16 * 13_472);
    assert_eq!(bytes(Some(8)), 2 * 8 * 13_472);
    assert_eq!(bytes(Some(3)), 2 * 4 * 13_472);
    assert_eq!(bytes(Some(1000)), bytes(None));
}
