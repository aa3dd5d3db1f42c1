//! Rollout: playing env sets with a policy's inference copy and turning the episodes into
//! a batch. The `Rollout` and `Eval` nodes (`crate::nodes`) are built on it.
//!
//! - [`episode`]: what an episode gives and needs; [`episode_run`]: one env's play from
//!   reply to request.
//! - [`env_pool`]: the bounded pool of threads that plays every env (`env_threads`).
//! - [`inference`]: the inference loop that serves the envs with continuous batching (one
//!   loop per group of envs, `inference_loops`).
//! - [`play`]: many episodes at once; [`faults`]: groups an env server's fault lost;
//!   [`early_cut`]: a partial rollout's first groups to finish; [`dynamic_sampling`]:
//!   DAPO's rounds of more groups until enough have rewards that differ.
//! - [`env_player`]: the env sets and policy a node plays ([`env_player::EnvPlayer`]);
//!   [`ahead`]: the same, played up to N steps ahead on its own thread (asynchronous
//!   training).
//! - [`transcript`]: multi-turn chats as tokens, without re-tokenizing replies.
//! - [`samples`]: trajectory-wise and step-wise sample builders; [`stats`]: episode
//!   metrics; [`episode_text`]: an episode as readable text.

pub mod ahead;
pub mod dynamic_sampling;
pub mod early_cut;
pub mod env_player;
pub mod env_pool;
pub mod episode;
pub mod episode_run;
pub mod episode_text;
pub mod faults;
pub mod gathered;
pub mod inference;
pub mod play;
pub mod samples;
pub mod stats;
pub mod transcript;
