//! The decoder in burn, generic over the backend: Qwen2 (transformers' `modeling_qwen2.py`,
//! one file per block), with Llama and Qwen3 as switches of the same code
//! ([`crate::family`]).

pub mod attention;
pub mod attention_mask;
pub mod backbone;
pub mod banded_attention;
pub mod cached_step;
pub mod causal_lm;
pub mod compute_dtype;
pub mod decoder_layer;
pub mod dense;
pub mod dropout_masks;
pub mod layer_checkpoints;
pub mod lora_adapter;
pub mod mask_rule;
pub mod mlp;
pub mod prefix_branches;
pub mod queries;
pub mod rms_norm;
pub mod rotary;
pub mod selected_queries;
pub mod value_head;

pub use attention_mask::AttentionLayout;
pub use causal_lm::Qwen2CausalLm;
pub use prefix_branches::PrefixBranches;
pub use queries::Queries;
pub use value_head::Qwen2ValueModel;
