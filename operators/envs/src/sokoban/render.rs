//! Sokoban as text (two vocabularies) and as tiles.

use serde::Deserialize;

use super::room::{bit, Room};
use crate::error::EnvError;
use crate::render::frame::{Frame, Shape, Tile};

/// Which symbols the text grid uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Vocabulary {
    /// RAGEN's: `#` wall, `_` floor, `O` target, `X` box, `√` box on target, `P` player,
    /// `S` player on target.
    #[default]
    Standard,
    /// ROLL's different-vocabulary variant: `W` wall, `.` floor, `G` target, `C` box,
    /// `B` box on target, `A` player, `@` player on target.
    Letters,
}

/// A cell's content, independent of vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Wall,
    Floor,
    Target,
    Box,
    BoxOnTarget,
    Player,
    PlayerOnTarget,
}

fn cell(room: &Room, i: usize) -> Cell {
    let on_target = room.targets & bit(i) != 0;
    if room.is_wall(i) {
        Cell::Wall
    } else if room.has_box(i) {
        if on_target {
            Cell::BoxOnTarget
        } else {
            Cell::Box
        }
    } else if room.player == i {
        if on_target {
            Cell::PlayerOnTarget
        } else {
            Cell::Player
        }
    } else if on_target {
        Cell::Target
    } else {
        Cell::Floor
    }
}

impl Vocabulary {
    fn symbol(self, cell: Cell) -> char {
        let symbols = match self {
            Vocabulary::Standard => ['#', '_', 'O', 'X', '√', 'P', 'S'],
            Vocabulary::Letters => ['W', '.', 'G', 'C', 'B', 'A', '@'],
        };
        symbols[cell as usize]
    }

    /// The legend line of the instruction.
    pub fn legend(self) -> String {
        let names = [
            "wall",
            "floor",
            "target",
            "box",
            "box on target",
            "you",
            "you on a target",
        ];
        let cells = [
            Cell::Wall,
            Cell::Floor,
            Cell::Target,
            Cell::Box,
            Cell::BoxOnTarget,
            Cell::Player,
            Cell::PlayerOnTarget,
        ];
        let parts: Vec<String> = cells
            .iter()
            .zip(names)
            .map(|(c, name)| format!("{} {name}", self.symbol(*c)))
            .collect();
        parts.join(", ")
    }
}

/// The grid, one row per line.
pub fn grid_text(room: &Room, vocabulary: Vocabulary) -> String {
    let mut text = String::with_capacity(room.rows * (room.cols + 2) * 2);
    for r in 0..room.rows {
        if r > 0 {
            text.push('\n');
        }
        for c in 0..room.cols {
            text.push(vocabulary.symbol(cell(room, r * room.cols + c)));
        }
    }
    text
}

const WALL: [u8; 3] = [90, 60, 40];
const FLOOR: [u8; 3] = [225, 215, 190];
const TARGET: [u8; 3] = [200, 40, 40];
const BOX: [u8; 3] = [170, 110, 40];
const BOX_DONE: [u8; 3] = [60, 170, 60];
const PLAYER: [u8; 3] = [40, 80, 200];

/// The room as tiles: brown walls, sand floor, red target rings, boxes as squares (green
/// on a target), the player as a blue disc.
pub fn frame(room: &Room) -> Result<Frame, EnvError> {
    Frame::from_tiles(room.rows, room.cols, |r, c| {
        match cell(room, r * room.cols + c) {
            Cell::Wall => Tile::plain(WALL),
            Cell::Floor => Tile::plain(FLOOR),
            Cell::Target => Tile::marked(FLOOR, Shape::Ring, TARGET),
            Cell::Box => Tile::marked(FLOOR, Shape::Square, BOX),
            Cell::BoxOnTarget => Tile::marked(FLOOR, Shape::Square, BOX_DONE),
            Cell::Player => Tile::marked(FLOOR, Shape::Disc, PLAYER),
            Cell::PlayerOnTarget => Tile::marked(TARGET, Shape::Disc, PLAYER),
        }
    })
}
