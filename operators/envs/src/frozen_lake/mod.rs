//! FrozenLake (gymnasium FrozenLake-v1 dynamics, RAGEN/ROLL text interface).
//!
//! Cross a frozen lake from the start to the goal without falling into a hole.
//! - Map: random per seed, each tile frozen with probability `p`, random start and goal,
//!   always solvable ([`map`]).
//! - Moves: Left, Down, Right, Up; slippery mode takes the intended direction or either
//!   perpendicular one with 1/3 each, exactly as gymnasium ([`dynamics`]).
//! - Reward 1 on reaching the goal, else 0; the episode terminates on the goal or a hole.
//! - Text (RAGEN's symbols): `P` player, `_` frozen, `O` hole, `G` goal, `X` player in a
//!   hole, `√` player on the goal; one row per line. Or, as RAGEN's `observation_format`
//!   allows, the positions as `(row, col)` pairs, or both; or the pairs with the goal's
//!   offset and the neighbouring tiles in words; or the grid with every tile written
//!   ` P \t` as RAGEN's first version did ([`ObservationFormat`]).
//! - An unparsable answer earns `format_penalty` (ROLL: −0.01) and does not move.
//! - At most `max_actions_per_turn` actions per answer (RAGEN: 5) and `max_actions` per
//!   episode (ROLL's `max_actions_per_traj`: 10); reaching it truncates.

pub mod config;
pub mod dynamics;
pub mod map;
pub mod render;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::action::parse_actions;
use crate::env::{Env, EnvInfo, Reset, StepResult};
use crate::error::EnvError;
use crate::render::frame::Frame;
pub use config::{FrozenLakeConfig, ObservationFormat};
pub use dynamics::{Action, ACTION_NAMES};
pub use map::{Map, Tile};

impl FrozenLakeConfig {
    /// A validated env.
    pub fn build(&self) -> Result<FrozenLake, EnvError> {
        self.validate()?;
        Ok(FrozenLake {
            config: self.clone(),
            map: None,
            position: (0, 0),
            rng: ChaCha8Rng::seed_from_u64(0),
            actions_taken: 0,
            done: false,
        })
    }
}

/// A FrozenLake episode.
pub struct FrozenLake {
    config: FrozenLakeConfig,
    map: Option<Map>,
    position: (usize, usize),
    rng: ChaCha8Rng,
    actions_taken: usize,
    done: bool,
}

impl FrozenLake {
    /// The current map (after `reset`).
    pub fn map(&self) -> Option<&Map> {
        self.map.as_ref()
    }

    /// The player's (row, column).
    pub fn position(&self) -> (usize, usize) {
        self.position
    }

    /// Puts the player back on the start of the current map without drawing a new one
    /// (gymnasium's `reset` on a fixed map); the benchmark uses it between episodes.
    pub fn restart(&mut self) {
        if let Some(map) = &self.map {
            self.position = map.start;
            self.actions_taken = 0;
            self.done = false;
        }
    }

    /// One typed move (the hot path benchmarks and the text step share): returns
    /// `(reward, terminated, moved)`. Call only between `reset` and the episode's end.
    pub fn step_action(&mut self, action: Action) -> (f32, bool, bool) {
        let Some(map) = &self.map else {
            return (0.0, true, false);
        };
        let taken = if self.config.slippery {
            dynamics::slip(action, &mut self.rng)
        } else {
            action
        };
        let (r, c) = dynamics::moved(self.position.0, self.position.1, taken, map.size);
        let moved = (r, c) != self.position;
        self.position = (r, c);
        match map.tile(r, c) {
            Tile::Goal => (1.0, true, moved),
            Tile::Hole => (0.0, true, moved),
            Tile::Frozen => (0.0, false, moved),
        }
    }

    fn on_goal(&self) -> bool {
        self.map
            .as_ref()
            .is_some_and(|m| m.tile(self.position.0, self.position.1) == Tile::Goal)
    }

    fn invalid_step(&self) -> StepResult {
        let penalty = self.config.format_penalty;
        StepResult {
            observation: self.observation(),
            reward: penalty,
            terminated: false,
            truncated: false,
            info: EnvInfo {
                format_penalty: penalty,
                ..EnvInfo::default()
            },
        }
    }
}

impl Env for FrozenLake {
    fn name(&self) -> &'static str {
        "FrozenLake"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
        let map = Map::generate(self.config.size, self.config.p, &mut self.rng)?;
        self.position = map.start;
        self.map = Some(map);
        self.actions_taken = 0;
        self.done = false;
        Ok(Reset {
            observation: self.observation(),
            instruction: render::instruction(&self.config),
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        if self.map.is_none() {
            return Err(EnvError::NotReset("FrozenLake"));
        }
        if self.done {
            return Err(EnvError::EpisodeOver("FrozenLake"));
        }
        let k = self.config.max_actions_per_turn;
        let Ok(actions) = parse_actions(action_text, &ACTION_NAMES, k) else {
            return Ok(self.invalid_step());
        };
        let (mut reward, mut terminated, mut effective) = (0.0, false, false);
        let mut truncated = false;
        for index in actions {
            let (r, term, moved) = self.step_action(Action::from_index(index));
            self.actions_taken += 1;
            reward += r;
            terminated = term;
            effective |= moved;
            truncated = !term && self.actions_taken >= self.config.max_actions;
            if terminated || truncated {
                break;
            }
        }
        self.done = terminated || truncated;
        Ok(StepResult {
            observation: self.observation(),
            reward,
            terminated,
            truncated,
            info: EnvInfo {
                success: self.on_goal(),
                action_is_valid: true,
                action_is_effective: effective,
                format_penalty: 0.0,
                ..Default::default()
            },
        })
    }

    fn observation(&self) -> String {
        match &self.map {
            Some(map) => {
                render::observation_text(map, self.position, self.config.observation_format)
            }
            None => String::new(),
        }
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        match &self.map {
            Some(map) => render::frame(map, self.position),
            None => Ok(Frame::empty()),
        }
    }

    fn default_max_turns(&self) -> usize {
        5
    }

    fn action_names(&self) -> Vec<String> {
        ACTION_NAMES.iter().map(|n| n.to_string()).collect()
    }
}

#[cfg(test)]
#[path = "frozen_lake_tests.rs"]
mod tests;
