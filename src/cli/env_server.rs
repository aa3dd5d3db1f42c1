//! `roll-flow env-server SPEC`: serves a built-in env over the env-server protocol on
//! stdin/stdout (docs/ENV_PROTOCOL.md), for `env: Process(command: ["roll-flow",
//! "env-server", "FrozenLake(size: 4)"])` and for other trainers; with `--listen ADDR`,
//! over the network as an OpenEnv server, for `env: Remote(url: ...)`. The behaviour
//! lives in `roll_flow::envs::env_server`.

use std::process::ExitCode;

use roll_flow::envs::env_server::{listen, serve};
use roll_flow::envs::play::resolve;

/// Serve an env over the env-server protocol.
#[derive(clap::Args, Debug, Clone)]
pub struct EnvServerArgs {
    /// An env spec in RON (`'FrozenLake(size: 4)'`), a file holding one, or a pipeline file.
    pub spec: String,
    /// Which `envs:` entry of a pipeline file to serve.
    #[arg(long)]
    pub env: Option<String>,
    /// Serve OpenEnv's HTTP + WebSocket protocol on this address (`0.0.0.0:8000`; port 0
    /// picks a free one) instead of stdin/stdout. The address bound is printed on stderr.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

/// Runs `roll-flow env-server`.
pub fn run(args: &EnvServerArgs) -> anyhow::Result<ExitCode> {
    let target = resolve(&args.spec, args.env.as_deref())?;
    if let Some(address) = &args.listen {
        listen(&target.config, address, |bound| {
            eprintln!("env-server: listening on http://{bound} (sessions at ws://{bound}/ws)");
        })
        .map_err(|e| anyhow::anyhow!("cannot serve on {address}: {e}"))?;
        return Ok(ExitCode::SUCCESS);
    }
    // Buffered: replies to requests that arrived together leave in one write.
    let output = std::io::BufWriter::new(std::io::stdout().lock());
    serve(&target.config, std::io::stdin().lock(), output)?;
    Ok(ExitCode::SUCCESS)
}
