//! FrozenLake's settings: `FrozenLake(size: 4, p: 0.8, slippery: false)`, each default
//! ROLL's or gymnasium's.

use serde::Deserialize;

use crate::error::EnvError;

/// `FrozenLake(size: 4, p: 0.8, slippery: false)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrozenLakeConfig {
    /// Board side (tiles); at least 2. Default 4.
    pub size: usize,
    /// Probability that a tile is frozen (not a hole), in (0, 1]. Default 0.8.
    pub p: f64,
    /// gymnasium's slippery ice: intended direction 1/3, each perpendicular 1/3.
    /// Default false, as ROLL's configs (RAGEN's paper uses true).
    pub slippery: bool,
    /// Actions per episode before truncation (ROLL's `max_actions_per_traj`). Default 10.
    pub max_actions: usize,
    /// Actions one answer may chain with `||` (RAGEN: 5). Default 5.
    pub max_actions_per_turn: usize,
    /// Reward for an unparsable answer (ROLL: −0.01). Default −0.01.
    pub format_penalty: f32,
    /// How an observation shows the board (RAGEN's `observation_format`). Default `Grid`.
    pub observation_format: ObservationFormat,
}

/// RAGEN's FrozenLake `observation_format` (`ragen/env/frozen_lake/env.py`, `_render_text`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum ObservationFormat {
    /// One row per line in RAGEN's symbols (`grid`), a character a tile, as ROLL renders it.
    #[default]
    Grid,
    /// The grid with each tile written ` P \t`, as RAGEN's first FrozenLake, VAGEN and
    /// Trinity-RFT write it (their `GRID_LOOKUP`). Under a BPE tokenizer the plain grid's
    /// runs of `_` merge (`___` is one SmolLM2 token), so a column is no fixed distance in
    /// tokens; here every tile is the same three tokens and the tile below is one row of
    /// tokens later.
    TabbedGrid,
    /// The board size, then the start, goal, player and holes as zero-indexed
    /// `(row, col)` pairs (`coord`): a model need not find cells in a tokenized grid.
    Coord,
    /// `Coordinates: ` and the coordinates, then `Grid Map: ` and the grid (`grid_coord`).
    GridCoord,
    /// The coordinates, then the goal's offset from the player in words and the tile each
    /// action steps onto (not RAGEN's): what a small pretrained model can read without
    /// comparing numbers first (bench/history/smollm2.md, 2026-12-05 22:21).
    CoordRelative,
}

impl Default for FrozenLakeConfig {
    fn default() -> Self {
        FrozenLakeConfig {
            size: 4,
            p: 0.8,
            slippery: false,
            max_actions: 10,
            max_actions_per_turn: 5,
            format_penalty: -0.01,
            observation_format: ObservationFormat::default(),
        }
    }
}

fn invalid(field: &'static str, reason: String) -> EnvError {
    EnvError::InvalidConfig {
        env: "FrozenLake",
        field,
        reason,
    }
}

impl FrozenLakeConfig {
    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), EnvError> {
        if !(2..=64).contains(&self.size) {
            return Err(invalid("size", format!("{} is not in 2..=64", self.size)));
        }
        if !(self.p > 0.0 && self.p <= 1.0) {
            return Err(invalid("p", format!("{} is not in (0, 1]", self.p)));
        }
        if self.max_actions == 0 {
            return Err(invalid("max_actions", "must be at least 1".into()));
        }
        if self.max_actions_per_turn == 0 {
            return Err(invalid("max_actions_per_turn", "must be at least 1".into()));
        }
        if !self.format_penalty.is_finite() {
            return Err(invalid("format_penalty", "must be finite".into()));
        }
        Ok(())
    }
}
