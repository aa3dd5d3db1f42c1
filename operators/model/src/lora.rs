//! LoRA on a causal LM: attaching fresh adapters to the linear layers a [`LoraSpec`]
//! targets (the base weights frozen), folding them into the weights for generation and
//! export, and listing them under PEFT's names.
//!
//! Freezing: every base parameter is marked as not requiring a gradient (burn's
//! `Module::no_grad`), so the autodiff graph records no gradient for it, the optimizer
//! (which steps only parameters with a gradient) keeps no state for it and never changes
//! it; the adapters are the only parameters that require one. This is what PEFT's
//! `get_peft_model` does with `requires_grad_(False)` on the base model.
//!
//! Adapters are drawn layer by layer, in the order q, k, v, o, gate, up, down, from one
//! generator seeded with the model's seed, so a run is reproducible.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::lora_spec::LoraSpec;
use crate::qwen2::lora_adapter::LoraAdapter;
use crate::qwen2::Qwen2CausalLm;
use crate::weights::TensorSink;

/// PEFT's prefix of a causal LM's adapter tensor names (`PeftModelForCausalLM.base_model`
/// is the `LoraModel`, whose `model` is the `*ForCausalLM`).
pub const PEFT_PREFIX: &str = "base_model.model";

/// The model with fresh adapters on `spec.targets` of every decoder layer and every base
/// weight frozen (module doc). `spec` must be valid ([`LoraSpec::validate`]).
pub fn attach_lora<B: Backend>(
    model: Qwen2CausalLm<B>,
    spec: &LoraSpec,
    seed: u64,
) -> Qwen2CausalLm<B> {
    let mut model = model.no_grad();
    let device = model.device();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fresh = |name: &str, base: &Linear<B>| -> Option<LoraAdapter<B>> {
        spec.targets(name).then(|| {
            let [d_in, d_out] = base.weight.val().dims();
            LoraAdapter::fresh(
                d_in,
                d_out,
                spec.rank,
                spec.scale(),
                spec.dropout,
                &mut rng,
                &device,
            )
        })
    };
    for layer in &mut model.model.layers {
        let (attn, mlp) = (&mut layer.self_attn, &mut layer.mlp);
        attn.q_lora = fresh("q_proj", &attn.q_proj);
        attn.k_lora = fresh("k_proj", &attn.k_proj);
        attn.v_lora = fresh("v_proj", &attn.v_proj);
        attn.o_lora = fresh("o_proj", &attn.o_proj);
        mlp.gate_lora = fresh("gate_proj", &mlp.gate_proj);
        mlp.up_lora = fresh("up_proj", &mlp.up_proj);
        mlp.down_lora = fresh("down_proj", &mlp.down_proj);
    }
    model.lora = Some(spec.clone());
    model
}

/// Replaces `base` by its merge with `adapter` (if any) and drops the adapter.
fn merge_one<B: Backend>(base: &mut Linear<B>, adapter: &mut Option<LoraAdapter<B>>) {
    if let Some(lora) = adapter.take() {
        *base = lora.merge_into(base);
    }
}

/// The model with every adapter folded into its layer's weight (`W + s · A B`) and none
/// left: what generation reads and `export --hf` writes. A model without adapters comes
/// back as it is.
pub fn merge_lora<B: Backend>(model: &Qwen2CausalLm<B>) -> Qwen2CausalLm<B> {
    let mut merged = model.clone();
    for layer in &mut merged.model.layers {
        let (attn, mlp) = (&mut layer.self_attn, &mut layer.mlp);
        merge_one(&mut attn.q_proj, &mut attn.q_lora);
        merge_one(&mut attn.k_proj, &mut attn.k_lora);
        merge_one(&mut attn.v_proj, &mut attn.v_lora);
        merge_one(&mut attn.o_proj, &mut attn.o_lora);
        merge_one(&mut mlp.gate_proj, &mut mlp.gate_lora);
        merge_one(&mut mlp.up_proj, &mut mlp.up_lora);
        merge_one(&mut mlp.down_proj, &mut mlp.down_lora);
    }
    merged.lora = None;
    merged
}

/// The adapters under PEFT's names (`base_model.model.model.layers.N.self_attn.q_proj.
/// lora_A.weight` `[rank, in]`, `….lora_B.weight` `[out, rank]`), in layer order.
pub fn adapter_tensors<B: Backend>(model: &Qwen2CausalLm<B>) -> TensorSink {
    let mut sink = TensorSink::default();
    for (i, layer) in model.model.layers.iter().enumerate() {
        let (attn, mlp) = (&layer.self_attn, &layer.mlp);
        let adapters = [
            ("self_attn.q_proj", &attn.q_lora),
            ("self_attn.k_proj", &attn.k_lora),
            ("self_attn.v_proj", &attn.v_lora),
            ("self_attn.o_proj", &attn.o_lora),
            ("mlp.gate_proj", &mlp.gate_lora),
            ("mlp.up_proj", &mlp.up_lora),
            ("mlp.down_proj", &mlp.down_lora),
        ];
        for (name, adapter) in adapters {
            if let Some(lora) = adapter {
                lora.save(&format!("{PEFT_PREFIX}.model.layers.{i}.{name}"), &mut sink);
            }
        }
    }
    sink
}
