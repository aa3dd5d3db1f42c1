//! `roll-flow play SPEC [--seed S] [--env NAME] [--record DIR]`: play one episode of an env
//! by hand (stdin is a terminal) or from a script (one action per line in, JSON lines out).
//! All behaviour lives in `roll_flow_operators::envs::play`; this file only wires
//! arguments to it.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use roll_flow_operators::envs::play::{play_interactive, play_scripted, resolve, PlayOptions};
use roll_flow_operators::envs::EnvConfig;

/// Play an env locally: interactive in a terminal, JSON lines when stdin is piped.
#[derive(clap::Args, Debug, Clone)]
pub struct PlayArgs {
    /// An env spec in RON (`'FrozenLake(size: 4)'`), a file holding one, or a pipeline file.
    pub spec: String,
    /// Reset seed (default: the env set's fixed seed, else 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Which `envs:` entry of a pipeline file to play.
    #[arg(long)]
    pub env: Option<String>,
    /// Write the episode's PNG frames, GIF and transcript into this directory.
    #[arg(long)]
    pub record: Option<PathBuf>,
}

/// Runs `roll-flow play`.
pub fn run(args: &PlayArgs) -> anyhow::Result<()> {
    let target = resolve(&args.spec, args.env.as_deref())?;
    let options = PlayOptions {
        seed: args.seed.or(target.seed).unwrap_or(0),
        max_turns: target.max_turns,
        record: args.record.clone(),
    };
    play_env(&target.config, &options)
}

/// Plays `config` on this process's stdin/stdout (for callers that already hold an env
/// config, e.g. one picked from a loaded pipeline).
pub fn play_env(config: &EnvConfig, options: &PlayOptions) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    if stdin.is_terminal() {
        play_interactive(config, options, stdin.lock(), stdout.lock())
    } else {
        play_scripted(config, options, stdin.lock(), stdout.lock())
    }
    .with_context(|| format!("playing {}", config.name()))?;
    Ok(())
}
