//! The Qwen2 architecture in burn, generic over the backend (transformers'
//! `modeling_qwen2.py`, one file per block).

pub mod attention;
pub mod attention_mask;
pub mod backbone;
pub mod banded_attention;
pub mod causal_lm;
pub mod decoder_layer;
pub mod dense;
pub mod mask_rule;
pub mod mlp;
pub mod rms_norm;
pub mod rotary;
pub mod selected_queries;
pub mod value_head;

pub use attention_mask::AttentionLayout;
pub use causal_lm::Qwen2CausalLm;
pub use value_head::Qwen2ValueModel;
