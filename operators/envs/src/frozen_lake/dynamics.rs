//! FrozenLake moves, exactly as gymnasium's FrozenLake-v1.
//!
//! Actions are gymnasium's: 0 Left, 1 Down, 2 Right, 3 Up. A move into the edge of the
//! board leaves the agent in place. With `is_slippery`, gymnasium builds, for intended
//! action `a`, the transitions `for b in [(a-1)%4, a, (a+1)%4]` each with probability 1/3:
//! the intended direction or one of the two perpendicular ones, uniformly. [`slip`]
//! samples exactly that distribution.

use rand::Rng;

/// A FrozenLake action, numbered as in gymnasium.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Left = 0,
    Down = 1,
    Right = 2,
    Up = 3,
}

/// The action names, in gymnasium's order; the parser matches them case-insensitively.
pub const ACTION_NAMES: [&str; 4] = ["Left", "Down", "Right", "Up"];

impl Action {
    /// The action with gymnasium's number `index % 4`.
    pub fn from_index(index: usize) -> Action {
        match index % 4 {
            0 => Action::Left,
            1 => Action::Down,
            2 => Action::Right,
            _ => Action::Up,
        }
    }

    /// (row, column) change of one move.
    pub fn delta(self) -> (isize, isize) {
        match self {
            Action::Left => (0, -1),
            Action::Down => (1, 0),
            Action::Right => (0, 1),
            Action::Up => (-1, 0),
        }
    }
}

/// The direction actually taken on ice: `(a-1)%4`, `a` or `(a+1)%4`, each with 1/3.
pub fn slip(intended: Action, rng: &mut impl Rng) -> Action {
    let a = intended as usize;
    let offset = rng.random_range(0..3usize); // 0: (a-1)%4, 1: a, 2: (a+1)%4
    Action::from_index(a + 3 + offset)
}

/// The cell reached from `(row, col)` by `action` on a `size × size` board (clamped at the
/// edges, as gymnasium's `inc`).
pub fn moved(row: usize, col: usize, action: Action, size: usize) -> (usize, usize) {
    let (dr, dc) = action.delta();
    let r = row.saturating_add_signed(dr).min(size - 1);
    let c = col.saturating_add_signed(dc).min(size - 1);
    (r, c)
}
