//! An independent breadth-first Sokoban solver over the text grid (Standard symbols):
//! it shares no code with the env, so it can judge the generator.

use std::collections::{HashMap, VecDeque};

/// A parsed level: walls and targets by (row, col), boxes and player.
pub struct Level {
    walls: Vec<Vec<bool>>,
    targets: Vec<Vec<bool>>,
    boxes: Vec<(usize, usize)>,
    player: (usize, usize),
}

/// Row/column deltas of Up, Down, Left, Right (the env's action order).
pub const DELTAS: [(isize, isize); 4] = [(-1, 0), (1, 0), (0, -1), (0, 1)];

pub fn parse(text: &str) -> Level {
    let mut level = Level {
        walls: Vec::new(),
        targets: Vec::new(),
        boxes: Vec::new(),
        player: (0, 0),
    };
    for (r, line) in text.lines().enumerate() {
        let (mut walls, mut targets) = (Vec::new(), Vec::new());
        for (c, ch) in line.chars().enumerate() {
            walls.push(ch == '#');
            targets.push(matches!(ch, 'O' | '√' | 'S'));
            if matches!(ch, 'X' | '√') {
                level.boxes.push((r, c));
            }
            if matches!(ch, 'P' | 'S') {
                level.player = (r, c);
            }
        }
        level.walls.push(walls);
        level.targets.push(targets);
    }
    level
}

type State = ((usize, usize), Vec<(usize, usize)>);

fn shift(p: (usize, usize), d: (isize, isize)) -> (usize, usize) {
    ((p.0 as isize + d.0) as usize, (p.1 as isize + d.1) as usize)
}

/// One move: the next state and the change in boxes on targets, or None if blocked.
pub fn apply(level: &Level, state: &State, action: usize) -> Option<(State, i32)> {
    let (player, boxes) = state;
    let d = DELTAS[action];
    let next = shift(*player, d);
    if level.walls[next.0][next.1] {
        return None;
    }
    let mut boxes = boxes.clone();
    let mut delta = 0;
    if let Some(i) = boxes.iter().position(|b| *b == next) {
        let beyond = shift(next, d);
        if level.walls[beyond.0][beyond.1] || boxes.contains(&beyond) {
            return None;
        }
        delta -= i32::from(level.targets[next.0][next.1]);
        delta += i32::from(level.targets[beyond.0][beyond.1]);
        boxes[i] = beyond;
        boxes.sort_unstable();
    }
    Some(((next, boxes), delta))
}

fn solved(level: &Level, boxes: &[(usize, usize)]) -> bool {
    boxes.iter().all(|b| level.targets[b.0][b.1])
}

/// The shortest action sequence that solves the level, if one exists.
pub fn solve(level: &Level) -> Option<Vec<usize>> {
    let mut boxes = level.boxes.clone();
    boxes.sort_unstable();
    let start: State = (level.player, boxes);
    let mut parent: HashMap<State, Option<(State, usize)>> = HashMap::new();
    parent.insert(start.clone(), None);
    let mut queue = VecDeque::from([start]);
    while let Some(state) = queue.pop_front() {
        if solved(level, &state.1) {
            let mut path = Vec::new();
            let mut at = state;
            while let Some(Some((prev, action))) = parent.get(&at).cloned() {
                path.push(action);
                at = prev;
            }
            path.reverse();
            return Some(path);
        }
        for action in 0..4 {
            if let Some((next, _)) = apply(level, &state, action) {
                if !parent.contains_key(&next) {
                    parent.insert(next.clone(), Some((state.clone(), action)));
                    queue.push_back(next);
                }
            }
        }
    }
    None
}

/// The level's start state.
pub fn start(level: &Level) -> State {
    let mut boxes = level.boxes.clone();
    boxes.sort_unstable();
    (level.player, boxes)
}
