//! `roll-flow play SPEC [--seed S] [--env NAME] [--record DIR]`: play one episode of an env
//! by hand (stdin is a terminal) or from a script (one action per line in, JSON lines out).
//! `roll-flow play --policy RUN_DIR [--checkpoint N] [--env NAME] [--seed S] [--record DIR]`: watch a run's trained policy play
//! one episode, turn by turn, with its raw replies and token log-probs.
//! All behaviour lives in `roll_flow::envs::play` and
//! `roll_flow::operators::watch`; this file only wires arguments to them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use roll_flow::engine::atomic_file::write_atomic;
use roll_flow::envs::play::{play_interactive, play_scripted, resolve, PlayOptions};
use roll_flow::envs::EnvConfig;
use roll_flow::operators::rollout::episode_text::{episode_text, TextOptions};
use roll_flow::operators::watch::{watch_policy, WatchOptions};

/// Play an env locally: interactive in a terminal, JSON lines when stdin is piped.
#[derive(clap::Args, Debug, Clone)]
pub struct PlayArgs {
    /// An env spec in RON (`'FrozenLake(size: 4)'`), a file holding one, or a pipeline file.
    #[arg(required_unless_present = "policy", conflicts_with = "policy")]
    pub spec: Option<String>,
    /// Let a run's trained policy play instead of you (reads RUN_DIR/pipeline.ron and a
    /// checkpoint), greedily, printing each turn with the reply's token log-probs.
    #[arg(long, value_name = "RUN_DIR")]
    pub policy: Option<PathBuf>,
    /// With --policy: the checkpoint (steps completed) to load; default the newest.
    #[arg(long, value_name = "N")]
    pub checkpoint: Option<u64>,
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
pub fn run(args: &PlayArgs) -> anyhow::Result<ExitCode> {
    // Checked here: clap skips `requires = "policy"` when SPEC, which conflicts with
    // --policy, is given.
    if args.checkpoint.is_some() && args.policy.is_none() {
        eprintln!("error: --checkpoint needs --policy RUN_DIR (it picks the policy's weights)");
        return Ok(ExitCode::from(2));
    }
    if let Some(dir) = &args.record {
        // Before the episode: a folder that cannot be made would lose it at the end.
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--record {}: cannot make the folder", dir.display()))?;
    }
    let spec = match (&args.policy, &args.spec) {
        (Some(run_dir), _) => return watch(args, run_dir),
        (None, Some(spec)) => spec,
        (None, None) => unreachable!("clap requires SPEC unless --policy"),
    };
    let target = resolve(spec, args.env.as_deref())?;
    let options = PlayOptions {
        seed: args.seed.or(target.seed).unwrap_or(0),
        max_turns: target.max_turns,
        record: args.record.clone(),
    };
    play_env(&target.config, &options)?;
    Ok(ExitCode::SUCCESS)
}

/// `--policy RUN_DIR`: the run's pipeline and checkpoint play one episode.
fn watch(args: &PlayArgs, run_dir: &Path) -> anyhow::Result<ExitCode> {
    let Some((loaded, _)) = super::diagnostics::load_run(run_dir) else {
        return Ok(ExitCode::FAILURE);
    };
    let options = WatchOptions {
        checkpoint: args.checkpoint,
        env: args.env.clone(),
        seed: args.seed,
        record: args.record.is_some(),
    };
    let watched = watch_policy(&loaded.pipeline, &options).map_err(anyhow::Error::msg)?;
    println!(
        "policy `{}` (version {}) from {}, greedy\n",
        watched.policy,
        watched.version,
        watched.checkpoint.display()
    );
    let text_options = TextOptions {
        token_logprobs: true,
    };
    let text = episode_text(&watched.episode, &watched.tokenizer, text_options);
    print!("{text}");
    if let Some(dir) = &args.record {
        let stem = format!(
            "{}_seed{}",
            watched.episode.slot.env_tag, watched.episode.slot.seed
        );
        if let Some(recording) = &watched.episode.recording {
            recording.write(dir, &stem)?;
        }
        let path = dir.join(format!("{stem}_chat.txt"));
        write_atomic(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("recorded into {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
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
