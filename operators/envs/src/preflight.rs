//! Pre-flight: every env server of a pipeline (`Process` and `Remote` entries) started and
//! greeted before any model loads, so a wrong command or an address nobody answers costs
//! seconds, not a model load, and writes nothing. `roll-flow run` holds the servers for the
//! whole run (the env manager's envs join them); `roll-flow validate --handshake` greets
//! them and lets them go.

use crate::config::EnvConfig;
use crate::env::Env;

/// One instance of each server entry, keeping its servers up while held.
pub struct HeldServers {
    pub envs: Vec<(String, Box<dyn Env>)>,
}

impl EnvConfig {
    /// Whether the env is served by another program (started by roll-flow or remote).
    pub fn is_server(&self) -> bool {
        matches!(self, EnvConfig::Process(_) | EnvConfig::Remote(_))
    }
}

/// Starts and greets the servers of `entries` (`envs:` name, env), in order; the first
/// that fails is the error, naming its entry.
pub fn start_servers<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a EnvConfig)>,
) -> Result<HeldServers, String> {
    let mut envs = Vec::new();
    for (tag, config) in entries {
        if config.is_server() {
            let env = config
                .build()
                .map_err(|e| format!("env set `{tag}`: {e}"))?;
            envs.push((tag.to_string(), env));
        }
    }
    Ok(HeldServers { envs })
}
