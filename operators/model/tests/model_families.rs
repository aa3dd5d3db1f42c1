//! The Llama and Qwen3 families against transformers on the fixtures made by
//! `tests/fixtures/make_tiny_families.py` (Llama: no biases, untied head, llama3 rope
//! scaling; Qwen3: q/k RMSNorm, a head wider than hidden / heads, tied): logits, greedy
//! continuations through the KV cache, and a save/load round trip.

mod common;

use common::{
    device, expected, fixture, greedy_generation_matches, ids, logits_of, matrix, max_abs_diff, B,
};
use roll_flow_model::hf::{load_causal_lm, save_causal_lm};
use roll_flow_model::qwen2::Qwen2CausalLm;
use roll_flow_model::weights::to_f32_vec;

/// f32 logits must agree with transformers' f32 logits to this absolute tolerance.
const LOGIT_TOLERANCE: f32 = 1e-4;

fn matches_transformers(name: &str) -> Qwen2CausalLm<B> {
    let model = load_causal_lm::<B>(&fixture(name), &device()).unwrap();
    let expected = expected(name);
    let prompts = expected["prompt_ids"].as_array().unwrap();
    assert_eq!(prompts.len(), 3);
    for (prompt, logits) in prompts.iter().zip(expected["logits"].as_array().unwrap()) {
        let diff = max_abs_diff(&logits_of(&model, &ids(prompt)), &matrix(logits));
        eprintln!("{name}: max |Δlogit| = {diff}");
        assert!(diff < LOGIT_TOLERANCE, "{name}: max |Δlogit| = {diff}");
    }
    greedy_generation_matches(&model, &expected);
    model
}

#[test]
fn llama_with_llama3_rope_matches_transformers() {
    let model = matches_transformers("tiny_llama");
    let c = &model.config;
    assert_eq!(
        (c.qkv_bias(), c.o_bias(), c.qk_norm()),
        (false, false, false)
    );
    assert!(model.lm_head.is_some(), "untied head");
    assert!(
        c.llama3_rope().unwrap().is_some(),
        "llama3 rope scaling read"
    );
    let attention = &model.model.layers[0].self_attn;
    assert!(attention.q_proj.bias.is_none() && attention.o_proj.bias.is_none());
}

#[test]
fn qwen3_with_head_norms_matches_transformers() {
    let model = matches_transformers("tiny_qwen3");
    let c = &model.config;
    assert_eq!((c.qkv_bias(), c.qk_norm(), c.head_dim()), (false, true, 32));
    assert!(model.model.layers[0].self_attn.q_norm.is_some());
}

/// Saved and loaded back, each family keeps its class, switches and every weight.
#[test]
fn families_round_trip_through_save() {
    for name in ["tiny_llama", "tiny_qwen3"] {
        let model = load_causal_lm::<B>(&fixture(name), &device()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        save_causal_lm(&model, dir.path()).unwrap();
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("config.json")).unwrap())
                .unwrap();
        let class = model.config.family().architecture();
        assert_eq!(config["architectures"][0], class);
        let again = load_causal_lm::<B>(dir.path(), &device()).unwrap();
        assert_eq!(again.config.llama3_rope(), model.config.llama3_rope());
        let tokens = [1, 5, 9, 200, 3];
        assert_eq!(
            logits_of(&again, &tokens),
            logits_of(&model, &tokens),
            "{name}"
        );
        let norm = |m: &Qwen2CausalLm<B>| to_f32_vec(&m.model.norm.weight.val());
        assert_eq!(norm(&again), norm(&model));
    }
}
