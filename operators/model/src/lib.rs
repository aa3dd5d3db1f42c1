//! The model: a Qwen2-architecture causal LM in burn (policy, reference) and its value-head
//! variant (critic), Hugging Face checkpoint loading and saving, the tokenizer and chat
//! template, batched KV-cache generation with continuous batching, and packed log-probs.
//!
//! One code path serves the Tiny preset trained from scratch, a user's Hugging Face directory
//! (Qwen2, Llama or Qwen3: [`family`]) and a GGUF file ([`gguf`]): each is a
//! [`config::Qwen2Config`] plus named weights from a [`weights::WeightSource`].

pub mod build;
pub mod chat_template;
pub mod config;
pub mod error;
pub mod family;
pub mod generate;
pub mod gguf;
pub mod hf;
pub mod kv_cache;
pub mod logprob;
pub mod lora;
pub mod lora_spec;
pub mod optim;
pub mod packed;
pub mod prefix_grouped;
pub mod prompt_logits;
pub mod quick_generate;
pub mod qwen2;
pub mod rope_scaling;
pub mod spec;
pub mod tokenizer;
pub mod weights;

pub use chat_template::ChatMessage;
pub use config::{Qwen2Config, TinyArch};
pub use error::ModelError;
pub use qwen2::{Qwen2CausalLm, Qwen2ValueModel};
pub use tokenizer::TextTokenizer;

/// The CPU backend of the default build (burn's `flex`; measured against `ndarray` in
/// `bench/history/model_throughput.md`).
pub type CpuBackend = burn::backend::Flex;
