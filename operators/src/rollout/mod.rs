//! Rollout: playing env sets with a policy's inference copy and turning the episodes into
//! a batch. The `Rollout` and `Eval` nodes (`crate::nodes`) are built on it.
//!
//! - [`episode`]: one env's loop, on its own thread.
//! - [`inference`]: the inference loop that serves env loops with continuous batching (one
//!   loop per group of envs, `inference_loops`).
//! - [`play`]: many episodes at once, each env on its own thread; [`faults`]: groups an
//!   env server's fault lost.
//! - [`env_player`]: the env sets and policy a node plays ([`env_player::EnvPlayer`]).
//! - [`transcript`]: multi-turn chats as tokens, without re-tokenizing replies.
//! - [`samples`]: trajectory-wise and step-wise sample builders; [`stats`]: episode
//!   metrics; [`episode_text`]: an episode as readable text.

pub mod env_player;
pub mod episode;
pub mod episode_text;
pub mod faults;
pub mod inference;
pub mod play;
pub mod samples;
pub mod stats;
pub mod transcript;
