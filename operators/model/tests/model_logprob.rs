//! Packed log-probs and entropies against an f64 reference computed from each sequence's own
//! (unpacked) logits, and gradients through the whole model under autodiff.

mod common;

use burn::backend::Autodiff;
use common::{device, fixture, logits_of, B};
use roll_flow_model::hf::load_causal_lm;
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;

/// log-softmax and entropy of `row / temperature` in f64.
fn reference(row: &[f32], temperature: f64, token: usize) -> (f64, f64) {
    let scaled: Vec<f64> = row.iter().map(|&l| l as f64 / temperature).collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_z = max + scaled.iter().map(|s| (s - max).exp()).sum::<f64>().ln();
    let entropy = -scaled
        .iter()
        .map(|s| (s - log_z).exp() * (s - log_z))
        .sum::<f64>();
    (scaled[token] - log_z, entropy)
}

fn sequences() -> Vec<Vec<u32>> {
    vec![
        vec![1, 337, 262, 201, 50, 301, 201, 305, 65],
        vec![50, 500, 482, 314],
        vec![25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36],
    ]
}

/// Response tokens: everything after a per-sequence prompt length.
fn response_mask(packed: &PackedSequences, prompt_lens: &[usize]) -> Vec<bool> {
    (0..packed.tokens.len())
        .map(|t| {
            let (seq, pos) = packed.locate(t);
            pos >= prompt_lens[seq]
        })
        .collect()
}

#[test]
fn packed_logprobs_and_entropy_match_unpacked_f64_reference() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
    let vocab = model.config.vocab_size;
    let sequences = sequences();
    let packed = PackedSequences::from_sequences(&sequences);
    let prompt_lens = [5, 1, 7];
    let mask = response_mask(&packed, &prompt_lens);
    let temperature = 0.8;
    let out = response_logprobs(&model, &packed, &mask, temperature).unwrap();
    let logprobs = to_f32_vec(&out.logprobs);
    let entropy = to_f32_vec(&out.entropy);
    let expected_count: usize = sequences
        .iter()
        .zip(prompt_lens)
        .map(|(s, p)| s.len() - p)
        .sum();
    assert_eq!(logprobs.len(), expected_count);
    let mut k = 0;
    for (seq, tokens) in sequences.iter().enumerate() {
        let logits = logits_of(&model, tokens);
        for pos in prompt_lens[seq]..tokens.len() {
            let row = &logits[(pos - 1) * vocab..pos * vocab];
            let (lp, ent) = reference(row, temperature as f64, tokens[pos] as usize);
            assert_eq!(out.token_index[k], packed.offsets[seq] + pos);
            assert!(
                (logprobs[k] as f64 - lp).abs() < 1e-4,
                "logprob {} vs {lp}",
                logprobs[k]
            );
            assert!(
                (entropy[k] as f64 - ent).abs() < 1e-4,
                "entropy {} vs {ent}",
                entropy[k]
            );
            k += 1;
        }
    }
    let column = out.scatter(&logprobs, packed.tokens.len());
    assert_eq!(column[0], 0.0);
    assert_eq!(column[out.token_index[0]], logprobs[0]);
}

#[test]
fn first_token_cannot_be_a_response_token() {
    let model = load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
    let packed = PackedSequences::from_sequences(&sequences());
    let mut mask = vec![false; packed.tokens.len()];
    mask[packed.offsets[1]] = true;
    let message = response_logprobs(&model, &packed, &mask, 1.0)
        .unwrap_err()
        .to_string();
    assert!(message.contains("starts sequence 1"), "{message}");
    let message = response_logprobs(&model, &packed, &mask[1..], 1.0)
        .unwrap_err()
        .to_string();
    assert!(message.contains("response mask has"), "{message}");
    let bad = PackedSequences::from_sequences(&[vec![1u32, 600]]);
    let message = response_logprobs(&model, &bad, &[false, true], 1.0)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("token id 600 is outside the vocabulary"),
        "{message}"
    );
}

#[test]
fn gradients_flow_through_the_model_and_match_finite_differences() {
    type A = Autodiff<B>;
    let model = load_causal_lm::<A>(&fixture("tiny_qwen2"), &device()).unwrap();
    let packed = PackedSequences::from_sequences(&sequences());
    let mask = response_mask(&packed, &[5, 1, 7]);
    let loss_of = |m: &Qwen2CausalLm<A>| {
        let out = response_logprobs(m, &packed, &mask, 1.0).unwrap();
        out.logprobs.sum().neg()
    };
    let loss = loss_of(&model);
    let grads = loss.backward();
    let norm_weight = &model.model.norm.weight;
    let grad = to_f32_vec(
        &norm_weight
            .grad(&grads)
            .expect("final norm weight has a gradient"),
    );
    assert!(grad.iter().all(|g| g.is_finite()));
    assert!(
        grad.iter().any(|g| g.abs() > 1e-3),
        "gradient is not all zero"
    );
    let q_grad = model.model.layers[0]
        .self_attn
        .q_proj
        .bias
        .as_ref()
        .unwrap()
        .grad(&grads);
    assert!(q_grad.is_some(), "gradients reach the first layer");

    // Central difference along channel 3 of the final norm weight, in f32 with a step large
    // enough for the f32 loss to resolve it.
    let eps = 1e-2;
    let shifted = |delta: f32| {
        let base = load_causal_lm::<B>(&fixture("tiny_qwen2"), &device()).unwrap();
        let mut weight = to_f32_vec(&base.model.norm.weight.val());
        weight[3] += delta;
        let mut m = base;
        m.model.norm.weight = burn::module::Param::from_tensor(burn::tensor::Tensor::from_data(
            burn::tensor::TensorData::new(weight, [64]),
            &device(),
        ));
        let out = response_logprobs(&m, &packed, &mask, 1.0).unwrap();
        -to_f32_vec(&out.logprobs)
            .iter()
            .map(|&v| v as f64)
            .sum::<f64>()
    };
    let numeric = (shifted(eps) - shifted(-eps)) / (2.0 * eps as f64);
    let analytic = grad[3] as f64;
    assert!(
        (numeric - analytic).abs() < 1e-2 * analytic.abs().max(1.0),
        "numeric {numeric} vs autodiff {analytic}"
    );
}
