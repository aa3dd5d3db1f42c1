//! `Corridor`: a custom environment written in Rust, as a user would write one.
//!
//! A corridor of `length` cells with the goal at one end (which end depends on the seed)
//! and the player in the middle. Each turn the agent answers `<answer>Left</answer>` or
//! `<answer>Right</answer>`; reaching the goal pays 1 and ends the episode, and the
//! episode is truncated after `2 * length` moves. An answer that names no action costs
//! `format_penalty` and does not move.

use roll_flow::envs::action::parse_actions;
use roll_flow::envs::env::{Env, EnvInfo, Reset, StepResult};
use roll_flow::envs::error::EnvError;
use roll_flow::envs::registry::params;
use roll_flow::envs::render::frame::{Frame, Shape, Tile};
use serde::Deserialize;

const ACTIONS: [&str; 2] = ["Left", "Right"];

/// `Custom(name: "Corridor", params: (length: 5))`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorridorConfig {
    /// Cells, at least 3 (default 5).
    pub length: usize,
    /// Reward of an answer that names no action (default −0.1).
    pub format_penalty: f32,
}

impl Default for CorridorConfig {
    fn default() -> Self {
        CorridorConfig {
            length: 5,
            format_penalty: -0.1,
        }
    }
}

/// The factory `Run::env("Corridor", corridor::build)` registers.
pub fn build(value: &ron::Value) -> Result<Box<dyn Env>, EnvError> {
    let config: CorridorConfig = params("Corridor", value)?;
    if config.length < 3 {
        return Err(EnvError::InvalidConfig {
            env: "Corridor",
            field: "length",
            reason: format!("{} is below 3", config.length),
        });
    }
    Ok(Box::new(Corridor {
        config,
        player: 0,
        goal: 0,
        moves: 0,
        done: true,
    }))
}

pub struct Corridor {
    config: CorridorConfig,
    player: usize,
    goal: usize,
    moves: usize,
    done: bool,
}

impl Env for Corridor {
    fn name(&self) -> &'static str {
        "Corridor"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let last = self.config.length - 1;
        self.goal = if seed.is_multiple_of(2) { 0 } else { last };
        self.player = last / 2;
        self.moves = 0;
        self.done = false;
        Ok(Reset {
            observation: self.observation(),
            instruction: "Walk to the goal G. Answer <answer>Left</answer> or \
                          <answer>Right</answer>."
                .into(),
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        if self.done {
            return Err(EnvError::EpisodeOver("Corridor"));
        }
        let mut info = EnvInfo::default();
        let mut reward = 0.0;
        match parse_actions(action_text, &ACTIONS, 1).as_deref() {
            Ok([action]) => {
                let before = self.player;
                self.player = match action {
                    0 => self.player.saturating_sub(1),
                    _ => (self.player + 1).min(self.config.length - 1),
                };
                info.action_is_valid = true;
                info.action_is_effective = self.player != before;
            }
            _ => {
                reward = self.config.format_penalty;
                info.format_penalty = self.config.format_penalty;
            }
        }
        self.moves += 1;
        let terminated = self.player == self.goal;
        if terminated {
            reward += 1.0;
            info.success = true;
        }
        let truncated = !terminated && self.moves >= 2 * self.config.length;
        self.done = terminated || truncated;
        Ok(StepResult {
            observation: self.observation(),
            reward,
            terminated,
            truncated,
            info,
        })
    }

    fn observation(&self) -> String {
        (0..self.config.length)
            .map(|c| match c {
                c if c == self.player => "P",
                c if c == self.goal => "G",
                _ => "_",
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        Frame::from_tiles(1, self.config.length, |_, c| {
            let floor = [230, 230, 230];
            match c {
                c if c == self.player => Tile::marked(floor, Shape::Disc, [40, 90, 200]),
                c if c == self.goal => Tile::plain([60, 170, 60]),
                _ => Tile::plain(floor),
            }
        })
    }

    fn default_max_turns(&self) -> usize {
        2 * self.config.length
    }

    fn action_names(&self) -> Vec<String> {
        ACTIONS.iter().map(|a| a.to_string()).collect()
    }
}
