//! Level generation, as RAGEN's adaptation of gym-sokoban's `room_utils.generate_room`
//! (the code ROLL and RAGEN train on):
//!
//! 1. Topology: a random walk of `num_steps` (gym-sokoban: ⌊1.7·(rows+cols)⌋) steps from a
//!    random cell, changing direction with probability 0.35, stamping one of five 3×3
//!    floor masks at each position; the border is wall.
//! 2. Placement: the player and then `num_boxes` targets on random distinct floor cells
//!    (fails if there are not more than `num_boxes + 1` floor cells); every box starts on
//!    its target.
//! 3. Reverse play: a depth-first search over "move, pulling the box behind you if there is
//!    one" in the four directions (up, down, left, right), `ttl = search_depth`, at most
//!    300,000 explored states. A state's score is `box_swaps × Σ|box − its target|₁`
//!    (Manhattan), 0 unless every target is free of boxes and player; `box_swaps` counts
//!    pulls of a box other than the previously pulled one (RAGEN passes the new
//!    `last_pull` down; gym-sokoban's original passes the old one and so counts every
//!    pull). The first state with the highest score is kept. A try whose best state has
//!    zero box displacement is redrawn (`tries = 4` per round, rounds repeat as
//!    gym-sokoban's `reset` does on `RuntimeWarning`).
//! 4. Random player moves (RAGEN's `add_random_player_movement`): with probability 0.8 if
//!    the total displacement is 1, else 0.5, the player walks 1–3 steps onto free,
//!    not yet visited cells, continuing after each step with probability 0.5.
//!
//! Pulls are exact reverses of pushes, so every generated level is solvable.

use std::cell::RefCell;

use rand::Rng;

use super::room::{bit, Dir, Room, DIRS};
use super::visited::{StateKey, Visited};

/// gym-sokoban's cap on explored states per search.
const MAX_EXPLORED: usize = 300_000;
/// gym-sokoban's `p_change_directions`.
const P_CHANGE_DIRECTION: f64 = 0.35;
/// gym-sokoban's `tries` per `generate_room` call.
const TRIES_PER_ROUND: usize = 4;
/// Rounds before giving up (only for rooms that can hardly hold the boxes).
pub const MAX_ROUNDS: usize = 250;
/// The most boxes a room may hold.
pub const MAX_BOXES: usize = 8;

/// The 3×3 floor masks of the topology walk, as gym-sokoban lists them.
const MASKS: [[[bool; 3]; 3]; 5] = {
    const O: bool = false;
    const I: bool = true;
    [
        [[O, O, O], [I, I, I], [O, O, O]],
        [[O, I, O], [O, I, O], [O, I, O]],
        [[O, O, O], [I, I, O], [O, I, O]],
        [[O, O, O], [I, I, O], [I, I, O]],
        [[O, O, O], [O, I, I], [O, I, O]],
    ]
};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenParams {
    pub rows: usize,
    pub cols: usize,
    pub num_boxes: usize,
    pub search_depth: usize,
}

impl GenParams {
    /// gym-sokoban's walk length: `int(1.7 * (dim_x + dim_y))`.
    pub fn walk_steps(&self) -> usize {
        (17 * (self.rows + self.cols)) / 10
    }
}

thread_local! {
    /// Explored-state scratch, reused by every generation on this thread.
    static VISITED: RefCell<Visited> = RefCell::new(Visited::default());
}

/// Generates one solvable room, or `None` after [`MAX_ROUNDS`] rounds of failures.
pub fn generate(params: &GenParams, rng: &mut impl Rng) -> Option<Room> {
    VISITED.with(|visited| {
        let visited = &mut visited.borrow_mut();
        for _ in 0..MAX_ROUNDS * TRIES_PER_ROUND {
            let floor = topology(params, rng);
            let Some(start) = place(params, floor, rng) else {
                continue;
            };
            let (mut room, displacement) = reverse_play_with(&start, params.search_depth, visited);
            if displacement > 0 {
                random_player_moves(&mut room, displacement, rng);
                return Some(room);
            }
        }
        None
    })
}

/// Step 3 alone: the best state reverse play reaches from `start` (boxes on their
/// targets), and its total box displacement.
pub fn reverse_play(start: &Room, search_depth: usize) -> (Room, i64) {
    VISITED.with(|visited| reverse_play_with(start, search_depth, &mut visited.borrow_mut()))
}

fn reverse_play_with(start: &Room, search_depth: usize, visited: &mut Visited) -> (Room, i64) {
    let mut search = ReversePlay::new(start, visited);
    search.run(search_depth);
    search.best_room()
}

/// Step 1: the floor cells of a random-walk topology.
fn topology(p: &GenParams, rng: &mut impl Rng) -> u128 {
    let (rows, cols) = (p.rows as isize, p.cols as isize);
    let moves: [(isize, isize); 4] = [(1, 0), (0, 1), (-1, 0), (0, -1)];
    let mut direction = moves[rng.random_range(0..4)];
    let mut r = rng.random_range(1..=p.rows as i64 - 1) as isize;
    let mut c = rng.random_range(1..=p.cols as i64 - 1) as isize;
    let mut floor = 0u128;
    for _ in 0..p.walk_steps() {
        if rng.random::<f64>() < P_CHANGE_DIRECTION {
            direction = moves[rng.random_range(0..4)];
        }
        r = (r + direction.0).clamp(1, rows - 2);
        c = (c + direction.1).clamp(1, cols - 2);
        let mask = &MASKS[rng.random_range(0..MASKS.len())];
        for (dr, mask_row) in mask.iter().enumerate() {
            for (dc, &on) in mask_row.iter().enumerate() {
                if on {
                    let cell = (r - 1 + dr as isize) * cols + (c - 1 + dc as isize);
                    floor |= bit(cell as usize);
                }
            }
        }
    }
    floor & interior_mask(p.rows, p.cols)
}

fn interior_mask(rows: usize, cols: usize) -> u128 {
    (0..rows * cols)
        .filter(|i| {
            let (r, c) = (i / cols, i % cols);
            r > 0 && c > 0 && r + 1 < rows && c + 1 < cols
        })
        .fold(0, |mask, i| mask | bit(i))
}

/// The `k`-th set bit of `mask`.
fn nth_cell(mut mask: u128, k: usize) -> usize {
    for _ in 0..k {
        mask &= mask - 1;
    }
    mask.trailing_zeros() as usize
}

/// Step 2: player and targets on distinct floor cells, boxes on their targets.
fn place(p: &GenParams, floor: u128, rng: &mut impl Rng) -> Option<Room> {
    let free_cells = floor.count_ones() as usize;
    if free_cells <= p.num_boxes + 1 {
        return None;
    }
    let player = nth_cell(floor, rng.random_range(0..free_cells));
    let mut free = floor & !bit(player);
    let mut targets = 0u128;
    for _ in 0..p.num_boxes {
        let cell = nth_cell(free, rng.random_range(0..free.count_ones() as usize));
        targets |= bit(cell);
        free &= !bit(cell);
    }
    Some(Room {
        rows: p.rows,
        cols: p.cols,
        walls: !floor & full_mask(p.rows * p.cols),
        targets,
        boxes: targets,
        player,
    })
}

fn full_mask(cells: usize) -> u128 {
    if cells >= 128 {
        u128::MAX
    } else {
        bit(cells) - 1
    }
}

/// A node of the reverse-play search: the movable state plus the score's bookkeeping.
#[derive(Clone, Copy)]
struct Node {
    player: usize,
    boxes: u128,
    /// `positions[k]`: where box k (the one that started on target k) stands now.
    positions: [usize; MAX_BOXES],
    box_swaps: i64,
    last_pull: Option<usize>,
}

/// Step 3: the depth-first reverse-play search.
struct ReversePlay<'a> {
    room: &'a Room,
    visited: &'a mut Visited,
    num_targets: usize,
    /// `origins[k]`: box k's target (gym-sokoban's box_mapping keys).
    origins: [usize; MAX_BOXES],
    best_score: i64,
    best: Node,
}

impl<'a> ReversePlay<'a> {
    fn new(room: &'a Room, visited: &'a mut Visited) -> Self {
        visited.clear();
        let mut origins = [0; MAX_BOXES];
        let mut targets = room.targets;
        let mut n = 0;
        while targets != 0 {
            origins[n] = targets.trailing_zeros() as usize;
            targets &= targets - 1;
            n += 1;
        }
        let start = Node {
            player: room.player,
            boxes: room.boxes,
            positions: origins,
            box_swaps: 0,
            last_pull: None,
        };
        ReversePlay {
            room,
            visited,
            num_targets: n,
            origins,
            best_score: -1,
            best: start,
        }
    }

    fn run(&mut self, search_depth: usize) {
        let start = self.best; // before searching, the best node is the start node
        self.search(start, search_depth);
    }

    fn displacement(&self, positions: &[usize; MAX_BOXES]) -> i64 {
        let cols = self.room.cols;
        (0..self.num_targets)
            .map(|k| {
                let (a, b) = (positions[k], self.origins[k]);
                ((a / cols).abs_diff(b / cols) + (a % cols).abs_diff(b % cols)) as i64
            })
            .sum()
    }

    /// gym-sokoban's `depth_first_search` (RAGEN's pull-only variant).
    fn search(&mut self, node: Node, ttl: usize) {
        let ttl = ttl.saturating_sub(1);
        if ttl == 0 || self.visited.len() >= MAX_EXPLORED {
            return;
        }
        let key = StateKey {
            boxes: node.boxes,
            player: node.player as u8,
        };
        if !self.visited.insert(key) {
            return;
        }
        let targets_free = self.room.targets & (node.boxes | bit(node.player)) == 0;
        let score = if targets_free {
            node.box_swaps * self.displacement(&node.positions)
        } else {
            0
        };
        if score > self.best_score {
            self.best_score = score;
            self.best = node;
        }
        for dir in DIRS {
            if let Some(child) = self.reverse_move(&node, dir) {
                self.search(child, ttl);
            }
        }
    }

    /// Moves the player one cell, pulling the box behind it along; `None` when blocked
    /// (gym-sokoban then recurses into the unchanged, already explored state).
    fn reverse_move(&self, node: &Node, dir: Dir) -> Option<Node> {
        let next = self.room.neighbour(node.player, dir);
        if self.room.is_wall(next) || node.boxes & bit(next) != 0 {
            return None;
        }
        let behind = self.room.neighbour(node.player, opposite(dir));
        let mut child = Node {
            player: next,
            ..*node
        };
        if node.boxes & bit(behind) != 0 {
            let k = (0..self.num_targets).find(|&k| node.positions[k] == behind)?;
            child.positions[k] = node.player;
            child.boxes = node.boxes & !bit(behind) | bit(node.player);
            child.box_swaps += i64::from(node.last_pull != Some(k));
            child.last_pull = Some(k);
        }
        Some(child)
    }

    /// The best state as a room, and its total box displacement.
    fn best_room(&self) -> (Room, i64) {
        let room = Room {
            boxes: self.best.boxes,
            player: self.best.player,
            ..self.room.clone()
        };
        (room, self.displacement(&self.best.positions))
    }
}

fn opposite(dir: Dir) -> Dir {
    match dir {
        Dir::Up => Dir::Down,
        Dir::Down => Dir::Up,
        Dir::Left => Dir::Right,
        Dir::Right => Dir::Left,
    }
}

/// Step 4: RAGEN's `add_random_player_movement` (max 3 steps, continue with 0.5).
fn random_player_moves(room: &mut Room, displacement: i64, rng: &mut impl Rng) {
    let move_probability = if displacement == 1 { 0.8 } else { 0.5 };
    if rng.random::<f64>() > move_probability {
        return;
    }
    let mut visited = bit(room.player);
    for steps in 1..=3 {
        let mut options = [0usize; 4];
        let mut n = 0;
        for dir in DIRS {
            let next = room.neighbour(room.player, dir);
            if !room.is_wall(next) && !room.has_box(next) && visited & bit(next) == 0 {
                options[n] = next;
                n += 1;
            }
        }
        if n == 0 {
            return;
        }
        room.player = options[rng.random_range(0..n)];
        visited |= bit(room.player);
        if steps == 3 || rng.random::<f64>() > 0.5 {
            return;
        }
    }
}
