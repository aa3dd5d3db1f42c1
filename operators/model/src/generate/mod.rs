//! Batched autoregressive generation with a KV cache ([`crate::kv_cache`]) and continuous
//! batching.

pub mod batcher;
mod device_sampling;
pub mod guide;
pub mod prefix_reuse;
pub mod request;
mod running;
pub mod sampler;

pub use crate::kv_cache::{KvCache, LayerKv};
pub use batcher::ContinuousBatcher;
pub use guide::AnswerChoices;
pub use request::{FinishReason, GenerationOutput, GenerationRequest, RequestId};
pub use sampler::{Sampled, SamplingParams};
