//! The trie, guided generation with a random Tiny model, and guided log-prob recomputation.

use std::collections::HashSet;
use std::sync::Arc;

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::AnswerChoices;
use crate::generate::{ContinuousBatcher, FinishReason, GenerationRequest, SamplingParams};
use crate::logprob::{response_logprobs_guided, response_scores, Scoring};
use crate::packed::PackedSequences;
use crate::weights::to_f32_vec;
use crate::{ChatMessage, Qwen2CausalLm, Qwen2Config, TextTokenizer, TinyArch};

type B = Flex;

fn error(sequences: Vec<Vec<u32>>) -> String {
    AnswerChoices::new(sequences).unwrap_err().to_string()
}

#[test]
fn trie_walks_prefixes_and_reports_allowed_tokens() {
    let choices = AnswerChoices::new(vec![vec![5, 7, 2], vec![5, 3, 2], vec![5, 7, 9, 2]]).unwrap();
    assert_eq!(choices.allowed(&[]), Some(&[5][..]));
    assert_eq!(choices.allowed(&[5]), Some(&[3, 7][..]), "sorted");
    assert_eq!(choices.allowed(&[5, 7]), Some(&[2, 9][..]));
    assert_eq!(
        choices.allowed(&[5, 7, 2]),
        None,
        "complete: nothing may follow"
    );
    assert_eq!(choices.allowed(&[6]), None, "left the trie");
    assert!(choices.is_complete(&[5, 3, 2]) && choices.is_complete(&[5, 7, 9, 2]));
    assert!(!choices.is_complete(&[5, 7]) && !choices.is_complete(&[4]));
    assert_eq!(choices.longest(), 4);
    let along = choices.allowed_along(&[5, 7, 9, 2]);
    let expected: Vec<Option<&[u32]>> = vec![Some(&[5]), Some(&[3, 7]), Some(&[2, 9]), Some(&[2])];
    assert_eq!(along, expected);
    let along = choices.allowed_along(&[5, 8, 2]);
    assert_eq!(along, vec![Some(&[5][..]), Some(&[3, 7][..]), None]);
    let along = choices.allowed_along(&[5, 3, 2, 2]);
    assert_eq!(along[3], None, "past a whole choice");
    for prefix in [&[][..], &[5], &[5, 7], &[5, 7, 9], &[5, 3, 2, 2], &[1, 2]] {
        let along = choices.allowed_along(prefix);
        for i in 0..prefix.len() {
            assert_eq!(along[i], choices.allowed(&prefix[..i]), "{prefix:?} at {i}");
        }
    }
}

#[test]
fn trie_refuses_empty_duplicate_and_prefix_answers() {
    assert!(error(vec![]).contains("set of allowed answers is empty"));
    assert!(error(vec![vec![1], vec![]]).contains("answer 1 has no tokens"));
    let message = error(vec![vec![4, 5, 6], vec![4, 5]]);
    assert!(
        message.contains("answer 1 [4, 5] is a prefix of answer 0")
            && message.contains("stopping is not a token"),
        "{message}"
    );
    assert!(error(vec![vec![3, 1], vec![2], vec![3, 1]]).contains("answers 0 and 2 are the same"));
}

const ANSWERS: [&str; 5] = [
    "<answer>Left</answer>",
    "<answer>Down</answer>",
    "<answer>Right</answer>",
    "<answer>Up</answer>",
    "<answer>Left || Up</answer>",
];

/// The five answers above with `<|im_end|>`: a forced `<answer>`, a four-way choice, then a
/// two-way choice after `Left`, then forced tokens to the end.
fn answers(tokenizer: &TextTokenizer) -> Arc<AnswerChoices> {
    let texts: Vec<String> = ANSWERS.iter().map(|s| s.to_string()).collect();
    let stop = tokenizer.token_id("<|im_end|>").unwrap();
    Arc::new(AnswerChoices::from_texts(tokenizer, &texts, stop).unwrap())
}

fn model<Bk: Backend>() -> Qwen2CausalLm<Bk> {
    let arch = TinyArch {
        layers: 2,
        dim: 32,
        heads: 4,
        kv_heads: Some(2),
        max_positions: 256,
        ..Default::default()
    };
    let mut config = Qwen2Config::tiny(&arch, TextTokenizer::builtin().vocab_size());
    // Larger than the default 0.02, so the policy is far from uniform.
    config.initializer_range = 0.1;
    Qwen2CausalLm::random(&config, 17, &Default::default())
}

fn prompt(tokenizer: &TextTokenizer, observation: &str) -> Vec<u32> {
    let message = ChatMessage::new("user", observation);
    let text = tokenizer.apply_chat_template(&[message], true).unwrap();
    tokenizer.encode(&text).unwrap()
}

fn request(
    prompt: Vec<u32>,
    guide: &Arc<AnswerChoices>,
    temperature: f32,
    seed: u64,
) -> GenerationRequest {
    GenerationRequest {
        prompt,
        max_new_tokens: 16,
        sampling: SamplingParams {
            temperature,
            ..Default::default()
        },
        stop_tokens: vec![],
        seed,
        guide: Some(guide.clone()),
    }
}

/// Guided replies with their prompts and behaviour log-probs.
struct Generated {
    prompts: Vec<Vec<u32>>,
    responses: Vec<Vec<u32>>,
    logprobs: Vec<Vec<f32>>,
}

/// Generates one guided reply per seed (several prompts, a batch of 6 rows).
fn generate(temperature: f32, seeds: u64) -> Generated {
    let tokenizer = TextTokenizer::builtin();
    let guide = answers(&tokenizer);
    let model = model::<B>();
    let observations = ["P_O\n__G", "#####\n#P X#\n#__O#", "G_\nOP"];
    let mut batcher = ContinuousBatcher::<B>::new(6, &Default::default());
    let mut prompts = Vec::new();
    for seed in 0..seeds {
        let p = prompt(&tokenizer, observations[seed as usize % observations.len()]);
        prompts.push(p.clone());
        batcher
            .submit(&model, request(p, &guide, temperature, seed))
            .unwrap();
    }
    let outputs = batcher.run_to_completion(&model);
    let mut responses = Vec::new();
    let mut logprobs = Vec::new();
    for out in outputs {
        assert_eq!(out.finish, FinishReason::Stop, "{:?}", out.tokens);
        assert!(
            guide.is_complete(&out.tokens),
            "{:?} is a whole choice",
            out.tokens
        );
        responses.push(out.tokens);
        logprobs.push(out.logprobs);
    }
    Generated {
        prompts,
        responses,
        logprobs,
    }
}

#[test]
fn guided_generation_only_produces_allowed_answers_and_reaches_each() {
    let tokenizer = TextTokenizer::builtin();
    let responses = generate(1.0, 96).responses;
    let texts: HashSet<String> = responses
        .iter()
        .map(|r| tokenizer.decode(r, true).unwrap())
        .collect();
    let all: HashSet<String> = ANSWERS.iter().map(|s| s.to_string()).collect();
    assert_eq!(texts, all, "every answer, and nothing else");
    let greedy = generate(0.0, 3).responses;
    assert!(greedy
        .iter()
        .all(|r| r.last() == tokenizer.token_id("<|im_end|>").as_ref()));
}

#[test]
fn forced_tokens_are_jumped_over_with_log_prob_zero() {
    let tokenizer = TextTokenizer::builtin();
    let model = model::<B>();
    // One choice: the whole reply is forced and finishes without a decision.
    let only = Arc::new(AnswerChoices::new(vec![vec![5, 6, 7]]).unwrap());
    let mut batcher = ContinuousBatcher::<B>::new(2, &Default::default());
    batcher
        .submit(&model, request(prompt(&tokenizer, "P_"), &only, 1.0, 0))
        .unwrap();
    let out = batcher.run_to_completion(&model).pop().unwrap();
    assert_eq!(out.finish, FinishReason::Stop);
    assert_eq!(out.tokens, vec![5, 6, 7]);
    assert_eq!(out.logprobs, vec![0.0; 3]);
    // Generated replies: forced positions have log-prob exactly 0, choice points a
    // proper (negative) log-prob of the restricted distribution.
    let guide = answers(&tokenizer);
    let generated = generate(1.0, 12);
    for (reply, logprobs) in generated.responses.iter().zip(&generated.logprobs) {
        assert_eq!(reply.len(), logprobs.len());
        for (allowed, &lp) in guide.allowed_along(reply).iter().zip(logprobs) {
            match allowed {
                Some(a) if a.len() == 1 => assert_eq!(lp, 0.0, "{reply:?}"),
                _ => assert!(lp < 0.0 && lp.is_finite(), "{reply:?}: {lp}"),
            }
        }
    }
}

#[test]
fn guided_reply_shorter_than_max_new_tokens_ends_with_length() {
    let tokenizer = TextTokenizer::builtin();
    let guide = answers(&tokenizer);
    let model = model::<B>();
    let mut batcher = ContinuousBatcher::<B>::new(2, &Default::default());
    let mut short = request(prompt(&tokenizer, "P_"), &guide, 1.0, 0);
    short.max_new_tokens = 2;
    batcher.submit(&model, short).unwrap();
    let out = batcher.run_to_completion(&model).pop().unwrap();
    assert_eq!(out.finish, FinishReason::Length);
    assert_eq!(out.tokens.len(), 2);
    assert!(
        guide.allowed(&out.tokens).is_some(),
        "still a prefix of a choice"
    );
    let outside = Arc::new(AnswerChoices::new(vec![vec![1, 9999]]).unwrap());
    let message = batcher
        .submit(&model, request(vec![1, 2], &outside, 1.0, 0))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("token id 9999 is outside the vocabulary"),
        "{message}"
    );
}

/// Packs prompts + replies; returns the packing, the response mask and, per response token in
/// packed order, its allowed set.
fn pack<'a>(
    guide: &'a AnswerChoices,
    prompts: &[Vec<u32>],
    responses: &'a [Vec<u32>],
) -> (PackedSequences, Vec<bool>, Vec<Option<&'a [u32]>>) {
    let sequences: Vec<Vec<u32>> = prompts
        .iter()
        .zip(responses)
        .map(|(p, r)| [p.as_slice(), r].concat())
        .collect();
    let mask = prompts
        .iter()
        .zip(responses)
        .flat_map(|(p, r)| {
            std::iter::repeat_n(false, p.len()).chain(std::iter::repeat_n(true, r.len()))
        })
        .collect();
    let allowed = responses
        .iter()
        .flat_map(|r| guide.allowed_along(r))
        .collect();
    (PackedSequences::from_sequences(&sequences), mask, allowed)
}

#[test]
fn recomputed_guided_logprobs_equal_the_behaviour_logprobs() {
    let tokenizer = TextTokenizer::builtin();
    let guide = answers(&tokenizer);
    let model = model::<B>();
    // Greedy decoding reports log-probs at temperature 1.
    for (temperature, recompute_at) in [(1.0, 1.0), (0.7, 0.7), (0.0, 1.0)] {
        let Generated {
            prompts,
            responses,
            logprobs: behaviour,
        } = generate(temperature, 12);
        let (packed, mask, allowed) = pack(&guide, &prompts, &responses);
        assert!(allowed.iter().all(Option::is_some));
        let out = response_logprobs_guided(&model, &packed, &mask, recompute_at, &allowed).unwrap();
        let recomputed = to_f32_vec(&out.logprobs);
        let entropy = to_f32_vec(&out.entropy);
        let behaviour: Vec<f32> = behaviour.concat();
        assert_eq!(recomputed.len(), behaviour.len());
        let mut forced = 0;
        for (i, (r, b)) in recomputed.iter().zip(&behaviour).enumerate() {
            assert!(
                (r - b).abs() < 1e-5,
                "T {temperature} token {i}: {r} vs {b}"
            );
            if allowed[i].is_some_and(|a| a.len() == 1) {
                forced += 1;
                assert_eq!((*r, entropy[i]), (0.0, 0.0), "forced token {i}");
            } else {
                assert!(*r < 0.0 && entropy[i] > 0.0, "choice token {i}");
            }
        }
        assert!(forced > 0 && forced < behaviour.len());
    }
}

#[test]
fn guided_logprobs_of_a_choice_point_are_a_distribution_over_the_allowed_tokens() {
    let tokenizer = TextTokenizer::builtin();
    let guide = answers(&tokenizer);
    let model = model::<B>();
    let mut base = prompt(&tokenizer, "P_O\n__G");
    base.push(tokenizer.token_id("<answer>").unwrap());
    let prefix = &base[base.len() - 1..];
    let choices = guide.allowed(prefix).unwrap();
    assert_eq!(choices.len(), 4, "Left, Down, Right, Up");
    for temperature in [1.0, 0.5] {
        let sequences: Vec<Vec<u32>> = choices
            .iter()
            .map(|&c| [base.clone(), vec![c]].concat())
            .collect();
        let packed = PackedSequences::from_sequences(&sequences);
        let mask: Vec<bool> = (0..packed.tokens.len())
            .map(|t| packed.locate(t).1 == base.len())
            .collect();
        let allowed = vec![Some(choices); choices.len()];
        let out = response_logprobs_guided(&model, &packed, &mask, temperature, &allowed).unwrap();
        let logprobs = to_f32_vec(&out.logprobs);
        let total: f64 = logprobs.iter().map(|&l| (l as f64).exp()).sum();
        assert!((total - 1.0).abs() < 1e-5, "T {temperature}: mass {total}");
        let entropy: f64 = -logprobs
            .iter()
            .map(|&l| (l as f64).exp() * l as f64)
            .sum::<f64>();
        for h in to_f32_vec(&out.entropy) {
            assert!((h as f64 - entropy).abs() < 1e-5, "{h} vs {entropy}");
        }
        assert!(entropy < (4.0f64).ln() + 1e-6);
        // KL(U‖π) over the four choices: −ln 4 − the mean of their log-probs.
        let scoring = Scoring {
            temperature,
            allowed: Some(&allowed),
            uniform_kl: true,
            prefix_grouped: false,
        };
        let scored = response_scores(&model, &packed, &mask, &scoring).unwrap();
        let want = -(4.0f64).ln() - logprobs.iter().map(|&l| l as f64).sum::<f64>() / 4.0;
        for kl in to_f32_vec(&scored.uniform_kl.unwrap()) {
            assert!((kl as f64 - want).abs() < 1e-5, "{kl} vs {want}");
        }
    }
}

#[test]
fn guided_logprobs_refuse_inconsistent_allowed_sets() {
    let model = model::<B>();
    let packed = PackedSequences::from_sequences(&[vec![1u32, 5, 6]]);
    let mask = [false, true, true];
    let run = |allowed: &[Option<&[u32]>]| {
        response_logprobs_guided(&model, &packed, &mask, 1.0, allowed)
            .unwrap_err()
            .to_string()
    };
    assert!(run(&[None]).contains("1 allowed sets for 2 response tokens"));
    assert!(run(&[Some(&[4, 7]), None]).contains("response token 0 (id 5) is not among"));
    assert!(run(&[Some(&[]), None]).contains("is not among its allowed tokens []"));
    assert!(run(&[None, Some(&[6, 600])]).contains("allowed token id 600 is outside"));
}

#[test]
fn guided_gradients_are_finite_and_vanish_at_forced_tokens() {
    type A = Autodiff<B>;
    let tokenizer = TextTokenizer::builtin();
    let guide = answers(&tokenizer);
    let Generated {
        prompts, responses, ..
    } = generate(1.0, 8);
    let (packed, mask, allowed) = pack(&guide, &prompts, &responses);
    let forced: Vec<i64> = (0..allowed.len() as i64)
        .filter(|&i| allowed[i as usize].is_some_and(|a| a.len() == 1))
        .collect();
    let model = model::<A>();
    let out = response_logprobs_guided(&model, &packed, &mask, 1.0, &allowed).unwrap();
    let grads = (out.logprobs.clone().sum() + out.entropy.clone().sum()).backward();
    let embed = to_f32_vec(&model.model.embed_tokens.weight.grad(&grads).unwrap());
    let norm = to_f32_vec(&model.model.norm.weight.grad(&grads).unwrap());
    assert!(embed.iter().chain(&norm).all(|g| g.is_finite()));
    assert!(
        norm.iter().any(|g| g.abs() > 1e-6),
        "choices carry gradient"
    );

    let n = forced.len();
    let index = Tensor::<A, 1, Int>::from_data(TensorData::new(forced, [n]), &Default::default());
    let at_forced =
        out.logprobs.select(0, index.clone()).sum() + out.entropy.select(0, index).sum();
    let grads = at_forced.backward();
    let grads = [
        model
            .model
            .embed_tokens
            .weight
            .grad(&grads)
            .map(|g| to_f32_vec(&g)),
        model.model.norm.weight.grad(&grads).map(|g| to_f32_vec(&g)),
        model.model.layers[0]
            .self_attn
            .q_proj
            .weight
            .grad(&grads)
            .map(|g| to_f32_vec(&g)),
    ];
    for grad in grads.iter().flatten() {
        assert!(
            grad.iter().all(|&g| g == 0.0),
            "forced tokens give no gradient"
        );
    }
}
