//! Building models in the runtime refuses what would later panic: a critic whose
//! vocabulary cannot hold the policy's token ids, and a resume checkpoint whose weights
//! have another architecture than the pipeline's model.

use std::path::Path;
use std::sync::Arc;

use roll_flow_engine::WorkerInfo;
use roll_flow_model::CpuBackend;

use super::resources::Runtime;
use crate::catalog::RollFlow;
use crate::registry::run_plan;
use crate::run_layout::step_dir;

/// A pipeline with a policy and a critic of the given `models:` entries, writing to `out`.
fn runtime(out: &Path, policy: &str, critic: &str, first_step: u64) -> Runtime<CpuBackend> {
    let text = format!(
        r#"Pipeline(name: "t", steps: 4, out_dir: "{}",
            models: {{ "policy": {policy}, "critic": {critic} }},
            envs: {{ "train": (env: FrozenLake(size: 4), groups: 1, group_size: 1) }},
            nodes: {{ "rollout": Rollout(envs: "train", policy: "policy"), "values": Values(model: "critic") }},
            edges: [("rollout", "values")])"#,
        out.display()
    );
    let pipeline = roll_flow_engine::spec::parse::<RollFlow>(Path::new("t.ron"), &text)
        .unwrap_or_else(|d| panic!("{d}"));
    let worker = WorkerInfo::single(first_step);
    Runtime::new(Arc::new(run_plan(&pipeline)), worker).unwrap()
}

const SMALL: &str = "(arch: Tiny(layers: 1, dim: 16, heads: 2))";

/// A word-level tokenizer of three tokens, as a model directory's tokenizer.json.
fn three_token_tokenizer(dir: &Path) {
    let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0, "a": 1, "b": 2}, "unk_token": "<unk>"}}"#;
    std::fs::write(dir.join("tokenizer.json"), json).unwrap();
}

#[test]
fn a_critic_with_a_smaller_vocabulary_than_the_policy_tokenizer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    three_token_tokenizer(dir.path());
    let critic = format!(
        "(arch: Tiny(layers: 1, dim: 16, heads: 2), tokenizer: HfDir(\"{}\"))",
        dir.path().display()
    );
    let mut rt = runtime(&dir.path().join("run"), SMALL, &critic, 0);
    let policy_tokens = rt.policy("policy").unwrap().borrow().tokenizer.vocab_size();
    assert!(policy_tokens > 3);
    let Err(err) = rt.critic("critic") else {
        panic!("a 3-token critic was built for a {policy_tokens}-token policy");
    };
    assert_eq!(
        err,
        format!(
            "critic `critic` has vocab_size 3, but policy `policy`'s tokenizer has \
             {policy_tokens} token ids, which the critic reads; give the critic the policy's \
             tokenizer (the same `tokenizer:`, or an `HfDir` model with that vocabulary)"
        )
    );
    // The same critic with the policy's (built-in) tokenizer is sized to it.
    let mut rt = runtime(&dir.path().join("run"), SMALL, SMALL, 0);
    let critic = rt.critic("critic").unwrap();
    let vocab = critic.borrow().train.module().config.vocab_size;
    assert_eq!(vocab, policy_tokens);
}

#[test]
fn resuming_a_checkpoint_of_another_architecture_names_the_differing_fields() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let checkpoint = step_dir(&out, 1);
    {
        let mut rt = runtime(&out, SMALL, SMALL, 0);
        rt.policy("policy")
            .unwrap()
            .borrow()
            .save(&checkpoint)
            .unwrap();
        rt.critic("critic")
            .unwrap()
            .borrow()
            .save(&checkpoint)
            .unwrap();
    }
    // The same architecture resumes.
    let mut same = runtime(&out, SMALL, SMALL, 1);
    assert!(same.policy("policy").is_ok());
    assert!(same.critic("critic").is_ok());
    // One layer more in the policy, two heads more in the critic.
    let deeper = "(arch: Tiny(layers: 2, dim: 16, heads: 2))";
    let mut rt = runtime(&out, deeper, SMALL, 1);
    let Err(err) = rt.policy("policy") else {
        panic!("a 1-layer checkpoint was loaded into a 2-layer model");
    };
    let config = checkpoint.join("models/policy/hf/config.json");
    assert_eq!(
        err,
        format!(
            "model `policy`: {}: the checkpoint's model does not fit the pipeline's: checkpoint \
             has num_hidden_layers 1, the pipeline asks for 2; resume with the architecture the \
             run was started with",
            config.display()
        )
    );
    let more_heads = "(arch: Tiny(layers: 1, dim: 16, heads: 4))";
    let mut rt = runtime(&out, SMALL, more_heads, 1);
    let Err(err) = rt.critic("critic") else {
        panic!("a 2-head checkpoint was loaded into a 4-head critic");
    };
    assert!(
        err.contains("checkpoint has num_attention_heads 2, the pipeline asks for 4")
            && err.contains("checkpoint has head_dim 8, the pipeline asks for 4"),
        "{err}"
    );
    assert!(err.contains("critics/critic/hf/config.json"), "{err}");
}
