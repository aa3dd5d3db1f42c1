//! gymnasium through the adapter (`python -m roll_flow_env.gymnasium`), through the
//! binary: a slippery FrozenLake episode played by `roll-flow play` over the protocol
//! visits the same cells with the same rewards and ends as gymnasium itself does when
//! driven directly with the same seed and actions. Needs `gymnasium` in the tests' Python
//! (`./test.sh` installs it; `common::python`); the adapter comes from `python/` on
//! PYTHONPATH.

mod common;

use std::process::Command;

use common::{assert_ok, play_script};

const ACTIONS: [&str; 8] = [
    "Right", "Down", "Right", "Down", "Down", "Right", "Left", "Up",
];
const SEED: u64 = 5;

/// gymnasium driven directly: (cell, reward, terminated, truncated) per step.
const DIRECT: &str = r#"
import json, sys, gymnasium
env = gymnasium.make("FrozenLake-v1", render_mode="ansi")
env.reset(seed=int(sys.argv[1]))
names = ["Left", "Down", "Right", "Up"]
for name in sys.argv[2:]:
    cell, reward, terminated, truncated, _ = env.step(names.index(name))
    print(json.dumps([int(cell), float(reward), terminated, truncated]))
    if terminated or truncated:
        break
"#;

/// The cell of the `[highlighted]` character in an adapter observation.
fn highlighted_cell(obs: &str) -> i64 {
    let rows: Vec<&str> = obs.lines().filter(|l| !l.starts_with("  (")).collect();
    for (r, row) in rows.iter().enumerate() {
        if let Some(c) = row.find('[') {
            return (r * 4 + c) as i64;
        }
    }
    panic!("no highlighted cell in {obs:?}")
}

#[test]
fn a_gymnasium_episode_through_the_protocol_equals_gymnasium_driven_directly() {
    let python = common::python_with(&[("gymnasium", "gymnasium")]);
    let spec = format!(
        "Process(command: [{python:?}, \"-m\", \"roll_flow_env.gymnasium\", \"FrozenLake-v1\"])"
    );
    let script: String = ACTIONS
        .iter()
        .map(|a| format!("<answer>{a}</answer>\n"))
        .collect();
    let out = play_script(&spec, &SEED.to_string(), &script);
    assert_ok(&out);
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(highlighted_cell(lines[0]["obs"].as_str().unwrap()), 0);
    let ours: Vec<(i64, f64, bool, bool)> = lines[1..]
        .iter()
        .map(|l| {
            (
                highlighted_cell(l["obs"].as_str().unwrap()),
                l["reward"].as_f64().unwrap(),
                l["terminated"].as_bool().unwrap(),
                l["truncated"].as_bool().unwrap(),
            )
        })
        .collect();

    let direct = Command::new(&python)
        .args(["-c", DIRECT, &SEED.to_string()])
        .args(ACTIONS)
        .output()
        .unwrap();
    assert_ok(&direct);
    let theirs: Vec<(i64, f64, bool, bool)> = String::from_utf8(direct.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ours, theirs);
    assert!(
        theirs.len() >= 2,
        "the episode is long enough to compare: {theirs:?}"
    );
    let moved = theirs.iter().any(|t| t.0 != 0);
    assert!(moved, "the slippery lake moved the agent: {theirs:?}");
}
