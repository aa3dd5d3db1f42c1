//! The agent's world: text-first, gym-like environments.
//!
//! An [`Env`] is reset with a seed and stepped with the model's raw output text; it returns
//! text observations (the grids use the symbols of docs/REFERENCE.md, "Environments"), a reward
//! and an [`EnvInfo`] with the per-step metrics every system we replace logs (`success`,
//! `action_is_valid`, `action_is_effective`, `format_penalty`). Envs are `Send`, seeded and
//! deterministic: the same seed and the same action texts give the same episode, which is
//! what lets a group of envs share one initial state and lets eval compare across steps.
//!
//! - [`env`](mod@env): the [`Env`] trait, its reset and step results; [`error`]: [`EnvError`].
//! - [`action`]: the `<answer>…</answer>` parser shared by all envs.
//! - [`anchor`]: stable observation hashes, the GiGPO anchor-state key.
//! - [`frozen_lake`], [`sokoban`], [`bandit`], [`math`], [`webshop`]: the built-in envs.
//! - [`config`]: [`EnvConfig`], the RON `env:` value, and [`registry`] for custom envs.
//! - [`manager`]: groups × group_size envs per env tag, their seeds and worker shards.
//! - [`render`]: PNG frames and GIFs; [`recording`]: an episode's renders for eval.
//! - [`play`]: `roll-flow play`, scripted (JSON lines) or interactive.
//! - [`protocol`]: the env-server protocol; [`env_server`]: `roll-flow env-server`; [`process`]: envs
//!   served by processes roll-flow starts (`env: Process(command: [...])`).

pub mod action;
pub mod anchor;
pub mod bandit;
pub mod config;
pub mod env;
pub mod env_server;
pub mod error;
pub mod frozen_lake;
pub mod manager;
pub mod math;
pub mod play;
pub mod preflight;
pub mod process;
pub mod protocol;
pub mod recording;
pub mod registry;
pub mod remote;
pub mod render;
mod served_episode;
pub mod sokoban;
pub mod webshop;

pub use anchor::observation_hash;
pub use config::EnvConfig;
pub use env::{Env, EnvInfo, Reset, StepMetrics, StepResult};
pub use error::EnvError;
pub use manager::{EnvManager, EnvSlot, Shard};
pub use registry::{register_env, EnvFactory};
pub use render::frame::Frame;
