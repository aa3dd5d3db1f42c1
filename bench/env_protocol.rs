//! Env-server protocol throughput: steps per second through `env: Process(...)` with a
//! null Python env (1 and 2 server processes), GEM's GuessTheNumber and `roll-flow
//! env-server FrozenLake`, and through `env: Remote(...)` (OpenEnv's WebSocket sessions)
//! with `roll-flow env-server --listen`, beside the native FrozenLake and GEM's own Python
//! loop, all in one sitting. 16 env threads step at once, as a rollout's env loops do.
//!
//! `cargo bench -p roll-flow-envs --bench env_protocol` (after `cargo build --release`,
//! which makes the `roll-flow` binary this runs as an env server; `ROLL_FLOW_BIN` overrides
//! its path). Figures: bench/README.md.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roll_flow_envs::process::ProcessEnvConfig;
use roll_flow_envs::remote::RemoteEnvConfig;
use roll_flow_envs::{Env, EnvConfig};

const THREADS: usize = 16;
const SECONDS: f64 = 3.0;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Steps per second of `THREADS` envs from `make`, each stepping `action` for `SECONDS`.
fn steps_per_s(make: &(dyn Fn() -> Box<dyn Env> + Sync), action: &str) -> f64 {
    let deadline = Instant::now() + Duration::from_secs_f64(SECONDS);
    let start = Instant::now();
    let total: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                scope.spawn(move || {
                    let mut env = make();
                    let mut steps = 0;
                    let mut seed = t as u64 * 1_000_000;
                    env.reset(seed).expect("reset");
                    while Instant::now() < deadline {
                        let result = env.step(action).expect("step");
                        steps += 1;
                        if result.done() {
                            seed += 1;
                            env.reset(seed).expect("reset");
                        }
                    }
                    steps
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

fn process(command: &[&str], processes: usize) -> ProcessEnvConfig {
    ProcessEnvConfig {
        command: command.iter().map(|s| s.to_string()).collect(),
        processes,
        ..ProcessEnvConfig::default()
    }
}

fn row(name: &str, value: f64, peer: Option<f64>) {
    match peer {
        Some(p) => println!(
            "{name:<50} {value:>10.0} steps/s  ({:.2}× the peer)",
            value / p
        ),
        None => println!("{name:<50} {value:>10.0} steps/s"),
    }
}

fn main() {
    let null = root().join("bench/env_protocol/null_env.py");
    let null = null.to_str().unwrap();
    let bin = std::env::var("ROLL_FLOW_BIN").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        format!("{target}/release/roll-flow")
    });
    let lake = "FrozenLake(size: 4, p: 0.8, slippery: false)";
    let native = EnvConfig::parse(lake).unwrap();
    let right = "<answer>Right</answer>";
    row(
        "native FrozenLake (in process)",
        steps_per_s(&|| native.build().unwrap(), right),
        None,
    );
    for processes in [1, 2] {
        let config = process(&["python3", null], processes);
        let name = format!("null Python env, {processes} process(es)");
        row(
            &name,
            steps_per_s(&|| Box::new(config.build().unwrap()), "a"),
            None,
        );
    }
    let served = process(&[&bin, "env-server", lake], 1);
    row(
        "roll-flow env-server FrozenLake, 1 process",
        steps_per_s(&|| Box::new(served.build().unwrap()), right),
        None,
    );
    let mut listening = Command::new(&bin)
        .args(["env-server", lake, "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("roll-flow env-server starts");
    let mut line = String::new();
    std::io::BufReader::new(listening.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the server prints its address")
        .to_string();
    let remote = RemoteEnvConfig {
        url,
        ..RemoteEnvConfig::default()
    };
    row(
        "roll-flow env-server --listen FrozenLake, Remote",
        steps_per_s(&|| Box::new(remote.build().unwrap()), right),
        None,
    );
    let _ = listening.kill();
    let _ = listening.wait();
    let gem_loop = Command::new("python3")
        .arg(root().join("bench/env_protocol/gem_loop.py"))
        .arg(SECONDS.to_string())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        });
    match gem_loop {
        Some(peer) => {
            row("GEM GuessTheNumber, GEM's own Python loop", peer, None);
            let gem = process(
                &[
                    "python3",
                    "-m",
                    "roll_flow_env.gem",
                    "game:GuessTheNumber-v0-easy",
                ],
                1,
            );
            std::env::set_var("PYTHONPATH", root().join("python"));
            row(
                "GEM GuessTheNumber through the protocol",
                steps_per_s(&|| Box::new(gem.build().unwrap()), "\\boxed{5}"),
                Some(peer),
            );
        }
        None => println!("GEM rows skipped: python3 cannot import gem (pip install gem-llm)"),
    }
}
