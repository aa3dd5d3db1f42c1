//! The [`Env`] trait and what it hands the agent: a [`Reset`], then one [`StepResult`]
//! (with its [`EnvInfo`] metrics) per step.

use serde::Serialize;

use crate::error::EnvError;
use crate::render::frame::Frame;

/// What `reset` hands the agent: the first observation and the rules of the game.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reset {
    /// The initial state as text (for grid envs, the grid).
    pub observation: String,
    /// The rules, the symbols and the answer format, for the system/first user prompt.
    pub instruction: String,
}

/// Most named numbers one step's [`StepMetrics`] holds.
pub const STEP_METRICS: usize = 8;

/// Named per-step numbers an env reports beside the standard flags (WebShop's reward
/// parts on a purchase). Rollout and eval log the mean of each name over the turns that
/// report it, as `info/<name>`. Holds up to [`STEP_METRICS`]; it stays `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepMetrics {
    entries: [(&'static str, f32); STEP_METRICS],
    len: usize,
}

impl StepMetrics {
    /// Adds `name = value`; returns false (and keeps nothing) when full.
    pub fn push(&mut self, name: &'static str, value: f32) -> bool {
        if self.len == STEP_METRICS {
            return false;
        }
        self.entries[self.len] = (name, value);
        self.len += 1;
        true
    }

    /// The value of `name`, if reported.
    pub fn get(&self, name: &str) -> Option<f32> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The reported names and values, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f32)> + '_ {
        self.entries[..self.len].iter().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Serialize for StepMetrics {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
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
    /// The env's own numbers for this step (none for most envs).
    #[serde(skip_serializing_if = "StepMetrics::is_empty")]
    pub metrics: StepMetrics,
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

/// A gym-like, text-first environment. Implement it (and register a factory with
/// [`crate::registry::register_env`]) to add a custom env.
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

    /// The current state as an RGB image ([`crate::render::Frame::from_tiles`] draws a grid).
    fn render_frame(&self) -> Result<Frame, EnvError>;

    /// Whether [`Env::render_frame`] draws anything (eval then records frames); false for
    /// envs with text observations only, such as env servers.
    fn renders_frames(&self) -> bool {
        true
    }

    /// The env's own turn limit, used when the env set gives no `max_turns`.
    fn default_max_turns(&self) -> usize;

    /// The fixed action names, when the env has a finite action set (a rollout may then
    /// constrain replies to `<answer>NAME</answer>`); empty for open-ended answers.
    fn action_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// The actions the current state accepts, as the model would write them inside
    /// `<answer>`: the fixed action names by default; envs whose actions change with the
    /// state (WebShop's page buttons) list the current ones.
    fn valid_actions(&self) -> Vec<String> {
        self.action_names()
    }
}
