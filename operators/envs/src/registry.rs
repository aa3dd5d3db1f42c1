//! Custom envs: implement [`Env`], then register a factory under one name.
//!
//! ```text
//! roll_flow_envs::register_env("Maze", |params| {
//!     let config: MazeConfig = roll_flow_envs::registry::params("Maze", params)?;
//!     Ok(Box::new(Maze::new(config)))
//! });
//! ```
//! and name it in a pipeline: `env: Custom(name: "Maze", params: (size: 7))`. The
//! built-in envs are variants of [`EnvConfig`](super::EnvConfig) and need no registration.
//! The registry is process-wide, so registering once in `main` (before the pipeline is
//! built) makes the env available on every worker thread.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde::de::DeserializeOwned;

use crate::env::Env;

use crate::error::EnvError;

/// Builds a custom env from its RON `params` value.
pub type EnvFactory = fn(&ron::Value) -> Result<Box<dyn Env>, EnvError>;

static REGISTRY: RwLock<BTreeMap<String, EnvFactory>> = RwLock::new(BTreeMap::new());

/// Registers (or replaces) the custom env `name`.
pub fn register_env(name: &str, factory: EnvFactory) {
    let mut registry = REGISTRY
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.insert(name.to_string(), factory);
}

/// The registered custom env names, sorted.
pub fn registered_names() -> Vec<String> {
    let registry = REGISTRY
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.keys().cloned().collect()
}

/// Builds the custom env `name` from `params`.
pub fn build_custom(name: &str, params: &ron::Value) -> Result<Box<dyn Env>, EnvError> {
    let factory = {
        let registry = REGISTRY
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        registry.get(name).copied()
    };
    match factory {
        Some(factory) => factory(params),
        None => Err(EnvError::UnknownCustom {
            name: name.to_string(),
            known: match registered_names().join(", ") {
                known if known.is_empty() => "none".to_string(),
                known => known,
            },
        }),
    }
}

/// Converts a custom env's `params` into its typed config, with a clear error.
pub fn params<T: DeserializeOwned>(name: &str, params: &ron::Value) -> Result<T, EnvError> {
    params
        .clone()
        .into_rust()
        .map_err(|e| EnvError::CustomParams {
            name: name.to_string(),
            reason: e.to_string(),
        })
}
