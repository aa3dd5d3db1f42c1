//! Sokoban (gym-sokoban rules and rewards, RAGEN/ROLL text interface).
//!
//! Push every box onto a target. Levels are generated per seed by reverse play, so they
//! are always solvable ([`generate`]).
//! - Sizes: SimpleSokoban `dim_room: (6, 6), num_boxes: 1` (the default); LargerSokoban
//!   `dim_room: (8, 8), num_boxes: 2`; `vocabulary: Letters` is the different-vocabulary
//!   variant.
//! - Actions: Up, Down, Left, Right; walking into a box pushes it if the cell beyond is
//!   free.
//! - Rewards (gym-sokoban defaults): −0.1 per step; +1 when a push puts a box on a
//!   target; −1 when it pushes one off; +10 when every box is on a target (terminates).
//! - An unparsable answer is a no-op step (−0.1) plus `format_penalty`.
//! - At most `max_actions_per_turn` actions per answer (RAGEN: 5) and `max_actions` per
//!   episode (ROLL's `max_actions_per_traj`: 10); reaching it truncates.

pub mod generate;
pub mod render;
pub mod room;
mod visited;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::action::{answer_instruction, parse_actions};
use crate::env::{Env, EnvInfo, Reset, StepResult};
use crate::error::EnvError;
use crate::render::frame::Frame;
pub use generate::{GenParams, MAX_BOXES};
pub use render::Vocabulary;
pub use room::{Dir, Room, DIRS, MAX_CELLS};

/// Action names, in [`Dir`] order.
pub const ACTION_NAMES: [&str; 4] = ["Up", "Down", "Left", "Right"];
/// Reward of every step (gym-sokoban `penalty_for_step`).
pub const STEP_REWARD: f32 = -0.1;
/// Reward for pushing a box onto a target (`reward_box_on_target`).
pub const BOX_ON_TARGET_REWARD: f32 = 1.0;
/// Reward for pushing a box off a target (`penalty_box_off_target`).
pub const BOX_OFF_TARGET_REWARD: f32 = -1.0;
/// Reward for solving the level (`reward_finished`).
pub const SOLVED_REWARD: f32 = 10.0;

/// `Sokoban(dim_room: (6, 6), num_boxes: 1, search_depth: 30, vocabulary: Standard)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SokobanConfig {
    /// (rows, columns), border walls included; at most 128 cells. Default (6, 6).
    pub dim_room: (usize, usize),
    /// Boxes (and targets), 1..=8. Default 1.
    pub num_boxes: usize,
    /// Reverse-play depth (gym-sokoban's `ttl`), 2..=1000; deeper gives harder levels.
    /// Default 30.
    pub search_depth: usize,
    /// Text symbols: `Standard` (`# _ O X √ P S`) or `Letters` (`W . G C B A @`).
    pub vocabulary: Vocabulary,
    /// Actions per episode before truncation (ROLL's `max_actions_per_traj`). Default 10.
    pub max_actions: usize,
    /// Actions one answer may chain with `||` (RAGEN: 5). Default 5.
    pub max_actions_per_turn: usize,
    /// Extra reward for an unparsable answer, on top of the no-op step's −0.1.
    /// Default −0.1.
    pub format_penalty: f32,
}

impl Default for SokobanConfig {
    fn default() -> Self {
        SokobanConfig {
            dim_room: (6, 6),
            num_boxes: 1,
            search_depth: 30,
            vocabulary: Vocabulary::Standard,
            max_actions: 10,
            max_actions_per_turn: 5,
            format_penalty: -0.1,
        }
    }
}

fn invalid(field: &'static str, reason: String) -> EnvError {
    EnvError::InvalidConfig {
        env: "Sokoban",
        field,
        reason,
    }
}

impl SokobanConfig {
    /// LargerSokoban: 8×8, 2 boxes.
    pub fn larger() -> Self {
        SokobanConfig {
            dim_room: (8, 8),
            num_boxes: 2,
            ..SokobanConfig::default()
        }
    }

    /// Checks every parameter's range, including that the boxes fit.
    pub fn validate(&self) -> Result<(), EnvError> {
        let (rows, cols) = self.dim_room;
        // checked: `dim_room: (2^32, 2^32)` must not wrap around to a small cell count.
        let too_many_cells = rows.checked_mul(cols).is_none_or(|cells| cells > MAX_CELLS);
        if rows < 3 || cols < 3 || too_many_cells {
            return Err(invalid(
                "dim_room",
                format!("({rows}, {cols}): each side must be ≥ 3 and rows × cols ≤ {MAX_CELLS}"),
            ));
        }
        let inner = (rows - 2) * (cols - 2);
        if self.num_boxes == 0 || self.num_boxes > MAX_BOXES || self.num_boxes + 1 >= inner {
            return Err(invalid(
                "num_boxes",
                format!(
                    "{} boxes do not fit: need 1..={MAX_BOXES} and fewer than {} (inner cells − 1) \
                     for a {rows}×{cols} room",
                    self.num_boxes,
                    inner.saturating_sub(1)
                ),
            ));
        }
        if !(2..=1000).contains(&self.search_depth) {
            return Err(invalid(
                "search_depth",
                format!("{} is not in 2..=1000", self.search_depth),
            ));
        }
        if self.max_actions == 0 || self.max_actions_per_turn == 0 {
            return Err(invalid("max_actions", "action budgets must be ≥ 1".into()));
        }
        if !self.format_penalty.is_finite() {
            return Err(invalid("format_penalty", "must be finite".into()));
        }
        Ok(())
    }

    /// The generator's parameters.
    pub fn gen_params(&self) -> GenParams {
        GenParams {
            rows: self.dim_room.0,
            cols: self.dim_room.1,
            num_boxes: self.num_boxes,
            search_depth: self.search_depth,
        }
    }

    /// A validated env.
    pub fn build(&self) -> Result<Sokoban, EnvError> {
        self.validate()?;
        Ok(Sokoban {
            config: self.clone(),
            room: None,
            actions_taken: 0,
            done: false,
        })
    }
}

/// A Sokoban episode.
pub struct Sokoban {
    config: SokobanConfig,
    room: Option<Room>,
    actions_taken: usize,
    done: bool,
}

impl Sokoban {
    /// The current room (after `reset`).
    pub fn room(&self) -> Option<&Room> {
        self.room.as_ref()
    }

    /// One push-or-move with gym-sokoban's reward; returns (reward, solved, moved).
    fn apply(room: &mut Room, dir: Dir) -> (f32, bool, bool) {
        let before = room.boxes_on_targets();
        let outcome = room.step(dir);
        let after = room.boxes_on_targets();
        let mut reward = STEP_REWARD;
        if after > before {
            reward += BOX_ON_TARGET_REWARD;
        } else if after < before {
            reward += BOX_OFF_TARGET_REWARD;
        }
        let solved = room.solved();
        if solved {
            reward += SOLVED_REWARD;
        }
        (reward, solved, outcome.moved)
    }

    fn count_action(&mut self) -> bool {
        self.actions_taken += 1;
        self.actions_taken >= self.config.max_actions
    }
}

impl Env for Sokoban {
    fn name(&self) -> &'static str {
        "Sokoban"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let room = generate::generate(&self.config.gen_params(), &mut rng).ok_or_else(|| {
            EnvError::Generation {
                env: "Sokoban",
                reason: format!(
                    "no level with displaced boxes after {} rounds; use a larger `dim_room` or \
                     fewer `num_boxes`",
                    generate::MAX_ROUNDS
                ),
            }
        })?;
        self.room = Some(room);
        self.actions_taken = 0;
        self.done = false;
        Ok(Reset {
            observation: self.observation(),
            instruction: instruction(&self.config),
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        let Some(mut room) = self.room.take() else {
            return Err(EnvError::NotReset("Sokoban"));
        };
        if self.done {
            self.room = Some(room);
            return Err(EnvError::EpisodeOver("Sokoban"));
        }
        let parsed = parse_actions(action_text, &ACTION_NAMES, self.config.max_actions_per_turn);
        let (mut reward, mut solved, mut effective, mut truncated) = (0.0, false, false, false);
        let mut info = EnvInfo::default();
        match parsed {
            Err(_) => {
                reward = STEP_REWARD + self.config.format_penalty;
                info.format_penalty = self.config.format_penalty;
                truncated = self.count_action();
            }
            Ok(actions) => {
                info.action_is_valid = true;
                for index in actions {
                    let (r, s, moved) = Self::apply(&mut room, DIRS[index]);
                    reward += r;
                    solved = s;
                    effective |= moved;
                    truncated = !solved && self.count_action();
                    if solved || truncated {
                        break;
                    }
                }
            }
        }
        info.success = solved;
        info.action_is_effective = effective;
        self.room = Some(room);
        self.done = solved || truncated;
        Ok(StepResult {
            observation: self.observation(),
            reward,
            terminated: solved,
            truncated,
            info,
        })
    }

    fn observation(&self) -> String {
        match &self.room {
            Some(room) => render::grid_text(room, self.config.vocabulary),
            None => String::new(),
        }
    }

    fn render_frame(&self) -> Result<Frame, EnvError> {
        match &self.room {
            Some(room) => render::frame(room),
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

fn instruction(config: &SokobanConfig) -> String {
    format!(
        "You are solving the Sokoban puzzle. Push every box onto a target. You push a box by \
         walking into it; you cannot pull boxes or push two at once.\n\
         Symbols: {legend}.\n\
         Actions: Up, Down, Left, Right. Rewards: -0.1 per step, +1 for a box onto a target, \
         -1 for a box off a target, +10 when all boxes are on targets.\n\
         {answer} You may think first inside <think>...</think>.",
        legend = config.vocabulary.legend(),
        answer = answer_instruction(config.max_actions_per_turn, &["Up", "Left"]),
    )
}

#[cfg(test)]
#[path = "sokoban_tests.rs"]
mod tests;
