//! Sokoban: generated levels are solvable (independent BFS), rewards add up, config checks.

#[path = "solver_tests.rs"]
mod solver;

use super::Sokoban;

use super::SokobanConfig;

use crate::sokoban::render::Vocabulary;

use super::ACTION_NAMES;

use crate::env::Env;
use crate::error::EnvError;
use crate::sokoban::room::MAX_CELLS;

/// A hand-made room from Standard-symbol rows, already reset.
fn room_env(config: SokobanConfig, rows: &[&str]) -> Sokoban {
    use super::room::{bit, Room};
    let cols = rows[0].chars().count();
    let mut room = Room {
        rows: rows.len(),
        cols,
        walls: 0,
        targets: 0,
        boxes: 0,
        player: 0,
    };
    for (r, line) in rows.iter().enumerate() {
        for (c, ch) in line.chars().enumerate() {
            let i = r * cols + c;
            match ch {
                '#' => room.walls |= bit(i),
                'O' => room.targets |= bit(i),
                'X' => room.boxes |= bit(i),
                '√' => {
                    room.boxes |= bit(i);
                    room.targets |= bit(i);
                }
                'P' => room.player = i,
                'S' => {
                    room.player = i;
                    room.targets |= bit(i);
                }
                _ => {}
            }
        }
    }
    assert!(room.border_is_walled());
    let mut env = config.build().unwrap();
    env.room = Some(room);
    env
}

fn answer(action: usize) -> String {
    format!("<answer>{}</answer>", ACTION_NAMES[action])
}

/// The topology walk stamps connected masks along a path, so every non-wall cell is
/// reachable from the player when boxes are ignored.
fn floor_is_connected(text: &str) -> bool {
    let grid: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
    let open = |r: usize, c: usize| grid[r][c] != '#';
    let total = grid.iter().flatten().filter(|c| **c != '#').count();
    let start = (0..grid.len())
        .flat_map(|r| (0..grid[r].len()).map(move |c| (r, c)))
        .find(|&(r, c)| matches!(grid[r][c], 'P' | 'S'))
        .unwrap();
    let mut seen = std::collections::HashSet::from([start]);
    let mut stack = vec![start];
    while let Some((r, c)) = stack.pop() {
        for (nr, nc) in [(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)] {
            if open(nr, nc) && seen.insert((nr, nc)) {
                stack.push((nr, nc));
            }
        }
    }
    seen.len() == total
}

fn check_generated_levels(config: SokobanConfig, seeds: u64) {
    let mut env = config.build().unwrap();
    for seed in 0..seeds {
        let reset = env.reset(seed).unwrap();
        let text = &reset.observation;
        let count = |symbols: &[char]| text.chars().filter(|c| symbols.contains(c)).count();
        assert_eq!(count(&['X', '√']), config.num_boxes, "seed {seed}:\n{text}");
        assert_eq!(
            count(&['O', '√', 'S']),
            config.num_boxes,
            "seed {seed}:\n{text}"
        );
        assert_eq!(
            count(&['√']),
            0,
            "no box starts on a target; seed {seed}:\n{text}"
        );
        assert_eq!(count(&['P', 'S']), 1);
        assert!(env.room().unwrap().border_is_walled());

        assert!(floor_is_connected(text), "seed {seed}:\n{text}");
        let level = solver::parse(text);
        let plan =
            solver::solve(&level).unwrap_or_else(|| panic!("seed {seed} unsolvable:\n{text}"));
        assert!(!plan.is_empty());
        replay_and_check_rewards(&config, seed, &level, &plan);
    }
}

/// Plays the solver's plan through the env (one action per turn) and checks each reward
/// against the solver's own box bookkeeping: −0.1 + (+1 | −1 | 0) (+10 at the end).
fn replay_and_check_rewards(
    config: &SokobanConfig,
    seed: u64,
    level: &solver::Level,
    plan: &[usize],
) {
    let mut env = SokobanConfig {
        max_actions: plan.len() + 1,
        ..config.clone()
    }
    .build()
    .unwrap();
    env.reset(seed).unwrap();
    let mut state = solver::start(level);
    let mut total = 0.0f64;
    for (i, &action) in plan.iter().enumerate() {
        let (next, delta) = solver::apply(level, &state, action).unwrap();
        state = next;
        let last = i + 1 == plan.len();
        let expected = -0.1 + f64::from(delta.signum()) + if last { 10.0 } else { 0.0 };
        let step = env.step(&answer(action)).unwrap();
        assert!(
            (f64::from(step.reward) - expected).abs() < 1e-5,
            "seed {seed} step {i}"
        );
        assert_eq!(step.terminated, last);
        assert!(step.info.action_is_effective);
        total += f64::from(step.reward);
    }
    // Every box starts off a target and ends on one: net placements = num_boxes.
    let expected = -0.1 * plan.len() as f64 + config.num_boxes as f64 + 10.0;
    assert!(
        (total - expected).abs() < 1e-4,
        "seed {seed}: {total} vs {expected}"
    );
}

#[test]
fn every_simple_level_is_solvable_and_rewards_add_up() {
    check_generated_levels(SokobanConfig::default(), 300);
}

#[test]
fn every_larger_level_is_solvable_and_rewards_add_up() {
    check_generated_levels(SokobanConfig::larger(), 60);
}

#[test]
fn deeper_search_and_other_shapes_stay_solvable() {
    let configs = [
        SokobanConfig {
            search_depth: 100,
            ..SokobanConfig::default()
        },
        SokobanConfig {
            dim_room: (7, 9),
            num_boxes: 3,
            ..SokobanConfig::default()
        },
        SokobanConfig {
            dim_room: (5, 5),
            num_boxes: 1,
            ..SokobanConfig::default()
        },
    ];
    for config in configs {
        check_generated_levels(config, 25);
    }
}

#[test]
fn reverse_play_pulls_as_far_as_its_depth_allows() {
    use super::generate::reverse_play;
    // Corridor: box on its target at column 2, player at column 3. Only pulls to the right
    // are possible; each pull moves the box one cell (displacement +1, one box swap).
    let env = room_env(SokobanConfig::default(), &["#######", "#_√P__#", "#######"]);
    let start = env.room().unwrap().clone();
    let cases = [
        (2, 0, "#_√P__#"),
        (3, 1, "#_OXP_#"),
        (4, 2, "#_O_XP#"),
        (30, 2, "#_O_XP#"),
    ];
    for (depth, displacement, row) in cases {
        let (room, moved) = reverse_play(&start, depth);
        assert_eq!(moved, displacement, "search_depth {depth}");
        let env = Sokoban {
            room: Some(room),
            ..SokobanConfig::default().build().unwrap()
        };
        assert_eq!(
            env.observation().lines().nth(1).unwrap(),
            row,
            "search_depth {depth}"
        );
    }
}

#[test]
fn scripted_episode_rewards_on_off_and_solved() {
    // Box A starts on target T1: pushing it right takes it off (−1), the next push puts it
    // on T2 (+1); pushing box B up onto T1 solves the level (+1, +10). Every step −0.1.
    let rows = ["######", "#P√_O#", "#_X__#", "#____#", "######"];
    let mut env = room_env(
        SokobanConfig {
            max_actions: 20,
            ..Default::default()
        },
        &rows,
    );
    let script = [
        ("<answer>Left</answer>", -0.1, false),
        ("<answer>Right</answer>", -1.1, true),
        ("<answer>right</answer>", 0.9, true),
        ("<answer>Down || Down || Left</answer>", -0.3, true),
        ("<answer>Up</answer>", 10.9, true),
    ];
    let mut total = 0.0;
    let mut observations = Vec::new();
    for (text, expected, effective) in script {
        let step = env.step(text).unwrap();
        assert!(
            (step.reward - expected).abs() < 1e-5,
            "{text}: {}",
            step.reward
        );
        assert_eq!(step.info.action_is_effective, effective, "{text}");
        total += step.reward;
        observations.push(step.observation.lines().nth(1).unwrap().to_string());
        assert_eq!(step.terminated, expected > 10.0);
    }
    assert_eq!(observations[1], "#_SXO#");
    assert_eq!(observations[2], "#_OP√#");
    assert_eq!(env.observation(), "######\n#_√_√#\n#_P__#\n#____#\n######");
    assert!((total - 10.3).abs() < 1e-4);
    assert_eq!(
        env.step("<answer>Up</answer>"),
        Err(EnvError::EpisodeOver("Sokoban"))
    );
}

#[test]
fn blocked_pushes_do_nothing() {
    let mut env = room_env(
        SokobanConfig::default(),
        &["#######", "#PXX_O#", "#####O#", "#######"],
    );
    let step = env.step("<answer>Right</answer>").unwrap();
    assert!(
        !step.info.action_is_effective,
        "two boxes in a row cannot be pushed"
    );
    assert_eq!(step.observation, "#######\n#PXX_O#\n#####O#\n#######");
}

#[test]
fn multi_action_turn_sums_rewards_and_invalid_is_a_penalised_noop() {
    let mut env = room_env(SokobanConfig::default(), &["######", "#P_XO#", "######"]);
    let bad = env.step("push the box").unwrap();
    assert!((bad.reward - (-0.1 + -0.1)).abs() < 1e-6);
    assert_eq!(bad.info.format_penalty, -0.1);
    assert!(!bad.info.action_is_valid && !bad.done());
    let step = env.step("<answer>Right || Right || Left</answer>").unwrap();
    assert!(
        (step.reward - (-0.1 + 10.9)).abs() < 1e-5,
        "stops at the solving push"
    );
    assert!(step.terminated);
}

#[test]
fn action_budget_truncates() {
    let config = SokobanConfig {
        max_actions: 2,
        ..SokobanConfig::default()
    };
    let mut env = room_env(config, &["######", "#P_XO#", "#____#", "######"]);
    let step = env.step("<answer>Down || Up || Down</answer>").unwrap();
    assert_eq!((step.terminated, step.truncated), (false, true));
    assert!((step.reward - -0.2).abs() < 1e-6);
}

#[test]
fn letters_vocabulary_renders_the_same_room() {
    let config = SokobanConfig {
        vocabulary: Vocabulary::Letters,
        ..SokobanConfig::default()
    };
    let env = room_env(config.clone(), &["######", "#P√XO#", "######"]);
    assert_eq!(env.observation(), "WWWWWW\nWABCGW\nWWWWWW");
    let env = room_env(config, &["#####", "#SX_#", "#####"]);
    assert_eq!(env.observation(), "WWWWW\nW@C.W\nWWWWW");
}

#[test]
fn reset_is_deterministic_and_varied() {
    let config = SokobanConfig::default();
    let (mut a, mut b) = (config.build().unwrap(), config.build().unwrap());
    assert_eq!(
        a.step("<answer>Up</answer>"),
        Err(EnvError::NotReset("Sokoban"))
    );
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..40 {
        let first = a.reset(seed).unwrap();
        assert_eq!(first, b.reset(seed).unwrap());
        distinct.insert(first.observation);
    }
    assert!(distinct.len() > 30);
}

#[test]
fn bad_configs_are_refused() {
    let bad = [
        SokobanConfig {
            dim_room: (0, 6),
            ..Default::default()
        },
        SokobanConfig {
            dim_room: (12, 12),
            ..Default::default()
        },
        SokobanConfig {
            num_boxes: 0,
            ..Default::default()
        },
        SokobanConfig {
            dim_room: (4, 4),
            num_boxes: 3,
            ..Default::default()
        },
        SokobanConfig {
            num_boxes: 9,
            dim_room: (10, 10),
            ..Default::default()
        },
        SokobanConfig {
            search_depth: 1,
            ..Default::default()
        },
        SokobanConfig {
            max_actions: 0,
            ..Default::default()
        },
    ];
    for config in bad {
        assert!(
            matches!(config.build(), Err(EnvError::InvalidConfig { .. })),
            "{config:?}"
        );
    }
}

#[test]
fn a_room_whose_cell_count_overflows_is_refused_not_wrapped() {
    // 2^32 × 2^32 wraps to 0 cells in 64-bit release arithmetic.
    let side = 1usize << 32;
    let config = SokobanConfig {
        dim_room: (side, side),
        ..Default::default()
    };
    let err = config.validate().unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "Sokoban: invalid `dim_room`: ({side}, {side}): each side must be ≥ 3 and rows × cols ≤ {MAX_CELLS}"
        )
    );
}
