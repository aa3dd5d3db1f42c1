//! `roll-flow validate FILE... [--set KEY=VALUE ...] [--handshake] [--memory]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use roll_flow::envs::preflight::start_servers;
use roll_flow::operators::memory_estimate::{estimate_here, gib};

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Pipeline files to check.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// `key=value` overrides, applied as `roll-flow run --set` would.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Also start every env server (`Process` and `Remote` entries), check its handshake,
    /// and stop it.
    #[arg(long)]
    handshake: bool,
    /// Also print the least memory the run holds, part by part (what `run` checks against
    /// the machine's available memory).
    #[arg(long)]
    memory: bool,
}

pub fn validate(args: &ValidateArgs) -> ExitCode {
    let mut failed = 0;
    for file in &args.files {
        match super::diagnostics::load_valid(file, &args.set) {
            Some((loaded, graph)) => {
                if args.handshake {
                    let envs = loaded.pipeline.envs.iter();
                    match start_servers(envs.map(|(tag, set)| (tag, &set.env))) {
                        Ok(held) => {
                            for (tag, env) in &held.envs {
                                println!("handshake ok: env set `{tag}` serves {}", env.name());
                            }
                        }
                        Err(e) => {
                            eprintln!("error: {}: {e}", file.display());
                            failed += 1;
                            continue;
                        }
                    }
                }
                if args.memory {
                    let (estimate, cores) = estimate_here(&loaded.pipeline, 1);
                    println!(
                        "memory: at least {} on {cores} cores\n{}",
                        gib(estimate.floor()),
                        estimate.breakdown()
                    );
                }
                let edges: usize = graph.nodes.iter().map(|n| n.outputs.len()).sum();
                println!(
                    "ok: {} ({} nodes, {edges} edges)",
                    file.display(),
                    loaded.pipeline.nodes.len()
                );
            }
            None => failed += 1,
        }
    }
    if failed > 0 {
        eprintln!(
            "{failed} of {} pipeline files are invalid",
            args.files.len()
        );
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
