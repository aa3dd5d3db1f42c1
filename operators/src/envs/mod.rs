//! The agent's world: text-first, gym-like environments.
//!
//! An [`Env`] is reset with a seed and stepped with the model's raw output text; it returns
//! text observations (the grids use the symbols of REFERENCE.md, "Environments"), a reward
//! and an [`EnvInfo`] with the per-step metrics every system we replace logs (`success`,
//! `action_is_valid`, `action_is_effective`, `format_penalty`). Envs are `Send`, seeded and
//! deterministic: the same seed and the same action texts give the same episode, which is
//! what lets a group of envs share one initial state and lets eval compare across steps.
//!
//! - [`action`]: the `<answer>…</answer>` parser shared by all envs.
//! - [`anchor`]: stable observation hashes, the GiGPO anchor-state key.
//! - [`frozen_lake`], [`sokoban`], [`bandit`], [`math`]: the built-in envs.
//! - [`config`]: [`EnvConfig`], the RON `env:` value, and [`registry`] for custom envs.
//! - [`manager`]: groups × group_size envs per env tag, their seeds and worker shards.
//! - [`render`]: PNG frames and GIF episodes for eval renders.
//! - [`play`]: `roll-flow play`, scripted (JSON lines) or interactive.

pub mod action;
pub mod anchor;
pub mod bandit;
pub mod config;
pub mod frozen_lake;
pub mod manager;
pub mod math;
pub mod play;
pub mod registry;
pub mod render;
pub mod sokoban;

use serde::Serialize;

pub use anchor::observation_hash;
pub use config::EnvConfig;
pub use manager::{EnvManager, EnvSlot, Shard};
pub use registry::{register_env, EnvFactory};
pub use render::Frame;

/// What `reset` hands the agent: the first observation and the rules of the game.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reset {
    /// The initial state as text (for grid envs, the grid).
    pub observation: String,
    /// The rules, the symbols and the answer format, for the system/first user prompt.
    pub instruction: String,
}

/// Per-step metrics, named as ROLL and RAGEN log them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EnvInfo {
    /// The episode is won (goal reached, all boxes on targets, answer correct, ...).
    pub success: bool,
    /// The action text parsed into actions the env knows.
    pub action_is_valid: bool,
    /// The actions changed the state (e.g. the player moved).
    pub action_is_effective: bool,
    /// The format penalty applied this step (0 when the action was valid); it is already
    /// included in the step's reward.
    pub format_penalty: f32,
}

/// The result of one `step`: gymnasium's `(observation, reward, terminated, truncated, info)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepResult {
    /// The new state as text. It is also the GiGPO anchor-state key: equal strings are the
    /// same state.
    #[serde(rename = "obs")]
    pub observation: String,
    /// The step's reward, format penalty included.
    pub reward: f32,
    /// The episode ended by the env's rules (goal, hole, solved, answered).
    pub terminated: bool,
    /// The episode was cut by the env's action budget.
    pub truncated: bool,
    /// Per-step metrics.
    pub info: EnvInfo,
}

impl StepResult {
    /// Whether the episode is over, either way.
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// Errors of env construction and use. Messages are for users: they say what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// A config parameter is out of range.
    #[error("{env}: invalid `{field}`: {reason}")]
    InvalidConfig {
        env: &'static str,
        field: &'static str,
        reason: String,
    },
    /// `step` was called before the first `reset`.
    #[error("{0}: step called before reset")]
    NotReset(&'static str),
    /// `step` was called after the episode ended.
    #[error("{0}: the episode is over (terminated or truncated); call reset")]
    EpisodeOver(&'static str),
    /// Level generation gave up (only with extreme parameters).
    #[error("{env}: could not generate a level: {reason}")]
    Generation { env: &'static str, reason: String },
    /// A custom env name that nobody registered.
    #[error("unknown custom env `{name}`; registered: {known}")]
    UnknownCustom { name: String, known: String },
    /// A custom env's parameters did not fit its config type.
    #[error("custom env `{name}`: {reason}")]
    CustomParams { name: String, reason: String },
    /// The env spec given on the command line or in a file did not parse.
    #[error("env spec: {0}")]
    Spec(String),
    /// Rendering or writing an image failed.
    #[error("render: {0}")]
    Render(String),
}

/// A gym-like, text-first environment. Implement it (and register a factory with
/// [`register_env`]) to add a custom env.
pub trait Env: Send {
    /// The env's name as users write it in RON (`"FrozenLake"`).
    fn name(&self) -> &'static str;

    /// Starts a new episode from `seed`. The same seed always gives the same episode.
    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError>;

    /// Applies the model's raw output text (`<think>…</think><answer>…</answer>`).
    /// Unparsable text is not an error: it earns the env's format penalty.
    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError>;

    /// The current state as text (the same string as the last observation).
    fn observation(&self) -> String;

    /// The current state as an RGB image ([`Frame::from_tiles`] draws a grid).
    fn render_frame(&self) -> Result<Frame, EnvError>;

    /// The env's own turn limit, used when the env set gives no `max_turns`.
    fn default_max_turns(&self) -> usize;

    /// The fixed action names, when the env has a finite action set (a rollout may then
    /// constrain replies to `<answer>NAME</answer>`); empty for open-ended answers.
    fn action_names(&self) -> Vec<String> {
        Vec::new()
    }
}
