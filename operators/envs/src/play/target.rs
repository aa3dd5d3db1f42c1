//! What `roll-flow play SPEC` plays: SPEC is an env spec (`FrozenLake(size: 4)`), a file
//! holding one, or a pipeline file whose `envs:` entry is picked with `--env NAME` (the
//! entry's `max_turns` and fixed `seed` then apply).

use std::path::Path;

use serde::Deserialize;

use roll_flow_engine::spec::locate::first_identifier;
use roll_flow_engine::spec::OrderedMap;
use roll_flow_engine::EnvSet;

use crate::config::{ron_options, EnvConfig};
use crate::error::EnvError;

/// A resolved play target.
#[derive(Clone, Debug, PartialEq)]
pub struct PlayTarget {
    pub config: EnvConfig,
    /// The env set's turn limit, when picked from a pipeline.
    pub max_turns: Option<usize>,
    /// The env set's fixed seed, when picked from a pipeline.
    pub seed: Option<u64>,
}

/// The part of a pipeline file `play` needs; every other field is skipped.
#[derive(Deserialize)]
#[serde(rename = "Pipeline")]
struct PipelineEnvs {
    #[serde(default)]
    envs: OrderedMap<EnvSet<EnvConfig>>,
}

/// Resolves `spec` (text or a file path) and the optional `--env` name.
pub fn resolve(spec: &str, env: Option<&str>) -> Result<PlayTarget, EnvError> {
    let path = Path::new(spec);
    let (text, origin) = if path.is_file() {
        let mut text = std::fs::read_to_string(path)
            .map_err(|e| EnvError::Spec(format!("{}: {e}", path.display())))?;
        // A UTF-8 byte-order mark some editors write is no part of the RON text.
        if text.starts_with('\u{feff}') {
            text.drain(..'\u{feff}'.len_utf8());
        }
        (text, format!("{}", path.display()))
    } else {
        (spec.to_string(), "the env spec".to_string())
    };
    if first_identifier(&text) == Some("Pipeline") {
        return from_pipeline(&text, &origin, env);
    }
    let config = EnvConfig::parse(&text).map_err(|e| match (e, path.is_file()) {
        (EnvError::Spec(message), true) => EnvError::Spec(format!("{origin}: {message}")),
        // Meant as a file: say so, not what the RON parser makes of a path.
        (_, false) if spec.contains('/') || spec.ends_with(".ron") || path.exists() => {
            let what = match path.exists() {
                true => "is a folder, not a file",
                false => "no such file",
            };
            EnvError::Spec(format!(
                "{spec}: {what}; SPEC is a file holding an env spec or a pipeline, or an env \
                 spec itself, e.g. `FrozenLake(size: 4)`"
            ))
        }
        (e, _) => e,
    })?;
    if let Some(name) = env {
        return Err(EnvError::Spec(format!(
            "--env {name} picks an entry of a pipeline file, but {origin} is a single env spec"
        )));
    }
    Ok(PlayTarget {
        config,
        max_turns: None,
        seed: None,
    })
}

fn from_pipeline(text: &str, origin: &str, env: Option<&str>) -> Result<PlayTarget, EnvError> {
    let pipeline: PipelineEnvs = ron_options()
        .from_str(text)
        .map_err(|e| EnvError::Spec(format!("{origin}: {e}")))?; // ron's error: line:col + what
    let names: Vec<&str> = pipeline.envs.names().collect();
    let name = match (env, names.as_slice()) {
        (Some(name), _) => name,
        (None, [only]) => only,
        (None, _) => {
            return Err(EnvError::Spec(format!(
                "{origin} has envs {}; pick one with --env NAME",
                quoted(&names)
            )))
        }
    };
    let set = pipeline.envs.get(name).ok_or_else(|| {
        EnvError::Spec(format!(
            "{origin} has no env `{name}`; it has {}",
            quoted(&names)
        ))
    })?;
    Ok(PlayTarget {
        config: set.env.clone(),
        max_turns: set.max_turns,
        seed: set.seed,
    })
}

fn quoted(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}
