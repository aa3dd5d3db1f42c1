//! [`EnvConfig`]: the `env:` value of a pipeline's `envs:` entries, as users write it:
//! `FrozenLake(size: 4, p: 0.8)`, `Sokoban(dim_room: (8, 8), num_boxes: 2)`, `Bandit()`,
//! `Math(operands: 3)`, `WebShop()`, or `Custom(name: "Maze", params: (...))` for a registered env.
//!
//! The variants wrap config structs, written without the inner parentheses; this needs
//! RON's `unwrap_variant_newtypes` extension, which [`ron_options`] enables and the
//! pipeline loader must enable too.

use roll_flow_engine::SettingProblem;
use serde::Deserialize;

use super::registry;
use crate::env::Env;
use crate::error::EnvError;

fn unit() -> ron::Value {
    ron::Value::Unit
}

/// A registered custom env and its parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomEnvConfig {
    /// The name it was registered under with `register_env`.
    pub name: String,
    /// Its parameters, handed to its factory as a RON value. Default `()`.
    #[serde(default = "unit")]
    pub params: ron::Value,
}

/// Lists the built-in envs, one line each: `Variant(path::ToConfig)`, whose config has
/// `validate()` and `build()`; the list becomes [`EnvConfig`] with a `Custom` variant for
/// envs registered at run time.
macro_rules! env_registry {
    ($($(#[$doc:meta])* $variant:ident($config:ty),)*) => {
        /// One environment and its parameters. (Named `env` for serde, so an unknown variant
        /// reads "unknown env `FrozenLak`".)
        #[derive(Clone, Debug, PartialEq, Deserialize)]
        #[serde(rename = "env")]
        pub enum EnvConfig {
            $($(#[$doc])* $variant(#[serde(default)] $config),)*
            /// A user env registered with `register_env` (or `Run::env`).
            Custom(CustomEnvConfig),
        }

        impl EnvConfig {
            /// The variant name as written in RON (the custom name for `Custom`).
            pub fn name(&self) -> &str {
                match self {
                    $(EnvConfig::$variant(_) => stringify!($variant),)*
                    EnvConfig::Custom(custom) => &custom.name,
                }
            }

            /// Checks the parameters without building an env, as `roll-flow validate`
            /// does. A `Custom` env's parameters are its factory's to check when the run
            /// builds it.
            pub fn validate(&self) -> Result<(), EnvError> {
                match self {
                    $(EnvConfig::$variant(c) => c.validate(),)*
                    EnvConfig::Custom(_) => Ok(()),
                }
            }

            /// Validates the parameters and builds a fresh env (call `reset` before `step`).
            pub fn build(&self) -> Result<Box<dyn Env>, EnvError> {
                Ok(match self {
                    $(EnvConfig::$variant(c) => Box::new(c.build()?),)*
                    EnvConfig::Custom(c) => registry::build_custom(&c.name, &c.params)?,
                })
            }
        }
    };
}

env_registry! {
    /// FrozenLake: `FrozenLake(size: 4, p: 0.8, slippery: false)`.
    FrozenLake(crate::frozen_lake::config::FrozenLakeConfig),
    /// Sokoban: `Sokoban(dim_room: (6, 6), num_boxes: 1, search_depth: 30)`.
    Sokoban(crate::sokoban::SokobanConfig),
    /// Two-armed bandit: `Bandit()`.
    Bandit(crate::bandit::BanditConfig),
    /// Multi-turn arithmetic: `Math(operands: 3, max_operand: 20, max_turns: 5)`.
    Math(crate::math::MathConfig),
    /// WebShop: `WebShop(catalog: Generated(products: 1000, seed: 0), max_turns: 15)`.
    WebShop(crate::webshop::WebShopConfig),
    /// An env server roll-flow starts: `Process(command: ["python3", "my_env.py"])`.
    Process(crate::process::ProcessEnvConfig),
    /// An env served over the network, OpenEnv's session protocol:
    /// `Remote(url: "http://10.0.0.2:8000")`.
    Remote(crate::remote::RemoteEnvConfig),
}

/// RON options for env specs: newtype variants may omit their inner parentheses.
pub use roll_flow_engine::spec::ron_options;

impl EnvConfig {
    /// Parses an env spec such as `FrozenLake(size: 4)`.
    pub fn parse(spec: &str) -> Result<EnvConfig, EnvError> {
        ron_options()
            .from_str(spec)
            .map_err(|e| EnvError::Spec(format!("{e} in `{}`", spec.trim())))
    }

    /// [`EnvConfig::validate`]'s problem for the pipeline validator, at the offending field.
    pub fn setting_problems(&self) -> Vec<SettingProblem> {
        let Err(e) = self.validate() else {
            return Vec::new();
        };
        let field = match &e {
            EnvError::InvalidConfig { field, .. } => vec![field.to_string()],
            _ => Vec::new(),
        };
        vec![SettingProblem {
            field,
            message: e.to_string(),
            help: None,
        }]
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
