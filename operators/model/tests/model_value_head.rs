//! The critic: the value model shares the causal LM's backbone (same hidden states when built
//! from its weights), gives one value per token, trains under autodiff, and saves/loads.

mod common;

use burn::backend::Autodiff;
use burn::tensor::{Int, Tensor, TensorData};
use common::{device, fixture, B};
use roll_flow_model::hf::model_dir::read_config;
use roll_flow_model::hf::{load_causal_lm, SafetensorsSource};
use roll_flow_model::qwen2::AttentionLayout;
use roll_flow_model::weights::{to_f32_vec, TensorSink};
use roll_flow_model::Qwen2ValueModel;

fn input<Bk: burn::tensor::backend::Backend>(tokens: &[i64]) -> Tensor<Bk, 2, Int> {
    Tensor::from_data(
        TensorData::new(tokens.to_vec(), [1, tokens.len()]),
        &Default::default(),
    )
}

#[test]
fn critic_from_causal_lm_weights_shares_the_backbone() {
    let dir = fixture("tiny_qwen2");
    let config = read_config(&dir).unwrap();
    let mut source = SafetensorsSource::open(&dir).unwrap();
    let critic =
        Qwen2ValueModel::<B>::from_causal_lm_weights(&mut source, &config, 9, &device()).unwrap();
    source.finish().unwrap();
    let lm = load_causal_lm::<B>(&dir, &device()).unwrap();
    let tokens = [1i64, 337, 262, 201, 50];
    let layout = AttentionLayout::right_padded(1, tokens.len());
    let hidden_lm = to_f32_vec(&lm.hidden(input(&tokens), &layout, None));
    let hidden_critic = to_f32_vec(&critic.model.forward(input(&tokens), &layout, None));
    assert_eq!(hidden_lm, hidden_critic);

    // values = hidden · w + b, checked per token against the head's own parameters.
    let values = to_f32_vec(&critic.forward(input(&tokens), &layout));
    assert_eq!(values.len(), tokens.len());
    let w = to_f32_vec(&critic.score.weight.val());
    let b = to_f32_vec(&critic.score.bias.as_ref().unwrap().val())[0];
    assert_eq!(b, 0.0, "fresh head bias starts at zero");
    for (t, v) in values.iter().enumerate() {
        let h = &hidden_lm[t * 64..(t + 1) * 64];
        let expected: f32 = h.iter().zip(&w).map(|(x, y)| x * y).sum::<f32>() + b;
        assert!((v - expected).abs() < 1e-4, "{v} vs {expected}");
    }

    // values_at (the last layer at the asked positions only) reads the same entries.
    let at = [(0usize, 3usize), (0, 0), (0, 4)];
    let picked = to_f32_vec(&critic.values_at(input(&tokens), &at));
    for (got, &(_, column)) in picked.iter().zip(&at) {
        let want = values[column];
        assert!(
            (got - want).abs() < 1e-5,
            "values_at {got} vs forward {want}"
        );
    }
}

#[test]
fn critic_trains_and_saves_with_score_tensors() {
    type A = Autodiff<B>;
    let config = read_config(&fixture("tiny_qwen2")).unwrap();
    let critic = Qwen2ValueModel::<A>::random(&config, 4, &device());
    let tokens = [5i64, 6, 7, 8];
    let values = critic.forward(input(&tokens), &AttentionLayout::right_padded(1, 4));
    let grads = values.powi_scalar(2).mean().backward();
    let head_grad = to_f32_vec(&critic.score.weight.grad(&grads).unwrap());
    assert!(head_grad.iter().all(|g| g.is_finite()) && head_grad.iter().any(|g| *g != 0.0));
    assert!(critic.model.layers[0]
        .mlp
        .up_proj
        .weight
        .grad(&grads)
        .is_some());
    let mut sink = TensorSink::default();
    critic.save(&mut sink);
    let names: Vec<&str> = sink.tensors.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(names.contains(&"score.weight") && names.contains(&"score.bias"));
    assert!(!names.contains(&"lm_head.weight"));
    let shape = &sink
        .tensors
        .iter()
        .find(|(n, _, _)| n == "score.weight")
        .unwrap()
        .1;
    assert_eq!(shape, &vec![1, 64]);
}
