//! Batched autoregressive generation with a KV cache and continuous batching.

pub mod batcher;
pub mod guide;
pub mod kv_cache;
pub mod prefix_reuse;
pub mod request;
pub mod sampler;

pub use batcher::ContinuousBatcher;
pub use guide::AnswerChoices;
pub use kv_cache::{KvCache, LayerKv};
pub use request::{FinishReason, GenerationOutput, GenerationRequest, RequestId};
pub use sampler::{Sampled, SamplingParams};
