//! FrozenLake as text (RAGEN's symbols) and as tiles.

use super::config::FrozenLakeConfig;

use crate::frozen_lake::map::Map;

use crate::error::EnvError;
use crate::frozen_lake::map::Tile;
use crate::render::frame::{Frame, Shape, Tile as PixelTile};

/// The grid, one row per line: `P` player, `_` frozen, `O` hole, `G` goal, `X` player in
/// a hole, `√` player on the goal.
pub fn grid_text(map: &Map, player: (usize, usize)) -> String {
    let mut text = String::with_capacity(map.size * (map.size + 2) + 2);
    for r in 0..map.size {
        if r > 0 {
            text.push('\n');
        }
        for c in 0..map.size {
            let here = (r, c) == player;
            text.push(match (map.tile(r, c), here) {
                (Tile::Frozen, false) => '_',
                (Tile::Frozen, true) => 'P',
                (Tile::Hole, false) => 'O',
                (Tile::Hole, true) => 'X',
                (Tile::Goal, false) => 'G',
                (Tile::Goal, true) => '√',
            });
        }
    }
    text
}

/// The rules, symbols and answer format.
pub fn instruction(config: &FrozenLakeConfig) -> String {
    let slip = if config.slippery {
        " The ice is slippery: you move in the intended direction only 1/3 of the time, \
         otherwise to one of the two perpendicular directions."
    } else {
        ""
    };
    format!(
        "You are solving the FrozenLake puzzle. Walk from your position to the goal over \
         frozen tiles without falling into a hole.{slip}\n\
         Symbols: P you, _ frozen tile, O hole, G goal, X you in a hole, √ you on the goal.\n\
         Actions: Left, Down, Right, Up. Reward: 1 for reaching the goal.\n\
         Answer with up to {k} actions separated by ||, for example \
         <answer>Left || Up</answer>. You may think first inside <think>...</think>.",
        k = config.max_actions_per_turn
    )
}

const ICE: [u8; 3] = [204, 230, 255];
const WATER: [u8; 3] = [20, 40, 110];
const GOAL: [u8; 3] = [60, 180, 75];
const PLAYER: [u8; 3] = [230, 120, 20];
const FALLEN: [u8; 3] = [220, 30, 30];

/// The board as tiles: ice, water holes, a green goal, the player as a disc (a red cross
/// once in a hole).
pub fn frame(map: &Map, player: (usize, usize)) -> Result<Frame, EnvError> {
    Frame::from_tiles(map.size, map.size, |r, c| {
        let here = (r, c) == player;
        match (map.tile(r, c), here) {
            (Tile::Frozen, false) => PixelTile::plain(ICE),
            (Tile::Frozen, true) => PixelTile::marked(ICE, Shape::Disc, PLAYER),
            (Tile::Hole, false) => PixelTile::plain(WATER),
            (Tile::Hole, true) => PixelTile::marked(WATER, Shape::Cross, FALLEN),
            (Tile::Goal, false) => PixelTile::plain(GOAL),
            (Tile::Goal, true) => PixelTile::marked(GOAL, Shape::Disc, PLAYER),
        }
    })
}
