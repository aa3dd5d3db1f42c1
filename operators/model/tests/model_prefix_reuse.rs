//! Prefix reuse across turns: a session's next request, prefilled after the keys and values
//! its previous request left, generates what it generates from scratch (same tokens,
//! log-probs within 1e-4), with the previous prompt and reply taken from the cache.

mod common;

use common::{alone, device, request, tiny_qwen2, tiny_qwen2_sliding_window, B};
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::{
    ContinuousBatcher, GenerationOutput, GenerationRequest, SamplingParams,
};
use roll_flow_model::qwen2::Qwen2CausalLm;

/// A 5-token sampled reply (temperature 0.9) to `prompt`.
fn reply_request(prompt: Vec<u32>, seed: u64) -> GenerationRequest {
    let sampling = SamplingParams {
        temperature: 0.9,
        top_p: 1.0,
        top_k: 0,
    };
    request(&prompt, 5, sampling, seed)
}

fn assert_same(a: &GenerationOutput, b: &GenerationOutput, what: &str) {
    assert_eq!(a.tokens, b.tokens, "{what}");
    for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
        assert!((x - y).abs() < 1e-4, "{what}: {x} vs {y}");
    }
}

/// Three conversations of three turns, served together: every turn's prompt is the last
/// prompt, its reply and a new observation of a different length per conversation.
#[test]
fn multi_turn_sessions_generate_what_fresh_prefills_generate() {
    multi_turn_sessions_match_fresh_prefills(&tiny_qwen2());
}

/// The same with a sliding window (6 keys) in layer 1, shorter than the conversations: the
/// reused cache keeps every column, the mask hides the old ones.
#[test]
fn multi_turn_sessions_with_a_sliding_window_match_fresh_prefills() {
    multi_turn_sessions_match_fresh_prefills(&tiny_qwen2_sliding_window().0);
}

/// A window of 5 keys in every layer (grouped-query heads), over conversations of up to
/// ~250 tokens: stored prefixes keep only their last columns (`prefix_reuse::
/// stored_columns`) and later turns start from them; a session whose new part is much
/// shorter than another's re-feeds more than those columns cover, so its prefix is dropped
/// and it prefills from scratch. Both must generate what a fresh prefill generates.
#[test]
fn multi_turn_sessions_with_a_window_in_every_layer_match_fresh_prefills() {
    let arch = TinyArch {
        layers: 2,
        dim: 32,
        heads: 4,
        kv_heads: Some(2),
        sliding_window: Some(5),
        ..TinyArch::default()
    };
    let model = Qwen2CausalLm::<B>::random(&Qwen2Config::tiny(&arch, 300), 11, &device());
    assert_eq!(model.model.window_reach(), Some(4));
    // Long first prompts, then equal short new parts (the reply's last token and a 3-token
    // observation): every turn starts from a prefix that has dropped columns, and its first
    // generated token still reads the prefix's keys (two layers of a 5-key window reach 8
    // positions back).
    let first_prompts = [(1..101).collect(), (2..92).collect(), (3..83).collect()];
    let observations = [vec![11, 12, 13], vec![40, 41, 42], vec![7, 8, 9]];
    conversations_match_fresh_prefills(&model, first_prompts, &observations, 6, true);
    // Session 1 starts long and adds 7 tokens a turn: its prefill re-feeds 88 tokens to
    // line up with session 2's 95, more than its stored prefix holds, so it drops it.
    let first_prompts = [vec![1, 237, 262], (1..121).collect(), vec![25]];
    let observations = [(100..130).collect(), vec![40, 41], (150..240).collect()];
    conversations_match_fresh_prefills(&model, first_prompts, &observations, 4, false);
}

fn multi_turn_sessions_match_fresh_prefills(model: &Qwen2CausalLm<B>) {
    let first_prompts = [vec![1, 237, 262], vec![50, 200, 282, 3, 4], vec![25]];
    let observations = [vec![11, 12, 13], vec![40], vec![7, 8, 9, 10, 11, 12, 13]];
    conversations_match_fresh_prefills(model, first_prompts, &observations, 3, false);
}

/// Three conversations served together for `turns` turns: every turn's prompt is the last
/// prompt, its reply and the session's observation. With `equal_new_parts` (observations
/// of one length) no row re-feeds cached tokens, so every cached token must be reused.
fn conversations_match_fresh_prefills(
    model: &Qwen2CausalLm<B>,
    first_prompts: [Vec<u32>; 3],
    observations: &[Vec<u32>; 3],
    turns: u64,
    equal_new_parts: bool,
) {
    let mut prompts = first_prompts;
    let mut batcher = ContinuousBatcher::<B>::new(3, &device());
    // Each later turn can take all but the previous reply's last token and the new
    // observation from the cache.
    let mut reusable = 0;
    for turn in 0..turns {
        if turn > 0 {
            reusable += (0..3)
                .map(|s| prompts[s].len() - 1 - observations[s].len())
                .sum::<usize>();
        }
        let requests: Vec<GenerationRequest> = prompts
            .iter()
            .enumerate()
            .map(|(s, p)| reply_request(p.clone(), 10 * turn + s as u64))
            .collect();
        for (s, r) in requests.iter().enumerate() {
            batcher
                .submit_in_session(model, r.clone(), s as u64)
                .unwrap();
        }
        let outputs = batcher.run_to_completion(model);
        for (s, (out, r)) in outputs.iter().zip(requests).enumerate() {
            assert_same(out, &alone(model, r), &format!("turn {turn}, session {s}"));
            prompts[s].extend(&out.tokens);
            prompts[s].extend(&observations[s]);
        }
        if turn == 0 {
            assert_eq!(batcher.reused_prompt_tokens(), 0);
        }
    }
    assert!(batcher.reused_prompt_tokens() > 0);
    if equal_new_parts {
        assert_eq!(batcher.reused_prompt_tokens(), reusable);
    }
}

/// One session alone, by hand: the second prompt extends the first prompt (3 tokens) and
/// its 5-token reply, whose last token never went through the model, so 3 + 4 tokens come
/// from the cache. A third prompt that departs from the conversation after its first two
/// tokens reuses those two only.
#[test]
fn reuse_covers_the_common_prefix_only() {
    let model = tiny_qwen2();
    let mut batcher = ContinuousBatcher::<B>::new(1, &device());
    let first = vec![1u32, 337, 262];
    batcher
        .submit_in_session(&model, reply_request(first.clone(), 1), 9)
        .unwrap();
    let reply = batcher.run_to_completion(&model).pop().unwrap();
    let second = [first.clone(), reply.tokens.clone(), vec![11, 12]].concat();
    batcher
        .submit_in_session(&model, reply_request(second.clone(), 2), 9)
        .unwrap();
    let out = batcher.run_to_completion(&model).pop().unwrap();
    assert_eq!(batcher.reused_prompt_tokens(), 3 + 4);
    assert_same(
        &out,
        &alone(&model, reply_request(second, 2)),
        "second turn",
    );

    let departed = vec![1u32, 337, 40, 41];
    batcher
        .submit_in_session(&model, reply_request(departed.clone(), 3), 9)
        .unwrap();
    let out = batcher.run_to_completion(&model).pop().unwrap();
    assert_eq!(batcher.reused_prompt_tokens(), 3 + 4 + 2);
    assert_same(
        &out,
        &alone(&model, reply_request(departed, 3)),
        "departed turn",
    );
}

/// Requests that arrive together with one prompt (a GRPO group's samples) prefill it once:
/// four samples of one prompt, with another prompt between them, each generate what they
/// generate alone, and three of the four prompts count as reused.
#[test]
fn samples_of_one_prompt_prefill_it_once() {
    let model = tiny_qwen2();
    let shared = vec![1u32, 337, 262, 201, 50];
    let other = vec![25u32, 26, 27];
    let requests = [
        (shared.clone(), 1),
        (other.clone(), 2),
        (shared.clone(), 3),
        (shared.clone(), 4),
        (shared.clone(), 5),
    ];
    let mut batcher = ContinuousBatcher::<B>::new(8, &device());
    for (prompt, seed) in &requests {
        batcher
            .submit(&model, reply_request(prompt.clone(), *seed))
            .unwrap();
    }
    let outputs = batcher.run_to_completion(&model);
    assert_eq!(batcher.reused_prompt_tokens(), 3 * shared.len());
    let mut replies = std::collections::BTreeSet::new();
    for (out, (prompt, seed)) in outputs.iter().zip(&requests) {
        let want = alone(&model, reply_request(prompt.clone(), *seed));
        assert_same(out, &want, &format!("request with seed {seed}"));
        replies.insert(out.tokens.clone());
    }
    assert!(replies.len() > 2, "the copies draw their own tokens");
}
