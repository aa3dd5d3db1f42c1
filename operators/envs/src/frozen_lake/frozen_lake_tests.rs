//! FrozenLake: gymnasium's slip distribution, map solvability, scripted episodes.

use std::collections::VecDeque;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::dynamics::{slip, Action};
use super::{FrozenLake, FrozenLakeConfig, ObservationFormat};
use crate::env::Env;
use crate::error::EnvError;
use crate::frozen_lake::map::{Map, Tile};

/// A lake from text rows (`P` start, `_` frozen, `O` hole, `G` goal), already reset.
fn lake(config: FrozenLakeConfig, rows: &[&str]) -> FrozenLake {
    let size = rows.len();
    let mut map = Map {
        size,
        tiles: Vec::new(),
        start: (0, 0),
        goal: (0, 0),
    };
    for (r, row) in rows.iter().enumerate() {
        for (c, ch) in row.chars().enumerate() {
            map.tiles.push(match ch {
                'O' => Tile::Hole,
                'G' => Tile::Goal,
                _ => Tile::Frozen,
            });
            match ch {
                'P' => map.start = (r, c),
                'G' => map.goal = (r, c),
                _ => {}
            }
        }
    }
    let mut env = config.build().unwrap();
    env.position = map.start;
    env.map = Some(map);
    env
}

/// ±4σ bound for a frequency with probability `p` over `n` draws.
fn within_sigma(count: usize, n: usize, p: f64) -> bool {
    let sigma = (p * (1.0 - p) / n as f64).sqrt();
    (count as f64 / n as f64 - p).abs() <= 4.0 * sigma
}

#[test]
fn slip_takes_intended_and_perpendiculars_one_third_each() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 90_000;
    for intended in [Action::Left, Action::Down, Action::Right, Action::Up] {
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[slip(intended, &mut rng) as usize] += 1;
        }
        let a = intended as usize;
        // gymnasium: for b in [(a - 1) % 4, a, (a + 1) % 4], each with probability 1/3.
        for b in [(a + 3) % 4, a, (a + 1) % 4] {
            assert!(
                within_sigma(counts[b], n, 1.0 / 3.0),
                "{intended:?}: {counts:?}"
            );
        }
        assert_eq!(counts[(a + 2) % 4], 0, "never the opposite direction");
    }
}

#[test]
fn slippery_env_moves_match_one_third_each_from_the_centre() {
    let config = FrozenLakeConfig {
        slippery: true,
        max_actions: usize::MAX,
        ..FrozenLakeConfig::default()
    };
    let mut env = lake(config, &["_____", "_____", "__P__", "_____", "____G"]);
    let n = 30_000;
    let mut landed = std::collections::HashMap::new();
    for _ in 0..n {
        env.position = (2, 2);
        let (reward, terminated, moved) = env.step_action(Action::Right);
        assert_eq!((reward, terminated, moved), (0.0, false, true));
        *landed.entry(env.position).or_insert(0usize) += 1;
    }
    // Right → (2,3); perpendiculars Down → (3,2) and Up → (1,2).
    for cell in [(2, 3), (3, 2), (1, 2)] {
        assert!(within_sigma(landed[&cell], n, 1.0 / 3.0), "{landed:?}");
    }
    assert_eq!(landed.len(), 3);
}

/// Independent breadth-first search over non-hole tiles.
fn reachable(map: &Map) -> bool {
    let n = map.size;
    let mut seen = vec![vec![false; n]; n];
    let mut queue = VecDeque::from([map.start]);
    seen[map.start.0][map.start.1] = true;
    while let Some((r, c)) = queue.pop_front() {
        if (r, c) == map.goal {
            return true;
        }
        let steps: [(isize, isize); 4] = [(0, 1), (1, 0), (0, -1), (-1, 0)];
        for (dr, dc) in steps {
            let (nr, nc) = (r as isize + dr, c as isize + dc);
            if nr < 0 || nc < 0 || nr >= n as isize || nc >= n as isize {
                continue;
            }
            let (nr, nc) = (nr as usize, nc as usize);
            if !seen[nr][nc] && map.tile(nr, nc) != Tile::Hole {
                seen[nr][nc] = true;
                queue.push_back((nr, nc));
            }
        }
    }
    false
}

#[test]
fn every_generated_map_has_a_path() {
    for (size, p) in [(4, 0.8), (4, 0.5), (6, 0.6), (8, 0.8), (3, 0.3)] {
        for seed in 0..2_000u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let map = Map::generate(size, p, &mut rng).unwrap();
            assert_ne!(map.start, map.goal);
            assert_eq!(map.tile(map.start.0, map.start.1), Tile::Frozen);
            assert_eq!(map.tile(map.goal.0, map.goal.1), Tile::Goal);
            let goals = map.tiles.iter().filter(|t| **t == Tile::Goal).count();
            assert_eq!(goals, 1);
            assert!(reachable(&map), "size {size} p {p} seed {seed}");
        }
    }
}

#[test]
fn hole_density_follows_p_on_an_easy_board() {
    // With p = 0.9 on 8×8 nearly every draw is solvable, so the kept maps show ≈ 1 − p
    // holes among the 62 free tiles.
    let (mut holes, mut tiles) = (0usize, 0usize);
    for seed in 0..2_000u64 {
        let map = Map::generate(8, 0.9, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
        holes += map.tiles.iter().filter(|t| **t == Tile::Hole).count();
        tiles += 62;
    }
    let rate = holes as f64 / tiles as f64;
    assert!((rate - 0.1).abs() < 0.01, "hole rate {rate}");
}

#[test]
fn scripted_episode_reaches_the_goal() {
    let mut env = lake(FrozenLakeConfig::default(), &["P_O", "__O", "O_G"]);
    assert_eq!(env.observation(), "P_O\n__O\nO_G");
    let first = env
        .step("<think>down first</think><answer>Down</answer>")
        .unwrap();
    assert_eq!(first.observation, "__O\nP_O\nO_G");
    assert_eq!(
        (first.reward, first.terminated, first.truncated),
        (0.0, false, false)
    );
    assert!(first.info.action_is_valid && first.info.action_is_effective);
    let last = env.step("<answer>Right || Down || Right</answer>").unwrap();
    assert_eq!(last.observation, "__O\n__O\nO_√");
    assert_eq!(
        (last.reward, last.terminated, last.truncated),
        (1.0, true, false)
    );
    assert!(last.info.success);
    assert_eq!(
        env.step("<answer>Up</answer>"),
        Err(EnvError::EpisodeOver("FrozenLake"))
    );
}

#[test]
fn hole_ends_the_episode_without_reward() {
    let mut env = lake(FrozenLakeConfig::default(), &["P_O", "__O", "O_G"]);
    let step = env.step("<answer>Down||Down||Right</answer>").unwrap();
    assert_eq!(step.observation, "__O\n__O\nX_G");
    assert_eq!(
        (step.reward, step.terminated, step.info.success),
        (0.0, true, false)
    );
}

#[test]
fn bad_format_costs_the_penalty_and_does_not_move() {
    let mut env = lake(FrozenLakeConfig::default(), &["P_O", "__O", "O_G"]);
    let step = env.step("I go left").unwrap();
    assert_eq!(step.observation, "P_O\n__O\nO_G");
    assert_eq!(step.reward, -0.01);
    assert_eq!(step.info.format_penalty, -0.01);
    assert!(!step.info.action_is_valid && !step.info.action_is_effective);
    assert!(!step.done());
}

#[test]
fn action_budget_truncates_and_walls_are_ineffective() {
    let config = FrozenLakeConfig {
        max_actions: 3,
        ..FrozenLakeConfig::default()
    };
    let mut env = lake(config, &["P_O", "__O", "O_G"]);
    let step = env.step("<answer>Left || Up</answer>").unwrap();
    assert!(!step.info.action_is_effective && !step.done());
    let step = env.step("<answer>up||left||up</answer>").unwrap();
    assert_eq!((step.terminated, step.truncated), (false, true));
    assert_eq!(step.reward, 0.0);
}

#[test]
fn reset_is_deterministic_per_seed() {
    let config = FrozenLakeConfig::default();
    let (mut a, mut b) = (config.build().unwrap(), config.build().unwrap());
    assert_eq!(
        b.step("<answer>Up</answer>"),
        Err(EnvError::NotReset("FrozenLake"))
    );
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..50 {
        let ra = a.reset(seed).unwrap();
        assert_eq!(ra, b.reset(seed).unwrap());
        assert_eq!(ra.observation.chars().filter(|c| *c == 'P').count(), 1);
        distinct.insert(ra.observation);
    }
    assert!(distinct.len() > 40, "seeds give different maps");
}

#[test]
fn bad_configs_are_refused() {
    let bad = [
        FrozenLakeConfig {
            size: 0,
            ..Default::default()
        },
        FrozenLakeConfig {
            size: 1,
            ..Default::default()
        },
        FrozenLakeConfig {
            p: 0.0,
            ..Default::default()
        },
        FrozenLakeConfig {
            p: 1.5,
            ..Default::default()
        },
        FrozenLakeConfig {
            p: f64::NAN,
            ..Default::default()
        },
        FrozenLakeConfig {
            max_actions_per_turn: 0,
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
fn frame_is_one_tile_per_cell() {
    let env = lake(FrozenLakeConfig::default(), &["P_O", "__O", "O_G"]);
    let frame = env.render_frame().unwrap();
    let side = 3 * crate::render::TILE_PX;
    assert_eq!((frame.width, frame.height), (side, side));
}

/// RAGEN's `coord` and `grid_coord` texts, written out by hand from its
/// `format_coordinate_render` for this board and these moves.
#[test]
fn coordinate_observations_follow_ragen() {
    let config = |observation_format| FrozenLakeConfig {
        observation_format,
        ..FrozenLakeConfig::default()
    };
    let rows = ["P_O", "__O", "O_G"];
    let mut env = lake(config(ObservationFormat::Coord), &rows);
    assert_eq!(
        env.observation(),
        "Board size: 3 rows x 3 cols (zero-indexed).\nStart: (0, 0)\nGoal: (2, 2)\n\
         Player: (0, 0)\nHoles: (0, 2), (1, 2), (2, 0)"
    );
    let step = env.step("<answer>Down || Right</answer>").unwrap();
    assert!(step.observation.contains("\nStart: (0, 0)\n"));
    assert!(step.observation.contains("\nPlayer: (1, 1)\n"));
    let step = env.step("<answer>Right</answer>").unwrap();
    assert!(step.terminated);
    assert!(
        step.observation
            .contains("\nPlayer in hole: (1, 2)\nHoles: "),
        "{}",
        step.observation
    );
    let mut env = lake(config(ObservationFormat::Coord), &rows);
    let step = env.step("<answer>Down || Right || Down || Right</answer>");
    assert!(step
        .unwrap()
        .observation
        .contains("\nPlayer on goal: (2, 2)\n"));
    let env = lake(config(ObservationFormat::GridCoord), &["P_", "_G"]);
    assert_eq!(
        env.observation(),
        "Coordinates: \nBoard size: 2 rows x 2 cols (zero-indexed).\nStart: (0, 0)\n\
         Goal: (1, 1)\nPlayer: (0, 0)\nGrid Map: \nP_\n_G"
    );
    let instruction = |format| super::render::instruction(&config(format));
    assert!(instruction(ObservationFormat::Coord).contains("Down adds 1 to the row"));
    assert!(!instruction(ObservationFormat::Coord).contains("Symbols"));
    assert!(instruction(ObservationFormat::Grid).contains("Symbols: P you"));
    assert!(instruction(ObservationFormat::TabbedGrid).contains("Symbols: P you"));
}

/// `TabbedGrid`: every tile as ` P \t` (RAGEN's first `GRID_LOOKUP`), written out by hand
/// as the player walks into a hole.
#[test]
fn tabbed_grid_writes_each_tile_with_spaces_and_a_tab() {
    let config = FrozenLakeConfig {
        observation_format: ObservationFormat::TabbedGrid,
        ..FrozenLakeConfig::default()
    };
    let mut env = lake(config, &["P_", "OG"]);
    assert_eq!(env.observation(), " P \t _ \t\n O \t G \t");
    let step = env.step("<answer>Down</answer>").unwrap();
    assert_eq!(step.observation, " _ \t _ \t\n X \t G \t");
}

/// `CoordRelative`: the coordinates, then the goal's offset and the neighbouring tiles,
/// written out by hand for this board as the player moves.
#[test]
fn relative_observations_say_where_the_goal_lies_and_what_is_next() {
    let config = FrozenLakeConfig {
        observation_format: ObservationFormat::CoordRelative,
        ..FrozenLakeConfig::default()
    };
    let mut env = lake(config.clone(), &["P_O", "__O", "O_G"]);
    assert_eq!(
        env.observation(),
        "Board size: 3 rows x 3 cols (zero-indexed).\nStart: (0, 0)\nGoal: (2, 2)\n\
         Player: (0, 0)\nHoles: (0, 2), (1, 2), (2, 0)\n\
         The goal is 2 rows down and 2 columns right.\n\
         Next to you: Left: wall, Down: frozen, Right: frozen, Up: wall."
    );
    let step = env.step("<answer>Down || Right</answer>").unwrap();
    assert!(step.observation.ends_with(
        "The goal is 1 row down and 1 column right.\n\
         Next to you: Left: frozen, Down: frozen, Right: hole, Up: frozen."
    ));
    let step = env.step("<answer>Down</answer>").unwrap();
    assert!(step.observation.ends_with(
        "The goal is 1 column right.\nNext to you: Left: hole, Down: wall, Right: goal, Up: frozen."
    ));
    let env = lake(config.clone(), &["G_", "_P"]);
    assert!(env
        .observation()
        .contains("\nThe goal is 1 row up and 1 column left.\n"));
    let step = lake(config.clone(), &["PG", "__"]).step("<answer>Right</answer>");
    assert!(step
        .unwrap()
        .observation
        .contains("\nYou are on the goal.\n"));
    let instruction = super::render::instruction(&config);
    assert!(instruction.contains("Down adds 1 to the row"));
}

#[test]
fn one_action_turns_ask_for_one_action_and_take_the_first() {
    let config = FrozenLakeConfig {
        max_actions_per_turn: 1,
        ..FrozenLakeConfig::default()
    };
    let instruction = super::render::instruction(&config);
    assert!(instruction.contains("Answer with one action, for example <answer>Left</answer>."));
    assert!(!instruction.contains("||"), "{instruction}");
    assert!(super::render::instruction(&FrozenLakeConfig::default())
        .contains("Answer with up to 5 actions separated by ||"));
    let mut env = lake(config, &["P_O", "__O", "O_G"]);
    let step = env.step("<answer>Down || Down</answer>").unwrap();
    assert_eq!(step.observation, "__O\nP_O\nO_G");
}
