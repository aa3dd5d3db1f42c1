//! Random solvable FrozenLake maps, as RAGEN's `generate_random_map`.
//!
//! Each tile is frozen with probability `p`, else a hole (gymnasium's
//! `np_random.choice(["F", "H"], p=[p, 1-p])`); a start and a different goal are drawn
//! uniformly (RAGEN's change to gymnasium, which fixes them in the corners) and written
//! over their tiles; the map is redrawn until a depth-first search finds a path of
//! non-hole tiles from start to goal.

use rand::Rng;

use crate::error::EnvError;

/// What a tile is. The start tile is frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
    Frozen,
    Hole,
    Goal,
}

/// A board: `size × size` tiles, row-major, with the start cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Map {
    pub size: usize,
    pub tiles: Vec<Tile>,
    pub start: (usize, usize),
    pub goal: (usize, usize),
}

/// Redraws before giving up; only reachable with a tiny `p` on a large board.
const MAX_ATTEMPTS: usize = 1_000_000;

impl Map {
    /// The tile at (row, col).
    pub fn tile(&self, row: usize, col: usize) -> Tile {
        self.tiles[row * self.size + col]
    }

    /// Draws maps until one has a path from start to goal.
    pub fn generate(size: usize, p: f64, rng: &mut impl Rng) -> Result<Map, EnvError> {
        let cells = size * size;
        let mut map = Map {
            size,
            tiles: vec![Tile::Frozen; cells],
            start: (0, 0),
            goal: (0, 0),
        };
        let mut stack = Vec::with_capacity(cells);
        let mut seen = vec![false; cells];
        for _ in 0..MAX_ATTEMPTS {
            for tile in map.tiles.iter_mut() {
                *tile = if rng.random::<f64>() < p {
                    Tile::Frozen
                } else {
                    Tile::Hole
                };
            }
            let (start, goal) = distinct_cells(cells, rng);
            map.tiles[start] = Tile::Frozen;
            map.tiles[goal] = Tile::Goal;
            map.start = (start / size, start % size);
            map.goal = (goal / size, goal % size);
            if map.has_path_with(&mut stack, &mut seen) {
                return Ok(map);
            }
        }
        Err(EnvError::Generation {
            env: "FrozenLake",
            reason: format!("no solvable map in {MAX_ATTEMPTS} draws; raise `p`"),
        })
    }

    /// Whether non-hole tiles connect start and goal (4-neighbourhood).
    pub fn has_path(&self) -> bool {
        let cells = self.size * self.size;
        self.has_path_with(&mut Vec::with_capacity(cells), &mut vec![false; cells])
    }

    fn has_path_with(&self, stack: &mut Vec<usize>, seen: &mut [bool]) -> bool {
        let n = self.size;
        seen.fill(false);
        stack.clear();
        let start = self.start.0 * n + self.start.1;
        stack.push(start);
        seen[start] = true;
        while let Some(cell) = stack.pop() {
            if self.tiles[cell] == Tile::Goal {
                return true;
            }
            let (r, c) = (cell / n, cell % n);
            let neighbours = [
                (r > 0).then(|| cell - n),
                (r + 1 < n).then(|| cell + n),
                (c > 0).then(|| cell - 1),
                (c + 1 < n).then(|| cell + 1),
            ];
            for next in neighbours.into_iter().flatten() {
                if !seen[next] && self.tiles[next] != Tile::Hole {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        false
    }
}

/// Two different cells, uniformly (RAGEN redraws the goal until it differs from the start).
fn distinct_cells(cells: usize, rng: &mut impl Rng) -> (usize, usize) {
    let start = rng.random_range(0..cells);
    loop {
        let goal = rng.random_range(0..cells);
        if goal != start {
            return (start, goal);
        }
    }
}
