//! LoRA on the `tiny_qwen2` fixture: fresh adapters (`B = 0`) leave the model's logits
//! exactly as they were, and once the adapters hold values the merged model (`W + s · A B`,
//! what generation and `export --hf` use) gives the adapter model's logits within 1e-5 of
//! the largest |logit| (measured: 2.0e-6, an absolute 1.6e-5 on logits up to 8.2; the two
//! sum in different orders in f32). The optimizer side (only adapters change over a step) is
//! tested in the run's `Trainable` (operators/src/runtime/trainable_lora_tests.rs).

mod common;

use burn::module::Param;
use burn::tensor::{Int, Tensor, TensorData};
use common::{device, tiny_qwen2, B};
use roll_flow_model::lora::{adapter_tensors, attach_lora, merge_lora};
use roll_flow_model::lora_spec::{LoraSpec, TARGET_NAMES};
use roll_flow_model::qwen2::AttentionLayout;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::Qwen2CausalLm;

fn every_target(rank: usize) -> LoraSpec {
    LoraSpec {
        rank,
        alpha: 2.0 * rank as f64,
        targets: TARGET_NAMES.iter().map(|t| t.to_string()).collect(),
        dropout: 0.0,
    }
}

/// Two right-padded rows of 9 and 5 tokens.
fn logits(model: &Qwen2CausalLm<B>) -> Vec<f32> {
    let ids: Vec<i64> = (0..18)
        .map(|i| {
            if i < 9 || (9..14).contains(&i) {
                (5 + 37 * i) % 400
            } else {
                0
            }
        })
        .collect();
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [2, 9]), &device());
    to_f32_vec(&model.forward(tokens, &AttentionLayout::right_padded(2, 9), None))
}

/// A fixed, uneven `[rank, out]` matrix for an adapter's `B`.
fn filled_b(like: &Param<Tensor<B, 2>>, salt: usize) -> Param<Tensor<B, 2>> {
    let [rank, out] = like.val().dims();
    let values: Vec<f32> = (0..rank * out)
        .map(|i| (((i * 29 + salt * 11) % 23) as f32 - 11.0) / 1000.0)
        .collect();
    Param::from_tensor(Tensor::from_data(
        TensorData::new(values, [rank, out]),
        &device(),
    ))
}

#[test]
fn fresh_adapters_leave_the_logits_unchanged() {
    let base = tiny_qwen2();
    let want = logits(&base);
    let adapted = attach_lora(base, &every_target(4), 3);
    assert_eq!(
        logits(&adapted),
        want,
        "B = 0: the adapters add exactly zero"
    );
    // A and B of 7 targets in every layer
    let layers = adapted.model.layers.len();
    assert_eq!(adapter_tensors(&adapted).tensors.len(), 7 * layers * 2);
}

#[test]
fn the_merged_model_gives_the_adapter_model_s_logits() {
    let mut model = attach_lora(tiny_qwen2(), &every_target(4), 3);
    let base = logits(&tiny_qwen2());
    for (l, layer) in model.model.layers.iter_mut().enumerate() {
        let attn = &mut layer.self_attn;
        let mlp = &mut layer.mlp;
        let adapters = [
            &mut attn.q_lora,
            &mut attn.k_lora,
            &mut attn.v_lora,
            &mut attn.o_lora,
            &mut mlp.gate_lora,
            &mut mlp.up_lora,
            &mut mlp.down_lora,
        ];
        for (i, adapter) in adapters.into_iter().enumerate() {
            let lora = adapter.as_mut().expect("every target has an adapter");
            lora.b = filled_b(&lora.b, 7 * l + i);
        }
    }
    let adapted = logits(&model);
    let merged_model = merge_lora(&model);
    assert!(merged_model.lora.is_none());
    assert!(merged_model.model.layers[0].self_attn.q_lora.is_none());
    let merged = logits(&merged_model);
    let moved = adapted
        .iter()
        .zip(&base)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        moved > 1e-2,
        "the filled adapters change the logits (by {moved})"
    );
    let scale = adapted.iter().fold(0f32, |m, a| m.max(a.abs()));
    let mut worst = 0f32;
    for (m, a) in merged.iter().zip(&adapted) {
        worst = worst.max((m - a).abs() / scale);
    }
    assert!(
        worst <= 1e-5,
        "merged against adapter logits: {worst} (moved {moved})"
    );
    eprintln!("moved {moved}, worst {worst}, scale {scale}");
}

#[test]
fn the_same_seed_draws_the_same_adapters() {
    let spec = every_target(2);
    let one = adapter_tensors(&attach_lora(tiny_qwen2(), &spec, 9));
    let two = adapter_tensors(&attach_lora(tiny_qwen2(), &spec, 9));
    let other = adapter_tensors(&attach_lora(tiny_qwen2(), &spec, 10));
    assert_eq!(one.tensors, two.tensors);
    assert_ne!(one.tensors, other.tensors);
    let (name, shape, _) = &one.tensors[0];
    assert_eq!(
        name,
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    );
    assert_eq!(shape[0], 2, "PEFT's lora_A.weight is [rank, in]");
}
