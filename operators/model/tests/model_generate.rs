//! Generation: KV-cache decoding equals full recomputation, packed weights change no bit of a
//! decode step, continuous batching gives each request the tokens it gets alone, sampling is
//! seeded per request, and stop tokens / token limits end sequences.

mod common;

use burn::tensor::{Int, Tensor, TensorData};
use common::{alone, device, logits_of, request, tiny_qwen2, B};
use roll_flow_kernels::{with_packed_weights, PackedWeights};
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::generate::sampler::log_softmax_at;
use roll_flow_model::generate::{
    ContinuousBatcher, FinishReason, GenerationOutput, GenerationRequest, SamplingParams,
};
use roll_flow_model::qwen2::{AttentionLayout, Qwen2CausalLm};

const PROMPTS: [&[u32]; 5] = [
    &[1, 337, 262, 201, 50, 301],
    &[50, 500, 482],
    &[25],
    &[7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
    &[300, 301],
];

#[test]
fn cached_decoding_matches_full_recomputation() {
    let model = tiny_qwen2();
    let vocab = model.config.vocab_size;
    for prompt in PROMPTS {
        let out = alone(&model, request(prompt, 12, SamplingParams::greedy(), 0));
        let mut sequence = prompt.to_vec();
        sequence.extend(&out.tokens);
        let logits = logits_of(&model, &sequence);
        assert_eq!(out.tokens.len(), 12);
        assert_eq!(out.logprobs.len(), out.tokens.len(), "a log-prob per token");
        for (i, (&token, &logprob)) in out.tokens.iter().zip(&out.logprobs).enumerate() {
            let row = &logits[(prompt.len() - 1 + i) * vocab..(prompt.len() + i) * vocab];
            let best = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(
                row[token as usize], best,
                "step {i}: cached greedy token is the recomputed argmax"
            );
            let full = log_softmax_at(row, 1.0, token as usize);
            assert!(
                (full - logprob).abs() < 1e-4,
                "step {i}: {full} vs {logprob}"
            );
        }
    }
}

/// A decode step inside a packed-weights scope, as the batcher runs it, gives the logits of
/// the same step outside one, bit for bit; where the CPU's few-rows kernels run (AVX-512,
/// no `ROLL_FLOW_KERNELS_ISA` cap) the scope packed the 7 projections of each layer and
/// the tied head (from the embedding, its transpose).
#[test]
fn packed_weights_give_the_same_logits_bit_for_bit() {
    let model = tiny_qwen2();
    let ids = vec![1i64, 337, 262, 50, 25, 300];
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [6, 1]), &device());
    let layout = AttentionLayout::right_padded(6, 1);
    let plain = model.forward(tokens.clone(), &layout, None).into_data();
    let mut store = PackedWeights::new();
    for _ in 0..2 {
        let packed =
            with_packed_weights(&mut store, || model.forward(tokens.clone(), &layout, None));
        assert_eq!(packed.into_data(), plain);
    }
    let kernels_run = cfg!(target_arch = "x86_64")
        && std::env::var_os("ROLL_FLOW_KERNELS_ISA").is_none()
        && is_avx512();
    let layers = model.model.layers.len();
    assert!(
        model.config.tie_word_embeddings,
        "the fixture ties its head"
    );
    assert_eq!(store.len(), if kernels_run { 7 * layers + 1 } else { 0 });
}

#[cfg(target_arch = "x86_64")]
fn is_avx512() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512dq")
}

#[cfg(not(target_arch = "x86_64"))]
fn is_avx512() -> bool {
    false
}

#[test]
fn continuous_batching_matches_running_alone() {
    let model = tiny_qwen2();
    let sampling = [
        SamplingParams::greedy(),
        SamplingParams {
            temperature: 0.9,
            top_p: 0.95,
            top_k: 40,
        },
    ];
    for params in sampling {
        let requests: Vec<GenerationRequest> = PROMPTS
            .iter()
            .enumerate()
            .map(|(i, p)| request(p, 4 + 3 * i, params.clone(), 100 + i as u64))
            .collect();
        let solo: Vec<GenerationOutput> =
            requests.iter().map(|r| alone(&model, r.clone())).collect();
        // Batch of at most 3 rows; requests arrive one per step, so rows join and leave while
        // others are mid-generation.
        let mut batcher = ContinuousBatcher::<B>::new(3, &device());
        let mut outputs = Vec::new();
        let mut pending = requests.into_iter();
        let mut max_running = 0;
        loop {
            if let Some(r) = pending.next() {
                batcher.submit(&model, r).unwrap();
            } else if batcher.is_idle() {
                break;
            }
            outputs.extend(batcher.step(&model));
            max_running = max_running.max(batcher.running());
        }
        assert_eq!(max_running, 3, "the batch filled up");
        outputs.sort_by_key(|o| o.id);
        assert_eq!(outputs.len(), solo.len(), "every request finished");
        for (batched, solo) in outputs.iter().zip(&solo) {
            assert_eq!(batched.tokens, solo.tokens);
            assert_eq!(batched.finish, FinishReason::Length);
            assert_eq!(batched.logprobs.len(), batched.tokens.len());
            assert_eq!(solo.logprobs.len(), solo.tokens.len());
            for (a, b) in batched.logprobs.iter().zip(&solo.logprobs) {
                assert!((a - b).abs() < 1e-4, "{a} vs {b}");
            }
        }
    }
}

/// With a step's logits above the batcher's threshold (16 rows × 8,192), its rows are
/// sampled on rayon's threads: each request still gets the tokens it gets alone (one row:
/// sampled on the calling thread).
#[test]
fn rows_sampled_in_parallel_get_the_tokens_they_get_alone() {
    let config = Qwen2Config::tiny(&TinyArch::default(), 8192);
    let model = Qwen2CausalLm::<B>::random(&config, 7, &device());
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 0.9,
        top_k: 0,
    };
    let requests: Vec<GenerationRequest> = (0..16u32)
        .map(|i| request(&[i * 500 + 3, i + 1, 4000], 6, params.clone(), u64::from(i)))
        .collect();
    let mut batcher = ContinuousBatcher::<B>::new(16, &device());
    for r in &requests {
        batcher.submit(&model, r.clone()).unwrap();
    }
    let batched = batcher.run_to_completion(&model);
    assert_eq!(batched.len(), 16);
    for (batched, r) in batched.iter().zip(requests) {
        let solo = alone(&model, r);
        assert_eq!(batched.tokens, solo.tokens);
        for (a, b) in batched.logprobs.iter().zip(&solo.logprobs) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
}

#[test]
fn sampling_is_seeded_per_request() {
    let model = tiny_qwen2();
    let params = SamplingParams {
        temperature: 1.0,
        top_p: 1.0,
        top_k: 0,
    };
    let a = alone(&model, request(PROMPTS[0], 16, params.clone(), 5));
    let b = alone(&model, request(PROMPTS[0], 16, params.clone(), 5));
    let c = alone(&model, request(PROMPTS[0], 16, params, 6));
    assert_eq!(a.tokens, b.tokens);
    assert_ne!(
        a.tokens, c.tokens,
        "another seed samples another continuation"
    );
}

#[test]
fn top_k_one_is_greedy_and_logprob_uses_temperature() {
    let model = tiny_qwen2();
    let vocab = model.config.vocab_size;
    let greedy = alone(&model, request(PROMPTS[1], 8, SamplingParams::greedy(), 0));
    let params = SamplingParams {
        temperature: 0.7,
        top_p: 1.0,
        top_k: 1,
    };
    let top1 = alone(&model, request(PROMPTS[1], 8, params, 3));
    assert_eq!(top1.tokens, greedy.tokens);
    let mut sequence = PROMPTS[1].to_vec();
    sequence.extend(&top1.tokens);
    let logits = logits_of(&model, &sequence);
    assert_eq!(top1.tokens.len(), 8);
    assert_eq!(
        top1.logprobs.len(),
        top1.tokens.len(),
        "a log-prob per token"
    );
    for (i, (&token, &logprob)) in top1.tokens.iter().zip(&top1.logprobs).enumerate() {
        let row = &logits[(PROMPTS[1].len() - 1 + i) * vocab..(PROMPTS[1].len() + i) * vocab];
        let expected = log_softmax_at(row, 0.7, token as usize);
        assert!((expected - logprob).abs() < 1e-4, "{expected} vs {logprob}");
    }
}

#[test]
fn stop_token_ends_the_sequence_and_is_kept() {
    let model = tiny_qwen2();
    let free = alone(&model, request(PROMPTS[3], 10, SamplingParams::greedy(), 0));
    let stop = free.tokens[4];
    let first = free.tokens.iter().position(|&t| t == stop).unwrap();
    let mut r = request(PROMPTS[3], 10, SamplingParams::greedy(), 0);
    r.stop_tokens = vec![stop];
    let stopped = alone(&model, r);
    assert_eq!(stopped.finish, FinishReason::Stop);
    assert_eq!(stopped.tokens, free.tokens[..=first].to_vec());
    assert_eq!(free.tokens.len(), 10);
    assert_eq!(free.finish, FinishReason::Length);
}

#[test]
fn cancel_removes_a_running_request() {
    let model = tiny_qwen2();
    let mut batcher = ContinuousBatcher::<B>::new(4, &device());
    let a = batcher
        .submit(&model, request(PROMPTS[0], 20, SamplingParams::greedy(), 0))
        .unwrap();
    let b = batcher
        .submit(&model, request(PROMPTS[1], 6, SamplingParams::greedy(), 0))
        .unwrap();
    batcher.step(&model);
    let cancelled = batcher.cancel(a).unwrap();
    assert_eq!(cancelled.finish, FinishReason::Cancelled);
    assert_eq!(cancelled.tokens.len(), 2);
    let rest = batcher.run_to_completion(&model);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].id, b);
    let solo = alone(&model, request(PROMPTS[1], 6, SamplingParams::greedy(), 0));
    assert_eq!(rest[0].tokens, solo.tokens);
}

#[test]
fn bad_requests_are_refused_with_reasons() {
    let model = tiny_qwen2();
    let mut batcher = ContinuousBatcher::<B>::new(4, &device());
    let cases = [
        (
            request(&[], 4, SamplingParams::greedy(), 0),
            "the prompt is empty",
        ),
        (
            request(&[1], 0, SamplingParams::greedy(), 0),
            "max_new_tokens must be at least 1",
        ),
        (
            request(&[9999], 4, SamplingParams::greedy(), 0),
            "token id 9999 is outside the vocabulary",
        ),
        (
            request(&[1; 250], 10, SamplingParams::greedy(), 0),
            "exceeds the model's context of 256",
        ),
        // A sum past usize::MAX wrapped around and passed the check.
        (
            request(&[1; 240], usize::MAX - 200, SamplingParams::greedy(), 0),
            "exceeds the model's context of 256",
        ),
        (
            request(
                &[1],
                4,
                SamplingParams {
                    temperature: -1.0,
                    top_p: 1.0,
                    top_k: 0,
                },
                0,
            ),
            "temperature -1",
        ),
        (
            request(
                &[1],
                4,
                SamplingParams {
                    temperature: 1.0,
                    top_p: 0.0,
                    top_k: 0,
                },
                0,
            ),
            "top_p 0 must be in (0, 1]",
        ),
    ];
    for (r, expected) in cases {
        let message = batcher.submit(&model, r).unwrap_err().to_string();
        assert!(message.contains(expected), "{message}");
    }
}
