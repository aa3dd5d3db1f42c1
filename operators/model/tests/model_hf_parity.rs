//! The model against Hugging Face transformers on the fixtures made by
//! `tests/fixtures/make_tiny_qwen2.py`: logits, greedy continuation, tokenizer ids and chat
//! template rendering must match what transformers produced.

mod common;

use common::{
    chat_messages, device, expected, fixture, greedy_generation_matches, ids, logits_of, matrix,
    max_abs_diff, tiny_qwen2_sliding_window, B,
};
use roll_flow_model::hf::{load_causal_lm, load_model_dir};
use roll_flow_model::qwen2::Qwen2CausalLm;
use roll_flow_model::TextTokenizer;

/// f32 logits must agree with transformers' f32 logits to this absolute tolerance.
const LOGIT_TOLERANCE: f32 = 1e-4;

#[test]
fn logits_match_transformers_tied_f32() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
    assert!(model.lm_head.is_none(), "fixture has tied embeddings");
    prompt_logits_match(&model, &expected("tiny_qwen2"));
}

/// The logits of every `prompt_ids` entry against the file's `logits`.
fn prompt_logits_match(model: &Qwen2CausalLm<B>, expected: &serde_json::Value) {
    let prompts = expected["prompt_ids"].as_array().unwrap();
    let all_logits = expected["logits"].as_array().unwrap();
    assert!(!prompts.is_empty());
    assert_eq!(
        prompts.len(),
        all_logits.len(),
        "one logits matrix per prompt"
    );
    for (prompt, logits) in prompts.iter().zip(all_logits) {
        let ours = logits_of(model, &ids(prompt));
        let diff = max_abs_diff(&ours, &matrix(logits));
        eprintln!("max |Δlogit| = {diff}");
        assert!(diff < LOGIT_TOLERANCE, "max |Δlogit| = {diff}");
    }
}

#[test]
fn logits_match_transformers_sharded_bf16_untied() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2_sharded_bf16"), &device()).unwrap();
    assert!(model.lm_head.is_some(), "fixture has an untied lm_head");
    let expected = expected("tiny_qwen2_sharded_bf16");
    let ours = logits_of(&model, &ids(&expected["prompt_ids"]));
    let diff = max_abs_diff(&ours, &matrix(&expected["logits"]));
    eprintln!("max |Δlogit| = {diff}");
    assert!(diff < LOGIT_TOLERANCE, "max |Δlogit| = {diff}");
}

/// Sliding-window attention in layer 1 (window 6; prompts of 21, 10 and 1 tokens).
#[test]
fn logits_match_transformers_with_a_sliding_window() {
    let (model, expected) = tiny_qwen2_sliding_window();
    prompt_logits_match(&model, &expected);
}

#[test]
fn greedy_generation_reproduces_transformers_tokens() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
    greedy_generation_matches(&model, &expected("tiny_qwen2"));
}

/// 24 new tokens with the window sliding over the cached keys, three prompts batched.
#[test]
fn greedy_generation_with_a_sliding_window_reproduces_transformers_tokens() {
    let (model, expected) = tiny_qwen2_sliding_window();
    greedy_generation_matches(&model, &expected);
}

#[test]
fn tokenizer_ids_match_transformers() {
    let (_, tokenizer) = load_model_dir::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
    let expected = expected("tiny_qwen2");
    let prompts = expected["prompts"].as_array().unwrap();
    let prompt_ids = expected["prompt_ids"].as_array().unwrap();
    assert!(!prompts.is_empty());
    assert_eq!(prompts.len(), prompt_ids.len(), "ids for every prompt");
    for (text, hf_ids) in prompts.iter().zip(prompt_ids) {
        let ours = tokenizer.encode(text.as_str().unwrap()).unwrap();
        assert_eq!(ours, ids(hf_ids));
        assert_eq!(
            tokenizer.decode(&ours, false).unwrap(),
            text.as_str().unwrap()
        );
    }
    assert_eq!(
        tokenizer.stop_tokens(),
        vec![0, 2],
        "<|endoftext|> and <|im_end|>"
    );
}

#[test]
fn chat_template_renders_as_transformers() {
    let tokenizer = TextTokenizer::from_model_dir(&fixture("tiny_qwen2")).unwrap();
    let expected = expected("tiny_qwen2");
    let cases = expected["chat"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let messages = chat_messages(&case["messages"]);
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let ours = tokenizer
            .apply_chat_template(&messages, add_generation_prompt)
            .unwrap();
        assert_eq!(ours, case["rendered"].as_str().unwrap());
    }
}
