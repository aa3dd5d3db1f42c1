//! roll-flow operators.
//!
//! - [`algo`]: advantage estimators, reward shaping, KL control and the policy/value
//!   losses, all working on [`roll_flow_engine::Batch`] columns.
//! - [`envs`]: the environments (FrozenLake, Sokoban, Bandit, multi-turn Math), the shared
//!   action parser and the env manager.
//! - [`model`]: the Qwen2-architecture causal LM in burn, HF safetensors loading and
//!   saving, the tokenizer and chat template, and batched KV-cache generation.
//! - [`rollout`]: env loops, the inference loop and the sample builders; [`training`]:
//!   log-probs, values, actor and critic updates; [`eval`] and [`checkpoint`]; [`watch`]:
//!   a checkpoint's policy playing one episode (`roll-flow play --policy`); [`export`]: a
//!   checkpoint's policy as a Hugging Face directory; [`run_dir`]: readying a run's
//!   directory (refusing to mix two runs, checking a checkpoint before resuming).
//! - [`runtime`]: what one worker's operators share (models, optimizers, guides), and
//!   [`runtime::RunBackend`], the backend every operator is generic over (the CPU, or
//!   burn's wgpu/CUDA backends with those features).
//! - [`nodes`]: the registry of RON node kinds, and [`catalog`]: the [`RollFlow`] catalog
//!   that ties nodes, models and envs to the engine.

pub mod algo;
pub mod catalog;
pub mod checkpoint;
pub mod envs;
pub mod eval;
pub mod export;
pub mod model;
pub mod nodes;
pub mod rollout;
pub mod run_dir;
pub mod runtime;
pub mod training;
pub mod watch;

pub use catalog::RollFlow;
