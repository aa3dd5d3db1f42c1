//! Env throughput, in one run: FrozenLake steps/s (typed and full text steps), FrozenLake
//! map generation/s, Sokoban level generation/s (6×6/1 box and 8×8/2 boxes).
//!
//! `cargo bench -p roll-flow-envs --bench envs` (release profile, one thread). Each
//! figure is the median of 5 timed rounds of about 0.4 s. Prints a markdown table; the
//! latest one is in bench/README.md next to the peers' figures from docs/REFERENCE.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roll_flow_envs::frozen_lake::{Action, FrozenLakeConfig, Map};
use roll_flow_envs::sokoban::{generate::generate, SokobanConfig};
use roll_flow_envs::Env;

const ROUND: Duration = Duration::from_millis(400);
const ROUNDS: usize = 5;

/// Median rate (operations per second) of `op`, which runs a batch and returns its size.
fn rate(mut op: impl FnMut() -> u64) -> f64 {
    op(); // warm-up
    let mut rates: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let mut done = 0u64;
            while start.elapsed() < ROUND {
                done += op();
            }
            done as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[ROUNDS / 2]
}

fn frozen_lake_typed_steps() -> f64 {
    let config = FrozenLakeConfig {
        slippery: true,
        max_actions: usize::MAX,
        ..FrozenLakeConfig::default()
    };
    let mut env = config.build().unwrap();
    env.reset(0).unwrap();
    let actions = [Action::Left, Action::Down, Action::Right, Action::Up];
    let mut i = 0usize;
    rate(|| {
        for _ in 0..10_000 {
            i += 1;
            let (_, terminated, _) = env.step_action(black_box(actions[i % 4]));
            if terminated {
                env.restart();
            }
        }
        10_000
    })
}

fn frozen_lake_text_steps() -> f64 {
    let config = FrozenLakeConfig {
        slippery: true,
        max_actions: usize::MAX,
        ..FrozenLakeConfig::default()
    };
    let mut env = config.build().unwrap();
    env.reset(0).unwrap();
    let texts = [
        "<answer>Left</answer>",
        "<answer>Down</answer>",
        "<answer>Right</answer>",
    ];
    let mut i = 0usize;
    rate(|| {
        for _ in 0..1_000 {
            i += 1;
            let step = env.step(black_box(texts[i % 3])).unwrap();
            if step.done() {
                env.restart();
            }
            black_box(step.observation);
        }
        1_000
    })
}

fn frozen_lake_maps() -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    rate(|| {
        for _ in 0..1_000 {
            black_box(Map::generate(4, 0.8, &mut rng).unwrap());
        }
        1_000
    })
}

fn frozen_lake_resets() -> f64 {
    let mut env = FrozenLakeConfig::default().build().unwrap();
    let mut seed = 0;
    rate(|| {
        for _ in 0..1_000 {
            seed += 1;
            black_box(env.reset(seed).unwrap());
        }
        1_000
    })
}

fn sokoban_rooms(config: SokobanConfig) -> f64 {
    let params = config.gen_params();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    rate(|| {
        for _ in 0..20 {
            black_box(generate(&params, &mut rng).unwrap());
        }
        20
    })
}

fn main() {
    let simple = SokobanConfig::default();
    let larger = SokobanConfig::larger();
    let deep = |c: SokobanConfig| SokobanConfig {
        search_depth: 300,
        ..c
    };
    let rows: Vec<(&str, f64, &str)> = vec![
        (
            "FrozenLake 4×4 slippery, typed steps",
            frozen_lake_typed_steps(),
            "steps/s",
        ),
        (
            "FrozenLake 4×4 slippery, text steps (parse + step + render)",
            frozen_lake_text_steps(),
            "steps/s",
        ),
        (
            "FrozenLake 4×4 random map generation (p = 0.8)",
            frozen_lake_maps(),
            "maps/s",
        ),
        (
            "FrozenLake reset (map + text + instruction)",
            frozen_lake_resets(),
            "resets/s",
        ),
        (
            "Sokoban 6×6, 1 box, search_depth 30",
            sokoban_rooms(simple.clone()),
            "rooms/s",
        ),
        (
            "Sokoban 6×6, 1 box, search_depth 300",
            sokoban_rooms(deep(simple)),
            "rooms/s",
        ),
        (
            "Sokoban 8×8, 2 boxes, search_depth 30",
            sokoban_rooms(larger.clone()),
            "rooms/s",
        ),
        (
            "Sokoban 8×8, 2 boxes, search_depth 300",
            sokoban_rooms(deep(larger)),
            "rooms/s",
        ),
    ];
    println!("| what | roll-flow | unit |\n|---|---:|---|");
    for (what, value, unit) in rows {
        println!("| {what} | {value:.0} | {unit} |");
    }
}
