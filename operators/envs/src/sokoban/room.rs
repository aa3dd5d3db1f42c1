//! A Sokoban room as bitsets: walls, targets and boxes are `u128` masks over the
//! row-major cells (so rooms have at most 128 cells, e.g. 11×11), the player a cell index.
//! Rooms always have a wall border, so a move from an inner cell never leaves the grid.
//!
//! Moves follow gym-sokoban's `_push`/`_move`: stepping into a box pushes it when the cell
//! beyond is neither wall nor box; otherwise a blocked move does nothing.

/// The most cells a room may have (bits in a `u128`).
pub const MAX_CELLS: usize = 128;

/// A move direction, in gym-sokoban's order (up, down, left, right).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Up = 0,
    Down = 1,
    Left = 2,
    Right = 3,
}

/// All directions, in gym-sokoban's `CHANGE_COORDINATES` order.
pub const DIRS: [Dir; 4] = [Dir::Up, Dir::Down, Dir::Left, Dir::Right];

/// What a move did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveOutcome {
    /// The player changed cell.
    pub moved: bool,
    /// A box was pushed.
    pub pushed: bool,
}

/// One room: fixed layout plus the movable state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    pub rows: usize,
    pub cols: usize,
    pub walls: u128,
    pub targets: u128,
    pub boxes: u128,
    pub player: usize,
}

/// The bit of cell `i`.
#[inline]
pub fn bit(i: usize) -> u128 {
    1u128 << i
}

impl Room {
    /// The cell one step from `cell` in `dir` (the caller keeps `cell` off the border).
    #[inline]
    pub fn neighbour(&self, cell: usize, dir: Dir) -> usize {
        match dir {
            Dir::Up => cell - self.cols,
            Dir::Down => cell + self.cols,
            Dir::Left => cell - 1,
            Dir::Right => cell + 1,
        }
    }

    /// Whether `cell` is a wall.
    #[inline]
    pub fn is_wall(&self, cell: usize) -> bool {
        self.walls & bit(cell) != 0
    }

    /// Whether a box stands on `cell`.
    #[inline]
    pub fn has_box(&self, cell: usize) -> bool {
        self.boxes & bit(cell) != 0
    }

    /// Boxes standing on targets.
    pub fn boxes_on_targets(&self) -> u32 {
        (self.boxes & self.targets).count_ones()
    }

    /// Every box is on a target.
    pub fn solved(&self) -> bool {
        self.boxes & !self.targets == 0
    }

    /// One player move (gym-sokoban's push-or-move).
    pub fn step(&mut self, dir: Dir) -> MoveOutcome {
        let next = self.neighbour(self.player, dir);
        if self.is_wall(next) {
            return MoveOutcome::default();
        }
        if self.has_box(next) {
            let beyond = self.neighbour(next, dir);
            if self.is_wall(beyond) || self.has_box(beyond) {
                return MoveOutcome::default();
            }
            self.boxes = self.boxes & !bit(next) | bit(beyond);
            self.player = next;
            return MoveOutcome {
                moved: true,
                pushed: true,
            };
        }
        self.player = next;
        MoveOutcome {
            moved: true,
            pushed: false,
        }
    }

    /// Whether every border cell is a wall (the invariant moves rely on).
    pub fn border_is_walled(&self) -> bool {
        (0..self.rows * self.cols).all(|i| {
            let (r, c) = (i / self.cols, i % self.cols);
            let border = r == 0 || c == 0 || r + 1 == self.rows || c + 1 == self.cols;
            !border || self.is_wall(i)
        })
    }
}
