//! A model as users declare it in the pipeline's `models:` section:
//!
//! ```ron
//! "policy": (arch: Tiny(layers: 2, dim: 128, heads: 4), tokenizer: Builtin, optim: AdamW(lr: 1e-3)),
//! "policy": (arch: HfDir("models/Qwen2.5-0.5B-Instruct"), optim: AdamW(lr: 1e-6)),
//! "policy": (arch: Gguf("models/SmolLM2-135M-Instruct.Q4_1.gguf"), optim: AdamW(lr: 1e-6)),
//! ```
//!
//! The optimizer settings (`optim:`) are [`OptimSpec`], in [`super::optim`]; the LoRA
//! settings (`lora:`) are [`LoraSpec`], in [`super::lora_spec`].

use roll_flow_engine::SettingProblem;
use serde::Deserialize;

use super::config::{Qwen2Config, TinyArch};
pub use super::lora_spec::LoraSpec;
pub use super::optim::{LrSchedule, OptimSpec};

/// One entry of `models:`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The architecture: the `Tiny` preset, a Hugging Face directory or a GGUF file.
    pub arch: ArchSpec,
    /// The tokenizer; default `Auto`: `Builtin` for `Tiny`, the directory's own for `HfDir`,
    /// the file's own for `Gguf`.
    #[serde(default)]
    pub tokenizer: TokenizerSpec,
    /// The optimizer used when this model is trained.
    #[serde(default)]
    pub optim: OptimSpec,
    /// Seed of the random initialisation (Tiny) or of a fresh value head; default: the
    /// pipeline seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Low-rank adapters on the decoder's linear layers: when set, only the adapters train
    /// (the base weights are frozen); default `None`, every weight trains.
    #[serde(default)]
    pub lora: Option<LoraSpec>,
    /// The dtype the model computes in: `F32` (the default), or `Bf16` (`F16`) mixed
    /// precision on a GPU, the weights, gradients and optimizer state kept in f32
    /// ([`crate::qwen2::compute_dtype`]); verl's and ROLL's `dtype: bf16`.
    #[serde(default)]
    pub precision: Precision,
    /// Gradient checkpointing by layer while this model trains: each decoder layer below
    /// the last keeps only its input and runs again in the backward pass, about a third
    /// more compute for a fraction of the activation memory
    /// ([`crate::qwen2::layer_checkpoints`]); the same gradients. transformers' and ROLL's
    /// `gradient_checkpointing`. Default `false`.
    #[serde(default)]
    pub gradient_checkpointing: bool,
}

/// A model's compute dtype (`precision:`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Activations and products in bf16, parameters in f32 (a GPU's tensor cores).
    Bf16,
    /// Activations and products in f16, parameters in f32.
    F16,
}

impl Precision {
    /// The compute dtype to set on the model; `None` for the parameters' own (f32).
    pub fn compute_dtype(self) -> Option<burn::tensor::DType> {
        match self {
            Precision::F32 => None,
            Precision::Bf16 => Some(burn::tensor::DType::BF16),
            Precision::F16 => Some(burn::tensor::DType::F16),
        }
    }
}

/// How the `Tiny(..)` fields are named in the model config the shape errors speak of.
const TINY_FIELD_NAMES: &str = "in `Tiny(..)`, hidden_size is `dim`, num_attention_heads \
    `heads`, num_key_value_heads `kv_heads`, num_hidden_layers `layers` and intermediate_size \
    `ffn_dim`";

impl ModelSpec {
    /// What `roll-flow validate` can find wrong without loading anything: the `Tiny`
    /// preset's shape and the optimizer's ranges for a run of `total_steps` steps. (An
    /// `HfDir` model's shape is checked when its config.json is read.)
    pub fn setting_problems(&self, total_steps: u64) -> Vec<SettingProblem> {
        let mut problems = Vec::new();
        if let Some(tiny) = self.arch.tiny() {
            // Any positive vocabulary size will do: the tokenizer sets it at build time.
            if let Err(message) = Qwen2Config::tiny(&tiny, 1).validate() {
                problems.push(SettingProblem {
                    field: vec!["arch".into()],
                    message: format!("Tiny: {message}"),
                    help: Some(TINY_FIELD_NAMES.into()),
                });
            }
        }
        if let Err(e) = self.optim.validate(total_steps) {
            problems.push(SettingProblem {
                field: vec!["optim".into(), e.field.into()],
                message: format!("optim: {e}"),
                help: None,
            });
        }
        if let Some(Err(e)) = self.lora.as_ref().map(LoraSpec::validate) {
            problems.push(SettingProblem {
                field: vec!["lora".into(), e.field.into()],
                message: format!("lora: {e}"),
                help: None,
            });
        }
        problems
    }
}

/// Which network to build.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ArchSpec {
    /// A Qwen2 of the given shape with seeded random weights, trained from scratch:
    /// `Tiny(layers: 2, dim: 64, heads: 8)` (fits CPU training), or any real width, e.g.
    /// Qwen2.5-0.5B's `Tiny(layers: 24, dim: 896, heads: 14, kv_heads: 2, ffn_dim: 4864,
    /// vocab: 151936, rope_theta: 1e6)` for measuring speed at that shape.
    Tiny(TinyArch),
    /// A Hugging Face directory (config.json, *.safetensors, tokenizer.json) of a Qwen2,
    /// Qwen2.5, Llama or Qwen3 model.
    HfDir(String),
    /// A GGUF file (llama.cpp's format) of a Llama, Qwen2 or Qwen3 model: weights
    /// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, dequantised at load), tokenizer
    /// and chat template from the one file.
    Gguf(String),
}

impl ArchSpec {
    /// The Tiny preset's parameters, if this is `Tiny`.
    pub fn tiny(&self) -> Option<TinyArch> {
        match self {
            ArchSpec::Tiny(tiny) => Some(tiny.clone()),
            ArchSpec::HfDir(_) | ArchSpec::Gguf(_) => None,
        }
    }
}

/// Where the tokenizer comes from.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub enum TokenizerSpec {
    /// `Builtin` for `Tiny`, the model directory's own for `HfDir`, the file's for `Gguf`.
    #[default]
    Auto,
    /// The small byte-level BPE shipped with roll-flow (for `Tiny`).
    Builtin,
    /// `tokenizer.json` (+ `tokenizer_config.json`) of this directory.
    HfDir(String),
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Parses as the pipeline loader does: `Option` fields written without `Some(..)`.
    pub(crate) fn parse(text: &str) -> Result<ModelSpec, ron::error::SpannedError> {
        roll_flow_engine::spec::ron_options().from_str(text)
    }

    #[test]
    fn tiny_spec_with_defaults() {
        let spec = parse("(arch: Tiny(layers: 2, dim: 128, heads: 4), tokenizer: Builtin, optim: AdamW(lr: 1e-3))").unwrap();
        let tiny = spec.arch.tiny().unwrap();
        assert_eq!(
            (tiny.layers, tiny.dim, tiny.heads, tiny.kv_heads),
            (2, 128, 4, None)
        );
        assert_eq!((tiny.max_positions, tiny.rope_theta), (4096, 10000.0));
        assert_eq!(spec.tokenizer, TokenizerSpec::Builtin);
        let OptimSpec::AdamW {
            lr,
            betas,
            eps,
            weight_decay,
            warmup_steps,
            schedule,
            min_lr_ratio,
            grad_clip,
            max_nonfinite,
        } = spec.optim;
        assert_eq!(max_nonfinite, 3);
        assert_eq!(lr, 1e-3);
        assert_eq!(betas, (0.9, 0.999));
        assert_eq!((eps, weight_decay, warmup_steps), (1e-8, 0.01, 0));
        assert_eq!(
            (schedule, min_lr_ratio, grad_clip),
            (LrSchedule::Cosine, 0.0, Some(1.0))
        );
    }

    #[test]
    fn implicit_some_options() {
        let spec = parse("(arch: Tiny(kv_heads: 2), optim: AdamW(grad_clip: 0.5))").unwrap();
        assert_eq!(spec.arch.tiny().unwrap().kv_heads, Some(2));
        assert!(matches!(
            spec.optim,
            OptimSpec::AdamW {
                grad_clip: Some(0.5),
                ..
            }
        ));
    }

    #[test]
    fn tiny_rope_theta_reaches_the_model_config() {
        let spec = parse("(arch: Tiny(dim: 64, heads: 8, rope_theta: 10.0))").unwrap();
        let config = crate::Qwen2Config::tiny(&spec.arch.tiny().unwrap(), 600);
        assert_eq!(config.rope_theta, 10.0);
        assert_eq!(config.validate(), Ok(()));
        let spec = parse("(arch: Tiny(rope_theta: 0.0))").unwrap();
        let config = crate::Qwen2Config::tiny(&spec.arch.tiny().unwrap(), 600);
        let err = config.validate().unwrap_err();
        assert!(
            err.contains("rope_theta 0 must be a positive number"),
            "{err}"
        );
    }

    #[test]
    fn tiny_head_dim_reaches_the_model_config() {
        let spec = parse("(arch: Tiny(dim: 64, heads: 8, head_dim: 16))").unwrap();
        let config = crate::Qwen2Config::tiny(&spec.arch.tiny().unwrap(), 600);
        assert_eq!((config.head_dim, config.head_dim()), (Some(16), 16));
        assert_eq!(config.validate(), Ok(()));
        let default = parse("(arch: Tiny(dim: 64, heads: 8))").unwrap();
        let config = crate::Qwen2Config::tiny(&default.arch.tiny().unwrap(), 600);
        assert_eq!((config.head_dim, config.head_dim()), (None, 8));
        let odd = parse("(arch: Tiny(dim: 64, heads: 8, head_dim: 15))").unwrap();
        let config = crate::Qwen2Config::tiny(&odd.arch.tiny().unwrap(), 600);
        let err = config.validate().unwrap_err();
        assert!(err.contains("head dimension 15 must be even"), "{err}");
    }

    #[test]
    fn tiny_sliding_window_reaches_the_model_config() {
        let spec = parse("(arch: Tiny(layers: 2, sliding_window: 40))").unwrap();
        let config = crate::Qwen2Config::tiny(&spec.arch.tiny().unwrap(), 600);
        assert!(config.use_sliding_window);
        assert_eq!(
            (config.layer_window(0), config.layer_window(1)),
            (Some(40), Some(40))
        );
        let spec = parse("(arch: Tiny(layers: 2))").unwrap();
        let config = crate::Qwen2Config::tiny(&spec.arch.tiny().unwrap(), 600);
        assert_eq!(config.layer_window(1), None);
    }

    #[test]
    fn setting_problems_name_the_shape_and_the_optimizer_field() {
        let spec = parse("(arch: Tiny(dim: 130, heads: 4), optim: AdamW(lr: NaN))").unwrap();
        let problems = spec.setting_problems(10);
        let found: Vec<(Vec<String>, &str)> = problems
            .iter()
            .map(|p| (p.field.clone(), p.message.as_str()))
            .collect();
        assert_eq!(
            found,
            vec![
                (
                    vec!["arch".to_string()],
                    "Tiny: hidden_size 130 is not divisible by num_attention_heads 4"
                ),
                (
                    vec!["optim".to_string(), "lr".to_string()],
                    "optim: `lr` must be a finite number >= 0, got NaN"
                ),
            ]
        );
        let zero_head = parse("(arch: Tiny(head_dim: 0))").unwrap();
        assert_eq!(
            zero_head.setting_problems(10)[0].message,
            "Tiny: head_dim must be positive"
        );
        let warmup = parse("(arch: HfDir(\"m\"), optim: AdamW(warmup_steps: 5))").unwrap();
        assert!(warmup.setting_problems(5).is_empty());
        assert_eq!(
            warmup.setting_problems(4)[0].field,
            vec!["optim", "warmup_steps"]
        );
    }

    #[test]
    fn hf_dir_spec() {
        let spec = parse("(arch: HfDir(\"models/Qwen2.5-0.5B-Instruct\"), optim: AdamW(lr: 1e-6, schedule: Constant))").unwrap();
        assert_eq!(
            spec.arch,
            ArchSpec::HfDir("models/Qwen2.5-0.5B-Instruct".into())
        );
        assert!(spec.arch.tiny().is_none());
        assert_eq!(spec.tokenizer, TokenizerSpec::Auto);
    }

    #[test]
    fn gguf_spec() {
        let spec = parse("(arch: Gguf(\"m/SmolLM2.gguf\"))").unwrap();
        assert_eq!(spec.arch, ArchSpec::Gguf("m/SmolLM2.gguf".into()));
        assert_eq!(spec.tokenizer, TokenizerSpec::Auto);
    }

    #[test]
    fn lora_settings_parse_and_bad_ones_are_named() {
        let spec = parse("(arch: HfDir(\"m\"), lora: (rank: 4, alpha: 16, targets: [\"q_proj\"]))")
            .unwrap();
        let lora = spec.lora.clone().unwrap();
        assert_eq!((lora.rank, lora.alpha, lora.dropout), (4, 16.0, 0.0));
        assert!(spec.setting_problems(10).is_empty());
        assert_eq!(parse("(arch: HfDir(\"m\"))").unwrap().lora, None);
        let bad = parse("(arch: HfDir(\"m\"), lora: (targets: [\"qkv\"]))").unwrap();
        let problems = bad.setting_problems(10);
        assert_eq!(problems[0].field, vec!["lora", "targets"]);
        assert!(
            problems[0]
                .message
                .starts_with("lora: `targets` has an unknown layer name \"qkv\""),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = parse("(arch: Tiny(layer: 2))").unwrap_err().to_string();
        assert!(err.contains("layer"), "{err}");
        let err = parse("(arch: Tiny(), optimizer: AdamW())")
            .unwrap_err()
            .to_string();
        assert!(err.contains("optimizer"), "{err}");
    }
}
