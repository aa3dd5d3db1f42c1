//! FrozenLake as text (RAGEN's symbols or coordinates) and as tiles.

use super::config::{FrozenLakeConfig, ObservationFormat};

use crate::action::answer_instruction;
use crate::error::EnvError;
use crate::frozen_lake::dynamics::{moved, Action, ACTION_NAMES};
use crate::frozen_lake::map::{Map, Tile};
use crate::render::frame::{Frame, Shape, Tile as PixelTile};

/// The grid, one row per line: `P` player, `_` frozen, `O` hole, `G` goal, `X` player in
/// a hole, `√` player on the goal.
pub fn grid_text(map: &Map, player: (usize, usize)) -> String {
    grid_rows(map, player, |symbol, text| text.push(symbol))
}

/// [`grid_text`] with every tile written ` P \t` (RAGEN's first `GRID_LOOKUP`, VAGEN's and
/// Trinity-RFT's): `_P\nG_` is ` _ \t P \t\n G \t _ \t`.
pub fn tabbed_grid_text(map: &Map, player: (usize, usize)) -> String {
    grid_rows(map, player, |symbol, text| {
        text.push(' ');
        text.push(symbol);
        text.push_str(" \t");
    })
}

/// The board one row per line, each tile's symbol written by `write`.
fn grid_rows(map: &Map, player: (usize, usize), write: impl Fn(char, &mut String)) -> String {
    let mut text = String::with_capacity(map.size * (4 * map.size + 1));
    for r in 0..map.size {
        if r > 0 {
            text.push('\n');
        }
        for c in 0..map.size {
            let here = (r, c) == player;
            let symbol = match (map.tile(r, c), here) {
                (Tile::Frozen, false) => '_',
                (Tile::Frozen, true) => 'P',
                (Tile::Hole, false) => 'O',
                (Tile::Hole, true) => 'X',
                (Tile::Goal, false) => 'G',
                (Tile::Goal, true) => '√',
            };
            write(symbol, &mut text);
        }
    }
    text
}

/// The board in `format`, as RAGEN's `_render_text` writes it.
pub fn observation_text(map: &Map, player: (usize, usize), format: ObservationFormat) -> String {
    match format {
        ObservationFormat::Grid => grid_text(map, player),
        ObservationFormat::TabbedGrid => tabbed_grid_text(map, player),
        ObservationFormat::Coord => coordinate_text(map, player),
        ObservationFormat::GridCoord => format!(
            "Coordinates: \n{}\nGrid Map: \n{}",
            coordinate_text(map, player),
            grid_text(map, player)
        ),
        ObservationFormat::CoordRelative => format!(
            "{}\n{}\n{}",
            coordinate_text(map, player),
            goal_offset_text(map, player),
            neighbours_text(map, player)
        ),
    }
}

/// Where the goal lies from the player, in words: `The goal is 2 rows down and 1 column
/// right.` (rows first; one axis when the other is equal), or `You are on the goal.`.
pub fn goal_offset_text(map: &Map, player: (usize, usize)) -> String {
    let axis = |from: usize, to: usize, unit: &str, less: &str, more: &str| {
        let n = from.abs_diff(to);
        let plural = if n > 1 { "s" } else { "" };
        let way = if to > from { more } else { less };
        (n > 0).then(|| format!("{n} {unit}{plural} {way}"))
    };
    let parts: Vec<String> = [
        axis(player.0, map.goal.0, "row", "up", "down"),
        axis(player.1, map.goal.1, "column", "left", "right"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "You are on the goal.".to_string()
    } else {
        format!("The goal is {}.", parts.join(" and "))
    }
}

/// The tile each action steps onto ([`moved`]; `wall` where the move leaves the player in
/// place), in the env's action order: `Next to you: Left: wall, Down: frozen, Right: goal,
/// Up: hole.`
pub fn neighbours_text(map: &Map, player: (usize, usize)) -> String {
    let tiles: Vec<String> = (ACTION_NAMES.iter().enumerate())
        .map(|(i, name)| {
            let (r, c) = moved(player.0, player.1, Action::from_index(i), map.size);
            let tile = match map.tile(r, c) {
                _ if (r, c) == player => "wall",
                Tile::Frozen => "frozen",
                Tile::Hole => "hole",
                Tile::Goal => "goal",
            };
            format!("{name}: {tile}")
        })
        .collect();
    format!("Next to you: {}.", tiles.join(", "))
}

/// RAGEN's `format_coordinate_render` over `collect_entity_coordinates`
/// (`ragen/env/frozen_lake/utils.py`), zero-indexed:
///
/// ```text
/// Board size: 4 rows x 4 cols (zero-indexed).
/// Start: (0, 2)
/// Goal: (2, 1)
/// Player: (1, 2)
/// Holes: (0, 3), (1, 1), (2, 2)
/// ```
///
/// The player's line reads `Player on goal` or `Player in hole` on those tiles; the start
/// stays listed after the player leaves it; holes in row-major order, the line left out
/// when there are none.
pub fn coordinate_text(map: &Map, player: (usize, usize)) -> String {
    let pair = |(r, c): (usize, usize)| format!("({r}, {c})");
    let mut lines = vec![
        format!("Board size: {0} rows x {0} cols (zero-indexed).", map.size),
        format!("Start: {}", pair(map.start)),
        format!("Goal: {}", pair(map.goal)),
    ];
    let player_label = match map.tile(player.0, player.1) {
        Tile::Frozen => "Player",
        Tile::Goal => "Player on goal",
        Tile::Hole => "Player in hole",
    };
    lines.push(format!("{player_label}: {}", pair(player)));
    let holes: Vec<String> = map
        .tiles
        .iter()
        .enumerate()
        .filter(|(_, tile)| **tile == Tile::Hole)
        .map(|(i, _)| pair((i / map.size, i % map.size)))
        .collect();
    if !holes.is_empty() {
        lines.push(format!("Holes: {}", holes.join(", ")));
    }
    lines.join("\n")
}

/// The rules, symbols and answer format.
pub fn instruction(config: &FrozenLakeConfig) -> String {
    let slip = if config.slippery {
        " The ice is slippery: you move in the intended direction only 1/3 of the time, \
         otherwise to one of the two perpendicular directions."
    } else {
        ""
    };
    const SYMBOLS: &str =
        "Symbols: P you, _ frozen tile, O hole, G goal, X you in a hole, √ you on the goal.";
    const POSITIONS: &str = "Positions are (row, col), zero-indexed from the top left: Down \
         adds 1 to the row, Up subtracts 1, Right adds 1 to the column, Left subtracts 1.";
    let board = match config.observation_format {
        ObservationFormat::Grid | ObservationFormat::TabbedGrid => SYMBOLS.to_string(),
        ObservationFormat::Coord | ObservationFormat::CoordRelative => POSITIONS.to_string(),
        ObservationFormat::GridCoord => format!("{SYMBOLS} {POSITIONS}"),
    };
    let answer = answer_instruction(config.max_actions_per_turn, &["Left", "Up"]);
    format!(
        "You are solving the FrozenLake puzzle. Walk from your position to the goal over \
         frozen tiles without falling into a hole.{slip}\n\
         {board}\n\
         Actions: Left, Down, Right, Up. Reward: 1 for reaching the goal.\n\
         {answer} You may think first inside <think>...</think>."
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
