//! Prefix-grouped scoring (the samples of one prompt in one row, the prompt once: Prefix
//! Grouper) against one sequence a row: the same log-probs and entropies, and the same
//! gradients of a weighted sum of them, on the tiny Qwen2 and Llama fixtures.

mod common;

use burn::backend::Autodiff;
use burn::tensor::{Tensor, TensorData};
use common::{assert_close, device, fixture, B};
use roll_flow_kernels::KernelBackend;
use roll_flow_model::hf::load_causal_lm;
use roll_flow_model::logprob::{response_scores, ResponseLogProbs, Scoring};
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::prefix_grouped::{pair_cost, ScoringBlock};
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;

/// A group of four samples of one 6-token prompt (two replies start alike, one is a copy
/// of another), a sample of a second prompt, and a third prompt's two samples, in
/// interleaved order; `(sequence, prompt length)`.
fn samples() -> Vec<(Vec<u32>, usize)> {
    let a = [1u32, 337, 262, 201, 50, 301];
    let with = |prompt: &[u32], reply: &[u32]| {
        let mut s = prompt.to_vec();
        s.extend_from_slice(reply);
        (s, prompt.len())
    };
    vec![
        with(&a, &[201, 305, 65, 12]),
        with(&[50, 500, 482], &[314, 9]),
        with(&a, &[201, 305, 70]),
        with(&[25, 26, 27, 28], &[29, 30, 31, 32, 33]),
        with(&a, &[44]),
        with(&a, &[201, 305, 65, 12]),
        with(&[25, 26, 27, 28], &[7, 8]),
    ]
}

fn packed_and_mask() -> (PackedSequences, Vec<bool>) {
    let samples = samples();
    let sequences: Vec<&Vec<u32>> = samples.iter().map(|(s, _)| s).collect();
    let packed = PackedSequences::from_sequences(&sequences);
    let mask = (samples.iter())
        .flat_map(|(s, p)| (0..s.len()).map(move |i| i >= *p))
        .collect();
    (packed, mask)
}

fn scores<K: KernelBackend>(model: &Qwen2CausalLm<K>, grouped: bool) -> ResponseLogProbs<K> {
    let (packed, mask) = packed_and_mask();
    let scoring = Scoring {
        temperature: 0.8,
        allowed: None,
        uniform_kl: false,
        prefix_grouped: grouped,
    };
    response_scores(model, &packed, &mask, &scoring).unwrap()
}

const FIXTURES: [&str; 2] = ["tiny_qwen2", "tiny_llama"];

/// The grouped block is smaller: 3 rows of 18, 5 and 11 columns (each prompt once; the
/// four-sample group's replies share no first token), against 7 rows of 10; at the
/// fixtures' pair cost (4 heads, intermediate 128) every group pays off, so the tests
/// below compare grouped rows.
#[test]
fn the_grouped_block_holds_each_prompt_once() {
    let (packed, mask) = packed_and_mask();
    assert_eq!(ScoringBlock::one_per_row(&packed).size(), (7, 10));
    let fixtures = pair_cost(4, 128);
    assert_eq!(
        ScoringBlock::prefix_grouped(&packed, &mask, fixtures).size(),
        (3, 18)
    );
}

#[test]
fn grouped_logprobs_and_entropies_equal_one_sequence_a_row() {
    for name in FIXTURES {
        let model = load_causal_lm::<B>(&fixture(name), &device()).unwrap();
        let (plain, grouped) = (scores(&model, false), scores(&model, true));
        assert_eq!(grouped.token_index, plain.token_index);
        let (want, got) = (to_f32_vec(&plain.logprobs), to_f32_vec(&grouped.logprobs));
        assert_close(&got, &want, 1e-5, &format!("{name} log-probs"));
        let (want, got) = (to_f32_vec(&plain.entropy), to_f32_vec(&grouped.entropy));
        assert_close(&got, &want, 1e-5, &format!("{name} entropies"));
    }
}

#[test]
fn grouped_gradients_equal_one_sequence_a_row() {
    type A = Autodiff<B>;
    for name in FIXTURES {
        let model = load_causal_lm::<A>(&fixture(name), &device()).unwrap();
        let grads_of = |out: ResponseLogProbs<A>| {
            // Per-token weights of both signs (an advantage-weighted policy loss) and an
            // entropy term, so no sample's gradient cancels another's.
            let n = out.token_index.len();
            let w: Vec<f32> = (0..n).map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.0).collect();
            let w = Tensor::<A, 1>::from_data(TensorData::new(w, [n]), &device());
            let loss = out.logprobs.mul(w).sum() + out.entropy.sum().mul_scalar(0.1);
            let grads = loss.backward();
            let first = &model.model.layers[0];
            let last = model.model.layers.last().unwrap();
            [
                to_f32_vec(&model.model.embed_tokens.weight.grad(&grads).unwrap()),
                to_f32_vec(&first.self_attn.k_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&first.mlp.up_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&last.self_attn.q_proj.weight.grad(&grads).unwrap()),
                to_f32_vec(&model.model.norm.weight.grad(&grads).unwrap()),
            ]
        };
        let want = grads_of(scores(&model, false));
        let got = grads_of(scores(&model, true));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                w.iter().any(|v| v.abs() > 1e-4),
                "{name}: gradient {i} is all zero"
            );
            assert_close(g, w, 1e-4, &format!("{name}: gradient {i}"));
        }
    }
}
