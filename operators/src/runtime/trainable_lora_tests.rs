//! LoRA through the run's optimizer: over two AdamW steps of a model with adapters on
//! every linear layer, every adapter tensor changes and every base weight keeps its bits
//! (`attach_lora` froze them), and the optimizer holds state for the adapters only.

use std::collections::HashSet;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::{Int, TensorData};

use super::*;
use roll_flow_model::lora::attach_lora;
use roll_flow_model::lora_spec::{LoraSpec, TARGET_NAMES};
use roll_flow_model::qwen2::AttentionLayout;

type Model = roll_flow_model::Qwen2CausalLm<TrainBackend<CpuBackend>>;

/// Every float parameter's id and values, in visiting order.
struct Collect<B>(Vec<(ParamId, Vec<f32>)>, std::marker::PhantomData<B>);

impl<B: burn::tensor::backend::Backend> ModuleVisitor<B> for Collect<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let data = param.val().into_data().convert::<f32>();
        self.0.push((param.id, data.to_vec::<f32>().unwrap()));
    }
}

pub(in crate::runtime) fn params<M: Module<TrainBackend<CpuBackend>>>(
    module: &M,
) -> Vec<(ParamId, Vec<f32>)> {
    let mut collect = Collect(Vec::new(), std::marker::PhantomData);
    module.visit(&mut collect);
    collect.0
}

/// The ids of every adapter's `A` and `B`.
fn adapter_ids(model: &Model) -> HashSet<ParamId> {
    let mut ids = HashSet::new();
    for layer in &model.model.layers {
        let (attn, mlp) = (&layer.self_attn, &layer.mlp);
        for adapter in [
            &attn.q_lora,
            &attn.k_lora,
            &attn.v_lora,
            &attn.o_lora,
            &mlp.gate_lora,
            &mlp.up_lora,
            &mlp.down_lora,
        ] {
            let adapter = adapter.as_ref().expect("every layer is targeted");
            ids.extend(params(adapter).into_iter().map(|(id, _)| id));
        }
    }
    ids
}

/// The gradient of a fixed, uneven weighting of the logits of one 6-token sequence.
fn gradients(model: &Model) -> GradientsParams {
    let device = Default::default();
    let ids = TensorData::new(vec![3i64, 17, 5, 40, 22, 9], [1, 6]);
    let tokens = Tensor::<TrainBackend<CpuBackend>, 2, Int>::from_data(ids, &device);
    let logits = model.forward(tokens, &AttentionLayout::right_padded(1, 6), None);
    let [_, len, vocab] = logits.dims();
    let weights: Vec<f32> = (0..len * vocab)
        .map(|i| ((i * 31 % 13) as f32 - 6.0) / 6.0)
        .collect();
    let weights = Tensor::from_data(TensorData::new(weights, [1, len, vocab]), &device);
    let grads = logits.mul(weights).sum().backward();
    GradientsParams::from_grads(grads, model)
}

#[test]
fn only_the_adapters_change_over_optimizer_steps() {
    let lora = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: TARGET_NAMES.iter().map(|t| t.to_string()).collect(),
        dropout: 0.0,
    };
    let model = attach_lora(crate::runtime::concurrent::tests::model(), &lora, 5);
    let adapters = adapter_ids(&model);
    let before = params(&model);
    let mut train = Trainable::<Model, CpuBackend>::new(model, OptimSpec::default(), 10).unwrap();
    for step in 0..2 {
        let grads = gradients(train.module());
        train.accumulate(grads);
        assert!(!train.apply(step).unwrap().skipped);
    }
    let after = params(train.module());
    assert_eq!(before.len(), after.len());
    let (mut changed, mut kept) = (0, 0);
    for ((id, old), (same_id, new)) in before.iter().zip(&after) {
        assert_eq!(id, same_id);
        if adapters.contains(id) {
            assert_ne!(old, new, "adapter tensor {id} did not train");
            changed += 1;
        } else {
            assert_eq!(old, new, "base tensor {id} changed");
            kept += 1;
        }
    }
    // 7 adapters of one layer, A and B each; the base: embeddings, norms, projections
    assert_eq!(changed, 14);
    assert!(kept > 10, "{kept} base tensors");
    let state: HashSet<ParamId> = train.optimizer.to_record().into_keys().collect();
    assert_eq!(state, adapters, "optimizer state for the adapters only");
}
