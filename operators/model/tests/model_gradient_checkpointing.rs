//! Gradient checkpointing by layer (`gradient_checkpointing: true`,
//! `roll_flow_model::qwen2::layer_checkpoints`): the gradients of every parameter equal the
//! whole graph's bit for bit, for the Qwen2, Qwen3 and Llama fixtures (tied and untied
//! heads, grouped-query attention, q/k norms, sliding windows), a four-layer model, LoRA
//! adapters (with dropout: the second run draws the first's masks) and the critic; a pass
//! never differentiated leaves nothing behind.

mod common;

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor, TensorData};
use common::{device, fixture, sliding_window_fixture, B};
use roll_flow_model::config::{Qwen2Config, TinyArch};
use roll_flow_model::hf::model_dir::read_config;
use roll_flow_model::hf::{load_causal_lm, SafetensorsSource};
use roll_flow_model::logprob::response_logprobs;
use roll_flow_model::lora::attach_lora;
use roll_flow_model::lora_spec::LoraSpec;
use roll_flow_model::packed::PackedSequences;
use roll_flow_model::qwen2::dropout_masks::with_seed;
use roll_flow_model::qwen2::layer_checkpoints;
use roll_flow_model::qwen2::AttentionLayout;
use roll_flow_model::weights::to_f32_vec;
use roll_flow_model::{Qwen2CausalLm, Qwen2ValueModel};

type A = Autodiff<B>;

fn sequences() -> Vec<Vec<u32>> {
    vec![
        vec![1, 337, 262, 201, 50, 301, 201, 305, 65],
        vec![50, 500, 482, 314],
        vec![25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36],
    ]
}

/// `-Σ w_t log π(token_t) - 0.1 Σ H_t` over the response tokens (everything after each
/// sequence's first three), with uneven weights so no gradient cancels: a PPO-like loss
/// through the scoring path training uses.
fn loss(model: &Qwen2CausalLm<A>) -> Tensor<A, 1> {
    let packed = PackedSequences::from_sequences(&sequences());
    let mask: Vec<bool> = (0..packed.tokens.len())
        .map(|t| packed.locate(t).1 >= 3)
        .collect();
    let out = response_logprobs(model, &packed, &mask, 0.9).unwrap();
    let n = out.logprobs.dims()[0];
    let weights: Vec<f32> = (0..n).map(|i| ((i * 7 % 5) as f32 - 1.5) / 2.0).collect();
    let weights = Tensor::<A, 1>::from_data(TensorData::new(weights, [n]), &device());
    out.logprobs
        .mul(weights)
        .sum()
        .neg()
        .sub(out.entropy.sum().mul_scalar(0.1))
}

/// Every parameter gradient, by parameter id, as raw bits (`None`: no gradient).
fn bits<M: AutodiffModule<A>>(
    module: &M,
    grads: &GradientsParams,
) -> Vec<(ParamId, Option<Vec<u32>>)> {
    struct Collect<'a>(&'a GradientsParams, Vec<(ParamId, Option<Vec<u32>>)>);
    impl ModuleVisitor<A> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
            let grad = self.0.get::<B, D>(param.id);
            let bits = grad.map(|g| to_f32_vec(&g).iter().map(|v| v.to_bits()).collect());
            self.1.push((param.id, bits));
        }
    }
    let mut collect = Collect(grads, Vec::new());
    module.visit(&mut collect);
    collect.1
}

/// The loss's gradients with checkpointing off and on are the same bits, and some
/// parameter below the top layer has a non-zero one.
fn same_gradients(model: Qwen2CausalLm<A>) {
    let whole = layer_checkpoints::backward(loss(&model), &model);
    let checkpointed_model = model.clone().with_gradient_checkpointing(true);
    let checkpointed = layer_checkpoints::backward(loss(&checkpointed_model), &checkpointed_model);
    let (want, got) = (bits(&model, &whole), bits(&model, &checkpointed));
    assert_eq!(want.len(), got.len());
    for ((id, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(
            w.is_some(),
            g.is_some(),
            "parameter {id}: a gradient on one side only"
        );
        assert!(w == g, "parameter {id}: the gradients differ");
    }
    let lowest = &model.model.layers[0];
    assert!(
        nonzero(lowest, &checkpointed),
        "the lowest layer has no gradient"
    );
    // The graph itself holds nothing below the top layer: burn's own backward pass gives
    // the lowest layer no gradient (the layers' second pass is what gives it one).
    let graph_only =
        GradientsParams::from_grads(loss(&checkpointed_model).backward(), &checkpointed_model);
    layer_checkpoints::discard_pending();
    assert!(
        !nonzero(lowest, &graph_only),
        "the lowest layer ran with a graph"
    );
}

/// Whether some parameter of `module` has a gradient with a value other than ±0.
fn nonzero<M: AutodiffModule<A>>(module: &M, grads: &GradientsParams) -> bool {
    let values = bits(module, grads)
        .into_iter()
        .flat_map(|(_, g)| g.unwrap_or_default());
    values.into_iter().any(|b| b & 0x7fff_ffff != 0)
}

#[test]
fn checkpointed_gradients_are_the_whole_graphs_for_each_family() {
    for name in ["tiny_qwen2", "tiny_qwen3", "tiny_llama"] {
        same_gradients(load_causal_lm::<A>(&fixture(name), &device()).unwrap());
    }
    // Sliding-window layers (banded attention).
    let (dir, _) = sliding_window_fixture();
    same_gradients(load_causal_lm::<A>(dir.path(), &device()).unwrap());
}

#[test]
fn checkpointed_gradients_are_the_whole_graphs_over_four_layers() {
    let arch = TinyArch {
        layers: 4,
        dim: 64,
        heads: 4,
        kv_heads: Some(2),
        ..TinyArch::default()
    };
    same_gradients(Qwen2CausalLm::<A>::random(
        &Qwen2Config::tiny(&arch, 516),
        3,
        &device(),
    ));
}

#[test]
fn checkpointed_gradients_are_the_whole_graphs_with_lora() {
    let model = load_causal_lm::<A>(&fixture("tiny_qwen2"), &device()).unwrap();
    let spec = LoraSpec {
        rank: 4,
        alpha: 8.0,
        ..LoraSpec::default()
    };
    same_gradients(attach_lora(model, &spec, 5));
}

#[test]
fn checkpointed_critic_gradients_are_the_whole_graphs() {
    let dir = fixture("tiny_qwen2");
    let config = read_config(&dir).unwrap();
    let mut source = SafetensorsSource::open(&dir).unwrap();
    let critic =
        Qwen2ValueModel::<A>::from_causal_lm_weights(&mut source, &config, 9, &device()).unwrap();
    let tokens: Vec<i64> = vec![1, 337, 262, 201, 50, 301, 201, 305];
    let len = tokens.len();
    let values = |m: &Qwen2ValueModel<A>| {
        let input =
            Tensor::<A, 2, Int>::from_data(TensorData::new(tokens.clone(), [1, len]), &device());
        let v = m.forward(input, &AttentionLayout::right_padded(1, len));
        v.powi_scalar(2).sum()
    };
    let whole = layer_checkpoints::backward(values(&critic), &critic);
    let on = critic.clone().with_gradient_checkpointing(true);
    let checkpointed = layer_checkpoints::backward(values(&on), &on);
    let (want, got) = (bits(&critic, &whole), bits(&critic, &checkpointed));
    assert!(want.iter().filter(|(_, g)| g.is_some()).count() > 10);
    assert_eq!(want, got);
}

#[test]
fn a_pass_never_differentiated_leaves_nothing_for_the_next() {
    let model = load_causal_lm::<A>(&fixture("tiny_qwen2"), &device())
        .unwrap()
        .with_gradient_checkpointing(true);
    // A forward pass whose loss is dropped (as when a loss fails after its forward pass).
    drop(loss(&model));
    layer_checkpoints::discard_pending();
    let first = layer_checkpoints::backward(loss(&model), &model);
    let second = layer_checkpoints::backward(loss(&model), &model);
    assert_eq!(bits(&model, &first), bits(&model, &second));
}

/// LoRA's dropout with checkpointing: for one seed the gradients are the whole graph's bits
/// (each layer's second run draws the masks its first drew), the same again on a second
/// pass, and other ones for another seed (the masks act); the spec accepts the two.
#[test]
fn checkpointed_gradients_are_the_whole_graphs_with_lora_dropout() {
    let model = load_causal_lm::<A>(&fixture("tiny_qwen2"), &device()).unwrap();
    let spec = LoraSpec {
        rank: 4,
        alpha: 8.0,
        dropout: 0.3,
        ..LoraSpec::default()
    };
    let model = attach_lora(model, &spec, 5);
    let on = model.clone().with_gradient_checkpointing(true);
    let grads = |m: &Qwen2CausalLm<A>, seed: u64| {
        with_seed(seed, || bits(m, &layer_checkpoints::backward(loss(m), m)))
    };
    let whole = grads(&model, 11);
    assert_eq!(grads(&on, 11), whole);
    assert_eq!(grads(&model, 11), whole);
    assert_ne!(grads(&model, 12), whole);
    let text = "(arch: Tiny(layers: 2, dim: 64, heads: 4), gradient_checkpointing: true, \
                lora: (rank: 4, dropout: 0.1))";
    let spec: roll_flow_model::spec::ModelSpec = roll_flow_engine::spec::ron_options()
        .from_str(text)
        .unwrap();
    assert!(spec.setting_problems(10).is_empty());
}
